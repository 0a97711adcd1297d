"""FP8 training as Transformer Engine runs it (``[fp8_cast]`` of ``parallel/recipes.toml``,
docs/parallelism.md "FP8 casts"): the fused cast+transpose passes (the amax inside them)
around each fp8 linear layer, as Transformer Engine 1.x's te.Linear runs them, priced as
memory-bound time only with dtype fp8.

Every expected number is worked out by hand for one Llama-2-7B layer (h = 4096, a = kv = 32
heads of d = 128, SwiGLU f = 11008, n_mat = 3) at b = 1, s = 4096 (T = b s = 4096 tokens):

    X (inputs)   = T (h + a d + h + f)            = 4096 x 23,296 =  95,420,416
    W (weights)  = 3 h^2 + h^2 + 2 f h + f h      = 4 h^2 + 3 f h = 202,375,168
    G (out-grad) = T (3 h + h + 2 f + h)          = 4096 x 42,496 = 174,063,616
    C_fwd = 4 X + 4 W        =   381,681,664 +   809,500,672 = 1,191,182,336 bytes
    C_bwd = 4 G                                              =   696,254,464 bytes

(each 16-bit tensor read once, 2 bytes, and written twice in fp8, 1 byte each: the copy one
GEMM reads and the transposed copy another reads)
"""

from __future__ import annotations

import tomllib
from importlib import resources

import numpy as np
import pytest

from traincast.parallel import hybrid
from traincast.parallel import strategies as st
from traincast.parallel.hybrid import (
    configs,
    elementwise_time_s,
    evaluate,
    fp8_cast,
    fp8_cast_bytes_per_layer,
    fp8_cast_elements,
    fp8_cast_kernels,
    hybrid_hardware,
)
from traincast.parallel.models import get_model

LLAMA = get_model("llama2-7b")
X, W, G = 4096 * 23_296, 4 * 4096**2 + 3 * 11_008 * 4096, 4096 * 42_496
C_FWD, C_BWD = 1_191_182_336, 696_254_464
RAW = tomllib.loads(resources.files("traincast.parallel").joinpath("recipes.toml")
                    .read_text())["fp8_cast"]


def cfg(tp: int = 1, dtype: str = "fp8", recompute: int = 0, gb: int = 1):
    return configs(LLAMA, dp=1, tp=tp, pp=1, ep=1, zero=0, micro_batch=1, global_batch=gb,
                   recompute=recompute, vp=1, sp=None, gpipe=False, seq=4096, dtype=dtype,
                   attention="flash", dropout=False)


def test_the_hand_counts_are_right() -> None:
    assert (X, W, G) == (95_420_416, 202_375_168, 174_063_616)
    assert W == LLAMA.attn_matrix_params + LLAMA.mlp_matrix_params
    assert 4 * X + 4 * W == C_FWD and 4 * G == C_BWD


def test_the_table_names_a_source_for_every_factor() -> None:
    assert RAW["source"].startswith("https://docs.nvidia.com/deeplearning/transformer-engine/")
    for ps in RAW["pass"]:
        assert ps["source"].startswith("https://"), ps["name"]
        assert ps["direction"] in ("forward", "backward")
        assert set(ps["tensors"]) <= {"input", "weight", "grad", "input_cast", "grad_share",
                                      "input_transposed", "grad_gathered"}
    amax = [ps for ps in RAW["pass"] if "amax" in ps["name"]]
    assert len(amax) == 1 and amax[0]["fused_into"]    # inside the cast: counted once
    f = fp8_cast()
    # one read of 2 bytes and two fp8 writes (the copy and its transpose) per tensor; under
    # sequence parallelism the rank's share cast (read 2, write 1), the gathered one
    # transposed (read 1, write 1)
    assert f.forward == {"input": 2.0 + 2.0, "weight": 2.0 + 2.0, "input_cast": 2.0 + 1.0}
    assert f.backward == {"grad": 2.0 + 2.0, "grad_share": 2.0 + 1.0,
                          "input_transposed": 1.0 + 1.0, "grad_gathered": 1.0 + 1.0}
    # the transposed weight is written: Hopper's fp8 GEMMs take the TN layout alone, so the
    # data-gradient GEMM reads weight_t_fp8 (Transformer Engine's _Linear)
    weight = [ps for ps in RAW["pass"] if ps["tensors"] == ["weight"]]
    assert len(weight) == 1 and "weight_t_fp8" in weight[0]["source"]


def test_one_llama_layer_by_hand() -> None:
    el = fp8_cast_elements(LLAMA, cfg())
    assert (float(el["input"]), float(el["weight"]), float(el["grad"])) == (X, W, G)
    fwd, bwd = fp8_cast_bytes_per_layer(LLAMA, cfg())
    assert (float(fwd), float(bwd)) == (C_FWD, C_BWD)


def test_tp2_with_sequence_parallelism_by_hand() -> None:
    # t = 2, sequence parallel: the shards are halves (QKV N = 3 h / 2, attention-output
    # K = h / 2, MLP-up N = 2 f / 2, MLP-down K = f / 2; W / 2). te.Linear fuses no input's
    # cast and transpose under sequence parallelism: every input is cast as the rank holds it
    # (read 2, write 1: the QKV and MLP-up inputs, T h each, on the rank's half before the fp8
    # gather) and transposed as its GEMM reads it (read 1, write 1: those two whole); the
    # attention-output and MLP-down output gradients (T h each) are cast on the half and
    # transposed whole; the other gradients and the weights fused (read 2, write 2)
    t, h, f, tok = 2, 4096, 11_008, 4096
    x_rows = tok * (h // t + f // t)             # attention-output and MLP-down inputs
    g_local = tok * (3 * h // t + 2 * f // t)    # QKV and MLP-up output gradients
    hx = hg = 2 * tok * h                        # the gathered tensors, whole
    c_fwd = 4 * W // t + 3 * (hx // t + x_rows)
    c_bwd = 4 * g_local + 3 * hg // t + 2 * (hx + x_rows + hg)
    assert (c_fwd, c_bwd) == (547_880_960, 527_433_728)
    el = fp8_cast_elements(LLAMA, cfg(tp=2))
    assert float(el["input"]) == 0.0
    assert (float(el["input_cast"]), float(el["input_transposed"])) == (hx / t + x_rows,
                                                                         hx + x_rows)
    fwd, bwd = fp8_cast_bytes_per_layer(LLAMA, cfg(tp=2))
    assert (float(fwd), float(bwd)) == (c_fwd, c_bwd)
    # without sequence parallelism nothing is gathered: every tensor cast+transposed
    no_sp = configs(LLAMA, dp=1, tp=2, pp=1, ep=1, zero=0, micro_batch=1, global_batch=1,
                    recompute=0, vp=1, sp=False, gpipe=False, seq=4096, dtype="fp8",
                    attention="flash", dropout=False)
    fwd, bwd = fp8_cast_bytes_per_layer(LLAMA, no_sp)
    assert (float(fwd), float(bwd)) == (4 * (x_rows + hx) + 4 * W // t,
                                        4 * (g_local + hg))


def test_experts_are_cast_and_transposed_fused_under_sequence_parallelism() -> None:
    # Mixtral 8x7B at t = 2, sequence parallel, all 8 experts on the GPU (ep 1), T k / 8
    # tokens each at k = 2: the experts' layers are not tensor-parallel modules (the
    # dispatcher brings their tokens), so their inputs and output gradients take the fused
    # cast+transpose; attention as for a dense model
    mixtral = get_model("mixtral-8x7b")
    h, f, tok, t, kv = 4096, 14_336, 4096, 2, 1024
    expert_tokens = tok * 2 / 8
    x_experts = 8 * expert_tokens * (h + f // t)              # up and down inputs
    g_experts = 8 * expert_tokens * (2 * f // t + h)          # their output gradients
    c = configs(mixtral, dp=1, tp=t, pp=1, ep=1, zero=0, micro_batch=1, global_batch=1,
                recompute=0, vp=1, sp=True, gpipe=False, seq=4096, dtype="fp8",
                attention="flash", dropout=False)
    el = fp8_cast_elements(mixtral, c)
    assert float(el["input"]) == x_experts
    assert float(el["input_cast"]) == tok * h / t + tok * h / t      # QKV share, attn-out
    assert float(el["input_transposed"]) == tok * h + tok * h / t
    assert float(el["grad"]) == tok * (h + 2 * kv) / t + g_experts  # QKV out + experts
    assert (float(el["grad_share"]), float(el["grad_gathered"])) == (tok * h / t, tok * h)


def test_cast_kernels_follow_the_passes_by_hand() -> None:
    # one kernel per pass and linear layer (QKV, attention output, MLP up, MLP down) whose
    # tensor is not empty; the amax is inside the cast (no kernel)
    assert [float(n) for n in fp8_cast_kernels(LLAMA, cfg())] == [4 + 4, 4]
    # tp 2, sequence parallel: 4 input casts (no transpose) forward and 4 weights; backward
    # the 4 inputs transposed, the QKV and MLP-up gradients fused (2), the attention-output
    # and MLP-down gradients cast on the share (2) and transposed after the gather (2)
    assert [float(n) for n in fp8_cast_kernels(LLAMA, cfg(tp=2))] == [4 + 4, 4 + 2 + 2 + 2]
    # weights cached over 8 micro-batches: their 4 casts once per iteration, 4 / 8 each
    cached = configs(LLAMA, dp=1, tp=1, pp=1, ep=1, zero=0, micro_batch=1, global_batch=8,
                     recompute=0, vp=1, sp=None, gpipe=False, seq=4096, dtype="fp8",
                     attention="flash", dropout=False, fp8_weight_cache=True)
    assert [float(n) for n in fp8_cast_kernels(LLAMA, cached)] == [4, 4 + 4 / 8]
    # Mixtral at tp 2, sequence parallel: the experts' up and down take the fused
    # cast+transpose both ways (2 + 2); QKV and attention output as a dense layer's (2 input
    # casts, 2 transposes; the QKV gradient fused, the attention-output one cast and
    # transposed apart)
    mixtral = get_model("mixtral-8x7b")
    c = configs(mixtral, dp=1, tp=2, pp=1, ep=1, zero=0, micro_batch=1, global_batch=1,
                recompute=0, vp=1, sp=True, gpipe=False, seq=4096, dtype="fp8",
                attention="flash", dropout=False)
    assert [float(n) for n in fp8_cast_kernels(mixtral, c)] == [2 + 2 + 4, 2 + 2 + 1 + 1 + 1]
    assert [float(n) for n in fp8_cast_kernels(LLAMA, cfg(dtype="bf16"))] == [0.0, 0.0]


def test_bf16_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    hw = hybrid_hardware(None, "dgx-h100", "bf16")
    c = cfg(dtype="bf16")
    fwd, bwd = fp8_cast_bytes_per_layer(LLAMA, c)
    assert float(fwd) == float(bwd) == 0.0
    # the memory-bound time is the kernel table's: LayerNorms (4 + 6 delta per b s h element)
    # at the norm family's rate, the rest (dropout masks off) and the cross-entropy element-wise
    ew_fwd, ew_bwd, _ = st.memory_bytes_per_layer(
        4096.0, c.b, 4096.0, 0.0, 11008.0, 3, 1.0, c.t, c.sp, 2.0)["elementwise"]
    hidden, _ = hybrid.dropout_bytes_per_layer(LLAMA, c)
    norm = 32 * 10 * 2 * 4096 * 4096
    expect = norm / hw.memory_bps("norm") + (
        32 * (ew_fwd - hidden + ew_bwd - hidden)
        + st.CROSS_ENTROPY_BYTES * 4096 * 32_000) / hw.memory_bps("elementwise")
    assert float(elementwise_time_s(LLAMA, hw, c)) == pytest.approx(float(expect), rel=1e-12)
    kw = dict(dp=8, tp=2, global_batch=64, micro_batch=2, dtype="bf16", attention="flash",
              recompute=1)
    after = evaluate(LLAMA, hw, **kw)["total_s"]
    monkeypatch.setattr(hybrid, "fp8_cast_bytes_per_layer", lambda *a: pytest.fail("called"))
    assert float(evaluate(LLAMA, hw, **kw)["total_s"]) == float(after)


@pytest.mark.parametrize("recompute", [0, 2])
def test_fp8_costs_exactly_the_cast_bytes_at_the_memory_rate(
        monkeypatch: pytest.MonkeyPatch, recompute: int) -> None:
    hw = hybrid_hardware(None, "dgx-h100", "fp8")
    kw = dict(dp=1, global_batch=4, micro_batch=1, seq=4096, dtype="fp8", attention="flash",
              dropout=False, recompute=recompute)
    after = evaluate(LLAMA, hw, **kw)
    zero = np.zeros(())
    monkeypatch.setattr(hybrid, "fp8_cast_bytes_per_layer", lambda *a: (zero, zero))
    before = evaluate(LLAMA, hw, **kw)
    # m = 4 micro-batches x 32 layers x ((1 + full) C_fwd + C_bwd) / (M f_elementwise)
    full = 1 if recompute == 2 else 0
    extra = 4 * 32 * ((1 + full) * C_FWD + C_BWD) / hw.memory_bps("elementwise")
    assert float(after["total_s"] - before["total_s"]) == pytest.approx(extra, rel=1e-9)
    assert float(after["compute_mem_s"] - before["compute_mem_s"]) == pytest.approx(
        extra, rel=1e-9)
    assert float(after["compute_flop_s"]) == float(before["compute_flop_s"])


def test_cached_weights_are_not_cast_again_by_full_recomputation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # m = 4 micro-batches x 32 layers: the forward's casts twice (recomputed), the backward's
    # once, and the cached weights' cast+transpose once per iteration (4 W per layer)
    hw = hybrid_hardware(None, "dgx-h100", "fp8")
    kw = dict(dp=1, global_batch=4, micro_batch=1, seq=4096, dtype="fp8", attention="flash",
              dropout=False, recompute=2, fp8_weight_cache=True)
    after = evaluate(LLAMA, hw, **kw)
    zero = np.zeros(())
    monkeypatch.setattr(hybrid, "fp8_cast_bytes_per_layer", lambda *a: (zero, zero))
    before = evaluate(LLAMA, hw, **kw)
    extra = 32 * (4 * (2 * 4 * X + C_BWD) + 4 * W) / hw.memory_bps("elementwise")
    assert float(after["compute_mem_s"] - before["compute_mem_s"]) == pytest.approx(
        extra, rel=1e-9)


def test_cached_weights_are_cast_once_per_iteration() -> None:
    # Megatron-Core passes is_first_microbatch to Transformer Engine: the weights' fp8 copy
    # and transpose are made on the first of the m = 4 micro-batches and reused; the recipe
    # says so with its source, the others cast every micro-batch
    from dataclasses import replace

    fwd, bwd = fp8_cast_bytes_per_layer(LLAMA, replace(cfg(gb=4), fp8_weight_cache=True))
    # the cached weight pass in the backward's share, so that full recomputation (which
    # repeats C_fwd) does not cast the cached weights again
    assert (float(fwd), float(bwd)) == (4 * X, C_BWD + 4 * W / 4)
    fwd, _ = fp8_cast_bytes_per_layer(LLAMA, cfg(gb=4))
    assert float(fwd) == C_FWD
    recipes = hybrid.recipes()
    cache = recipes["megatron-core"]["set"]["fp8_weight_cache"]
    assert cache["value"] is True and "is_first_microbatch" in cache["source"]
    assert all("fp8_weight_cache" not in r.get("set", {})
               for name, r in recipes.items() if name != "megatron-core")
    hw = hybrid_hardware(None, "dgx-h100", "fp8")
    assert hybrid.recipe_settings("megatron-core", LLAMA, hw)["fp8_weight_cache"] is True
    assert "fp8 weights cast once per iteration" in hybrid.recipe_text(
        "megatron-core", {"fp8_weight_cache": True}, "fp8")
    assert "fp8 weights" not in hybrid.recipe_text(
        "megatron-core", {"fp8_weight_cache": True}, "bf16")
