"""The GPU kernel model (tile/wave quantization, roofline, launch cost) and the compute-time
strategy each catalog entry selects, checked by hand."""

from __future__ import annotations

import dataclasses
import math
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from traincast import compute, kernels
from traincast.errors import TraincastError
from traincast.features.ops import expand_ops, parse_shapes
from traincast.hardware.catalog import GPU, load_catalog
from traincast.parallel import gemm
from traincast.roofline import Curves, compute_breakdown, paper_split

A100_SMS = 108  # NVIDIA A100 Tensor Core GPU Architecture whitepaper


def a100(**kw: object) -> GPU:
    """A100 SXM 80 GB with the kernel-model fields set explicitly (catalog values may change)."""
    base = GPU(name="A100-test", fp32_tflops=19.5, tf32_tflops=156.0, fp16_tflops=312.0,
               bf16_tflops=312.0, mem_bw_gbs=2039.0)
    fields = dict(sms=A100_SMS, gemm_max_fraction={"bf16": 0.869, "fp16": 0.869},
                  mem_max_fraction=0.88, kernel_launch_us=4.0)
    fields.update(kw)
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


# ------------------------------------------------------------------------ tiles and waves


def test_4096_square_on_a100_by_hand() -> None:
    # 256x128 tiles: 16 x 32 = 512 tiles; 512 / 108 -> 5 waves; 512 of 540 slots busy
    assert float(kernels.tile_count(4096, 4096, (256, 128))) == 512
    assert float(kernels.wave_count(512, A100_SMS)) == 5
    assert float(kernels.wave_efficiency(4096, 4096, A100_SMS)) == pytest.approx(512 / 540)


def test_tiles_depend_on_dtype() -> None:
    # 128 x 6912 output: fp32 SIMT 128x64 tiles -> 1 x 108 = 108 tiles, one full wave: w = 1;
    # tensor-core tiles: best is 128x128 -> 54 tiles in one wave of 108 slots: w = 0.5
    assert float(kernels.wave_efficiency(128, 6912, A100_SMS, dtype="fp32")) == pytest.approx(1.0)
    assert float(kernels.wave_efficiency(128, 6912, A100_SMS, dtype="bf16")) == pytest.approx(0.5)
    # batched: 4 GEMMs of 128 x 3456 in bf16 -> 4 x 27 = 108 128x128 tiles, one full wave
    assert float(kernels.wave_efficiency(128, 3456, A100_SMS, batch=4)) == pytest.approx(1.0)
    assert float(kernels.wave_efficiency(100, 100, 0)) == 1.0       # unknown SM count


def test_the_hybrid_model_calls_the_same_gemm_model() -> None:
    assert gemm.wave_efficiency is kernels.wave_efficiency
    # 2048 x 2304 on 108 SMs: 128x128 tiles, 288 tiles in 3 waves -> 2048*2304 / (324 * 16384)
    assert float(gemm.wave_efficiency(2048, 2304, 108)) == pytest.approx(
        2048 * 2304 / (324 * 16384))


# ---------------------------------------------------------------- achievable fraction of peak


def test_small_k_gemm_is_memory_bound() -> None:
    # m = n = 4096, k = 16, bf16: F = 2 * 4096^2 * 16, B = 2 (2 * 4096 * 16 + 4096^2): its
    # memory term bounds it (0.091 of the peak); alone in a step it waits for its dispatch
    # (o = 4 µs) and runs B / M: time_s = o + B / M
    f, b = 2.0 * 4096**2 * 16, 2.0 * (2 * 4096 * 16 + 4096**2)
    mem = 2039e9 * 0.88
    r = compute.kernel_op_times([_mm_row(4096, 4096, 16)], a100(), "bf16")
    assert f / b * mem / 312e12 == pytest.approx(0.091, abs=5e-4)
    assert float(r["mem_s"][0]) == pytest.approx(b / mem)
    assert not r["flop_bound"][0]
    assert float(r["time_s"][0]) == pytest.approx(4e-6 + b / mem)


# ---------------------------------------------------------- GEMM shapes of profiled ops


def test_gemm_shapes_from_recorded_inputs() -> None:
    assert kernels.op_gemm_products("mm", "64x512;512x1024", 0) == [(64, 1024, 512, 1)]
    assert kernels.op_gemm_products("addmm", "1024;64x512;512x1024", 0) == [(64, 1024, 512, 1)]
    assert kernels.op_gemm_products("bmm", "12x128x64;12x64x128", 0) == [(128, 128, 64, 12)]
    assert kernels.op_gemm_products("add", "64x512;64x512", 0) == []
    assert kernels.op_gemm_products("mm", "", 1e6) == []              # shapes not recorded
    # a grouped product (a mixture of experts): its rows by each group's matrix, one product;
    # both 3-D: G products; the groups splitting B's columns: one product of all of them
    assert kernels.op_gemm_products("_grouped_mm", "1024x256;4x256x512;4", 0) == [
        (1024, 512, 256, 1)]
    assert kernels.op_gemm_products("_grouped_mm", "4x64x256;4x256x512", 0) == [(64, 512, 256, 4)]
    assert kernels.op_gemm_products("_grouped_mm", "4x64x256;256x2048;4", 0) == [
        (64, 2048, 256, 1)]
    assert kernels.op_gemm_products("_scaled_grouped_mm", "1024x256;4x256x512;4;4", 0) == [
        (1024, 512, 256, 1)]


def test_attention_runs_the_products_torch_counts() -> None:
    """BERT-base's fused attention at batch 32 (12 heads, 128 tokens, head dim 64): forward
    Q K^T and P V, backward the scores again and dP, dV, dK, dQ, by hand; their FLOPs are the
    op's (4 and 10 x B H S^2 D); the lower-level kernels record B x S x H x D and a cross
    attention's keys set s_k."""
    q = "32x12x128x64"
    fwd = kernels.op_gemm_products("_scaled_dot_product_efficient_attention", f"{q};{q};{q}", 0)
    assert fwd == [(128, 128, 64, 384), (128, 64, 128, 384)]
    bwd = kernels.op_gemm_products("_scaled_dot_product_efficient_attention_backward",
                                   f"{q};{q};{q};{q};{q};32x12x128;;", 0)
    assert bwd == [(128, 128, 64, 384)] * 2 + [(128, 64, 128, 384)] * 3
    flops = 4 * 32 * 12 * 128**2 * 64
    assert sum(2 * m * n * k * b for m, n, k, b in fwd) == flops
    assert sum(2 * m * n * k * b for m, n, k, b in bwd) == 2.5 * flops
    low = kernels.op_gemm_products("_flash_attention_forward",
                                   "2x100x8x64;2x300x8x64;2x300x8x64", 0)
    assert low == [(100, 300, 64, 16), (100, 64, 300, 16)]
    # grouped-query cross attention (32 query heads over 8 key/value heads, 100 queries over
    # 300 keys, d 128, d_v 64; the backward's grad_out first): torch's sdpa_flop_count and
    # sdpa_backward_flop_count give 737,280,000 and 1,966,080,000 FLOPs
    q, k, v, o = "2x32x100x128", "2x8x300x128", "2x8x300x64", "2x32x100x64"
    fwd = kernels.op_gemm_products("_scaled_dot_product_efficient_attention", f"{q};{k};{v}", 0)
    bwd = kernels.op_gemm_products("_scaled_dot_product_efficient_attention_backward",
                                   f"{o};{q};{k};{v};{o};2x32x100;;", 0)
    assert sum(2 * m * n * kk * b for m, n, kk, b in fwd) == 737_280_000
    assert sum(2 * m * n * kk * b for m, n, kk, b in bwd) == 1_966_080_000


def test_one_parser_of_recorded_shapes() -> None:
    # ";" between inputs, "x" between dimensions, "" = a scalar input (addmm's beta, say)
    assert parse_shapes("1024;64x512;512x1024") == [[1024], [64, 512], [512, 1024]]
    assert parse_shapes("8x64x56x56;;3") == [[8, 64, 56, 56], [], [3]]
    # the GRU expansion reads its shapes with the same parser: x (B x T x I), w_hh (G x H)
    rows = expand_ops([{"op": "gru", "phase": "forward", "flops": 1.0, "bytes_read": 0.0,
                        "bytes_written": 0.0, "dtype": "float32",
                        "shapes": "2x5x8;12x8;12x4;12;12"}])
    assert rows[0]["shapes"] == "10x8;8x12"  # input GEMM: (B T) x I @ I x G


def test_convolution_as_implicit_gemm() -> None:
    # 3x3 conv, 64 -> 128 channels, N = 8, 56x56 -> 28x28 (stride 2): m = 8 * 28 * 28,
    # n = 128, k = 64 * 9; m comes from the FLOPs, so stride and padding need not be recorded
    f = 2.0 * (8 * 28 * 28) * 128 * (64 * 9)
    assert kernels.op_gemm_products("convolution", "8x64x56x56;128x64x3x3;128", f) == [
        (8 * 28 * 28, 128, 64 * 9, 1)]
    # backward with both gradients, each with the forward's FLOPs: data gradient
    # (N Ho Wo, C_in, C_out kh kw), weight gradient (C_out, C_in kh kw, N Ho Wo)
    back = kernels.op_gemm_products("convolution_backward",
                                    "8x128x28x28;8x64x56x56;128x64x3x3", 2 * f)
    assert back == [(8 * 28 * 28, 64, 128 * 9, 1), (128, 64 * 9, 8 * 28 * 28, 1)]
    # the first layer (no input gradient): the weight gradient only
    assert len(kernels.op_gemm_products("convolution_backward",
                                        "8x128x28x28;8x64x56x56;128x64x3x3", f)) == 1
    # depthwise (groups = 64): k = 1 * 9 per output channel
    fd = 2.0 * (8 * 56 * 56) * 64 * 9
    assert kernels.op_gemm_products("convolution", "8x64x56x56;64x1x3x3", fd) == [
        (8 * 56 * 56, 64, 9, 1)]


# ------------------------------------------------------------------ per-op table, kernel model


def _mm_row(m: int, n: int, k: int, dtype: str = "bfloat16") -> dict[str, object]:
    s = 2 if dtype != "float32" else 4
    return {"op": "mm", "phase": "forward", "flops": 2 * m * n * k, "bound": "compute",
            "bytes_read": s * (m * k + k * n), "bytes_written": s * m * n, "dtype": dtype,
            "shapes": f"{m}x{k};{k}x{n}"}


def test_ops_compute_by_hand() -> None:
    gpu = a100()
    big = _mm_row(4096, 4096, 4096)
    add = {"op": "add", "phase": "forward", "flops": 0, "bound": "memory", "dtype": "bfloat16",
           "bytes_read": 8e6, "bytes_written": 4e6, "shapes": "2000x1000;2000x1000"}
    out = compute.ops_compute_s([big, add], gpu, "bf16")
    # the host issues each op in o = 4 µs (kernels.op_floor_s): the GEMM waits for its own
    # dispatch, the add is issued while the GEMM runs and follows it with no wait
    t_big = 4e-6 + 2 * 4096**3 / (312e12 * 0.869 * 512 / 540)
    t_add = 12e6 / (2039e9 * 0.88)
    assert out["compute_flop"] == pytest.approx(t_big)
    assert out["compute_mem"] == pytest.approx(t_add)
    assert out["idle"] == pytest.approx(4e-6)
    # the paper's split of the same table, by the profiler's labels at the flat peak
    paper = compute.ops_compute_s([big, add], gpu, "bf16", strategy="paper")
    assert paper["compute_flop"] == pytest.approx(2 * 4096**3 / 312e12)
    assert paper["compute_mem"] == pytest.approx(12e6 / 2039e9)


def test_a16_bit_op_runs_at_its_own_peak_in_an_fp32_job() -> None:
    gpu = a100(kernel_launch_us=0.0)
    half = compute.ops_compute_s([_mm_row(4096, 4096, 4096, "float16")], gpu, "fp32")
    single = compute.ops_compute_s([_mm_row(4096, 4096, 4096, "float32")], gpu, "fp32")
    # fp32 SIMT tiles: 128x128 -> 1024 tiles = 10 waves (w = 1024 / 1080); 128x64 -> 2048
    # tiles = 19 waves of 108 (w = 2048 / 2052, the best)
    assert single["compute_flop"] == pytest.approx(2 * 4096**3 / (19.5e12 * 0.869 * 2048 / 2052))
    assert half["compute_flop"] == pytest.approx(2 * 4096**3 / (312e12 * 0.869 * 512 / 540))


def test_recurrent_rows_carry_their_gemm_shapes() -> None:
    # a GRU direction (B = 4, T = 50, I = H = 256, G = 768): its step GEMMs are 4 x 768 outputs
    gru = {"op": "gru", "phase": "forward", "flops": 1.0, "bytes_read": 1.0,
           "bytes_written": 1.0, "dtype": "float16", "bound": "compute",
           "shapes": "4x50x256;768x256;768x256;768;768"}
    gpu = a100()
    r = compute.kernel_op_times(expand_ops([gru]), gpu, "fp16")
    # 4 x 768 output, k = 256: narrow 8x128 tiles -> 6 tiles; split-K s = min(108 / 6, 256 / 32)
    # = 8 -> 48 tile-slices in one wave: w = 8 * 4 * 768 / (108 * 8 * 128) = 2 / 9
    assert float(kernels.wave_efficiency(4, 768, 108, k=256, dtype="fp16")) == pytest.approx(2 / 9)
    step = 2 * 4 * 256 * 768 / (312e12 * 0.869 * 2 / 9)
    assert r["flop_s"][1] == pytest.approx(step)       # the addmm row, T = 50 times
    assert r["count"][1] == 50


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 20000), st.integers(1, 20000), st.integers(1, 20000),
       st.integers(1, 64), st.sampled_from(["float32", "float16", "bfloat16"]),
       st.sampled_from([0, 80, 108, 132]), st.floats(0.3, 1.0), st.floats(0.3, 1.0),
       st.floats(0.0, 20.0))
def test_no_op_runs_above_peak_or_bandwidth(m: int, n: int, k: int, batch: int, dtype: str,
                                            sms: int, eta: float, mu: float,
                                            launch_us: float) -> None:
    gpu = a100(sms=sms, gemm_max_fraction={"bf16": eta, "fp16": eta, "fp32": eta},
               mem_max_fraction=mu, kernel_launch_us=launch_us)
    s = 4 if dtype == "float32" else 2
    rows = [{"op": "bmm", "flops": 2.0 * batch * m * n * k, "dtype": dtype,
             "bytes_read": s * batch * (m * k + k * n), "bytes_written": s * batch * m * n,
             "shapes": f"{batch}x{m}x{k};{batch}x{k}x{n}"},
            {"op": "mul", "flops": 0.0, "dtype": dtype, "bytes_read": 2.0 * s * m * n,
             "bytes_written": float(s * m * n), "shapes": f"{m}x{n};{m}x{n}"}]
    r = compute.kernel_op_times(rows, gpu, "fp32")
    peak = np.array([gpu.peak_tflops(kernels.TORCH_DTYPES[dtype]) * 1e12, np.inf])
    flops = np.array([rows[0]["flops"], 0.0])
    moved = np.array([float(o["bytes_read"]) + float(o["bytes_written"]) for o in rows])
    assert np.all(flops / r["time_s"] <= peak * (1 + 1e-9))
    assert np.all(moved / r["time_s"] <= gpu.mem_bw_gbs * 1e9 * (1 + 1e-9))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 100000), st.integers(1, 100000), st.integers(1, 100000),
       st.integers(1, 96), st.sampled_from(["fp32", "bf16", "fp8"]), st.integers(1, 200))
def test_gemm_efficiency_is_a_fraction(m: int, n: int, k: int, batch: int, dtype: str,
                                       sms: int) -> None:
    w, splits = kernels.gemm_efficiency(m, n, sms, batch, dtype, k)
    assert 0 < float(w) <= 1 + 1e-12
    assert 1 <= float(splits) <= max(1, sms)


# ------------------------------------------------------------------- strategy from the catalog


def test_strategy_is_selected_from_the_catalog_entry() -> None:
    cat = load_catalog()
    assert compute.strategy_of(cat.gpu("A100-SXM4-80GB")) == "kernel"    # sms + GEMM fraction
    bare = GPU(name="bare", fp32_tflops=10.0, mem_bw_gbs=500.0)
    assert compute.strategy_of(bare) == "paper"                          # nothing measured
    curves = dataclasses.replace(a100(), gemm_intensity=(1.0, 100.0), gemm_tflops=(1.0, 200.0))
    assert compute.strategy_of(curves) == "curves"                       # measured curves win
    assert compute.strategy_of(curves, "paper") == "paper"              # --compute paper
    # --compute curves on an entry without curves: its flat peaks, each of its dtype, so bf16
    # work on an H100 runs at the 989.4 TFLOP/s dense bf16 peak (datasheet), not the fp32 67
    h100 = cat.gpu("H100-SXM5-80GB")
    assert compute.strategy_of(h100, "curves") == "paper"
    assert compute.rates(h100, "bf16", "curves")[0] == pytest.approx(989.4e12)
    assert compute.strategy_of(curves, "curves") == "curves"
    with pytest.raises(TraincastError, match="unknown compute strategy"):
        compute.strategy_of(bare, "fast")
    # why an entry is priced at flat peaks: asked for, curves it lacks, or fields it lacks
    assert compute.paper_why(h100, "paper") == "as asked (--compute paper)"
    assert compute.paper_why(h100, "curves").startswith(
        "--compute curves, but H100-SXM5-80GB has no measured curves")
    assert compute.paper_why(bare) == compute.FLAT_PEAK_WHY
    assert compute.paper_why(h100) == compute.paper_why(curves, "curves") == ""


def test_hybrid_says_why_it_prices_flat_peaks() -> None:
    from traincast.parallel.hybrid import hardware_summary, hybrid_hardware

    for strategy, why in (("paper", "as asked"), ("curves", "--compute curves, but")):
        hw = hardware_summary(hybrid_hardware(load_catalog(compute=strategy), "dgx-a100",
                                              "bf16"))
        assert hw["compute"] == "paper" and hw["compute_why"].startswith(why)
    assert "compute_why" not in hardware_summary(hybrid_hardware(load_catalog(), "dgx-a100",
                                                                 "bf16"))


def test_compute_s_by_strategy() -> None:
    flops, mem = np.array([1e12, 2e12]), np.array([1e9, 0.0])
    # kernel: peak x gemm_max_fraction, bandwidth x mem_max_fraction
    f, b = compute.compute_s(a100(), "bf16", flops, mem)
    np.testing.assert_allclose(f, flops / (312e12 * 0.869))
    np.testing.assert_allclose(b, mem / (2039e9 * 0.88))
    # a calibrated flop_efficiency below 1 wins over the shipped fraction
    f, _ = compute.compute_s(a100(flop_efficiency=0.5), "bf16", flops, mem)
    np.testing.assert_allclose(f, flops / (312e12 * 0.5))
    # an SM count without published fractions: the documented defaults (median published)
    sms_only = GPU(name="sms-only", fp32_tflops=10.0, fp16_tflops=100.0, mem_bw_gbs=500.0, sms=80)
    assert compute.strategy_of(sms_only) == "kernel"
    f, b = compute.compute_s(sms_only, "amp", flops, mem)
    np.testing.assert_allclose(f, flops / (100e12 * kernels.DEFAULT_GEMM_MAX_FRACTION))
    np.testing.assert_allclose(b, mem / (500e9 * kernels.DEFAULT_MEM_MAX_FRACTION))
    # paper: flat peak x flop_efficiency (1.0 here), mem_bw x mem_efficiency
    f, b = compute.compute_s(a100(), "bf16", flops, mem, strategy="paper")
    np.testing.assert_allclose(f, flops / 312e12)
    np.testing.assert_allclose(b, mem / 2039e9)
    # curves: the largest measured GEMM rate and the largest-size element-wise bandwidth
    cur = dataclasses.replace(a100(), gemm_intensity=(1.0, 100.0), gemm_tflops=(1.0, 200.0),
                              elementwise_bytes=(1e3, 1e8), elementwise_gbs=(100.0, 1500.0))
    f, b = compute.compute_s(cur, "bf16", flops, mem)
    np.testing.assert_allclose(f, flops / 200e12)
    np.testing.assert_allclose(b, mem / 1500e9)


def test_aggregate_fp32_runs_at_the_measured_kernel_models_rates_by_hand() -> None:
    # L4, 72 W: below the power reference, so it holds c = p / p0 of its boost clock; 128
    # lanes in 4 partitions = 32 per partition, h = 1: a tile's loads take FFMA slots, the
    # 128 x 128 tile loses least; the library's pick costs choice_linear
    g = load_catalog().gpu("L4")
    k = g.kernel
    assert (g.sms, g.fp32_cores_per_sm, g.boost_clock_mhz, g.power_w) == (58, 128, 2040, 72)
    p = 72 / (58 * 128 * 2.04 * g.process_nm)
    c = p / k["power_ref"]
    assert c < 1
    e = 1 / (1 + k["c_issue"] * (128 + 128) / (128 * 128))
    rate = 2 * 58 * 128 * 2040e6 * c * k["simt_efficiency"] * e / k["choice_linear"]
    assert kernels.simt_gemm_fraction(g) == pytest.approx(rate / 30.3e12, rel=1e-9)
    f, b = compute.compute_s(g, "fp32", np.array([1e12]), np.array([1e9]))
    assert f[0] == pytest.approx(1e12 / rate, rel=1e-9)
    assert b[0] == pytest.approx(1e9 / (300e9 * k["f_elementwise"]), rel=1e-9)
    # one large fp32 product priced op by op takes the same time, to its fixed costs
    row = _mm_row(8192, 8192, 8192, "float32")
    per_op = compute.ops_compute_s([row], g, "fp32")
    assert per_op["compute_flop"] == pytest.approx(row["flops"] / rate, rel=0.02)
    # mixed precision keeps the tensor-core path: no fp16 fraction given, the default
    f16, _ = compute.compute_s(g, "amp", np.array([1e12]), np.array([0.0]))
    assert f16[0] == pytest.approx(1e12 / (121e12 * kernels.DEFAULT_GEMM_MAX_FRACTION))
    # an fp32 (or any-dtype) fraction the entry gives wins; so does a calibrated efficiency
    for fractions in ({"fp32": 0.5}, {"*": 0.5}):
        mine = dataclasses.replace(g, gemm_max_fraction=fractions)
        assert compute.rates(mine, "fp32")[0] == pytest.approx(30.3e12 * 0.5)
    calibrated = dataclasses.replace(g, flop_efficiency=0.4, mem_efficiency=0.6)
    assert compute.rates(calibrated, "fp32") == pytest.approx((30.3e12 * 0.4, 300e9 * 0.6))
    # a GPU the model cannot price (no fitted parameters) keeps the documented defaults
    bare = dataclasses.replace(g, kernel={})
    assert kernels.simt_gemm_fraction(bare) is None
    assert compute.rates(bare, "fp32") == pytest.approx(
        (30.3e12 * kernels.DEFAULT_GEMM_MAX_FRACTION, 300e9 * kernels.DEFAULT_MEM_MAX_FRACTION))
    # a bf16 fraction no longer stands in for fp32 where the model applies (A100 SXM: MAMF bf16)
    # by hand: 400 W over 108 x 64 lanes at 1.41 GHz, 7 nm is above the power reference (boost
    # held); 16 lanes per partition: loads issue for free (e_T = 1)
    a = load_catalog().gpu("A100-SXM4-80GB")
    assert 400 / (108 * 64 * 1.41 * 7) > a.kernel["power_ref"]
    assert compute.rates(a, "fp32")[0] == pytest.approx(
        2 * 108 * 64 * 1.41e9 * a.kernel["simt_efficiency"] / a.kernel["choice_linear"],
        rel=1e-9)
    # the hybrid model's fused kernels stream their operands: the streaming figure there
    assert compute.rates(a, "bf16", streaming=True)[1] == pytest.approx(2039e9 * 0.88)
    assert compute.rates(a, "bf16")[1] == pytest.approx(2039e9 * a.kernel["f_elementwise"])


def test_the_measured_kernel_models_rates_reach_the_per_op_path_by_hand() -> None:
    cat = load_catalog()
    # a T4 has no TF32: an fp32 convolution runs on CUDA cores, at the model's fp32 eta. A 3x3
    # convolution, N = 20, 64 -> 128 channels at 16 x 16 (padding 1): m = 20 16 16 = 5120,
    # n = 128, 40 tiles of 128 x 128 on 40 SMs in one wave (w = 1), FLOP-bound
    t4 = cat.gpu("T4")
    assert (t4.tf32_tflops, t4.sms, t4.fp32_tflops) == (0, 40, 8.1)
    f = 2.0 * 20 * 16 * 16 * 128 * 64 * 9
    row = {"op": "convolution", "phase": "forward", "flops": f, "dtype": "float32",
           "bytes_read": 4.0 * (20 * 64 * 16 * 16 + 128 * 64 * 9),
           "bytes_written": 4.0 * 20 * 128 * 16 * 16, "shapes": "20x64x16x16;128x64x3x3"}
    r = compute.kernel_op_times([row], t4, "fp32")
    # by hand: 70 W over 40 x 64 lanes at 1.59 GHz, 12 nm is below the power reference, so the
    # clock is held at c = p / p0 of boost; 16 lanes per partition issue loads for free (e_T =
    # 1): R = 2 x 40 x 64 x 1.59 GHz x c x e, and the product runs at R / rho
    k = t4.kernel
    c = 70 / (40 * 64 * 1.59 * 12) / k["power_ref"]
    assert c < 1
    rate = 2 * 40 * 64 * 1.59e9 * c * k["simt_efficiency"] / k["choice_linear"]
    assert r["flop_s"][0] == pytest.approx(f / rate, rel=1e-9)
    assert kernels.simt_gemm_fraction(t4) < kernels.DEFAULT_GEMM_MAX_FRACTION  # 70 W: capped
    # an fp16 convolution kept in NCHW pays its transposes at the element-wise fraction
    a = cat.gpu("A100-SXM4-80GB")
    half = _conv_row("float16")
    moved = 2 * (half["bytes_read"] + half["bytes_written"])  # each tensor read and written again
    r = compute.kernel_op_times([half], a, "amp")
    assert r["layout_s"][0] == pytest.approx(moved / (2039e9 * a.kernel["f_elementwise"]))
    # an entry without the model's datasheet fields (no fp32 lanes, no clock) keeps its own
    # fractions, else the defaults, for FLOPs and bytes alike
    partial = GPU(name="partial", fp32_tflops=10.0, mem_bw_gbs=500.0, sms=40,
                  mem_max_fraction=0.9, kernel=dict(a.kernel))
    assert kernels.fitted_params(partial) is None
    assert compute.rates(partial, "fp32") == pytest.approx(
        (10e12 * kernels.DEFAULT_GEMM_MAX_FRACTION, 500e9 * 0.9))


def test_ops_strategies_match_their_models() -> None:
    ops = [_mm_row(512, 512, 64), {"op": "relu", "flops": 0, "bound": "memory",
                                   "bytes_read": 1e6, "bytes_written": 1e6, "dtype": "bfloat16"}]
    cur = dataclasses.replace(a100(), gemm_intensity=(1.0, 100.0), gemm_tflops=(1.0, 200.0),
                              op_overhead_us=3.0)
    want = compute_breakdown(ops, Curves.from_gpu(cur))
    mm = compute_breakdown(ops[:1], Curves.from_gpu(cur))  # the row marked compute-bound
    got = compute.ops_compute_s(ops, cur, "bf16")
    assert got == {"compute_flop": want["compute_flop"], "compute_mem": want["compute_mem"],
                   "idle": 0.0,  # the curves carry their own fixed cost: no idle part
                   "busy_marked": mm["compute_flop"] + mm["compute_mem"]}
    paper = paper_split(ops, cur.flops_per_s("bf16"), cur.mem_bw_bps)
    assert compute.ops_compute_s(ops, cur, "bf16", "paper") == {
        **paper, "idle": 0.0, "busy_marked": paper["compute_flop"]}
    assert compute.ops_compute_s([], a100(), "bf16") == {
        "compute_flop": 0.0, "compute_mem": 0.0, "idle": 0.0, "busy_marked": 0.0}


def test_kernel_model_is_never_faster_than_the_flat_large_gemm_rate() -> None:
    # per op: the kernel model adds quantization, the roofline and a launch, never removes time
    ops = [_mm_row(m, n, k) for m, n, k in ((64, 1024, 1024), (4096, 4096, 4096), (8, 8, 8))]
    per_op = compute.ops_compute_s(ops, a100(), "bf16")
    flat, _ = compute.compute_s(a100(), "bf16", sum(o["flops"] for o in ops), 0.0)
    assert per_op["compute_flop"] + per_op["compute_mem"] >= float(flat)
    assert math.isfinite(per_op["compute_flop"])


# ------------------------------------------- published microbenchmarks (hardware/microbench.toml)

HARDWARE = Path(kernels.__file__).parent / "hardware"
TORCH_NAME = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "float8_e4m3fn"}


def _microbench() -> tuple[dict[str, list[dict[str, Any]]], Any]:
    """The published shape-level rows and the shipped catalog."""
    path = HARDWARE / "microbench.toml"
    return tomllib.loads(path.read_text()), load_catalog()


LOOP = 1000
"""Runs of a published kernel in its benchmark's timing loop (the host issues them back to
back; one run's time is the loop's over ``LOOP``)."""


def _gemm_row_s(r: dict[str, Any], cat: Any, strategy: str) -> float:
    """Predicted time of one published GEMM, one run of a timing loop; "FP16 inputs/FP32
    math" (P100) runs 2-byte operands at the fp32 rate."""
    pseudo = "FP32 math" in r["published_as"]
    s = kernels.DTYPE_BYTES[r["dtype"]]
    m, n, k = r["m"], r["n"], r["k"]
    row = {"op": "mm", "flops": 2.0 * m * n * k, "bytes_read": s * (m * k + k * n),
           "bytes_written": s * m * n, "bound": "compute", "shapes": f"{m}x{k};{k}x{n}",
           "dtype": "float32" if pseudo else TORCH_NAME[r["dtype"]], "count": LOOP}
    out = compute.ops_compute_s([row], cat.gpu(r["gpu"]), "fp32" if pseudo else r["dtype"],
                                strategy)
    return (out["compute_flop"] + out["compute_mem"]) / LOOP


def _conv_row_s(r: dict[str, Any], cat: Any, strategy: str) -> float:
    """Predicted forward + backward (data and weight gradients) time of one published conv,
    one run of a timing loop."""
    s = kernels.DTYPE_BYTES[r["dtype"]]
    n, c, h, w, k, fr, fs = (r[x] for x in ("n", "c", "h", "w", "k", "r", "s"))
    ho = (h + 2 * r["pad_h"] - fr) // r["stride_h"] + 1
    wo = (w + 2 * r["pad_w"] - fs) // r["stride_w"] + 1
    f = 2.0 * n * ho * wo * k * c * fr * fs
    x, wt, y = s * n * c * h * w, s * k * c * fr * fs, s * n * k * ho * wo
    common = {"dtype": TORCH_NAME[r["dtype"]], "bound": "compute", "count": LOOP}
    ops = [{"op": "convolution", "flops": f, "bytes_read": x + wt, "bytes_written": y,
            "shapes": f"{n}x{c}x{h}x{w};{k}x{c}x{fr}x{fs}", **common},
           {"op": "convolution_backward", "flops": 2 * f, "bytes_read": y + x + wt,
            "bytes_written": x + wt,
            "shapes": f"{n}x{k}x{ho}x{wo};{n}x{c}x{h}x{w};{k}x{c}x{fr}x{fs}", **common}]
    out = compute.ops_compute_s(ops, cat.gpu(r["gpu"]), r["dtype"], strategy)
    return (out["compute_flop"] + out["compute_mem"]) / LOOP


def _measured_s(r: dict[str, Any]) -> float:
    if "total_time_us" in r:
        return r["total_time_us"] * 1e-6
    if "time_us" in r:
        return r["time_us"] * 1e-6
    return 2.0 * r["m"] * r["n"] * r["k"] / (r["tflops"] * 1e12)


def deepbench_errors(strategy: str) -> dict[str, NDArray[np.float64]]:
    """Relative time errors (predicted / measured - 1) on the DeepBench rows, by kind."""
    rows, cat = _microbench()
    out = {}
    for kind, predict in (("gemm", _gemm_row_s), ("conv", _conv_row_s)):
        sel = [r for r in rows.get(kind, []) if "DeepBench" in r["source"]]
        out[kind] = np.array([predict(r, cat, strategy) / _measured_s(r) - 1.0 for r in sel])
    return out


def test_kernel_model_beats_the_paper_model_on_deepbench() -> None:
    # Baidu DeepBench training GEMMs and convolutions (V100, P100; libraries of 2017): the
    # kernel model's median |error| must be well below the flat peak's (docs/model.md gives
    # the numbers; the rows are never used to set a constant)
    kernel, paper = deepbench_errors("kernel"), deepbench_errors("paper")
    for kind in ("gemm", "conv"):
        # both kinds have DeepBench rows: an empty table must fail, not pass unchecked
        assert len(kernel[kind]) > 0 and len(paper[kind]) == len(kernel[kind]), kind
        k_err, p_err = np.median(np.abs(kernel[kind])), np.median(np.abs(paper[kind]))
        assert k_err < 0.8 * p_err, (kind, k_err, p_err)


def test_best_published_shapes_are_not_predicted_faster_than_measured() -> None:
    # "Maximum Achievable Matmul FLOPS" rows are where eta comes from: on their own shape the
    # model (eta x w, w <= 1) can only be slower, and wave quantization should cost < 25% there.
    # The lower bound (err >= -1%) holds by construction, since eta is taken from these very
    # rows; only the upper bound (err < 25%) tests the wave model.
    rows, cat = _microbench()
    mamf = [r for r in rows.get("gemm", []) if "DeepBench" not in r["source"]]
    for r in mamf:
        err = _gemm_row_s(r, cat, "kernel") / _measured_s(r) - 1.0
        assert -0.01 <= err < 0.25, (r["gpu"], r["dtype"], err)


def _conv_row(dtype: str, layout: str = "") -> dict:
    # 1x1 convolution, N = 8, C_in = 64 -> C_out = 64 at 56x56: F = 2 (8 56 56) 64 64
    s = 4 if dtype == "float32" else 2
    x, w = 8 * 64 * 56 * 56, 64 * 64
    row = {"op": "convolution", "phase": "forward", "flops": 2.0 * 8 * 56 * 56 * 64 * 64,
           "bytes_read": float(s * (x + w)), "bytes_written": float(s * x), "dtype": dtype,
           "shapes": "8x64x56x56;64x64x1x1"}
    return dict(row, layout=layout) if layout else row


def test_fp32_convolutions_run_in_tf32_and_matmuls_stay_fp32() -> None:
    gpu = a100()
    ops = [_conv_row("float32"), _mm_row(4096, 4096, 4096, "float32"),
           dict(_mm_row(4096, 4096, 4096, "float32"), dtype="tf32")]
    # cudnn.allow_tf32 defaults to True; cuda.matmul.allow_tf32 to False (a "tf32" row: on)
    assert compute.op_math_dtypes(ops, gpu, "fp32") == ["tf32", "fp32", "tf32"]
    v100 = dataclasses.replace(gpu, tf32_tflops=0.0)  # no TF32 tensor cores: fp32
    assert compute.op_math_dtypes(ops, v100, "fp32") == ["fp32", "fp32", "fp32"]
    assert compute.op_math_dtypes(ops, gpu, "amp")[0] == "fp16"  # fp32 rows of an amp job


def test_tf32_no_faster_than_fp32_runs_as_fp32_and_is_never_slower() -> None:
    # RTX 3090 / 4090: TF32 tensor peak = FP32 peak (35.6, 82.6 TFLOP/s dense, NVIDIA's Ampere
    # GA102 and Ada whitepapers): TF32 permits tensor cores, here they gain nothing, so the
    # op runs as fp32; A100 (156 > 19.5) and L40S (183 > 91.6) keep TF32
    cat = load_catalog()
    ops = [_conv_row("float32"), dict(_mm_row(4096, 4096, 4096, "float32"), dtype="tf32"),
           dict(_mm_row(3, 50257, 768, "float32"), dtype="tf32")]
    for name in ("RTX-3090", "RTX-4090"):
        gpu = cat.gpus[name]
        assert gpu.tf32_tflops == gpu.fp32_tflops and gpu.math_dtype("tf32") == "fp32"
        assert compute.op_math_dtypes(ops, gpu, "fp32") == ["fp32"] * 3
        assert compute.op_math_dtypes(ops, gpu, "tf32") == ["fp32"] * 3
    for name in ("A100-SXM4-80GB", "L40S"):
        assert cat.gpus[name].math_dtype("tf32") == "tf32"
    said = {g: compute.basis(cat.gpus[g])["inputs"]["gemm_max_fraction"]
            for g in ("RTX-4090", "A100-SXM4-80GB")}  # what hardware show says of the rates
    assert said["RTX-4090"].startswith("16-, 8-bit products: ")
    assert said["A100-SXM4-80GB"].startswith("16-, 8-bit and TF32 products: ")
    fp32 = [dict(o, dtype="float32") for o in ops]
    for name, gpu in cat.gpus.items():  # every GPU: asking for TF32 is never slower
        if not gpu.sms:
            continue
        slow, fast = (compute.ops_compute_s(t, gpu, "fp32") for t in (fp32, ops))
        assert (fast["compute_flop"] + fast["compute_mem"]
                <= (slow["compute_flop"] + slow["compute_mem"]) * (1 + 1e-9)), name


def test_a_tf32_llm_on_a_gpu_whose_tf32_is_no_faster_runs_as_fp32() -> None:
    from traincast.parallel.hybrid import predict_hybrid

    kw = dict(node="ws-rtx4090", dp=4, micro_batch=4, global_batch=64)
    fp32, tf32 = (predict_hybrid("zoo:gpt2", dtype=d, **kw) for d in ("fp32", "tf32"))
    assert tf32["time_s"]["total"] == pytest.approx(fp32["time_s"]["total"], rel=1e-12)
    a100 = [predict_hybrid("zoo:gpt2", dtype=d, **{**kw, "node": "dgx-a100"})
            for d in ("fp32", "tf32")]
    assert a100[1]["time_s"]["compute_flop"] < 0.5 * a100[0]["time_s"]["compute_flop"]


def test_nchw_tensor_core_convolution_pays_two_transposes_by_hand() -> None:
    gpu = a100(kernel_launch_us=0.0)
    half, nhwc, single = _conv_row("float16"), _conv_row("float16", "nhwc"), _conv_row("float32")
    moved = kernels.layout_transpose_bytes([half, nhwc, single], ["fp16", "fp16", "fp32"])
    b = 2 * (8 * 64 * 56 * 56 * 2 + 64 * 64)  # fp16 input + weight read, output written
    assert moved[0] == pytest.approx(2 * b)    # every operand read and written once more
    assert moved[1] == 0 and moved[2] == 0     # channels_last; CUDA-core fp32
    r = compute.kernel_op_times([half], gpu, "amp")
    assert r["layout_s"][0] == pytest.approx(2 * b / (2039e9 * 0.88))
    out = compute.ops_compute_s([half], gpu, "amp")
    assert out["compute_flop"] + out["compute_mem"] == pytest.approx(float(r["time_s"][0]))


def test_batch_norm_reads_its_inputs_twice_by_hand() -> None:
    fwd = {"op": "native_batch_norm", "flops": 0.0, "bytes_read": 2.0 * 1000,
           "bytes_written": 2.0 * 1000, "dtype": "float16", "shapes": "10x10x10;10;10;10;10"}
    bwd = dict(fwd, op="native_batch_norm_backward", shapes="10x10x10;10x10x10;10;10;10")
    relu = dict(fwd, op="relu", shapes="10x10x10")
    # statistics pass + normalize pass: x (1000 fp16 elements) read once more; backward: dy, x
    assert kernels.reread_bytes([fwd, bwd, relu]).tolist() == [2000.0, 4000.0, 0.0]


# ---------------------------------------------------------------- mixed-precision convolutions


def test_which_gpus_run_16_bit_products_on_matrix_units() -> None:
    # datasheet peaks (TFLOP/s): P100 fp16 18.7 = 2 x 9.3 fp32, packed FP16x2 on CUDA cores;
    # V100 125 / 15.7, T4 65 / 8.1, A10 125 / 31.2, L4 121 / 30.3: Tensor Cores
    cat = load_catalog()
    assert not kernels.has_matrix_units(cat.gpus["P100-PCIE-16GB"], "fp16")
    assert not kernels.has_matrix_units(cat.gpus["P100-SXM2-16GB"], "fp16")
    for name in ("V100-SXM2-16GB", "T4", "A10", "L4", "A100-SXM4-80GB", "MI250X-GCD"):
        assert kernels.has_matrix_units(cat.gpus[name], "fp16"), name
    assert kernels.has_matrix_units(cat.gpus["A10"], "tf32")       # TF32 exists on Tensor Cores
    assert not kernels.has_matrix_units(cat.gpus["V100-SXM2-16GB"], "tf32")
    assert not kernels.has_matrix_units(cat.gpus["K80"], "fp16")
    assert not kernels.has_matrix_units(cat.gpus["A100-SXM4-80GB"], "fp32")


def test_depthwise_and_narrow_group_convolutions_by_their_shapes() -> None:
    def row(shapes: str, op: str = "convolution") -> dict[str, object]:
        return {"op": op, "flops": 1.0, "bytes_read": 1.0, "bytes_written": 1.0,
                "dtype": "float16", "shapes": shapes}

    ops = [row("8x64x56x56;64x1x3x3"),                          # depthwise: 1 channel a group
           row("8x64x56x56;8x64x56x56;64x1x3x3", "convolution_backward"),
           row("8x128x56x56;128x4x3x3"),                        # ResNeXt 32x4d: 4 a group
           row("8x64x56x56;64x32x3x3"),                         # 2 groups of 32
           row("8x3x224x224;64x3x7x7")]                         # first layer, groups = 1
    assert kernels.narrow_group_convs(ops).tolist() == [True, True, True, False, False]
    assert kernels.conv_channels_per_group(ops[2]) == (32.0, 4.0, 4.0)


def test_a_transposed_convolution_is_not_read_as_a_grouped_one() -> None:
    # ConvTranspose2d(64, 3) records weight C_in x C_out / groups = 64 x 3 x 4 x 4: C_in / w[1]
    # = 21.3 groups is no whole number, so the row is no grouped convolution (it runs on
    # tensor cores, with the layout transposes of any other convolution)
    up = {"op": "convolution", "flops": 1.0, "bytes_read": 1.0, "bytes_written": 1.0,
          "dtype": "float16", "shapes": "8x64x56x56;64x3x4x4"}
    assert kernels.conv_channels_per_group(up) is None
    # a transposed 96 -> 3 (weight 96 x 3 x 4 x 4) has the shapes of 32 groups of 3 channels:
    # the shapes alone cannot tell them apart, and it is read as grouped (docs/model.md)
    assert kernels.conv_channels_per_group(dict(up, shapes="8x96x56x56;96x3x4x4")) == (
        32.0, 3.0, 3.0)
    assert kernels.narrow_group_convs([up]).tolist() == [False]
    assert kernels.layout_transpose_bytes([up], ["fp16"], load_catalog().gpus["T4"])[0] == 4.0


def test_mixed_precision_convolution_costs_by_hand() -> None:
    gpu = a100(kernel_launch_us=0.0)
    mem = 2039e9 * 0.88
    x, w = 8 * 64 * 56 * 56, 64 * 64
    b16 = 2 * (2 * x + w)                 # fp16 input + weight read, output written
    # an fp32 row of an --amp job: autocast casts the convolution's operands to fp16, so it
    # moves half the bytes it recorded and its transposes move fp16 elements: 2 b16
    single = _conv_row("float32")
    assert compute.op_operand_dtypes([single], gpu, "amp") == ["fp16"]
    moved = kernels.layout_transpose_bytes([single], ["fp16"], gpu)
    assert moved[0] == pytest.approx(2 * b16)
    r = compute.kernel_op_times([single], gpu, "amp")
    assert r["mem_s"][0] == pytest.approx(b16 / mem)
    assert r["layout_s"][0] == pytest.approx(2 * b16 / mem)
    # the same row in an fp32 job runs in TF32 on tensor cores: 4-byte operands, transposed
    assert r["layout_s"][0] * 2 == pytest.approx(
        float(compute.kernel_op_times([single], gpu, "fp32")["layout_s"][0]))
    # a depthwise convolution: PyTorch's NCHW kernel on CUDA cores, no transposes, its fp16
    # operands (half its fp32 record) at the fp32 vector peak
    dw = dict(single, shapes="8x64x56x56;64x1x3x3", flops=2.0 * 8 * 56 * 56 * 64 * 9,
              bytes_read=4.0 * (x + 64 * 9))
    assert compute.op_math_dtypes([dw], gpu, "amp") == ["fp32"]
    r = compute.kernel_op_times([dw], gpu, "amp")
    assert r["layout_s"][0] == 0
    assert r["mem_s"][0] == pytest.approx(2.0 * (2 * x + 64 * 9) / mem)
    # a P100 computes fp16 on CUDA cores (FP16x2): NCHW kernels, no transposes
    p100 = load_catalog().gpus["P100-PCIE-16GB"]
    assert kernels.layout_transpose_bytes([_conv_row("float16")], ["fp16"], p100)[0] == 0


def _zoo_row(workload: str, gpu: str) -> dict[str, Any]:
    from traincast.zoo.profiles import workload_features

    feats = workload_features(workload)
    keys = ("flops_compute_bound", "bytes_memory_bound", "weight_bytes", "input_bytes",
            "embedding_bytes_touched")
    return {"architecture": np.array(["1w1g"], dtype=object), "n_gpus": [1],
            "gpu_type": np.array([gpu], dtype=object),
            "workload": np.array([workload], dtype=object),
            **{k: [feats[k]] for k in keys if k in feats}}


def test_mixed_precision_speeds_up_resnet50_on_v100_and_never_slows_tensor_core_gpus() -> None:
    # NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5 README,
    # training performance (pytorch-21.03 NGC): 1 x V100 16 GB 367 img/s FP32 -> 1200 img/s
    # mixed precision; 1 x A100 80 GB 938 img/s TF32 -> 2470 img/s. Mixed precision is faster.
    from traincast.predict import predict_table

    cat = load_catalog()
    fp32, amp = (predict_table(_zoo_row("resnet50", "V100-SXM2-16GB"), cat, amp=a)
                 for a in (False, True))
    assert amp.compute[0] < fp32.compute[0]
    tensor_core = [g for g in cat.gpus if kernels.has_matrix_units(cat.gpus[g], "fp16")]
    assert "V100-SXM2-16GB" in tensor_core and "T4" in tensor_core
    for workload in ("resnet50", "mobilenet"):
        for g in tensor_core:
            fp32, amp = (predict_table(_zoo_row(workload, g), cat, amp=a) for a in (False, True))
            assert amp.compute[0] <= fp32.compute[0] * (1 + 1e-9), (workload, g)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 16), st.sampled_from([4, 12, 16]), st.integers(16, 4096),
       st.sampled_from([32, 64, 128]),
       st.sampled_from(["V100-SXM2-16GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "L4", "B200"]))
def test_fp32_attention_runs_below_peak_and_its_backward_costs_more(
        b: int, h: int, s: int, d: int, name: str) -> None:
    """A fused fp32 attention (SIMT products, no matrix units) never runs above the GPU's fp32
    peak, and its backward (2.5 x the forward's FLOPs) takes at least twice its time."""
    gpu = load_catalog().gpus[name]
    q, per = f"{b}x{h}x{s}x{d}", 4.0 * b * h * s * d
    rows = [{"op": "_scaled_dot_product_efficient_attention", "flops": 4.0 * b * h * s * s * d,
             "dtype": "float32", "bytes_read": 3 * per, "bytes_written": per,
             "shapes": f"{q};{q};{q}", "bound": "compute"},
            {"op": "_scaled_dot_product_efficient_attention_backward",
             "flops": 10.0 * b * h * s * s * d, "dtype": "float32", "bytes_read": 5 * per,
             "bytes_written": 3 * per, "shapes": f"{q};{q};{q};{q};{q};{b}x{h}x{s};;",
             "bound": "compute"}]
    t = compute.kernel_op_times(rows, gpu, "fp32")["flop_s"]
    assert np.all(np.array([r["flops"] for r in rows]) / t <= gpu.fp32_tflops * 1e12)
    assert t[1] >= 2 * t[0]


def test_every_shipped_op_s_products_do_its_flops() -> None:
    """Each compute op of the shipped zoo tables that runs GEMM products (products, batched
    products, convolutions as implicit GEMMs, fused attention) is priced as products whose
    FLOPs, 2 m n k per batch, are the op's own (within 2%: a convolution's padding): a product
    left out would price the op faster than its work."""
    import json
    from importlib import resources

    models = json.loads(resources.files("traincast.zoo").joinpath("ops.json").read_text())
    checked = 0
    for rec in models["models"].values():
        for o in rec["ops"]:
            products = kernels.op_gemm_products(o["op"], o.get("shapes", ""), o["flops"])
            if products and o["flops"] > 0:
                done = sum(2 * m * n * k * b for m, n, k, b in products)
                assert done == pytest.approx(o["flops"], rel=0.02), (o["op"], o["shapes"])
                checked += 1
    assert checked > 3000


# ------------------------------------------------------------ misaligned tensor-core products

def test_size_alignment_by_hand() -> None:
    assert kernels.size_alignment([12, 50257, 4096, 30522, 6], 8).tolist() == [4, 1, 8, 2, 2]
    assert kernels.size_alignment([4096], 4).tolist() == [4]  # capped at 16 bytes of tf32


def test_alignment_slowdown_by_hand() -> None:
    raw = tomllib.loads((Path(kernels.__file__).parent / "hardware/alignment.toml").read_text())
    table = {int(k): v for k, v in raw["slowdown"].items()}
    assert table[16] == 1.0 and table[2] > table[4] >= table[8] > 1.0  # slower the narrower
    u = kernels.alignment_slowdown
    # bf16 (2 bytes): GPT-2's vocabulary 50257 is odd -> 2-byte alignment; BERT's 30522 is
    # even only -> 4 bytes; 4096 x 4096 x 1024 -> 16 bytes, aligned
    assert u([4096, 4096, 4096], [50257, 30522, 4096], [1600, 1024, 1024], "bf16", 9.0
             ).tolist() == [table[2], table[4], 1.0]
    # the token count counts as well (a profile does not say which size leads a tensor)
    assert u(4095, 4096, 4096, "bf16", 9.0) == table[2]
    # fp8 (1 byte): 16-byte alignment needs 16 elements; 4100 = 4 x 1025 -> 4 bytes; an odd
    # fp8 size (1 byte) is below the narrowest class measured: it takes the narrowest's
    assert u(4096, 4100, 4096, "fp8", 9.0) == table[4]
    assert u(4096, 4097, 4096, "fp8", 9.0) == table[2]
    # tf32 (4 bytes): 4 elements are 16 bytes already
    assert u(4096, 4100, 4096, "tf32", 9.0) == 1.0
    # not charged below compute capability 9.0 (not measured there) nor off the tensor cores
    assert u(4096, 50257, 1600, "bf16", 8.0) == 1.0
    assert u(4096, 50257, 1600, "fp32", 9.0) == 1.0


def test_an_odd_vocabulary_slows_the_logits_on_hopper_only() -> None:
    # one logits product of a bf16 step, 4096 tokens x 1600 -> 50257 (GPT-2 XL), against the
    # same product padded to 50304 (a multiple of 64, as Megatron pads its vocabulary)
    cat = load_catalog()

    def flop_s(vocab: int, gpu: str) -> float:
        ops = [{"op": "aten::mm", "flops": 2.0 * 4096 * 1600 * vocab, "bytes_read": 0.0,
                "bytes_written": 0.0, "dtype": "bfloat16", "shapes": f"4096x1600;1600x{vocab}",
                "count": 1}]
        return float(compute.kernel_op_times(ops, cat.gpu(gpu), "bf16")["flop_s"][0])

    _, table = kernels.alignment_table()
    for gpu in ("H100-SXM5-80GB", "H200-SXM-141GB"):
        ratio = flop_s(50257, gpu) / flop_s(50304, gpu)
        # the FLOPs differ by 50257 / 50304, the waves a little: the rest is the 2-byte rule
        assert ratio == pytest.approx(table[2] * 50257 / 50304, rel=0.05), gpu
    a100_ratio = flop_s(50257, "A100-SXM4-80GB") / flop_s(50304, "A100-SXM4-80GB")
    assert a100_ratio == pytest.approx(50257 / 50304, rel=0.05)


def test_a_convolution_of_narrow_channels_is_not_charged_for_alignment() -> None:
    # a first layer's 3 input channels: k = 3 x 7 x 7 = 147, odd; cuDNN's padding is not measured
    f = 2.0 * 64 * 112 * 112 * 147
    conv = {"op": "aten::convolution", "flops": f, "shapes": "64x3x224x224;64x3x7x7;64"}
    mm = {"op": "aten::mm", "flops": 2.0 * 4096 * 147 * 64, "shapes": "4096x147;147x64"}
    # a fused attention of 197 tokens (ViT's): the kernel masks its own tiles, not charged
    attn = {"op": "aten::_scaled_dot_product_flash_attention", "flops": 4.0 * 32 * 12 * 197**2 * 64,
            "shapes": "32x12x197x64;32x12x197x64;32x12x197x64"}
    for cc in (0.0, 9.0):
        w, _ = kernels.ops_gemm_efficiency([conv, mm, attn], 132, ["bf16"] * 3, cc)
        if cc == 0.0:
            plain = w
    assert w[0] == plain[0] and w[2] == plain[2]  # the convolution, the attention: not charged
    _, table = kernels.alignment_table()
    assert w[1] == pytest.approx(plain[1] / table[2])   # the product: 2-byte aligned


def test_the_alignment_factors_are_the_medians_of_the_measured_h200_rows() -> None:
    # data/h200/kernels-bf16 {linear, bmm}: products of >= 2e10 FLOPs, measured over the
    # modelled time (P eta w at the H200's MAMF rate, or its operands at 0.88 of 4.8 TB/s),
    # classed by the alignment of the two sizes these products lead their tensors with (a
    # linear layer's x[m, k] W[n, k]^T and a bmm's A[b, m, k] B[b, k, n] lead with k and n)
    import csv
    import gzip
    import statistics
    from pathlib import Path as P

    from traincast.parallel.hybrid import hybrid_hardware

    hw = hybrid_hardware(None, "hgx-h200", "bf16")
    root = P(__file__).resolve().parents[1] / "data/h200/kernels-bf16"
    ratios: dict[int, list[float]] = {2: [], 4: [], 8: [], 16: []}
    for fam in ("linear", "bmm"):
        with gzip.open(root / fam / "NVIDIA_H200.csv.gz", "rt") as fh:
            for r in csv.DictReader(fh):
                b, mm, nn, kk = (int(r[c]) for c in ("B", "M", "N", "K"))
                m, n, k, batch = (b * mm, kk, nn, 1) if fam == "linear" else (mm, kk, nn, b)
                f = 2.0 * batch * m * n * k
                if f < 2e10:
                    continue
                w = float(kernels.wave_efficiency(m, n, hw.sms, batch=batch, dtype="bf16", k=k))
                t = max(f / hw.flops_per_s / w,
                        2.0 * batch * (m * k + k * n + m * n) / (hw.mem_bw_bps * 0.88))
                a = 2 * int(min(kernels.size_alignment([n], 8)[0],
                                kernels.size_alignment([k], 8)[0]))
                ratios[a].append(float(r["Latency"]) * 1e-3 / t)
    _, table = kernels.alignment_table()
    for a in (2, 4, 8):
        assert table[a] == pytest.approx(statistics.median(ratios[a]), abs=0.01), a
    assert table[16] == 1.0 and statistics.median(ratios[16]) < 1.25  # aligned: MAMF's own


def test_misaligned_products_of_a_gru_are_counted_as_the_gpu_runs_them() -> None:
    # cuDNN's GRU (B = 4, T = 48, I = H = 17, 3 H = 51 gates): one input product (B T) x I ->
    # 3 H and T step products B x H -> 3 H, every one with an odd size: 1 + 48 = 49 per step
    gru = {"op": "gru", "phase": "forward", "flops": 1.0, "bytes_read": 1.0,
           "bytes_written": 1.0, "dtype": "float16", "bound": "compute",
           "shapes": "4x48x17;51x17;51x17;51;51"}
    cat = load_catalog()
    bad = compute.misaligned_products([gru], cat.gpu("H100-SXM5-80GB"), "amp")
    assert bad is not None and bad["products"] == 1 + 48 and bad["flop_share"] == 1.0
    _, table = kernels.alignment_table()
    assert bad["slowdown_max"] == table[2] and bad["largest"]["shape"] == "192 x 51 x 17"
    # a row that runs 0 times charges nothing; an A100 (8.0) is not charged
    assert compute.misaligned_products([gru | {"count": 0}], cat.gpu("H100-SXM5-80GB"),
                                       "amp") is None
    assert compute.misaligned_products([gru], cat.gpu("A100-SXM4-80GB"), "amp") is None
