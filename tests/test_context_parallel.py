"""Context parallelism (``cp``) in the hybrid model: each sequence split over ``cp`` GPUs, the
key/value chunks passed around a ring and overlapped with the attention, gradients reduced
over ``d cp`` ranks.

Every expected number is worked out by hand below for one layer of b = 1, h = 4096, a = 32
heads of d = 128, kv = 8 key/value heads, 16-bit (delta = 2), t = 1, fused attention."""

from __future__ import annotations

import dataclasses
import json
import shlex

import numpy as np
import pytest
from typer.testing import CliRunner

from test_attention import flash_shape_by_hand
from traincast.cli import app
from traincast.errors import TraincastError
from traincast.parallel.hybrid import (
    SHAPE_ERRORS,
    TIME_PARTS,
    activation_bytes_per_layer,
    attention_passes_s,
    attention_time_s,
    check_shapes,
    configs,
    cp_exchange_s,
    elementwise_time_s,
    evaluate,
    flash_attention_work,
    gemm_time_s,
    hybrid_hardware,
    links,
    predict_hybrid,
    stage_params,
    update_time_s,
)
from traincast.parallel.models import ModelConfig
from traincast.parallel.plan import enumerate_configs, plan

runner = CliRunner()
H, A, KV, FFN, V, L = 4096, 32, 8, 16384, 32000, 2
GQA = ModelConfig(name="gqa-cp-test", layers=L, hidden=H, heads=A, ffn=FFN, vocab=V, seq=8192,
                  kv_heads=KV)


def cfg(seq: int, cp: int, dp: int = 1, recompute: int = 0, attention: str = "flash",
        zero: int = 0):
    return configs(GQA, dp=dp, tp=1, pp=1, ep=1, zero=zero, micro_batch=1, global_batch=dp,
                   recompute=recompute, vp=1, sp=None, gpipe=False, seq=seq, dtype="bf16",
                   attention=attention, cp=cp)


def cli(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def test_flash_work_per_context_rank_by_hand() -> None:
    # s = 8192 over cp = 2: each rank's queries (4096 tokens) meet all 8192 keys, causal half
    # of the full square 4 b s^2 a d = 4 x 8192^2 x 4096 = 2^40, split over 2 ranks: 2^38
    f_fwd, f_bwd, b_fwd, b_bwd = (float(x) for x in flash_attention_work(GQA, cfg(8192, 2)))
    assert f_fwd == 0.5 * 4 * 8192 ** 2 * 4096 / 2 == 2 ** 38
    assert f_bwd == 2.5 * 2 ** 38
    # Q and O of the rank's 4096 tokens (a d = 4096 wide), K and V of all 8192 as the chunks
    # arrive (kv d = 1024 wide): 2 x (2 x 4096 x 4096 + 2 x 8192 x 1024)
    assert b_fwd == 2 * (2 * 4096 * 4096 + 2 * 8192 * 1024) == 100_663_296
    # backward: Q, O, dO read and dQ written for the rank's tokens, K, V read and dK, dV
    # written for all of them
    assert b_bwd == 2 * (4 * 4096 * 4096 + 4 * 8192 * 1024) == 201_326_592


def test_per_token_work_and_activations_are_those_of_the_rank_s_tokens() -> None:
    hw = hybrid_hardware(None, "dgx-h100", "bf16")
    # without an s^2 term (fused attention) every memory-bound kernel and every activation of
    # a rank holding s / cp = 4096 tokens is that of a 4096-token sequence on one GPU
    for r in (0, 1, 2):
        split, whole = cfg(8192, 2, recompute=r), cfg(4096, 1, recompute=r)
        assert float(elementwise_time_s(GQA, hw, split)) == \
            pytest.approx(float(elementwise_time_s(GQA, hw, whole)), rel=1e-12)
        assert float(activation_bytes_per_layer(GQA, split)) == \
            pytest.approx(float(activation_bytes_per_layer(GQA, whole)), rel=1e-12)
    # Korthikanti et al., no recomputation: s b h 34 + 4 s b (kv d - h) with s = 4096
    assert float(activation_bytes_per_layer(GQA, cfg(8192, 2))) == \
        4096 * H * 34 + 4 * 4096 * (KV * 128 - H)


def test_products_and_communication_are_those_of_the_rank_s_tokens() -> None:
    hw = hybrid_hardware(None, "dgx-h100", "bf16")
    f_attn = np.float64(0.0)
    # linear products and logits: a rank of s / cp tokens runs what a 4096-token sequence runs
    for r in (0, 2):
        split, whole = cfg(8192, 2, recompute=r), cfg(4096, 1, recompute=r)
        lin = [float(gemm_time_s(GQA, hw, x, f_attn)) - L * float(attention_time_s(
               GQA, hw, x, f_attn)) for x in (split, whole)]
        assert lin[0] == pytest.approx(lin[1], rel=1e-12)
    # tensor-parallel all-reduces, pipeline sends and data I/O over s / cp tokens, by hand:
    # t = 2, p = 2, cp = 2 (8 GPUs: one node), s = 8192, b = 1, B = 4 (dp 1, 4 micro-batches)
    kw = {"tp": 2, "pp": 2, "micro_batch": 1, "global_batch": 4, "attention": "flash",
          "recompute": 0}
    res = evaluate(GQA, hw, dp=1, cp=2, seq=8192, **kw)
    s_r, m, t = 4096, 4, 2
    # T_tp = m L_s n_ar (2 (t-1)/t b s_r h delta / bw + 2 (t-1) alpha), L_s = 1, n_ar = 4
    t_tp = m * 1 * 4 * (2 * (t - 1) / t * s_r * H * 2 / hw.intra_bps + 2 * (t - 1)
                        * hw.intra_latency_s)
    assert float(res["comm_tp_s"]) == pytest.approx(t_tp, rel=1e-12)
    # T_p2p = m 2 v (alpha + b s_r h delta / bw): the replica t cp p = 8 GPUs fits the node
    t_p2p = m * 2 * (hw.intra_latency_s + s_r * H * 2 / hw.intra_bps)
    assert float(res["comm_pp_s"]) == pytest.approx(t_p2p, rel=1e-12)
    # T_data = 16 s_r B / d / bw(pcie)
    assert float(res["data_io_s"]) == pytest.approx(16 * s_r * 4 / hw.pcie_bps, rel=1e-12)
    assert float(res["gpus"]) == 8


def test_optimizer_step_over_dp_times_cp_by_hand() -> None:
    hw = hybrid_hardware(None, "dgx-h100", "bf16")
    c = cfg(8192, 2, dp=2, zero=1)
    params = stage_params(GQA, c)
    # ZeRO-1: each of the d cp = 4 ranks updates a quarter, 52 bytes per parameter (bf16)
    _, t_opt = update_time_s(hw, c, params)
    assert float(t_opt) == pytest.approx(
        52 * float(params.total) / 4 / hw.memory_bps("elementwise"), rel=1e-12)


def test_context_group_crossing_nodes_uses_the_network() -> None:
    hw = hybrid_hardware(None, "dgx-h100", "bf16")

    def one(t: int, cp: int, p: int = 1):
        return configs(GQA, dp=1, tp=t, pp=p, ep=1, zero=0, micro_batch=1, global_batch=1,
                       recompute=0, vp=1, sp=None, gpipe=False, seq=8192, dtype="bf16",
                       attention="flash", cp=cp)

    inside, across = links(hw, one(2, 4)), links(hw, one(4, 4))     # t cp = 8 and 16 GPUs
    assert float(inside.cp_bps) == hw.intra_bps
    assert float(across.cp_bps) == min(hw.intra_bps, hw.nic_bps)
    assert float(across.cp_latency_s) == max(hw.intra_latency_s, hw.nic_latency_s)
    # a model replica of t cp p = 4 x 2 x 2 = 16 GPUs spans two nodes: its stages cross the NIC
    assert bool(links(hw, one(4, 2, 2)).pp_cross) and not bool(links(hw, one(4, 1, 2)).pp_cross)


def test_ring_exchange_exposed_by_hand() -> None:
    # a slow link: 1 GB/s, no latency, so the chunks cannot hide behind the attention
    hw = dataclasses.replace(hybrid_hardware(None, "dgx-h100", "bf16"), intra_bps=1e9,
                             intra_latency_s=0.0)
    c = cfg(8192, 4, recompute=2)
    # the kernel's rate at the s / cp = 2048 queries of one rank, d = 128 (g / g_ref by hand)
    rf = hw.fused_rate("flash") * flash_shape_by_hand("flash", 2048, 128)
    # per rank: causal 4 b s^2 a d / 2 / cp = 2^40 / 2 / 4 = 2^37 forward, 2.5 x backward
    t_fwd = max(2 ** 37 / rf, 2 * (2 * 2048 * 4096 + 2 * 8192 * 1024) / hw.mem_eff_bps)
    t_bwd = max(2.5 * 2 ** 37 / rf, 2 * (4 * 2048 * 4096 + 4 * 8192 * 1024) / hw.mem_eff_bps)
    got = [float(x) for x in attention_passes_s(GQA, hw, c, np.float64(0.0))]
    assert got == pytest.approx([t_fwd, t_bwd], rel=1e-12)
    # a chunk: K and V of s / cp = 2048 tokens, kv d = 1024 wide, 2 bytes: 8,388,608 bytes
    chunk = 2 * 2048 * 2 * 1024
    assert chunk == 8_388_608
    x_fwd = 3 * max(0.0, chunk / 1e9 - t_fwd / 4)       # cp - 1 = 3 steps exposed
    x_bwd = 3 * max(0.0, 2 * chunk / 1e9 - t_bwd / 4)   # backward passes K, V and dK, dV
    assert x_fwd > 0 and x_bwd > 0
    # full recomputation gathers the chunks again for the rerun forward: 2 X_fwd + X_bwd
    ln = links(hw, c)
    assert float(cp_exchange_s(GQA, hw, c, ln, np.float64(0.0))) == \
        pytest.approx(L * (2 * x_fwd + x_bwd), rel=1e-12)


def test_ring_exchange_hides_behind_long_attention_and_is_zero_without_cp() -> None:
    hw = hybrid_hardware(None, "dgx-h100", "bf16")
    c = cfg(65536, 2)
    t_fwd, _ = (float(x) for x in attention_passes_s(GQA, hw, c, np.float64(0.0)))
    chunk = 2 * 32768 * 2 * 1024
    # NVLink inside a node: one step's transfer is shorter than half the attention pass
    assert chunk / hw.intra_bps + hw.intra_latency_s < t_fwd / 2
    assert float(cp_exchange_s(GQA, hw, c, links(hw, c), np.float64(0.0))) == 0.0
    one = cfg(8192, 1)
    assert float(cp_exchange_s(GQA, hw, one, links(hw, one), np.float64(0.0))) == 0.0


def test_gradients_reduce_and_shard_over_dp_times_cp() -> None:
    hw = hybrid_hardware(None, "dgx-h100", "bf16")
    kw = {"tp": 1, "pp": 1, "seq": 8192, "attention": "flash", "micro_batch": 1}
    # dp 2 x cp 2 holds the weights on 4 GPUs, as dp 4: the same ZeRO-1 shard and gradient bytes
    a = evaluate(GQA, hw, dp=2, cp=2, zero=1, global_batch=2, **kw)
    b = evaluate(GQA, hw, dp=4, cp=1, zero=1, global_batch=4, **kw)
    assert float(a["mem_optimizer_bytes"]) == pytest.approx(float(b["mem_optimizer_bytes"]))
    assert float(a["dp_bytes_per_gpu"]) == pytest.approx(float(b["dp_bytes_per_gpu"]))
    assert float(a["comm_dp_s"]) == pytest.approx(float(b["comm_dp_s"]))
    assert float(a["gpus"]) == 4
    # tokens per GPU: B s / (T d t p cp)
    assert float(a["tokens_per_s_per_gpu"]) == \
        pytest.approx(2 * 8192 / (float(a["total_s"]) * 4), rel=1e-12)
    assert "comm_cp" in TIME_PARTS and "comm_cp_s" in a


def test_shape_rules_of_cp() -> None:
    one = np.ones(1)
    code = int(check_shapes(GQA, one, one, one, one, 0 * one, one, one, one, cp=2.0,
                            seq=8192.0, fused=False)[0])
    assert "fused attention" in SHAPE_ERRORS[code]
    # 2 cp must divide the sequence: 4100 = 8 x 512 + 4
    code = int(check_shapes(GQA, one, one, one, one, 0 * one, one, one, one, cp=4.0,
                            seq=4100.0, fused=True)[0])
    assert "divisible by 2 x cp" in SHAPE_ERRORS[code] and "fused" not in SHAPE_ERRORS[code]
    assert int(check_shapes(GQA, one, one, one, one, 0 * one, one, one, one, cp=4.0,
                            seq=4096.0, fused=True)[0]) == 0
    with pytest.raises(TraincastError, match="context parallelism"):
        predict_hybrid(GQA, node="dgx-h100", dp=1, cp=2, attention="materialized")


def test_cli_cp_counts_gpus_and_names_itself() -> None:
    base = ["predict", "--arch", "hybrid", "--model", "zoo:llama2-7b", "--node", "dgx-h100",
            "--dp", "2", "--cp", "2", "--seq", "16384", "--framework", "megatron-core",
            "--global-batch", "8"]
    out = json.loads(cli(*base, "--json"))
    assert out["job"]["cp"] == 2 and out["job"]["gpus"] == 4 and "cp" in out["comm_s"]
    assert "cp=2" in cli(*base)
    res = runner.invoke(app, [*base, "--gpus", "8"])
    assert res.exit_code != 0 and "dp x tp x pp x cp = 4" in str(res.exception)
    res = runner.invoke(app, [*base, "--attention", "materialized"])
    assert res.exit_code != 0 and "context parallelism" in str(res.exception)
    assert "--cp" in cli("predict", "--help")


def test_plan_searches_cp_only_with_fused_attention() -> None:
    fused = enumerate_configs(GQA, 16, 8, 16, seq=8192, fused=True)
    assert np.all(fused["dp"] * fused["tp"] * fused["pp"] * fused["cp"] == 16)
    assert set(fused["cp"].tolist()) == {1, 2, 4, 8, 16}
    # 2 cp must divide the sequence: 6000 = 2^4 x 3 x 5^3 on 16 GPUs takes cp = 1, 2, 4, 8
    # (2 cp = 2, 4, 8, 16), not 16 (32 does not divide 6000)
    odd = enumerate_configs(GQA, 16, 8, 16, seq=6000, fused=True)
    assert set(odd["cp"].tolist()) == {1, 2, 4, 8}
    plain = enumerate_configs(GQA, 16, 8, 16, seq=8192, fused=False)
    assert set(plain["cp"].tolist()) == {1}


def test_plan_picks_cp_for_a_long_sequence_and_predict_agrees() -> None:
    # 262,144 tokens of Llama-2-7B on 16 H100s: the ring exchange hides behind attention this
    # long, tensor parallelism's all-reduces do not, so the fastest layouts split the sequence
    out = plan("zoo:llama2-7b", 16, "dgx-h100", seq=262144, global_batch=2,
               framework="megatron-core", top=2)
    assert out["top"] and all(r["config"]["cp"] > 1 for r in out["top"])
    assert "context parallelism" in out["assumed"]["text"]
    for row in out["top"]:
        line = shlex.split(row["predict"])
        assert "--cp" in line
        again = json.loads(cli(*line[1:], "--json"))
        assert again["time_s"]["total"] == pytest.approx(row["time_s"]["total"], rel=1e-9)
        assert again["job"]["cp"] == row["config"]["cp"]


def test_cp_refused_in_fp32_says_the_recipe_fell_back_to_materialized(tc) -> None:
    # megatron-core sets a fused attention on an H100, but none of its kernels takes fp32: the
    # error says what runs and what would (the memory-efficient kernel takes fp32)
    args = ["predict", "--arch", "hybrid", "--model", "zoo:llama2-7b", "--node", "dgx-h100",
            "--dp", "2", "--tp", "2", "--cp", "4", "--seq", "131072", "--global-batch", "32",
            "--framework", "megatron-core", "--dtype", "fp32"]
    run = tc(*args)
    said = " ".join(run.stderr.split())
    assert run.returncode == 2 and "needs a fused attention" in said
    assert ("the megatron-core recipe's fused attention (cudnn and its fallbacks) does not run "
            "here: cudnn: it takes fp16 or bf16 tensors, not fp32") in said
    assert tc(*args, "--attention", "efficient", "--json").returncode == 0
    # on a V100 the cause is the GPU, not the dtype; without a recipe, the default attention
    v100 = [a if a != "dgx-h100" else "pai-v100m32-nvlink" for a in args[:-2]]
    said = " ".join(tc(*v100, "--dtype", "fp16").stderr.split())
    assert "flash: it needs compute capability 8.0, the GPU has 7.0" in said
    plain = [a for a in args[:-4]]  # no --framework, default dtype
    said = " ".join(tc(*plain).stderr.split())
    assert "the megatron-2021 recipe's attention is materialized: --framework megatron-core " \
           "sets a fused one" in said and "dtype" not in said
