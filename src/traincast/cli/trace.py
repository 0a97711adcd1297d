"""``traincast ingest``, ``traincast sources``, ``traincast characterize`` and ``traincast
sample``: cluster traces and the job store."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import typer
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text

from traincast.analysis.characterize import UNKNOWN_GPU_FIX, UNKNOWN_NODE_FIX
from traincast.cli import app
from traincast.cli.common import (
    OVERLAP_HELP,
    CatalogOpt,
    ComputeOpt,
    JsonOpt,
    WorkloadOpt,
    catalog_from,
    check_output,
    console,
    err_console,
    given,
    is_quiet,
    note,
    note_curves_fallback,
    print_assumed,
    print_assumed_hardware,
    print_json,
    print_unpredicted,
    progress,
    within,
)
from traincast.cli.tables import Table, compact_table, print_table
from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog
from traincast.model import BOTTLENECK_NAME, COMPONENTS
from traincast.trace import DEFAULT_WORKLOAD
from traincast.trace.adapters import FORMATS
from traincast.trace.chunks import JobChunks
from traincast.trace.schema import INFER_RULE
from traincast.trace.store import (
    DEFAULT_DB,
    every_row_bad,
    format_errors,
    source_labels,
    strict_command,
)
from traincast.units import first_of, fmt_amount, fmt_pct, fmt_seconds, plural

FormatOpt = Annotated[str, typer.Option(
    "--format", "-f", help=f"Trace format: {', '.join(FORMATS)} (mapping rules: docs/traces.md). "
    "csv = canonical column names, CSV or Parquet by extension.")]
MapOpt = Annotated[list[str] | None, typer.Option(
    "--map", help="COL=FIELD: read canonical column COL from the trace's column FIELD "
    "(repeatable).")]
DbOpt = Annotated[Path | None, typer.Option(
    "--db", help=f"The DuckDB job store (default: {DEFAULT_DB} in the working directory).")]
StrictOpt = Annotated[bool, typer.Option(
    "--strict", help="Fail the whole ingest if any row is bad, naming the first 20, and store "
    "nothing (default: skip and report them).")]
EngineOpt = Annotated[str, typer.Option(
    "--engine", help="local (this process, the store read in chunks: memory stays flat) or "
    "dask (Parquet partitions on a Dask cluster, their results merged here).")]
AddressOpt = Annotated[str | None, typer.Option(
    "--address", help="Dask scheduler tcp://HOST:PORT (default: a LocalCluster on 127.0.0.1).")]
ParquetDirOpt = Annotated[Path | None, typer.Option(
    "--parquet-dir", help="--engine dask: write the Parquet partitions here (a folder a "
    "remote cluster can read; its part-NNNNN.parquet files of an earlier run are replaced, "
    "other files left alone); default: a temporary folder.")]


@contextmanager
def ingest_progress(json_out: bool) -> Iterator[Any]:
    """A progress bar on stderr for ingest steps (silent with --json or --quiet)."""
    with progress(json_out) as bar:
        task = bar.add_task("ingest", total=1)

        def update(step: str, done: int, total: int) -> None:
            bar.update(task, description=f"ingest: {step}", completed=done, total=max(total, 1))

        yield update


def _report_bad_rows(report: dict[str, Any]) -> None:
    """On stderr: the read's notes (not with ``--quiet``; each named by its file where the
    read holds several sources), then its bad rows (always)."""
    several = len(report.get("sources", [])) > 1  # a PAI table set is one source
    for n in [] if is_quiet() else report.get("notes", []):
        where = f"{n['file']}: " if several and n.get("file") else ""
        err_console.print(Text(f"{where}{n['count']:,} {n['note']}", style="yellow"),
                          highlight=False)
    if report["bad_rows"]:
        err_console.print(Text(f"{report['bad_rows']} bad row(s) skipped", style="yellow")
                          + Text(f" (first {len(report['errors'])}):"), highlight=False)
        err_console.print(format_errors(report["errors"], report["bad_rows"]), highlight=False,
                          markup=False)


INGEST_HELP = (
    "Ingest traces into the job store (one transaction: a failed ingest changes nothing).\n\n"
    "Censored jobs (running at the trace end), zero-GPU and fractional-GPU jobs are kept and "
    "flagged. Bad rows (unparsable or infinite time or number, a fraction in an integer column, "
    "a value outside its field's bounds: a negative count or size, more than 1,000,000 GPUs, a "
    "date outside the years 1-9999, a utilization outside 0-1; an end before its start; a "
    "boolean other than true/false/yes/no/1/0; unknown architecture; a job id repeated in the "
    "file; a last row cut short: the file ends inside a quote, or without a newline and with "
    "fewer fields than the header) are reported with file, row, field and value and skipped, or "
    "fail the ingest with --strict (bounds: docs/traces.md); a file read whose every row is bad "
    "stores no job and makes the exit status 3. A file whose content is already in "
    "the store under another name (a .gz file: its decompressed bytes) is not stored again "
    "(traincast sources lists what the store holds). The store "
    "keeps the trace's own facts (placement: gpus_per_worker, gpus_per_node, workers_per_node "
    "where the trace says them); jobs without an architecture are flagged and get one from the "
    f"GPU count when read: {INFER_RULE}.")
CHARACTERIZE_HELP = (
    "The cluster view of a trace: architectures, GPUs, durations and where the time goes.\n\n"
    "Jobs, GPUs and GPU-time per architecture and GPU type, distributions of "
    "GPUs per job and of duration, and, for jobs whose features are known (from the trace or "
    "the zoo profile of their workload), where the time goes, predicted by the time model "
    "(mean shares job- and GPU-weighted, bottlenecks, jobs > 80% in communication and > 50% in "
    "data I/O).\n\nGPU time = n_gpus x (end - start); censored jobs count up to the trace end. "
    f"Architectures missing from the trace are inferred: {INFER_RULE}.\n\n"
    "The store is read in chunks, so memory stays flat as the trace grows: sums are exact, "
    "the duration and communication-share quantiles are exact up to 100,000 jobs and within "
    "0.1% beyond (docs/traces.md).")


def copy_lines(report: dict[str, Any]) -> list[str]:
    """One line per source of an ingest report whose content the store already held under
    another name (a copy, a ``.gz`` of it): read once, not twice; and per source whose stored
    files were gone and which names these files now (moved or renamed)."""
    def names(files: list[str]) -> str:
        return ", ".join(Path(f).name for f in files)

    return [f"{names(s['files'])}: already ingested as {a['file']} (source {a['source_id']}); "
            "nothing stored" for s in report["sources"] if (a := s.get("already_ingested"))] + [
        f"{names(s['files'])}: the content of source {s['source_id']}, whose "
        f"{', '.join(map(str, m))} is gone; the source names {names(s['files'])} now (moved), "
        "nothing stored" for s in report["sources"] if (m := s.get("moved_from"))]


def warn_bad_rows(report: dict[str, Any]) -> None:
    """On stderr: the rows an analysis command skipped while reading its TRACE (those found
    now with file, row and field; those of files kept from an earlier ingest, counted), and
    the files it did not read again as copies of another (:func:`copy_lines`)."""
    _report_bad_rows(report)
    for line in [] if is_quiet() else copy_lines(report):
        err_console.print(line + " (the same jobs: counted once)", style="dim",
                          highlight=False, markup=False)
    for src in report["sources"]:
        if src.get("unchanged") and src.get("bad_rows"):
            files = " ".join(str(f) for f in src["files"])
            err_console.print(Text(f"{src['bad_rows']} bad row(s) of {files} skipped at its "
                                   "first ingest", style="yellow")
                              + Text(f" ({strict_command(report, src['files'])} names them)"),
                              highlight=False)


def check_trace_io(trace: Path | list[Path] | None, db: Path | None,
                   outputs: dict[str, Path | None] | None = None, engine: str = "local",
                   address: str | None = None, parquet_dir: Path | None = None, *,
                   format: str = "csv", map: list[str] | None = None,
                   format_given: bool = False) -> None:
    """Before any work, for a command over ``[TRACE | --db FILE]``: the engine is known and
    ``--address`` / ``--parquet-dir`` go with ``--engine dask``; the store and every output
    (``{flag: path}``) can be written (the store only when a trace is ingested into it: a
    store in a read-only folder can be read) and no output is the store or a trace
    (:func:`~traincast.cli.common.check_output`), nor a file that a trace folder given would
    hold as a trace file of ``format`` (the next run would read it as the trace); ``format``
    a known one, and with no trace (the store read as it is) neither a ``--format`` nor a
    ``--map``, which describe a trace's columns (:func:`refuse_trace_flags`)."""
    from traincast.engine import ENGINES
    from traincast.trace.adapters import adapter
    from traincast.trace.adapters.base import in_folder
    from traincast.trace.store import db_path

    refuse_trace_flags(trace, format, map, format_given)

    if engine not in ENGINES:
        raise TraincastError(f"--engine {engine!r}: unknown engine",
                             hint=f"choose {' or '.join(ENGINES)}")
    if engine != "dask" and (address is not None or parquet_dir is not None):
        raise TraincastError(f"{'--address' if address is not None else '--parquet-dir'} "
                             "applies to --engine dask only", hint="add --engine dask")
    if address is not None:
        from traincast.engine.dask import check_address

        check_address(address)
    traces = [] if trace is None else [trace] if isinstance(trace, Path) else list(trace)
    if traces:  # the trace is ingested into the store; without one the store is only read
        check_output(db, "--db", inputs=traces)
    check_output(parquet_dir, "--parquet-dir", folder=True, inputs=[db_path(db), *traces])
    if parquet_dir is not None:  # its part-NNNNN.parquet files are written over and removed
        from traincast.engine.dask import PART_NAME

        folder = Path(parquet_dir).resolve()
        hit = [t for t in traces if Path(t).resolve() == folder or (
            Path(t).absolute().parent.resolve() == folder and PART_NAME.fullmatch(Path(t).name))]
        if hit:
            raise TraincastError(f"--parquet-dir {parquet_dir}: its partitions "
                                 f"(part-NNNNN.parquet) would be written over the trace "
                                 f"{hit[0]}", hint="give a folder of its own")
    for flag, path in (outputs or {}).items():
        check_output(path, flag, inputs=[db_path(db), *traces])
    folders = [t.resolve() for t in traces if t.is_dir()]
    for flag, path in {"--db": db_path(db), **(outputs or {})}.items():
        if folders and path is not None and (
                folder := in_folder(adapter(format), Path(path).resolve(), folders)):
            raise TraincastError(f"{flag} {path}: is in the trace folder {folder}, where the "
                                 f"next run would read it as a {format} trace file",
                                 hint="write it to another folder")


def refuse_trace_flags(trace: Any, format: str, map: list[str] | None,
                       format_given: bool = False) -> None:
    """``format`` must be a known one, and with no ``trace`` (the store read as it is) neither a
    ``--format`` nor a ``--map`` is given: they describe a trace's columns. ``format_given``:
    whether ``--format`` was on the command line (``--format csv`` too). One rule for every
    command that reads ``[TRACE | --db FILE]``."""
    from traincast.trace.adapters import adapter

    adapter(format)  # an unknown format is an error with or without a trace
    if not trace and (stray := [f for f, v in (("--format", format_given),
                                               ("--map", bool(map))) if v]):
        raise TraincastError(f"{' and '.join(stray)}: flags of a TRACE (its columns); the "
                             "store's jobs are read as they were stored",
                             hint="give the trace, or leave them out")


def trace_chunks(trace: Path | None, db: Path | None, format: str, map: list[str] | None,
                 quiet: bool, catalog: Catalog | None = None,
                 workload: str = DEFAULT_WORKLOAD) -> JobChunks:
    """The jobs of ``[TRACE | --db FILE]`` read chunk by chunk (bounded memory): TRACE
    ingested into the store (``--db``, default ``traincast.duckdb`` here; a progress bar
    unless ``quiet``; skipped rows said on stderr) and its jobs, or no TRACE: the whole
    store; each chunk prepared as :func:`load_trace_jobs` prepares the whole table."""
    from traincast.trace import Store, parse_mapping
    from traincast.trace.chunks import JobChunks
    from traincast.trace.store import db_path

    path, ids = db_path(db), None
    if trace is None:
        note_store_sources(db, quiet)
    else:
        with Store(path) as store, ingest_progress(quiet) as bar:
            report = store.ingest(trace, format, parse_mapping(map), progress=bar)
        warn_bad_rows(report)
        ids = [s["source_id"] for s in report["sources"]]
    chunks = JobChunks(path, ids, catalog=catalog, workload=workload)
    if trace is not None and (error := every_row_bad(report, chunks.rows, NOTHING_ANALYSED)):
        raise error
    if not chunks.rows:
        note_no_jobs(trace, quiet)
    return chunks


NOTHING_ANALYSED = "nothing was analysed"
"""What an analysis whose TRACE stored no job, every row bad, did (``trace.store.
every_row_bad``; a trace of a header alone is analysed, as holding no job)."""


def note_no_jobs(trace: Path | str | None, quiet: bool = False) -> None:
    """On stderr, before an analysis with nothing to analyse: the trace stored no job (a header
    alone, or every row bad), or the store holds none; the tables that follow are empty."""
    where = (f"{escape(str(trace))} holds no job it could store (a header alone, an empty "
             "JSON array, or every row bad)") if trace is not None else \
        "the store holds no job (traincast sources lists its traces)"
    note(f"[yellow]nothing to analyse: {where}[/yellow]", json_out=quiet)


def note_store_sources(db: Path | None, quiet: bool = False) -> None:
    """On stderr, before an analysis of the whole store: with more than one source, that they
    are analysed together (a TRACE given to an analysis command is stored there too); the
    sources whose files are gone (their jobs are still read; ``traincast sources
    --drop-missing`` removes them)."""
    from traincast.trace.store import Store, db_path, file_state

    with Store(db_path(db)) as store:
        sources = store.sources()
    if len(sources) > 1:
        jobs = sum(s["rows"] or 0 for s in sources)
        note(f"[dim]the whole store {escape(str(db_path(db)))}: {len(sources)} sources, "
             f"{jobs:,} job(s), analysed together (traincast sources lists them; a TRACE "
             "argument analyses one alone)[/dim]", json_out=quiet)
    gone = [s for s in sources
            if file_state(json.loads(s["files"]), s["fingerprint"]) == "missing"]
    if gone:
        jobs = sum(s["rows"] or 0 for s in gone)
        ids = ", ".join(str(s["source_id"]) for s in gone)
        note(f"[yellow]{len(gone)} source(s) of the store have files that are gone[/yellow] "
             f"({'id' if len(gone) == 1 else 'ids'} {ids}; {jobs:,} job(s)): their jobs are "
             "read; traincast sources --drop-missing removes them", json_out=quiet)


def load_trace_jobs(trace: Path | None, db: Path | None, format: str,
                    map: list[str] | None, quiet: bool, catalog: Catalog | None = None,
                    workload: str = DEFAULT_WORKLOAD) -> pa.Table:
    """The job table of ``[TRACE | --db FILE]``: TRACE ingested into the store (``--db``,
    default ``traincast.duckdb`` here; a progress bar unless ``quiet``; skipped rows said on
    stderr) and its jobs, or no TRACE: the whole store; then :func:`~traincast.trace.
    prepare_jobs` (architectures inferred over ``catalog``, ``workload`` for jobs without one:
    :data:`~traincast.trace.DEFAULT_WORKLOAD` unless given, marked for
    :func:`~traincast.trace.workload_assumption`; features filled)."""
    from traincast.trace import load_jobs, parse_mapping, prepare_jobs, read_trace
    from traincast.trace.store import db_path

    if trace is None:
        note_store_sources(db, quiet)
    reports: list[dict[str, Any]] = []

    def on_report(report: dict[str, Any]) -> None:
        reports.append(report)
        warn_bad_rows(report)

    with ingest_progress(quiet or trace is None) as bar:
        jobs = load_jobs(db) if trace is None else \
            read_trace(trace, format, db_path(db), parse_mapping(map), progress=bar,
                       on_report=on_report)
    if reports and (error := every_row_bad(reports[0], jobs.num_rows, NOTHING_ANALYSED)):
        raise error
    if not jobs.num_rows:
        note_no_jobs(trace, quiet)
    return prepare_jobs(jobs, catalog, workload)


@app.command(help=INGEST_HELP)
def ingest(
    trace: Annotated[list[Path], typer.Argument(help="Trace files or folders (a folder: the "
                                                "files of the --format that it holds, "
                                                "docs/traces.md).")],
    format: FormatOpt = "csv",
    map: MapOpt = None,
    db: DbOpt = None,
    strict: StrictOpt = False,
    parquet: Annotated[Path | None, typer.Option(
        "--parquet", help="Also export the store's whole job table to this Parquet file, "
        "within the ingest: when it cannot be written, nothing is stored.")]
    = None,
    json_out: JsonOpt = False,
) -> None:
    from traincast.trace import ingest as run
    from traincast.trace import parse_mapping

    check_trace_io(trace, db, {"--parquet": parquet}, format=format, map=map)  # before ingest
    from traincast.trace.adapters.base import PARQUET_SUFFIXES

    if parquet is not None and not parquet.name.lower().endswith(PARQUET_SUFFIXES):
        raise TraincastError(f"--parquet {parquet}: a Parquet file's name ends in .parquet or "
                             ".pq", hint=f"e.g. --parquet {parquet.with_suffix('.parquet')}")
    with ingest_progress(json_out) as update:
        report = run(trace, format, db, parse_mapping(map), strict=strict, progress=update,
                     parquet=parquet)
    if json_out:
        print_json(report)
    else:
        _report_bad_rows(report)
        print_ingest(report)
    if any(stored_nothing(s) and s["bad_rows"] for s in report["sources"]):
        raise typer.Exit(3)  # a file read stored nothing, every row of it bad


def stored_nothing(source: dict[str, Any]) -> bool:
    """An ingest's source that was read and stored no job (not one left as it was, or
    ingested before)."""
    return (not source["jobs"] and not source["unchanged"]
            and not source.get("already_ingested"))


SOURCES_HELP = (
    "List the job store's sources (each ingested file or PAI table set), or remove some.\n\n"
    "Each source: its id, format, files, jobs, bad rows skipped, when it was ingested and "
    "whether its files are as ingested: 'as ingested' (name, size and modification time as "
    "then), 'changed' (size or modification time differ: the next ingest of them reads them "
    "again, keeps the source if their content is the same and else replaces its jobs) or "
    "'missing' (a file is gone: its jobs stay in the store and in every --db analysis until "
    "dropped). --drop ID and --drop-missing remove sources and their jobs in one "
    "transaction: all or none (an id the store does not hold is an error, and nothing is "
    "removed).")


@app.command(help=SOURCES_HELP)
def sources(
    db: DbOpt = None,
    drop: Annotated[list[int] | None, typer.Option(
        "--drop", help="Remove this source and its jobs (repeatable).")] = None,
    drop_missing: Annotated[bool, typer.Option(
        "--drop-missing", help="Remove every source one of whose files is gone.")] = False,
    json_out: JsonOpt = False,
) -> None:
    from traincast.trace.store import Store, db_path, file_state

    with Store(db_path(db)) as store:
        listed = [{**s, "files": json.loads(s["files"]),
                   "mapping": json.loads(s["mapping"] or "{}")} for s in store.sources()]
        for s in listed:
            s["state"] = file_state(s["files"], s["fingerprint"])
            if s["ingested_at"] is not None:  # stored in UTC (the store's time zone)
                s["ingested_at"] = s["ingested_at"].replace(tzinfo=datetime.UTC)
        ids = set(drop or []) | {s["source_id"] for s in listed
                                 if drop_missing and s["state"] == "missing"}
        dropped = store.drop(ids) if ids else None
        held = [s for s in listed if s["source_id"] not in ids]
        total, of_held = store.count(), store.count(s["source_id"] for s in held)
    if json_out:
        print_json({"db": str(db_path(db)), "jobs": total, "sources": held,
                    "dropped": dropped["dropped"] if dropped else []})
        return
    if dropped:
        for d in dropped["dropped"]:
            console.print(f"removed source {d['source_id']} ({d['format']}: "
                          f"{', '.join(Path(f).name for f in d['files'])}) and its "
                          f"{d['jobs']:,} jobs", highlight=False, markup=False)
    elif drop_missing:
        console.print("no source has a missing file; nothing removed")
    if not held and not total:
        console.print(f"{db_path(db)} holds no source (traincast ingest TRACE --db FILE adds "
                      "one)", highlight=False, markup=False)
        return
    table, files = sources_table(held, db_path(db), total, of_held)
    print_table(table, console)
    console.print(files, highlight=False)


def sources_table(held: list[dict[str, Any]], db: Path, total: int, listed: int
                  ) -> tuple[Table, RichTable]:
    """The store's sources as a table (id, format, jobs, bad rows, ingested (UTC), files'
    state; the caption counts the store's ``total`` jobs, the ``listed`` ones of these sources
    and those of no source) and their files under it, one line per source id (paths fold, the
    table stays narrow)."""
    t = Table(title=f"Sources in {db}", title_justify="left", caption_justify="left",
              caption=f"{total:,} jobs in the store, {listed:,} from these {len(held)} "
              "source(s)" + (f" and {total - listed:,} of no source listed"
                             if total != listed else "") + "; ingested in UTC; files below")
    t.add_column("id", justify="right")
    t.add_column("format")
    for col in ("jobs", "bad rows"):
        t.add_column(col, justify="right")
    t.add_column("ingested", no_wrap=True)
    t.add_column("files are", no_wrap=True)
    files = RichTable.grid(padding=(0, 1))
    files.add_column(justify="right", no_wrap=True)
    files.add_column(overflow="fold")
    for s in held:
        t.add_row(str(s["source_id"]), s["format"], f"{s['rows'] or 0:,}",
                  f"{s['bad_rows'] or 0:,}",
                  f"{s['ingested_at']:%Y-%m-%d %H:%M}" if s["ingested_at"] else "-",
                  s["state"])
        files.add_row(f"{s['source_id']}:", Text(", ".join(map(str, s["files"]))))
    return t, files


FLAG_WORDS = {"zero_gpu": "with 0 GPUs", "fractional_gpu": "with a fraction of a GPU",
              "arch_inferred": "with the architecture inferred"}
"""The store's flags in the characterization's first line (``censored`` as it is)."""

SHARE_HEADERS = {"data_io": "data I/O", "compute_flop": "FLOP bound",
                 "compute_mem": "memory bound", "comm": "comm"}
"""The time components' headers in the characterization's table (narrow: they wrap)."""

FLAG_HEADERS = {"censored": "censored", "zero_gpu": "0 GPU", "fractional_gpu": "frac. GPU",
                "arch_inferred": "arch inferred"}


def print_ingest(report: dict[str, Any]) -> None:
    """The ingest report as a rich table: one row per source (its file or table set)."""
    held = sum({s["source_id"]: s["jobs"] for s in report["sources"]}.values())
    caption = (f"{report['jobs']:,} jobs stored by this ingest in "
               f"{fmt_seconds(report['seconds'])}" + (f" ({held:,} in these sources)"
                                                      if held != report["jobs"] else "")
               + "; new = read and stored; replaced = read and stored in place of an earlier "
               "ingest of the same file (below); kept = unchanged since its last ingest, not "
               "read again; copy = the same content as a source already stored (a .gz file: "
               "its decompressed bytes), not stored again; moved = the content of a source "
               "whose files are gone, which names this file now")
    names = source_labels(dict(enumerate(s["files"] for s in report["sources"])))
    redone = {f for r in report["replaced"] for f in r["files"]}
    rows = []
    for i, s in enumerate(report["sources"]):
        status = ("copy" if s.get("already_ingested") else "moved" if s.get("moved_from")
                  else "kept" if s["unchanged"]
                  else "replaced" if redone & set(s["files"]) else "new")
        rows.append((names[i], f"{s['jobs']:,}", status, f"{s['bad_rows']:,}",
                     *(f"{s['flags'][f]:,}" for f in FLAG_HEADERS)))
    t = compact_table(f"Ingest ({report['format']}) into {report['db']}", caption,
                      ("file", "jobs", "status", "bad rows", *FLAG_HEADERS.values()), rows)
    console.print(t)
    for line in copy_lines(report):
        console.print(line, highlight=False, markup=False)
    for s in report["sources"]:
        if stored_nothing(s):
            console.print(f"[yellow]{', '.join(Path(f).name for f in s['files'])}: no job stored "
                          + ("(every row was bad: named above)" if s["bad_rows"] else
                             "(no row: a header alone, or an empty JSON array)")
                          + "[/yellow]", highlight=False)
    for r in report["replaced"]:
        how = f"--format {r['format']}" + "".join(f" --map {k}={v}"
                                                 for k, v in r["mapping"].items())
        console.print(f"replaced the {r['jobs']:,} jobs stored from "
                      f"{', '.join(Path(f).name for f in r['files'])} by an earlier ingest "
                      f"({how})", highlight=False, markup=False)


def _cdf_at(cdf: dict[str, list[float]], p: float) -> float:
    if not cdf.get("p"):
        return float("nan")
    return cdf["value"][min(range(len(cdf["p"])), key=lambda i: abs(cdf["p"][i] - p))]


def _value_at(cdf: dict[str, list[float]], p: float) -> float:
    """The least value whose cumulative fraction reaches ``p`` (``{"value", "cdf"}``)."""
    return next(v for v, c in zip(cdf["value"], cdf["cdf"], strict=True) if c >= p - 1e-12)


def group_table(groups: dict[str, dict[str, Any]], title: str) -> Table:
    """Jobs, GPUs and GPU-hours with their shares, one row per group (architecture, GPU type)
    of :func:`traincast.analysis.characterize.characterize`."""
    t = Table(title=title, title_justify="left")
    for col in ("", "jobs", "share", "GPUs", "share", "GPU-hours", "share"):
        t.add_column(col, justify="left" if not col else "right")
    for name, row in groups.items():
        label = name + (f" ({row['gpu']})" if row.get("gpu") and row["gpu"] != name else "")
        t.add_row(label, f"{row['jobs']:,}", fmt_pct(row["job_share"]), fmt_amount(row["gpus"]),
                  fmt_pct(row["gpu_share"]), fmt_amount(row["gpu_time_s"] / 3600),
                  fmt_pct(row["gpu_time_share"]))
    return t


def _print_named(title: str, counts: dict[str, int] | None, tail: str, style: str,
                 shown: int | None = 10) -> None:
    """One line naming what a characterization could not price, each with its jobs
    (``title: A (2 jobs), B (1 job)`` and ``tail``; the first ``shown``, None: all); nothing
    when ``counts`` is empty."""
    if counts:
        named = [f"{name} ({plural(n, 'job')})" for name, n in counts.items()]
        console.print(Text(f"{title}: {first_of(named, shown or len(named))}{tail}",
                           style=style))


def print_characterization(r: dict[str, Any]) -> None:
    """The characterization as rich tables."""
    console.print(f"[bold]{r['jobs']:,} jobs[/bold], {fmt_amount(r['gpus'])} GPUs requested, "
                  f"{fmt_amount(r['gpu_time_s'] / 3600)} GPU-hours"
                  + (" (a lower bound: running jobs counted up to the trace end, or to the end "
                     "time the trace gives them)"
                     if r.get("gpu_time_lower_bound") else "") + "; flags: "
                  + (", ".join(f"{v:,} {FLAG_WORDS.get(k, k.replace('_', ' '))}"
                               for k, v in r["flags"].items() if v) or "none"),
                  highlight=False)
    for key, title in (("by_architecture", "Architectures"), ("by_gpu_type", "GPU types")):
        if r[key]:
            print_table(group_table(r[key], title), console)
        else:  # no job with GPUs: no table of none
            console.print(f"{title}: none ({'no job uses a GPU' if r['jobs'] else 'no job'})",
                          highlight=False)
        if key == "by_gpu_type" and (unknown := r[key].get("unknown")):
            assumed = int((r.get("default_hardware") or {}).get("jobs") or 0)
            rest = int(unknown["jobs"]) - assumed
            parts = []
            if assumed:
                parts.append(f"{assumed:,} with GPUs priced on an assumed node (below)")
            if rest > 0:
                parts.append(f"{rest:,} without GPUs or on a node the trace names")
            console.print(f"unknown: the {plural(unknown['jobs'], 'job')} whose trace names no "
                          f"GPU type: {'; '.join(parts)}", style="dim", highlight=False)
        if key == "by_gpu_type":
            _print_named("not in the catalog", r.get("unknown_gpu_types"),
                         f". {UNKNOWN_GPU_FIX}", "yellow", shown=None)
            _print_named("nodes not in the catalog", r.get("unknown_nodes"),
                         f". {UNKNOWN_NODE_FIX}", "yellow")
        for name, row in r[key].items():
            if row.get("assumed"):
                console.print(f"assumed GPU: {name} is priced as {row['gpu']} ({row['assumed']})",
                              style="dim", highlight=False)
        if key == "by_architecture" and r.get("zero_gpu_jobs"):
            n = r["zero_gpu_jobs"]
            console.print(f"{plural(n, 'job')} with 0 GPUs (not training on GPUs) "
                          f"{'is' if n == 1 else 'are'} left out of the architecture shares",
                          highlight=False)
    g = r["cdf"]["gpus_per_job_with_gpus"]
    cdf = Table(title="Distributions", title_justify="left")
    for col in ("", "p10", "p50", "p90", "p99", "max"):
        cdf.add_column(col, justify="left" if not col else "right")
    d = r["cdf"]["duration_s"]
    cdf.add_row(f"duration ({fmt_amount(r['jobs_with_duration'])} finished)",
                *(fmt_seconds(_cdf_at(d, p)) for p in (0.1, 0.5, 0.9, 0.99, 1.0)))
    if g["value"]:  # over the jobs with GPUs, as the architecture shares
        cdf.add_row("GPUs per job (with GPUs)", *(fmt_amount(_value_at(g, p))
                                                  for p in (0.1, 0.5, 0.9, 0.99, 1.0)))
    print_table(cdf, console)
    if r.get("censored_with_end"):
        console.print(f"{plural(r['censored_with_end'], 'censored job')} with an end time (still "
                      "running when the trace was taken, as Alibaba 2023's Running pods: their "
                      "running time is a lower bound) left out of the duration", highlight=False)
    b = r["breakdown"]
    print_unpredicted(b.get("unpredicted", {}))
    _print_named("workloads the zoo does not know", r.get("unknown_workloads"),
                 " (traincast zoo list names the known ones: give a workload column of those "
                 "names, or feature columns; docs/traces.md)", "dim")
    if not b.get("jobs"):
        console.print("[dim]no job has a prediction" + (" (not predicted: above)" if
                                                        b.get("unpredicted") else
                                                        ": no job uses a GPU" if r["jobs"]
                                                        else "")
                      + ": no time breakdown[/dim]")
        return
    t = Table(title=f"Where the time goes (predicted, {b['jobs']:,} jobs with known features: "
              "mean share of iteration time, weighted by job and by GPUs)", title_justify="left")
    t.add_column("architecture")
    t.add_column("jobs", justify="right")
    t.add_column("weight")
    for c in COMPONENTS:
        t.add_column(SHARE_HEADERS[c], justify="right")
    for name, row in [("all", b), *b["by_architecture"].items()]:
        for i, (label, key) in enumerate((("job", "job_weighted"), ("GPU", "gpu_weighted"))):
            t.add_row(name if not i else "", f"{row['jobs']:,}" if not i else "", label,
                      *(fmt_pct(row[key][c]) for c in COMPONENTS), end_section=bool(i))
    print_table(t, console)
    console.print("jobs by bottleneck: " + ", ".join(f"{BOTTLENECK_NAME.get(c, c)} {n:,}"
                                                     for c, n in b["bottleneck"].items())
                  + f"; jobs with > 80% in communication: {fmt_pct(b['comm_over_80_share'])}, "
                  f"> 50% in data I/O: {fmt_pct(b['data_io_over_50_share'])}", highlight=False)
    if b.get("gpu_util_pred_mean") is not None:
        console.print(f"predicted GPU utilization (busy / iteration, mean over jobs): "
                      f"{fmt_pct(b['gpu_util_pred_mean'])} at --overlap {b['overlap']:g} (it "
                      "moves the utilization and the iteration time, not the shares above: "
                      "each is of the sum of the four parts)", highlight=False)


@app.command(help=CHARACTERIZE_HELP)
def characterize(
    ctx: typer.Context,
    trace: Annotated[Path | None, typer.Argument(help="A trace (ingested into the store on the "
                                                 "way); none = the whole store.")] = None,
    format: FormatOpt = "csv",
    map: MapOpt = None,
    db: DbOpt = None,
    catalog: CatalogOpt = None,
    compute: ComputeOpt = "auto",
    overlap: Annotated[float, typer.Option(
        callback=within(0.0, 1.0), help=OVERLAP_HELP + "): it changes each job's predicted "
        "iteration time and GPU utilization, not the time shares, which are of the sum of "
        "the four parts as the paper's breakdown.")] = 0.0,
    workload: WorkloadOpt = DEFAULT_WORKLOAD,
    engine: EngineOpt = "local",
    address: AddressOpt = None,
    parquet_dir: ParquetDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    from traincast.analysis.characterize import characterize_chunks

    check_trace_io(trace, db, None, engine, address, parquet_dir, format=format, map=map,
                   format_given=bool(given(ctx, "format")))
    cat = catalog_from(catalog, compute)
    note_curves_fallback(cat, json_out)
    chunks = trace_chunks(trace, db, format, map, json_out, cat, workload)
    with progress(json_out) as bar:
        task = bar.add_task(f"characterize ({engine})", total=chunks.rows)
        result = characterize_chunks(chunks, cat, overlap, engine=engine, address=address,
                                     parquet_dir=parquet_dir,
                                     progress=lambda done, total: bar.update(
                                         task, completed=done, total=total))
    result["assumed_workload"] = chunks.assumed
    if json_out:
        print_json(result)
    else:
        print_characterization(result)
        print_assumed(result["assumed_workload"])
        print_assumed_hardware(result.get("default_hardware"),
                               (result.get("breakdown") or {}).get("jobs") or 0)


SAMPLE_HELP = (
    "Generate the synthetic sample trace, or print where the bundled one is.\n\n"
    "The sample is a cluster built from published statistics: job sizes and GPU types of the "
    "real Alibaba traces, durations of a real trace, the PAI architecture mix, zoo workloads. "
    "It is not a real trace; assumptions and sources: docs/sample.md.")


SAMPLE_MAX_JOBS = 10_000_000
"""The most jobs ``traincast sample`` generates (about 2 GB of job table in memory)."""


@app.command(help=SAMPLE_HELP)
def sample(
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Write the sample here (.parquet, .pq, .csv or .csv.gz); "
        "default: print where the bundled one is.")] = None,
    jobs: Annotated[int | None, typer.Option(
        callback=within(1, SAMPLE_MAX_JOBS), help="Jobs to generate, 1 to 10,000,000 (default "
        "3,000; with -o).")] = None,
    seed: Annotated[int | None, typer.Option(
        callback=within(0), help="Random seed, at least 0 (same seed -> same trace; default "
        "2019; with -o).")] = None,
    json_out: JsonOpt = False,
) -> None:
    from traincast.files import write_whole
    from traincast.trace.sample import (
        DEFAULT_JOBS,
        DEFAULT_SEED,
        generate,
        sample_path,
        table_kind,
        write_table,
    )

    check_output(output)  # before generating
    if output is None and (jobs is not None or seed is not None):
        raise TraincastError(f"{'--jobs' if jobs is not None else '--seed'} generates a sample: "
                             "give -o FILE to write it",
                             hint="without -o, sample prints where the bundled one is")
    kind = table_kind(output) if output is not None else ""
    jobs = DEFAULT_JOBS if jobs is None else jobs
    seed = DEFAULT_SEED if seed is None else seed

    if output is None:
        if json_out:
            print_json({"path": str(sample_path())})
        else:
            console.print(str(sample_path()), highlight=False, soft_wrap=True)
        return
    from traincast.analysis.characterize import characterize as run

    table = generate(jobs, seed)
    path = write_whole(output, lambda tmp: write_table(table, tmp, kind))
    char = run(table, fill=False)
    if json_out:
        print_json({"path": str(path), "seed": seed, "jobs": char["jobs"], "gpus": char["gpus"],
                    "gpu_time_s": char["gpu_time_s"], "by_architecture": char["by_architecture"]})
        return
    print_table(group_table(char["by_architecture"], f"Sample trace {path} (seed {seed}): "
                            f"{char['jobs']:,} jobs"), console)
