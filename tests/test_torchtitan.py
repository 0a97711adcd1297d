"""torchtitan's stack in the hybrid model: its op-level selective recomputation
(``--recompute selective-op``) and the Llama layer as eager PyTorch ops (recipe knob ``eager``,
the ``torchtitan`` recipe).

Hand numbers for Llama 3 8B (h = 4096, a d = 4096, kv d = 1024, f = 14336, 32 layers, 32
heads) in bf16 (delta = 2) at one sequence of s tokens, t = 1:

* ``selective-op`` reruns every second product of the layer's forward, in torchtitan's order
  wq, wk, wv, wo, w1, w3, w2: wk, wo and w3, ``2 s h (kv d + a d + f)`` = 2 s 4096 (1024 +
  4096 + 14336) = 159,383,552 s FLOPs per layer;
* it keeps per layer the input (h), wq's and wv's outputs (a d + kv d), w1's (f), w2's (h)
  and the fused attention's output (a d) and fp32 log-sum-exp (4 bytes x a per token):
  2 s (4096 + 5120 + 14336 + 4096 + 4096) + 4 s 32 = 63,616 s bytes;
* an eager layer with SDPA's flash attention, per element of ``s h`` (the eager table of
  ``parallel/recipes.toml``): forward 2 RMSNorms x 36 (x.float() 2+4, pow 4+4, mean 4,
  x*rsqrt 4+4, type_as 4+2, *weight 2+2) + rotary on q and k, 20 each per element
  (x.float() 2+4, complex multiply 4+4, type_as 4+2) over 1 + 1/4 + repeat_kv of k and v
  (read 1/4, write 1, 2 bytes each) 2 x 2.5 + SwiGLU (silu 2+2, multiply 2+2+2) 10 over
  f/h = 3.5 (no copy of the attention output: flash's is contiguous): 72 + 25 + 5 + 35 = 137
  bytes; backward 2 x 92 (grad*weight 4, weight gradient 8, to fp32 6, grad*rsqrt 8, rsqrt
  gradient 16, mean 4, pow 28, sum of x's gradients 12, to bf16 6) + 25 + 5 + SwiGLU 18 x
  3.5 + the q/k/v and w1/w3 input gradients added (3 adds of 2+2+2): 184 + 25 + 5 + 63 + 18 =
  295 bytes; kernels 2 x 8 + 6 + 2 + 2 = 26 forward and 2 x 16 + 2 x 5 + 2 + 3 + 3 = 50
  backward (rotary: to fp32, the conjugate made and the multiply, to bf16).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from traincast.cli import app
from traincast.errors import TraincastError
from traincast.parallel import strategies as st
from traincast.parallel.hybrid import (
    configs,
    eager_layer,
    evaluate,
    hybrid_hardware,
    moe_routed_bytes_per_layer,
)
from traincast.parallel.models import get_model
from traincast.parallel.validation import compare_table

LLAMA = get_model("llama3-8b")
OP, NONE, FULL = (st.RECOMPUTE_CODE[k] for k in ("selective-op", "none", "full"))
ROWS = Path(__file__).resolve().parents[1] / "docs" / "published-rows-llm.toml"
runner = CliRunner()


def _run(model=LLAMA, **kw) -> dict[str, float]:
    hw = hybrid_hardware(None, "dgx-a100", "bf16")
    sizes = dict(dp=1, micro_batch=1, global_batch=1, seq=4096, attention="flash") | kw
    return {k: float(v) for k, v in evaluate(model, hw, **sizes).items()}


def _config(model=LLAMA, **kw):
    sizes = dict(dp=1, tp=1, pp=1, ep=1, zero=0, micro_batch=1, global_batch=1, recompute=0,
                 vp=1, sp=None, gpipe=False, seq=4096, dtype="bf16", attention="flash") | kw
    return configs(model, **sizes)


def test_selective_op_reruns_wk_wo_and_w3() -> None:
    s = 4096
    none, op = _run(recompute=NONE), _run(recompute=OP)
    hw = hybrid_hardware(None, "dgx-a100", "bf16")
    # wk, wo and w3 forward again, s x 4096 by 4096 x n, on the A100's 108 SMs at its bf16 rate,
    # each at its best tensor-core tile's wave efficiency (docs/model.md, "Kernel model"):
    # n = 1024: 128 x 128 tiles, 256 in 3 waves of 108, w = 256 / 324;
    # n = 4096: 256 x 128, 512 in 5 waves, w = 512 / 540;
    # n = 14336: 256 x 128, 1,792 in 17 waves, w = 1792 / 1836 (all FLOP-bound, not DRAM-bound)
    rerun_s = sum(2.0 * s * 4096 * n / (hw.flops_per_s * w)
                  for n, w in ((1024, 256 / 324), (4096, 512 / 540), (14336, 1792 / 1836)))
    assert hw.sms == 108  # and the catalog's A100 bf16 rate, 0.869 of the 312 TFLOP/s peak
    assert hw.flops_per_s == pytest.approx(312e12 * 0.869)
    assert op["compute_flop_s"] - none["compute_flop_s"] == pytest.approx(32 * rerun_s)
    # executed FLOPs: 32 layers x 159,383,552 s more
    flops = {k: r["hardware_tflops_per_gpu"] * 1e12 * r["total_s"] for k, r in
             (("none", none), ("op", op))}
    assert flops["op"] - flops["none"] == pytest.approx(32 * 159_383_552 * s)


def test_selective_op_keeps_what_torchtitans_policy_saves() -> None:
    s = 4096
    full, op = _run(recompute=FULL), _run(recompute=OP)
    # full keeps each layer's input alone, 2 s h bytes
    kept_op, kept_full = 63_616 * s, 2 * s * 4096
    assert op["mem_activations_bytes"] - full["mem_activations_bytes"] == \
        pytest.approx(32 * (kept_op - kept_full))
    none = _run(recompute=NONE)
    assert full["mem_activations_bytes"] < op["mem_activations_bytes"] \
        < none["mem_activations_bytes"]


def test_selective_op_reruns_the_all_gathers_not_the_reduce_scatters() -> None:
    # 4 per layer, plus the forward's 2 all-gathers rerun, each half an all-reduce's volume
    assert float(st.tp_collectives_per_layer(OP)) == 5.0  # 4 + 2 x 1/2
    assert float(st.tp_collectives_per_layer(FULL)) == 6.0


def test_selective_op_reruns_every_expert_product() -> None:
    # Mixtral 8x7B (h 4096, a d 4096, kv d 1024, f 14336, 2 of 8 experts, 32 layers): the
    # experts run as batched products, not aten.mm, so all of them are rerun with wk and wo:
    # 2 s (4096 (1024 + 4096) + 2 x 3 x 4096 x 14336) = 746,586,112 s FLOPs per layer; kept
    # per token: the input, wq's and wv's outputs, the attention's output (2 bytes each) and
    # its log-sum-exp, 2 (4096 + 5120 + 4096) + 4 x 32 = 26,752 bytes, against full's 8,192
    mixtral, s = get_model("mixtral-8x7b"), 4096
    none, op, full = (_run(mixtral, recompute=r, zero=1) for r in (NONE, OP, FULL))
    flops = {k: r["hardware_tflops_per_gpu"] * 1e12 * r["total_s"] for k, r in
             (("none", none), ("op", op))}
    assert flops["op"] - flops["none"] == pytest.approx(32 * 746_586_112 * s)
    assert op["mem_activations_bytes"] - full["mem_activations_bytes"] == \
        pytest.approx(32 * (26_752 - 8_192) * s)


def test_a_mixture_of_experts_keeps_its_routed_tokens() -> None:
    # Mixtral 8x7B without recomputation, t = 1, flash attention (no score terms), per element
    # of s b h and layer (Korthikanti et al.'s table, 16-bit): 18 + m with m = 2 n_mat f k / h
    # = 2 x 3 x 14336 x 2 / 4096 = 42; K and V kv d = 1024 wide, not h: 4 (1024 - 4096) / 4096
    # = -3; each of the k = 2 experts' copy of the token's input and of its output before the
    # routing weight, 2 bytes each: +8; so 65, against full recomputation's 2 (the layer
    # input); without dropout the two hidden masks come off, 63
    mixtral, s = get_model("mixtral-8x7b"), 4096
    for dropout, kept in ((True, 65), (False, 63)):
        none, full = (_run(mixtral, recompute=r, zero=1, dropout=dropout) for r in (NONE, FULL))
        assert none["mem_activations_bytes"] - full["mem_activations_bytes"] == \
            pytest.approx(32 * (kept - 2) * s * 4096)
    # over the b s / t tokens a rank's dispatcher sends, with sequence parallelism or without:
    # 2 x 2 bytes x 2 experts x s h / 2 = 4 s h at t = 2; a dense model keeps none
    for sp in (True, False):
        routed = moe_routed_bytes_per_layer(mixtral, _config(mixtral, tp=2, sp=sp, seq=s))
        assert float(routed) == pytest.approx(4 * s * 4096)
    assert float(moe_routed_bytes_per_layer(LLAMA, _config(tp=2, sp=True, seq=s))) == 0.0


def test_eager_layer_by_hand() -> None:
    s = 4096
    e = eager_layer(LLAMA, _config(eager=True, seq=s))
    bsh = s * 4096
    assert float(e["bytes"][0]) == pytest.approx(137 * bsh)
    assert float(e["bytes"][1]) == pytest.approx(295 * bsh)
    assert (float(e["kernels"][0]), float(e["kernels"][1])) == (26.0, 50.0)
    fused = eager_layer(LLAMA, _config(eager=False, seq=s))
    assert [float(x) for x in (*fused["bytes"], *fused["kernels"])] == [0.0] * 4


def test_an_eager_gpt2_layer_adds_only_the_projections_gradient_sums() -> None:
    # LayerNorm (one ATen kernel each way), learned positions, GELU, as many kv as heads, flash
    # attention (its output needs no copy): the q, k and v products' input gradients added,
    # two adds of read 2 + 2, write 2 bytes per element of s h
    gpt2 = get_model("gpt2")
    e = eager_layer(gpt2, _config(gpt2, eager=True, seq=1024))
    assert float(e["bytes"][0]) == 0.0
    assert float(e["bytes"][1]) == pytest.approx(12 * 1024 * 768)
    # 16 sequences a micro-batch: the GPU, not the host's dispatch, sets the time
    big = dict(seq=1024, micro_batch=16, global_batch=16)
    base, eager = _run(gpt2, **big), _run(gpt2, eager=True, **big)
    assert base["host_wait_s"] == eager["host_wait_s"] == 0.0
    hw = hybrid_hardware(None, "dgx-a100", "bf16")
    assert eager["compute_mem_s"] - base["compute_mem_s"] == pytest.approx(
        12 * 16 * 12 * 1024 * 768 / hw.memory_bps("elementwise"))
    # materialized attention: its output is copied by .contiguous(), 2 + 2 bytes
    mat = eager_layer(gpt2, _config(gpt2, eager=True, seq=1024, attention="materialized"))
    assert float(mat["bytes"][0]) == pytest.approx(4 * 1024 * 768)


def test_an_eager_layer_replaces_the_fused_norms_and_activation() -> None:
    s = 4096
    hw = hybrid_hardware(None, "dgx-a100", "bf16")
    base, eager = _run(seq=s), _run(seq=s, eager=True)
    bsh, bsf = s * 4096, s * 14336
    # fused: 2 norms x (2 + 3) x 2 bytes at the norm bandwidth, SwiGLU (3 + 5) x 2 bytes
    expect = 32 * ((137 + 295) * bsh / hw.memory_bps("elementwise")
                   - 20 * bsh / hw.memory_bps("norm") - 16 * bsf / hw.memory_bps("elementwise"))
    assert eager["compute_mem_s"] - base["compute_mem_s"] == pytest.approx(expect)


def test_an_fp32_eager_layer_has_no_casts() -> None:
    e = eager_layer(LLAMA, _config(eager=True, dtype="fp32", attention="materialized"))
    bsh = 4096 * 4096
    # RMSNorm forward without x.float() and type_as: pow 8, mean 4, x*rsqrt 8, *weight 8
    # (x 2); rotary: complex multiply 8 over 1.25; repeat 2 x (4/4 + 4); copy 8; SwiGLU 20 x 3.5
    assert float(e["bytes"][0]) == pytest.approx((2 * 28 + 10 + 10 + 8 + 70) * bsh)


def test_the_torchtitan_recipe_prices_an_eager_layer() -> None:
    cmd = ("predict --arch hybrid --model llama3-8b --gpus 8 --dp 8 --seq 8192 --micro-batch 1 "
           "--global-batch 8 --node dgx-a100 --recompute selective-op --framework {} --json")
    out = {f: json.loads(runner.invoke(app, shlex.split(cmd.format(f))).stdout)
           for f in ("fsdp", "torchtitan")}
    assert "eager ops" in out["torchtitan"]["assumed"]["text"]
    # the eager layer's kernels in place of the fused norms and SwiGLU, the forward run twice
    # under selective-op, per element of s h and layer: eager 2 x 137 + 295 bytes (
    # test_eager_layer_by_hand) at the element-wise rate, less the fused SwiGLU's
    # 2 x (3 x 2) x 3.5 + (5 x 2) x 3.5 = 77 at the same rate and the two fused RMSNorms'
    # 2 x (2 x 2 x 2) + 2 x 3 x 2 = 28 at the norm rate; 32 layers of 8,192 x 4,096
    hw = hybrid_hardware(None, "dgx-a100", "bf16")
    bsh = 8192 * 4096 * 32
    assert out["torchtitan"]["time_s"]["compute_mem"] - out["fsdp"]["time_s"]["compute_mem"] \
        == pytest.approx((2 * 137 + 295 - 77) * bsh / hw.memory_bps("elementwise")
                         - 28 * bsh / hw.memory_bps("norm"), rel=1e-9)
    assert out["torchtitan"]["time_s"]["compute_flop"] == pytest.approx(
        out["fsdp"]["time_s"]["compute_flop"])


def test_fsdp_llama_runs_it_never_saw() -> None:
    # the published throughputs of docs/published-rows-llm.toml (torchtitan, fms-fsdp)
    rows = compare_table(ROWS)
    errors = np.abs([r["rel_error"] for r in rows])
    assert len(rows) == 9
    assert float(np.median(errors)) <= 0.10
    assert float(errors.max()) <= 0.15


def test_a_rows_shard_must_be_a_positive_integer(tmp_path: Path) -> None:
    bad = tmp_path / "rows.toml"
    bad.write_text(ROWS.read_text().replace("\nshard = 8\n", "\nshard = 0\n", 1))
    with pytest.raises(TraincastError, match="row 7: field 'shard' must be a positive integer"):
        compare_table(bad)
    bad.write_text(ROWS.read_text().replace("\nshard = 8\n", "\nshard = 3\n", 1))
    with pytest.raises(TraincastError, match="shard group"):
        compare_table(bad)


def test_selective_is_the_stacks_own() -> None:
    cmd = ("predict --arch hybrid --model llama3-8b --gpus 8 --dp 8 --seq 8192 --micro-batch 1 "
           "--global-batch 8 --node dgx-a100 --framework {} --json")
    out = {f: json.loads(runner.invoke(app, shlex.split(cmd.format(f))).stdout)
           for f in ("fsdp", "torchtitan")}
    assert out["fsdp"]["assumed"]["recompute"] == "selective"
    assert out["torchtitan"]["assumed"]["recompute"] == "selective-op"
    assert "selective recomputation as selective-op" in out["torchtitan"]["assumed"]["text"]
    explicit = json.loads(runner.invoke(app, shlex.split(
        cmd.format("fsdp") + " --recompute selective-op")).stdout)
    assert explicit["assumed"]["recompute"] == "selective-op"


def test_plan_searches_the_stacks_selective_and_predict_agrees() -> None:
    res = runner.invoke(app, shlex.split(
        "plan llama3-8b --gpus 8 --node dgx-a100-40gb --seq 8192 --global-batch 32 "
        "--framework torchtitan --json"))
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["assumed"]["searched"]["recompute"] == ["none", "selective-op", "full"]
    assert {r["recompute"] for r in out["top"]} <= {"none", "selective-op", "full"}
    op = next(r for r in out["top"] if r["recompute"] == "selective-op")
    again = json.loads(runner.invoke(app, shlex.split(
        op["predict"].removeprefix("traincast ") + " --json")).stdout)
    assert again["assumed"]["recompute"] == op["recompute"]
    assert again["time_s"]["total"] == pytest.approx(op["time_s"]["total"], rel=1e-9)


def test_the_host_issues_every_eager_kernel() -> None:
    # Llama 3 8B: the eager layer's 26 + 50 element-wise kernels in place of the fused
    # SwiGLU's 1 + 1 and the two fused RMSNorms' 2 + 2 (kind ln), and its separate wq, wk, wv
    # and w1, w3: 3 more products forward, 6 backward; 32 layers
    from traincast.parallel.hybrid import host_issue_s

    hw = hybrid_hardware(None, "dgx-a100", "bf16")
    fused, eager = (float(host_issue_s(LLAMA, hw, _config(eager=e))) for e in (False, True))
    assert eager - fused == pytest.approx(
        32 * ((26 + 50 - 2) * hw.dispatch_s["elementwise"] - 4 * hw.dispatch_s["ln"]
              + 9 * hw.dispatch_s["linear"]))
    # selective-op reruns the three products and every forward kernel but the fused attention:
    # Megatron's layer's two norms and three element-wise kernels (two residual adds and the
    # activation)
    none, op = (float(host_issue_s(LLAMA, hw, _config(recompute=r))) for r in (NONE, OP))
    assert op - none == pytest.approx(32 * (3 * hw.dispatch_s["linear"] + 2 * hw.dispatch_s["ln"]
                                            + 3 * hw.dispatch_s["elementwise"]))


def test_an_eager_layer_keeps_the_norms_fp32_inputs_and_the_repeated_kv() -> None:
    # no recomputation: each RMSNorm keeps x.float() (4 bytes) and its output (2) where a fused
    # norm keeps its input (2): 8 more bytes per element of s h; repeat_kv hands SDPA K and V
    # 4096 wide, not 1024: 2 x 2 x s (4096 - 1024) more; SwiGLU's multiply keeps the silu
    # output too, 2 s f with f = 14336; 32 layers
    s = 4096
    fused, eager = _run(seq=s, recompute=NONE), _run(seq=s, recompute=NONE, eager=True)
    assert eager["mem_activations_bytes"] - fused["mem_activations_bytes"] == pytest.approx(
        32 * (8 * s * 4096 + 4 * s * (4096 - 1024) + 2 * s * 14336))
    full = [_run(seq=s, recompute=FULL, eager=e)["mem_activations_bytes"] for e in (False, True)]
    assert full[0] == full[1]  # full recomputation keeps the layer's input alone either way


def test_selective_op_keeps_the_reduce_scatters_outputs() -> None:
    # t = 4 with sequence parallelism: the two reduce-scatters' outputs, 2 x 2 s h / 4 bytes
    s = 4096
    hw = hybrid_hardware(None, "dgx-a100", "bf16")
    sizes = dict(dp=1, tp=4, micro_batch=1, global_batch=1, seq=s, attention="flash",
                 recompute=OP)
    sp, no_sp = (float(evaluate(LLAMA, hw, sp=on, **sizes)["mem_activations_bytes"])
                 for on in (True, False))
    # per layer, with sp: input 2 s h / 4 and the scatters 2 (2 s h / 4); without: input 2 s h
    assert no_sp - sp == pytest.approx(32 * (2 * s * 4096 - 2 * s * 4096 / 4
                                             - 2 * 2 * s * 4096 / 4))


def test_selective_op_warns_where_the_policy_is_not_torchtitans() -> None:
    cmd = ("predict --arch hybrid --model zoo:gpt2 --node dgx-a100 --dp 8 "
           "--recompute selective-op --json")
    out = json.loads(runner.invoke(app, shlex.split(cmd)).stdout)
    assert any("biases" in w for w in out["warnings"])
    plain = json.loads(runner.invoke(app, shlex.split(
        cmd.replace("gpt2", "llama3-8b") + " --attention flash")).stdout)
    assert not any("selective-op" in w for w in plain["warnings"])


def test_plan_warns_where_a_row_runs_the_policy_on_a_block_not_torchtitans() -> None:
    # MPT 7B (biased linears) at 16,384 tokens on 8 A100 40 GB: a row runs selective-op
    out = json.loads(runner.invoke(app, shlex.split(
        "plan zoo:mpt-7b-foundry --gpus 8 --framework torchtitan --node dgx-a100-40gb "
        "--seq 16384 --json")).stdout)
    ranks = [f"#{r['rank']}" for r in out["top"] if r["recompute"] == "selective-op"]
    assert ranks
    [warning] = [w for w in out["warnings"] if "biases" in w]
    assert warning.startswith(", ".join(ranks) + ": selective-op is priced")
    # a bias-free Llama with SDPA's flash kernel, whose rows run it too: no such warning
    llama = json.loads(runner.invoke(app, shlex.split(
        "plan zoo:llama3-8b --gpus 8 --framework torchtitan --node dgx-a100-40gb --seq 16384 "
        "--json")).stdout)
    assert any(r["recompute"] == "selective-op" for r in llama["top"])
    assert not any("selective-op is priced" in w for w in llama["warnings"])


def test_llama2_70b_selective_op_fits_at_batch_1_not_2() -> None:
    # torchtitan's docs/performance.md (commit 04133643), footnote 1: "70B training with local
    # batch size 2 will cause an OOM error when selective activation checkpointing is used",
    # so its table reports local batch 1, which ran, on 64 A100 80 GB with FSDP2
    cmd = ("predict --arch hybrid --model zoo:llama2-70b --node dgx-a100 --dp 64 --seq 4096 "
           "--micro-batch {b} --global-batch {gb} --framework torchtitan --json")
    fits = {b: json.loads(runner.invoke(app, shlex.split(cmd.format(b=b, gb=64 * b))).stdout)
            ["fits"] for b in (1, 2)}
    assert fits == {1: True, 2: False}


def test_what_to_change_when_the_model_state_alone_does_not_fit() -> None:
    # Llama 3 70B on 8 A100 80 GB: 16 bytes of ZeRO-3 state per parameter over 8 ranks,
    # about 141 GB, before any activation: only more GPUs help
    res = runner.invoke(app, shlex.split(
        "plan zoo:llama3-70b --gpus 8 --node dgx-a100 --framework torchtitan --json"))
    note = json.loads(res.stdout)["note"]
    assert "model state alone" in note and note.endswith("add GPUs")
    # Mixtral on 8 GPUs, experts split 8 ways: its state exceeds the GPU; recomputing or
    # splitting the sequence (a stack without context parallelism) is not offered
    out = json.loads(runner.invoke(app, shlex.split(
        "predict --arch hybrid --model zoo:mixtral-8x7b --node dgx-a100 --dp 8 --ep 8 "
        "--framework torchtitan --json")).stdout)
    [warning] = [w for w in out["warnings"] if w.startswith("does not fit")]
    assert "--recompute full" not in warning and "--cp" not in warning


def test_zero_with_a_pipeline_names_the_recipe_that_set_it() -> None:
    res = runner.invoke(app, shlex.split(
        "predict --arch hybrid --model zoo:llama2-70b --node dgx-h100 --dp 2 --tp 8 --pp 4 "
        "--framework fsdp"))
    assert isinstance(res.exception, TraincastError)
    assert "ZeRO 3 is the fsdp recipe's: --zero 1 with --pp" in str(res.exception)


def test_torchtitans_fsdp_with_a_pipeline_is_zero_1() -> None:
    # FSDP under PyTorch's pipelining: parameters gathered once, gradients reduce-scattered
    # once per iteration (reshard_after_forward False, gradient sync on the last backward):
    # ZeRO 1's traffic and memory, to the byte
    cmd = ("predict --arch hybrid --model zoo:llama2-70b --node dgx-h100 --dp 2 --tp 8 --pp 4 "
           "--framework torchtitan --json")
    three, one = (json.loads(runner.invoke(app, shlex.split(cmd + z)).stdout)
                  for z in ("", " --zero 1"))
    assert (three["job"]["zero"], three["job"]["zero_priced"]) == (3, 1)
    assert three["time_s"] == one["time_s"] and three["memory_gb"] == one["memory_gb"]
    # ZeRO 1 on a stage of a 4-stage pipeline: whole 2-byte weights and gradients of the
    # stage's share on one of 8 tensor ranks, the optimizer state, 12 bytes per parameter,
    # over the 2 data-parallel ranks. Llama 2 70B's layer: attention 8192 (2 x 8192 + 2 x 1024)
    # = 150,994,944, SwiGLU 3 x 8192 x 28672 = 704,643,072, two norms 16,384: 855,654,400;
    # a stage of 20 layers and the 32000 x 8192 embedding (or head), over tp 8
    stage = (20 * 855_654_400 + 32_000 * 8192) / 8
    assert stage == 2_171_904_000
    assert three["memory_gb"]["weights"] == pytest.approx(2 * stage / 1e9)
    assert three["memory_gb"]["grads"] == pytest.approx(three["memory_gb"]["weights"])
    assert three["memory_gb"]["optimizer"] == pytest.approx(12 * stage / 2 / 1e9)
    assert "priced as ZeRO 1" in three["assumed"]["text"]
    # plan searches pipelines under it, and its layouts reproduce through predict
    out = json.loads(runner.invoke(app, shlex.split(
        "plan zoo:llama2-70b --gpus 64 --node dgx-a100 --framework torchtitan --json")).stdout)
    piped = next(r for r in out["top"] if r["config"]["pp"] > 1)
    assert piped["config"]["zero"] == 3
    # the row says what it is priced at, as predict's job does
    assert piped["zero_priced"] == 1 and "zero=3(as 1)" in piped["label"]
    # a plan whose table holds both: rows without a pipeline keep ZeRO 3
    both = json.loads(runner.invoke(app, shlex.split(
        "plan zoo:llama3-8b --gpus 8 --node dgx-a100-40gb --seq 8192 --global-batch 32 "
        "--framework torchtitan --json")).stdout)["top"]
    flat = next(r for r in both if r["config"]["pp"] == 1)
    assert flat["zero_priced"] == 3 and "(as" not in flat["label"]
    assert any(r["zero_priced"] == 1 and "zero=3(as 1)" in r["label"] for r in both
               if r["config"]["pp"] > 1)
    again = json.loads(runner.invoke(app, shlex.split(
        piped["predict"].removeprefix("traincast ") + " --json")).stdout)
    assert again["time_s"]["total"] == pytest.approx(piped["time_s"]["total"], rel=1e-9)
    assert again["job"]["zero_priced"] == piped["zero_priced"]
    title = runner.invoke(app, shlex.split(piped["predict"].removeprefix("traincast "))).stdout
    assert "zero=3(as 1)" in title.splitlines()[0]
    # re-planning over GPU counts keeps the priced stage beside the configuration
    morphs = json.loads(runner.invoke(app, shlex.split(
        "plan zoo:llama2-70b --gpus 64,32 --node dgx-a100 --framework torchtitan --json")).stdout)
    assert morphs["rows"] and all(row["config"]["pp"] > 1 for row in morphs["rows"])
    assert [row["zero_priced"] for row in morphs["rows"]] == [1] * len(morphs["rows"])
