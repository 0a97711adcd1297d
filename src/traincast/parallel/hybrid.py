"""The ``hybrid`` architecture: data (ZeRO 0-3), tensor, pipeline and expert parallelism composed
into one iteration time per GPU, vectorized over arrays of configurations.

For one micro-batch on the slowest pipeline stage (``L_s = l / p`` layers plus the output head):

    T_flop  = L_s ((1 + full) T_lin_fwd + T_lin_bwd + (3 + full + selective) T_attn)
              + T_logit_fwd + T_logit_bwd                    (parallel/gemm.py: each product at
              R = P eta, divided by its tile/wave efficiency; attention products at their roofline)
    T_mem   = [L_s ((1 + full) E_fwd + E_bwd + selective E_attn) + 52 b s V / t] / (M mem_eff)
              (element-wise kernels counted one by one, fp32 cross-entropy over the logits)
    T_acc   = 3 delta stage_params / (M mem_eff)             (unfused gradient accumulation only)
    T_tp    = L_s n_ar (2 (t-1)/t b s h delta / bw_tp + 2 (t-1) latency)
    T_ep    = L_s 4 (e-1)/e (b s / t) k h delta / bw_ep      (MoE layers only)
    T_p2p   = 2 v (latency + b s h delta / scatter / bw_pp)  (p > 1)
    t_mb    = T_flop + T_mem + T_acc + T_tp + T_ep + T_p2p

and per iteration (``m = B / (d b)`` micro-batches)::

    T_pipe  = (m + (p - 1) / v) t_mb           (bubble: (p - 1) / v t_mb)
    T_dp    = ZeRO-stage volume / bw_dp        (strategies.dp_bytes; bw_dp = min(intra, k nic)
              for k group members per node) + tied-embedding all-reduce between first and last stage
    T_opt   = 52 bytes (32 fp32) x optimizer-shard parameters / (M mem_eff)
    T_data  = 16 s B / d / bw(pcie)            (token ids and labels, int64)
    T_total = T_data + max(T_pipe + T_opt, f T_dp) + (1 - f) T_dp      (f = overlap, default 0)

with ``P`` the GPU's dense peak of the dtype, ``eta`` its achievable GEMM fraction and
``mem_eff`` its achievable DRAM fraction (the catalog's ``gemm_max_fraction`` and
``mem_max_fraction`` through traincast.compute). Memory per GPU = weights + gradients
+ optimizer state (after ZeRO) + activations (Korthikanti et al.) of the first stage. Everything
is in docs/parallelism.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast import compute
from traincast.architectures import ring_link_bps
from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.model import data_time_s, total_time_s
from traincast.parallel import gemm
from traincast.parallel import strategies as st
from traincast.parallel.models import ModelConfig
from traincast.resolve import resolve_link

F = NDArray[np.float64]
DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8")
TIME_PARTS: tuple[str, ...] = ("data_io", "compute_flop", "compute_mem", "comm_tp", "comm_pp",
                               "comm_ep", "comm_dp", "bubble")
PART_LABEL: dict[str, str] = {
    "data_io": "data I/O", "compute_flop": "FLOP-bound compute",
    "compute_mem": "memory-bound compute", "comm_tp": "tensor-parallel all-reduces",
    "comm_pp": "pipeline point-to-point", "comm_ep": "expert all-to-alls",
    "comm_dp": "data-parallel gradient/parameter sync", "bubble": "pipeline bubble"}


@dataclass(frozen=True)
class HybridHardware:
    """Effective rates of one node preset for the hybrid model (``flops_per_s``: the achievable
    GEMM rate ``R = P eta``; link rates ``bw_gbs x efficiency`` in bytes/s)."""

    node: str
    gpu: str
    gpus_per_node: int
    peak_tflops: float
    flops_per_s: float
    mem_bw_bps: float
    mem_efficiency: float
    sms: float
    mem_bytes: float
    pcie_bps: float
    intra_bps: float
    nic_bps: float
    rails: float
    intra_latency_s: float
    nic_latency_s: float
    links: dict[str, str]

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
        """Achievable DRAM bandwidth of memory-bound kernels: ``M mem_efficiency``."""
        return self.mem_bw_bps * self.mem_efficiency


def hybrid_hardware(catalog: Catalog | None, node: str, dtype: str = "bf16", *,
                    gpu: str | None = None, nic: str | None = None, intra: str | None = None,
                    pcie: str | None = None) -> HybridHardware:
    """The rates of a node preset (with optional overrides) for the hybrid model, the same as
    :func:`traincast.resolve.resolve` gives every architecture (each link looked up once,
    :func:`traincast.resolve.resolve_link`: a catalog name or a speed).

    GEMM and DRAM rates: the compute strategy the catalog selects for the GPU
    (:func:`traincast.compute.rates`: a calibrated ``flop_efficiency`` < 1, else the published
    ``gemm_max_fraction``, else 1; the same for ``mem_max_fraction``). SM count for GEMM wave
    quantization: the catalog's ``sms`` (0 = none). Collective bandwidth: the link's ``bw_gbs``
    times its ``efficiency`` (NCCL bus bandwidth where measured); ``rails`` = the node's
    ``nics``.
    """
    catalog = catalog or load_catalog()
    if dtype not in DTYPES:
        raise TraincastError(f"unknown dtype {dtype!r}", hint=f"choose one of {', '.join(DTYPES)}")
    nd = catalog.node(node)
    g = catalog.gpu(gpu or nd.gpu)
    if getattr(g, f"{dtype}_tflops") <= 0:
        has = [d for d in DTYPES if getattr(g, f"{d}_tflops") > 0]
        raise TraincastError(f"{g.name} has no {dtype} peak in the catalog (unsupported dtype)",
                             hint=f"choose a dtype {g.name} has: {', '.join(has)}")
    flops_per_s, mem_bps = compute.rates(g, dtype, catalog.compute)
    links = {role: resolve_link(catalog, spec or getattr(nd, role))
             for role, spec in (("pcie", pcie), ("intra", intra), ("nic", nic))}
    return HybridHardware(node=node, gpu=g.name, gpus_per_node=nd.gpus,
                          peak_tflops=g.peak_tflops(dtype), flops_per_s=flops_per_s,
                          mem_bw_bps=g.mem_bw_gbs * 1e9,
                          mem_efficiency=mem_bps / (g.mem_bw_gbs * 1e9),
                          sms=float(g.sms), mem_bytes=g.mem_gb * 1e9,
                          pcie_bps=links["pcie"].bw_bps, intra_bps=links["intra"].bw_bps,
                          nic_bps=links["nic"].bw_bps, rails=float(nd.nics),
                          intra_latency_s=links["intra"].latency_us * 1e-6,
                          nic_latency_s=links["nic"].latency_us * 1e-6,
                          links={k: links[k].name for k in links})


def _i(x: ArrayLike) -> F:
    return np.asarray(x, dtype=np.float64)


def check_shapes(model: ModelConfig, dp: F, tp: F, pp: F, ep: F, zero: F, mb: F, gb: F,
                 vp: F, uneven_stages: bool = False) -> NDArray[np.int64]:
    """Reason code per configuration: 0 valid, else the index into ``SHAPE_ERRORS``
    (``uneven_stages``: layers need not divide evenly over ``pp vp`` chunks, only be at least
    one per chunk)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        m = gb / (dp * mb)
    checks = [
        np.ones_like(dp, dtype=bool),
        (dp >= 1) & (tp >= 1) & (pp >= 1) & (ep >= 1) & (mb >= 1) & (vp >= 1),
        np.isclose(m, np.round(m)) & (m >= 1),
        (model.heads % tp == 0) & ((model.kv % tp == 0) | (tp % model.kv == 0)),
        (model.layers % (pp * vp) == 0) | (uneven_stages & (model.layers >= pp * vp)),
        (vp == 1) | ((pp > 1) & (np.round(m) % pp == 0)),
        (ep == 1) | ((model.experts % ep == 0) & (dp % ep == 0)),
        (zero >= 0) & (zero <= 3),
        (zero <= 1) | (pp == 1),
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
    "(use zero 0 or 1 with pp > 1)")


def evaluate(model: ModelConfig, hw: HybridHardware, *, dp: ArrayLike, tp: ArrayLike = 1,
             pp: ArrayLike = 1, ep: ArrayLike = 1, zero: ArrayLike = 0,
             micro_batch: ArrayLike = 1, global_batch: ArrayLike, recompute: ArrayLike = 0,
             vp: ArrayLike = 1, sp: ArrayLike | None = None, gpipe: ArrayLike = False,
             seq: int | None = None, dtype: str = "bf16", overlap: float = 0.0,
             scatter_gather: bool = True, grad_accum_fused: bool = True,
             uneven_stages: bool = False) -> dict[str, F]:
    """Iteration time, its parts, memory per GPU and throughput for arrays of configurations.

    ``recompute`` is a code of ``strategies.RECOMPUTE`` (0 none, 1 selective, 2 full); ``sp``
    (sequence parallelism) defaults to on wherever ``tp > 1``. ``grad_accum_fused=False``
    charges a separate element-wise add of every weight gradient into the accumulation buffer
    per micro-batch (frameworks without Megatron's fused weight-gradient accumulation).
    ``uneven_stages=True`` accepts layers that do not divide over the ``pp vp`` chunks
    (DeepSpeed's pipeline partitions them so): the slowest stage holds ``v ceil(l / (p v))``
    layers, which is ``l / p`` whenever they divide.
    Returns a dict of equal-shape arrays (``total_s``, each of ``TIME_PARTS`` + ``_s``,
    ``mem_*_bytes``, ``fits``, ``shape_error``, ``tokens_per_s_per_gpu``, ``model_tflops_per_gpu``,
    ``hardware_tflops_per_gpu``, ...).
    """
    d, t, p, e, z = _i(dp), _i(tp), _i(pp), _i(ep), _i(zero)
    b, gb, r, v = _i(micro_batch), _i(global_batch), _i(recompute), _i(vp)
    d, t, p, e, z, b, gb, r, v = np.broadcast_arrays(d, t, p, e, z, b, gb, r, v)
    sp_arr = (t > 1) if sp is None else np.broadcast_to(np.asarray(sp, dtype=bool), d.shape)
    s = float(seq or model.seq)
    h, a, V, l_ = float(model.hidden), float(model.heads), float(model.vocab), float(model.layers)
    k = float(model.top_k)
    delta = float(st.DTYPE_BYTES[dtype])
    g = float(hw.gpus_per_node)
    shape_error = check_shapes(model, d, t, p, e, z, b, gb, v, uneven_stages)
    m = gb / (d * b)
    n_gpus = d * t * p
    layers_stage = np.ceil(l_ / (p * v)) * v      # l / p when the layers divide evenly
    full = (r == st.RECOMPUTE_CODE["full"]).astype(np.float64)
    selective = (r == st.RECOMPUTE_CODE["selective"]).astype(np.float64)

    # ---- FLOPs of one micro-batch (model-wide, counted as executed, for the throughput metrics)
    f_gemm = 2.0 * b * s * (model.attn_matrix_params + k * model.mlp_matrix_params)
    qd = float(model.q_dim)                  # a d: h unless the config sets head_dim
    f_attn = 4.0 * b * s * s * qd
    f_logit = 2.0 * b * s * h * V
    # ---- GEMM time of one micro-batch on the slowest (last) stage, per GPU (parallel/gemm.py):
    # linear products with tile/wave quantization, attention products with their roofline
    rate = hw.flops_per_s
    lin_fwd, lin_bwd = gemm.gemm_times_s(gemm.linear_shapes(model, b, s, t, e), rate, hw.sms,
                                         dtype)
    one = np.ones_like(t)
    logit_fwd, logit_bwd = gemm.gemm_times_s([(one, b * s * one, V / t * one, h * one)], rate,
                                             hw.sms, dtype)
    attn_s = f_attn / t / rate * gemm.attention_slowdown(
        s, float(model.head_size), delta, rate, hw.mem_eff_bps)
    t_flop = (layers_stage * ((1.0 + full) * lin_fwd + lin_bwd
                              + (3.0 + full + selective) * attn_s)
              + logit_fwd + logit_bwd)
    # ---- memory-bound element-wise kernels, counted kernel by kernel (forward repeated with
    # full recomputation, the attention core's with selective recomputation)
    ew_fwd, ew_bwd, ew_attn = st.elementwise_bytes_per_layer(s, b, h, a, model.ffn, model.n_mat,
                                                             k, t, sp_arr, delta)
    # + the fp32 cross-entropy over the last stage's logits (b s V / t elements)
    t_mem = (layers_stage * ((1.0 + full) * ew_fwd + ew_bwd + selective * ew_attn)
             + st.CROSS_ENTROPY_BYTES * b * s * V / t) / hw.mem_eff_bps
    # ---- links: tensor groups inside a node when t <= g; consecutive stages share a node when
    # a whole model replica (t p GPUs) fits in one; expert groups span t e GPUs.
    tp_bw = np.where(t <= g, hw.intra_bps, min(hw.intra_bps, hw.nic_bps))
    pp_cross = t * p > g
    pp_bw = np.where(pp_cross, min(hw.intra_bps, hw.nic_bps), hw.intra_bps)
    ep_bw = np.where(t * e <= g, hw.intra_bps, min(hw.intra_bps, hw.nic_bps))
    tp_lat = np.where(t <= g, hw.intra_latency_s, max(hw.intra_latency_s, hw.nic_latency_s))
    t_tp = layers_stage * (st.tp_bytes_per_layer(b, s, h, delta, t, r) / tp_bw
                           + st.tp_collectives_per_layer(r) * st.ring_latency_s(t, tp_lat))
    moe_layers = layers_stage if model.experts > 1 else 0.0 * layers_stage
    t_ep = moe_layers * st.ep_bytes_per_layer(b, s, h, k, delta, t, e, r) / ep_bw
    scatter = np.where(pp_cross & scatter_gather, t, 1.0)
    pp_lat = np.where(pp_cross, max(hw.intra_latency_s, hw.nic_latency_s), hw.intra_latency_s)
    t_p2p = st.p2p_time_s(st.p2p_bytes(b, s, h, delta, scatter), p, v, pp_bw, pp_lat)

    # ---- parameters on the most loaded stage (first: its layers + the input embedding; a
    # single stage also holds an untied head)
    dense_layer = model.layer_params - model.expert_params_per_layer
    stage_params = (layers_stage * (dense_layer / t + model.expert_params_per_layer / (t * e))
                    + (model.embedding_params + np.where(p == 1, model.head_params, 0.0)) / t
                    + np.where(p == 1, model.final_norm_params, 0.0))
    # ---- unfused gradient accumulation: each micro-batch adds every weight gradient into the
    # accumulation buffer (read both, write one) on every stage
    t_acc = 0.0 if grad_accum_fused else st.grad_accum_bytes(stage_params, delta) / hw.mem_eff_bps
    t_mb = t_flop + t_mem + t_acc + t_tp + t_ep + t_p2p
    bubble_steps = (p - 1.0) / v
    w_b, g_b, o_b = st.model_state_bytes(stage_params, d, z, dtype)
    # ZeRO-3 gathers one layer's parameters at a time (its working set)
    w_b = w_b + np.where(z >= 3, dense_layer / t * delta, 0.0)
    grad_bytes = stage_params * delta
    # a group with k members on a node drives min(rails, k) network ports, as NCCL runs one
    # ring per rail: its ring crosses nodes at min(intra, min(rails, k) nic) (as allreduce-cluster)
    dp_members_per_node = np.clip(np.floor(g / t), 1.0, d)
    dp_ring_bps = ring_link_bps(d, dp_members_per_node, hw.intra_bps, hw.nic_bps, hw.rails)
    dp_volume = st.dp_bytes(grad_bytes, grad_bytes, d, m, z)
    t_dp = np.where(d > 1, dp_volume / dp_ring_bps, 0.0)
    # tied input embedding and output head on the first and last stage: their gradients are
    # all-reduced between the two stages (a 2-member ring) every iteration
    emb_bw = np.where(pp_cross, min(hw.intra_bps, hw.nic_bps), hw.intra_bps)
    t_emb = np.where((p > 1) & model.tied,
                     st.embedding_sync_bytes(model.vocab * h / t, delta) / emb_bw, 0.0)
    t_dp = t_dp + t_emb
    opt_params = np.where(z >= 1, stage_params / d, stage_params)
    t_opt = st.OPTIMIZER_STEP_BYTES[dtype] * opt_params / hw.mem_eff_bps
    t_data = data_time_s(16.0 * s * gb / d, hw.pcie_bps)

    t_pipe = st.pipeline_time_s(t_mb, p, m, v)
    total = total_time_s(t_data, t_pipe + t_opt, t_dp, overlap)

    # ---- activations held by the first stage (or the last, which also holds the logits)
    act_layer = st.activation_bytes_per_layer(s, b, h, a, t, sp_arr, r, delta)
    inflight = st.inflight_microbatches(p, m, v, gpipe)
    logits_act = 4.0 * s * b * h / t * (1.0 + V / h) * delta / 2.0
    act_first = act_layer * layers_stage * inflight + np.where(p == 1, logits_act, 0.0)
    act_last = act_layer * layers_stage * np.where(np.asarray(gpipe, dtype=bool), m, 1.0) \
        + logits_act
    act = np.maximum(act_first, act_last)
    mem_total = w_b + g_b + o_b + act

    tokens = gb * s
    model_flops = (6.0 * model.params_flop + 12.0 * l_ * qd * s) * tokens
    hw_flops = (gb / b) * (l_ * ((3.0 + full) * (f_gemm + f_attn) + selective * f_attn)
                           + 3.0 * f_logit)
    valid = shape_error == 0
    fits = valid & (mem_total <= hw.mem_bytes)
    nan = np.where(valid, 1.0, np.nan)
    return {
        "total_s": total * nan,
        "data_io_s": t_data * nan,
        "compute_flop_s": m * t_flop * nan,
        "compute_mem_s": (m * (t_mem + t_acc) + t_opt) * nan,
        "comm_tp_s": m * t_tp * nan,
        "comm_pp_s": m * t_p2p * nan,
        "comm_ep_s": m * t_ep * nan,
        "comm_dp_s": t_dp * nan,
        "bubble_s": bubble_steps * t_mb * nan,
        "microbatch_s": t_mb * nan,
        "micro_batches": m,
        "bubble_fraction": st.bubble_fraction(p, m, v),
        "gpus": n_gpus,
        "mem_weights_bytes": w_b, "mem_grads_bytes": g_b, "mem_optimizer_bytes": o_b,
        "mem_activations_bytes": act, "mem_total_bytes": mem_total,
        "mem_capacity_bytes": np.full(d.shape, hw.mem_bytes),
        "fits": fits, "shape_error": shape_error,
        "tokens_per_s_per_gpu": tokens / (total * n_gpus) * nan,
        "model_tflops_per_gpu": model_flops / (total * n_gpus) / 1e12 * nan,
        "hardware_tflops_per_gpu": hw_flops / (total * n_gpus) / 1e12 * nan,
        "dp_bytes_per_gpu": dp_volume,
        "tp_bytes_per_gpu": m * layers_stage * st.tp_bytes_per_layer(b, s, h, delta, t, r),
        "pp_link_nic": pp_cross & (p > 1),
        "sp": sp_arr,
    }


def _check_sizes(cfg: ModelConfig, dp: int, tp: int, pp: int, ep: int, zero: int,
                 micro_batch: int, gb: int, vp: int) -> None:
    """An error naming the sizes of a configuration ``check_shapes`` rejects; called before
    ``evaluate``, where a size of 0 would divide by zero."""
    code = int(check_shapes(cfg, *(_i(x) for x in (dp, tp, pp, ep, zero, micro_batch, gb, vp))))
    if code:
        raise TraincastError(f"invalid hybrid configuration: {SHAPE_ERRORS[code]}",
                             hint=f"dp={dp} tp={tp} pp={pp} ep={ep} vp={vp} micro-batch="
                                  f"{micro_batch} global-batch={gb}, {cfg.name}: "
                                  f"{cfg.layers} layers, {cfg.heads} heads")


def predict_hybrid(model: ModelConfig | str, *, node: str, dp: int = 1, tp: int = 1, pp: int = 1,
                   ep: int = 1, zero: int = 0, micro_batch: int = 1,
                   global_batch: int | None = None, seq: int | None = None,
                   recompute: str = "selective", vp: int = 1, dtype: str = "bf16",
                   sp: bool | None = None, schedule: str = "1f1b", overlap: float = 0.0,
                   gpu: str | None = None, nic: str | None = None, intra: str | None = None,
                   pcie: str | None = None, catalog: Catalog | None = None) -> dict[str, Any]:
    """One hybrid configuration as the ``predict --json`` object (DESIGN.md keys, plus
    ``tokens_per_s_per_gpu``, ``model_tflops_per_gpu``, ``memory_gb``, ``fits`` and the
    per-strategy communication in ``comm_s``)."""
    from traincast.parallel.models import get_model

    cfg = get_model(model) if isinstance(model, str) else model
    if recompute not in st.RECOMPUTE:
        raise TraincastError(f"unknown recompute mode {recompute!r}",
                             hint=f"choose one of {', '.join(st.RECOMPUTE)}")
    if schedule not in ("1f1b", "gpipe"):
        raise TraincastError(f"unknown pipeline schedule {schedule!r}", hint="1f1b or gpipe")
    hw = hybrid_hardware(catalog, node, dtype, gpu=gpu, nic=nic, intra=intra, pcie=pcie)
    gb = int(global_batch or dp * micro_batch)
    _check_sizes(cfg, dp, tp, pp, ep, zero, micro_batch, gb, vp)
    res = evaluate(cfg, hw, dp=dp, tp=tp, pp=pp, ep=ep, zero=zero, micro_batch=micro_batch,
                   global_batch=gb, recompute=st.RECOMPUTE_CODE[recompute], vp=vp, sp=sp,
                   gpipe=schedule == "gpipe", seq=seq, dtype=dtype, overlap=overlap)
    sc = {k: float(v) for k, v in res.items() if np.ndim(v) == 0 or np.size(v) == 1}
    comm = {k: sc[f"comm_{k}_s"] for k in ("tp", "pp", "ep", "dp")}
    time_s = {"data_io": sc["data_io_s"], "compute_flop": sc["compute_flop_s"],
              "compute_mem": sc["compute_mem_s"], "comm": sum(comm.values()),
              "bubble": sc["bubble_s"], "total": sc["total_s"]}
    parts = {k: time_s[k] for k in ("data_io", "compute_flop", "compute_mem", "comm", "bubble")}
    denom = sum(parts.values()) or 1.0
    bottleneck = max(parts, key=parts.get)
    labels = {"data_io": "data I/O", "compute_flop": "FLOP-bound compute",
              "compute_mem": "memory-bound compute", "bubble": "pipeline bubble",
              "comm": PART_LABEL["comm_" + max(comm, key=comm.get)]}
    return {
        "time_s": time_s,
        "share": {k: v / denom for k, v in parts.items()},
        "comm_s": comm,
        "bottleneck": bottleneck,
        "bottleneck_label": labels[bottleneck],
        "gpu_util": (time_s["compute_flop"] + time_s["compute_mem"]) / time_s["total"],
        "tokens_per_s_per_gpu": sc["tokens_per_s_per_gpu"],
        "model_tflops_per_gpu": sc["model_tflops_per_gpu"],
        "hardware_tflops_per_gpu": sc["hardware_tflops_per_gpu"],
        "bubble_fraction": sc["bubble_fraction"],
        "memory_gb": {k: sc[f"mem_{k}_bytes"] / 1e9 for k in
                      ("weights", "grads", "optimizer", "activations", "total", "capacity")},
        "fits": bool(res["fits"]),
        "job": {"arch": "hybrid", "arch_label": "data + tensor + pipeline + expert parallelism",
                "model": cfg.name, "gpus": int(dp * tp * pp), "dp": dp, "tp": tp, "pp": pp,
                "ep": ep, "zero": zero, "micro_batch": micro_batch, "global_batch": gb,
                "micro_batches": int(round(sc["micro_batches"])), "seq": int(seq or cfg.seq),
                "recompute": recompute, "vp": vp, "sp": bool(res["sp"]), "schedule": schedule,
                "dtype": dtype, "overlap": overlap,
                "nodes": -(-int(dp * tp * pp) // hw.gpus_per_node)},
        "hardware": {"node": hw.node, "gpu": hw.gpu, "peak_tflops": hw.peak_tflops,
                     "gemm_efficiency": hw.gemm_efficiency, "mem_bw_gbs": hw.mem_bw_bps / 1e9,
                     "mem_efficiency": hw.mem_efficiency, "sms": hw.sms,
                     **hw.links, "intra_collective_gbs": hw.intra_coll_bps / 1e9,
                     "nic_collective_gbs": hw.nic_coll_bps / 1e9},
    }
