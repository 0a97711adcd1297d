"""report.html in a real browser: headless Chromium driven over the DevTools protocol.

Chromium is started with ``--remote-debugging-pipe`` (DevTools messages on file descriptors 3
and 4, NUL-separated JSON), so no extra Python package is needed. Checks: the page loads with
no console error, no exception and no dialog; every image decodes with a non-zero natural
size; the job named ``<script>alert(1)</script>`` shows as text; nothing is fetched from the
network. Without Chromium the test is skipped with the reason.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from report_study import INJECTED, make_study
from traincast.report import write_report

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--remote-debugging-pipe")
INSTALL = "apt-get install -y chromium chromium-driver"


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    if Path("/usr/bin/chromium").is_file():
        return "/usr/bin/chromium"
    pytest.skip(f"Chromium is not installed (Debian: `{INSTALL}`); the real-browser check of "
                "report.html did not run")


class DevTools:
    """A minimal Chrome DevTools Protocol client over Chromium's debugging pipe."""

    def __init__(self, binary: str, profile: Path) -> None:
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()

        def child_fds() -> None:  # the browser reads commands on fd 3, writes on fd 4
            a = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(res_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.log = profile / "chromium.log"
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}",
                                          "about:blank"], stdin=subprocess.DEVNULL,
                                         stdout=err, stderr=err, close_fds=False,
                                         preexec_fn=child_fds)
        os.close(cmd_r)
        os.close(res_w)
        self.out, self.inp = cmd_w, res_r
        self.buf = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.inp], [], [], max(left, 0))
            if not ready:
                raise TimeoutError("no answer from Chromium: " + self.log.read_text()[-2000:])
            chunk = os.read(self.inp, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe: " + self.log.read_text()[-2000:])
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None, timeout: float = 30.0) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.out, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        for ev in self.events:
            if ev.get("method") == method:
                return ev
        deadline = time.monotonic() + timeout
        while True:
            ev = self._read(deadline)
            self.events.append(ev)
            if ev.get("method") == method:
                return ev

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.out)
        os.close(self.inp)


def errors_in(events: list[dict[str, Any]]) -> list[str]:
    """Console errors, uncaught exceptions, error log entries and dialogs among the events."""
    out = []
    for ev in events:
        m, p = ev.get("method"), ev.get("params", {})
        if m == "Runtime.exceptionThrown":
            out.append(f"exception: {p.get('exceptionDetails', {}).get('text')}")
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append(f"console.{p['type']}: {[a.get('value') for a in p.get('args', [])]}")
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        elif m == "Page.javascriptDialogOpening":
            out.append(f"dialog: {p.get('message')}")
    return out


def test_report_renders_in_headless_chromium(tmp_path):
    binary = chromium_binary()
    study = make_study(tmp_path / "study")
    report = write_report(study)
    profile = tmp_path / "profile"
    profile.mkdir()
    browser = DevTools(binary, profile)
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget",
                               {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            browser.call(f"{domain}.enable", session=session)
        browser.call("Page.navigate", {"url": report.resolve().as_uri()}, session=session)
        browser.wait_for("Page.loadEventFired")

        def evaluate(expr: str) -> Any:
            res = browser.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                                    "awaitPromise": True}, session=session)
            assert "exceptionDetails" not in res, res
            return res["result"]["value"]

        sizes = evaluate("Promise.all([...document.images].map(i => i.decode().then("
                         "() => [i.naturalWidth, i.naturalHeight], () => [0, 0])))")
        text = evaluate("document.body.innerText")
        scripts = evaluate("document.querySelectorAll('script').length")
        figures = evaluate("document.querySelectorAll('figure').length")
        time.sleep(0.2)  # let late console messages arrive
        browser.call("Runtime.evaluate", {"expression": "1"}, session=session)
    finally:
        browser.close()
    assert errors_in(browser.events) == []
    assert len(sizes) == figures >= 7
    assert all(w > 0 and h > 0 for w, h in sizes), sizes
    assert INJECTED in text
    assert scripts == 0
    urls = [ev["params"]["request"]["url"] for ev in browser.events
            if ev.get("method") == "Network.requestWillBeSent"]
    assert urls and all(u.startswith(("file:", "data:")) for u in urls), urls
