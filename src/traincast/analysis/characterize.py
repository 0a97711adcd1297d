"""The cluster view of the paper: what architectures a cluster's jobs use, how many GPUs, how
long, and where their time goes.

``characterize(jobs)`` takes a canonical job table (Arrow table or dict of columns) and returns
plain data (the keys of docs/traces.md):

* ``jobs``, ``gpus`` (Σ n_gpus), ``gpu_time_s`` (Σ n_gpus × (end − start)); a censored job with
  a start and no end (still running when the trace ended) counts up to the trace end
  ``trace_end_s`` = the largest submit, start or end time the trace holds (a store holding
  several traces: that of the job's own ``source_id``), so its GPU time is a lower bound, as is
  that of a censored job whose trace gives the trace end as its end: ``censored_gpu_time_s``
  is the GPU time of all censored jobs and ``gpu_time_lower_bound`` says whether there is
  any; ``flags`` (counts);
* ``by_architecture`` / ``by_gpu_type``: ``{name: {jobs, gpus, gpu_time_s, job_share, gpu_share,
  gpu_time_share}}`` (NULL architecture or GPU type -> ``unknown``);
* ``cdf``: ``gpus_per_job`` (``value`` -> fraction of jobs with at most that many GPUs) and
  ``duration_s`` (``p`` -> quantile ``value``; jobs with a known end and a non-negative
  duration: the running time of a censored job is a lower bound, not a duration);
* ``breakdown`` — jobs with known features (from the trace, or from the zoo profile of their
  ``workload``) and at least one GPU, predicted with the core time model
  (:func:`traincast.predict.predict_table`): mean share of each component job-weighted,
  GPU-weighted (weight n_gpus) and GPU-time-weighted, overall and per architecture; the
  distribution of the communication share; jobs per bottleneck; the share of jobs with more
  than 80% of their time in communication and more than 50% in data I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from traincast.architectures import ARCHITECTURES
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.model import COMPONENTS, Breakdown
from traincast.predict import predict_table
from traincast.resolve import reason_counts
from traincast.trace.schema import FLAG_COLUMNS

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


def _group(codes: NDArray[np.int64], names: list[str], jobs_w: NDArray[np.float64],
           gpus: NDArray[np.float64], gpu_time: NDArray[np.float64],
           order: tuple[str, ...] = ()) -> dict[str, dict[str, float]]:
    k = len(names)
    cnt = np.bincount(codes, weights=jobs_w, minlength=k)
    g = np.bincount(codes, weights=gpus, minlength=k)
    gt = np.bincount(codes, weights=gpu_time, minlength=k)
    tot = (cnt.sum(), g.sum(), gt.sum())
    ranked = sorted(range(k), key=lambda i: (names[i] not in order,
                                             order.index(names[i]) if names[i] in order else 0,
                                             -cnt[i], names[i]))
    out: dict[str, dict[str, float]] = {}
    for i in ranked:
        if cnt[i] == 0:
            continue
        out[names[i]] = {"jobs": int(cnt[i]), "gpus": float(g[i]), "gpu_time_s": float(gt[i]),
                         "job_share": _ratio(cnt[i], tot[0]), "gpu_share": _ratio(g[i], tot[1]),
                         "gpu_time_share": _ratio(gt[i], tot[2])}
    return out


def _ratio(a: float, b: float) -> float:
    return float(a / b) if b > 0 else float("nan")


def _quantiles(x: NDArray[np.float64]) -> dict[str, list[float]]:
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"p": [], "value": []}
    return {"p": QUANTILES.tolist(), "value": np.quantile(x, QUANTILES).tolist()}


def _discrete_cdf(x: NDArray[np.float64]) -> dict[str, list[float]]:
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"value": [], "cdf": []}
    values, counts = np.unique(x, return_counts=True)
    return {"value": values.tolist(), "cdf": (np.cumsum(counts) / x.size).tolist()}


def _weighted_shares(shares: NDArray[np.float64], w: NDArray[np.float64]) -> dict[str, float]:
    """Weighted mean of each component's share (rows of ``shares``) over the jobs."""
    tot = w.sum()
    return {c: _ratio(float((shares[i] * w).sum()), tot) for i, c in enumerate(COMPONENTS)}


def _breakdown(cols: Mapping[str, Any], n: int, arch_codes: NDArray[np.int64],
               arch_names: list[str], gpus: NDArray[np.float64], gpu_time: NDArray[np.float64],
               catalog: Catalog, overlap: float, bd: Breakdown | None) -> dict[str, Any]:
    if bd is None:
        bd = predict_table(cols, catalog, overlap=overlap)
    total = np.asarray(bd.total, dtype=np.float64).reshape(-1)
    known = np.isfinite(total) & (total > 0) & (gpus > 0)
    unpredicted = reason_counts(bd.reason)
    if not known.any():
        return {"jobs": 0, "gpus": 0.0, "unpredicted": unpredicted}
    shares = np.stack([np.asarray(bd.shares()[c]).reshape(-1) for c in COMPONENTS])[:, known]
    g = gpus[known]
    gt = np.nan_to_num(gpu_time[known])
    codes = bd.bottleneck_code().reshape(-1)[known]
    comm = shares[COMPONENTS.index("comm")]
    data = shares[COMPONENTS.index("data_io")]
    one = np.ones(int(known.sum()))

    def views(sel: NDArray[np.bool_]) -> dict[str, Any]:
        return {"jobs": int(sel.sum()), "gpus": float(g[sel].sum()),
                "job_weighted": _weighted_shares(shares[:, sel], one[sel]),
                "gpu_weighted": _weighted_shares(shares[:, sel], g[sel]),
                "gpu_time_weighted": _weighted_shares(shares[:, sel], gt[sel])}

    arch_known = arch_codes[known]
    by_arch = {}
    rank = {a: k for k, a in enumerate(ARCHITECTURES)}
    for i in sorted(range(len(arch_names)), key=lambda i: rank.get(arch_names[i], len(rank))):
        name = arch_names[i]
        sel = arch_known == i
        if sel.any():
            by_arch[name] = views(sel)
    util = np.asarray(bd.gpu_util()).reshape(-1)[known]
    return {
        **views(np.ones(int(known.sum()), dtype=bool)),
        "by_architecture": by_arch,
        "bottleneck": {c: int((codes == i).sum()) for i, c in enumerate(COMPONENTS)},
        "comm_share_cdf": _quantiles(comm),
        "comm_over_80_share": float((comm > COMM_HEAVY).mean()),
        "data_io_over_50_share": float((data > DATA_HEAVY).mean()),
        "gpu_util_pred_mean": float(np.nanmean(util)),
        "overlap": overlap,
        "unpredicted": unpredicted,
    }


def _durations(cols: Mapping[str, Any], n: int) -> tuple[NDArray[np.float64],
                                                         NDArray[np.float64], float | None]:
    """Per job: the duration ``end − start`` (NaN unless both are known and end >= start), the
    running time ``trace end − start`` of a censored job with a start and no end (NaN for
    every other job; 0 if it starts after the last time), and ``trace_end_s`` = the largest
    submit, start or end time of the table (None without any). The trace end of a job is that
    of its own source (``source_id``: a store holding several traces, each with its own time
    origin), else of the table. A job is censored by its ``censored`` flag; without that
    column, by having a start and no end (the csv rule)."""
    start, end = _floats(cols, "start_time_s", n), _floats(cols, "end_time_s", n)
    duration = end - start
    duration = np.where(duration >= 0, duration, np.nan)
    with np.errstate(invalid="ignore"):  # rows without any time: NaN
        last_s = np.fmax(np.fmax(_floats(cols, "submit_time_s", n), start), end)
    last_s = np.where(np.isfinite(last_s), last_s, np.nan)
    known = ~np.isnan(last_s)
    trace_end_s = float(last_s[known].max()) if known.any() else None
    running = np.isfinite(start) & np.isnan(end)
    if "censored" in cols:
        running &= _floats(cols, "censored", n) > 0
    open_s = np.full(n, np.nan)
    if trace_end_s is not None:
        end_of_job = _source_ends_s(cols, n, last_s, known) if "source_id" in cols \
            else np.full(n, trace_end_s)
        open_s[running] = np.maximum(end_of_job[running] - start[running], 0.0)
    return duration, open_s, trace_end_s


def _source_ends_s(cols: Mapping[str, Any], n: int, last_s: NDArray[np.float64],
                   known: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Per job, the largest time ``last_s`` of the jobs of its source (``source_id``; a null
    source is one source of its own)."""
    source = np.nan_to_num(_floats(cols, "source_id", n), nan=-1.0)
    ids, inverse = np.unique(source, return_inverse=True)
    ends = np.full(len(ids), -np.inf)
    np.maximum.at(ends, inverse[known], last_s[known])
    return ends[inverse]


def job_gpu_time_s(jobs: pa.Table | Mapping[str, Any]) -> NDArray[np.float64]:
    """GPU time of each job by the rule of :func:`characterize`: ``n_gpus × (end − start)``,
    a censored job with a start and no end counted up to the trace end (a lower bound); NaN
    where neither applies."""
    cols = _columns(jobs)
    n = len(next(iter(cols.values()))) if cols else 0
    duration, open_s, _ = _durations(cols, n)
    return _gpu_time_s(_floats(cols, "n_gpus", n), duration, open_s)


def _gpu_time_s(gpus: NDArray[np.float64], duration_s: NDArray[np.float64],
                open_s: NDArray[np.float64]) -> NDArray[np.float64]:
    """``gpus × duration``, else ``gpus ×`` the running time up to the trace end (NaN where
    neither is known)."""
    return gpus * np.where(np.isnan(duration_s), open_s, duration_s)


def characterize(jobs: pa.Table | Mapping[str, Any], catalog: Catalog | None = None,
                 overlap: float = 0.0, *, fill: bool = True,
                 breakdown: Breakdown | None = None) -> dict[str, Any]:
    """The cluster characterization of a canonical job table (see the module docstring).

    ``fill``: first fill unknown features from the zoo profiles of the jobs' workloads
    (:func:`traincast.trace.fill_features`). ``breakdown``: the jobs' own predicted breakdown
    (``predict_table(jobs, catalog, overlap=overlap)``, or ``engine.local.evaluate_columns``'s)
    when the caller has it: used as it is, not evaluated again (then give the filled jobs it
    was computed from, with ``fill=False``).
    """
    catalog = catalog or load_catalog()
    if fill and isinstance(jobs, pa.Table):
        from traincast.trace import fill_features

        try:
            jobs = fill_features(jobs)
        except ImportError:
            pass
    cols = _columns(jobs)
    n = len(next(iter(cols.values()))) if cols else 0
    gpus_raw = _floats(cols, "n_gpus", n)
    gpus = np.nan_to_num(gpus_raw)
    duration, open_s, trace_end_s = _durations(cols, n)
    gpu_time = np.nan_to_num(_gpu_time_s(gpus, duration, open_s))
    # every censored job's GPU time is a lower bound: counted up to the trace end here, or
    # ending at the trace end in the trace itself (Alibaba 2023's deletion_time of a running pod)
    # (by its flag; without that column, the jobs counted up to the trace end: _durations)
    censored = _floats(cols, "censored", n) > 0 if "censored" in cols else ~np.isnan(open_s)
    censored_gpu_time_s = float(gpu_time[censored].sum())
    arch_codes, arch_names = _labels(cols, "architecture", n)
    type_codes, type_names = _labels(cols, "gpu_type", n)
    ones = np.ones(n)
    flags = {}
    for f in FLAG_COLUMNS:
        if f in cols:
            flags[f] = int(np.asarray(_floats(cols, f, n) > 0).sum())
    out: dict[str, Any] = {
        "jobs": n,
        "gpus": float(gpus.sum()),
        "gpu_time_s": float(gpu_time.sum()),
        "censored_gpu_time_s": censored_gpu_time_s,
        "gpu_time_lower_bound": bool(censored_gpu_time_s > 0),
        "trace_end_s": trace_end_s,
        "jobs_with_duration": int(np.isfinite(duration).sum()),
        "flags": flags,
        # jobs with 0 GPUs do not train on GPUs: counted apart, not in the architecture shares
        "zero_gpu_jobs": int((gpus_raw == 0).sum()),
        "by_architecture": _group(arch_codes, arch_names, np.where(gpus_raw == 0, 0.0, 1.0),
                                  gpus, gpu_time, ARCHITECTURES),
        "by_gpu_type": _group(type_codes, type_names, ones, gpus, gpu_time),
        "cdf": {"gpus_per_job": _discrete_cdf(gpus_raw), "duration_s": _quantiles(duration)},
        "breakdown": {"jobs": 0, "gpus": 0.0},
    }
    for name, row in out["by_gpu_type"].items():
        try:
            row["gpu"] = catalog.gpu_name(name)
        except KeyError:
            row["gpu"] = None
    if n and "architecture" in cols:
        out["breakdown"] = _breakdown(cols, n, arch_codes, arch_names, gpus, gpu_time, catalog,
                                      overlap, breakdown)
    return out
