"""The end-to-end study: on the bundled sample, and on a small trace with known features."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from test_whatif import PINNED, PS4_BASE, PS4_NVLINK, small_trace
from traincast.study import STUDY_SCENARIOS, study

FILES = ("study.json", "summary.json", "characterize.json", "whatif.json", "whatif_jobs.csv",
         "recommend.json", "recommend.csv", "jobs.parquet")


def test_study_on_the_bundled_sample(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "study"
    result = study(out_dir=out, report=False)
    for name in FILES:
        assert (out / name).is_file(), name
    assert (out / "jobs.duckdb").is_file()
    assert not (tmp_path / "traincast.duckdb").exists()  # the store lives in the study folder
    meta = json.loads((out / "study.json").read_text())
    assert meta["sample"] is True and meta["trace"]["sample"] is True
    assert set(meta["scenario_definitions"]) == set(STUDY_SCENARIOS)
    summary = json.loads((out / "summary.json").read_text())
    assert "bundled synthetic sample" in summary["sentences"][0]
    text = " ".join(summary["sentences"])
    assert "Communication takes" in text and "PS/Worker jobs speed up on NVLink" in text
    assert "25 → 100 Gbit" in text

    jobs = pq.read_table(out / "jobs.parquet")
    n = jobs.num_rows
    assert n == meta["jobs"] == result["summary"]["numbers"]["jobs"]
    parts = sum(jobs[c].to_numpy(zero_copy_only=False) for c in
                ("data_io_s", "compute_flop_s", "compute_mem_s", "comm_s"))
    total = jobs["total_s"].to_numpy(zero_copy_only=False)
    known = np.isfinite(total)
    assert known.mean() > 0.5  # the sample's workloads have zoo profiles
    np.testing.assert_allclose(parts[known], total[known], rtol=1e-12)  # overlap 0: a sum

    with (out / "whatif_jobs.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == n * len(STUDY_SCENARIOS)
    whatif = json.loads((out / "whatif.json").read_text())
    nv_rows = [r for r in rows if r["scenario"] == "nvlink-allreduce" and r["matched"] == "true"
               and r["speedup"]]
    nv = whatif["scenarios"]["nvlink-allreduce"]
    assert nv["predicted"] == len(nv_rows)
    share = sum(float(r["speedup"]) > 1.01 for r in nv_rows) / len(nv_rows)
    assert nv["sped_up_share"] == pytest.approx(share)
    assert summary["numbers"]["nvlink_sped_up_share"] == pytest.approx(
        nv["by_architecture"]["ps-worker"]["sped_up_share"])
    with (out / "recommend.csv").open() as fh:
        assert sum(1 for _ in csv.DictReader(fh)) == n


def test_study_on_a_trace_keeps_tables_when_the_report_fails(tmp_path: Path,
                                                              monkeypatch) -> None:
    t = small_trace()
    cols = [c for c in t if c != "workload"]
    trace = tmp_path / "t.csv"
    trace.write_text("\n".join([",".join(cols)] + [
        ",".join("" if t[c][i] is None else str(t[c][i]) for c in cols)
        for i in range(len(t["job_id"]))]) + "\n")

    def broken(study_dir: Path) -> Path:
        raise RuntimeError("no plotting here")

    monkeypatch.setattr("traincast.report.write_report", broken)
    pinned = tmp_path / "pinned.toml"
    pinned.write_text(PINNED)
    out = tmp_path / "out"
    result = study(trace, out, catalog=[pinned])
    assert result["report"] is None and "no plotting here" in result["report_error"]
    for name in FILES:
        assert (out / name).is_file(), name
    meta = json.loads((out / "study.json").read_text())
    assert meta["sample"] is False and "no plotting here" in meta["report_error"]
    summary = json.loads((out / "summary.json").read_text())
    assert not any("bundled" in s for s in summary["sentences"])
    # ps4 is the one PS/Worker job of three that fits one NVLink node (see test_whatif)
    assert summary["numbers"]["nvlink_sped_up_share"] == pytest.approx(1 / 3)
    assert summary["numbers"]["nvlink_ported_mean_speedup"] == pytest.approx(
        PS4_BASE / PS4_NVLINK, rel=1e-9)


def test_study_says_so_when_no_job_has_features(tmp_path: Path) -> None:
    trace = tmp_path / "bare.csv"
    trace.write_text("job_id,architecture,n_gpus,start_time_s,end_time_s\n"
                     "a,ps-worker,4,0,10\nb,1w1g,1,0,20\n")
    result = study(trace, tmp_path / "out", report=False)
    sentences = result["summary"]["sentences"]
    assert len(sentences) == 1 and sentences[0].startswith("None of the 2 jobs")
    whatif = json.loads((tmp_path / "out" / "whatif.json").read_text())
    assert whatif["scenarios"]["eth100"]["predicted"] == 0
