"""GEMM time of the hybrid model's products: the shapes of a transformer layer, priced by the one
kernel model in ``traincast.kernels`` (tile and wave quantization, roofline).

The hybrid model's compute time is the sum, over the matrix products of one micro-batch, of each
product's FLOPs at the GPU's achievable rate ``R = P eta`` divided by its tile/wave efficiency
``w(M, N)`` (``traincast.kernels.wave_efficiency`` with the plan's dtype: cuBLAS's 256x128,
128x256 and 128x128 tensor-core tiles, the SIMT tiles 128x128, 128x64 and 64x128 for fp32, one
tile per SM at a time; ``w = 1`` for a GPU without an SM count). Products whose arithmetic
intensity ``I`` is below the ridge ``R / M_bw`` run at memory speed
(``traincast.kernels.roofline_slowdown``): the batched attention products (Q K^T and scores x V,
one per head, with the small inner size ``d``, the head size, ``attention_slowdown``), and the
linear products of a micro-batch of few tokens, which read a whole weight matrix for little
work (``gemm_times_s``).

Forward output of a linear layer ``Y = X W`` is ``M x N`` (``M`` tokens, ``K`` inputs, ``N``
outputs); its backward computes the data gradient (``M x K`` output) and the weight gradient
(``K x N`` output), each with the same FLOPs. Formulas: docs/parallelism.md, docs/model.md.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast.kernels import DTYPE_BYTES, roofline_slowdown, wave_efficiency
from traincast.parallel.models import ModelConfig

F = NDArray[np.float64]

__all__ = ["attention_intensity", "attention_slowdown", "gemm_times_s",
           "linear_shapes", "rerun_shapes", "wave_efficiency"]


def _f(x: ArrayLike) -> F:
    return np.asarray(x, dtype=np.float64)


def linear_shapes(model: ModelConfig, b: ArrayLike, s: ArrayLike, t: ArrayLike,
                  e: ArrayLike = 1) -> list[tuple[F, F, F, F]]:
    """``(count, M, N, K)`` of each linear product of one layer on one GPU (forward).

    Attention (``d`` the head size, ``h / a`` unless the config sets ``head_dim``): Q K V
    projection ``(b s, (a d + 2 kv d) / t, h)``, output projection ``(b s, h, a d / t)``; MLP
    (per expert, ``E / e`` experts per GPU, ``b s k e / E`` tokens each
    under balanced routing; a dense MLP is ``E = e = k = 1``): up (and gate)
    ``((n_mat - 1) f / t, h)``, down ``(h, f / t)``.
    """
    b, t, e = _f(b), _f(t), _f(e)
    h, f = float(model.hidden), float(model.ffn)
    qd, kvd = float(model.q_dim), float(model.kv_dim)
    tokens = b * s
    one = np.ones_like(tokens * t * e)
    experts = float(model.experts)
    mlp_tokens = tokens * model.top_k * e / experts
    per_gpu = experts / e
    return [
        (one, tokens * one, (qd + 2.0 * kvd) / t * one, h * one),
        (one, tokens * one, h * one, qd / t * one),
        (per_gpu * one, mlp_tokens * one, (model.n_mat - 1) * f / t * one, h * one),
        (per_gpu * one, mlp_tokens * one, h * one, f / t * one),
    ]


def rerun_shapes(model: ModelConfig, b: ArrayLike, s: ArrayLike, t: ArrayLike,
                 e: ArrayLike = 1) -> list[tuple[F, F, F, F]]:
    """``(count, M, N, K)`` of the linear products ``selective-op`` recomputation reruns in one
    layer on one GPU. torchtitan's policy keeps the output of every ``aten.mm`` of the layer's
    forward except every second one, in the order its Llama block runs them, with separate
    projections (``wq, wk, wv, wo``, then ``w1, w3, w2`` for a gated MLP, up and down
    otherwise), and reruns every other op: the key projection ``(b s, kv d / t, h)``, the
    output projection ``(b s, h, a d / t)`` and the MLP's third product, the up product ``w3``
    of a gated MLP ``(b s, f / t, h)`` or the down product of a plain one ``(b s, h, f / t)``
    (FLOPs ``2 b s h (kv d + a d + f) / t`` either way). A mixture of experts, an
    assumption (the policy's source has no MoE block): its experts' products run as batched
    or grouped products, not ``aten.mm``, so all of them are rerun (:func:`linear_shapes`'
    MLP products), with the key and output projections; a stack that runs them as ``nn.Linear``
    (``aten.mm``) would keep every second one."""
    linear = linear_shapes(model, b, s, t, e)
    _, tokens, _, h = linear[0]
    keys = (linear[0][0], tokens, float(model.kv_dim) / _f(t) * linear[0][0], h)
    if model.experts > 1:
        return [keys, linear[1], *linear[2:]]
    up = linear[2]  # a gated MLP's gate and up as one product: w3 is half of it
    third = (up[0], up[1], up[2] / 2.0, up[3]) if model.gated else linear[3]
    return [keys, linear[1], third]


def gemm_times_s(shapes: list[tuple[F, F, F, F]], rate_flops: float,
                 sms: float, dtype: str = "bf16", mem_bps: float = np.inf) -> tuple[F, F]:
    """Forward and backward (data + weight gradient) time of a list of linear products, each
    product at the slower of its FLOPs and its operands' DRAM traffic (a roofline)::

        fwd = sum count max(2 M N K / (R w(M, N)), D / M_bw)
        bwd = sum count [max(2 M N K / (R w(M, K)), D / M_bw)
                         + max(2 M N K / (R w(K, N)), D / M_bw)]
        D   = e (M K + K N + M N)

    ``w`` of each product with its own inner dimension (K, N and M: split-K when its tiles
    cannot fill the SMs) and the tiles of ``dtype`` (``traincast.kernels.TILES``: SIMT tiles
    for fp32, tensor-core tiles otherwise); ``D`` the bytes each of the three products reads and
    writes once (forward: X and W read, Y written; data gradient: dY and W read, dX written;
    weight gradient: X and dY read, dW written), ``e`` bytes per element of ``dtype``
    (``kernels.DTYPE_BYTES``), ``M_bw`` the achieved DRAM bandwidth (``inf``: FLOPs alone). A
    micro-batch of few tokens reads the whole weight matrix for little work: its products run
    at memory speed.
    """
    fwd, bwd = 0.0, 0.0
    width = float(DTYPE_BYTES.get(dtype, 2))
    for count, m, n, k in shapes:
        flops = 2.0 * m * n * k / rate_flops
        mem = width * (m * k + k * n + m * n) / mem_bps
        fwd = fwd + count * np.maximum(flops / wave_efficiency(m, n, sms, dtype=dtype, k=k), mem)
        bwd = bwd + count * (
            np.maximum(flops / wave_efficiency(m, k, sms, dtype=dtype, k=n), mem)
            + np.maximum(flops / wave_efficiency(k, n, sms, dtype=dtype, k=m), mem))
    return _f(fwd), _f(bwd)


def attention_intensity(s: float, head_dim: float, delta: float) -> float:
    """FLOPs per byte of one attention product per head: Q K^T reads ``2 s d`` elements and
    writes ``s^2`` scores for ``2 s^2 d`` FLOPs (scores x V: reads ``s^2 + s d``, writes ``s d``,
    the same): ``I = 2 s^2 d / (delta (s^2 + 2 s d)) = 2 s d / (delta (s + 2 d))``."""
    return 2.0 * s * head_dim / (delta * (s + 2.0 * head_dim))


def attention_slowdown(s: float, head_dim: float, delta: float, rate_flops: float,
                       mem_bps: float) -> float:
    """Time of the attention products over their FLOPs at ``R``: ``max(1, (R / M_bw) / I)``."""
    return float(roofline_slowdown(attention_intensity(s, head_dim, delta), rate_flops, mem_bps))
