"""Compute time of a training step on one GPU: the strategy its catalog entry selects.

Strategies (``STRATEGIES``); ``auto`` (the default) lets the catalog entry decide
(``strategy_of``):

* ``curves``: the GPU has measured efficiency curves (``gemm_intensity``/``gemm_tflops``, from
  ``traincast calibrate``): the per-op roofline of ``traincast.roofline``.
* ``kernel``: the GPU has an SM count (``sms``) or an achievable large-GEMM fraction
  (``gemm_max_fraction``): the shape-aware kernel model of ``traincast.kernels``.
* ``paper``: neither: one flat rate per kind of work, Wang et al. (IISWC 2019). Always available
  by name (``--compute paper``).

For jobs known only by their aggregate features (``compute_s``; F = ``flops_compute_bound``,
B = ``bytes_memory_bound``, P = the dense peak of the dtype, M = ``mem_bw_gbs``)::

    paper   flop_s = F / (P flop_efficiency)       mem_s = B / (M mem_efficiency)
    kernel  flop_s = F / (P eta)                   mem_s = B / (M f)
    curves  flop_s = F / gemm_tflops[-1]           mem_s = B / elementwise_gbs[-1]

For fp32, ``eta`` is the measured-kernel model's large product (``kernels.simt_gemm_fraction``:
``R max_T e_T / (rho P)``, the sustained SIMT rate of the GPU's datasheet fields, its best
tile's issue efficiency, the library's pick) and ``f`` its element-wise fraction
``f_elementwise`` (``memory_kernel_bps``): the rates the per-op path prices the same kernels
at, so the two paths agree on a GPU the fit has not seen (L4, 72 W: 0.36 of its fp32 peak).
Otherwise ``eta`` = the GPU's ``gemm_max_fraction`` for the dtype (``kernels.gemm_max_fraction``:
16-, 8-bit and TF32 products, and fp32 on an entry without the model's fields) and ``f`` =
``mem_max_fraction`` (an entry without the model's fields); a GPU in the kernel strategy
without them takes
``kernels.DEFAULT_GEMM_MAX_FRACTION`` (0.79, the median published figure) and
``kernels.DEFAULT_MEM_MAX_FRACTION`` (0.88). An fp32 (or any-dtype) ``gemm_max_fraction`` the
entry gives wins over the model's, and a calibrated ``flop_efficiency`` (or
``mem_efficiency``) below 1 over all of these, as in the hybrid model. Aggregate features
carry no op shapes, so the kernel strategy prices them as large GEMMs and DRAM-sized element-wise
kernels (no quantization, no launch cost): a lower bound of the per-op figure, except where
the per-op path runs a convolution faster than fp32 (TF32, docs/model.md). With measured
curves the representative point is the curve's largest measured one (the largest GEMM intensity,
the largest element-wise size): the rates the big ops of a training step run at.

For a per-op table (``ops_compute_s``; rows ``op, flops, bytes_read, bytes_written, dtype,
shapes``) every op keeps the GPU busy, under ``kernel``, for ``b = max(t_flop, t_mem)`` and
counts as FLOP-bound when ``t_flop >= t_mem``, else memory-bound; one host thread issues the ops
in table order, ``d`` each, ahead of the GPU, and the time the GPU waits for an op's issue counts
with that op (``kernels.queue_idle_s``: step = ``sum count b`` + the waits)::

    kernel  t_flop = F_op / (P_op eta w_op)
            t_mem = (B_op + B_split + B_reread) / (M mem_max_fraction)  [streamed operands]
            d = the op's host dispatch (kernels.op_floors_s: the fitted floor_us of the
            kernel model times the op kind's fitted dispatch ratio, else kernel_launch_us);
            w_op = tile/wave/split-K efficiency of the op's GEMM shapes, each product's FLOP
            time times its alignment slowdown on compute capability >= 9.0 (a tensor-core
            product with a size that is no 16-byte multiple; kernels.alignment_slowdown),
            B_split = split-K partial sums (kernels.ops_gemm_efficiency; w = 1, B_split = 0
            for an op whose shapes give no GEMM); B_reread = inputs a multi-pass kernel reads
            again (training batch norm, kernels.reread_bytes)
            with the fitted measured-kernel model (kernel_op_times), fp32 products and
            memory-bound rows are priced by it instead (docs/model.md, "Kernel model")
    curves  traincast.roofline.compute_breakdown (its own fixed cost ``op_overhead_us``)
    paper   traincast.roofline.paper_split (the profiler's compute/memory label, no fixed cost)

Op dtypes (``op_math_dtypes``): ``P_op`` is the peak of the op's own dtype when it is a 16- or
8-bit type (a mixed-precision profile records its products in fp16/bf16) or ``"tf32"`` (fp32
where the TF32 peak is no higher than the fp32 one, ``GPU.math_dtype``); an fp32
convolution runs in TF32 on an NVIDIA GPU with a TF32 peak (PyTorch's default
``torch.backends.cudnn.allow_tf32 = True``; ROCm keeps fp32, ``catalog.VENDORS``), while fp32
matrix products stay fp32 (``torch.backends.cuda.matmul.allow_tf32`` defaults to False since
PyTorch 1.12; a row whose dtype is ``"tf32"`` says it was enabled); everything else runs at the
job's dtype
(``op_operand_dtypes``). A depthwise or narrow-group convolution runs on the vector units, at
the fp32 vector peak on a GPU with tensor cores (``op_math_dtypes``). A compute-family row
recorded wider than its operand dtype (an fp32 profile of an ``--amp`` job: autocast casts the
operands) moves ``min(1, s_d / s_row)`` of its recorded bytes (``kernels.operand_scale``). A
convolution on matrix units (``kernels.has_matrix_units``) in PyTorch's default NCHW layout
also pays cuDNN's NHWC transposes, ``t_layout = 2 (B_read + B_written) min(1, s_d / s_row)
/ (M f)`` (``kernels.layout_transpose_bytes``; ``f`` as for aggregate memory-bound bytes,
``memory_kernel_bps``), counted as memory-bound time (``layout_s``).
Recurrent-layer rows are expanded into the ops they run (``traincast.features.ops.expand_ops``)
by ``curves`` and ``kernel``: on a GPU (``kernel``, and curves measured on CUDA) as cuDNN's fused
RNN kernels, whose library-launched rows cost the host ``kernels.LIBRARY_LAUNCH_US`` each
(``traincast.features.recurrent.cudnn_rows``); on a CPU as ATen's per-step cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast import kernels
from traincast.errors import TraincastError
from traincast.features.ops import expand_ops_origin, op_family
from traincast.hardware.catalog import COMPUTE_STRATEGIES
from traincast.roofline import Curves, compute_breakdown, ops_arrays, paper_split

F = NDArray[np.float64]
STRATEGIES: tuple[str, ...] = COMPUTE_STRATEGIES

__all__ = ["STRATEGIES", "compute_s", "kernel_mem_bps", "kernel_op_times", "memory_kernel_bps",
           "op_math_dtypes", "op_operand_dtypes", "ops_compute_s", "paper_why", "rates",
           "strategy_of"]


def flat_peak_gpus(catalog: Any, gpus: Any) -> list[str]:
    """Of the GPU names ``gpus`` (entries or aliases; unknown ones skipped), those the
    catalog's automatic strategy prices at flat datasheet peaks (``paper``: an entry without
    the kernel model's fields) while it prices others by a finer model: forecasts that move
    jobs onto them read optimistic beside the jobs' own. Empty when a strategy is forced
    (every GPU priced alike)."""
    if catalog.compute != "auto":
        return []
    out = set()
    for name in gpus:
        try:
            gpu = catalog.gpu(name)
        except KeyError:
            continue
        if strategy_of(gpu) == "paper":
            out.add(gpu.name)
    return sorted(out)


CURVES_WHERE = "traincast calibrate writes for the machine it runs on"
"""Where measured curves (``--compute curves``) come from."""
FLAT_PEAK_WHY = "the entry gives no SM count or GEMM fraction for the kernel model"
"""Why an entry is priced at flat datasheet peaks (``strategy_of``: ``paper``)."""
FLAT_PEAK_CAUTION = (f"priced at flat datasheet peaks: {FLAT_PEAK_WHY}, so a job moved there "
                     "reads faster than the kernel model would price it (add them: "
                     "docs/hardware.md)")
"""What whatif and recommend say of the GPUs of :func:`flat_peak_gpus`."""


def strategy_of(gpu: Any, strategy: str | None = "auto") -> str:
    """The strategy used for ``gpu``: ``strategy`` when it names one, else (``auto``/None)
    ``curves`` with measured GEMM curves, ``kernel`` with ``sms`` or ``gemm_max_fraction``, else
    ``paper``. ``curves`` named for an entry without curves is ``paper``: its flat peak of the
    job's dtype (what curves fall back to, at fp32 alone)."""
    curves = bool(len(getattr(gpu, "gemm_intensity", ())) and len(getattr(gpu, "gemm_tflops", ())))
    if strategy not in (None, "auto"):
        if strategy not in STRATEGIES:
            raise TraincastError(f"unknown compute strategy {strategy!r}",
                                 hint=f"choose one of {', '.join(STRATEGIES)}")
        return "paper" if strategy == "curves" and not curves else str(strategy)
    if curves:
        return "curves"
    return "kernel" if kernel_model_available(gpu) else "paper"


def paper_why(gpu: Any, strategy: str | None = "auto") -> str:
    """Why ``gpu`` is priced at flat datasheet peaks (:func:`strategy_of` gives ``paper``), ""
    when it is not: asked for (``--compute paper``), ``--compute curves`` for an entry without
    measured curves, or an entry without the kernel model's fields (:data:`FLAT_PEAK_WHY`)."""
    if strategy_of(gpu, strategy) != "paper":
        return ""
    if strategy == "paper":
        return "as asked (--compute paper)"
    if strategy == "curves":
        return (f"--compute curves, but {getattr(gpu, 'name', 'the GPU')} has no measured "
                f"curves, which {CURVES_WHERE}")
    return FLAT_PEAK_WHY


def compute_capability_of(gpu: Any) -> float:
    """The catalog entry's CUDA compute capability, 0 when it gives none."""
    return float(getattr(gpu, "compute_capability", 0.0) or 0.0)


def kernel_model_available(gpu: Any) -> bool:
    """Whether the kernel strategy has what it needs for ``gpu``: an SM count or a published
    GEMM fraction."""
    return kernels.gpu_sms(gpu) > 0 or kernels.gemm_max_fraction(gpu, "fp32") is not None


def _assumed_fractions(gpu: Any, skip: tuple[str, ...] = ()) -> str:
    """The large-GEMM fractions a GPU's products take for dtypes its ``gemm_max_fraction``
    does not list though it has their peak (``GPU.gemm_fraction``: the ``"*"`` entry, else the
    largest given), said as assumed: ``; assumed: fp8 0.514, tf32 0.514 (no figure of their
    own: the largest given)``; ``skip``: dtypes priced another way (fp32 products by the
    measured-kernel model)."""
    from traincast.hardware.catalog import DTYPES

    frac = gpu.gemm_max_fraction
    taken = [d for d in DTYPES if d not in frac and d not in skip and gpu.math_dtype(d) == d]
    if not taken:
        return ""
    rule = 'the "*" entry' if "*" in frac else "the largest given"
    return (f"; assumed: {', '.join(f'{d} {gpu.gemm_fraction(d):g}' for d in taken)} (no "
            f"figure of their own: {rule})")


def _model_eta(gpu: Any) -> float | None:
    """The measured-kernel model's fp32 ``eta`` where it prices this entry's fp32 work
    (``kernels.simt_gemm_fraction``; None where the entry lacks its datasheet fields), unless
    the entry gives its own: a calibrated ``flop_efficiency`` < 1, an fp32 or any-dtype
    (``"*"``) ``gemm_max_fraction``."""
    given = getattr(gpu, "gemm_max_fraction", {}) or {}
    if gpu.flop_efficiency < 1.0 or {"fp32", "*"} & set(given):
        return None
    return kernels.simt_gemm_fraction(gpu)


def _model_memory_fraction(gpu: Any) -> float | None:
    """The measured-kernel model's element-wise fraction ``f_elementwise`` where it prices
    this entry (``kernels.fitted_params``: the datasheet fields it needs; none with a
    calibrated ``mem_efficiency`` < 1, ``kernels.memory_fractions``)."""
    if kernels.fitted_params(gpu) is None:
        return None
    return kernels.memory_fractions(gpu).get("elementwise")


def _eta(gpu: Any, dtype: str) -> float:
    """GEMM fraction of the kernel strategy: a calibrated ``flop_efficiency`` < 1, else for
    fp32 an fp32 (or ``"*"``) ``gemm_max_fraction`` the entry gives, else the measured-kernel
    model's (``_model_eta``), else the shipped ``gemm_max_fraction`` of the dtype, else
    ``kernels.DEFAULT_GEMM_MAX_FRACTION``."""
    if gpu.flop_efficiency < 1.0:
        return float(gpu.flop_efficiency)
    model = _model_eta(gpu) if gpu.math_dtype(dtype) == "fp32" else None
    if model is not None:
        return model
    eta = kernels.gemm_max_fraction(gpu, dtype)
    return kernels.DEFAULT_GEMM_MAX_FRACTION if eta is None else eta


def kernel_mem_bps(gpu: Any) -> float:
    """Achievable DRAM bandwidth of a kernel streaming its operands under the kernel strategy
    (a product's or a fused attention's operand traffic), ``M = mem_bw_gbs 1e9 f``: ``f`` = a
    calibrated ``mem_efficiency`` < 1, else ``mem_max_fraction`` (a streaming-read figure),
    else ``kernels.DEFAULT_MEM_MAX_FRACTION``."""
    frac = gpu.mem_efficiency if gpu.mem_efficiency < 1.0 else \
        float(getattr(gpu, "mem_max_fraction", 0.0) or kernels.DEFAULT_MEM_MAX_FRACTION)
    return float(gpu.mem_bw_gbs * 1e9 * frac)


def memory_kernel_bps(gpu: Any) -> float:
    """DRAM bandwidth of a memory-bound kernel of no fitted family of its own under the kernel
    strategy (a job's aggregate memory-bound bytes, cuDNN's layout transposes), ``M =
    mem_bw_gbs 1e9 f_elementwise`` where the measured-kernel model prices the entry
    (``_model_memory_fraction``; a streaming ``mem_max_fraction`` does not stand in for it),
    else ``kernel_mem_bps``."""
    frac = _model_memory_fraction(gpu)
    return float(gpu.mem_bw_gbs * 1e9 * frac) if frac else kernel_mem_bps(gpu)


def rates(gpu: Any, dtype: str, strategy: str | None = "auto",
          streaming: bool = False) -> tuple[float, float]:
    """``(FLOP/s, bytes/s)`` at which ``compute_s`` prices aggregate features (module
    docstring); with ``streaming`` the kernel strategy's byte rate is that of a kernel
    streaming its operands (``kernel_mem_bps``) instead of a memory-bound kernel's
    (``memory_kernel_bps``)."""
    name = strategy_of(gpu, strategy)
    if name == "paper":
        return gpu.flops_per_s(dtype), gpu.mem_bw_bps
    if name == "kernel":
        byte_rate = kernel_mem_bps(gpu) if streaming else memory_kernel_bps(gpu)
        return gpu.peak_tflops(dtype) * 1e12 * _eta(gpu, dtype), byte_rate
    curves = Curves.from_gpu(gpu, dtype)
    return float(curves.gemm_flops_per_s[-1]), float(curves.elementwise_bps[-1])


def compute_s(gpu: Any, dtype: str, flops: ArrayLike, mem_bytes: ArrayLike,
              strategy: str = "auto") -> tuple[F, F]:
    """``(T_comp_flop, T_comp_mem)`` of rows on one GPU from aggregate features, vectorized:
    ``flops / FLOP rate`` and ``mem_bytes / byte rate`` (``rates``; module docstring)."""
    flop_rate, byte_rate = rates(gpu, dtype, strategy)
    return (np.asarray(flops, dtype=np.float64) / flop_rate,
            np.asarray(mem_bytes, dtype=np.float64) / byte_rate)


def op_operand_dtypes(ops: Sequence[Mapping[str, Any]], gpu: Any, dtype: str) -> list[str]:
    """Per op: the catalog dtype its operands are in (module docstring, "Op dtypes").

    A 16-/8-bit row or a row marked ``"tf32"`` runs in that dtype (``GPU.math_dtype``: fp32 on a
    GPU without it, and for TF32 where its peak is no higher than the fp32 one); an fp32
    convolution (forward or backward) runs in TF32 on an NVIDIA GPU with
    a TF32 peak, PyTorch's default (``torch.backends.cudnn.allow_tf32`` is True; not on ROCm,
    ``catalog.VENDORS``); any other row runs in
    the job's dtype (fp32 matrix products stay fp32: ``torch.backends.cuda.matmul.allow_tf32``
    is False by default since PyTorch 1.12)."""
    return [gpu.math_dtype(d) for d in op_asked_dtypes(ops, gpu, dtype)]


def op_asked_dtypes(ops: Sequence[Mapping[str, Any]], gpu: Any, dtype: str) -> list[str]:
    """Per op: the catalog dtype its operands ask for, before the GPU's fallback to fp32 for
    a dtype it has no peak of (:func:`op_operand_dtypes` applies it): a 16-/8-bit or
    ``"tf32"`` row its own, an fp32 convolution on an NVIDIA GPU ``"tf32"`` when the job runs
    in fp32, any other row the job's dtype."""
    job = gpu.math_dtype(dtype)
    conv_tf32 = kernels.vendor_of(gpu) == "nvidia"  # cuDNN's default, not ROCm's
    names = []
    for o in ops:
        cd = kernels.TORCH_DTYPES.get(str(o.get("dtype", "float32")), "")
        if cd in kernels.TENSOR_CORE_DTYPES:
            names.append(cd)
        elif job == "fp32" and conv_tf32 and op_family(str(o.get("op", ""))) == "conv":
            names.append("tf32")
        else:
            names.append(job)
    return names


def op_math_dtypes(ops: Sequence[Mapping[str, Any]], gpu: Any, dtype: str) -> list[str]:
    """Per op: the catalog dtype whose peak its arithmetic runs at: its operand dtype
    (``op_operand_dtypes``), except for a depthwise or other narrow-group convolution
    (``kernels.narrow_group_convs``) whose operand dtype runs on matrix units
    (``kernels.has_matrix_units``): it runs on the vector units, at the fp32 vector peak (the
    catalog lists no vector 16-bit peak for a GPU with tensor cores: a lower bound)."""
    return _math_dtypes(op_operand_dtypes(ops, gpu, dtype), kernels.narrow_group_convs(ops),
                        gpu)


def _math_dtypes(operand: Sequence[str], narrow: NDArray[np.bool_], gpu: Any) -> list[str]:
    """``op_math_dtypes`` from the ops' operand dtypes and narrow-group marks."""
    units = {d: kernels.has_matrix_units(gpu, d) for d in set(operand)}
    return ["fp32" if nw and units[d] else d for d, nw in zip(operand, narrow, strict=True)]


def _op_peaks(gpu: Any, names: Sequence[str]) -> tuple[F, F]:
    """Per op: dense peak (FLOP/s) and ``eta`` of its math dtype ``names[i]`` (module
    docstring: ``P_op``)."""
    table = {d: (gpu.peak_tflops(d) * 1e12, _eta(gpu, d)) for d in set(names)}
    return (np.array([table[d][0] for d in names], dtype=np.float64),
            np.array([table[d][1] for d in names], dtype=np.float64))


def kernel_op_times(ops: Sequence[Mapping[str, Any]], gpu: Any, dtype: str) -> dict[str, F]:
    """Per row of a (recurrent-expanded) op table under the kernel model: ``flop_s``,
    ``mem_s``, ``layout_s`` (NCHW transposes of a tensor-core convolution, 0 elsewhere),
    ``busy_s = max(flop_s, mem_s) + layout_s`` (the GPU's time) and ``flop_bound``
    (``flop_s >= mem_s``) for one run of the row; ``host_s``: the host's time to issue one
    run, ``d r`` (``kernels.op_floors_s``); ``count`` (times the row runs); ``idle_total_s``
    (all the row's runs together): the time the GPU waits for the host to issue them, one host
    thread issuing the table's ops in order, ``host_s`` each, ahead of the GPU
    (``kernels.queue_idle_s``); ``time_s = busy_s + idle_total_s / count`` (one run's share
    of the step). A compute-family row moves its recorded bytes times
    ``kernels.operand_scale`` of its operand dtype (an fp32 row of a 16-bit job: half).

    With fitted kernel parameters (``GPU.kernel``, from ``hardware/kernel_model.toml``) and the
    datasheet fields they need, fp32 products on CUDA cores are priced by the measured-kernel
    model (``kernels.simt_gemm_time_s``; convolutions keep the datasheet path, ``P eta w``,
    their fp32 ``eta`` the model's large product, ``_eta``) and memory-bound
    rows at their family's fitted bandwidth fraction (``kernels.op_memory_family``)."""
    cols = ops_arrays(ops)
    operand, narrow = op_operand_dtypes(ops, gpu, dtype), kernels.narrow_group_convs(ops)
    names = _math_dtypes(operand, narrow, gpu)
    peak, eta = _op_peaks(gpu, names)
    mem_bps = kernel_mem_bps(gpu)
    scale = kernels.operand_scale(ops, operand)
    w, split_bytes = kernels.ops_gemm_efficiency(ops, kernels.gpu_sms(gpu), names,
                                                 compute_capability_of(gpu))
    flop_s = cols["flops"] / (peak * eta * w)
    mem_s = (cols["bytes"] * scale + split_bytes + kernels.reread_bytes(ops)) / mem_bps
    params = kernels.fitted_params(gpu)
    if params is not None:
        flop_s, mem_s = _fitted_times(ops, gpu, names, params, cols, scale, flop_s, mem_s)
    moved = kernels.layout_transpose_bytes(ops, names, gpu, scale=scale, narrow=narrow)
    layout_s = np.where(moved > 0, kernels.memory_kernel_time_s(moved, memory_kernel_bps(gpu),
                                                                 1.0), 0.0)
    busy = np.maximum(flop_s, mem_s) + layout_s
    host = kernels.op_floors_s(ops, gpu)
    idle = kernels.queue_idle_s(host, busy, cols["count"])
    count = cols["count"]
    return {"flop_s": flop_s, "mem_s": mem_s, "flop_bound": flop_s >= mem_s,
            "layout_s": layout_s, "busy_s": busy, "host_s": host, "idle_total_s": idle,
            "time_s": busy + np.divide(idle, count, out=np.zeros_like(idle), where=count > 0),
            "count": count}


def _fitted_times(ops: Sequence[Mapping[str, Any]], gpu: Any, names: Sequence[str],
                  params: Mapping[str, float], cols: Mapping[str, F], scale: F, flop_s: F,
                  mem_s: F) -> tuple[F, F]:
    """``(flop_s, mem_s)`` with the measured-kernel model where it applies: rows whose math
    dtype is fp32 and whose shapes give GEMM products take the sum of their products'
    ``kernels.simt_gemm_time_s`` (tile, wave, split-K, tile traffic and DRAM terms in one, the
    fastest candidate tile times the library-choice factor of a batched or single product); a
    fused attention's products without their DRAM terms (its scores stay on chip), the op no
    faster than its recorded bytes at ``mem_bw_gbs f_elementwise``; rows without FLOPs move
    their bytes at ``mem_bw_gbs f_family``."""
    sms = kernels.gpu_sms(gpu)
    rate = kernels.simt_rate_flops(gpu, params)
    bw = float(gpu.mem_bw_gbs) * 1e9
    flop_s, mem_s = flop_s.copy(), mem_s.copy()
    g = kernels.ops_gemm_table(ops)
    fp32 = np.array([d == "fp32" for d in names], dtype=bool)
    if len(g["row"]) and rate > 0:
        # convolutions keep the datasheet path (P eta w): the fit's convolution is the fastest of
        # implicit GEMM and Winograd, a choice the recorded products alone do not make
        op_names = cols["op"]
        family = kernels.op_families(op_names)
        conv = (family == "conv")[g["row"]]
        sel = fp32[g["row"]] & ~conv
        # a fused attention keeps its scores on chip: its products move no DRAM bytes, the
        # kernel its inputs and outputs (no faster than those at the element-wise fraction)
        fused = family == "attention"
        t = kernels.simt_gemm_time_s(g["m"], g["n"], g["k"], g["batch"], sms,
                                     kernels.simt_issue_ratio(gpu), rate,
                                     kernels.simt_clock_hz(gpu, params),
                                     np.where(fused[g["row"]], np.inf, bw), params,
                                     choice=kernels.library_choice(params, op_names)[g["row"]])
        per_op = np.bincount(g["row"][sel], weights=t[sel], minlength=len(ops))
        io_s = kernels.memory_kernel_time_s(cols["bytes"] * scale, bw,
                                            params.get("f_elementwise", 1.0))
        per_op = np.where(fused, np.maximum(per_op, io_s), per_op)
        priced = np.bincount(g["row"][sel], minlength=len(ops)) > 0
        flop_s = np.where(priced, per_op, flop_s)
        mem_s = np.where(priced, 0.0, mem_s)
    fam = kernels.op_memory_family(ops)
    memory = (cols["flops"] <= 0) & (fam != "")
    fractions = kernels.fitted_memory_fractions(params)
    names, where = np.unique(fam.astype(str), return_inverse=True)
    frac = np.array([fractions.get(f, 1.0) for f in names], dtype=np.float64)[where]
    mem_s = np.where(memory, kernels.memory_kernel_time_s(cols["bytes"] * scale, bw, frac),
                     mem_s)
    return flop_s, mem_s


def _additive_s(ops: Sequence[Mapping[str, Any]], gpu: Any, dtype: str,
                name: str) -> tuple[float, float]:
    """``(compute_flop, compute_mem)`` of a table under ``paper`` or ``curves``."""
    if name == "paper":
        out = paper_split(ops, gpu.flops_per_s(dtype), gpu.mem_bw_bps)
    else:
        out = compute_breakdown(ops, Curves.from_gpu(gpu, dtype))
    return out["compute_flop"], out["compute_mem"]


def ops_compute_s(ops: Sequence[Mapping[str, Any]], gpu: Any, dtype: str,
                  strategy: str = "auto", scales: ArrayLike | None = None) -> dict[str, Any]:
    """``{"compute_flop": s, "compute_mem": s, "idle": s, "busy_marked": s}`` of one step from
    its per-op table, by the GPU's strategy (module docstring); ``strategy`` names one of
    ``STRATEGIES`` to force it.

    ``idle`` = the part of the two during which the GPU waits on the host: under ``kernel``,
    ``sum idle_total_s`` of :func:`kernel_op_times` (one host thread issuing the ops in order,
    ``kernels.queue_idle_s``); 0 otherwise. ``busy_marked`` = the GPU's busy time on the rows
    the profile marks ``bound = "compute"`` (a table without marks: its FLOP-bound time; the
    others' busy time is ``compute_flop + compute_mem - idle - busy_marked``). With ``scales``,
    also ``idle_grid``: ``kernels.queue_idle_grid_s`` over them, the marked rows' busy time
    times ``scales[i]`` and the others' times ``scales[j]`` (zeros outside ``kernel``)."""
    name = strategy_of(gpu, strategy)
    n = 0 if scales is None else len(np.asarray(scales))
    marks = bool(ops) and all("bound" in o for o in ops)
    grid = np.zeros((n, n))
    expanded, origin = expand_ops_origin(ops, gpu_library=True) if name == "kernel" \
        else ([], None)
    if name in ("paper", "curves"):  # sums over rows: the marked rows priced on their own
        flop_s, mem_s = _additive_s(ops, gpu, dtype, name)
        marked = [o for o in ops if o.get("bound") == "compute"] if marks else []
        busy = sum(_additive_s(marked, gpu, dtype, name)) if marked else \
            (0.0 if marks else flop_s)
        out = {"compute_flop": flop_s, "compute_mem": mem_s, "idle": 0.0, "busy_marked": busy}
    elif not expanded:
        out = {"compute_flop": 0.0, "compute_mem": 0.0, "idle": 0.0, "busy_marked": 0.0}
    else:
        r = kernel_op_times(expanded, gpu, dtype)
        t = (r["busy_s"] - r["layout_s"]) * r["count"] + r["idle_total_s"]  # idle with its op
        layout = r["layout_s"] * r["count"]
        # each row's own mark where an expansion gave it one (cuDNN's or ATen's kernels of a
        # recurrent layer), else the mark of the profiled row it comes from
        sel = np.array([o.get("bound", ops[i].get("bound")) == "compute"
                        for o, i in zip(expanded, origin, strict=True)]) if marks \
            else r["flop_bound"]
        out = {"compute_flop": float(t[r["flop_bound"]].sum()),
               "compute_mem": float(t[~r["flop_bound"]].sum() + layout.sum()),
               "idle": float(r["idle_total_s"].sum()),
               "busy_marked": float((r["busy_s"] * r["count"])[sel].sum())}
        if scales is not None:
            grid = kernels.queue_idle_grid_s(r["host_s"], r["busy_s"], r["count"], sel, scales)
    return out if scales is None else out | {"idle_grid": grid}


def basis(gpu: Any, strategy: str | None = "auto") -> dict[str, Any]:
    """What the GPU's compute pricing rests on: the strategy ``auto`` picks, the rates it uses
    for fp32 and mixed precision, and under ``kernel`` each kernel-model input's citation or
    the documented default that replaces it; under ``paper`` and ``curves`` the inputs they
    take instead (``traincast hardware show``)."""
    name = strategy_of(gpu, strategy)
    out: dict[str, Any] = {"strategy": name}
    for dtype in ("fp32", "amp"):
        flop_rate, byte_rate = rates(gpu, dtype, strategy)
        out[f"{dtype}_tflops"] = flop_rate / 1e12
        out[f"{dtype}_mem_gbs"] = byte_rate / 1e9
    if name == "paper":
        out["inputs"] = {"rates": "flat datasheet peaks, as the paper prices them: the peak of "
                                  "the job's dtype x flop_efficiency, mem_bw_gbs x "
                                  "mem_efficiency; no tiles, waves or per-op floor"
                                  + ("" if kernel_model_available(gpu) else
                                     f" ({FLAT_PEAK_WHY})")}
        return out
    if name == "curves":
        out["inputs"] = {"rates": "the curves calibrate measured (gemm_intensity/gemm_tflops, "
                                  "conv_intensity/conv_tflops, elementwise_bytes/"
                                  "elementwise_gbs), op_overhead_us = "
                                  f"{float(getattr(gpu, 'op_overhead_us', 0.0) or 0.0):g} µs "
                                  "per op (docs/validation.md)"}
        return out
    sources = getattr(gpu, "sources", {}) or {}
    inputs: dict[str, str] = {}
    defaults = {"gemm_max_fraction": f"default {kernels.DEFAULT_GEMM_MAX_FRACTION} (median of "
                                     "the published maxima; no microbenchmark for this GPU)",
                "mem_max_fraction": f"default {kernels.DEFAULT_MEM_MAX_FRACTION} (the published "
                                    "A100 figure; none for this GPU)",
                "sms": "unknown: no tile/wave quantization",
                "kernel_launch_us": "0 (no published figure)"}
    floor = kernels.op_floor_s(gpu)
    fitted = ("the kernel model's (hardware/kernel_model.toml), times the op kind's dispatch "
              "ratio")
    inputs["per-op floor"] = (f"{floor * 1e6:.1f} µs: " + (
        (f"{sources['floor_us']}, " if "floor_us" in sources else "") + fitted
        if (gpu.kernel or {}).get("floor_us") else "kernel_launch_us")) if floor else "0 (none)"
    for key, fallback in defaults.items():
        value = getattr(gpu, key, None)
        shown = ", ".join(f"{k} {v:g}" for k, v in value.items()) \
            if isinstance(value, dict) else value
        src = sources.get(key, gpu.source)
        inputs[key] = (f"{shown}: {src}" if src else f"{shown} (no source given)") if value \
            else fallback
    model_eta, model_f = _model_eta(gpu), _model_memory_fraction(gpu)
    if gpu.gemm_max_fraction and gpu.flop_efficiency >= 1.0:
        inputs["gemm_max_fraction"] += _assumed_fractions(
            gpu, skip=("fp32",) if name == "kernel" and model_eta is not None else ())
    if name == "kernel" and model_eta is not None:
        tf32 = " and TF32" if gpu.math_dtype("tf32") == "tf32" else ""  # else priced as fp32
        inputs["gemm_max_fraction"] = f"16-, 8-bit{tf32} products: " \
            + inputs["gemm_max_fraction"]
        inputs["fp32 products"] = (f"{model_eta:.3f} of the fp32 peak: the measured-kernel "
                                   "model's large product, min(1, R max e_T / (rho P)), its "
                                   "table")
    if name == "kernel" and model_f:
        inputs["mem_max_fraction"] = "operands a kernel streams: " + inputs["mem_max_fraction"]
        inputs["memory-bound bytes"] = (f"{model_f:.3f} of mem_bw_gbs: the measured-kernel "
                                        "model's element-wise fraction")
    out["inputs"] = inputs
    return out


def misaligned_products(ops: Sequence[Mapping[str, Any]], gpu: Any,
                        dtype: str) -> dict[str, Any] | None:
    """The matrix products of a per-op table that ``kernels.alignment_slowdown`` charges on
    ``gpu`` (a size that is no 16-byte multiple, compute capability 9.0 and later; matrix
    products only, ``kernels.products_slowdown``), over the table as the kernel model prices
    it (recurrent rows expanded into the kernels they run): ``{"products"`` (runs per step: each
    op's ``count`` times its products), ``"flop_share"`` (their FLOPs over all products'
    FLOPs), ``"slowdown_max"`` (the largest factor charged), ``"largest"`` (the product of the
    most FLOPs among them: ``op``, ``shape`` as ``m x n x k``, ``slowdown``)}; None when none is
    charged."""
    expanded, _ = expand_ops_origin(ops, gpu_library=True)
    if not expanded:
        return None
    g, u = kernels.products_slowdown(expanded, op_math_dtypes(expanded, gpu, dtype),
                                     compute_capability_of(gpu))
    count = ops_arrays(expanded)["count"][g["row"]]
    flops = kernels.gemm_flops(g["m"], g["n"], g["k"], g["batch"]) * count
    hit = (u > 1.0) & (count > 0)
    if not hit.any() or flops.sum() <= 0:
        return None
    i = int(np.flatnonzero(hit)[np.argmax(flops[hit])])
    return {"products": int(count[hit].sum()),
            "flop_share": float(flops[hit].sum() / flops.sum()),
            "slowdown_max": float(u[hit].max()),
            "largest": {"op": str(expanded[int(g["row"][i])]["op"]),
                        "shape": f"{g['m'][i]:.0f} x {g['n'][i]:.0f} x {g['k'][i]:.0f}",
                        "slowdown": float(u[i])}}
