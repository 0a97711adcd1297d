"""Shared CLI pieces: the rich console, JSON output, number parsing and common options."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any

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

from traincast.bounds import BYTES_MAX, COUNT_MAX, FLOPS_MAX
from traincast.errors import TraincastError
from traincast.files import not_a_file, to_jsonable
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.units import fmt_pct, join_words, plural

console = Console(emoji=False)  # user strings such as hf:llama: are not emoji codes
err_console = Console(stderr=True, emoji=False)
_STATE = {"quiet": False}

CatalogOpt = Annotated[list[Path] | None, typer.Option(
    "--catalog", metavar="FILE",
    help="TOML catalog file merged over the shipped one (repeatable).")]
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

_SUFFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGtTpP]?)(i?)"
                     r"\s*(B|b|[fF][lL][oO][pP][sS]?)?\s*$")
_BINARY = {"k": 2.0**10, "M": 2.0**20, "G": 2.0**30, "T": 2.0**40, "P": 2.0**50}
"""Binary prefixes of a byte count (``KiB``, ``MiB``, ``GiB``, ``TiB``, ``PiB``: IEC 80000-13)."""
UNIT_WORDS: dict[str, str] = {"bytes": "B", "flops": "FLOP"}
"""The unit a number flag may end in: ``B`` after a byte count, ``FLOP`` (or ``FLOPs``, any
case) after a FLOP count (:func:`parse_number`)."""

MAX_FLOPS = FLOPS_MAX
"""The largest FLOPs per iteration a flag takes (``--flops``), as in a trace: 1e24."""
MAX_BYTES = BYTES_MAX
"""The largest bytes per iteration a flag takes (``--mem-bytes``, ``--weight-bytes``,
``--embedding-bytes``, ``--input-bytes``), as in a trace: 1e18 bytes = 1 EB."""
MAX_GPUS = COUNT_MAX
"""The largest GPU, worker or server count a flag takes (``--gpus``, ``--workers``, ...), as
in a trace: 1,000,000."""


def parse_number(text: str, what: str, high: float | None = None,
                 unit: str | None = None) -> float:
    """``'4.1e9'``, ``'350M'``, ``'1.2GB'``, ``'8 TFLOP'`` -> float (decimal suffixes k, M,
    G, T, P; ``K`` for kilo too, any case for G, T and P; ``m`` is refused: milli, or mega?;
    a byte count also takes binary ones, ``5GiB`` = 5 x 2^30).

    ``unit`` (``"bytes"`` or ``"flops"``): the unit word the number may end in
    (:data:`UNIT_WORDS`): ``B`` for bytes (``b``, bits, is refused: 8 times fewer), ``FLOP``
    for FLOPs; the other unit is refused. A negative (``-0`` is zero), infinite (``1e400``) or
    not-a-number value is a TraincastError naming ``what`` (the flag), and so is one above
    ``high`` when given."""
    m = _NUMBER.match(str(text))
    if not m and (neg := _NUMBER.match(str(text).strip().removeprefix("-"))):
        if float(neg.group(1)) == 0.0:  # -0 is zero, not negative
            try:
                return parse_number(neg.group(0), what, high, unit)
            except TraincastError as exc:  # said of the text as given, minus sign and all
                raise TraincastError(str(exc).replace(repr(neg.group(0)), repr(text)),
                                     hint=exc.hint) from None
        raise TraincastError(f"{what}: must not be negative, got {text!r}")
    if not m:
        raise TraincastError(f"{what}: not a number: {text!r}",
                             hint="use a plain number, e-notation or a k/M/G/T suffix"
                             + (f" (then {UNIT_WORDS[unit]})" if unit else ""))
    prefix, binary, word = m.group(2), bool(m.group(3)), m.group(4) or ""
    if prefix == "m":
        raise TraincastError(f"{what}: {text!r}: 'm' is milli; write M for mega ({m.group(1)}M)")
    prefix = "k" if prefix in ("k", "K") else prefix.upper()
    wanted = UNIT_WORDS.get(unit or "")
    if word == "b" and unit != "flops":  # a byte count in bits (a FLOP count in neither)
        raise TraincastError(f"{what}: {text!r}: 'b' is bits (8 to a byte); write B for "
                             f"bytes: {m.group(1)}{prefix}B")
    if word and wanted and word.upper().rstrip("S") != wanted:
        raise TraincastError(f"{what}: {text!r}: a count of {unit} ends in {wanted}, not {word}",
                             hint=f"e.g. {m.group(1)}{prefix}{wanted}")
    if binary and not (prefix and unit == "bytes" and word == "B"):
        raise TraincastError(f"{what}: {text!r}: a binary prefix (Ki, Mi, Gi, Ti) is for a byte "
                             "count ending in B (5GiB)",
                             hint="use a plain number, e-notation or a k/M/G/T suffix")
    value = float(m.group(1)) * (_BINARY[prefix] if binary else _SUFFIX[prefix])
    if not math.isfinite(value):
        raise TraincastError(f"{what}: not a finite number: {text!r}",
                             hint="a number up to about 1e308 (and below the flag's bound)")
    if high is not None and value > high:
        raise TraincastError(f"{what}: {text!r} is out of bounds (at most {high:g})",
                             hint="check the exponent; traincast COMMAND --help gives the "
                                  "bound")
    return value


def given(ctx: typer.Context, *names: str) -> list[str]:
    """The parameters among ``names`` (their Python names) given on the command line, not
    left at their defaults, as their flags (``gpus_per_node`` -> ``--gpus-per-node``; an
    on/off flag given off by its second name: ``--no-eager``)."""
    flags = {p.name: p.secondary_opts[0] if p.secondary_opts and ctx.params.get(p.name) is False
             else p.opts[0] for p in ctx.command.params}
    return [flags.get(n, "--" + n.replace("_", "-")) for n in names
            if getattr(ctx.get_parameter_source(n), "name", "DEFAULT") not in
            ("DEFAULT", "DEFAULT_MAP")]


def catalog_from(paths: list[Path] | None, compute: str = "auto") -> Catalog:
    """The shipped catalog with the user's ``--catalog`` files merged over it, pricing compute
    by ``--compute``."""
    return load_catalog(paths or [], compute=compute)


def note_curves_fallback(cat: Catalog, json_out: bool = False) -> None:
    """Under ``--compute curves`` with no GPU of the catalog carrying measured curves: a note
    that every GPU is priced at flat datasheet peaks instead (``compute.paper_why``)."""
    from traincast.compute import CURVES_WHERE, strategy_of

    if cat.compute == "curves" and all(strategy_of(g, "curves") == "paper"
                                       for g in cat.gpus.values()):
        note(f"--compute curves, but no GPU of the catalog has measured curves, which "
             f"{CURVES_WHERE} (merge its file with --catalog): every GPU is priced at flat "
             "datasheet peaks", json_out)


def follow_terminal_width() -> None:
    """Let both consoles take their width from ``COLUMNS`` (or the terminal) when they print:
    rich fixes the ``COLUMNS`` it finds when a console is made, so in one process the first
    command would set the width of every later one (each command calls this first)."""
    for c in (console, err_console):
        c._width = None  # rich's own "not given" value: size is then read at each use


def set_quiet(quiet: bool) -> None:
    """``traincast --quiet``: no progress bars or notes on stderr."""
    _STATE["quiet"] = quiet


def is_quiet() -> bool:
    return _STATE["quiet"]


def profiling(model: str, json_out: bool = False) -> contextlib.AbstractContextManager[Any]:
    """A spinner on stderr while ``model``'s training step is profiled (seconds for a large
    model); none with ``--quiet`` or ``--json``."""
    if json_out or is_quiet():
        return contextlib.nullcontext()
    return err_console.status(f"profiling {model} (one training step on meta) ...")


def progress(json_out: bool = False) -> Progress:
    """A rich progress bar on stderr; disabled with ``--quiet`` or ``--json``, and drawn only
    on a terminal (to a file or a pipe a transient bar would leave a blank line; the steps
    :func:`say_above` prints still go there).

    Use as ``with progress(json_out) as bar: task = bar.add_task("ingest", total=n)``.
    """
    silent = json_out or _STATE["quiet"]
    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                   MofNCompleteColumn(), TimeElapsedColumn(), console=err_console,
                   disable=silent or not err_console.is_terminal, transient=True)
    bar.say_steps = not silent  # type: ignore[attr-defined]
    return bar


def say_above(bar: Progress, task: TaskID) -> Callable[[str], None]:
    """``say(message)`` for a ``progress`` bar: the message printed dim above the bar (so a log
    of stderr keeps every step; a transient bar leaves nothing there) and shown as the task's
    description; nothing with ``--quiet`` or ``--json``."""
    def say(message: str) -> None:
        if not getattr(bar, "say_steps", not bar.disable):
            return
        bar.console.print(Text(f"· {message}", style="dim"), highlight=False)
        bar.update(task, description=Text(message[:60]))

    return say


def step_progress(bar: Progress, task: TaskID, what: str) -> Callable[[str, int, int], None]:
    """``on_step(step, done, total)`` for a run of steps (``study``'s): each step said once
    above the ``progress`` bar (:func:`say_above`, as ``what: step``, so a log of stderr keeps
    them), the bar advanced on every call."""
    say, started = say_above(bar, task), set()

    def on_step(step: str, done: int, total: int) -> None:
        if done not in started:  # a step starts: said once, its advances only shown
            started.add(done)
            say(f"{what}: {step}")
        bar.update(task, description=f"{what}: {step}", completed=done, total=total)

    return on_step


def _num(v: float) -> str:
    """A bound or value for people: ``1,000,000`` for whole numbers from 1e4 to below 1e15,
    else ``%.12g`` (``1e+308``, not its 309 digits)."""
    return f"{int(v):,}" if v == int(v) and 1e4 <= abs(v) < 1e15 else f"{v:.12g}"


def within(low: float, high: float | None = None) -> Callable[[Any], Any]:
    """A typer option callback: the value must be a finite number in ``[low, high]`` (``high``
    None: at least ``low``), else exit 2 naming the flag (``nan`` and ``inf``, which click reads
    as floats, are refused too). Unlike typer's ``min``/``max`` it adds no range column to
    ``--help``, which pushes the help text of long flags into words cut with ``…`` at 80
    columns; the help says the range instead."""
    want = f"from {_num(low)} to {_num(high)}" if high is not None else f"at least {_num(low)}"

    def check(value: Any) -> Any:
        if value is None:
            return value
        for v in value if isinstance(value, list | tuple) else (value,):
            try:
                finite = math.isfinite(v)
            except OverflowError:  # a whole number too large for a float: out of any range
                raise typer.BadParameter(
                    (f"must be {want}, got" if high is not None else "got") +
                    f" a number of {len(str(abs(v)))} digits, beyond any it takes") from None
            if not finite:
                raise typer.BadParameter(f"must be a finite number, got {v}")
            if v < low or (high is not None and v > high):
                raise typer.BadParameter(f"must be {want}, got {_num(v)}")
        return value + 0.0 if isinstance(value, float) else value  # -0.0 reads as 0

    return check


OVERLAP_HELP = ("Fraction f of communication overlapped with compute, 0 to 1 (0 = the paper's "
                "additive model")
OverlapOpt = Annotated[float, typer.Option(
    callback=within(0.0, 1.0),
    help=OVERLAP_HELP + "; a what-if scenario may set its own).")]


def one_of(choices: Iterable[str]) -> str:
    """A choice list for ``--help``: ``'fp32, tf32, bf16 or fp16'`` (words rich can wrap, where
    ``fp32|tf32|...`` is one word it cuts with ``…`` at 80 columns)."""
    return join_words(choices, "or")


def note(message: str, json_out: bool = False) -> None:
    """A remark for people on stderr (silent with ``--quiet`` or ``--json``)."""
    if not (json_out or _STATE["quiet"]):
        err_console.print(message, highlight=False)


def check_output(path: Path | None, flag: str = "-o", *, folder: bool = False,
                 inputs: Iterable[Path | None] = ()) -> None:
    """Fail before any work when an output cannot be written there (a TraincastError naming
    the flag and the path): a file output (``folder`` False) must not be a folder or another
    non-regular file (a device, pipe or socket), and its folder must exist and be writable; an
    output folder (``folder``: ``study -o``, ``report -o``, ``--parquet-dir``) must not be a
    file, and is created (with missing parents) by the command, below an existing folder it
    may write in; no output may be one of the command's
    ``inputs`` (its job store, with its ``.wal``, or a trace it reads): writing it would
    destroy them. Nothing is created here."""
    if path is None:
        return
    path = Path(path)
    for given in inputs:
        if given is None:
            continue
        given = Path(given)
        if path.resolve() in (given.resolve(), given.resolve().with_name(given.name + ".wal")):
            raise TraincastError(f"{flag} {path}: is an input of this command ({given}); "
                                 "writing it would destroy it",
                                 hint="write the output to another file")
    if folder:
        if path.exists() and not path.is_dir():
            raise TraincastError(f"{flag} {path}: is a file, not a folder",
                                 hint="name a folder (it is created when missing)")
        existing = path
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise TraincastError(f"{flag} {path}: {existing} is a file, not a folder",
                                 hint="name a folder below an existing folder")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise TraincastError(f"{flag} {path}: cannot write in {existing} (permission "
                                 "denied)", hint="write the output elsewhere")
        return
    if path.is_dir():
        raise TraincastError(f"{flag} {path}: is a folder, not a file",
                             hint=f"name a file in it: {flag} {path / 'NAME'}")
    if not_a_file(path):  # (a folder was said above)
        raise TraincastError(f"{flag} {path}: not a regular file (a device, pipe or socket)",
                             hint="give the path of a regular file")
    parent = path.parent
    if not parent.is_dir():
        what = f"{parent} is a file, not a folder" if parent.exists() else \
            f"no folder {parent}"
        raise TraincastError(f"{flag} {path}: {what}",
                             hint="create the folder first, or write the file elsewhere")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise TraincastError(f"{flag} {path}: cannot write in folder {parent} (permission "
                             "denied)", hint="write the file elsewhere")


def check_text_file(path: Path | str, flag: str, what: str = "", *, text: bool = True) -> Path:
    """A small text input the user names (a TOML or JSON file: ``--rows``, ``--price``,
    ``--scenario``, ``--features``) must be a readable UTF-8 file; else a TraincastError naming
    the flag and the path (no such file, a folder, unreadable, binary). ``text`` False: any
    readable file (a Parquet one)."""
    p = Path(path)
    kind = f"{what} file" if what else "file"
    if not p.exists():
        raise TraincastError(f"{flag} {p}: no such {kind}",
                             hint=f"check the path (a relative path starts at {os.getcwd()})")
    if p.is_dir():
        raise TraincastError(f"{flag} {p}: is a folder, not a {kind}")
    try:
        if text:
            p.read_bytes().decode("utf-8")
        else:
            p.open("rb").close()
    except UnicodeDecodeError as exc:
        raise TraincastError(f"{flag} {p}: not UTF-8 text (byte {exc.start}), not a {kind}",
                             hint="give the text file (TOML or JSON), not a binary one") from None
    except OSError as exc:
        raise TraincastError(f"{flag} {p}: cannot be read ({exc.strerror or exc})",
                             hint="check the path and its permissions") from None
    return p


def check_speeds(**flags: str | None) -> None:
    """Link flags given as a speed (``--nic 25Gbit``) must be a positive finite one; the error
    names the flag (``nic=...`` -> ``--nic``). A value that is no speed is a link name, left to
    the catalog."""
    from traincast.units import parse_speed_gbs

    for name, value in flags.items():
        if value is None:
            continue
        try:
            parse_speed_gbs(value)
        except TraincastError as exc:
            raise TraincastError(f"{exc} (--{name.replace('_', '-')})", exc.hint) from None


def check_scenarios(specs: list[str] | None, flag: str = "--scenario") -> None:
    """Each ``--scenario`` that names a file (``traincast.scenarios.names_file``) must be a
    readable text file (:func:`check_text_file`); shipped names are left to the reader."""
    from traincast.scenarios import names_file

    for spec in specs or []:
        if names_file(spec):
            check_text_file(spec, flag, "scenario")


def check_price(price: str | None, flag: str = "--price") -> None:
    """A ``--price`` that names an existing path must be a readable text file
    (:func:`check_text_file`); a shipped name (``aws``) is left to the price reader."""
    if price and Path(price).exists():
        check_text_file(price, flag, "price")


def check_model_spec(spec: str | None, flag: str = "MODEL") -> None:
    """A model spec whose file the user names is checked as :func:`check_text_file`: the
    config of ``hf:FILE`` (or ``hf:DIR``'s config.json) and the file of ``file.py:FUNC``."""
    if not spec:
        return
    if spec.startswith("hf:"):
        p = Path(spec[3:])
        if p.is_dir() and (p / "config.json").exists():
            check_text_file(p / "config.json", flag, "config")
        elif p.is_file():
            check_text_file(p, flag, "config")
    elif ":" in spec and spec.rsplit(":", 1)[0].endswith(".py"):
        p = Path(spec.rsplit(":", 1)[0])
        if p.exists():
            check_text_file(p, flag, "model")


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
    if info.get("exceeds_gpu_memory"):
        n = info["exceeds_gpu_memory"]
        console.print(Text(
            f"of these, {plural(n, 'job')} {'runs' if n == 1 else 'run'} on GPUs with less memory "
            f"than {info['workload']} needs per GPU under {'its' if n == 1 else 'their'} "
            "architecture (weights, gradients, optimizer state and activations at the job's "
            "batch): priced as if it fit; a smaller model, or --workload mix (each job a model "
            "its GPU holds), describes such jobs better", style="yellow"))


def print_assumed_hardware(hw: dict[str, Any] | None, priced: int) -> None:
    """One line saying which node the jobs with GPUs whose trace names neither a GPU type nor
    a node are priced on (``default_hardware`` of ``characterize`` or ``whatif``), if any and
    if any job is ``priced``."""
    hw = hw or {}
    if not hw.get("jobs") or not priced:
        return  # no job is priced (--workload none: no features): nothing was assumed
    console.print(Text(
        f"assumed hardware: {plural(hw['jobs'], 'job')} with GPUs "
        f"{'names' if hw['jobs'] == 1 else 'name'} neither a GPU type nor a node; "
        f"they are priced on {hw['node']} nodes ({hw.get('gpus')} x {hw.get('gpu')}, GPUs "
        f"linked by {hw.get('intra')}, network {hw.get('nic')}), "
        + ("the catalog's [defaults] node" if hw.get("set_by_catalog") else
           "the paper's PAI node")
        + "; a gpu_type or node column names theirs (--map, docs/traces.md), or a --catalog "
        "file's [defaults] node = NAME sets the node of them all (docs/hardware.md)",
        style="dim"))


def print_unpredicted(counts: dict[str, int]) -> None:
    """One line naming why jobs got no prediction (``traincast.resolve.REASONS``), if any;
    for jobs without features, where they come from (a workload the zoo knows)."""
    if counts:
        console.print("[dim]not predicted: " + escape("; ".join(
            f"{plural(n, 'job')}, {reason}" for reason, n in counts.items())) + "[/dim]",
            highlight=False)
    if counts.get("features missing"):
        console.print("[dim]features missing: the trace gives no features and no workload the "
                      "zoo knows (traincast zoo list names them; --map workload=COLUMN, or "
                      "--workload NAME for jobs that name none)[/dim]", highlight=False)


HELD_OUT_WORDS = {"gemm": "products", "memory": "memory-bound kernels", "conv": "convolutions"}
"""How ``held_out_text`` names each family of a held-out record (``<family>_median``)."""


def held_out_text(ranges: dict[str, list[float]],
                  families: tuple[str, ...] = ("gemm", "memory", "conv"),
                  with_sum: bool = True) -> str:
    """``kernels.held_out_range`` in words: the median |error| of each of ``families`` over the
    GPUs held out (``products 10.2% to 28.5%, ...``) and, ``with_sum``, the error of their
    summed time (signed; over every measured kernel of the GPU)."""
    def span(lo: float, hi: float, sign: bool = False) -> str:
        one = fmt_pct(lo, sign=sign)
        return one if round(100 * lo, 1) == round(100 * hi, 1) else \
            f"{one} to {fmt_pct(hi, sign=sign)}"

    parts = [f"{HELD_OUT_WORDS[f]} {span(*ranges[f'{f}_median'])}" for f in families
             if f"{f}_median" in ranges]
    if with_sum and "sum" in ranges:
        parts.append(f"the summed time of all its kernels {span(*ranges['sum'], True)}")
    return ", ".join(parts)


def memory_rates_text(figures: dict[str, Any]) -> str:
    """The memory-bound rates of ``kernels.simt_figures`` in words: ``elementwise 217, softmax
    176, norm 143 GB/s``."""
    return ", ".join(f"{k} {v:.0f}" for k, v in figures["memory_gbs"].items()) + " GB/s"


def trust_text(gpu: str, trust: dict[str, Any], amp: bool = False) -> str:
    """``kernels.fit_trust`` in words, for the families the measured-kernel model prices in a
    per-op table (memory-bound kernels; fp32 products unless ``amp``: a mixed-precision job's
    products run on matrix units, its convolutions always on the datasheet path): the median
    |error| of the GPU's own held-out record where there is one, else its range over the GPUs
    held out, and which host dispatch they were priced with. The summed-time error is left
    out: it is over every measured kernel, convolutions too."""
    families = ("memory",) if amp else ("gemm", "memory")
    own, ranges = trust.get("own"), trust.get("held_out_range")
    mine = held_out_text({k: [v, v] for k, v in own.items()}, families, with_sum=False) \
        if own else ""
    how = "with its host's own floor and dispatch ratios" \
        if trust.get("record") == "held_out" else \
        "with the fit's median host floor and dispatch ratios (traincast calibrate on a CUDA " \
        "host measures its own)"
    if trust.get("measured"):
        head = f"{gpu} is among the GPUs the kernel model was fitted to"
        return (f"{head}; held out of a fit on the other GPUs and priced {how}, its median "
                f"|error| was {mine} (docs/validation.md).") if mine else f"{head}."
    head = f"{gpu} is not among the GPUs the kernel model was fitted to"
    if trust.get("vendor") not in ("nvidia", None):
        head += (" (every GPU of the fit is an NVIDIA one, timed with CUDA's libraries; this "
                 f"{trust['vendor'].upper()} GPU runs other libraries' kernels, tiles and "
                 "dispatch, so the figures that follow are no measure of it)")
    if mine:
        return (f"{head}; priced by it {how}, the median |error| of its own measured kernels "
                f"was {mine} (docs/validation.md).")
    if not ranges:
        return f"{head}."
    return (f"{head}: each GPU held out of a fit, priced {how}, had a median |error| of "
            f"{held_out_text(ranges, families, with_sum=False)} (docs/validation.md).")


def print_full_square_note(what: str, where: str) -> None:
    """Why a model TFLOP/s (``what``) can read above a dense peak (``where``): the count
    takes the full attention square, the kernels of a causal mask about half of it."""
    console.print(f"[dim]{what} is above {where}: the model count takes the full attention "
                  f"square (12 l a d s per token, as the published model-FLOPs formulas do); "
                  f"with a causal mask the kernels run about half of those FLOPs.[/dim]")


def above_published(mfu_percent: float, hfu_percent: float, dtype: str,
                    mixture: bool = False) -> bool:
    """Whether a forecast's MFU is above every published run of precision ``dtype`` that
    traincast checks (``parallel.validation.best_published_mfu``) and not only because it
    counts the full attention square: its HFU is above that best too, or it is a ``mixture``
    of experts (no published run of one is checked). Such a forecast reads optimistic
    (:func:`print_mfu_caution`; ``plan`` marks its rows)."""
    from traincast.parallel.validation import best_published_mfu

    best = best_published_mfu(dtype)[0]
    return mfu_percent > best and (hfu_percent > best or mixture)


def print_mfu_caution(mfu_percent: list[tuple[str, float, float]], dtype: str,
                      mixture: bool = False) -> None:
    """One dim line when a forecast's model FLOPs utilization (``(label, MFU %, HFU %)``) is
    above the highest of the published runs of its precision ``dtype`` that traincast checks
    (``parallel.validation.best_published_mfu``): more than any of them reached, so an
    optimistic forecast (docs/parallelism.md); unless the hardware FLOPs utilization (the
    FLOPs the kernels execute, HFU) is within it: then the MFU is high because it counts the
    full ``s x s`` attention square where a causal kernel executes half (a long sequence),
    which the line says instead. Not for a ``mixture`` of experts: no published run of one is
    checked, so its line says that and stays a caution."""
    from traincast.parallel.validation import best_published_mfu

    best, run = best_published_mfu(dtype)
    over = [(label, m, h) for label, m, h in mfu_percent if m > best]
    rest = [(label, m) for label, m, h in over if above_published(m, h, dtype, mixture)]
    square = [x for x in over if not above_published(x[1], x[2], dtype, mixture)]  # the s^2
    if square:
        said = ", ".join(f"{label} {m:.0f}% MFU, {h:.0f}% HFU" for label, m, h in square)
        console.print(f"{said}: the MFU is above the highest of the published {dtype} runs "
                      f"traincast checks, {best:.1f}% ({run}), because it counts the full s x s "
                      "attention square (the convention of the published runs) where the causal "
                      "kernels execute about half; the FLOPs executed (HFU, recomputation "
                      "included) are within it (docs/parallelism.md)", style="dim",
                      highlight=False)
    if rest:
        said = ", ".join(f"{label} {m:.0f}%" for label, m in rest)
        moe = ("; none of them is a mixture of experts, whose load imbalance between experts "
               "the model does not price" if mixture else "")
        console.print(f"MFU ({said}) is above the highest of the published {dtype} runs "
                      f"traincast checks, {best:.1f}% ({run}): no published run reached it{moe}, "
                      "so read it as optimistic (docs/parallelism.md)", style="dim",
                      highlight=False)
