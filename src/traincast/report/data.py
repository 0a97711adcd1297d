"""What the figures plot, computed from plain arrays (no matplotlib, no files).

* :func:`weighted_shares` — the time breakdown of a group of jobs: the weighted mean of each
  job's component shares, ``share_c(group) = Σ w_j · t_cj / Σ_c t_cj  /  Σ w_j`` over the
  group's jobs with a known breakdown; ``w_j = 1`` (job-weighted) or ``n_gpus`` (GPU-weighted).
* :func:`ecdf` — an empirical (optionally weighted) CDF: ``F(x) = Σ_{v_j <= x} w_j / Σ w_j``.
* :func:`top_groups` — keep the k largest groups, fold the rest into ``other``.
* :func:`roofline_points` — each op of a profile placed on a GPU's roofline: arithmetic
  intensity ``I = flops / (bytes_read + bytes_written)``, attainable rate ``min(P, I · M)``,
  and the op's roofline time ``max(flops / P, bytes / M)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast.errors import TraincastError
from traincast.model import COMPONENTS

F = NDArray[np.float64]
OTHER = "other"


def factorize(values: ArrayLike) -> tuple[NDArray[np.int64], list[str]]:
    """Codes and distinct labels (in order of first appearance) of a label array (Arrow)."""
    import pyarrow as pa

    obj = np.asarray(values, dtype=object)
    try:
        arr = pa.array(obj, type=pa.string())
    except (pa.ArrowTypeError, pa.ArrowInvalid):  # not all strings: their text
        arr = pa.array(obj.astype(str), type=pa.string())
    enc = arr.dictionary_encode()
    return (enc.indices.to_numpy(zero_copy_only=False).astype(np.int64),
            [str(v) for v in enc.dictionary.to_pylist()])


def component_shares(parts: Mapping[str, ArrayLike]) -> dict[str, F]:
    """Each job's component shares (rows sum to 1; NaN where a time is unknown or all zero)."""
    stacked = np.stack([np.asarray(parts[c], dtype=np.float64) for c in COMPONENTS])
    total = stacked.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(total > 0, stacked / total, np.nan)
    return {c: frac[i] for i, c in enumerate(COMPONENTS)}


def weighted_shares(parts: Mapping[str, ArrayLike], groups: ArrayLike,
                    weights: ArrayLike | None = None) -> dict[str, dict[str, float]]:
    """Weighted mean of per-job component shares per group: ``{group: {component: share}}``.

    Jobs whose breakdown is unknown (NaN) or whose weight is not positive are left out; a group
    with no such job is absent. Groups appear largest (by total weight) first.
    """
    shares = component_shares(parts)
    g = np.asarray(groups, dtype=object)
    n = len(g)
    w = np.ones(n) if weights is None else np.nan_to_num(
        np.broadcast_to(np.asarray(weights, dtype=np.float64), (n,)), nan=0.0)
    frac = np.stack([shares[c] for c in COMPONENTS])
    ok = np.isfinite(frac).all(axis=0) & (w > 0)
    if not ok.any():
        return {}
    inv, names = factorize(g[ok])
    wk = w[ok]
    wsum = np.bincount(inv, weights=wk, minlength=len(names))
    mean = np.stack([np.bincount(inv, weights=frac[i, ok] * wk, minlength=len(names)) / wsum
                     for i in range(len(COMPONENTS))])
    order = sorted(range(len(names)), key=lambda k: (-wsum[k], names[k]))
    return {str(names[k]): {c: float(mean[i, k]) for i, c in enumerate(COMPONENTS)}
            for k in order}


def ordered_unique(values: ArrayLike) -> list[str]:
    """Distinct labels in order of first appearance."""
    return factorize(values)[1]


def group_totals(groups: ArrayLike, weights: ArrayLike | None = None) -> dict[str, float]:
    """Sum of ``weights`` (default 1 per job; NaN counts 0) per group label."""
    inv, names = factorize(groups)
    w = np.ones(len(inv)) if weights is None else np.nan_to_num(
        np.asarray(weights, dtype=np.float64))
    sums = np.bincount(inv, weights=w, minlength=len(names))
    return {str(k): float(v) for k, v in zip(names, sums, strict=True)}


def ecdf(values: ArrayLike, weights: ArrayLike | None = None) -> tuple[F, F]:
    """Sorted finite values and their cumulative weight fraction (``y[-1] == 1``)."""
    v = np.asarray(values, dtype=np.float64)
    w = np.ones_like(v) if weights is None else np.broadcast_to(
        np.asarray(weights, dtype=np.float64), v.shape)
    ok = np.isfinite(v) & np.isfinite(w) & (w > 0)
    v, w = v[ok], w[ok]
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    if len(v) == 0:
        return v, w
    return v, np.cumsum(w) / w.sum()


def thin_steps(x: ArrayLike, y: ArrayLike, max_points: int = 2000) -> tuple[F, F]:
    """At most about ``max_points`` points of a step CDF: the last point of each of
    ``max_points`` equal steps of y (so the drawn curve is within 1/max_points of the exact
    one), always keeping the first and the last point."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(x) <= max_points:
        return x, y
    idx = np.searchsorted(y, np.linspace(0, 1, max_points + 1)[1:], side="left")
    idx = np.unique(np.clip(np.r_[0, idx, len(y) - 1], 0, len(y) - 1))
    return x[idx], y[idx]


def top_groups(labels: ArrayLike, k: int, weights: ArrayLike | None = None
               ) -> NDArray[np.object_]:
    """``labels`` with all but the ``k`` heaviest groups (job count or ``weights``) -> other."""
    inv, names = factorize(labels)
    w = np.ones(len(inv)) if weights is None else np.nan_to_num(
        np.asarray(weights, dtype=np.float64))
    totals = np.bincount(inv, weights=w, minlength=len(names))
    order = sorted(range(len(names)), key=lambda i: (-totals[i], names[i]))
    keep = set(order[:k])
    out = np.array([names[i] if i in keep else OTHER for i in range(len(names))], dtype=object)
    return out[inv] if len(inv) else np.empty(0, dtype=object)


def roofline_points(ops: Sequence[Mapping[str, Any]], peak_flops_per_s: float,
                    mem_bw_bps: float) -> dict[str, Any]:
    """Place each op of a per-op profile on a roofline.

    Returns arrays ``intensity`` (FLOP/byte; inf for ops that move no bytes, 0 for ops
    without FLOPs), ``attainable_flops_per_s = min(P, I · M)``, ``time_s = max(F/P, B/M)``,
    ``flops``, ``bytes``, ``phase`` and ``bound`` (as profiled), ``op`` names, and the ridge
    point ``ridge_intensity = P / M`` (FLOP/byte).
    """
    if peak_flops_per_s <= 0 or mem_bw_bps <= 0:
        raise TraincastError("roofline needs a positive peak FLOP rate and memory bandwidth")
    flops = np.array([float(o.get("flops", 0) or 0) for o in ops])
    nbytes = np.array([float(o.get("bytes_read", 0) or 0) + float(o.get("bytes_written", 0) or 0)
                       for o in ops])
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = np.where(nbytes > 0, flops / nbytes, np.where(flops > 0, np.inf, 0.0))
    attainable = np.minimum(peak_flops_per_s, intensity * mem_bw_bps)
    time_s = np.maximum(flops / peak_flops_per_s, nbytes / mem_bw_bps)
    return {"op": [str(o.get("op", "")) for o in ops],
            "phase": [str(o.get("phase", "")) for o in ops],
            "bound": [str(o.get("bound", "")) for o in ops],
            "flops": flops, "bytes": nbytes, "intensity": intensity,
            "attainable_flops_per_s": attainable, "time_s": time_s,
            "ridge_intensity": peak_flops_per_s / mem_bw_bps,
            "peak_flops_per_s": float(peak_flops_per_s), "mem_bw_bps": float(mem_bw_bps)}


def aggregate_ops(ops: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per-op rows summed by ``(op, phase)``: flops, bytes_read, bytes_written, ``count``.

    ``bound`` stays the profiled one when all rows of a group agree, else ``mixed``. Groups keep
    the order of their first row.
    """
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for o in ops:
        key = (str(o.get("op", "")), str(o.get("phase", "")))
        row = out.setdefault(key, {"op": key[0], "phase": key[1], "flops": 0.0,
                                   "bytes_read": 0.0, "bytes_written": 0.0, "count": 0,
                                   "bound": str(o.get("bound", ""))})
        row["flops"] += float(o.get("flops", 0) or 0)
        row["bytes_read"] += float(o.get("bytes_read", 0) or 0)
        row["bytes_written"] += float(o.get("bytes_written", 0) or 0)
        row["count"] += 1
        if row["bound"] != str(o.get("bound", "")):
            row["bound"] = "mixed"
    return list(out.values())
