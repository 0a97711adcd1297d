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
    assert RAW["weight_cache"] is False and "advanced_optimizations" in RAW["weight_cache_source"]
    for ps in RAW["pass"]:
        assert ps["source"].startswith("https://"), ps["name"]
        assert ps["direction"] in ("forward", "backward")
        assert set(ps["tensors"]) <= {"input", "weight", "grad"}
    amax = [ps for ps in RAW["pass"] if "amax" in ps["name"]]
    assert len(amax) == 1 and amax[0]["fused_into"]    # inside the cast: counted once
    f = fp8_cast()
    # one read of 2 bytes and two fp8 writes (the copy and its transpose) per tensor
    assert f.forward == {"input": 2.0 + 2.0, "weight": 2.0 + 2.0}
    assert f.backward == {"grad": 2.0 + 2.0}
    # the transposed weight is written: Hopper's fp8 GEMMs take the TN layout alone, so the
    # data-gradient GEMM reads weight_t_fp8 (Transformer Engine's _Linear)
    weight = [ps for ps in RAW["pass"] if ps["tensors"] == ["weight"]]
    assert len(weight) == 1 and "weight_t_fp8" in weight[0]["source"]


def test_one_llama_layer_by_hand() -> None:
    el = fp8_cast_elements(LLAMA, cfg())
    assert (float(el["input"]), float(el["weight"]), float(el["grad"])) == (X, W, G)
    fwd, bwd = fp8_cast_bytes_per_layer(LLAMA, cfg())
    assert (float(fwd), float(bwd)) == (C_FWD, C_BWD)


def test_tp2_halves_them() -> None:
    # sequence parallelism on (t > 1): the h-wide tensors are each rank's 1/2 of the sequence
    fwd, bwd = fp8_cast_bytes_per_layer(LLAMA, cfg(tp=2))
    assert (float(fwd), float(bwd)) == (C_FWD / 2, C_BWD / 2)


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


def test_cached_weights_are_cast_once_per_iteration(monkeypatch: pytest.MonkeyPatch) -> None:
    cached = hybrid.Fp8Cast(forward=fp8_cast().forward, backward=fp8_cast().backward,
                            weight_cache=True)
    monkeypatch.setattr(hybrid, "fp8_cast", lambda: cached)
    fwd, _ = fp8_cast_bytes_per_layer(LLAMA, cfg(gb=4))     # m = 4
    assert float(fwd) == 4 * X + 4 * W / 4
