"""``traincast colocate``: predicted GPU utilization and the co-location what-if (Horus)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box

from traincast.cli import app
from traincast.cli.common import (
    CatalogOpt,
    ComputeOpt,
    JsonOpt,
    WorkloadOpt,
    catalog_from,
    console,
    given,
    note,
    note_curves_fallback,
    print_assumed,
    print_assumed_hardware,
    print_json,
    print_unpredicted,
    progress,
    within,
)
from traincast.cli.tables import Table
from traincast.cli.trace import DbOpt, FormatOpt, MapOpt, check_trace_io, load_trace_jobs
from traincast.trace import DEFAULT_WORKLOAD, workload_assumption
from traincast.units import fmt_amount, fmt_pct, join_words, plural

COLOCATE_HELP = (
    "Predict each job's GPU utilization, compare it with the measured one, and replay the trace "
    "with interference-aware co-location (after Horus, Yeung et al., TPDS 2022).\n\n"
    "Utilization u = (T_comp - T_idle) / T_total of the time model, busy over the step (phi = "
    "FLOP-bound share, mu = memory-bound share, u = phi + mu; T_idle: the GPU waiting for the "
    "host to issue its next op, one host thread issuing the ops in order ahead of the GPU); "
    "with a measured gpu_util column (a "
    "fraction; PAI 2020: gpu_wrk_util / plan_gpu) the error in percentage points and the Pearson "
    "and Spearman correlations. Co-location: jobs on the same GPU model with the same whole GPU "
    "count (1 unless --multi-gpu) are paired, the most pairs with u_a + u_b <= --util-bound, "
    "lowest utilizations paired outside-in; pairs whose memory footprints exceed the GPU memory "
    "are split again. Slowdown of both jobs of a pair = 1 + phi_a phi_b + mu_a mu_b + kappa "
    "(phi_a mu_b + mu_a phi_b), kappa = --cross-contention (1 = time slicing: 1 + u_a u_b). GPU "
    "time: exclusive n x D; a paired job holds half its GPUs for slowdown x D; GPUs freed = n "
    "per pair. Formulas and what is left out: docs/colocate.md.")


def _num(v: Any, fmt: str = "{:.2f}") -> str:
    """A figure for the table; ``-`` where there is none (None, or NaN: a correlation of
    values that do not vary)."""
    return "-" if v is None or v != v else fmt.format(v)


def _table(title: str, caption: str | None = None) -> Table:
    t = Table(title=title, caption=caption, title_justify="left", caption_justify="left",
              box=box.SIMPLE_HEAD, show_header=False, pad_edge=False, show_edge=False,
              min_width=66)
    t.add_column("", no_wrap=True)
    t.add_column("", justify="right")
    return t


def no_pair_line(co: dict[str, Any], multi_gpu: bool, measured: bool) -> str:
    """Why eligible jobs made no pair (``co``: colocate's ``colocation`` object): none shares
    its group (GPU model, n) with another; every pair under the bound is over the GPU memory;
    or the utilizations it pairs by (predicted or measured) sum above the bound."""
    more = [] if multi_gpu else ["--multi-gpu (jobs of any GPU count)"]
    if not co["pairable"]:
        return (("no pair: one job is eligible, and a pair needs two of" if co["eligible"] == 1
                 else f"no pair: no two of the {co['eligible']:,} eligible jobs are of")
                + " the same GPU model and GPU count" + (f" (try {more[0]})" if more else ""))
    if co["memory_rejected_pairs"]:
        return (f"no pair: the {plural(co['memory_rejected_pairs'], 'pair')} under the bound "
                "would not fit in the GPU's memory together (--no-memory-check keeps them)")
    whose = "the model predicts" if co["by"] == "predicted" else "the trace measures"
    tries = [*more, "a higher --util-bound",
             *(["--by measured"] if measured and co["by"] != "measured" else [])]
    return (f"no pair fits the bound: {whose} that these jobs keep their GPU busy, any two of "
            f"a group summing above {co['util_bound']:g} (try {join_words(tries, 'or')})")


def print_colocate(result: dict[str, Any]) -> None:
    """Utilization and co-location summaries as rich tables."""
    u = result["utilization"]
    print_unpredicted(result.get("unpredicted", {}))
    t = _table(f"GPU utilization of {plural(result['jobs'], 'job')}",
               "pp = percentage points; Spearman = correlation of ranks"
               if u["measured_jobs"] else "the trace measures no job's utilization")
    p, m, c = u["predicted"], u["measured"], u["comparison"]
    t.add_row("predicted (jobs)", f"{u['predicted_jobs']:,}")
    t.add_row("predicted mean / median", f"{fmt_pct(p['mean'])} / {fmt_pct(p['median'])}")
    t.add_row("measured (jobs)", f"{u['measured_jobs']:,}")
    if u["measured_jobs"]:
        t.add_row("measured mean / median", f"{fmt_pct(m['mean'])} / {fmt_pct(m['median'])}")
        t.add_row("compared (jobs)", f"{c['jobs']:,}")
        t.add_row("mean / median abs error", f"{_num(c['mean_abs_error_pp'], '{:.1f}')} / "
                  f"{_num(c['median_abs_error_pp'], '{:.1f}')} pp")
        t.add_row("bias (predicted - measured)", f"{_num(c['bias_pp'], '{:+.1f}')} pp")
        t.add_row("Pearson / Spearman", f"{_num(c['pearson'])} / {_num(c['spearman'])}")
    console.print(t)
    co = result["colocation"]
    s = co["slowdown"]
    t = _table(f"Co-location by {co['by']} utilization (--util-bound {co['util_bound']:g}, "
               f"--cross-contention κ {co['cross_contention']:g})",
               f"eligible = jobs that ran, on whole GPUs, with a {co['by']} utilization, "
               + ("any GPU count (--multi-gpu: pairs of the same count)" if co.get("multi_gpu")
                  else "of one GPU (--multi-gpu pairs multi-GPU jobs too)")
               + "; slowdown = T co-located / T alone, of the paired jobs; GPUs and time saved "
               "against exclusive placement")
    t.add_row("eligible jobs", f"{co['eligible']:,}")
    t.add_row("pairs (jobs paired)", f"{co['pairs']:,} ({co['paired_jobs']:,})")
    t.add_row("pairs refused: GPU memory", f"{co['memory_rejected_pairs']:,}")
    t.add_row("GPUs freed", f"{fmt_amount(co['gpus_freed'])} of {fmt_amount(co['gpus_total'])} "
              f"({fmt_pct(co['gpus_freed_share'])})")
    t.add_row("GPU time saved", f"{co['gpu_time_saved_s'] / 3600:,.1f} GPU-h "
              f"({fmt_pct(co['gpu_time_saved_share'])})")
    t.add_row("slowdown mean / median", f"{_num(s['mean'], '{:.3f}×')} / "
              f"{_num(s['median'], '{:.3f}×')}")
    t.add_row("slowdown p90 / max", f"{_num(s['p90'], '{:.3f}×')} / {_num(s['max'], '{:.3f}×')}")
    console.print(t)


@app.command(help=COLOCATE_HELP)
def colocate(
    ctx: typer.Context,
    trace: Annotated[Path | None, typer.Argument(
        help="A trace (ingested into the store on the way); none = the whole store (--db).")]
    = None,
    util_bound: Annotated[float, typer.Option(
        "--util-bound", callback=within(0.01, 2.0),
        help="Pair two jobs only when their utilizations sum to at most this, from 0.01 to 2 "
        "(Horus: 1.0).")]
    = 1.0,
    cross: Annotated[float, typer.Option(
        "--cross-contention", callback=within(0.0, 1.0),
        help="kappa, from 0 to 1: how much a FLOP-bound and a memory-bound kernel slow each "
        "other (1 = time slicing, CUDA's default for two processes; 0 = ideal spatial "
        "sharing).")] = 1.0,
    multi_gpu: Annotated[bool, typer.Option(
        "--multi-gpu", help="Also pair multi-GPU jobs (same GPU count: each GPU holds one "
        "worker of each job).")] = False,
    by: Annotated[str, typer.Option(
        "--by", help="Pair by the predicted utilization (Horus) or the measured one.")]
    = "predicted",
    no_memory_check: Annotated[bool, typer.Option(
        "--no-memory-check",
        help="Keep pairs whose footprints (model state + activations) exceed the GPU memory "
        "(by default they are split again).")] = False,
    _memory_check: Annotated[bool, typer.Option(
        "--memory-check", hidden=True, help="The default (kept for scripts that give it).")]
    = False,
    workload: WorkloadOpt = DEFAULT_WORKLOAD,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Write per-job rows (job_id, predicted_util, measured_util, "
        "partner, slowdown) to this CSV file.")] = None,
    format: FormatOpt = "csv",
    map: MapOpt = None,
    db: DbOpt = None,
    catalog: CatalogOpt = None,
    compute: ComputeOpt = "auto",
    json_out: JsonOpt = False,
) -> None:
    from traincast.analysis.colocate import check_util_source
    from traincast.analysis.colocate import colocate as run

    check_util_source(by, "--by")  # before any ingest
    check_trace_io(trace, db, {"-o": output}, format=format, map=map,
                   format_given=bool(given(ctx, "format")))
    cat = catalog_from(catalog, compute)
    note_curves_fallback(cat, json_out)
    table = load_trace_jobs(trace, db, format, map, json_out, cat, workload)
    with progress(json_out) as bar:
        task = bar.add_task("co-location", total=1)
        result = run(table, cat, bound=util_bound, cross=cross, multi_gpu=multi_gpu,
                     memory_check=not no_memory_check, by=by, per_job=output is not None)
        bar.update(task, completed=1)
    rows = result.pop("job_rows", None)
    result["assumed_workload"] = workload_assumption(table, workload)
    if rows is not None and output is not None:
        from traincast.analysis.study import write_csv

        write_csv(rows, output)
        note(f"wrote {rows.num_rows:,} per-job rows to {output}", json_out)
    if json_out:
        print_json(result)
        return
    print_colocate(result)
    print_assumed(result["assumed_workload"])
    print_assumed_hardware(result.get("default_hardware"),
                           result["utilization"]["predicted_jobs"])
    measured = result["utilization"]["measured_jobs"]
    if by == "measured" and not measured:
        note("no job is eligible: --by measured pairs jobs by the utilization the trace "
             "measured, and this trace measures none (a gpu_util column; PAI 2020's sensor "
             "table): pair by the predicted one (--by predicted)")
    elif (co := result["colocation"])["eligible"] and not co["pairs"]:
        note(no_pair_line(co, multi_gpu, bool(measured)))
