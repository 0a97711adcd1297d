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

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast.model import COMPONENTS

F = NDArray[np.float64]
OTHER = "other"


def as_labels(values: Iterable[Any], missing: str = "unknown") -> NDArray[np.object_]:
    """Strings of a label column; None/NaN/empty become ``missing``."""
    out = []
    for v in values:
        if v is None or (isinstance(v, float) and np.isnan(v)) or str(v) == "":
            out.append(missing)
        else:
            out.append(str(v))
    return np.asarray(out, dtype=object)


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
    out: dict[str, tuple[float, dict[str, float]]] = {}
    for name in np.unique(g[ok]) if ok.any() else []:
        sel = ok & (g == name)
        ws = w[sel]
        out[str(name)] = (float(ws.sum()), {c: float(np.dot(frac[i, sel], ws) / ws.sum())
                                            for i, c in enumerate(COMPONENTS)})
    return {k: v for k, (_, v) in sorted(out.items(), key=lambda kv: (-kv[1][0], kv[0]))}


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


def top_groups(labels: ArrayLike, k: int, weights: ArrayLike | None = None
               ) -> NDArray[np.object_]:
    """``labels`` with all but the ``k`` heaviest groups (job count or ``weights``) -> other."""
    lab = np.asarray(labels, dtype=object)
    w = np.ones(len(lab)) if weights is None else np.nan_to_num(
        np.asarray(weights, dtype=np.float64))
    names, inv = np.unique(lab.astype(str), return_inverse=True)
    totals = np.bincount(inv.reshape(-1), weights=w, minlength=len(names))
    order = sorted(range(len(names)), key=lambda i: (-totals[i], names[i]))
    keep = {names[i] for i in order[:k]}
    return np.where(np.isin(lab.astype(str), list(keep)), lab, OTHER).astype(object)


def roofline_points(ops: Sequence[Mapping[str, Any]], peak_flops_per_s: float,
                    mem_bw_bps: float) -> dict[str, Any]:
    """Place each op of a per-op profile on a roofline.

    Returns arrays ``intensity`` (FLOP/byte; inf for ops that move no bytes, 0 for ops
    without FLOPs), ``attainable_flops_per_s = min(P, I · M)``, ``time_s = max(F/P, B/M)``,
    ``flops``, ``bytes``, ``phase`` and ``bound`` (as profiled), ``op`` names, and the ridge
    point ``ridge_intensity = P / M`` (FLOP/byte).
    """
    if peak_flops_per_s <= 0 or mem_bw_bps <= 0:
        raise ValueError("roofline needs a positive peak FLOP rate and memory bandwidth")
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
