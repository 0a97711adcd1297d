"""One GPU kernel model: the time of one GEMM, convolution or memory-bound kernel from its shape.

Small pure functions over numpy arrays, used by every path that prices GPU work op by op (the
per-op table of a profile, ``traincast.compute``; the products of the hybrid LLM model,
``traincast.parallel.gemm``). Rates come from the catalog entry of the GPU:

* ``P``   dense peak of the dtype (``<dtype>_tflops``, FLOP/s),
* ``eta`` achievable large-GEMM fraction of ``P`` (``gemm_max_fraction``, by dtype),
* ``S``   streaming multiprocessors (``sms``; 0 = unknown: no quantization),
* ``M``   achievable DRAM bandwidth = ``mem_bw_gbs 1e9 mem_max_fraction`` (bytes/s),
* ``d``   per-op floor (``op_floors_s``: the fitted ``floor_us`` times the op kind's dispatch
          ratio, else ``kernel_launch_us``): the host's time to issue the op. In a step the
          host issues ops ahead of the GPU, which waits only when the host falls behind
          (``queue_idle_s``); one op timed alone costs ``max(d, t)``.

A GEMM ``C[m x n] = A[m x k] B[k x n]``, ``batch`` independent ones per kernel, ``s`` bytes per
element (NVIDIA, "Matrix Multiplication Background User's Guide", Ch. 2-3)::

    T          = (T_m, T_n), each side at most 8 ceil(dim / 8)      (narrow_tile)
    tiles(T)   = batch ceil(m / T_m) ceil(n / T_n)                  (one tile per SM at a time)
    s(T)       = min(floor(S / tiles), floor(k / T_k)) if tiles < S, else 1     (split-K)
    waves(T)   = ceil(tiles(T) s / S)
    w          = max over the dtype's tiles T of s batch m n / (waves(T) S T_m T_n)
               = tile quantization x wave quantization               [1 when S = 0]
    F          = 2 batch m n k                                      (FLOPs)
    B          = s_b batch (m k + k n + m n) + [s > 1] 8 s batch m n (A, B, C; fp32 partials)
    I          = F / B                                               (arithmetic intensity)
    fraction   = min(eta w, I M / P)                                 (achieved fraction of P)
    t_gemm     = F / (P fraction) = max(F / (P eta w), B / M)      (GPU busy time)

(``s_b`` = bytes per element.) The second argument of the ``min`` is the small-dimension
factor: a product with a small ``k`` (or a small ``m`` or ``n``) has a low intensity and runs at
memory speed, below the GPU's ridge point ``P eta / M``. A product whose tiles cannot fill the
SMs splits its ``k`` loop (split-K, as cuBLAS and CUTLASS do) and pays for its partial sums in
DRAM traffic. A memory-bound kernel moving ``B`` bytes takes ``B / M``. In a step the GPU also
waits for the host to issue each op (``d`` each, ``queue_idle_s``).

A convolution runs as an implicit GEMM (cuDNN's implicit-GEMM algorithms; NVIDIA,
"Convolutional Layers User's Guide", Sec. 2): ``m = N H_o W_o``, ``n = C_out``,
``k = C_in k_h k_w / groups``. Its backward is two such products, each with the forward's FLOPs:
the data gradient (``m = N H_o W_o``, ``n = C_in``, ``k = C_out k_h k_w / groups``) and the
weight gradient (``m = C_out``, ``n = C_in k_h k_w / groups``, ``k = N H_o W_o``).

Tiles (``TILES``): tensor-core dtypes (fp16, bf16, fp8, tf32) use cuBLAS's three most efficient
tiles, 256x128, 128x256 and 128x128 (Matrix Multiplication Background guide, Sec. 2.3); fp32 on
CUDA cores uses the SIMT SGEMM tiles 128x128, 128x64 and 64x128 (CUTLASS's ``sgemm`` kernels,
``cutlass_simt_sgemm_128x128_8x2`` and its 128x64 / 64x128 variants). The library picks the
tile; the model takes the best, which makes ``w`` an upper bound of what cuBLAS reaches with
these tiles. ``T_k`` (``TILE_K``) is a tile's depth per main-loop step.
"""

from __future__ import annotations

import functools
import math
import tomllib
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast.features.ops import (
    COMPUTE_FAMILIES,
    GROUPED_MM,
    ITEMSIZE,
    op_family,
    parse_shapes,
)
from traincast.features.recurrent import library_launched

F = NDArray[np.float64]

TENSOR_CORE_TILES: tuple[tuple[int, int], ...] = ((256, 128), (128, 256), (128, 128))
SIMT_TILES: tuple[tuple[int, int], ...] = ((128, 128), (128, 64), (64, 128))
TILES: dict[str, tuple[tuple[int, int], ...]] = {
    "fp16": TENSOR_CORE_TILES, "bf16": TENSOR_CORE_TILES, "fp8": TENSOR_CORE_TILES,
    "tf32": TENSOR_CORE_TILES, "fp32": SIMT_TILES}
"""Output tiles considered per dtype (module docstring gives the sources)."""

TILE_K: dict[str, int] = {"fp16": 32, "bf16": 32, "fp8": 32, "tf32": 32, "fp32": 8}
"""Depth of one main-loop step of a tile (CUTLASS kernel names: ``tensorop_..._128x128_32x3``,
``simt_sgemm_128x128_8x2``); the finest split of the ``k`` loop (``split_k``)."""

DTYPE_BYTES: dict[str, int] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
TORCH_DTYPES: dict[str, str] = {"float16": "fp16", "bfloat16": "bf16", "float8_e4m3fn": "fp8",
                                "float8_e5m2": "fp8", "float32": "fp32", "tf32": "tf32"}
"""Catalog dtype of a per-op row's torch dtype (``"tf32"``: an fp32 op whose products run on
TF32 tensor cores, ``torch.backends.cuda.matmul.allow_tf32`` / ``cudnn.allow_tf32``)."""
TENSOR_CORE_DTYPES = frozenset({"fp16", "bf16", "fp8", "tf32"})
"""Catalog dtypes whose products run on tensor cores (NHWC-native convolutions) on a GPU that
has them (``has_matrix_units``)."""
MATRIX_ONLY_DTYPES = frozenset({"fp8", "tf32"})
"""Formats only matrix units compute in (NVIDIA A100 and H100 whitepapers: TF32 and FP8 are
Tensor Core formats): a GPU with a peak for them has matrix units for them."""
MATRIX_UNIT_RATIO = 3.0
"""A 16-bit peak above this multiple of the fp32 vector peak is a matrix unit's. Vector ALUs
reach 2x at most, two elements per 32-bit lane (Pascal's packed FP16x2: NVIDIA Tesla P100
whitepaper, 21.2 TFLOP/s FP16 = 2 x 10.6 FP32); matrix units reach 4x and more (NVIDIA GA102
whitepaper, A10: 125 / 31.2; Ada whitepaper, L4: 121 / 30.3; V100 and T4 8x, A100 16x). 3 lies
halfway, clear of datasheet rounding (P100 PCIe 18.7 / 9.3 = 2.01, L4 3.99)."""
MMA_MIN_CHANNELS = 8
"""Fewest channels per group a tensor-core convolution takes: the narrowest side of an MMA
operand (``m16n8k16``: n = 8; the same 8 as ``narrow_tile``). A grouped convolution with fewer
channels per group (a depthwise one has 1) runs on the vector units: PyTorch sends a depthwise
convolution (groups = C_in) to its own NCHW kernel (ATen ``Convolution.cpp``:
``ConvParams::is_depthwise`` -> ``CudaDepthwise2d``), and no tensor-core MMA can take a
1-channel operand."""


def _f(x: ArrayLike) -> F:
    return np.asarray(x, dtype=np.float64)


def tile_count(m: ArrayLike, n: ArrayLike, tile: tuple[int, int], batch: ArrayLike = 1) -> F:
    """Output tiles of a (batched) GEMM: ``batch ceil(m / T_m) ceil(n / T_n)``."""
    return _f(batch) * np.ceil(_f(m) / tile[0]) * np.ceil(_f(n) / tile[1])


def wave_count(tiles: ArrayLike, sms: float) -> F:
    """Waves of tiles over ``sms`` SMs: ``ceil(tiles / sms)``."""
    return np.ceil(_f(tiles) / sms)


def narrow_tile(dim: ArrayLike, side: int) -> F:
    """Tile side used along a dimension: ``min(T, 8 ceil(dim / 8))``. A matrix narrower than the
    tile runs in a narrow tile (cuBLASLt's tile list goes down to 8-wide: ``64x8``, ``8x64``, ...;
    8 = the n of the tensor cores' smallest MMA shape, m16n8k16), not in a mostly empty one."""
    return np.minimum(float(side), 8.0 * np.ceil(_f(dim) / 8.0))


def split_k(tiles: ArrayLike, k: ArrayLike, sms: float, tile_k: int) -> F:
    """Split-K factor: a GEMM whose tiles cannot fill one wave has its ``k`` loop split over
    ``s`` SMs, each summing ``k / s`` (cuBLAS/CUTLASS split-K; the partial sums are reduced after):
    ``s = min(floor(S / tiles), floor(k / T_k))`` when ``tiles < S``, else 1; at least 1.
    ``T_k`` = the tile's depth per main-loop step (``TILE_K``: one step per split at least)."""
    tiles, k = _f(tiles), _f(k)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.minimum(np.floor(sms / np.maximum(tiles, 1.0)), np.floor(k / tile_k))
    return np.where(tiles < sms, np.maximum(s, 1.0), 1.0)


def gemm_efficiency(m: ArrayLike, n: ArrayLike, sms: float, batch: ArrayLike = 1,
                    dtype: str = "bf16", k: ArrayLike | None = None) -> tuple[F, F]:
    """``(w, s)``: useful fraction ``w`` of the SM-time a GEMM is charged for, and its split-K
    factor ``s`` (1 without ``k``):

    ``w = max over the dtype's tiles T of s batch m n / (ceil(tiles(T) s / sms) sms T_m T_n)``,
    ``tiles(T) = batch ceil(m / T_m) ceil(n / T_n)``, ``s = split_k(tiles, k, sms, T_k)``, each
    tile side no wider than its dimension (``narrow_tile``); ``w = 1``, ``s = 1`` when ``sms``
    is 0 (unknown GPU).
    """
    m, n, batch = _f(m), _f(n), _f(batch)
    shape = np.broadcast(m, n, batch).shape if k is None else \
        np.broadcast(m, n, batch, _f(k)).shape
    if not sms or sms <= 0:
        return np.ones(shape), np.ones(shape)
    best, best_s = np.zeros(shape), np.ones(shape)
    for tile in TILES.get(dtype, TENSOR_CORE_TILES):
        tm, tn = narrow_tile(m, tile[0]), narrow_tile(n, tile[1])
        tiles = tile_count(m, n, (tm, tn), batch)
        s = np.ones(shape) if k is None else split_k(tiles, k, sms, TILE_K.get(dtype, 32))
        slots = wave_count(tiles * s, sms) * sms * tm * tn
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(slots > 0, s * batch * m * n / slots, 0.0)
        best_s = np.where(w > best, s, best_s)
        best = np.maximum(best, w)
    return best, best_s


def wave_efficiency(m: ArrayLike, n: ArrayLike, sms: float, batch: ArrayLike = 1,
                    dtype: str = "bf16", k: ArrayLike | None = None) -> F:
    """Useful fraction ``w`` of an ``m x n`` GEMM output under tile and wave quantization.

    ``w = max over the dtype's tiles T of batch m n / (ceil(tiles(T) / sms) sms T_m T_n)``,
    ``tiles(T) = batch ceil(m / T_m) ceil(n / T_n)``, ``T`` no wider than the matrix
    (``narrow_tile``); 1.0 when ``sms`` is 0 (unknown GPU); with ``k``, a GEMM of fewer tiles than
    SMs may split its ``k`` loop (``gemm_efficiency``).
    Example: 4096 x 4096 on 108 SMs with 256x128 tiles: 512 tiles, 5 waves, w = 512 / 540.
    """
    return gemm_efficiency(m, n, sms, batch, dtype, k)[0]


def split_k_bytes(m: ArrayLike, n: ArrayLike, batch: ArrayLike, splits: ArrayLike) -> F:
    """DRAM traffic of split-K's partial sums (fp32): written and read back,
    ``2 x 4 s batch m n`` when ``s > 1``, else 0."""
    s = _f(splits)
    return np.where(s > 1, 8.0 * s * _f(batch) * _f(m) * _f(n), 0.0)


def gemm_flops(m: ArrayLike, n: ArrayLike, k: ArrayLike, batch: ArrayLike = 1) -> F:
    """``F = 2 batch m n k``."""
    return 2.0 * _f(batch) * _f(m) * _f(n) * _f(k)


def roofline_slowdown(intensity: ArrayLike, rate_flops: float, mem_bps: float) -> F:
    """Time of a product over its time at ``R``: ``max(1, (R / M) / I)`` (1 above the ridge)."""
    return np.maximum(1.0, rate_flops / mem_bps / _f(intensity))


# ------------------------------------------------------------------- catalog fields of a GPU


DEFAULT_GEMM_MAX_FRACTION = 0.79
"""``eta`` of a GPU with an SM count but no published large-GEMM figure: the median of the
catalog's published BF16 fractions (stas00/ml-engineering, "Maximum Achievable Matmul FLOPS":
A100 0.869, H100/H200 0.803, B200 0.776, MI250X 0.768, MI300X 0.514), so that GPUs with and
without a measurement are compared on the same footing."""
DEFAULT_MEM_MAX_FRACTION = 0.88
"""Achievable DRAM fraction of a GPU with an SM count but no published figure: the one the
catalog has (A100 80 GB, 1.80 of 2.04 TB/s, NVIDIA developer forum thread 339083)."""
LIBRARY_LAUNCH_US = 5.0
"""Host time of one kernel a library launches from its own C++ loop (cuDNN's RNN steps): the
CUDA runtime's launch call alone, no eager dispatch. The low end of the 5-20 µs CPU-side launch
time that Holistic Trace Analysis documents as usual (facebookresearch/HolisticTraceAnalysis,
docs "CUDA Kernel Launch Statistics"): a library's loop makes the runtime call and nothing else."""


def gemm_max_fraction(gpu: Any, dtype: str) -> float | None:
    """The GPU's achievable large-GEMM fraction ``eta`` for ``dtype`` (``GPU.gemm_fraction`` of
    the dtype the job runs at); ``None`` when the GPU has no figure (callers then use
    ``DEFAULT_GEMM_MAX_FRACTION`` for a GPU in the kernel model)."""
    value = float(gpu.gemm_fraction(dtype))
    return value if value > 0 else None


def gpu_sms(gpu: Any) -> float:
    """Streaming multiprocessors (catalog ``sms``), 0 when unknown."""
    return float(getattr(gpu, "sms", 0) or 0)


def has_matrix_units(gpu: Any, dtype: str) -> bool:
    """Whether the GPU computes catalog dtype ``dtype`` on matrix units (Tensor Cores, Matrix
    Cores): ``tf32``/``fp8`` when their peak is above 0 (``MATRIX_ONLY_DTYPES``); ``fp16``/``bf16``
    when their peak exceeds ``MATRIX_UNIT_RATIO`` (3) times the fp32 vector peak, more than
    packed vector ALUs reach (a P100's fp16 is 2x its fp32: no Tensor Cores); never ``fp32``."""
    peak = float(getattr(gpu, f"{dtype}_tflops", 0.0) or 0.0)
    if dtype in MATRIX_ONLY_DTYPES:
        return peak > 0
    if dtype in TENSOR_CORE_DTYPES:
        return peak > MATRIX_UNIT_RATIO * float(getattr(gpu, "fp32_tflops", 0.0) or 0.0)
    return False


# --------------------------------------------------- GEMM shapes of the ops of a profile table

BIAS_FIRST = frozenset({"addmm", "_addmm_activation", "baddbmm"})  # (bias, A, B) arguments


def _is_conv(name: str, backward: bool | None = None) -> bool:
    """A convolution by the op registry (``features.ops``); ``backward`` narrows it."""
    if op_family(name) != "conv":
        return False
    return backward is None or backward == ("backward" in name)


def _gemm_of_matrices(a: list[int], b: list[int]) -> tuple[float, float, float, float]:
    """``(m, n, k, batch)`` of ``A[..., m, k] @ B[..., k, n]``; batch = product of A's leading
    dimensions (a 2-D B is shared by all of them)."""
    batch = float(math.prod(a[:-2])) if len(a) > 2 else 1.0
    return float(a[-2]), float(b[-1]), float(a[-1]), batch


def _conv_groups(x: list[int], w: list[int]) -> float:
    """Groups of a convolution from its input ``x`` and weight ``w = C_out x C_in / groups x
    k_h x k_w``: ``max(1, C_in / w[1])`` (``conv_channels_per_group`` also checks that it is a
    whole number dividing ``C_out``)."""
    return max(1.0, float(x[1]) / float(w[1]))


def _conv_products(name: str, dims: list[list[int]],
                   flops: float) -> list[tuple[float, float, float, float]]:
    """Implicit-GEMM products of a convolution (forward) or its backward (module docstring)."""
    if _is_conv(name, backward=False):
        w = dims[1]
        n, k = float(w[0]), float(math.prod(w[1:]))
        return [(flops / (2.0 * n * k), n, k, 1.0)] if n * k > 0 else []
    g_out, x, w = dims[0], dims[1], dims[2]
    cout, k_w = float(w[0]), float(math.prod(w[1:]))          # k_w = C_in kh kw / groups
    m_out = float(math.prod(g_out)) / cout                     # N H_o W_o
    fwd = 2.0 * m_out * cout * k_w
    if fwd <= 0:
        return []
    wgrad = (cout, k_w, m_out, 1.0)
    if round(flops / fwd) < 2:                                  # weight gradient only
        return [wgrad]
    groups = _conv_groups(x, w)
    dgrad = (m_out, float(x[1]), cout / groups * float(math.prod(w[2:])), 1.0)
    return [dgrad, wgrad]


def op_gemm_products(op: str, shapes: str, flops: float) -> list[tuple[float, float, float, float]]:
    """``(m, n, k, batch)`` of each GEMM an op of the per-op table runs, from its recorded input
    shapes (``"64x512;512x1024"``): ``mm``/``matmul`` (A, B), ``addmm``/``baddbmm`` (bias, A,
    B), ``bmm`` (A, B), ``_grouped_mm`` (A, B: a mixture of experts' groups priced as one
    product of their rows, ``G`` products when both are 3-D), convolutions and their backward
    (implicit GEMM, module docstring; ``m`` of a forward from its FLOPs, so stride and padding
    need not be known), attention kernels (:func:`_attention_products`: two products per head
    forward, five backward). ``[]`` when the op runs no GEMM or its shapes are not recorded."""
    name = op.removeprefix("aten::")
    try:
        dims = parse_shapes(shapes) if shapes else []
        family = op_family(name)
        if family == "gemm" and dims:
            a, b = (dims[1], dims[2]) if name in BIAS_FIRST else (dims[0], dims[1])
            if name in GROUPED_MM and len(b) == 2:  # groups split a dimension: one product
                a = a[-2:]
            return [_gemm_of_matrices(a, b)] if len(a) >= 2 and len(b) >= 2 else []
        if family == "conv" and dims:
            return _conv_products(name, dims, flops)
        if family == "attention" and dims and len(dims[0]) == 4:
            return _attention_products(name, dims)
    except (IndexError, ValueError, ZeroDivisionError):
        return []
    return []


def _attention_products(name: str, dims: list[list[int]]
                        ) -> list[tuple[float, float, float, float]]:
    """The products of a fused attention kernel, as torch's FLOP counter counts them
    (``sdpa_flop_count``, ``sdpa_backward_flop_count``), per batch and head: forward the scores
    ``Q K^T`` (``s_q x s_k x d``) and the output ``P V`` (``s_q x d_v x s_k``), ``4 s_q s_k d``
    FLOPs for ``d_v = d``; backward the scores again, ``dP = dO V^T`` (``s_q x s_k x d_v``),
    ``dV = P^T dO`` (``s_k x d_v x s_q``), ``dK = dS^T Q`` (``s_k x d x s_q``) and ``dQ = dS K``
    (``s_q x d x s_k``), ``10 s_q s_k d``. Inputs: ``_scaled_dot_product_*`` ops record
    ``B x H x S x D`` tensors (query, key, value; the backward's grad_out first), the lower-level
    ``_flash_attention_*`` and ``_efficient_attention_*`` ``B x S x H x D``."""
    backward = name.endswith("_backward")
    first = 1 if backward else 0  # the query (the backward's grad_out has its shape too)
    bshd = name.startswith(("_flash_attention", "_efficient_attention"))

    def bhsd(i: int) -> tuple[float, float, float, float]:
        shape = dims[i] if i < len(dims) and len(dims[i]) == 4 else dims[first]
        b, x, y, d = (float(v) for v in shape)
        return (b, y, x, d) if bshd else (b, x, y, d)

    bsz, heads, sq, d = bhsd(first)
    sk, dv = bhsd(first + 1)[2], bhsd(first + 2)[3]
    bh = bsz * heads
    if not backward:
        return [(sq, sk, d, bh), (sq, dv, sk, bh)]
    return [(sq, sk, d, bh), (sq, sk, dv, bh), (sk, dv, sq, bh), (sk, d, sq, bh),
            (sq, d, sk, bh)]


REREAD_INPUTS: dict[str, tuple[int, ...]] = {
    "native_batch_norm": (0,), "_native_batch_norm_legit": (0,), "cudnn_batch_norm": (0,),
    "native_batch_norm_backward": (0, 1), "cudnn_batch_norm_backward": (0, 1)}
"""Ops whose GPU kernels read some inputs twice (index into the row's ``shapes``): training-mode
batch norm computes the batch statistics in one pass over ``x`` and normalizes in a second
(ATen ``Normalization.cuh``: ``batch_norm_collect_statistics_kernel`` then
``batch_norm_transform_input_kernel``); its backward reduces ``dy`` and ``x`` per channel
(``batch_norm_backward_reduce_kernel``) before the element-wise pass that reads them again
(``batch_norm_backward_elemt_kernel``)."""


def reread_bytes(ops: Sequence[Mapping[str, Any]]) -> F:
    """Per op: DRAM bytes of the extra passes of ``REREAD_INPUTS`` ops, ``sum_i |input_i| s``
    (elements of the listed input shapes times the row's bytes per element, ``ITEMSIZE`` of its
    torch dtype, 4 for one it does not list); 0 for other ops or rows without shapes."""
    out = np.zeros(len(ops))
    for i, o in enumerate(ops):
        idx = REREAD_INPUTS.get(str(o.get("op", "")).removeprefix("aten::"))
        if not idx or not o.get("shapes"):
            continue
        dims = parse_shapes(str(o["shapes"]))
        size = ITEMSIZE.get(str(o.get("dtype", "float32")), 4)
        out[i] = size * sum(float(math.prod(dims[j])) for j in idx if j < len(dims) and dims[j])
    return out


def conv_channels_per_group(op: Mapping[str, Any]) -> tuple[float, float, float] | None:
    """``(groups, C_in / groups, C_out / groups)`` of a convolution row from its recorded shapes
    (forward ``x; w``, backward ``grad_out; x; w``; ``w = C_out x C_in / groups x k_h x k_w``,
    so ``groups = C_in / w[1]``); None for other rows, rows without shapes, and shapes that are
    no grouped convolution's: ``groups`` not a whole number dividing ``C_out`` (a transposed
    convolution's weight is ``C_in x C_out / groups x ...``: 64 -> 3 channels gives
    ``64 / 3``)."""
    name = str(op.get("op", "")).removeprefix("aten::")
    if not _is_conv(name) or not op.get("shapes"):
        return None
    try:
        dims = parse_shapes(str(op["shapes"]))
        x, w = (dims[1], dims[2]) if _is_conv(name, backward=True) else (dims[0], dims[1])
        groups = _conv_groups(x, w)
        if groups != round(groups) or float(w[0]) % groups:
            return None
        return groups, float(w[1]), float(w[0]) / groups
    except (IndexError, ValueError, ZeroDivisionError):
        return None


def narrow_group_convs(ops: Sequence[Mapping[str, Any]]) -> NDArray[np.bool_]:
    """Per op: a grouped convolution (groups > 1) with fewer than ``MMA_MIN_CHANNELS`` input or
    output channels per group (a depthwise one: 1), which runs on the vector units, not on
    tensor cores."""
    out = np.zeros(len(ops), dtype=bool)
    for i, o in enumerate(ops):
        g = conv_channels_per_group(o)
        out[i] = g is not None and g[0] > 1 and min(g[1], g[2]) < MMA_MIN_CHANNELS
    return out


def operand_scale(ops: Sequence[Mapping[str, Any]], dtypes: Sequence[str]) -> F:
    """Per op: bytes per element of the dtype its operands are cast to over those its row was
    recorded in, ``min(1, s_d / s_row)`` (``DTYPE_BYTES`` of the catalog dtype ``dtypes[i]``,
    ``ITEMSIZE`` of the row's torch dtype), for the compute-bound families (``gemm``, ``conv``,
    ``attention``, ``recurrent``: the ops autocast runs in 16 bits, PyTorch AMP docs, "CUDA Ops
    that can autocast to float16"); 1 for other rows and for rows that record no dtype. An fp32
    profile priced for ``--amp``: its convolutions and products read and write half the bytes it
    recorded."""
    out = np.ones(len(ops))
    for i, (o, d) in enumerate(zip(ops, dtypes, strict=True)):
        if "dtype" in o and \
                op_family(str(o.get("op", "")).removeprefix("aten::")) in COMPUTE_FAMILIES:
            row = ITEMSIZE.get(str(o.get("dtype", "float32")), 4)
            out[i] = min(1.0, DTYPE_BYTES.get(d, 4) / row)
    return out


def vendor_of(gpu: Any) -> str | None:
    """The GPU's vendor (``catalog.VENDORS``): ``nvidia`` unless its entry says otherwise,
    whose libraries' defaults the model then assumes (cuDNN's TF32 convolutions and NHWC
    transposes on ``nvidia`` only); None for an entry ``traincast calibrate`` measured on a
    CPU (``device = "cpu"``: no GPU library's defaults apply)."""
    if getattr(gpu, "device", "") == "cpu":
        return None
    return str(getattr(gpu, "vendor", "nvidia") or "nvidia")


TF32_COMPUTE_CAPABILITY = 8.0
"""The least CUDA compute capability with TF32 tensor cores (Ampere, NVIDIA A100 Tensor Core
GPU Architecture whitepaper, 2020: "TF32 ... new in A100")."""


def tf32_unpriced(gpu: Any) -> bool:
    """Whether an NVIDIA GPU entry of compute capability at least
    :data:`TF32_COMPUTE_CAPABILITY` gives no ``tf32_tflops``: the ops that ask for TF32 there
    (fp32 convolutions, which cuDNN runs as TF32 by default; products marked TF32,
    ``--tf32-matmul``) are then priced at the fp32 peak."""
    cc = _f(_field(gpu, "compute_capability"))
    return bool(vendor_of(gpu) == "nvidia" and cc >= TF32_COMPUTE_CAPABILITY
                and not has_matrix_units(gpu, "tf32"))


def tf32_absent(gpu: Any) -> bool:
    """Whether asking for TF32 products (``--tf32-matmul``) changes nothing on the GPU: its
    entry gives no TF32 peak (no TF32 matrix units, :func:`has_matrix_units`) and it is not an
    NVIDIA GPU of compute capability :data:`TF32_COMPUTE_CAPABILITY` or later whose entry only
    lacks the figure (:func:`tf32_unpriced`). PyTorch ignores ``allow_tf32`` there: its fp32
    products run at the fp32 peak."""
    return not has_matrix_units(gpu, "tf32") and not tf32_unpriced(gpu)


def layout_transpose_bytes(ops: Sequence[Mapping[str, Any]], dtypes: Sequence[str],
                           gpu: Any = None, *, scale: ArrayLike | None = None,
                           narrow: ArrayLike | None = None) -> F:
    """Per op: DRAM bytes of the layout transposes around a tensor-core convolution kept in
    PyTorch's default NCHW (contiguous) memory format. Tensor-core convolutions run in NHWC, so
    cuDNN transposes every operand to NHWC before the kernel and the result back after it (NVIDIA,
    "Tensor Core AI performance milestones" blog and its NCHW/NHWC diagram, as reproduced in
    MosaicML Composer's "Channels Last" method card; cuDNN Developer Guide, "Tensor Core
    operations": cuDNN "may use padding, folding, and NCHW-to-NHWC transformations to call the
    Tensor Core operations"): each tensor the op reads or writes is read and written once more,
    in the dtype the tensor cores take,

        B_t = 2 (B_read + B_written) min(1, s_d / s_row)

    (``operand_scale``: an fp32 row priced in fp16 moves 2-byte elements), for a conv-family op
    (forward or backward) whose catalog dtype ``d`` runs on matrix units (``has_matrix_units`` of
    ``gpu``; without ``gpu``, ``d`` in ``TENSOR_CORE_DTYPES``). 0 for other ops, for convolutions
    on CUDA cores (fp32; a GPU without tensor cores, such as a P100 in fp16), for depthwise and
    other narrow-group convolutions (``narrow_group_convs``: PyTorch's own NCHW kernels), for
    a row marked ``layout = "nhwc"`` (a model in ``torch.channels_last``), and on a GPU whose
    ``vendor`` is not ``nvidia`` (the transposes are cuDNN's; AMD's Composable Kernel, behind
    MIOpen, has convolution kernels in NCHW as in NHWC, ``ck::tensor_layout::convolution``, and
    no measurement here says MIOpen transposes). ``scale`` and
    ``narrow``: ``operand_scale`` and ``narrow_group_convs`` of the ops when the caller has them
    (the same values; each is a pass over the table)."""
    out = np.zeros(len(ops))
    if gpu is not None and vendor_of(gpu) != "nvidia":
        return out
    scale = operand_scale(ops, dtypes) if scale is None else _f(scale)
    narrow = narrow_group_convs(ops) if narrow is None else np.asarray(narrow, dtype=bool)
    units = {d: has_matrix_units(gpu, d) if gpu is not None else d in TENSOR_CORE_DTYPES
             for d in set(dtypes)}
    for i, (o, d) in enumerate(zip(ops, dtypes, strict=True)):
        if not units[d] or narrow[i]:
            continue
        name = str(o.get("op", "")).removeprefix("aten::")
        if _is_conv(name) \
                and str(o.get("layout", "nchw")).lower() not in ("nhwc", "channels_last"):
            out[i] = 2.0 * scale[i] * (float(o.get("bytes_read", 0.0))
                                       + float(o.get("bytes_written", 0.0)))
    return out


@functools.lru_cache(maxsize=1)
def alignment_table() -> tuple[float, dict[int, float]]:
    """``(min_compute_capability, {alignment bytes: slowdown})`` of the shipped
    ``hardware/alignment.toml`` (each figure with its source there)."""
    raw = tomllib.loads(resources.files("traincast.hardware").joinpath("alignment.toml")
                        .read_text())
    return float(raw["min_compute_capability"]), {int(k): float(v)
                                                  for k, v in raw["slowdown"].items()}


def size_alignment(size: ArrayLike, most: int) -> F:
    """The largest power of two (at most ``most``) dividing each size: 12 -> 4, 50257 -> 1."""
    size = np.asarray(size, dtype=np.float64)
    out = np.ones_like(size)
    a = 2
    while a <= most:
        out = np.where(np.mod(size, a) == 0, float(a), out)
        a *= 2
    return out


def alignment_slowdown(m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: str,
                       compute_capability: float) -> F:
    """FLOP-time factor of a tensor-core product whose sizes are not 16-byte multiples
    (``hardware/alignment.toml``)::

        a = min(align(m), align(n), align(k)) * bytes(dtype)   (align: the largest power of two
                                                                 dividing the size, <= 16 / bytes)
        slowdown = table[a]        (16 bytes: 1; 2 bytes, an odd size of a 16-bit product: 6.52;
                                    below the table's narrowest class, the narrowest's)

    1 for a dtype off the tensor cores (fp32 SIMT) and on a GPU below the table's compute
    capability (not measured there)."""
    least, table = alignment_table()
    shape = np.broadcast(_f(m), _f(n), _f(k)).shape
    if dtype not in TENSOR_CORE_DTYPES or compute_capability < least:
        return np.ones(shape)
    width = DTYPE_BYTES[dtype]
    most = max(1, 16 // width)
    a = np.minimum(np.minimum(size_alignment(m, most), size_alignment(n, most)),
                   size_alignment(k, most)) * width
    keys = np.array(sorted(table), dtype=np.float64)
    values = np.array([table[int(b)] for b in keys], dtype=np.float64)
    # the class at or below a: an alignment narrower than the table's narrowest (an odd fp8
    # size, 1 byte) takes the narrowest's slowdown
    at = np.clip(np.searchsorted(keys, a, side="right") - 1, 0, len(keys) - 1)
    return values[at]


def ops_gemm_table(ops: Sequence[Mapping[str, Any]]) -> dict[str, NDArray[Any]]:
    """All GEMM products of a per-op table as columns ``row`` (the op's index), ``m``, ``n``,
    ``k``, ``batch``, ``share`` (the product's part of its op's FLOPs: ``F_p / sum F_p``)."""
    rows: list[tuple[int, float, float, float, float]] = []
    for i, o in enumerate(ops):
        if float(o.get("flops", 0.0)) > 0:
            rows += [(i, *p) for p in op_gemm_products(str(o["op"]), str(o.get("shapes", "")),
                                                       float(o.get("flops", 0.0)))]
    arr = np.array(rows, dtype=np.float64).reshape(-1, 5)
    row = arr[:, 0].astype(np.int64)
    f = gemm_flops(arr[:, 1], arr[:, 2], arr[:, 3], arr[:, 4])
    total = np.bincount(row, weights=f, minlength=len(ops))
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total[row] > 0, f / total[row], 0.0)
    return {"row": row, "m": arr[:, 1], "n": arr[:, 2], "k": arr[:, 3], "batch": arr[:, 4],
            "share": share}


def op_families(names: Sequence[str]) -> NDArray[np.str_]:
    """Each op name's family (``traincast.features.ops.op_family`` of it without ``aten::``),
    one lookup per distinct name."""
    unique, inverse = np.unique(np.array(names, dtype=str), return_inverse=True)
    return np.array([op_family(n.removeprefix("aten::")) for n in unique],
                    dtype=str)[inverse].reshape(len(names))


def products_slowdown(ops: Sequence[Mapping[str, Any]], dtypes: Sequence[str],
                      compute_capability: float = 0.0) -> tuple[dict[str, NDArray[Any]], F]:
    """The GEMM products of a per-op table (:func:`ops_gemm_table`) with each one's catalog
    dtype (``dtype``: its op's of ``dtypes``) and :func:`alignment_slowdown` ``u`` on a GPU of
    ``compute_capability``: matrix products only (family ``gemm``); 1 for a convolution's
    (cuDNN pads narrow channels) and a fused attention's (it masks its own tiles), neither
    measured misaligned."""
    g = ops_gemm_table(ops)
    g["dtype"] = (np.asarray(dtypes, dtype=object)[g["row"]] if len(g["row"])
                  else np.zeros(0, dtype=object))
    gemm = ((op_families([str(o["op"]) for o in ops]) == "gemm")[g["row"]] if len(g["row"])
            else np.zeros(0, dtype=bool))
    u = np.ones(len(g["row"]))
    for d in set(g["dtype"].tolist()):
        sel = g["dtype"] == d
        u[sel] = alignment_slowdown(g["m"][sel], g["n"][sel], g["k"][sel], str(d),
                                    compute_capability)
    return g, np.where(gemm, u, 1.0)


def ops_gemm_efficiency(ops: Sequence[Mapping[str, Any]], sms: float,
                        dtypes: Sequence[str],
                        compute_capability: float = 0.0) -> tuple[F, F]:
    """Per op: the effective ``w`` of its GEMM products, ``1 / sum_p (share_p u_p / w_p)``
    (FLOP time at ``R`` over its FLOP time at ``R w``; 1.0 for ops without a recorded GEMM
    shape, charged at the large-GEMM rate; ``u_p`` the product's slowdown when misaligned,
    :func:`products_slowdown`), and the split-K partial-sum bytes of its products
    (``split_k_bytes``). ``dtypes``: the catalog dtype of each op (selects the tiles)."""
    g, u = products_slowdown(ops, dtypes, compute_capability)
    inv, extra = np.zeros(len(ops)), np.zeros(len(ops))
    for d in set(g["dtype"].tolist()):
        sel = g["dtype"] == d
        m, n, k, b = g["m"][sel], g["n"][sel], g["k"][sel], g["batch"][sel]
        w, splits = gemm_efficiency(m, n, sms, b, str(d), k)
        inv += np.bincount(g["row"][sel], weights=g["share"][sel] * u[sel] / w,
                           minlength=len(ops))
        extra += np.bincount(g["row"][sel], weights=split_k_bytes(m, n, b, splits),
                             minlength=len(ops))
    return np.where(inv > 0, 1.0 / np.where(inv > 0, inv, 1.0), 1.0), extra


# ------------------------------------------------- the measured-kernel model (fitted parameters)
#
# Fitted to measured single-op latencies (``traincast calibrate --kernels DIR``; the shipped fit
# is ``hardware/kernel_model.toml``), with per-GPU inputs that are catalog fields only, so a GPU
# without measurements is priced from its datasheet. Formulas (docs/model.md, "Kernel model"):
#
#   sustained   c = min(1, p / p_0),  p = power_w / (sms cores_per_sm f_boost[GHz] node_nm)
#   clock       f = f_boost c                                    (Hz the SMs sustain)
#   SM rate     R_sm = 2 cores_per_sm f e                        (FLOP/s per SM, fp32)
#   issue       h = 32 / (cores_per_sm / sm_partitions)          (cycles a warp's FFMA holds
#               its partition's lanes per issue slot: 2 on 16-lane partitions, 1 on 32-lane)
#   tile T      e_T = h / max(h, 1 + c_issue (T_m + T_n) / (T_m T_n))   (a partition issues one
#               instruction per clock: the tile's operand loads per FFMA, c_issue (T_m + T_n) /
#               (T_m T_n), fill the free issue slots before they slow the FFMAs)
#   split-K     s = min(floor(S / tiles), floor(k / 8), floor(s_max)) when batch = 1,
#               tiles < S
#   rounds      X_T = ceil(tiles_T s / S)                        (one tile per SM at a time)
#   t_T         max(X_T (C / f + 2 T_m T_n (k / s) / (R_sm e_T)),
#                   tiles_T s (T_m + T_n) (k / s) 4 / (M sqrt(S)),
#                   (4 b (m k + k n + m n) + [s > 1] 8 s b m n) / M)
#   t_gemm      rho (o + min over SIMT_CANDIDATE_TILES of t_T)   (rho = choice_linear or
#               choice_bmm: what the library's own pick costs over the fastest candidate;
#               a measured row with a kernel name: o + t_T of the tile it ran, the fit only)
#   memory      t = B / (M f_family)                             (elementwise, softmax, norm)
#   one op      t_op = max(d r_x, t_kernel) timed alone, back to back (d: the host's floor, r_x:
#               its op kind's dispatch ratio); in a step, the host queue (queue_idle_s)

SIMT_CANDIDATE_TILES: tuple[tuple[int, int], ...] = ((128, 128), (128, 64), (64, 128), (64, 64))
"""Output tiles of the fp32 SIMT SGEMM kernels that run products of more than a few thousand
FLOPs in the measurements (cuBLAS kernel names: ``ampere_sgemm_128x128``, ``maxwell_sgemm_
128x64``, ``volta_sgemm_64x64``; 99.6% of the batched products ran 128x128 on an A100 and
128x64 on a P100 or P4, whatever their size, the rest small ones). A tile computes all of its
``T_m x T_n`` outputs even where the matrix is narrower (no narrowing); the model takes the
fastest tile by its own cost, times ``rho`` (``simt_gemm_time_s``)."""
MEMORY_FAMILIES = ("elementwise", "softmax", "norm")
"""Memory-bound kernel families with their own fitted bandwidth fraction (``op_memory_family``)."""


def power_w_per_lane_ghz_nm(power_w: ArrayLike, sms: ArrayLike, cores_per_sm: ArrayLike,
                            boost_mhz: ArrayLike, node_nm: ArrayLike) -> F:
    """``p = power_w / (sms cores_per_sm f_boost[GHz] node_nm)``: the board's power per FP32
    lane-GHz, per nm of process (switching energy scales with feature size); ``inf`` where a
    field is unknown (0)."""
    denom = _f(sms) * _f(cores_per_sm) * _f(boost_mhz) * 1e-3 * _f(node_nm)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denom > 0, _f(power_w) / np.where(denom > 0, denom, 1.0), np.inf)


CLOCK_FIELDS = ("power_w", "sms", "fp32_cores_per_sm", "boost_clock_mhz", "process_nm")
"""The catalog fields of the sustained clock (``power_w_per_lane_ghz_nm``)."""


def unthrottled_by(gpu: Any) -> list[str]:
    """The clock fields a GPU entry that the SIMT model prices (``fp32_cores_per_sm`` and
    ``boost_clock_mhz`` given) lacks, for which its fp32 runs at the boost clock, not held to
    its power limit (``sustained_clock_fraction``: 1 for an unknown field); empty otherwise."""
    if not (_f(_field(gpu, "fp32_cores_per_sm")) > 0 and _f(_field(gpu, "boost_clock_mhz")) > 0):
        return []
    return [k for k in ("power_w", "sms", "process_nm") if not _f(_field(gpu, k)) > 0]


def sustained_clock_fraction(power_w: ArrayLike, sms: ArrayLike, cores_per_sm: ArrayLike,
                             boost_mhz: ArrayLike, node_nm: ArrayLike, p0: float) -> F:
    """Fraction of the boost clock a power-limited GPU sustains under full FP32 load:
    ``c = min(1, p / p_0)``, ``p`` = ``power_w_per_lane_ghz_nm``. Dynamic power is
    ``P ~ C V^2 f``; at the voltage floor a capped card trades clock for power one for one,
    hence the exponent 1.
    A GPU with an unknown field (0) is taken as unthrottled (1)."""
    p = power_w_per_lane_ghz_nm(power_w, sms, cores_per_sm, boost_mhz, node_nm)
    return np.where(_f(power_w) > 0, np.minimum(1.0, p / p0), 1.0)


WARP_LANES = 32
"""Threads of a warp: one instruction of a warp drives 32 lanes (CUDA C Programming Guide,
"SIMT Architecture")."""
DEFAULT_SM_PARTITIONS = 4
"""Processing blocks (warp schedulers, each issuing one instruction per clock) per SM of an
entry without ``sm_partitions``: four on every NVIDIA SM since Maxwell except GP100 (NVIDIA
whitepapers: Maxwell GM204, Pascal GP104, Volta V100, Turing, Ampere GA100 and GA102, Ada, Hopper
H100: "partitioned into four processing blocks"; GP100 "two processing blocks", the P100 entries
say so), four on Kepler's SMX ("four warp schedulers", GK110 whitepaper) and four SIMD units per
AMD CDNA compute unit (CDNA 2 whitepaper)."""


def issue_ratio(cores_per_sm: ArrayLike, sm_partitions: ArrayLike) -> F:
    """``h = 32 / (cores_per_sm / sm_partitions)``: issue slots per warp FFMA on a partition of
    ``cores_per_sm / sm_partitions`` FP32 lanes (a warp's FFMA holds 16 lanes two clocks, 32
    lanes one, while its scheduler issues one instruction per clock; ``sm_partitions`` 0 =
    ``DEFAULT_SM_PARTITIONS``). V100, T4, A100: 64 / 4 = 16 lanes, h = 2; P100: 64 / 2 = 32,
    h = 1; GA10x, Ada, Hopper, GP104: 128 / 4 = 32, h = 1; Kepler: 192 / 4 = 48, h = 2/3."""
    parts = np.where(_f(sm_partitions) > 0, _f(sm_partitions), float(DEFAULT_SM_PARTITIONS))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(_f(cores_per_sm) > 0, WARP_LANES * parts / _f(cores_per_sm), 1.0)


def tile_issue_efficiency(tm: ArrayLike, tn: ArrayLike, issue: ArrayLike, c_issue: float) -> F:
    """``e_T = h / max(h, 1 + c_issue (T_m + T_n) / (T_m T_n))``: the share of its FFMA rate a
    ``T_m x T_n`` tile keeps when each FFMA brings ``c_issue (T_m + T_n) / (T_m T_n)`` other
    instructions (operand loads from shared memory, addresses: a tile loads ``T_m + T_n``
    values per ``T_m T_n`` FMAs) and the partition issues one instruction per clock; ``h`` =
    ``issue_ratio``: with ``h = 2`` up to one other instruction per FFMA issues in the FFMA's
    second clock, free."""
    tm, tn, h = _f(tm), _f(tn), _f(issue)
    return h / np.maximum(h, 1.0 + c_issue * (tm + tn) / (tm * tn))


def _simt_tile_time_s(tm: ArrayLike, tn: ArrayLike, m: F, n: F, k: F, b: F, sms_: F,
                      sm_rate: F, fixed_s: F, issue: F, mbw: F, dram_s: F,
                      params: Mapping[str, float], itemsize: float) -> F:
    """Time of a (batched) SIMT GEMM run with ``T_m x T_n`` tiles (``simt_gemm_time_s``'s
    formulas, without the fixed cost ``o``)."""
    tm, tn = _f(tm), _f(tn)
    tiles = b * np.ceil(m / tm) * np.ceil(n / tn)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.minimum(np.minimum(np.floor(sms_ / tiles), np.floor(k / TILE_K["fp32"])),
                       math.floor(params["max_split_k"]))
    s = np.where((tiles < sms_) & (b == 1), np.maximum(s, 1.0), 1.0)
    eff = tile_issue_efficiency(tm, tn, issue, params["c_issue"])
    rounds = np.ceil(tiles * s / sms_)
    t_sm = rounds * (fixed_s + 2.0 * tm * tn * (k / s) / (sm_rate * eff))
    t_tile = tiles * (tm + tn) * k * itemsize / (mbw * np.sqrt(sms_))
    t_dram = dram_s + split_k_bytes(m, n, b, s) / mbw
    return np.maximum(np.maximum(t_sm, t_tile), t_dram)


def simt_gemm_time_s(m: ArrayLike, n: ArrayLike, k: ArrayLike, batch: ArrayLike,
                     sms: ArrayLike, issue: ArrayLike, rate_flops: ArrayLike,
                     clock_hz: ArrayLike, mem_bps: ArrayLike, params: Mapping[str, float],
                     itemsize: float = 4.0, with_tile: bool = False,
                     ran_tile: tuple[ArrayLike, ArrayLike] | None = None,
                     choice: ArrayLike = 1.0) -> F | tuple[F, NDArray[np.int64]]:
    """Kernel time of a (batched) fp32 SIMT GEMM ``C[m x n] = A[m x k] B[k x n]`` without the
    op's floor (module section formulas): ``o`` plus the fastest of ``SIMT_CANDIDATE_TILES``,
    each tile run one at a time per SM, at the SM's rate, plus its fixed cost.

    ``sms`` = ``S``, ``issue`` = ``h``, the issue slots per warp FFMA (``issue_ratio`` of the
    FP32 lanes and partitions per SM; ``tile_issue_efficiency``), ``rate_flops`` = the GPU's
    sustained FP32 rate ``R = S R_sm`` (``simt_rate_flops``),
    ``clock_hz`` = its sustained clock ``f`` (``simt_clock_hz``), ``mem_bps`` = DRAM bandwidth
    ``M`` (datasheet); ``params``: ``c_issue``, ``tile_cycles`` (C), ``max_split_k``,
    ``gemm_fixed_us`` (o). The tile-traffic term reads each tile's panels from DRAM once per
    wave of ``S`` tiles laid out as a ``sqrt(S) x sqrt(S)`` block (panel reuse ``sqrt(S)``).
    ``ran_tile`` = ``(T_m, T_n)`` per row: the tile the library ran (a measured row's kernel
    name, ``kernel_fit.ran_tiles``), priced instead of the fastest candidate where ``T_m > 0``.
    Elsewhere the fastest candidate's time is multiplied by ``choice`` = ``rho``, what the
    library's own pick costs over the fastest candidate (``choice_linear``, ``choice_bmm``:
    module section, fitted). With ``with_tile`` also the index of the candidate taken (-1 where
    ``ran_tile`` was used)."""
    m, n, k, b = _f(m), _f(n), _f(k), _f(batch)
    sms_, rate, clock, mbw = _f(sms), _f(rate_flops), _f(clock_hz), _f(mem_bps)
    shape = np.broadcast(m, n, k, b, sms_, rate, clock, mbw).shape
    best = np.full(shape, np.inf)
    tile = np.zeros(shape, dtype=np.int64)
    fixed_s = params["tile_cycles"] / clock
    with np.errstate(divide="ignore", invalid="ignore"):
        sm_rate = rate / sms_
        dram_s = (itemsize * b * (m * k + k * n + m * n)) / mbw
    args = (m, n, k, b, sms_, sm_rate, fixed_s, _f(issue), mbw, dram_s, params, itemsize)
    for i, (tm, tn) in enumerate(SIMT_CANDIDATE_TILES):
        t = _simt_tile_time_s(tm, tn, *args)
        tile = np.where(t < best, i, tile)
        best = np.minimum(best, t)
    best = (best + params["gemm_fixed_us"] * 1e-6) * _f(choice)
    if ran_tile is not None:
        tm_r, tn_r = (np.broadcast_to(_f(x), shape) for x in ran_tile)
        known = tm_r > 0
        if known.any():
            own = _simt_tile_time_s(np.where(known, tm_r, 1.0), np.where(known, tn_r, 1.0),
                                    *args) + params["gemm_fixed_us"] * 1e-6
            best = np.where(known, own, best)
            tile = np.where(known, -1, tile)
    return (best, tile) if with_tile else best


def winograd_conv_time_s(n_img: ArrayLike, hw: ArrayLike, c_in: ArrayLike, c_out: ArrayLike,
                         sms: ArrayLike, issue: ArrayLike, rate_flops: ArrayLike,
                         clock_hz: ArrayLike, mem_bps: ArrayLike,
                         params: Mapping[str, float]) -> F:
    """A 3x3, stride-1 convolution by non-fused Winograd F(4x4, 3x3) (cuDNN's
    ``winograd_nonfused``: input, filter and output transforms around 36 batched products;
    Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", CVPR 2016):
    ``T = N ceil(H/4) ceil(W/4)`` tiles, products ``36 x [T x C_in] [C_in x C_out]``
    (``simt_gemm_time_s``), transforms moving ``4 (N C_in H W + 36 T C_in + 45 C_out C_in +
    36 T C_out + N C_out H W)`` bytes at ``M f_elementwise``, and 3 more kernels
    (``extra_kernel_us`` each). ``hw``: the square image side H = W."""
    n_img, hw, c_in, c_out = _f(n_img), _f(hw), _f(c_in), _f(c_out)
    t = n_img * np.ceil(hw / 4.0) ** 2
    gemm = simt_gemm_time_s(t, c_out, c_in, 36.0, sms, issue, rate_flops, clock_hz,
                            mem_bps, params)
    moved = 4.0 * (n_img * c_in * hw * hw + 36.0 * t * c_in + 45.0 * c_out * c_in
                   + 36.0 * t * c_out + n_img * c_out * hw * hw)
    return gemm + moved / (_f(mem_bps) * params["f_elementwise"]) \
        + 3.0 * params["extra_kernel_us"] * 1e-6


def memory_kernel_time_s(bytes_moved: ArrayLike, mem_bps: ArrayLike, fraction: ArrayLike) -> F:
    """A memory-bound kernel without the per-op floor: ``B / (M f)``, ``f`` = the fitted
    bandwidth fraction of its family (``MEMORY_FAMILIES``)."""
    return _f(bytes_moved) / (_f(mem_bps) * _f(fraction))


GEMM_KEYS = ("simt_efficiency", "power_ref", "c_issue", "tile_cycles", "max_split_k",
             "gemm_fixed_us", "pre_launch")
"""Parameters of the SIMT GEMM kernel (:func:`simt_gemm_time_s`; ``pre_launch``: the share of a
library call's host dispatch spent before its kernel starts, for the fit's timing rule)."""
CHOICE_KEYS: dict[str, str] = {"linear": "choice_linear", "bmm": "choice_bmm"}
"""The library-choice factor ``rho`` of each product family (``linear``: one product,
``addmm``/``mm``/``linear``; ``bmm``: batched), fitted with the GEMM parameters and kept beside
them (1 where a fit gives none)."""


CHOICE_OPS: dict[str, str] = {"bmm": "bmm", "baddbmm": "bmm", "addmm": "linear",
                              "mm": "linear", "linear": "linear", "matmul": "linear"}
"""The aten products that are cuBLAS SGEMM calls, by ``rho`` family; any other product (a
fused attention, a convolution) takes no ``rho``."""


def library_choice(params: Mapping[str, float], ops: Sequence[str]) -> F:
    """``rho`` per product of the aten ops ``ops`` (``CHOICE_OPS``): ``choice_bmm`` or
    ``choice_linear``, 1 for another op or where the parameters have none
    (``simt_gemm_time_s``'s ``choice``). One lookup per distinct op."""
    if not len(ops):
        return np.zeros(0)
    unique, inverse = np.unique(np.asarray(ops, dtype=str), return_inverse=True)
    keys = [CHOICE_KEYS.get(CHOICE_OPS.get(u.removeprefix("aten::"), ""), "") for u in unique]
    return np.array([params.get(k, 1.0) if k else 1.0 for k in keys],
                    dtype=np.float64)[inverse]


CONV_KEYS = ("conv_efficiency", "extra_kernel_us")
"""Parameters of the convolution kernels."""
FITTED_KEYS = GEMM_KEYS + CONV_KEYS + tuple(f"f_{f}" for f in MEMORY_FAMILIES)
"""Parameters of the measured-kernel model (docs/model.md, "Kernel model")."""
PARAM_MEANINGS: dict[str, str] = {
    "simt_efficiency": "e: SIMT SGEMM FMA rate over the lanes' peak",
    "power_ref": "p0: W per lane-GHz-nm below which the boost clock is not held",
    "c_issue": "other instructions per FFMA of a tile, per (T_m + T_n) / (T_m T_n)",
    "tile_cycles": "C: a tile's fixed cost, SM cycles",
    "max_split_k": "s_max: most k-splits, floor(s_max)",
    "gemm_fixed_us": "o: a GEMM kernel's fixed device time, µs",
    "pre_launch": "phi: share of a library call's dispatch before its launch (the fit only)",
    "conv_efficiency": "implicit-GEMM convolution rate over R (the fit only)",
    "extra_kernel_us": "each extra kernel of a Winograd convolution, µs (the fit only)",
    "f_elementwise": "f: achieved fraction of mem_bw_gbs, element-wise kernels",
    "f_softmax": "f: achieved fraction of mem_bw_gbs, softmax",
    "f_norm": "f: achieved fraction of mem_bw_gbs, normalization",
    "choice_linear": "rho: the library's tile pick over the fastest candidate, one product",
    "choice_bmm": "rho: the same, batched products",
    "floor_us": "d: the host's time to issue the simplest op, µs (fitted: the median of its "
                "least-work binary element-wise rows; calibrate: a one-element add alone)",
}
"""What each fitted parameter of ``GPU.kernel`` is (``traincast hardware show``; docs/model.md,
"The measured-kernel model", has each with its formula and what it rests on). The
``dispatch_<kind>`` ratios ``r_x`` are one more row there."""


def fitted_params(gpu: Any) -> dict[str, float] | None:
    """The GPU's measured-kernel parameters (``GPU.kernel``: the shipped fit of
    ``hardware/kernel_model.toml``, with the GPU's own values over it), or None when some are
    missing or the entry lacks the datasheet fields the model needs (``sms``,
    ``fp32_cores_per_sm``, ``boost_clock_mhz``)."""
    params = dict(getattr(gpu, "kernel", {}) or {})
    if any(k not in params for k in FITTED_KEYS):
        return None
    if not all(float(getattr(gpu, f, 0) or 0) > 0
               for f in ("sms", "fp32_cores_per_sm", "boost_clock_mhz")):
        return None
    return params


def fitted_memory_fractions(params: Mapping[str, float]) -> dict[str, float]:
    """Per memory-bound family (``MEMORY_FAMILIES``): the fitted achieved fraction ``f`` of the
    datasheet ``mem_bw_gbs`` (``f_<family>`` of the kernel parameters), the rate at which the
    measured-kernel model runs that family's kernels: ``t = B / (M f)``. Empty unless every
    family has one."""
    keys = {fam: f"f_{fam}" for fam in MEMORY_FAMILIES}
    if not all(float(params.get(k, 0.0) or 0.0) > 0 for k in keys.values()):
        return {}
    return {fam: float(params[k]) for fam, k in keys.items()}


def memory_fractions(gpu: Any) -> dict[str, float]:
    """:func:`fitted_memory_fractions` of the GPU's kernel parameters (``GPU.kernel``); empty
    when the entry has a calibrated ``mem_efficiency`` below 1 (the user's own machine,
    measured, wins)."""
    if float(getattr(gpu, "mem_efficiency", 1.0)) < 1.0:
        return {}
    return fitted_memory_fractions(getattr(gpu, "kernel", {}) or {})


def _field(gpu: Any, name: str) -> F:
    """A datasheet field of a GPU entry (or of columns), 0 where unset."""
    value = getattr(gpu, name, None)
    return _f(0.0 if value is None else value)


def simt_clock_hz(gpu: Any, params: Mapping[str, float]) -> F:
    """Sustained SM clock ``f = f_boost c`` (Hz; ``c`` = ``sustained_clock_fraction`` of the
    entry's ``power_w`` and ``process_nm``). ``gpu``: anything with those attributes (a GPU
    entry, or columns)."""
    c = sustained_clock_fraction(*(_field(gpu, k) for k in CLOCK_FIELDS), params["power_ref"])
    return _field(gpu, "boost_clock_mhz") * 1e6 * c


def simt_rate_flops(gpu: Any, params: Mapping[str, float]) -> F:
    """Sustained fp32 GEMM rate ``R = 2 sms fp32_cores_per_sm f simt_efficiency`` (FLOP/s;
    ``f`` = ``simt_clock_hz``)."""
    return 2.0 * _field(gpu, "sms") * _field(gpu, "fp32_cores_per_sm") \
        * simt_clock_hz(gpu, params) * params["simt_efficiency"]


def simt_gemm_fraction(gpu: Any) -> float | None:
    """``eta`` of fp32 products on CUDA cores by the measured-kernel model, for the work the
    model does not price one by one (a job's aggregate fp32 FLOPs, fp32 convolutions on CUDA
    cores: GPUs without TF32, depthwise and narrow-group ones): a product too
    large for its tiles' fixed costs, waves and DRAM terms to count runs at
    ``R max_T e_T / rho``, over the fp32 peak ``P``: ``eta = min(1, R max_T e_T / (rho P))``
    (``simt_rate_flops``; ``e_T`` = ``tile_issue_efficiency`` of the candidate tiles;
    ``rho`` = ``choice_linear``). None without fitted parameters (``fitted_params``) or an fp32
    peak."""
    params = fitted_params(gpu)
    peak = float(getattr(gpu, "fp32_tflops", 0.0) or 0.0) * 1e12
    if params is None or peak <= 0:
        return None
    h = simt_issue_ratio(gpu)
    best = max(float(tile_issue_efficiency(tm, tn, h, params["c_issue"]))
               for tm, tn in SIMT_CANDIDATE_TILES)
    rate = float(simt_rate_flops(gpu, params)) * best / float(params.get("choice_linear", 1.0))
    return min(1.0, rate / peak)


def simt_issue_ratio(gpu: Any) -> F:
    """``h`` of a GPU entry (or columns): ``issue_ratio`` of its ``fp32_cores_per_sm`` and
    ``sm_partitions``."""
    return issue_ratio(_field(gpu, "fp32_cores_per_sm"), _field(gpu, "sm_partitions"))


def held_out_range(held_out: Mapping[str, Mapping[str, float]]) -> dict[str, list[float]]:
    """``[lowest, highest]`` of each error of a fit's leave-one-GPU-out check (``held_out`` of
    ``[kernel_model]``: GPU -> ``gemm_median``, ``memory_median``, ``sum``, ...) over the GPUs
    that have it: how far the model was off on a GPU it had not seen."""
    keys = sorted({k for row in held_out.values() for k in row})
    return {k: [min(v), max(v)] for k in keys
            if (v := [float(row[k]) for row in held_out.values() if k in row])}


def fit_trust(kernel_model: Mapping[str, Any], gpu_name: str) -> dict[str, Any]:
    """How far to trust the measured-kernel model on one GPU, from the fit's own record
    (``[kernel_model]`` of the catalog): ``measured`` (the GPU is in ``fitted_on``: its own
    errors are in-sample; ``own`` then gives them held out of the fit),
    ``calibrated`` (the catalog carries a host's measured dispatch, ``host_floor_us`` and
    ``host_dispatch_kinds`` from ``traincast calibrate`` on a CUDA machine), ``record`` (the
    table the errors come from: ``held_out``, each held-out GPU priced with its own host's
    floor and dispatch ratios, for a calibrated host; else ``held_out_uncalibrated``, with
    the fit's median floor and ratios, as predictions are priced on every GPU, the measured
    ones too), ``own`` (the GPU's
    errors in it, None where it has none) and ``held_out_range`` (``held_out_range`` of the
    record: what a GPU the fit has not seen can expect)."""
    measured = gpu_name in (kernel_model.get("fitted_on") or ())
    calibrated = bool(kernel_model.get("host_floor_us")) \
        and bool(kernel_model.get("host_dispatch_kinds"))
    record = "held_out" if calibrated else "held_out_uncalibrated"
    held = kernel_model.get(record) or {}
    return {"measured": measured, "calibrated": calibrated, "record": record,
            "own": dict(held[gpu_name]) if gpu_name in held else None,
            "held_out_range": held_out_range(held) if held else None}


def kernel_model_basis(gpu: Any, kernel_model: Mapping[str, Any]) -> dict[str, Any] | None:
    """``simt_figures`` of a GPU entry with the fit's ``fit_trust`` for it (``kernel_model``:
    the catalog's merged ``[kernel_model]``) and its ``vendor``; None without fitted
    parameters."""
    figures = simt_figures(gpu)
    return ({**figures, **fit_trust(kernel_model, gpu.name),
             "vendor": vendor_of(gpu)} if figures else None)


def simt_figures(gpu: Any) -> dict[str, Any] | None:
    """What the measured-kernel model takes for one GPU entry, from its datasheet fields and
    the fitted parameters (``traincast hardware show``; None without them, ``fitted_params``):

    * ``power_w_per_lane_ghz_nm`` ``p`` and ``power_ref_w_per_lane_ghz_nm`` ``p0`` (W per FP32
      lane-GHz-nm), ``clock_fraction`` ``c = min(1, p / p0)`` and ``sustained_clock_mhz``
      ``f = f_boost c``;
    * ``issue_slots`` ``h`` (``issue_ratio``) and ``tile_efficiency`` ``e_T`` per candidate tile
      (``tile_issue_efficiency``);
    * ``simt_tflops`` ``R = 2 sms fp32_cores_per_sm f e`` and ``peak_fraction`` ``R /
      fp32_tflops``, ``large_tile_tflops`` ``R e_T`` of the 128 x 128 tile (a large product's
      rate before its fixed tile costs, waves and ``rho``), ``gemm_fraction`` ``eta``
      (``simt_gemm_fraction``: the fp32 rate of aggregate features and convolutions);
    * ``memory_gbs`` per memory-bound family, ``M f_family``;
    * ``floor_us`` ``d`` and ``op_floors_us`` ``d r_x`` per dispatch kind."""
    params = fitted_params(gpu)
    if params is None:
        return None
    p = float(power_w_per_lane_ghz_nm(*(_field(gpu, k) for k in CLOCK_FIELDS)))
    clock_hz = float(simt_clock_hz(gpu, params))
    rate = float(simt_rate_flops(gpu, params))
    h = float(simt_issue_ratio(gpu))
    eff = {f"{tm}x{tn}": float(tile_issue_efficiency(tm, tn, h, params["c_issue"]))
           for tm, tn in SIMT_CANDIDATE_TILES}
    peak = float(getattr(gpu, "fp32_tflops", 0.0) or 0.0)
    floor_us = op_floor_s(gpu) * 1e6
    return {"power_w_per_lane_ghz_nm": p if math.isfinite(p) else None,
            "power_ref_w_per_lane_ghz_nm": params["power_ref"],
            "clock_fraction": clock_hz / (float(_field(gpu, "boost_clock_mhz")) * 1e6),
            "sustained_clock_mhz": clock_hz / 1e6, "issue_slots": h, "tile_efficiency": eff,
            "simt_tflops": rate / 1e12, "peak_fraction": rate / 1e12 / peak if peak else None,
            "large_tile_tflops": rate * eff["128x128"] / 1e12,
            "gemm_fraction": simt_gemm_fraction(gpu),
            "memory_gbs": {fam: float(gpu.mem_bw_gbs) * f
                           for fam, f in fitted_memory_fractions(params).items()},
            "floor_us": floor_us,
            "op_floors_us": {k: floor_us * r for k, r in dispatch_table(params).items()}}


def op_floor_s(gpu: Any) -> float:
    """The per-op floor ``d`` (seconds) of the simplest op (an element-wise add): the fitted
    ``floor_us`` of ``GPU.kernel`` (a calibrated host's ``host_floor_us``, else the median of
    the measuring hosts' floors, for every GPU alike: an eager op's host dispatch and launch;
    ``catalog._apply_kernel_model``), else the entry's ``kernel_launch_us``,
    else 0. The host takes ``d r_x`` to issue an op of kind ``x`` (``op_floors_s``)."""
    kernel = getattr(gpu, "kernel", {}) or {}
    us = kernel.get("floor_us") or float(getattr(gpu, "kernel_launch_us", 0.0) or 0.0)
    return float(us) * 1e-6


DISPATCH_KINDS: dict[str, str] = {
    "addmm": "linear", "linear": "linear", "_addmm_activation": "linear",
    "mm": "bmm", "bmm": "bmm", "matmul": "bmm", "baddbmm": "bmm",
    "add": "add", "add_": "add", "sub": "add", "sub_": "add", "mul": "mul", "mul_": "mul",
    "div": "div", "div_": "div", "pow": "pow", "tanh": "tanh", "tanh_backward": "tanh",
    "relu": "relu", "relu_": "relu", "threshold_backward": "relu",
    "gelu": "gelu", "gelu_backward": "gelu",
    "_softmax": "softmax", "softmax": "softmax", "_log_softmax": "softmax",
    "_softmax_backward_data": "softmax", "_log_softmax_backward_data": "softmax",
    "native_layer_norm": "ln", "layer_norm": "ln", "native_layer_norm_backward": "ln",
    # the measured folders by their own names (the fit's rows)
    "conv": "linear", "ln": "ln", "addu": "addu", "mulu": "mulu", "divu": "divu",
    "powu": "powu"}
"""Measured op kind (a folder of the kernel data) whose dispatch ratio an aten op, or a measured
row of a folder, takes. Convolutions take ``linear``'s (cuDNN's dispatch is at least a cuBLAS
call's; the data has no floor-bound convolution), other products ``bmm``'s, other memory-bound
ops the median of the element-wise kinds (``elementwise``). A profile row does not tell a
scalar operand apart: ``aten::add`` takes ``add``'s ratio whatever its second argument."""


def dispatch_kind(name: str) -> str:
    """The measured op kind of aten op (or measured folder) ``name`` (``DISPATCH_KINDS``;
    ``linear`` for a convolution, ``bmm`` for another product, ``elementwise`` for the rest)."""
    name = name.removeprefix("aten::")
    if name in DISPATCH_KINDS:
        return DISPATCH_KINDS[name]
    family = op_family(name)
    if family == "conv":
        return "linear"
    if family in COMPUTE_FAMILIES:
        return "bmm"
    return "elementwise"


def dispatch_ratios(names: Sequence[str], ratios: Mapping[str, float]) -> F:
    """Per op (or measured folder) name: the dispatch ratio ``r`` of its kind
    (``dispatch_kind``): ``ratios[kind]``, else ``ratios["elementwise"]``, else 1. ``ratios``:
    kind -> ratio (the ``dispatch_<kind>`` keys of ``GPU.kernel`` without their prefix). One
    lookup per distinct name."""
    if not len(names):
        return np.zeros(0)
    unique, inverse = np.unique(np.asarray(names, dtype=str), return_inverse=True)
    fallback = float(ratios.get("elementwise", 1.0))
    table = [float(ratios.get(dispatch_kind(str(u)), fallback)) for u in unique]
    return np.asarray(table, dtype=np.float64)[inverse]


def op_floors_s(ops: Sequence[Mapping[str, Any]], gpu: Any) -> F:
    """Per op: its floor ``d r_x`` (seconds): ``d = op_floor_s(gpu)``, ``r_x`` = the fitted
    dispatch ratio of the op's kind ``x`` (``dispatch_<x>`` of ``GPU.kernel``: how much longer
    than an element-wise add the host takes to issue it: ``addmm`` 2.19 and
    ``native_layer_norm`` 1.80 in the shipped fit; ``dispatch_ratios``: the element-wise median
    for a kind without its own, 1 without fitted ratios). A row marked ``launch = "library"``
    (a kernel a library launches from its own loop, as cuDNN's RNN steps,
    ``features.recurrent.cudnn_rows``) costs the host ``LIBRARY_LAUNCH_US``: no eager
    dispatch, the runtime's launch call alone."""
    ratios = dispatch_table(getattr(gpu, "kernel", {}) or {})
    return issue_s(ops, op_floor_s(gpu) * dispatch_ratios([str(o.get("op", "")) for o in ops],
                                                          ratios))


def issue_s(ops: Sequence[Mapping[str, Any]], eager_s: ArrayLike) -> F:
    """The host's time to issue each row: ``eager_s`` (the op's eager dispatch, per row or one
    for all), or ``LIBRARY_LAUNCH_US`` for a row a library launches from its own loop
    (``launch = "library"``, ``features.recurrent.library_launched``)."""
    return np.where(library_launched(ops), LIBRARY_LAUNCH_US * 1e-6,
                    np.asarray(eager_s, dtype=np.float64))


def queue_idle_s(host_s: ArrayLike, busy_s: ArrayLike, count: ArrayLike) -> F:
    """Per row of a step's op table: the time the GPU waits on the host before the row's runs,
    when one host thread issues the ops in table order and the GPU runs them in that order.

    A run of row ``i`` costs the host ``h_i`` (its floor ``d r_x``, ``op_floors_s``) and the
    GPU ``b_i`` (its kernel time); the GPU starts a run once the host has issued it and the run
    before has ended, ``E_k = max(E_{k-1}, H_k) + b_k``, so the step (from a synchronized
    start, as a loop that reads its loss every step) ends at
    ``E_n = B_n + max_k (H_k - B_{k-1})`` (``H_k``: host time when run ``k`` is issued,
    ``B_k``: GPU busy time through run ``k``). Consecutive rows with the same ``count`` ``c``
    are one loop body run ``c`` times (a layer's ops in a profile that counts them per layer,
    a recurrent layer's steps); a body's lag ``H - B`` moves by ``c_body (sum h - sum b)``
    per pass, so its largest value is in its first or last pass::

        A, B   = host and GPU time of the bodies before row i's (each pass's sums times c)
        a_i    = sum of h over the body's rows up to i,  b'_i = sum of b before row i
        m_i    = A - B + a_i - b'_i + (c - 1) max(0, sum_body h - sum_body b)
        M_i    = max(0, m_1, ..., m_i)
        idle_i = M_i - M_{i-1}            (the step: sum c b + M_n)

    ``sum idle`` is at least ``sum c h - sum c b`` (the host's own time) and at most
    ``sum c max(h, b) - sum c b + max min(h, b)`` (each op waiting for its own dispatch, no
    host run-ahead, and the first wait). Counts are whole numbers of runs (a row of count 0
    runs never and makes no wait); ``busy_s`` may carry leading axes, one queue each."""
    h = np.asarray(host_s, dtype=np.float64)
    if not h.size:
        return np.zeros(np.shape(busy_s))
    lag = _queue_lag_s(h, busy_s, count)
    running = np.maximum.accumulate(np.maximum(lag, 0.0), axis=-1)
    return np.diff(running, axis=-1, prepend=0.0)


def _queue_lag_s(host_s: ArrayLike, busy_s: ArrayLike, count: ArrayLike) -> F:
    """``m_i`` of :func:`queue_idle_s` (the last axis: the table's rows; ``busy_s`` may carry
    leading axes, one queue each)."""
    linear, body, c_body, h_body, b_body, runs = _queue_lag_parts(host_s, busy_s, count)
    return _lag_with_passes(linear, body, c_body, h_body - b_body, runs)


def _lag_with_passes(linear: F, body: NDArray[np.int64], c_body: F, gain_body: F,
                     runs: NDArray[np.bool_]) -> F:
    """``m_i`` from its linear part: plus ``(c - 1) max(0, sum_body h - sum_body b)`` (the
    host's gain over a body's later passes, ``gain_body``), and ``-inf`` for a row that never
    runs (count 0: no wait)."""
    loops = c_body > 1.0
    if loops.any():
        later = np.where(loops, (c_body - 1.0) * np.maximum(gain_body, 0.0), 0.0)
        linear = linear + later[..., body]
    return linear if runs.all() else np.where(runs, linear, -np.inf)


def _queue_lag_parts(host_s: ArrayLike, busy_s: ArrayLike, count: ArrayLike
                     ) -> tuple[F, NDArray[np.int64], F, F, F, NDArray[np.bool_]]:
    """The parts of ``m_i`` (:func:`queue_idle_s`): ``A - B + a_i - b'_i`` (linear in the
    host and busy times), each row's body index, each body's count, host and busy sums, and
    which rows run (count > 0)."""
    h = np.asarray(host_s, dtype=np.float64)
    b = np.asarray(busy_s, dtype=np.float64)
    c = np.broadcast_to(np.asarray(count, dtype=np.float64), h.shape)
    if h.ndim != 1 or b.shape[-1:] != h.shape:
        raise ValueError(f"host_s ({h.shape}) and busy_s ({b.shape}) must give one time per row "
                         "of the table")
    body = np.concatenate([[0], np.cumsum(c[1:] != c[:-1])])  # body index of each row
    first = np.concatenate([[True], body[1:] != body[:-1]])
    starts = np.flatnonzero(first)
    h_body = np.add.reduceat(h, starts)
    b_body = np.add.reduceat(b, starts, axis=-1)
    c_body = c[first]
    before = _exclusive_cumsum(c_body * (h_body - b_body))  # A - B before each body
    h_before = _exclusive_cumsum(h)  # sums over the rows before row i
    b_before = _exclusive_cumsum(b)
    h_in = h_before - h_before[first][body] + h  # the body's rows up to row i
    b_in = b_before - b_before[..., first][..., body]  # the body's rows before row i
    return before[..., body] + h_in - b_in, body, c_body, h_body, b_body, c > 0


def _exclusive_cumsum(x: F) -> F:
    """Sums over the elements before each one, along the last axis."""
    out = np.zeros_like(x)
    np.cumsum(x[..., :-1], axis=-1, out=out[..., 1:])
    return out


def queue_idle_grid_s(host_s: ArrayLike, busy_s: ArrayLike, count: ArrayLike,
                      marked: ArrayLike, scales: ArrayLike) -> F:
    """``G[i, j]``: the step's summed :func:`queue_idle_s` with the busy time of the ``marked``
    rows times ``scales[i]`` and of the others times ``scales[j]`` (a job with ``scales[i]``
    times the FLOPs and ``scales[j]`` times the bytes of the profiled ops; the host's
    dispatches do not change): ``max(0, max_i m_i)`` of each scaled queue."""
    h = np.asarray(host_s, dtype=np.float64)
    x = np.asarray(scales, dtype=np.float64)
    if not h.size:
        return np.zeros((len(x), len(x)))
    b = np.asarray(busy_s, dtype=np.float64)
    sel = np.asarray(marked, dtype=bool)
    # m_i's linear part is linear in (h, a b_F, b b_B): one queue with no busy time and two
    # with the marked and the other rows' alone give it for every (a, b) pair at once
    parts = np.stack([np.zeros_like(b), np.where(sel, b, 0.0), np.where(sel, 0.0, b)])
    lin, body, c_body, h_body, b_body, runs = _queue_lag_parts(h, parts, count)
    slopes, busy_body = lin[1:] - lin[0], b_body[1:]  # per unit a and b
    pairs = np.stack([v.ravel() for v in np.meshgrid(x, x, indexing="ij")], axis=1)  # (a, b)
    out = np.empty(len(pairs))
    step = max(1, 2_000_000 // len(h))  # pairs per chunk: about 16 MB per array
    for lo in range(0, len(pairs), step):
        ab = pairs[lo:lo + step]
        linear = ab @ slopes
        linear += lin[0]
        lag = _lag_with_passes(linear, body, c_body, h_body - ab @ busy_body, runs)
        out[lo:lo + step] = np.maximum(lag.max(axis=-1), 0.0)
    return out.reshape(len(x), len(x))


def dispatch_table(params: Mapping[str, float]) -> dict[str, float]:
    """Kind -> dispatch ratio from kernel-model parameters (their ``dispatch_<kind>`` keys)."""
    return {k.removeprefix("dispatch_"): float(v) for k, v in params.items()
            if k.startswith("dispatch_")}


NORM_OPS = ("layer_norm", "batch_norm", "group_norm", "rms_norm", "instance_norm")
SOFTMAX_OPS = ("softmax",)


def op_memory_family(ops: Sequence[Mapping[str, Any]]) -> NDArray[np.object_]:
    """Per op: ``"softmax"`` (softmax, log-softmax and their backward), ``"norm"`` (layer,
    batch, group, RMS and instance norms, forward and backward), ``"elementwise"`` for the
    other memory-bound rows (no op family in ``features.ops``), ``""`` for GEMM-family rows."""
    if not len(ops):
        return np.empty(0, dtype=object)
    unique, inverse = np.unique(np.array([str(o.get("op", "")) for o in ops], dtype=str),
                                return_inverse=True)
    out = []
    for u in unique:  # one decision per distinct op name
        name = u.removeprefix("aten::")
        out.append("" if op_family(name) in COMPUTE_FAMILIES else
                   "softmax" if any(s in name for s in SOFTMAX_OPS) else
                   "norm" if any(s in name for s in NORM_OPS) else "elementwise")
    return np.array(out, dtype=object)[inverse]
