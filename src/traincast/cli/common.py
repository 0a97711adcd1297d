"""Shared CLI pieces: the rich console, JSON output, number parsing and common options."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog

console = Console(emoji=False)  # user strings such as hf:llama: are not emoji codes
err_console = Console(stderr=True, emoji=False)
_STATE = {"quiet": False}

CatalogOpt = Annotated[list[Path] | None, typer.Option(
    "--catalog", help="TOML catalog file merged over the shipped one (repeatable).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")]
WorkloadOpt = Annotated[str, typer.Option(
    "--workload", help="Workload assumed for the jobs (with GPUs) whose trace names none (most "
    "public traces: Alibaba 2023, ElasticFlow, Philly, Helios): mix (default) = the bundled "
    "sample's zoo mix, one model per job drawn by md5(job_id) among those that fit its GPU's "
    "memory; a zoo model or workload tag for every such job; none = assume nothing (those "
    "jobs get no predicted time). The output says what was assumed for how many jobs; "
    "docs/traces.md.")]
ComputeOpt = Annotated[str, typer.Option(
    "--compute", help="How compute time is priced: auto (each GPU as its catalog entry allows: "
    "measured curves, else the shape-aware kernel model, else flat peaks), kernel, curves, or "
    "paper (the paper's flat peak x flop_efficiency for every GPU). docs/model.md.")]

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmgtp]?)(?:b|flops?)?\s*$",
                     re.IGNORECASE)


def parse_number(text: str, what: str) -> float:
    """``'4.1e9'``, ``'350M'``, ``'1.2GB'``, ``'8 TFLOP'`` -> float (decimal suffixes)."""
    m = _NUMBER.match(str(text))
    if not m and _NUMBER.match(str(text).strip().removeprefix("-")):
        raise TraincastError(f"{what}: must not be negative, got {text!r}")
    if not m:
        raise TraincastError(f"{what}: not a number: {text!r}",
                             hint="use a plain number, e-notation or a k/M/G/T suffix")
    return float(m.group(1)) * _SUFFIX[m.group(2).lower()]


def catalog_from(paths: list[Path] | None, compute: str = "auto") -> Catalog:
    """The shipped catalog with the user's ``--catalog`` files merged over it, pricing compute
    by ``--compute``."""
    return load_catalog(paths or [], compute=compute)


def set_quiet(quiet: bool) -> None:
    """``traincast --quiet``: no progress bars or notes on stderr."""
    _STATE["quiet"] = quiet


def is_quiet() -> bool:
    return _STATE["quiet"]


def progress(json_out: bool = False) -> Progress:
    """A rich progress bar on stderr; disabled with ``--quiet`` or ``--json``.

    Use as ``with progress(json_out) as bar: task = bar.add_task("ingest", total=n)``.
    """
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                    disable=json_out or _STATE["quiet"], transient=True)


def say_above(bar: Progress, task: TaskID) -> Callable[[str], None]:
    """``say(message)`` for a ``progress`` bar: the message printed dim above the bar (so a log
    of stderr keeps every step; a transient bar leaves nothing there) and shown as the task's
    description; nothing when the bar is disabled (``--quiet``, ``--json``)."""
    def say(message: str) -> None:
        if bar.disable:
            return
        bar.console.print(Text(f"· {message}", style="dim"), highlight=False)
        bar.update(task, description=Text(message[:60]))

    return say


def within(low: float, high: float | None = None) -> Callable[[Any], Any]:
    """A typer option callback: the value must lie in ``[low, high]`` (``high`` None: at least
    ``low``), else exit 2 naming the flag. Unlike typer's ``min``/``max`` it adds no range
    column to ``--help``, which pushes the help text of long flags into words cut with ``…``
    at 80 columns; the help says the range instead."""
    def check(value: Any) -> Any:
        if value is not None and (value < low or (high is not None and value > high)):
            want = f"from {low:g} to {high:g}" if high is not None else f"at least {low:g}"
            raise typer.BadParameter(f"must be {want}, got {value:g}")
        return value

    return check


def one_of(choices: Iterable[str]) -> str:
    """A choice list for ``--help``: ``'fp32, tf32, bf16 or fp16'`` (words rich can wrap, where
    ``fp32|tf32|...`` is one word it cuts with ``…`` at 80 columns)."""
    names = list(choices)
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)


def note(message: str, json_out: bool = False) -> None:
    """A remark for people on stderr (silent with ``--quiet`` or ``--json``)."""
    if not (json_out or _STATE["quiet"]):
        err_console.print(message, highlight=False)


def to_jsonable(obj: Any) -> Any:
    """numpy scalars/arrays and NaN -> plain JSON values (NaN -> null). Plain types are tested
    first by exact type: per-job outputs hold millions of values."""
    t = type(obj)
    if t is str or t is int or t is bool or obj is None:
        return obj
    if t is float:
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def check_output(path: Path | None, flag: str = "-o") -> None:
    """Fail before any work when the folder of an output file does not exist."""
    if path is not None and not path.parent.is_dir():
        raise TraincastError(f"{flag} {path}: no folder {path.parent}",
                             hint="create the folder first, or write the file elsewhere")


PRETTY_JSON_MAX_BYTES = 1_000_000
"""Larger JSON outputs (per-job rows of big traces) are printed compact: Python indents JSON
about 10× slower than it writes it compact."""


def print_json(obj: Any) -> None:
    """Print one JSON object on stdout (no rich markup): indented, or compact when it is over
    :data:`PRETTY_JSON_MAX_BYTES`."""
    data = to_jsonable(obj)
    text = json.dumps(data, separators=(",", ":"))
    if len(text) <= PRETTY_JSON_MAX_BYTES:
        text = json.dumps(data, indent=2)
    typer.echo(text)


def fmt_seconds(t: float) -> str:
    """Seconds for people: 789 µs, 45.6 ms, 1.23 s, 456 s; from 1,000 s on in minutes
    (16.7 min), hours (3.47 h) or days (145 d), never in e-notation."""
    if t is None or not math.isfinite(t):
        return "-"
    if t >= 1000:
        value, unit = ((t / 86400, "d") if t >= 86400 else (t / 3600, "h") if t >= 3600
                       else (t / 60, "min"))
        return f"{value:,.0f} {unit}" if value >= 1000 else f"{value:.3g} {unit}"
    if t >= 1:
        return f"{t:.3g} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3g} ms"
    return f"{t * 1e6:.3g} µs"


def fmt_bytes(b: float) -> str:
    """Bytes for people in decimal units (GB = 1e9)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(b) >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def print_assumed(info: dict[str, Any] | None) -> None:
    """One line saying which workload was assumed for how many jobs
    (:func:`traincast.trace.workload_assumption`), if any."""
    if not info:
        return
    from traincast.trace import MIX

    what = ("the bundled sample's workload mix (one zoo model per job, by job id: "
            + ", ".join(f"{k} {v:,}" for k, v in list(info["by_workload"].items())[:4])
            + (", ..." if len(info["by_workload"]) > 4 else "") + ")"
            if info["workload"] == MIX else info["workload"])
    console.print(Text(f"assumed workload for {info['jobs']:,} jobs whose trace names none: "
                       f"{what}; --workload NAME assumes one model, --workload none nothing "
                       "(docs/traces.md)", style="dim"))


def print_unpredicted(counts: dict[str, int]) -> None:
    """One line naming why jobs got no prediction (``traincast.resolve.REASONS``), if any."""
    if counts:
        console.print("[dim]not predicted: " + escape(", ".join(
            f"{n:,} ({reason})" for reason, n in counts.items())) + "[/dim]", highlight=False)
