"""The per-op roofline: curves, interpolation and per-op times, checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from traincast.hardware.catalog import GPU
from traincast.roofline import (
    Curves,
    compute_breakdown,
    curve_from_points,
    interp_curve,
    kernel_name,
    monotone_fit,
    paper_split,
    roofline_split,
)


def curves(**kw: object) -> Curves:
    base = dict(gemm_intensity=np.array([1.0, 100.0]), gemm_flops_per_s=np.array([1e9, 1e11]),
                conv_intensity=np.array([1.0]), conv_flops_per_s=np.array([5e10]),
                elementwise_bytes=np.array([1e3, 1e6]), elementwise_bps=np.array([1e9, 1e10]),
                op_overhead_s=1e-5, kernel_elems_per_s={"tanh": 1e8})
    base.update(kw)
    return Curves(**base)  # type: ignore[arg-type]


def test_monotone_fit_pools_violators() -> None:
    # [1, 3, 2, 4]: 3 and 2 pool to their mean 2.5
    assert monotone_fit([1, 3, 2, 4]).tolist() == [1, 2.5, 2.5, 4]
    # weighted: (3*1 + 1*3) / 4 = 1.5
    assert monotone_fit([3, 1], weights=[1, 3]).tolist() == [1.5, 1.5]


def test_curve_from_points_merges_equal_x_and_sorts() -> None:
    xs, ys = curve_from_points([10, 1, 10], [4, 2, 2])
    assert xs.tolist() == [1, 10]
    assert ys.tolist() == [2, 3]  # mean of 4 and 2 at x = 10
    xs, ys = curve_from_points([1, 2, 3], [5, 9, 1], monotone=False)
    assert ys.tolist() == [5, 9, 1]


def test_interp_is_linear_in_log_x_and_flat_beyond_the_ends() -> None:
    xs, ys = np.array([1.0, 100.0]), np.array([2.0, 4.0])
    # x = 10 is half way between 1 and 100 in log: (2 + 4) / 2 = 3
    assert interp_curve([10.0], xs, ys)[0] == pytest.approx(3.0)
    assert interp_curve([0.01, 1e6, 0.0], xs, ys).tolist() == [2.0, 4.0, 2.0]


@given(st.lists(st.floats(0.1, 1e3), min_size=2, max_size=8),
       st.lists(st.floats(1e-3, 1e6), min_size=2, max_size=20))
def test_interpolated_curve_is_monotone(y: list[float], q: list[float]) -> None:
    xs = np.logspace(0, 3, len(y))
    _, ys = curve_from_points(xs, y)
    qs = np.sort(np.asarray(q))
    vals = interp_curve(qs, xs, ys)
    assert np.all(np.diff(vals) >= -1e-9 * np.max(vals))
    assert vals.min() >= ys.min() - 1e-9 and vals.max() <= ys.max() + 1e-9


def test_roofline_split_by_hand() -> None:
    c = curves()
    # op 1: 1e9 FLOPs over 1e7 bytes: intensity 100 -> 1e11 FLOP/s -> 10 ms; bytes 1e7 beyond
    #       the curve -> 1e10 B/s -> 1 ms; FLOP-bound, t = 10 us + 10 ms
    # op 2: 0 FLOPs, 1e6 bytes at 1e10 B/s -> 0.1 ms; memory-bound, t = 10 us + 0.1 ms
    # op 3: a convolution, 1e9 FLOPs over 1e6 bytes -> the conv curve, 5e10 -> 20 ms
    r = roofline_split([1e9, 0.0, 1e9], [1e7, 1e6, 1e6], [False, False, True], c)
    assert r["time_s"].tolist() == pytest.approx([1e-5 + 1e-2, 1e-5 + 1e-4, 1e-5 + 2e-2])
    assert r["flop_bound"].tolist() == [True, False, True]


def test_kernel_term_and_names() -> None:
    assert kernel_name("_foreach_sqrt") == "sqrt"
    assert kernel_name("div_") == "div"
    assert kernel_name("aten::tanh") == "tanh"
    ops = [{"op": "tanh", "phase": "forward", "flops": 0, "bytes_read": 4e6,
            "bytes_written": 4e6, "bound": "memory", "dtype": "float32"}]
    bd = compute_breakdown(ops, curves())
    # 1e6 elements at 1e8 elements/s = 10 ms, more than 8e6 bytes / 1e10 B/s = 0.8 ms
    assert bd["compute_mem"] == pytest.approx(1e-5 + 1e-2)
    assert bd["compute_flop"] == 0.0 and bd["ops"] == 1


def test_paper_split_uses_the_profiler_bound() -> None:
    ops = [{"op": "mm", "flops": 2e9, "bytes_read": 1e6, "bytes_written": 1e6,
            "bound": "compute"},
           {"op": "add", "flops": 0, "bytes_read": 2e6, "bytes_written": 1e6,
            "bound": "memory"}]
    s = paper_split(ops, flops_per_s=1e12, mem_bw_bps=1e9)
    assert s["compute_flop"] == pytest.approx(2e-3)  # 2e9 / 1e12
    assert s["compute_mem"] == pytest.approx(3e-3)  # 3e6 / 1e9


def test_curves_from_a_gpu_without_curves_is_the_paper_model() -> None:
    gpu = GPU(name="x", fp32_tflops=10.0, mem_bw_gbs=100.0, flop_efficiency=0.5)
    c = Curves.from_gpu(gpu)
    ops = [{"op": "mm", "flops": 5e9, "bytes_read": 1e3, "bytes_written": 0, "bound": "compute"},
           {"op": "add", "flops": 0, "bytes_read": 1e8, "bytes_written": 1e8,
            "bound": "memory"}]
    bd = compute_breakdown(ops, c)
    assert bd["compute_flop"] == pytest.approx(5e9 / 5e12)  # 10 TFLOP/s x 0.5
    assert bd["compute_mem"] == pytest.approx(2e8 / 1e11)  # 100 GB/s
    assert math.isclose(bd["overhead"], 0.0)


def test_measured_curves_in_another_dtype_scale_by_the_entrys_peaks() -> None:
    """Curves are fp32 products; a job under --amp runs them times fp16 peak / fp32 peak
    (40 / 10 = 4 here), memory-bound rates unchanged."""
    from traincast.compute import compute_s, rates

    gpu = GPU(name="x", fp32_tflops=10.0, fp16_tflops=40.0, mem_bw_gbs=100.0,
              gemm_intensity=(1.0, 100.0), gemm_tflops=(1.0, 8.0),
              elementwise_bytes=(1e3, 1e6), elementwise_gbs=(1000.0, 5000.0))
    assert rates(gpu, "fp32", "curves") == pytest.approx((8e12, 5e12))
    assert rates(gpu, "amp", "curves") == pytest.approx((32e12, 5e12))
    flop_s, mem_s = compute_s(gpu, "amp", [3.2e13], [5e12], "curves")
    assert flop_s[0] == pytest.approx(1.0) and mem_s[0] == pytest.approx(1.0)
    # an op table: the product at intensity 100 runs 8 x 4 = 32 TFLOP/s (its 3.2e10 bytes
    # would take 6.4 ms at the element-wise rate: the FLOPs bound it)
    ops = [{"op": "mm", "flops": 3.2e12, "bytes_read": 3.2e10, "bytes_written": 0,
            "bound": "compute"}]
    assert compute_breakdown(ops, Curves.from_gpu(gpu, "amp"))["compute_flop"] == \
        pytest.approx(0.1)
    # under the memory roof I M (M = 0.5 TB/s measured), never below the fp32 curve: at I = 1,
    # max(1, min(4, 1 x 0.5)) = 1 TFLOP/s; at I = 100, min(32, 50) = 32
    slow = GPU(name="y", fp32_tflops=10.0, fp16_tflops=40.0, mem_bw_gbs=100.0,
               gemm_intensity=(1.0, 100.0), gemm_tflops=(1.0, 8.0),
               elementwise_bytes=(1e3, 1e6), elementwise_gbs=(100.0, 500.0))
    np.testing.assert_allclose(Curves.from_gpu(slow, "amp").gemm_flops_per_s, [1e12, 32e12])
    # a CPU whose bf16 products run at half its fp32 rate: half the curve
    cpu = GPU(name="z", fp32_tflops=2.0, bf16_tflops=1.0, mem_bw_gbs=100.0,
              gemm_intensity=(1.0, 100.0), gemm_tflops=(0.1, 1.5))
    np.testing.assert_allclose(Curves.from_gpu(cpu, "amp").gemm_flops_per_s, [0.05e12, 0.75e12])


def gru_row(phase: str, b: int, t: int, i: int, h: int) -> dict[str, object]:
    g = 3 * h
    if phase == "forward":
        return {"op": "gru", "phase": phase, "flops": 2 * b * t * g * (i + h),
                "bytes_read": 0, "bytes_written": 0, "bound": "compute", "dtype": "float32",
                "shapes": f"{b}x{t}x{i};{g}x{i};{g}x{h};{g};{g}"}
    return {"op": "gru_backward", "phase": phase, "flops": 4 * b * t * g * (i + h),
            "bytes_read": 0, "bytes_written": 0, "bound": "compute", "dtype": "float32",
            "shapes": f"{b}x{t}x{h};{b}x{t}x{i};{g}x{i};{g}x{h};{g};{g};{b}x{t}x{h};{b}x{t}x{g}"}


def test_recurrent_rule_counts_the_ops_each_step_runs() -> None:
    # rates so high that every op costs just its fixed cost o = 10 us
    fast = curves(gemm_flops_per_s=np.array([1e30, 1e30]),
                  elementwise_bps=np.array([1e30, 1e30]), kernel_elems_per_s={})
    t = 7
    # forward: 1 input GEMM + T x (recurrent GEMM + 10 cell ops) + 1 stack = 11T + 2 ops
    fwd = compute_breakdown([gru_row("forward", 2, t, 5, 4)], fast)
    assert fwd["ops"] == 11 * t + 2
    assert fwd["compute_flop"] + fwd["compute_mem"] == pytest.approx(1e-5 * (11 * t + 2))
    # backward: the forward again (11T + 2) + dX, dW_ih, bias sum, gate-gradient stack (4)
    # + T x (dh, dW_hh, dW_hh accumulation, bias sum, bias add, 15 cell-gradient ops) = 31T + 6
    bwd = compute_breakdown([gru_row("backward", 2, t, 5, 4)], fast)
    assert bwd["ops"] == 31 * t + 6
    assert bwd["overhead"] == pytest.approx(1e-5 * (31 * t + 6))


def test_recurrent_rule_flops_and_recomputation() -> None:
    # one GEMM rate (1e9 FLOP/s at every intensity), no fixed cost, free memory traffic:
    # time = FLOPs / 1e9
    flat = curves(gemm_flops_per_s=np.array([1e9, 1e9]), op_overhead_s=0.0,
                  elementwise_bps=np.array([1e30, 1e30]), kernel_elems_per_s={})
    b, t, i, h = 2, 5, 6, 4
    g = 3 * h
    forward_flops = 2 * b * t * i * g + t * 2 * b * h * g  # input GEMM + T recurrent GEMMs
    assert forward_flops == 2 * b * t * g * (i + h)  # the profiler's FLOPs of the direction
    fwd = compute_breakdown([gru_row("forward", b, t, i, h)], flat)
    assert fwd["compute_flop"] == pytest.approx(forward_flops / 1e9)
    # backward = recomputed forward + twice the forward's GEMM FLOPs (input and weight grads)
    bwd = compute_breakdown([gru_row("backward", b, t, i, h)], flat)
    assert bwd["compute_flop"] == pytest.approx(3 * forward_flops / 1e9)


def test_recurrent_gemms_run_at_their_own_intensity() -> None:
    # B = 1, T = 100, I = H = 100, G = 300, float32; no fixed cost, free memory traffic
    c = curves(op_overhead_s=0.0, elementwise_bps=np.array([1e30, 1e30]),
               kernel_elems_per_s={})
    fwd = compute_breakdown([gru_row("forward", 1, 100, 100, 100)], c)
    # input GEMM: 2*100*100*300 = 6e6 FLOPs over 4*(1e4 + 3e4 + 3e4) = 2.8e5 bytes:
    # intensity 21.43 -> 1e9 + ln(21.43)/ln(100) * (1e11 - 1e9) FLOP/s
    p_in = 1e9 + math.log(6e6 / 2.8e5) / math.log(100) * 9.9e10
    # recurrent GEMM: 2*1*100*300 = 6e4 FLOPs over 4*(100 + 3e4 + 300) + 4*300 = 122,800
    # bytes: intensity 0.49, below the curve -> 1e9 FLOP/s; 100 of them
    expected = 6e6 / p_in + 100 * 6e4 / 1e9
    assert fwd["compute_flop"] == pytest.approx(expected)
    # the one fused GEMM of 1.2e7 FLOPs at the rate of the input GEMM would take 40x less
    assert 1.2e7 / p_in < expected / 30
