"""What-if: hand-computed speedups, port rules and invariants."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# The numbers below are the shipped catalog's; this file pins them (efficiency 1) so the hand
# arithmetic stays right whatever efficiencies a calibrated catalog adds.
from conftest import PINNED  # re-exported for test_recommend and test_study
from traincast.analysis.quantiles import weighted_median
from traincast.analysis.whatif import whatif
from traincast.errors import TraincastError
from traincast.hardware.catalog import load_catalog
from traincast.scenarios import load_scenario, parse_scenario, shipped_scenarios, sweep

# Every job: T_flop = 1.57e12 / 15.7e12 = 0.1 s, T_mem = 9e9 / 900e9 = 0.01 s,
# T_data = 1.575e8 / 15.75e9 = 0.01 s; W = 2.5e8 bytes unless said otherwise.
W = 2.5e8
BIG_W = 5e9  # 4 W = 20 GB of weights, gradients and Adam state > 16 GB of a V100


def small_trace() -> dict[str, list]:
    return {
        "job_id": ["ps4", "ar16", "one", "ps16", "psbig"],
        "architecture": ["ps-worker", "allreduce-cluster", "1w1g", "ps-worker", "ps-worker"],
        "n_gpus": [4, 16, 1, 16, 2],
        "n_workers": [4, None, None, 16, 2],
        "n_ps": [1, None, None, 1, 1],
        "gpus_per_worker": [1, None, None, 1, 1],
        "gpu_type": ["V100"] * 5,
        "node": [None] * 5,
        "workload": [None] * 5,
        "flops_compute_bound": [1.57e12] * 5,
        "bytes_memory_bound": [9e9] * 5,
        "weight_bytes": [W, W, W, W, BIG_W],
        "embedding_bytes_touched": [0.0] * 5,
        "input_bytes": [1.575e8] * 5,
        "start_time_s": [0.0] * 5,
        "end_time_s": [100.0, 200.0, 300.0, 400.0, 500.0],
    }


def write_small_trace(path: Path) -> Path:
    """:func:`small_trace` as a canonical CSV (without the workload column)."""
    t = small_trace()
    cols = [c for c in t if c != "workload"]
    path.write_text("\n".join([",".join(cols)] + [
        ",".join("" if t[c][i] is None else str(t[c][i]) for c in cols)
        for i in range(len(t["job_id"]))]) + "\n")
    return path



def per_job(result: dict) -> dict[tuple[str, str], dict]:
    return {(r["job_id"], r["scenario"]): r for r in result["job_rows"].to_pylist()}


# ps4: ps-worker, m = 4 workers, p = 1, one GPU per worker (g = 1, k = min(g, m) = 1):
#   T_comm = 2W/pcie + max(2W k / nic, 2 m W / (p nic))
PS4_BASE = 0.12 + 2 * W / 15.75e9 + max(2 * W / 3.125e9, 2 * 4 * W / 3.125e9)
PS4_ETH100 = 0.12 + 2 * W / 15.75e9 + max(2 * W / 12.5e9, 2 * 4 * W / 12.5e9)
PS4_NVLINK = 0.12 + 2 * 3 / 4 * W / 150e9  # allreduce-local, n = 4: 2 (n-1)/n W / bw(intra)
# ar16: allreduce-cluster, n = 16 on 8-GPU nodes (N = 2): flat ring at min(intra, nic)
AR16_BASE = 0.12 + 2 * 15 / 16 * W / min(150e9, 3.125e9)
AR16_ETH100 = 0.12 + 2 * 15 / 16 * W / min(150e9, 12.5e9)
# psbig: m = 2, p = 1, W = 5e9
PSBIG_BASE = 0.12 + 2 * BIG_W / 15.75e9 + max(2 * BIG_W / 3.125e9, 2 * 2 * BIG_W / 3.125e9)
PSBIG_ETH100 = 0.12 + 2 * BIG_W / 15.75e9 + max(2 * BIG_W / 12.5e9, 2 * 2 * BIG_W / 12.5e9)
# ps16: m = 16, same per-worker formula as ps4 with m = 16
PS16_BASE = 0.12 + 2 * W / 15.75e9 + max(2 * W / 3.125e9, 2 * 16 * W / 3.125e9)
PS16_ETH100 = 0.12 + 2 * W / 15.75e9 + max(2 * W / 12.5e9, 2 * 16 * W / 12.5e9)


def test_hand_computed_eth100_and_nvlink(catalog) -> None:
    r = whatif(small_trace(), ["eth100", "nvlink-allreduce"], catalog, per_job=True)
    rows = per_job(r)
    assert rows[("ps4", "eth100")]["base_total_s"] == pytest.approx(PS4_BASE, rel=1e-12)
    assert rows[("ps4", "eth100")]["speedup"] == pytest.approx(PS4_BASE / PS4_ETH100, rel=1e-12)
    assert rows[("ar16", "eth100")]["speedup"] == pytest.approx(AR16_BASE / AR16_ETH100,
                                                                rel=1e-12)
    assert rows[("one", "eth100")]["speedup"] == 1.0  # 1w1g: no communication
    assert rows[("psbig", "eth100")]["speedup"] == pytest.approx(PSBIG_BASE / PSBIG_ETH100,
                                                                 rel=1e-12)
    assert rows[("ps16", "eth100")]["speedup"] == pytest.approx(PS16_BASE / PS16_ETH100,
                                                                rel=1e-12)
    # nvlink-allreduce: only ps4 fits one 8-GPU node with 4 W <= 16 GB
    assert rows[("ps4", "nvlink-allreduce")]["speedup"] == pytest.approx(
        PS4_BASE / PS4_NVLINK, rel=1e-12)
    assert rows[("ps4", "nvlink-allreduce")]["applied"]
    for job in ("ps16", "psbig"):  # 16 GPUs > 8; 4 x 5e9 = 20 GB > 16 GB
        assert rows[(job, "nvlink-allreduce")]["matched"]
        assert not rows[(job, "nvlink-allreduce")]["applied"]
        assert rows[(job, "nvlink-allreduce")]["speedup"] == 1.0
    for job in ("ar16", "one"):
        assert not rows[(job, "nvlink-allreduce")]["matched"]
        assert rows[(job, "nvlink-allreduce")]["speedup"] == 1.0

    nv = r["scenarios"]["nvlink-allreduce"]
    assert (nv["jobs"], nv["matched"], nv["applied"], nv["not_applied"]) == (5, 3, 1, 2)
    assert nv["sped_up_share"] == pytest.approx(1 / 3)
    mean = (PS4_BASE / PS4_NVLINK + 1 + 1) / 3
    assert nv["mean_speedup"] == pytest.approx(mean, rel=1e-12)
    assert nv["median_speedup"] == 1.0
    # GPU-weighted: weights n = 4, 16, 2
    gw = (4 * PS4_BASE / PS4_NVLINK + 16 + 2) / 22
    assert nv["gpu_weighted_mean_speedup"] == pytest.approx(gw, rel=1e-12)
    # GPU-time-weighted: n x duration = 400, 6400, 1000
    gtw = (400 * PS4_BASE / PS4_NVLINK + 6400 + 1000) / 7800
    assert nv["gpu_time_weighted_mean_speedup"] == pytest.approx(gtw, rel=1e-12)
    saved = 1 - (400 * PS4_NVLINK / PS4_BASE + 6400 + 1000) / 7800
    assert nv["gpu_time_saved_share"] == pytest.approx(saved, rel=1e-12)
    assert nv["by_architecture"]["ps-worker"]["matched"] == 3

    eth = r["scenarios"]["eth100"]
    speedups = [PS4_BASE / PS4_ETH100, AR16_BASE / AR16_ETH100, 1.0,
                PS16_BASE / PS16_ETH100, PSBIG_BASE / PSBIG_ETH100]
    assert eth["matched"] == 5
    assert eth["mean_speedup"] == pytest.approx(sum(speedups) / 5, rel=1e-12)
    assert eth["median_speedup"] == pytest.approx(sorted(speedups)[2], rel=1e-12)
    assert eth["sped_up_share"] == pytest.approx(4 / 5)
    # GPU-weighted median: ascending speedups one (n=1) 1.0, ar16 (16) 1.71, ps4 (4) 2.54,
    # psbig (2) 3.04, ps16 (16) 3.42; half of 39 GPUs = 19.5 is reached at ps4 (1 + 16 + 4)
    assert sorted(speedups) == [speedups[2], speedups[1], speedups[0], speedups[4],
                                speedups[3]]
    assert eth["gpu_weighted_median_speedup"] == pytest.approx(speedups[0], rel=1e-12)
    assert nv["gpu_weighted_median_speedup"] == 1.0  # 18 of 22 GPUs are in unported jobs


def test_single_scenario_has_summary_object(catalog) -> None:
    r = whatif(small_trace(), "eth100", catalog)
    assert set(r) >= {"jobs", "summary", "definitions"}
    for key in ("jobs", "matched", "sped_up_share", "mean_speedup", "median_speedup",
                "gpu_weighted_mean_speedup"):
        assert key in r["summary"]


def test_jobs_without_gpus_are_not_matched_nor_an_architecture(catalog) -> None:
    # two CPU-only jobs (0 GPUs, none recorded) beside the five: no scenario matches them and
    # by_architecture has no row for them; they count in jobs (7)
    t = small_trace()
    for col, values in t.items():
        values.extend({"job_id": ["cpu0", "cpu1"], "n_gpus": [0, None],
                       "architecture": [None, None]}.get(col, values[-1:] * 2))
    out = whatif(t, "gpu-a100", catalog, per_job=True)
    r = out["summary"]
    assert (r["jobs"], r["matched"]) == (7, 5)
    rows = out["job_rows"].to_pydict()  # the per-job rows say the same, job by job
    matched = dict(zip(rows["job_id"], rows["matched"], strict=True))
    assert (matched["cpu0"], matched["cpu1"]) == (False, False)
    assert sum(matched.values()) == 5
    assert "unknown" not in r["by_architecture"] and "no GPUs" not in r["by_architecture"]
    assert sum(b["jobs"] for b in r["by_architecture"].values()) == 5


def test_sweep_nic(catalog) -> None:
    r = whatif(small_trace(), [], catalog, sweep_spec="nic=25Gbit,100Gbit", per_job=True)
    assert list(r["scenarios"]) == ["nic=25Gbit", "nic=100Gbit"]
    assert r["scenarios"]["nic=25Gbit"]["mean_speedup"] == pytest.approx(1.0, rel=1e-12)
    rows = per_job(r)
    # 100 Gbit typed as a speed = 12.5 GB/s, the same as the eth100 link
    assert rows[("ps4", "nic=100Gbit")]["speedup"] == pytest.approx(PS4_BASE / PS4_ETH100,
                                                                    rel=1e-12)


def test_scenario_matching_nothing_gives_one(catalog) -> None:
    sc = {"name": "none", "match": {"workload": ["no-such-workload"]},
          "changes": {"nic": "eth100", "gpu": "H100-SXM5-80GB"}}
    r = whatif(small_trace(), sc, catalog, per_job=True)
    assert r["summary"]["matched"] == 0
    assert all(s == 1.0 for s in r["job_rows"]["speedup"].to_pylist())


def test_match_clause_gpu_range_and_type(catalog) -> None:
    sc = {"name": "mid", "match": {"min_gpus": 2, "max_gpus": 4, "gpu_type": ["V100"]},
          "changes": {"nic": "eth100"}}
    r = whatif(small_trace(), sc, catalog, per_job=True)
    matched = {row["job_id"] for row in r["job_rows"].to_pylist() if row["matched"]}
    assert matched == {"ps4", "psbig"}


def test_port_to_allreduce_cluster_packs_gpus(catalog) -> None:
    # ps16 as allreduce-cluster: GPUs packed 8 per node, N = 2: flat ring over the NIC
    r = whatif(small_trace(), "allreduce-cluster", catalog, per_job=True)
    rows = per_job(r)
    ported = 0.12 + 2 * 15 / 16 * W / 3.125e9
    assert rows[("ps16", "allreduce-cluster")]["scenario_total_s"] == pytest.approx(
        ported, rel=1e-12)
    assert rows[("ps16", "allreduce-cluster")]["speedup"] == pytest.approx(
        PS16_BASE / ported, rel=1e-12)
    assert not rows[("psbig", "allreduce-cluster")]["applied"]  # 20 GB per GPU > 16 GB


def test_overlap_and_gpu_change(catalog) -> None:
    sc = {"name": "ov", "changes": {"overlap": 1.0}}
    r = whatif(small_trace(), sc, catalog, per_job=True)
    # f = 1: T = T_data + max(T_comp, T_comm); ar16: T_comm = 0.15 > T_comp = 0.11
    expected = 0.01 + max(0.11, AR16_BASE - 0.12)
    assert per_job(r)[("ar16", "ov")]["scenario_total_s"] == pytest.approx(expected, rel=1e-12)


def profile_job(workload: str, arch: str, n: int) -> dict:
    from traincast.zoo.profiles import workload_features

    p = workload_features(workload)
    return {"job_id": f"{workload}-{arch}-{n}", "architecture": arch, "n_gpus": n,
            "n_workers": n if arch == "ps-worker" else None,
            "n_ps": 1 if arch == "ps-worker" else None,
            "gpus_per_worker": 1 if arch == "ps-worker" else None, "gpu_type": "V100",
            "workload": workload, "batch_size": p["batch_size"],
            **{k: float(p[k]) for k in ("flops_compute_bound", "bytes_memory_bound",
                                        "weight_bytes", "embedding_bytes_touched",
                                        "input_bytes")}}


def test_profile_memory_fit_and_precision(catalog) -> None:
    from traincast.zoo.profiles import workload_features

    jobs = [profile_job("bert", "ps-worker", 4), profile_job("llama", "ps-worker", 4),
            profile_job("bert", "1w1g", 1)]
    table = {k: [j[k] for j in jobs] for k in jobs[0]}
    both = {"name": "amp+fusion", "changes": {"amp": True, "fusion": True}}
    r = whatif(table, ["nvlink-allreduce", "mixed-precision", "op-fusion", both], catalog,
               per_job=True)
    rows = per_job(r)
    bert, llama = workload_features("bert"), workload_features("llama")
    # footprint per GPU as allreduce = weights + grads + optimizer + activations (profile batch)
    assert sum(bert["memory_bytes"].values()) <= 16e9 < sum(llama["memory_bytes"].values())
    assert rows[("bert-ps-worker-4", "nvlink-allreduce")]["applied"]
    assert not rows[("llama-ps-worker-4", "nvlink-allreduce")]["applied"]
    assert rows[("llama-ps-worker-4", "nvlink-allreduce")]["speedup"] == 1.0

    data = bert["input_bytes"] / 15.75e9
    base = data + bert["flops_compute_bound"] / 15.7e12 + bert["bytes_memory_bound"] / 900e9
    amp = (data + bert["flops_compute_bound_amp"] / 125e12
           + bert["bytes_memory_bound_amp"] / 900e9)
    fused = (data + bert["flops_compute_bound"] / 15.7e12
             + bert["bytes_memory_bound_fused"] / 900e9)
    fused_amp = (data + bert["flops_compute_bound_amp"] / 125e12
                 + bert["bytes_memory_bound_fused_amp"] / 900e9)
    one = "bert-1w1g-1"
    assert rows[(one, "mixed-precision")]["base_total_s"] == pytest.approx(base, rel=1e-12)
    assert rows[(one, "mixed-precision")]["scenario_total_s"] == pytest.approx(amp, rel=1e-12)
    assert rows[(one, "op-fusion")]["scenario_total_s"] == pytest.approx(fused, rel=1e-12)
    assert rows[(one, "amp+fusion")]["scenario_total_s"] == pytest.approx(fused_amp,
                                                                         rel=1e-12)


def test_shipped_scenarios_load() -> None:
    cat = load_catalog()
    names = shipped_scenarios()
    assert {"nvlink-allreduce", "eth100", "gpu-a100", "mixed-precision", "op-fusion"} <= set(
        names)
    for name in names:
        sc = load_scenario(name, cat)
        assert sc.changes and sc.source


def test_bad_scenario_files_name_file_and_key(tmp_path: Path) -> None:
    cat = load_catalog()
    bad = tmp_path / "bad.toml"
    bad.write_text('[match]\narchitecture = "ps-worker"\n[changes]\nnic = "eth999"\n')
    with pytest.raises(TraincastError, match=r"bad\.toml.*nic"):
        load_scenario(bad, cat)
    bad.write_text('[match]\ncolour = "red"\n[changes]\nnic = "eth100"\n')
    with pytest.raises(TraincastError, match="colour"):
        load_scenario(bad, cat)
    bad.write_text("[match]\n")
    with pytest.raises(TraincastError, match="changes"):
        load_scenario(bad, cat)
    with pytest.raises(TraincastError, match="unknown scenario"):
        load_scenario("no-such-scenario", cat)


def test_scenario_file_errors_show_the_value(tmp_path: Path) -> None:
    cat = load_catalog()
    bad = tmp_path / "s.toml"
    for text, want in (
            ('description = 5\n[changes]\nnic = "eth100"\n', "must be a string, got 5"),
            ('changes = "nic=eth100"\n', "got changes = 'nic=eth100'"),
            ('[match]\nmin_gpus = 9\nmax_gpus = 2\n[changes]\nnic = "eth100"\n',
             "min_gpus = 9 is larger than max_gpus = 2"),
            ('[changes]\nbandwidth = "100Gbit"\n', "'bandwidth' (= '100Gbit')"),
            ('name = " "\n[changes]\nnic = "eth100"\n', "key 'name' is empty")):
        bad.write_text(text)
        with pytest.raises(TraincastError, match=re.escape(want)):
            load_scenario(bad, cat)


def test_a_shipped_name_is_the_shipped_scenario_beside_a_file_of_that_name(
        tmp_path: Path, monkeypatch) -> None:
    cat = load_catalog()
    monkeypatch.chdir(tmp_path)
    Path("eth100").write_text('[changes]\nnic = "eth10"\n')
    assert load_scenario("eth100", cat).changes["nic"] == "eth100"
    assert load_scenario("./eth100", cat).changes["nic"] == "eth10"  # a path: the file


def test_a_sweep_value_given_twice_is_refused() -> None:
    with pytest.raises(TraincastError, match="eth100 given twice"):
        sweep([], "nic", ["eth100", "eth50", "eth100"], load_catalog())


def test_weighted_median() -> None:
    # values 1, 2, 3 with weights 1, 1, 10: half of 12 is reached at 3
    assert weighted_median(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 10.0])) == 3.0
    assert weighted_median(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 1.0])) == 2.0
    assert math.isnan(weighted_median(np.array([1.0]), np.array([0.0])))
    # large inputs (the selection path) against the definition by sorting, with many ties
    rng = np.random.default_rng(4)
    for n in (3000, 20000):
        x = np.round(rng.lognormal(0, 1, n), 2)
        x[rng.random(n) < 0.5] = 1.0
        w = rng.integers(0, 9, n).astype(float)
        order = np.argsort(x, kind="stable")
        cum = np.cumsum(w[order])
        assert weighted_median(x, w) == x[order][np.searchsorted(cum, 0.5 * cum[-1])]


NICS = ["eth25", "eth40", "eth50", "eth100", "eth200", "eth400", "ib-edr", "ib-hdr", "ib-ndr"]
PCIES = ["pcie3x16", "pcie4x16", "pcie5x16"]
INTRAS = ["nvlink2-v100", "nvlink3-a100", "nvlink4-h100", "nvlink5-b200"]
GPUS = ["V100-SXM2-16GB", "V100-SXM2-32GB", "A100-SXM4-80GB", "H100-SXM5-80GB",
        "H200-SXM-141GB", "B200"]  # each at least the V100's fp32 peak and memory bandwidth

job_strategy = st.fixed_dictionaries({
    "architecture": st.sampled_from(["1w1g", "allreduce-local", "allreduce-cluster",
                                     "ps-worker", "pearl"]),
    "n": st.integers(1, 64), "ps": st.integers(1, 8),
    "flops": st.floats(1e6, 1e15), "mem": st.floats(1e3, 1e12),
    "w": st.floats(1e3, 2e9), "e": st.floats(0, 1e9), "d": st.floats(0, 1e9)})


@settings(max_examples=60, deadline=None)
@given(jobs=st.lists(job_strategy, min_size=1, max_size=12),
       nic=st.sampled_from(NICS), pcie=st.sampled_from(PCIES), intra=st.sampled_from(INTRAS),
       gpu=st.sampled_from([None, *GPUS]))
def test_hardware_upgrade_never_slows_a_job(jobs, nic, pcie, intra, gpu) -> None:
    cat = load_catalog()
    table = {
        "architecture": [j["architecture"] for j in jobs],
        "n_gpus": [1 if j["architecture"] == "1w1g" else
                   min(j["n"], 8) if j["architecture"] == "allreduce-local" else j["n"]
                   for j in jobs],
        "n_ps": [j["ps"] for j in jobs], "node": ["pai-v100-nvlink"] * len(jobs),
        "flops_compute_bound": [j["flops"] for j in jobs],
        "bytes_memory_bound": [j["mem"] for j in jobs],
        "weight_bytes": [j["w"] for j in jobs],
        "embedding_bytes_touched": [j["e"] for j in jobs],
        "input_bytes": [j["d"] for j in jobs]}
    changes = {"nic": nic, "pcie": pcie, "intra": intra}
    if gpu:
        changes["gpu"] = gpu
    r = whatif(table, {"name": "up", "changes": changes}, cat, per_job=True)
    speedup = np.array(r["job_rows"]["speedup"].to_pylist())
    assert np.all(speedup >= 1.0 - 1e-12)


def test_public_api_functions_stay_callable_after_submodule_imports() -> None:
    import traincast
    import traincast.analysis.recommend
    import traincast.analysis.study
    import traincast.analysis.whatif  # noqa: F401

    # the modules live in traincast.analysis: importing them never rebinds traincast.whatif
    assert callable(traincast.whatif) and callable(traincast.recommend)
    assert callable(traincast.study) and callable(traincast.characterize)


def test_cli_table_fits_80_columns(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from traincast.cli import app
    from traincast.cli.common import console

    monkeypatch.setattr(console, "width", 80)
    monkeypatch.chdir(tmp_path)
    trace = write_small_trace(tmp_path / "t.csv")
    pinned = tmp_path / "pinned.toml"
    pinned.write_text(PINNED)
    res = CliRunner().invoke(app, ["whatif", str(trace), "-s", "nvlink-allreduce", "-s",
                                   "allreduce-cluster", "-s", "eth100", "--catalog", str(pinned)])
    assert res.exit_code == 0, res.output
    assert "…" not in res.stdout and max(map(len, res.stdout.splitlines())) <= 80
    rows = {line.split()[0]: line.split()[1:] for line in res.stdout.splitlines()
            if line.split() and line.split()[0] in ("nvlink-allreduce", "allreduce-cluster",
                                                    "eth100", "ps-worker")}
    # nvlink-allreduce matches the 3 PS/Worker jobs; only ps4 fits one 8-GPU node
    assert rows["nvlink-allreduce"][:2] == ["3", "2"]
    assert rows["eth100"][0] == "5"
    # up/down: 100 Gbit Ethernet speeds up some jobs and slows none down
    assert rows["eth100"][2].endswith("/0%") and rows["eth100"][2] != "0%/0%"
    assert "by architecture" in res.stdout and "per-architecture tables" not in res.stdout
    # four scenarios: no table per architecture, and a line says why
    res = CliRunner().invoke(app, ["whatif", str(trace), "-s", "nvlink-allreduce", "-s",
                                   "allreduce-cluster", "-s", "eth100", "-s", "gpu-a100",
                                   "--catalog", str(pinned)])
    assert res.exit_code == 0, res.output
    said = " ".join(res.stdout.split())
    assert "by architecture" not in said
    assert "per-architecture tables: with three scenarios or fewer (here 4)" in said


def test_saved_share_reads_its_sign_below_one_percent() -> None:
    from traincast.cli.whatif import _saved, _up_down

    assert _saved(-0.0002) == "-0.02%" and _saved(0.004) == "0.4%"
    assert _saved(0.0) == "0%" and _saved(0.36) == "36%"
    assert _saved(-1e-16) == "0%" and _saved(2e-7) == "0%"  # float noise, not "-1e-14%"
    assert _up_down({"sped_up_share": 0.28, "slowed_down_share": 0.5}) == "28%/50%"


def test_a_base_given_by_the_caller_is_used_chunk_by_chunk(catalog) -> None:
    # the jobs' own breakdown handed in gives what the engine computes itself, in any chunking
    from traincast.engine.local import evaluate_columns, run_scenarios
    from traincast.jobs import Columns

    cols = Columns.of(small_trace())
    scs = [load_scenario("eth100", catalog), load_scenario("nvlink-allreduce", catalog)]
    base = evaluate_columns(cols, catalog)
    for chunk_rows in (2, 5):
        own = run_scenarios(cols, scs, catalog, chunk_rows=chunk_rows)
        given_ = run_scenarios(cols, scs, catalog, chunk_rows=chunk_rows, base=base)
        np.testing.assert_array_equal(given_[0], own[0])
        np.testing.assert_array_equal(given_[1], own[1])
        for a, b in zip(given_[2], own[2], strict=True):
            np.testing.assert_array_equal(a.total_s, b.total_s)
            np.testing.assert_array_equal(a.applied, b.applied)
    assert own[0][0] == pytest.approx(PS4_BASE)  # the hand-computed base of ps4


def _cli_json(args: list[str]) -> dict:
    import json

    from typer.testing import CliRunner

    from traincast.cli import app

    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_one_job_by_flags_is_priced_as_predict_prices_it() -> None:
    job = ["--model", "zoo:bert-base", "--arch", "ps-worker", "--workers", "8", "--ps", "2"]
    out = _cli_json(["whatif", *job, "-s", "eth100"])
    (row,) = out["job_rows"]
    base = _cli_json(["predict", *job])["time_s"]["total"]
    eth100 = _cli_json(["predict", *job, "--nic", "eth100"])["time_s"]["total"]
    assert row["applied"] and row["base_total_s"] == pytest.approx(base, rel=1e-9)
    assert row["scenario_total_s"] == pytest.approx(eth100, rel=1e-9)
    assert row["speedup"] == pytest.approx(base / eth100, rel=1e-9)
    # the same job by its workload tag with one of the job's flags: the zoo's profile of it
    (tagged,) = _cli_json(["whatif", "--workload", "bert-base", *job[2:], "-s", "eth100"]
                          )["job_rows"]
    assert tagged["base_total_s"] == pytest.approx(base, rel=1e-9)


def test_one_jobs_own_memory_decides_whether_a_port_fits(tmp_path: Path) -> None:
    """A profile whose activations need 100 GB: S + A = 1 + 1 + 2 + 100 = 104 GB per GPU for a
    replica (docs/scenarios.md), above a 16 GB V100's memory, so porting its PS/Worker job to
    AllReduce on the V100 NVLink node does not fit; the same features without the profile's
    memory (S = 4 W = 0.4 GB, A = 0) fit."""
    import json

    feats = {"flops_compute_bound": 1e12, "bytes_memory_bound": 1e10, "weight_bytes": 1e8,
             "memory_bytes": {"weights": 1e9, "grads": 1e9, "optimizer": 2e9,
                              "activations": 100e9}}
    big, small = tmp_path / "big.json", tmp_path / "small.json"
    big.write_text(json.dumps(feats))
    small.write_text(json.dumps({k: v for k, v in feats.items() if k != "memory_bytes"}))
    job = ["--arch", "ps-worker", "--workers", "8", "--ps", "2", "-s", "nvlink-allreduce"]
    (row,) = _cli_json(["whatif", "--features", str(big), *job])["job_rows"]
    assert row["matched"] and not row["applied"] and row["speedup"] == 1.0
    (row,) = _cli_json(["whatif", "--features", str(small), *job])["job_rows"]
    assert row["applied"] and row["speedup"] > 1.0
    # recommend reads the same profile: on its own V100s no port fits, so the job keeps its
    # architecture; anywhere, only a GPU of at least 104 GB
    catalog = load_catalog()
    job = ["--arch", "ps-worker", "--workers", "8", "--ps", "2"]
    rec = _cli_json(["recommend", "--features", str(big), *job])["rows"][0]
    assert rec["arch_architecture"] == "ps-worker"
    assert catalog.gpu(catalog.node(rec["best_node"]).gpu).mem_gb >= 104
    rec = _cli_json(["recommend", "--features", str(small), *job])["rows"][0]
    assert rec["arch_architecture"] == "allreduce-local"


def test_one_job_flags_are_refused_where_they_do_not_apply(tmp_path: Path, tc) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus,workload\na,1,resnet50\n")
    for args, says in (
            ([str(trace), "--model", "zoo:resnet50"], "either a TRACE or one job's flags"),
            (["--db", str(tmp_path / "s.duckdb"), "--gpus", "4"], "--gpus: flags of one job"),
            (["--model", "zoo:resnet50", "--engine", "dask"], "runs on the local engine"),
            (["--model", "zoo:resnet50", "--arch", "1w1g", "--workers", "2"],
             "--workers applies to --arch ps-worker only")):
        res = tc("whatif", *args, "-s", "eth100")
        assert res.returncode == 2 and says in " ".join(res.stderr.split()), res.stderr


def test_a_jobs_own_profile_takes_its_workloads_ratios_not_its_numbers() -> None:
    from traincast.engine.workload import job_profile

    shipped = {"bytes_memory_bound": 20.0, "bytes_memory_bound_amp": 11.0,
               "bytes_memory_bound_fused": 15.0, "bytes_memory_bound_fused_amp": 8.0,
               "flops_compute_bound": 200.0, "flops_compute_bound_amp": 200.0}
    own = {"bytes_memory_bound": 10.0, "flops_compute_bound": 100.0,
           "bytes_memory_bound_fused": 7.0}
    out = job_profile(own, shipped)  # at another batch: the shipped ratios on its own values
    assert out["bytes_memory_bound_amp"] == pytest.approx(10 * 11 / 20)
    assert out["bytes_memory_bound_fused"] == 7.0  # its own, given
    assert out["bytes_memory_bound_fused_amp"] == pytest.approx(10 * 8 / 20)
    assert out["flops_compute_bound_amp"] == pytest.approx(100.0)
    amp = job_profile({**own, "amp": True}, shipped)  # already mixed precision: ratio 1
    assert amp["bytes_memory_bound_amp"] == 10.0 and amp["flops_compute_bound_amp"] == 100.0
    assert amp["bytes_memory_bound_fused_amp"] == 7.0
    assert "bytes_memory_bound_amp" not in job_profile(own, None)  # nothing to scale by


def test_mixed_precision_speeds_up_one_job_at_any_batch() -> None:
    for batch in ("64", "32"):  # 64: the zoo's own batch
        (row,) = _cli_json(["whatif", "--model", "zoo:resnet50", "--batch", batch,
                            "--node", "dgx-a100", "-s", "mixed-precision"])["job_rows"]
        assert row["applied"] and row["speedup"] > 1.2, (batch, row)


def test_a_profile_under_amp_is_priced_in_mixed_precision_as_predict_prices_it(
        tmp_path: Path) -> None:
    import json

    amp = tmp_path / "amp.json"  # profiled under autocast, no per-op table
    amp.write_text(json.dumps({"flops_compute_bound": 1e12, "bytes_memory_bound": 1e10,
                               "weight_bytes": 1e8, "amp": True}))
    for paper in ([], ["--compute", "paper"]):
        job = ["--features", str(amp), "--node", "dgx-a100", *paper]
        (row,) = _cli_json(["whatif", *job, "-s", "mixed-precision"])["job_rows"]
        base = _cli_json(["predict", *job])["time_s"]["total"]
        assert row["base_total_s"] == pytest.approx(base, rel=1e-9)
        assert row["speedup"] == pytest.approx(1.0)  # already mixed precision
    # at the paper's flat peaks: 1e12 FLOPs at the A100's fp16 312 TFLOP/s, not fp32's 19.5
    paper = _cli_json(["predict", "--features", str(amp), "--node", "dgx-a100",
                       "--compute", "paper"])
    assert paper["time_s"]["compute_flop"] == pytest.approx(1e12 / 312e12, rel=1e-6)


def test_one_job_flags_that_mean_nothing_are_refused(tmp_path: Path, tc) -> None:
    job = ["--flops", "1e12", "--mem-bytes", "1e10", "--weight-bytes", "1e8"]
    for args, says in (
            ([*job, "--gpu", "foo"], "unknown GPU 'foo' (--gpu)"),
            ([*job, "--node", "foo"], "unknown node 'foo' (--node)"),
            ([*job, "--batch", "8"], "--batch applies to --model"),
            (["--workload", "resnet50", "--gpus", "2", "--mem-bytes", "1e15"],
             "--mem-bytes: features of a job given by --flops"),
            ([*job, "--db", str(tmp_path / "s.duckdb")], "--db: flags of a trace or the store"),
            ([*job, "-f", "csv"], "--format: flags of a trace or the store; they do not apply "
                                  "to one job given by flags"),
            ([*job, "--map", "n_gpus=x"], "--map: flags of a trace or the store"),
            (["--workload", "resnet50", "--batch", "8"], "--batch applies to --model")):
        for command in ("whatif", "recommend"):
            res = tc(command, *args, *(["-s", "eth100"] if command == "whatif" else []))
            assert res.returncode == 2 and says in " ".join(res.stderr.split()), (args, res)
    # the job as given cannot run (1w1g, the default, on two GPUs; allreduce-local beyond its
    # node): whatif refuses it, as predict does; recommend finds a setup that can
    # (docs/scenarios.md), as for a trace row of that shape
    for args, says in (
            ([*job, "--gpus", "2"], "1w1g runs on exactly one GPU: n_gpus = 2 (--gpus)"),
            (["--workload", "resnet50", "--gpus", "16", "--arch", "allreduce-local", "--node",
              "dgx-a100"], "allreduce-local runs inside one node: n_gpus = 16 (--gpus)")):
        res = tc("whatif", *args, "-s", "eth100")
        assert res.returncode == 2 and says in " ".join(res.stderr.split()), (args, res)
        res = tc("recommend", *args, "--json")
        assert res.returncode == 0, res.stderr
        (row,) = json.loads(res.stdout)["rows"]
        assert row["best_reason"].endswith("(as given: shape does not fit the architecture)")


def test_a_features_file_takes_the_ratios_of_the_model_it_names(tmp_path: Path) -> None:
    # the same profile as --model zoo:resnet50 gives, written to a file: its "model" names the
    # zoo profile whose fusion and mixed-precision ratios it takes, without --workload
    import json

    from traincast.features.profile import profile_model

    profile = profile_model("zoo:resnet50", batch_size=64, ops=True)
    path, plain = tmp_path / "r50.json", tmp_path / "unnamed.json"
    path.write_text(json.dumps(profile))
    plain.write_text(json.dumps({k: v for k, v in profile.items() if k != "model"}))
    job = ["--node", "dgx-a100", "-s", "op-fusion", "-s", "mixed-precision"]

    def times(*args: str) -> dict[str, float]:
        rows = _cli_json(["whatif", *args, *job])["job_rows"]
        return {r["scenario"]: r["scenario_total_s"] for r in rows}

    by_model, by_file = times("--model", "zoo:resnet50", "--batch", "64"), times(
        "--features", str(path))
    assert by_file["op-fusion"] == pytest.approx(by_model["op-fusion"], rel=1e-9)
    # mixed precision: the --model job is profiled again under autocast (its casts priced),
    # the file keeps its fp32 table at the mixed-precision rates (no torch needed), its bytes
    # scaled by the named model's ratio: without the name, ratio 1, another time (fusion
    # takes the file's own fused bytes either way)
    unnamed = times("--features", str(plain))
    assert by_file["mixed-precision"] != pytest.approx(unnamed["mixed-precision"], rel=1e-3)
    assert by_file["op-fusion"] == pytest.approx(unnamed["op-fusion"], rel=1e-9)


def test_an_amp_profile_without_its_fused_bytes_is_not_made_mixed_twice() -> None:
    from traincast.engine.workload import job_profile

    shipped = {"bytes_memory_bound": 20.0, "bytes_memory_bound_amp": 10.0,
               "bytes_memory_bound_fused_amp": 8.0}
    out = job_profile({"amp": True, "bytes_memory_bound": 12.0}, shipped)
    # its 12 bytes are mixed already: fused over the shipped amp bytes, 12 x 8 / 10
    assert out["bytes_memory_bound_fused_amp"] == pytest.approx(12 * 8 / 10)


def test_whatif_and_recommend_caution_a_gpu_priced_at_flat_peaks(tc, tmp_path: Path) -> None:
    # a GPU entry with datasheet peaks only is priced at them (paper strategy) while the jobs'
    # own GPUs are priced by the kernel model: the forecasts onto it are flagged, by scenario
    # (whatif) and by candidate GPU (recommend), in --json and on the terminal
    import json

    from test_hybrid_defaults import FLAT_GPU

    cat = tmp_path / "flat.toml"
    cat.write_text(FLAT_GPU)
    sc = tmp_path / "to-flat.toml"
    sc.write_text('name = "to-flat"\ndescription = "d"\nsource = "s"\n[changes]\n'
                  'gpu = "FLATGPU"\n')
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus,architecture,gpu_type,workload\n"
                     "a,1,1w1g,V100,resnet50\nb,1,1w1g,T4,bert-base\n")
    run = tc("whatif", str(trace), "--db", str(tmp_path / "s.duckdb"), "--catalog", str(cat),
             "-s", str(sc), "-s", "eth100", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["flat_peak"] == {"to-flat": ["FLATGPU"]}
    run = tc("whatif", "--db", str(tmp_path / "s.duckdb"), "--catalog", str(cat), "-s", str(sc))
    assert "caution: to-flat moves jobs onto FLATGPU, priced at flat datasheet peaks" in \
        " ".join(run.stdout.split())
    run = tc("recommend", "--db", str(tmp_path / "s.duckdb"), "--catalog", str(cat),
             "--candidate-node", "flat-node", "--candidate-node", "dgx-a100", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["flat_peak_gpus"] == ["FLATGPU"]
    run = tc("recommend", "--db", str(tmp_path / "s.duckdb"), "--candidate-node", "dgx-a100",
             "--json")
    assert json.loads(run.stdout)["flat_peak_gpus"] == []


def test_an_upgrade_scenario_leaves_jobs_already_on_a_faster_link_as_they_are() -> None:
    # eth100 upgrades the 25 Gbit PAI node; a DGX H100's 400 Gbit NDR ports would be slowed
    # down by it, so that job is not matched (upgrade_only) and keeps its time
    jobs = {"job_id": ["pai", "dgx"], "architecture": ["allreduce-cluster"] * 2,
            "n_gpus": [16.0, 16.0], "node": ["pai-v100-nvlink", "dgx-h100"],
            "flops_compute_bound": [2.4e13] * 2, "bytes_memory_bound": [4e10] * 2,
            "weight_bytes": [1e8] * 2}
    cat = load_catalog()
    for name in ("eth100", "ib-hdr"):
        r = whatif(jobs, name, cat, per_job=True)
        rows = {row["job_id"]: row for row in r["job_rows"].to_pylist()}
        assert rows["pai"]["matched"] and rows["pai"]["speedup"] > 1.0, name
        assert not rows["dgx"]["matched"] and rows["dgx"]["speedup"] == 1.0, name
    # a link the job already has matches nobody: nvlink-on on an NVLink node
    r = whatif(jobs, "nvlink-on", cat)
    assert r["summary"]["matched"] == 0
    # without upgrade_only the same change is applied to both (a user's own scenario)
    own = parse_scenario({"changes": {"nic": "eth100"}}, "own", cat)
    r = whatif(jobs, own, cat, per_job=True)
    rows = {row["job_id"]: row for row in r["job_rows"].to_pylist()}
    assert rows["dgx"]["matched"] and rows["dgx"]["speedup"] < 1.0


def test_a_scenarios_match_must_be_a_table_and_upgrade_only_needs_a_link() -> None:
    cat = load_catalog()
    with pytest.raises(TraincastError, match=r"\[match\] must be a table"):
        parse_scenario({"match": "x", "changes": {"nic": "eth100"}}, "s", cat)
    with pytest.raises(TraincastError, match="key 'architecture': is an empty list: it would "
                                             "match no job"):
        parse_scenario({"match": {"architecture": []}, "changes": {"nic": "eth100"}}, "s", cat)
    with pytest.raises(TraincastError, match="upgrade_only needs a link"):
        parse_scenario({"match": {"upgrade_only": True}, "changes": {"amp": True}}, "s", cat)
    with pytest.raises(TraincastError, match="must be true or false"):
        parse_scenario({"match": {"upgrade_only": "yes"}, "changes": {"nic": "eth100"}}, "s", cat)


def test_a_link_sweep_of_an_upgrade_scenario_prices_every_value() -> None:
    # eth100 swept over eth10 and eth25: the job on 25 Gbit Ethernet is slowed by eth10 and
    # unchanged by eth25, each matched (the sweep drops upgrade_only)
    jobs = {"job_id": ["pai"], "architecture": ["allreduce-cluster"], "n_gpus": [16.0],
            "node": ["pai-v100-nvlink"], "flops_compute_bound": [2.4e13],
            "bytes_memory_bound": [4e10], "weight_bytes": [1e8]}
    r = whatif(jobs, "eth100", load_catalog(), sweep_spec="nic=eth10,eth25")
    slow, same = (r["scenarios"][f"eth100:nic={v}"] for v in ("eth10", "eth25"))
    assert slow["matched"] == same["matched"] == 1
    assert slow["mean_speedup"] < 1.0 and same["mean_speedup"] == pytest.approx(1.0)


def test_a_workload_clause_matches_names_tags_and_zoo_prefixes_alike() -> None:
    # [workload.bert] stands for bert-base (zoo/models.toml): "bert" and "bert-base" are one
    # workload; transformer-nmt is another; an unknown tag matches only itself
    from traincast.engine.local import workload_matcher

    jobs = ["bert-base", "BERT", "zoo:bert-base", " Bert-Base ", "transformer-nmt", "nmt",
            "my-tag", "MY-TAG"]
    for wanted in (["bert"], ["bert-base"], ["zoo:bert-base"], ["BERT"]):
        match = workload_matcher(wanted)
        assert [match(j) for j in jobs] == [True] * 4 + [False] * 4, wanted
    match = workload_matcher(["nmt", "my-tag"])
    assert [match(j) for j in jobs] == [False] * 4 + [True] * 4
    # resnet, inception and cnn all stand for resnet50 (zoo/models.toml), yet are three
    # workloads: a tag matches its own stand-in model, not another tag
    match = workload_matcher(["resnet"])
    assert [match(j) for j in ("resnet", "resnet50", "zoo:ResNet50", "inception", "cnn")] == \
        [True, True, True, False, False]
    assert [workload_matcher(["resnet50"])(j) for j in ("resnet", "inception", "cnn")] == \
        [True, True, True]


def test_a_one_job_whatif_matches_its_model_by_workload(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from traincast.cli import app

    sc = tmp_path / "bert.toml"
    sc.write_text('description = "d"\n[match]\nworkload = ["bert"]\n[changes]\noverlap = 0.5\n')
    res = CliRunner().invoke(app, ["whatif", "--model", "zoo:bert-base", "--arch", "ps-worker",
                                   "--workers", "8", "--ps", "2", "-s", str(sc), "--json"])
    assert res.exit_code == 0, res.output
    import json

    summary = json.loads(res.stdout)["summary"]  # one scenario: its summary
    assert summary["matched"] == 1 and summary["mean_speedup"] > 1.0


def test_mixed_precision_prices_the_autocast_table_as_predict_amp() -> None:
    """The mixed-precision scenario prices a job's per-op table profiled under autocast, with
    its casts (one more kernel per cast weight and activation for the host to issue), so the
    what-if's time is ``predict --amp``'s: on an H100 a BERT-base step under autocast waits
    for the host, which the fp32 table at the fp16 rates did not show."""
    pytest.importorskip("torch")
    import json

    from typer.testing import CliRunner

    from traincast.cli import app
    from traincast.zoo.profiles import workload_ops

    fp32, amp = workload_ops("bert-base"), workload_ops("bert-base", amp=True)
    assert len(amp["ops"]) > len(fp32["ops"])
    assert any(o["op"] == "_to_copy" and o["dtype"] == "float16" for o in amp["ops"])
    run = CliRunner()
    job = ["--model", "zoo:bert-base", "--gpu", "H100", "--json"]
    what = json.loads(run.invoke(app, ["whatif", *job, "-s", "mixed-precision"]).stdout)
    pred = json.loads(run.invoke(app, ["predict", *job, "--amp"]).stdout)
    assert what["job_rows"][0]["scenario_total_s"] == pytest.approx(pred["time_s"]["total"],
                                                                    rel=1e-9)
    assert pred["time_s"]["host_wait"] > 0.1 * pred["time_s"]["total"]
    # at another batch: the job's own table under autocast, priced as profiled
    at64 = [*job, "--batch", "64"]
    what = json.loads(run.invoke(app, ["whatif", *at64, "-s", "mixed-precision"]).stdout)
    pred = json.loads(run.invoke(app, ["predict", *at64, "--amp"]).stdout)
    assert what["job_rows"][0]["scenario_total_s"] == pytest.approx(pred["time_s"]["total"],
                                                                    rel=1e-9)
    # a trace's job of the zoo's workload: the shipped autocast table, the same time
    import pyarrow as pa

    from traincast.trace import fill_features

    trace = whatif(fill_features(pa.table({"job_id": ["j1"], "architecture": ["1w1g"],
                                           "n_gpus": [1.0], "gpu_type": ["H100"],
                                           "workload": ["bert-base"]})), "mixed-precision")
    fp32 = json.loads(run.invoke(app, ["predict", *job]).stdout)["time_s"]["total"]
    amp_t = json.loads(run.invoke(app, ["predict", *job, "--amp"]).stdout)["time_s"]["total"]
    assert trace["summary"]["mean_speedup"] == pytest.approx(fp32 / amp_t, rel=1e-9)


def test_the_shipped_autocast_tables_cover_the_zoo_at_its_autocast_features() -> None:
    """``ops_amp.json`` holds a table for every model ``ops.json`` does, each summing to the
    autocast figures of ``profiles.json`` (so a zoo job under the mixed-precision scenario is
    priced as profiled, ``a = b = 1``) and holding autocast's casts."""
    from traincast.zoo.profiles import _ops, load_profiles

    fp32, amp, prof = _ops(), _ops(True), load_profiles()["models"]
    assert set(amp) == set(fp32) and amp
    for name, table in amp.items():
        for key in ("bytes_memory_bound", "flops_compute_bound"):
            assert table[key] == pytest.approx(prof[name][f"{key}_amp"], rel=1e-12), name
        assert table["batch_size"] == fp32[name]["batch_size"]
        if any(o["op"] in ("mm", "addmm", "convolution") for o in fp32[name]["ops"]):
            assert any(o["op"] == "_to_copy" for o in table["ops"]), name


def test_a_node_change_packs_the_jobs_gpus_onto_the_new_nodes() -> None:
    """A job recorded 8 GPUs on one 8-GPU node moves to a10-pcie (4 A10s a node): it runs on 2
    nodes of 4, not refused for 8 GPUs per node; a job recorded 2 per node runs 4 per node.
    The flat ring crosses the 100 Gbit NIC: the job's time less the same job's without weights
    is 2 (n-1)/n W / min(bw(intra), R bw(nic)), R = 1 port. A job
    already on the scenario's preset keeps its placement (2 per node: 4 nodes)."""
    from traincast.engine.local import apply_changes
    from traincast.engine.workload import workload_extras
    from traincast.jobs import Columns
    from traincast.resolve import resolve

    cat = load_catalog()
    w = 4e9
    jobs = {"job_id": ["full", "spread", "stays"], "architecture": ["allreduce-cluster"] * 3,
            "n_gpus": [8.0] * 3, "gpus_per_node": [8.0, 2.0, 2.0],
            "node": ["dgx-a100", "dgx-a100", "a10-pcie"],
            "flops_compute_bound": [1e12] * 3, "bytes_memory_bound": [1e9] * 3,
            "weight_bytes": [w] * 3}
    sc = parse_scenario({"changes": {"node": "a10-pcie"}}, "a10", cat)
    cols = Columns.of(jobs)
    r = resolve(apply_changes(cols, workload_extras(cols), sc, cat), cat)
    assert list(r.g) == [4, 4, 2] and list(r.nodes) == [2, 2, 4]
    rows = {row["job_id"]: row for row in whatif(jobs, sc, cat, per_job=True)[
        "job_rows"].to_pylist()}
    assert rows["full"]["applied"] and rows["spread"]["applied"]
    # the ring's time alone: the same jobs with no weights to exchange cost ring_s less
    # a10-pcie: PCIe 4 x16 inside (31.5 GB/s), one 100 Gbit Ethernet port (12.5 GB/s at the
    # framing rule's 1448 / 1538 = 0.9415 payload, docs/hardware.md): the NIC is the ring's
    ring_s = 2 * 7 / 8 * w / (12.5e9 * 0.9415)  # 0.5948 s
    none = {row["job_id"]: row for row in whatif({**jobs, "weight_bytes": [0.0] * 3}, sc, cat,
                                                 per_job=True)["job_rows"].to_pylist()}
    for job in ("full", "spread"):
        assert rows[job]["scenario_total_s"] - none[job]["scenario_total_s"] == \
            pytest.approx(ring_s, rel=1e-9)
    assert rows["stays"]["speedup"] == pytest.approx(1.0)


def test_a_scenario_that_moves_no_job_says_why() -> None:
    from traincast.analysis.whatif import unchanged_line

    flat = {"predicted": 40, "not_applied": 0, "sped_up_share": 0.0, "slowed_down_share": 0.0,
            "by_architecture": {"1w1g": {"matched": 30, "predicted": 30},
                                "allreduce-local": {"matched": 10, "predicted": 10},
                                "ps-worker": {"matched": 0, "predicted": 0},
                                "allreduce-cluster": {"matched": 2, "predicted": 0}}}
    line = unchanged_line("eth100", flat, {"changes": {"nic": "eth100"}})
    # the unpriced allreduce-cluster jobs do not count against "one node"
    assert line == ("eth100: none of its 40 priced jobs runs more than 1% faster or slower: "
                    "the network carries none of their time: every one runs on one node "
                    "(1w1g, allreduce-local)")
    # a job that crosses the network: the general reason, naming the part of time changed
    spans = {**flat, "by_architecture": {"allreduce-cluster": {"matched": 40, "predicted": 40}}}
    assert "the part of their time it changes, the network, is none or small" in \
        unchanged_line("eth100", spans, {"changes": {"nic": "eth100"}})
    # a hybrid trace row is priced as a ring across nodes: not "on one node" either
    hybrid = {**flat, "by_architecture": {"hybrid": {"matched": 40, "predicted": 40}}}
    assert "on one node" not in unchanged_line("eth100", hybrid, {"changes": {"nic": "eth100"}})
    # a change that fits none of them: said so, not blamed on the time
    none_fit = {**flat, "not_applied": 40}
    assert unchanged_line("nvlink-allreduce", none_fit, {"changes": {"node": "x"}}).endswith(
        "it fits none of them (not fit: the port, GPU or node move does not fit their GPUs or "
        "memory)")
    one = {**spans, "predicted": 1}
    assert unchanged_line("eth100", one, {"changes": {"nic": "eth100"}}).startswith(
        "eth100: its one priced job runs no more than 1% faster or slower: the part of its time")
    # a job moved, or none priced: nothing to say
    assert unchanged_line("eth100", {**flat, "sped_up_share": 0.5}, {"changes": {}}) == ""
    assert unchanged_line("eth100", {**flat, "predicted": 0}, {"changes": {}}) == ""


def test_a_real_whatif_summary_says_why_no_job_moved() -> None:
    # one 1w1g job on 25 Gbit: 100 Gbit Ethernet matches it (a slower NIC) and changes none of
    # its time; the summary (CLI, --json, study) says why; a scenario that moves it says none
    jobs = {k: v[2:3] for k, v in small_trace().items()}
    out = whatif(jobs, ["eth100", "gpu-a100"])["scenarios"]
    assert out["eth100"]["unchanged_why"] == (
        "eth100: its one priced job runs no more than 1% faster or slower: the network carries "
        "none of its time: it runs on one node (1w1g)")
    assert out["gpu-a100"]["unchanged_why"] == ""
    # a scenario that matches no job says what it selects, in --json too
    ps = {"name": "big-ps", "match": {"architecture": ["ps-worker"], "min_gpus": 64},
          "changes": {"nic": "eth100"}}
    up = {"name": "slow-pcie", "match": {"upgrade_only": True}, "changes": {"pcie": "1Gbit"}}
    out = whatif(jobs, [ps, up])["scenarios"]
    assert out["big-ps"]["unchanged_why"] == (
        "big-ps: no job matches it (it selects architecture ps-worker; min_gpus 64; the trace "
        "has no ps-worker job: a format without parameter servers has none, docs/traces.md)")
    assert out["slow-pcie"]["unchanged_why"] == (
        "slow-pcie: no job matches it (it selects upgrade_only: jobs whose link its pcie 1Gbit "
        "makes faster, and it is faster than none of theirs)")


def test_whatif_without_a_scenario_names_the_shipped_ones(tc) -> None:
    r = tc("whatif", "--model", "zoo:bert-base", "--arch", "1w1g", "--gpus", "1")
    assert r.returncode == 2 and "give --scenario NAME|FILE" in r.stderr
    said = " ".join(r.stderr.split())
    assert "eth100" in said and "-s nvlink-allreduce -s eth100 -s gpu-a100" in said, said


def test_a_trace_without_gpu_jobs_matches_no_scenario_and_says_why() -> None:
    jobs = {k: v[2:3] for k, v in small_trace().items()} | {"n_gpus": [0.0]}
    out = whatif(jobs, "eth100")["summary"]
    assert out["matched"] == 0
    assert out["unchanged_why"] == ("eth100: no job matches it: no job of the trace has GPUs "
                                    "(n_gpus missing or 0), and a scenario matches jobs with "
                                    "GPUs only")


def test_two_scenario_files_of_one_name_are_named_by_path(tmp_path) -> None:
    from traincast.hardware.catalog import load_catalog
    from traincast.scenarios import as_scenarios

    paths = []
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        paths.append(tmp_path / folder / "hier.toml")
        paths[-1].write_text('[changes]\nhierarchical = true\n')
    with pytest.raises(TraincastError, match="scenario name used twice: hier") as err:
        as_scenarios(paths, load_catalog())
    assert f"({paths[0]} and {paths[1]})" in str(err.value) and 'name = "..."' in err.value.hint
    paths[1].write_text('name = "hier-b"\n[changes]\nhierarchical = true\n')
    assert [s.name for s in as_scenarios(paths, load_catalog())] == ["hier", "hier-b"]


def test_up_down_shares_keep_a_small_share_of_jobs() -> None:
    from traincast.cli.whatif import _up_down

    # 6 of 2,133 jobs sped up (0.28%): not "0%"; one of a million: not "0%" either
    assert _up_down({"sped_up_share": 6 / 2133, "slowed_down_share": 0.0}) == "0.3%/0%"
    assert _up_down({"sped_up_share": 1e-6, "slowed_down_share": 0.25}) == "<0.005%/25%"
    assert _up_down({"sped_up_share": 6e-5, "slowed_down_share": 0.0}) == "0.006%/0%"
