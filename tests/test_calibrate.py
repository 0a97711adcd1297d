"""``traincast calibrate`` at tiny sizes: the file it writes loads, predicts, and is sane."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from traincast.calibration import calibrate  # noqa: E402
from traincast.calibration.comm import fit_latency_bw  # noqa: E402
from traincast.cli import app  # noqa: E402
from traincast.errors import TraincastError  # noqa: E402
from traincast.hardware.catalog import CatalogError, load_catalog  # noqa: E402
from traincast.predict import predict  # noqa: E402


@pytest.fixture(scope="module")
def tiny_catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cal") / "local.toml"
    calibrate(path, tiny=True, device="cpu", comm=True, threads=1)  # 1 rank per core
    return path


def test_calibration_file_loads_and_names_its_sources(tiny_catalog: Path) -> None:
    cat = load_catalog([tiny_catalog])
    g = cat.gpu("local")
    assert g.fp32_tflops > 0 and g.bf16_tflops > 0 and g.mem_bw_gbs > 0
    assert g.op_overhead_us > 0
    assert g.device == "cpu"  # a CPU's curves price recurrent layers as ATen's cells
    assert cat.node("local").gpu == "local" and cat.node("local").gpus >= 1
    for name in ("local-host", "local-allreduce", "local-loopback"):
        assert cat.link(name).bw_gbs > 0 and cat.link(name).source
        assert not cat.link(name).stand_in  # measured (predict names a stand-in)
    assert cat.link("local-allreduce").latency_us > 0
    assert "traincast calibrate" in g.source
    # measured FLOP-rate curves: sorted x, non-decreasing y, equal lengths
    for x, y in ((g.gemm_intensity, g.gemm_tflops), (g.conv_intensity, g.conv_tflops)):
        assert len(x) == len(y) >= 2
        assert np.all(np.diff(x) > 0) and np.all(np.diff(y) >= 0)
    assert len(g.elementwise_bytes) == len(g.elementwise_gbs) >= 2
    assert {"exp", "tanh", "native_layer_norm", "sqrt", "sparse_embedding_update"} <= set(
        g.kernel_gelems)
    assert g.foreach_tensor_us > 0


def test_calibration_record_keeps_spread_date_device_and_torch(tiny_catalog: Path) -> None:
    rec = tomllib.loads(tiny_catalog.read_text())["calibration"]["local"]
    import torch

    assert rec["torch"] == torch.__version__
    assert rec["device"] == "cpu" and rec["device_name"]
    assert rec["date"][:2] == "20"
    assert len(rec["matmul_spread"]) == len(rec["matmul_tflops"]) == len(rec["matmul_mnk"])
    assert all(s >= 0 for s in rec["matmul_spread"])
    assert len(rec["allreduce_bytes"]) == len(rec["allreduce_time_us"]) == 2


def test_predict_on_the_calibrated_node(tiny_catalog: Path) -> None:
    cat = load_catalog([tiny_catalog])
    feats = {"flops_compute_bound": 1e9, "bytes_memory_bound": 1e8, "weight_bytes": 4e6}
    one = predict(feats, arch="1w1g", node="local", catalog=cat, strategy="paper")
    g = cat.gpu("local")
    # the paper's model on the measured peak: F / (fp32_tflops * 1e12), B / (mem_bw_gbs * 1e9)
    assert one.time_s["compute_flop"] == pytest.approx(1e9 / (g.fp32_tflops * 1e12))
    assert one.time_s["compute_mem"] == pytest.approx(1e8 / (g.mem_bw_gbs * 1e9))
    two = predict(feats, arch="allreduce-local", gpus=2, node="local", catalog=cat,
                  strategy="paper")
    # 2 (n - 1) / n * W / bw(intra) with n = 2: W / bw
    bw = cat.link("local-allreduce").bw_gbs * 1e9
    assert two.time_s["comm"] == pytest.approx(4e6 / bw)


def test_a_calibrated_cpu_is_named_a_cpu(tiny_catalog: Path) -> None:
    """predict on the CPU calibrate measured says CPU rates and CPU utilization, not GPU."""
    args = ["predict", "--flops", "1e9", "--mem-bytes", "1e8", "--weight-bytes", "4e6",
            "--catalog", str(tiny_catalog), "--node", "local"]
    text = " ".join(CliRunner().invoke(app, args).stdout.split())
    assert "Predicted CPU utilization" in text and "strategy: CPU best measured" in text
    assert "GPU peak" not in text


def test_fit_latency_and_bandwidth_by_hand() -> None:
    # t = 100 us + S / 1 GB/s: 4 B -> ~100 us, 1e8 B -> 100 us + 0.1 s
    sizes = np.array([4.0, 1e6, 1e8])
    times = 1e-4 + sizes / 1e9
    lat, bw = fit_latency_bw(sizes, times)
    assert lat == pytest.approx(1e-4, rel=1e-3)
    assert bw == pytest.approx(1e9, rel=1e-3)
    # a ring all-reduce moves 2 (n - 1) / n of the message: bus bandwidth = that / time
    _, busbw = fit_latency_bw(sizes, times, moved_factor=1.5)
    assert busbw == pytest.approx(1.5e9, rel=1e-3)
    # a noisy run whose 4 MB message took 1% longer than its 4 B one (50 us): under the 5%
    # timing spread the sizes resolve no bandwidth; the bound 4e6 B / 50.5 us = 79 GB/s, not
    # 4e6 B over the 0.5 us difference (8,000 GB/s)
    _, unresolved = fit_latency_bw(np.array([4.0, 4e6]), np.array([5e-5, 5.05e-5]))
    assert unresolved == pytest.approx(4e6 / 5.05e-5)


def _gpu_file(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "bad.toml"
    path.write_text(f"[gpu.x]\nfp32_tflops = 1.0\nmem_bw_gbs = 10.0\n{extra}\n")
    return path


@pytest.mark.parametrize("extra, words", [
    ("gemm_intensity = [1.0, 2.0]\ngemm_tflops = [1.0]", "same length"),
    ("gemm_intensity = [2.0, 1.0]\ngemm_tflops = [1.0, 2.0]", "strictly increasing"),
    ("gemm_intensity = [1.0]", "needs 'gemm_tflops'"),
    ("conv_tflops = [1.0, -2.0]\nconv_intensity = [1.0, 2.0]", "positive numbers"),
    ("kernel_gelems = { exp = 0 }", "table of positive numbers"),
])
def test_bad_curves_name_file_table_and_key(tmp_path: Path, extra: str, words: str) -> None:
    path = _gpu_file(tmp_path, extra)
    with pytest.raises(CatalogError) as err:
        load_catalog([path])
    assert str(path) in str(err.value) and "[gpu.x]" in str(err.value)
    assert words in str(err.value)


# --- CPU threads: the scaling formula by hand, and calibrate at a named thread count ---

def test_thread_scaled_rate_by_hand() -> None:
    from traincast.roofline import thread_scaled_rate

    # K_1 = 1e9, K_T = 1.8e9 elements/s, grain g = 32768 elements:
    # K(E) = 1e9 * min(1.8, max(1, E / 32768))
    e = np.array([1024.0, 32768.0, 49152.0, 58982.4, 1e6])
    got = thread_scaled_rate(1e9, 1.8e9, e, 32768.0)
    # 1024 and 32768: one thread (1e9); 49152 = 1.5 g: 1.5e9; 58982.4 = 1.8 g: 1.8e9; 1e6: 1.8e9
    assert got == pytest.approx([1e9, 1e9, 1.5e9, 1.8e9, 1.8e9])
    # no grain, or no 1-thread rate: the T-thread rate
    assert thread_scaled_rate(1e9, 1.8e9, e, 0.0) == pytest.approx([1.8e9] * 5)
    assert thread_scaled_rate(np.nan, 1.8e9, 1024.0, 32768.0) == pytest.approx(1.8e9)
    # a kernel slower at T threads than at 1 (S = 0.8 < 1): the T-thread rate at every size
    assert thread_scaled_rate(1e9, 0.8e9, e, 32768.0) == pytest.approx([0.8e9] * 5)


def test_kernel_times_follow_the_thread_model() -> None:
    from traincast.roofline import Curves, kernel_times_s

    one = np.array([1.0])
    curves = Curves(one, one, one, one, one, one, 0.0, {"exp": 2e9, "log": 1e9},
                    kernel_elems_per_s_1t={"exp": 1e9}, thread_grain_elems=1000.0)
    t = kernel_times_s(["aten::exp", "aten::_foreach_exp", "aten::log", "aten::add"],
                       [500.0, 1e6, 1e6, 1e6], curves)
    # exp on 500 elements: below the grain, 1 thread: 500 / 1e9; on 1e6: 1e6 / 2e9;
    # log (no 1-thread rate): its T-thread rate 1e9; add (not measured): 0
    assert t == pytest.approx([500 / 1e9, 1e6 / 2e9, 1e6 / 1e9, 0.0])


def test_fit_grain_recovers_the_grain() -> None:
    from traincast.calibration.threads import fit_grain

    # speedups min(S, max(1, E / 32768)): 1 up to 32768 elements, 1.5 at 49152, S beyond
    e = np.array([1024.0, 16384, 32768, 49152, 262144, 1048576] * 2)
    top = np.repeat([1.9, 1.6], 6)
    speedup = np.minimum(top, np.maximum(1.0, e / 32768.0))
    assert speedup[3] == 1.5 and speedup[9] == 1.5
    assert fit_grain(e, speedup, top) == 32768.0
    # no thread gain at any size: nothing to fit a grain on -> 0 (no scaling)
    assert fit_grain(e, np.full(12, 0.9), np.full(12, 0.9)) == 0.0


def test_calibrate_records_and_honours_threads(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from traincast.calibration import bench

    seen: list[int] = []
    real = bench.measure

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(bench, "measure", spy)
    # no stage measured again for another program's load: the counts below are the plan's
    monkeypatch.setattr(bench, "contention", lambda *_: 0.0)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _check_threads_recorded(tmp_path, seen)
    finally:
        torch.set_num_threads(before)


def _check_threads_recorded(tmp_path: Path, seen: list[int]) -> None:
    import torch

    path = tmp_path / "two.toml"
    # force: this test checks the thread record; refusing under contention is test_contention
    calibrate(path, tiny=True, device="cpu", threads=2, comm=False, force=True)
    assert torch.get_num_threads() == 1  # restored
    g = load_catalog([path]).gpu("local")
    rec = tomllib.loads(path.read_text())["calibration"]["local"]
    assert g.threads == 2 and rec["threads"] == 2
    assert "2 thread(s)" in g.source
    # measured at 2 threads, with the 1-thread side of the scaling model beside it
    assert seen.count(2) > seen.count(1) > 0
    assert set(g.kernel_gelems_1t) >= {"exp", "tanh", "native_layer_norm"}
    # the grain is 0 (no gain at any size) or a quarter power of 2 between 2^6 and 2^24,
    # written with 6 significant digits (2^9.5 = 724.077...)
    grain = g.thread_grain_elems
    quarter = 2.0 ** (round(4 * np.log2(grain)) / 4) if grain > 0 else 0.0
    assert grain == 0 or (2**6 <= grain <= 2**24 and grain == pytest.approx(quarter, rel=1e-5))
    assert rec["thread_grain_elems"] == grain
    assert rec["op_overhead_training_1t_us"] > 0
    assert len(rec["thread_sweep_speedup"]) == 2 * len(rec["thread_sweep_elements"])
    # default: torch's thread count (1 here), recorded; no scaling measurement at 1 thread
    seen.clear()
    one = tmp_path / "one.toml"
    calibrate(one, tiny=True, device="cpu", comm=False)
    g1 = load_catalog([one]).gpu("local")
    assert g1.threads == 1 and not g1.kernel_gelems_1t and g1.thread_grain_elems == 0
    assert set(seen) == {1}


def test_gemm_rate_at_threads_by_hand() -> None:
    from traincast.roofline import Curves, gemm_rate_at_threads

    # T-thread curve 100 GFLOP/s flat; 1-thread curve 40 -> 80 GFLOP/s over intensity 1 -> 100
    # (linear in log I: 60 at I = 10); large-GEMM speedup S = 1.9, grain g = 1e7 FLOPs
    xs = np.array([1.0, 100.0])
    curves = Curves(xs, np.array([100e9, 100e9]), xs, np.array([1e11, 1e11]), xs,
                    np.array([1e10, 1e10]), 0.0, gemm_flops_per_s_1t=np.array([40e9, 80e9]),
                    gemm_thread_speedup=1.9, gemm_grain_flops=1e7)
    rate = gemm_rate_at_threads([10.0, 10.0, 10.0, 100.0], [5e6, 1.5e7, 1e9, 1e9], curves)
    # P_1(10) = 60e9; F = 5e6 < g: 60e9; F = 1.5 g: 90e9; F = 1e9: S * 60e9 = 114e9;
    # at I = 100: 1.9 * 80e9 = 152e9
    assert rate == pytest.approx([60e9, 90e9, 114e9, 152e9])
    # convolutions: the same rule on the conv curves (1-thread 20 GFLOP/s flat, S = 1.5,
    # g = 1e8 FLOPs): F = 5e7 -> 20e9; F = 1e9 -> 30e9
    conv = Curves(xs, np.array([100e9, 100e9]), xs, np.array([50e9, 50e9]), xs,
                  np.array([1e10, 1e10]), 0.0, conv_flops_per_s_1t=np.array([20e9, 20e9]),
                  conv_thread_speedup=1.5, conv_grain_flops=1e8)
    assert gemm_rate_at_threads([10.0, 10.0], [5e7, 1e9], conv, conv=True) == pytest.approx(
        [20e9, 30e9])
    # without a thread model: the T-thread curve
    plain = Curves(xs, np.array([100e9, 100e9]), xs, np.array([1e11, 1e11]), xs,
                   np.array([1e10, 1e10]), 0.0)
    assert gemm_rate_at_threads([10.0], [1e9], plain) == pytest.approx([100e9])


def test_gemm_scaling_from_timed_shapes() -> None:
    from traincast.calibration.threads import gemm_scaling

    # four shapes: 2^20 .. 2^26 FLOPs; at T threads the time is t_1 / min(1.8, max(1, F/2^22))
    flops = [2.0 ** 20, 2.0 ** 22, 2.0 ** 23, 2.0 ** 26]
    t1 = [f / 5e10 for f in flops]
    tt = [t / min(1.8, max(1.0, f / 2.0 ** 22)) for t, f in zip(t1, flops, strict=True)]
    out = gemm_scaling([{"time_s": t} for t in t1],
                       [{"time_s": t, "flops": f} for t, f in zip(tt, flops, strict=True)])
    assert out["gemm_speedup"] == pytest.approx([1.0, 1.0, 1.8, 1.8])
    assert out["gemm_top_speedup"] == pytest.approx(1.8)
    # any g in [2^22, 2^23 / 1.8] fits exactly; the grid's first such quarter power: 2^22
    assert out["gemm_grain_flops"] == 2.0 ** 22


def test_gemm_rate_at_threads_rows_by_hand() -> None:
    from traincast.roofline import Curves, gemm_rate_at_threads

    # 1-thread curve flat 50 GFLOP/s, S = 1.8, g_F = 2^22 FLOPs; measured speedup by output
    # rows S_m: 1.0 at 2 rows, 1.2 at 8, 1.7 at 64, 1.8 at 2048
    xs = np.array([1.0, 100.0])
    curves = Curves(xs, np.array([90e9, 90e9]), xs, np.array([1e11, 1e11]), xs,
                    np.array([1e10, 1e10]), 0.0, gemm_flops_per_s_1t=np.array([50e9, 50e9]),
                    gemm_thread_speedup=1.8, gemm_grain_flops=2.0 ** 22,
                    gemm_rows=np.array([2.0, 8.0, 64.0, 2048.0]),
                    gemm_rows_speedup=np.array([1.0, 1.2, 1.7, 1.8]))
    flops = [7.68e6, 1e9, 1e9, 1e9, 1e9]
    rows = [2.0, 64.0, 20.0, np.inf, 4096.0]
    rate = gemm_rate_at_threads([10.0] * 5, flops, curves, rows=rows)
    # m = 2: S_m = 1 (one thread) although F / g_F = 1.83 -> 50e9; m = 64: 1.7 -> 85e9;
    # m = 20: S_m = 1.2 + 0.5 * ln(20/8) / ln(64/8) = 1.42033 -> 71.0165e9;
    # rows unknown: S -> 90e9; beyond the last point: flat, 1.8 -> 90e9
    assert rate == pytest.approx([50e9, 85e9, 71.0165e9, 90e9, 90e9], rel=1e-5)
    # without a rows curve: the FLOP rule alone
    no_rows = Curves(xs, np.array([90e9, 90e9]), xs, np.array([1e11, 1e11]), xs,
                     np.array([1e10, 1e10]), 0.0, gemm_flops_per_s_1t=np.array([50e9, 50e9]),
                     gemm_thread_speedup=1.8, gemm_grain_flops=2.0 ** 22)
    assert gemm_rate_at_threads([10.0], [1e9], no_rows, rows=[2.0]) == pytest.approx([90e9])
    # convolutions never take the row limit
    assert gemm_rate_at_threads([10.0], [1e9], curves, conv=True, rows=[2.0]) == pytest.approx(
        [1e11])

def test_gemm_rows_of_ops() -> None:
    from traincast.roofline import gemm_rows

    ops = [{"op": "aten::mm", "flops": 2 * 2 * 800 * 2400, "shapes": "2x800;800x2400"},
           {"op": "aten::addmm", "flops": 2 * 20 * 650 * 2600,
            "shapes": "2600;20x650;650x2600"},
           {"op": "aten::bmm", "flops": 2 * 24 * 32 * 32 * 64, "shapes": "24x32x64;24x64x32"},
           {"op": "aten::add", "flops": 0, "shapes": "2x800;2x800"},
           {"op": "aten::mm", "flops": 1.0, "shapes": ""}]
    assert gemm_rows(ops).tolist() == [2.0, 20.0, np.inf, np.inf, np.inf]


def test_rows_speedup_curve_and_gemm_scaling() -> None:
    from traincast.calibration.threads import gemm_scaling, rows_speedup_curve

    # skinny shapes (m < n) by rows; the square of 2048 rows carries S = 2.0
    xs, ys = rows_speedup_curve([1, 1, 4, 16, 64, 2048], [1024] * 5 + [2048],
                                [0.9, 1.1, 1.0, 1.6, 1.5, 2.0], 2048.0, 2.0)
    # mean per m (m = 1: 1.0), non-decreasing fit (16 and 64 pooled: 1.55), within [1, S]
    assert xs.tolist() == [1.0, 4.0, 16.0, 64.0, 2048.0]
    assert ys == pytest.approx([1.0, 1.0, 1.55, 1.55, 2.0])
    # no thread gain at all: no curve
    assert len(rows_speedup_curve([2], [1024], [0.9], 1024.0, 0.9)[0]) == 0
    # gemm_scaling: a 2-row product gains nothing at 4 MFLOP, 64 rows 1.6x, the 128 square
    # (2^22 FLOPs) nothing, the 2048 square 2.0x
    shapes = [(2, 1024, 1024), (64, 1024, 1024), (128, 128, 128), (2048, 2048, 2048)]
    true = [1.0, 1.6, 1.0, 2.0]
    flops = [2.0 * m * n * k for m, n, k in shapes]
    t1 = [f / 5e10 for f in flops]
    out = gemm_scaling([{"time_s": t} for t in t1],
                       [{"time_s": t / s, "flops": f, "m": m, "n": n}
                        for t, s, f, (m, n, _) in zip(t1, true, flops, shapes, strict=True)])
    assert out["gemm_top_speedup"] == pytest.approx(2.0)
    assert out["gemm_rows"] == [2.0, 64.0, 2048.0]
    assert out["gemm_rows_speedup"] == pytest.approx([1.0, 1.6, 2.0])
    # with S_m in place of S, any g_F in [2^22, 1.34e8 / 1.6] fits exactly: the grid's first,
    # 2^22 (the 128 square's FLOPs)
    assert out["gemm_grain_flops"] == 2.0 ** 22


def test_compute_breakdown_prices_few_row_products_at_one_thread() -> None:
    from traincast.roofline import Curves, compute_breakdown

    # a GRU step's product at batch 2 (7.68 MFLOP) and the same with 64 rows; 1-thread curve
    # flat 50 GFLOP/s, S = 2, g_F = 1e6 FLOPs, S_m = 1 at 2 rows, 2 from 64 rows; o = 0
    xs = np.array([0.01, 1e4])
    curves = Curves(xs, np.array([100e9, 100e9]), xs, np.array([1e11, 1e11]), xs,
                    np.array([1e15, 1e15]), 0.0, gemm_flops_per_s_1t=np.array([50e9, 50e9]),
                    gemm_thread_speedup=2.0, gemm_grain_flops=1e6,
                    gemm_rows=np.array([2.0, 64.0]), gemm_rows_speedup=np.array([1.0, 2.0]))
    few = {"op": "aten::mm", "flops": 2 * 2 * 800 * 2400, "bytes_read": 4 * (1600 + 1920000),
           "bytes_written": 4 * 4800, "shapes": "2x800;800x2400", "bound": "compute"}
    many = {**few, "flops": 2 * 64 * 800 * 2400, "shapes": "64x800;800x2400"}
    # 7.68e6 / 50e9 = 153.6 us (one thread); 2.4576e8 / (2 * 50e9) = 2457.6 us
    assert compute_breakdown([few], curves)["compute_flop"] == pytest.approx(153.6e-6)
    assert compute_breakdown([many], curves)["compute_flop"] == pytest.approx(2457.6e-6)


def test_a_calibration_may_rewrite_its_own_file_not_a_kernel_fit(tiny_catalog: Path,
                                                                   tmp_path: Path) -> None:
    # the machine calibration's own file ([gpu.local], [link.local-*], [node.local]) and a
    # CUDA host's floor and dispatch ratios ([kernel_model] with params) may be written again;
    # a kernel fit ([kernel_model] with fitted_on) may not, nor may a fit replace either
    import tomli_w

    from traincast.calibration import host_floor_table
    from traincast.cli.calibrate import _refuse_other_tables
    from traincast.errors import TraincastError

    _refuse_other_tables(tiny_catalog, kernel_fit=False)
    cuda = tmp_path / "cuda.toml"
    doc = tomllib.loads(tiny_catalog.read_text()) | host_floor_table({
        "device": "cuda:0", "date": "2026-01-01", "device_name": "GPU", "torch": "2.13",
        "op_overhead": {"alone_op_s": 25e-6, "alone_op_calls": 200,
                        "alone_kinds_s": {"add": 25e-6, "linear": 55e-6}}})
    assert "params" in doc["kernel_model"]
    cuda.write_text(tomli_w.dumps(doc))
    _refuse_other_tables(cuda, kernel_fit=False)
    with pytest.raises(TraincastError, match="which a kernel fit does not write"):
        _refuse_other_tables(cuda, kernel_fit=True)
    fit = tmp_path / "fit.toml"
    fit.write_text(tomli_w.dumps({"kernel_model": {"fitted_on": ["T4"], "params": {}}}))
    _refuse_other_tables(fit, kernel_fit=True)  # a fit may rewrite a fit (the reverse: the
    # CLI test of test_kernel_fit.py, test_one_calibration_does_not_replace_another)


@pytest.mark.parametrize("args, words", [
    (["calibrate", "--device", "foo"], "--device 'foo': not a device"),
    (["calibrate", "--device", ""], "--device '': not a device"),
    (["validate", "--device", "tpu"], "--device 'tpu': not a device"),
    (["calibrate", "--catalog", "x.toml"], "--catalog needs --kernels"),
    (["validate", "--sample", "5"], "--sample 5 needs --kernels"),
    (["validate", "--published", "--sample", "5"], "--sample 5 needs --kernels"),
])
def test_a_device_or_option_that_cannot_act_is_refused_before_measuring(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], words: str) -> None:
    """A device traincast cannot measure on, and an option that acts only with --kernels,
    are input errors before any measurement (no stage runs, nothing is written)."""
    from traincast import calibration

    def measured(*_a: object, **_k: object) -> None:
        raise AssertionError("a measurement ran")

    import traincast.validation as validation

    monkeypatch.setattr(calibration, "_calibrate", measured)
    for name in ("validate", "validate_threads"):
        monkeypatch.setattr(validation, name, measured)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, args)
    assert isinstance(res.exception, TraincastError), res.output
    assert words in str(res.exception)
    assert list(tmp_path.iterdir()) == []


def test_cuda_where_torch_sees_none_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from traincast.calibration import check_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(TraincastError, match="torch sees no CUDA device here"):
        check_device("cuda")
    assert check_device(None) == "cpu" and check_device(" CPU ") == "cpu"


def test_a_cpu_calibration_names_no_gpu_vendor_and_rocm_names_amd(
        tiny_catalog: Path, tc, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from traincast import kernels
    from traincast.calibration import device_vendor

    assert kernels.vendor_of(load_catalog([tiny_catalog]).gpu("local")) is None
    shown = tc("hardware", "show", "gpu.local", "--catalog", str(tiny_catalog))
    assert shown.returncode == 0 and "vendor" not in shown.stdout
    data = json.loads(tc("hardware", "show", "gpu.local", "--catalog", str(tiny_catalog),
                         "--json").stdout)
    assert data["vendor"] is None
    assert device_vendor("cpu") is None
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    assert device_vendor("cuda:0") == "nvidia"
    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    assert device_vendor("cuda:0") == "amd"  # torch's cuda device is a HIP one under ROCm
