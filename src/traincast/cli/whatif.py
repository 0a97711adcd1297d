"""``traincast whatif`` and ``traincast recommend``: scenarios and recommendations over traces."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import pyarrow.csv as pacsv
import typer
from rich.table import Table as RichTable
from rich.text import Text

from traincast.analysis.recommend import GAINED_ROWS, MIN_GAIN, MIN_GAIN_MAX
from traincast.analysis.whatif import JOB_ROW_COLUMNS
from traincast.cli import app
from traincast.cli.common import (
    MAX_GPUS,
    CatalogOpt,
    ComputeOpt,
    JsonOpt,
    OverlapOpt,
    catalog_from,
    check_price,
    check_scenarios,
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
from traincast.engine.local import SHIPPED, Workloads
from traincast.errors import TraincastError, UnknownNameError
from traincast.files import write_whole
from traincast.hardware.catalog import Catalog
from traincast.predict import job_row, zoo_amp_ops, zoo_ops
from traincast.trace import DEFAULT_WORKLOAD, workload_assumption
from traincast.units import fmt_pct, fmt_seconds, fmt_share, fmt_sig, fmt_x, join_words, plural

TraceArg = Annotated[Path | None, typer.Argument(
    help="A trace (ingested into the store on the way); none = the whole store (--db).")]


_pct = partial(fmt_pct, decimals=0)


def _up_down(s: dict[str, Any]) -> str:
    """The shares of jobs sped up and slowed down (each by more than 1%): ``12%/3%``; a small
    share keeps a digit (``0.3%``) and a share of any job is never ``0%`` (``units.fmt_share``,
    counted)."""
    return (f"{fmt_share(s['sped_up_share'], counted=True)}/"
            f"{fmt_share(s['slowed_down_share'], counted=True)}")


_saved = fmt_share
"""The share of GPU time saved (``units.fmt_share``: a small loss reads ``-0.04%``, not
``-0%``)."""

# One job given by flags, in place of a trace (whatif and recommend)
FlopsOpt = Annotated[str | None, typer.Option(
    help="One job: FLOPs of compute-bound ops per iteration (2.4e13, or 24T: k/M/G/T decimal).")]
MemBytesOpt = Annotated[str | None, typer.Option(
    help="One job: bytes read+written by memory-bound ops per iteration.")]
WeightBytesOpt = Annotated[str | None, typer.Option(
    help="One job: dense parameter bytes (= gradient bytes exchanged per iteration).")]
EmbeddingBytesOpt = Annotated[str | None, typer.Option(
    help="One job: embedding bytes touched per iteration.")]
InputBytesOpt = Annotated[str | None, typer.Option(
    help="One job: input batch bytes copied to the GPU per iteration.")]
ModelOpt = Annotated[str | None, typer.Option(
    help="One job: zoo:NAME, hf:CONFIG, file.py:F (imported: its code runs).")]
FeaturesOpt = Annotated[Path | None, typer.Option(help="One job: features JSON.")]
BatchOpt = Annotated[int | None, typer.Option(
    callback=within(1), help="One job: batch size for --model.")]
JobWorkloadOpt = Annotated[str | None, typer.Option(
    help="One job: workload tag (its zoo profile gives features and memory). With a TRACE (or "
    "the store): the workload assumed for jobs whose trace names none: mix (default: the "
    "bundled sample's zoo mix, drawn per job by md5(job_id)), a zoo model, or none; "
    "docs/traces.md.")]
WhatifWorkloadOpt = Annotated[str | None, typer.Option(
    "--workload", help="The workload assumed for the jobs of a TRACE (or the store) whose trace "
    "names none: mix (default: the bundled sample's zoo mix, drawn per job by md5(job_id)), a "
    "zoo model, or none; docs/traces.md. With one of the job's flags (--arch, --gpus, --node, "
    "...) and no TRACE: one job of that workload (its zoo profile gives features and memory).")]
ArchOpt = Annotated[str, typer.Option(help="One job: its current architecture.")]
GpusOpt = Annotated[int, typer.Option(
    callback=within(1, MAX_GPUS), help="One job: GPUs (1 to 1,000,000; default 1, or "
    "ps-worker's --workers; given beside --workers, the two must agree).", show_default=False)]
WorkersOpt = Annotated[int | None, typer.Option(
    callback=within(1, MAX_GPUS), help="One job: ps-worker workers.")]
PsOpt = Annotated[int | None, typer.Option(
    callback=within(1, MAX_GPUS), help="One job: parameter servers (ps-worker).")]
GpuOpt = Annotated[str | None, typer.Option(help="One job: GPU type.")]
NodeOpt = Annotated[str | None, typer.Option(help="One job: its node preset.")]

ONE_JOB_FLAGS = ("arch", "gpus", "workers", "ps", "gpu", "node", "batch", "mem_bytes",
                 "weight_bytes", "embedding_bytes", "input_bytes")
"""The flags of one job given by --flops, --model, --features or --workload."""


@dataclass(frozen=True)
class OneJob:
    """One job given by flags: its one-row job table, and where its per-op table, profile and
    precision come from (``engine.local.Workloads``: its own profile where it has one, else
    the shipped zoo's)."""

    table: pa.Table
    workloads: Workloads = SHIPPED


FEATURE_FLAGS = ("batch", "mem_bytes", "weight_bytes", "embedding_bytes", "input_bytes")
"""The one-job flags that describe its features, for --model or --flops, not --workload."""


def trace_flags(ctx: typer.Context) -> dict[str, Any]:
    """``map`` and ``format_given`` for ``check_trace_io``: a trace's ``--map`` and whether
    ``--format`` was given; neither where one job is given by --flops, --model or --features,
    for :func:`one_job` to refuse them as flags that do not apply to one job."""
    if any(ctx.params.get(k) is not None for k in ("flops", "model", "features")):
        return {"map": None, "format_given": False}
    return {"map": ctx.params.get("map"), "format_given": bool(given(ctx, "format"))}


def known(find: Callable[[str], Any], name: str, flag: str) -> None:
    """``find(name)`` (a catalog lookup), its unknown-name error named with ``flag``, as
    predict names it."""
    try:
        find(name)
    except UnknownNameError as exc:
        raise UnknownNameError(f"{exc} ({flag})", hint=exc.hint) from None


def one_job(ctx: typer.Context, trace: Path | None, db: Path | None, catalog: Catalog,
            workload_alone: bool = True, refuse_shape: bool = True) -> OneJob | None:
    """The job of the command's one-job flags (its values of :data:`ONE_JOB_FLAGS` and
    ``flops``, ``model``, ``features``, ``workload``, read from ``ctx.params``), None for a
    TRACE or the store: a job is given by --flops, --model or --features, or, without a TRACE
    or --db, by --workload: alone where ``workload_alone`` (recommend), else with one of the
    job's flags (whatif, whose --workload alone is the workload assumed for the store's jobs).
    Errors, each naming its flags: the job's flags with a TRACE or the store, or without a job;
    the store's flags (--db, --format, --map) with a job; feature flags with --workload alone;
    a GPU or node the catalog does not know; a shape the architecture cannot run (1w1g on 8
    GPUs) where ``refuse_shape`` (whatif: every scenario would price a job that cannot run;
    recommend finds one that can, as for a trace row of that shape)."""
    from traincast.architectures import ARCHITECTURES
    from traincast.cli.predict import check_job_flags

    f = ctx.params
    by_features = any(f[k] is not None for k in ("flops", "model", "features"))
    by_workload = f["workload"] is not None and trace is None and db is None and \
        (workload_alone or bool(given(ctx, *ONE_JOB_FLAGS)))
    if not (by_features or by_workload):
        if stray := given(ctx, *ONE_JOB_FLAGS):
            raise TraincastError(f"{', '.join(stray)}: flags of one job given by --flops, "
                                 "--model, --features or --workload; they do not apply to a "
                                 "TRACE or the store", hint="give the job (--flops F --mem-bytes "
                                 "B --weight-bytes W, --model, ...), or leave them out")
        return None
    if trace is not None:
        raise TraincastError("give either a TRACE or one job's flags, not both")
    if store := given(ctx, "db", "format", "map"):
        raise TraincastError(f"{', '.join(store)}: flags of a trace or the store; they do not "
                             "apply to one job given by flags", hint="leave them out")
    if not by_features and given(ctx, "batch"):
        raise TraincastError(f"--batch applies to --model; --workload {f['workload']} takes its "
                             "zoo profile at the zoo's batch",
                             hint=f"--model zoo:MODEL --batch {f['batch']} profiles it at yours")
    if not by_features and (extra := given(ctx, *FEATURE_FLAGS)):
        raise TraincastError(f"{', '.join(extra)}: features of a job given by --flops; "
                             f"--workload {f['workload']} takes its zoo profile's",
                             hint="give --flops F --mem-bytes B --weight-bytes W (with "
                                  "--workload for its zoo profile), or leave them out")
    arch = f["arch"]
    if arch not in ARCHITECTURES:
        raise TraincastError(f"unknown architecture {arch!r} (--arch)",
                             hint=f"choose one of {', '.join(ARCHITECTURES)}")
    check_job_flags(arch, f["gpus"] if given(ctx, "gpus") else None, f["workers"], f["ps"])
    for flag, find in (("gpu", catalog.gpu), ("node", catalog.node)):
        if f[flag] is not None:
            known(find, f[flag], f"--{flag}")
    place = (arch, f["gpus"], f["workers"], f["ps"], f["gpu"], f["node"])
    _check_placement(_single_job({"flops_compute_bound": 0.0, "bytes_memory_bound": 0.0,
                                  "weight_bytes": 0.0}, *place, None), catalog, refuse_shape)
    if not by_features:
        from traincast.trace import fill_features
        from traincast.zoo.profiles import resolve_workload

        if resolve_workload(f["workload"]) is None:
            raise TraincastError(f"--workload {f['workload']!r}: no zoo model or workload tag "
                                 "of that name", hint="traincast zoo list names them")
        return OneJob(fill_features(_single_job({}, *place, f["workload"])))
    from traincast.cli.predict import features_from_flags
    from traincast.engine.workload import job_profile
    from traincast.zoo.profiles import workload_features

    feats = features_from_flags(f["features"], f["model"], f["batch"], f["flops"],
                                f["mem_bytes"], f["weight_bytes"], f["embedding_bytes"],
                                f["input_bytes"], False, ops=True)
    amp = bool(feats.get("amp"))  # a profile under --amp: priced in mixed precision, as predict
    if not feats.get("ops") and not feats.get("memory_bytes"):  # flags: the workload's zoo
        return OneJob(_single_job(feats, *place, f["workload"]), Workloads(amp=amp))
    # its workload name, as a [match] workload clause reads it: the tag, the model, or the
    # model a features file names (else the file)
    own = f["workload"] or str(f["model"] or feats.get("model") or f["features"])
    # the zoo profile of the model the job runs, for its ratios: the tag, the model flag, or
    # the model a features file names
    shipped = workload_features(f["workload"] or f["model"] or str(feats.get("model") or ""))
    profile = job_profile(feats, shipped)
    # under a mixed-precision scenario: a --model job profiled again under autocast; a
    # features file's table at the mixed-precision rates, as predict --features --amp
    amp_ops = _amp_ops(own, f["model"], f["batch"], profile) if f["model"] and not amp \
        else None
    return OneJob(_single_job(feats, *place, own),
                  Workloads(partial(_own, own, feats, zoo_ops),
                            partial(_own, own, profile, workload_features), amp, amp_ops))


def print_whatif(result: dict[str, Any]) -> None:
    """Scenario summaries as a rich table, then each scenario per architecture."""
    summaries = result.get("scenarios") or {next(iter(result["definitions"])): result["summary"]}
    t = compact_table(f"What-if over {plural(result['jobs'], 'job')}",
                       "priced = matched jobs with a prediction, which the other columns "
                       "are over; not fit = changes (ports, GPU or node moves) that do not "
                       "fit; up/down = shares of jobs "
                       "more than 1% faster / slower; speedup = base time / scenario time: "
                       "mean and median over jobs, GPU wtd and time wtd: means weighted by "
                       "GPUs and by GPU time; saved = share of GPU time saved (< 0: more GPU time)",
                       ("scenario", "priced", "not fit", "up/down", "mean", "median", "GPU wtd",
                        "time wtd", "saved"),
                       [(name, f"{s['predicted']:,}", f"{s['not_applied']:,}",
                         _up_down(s), fmt_x(s["mean_speedup"]),
                         fmt_x(s["median_speedup"]), fmt_x(s["gpu_weighted_mean_speedup"]),
                         fmt_x(s["gpu_time_weighted_mean_speedup"]),
                         _saved(s["gpu_time_saved_share"])) for name, s in summaries.items()])
    console.print(t)
    print_unpredicted(result.get("unpredicted", {}))
    print_flat_peak(result)
    for s in summaries.values():
        if line := s.get("unchanged_why"):
            console.print(Text(line, style="dim"))
    for name, s in summaries.items():
        rows = [(a, b) for a, b in s["by_architecture"].items() if b["matched"]]
        if len(summaries) > 3 or not rows:
            continue
        t = compact_table(f"{name}: by architecture", None,
                           ("architecture", "jobs", "matched", "not fit", "up/down", "mean",
                            "median", "GPU wtd"),
                           [(arch, f"{b['jobs']:,}", f"{b['matched']:,}",
                             f"{b['not_applied']:,}", _up_down(b),
                             fmt_x(b["mean_speedup"]), fmt_x(b["median_speedup"]),
                             fmt_x(b["gpu_weighted_mean_speedup"])) for arch, b in rows])
        console.print(t)
    if len(summaries) > 3:
        console.print(Text(f"per-architecture tables: with three scenarios or fewer (here "
                           f"{len(summaries)}); --json has them for every scenario",
                           style="dim"))


@app.command()
def whatif(
    ctx: typer.Context,
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
    flops: FlopsOpt = None,
    mem_bytes: MemBytesOpt = None,
    weight_bytes: WeightBytesOpt = None,
    embedding_bytes: EmbeddingBytesOpt = None,
    input_bytes: InputBytesOpt = None,
    model: ModelOpt = None,
    features: FeaturesOpt = None,
    batch: BatchOpt = None,
    workload: WhatifWorkloadOpt = None,
    arch: ArchOpt = "1w1g",
    gpus: GpusOpt = 1,
    workers: WorkersOpt = None,
    ps: PsOpt = None,
    gpu: GpuOpt = None,
    node: NodeOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """How much faster would each job run under a scenario (speedup = T_base / T_scenario)?

    The jobs of a trace (or of the store), or one job given by flags as in predict (--model,
    --features or --flops ..., with --arch, --gpus, --node, ...; or --workload with one of
    those): then its time under each scenario.

    A scenario changes the jobs its match clause selects: hardware (nic, intra, pcie links,
    gpu, node: its GPUs packed onto the new nodes), precision (amp: fp16 peak, else bf16;
    memory-bound bytes and FLOP-bound FLOPs x the profile's amp/fp32 ratios; a job priced op by
    op runs its model's table profiled under autocast), fusion (bytes x the profile's
    fused/unfused ratio; with amp, its fused-amp ratio), overlap, or the architecture (a port:
    the job keeps its n training GPUs (n_workers x gpus_per_worker, else n_gpus)). A port, a
    GPU or a node change must fit: 1w1g n <= 1, allreduce-local n <= node GPUs on one node,
    and memory per GPU within mem_gb: S + A for a replica, S(1-e) + Se/n + A for pearl,
    weights(1-e) + grads + A for ps-worker (S = weights + grads + optimizer, A =
    activations, e = the embeddings' share of parameters); else the job stays and is counted
    as not fit. Unmatched jobs have speedup 1. Summary over matched jobs:
    share sped up (> 1.01), mean and median speedup by job, by GPUs and by GPU time
    (n_gpus × duration). Format and rules: docs/scenarios.md.
    """
    from traincast.analysis.study import nan_as_null
    from traincast.analysis.whatif import whatif as run

    if not scenario and not sweep:
        from traincast.analysis.study import STUDY_SCENARIOS
        from traincast.scenarios import shipped_scenarios

        raise TraincastError("give --scenario NAME|FILE (repeatable) or --sweep KEY=V1,V2,...",
                             hint="the shipped scenarios: " + ", ".join(shipped_scenarios())
                                  + "; the study's set: " + " ".join(
                                      f"-s {n}" for n in STUDY_SCENARIOS))
    if sweep and len(sweep) > 1:
        raise TraincastError(f"--sweep given {len(sweep)} times: one sweep varies one key",
                             hint="sweep one key; for two, write scenario files with one "
                                  "value of the first and --sweep the second over them")
    check_trace_io(trace, db, {"-o": output}, engine, address, parquet_dir, format=format,
                   **trace_flags(ctx))
    check_scenarios(scenario)
    cat = catalog_from(catalog, compute)
    note_curves_fallback(cat, json_out)
    job = one_job(ctx, trace, db, cat, workload_alone=False)
    if output is not None and not (jobs_out or job):
        raise TraincastError("-o FILE writes the per-job rows of --jobs: add --jobs",
                             hint="the summary is printed (or --json) either way")
    if job is not None and engine != "local":
        raise TraincastError("one job given by flags runs on the local engine",
                             hint="leave out --engine")
    chunks: Any = job.table if job is not None else \
        trace_chunks(trace, db, format, map, json_out, cat, workload or DEFAULT_WORKLOAD)
    jobs_out = jobs_out or job is not None  # one job: its rows are the answer

    def run_all(on_rows: Any = None) -> dict[str, Any]:
        with progress(json_out) as bar:
            task = bar.add_task(f"what-if ({engine})", total=None)
            return run(chunks, scenario or [], cat, sweep_spec=sweep[0] if sweep else None,
                       overlap=overlap,
                       engine=engine, address=address, parquet_dir=parquet_dir,
                       per_job=jobs_out, on_rows=on_rows,
                       progress=lambda done, total: bar.update(task, completed=done,
                                                               total=total),
                       workloads=job.workloads if job else SHIPPED)

    if jobs_out and output is not None:  # rows streamed to the file, whole or not at all
        written = [0]

        def write(tmp: Path) -> None:
            writer: pacsv.CSVWriter | None = None
            try:
                def on_rows(rows: pa.Table) -> None:
                    nonlocal writer
                    writer = writer or pacsv.CSVWriter(tmp, rows.schema)
                    writer.write_table(nan_as_null(rows))
                    written[0] += rows.num_rows

                result.update(run_all(on_rows))
            finally:
                if writer is not None:
                    writer.close()
            if writer is None:  # no job: the header alone
                tmp.write_text(",".join(f'"{c}"' for c in JOB_ROW_COLUMNS) + "\n")

        result: dict[str, Any] = {}
        write_whole(output, write)
        note(f"wrote {plural(written[0], 'per-job row')} to {output}", json_out)
    else:
        result = run_all()
    rows = result.pop("job_rows", None)
    result["assumed_workload"] = None if job is not None else chunks.assumed
    if job is None:
        from traincast.analysis.characterize import default_hardware

        result["default_hardware"] = default_hardware(cat, chunks.unnamed_hardware)
    if rows is not None:
        result["job_rows"] = rows.to_pylist()
    if json_out:
        print_json(result)
        return
    if job is not None and output is None:
        print_one_job(result, job.table, cat)
        return
    print_whatif(result)
    print_assumed(result["assumed_workload"])
    summaries = result.get("scenarios") or {"": result.get("summary") or {}}
    print_assumed_hardware(result.get("default_hardware"), max(
        (int(s.get("predicted") or 0) for s in summaries.values()), default=0))
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


def print_one_job(result: dict[str, Any], table: pa.Table, catalog: Catalog) -> None:
    """One job's what-if: its time as it runs, on the GPU and node it resolves to, then under
    each scenario (or why not)."""
    from traincast.resolve import hardware_of

    job = table.slice(0, 1).to_pylist()[0]
    node, gpu = (str(x.strings()[0]) for x in hardware_of(table.slice(0, 1), catalog))
    rows = result["job_rows"]
    base = rows[0]["base_total_s"] if rows else math.nan

    def outcome(r: dict[str, Any]) -> str:
        return "applied" if r["applied"] else \
            "does not fit" if r["matched"] else "does not apply"

    # title and caption at the terminal's width, not the narrow table's
    console.print(Text(f"{job['workload'] or 'the job'}, {job['architecture']} on "
                       f"{plural(job['n_gpus'], 'GPU')} ({gpu} of {node}): {fmt_seconds(base)} per "
                       "iteration as it runs", style="italic"))
    console.print(compact_table(
        None, None, ("scenario", "outcome", "time", "speedup"),
        [(r["scenario"], outcome(r), fmt_seconds(r["scenario_total_s"]), fmt_x(r["speedup"]))
         for r in rows]))
    console.print(Text("does not apply = the scenario's match clause leaves the job out; does "
                       "not fit = a port the job's GPUs or memory cannot take "
                       "(docs/scenarios.md); speedup = base time / scenario time", style="dim"))
    print_unpredicted(result.get("unpredicted", {}))
    print_flat_peak(result)


def print_flat_peak(result: dict[str, Any]) -> None:
    """A caution for each scenario (whatif) or the candidates (recommend) that move jobs onto a
    GPU priced at flat datasheet peaks beside jobs priced by a finer model
    (``compute.flat_peak_gpus``)."""
    from traincast.compute import FLAT_PEAK_CAUTION

    for name, gpus in (result.get("flat_peak") or {}).items():
        console.print(Text(f"caution: {name} moves jobs onto {join_words(gpus)}, "
                           f"{FLAT_PEAK_CAUTION}.", style="yellow"))
    if result.get("flat_peak_gpus"):
        console.print(Text(f"caution: the candidates on {join_words(result['flat_peak_gpus'])} "
                           f"are {FLAT_PEAK_CAUTION}.", style="yellow"))
    if result.get("own_flat_peak_gpus"):
        from traincast.compute import FLAT_PEAK_WHY

        console.print(Text(f"caution: jobs on {join_words(result['own_flat_peak_gpus'])} are "
                           f"priced as they run at flat datasheet peaks ({FLAT_PEAK_WHY}), so "
                           "they read faster, and candidates priced by the kernel model gain "
                           "less, than they would priced alike.", style="yellow"))


def _amp_ops(name: str, model: str, batch: int | None,
             profile: Mapping[str, Any]) -> Callable[[str], Any]:
    """The per-op tables under autocast of one job given by ``--model`` (its workload
    ``name``: the model profiled again under autocast, on first use, at the job's batch), any
    other workload's shipped one: what a scenario that turns mixed precision on prices, as
    ``predict --amp`` does. The job's own table carries the features the scenario gives the
    job under autocast (``profile``'s ``_amp`` keys, from its fp32 features and its
    workload's ratios), so that it is priced as profiled (``a = b = 1``), and with fusion too
    at the fused share of its bytes."""
    from functools import cache

    from traincast.features.profile import profile_model

    @cache
    def own() -> dict[str, Any]:
        table = profile_model(model, batch_size=batch, amp=True, ops=True)
        return table | {k: profile[f"{k}_amp"] for k in ("bytes_memory_bound",
                                                          "flops_compute_bound")
                        if profile.get(f"{k}_amp")}

    return lambda workload: own() if workload.strip().lower() == name.strip().lower() \
        else zoo_amp_ops(workload)


def _own(name: str, feats: Mapping[str, Any], shipped: Callable[[str], Any],
         workload: str) -> Mapping[str, Any] | None:
    """One job's own profile (``feats``) for its workload ``name``; any other workload's
    from the ``shipped`` lookup (the zoo's per-op tables or profiles)."""
    return feats if workload.strip().lower() == name.strip().lower() else shipped(workload)


def _check_placement(table: pa.Table, catalog: Catalog, refuse_shape: bool = True) -> None:
    """The job's architecture, GPUs and node as its flags give them must run as given, as
    ``predict`` asks (``resolve.explain``, naming the flags): 1w1g on two GPUs, allreduce-local
    beyond a node, is an error, not a job priced "does not fit" under every scenario; without
    ``refuse_shape`` such a shape passes (``BAD_SHAPE``), the other reasons do not."""
    from traincast.cli.predict import with_flags
    from traincast.jobs import Columns
    from traincast.resolve import BAD_SHAPE, OK, explain, resolve

    cols = Columns.of(table)
    r = resolve(cols, catalog)
    if r.reason[0] != OK and (refuse_shape or r.reason[0] != BAD_SHAPE):
        raise with_flags(explain(r, 0, cols, catalog))


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


JOB_COLUMN_MAX = 16
"""The widest a recommend table's job column grows; a longer id (a UUID) folds onto more
lines, whole."""


def _most_gained(rows: pa.Table, k: int) -> list[dict[str, Any]]:
    """The ``k`` rows with the largest ``best_speedup`` (``recommend.gain_order``: a job
    without one last, ties in the trace's order), as the report's table orders them."""
    from traincast.analysis.recommend import gain_order

    order = gain_order(rows["best_speedup"].to_numpy(zero_copy_only=False).astype(float))[:k]
    return rows.take(pa.array(order, pa.int64())).to_pylist()


def print_recommend(result: dict[str, Any], rows: pa.Table) -> None:
    """The summary, then the 20 jobs that gain most (``_most_gained``) in two tables (the same
    hardware; anywhere, and with prices the cheapest); each reason once, under its table, keyed
    from its jobs' rows."""
    s = result["summary"]
    n = result["jobs"]
    t = Table(title=f"Recommendations for {plural(n, 'job')}", title_justify="left",
              **RULES_OFF)
    t.caption = ("over the jobs with a prediction: changed = the share whose setup changes "
                 "(another architecture or node); mean, median = speedup (1.00× where kept); "
                 "top choices = how many jobs choose each architecture, then each node (a "
                 "job kept as it runs counts at its own node, one left out of the nodes jobs "
                 "may move to too)")
    t.caption_justify = "left"
    for col in ("", "changed", "mean", "median", "top choices"):
        t.add_column(col, justify="left" if col in ("", "top choices") else "right")
    labels = {"arch": "best architecture, same hardware", "best": "best architecture + node",
              "cheapest": "cheapest per iteration"}
    for key, label in labels.items():
        if key in s:
            b = s[key]
            top = "; ".join(part for part in (
                ", ".join(f"{a} {n:,}" for a, n in list(b[k].items())[:3])
                for k in ("architectures", "nodes")) if part) or "-"
            t.add_row(label, _pct(b["changed_share"]), fmt_x(b["mean_speedup"]),
                      fmt_x(b["median_speedup"]), top)
    console.print(t)
    if s.get("arch"):  # why no job changes, where none does
        from traincast.analysis.study import unchanged_architectures

        if line := unchanged_architectures(s["arch"], result["jobs"], result.get("min_gain")):
            console.print(line, style="dim", highlight=False)
    if (cheap := s.get("cheapest")) and not cheap.get("priced"):
        from traincast.analysis.recommend import unpriced_why

        console.print(unpriced_why(cheap, result["prices"]["file"]), highlight=False)
    elif cheap:
        console.print(f"cost summed over the {plural(cheap['priced'], 'job')} priced now and "
                      f"as chosen: ${fmt_sig(cheap['usd_per_1k_now'])} now, "
                      f"${fmt_sig(cheap['usd_per_1k_chosen'])} as chosen (US dollars per "
                      "1,000 iterations of each)", highlight=False)
    for nd, why in result.get("left_out", {}).items():
        console.print(f"left out of the nodes jobs may move to: {nd} ({why}; a job that runs "
                      "on it is still compared there; to compare moves to it, name it with "
                      "--candidate-node, with each other preset to compare)",
                      style="dim", highlight=False)
    print_flat_peak(result)
    if result.get("unpriced_nodes"):
        console.print(f"no price for {join_words(result['unpriced_nodes'])} (--price: "
                      f"{result['prices']['file']}): candidates for the fastest setup, not the "
                      "cheapest (a --price file prices them with \\[node.NAME] or \\[gpu.NAME], "
                      "usd_per_gpu_hour and source)", style="dim", highlight=False)
    d = _most_gained(rows, GAINED_ROWS)
    ids = [str(r["job_id"]) for r in d]
    keys, legend = _reason_keys([r["arch_reason"] for r in d])
    t = Table(title="Per job" + (f" (the {GAINED_ROWS} of {rows.num_rows:,} that gain most "
                                 "anywhere; every job: --json or -o FILE.csv)"
                                 if rows.num_rows > GAINED_ROWS else ""),
              title_justify="left", **RULES_OFF)
    for col in ("job", "now", "time", "best, same hardware", "speedup", "why"):
        t.add_column(col, overflow="fold", max_width=JOB_COLUMN_MAX if col == "job" else None,
                     justify="right" if col in ("time", "speedup") else "left")
    assumed = ""  # the default node of the jobs that name no GPU type or node
    for r, key, label in zip(d, keys, ids, strict=True):
        if r.get("n_gpus") == 0:  # a CPU job: no architecture, on no GPU node
            now = "- (0 GPUs)"
        else:
            now = f"{r['architecture'] or '-'} on {r['node']}"
            if not r.get("gpu_type_given", True):
                now += "*"  # one word with the node name: they wrap together
                assumed = str(r["node"])
        t.add_row(label, now, fmt_seconds(r["base_total_s"]),
                  r["arch_architecture"] or "-", fmt_x(r["arch_speedup"]), key)
    notes = ["time = per iteration",
             *([f"* the trace names no GPU type or node: the default node, {assumed}, is "
                "assumed (a --catalog file's [defaults] node = NAME sets another)"]
               if assumed else [])]
    if notes:
        t.caption = "; ".join(notes)
        t.caption_justify = "left"
    console.print(t)
    console.print(legend)
    priced = "cheapest" in s
    # one legend for both choices: a reason the fastest and the cheapest share, one key
    keys, legend = _reason_keys([r["best_reason"] for r in d]
                                + ([r["cheapest_reason"] for r in d] if priced else []))
    keys, cheap_keys = keys[:len(d)], keys[len(d):]
    t = Table(title="Fastest anywhere" + (" / cheapest per iteration" if priced else ""),
              title_justify="left", **RULES_OFF)
    ids = min(JOB_COLUMN_MAX, max((len(str(r["job_id"])) for r in d), default=3))
    for col in ("job", "fastest", "speedup", "why", *(["cheapest", "$/1k now", "$/1k", "why"]
                                                     if priced else [])):
        t.add_column(col, overflow="fold", max_width=JOB_COLUMN_MAX if col == "job" else None,
                     min_width=ids if col == "job" else None,  # an id folds only past the max
                     justify="right" if col in ("speedup", "$/1k now", "$/1k") else "left")
    if priced:
        t.caption = ("$/1k now: the job's present setup, $/1k: the cheapest's, US dollars "
                     "per 1,000 iterations (- where unpriced); why: the fastest's reason, "
                     "the last column the cheapest's")
        t.caption_justify = "left"

    def usd(c: float | None) -> str:  # per 1,000 iterations: 0.36, 0.0764, 0.00149
        return fmt_sig(None if c is None else 1000.0 * c)

    def setup(r: dict[str, Any], prefix: str) -> str:  # no choice (no prediction): no node
        arch = r[f"{prefix}_architecture"]
        return f"{arch} on {r[f'{prefix}_node']}" if arch else "-"

    for i, (r, key) in enumerate(zip(d, keys, strict=True)):
        extra = []
        if priced:
            extra = [setup(r, "cheapest"), usd(r.get("base_cost_per_iter_usd")),
                     usd(r["cheapest_cost_per_iter_usd"]), cheap_keys[i]]
        t.add_row(str(r["job_id"]), setup(r, "best"), fmt_x(r["best_speedup"]), key, *extra)
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
    flops: FlopsOpt = None,
    mem_bytes: MemBytesOpt = None,
    weight_bytes: WeightBytesOpt = None,
    embedding_bytes: EmbeddingBytesOpt = None,
    input_bytes: InputBytesOpt = None,
    model: ModelOpt = None,
    features: FeaturesOpt = None,
    batch: BatchOpt = None,
    workload: JobWorkloadOpt = None,
    arch: ArchOpt = "1w1g",
    gpus: GpusOpt = 1,
    workers: WorkersOpt = None,
    ps: PsOpt = None,
    gpu: GpuOpt = None,
    node: NodeOpt = None,
    format: FormatOpt = "csv",
    map: MapOpt = None,
    db: DbOpt = None,
    catalog: CatalogOpt = None,
    compute: ComputeOpt = "auto",
    overlap: OverlapOpt = 0.0,
    min_gain: Annotated[float, typer.Option(
        "--min-gain", callback=within(0.0, MIN_GAIN_MAX), help="Recommend a change only when "
        f"it is more than this fraction (0 to {MIN_GAIN_MAX:g}) faster than the job as it runs "
        "(the cheapest: cheaper); else the job keeps its setup.")] = MIN_GAIN,
    json_out: JsonOpt = False,
) -> None:
    from traincast.analysis.recommend import recommend as run

    check_trace_io(trace, db, {"-o": output}, format=format, **trace_flags(ctx))
    check_price(price)
    if min_gain > 1:  # a percentage given for the fraction reads as a gain of several-fold
        note(f"--min-gain {min_gain:g} is a fraction: a change is recommended only where it is "
             f"more than {min_gain:.0%} faster (5%: --min-gain 0.05)", json_out)
    cat = catalog_from(catalog, compute)
    note_curves_fallback(cat, json_out)
    for name in node_opt or ():  # before any ingest, named with its flag
        known(cat.node, name, "--candidate-node")
    job = one_job(ctx, trace, db, cat, refuse_shape=False)
    if job is None:
        workload = workload or DEFAULT_WORKLOAD
        table = load_trace_jobs(trace, db, format, map, json_out, cat, workload)
    else:
        table = job.table
    with progress(json_out) as bar:
        task = bar.add_task("recommend: candidates", total=None)

        def step(name: str, done: int, total: int) -> None:
            bar.update(task, description=f"recommend: {name}", completed=done, total=total)

        result = run(table, cat, nodes=node_opt, prices=price, overlap=overlap, progress=step,
                     min_gain=min_gain, workloads=job.workloads if job else SHIPPED)
    rows = result.pop("rows")
    result["assumed_workload"] = None if job else workload_assumption(table, workload)
    if output is not None:
        from traincast.analysis.study import write_csv

        with progress(json_out) as bar:
            bar.add_task(f"writing {output}", total=None)
            write_csv(rows, output)
        note(f"wrote {rows.num_rows:,} recommendations to {output}", json_out)
    if json_out:
        if jobs_out or job:
            result["rows"] = rows.to_pylist()
        print_json(result)
        return
    print_recommend(result, rows)
    print_assumed(result["assumed_workload"])
