"""What-if analysis: how much faster would each job run under a scenario?

``speedup = T_total(base) / T_total(scenario)`` per job (1 exactly for jobs the scenario does not
match or that do not fit its change). Summaries over the matched jobs with a prediction:
``sped_up_share`` (speedup > 1.01), mean and median speedup weighted by job, by GPUs (n) and by
GPU time (n x duration), the share of the matched jobs' GPU time saved
(``1 - sum(w / speedup) / sum(w)``, w = n x duration), and the same per architecture.
Scenario rules: docs/scenarios.md; engines: ``traincast.engine``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from traincast import compute
from traincast.analysis.quantiles import Quantiles
from traincast.architectures import NETWORK_ARCHS
from traincast.engine import ENGINES
from traincast.engine.local import (
    CHUNK_ROWS,
    SHIPPED,
    ScenarioResult,
    Workloads,
    run_scenarios,
    runs_on_gpus,
)
from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.jobs import Columns, Strings
from traincast.model import Breakdown
from traincast.resolve import REASONS, Resolved, reason_dict
from traincast.scenarios import LINK_KEYS, Scenario, as_scenarios, parse_sweep, sweep
from traincast.trace.chunks import JobChunks

F = NDArray[np.float64]
JOB_ROW_COLUMNS = ("job_id", "scenario", "matched", "applied", "base_total_s",
                   "scenario_total_s", "speedup")
"""The columns of the per-job rows (:func:`job_rows`)."""
SPED_UP = 1.01  # a job "speeds up" when its speedup exceeds this


def _div(a: F, b: F) -> F:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1.0), np.nan)


class Summary:
    """The summary (docs/scenarios.md keys) of one scenario, with ``by_architecture``, filled
    chunk by chunk (:meth:`add`) or from parts (:meth:`merge`), so its memory does not grow
    with the trace: sums per architecture and :class:`~traincast.analysis.quantiles.Quantiles`
    for the medians (exact up to ``EXACT_MAX`` jobs, within 0.1% beyond).

    ``not_applied`` counts matched jobs with a prediction that the scenario cannot apply (they
    do not fit); jobs without a prediction are counted in ``unpredicted`` by reason.
    Statistics are over matched jobs with a finite speedup s: shares and means are weighted
    sums per architecture (``np.bincount``) — job-weighted, GPU-weighted (w = n) and
    GPU-time-weighted (w = n x duration; jobs without a duration are left out of it); GPU time
    saved = ``1 - sum(w / s) / sum(w)``; the median speedup by job, per architecture and
    overall, and weighted by GPUs and by GPU time overall.
    """

    KEYS = ("n", "s", "up", "down", "g", "gs", "t", "ts", "t_over_s", "a", "as")
    COUNTS = ("jobs", "matched", "applied", "not_applied")
    NO_GPUS = "no GPUs"
    """The group of jobs without GPUs (``n_gpus`` missing or 0): no scenario matches them, and
    ``by_architecture`` leaves them out (they have no architecture; counted in ``jobs``)."""

    def __init__(self) -> None:
        self.names: list[str] = []  # architectures (null: "unknown"), in order of first sight
        self.acc = np.zeros((len(self.KEYS), 0))
        self.cnt = np.zeros((len(self.COUNTS), 0))
        self.speedups = Quantiles(n_weights=2)  # weights: GPUs, GPU time
        self.by_arch: list[Quantiles] = []

    def _groups(self, names: list[str]) -> NDArray[np.int64]:
        """Indices of ``names`` among the summary's groups (new ones added)."""
        for name in names:
            if name not in self.names:
                self.names.append(name)
                self.by_arch.append(Quantiles())
        grow = len(self.names) - self.acc.shape[1]
        if grow:
            self.acc = np.pad(self.acc, ((0, 0), (0, grow)))
            self.cnt = np.pad(self.cnt, ((0, 0), (0, grow)))
        return np.array([self.names.index(n) for n in names], dtype=np.int64)

    def add(self, architecture: Strings, gpus: F, duration_s: F, base_total_s: F,
            matched: NDArray[np.bool_], applied: NDArray[np.bool_], total_s: F) -> Summary:
        """Add jobs (one chunk of rows); sums by sub-chunk of rows (cache-friendly)."""
        group = self._groups([*(v if v else "unknown" for v in architecture.values),
                              "unknown", self.NO_GPUS])
        k = len(self.names)
        n = len(base_total_s)
        on_gpus = runs_on_gpus(gpus)
        kept = np.empty((3, n))  # speedup, GPUs, GPU time of the jobs with a speedup
        kept_c = np.empty(n, dtype=np.int64)
        m = 0
        for start in range(0, n, CHUNK_ROWS):  # temporaries stay in the CPU cache
            sl = slice(start, start + CHUNK_ROWS)
            with np.errstate(divide="ignore", invalid="ignore"):
                sp = base_total_s[sl] / total_s[sl]
            codes = architecture.codes[sl]
            c = group[np.where(codes >= 0, codes, len(group) - 2)]
            c = np.where(on_gpus[sl], c, group[-1])
            mt, ap = matched[sl] & on_gpus[sl], applied[sl]
            known = mt & np.isfinite(base_total_s[sl])  # matched jobs with a base prediction
            self.cnt += [np.bincount(c, weights=w, minlength=k)
                         for w in (None, mt, mt & ap, known & ~ap)]
            v = mt & np.isfinite(sp)
            s, c, a = sp[v], c[v], ap[v]
            g = gpus[sl][v]
            g = np.where(np.isfinite(g) & (g > 0), g, 0.0)
            t = g * duration_s[sl][v]
            t = np.where(np.isfinite(t) & (t > 0), t, 0.0)
            self.acc += [np.bincount(c, weights=w, minlength=k) for w in (
                None, s, s > SPED_UP, s < 1 / SPED_UP, g, g * s, t, t * s, t / s, a, a * s)]
            j = len(s)
            kept[:, m:m + j] = s, g, t
            kept_c[m:m + j] = c
            m += j
        s, c = kept[0, :m], kept_c[:m]
        self.speedups.add(s, [kept[1, :m], kept[2, :m]])
        for i in np.flatnonzero(np.bincount(c, minlength=k)):
            self.by_arch[i].add(s[c == i])
        return self

    def merge(self, other: Summary) -> Summary:
        """Add another summary's jobs (a part of the same trace and scenario)."""
        group = self._groups(other.names)
        self.acc[:, group] += other.acc
        self.cnt[:, group] += other.cnt
        self.speedups.merge(other.speedups)
        for i, q in zip(group, other.by_arch, strict=True):
            self.by_arch[i].merge(q)
        return self

    def result(self) -> dict[str, Any]:
        """The summary as plain data."""
        per = dict(zip(self.KEYS, self.acc, strict=True))
        per_all = {key: v.sum(keepdims=True) for key, v in per.items()}
        counts = dict(zip(self.COUNTS, self.cnt.astype(np.int64), strict=True))

        def block(sm: dict[str, F], i: int, n: dict[str, int], median: float) -> dict[str, Any]:
            def x(key: str) -> float:
                return float(sm[key][i])

            return {"jobs": n["jobs"], "matched": n["matched"], "applied": n["applied"],
                    "not_applied": n["not_applied"], "predicted": int(x("n")),
                    "sped_up_share": float(_div(sm["up"], sm["n"])[i]),
                    "slowed_down_share": float(_div(sm["down"], sm["n"])[i]),
                    "mean_speedup": float(_div(sm["s"], sm["n"])[i]),
                    "median_speedup": median,
                    "gpu_weighted_mean_speedup": float(_div(sm["gs"], sm["g"])[i]),
                    "gpu_time_weighted_mean_speedup": float(_div(sm["ts"], sm["t"])[i]),
                    "gpu_time_saved_share": 1.0 - float(_div(sm["t_over_s"], sm["t"])[i]),
                    "applied_mean_speedup": float(_div(sm["as"], sm["a"])[i])}

        out = block(per_all, 0, {key: int(v.sum()) for key, v in counts.items()},
                    self.speedups.median())
        out["max_speedup"] = self.speedups.max()
        out["gpu_weighted_median_speedup"] = self.speedups.weighted_median(0)
        out["gpu_time_weighted_median_speedup"] = self.speedups.weighted_median(1)
        order = sorted(range(len(self.names)), key=lambda i: (self.names[i] == "unknown", i))
        out["by_architecture"] = {
            self.names[i]: block(per, i, {key: int(v[i]) for key, v in counts.items()},
                                 self.by_arch[i].median())
            for i in order if counts["jobs"][i] and self.names[i] != self.NO_GPUS}
        return out


@dataclass
class Outcome:
    """Scenarios over (a part of) a trace, mergeable: one :class:`Summary` per scenario, the
    jobs without a prediction by reason (counts over ``traincast.resolve.REASONS``), the jobs."""

    summaries: list[Summary]
    reasons: NDArray[np.int64]
    jobs: int

    def merge(self, other: Outcome) -> Outcome:
        for mine, theirs in zip(self.summaries, other.summaries, strict=True):
            mine.merge(theirs)
        self.reasons = self.reasons + other.reasons
        self.jobs += other.jobs
        return self


def evaluate_part(jobs: Any, scenarios: list[Scenario], catalog: Catalog, overlap: float = 0.0,
                  hierarchical: bool = False, per_job: bool = False, threads: int = 1,
                  progress: Callable[[int, int], None] | None = None,
                  base: tuple[Breakdown, Resolved] | None = None,
                  workloads: Workloads = SHIPPED) -> tuple[Outcome, pa.Table | None]:
    """Every scenario over one job table (a whole trace, a chunk of a store, a Dask
    partition): its :class:`Outcome` and, with ``per_job``, its per-job rows
    (:func:`job_rows`). ``threads``: row chunks evaluated and scenarios summarized
    concurrently; ``workloads``: as ``engine.local.run_scenarios``."""
    cols = Columns.of(jobs)
    base_s, reason, results = run_scenarios(cols, scenarios, catalog, overlap, hierarchical,
                                            progress, threads, base=base, workloads=workloads)
    arch, gpus, duration = cols["architecture"], cols["n_gpus"], cols.duration_s()

    def summary(r: ScenarioResult) -> Summary:
        return Summary().add(arch, gpus, duration, base_s, r.matched, r.applied, r.total_s)

    with ThreadPoolExecutor(max_workers=max(threads, 1)) as pool:
        summaries = list(pool.map(summary, results))
    reasons = np.bincount(np.asarray(reason, dtype=np.int64), minlength=len(REASONS))
    rows = job_rows(cols["job_id"], base_s, results) if per_job else None
    return Outcome(summaries, reasons, cols.n), rows


def job_rows(job_id: Any, base_total_s: F, results: list[ScenarioResult]) -> pa.Table:
    """Per-job rows: job_id, scenario, matched, applied, base_total_s, scenario_total_s,
    speedup: one row per job and scenario, job by job (a job's rows together, scenarios in
    the order given), so the rows of a trace read in parts are those of the whole."""
    n, k = len(base_total_s), len(results)
    if not k:
        return pa.table({})
    total = np.stack([r.total_s for r in results], axis=1).reshape(-1)
    base = np.repeat(base_total_s, k)
    with np.errstate(divide="ignore", invalid="ignore"):
        speedup = base / total
    ids = job_id if isinstance(job_id, pa.Array | pa.ChunkedArray) else pa.array(job_id)
    names = pa.DictionaryArray.from_arrays(pa.array(np.tile(np.arange(k, dtype=np.int32), n)),
                                           pa.array([r.name for r in results]))
    return pa.table({
        "job_id": ids.take(pa.array(np.repeat(np.arange(n), k))),
        "scenario": names.cast(pa.string()),
        "matched": np.stack([r.matched for r in results], axis=1).reshape(-1),
        "applied": np.stack([r.applied for r in results], axis=1).reshape(-1),
        "base_total_s": base, "scenario_total_s": total, "speedup": speedup})


def _dask_parts(jobs: Any, scenarios: list[Scenario], catalog: Catalog, overlap: float,
                hierarchical: bool, per_job: bool, progress: Callable[[int, int], None] | None,
                address: str | None, parquet_dir: str | Path | None,
                rows_per_partition: int) -> Iterator[tuple[Outcome, pa.Table | None]]:
    """:func:`evaluate_part` of every Parquet partition of ``jobs`` on Dask (a table or a
    stream of chunks is written as partitions first: into ``parquet_dir``, else a temporary
    folder), in row order."""
    from traincast.engine.dask import map_partitions, partitioned

    if not isinstance(jobs, pa.Table | JobChunks | str | Path):
        cols = Columns.of(jobs)
        jobs = pa.table({**cols.table(), "job_id": cols["job_id"]})
    with partitioned(jobs, parquet_dir, rows_per_partition) as files:
        yield from map_partitions(files, evaluate_part, scenarios, catalog, overlap,
                                  hierarchical, per_job, address=address, progress=progress)


def _local_parts(jobs: Any, scenarios: list[Scenario], catalog: Catalog, overlap: float,
                 hierarchical: bool, per_job: bool, progress: Callable[[int, int], None] | None,
                 threads: int, base: tuple[Breakdown, Resolved] | None,
                 workloads: Workloads = SHIPPED
                 ) -> Iterator[tuple[Outcome, pa.Table | None]]:
    """:func:`evaluate_part` of the job table, or of each chunk of a :class:`JobChunks`."""
    if isinstance(jobs, str | Path):
        import pyarrow.parquet as pq

        jobs = pq.read_table(jobs)
    if not isinstance(jobs, JobChunks):
        yield evaluate_part(jobs, scenarios, catalog, overlap, hierarchical, per_job, threads,
                            progress, base, workloads)
        return
    done = 0
    for chunk in jobs:
        yield evaluate_part(chunk, scenarios, catalog, overlap, hierarchical, per_job, threads,
                            workloads=workloads)
        done += chunk.num_rows
        if progress:
            progress(done, jobs.rows)


def _target_gpus(sc: Scenario, catalog: Catalog) -> list[str]:
    """The GPU a scenario moves jobs onto: its ``gpu``, else its ``node``'s (none else)."""
    if sc.changes.get("gpu"):
        return [str(sc.changes["gpu"])]
    node = catalog.nodes.get(str(sc.changes.get("node", "")))
    return [node.gpu] if node is not None else []


CHANGED_TIME = {"nic": "the network", "intra": "communication inside a node",
                "pcie": "copies through the host, data I/O and PS traffic"}
"""The part of a job's time each link change reaches."""


def unmatched_line(name: str, summary: dict[str, Any], definition: dict[str, Any]) -> str:
    """Why a scenario matched no job: that no job has GPUs, or what its ``[match]`` selects
    (an ``upgrade_only`` one, jobs whose link its change makes faster; a ``ps-worker`` one,
    in a trace without parameter servers, that the format has none); "" where it matched
    one."""
    if summary.get("matched"):
        return ""
    if summary.get("jobs") and not sum(b.get("jobs", 0)
                                       for b in summary["by_architecture"].values()):
        return (f"{name}: no job matches it: no job of the trace has GPUs (n_gpus missing or "
                "0), and a scenario matches jobs with GPUs only")
    match = definition.get("match") or {}
    said = "; ".join(f"{k} {', '.join(map(str, v)) if isinstance(v, list) else v}"
                     for k, v in match.items() if k != "upgrade_only")
    if match.get("upgrade_only"):
        links = ", ".join(f"{k} {v}" for k, v in (definition.get("changes") or {}).items()
                          if k in LINK_KEYS)
        said = "; ".join(filter(None, [said, f"upgrade_only: jobs whose link its {links} makes "
                                             "faster, and it is faster than none of theirs"]))
    no_ps = "ps-worker" in (match.get("architecture") or []) and \
        not (summary["by_architecture"].get("ps-worker") or {}).get("jobs")
    return (f"{name}: no job matches it (it selects {said or 'every job'}"
            + ("; the trace has no ps-worker job: a format without parameter servers has none, "
               "docs/traces.md" if no_ps else "") + ")")


def unchanged_line(name: str, summary: dict[str, Any], definition: dict[str, Any]) -> str:
    """Why a scenario moved none of its priced jobs by more than 1% (``SPED_UP``; each up
    and down share 0): one that fits none of them says so; a network change over priced jobs
    that all run on one node (none of ``architectures.NETWORK_ARCHS``) says that; any other,
    what it changes and that its part of their time is none, small or already so (and how
    many it does not fit); "" where a job moved or none was priced."""
    n = summary.get("predicted") or 0
    if not n or summary["sped_up_share"] or summary["slowed_down_share"]:
        return ""
    misfit = summary.get("not_applied") or 0
    said = (f"{name}: none of its {n:,} priced jobs runs more than 1% faster or slower: "
            if n > 1 else f"{name}: its one priced job runs no more than 1% faster or slower: ")
    if misfit >= n:
        return said + ("it fits none of them (not fit: the port, GPU or node move does not "
                       "fit their GPUs or memory)" if n > 1 else
                       "it does not fit it (the port, GPU or node move)")
    changes = definition.get("changes") or {}
    archs = {a for a, b in summary["by_architecture"].items() if b.get("predicted")}
    they = "their" if n > 1 else "its"
    if "nic" in changes and archs and archs.isdisjoint(NETWORK_ARCHS) and not misfit:
        return (said + f"the network carries none of {they} time: "
                + ("every one runs" if n > 1 else "it runs")
                + f" on one node ({', '.join(sorted(archs))})")
    reached = [CHANGED_TIME[k] for k in changes if k in CHANGED_TIME]
    return (said + f"the part of {they} time it changes"
            + (f", {'; '.join(reached)}," if reached else "")
            + f" is none or small, or {they} setup is so already"
            + (f" ({misfit:,} it does not fit)" if misfit else ""))


def whatif(jobs: Any, scenarios: str | Path | Scenario | Iterable[Any],
           catalog: Catalog | None = None, *, sweep_spec: str | None = None,
           overlap: float = 0.0, hierarchical: bool = False, engine: str = "local",
           address: str | None = None, parquet_dir: str | Path | None = None,
           rows_per_partition: int = 250_000, per_job: bool = False, threads: int = 2,
           progress: Callable[[int, int], None] | None = None,
           base: tuple[Breakdown, Resolved] | None = None,
           on_rows: Callable[[pa.Table], None] | None = None,
           workloads: Workloads = SHIPPED) -> dict[str, Any]:
    """Run scenarios over a job table and summarize the speedups.

    ``jobs``: a canonical job table (pyarrow Table, dict of columns, pandas DataFrame), a
    Parquet path, or a :class:`~traincast.trace.chunks.JobChunks` (a store read chunk by
    chunk: memory stays flat as the trace grows). ``scenarios``: shipped names, TOML paths,
    dicts or ``Scenario`` objects; ``sweep_spec`` (``"nic=25Gbit,100Gbit"``) turns them (or
    every job) into one scenario per value. ``engine``: ``"local"`` or ``"dask"``
    (``address`` of a cluster, else a LocalCluster on 127.0.0.1; each partition returns its
    summaries, merged here); ``threads``: row chunks evaluated and scenarios summarized
    concurrently (local); ``progress(done, total)`` is called as rows (local) or partitions
    (dask) finish. Returns ``{"jobs", "summary"}`` for one scenario or ``{"jobs",
    "scenarios": {name: summary}}`` for several, plus ``"definitions"``; with ``per_job``
    the per-job rows (:func:`job_rows`) go to ``on_rows`` part by part, else into
    ``"job_rows"`` (a pyarrow Table). ``base``: the jobs' own
    ``engine.local.evaluate_columns(Columns.of(jobs), catalog, overlap, hierarchical)`` when
    the caller has it (``traincast study``), so the local engine does not evaluate it again.
    ``workloads``: the jobs' per-op tables, profile records and precision
    (``engine.local.Workloads``; default: the shipped zoo's, fp32; a job's own for a job given
    by its profile, local engine only).
    """
    catalog = catalog or load_catalog()
    specs = [] if scenarios is None else scenarios
    scs = as_scenarios(specs, catalog) if specs != [] else []
    if sweep_spec:
        key, values = parse_sweep(sweep_spec)
        scs = sweep(scs, key, values, catalog)
    if not scs:
        raise TraincastError("no scenario given", hint="--scenario NAME|FILE or --sweep KEY=V,...")
    if engine not in ENGINES:
        raise TraincastError(f"unknown engine {engine!r}", hint=f"choose {' or '.join(ENGINES)}")
    if engine == "local":
        parts = _local_parts(jobs, scs, catalog, overlap, hierarchical, per_job, progress,
                             threads, base, workloads)
    elif workloads != SHIPPED:
        raise TraincastError("a job's own profile (workloads) runs on the local engine",
                             hint="engine='local'")
    else:
        parts = _dask_parts(jobs, scs, catalog, overlap, hierarchical, per_job, progress,
                            address, parquet_dir, rows_per_partition)
    total: Outcome | None = None
    kept: list[pa.Table] = []
    for outcome, rows in parts:
        total = outcome if total is None else total.merge(outcome)
        if rows is not None:
            (on_rows or kept.append)(rows)
    if total is None:  # a stream without chunks: no job
        total = Outcome([Summary() for _ in scs], np.zeros(len(REASONS), dtype=np.int64), 0)
    summaries = {sc.name: s.result() for sc, s in zip(scs, total.summaries, strict=True)}
    definitions = {sc.name: sc.to_dict() for sc in scs}
    for name, s in summaries.items():  # why a scenario moved no job (CLI, --json, study)
        d = definitions[name]
        s["unchanged_why"] = (unmatched_line(name, s, d) if total.jobs else "") \
            or unchanged_line(name, s, d)
    result: dict[str, Any] = {"jobs": total.jobs, "engine": engine,
                              "unpredicted": reason_dict(total.reasons)}
    if len(scs) == 1:
        result["summary"] = summaries[scs[0].name]
    else:
        result["scenarios"] = summaries
    result["definitions"] = definitions
    result["flat_peak"] = {sc.name: flat for sc in scs
                           if (flat := compute.flat_peak_gpus(catalog, _target_gpus(sc, catalog)))}
    if per_job and on_rows is None:
        result["job_rows"] = pa.concat_tables(kept) if kept else pa.table({})
    return result
