"""The ``hybrid`` architecture: data (ZeRO 0-3), tensor, pipeline, expert and context parallelism
composed into one iteration time per GPU, vectorized over arrays of configurations.

For one micro-batch on the slowest pipeline stage (``L_s = l / p`` layers plus the output head),
every per-token term over the ``s / cp`` tokens of a sequence one context rank holds:

    T_flop  = L_s ((1 + full) T_lin_fwd + T_lin_bwd + (3 + full + selective) T_attn)
              + T_logit_fwd + T_logit_bwd                    (parallel/gemm.py: each product at
              R = P eta, divided by its tile/wave efficiency, or its operands' bytes at M mem_eff
              where slower; attention products at their roofline)
    T_mem   = sum_x [L_s ((1 + full) E_fwd,x + E_bwd,x + selective E_attn,x) (+ 52 b s V / t)]
              / (M f_x)
              (memory-bound kernels counted one by one, each family x = norm, softmax,
              element-wise at its fitted fraction f_x of the measured-kernel model; the fp32
              cross-entropy over the logits with the element-wise ones; with fp8 E_fwd and E_bwd
              include Transformer Engine's casts, C_fwd and C_bwd)
    T_acc   = 3 delta stage_params / (M f_elementwise)       (unfused gradient accumulation only)
    T_tp    = L_s n_ar (2 (t-1)/t b s h delta / bw_tp + 2 (t-1) latency)
    T_ep    = L_s 4 (e-1)/e (b s / t) k h delta / bw_ep      (MoE layers only)
    T_p2p   = 2 v (latency + b s h delta / scatter / bw_pp)  (p > 1)
    T_cp    = L_s ((1 + full + selective) X_fwd + X_bwd)     (cp > 1: the key/value ring the
              attention does not hide, X = (cp - 1) max(0, T_step - T_attn / cp))
    T_host  = sum_x d r_x (kernels of kind x the micro-batch issues)   (host_issue_s: eager
              dispatch, d r_x per op as the per-op model charges it)
    t_mb    = max(T_flop + T_mem + T_acc + T_tp + T_ep + T_p2p + T_cp, T_host)

and per iteration (``m = B / (d b)`` micro-batches)::

    T_pipe  = (m + (p - 1) / v) t_mb           (bubble: (p - 1) / v t_mb)
    T_dp    = ZeRO-stage volume / bw_dp        (strategies.dp_bytes over the d cp ranks that hold
              the same weights; bw_dp = min(intra, k nic) for k group members per node)
              + tied-embedding all-reduce between first and last stage
    T_opt   = 52 bytes (32 fp32) x optimizer-shard parameters / (M f_elementwise)
    T_data  = 16 s B / (d cp) / bw(pcie)       (token ids and labels, int64)
    T_total = T_data + max(T_pipe + T_opt, f T_dp) + (1 - f) T_dp      (f = overlap, default 0)

with ``P`` the GPU's dense peak of the dtype, ``eta`` its achievable GEMM fraction
(``traincast.compute.rates``: the catalog's ``gemm_max_fraction``; for fp32 the measured-kernel
model's large product), ``M`` its datasheet DRAM bandwidth
and ``f_x`` the achieved fraction of it of each memory-bound kernel family
(``traincast.kernels.memory_fractions``: fitted to measured kernels; a calibrated
``mem_efficiency`` wins, and a fused attention's operand traffic runs at ``M mem_eff``, the
catalog's ``mem_max_fraction``). Memory per GPU = weights + gradients
+ optimizer state (after ZeRO) + activations (Korthikanti et al.) of the first stage. Everything
is in docs/parallelism.md.

``evaluate`` composes one pure function per term: ``configs`` (the broadcast sizes, ``m``,
``L_s``), ``microbatch_flops``, ``gemm_time_s`` (T_flop), ``elementwise_time_s`` (T_mem),
``links`` and ``comm_time_s`` (T_tp, T_ep, T_p2p), ``cp_exchange_s`` (T_cp), ``host_issue_s``
(T_host), ``stage_params``,
``update_time_s`` (T_acc, T_opt), ``sync_time_s`` (T_dp), ``memory_bytes``, ``time_parts_s``
and ``throughput``.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache
from importlib import resources
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast import compute, kernels
from traincast.architectures import network_bps, ring_factor, ring_link_bps
from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.model import BOTTLENECK_LABEL, busy_parts_s, data_time_s, total_time_s
from traincast.parallel import gemm
from traincast.parallel import strategies as st
from traincast.parallel.models import ModelConfig
from traincast.resolve import resolve_link
from traincast.units import join_words
from traincast.zoo.llm import DEFAULT_CONFIG, window_work

F = NDArray[np.float64]
DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8")
ATTENTION: tuple[str, ...] = ("materialized", "flash1", "flash", "flash3", "cudnn", "efficient")
"""Attention implementations: ``materialized`` (Megatron-LM 2021: the ``b a s^2`` scores go
through DRAM and are kept as activations), ``flash1`` (a fused kernel at the first
FlashAttention's rate: flash-attn 1.x and its Triton port, as llm-foundry ran in 2023),
``flash`` (FlashAttention-2's rate: PyTorch SDPA, most stacks since late 2023), ``flash3``
(FlashAttention-3's rate, Hopper only), ``cudnn`` (cuDNN's fused attention: Transformer
Engine's ``FusedAttention``, its choice on compute capability 9.0 and later, and PyTorch SDPA's
cuDNN backend) and ``efficient`` (PyTorch SDPA's memory-efficient backend, xFormers' CUTLASS
kernels: its choice below compute capability 8.0, where FlashAttention-2 does not run): the
scores stay on chip; rates in ``parallel/flash_attention.toml``."""
FUSED: tuple[str, ...] = ("flash1", "flash", "flash3", "cudnn", "efficient")
"""The fused attentions: the scores never leave the SM."""
ATTENTION_WORDS: dict[str, str] = {
    "materialized": "the s x s scores go through memory, as Megatron-LM in 2021",
    "flash": "a fused kernel keeps them on chip, at FlashAttention-2's rate (compute "
             "capability 8.0 on, fp16/bf16)",
    "flash1": "at the first FlashAttention's (and its Triton port's), as 2023 stacks ran",
    "flash3": "at FlashAttention-3's (Hopper only)",
    "cudnn": "at cuDNN's fused attention's, Transformer Engine's pick from Hopper on",
    "efficient": "at PyTorch SDPA's memory-efficient kernel's, its pick below compute "
                 "capability 8.0 and in fp32; each fused rate by sequence and head size "
                 "(docs/parallelism.md)"}
"""What each :data:`ATTENTION` prices, in words (``--attention`` of predict and plan, the
llm-foundry line of ``validate --published``)."""
ATTENTION_HELP: str = "; ".join(f"{k}: {v}" for k, v in ATTENTION_WORDS.items())
"""The ``--attention`` help of predict and plan."""
TIME_PARTS: tuple[str, ...] = ("data_io", "compute_flop", "compute_mem", "comm_tp", "comm_pp",
                               "comm_ep", "comm_cp", "comm_dp", "bubble")
PART_LABEL: dict[str, str] = {
    "data_io": "data I/O", "compute_flop": "FLOP-bound compute",
    "compute_mem": "memory-bound compute", "comm_tp": "tensor-parallel all-reduces",
    "comm_pp": "pipeline point-to-point", "comm_ep": "expert all-to-alls",
    "comm_cp": "context-parallel key/value exchange",
    "comm_dp": "data-parallel gradient/parameter sync", "bubble": "pipeline bubble"}


@dataclass(frozen=True)
class HybridHardware:
    """Effective rates of one node preset for the hybrid model (``flops_per_s``: the achievable
    GEMM rate ``R = P eta``; link rates ``bw_gbs x efficiency`` in bytes/s;
    ``fused_flops_per_s``: fused attention's rate ``R_flash`` per kernel of :data:`FUSED`, 0
    where the kernel does not run)."""

    node: str
    gpu: str
    gpus_per_node: int
    peak_tflops: float
    flops_per_s: float
    mem_bw_bps: float
    mem_efficiency: float
    sms: float
    mem_bytes: float  # GPU memory (inf: the entry gives none, not checked)
    pcie_bps: float
    intra_bps: float
    nic_bps: float
    rails: float
    intra_latency_s: float
    nic_latency_s: float
    links: dict[str, str]
    fused_flops_per_s: dict[str, float] = field(default_factory=dict)
    mem_fractions: dict[str, float] = field(default_factory=dict)
    """Achieved fraction of ``M`` per memory-bound kernel family (``elementwise``, ``softmax``,
    ``norm``: ``traincast.kernels.memory_fractions``, the measured-kernel model's fit); a
    family without one runs at ``mem_efficiency``."""
    compute_capability: float = 0.0
    """The GPU's CUDA compute capability (catalog ``compute_capability``; 0 = not an NVIDIA GPU
    or not given): a recipe's ``sm90`` value applies from 9.0 on, and the fused kernels'
    gates (:meth:`FlashRates.of`)."""
    vendor: str = "nvidia"
    """The catalog's ``vendor`` (``nvidia``, ``amd``): cuDNN's and the first FlashAttention's
    kernels run on NVIDIA GPUs only."""
    attention_dtype: str = "bf16"
    """The dtype of the attention's tensors (:data:`FLASH_DTYPE`: bf16 in an fp8 job, fp32 in
    a tf32 one)."""
    matrix_dtype: str = ""
    """The dtype whose tiles the linear products run (``GPU.math_dtype`` of the job's: fp32
    for a tf32 job on a GPU whose TF32 peak is no higher than its FP32 one); empty: the
    job's dtype."""
    compute: str = "kernel"
    """The compute strategy (``traincast.compute.strategy_of``): under ``paper`` every GEMM at
    ``R``, every memory-bound byte at ``M mem_efficiency``, no waves, no family fractions."""
    compute_why: str = ""
    """Why the GPU is priced at flat peaks (``traincast.compute.paper_why``), "" when not."""
    dispatch_s: dict[str, float] = field(default_factory=dict)
    """The host's time to issue one op of each dispatch kind, ``d r_x`` (seconds; the kernel
    strategy's ``kernels.op_floor_s`` times the fitted dispatch ratio of ``x``, as the per-op
    model charges each op of a profile); empty (no host term) under the other strategies."""

    def fused_rate(self, attention: str) -> float:
        """``R_flash`` of the fused attention ``attention`` (one of :data:`FUSED`; 0 where it
        does not run)."""
        return self.fused_flops_per_s.get(attention, 0.0)

    @property
    def gemm_efficiency(self) -> float:
        """Achievable fraction of the dense peak: ``eta = R / P``."""
        return self.flops_per_s / (self.peak_tflops * 1e12)

    @property
    def intra_coll_bps(self) -> float:
        """Collective (NCCL bus) bandwidth inside a node: the intra link's rate, ``intra_bps``."""
        return self.intra_bps

    @property
    def nic_coll_bps(self) -> float:
        """Collective bandwidth of one network port: the NIC's rate, ``nic_bps``."""
        return self.nic_bps

    @property
    def mem_eff_bps(self) -> float:
        """Achievable DRAM bandwidth of a streaming kernel: ``M mem_efficiency`` (the fused
        attention's operand traffic)."""
        return self.mem_bw_bps * self.mem_efficiency

    def memory_bps(self, family: str) -> float:
        """Bandwidth of the memory-bound kernels of ``family`` (``elementwise``, ``softmax``,
        ``norm``): ``M f_family`` with the fitted fraction (:attr:`mem_fractions`), else
        ``M mem_efficiency``."""
        return self.mem_bw_bps * self.mem_fractions.get(family, self.mem_efficiency)


def require_fused_rate(hw: HybridHardware, attention: str) -> float:
    """``R_flash`` of the fused attention ``attention`` on ``hw``; a TraincastError naming the
    GPU, why the kernel does not run there (its dtype, compute capability or vendor, or
    Hopper only: :func:`why_not_runs`) and the kernels that do, when its rate is 0."""
    rate = hw.fused_rate(attention)
    if rate <= 0:
        runs = [k for k in FUSED if hw.fused_rate(k) > 0] + ["materialized"]
        raise TraincastError(f"{hw.gpu}: attention {attention} has no rate here: "
                             f"{why_not_runs(hw, attention)}",
                             hint=f"on {hw.gpu} in {hw.attention_dtype} use {', '.join(runs)} "
                                  "(parallel/flash_attention.toml)")
    return rate


def why_not_runs(hw: HybridHardware, attention: str) -> str:
    """Why a fused kernel has no rate on ``hw`` (:meth:`FlashRates.blocked`, else no fraction
    for this GPU: FlashAttention-3 runs on Hopper only)."""
    return flash_rates().blocked(attention, hw.compute_capability, hw.vendor,
                                 hw.attention_dtype) or (
        "no published or measured rate for this GPU (FlashAttention-3: Hopper only)")


FLASH_DTYPE: dict[str, str] = {"fp8": "bf16", "tf32": "fp32"}
"""The dtype fused attention runs in when it differs from the model's: Transformer Engine's
fp8 recipe runs only the linear layers in fp8, attention in bf16; a tf32 job's attention takes
fp32 tensors (TF32 is a math mode of fp32 products)."""


def shape_curve(s: ArrayLike, d: ArrayLike, causal: ArrayLike, s0: ArrayLike, d0: ArrayLike,
                block_tokens: float, d_max: float = math.inf) -> F:
    """A fused attention's rate by shape over its long-sequence rate at infinite head size::

        g(s, d) = d' / (d' + d_0) · s / (s + s_eff),   s_eff = s_0 (full), T + 2 s_0 (causal)

    ``s_0`` (tokens): one block of queries' fixed work (loading it, writing its output and
    gradients, the softmax's last rescale) as keys' worth of products, so a row of ``s`` keys
    costs ``s + s_0``; under a causal mask the ``T``-token block on the diagonal runs whole
    (``s^2 / 2 (1 + T / s)`` executed for ``s^2 / 2`` counted) and the fixed work weighs on half
    the products. ``d_0``: the exponentials and rescales of a score, which do not grow with
    ``d``, as head dimensions' worth of products; ``d' = min(d, d_max)``, the head size held at
    the largest one the curve rests on. ``causal`` is 0 or 1 (or a bool)."""
    s, d = _i(s), np.minimum(_i(d), d_max)
    s_eff = np.where(_i(causal) > 0, block_tokens + 2.0 * _i(s0), s0)
    return d / (d + d0) * s / (s + s_eff)


def median_shape(reference: tuple[tuple[float, float, bool], ...], s0: float, d0: float,
                 block_tokens: float, d_max: float = math.inf) -> float:
    """``g_ref``: the median of :func:`shape_curve` over the shapes ``(s, d, causal)``."""
    s, d, c = (np.array(x, dtype=np.float64) for x in zip(*reference, strict=True))
    return float(np.median(shape_curve(s, d, c, s0, d0, block_tokens, d_max)))


@dataclass(frozen=True)
class FlashRates:
    """``parallel/flash_attention.toml``: the causal share of the full-square FLOPs, the
    backward's FLOPs over the forward's, the achieved fraction of the dense peak per GPU and
    the rate's shape per kernel (``[shape]``)."""

    causal_fraction: float
    backward_factor: float
    fraction: dict[tuple[str, str], float]
    """(kernel: ``flash1``, ``flash``, ``flash3`` = FlashAttention-1, -2, -3, ``cudnn`` =
    cuDNN's fused attention, ``efficient`` = PyTorch SDPA's memory-efficient kernel; GPU) ->
    the achieved fraction of the dense peak at the kernel's reference shapes."""
    default_fraction: dict[str, float]
    """Per kernel, the fraction of a GPU without one of its own (FlashAttention's A100 figures,
    cuDNN's H200 measurement, the memory-efficient kernel's scaled off Hopper; none for
    ``flash3``)."""
    min_compute_capability: dict[str, float] = field(default_factory=dict)
    """Per kernel, the CUDA compute capability it needs (``flash``, ``cudnn``: 8.0; ``flash1``:
    7.5; ``efficient``: 5.0); an NVIDIA GPU below a given one has no rate for it."""
    dtypes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per kernel, the dtypes of the tensors it takes (FlashAttention and cuDNN: fp16, bf16;
    the memory-efficient kernel fp32 too); in another it has no rate."""
    sources: dict[tuple[str, str], str] = field(default_factory=dict)
    """(kernel, GPU) -> where its fraction comes from; per kernel under ``""`` the default's."""
    nvidia_only: frozenset[str] = frozenset()
    """Kernels with no rate on another vendor's GPU (``cudnn``, ``flash1``)."""
    seq_overhead_tokens: dict[str, float] = field(default_factory=dict)
    """Per kernel, ``s_0``: one query block's fixed work as keys' worth of products (tokens)."""
    head_dim_overhead: dict[str, float] = field(default_factory=dict)
    """Per kernel, ``d_0``: the per-score exponentials and rescales as head dimensions."""
    head_dim_max: dict[str, float] = field(default_factory=dict)
    """Per kernel, the largest head size the curve rests on; a wider head is priced at it."""
    windowed: frozenset[str] = frozenset()
    """Kernels that skip the key blocks outside a sliding window (the others run the whole
    causal square)."""
    head_dim_templates: dict[str, tuple[float, ...]] = field(default_factory=dict)
    """Per kernel, the head sizes it is compiled for, ascending (a narrower head runs the next
    one up, :meth:`kernel_head_dim`); none: every head runs at its own size."""
    block_tokens: float = 128.0
    """``T``: the square block on the diagonal that runs whole under a causal mask."""
    g_ref: dict[str, float] = field(default_factory=dict)
    """Per kernel, ``g_ref``: the median of ``g`` over the shapes its fraction is read at (the
    file's reference shapes, or the kernel's own: FlashAttention-3's 0.75, a forward pass at
    16k tokens, head size 256, no mask)."""

    def shape(self, attention: str, seq: ArrayLike, head_dim: ArrayLike,
              causal: ArrayLike = True) -> F:
        """``g(s, d)`` of kernel ``attention`` (:func:`shape_curve`)."""
        return shape_curve(seq, head_dim, causal, self.seq_overhead_tokens[attention],
                           self.head_dim_overhead[attention], self.block_tokens,
                           self.head_dim_max.get(attention, math.inf))

    def shape_factor(self, attention: str, seq: ArrayLike, head_dim: ArrayLike) -> F:
        """The causal rate at sequence ``seq`` and head size ``head_dim`` over the kernel's
        fraction: ``g(s, d) / g_ref``."""
        return self.shape(attention, seq, head_dim) / self.g_ref[attention]

    def kernel_head_dim(self, attention: str, head_dim: ArrayLike) -> F:
        """``d_k``: the head size the kernel runs a head of ``head_dim`` at, the smallest of its
        :attr:`head_dim_templates` at least ``head_dim`` (its products padded with zeros);
        ``head_dim`` itself for a kernel without templates or a head wider than them all."""
        d = _i(head_dim)
        sizes = np.asarray(self.head_dim_templates.get(attention, ()), dtype=np.float64)
        if not sizes.size:
            return d
        i = np.searchsorted(sizes, d, side="left")
        return np.where(i < sizes.size, sizes[np.minimum(i, sizes.size - 1)], d)

    def rate_factor(self, attention: str, seq: ArrayLike, head_dim: ArrayLike) -> F:
        """The rate of the counted FLOPs (``4 b s^2 a d``, the head's own size) over the
        kernel's fraction: the curve at the size it runs, times the useful share of its
        products::

            g(s, d_k) / g_ref x d / d_k        (d_k: :meth:`kernel_head_dim`)"""
        d = _i(head_dim)
        d_k = self.kernel_head_dim(attention, d)
        return self.shape_factor(attention, seq, d_k) * d / d_k

    def blocked(self, attention: str, compute_capability: float, vendor: str = "nvidia",
                dtype: str | None = None) -> str:
        """Why kernel ``attention`` does not run on a GPU, or ``""``: ``dtype`` (the
        attention's, :data:`FLASH_DTYPE`) not one it takes (:attr:`dtypes`), another
        ``vendor`` for an NVIDIA-only kernel (:attr:`nvidia_only`), or a known
        ``compute_capability`` (> 0) below its ``min_compute_capability``. An NVIDIA entry
        without a compute capability (0) is not gated: the catalog does not say what it
        runs."""
        if dtype is not None and dtype not in self.dtypes.get(attention, (dtype,)):
            return f"it takes {' or '.join(self.dtypes[attention])} tensors, not {dtype}"
        if vendor != "nvidia" and attention in self.nvidia_only:
            return f"it runs on NVIDIA GPUs only, not {vendor}"
        least = self.min_compute_capability.get(attention, 0.0)
        if 0 < compute_capability < least:
            return f"it needs compute capability {least:.1f}, the GPU has {compute_capability:.1f}"
        return ""

    def of(self, attention: str, gpu: str, compute_capability: float,
           vendor: str = "nvidia", dtype: str | None = None) -> float | None:
        """The fraction for fused attention ``attention`` on ``gpu``: the GPU's own, else the
        kernel's default; None where it does not run (:meth:`blocked`) and for ``flash3`` off
        the GPUs it runs on."""
        if self.blocked(attention, compute_capability, vendor, dtype):
            return None
        return self.fraction.get((attention, gpu), self.default_fraction.get(attention))


@cache
def package_toml(name: str) -> dict[str, Any]:
    """A data file shipped in ``traincast.parallel`` (``recipes.toml``, ...), parsed once; the
    caller must not change it (copy first)."""
    return tomllib.loads(resources.files("traincast.parallel").joinpath(name).read_text())


@lru_cache(maxsize=1)
def flash_rates() -> FlashRates:
    """The shipped fused-attention rates (``parallel/flash_attention.toml``, each with its
    published source)."""
    raw = package_toml("flash_attention.toml")
    shape = raw["shape"]
    block = float(shape["block_tokens"])
    s0 = {k: float(v) for k, v in shape["seq_overhead_tokens"].items()}
    d0 = {k: float(v) for k, v in shape["head_dim_overhead"].items()}
    d_max = {k: float(v) for k, v in shape["head_dim_max"].items()}
    templates = {k: tuple(sorted(float(x) for x in v))
                 for k, v in shape.get("head_dim_templates", {}).items()}
    own = {k: _shapes(v["seq_tokens"], v["head_dims"], v["causal"])
           for k, v in shape.get("reference_by_kernel", {}).items()}
    common = reference_shapes()
    return FlashRates(causal_fraction=float(raw["causal_fraction"]),
                      backward_factor=float(raw["backward_factor"]),
                      fraction={(str(r["kernel"]), gpu): float(r["fraction"])
                                for r in raw["rate"] for gpu in r["gpus"]},
                      default_fraction={k: float(v) for k, v in
                                        raw["default_fraction"].items()},
                      min_compute_capability={k: float(v) for k, v in
                                              raw.get("min_compute_capability", {}).items()},
                      nvidia_only=frozenset(raw.get("nvidia_only", [])),
                      sources={**{(str(r["kernel"]), gpu): str(r["source"])
                                  for r in raw["rate"] for gpu in r["gpus"]},
                               **{(k, ""): str(v) for k, v in raw["default_source"].items()}},
                      dtypes={k: tuple(v) for k, v in raw["dtypes"].items()},
                      seq_overhead_tokens=s0, head_dim_overhead=d0, head_dim_max=d_max,
                      head_dim_templates=templates, block_tokens=block,
                      windowed=frozenset(raw.get("windowed", [])),
                      g_ref={k: median_shape(own.get(k, common), s0[k], d0[k], block,
                                             d_max.get(k, math.inf)) for k in s0})


def reference_shapes() -> tuple[tuple[float, float, bool], ...]:
    """The shapes ``(s, d, causal)`` a ``[[rate]]`` fraction is read at, unless its kernel has
    its own: ``[shape]``'s sequences x head sizes x both masks."""
    shape = package_toml("flash_attention.toml")["shape"]
    return _shapes(shape["reference_seq_tokens"], shape["reference_head_dims"], (True, False))


def _shapes(seqs: list[int], head_dims: list[int], causal: Any
            ) -> tuple[tuple[float, float, bool], ...]:
    return tuple((float(s), float(d), bool(c)) for s in seqs for d in head_dims for c in causal)


def hybrid_hardware(catalog: Catalog | None, node: str, dtype: str = "bf16", *,
                    gpu: str | None = None, nic: str | None = None, intra: str | None = None,
                    pcie: str | None = None) -> HybridHardware:
    """The rates of a node preset (with optional overrides) for the hybrid model, the same as
    :func:`traincast.resolve.resolve` gives every architecture (each link looked up once,
    :func:`traincast.resolve.resolve_link`: a catalog name or a speed).

    Fused attention: ``R_flash = fraction x P_attn`` (:func:`flash_rates`, ``P_attn`` the
    dense peak of the dtype, bf16 for fp8); a GPU without a fraction of its own for
    FlashAttention-2 or -1 takes the kernel's A100 one (0.50, 0.25), for cuDNN's fused
    attention the H200's measured 0.44, for the memory-efficient kernel 0.22 (the H200's 0.12
    scaled off Hopper); FlashAttention-3 has no rate off Hopper, FlashAttention-2 and cuDNN's
    none below compute capability 8.0, FlashAttention-1 none below 7.5, cuDNN's none off
    NVIDIA.

    GEMM and DRAM rates: the compute strategy the catalog selects for the GPU
    (:func:`traincast.compute.rates` with ``streaming``: under ``kernel`` a calibrated
    ``flop_efficiency`` < 1, else for fp32 the measured-kernel model's large product, else the
    published ``gemm_max_fraction``, else ``kernels.DEFAULT_GEMM_MAX_FRACTION``; the streaming
    ``mem_max_fraction`` the same way, its fallback ``kernels.DEFAULT_MEM_MAX_FRACTION``; the
    memory-bound families at ``kernels.memory_fractions``). SM count for GEMM wave
    quantization: the catalog's ``sms`` (0 = none). Collective bandwidth: the link's ``bw_gbs``
    times its ``efficiency`` (NCCL bus bandwidth where measured); ``rails`` = the node's
    ``nics``.
    """
    catalog = catalog or load_catalog()
    check_dtype(dtype)
    nd = catalog.node(node)
    g = catalog.gpu(gpu or nd.gpu)
    if getattr(g, f"{dtype}_tflops") <= 0:
        has = [d for d in DTYPES if getattr(g, f"{d}_tflops") > 0]
        raise TraincastError(f"{g.name} has no {dtype} peak in the catalog (unsupported dtype)",
                             hint=f"choose a dtype {g.name} has: {', '.join(has)}")
    flops_per_s, mem_bps = compute.rates(g, dtype, catalog.compute, streaming=True)
    strategy = compute.strategy_of(g, catalog.compute)
    paper = strategy == "paper"  # the paper's flat rates: no waves, one memory rate
    attn_dtype = FLASH_DTYPE.get(dtype, dtype)
    attn_peak = g.peak_tflops(attn_dtype) * 1e12
    cc = compute.compute_capability_of(g)
    flash = {kernel: (flash_rates().of(kernel, g.name, cc, g.vendor, attn_dtype) or 0.0)
             * attn_peak for kernel in FUSED}  # 0: the kernel does not run here
    links = {role: resolve_link(catalog, spec or getattr(nd, role))
             for role, spec in (("pcie", pcie), ("intra", intra), ("nic", nic))}
    floor_s = kernels.op_floor_s(g) if strategy == "kernel" else 0.0
    ratios = kernels.dispatch_table(getattr(g, "kernel", {}) or {})
    dispatch = {} if floor_s <= 0 else {
        kind: floor_s * float(kernels.dispatch_ratios([kind], ratios)[0]) for kind in
        ("linear", "bmm", "softmax", "ln", "elementwise")}
    return HybridHardware(node=node, gpu=g.name, gpus_per_node=nd.gpus,
                          peak_tflops=g.peak_tflops(dtype), flops_per_s=flops_per_s,
                          mem_bw_bps=g.mem_bw_gbs * 1e9,
                          mem_efficiency=mem_bps / (g.mem_bw_gbs * 1e9),
                          sms=0.0 if paper else float(g.sms),
                          # an entry without mem_gb (a calibrated one) is not checked: inf
                          mem_bytes=g.mem_gb * 1e9 if g.mem_gb and g.mem_gb > 0 else np.inf,
                          pcie_bps=links["pcie"].bw_bps, intra_bps=links["intra"].bw_bps,
                          nic_bps=links["nic"].bw_bps, rails=float(nd.nics),
                          intra_latency_s=links["intra"].latency_us * 1e-6,
                          nic_latency_s=links["nic"].latency_us * 1e-6,
                          links={k: links[k].name for k in links},
                          fused_flops_per_s=flash, compute=strategy,
                          compute_why=compute.paper_why(g, catalog.compute),
                          compute_capability=cc, vendor=g.vendor, attention_dtype=attn_dtype,
                          matrix_dtype=g.math_dtype(dtype),
                          mem_fractions={} if paper else kernels.memory_fractions(g),
                          dispatch_s=dispatch)


def divisors(n: int) -> NDArray[np.int64]:
    """Positive divisors of ``n`` in increasing order."""
    k = np.arange(1, n + 1)
    return k[n % k == 0]


def _i(x: ArrayLike) -> F:
    return np.asarray(x, dtype=np.float64)


def check_shapes(model: ModelConfig, dp: F, tp: F, pp: F, ep: F, zero: F, mb: F, gb: F,
                 vp: F, uneven_stages: bool = False, cp: ArrayLike = 1.0, seq: float = 0.0,
                 fused: bool = True, shard: ArrayLike = 0.0,
                 fsdp_pp: bool = False) -> NDArray[np.int64]:
    """Reason code per configuration: 0 valid, else the index into ``SHAPE_ERRORS``
    (``uneven_stages``: layers need not divide evenly over ``pp vp`` chunks, only be at least
    one per chunk). Context parallelism (``cp > 1``) needs a fused attention (``fused``: the
    ring exchange runs inside Transformer Engine's fused attention) and a sequence ``seq``
    divisible by ``2 cp`` (each rank holds two of ``2 cp`` chunks, one early and one late, so
    that causal attention costs every rank the same). Tensor parallelism splits the attention
    heads and the key/value heads (Megatron-Core's ``num_query_groups_per_partition =
    divide(num_query_groups, tp)``), so ``tp`` divides both. A shard group (``shard`` > 0,
    :attr:`Configs.shard`) divides the ``dp cp`` data-parallel ranks; one smaller than them
    (HSDP) needs ZeRO 1 to 3 (something to shard) and ``ep = 1`` (the experts then shard
    and replicate with the dense state). ZeRO 2 and 3 take no pipeline unless ``fsdp_pp`` (the
    stack's FSDP under PyTorch's pipelining, priced as ZeRO 1: :func:`priced_zero`)."""
    cp, shard = _i(cp), _i(shard)
    group = dp * cp
    with np.errstate(divide="ignore", invalid="ignore"):
        m = gb / (dp * mb)
    checks = [
        np.ones_like(dp, dtype=bool),
        (dp >= 1) & (tp >= 1) & (pp >= 1) & (ep >= 1) & (mb >= 1) & (vp >= 1) & (cp >= 1),
        np.isclose(m, np.round(m)) & (m >= 1),
        (model.heads % tp == 0) & (model.kv % tp == 0),
        (model.layers % (pp * vp) == 0) | (uneven_stages & (model.layers >= pp * vp)),
        (vp == 1) | ((pp > 1) & (np.round(m) % pp == 0)),
        (ep == 1) | ((model.experts % ep == 0) & (dp % ep == 0)),
        (zero >= 0) & (zero <= 3),
        (zero <= 1) | (pp == 1) | fsdp_pp,
        (cp <= 1) | fused,
        (cp <= 1) | (np.fmod(seq, 2.0 * np.maximum(cp, 1.0)) == 0),
        (shard <= 0) | ((shard <= group) & (np.fmod(group, np.maximum(shard, 1.0)) == 0)),
        (shard <= 0) | (shard >= group) | ((zero >= 1) & (ep == 1)),
    ]
    code = np.zeros(np.broadcast(*checks).shape, dtype=np.int64)
    for i in range(len(checks) - 1, 0, -1):
        code = np.where(~checks[i], i, code)
    return code


SHAPE_ERRORS: tuple[str, ...] = (
    "", "every size must be at least 1",
    "global batch must be a multiple of dp x micro-batch",
    "tensor-parallel size must divide the attention (and key/value) heads",
    "layers must be a multiple of pp x vp",
    "interleaving (vp > 1) needs pp > 1 and micro-batches a multiple of pp",
    "expert-parallel size must divide the experts and dp",
    "zero must be 0, 1, 2 or 3",
    "ZeRO-2/3 shard gradients per micro-batch and do not combine with pipeline parallelism "
    "(use zero 0 or 1 with pp > 1)",
    "context parallelism (cp > 1) needs a fused attention (--attention flash1, flash, flash3, "
    "cudnn or efficient, as the GPU runs them, or a --framework that sets one: megatron-core "
    "from compute capability 8.0)",
    "context parallelism needs a sequence divisible by 2 x cp (each rank holds two of 2 cp "
    "pieces)",
    "the shard group (--shard) must divide the data-parallel ranks, dp x cp",
    "a shard group smaller than dp x cp (HSDP) needs ZeRO 1, 2 or 3 (--zero) and ep 1")
(SHAPE_SIZES, SHAPE_BATCH, SHAPE_TP, SHAPE_LAYERS, SHAPE_VP, SHAPE_EP, SHAPE_ZERO, SHAPE_ZERO_PP,
 SHAPE_CP_FUSED, SHAPE_CP_SEQ, SHAPE_SHARD, SHAPE_SHARD_ZERO) = range(1, len(SHAPE_ERRORS))
"""The codes of :func:`check_shapes`, by rule (``SHAPE_ERRORS[code]`` says it)."""


@dataclass(frozen=True)
class Configs:
    """The configurations of one :func:`evaluate` call, broadcast to one shape: sizes ``d t p e
    cp`` (data, tensor, pipeline, expert, context), ZeRO stage ``z``, micro-batch ``b``, global
    batch ``gb`` (``B``), recompute code ``r``, chunks per stage ``v``, sequence parallelism
    ``sp`` and the schedule ``gpipe`` (as given); sequence ``s``, ``dtype`` and its bytes
    ``delta``; and what follows from them: ``m = B / (d b)`` micro-batches, ``layers_stage``
    (``L_s``, the slowest stage's layers) and the 0/1 indicators ``full``, ``selective`` and
    ``op`` (``selective-op``) of the recompute mode; ``attention``, one of :data:`ATTENTION`
    for all of them."""

    d: F
    t: F
    p: F
    e: F
    cp: F
    z: F
    b: F
    gb: F
    r: F
    v: F
    sp: NDArray[np.bool_]
    gpipe: ArrayLike
    s: float
    dtype: str
    delta: float
    m: F
    layers_stage: F
    attention: str = "materialized"
    dropout: bool = True
    """Attention and hidden dropout on (Megatron's kernels and masks) or off."""
    fp8_weight_cache: bool = False
    """With dtype fp8: the weights' fp8 copies made on the first micro-batch and reused by
    the others of the iteration (Transformer Engine's ``is_first_microbatch``), else made
    every micro-batch (:func:`fp8_cast_bytes_per_layer`)."""
    eager: bool = False
    """The layer's norms, rotary embedding and gated activation as eager PyTorch ops, one
    kernel per op (:func:`eager_layer`), instead of fused kernels."""
    shard: F = field(default_factory=lambda: np.ones(1))
    """The data-parallel ranks ZeRO shards the dense model state over: all ``d cp`` of
    :attr:`dp_group`, or fewer, the state then replicated over :attr:`replicas` such groups
    (HSDP: PyTorch FSDP's ``HYBRID_SHARD``, FSDP2's 2-D device mesh, typically one node's
    ranks; ``configs(shard=...)``, which sets it)."""

    @property
    def s_rank(self) -> F:
        """Tokens of each sequence on one GPU: ``s / cp`` (context parallelism splits every
        activation along the sequence; 1 context rank holds the whole ``s``)."""
        return self.s / self.cp

    @property
    def full(self) -> F:
        """1 where the recompute code ``r`` is full recomputation, else 0."""
        return (self.r == st.RECOMPUTE_CODE["full"]).astype(np.float64)

    @property
    def selective(self) -> F:
        """1 where ``r`` is selective recomputation (the attention core), else 0."""
        return (self.r == st.RECOMPUTE_CODE["selective"]).astype(np.float64)

    @property
    def op(self) -> F:
        """1 where ``r`` is ``selective-op`` (torchtitan's policy), else 0."""
        return (self.r == st.RECOMPUTE_CODE["selective-op"]).astype(np.float64)

    @property
    def dp_group(self) -> F:
        """The ranks that hold the same weights and reduce their gradients together:
        ``d cp`` (Megatron-Core folds the context-parallel ranks into the data-parallel
        gradient reduction and the distributed optimizer's sharding)."""
        return self.d * self.cp

    @property
    def shard_group(self) -> F:
        """``g_s``: the ranks ZeRO shards the dense model state over (:attr:`shard`; ``d cp``
        unless HSDP)."""
        return self.shard

    @property
    def replicas(self) -> F:
        """``r = d cp / g_s``: the shard groups that each hold a whole copy of the state (1
        without HSDP)."""
        return self.dp_group / self.shard_group

    @property
    def expert_shard_group(self) -> F:
        """The ranks ZeRO shards the expert state over: the ``d cp / e`` of
        :attr:`expert_dp_group`, over the :attr:`replicas` with HSDP (which needs ``e = 1``:
        the experts then shard and replicate as the dense state does)."""
        return self.expert_dp_group / self.replicas

    @property
    def expert_dp_group(self) -> F:
        """The ranks that hold the same experts: ``d cp / e`` (expert parallelism splits the
        experts over ``e`` of the data-parallel ranks, so each expert's copies, and the
        sharding of their optimizer state, span the rest: Megatron-Core's expert-data-parallel
        group)."""
        return self.d * self.cp / self.e


def attention_reruns(c: Configs) -> F:
    """How many times the attention core's forward runs again in the backward pass: 1 with
    full or selective recomputation, and with ``selective-op`` where the attention is
    materialized (its products and softmax are not among the ops torchtitan's policy keeps; a
    fused kernel's output is, so it is not rerun); else 0."""
    return c.full + c.selective + (0.0 if c.attention in FUSED else c.op)


def forward_reruns(c: Configs) -> F:
    """How many times a layer's forward kernels outside the linear products and the attention
    core (norms, activations, residual adds, casts) run again: 1 with full or ``selective-op``
    recomputation (torchtitan's policy keeps only the products' and the attention's outputs),
    else 0."""
    return c.full + c.op


def priced_zero(zero: ArrayLike, pp: ArrayLike, fsdp_pp: bool) -> F:
    """The ZeRO stage a configuration is priced at: ``zero``, but 1 for ZeRO 2 or 3 with
    ``pp > 1`` on a stack whose FSDP runs under PyTorch's pipelining (``fsdp_pp``, the recipe
    knob): torchtitan keeps a stage's parameters unsharded after the forward
    (``reshard_after_forward=False``) and the pipeline stage turns gradient sync off until the
    last micro-batch's backward, so the parameters are gathered once and the gradients
    reduce-scattered once per iteration, with whole parameters and gradients in memory and the
    optimizer state sharded: ZeRO 1's traffic and memory."""
    z, p = _i(zero), _i(pp)
    return np.where(fsdp_pp & (p > 1) & (z >= 2), 1.0, z)


def zero_label(zero: int, priced: int) -> str:
    """A configuration's ZeRO stage as a table and a title print it: ``zero=3``, or
    ``zero=3(as 1)`` where it is priced at another stage (:func:`priced_zero`)."""
    return f"zero={zero}" + (f"(as {priced})" if priced != zero else "")


def configs(model: ModelConfig, *, dp: ArrayLike, tp: ArrayLike, pp: ArrayLike, ep: ArrayLike,
            zero: ArrayLike, micro_batch: ArrayLike, global_batch: ArrayLike,
            recompute: ArrayLike, vp: ArrayLike, sp: ArrayLike | None, gpipe: ArrayLike,
            seq: int | None, dtype: str, attention: str = "materialized",
            dropout: bool = True, cp: ArrayLike = 1, fp8_weight_cache: bool = False,
            shard: ArrayLike = 0, eager: bool = False, fsdp_pp: bool = False) -> Configs:
    """The sizes as float arrays of one broadcast shape, with ``m = B / (d b)``,
    ``L_s = v ceil(l / (p v))`` (``l / p`` whenever the layers divide evenly) and ``sp``
    defaulting to ``t > 1`` (off at ``t = 1`` whatever is asked: nothing to split); ``shard``
    0 (or below 1) is every data-parallel rank, ``d cp`` (:attr:`Configs.shard`); ``z`` the
    stage :func:`priced_zero` prices (``fsdp_pp``)."""
    d, t, p, e, z = _i(dp), _i(tp), _i(pp), _i(ep), priced_zero(zero, pp, fsdp_pp)
    b, gb, r, v, k = _i(micro_batch), _i(global_batch), _i(recompute), _i(vp), _i(cp)
    d, t, p, e, z, b, gb, r, v, k, g_s = np.broadcast_arrays(d, t, p, e, z, b, gb, r, v, k,
                                                              _i(shard))
    sp_arr = (t > 1) & (True if sp is None else np.asarray(sp, dtype=bool))  # nothing to split
    return Configs(d=d, t=t, p=p, e=e, cp=k, z=z, b=b, gb=gb, r=r, v=v, sp=sp_arr, gpipe=gpipe,
                   s=float(seq or model.seq), dtype=dtype, delta=float(st.DTYPE_BYTES[dtype]),
                   m=gb / (d * b), layers_stage=np.ceil(float(model.layers) / (p * v)) * v,
                   attention=check_attention(attention), dropout=bool(dropout),
                   fp8_weight_cache=bool(fp8_weight_cache), eager=bool(eager),
                   shard=np.where(g_s >= 1, g_s, d * k))


def microbatch_flops(model: ModelConfig, c: Configs) -> tuple[F, F, F]:
    """Forward FLOPs of one micro-batch, model-wide (before any split over ``t``), for the
    throughput metrics: per layer the linear products ``f_gemm = 2 b s (P_attn + k P_mlp)``
    (matrix parameters, ``k`` experts per token) and attention ``f_attn = 4 b s^2 a d``; once,
    the logits ``f_logit = 2 b s (e V + 2 e h [e != h])`` (``e`` the embedding's width,
    ``h`` but for OPT-350m, with its two projections). Returns ``(f_gemm, f_attn, f_logit)``."""
    f_gemm = 2.0 * c.b * c.s * (model.attn_matrix_params
                                + float(model.top_k) * model.mlp_matrix_params)
    f_attn = 4.0 * c.b * c.s * c.s * float(model.q_dim)
    f_logit = 2.0 * c.b * c.s * (float(model.embed_width) * float(model.vocab)
                                 + float(model.projection_params))
    return f_gemm, f_attn, f_logit


def kernel_window_work(model: ModelConfig, seq: ArrayLike, attention: str) -> F:
    """``W(s)``, the share of the causal attention's work kernel ``attention`` runs for a
    model with a sliding window (``zoo.llm.window_work``): the kernels that take a window
    (:attr:`FlashRates.windowed`: FlashAttention-2 and -3, cuDNN's) skip the key blocks outside
    it; the others (the first FlashAttention, the memory-efficient kernel, materialized
    attention) compute the whole causal square, the window a mask: 1."""
    if attention not in flash_rates().windowed:
        return np.ones_like(_i(seq))
    return _i(window_work(seq, model.window, model.window_share))


def flash_attention_work(model: ModelConfig, c: Configs) -> tuple[F, F, F, F]:
    """FLOPs and DRAM bytes of the fused attention kernel of one layer and micro-batch on one
    GPU (``attention = "flash"``; ``a`` heads, ``kv`` key/value heads of size ``d``; ``s_r =
    s / cp`` the tokens of a sequence on one context rank)::

        F_fwd = c_causal 4 b s^2 a d W(s) / (t cp)        F_bwd = 2.5 F_fwd
        B_fwd = delta b (2 s_r a d + 2 s kv d) / t        (read Q, K, V; write O)
        B_bwd = delta b (4 s_r a d + 4 s kv d) / t        (read Q, K, V, O, dO; write dQ,
                                                           dK, dV)

    ``c_causal`` (1/2: a causal mask skips the tiles above the diagonal) and the backward's 2.5
    (5 matmuls to the forward's 2, the scores recomputed) from ``flash_attention.toml``;
    ``W(s)`` the share of that work a sliding window leaves (:func:`kernel_window_work`: 1
    without one, and for a kernel that takes no window). The
    scores never reach DRAM. With context parallelism each rank's queries meet every key, and
    the load-balanced split gives each rank ``1 / cp`` of the causal work; its kernels read the
    K and V chunks of all ``s`` tokens as they arrive (:func:`cp_exchange_s`) and write their
    gradients. Returns ``(F_fwd, F_bwd, B_fwd, B_bwd)``."""
    rates = flash_rates()
    qd, kvd = float(model.q_dim), float(model.kv_dim)
    f_fwd = (rates.causal_fraction * 4.0 * c.b * c.s * c.s * qd / (c.t * c.cp)
             * kernel_window_work(model, c.s, c.attention))
    own, every = c.delta * c.b * c.s_rank / c.t, c.delta * c.b * c.s / c.t
    return (f_fwd, rates.backward_factor * f_fwd, own * 2.0 * qd + every * 2.0 * kvd,
            own * 4.0 * qd + every * 4.0 * kvd)


def attention_passes_s(model: ModelConfig, hw: HybridHardware, c: Configs,
                       f_attn: F) -> tuple[F, F]:
    """One forward and one backward pass of the attention products of one layer and
    micro-batch on one GPU, ``(T_fwd, T_bwd)``:

    * ``materialized``: ``T_fwd = T_attn`` and ``T_bwd = 2 T_attn`` with ``T_attn = f_attn /
      (t cp R)`` times its roofline slowdown (``gemm.attention_slowdown``; the backward is two
      products of each);
    * ``flash``: ``T_fwd = max(F_fwd / R, B_fwd / (M mem_eff))``, the same for ``T_bwd``
      (:func:`flash_attention_work`), ``R = R_flash g(s_r, d_k) / g_ref x d / d_k`` the
      kernel's rate at the sequence on one context rank ``s_r`` and the head size ``d_k`` it
      runs a head of ``d`` at, over the share of its products that are not padding
      (:meth:`FlashRates.rate_factor`).
    """
    if c.attention in FUSED:
        f_fwd, f_bwd, b_fwd, b_bwd = flash_attention_work(model, c)
        rate = require_fused_rate(hw, c.attention) * flash_rates().rate_factor(
            c.attention, c.s_rank, float(model.head_size))
        return (np.maximum(f_fwd / rate, b_fwd / hw.mem_eff_bps),
                np.maximum(f_bwd / rate, b_bwd / hw.mem_eff_bps))
    attn_s = f_attn / (c.t * c.cp) / hw.flops_per_s * gemm.attention_slowdown(
        c.s, float(model.head_size), c.delta, hw.flops_per_s, hw.mem_eff_bps)
    return attn_s, 2.0 * attn_s


def attention_time_s(model: ModelConfig, hw: HybridHardware, c: Configs, f_attn: F) -> F:
    """Attention products of one layer and micro-batch on one GPU, forward, backward and
    recomputation together: ``(1 + n_r) T_fwd + T_bwd``, ``n_r`` the reruns
    (:func:`attention_passes_s`; selective recomputation reruns the attention core's forward,
    as Megatron's checkpointed core attention does; ``selective-op`` a materialized one,
    :func:`attention_reruns`)."""
    t_fwd, t_bwd = attention_passes_s(model, hw, c, f_attn)
    return (1.0 + attention_reruns(c)) * t_fwd + t_bwd


def cp_exchange_s(model: ModelConfig, hw: HybridHardware, c: Configs, ln: Links,
                  f_attn: F) -> F:
    """Context-parallel key/value exchange of one micro-batch on the slowest stage, the part
    the attention does not hide (0 with ``cp = 1``).

    Megatron-Core's context parallelism runs attention as a ring of ``cp`` steps: at each
    step a rank computes its queries against one key/value chunk while it passes that chunk
    on to the next rank (point-to-point, overlapped with the compute). A chunk is
    ``C = delta b s_r 2 kv d / t`` bytes (K and V of ``s_r = s / cp`` tokens); the backward
    passes K and V again and the gradients dK, dV: ``2 C``. A pass whose attention takes
    ``T_a`` (:func:`attention_passes_s`) takes ``T_a / cp + (cp - 1) max(T_a / cp, T_step)``
    with ``T_step = bytes / bw_cp + latency``, so it exposes::

        X = (cp - 1) max(0, T_step - T_a / cp)

    and per micro-batch ``T_cp = L_s ((1 + full + selective) X_fwd + X_bwd)`` (every rerun of
    the attention forward gathers the chunks again). ``bw_cp``: the intra-node link when a
    context group (``t cp`` GPUs, the tensor ranks innermost) fits in a node, else the slower
    of intra link and NIC (:func:`links`)."""
    t_fwd, t_bwd = attention_passes_s(model, hw, c, f_attn)
    chunk = c.delta * c.b * c.s_rank * 2.0 * float(model.kv_dim) / c.t
    steps = c.cp - 1.0

    def exposed(t_attn: F, nbytes: F) -> F:
        step = nbytes / ln.cp_bps + ln.cp_latency_s
        return steps * np.maximum(0.0, step - t_attn / c.cp)

    return c.layers_stage * ((1.0 + attention_reruns(c)) * exposed(t_fwd, chunk)
                             + exposed(t_bwd, 2.0 * chunk))


def gemm_time_s(model: ModelConfig, hw: HybridHardware, c: Configs, f_attn: F) -> F:
    """GEMM time of one micro-batch on the slowest (last) stage, per GPU (parallel/gemm.py)::

        T_flop = L_s ((1 + full) T_lin_fwd + op T_rerun + T_lin_bwd + T_attn_layer)
                 + T_logit_fwd + T_logit_bwd

    linear products (``gemm.linear_shapes`` of the rank's ``s / cp`` tokens, logits
    ``(b s / cp, V / t, h)``) at ``R = P eta`` over
    their tile/wave efficiency, or at their operands' bytes over ``M mem_eff`` where that is
    slower (``gemm.gemm_times_s``: a micro-batch of few tokens); ``T_rerun`` the forward of
    the products ``selective-op`` reruns (``gemm.rerun_shapes``; ``op`` its 0/1 indicator);
    ``T_attn_layer`` (:func:`attention_time_s`): materialized ``(3 + reruns) T_attn`` with
    ``T_attn = f_attn / (t R)`` times its roofline slowdown, or the fused kernel's passes."""
    rate, tiles = hw.flops_per_s, hw.matrix_dtype or c.dtype
    lin_fwd, lin_bwd = gemm.gemm_times_s(gemm.linear_shapes(model, c.b, c.s_rank, c.t, c.e),
                                         rate, hw.sms, tiles, hw.mem_eff_bps)
    rerun = 0.0 * lin_fwd
    if np.any(c.op):
        rerun, _ = gemm.gemm_times_s(gemm.rerun_shapes(model, c.b, c.s_rank, c.t, c.e), rate,
                                     hw.sms, tiles, hw.mem_eff_bps)
    one = np.ones_like(c.t)
    e, h = float(model.embed_width), float(model.hidden)
    logits = [(one, c.b * c.s_rank * one, float(model.vocab) / c.t * one, e * one)]
    if model.projection_params:  # OPT-350m's project_out (h -> e) and project_in (e -> h)
        logits += [(one, c.b * c.s_rank * one, e * one, h * one),
                   (one, c.b * c.s_rank * one, h * one, e * one)]
    logit_fwd, logit_bwd = gemm.gemm_times_s(logits, rate, hw.sms, tiles, hw.mem_eff_bps)
    return (c.layers_stage * ((1.0 + c.full) * lin_fwd + c.op * rerun + lin_bwd
                              + attention_time_s(model, hw, c, f_attn))
            + logit_fwd + logit_bwd)


def sp_share(c: Configs) -> F:
    """The share of the ``b s h`` tensors one tensor rank holds: ``1 / t`` under sequence
    parallelism, else 1."""
    return np.where(c.sp, 1.0 / np.maximum(c.t, 1.0), 1.0)


def dropout_bytes_per_layer(model: ModelConfig, c: Configs) -> tuple[F, F]:
    """The element-wise bytes dropout adds to one layer and micro-batch on one GPU, forward and
    backward alike (``strategies.memory_bytes_per_layer``'s element-wise kernels), as ``(hidden,
    attention)``:

        hidden    = 2 b s_r h / t_sp   (the two bias+dropout+add kernels write a 1-byte mask
                                        forward and read it backward; without dropout they
                                        are bias+add, ``3 delta`` each way)
        attention = (2 delta + 1) b a s_r s / t   (the attention-dropout kernel, both ways; 0
                                        with fused attention, ``a = 0``)

    with ``t_sp = t`` under sequence parallelism, else 1, and ``s_r = s / cp``."""
    hidden = 2.0 * c.b * c.s_rank * float(model.hidden) * sp_share(c)
    return hidden, (2.0 * c.delta + 1.0) * c.b * score_heads(model, c) * c.s_rank * c.s / c.t


@dataclass(frozen=True)
class Fp8Cast:
    """``[fp8_cast]`` of ``parallel/recipes.toml``: the bytes per element each memory-bound
    pass of Transformer Engine's delayed-scaling fp8 recipe moves, by direction and tensor
    (``"input"``, ``"weight"``, ``"grad"``, ...), and the passes (one kernel each per linear
    layer holding the tensor) by direction and tensor."""

    forward: dict[str, float]
    backward: dict[str, float]
    passes_forward: dict[str, float]
    passes_backward: dict[str, float]


@lru_cache(maxsize=1)
def fp8_cast() -> Fp8Cast:
    """The shipped fp8 cast factors (``[fp8_cast]`` of ``parallel/recipes.toml``, each pass with
    its source): ``read + write`` bytes and the passes summed per direction and tensor, passes
    with ``fused_into`` (the amax reduction, inside the cast) left out."""
    raw = package_toml("recipes.toml")["fp8_cast"]
    per: dict[str, dict[str, float]] = {"forward": {}, "backward": {}}
    passes: dict[str, dict[str, float]] = {"forward": {}, "backward": {}}
    for ps in raw["pass"]:
        if "fused_into" in ps:
            continue
        for tensor in ps["tensors"]:
            side, n = per[ps["direction"]], passes[ps["direction"]]
            side[tensor] = side.get(tensor, 0.0) + float(ps["read"]) + float(ps["write"])
            n[tensor] = n.get(tensor, 0.0) + 1.0
    return Fp8Cast(forward=per["forward"], backward=per["backward"],
                   passes_forward=passes["forward"], passes_backward=passes["backward"])


def fp8_cast_groups(model: ModelConfig, c: Configs) -> dict[str, list[F]]:
    """Elements of the tensors Transformer Engine casts around the four linear layers of one
    layer and micro-batch on one GPU (``gemm.linear_shapes``, ``(count, M, N, K)`` each)::

        input  = sum count M K    (QKV, attention output, MLP up, MLP down)
        weight = sum count N K    (the weight shards: 4 h^2 + 2 (n_mat - 1) h f / t dense MHA)
        grad   = sum count M N    (the gradients of their outputs)

    each cast+transposed in one fused pass. Under sequence parallelism ``te.Linear`` takes
    the fused pass for no input: every input is cast as the rank holds it (``input_cast``)
    and transposed as its GEMM reads it (``input_transposed``): the QKV and dense MLP-up
    inputs, ``h`` wide, cast on the rank's ``1/t`` share and transposed whole after the fp8
    gather, the attention-output and dense MLP-down inputs (not gathered) cast and transposed
    alike; the output gradients of the attention output and the dense MLP down, ``h`` wide,
    are cast on the share (``grad_share``) and transposed whole (``grad_gathered``), the
    others fused. A mixture of experts' layers are not tensor-parallel modules (their tokens
    come through the dispatcher): their inputs and gradients stay fused. Without sequence
    parallelism the split tensors are 0.

    One array per linear layer (QKV, attention output, MLP up, MLP down), in that order:
    :func:`fp8_cast_elements` sums them, :func:`fp8_cast_kernels` counts those not empty."""
    shapes = gemm.linear_shapes(model, c.b, c.s_rank, c.t, c.e)
    zero = np.zeros_like(c.t)
    x = [n * m * k + zero for n, m, _, k in shapes]
    g = [n * m * w + zero for n, m, w, _ in shapes]
    sp = np.asarray(c.sp, dtype=bool)
    t = np.maximum(c.t, 1.0)
    dense = float(model.experts) <= 1.0
    gathered = (True, False, dense, False)  # the QKV and dense MLP-up inputs: gathered
    split_x = (True, True, dense, dense)    # the inputs of tensor-parallel modules
    split_g = (False, True, False, dense)   # the attention-output and dense MLP-down gradients
    return {
        "input": [np.where(sp & s_, 0.0, v) for v, s_ in zip(x, split_x, strict=True)],
        "weight": [n * w * k + zero for n, _, w, k in shapes],
        "grad": [np.where(sp & s_, 0.0, v) for v, s_ in zip(g, split_g, strict=True)],
        "input_cast": [np.where(sp & s_, v / t if gt else v, 0.0)
                       for v, s_, gt in zip(x, split_x, gathered, strict=True)],
        "input_transposed": [np.where(sp & s_, v, 0.0) for v, s_ in zip(x, split_x, strict=True)],
        "grad_share": [np.where(sp & s_, v / t, 0.0) for v, s_ in zip(g, split_g, strict=True)],
        "grad_gathered": [np.where(sp & s_, v, 0.0) for v, s_ in zip(g, split_g, strict=True)]}


def fp8_cast_elements(model: ModelConfig, c: Configs) -> dict[str, F]:
    """Elements of each tensor Transformer Engine casts (:func:`fp8_cast_groups`), summed over
    the layer's four linear layers."""
    return {k: sum(v[1:], v[0]) for k, v in fp8_cast_groups(model, c).items()}


def fp8_cast_kernels(model: ModelConfig, c: Configs) -> tuple[F, F]:
    """Transformer Engine's fp8 cast kernels of one layer and micro-batch ``(n_fwd, n_bwd)``:
    one per pass of ``[fp8_cast]`` (:func:`fp8_cast`, fused passes none) and linear layer
    whose tensor the pass names is not empty (:func:`fp8_cast_groups`)::

        n_dir = sum over tensors x of passes_dir,x * #{layers l : elements_l,x > 0}

    with the weights' casts once per iteration when cached (``n_w / m`` per micro-batch,
    counted backward as their bytes are). A dense layer: 4 input + 4 weight casts forward,
    4 gradient casts backward; under sequence parallelism 6 more backward (the four inputs
    transposed, two gradients' shares cast apart from their transposes), 3 in a mixture of
    experts' layer. Zero unless ``c.dtype`` is fp8."""
    zero = np.zeros_like(c.t)
    if c.dtype != "fp8":
        return zero, zero
    f, groups = fp8_cast(), fp8_cast_groups(model, c)

    def count(passes: dict[str, float], skip: str = "") -> F:
        return sum((n * sum((v > 0).astype(float) for v in groups[x])
                    for x, n in passes.items() if x != skip), zero)

    if not c.fp8_weight_cache:
        return count(f.passes_forward), count(f.passes_backward)
    weights = count({"weight": f.passes_forward.get("weight", 0.0)}) / c.m
    return count(f.passes_forward, "weight"), count(f.passes_backward) + weights


def fp8_cast_bytes_per_layer(model: ModelConfig, c: Configs) -> tuple[F, F]:
    """The fp8 cast bytes of one layer and micro-batch on one GPU, ``(C_fwd, C_bwd)``, with
    the elements of :func:`fp8_cast_elements` and the factors of :func:`fp8_cast`::

        C_fwd = 4 X + 4 W / m_w + 3 X_cast       (input and weight cast+transpose: read 2,
                                                  write 1 + 1, the fp8 copy and its
                                                  transpose; an input cast alone under
                                                  sequence parallelism: read 2, write 1; the
                                                  amax reduction inside the cast, no bytes
                                                  of its own)
        C_bwd = 4 G + 3 G_share + 2 (X_transposed + G_gathered)
                                                 (output-gradient cast+transpose; a gathered
                                                  gradient's share cast; the inputs and the
                                                  gathered gradients transposed: read 1,
                                                  write 1)

    ``m_w = 1`` (the weights cast every micro-batch), ``m`` when the recipe caches fp8
    weights (``c.fp8_weight_cache``: Megatron-Core's). A cached weight pass is returned in
    ``C_bwd``, counted once: ``C_fwd`` repeats with full recomputation, whose forward reads
    the cache (``is_first_microbatch`` is False by then). Zero unless ``c.dtype`` is fp8."""
    if c.dtype != "fp8":
        zero = np.zeros_like(c.t)
        return zero, zero
    f, el = fp8_cast(), fp8_cast_elements(model, c)
    fwd = sum(k * el[t] for t, k in f.forward.items() if t != "weight" or not c.fp8_weight_cache)
    bwd = sum(k * el[t] for t, k in f.backward.items())
    if c.fp8_weight_cache:
        bwd = bwd + f.forward.get("weight", 0.0) * el["weight"] / c.m
    return fwd + np.zeros_like(c.t), bwd + np.zeros_like(c.t)


class EagerKernel(NamedTuple):
    """One ``[[eager.kernel]]`` of ``parallel/recipes.toml``: when it runs (``when``), forward
    or backward, the tensors it runs on once each (``over``), the widths it reads and writes
    per element (``(width, tensor or "")`` pairs: ``act`` or ``fp32``, counted over ``tensor``
    where given), whether it is a dtype cast and its kernel launches."""

    name: str
    when: str
    direction: str
    over: tuple[str, ...]
    read: tuple[tuple[str, str], ...]
    write: tuple[tuple[str, str], ...]
    cast: bool
    kernels: float


EAGER_WHEN: dict[str, Any] = {
    "rmsnorm": lambda m, c: m.norm == "rmsnorm", "rope": lambda m, c: m.position == "rope",
    "swiglu": lambda m, c: m.gated, "gqa": lambda m, c: m.kv < m.heads,
    "materialized": lambda m, c: c.attention not in FUSED, "always": lambda m, c: True}
"""Which jobs (model ``m``, configurations ``c``) an eager kernel runs for, by its ``when``."""
EAGER_PRODUCTS: tuple[float, float] = (2.0, 1.0)
"""The linear products an eager Llama block launches beyond a fused stack's, forward: separate
``wq, wk, wv`` where Megatron runs one QKV product (2 more), and separate ``w1, w3`` where it
runs one gate+up product (1 more, gated MLPs); each also twice backward."""
EAGER_NORM_KEPT_BYTES: float = 8.0
"""Bytes an eager layer's two RMSNorms keep for their backward beyond fused norms, per
element of ``b s h``: each its fp32 ``x.float()`` (4) and its ``type_as`` output (``delta``)
where a fused norm keeps its input (``delta``): 4 more each (:func:`activation_bytes_per_layer`)."""
EAGER_NORMS_PER_LAYER: float = 2.0
"""The norms of one layer (before attention and before the MLP): the ``norm`` tensor's
kernels run twice."""


@cache
def eager_kernels() -> tuple[EagerKernel, ...]:
    """The shipped ``[[eager.kernel]]`` table (``parallel/recipes.toml``, each kernel with its
    source)."""
    def widths(items: list[str]) -> tuple[tuple[str, str], ...]:
        return tuple((w.partition("@")[0], w.partition("@")[2]) for w in items)

    return tuple(EagerKernel(k["name"], k["when"], k["direction"], tuple(k["over"]),
                             widths(k["read"]), widths(k["write"]), bool(k.get("cast", False)),
                             float(k.get("kernels", 1)))
                 for k in package_toml("recipes.toml")["eager"]["kernel"])


def eager_layer(model: ModelConfig, c: Configs) -> dict[str, tuple[F, F]]:
    """The eager kernels of one layer and micro-batch on one GPU (:func:`eager_kernels` that
    run for ``model``): ``{"bytes": (forward, backward), "kernels": (forward, backward)}``::

        bytes   = sum over kernels and their tensors T of n_T sum_(w in read + write) w E_w
        kernels = sum over kernels of n_T launches

    ``E`` the elements of a tensor (``norm``: ``b s_r h / t_sp``; ``input``: ``b s_r h``;
    ``q``: ``b s_r a d / t``; ``kv``: ``b s_r kv d / t``; ``ffn``: ``b s_r f k / t``), ``w``
    its width (``act`` =
    ``delta``, ``fp32`` = 4), ``n_T`` 2 for the ``norm`` tensor (two norms per layer), else
    1; a cast kernel runs only when the activations are not fp32. Zeros for a fused layer
    (``c.eager`` false)."""
    zero = np.zeros_like(c.t)
    out = {"bytes": [zero, zero], "kernels": [zero, zero]}
    if not c.eager:
        return {k: (v[0], v[1]) for k, v in out.items()}
    elements = {"norm": c.b * c.s_rank * float(model.hidden) * sp_share(c),
                "input": c.b * c.s_rank * float(model.hidden) + 0.0 * c.t,
                "q": c.b * c.s_rank * float(model.q_dim) / c.t,
                "kv": c.b * c.s_rank * float(model.kv_dim) / c.t,
                "ffn": c.b * c.s_rank * float(model.ffn) * float(model.top_k) / c.t}
    width = {"act": c.delta, "fp32": 4.0}
    for k in eager_kernels():
        if not EAGER_WHEN[k.when](model, c) or (k.cast and c.delta >= 4.0):
            continue
        side = 0 if k.direction == "forward" else 1
        for tensor in k.over:
            n = EAGER_NORMS_PER_LAYER if tensor == "norm" else 1.0
            moved = sum(width[w] * elements[on or tensor] for w, on in k.read + k.write)
            out["bytes"][side] = out["bytes"][side] + n * moved
            out["kernels"][side] = out["kernels"][side] + n * k.kernels
    return {k: (v[0], v[1]) for k, v in out.items()}


def eager_in_place(model: ModelConfig, c: Configs, parts: dict[str, Any],
                   eager: tuple[F, F], activation: tuple[Any, Any],
                   norm: str) -> dict[str, Any]:
    """An eager layer's bytes or kernels (``eager``: forward, backward, :func:`eager_layer`)
    added to the element-wise family of ``parts`` (family -> ``(forward, backward, attention
    core)``) in place of what they replace: a gated MLP's fused activation (``activation``,
    forward and backward) and an RMSNorm model's fused norms (family ``norm``: ``norm`` of
    the bytes, ``ln`` of the kernels, set to 0)."""
    gated = 1.0 if model.gated else 0.0
    fwd, bwd, attn = parts["elementwise"]
    out = {**parts, "elementwise": (fwd + eager[0] - gated * activation[0],
                                    bwd + eager[1] - gated * activation[1], attn)}
    if EAGER_WHEN["rmsnorm"](model, c):
        out[norm] = (0.0 * fwd, 0.0 * fwd, 0.0 * fwd)
    return out


def elementwise_time_s(model: ModelConfig, hw: HybridHardware, c: Configs) -> F:
    """Memory-bound time of one micro-batch on the slowest stage, kernel by kernel
    (``strategies.memory_bytes_per_layer``; the forward repeated with full or
    ``selective-op`` recomputation, :func:`forward_reruns`, the attention core's with
    selective), each kernel family at its own bandwidth
    (:meth:`HybridHardware.memory_bps`: ``M f_family``, the measured-kernel model's fitted
    fractions), plus the fp32 cross-entropy over its logits (element-wise kernels)::

        T_mem = sum over families x of
                [L_s ((1 + full + op) E_fwd,x + E_bwd,x + selective E_attn,x)
                 (+ 52 b s_r V / t)] / (M f_x)

    over the rank's ``s_r = s / cp`` tokens of each sequence.

    With a fused attention (:data:`FUSED`) the softmax and attention-dropout kernels
    over the ``b a s^2`` scores are inside the fused kernel: their bytes (and ``E_attn``) are
    0. Without dropout (``c.dropout`` false) :func:`dropout_bytes_per_layer` comes off the
    element-wise ``E_fwd``, ``E_bwd`` and ``E_attn``. With dtype fp8 the casts of
    :func:`fp8_cast_bytes_per_layer` join the element-wise ``E_fwd`` (``C_fwd``, repeated with
    full and selective-op recomputation) and ``E_bwd`` (``C_bwd``). An eager layer (``c.eager``,
    :func:`eager_layer`) adds its kernels' bytes to the element-wise ``E_fwd`` and ``E_bwd``
    in place of the fused RMSNorms (the ``norm`` family, for an RMSNorm model) and the fused
    gated activation (``strategies.activation_kernel_bytes``, for a gated MLP).
    """
    parts = st.memory_bytes_per_layer(
        c.s_rank, c.b, float(model.hidden), score_heads(model, c), model.ffn, model.n_mat,
        float(model.top_k), c.t, c.sp, c.delta)
    ew_fwd, ew_bwd, ew_attn = parts["elementwise"]
    if not c.dropout:
        hidden, attn = dropout_bytes_per_layer(model, c)
        ew_fwd, ew_bwd, ew_attn = ew_fwd - hidden - attn, ew_bwd - hidden - attn, ew_attn - attn
    if c.dtype == "fp8":
        cast_fwd, cast_bwd = fp8_cast_bytes_per_layer(model, c)
        ew_fwd, ew_bwd = ew_fwd + cast_fwd, ew_bwd + cast_bwd
    parts = {**parts, "elementwise": (ew_fwd, ew_bwd, ew_attn)}
    if c.eager:
        parts = eager_in_place(model, c, parts, eager_layer(model, c)["bytes"],
                               st.activation_kernel_bytes(c.s_rank, c.b, model.ffn, model.n_mat,
                                                          float(model.top_k), c.t, c.delta),
                               "norm")
    total: F | float = 0.0
    for family, (fwd, bwd, attn) in parts.items():
        moved = c.layers_stage * ((1.0 + forward_reruns(c)) * fwd + bwd + c.selective * attn)
        if family == "elementwise":
            moved = moved + st.CROSS_ENTROPY_BYTES * c.b * c.s_rank * float(model.vocab) / c.t
        total = total + moved / hw.memory_bps(family)
    return _i(total)


def host_issue_s(model: ModelConfig, hw: HybridHardware, c: Configs) -> F:
    """The host's time to issue one micro-batch's kernels on the slowest stage, op by op in
    eager mode (``hw.dispatch_s``: ``d r_x`` per op of dispatch kind ``x``, as the per-op
    model charges each op of a profile, docs/model.md "The host queue")::

        T_host = sum_x d r_x [L_s ((1 + full) n_fwd,x + n_bwd,x + selective n_attn,x
                                   + op n_rerun,x) + n_head_fwd,x + n_head_bwd,x]

    with the layer's kernels ``n`` of ``strategies.layer_kernels`` (materialized or fused
    attention, dropout on or off; a fused attention split over ``cp`` context ranks runs
    ``cp`` steps of its ring each way), the fp8 casts of :func:`fp8_cast_kernels` with dtype
    fp8, the eager layer's kernels (:func:`eager_layer`) in place of the fused RMSNorms and
    gated activation with ``c.eager`` and its separate projections (:data:`EAGER_PRODUCTS`),
    and the head's ``strategies.HEAD_KERNELS``;
    ``n_rerun`` what ``selective-op``
    reruns: the three products of ``gemm.rerun_shapes`` and every other forward kernel but a
    fused attention's. The GPU cannot run a micro-batch faster
    than its kernels are issued: ``t_mb = max(T_gpu, T_host)`` (:class:`MicroBatchTimes`).
    Kernels the model does not list one by one (collectives, the embedding, the optimizer's
    multi-tensor kernels, the unfused gradient accumulation's adds, a mixture of experts'
    router and per-expert products) are not counted. 0 where ``hw.dispatch_s`` is empty
    (strategies other than ``kernel``)."""
    zero = np.zeros_like(c.t)
    if not hw.dispatch_s:
        return zero
    counts: dict[str, Any] = dict(st.layer_kernels(c.attention in FUSED, c.dropout))
    if c.attention in FUSED:
        counts["bmm"] = tuple(n * c.cp for n in counts["bmm"])
    if c.dtype == "fp8":
        cast_fwd, cast_bwd = fp8_cast_kernels(model, c)
        fwd, bwd, attn = counts["elementwise"]
        counts["elementwise"] = (fwd + cast_fwd, bwd + cast_bwd, attn)
    if c.eager:
        counts = eager_in_place(model, c, counts, eager_layer(model, c)["kernels"],
                                st.ACTIVATION_KERNELS, "ln")
        more = EAGER_PRODUCTS[0] + (EAGER_PRODUCTS[1] if model.gated else 0.0)
        fwd, bwd, attn = counts["linear"]
        counts["linear"] = (fwd + more, bwd + 2.0 * more, attn)
    total = zero
    products = float(len(gemm.rerun_shapes(model, 1.0, 1.0, 1.0))) if np.any(c.op) else 0.0
    for kind, (fwd, bwd, attn) in counts.items():
        head = sum(st.HEAD_KERNELS.get(kind, (0.0, 0.0)))
        kept = kind == "bmm" and c.attention in FUSED  # a fused attention's output is kept
        rerun = products if kind == "linear" else 0.0 if kept else fwd
        n = c.layers_stage * ((1.0 + c.full) * fwd + bwd + c.selective * attn
                              + c.op * rerun) + head
        total = total + n * hw.dispatch_s[kind]
    return _i(total)


class Links(NamedTuple):
    """The link each collective uses, per configuration (bytes/s; latency per ring step)."""

    tp_bps: F
    tp_latency_s: F
    ep_bps: F
    pp_cross: NDArray[np.bool_]
    pp_bps: F
    pp_latency_s: F
    dp_ring_bps: F
    replica_ring_bps: F
    expert_dp_ring_bps: F
    cp_bps: F
    cp_latency_s: F


def in_node(block: ArrayLike, g: float, n: ArrayLike) -> NDArray[np.bool_]:
    """Whether every group of ``block`` consecutive ranks (ranks numbered tensor-innermost, as
    Megatron-LM places them) lies inside one node of ``g`` GPUs, on ``n`` GPUs in all:
    ``block <= g`` and ``g mod block = 0`` (a group of 3 on nodes of 4 puts ranks 3-5 on two
    nodes), or the job holds one node at most (``n <= g``)."""
    b = np.asarray(block, dtype=np.float64)
    return (b <= g) & ((np.mod(g, b) == 0) | (np.asarray(n, dtype=np.float64) <= g))


def links(hw: HybridHardware, c: Configs) -> Links:
    """Links of the collectives on nodes of ``g`` GPUs (:func:`in_node`: a group of consecutive
    ranks stays inside a node when it divides the node, or the job holds one node): a tensor
    group of ``t`` GPUs, an expert group (``t e`` GPUs), a context group (``cp`` ranks ``t``
    apart: ``t cp``). Ranks are ordered as Megatron-LM's default (tensor, context, data, then
    pipeline outermost): a pipeline stage is a block of ``t cp d`` ranks, and unless the whole
    job holds one node (``N <= g``) some boundary between consecutive stages crosses nodes,
    which the pipeline's every micro-batch waits for (``pp_cross``).
    Across nodes a link runs at ``min(intra, nic)`` with latency ``max(intra, nic)``. A
    data-parallel group (``d cp`` ranks with context parallelism, :attr:`Configs.dp_group`)
    with ``k = clip(floor(g / t), 1, d cp)`` members per node drives
    ``min(rails, k)`` network ports (NCCL runs one ring per rail): its ring crosses nodes at
    ``min(intra, min(rails, k) nic)`` (``architectures.ring_link_bps``, as allreduce-cluster).
    An expert-data-parallel group (``d cp / e`` ranks, ``t e`` apart) holds
    ``clip(floor(g / (t e)), 1, d cp / e)`` members per node, by the same rule. With HSDP
    (:attr:`Configs.shard_group` ``g_s < d cp``) the ring of ZeRO's collectives is a shard
    group's ``g_s`` consecutive data-parallel ranks (``clip(floor(g / t), 1, g_s)`` per node)
    and the replicas' all-reduce runs over ``r`` ranks ``t g_s`` apart (``clip(floor(g / (t
    g_s)), 1, r)`` per node), ``k = min(g_s, floor(g / t))`` such rings at once on a node
    sharing its ports: each crosses nodes at ``min(intra, min(rails, k) nic / k)`` (one node's
    shard group: one port per ring on a node with a port per GPU, an eighth of the one port
    of a node with one)."""
    g = float(hw.gpus_per_node)
    n = c.t * c.p * c.dp_group  # d t p cp GPUs
    pp_cross = n > g
    members_per_node = np.clip(np.floor(g / c.t), 1.0, c.shard_group)
    replica_members = np.clip(np.floor(g / (c.t * c.shard_group)), 1.0, c.replicas)
    # the replica rings of a node's shard-group members run at once and share its ports
    ring_nic = network_bps(hw.nic_bps, hw.rails, members_per_node) / members_per_node
    expert_members = np.clip(np.floor(g / (c.t * c.e)), 1.0, c.expert_shard_group)

    def link(inside: NDArray[np.bool_]) -> tuple[F, F]:
        """Rate and latency of a group's link: intra inside a node, else the slower link."""
        return (np.where(inside, hw.intra_bps, min(hw.intra_bps, hw.nic_bps)),
                np.where(inside, hw.intra_latency_s, max(hw.intra_latency_s, hw.nic_latency_s)))

    (tp_bps, tp_lat), (ep_bps, _) = link(in_node(c.t, g, n)), link(in_node(c.t * c.e, g, n))
    (pp_bps, pp_lat), (cp_bps, cp_lat) = link(~pp_cross), link(in_node(c.t * c.cp, g, n))
    return Links(tp_bps=tp_bps, tp_latency_s=tp_lat, ep_bps=ep_bps, pp_cross=pp_cross,
                 pp_bps=pp_bps, pp_latency_s=pp_lat,
                 dp_ring_bps=ring_link_bps(c.shard_group, members_per_node, hw.intra_bps,
                                           hw.nic_bps, hw.rails),
                 replica_ring_bps=ring_link_bps(c.replicas, replica_members, hw.intra_bps,
                                                ring_nic, 1.0),
                 expert_dp_ring_bps=ring_link_bps(c.expert_shard_group, expert_members,
                                                  hw.intra_bps, hw.nic_bps, hw.rails),
                 cp_bps=cp_bps, cp_latency_s=cp_lat)


def comm_time_s(model: ModelConfig, c: Configs, ln: Links,
                scatter_gather: bool = True) -> tuple[F, F, F]:
    """Tensor, expert and pipeline communication of one micro-batch on the slowest stage::

        T_tp  = L_s n_ar (2 (t-1)/t b s_r h delta / bw_tp + 2 (t-1) latency)
        T_ep  = L_s 4 (e-1)/e (b s_r / t) k h delta / bw_ep      (MoE layers only)
        T_p2p = 2 v (latency + b s_r h delta / scatter / bw_pp)  (p > 1)

    (``s_r = s / cp``; ``n_ar`` and the all-to-alls: 2 more each with full recompute, 1 and 2
    with selective-op, ``strategies.tp_collectives_per_layer``;
    ``scatter = t`` when the stages cross nodes and ``scatter_gather`` is on, else 1). Returns
    ``(T_tp, T_ep, T_p2p)``."""
    h = float(model.hidden)
    t_tp = c.layers_stage * (st.tp_bytes_per_layer(c.b, c.s_rank, h, c.delta, c.t, c.r)
                             / ln.tp_bps
                             + st.tp_collectives_per_layer(c.r)
                             * st.ring_latency_s(c.t, ln.tp_latency_s))
    moe_layers = c.layers_stage if model.experts > 1 else 0.0 * c.layers_stage
    t_ep = moe_layers * st.ep_bytes_per_layer(c.b, c.s_rank, h, float(model.top_k), c.delta,
                                              c.t, c.e, c.r) / ln.ep_bps
    scatter = np.where(ln.pp_cross & scatter_gather, c.t, 1.0)
    t_p2p = st.p2p_time_s(st.p2p_bytes(c.b, c.s_rank, h, c.delta, scatter), c.p, c.v, ln.pp_bps,
                          ln.pp_latency_s)
    return t_tp, t_ep, t_p2p


class StageParams(NamedTuple):
    """Parameters per GPU of the most loaded stage, by the group that holds the same ones:
    ``dense`` (the ``d cp`` ranks of :attr:`Configs.dp_group`) and ``expert`` (the ``d cp /
    e`` ranks of :attr:`Configs.expert_dp_group`)."""

    dense: F
    expert: F

    @property
    def total(self) -> F:
        return self.dense + self.expert

    def over_groups(self, c: Configs) -> F:
        """One rank's share once each part is split over its group: ``dense / g_s +
        expert / (d cp / (e r))`` (ZeRO's sharding; ``g_s = d cp`` and ``r = 1`` but with
        HSDP, :attr:`Configs.shard_group`, :attr:`Configs.expert_shard_group`)."""
        return self.dense / c.shard_group + self.expert / c.expert_shard_group


def stage_params(model: ModelConfig, c: Configs) -> StageParams:
    """Parameters per GPU of the most loaded stage (the first: its ``L_s`` layers, dense parts
    over ``t``, experts over ``t e``, and the input embedding over ``t``; a single stage also
    holds an untied head and the final norm), split into the dense and the expert part."""
    dense_layer = model.layer_params - model.expert_params_per_layer
    dense = (c.layers_stage * dense_layer / c.t
             + (model.embedding_params + np.where(c.p == 1, model.head_params, 0.0)) / c.t
             + np.where(c.p == 1, model.final_norm_params, 0.0))
    return StageParams(dense, c.layers_stage * model.expert_params_per_layer / (c.t * c.e))


def update_time_s(hw: HybridHardware, c: Configs, params: StageParams,
                  grad_accum_fused: bool = True) -> tuple[F | float, F]:
    """Memory-bound sweeps over the stage's ``params``: per micro-batch, unfused gradient
    accumulation ``T_acc = 3 delta params / (M f_elementwise)`` (read both, write one; 0 when
    fused); per iteration, the optimizer step ``T_opt = 52 bytes (32 fp32) x params / (M
    f_elementwise)`` (element-wise kernels, :meth:`HybridHardware.memory_bps`) over
    the optimizer shard with ZeRO >= 1 (``dense / g_s + expert / (d cp / e)``,
    :meth:`StageParams.over_groups`). Returns ``(T_acc, T_opt)``."""
    bw = hw.memory_bps("elementwise")
    t_acc = 0.0 if grad_accum_fused else st.grad_accum_bytes(params.total, c.delta) / bw
    opt_params = np.where(c.z >= 1, params.over_groups(c), params.total)
    return t_acc, st.OPTIMIZER_STEP_BYTES[c.dtype] * opt_params / bw


def sync_time_s(model: ModelConfig, c: Configs, ln: Links,
                params: StageParams) -> tuple[F, F]:
    """Data-parallel sync per iteration: the ZeRO-stage volume (``strategies.dp_bytes`` of the
    stage's dense ``params delta`` gradient and parameter bytes) over the ring of the ``g_s``
    ranks it shards over (:attr:`Configs.shard_group`: the ``d cp`` of
    :attr:`Configs.dp_group` but with HSDP), then with HSDP the replicas' all-reduce of each
    rank's gradient shard over the ``r = d cp / g_s`` shard groups,

        V_replica = 2 (r - 1)/r (P delta / g_s) m_z      (P: the dense and expert
                                                          parameters, both sharded over g_s
                                                          at e = 1; m_z = m with ZeRO 2 or
                                                          3, which reduce every
                                                          micro-batch's gradients; 1 with
                                                          ZeRO 1)

    (PyTorch FSDP ``HYBRID_SHARD``: reduce-scatter in the shard group, then all-reduce across
    the replicas), then the expert parameters' volume over the expert-data-parallel ring of
    ``d cp / e`` ranks (:attr:`Configs.expert_dp_group`), plus the all-reduce of a tied
    embedding's ``V e / t`` gradient between the first and last stage (a 2-member ring on the
    pipeline's link). Returns ``(T_dp, dp bytes per GPU)``."""
    def volume(n_params: F, group: F) -> F:
        return st.dp_bytes(n_params * c.delta, n_params * c.delta, group, c.m, c.z)

    dense = volume(params.dense, c.shard_group)
    expert = volume(params.expert, c.expert_shard_group)
    m_z = np.where(c.z >= 2, c.m, 1.0)
    replica = ring_factor(c.replicas) * params.over_groups(c) * c.delta * m_z
    dp_volume = dense + replica + expert
    t_dp = np.where(c.shard_group > 1, dense / ln.dp_ring_bps, 0.0) \
        + np.where(c.replicas > 1, replica / ln.replica_ring_bps, 0.0) \
        + np.where(c.expert_shard_group > 1, expert / ln.expert_dp_ring_bps, 0.0)
    t_emb = np.where((c.p > 1) & model.tied, st.embedding_sync_bytes(
        model.vocab * float(model.embed_width) / c.t, c.delta) / ln.pp_bps, 0.0)
    return t_dp + t_emb, dp_volume


def score_heads(model: ModelConfig, c: Configs) -> float:
    """Heads whose ``s x s`` scores reach DRAM: ``a`` materialized, 0 with fused attention."""
    return 0.0 if c.attention in FUSED else float(model.heads)


def activation_bytes_per_layer(model: ModelConfig, c: Configs) -> F:
    """Activation bytes of one layer and micro-batch on one GPU: Korthikanti et al.'s
    (``strategies.activation_bytes_per_layer``, which counts K and V as ``2 s b h`` each, with
    the MLP's kept products ``m = 2 n_mat f k / h`` per element of ``s b h``: 16 for their
    GeLU MLP of ``4h``) with
    K and V ``kv d`` wide, ``+ 4 s b (kv d - h) / t delta / 2`` unless full recomputation
    (0 for multi-head attention with ``a d = h``); with a fused attention without the
    ``5 a s / h`` scores, softmax and dropout-mask terms (``a = 0`` there). Without dropout
    (``c.dropout`` false) Korthikanti et al.'s dropout terms come off, in their convention
    (times ``delta / 2``): the two hidden masks ``2 s b h / t_sp`` (``t_sp = t`` under sequence
    parallelism, else 1; not with full recomputation) and, with no recomputation, the attention
    dropout's mask and output ``3 a s^2 b / t`` (of the ``5 a s^2 b``: the softmax output stays).
    With context parallelism every term is over the rank's ``s / cp`` tokens (a context rank
    keeps only its own key/value chunk; context parallelism needs a fused attention, so no
    ``s^2`` term remains). A mixture of experts keeps its routed tokens,
    :func:`moe_routed_bytes_per_layer`, unless recomputation is full. ``selective-op``:
    :func:`op_activation_bytes_per_layer`. An eager layer
    (``c.eager``) unless recomputation is full: its RMSNorms keep ``EAGER_NORM_KEPT_BYTES = 8``
    more bytes per element of ``s_r b h / t_sp`` (each keeps its fp32 input, 4 bytes, and its
    normalized output, ``delta``, where a fused norm keeps its ``delta``-byte input: 4 more,
    twice), with grouped-query attention ``repeat_kv`` hands the attention K and V ``a d`` wide, so
    they are kept at ``a d`` (the ``kv d`` correction above is ``0``), and a gated MLP keeps its
    ``silu`` output as well, ``delta`` per element of ``s_r b f k / t`` (the multiply saves both
    its operands, where a fused SwiGLU keeps its inputs and output: the ``m`` above)."""
    h, s_r = float(model.hidden), c.s_rank
    code = np.where(c.op > 0, 0.0, c.r)  # strategies' table has no selective-op row
    mlp = 2.0 * model.n_mat * float(model.ffn) * float(model.top_k) / h
    act = st.activation_bytes_per_layer(s_r, c.b, h, score_heads(model, c), c.t, c.sp, code,
                                        c.delta, mlp)
    full = c.r == st.RECOMPUTE_CODE["full"]
    repeated = c.eager and EAGER_WHEN["gqa"](model, c)  # repeat_kv: K and V kept a d wide
    kv_extra = 4.0 * s_r * c.b * ((float(model.q_dim) if repeated else float(model.kv_dim))
                                  - h) / c.t * c.delta / 2.0
    act = act + np.where(full, 0.0, kv_extra)
    # a mixture of experts: each expert's copy of its tokens' input and of its output before
    # the routing weights, over the rank's b s / t tokens (the dispatcher's split)
    routed = moe_routed_bytes_per_layer(model, c)
    act = act + np.where(full, 0.0, routed)
    if c.eager and EAGER_WHEN["rmsnorm"](model, c):
        act = act + np.where(full, 0.0, EAGER_NORM_KEPT_BYTES * s_r * c.b * h * sp_share(c))
    if c.eager and model.gated:
        silu = c.delta * s_r * c.b * float(model.ffn) * float(model.top_k) / c.t
        act = act + np.where(full, 0.0, silu)
    if not c.dropout:
        masks = 2.0 * s_r * c.b * h * sp_share(c)
        attn = 3.0 * score_heads(model, c) * s_r * c.s * c.b / c.t
        act = act - np.where(full, 0.0, masks + np.where(code == 0, attn, 0.0)) * c.delta / 2.0
    return np.where(c.op > 0, op_activation_bytes_per_layer(model, c), act)


def moe_routed_bytes_per_layer(model: ModelConfig, c: Configs) -> F:
    """The tokens a mixture of experts' layer keeps beyond a dense MLP's, one micro-batch on
    one GPU: ``2 delta k s_r b h / t`` (0 for a dense model), its ``k`` experts per token each
    keeping its copy of the token's input (the dispatch's gather, which each expert's first
    products keep; the norm's output, the table's MLP input, stays kept by the router) and of
    its output, which the routing weight multiplies (the multiply keeps it for the weight's
    gradient: Megatron-Core's ``unpermute`` with ``probs``, torchtitan's ``MoE``), over the
    ``b s_r / t`` tokens a rank's dispatcher sends (``strategies.ep_bytes_per_layer``)."""
    if model.experts <= 1:
        return _i(0.0 * c.b)
    return 2.0 * c.delta * float(model.top_k) * c.s_rank * c.b * float(model.hidden) / c.t


def op_activation_bytes_per_layer(model: ModelConfig, c: Configs) -> F:
    """Activation bytes one layer keeps per micro-batch under ``selective-op`` recomputation
    (torchtitan's policy: the layer's input, the outputs of the matrix products it does not
    rerun, :func:`gemm.rerun_shapes`, and a fused attention's output and its fp32 row
    log-sum-exp; the rest is rerun), ``delta``-byte tensors, ``s_r = s / cp``::

        A_op = delta s_r b (h / t_sp + (a d + kv d) / t + D (f / t + g h) + 2 h / t_sp')
               + A_attn                                   (t_sp' = t with SP, else inf)
        A_attn = delta s_r b a d / t + 4 s_r b a / t     (fused attention; 0 materialized)

    the input ``h / t_sp`` (``t_sp = t`` under sequence parallelism), the query and value
    projections, the MLP's first product (the gate ``w1`` of a gated MLP, the up product of a
    plain one) and, for a gated MLP (``g = 1``; else 0), the down product's output before
    its reduce-scatter; ``D`` = 1 for a dense MLP, 0 for a mixture of experts (its products
    are all rerun, :func:`gemm.rerun_shapes`); under sequence parallelism (``t > 1``) also
    the outputs of the layer's two reduce-scatters, ``2 h / t`` (in the policy's save list)."""
    s_r, h, f = c.s_rank, float(model.hidden), float(model.ffn)
    qd, kvd = float(model.q_dim), float(model.kv_dim)
    gated = 1.0 if model.gated else 0.0
    dense = 1.0 if model.experts <= 1 else 0.0
    scattered = np.where(c.sp, 2.0 * h / c.t, 0.0)
    kept = h * sp_share(c) + (qd + kvd) / c.t + dense * (f / c.t + gated * h) + scattered
    attn = (c.delta * s_r * c.b * qd / c.t + 4.0 * s_r * c.b * float(model.heads) / c.t
            if c.attention in FUSED else 0.0 * c.t)
    return c.delta * s_r * c.b * kept + attn


def activation_bytes(model: ModelConfig, c: Configs) -> tuple[F, F]:
    """Activations per GPU, ``(stored, recomputed)``.

    ``stored``: the larger of the first stage (``L_s`` layers of
    :func:`activation_bytes_per_layer` for each in-flight micro-batch) and the last (``L_s``
    layers of one micro-batch, all ``m`` with GPipe, plus the logits
    ``4 s_r b h / t (1 + V / h) delta / 2``, ``s_r = s / cp``; a single stage holds both).

    ``recomputed``: what the layer being recomputed adds to the peak. In the backward pass a
    layer whose activations were dropped (recompute selective, full or selective-op) holds
    them again, one
    layer and micro-batch at a time, on top of what is stored; a stage's logits are freed
    before its layers' backward::

        W    = a_none - a_r         (a_x: activation_bytes_per_layer with recompute x)
        peak = max(F + max(F_x, W), L + max(L_x, W))     (F, L: the first and last stage's
                                                          layers; F_x, L_x: the logits each
                                                          holds)
        recomputed = peak - stored  (0 without recomputation: every layer's are stored)

    With materialized attention ``W`` holds one layer's ``5 a s^2 b / t`` scores (Korthikanti
    et al.'s ``x = 5 a s / h`` term): at long sequences it, not what is stored, decides what
    fits."""
    # the head's input and its logits (OPT-350m's project_out keeps its h-wide input too,
    # the head then an e-wide one)
    head_in = float(model.hidden) + (float(model.embed_width) if model.projection_params else 0.0)
    act_layer = activation_bytes_per_layer(model, c)
    inflight = st.inflight_microbatches(c.p, c.m, c.v, c.gpipe)
    logits = 4.0 * c.s_rank * c.b * (head_in + float(model.vocab)) / c.t * c.delta / 2.0
    first = act_layer * c.layers_stage * inflight
    last = act_layer * c.layers_stage * np.where(np.asarray(c.gpipe, dtype=bool), c.m, 1.0)
    first_x = np.where(c.p == 1, logits, 0.0)
    stored = np.maximum(first + first_x, last + logits)
    none = activation_bytes_per_layer(model, replace(c, r=np.zeros_like(c.r)))
    w = np.where(c.r > 0, np.maximum(none - act_layer, 0.0), 0.0)
    peak = np.maximum(first + np.maximum(first_x, w), last + np.maximum(logits, w))
    return stored, peak - stored


def memory_bytes(model: ModelConfig, hw: HybridHardware, c: Configs,
                 params: StageParams) -> dict[str, F]:
    """Memory per GPU (``mem_*_bytes``): weights, gradients and optimizer state of the stage's
    ``params`` (and their sum, ``mem_state_bytes``) after ZeRO, the dense ones over the
    ``g_s`` ranks of :attr:`Configs.shard_group` (the ``d cp`` of :attr:`Configs.dp_group`
    but with HSDP) and the experts over the ``d cp / e`` of :attr:`Configs.expert_dp_group`
    (over the replicas with HSDP, :attr:`Configs.expert_shard_group`)
    (``strategies.model_state_bytes``; ZeRO-3 adds the one layer it
    gathers at a time, ``(P_layer - P_experts) / t delta``, where that group has more than one
    rank: over one rank nothing is sharded or gathered), activations stored and the layer
    being recomputed (:func:`activation_bytes`), their total and the GPU's capacity."""
    w_b, g_b, o_b = (a + b for a, b in zip(
        st.model_state_bytes(params.dense, c.shard_group, c.z, c.dtype),
        st.model_state_bytes(params.expert, c.expert_shard_group, c.z, c.dtype), strict=True))
    dense_layer = model.layer_params - model.expert_params_per_layer
    w_b = w_b + np.where((c.z >= 3) & (c.shard_group > 1), dense_layer / c.t * c.delta, 0.0)
    act, redo = activation_bytes(model, c)
    return {"mem_weights_bytes": w_b, "mem_grads_bytes": g_b, "mem_optimizer_bytes": o_b,
            "mem_state_bytes": w_b + g_b + o_b,
            "mem_activations_bytes": act, "mem_recompute_bytes": redo,
            "mem_total_bytes": w_b + g_b + o_b + act + redo,
            "mem_capacity_bytes": np.full(c.d.shape, hw.mem_bytes)}


class MicroBatchTimes(NamedTuple):
    """Times of one micro-batch on the slowest stage, per GPU (seconds)."""

    flop_s: F
    mem_s: F
    acc_s: F | float
    tp_s: F
    ep_s: F
    p2p_s: F
    cp_s: F
    host_s: F | float = 0.0
    """The host's issue time of the micro-batch's kernels (:func:`host_issue_s`)."""

    @property
    def gpu_s(self) -> F:
        """``T_gpu = T_flop + T_mem + T_acc + T_tp + T_ep + T_p2p + T_cp``."""
        return (self.flop_s + self.mem_s + self.acc_s + self.tp_s + self.ep_s + self.p2p_s
                + self.cp_s)

    @property
    def wait_s(self) -> F:
        """What the GPU waits for the host per micro-batch: ``max(0, T_host - T_gpu)``."""
        return np.maximum(0.0, self.host_s - self.gpu_s)

    @property
    def total_s(self) -> F:
        """``t_mb = max(T_gpu, T_host) = T_gpu + wait``."""
        return self.gpu_s + self.wait_s


def time_parts_s(c: Configs, mb: MicroBatchTimes, t_data: F, t_opt: F, t_dp: F,
                 total: F) -> dict[str, F]:
    """The iteration's time parts (``total_s``, each of ``TIME_PARTS`` + ``_s``,
    ``microbatch_s``, ``host_wait_s``): ``m`` micro-batches of each per-micro-batch part, the
    optimizer step in memory-bound compute, the bubble ``(p - 1) / v t_mb``. The GPU's wait for
    the host (``m`` times :attr:`MicroBatchTimes.wait_s`) is in the compute parts, split as
    their busy times (``host_wait_s`` says how much; as the per-op model's ``T_idle``)."""
    m, t_mb, wait = c.m, mb.total_s, mb.wait_s
    busy = mb.flop_s + mb.mem_s + mb.acc_s
    flop_share = np.divide(mb.flop_s, busy, out=np.full_like(busy, 0.5), where=busy > 0)
    return {"total_s": total, "data_io_s": t_data,
            "compute_flop_s": m * (mb.flop_s + wait * flop_share),
            "compute_mem_s": m * (mb.mem_s + mb.acc_s + wait * (1.0 - flop_share)) + t_opt,
            "host_wait_s": m * wait, "comm_tp_s": m * mb.tp_s,
            "comm_pp_s": m * mb.p2p_s, "comm_ep_s": m * mb.ep_s, "comm_cp_s": m * mb.cp_s,
            "comm_dp_s": t_dp,
            "bubble_s": (c.p - 1.0) / c.v * t_mb, "microbatch_s": t_mb}


def model_flops_per_token(model: ModelConfig, seq: ArrayLike) -> F:
    """Model FLOPs per token of a training step at ``s`` tokens per sequence:
    ``6 P_flop + 12 l a d s W(s)`` (``P_flop`` = ``ModelConfig.params_flop``; the attention's
    full ``s x s`` square, Q K^T and A V forward and backward, as Narayanan et al. and PaLM count
    it; ``W(s)`` the share a sliding window leaves, ``zoo.llm.window_work``)."""
    s = _i(seq)
    window = window_work(s, model.window, model.window_share)
    return 6.0 * model.params_flop + 12.0 * float(model.layers) * float(model.q_dim) * s * window


def throughput(model: ModelConfig, c: Configs, flops: tuple[F, F, F], total: F,
               peak_tflops: float) -> dict[str, F]:
    """Per GPU of ``n = d t p cp``: tokens ``B s / (T n)``; model TFLOP/s
    ``(6 P_flop + 12 l a d s W(s)) B s / (T n)`` (Narayanan et al.: the full ``s x s`` square,
    so it can exceed the peak where a fused kernel skips the causal half; ``W(s)`` the share a
    sliding window leaves, ``zoo.llm.window_work``, 1 without one) and the model FLOPs
    utilization ``MFU = model TFLOP/s / P`` over the dense peak ``P`` of the training precision
    (NaN where the entry gives no peak); hardware TFLOP/s as
    executed, ``(B / b) (l ((3 + full) f_gemm + op f_rerun + A) + 3 f_logit) / (T n)`` with
    ``f_rerun = 2 b s h (kv d + a d + f)`` the products ``selective-op`` reruns (``2 b s (h
    (kv d + a d) + k n_mat h f)`` for a mixture of ``k``-of-E experts)
    (``gemm.rerun_shapes``) and the attention's ``A = (3 + n_r) f_attn`` materialized (the
    masked square computed) and ``A = c (1 + n_r + 2.5) f_attn W(s)`` fused, ``n_r`` its
    reruns (:func:`attention_reruns`; the causal share ``c`` and the
    backward's recompute, :func:`flash_attention_work`), and the hardware FLOPs utilization
    ``HFU = hardware TFLOP/s / P``."""
    f_gemm, f_attn, f_logit = flops
    n_gpus, l_ = c.d * c.t * c.p * c.cp, float(model.layers)
    tokens = c.gb * c.s
    model_flops = model_flops_per_token(model, c.s) * tokens
    passes = 1.0 + attention_reruns(c)
    if c.attention in FUSED:
        rates = flash_rates()
        attn = (rates.causal_fraction * (passes + rates.backward_factor) * f_attn
                * kernel_window_work(model, c.s, c.attention))
    else:
        attn = (2.0 + passes) * f_attn
    f_rerun = sum(2.0 * n * m_ * n_ * k_ for n, m_, n_, k_ in  # selective-op's products
                  gemm.rerun_shapes(model, c.b, c.s, 1.0, float(model.experts))) \
        if np.any(c.op) else 0.0
    hw_flops = (c.gb / c.b) * (l_ * ((3.0 + c.full) * f_gemm + c.op * f_rerun + attn)
                               + 3.0 * f_logit)
    model_tflops = model_flops / (total * n_gpus) / 1e12
    hardware_tflops = hw_flops / (total * n_gpus) / 1e12
    return {"tokens_per_s_per_gpu": tokens / (total * n_gpus),
            "model_tflops_per_gpu": model_tflops,
            "mfu": model_tflops / peak_tflops if peak_tflops > 0 else model_tflops * np.nan,
            "hardware_tflops_per_gpu": hardware_tflops,
            "hfu": (hardware_tflops / peak_tflops if peak_tflops > 0
                    else hardware_tflops * np.nan)}


def evaluate(model: ModelConfig, hw: HybridHardware, *, dp: ArrayLike, tp: ArrayLike = 1,
             pp: ArrayLike = 1, ep: ArrayLike = 1, zero: ArrayLike = 0,
             micro_batch: ArrayLike = 1, global_batch: ArrayLike, recompute: ArrayLike = 0,
             vp: ArrayLike = 1, sp: ArrayLike | None = None, gpipe: ArrayLike = False,
             seq: int | None = None, dtype: str = "bf16", overlap: float = 0.0,
             scatter_gather: bool = True, grad_accum_fused: bool = True,
             uneven_stages: bool = False, attention: str = "materialized",
             dropout: bool = True, cp: ArrayLike = 1,
             fp8_weight_cache: bool = False, shard: ArrayLike = 0,
             eager: bool = False, fsdp_pp: bool = False) -> dict[str, F]:
    """Iteration time, its parts, memory per GPU and throughput for arrays of configurations.

    ``recompute`` is a code of ``strategies.RECOMPUTE`` (0 none, 1 selective, 2 full, 3
    selective-op); ``sp``
    (sequence parallelism) defaults to on wherever ``tp > 1``. ``grad_accum_fused=False``
    charges a separate element-wise add of every weight gradient into the accumulation buffer
    per micro-batch (frameworks without Megatron's fused weight-gradient accumulation).
    ``uneven_stages=True`` accepts layers that do not divide over the ``pp vp`` chunks
    (DeepSpeed's pipeline partitions them so): the slowest stage holds ``v ceil(l / (p v))``
    layers, which is ``l / p`` whenever they divide. ``attention`` (:data:`ATTENTION`):
    ``materialized`` scores through DRAM, or ``flash``, a fused kernel
    (:func:`attention_time_s`). ``dropout=False`` removes the attention and hidden dropout
    kernels and their masks (:func:`dropout_bytes_per_layer`,
    :func:`activation_bytes_per_layer`). ``cp`` (context parallelism, fused attention only)
    splits every sequence over ``cp`` ranks: per-GPU work and activations over ``s / cp``
    tokens, the key/value ring of :func:`cp_exchange_s`, gradients reduced over ``d cp``
    ranks; the job has ``d t p cp`` GPUs. ``fp8_weight_cache`` (dtype fp8): the weights'
    fp8 copies made once per iteration (:func:`fp8_cast_bytes_per_layer`). ``shard`` (HSDP;
    0: all ``d cp`` ranks): ZeRO shards the dense state over that many data-parallel ranks
    and replicates it over the rest (:func:`sync_time_s`, :func:`memory_bytes`). ``eager``:
    the layer's norms, rotary embedding and gated activation as eager ops
    (:func:`eager_layer`); ``fsdp_pp``: ZeRO 2 and 3 with a pipeline priced as ZeRO 1
    (:func:`priced_zero`). Per iteration ``T_pipe = (m + (p - 1) / v) t_mb``,
    ``T_data = 16 s B / (d cp) / bw(pcie)`` and
    ``T_total = T_data + max(T_pipe + T_opt, f T_dp) + (1 - f) T_dp`` (``f = overlap``).
    Configurations ``check_shapes`` rejects get NaN times and rates. Returns a dict of
    equal-shape arrays (``total_s``, each of ``TIME_PARTS`` + ``_s``, ``mem_*_bytes``,
    ``fits``, ``shape_error``, ``tokens_per_s_per_gpu``, ``model_tflops_per_gpu``,
    ``hardware_tflops_per_gpu``, ...).
    """
    c = configs(model, dp=dp, tp=tp, pp=pp, ep=ep, zero=zero, micro_batch=micro_batch,
                global_batch=global_batch, recompute=recompute, vp=vp, sp=sp, gpipe=gpipe,
                seq=seq, dtype=dtype, attention=attention, dropout=dropout, cp=cp,
                fp8_weight_cache=fp8_weight_cache, shard=shard, eager=eager,
                fsdp_pp=fsdp_pp)
    asked_zero = _i(zero) + 0.0 * c.z  # the stage asked: c.z is the one priced
    shape_error = check_shapes(model, c.d, c.t, c.p, c.e, asked_zero, c.b, c.gb, c.v,
                               uneven_stages, cp=c.cp, seq=c.s, fused=c.attention in FUSED,
                               shard=shard, fsdp_pp=fsdp_pp)
    flops, ln, params = microbatch_flops(model, c), links(hw, c), stage_params(model, c)
    t_acc, t_opt = update_time_s(hw, c, params, grad_accum_fused)
    t_tp, t_ep, t_p2p = comm_time_s(model, c, ln, scatter_gather)
    mb = MicroBatchTimes(gemm_time_s(model, hw, c, flops[1]), elementwise_time_s(model, hw, c),
                         t_acc, t_tp, t_ep, t_p2p, cp_exchange_s(model, hw, c, ln, flops[1]),
                         host_issue_s(model, hw, c))
    t_dp, dp_volume = sync_time_s(model, c, ln, params)
    t_data = data_time_s(16.0 * c.s_rank * c.gb / c.d, hw.pcie_bps)
    total = total_time_s(t_data, st.pipeline_time_s(mb.total_s, c.p, c.m, c.v) + t_opt, t_dp,
                         overlap)
    mem = memory_bytes(model, hw, c, params)
    valid = shape_error == 0
    nan = np.where(valid, 1.0, np.nan)
    return {**{k: x * nan for k, x in time_parts_s(c, mb, t_data, t_opt, t_dp, total).items()},
            "micro_batches": c.m, "zero_priced": c.z,
            "bubble_fraction": st.bubble_fraction(c.p, c.m, c.v),
            "gpus": c.d * c.t * c.p * c.cp, **mem,
            "fits": valid & (mem["mem_total_bytes"] <= hw.mem_bytes), "shape_error": shape_error,
            **{k: x * nan for k, x in throughput(model, c, flops, total, hw.peak_tflops).items()},
            "dp_bytes_per_gpu": dp_volume,
            "tp_bytes_per_gpu": c.m * c.layers_stage * st.tp_bytes_per_layer(
                c.b, c.s_rank, float(model.hidden), c.delta, c.t, c.r),
            "pp_link_nic": ln.pp_cross & (c.p > 1), "sp": c.sp}


def check_dtype(dtype: str, flag: str = "--dtype") -> str:
    """A training dtype must be one of :data:`DTYPES`; else a TraincastError naming the flag
    and the allowed values."""
    if dtype not in DTYPES:
        raise TraincastError(f"{flag} {dtype!r}: unknown dtype",
                             hint=f"choose one of {', '.join(DTYPES)}")
    return dtype


def check_attention(attention: str, flag: str = "--attention") -> str:
    """An attention implementation must be one of :data:`ATTENTION`; else a TraincastError
    naming the flag and the allowed values."""
    if attention not in ATTENTION:
        raise TraincastError(f"{flag} {attention!r}: unknown attention implementation",
                             hint=f"choose one of {', '.join(ATTENTION)}")
    return attention


RECIPE_KNOBS: dict[str, Any] = {"attention": "materialized", "dropout": True, "zero": 0,
                                "grad_accum_fused": True, "context_parallel": False,
                                "fp8_weight_cache": False, "hsdp": True, "eager": False,
                                "selective": "selective", "fsdp_pp": False}
"""The knobs a framework recipe may set (``parallel/recipes.toml``) and their values when
neither a recipe nor a flag sets them (the model's defaults: those of ``megatron-2021`` but
``hsdp``, which that recipe turns off)."""
PRICED_KNOBS: tuple[str, ...] = ("dropout", "grad_accum_fused", "fp8_weight_cache", "eager",
                                 "fsdp_pp")
"""The recipe knobs :func:`evaluate` takes as they are (attention, ZeRO and recomputation are
checked and turned into its other arguments first)."""


def priced_knobs(knobs: dict[str, Any]) -> dict[str, bool]:
    """``knobs``' :data:`PRICED_KNOBS`, as :func:`evaluate`'s keyword arguments."""
    return {k: bool(knobs[k]) for k in PRICED_KNOBS}


SM90: float = 9.0
"""The compute capability from which a recipe's ``sm90`` value applies (Hopper and later)."""
DEFAULT_FRAMEWORK: str = "megatron-2021"
"""The recipe of ``predict --arch hybrid``, ``plan`` and the published tables by default."""


@lru_cache(maxsize=1)
def recipes() -> dict[str, dict[str, Any]]:
    """The shipped framework recipes (``parallel/recipes.toml``): name -> ``{"title",
    "source", "set": {knob: {"value", "source", optional "sm90", "fallback", "gated"}},
    "kept"}``."""
    return dict(package_toml("recipes.toml")["recipe"])


def check_framework(framework: str, flag: str = "--framework") -> str:
    """A framework must name a recipe of :func:`recipes`; else a TraincastError naming the flag
    and the recipes."""
    if framework not in recipes():
        raise TraincastError(f"{flag} {framework!r}: unknown framework recipe",
                             hint=f"choose one of {', '.join(recipes())}")
    return framework


def recipe_settings(framework: str, model: ModelConfig, hw: HybridHardware,
                    fall_back: bool = True) -> dict[str, Any]:
    """The knobs recipe ``framework`` sets for ``model`` on ``hw``: each setting's ``value``,
    its ``sm90`` value on a GPU of compute capability 9.0 or later (Hopper, Blackwell:
    :data:`SM90`), its ``gated`` value for a model with a gated MLP (``n_mat = 3``); an
    attention without a rate on ``hw`` (its GPU or dtype) gives way to the first of the
    setting's ``fallback`` kernels that has one (the stack's own order), unless not
    ``fall_back`` (the kernel the stack prefers)."""
    out = {}
    for knob, setting in recipes()[check_framework(framework)].get("set", {}).items():
        value = setting["value"]
        if "sm90" in setting and hw.compute_capability >= SM90:
            value = setting["sm90"]
        if "gated" in setting and model.gated:
            value = setting["gated"]
        if knob == "attention" and fall_back and not _runs(hw, value):
            value = next((k for k in setting.get("fallback", []) if _runs(hw, k)), value)
        out[knob] = value
    return out


def _runs(hw: HybridHardware, attention: str) -> bool:
    """Whether ``attention`` runs on ``hw``: ``materialized`` always, a fused kernel where it
    has a rate (its GPU and dtype)."""
    return attention not in FUSED or hw.fused_rate(attention) > 0


def resolve_knobs(framework: str, model: ModelConfig, hw: HybridHardware,
                  **given: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The :data:`RECIPE_KNOBS` of one job: a ``given`` value (a flag; None = not given), else
    the recipe's (:func:`recipe_settings`), else the default; context parallelism off where
    the attention that runs is not fused (Megatron-Core's ring runs inside Transformer
    Engine's fused attention). Returns ``(knobs, by_recipe)``, the latter the knobs the recipe
    set that no flag changed, with the values they take (a flag equal to the recipe's value is
    the same job, described the same way)."""
    rec = recipe_settings(framework, model, hw)
    knobs = {k: given[k] if given.get(k) is not None else rec.get(k, default)
             for k, default in RECIPE_KNOBS.items()}
    if knobs["context_parallel"] and knobs["attention"] not in FUSED:
        knobs["context_parallel"] = False  # the ring runs inside the fused attention kernel
    return knobs, {k: knobs[k] for k, v in rec.items()
                   if given.get(k) is None or given[k] == v}


def recompute_mode(recompute: str, knobs: dict[str, Any]) -> str:
    """The recompute mode a job runs: ``selective`` is the stack's selective recomputation, the
    recipe's knob ``selective`` (Megatron's attention core, ``selective``, or torchtitan's op
    policy, ``selective-op``); any other mode as named."""
    return str(knobs["selective"]) if recompute == "selective" else recompute


def gated_dropout_note() -> str:
    """What ``recipe_text`` says beside a recipe's dropout on for a gated-MLP model: that such
    a model trains without, and the recipes that run it so (their ``dropout`` setting, its
    ``gated`` value where it has one, off)."""
    off = [name for name, recipe in recipes().items()
           if (d := recipe.get("set", {}).get("dropout")) is not None
           and d.get("gated", d["value"]) is False]
    return ("the stack's default; a gated-MLP model of the Llama class trains without: "
            f"--framework {join_words(off, 'or')}")


def recipe_text(framework: str, by_recipe: dict[str, Any], dtype: str = "fp8",
                gated: bool = False) -> str:
    """The ``assumed:`` line's words for a recipe: its name and what it set (the fp8 weight
    cache only for a job in ``dtype`` fp8, where it acts); dropout on for a ``gated``-MLP
    model says that such a model trains without (:func:`gated_dropout_note`)."""
    words = {"attention": lambda v: f"{v} attention", "zero": lambda v: f"ZeRO {v}",
             "dropout": lambda v: (f"dropout on ({gated_dropout_note()})" if v and gated
                                   else f"dropout {'on' if v else 'off'}"),
             "grad_accum_fused": lambda v: f"gradient accumulation {'fused' if v else 'unfused'}",
             "context_parallel": lambda v: ("context parallelism in the stack (--cp)" if v
                                            else "no context parallelism"),
             "fp8_weight_cache": lambda v: ("fp8 weights cast once per iteration" if v
                                            else "fp8 weights cast every micro-batch"),
             "hsdp": lambda v: "HSDP searched" if v else "no HSDP",
             "eager": lambda v: ("the layer as eager ops (one kernel per op)" if v
                                 else "fused layer kernels"),
             "selective": lambda v: f"selective recomputation as {v}",
             "fsdp_pp": lambda v: ("ZeRO 2/3 with a pipeline priced as ZeRO 1 (FSDP under "
                                   "PyTorch's pipelining)" if v else "no ZeRO 2/3 with a "
                                   "pipeline")}
    what = ", ".join(words[k](v) for k, v in by_recipe.items()
                     if k != "fp8_weight_cache" or dtype == "fp8")
    return f"framework {framework} (--framework): {what or 'nothing the flags did not set'}"


def check_counts(**counts: int | None) -> None:
    """Sizes given by the caller (``global_batch``, ``seq``, ...) must be at least 1: a 0 is
    never silently read as "the default" (None is). The error names the flag."""
    for name, value in counts.items():
        if value is not None and (isinstance(value, bool) or not value >= 1):
            raise TraincastError(f"--{name.replace('_', '-')} must be at least 1, got {value!r}",
                                 hint="leave the flag out for its default")


DEFAULT_BATCH_TOKENS: int = 4 * 1024 * 1024
"""Tokens per iteration of the default global batch, ``2^22`` (about 4M): Llama 2 trained every
size with a global batch of 4M tokens (Touvron et al. 2023, Table 1), GPT-3 175B with 3.2M
(Brown et al. 2020, Table 2.1)."""
DEFAULT_BATCH_RULE: str = ("B = k max(1, round(2^22 / (s k))) sequences: about 4M tokens per "
                           "iteration (Llama 2: 4M, GPT-3 175B: 3.2M), k = dp x micro-batch "
                           "(x pp with vp > 1) for one configuration; for a search the "
                           "largest divisor of the GPU count at most round(2^22 / s) (a "
                           "re-plan over several counts: the lcm of theirs where it fits)")
"""The default global batch in words (``predict --json`` and ``plan --json``, docs)."""
BUBBLE_WARN_SHARE: float = 0.25
"""A pipeline bubble above this share of the step gets a warning (``predict_hybrid``)."""


def default_global_batch(seq: int, multiple: int = 1) -> int:
    """The global batch in sequences when none is given, one rule for ``plan`` and
    ``predict --arch hybrid``: about :data:`DEFAULT_BATCH_TOKENS` (4M) tokens per iteration,

        B = k max(1, round(2^22 / (s k)))

    with ``k = multiple``: in ``plan`` the largest divisor of the GPU count at most ``round(2^22
    / s)`` (``plan._batch_multiple``; a configuration whose ``dp x micro-batch`` does not divide
    ``B`` is left out of the search), ``dp x micro-batch`` (times ``pp`` with ``vp > 1``) for one
    configuration, so that ``m = B / (dp b)`` is a whole number; ``plan`` prints its ``B`` in
    the ``predict`` line of a row. Seq 4096 -> 1024 sequences, 2048 -> 2048; seq 3000 on 64
    GPUs -> 1408 in ``plan``."""
    if seq < 1 or multiple < 1:
        raise TraincastError(f"sequence length and batch multiple must be at least 1, got "
                             f"{seq} and {multiple}")
    return int(multiple * max(1, round(DEFAULT_BATCH_TOKENS / (seq * multiple))))


def batch_assumption(global_batch: int | None, gb: int, seq: int) -> dict[str, Any]:
    """The global batch a prediction assumed, for ``--json`` and the ``assumed:`` line:
    ``global_batch`` (sequences), ``tokens_per_iteration`` (``B s``), ``default`` (whether
    :func:`default_global_batch` chose it), the ``rule`` and ``text``."""
    how = "the default, --global-batch to change" if global_batch is None else "--global-batch"
    return {"global_batch": gb, "tokens_per_iteration": gb * seq,
            "default": global_batch is None, "rule": DEFAULT_BATCH_RULE,
            "text": f"global batch {gb} sequences ({gb * seq:,} tokens: {how})"}


def bubble_warning(bubble_share: float, micro_batches: float, pp: int, vp: int) -> str:
    """The warning when the pipeline bubble exceeds :data:`BUBBLE_WARN_SHARE` of the step
    (empty otherwise)."""
    if not bubble_share > BUBBLE_WARN_SHARE:
        return ""
    plural = "" if round(micro_batches) == 1 else "es"
    return (f"the pipeline bubble is {100 * bubble_share:.1f}% of the step (over "
            f"{100 * BUBBLE_WARN_SHARE:.0f}%): {micro_batches:.0f} micro-batch{plural} for {pp} "
            f"stages"
            f"{f' x {vp} chunks' if vp > 1 else ''}; more micro-batches (a larger --global-batch "
            f"or a smaller --micro-batch) or interleaving (--vp 2 or more, micro-batches a "
            f"multiple of pp) shrink it")


FUSED_HINT: str = ("a fused attention, which keeps no s x s scores (--attention flash, or "
                   "efficient below compute capability 8.0; or --framework fsdp, which "
                   "picks the kernel the GPU runs)")
"""What shrinks activations that materialized scores fill (``memory_warning``, ``plan``'s
note)."""
SIZE_KEYS: tuple[str, ...] = ("dp", "tp", "pp", "ep", "zero", "micro_batch", "global_batch",
                              "vp")
"""The positional sizes of :func:`check_shapes`, by name (``shape_code``)."""


def shape_code(cfg: ModelConfig, sizes: dict[str, int], attention: str) -> int:
    """:func:`check_shapes`'s code for one configuration given by name (``SIZE_KEYS``, ``cp``,
    ``seq``, ``shard``, ``fsdp_pp`` where given)."""
    return int(check_shapes(cfg, *(_i(sizes[k]) for k in SIZE_KEYS),
                            uneven_stages=bool(sizes.get("uneven_stages")), cp=sizes["cp"],
                            seq=float(sizes["seq"]), fused=attention in FUSED,
                            shard=sizes.get("shard") or 0,
                            fsdp_pp=bool(sizes.get("fsdp_pp"))))


def activations_dominate(mem: dict[str, Any]) -> Any:
    """Whether activations (stored and recomputed) outweigh the model state in the
    ``mem_*_bytes`` of :func:`memory_bytes` (scalars or arrays)."""
    return mem["mem_activations_bytes"] + mem["mem_recompute_bytes"] > mem["mem_state_bytes"]


def memory_warning(sc: dict[str, float], cfg: ModelConfig, sizes: dict[str, int],
                   recompute: str, attention: str, gpus_per_node: int,
                   context_parallel: bool = True) -> str:
    """The warning when a configuration does not fit its GPU (empty when it does), with what
    shrinks each part, each change one the shape rules accept (:func:`shape_code`; tp within a
    node): the next ZeRO stage for the model state (where ``d cp > 1``: ZeRO shards over those
    ranks), with HSDP a shard group twice as large (or every rank); full recomputation, twice
    the tp, pp or cp (cp only where the stack has it, ``context_parallel``), and a fused
    attention (materialized scores, :func:`activations_dominate`) for the activations; where
    the model state alone exceeds the GPU and no ZeRO stage or shard group is left to shard it,
    only tp and pp. ``sizes``: ``SIZE_KEYS``, ``cp``, ``seq`` and ``shard``."""
    total, cap = sc["mem_total_bytes"], sc["mem_capacity_bytes"]
    if total <= cap:
        return ""
    state = sc["mem_state_bytes"]

    def valid(**change: int) -> bool:
        z = {**sizes, **change}
        return z["tp"] <= gpus_per_node and shape_code(cfg, z, attention) == 0

    sharded = sizes["dp"] * sizes["cp"] > 1  # ZeRO shards over the d cp ranks: none at 1
    fixes = [f"--zero {sizes['zero'] + 1}"] if sharded and sizes["zero"] < 3 and valid(
        zero=sizes["zero"] + 1) else []
    shard, group = sizes.get("shard") or 0, sizes["dp"] * sizes["cp"]
    if sizes.get("fsdp_pp") and sizes["pp"] > 1 and sizes["zero"] >= 2 and valid(pp=1):
        fixes.insert(0, f"--pp 1 (with a pipeline ZeRO {sizes['zero']} is priced as ZeRO 1; "
                        "without, it shards the parameters and gradients)")
    if 0 < shard < group:  # HSDP: shard over more ranks, the next divisor of dp x cp
        larger = next(int(k) for k in divisors(group) if k > shard)
        fixes.insert(0, f"--shard {larger}" if larger < group and valid(shard=larger) else
                     "no --shard (ZeRO over every data-parallel rank)")
    # the state alone does not fit and no ZeRO stage or shard group left to shard it further
    state_bound = state > cap and not fixes
    fixes += ["--recompute full"] if recompute != "full" and not state_bound else []
    splits = ("tp", "pp") if state_bound or not context_parallel else ("tp", "pp", "cp")
    fixes += [f"--{k} {2 * sizes[k]}" for k in splits if valid(**{k: 2 * sizes[k]})]
    if attention not in FUSED and activations_dominate(sc) and not state_bound:
        fixes.append(FUSED_HINT)
    return (f"does not fit: {total / 1e9:.1f} GB per GPU of {cap / 1e9:.0f} GB (model state "
            f"{state / 1e9:.1f} GB, activations {(total - state) / 1e9:.1f} GB); "
            f"{', '.join(fixes + ['traincast plan for a layout that fits'])}")


def cp_warning(framework: str, cp: int, knobs: dict[str, Any]) -> str:
    """The warning when ``cp > 1`` is priced under a recipe whose stack has no context
    parallelism (``context_parallel``; empty otherwise)."""
    if cp <= 1 or knobs.get("context_parallel"):
        return ""
    return (f"the {framework} recipe's stack has no context parallelism "
            "(parallel/recipes.toml): --cp is priced as Megatron-Core's ring attention "
            "(--framework megatron-core)")


def hsdp_warning(framework: str, hsdp: bool, knobs: dict[str, Any]) -> str:
    """The warning when HSDP (``--shard``) is priced under a recipe whose stack has none
    (``hsdp`` false; empty otherwise)."""
    if not hsdp or knobs["hsdp"]:
        return ""
    return (f"the {framework} recipe's stack has no HSDP (parallel/recipes.toml): --shard is "
            "priced as PyTorch FSDP's HYBRID_SHARD (--framework fsdp)")


OP_KEPT_ATTENTION: tuple[str, ...] = ("flash", "efficient", "materialized")
"""The attentions ``selective-op`` prices as torchtitan's policy runs them: SDPA's flash and
memory-efficient kernels (in its save list) and the math path (rerun)."""


def selective_op_warning(model: ModelConfig, recompute: str, attention: str) -> str:
    """The warning when ``selective-op`` prices a layer unlike the Llama block whose products
    the policy counts (bias-free, separate projections, :func:`gemm.rerun_shapes`): linear
    layers with biases run as ``aten.addmm``, outside the save list, so the policy would rerun
    them all; a fused attention other than SDPA's flash and memory-efficient kernels is not in
    the list either. The price is the Llama block's, so the run would take longer and keep
    less (empty otherwise)."""
    if recompute != "selective-op":
        return ""
    why = ([f"{model.name}'s linear layers have biases (aten.addmm, which the policy does not "
            "keep: it would rerun every product, not every second one)"] if model.bias else []) \
        + ([f"{attention} attention is not one of the SDPA kernels the policy keeps (it would "
            "rerun it; priced as kept)"] if attention not in OP_KEPT_ATTENTION else [])
    if not why:
        return ""
    return ("selective-op is priced as torchtitan's policy runs its bias-free Llama block with "
            f"SDPA attention: {'; '.join(why)}; expect a longer step and less memory than this")


def tp_warning(tp: int, gpus_per_node: int, nic: str, gpus: int = 0) -> str:
    """The warning when a tensor-parallel group spans nodes (not :func:`in_node`: ``tp >
    gpus per node``, or ``tp`` does not divide it on a job of ``gpus`` > one node): its
    all-reduces, two to four per layer and micro-batch, run over the network, which ``plan``
    never chooses (tensor parallelism stays inside a node; empty otherwise)."""
    if bool(in_node(tp, gpus_per_node, gpus or tp)):
        return ""
    fits = [d for d in range(gpus_per_node, 0, -1) if gpus_per_node % d == 0]
    why = (f"crosses nodes of {gpus_per_node}" if tp > gpus_per_node else
           f"does not divide nodes of {gpus_per_node}, so some groups span two")
    return (f"tensor parallelism over {tp} GPUs {why}: its all-reduces (every layer, every "
            f"micro-batch) run over the network ({nic}); plan keeps tp within a node (--tp "
            f"{', '.join(map(str, fits[:4]))}, a divisor of {gpus_per_node}, and more --pp or "
            "--dp)")


def seq_warning(cfg: ModelConfig, seq: int) -> str:
    """The warning when a sequence is longer than the model's positions (``cfg.positions``,
    the config's ``max_position_embeddings`` or ``n_positions``): with learned positions the
    model has no row for the later tokens (it is priced as if it had); with rotary or ALiBi
    positions it runs, beyond the context it was trained for (empty when ``seq`` is within
    it)."""
    if seq <= cfg.positions:
        return ""
    if cfg.position == "learned":
        return (f"the sequence, {seq} tokens, is longer than {cfg.name}'s {cfg.positions} "
                "learned positions: the model as configured cannot take it (priced as if it "
                "could)")
    kind = {"rope": "rotary", "alibi": "ALiBi"}.get(cfg.position, cfg.position)
    return (f"the sequence, {seq} tokens, is longer than {cfg.name}'s {cfg.positions}-token "
            f"context ({kind} positions run longer, beyond what the model was trained for)")


LONG_DEFAULT_SEQ = 8192
"""A model's own sequence above this many tokens, taken when no ``--seq`` is given, gets a
warning (:func:`long_default_seq_warning`): Llama 2 and 3 pre-trained at 4,096 and 8,192 tokens
(Touvron et al. 2023; Meta, Llama 3 model card), while configs give their longest context
(Mistral 7B v0.1: 32,768; Qwen2.5: 131,072)."""


def long_default_seq_warning(cfg: ModelConfig, seq: int | None) -> str:
    """The warning when no sequence was given (``seq`` None) and the model's own,
    ``cfg.seq`` (a config's ``max_position_embeddings`` where it gives no pre-training length,
    ``original_max_position_embeddings``), is above :data:`LONG_DEFAULT_SEQ`: the longest
    context a model takes need not be the length it was pre-trained at."""
    if seq is not None or cfg.seq <= LONG_DEFAULT_SEQ:
        return ""
    return (f"the sequence, {cfg.seq:,} tokens, is {cfg.name}'s longest context (its config's "
            "max_position_embeddings), which need not be the length it was pre-trained at: "
            "give --seq for the run you mean")


def model_warnings(cfg: ModelConfig, s: int, seq: int | None, attention: str) -> list[str]:
    """The warnings of the model at sequence ``s`` (``seq``: as given, None for the model's
    own) that ``predict --arch hybrid`` and ``plan`` both give: a sequence beyond its positions
    or its long default, a sliding window the attention does not take, logit soft-capping
    (not priced), transformers' default sizes; the empty ones left out."""
    return [w for w in (seq_warning(cfg, s), long_default_seq_warning(cfg, seq),
                        window_warning(cfg, s, attention), softcap_warning(cfg),
                        default_config_warning(cfg)) if w]


def softcap_warning(cfg: ModelConfig) -> str:
    """The note of a model that soft-caps its logits (``ModelConfig.softcaps``: ``cap
    tanh(x / cap)``), which is not priced: with materialized attention one more element-wise
    pass over the ``b a s^2`` scores per layer, forward and backward; a fused kernel must
    take the cap (FlashAttention-2 from 2.6, FlashAttention-3; PyTorch's SDPA does not);
    empty without one."""
    if not cfg.softcaps:
        return ""
    caps = ", ".join(f"{k} {v:g}" for k, v in cfg.softcaps)
    return (f"{cfg.name} soft-caps its logits ({caps}: cap x tanh(x / cap) over the attention "
            "scores or the output logits), which is not priced: materialized attention runs "
            "one more element-wise pass over the scores per layer, forward and backward, and a "
            "fused kernel must take the cap (FlashAttention-2 from 2.6, FlashAttention-3; "
            "PyTorch's SDPA does not)")


def default_config_warning(cfg: ModelConfig) -> str:
    """The note of a model built from transformers' default config of a bare ``model_type``
    (``hf:gemma``; ``zoo.llm.from_transformers``): its sizes need not be any checkpoint's."""
    if not cfg.source.startswith(DEFAULT_CONFIG):
        return ""
    return (f"hf:{cfg.name}: the sizes of {cfg.source}; give the checkpoint's config.json or a "
            "shipped Hub name (traincast zoo list --hf) for its own")


def window_warning(cfg: ModelConfig, seq: int, attention: str) -> str:
    """The note of a model with a sliding window longer sequences skip work under: priced with a
    fused attention (its key blocks outside the window skipped), not with ``materialized``
    (the whole masked square computed, as eager attention does); empty without a window or where
    the sequence fits in it."""
    if not cfg.window or seq <= cfg.window or cfg.window_share <= 0:
        return ""
    layers = ("every layer" if cfg.window_share >= 1 else
              f"{100 * cfg.window_share:.0f}% of the layers")
    share = float(window_work(seq, cfg.window, cfg.window_share))
    if attention in flash_rates().windowed:
        return (f"{cfg.name} attends over a sliding window of {cfg.window} tokens on {layers}: "
                f"its fused attention ({attention}) runs {share:.2f} of the causal work at "
                f"{seq} tokens")
    return (f"{cfg.name} attends over a sliding window of {cfg.window} tokens on {layers}, "
            f"which {attention} attention does not take (it computes the whole causal "
            f"{seq} x {seq} square, the window a mask); a kernel that takes it (--attention "
            f"flash, flash3 or cudnn, or --framework megatron-core or fsdp) runs {share:.2f} of "
            "the causal work")


def _unfused_why(framework: str, cfg: ModelConfig, hw: HybridHardware, attention: str,
                 by_recipe: dict[str, Any]) -> str:
    """Why the attention that runs is not a fused one, for the error of a context
    parallelism that needs one: given with --attention; a recipe that sets none; or the
    recipe's fused kernels, none of which runs on ``hw`` (:func:`why_not_runs`: the GPU's
    compute capability or vendor, the dtype)."""
    if attention in FUSED:
        return ""
    if "attention" not in by_recipe:
        return f"the attention here is {attention} (--attention)"
    wanted = recipe_settings(framework, cfg, hw, fall_back=False).get("attention")
    if wanted not in FUSED:
        return (f"the {framework} recipe's attention is {attention}: --framework megatron-core "
                "sets a fused one, or give --attention")
    return (f"the {framework} recipe's fused attention ({wanted} and its fallbacks) does not "
            f"run here: {wanted}: {why_not_runs(hw, wanted)}; so {attention} attention runs "
            "(give --attention with a kernel that does)")


def _check_sizes(cfg: ModelConfig, sizes: dict[str, Any], attention: str) -> None:
    """An error naming the sizes of a configuration ``check_shapes`` rejects (:func:`shape_code`;
    ``sizes`` by name); called before ``evaluate``, where a size of 0 would divide by zero."""
    code = shape_code(cfg, sizes, attention)
    if code:
        why = SHAPE_ERRORS[code]
        if code == SHAPE_CP_SEQ:   # say which cp would do
            cp, seq = sizes["cp"], sizes["seq"]
            ok = [k for k in range(2, 65) if seq % (2 * k) == 0]
            why += (f": 2 x {cp} = {2 * cp} does not divide {seq}; " + (
                f"cp of {', '.join(map(str, ok[:8]))} would, or cp 1" if ok else
                "an odd sequence takes no cp > 1: use cp 1" if seq % 2 else
                f"no cp from 2 to 64 has 2 x cp dividing {seq}: use cp 1"))
        elif code == SHAPE_CP_FUSED and sizes.get("cp_why"):  # why the attention is not fused
            why += f"; {sizes['cp_why']}"
        elif code == SHAPE_TP:
            ok = divisors(math.gcd(cfg.heads, cfg.kv))
            why += f": tp of {', '.join(map(str, ok[:10]))} would"
        elif code == SHAPE_LAYERS and sizes.get("uneven_stages"):
            vp = sizes.get("vp", 1)
            why = (f"an uneven split needs at least pp x vp = {sizes['pp'] * vp} layers, one "
                   f"per chunk; {cfg.name} has {cfg.layers}")
        elif code == SHAPE_LAYERS:
            vp = sizes.get("vp", 1)
            ok = [p for p in divisors(cfg.layers)
                  if cfg.layers % (p * vp) == 0 and (vp == 1 or p > 1)]  # vp needs pp > 1
            vps = [v for v in divisors(cfg.layers) if v > 1 and cfg.layers % (2 * v) == 0]
            why += (f": {cfg.layers} layers; "
                    + (f"pp of {', '.join(map(str, ok[:10]))} would"
                       + (f" with vp {vp}" if vp > 1 else "") if ok else
                       f"no pp would with vp {vp} (vp of {', '.join(map(str, vps[:10]))} "
                       "would with pp 2)" if vps else f"no pp would with vp {vp}")
                    + (", or --uneven-stages (the slowest stage holds ceil(layers / (pp x "
                       "vp)) layers per chunk)" if cfg.layers >= sizes["pp"] * vp else ""))
        elif code == SHAPE_SHARD:
            group = sizes["dp"] * sizes["cp"]
            why += (f": dp x cp = {group}; --shard of "
                    f"{', '.join(map(str, divisors(group)[:10]))} would")
        elif code == SHAPE_SHARD_ZERO:
            why += (f" (--shard {sizes['shard']} of {sizes['dp'] * sizes['cp']} ranks): "
                    + ("--zero 1, 2 or 3 (ZeRO 0 shards nothing)" if sizes["zero"] < 1 else
                       f"--ep 1 (ep {sizes['ep']} spreads the experts over the data-parallel "
                       "ranks)") + ", or leave --shard out for every rank")
        elif code == SHAPE_EP and cfg.experts <= 1:
            why = f"expert parallelism needs experts; {cfg.name} has none: use ep 1"
        elif code == SHAPE_EP:
            ok = divisors(math.gcd(cfg.experts, sizes["dp"]))
            why += (f": {cfg.experts} experts, dp {sizes['dp']}; ep of "
                    f"{', '.join(map(str, ok[:10]))} would")
        elif code == SHAPE_ZERO_PP and sizes.get("zero_from"):
            why += f"; ZeRO {sizes['zero']} is {sizes['zero_from']}: --zero 1 with --pp"
        elif code == SHAPE_BATCH:
            unit = sizes["dp"] * sizes["micro_batch"]
            why += (f" ({sizes['dp']} x {sizes['micro_batch']} = {unit}): "
                    f"{unit * max(1, round(sizes['global_batch'] / unit))} would")
        raise TraincastError(f"invalid hybrid configuration: {why}",
                             hint=" ".join(f"{k.replace('_', '-')}={sizes[k]}" for k in (
                                 "dp", "tp", "pp", "ep", "cp", "zero", "vp", "micro_batch",
                                 "global_batch", "seq")) + " "
                                  f"attention={attention}, {cfg.name}: "
                                  f"{cfg.layers} layers, {cfg.heads} heads"
                                  + (f", {cfg.kv} key/value heads" if cfg.kv != cfg.heads
                                     else "")
                                  + (f", {cfg.experts} experts" if cfg.experts > 1 else ""))


COMM_PARTS: tuple[str, ...] = ("tp", "pp", "ep", "cp", "dp")
"""The communications of :func:`evaluate` (``comm_{part}_s``), summed into ``comm``."""


def time_summary(sc: dict[str, float]) -> dict[str, Any]:
    """The time keys of the ``predict --json`` object from one configuration's scalar
    ``evaluate`` results: ``time_s`` (the five communications summed into ``comm``;
    ``host_wait``, the GPU's wait for the host, inside the compute parts), each part's
    ``share`` of their sum, ``comm_s`` per strategy, the ``bottleneck`` (the largest of the
    parts, the compute parts less their share of the wait, ``model.busy_parts_s``, and the
    wait itself, ``host``; for ``comm`` labelled by its largest strategy) and ``gpu_util =
    (flop + mem - wait) / total``."""
    comm = {k: sc[f"comm_{k}_s"] for k in COMM_PARTS}
    wait = sc.get("host_wait_s", 0.0)
    time_s = {"data_io": sc["data_io_s"], "compute_flop": sc["compute_flop_s"],
              "compute_mem": sc["compute_mem_s"], "comm": sum(comm.values()),
              "bubble": sc["bubble_s"], "total": sc["total_s"], "host_wait": wait}
    parts = {k: time_s[k] for k in ("data_io", "compute_flop", "compute_mem", "comm", "bubble")}
    denom = sum(parts.values()) or 1.0
    busy = busy_parts_s(time_s["compute_flop"], time_s["compute_mem"], wait)
    bound = {**parts, "compute_flop": float(busy[0]), "compute_mem": float(busy[1]),
             "host": wait}
    bottleneck = max(bound, key=bound.get)
    compute = time_s["compute_flop"] + time_s["compute_mem"]
    labels = {"data_io": "data I/O", "compute_flop": "FLOP-bound compute",
              "compute_mem": "memory-bound compute", "bubble": "pipeline bubble",
              "comm": PART_LABEL["comm_" + max(comm, key=comm.get)],
              "host": BOTTLENECK_LABEL["host"]}
    return {"time_s": time_s, "share": {k: v / denom for k, v in parts.items()}, "comm_s": comm,
            "bottleneck": bottleneck, "bottleneck_label": labels[bottleneck],
            "gpu_util": (compute - wait) / time_s["total"]}


def attention_rate(model: ModelConfig, hw: HybridHardware, attention: str, seq_per_rank: int,
                   dtype: str) -> dict[str, Any] | None:
    """The fused attention's rate as priced for a layer of ``seq_per_rank`` queries (``s /
    cp``) and the model's head size: ``{"kernel", "tflops": R / 1e12, "fraction_of_peak": R /
    P_attn, "peak_dtype": the attention's dtype (bf16 for fp8: the peak ``P_attn`` is
    its), "fraction" and its "source" (the kernel's at the reference shapes), "shape_factor":
    the rate over the fraction, ``g(s, d_k) / g_ref x d / d_k`` (:meth:`FlashRates
    .rate_factor`), "seq_per_rank", "head_dim", "head_dim_kernel" (``d_k``, the size the kernel
    runs the head at), "head_dim_priced" (``d_k``, at most the widest the curve rests on)}``;
    None for ``materialized`` (its products run at the GEMM rate) or a kernel without a rate
    here."""
    rate = hw.fused_rate(attention) if attention in FUSED else 0.0
    if rate <= 0:
        return None
    rates = flash_rates()
    head_k = float(rates.kernel_head_dim(attention, float(model.head_size)))
    factor = float(rates.rate_factor(attention, seq_per_rank, float(model.head_size)))
    fraction = rates.of(attention, hw.gpu, hw.compute_capability, hw.vendor,
                        FLASH_DTYPE.get(dtype, dtype)) or 0.0
    source = rates.sources.get((attention, hw.gpu)) or rates.sources.get((attention, ""), "")
    return {"kernel": attention, "tflops": rate * factor / 1e12,
            "fraction_of_peak": fraction * factor, "peak_dtype": FLASH_DTYPE.get(dtype, dtype),
            "fraction": fraction, "source": source,
            "shape_factor": factor, "seq_per_rank": int(seq_per_rank),
            "head_dim": int(model.head_size), "head_dim_kernel": int(head_k),
            "head_dim_priced": int(min(head_k, rates.head_dim_max.get(attention, math.inf)))}


def hardware_summary(hw: HybridHardware) -> dict[str, Any]:
    """The ``hardware`` object of ``predict --json``: node, GPU, compute strategy (with
    ``compute_why`` under flat peaks), dense peak,
    GEMM and DRAM efficiencies (``mem_fractions``: per memory-bound kernel family), SMs, the
    link names and the collective bandwidths (GB/s)."""
    return {"node": hw.node, "gpu": hw.gpu, "compute": hw.compute,
            **({"compute_why": hw.compute_why} if hw.compute_why else {}),
            "peak_tflops": hw.peak_tflops,
            "gemm_efficiency": hw.gemm_efficiency, "mem_bw_gbs": hw.mem_bw_bps / 1e9,
            "mem_efficiency": hw.mem_efficiency, "mem_fractions": dict(hw.mem_fractions),
            "sms": hw.sms,
            **hw.links, "intra_collective_gbs": hw.intra_coll_bps / 1e9,
            "nic_collective_gbs": hw.nic_coll_bps / 1e9}


def predict_hybrid(model: ModelConfig | str, *, node: str, dp: int = 1, tp: int = 1, pp: int = 1,
                   ep: int = 1, cp: int = 1, zero: int | None = None, micro_batch: int = 1,
                   global_batch: int | None = None, seq: int | None = None,
                   recompute: str = "selective", vp: int = 1, dtype: str = "bf16",
                   sp: bool | None = None, schedule: str = "1f1b", overlap: float = 0.0,
                   gpu: str | None = None, nic: str | None = None, intra: str | None = None,
                   pcie: str | None = None, catalog: Catalog | None = None,
                   attention: str | None = None, dropout: bool | None = None,
                   grad_accum_fused: bool | None = None, eager: bool | None = None,
                   framework: str = DEFAULT_FRAMEWORK,
                   uneven_stages: bool = False, shard: int | None = None) -> dict[str, Any]:
    """One hybrid configuration as the ``predict --json`` object (the keys of docs/model.md, plus
    ``tokens_per_s_per_gpu``, ``model_tflops_per_gpu``, ``memory_gb``, ``fits`` and the
    per-strategy communication in ``comm_s``).

    Without ``global_batch`` the batch is :func:`default_global_batch` (about 4M tokens, a
    multiple of ``dp micro_batch``), as ``plan`` assumes. Also returns ``assumed`` (the global
    batch and the other defaults, with the ``text`` of the ``assumed:`` line),
    ``bubble_fraction`` (bubble / pipeline time, ``(p - 1) / (v m + p - 1)``), ``bubble_share``
    (bubble / step, ``T_bubble / T_total``) and ``warnings`` (a bubble over
    :data:`BUBBLE_WARN_SHARE` of the step, :func:`bubble_warning`; a configuration that does
    not fit, :func:`memory_warning`; ``cp > 1`` under a recipe without context parallelism,
    :func:`cp_warning`; a tensor-parallel group across nodes, :func:`tp_warning`).

    ``framework`` names a recipe (``parallel/recipes.toml``, :func:`resolve_knobs`) that sets
    ``attention``, ``dropout``, ``zero`` and ``grad_accum_fused`` where they are None (not
    given); a given value overrides the recipe's. ``uneven_stages``: layers that do not divide
    over ``pp vp`` chunks are split unevenly (:func:`evaluate`: the slowest stage holds
    ``v ceil(l / (p v))`` layers), as Megatron-Core's first/last-stage layer counts and
    DeepSpeed's partitioner do. ``shard`` (HSDP): ZeRO shards the model state over that many
    of the ``dp cp`` data-parallel ranks and replicates it over the rest (None: all of them).
    """
    from traincast.parallel.models import get_model

    cfg = get_model(model) if isinstance(model, str) else model
    if recompute not in st.RECOMPUTE:
        raise TraincastError(f"unknown recompute mode {recompute!r}",
                             hint=f"choose one of {', '.join(st.RECOMPUTE)}")
    if schedule not in ("1f1b", "gpipe"):
        raise TraincastError(f"unknown pipeline schedule {schedule!r}", hint="1f1b or gpipe")
    check_counts(global_batch=global_batch, seq=seq)
    check_framework(framework)
    if attention is not None:
        check_attention(attention)
    cat = catalog or load_catalog()  # read once: the hardware and the links' sources
    hw = hybrid_hardware(cat, node, dtype, gpu=gpu, nic=nic, intra=intra, pcie=pcie)
    knobs, by_recipe = resolve_knobs(framework, cfg, hw, attention=attention, dropout=dropout,
                                     zero=zero, grad_accum_fused=grad_accum_fused,
                                     eager=eager)
    attention, zero = knobs["attention"], int(knobs["zero"])
    asked, recompute = recompute, recompute_mode(recompute, knobs)
    s = int(seq or cfg.seq)
    sizes = {"dp": dp, "tp": tp, "pp": pp, "ep": ep, "cp": cp, "zero": zero,
             "fsdp_pp": bool(knobs["fsdp_pp"]),
             "micro_batch": micro_batch, "global_batch": dp * micro_batch, "vp": vp, "seq": s,
             "uneven_stages": uneven_stages, "shard": shard,
             "zero_from": f"the {framework} recipe's" if "zero" in by_recipe else ""}
    check_counts(shard=shard)
    if min(dp, tp, pp, ep, cp, micro_batch, vp) < 1:
        _check_sizes(cfg, sizes, attention)
    gb = int(global_batch or default_global_batch(s, dp * micro_batch * (pp if vp > 1 else 1)))
    sizes["global_batch"] = gb
    sizes["cp_why"] = _unfused_why(framework, cfg, hw, attention, by_recipe)
    _check_sizes(cfg, sizes, attention)
    def run(on: HybridHardware) -> dict[str, Any]:
        return evaluate(cfg, on, dp=dp, tp=tp, pp=pp, ep=ep, cp=cp, zero=zero,
                        micro_batch=micro_batch, global_batch=gb,
                        recompute=st.RECOMPUTE_CODE[recompute], vp=vp, sp=sp,
                        gpipe=schedule == "gpipe", seq=seq, dtype=dtype, overlap=overlap,
                        attention=attention, uneven_stages=uneven_stages, shard=shard or 0,
                        **priced_knobs(knobs))

    def comm_of(res_: dict[str, Any]) -> float:
        return float(sum(np.sum(res_[f"comm_{k}_s"]) for k in COMM_PARTS))

    res = run(hw)
    sc = {k: float(v) for k, v in res.items() if np.ndim(v) == 0 or np.size(v) == 1}
    from traincast.predict import links_stand_in

    stood = links_stand_in(
        {role: cat.links[name] for role, name in hw.links.items() if name in cat.links},
        comm_of(res), lambda role: comm_of(run(replace(
            hw, **{f"{role}_bps": 2.0 * getattr(hw, f"{role}_bps")}))))
    priced = int(sc["zero_priced"])
    group = dp * cp
    g_s = group if not shard else shard
    bubble_share = sc["bubble_s"] / sc["total_s"] if sc["total_s"] > 0 else 0.0
    warnings = [w for w in (bubble_warning(bubble_share, sc["micro_batches"], pp, vp),
                            memory_warning(sc, cfg, sizes, recompute, attention,
                                           hw.gpus_per_node, bool(knobs["context_parallel"])),
                            cp_warning(framework, cp, knobs),
                            hsdp_warning(framework, g_s < group, knobs),
                            selective_op_warning(cfg, recompute, attention),
                            tp_warning(tp, hw.gpus_per_node, hw.links["nic"], dp * tp * pp * cp),
                            *model_warnings(cfg, s, seq, attention)) if w]
    sp_on = bool(res["sp"])
    assumed = batch_assumption(global_batch, gb, s) | {
        "seq": s, "seq_default": seq is None, "micro_batch": micro_batch, "recompute": recompute,
        "dtype": dtype, "schedule": schedule, "sp": sp_on, "attention": attention,
        "framework": framework, "recipe": by_recipe}
    seq_how = "the model's, --seq to change" if seq is None else "--seq"
    slowest = int(math.ceil(cfg.layers / (pp * vp)) * vp)  # layers of the slowest stage
    assumed["text"] += (f"; sequence {s} tokens ({seq_how}); micro-batch {micro_batch} "
                        f"(--micro-batch); recompute {recompute} (--recompute"
                        + (f" {asked}: the recipe's" if asked != recompute else "")
                        + f"); {dtype} "
                        f"(--dtype); {'1F1B' if schedule == '1f1b' else 'GPipe'} schedule; "
                        + (f"uneven stages, the slowest with {slowest} of {cfg.layers} layers "
                           "(--uneven-stages); " if uneven_stages and cfg.layers % (pp * vp)
                           else "")
                        + f"sequence parallelism {'on' if sp_on else 'off'}"
                        + (" (tp 1: nothing to split)" if sp and tp == 1 else "")
                        + " (--sp/--no-sp); "
                        + (f"{attention} attention (--attention); "
                           if "attention" not in by_recipe else "")
                        + (f"ZeRO {zero} (--zero); " if "zero" not in by_recipe else "")
                        + (f"ZeRO {zero} with pp {pp} priced as ZeRO 1 (FSDP under PyTorch's "
                           "pipelining: parameters gathered once, gradients reduce-scattered "
                           "once per iteration); " if priced != zero else "")
                        + (("the layer as eager ops (--eager); "
                            if knobs["eager"] else "fused layer kernels (--no-eager); ")
                           if eager is not None and "eager" not in by_recipe else "")
                        + (f"HSDP: the model state sharded over {g_s} of the {group} "
                           f"data-parallel ranks, {group // g_s} replicas (--shard); "
                           if g_s < group else "")
                        + recipe_text(framework, {k: v for k, v in by_recipe.items()
                                                  if k != "hsdp"}, dtype, cfg.gated))
    return {
        **time_summary(sc),
        "attention_rate": attention_rate(cfg, hw, attention, s // cp, dtype),
        "tokens_per_s_per_gpu": sc["tokens_per_s_per_gpu"],
        "model_tflops_per_gpu": sc["model_tflops_per_gpu"],
        "mfu": sc["mfu"] if math.isfinite(sc["mfu"]) else None,
        "hfu": sc["hfu"] if math.isfinite(sc["hfu"]) else None,
        "hardware_tflops_per_gpu": sc["hardware_tflops_per_gpu"],
        "bubble_fraction": sc["bubble_fraction"],
        "bubble_share": bubble_share,
        "assumed": assumed,
        "warnings": warnings,
        "memory_gb": {k: sc[f"mem_{k}_bytes"] / 1e9 for k in
                      ("weights", "grads", "optimizer", "activations", "recompute", "total",
                       "capacity")},
        "fits": bool(res["fits"]),
        "memory": {"footprint_gb": sc["mem_total_bytes"] / 1e9,
                   "capacity_gb": sc["mem_capacity_bytes"] / 1e9, "fits": bool(res["fits"])},
        "job": {"arch": "hybrid",
                "arch_label": "data + tensor + pipeline + expert + context parallelism",
                "model": cfg.name, "experts": cfg.experts, "gpus": int(sc["gpus"]), "dp": dp,
                "tp": tp, "pp": pp, "ep": ep, "cp": cp, "zero": zero, "zero_priced": priced,
                "shard": g_s, "replicas": group // g_s,
                "micro_batch": micro_batch, "global_batch": gb,
                "micro_batches": int(round(sc["micro_batches"])), "seq": int(seq or cfg.seq),
                "recompute": recompute, "vp": vp, "sp": bool(res["sp"]), "schedule": schedule,
                "uneven_stages": bool(uneven_stages),
                "layers_slowest_stage": slowest,
                "dtype": dtype, "overlap": overlap, "attention": attention,
                "framework": framework, "dropout": knobs["dropout"],
                "grad_accum_fused": knobs["grad_accum_fused"], "eager": knobs["eager"],
                "fp8_weight_cache": knobs["fp8_weight_cache"] if dtype == "fp8" else None,
                "nodes": -(-int(sc["gpus"]) // hw.gpus_per_node)},
        "hardware": {**hardware_summary(hw), "links_stand_in": stood},
    }
