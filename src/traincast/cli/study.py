"""``traincast study``: the end-to-end study of a trace (the bundled sample by default)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from traincast.cli import app
from traincast.cli.common import (
    CatalogOpt,
    ComputeOpt,
    JsonOpt,
    OverlapOpt,
    WorkloadOpt,
    catalog_from,
    check_output,
    check_price,
    console,
    note,
    note_curves_fallback,
    print_assumed,
    print_assumed_hardware,
    print_json,
    progress,
    step_progress,
)
from traincast.cli.tables import Table, print_table
from traincast.cli.trace import FormatOpt, MapOpt, note_no_jobs, warn_bad_rows
from traincast.trace import DEFAULT_WORKLOAD
from traincast.units import fmt_pct, plural


def architecture_table(char: dict[str, Any]) -> Table:
    """The paper's first result from a characterization: each architecture's share of jobs,
    GPUs and GPU time, and the mean share of iteration time in communication."""
    b = char["breakdown"]
    zero = int(char.get("zero_gpu_jobs") or 0)
    jobs = (f"{plural(char['jobs'] - zero, 'job')} with GPUs; {zero:,} without, left out"
            if zero else plural(char["jobs"], "job"))
    running = char.get("censored_gpu_time_s") or 0.0
    bound = (f" (a lower bound: {fmt_pct(running / char['gpu_time_s'])} of it is of jobs still "
             "running at the trace's end, counted up to it)"
             if char.get("gpu_time_lower_bound") and char.get("gpu_time_s") else "")
    t = Table(title=f"Cluster by architecture ({jobs})", title_justify="left",
              caption=f"jobs, GPUs, GPU time: each architecture's share of the cluster's"
              f"{bound}; comm: mean share of predicted iteration time in communication (of the "
              f"four parts' sum, before any --overlap), over "
              f"{plural(b.get('jobs', 0), 'job')} with known features, weighted by job / by "
              "GPUs",
              caption_justify="left")
    for col in ("architecture", "jobs", "GPUs", "GPU time", "comm (job)", "comm (GPU)"):
        t.add_column(col, justify="right" if col != "architecture" else "left",
                     no_wrap=col == "architecture")
    def row(name: str, shares: dict[str, Any], comm: dict[str, Any]) -> None:
        t.add_row(name, *(fmt_pct(shares.get(k)) for k in ("job_share", "gpu_share",
                                                           "gpu_time_share")),
                  *(fmt_pct(comm.get(k, {}).get("comm"))
                    for k in ("job_weighted", "gpu_weighted")))

    for name, shares in char["by_architecture"].items():
        row(name, shares, b.get("by_architecture", {}).get(name, {}))
    t.add_section()
    row("all", dict.fromkeys(("job_share", "gpu_share", "gpu_time_share"),
                             1.0 if char["jobs"] > zero else None), b)  # no job with GPUs: -
    return t


SOURCE_ROWS = 20
"""Trace files shown in the terminal's by-file table (all in summary.json and the report)."""


def source_table(rows: list[dict[str, Any]]) -> Table:
    """The headline numbers of each trace file of a study of several, on its own jobs (the
    first :data:`SOURCE_ROWS`)."""
    from traincast.analysis.study import BY_SOURCE_COLUMNS, by_source_caption, by_source_cells

    t = Table(title="By trace file (each on its own jobs)", title_justify="left",
              caption=by_source_caption(counts=False), caption_justify="left")
    t.add_column("trace", overflow="fold", ratio=1)
    for header, *_ in BY_SOURCE_COLUMNS:
        t.add_column(header, justify="right", overflow="fold")
    for r in rows[:SOURCE_ROWS]:
        t.add_row(r["trace"], *by_source_cells(r["numbers"], counts=False))
    if len(rows) > SOURCE_ROWS:
        t.add_row(f"... {len(rows) - SOURCE_ROWS:,} more (summary.json: by_source)",
                  *([""] * (len(t.columns) - 1)))
    return t


@app.command()
def study(
    trace: Annotated[list[Path] | None, typer.Argument(
        help="Trace files or folders (a folder: the files of the --format that it holds, "
             "docs/traces.md); none = the bundled synthetic sample.")] = None,
    output: Annotated[Path, typer.Option("-o", "--output", help="Folder for the tables, "
                                         "the job store and the report.")]
    = Path("traincast-study"),
    format: FormatOpt = "csv",
    map: MapOpt = None,
    catalog: CatalogOpt = None,
    compute: ComputeOpt = "auto",
    price: Annotated[str | None, typer.Option(
        "--price", help="GPU-hour prices for the cheapest recommendation (TOML, or "
        "'aws-on-demand').")] = None,
    overlap: OverlapOpt = 0.0,
    no_report: Annotated[bool, typer.Option("--no-report", help="Tables only, no HTML.")]
    = False,
    workload: WorkloadOpt = DEFAULT_WORKLOAD,
    json_out: JsonOpt = False,
) -> None:
    """Ingest, characterize, the paper's what-if set (nvlink-allreduce, eth100, gpu-a100,
    mixed-precision, op-fusion) and recommend, then the findings in words and an HTML report.

    Writes into -o DIR: study.json, summary.json, characterize.json, whatif.json,
    whatif_jobs.csv, recommend.json, recommend.csv, jobs.parquet, jobs.duckdb (the job store),
    report.html + figures/. Time model, scenarios and assumptions: docs/model.md,
    docs/scenarios.md.
    """
    from traincast.analysis.study import study as run
    from traincast.trace import parse_mapping

    check_output(output, folder=True)  # created when missing; never a file
    check_price(price)
    cat = catalog_from(catalog, compute)
    note_curves_fallback(cat, json_out)
    with progress(json_out) as bar:
        on_step = step_progress(bar, bar.add_task("study", total=5 if no_report else 6),
                                "study")  # the report: a step
        result = run(trace, output, format=format, mapping=parse_mapping(map),
                     catalog=cat, prices=price, overlap=overlap,
                     report=not no_report, on_step=on_step, workload=workload,
                     on_report=warn_bad_rows)
    char = result.pop("characterize")  # in characterize.json; --json stays the summary
    if not char.get("jobs"):
        note_no_jobs(", ".join(str(t) for t in trace) if trace else None, json_out)
    if json_out:
        print_json(result)
        return
    summary = result["summary"]
    if result["sample"]:
        console.print("[bold yellow]Bundled synthetic sample[/bold yellow] (the default "
                      "trace, `traincast sample`): the numbers below illustrate the method, "
                      "not a real cluster.",
                      highlight=False)
    console.print(architecture_table(char))
    console.print(f"[bold]Findings[/bold] ({summary['numbers'].get('jobs') or 0:,} jobs)")
    bullets = Table.grid(padding=(0, 1))
    bullets.add_column(no_wrap=True)
    bullets.add_column()
    for sentence in summary["sentences"]:
        if not sentence.startswith("This study used the bundled"):
            bullets.add_row("  •", sentence)
    console.print(bullets, highlight=False)
    if summary.get("by_source"):
        print_table(source_table(summary["by_source"]), console)
    print_assumed(result.get("assumed_workload"))
    print_assumed_hardware(char.get("default_hardware"),
                           (char.get("breakdown") or {}).get("jobs") or 0)
    if gone := result.get("dropped_sources"):
        note(f"the folder's store held an earlier study's trace: dropped "
             f"{', '.join(Path(f).name for d in gone for f in d['files'])} "
             f"({sum(d['jobs'] for d in gone):,} jobs)")
    console.print(f"Tables in [bold]{result['out_dir']}[/bold]: {', '.join(result['files'])}",
                  highlight=False)
    if result["report"]:
        console.print(f"Report: [bold]{result['report']}[/bold]", highlight=False)
    elif result["report_error"]:
        note(f"[yellow]report not written[/yellow] ({result['report_error']}); "
             "the tables above are complete")
    total = sum(result["timings_s"].values())
    note(f"done in {total:.1f} s (" + ", ".join(f"{k} {v:.1f} s" for k, v in
                                              result["timings_s"].items()) + ")")
