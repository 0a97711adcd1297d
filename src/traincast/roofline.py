"""Per-op roofline with measured efficiency curves: small pure functions over numpy arrays.

The paper's model runs every compute-bound FLOP at one peak and every memory-bound byte at
one bandwidth. Measured training steps show that rates depend on each op's shape and size, and
that every op has a fixed cost. With a per-op table (``profile_model(..., ops=True)["ops"]``:
rows ``{op, phase, flops, bytes_read, bytes_written, bound}``) the compute time is::

    I_op      = F_op / B_op                                  (arithmetic intensity, FLOP/byte)
    P_eff(op) = interp(I_op; gemm curve), or the conv curve for convolutions   (FLOP/s)
    M_eff(op) = interp(B_op; element-wise curve)             (bytes/s, by bytes moved)
    E_op      = max(bytes_written, bytes_read / 2) / itemsize  (elements the kernel produces)
    K(op)     = measured elements/s of the op's kernel (exp, tanh, layer norm, ...; inf if
                not measured; ``_foreach_X`` and in-place ``X_`` use X's rate)
    t_op      = o + n_op * o_t + max(F_op / P_eff(op), B_op / M_eff(op), E_op / K(op))
                + sum over the op's fresh outputs j of S_j / A(S_j)
    T_comp    = sum over ops of t_op

``o`` = fixed cost per op; ``n_op * o_t`` = tensors of a multi-tensor (``_foreach_``) op times
the fixed cost per tensor; fresh outputs = the outputs of an op that is not in place (name
without a trailing ``_``; a ``_foreach_`` op's one output per tensor of its first list), each
``S_j`` bytes, ``A(S)`` = measured bytes/s of first-touching a newly allocated block of size S
(page faults on the CPU; absent = free).

The third term is what an element-wise kernel costs beyond moving its bytes: on CPUs,
transcendental functions (exp, tanh, erf, sqrt) and normalizations run far below memory speed.
Each op's time (with its overhead) is counted FLOP-bound when ``F/P_eff >= B/M_eff`` (and the
kernel term), else memory-bound; ``paper_split`` keeps the paper's split (by the profiler's
``bound`` column) for comparison. The curves are measured by ``traincast calibrate`` (catalog keys
``gemm_intensity``/``gemm_tflops``, ``conv_intensity``/``conv_tflops``,
``elementwise_bytes``/``elementwise_gbs``, ``kernel_gelems``, ``op_overhead_us``);
interpolation is linear in log(x) between measured points and flat beyond the ends; FLOP-rate
curves are a non-decreasing fit of their points (a rate never drops as intensity grows).

An op that runs as many kernels registers an expansion with its op in the op registry
(``traincast.features.ops``, ``expand_ops``): a recurrent layer recorded as one fused op per
direction (``gru``, ``gru_backward``) is priced by the ops it runs
(``traincast.features.recurrent.gru_rows``): one input GEMM, T recurrent GEMMs and T x the
cell's element-wise ops, each with its own rate and fixed cost; the backward recomputes the
forward first, as the implementation does (docs/validation.md gives the table).
Convolutions (the conv curve) are the registry's ``conv`` family.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast.features.ops import ITEMSIZE, expand_ops, op_family, parse_shapes
from traincast.kernels import issue_s

F = NDArray[np.float64]


def monotone_fit(y: ArrayLike, weights: ArrayLike | None = None) -> F:
    """Least-squares non-decreasing fit of ``y`` (pool-adjacent-violators), same length."""
    y = np.asarray(y, dtype=np.float64)
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=np.float64)
    vals: list[float] = []
    wts: list[float] = []
    counts: list[int] = []
    for yi, wi in zip(y, w, strict=True):
        vals.append(float(yi))
        wts.append(float(wi))
        counts.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            wsum = wts[-2] + wts[-1]
            merged = (vals[-2] * wts[-2] + vals[-1] * wts[-1]) / wsum
            cnt = counts[-2] + counts[-1]
            del vals[-1], wts[-1], counts[-1]
            vals[-1], wts[-1], counts[-1] = merged, wsum, cnt
    return np.repeat(np.array(vals), counts)


def curve_from_points(x: ArrayLike, y: ArrayLike, *, monotone: bool = True) -> tuple[F, F]:
    """A curve from measured ``(x, y)`` points: x sorted and unique (mean y per x); with
    ``monotone`` y is the non-decreasing fit (FLOP rates by intensity), else as measured
    (bandwidth by size rises in the caches and falls beyond them). Returns ``(xs, ys)``."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    xs, inv = np.unique(x, return_inverse=True)
    counts = np.bincount(inv)
    ys = np.bincount(inv, weights=y) / counts
    return xs, (monotone_fit(ys, counts) if monotone else ys)


def interp_curve(q: ArrayLike, xs: ArrayLike, ys: ArrayLike) -> F:
    """``ys`` at ``q``: linear in log(x) between points, flat beyond the ends (q <= 0: ys[0])."""
    xs = np.asarray(xs, dtype=np.float64)
    ys = np.asarray(ys, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        lq = np.log(np.where(q > 0, q, xs[0]))
    return np.interp(lq, np.log(xs), ys)


@dataclass(frozen=True)
class Curves:
    """Measured rates of one device: FLOP/s by intensity (GEMM, conv), bytes/s by op bytes."""

    gemm_intensity: F
    gemm_flops_per_s: F
    conv_intensity: F
    conv_flops_per_s: F
    elementwise_bytes: F
    elementwise_bps: F
    op_overhead_s: float
    kernel_elems_per_s: Mapping[str, float] = field(default_factory=dict)
    fresh_bytes: F = field(default_factory=lambda: np.zeros(0))
    fresh_bps: F = field(default_factory=lambda: np.zeros(0))
    foreach_tensor_s: float = 0.0
    # CPU threads (calibrate at threads > 1): 1-thread kernel rates and the grain, elements
    kernel_elems_per_s_1t: Mapping[str, float] = field(default_factory=dict)
    thread_grain_elems: float = 0.0
    # ... and GEMMs: 1-thread FLOP/s over gemm_intensity, large-GEMM speedup, grain (FLOPs)
    gemm_flops_per_s_1t: F = field(default_factory=lambda: np.zeros(0))
    gemm_thread_speedup: float = 0.0
    gemm_grain_flops: float = 0.0
    conv_flops_per_s_1t: F = field(default_factory=lambda: np.zeros(0))
    conv_thread_speedup: float = 0.0
    conv_grain_flops: float = 0.0
    # ... and GEMMs by output rows m: measured thread speedup S_m over rows (empty: no limit)
    gemm_rows: F = field(default_factory=lambda: np.zeros(0))
    gemm_rows_speedup: F = field(default_factory=lambda: np.zeros(0))
    gpu_library: bool = False  # measured on CUDA: recurrent layers run as cuDNN's fused RNN

    @classmethod
    def from_gpu(cls, gpu: Any, dtype: str = "fp32") -> Curves:
        """Curves of a catalog GPU; absent curves fall back to its flat peak rates (paper model
        plus the GPU's ``op_overhead_us``). The FLOP curves are measured in fp32; for another
        ``dtype`` (``amp``: fp16, else bf16) they are scaled by the entry's peaks,
        ``x = peak(dtype) / peak(fp32)`` (``traincast calibrate`` writes both: its best fp32
        and fp16/bf16 products), the curves' shape kept, and where ``x > 1`` no faster than
        the memory roof at the measured bandwidth: ``R_dtype(I) = max(R_fp32(I), min(x
        R_fp32(I), I M))``, ``M`` the largest measured element-wise rate (a product of low
        intensity stays bound by its bytes); where ``x < 1`` (a CPU whose bf16 products run
        slower), ``x R_fp32(I)``. The per-thread curves scale by ``x``."""
        fp32 = gpu.peak_tflops("fp32")
        x = gpu.peak_tflops(dtype) / fp32 if fp32 > 0 and gpu.peak_tflops(dtype) > 0 else 1.0
        peak = np.array([gpu.flops_per_s("fp32")])
        bw = np.array([gpu.mem_bw_bps])
        one = np.array([1.0])

        def pair(xkey: str, ykey: str, scale: float, flat: F) -> tuple[F, F]:
            xs, ys = getattr(gpu, xkey, ()), getattr(gpu, ykey, ())
            if len(xs) and len(xs) == len(ys):
                return np.asarray(xs, float), np.asarray(ys, float) * scale
            return one, flat

        eb, ebw = pair("elementwise_bytes", "elementwise_gbs", 1e9, bw)

        def scaled(i: F, r: F) -> F:  # R_dtype(I); a flat peak (no curve: i is one) x times
            if x <= 1.0 or i is one:
                return x * r
            return np.maximum(r, np.minimum(x * r, i * ebw.max()))

        gi, gp = pair("gemm_intensity", "gemm_tflops", 1e12, peak)
        ci, cp = pair("conv_intensity", "conv_tflops", 1e12, np.array([gp.max()])) \
            if len(getattr(gpu, "conv_intensity", ())) else (gi, gp)  # none: the GEMM curve
        gp = scaled(gi, gp)
        cp = gp if ci is gi else scaled(ci, cp)
        kernels = {k: v * 1e9 for k, v in getattr(gpu, "kernel_gelems", {}).items()}
        fb = np.asarray(getattr(gpu, "fresh_bytes", ()), float)
        fg = np.asarray(getattr(gpu, "fresh_gbs", ()), float) * 1e9
        return cls(gi, gp, ci, cp, eb, ebw, gpu.op_overhead_us * 1e-6, kernels, fb, fg,
                   getattr(gpu, "foreach_tensor_us", 0.0) * 1e-6,
                   {k: v * 1e9 for k, v in getattr(gpu, "kernel_gelems_1t", {}).items()},
                   float(getattr(gpu, "thread_grain_elems", 0.0)),
                   np.asarray(getattr(gpu, "gemm_tflops_1t", ()), float) * 1e12 * x,
                   float(getattr(gpu, "thread_gemm_speedup", 0.0)),
                   float(getattr(gpu, "thread_gemm_grain_flops", 0.0)),
                   gemm_rows=np.asarray(getattr(gpu, "thread_gemm_rows", ()), float),
                   gemm_rows_speedup=np.asarray(getattr(gpu, "thread_gemm_rows_speedup", ()),
                                                float),
                   conv_flops_per_s_1t=np.asarray(getattr(gpu, "conv_tflops_1t", ()),
                                                  float) * 1e12 * x,
                   conv_thread_speedup=float(getattr(gpu, "thread_conv_speedup", 0.0)),
                   conv_grain_flops=float(getattr(gpu, "thread_conv_grain_flops", 0.0)),
                   gpu_library=getattr(gpu, "device", "") == "cuda")


def is_conv(op_names: Sequence[str] | NDArray[Any]) -> NDArray[np.bool_]:
    """True for convolution ops (the op registry's ``conv`` family)."""
    return np.array([op_family(str(n)) == "conv" for n in op_names], dtype=bool)


def kernel_name(op: str) -> str:
    """The measured kernel an op runs: ``_foreach_sqrt`` -> ``sqrt``, ``div_`` -> ``div``."""
    name = op.removeprefix("aten::").removeprefix("_foreach_")
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def thread_scaled_rate(rate_1: ArrayLike, rate_t: ArrayLike, elements: ArrayLike,
                       grain_elems: float) -> F:
    """Elements/s of a kernel on ``E`` elements at T CPU threads (traincast.calibration.threads):
    ``K_1 * min(K_T / K_1, max(1, E / g))`` — ops below the grain ``g`` run on one thread,
    ops beyond ``g * K_T / K_1`` at the T-thread rate. ``g <= 0`` or no 1-thread rate
    (``K_1`` = inf or nan): ``K_T``."""
    k1 = np.asarray(rate_1, dtype=np.float64)
    kt = np.asarray(rate_t, dtype=np.float64)
    e = np.asarray(elements, dtype=np.float64)
    if grain_elems <= 0:
        return np.broadcast_to(kt, np.broadcast(k1, kt, e).shape).astype(np.float64)
    known = np.isfinite(k1) & (k1 > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = k1 * np.minimum(kt / k1, np.maximum(1.0, e / grain_elems))
    return np.where(known, scaled, kt)


def kernel_times_s(op_names: Sequence[str] | NDArray[Any], elements: ArrayLike,
                   curves: Curves) -> F:
    """``E_op / K(op)`` for ops whose kernel was measured, else 0; with 1-thread rates and a
    grain (CPU threads > 1) K depends on E (``thread_scaled_rate``)."""
    names = [kernel_name(str(n)) for n in op_names]
    rate = np.array([curves.kernel_elems_per_s.get(k, np.inf) for k in names],
                    dtype=np.float64)
    if curves.thread_grain_elems > 0 and curves.kernel_elems_per_s_1t:
        rate_1 = np.array([curves.kernel_elems_per_s_1t.get(k, np.nan) for k in names],
                          dtype=np.float64)
        rate = thread_scaled_rate(rate_1, rate, elements, curves.thread_grain_elems)
    return np.asarray(elements, dtype=np.float64) / rate


def gemm_rows(ops: Sequence[Mapping[str, Any]]) -> F:
    """Output rows ``m`` of each op's product ``A[m x k] @ B[k x n]`` (one 2-D product, shapes
    recorded: ``mm``, ``addmm``, ``matmul``), else inf (no row limit: batched products,
    convolutions, attention, ops without a product)."""
    from traincast.kernels import op_gemm_products

    out = np.full(len(ops), np.inf)
    for i, o in enumerate(ops):
        if op_family(str(o["op"])) != "gemm":
            continue
        p = op_gemm_products(str(o["op"]), str(o.get("shapes", "")), float(o.get("flops", 0.0)))
        if len(p) == 1 and p[0][3] == 1.0:
            out[i] = p[0][0]
    return out


def gemm_rate_at_threads(intensity: ArrayLike, flops: ArrayLike, curves: Curves,
                         conv: bool = False, rows: ArrayLike | None = None) -> F:
    """GEMM FLOP/s of each op. Without a CPU thread model: the (T-thread) curve at the op's
    intensity. With one (calibrate at T > 1 threads: 1-thread curve P_1, large-GEMM speedup
    S, grain g in FLOPs), a product's thread speedup depends on its work, not its intensity:
    ``P_1(I) * min(S, max(1, F / g))`` (``thread_scaled_rate`` with K_1 = P_1(I),
    K_T = S * P_1(I), E = F). ``conv=True``: the same with the convolution curves. With a
    measured speedup by output rows ``S_m`` (``curves.gemm_rows``/``gemm_rows_speedup``) and
    ``rows`` (output rows m per op, ``gemm_rows``; inf = not known, no limit), a GEMM runs at
    ``P_1(I) * min(S, max(1, F / g), S_m(m))`` (``S_m`` by ``interp_curve`` over rows)."""
    if conv:
        xs, p_t, p_1 = curves.conv_intensity, curves.conv_flops_per_s, curves.conv_flops_per_s_1t
        speedup, grain = curves.conv_thread_speedup, curves.conv_grain_flops
    else:
        xs, p_t, p_1 = curves.gemm_intensity, curves.gemm_flops_per_s, curves.gemm_flops_per_s_1t
        speedup, grain = curves.gemm_thread_speedup, curves.gemm_grain_flops
    if grain <= 0 or speedup <= 0 or len(p_1) != len(xs):
        return interp_curve(intensity, xs, p_t)
    rate_1 = interp_curve(intensity, xs, p_1)
    rate = thread_scaled_rate(rate_1, speedup * rate_1, flops, grain)
    if conv or rows is None or not len(curves.gemm_rows):
        return rate
    m = np.asarray(rows, dtype=np.float64)
    known = np.isfinite(m)
    cap = interp_curve(np.where(known, m, 1.0), curves.gemm_rows, curves.gemm_rows_speedup)
    return np.where(known, np.minimum(rate, rate_1 * cap), rate)


def op_times_s(flops: ArrayLike, bytes_moved: ArrayLike, conv: ArrayLike,
               curves: Curves, rows: ArrayLike | None = None) -> tuple[F, F]:
    """Per-op FLOP time ``F / P_eff`` and memory time ``B / M_eff`` (no overhead); ``rows``:
    output rows of each op's product for the CPU thread model (``gemm_rate_at_threads``)."""
    flops = np.asarray(flops, dtype=np.float64)
    b = np.asarray(bytes_moved, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = np.where(b > 0, flops / b, np.inf)
    p_gemm = gemm_rate_at_threads(intensity, flops, curves, rows=rows)
    p_conv = gemm_rate_at_threads(intensity, flops, curves, conv=True)
    p = np.where(np.asarray(conv, dtype=bool), p_conv, p_gemm)
    m = interp_curve(b, curves.elementwise_bytes, curves.elementwise_bps)
    return flops / p, b / m


def roofline_split(flops: ArrayLike, bytes_moved: ArrayLike, conv: ArrayLike,
                   curves: Curves, kernel_s: ArrayLike = 0.0,
                   rows: ArrayLike | None = None,
                   overhead_s: ArrayLike | None = None) -> dict[str, F]:
    """Per-op times ``t_op = o + max(F/P_eff, B/M_eff, kernel_s)`` and each op's bound: FLOP-
    bound when its FLOP term is the largest, else memory-bound. ``o`` = ``overhead_s`` per op
    when given, else the curves' ``op_overhead_s``.

    Returns arrays ``time_s``, ``flop_bound`` (bool), ``flop_s``, ``mem_s``.
    """
    t_flop, t_mem = op_times_s(flops, bytes_moved, conv, curves, rows)
    t_mem = np.maximum(t_mem, np.asarray(kernel_s, dtype=np.float64))
    o = curves.op_overhead_s if overhead_s is None else np.asarray(overhead_s, dtype=np.float64)
    return {"time_s": o + np.maximum(t_flop, t_mem),
            "flop_bound": t_flop >= t_mem, "flop_s": t_flop, "mem_s": t_mem}


def _tensors_and_fresh(op: Mapping[str, Any], itemsize: int) -> tuple[int, list[float]]:
    """(tensors of a multi-tensor op, else 1; byte sizes of the op's fresh outputs)."""
    name = str(op["op"]).removeprefix("aten::")
    written = float(op.get("bytes_written", 0.0))
    inplace = name.endswith("_")
    if not name.startswith("_foreach_"):
        return 1, ([] if inplace or written <= 0 else [written])
    sizes = [math.prod(d) * itemsize for d in parse_shapes(str(op.get("shapes", ""))) if d]
    lists = max(1, round(sum(sizes) / written)) if written > 0 and sizes else 1
    first = sizes[:max(len(sizes) // lists, 1)]
    return len(first), ([] if inplace else [float(b) for b in first])


def ops_arrays(ops: Sequence[Mapping[str, Any]]) -> dict[str, NDArray[Any]]:
    """Columns of a per-op table: ``op`` (names), ``flops``, ``bytes`` (read + written),
    ``compute`` (the profiler's bound == 'compute'), ``elements`` (``E_op``), ``tensors``
    (of a multi-tensor op, else 1), ``count`` (times the row runs: 1 unless the row says, as
    expanded rows do), and the fresh outputs as ``fresh_bytes`` with their op's row in
    ``fresh_row``."""
    tensors, fresh, fresh_row, elements = [], [], [], []
    for i, o in enumerate(ops):
        itemsize = ITEMSIZE.get(str(o.get("dtype", "float32")), 4)
        n, sizes = _tensors_and_fresh(o, itemsize)
        tensors.append(n)
        fresh += sizes
        fresh_row += [i] * len(sizes)
        elements.append(max(float(o.get("bytes_written", 0.0)),
                            float(o.get("bytes_read", 0.0)) / 2) / itemsize)
    return {"op": np.array([str(o["op"]) for o in ops], dtype=object),
            "flops": np.array([float(o.get("flops", 0.0)) for o in ops]),
            "bytes": np.array([float(o.get("bytes_read", 0.0)) + float(o.get("bytes_written", 0.0))
                               for o in ops]),
            "compute": np.array([o.get("bound") == "compute" for o in ops], dtype=bool),
            "elements": np.array(elements), "tensors": np.array(tensors, dtype=np.float64),
            "count": np.array([float(o.get("count", 1)) for o in ops]),
            "fresh_bytes": np.array(fresh, dtype=np.float64),
            "fresh_row": np.array(fresh_row, dtype=np.int64)}


def fresh_times_s(fresh_bytes: ArrayLike, fresh_row: ArrayLike, n_ops: int,
                  curves: Curves) -> F:
    """Per op: sum of ``S_j / A(S_j)`` over its fresh outputs (0 without a measured curve)."""
    sizes = np.asarray(fresh_bytes, dtype=np.float64)
    if not len(curves.fresh_bytes) or not sizes.size:
        return np.zeros(n_ops)
    t = sizes / interp_curve(sizes, curves.fresh_bytes, curves.fresh_bps)
    return np.bincount(np.asarray(fresh_row), weights=t, minlength=n_ops)


def compute_breakdown(ops: Sequence[Mapping[str, Any]], curves: Curves) -> dict[str, float]:
    """``compute_flop`` and ``compute_mem`` seconds of one step by the per-op roofline, plus
    ``overhead`` (the ops' fixed costs) and ``fresh`` (first touch of new outputs), both
    included in the two, and ``ops`` (count of ops run). Rows of ops with a registered
    expansion (recurrent layers) are priced by the ops they run (``expand_ops``); on curves
    measured on CUDA (``gpu_library``) a recurrent layer runs as cuDNN's kernels, and those the
    library launches itself pay ``kernels.LIBRARY_LAUNCH_US`` instead of ``o``."""
    ops = expand_ops(ops, curves.gpu_library)
    cols = ops_arrays(ops)
    if not len(cols["flops"]):
        return {"compute_flop": 0.0, "compute_mem": 0.0, "overhead": 0.0, "fresh": 0.0,
                "ops": 0}
    fixed = issue_s(ops, curves.op_overhead_s)
    r = roofline_split(cols["flops"], cols["bytes"], is_conv(cols["op"]), curves,
                       kernel_times_s(cols["op"], cols["elements"], curves),
                       gemm_rows(ops) if len(curves.gemm_rows) else None, overhead_s=fixed)
    n, count = len(cols["flops"]), cols["count"]
    per_tensor = np.where(cols["tensors"] > 1, cols["tensors"], 0.0) * curves.foreach_tensor_s
    fresh = fresh_times_s(cols["fresh_bytes"], cols["fresh_row"], n, curves)
    t = (r["time_s"] + per_tensor + fresh) * count
    return {"compute_flop": float(t[r["flop_bound"]].sum()),
            "compute_mem": float(t[~r["flop_bound"]].sum()),
            "overhead": float(((fixed + per_tensor) * count).sum()),
            "fresh": float((fresh * count).sum()),
            "ops": int(count.sum())}


def table_features(ops: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The aggregate features of a per-op table, as ``profile`` sums them:
    ``flops_compute_bound = sum count flops`` over compute-bound rows and
    ``bytes_memory_bound = sum count (bytes_read + bytes_written)`` over memory-bound rows (a
    row without ``count``: 1); empty for a table whose rows are not all marked ``bound`` (its
    split is the kernel model's: the features given are taken as the table's own)."""
    if not all("bound" in row for row in ops):
        return {}
    split = paper_split(ops, 1.0, 1.0)  # the same sums, at rates of 1 FLOP/s and 1 byte/s
    return {"flops_compute_bound": split["compute_flop"],
            "bytes_memory_bound": split["compute_mem"]}


def op_runs(ops: Sequence[Mapping[str, Any]]) -> float:
    """The ops a per-op table runs: each row's ``count`` (1 by default) summed, as the host
    issues them (``profile``'s ``n_ops``)."""
    return float(ops_arrays(ops)["count"].sum()) if len(ops) else 0.0


def paper_split(ops: Sequence[Mapping[str, Any]], flops_per_s: float,
                mem_bw_bps: float) -> dict[str, float]:
    """The paper's additive split from the same table: FLOPs of ops the profiler marks
    compute-bound at one peak, bytes of the others at one bandwidth (each row times its
    ``count``)."""
    cols = ops_arrays(ops)
    flops, moved = cols["flops"] * cols["count"], cols["bytes"] * cols["count"]
    return {"compute_flop": float(flops[cols["compute"]].sum() / flops_per_s),
            "compute_mem": float(moved[~cols["compute"]].sum() / mem_bw_bps)}
