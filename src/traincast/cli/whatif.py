"""``traincast whatif`` and ``traincast recommend``: scenarios and recommendations over traces."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.csv as pacsv
import typer
from rich.table import Table as RichTable

from traincast.analysis.recommend import MIN_GAIN
from traincast.analysis.whatif import JOB_ROW_COLUMNS
from traincast.cli import app
from traincast.cli.common import (
    MAX_GPUS,
    CatalogOpt,
    ComputeOpt,
    JsonOpt,
    OverlapOpt,
    WorkloadOpt,
    catalog_from,
    check_price,
    check_scenarios,
    console,
    fmt_seconds,
    given,
    note,
    print_assumed,
    print_json,
    print_unpredicted,
    progress,
    within,
)
from traincast.cli.tables import RULES_OFF, Table, compact_table
from traincast.cli.trace import (
    AddressOpt,
    DbOpt,
    EngineOpt,
    FormatOpt,
    MapOpt,
    ParquetDirOpt,
    check_trace_io,
    load_trace_jobs,
    trace_chunks,
)
from traincast.errors import TraincastError
from traincast.files import write_whole
from traincast.predict import job_row, zoo_ops
from traincast.trace import DEFAULT_WORKLOAD, workload_assumption
from traincast.units import fmt_pct, fmt_x

TraceArg = Annotated[Path | None, typer.Argument(
    help="A trace (ingested into the store on the way); none = the whole store (--db).")]


_pct = partial(fmt_pct, decimals=0)


def print_whatif(result: dict[str, Any]) -> None:
    """Scenario summaries as a rich table, then each scenario per architecture."""
    summaries = result.get("scenarios") or {next(iter(result["definitions"])): result["summary"]}
    t = compact_table(f"What-if over {result['jobs']:,} jobs",
                       "priced = matched jobs with a prediction, which the other columns "
                       "are over; not fit = ports that do not fit; speedup = base time / "
                       "scenario time: mean, median, GPU wtd (weighted by GPUs), time wtd (by "
                       "GPU time); saved = share of GPU time saved",
                       ("scenario", "priced", "not fit", "sped up", "mean", "median", "GPU wtd",
                        "time wtd", "saved"),
                       [(name, f"{s['predicted']:,}", f"{s['not_applied']:,}",
                         _pct(s["sped_up_share"]), fmt_x(s["mean_speedup"]),
                         fmt_x(s["median_speedup"]), fmt_x(s["gpu_weighted_mean_speedup"]),
                         fmt_x(s["gpu_time_weighted_mean_speedup"]),
                         _pct(s["gpu_time_saved_share"])) for name, s in summaries.items()])
    console.print(t)
    print_unpredicted(result.get("unpredicted", {}))
    for name, s in summaries.items():
        rows = [(a, b) for a, b in s["by_architecture"].items() if b["matched"]]
        if len(summaries) > 3 or not rows:
            continue
        t = compact_table(f"{name}: by architecture", None,
                           ("architecture", "jobs", "matched", "not fit", "sped up", "mean",
                            "median", "GPU wtd"),
                           [(arch, f"{b['jobs']:,}", f"{b['matched']:,}",
                             f"{b['not_applied']:,}", _pct(b["sped_up_share"]),
                             fmt_x(b["mean_speedup"]), fmt_x(b["median_speedup"]),
                             fmt_x(b["gpu_weighted_mean_speedup"])) for arch, b in rows])
        console.print(t)


@app.command()
def whatif(
    trace: TraceArg = None,
    scenario: Annotated[list[str] | None, typer.Option(
        "--scenario", "-s", help="Shipped scenario name or TOML file (repeatable); shipped: "
        "nvlink-allreduce, allreduce-cluster, eth100, ib-hdr, gpu-a100, gpu-h100, nvlink-on, "
        "nvlink-off, pcie4, mixed-precision, op-fusion, overlap.")] = None,
    sweep: Annotated[list[str] | None, typer.Option(
        "--sweep", help="KEY=V1,V2,...: one scenario per value, over the given scenarios or "
        "every job (e.g. nic=eth25,eth50,eth100,eth200). A link value is a catalog name, with "
        "the link's framing efficiency and latency (eth25: 2.94 GB/s of payload), or a speed "
        "(25Gbit: 3.125 GB/s, all payload, no latency).")] = None,
    jobs_out: Annotated[bool, typer.Option(
        "--jobs", help="Per-job rows (job_id, scenario, matched, applied, base_total_s, "
        "scenario_total_s, speedup): in the JSON, or as CSV with -o.")] = False,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Write the per-job rows (--jobs) to this CSV file.")] = None,
    format: FormatOpt = "csv",
    map: MapOpt = None,
    db: DbOpt = None,
    catalog: CatalogOpt = None,
    compute: ComputeOpt = "auto",
    overlap: OverlapOpt = 0.0,
    engine: EngineOpt = "local",
    address: AddressOpt = None,
    parquet_dir: ParquetDirOpt = None,
    workload: WorkloadOpt = DEFAULT_WORKLOAD,
    json_out: JsonOpt = False,
) -> None:
    """How much faster would each job run under a scenario (speedup = T_base / T_scenario)?

    A scenario changes the jobs its match clause selects: hardware (nic, intra, pcie links,
    gpu, node), precision (amp: fp16 peak, memory-bound bytes x the profile's amp/fp32 ratio),
    fusion (bytes x the profile's fused/unfused ratio), overlap, or the architecture (a port:
    the job keeps its n training GPUs (n_workers x gpus_per_worker, else n_gpus) and must fit
    the target: 1w1g n <= 1, allreduce-local n <= node GPUs,
    memory per GPU S + A <= mem_gb, S = weights + grads + optimizer, A = activations; else it
    stays and is counted as not fit). Unmatched jobs have speedup 1. Summary over matched jobs:
    share sped up (> 1.01), mean and median speedup by job, by GPUs and by GPU time
    (n_gpus × duration). Format and rules: docs/scenarios.md.
    """
    from traincast.analysis.whatif import whatif as run

    if not scenario and not sweep:
        raise TraincastError("give --scenario NAME|FILE (repeatable) or --sweep KEY=V1,V2,...")
    if sweep and len(sweep) > 1:
        raise TraincastError(f"--sweep given {len(sweep)} times: one sweep varies one key",
                             hint="sweep one key; for two, write scenario files with one "
                                  "value of the first and --sweep the second over them")
    if output is not None and not jobs_out:
        raise TraincastError("-o FILE writes the per-job rows of --jobs: add --jobs",
                             hint="the summary is printed (or --json) either way")
    check_trace_io(trace, db, {"-o": output}, engine, address, parquet_dir, format=format)
    check_scenarios(scenario)
    cat = catalog_from(catalog, compute)
    chunks = trace_chunks(trace, db, format, map, json_out, cat, workload)

    def run_all(on_rows: Any = None) -> dict[str, Any]:
        with progress(json_out) as bar:
            task = bar.add_task(f"what-if ({engine})", total=None)
            return run(chunks, scenario or [], cat, sweep_spec=sweep[0] if sweep else None,
                       overlap=overlap,
                       engine=engine, address=address, parquet_dir=parquet_dir,
                       per_job=jobs_out, on_rows=on_rows,
                       progress=lambda done, total: bar.update(task, completed=done,
                                                               total=total))

    if jobs_out and output is not None:  # rows streamed to the file, whole or not at all
        written = [0]

        def write(tmp: Path) -> None:
            writer: pacsv.CSVWriter | None = None
            try:
                def on_rows(rows: pa.Table) -> None:
                    nonlocal writer
                    writer = writer or pacsv.CSVWriter(tmp, rows.schema)
                    writer.write_table(rows)
                    written[0] += rows.num_rows

                result.update(run_all(on_rows))
            finally:
                if writer is not None:
                    writer.close()
            if writer is None:  # no job: the header alone
                tmp.write_text(",".join(f'"{c}"' for c in JOB_ROW_COLUMNS) + "\n")

        result: dict[str, Any] = {}
        write_whole(output, write)
        note(f"wrote {written[0]:,} per-job rows to {output}", json_out)
    else:
        result = run_all()
    rows = result.pop("job_rows", None)
    result["assumed_workload"] = chunks.assumed
    if rows is not None:
        result["job_rows"] = rows.to_pylist()
    if json_out:
        print_json(result)
        return
    print_whatif(result)
    print_assumed(result["assumed_workload"])
    if rows is not None and output is None:
        t = Table(title="Per job", title_justify="left")
        for col in ("job", "scenario", "matched", "applied", "base", "scenario", "speedup"):
            t.add_column(col)
        for r in result["job_rows"][:50]:
            t.add_row(str(r["job_id"]), r["scenario"], str(r["matched"]), str(r["applied"]),
                      fmt_seconds(r["base_total_s"]), fmt_seconds(r["scenario_total_s"]),
                      fmt_x(r["speedup"]))
        console.print(t)
        if len(result["job_rows"]) > 50:
            note(f"first 50 of {len(result['job_rows']):,} rows; -o FILE writes them all")


def _own_ops(name: str, feats: Mapping[str, Any], workload: str) -> Mapping[str, Any] | None:
    """``recommend``'s one job priced from its own per-op table (``feats``) under its workload
    ``name``; any other workload from the shipped zoo tables."""
    return feats if workload == name else zoo_ops(workload)


def _single_job(features: dict[str, Any], arch: str, gpus: int, workers: int | None,
                ps: int | None, gpu: str | None, node: str | None, workload: str | None
                ) -> pa.Table:
    """The one-row job table of the job flags (the same row ``traincast predict`` builds)."""
    row = job_row(features, arch=arch, gpus=gpus, gpus_per_node=None, workers=workers, ps=ps,
                  node=node, gpu=gpu)
    return pa.table({"job_id": ["job"], **{k: pa.array(v, from_pandas=True)
                                            for k, v in row.items()},
                     "workload": [workload], "batch_size": [features.get("batch_size")]})


def _reason_keys(reasons: list[str]) -> tuple[list[str], RichTable]:
    """Each reason's key, ``[1]``, ``[2]``, ... in order of first use (jobs that share a reason
    share its key), and the legend: one row per reason, its text indented under its key."""
    keys: dict[str, str] = {}
    for text in reasons:
        keys.setdefault(text, f"[{len(keys) + 1}]")
    legend = RichTable.grid(padding=(0, 1))
    legend.add_column(no_wrap=True)
    legend.add_column()
    for text, key in keys.items():
        legend.add_row(key, text)
    return [keys[r] for r in reasons], legend


JOB_LABEL_MAX = 12
"""The longest job id a recommend table shows whole (a UUID would take three lines)."""


def _job_label(job_id: Any) -> str:
    """A job id as a table shows it: whole up to :data:`JOB_LABEL_MAX` characters, else its
    first four and last seven around ``…`` (ids that share a prefix, Philly's
    ``application_1506638472019_NNNNN``, differ at their end)."""
    text = str(job_id)
    return text if len(text) <= JOB_LABEL_MAX else text[:4] + "…" + text[-7:]


def print_recommend(result: dict[str, Any], rows: pa.Table) -> None:
    """The summary, then the first 20 jobs in two tables (the same hardware; anywhere, and with
    prices the cheapest); each reason once, under its table, keyed from its jobs' rows."""
    s = result["summary"]
    n = result["jobs"]
    t = Table(title=f"Recommendations for {n:,} job{'' if n == 1 else 's'}", title_justify="left",
              **RULES_OFF)
    t.caption = ("over the jobs with a prediction: changed = the share whose setup changes "
                 "(more than 1% faster); mean, median = speedup (1.00× where kept); "
                 "top choices = jobs per architecture; per node")
    t.caption_justify = "left"
    for col in ("", "changed", "mean", "median", "top choices"):
        t.add_column(col, justify="left" if col in ("", "top choices") else "right")
    labels = {"arch": "best architecture, same hardware", "best": "best architecture + node",
              "cheapest": "cheapest per iteration"}
    for key, label in labels.items():
        if key in s:
            b = s[key]
            top = ", ".join(f"{a} {n:,}" for a, n in list(b["architectures"].items())[:3])
            top += "; " + ", ".join(f"{a} {n:,}" for a, n in list(b["nodes"].items())[:3])
            t.add_row(label, _pct(b["changed_share"]), fmt_x(b["mean_speedup"]),
                      fmt_x(b["median_speedup"]), top)
    console.print(t)
    for nd, why in result.get("left_out", {}).items():
        console.print(f"left out of the candidates: {nd} ({why}; to compare it, name it with "
                      "--candidate-node, with each other preset to compare)",
                      style="dim", highlight=False)
    d = rows.slice(0, 20).to_pylist()
    ids = [_job_label(r["job_id"]) for r in d]
    cut = any(len(str(r["job_id"])) > JOB_LABEL_MAX for r in d)
    keys, legend = _reason_keys([r["arch_reason"] for r in d])
    t = Table(title="Per job" + (" (first 20)" if rows.num_rows > 20 else ""),
              title_justify="left", **RULES_OFF)
    for col in ("job", "now", "time", "best, same hardware", "speedup", "why"):
        t.add_column(col, overflow="fold")
    assumed = False
    for r, key, label in zip(d, keys, ids, strict=True):
        now = f"{r['architecture'] or '-'} on {r['node']}"
        if not r.get("gpu_type_given", True):
            now += "*"  # one word with the node name: they wrap together
            assumed = True
        t.add_row(label, now, fmt_seconds(r["base_total_s"]),
                  r["arch_architecture"] or "-", fmt_x(r["arch_speedup"]), key)
    notes = ["time = per iteration",
             *(["* the trace names no GPU type or node: the default node "
                "(traincast.resolve.DEFAULT_NODE) is assumed"] if assumed else []),
             *([f"job ids longer than {JOB_LABEL_MAX} characters are cut (…); -o FILE.csv "
                "and --json have them whole"] if cut else [])]
    if notes:
        t.caption = "; ".join(notes)
        t.caption_justify = "left"
    console.print(t)
    console.print(legend)
    keys, legend = _reason_keys([r["best_reason"] for r in d])
    t = Table(title="Fastest anywhere" + (" / cheapest per iteration" if "cheapest" in s else ""),
              title_justify="left", **RULES_OFF)
    for col in ("job", "fastest", "speedup", "why", *(["cheapest", "$/iter"]
                                                     if "cheapest" in s else [])):
        t.add_column(col, overflow="fold")
    for r, key in zip(d, keys, strict=True):
        extra = []
        if "cheapest" in s:
            c = r["cheapest_cost_per_iter_usd"]
            extra = [f"{r['cheapest_architecture'] or '-'} on {r['cheapest_node']}",
                     "-" if c is None or not math.isfinite(c) else f"{c:.3g}"]
        t.add_row(_job_label(r["job_id"]), f"{r['best_architecture'] or '-'} on {r['best_node']}",
                  fmt_x(r["best_speedup"]), key, *extra)
    console.print(t)
    console.print(legend)


RECOMMEND_HELP = (
    "The fastest architecture and placement for each job, and with --price the cheapest.\n\n"
    "For each job (a trace, the store, or one job given by flags): the architecture and "
    "placement with the lowest predicted iteration time among those that fit its GPUs and "
    "memory, its speedup over the present, and the component whose time it cuts; a change "
    "only when it gains more than --min-gain (default 5%: smaller predicted gains are within "
    "the model's error); with --price the "
    "cheapest per iteration too (cost = T_total × n_gpus × USD per GPU-hour / 3600). "
    "Candidates keep the job's training GPU count; fit rules: docs/scenarios.md.")


ONE_JOB_FLAGS = ("arch", "gpus", "workers", "ps", "gpu", "node", "batch", "mem_bytes",
                 "weight_bytes", "embedding_bytes", "input_bytes")
"""recommend's flags of one job given by --flops, --model, --features or --workload."""


@app.command(help=RECOMMEND_HELP)
def recommend(
    ctx: typer.Context,
    trace: TraceArg = None,
    price: Annotated[str | None, typer.Option(
        "--price", help="GPU-hour prices (TOML: [gpu.NAME] or [node.NAME] with "
        "usd_per_gpu_hour and source), or 'aws-on-demand' (shipped example).")] = None,
    node_opt: Annotated[list[str] | None, typer.Option(
        "--candidate-node", help="Limit the candidate node presets to these (repeatable; "
        "default: every catalog node but the paper-2019 reference under --compute auto and "
        "those whose GPU no current PyTorch CUDA build runs, compute capability below 5.0).")
    ] = None,
    jobs_out: Annotated[bool, typer.Option(
        "--jobs/--no-jobs", help="Per-job recommendations in the JSON (rows; --no-jobs leaves "
        "them out for a large trace, except for one job given by flags); the summary is "
        "printed either way.")] = True,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Write the per-job recommendations to this CSV file.")] = None,
    flops: Annotated[str | None, typer.Option(help="One job: FLOPs of compute-bound ops.")]
    = None,
    mem_bytes: Annotated[str | None, typer.Option(help="One job: memory-bound bytes.")] = None,
    weight_bytes: Annotated[str | None, typer.Option(help="One job: dense weight bytes.")]
    = None,
    embedding_bytes: Annotated[str | None, typer.Option(help="One job: embedding bytes.")]
    = None,
    input_bytes: Annotated[str | None, typer.Option(help="One job: input bytes.")] = None,
    model: Annotated[str | None, typer.Option(
        help="One job: zoo:NAME, hf:CONFIG, file.py:F (imported: its code runs).")] = None,
    features: Annotated[Path | None, typer.Option(help="One job: features JSON.")] = None,
    batch: Annotated[int | None, typer.Option(
        callback=within(1), help="One job: batch size for --model.")] = None,
    workload: Annotated[str | None, typer.Option(
        help="One job: workload tag (its zoo profile gives features and memory). With a "
        "TRACE (or the store): the workload assumed for jobs whose trace names none: mix "
        "(default: the bundled sample's zoo mix, drawn per job by md5(job_id)), a zoo model, "
        "or none; docs/traces.md.")] = None,
    arch: Annotated[str, typer.Option(help="One job: its current architecture.")] = "1w1g",
    gpus: Annotated[int, typer.Option(
        callback=within(1, MAX_GPUS), help="One job: GPUs (1 to 1,000,000; ps-worker: "
        "--workers, if given, must agree).")] = 1,
    workers: Annotated[int | None, typer.Option(
        callback=within(1, MAX_GPUS), help="One job: ps-worker workers.")] = None,
    ps: Annotated[int | None, typer.Option(
        callback=within(1, MAX_GPUS), help="One job: parameter servers (ps-worker).")] = None,
    gpu: Annotated[str | None, typer.Option(help="One job: GPU type.")] = None,
    node: Annotated[str | None, typer.Option(help="One job: its node preset.")] = None,
    format: FormatOpt = "csv",
    map: MapOpt = None,
    db: DbOpt = None,
    catalog: CatalogOpt = None,
    compute: ComputeOpt = "auto",
    overlap: OverlapOpt = 0.0,
    min_gain: Annotated[float, typer.Option(
        "--min-gain", callback=within(0.0), help="Recommend a change only when it is more "
        "than this fraction (>= 0) faster than the job as it runs (the cheapest: cheaper); "
        "else the job keeps its setup.")] = MIN_GAIN,
    json_out: JsonOpt = False,
) -> None:
    from traincast.analysis.recommend import recommend as run
    from traincast.architectures import ARCHITECTURES
    from traincast.cli.predict import check_job_flags

    check_trace_io(trace, db, {"-o": output}, format=format)
    check_price(price)
    one_job = any(x is not None for x in (flops, model, features)) or \
        (workload is not None and trace is None and db is None)
    if one_job and trace is not None:
        raise TraincastError("give either a TRACE or one job's flags, not both")
    if not one_job and (stray := given(ctx, *ONE_JOB_FLAGS)):
        raise TraincastError(f"{', '.join(stray)}: flags of one job given by --flops, --model, "
                             "--features or --workload; they do not apply to a TRACE or the "
                             "store", hint="give the job (--flops F --mem-bytes B "
                             "--weight-bytes W, --model, ...), or leave them out")
    if one_job:
        if arch not in ARCHITECTURES:
            raise TraincastError(f"unknown architecture {arch!r} (--arch)",
                                 hint=f"choose one of {', '.join(ARCHITECTURES)}")
        check_job_flags(arch, gpus if given(ctx, "gpus") else None, workers, ps)
    cat = catalog_from(catalog, compute)
    ops_of: Any = zoo_ops
    if one_job:
        if workload and not any(x is not None for x in (flops, model, features)):
            from traincast.trace import fill_features
            from traincast.zoo.profiles import resolve_workload

            if resolve_workload(workload) is None:
                raise TraincastError(f"--workload {workload!r}: no zoo model or workload tag "
                                     "of that name", hint="traincast zoo list names them")

            table = fill_features(_single_job({}, arch, gpus, workers, ps, gpu, node,
                                              workload))
        else:
            from traincast.cli.predict import features_from_flags

            feats = features_from_flags(features, model, batch, flops, mem_bytes, weight_bytes,
                                        embedding_bytes, input_bytes, False, ops=True)
            if feats.get("ops"):  # the job's own per-op table prices it, as predict does
                own = workload or str(model or features)
                workload = own
                ops_of = partial(_own_ops, own, feats)
            table = _single_job(feats, arch, gpus, workers, ps, gpu, node, workload)
    else:
        workload = workload or DEFAULT_WORKLOAD
        table = load_trace_jobs(trace, db, format, map, json_out, cat, workload)
    with progress(json_out) as bar:
        task = bar.add_task("recommend: candidates", total=None)

        def step(name: str, done: int, total: int) -> None:
            bar.update(task, description=f"recommend: {name}", completed=done, total=total)

        result = run(table, cat, nodes=node_opt, prices=price, overlap=overlap, progress=step,
                     min_gain=min_gain, ops_of=ops_of)
    rows = result.pop("rows")
    result["assumed_workload"] = None if one_job else workload_assumption(table, workload)
    if output is not None:
        from traincast.analysis.study import write_csv

        with progress(json_out) as bar:
            bar.add_task(f"writing {output}", total=None)
            write_csv(rows, output)
        note(f"wrote {rows.num_rows:,} recommendations to {output}", json_out)
    if json_out:
        if jobs_out or one_job:
            result["rows"] = rows.to_pylist()
        print_json(result)
        return
    print_recommend(result, rows)
    print_assumed(result["assumed_workload"])
