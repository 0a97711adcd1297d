"""One model core: the same job gives the same time by every path, one placement rule, the
architecture registry, and the paper / roofline / hybrid models agreeing on a shared case."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from traincast import kernels
from traincast.analysis.recommend import recommend
from traincast.analysis.whatif import whatif
from traincast.architectures import ARCHITECTURES, REGISTRY
from traincast.hardware.catalog import load_catalog
from traincast.predict import predict, predict_table
from traincast.resolve import BAD_PLACEMENT, BAD_SHAPE, DEFAULT_NODE, OK, REASONS, resolve
from traincast.trace.store import read_trace

FEATS = {"flops_compute_bound": 2.4e13, "bytes_memory_bound": 4e10, "weight_bytes": 1e8,
         "embedding_bytes_touched": 2e7, "input_bytes": 1e6}
CSV_HEADER = ("job_id,start_time_s,end_time_s,architecture,n_gpus,n_workers,n_ps,"
              "gpus_per_worker,node,flops_compute_bound,bytes_memory_bound,weight_bytes,"
              "embedding_bytes_touched,input_bytes\n")


def _row(job: str, arch: str, n: int, m: str, p: str, w: str, node: str) -> str:
    f = FEATS
    return (f"{job},0,100,{arch},{n},{m},{p},{w},{node},{f['flops_compute_bound']},"
            f"{f['bytes_memory_bound']},{f['weight_bytes']},{f['embedding_bytes_touched']},"
            f"{f['input_bytes']}\n")


def _cli_total(*args: str) -> float:
    out = subprocess.run([sys.executable, "-c", "from traincast.cli import main; main()", *args,
                          "--json"], capture_output=True, text=True, check=True).stdout
    return float(json.loads(out)["time_s"]["total"])


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("one")
    path = d / "jobs.csv"
    path.write_text(CSV_HEADER + _row("ps", "ps-worker", 8, "8", "2", "1", "pai-v100-pcie")
                    + _row("ar", "allreduce-cluster", 16, "", "", "", "pai-v100-nvlink"))
    return path, d / "store.duckdb"


def test_same_job_same_time_by_every_path(trace: tuple[Path, Path]) -> None:
    path, db = trace
    flags = ["--flops", "2.4e13", "--mem-bytes", "4e10", "--weight-bytes", "1e8",
             "--embedding-bytes", "2e7", "--input-bytes", "1e6"]
    by_flags = _cli_total("predict", *flags, "--arch", "ps-worker", "--workers", "8", "--ps",
                          "2", "--node", "pai-v100-pcie")
    by_api = predict(FEATS, arch="ps-worker", workers=8, ps=2, node="pai-v100-pcie")
    jobs = read_trace(path, "csv", db)
    by_row = predict_table(jobs, load_catalog()).total
    by_recommend = recommend(jobs)["rows"].column("base_total_s").to_numpy()
    assert by_flags == pytest.approx(by_api.time_s["total"], rel=1e-12)
    assert by_row[0] == pytest.approx(by_flags, rel=1e-12)
    assert by_recommend[0] == pytest.approx(by_flags, rel=1e-12)
    # the all-reduce job ported to ps-worker (m = n = 16 workers, p = ceil(16 / 8) = 2 servers
    # on the same node preset) is the ps-worker job of the same shape through predict
    port = whatif(jobs, {"name": "to-ps", "changes": {"architecture": "ps-worker"}},
                  per_job=True)["job_rows"].to_pydict()
    ported = port["scenario_total_s"][port["job_id"].index("ar")]
    direct = predict(FEATS, arch="ps-worker", workers=16, ps=2, node="pai-v100-nvlink")
    assert ported == pytest.approx(direct.time_s["total"], rel=1e-12)


def test_one_placement_rule_packs_workers_unless_the_trace_says() -> None:
    # 8 one-GPU workers, 2 servers on pai-v100-pcie: packed on one node, k = 8 share its NIC
    cat = load_catalog()
    nd = cat.node("pai-v100-pcie")
    pcie, nic = cat.links[nd.pcie].bw_bps, cat.links[nd.nic].bw_bps
    b = FEATS["weight_bytes"] + FEATS["embedding_bytes_touched"]
    packed = 2 * b / pcie + max(2 * b * 8 / nic, 2 * 8 * b / (2 * nic))
    base = {"architecture": np.array(["ps-worker"] * 2, dtype=object), "n_gpus": [8, 8],
            "n_workers": [8, 8], "n_ps": [2, 2], "gpus_per_worker": [1, 1],
            "node": np.array(["pai-v100-pcie"] * 2, dtype=object),
            **{k: [v, v] for k, v in FEATS.items()}}
    # the second row's trace says: one worker per machine
    bd = predict_table({**base, "workers_per_node": [np.nan, 1.0],
                        "gpus_per_node": [np.nan, 1.0]}, cat)
    spread = 2 * b / pcie + max(2 * b * 1 / nic, 2 * 8 * b / (2 * nic))
    np.testing.assert_allclose(bd.comm, [packed, spread], rtol=1e-12)


def test_invalid_rows_get_no_time_and_a_reason() -> None:
    cat = load_catalog()
    # the last allreduce-local row: 8 GPUs fit the node, but its trace puts 4 on each of 2
    # nodes, an all-reduce across nodes
    jobs = {"architecture": np.array(["1w1g", "allreduce-local", "allreduce-cluster", "ring",
                                      "1w1g", "allreduce-local"], dtype=object),
            "n_gpus": [8, 16, 16, 2, 1, 8],
            "gpus_per_node": [np.nan, np.nan, 12, np.nan, np.nan, 4],
            "node": np.array(["pai-v100-nvlink"] * 6, dtype=object),
            **{k: [v] * 6 for k, v in FEATS.items()}}
    bd = predict_table(jobs, cat)
    assert np.isnan(bd.total[:4]).all() and np.isfinite(bd.total[4]) and np.isnan(bd.total[5])
    assert [REASONS[c] for c in bd.reason] == [
        REASONS[BAD_SHAPE], REASONS[BAD_SHAPE], REASONS[BAD_PLACEMENT],
        "unknown architecture", REASONS[OK], REASONS[BAD_SHAPE]]


def test_rails_multiply_the_network_of_a_multi_nic_node() -> None:
    # dgx-a100: 8 HDR ports per node; 16 GPUs on 2 nodes, g = 8: the ring crosses nodes at
    # min(bw(intra), 8 bw(nic)) = min(300e9 x 0.8, 8 x 25e9 x 0.9937) = 198.7e9: the network's (HDR
    # payload rule, docs/hardware.md: 4096 / 4122 bytes per packet, rounded to 4 places)
    cat = load_catalog()
    nd = cat.node("dgx-a100")
    assert nd.nics == 8
    ring_bw = min(cat.links[nd.intra].bw_bps, 8 * cat.links[nd.nic].bw_bps)
    assert ring_bw == pytest.approx(8 * 25e9 * round(4096 / 4122, 4))
    assert ring_bw < cat.links[nd.intra].bw_bps == pytest.approx(300e9 * 0.8)
    r = predict(FEATS, arch="allreduce-cluster", gpus=16, node="dgx-a100")
    w = FEATS["weight_bytes"] + FEATS["embedding_bytes_touched"]
    assert r.time_s["comm"] == pytest.approx(2 * 15 / 16 * w / ring_bw)


def test_dense_gradient_embeddings_move_whole_tables_in_allreduce_only() -> None:
    # E = 2e7 rows touched, E_ar = 5e8 (a dense-gradient table): AllReduce moves W + E_ar,
    # PS/Worker and PEARL the rows
    cat = load_catalog()
    feats = {**FEATS, "embedding_allreduce_bytes": 5e8}
    nd = cat.node("pai-v100-nvlink")
    intra = cat.links[nd.intra].bw_bps
    ar = predict(feats, arch="allreduce-local", gpus=8, node="pai-v100-nvlink", catalog=cat)
    assert ar.time_s["comm"] == pytest.approx(2 * 7 / 8 * (1e8 + 5e8) / intra)
    pearl = predict(feats, arch="pearl", gpus=8, node="pai-v100-nvlink", catalog=cat)
    assert pearl.time_s["comm"] == pytest.approx(2 * 7 / 8 * (1e8 + 2e7) / intra)
    ps = predict(feats, arch="ps-worker", workers=8, ps=2, node="pai-v100-nvlink", catalog=cat)
    ps_rows = predict(FEATS, arch="ps-worker", workers=8, ps=2, node="pai-v100-nvlink",
                      catalog=cat)
    assert ps.time_s["comm"] == pytest.approx(ps_rows.time_s["comm"])


def test_every_module_of_the_package_registers_its_architecture() -> None:
    # adding an architecture is adding one module: the package imports them all
    import importlib
    import pkgutil

    import traincast.architectures as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"traincast.architectures.{mod.name}")
        registered = [a for a in REGISTRY.values() if a.comm_s.__module__ == module.__name__]
        assert registered, mod.name
        assert all(a.name in ARCHITECTURES for a in registered)


def test_registry_has_one_module_per_architecture() -> None:
    assert ARCHITECTURES[:5] == ("1w1g", "allreduce-local", "allreduce-cluster", "ps-worker",
                                 "pearl")
    cat = load_catalog()
    r = resolve({"architecture": np.array(["hybrid", "allreduce-cluster"], dtype=object),
                 "n_gpus": [16, 16], "node": np.array(["dgx-a100"] * 2, dtype=object),
                 **{k: [v, v] for k, v in FEATS.items()}}, cat)
    bd = predict_table({"architecture": np.array(["hybrid", "allreduce-cluster"], dtype=object),
                        "n_gpus": [16, 16], "node": np.array(["dgx-a100"] * 2, dtype=object),
                        **{k: [v, v] for k, v in FEATS.items()}}, cat)
    assert (r.reason == OK).all() and bd.comm[0] == bd.comm[1]


def test_predict_reports_the_rates_of_the_strategy_it_priced_with() -> None:
    # dgx-a100's A100 has an SM count, so `auto` picks the kernel model; a forced `paper`
    # prices and reports the flat rates: the fp32 peak x flop_efficiency, the DRAM bandwidth x
    # mem_efficiency
    cat = load_catalog()
    gpu = cat.gpu(cat.nodes["dgx-a100"].gpu)
    assert gpu.name == "A100-SXM4-80GB"
    auto = predict(FEATS, node="dgx-a100", catalog=cat)
    assert auto.hardware["compute"] == "kernel"
    paper = predict(FEATS, node="dgx-a100", catalog=cat, strategy="paper")
    hw = paper.hardware
    assert hw["compute"] == "paper"
    assert hw["achievable_tflops"] == pytest.approx(gpu.fp32_tflops * gpu.flop_efficiency)
    assert hw["achievable_mem_gbs"] == pytest.approx(gpu.mem_bw_gbs * gpu.mem_efficiency)
    assert paper.time_s["compute_flop"] == pytest.approx(
        FEATS["flops_compute_bound"] / (hw["achievable_tflops"] * 1e12))
    assert hw["achievable_tflops"] != pytest.approx(auto.hardware["achievable_tflops"])


def test_paper_roofline_and_hybrid_agree_on_a_data_parallel_case() -> None:
    from traincast import compute
    from traincast.architectures import ring_factor
    from traincast.hardware.catalog import GPU
    from traincast.parallel.hybrid import evaluate, hybrid_hardware
    from traincast.parallel.models import get_model

    cat = load_catalog()
    # hybrid with data parallelism only: dp = 16 on two dgx-a100 nodes, ZeRO 0
    cfg = get_model("megatron-gpt-1.7b")
    hw = hybrid_hardware(cat, "dgx-a100", "bf16")
    res = evaluate(cfg, hw, dp=16, tp=1, pp=1, global_batch=16, micro_batch=1)
    grad_bytes = float(res["dp_bytes_per_gpu"]) / float(ring_factor(16))
    paper = predict({"flops_compute_bound": 1.0, "bytes_memory_bound": 1.0,
                     "weight_bytes": grad_bytes}, arch="allreduce-cluster", gpus=16,
                    node="dgx-a100", catalog=cat, strategy="paper")
    assert float(res["comm_dp_s"]) == pytest.approx(paper.time_s["comm"], rel=1e-9)
    # compute: the hybrid's own hardware FLOPs at the rate the catalog selects for the GPU
    # (tile/wave quantization and the attention roofline are the only differences)
    flops = float(res["hardware_tflops_per_gpu"]) * 1e12 * float(res["total_s"])
    rate, _ = compute.rates(cat.gpu("A100-SXM4-80GB"), "bf16")
    assert float(res["compute_flop_s"]) == pytest.approx(flops / rate, rel=0.15)
    # the measured-curves roofline with flat curves (one rate at every size, no fixed costs)
    # is the paper's split on ops that are purely FLOP- or memory-bound
    rate_flops, bw = 10e12, 500e9
    flat = GPU("flat", fp32_tflops=rate_flops / 1e12, mem_bw_gbs=bw / 1e9,
               gemm_intensity=(1.0, 1e9), gemm_tflops=(10.0, 10.0),
               elementwise_bytes=(1.0, 1e15), elementwise_gbs=(500.0, 500.0))
    ops = [{"op": "mm", "flops": 1e12, "bytes_read": 1e6, "bytes_written": 1e6,
            "count": 1, "bound": "compute", "dtype": "float32", "shapes": "[[1024, 1024]]"},
           {"op": "add", "flops": 0.0, "bytes_read": 2e9, "bytes_written": 1e9,
            "count": 1, "bound": "memory", "dtype": "float32", "shapes": "[[1024, 1024]]"}]
    curves = compute.ops_compute_s(ops, flat, "fp32", "curves")
    paper_split = compute.ops_compute_s(ops, flat, "fp32", "paper")
    assert paper_split["compute_flop"] == pytest.approx(1e12 / rate_flops)
    assert paper_split["compute_mem"] == pytest.approx(3e9 / bw)
    assert curves["compute_flop"] == pytest.approx(paper_split["compute_flop"], rel=1e-6)
    assert curves["compute_mem"] == pytest.approx(paper_split["compute_mem"], rel=1e-6)


def test_unknown_rows_are_counted_by_reason_in_whatif_and_characterize() -> None:
    from traincast.analysis.characterize import characterize

    jobs = {"job_id": ["a", "b", "c"], "architecture": ["1w1g", "1w1g", "allreduce-local"],
            "n_gpus": [1.0, 1.0, 64.0], "gpu_type": ["V100", "Z999", "V100"],
            "start_time_s": [0.0] * 3, "end_time_s": [10.0] * 3,
            **{k: [v] * 3 for k, v in FEATS.items()}}
    out = whatif(jobs, "overlap")  # a scenario that matches every job
    assert out["unpredicted"] == {"unknown node or GPU type": 1,
                                  "shape does not fit the architecture": 1}
    # unpriced jobs are not "ports that do not fit": the one priced job applies
    assert (out["summary"]["matched"], out["summary"]["applied"],
            out["summary"]["not_applied"]) == (3, 1, 0)
    # eth100 matches only jobs whose NIC is known to be slower: not the unknown GPU's
    assert whatif(jobs, "eth100")["summary"]["matched"] == 2
    assert characterize(jobs, fill=False)["breakdown"]["unpredicted"] == out["unpredicted"]
    assert not math.isnan(predict_table(jobs).total[0])


def test_trace_rows_of_a_zoo_workload_are_priced_op_by_op() -> None:
    # a row whose workload has a shipped per-op table: its compute is the per-op model's on the
    # row's GPU, exactly what `predict` gives for the profile with its ops and what the
    # validation measures (one compute model for every path)
    from traincast import compute
    from traincast.zoo.profiles import workload_ops

    cat = load_catalog()
    prof = workload_ops("resnet50")
    assert prof and prof["ops"]
    gpu = cat.gpu("A100-SXM4-80GB")
    per_op = compute.ops_compute_s(prof["ops"], gpu, "fp32")
    feats = {"flops_compute_bound": prof["flops_compute_bound"],
             "bytes_memory_bound": prof["bytes_memory_bound"], "weight_bytes": 1e8}
    jobs = {"architecture": np.array(["1w1g", "1w1g"], dtype=object), "n_gpus": [1, 1],
            "node": np.array(["dgx-a100"] * 2, dtype=object),
            "workload": np.array(["resnet50", "mystery"], dtype=object),
            **{k: [v, v] for k, v in feats.items()}}
    bd = predict_table(jobs, cat)
    assert bd.compute_flop[0] == pytest.approx(per_op["compute_flop"], rel=1e-9)
    assert bd.compute_mem[0] == pytest.approx(per_op["compute_mem"], rel=1e-9)
    # an unknown workload keeps the aggregate rates
    rate, bw = compute.rates(gpu, "fp32")
    assert bd.compute_flop[1] == pytest.approx(feats["flops_compute_bound"] / rate)
    one = predict({**feats, "ops": prof["ops"]}, node="dgx-a100", catalog=cat)
    assert one.time_s["compute_flop"] == pytest.approx(per_op["compute_flop"], rel=1e-9)


def test_a_row_scales_the_profile_ops_by_their_own_feature() -> None:
    # resnet50 on an A100: a row with a times the profile's FLOPs and b times its bytes keeps
    # the host's dispatches and scales the GPU's busy time on the ops the profile marks
    # compute-bound by a, on the others by b; its step is that host queue's. At (a, b) on the
    # grid (2, 1), (4, 4), (1, 0) the queue is solved exactly, so the step is the queue of
    # the scaled busy times run op by op (kernels.queue_idle_s)
    from traincast import compute
    from traincast.predict import IDLE_SCALES
    from traincast.zoo.profiles import workload_ops

    cat = load_catalog()
    prof = workload_ops("resnet50")
    gpu = cat.gpu("A100-SXM4-80GB")
    ops = prof["ops"]
    r = compute.kernel_op_times(ops, gpu, "fp32")
    marked = np.array([o["bound"] == "compute" for o in ops])
    whole = compute.ops_compute_s(ops, gpu, "fp32")
    step = whole["compute_flop"] + whole["compute_mem"]

    def queued(a: float, b: float) -> float:
        busy = r["busy_s"] * np.where(marked, a, b)
        return float((busy * r["count"]).sum()
                     + kernels.queue_idle_s(r["host_s"], busy, r["count"]).sum())

    assert queued(1, 1) == pytest.approx(step, rel=1e-12)
    f, b = prof["flops_compute_bound"], prof["bytes_memory_bound"]
    scales = [(2, 1), (4, 4), (1, 0), (0.3, 0.3)]
    jobs = {"architecture": np.array(["1w1g"] * 4, dtype=object), "n_gpus": [1] * 4,
            "node": np.array(["dgx-a100"] * 4, dtype=object),
            "workload": np.array(["resnet50"] * 4, dtype=object),
            "flops_compute_bound": [x * f for x, _ in scales],
            "bytes_memory_bound": [y * b for _, y in scales], "weight_bytes": [1e8] * 4}
    bd = predict_table(jobs, cat)
    expected = np.array([queued(x, y) for x, y in scales])
    np.testing.assert_allclose(bd.compute[:3], expected[:3], rtol=1e-9)
    # split as the profile's step
    np.testing.assert_allclose(bd.compute_flop[:3],
                               expected[:3] * whole["compute_flop"] / step, rtol=1e-9)
    # off the grid, where the GPU turns host-bound (the wait grows from 0.06 ms at a = b = 1
    # to 1.5 ms at 0.3): (0.3, 0.3) lies in the cell of nodes 2^-1.75 and 2^-1.5; the wait is
    # linear in a and in b across it, and the chord over the convex queue is never faster
    lo, hi = 2.0 ** -1.75, 2.0 ** -1.5
    assert lo < 0.3 < hi and {lo, hi} <= set(IDLE_SCALES.tolist())
    u = (0.3 - lo) / (hi - lo)
    busy = float((r["busy_s"] * r["count"]).sum())

    def wait(a: float, b: float) -> float:
        return queued(a, b) - float((r["busy_s"] * np.where(marked, a, b) * r["count"]).sum())

    mix = ((1 - u) ** 2 * wait(lo, lo) + u * (1 - u) * (wait(hi, lo) + wait(lo, hi))
           + u ** 2 * wait(hi, hi))
    assert wait(lo, lo) > 1.2 * wait(hi, hi)  # the wait changes across the cell
    assert bd.compute[3] == pytest.approx(0.3 * busy + mix, rel=1e-9)
    assert bd.compute[3] >= expected[3] * (1 - 1e-12)


def test_a_profile_with_a_zero_feature_still_gets_its_own_step() -> None:
    # an op the profiler marks compute-bound but cannot count FLOPs for: F_profile = 0, while
    # the op takes time. The profile's own row must get the profile's step (docs/model.md);
    # a = F_row / F_profile has no value, so that part keeps its time. Both ops read and write
    # 0.8 GB of fp32 each: an op the registry does not know is memory traffic, so both move
    # their bytes at the element-wise family's fitted fraction of 2039 GB/s (kernel model),
    # after the first op's dispatch (d times the element-wise ratio; the second is issued
    # while the first runs)
    cat = load_catalog()
    gpu = cat.gpu("A100-SXM4-80GB")
    op = {"flops": 0.0, "bytes_read": 4e8, "bytes_written": 4e8, "dtype": "float32"}
    ops = [dict(op, op="aten::mystery_attention", bound="compute"),
           dict(op, op="aten::relu", bound="memory")]
    dispatch = kernels.op_floor_s(gpu) * gpu.kernel["dispatch_elementwise"]
    step = dispatch + 2 * 8e8 / (2039e9 * gpu.kernel["f_elementwise"])
    one = predict({"flops_compute_bound": 0.0, "bytes_memory_bound": 8e8, "weight_bytes": 0.0,
                   "ops": ops}, gpu="A100-SXM4-80GB", node="dgx-a100", catalog=cat)
    assert one.time_s["compute_flop"] + one.time_s["compute_mem"] == pytest.approx(step)


@pytest.mark.parametrize("strategy", ["kernel", "paper"])
@pytest.mark.parametrize("workload", ["resnet50", "bert-base", "mobilenet-v2"])
def test_the_profile_step_is_its_compute_and_memory_bound_ops_together(strategy, workload):
    # ops_times splits the step priced at once into the two kinds of op; the parts add up to
    # the whole table's step
    from traincast import compute
    from traincast.predict import IDLE_SCALES, ops_times
    from traincast.zoo.profiles import workload_ops

    ops = workload_ops(workload)["ops"]
    gpu = load_catalog().gpu("V100-SXM2-16GB")
    for dtype in ("fp32", "amp"):
        whole = compute.ops_compute_s(ops, gpu, dtype, strategy)
        t = ops_times(ops, gpu, dtype, strategy)
        assert t.flop_s == pytest.approx(whole["compute_flop"], rel=1e-12)
        assert t.mem_s == pytest.approx(whole["compute_mem"], rel=1e-12)
        # busy time plus the wait at the profile's own features (grid node (1, 1)) = step
        one = int(np.flatnonzero(IDLE_SCALES == 1.0)[0])
        assert t.busy_f_s + t.busy_b_s + t.idle_grid_s[one, one] == pytest.approx(
            t.flop_s + t.mem_s, rel=1e-12)
        assert 0 < t.busy_f_s < t.busy_f_s + t.busy_b_s


@pytest.mark.parametrize("kw, field", [
    ({"gpus": 0}, "n_gpus"), ({"arch": "allreduce-cluster", "gpus": -2}, "n_gpus"),
    ({"arch": "ps-worker", "workers": 0}, "n_workers"),
    ({"arch": "ps-worker", "workers": 4, "ps": 0}, "n_ps"),
    ({"arch": "ps-worker", "workers": 4, "ps": -3}, "n_ps"),
    ({"arch": "allreduce-cluster", "gpus": 8, "gpus_per_node": -1}, "gpus_per_node"),
    ({"arch": "allreduce-cluster", "gpus": 16, "gpus_per_node": 16}, "gpus_per_node"),
    ({"arch": "allreduce-local", "gpus": 16}, "n_gpus"), ({"gpus": 2}, "n_gpus"),
    ({"arch": "allreduce-local", "gpus": 8, "gpus_per_node": 4}, "gpus_per_node"),
    ({"gpu": "NOPE"}, "gpu_type"), ({"node": "NOPE"}, "node"),
    ({"arch": "ring"}, "architecture"), ({"nic": "NOPE"}, "nic"), ({"intra": "NOPE"}, "intra"),
    ({"flops_compute_bound": -1.0}, "flops_compute_bound"),
    ({"bytes_memory_bound": math.inf}, "bytes_memory_bound"),
    ({"embedding_bytes_touched": -5.0}, "embedding_bytes_touched"),
    ({"input_bytes": math.inf}, "input_bytes"),
])
def test_a_bad_value_is_one_error_naming_its_field_with_a_hint(kw, field) -> None:
    from traincast.errors import TraincastError

    feats = {k: kw.pop(k) for k in list(kw) if k in FEATS}
    with pytest.raises(TraincastError, match=rf"\(field {field}\)") as exc:
        predict({**FEATS, **feats}, **kw)
    assert exc.value.hint


def test_rows_with_negative_or_infinite_features_get_a_reason_not_a_time() -> None:
    cat = load_catalog()
    bad = [("flops_compute_bound", -1.0), ("bytes_memory_bound", math.inf),
           ("weight_bytes", -1.0), ("embedding_bytes_touched", -1.0),
           ("embedding_allreduce_bytes", math.inf), ("input_bytes", -1.0)]
    size = len(bad) + 2
    jobs = {"architecture": np.array(["allreduce-local"] * size, dtype=object),
            "n_gpus": np.full(size, 4.0), **{k: np.full(size, v) for k, v in FEATS.items()},
            "embedding_allreduce_bytes": np.full(size, np.nan)}
    for i, (k, v) in enumerate(bad):
        jobs[k][i] = v
    jobs["flops_compute_bound"][-1] = np.nan  # missing, not invalid
    bd = predict_table(jobs, cat)
    bad_reason = "features negative, not finite or out of bounds"
    assert [REASONS[c] for c in bd.reason] == ([bad_reason] * len(bad)
                                               + ["ok", "features missing"])
    assert np.isnan(bd.total[:len(bad)]).all() and bd.total[-2] > 0


def test_predict_reports_whether_a_profiled_job_fits_in_gpu_memory() -> None:
    # S + A per replica: 2 GB state + 3 GB activations = 5 GB of a 16 GB V100; PEARL splits the
    # embedding share e = 0.5 of the state over n = 4 GPUs: 1 + 1/4 + 3 = 4.25 GB; ps-worker
    # keeps the optimizer and the embedding tables on the servers, and a worker the dense
    # weights and every gradient it computes: 0.5 (1 - 0.5) + 0.5 + 3 = 3.75 GB with dense
    # gradients, 0.5 (1 - 0.5) + 0.26 + 3 = 3.51 GB with sparse ones (the dense part's 0.25 GB
    # and 0.01 GB of rows touched); state_gb: the same without the 3 GB of activations
    mem = {"weights": 5e8, "grads": 5e8, "optimizer": 1e9, "activations": 3e9}
    prof = {**FEATS, "memory_bytes": mem, "params": 1e8, "params_embedding": 5e7}
    sparse = {**prof, "memory_bytes": {**mem, "grads": 2.6e8}}
    cases = [(prof, {}, 5.0), (prof, {"arch": "pearl", "gpus": 4}, 4.25),
             (prof, {"arch": "ps-worker", "workers": 4}, 3.75),
             (sparse, {"arch": "ps-worker", "workers": 4}, 3.51)]
    for job, kw, gb in cases:
        out = predict(job, node="pai-v100-nvlink", **kw).to_dict()["memory"]
        assert out == {"footprint_gb": pytest.approx(gb), "state_gb": pytest.approx(gb - 3.0),
                       "capacity_gb": 16.0, "fits": True}
    big = {**prof, "memory_bytes": {**mem, "activations": 15.5e9}}
    assert predict(big, node="pai-v100-nvlink").memory["fits"] is False
    assert predict(FEATS).memory is None  # aggregate features: no footprint known


def test_architecture_codes_infer_as_resolve_does_from_node_sizes_alone() -> None:
    from traincast.resolve import architecture_codes

    cat = load_catalog()
    jobs = {"architecture": np.array([None, None, None, None, "pearl", None, None, "ring"],
                                     dtype=object),
            "n_gpus": [1, 2, 8, 9, 16, 2, np.nan, 2],
            "gpus_per_node": [np.nan, np.nan, np.nan, np.nan, np.nan, 1, np.nan, np.nan],
            "node": np.array(["pai-v100-nvlink", "pai-p100", "pai-p100", "", "", "", "", ""],
                             dtype=object),
            "gpu_type": np.array(["", "", "", "V100", "", "", "", "NOPE"], dtype=object)}
    codes = architecture_codes(jobs, cat)
    names = [ARCHITECTURES[c] if c >= 0 else None for c in codes]
    # 2 GPUs fit a 2-GPU node; 8 do not; 2 at 1 per node span two nodes; no n: unknown
    assert names == ["1w1g", "allreduce-local", "allreduce-cluster", "allreduce-cluster",
                     "pearl", "allreduce-cluster", None, None]
    np.testing.assert_array_equal(codes, resolve(jobs, cat).arch)


def test_a_node_or_gpu_the_catalog_does_not_know_holds_eight() -> None:
    # docs/traces.md: GPUs per node "else 8": 2 and 8 GPUs fit one node, 9 do not, whatever
    # the GPU or node name
    from traincast.resolve import architecture_codes

    cat = load_catalog()
    jobs = {"architecture": np.array([None] * 4, dtype=object), "n_gpus": [2, 8, 9, 2],
            "node": np.array(["", "", "", "no-such-node"], dtype=object),
            "gpu_type": np.array(["A800", "A800", "A800", ""], dtype=object)}
    names = [ARCHITECTURES[c] for c in architecture_codes(jobs, cat)]
    assert names == ["allreduce-local", "allreduce-local", "allreduce-cluster",
                     "allreduce-local"]


def test_training_gpus_are_the_workers_gpus() -> None:
    from traincast.jobs import Columns
    from traincast.resolve import training_gpus

    cols = Columns.of({"architecture": np.array([None] * 6, dtype=object),
                       "n_gpus": [2, 5, 8, 4, 0.5, 3],
                       "n_workers": [1, 4, np.nan, 8, 1, 0],
                       "gpus_per_worker": [1, 1, 2, 1, 0.5, 1]})
    # 1 worker x 1 GPU + an evaluator's GPU; 4 x 1 + 1 more; no worker count: n_gpus;
    # 8 x 1 is more than the job's 4 GPUs: 4; half a GPU; no worker: n_gpus
    np.testing.assert_array_equal(training_gpus(cols), [1, 4, 8, 4, 0.5, 3])
    np.testing.assert_array_equal(training_gpus(Columns.of({"architecture": ["1w1g"],
                                                            "n_gpus": [2.0]})), [2])


def test_gpus_outside_the_workers_take_no_part_in_the_step() -> None:
    # one worker with one GPU plus an evaluator with one (PAI 2020): a 1w1g job of 2 GPUs
    cat = load_catalog()
    jobs = {"architecture": np.array(["1w1g", "ps-worker"], dtype=object),
            "n_gpus": [2.0, 5.0], "n_workers": [1, 4], "n_ps": [np.nan, 1],
            "gpus_per_worker": [1.0, 1.0], "node": np.array(["pai-v100-nvlink"] * 2, dtype=object),
            **{k: [v, v] for k, v in FEATS.items()}}
    r = resolve(jobs, cat)
    assert r.reason.tolist() == [OK, OK]
    assert r.n.tolist() == [1, 4] and r.m.tolist() == [1, 4]
    # packed: g = min(n = 4, 8) = 4, k = min(m = 4, g / 1) = 4
    assert r.g.tolist() == [1, 4] and r.k.tolist() == [1, 4]
    one = predict_table({k: [v[0]] if isinstance(v, list) else v[:1] for k, v in jobs.items()},
                        cat)
    assert one.comm[0] == 0.0  # 1w1g: T_comm = 0
    bd = predict_table({**jobs, "n_gpus": [1.0, 4.0]}, cat)  # the same jobs without the extra
    np.testing.assert_array_equal(predict_table(jobs, cat).total, bd.total)


def test_a_ported_job_keeps_its_training_gpus() -> None:
    from traincast.engine.local import apply_changes
    from traincast.engine.workload import workload_extras
    from traincast.jobs import Columns
    from traincast.scenarios import Scenario

    cat = load_catalog()
    cols = Columns.of({"architecture": np.array(["ps-worker"], dtype=object),
                       "n_gpus": [5.0], "n_workers": [4], "n_ps": [1],
                       "gpus_per_worker": [1.0], **{k: [v] for k, v in FEATS.items()}})
    for arch, workers in (("allreduce-local", None), ("ps-worker", 4)):
        new = apply_changes(cols, workload_extras(cols),
                            Scenario(name=arch, changes={"architecture": arch}), cat)
        assert new["n_gpus"].tolist() == [4]  # 4 workers x 1 GPU; the fifth GPU is not a worker
        assert resolve(new, cat).n.tolist() == [4]
        if workers:
            assert new["n_workers"].tolist() == [workers]


def test_infer_architecture_reads_node_sizes_without_a_resolve(monkeypatch) -> None:
    import pyarrow as pa

    from traincast.trace import infer_architecture

    resolve_mod = sys.modules["traincast.resolve"]  # the package exports a function of the name
    monkeypatch.setattr(resolve_mod, "resolve", lambda *a, **k: pytest.fail("resolved"))
    jobs = pa.table({"architecture": pa.array([None, None, "pearl", None], pa.string()),
                     "n_gpus": [1.0, 8.0, 16.0, 9.0],
                     "gpu_type": ["V100", "V100", "V100", "V100"]})
    got = infer_architecture(jobs, load_catalog())["architecture"].to_pylist()
    # V100 -> pai-v100-nvlink, 8 GPUs: 1 -> 1w1g, 8 fit one node, the given one kept, 9 do not
    assert got == ["1w1g", "allreduce-local", "pearl", "allreduce-cluster"]


def test_a_named_workload_looks_the_jobs_gpus_up_once(monkeypatch) -> None:
    # prepare_jobs infers the architectures from the jobs' nodes, then checks the named
    # workload against their GPUs' memory (flag_oversize): one lookup of the hardware serves
    # both. GPT-2 XL needs 24.9 GB per GPU (fp32 weights, gradients, Adam's two moments):
    # more than the V100's and the T4's 16 GB, within the A100's 80 GB; the job that names
    # its own workload is not checked
    import pyarrow as pa

    from traincast.trace import OVERSIZE_COLUMN, flag_oversize, prepare_jobs

    resolve_mod = sys.modules["traincast.resolve"]  # the package exports a function of the name
    hardware = resolve_mod._hardware
    calls: list[int] = []

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return hardware(*args, **kwargs)

    monkeypatch.setattr(resolve_mod, "_hardware", counted)
    cat = load_catalog()
    jobs = pa.table({"job_id": ["a", "b", "c", "d"],
                     "architecture": pa.array([None, None, "1w1g", None], pa.string()),
                     "n_gpus": [1.0, 8.0, 1.0, 16.0],
                     "gpu_type": ["A100-SXM4-80GB", "V100", "T4", None],
                     "workload": pa.array([None, None, None, "resnet50"], pa.string())})
    out = prepare_jobs(jobs, cat, "gpt2-xl")
    assert len(calls) == 1
    assert out["architecture"].to_pylist() == ["1w1g", "allreduce-local", "1w1g",
                                               "allreduce-cluster"]
    assert out[OVERSIZE_COLUMN].to_pylist() == [False, True, True, False]
    # the check on its own looks the GPUs up itself, to the same flags
    alone = flag_oversize(out.drop_columns([OVERSIZE_COLUMN]), cat)
    assert alone[OVERSIZE_COLUMN].to_pylist() == [False, True, True, False]
    assert len(calls) == 2


def test_the_idle_grid_cells_are_those_a_binary_search_finds() -> None:
    # predict._cells looks a point's cell up by its quarter octave; a binary search over the
    # nodes is the plain way: they agree off the nodes, on them and at the edges (0, < 0,
    # beyond the last node), and a point's place in its cell is in [0, 1]
    from traincast.predict import IDLE_SCALES, _cells

    rng = np.random.default_rng(0)
    x = np.concatenate([np.exp(rng.normal(0.0, 4.0, 20_000)), IDLE_SCALES,
                        IDLE_SCALES * (1 + 1e-6), IDLE_SCALES * (1 - 1e-6),
                        [0.0, -1.0, 1e-300, 1e300, np.inf]])
    i, u = _cells(x, IDLE_SCALES)
    want = np.clip(np.searchsorted(IDLE_SCALES, x, side="right") - 1, 0, len(IDLE_SCALES) - 2)
    np.testing.assert_array_equal(i, want)
    assert np.all((u >= 0) & (u <= 1))
    i, u = _cells(np.array([np.nan]), IDLE_SCALES)
    assert i[0] == 0 and np.isnan(u[0])


def test_a_node_the_trace_fills_past_the_gpus_default_preset_takes_a_larger_preset() -> None:
    """Alibaba 2023: a G2 (A10) pod of 8 GPUs runs on one node, while the A10's default preset
    holds 4: it takes the 8-GPU A10 preset (its links), a 4-GPU pod keeps the default, a pod of
    16 on one node fits no A10 preset, a named node is kept, and 8 GPUs the trace does not
    place on one node are packed over the default preset (2 nodes)."""
    cat = load_catalog()
    assert (cat.nodes["a10-pcie"].gpus, cat.nodes["a10-pcie-8"].gpus) == (4, 8)
    assert cat.node_holding("G2", 8) == "a10-pcie-8" and cat.node_holding("A10", 3) == "a10-pcie"
    assert cat.node_holding("A10", 9) == "" and cat.node_holding("no-such-gpu", 1) == ""
    jobs = {"job_id": list("abcde"), "architecture": [None] * 5,
            "n_gpus": [8.0, 4.0, 16.0, 8.0, 8.0], "gpus_per_node": [8.0, 4.0, 16.0, 8.0, None],
            "node": [None, None, None, "a10-pcie", None], "gpu_type": ["G2"] * 5,
            **{k: [v] * 5 for k, v in FEATS.items()}}
    r = resolve(jobs, cat)
    assert list(r.node.strings()) == ["a10-pcie-8", "a10-pcie", "a10-pcie", "a10-pcie",
                                      "a10-pcie"]
    assert list(r.node_gpus) == [8, 4, 4, 4, 4] and list(r.nodes[[0, 4]]) == [1, 2]
    assert [REASONS[c] for c in r.reason] == ["ok", "ok"] + [
        "more GPUs per node than the node has"] * 2 + ["ok"]
    assert [ARCHITECTURES[a] for a in r.arch[[0, 4]]] == ["allreduce-local", "allreduce-cluster"]
    assert r.intra_bps[0] == cat.links["pcie4x16"].bw_bps
    jobs["node"] = ["", "", "", "a10-pcie", ""]  # an empty node is no node, as null is
    assert list(resolve(jobs, cat).node.strings()) == list(r.node.strings())


def test_a_job_sharing_its_gpu_runs_its_kernels_on_its_share() -> None:
    """Half a GPU (Alibaba 2023's gpu_milli 500, PAI's plan_gpu 50) runs its kernels on half
    the GPU: its compute time is the whole GPU's over 0.5, its data copy unchanged, so its cost
    per iteration (time x 0.5 GPU) is the whole GPU's compute cost; a PAI worker of 0.5 GPU
    (gpus_per_worker) alike; whole GPUs are untouched."""
    from traincast.compute import rates

    cat = load_catalog()
    flop_bps, mem_bps = rates(cat.gpus["V100-SXM2-16GB"], "fp32", cat.compute)
    jobs = {"architecture": np.array(["1w1g", "1w1g", "ps-worker", "ps-worker"], dtype=object),
            "node": np.array(["pai-v100-nvlink"] * 4, dtype=object),
            "n_gpus": [1.0, 0.5, 2.0, 2.0], "gpus_per_worker": [np.nan, np.nan, 0.5, np.nan],
            "n_workers": [np.nan, np.nan, 4.0, 4.0], "n_ps": [np.nan, np.nan, 1.0, 1.0],
            "flops_compute_bound": [4e12] * 4, "bytes_memory_bound": [2e10] * 4,
            "weight_bytes": [1e8] * 4, "input_bytes": [1e7] * 4}
    r = resolve(jobs, cat)  # the fourth: 2 GPUs over 4 workers, n / m = 0.5 each
    assert r.reason.tolist() == [OK] * 4 and r.share.tolist() == [1.0, 0.5, 0.5, 0.5]
    # gpus_per_worker given as 0 (workers without a GPU, an evaluator's elsewhere): no share
    zero = resolve({**jobs, "gpus_per_worker": [np.nan, np.nan, 0.5, 0.0]}, cat)
    assert zero.share.tolist()[3] == 1.0
    bd = predict_table(jobs, cat)
    whole = 4e12 / flop_bps + 2e10 / mem_bps
    assert math.isclose(bd.compute[0], whole, rel_tol=1e-9)
    assert math.isclose(bd.compute[1], whole / 0.5, rel_tol=1e-9)
    assert math.isclose(bd.compute[2], whole / 0.5, rel_tol=1e-9)
    assert bd.data_io[1] == bd.data_io[0]



def test_a_port_keeps_the_jobs_share_of_its_gpu() -> None:
    """A job on half a GPU ported to another architecture stays on half a GPU: its compute is
    the whole GPU's over 0.5 on every target, PS/Worker (one worker of 0.5 GPU) included; it
    does not gain the other half by being ported."""
    from traincast.architectures import REGISTRY

    cat = load_catalog()
    n, node_gpus = np.array([0.5, 2.0]), np.array([8.0, 8.0])
    base = {"node": np.array(["pai-v100-nvlink"] * 2, dtype=object), "n_gpus": n,
            "flops_compute_bound": [4e12] * 2, "bytes_memory_bound": [2e10] * 2,
            "weight_bytes": [1e8] * 2, "input_bytes": [1e7] * 2}
    for arch in ("1w1g", "allreduce-local", "ps-worker", "pearl"):
        placed = {**base, "architecture": np.array([arch] * 2, dtype=object),
                  **REGISTRY[arch].port(n, node_gpus)}
        r = resolve(placed, cat)
        assert r.share.tolist()[0] == 0.5, arch
        assert r.share.tolist()[1] == 1.0, arch


def test_a_users_gpu_without_default_node_takes_its_own_node_preset(tmp_path) -> None:
    """A file that adds a GPU and nodes of it, without ``default_node``: its jobs run on its
    largest node (ties by name), not on the catalog's default node; a GPU no node holds keeps
    the caller's default, and ``predict`` says whose links it took."""
    from traincast.predict import node_assumed, predict

    entry = ('[gpu.{0}]\nsource = "t"\n[gpu.{0}.datasheet]\nfp32_tflops = 19.5\n'
             "mem_bw_gbs = 1935\nmem_gb = 80\n")
    node = ('[node.{0}]\ngpu = "{1}"\ngpus = {2}\npcie = "pcie4x16"\nintra = "nvlink3-a100"\n'
            'nic = "ib-hdr"\nsource = "t"\n')
    path = tmp_path / "c.toml"
    path.write_text(entry.format("G1") + entry.format("G2") + node.format("g1-four", "G1", 4)
                    + node.format("g1-eight", "G1", 8) + node.format("g1-eight-b", "G1", 8))
    cat = load_catalog([path])
    assert cat.default_node_of("G1") == "g1-eight" and cat.default_node_of("G2") == ""
    assert cat.default_node_of("A10") == "a10-pcie"  # its default_node, not its 8-GPU preset
    jobs = {"job_id": ["a", "b"], "architecture": [None] * 2, "n_gpus": [16.0, 16.0],
            "gpus_per_node": [None] * 2, "node": [None] * 2, "gpu_type": ["G1", "G2"],
            **{k: [v] * 2 for k, v in FEATS.items()}}
    r = resolve(jobs, cat)
    assert list(r.node.strings()) == ["g1-eight", DEFAULT_NODE]
    assert node_assumed(cat, "G2", None) and not node_assumed(cat, "G2", "dgx-a100")
    assert not node_assumed(cat, "G1", None) and not node_assumed(cat, None, None)
    said = {g: predict(FEATS, gpu=g, catalog=cat).hardware for g in ("G1", "G2")}
    assert said["G2"]["node_assumed"] and said["G2"]["node"] == DEFAULT_NODE
    assert not said["G1"]["node_assumed"] and said["G1"]["node"] == "g1-eight"


def test_a_time_that_is_not_finite_is_unpredicted_for_every_caller(tmp_path) -> None:
    # 1e-300 of a GPU scales the step beyond a float: no prediction, with its reason, in
    # predict_table, in what-if (not a NaN counted as predicted) and in characterize alike
    from traincast.analysis.whatif import whatif
    from traincast.hardware.catalog import load_catalog
    from traincast.predict import predict_table
    from traincast.resolve import NOT_FINITE

    cols = {"job_id": np.array(["tiny", "half"], dtype=object),
            "architecture": np.array(["1w1g", "1w1g"], dtype=object),
            "n_gpus": np.array([1e-300, 0.5]),
            "gpu_type": np.array(["V100", "V100"], dtype=object),
            "flops_compute_bound": np.array([1e12, 1e12]),
            "bytes_memory_bound": np.array([1e9, 1e9]), "weight_bytes": np.array([1e8, 1e8])}
    cat = load_catalog()
    bd = predict_table(cols, cat)
    assert list(bd.reason) == [NOT_FINITE, OK]
    assert np.isnan(bd.total[0]) and np.isfinite(bd.total[1])
    out = whatif(cols, ["eth100"], cat)
    assert out["unpredicted"] == {REASONS[NOT_FINITE]: 1}
    assert out["summary"]["predicted"] == out["summary"]["applied"] == 1
