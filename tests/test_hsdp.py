"""HSDP in the hybrid model (``--shard``): ZeRO shards the model state over a group of the
data-parallel ranks (one node's) and replicates it over the rest, as PyTorch FSDP's
``HYBRID_SHARD`` does: its collectives inside the shard group, then each gradient shard
all-reduced across the replicas.

Every expected number is worked out by hand for GPT-2 (P = 124,439,808 parameters, its
published count with tied embeddings) on dp = 16 (two 8-GPU nodes), bf16 (2 bytes), global
batch 64 at micro-batch 1 (m = 4 micro-batches per iteration):

    ZeRO-3 over all 16:   (15/16) m (2 P + P) 2          = 22.5 P bytes per GPU
    ZeRO-3, shard 8:      (7/8) m (2 P + P) 2            = 21 P   in the node's ring
                        + 2 (1/2) (2 P / 8) m            =  1 P   across the 2 replicas
    ZeRO-1, shard 8:      (7/8) (P + P) 2                = 3.5 P  in the node's ring
                        + 2 (1/2) (2 P / 8)              = 0.25 P across the 2 replicas
"""

from __future__ import annotations

import json
import shlex

import numpy as np
import pytest
from typer.testing import CliRunner

from traincast.cli import app
from traincast.parallel.hybrid import (
    SHAPE_ERRORS,
    SHAPE_SHARD,
    SHAPE_SHARD_ZERO,
    check_shapes,
    evaluate,
    hybrid_hardware,
)
from traincast.parallel.models import get_model
from traincast.parallel.plan import enumerate_configs, plan

P = 124_439_808
GPT2 = get_model("gpt2")
runner = CliRunner()


def _run(node: str = "dgx-a100", nic: str | None = None, **kw):
    hw = hybrid_hardware(None, node, "bf16", nic=nic)
    sizes = dict(dp=16, zero=3, micro_batch=1, global_batch=64, seq=1024,
                 attention="flash") | kw
    return hw, {k: float(v) if np.ndim(v) == 0 else v
                for k, v in evaluate(GPT2, hw, **sizes).items()}


def test_the_parameter_count_is_gpt2s() -> None:
    assert GPT2.params == P


def test_bytes_per_gpu_by_hand() -> None:
    assert _run()[1]["dp_bytes_per_gpu"] == pytest.approx(22.5 * P)
    assert _run(shard=16)[1]["dp_bytes_per_gpu"] == pytest.approx(22.5 * P)  # all: no HSDP
    assert _run(shard=8)[1]["dp_bytes_per_gpu"] == pytest.approx(21 * P + P)
    assert _run(shard=8, zero=1)[1]["dp_bytes_per_gpu"] == pytest.approx(3.5 * P + 0.25 * P)


def test_state_is_sharded_over_the_group_only() -> None:
    full, hsdp = _run(zero=1)[1], _run(zero=1, shard=8)[1]
    # Adam's 12 bytes per parameter (fp32 master, two moments) over 16 ranks, over 8 with HSDP
    assert full["mem_optimizer_bytes"] == pytest.approx(12 * P / 16)
    assert hsdp["mem_optimizer_bytes"] == pytest.approx(12 * P / 8)
    assert hsdp["mem_weights_bytes"] == full["mem_weights_bytes"] == 2 * P  # ZeRO-1: whole
    z3 = _run(shard=8)[1]
    assert z3["mem_grads_bytes"] == pytest.approx(2 * P / 8)


def test_the_shard_ring_stays_in_the_node_and_the_replicas_cross_it() -> None:
    # shard group: the 8 GPUs of a node, on the intra-node link; replicas: one GPU per node,
    # 2 of them, on one network port: min(intra, nic)
    for nic in (None, "eth25"):
        hw, res = _run(nic=nic, shard=8)
        expect = 21 * P / hw.intra_bps + P / min(hw.intra_bps, hw.nic_bps)
        assert res["comm_dp_s"] == pytest.approx(expect)
    # on 25 Gbit Ethernet the full ring crosses the network with all its 22.5 P
    hw, full = _run(nic="eth25")
    assert full["comm_dp_s"] > _run(nic="eth25", shard=8)[1]["comm_dp_s"]


def test_a_nodes_replica_rings_share_its_ports() -> None:
    # h100-pcie: one network port per node of 8 GPUs; the 8 replica rings of a node's shard
    # group (one per member) run at once through it: an eighth of the port each
    hw, res = _run(node="h100-pcie", shard=8)
    assert hw.rails == 1
    expect = 21 * P / hw.intra_bps + P / min(hw.intra_bps, hw.nic_bps / 8)
    assert res["comm_dp_s"] == pytest.approx(expect)


def test_experts_shard_and_replicate_with_the_dense_state() -> None:
    # Mixtral 8x7B (46,702,792,704 parameters, its published count) at ep 1: HSDP shards
    # every parameter, experts included, over the group; ZeRO-1's Adam state, 12 bytes per
    # parameter, over 8 ranks instead of 16, and every gradient shard crosses the replicas
    mixtral = get_model("mixtral-8x7b")
    assert mixtral.params == 46_702_792_704
    hw = hybrid_hardware(None, "dgx-h100", "bf16")

    def run(**kw) -> dict:
        res = evaluate(mixtral, hw, dp=16, zero=1, micro_batch=1, global_batch=16, seq=4096,
                       attention="flash", **kw)
        return {k: float(v) for k, v in res.items() if np.ndim(v) == 0}

    full, hsdp = run(), run(shard=8)
    assert full["mem_optimizer_bytes"] == pytest.approx(12 * mixtral.params / 16)
    assert hsdp["mem_optimizer_bytes"] == pytest.approx(12 * mixtral.params / 8)
    # (7/8) (G + P) 2 bytes in the group + 2 (1/2) (2 P / 8) across the 2 replicas
    p = mixtral.params
    assert hsdp["dp_bytes_per_gpu"] == pytest.approx(7 / 8 * 4 * p + 2 * p / 8)


def test_shape_rules() -> None:
    def code(**kw) -> int:
        sizes = dict(dp=16.0, tp=1.0, pp=1.0, ep=1.0, zero=3.0, mb=1.0, gb=64.0, vp=1.0) | kw
        return int(check_shapes(GPT2, **{k: np.float64(v) for k, v in sizes.items()}))

    assert code(shard=8.0) == 0 and code(shard=16.0) == 0 and code(shard=0.0) == 0
    assert code(shard=3.0) == SHAPE_SHARD and code(shard=32.0) == SHAPE_SHARD
    assert code(shard=8.0, zero=0.0) == SHAPE_SHARD_ZERO
    assert code(shard=8.0, ep=2.0) != 0  # gpt2 has no experts: the ep rule first
    assert "ZeRO 1, 2 or 3" in SHAPE_ERRORS[SHAPE_SHARD_ZERO]
    assert np.isnan(_run(shard=3)[1]["total_s"])


def test_predict_flags_and_errors() -> None:
    base = ["predict", "--arch", "hybrid", "--model", "zoo:gpt2", "--node", "dgx-a100",
            "--dp", "16", "--zero", "3", "--global-batch", "64", "--json"]
    out = json.loads(runner.invoke(app, [*base, "--shard", "8"]).stdout)
    assert (out["job"]["shard"], out["job"]["replicas"]) == (8, 2)
    assert "sharded over 8 of the 16 data-parallel ranks, 2 replicas" in out["assumed"]["text"]
    bad = runner.invoke(app, [*base[:-1], "--shard", "5"])
    assert bad.exit_code != 0 and "--shard of 1, 2, 4, 8, 16 would" in str(bad.exception)
    zero = runner.invoke(app, [*base[:7], "--dp", "16", "--zero", "0", "--shard", "8"])
    assert zero.exit_code != 0 and "--zero 1, 2 or 3 (ZeRO 0" in str(zero.exception)
    moe = ["predict", "--arch", "hybrid", "--model", "zoo:mixtral-8x7b", "--node", "dgx-h100",
           "--dp", "16", "--ep", "2", "--zero", "1", "--shard", "8"]
    ep = runner.invoke(app, moe)
    assert ep.exit_code != 0 and "--ep 1 (ep 2 spreads the experts" in str(ep.exception)
    ignored = runner.invoke(app, ["predict", "--flops", "1e12", "--shard", "8"])
    assert ignored.exit_code != 0 and "--shard" in str(ignored.exception)


def test_plan_searches_one_nodes_shard_and_predict_agrees() -> None:
    cfgs = enumerate_configs(GPT2, 16, 8, 64)
    hsdp = cfgs["shard"] < cfgs["dp"] * cfgs["cp"]
    # shard = one node's data-parallel ranks, 8 / tp, fewer than dp, ZeRO 1 to 3 only
    assert np.all(cfgs["shard"][hsdp] == 8 // cfgs["tp"][hsdp])
    assert np.all(cfgs["zero"][hsdp] >= 1) and np.all(cfgs["shard"][hsdp] < cfgs["dp"][hsdp])
    assert hsdp.any() and (~hsdp).any()
    # Llama-2-7B with FSDP on 4 nodes on 25 Gbit Ethernet (a port per GPU): HSDP leads
    out = plan("zoo:llama2-7b", 32, "dgx-a100", framework="fsdp", network="eth25", top=3)
    rows = out["network"]["top"]
    assert rows[0]["config"]["shard"] == 8
    line = shlex.split(rows[0]["predict"])
    assert "--shard" in line and "--nic" in line
    again = json.loads(runner.invoke(app, [*line[1:], "--json"]).stdout)
    assert again["time_s"]["total"] == pytest.approx(rows[0]["time_s"]["total"], rel=1e-9)


def test_a_shard_group_too_small_to_fit_is_told_the_larger_one() -> None:
    from traincast.parallel.hybrid import predict_hybrid

    # Llama-2-7B's 16 bytes of state per parameter (ZeRO-3, Adam) over 2 ranks: about 54 GB,
    # more than an A100's 40 GB; over 8, about 13.5 GB
    def run(shard: int) -> dict:
        return predict_hybrid("llama2-7b", node="dgx-a100-40gb", dp=16, zero=3, shard=shard,
                              seq=2048, framework="fsdp", global_batch=64)

    small, node = run(2), run(8)
    assert not small["fits"] and "--shard 4" in small["warnings"][0]
    state = sum(small["memory_gb"][k] for k in ("weights", "grads", "optimizer"))
    assert state == pytest.approx(16 * get_model("llama2-7b").params / 2 / 1e9, rel=0.02)
    assert node["fits"] and not node["warnings"]


def test_a_recipe_without_hsdp_searches_none_and_predict_says_so() -> None:
    # Megatron-LM 2021 (the default recipe) all-reduces over every data-parallel rank
    searched = enumerate_configs(GPT2, 16, 8, 64, hsdp=False)
    assert np.all(searched["shard"] == searched["dp"] * searched["cp"])
    out = plan("zoo:llama2-7b", 32, "dgx-a100", top=50)
    assert all(r["config"]["shard"] == r["config"]["dp"] for r in out["top"])
    assert "no HSDP" in out["assumed"]["text"]
    res = json.loads(runner.invoke(app, ["predict", "--arch", "hybrid", "--model", "zoo:gpt2",
                                         "--node", "dgx-a100", "--dp", "16", "--zero", "3",
                                         "--shard", "8", "--json"]).stdout)
    assert any("no HSDP" in w for w in res["warnings"])
