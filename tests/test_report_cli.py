"""`traincast report TRACE` and `--db FILE`: the real study runs first, then the report."""

from __future__ import annotations

import html
import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from report_study import INJECTED, jobs_table, make_small_study
from traincast.hardware.catalog import load_catalog

CLI = [sys.executable, "-c", "from traincast.cli import main; main()"]


def tc(*args: str, cwd=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "jobs.csv"
    pacsv.write_csv(pa.table(jobs_table()), path)
    return path


def test_report_of_a_trace_runs_the_study(trace, tmp_path):
    out = tmp_path / "out"
    r = tc("--quiet", "report", str(trace), "-o", str(out), "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["report"] == str(out / "report.html")
    for name in ("study.json", "summary.json", "characterize.json", "whatif.json",
                 "whatif_jobs.csv", "recommend.csv", "jobs.parquet"):
        assert (out / name).is_file(), name
    stems = {p.rsplit("/", 1)[1].rsplit(".", 1)[0] for p in res["figures"]}
    assert {"breakdown_architecture", "breakdown_workload", "cdf_gpus_per_job", "cdf_duration",
            "cdf_comm_share", "share_architecture", "cdf_speedup"} <= stems
    text = (out / "report.html").read_text()
    assert html.escape(INJECTED) in text and INJECTED not in text
    meta = json.loads((out / "study.json").read_text())
    assert meta["trace"]["path"] == str(trace) and meta["sample"] is False
    # the study's findings and scenario definitions reach the page
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sentences"] and html.escape(summary["sentences"][0]) in text
    assert "Every node NIC slower than 100 Gbit/s Ethernet becomes 100 Gbit/s Ethernet" in text
    assert "Provenance of the bundled sample" not in text


def test_report_of_the_store(trace, tmp_path):
    db = tmp_path / "store.duckdb"
    r = tc("--quiet", "ingest", str(trace), "--db", str(db))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    r = tc("report", "--db", str(db), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "Report written" in r.stdout and (out / "report.html").is_file()
    assert (out / "store_jobs.parquet").is_file()
    char = json.loads((out / "characterize.json").read_text())
    assert char["jobs"] == len(jobs_table()["job_id"])
    r = tc("report", "--db", str(db), "--study", str(out))
    assert r.returncode == 2 and "not both" in r.stderr and "Traceback" not in r.stderr


MLP = '''import torch


def build(batch_size):
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    return model, (torch.randn(batch_size, 64),)
'''


def test_report_roofline_of_a_model_file(tmp_path):
    pytest.importorskip("torch", reason="--roofline profiles the model, which needs torch")
    model = tmp_path / "mlp.py"
    model.write_text(MLP)
    folder = make_small_study(tmp_path / "s")
    r = tc("report", "--study", str(folder), "--roofline", f"{model}:build", "--gpu", "A100",
           "--json")
    assert r.returncode == 0, r.stderr
    stems = {p.rsplit("/", 1)[1] for p in json.loads(r.stdout)["figures"]}
    assert "roofline_mlp-py-build_a100-sxm4-80gb.png" in stems
    text = (folder / "report.html").read_text()
    # A100 SXM4 80 GB at the rates predict prices aggregate work at: by hand 2 x 108 x 64 lanes
    # x 1.41 GHz x e / rho (boost held, loads free: tests/test_kernels.py) of the 19.5 TFLOP/s
    # peak; 2039 GB/s x f_elementwise; the ridge is their ratio
    k = load_catalog().gpu("A100-SXM4-80GB").kernel
    rate = 2 * 108 * 64 * 1.41e9 * k["simt_efficiency"] / k["choice_linear"]
    bw = 2039e9 * k["f_elementwise"]
    assert "on A100-SXM4-80GB (fp32)" in text
    assert "kernel strategy: achievable for large GEMMs" in text
    assert f"{rate / 1e12:.3g} TFLOP/s (of a 19.5 TFLOP/s peak)" in text
    assert f"memory {bw / 1e9:.4g} GB/s (of 2039 GB/s)" in text
    assert "Slowest ops of" in text and "addmm" in text
    svg = (folder / "figures" / "roofline_mlp-py-build_a100-sxm4-80gb.svg").read_text()
    assert f"ridge {rate / bw:.3g} FLOP/B" in svg
    r = tc("report", "--study", str(folder), "--roofline", f"{model}:build", "--gpu", "Z99")
    assert r.returncode == 2 and "Z99" in r.stderr and "Traceback" not in r.stderr


def test_a_store_is_studied_as_read_not_ingested_again(trace, tmp_path):
    # the store's jobs go to the study as a table: the study folder gets no store of its own,
    # and its numbers are those of the same trace studied directly
    from traincast.analysis.study import study
    from traincast.cli.report import _study_from_jobs
    from traincast.hardware.catalog import load_catalog
    from traincast.trace.store import ingest

    db = tmp_path / "store.duckdb"
    ingest(trace, "csv", db)
    cat = load_catalog()
    out = tmp_path / "from-store"
    _study_from_jobs(None, db, "csv", {}, out, cat, True, None)
    assert (out / "store_jobs.parquet").is_file() and not (out / "jobs.duckdb").exists()
    meta = json.loads((out / "study.json").read_text())
    # the study says what it read: the store, and the trace file its source names
    assert meta["db"] == str(db) and meta["trace"]["store"] == str(db)
    assert meta["trace"]["path"] == str(trace) and meta["trace"]["paths"] == [str(trace)]
    direct = tmp_path / "direct"
    study(trace, direct, catalog=cat, report=False)
    for name in ("summary.json", "characterize.json"):
        assert json.loads((out / name).read_text()) == json.loads((direct / name).read_text())


def test_duration_caption_counts_censored_jobs_when_none_is_plotted(tmp_path):
    # two finished jobs; the one running job has no end time, so no censored job is plotted
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus,workload,start_time_s,end_time_s,status\n"
                     "a,1,resnet50,0,100,Terminated\nb,1,resnet50,0,300,Terminated\n"
                     "c,1,resnet50,50,,Running\n")
    out = tmp_path / "out"
    r = tc("--quiet", "report", str(trace), "-o", str(out), "--db", str(tmp_path / "s.duckdb"))
    assert r.returncode == 0, r.stderr
    text = " ".join((out / "report.html").read_text().split())
    assert "(1 censored job with no start or no end time, not plotted)" in text


def test_duration_caption_counts_finished_jobs_without_an_end(tmp_path):
    # a Slurm record left open: COMPLETED with End Unknown, finished (not censored), its
    # duration unknown: not in the figure, and the caption says so
    trace = tmp_path / "jobs.txt"
    trace.write_text(
        "JobID|User|State|Submit|Start|End|NNodes|AllocTRES\n"
        "1|a|COMPLETED|2024-01-02T10:00:00|2024-01-02T10:01:00|Unknown|1|gres/gpu=4,node=1\n"
        "2|a|COMPLETED|2024-01-02T10:00:00|2024-01-02T10:01:00|2024-01-02T11:01:00|1|"
        "gres/gpu=1,node=1\n"
        "3|a|COMPLETED|2024-01-02T10:00:00|2024-01-02T10:01:00|2024-01-02T12:01:00|1|"
        "gres/gpu=1,node=1\n")
    out = tmp_path / "out"
    r = tc("--quiet", "report", str(trace), "--format", "slurm", "-o", str(out), "--db",
           str(tmp_path / "s.duckdb"))
    assert r.returncode == 0, r.stderr
    text = " ".join((out / "report.html").read_text().split())
    assert "1 finished job without a start or an end time (duration unknown) is not plotted" \
        in text


def test_study_flags_with_a_study_folder_are_refused(tmp_path):
    """--study DIR reports a study already made: --workload, --format and --map, which
    describe the study a TRACE runs first, are refused naming them (before, ignored)."""
    for args, flag in ((["--workload", "nosuch"], "--workload"), (["--format", "slurm"],
                                                                   "--format"),
                       (["--map", "n_gpus=x"], "--map")):
        r = tc("report", "--study", str(tmp_path), *args)
        assert r.returncode == 2 and f"error: {flag}: flags of the study" in r.stderr, r.stderr
    # without a trace (the store read as stored) a trace's --format and --map are refused too
    for args, flag in ((["--format", "slurm"], "--format"), (["--format", "csv"], "--format"),
                       (["--map", "n_gpus=x"], "--map")):
        r = tc("report", "--db", str(tmp_path / "s.duckdb"), *args)
        assert r.returncode == 2 and f"error: {flag}: flags of a TRACE" in r.stderr, r.stderr


def test_a_report_of_a_trace_without_jobs_lists_no_figure_folder(tmp_path):
    # a header alone (ElasticFlow's columns): nothing to draw, so no table of figures in a
    # folder the report did not write
    trace = tmp_path / "empty.csv"
    trace.write_text("job_id,submission_time,duration,num_gpu\n")
    out = tmp_path / "rep"
    r = tc("report", str(trace), "-f", "elasticflow", "-o", str(out), "--db",
           str(tmp_path / "e.duckdb"))
    assert r.returncode == 0, r.stderr
    assert "Figures in" not in r.stdout and not (out / "figures").exists()
    assert "No figure: the study folder has no jobs" in r.stdout
    assert (out / "report.html").is_file()
