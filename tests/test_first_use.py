"""What a first user meets: the host as a bottleneck, a profile file priced as --model is, the
setup line under --amp, the hybrid table, what-if counts, odd sequences in plan, foreign
DuckDB files, uneven kernel CSV rows and the study's assumed hardware."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from traincast.analysis.whatif import Summary
from traincast.errors import TraincastError
from traincast.jobs import Strings
from traincast.model import Breakdown
from traincast.parallel.models import get_model
from traincast.parallel.plan import plan
from traincast.trace import Store

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def tc(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from traincast.cli import main; main()",
                           *args], capture_output=True, text=True, timeout=300, cwd=cwd)


# ------------------------------------------------------------------ the host as a bottleneck
def test_host_wait_is_the_bottleneck_when_largest() -> None:
    # job 0: 2 s of compute of which 1.6 s the GPU waits: busy share k = 0.4 / 2 = 0.2, so the
    # FLOP- and memory-bound parts count 0.2 s each, the wait 1.6 s, comm 0.5 s -> host.
    # job 1: the same without a wait -> FLOP-bound (1 s > 0.5 s).
    bd = Breakdown(data_io=np.array([0.0, 0.0]), compute_flop=np.array([1.0, 1.0]),
                   compute_mem=np.array([1.0, 0.4]), comm=np.array([0.5, 0.5]),
                   total=np.array([2.5, 1.9]), idle=np.array([1.6, 0.0]))
    assert list(bd.bottleneck_names()) == ["host", "compute_flop"]
    # a wait smaller than comm does not name the host: 0.3 s wait, busy parts 0.85 s each
    bd = Breakdown(data_io=np.array([0.0]), compute_flop=np.array([1.0]),
                   compute_mem=np.array([1.0]), comm=np.array([0.9]), total=np.array([2.9]),
                   idle=np.array([0.3]))
    assert list(bd.bottleneck_names()) == ["comm"]


def test_predict_names_the_host_for_dlrm_on_a100() -> None:
    out = json.loads(tc("predict", "--model", "zoo:dlrm", "--node", "dgx-a100",
                        "--json").stdout)
    t = out["time_s"]
    assert out["bottleneck"] == "host"
    assert "host op dispatch" in out["bottleneck_label"]
    # the wait is inside the compute time and is most of the step (GPU utilization 2%)
    assert 0.5 * t["total"] < t["host_wait"] <= t["compute_flop"] + t["compute_mem"]
    assert out["gpu_util"] < 0.1  # docs/model.md: about 2%
    text = tc("predict", "--model", "zoo:dlrm", "--node", "dgx-a100").stdout
    assert "GPU waits for the host" in text and "Bottleneck: host op dispatch" in text


# ------------------------------------------------------------- a profile file is per-op
def test_profile_file_keeps_the_per_op_table(tmp_path: Path) -> None:
    assert tc("profile", "zoo:gcn", "-o", str(tmp_path / "a.json")).returncode == 0
    assert tc("profile", "zoo:gcn", "--no-ops", "-o", str(tmp_path / "b.json")).returncode == 0
    a = json.loads((tmp_path / "a.json").read_text())
    b = json.loads((tmp_path / "b.json").read_text())
    assert len(a["ops"]) == a["n_ops"] > 0 and "ops" not in b
    # priced as predict --model prices the zoo model: op by op, the same time
    by_file = json.loads(tc("predict", "--features", str(tmp_path / "a.json"), "--node",
                            "dgx-h100", "--json").stdout)
    by_model = json.loads(tc("predict", "--model", "zoo:gcn", "--node", "dgx-h100",
                             "--json").stdout)
    assert by_file["setup"]["per_op"] and by_model["setup"]["per_op"]
    assert by_file["time_s"]["total"] == pytest.approx(by_model["time_s"]["total"], rel=1e-9)


def test_setup_line_says_mixed_precision() -> None:
    out = json.loads(tc("predict", "--model", "zoo:gcn", "--node", "dgx-b200", "--amp",
                        "--json").stdout)
    assert out["setup"]["amp"] is True
    text = tc("predict", "--model", "zoo:gcn", "--node", "dgx-b200", "--amp").stdout
    assert "mixed precision" in text and "fp32 matmuls" not in text and "--amp" in text


# ------------------------------------------------------------------------- hybrid output
def test_hybrid_json_has_memory_and_table_has_shares() -> None:
    args = ("predict", "--arch", "hybrid", "--model", "zoo:llama2-7b", "--node", "dgx-h100",
            "--gpus", "16", "--dp", "2", "--tp", "4", "--pp", "2")
    out = json.loads(tc(*args, "--json").stdout)
    mem = out["memory"]
    assert mem["footprint_gb"] == pytest.approx(out["memory_gb"]["total"])
    assert mem["capacity_gb"] == pytest.approx(out["memory_gb"]["capacity"])
    assert mem["fits"] is out["fits"]
    parts = ("data_io", "compute_flop", "compute_mem", "comm", "bubble")
    t = out["time_s"]
    for k in parts:  # each share is its time over the parts' sum, from the printed times
        assert out["share"][k] == pytest.approx(t[k] / sum(t[p] for p in parts), rel=1e-9)
    text = tc(*args).stdout
    assert "communication" in text and "tensor-parallel all-reduces" in text
    assert "total per iteration" in text and "compute_flop" not in text


# ------------------------------------------------------------------------ what-if counts
def test_whatif_not_applied_counts_only_predicted_jobs() -> None:
    # three matched jobs: one without a base time (applied), one predicted and applied, one
    # predicted that the scenario cannot apply -> applied 2, not applied 1 (never negative)
    arch = Strings(np.zeros(3, dtype=np.int32), ("ps-worker",))
    r = Summary().add(arch, np.ones(3), np.ones(3), np.array([np.nan, 2.0, 3.0]),
                      np.ones(3, dtype=bool), np.array([True, True, False]),
                      np.array([1.0, 1.0, np.nan])).result()
    assert (r["matched"], r["applied"], r["not_applied"]) == (3, 2, 1)


# --------------------------------------------------------------------------- plan, cp
def test_plan_keeps_cp_1_for_an_odd_sequence() -> None:
    out = plan(get_model("llama2-7b"), 8, "dgx-h100", seq=4095,
               framework="megatron-core")
    assert out["top"], "an odd sequence still runs without context parallelism"
    assert all(row["config"]["cp"] == 1 for row in out["top"])


def test_odd_sequence_cp_error_says_use_cp_1() -> None:
    r = tc("predict", "--arch", "hybrid", "--model", "zoo:llama2-7b", "--node", "dgx-h100",
           "--gpus", "8", "--dp", "4", "--cp", "2", "--seq", "4095",
           "--framework", "megatron-core")
    assert r.returncode != 0
    assert "an odd sequence takes no cp > 1: use cp 1" in r.stderr


# ---------------------------------------------------------------- a foreign DuckDB file
def test_ingest_refuses_another_programs_duckdb(tmp_path: Path) -> None:
    db = tmp_path / "other.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE jobs (x INTEGER)")
    con.execute("INSERT INTO jobs VALUES (1)")
    con.close()
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus\na,1\n")
    with pytest.raises(TraincastError, match="not a traincast job store"):
        Store(db).ingest(trace)
    con = duckdb.connect(str(db))
    assert con.execute("SELECT * FROM jobs").fetchall() == [(1,)]
    assert [r[0] for r in con.execute("DESCRIBE jobs").fetchall()] == ["x"]
    con.close()


# ------------------------------------------------------------------- kernel CSV rows
def test_uneven_kernel_row_is_named(tmp_path: Path) -> None:
    header = "OPName,Latency,Device,B,M,N,K"
    rows = [f"linear,0.05,Tesla T4,1,{m},64,64" for m in (64, 128, 256, 512)]
    rows.insert(2, "linear,0.05,Tesla T4")  # the third row after the header: row 3
    (tmp_path / "linear").mkdir()
    (tmp_path / "linear" / "Tesla_T4.csv").write_text("\n".join([header, *rows]) + "\n")
    r = tc("validate", "--kernels", str(tmp_path))
    assert r.returncode != 0
    assert "Tesla_T4.csv: row 3: 3 fields, the header has 7" in r.stderr


# ------------------------------------------------------------- the study's assumptions
@pytest.mark.skipif(not (DATA / "alibaba-gpu-v2023").exists(), reason="shared data absent")
def test_study_says_jobs_without_gpus_and_assumed_hardware(tmp_path: Path) -> None:
    src = DATA / "alibaba-gpu-v2023" / "openb_pod_list_gpuspec33.csv"
    lines = src.read_text().splitlines()
    trace = tmp_path / "pods.csv"
    trace.write_text("\n".join(lines[:400]) + "\n")
    header = lines[0].split(",")
    gpu = header.index("num_gpu")
    spec = header.index("gpu_spec")
    rows = [r.split(",") for r in lines[1:400]]
    zero = sum(1 for r in rows if float(r[gpu]) == 0)
    no_type = sum(1 for r in rows if not r[spec] and float(r[gpu]) > 0)  # no node column
    assert zero and no_type  # the real file's first rows hold both kinds
    r = tc("study", str(trace), "--format", "alibaba-2023", "-o", str(tmp_path / "s"),
           "--no-report", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert f"({len(rows) - zero:,} jobs with GPUs; {zero:,} without, left out)" in text
    assert f"assumed hardware: {no_type:,} jobs with GPUs name neither a GPU type nor a node" \
        in text
    assert "pai-v100-nvlink nodes (8 x V100-SXM2-16GB" in text


def _kernels(tmp_path: Path, rows: list[str], family: str = "linear") -> Path:
    (tmp_path / family).mkdir(parents=True, exist_ok=True)
    (tmp_path / family / "Tesla_T4.csv").write_text(
        "\n".join(["OPName,Latency,Device,B,M,N,K", *rows]) + "\n")
    return tmp_path


@pytest.mark.parametrize(("row", "said"), [
    ("linear,0.05,Tesla T4,1,58.5,64,64", "field 'M' = '58.5' is not a whole number"),
    ("linear,1e30,Tesla T4,1,64,64,64", "field 'Latency' = '1e30' is above 1,000,000 (ms)"),
    ("linear,0.05,Tesla T4,1,1e15,64,64", "field 'M' = '1e15' is above 2,147,483,647"),
    ("linear,,Tesla T4,1,64,64,64", "field 'Latency' = '' is not a positive number"),
])
def test_impossible_kernel_rows_are_named(tmp_path: Path, row: str, said: str) -> None:
    from traincast.calibration.kernel_fit import read_kernels
    from traincast.hardware.catalog import load_catalog

    good = [f"linear,0.05,Tesla T4,1,{m},64,64" for m in (64, 128)]
    folder = _kernels(tmp_path, [*good, row])
    with pytest.raises(TraincastError, match=re.escape(f"row 3: {said}")):  # after 2 good
        read_kernels(folder, load_catalog())


def test_a_folder_that_is_no_family_is_named(tmp_path: Path) -> None:
    from traincast.calibration.kernel_fit import read_kernels
    from traincast.hardware.catalog import load_catalog

    rows = [f"linear,0.05,Tesla T4,1,{m},64,64" for m in (64, 128)]
    _kernels(tmp_path, rows)
    _kernels(tmp_path, rows, family="lnorm")
    with pytest.raises(TraincastError, match="lnorm: CSV files in a folder that is no kernel"):
        read_kernels(tmp_path, load_catalog())


# ------------------------------------------------------------------ bad features and flags
@pytest.mark.parametrize(("change", "said"), [
    ({"batch_size": 0}, "batch_size must be a whole number of at least 1, got 0"),
    ({"memory_bytes": {"weights": "x"}}, "memory_bytes.weights must be a number of bytes"),
    ({"bytes_memory_bound_fused": 2e9, "bytes_memory_bound": 1e9},
     "bytes_memory_bound_fused = 2000000000.0 is above bytes_memory_bound"),
])
def test_bad_features_file_is_refused(tmp_path: Path, change: dict, said: str) -> None:
    feats = {"flops_compute_bound": 1e12, "bytes_memory_bound": 1e9, "weight_bytes": 1e8,
             "batch_size": 8, **change}
    path = tmp_path / "f.json"
    path.write_text(json.dumps(feats))
    r = tc("predict", "--features", str(path))
    assert r.returncode != 0 and f"f.json: {said}" in r.stderr


def test_flags_that_would_do_nothing_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_text(json.dumps({"flops_compute_bound": 1e12, "bytes_memory_bound": 1e9,
                                "weight_bytes": 1e8}))
    r = tc("predict", "--features", str(path), "--batch", "8")
    assert r.returncode != 0 and "--batch applies to --model" in r.stderr
    r = tc("predict", "--flops", "1e12", "--mem-bytes", "1e9", "--weight-bytes", "1e8",
           "--memory-format", "nhwc")
    assert r.returncode != 0 and "--flops gives aggregate features" in r.stderr


# -------------------------------------------------------------- catalog and published rows
@pytest.mark.parametrize(("text", "said"), [
    ('[alias]\nV100 = "NoSuch"\n', "[alias] key 'V100' refers to unknown GPU 'NoSuch'"),
    ('[node.big]\ngpu = "V100-SXM2-16GB"\ngpus = 100000000\npcie = "pcie3x16"\n'
     'intra = "nvlink2-v100"\nnic = "eth25"\n', "[node.big] key 'gpus' = 100000000 is above"),
    ("[gpu.V100-SXM2-16GB.datasheet]\nbase_clock_mhz = 5000\n",
     "key 'base_clock_mhz' = 5000 is above boost_clock_mhz = 1530"),
])
def test_catalog_typos_are_named_with_their_file(tmp_path: Path, text: str, said: str) -> None:
    from traincast.hardware.catalog import CatalogError, load_catalog

    path = tmp_path / "mine.toml"
    path.write_text(text)
    with pytest.raises(CatalogError) as exc:
        load_catalog(path)
    assert str(exc.value).startswith(f"{path}: ") and said in str(exc.value)


@pytest.mark.parametrize(("edit", "said"), [
    (lambda t: t + "\n[bogus]\nx = 1\n", "unknown table [bogus]"),
    (lambda t: t.replace("gpus = 1\n", "gpus = 1000000000\n", 1),
     "field 'gpus' = 1000000000 is above 1,000,000"),
])
def test_published_rows_typos_are_named(tmp_path: Path, edit: Any, said: str) -> None:
    from traincast.validation.published import load_published

    text = ('[model.m]\nspec = "zoo:resnet50"\n\n[[row]]\nmodel = "m"\ngpu = "V100"\ngpus = 1\n'
            'dtype = "fp32"\nbatch_per_gpu = 64\nthroughput = 300.0\nunit = "images/s"\n'
            'citation = "a test"\n')
    path = tmp_path / "rows.toml"
    path.write_text(edit(text))
    with pytest.raises(TraincastError, match=re.escape(said)):
        load_published(path)


# ------------------------------------------------------------------ quotes left open in a trace
def _ingest_elasticflow(tmp_path: Path, rows: str) -> dict[str, Any]:
    """The ingest report of an ElasticFlow file with these rows under its header."""
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submission_time,duration,num_gpu\n" + rows)
    return Store(tmp_path / "s.duckdb").ingest(trace, format="elasticflow")


def test_a_quote_left_open_is_a_bad_row_not_a_job(tmp_path: Path) -> None:
    report = _ingest_elasticflow(tmp_path, 'z,1,10,2\n"a,1,10,2\nb,1,10,2\nc,1,10,2"\n'
                                           "d,1,10,1\n")
    assert report["jobs"] == 2 and report["bad_rows"] == 1
    err = report["errors"][0]
    assert (err["row"], err["field"]) == (2, "job_id")
    assert "the quote that opens this value closes lines later" in err["value"]
    # a job id quoted with a line break in it, closed on the next line: said the same way
    report = _ingest_elasticflow(tmp_path, 'z,1,10,2\n"c\nd",1,10,2\n')
    assert report["jobs"] == 1 and report["errors"][0]["value"] == (
        "c ... (holds a line break: a job id is one line; the quote that opens this value "
        "closes lines later, so the lines between were read into it)")


def test_a_quote_that_never_closes_names_its_row(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text('job_id,submission_time,duration,num_gpu\nz,1,10,2\ny,2,10,2\n'
                     '"a,1,10,2\nb,1,10,2\n')
    with pytest.raises(TraincastError, match=r"t\.csv: row 3: a quote opens there|"
                                             r"one opens in row 3"):
        Store(tmp_path / "s.duckdb").ingest(trace, format="elasticflow")


def test_tensor_parallel_across_nodes_is_warned() -> None:
    from traincast.parallel.hybrid import predict_hybrid

    # dgx-h100: 8 GPUs per node, one NDR port per GPU
    across = predict_hybrid("llama2-7b", node="dgx-h100", tp=16)
    inside = predict_hybrid("llama2-7b", node="dgx-h100", tp=8, dp=2)
    assert any("tensor parallelism over 16 GPUs crosses nodes of 8" in w
               for w in across["warnings"])
    assert not any("crosses nodes" in w for w in inside["warnings"])
    assert across["comm_s"]["tp"] > inside["comm_s"]["tp"]  # its all-reduces on the network


def test_a_floor_is_the_hosts_not_the_gpus() -> None:
    import tomllib

    from traincast import kernels
    from traincast.hardware.catalog import load_catalog

    shipped = tomllib.loads((Path(__file__).resolve().parents[1] / "src" / "traincast"
                             / "hardware" / "kernel_model.toml").read_text())["kernel_model"]
    cat = load_catalog()
    # NeuSight measured the P100 on a host whose floor is 45.2 us and the V100 on one of
    # 32.6 us; a prediction runs on the user's host: the median floor for every GPU alike
    assert shipped["floors_us"]["P100-PCIE-16GB"] > 1.5 * shipped["default_floor_us"]
    for gpu in ("P100-PCIE-16GB", "V100-PCIE-32GB", "T4", "A100-SXM4-80GB", "H100-SXM5-80GB"):
        assert kernels.op_floor_s(cat.gpus[gpu]) == pytest.approx(
            shipped["default_floor_us"] * 1e-6, rel=1e-12)


def test_recommend_names_a_host_bound_job_and_prices_a_zoo_model_op_by_op() -> None:
    r = tc("recommend", "--model", "zoo:dlrm", "--node", "dgx-a100", "--json")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)["rows"][0]
    assert row["base_bottleneck"] == "host"
    # the one job is priced from its own per-op table, as predict --model prices it
    r = tc("recommend", "--model", "zoo:resnet50", "--arch", "ps-worker", "--workers", "8",
           "--ps", "2", "--node", "pai-v100-pcie", "--json")
    best = json.loads(r.stdout)["rows"][0]
    gpus = {"1w1g": 1}.get(best["best_architecture"], 8)
    out = json.loads(tc("predict", "--model", "zoo:resnet50", "--arch",
                        best["best_architecture"], "--gpus", str(gpus), "--node",
                        best["best_node"], "--json").stdout)
    assert out["setup"]["per_op"]
    assert best["best_total_s"] == pytest.approx(out["time_s"]["total"], rel=1e-6)
    # a model with no shipped table too (built from its config), at its own profile
    args = ("--model", "zoo:megatron-gpt-1.7b", "--node", "dgx-a100", "--json")
    base = json.loads(tc("recommend", *args).stdout)["rows"][0]["base_total_s"]
    assert base == pytest.approx(json.loads(tc("predict", *args).stdout)["time_s"]["total"],
                                 rel=1e-9)


def test_plan_runs_tp_1_without_sequence_parallelism() -> None:
    out = plan(get_model("llama2-7b"), 8, "dgx-h100", top=50)
    configs = [row["config"] for row in out["top"]]
    assert any(c["tp"] == 1 for c in configs) and any(c["tp"] > 1 for c in configs)
    assert all(c["sp"] == 0 for c in configs if c["tp"] == 1)


def test_more_bad_inputs_are_named(tmp_path: Path) -> None:
    from traincast.hardware.catalog import CatalogError, load_catalog
    from traincast.validation.published import load_published

    r = tc("predict", "--flops", "1e12", "--mem-bytes", "1e9", "--weight-bytes", "1e8",
           "--batch", "999")
    assert r.returncode != 0 and "--batch applies to --model" in r.stderr
    r = tc("profile", "zoo:gcn", "--no-ops", "-o", str(tmp_path / "g.parquet"))
    assert r.returncode != 0 and "--no-ops with a Parquet FILE" in r.stderr
    rows = tmp_path / "rows.toml"
    rows.write_text('source = "my paper"\n')
    with pytest.raises(TraincastError, match=r"\[source\] must be a table"):
        load_published(rows)
    curves = tmp_path / "c.toml"  # a calibrated entry (measured curves) is checked too
    curves.write_text('[gpu.mine]\nsource = "t"\nboost_clock_mhz = 1000\nbase_clock_mhz = 2000\n'
                      "gemm_intensity = [1.0, 10.0]\ngemm_tflops = [1.0, 2.0]\n"
                      "mem_bw_gbs = 100\nfp32_tflops = 2\n")
    with pytest.raises(CatalogError, match="'base_clock_mhz' = 2000 is above"):
        load_catalog(curves)
    r = tc("predict", "--arch", "hybrid", "--model", "zoo:llama2-7b", "--node", "dgx-h100",
           "--gpus", "8", "--dp", "4", "--cp", "2", "--seq", "4106",
           "--framework", "megatron-core")
    # 4106 = 2 x 2053 (a prime): even, but no 2 cp from 4 to 128 divides it
    assert "no cp from 2 to 64 has 2 x cp dividing 4106: use cp 1" in r.stderr


def test_memory_is_not_checked_without_a_capacity() -> None:
    from traincast.predict import memory_fit

    feats = {"memory_bytes": {"weights": 1e9, "grads": 1e9, "optimizer": 2e9,
                              "activations": 1e9}}
    # the footprint without a capacity: no verdict (5 GB by hand)
    assert memory_fit(feats, "1w1g", 1, float("nan")) == {
        "footprint_gb": pytest.approx(5.0), "state_gb": pytest.approx(4.0),
        "capacity_gb": None, "fits": None}
    assert memory_fit({}, "1w1g", 1, 4.0) is None  # features without a footprint
    fit = memory_fit(feats, "1w1g", 1, 4.0)  # 5 GB by hand on a 4 GB GPU
    assert fit == {"footprint_gb": pytest.approx(5.0), "state_gb": pytest.approx(4.0),
                   "capacity_gb": 4.0, "fits": False}


def test_whatif_numbers_stay_whole_at_80_columns(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "COLUMNS": "80"}
    r = subprocess.run([sys.executable, "-c", "from traincast.cli import main; main()",
                        "whatif", str(Path(__file__).resolve().parents[1] / "src" / "traincast"
                                      / "trace" / "sample" / "sample.parquet"),
                        "--sweep", "architecture=allreduce-cluster,1w1g"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    rows = [line for line in r.stdout.splitlines()  # not the titles, nor the why of a 1.00x
            if line.startswith("architecture=") and "by architecture" not in line
            and "none of its" not in line]
    assert len(rows) == 2  # each scenario's numbers whole on its first line
    for line in rows:
        assert re.search(r"[\d,]+ +\d+ +\d+%/\d+% +(\d+\.\d\d× +){4}-?[\d.]+%$", line), line


def test_open_quote_row_counts_records_not_lines(tmp_path: Path) -> None:
    from traincast.trace.adapters.base import open_quote_row

    path = tmp_path / "t.csv"
    # row 1 holds a quoted line break (closed), row 3 opens a quote never closed
    path.write_text('job_id,n_gpus,user\na,1,"multi\nline"\nb,2,x\n"c,3,y\nd,4,z\n')
    assert open_quote_row(path) == 3
    path.write_text('job_id,n_gpus,user\na,1,"multi\nline"\nb,2,x\n')
    assert open_quote_row(path) is None


def test_an_entry_without_memory_is_not_checked_by_the_hybrid_model(tmp_path: Path) -> None:
    from traincast.hardware.catalog import load_catalog
    from traincast.parallel.hybrid import predict_hybrid

    path = tmp_path / "cal.toml"
    path.write_text('[gpu.mine]\nsource = "t"\nfp32_tflops = 10.0\nbf16_tflops = 100.0\n'
                    "fp16_tflops = 100.0\nmem_bw_gbs = 900.0\ngemm_intensity = [1.0, 100.0]\n"
                    "gemm_tflops = [1.0, 9.0]\n\n[node.minenode]\ngpu = \"mine\"\ngpus = 8\n"
                    'pcie = "pcie4x16"\nintra = "nvlink3-a100"\nnic = "ib-hdr"\nsource = "t"\n')
    out = predict_hybrid("llama2-7b", node="minenode", dp=8, catalog=load_catalog(path))
    assert out["fits"] is True and out["memory"]["fits"] is True
    assert not any("does not fit" in w for w in out["warnings"])


def test_a_quote_open_in_the_header_is_named(tmp_path: Path) -> None:
    from traincast.trace.adapters.base import open_quote_row

    path = tmp_path / "t.csv"
    path.write_text('"job_id,n_gpus\na,1\nb,2\n')
    assert open_quote_row(path) == 0


def test_elasticflow_rows_name_their_own_field(tmp_path: Path) -> None:
    report = _ingest_elasticflow(tmp_path, "z,1,10,2\na,,10,2\nb,nan,10,2\nc,1,inf,2\n"
                                           "d,1,10,1\n")
    assert report["jobs"] == 2 and report["bad_rows"] == 3
    said = {e["row"]: (e["field"], e["value"]) for e in report["errors"]}
    assert said[2] == ("submission_time", "(missing: the job ends at submission_time + duration)")
    assert said[3][0] == "submission_time" and said[3][1].startswith("nan (missing")
    assert said[4] == ("duration", "inf (not a finite number of seconds)")
    # a submission without a duration: no end, a bad row of field duration
    (tmp_path / "more").mkdir()
    report = _ingest_elasticflow(tmp_path / "more", "z,1,10,2\na,5,,2\nb,6,NaN,1\n")
    said = {e["row"]: (e["field"], e["value"]) for e in report["errors"]}
    assert report["jobs"] == 1 and said[2][0] == said[3][0] == "duration"
    assert said[2][1] == "(missing: every job of the trace has one, its end is submission_time " \
        "+ duration)"
