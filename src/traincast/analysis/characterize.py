"""The cluster view of the paper: what architectures a cluster's jobs use, how many GPUs, how
long, and where their time goes.

``characterize(jobs)`` takes a canonical job table (Arrow table or dict of columns) and returns
plain data (the keys of docs/traces.md):

* ``jobs``, ``gpus`` (Σ n_gpus), ``gpu_time_s`` (Σ n_gpus × (end − start)); a censored job with
  a start and no end (still running when the trace ended) counts up to the trace end
  ``trace_end_s`` = the largest submit, start or end time the trace holds (a store holding
  several traces: that of the job's own ``source_id``), so its GPU time is a lower bound, as is
  that of a censored job whose trace gives it an end time: ``censored_gpu_time_s``
  is the GPU time of all censored jobs and ``gpu_time_lower_bound`` says whether there is
  any; ``flags`` (counts);
* ``by_architecture`` / ``by_gpu_type``: ``{name: {jobs, gpus, gpu_time_s, job_share, gpu_share,
  gpu_time_share}}`` (NULL architecture or GPU type -> ``unknown``); a GPU type's ``gpu`` is
  its catalog entry, None for a type the catalog does not know, which
  ``unknown_gpu_types`` (``{name: jobs}``) lists: their jobs get no prediction
  (:func:`unpredicted_text` says why jobs have none);
* ``cdf``: ``gpus_per_job`` (``value`` -> fraction of jobs with at most that many GPUs),
  ``gpus_per_job_with_gpus`` (the same over the jobs with at least one GPU, as the
  architecture shares count them) and
  ``duration_s`` (``p`` -> quantile ``value``; finished jobs with a known end and a
  non-negative duration, ``jobs_with_duration`` of them: the running time of a censored job
  is a lower bound, not a duration, even where the trace gives it an end time,
  ``censored_with_end`` of them, as Alibaba 2023's Running pods' ``deletion_time``);
* ``breakdown`` — jobs with known features (from the trace, or from the zoo profile of their
  ``workload``) and at least one GPU, predicted with the core time model
  (:func:`traincast.predict.predict_table`): mean share of each component job-weighted,
  GPU-weighted (weight n_gpus) and GPU-time-weighted, overall and per architecture; the
  distribution of the communication share; jobs per bottleneck; the share of jobs with more
  than 80% of their time in communication and more than 50% in data I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from traincast.analysis.quantiles import Quantiles
from traincast.architectures import ARCHITECTURES
from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.jobs import unnamed_hardware
from traincast.model import BOTTLENECKS, COMPONENTS, Breakdown
from traincast.predict import predict_table
from traincast.resolve import BAD_HARDWARE, NO_FEATURES, REASONS, fallback_node, reason_counts
from traincast.trace.chunks import JobChunks
from traincast.trace.schema import FLAG_COLUMNS
from traincast.units import first_of

F = NDArray[np.float64]
QUANTILES = np.round(np.linspace(0.0, 1.0, 101), 2)
COMM_HEAVY = 0.8
DATA_HEAVY = 0.5


def _columns(jobs: pa.Table | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(jobs, pa.Table):
        return {name: jobs.column(name) for name in jobs.column_names}
    return dict(jobs)


def _floats(cols: Mapping[str, Any], name: str, n: int) -> NDArray[np.float64]:
    v = cols.get(name)
    if v is None:
        return np.full(n, np.nan)
    if isinstance(v, pa.ChunkedArray | pa.Array):
        v = v.to_numpy(zero_copy_only=False)
    return np.asarray(v, dtype=np.float64).reshape(-1)


def _labels(cols: Mapping[str, Any], name: str, n: int) -> tuple[NDArray[np.int64], list[str]]:
    v = cols.get(name)
    if v is None:
        return np.zeros(n, dtype=np.int64), ["unknown"]
    arr = v if isinstance(v, pa.ChunkedArray | pa.Array) else pa.array(
        np.asarray(v, dtype=object), type=pa.string(), from_pandas=True)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    enc = arr.cast(pa.string()).dictionary_encode()
    names = [s or "unknown" for s in enc.dictionary.to_pylist()]
    codes = enc.indices.fill_null(len(names)).to_numpy(zero_copy_only=False).astype(np.int64)
    names.append("unknown")
    # merge duplicate labels ("" and NULL both mean unknown)
    uniq = list(dict.fromkeys(names))
    remap = np.array([uniq.index(s) for s in names], dtype=np.int64)
    return remap[codes], uniq


UNKNOWN_GPU_FIX = ("Name each in a catalog file, as an [alias] of a catalog GPU or a [gpu] entry "
                   "of its own, and pass --catalog FILE (docs/hardware.md).")
"""What to do about the GPU types of ``unknown_gpu_types``."""


UNKNOWN_NODE_FIX = ("A node column names a node preset of the catalog (traincast hardware "
                    "list); a column of machine names is not one: rename it in the file, or "
                    "name each node in a catalog file (docs/hardware.md).")
"""What to do about the nodes of ``unknown_nodes``."""


def unpredicted_text(unpredicted: Mapping[str, int], unknown_types: Mapping[str, int],
                     unknown_nodes: Mapping[str, int] | None = None,
                     unknown_workloads: Mapping[str, int] | None = None) -> tuple[str, str]:
    """Why jobs got no prediction: ``(reasons, fix)``, each reason of ``unpredicted``
    (``resolve.REASONS`` -> jobs) with its count, the GPU types and nodes the catalog does not
    know (``unknown_gpu_types``, ``unknown_nodes``: the first 5 of each) and the workloads no
    profile prices (``unknown_workloads``) named beside theirs, and what to do about them
    ('' when none); ``("", "")`` when every job has one."""
    parts = []
    nodes = dict(unknown_nodes or {})
    for reason, n in unpredicted.items():
        part = f"{n:,} {reason}"
        if reason == REASONS[BAD_HARDWARE] and (unknown_types or nodes):
            named = [f"GPU type{'s' * (len(unknown_types) > 1)} {first_of(unknown_types)}"
                     if unknown_types else "",
                     f"node{'s' * (len(nodes) > 1)} {first_of(nodes)}" if nodes else ""]
            part += f": {' and '.join(x for x in named if x)} not in the catalog"
        elif reason == REASONS[NO_FEATURES]:
            part += ": no feature columns, no workload the zoo knows" + (
                f" ({first_of(unknown_workloads)})" if unknown_workloads else "")
        parts.append(part)
    hardware = REASONS[BAD_HARDWARE] in unpredicted
    fix = " ".join([UNKNOWN_GPU_FIX] * bool(unknown_types and hardware)
                   + [UNKNOWN_NODE_FIX] * bool(nodes and hardware))
    return "; ".join(parts), fix


def _count_names(acc: dict[str, int], codes: NDArray[np.int64], names: list[str],
                 where: NDArray[np.bool_]) -> None:
    """Add to ``acc`` the rows ``where`` holds, per label (:func:`_labels`' codes and names;
    ``unknown``, no value, left out)."""
    per = np.bincount(codes[where], minlength=len(names))
    for name, k in zip(names, per.tolist(), strict=True):
        if k and name != "unknown":
            acc[name] = acc.get(name, 0) + k


def _most_first(counts: Mapping[str, int]) -> dict[str, int]:
    """``{name: count}`` ordered by count, largest first (ties by name)."""
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _group_result(acc: dict[str, F], order: tuple[str, ...] = ()
                  ) -> dict[str, dict[str, float]]:
    """``{name: [jobs, gpus, gpu_time_s]}`` as the rows of ``by_architecture`` /
    ``by_gpu_type`` with their shares (names in ``order`` first, then by jobs)."""
    names = list(acc)
    tot = np.sum([acc[k] for k in names], axis=0) if names else np.zeros(3)
    ranked = sorted(names, key=lambda s: (s not in order, order.index(s) if s in order else 0,
                                          -acc[s][0], s))
    out: dict[str, dict[str, float]] = {}
    for s in ranked:
        cnt, g, gt = acc[s]
        if cnt == 0:
            continue
        out[s] = {"jobs": int(cnt), "gpus": float(g), "gpu_time_s": float(gt),
                  "job_share": _ratio(cnt, tot[0]), "gpu_share": _ratio(g, tot[1]),
                  "gpu_time_share": _ratio(gt, tot[2])}
    return out


def _add_groups(acc: dict[str, F], codes: NDArray[np.int64], names: list[str],
                *weights: NDArray[np.float64]) -> None:
    """Add per-name sums of ``weights`` (jobs, GPUs, GPU time) to ``acc``."""
    k = len(names)
    sums = np.stack([np.bincount(codes, weights=w, minlength=k) for w in weights])
    for i, name in enumerate(names):
        acc[name] = acc.get(name, np.zeros(len(weights))) + sums[:, i]


def _ratio(a: float, b: float) -> float:
    return float(a / b) if b > 0 else float("nan")


def trace_ends_s(jobs: pa.Table | Mapping[str, Any]) -> tuple[float | None, dict[float, float]]:
    """The trace end (the largest submit, start or end time; None without any) and that of
    each source (``source_id``; a null source is one of its own, key -1) of a job table."""
    cols = _columns(jobs)
    n = len(next(iter(cols.values()))) if cols else 0
    last_s = _last_s(cols, n)
    known = ~np.isnan(last_s)
    end = float(last_s[known].max()) if known.any() else None
    if "source_id" not in cols:
        return end, {}
    source = np.nan_to_num(_floats(cols, "source_id", n), nan=-1.0)[known]
    ids, inverse = np.unique(source, return_inverse=True)
    ends = np.full(len(ids), -np.inf)
    np.maximum.at(ends, inverse, last_s[known])
    return end, dict(zip(ids.tolist(), ends.tolist(), strict=True))


def _last_s(cols: Mapping[str, Any], n: int) -> NDArray[np.float64]:
    """Per job, the largest of its submit, start and end times (NaN without any)."""
    start, end = _floats(cols, "start_time_s", n), _floats(cols, "end_time_s", n)
    with np.errstate(invalid="ignore"):  # rows without any time: NaN
        last_s = np.fmax(np.fmax(_floats(cols, "submit_time_s", n), start), end)
    return np.where(np.isfinite(last_s), last_s, np.nan)


def _durations(cols: Mapping[str, Any], n: int, trace_end_s: float | None,
               source_ends_s: Mapping[float, float]) -> tuple[NDArray[np.float64],
                                                              NDArray[np.float64]]:
    """Per job: the duration ``end − start`` (NaN unless both are known and end >= start), and
    the running time ``trace end − start`` of a censored job with a start and no end (NaN for
    every other job; 0 if it starts after the last time). The trace end of a job is that of its
    own source (``source_id``: a store holding several traces, each with its own time origin,
    :func:`trace_ends_s`), else ``trace_end_s``. A job is censored by its ``censored`` flag;
    without that column, by having a start and no end (the csv rule)."""
    start, end = _floats(cols, "start_time_s", n), _floats(cols, "end_time_s", n)
    duration = end - start
    duration = np.where(duration >= 0, duration, np.nan)
    running = np.isfinite(start) & np.isnan(end)
    if "censored" in cols:
        running &= _floats(cols, "censored", n) > 0
    open_s = np.full(n, np.nan)
    if trace_end_s is not None and running.any():
        end_of_job = np.full(n, trace_end_s)
        if "source_id" in cols and source_ends_s:
            source = np.nan_to_num(_floats(cols, "source_id", n), nan=-1.0)
            ids = np.array(sorted(source_ends_s))
            ends = np.array([source_ends_s[i] for i in ids])
            at = np.clip(np.searchsorted(ids, source), 0, len(ids) - 1)
            end_of_job = np.where(ids[at] == source, ends[at], trace_end_s)
        open_s[running] = np.maximum(end_of_job[running] - start[running], 0.0)
    return duration, open_s


def job_gpu_time_s(jobs: pa.Table | Mapping[str, Any]) -> NDArray[np.float64]:
    """GPU time of each job by the rule of :func:`characterize`: ``n_gpus × (end − start)``,
    a censored job with a start and no end counted up to the trace end (a lower bound); NaN
    where neither applies."""
    cols = _columns(jobs)
    n = len(next(iter(cols.values()))) if cols else 0
    duration, open_s = _durations(cols, n, *trace_ends_s(cols))
    return _gpu_time_s(_floats(cols, "n_gpus", n), duration, open_s)


def _cdf(values: NDArray[np.float64], counts: NDArray[np.int64]) -> dict[str, list[float]]:
    """``{"value", "cdf"}``: each value and the fraction of the counts at or below it."""
    return {"value": values.tolist(), "cdf": (np.cumsum(counts) / max(counts.sum(), 1)).tolist()}


def _gpu_time_s(gpus: NDArray[np.float64], duration_s: NDArray[np.float64],
                open_s: NDArray[np.float64]) -> NDArray[np.float64]:
    """``gpus × duration``, else ``gpus ×`` the running time up to the trace end (NaN where
    neither is known)."""
    return gpus * np.where(np.isnan(duration_s), open_s, duration_s)


def default_hardware(catalog: Catalog, jobs: int) -> dict[str, Any]:
    """``jobs`` with GPUs whose trace names neither a GPU type nor a node, and the node preset
    they are priced on (``traincast.resolve.fallback_node`` of ``catalog``): ``{"jobs",
    "node", "set_by_catalog", "gpu", "gpus", "intra", "nic"}``."""
    node = fallback_node(catalog)
    nd = catalog.nodes.get(node)
    return {"jobs": int(jobs), "node": node, "set_by_catalog": catalog.fallback_node is not None,
            **({"gpu": nd.gpu, "gpus": nd.gpus, "intra": nd.intra, "nic": nd.nic}
               if nd is not None else {})}


class Characterization:
    """The characterization of a job table filled chunk by chunk (:meth:`add`) or from parts
    (:meth:`merge`), so its memory does not grow with the trace: sums per architecture and GPU
    type, counts per GPU count, and :class:`~traincast.analysis.quantiles.Quantiles` for the
    duration and communication-share distributions (exact up to ``EXACT_MAX`` jobs, within
    0.1% beyond). ``trace_end_s`` and ``source_ends_s`` are those of the whole table
    (:func:`trace_ends_s`, or the store's)."""

    def __init__(self, catalog: Catalog | None = None, overlap: float = 0.0,
                 trace_end_s: float | None = None,
                 source_ends_s: Mapping[float, float] | None = None) -> None:
        self.catalog = catalog or load_catalog()
        self.overlap = overlap
        self.trace_end_s = trace_end_s
        self.source_ends_s = dict(source_ends_s or {})
        # gpus, gpu time, censored gpu time, finished jobs with a duration, censored ones
        self.sums = np.zeros(5)
        self.n = self.zero_gpu = self.default_hardware = 0
        self.flags: dict[str, int] = {}
        self.arch: dict[str, F] = {}
        self.types: dict[str, F] = {}
        self.gpus_per_job: dict[float, int] = {}
        self.durations = Quantiles()
        self.has_arch = False
        # breakdown: per architecture [jobs, gpus, Σ share x w and Σ w per weighting]
        self.bd: dict[str, F] = {}
        self.bottleneck = np.zeros(len(BOTTLENECKS))
        self.comm = Quantiles()
        self.heavy = np.zeros(4)  # comm > 80%, data I/O > 50%, Σ utilization, its jobs
        self.unpredicted: dict[str, int] = {}
        self.nodes: dict[str, int] = {}  # jobs with GPUs per node name the trace gives
        self.workloads_unknown: dict[str, int] = {}  # jobs per workload no profile prices

    def add(self, jobs: pa.Table | Mapping[str, Any],
            breakdown: Breakdown | None = None) -> Characterization:
        """Add a chunk of jobs (prepared: features filled); ``breakdown``: its predicted
        breakdown when the caller has it."""
        cols = _columns(jobs)
        n = len(next(iter(cols.values()))) if cols else 0
        if n == 0:
            return self
        gpus_raw = _floats(cols, "n_gpus", n)
        gpus = np.nan_to_num(gpus_raw)
        duration, open_s = _durations(cols, n, self.trace_end_s, self.source_ends_s)
        gpu_time = np.nan_to_num(_gpu_time_s(gpus, duration, open_s))
        # every censored job's GPU time is a lower bound: counted up to the trace end here, or
        # ending at the trace end in the trace itself (Alibaba 2023's deletion_time of a
        # running pod) (by its flag; without that column, the jobs counted up to the trace end)
        censored = _floats(cols, "censored", n) > 0 if "censored" in cols \
            else ~np.isnan(open_s)
        self.n += n
        known = np.isfinite(duration)
        self.sums += [gpus.sum(), gpu_time.sum(), gpu_time[censored].sum(),
                      (known & ~censored).sum(), (known & censored).sum()]
        for f in FLAG_COLUMNS:
            if f in cols:
                self.flags[f] = self.flags.get(f, 0) + int((_floats(cols, f, n) > 0).sum())
        self.zero_gpu += int((gpus_raw == 0).sum())
        arch_codes, arch_names = _labels(cols, "architecture", n)
        type_codes, type_names = _labels(cols, "gpu_type", n)
        node_codes, node_names = _labels(cols, "node", n)
        self.default_hardware += int(unnamed_hardware(cols, gpus_raw).sum())
        # jobs with 0 GPUs do not train on GPUs: counted apart, not in the architecture shares
        _add_groups(self.arch, arch_codes, arch_names, np.where(gpus_raw == 0, 0.0, 1.0),
                    gpus, gpu_time)
        _add_groups(self.types, type_codes, type_names, np.ones(n), gpus, gpu_time)
        _count_names(self.nodes, node_codes, node_names, gpus_raw > 0)
        finite = gpus_raw[np.isfinite(gpus_raw)]
        values, counts = np.unique(finite, return_counts=True)
        for v, c in zip(values.tolist(), counts.tolist(), strict=True):
            self.gpus_per_job[v] = self.gpus_per_job.get(v, 0) + c
        self.durations.add(duration[~censored])  # a censored job's end is no job's end
        if "architecture" in cols:
            self.has_arch = True
            self._add_breakdown(cols, arch_codes, arch_names, gpus, gpu_time, breakdown)
        return self

    def _add_breakdown(self, cols: Mapping[str, Any], arch_codes: NDArray[np.int64],
                       arch_names: list[str], gpus: F, gpu_time: F,
                       bd: Breakdown | None) -> None:
        if bd is None:
            bd = predict_table(cols, self.catalog, overlap=self.overlap)
        total = np.asarray(bd.total, dtype=np.float64).reshape(-1)
        known = np.isfinite(total) & (total > 0) & (gpus > 0)
        if bd.reason is not None and "workload" in cols:  # the workloads no profile prices
            _count_names(self.workloads_unknown, *_labels(cols, "workload", len(total)),
                         np.asarray(bd.reason).reshape(-1) == NO_FEATURES)
        for k, v in reason_counts(bd.reason).items():
            self.unpredicted[k] = self.unpredicted.get(k, 0) + v
        if not known.any():
            return
        sh = bd.shares()
        shares = np.stack([np.asarray(sh[c]).reshape(-1)[known] for c in COMPONENTS])
        g = gpus[known]
        weights = np.stack([np.ones(len(g)), g, np.nan_to_num(gpu_time[known])])
        codes = arch_codes[known]
        k = len(arch_names)
        # per architecture: jobs, gpus, then for each weighting Σ share x w (5) and Σ w
        per = [np.bincount(codes, minlength=k), np.bincount(codes, weights=g, minlength=k)]
        for w in weights:
            per += [np.bincount(codes, weights=s * w, minlength=k) for s in shares]
            per.append(np.bincount(codes, weights=w, minlength=k))
        per_arr = np.stack(per)
        for i, name in enumerate(arch_names):
            if per_arr[0, i]:
                self.bd[name] = self.bd.get(name, np.zeros(len(per))) + per_arr[:, i]
        self.bottleneck += np.bincount(bd.bottleneck_code().reshape(-1)[known],
                                       minlength=len(BOTTLENECKS))
        comm = shares[COMPONENTS.index("comm")]
        data = shares[COMPONENTS.index("data_io")]
        self.comm.add(comm)
        util = np.asarray(bd.gpu_util()).reshape(-1)[known]
        util = util[np.isfinite(util)]
        self.heavy += [(comm > COMM_HEAVY).sum(), (data > DATA_HEAVY).sum(), util.sum(),
                       len(util)]

    def _default_hardware(self) -> dict[str, Any]:
        """The jobs with GPUs whose trace names neither a GPU type nor a node, and the node
        preset they are priced on (:func:`default_hardware`)."""
        return default_hardware(self.catalog, self.default_hardware)

    def merge(self, other: Characterization) -> Characterization:
        """Add another part's characterization (same trace ends, catalog and overlap)."""
        self.n += other.n
        self.zero_gpu += other.zero_gpu
        self.default_hardware += other.default_hardware
        self.sums += other.sums
        self.bottleneck += other.bottleneck
        self.heavy += other.heavy
        self.has_arch |= other.has_arch
        for mine, theirs in ((self.flags, other.flags), (self.arch, other.arch),
                             (self.types, other.types), (self.gpus_per_job, other.gpus_per_job),
                             (self.bd, other.bd), (self.unpredicted, other.unpredicted),
                             (self.nodes, other.nodes),
                             (self.workloads_unknown, other.workloads_unknown)):
            for key, v in theirs.items():
                mine[key] = mine[key] + v if key in mine else v
        self.durations.merge(other.durations)
        self.comm.merge(other.comm)
        return self

    def result(self) -> dict[str, Any]:
        """The characterization as plain data (the keys of docs/traces.md)."""
        gpus, gpu_time, censored_s, with_duration, censored_ended = self.sums
        values = np.array(sorted(self.gpus_per_job))
        counts = np.array([self.gpus_per_job[v] for v in values.tolist()])
        out: dict[str, Any] = {
            "jobs": self.n,
            "gpus": float(gpus),
            "gpu_time_s": float(gpu_time),
            "censored_gpu_time_s": float(censored_s),
            "gpu_time_lower_bound": bool(censored_s > 0),
            "trace_end_s": self.trace_end_s,
            "jobs_with_duration": int(with_duration),
            "censored_with_end": int(censored_ended),
            "flags": dict(self.flags) if self.n else dict.fromkeys(FLAG_COLUMNS, 0),
            "zero_gpu_jobs": self.zero_gpu,
            "default_hardware": self._default_hardware(),
            "by_architecture": _group_result(self.arch, ARCHITECTURES),
            "by_gpu_type": _group_result(self.types),
            "cdf": {"gpus_per_job": _cdf(values, counts),
                    "gpus_per_job_with_gpus": _cdf(values[values > 0], counts[values > 0]),
                    "duration_s": _quantiles(self.durations)},
            "breakdown": {"jobs": 0, "gpus": 0.0},
        }
        guesses = {k.lower(): why for k, why in self.catalog.assumed_aliases.items()}
        for name, row in out["by_gpu_type"].items():
            try:
                row["gpu"] = self.catalog.gpu_name(name)
            except KeyError:
                row["gpu"] = None
            if name.lower() in guesses:  # an undisclosed model priced as a public part
                row["assumed"] = guesses[name.lower()]
        out["unknown_gpu_types"] = {name: row["jobs"] for name, row in out["by_gpu_type"].items()
                                    if row["gpu"] is None and name != "unknown"}
        out["unknown_workloads"] = _most_first(self.workloads_unknown)
        out["unknown_nodes"] = {name: k for name, k in _most_first(self.nodes).items()
                                if name not in self.catalog.nodes}
        if self.n and self.has_arch:
            out["breakdown"] = self._breakdown_result()
        return out

    def _breakdown_result(self) -> dict[str, Any]:
        if not self.bd:
            return {"jobs": 0, "gpus": 0.0, "unpredicted": dict(self.unpredicted)}
        nc = len(COMPONENTS)

        def views(row: F) -> dict[str, Any]:
            def shares(j: int) -> dict[str, float]:
                block = row[2 + j * (nc + 1): 2 + (j + 1) * (nc + 1)]
                return {c: _ratio(float(block[i]), float(block[nc]))
                        for i, c in enumerate(COMPONENTS)}

            return {"jobs": int(row[0]), "gpus": float(row[1]), "job_weighted": shares(0),
                    "gpu_weighted": shares(1), "gpu_time_weighted": shares(2)}

        rank = {a: k for k, a in enumerate(ARCHITECTURES)}
        names = sorted(self.bd, key=lambda s: rank.get(s, len(rank)))  # stable: first seen
        known = float(sum(r[0] for r in self.bd.values()))
        comm80, data50, util_sum, util_n = self.heavy
        return {
            **views(np.sum(list(self.bd.values()), axis=0)),
            "by_architecture": {s: views(self.bd[s]) for s in names},
            "bottleneck": {c: int(self.bottleneck[i]) for i, c in enumerate(BOTTLENECKS)},
            "comm_share_cdf": _quantiles(self.comm),
            "comm_over_80_share": float(comm80 / known),
            "data_io_over_50_share": float(data50 / known),
            "gpu_util_pred_mean": _ratio(util_sum, util_n),
            "overlap": self.overlap,
            "unpredicted": dict(self.unpredicted),
        }


def _quantiles(q: Quantiles) -> dict[str, list[float]]:
    if q.count == 0:
        return {"p": [], "value": []}
    return {"p": QUANTILES.tolist(), "value": q.quantiles(QUANTILES).tolist()}


def characterize(jobs: pa.Table | Mapping[str, Any], catalog: Catalog | None = None,
                 overlap: float = 0.0, *, fill: bool = True,
                 breakdown: Breakdown | None = None) -> dict[str, Any]:
    """The cluster characterization of a canonical job table (see the module docstring).

    ``fill``: first fill unknown features from the zoo profiles of the jobs' workloads
    (:func:`traincast.trace.fill_features`). ``breakdown``: the jobs' own predicted breakdown
    (``predict_table(jobs, catalog, overlap=overlap)``, or ``engine.local.evaluate_columns``'s)
    when the caller has it: used as it is, not evaluated again (then give the filled jobs it
    was computed from, with ``fill=False``). A trace in a store, in bounded memory:
    :func:`characterize_chunks`.
    """
    if fill and isinstance(jobs, pa.Table):
        from traincast.trace import fill_features

        try:
            jobs = fill_features(jobs)
        except ImportError:
            pass
    cols = _columns(jobs)
    return Characterization(catalog, overlap, *trace_ends_s(cols)).add(cols, breakdown).result()


def _characterize_part(jobs: pa.Table, catalog: Catalog, overlap: float,
                       ends: tuple[float | None, dict[float, float]]) -> Characterization:
    """One Dask partition's characterization (merged by the client)."""
    return Characterization(catalog, overlap, *ends).add(jobs)


def characterize_chunks(chunks: JobChunks, catalog: Catalog | None = None, overlap: float = 0.0,
                        *, engine: str = "local", address: str | None = None,
                        parquet_dir: str | Path | None = None,
                        progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """:func:`characterize` of a store read chunk by chunk (memory stays flat as the trace
    grows): the trace ends are read from the store first, then each prepared chunk is added
    to one :class:`Characterization` (``engine="local"``), or written as a Parquet partition
    (into ``parquet_dir``, else a temporary folder) and characterized on Dask (``"dask"``,
    ``address`` of a cluster, else a LocalCluster), the parts merged here. ``progress(done,
    total)``: jobs (local) or partitions (dask) done."""
    catalog = catalog or load_catalog()
    ends = chunks.trace_ends_s()
    acc = Characterization(catalog, overlap, *ends)
    if engine == "local":
        for chunk in chunks:
            acc.add(chunk)
            if progress:
                progress(acc.n, chunks.rows)
        return acc.result()
    if engine != "dask":
        raise TraincastError(f"unknown engine {engine!r}", hint="choose local or dask")
    from traincast.engine.dask import map_partitions, partitioned

    with partitioned(chunks, parquet_dir) as files:
        for part in map_partitions(files, _characterize_part, catalog, overlap, ends,
                                   address=address, progress=progress):
            acc.merge(part)
    return acc.result()
