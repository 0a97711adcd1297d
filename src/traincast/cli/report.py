"""``traincast report``: figures and a self-contained HTML report of a study, trace or store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from traincast.cli import app
from traincast.cli.common import (
    CatalogOpt,
    ComputeOpt,
    JsonOpt,
    WorkloadOpt,
    catalog_from,
    check_model_spec,
    check_output,
    check_text_file,
    console,
    given,
    is_quiet,
    note_curves_fallback,
    print_json,
    progress,
    say_above,
    step_progress,
)
from traincast.cli.tables import Table
from traincast.cli.trace import DbOpt, FormatOpt, MapOpt, refuse_trace_flags, warn_bad_rows
from traincast.errors import TraincastError
from traincast.trace import DEFAULT_WORKLOAD

REPORT_HELP = (
    "Write report.html (self-contained: figures embedded, no network needed) and figures/*.png "
    "and *.svg.\n\n"
    "Input: --study DIR (a folder written by `traincast study`; the report goes into it unless "
    "-o), or a TRACE (ingested) or the job store (--db; default traincast.duckdb), on which the "
    "whole study runs first, into -o DIR.\n\n"
    "Figures: time breakdown per architecture and per workload (mean over jobs of each job's "
    "component share t_c / sum(t), weighted by 1, n_gpus or GPU time), CDFs of GPUs per "
    "job, job duration, communication share, what-if speedup and predicted GPU utilization "
    "(co-location), jobs/GPUs/GPU time per architecture; with --validate FILE (validate "
    "JSON) predicted vs measured; with --roofline MODEL --gpu NAME the model's ops on that "
    "GPU's roofline (attainable = min(P, intensity x M), P and M the achievable rates predict "
    "prices at: the dtype's peak x the large product's fraction, memory bandwidth x the "
    "element-wise fraction; profiling needs torch). "
    "How to read each figure: docs/report.md.")


def _study_from_jobs(trace: list[Path] | None, db: Path | None, fmt: str, mapping: dict[str, str],
                     out: Path, catalog: Any, json_out: bool, workload: str | None) -> None:
    """Run the study (without its report) on a trace, or on the store's jobs, into ``out``
    (the store's jobs are studied as read, and kept as ``store_jobs.parquet``, a canonical
    Parquet trace of what was studied)."""
    from traincast.analysis.study import study, write_parquet

    jobs, store = None, None
    if not trace:
        from traincast.cli.trace import note_store_sources
        from traincast.trace.store import db_path, load_jobs

        note_store_sources(db, json_out)
        jobs, store = load_jobs(db), db_path(db)
        out.mkdir(parents=True, exist_ok=True)
        trace = [out / "store_jobs.parquet"]
        write_parquet(jobs, trace[0])
        fmt, mapping = "csv", {}
    with progress(json_out) as bar:
        on_step = step_progress(bar, bar.add_task("study", total=6), "study")
        study(trace, out, format=fmt, mapping=mapping or None, catalog=catalog, report=False,
              on_step=on_step, workload=workload, on_report=warn_bad_rows, jobs=jobs,
              sources_db=store)


@app.command(help=REPORT_HELP)
def report(
    ctx: typer.Context,
    trace: Annotated[list[Path] | None, typer.Argument(
        help="Trace files or folders to study first (read with --format).")] = None,
    db: DbOpt = None,
    study_dir: Annotated[Path | None, typer.Option(
        "--study", help="A study folder (traincast study -o DIR).")] = None,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Folder for report.html and figures/ (default: the --study "
        "folder, else traincast-report).")] = None,
    validate: Annotated[Path | None, typer.Option(
        "--validate", help="A validate JSON (traincast validate --json): adds the "
        "predicted-vs-measured figure and table.")] = None,
    roofline: Annotated[str | None, typer.Option(
        "--roofline", help="Model (zoo:NAME, hf:CONFIG, file.py:FUNC: imported, its code runs) "
        "to draw on a roofline; needs --gpu.")] = None,
    gpu: Annotated[str | None, typer.Option(
        "--gpu", help="Catalog GPU (or alias) of the roofline chart.")] = None,
    format: FormatOpt = "csv",
    map: MapOpt = None,
    catalog: CatalogOpt = None,
    compute: ComputeOpt = "auto",
    workload: WorkloadOpt = DEFAULT_WORKLOAD,
    json_out: JsonOpt = False,
) -> None:
    from traincast.report import write_report

    if study_dir is not None and (trace or db is not None):
        raise TraincastError("give either --study DIR or a TRACE / --db, not both")
    if study_dir is None:
        refuse_trace_flags(trace, format, map, bool(given(ctx, "format")))
    if study_dir is not None and (stray := given(ctx, "format", "map", "workload")):
        raise TraincastError(f"{', '.join(stray)}: flags of the study a TRACE or --db runs "
                             "first; --study DIR reports a study already made",
                             hint="leave them out, or study again with them (traincast study "
                                  "TRACE ...)")
    if (roofline is None) != (gpu is None):
        raise TraincastError("--roofline MODEL and --gpu NAME go together",
                             hint="e.g. --roofline zoo:resnet50 --gpu V100")
    check_output(output, folder=True)  # created when missing; never a file
    if trace:  # ingested into the store; without a trace the store is only read
        check_output(db, "--db")
    if validate is not None:
        check_text_file(validate, "--validate", "validate JSON")
    check_model_spec(roofline, "--roofline")
    cat = catalog_from(catalog, compute)
    note_curves_fallback(cat, json_out)
    if gpu is not None:
        cat.gpu(gpu)  # fail early on an unknown GPU, before any long work
    profile = None
    if roofline is not None:  # profile first: a bad model spec fails before any long work
        try:
            import torch  # noqa: F401
        except ImportError:
            raise TraincastError("--roofline profiles the model, which needs torch",
                                 hint="pip install 'traincast[torch]'") from None
        from traincast.features.profile import profile_model

        with progress(json_out) as bar:
            bar.add_task(f"profiling {roofline}", total=None)
            profile = profile_model(roofline, ops=True)
    if study_dir is not None:
        folder = study_dir
        out = output or study_dir
    else:
        from traincast.trace import parse_mapping

        out = folder = output or Path("traincast-report")
        _study_from_jobs(trace, db, format, parse_mapping(map), out, cat, json_out, workload)
    written: dict[str, str] = {}
    with progress(json_out) as bar:  # on stderr; none with --quiet or --json
        task = bar.add_task("report", total=None)
        say = say_above(bar, task)

        def on_step(step: str, done: int, total: int | None) -> None:
            say(f"report: {step}")
            bar.update(task, completed=done, total=total)

        path = write_report(folder, validate_json=validate,
                            roofline={"profile": profile, "gpu": gpu} if profile else None,
                            out_dir=out, catalog=cat, on_step=on_step,
                            on_figure=lambda stem, title: written.update({stem: title}))
    figures = [str(out / "figures" / f"{s}.{ext}") for s in written for ext in ("png", "svg")]
    if json_out:
        print_json({"report": str(path), "study_dir": str(folder), "figures": figures})
        return
    if written:
        table = Table(title=f"Figures in {out / 'figures'} (.png and .svg)",
                      title_justify="left")
        table.add_column("file")
        table.add_column("what it shows")
        for stem, title in written.items():
            table.add_row(stem, title)
        console.print(table)
    else:  # a figure needs jobs (or a roofline profile): the page says what it has
        from traincast.report.build import NO_FIGURE

        console.print(NO_FIGURE, highlight=False)
    console.print(f"Report written: [bold]{escape(str(path))}[/bold]", highlight=False)
    if not is_quiet():
        console.print(f"[dim]open {escape(str(path))} in a browser (no network needed); "
                      "how to read the figures: docs/report.md[/dim]", highlight=False)
