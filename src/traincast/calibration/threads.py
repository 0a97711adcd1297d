"""How element-wise kernels scale with CPU threads: measured at 1 thread and at T threads.

ATen splits an element-wise, normalization or reduction kernel across its intra-op threads only
when the kernel has enough elements; a small op (one GRU or LSTM cell step on ``B * H``
elements) runs on one thread whatever ``torch.get_num_threads()`` says, while the same kernel on
a large tensor runs up to T times faster. With ``K_1(op)`` the kernel's elements/s at 1 thread
and ``K_T(op)`` at T threads (both on large tensors), the rate of an op of ``E`` elements is::

    S_op        = K_T(op) / K_1(op)                       measured speedup of large ops
    K(op, E; T) = K_1(op) * min(S_op, max(1, E / g))      g = grain, elements (measured)

so ops below ``g`` elements run at the 1-thread rate, ops above ``S_op * g`` at the T-thread
rate, linearly in between (``traincast.roofline.thread_scaled_rate`` applies it). ``g`` is
measured: ``exp`` and ``add`` over a sweep of sizes at 1 and T threads, and ``g`` the value
(on a grid of quarter powers of 2) whose predicted speedups
``min(S, max(1, E / g))`` are closest, in log, to the measured ones (S = the speedup of the
largest size of each kernel).

The fixed cost per op is measured at T threads as it is (``op_overhead_us``; on the 2-core
development machine 1 -> 2 threads moved it by -25% to +82% in five calibrations, against a
3x spread between calibrations: no consistent change). Its 1-thread value is kept in the
calibration record.

GEMMs and convolutions follow the same rule by work: a product of F FLOPs at intensity I runs
at ``P_1(I) * min(S, max(1, F / g_F))`` (``gemm_scaling``: the calibration's shapes timed at
1 and T threads; ``traincast.roofline.gemm_rate_at_threads`` applies it). A 2-D GEMM is also
limited by the rows ``m`` of its output (``A[m x k] @ B[k x n]``): the BLAS splits the output
by rows, so a product of a few rows (a recurrent step's ``B x H @ H x G`` with batch B = 2)
runs on one thread however many FLOPs it has, and products of tens of rows gain less than a
square::

    speedup(F, m) = min(S_m(m), max(1, F / g_F))
    S_m(m)        = interp(m; measured speedups of the skinny shapes by rows m, and S at the
                    rows of the largest shape), non-decreasing, within [1, S]

(``interp`` linear in log m, flat beyond the ends; ``rows_speedup_curve``; products whose rows
are not known: ``S``). ``g_F`` is fitted with ``S_m`` in place of S. On the 2-core development
machine products of 1, 2 and 4 rows ran 0.85-0.99x as fast at 2 threads as at 1 (3.8-15
MFLOP), products of 6-64 rows 1.25-1.98x, squares of 256-2048 2.2-2.35x.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast.calibration import bench

__all__ = ["fit_grain", "gemm_scaling", "measure_scaling", "rows_speedup_curve"]

F = NDArray[np.float64]


def fit_grain(elements: ArrayLike, speedup: ArrayLike, top_speedup: ArrayLike,
              log2_range: tuple[float, float] = (6.0, 24.0)) -> float:
    """The grain ``g`` (elements, or FLOPs) whose model speedups ``min(S, max(1, E / g))`` best
    match the measured ``speedup`` at sizes ``elements`` (least squares in log; ``S`` per point
    = ``top_speedup``), on a grid of quarter powers of 2 over ``log2_range`` (default 2^6 to
    2^24). Points with ``S <= 1`` (no thread gain at all) say nothing about g and are left
    out; none left: 0."""
    e = np.asarray(elements, dtype=np.float64)
    s = np.asarray(speedup, dtype=np.float64)
    top = np.asarray(top_speedup, dtype=np.float64)
    keep = (top > 1.0) & (s > 0)
    if not keep.any():
        return 0.0
    e, s, top = e[keep], s[keep], top[keep]
    grid = 2.0 ** np.arange(log2_range[0], log2_range[1] + 0.125, 0.25)
    model = np.minimum(top[None, :], np.maximum(1.0, e[None, :] / grid[:, None]))
    err = ((np.log(model) - np.log(s)[None, :]) ** 2).sum(axis=1)
    return float(grid[int(np.argmin(err))])


def rows_speedup_curve(rows: ArrayLike, cols: ArrayLike, speedup: ArrayLike,
                       top_rows: float, top_speedup: float) -> tuple[F, F]:
    """The measured thread speedup of GEMMs by output rows ``m``: the skinny shapes (``m < n``,
    fewer output rows than columns) as ``(m, speedup)`` points plus ``(top_rows, S)`` (the
    shape with the most FLOPs), mean per ``m``, non-decreasing fit, within ``[1, S]``. Returns
    ``(xs, ys)``; no skinny shape or ``S <= 1``: empty arrays (no row limit)."""
    from traincast.roofline import curve_from_points

    m = np.asarray(rows, dtype=np.float64)
    n = np.asarray(cols, dtype=np.float64)
    s = np.asarray(speedup, dtype=np.float64)
    skinny = (m < n) & (m < top_rows) & (s > 0)
    if top_speedup <= 1.0 or not skinny.any():
        return np.zeros(0), np.zeros(0)
    xs, ys = curve_from_points(np.append(m[skinny], top_rows), np.append(s[skinny], top_speedup))
    return xs, np.clip(ys, 1.0, top_speedup)


def at_threads(threads: int, fn: Callable[[], Any]) -> Any:
    """``fn()`` with torch at ``threads`` intra-op threads (restored after)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return fn()
    finally:
        torch.set_num_threads(before)


def _sweep(device: str, sizes: list[int], repeat: int, sample_s: float) -> dict[str, list[float]]:
    """Seconds per call of ``exp`` and ``add`` on each size (fp32 elements)."""
    import torch

    out: dict[str, list[float]] = {"exp": [], "add": []}
    for n in sizes:
        a, b, c = (torch.rand(n, device=device) for _ in range(3))
        out["exp"].append(bench.measure(lambda a=a, b=b: torch.exp(b, out=a), device,
                                        repeat=repeat, min_sample_s=sample_s).median_s)
        out["add"].append(bench.measure(lambda a=a, b=b, c=c: torch.add(b, c, out=a), device,
                                        repeat=repeat, min_sample_s=sample_s).median_s)
    return out


def gemm_scaling(matmul_1t: list[dict[str, Any]],
                 matmul_t: list[dict[str, Any]]) -> dict[str, Any]:
    """GEMM (or convolution) side of the thread model from the same shapes timed at 1 and at T
    threads: per-shape speedups ``t_1 / t_T``, ``S`` = the speedup of the shape with the most
    FLOPs, and the grain ``g`` (FLOPs, 2^12..2^34) that best fits ``min(S, max(1, F / g))``
    to the speedups. When every shape names its output rows and columns (``m``, ``n``: GEMMs),
    the speedup by rows ``S_m`` (``rows_speedup_curve``: ``gemm_rows``, ``gemm_rows_speedup``)
    is measured too, and ``g`` is fitted to ``min(S_m(m), max(1, F / g))``."""
    flops = np.array([r["flops"] for r in matmul_t], dtype=np.float64)
    speedup = np.array([a["time_s"] / b["time_s"] for a, b in zip(matmul_1t, matmul_t,
                                                                  strict=True)])
    top = float(speedup[int(np.argmax(flops))])
    if all("m" in r and "n" in r for r in matmul_t):
        rows = np.array([r["m"] for r in matmul_t], dtype=np.float64)
        xs, ys = rows_speedup_curve(rows, [r["n"] for r in matmul_t], speedup,
                                    float(rows[int(np.argmax(flops))]), top)
        if len(xs):
            from traincast.roofline import interp_curve

            cap = np.minimum(top, interp_curve(rows, xs, ys))
            return {"gemm_speedup": speedup.tolist(), "gemm_top_speedup": top,
                    "gemm_grain_flops": fit_grain(flops, speedup, cap, (12.0, 34.0)),
                    "gemm_rows": xs.tolist(), "gemm_rows_speedup": ys.tolist()}
    grain = fit_grain(flops, speedup, np.full(len(flops), top), (12.0, 34.0))
    return {"gemm_speedup": speedup.tolist(), "gemm_top_speedup": top,
            "gemm_grain_flops": grain}


def measure_scaling(device: str, threads: int, *, kernel_n: int, sizes: list[int],
                    repeat: int, sample_s: float,
                    op_overhead: Callable[[], dict[str, Any]],
                    matmul_t: list[dict[str, Any]] | None = None,
                    conv: Callable[[], list[dict[str, Any]]] | None = None,
                    conv_t: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The 1-thread side of the thread model, measured with 1 thread (the caller measures the
    T-thread side at its own thread count): the fixed cost per op at 1 thread
    (``op_overhead()``), every kernel's elements/s on ``kernel_n`` elements net of the plain
    per-call cost, and the ``exp``/``add`` sweep over ``sizes`` at 1 and at ``threads``
    threads (each time net of that thread count's plain per-call cost) with the fitted grain;
    with ``matmul_t`` (``bench.bench_matmul`` at T threads) the same shapes at 1 thread and
    ``gemm_scaling``; with ``conv`` (a 1-thread run of the convolutions) and ``conv_t`` (their
    T-thread results) the same for convolutions (``conv_speedup``, ``conv_top_speedup``,
    ``conv_grain_flops``).
    """
    def at_one() -> dict[str, Any]:
        import torch

        o = op_overhead()
        shapes = [(r["m"], r["n"], r["k"], r["layout"]) for r in matmul_t or []]
        return {"op_overhead": o,
                "matmul": bench.bench_matmul(device, torch.float32, shapes, repeat=repeat,
                                             min_sample_s=sample_s),
                "conv": conv() if conv is not None else [],
                "kernels": bench.bench_kernels(device, kernel_n, repeat=repeat,
                                               min_sample_s=sample_s,
                                               overhead_s=o["plain_op_s"]),
                "sweep": _sweep(device, sizes, repeat, sample_s)}

    def at_many() -> dict[str, Any]:
        plain = bench.bench_op_overhead(device, repeat=repeat, min_sample_s=sample_s)["time_s"]
        return {"plain_op_s": plain, "sweep": _sweep(device, sizes, repeat, sample_s)}

    one = at_threads(1, at_one)
    many = at_threads(threads, at_many)

    plain_1 = one["op_overhead"]["plain_op_s"]
    e = np.array(list(sizes) * 2, dtype=np.float64)
    t1 = np.concatenate([bench.net_time_s(one["sweep"][k], plain_1) for k in ("exp", "add")])
    tt = np.concatenate([bench.net_time_s(many["sweep"][k], many["plain_op_s"])
                         for k in ("exp", "add")])
    speedup = t1 / tt
    top = np.repeat([speedup[len(sizes) - 1], speedup[-1]], len(sizes))
    return {"threads": threads, "sizes": list(sizes), "sweep_1t_s": one["sweep"],
            "sweep_t_s": many["sweep"], "plain_op_t_s": many["plain_op_s"],
            "speedup": speedup.tolist(), "grain_elems": fit_grain(e, speedup, top),
            "kernels_1t": one["kernels"], "op_overhead_1t": one["op_overhead"],
            "matmul_1t": one["matmul"], "conv_1t": one["conv"],
            **(gemm_scaling(one["matmul"], matmul_t) if matmul_t else {}),
            **({f"conv_{k.removeprefix('gemm_')}": v
                for k, v in gemm_scaling(one["conv"], conv_t).items()}
               if conv_t and one["conv"] else {})}
