"""Co-location (Horus): hand-computed utilization, pairing, slowdown and GPU accounting."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from conftest import PINNED
from traincast.analysis.colocate import (
    colocate,
    colocate_arrays,
    gpu_accounting,
    measured_shares,
    pair_jobs,
    pair_slowdown,
    util_error,
    utilization_shares,
)
from traincast.errors import TraincastError
from traincast.hardware.catalog import load_catalog

# Four single-GPU 1w1g jobs on a V100 (no communication), each T_total = 0.5 s:
#   T_data = input / 15.75e9, T_flop = flops / 15.7e12, T_mem = bytes / 900e9
#   job  T_data T_flop T_mem   phi  mu   u    measured  duration
#   A    0.30   0.10   0.10    0.2  0.2  0.4  0.5       100 s
#   B    0.20   0.15   0.15    0.3  0.3  0.6  0.5       200 s
#   C    0.10   0.30   0.10    0.6  0.2  0.8  0.9       300 s
#   D    0.40   0.05   0.05    0.1  0.1  0.2  0.1       400 s
# plus E: a 2-GPU allreduce-local job (eligible only with multi_gpu, alone in its group).
T_DATA = {"A": 0.30, "B": 0.20, "C": 0.10, "D": 0.40, "E": 0.40}
T_FLOP = {"A": 0.10, "B": 0.15, "C": 0.30, "D": 0.05, "E": 0.05}
T_MEM = {"A": 0.10, "B": 0.15, "C": 0.10, "D": 0.05, "E": 0.05}
MEASURED = {"A": 0.5, "B": 0.5, "C": 0.9, "D": 0.1, "E": None}
DURATION = {"A": 100.0, "B": 200.0, "C": 300.0, "D": 400.0, "E": 50.0}


def hand_trace(weight_bytes: float = 0.0) -> dict[str, list]:
    ids = list(T_DATA)
    return {
        "job_id": ids,
        "architecture": ["1w1g"] * 4 + ["allreduce-local"],
        "n_gpus": [1.0, 1.0, 1.0, 1.0, 2.0],
        "gpu_type": ["V100"] * 5,
        "start_time_s": [0.0] * 5,
        "end_time_s": [DURATION[j] for j in ids],
        "input_bytes": [T_DATA[j] * 15.75e9 for j in ids],
        "flops_compute_bound": [T_FLOP[j] * 15.7e12 for j in ids],
        "bytes_memory_bound": [T_MEM[j] * 900e9 for j in ids],
        "weight_bytes": [weight_bytes] * 4 + [0.0],
        "gpu_util": [MEASURED[j] for j in ids],
    }



def _by_id(result: dict) -> dict[str, dict]:
    return {r["job_id"]: r for r in result["job_rows"].to_pylist()}


def test_utilization_shares_formula() -> None:
    u, phi, mu = utilization_shares([0.1, 0.3, 1.0], [0.1, 0.1, 0.0], [0.5, 0.5, 0.0])
    assert u[:2] == pytest.approx([0.4, 0.8]) and phi[:2] == pytest.approx([0.2, 0.6])
    assert mu[:2] == pytest.approx([0.2, 0.2])
    assert math.isnan(u[2])  # a zero total has no utilization


def test_util_error_hand_numbers() -> None:
    # p = [.4,.6,.8,.2], m = [.5,.5,.9,.1]: errors -10, +10, -10, +10 pp
    # Pearson: sum dp dm = 0.24, sum dp^2 = 0.2, sum dm^2 = 0.32 -> 0.24 / sqrt(0.064) = 3/sqrt 10
    # Spearman: ranks p = [2,3,4,1], m = [2.5,2.5,4,1] -> 4.5 / sqrt(5 * 4.5) = 3 / sqrt 10
    e = util_error([0.4, 0.6, 0.8, 0.2, np.nan], [0.5, 0.5, 0.9, 0.1, 0.7])
    assert e["jobs"] == 4
    assert e["mean_abs_error_pp"] == pytest.approx(10.0)
    assert e["median_abs_error_pp"] == pytest.approx(10.0)
    assert e["bias_pp"] == pytest.approx(0.0, abs=1e-12)
    assert e["pearson"] == pytest.approx(3 / math.sqrt(10))
    assert e["spearman"] == pytest.approx(3 / math.sqrt(10))
    assert util_error([np.nan], [0.5])["jobs"] == 0
    # two jobs: a line passes through any two points, so no correlation is given
    two = util_error([0.4, 0.9], [0.5, 0.6])
    assert two["jobs"] == 2 and math.isnan(two["pearson"]) and math.isnan(two["spearman"])
    assert two["mean_abs_error_pp"] == pytest.approx(20.0)


def test_pairing_hand_cases() -> None:
    u = np.array([0.4, 0.6, 0.8, 0.2])  # A B C D
    g = np.zeros(4, dtype=np.int64)
    # bound 1.0: the 4 lowest outside-in: D+C = 1.0, A+B = 1.0 -> two pairs
    a, b = pair_jobs(u, g, 1.0)
    assert sorted(zip(a.tolist(), b.tolist(), strict=True)) == [(0, 1), (3, 2)]
    # bound 0.9: k = 2 fails (D+C = 1.0); k = 1: D+A = 0.6 -> one pair of the two lowest
    a, b = pair_jobs(u, g, 0.9)
    assert list(zip(a.tolist(), b.tolist(), strict=True)) == [(3, 0)]
    # different groups never pair; NaN and ineligible rows stay alone
    a, _ = pair_jobs(u, np.array([0, 1, 2, 3]), 2.0)
    assert len(a) == 0
    a, b = pair_jobs([0.1, np.nan, 0.2, 0.3], [0, 0, 0, 0], 1.0, eligible=[1, 1, 1, 0])
    assert list(zip(a.tolist(), b.tolist(), strict=True)) == [(0, 2)]


def _two_pointer_pairs(x: list[float], bound: float) -> int:
    """Reference: the classic greedy (largest with smallest), optimal for the pair count."""
    x = sorted(x)
    i, j, k = 0, len(x) - 1, 0
    while i < j:
        if x[i] + x[j] <= bound + 1e-12:
            i, k = i + 1, k + 1
        j -= 1
    return k


def test_pair_count_is_maximal_and_within_bound() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(0, 25))
        u = rng.random(n)
        g = rng.integers(0, 3, n)
        bound = float(rng.uniform(0.2, 1.5))
        a, b = pair_jobs(u, g, bound)
        assert np.all(u[a] + u[b] <= bound + 1e-12) and np.all(g[a] == g[b])
        assert len(np.unique(np.r_[a, b])) == 2 * len(a)  # no job twice
        assert len(a) == sum(_two_pointer_pairs(list(u[g == k]), bound) for k in range(3))


def test_pairing_is_vectorized_on_many_jobs() -> None:
    import time

    rng = np.random.default_rng(1)
    u = rng.random(1_000_000)
    start = time.perf_counter()
    a, b = pair_jobs(u, rng.integers(0, 20, len(u)), 1.0)
    assert time.perf_counter() - start < 20.0
    assert len(a) > 400_000 and np.all(u[a] + u[b] <= 1.0 + 1e-12)


def test_slowdown_formula() -> None:
    # time slicing (kappa 1): 1 + u_a u_b; D+C: 1 + 0.2 * 0.8, A+B: 1 + 0.4 * 0.6
    assert pair_slowdown(0.1, 0.1, 0.6, 0.2) == pytest.approx(1.16)
    assert pair_slowdown(0.2, 0.2, 0.3, 0.3) == pytest.approx(1.24)
    # kappa 0: only like kernels: 1 + 0.1*0.6 + 0.1*0.2 = 1.08; 1 + 0.2*0.3 + 0.2*0.3 = 1.12
    assert pair_slowdown(0.1, 0.1, 0.6, 0.2, 0.0) == pytest.approx(1.08)
    assert pair_slowdown(0.2, 0.2, 0.3, 0.3, 0.0) == pytest.approx(1.12)
    # kappa 0.5, a all FLOP, b all memory: 1 + 0.5 * (0.5 * 0.4) = 1.1
    assert pair_slowdown(0.5, 0.0, 0.0, 0.4, 0.5) == pytest.approx(1.1)


def test_memory_check_and_bad_parameters() -> None:
    phi, mu = [0.2, 0.3, 0.6, 0.1], [0.2, 0.3, 0.2, 0.1]
    fp = [10e9, 10e9, 1e9, 1e9]  # A + B = 20 GB > 16 GB: that pair is split
    co = colocate_arrays(phi, mu, [0, 0, 0, 0], footprint_bytes=fp, gpu_mem_bytes=16e9)
    assert co.memory_rejected_pairs == 1
    assert co.partner.tolist() == [-1, -1, 3, 2]
    assert co.slowdown.tolist() == pytest.approx([1.0, 1.0, 1.16, 1.16])
    with pytest.raises(TraincastError, match="bound"):
        colocate_arrays(phi, mu, [0] * 4, bound=0.0)
    with pytest.raises(TraincastError, match="cross"):
        colocate_arrays(phi, mu, [0] * 4, cross=1.5)


def test_gpu_accounting_hand_numbers() -> None:
    # pairs (D, C) at 1.16 and (A, B) at 1.24, one GPU each, E (2 GPUs, 50 s) alone:
    # exclusive = 100 + 200 + 300 + 400 + 2 * 50 = 1100 GPU-s
    # co-located = (400 + 300) * 1.16 / 2 + (100 + 200) * 1.24 / 2 + 100 = 692 GPU-s
    acct = gpu_accounting([1, 1, 1, 1, 2], [100, 200, 300, 400, 50], [1, 0, 3, 2, -1],
                          [1.24, 1.24, 1.16, 1.16, 1.0])
    assert acct["gpu_time_exclusive_s"] == pytest.approx(1100.0)
    assert acct["gpu_time_colocated_s"] == pytest.approx(692.0)
    assert acct["gpu_time_saved_s"] == pytest.approx(408.0)
    assert acct["gpu_time_saved_share"] == pytest.approx(408.0 / 1100.0)
    assert acct["gpus_freed"] == 2 and acct["gpus_total"] == 6
    assert acct["gpus_freed_share"] == pytest.approx(2 / 6)
    assert (acct["jobs_without_duration"], acct["jobs_without_gpus"]) == (0, 0)
    # a job with GPUs and no duration, and two without GPUs (0, unknown): counted apart
    acct = gpu_accounting([1, 1, 0, np.nan], [100, np.nan, 50, 50], [-1] * 4, [1.0] * 4)
    assert (acct["jobs_without_duration"], acct["jobs_without_gpus"]) == (1, 2)
    assert acct["gpu_time_exclusive_s"] == pytest.approx(100.0)


def test_end_to_end_hand_trace(catalog) -> None:
    r = colocate(pa.table(hand_trace()), catalog, per_job=True)
    rows = _by_id(r)
    assert [rows[j]["predicted_util"] for j in "ABCD"] == pytest.approx([0.4, 0.6, 0.8, 0.2])
    c = r["utilization"]["comparison"]
    assert c["jobs"] == 4 and c["mean_abs_error_pp"] == pytest.approx(10.0)
    assert c["pearson"] == pytest.approx(3 / math.sqrt(10))
    co = r["colocation"]
    assert (co["eligible"], co["pairs"], co["paired_jobs"]) == (4, 2, 4)
    assert {j: rows[j]["partner"] for j in "ABCDE"} == {"A": "B", "B": "A", "C": "D",
                                                        "D": "C", "E": None}
    assert {j: rows[j]["slowdown"] for j in "ABCDE"} == pytest.approx(
        {"A": 1.24, "B": 1.24, "C": 1.16, "D": 1.16, "E": 1.0})
    assert co["gpu_time_saved_s"] == pytest.approx(408.0)
    assert co["gpus_freed"] == 2
    assert co["slowdown"]["mean"] == pytest.approx(1.20)
    assert co["slowdown"]["max"] == pytest.approx(1.24)
    # --multi-gpu makes E eligible, but it has no partner with 2 V100s
    multi = colocate(pa.table(hand_trace()), catalog, multi_gpu=True)["colocation"]
    assert (multi["eligible"], multi["pairs"]) == (5, 2)
    # every job names its GPU: none priced on the default node; B and E without one are
    assert r["default_hardware"]["jobs"] == 0
    unnamed = {**hand_trace(), "gpu_type": ["V100", None, "V100", "V100", ""]}
    hw = colocate(pa.table(unnamed), catalog)["default_hardware"]
    assert hw["jobs"] == 2 and hw["node"] == "pai-v100-nvlink"


def test_memory_footprint_from_weights(catalog) -> None:
    # no workload profile: footprint = 4 W = 10 GB per job; A + B = 20 GB > 16 GB, and so
    # every pair: all are split
    r = colocate(pa.table(hand_trace(weight_bytes=2.5e9)), catalog)["colocation"]
    assert (r["pairs"], r["memory_rejected_pairs"]) == (0, 2)
    r = colocate(pa.table(hand_trace(weight_bytes=2.5e9)), catalog,
                 memory_check=False)["colocation"]
    assert r["pairs"] == 2


def test_pairing_by_measured_utilization(catalog) -> None:
    # measured split in the predicted proportions: A .25/.25, B .25/.25, C .675/.225,
    # D .05/.05; D + C = 1.0 and A + B = 1.0 -> slowdowns 1 + .1 * .9 = 1.09, 1 + .25 = 1.25
    phi, mu = measured_shares([0.5, 0.9, 0.3], [0.2, 0.6, np.nan], [0.2, 0.2, np.nan])
    assert phi.tolist() == pytest.approx([0.25, 0.675, 0.3])
    assert mu.tolist() == pytest.approx([0.25, 0.225, 0.0])
    r = colocate(pa.table(hand_trace()), catalog, by="measured", per_job=True)
    rows = _by_id(r)
    assert {j: rows[j]["slowdown"] for j in "ABCD"} == pytest.approx(
        {"A": 1.25, "B": 1.25, "C": 1.09, "D": 1.09})
    with pytest.raises(TraincastError, match="utilization source"):
        colocate(pa.table(hand_trace()), catalog, by="guess")


def test_bundled_sample() -> None:
    from traincast.trace import fill_features
    from traincast.trace.sample import sample_path

    jobs = fill_features(pq.read_table(sample_path()))
    r = colocate(jobs, per_job=True, multi_gpu=True)
    co, rows = r["colocation"], r["job_rows"]
    n = jobs["n_gpus"].to_numpy()
    assert r["jobs"] == jobs.num_rows and r["utilization"]["measured_jobs"] == 0
    assert co["eligible"] == int(np.sum((n >= 1) & (n == np.round(n))))
    assert co["pairs"] > 0 and co["paired_jobs"] == 2 * co["pairs"]
    u = rows["predicted_util"].to_numpy(zero_copy_only=False)
    ids = rows["job_id"].to_pylist()
    index = {j: i for i, j in enumerate(ids)}
    partner = rows["partner"].to_pylist()
    pairs = [(i, index[p]) for i, p in enumerate(partner) if p is not None]
    assert len(pairs) == co["paired_jobs"]
    assert all(u[i] + u[k] <= 1.0 + 1e-9 and n[i] == n[k] for i, k in pairs)
    assert co["gpus_freed"] == pytest.approx(sum(n[i] for i, k in pairs) / 2)
    slow = rows["slowdown"].to_numpy(zero_copy_only=False)
    # kappa 1: slowdown = 1 + u_a u_b <= 1 + bound^2 / 4
    assert all(slow[i] == pytest.approx(1 + u[i] * u[k]) for i, k in pairs)
    assert 1.0 < co["slowdown"]["max"] <= 1.25
    assert 0 < co["gpu_time_saved_share"] < 0.5
    # single-GPU jobs only: the model predicts they keep their GPU busy (u > 0.5) on the sample
    single = colocate(jobs)["colocation"]
    assert single["eligible"] == int(np.sum(n == 1))


def _cli(args: list[str], tmp_path: Path, monkeypatch) -> dict:
    from typer.testing import CliRunner

    from traincast.cli import app

    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["colocate", *args, "--db", str(tmp_path / "s.duckdb"),
                                   "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_cli_json_hand_trace(tmp_path: Path, monkeypatch) -> None:
    pinned = tmp_path / "pinned.toml"
    pinned.write_text(PINNED)
    trace = tmp_path / "t.csv"
    pacsv.write_csv(pa.table(hand_trace()), trace)
    out = _cli([str(trace), "--catalog", str(pinned), "--compute", "paper", "-o",
                str(tmp_path / "rows.csv")],
               tmp_path, monkeypatch)
    assert out["jobs"] == 5 and out["colocation"]["pairs"] == 2
    assert out["colocation"]["gpu_time_saved_s"] == pytest.approx(408.0)
    assert out["utilization"]["comparison"]["jobs"] == 4
    with open(tmp_path / "rows.csv") as f:
        rows = {r["job_id"]: r for r in csv.DictReader(f)}
    assert rows["A"]["partner"] == "B" and float(rows["C"]["slowdown"]) == pytest.approx(1.16)
    out = _cli([str(trace), "--catalog", str(pinned), "--compute", "paper", "--util-bound", "0.9",
                "--cross-contention", "0"], tmp_path, monkeypatch)
    # bound 0.9: only D + A; kappa 0: 1 + 0.1 * 0.2 + 0.1 * 0.2 = 1.04
    assert out["colocation"]["pairs"] == 1
    assert out["colocation"]["slowdown"]["max"] == pytest.approx(1.04)


def test_cli_human_output(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from traincast.cli import app

    monkeypatch.chdir(tmp_path)
    pinned = tmp_path / "pinned.toml"
    pinned.write_text(PINNED)
    pacsv.write_csv(pa.table(hand_trace()), tmp_path / "t.csv")
    res = CliRunner().invoke(app, ["colocate", str(tmp_path / "t.csv"), "--catalog",
                                   str(pinned), "--db", str(tmp_path / "s.duckdb")])
    assert res.exit_code == 0, res.output
    assert "GPUs freed" in res.stdout and "Spearman" in res.stdout
    assert "measures no job's utilization" not in res.stdout
    flat = " ".join(res.stdout.split())
    assert "pairs refused: GPU memory" in flat and "assumed hardware" not in flat
    # which jobs are eligible, and the flags behind the title's figures
    assert "of one GPU (--multi-gpu pairs multi-GPU jobs too)" in flat
    assert "(--util-bound 1, --cross-contention κ 1)" in flat
    # without measured utilization: no legend of rows that are not printed, and it says why
    plain = {k: v for k, v in hand_trace().items() if k != "gpu_util"}
    pacsv.write_csv(pa.table(plain), tmp_path / "u.csv")
    res = CliRunner().invoke(app, ["colocate", str(tmp_path / "u.csv"), "--catalog",
                                   str(pinned), "--db", str(tmp_path / "u.duckdb")])
    assert res.exit_code == 0, res.output
    assert "Spearman" not in res.stdout and "measures no job's utilization" in res.stdout
    # jobs that name no GPU type or node: priced on the default node, and the output says so
    pacsv.write_csv(pa.table({**plain, "gpu_type": [None] * 5}), tmp_path / "n.csv")
    res = CliRunner().invoke(app, ["colocate", str(tmp_path / "n.csv"), "--catalog",
                                   str(pinned), "--db", str(tmp_path / "n.duckdb")])
    assert res.exit_code == 0, res.output
    assert "assumed hardware: 5 jobs" in " ".join(res.stdout.split())
    bad = CliRunner().invoke(app, ["colocate", str(tmp_path / "t.csv"), "--db",
                                   str(tmp_path / "s.duckdb"), "--workload", "no-such-model"])
    assert bad.exit_code != 0


def test_real_trace_elasticflow(shared_data: Path, tmp_path: Path, monkeypatch) -> None:
    """ElasticFlow cluster10 (real, 259 jobs): no workloads, so --workload gives them one.

    With --util-bound 2 every two single-GPU jobs fit (u <= 1 each), so the pair count is
    floor(single-GPU jobs / 2) and each slowdown is 1 + u^2 (one workload, one GPU model).
    """
    path = shared_data / "elasticflow" / "cluster10.csv"
    with open(path) as f:
        gpus = [float(r["num_gpu"]) for r in csv.DictReader(f)]
    out = _cli([str(path), "--format", "elasticflow", "--workload", "none"], tmp_path,
               monkeypatch)
    assert out["jobs"] == len(gpus) and out["utilization"]["predicted_jobs"] == 0
    assert out["colocation"]["pairs"] == 0
    out = _cli([str(path), "--format", "elasticflow", "--workload", "resnet50",
                "--util-bound", "2", "--no-memory-check"], tmp_path, monkeypatch)
    singles = sum(g == 1 for g in gpus)
    co = out["colocation"]
    assert co["eligible"] == singles and co["pairs"] == singles // 2
    assert co["gpus_freed"] == singles // 2
    u = out["utilization"]["predicted"]["median"]
    assert co["slowdown"]["max"] == pytest.approx(1 + u * u, rel=1e-6)


def test_pai2020_measured_utilization_units(tmp_path: Path, monkeypatch) -> None:
    """PAI 2020 tables (release schema): gpu_util = mean of gpu_wrk_util / plan_gpu."""
    from traincast.predict import predict_table
    from traincast.trace import fill_features
    from traincast.trace.store import ingest, load_jobs

    d = tmp_path / "pai"
    d.mkdir()
    tables = {
        "job": [("J1", "i1", "u", "Terminated", "0", "100"),
                ("J2", "i2", "u", "Terminated", "0", "200"),
                ("J3", "i3", "u", "Terminated", "0", "300")],
        "task": [("J1", "worker", "1", "Terminated", "", "", "600", "20", "100", "V100"),
                 ("J2", "worker", "1", "Terminated", "", "", "600", "20", "100", "V100"),
                 ("J3", "tensorflow", "1", "Terminated", "", "", "600", "20", "200", "V100")],
        "sensor": [("J1", "worker", "w1", "i1", "m", "g", "1", "30", *["1"] * 4, *["0"] * 4),
                   ("J1", "worker", "w1", "i1", "m", "g", "1", "50", *["1"] * 4, *["0"] * 4),
                   ("J2", "worker", "w2", "i2", "m", "g", "1", "90", *["1"] * 4, *["0"] * 4),
                   ("J3", "tensorflow", "w3", "i3", "m", "g", "1", "120", *["1"] * 4,
                    *["0"] * 4)],
        "group_tag": [("i1", "u", "", "g", "resnet"), ("i2", "u", "", "g", "bert"),
                      ("i3", "u", "", "g", "resnet")],
    }
    for name, rows in tables.items():
        (d / f"pai_{name}_table.csv").write_text("".join(",".join(r) + "\n" for r in rows))
    ingest(d, format="pai-2020", db=tmp_path / "p.duckdb")
    jobs = fill_features(load_jobs(tmp_path / "p.duckdb"))
    measured = dict(zip(jobs["job_id"].to_pylist(), jobs["gpu_util"].to_pylist(), strict=True))
    # % of one GPU / plan_gpu (100 per GPU): J1 (30 + 50) / 2 / 100, J2 0.9, J3 120 / 200
    assert measured == pytest.approx({"i1": 0.4, "i2": 0.9, "i3": 0.6})
    r = colocate(jobs)
    pred = predict_table(jobs).gpu_util()
    expected = util_error(pred, jobs["gpu_util"].to_numpy(zero_copy_only=False))
    assert expected["jobs"] == 3
    assert r["utilization"]["comparison"] == pytest.approx(expected)
    assert r["utilization"]["measured"]["mean"] == pytest.approx((0.4 + 0.9 + 0.6) / 3)


def test_report_figure(catalog, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from traincast.report.build import _colocate_figure
    from traincast.report.inputs import Study

    figs = _colocate_figure(Study(folder=tmp_path, jobs=pa.table(hand_trace())), catalog)
    assert len(figs) == 1 and figs[0].stem == "cdf_gpu_util"
    # the hand trace with --multi-gpu: pairs (D, C), (A, B); 408 of 1100 GPU-s saved = 37%
    assert "2 pairs" in figs[0].caption and "frees 2 of 6 GPUs" in figs[0].caption
    assert "37%" in figs[0].caption and "1.20×" in figs[0].caption
    assert figs[0].draw() is not None
    assert _colocate_figure(Study(folder=tmp_path), catalog) == []


def test_equal_utilizations_pair_by_job_id_and_jobs_that_never_started_run_alone(
        catalog) -> None:
    # four copies of job A (one utilization, 0.4) of 100, 200, 300 and 400 s: pairs are
    # outside-in by job id (a1 with a4, a2 with a3), whatever the rows' order; a fifth copy
    # without a start (a pending pod) is not paired
    base = hand_trace()
    one = {k: v[0] for k, v in base.items()}
    rows = [{**one, "job_id": f"a{i}", "end_time_s": 100.0 * i} for i in (1, 2, 3, 4)]
    rows.append({**one, "job_id": "a0", "start_time_s": None, "end_time_s": None})
    saved = set()
    for order in ([0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 0, 4, 3, 1]):
        table = pa.Table.from_pylist([rows[i] for i in order])
        r = colocate(table, catalog, per_job=True)
        partner = {j: x["partner"] for j, x in _by_id(r).items()}
        assert partner == {"a1": "a4", "a4": "a1", "a2": "a3", "a3": "a2", "a0": None}
        saved.add(round(r["colocation"]["gpu_time_saved_s"], 9))
    assert len(saved) == 1


def test_why_no_pair_names_its_cause(catalog) -> None:
    from traincast.cli.colocate import no_pair_line

    # one eligible job: nothing to pair it with, whatever the bound
    one = {k: v[:1] for k, v in hand_trace().items()}
    co = colocate(pa.table(one), catalog)["colocation"]
    assert (co["eligible"], co["pairable"], co["pairs"]) == (1, 0, 0)
    assert no_pair_line(co, False, True).startswith("no pair: one job is eligible")
    # the four single-GPU jobs on four GPU models: no two share a group
    apart = {**hand_trace(), "gpu_type": ["V100", "T4", "P100", "A100", "V100"]}
    co = colocate(pa.table(apart), load_catalog())["colocation"]
    assert (co["eligible"], co["pairable"], co["pairs"]) == (4, 0, 0)
    assert "no two of the 4 eligible jobs are of the same GPU model" in \
        no_pair_line(co, False, False)
    # every pair under the bound is over the memory (test_memory_footprint_from_weights)
    co = colocate(pa.table(hand_trace(weight_bytes=2.5e9)), catalog)["colocation"]
    assert co["pairable"] == 4
    assert "2 pairs under the bound would not fit in the GPU's memory" in \
        no_pair_line(co, False, False)
    # bound 0.5: the two smallest, D 0.2 + A 0.4 = 0.6, are over it
    co = colocate(pa.table(hand_trace()), catalog, bound=0.5)["colocation"]
    assert (co["pairable"], co["pairs"]) == (4, 0)
    line = no_pair_line(co, True, True)
    assert line.startswith("no pair fits the bound: the model predicts")
    assert "above 0.5" in line and "--multi-gpu" not in line and "--by measured" in line
    co = colocate(pa.table(hand_trace()), catalog, bound=0.5, by="measured")["colocation"]
    assert "the trace measures" in no_pair_line(co, True, True)
