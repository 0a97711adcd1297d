"""The job store shared over time and between processes: a read-only store is read, a store
another process writes is named as busy, a moved trace keeps its jobs, a dropped source's id
is never given again, and a --strict failure's rows reach a program reading --json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from traincast.trace.store import Store

HEADER = "job_id,submit_time_s,start_time_s,end_time_s,status,architecture,n_gpus,gpu_type\n"


def trace(path: Path, jobs: int, first: int = 0) -> Path:
    """A canonical CSV trace of ``jobs`` 1-GPU jobs of 100 s each."""
    path.write_text(HEADER + "".join(f"j{first + i},0,0,100,Terminated,1w1g,1,V100\n"
                                     for i in range(jobs)))
    return path


def test_characterize_reads_a_store_in_a_folder_it_cannot_write(tc, tmp_path: Path,
                                                                monkeypatch) -> None:
    db = tmp_path / "ro" / "jobs.duckdb"
    db.parent.mkdir()
    Store(db).ingest(trace(tmp_path / "t.csv", 3))
    folder = str(db.parent)
    real_access = os.access
    # a read-only folder (as root, permissions do not stop writes: the check is what is tested)
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == folder and
                        mode & os.W_OK else real_access(p, mode, **kw))
    r = tc("characterize", "--db", str(db), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["jobs"] == 3
    # ingesting into it is refused before any work, naming the folder
    r = tc("ingest", str(tmp_path / "t.csv"), "--db", str(db))
    assert r.returncode == 2 and "cannot write in folder" in r.stderr and folder in r.stderr


def test_a_store_another_process_writes_is_named_busy(tc, tmp_path: Path) -> None:
    db = tmp_path / "jobs.duckdb"
    Store(db).ingest(trace(tmp_path / "t.csv", 2))
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import duckdb, sys, time
            con = duckdb.connect({str(db)!r})  # a writer: DuckDB's exclusive lock
            print("held", flush=True)
            sys.stdin.readline()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        r = tc("sources", "--db", str(db))
        assert r.returncode == 2, r.stderr
        assert "in use by another process" in r.stderr and f"PID {holder.pid}" in r.stderr
        assert "written by traincast ingest" not in r.stderr  # not the wrong-file hint
    finally:
        holder.communicate("\n", timeout=30)
    assert tc("sources", "--db", str(db)).returncode == 0  # free again


def test_a_moved_trace_keeps_its_jobs_through_drop_missing(tc, tmp_path: Path) -> None:
    db = tmp_path / "jobs.duckdb"
    old = trace(tmp_path / "old.csv", 5)
    assert tc("ingest", str(old), "--db", str(db)).returncode == 0
    new = old.rename(tmp_path / "new.csv")
    r = tc("ingest", str(new), "--db", str(db), "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["jobs"] == 0  # nothing read again
    assert report["sources"][0]["moved_from"] == [str(old)]
    [src] = Store(db).sources()
    assert json.loads(src["files"]) == [str(new)]
    r = tc("sources", "--db", str(db), "--drop-missing", "--json")
    assert r.returncode == 0, r.stderr
    assert Store(db).count() == 5  # the file is there under its new name: nothing dropped
    # a copy whose original is still there stays a copy (nothing moves)
    copy = tmp_path / "copy.csv"
    copy.write_bytes(new.read_bytes())
    report = json.loads(tc("ingest", str(copy), "--db", str(db), "--json").stdout)
    assert "moved_from" not in report["sources"][0]
    assert report["sources"][0]["already_ingested"]["file"] == str(new)


def test_a_dropped_source_id_is_never_given_again(tmp_path: Path) -> None:
    store = Store(tmp_path / "jobs.duckdb")
    a = store.ingest(trace(tmp_path / "a.csv", 1))["sources"][0]["source_id"]
    b = store.ingest(trace(tmp_path / "b.csv", 1, first=10))["sources"][0]["source_id"]
    assert (a, b) == (1, 2)
    store.drop([b])
    c = store.ingest(trace(tmp_path / "c.csv", 1, first=20))["sources"][0]["source_id"]
    assert c == 3  # not 2 again: a script dropping 2 twice does not remove c
    with pytest.raises(ValueError, match="no source 2"):
        store.drop([2])
    assert store.count() == 2


def test_an_ingest_of_copies_counts_each_source_once(tc, tmp_path: Path) -> None:
    one = trace(tmp_path / "x1.csv", 5)
    two = tmp_path / "x2.csv"
    two.write_bytes(one.read_bytes())
    r = tc("ingest", str(one), str(two), "--db", str(tmp_path / "s.duckdb"))
    assert r.returncode == 0, r.stderr
    assert "5 jobs stored by this ingest" in " ".join(r.stdout.split())
    assert "in these sources" not in r.stdout  # 5 held, not 10


def test_a_strict_failure_gives_its_rows_to_json(tc, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "a,0,0,100,Terminated,1w1g,1,V100\nb,0,0,100,Terminated,1w1g,-2,"
                   "V100\nc,0,0,100,Terminated,1w1g,x,V100\n")
    r = tc("ingest", str(bad), "--db", str(tmp_path / "s.duckdb"), "--strict", "--json")
    assert r.returncode == 2 and r.stdout == ""
    err = json.loads(r.stderr.strip().splitlines()[-1])
    assert err["exit_code"] == 2 and err["bad_rows"] == 2
    assert [(e["row"], e["field"]) for e in err["errors"]] == [(2, "n_gpus"), (3, "n_gpus")]
    assert not (tmp_path / "s.duckdb").exists()


def test_one_bad_pai_task_row_is_one_error_for_the_jobs_it_spoils(tmp_path: Path) -> None:
    pai = tmp_path / "pai"
    pai.mkdir()
    # job_name j1 twice in the job table (two inst_ids): both join task row 3, which is bad
    (pai / "pai_job_table.csv").write_text("j1,i1,u,Terminated,0,100\nj2,i2,u,Terminated,0,50\n"
                                           "j1,i9,u,Terminated,0,100\n")
    (pai / "pai_task_table.csv").write_text(
        "j1,worker,1,Terminated,0,100,600,29,100,V100\nj2,worker,1,Terminated,0,50,600,29,100,"
        "V100\nj1,worker,1,Terminated,0,100,600,29,1e12,V100\n")
    report = Store(tmp_path / "s.duckdb").ingest(pai, "pai-2020")
    assert report["bad_rows"] == 2 and report["jobs"] == 1
    [error] = report["errors"]
    assert (Path(error["file"]).name, error["row"], error["field"], error["jobs"]) == (
        "pai_task_table.csv", 3, "plan_gpu", 2)


def test_a_repeated_pai_job_name_is_reported_at_its_column(tmp_path: Path) -> None:
    pai = tmp_path / "pai"
    pai.mkdir()
    (pai / "pai_job_table.csv").write_text("j1,i1,u,Terminated,0,100\nj1,i1,u,Terminated,0,100"
                                           "\n")
    (pai / "pai_task_table.csv").write_text("j1,worker,1,Terminated,0,100,600,29,100,V100\n")
    report = Store(tmp_path / "s.duckdb").ingest(pai, "pai-2020")
    assert report["bad_rows"] == 1
    [error] = report["errors"]
    assert (error["row"], error["field"]) == (2, "job_name")  # the PAI table's column
    assert "duplicate of row 1" in error["value"]


def test_a_non_utf8_file_after_a_quoted_line_break_says_so(tc, tmp_path: Path) -> None:
    f = tmp_path / "q.csv"
    f.write_bytes(b'job_id,n_gpus,user\n"a",1,"two\nlines"\nb,1,caf\xe9\n')
    r = tc("ingest", str(f), "--db", str(tmp_path / "s.duckdb"))
    assert r.returncode == 2
    assert "not utf-8" in r.stderr.lower() and "iconv" in r.stderr


def test_slurm_unknown_times_are_missing_not_bad(tmp_path: Path) -> None:
    # sacct writes Unknown for the end of a running job and the start of a pending one
    f = tmp_path / "t.csv"
    f.write_text(HEADER + "a,0,10,Unknown,RUNNING,1w1g,1,V100\n"
                 "b,0,Unknown,Unknown,PENDING,1w1g,1,V100\nc,0,0,100,COMPLETED,1w1g,1,V100\n")
    report = Store(tmp_path / "s.duckdb").ingest(f)
    assert (report["jobs"], report["bad_rows"], report["flags"]["censored"]) == (3, 0, 2)


def test_open_errors_are_said_for_their_cause(tmp_path: Path) -> None:
    # DuckDB's messages for a read-only file system and an unreadable file, as it words them
    import duckdb

    from traincast.trace.store import _open_error

    ro = duckdb.IOException('IO Error: Cannot open file "x.duckdb": Read-only file system')
    e = _open_error(tmp_path / "x.duckdb", ro, write=True)
    assert "cannot write the job store (read-only file system)" in str(e)
    assert "still work" in e.hint
    denied = duckdb.IOException('IO Error: Cannot open file "x.duckdb": Permission denied')
    e = _open_error(tmp_path / "x.duckdb", denied, write=False)
    assert "cannot read the job store (permission denied)" in str(e)
    assert "written by traincast ingest" not in e.hint
