"""The end-to-end study of a cluster trace (``traincast study``; ``make demo``).

Steps: ingest the trace into a job store inside the output folder (default trace: the bundled
synthetic sample), fill features from workload profiles, characterize, run the paper's what-if
set (:data:`STUDY_SCENARIOS`), recommend, write every table into the folder, state the findings
in words with numbers, and write the HTML report from those files (a report failure is recorded
in ``study.json`` and never loses the tables).

Files written (the report reads them): ``study.json`` (settings, timings, scenario
definitions), ``summary.json`` (findings: sentences and numbers), ``characterize.json``,
``whatif.json``, ``whatif_jobs.csv``, ``recommend.json``, ``recommend.csv``, ``jobs.parquet``
(canonical jobs plus the predicted breakdown ``data_io_s, compute_flop_s, compute_mem_s, comm_s,
total_s, bottleneck, gpu_util_pred``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from traincast.engine.local import base_breakdown, evaluate_columns
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.jobs import Columns
from traincast.model import COMPONENTS, Breakdown
from traincast.units import fmt_pct, fmt_x

STUDY_SCENARIOS: tuple[str, ...] = ("nvlink-allreduce", "eth100", "gpu-a100", "mixed-precision",
                                    "op-fusion")
PAPER = {"nvlink_sped_up_share": 0.6, "eth100_mean_speedup": 1.7}  # as quoted from the paper
Step = Callable[[str, int, int], None]


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def _clean(obj: Any) -> Any:
    """NaN/inf -> None, recursively (JSON has no NaN)."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, float | np.floating) and not math.isfinite(float(obj)):
        return None
    return obj


def write_json(path: Path, obj: Any) -> None:
    """Write one JSON object atomically (a temporary file, then a rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(_clean(obj), indent=2, default=_json_default), encoding="utf-8")
    tmp.replace(path)


def _write_csv(path: Path, table: pa.Table) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    pacsv.write_csv(table, tmp)
    tmp.replace(path)


def jobs_with_breakdown(jobs: pa.Table, catalog: Catalog, overlap: float = 0.0,
                        breakdown: Breakdown | None = None) -> pa.Table:
    """The job table plus its predicted breakdown columns (``jobs.parquet``); ``breakdown``:
    the jobs' base breakdown when the caller has it."""
    bd = breakdown or base_breakdown(Columns.of(jobs), catalog, overlap)
    names = np.array([*COMPONENTS, None], dtype=object)[bd.bottleneck_code()]
    extra = {f"{c}_s": getattr(bd, c) for c in COMPONENTS} | {"total_s": bd.total}
    for k, v in extra.items():
        jobs = jobs.append_column(k, pa.array(v, from_pandas=True))
    jobs = jobs.append_column("bottleneck", pa.array(names, type=pa.string()))
    return jobs.append_column("gpu_util_pred", pa.array(bd.gpu_util(), from_pandas=True))


_pct = partial(fmt_pct, decimals=0, missing="n/a")


_x = partial(fmt_x, missing="n/a")


def _pooled_mean(summary: dict[str, Any], archs: tuple[str, ...]) -> tuple[float, int]:
    """Job-weighted mean speedup over the matched jobs of some architectures."""
    total, count = 0.0, 0
    for a in archs:
        b = summary.get("by_architecture", {}).get(a)
        if b and b.get("predicted") and b.get("mean_speedup") is not None \
                and math.isfinite(b["mean_speedup"]):
            total += b["mean_speedup"] * b["predicted"]
            count += b["predicted"]
    return (total / count if count else float("nan")), count


def findings(char: dict[str, Any], whatif: dict[str, Any], rec: dict[str, Any],
             sample: bool) -> dict[str, Any]:
    """The paper-style findings: numbers, and sentences stating them."""
    scen = whatif.get("scenarios", {})
    bd = char.get("breakdown", {})
    jw = bd.get("job_weighted", {}) or {}
    gw = bd.get("gpu_weighted", {}) or {}
    nums: dict[str, Any] = {
        "jobs": char.get("jobs"), "jobs_with_prediction": bd.get("jobs"),
        "comm_share_mean": jw.get("comm"), "comm_share_gpu_weighted": gw.get("comm"),
        "data_io_share_mean": jw.get("data_io"),
        "compute_share_mean": (jw.get("compute_flop") or 0) + (jw.get("compute_mem") or 0)
        if jw else None}
    sentences = []
    if sample:
        sentences.append("This study used the bundled synthetic sample trace (generated from "
                         "published statistics, not a real cluster's jobs; docs/sample.md).")
    if not bd.get("jobs"):
        sentences.append(
            f"None of the {char.get('jobs', 0):,} jobs has known features (the trace gives no "
            "feature columns and no workload the zoo knows), so there is no time breakdown and "
            "no what-if number; add feature columns or workload tags (docs/traces.md).")
        return {"sample": sample, "sentences": sentences, "numbers": nums}
    sentences.append(
        f"Communication takes {_pct(nums['comm_share_mean'])} of iteration time on average "
        f"({_pct(nums['comm_share_gpu_weighted'])} GPU-weighted); data I/O "
        f"{_pct(nums['data_io_share_mean'])}, compute {_pct(nums['compute_share_mean'])} "
        f"(over {bd.get('jobs', 0):,} jobs with known features).")
    nv = scen.get("nvlink-allreduce")
    ps = (nv or {}).get("by_architecture", {}).get("ps-worker")
    if nv and not (ps and ps.get("predicted")):
        sentences.append("The trace has no PS/Worker job with known features: the NVLink "
                         "AllReduce port does not apply.")
    elif nv:
        nums.update({"ps_worker_jobs": ps.get("matched"),
                     "nvlink_sped_up_share": ps.get("sped_up_share"),
                     "nvlink_not_ported": ps.get("not_applied"),
                     "nvlink_ported_mean_speedup": ps.get("applied_mean_speedup"),
                     "nvlink_gpu_time_saved_share": ps.get("gpu_time_saved_share")})
        sentences.append(
            f"{_pct(ps.get('sped_up_share'))} of PS/Worker jobs speed up on NVLink AllReduce "
            f"(allreduce-local on an 8-GPU pai-v100-nvlink node; the paper reports about "
            f"{_pct(PAPER['nvlink_sped_up_share'])}); {ps.get('not_applied', 0):,} of "
            f"{ps.get('matched', 0):,} do not fit one node (GPUs or memory) and stay; those "
            f"ported gain {_x(ps.get('applied_mean_speedup'))} on average.")
    eth = scen.get("eth100")
    if eth:
        net, k = _pooled_mean(eth, ("ps-worker", "allreduce-cluster", "pearl"))
        nums.update({"eth100_mean_speedup_network_jobs": net, "eth100_network_jobs": k,
                     "eth100_mean_speedup_all": eth.get("mean_speedup"),
                     "eth100_gpu_time_saved_share": eth.get("gpu_time_saved_share")})
        network = (f"{_x(net)} on average over the {k:,} jobs that use the network "
                   "(PS/Worker and AllReduce across nodes; the paper reports about "
                   f"{PAPER['eth100_mean_speedup']:.1f}×), " if k else
                   "nothing to the jobs of this trace that use the network (there are none), ")
        sentences.append(
            f"25 → 100 Gbit Ethernet gives {network}{_x(eth.get('mean_speedup'))} over all "
            f"jobs, and saves {_pct(eth.get('gpu_time_saved_share'))} of the cluster's GPU "
            "time.")
    for name, label in (("gpu-a100", "Moving every job to A100 GPUs (same links)"),
                        ("mixed-precision", "Mixed precision"),
                        ("op-fusion", "Fusing memory-bound operators")):
        s = scen.get(name)
        if s:
            nums[f"{name}_mean_speedup"] = s.get("mean_speedup")
            nums[f"{name}_gpu_time_weighted_mean_speedup"] = s.get(
                "gpu_time_weighted_mean_speedup")
            sentences.append(
                f"{label} gives {_x(s.get('mean_speedup'))} on average "
                f"({_x(s.get('gpu_time_weighted_mean_speedup'))} GPU-time-weighted; "
                f"{_pct(s.get('sped_up_share'))} of jobs gain more than 1%).")
    arch = rec.get("summary", {}).get("arch")
    if arch:
        top = next(iter(arch.get("changed_to", {})), None)
        nums.update({"recommend_changed_share": arch.get("changed_share"),
                     "recommend_mean_speedup": arch.get("mean_speedup")})
        sentences.append(
            f"On their own hardware, {_pct(arch.get('changed_share'))} of jobs would run "
            f"faster on another architecture ({_x(arch.get('mean_speedup'))} on average over "
            "all jobs)" + (f"; the most frequent change is to {top}." if top else "."))
    return {"sample": sample, "sentences": sentences, "numbers": nums}


def study(trace: str | Path | None = None, out_dir: str | Path = "traincast-study", *,
          format: str = "csv", mapping: dict[str, str] | None = None,
          catalog: Catalog | list[str | Path] | None = None,
          scenarios: tuple[str, ...] | list[str] = STUDY_SCENARIOS, overlap: float = 0.0,
          prices: str | Path | None = None, report: bool = True,
          on_step: Step | None = None, workload: str | None = None,
          on_report: Callable[[dict[str, Any]], None] | None = None,
          jobs: pa.Table | None = None) -> dict[str, Any]:
    """Run the whole study on ``trace`` (default: the bundled sample) into ``out_dir``.

    Returns ``{"out_dir", "summary" (findings), "files", "timings_s", "report",
    "report_error", "sample", "characterize"}`` (the last as written to characterize.json).
    ``on_step(step, done, total)`` is called as work advances (progress bars; within the
    what-if and recommend steps too, ``step`` then naming how far they are); ``workload``
    is assumed for jobs whose trace gives none (``trace.default_workload``); ``on_report``
    receives the ingest report (its ``bad_rows`` and ``errors``). ``jobs``: the canonical job
    table when the caller has read it already (a job store's, ``trace.store.load_jobs``):
    studied as it is, not ingested again; ``trace`` then only names it in ``study.json``.
    """
    from traincast.analysis.characterize import characterize
    from traincast.analysis.recommend import recommend
    from traincast.analysis.whatif import whatif
    from traincast.trace import prepare_jobs, read_trace
    from traincast.trace.sample import sample_path

    cat = catalog if isinstance(catalog, Catalog) else load_catalog(catalog or [])
    sample = trace is None and jobs is None
    ingested = jobs is None  # else: the caller's table, no store of its own here
    trace_path = Path(sample_path() if sample else trace or "")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    steps = 6
    done = [0]

    def step(name: str) -> None:
        if on_step:
            on_step(name, done[0], steps)

    def finish(name: str, t0: float) -> None:
        timings[name] = round(time.perf_counter() - t0, 4)
        done[0] += 1

    t0 = time.perf_counter()
    step("ingest")
    if jobs is None:
        jobs = read_trace(trace_path, format, out / "jobs.duckdb", mapping, on_report=on_report)
    jobs = prepare_jobs(jobs, cat, workload)
    finish("ingest", t0)

    t0 = time.perf_counter()
    step("characterize")
    base = evaluate_columns(Columns.of(jobs), cat, overlap)  # once, for every step below
    char = characterize(jobs, cat, overlap=overlap, fill=False,  # filled above
                        breakdown=base[0])
    write_json(out / "characterize.json", char)
    finish("characterize", t0)

    t0 = time.perf_counter()
    step("what-if")
    wi = whatif(jobs, list(scenarios), cat, overlap=overlap, per_job=True, base=base,
                progress=lambda d, t: step(f"what-if ({d:,}/{t:,})"))
    rows = wi.pop("job_rows")
    if "summary" in wi:  # one scenario: keep the several-scenario shape for the report
        wi["scenarios"] = {next(iter(wi["definitions"])): wi.pop("summary")}
    write_json(out / "whatif.json", wi)
    _write_csv(out / "whatif_jobs.csv", rows)
    finish("whatif", t0)

    t0 = time.perf_counter()
    step("recommend")
    rec = recommend(jobs, cat, prices=prices, overlap=overlap, base=base,
                    progress=lambda name, d, t: step(f"recommend ({d}/{t}: {name})"))
    rec_rows = rec.pop("rows")
    write_json(out / "recommend.json", rec)
    _write_csv(out / "recommend.csv", rec_rows)
    finish("recommend", t0)

    t0 = time.perf_counter()
    step("tables")
    table = jobs_with_breakdown(jobs, cat, overlap, base[0])
    tmp = out / ".jobs.parquet.tmp"
    pq.write_table(table, tmp)
    tmp.replace(out / "jobs.parquet")
    summary = findings(char, wi, rec, sample)
    write_json(out / "summary.json", summary)
    finish("tables", t0)

    meta: dict[str, Any] = {
        "trace": {"path": str(trace_path), "format": format, "sample": sample},
        "sample": sample, "jobs": jobs.num_rows,
        "db": str(out / "jobs.duckdb") if ingested else None,
        "catalog_files": list(cat.files), "overlap": overlap,
        "scenarios": list(scenarios), "scenario_definitions": wi["definitions"],
        "prices": rec.get("prices"), "timings_s": timings}
    write_json(out / "study.json", meta)

    t0 = time.perf_counter()
    step("report")
    report_path: str | None = None
    if report:
        try:
            from traincast.report import write_report

            report_path = str(write_report(out))
        except Exception as exc:  # the tables are written; the report is a bonus on top
            meta["report_error"] = f"{type(exc).__name__}: {exc}"
    finish("report", t0)
    meta["report"] = report_path
    meta["timings_s"] = timings
    write_json(out / "study.json", meta)
    files = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    return {"out_dir": str(out), "summary": summary, "files": files, "timings_s": timings,
            "report": report_path, "report_error": meta.get("report_error"),
            "sample": sample, "characterize": char}
