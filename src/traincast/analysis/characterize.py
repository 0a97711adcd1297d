"""The cluster view of the paper: what architectures a cluster's jobs use, how many GPUs, how
long, and where their time goes.

``characterize(jobs)`` takes a canonical job table (Arrow table or dict of columns) and returns
plain data (DESIGN.md keys):

* ``jobs``, ``gpus`` (Σ n_gpus), ``gpu_time_s`` (Σ n_gpus × (end − start), jobs with both times;
  censored jobs count up to the trace end, a lower bound), ``flags`` (counts);
* ``by_architecture`` / ``by_gpu_type``: ``{name: {jobs, gpus, gpu_time_s, job_share, gpu_share,
  gpu_time_share}}`` (NULL architecture or GPU type -> ``unknown``);
* ``cdf``: ``gpus_per_job`` (``value`` -> fraction of jobs with at most that many GPUs) and
  ``duration_s`` (``p`` -> quantile ``value``; jobs with a known, non-negative duration);
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
from traincast.model import COMPONENTS
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
               catalog: Catalog, overlap: float) -> dict[str, Any]:
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


def characterize(jobs: pa.Table | Mapping[str, Any], catalog: Catalog | None = None,
                 overlap: float = 0.0, *, fill: bool = True) -> dict[str, Any]:
    """The cluster characterization of a canonical job table (see the module docstring).

    ``fill``: first fill unknown features from the zoo profiles of the jobs' workloads
    (:func:`traincast.trace.fill_features`).
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
    duration = _floats(cols, "end_time_s", n) - _floats(cols, "start_time_s", n)
    duration = np.where(duration >= 0, duration, np.nan)
    gpu_time = np.nan_to_num(gpus * duration)
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
        "jobs_with_duration": int(np.isfinite(duration).sum()),
        "flags": flags,
        "by_architecture": _group(arch_codes, arch_names, ones, gpus, gpu_time, ARCHITECTURES),
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
                                      overlap)
    return out
