"""A calibration measured while other programs held the cores is measured again, then refused
(or written with --force, saying so); validate shows progress and names disturbed cases."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

import traincast.calibration as cal  # noqa: E402
from traincast.calibration import bench  # noqa: E402
from traincast.cli import app  # noqa: E402
from traincast.hardware.catalog import load_catalog  # noqa: E402


@pytest.fixture()
def busy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every stage measures 52% contention; the CLI's --quick runs the tiny sizes."""
    calls: list[int] = []

    def contention(wait_start_s: float, elapsed_s: float, threads: int) -> float:
        calls.append(threads)
        return 0.52

    monkeypatch.setattr(bench, "contention", contention)
    monkeypatch.setitem(cal._PLAN, "quick", cal._PLAN["tiny"])
    return calls


def test_a_contended_calibration_is_retried_then_refused(tmp_path: Path, busy: list[int]) -> None:
    out = tmp_path / "local.toml"
    with pytest.raises(cal.ContendedCalibration, match="52% of the time") as err:
        cal.calibrate(out, tiny=True, device="cpu", threads=2, comm=False)
    assert not out.exists()
    # 10 stages: 8 on any device + fresh allocation (CPU) + thread scaling (CPU, > 1 thread),
    # each tried 1 + 2 times, and one more call for the whole run's figure
    stages = err.value.stages
    assert len(stages) == 10 and all(s["tries"] == cal.RETRIES + 1 for s in stages)
    assert len(busy) == 10 * (cal.RETRIES + 1) + 1


def test_one_thread_is_timed_by_cpu_time_and_not_refused(tmp_path: Path, busy: list[int]) -> None:
    out = tmp_path / "local.toml"
    cal.calibrate(out, tiny=True, device="cpu", threads=1, comm=False)
    assert out.exists()
    assert tomllib.loads(out.read_text())["calibration"]["local"]["stage_tries"] == [1] * 9
    # without the collectives measured, the links that stand in for them say so (predict does)
    cat = load_catalog([out])
    assert cat.link("local-allreduce").stand_in and cat.link("local-loopback").stand_in
    assert not cat.link("local-host").stand_in


def test_calibrate_cli_refuses_with_exit_2_and_force_writes_a_warning(
        tmp_path: Path, busy: list[int], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from traincast.cli import main

    out = tmp_path / "local.toml"
    args = ["calibrate", "-o", str(out), "--quick", "--threads", "2", "--no-comm"]
    monkeypatch.setattr(sys, "argv", ["traincast", *args])
    with pytest.raises(SystemExit) as exit_:
        main()  # the console script: a TraincastError is one line and exit 2
    assert exit_.value.code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert f"{out}: not written: other programs held the cores 52%" in " ".join(err.split())
    assert "--force" in err
    res = CliRunner().invoke(app, [*args, "--force", "--json"])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "# WARNING: written with --force" in text
    record = tomllib.loads(text)["calibration"]["local"]
    assert record["forced"] is True and len(record["disturbed_stages"]) == 10
    assert record["stage_runqueue_wait_fraction"] == [0.52] * 10


def test_validate_names_disturbed_cases_and_keeps_json_on_stdout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    v = importlib.import_module("traincast.validation")  # the package, not the function
    cat = tmp_path / "local.toml"
    cal.calibrate(cat, tiny=True, device="cpu", comm=False, threads=1)

    def measured(case, **kwargs):  # noqa: ANN001, ANN003, ANN202
        return {"times": [0.1, 0.1, 0.1], "wall": [0.2] * 3, "clock": "wall minus run-queue wait",
                "breakdown": None, "runqueue_wait_fraction": 0.3}

    monkeypatch.setattr(v, "measure_case", measured)
    monkeypatch.setattr(v, "QUICK_CASES", (v.Case("zoo:mobilenet-v2", "CNN", 2,
                                                  crop=((0, 2, 32), (0, 3, 32))),))
    res = CliRunner().invoke(app, ["validate", "--catalog", str(cat), "--quick", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)  # progress went to stderr only
    assert out["cases"][0]["disturbed"] is True
    assert out["disturbed"] == [{"model": "mobilenet-v2", "arch": "1w1g", "batch_size": 2,
                                 "runqueue_wait_fraction": 0.3}]
    assert "disturbed" in res.stderr and "1w1g" in res.stderr
    table = CliRunner().invoke(app, ["validate", "--catalog", str(cat), "--quick"])
    assert "disturbed: mobilenet-v2 1w1g b2: other programs held the cores 30%" in \
        " ".join(table.stdout.split())
