"""characterize on a tiny trace, checked by hand against DESIGN.md's formulas."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import traincast.trace as trace_mod
from traincast.analysis.characterize import characterize
from traincast.hardware.catalog import load_catalog
from traincast.trace import fill_features, read_trace

HEADER = ("job_id,start_time_s,end_time_s,architecture,n_gpus,n_workers,n_ps,gpus_per_worker,"
          "gpu_type,workload,flops_compute_bound,bytes_memory_bound,weight_bytes,"
          "embedding_bytes_touched,input_bytes\n")
ROWS = [
    "A,0,100,1w1g,1,,,,V100,,1e12,1e10,1e8,0,1e7",
    "B,0,50,allreduce-local,4,,,,V100,,1e12,1e10,1e8,0,1e7",
    "C,0,10,ps-worker,8,8,2,1,V100,,1e12,1e10,1e9,0,1e7",
    "D,0,20,1w1g,1,,,,V100,mystery,,,,,",
    "E,0,30,1w1g,0,,,,,,1e12,1e10,1e8,0,1e7",
]


@pytest.fixture
def tiny(tmp_path: Path) -> pa.Table:
    path = tmp_path / "tiny.csv"
    path.write_text(HEADER + "\n".join(ROWS) + "\n")
    return read_trace(path, "csv", tmp_path / "s.duckdb")


def hand_times() -> dict[str, list[float]]:
    """The paper's formulas with the shipped catalog's V100 node (pai-v100-nvlink). The V100 has
    the datasheet fields of the measured-kernel model and no published GEMM maximum, so the
    kernel strategy prices its aggregate fp32 FLOPs at that model's large-product rate and its
    memory-bound bytes at the element-wise fraction (docs/model.md), written out here: a
    300 W board below the power reference holds its boost clock, 16 lanes per partition leave
    a free issue slot for every tile's loads, and the library's pick costs ``choice_linear``."""
    cat = load_catalog()
    gpu = cat.gpu("V100")
    node = cat.node(cat.default_node_of("V100"))
    assert gpu.sms == 80 and not gpu.gemm_max_fraction
    k = gpu.kernel
    lanes_ghz_nm = gpu.sms * gpu.fp32_cores_per_sm * gpu.boost_clock_mhz * 1e-3 * gpu.process_nm
    assert gpu.power_w / lanes_ghz_nm >= k["power_ref"]                    # boost clock held
    assert gpu.fp32_cores_per_sm == 64 and gpu.sm_partitions in (0, 4)   # 0: the default 4
    # 16 lanes per partition: h = 2 issue slots per FFMA, a tile's loads issue for free
    assert 1 + k["c_issue"] * (128 + 128) / 128**2 <= 2
    p = 2 * gpu.sms * gpu.fp32_cores_per_sm * gpu.boost_clock_mhz * 1e6 \
        * k["simt_efficiency"] / k["choice_linear"]
    m = gpu.mem_bw_gbs * 1e9 * k["f_elementwise"]
    bw = {r: cat.links[getattr(node, r)].bw_gbs * 1e9 * cat.links[getattr(node, r)].efficiency
          for r in ("pcie", "intra", "nic")}
    data, flop, mem = 1e7 / bw["pcie"], 1e12 / p, 1e10 / m
    comm_a = 0.0
    comm_b = 2 * (4 - 1) / 4 * 1e8 / bw["intra"]                   # ring of 4 in one node
    # packed (one placement rule, traincast.resolve): g = min(n=8, 8 node GPUs) = 8 and
    # k = min(m=8, g / gpus_per_worker=8) = 8 workers share the node's NIC
    w, workers, ps, k = 1e9, 8, 2, 8
    comm_c = 2 * w / bw["pcie"] + max(2 * w * k / bw["nic"], 2 * workers * w / (ps * bw["nic"]))
    return {name: [data, flop, mem, comm] for name, comm in
            (("A", comm_a), ("B", comm_b), ("C", comm_c))}


def test_counts_and_gpu_time(tiny: pa.Table) -> None:
    r = characterize(tiny, fill=False)
    assert r["jobs"] == 5 and r["gpus"] == 1 + 4 + 8 + 1 + 0
    assert r["gpu_time_s"] == 1 * 100 + 4 * 50 + 8 * 10 + 1 * 20
    a = r["by_architecture"]
    assert list(a) == ["1w1g", "allreduce-local", "ps-worker"]
    # the 0-GPU job does not train on GPUs: counted apart, not as 1w1g
    assert r["zero_gpu_jobs"] == 1
    assert (a["1w1g"]["jobs"], a["1w1g"]["gpus"], a["1w1g"]["gpu_time_s"]) == (2, 2, 120)
    assert a["ps-worker"]["job_share"] == pytest.approx(1 / 4)  # of the 4 jobs with GPUs
    assert a["ps-worker"]["gpu_share"] == pytest.approx(8 / 14)
    assert a["ps-worker"]["gpu_time_share"] == pytest.approx(80 / 400)
    assert r["by_gpu_type"]["V100"]["jobs"] == 4 and r["by_gpu_type"]["unknown"]["jobs"] == 1
    assert r["by_gpu_type"]["V100"]["gpu"] == "V100-SXM2-16GB"
    assert r["cdf"]["gpus_per_job"] == {"value": [0, 1, 4, 8], "cdf": [0.2, 0.6, 0.8, 1.0]}
    # the 4 jobs with GPUs: 1, 1, 4, 8
    assert r["cdf"]["gpus_per_job_with_gpus"] == {"value": [1, 4, 8], "cdf": [0.5, 0.75, 1.0]}
    d = r["cdf"]["duration_s"]
    assert d["value"][0] == 10 and d["value"][50] == 30 and d["value"][-1] == 100
    assert r["flags"]["zero_gpu"] == 1 and r["flags"]["arch_inferred"] == 0


def test_breakdown_by_hand(tiny: pa.Table) -> None:
    r = characterize(tiny, fill=False)["breakdown"]
    t = hand_times()
    shares = {k: [x / sum(v) for x in v] for k, v in t.items()}
    # D has no features, E no GPU: three jobs known
    assert r["jobs"] == 3 and r["gpus"] == 13
    comp = ["data_io", "compute_flop", "compute_mem", "comm"]
    for i, c in enumerate(comp):
        jw = (shares["A"][i] + shares["B"][i] + shares["C"][i]) / 3
        gw = (1 * shares["A"][i] + 4 * shares["B"][i] + 8 * shares["C"][i]) / 13
        gtw = (100 * shares["A"][i] + 200 * shares["B"][i] + 80 * shares["C"][i]) / 380
        assert r["job_weighted"][c] == pytest.approx(jw)
        assert r["gpu_weighted"][c] == pytest.approx(gw)
        assert r["gpu_time_weighted"][c] == pytest.approx(gtw)
    assert r["by_architecture"]["ps-worker"]["job_weighted"]["comm"] == \
        pytest.approx(shares["C"][3])
    bottleneck = {c: 0 for c in [*comp, "host"]}  # hand-made times: no host wait
    for v in t.values():
        bottleneck[comp[int(np.argmax(v))]] += 1
    assert r["bottleneck"] == bottleneck
    comm = [shares[k][3] for k in "ABC"]
    assert r["comm_over_80_share"] == pytest.approx(sum(c > 0.8 for c in comm) / 3)
    assert r["data_io_over_50_share"] == pytest.approx(
        sum(shares[k][0] > 0.5 for k in "ABC") / 3)
    assert r["comm_share_cdf"]["value"][-1] == pytest.approx(max(comm))
    assert r["comm_share_cdf"]["value"][0] == 0.0


@pytest.mark.parametrize("f", [0.0, 1.0])
def test_predicted_utilization_by_hand_moves_with_overlap_and_the_shares_do_not(
        tiny: pa.Table, f: float) -> None:
    # busy / T_total, T_total = T_data + max(T_comp, f T_comm) + (1 - f) T_comm, mean of A-C
    r = characterize(tiny, overlap=f, fill=False)["breakdown"]
    util = [(fl + mem) / (data + max(fl + mem, f * comm) + (1 - f) * comm)
            for data, fl, mem, comm in hand_times().values()]
    assert r["gpu_util_pred_mean"] == pytest.approx(sum(util) / 3)
    # the shares are of the four parts' sum whatever the overlap (test_breakdown_by_hand)
    for i, c in enumerate(("data_io", "compute_flop", "compute_mem", "comm")):
        assert r["job_weighted"][c] == pytest.approx(
            sum(v[i] / sum(v) for v in hand_times().values()) / 3)


def test_fill_features_from_workload(tiny: pa.Table, monkeypatch: pytest.MonkeyPatch) -> None:
    profile = {"flops_compute_bound": 2e12, "bytes_memory_bound": 3e10, "weight_bytes": 4e8,
               "embedding_bytes_touched": 0, "input_bytes": 5e6, "batch_size": 32}
    monkeypatch.setattr(trace_mod, "_workload_features",
                        lambda name: profile if name == "mystery" else None)
    filled = fill_features(tiny)
    rows = {j["job_id"]: j for j in filled.to_pylist()}
    assert rows["D"]["flops_compute_bound"] == 2e12 and rows["D"]["batch_size"] == 32
    assert rows["A"]["flops_compute_bound"] == 1e12 and rows["A"]["batch_size"] is None
    r = characterize(tiny)  # fills on the way
    assert r["breakdown"]["jobs"] == 4
    assert r["breakdown"]["by_architecture"]["1w1g"]["jobs"] == 2


def test_empty_and_unknown_features() -> None:
    jobs = {"architecture": np.array(["1w1g", None], dtype=object), "n_gpus": np.array([1, 2.0]),
            "start_time_s": np.array([0.0, 0.0]), "end_time_s": np.array([5.0, math.nan])}
    r = characterize(jobs)
    # the second job has a start and no end (no censored column: censored by the csv rule), so
    # it runs to the trace end, 5 s: 1 x 5 + 2 x (5 - 0)
    assert r["jobs"] == 2 and r["gpu_time_s"] == 15 and r["jobs_with_duration"] == 1
    assert r["censored_gpu_time_s"] == 10 and r["gpu_time_lower_bound"] is True
    assert list(r["by_architecture"]) == ["1w1g", "unknown"]
    assert r["breakdown"]["jobs"] == 0


def test_censored_jobs_count_up_to_the_trace_end(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    path.write_text("job_id,architecture,n_gpus,submit_time_s,start_time_s,end_time_s,status\n"
                    "a,1w1g,1,0,0,100,Terminated\n"
                    "b,allreduce-local,2,30,40,,Running\n"  # still running: 40 -> trace end
                    "c,allreduce-local,4,160,,,Waiting\n"   # never started: no GPU time
                    "d,1w1g,1,0,10,150,Terminated\n")
    r = characterize(read_trace(path, "csv"), fill=False)
    # trace end = the largest time the trace holds: c's submission at 160
    # a 1 x 100, b 2 x (160 - 40) = 240, c 0, d 1 x 140
    assert r["trace_end_s"] == 160
    assert r["gpu_time_s"] == 100 + 240 + 140
    assert r["censored_gpu_time_s"] == 240 and r["gpu_time_lower_bound"] is True
    assert r["by_architecture"]["allreduce-local"]["gpu_time_s"] == 240
    assert r["flags"]["censored"] == 2
    # durations are of jobs with an end: a 100, d 140 (a running time is not a duration)
    assert r["jobs_with_duration"] == 2 and r["cdf"]["duration_s"]["value"][-1] == 140


def test_a_censored_job_that_ends_at_the_trace_end_has_no_duration() -> None:
    """Alibaba 2023 gives a running pod the trace end as its deletion time: its GPU time counts
    (a lower bound), its running time is no duration (the distribution keeps the finished)."""
    jobs = {"architecture": np.array(["1w1g"] * 3, dtype=object),
            "n_gpus": np.array([1.0, 1.0, 2.0]), "start_time_s": np.array([0.0, 10.0, 0.0]),
            "end_time_s": np.array([30.0, 50.0, 500.0]),
            "censored": np.array([False, False, True])}
    r = characterize(jobs)
    assert r["jobs_with_duration"] == 2 and r["censored_with_end"] == 1
    assert r["cdf"]["duration_s"]["value"][-1] == 40  # not the censored 500 s
    assert r["gpu_time_s"] == 30 + 40 + 2 * 500 and r["censored_gpu_time_s"] == 1000


def test_gpu_time_is_exact_without_running_jobs(tiny: pa.Table) -> None:
    r = characterize(tiny, fill=False)
    assert r["censored_gpu_time_s"] == 0 and r["gpu_time_lower_bound"] is False
    assert r["trace_end_s"] == 100


def test_censored_gpu_time_on_the_command_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from traincast.cli import app

    path = tmp_path / "r.csv"
    path.write_text("job_id,n_gpus,start_time_s,end_time_s,status\n"
                    "a,1,0,100,Terminated\nb,1,0,,Running\n")
    res = CliRunner().invoke(app, ["characterize", str(path), "--db", str(tmp_path / "r.duckdb"),
                                   "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["gpu_time_s"] == 100 + 100 and out["gpu_time_lower_bound"] is True


def test_gpus_per_job_row_leaves_out_jobs_without_gpus(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from traincast.cli import app

    path = tmp_path / "g.csv"  # 3 jobs without GPUs, then 1, 2 and 8 GPUs
    path.write_text("job_id,n_gpus,start_time_s,end_time_s\n"
                    + "".join(f"j{i},{g},0,10\n" for i, g in enumerate([0, 0, 0, 1, 2, 8])))
    res = CliRunner().invoke(app, ["characterize", str(path), "--db", str(tmp_path / "g.duckdb")],
                             env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    row = next(line for line in res.output.splitlines() if "GPUs per job (with GPUs)" in line)
    # p10 p50 p90 p99 max over 1, 2, 8: the least count whose share of the 3 jobs reaches p
    assert [c for c in row.split() if c != "│"][-5:] == ["1", "2", "8", "8", "8"]


def test_a_given_breakdown_is_used_as_it_is(tiny: pa.Table,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import traincast.analysis.characterize as char_mod
    from traincast.predict import predict_table

    cat = load_catalog()
    alone = characterize(tiny, cat, fill=False)
    bd = predict_table(tiny, cat)
    monkeypatch.setattr(char_mod, "predict_table", lambda *a, **k: pytest.fail("evaluated"))
    given = characterize(tiny, cat, fill=False, breakdown=bd)
    assert json.dumps(given, sort_keys=True) == json.dumps(alone, sort_keys=True)


def test_job_gpu_time_by_the_same_rule() -> None:
    from traincast.analysis.characterize import job_gpu_time_s

    jobs = {"n_gpus": [2.0, 1.0, 3.0], "start_time_s": [0.0, 50.0, np.nan],
            "end_time_s": [100.0, np.nan, np.nan], "censored": [0.0, 1.0, 1.0]}
    # 2 x 100; 1 x (100 - 50) up to the trace end; never started: unknown
    got = job_gpu_time_s(jobs)
    assert got[:2].tolist() == [200.0, 50.0] and np.isnan(got[2])


def test_each_source_has_its_own_trace_end() -> None:
    """A store holding two traces, each with its own time origin: a running job counts up to
    the end of its own trace, not of the other."""
    from traincast.analysis.characterize import job_gpu_time_s

    jobs = {"source_id": [1, 1, 2], "n_gpus": [1.0, 2.0, 1.0],
            "start_time_s": [0.0, 50.0, 1.6e9], "end_time_s": [100.0, np.nan, 1.6e9 + 100],
            "censored": [0.0, 1.0, 0.0]}
    # source 1 ends at 100: the running job holds 2 GPUs for 100 - 50 s
    assert job_gpu_time_s(jobs).tolist() == [100.0, 2 * 50.0, 100.0]
    r = characterize(jobs, fill=False)
    assert r["gpu_time_s"] == 100 + 100 + 100 and r["censored_gpu_time_s"] == 100
    assert r["trace_end_s"] == 1.6e9 + 100


def test_a_censored_job_whose_trace_gives_the_trace_end_is_a_lower_bound_too() -> None:
    # Alibaba 2023 style: a pod still running at the end carries the trace end as its end time
    # and its censored flag: 2 GPUs x (100 - 20) = 160 of the 1 x 50 + 160 GPU-seconds
    jobs = {"architecture": np.array(["1w1g", "1w1g"], dtype=object),
            "n_gpus": np.array([1.0, 2.0]), "start_time_s": np.array([0.0, 20.0]),
            "end_time_s": np.array([50.0, 100.0]), "censored": np.array([False, True])}
    r = characterize(jobs, fill=False)
    assert r["gpu_time_s"] == 50 + 160
    assert r["censored_gpu_time_s"] == 160 and r["gpu_time_lower_bound"] is True


def test_an_undisclosed_gpu_type_is_said_to_be_assumed(tmp_path: Path) -> None:
    """Alibaba 2023's G2 is not a public model: priced as the catalog's guess, and said so; a
    user's [alias_assumed] must name an [alias]."""
    from traincast.errors import TraincastError

    jobs = {"architecture": np.array(["1w1g"] * 2, dtype=object),
            "n_gpus": np.array([1.0, 1.0]), "gpu_type": np.array(["G2", "T4"], dtype=object)}
    r = characterize(jobs)
    assert r["by_gpu_type"]["G2"]["gpu"] == "A10" and "not disclose" in \
        r["by_gpu_type"]["G2"]["assumed"]
    assert "assumed" not in r["by_gpu_type"]["T4"]
    bad = tmp_path / "c.toml"
    bad.write_text('[alias_assumed]\nX9 = "a guess"\n')
    with pytest.raises(TraincastError, match="X9"):
        load_catalog(bad)


def test_characterize_names_gpu_types_the_catalog_does_not_know(tc, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus,gpu_type,start_time_s,end_time_s\n"
                     "a,1,A800,0,3600\nb,8,A800,0,7200\nc,2,V100S,0,100\nd,1,a100,0,10\n")
    run = tc("characterize", str(trace), "--db", str(tmp_path / "s.duckdb"), "--workload",
             "resnet50")
    said = " ".join(run.stdout.split())
    assert run.returncode == 0, run.stderr
    assert "not in the catalog: A800 (2 jobs), V100S (1 job)." in said  # a100: an alias
    assert "not predicted: 3 jobs, unknown node or GPU type" in said
    run = tc("characterize", "--db", str(tmp_path / "s.duckdb"), "--json")
    assert json.loads(run.stdout)["unknown_gpu_types"] == {"A800": 2, "V100S": 1}


def test_the_unknown_gpu_type_row_is_said(tc, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus,gpu_type,start_time_s,end_time_s\n"
                     "a,1,,0,3600\nb,0,,0,7200\nc,2,V100,0,100\n")
    run = tc("characterize", str(trace), "--db", str(tmp_path / "s.duckdb"))
    said = " ".join(run.stdout.split())
    assert run.returncode == 0, run.stderr
    assert ("unknown: the 2 jobs whose trace names no GPU type: 1 with GPUs priced on an "
            "assumed node (below); 1 without GPUs or on a node the trace names") in said, said
    # 0-GPU jobs alone: nothing is priced on an assumed node, and the line does not say so
    trace.write_text("job_id,n_gpus,gpu_type,start_time_s,end_time_s\nb,0,,0,7200\n")
    run = tc("characterize", str(trace), "--db", str(tmp_path / "z.duckdb"))
    said = " ".join(run.stdout.split())
    assert "assumed node" not in said
    assert ("unknown: the 1 job whose trace names no GPU type: 1 without GPUs or on a node the "
            "trace names") in said, said
    trace.write_text("job_id,n_gpus,gpu_type,start_time_s,end_time_s\nc,2,V100,0,100\n")
    run = tc("characterize", str(trace), "--db", str(tmp_path / "t.duckdb"))
    assert "unknown: the" not in " ".join(run.stdout.split())


def test_default_hardware_counts_only_jobs_that_name_no_gpu_type() -> None:
    # a: the literal type "unknown" (named, not in the catalog: no prediction); b: none given
    # (priced on the default node); c: a V100
    jobs = {"job_id": ["a", "b", "c"], "n_gpus": [1.0, 1.0, 2.0],
            "gpu_type": ["unknown", None, "V100"], "architecture": [None] * 3,
            "flops_compute_bound": [1e12] * 3, "bytes_memory_bound": [1e9] * 3,
            "weight_bytes": [1e8] * 3}
    out = characterize(jobs, load_catalog())
    assert out["default_hardware"]["jobs"] == 1
    assert out["breakdown"]["unpredicted"] == {"unknown node or GPU type": 1}


def test_characterize_prints_the_predicted_utilization_its_overlap_moves(tc, tmp_path: Path
                                                                         ) -> None:
    trace = tmp_path / "tiny.csv"
    trace.write_text(HEADER + "\n".join(ROWS) + "\n")
    args = ("characterize", str(trace), "--db", str(tmp_path / "s.duckdb"))
    for f in (0.0, 1.0):  # busy / T_total by hand, as the test above
        util = sum((fl + mem) / (data + max(fl + mem, f * comm) + (1 - f) * comm)
                   for data, fl, mem, comm in hand_times().values()) / 3
        said = " ".join(tc(*args, "--overlap", f"{f:g}").stdout.split())
        assert (f"predicted GPU utilization (busy / iteration, mean over jobs): "
                f"{100 * util:.1f}% at --overlap {f:g}") in said


def test_the_whole_store_says_when_it_holds_several_traces(tc, tmp_path: Path) -> None:
    # a TRACE given to an analysis command is stored too: the store's analysis then pools them
    db = str(tmp_path / "s.duckdb")
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text(HEADER + "\n".join(ROWS[:2]) + "\n")
    second.write_text(HEADER + ROWS[2] + "\n")
    assert tc("characterize", str(first), "--db", db).returncode == 0
    alone = tc("characterize", "--db", db)
    assert alone.returncode == 0 and "analysed together" not in alone.stderr
    assert tc("characterize", str(second), "--db", db).returncode == 0
    both = tc("characterize", "--db", db)
    said = " ".join(both.stderr.split())
    assert both.returncode == 0 and "2 sources, 3 job(s), analysed together" in said
    assert "3 jobs" in both.stdout
    assert "analysed together" not in tc("--quiet", "characterize", "--db", db).stderr


def test_ingest_notes_of_several_files_name_their_file(tc, tmp_path: Path) -> None:
    # a note (durations left unread: no start time) names the file it is of where the ingest
    # reads several; one file's notes need no name
    plain, dur = tmp_path / "plain.csv", tmp_path / "dur.csv"
    plain.write_text("job_id,n_gpus\na,1\n")
    dur.write_text("job_id,n_gpus,duration\nb,1,3600\n")
    both = tc("ingest", str(plain), str(dur), "--db", str(tmp_path / "s.duckdb"))
    said = "".join(both.stderr.split())  # a long path is folded anywhere: compare unspaced
    assert both.returncode == 0, both.stderr
    assert f"{dur}:1row(s)withadurationleftunread" in said, both.stderr
    assert "plain.csv:" not in said
    alone = tc("ingest", str(dur), "--db", str(tmp_path / "t.duckdb"))
    said = " ".join(alone.stderr.split())
    assert "1 row(s) with a duration left unread" in said and "dur.csv:" not in said, said


def test_the_duration_row_counts_the_jobs_it_is_over(tc, tmp_path: Path) -> None:
    # two finished jobs, one running (no end): the quantiles are over the 2
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus,start_time_s,end_time_s\na,1,0,3600\nb,1,0,60\nc,1,0,\n")
    run = tc("characterize", str(trace), "--db", str(tmp_path / "s.duckdb"))
    assert run.returncode == 0, run.stderr
    assert "duration (2 finished)" in run.stdout
