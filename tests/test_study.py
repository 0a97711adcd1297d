"""The end-to-end study: on the bundled sample, and on a small trace with known features."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from test_whatif import (
    AR16_BASE,
    PINNED,
    PS4_BASE,
    PS4_NVLINK,
    PS16_BASE,
    PSBIG_BASE,
    write_small_trace,
)
from traincast.analysis.study import STUDY_SCENARIOS, study
from traincast.cli import app
from traincast.cli.common import console
from traincast.hardware.catalog import load_catalog

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
    trace = write_small_trace(tmp_path / "t.csv")

    def broken(study_dir: Path) -> Path:
        raise RuntimeError("no plotting here")

    monkeypatch.setattr("traincast.report.write_report", broken)
    pinned = tmp_path / "pinned.toml"
    pinned.write_text(PINNED)
    out = tmp_path / "out"
    result = study(trace, out, catalog=load_catalog([pinned], compute="paper"))
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


def test_study_evaluates_the_jobs_as_they_run_once(tmp_path: Path, monkeypatch) -> None:
    # the base breakdown (every job as it ran: no change, no override) is evaluated once and
    # handed to what-if, recommend and jobs.parquet; scenarios and candidates change the jobs
    import traincast.analysis.recommend as rec_mod
    import traincast.analysis.study as study_mod
    import traincast.engine.local as local
    from traincast.jobs import Columns
    from traincast.trace import prepare_jobs, read_trace

    trace = write_small_trace(tmp_path / "t.csv")
    pinned = tmp_path / "pinned.toml"
    pinned.write_text(PINNED)
    cat = load_catalog([pinned], compute="paper")

    def key(cols: Columns) -> tuple:
        strings = tuple(tuple(cols[c].strings()) for c in ("architecture", "node", "gpu_type"))
        numbers = tuple(tuple(np.nan_to_num(cols[c], nan=-1.0)) for c in (
            "n_gpus", "n_workers", "n_ps", "gpus_per_node", "gpus_per_worker",
            "flops_compute_bound", "bytes_memory_bound"))
        return strings + numbers

    base_key = key(Columns.of(prepare_jobs(read_trace(trace, "csv", tmp_path / "x.duckdb"),
                                           cat)))
    calls = []
    real = local.evaluate_columns

    def counting(cols, catalog, overlap=0.0, hierarchical=False, ops_of=local.zoo_ops,
                 **overrides):
        unchanged = not any(v for v in overrides.values()) and not hierarchical
        calls.append(unchanged and key(cols) == base_key)
        return real(cols, catalog, overlap, hierarchical, ops_of, **overrides)

    import traincast.analysis.characterize as char_mod

    prepared = prepare_jobs(read_trace(trace, "csv", tmp_path / "y.duckdb"), cat)
    char_alone = char_mod.characterize(prepared, cat, fill=False)
    for mod in (local, rec_mod, study_mod):
        monkeypatch.setattr(mod, "evaluate_columns", counting)
    # characterize takes the study's base breakdown instead of predicting the jobs again
    monkeypatch.setattr(char_mod, "predict_table", lambda *a, **k: calls.append(True))
    scenarios = ("nvlink-allreduce", "eth100", "mixed-precision")  # each changes every job
    result = study(trace, tmp_path / "out", catalog=cat, report=False, scenarios=scenarios)
    assert sum(calls) == 1 and len(calls) > 1 + len(scenarios)
    char = json.loads((tmp_path / "out" / "characterize.json").read_text())
    for view in ("job_weighted", "gpu_weighted", "gpu_time_weighted"):
        assert char["breakdown"][view] == pytest.approx(char_alone["breakdown"][view])
    assert char["breakdown"]["jobs"] == char_alone["breakdown"]["jobs"] == 5
    # what it handed on is what each step computes by itself (tests above pin the numbers)
    jobs = pq.read_table(tmp_path / "out" / "jobs.parquet")
    alone = study_mod.jobs_with_breakdown(jobs.select(jobs.column_names[:-7]), cat)
    assert alone.column("total_s").to_pylist() == jobs.column("total_s").to_pylist()
    assert result["summary"]["numbers"]["nvlink_sped_up_share"] == pytest.approx(1 / 3)


def test_study_says_so_when_no_job_has_features(tmp_path: Path) -> None:
    trace = tmp_path / "bare.csv"
    trace.write_text("job_id,architecture,n_gpus,start_time_s,end_time_s\n"
                     "a,ps-worker,4,0,10\nb,1w1g,1,0,20\n")
    result = study(trace, tmp_path / "out", report=False)
    sentences = result["summary"]["sentences"]
    assert len(sentences) == 1 and sentences[0].startswith("None of the 2 jobs")
    assert "(2 features missing: no feature columns, no workload the zoo knows)" in sentences[0]
    whatif = json.loads((tmp_path / "out" / "whatif.json").read_text())
    assert whatif["scenarios"]["eth100"]["predicted"] == 0


def test_study_names_the_gpu_types_the_catalog_does_not_know(tmp_path: Path) -> None:
    # two A800 jobs and one V100S (no catalog entry, no alias) beside one T4 job: the breakdown
    # is the T4's, and a sentence names the three left out and why; with no known type at all
    # the one sentence says the same
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus,gpu_type,start_time_s,end_time_s\n"
                     "a,1,A800,0,3600\nb,8,A800,0,7200\nc,2,V100S,0,100\nd,1,T4,0,100\n")
    result = study(trace, tmp_path / "out", report=False, workload="resnet50")
    sentences = result["summary"]["sentences"]
    assert sentences[0].endswith("(over 1 job with known features).")
    assert sentences[1].startswith("3 jobs have no prediction (3 unknown node or GPU type: "
                                   "GPU types A800, V100S not in the catalog).")
    assert "--catalog FILE" in sentences[1]
    char = json.loads((tmp_path / "out" / "characterize.json").read_text())
    assert char["unknown_gpu_types"] == {"A800": 2, "V100S": 1}
    trace.write_text("job_id,n_gpus,gpu_type,start_time_s,end_time_s\na,1,A800,0,3600\n")
    result = study(trace, tmp_path / "out2", report=False, workload="resnet50")
    assert result["summary"]["sentences"] == [
        "The one job has no prediction (1 unknown node or GPU type: GPU type A800 not in "
        "the catalog), so there is no time breakdown and no what-if number. Name each in a catalog "
        "file, as an [alias] of a catalog GPU or a [gpu] entry of its own, and pass --catalog "
        "FILE (docs/hardware.md)."]


def test_study_assumes_a_workload_and_reports_skipped_rows(tmp_path: Path) -> None:
    trace = tmp_path / "bare.csv"
    trace.write_text("job_id,architecture,n_gpus,start_time_s,end_time_s\n"
                     "a,ps-worker,4,0,10\nb,1w1g,1,0,20\nc,1w1g,-1,0,5\n")
    reports: list[dict] = []
    result = study(trace, tmp_path / "out", report=False, workload="resnet50",
                   on_report=reports.append)
    assert reports[0]["bad_rows"] == 1 and reports[0]["errors"][0]["field"] == "n_gpus"
    whatif = json.loads((tmp_path / "out" / "whatif.json").read_text())
    assert whatif["scenarios"]["eth100"]["predicted"] == 2  # both valid jobs, as resnet50
    assert not result["summary"]["sentences"][0].startswith("None of the")


def test_study_cli_prints_the_cluster_table_first(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(console, "width", 100)
    trace = write_small_trace(tmp_path / "t.csv")
    pinned = tmp_path / "pinned.toml"
    pinned.write_text(PINNED)
    res = CliRunner().invoke(app, ["study", str(trace), "-o", str(tmp_path / "out"),
                                   "--catalog", str(pinned), "--compute", "paper",
                                   "--no-report"])
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert out.index("Cluster by architecture") < out.index("Findings")
    rows = {c[0]: c[1:] for c in ([x.strip() for x in line.strip("│ ").split("│")]
                                  for line in out.splitlines() if line.startswith("│ "))}
    # jobs: ps4, ar16, one, ps16, psbig; GPUs 4, 16, 1, 16, 2 (39); durations 100..500 s
    ps = [PS4_BASE, PS16_BASE, PSBIG_BASE]
    comm = [(x - 0.12) / x for x in ps]  # everything above 0.12 s is communication
    want = {
        "ps-worker": [3 / 5, 22 / 39, (4 * 100 + 16 * 400 + 2 * 500) / 11300,
                      sum(comm) / 3, (4 * comm[0] + 16 * comm[1] + 2 * comm[2]) / 22],
        "allreduce-cluster": [1 / 5, 16 / 39, 16 * 200 / 11300, (AR16_BASE - 0.12) / AR16_BASE,
                              (AR16_BASE - 0.12) / AR16_BASE],
        "1w1g": [1 / 5, 1 / 39, 300 / 11300, 0.0, 0.0],
    }
    for arch, values in want.items():
        assert rows[arch] == [f"{100 * v:.1f}%" for v in values], arch
    assert rows["all"][:3] == ["100.0%"] * 3


def test_a_table_without_a_trace_names_no_trace_path(tmp_path: Path) -> None:
    from traincast.trace import read_trace

    jobs = read_trace(write_small_trace(tmp_path / "t.csv"))
    result = study(out_dir=tmp_path / "out", jobs=jobs, report=False,
                   scenarios=("eth100",))
    meta = json.loads((tmp_path / "out" / "study.json").read_text())
    # neither the bundled sample nor a file: no path, no store
    assert meta["trace"]["path"] is None and meta["sample"] is False and meta["db"] is None
    assert result["sample"] is False and set(meta["timings_s"]) == {
        "ingest", "characterize", "whatif", "recommend", "tables"}  # no report asked


def test_a_study_that_fails_leaves_no_folder_it_made_and_keeps_one_it_did_not(
        tmp_path: Path) -> None:
    from traincast.errors import TraincastError

    bad = tmp_path / "jobs.csv"
    bad.write_text("job_id,gpus\nj1,2\n")  # no n_gpus column: the ingest fails
    with pytest.raises(TraincastError, match="n_gpus"):
        study(bad, tmp_path / "new" / "study", report=False)
    assert not (tmp_path / "new").exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    with pytest.raises(TraincastError):
        study(bad, kept, report=False)
    assert (kept / "notes.txt").read_text() == "mine"


def test_study_cli_takes_several_trace_files_and_a_folder(tmp_path: Path) -> None:
    """Two files, then the folder that holds them: the same three jobs, each file a source;
    study.json names what was given."""
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / "a.csv").write_text("job_id,architecture,n_gpus,start_time_s,end_time_s\n"
                                  "a,1w1g,1,0,10\nb,allreduce-local,4,0,20\n")
    (folder / "b.csv").write_text("job_id,architecture,n_gpus,start_time_s,end_time_s\n"
                                  "a,1w1g,2,0,30\n")
    runs = {"files": [str(folder / "a.csv"), str(folder / "b.csv")], "folder": [str(folder)]}
    for name, given in runs.items():
        out = tmp_path / name
        res = CliRunner().invoke(app, ["study", *given, "-o", str(out), "--no-report",
                                       "--workload", "resnet50", "--json"])
        assert res.exit_code == 0, res.output
        meta = json.loads((out / "study.json").read_text())
        assert meta["jobs"] == 3 and meta["trace"]["paths"] == given
        char = json.loads((out / "characterize.json").read_text())
        assert char["gpus"] == 1 + 4 + 2


def test_a_study_of_several_trace_files_gives_each_its_own_findings(tmp_path: Path) -> None:
    """Each file's row of by_source is the study of that file alone; the whole study's
    job-weighted means are the job-weighted means of the files' rows."""
    head = "job_id,architecture,n_gpus,start_time_s,end_time_s\n"
    a = tmp_path / "x" / "jobs.csv"
    b = tmp_path / "y" / "jobs.csv"  # the same name in another folder
    for path, rows in ((a, "a,ps-worker,4,0,10\nb,allreduce-cluster,16,0,20\nc,1w1g,1,0,5\n"),
                       (b, "a,ps-worker,8,0,30\nd,allreduce-local,8,0,40\n")):
        path.parent.mkdir()
        path.write_text(head + rows)
    both = study([a, b], tmp_path / "both", report=False, workload="resnet50")["summary"]
    rows = both["by_source"]
    assert [(r["trace"], r["numbers"]["jobs"]) for r in rows] == [("x/jobs.csv", 3),
                                                                  ("y/jobs.csv", 2)]
    for r, path in zip(rows, (a, b), strict=True):
        alone = study(path, tmp_path / path.parent.name, report=False,
                      workload="resnet50")["summary"]
        assert "by_source" not in alone or alone["by_source"] == []
        assert r["sentences"] == alone["sentences"][:len(r["sentences"])]
        for key, value in r["numbers"].items():
            assert value == pytest.approx(alone["numbers"][key]), key
    whole, parts = both["numbers"], [r["numbers"] for r in rows]
    for key in ("comm_share_mean", "gpu-a100_mean_speedup"):
        assert whole[key] == pytest.approx(
            sum(p[key] * p["jobs"] for p in parts) / sum(p["jobs"] for p in parts))


def test_source_labels_take_as_many_folders_as_tell_sources_apart() -> None:
    from traincast.trace.store import source_labels

    assert source_labels({1: ["/d/a.csv"], 2: ["/d/b.csv"]}) == {1: "a.csv", 2: "b.csv"}
    assert source_labels({1: ["/t/venus/cluster_log.csv"], 2: ["/t/earth/cluster_log.csv"],
                          3: ["/u/a.csv"]}) == {1: "venus/cluster_log.csv",
                                               2: "earth/cluster_log.csv", 3: "a.csv"}
    # a file at the root has no folder to add; the same path twice: full paths
    assert source_labels({1: ["/t.csv"], 2: ["/a/t.csv"]}) == {1: "t.csv", 2: "a/t.csv"}
    assert source_labels({1: ["/a/t.csv"], 2: ["/a/t.csv"]}) == {1: "/a/t.csv", 2: "/a/t.csv"}
    # a PAI table set: its files together
    assert source_labels({1: ["/p/job.csv", "/p/task.csv"], 2: ["/q/job.csv"]}) == \
        {1: "job.csv, task.csv", 2: "job.csv"}


def test_a_study_folder_is_not_read_as_a_trace(tmp_path: Path, tc) -> None:  # noqa: ANN001
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,architecture,n_gpus\na,1w1g,1\n")
    out = tmp_path / "out"
    study(trace, out, report=False)
    for cmd in (["study", str(out), "-o", str(tmp_path / "again")],
                ["characterize", str(out), "--db", str(tmp_path / "s.duckdb")]):
        res = tc(*cmd)
        assert res.returncode == 2, res.stderr
        assert "is a folder written by traincast study" in " ".join(res.stderr.split())
        assert f"its jobs: --db {out / 'jobs.duckdb'}" in " ".join(res.stderr.split())
    assert not (tmp_path / "again").exists() and not (tmp_path / "s.duckdb").exists()


def test_by_source_of_a_store_names_its_files_and_jobs_of_no_source(tmp_path: Path) -> None:
    """A study of a store's jobs (report --db) names the files by that store's sources; jobs
    whose source_id is null are one row of their own."""
    import duckdb

    from traincast.trace.store import ingest, load_jobs

    head = "job_id,architecture,n_gpus,start_time_s,end_time_s\n"
    db = tmp_path / "s.duckdb"
    for name, rows in (("a.csv", "a,1w1g,1,0,10\nb,allreduce-local,4,0,20\n"),
                       ("b.csv", "c,ps-worker,4,0,30\n")):
        (tmp_path / name).write_text(head + rows)
        ingest(tmp_path / name, "csv", db)
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO jobs (job_id, architecture, n_gpus, censored, zero_gpu, "
                "fractional_gpu, arch_inferred) VALUES ('x', '1w1g', 1, false, false, false, "
                "false)")
    con.close()
    res = study(None, tmp_path / "out", report=False, workload="resnet50",
                jobs=load_jobs(db), sources_db=db)
    rows = res["summary"]["by_source"]
    assert [(r["source_id"], r["trace"], r["numbers"]["jobs"]) for r in rows] == \
        [(None, "jobs without a source", 1), (1, "a.csv", 2), (2, "b.csv", 1)]


def test_the_by_file_table_shows_the_first_twenty_files_and_counts_the_rest() -> None:
    from traincast.cli.study import source_table

    rows = [{"trace": f"f{i}.csv", "numbers": {"jobs": i + 1, "comm_share_mean": 0.25}}
            for i in range(23)]
    t = source_table(rows)
    assert t.row_count == 21
    cells = [str(c) for c in t.columns[0].cells]
    assert cells[19] == "f19.csv" and cells[20] == "... 3 more (summary.json: by_source)"
    assert str(list(t.columns[2].cells)[0]) == "25.0%"  # comm (job) as a percent


def test_a_study_into_a_used_folder_keeps_only_its_own_trace_in_its_store(tmp_path: Path) -> None:
    from traincast.trace.store import sources

    head = "job_id,architecture,n_gpus\n"
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(head + "a,1w1g,1\nb,1w1g,1\n")
    b.write_text(head + "c,1w1g,2\n")
    out = tmp_path / "out"
    assert study(a, out, report=False)["dropped_sources"] == []
    res = study(b, out, report=False)
    assert [json.loads(s["files"]) for s in sources(out / "jobs.duckdb")] == [[str(b)]]
    assert res["dropped_sources"] == [{"source_id": 1, "files": [str(a)], "format": "csv",
                                       "jobs": 2}]
    study([a, b], out, report=False)
    kept = {tuple(json.loads(s["files"])): s["source_id"] for s in sources(out / "jobs.duckdb")}
    assert kept == {(str(b),): 2, (str(a),): 3}  # b unchanged: kept as it was


@pytest.mark.parametrize("fail", [KeyboardInterrupt, RuntimeError])
def test_a_study_that_fails_in_a_used_folder_leaves_the_earlier_study_whole(
        tmp_path: Path, monkeypatch, fail: type[BaseException]) -> None:
    # the second study fails (or is interrupted) after it has written its characterize.json
    # and swapped the store's sources: the first study's files, figures and store come back
    from traincast.analysis import study as study_mod
    from traincast.trace.store import sources

    head = "job_id,architecture,n_gpus\n"
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(head + "a,1w1g,1\nb,1w1g,1\n")
    b.write_text(head + "c,1w1g,2\n")
    out = tmp_path / "out"
    study(a, out, report=False)
    (out / "figures").mkdir()
    (out / "figures" / "old.svg").write_text("<svg/>")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}

    def broken(*args, **kwargs):
        raise fail("stop")

    monkeypatch.setattr(study_mod, "_recommend_step", broken)
    with pytest.raises(fail):
        study(b, out, report=False)
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert after.keys() == before.keys()
    assert {k: v for k, v in after.items() if not k.startswith("jobs.duckdb")} == \
        {k: v for k, v in before.items() if not k.startswith("jobs.duckdb")}
    assert json.loads((out / "characterize.json").read_text())["jobs"] == 2
    assert [json.loads(s["files"]) for s in sources(out / "jobs.duckdb")] == [[str(a)]]
    assert (out / "figures" / "old.svg").exists()
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_a_study_of_a_trace_of_bad_rows_alone_fails_and_keeps_the_earlier_one(
        tmp_path: Path) -> None:
    from traincast.errors import TraincastError
    from traincast.trace.store import sources

    head = "job_id,architecture,n_gpus\n"
    a, bad = tmp_path / "a.csv", tmp_path / "bad.csv"
    a.write_text(head + "a,1w1g,1\nb,1w1g,1\n")
    bad.write_text(head + "c,1w1g,-2\nd,1w1g,x\n")  # no job: every row bad
    out = tmp_path / "out"
    study(a, out, report=False)
    before = (out / "characterize.json").read_bytes()
    with pytest.raises(TraincastError, match=r"no job stored: every row of the trace was bad "
                                             r"\(2; the first: .*bad\.csv: row 1: field n_gpus"
                                             r".*\): the folder's earlier study is kept"):
        study(bad, out, report=False)
    assert (out / "characterize.json").read_bytes() == before
    assert [json.loads(s["files"]) for s in sources(out / "jobs.duckdb")] == [[str(a)]]


def test_a_bad_price_file_fails_a_study_before_it_writes(tmp_path: Path) -> None:
    from traincast.errors import TraincastError

    trace = tmp_path / "a.csv"
    trace.write_text("job_id,architecture,n_gpus\na,1w1g,1\n")
    bad = tmp_path / "bad.toml"
    bad.write_text("garbage [\n")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(TraincastError, match="bad.toml"):
        study(trace, out, report=False, prices=bad)
    assert list(out.iterdir()) == []


def test_a_new_study_leaves_none_of_the_earlier_studys_figures_and_keeps_the_users(
        tmp_path: Path) -> None:
    trace = tmp_path / "a.csv"
    trace.write_text("job_id,architecture,n_gpus\na,1w1g,1\n")
    out = tmp_path / "out"
    study(trace, out, report=False)
    (out / "figures").mkdir()
    (out / "figures" / "old.svg").write_text("<svg/>")  # an earlier study's (study.json there)
    study(trace, out, report=False)
    assert not (out / "figures").exists()
    mine = tmp_path / "paper"
    (mine / "figures").mkdir(parents=True)
    (mine / "figures" / "fig1.pdf").write_text("mine")  # no study there: the user's own
    study(trace, mine, report=False)
    assert (mine / "figures" / "fig1.pdf").read_text() == "mine"


def test_a_study_killed_midway_is_put_back_by_the_next_one(tmp_path: Path) -> None:
    # a kill runs no handler: the earlier study stays set aside beside the new one's files,
    # until the next study into the folder puts it back (here one that fails)
    from traincast.analysis.study import EARLIER, _keep_earlier
    from traincast.errors import TraincastError

    a = tmp_path / "a.csv"
    a.write_text("job_id,architecture,n_gpus\na,1w1g,1\nb,1w1g,1\n")
    out = tmp_path / "out"
    study(a, out, report=False)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    _keep_earlier(out, [a], store=True)  # the killed study's start ...
    (out / "characterize.json").write_text("{}")  # ... and its first file
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,gpus\nj1,2\n")
    with pytest.raises(TraincastError):
        study(bad, out, report=False)
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert after == before
    assert not (out / EARLIER).exists()


def test_one_study_at_a_time_writes_a_folder(tmp_path: Path) -> None:
    from traincast.analysis.study import _folder_lock
    from traincast.errors import TraincastError

    trace = tmp_path / "a.csv"
    trace.write_text("job_id,architecture,n_gpus\na,1w1g,1\n")
    out = tmp_path / "out"
    out.mkdir()
    with _folder_lock(out), pytest.raises(TraincastError, match="another study is writing"):
        study(trace, out, report=False)
    assert list(out.iterdir()) == []
    study(trace, out, report=False)  # the lock is gone with the first


def test_the_cluster_table_of_a_trace_without_gpu_jobs_shows_no_share(tmp_path: Path,
                                                                       monkeypatch) -> None:
    # two CPU-only jobs: no job with GPUs to share out, so the "all" row is "-", not 100%
    monkeypatch.setattr(console, "width", 100)
    trace = tmp_path / "cpu.csv"
    trace.write_text("job_id,n_gpus,start_time_s,end_time_s\na,0,0,10\nb,0,0,20\n")
    res = CliRunner().invoke(app, ["study", str(trace), "-o", str(tmp_path / "out"),
                                   "--no-report"])
    assert res.exit_code == 0, res.output
    rows = {c[0]: c[1:] for c in ([x.strip() for x in line.strip("│ ").split("│")]
                                  for line in res.stdout.splitlines() if line.startswith("│ "))}
    assert rows["all"] == ["-"] * 5
    assert "(2 no GPUs (n_gpus missing or 0))" in " ".join(res.stdout.split())


def test_findings_say_over_how_many_jobs_when_some_have_no_prediction() -> None:
    # 10 jobs, 7 priced: each what-if and recommend sentence names the 7 of 10; with all 10
    # priced, "over all jobs" and "of the cluster's GPU time" as before
    from traincast.analysis.study import findings

    def summary(n: int) -> dict:
        return {"jobs": 10, "matched": 10, "predicted": n, "mean_speedup": 2.0,
                "gpu_time_weighted_mean_speedup": 1.5, "sped_up_share": 0.5,
                "gpu_time_saved_share": 0.25, "by_architecture": {}}

    char = {"jobs": 10, "breakdown": {"jobs": 7, "job_weighted": {"comm": 0.1},
                                      "gpu_weighted": {"comm": 0.2}}}
    for n, want in ((7, "over the 7 of 10 jobs with a prediction"), (10, "over all jobs")):
        scen = {k: summary(n) for k in ("eth100", "gpu-a100", "mixed-precision", "op-fusion")}
        rec = {"summary": {"arch": {"predicted": n, "changed_share": 0.3, "mean_speedup": 1.2,
                                    "changed_mean_speedup": 3.0,
                                    "changed_to": {"allreduce-local": 3}}}}
        said = findings(char, {"scenarios": scen}, rec, sample=False)["sentences"]
        a100 = next(t for t in said if t.startswith("Moving every job to A100"))
        eth = next(t for t in said if t.startswith("25 → 100"))
        own = next(t for t in said if t.startswith("On their own hardware"))
        if n == 7:
            assert want in a100 and "50% of them gain" in a100
            assert want in eth and "25% of their GPU time" in eth
            assert "30% of the 7 of 10 jobs with a prediction would run faster" in own
            # both means: over the jobs that change and over all with a prediction
            assert "(3.00× on average over the jobs that change, 1.20× over all of them)" in own
        else:
            assert "of 10" not in a100 and "50% of jobs gain" in a100
            assert want in eth and "of the cluster's GPU time" in eth
            assert "30% of jobs would run faster" in own and want in own
    # a summary that does not count its predicted jobs: taken as over all of them
    from traincast.analysis.study import over_jobs
    assert over_jobs({}, 10) == ("over all jobs", True)
    assert over_jobs({"predicted": 0}, 10) == ("over the 0 of 10 jobs with a prediction", False)
    # a scenario that applies to 5 of the 7 jobs with a prediction (100 Gbit Ethernet leaves
    # a faster NIC as it is): said as such, not as the jobs with a prediction
    assert over_jobs({"predicted": 5}, 10, priced=7) == (
        "over the 5 of 10 jobs it applies to with a prediction", False)
    assert over_jobs({"predicted": 7}, 10, priced=7)[0] == "over the 7 of 10 jobs with a prediction"


def test_a_recommendation_that_changes_no_job_says_why() -> None:
    from traincast.analysis.study import _recommend_finding

    arch = {"predicted": 7, "changed_share": 0.0, "mean_speedup": 1.0,
            "architectures": {"1w1g": 6, "allreduce-local": 1}, "changed_to": {}}
    nums: dict = {}
    said = _recommend_finding(arch, nums, 10, 0.05)[0]
    assert said == ("On their own hardware, no job would run more than 5% faster on another "
                    "architecture (over the 7 of 10 jobs with a prediction): they keep theirs "
                    "(1w1g 6, allreduce-local 1); a job of one GPU has no other, and the "
                    "others' options gained no more or did not fit.")
    assert "0%" not in said
    # the numbers are recorded as when jobs change (summary.json)
    assert nums["recommend_changed_share"] == 0.0 and nums["recommend_mean_speedup"] == 1.0
    # a threshold below 1% is written as given, not rounded to 0%
    assert "more than 0.5% faster" in _recommend_finding(arch, {}, 10, 0.005)[0]


def test_a_scenario_that_slows_some_jobs_says_why() -> None:
    from traincast.analysis.study import _speedup_findings

    mixed = {"predicted": 10, "mean_speedup": 2.0, "gpu_time_weighted_mean_speedup": 2.1,
             "sped_up_share": 0.8, "slowed_down_share": 0.2}
    said = _speedup_findings({"mixed-precision": mixed}, {}, 10)[0]
    assert said.endswith("80% of jobs gain more than 1%, 20% lose more than 1%: autocast's "
                         "casts are kernels of their own, each issued by the host, so a small "
                         "model whose step waits for the host waits longer, and a GPU without "
                         "a 16-bit peak pays for the casts with nothing faster).")
    said = _speedup_findings({"mixed-precision": {**mixed, "slowed_down_share": 0.0}}, {}, 10)
    assert "lose" not in said[0] and "autocast" not in said[0]
    said = _speedup_findings({"gpu-a100": mixed, "op-fusion": mixed}, {}, 10)
    assert said[0].endswith("20% lose more than 1%: their own GPUs are faster for them).")
    assert said[1].endswith("20% lose more than 1%).")  # no reason said for fusion


def test_the_network_sentence_names_the_architectures_it_averages() -> None:
    # 100 Gbit Ethernet over AllReduce-across-nodes jobs alone: PS/Worker is not named
    from traincast.analysis.study import _eth100_finding

    arch = {"predicted": 4, "mean_speedup": 1.5, "jobs": 4}
    eth = {"predicted": 4, "mean_speedup": 1.2, "gpu_time_saved_share": 0.1,
           "by_architecture": {"allreduce-cluster": arch}}
    said = " ".join(_eth100_finding(eth, {}, 10, priced=8))
    assert "(AllReduce across nodes; the paper reports about 1.7×)" in said
    assert "PS/Worker" not in said and "over the 4 of 10 jobs it applies to with a " in said
    # 4 of the 8 with a prediction: the scenario upgrades only slower NICs, and says so
    assert ("over the 4 of 10 jobs it applies to with a prediction (the other 4 jobs with a "
            "prediction run on NICs of 100 Gbit/s or faster already)") in said
    eth["by_architecture"]["ps-worker"] = arch
    said = " ".join(_eth100_finding(eth, {}, 10, priced=8))
    assert "(PS/Worker and AllReduce across nodes;" in said


def test_a_share_under_half_a_percent_is_not_said_as_nothing() -> None:
    from traincast.analysis.study import findings

    char = {"jobs": 4, "breakdown": {"jobs": 4, "job_weighted": {
        "comm": 0.004, "data_io": 0.0, "compute_flop": 0.9, "compute_mem": 0.096},
        "gpu_weighted": {"comm": 0.013}}}
    first = findings(char, {}, {}, sample=False)["sentences"][0]
    assert first.startswith("Communication takes 0.4% of iteration time on average (1% GPU")
    # 0.996 is short of all by 0.4%: 99.6%, not 100%
    assert "data I/O 0%, compute 99.6%" in first
    # under an overlap the shares are still of the four parts' sum: said so
    char["breakdown"]["overlap"] = 0.5
    first = findings(char, {}, {}, sample=False)["sentences"][0]
    assert first.startswith("Communication takes 0.4% of the four parts' summed time (before "
                            "--overlap 0.5 hides some of it under compute) on average")


def test_study_names_the_nodes_the_catalog_does_not_know(tmp_path: Path) -> None:
    # a Kubernetes export's node column names machines, not node presets: the jobs on them have
    # no prediction, and the sentence names the machines and what to do
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus,gpu_type,node,start_time_s,end_time_s\n"
                     "a,1,V100,node-48,0,3600\nb,8,V100,node-48,0,7200\n"
                     "c,2,V100,node-7,0,100\nd,1,T4,,0,100\n")
    result = study(trace, tmp_path / "out", report=False, workload="resnet50")
    said = result["summary"]["sentences"][1]
    assert said.startswith("3 jobs have no prediction (3 unknown node or GPU type: nodes "
                           "node-48, node-7 not in the catalog).")
    assert "rename it" in said and "GPU types" not in said
    char = json.loads((tmp_path / "out" / "characterize.json").read_text())
    assert char["unknown_nodes"] == {"node-48": 2, "node-7": 1}


ETH_HEAD = "job_id,n_gpus,gpu_type,node,architecture,start_time_s,end_time_s\n"


def _eth100_sentence(tmp_path: Path, rows: str, out: str) -> str:
    """The study's 25 -> 100 Gbit finding on a trace of ``rows`` (resnet50 for every job)."""
    trace = tmp_path / f"{out}.csv"
    trace.write_text(ETH_HEAD + rows)
    said = [x for x in study(trace, tmp_path / out, report=False, workload="resnet50")
            ["summary"]["sentences"] if "100 Gbit" in x]
    assert len(said) == 1
    return said[0]


def test_eth100_says_why_network_jobs_gain_nothing(tmp_path: Path) -> None:
    # an AllReduce job across DGX A100 nodes (InfiniBand HDR, 200 Gbit/s) and one across
    # 25 Gbit Ethernet V100 nodes: the scenario upgrades the second only
    ib = "a,16,A100-SXM4-80GB,dgx-a100,allreduce-cluster,0,3600\n"
    assert _eth100_sentence(tmp_path, ib, "o1").startswith(
        "25 → 100 Gbit Ethernet gives nothing to the 1 job of this trace that uses the network "
        "(their NICs are 100 Gbit/s or faster already)")
    eth = "b,16,V100-SXM2-16GB,pai-v100-nvlink,allreduce-cluster,0,3600\n"
    assert "on average over the 1 job that uses the network" in _eth100_sentence(
        tmp_path, ib + eth, "o2")


def test_eth100_on_unknown_nodes_says_no_prediction(tmp_path: Path) -> None:
    # the network job runs on a node the catalog does not know: it has no prediction, which the
    # finding says (not that its NIC is fast already)
    said = _eth100_sentence(tmp_path, "a,16,V100-SXM2-16GB,node-48,allreduce-cluster,0,3600\n"
                                      "b,1,V100-SXM2-16GB,,1w1g,0,100\n", "o")
    assert "1 job of this trace that uses the network (none of them has a prediction)" in said


def test_workloads_no_profile_prices_are_named(tmp_path: Path) -> None:
    # an Acme-like trace whose workload column holds stages, not models: the jobs have no
    # features, and the sentence names the stages
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus,gpu_type,start_time_s,end_time_s,workload\n"
                     "a,8,A100,0,3600,Pretrain\nb,8,A100,0,3600,Pretrain\nc,1,A100,0,60,SFT\n"
                     "d,1,A100,0,60,resnet50\n")
    result = study(trace, tmp_path / "o", report=False)
    said = result["summary"]["sentences"][1]
    assert said.startswith("3 jobs have no prediction (3 features missing: no feature "
                           "columns, no workload the zoo knows (Pretrain, SFT))"), said
    char = json.loads((tmp_path / "o" / "characterize.json").read_text())
    assert char["unknown_workloads"] == {"Pretrain": 2, "SFT": 1}


def test_a_study_logged_to_a_file_says_each_step(tmp_path: Path, tc) -> None:  # noqa: ANN001
    # stderr is no terminal here: no bar is drawn, so each step is said once, in order, as
    # report does; --quiet says none
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,architecture,n_gpus\na,1w1g,1\n")
    res = tc("study", str(trace), "-o", str(tmp_path / "out"), "--no-report")
    assert res.returncode == 0, res.stderr
    steps = [line[len("· study: "):] for line in res.stderr.splitlines()
             if line.startswith("· study: ")]
    assert steps == ["ingest", "characterize", "what-if", "recommend", "tables"]
    res = tc("--quiet", "study", str(trace), "-o", str(tmp_path / "out2"), "--no-report")
    assert res.returncode == 0 and "· study" not in res.stderr


def test_a_report_of_the_store_names_the_store_its_traces_and_the_sample_among_them(
        tc, tmp_path: Path, monkeypatch) -> None:
    import traincast.trace.sample as sample_mod

    # two small traces in one store, one of them taken for the bundled sample
    header = "job_id,n_gpus,gpu_type,workload,start_time_s,end_time_s\n"
    real, bundled = tmp_path / "real.csv", tmp_path / "bundled.csv"
    real.write_text(header + "r1,1,V100,resnet50,0,3600\nr2,8,V100,bert-base,0,7200\n")
    bundled.write_text(header + "s1,1,T4,resnet50,0,600\ns2,1,,resnet50,0,60\n")
    monkeypatch.setattr(sample_mod, "sample_path", lambda: bundled)
    db = tmp_path / "s.duckdb"
    for path in (real, bundled):
        assert tc("--quiet", "ingest", str(path), "--db", str(db)).returncode == 0
    out = tmp_path / "rep"
    run = tc("--quiet", "report", "--db", str(db), "-o", str(out))
    assert run.returncode == 0, run.stderr
    meta = json.loads((out / "study.json").read_text())
    assert meta["trace"]["store"] == str(db) and meta["db"] == str(db)
    assert sorted(meta["trace"]["paths"]) == sorted([str(real), str(bundled)])
    assert meta["trace"]["sample"] == "part" and meta["sample"] is False
    first = json.loads((out / "summary.json").read_text())["sentences"][0]
    assert first.startswith(f"Part of this study's jobs (those of {bundled}) come from the "
                            "bundled synthetic sample trace")
    assert meta["trace"]["format"] == "csv"  # as its sources were read
    text = (out / "report.html").read_text()
    assert "Provenance of the bundled sample" in text and str(db) in text
    # the banner says part of the jobs are the sample's, not that all are; the real jobs'
    # assumptions stay said
    assert "Part bundled synthetic sample." in text and "The default trace" not in text
    # the job that names no GPU type or node: the GPU-type table says where it is priced
    assert "1 job(s) with GPUs and no node either: priced on the default node, " \
           "pai-v100-nvlink (V100-SXM2-16GB)" in text
    # a study with prices names the file and its sources in the study settings
    priced = tmp_path / "priced"
    run = tc("--quiet", "study", str(real), "-o", str(priced), "--price", "aws-on-demand")
    assert run.returncode == 0, run.stderr
    settings = (priced / "report.html").read_text()
    assert "aws" in settings[settings.index(">prices<"):][:400]
    # and the findings say what the jobs cost now and on their cheapest setups, by hand from
    # recommend's own per-job costs: 1000 x the sum of each job's cost per iteration
    rows = list(csv.DictReader((priced / "recommend.csv").open()))
    both = [r for r in rows if r["base_cost_per_iter_usd"] and r["cheapest_cost_per_iter_usd"]]
    now = 1000 * sum(float(r["base_cost_per_iter_usd"]) for r in both)
    said = json.loads((priced / "summary.json").read_text())
    assert said["numbers"]["cheapest_usd_per_1k_now"] == pytest.approx(now, rel=1e-9)
    assert any(x.startswith("With --price (prices aws-on-demand), the ") and
               f"{len(both)} job" in x for x in said["sentences"])


def test_the_architecture_tables_gpu_time_says_when_it_is_a_lower_bound() -> None:
    from io import StringIO

    from rich.console import Console

    from traincast.cli.study import architecture_table

    char = {"jobs": 2, "zero_gpu_jobs": 0, "gpu_time_s": 400.0, "censored_gpu_time_s": 300.0,
            "gpu_time_lower_bound": True,
            "by_architecture": {"1w1g": {"job_share": 1.0, "gpu_share": 1.0,
                                         "gpu_time_share": 1.0}},
            "breakdown": {"jobs": 2, "job_weighted": {"comm": 0.0},
                          "gpu_weighted": {"comm": 0.0}}}
    out = StringIO()
    Console(file=out, width=200).print(architecture_table(char))
    said = " ".join(out.getvalue().split())
    assert "(a lower bound: 75.0% of it is of jobs still running at the trace's end" in said, said
    out = StringIO()
    Console(file=out, width=200).print(architecture_table({**char, "gpu_time_lower_bound": False}))
    assert "lower bound" not in out.getvalue()


def test_the_nvlink_sentence_counts_over_the_ps_jobs_with_a_prediction() -> None:
    # 5 PS/Worker jobs, 4 with a prediction: 3 sped up (75% of 4), 1 of the 4 does not fit
    from traincast.analysis.study import _nvlink_finding

    ps = {"matched": 5, "predicted": 4, "sped_up_share": 0.75, "not_applied": 1,
          "applied_mean_speedup": 2.0, "gpu_time_saved_share": 0.3}
    nums: dict = {}
    said = _nvlink_finding({"by_architecture": {"ps-worker": ps}}, nums)[0]
    assert said.startswith("75% of the 4 PS/Worker jobs with a prediction (of 5) speed up")
    assert "1 of 4 do not fit one node" in said
    assert (nums["ps_worker_jobs"], nums["ps_worker_jobs_predicted"]) == (5, 4)
    every = _nvlink_finding({"by_architecture": {"ps-worker": {**ps, "matched": 4}}}, {})[0]
    assert every.startswith("75% of PS/Worker jobs speed up") and "1 of 4 do not" in every


def test_a_price_file_that_prices_no_present_setup_says_so() -> None:
    from traincast.analysis.study import _cheapest_finding

    rec = {"summary": {"cheapest": {"predicted": 3, "priced": 0, "usd_per_1k_now": None,
                                    "usd_per_1k_chosen": None}},
           "prices": {"file": "t4only.toml"}}
    said = _cheapest_finding(rec, {})
    assert said == ["With --price, no job's present setup has a price in t4only.toml (its GPU "
                    "or node is not in the file), so the cheapest choices are not compared "
                    "with what the jobs cost now."]
    # no job with a prediction: that is why, whatever the file prices
    rec["summary"]["cheapest"]["predicted"] = 0
    assert _cheapest_finding(rec, {}) == [
        "With --price, no job has a prediction, so no cost can be compared."]
    assert _cheapest_finding({"summary": {}}, {}) == []  # no --price: nothing said
