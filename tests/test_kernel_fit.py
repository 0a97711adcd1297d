"""The measured-kernel model: hand-computed tiles, waves and floors; the fit and its format."""

from __future__ import annotations

import gzip
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from traincast import kernels
from traincast.calibration import kernel_fit
from traincast.cli import app
from traincast.compute import kernel_op_times
from traincast.errors import TraincastError
from traincast.hardware.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "neusight-kernels"
# c_issue = 0: every tile equally efficient; no per-tile cost, no split-K, no fixed cost
FLAT = {"c_issue": 0.0, "tile_cycles": 0.0, "max_split_k": 1.0, "gemm_fixed_us": 0.0}
NO_DRAM = 1e30  # bytes/s: the DRAM and tile-traffic terms vanish


def simt(m: float, n: float, k: float, batch: float, sms: float, rate: float,
         params: dict[str, float], mem_bps: float = NO_DRAM, clock_hz: float = 1e9,
         with_tile: bool = False, issue: float = 1.0):
    return kernels.simt_gemm_time_s(m, n, k, batch, sms, issue, rate, clock_hz, mem_bps, params,
                                    with_tile=with_tile)


def test_one_round_of_64_tiles_leaves_16_of_80_sms_idle() -> None:
    # 1024^3 on 80 SMs: 128x128 tiles -> 8 x 8 = 64 tiles, one per SM at a time: one round
    # with 64 SMs busy, t = 2 128^2 1024 / (R / 80) = 1.25 F / R (F = 2 1024^3). 128x64 (128
    # tiles, 2 rounds) and 64x64 (256 tiles, 4 rounds) take the same time.
    rate = 1e13
    t = simt(1024, 1024, 1024, 1, 80, rate, FLAT)
    assert float(t) == pytest.approx(1.25 * 2 * 1024**3 / rate)


def test_rounds_and_issue_term_pick_the_tile() -> None:
    # (128*161) x 128, k = 512, 80 SMs: 128x128 -> 161 tiles, 3 rounds; 128x64 and 64x128 ->
    # 322 tiles, 5 rounds of half the work; 64x64 -> 644 tiles, 9 rounds of a quarter: times
    # 3 : 2.5 : 2.25 (x 2 128^2 512 / (R / 80)), so without an issue term 64x64 wins (index 3).
    # With c_issue = 50 on 32-lane partitions (h = 1) each is divided by
    # e_T = 1 / (1 + 50 (T_m + T_n) / (T_m T_n)):
    # 3 / 0.5614 = 5.344 < 2.5 / 0.4604 = 5.430 < 2.25 / 0.3902 = 5.766: 128x128 wins.
    rate, k, unit = 1e13, 512, 2 * 128 * 128 * 512 / (1e13 / 80)
    t, tile = simt(128 * 161, 128, k, 1, 80, rate, FLAT, with_tile=True)
    assert int(tile) == 3 and float(t) == pytest.approx(2.25 * unit)
    t, tile = simt(128 * 161, 128, k, 1, 80, rate, {**FLAT, "c_issue": 50.0}, with_tile=True)
    assert int(tile) == 0
    assert float(t) == pytest.approx(3 * unit * (1 + 50.0 * 256 / 16384))
    # 16-lane partitions (h = 2): one other instruction per FFMA issues free, e_T = 2 / max(2,
    # 1 + x): 128x128 x = 0.78 -> 1 (3 units); 128x64 x = 1.171875 -> 2 / 2.171875 (2.5 x
    # 1.0859 = 2.715 units); 64x64 x = 1.5625 -> 2 / 2.5625 (2.25 x 1.28125 = 2.883): 128x64
    t, tile = simt(128 * 161, 128, k, 1, 80, rate, {**FLAT, "c_issue": 50.0}, with_tile=True,
                   issue=2.0)
    assert int(tile) in (1, 2)
    assert float(t) == pytest.approx(2.5 * unit * 2.171875 / 2)


def test_issue_ratio_by_hand() -> None:
    # h = 32 / (FP32 lanes per SM / partitions): V100, T4, A100 64 / 4 = 16 lanes -> 2; P100
    # 64 / 2 -> 1; H100, L4 and P4 128 / 4 -> 1; a Kepler SMX 192 / 4 = 48 lanes -> 2/3;
    # partitions 0 = the default 4
    h = kernels.issue_ratio([64, 64, 128, 192, 64], [4, 2, 4, 4, 0])
    assert h.tolist() == pytest.approx([2.0, 1.0, 1.0, 2.0 / 3.0, 2.0])
    cat = load_catalog()
    assert float(kernels.simt_issue_ratio(cat.gpu("P100-PCIE-16GB"))) == 1.0
    assert float(kernels.simt_issue_ratio(cat.gpu("V100-PCIE-32GB"))) == 2.0
    assert float(kernels.simt_issue_ratio(cat.gpu("H100-SXM5-80GB"))) == 1.0
    # e_T on h = 2 stays 1 until the other instructions pass one per FFMA
    e = kernels.tile_issue_efficiency([128, 64, 32], [128, 64, 32], 2.0, 64.0)
    assert e.tolist() == pytest.approx([1.0, 2.0 / 3.0, 2.0 / 5.0])


def test_a_tile_costs_its_whole_area_and_a_fixed_cost_per_round() -> None:
    # a 3 x 5 output, k = 64, batch 200 on 80 SMs: no narrowing, every tile computes all of its
    # T_m x T_n outputs. 64x64: 200 tiles, 3 rounds, each 2 64^2 64 / (R / 80) + C / f with
    # C = 1000 cycles at f = 1 GHz (1 µs); larger tiles take the same 3 rounds at 2x-4x the
    # work. Plus o = 2 µs once.
    rate, params = 1e13, {**FLAT, "tile_cycles": 1000.0, "gemm_fixed_us": 2.0}
    t, tile = simt(3, 5, 64, 200, 80, rate, params, with_tile=True)
    assert int(tile) == 3
    assert float(t) == pytest.approx(3 * (1e-6 + 2 * 64 * 64 * 64 / (rate / 80)) + 2e-6)


def test_split_k_only_for_one_product_and_dram_and_tile_traffic_terms() -> None:
    # a 128 x 128 output with k = 65536 on 80 SMs, max_split_k = 4: batch 1 splits k 4 ways;
    # 64x64 tiles (4 x 4 = 16 parts, one round) are fastest: t = 2 64^2 65536 / 4 / (R / 80).
    # Batch 2 does not split: 8 tiles, one round, t = 2 64^2 65536 / (R / 80).
    rate = 1e13
    params = {**FLAT, "max_split_k": 4.0}
    one = simt(128, 128, 65536, 1, 80, rate, params)
    assert float(one) == pytest.approx(2 * 64**2 * 65536 / 4 / (rate / 80))
    two = simt(128, 128, 65536, 2, 80, rate, params)
    assert float(two) == pytest.approx(2 * 64**2 * 65536 / (rate / 80))
    # k = 1 outer product of 4096 x 4096 at 100 GB/s: the DRAM term 4 (4096 + 4096 + 4096^2) B
    slow = simt(4096, 4096, 1, 1, 80, rate, FLAT, mem_bps=1e11)
    assert float(slow) == pytest.approx(4 * (4096 + 4096 + 4096**2) / 1e11)
    # 8192^3 on 64 SMs at 1 GB/s and 1e15 FLOP/s: each 128x128 tile reads (128 + 128) 8192
    # fp32 once per wave, panels shared by sqrt(64) = 8 tiles: 4096 x 256 x 8192 x 4 / (1e9 x 8)
    # = 4.29 s, above the DRAM term (3 x 8192^2 x 4 / 1e9 = 0.81 s); 64x64 tiles move twice that
    tile = simt(8192, 8192, 8192, 1, 64, 1e15, FLAT, mem_bps=1e9)
    assert float(tile) == pytest.approx(4096 * 256 * 8192 * 4 / (1e9 * 8))


def test_sustained_clock_fraction_by_hand() -> None:
    # T4: 70 W / (40 SMs x 64 lanes x 1.59 GHz x 12 nm) = 1.4334e-3 W; p0 = 2e-3 -> 0.7167
    c = kernels.sustained_clock_fraction(70, 40, 64, 1590, 12, 2e-3)
    assert float(c) == pytest.approx(70 / (40 * 64 * 1.59 * 12) / 2e-3)
    assert float(kernels.sustained_clock_fraction(700, 132, 128, 1830, 4, 2e-3)) == 1.0
    assert float(kernels.sustained_clock_fraction(0, 132, 128, 1830, 4, 2e-3)) == 1.0


def test_the_gpu_waits_for_the_host_to_issue_each_op() -> None:
    gpu = load_catalog().gpu("B200")
    d = kernels.op_floor_s(gpu)
    assert d == pytest.approx(gpu.kernel["floor_us"] * 1e-6) and d > 0
    ops = [{"op": "aten::add", "flops": 0, "bytes_read": 8, "bytes_written": 4,
            "dtype": "float32", "shapes": "1;1"},
           {"op": "aten::mm", "flops": 2 * 8192**3, "bytes_read": 2 * 4 * 8192**2,
            "bytes_written": 4 * 8192**2, "dtype": "float32", "shapes": "8192x8192;8192x8192"}]
    r = kernel_op_times(ops, gpu, "fp32")
    # the host issues the 12-byte add in d r_add (the fitted dispatch ratio of an add) while
    # the GPU idles, which then runs it in far less than that (busy < d) ...
    h_add, h_mm = d * gpu.kernel["dispatch_add"], d * gpu.kernel["dispatch_bmm"]
    assert r["idle_total_s"][0] == pytest.approx(h_add) and r["busy_s"][0] < d
    assert r["time_s"][0] == pytest.approx(h_add + r["busy_s"][0])
    # ... and idles again until the mm is issued, d r_bmm after the add
    assert r["idle_total_s"][1] == pytest.approx(h_mm - r["busy_s"][0])
    assert r["busy_s"][1] > d
    # two adds behind the mm are issued while it runs: no wait
    r = kernel_op_times([ops[1], ops[0], ops[0]], gpu, "fp32")
    assert r["idle_total_s"].tolist() == pytest.approx([h_mm, 0.0, 0.0])


GPUS = [g for g in ("V100-PCIE-32GB", "T4", "A100-SXM4-80GB", "H100-SXM5-80GB", "L4", "B200",
                    "RTX-4090")]


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 20000), n=st.integers(1, 20000), k=st.integers(1, 20000),
       batch=st.integers(1, 64), gpu=st.sampled_from(GPUS))
def test_no_gemm_above_peak_or_bandwidth_nor_below_its_floor(m: int, n: int, k: int,
                                                             batch: int, gpu: str) -> None:
    g = load_catalog().gpu(gpu)
    shapes = f"{batch}x{m}x{k};{batch}x{k}x{n}"
    flops, moved = 2.0 * batch * m * n * k, 4.0 * batch * (m * k + k * n + m * n)
    ops = [{"op": "aten::bmm", "flops": flops, "bytes_read": 4.0 * batch * (m * k + k * n),
            "bytes_written": 4.0 * batch * m * n, "dtype": "float32", "shapes": shapes}]
    t = float(kernel_op_times(ops, g, "fp32")["time_s"][0])
    assert t >= flops / (g.fp32_tflops * 1e12) * (1 - 1e-9)
    assert t >= moved / (g.mem_bw_gbs * 1e9) * (1 - 1e-9)
    assert t >= kernels.op_floor_s(g)


def _simulated_idle_s(h: list[float], b: list[float], c: list[int]) -> float:
    """The host queue run by run: consecutive rows with the same count form a loop body run
    that many times; the host issues run k at H_k, the GPU starts it at max(E_{k-1}, H_k)."""
    runs, i = [], 0
    while i < len(h):
        j = i
        while j + 1 < len(h) and c[j + 1] == c[i]:
            j += 1
        runs += [(h[x], b[x]) for _ in range(c[i]) for x in range(i, j + 1)]
        i = j + 1
    issued = end = busy = 0.0
    for hk, bk in runs:
        issued += hk
        end = max(end, issued) + bk
        busy += bk
    return end - busy


def test_host_queue_by_hand() -> None:
    # host 3 per op, GPU 1, 10, 1, 1: the GPU waits 3 for op 1, 2 for op 2 (issued at 6, op 1
    # ended at 4); ops 3 and 4 are issued at 9 and 12, while op 2 runs until 16: no wait
    assert kernels.queue_idle_s([3.0] * 4, [1, 10, 1, 1], [1] * 4).tolist() == [3, 2, 0, 0]
    # a body (h 1, b 2 and h 3, b 1) run 4 times: issues at 1, 4, 5, 8, ..., 16; the GPU runs
    # 1..3, 4..5, 5..7, 8..9, ..., 16..17: 17 s for 12 s of work, the host 1 s behind per pass
    assert float(kernels.queue_idle_s([1, 3], [2, 1], [4, 4]).sum()) == pytest.approx(5.0)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.floats(0, 5), st.floats(0, 5), st.integers(0, 4)),
                     min_size=1, max_size=8))
def test_host_queue_matches_the_queue_run_by_run(rows: list[tuple[float, float, int]]) -> None:
    h, b, c = (list(x) for x in zip(*rows, strict=True))
    idle = kernels.queue_idle_s(h, b, c)
    assert float(idle.sum()) == pytest.approx(_simulated_idle_s(h, b, c), abs=1e-9)
    assert np.all(idle >= 0)
    # several queues at once (leading axes): each as on its own
    twice = [2 * x for x in b]
    both = kernels.queue_idle_s(h, np.array([b, twice]), c)
    np.testing.assert_allclose(both, [idle, kernels.queue_idle_s(h, twice, c)], atol=1e-12)
    # the grid of scaled queues: even rows' busy times x scales[i], odd rows' x scales[j]
    scales = [0.0, 0.5, 2.0]
    marked = [i % 2 == 0 for i in range(len(h))]
    grid = kernels.queue_idle_grid_s(h, b, c, marked, scales)
    for i, x in enumerate(scales):
        for j, y in enumerate(scales):
            scaled = [v * (x if m else y) for v, m in zip(b, marked, strict=True)]
            assert grid[i, j] == pytest.approx(_simulated_idle_s(h, scaled, c), abs=1e-9)
    hc, bc = np.multiply(h, c), np.multiply(b, c)
    # between the host's own time and every op waiting for its own dispatch (the first op's
    # wait, at most min(h, b) of some op, on top)
    assert float(idle.sum()) >= float(hc.sum() - bc.sum()) - 1e-9
    extra = float(np.max(np.minimum(h, b)))
    assert float(idle.sum()) <= float((np.maximum(h, b) * c).sum() - bc.sum()) + extra + 1e-9


def test_dlrm_on_b200_is_no_faster_than_its_kernels_floors() -> None:
    import json

    from traincast import predict

    prof = json.loads((ROOT / "src/traincast/zoo/ops.json").read_text())["models"]["dlrm"]
    cat = load_catalog()
    r = predict({"ops": prof["ops"], "batch_size": prof["batch_size"], "weight_bytes": 0.0,
                 "flops_compute_bound": prof["flops_compute_bound"],
                 "bytes_memory_bound": prof["bytes_memory_bound"]},
                arch="allreduce-local", gpus=4, node="dgx-b200", catalog=cat)
    from traincast.features.ops import expand_ops

    ops = expand_ops(prof["ops"])
    counts = np.array([float(o.get("count", 1)) for o in ops])
    floors = kernels.op_floors_s(ops, cat.gpu("B200"))           # each op's d r_x
    compute = r.time_s["compute_flop"] + r.time_s["compute_mem"]
    assert compute >= float((counts * floors).sum()) * (1 - 1e-9)


def test_dlrm_from_aggregate_features_is_no_faster_than_the_hosts_issue() -> None:
    """The same DLRM step known only by its aggregate features and its op count (``profile``
    without ``--ops``): no shorter than n_ops d, the host issuing each op at the floor of the
    cheapest kind, where the large-GEMM rates alone would give microseconds; the GPU waits
    for the host the rest of the step."""
    import json

    from traincast import predict

    prof = json.loads((ROOT / "src/traincast/zoo/ops.json").read_text())["models"]["dlrm"]
    cat = load_catalog()
    feats = {"flops_compute_bound": prof["flops_compute_bound"], "weight_bytes": 0.0,
             "bytes_memory_bound": prof["bytes_memory_bound"]}
    n_ops = len(prof["ops"])
    d = cat.kernel_model["default_floor_us"] * 1e-6  # B200: no host measured, the median
    bare = predict(feats, arch="allreduce-local", gpus=4, node="dgx-b200", catalog=cat)
    bound = predict({**feats, "n_ops": n_ops}, arch="allreduce-local", gpus=4,
                    node="dgx-b200", catalog=cat)
    compute = bound.time_s["compute_flop"] + bound.time_s["compute_mem"]
    assert bare.time_s["compute_flop"] + bare.time_s["compute_mem"] < 0.01 * n_ops * d
    assert compute == pytest.approx(n_ops * d, rel=1e-9)
    assert bound.gpu_util < 0.01  # busy microseconds of a step of milliseconds
    # the paper's flat model has no per-op host time: no bound there
    paper = predict({**feats, "n_ops": n_ops}, arch="allreduce-local", gpus=4,
                    node="dgx-b200", catalog=cat, strategy="paper")
    assert paper.time_s["compute_flop"] + paper.time_s["compute_mem"] < 0.01 * n_ops * d
    for bad in (-3.0, float("inf")):  # an op count is a count: named, not priced
        with pytest.raises(TraincastError, match=r"n_ops must be a finite number >= 0.*"
                                                 r"\(field n_ops\)"):
            predict({**feats, "n_ops": bad}, node="dgx-b200", catalog=cat)


def _write(path: Path, header: str, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        fh.write(header + "\n" + "\n".join(rows) + "\n")


def test_stage_one_and_two_by_hand(tmp_path: Path) -> None:
    # rows made by hand on a V100 PCIe 32 GB: adds timed as max(d, 12 B H / (M f)) with
    # d = 30 µs, f = 0.75; layer norms whose smallest rows take 54 µs (1.8 d)
    cat = load_catalog()
    bw = cat.gpu("V100-PCIE-32GB").mem_bw_gbs * 1e9
    shapes = [(1, 1), (2, 1), (1, 2), (3, 1)] * 5 + [(4096, 4096), (8192, 2048), (16384, 4096),
                                                     (2048, 1024), (4096, 1024)]
    rows = [f"add,{max(30e-6, 12.0 * b * h / (bw * 0.75)) * 1e3!r},Tesla V100-PCIE-32GB,x,{b},{h}"
            for b, h in shapes]
    _write(tmp_path / "add" / "v.csv.gz", "OPName,Latency,Device,Kernel Name,B,H", rows)
    _write(tmp_path / "ln" / "v.csv.gz", "OPName,Latency,Device,Kernel Name,B,H",
           [f"ln,{54e-3!r},Tesla V100-PCIE-32GB,x,{b},{h}" for b, h in shapes[:20]])
    data = kernel_fit.read_kernels(tmp_path, cat)
    assert len(data) == 45
    floors = kernel_fit.measured_floors_us(data)
    assert floors == {"V100-PCIE-32GB": pytest.approx(30.0, rel=1e-3)}
    ratios = kernel_fit.dispatch_ratios(data, floors)
    assert ratios["ln"] == pytest.approx(1.8) and ratios["add"] == pytest.approx(1.0)
    spec = kernel_fit.specs_of(data.gpu, cat)
    floor_s = kernel_fit._floor_col(data, floors, 30.0, ratios)    # d r: 30 µs adds, 54 µs norms
    assert sorted(set(np.round(floor_s * 1e6, 6).tolist())) == pytest.approx([30.0, 54.0])
    fractions = kernel_fit.bandwidth_fractions(data, spec, floor_s)
    assert fractions["f_elementwise"] == pytest.approx(0.75)
    assert "f_softmax" not in fractions and "f_norm" not in fractions  # no rows: not fitted


def test_the_floor_is_the_typical_time_of_the_least_work_not_the_luckiest_calls(
        tmp_path: Path) -> None:
    # 40 small adds (B = 1, H = 1..40) on a host whose dispatch varies: every fourth is a lucky
    # 16 µs call, the rest take 24 µs; 360 larger adds all take more. The floor is the median of
    # the 5% of rows moving the fewest bytes (the 20 smallest, 5 of them lucky: 24 µs); the
    # fastest 5% would be the 10 lucky calls and 10 of the 24 µs ones (20 µs). LayerNorms whose
    # 20 smallest take 48 µs (and lucky larger ones 30 µs) cost the host 2 adds: their ratio
    # comes from the same least-work rows
    rows = [f"add,{(0.016 if i % 4 == 0 else 0.024)!r},Tesla T4,x,1,{i + 1}" for i in range(40)]
    rows += [f"add,{0.030 + i * 1e-4!r},Tesla T4,x,{1000 + i},1000" for i in range(360)]
    _write(tmp_path / "add" / "t.csv.gz", "OPName,Latency,Device,Kernel Name,B,H", rows)
    norms = [f"ln,0.048,Tesla T4,x,1,{i + 1}" for i in range(20)]
    norms += [f"ln,{0.030 if i < 60 else 0.2!r},Tesla T4,x,{100 + i},1000" for i in range(380)]
    _write(tmp_path / "ln" / "t.csv.gz", "OPName,Latency,Device,Kernel Name,B,H", norms)
    data = kernel_fit.read_kernels(tmp_path, load_catalog())
    floors = kernel_fit.measured_floors_us(data)
    assert floors == {"T4": pytest.approx(24.0)}
    assert kernel_fit.dispatch_ratios(data, floors)["ln"] == pytest.approx(2.0)


def test_rows_tied_at_the_cut_all_count() -> None:
    # 5% of 40 rows is 2; the 2nd-smallest work is shared by rows 2-4: all four smallest rows
    # count, whatever their order (median of 10, 30, 30, 30 µs = 30 µs)
    work = np.array([1.0, 2.0, 2.0, 2.0] + [10.0] * 36)
    lat = np.array([10e-6, 30e-6, 30e-6, 30e-6] + [1e-3] * 36)
    order = np.random.default_rng(0).permutation(40)
    assert kernel_fit._floor_of_us(lat, work) == pytest.approx(30.0)
    assert kernel_fit._floor_of_us(lat[order], work[order]) == pytest.approx(30.0)


def test_folders_are_read_together_and_other_dtypes_refused(tmp_path: Path) -> None:
    cat = load_catalog()
    _write(tmp_path / "a" / "add" / "t.csv.gz", "OPName,Latency,Device,Kernel Name,B,H",
           ["add,0.03,Tesla T4,x,1,1"])
    _write(tmp_path / "b" / "add" / "v.csv.gz", "OPName,Latency,Device,Kernel Name,B,H,Dtype",
           ["add,0.02,Tesla V100-PCIE-32GB,x,1,1,fp32"])
    data = kernel_fit.read_kernels([tmp_path / "a", tmp_path / "b"], cat)
    assert sorted(data.gpu.tolist()) == ["T4", "V100-PCIE-32GB"]
    _write(tmp_path / "c" / "linear" / "v.csv.gz",
           "OPName,Latency,Device,Kernel Name,B,M,N,K,Dtype",
           ["linear,0.02,Tesla V100-PCIE-32GB,,1,8,8,8,fp32",
            "linear,0.02,Tesla V100-PCIE-32GB,,1,8,8,8,bf16"])
    with pytest.raises(TraincastError, match=r"v\.csv\.gz: row 2: field 'Dtype' = 'bf16'"):
        kernel_fit.read_kernels([tmp_path / "a", tmp_path / "c"], cat)
    # a folder that gives no measured file is named, not skipped; nor is one read twice
    (tmp_path / "parent" / "kernels" / "add").mkdir(parents=True)
    with pytest.raises(TraincastError, match=r"parent: no <family>/\*\.csv"):
        kernel_fit.read_kernels([tmp_path / "a", tmp_path / "parent"], cat)
    with pytest.raises(TraincastError, match="given twice"):
        kernel_fit.read_kernels([tmp_path / "a", tmp_path / "b", tmp_path / "a" / "."], cat)


def test_a_measured_product_row_by_hand() -> None:
    # one linear row on a V100 PCIe (80 SMs x 64 lanes, 1380 MHz, unthrottled: power_ref tiny):
    # 1024 rows x 1024 in -> 1024 out, 64 tiles of 128x128, one round:
    # t_kernel = 2 128^2 1024 / (R / 80), R = 2 80 64 1.38e9; timed as phi d r + t_kernel with
    # d = 30 µs, r = 2 (the row's floor given), phi = 0.5
    cat = load_catalog()
    data = kernel_fit.Kernels(np.array(["linear"], dtype=object),
                              np.array(["V100-PCIE-32GB"], dtype=object), np.array([1e-3]),
                              {"B": np.array([1.0]), "M": np.array([1024.0]),
                               "N": np.array([1024.0]), "K": np.array([1024.0])})
    params = {**FLAT, "simt_efficiency": 1.0, "power_ref": 1e-9, "pre_launch": 0.5}
    rate = 2 * 80 * 64 * 1.38e9
    t = kernel_fit.predict_kernel_s(data, kernel_fit.specs_of(data.gpu, cat), params,
                                    np.array([60e-6]))
    assert float(t[0]) == pytest.approx(0.5 * 60e-6 + 2 * 128**2 * 1024 / (rate / 80))


def test_the_tile_a_row_ran_comes_from_its_kernel_name() -> None:
    # cuBLAS computes the row-major C = A B as the column-major C^T: its AxB tile is A outputs
    # along our n and B along our m
    names = np.array(["volta_sgemm_128x64_tn", "maxwell_sgemm_32x128_nn", "sgemm_32x32x32_NN",
                      "ampere_sgemm_64x32_sliced1x4_tn", "", None, "void cutlass_80_tensorop"],
                     dtype=object)
    tm, tn = kernel_fit.ran_tiles(names)
    assert tm.tolist() == [64, 128, 32, 32, 0, 0, 0]
    assert tn.tolist() == [128, 32, 32, 64, 0, 0, 0]


def test_a_row_with_its_tile_is_priced_with_that_tile() -> None:
    # 1024^3 on 80 SMs with a ran 64x128 tile (T_m = 64, T_n = 128): 16 x 8 = 128 tiles, 2
    # rounds of 2 64 128 1024 / (R / 80) each, over e_T = 1 / (1 + c (64 + 128) / (64 128))
    rate, c = 1e13, 4.0
    params = {**FLAT, "c_issue": c}
    t, tile = kernels.simt_gemm_time_s(1024, 1024, 1024, 1, 80, 1.0, rate, 1e9, NO_DRAM, params,
                                       with_tile=True, ran_tile=(64.0, 128.0))
    assert int(tile) == -1
    assert float(t) == pytest.approx(2 * 2 * 64 * 128 * 1024 / (rate / 80)
                                     * (1 + c * 192 / (64 * 128)))
    # no tile named (0): the fastest candidate, as without ran_tile
    free = kernels.simt_gemm_time_s(1024, 1024, 1024, 1, 80, 1.0, rate, 1e9, NO_DRAM, params)
    zero = kernels.simt_gemm_time_s(1024, 1024, 1024, 1, 80, 1.0, rate, 1e9, NO_DRAM, params,
                                    ran_tile=(0.0, 0.0))
    assert float(zero) == float(free) < float(t)


def test_rho_by_op_is_for_cublas_products_only() -> None:
    params = {"choice_bmm": 1.2, "choice_linear": 1.1}
    ops = ["aten::bmm", "addmm", "aten::mm", "_scaled_dot_product_efficient_attention",
           "aten::convolution"]
    assert kernels.library_choice(params, ops).tolist() == [1.2, 1.1, 1.1, 1.0, 1.0]
    assert kernels.library_choice({}, ops).tolist() == [1.0] * 5     # a fit without names


def test_read_kernels_takes_the_tiles_and_the_held_out_gpu_goes_without(tmp_path: Path) -> None:
    cat = load_catalog()
    header = "OPName,Latency,Device,Kernel Name,B,M,N,K"
    _write(tmp_path / "linear" / "v.csv.gz", header,
           ["linear,1.0,Tesla V100-PCIE-32GB,volta_sgemm_128x64_tn,1,512,512,512",
            "linear,1.0,Tesla V100-PCIE-32GB,,1,512,512,512"])
    _write(tmp_path / "bmm" / "v.csv.gz", "OPName,Latency,Device,B,M,N,K",
           ["bmm,1.0,Tesla V100-PCIE-32GB,2,64,64,64"])       # no Kernel Name column
    data = kernel_fit.read_kernels(tmp_path, cat)
    by_fam = {f: (data.shape["tile_m"][data.family == f].tolist(),
                  data.shape["tile_n"][data.family == f].tolist()) for f in ("linear", "bmm")}
    assert by_fam == {"linear": ([64.0, 0.0], [128.0, 0.0]), "bmm": ([0.0], [0.0])}
    held = kernel_fit.unnamed(data)
    assert not held.shape["tile_m"].any() and not held.shape["tile_n"].any()
    assert held.shape["M"].tolist() == data.shape["M"].tolist()


def test_each_measured_file_is_sniffed_once_to_read_its_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # DuckDB's read_csv relation sniffs a file three times before it reads it: the reader runs
    # sniff_csv once per file and reads with what it found (the header check's own sniff is
    # cached by traincast.trace.adapters.base, done here first)
    import duckdb

    from traincast.trace.adapters.base import duplicate_columns

    header = "OPName,Latency,Device,Kernel Name,B,M,N,K"
    _write(tmp_path / "linear" / "v.csv.gz", header,
           ['linear,1.5,Tesla V100-PCIE-32GB,"volta_sgemm_128x64_tn, x",1,512,512,512'])
    _write(tmp_path / "bmm" / "v.csv.gz", header,
           ["bmm,2.5,Tesla V100-PCIE-32GB,,2,64,64,64", "bmm,3.5,Tesla V100-PCIE-32GB,,2,8,8,8"])
    files = sorted(tmp_path.glob("*/*.csv.gz"))
    for path in files:
        duplicate_columns(path)
    sniffed: list[str] = []
    relations: list[object] = []
    connect = duckdb.connect

    class Counting:
        def __init__(self) -> None:
            self.con = connect()

        def execute(self, query: str, *args: object) -> object:
            if "sniff_csv(" in query:
                sniffed.append(query)
            return self.con.execute(query, *args)

        def read_csv(self, path: object, **kwargs: object) -> object:
            relations.append(path)
            return self.con.read_csv(path, **kwargs)

        def __getattr__(self, name: str) -> object:
            return getattr(self.con, name)

    monkeypatch.setattr(duckdb, "connect", Counting)
    data = kernel_fit.read_kernels(tmp_path, load_catalog())
    assert relations == []
    assert sorted(p for p in files for q in sniffed if f"'{p}'" in q) == files
    assert len(sniffed) == len(files)
    assert data.family.tolist() == ["linear", "bmm", "bmm"]
    assert data.latency_s.tolist() == pytest.approx([1.5e-3, 2.5e-3, 3.5e-3])
    assert data.shape["tile_n"].tolist() == [128.0, 0.0, 0.0]


def test_a_row_is_priced_as_it_was_timed() -> None:
    # a native kernel overlaps its dispatch: max(d r, t); a library call waits for phi d r
    d, t = np.array([30e-6, 30e-6]), np.array([10e-6, 100e-6])
    assert kernel_fit.measured_s(d, t, 0.0).tolist() == pytest.approx([30e-6, 100e-6])
    assert kernel_fit.measured_s(d, t, 0.5).tolist() == pytest.approx([30e-6, 115e-6])


def test_bad_rows_name_file_row_and_field(tmp_path: Path) -> None:
    cat = load_catalog()
    _write(tmp_path / "add" / "x.csv.gz", "OPName,Latency,Device,B,H",
           ["add,0.03,Tesla T4,4,4", "add,nan,Tesla T4,4,4"])
    with pytest.raises(TraincastError, match=r"x\.csv\.gz: row 2: field 'Latency'"):
        kernel_fit.read_kernels(tmp_path, cat)
    _write(tmp_path / "add" / "x.csv.gz", "OPName,Latency,Device,B,H",
           ["add,0.03,Tesla T4,4,4", "add,0.03,Tesla Z9,4,4"])
    with pytest.raises(TraincastError, match=r"x\.csv\.gz: row 2: field 'Device' = 'Tesla Z9' "
                                             r"is no catalog GPU"):
        kernel_fit.read_kernels(tmp_path, cat)
    _write(tmp_path / "add" / "x.csv.gz", "OPName,Latency,B,H", ["add,0.03,4,4"])
    with pytest.raises(TraincastError, match="missing column.*Device"):
        kernel_fit.read_kernels(tmp_path, cat)
    with pytest.raises(TraincastError, match="no such folder"):
        kernel_fit.read_kernels(tmp_path / "none", cat)


@pytest.mark.parametrize(("folder", "header", "row", "read", "refused", "says"), [
    ("linear", "OPName,Latency,Device,B,M,N,K", "linear,{},Tesla T4,1,4096,4096,4096", "1.1",
     "1.0", r"137\.4 TFLOP/s, more than 2x the peak"),
    ("add", "OPName,Latency,Device,B,H", "add,{},Tesla T4,100000000,4", "1.6", "1.4",
     r"3,429 GB/s, more than 10x the memory")])
def test_the_kernel_refusal_holds_at_its_bounds(tmp_path: Path, folder: str, header: str,
                                                row: str, read: str, refused: str,
                                                says: str) -> None:
    # a 4096-cube product is 1.374e11 FLOPs, 1.057 ms at 2 x 65 TFLOP/s (1.1 ms, 125 TFLOP/s,
    # read; 1.0 ms, 137, refused); the add's 4.8 GB take 1.5 ms at 10 x 320 GB/s (1.6 ms,
    # 3,000 GB/s, read; 1.4 ms, 3,429, refused)
    cat = load_catalog()
    _write(tmp_path / folder / "t.csv.gz", header, [row.format(read)])
    assert len(kernel_fit.read_kernels(tmp_path, cat)) == 1
    _write(tmp_path / folder / "t.csv.gz", header, [row.format(refused)])
    with pytest.raises(TraincastError, match=says):
        kernel_fit.read_kernels(tmp_path, cat)


def test_a_row_faster_than_its_gpu_can_run_is_refused(tmp_path: Path) -> None:
    """A T4 (65 TFLOP/s fp16, its largest peak; 320 GB/s): a 100,000-cube product in 0.05 ms is
    2e15 / 5e-5 = 4e19 FLOP/s, far above 2 x 65 TFLOP/s; an add of 1e8 x 4 elements, 12 bytes
    each, in 0.1 ms is 48 TB/s, above 10 x 320 GB/s. The same shapes at a plausible time
    (100 s; 30 ms) are read."""
    cat = load_catalog()
    t4 = cat.gpu("T4")
    assert max(t4.fp32_tflops, t4.fp16_tflops) == pytest.approx(65.0)
    header = "OPName,Latency,Device,B,M,N,K"
    _write(tmp_path / "linear" / "t.csv.gz", header,
           ["linear,0.03,Tesla T4,1,17,16,48", "linear,0.05,Tesla T4,1,100000,100000,100000"])
    with pytest.raises(TraincastError, match=r"t\.csv\.gz: row 2: field 'Latency' = 0\.05 ms is "
                       r"too short for the row's shape on T4: 4e\+07 TFLOP/s, more than 2x the "
                       r"peak its catalog entry allows \(65 TFLOP/s\)"):
        kernel_fit.read_kernels(tmp_path, cat)
    _write(tmp_path / "linear" / "t.csv.gz", header,
           ["linear,0.03,Tesla T4,1,17,16,48", "linear,1e5,Tesla T4,1,100000,100000,100000"])
    assert len(kernel_fit.read_kernels(tmp_path, cat)) == 2
    _write(tmp_path / "add" / "t.csv.gz", "OPName,Latency,Device,B,H",
           ["add,0.1,Tesla T4,100000000,4"])
    with pytest.raises(TraincastError, match=r"row 1: field 'Latency' = 0\.1 ms .* 4\.8e\+04 "
                                             r"GB/s, more than 10x the memory bandwidth"):
        kernel_fit.read_kernels(tmp_path, cat)
    _write(tmp_path / "add" / "t.csv.gz", "OPName,Latency,Device,B,H",
           ["add,30,Tesla T4,100000000,4"])
    assert len(kernel_fit.read_kernels(tmp_path, cat)) == 3
    # a P4 convolution of 2 x 3136 x 64 x 576 = 231,211,008 direct-convolution FLOPs: at 9.3
    # TFLOP/s (0.0249 ms: Winograd's, 1.7 x the P4's 5.5 fp32 peak) read; at 0.00231 ms, 100
    # TFLOP/s, above 2 x 4 x 5.5 = 44
    p4 = cat.gpu("P4")
    assert max(p4.fp32_tflops, p4.tf32_tflops, p4.fp16_tflops, p4.bf16_tflops) == \
        pytest.approx(5.5)
    conv = "OPName,Latency,Device,B,Input_Channel,Output_Channel,Kernel_Szie,Input_Size,Stride,"\
        "Padding"
    _write(tmp_path / "conv" / "p.csv.gz", conv, ["conv,0.0249,Tesla P4,1,64,64,3,56,1,1"])
    assert len(kernel_fit.read_kernels(tmp_path, cat)) == 4
    _write(tmp_path / "conv" / "p.csv.gz", conv, ["conv,0.00231,Tesla P4,1,64,64,3,56,1,1"])
    with pytest.raises(TraincastError, match=r"on P4: 100.1 TFLOP/s, more than 2x the peak its "
                                             r"catalog entry allows \(22 TFLOP/s\)"):
        kernel_fit.read_kernels(tmp_path, cat)


def test_measure_script_output_is_read_by_the_fit(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "k"
    done = subprocess.run([sys.executable, str(ROOT / "scripts/measure_kernels.py"), str(out),
                           "--device", "cpu", "--rows", "3", "--scale", "0.01",
                           "--families", "linear,bmm,add,ln"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # bf16 rows and attention rows carry their dtype, backend and pass; the fit refuses bf16
    extra = subprocess.run([sys.executable, str(ROOT / "scripts/measure_kernels.py"),
                            str(tmp_path / "k16"), "--device", "cpu", "--rows", "1", "--scale",
                            "0.01", "--families", "linear,sdpa", "--dtype", "bf16"],
                           capture_output=True, text=True, timeout=300)
    assert extra.returncode == 0, extra.stderr
    sdpa = (tmp_path / "k16" / "sdpa" / "cpu.csv").read_text().splitlines()
    assert sdpa[0].split(",")[4:] == ["B", "H", "KV_H", "S", "D", "Causal", "Backend", "Pass",
                                      "Dtype"]
    assert {(r.split(",")[10], r.split(",")[11]) for r in sdpa[1:]} >= {("default", "fwd"),
                                                                         ("default", "fwdbwd")}
    assert (tmp_path / "k16" / "linear" / "cpu.csv").read_text().splitlines()[1].endswith(",bf16")
    # asked for fp32, attention runs (and says) bf16: no fp32 fused kernel
    fp32 = subprocess.run([sys.executable, str(ROOT / "scripts/measure_kernels.py"),
                           str(tmp_path / "k32"), "--device", "cpu", "--rows", "1", "--scale",
                           "0.01", "--families", "sdpa"], capture_output=True, text=True,
                          timeout=300)
    assert fp32.returncode == 0, fp32.stderr
    lines = (tmp_path / "k32" / "sdpa" / "cpu.csv").read_text().splitlines()
    assert lines[0].endswith(",Dtype") and all(r.endswith(",bf16") for r in lines[1:])
    cat = load_catalog()
    with pytest.raises(TraincastError, match="'cpu' is no catalog GPU"):
        kernel_fit.read_kernels(out, cat)
    user = tmp_path / "cpu.toml"
    user.write_text('[alias]\ncpu = "T4"\n')
    data = kernel_fit.read_kernels(out, load_catalog([user]))
    assert len(data) == 12 and set(data.family.tolist()) == {"linear", "bmm", "add", "ln"}
    assert (data.latency_s > 0).all() and np.isfinite(data.shape["M"][data.family == "bmm"]).all()


def test_measure_script_fp8_linear_and_given_shapes(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = str(ROOT / "scripts/measure_kernels.py")
    shapes = tmp_path / "shapes.csv"
    # a model's products, not random ones; fp8 rounds every size but B up to a multiple of 16
    shapes.write_text("B,M,N,K\n1,64,32,48\n1,5,7,33\n")
    done = subprocess.run([sys.executable, script, str(tmp_path / "f8"), "--device", "cpu",
                           "--families", "linear", "--dtype", "fp8", "--shapes", str(shapes)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "f8" / "linear" / "cpu.csv").read_text().splitlines()
    assert lines[0] == "OPName,Latency,Device,Kernel Name,B,M,N,K,Dtype"
    assert [r.split(",")[4:] for r in lines[1:]] == [["1", "64", "32", "48", "fp8"],
                                                      ["1", "16", "16", "48", "fp8"]]
    assert all(float(r.split(",")[1]) > 0 for r in lines[1:])
    # the same shapes in bf16 are measured as given
    bf16 = subprocess.run([sys.executable, script, str(tmp_path / "b"), "--device", "cpu",
                           "--families", "linear", "--dtype", "bf16", "--shapes", str(shapes)],
                          capture_output=True, text=True, timeout=300)
    assert bf16.returncode == 0, bf16.stderr
    rows = (tmp_path / "b" / "linear" / "cpu.csv").read_text().splitlines()[1:]
    assert [r.split(",")[4:8] for r in rows] == [["1", "64", "32", "48"], ["1", "5", "7", "33"]]
    # fp8 is for the linear family only; a shape file's bad field is named with its line
    bmm = subprocess.run([sys.executable, script, str(tmp_path / "x"), "--device", "cpu",
                          "--families", "bmm", "--dtype", "fp8", "--rows", "1"],
                         capture_output=True, text=True, timeout=300)
    assert bmm.returncode != 0 and "--dtype fp8 measures the linear family only" in bmm.stderr
    shapes.write_text("B,M,N,K\n1,64,32,48\n1,5,seven,33\n")
    bad = subprocess.run([sys.executable, script, str(tmp_path / "y"), "--device", "cpu",
                          "--families", "linear", "--shapes", str(shapes)],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "shapes.csv: line 3: field 'N' = 'seven'" in bad.stderr
    # an attention shape file gives the shape columns alone: every backend and pass is measured
    attn = tmp_path / "attn.csv"
    attn.write_text("B,H,KV_H,S,D,Causal\n1,2,1,16,8,1\n")
    sdpa = subprocess.run([sys.executable, script, str(tmp_path / "s"), "--device", "cpu",
                           "--families", "sdpa", "--shapes", str(attn)],
                          capture_output=True, text=True, timeout=300)
    assert sdpa.returncode == 0, sdpa.stderr
    rows = (tmp_path / "s" / "sdpa" / "cpu.csv").read_text().splitlines()[1:]
    assert {tuple(r.split(",")[4:10]) for r in rows} == {("1", "2", "1", "16", "8", "1")}
    assert {(r.split(",")[10], r.split(",")[11]) for r in rows} >= {("default", "fwdbwd")}
    shapes.write_text("B,M,N\n1,2,3\n")
    short = subprocess.run([sys.executable, script, str(tmp_path / "z"), "--device", "cpu",
                            "--families", "linear", "--shapes", str(shapes)],
                           capture_output=True, text=True, timeout=300)
    assert short.returncode != 0 and "no column K" in short.stderr


def test_shipped_fit_names_its_source_and_command() -> None:
    model = load_catalog().kernel_model
    assert "calibrate --kernels" in model["command"]
    # the data set by its name (its README's title), the folder only in the command
    assert "measured kernels; data: Measured GPU kernels: NeuSight's training set" \
        in model["source"] and "shared" not in model["source"]
    assert set(kernels.FITTED_KEYS) <= set(model["params"])
    assert {"P4", "T4", "V100-PCIE-32GB", "A100-PCIE-40GB"} <= set(model["floors_us"])
    assert {"dispatch_linear", "dispatch_bmm", "dispatch_ln", "dispatch_elementwise"} \
        <= set(model["params"])


def test_a_fit_names_its_folder_by_its_readme_title(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("intro\n# My lab's kernels (A100, 2026)\nmore\n")
    assert kernel_fit.data_title(tmp_path) == "My lab's kernels (A100, 2026)"
    assert kernel_fit.data_title(tmp_path / "none") == ""
    result = {"rows": 12, "gpus": ["A100-PCIE-40GB"], "params": {}, "floors_us": {},
              "default_floor_us": 20.0}
    doc = kernel_fit.fit_document(result, [tmp_path, tmp_path / "none"], "traincast ...")
    assert doc["kernel_model"]["source"].startswith(
        "fitted to 12 measured kernels; data: My lab's kernels (A100, 2026); a folder named "
        "none; GPUs: A100-PCIE-40GB; docs/model.md")


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data/neusight-kernels not present")
def test_leave_one_gpu_out_on_a_small_subset(tmp_path: Path) -> None:
    pytest.importorskip("scipy")
    runner = CliRunner()
    res = runner.invoke(app, ["validate", "--kernels", str(DATA), "--sample", "150", "--json"])
    assert res.exit_code == 0, res.output
    import json

    out = json.loads(res.stdout[res.stdout.index("{"):])
    assert set(out["gpus"]) == {"P4", "T4", "P100-PCIE-16GB", "V100-PCIE-32GB",
                                "A100-PCIE-40GB", "A100-PCIE-80GB"}
    for row in out["gpus"].values():
        assert math.isfinite(row["sum"])
    # fitted on the others, memory-bound kernels of every GPU within the 15% target at the median
    assert all(r["memory_median"] < 0.15 for g, r in out["gpus"].items() if "memory_median" in r)


H200 = ROOT / "data" / "h200" / "kernels"


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data/neusight-kernels not present")
def test_a_gpu_no_fit_has_seen_is_priced_from_its_datasheet(tmp_path: Path) -> None:
    # fitted on the five NeuSight GPUs (2016-2020), the H200 measured here (data/h200, 2024
    # Hopper) is priced from its catalog entry: the leave-one-GPU-out row of the pooled folders
    pytest.importorskip("scipy")
    import json

    res = CliRunner().invoke(app, ["validate", "--kernels", str(DATA), "--kernels", str(H200),
                                   "--sample", "600", "--json"])
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout[res.stdout.index("{"):])["gpus"]["H200-SXM-141GB"]
    assert row["gemm_n"] == 1200 and row["memory_n"] == 3600
    # docs/validation.md, on every row: 14.8% GEMM, 16.5% memory-bound (a sample moves them by
    # a few points); the sum (-4.0%) rests on a few seconds-long rows a sample may leave out
    # (bench_kernels checks it on all rows)
    assert row["gemm_median"] < 0.20 and row["memory_median"] < 0.22


def test_predicted_utilization_is_busy_over_step() -> None:
    # one 400 MB add on a B200 (busy = 4e8 / (M f_elementwise)) and ten 12-byte adds (each
    # busy 12 / (M f), issued by the host in d each): the host issues the eleven adds back to
    # back (11 d, longer than the big add), the last one runs after its issue, so
    # step = 11 d + 12 / (M f); utilization = busy / step, by hand
    from traincast import predict

    cat = load_catalog()
    gpu = cat.gpu("B200")
    bw, f = gpu.mem_bw_gbs * 1e9, gpu.kernel["f_elementwise"]
    d = kernels.op_floor_s(gpu) * gpu.kernel["dispatch_add"]  # an add's floor
    big = {"op": "aten::add", "flops": 0, "bytes_read": 2.6e8, "bytes_written": 1.4e8,
           "dtype": "float32", "shapes": "1;1", "bound": "memory"}
    tiny = dict(big, bytes_read=8, bytes_written=4, count=10)
    r = predict({"ops": [big, tiny], "flops_compute_bound": 0.0, "bytes_memory_bound": 4e8 + 120,
                 "weight_bytes": 0.0, "input_bytes": 0.0}, gpu="B200", node="dgx-b200",
                catalog=cat)
    busy = 4e8 / (bw * f) + 10 * 12 / (bw * f)
    assert 11 * d > 4e8 / (bw * f)
    step = 11 * d + 12 / (bw * f)
    assert r.time_s["compute_mem"] == pytest.approx(step)
    assert r.gpu_util == pytest.approx(busy / step)
    assert r.gpu_util < 0.99


def test_an_op_takes_the_dispatch_ratio_of_its_kind() -> None:
    # d r_x by hand: the GPU's floor times the ratio the op's kind was fitted with
    gpu = load_catalog().gpu("T4")
    k, d = gpu.kernel, kernels.op_floor_s(gpu)
    ops = [{"op": "aten::addmm"}, {"op": "aten::mm"}, {"op": "aten::gelu_backward"},
           {"op": "aten::native_layer_norm"}, {"op": "aten::convolution"},
           {"op": "aten::_softmax_backward_data"}, {"op": "aten::sigmoid"}]
    want = [k["dispatch_linear"], k["dispatch_bmm"], k["dispatch_gelu"], k["dispatch_ln"],
            k["dispatch_linear"], k["dispatch_softmax"], k["dispatch_elementwise"]]
    assert kernels.op_floors_s(ops, gpu).tolist() == pytest.approx([d * r for r in want])
    # a LayerNorm costs the host more than an add, a linear layer more than a batched product
    assert k["dispatch_ln"] > k["dispatch_add"] and k["dispatch_linear"] > k["dispatch_bmm"]
    # a GPU without fitted ratios: every op at the plain floor
    bare = type("G", (), {"kernel": {}, "kernel_launch_us": 5.0})()
    assert kernels.op_floors_s(ops, bare).tolist() == pytest.approx([5e-6] * len(ops))


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data/neusight-kernels not present")
def test_the_shipped_fit_is_what_its_command_makes(tmp_path: Path) -> None:
    # the command the shipped file names, run again on the same folder, writes the same tables
    pytest.importorskip("scipy")
    import tomllib

    shipped = tomllib.loads((ROOT / "src/traincast/hardware/kernel_model.toml").read_text())
    out = tmp_path / "fit.toml"
    res = CliRunner().invoke(app, ["--quiet", "calibrate", "--kernels", str(DATA), "--check",
                                   str(ROOT / "data" / "h200" / "kernels"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    fresh = tomllib.loads(out.read_text())["kernel_model"]
    model = shipped["kernel_model"]
    assert "--check data/h200/kernels" in model["command"]
    # the closed-form figures (floors, dispatch ratios, memory-bound fractions): equal to the
    # file's 6 significant digits
    closed = [k for k in model["params"] if k.startswith(("dispatch_", "f_"))]
    assert len(closed) >= 18
    assert {k: fresh["params"][k] for k in closed} == pytest.approx(
        {k: model["params"][k] for k in closed}, rel=1e-5)
    assert fresh["params"].keys() == model["params"].keys()
    assert fresh["floors_us"] == pytest.approx(model["floors_us"], rel=1e-5)
    assert fresh["default_floor_us"] == pytest.approx(model["default_floor_us"], rel=1e-5)
    assert fresh["fitted_on"] == model["fitted_on"]
    # and each GPU's errors when it was held out (6 GPUs, A100 40 and 80 GB as one chip), and
    # the H200's, which no fit sees
    assert set(fresh["held_out"]) == {*model["fitted_on"], "H200-SXM-141GB"}
    assert set(fresh["held_out_uncalibrated"]) == set(fresh["held_out"])
    for table in ("held_out", "held_out_uncalibrated"):
        for gpu, row in model[table].items():
            assert fresh[table][gpu] == pytest.approx(row, abs=2e-3), (table, gpu)
    # the searched figures: least squares stops at a nearby point under another numpy or scipy
    # (parameters the rows hardly pin, as the split-K limit, can move); the prices cannot: every
    # measured row priced with either set, p99 within 1% per family, the sum within 0.1%
    data = kernel_fit.read_kernels(DATA, load_catalog())
    spec = kernel_fit.specs_of(data.gpu, load_catalog())

    def priced(m: dict) -> np.ndarray:
        ratios = {k.removeprefix("dispatch_"): v for k, v in m["params"].items()
                  if k.startswith("dispatch_")}
        floor = kernel_fit._floor_col(data, m["floors_us"], m["default_floor_us"], ratios)
        return kernel_fit.predict_kernel_s(data, spec, m["params"], floor)

    ours, theirs = priced(fresh), priced(model)
    off = np.abs(ours / theirs - 1.0)
    for fam in set(data.family.tolist()):
        assert np.quantile(off[data.family == fam], 0.99) <= 0.01, fam
    assert ours.sum() == pytest.approx(theirs.sum(), rel=1e-3)


def test_a_calibrated_cuda_host_gives_every_gpu_its_dispatch_floor(tmp_path: Path) -> None:
    # `traincast calibrate` on a CUDA machine: the one-element add timed alone between CUDA
    # events takes 12 µs (back to back 5 µs): that host's floor d for every GPU of the merged
    # catalog, the measured ones too (whose data hosts took 26.3-45.2 µs); on the CPU, or
    # without the lone timing, no floor is written
    import tomli_w

    from traincast.calibration import _dotted, host_floor_table
    from traincast.compute import basis

    res = {"device": "cuda:0", "device_name": "NVIDIA H100 80GB HBM3", "torch": "2.13.0",
           "date": "2026-12-04",
           "op_overhead": {"plain_op_s": 5e-6, "alone_op_s": 12e-6, "alone_op_calls": 150}}
    assert host_floor_table(dict(res, device="cpu")) == {}
    assert host_floor_table(dict(res, op_overhead={"plain_op_s": 5e-6})) == {}
    source = host_floor_table(res)["kernel_model"]["host_floor_source"]
    assert "timed alone" in source and "median of 150 calls, 12.0 µs" in source
    path = tmp_path / "local.toml"
    path.write_text(tomli_w.dumps(_dotted(host_floor_table(res))))
    shipped, mine = load_catalog(), load_catalog(path)
    for name in ("A100-PCIE-40GB", "H100-SXM5-80GB", "T4"):
        assert kernels.op_floor_s(mine.gpu(name)) == pytest.approx(12e-6)
        assert kernels.op_floor_s(shipped.gpu(name)) > 20e-6
        assert "NVIDIA H100 80GB HBM3" in basis(mine.gpu(name))["inputs"]["per-op floor"]
    # the fitted dispatch ratios stay: a linear layer costs this host 12 µs x r_linear
    gpu = mine.gpu("H100-SXM5-80GB")
    assert kernels.op_floors_s([{"op": "aten::addmm"}], gpu)[0] == pytest.approx(
        12e-6 * gpu.kernel["dispatch_linear"])
    bad = tmp_path / "bad.toml"
    bad.write_text("[kernel_model]\nhost_floor_us = -1\n")
    with pytest.raises(TraincastError, match="host_floor_us"):
        load_catalog(bad)


def test_a_parameter_left_on_the_edge_of_its_range_is_named() -> None:
    # extra_kernel_us at its upper edge (1000 µs) and simt_efficiency at its lower one (0.3):
    # named; a fixed cost of 0 is an answer, and interior values are not named
    params = {**kernel_fit.START, "extra_kernel_us": 999.9, "simt_efficiency": 0.3,
              "gemm_fixed_us": 0.0}
    assert kernel_fit.at_bound(params) == ["simt_efficiency", "extra_kernel_us"]
    assert kernel_fit.at_bound(kernel_fit.START) == []


def test_leave_one_gpu_out_of_one_gpu_is_refused() -> None:
    # one GPU's rows leave nothing to fit on: an error naming the GPU, not a fit of no rows
    data = kernel_fit.Kernels(np.array(["add"], dtype=object), np.array(["T4"], dtype=object),
                              np.array([3e-5]), {"B": np.array([1.0]), "H": np.array([1.0])})
    with pytest.raises(TraincastError, match="two GPUs at least; these rows are of T4 alone"):
        kernel_fit.leave_one_gpu_out(data, load_catalog())


def test_held_out_range_and_trust_by_hand() -> None:
    # two GPUs held out in turn: each error's lowest and highest over the GPUs that have it.
    # Any GPU, measured or not, on an uncalibrated catalog reads the uncalibrated record
    # (predictions take the median host floor for every GPU); on a catalog with a host's floor
    # and dispatch ratios, the record with each GPU's own host. The sentence quotes products
    # and memory-bound kernels (a mixed-precision job: memory-bound only), never convolutions
    # (priced on the datasheet path)
    from traincast.cli.common import held_out_text, trust_text

    held = {"A": {"gemm_median": 0.1, "conv_median": 0.4, "sum": -0.5},
            "B": {"gemm_median": 0.3, "memory_median": 0.05, "sum": 0.02}}
    ranges = kernels.held_out_range(held)
    assert ranges == {"conv_median": [0.4, 0.4], "gemm_median": [0.1, 0.3],
                      "memory_median": [0.05, 0.05], "sum": [-0.5, 0.02]}
    worse = {g: {k: 2 * v for k, v in row.items()} for g, row in held.items()}
    model = {"fitted_on": ["A", "B"], "held_out": held, "held_out_uncalibrated": worse}
    mine = kernels.fit_trust(model, "A")
    doubled = {k: [2 * lo, 2 * hi] for k, (lo, hi) in ranges.items()}  # every error twice
    assert mine == {"measured": True, "calibrated": False, "record": "held_out_uncalibrated",
                    "own": worse["A"], "held_out_range": doubled}
    other = kernels.fit_trust(model, "Z")
    assert other["measured"] is other["calibrated"] is False and other["own"] is None
    assert other["held_out_range"] == kernels.held_out_range(worse)
    text = trust_text("Z", other)
    assert "Z is not among" in text and "products 20.0% to 60.0%" in text
    assert "fit's median host floor and dispatch ratios (traincast calibrate" in text
    assert "memory-bound kernels 10.0% (docs" in text and "convolutions" not in text
    assert "summed" not in text  # over every kernel, convolutions too: not the per-op path's
    assert "products" not in trust_text("Z", other, amp=True)
    # calibrate's own line keeps every family and the sum
    assert held_out_text(ranges) == ("products 10.0% to 30.0%, memory-bound kernels 5.0%, "
                                     "convolutions 40.0%, the summed time of all its kernels "
                                     "-50.0% to +2.0%")
    floor_only = kernels.fit_trust({**model, "host_floor_us": 12.0}, "Z")
    assert floor_only["record"] == "held_out_uncalibrated"  # an older file: no ratios
    here = kernels.fit_trust({**model, "host_floor_us": 12.0, "host_dispatch_kinds": ["add"]},
                             "Z")
    assert here["calibrated"] is True and here["held_out_range"] == ranges
    assert "priced with its host's own floor and dispatch ratios, had a median |error| of " \
        "products 10.0% to 30.0%" in trust_text("Z", here)
    assert "held out of a fit on the other GPUs and priced with the fit's median host floor " \
        "and dispatch ratios (traincast calibrate on a CUDA host measures its own), its median " \
        "|error| was products 20.0% (docs" in trust_text("A", mine)
    assert trust_text("Z", kernels.fit_trust({}, "Z")).endswith("fitted to.")


def test_a_catalog_held_out_table_must_hold_numbers(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text('[kernel_model.held_out.A100-PCIE-40GB]\ngemm_median = 0.5\nsum = -0.25\n'
                    '[kernel_model.held_out_uncalibrated.T4]\nmemory_median = 0.1\n')
    model = load_catalog(good).kernel_model
    assert model["held_out"]["A100-PCIE-40GB"] == {"gemm_median": 0.5, "sum": -0.25}
    assert model["held_out_uncalibrated"] == {"T4": {"memory_median": 0.1}}
    # a fit of its own (fitted_on) without a held-out record: the shipped fit's record is not
    # its own, and goes; a file of a host's floor alone keeps it
    mine = tmp_path / "mine.toml"
    mine.write_text('[kernel_model]\nfitted_on = ["H200-SXM-141GB"]\n'
                    '[kernel_model.params]\nsimt_efficiency = 0.9\n')
    assert "held_out" not in load_catalog(mine).kernel_model
    assert "held_out_uncalibrated" not in load_catalog(mine).kernel_model
    host = tmp_path / "host.toml"
    host.write_text("[kernel_model]\nhost_floor_us = 12.0\n")
    assert load_catalog(host).kernel_model["held_out"] == load_catalog().kernel_model["held_out"]
    # GPUs as devices name them are the catalog's names; one record replaces both; an unknown
    # GPU or a fitted_on that is not a list is an error naming the table
    named = tmp_path / "named.toml"
    named.write_text('[kernel_model]\nfitted_on = ["Tesla T4"]\n'
                     '[kernel_model.held_out."NVIDIA A100-PCIE-40GB"]\nsum = 0.1\n')
    model = load_catalog(named).kernel_model
    assert model["fitted_on"] == ["T4"] and model["held_out"] == {"A100-PCIE-40GB": {"sum": 0.1}}
    assert "held_out_uncalibrated" not in model
    assert kernels.fit_trust(model, "T4")["measured"] is True
    for text, field in (('[kernel_model]\nfitted_on = "T4"\n', "fitted_on"),
                        ('[kernel_model.held_out.NoSuchGPU]\nsum = 0.1\n', "held_out"),
                        ('[kernel_model.held_out.T4]\nsum = 0.1\n'
                         '[kernel_model.held_out."Tesla T4"]\nsum = 0.9\n', "T4 named twice")):
        bad = tmp_path / "bad2.toml"
        bad.write_text(text)
        with pytest.raises(TraincastError, match=field):
            load_catalog(bad)
    for text in ('[kernel_model]\nheld_out = 3\n',
                 '[kernel_model.held_out.T4]\ngemm_median = "low"\n',
                 '[kernel_model.held_out.T4]\nsum = nan\n'):
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(TraincastError, match=r"bad\.toml.*held_out"):
            load_catalog(bad)


def test_predict_says_what_the_kernel_model_took_and_how_far_to_trust_it() -> None:
    # a per-op table on a GPU without measurements (L4) and on a measured one (T4): the
    # prediction carries the model's figures and the fit's held-out record
    from traincast import predict

    cat = load_catalog()
    op = {"op": "aten::addmm", "flops": 2 * 512**3, "bytes_read": 3 * 4 * 512**2,
          "bytes_written": 4 * 512**2, "dtype": "float32", "shapes": "512;512x512;512x512",
          "bound": "compute"}
    feats = {"ops": [op], "flops_compute_bound": 2 * 512**3, "bytes_memory_bound": 0.0,
             "weight_bytes": 0.0, "input_bytes": 0.0}
    km = predict(feats, gpu="L4", catalog=cat).hardware["kernel_model"]
    p = 72 / (58 * 128 * 2.040 * 4)
    assert km["clock_fraction"] == pytest.approx(p / cat.kernel_model["params"]["power_ref"])
    assert km["measured"] is km["calibrated"] is False and km["own"] is None
    gemm = [row["gemm_median"] for row in cat.kernel_model["held_out_uncalibrated"].values()
            if "gemm_median" in row]
    assert km["held_out_range"]["gemm_median"] == [min(gemm), max(gemm)]
    t4 = predict(feats, gpu="T4", catalog=cat).hardware["kernel_model"]
    # a measured GPU is priced with the median host floor too: its uncalibrated record
    assert t4["measured"] is True
    assert t4["own"] == cat.kernel_model["held_out_uncalibrated"]["T4"]
    # aggregate features only: nothing was priced by the measured-kernel model
    plain = {k: v for k, v in feats.items() if k != "ops"}
    assert "kernel_model" not in predict(plain, gpu="L4", catalog=cat).hardware


def test_check_folders_are_gpus_the_fit_does_not_see(tmp_path: Path) -> None:
    # --check needs --kernels; a GPU with kernels in both is refused before any fit, and
    # nothing is written
    _write(tmp_path / "a" / "add" / "t.csv.gz", "OPName,Latency,Device,Kernel Name,B,H",
           ["add,0.03,Tesla T4,x,1,1"])
    _write(tmp_path / "b" / "add" / "t.csv.gz", "OPName,Latency,Device,Kernel Name,B,H",
           ["add,0.02,Tesla T4,x,2,1"])
    out = tmp_path / "fit.toml"
    res = CliRunner().invoke(app, ["calibrate", "--check", str(tmp_path / "b"), "-o", str(out)])
    assert isinstance(res.exception, TraincastError)
    assert "--check needs --kernels" in str(res.exception)
    res = CliRunner().invoke(app, ["calibrate", "--kernels", str(tmp_path / "a"), "--check",
                                   str(tmp_path / "b"), "-o", str(out)])
    assert isinstance(res.exception, TraincastError)
    assert "kernels of T4, a chip --kernels also has kernels of" in str(res.exception)
    # one chip, two cards: an A100 80 GB checked against a fit of the 40 GB card is refused
    _write(tmp_path / "c" / "add" / "a.csv.gz", "OPName,Latency,Device,Kernel Name,B,H",
           ["add,0.02,NVIDIA A100-PCIE-40GB,x,1,1"])
    _write(tmp_path / "d" / "add" / "a.csv.gz", "OPName,Latency,Device,Kernel Name,B,H",
           ["add,0.02,NVIDIA A100 80GB PCIe,x,1,1"])
    res = CliRunner().invoke(app, ["calibrate", "--kernels", str(tmp_path / "c"), "--check",
                                   str(tmp_path / "d"), "-o", str(out)])
    assert isinstance(res.exception, TraincastError)
    assert "A100-PCIE-40GB and A100-PCIE-80GB" in str(res.exception)
    assert not out.exists()


def test_a_calibrated_cuda_host_gives_every_gpu_its_dispatch_ratios(tmp_path: Path) -> None:
    # the same host timed each kind's least-work op alone: add 12 µs, relu 9 µs, softmax 12 µs,
    # LayerNorm 21 µs, a linear layer 24 µs, bmm 18 µs, mul 12.6 µs. Its ratios r_x = t_x /
    # t_add: relu 0.75, ln 1.75, linear 2.0, bmm 1.5; element-wise median over add, mul, relu
    # (1.0, 1.05, 0.75) = 1.0. Every GPU of the merged catalog issues a linear layer in
    # 12 x 2.0 = 24 µs, a sigmoid (no kind of its own) in 12 x 1.0
    import tomli_w

    from traincast.calibration import _dotted, host_floor_table

    kinds = {"add": 12e-6, "mul": 12.6e-6, "relu": 9e-6, "softmax": 12e-6, "ln": 21e-6,
             "linear": 24e-6, "bmm": 18e-6}
    res = {"device": "cuda:0", "device_name": "NVIDIA H200", "torch": "2.11.0",
           "date": "2026-12-05", "op_overhead": {"plain_op_s": 5e-6, "alone_op_s": 12e-6,
                                                 "alone_op_calls": 200, "alone_kinds_s": kinds}}
    table = host_floor_table(res)["kernel_model"]
    assert table["params"] == pytest.approx({
        "dispatch_add": 1.0, "dispatch_mul": 1.05, "dispatch_relu": 0.75,
        "dispatch_softmax": 1.0, "dispatch_ln": 1.75, "dispatch_linear": 2.0,
        "dispatch_bmm": 1.5, "dispatch_elementwise": 1.0})
    assert "dispatch ratios of add, mul, relu, softmax, ln, linear, bmm" in \
        table["host_floor_source"]
    assert table["host_dispatch_kinds"] == list(kinds)  # the catalog's mark of a calibrated host
    path = tmp_path / "local.toml"
    path.write_text(tomli_w.dumps(_dotted(host_floor_table(res))))
    mine = load_catalog(path)
    for name in ("T4", "H200-SXM-141GB", "L4"):
        ops = [{"op": "aten::addmm"}, {"op": "aten::relu"}, {"op": "aten::sigmoid"},
               {"op": "aten::native_layer_norm"}]
        assert kernels.op_floors_s(ops, mine.gpu(name)).tolist() == pytest.approx(
            [24e-6, 9e-6, 12e-6, 21e-6])
    # the fit's other parameters stay the shipped ones
    assert mine.gpu("T4").kernel["simt_efficiency"] == load_catalog().gpu("T4").kernel[
        "simt_efficiency"]


def test_the_least_work_ops_calibrate_times_run_on_any_device() -> None:
    # the ops bench_op_alone times on CUDA, run here on the CPU: one per kind the fit gives a
    # dispatch ratio, each the least work of its kind (one output element)
    torch = pytest.importorskip("torch")
    from traincast.calibration.bench import tiny_ops

    ops = tiny_ops(torch.device("cpu"))
    assert tuple(ops) == kernel_fit.DISPATCH_FOLDERS
    for kind, op in ops.items():
        assert op().numel() == 1, kind


def test_a_held_out_host_takes_its_own_ratios_where_it_has_rows(tmp_path: Path) -> None:
    # a held-out T4 host: 40 adds of one element at 20 µs (its floor), 40 one-element relus at
    # 30 µs (ratio 1.5, over DISPATCH_MIN_ROWS = 20 rows), 5 LayerNorms at 60 µs (too few rows:
    # the fitted 1.8 stays); element-wise median over add 1.0 and relu 1.5, with the fitted
    # ratios of the kinds it lacks (gelu 1.2, tanh 1.0): median(1.0, 1.5, 1.2, 1.0) = 1.1
    head = "OPName,Latency,Device,Kernel Name,B,H"
    _write(tmp_path / "add" / "t.csv.gz", head, ["add,0.020,Tesla T4,x,1,1"] * 40)
    _write(tmp_path / "relu" / "t.csv.gz", head, ["relu,0.030,Tesla T4,x,1,1"] * 40)
    _write(tmp_path / "ln" / "t.csv.gz", head, ["ln,0.060,Tesla T4,x,1,1"] * 5)
    data = kernel_fit.read_kernels(tmp_path, load_catalog())
    fitted = {"add": 1.0, "relu": 1.2, "gelu": 1.2, "tanh": 1.0, "ln": 1.8, "elementwise": 1.2}
    floors, ratios = kernel_fit.host_dispatch(data, fitted)
    assert floors == {"T4": pytest.approx(20.0)}
    assert ratios == pytest.approx({"add": 1.0, "relu": 1.5, "gelu": 1.2, "tanh": 1.0,
                                    "ln": 1.8, "elementwise": 1.1})
    # no binary element-wise rows (no floor): the fitted ratios, unchanged
    only_ln = data.take(data.family == "ln")
    assert kernel_fit.host_dispatch(only_ln, fitted) == ({}, fitted)


def test_each_held_out_gpu_is_priced_with_its_own_host(tmp_path: Path) -> None:
    # two held-out GPUs on two hosts: T4 adds at 20 µs and relus at 40 µs (ratio 2.0), V100
    # adds at 30 µs and relus at 30 µs (ratio 1.0), all one element (the kernels take nothing).
    # Each priced with its own floor and ratio, every row is exact (0% error); pooled ratios
    # (1.5 for both) would put each GPU's relus 25% or 50% off
    head = "OPName,Latency,Device,Kernel Name,B,H"
    for dev, add_ms, relu_ms in (("Tesla T4", 0.020, 0.040),
                                 ("Tesla V100-PCIE-32GB", 0.030, 0.030)):
        tag = dev.split()[-1]
        _write(tmp_path / "add" / f"{tag}.csv.gz", head, [f"add,{add_ms},{dev},x,1,1"] * 40)
        _write(tmp_path / "relu" / f"{tag}.csv.gz", head, [f"relu,{relu_ms},{dev},x,1,1"] * 40)
    cat = load_catalog()
    held = kernel_fit.read_kernels(tmp_path, cat)
    result = {"params": cat.kernel_model["params"], "default_floor_us": 26.5}
    own, default = kernel_fit.held_out_errors(result, held, cat)
    for gpu in ("T4", "V100-PCIE-32GB"):
        assert own[gpu]["elementwise_median"] == pytest.approx(0.0, abs=1e-9), gpu
        assert own[gpu]["sum"] == pytest.approx(0.0, abs=1e-9), gpu
        assert default[gpu]["elementwise_median"] > 0.05, gpu  # the fit's floor and ratios


def test_a_cut_gzip_file_is_named_not_taken_for_ctrl_c(tmp_path: Path, tc) -> None:
    # a .csv.gz cut short: an error naming the file (exit 2), not "interrupted" (exit 130),
    # which click's Abort would say of the EOFError the gzip reader raises
    _write(tmp_path / "add" / "v.csv.gz", "OPName,Latency,Device,Kernel Name,B,H",
           [f"add,0.03,Tesla V100-PCIE-32GB,x,{b},1" for b in range(1, 400)])
    _write(tmp_path / "add" / "t.csv.gz", "OPName,Latency,Device,Kernel Name,B,H",
           [f"add,0.03,Tesla T4,x,{b},1" for b in range(1, 400)])
    cut = tmp_path / "add" / "t.csv.gz"
    cut.write_bytes(cut.read_bytes()[: len(cut.read_bytes()) // 2])
    r = tc("validate", "--kernels", str(tmp_path), "--sample", "50")
    assert r.returncode == 2, r.stderr
    assert "t.csv.gz" in r.stderr and "interrupted" not in r.stderr


def test_a_bad_row_is_named_at_its_line_under_a_sample(tmp_path: Path) -> None:
    # the 49th data row (row 49, as a trace's rows are numbered: line 50 of the file) has a
    # text latency; a reservoir sample that keeps it names it at its row, as the full read does
    rows = [f"add,0.03,Tesla T4,x,{b},1" for b in range(1, 80)]
    rows[48] = "add,abc,Tesla T4,x,49,1"
    _write(tmp_path / "add" / "t.csv.gz", "OPName,Latency,Device,Kernel Name,B,H", rows)
    cat = load_catalog()
    for sample in (0, 1000):
        with pytest.raises(TraincastError, match=r"t\.csv\.gz: row 49: field 'Latency' = 'abc'"):
            kernel_fit.read_kernels(tmp_path, cat, sample=sample)


def test_one_gpus_file_plain_and_gzipped_is_refused(tmp_path: Path) -> None:
    rows = [f"add,0.03,Tesla T4,x,{b},1" for b in range(1, 30)]
    _write(tmp_path / "add" / "t.csv.gz", "OPName,Latency,Device,Kernel Name,B,H", rows)
    (tmp_path / "add" / "t.csv").write_text("OPName,Latency,Device,Kernel Name,B,H\n"
                                            + "\n".join(rows) + "\n")
    with pytest.raises(TraincastError, match=r"add: t\.csv and t\.csv\.gz both hold its kernels"):
        kernel_fit.read_kernels(tmp_path, load_catalog())


def test_a_damaged_gzip_file_is_named_not_a_crash(tmp_path: Path) -> None:
    # bytes flipped inside the deflate stream: zlib's error, named with the file
    rows = "OPName,Latency,Device,Kernel Name,B,H\n" + "".join(
        f"add,0.03,Tesla T4,x,{b},{b * 7 % 13 + 1}\n" for b in range(1, 3000))
    data = bytearray(gzip.compress(rows.encode()))
    for i in range(200, 260):
        data[i] ^= 0x5A
    (tmp_path / "add").mkdir()
    (tmp_path / "add" / "t.csv.gz").write_bytes(bytes(data))
    with pytest.raises(TraincastError, match=r"t\.csv\.gz: cannot be read"):
        kernel_fit.read_kernels(tmp_path, load_catalog())


def test_a_column_named_twice_and_a_header_only_file_are_refused(tmp_path: Path) -> None:
    # DuckDB reads the first of two Latency columns: which one was meant cannot be told
    _write(tmp_path / "a" / "add" / "t.csv.gz", "OPName,Latency,Device,Kernel Name,B,H,latency",
           ["add,0.03,Tesla T4,x,1,1,9"])
    with pytest.raises(TraincastError, match=r"t\.csv\.gz: the header names column 'latency' "
                                             r"twice \(fields 2 and 7\)"):
        kernel_fit.read_kernels(tmp_path / "a", load_catalog())
    _write(tmp_path / "b" / "add" / "t.csv.gz", "OPName,Latency,Device,Kernel Name,B,H", [])
    with pytest.raises(TraincastError, match=r"t\.csv\.gz: no measured rows"):
        kernel_fit.read_kernels(tmp_path / "b", load_catalog())


def test_a_copy_of_one_file_under_another_name_or_folder_is_refused(tmp_path: Path) -> None:
    # the same measurements twice would weigh their rows twice in the fit: named, both files;
    # one file's repeated rows (a shape measured twice) are kept
    rows = [f"add,0.03,Tesla T4,x,{b},1" for b in range(1, 30)] * 2
    _write(tmp_path / "a" / "add" / "t.csv.gz", "OPName,Latency,Device,Kernel Name,B,H", rows)
    assert len(kernel_fit.read_kernels(tmp_path / "a", load_catalog())) == 58
    (tmp_path / "a" / "add" / "t-copy.csv").write_text(
        "OPName,Latency,Device,Kernel Name,B,H\n" + "\n".join(rows) + "\n")
    with pytest.raises(TraincastError, match=r"t\.csv\.gz: the same measurements as .*t-copy"):
        kernel_fit.read_kernels(tmp_path / "a", load_catalog())
    (tmp_path / "a" / "add" / "t-copy.csv").unlink()
    _write(tmp_path / "b" / "add" / "t.csv.gz", "OPName,Latency,Device,Kernel Name,B,H", rows)
    with pytest.raises(TraincastError, match=r"b/add/t\.csv\.gz: the same measurements as"):
        kernel_fit.read_kernels([tmp_path / "a", tmp_path / "b"], load_catalog())


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data/neusight-kernels not present")
def test_a_folder_of_some_families_writes_only_what_it_fitted(tmp_path: Path) -> None:
    # linear and add rows of two GPUs: the GEMM parameters and the hosts' floors are fitted
    # and written; no softmax, norm or convolution rows, so their keys are left out of the
    # file and the shipped values stay where it is merged
    pytest.importorskip("scipy")
    import gzip
    import tomllib

    from traincast.hardware.catalog import load_catalog

    def folder(name: str, families: tuple[str, ...]) -> Path:
        for fam in families:
            (tmp_path / name / fam).mkdir(parents=True)
            for gpu in ("Tesla_T4", "Tesla_V100-PCIE-32GB"):
                lines = gzip.decompress((DATA / fam / f"{gpu}.csv.gz").read_bytes()).decode()
                (tmp_path / name / fam / f"{gpu}.csv").write_text(
                    "\n".join(lines.splitlines()[:301]) + "\n")
        return tmp_path / name

    out = tmp_path / "fit.toml"
    res = CliRunner().invoke(app, ["calibrate", "--kernels", str(folder("k", ("linear", "add"))),
                                   "-o", str(out)])
    assert res.exit_code == 0, res.output
    model = tomllib.loads(out.read_text())["kernel_model"]
    for key in ("simt_efficiency", "choice_linear"):
        assert key in model["params"], key
    for key in ("f_softmax", "f_norm", "conv_efficiency"):
        assert key not in model["params"], key
    assert set(model["floors_us"]) == {"T4", "V100-PCIE-32GB"} and "default_floor_us" in model
    shipped, merged = load_catalog(), load_catalog([out])
    assert merged.kernel_model["params"]["f_norm"] == shipped.kernel_model["params"]["f_norm"]
    # products alone: each row holds its host's dispatch, which no floor row measures, so the
    # fit would put it into the kernels' own costs: refused, and nothing is written
    out.unlink()
    res = CliRunner().invoke(app, ["calibrate", "--kernels", str(folder("p", ("linear",))),
                                   "-o", str(out)])
    assert res.exit_code != 0 and "no binary element-wise kernel" in str(res.exception)
    assert not out.exists()


def test_a_csv_outside_a_family_folder_is_an_error(tmp_path: Path) -> None:
    # beside the family folders, or in a folder inside one: it would not be read
    from traincast.calibration.kernel_fit import read_kernels
    from traincast.hardware.catalog import load_catalog

    header = "Device,Latency,B,H\nTesla T4,0.01,1,1024\n"
    for loose in ("Tesla_T4.csv", "add/old/Tesla_T4.csv"):
        root = tmp_path / loose.replace("/", "_")
        (root / "add").mkdir(parents=True)
        (root / "add" / "Tesla_T4.csv").write_text(header)
        (root / loose).parent.mkdir(parents=True, exist_ok=True)
        (root / loose).write_text(header)
        with pytest.raises(TraincastError, match="a CSV file outside a family folder"):
            read_kernels([root], load_catalog())


def test_an_empty_kernel_file_is_named_empty(tmp_path: Path) -> None:
    (tmp_path / "add").mkdir()
    (tmp_path / "add" / "e.csv").write_text("")
    with pytest.raises(TraincastError, match=r"e\.csv: the file is empty \(no header, no "
                                             r"rows\)"):
        kernel_fit.read_kernels(tmp_path, load_catalog())


def test_a_kernel_file_of_a_header_only_is_named(tmp_path: Path) -> None:
    _write(tmp_path / "add" / "t.csv.gz", "OPName,Latency,Device,Kernel Name,B,H", [])
    with pytest.raises(TraincastError, match=r"t\.csv\.gz: no measured rows \(a header only\)"):
        kernel_fit.read_kernels(tmp_path, load_catalog())


def test_one_calibration_does_not_replace_another(tmp_path: Path) -> None:
    # both default to traincast-local.toml: a kernel fit refuses a file holding a machine
    # calibration's [gpu.local], a machine calibration one holding a kernel fit; untouched
    machine = tmp_path / "machine.toml"
    machine.write_text('[gpu.local]\nname = "local"\n')
    res = CliRunner().invoke(app, ["calibrate", "--kernels", str(tmp_path), "-o", str(machine)])
    assert res.exit_code != 0 and "holds [gpu], which a kernel fit does not write" in \
        str(res.exception)
    fit = tmp_path / "fit.toml"
    fit.write_text('[kernel_model]\nsource = "a fit"\nfitted_on = ["T4"]\n'
                   '[kernel_model.params]\nc_issue = 5.0\n')
    res = CliRunner().invoke(app, ["calibrate", "-o", str(fit)])
    assert res.exit_code != 0 and "holds [kernel_model] (a kernel fit)" in str(res.exception)
    assert machine.read_text() == '[gpu.local]\nname = "local"\n'
    assert "a fit" in fit.read_text()


def test_a_family_folder_or_a_file_given_for_the_folder_is_told_its_parent(
        tmp_path: Path) -> None:
    from traincast.calibration.kernel_fit import read_kernels
    from traincast.hardware.catalog import load_catalog

    (tmp_path / "add").mkdir()
    one = tmp_path / "add" / "Tesla_T4.csv"
    one.write_text("Device,Latency,B,H\nTesla T4,0.01,1,1024\n")
    cat = load_catalog()
    with pytest.raises(TraincastError, match=r"a family folder \(add/\)") as exc:
        read_kernels([tmp_path / "add"], cat)
    assert exc.value.hint == f"give its parent: --kernels {tmp_path}"
    with pytest.raises(TraincastError, match="a file, not a folder") as exc:
        read_kernels([one], cat)
    assert exc.value.hint.endswith(f"--kernels {tmp_path}")
    with pytest.raises(TraincastError, match="no such folder"):
        read_kernels([tmp_path / "nothing"], cat)
    assert len(read_kernels([tmp_path], cat)) == 1


@pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data/neusight-kernels not present")
def test_a_held_out_fold_without_a_host_floor_is_refused_first(tmp_path: Path) -> None:
    # add rows of the T4 alone, linear rows of the T4 and the V100: held out, the T4 would
    # leave the V100's fit no floor; refused before any fit, by validate and calibrate alike
    pytest.importorskip("scipy")
    import gzip

    for fam, gpus in (("add", ("Tesla_T4",)), ("linear", ("Tesla_T4", "Tesla_V100-PCIE-32GB"))):
        (tmp_path / "k" / fam).mkdir(parents=True, exist_ok=True)
        for gpu in gpus:
            lines = gzip.decompress((DATA / fam / f"{gpu}.csv.gz").read_bytes()).decode()
            (tmp_path / "k" / fam / f"{gpu}.csv").write_text(
                "\n".join(lines.splitlines()[:201]) + "\n")
    for args in (["validate", "--kernels", str(tmp_path / "k")],
                 ["calibrate", "--kernels", str(tmp_path / "k"), "-o", str(tmp_path / "f.toml")]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code != 0
        assert "only T4 has binary element-wise kernels" in str(res.exception)
    assert not (tmp_path / "f.toml").exists()


def test_a_kernel_files_rows_are_numbered_alike_by_either_check(tmp_path: Path) -> None:
    # a blank line before the third row: a short row there and a bad latency there are both
    # row 3, blank lines not counted (as a trace's rows are numbered)
    from traincast.calibration.kernel_fit import read_kernels
    from traincast.hardware.catalog import load_catalog

    header = "Device,Latency,B,H\n"
    good = "Tesla T4,0.01,1,1024\n"
    for third, said in (("Tesla T4,0.01\n", "row 3: 2 fields"),
                        ("Tesla T4,abc,1,1024\n", "row 3: field 'Latency'")):
        (tmp_path / "add").mkdir(exist_ok=True)
        (tmp_path / "add" / "t.csv").write_text(header + good + good + "\n" + third)
        with pytest.raises(TraincastError, match=said):
            read_kernels([tmp_path], load_catalog())
