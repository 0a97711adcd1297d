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
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from numpy.typing import NDArray

from traincast.analysis.characterize import unpredicted_text
from traincast.architectures import NETWORK_ARCHS
from traincast.engine.local import base_breakdown, evaluate_columns
from traincast.errors import TraincastError
from traincast.files import to_jsonable, write_text_whole, write_whole
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.hardware.prices import Prices, load_prices
from traincast.jobs import Columns
from traincast.model import COMPONENTS, Breakdown
from traincast.resolve import Resolved
from traincast.units import fmt_pct, fmt_share, fmt_sig, fmt_x, join_words, plural

STUDY_SCENARIOS: tuple[str, ...] = ("nvlink-allreduce", "eth100", "gpu-a100", "mixed-precision",
                                    "op-fusion")
PAPER = {"nvlink_sped_up_share": 0.6, "eth100_mean_speedup": 1.7}  # as quoted from the paper
Step = Callable[[str, int, int], None]


def write_json(path: Path, obj: Any) -> None:
    """Write one JSON object atomically (a temporary file, then a rename)."""
    write_text_whole(path, json.dumps(to_jsonable(obj), indent=2))


def nan_as_null(table: pa.Table) -> pa.Table:
    """The table with NaN in its float columns as null, so that a CSV holds an empty field for
    an unknown number (a time or cost the model cannot give), not the word ``nan``."""
    cols = [pc.if_else(pc.is_nan(c), pa.scalar(None, c.type), c)
            if pa.types.is_floating(c.type) else c for c in table.columns]
    return pa.table(cols, schema=table.schema)


def write_csv(table: pa.Table, path: Path) -> None:
    """Write a table to a CSV file whole or not at all: a temporary file beside it, renamed
    over ``path`` once complete (an error or Ctrl-C leaves no half-written file); an unknown
    number is an empty field (:func:`nan_as_null`)."""
    write_whole(path, partial(pacsv.write_csv, nan_as_null(table)))


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write a table to a Parquet file whole or not at all (as :func:`write_csv`)."""
    write_whole(path, partial(pq.write_table, table))


def jobs_with_breakdown(jobs: pa.Table, catalog: Catalog, overlap: float = 0.0,
                        breakdown: Breakdown | None = None) -> pa.Table:
    """The job table plus its predicted breakdown columns (``jobs.parquet``); ``breakdown``:
    the jobs' base breakdown when the caller has it."""
    bd = breakdown or base_breakdown(Columns.of(jobs), catalog, overlap)
    names = bd.bottleneck_names()
    extra = {f"{c}_s": getattr(bd, c) for c in COMPONENTS} | {"total_s": bd.total}
    for k, v in extra.items():
        jobs = jobs.append_column(k, pa.array(v, from_pandas=True))
    jobs = jobs.append_column("bottleneck", pa.array(names, type=pa.string()))
    return jobs.append_column("gpu_util_pred", pa.array(bd.gpu_util(), from_pandas=True))


_pct = partial(fmt_share, missing="n/a")
"""A share in a finding (``units.fmt_share``: 0.4%, not 0%, where the tables show 0.4%)."""


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
    if not char.get("jobs"):
        sentences.append("The trace holds no job (a header alone, an empty JSON array, or every "
                         "row bad): nothing "
                         "to study.")
        return {"sample": sample, "sentences": sentences, "numbers": nums}
    unpredicted = bd.get("unpredicted", {})
    why, fix = unpredicted_text(unpredicted, char.get("unknown_gpu_types", {}),
                                char.get("unknown_nodes", {}), char.get("unknown_workloads", {}))
    if not bd.get("jobs"):
        why = why or "no job uses a GPU"
        n = int(char.get("jobs", 0))
        none = "The one job has no" if n == 1 else f"None of the {n:,} jobs has a"
        sentences.append(f"{none} prediction ({why}), so "
                         "there is no time breakdown and no what-if number."
                         + (f" {fix}" if fix else ""))
        return {"sample": sample, "sentences": sentences, "numbers": nums}
    overlap = float(bd.get("overlap") or 0.0)  # the shares are of the four parts' sum
    of_what = "of iteration time" if not overlap else (
        f"of the four parts' summed time (before --overlap {overlap:g} hides some of it under "
        "compute)")
    sentences.append(
        f"Communication takes {_pct(nums['comm_share_mean'])} {of_what} on average "
        f"({_pct(nums['comm_share_gpu_weighted'])} GPU-weighted); data I/O "
        f"{_pct(nums['data_io_share_mean'])}, compute {_pct(nums['compute_share_mean'])} "
        f"(over {plural(bd.get('jobs', 0), 'job')} with known features).")
    if why:
        n = sum(unpredicted.values())
        sentences.append(f"{plural(n, 'job')} {'has' if n == 1 else 'have'} no prediction "
                         f"({why})." + (f" {fix}" if fix else ""))
    sentences += _nvlink_finding(scen.get("nvlink-allreduce"), nums)
    total, priced = int(char.get("jobs") or 0), int(bd.get("jobs") or 0)
    sentences += _eth100_finding(scen.get("eth100"), nums, total,
                                 bd.get("by_architecture", {}), priced)
    sentences += _speedup_findings(scen, nums, total, priced)
    sentences += _recommend_finding(rec.get("summary", {}).get("arch"), nums, total,
                                    rec.get("min_gain"))
    sentences += _cheapest_finding(rec, nums)
    return {"sample": sample, "sentences": sentences, "numbers": nums}


def _cheapest_finding(rec: dict[str, Any], nums: dict[str, Any]) -> list[str]:
    """With ``--price``: what the jobs priced now and as chosen cost per 1,000 iterations of
    each, summed, now and on their cheapest setups (``recommend``'s ``cheapest`` summary), and
    whose prices those are."""
    cheap = rec.get("summary", {}).get("cheapest") or {}
    now, chosen = cheap.get("usd_per_1k_now"), cheap.get("usd_per_1k_chosen")
    file = (rec.get("prices") or {}).get("file") or "a price file"
    if cheap and not cheap.get("priced"):
        from traincast.analysis.recommend import unpriced_why

        return [f"With --price, {unpriced_why(cheap, file)}."]
    if not now or chosen is None:
        return []
    nums.update({"cheapest_usd_per_1k_now": now, "cheapest_usd_per_1k_chosen": chosen})
    return [f"With --price ({file}), the {plural(cheap['priced'], 'job')} priced now and "
            f"as chosen cost ${fmt_sig(now)} per 1,000 iterations of each, summed, as they run "
            f"and ${fmt_sig(chosen)} on their cheapest setups ({_pct(1 - chosen / now)} "
            "less)."]


def _nvlink_finding(nv: dict[str, Any] | None, nums: dict[str, Any]) -> list[str]:
    """The NVLink AllReduce port of the PS/Worker jobs (``nvlink-allreduce``), against the
    paper's share; its numbers go into ``nums``."""
    if not nv:
        return []
    ps = nv.get("by_architecture", {}).get("ps-worker")
    if not (ps and ps.get("matched")):
        return ["The trace has no PS/Worker job (its format records no parameter servers, or "
                "none ran): the NVLink AllReduce port does not apply."]
    if not ps.get("predicted"):
        return [f"The trace's {ps['matched']:,} PS/Worker jobs have no prediction (no known "
                "features): the NVLink AllReduce port cannot be priced."]
    nums.update({"ps_worker_jobs": ps.get("matched"),
                 "ps_worker_jobs_predicted": ps.get("predicted"),
                 "nvlink_sped_up_share": ps.get("sped_up_share"),
                 "nvlink_not_ported": ps.get("not_applied"),
                 "nvlink_ported_mean_speedup": ps.get("applied_mean_speedup"),
                 "nvlink_gpu_time_saved_share": ps.get("gpu_time_saved_share")})
    # every share and count over the jobs with a prediction (the others: said apart)
    n, matched = int(ps["predicted"]), int(ps["matched"])
    of = "PS/Worker jobs" if n == matched else \
        f"the {n:,} PS/Worker jobs with a prediction (of {matched:,})"
    return [f"{_pct(ps.get('sped_up_share'))} of {of} speed up on NVLink AllReduce "
            f"(allreduce-local on an 8-GPU pai-v100-nvlink node; the paper reports about "
            f"{_pct(PAPER['nvlink_sped_up_share'])}); {ps.get('not_applied', 0):,} of "
            f"{n:,} do not fit one node (GPUs or memory) and stay; those "
            f"ported gain {_x(ps.get('applied_mean_speedup'))} on average."]


def over_jobs(summary: dict[str, Any], total: int,
              priced: int | None = None) -> tuple[str, bool]:
    """What a summary's numbers are over, in words, and whether that is every job:
    ``("over all jobs", True)`` when every one of the trace's ``total`` jobs has a prediction
    in it (``predicted``; a summary without the count is taken as over all), else ``("over
    the N of TOTAL jobs with a prediction", False)`` (the rest: unknown features or GPU
    types), or, when ``N`` is fewer than the ``priced`` jobs the trace has a prediction for
    (a scenario that matches only some of them: 100 Gbit Ethernet leaves a faster NIC as it
    is), ``"over the N of TOTAL jobs it applies to with a prediction"``."""
    n = summary.get("predicted")
    if n is None or int(n) >= total:
        return "over all jobs", True
    if priced is not None and int(n) < int(priced):
        return f"over the {int(n):,} of {total:,} jobs it applies to with a prediction", False
    return f"over the {int(n):,} of {total:,} jobs with a prediction", False


NETWORK_LABELS: dict[str, str] = {"ps-worker": "PS/Worker",
                                  "allreduce-cluster": "AllReduce across nodes",
                                  "pearl": "PEARL", "hybrid": "hybrid parallelism"}
""":data:`NETWORK_ARCHS` in words."""


def _eth100_finding(eth: dict[str, Any] | None, nums: dict[str, Any],
                    total: int, predicted: dict[str, Any] | None = None,
                    priced: int | None = None) -> list[str]:
    """25 -> 100 Gbit Ethernet (``eth100``): the mean over the jobs that use the network and
    run on a slower NIC (the scenario upgrades only those), against the paper's, and over
    every job with a prediction (:func:`over_jobs`); its numbers go into ``nums``. With none
    upgraded, the scenario's jobs of those architectures and ``predicted`` (the
    characterization's breakdown by architecture: the jobs with a prediction) say why: there
    are none, none has a prediction, or their NICs are as fast already."""
    if not eth:
        return []
    net, k = _pooled_mean(eth, NETWORK_ARCHS)
    on_net = sum(int((eth.get("by_architecture", {}).get(a) or {}).get("jobs") or 0)
                 for a in NETWORK_ARCHS)
    timed = sum(int((predicted or {}).get(a, {}).get("jobs") or 0) for a in NETWORK_ARCHS)
    why = ("none of them has a prediction" if not timed else
           "their NICs are 100 Gbit/s or faster already" if timed == on_net else
           "their NICs are 100 Gbit/s or faster already, or they have no prediction")
    nums.update({"eth100_mean_speedup_network_jobs": net, "eth100_network_jobs": k,
                 "eth100_mean_speedup_all": eth.get("mean_speedup"),
                 "eth100_gpu_time_saved_share": eth.get("gpu_time_saved_share")})
    kinds = join_words([label for a, label in NETWORK_LABELS.items()
                        if int((eth.get("by_architecture", {}).get(a) or {}).get("predicted")
                               or 0)])
    network = (f"{_x(net)} on average over the "
               + (f"{k:,} jobs that use" if k != 1 else "1 job that uses") + " the network "
               f"({kinds}; the paper reports about "
               f"{PAPER['eth100_mean_speedup']:.1f}×), " if k else
               f"nothing to the {plural(on_net, 'job')} of this trace that "
               f"{'uses' if on_net == 1 else 'use'} the network ({why}), "
               if on_net else
               "nothing to the jobs of this trace that use the network (there are none), ")
    over, every = over_jobs(eth, total, priced)
    faster = 0 if every or priced is None else int(priced) - int(eth.get("predicted") or 0)
    if faster > 0:  # upgrade_only: the jobs with a prediction it leaves as they are
        over += (f" (the other {plural(faster, 'job')} with a prediction "
                 f"{'runs' if faster == 1 else 'run'} on NICs of 100 Gbit/s or faster already)")
    where = "the cluster's" if every else "their"
    return [f"25 → 100 Gbit Ethernet gives {network}{_x(eth.get('mean_speedup'))} {over}, "
            f"and saves {_pct(eth.get('gpu_time_saved_share'))} of {where} GPU time."]


def _speedup_findings(scen: dict[str, Any], nums: dict[str, Any], total: int,
                      priced: int | None = None) -> list[str]:
    """The GPU, precision and fusion scenarios: mean speedups by job and by GPU time, over
    the jobs with a prediction (:func:`over_jobs`)."""
    out = []
    for name, label, why_slower in (
            ("gpu-a100", "Moving every job to A100 GPUs (same links)",
             ": their own GPUs are faster for them"),
            ("mixed-precision", "Mixed precision",
             ": autocast's casts are kernels of their own, each issued by the host, so a small "
             "model whose step waits for the host waits longer, and a GPU without a 16-bit "
             "peak pays for the casts with nothing faster"),
            ("op-fusion", "Fusing memory-bound operators", "")):
        s = scen.get(name)
        if s:
            nums[f"{name}_mean_speedup"] = s.get("mean_speedup")
            nums[f"{name}_gpu_time_weighted_mean_speedup"] = s.get(
                "gpu_time_weighted_mean_speedup")
            over, every = over_jobs(s, total, priced)
            over, them = ("", "jobs") if every else (f" {over}", "them")
            slower = s.get("slowed_down_share") or 0.0
            out.append(
                f"{label} gives {_x(s.get('mean_speedup'))} on average{over} "
                f"({_x(s.get('gpu_time_weighted_mean_speedup'))} GPU-time-weighted; "
                f"{_pct(s.get('sped_up_share'))} of {them} gain more than 1%"
                + (f", {_pct(slower)} lose more than 1%{why_slower}" if slower > 0 else "")
                + ").")
    return out


def unchanged_architectures(arch: dict[str, Any], total: int,
                            min_gain: float | None = None) -> str:
    """Why no job changes architecture on its own hardware (``recommend``'s ``arch`` summary
    of jobs with a prediction, none changed): the threshold ``min_gain`` and the architectures
    the jobs keep (a job of one GPU has no other); "" where a job changes or none is priced.
    The study's finding and ``traincast recommend`` say it."""
    if arch.get("changed_share") or not arch.get("predicted"):
        return ""
    over, _ = over_jobs(arch, total)
    kept = ", ".join(f"{a} {n:,}" for a, n in (arch.get("architectures") or {}).items())
    gain = f"more than {100 * min_gain:g}% " if min_gain is not None else ""
    return (f"On their own hardware, no job would run {gain}faster on another architecture "
            f"({over}): they keep theirs ({kept}); a job of one GPU has no other, and the "
            f"others' options gained {'no more' if gain else 'nothing'} or did not fit.")


def _recommend_finding(arch: dict[str, Any] | None, nums: dict[str, Any],
                       total: int, min_gain: float | None = None) -> list[str]:
    """The best architecture on each job's own hardware (``recommend``'s ``arch`` summary),
    over the jobs with a prediction (:func:`over_jobs`); where none changes, why: the
    threshold ``min_gain`` and the architectures the jobs keep (a job of one GPU has no other
    on its own hardware)."""
    if not arch:
        return []
    nums.update({"recommend_changed_share": arch.get("changed_share"),
                 "recommend_mean_speedup": arch.get("mean_speedup"),
                 "recommend_changed_mean_speedup": arch.get("changed_mean_speedup")})
    if none := unchanged_architectures(arch, total, min_gain):
        return [none]
    top = next(iter(arch.get("changed_to", {})), None)
    over, every = over_jobs(arch, total)
    which = "jobs" if every else over.removeprefix("over ")
    changed = arch.get("changed_mean_speedup")
    over_changed = (f"{_x(changed)} on average over the jobs that change, "
                    if changed is not None and math.isfinite(changed) else "")
    return [f"On their own hardware, {_pct(arch.get('changed_share'))} of {which} would run "
            f"faster on another architecture ({over_changed}{_x(arch.get('mean_speedup'))} "
            f"over {'all jobs' if every else 'all of them'})"
            + (f"; the most frequent change is to {top}." if top else ".")]


BY_SOURCE_COLUMNS: tuple[tuple[str, str, str, str], ...] = (
    ("jobs", "jobs", "count", ""), ("comm (job)", "comm_share_mean", "share", ""),
    ("comm (GPU)", "comm_share_gpu_weighted", "share", ""),
    ("NVLink", "nvlink_sped_up_share", "share", "ps_worker_jobs_predicted"),
    ("100G", "eth100_mean_speedup_network_jobs", "speedup", "eth100_network_jobs"),
    ("A100", "gpu-a100_mean_speedup", "speedup", ""),
    ("mixed prec.", "mixed-precision_mean_speedup", "speedup", ""))
"""The columns of the by-trace-file table (``traincast study`` and the report): header,
key of :func:`findings`' numbers, kind, and the key of the job count it is over (shown in
parentheses) where it is over some jobs only."""
BY_SOURCE_CAPTION = (
    "comm: mean share of predicted iteration time (of the four parts' sum, before any "
    "--overlap), by job / by GPUs; NVLink: share of the PS/Worker jobs with a prediction "
    "sped up by nvlink-allreduce{n}; 100G: 25 → 100 Gbit Ethernet (eth100), the mean "
    "speedup over the{m} jobs that use the network; A100, mixed prec.: "
    "mean speedups over the jobs with a prediction; -: no such jobs (summary.json: "
    "by_source{counts})")
"""The by-file table's caption; ``.format`` it with :func:`by_source_caption`."""


def by_source_caption(counts: bool) -> str:
    """:data:`BY_SOURCE_CAPTION` for a table with the counts in its cells, or without (then
    said to be in ``summary.json``)."""
    return BY_SOURCE_CAPTION.format(
        n=" (of n)" if counts else "", m=" n" if counts else "",
        counts="" if counts else "; its ps_worker_jobs_predicted and eth100_network_jobs "
                                 "count them")


def by_source_cells(numbers: dict[str, Any], counts: bool = True) -> list[str]:
    """One trace file's row of :data:`BY_SOURCE_COLUMNS`, as text (``-``: no such jobs); with
    ``counts``, a share or speedup over some jobs only is followed by their count, ``(n)``."""
    def cell(key: str, kind: str, over: str) -> str:
        v = numbers.get(key)
        text = (f"{v or 0:,}" if kind == "count" else fmt_pct(v) if kind == "share"
                else fmt_x(v))
        return f"{text} ({numbers[over]:,})" if counts and over and text != "-" and \
            numbers.get(over) else text

    return [cell(key, kind, over) for _, key, kind, over in BY_SOURCE_COLUMNS]


def by_source(jobs: pa.Table, catalog: Catalog, overlap: float, breakdown: Breakdown,
              rows: pa.Table, scenarios: Sequence[str], files: dict[int, list[str]]
              ) -> list[dict[str, Any]]:
    """The findings of each source (trace file) of a study of several, on its own jobs:
    ``[{"source_id", "trace", "numbers", "sentences"}]`` (:func:`findings` of that source's
    characterization and what-if summaries; recommend is left to the whole study); empty for
    one source. The jobs' own evaluation (``breakdown``) and the what-if per-job ``rows``
    (:func:`traincast.analysis.whatif.job_rows`, job by job, scenarios in order) are reused,
    not computed again. ``files``: each source's files (its store's ``sources``), named by
    :func:`source_labels` among the sources the jobs hold; jobs without a source (a null
    ``source_id``) are one row, ``source_id`` null."""
    from traincast.analysis.characterize import characterize
    from traincast.analysis.whatif import Summary
    from traincast.trace.store import source_labels

    if "source_id" not in jobs.column_names or not jobs.num_rows:
        return []
    sid = np.asarray(jobs["source_id"].fill_null(-1).to_numpy(zero_copy_only=False))
    ids, counts = np.unique(sid, return_counts=True)
    if len(ids) < 2:
        return []
    n, k = jobs.num_rows, len(scenarios)
    labels = source_labels({int(i): files[int(i)] for i in ids if int(i) in files})

    def per_job(name: str) -> NDArray[Any]:
        return np.asarray(rows[name].to_numpy(zero_copy_only=False)).reshape(n, k)

    matched, applied, base_s, total_s = (per_job(c) for c in (
        "matched", "applied", "base_total_s", "scenario_total_s"))
    cols = Columns.of(jobs)
    order = np.argsort(sid, kind="stable")  # the jobs of each source together, in table order
    out = []
    for s, idx in zip(ids, np.split(order, np.cumsum(counts)[:-1]), strict=True):
        part = cols.take(idx)
        arch, gpus, dur = part["architecture"], part["n_gpus"], part.duration_s()
        char = characterize(jobs.take(idx), catalog, overlap, fill=False,
                            breakdown=breakdown.take(idx))
        scen = {name: Summary().add(arch, gpus, dur, base_s[idx, j], matched[idx, j],
                                    applied[idx, j], total_s[idx, j]).result()
                for j, name in enumerate(scenarios)}
        found = findings(char, {"scenarios": scen}, {}, sample=False)
        out.append({"source_id": None if s == -1 else int(s),
                    "trace": "jobs without a source" if s == -1
                    else labels.get(int(s), f"source {int(s)}"),
                    "numbers": found["numbers"], "sentences": found["sentences"]})
    return out


STORE_FILES = ("jobs.duckdb", "jobs.duckdb.wal")
"""The study's job store: an earlier study's is kept in place (its unchanged trace files are
not read again) and copied aside, not moved."""
WRITES = ("study.json", "summary.json", "characterize.json", "whatif.json", "whatif_jobs.csv",
          "recommend.json", "recommend.csv", "jobs.parquet", *STORE_FILES, "report.html")
"""The files a study writes into its folder (the report's figures go into ``figures/``)."""


def is_bundled_sample(paths: list[str | Path]) -> bool:
    """The trace files given are the bundled synthetic sample (``traincast sample`` prints its
    path): studied and reported as the sample, as with no trace given."""
    from traincast.trace.sample import sample_path

    bundled = Path(sample_path()).resolve()
    return bool(paths) and all(Path(p).resolve() == bundled for p in paths)


def study(trace: str | Path | Sequence[str | Path] | None = None,
          out_dir: str | Path = "traincast-study", *,
          format: str = "csv", mapping: dict[str, str] | None = None,
          catalog: Catalog | list[str | Path] | None = None,
          scenarios: tuple[str, ...] | list[str] = STUDY_SCENARIOS, overlap: float = 0.0,
          prices: Prices | str | Path | None = None, report: bool = True,
          on_step: Step | None = None, workload: str | None = None,
          on_report: Callable[[dict[str, Any]], None] | None = None,
          jobs: pa.Table | None = None, sources_db: str | Path | None = None
          ) -> dict[str, Any]:
    """Run the whole study on ``trace`` (a trace file or folder, or several; default: the
    bundled sample) into ``out_dir``.

    Returns ``{"out_dir", "summary" (findings), "files", "timings_s", "report",
    "report_error", "sample", "characterize", "assumed_workload", "dropped_sources"}``
    (characterize as written to characterize.json; ``dropped_sources``: the sources of an
    earlier study that the folder's store held, dropped: ``source_id``, ``files``,
    ``format``, ``jobs``).
    ``on_step(step, done, total)`` is called as work advances (progress bars; within the
    what-if and recommend steps too, ``step`` then naming how far they are); ``workload``
    is assumed for jobs whose trace gives none (``trace.default_workload``: a zoo model,
    ``mix`` or ``none``; said in ``assumed_workload``); ``on_report``
    receives the ingest report (its ``bad_rows`` and ``errors``). ``jobs``: the canonical job
    table when the caller has read it already (a job store's, ``trace.store.load_jobs``):
    studied as it is, not ingested again; ``trace`` then only names it in ``study.json``,
    unless ``sources_db``, the store it was read from, names trace files: its sources' files
    and formats are then the study's (``study.json`` ``trace``, ``db``; ``by_source``), the
    bundled sample among them said so (``trace.sample``: ``"part"`` beside other traces).
    """
    from traincast.trace.sample import sample_path

    cat = catalog if isinstance(catalog, Catalog) else load_catalog(catalog or [])
    given = [trace] if isinstance(trace, str | Path) else [] if trace is None else list(trace)
    if trace is not None and not given and jobs is None:
        raise TraincastError("no trace file given (an empty list)",
                             hint="give trace files or folders, or none for the bundled sample")
    sample = (not given and jobs is None) or is_bundled_sample(given)
    ingested = jobs is None  # else: the caller's table, no store of its own here
    trace_paths = [Path(sample_path())] if sample else [Path(p) for p in given]
    out = Path(out_dir)
    if any(p.is_dir() and p.resolve() == out.resolve() for p in trace_paths):
        raise TraincastError(f"{out}: is a trace folder of this study: its tables would be read "
                             "as trace files the next time", hint="write the study to another "
                             f"folder, e.g. -o {out / 'study'}")
    if mine := [p for p in trace_paths if p.is_file() and p.name in WRITES
                and p.resolve().parent == out.resolve()]:
        raise TraincastError(f"{out}: the study would overwrite its trace {mine[0]} (it writes "
                             f"{mine[0].name} there)", hint="write the study to another folder")
    if isinstance(prices, str | Path):  # a bad price file fails before any work
        prices = load_prices(prices, cat)
    made = next((d for d in (*reversed(out.absolute().parents), out.absolute())
                 if not d.exists()), None)  # the first folder of the path this call makes
    out.mkdir(parents=True, exist_ok=True)
    with _folder_lock(out):
        kept = _keep_earlier(out, trace_paths, store=jobs is None)
        try:
            result = _study(trace_paths, out, sample, ingested, format, mapping, cat,
                            scenarios, overlap, prices, report, on_step, workload, on_report,
                            jobs, Path(sources_db) if sources_db is not None else None)
        except BaseException:
            if made is not None:  # a study that fails leaves no folder it made behind
                shutil.rmtree(made, ignore_errors=True)
            else:  # nor a folder it found half overwritten: the earlier study comes back
                _restore_earlier(out, kept)
            raise
        shutil.rmtree(kept, ignore_errors=True)
    return result


EARLIER = ".earlier-study"
"""The hidden folder of a study folder that holds the earlier study while a new one runs
(:func:`_keep_earlier`); one left by a study that was killed is put back by the next."""


@contextmanager
def _folder_lock(out: Path) -> Iterator[None]:
    """One study at a time writes ``out``: an exclusive lock on ``out/.study.lock`` (released
    when the process ends, however it ends); a second study of the same folder is an error."""
    path = out / ".study.lock"
    with path.open("a") as fh:
        try:
            import fcntl
        except ImportError:  # no advisory locks here (Windows): unguarded, as before
            fcntl = None
        if fcntl is not None:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise TraincastError(f"{out}: another study is writing this folder now",
                                     hint="wait for it to end, or write to another folder "
                                          "(-o DIR)") from None
        try:
            yield
        finally:
            path.unlink(missing_ok=True)


def _keep_earlier(out: Path, trace_paths: list[Path], store: bool) -> Path:
    """Set an earlier study in ``out`` aside into ``out/.earlier-study`` (:data:`EARLIER`),
    for :func:`_restore_earlier` to put back if this study fails or is interrupted: a study
    leaves its own files or the earlier ones, never a mix of two traces'. Set aside: each file
    of :data:`WRITES` (moved; the store copied, and only when this study ingests into it), and
    ``figures/`` only where ``study.json`` says an earlier study made it and no trace of this
    study lies in it. A symbolic link, a folder named like a study file or anything else is
    left as it is. ``manifest.json`` there lists what was set aside and what was there; a
    folder left by a study that was killed (no handler ran) is put back first."""
    kept = out / EARLIER
    if (kept / "manifest.json").is_file():
        _restore_earlier(out, kept)
    shutil.rmtree(kept, ignore_errors=True)
    kept.mkdir()
    figures = (out / "figures").resolve()
    ours = (out / "study.json").is_file() and not any(
        p.resolve().is_relative_to(figures) for p in trace_paths)
    there = [n for n in (*WRITES, "figures") if (out / n).exists() or (out / n).is_symlink()]
    aside = []
    for name in there:
        path = out / name
        if path.is_symlink():
            continue
        if name in STORE_FILES:
            if store and path.is_file():
                shutil.copy2(path, kept / name)
                aside.append(name)
        elif (name == "figures" and ours and path.is_dir()) or \
                (name != "figures" and path.is_file()):
            path.replace(kept / name)
            aside.append(name)
    write_text_whole(kept / "manifest.json", json.dumps({"aside": aside, "there": there}))
    return kept


def _restore_earlier(out: Path, kept: Path) -> None:
    """Put back what :func:`_keep_earlier` set aside in ``kept``, in place of what the failed
    study wrote: each name set aside replaces this study's, and a study file that was not
    there before goes; whatever :func:`_keep_earlier` left in place stays. ``kept`` is removed
    only once all is back (else the next study puts it back)."""
    manifest = json.loads((kept / "manifest.json").read_text())
    aside, there = set(manifest["aside"]), set(manifest["there"])
    for name in (*WRITES, "figures"):
        path = out / name
        if name in there and name not in aside:
            continue  # the user's, left in place
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    for name in aside:
        (kept / name).replace(out / name)
    shutil.rmtree(kept)


def _study(trace_paths: list[Path], out: Path, sample: bool, ingested: bool, format: str,
           mapping: dict[str, str] | None, cat: Catalog, scenarios: tuple[str, ...] | list[str],
           overlap: float, prices: Prices | None, report: bool, on_step: Step | None,
           workload: str | None, on_report: Callable[[dict[str, Any]], None] | None,
           jobs: pa.Table | None, sources_db: Path | None) -> dict[str, Any]:
    """:func:`study`'s steps into the folder ``out``."""
    from traincast.analysis.characterize import characterize
    from traincast.trace import prepare_jobs, workload_assumption

    steps = _Steps(on_step, total=6 if report else 5)
    dropped: list[dict[str, Any]] = []

    with steps.run("ingest"):
        if jobs is None:
            jobs, dropped, files = _ingest_own(trace_paths, format, out / "jobs.duckdb",
                                               mapping, on_report)
        else:  # a store's jobs: its sources name the trace files studied, and their formats
            held = _store_sources(sources_db)
            files = _files_of(held)
            trace_paths = sorted({Path(f) for fs in files.values() for f in fs}) or trace_paths
            format = ", ".join(dict.fromkeys(str(r["format"]) for r in held
                                             if r.get("format"))) or format
        # the bundled sample among the traces: all of them, the sample's study; some, in part
        bundled = [f for f in trace_paths if is_bundled_sample([f])]
        sample = sample or (bool(bundled) and len(bundled) == len(trace_paths))
        part = [] if sample else bundled
        jobs = prepare_jobs(jobs, cat, workload)
        assumed = workload_assumption(jobs, workload)
    with steps.run("characterize"):
        base = evaluate_columns(Columns.of(jobs), cat, overlap)  # once, for every step below
        char = characterize(jobs, cat, overlap=overlap, fill=False,  # filled above
                            breakdown=base[0])
        write_json(out / "characterize.json", char)
    with steps.run("what-if", "whatif"):
        wi, wi_rows = _whatif_step(jobs, scenarios, cat, overlap, base, out, steps.say)
    with steps.run("recommend"):
        rec = _recommend_step(jobs, cat, prices, overlap, base, out, steps.say)
    with steps.run("tables"):
        write_parquet(jobs_with_breakdown(jobs, cat, overlap, base[0]), out / "jobs.parquet")
        summary = findings(char, wi, rec, sample)
        if part:  # the sample beside other traces
            summary["sentences"].insert(0, f"Part of this study's jobs (those of {part[0]}) "
                                        "come from the bundled synthetic sample trace (generated "
                                        "from published statistics, not a real cluster's jobs; "
                                        "docs/sample.md).")
        summary["by_source"] = by_source(jobs, cat, overlap, base[0], wi_rows,
                                         list(wi["definitions"]), files)
        write_json(out / "summary.json", summary)

    meta: dict[str, Any] = {
        "trace": {"path": str(trace_paths[0]) if len(trace_paths) == 1 else None,
                  "paths": [str(p) for p in trace_paths], "format": format,
                  "sample": sample or ("part" if part else False),
                  **({"store": str(sources_db)} if sources_db is not None else {})},
        "sample": sample, "jobs": jobs.num_rows,
        "db": str(out / "jobs.duckdb") if ingested else
        str(sources_db) if sources_db is not None else None,
        "catalog_files": list(cat.files), "overlap": overlap,
        "scenarios": list(scenarios), "scenario_definitions": wi["definitions"],
        "prices": rec.get("prices"), "assumed_workload": assumed,
        "timings_s": steps.timings_s}
    write_json(out / "study.json", meta)
    report_path = None
    if report:  # without it, no step and no time of it
        with steps.run("report"):
            report_path = _report_step(out, meta)
    meta["report"] = report_path
    meta["timings_s"] = steps.timings_s
    write_json(out / "study.json", meta)
    files = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    return {"out_dir": str(out), "summary": summary, "files": files,
            "timings_s": steps.timings_s, "report": report_path,
            "report_error": meta.get("report_error"), "sample": sample, "characterize": char,
            "assumed_workload": assumed, "dropped_sources": dropped}


class _Steps:
    """The study's steps: ``on_step(name, done, total)`` as each starts (and as it advances,
    :meth:`say`), and each step's wall time in ``timings_s``."""

    def __init__(self, on_step: Step | None, total: int) -> None:
        self.on_step, self.total, self.done = on_step, total, 0
        self.timings_s: dict[str, float] = {}

    def say(self, name: str) -> None:
        """Tell ``on_step`` where the present step is."""
        if self.on_step:
            self.on_step(name, self.done, self.total)

    @contextmanager
    def run(self, name: str, key: str | None = None) -> Iterator[None]:
        """One step: said as it starts, timed (under ``key``, default ``name``) and counted
        done when it ends."""
        self.say(name)
        t0 = time.perf_counter()
        yield
        self.timings_s[key or name] = round(time.perf_counter() - t0, 4)
        self.done += 1


def _whatif_step(jobs: pa.Table, scenarios: tuple[str, ...] | list[str], cat: Catalog,
                 overlap: float, base: tuple[Breakdown, Resolved], out: Path,
                 step: Callable[[str], None]) -> tuple[dict[str, Any], pa.Table]:
    """The study's what-if set over the jobs (their ``base`` evaluation given): writes
    ``whatif.json`` (several-scenario shape, even for one) and ``whatif_jobs.csv``; returns
    the summary and the per-job rows."""
    from traincast.analysis.whatif import whatif

    wi = whatif(jobs, list(scenarios), cat, overlap=overlap, per_job=True, base=base,
                progress=lambda d, t: step(f"what-if ({d:,}/{t:,})"))
    rows = wi.pop("job_rows")
    if "summary" in wi:  # one scenario: keep the several-scenario shape for the report
        wi["scenarios"] = {next(iter(wi["definitions"])): wi.pop("summary")}
    write_json(out / "whatif.json", wi)
    write_csv(rows, out / "whatif_jobs.csv")
    return wi, rows


def _recommend_step(jobs: pa.Table, cat: Catalog, prices: Prices | None, overlap: float,
                    base: tuple[Breakdown, Resolved], out: Path,
                    step: Callable[[str], None]) -> dict[str, Any]:
    """Recommendations for the jobs (their ``base`` evaluation given): writes
    ``recommend.json`` (without the per-job rows) and ``recommend.csv`` (the rows)."""
    from traincast.analysis.recommend import recommend

    rec = recommend(jobs, cat, prices=prices, overlap=overlap, base=base,
                    progress=lambda name, d, t: step(f"recommend ({d}/{t}: {name})"))
    rec_rows = rec.pop("rows")
    write_json(out / "recommend.json", rec)
    write_csv(rec_rows, out / "recommend.csv")
    return rec


def _ingest_own(paths: list[Path], format: str, db: Path, mapping: dict[str, str] | None,
                on_report: Callable[[dict[str, Any]], None] | None
                ) -> tuple[pa.Table, list[dict[str, Any]], dict[int, list[str]]]:
    """The study's trace ingested into its store ``db`` (unchanged files not read again), which
    then holds this trace only: the sources of an earlier study into the same folder are
    dropped. One opening of the store and one reading of its sources; returns the trace's jobs
    (as :func:`~traincast.trace.read_trace` does), the sources dropped
    (:meth:`~traincast.trace.store.Store.drop`'s ``dropped``) and the files of those kept."""
    from traincast.trace.store import Store, every_row_bad

    with Store(db) as store:
        report = store.ingest(paths, format, mapping)
        if on_report is not None:
            on_report(report)
        own = [s["source_id"] for s in report["sources"]]
        held = store.sources()
        stale = [r["source_id"] for r in held if r["source_id"] not in own]
        dropped = store.drop(stale)["dropped"] if stale else []
        jobs = store.jobs(own)
    # then the earlier study is put back (a trace of no row at all is studied: the study
    # says it holds no job)
    if error := every_row_bad(report, jobs.num_rows, "the folder's earlier study is kept"):
        raise error
    return jobs, dropped, _files_of([r for r in held if r["source_id"] in own])


def _files_of(sources: list[dict[str, Any]]) -> dict[int, list[str]]:
    """The files of each source row of a store (``Store.sources``), by ``source_id``."""
    return {int(r["source_id"]): json.loads(r["files"]) for r in sources}


def _store_sources(db: Path | None) -> list[dict[str, Any]]:
    """The source rows of the store ``db`` (``Store.sources``; none without one)."""
    from traincast.trace.store import Store

    if db is None or not db.exists():
        return []
    with Store(db) as store:
        return store.sources()


def _report_step(out: Path, meta: dict[str, Any]) -> str | None:
    """The HTML report from the study's files: its path, or None with ``meta["report_error"]``
    set (the tables are written; the report is a bonus on top)."""
    try:
        from traincast.report import write_report

        return str(write_report(out))
    except Exception as exc:
        meta["report_error"] = f"{type(exc).__name__}: {exc}"
        return None
