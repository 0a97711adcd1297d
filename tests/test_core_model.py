"""The time model and the five architectures, against hand arithmetic from DESIGN.md.

Custom catalog (round numbers): GPU 10 TFLOP/s fp32, 100 TFLOP/s fp16, 500 GB/s memory;
links pcie 10 GB/s, intra 50 GB/s, nic 2.5 GB/s; node of 4 GPUs.
Features: 1e12 FLOPs -> 0.1 s; 5e9 memory-bound bytes -> 0.01 s; 1e8 input bytes -> 0.01 s;
W = 1e9 weight bytes.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from traincast import load_catalog, predict
from traincast.architectures import ARCH_CODE
from traincast.hardware.catalog import GPU, Catalog, Link, Node
from traincast.predict import predict_table

TOML = """
[gpu.toy]
fp32_tflops = 10
fp16_tflops = 100
mem_bw_gbs = 500
mem_gb = 16
source = "test"

[link.pc]
bw_gbs = 10
source = "test"

[link.in]
bw_gbs = 50
source = "test"

[link.net]
bw_gbs = 2.5
source = "test"

[link.slow-net]
bw_gbs = 2.5
efficiency = 0.5
source = "test"

[node.toy4]
gpu = "toy"
gpus = 4
pcie = "pc"
intra = "in"
nic = "net"
source = "test"
"""

FEATS = {"flops_compute_bound": 1e12, "bytes_memory_bound": 5e9, "weight_bytes": 1e9,
         "input_bytes": 1e8}
BASE = 0.1 + 0.01 + 0.01  # T_comp_flop + T_comp_mem + T_data


@pytest.fixture
def cat(tmp_path: Path):
    path = tmp_path / "toy.toml"
    path.write_text(TOML)
    return load_catalog([path])


def run(cat, **kw):
    return predict(FEATS | kw.pop("feats", {}), node="toy4", catalog=cat, **kw).to_dict()


def test_1w1g_has_no_communication(cat):
    r = run(cat, arch="1w1g")
    assert r["time_s"]["comm"] == 0
    assert r["time_s"]["data_io"] == pytest.approx(1e8 / 10e9)
    assert r["time_s"]["compute_flop"] == pytest.approx(1e12 / 10e12)
    assert r["time_s"]["compute_mem"] == pytest.approx(5e9 / 500e9)
    assert r["time_s"]["total"] == pytest.approx(BASE)
    assert r["bottleneck"] == "compute_flop"


def test_allreduce_local(cat):
    # 2 (n-1)/n W / bw(intra) = 2*3/4 * 1e9 / 50e9 = 0.03 s
    r = run(cat, arch="allreduce-local", gpus=4)
    assert r["time_s"]["comm"] == pytest.approx(0.03)
    assert r["time_s"]["total"] == pytest.approx(BASE + 0.03)


def test_allreduce_cluster_flat_and_hierarchical(cat):
    # flat: 2*7/8 * 1e9 / min(50, 2.5)e9 = 1.75e9 / 2.5e9 = 0.7 s
    r = run(cat, arch="allreduce-cluster", gpus=8)
    assert r["time_s"]["comm"] == pytest.approx(0.7)
    assert r["job"]["nodes"] == 2
    # hierarchical: 2*3/4 * 1e9/50e9 + 2*1/2 * 1e9/2.5e9 = 0.03 + 0.4
    r = run(cat, arch="allreduce-cluster", gpus=8, hierarchical=True)
    assert r["time_s"]["comm"] == pytest.approx(0.43)


def test_ps_worker(cat):
    # m=8, p=1, k=min(4, 8)=4: 2W/bw(pcie) + max(2Wk/bw(nic), 2mW/(p bw(nic)))
    #   = 2e9/10e9 + max(8e9/2.5e9, 16e9/2.5e9) = 0.2 + 6.4
    r = run(cat, arch="ps-worker", workers=8, ps=1)
    assert r["time_s"]["comm"] == pytest.approx(6.6)
    # p=4: second term 16e9/(4*2.5e9) = 1.6 < first term 3.2 -> 0.2 + 3.2
    r = run(cat, arch="ps-worker", workers=8, ps=4)
    assert r["time_s"]["comm"] == pytest.approx(3.4)
    assert r["bottleneck"] == "comm"
    assert "Gbit" not in r["bottleneck_label"] and "net" in r["bottleneck_label"]
    # the label names the link of the larger term: one worker, one server, PCIe at 0.5 GB/s:
    # 2W / bw(pcie) = 2e9 / 0.5e9 = 4 s against max(2e9 / 2.5e9, 2e9 / 2.5e9) = 0.8 s
    r = run(cat, arch="ps-worker", workers=1, ps=1, pcie="0.5GB/s")
    assert r["time_s"]["comm"] == pytest.approx(4.8)
    assert r["bottleneck_label"].endswith("over 0.5GB/s")


def test_ps_worker_with_embeddings_exchanges_w_plus_e(cat):
    # B = W + E = 1.5e9; m=2, p=1, k=2: 2*1.5e9/10e9 + max(2*1.5e9*2, 2*2*1.5e9)/2.5e9
    r = run(cat, arch="ps-worker", workers=2, ps=1, feats={"embedding_bytes_touched": 5e8})
    assert r["time_s"]["comm"] == pytest.approx(0.3 + 6e9 / 2.5e9)


def test_pearl(cat):
    # n=8, g=4: T_ring(W) flat = 0.7; embeddings 2 E (n-1)/n / min(50,2.5)e9
    #   = 2 * 4e8 * 7/8 / 2.5e9 = 0.28
    r = run(cat, arch="pearl", gpus=8, feats={"embedding_bytes_touched": 4e8})
    assert r["time_s"]["comm"] == pytest.approx(0.98)
    # one node: 2*3/4*1e9/50e9 + 2*3/4*4e8/50e9 = 0.03 + 0.012
    r = run(cat, arch="pearl", gpus=4, feats={"embedding_bytes_touched": 4e8})
    assert r["time_s"]["comm"] == pytest.approx(0.042)


def test_overlap_hides_part_of_communication(cat):
    # T = T_data + max(T_comp, f T_comm) + (1-f) T_comm = 0.01 + max(0.11, 0.35) + 0.35
    r = run(cat, arch="allreduce-cluster", gpus=8, overlap=0.5)
    assert r["time_s"]["total"] == pytest.approx(0.71)
    # f = 1 and small comm: fully hidden
    r = run(cat, arch="allreduce-local", gpus=4, overlap=1.0)
    assert r["time_s"]["total"] == pytest.approx(BASE)


def test_amp_uses_fp16_peak(cat):
    r = run(cat, arch="1w1g", amp=True)
    assert r["time_s"]["compute_flop"] == pytest.approx(1e12 / 100e12)


def test_link_efficiency_and_overrides(cat):
    # nic overridden by a link with efficiency 0.5: bw = 2.5e9 * 0.5
    r = run(cat, arch="allreduce-cluster", gpus=8, nic="slow-net")
    assert r["time_s"]["comm"] == pytest.approx(1.75e9 / 1.25e9)
    # a typed speed: 100Gbit = 12.5 GB/s, still slower than intra
    r = run(cat, arch="allreduce-cluster", gpus=8, nic="100Gbit")
    assert r["time_s"]["comm"] == pytest.approx(1.75e9 / 12.5e9)


@pytest.mark.parametrize("kw, message", [
    ({"arch": "allreduce-local", "gpus": 8}, "one node"),
    ({"arch": "1w1g", "gpus": 2}, "exactly one GPU"),
    ({"arch": "ring", "gpus": 2}, "unknown architecture"),
])
def test_invalid_shapes_are_clear_errors(cat, kw, message):
    with pytest.raises(ValueError, match=message):
        run(cat, **kw)


def test_ps_worker_defaults_to_one_server(cat):
    # one documented default (traincast.resolve): p = 1 when the job gives no servers
    assert run(cat, arch="ps-worker", workers=4) == run(cat, arch="ps-worker", workers=4, ps=1)


def test_predict_table_matches_single_job_predictions(cat):
    jobs = {
        "architecture": np.array(["1w1g", "allreduce-local", "allreduce-cluster", "ps-worker",
                                  "pearl", "bogus"], dtype=object),
        "n_gpus": np.array([1, 4, 8, 8, 8, 2]),
        "n_workers": np.array([0, 0, 0, 8, 0, 0]),
        "n_ps": np.array([0, 0, 0, 1, 0, 0]),
        "gpus_per_worker": np.zeros(6),
        "node": np.array(["toy4"] * 6, dtype=object),
        "gpu_type": np.array([""] * 6, dtype=object),
        **{k: np.full(6, v) for k, v in FEATS.items()},
        "embedding_bytes_touched": np.array([0, 0, 0, 0, 4e8, 0]),
    }
    bd = predict_table(jobs, cat)
    np.testing.assert_allclose(bd.comm[:5], [0.0, 0.03, 0.7, 6.6, 0.98])
    assert math.isnan(bd.total[5])  # unknown architecture -> unknown time, not a guess


def test_predict_table_uses_gpu_default_node(cat):
    # No node: the GPU type's default_node; V100 alias -> V100-SXM2-16GB on pai-v100-nvlink.
    jobs = {"architecture": np.array(["allreduce-local"], dtype=object), "n_gpus": [8],
            "gpu_type": np.array(["V100"], dtype=object), "node": np.array([""], dtype=object),
            "flops_compute_bound": [15.7e12], "bytes_memory_bound": [0.0],
            "weight_bytes": [1.5e9]}
    bd = predict_table(jobs, load_catalog(compute="paper"))
    assert bd.compute_flop[0] == pytest.approx(1.0)        # 15.7e12 / 15.7 TFLOP/s
    # NVLink 2: 150 GB/s x 0.8 (NCCL's 20.0 of 25 GB/s per link, docs/hardware.md)
    assert bd.comm[0] == pytest.approx(2 * 7 / 8 * 1.5e9 / (0.8 * 150e9))


def _catalog(rates: np.ndarray, node_gpus: int = 8) -> Catalog:
    """A one-node catalog with the given FLOP/s, memory, pcie, intra and nic rates."""
    link = {name: Link(name, bw_gbs=float(bw) / 1e9, source="test")
            for name, bw in zip(("pc", "in", "net"), rates[2:], strict=True)}
    gpu = GPU("g", fp32_tflops=float(rates[0]) / 1e12, mem_bw_gbs=float(rates[1]) / 1e9,
              mem_gb=16.0, source="test")
    return Catalog(gpus={"g": gpu}, links=link,
                   nodes={"n": Node("n", "g", node_gpus, "pc", "in", "net", source="test")})


pos = st.floats(min_value=1e-3, max_value=1e3)
job = st.tuples(st.sampled_from(list(ARCH_CODE.values())), st.integers(1, 64),
                st.integers(1, 8), st.integers(1, 8), pos, pos, pos, pos, pos,
                st.lists(pos, min_size=5, max_size=5), st.floats(0, 1))


def _eval(j, rates, overlap):
    code, n, g, p, flops, mem, w, e, d, _, _ = j
    feats = {"flops_compute_bound": flops * 1e12, "bytes_memory_bound": mem * 1e9,
             "weight_bytes": w * 1e8, "embedding_bytes_touched": e * 1e7,
             "input_bytes": d * 1e6}
    n = 1 if code == ARCH_CODE["1w1g"] else n
    name = list(ARCH_CODE)[code]
    if name == "allreduce-local":  # all its GPUs on one node
        n = g = min(n, 8)
    jobs = {"architecture": np.array([name], dtype=object), "n_gpus": [n],
            "gpus_per_node": [min(g, n)], "n_ps": [p], "node": np.array(["n"], dtype=object),
            **{k: [v] for k, v in feats.items()}}
    return predict_table(jobs, _catalog(np.asarray(rates)), overlap=overlap)


@settings(max_examples=200, deadline=None)
@given(job, st.integers(0, 4), st.floats(1.0, 100.0))
def test_properties(j, which, factor):
    rates = np.array(j[9]) * np.array([1e12, 1e9, 1e9, 1e9, 1e9])
    overlap = j[10]
    bd = _eval(j, rates, overlap)
    parts = bd.stacked()[:, 0]
    assert (parts >= 0).all()
    assert sum(bd.shares()[c][0] for c in bd.shares()) == pytest.approx(1.0)
    no_overlap = _eval(j, rates, 0.0)
    assert no_overlap.total[0] == pytest.approx(no_overlap.stacked()[:, 0].sum())
    assert bd.total[0] <= no_overlap.total[0] * (1 + 1e-12)
    faster = rates.copy()
    faster[which] *= factor
    assert _eval(j, faster, overlap).total[0] <= bd.total[0] * (1 + 1e-12)


# ------------------------------------------------- properties over the shipped catalog
# Every GPU, node and link that ships, every architecture; expected relations come from the
# formulas of docs/model.md (sums, the overlap rule) and from physics (faster hardware).

SHIPPED = load_catalog()
JOB = {"flops_compute_bound": 2.4e13, "bytes_memory_bound": 4e10, "weight_bytes": 1e8,
       "embedding_bytes_touched": 2e7, "embedding_allreduce_bytes": 5e8, "input_bytes": 1e6}
TABLE_ARCHS = [a for a in ARCH_CODE if a != "1w1g"]


def _table(arch: str, node: str, n: np.ndarray, **cols) -> dict:
    """Rows of one architecture on one node preset, one per GPU count in ``n``."""
    size = len(n)
    return {"architecture": np.full(size, arch, dtype=object),
            "node": np.full(size, node, dtype=object), "n_gpus": n.astype(float),
            "n_workers": n.astype(float) if arch == "ps-worker" else np.full(size, np.nan),
            **{k: np.full(size, v) for k, v in JOB.items()}, **cols}


@pytest.mark.parametrize("node", sorted(SHIPPED.nodes))
def test_every_shipped_gpu_and_architecture_gives_finite_parts_that_add_up(node):
    size = SHIPPED.nodes[node].gpus
    gpus, archs, ns = zip(*[(g, a, n) for g in SHIPPED.gpus for a in ARCH_CODE
                            for n in ({1} if a == "1w1g" else {1, 2, size, size + 1, 4 * size})
                            if not (a == "allreduce-local" and n > size)], strict=True)
    n = np.array(ns, dtype=float)
    jobs = {**_table("1w1g", node, n), "architecture": np.array(archs, dtype=object),
            "gpu_type": np.array(gpus, dtype=object),
            "n_workers": np.where(np.array(archs) == "ps-worker", n, np.nan)}
    for amp, overlap, hierarchical in ((False, 0.0, False), (True, 0.5, True), (True, 1.0, False)):
        bd = predict_table(jobs, SHIPPED, amp=amp, overlap=overlap, hierarchical=hierarchical)
        assert (bd.reason == 0).all()
        parts = bd.stacked()
        assert np.isfinite(parts).all() and (parts >= 0).all()
        comp = bd.compute_flop + bd.compute_mem
        # T_data + max(T_comp, f T_comm) + (1 - f) T_comm
        expected = bd.data_io + np.maximum(comp, overlap * bd.comm) + (1 - overlap) * bd.comm
        np.testing.assert_allclose(bd.total, expected, rtol=1e-12)
        np.testing.assert_allclose(sum(bd.shares().values()), 1.0, rtol=1e-12)
        assert (bd.comm[np.array(archs) == "1w1g"] == 0).all()


@pytest.mark.parametrize("role", ["nic", "intra", "pcie"])
def test_a_faster_link_never_increases_communication_or_data_time(role):
    n = np.array([1, 2, 3, 4, 7, 8, 9, 16, 17, 33], dtype=float)
    tables = [_table(a, nd, n, gpus_per_node=np.full(len(n), g))
              for a in TABLE_ARCHS for nd in SHIPPED.nodes for g in (np.nan, 1.0, 2.0)]
    jobs = {k: np.concatenate([t[k] for t in tables]) for k in tables[0]}
    jobs["architecture"] = jobs["architecture"].astype(object)
    fits = None
    prev = None
    for link in sorted(SHIPPED.links.values(), key=lambda x: x.bw_bps):
        for hierarchical in (False, True):
            bd = predict_table(jobs, SHIPPED, hierarchical=hierarchical, **{role: link.name})
            fits = bd.reason == 0 if fits is None else fits
            now = np.stack([bd.comm, bd.data_io])[:, fits]
            assert np.isfinite(now).all()
            if prev is not None and hierarchical in prev:
                assert (now <= prev[hierarchical] * (1 + 1e-12)).all(), link.name
            prev = {**(prev or {}), hierarchical: now}


@pytest.mark.parametrize("arch", ["allreduce-local", "allreduce-cluster", "pearl", "hybrid"])
def test_more_gpus_at_a_fixed_per_gpu_batch_never_decrease_allreduce_communication(arch):
    n = np.arange(1, 41, dtype=float)  # same features per replica = a fixed per-GPU batch
    for node, nd in SHIPPED.nodes.items():
        for g in (np.nan, 1.0, 2.0, 4.0)[:4 if nd.gpus >= 4 else 3]:
            for hierarchical in (False, True):
                bd = predict_table(_table(arch, node, n, gpus_per_node=np.full(len(n), g)),
                                   SHIPPED, hierarchical=hierarchical)
                comm = bd.comm[bd.reason == 0]
                assert len(comm) and (np.diff(comm) >= -1e-15 * comm[1:]).all(), (node, g)


def test_more_parameter_servers_never_slow_communication():
    p = np.arange(1, 17, dtype=float)
    for node in SHIPPED.nodes:
        for m in (1, 2, 8, 9, 33):
            bd = predict_table(_table("ps-worker", node, np.full(len(p), m), n_ps=p), SHIPPED)
            assert (np.diff(bd.comm) <= 0).all()
            # 33 workers, k per node share its NICs: one server is the bottleneck
            assert bd.comm[0] > bd.comm[-1] or m < 33


def test_a_gpu_with_higher_peaks_and_bandwidth_never_computes_slower_by_the_flat_model():
    # the paper's model (--compute paper): R_flop = P x flop_efficiency, R_mem = M x mem_eff
    cat = load_catalog(compute="paper")
    names = sorted(cat.gpus)
    jobs = {"architecture": np.full(len(names), "1w1g", dtype=object),
            "n_gpus": np.ones(len(names)), "gpu_type": np.array(names, dtype=object),
            **{k: np.full(len(names), v) for k, v in JOB.items()}}
    for amp, dtype in ((False, "fp32"), (True, "amp")):
        comp = predict_table(jobs, cat, amp=amp).compute
        for i, a in enumerate(names):
            for j, b in enumerate(names):
                ga, gb = cat.gpus[a], cat.gpus[b]
                if gb.flops_per_s(dtype) >= ga.flops_per_s(dtype) \
                        and gb.mem_bw_bps >= ga.mem_bw_bps:
                    assert comp[j] <= comp[i] * (1 + 1e-12), (b, a)


@settings(max_examples=25, deadline=None)
@example("A100-SXM4-40GB", "resnet-50", 1.0, 2.0, False)  # ops move from memory- to FLOP-bound
@given(st.sampled_from(sorted(SHIPPED.gpus)), st.sampled_from(["resnet-50", "bert", "ctr"]),
       st.floats(1.0, 8.0), st.floats(1.0, 8.0), st.booleans())
def test_the_same_gpu_with_higher_peaks_and_bandwidth_never_computes_slower(name, workload,
                                                                            peak, bandwidth,
                                                                            amp):
    # the shipped GPU priced op by op (the zoo's per-op table), then the same GPU (SMs, tiles,
    # achievable fractions, launch cost) with every peak x `peak` and memory x `bandwidth`
    from dataclasses import replace

    gpu = SHIPPED.gpus[name]
    faster = replace(gpu, name="faster", mem_bw_gbs=gpu.mem_bw_gbs * bandwidth,
                     **{f"{d}_tflops": getattr(gpu, f"{d}_tflops") * peak
                        for d in ("fp32", "tf32", "fp16", "bf16", "fp8")})
    cat = Catalog(gpus={name: gpu, "faster": faster}, links=SHIPPED.links, nodes=SHIPPED.nodes)
    jobs = {"architecture": np.array(["1w1g"] * 2, dtype=object), "n_gpus": [1, 1],
            "gpu_type": np.array([name, "faster"], dtype=object),
            "workload": np.array([workload] * 2, dtype=object),
            **{k: [v, v] for k, v in JOB.items()}}
    comp = predict_table(jobs, cat, amp=amp, default_node="pai-v100-nvlink").compute
    assert np.isfinite(comp).all()
    assert comp[1] <= comp[0] * (1 + 1e-12)


def _tensor_core_gpus() -> list[str]:
    return sorted(n for n, g in SHIPPED.gpus.items()
                  if max(g.fp16_tflops, g.bf16_tflops) > g.fp32_tflops)


@pytest.mark.parametrize("compute", ["auto", "paper"])
def test_mixed_precision_never_slows_aggregate_compute_on_a_gpu_with_a_faster_half_peak(compute):
    cat = load_catalog(compute=compute)
    names = _tensor_core_gpus()
    jobs = {"architecture": np.full(len(names), "1w1g", dtype=object),
            "n_gpus": np.ones(len(names)), "gpu_type": np.array(names, dtype=object),
            **{k: np.full(len(names), v) for k, v in JOB.items()}}
    fp32, amp = (predict_table(jobs, cat, amp=a, ops_of=None) for a in (False, True))
    assert (amp.compute_flop < fp32.compute_flop).all()
    np.testing.assert_array_equal(amp.compute_mem, fp32.compute_mem)  # bytes of the features


def test_mixed_precision_on_a_gpu_without_a_half_peak_is_priced_at_fp32():
    # docs/model.md: a dtype the GPU lacks falls back to fp32 (K80 has fp32 only)
    assert SHIPPED.gpus["K80"].fp16_tflops == SHIPPED.gpus["K80"].bf16_tflops == 0
    fp32, amp = (predict(JOB, gpu="K80", node="pai-misc", amp=a) for a in (False, True))
    assert amp.time_s == fp32.time_s and amp.hardware["peak_tflops"] == 4.37


@pytest.mark.parametrize("gpu", ["V100-SXM2-16GB", "T4"])
def test_mixed_precision_never_slows_a_per_op_convolution_net_on_tensor_cores(gpu):
    from traincast.zoo.profiles import workload_features

    feats = workload_features("mobilenet")
    jobs = {"architecture": np.array(["1w1g"], dtype=object), "n_gpus": [1],
            "gpu_type": np.array([gpu], dtype=object),
            "workload": np.array(["mobilenet"], dtype=object),
            **{k: [feats[k]] for k in JOB if k in feats}}
    fp32, amp = (predict_table(jobs, SHIPPED, amp=a) for a in (False, True))
    assert amp.compute[0] <= fp32.compute[0]


def test_breakdown_take_selects_jobs_in_order() -> None:
    from traincast.model import Breakdown

    bd = Breakdown(data_io=np.array([1.0, 2.0, 3.0]), compute_flop=np.array([4.0, 5.0, 6.0]),
                   compute_mem=np.array([7.0, 8.0, 9.0]), comm=np.array([0.0, 1.0, 2.0]),
                   total=np.array([12.0, 16.0, 20.0]), reason=np.array([0, 3, 0], np.int8))
    part = bd.take(np.array([2, 0]))
    assert part.data_io.tolist() == [3.0, 1.0] and part.total.tolist() == [20.0, 12.0]
    assert part.reason.tolist() == [0, 0] and part.idle is None


def test_fmt_sig_keeps_three_digits_and_an_exponent_only_outside_1e_6_to_1e15() -> None:
    from traincast.units import fmt_sig

    assert [fmt_sig(x) for x in (1490.4, 17.64, 0.09137, 0.0, 123456.0, 999.7, 5e-5, 1.5)] \
        == ["1,490", "17.6", "0.0914", "0", "123,000", "1,000", "0.0000500", "1.5"]
    assert fmt_sig(float("nan")) == "-" and fmt_sig(None) == "-"
    # far below one: an exponent, not hundreds of zeros (a 1e-300 GPU count in a table)
    assert [fmt_sig(x) for x in (1e-300, -2.5e-7, 1e-6)] == ["1.00e-300", "-2.50e-07",
                                                           "0.00000100"]
    # far above: an exponent too, not 300 digits (1e308 GB/s typed as a link's speed)
    assert [fmt_sig(x) for x in (1.25e307, 999e12, 1e15)] == ["1.25e+307", "999,000,000,000,000",
                                                            "1.00e+15"]


def test_pricing_a_job_does_not_load_the_trace_store():
    # traincast.bounds is a leaf module: reading features and predicting need neither the
    # trace store nor DuckDB (a fresh interpreter, as a user's script starts)
    import subprocess
    import sys

    code = ("import sys, traincast.predict, traincast.features.io; "
            "print('duckdb' in sys.modules, 'traincast.trace.store' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]


def test_predict_says_the_hosts_issue_time_per_row():
    # n_ops ops at the host's floor d each (kernels.op_floor_s), one value per row of array
    # features; none without an op count
    from traincast import kernels
    from traincast.predict import predict

    cat = load_catalog()
    d = 26.525e-6  # default_floor_us of hardware/kernel_model.toml: every GPU's, uncalibrated
    assert kernels.op_floor_s(cat.gpu("V100")) == pytest.approx(d)
    out = predict(flops_compute_bound=np.array([1e12, 2e12]),
                  bytes_memory_bound=np.array([1e9, 1e9]), weight_bytes=np.array([1e8, 1e8]),
                  n_ops=np.array([100, 200]), gpu="V100", catalog=cat)
    np.testing.assert_allclose(out.host_issue_s, [100 * d, 200 * d])
    one = predict(flops_compute_bound=1e12, bytes_memory_bound=1e9, weight_bytes=1e8,
                  n_ops=50, gpu="V100", catalog=cat)
    assert one.host_issue_s == pytest.approx(50 * d) and one.misaligned is None
    none = predict(flops_compute_bound=1e12, bytes_memory_bound=1e9, weight_bytes=1e8,
                   gpu="V100", catalog=cat)
    assert none.host_issue_s is None and none.kernel_strategy_available is None
    # a per-op table: each row issued as many times as it runs (count), 3 + 1 = 4 ops
    ops = [{"op": "mm", "flops": 1e9, "bytes_read": 1e6, "bytes_written": 1e6,
            "bound": "compute", "shapes": "64x64;64x64", "count": 3},
           {"op": "add", "flops": 0, "bytes_read": 1e6, "bytes_written": 1e6,
            "bound": "memory", "shapes": "64x64;64x64"}]
    table = predict({"flops_compute_bound": 3e9, "bytes_memory_bound": 2e6,
                     "weight_bytes": 1e8, "ops": ops}, gpu="V100", catalog=cat)
    assert table.host_issue_s == pytest.approx(4 * d)


def test_a_per_op_table_given_to_predict_scales_to_its_features_as_a_workload_does(cat):
    # the same job two ways: predict with the bert profile's table and 4x its features, and
    # predict_table with workload "bert" and those features; both scale the table's busy
    # times by F_row / F_table and B_row / B_table (F_table, B_table: the table's own sums)
    from traincast import predict_table
    from traincast.roofline import table_features
    from traincast.zoo.profiles import workload_ops

    prof = workload_ops("bert")
    sums = table_features(prof["ops"])
    assert sums == {"flops_compute_bound": prof["flops_compute_bound"],
                    "bytes_memory_bound": prof["bytes_memory_bound"]}
    f, b = 4 * prof["flops_compute_bound"], 4 * prof["bytes_memory_bound"]
    row = {"architecture": ["1w1g"], "n_gpus": [1.0], "gpu_type": ["A100"], "workload": ["bert"],
           "flops_compute_bound": [f], "bytes_memory_bound": [b], "weight_bytes": [4e8]}
    table = float(predict_table(row, cat).total[0])
    given = predict({"flops_compute_bound": f, "bytes_memory_bound": b, "weight_bytes": 4e8,
                     "ops": prof["ops"]}, gpu="A100", catalog=cat).time_s["total"]
    own = predict({**sums, "weight_bytes": 4e8, "ops": prof["ops"]}, gpu="A100",
                  catalog=cat).time_s["total"]
    assert given == pytest.approx(table, rel=1e-12)
    assert 3.0 * own < given < 4.0 * own  # busy time x4, the host's dispatch unchanged
    assert table_features([{"op": "x", "flops": 1.0}]) == {}  # unmarked: the kernel model's


def test_feature_arrays_name_the_row_and_field_and_the_api_keeps_the_bounds(cat):
    import json
    import warnings

    from traincast import predict_table
    from traincast.errors import TraincastError

    three = {"flops_compute_bound": np.array([1e12, np.nan, 1e12]),
             "bytes_memory_bound": np.array([1e9] * 3), "weight_bytes": np.array([1e8] * 3)}
    with pytest.raises(TraincastError, match=r"^row 2: features missing: flops_compute_bound"):
        predict(three, catalog=cat)
    three["flops_compute_bound"][1] = 1e30  # above the 1e24 a trace row may hold
    with pytest.raises(TraincastError, match=r"^row 2: flops_compute_bound must be a finite "
                                             r"number from 0 to 1e\+24, got 1e\+30"):
        predict(three, catalog=cat)
    # a table row out of bounds gets its reason and NaN, no overflow warning, the others a time
    rows = {"architecture": ["1w1g"] * 3, "n_gpus": [1.0, 0.5, 1.0],
            "flops_compute_bound": [1e12, 1.7e308, 1e12], "bytes_memory_bound": [1e9] * 3,
            "weight_bytes": [1e8] * 3, "n_ops": [10.0, 10.0, np.inf]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bd = predict_table(rows, cat)
    assert np.isfinite(bd.total[0]) and np.isnan(bd.total[1:]).all()
    assert set(bd.reason_name[1:]) == {"features negative, not finite or out of bounds"}
    # no work: shares of nothing are null in the JSON object, as the CLI prints them
    out = predict(flops_compute_bound=0.0, bytes_memory_bound=0.0, weight_bytes=0.0,
                  catalog=cat).to_dict()
    assert out["share"]["comm"] is None and out["gpu_util"] is None
    json.loads(json.dumps(out), parse_constant=lambda c: pytest.fail(f"bare {c}"))


def test_fmt_share_never_reads_a_small_or_near_whole_share_as_0_or_100() -> None:
    from traincast.units import fmt_share

    cases = {0.13: "13%", 0.004: "0.4%", -0.0004: "-0.04%", 0.00004: "0%", 0.996: "99.6%",
             0.9995: "99.95%", 0.9999: "99.99%", -0.9999: "-99.99%", 0.99949: "99.95%",
             0.99996: "100%", 1.0: "100%", 0.5: "50%", -0.25: "-25%", None: "-"}
    assert {x: fmt_share(x) for x in cases} == cases
    assert fmt_share(float("nan"), missing="n/a") == "n/a"
