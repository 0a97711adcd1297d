"""GEMM time by shape: tile/wave quantization and the roofline of memory-bound products.

The hybrid model's compute time is the sum, over the matrix products of one micro-batch, of each
product's FLOPs at the GPU's achievable rate ``R = P eta`` (efficiency.toml), corrected for two
effects of the product's shape (NVIDIA, "Matrix Multiplication Background User's Guide", Ch. 3):

* **tile and wave quantization**: cuBLAS computes an ``M x N`` output in tiles of ``T_m x T_n``
  (256x128 and 128x256 are its most efficient tiles on A100, 128x128 the next), one tile per SM
  at a time; a product needs ``tiles = ceil(M/T_m) ceil(N/T_n)`` tiles and runs
  ``waves = ceil(tiles / SMs)`` full waves, so only ``w = M N / (waves SMs T_m T_n)`` of the work
  it is charged for is useful. The library picks the tile; we take the best of the three
  (``wave_efficiency``). GPUs without an SM count in efficiency.toml get ``w = 1``.
* **roofline**: a product whose arithmetic intensity ``I = FLOPs / bytes`` is below the GPU's
  ridge ``R / M_bw`` runs at memory speed: ``time = max(FLOPs / R, bytes / M_bw)``. The batched
  attention products (Q K^T and scores x V, one per head, with the small inner size ``h / a``)
  are the only ones of a transformer layer that fall below it (``attention_slowdown``).

Forward output of a linear layer ``Y = X W`` is ``M x N`` (``M`` tokens, ``K`` inputs, ``N``
outputs); its backward computes the data gradient (``M x K`` output) and the weight gradient
(``K x N`` output), each with the same FLOPs. Formulas: docs/parallelism.md.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast.parallel.models import ModelConfig

F = NDArray[np.float64]

TILES: tuple[tuple[int, int], ...] = ((256, 128), (128, 256), (128, 128))
"""cuBLAS tensor-core tiles considered (Matrix Multiplication Background User's Guide, Sec. 2.3:
256x128 and 128x256 the most efficient, then 128x128)."""


def _f(x: ArrayLike) -> F:
    return np.asarray(x, dtype=np.float64)


def wave_efficiency(m: ArrayLike, n: ArrayLike, sms: float) -> F:
    """Useful fraction of an ``m x n`` GEMM output under tile and wave quantization.

    ``max over tiles (T_m, T_n) of m n / (ceil(ceil(m/T_m) ceil(n/T_n) / sms) sms T_m T_n)``;
    1.0 when ``sms`` is 0 (unknown GPU).
    """
    m, n = _f(m), _f(n)
    if sms <= 0:
        return np.ones(np.broadcast(m, n).shape)
    best = np.zeros(np.broadcast(m, n).shape)
    for tm, tn in TILES:
        tiles = np.ceil(m / tm) * np.ceil(n / tn)
        waves = np.ceil(tiles / sms)
        best = np.maximum(best, m * n / (waves * sms * tm * tn))
    return best


def linear_shapes(model: ModelConfig, b: ArrayLike, s: float, t: ArrayLike,
                  e: ArrayLike = 1) -> list[tuple[F, F, F, F]]:
    """``(count, M, N, K)`` of each linear product of one layer on one GPU (forward).

    Attention: Q K V projection ``(b s, (h + 2 kv h/a) / t, h)``, output projection
    ``(b s, h, h / t)``; MLP (per expert, ``E / e`` experts per GPU, ``b s k e / E`` tokens each
    under balanced routing; a dense MLP is ``E = e = k = 1``): up (and gate)
    ``((n_mat - 1) f / t, h)``, down ``(h, f / t)``.
    """
    b, t, e = _f(b), _f(t), _f(e)
    h, f = float(model.hidden), float(model.ffn)
    kvd = float(model.kv * (model.hidden // model.heads))
    tokens = b * s
    one = np.ones_like(tokens * t * e)
    experts = float(model.experts)
    mlp_tokens = tokens * model.top_k * e / experts
    per_gpu = experts / e
    return [
        (one, tokens * one, (h + 2.0 * kvd) / t * one, h * one),
        (one, tokens * one, h * one, h / t * one),
        (per_gpu * one, mlp_tokens * one, (model.n_mat - 1) * f / t * one, h * one),
        (per_gpu * one, mlp_tokens * one, h * one, f / t * one),
    ]


def gemm_times_s(shapes: list[tuple[F, F, F, F]], rate_flops: float,
                 sms: float) -> tuple[F, F]:
    """Forward and backward (data + weight gradient) time of a list of linear products:

    ``fwd = sum count 2 M N K / (R w(M, N))``,
    ``bwd = sum count 2 M N K / R (1 / w(M, K) + 1 / w(K, N))``.
    """
    fwd, bwd = 0.0, 0.0
    for count, m, n, k in shapes:
        flops = count * 2.0 * m * n * k / rate_flops
        fwd = fwd + flops / wave_efficiency(m, n, sms)
        bwd = bwd + flops * (1.0 / wave_efficiency(m, k, sms) + 1.0 / wave_efficiency(k, n, sms))
    return _f(fwd), _f(bwd)


def attention_intensity(s: float, head_dim: float, delta: float) -> float:
    """FLOPs per byte of one attention product per head: Q K^T reads ``2 s d`` elements and
    writes ``s^2`` scores for ``2 s^2 d`` FLOPs (scores x V: reads ``s^2 + s d``, writes ``s d``,
    the same): ``I = 2 s^2 d / (delta (s^2 + 2 s d)) = 2 s d / (delta (s + 2 d))``."""
    return 2.0 * s * head_dim / (delta * (s + 2.0 * head_dim))


def attention_slowdown(s: float, head_dim: float, delta: float, rate_flops: float,
                       mem_bps: float) -> float:
    """Time of the attention products over their FLOPs at ``R``: ``max(1, (R / M_bw) / I)``."""
    return max(1.0, rate_flops / mem_bps / attention_intensity(s, head_dim, delta))
