"""The job store's integrity: content-addressed ingest, a new store created whole, Ctrl-C,
SIGKILL, a full disk and the Parquet export (expected values by hand)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

import traincast.trace.store as store_mod
from traincast.errors import TraincastError
from traincast.trace import Store, read_trace
from traincast.trace.store import (
    SOURCE_COLUMNS,
    content_hash,
    drop_sources,
    file_state,
    ingest,
    load_jobs,
    sources,
)

HEADER = "job_id,submission_time,duration,num_gpu\n"
GOOD = HEADER + "a,0,100,1\nb,5,20,8\n"
OTHER = HEADER + "c,1,10,2\nd,2,30,4\ne,3,40,1\n"
BIG_ROWS = 1_000_000


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _jobs(db: Path) -> list[str]:
    """Job ids of a store, read by DuckDB itself (no traincast code)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [r[0] for r in con.execute("SELECT job_id FROM jobs ORDER BY job_id").fetchall()]
    finally:
        con.close()


def _siblings(db: Path) -> list[str]:
    """What lies beside a store file that is its own or its ingest's."""
    return sorted(f.name for f in db.parent.iterdir() if f.name.startswith(
        (db.name, f".{db.name}")))


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An elasticflow trace of 1,000,000 jobs (about 1-2 s to ingest here)."""
    path = tmp_path_factory.mktemp("big") / "big.csv"
    duckdb.sql(f"COPY (SELECT 'j' || i AS job_id, i AS submission_time, 100 AS duration, "
               f"1 + i % 8 AS num_gpu FROM range({BIG_ROWS}) t(i)) TO '{path}' (HEADER)")
    return path


# ---- a. content-addressed ingest -------------------------------------------------------------

def test_content_hash_is_sha256_of_the_bytes(tmp_path: Path) -> None:
    abc = tmp_path / "abc"
    abc.write_bytes(b"abc")
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    # the FIPS 180-2 test vectors, as sha256sum prints them
    abc_hex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    empty_hex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert content_hash([abc]) == abc_hex
    assert content_hash([empty]) == empty_hex
    # a table set: the sha256 of its files' sha256 lines, sorted (names and order do not count)
    both = hashlib.sha256(f"{abc_hex}\n{empty_hex}\n".encode()).hexdigest()
    assert content_hash([abc, empty]) == content_hash([empty, abc]) == both


def test_content_hash_streams_the_file(tmp_path: Path) -> None:
    big = tmp_path / "sparse.bin"
    with big.open("wb") as f:
        f.truncate(64 * 2**20)  # 64 MiB of zeros
    expected = hashlib.sha256(bytes(64 * 2**20)).hexdigest()
    tracemalloc.start()
    try:
        got = content_hash([big])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == expected
    assert peak < 4 * 2**20  # read in blocks, never the whole 64 MiB


def test_a_copy_under_another_name_is_stored_once(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    a = _write(tmp_path / "a.csv", GOOD)
    copy = tmp_path / "copy.csv"
    shutil.copy(a, copy)
    first = ingest(a, "elasticflow", db)
    assert first["jobs"] == 2
    again = ingest(copy, "elasticflow", db)
    assert again["jobs"] == 0
    [src] = again["sources"]
    assert src["already_ingested"] == {"source_id": 1, "file": str(a)}
    assert (src["source_id"], src["jobs"], src["unchanged"]) == (1, 2, True)
    assert _jobs(db) == ["a", "b"]
    [row] = sources(db)
    assert row["files"] == json.dumps([str(a)])
    assert row["content_hash"] == _sha(a)
    # the copy's jobs are those of the source holding its content
    assert read_trace(copy, "elasticflow", db)["job_id"].to_pylist() == ["a", "b"]
    # a copy in the same call is read once too
    o = _write(tmp_path / "o.csv", OTHER)
    o2 = tmp_path / "o2.csv"
    shutil.copy(o, o2)
    both = ingest([o, o2], "elasticflow", db)
    assert both["jobs"] == 3
    assert both["sources"][1]["already_ingested"] == {"source_id": 2, "file": str(o)}
    assert _jobs(db) == ["a", "b", "c", "d", "e"]


def test_touched_but_unchanged_is_kept_and_a_changed_path_replaces(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    a = _write(tmp_path / "a.csv", GOOD)
    ingest(a, "elasticflow", db)
    os.utime(a, ns=(10**18, 10**18))  # a new modification time, the same bytes
    kept = ingest(a, "elasticflow", db)
    assert kept["jobs"] == 0 and kept["sources"][0]["unchanged"]
    assert "already_ingested" not in kept["sources"][0]
    assert kept["replaced"] == []  # the key is always there (docs/traces.md), empty here
    assert [s["source_id"] for s in sources(db)] == [1]
    # the same path with other bytes replaces its earlier jobs
    _write(a, OTHER)
    changed = ingest(a, "elasticflow", db)
    assert changed["jobs"] == 3 and [r["source_id"] for r in changed["replaced"]] == [1]
    assert _jobs(db) == ["c", "d", "e"]
    # its new reading is a new source: an id is never given twice
    assert [(s["source_id"], s["content_hash"]) for s in sources(db)] == [(2, _sha(a))]


def test_a_path_that_became_a_copy_of_another_source(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    a = _write(tmp_path / "a.csv", GOOD)
    b = _write(tmp_path / "b.csv", OTHER)
    ingest([a, b], "elasticflow", db)
    shutil.copy(a, b)  # b now holds a's trace
    report = ingest(b, "elasticflow", db)
    assert [r["source_id"] for r in report["replaced"]] == [2]  # b's earlier jobs
    assert report["sources"][0]["already_ingested"] == {"source_id": 1, "file": str(a)}
    assert report["jobs"] == 0 and _jobs(db) == ["a", "b"]


def test_a_copy_read_another_way_replaces_the_earlier_reading(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    a = _write(tmp_path / "a.csv", "job_id,n_gpus,gpus\nx,1,4\ny,2,8\n")
    copy = tmp_path / "copy.csv"
    shutil.copy(a, copy)
    ingest(a, "csv", db)
    report = ingest(copy, "csv", db, mapping={"n_gpus": "gpus"})
    assert [(r["source_id"], r["files"]) for r in report["replaced"]] == [(1, [str(a)])]
    assert report["jobs"] == 2
    assert sorted(load_jobs(db)["n_gpus"].to_pylist()) == [4.0, 8.0]  # the content once


def test_a_copied_pai_table_set_is_stored_once(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    one = tmp_path / "one"
    one.mkdir()
    _write(one / "pai_job_table.csv", "j1,i1,u1,Terminated,100,200\nj2,i2,u1,Failed,150,400\n")
    _write(one / "pai_task_table.csv", "j1,worker,1,Terminated,100,200,600,29.3,100,V100\n"
           "j2,worker,2,Failed,150,400,600,29.3,100,P100\n")
    two = tmp_path / "two"
    shutil.copytree(one, two)
    assert ingest(one, "pai-2020", db)["jobs"] == 2
    report = ingest(two, "pai-2020", db)
    assert report["jobs"] == 0
    assert report["sources"][0]["already_ingested"] == {
        "source_id": 1, "file": str(one / "pai_job_table.csv")}
    # a side table added to the copy: other content, stored (and once)
    _write(two / "pai_instance_table.csv", "j1,worker,w0,w0,i1,Terminated,110,200,m1\n")
    assert ingest(two, "pai-2020", db)["jobs"] == 2
    assert len(load_jobs(db)) == 4


def test_an_older_store_without_content_hash_opens_and_gains_it(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    gone = tmp_path / "gone.csv"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE jobs (job_id VARCHAR, n_gpus DOUBLE, censored BOOLEAN, "
                "zero_gpu BOOLEAN, fractional_gpu BOOLEAN, arch_inferred BOOLEAN, "
                "source_id INTEGER)")
    con.execute("CREATE TABLE sources (source_id INTEGER PRIMARY KEY, format VARCHAR, "
                "files VARCHAR, mapping VARCHAR, fingerprint VARCHAR, rows BIGINT, "
                "bad_rows BIGINT, ingested_at TIMESTAMP)")
    con.execute("INSERT INTO jobs VALUES ('old', 4, false, false, false, true, 1)")
    con.execute("INSERT INTO sources VALUES (1, 'elasticflow', ?, '{}', 'x', 1, 0, now())",
                [json.dumps([str(gone)])])
    con.close()
    before = _sha(db)
    [old] = sources(db)  # read-only: the missing column reads null, the file is untouched
    assert list(old) == list(SOURCE_COLUMNS) and old["content_hash"] is None
    assert _sha(db) == before
    a = _write(tmp_path / "a.csv", GOOD)
    assert ingest(a, "elasticflow", db)["jobs"] == 2
    assert [(s["source_id"], s["content_hash"]) for s in sources(db)] == [(1, None),
                                                                           (2, _sha(a))]
    assert _jobs(db) == ["a", "b", "old"]


# ---- b. a new store is created whole; SIGKILL -----------------------------------------------

def test_a_failed_first_ingest_leaves_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    bad = _write(tmp_path / "bad.csv", "job_id,submission_time,num_gpu\na,0,1\n")
    with pytest.raises(TraincastError):
        ingest(bad, "elasticflow", db)
    assert _siblings(db) == []
    assert ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", db)["jobs"] == 2
    assert _siblings(db) == ["s.duckdb"]  # published: no log, no temporary file beside it


CHILD = """
import os, signal, sys
from traincast.trace.store import Store
db, trace, how = sys.argv[1:4]
def progress(step, done, total):
    print(step, flush=True)
    if how == "self" and step.startswith("storing"):
        os.kill(os.getpid(), signal.SIGKILL)  # nothing runs after this
with Store(db) as store:
    store.ingest(trace, "elasticflow", progress=progress)
print("committed", flush=True)
"""


def _killed_ingest(db: Path, trace: Path, how: str) -> list[str]:
    """Ingest ``trace`` into ``db`` in a child process SIGKILLed mid-ingest: by itself when
    storing (``self``), or by this process 0.3 s after it began reading (``parent``); the
    lines it printed."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(trace), how],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line.strip())
        if how == "parent" and line.startswith("reading"):
            time.sleep(0.3)
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=120)
    assert proc.returncode == -signal.SIGKILL, seen
    assert "committed" not in seen
    return seen


@pytest.mark.parametrize("how", ["self", "parent"])
def test_a_killed_first_ingest_leaves_no_store(tmp_path: Path, big_csv: Path, how: str) -> None:
    db = tmp_path / "s.duckdb"
    seen = _killed_ingest(db, big_csv, how)
    assert "reading big.csv" in seen
    assert not db.exists() and not db.with_name("s.duckdb.wal").exists()
    leftovers = [f for f in _siblings(db) if f.startswith(".s.duckdb.ingest-")]
    assert leftovers  # the killed ingest's temporary store, beside the target
    # a later ingest works, and removes what the killed one left
    assert ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", db)["jobs"] == 2
    assert _siblings(db) == ["s.duckdb"]
    assert _jobs(db) == ["a", "b"]


@pytest.mark.parametrize("how", ["self", "parent"])
def test_a_killed_ingest_keeps_the_committed_store(tmp_path: Path, big_csv: Path,
                                                    how: str) -> None:
    db = tmp_path / "s.duckdb"
    ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", db)
    before = sources(db)
    _killed_ingest(db, big_csv, how)
    # DuckDB's log: the store is at its last commit
    assert _jobs(db) == ["a", "b"]
    assert sources(db) == before
    assert ingest(_write(tmp_path / "o.csv", OTHER), "elasticflow", db)["jobs"] == 3
    assert _jobs(db) == ["a", "b", "c", "d", "e"]


def test_a_store_created_meanwhile_by_another_process_is_not_replaced(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    other = _write(tmp_path / "o.csv", OTHER)

    def meanwhile(step: str, done: int, total: int) -> None:
        if step.startswith("storing"):
            ingest(other, "elasticflow", db)  # another writer's first ingest commits first

    with pytest.raises(TraincastError) as exc, Store(db) as store:
        store.ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", progress=meanwhile)
    assert str(db) in str(exc.value) and "another process" in str(exc.value)
    assert _jobs(db) == ["c", "d", "e"]
    assert _siblings(db) == ["s.duckdb"]


# ---- c. Ctrl-C ------------------------------------------------------------------------------

@pytest.mark.parametrize("error", [RuntimeError("Query interrupted"),
                                   duckdb.InterruptException("INTERRUPT Error: Interrupted!"),
                                   KeyboardInterrupt()],
                         ids=["sigint-in-query", "interrupt-exception", "keyboard-interrupt"])
@pytest.mark.parametrize("existing", [True, False], ids=["existing", "new"])
def test_ctrl_c_rolls_back_and_raises_keyboard_interrupt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException,
        existing: bool) -> None:
    db = tmp_path / "s.duckdb"
    if existing:
        ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", db)
        before = _sha(db)
    stage = store_mod._stage

    def interrupted_stage(con: duckdb.DuckDBPyConnection, plan: object) -> None:
        stage(con, plan)  # staged, inside the transaction: then Ctrl-C
        raise error

    monkeypatch.setattr(store_mod, "_stage", interrupted_stage)
    with pytest.raises(KeyboardInterrupt):
        ingest(_write(tmp_path / "o.csv", OTHER), "elasticflow", db)
    if existing:
        assert _sha(db) == before and _siblings(db) == ["s.duckdb"]
    else:
        assert _siblings(db) == []


SIGINT_CHILD = """
import signal
import sys
# Ctrl-C as a terminal delivers it, also when the tests run in the background (a shell
# starts background jobs with SIGINT ignored, and the child would inherit that)
signal.signal(signal.SIGINT, signal.default_int_handler)
import traincast.trace.store as s
stage = s._stage
def announced(con, plan):
    print("staging", flush=True)
    return stage(con, plan)
s._stage = announced
from traincast.cli import main
sys.argv = ["traincast", *sys.argv[1:]]
main()
"""


def test_sigint_during_ingest_exits_130_with_the_store_unchanged(tmp_path: Path,
                                                                 big_csv: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", db)
    before = _sha(db)
    proc = subprocess.Popen([sys.executable, "-c", SIGINT_CHILD, "ingest", str(big_csv),
                             "--format", "elasticflow", "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "staging"
    time.sleep(0.3)  # DuckDB is reading the million rows
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert _sha(db) == before and _jobs(db) == ["a", "b"]


# ---- d. a full disk; the Parquet export -----------------------------------------------------

NO_SPACE = 'IO Error: Could not write file "{}": No space left on device'


@pytest.mark.parametrize("existing", [True, False], ids=["existing", "new"])
def test_a_full_disk_is_an_error_naming_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  existing: bool) -> None:
    db = tmp_path / "s.duckdb"
    if existing:
        ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", db)
        before = _sha(db)

    def full(con: duckdb.DuckDBPyConnection, source_id: int) -> None:
        raise duckdb.IOException(NO_SPACE.format(db))

    monkeypatch.setattr(store_mod, "_insert", full)
    with pytest.raises(TraincastError) as exc:
        ingest(_write(tmp_path / "o.csv", OTHER), "elasticflow", db)
    msg = str(exc.value)
    assert msg.startswith(f"{db}: the disk is full") and "nothing was stored" in msg
    assert "\n" not in msg and exc.value.hint
    if existing:
        assert _sha(db) == before
    else:
        assert _siblings(db) == []


def test_a_full_disk_while_staging_is_not_an_unreadable_trace(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    db = tmp_path / "s.duckdb"

    def full(con: duckdb.DuckDBPyConnection, plan: object) -> None:
        raise duckdb.IOException(NO_SPACE.format(f"{db}.tmp/duckdb_temp_storage-0.tmp"))

    monkeypatch.setattr(store_mod, "_stage", full)
    with pytest.raises(TraincastError) as exc:
        ingest(_write(tmp_path / "o.csv", OTHER), "elasticflow", db)
    assert "disk is full" in str(exc.value) and "cannot read" not in str(exc.value)


FULL_DISK = """
set -e
mount -t tmpfs -o size=4m tmpfs "$1"
tc() { "$PY" -c "from traincast.cli import main; main()" "$@"; }
tc ingest "$2" --format elasticflow --db "$1/s.duckdb" --json > /dev/null
tc ingest "$3" --format elasticflow --db "$1/s.duckdb" --json > /dev/null 2> "$4/existing.err" \
    || echo "existing rc=$?"
tc ingest "$3" --format elasticflow --db "$1/new.duckdb" --json > /dev/null 2> "$4/new.err" \
    || echo "new rc=$?"
"$PY" -c "import duckdb; print('jobs', duckdb.connect('$1/s.duckdb', read_only=True)
.execute('SELECT count(*) FROM jobs').fetchone()[0])"
echo "files:" $(ls -A "$1")
cat "$4/existing.err" "$4/new.err"
"""


def test_a_real_full_disk(tmp_path: Path, big_csv: Path) -> None:
    """On a 4 MiB tmpfs (a private mount namespace; skipped where one cannot be made)."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-rm", "true"],
                                         capture_output=True).returncode != 0:
        pytest.skip("no private mount namespace here (unshare -rm)")
    disk = tmp_path / "disk"
    disk.mkdir()
    small = _write(tmp_path / "a.csv", GOOD)
    r = subprocess.run([unshare, "-rm", "sh", "-c", FULL_DISK, "sh", str(disk), str(small),
                        str(big_csv), str(tmp_path)], capture_output=True, text=True,
                       timeout=300,
                       env={**os.environ, "PY": sys.executable})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "existing rc=2" in lines and "new rc=2" in lines, r.stdout
    assert "jobs 2" in lines  # the committed store kept its jobs
    [files] = [ln.split()[1:] for ln in lines if ln.startswith("files:")]
    assert files == ["s.duckdb"]  # nothing else left: no new store, no temporary files
    errors = [json.loads(ln)["error"] for ln in lines if ln.startswith("{")]  # --json errors
    assert [e.startswith(f"{disk}/{name}.duckdb: the disk is full")
            for e, name in zip(errors, ("s", "new"), strict=True)] == [True, True], errors


def test_parquet_is_exported_with_the_ingest(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    out = tmp_path / "jobs.parquet"
    ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", db)
    report = ingest(_write(tmp_path / "o.csv", OTHER), "elasticflow", db, parquet=out)
    assert report["parquet"] == str(out)
    assert sorted(pq.read_table(out)["job_id"].to_pylist()) == ["a", "b", "c", "d", "e"]
    assert sorted(f.name for f in tmp_path.iterdir()) == ["a.csv", "jobs.parquet", "o.csv",
                                                          "s.duckdb"]


@pytest.mark.parametrize("existing", [True, False], ids=["existing", "new"])
def test_a_parquet_file_that_cannot_be_written_stores_nothing(tmp_path: Path,
                                                              existing: bool) -> None:
    db = tmp_path / "s.duckdb"
    if existing:
        ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", db)
        before = _sha(db)
    out = tmp_path / "missing" / "jobs.parquet"
    with pytest.raises(TraincastError) as exc:
        ingest(_write(tmp_path / "o.csv", OTHER), "elasticflow", db, parquet=out)
    msg = str(exc.value)
    assert msg.startswith(f"{out}: cannot write the Parquet file") and "nothing was stored" in msg
    assert not (tmp_path / "missing").exists()
    if existing:
        assert _sha(db) == before
    else:
        assert _siblings(db) == []


def test_a_parquet_rename_that_fails_after_the_commit_says_so(tmp_path: Path,
                                                              monkeypatch) -> None:
    import errno

    db = tmp_path / "s.duckdb"
    out = tmp_path / "jobs.parquet"
    real_replace = Path.replace

    def refuse(self: Path, target: Path) -> Path:  # the rename into place is denied
        if Path(target) == out:
            raise PermissionError(errno.EACCES, "Permission denied", str(target))
        return real_replace(self, target)

    monkeypatch.setattr(Path, "replace", refuse)
    with pytest.raises(TraincastError) as exc:
        ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", db, parquet=out)
    monkeypatch.undo()
    msg = str(exc.value)
    assert msg.startswith(f"{out}: cannot write the Parquet file")
    assert f"the ingest was committed (2 jobs stored in {db})" in msg
    assert _jobs(db) == ["a", "b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "s.duckdb"]


def test_a_parquet_output_that_is_a_folder_stores_nothing(tmp_path: Path) -> None:
    # refused before the ingest commits (files.write_whole): nothing stored, nothing written
    db = tmp_path / "s.duckdb"
    out = tmp_path / "jobs.parquet"
    out.mkdir()
    (out / "keep").write_text("x")
    with pytest.raises(TraincastError, match=r"jobs\.parquet: cannot write \(is a folder\); "
                                             r"nothing written"):
        ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", db, parquet=out)
    assert not db.exists() or _jobs(db) == []
    assert (out / "keep").read_text() == "x"


def test_export_parquet_is_whole_or_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", db)
    with pytest.raises(TraincastError) as exc, Store(db) as store:
        store.export_parquet(tmp_path / "missing" / "x.parquet")
    assert "cannot write the Parquet file" in str(exc.value)
    with Store(db) as store:
        path = store.export_parquet(tmp_path / "x.parquet")
    assert pq.read_table(path)["job_id"].to_pylist() == ["a", "b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "s.duckdb", "x.parquet"]


# ---- the command line -----------------------------------------------------------------------

def test_cli_says_already_ingested_and_parquet_failures(tmp_path: Path, tc) -> None:  # noqa: ANN001
    db = tmp_path / "s.duckdb"
    a = _write(tmp_path / "a.csv", GOOD)
    copy = tmp_path / "copy.csv"
    shutil.copy(a, copy)
    assert tc("ingest", str(a), "--format", "elasticflow", "--db", str(db)).returncode == 0
    r = tc("ingest", str(copy), "--format", "elasticflow", "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert f"copy.csv: already ingested as {a} (source 1); nothing stored" in \
        " ".join(r.stdout.split())
    r = tc("ingest", str(_write(tmp_path / "o.csv", OTHER)), "--format", "elasticflow",
           "--db", str(db), "--parquet", str(tmp_path / "missing" / "j.parquet"))
    assert r.returncode == 2 and "j.parquet" in r.stderr
    assert _jobs(db) == ["a", "b"]  # nothing stored
    r = tc("ingest", str(tmp_path / "o.csv"), "--format", "elasticflow", "--db", str(db),
           "--parquet", str(tmp_path / "j.parquet"), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["parquet"] == str(tmp_path / "j.parquet")
    assert sorted(pq.read_table(tmp_path / "j.parquet")["job_id"].to_pylist()) == \
        ["a", "b", "c", "d", "e"]


# ---- c. gzipped copies; listing and dropping sources ------------------------------------------

def test_a_gz_file_is_hashed_by_its_decompressed_bytes(tmp_path: Path) -> None:
    plain = _write(tmp_path / "a.csv", GOOD)
    gz = tmp_path / "b.csv.gz"
    gz.write_bytes(gzip.compress(GOOD.encode(), mtime=0))
    # zcat b.csv.gz | sha256sum: the same as the plain table's, not the compressed bytes'
    assert content_hash([gz]) == hashlib.sha256(GOOD.encode()).hexdigest() == _sha(plain)
    assert content_hash([gz]) != _sha(gz)
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(gz.read_bytes()[:-6])
    with pytest.raises(EOFError):
        content_hash([cut])


def test_a_table_and_its_gzipped_copy_are_stored_once(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    gz = tmp_path / "in" / "a.csv.gz"
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress(GOOD.encode()))
    assert ingest(gz, "elasticflow", db)["jobs"] == 2
    plain = _write(tmp_path / "a.csv", GOOD)  # the same table, decompressed elsewhere
    again = ingest(plain, "elasticflow", db)
    assert again["jobs"] == 0
    assert again["sources"][0]["already_ingested"] == {"source_id": 1, "file": str(gz)}
    assert _jobs(db) == ["a", "b"]
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(gz.read_bytes()[:-6])
    with pytest.raises(TraincastError) as exc:
        ingest(cut, "elasticflow", db)
    assert str(cut) in str(exc.value) and "cut short" in exc.value.hint
    assert _jobs(db) == ["a", "b"]


def test_drop_removes_sources_and_their_jobs_all_or_none(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    a = _write(tmp_path / "a.csv", GOOD)
    o = _write(tmp_path / "o.csv", OTHER)
    ingest([a, o], "elasticflow", db)
    before = _sha(db)
    with pytest.raises(TraincastError) as exc:
        drop_sources([2, 9], db)  # 9 is not there: nothing is removed
    assert "no source 9" in str(exc.value) and "holds 1, 2" in str(exc.value)
    assert _jobs(db) == ["a", "b", "c", "d", "e"]
    assert _sha(db) == before
    report = drop_sources([2], db)
    assert report["jobs"] == 3
    assert report["dropped"] == [{"source_id": 2, "files": [str(o)], "format": "elasticflow",
                                  "jobs": 3}]
    assert _jobs(db) == ["a", "b"]
    assert [s["source_id"] for s in sources(db)] == [1]
    # the dropped file ingested again is a new source
    assert ingest(o, "elasticflow", db)["jobs"] == 3


def test_file_state_says_as_ingested_changed_or_missing(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    a = _write(tmp_path / "a.csv", GOOD)
    ingest(a, "elasticflow", db)
    [row] = sources(db)
    files = json.loads(row["files"])
    assert file_state(files, row["fingerprint"]) == "as ingested"
    os.utime(a, ns=(0, 0))  # touched: its modification time differs
    assert file_state(files, row["fingerprint"]) == "changed"
    a.unlink()
    assert file_state(files, row["fingerprint"]) == "missing"


def test_cli_sources_lists_and_drops_missing(tmp_path: Path, tc) -> None:  # noqa: ANN001
    db = tmp_path / "s.duckdb"
    a = _write(tmp_path / "a.csv", GOOD)
    o = _write(tmp_path / "o.csv", OTHER)
    assert tc("ingest", str(a), str(o), "-f", "elasticflow", "--db", str(db)).returncode == 0
    o.unlink()
    r = tc("sources", "--db", str(db), "--json")
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)["sources"]
    assert [(s["source_id"], s["rows"], s["state"]) for s in listed] == \
        [(1, 2, "as ingested"), (2, 3, "missing")]
    r = tc("sources", "--db", str(db), "--drop-missing")
    assert r.returncode == 0, r.stderr
    assert "removed source 2 (elasticflow: o.csv) and its 3 jobs" in " ".join(r.stdout.split())
    assert _jobs(db) == ["a", "b"]
    r = tc("sources", "--db", str(db), "--drop", "5", "--json")
    assert r.returncode == 2 and json.loads(r.stderr)["error"].endswith(
        "no source 5 in the store (it holds 1); nothing was removed")
    assert _jobs(db) == ["a", "b"]
    assert tc("sources", "--db", str(db), "--drop", "1").returncode == 0
    r = tc("sources", "--db", str(db))
    assert "holds no source" in " ".join(r.stdout.split()) and _jobs(db) == []


def test_cli_sources_counts_jobs_of_no_source_and_refuses_a_store_without_sources(
        tmp_path: Path, tc) -> None:  # noqa: ANN001
    db = tmp_path / "s.duckdb"
    assert tc("ingest", str(_write(tmp_path / "a.csv", GOOD)), "-f", "elasticflow",
              "--db", str(db)).returncode == 0
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO jobs (job_id, n_gpus, source_id) VALUES ('x', 1, NULL)")
    con.close()
    r = tc("sources", "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert "3 jobs in the store, 2 from these 1 source(s) and 1 of no source listed" in \
        " ".join(r.stdout.split())
    assert json.loads(tc("sources", "--db", str(db), "--json").stdout)["jobs"] == 3
    bare = tmp_path / "bare.duckdb"
    con = duckdb.connect(str(bare))
    con.execute("CREATE TABLE jobs (job_id VARCHAR)")
    con.close()
    r = tc("sources", "--db", str(bare))
    assert r.returncode == 2 and "not a traincast job store (its jobs table has no " \
        "source_id column)" in r.stderr


def test_another_programs_database_is_refused_and_left_as_it_was(tmp_path: Path,
                                                                   tc) -> None:  # noqa: ANN001
    """A DuckDB file of other tables, or of tables named as the store's but not its columns,
    is no job store: every command refuses it (exit 2) and an ingest writes nothing to it."""
    trace = str(_write(tmp_path / "a.csv", GOOD))
    mine = tmp_path / "mine.duckdb"
    con = duckdb.connect(str(mine))
    con.execute("CREATE TABLE experiments (id INTEGER, note VARCHAR)")
    con.close()
    r = tc("ingest", trace, "-f", "elasticflow", "--db", str(mine))
    assert r.returncode == 2 and "not a traincast job store (it holds what traincast does " \
        "not write: main.experiments): nothing written" in " ".join(r.stderr.split())
    con = duckdb.connect(str(mine))
    assert [t[0] for t in con.execute("SHOW TABLES").fetchall()] == ["experiments"]
    con.close()
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE jobs (job_id VARCHAR, source_id VARCHAR)")
    con.execute("CREATE TABLE sources (source_id VARCHAR, format VARCHAR, files VARCHAR)")
    con.close()
    for cmd in (["sources"], ["characterize"], ["ingest", trace, "-f", "elasticflow"]):
        r = tc(*cmd, "--db", str(other))
        assert r.returncode == 2 and "its sources.source_id is VARCHAR, not an integer" in \
            r.stderr, (cmd, r.stderr)
    # a view (in another schema) is something too; an empty file is no store, said so
    views = tmp_path / "views.duckdb"
    con = duckdb.connect(str(views))
    con.execute("CREATE SCHEMA app")
    con.execute("CREATE VIEW app.users AS SELECT 1 AS id")
    con.close()
    r = tc("ingest", trace, "-f", "elasticflow", "--db", str(views))
    assert r.returncode == 2 and "not a traincast job store (it holds what traincast does " \
        "not write: app.users)" in " ".join(r.stderr.split())
    empty = tmp_path / "empty.duckdb"
    empty.write_bytes(b"")
    for cmd in (["sources"], ["ingest", trace, "-f", "elasticflow"]):
        r = tc(*cmd, "--db", str(empty))
        assert r.returncode == 2 and "empty.duckdb: an empty file, no job store" in r.stderr
    # a store its owner added a table to is still a store: read and ingested into
    db = tmp_path / "s.duckdb"
    assert tc("ingest", trace, "-f", "elasticflow", "--db", str(db)).returncode == 0
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE my_notes (note VARCHAR)")
    con.close()
    assert tc("sources", "--db", str(db)).returncode == 0
    other_trace = _write(tmp_path / "b.csv", OTHER)
    assert tc("ingest", str(other_trace), "-f", "elasticflow", "--db", str(db)).returncode == 0


def test_an_analysis_of_the_store_says_which_sources_lost_their_files(tmp_path: Path,
                                                                      tc) -> None:  # noqa: ANN001
    db = tmp_path / "s.duckdb"
    a = _write(tmp_path / "a.csv", GOOD)
    o = _write(tmp_path / "o.csv", OTHER)
    assert tc("ingest", str(a), str(o), "-f", "elasticflow", "--db", str(db)).returncode == 0
    r = tc("characterize", "--db", str(db))
    assert r.returncode == 0 and "gone" not in r.stderr
    o.unlink()
    for cmd in ("characterize", "recommend"):
        r = tc(cmd, "--db", str(db))
        assert r.returncode == 0, r.stderr
        assert "1 source(s) of the store have files that are gone (id 2; 3 job(s))" in \
            " ".join(r.stderr.split())
    # given the trace, only its own sources are read: nothing to say
    r = tc("characterize", str(a), "-f", "elasticflow", "--db", str(db))
    assert r.returncode == 0 and "gone" not in r.stderr


def test_a_store_cut_short_is_named_as_damaged_and_left_as_it_is(tmp_path: Path, tc) -> None:
    # a copy of a store cut at 300,000 bytes (a download stopped): DuckDB opens it and fails on
    # the first read; the command names the file and exits 2, not as a bug of traincast
    db = tmp_path / "s.duckdb"
    ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", db)
    data = db.read_bytes()
    assert len(data) > 300_000
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(data[:300_000])
    r = tc("sources", "--db", str(cut))
    assert r.returncode == 2, r.stderr
    assert f"{cut}: damaged or cut short" in r.stderr and "bug in traincast" not in r.stderr
    assert cut.read_bytes() == data[:300_000]
    # cut where DuckDB fails on opening it (500,000 bytes, 100,000): said the same way
    for size in (500_000, 100_000):
        cut.write_bytes(data[:size])
        for cmd in ("sources", "characterize"):
            r = tc(cmd, "--db", str(cut))
            assert r.returncode == 2, r.stderr
            assert f"{cut}: damaged or cut short" in r.stderr, (size, cmd, r.stderr)
            assert "ingest the trace again into a new store" in " ".join(r.stderr.split())


def test_a_store_with_bytes_overwritten_is_named_as_damaged(tmp_path: Path, tc) -> None:
    # bytes overwritten inside a block (a disk or a copy gone wrong): DuckDB finds the block's
    # checksum wrong as it opens the store; said as a damaged store, with what to do
    db = tmp_path / "s.duckdb"
    ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", db)
    data = bytearray(db.read_bytes())
    data[12_288 + 64:12_288 + 128] = b"\xa5" * 64
    flip = tmp_path / "flip.duckdb"
    flip.write_bytes(bytes(data))
    r = tc("characterize", "--db", str(flip))
    assert r.returncode == 2, r.stderr
    assert f"{flip}: damaged or cut short" in r.stderr, r.stderr
    assert "ingest the trace again into a new store" in " ".join(r.stderr.split())


def test_a_drop_whose_folder_cannot_be_written_is_said_and_removes_nothing(
        tmp_path: Path, monkeypatch) -> None:
    # DuckDB writes its log (.wal) beside the store: in a read-only folder the commit fails
    # with its own "Permission denied"; said as the store's, not as a bug, all kept
    import duckdb

    db = tmp_path / "s.duckdb"
    ingest(_write(tmp_path / "a.csv", GOOD), "elasticflow", db)
    real = Store._connect

    class Refusing:
        def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
            self._con = con

        def execute(self, query: str, *args: object) -> object:
            if query == "COMMIT":
                raise duckdb.TransactionException(
                    f'TransactionContext Error: Failed to commit: Cannot open file "{db}.wal": '
                    "Permission denied")
            return self._con.execute(query, *args)

        def __getattr__(self, name: str) -> object:
            return getattr(self._con, name)

    monkeypatch.setattr(Store, "_connect", lambda self, write, at=None: (
        Refusing(real(self, write, at)) if write else real(self, write, at)))
    with pytest.raises(TraincastError) as exc:
        drop_sources([1], db)
    monkeypatch.undo()
    assert str(exc.value) == (f"{db}: cannot write the job store (permission denied); nothing "
                              "was removed (rolled back)")
    assert _jobs(db) == ["a", "b"]
