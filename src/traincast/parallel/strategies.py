"""Per-strategy formulas: communication volumes and times, pipeline bubble, memory per GPU.

Small pure functions over numpy arrays (one call evaluates one configuration or thousands).
Notation: ``d`` data-parallel size, ``t`` tensor-parallel size, ``p`` pipeline stages, ``e``
expert-parallel size, ``v`` interleaved model chunks per stage, ``m`` micro-batches per
iteration, ``b`` micro-batch (sequences), ``s`` sequence length, ``h`` hidden size, ``a`` heads,
``delta`` bytes per activation element; ``bw`` bytes/s of the link a collective runs over.
Collectives are ring algorithms: all-reduce sends ``2 (n-1)/n`` of the buffer per GPU,
reduce-scatter and all-gather ``(n-1)/n``, all-to-all ``(n-1)/n``; the tensor-parallel rings
and the pipeline's point-to-point sends also pay the link latency per step
(``ring_latency_s``, ``p2p_time_s``). Formulas with sources: docs/parallelism.md.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast.architectures import ring_factor

F = NDArray[np.float64]

RECOMPUTE: tuple[str, ...] = ("none", "selective", "full", "selective-op")
"""Activation recomputation modes: none; ``selective``, the attention core rerun (Korthikanti
et al., 2022: Megatron's checkpointed core attention); ``full``, the whole layer rerun from its
input; ``selective-op``, torchtitan's op-level policy (every op's output kept except every
second matrix product of the layer's forward and the ops that are not products or attention,
which are rerun: docs/parallelism.md, "Recomputation")."""
RECOMPUTE_CODE: dict[str, int] = {name: i for i, name in enumerate(RECOMPUTE)}
DTYPE_BYTES: dict[str, int] = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 2}
"""Bytes per stored weight, gradient and activation element (fp8 training keeps 16-bit master
weights, gradients and activations; only the GEMMs run in fp8)."""
OPTIMIZER_BYTES: dict[str, int] = {"fp32": 8, "tf32": 8, "bf16": 12, "fp16": 12, "fp8": 12}
"""Adam state bytes per parameter K: fp32 m and v (8); with 16-bit training also the fp32 master
copy (12) — Rajbhandari et al., ZeRO (SC 2020), Sec. 3.1."""
OPTIMIZER_STEP_BYTES: dict[str, float] = {"fp32": 32.0, "tf32": 32.0, "bf16": 52.0, "fp16": 52.0,
                                           "fp8": 52.0}
"""DRAM bytes per parameter of one optimizer step (memory-bound), as Megatron-LM's mixed-precision
optimizer runs it (megatron/optimizer/optimizer.py, ``step``): copy the 16-bit gradients to fp32
(read 2, write 4), unscale and check for inf/nan (read 4, write 4), gradient norm for clipping
(read 4), Adam (read weight, gradient, m, v: 16; write weight, m, v: 12), copy the fp32 weights
back to 16 bits (read 4, write 2): 52 bytes. fp32 training: norm (4) + Adam (28) = 32."""
CROSS_ENTROPY_BYTES = 52.0
"""DRAM bytes per logit element of the vocabulary-parallel cross-entropy in fp32 (Megatron-LM
``vocab_parallel_cross_entropy`` on ``logits.float()``): forward — cast (read 2, write 4), max
(read 4), subtract (read 4, write 4), exp (read 4, write 4), sum (read 4), divide (read 4,
write 4) = 38; backward — scale the saved softmax (read 4, write 4), cast back (read 4,
write 2) = 14."""


def _f(x: ArrayLike) -> F:
    return np.asarray(x, dtype=np.float64)


def half_ring(n: ArrayLike) -> F:
    """Reduce-scatter / all-gather / all-to-all traffic per byte per GPU: ``(n - 1) / n``."""
    return ring_factor(n) / 2.0


# ------------------------------------------------------------------------- pipeline parallelism
def bubble_fraction(p: ArrayLike, m: ArrayLike, v: ArrayLike = 1) -> F:
    """Idle share of a pipeline iteration: ``(p - 1) / (v m + p - 1)``.

    GPipe and 1F1B both idle ``(p - 1)`` micro-batch slots per iteration of ``m`` micro-batches;
    interleaving ``v`` chunks per stage divides the idle time by ``v`` (Narayanan et al., SC 2021,
    Sec. 2.2): time = ``(m + (p - 1) / v) t_mb``.
    """
    p, m, v = _f(p), _f(m), np.maximum(_f(v), 1.0)
    return (p - 1.0) / (v * m + p - 1.0)


def pipeline_time_s(t_mb: ArrayLike, p: ArrayLike, m: ArrayLike, v: ArrayLike = 1) -> F:
    """Iteration time of a pipeline: ``(m + (p - 1) / v) t_mb`` (t_mb: one micro-batch on the
    slowest stage, forward + backward)."""
    return (_f(m) + (_f(p) - 1.0) / np.maximum(_f(v), 1.0)) * _f(t_mb)


def p2p_bytes(b: ArrayLike, s: ArrayLike, h: ArrayLike, delta: ArrayLike,
              scatter: ArrayLike = 1) -> F:
    """Bytes one stage sends to the next per micro-batch and direction: ``b s h delta / scatter``
    (Megatron's scatter/gather splits the boundary tensor over the ``t`` tensor-parallel ranks
    when it crosses nodes: ``scatter = t``)."""
    return _f(b) * _f(s) * _f(h) * _f(delta) / np.maximum(_f(scatter), 1.0)


def p2p_time_s(bytes_: ArrayLike, p: ArrayLike, v: ArrayLike, bw: ArrayLike,
               latency_s: ArrayLike = 0.0) -> F:
    """Point-to-point time per micro-batch on a stage: activations forward and their gradients
    backward at each of the ``v`` chunk boundaries, ``2 v (latency + bytes / bw)`` (0 without a
    pipeline)."""
    return np.where(_f(p) > 1, 2.0 * np.maximum(_f(v), 1.0)
                    * (_f(latency_s) + _f(bytes_) / _f(bw)), 0.0)


def embedding_sync_bytes(embedding_params: ArrayLike, delta: ArrayLike) -> F:
    """Bytes each GPU sends per iteration to all-reduce the gradient of a tied embedding between
    the first and the last pipeline stage (a ring of 2): ``2 (2-1)/2 P_emb delta``
    (Narayanan et al., SC 2021: the word embedding is shared by the first and last stage)."""
    return ring_factor(2.0) * _f(embedding_params) * _f(delta)


# --------------------------------------------------------------------------- tensor parallelism
def tp_collectives_per_layer(recompute: ArrayLike) -> F:
    """All-reduces per layer per micro-batch in Megatron tensor parallelism: 2 forward (after
    attention and after the MLP), 2 backward, and 2 more when the forward is recomputed (full).
    With sequence parallelism each all-reduce becomes a reduce-scatter + an all-gather of the
    same total volume (Korthikanti et al., 2022, Sec. 4.2.2). ``selective-op`` keeps the
    reduce-scatters' outputs (torchtitan's policy saves them) and reruns the two all-gathers
    of the forward, half an all-reduce's volume each: 1 more."""
    r = _f(recompute)
    return 4.0 + 2.0 * (r == RECOMPUTE_CODE["full"]) + (r == RECOMPUTE_CODE["selective-op"])


def ring_latency_s(n: ArrayLike, latency_s: ArrayLike) -> F:
    """Latency of one ring all-reduce (or reduce-scatter + all-gather) over ``n`` GPUs: its
    ``2 (n - 1)`` sequential steps each pay the link latency (0 for ``n = 1``)."""
    return 2.0 * np.maximum(_f(n) - 1.0, 0.0) * _f(latency_s)


def tp_bytes_per_layer(b: ArrayLike, s: ArrayLike, h: ArrayLike, delta: ArrayLike, t: ArrayLike,
                       recompute: ArrayLike) -> F:
    """Bytes each GPU sends per layer per micro-batch: ``n_ar 2 (t-1)/t b s h delta``."""
    return (tp_collectives_per_layer(recompute) * ring_factor(t) * _f(b) * _f(s) * _f(h)
            * _f(delta))


# --------------------------------------------------------------------------- expert parallelism
def ep_bytes_per_layer(b: ArrayLike, s: ArrayLike, h: ArrayLike, top_k: ArrayLike,
                       delta: ArrayLike, t: ArrayLike, e: ArrayLike, recompute: ArrayLike) -> F:
    """Bytes each GPU sends per MoE layer per micro-batch: two all-to-alls forward (dispatch the
    tokens to their ``top_k`` experts, combine the results), two backward (and two more with full
    recompute, or with ``selective-op``, which keeps no all-to-all's output), each ``(e-1)/e x
    (b s / t) top_k h delta`` (tokens split over the ``t`` sequence-parallel ranks)."""
    r = _f(recompute)
    n = 4.0 + 2.0 * ((r == RECOMPUTE_CODE["full"]) | (r == RECOMPUTE_CODE["selective-op"]))
    tokens = _f(b) * _f(s) / np.maximum(_f(t), 1.0)
    return n * half_ring(e) * tokens * _f(top_k) * _f(h) * _f(delta)


# ----------------------------------------------------------------- data parallelism and ZeRO
def dp_bytes(grad_bytes: ArrayLike, param_bytes: ArrayLike, d: ArrayLike, m: ArrayLike,
             zero: ArrayLike) -> F:
    """Bytes each GPU sends per iteration for data parallelism with ZeRO stage ``zero``.

    * 0 (plain DP): all-reduce the gradients once: ``2 (d-1)/d G``;
    * 1 (optimizer states sharded): reduce-scatter G, all-gather the updated parameters P:
      ``(d-1)/d (G + P)`` — the all-reduce volume (ZeRO, Sec. 7.2.1);
    * 2 (+ gradients sharded): gradients are reduce-scattered as each micro-batch's backward
      produces them: ``(d-1)/d (m G + P)``;
    * 3 / FSDP (+ parameters sharded): every micro-batch all-gathers the parameters for forward
      and again for backward and reduce-scatters the gradients: ``(d-1)/d m (2 P + G)`` (1.5x
      the all-reduce volume when m = 1, ZeRO Sec. 7.2.2).
    """
    g, pb, mm, z = _f(grad_bytes), _f(param_bytes), _f(m), _f(zero)
    hr = half_ring(d)
    return np.select([z == 0, z == 1, z == 2, z == 3],
                     [2.0 * hr * g, hr * (g + pb), hr * (mm * g + pb), hr * mm * (2.0 * pb + g)],
                     default=np.nan)


# ------------------------------------------------------------------------------ memory per GPU
def activation_bytes_per_layer(s: ArrayLike, b: ArrayLike, h: ArrayLike, a: ArrayLike,
                               t: ArrayLike, sp: ArrayLike, recompute: ArrayLike,
                               delta: ArrayLike = 2, mlp: ArrayLike = 16.0) -> F:
    """Activation bytes one layer keeps per micro-batch (Korthikanti et al., 2022, Table 2).

    16-bit activations, ``x = 5 a s / h`` (the attention scores, softmax and dropout mask),
    ``m`` = ``mlp`` the MLP's kept products per element of ``s b h``: Korthikanti et al.'s
    GeLU MLP of ``4h`` keeps its GeLU's input and output, ``8 s b h`` each (``m = 16``); in
    general the inputs of the activation (``n_mat - 1`` products of ``f``) and its output,
    ``m = 2 n_mat f k / h`` (``k`` experts per token: 16 for ``f = 4h`` GeLU, 21 for Llama 3
    8B's SwiGLU of ``f = 3.5h``):

    * none: ``s b h (18 + m + x)``; with tensor parallelism ``s b h (10 + (8 + m)/t + x/t)``;
      with tensor + sequence parallelism ``s b h (18 + m + x) / t`` (``34 + x`` for the GeLU
      MLP, the paper's);
    * selective (attention core recomputed): the same without ``x``;
    * full (only the layer input kept): ``2 s b h``; with sequence parallelism the kept input
      is the rank's ``s / t`` slice (Megatron keeps the input of each recomputed layer as the
      sequence-parallel region hands it over, ``[s / t, b, h]``): ``2 s b h / t``.

    Scaled by ``delta / 2`` for other activation widths (fp32: 2x).
    """
    s, b, h, a, t = _f(s), _f(b), _f(h), _f(a), np.maximum(_f(t), 1.0)
    r, sp, m = _f(recompute), np.asarray(sp, dtype=bool), _f(mlp)
    sbh = s * b * h
    x = 5.0 * a * s / h
    none = np.where(sp | (t == 1), sbh * (18.0 + m + x) / t,
                    sbh * (10.0 + (8.0 + m) / t + x / t))
    selective = np.where(sp | (t == 1), sbh * (18.0 + m) / t, sbh * (10.0 + (8.0 + m) / t))
    full = np.where(sp, 2.0 * sbh / t, 2.0 * sbh)
    out = np.select([r == 0, r == 1, r == 2], [none, selective, full], default=np.nan)
    return out * _f(delta) / 2.0


def memory_bytes_per_layer(s: ArrayLike, b: ArrayLike, h: ArrayLike, a: ArrayLike,
                           ffn: ArrayLike, n_mat: ArrayLike, top_k: ArrayLike, t: ArrayLike,
                           sp: ArrayLike, delta: ArrayLike = 2) -> dict[str, tuple[F, F, F]]:
    """DRAM bytes of the element-wise kernels of one layer and micro-batch on one GPU, counted
    kernel by kernel for a layer with Megatron's fused kernels (Narayanan et al., Sec. 4.2:
    fused bias+GeLU, bias+dropout+add, scale+mask+softmax); ``delta``-byte tensors, 1-byte
    dropout masks; GEMM operands are the GEMMs' own traffic (parallel/gemm.py), not counted here.
    By kernel family (``traincast.kernels.MEMORY_FAMILIES``, each run at its own achieved
    bandwidth), ``family -> (forward, backward, attention_forward)``; the last is the part
    selective recomputation repeats (softmax + attention dropout forward).

    ``norm``: two LayerNorms, forward read + write (``2 delta`` per element of ``b s h``, each),
    backward read input and gradient, write gradient (``3 delta``, each).
    ``softmax``: the scores' softmax, forward read scores, write probabilities (``2 delta`` per
    element of ``b a s^2``), backward read probabilities and gradient, write (``3 delta``).
    ``elementwise``: forward two bias+dropout+add (read input and residual, write output and
    mask: ``3 delta + 1``), the MLP activation (read ``n_mat - 1`` inputs, write one: ``n_mat
    delta`` per element of ``b s f``, ``top_k`` experts) and attention dropout (read, write,
    mask: ``2 delta + 1``); backward dropout+add (read gradient and mask, write, re-read for the
    bias gradient: ``3 delta + 1``, twice), the two residual-gradient sums (read two, write
    one: ``3 delta``, twice), activation (read inputs and gradient, write input gradients:
    ``(n_mat + 2) delta``), attention dropout (``2 delta + 1``).

    The ``b s h`` kernels run on the full sequence on every tensor rank (``/ t`` with sequence
    parallelism); the MLP and attention kernels are split over ``t``.
    """
    s, b, h, a, dl = _f(s), _f(b), _f(h), _f(a), _f(delta)
    t = np.maximum(_f(t), 1.0)
    rep = np.where(np.asarray(sp, dtype=bool), 1.0 / t, 1.0)
    bsh = b * s * h * rep
    act_fwd, act_bwd = activation_kernel_bytes(s, b, ffn, n_mat, top_k, t, delta)
    bass = b * a * s * s / t
    dropout_attn = (2.0 * dl + 1.0) * bass
    return {
        "norm": (4.0 * dl * bsh, 6.0 * dl * bsh, 0.0 * bsh),
        "softmax": (2.0 * dl * bass, 3.0 * dl * bass, 2.0 * dl * bass),
        "elementwise": ((6.0 * dl + 2.0) * bsh + act_fwd + dropout_attn,
                        (12.0 * dl + 2.0) * bsh + act_bwd + dropout_attn,
                        dropout_attn),
    }


def activation_kernel_bytes(s: ArrayLike, b: ArrayLike, ffn: ArrayLike, n_mat: ArrayLike,
                            top_k: ArrayLike, t: ArrayLike, delta: ArrayLike = 2) -> tuple[F, F]:
    """DRAM bytes of the fused MLP activation of one layer and micro-batch on one GPU, forward
    and backward (:func:`memory_bytes_per_layer`): ``n_mat delta`` and ``(n_mat + 2) delta``
    per element of ``b s f k / t`` (``k`` experts per token)."""
    bsf = _f(b) * _f(s) * _f(ffn) * _f(top_k) / np.maximum(_f(t), 1.0)
    return _f(n_mat) * _f(delta) * bsf, (_f(n_mat) + 2.0) * _f(delta) * bsf


LAYER_KERNELS: dict[str, tuple[float, float, float]] = {
    "linear": (4.0, 8.0, 0.0), "ln": (2.0, 2.0, 0.0), "elementwise": (3.0, 5.0, 0.0)}
"""Kernels of one transformer layer and micro-batch by dispatch kind (``traincast.kernels
.DISPATCH_KINDS``), ``(forward, backward, attention core)``, outside the attention core (which
:func:`layer_kernels` adds): the linear products (QKV, attention output, MLP up, a gated
MLP's gate and up as one product as Megatron's ``linear_fc1``, MLP down) forward, their data
and weight gradients backward; two LayerNorms each way; element-wise forward two
bias(+dropout)+add and the MLP activation, backward two (dropout+)add gradients, two
residual-gradient sums and the activation's gradient (the kernels :func:`memory_bytes_per_layer`
prices)."""
ACTIVATION_KERNELS: tuple[float, float] = (1.0, 1.0)
"""The MLP activation's kernels of :data:`LAYER_KERNELS` (one of its element-wise kernels each
way: forward and backward), what an eager layer's own activation chain replaces."""
HEAD_KERNELS: dict[str, tuple[float, float]] = {
    "linear": (1.0, 2.0), "ln": (1.0, 1.0), "elementwise": (6.0, 2.0)}
"""Kernels of the output head on the last stage, ``(forward, backward)``: the final norm, the
logit product and its two gradients, the fp32 cross-entropy's kernels
(:data:`CROSS_ENTROPY_BYTES`: cast, max, subtract, exp, sum, divide; backward scale and cast
back)."""


def layer_kernels(fused: bool, dropout: bool) -> dict[str, tuple[float, float, float]]:
    """Kernels of one layer and micro-batch by dispatch kind, ``(forward, backward, attention
    core)`` (the core is what selective recomputation repeats): :data:`LAYER_KERNELS` plus the
    attention core, materialized ``Q K^T`` and ``P V`` (``bmm``: 2 forward, 4 backward), the
    scale+mask+softmax (1, 1) and with dropout the attention dropout (element-wise: 1, 1),
    or one fused kernel each way (``bmm``: 1, 1; selective recomputation reruns its forward,
    1)."""
    out = dict(LAYER_KERNELS)
    if fused:
        out["bmm"] = (1.0, 1.0, 1.0)
        return out
    drop = 1.0 if dropout else 0.0
    fwd, bwd, _ = out["elementwise"]
    out.update(bmm=(2.0, 4.0, 2.0), softmax=(1.0, 1.0, 1.0),
               elementwise=(fwd + drop, bwd + drop, drop))
    return out


def inflight_microbatches(p: ArrayLike, m: ArrayLike, v: ArrayLike = 1,
                          gpipe: ArrayLike = False) -> F:
    """Micro-batches whose activations the first stage holds at once.

    1F1B: ``min(m, p)``, times ``1 + (p - 1) / (p v)`` with ``v > 1`` interleaved chunks
    (Korthikanti et al., 2022, Sec. 4.2.3); GPipe: all ``m``.
    """
    p, m, v = _f(p), _f(m), np.maximum(_f(v), 1.0)
    one_f1b = np.minimum(m, p) * np.where(v > 1, 1.0 + (p - 1.0) / (p * v), 1.0)
    return np.where(np.asarray(gpipe, dtype=bool), m, one_f1b)


def grad_accum_bytes(params: ArrayLike, delta: ArrayLike) -> F:
    """DRAM bytes of one unfused gradient-accumulation step over ``params`` parameters: read the
    new gradient and the accumulator, write the accumulator: ``3 delta`` per parameter (autograd's
    ``grad += new`` or Megatron's ``main_grad.add_(grad)`` hook, in the parameter dtype)."""
    return 3.0 * _f(delta) * _f(params)


def model_state_bytes(params: ArrayLike, d: ArrayLike, zero: ArrayLike,
                      dtype: str = "bf16") -> tuple[F, F, F]:
    """Weights, gradients and Adam state bytes on one GPU holding ``params`` parameters.

    Mixed precision (ZeRO paper, Sec. 3.1): weights ``2 Psi``, gradients ``2 Psi``, optimizer
    ``K Psi`` with K = 12; fp32 training: 4, 4, 8. ZeRO over ``d`` data-parallel ranks divides
    the optimizer state (stage >= 1), the gradients (>= 2) and the weights (3) by ``d``.
    """
    psi, d, z = _f(params), np.maximum(_f(d), 1.0), _f(zero)
    w = DTYPE_BYTES[dtype] * psi
    g = DTYPE_BYTES[dtype] * psi
    o = OPTIMIZER_BYTES[dtype] * psi
    return (np.where(z >= 3, w / d, w), np.where(z >= 2, g / d, g), np.where(z >= 1, o / d, o))
