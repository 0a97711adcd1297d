"""Edge cases real trace files have: missing-value spellings, date-times with offsets, duplicate
rows, CRLF / BOM / no final newline, quoted commas, gzip, re-ingest under another format, and
PAI jobs split across tables. Expected values come from the csv / datetime modules or by hand."""

from __future__ import annotations

import csv
import gzip
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from traincast.errors import TraincastError
from traincast.trace import parse_mapping, read_trace
from traincast.trace.adapters.pai2020 import HEADERS
from traincast.trace.store import ingest, load_jobs, sources

HEADER = ["n_gpus", "job_id", "user", "status", "start_time_s", "end_time_s", "architecture",
          "gpu_type", "gpu_util", "n_workers"]
ROWS = [
    ["1", "a1", "doe, john", "Terminated", "0", "100", "1w1g", "V100", "0.5", "1"],
    ["8", "a2", "u2", "Terminated", "10", "70", "PS-Worker", "V100M32", "\\N", "8"],
    ["0.5", "a3", "\\N", "Running", "5", "", "", "\\N", "NA", "None"],
    ["2", "a4", "u4", "Failed", "null", "NaN", "", "T4", "", ""],
]


def _write_csv(path: Path, rows: list[list[str]], header: list[str] = HEADER, *,
               crlf: bool = False, bom: bool = False, final_newline: bool = True) -> Path:
    with path.open("w", newline="", encoding="utf-8-sig" if bom else "utf-8") as f:
        w = csv.writer(f, lineterminator="\r\n" if crlf else "\n")
        w.writerow(header)
        w.writerows(rows)
    if not final_newline:
        path.write_bytes(path.read_bytes().rstrip(b"\r\n"))
    return path


def _by_id(jobs) -> dict[str, dict]:  # noqa: ANN001
    return {j["job_id"]: j for j in jobs.to_pylist()}


def test_missing_value_spellings_are_null_not_bad_rows(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "t.csv", ROWS)
    report: dict = {}
    jobs = _by_id(read_trace(path, on_report=report.update))
    assert report["bad_rows"] == 0 and len(jobs) == len(ROWS)
    # \N (MySQL / Hive NULL), NA, None, null, NaN and empty are missing values
    assert jobs["a2"]["gpu_util"] is None and jobs["a3"]["gpu_util"] is None
    assert jobs["a3"]["n_workers"] is None and jobs["a3"]["user"] is None
    assert jobs["a3"]["gpu_type"] is None
    assert jobs["a4"]["start_time_s"] is None and jobs["a4"]["end_time_s"] is None
    # architecture names are read case-insensitively
    assert jobs["a2"]["architecture"] == "ps-worker"


def test_pai_backslash_n_is_missing(tmp_path: Path) -> None:
    d = tmp_path / "pai"
    d.mkdir()
    with (d / "pai_job_table.csv").open("w", newline="") as f:
        csv.writer(f).writerows([("J1", "i1", "u", "Terminated", "\\N", "\\N"),
                                 ("J2", "i2", "u", "Running", "10", "\\N")])
    with (d / "pai_task_table.csv").open("w", newline="") as f:
        csv.writer(f).writerows([("J1", "worker", "1.0", "Terminated", "\\N", "\\N", "600",
                                  "29", "\\N", "\\N"),
                                 ("J2", "worker", "\\N", "Running", "10", "\\N", "600", "29",
                                  "50", "T4")])
    report = ingest(d, format="pai-2020", db=tmp_path / "s.duckdb")
    assert report["bad_rows"] == 0
    jobs = _by_id(load_jobs(tmp_path / "s.duckdb"))
    assert jobs["i1"]["n_gpus"] == 0 and jobs["i1"]["gpu_type"] is None
    assert jobs["i1"]["submit_time_s"] is None
    # inst_num missing = one instance: 50 / 100 GPU
    assert jobs["i2"]["n_gpus"] == 0.5 and jobs["i2"]["censored"]


@pytest.fixture
def new_york_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The machine's local time zone is New York (DuckDB reads TZ when it connects)."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_date_times_with_offsets_are_utc(tmp_path: Path, new_york_time: None) -> None:
    times = ["2020-07-01 10:00:00", "2020-07-01T10:00:10Z", "2020-07-01T12:00:10+02:00",
             "2020-07-01 10:00:00.5"]
    rows = [[str(i), f"t{i}", t] for i, t in enumerate(times)]
    path = _write_csv(tmp_path / "t.csv", rows, ["n_gpus", "job_id", "start_time_s"])
    got = [j["start_time_s"] for j in read_trace(path).to_pylist()]
    assert got[0] == 1593597600.0  # 2020-07-01 10:00:00 UTC, whatever the local zone

    def utc(text: str) -> float:  # no offset = UTC
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()

    assert got == [utc(t) for t in times]
    assert got[1] == got[2]  # 12:00:10 at +02:00 is 10:00:10 UTC


def test_duplicate_job_rows_are_reported_once_each(tmp_path: Path) -> None:
    rows = [*ROWS, ROWS[0], ["3", "a2", "x", "Failed", "1", "2", "", "", "", ""]]
    path = _write_csv(tmp_path / "t.csv", rows)
    with path.open(newline="") as f:
        ids = [r["job_id"] for r in csv.DictReader(f)]
    first = {}
    for i, k in enumerate(ids, start=1):
        first.setdefault(k, i)
    dups = [(i, k) for i, k in enumerate(ids, start=1) if first[k] < i]
    assert dups == [(5, "a1"), (6, "a2")]
    db = tmp_path / "s.duckdb"
    report = ingest(path, db=db)
    assert report["jobs"] == len(set(ids)) == 4 and report["bad_rows"] == len(dups)
    assert [(e["row"], e["field"]) for e in report["errors"]] == [(5, "job_id"), (6, "job_id")]
    assert "duplicate of row 1" in report["errors"][0]["value"]
    assert "duplicate of row 2" in report["errors"][1]["value"]
    assert [j["job_id"] for j in load_jobs(db).to_pylist()] == ids[:4]  # the trace's order
    with pytest.raises(TraincastError, match="row 5: field job_id"):
        ingest(path, db=tmp_path / "strict.duckdb", strict=True)
    assert not (tmp_path / "strict.duckdb").exists()


def test_crlf_bom_no_final_newline_quotes_and_column_order(tmp_path: Path) -> None:
    plain = _write_csv(tmp_path / "plain.csv", ROWS)
    order = [HEADER.index(c) for c in reversed(HEADER)]
    odd = _write_csv(tmp_path / "odd.csv", [[r[i] for i in order] for r in ROWS],
                     [HEADER[i] for i in order], crlf=True, bom=True, final_newline=False)
    gz = tmp_path / "plain.csv.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    with odd.open(newline="", encoding="utf-8-sig") as f:
        expected = list(csv.DictReader(f))
    assert len(expected) == len(ROWS)
    base = read_trace(plain).to_pylist()
    for path in (odd, gz):
        jobs = read_trace(path).to_pylist()
        assert [j["job_id"] for j in jobs] == [r["job_id"] for r in expected]
        assert [j["user"] for j in jobs] == ["doe, john", "u2", None, "u4"]
        assert [j["n_gpus"] for j in jobs] == [float(r["n_gpus"]) for r in expected]
        strip = ("source_id",)
        assert [{k: v for k, v in j.items() if k not in strip} for j in jobs] == \
            [{k: v for k, v in j.items() if k not in strip} for j in base]


def test_reingest_under_another_format_replaces(tmp_path: Path) -> None:
    path = tmp_path / "ef.csv"
    path.write_text("job_id,submission_time,duration,num_gpu\na,0,10,1\nb,5,20,2\nc,7,1,4\n")
    db = tmp_path / "s.duckdb"
    ingest(path, format="elasticflow", db=db)
    report = ingest(path, format="csv", db=db, mapping=parse_mapping(["n_gpus=num_gpu"]))
    assert report["replaced"][0]["format"] == "elasticflow"
    assert report["replaced"][0]["jobs"] == 3
    assert load_jobs(db).num_rows == 3 and len(sources(db)) == 1
    # the same file twice in one call is stored once
    again = ingest([path, path], format="csv", db=db, mapping=parse_mapping(["n_gpus=num_gpu"]))
    assert all(s["unchanged"] for s in again["sources"]) and load_jobs(db).num_rows == 3


def test_elasticflow_negative_duration_is_a_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "ef.csv"
    path.write_text("job_id,submission_time,duration,num_gpu\na,0,10,1\nb,5,-20,2\n")
    report = ingest(path, format="elasticflow", db=tmp_path / "s.duckdb")
    assert report["jobs"] == 1
    assert [(e["row"], e["field"], e["value"]) for e in report["errors"]] == \
        [(2, "duration", "-20")]


def test_pai_jobs_split_across_tables_are_said(tmp_path: Path) -> None:
    d = tmp_path / "pai"
    d.mkdir()
    jobs = [("J1", "i1", "u", "Terminated", "0", "10"), ("J2", "i2", "u", "Terminated", "0", "10"),
            ("J1", "i1", "u", "Terminated", "0", "10")]  # J2: no task row; J1 twice
    tasks = [("J1", "worker", "2", "Terminated", "0", "10", "600", "29", "100", "V100"),
             ("J8", "worker", "1", "Terminated", "0", "10", "600", "29", "100", "V100"),
             ("J9", "ps", "1", "Terminated", "0", "10", "600", "29", "", "")]
    for name, rows in (("job", jobs), ("task", tasks)):
        assert all(len(r) == len(HEADERS[name]) for r in rows)
        with (d / f"pai_{name}_table.csv").open("w", newline="") as f:
            csv.writer(f).writerows(rows)
    report = ingest(d, format="pai-2020", db=tmp_path / "s.duckdb")
    # by hand: J8 and J9 have task rows only; J2 has a job row only; J1's second row repeats it
    assert sorted(n["count"] for n in report["notes"]) == [1, 2]
    orphan = next(n for n in report["notes"] if "no row in pai_job_table" in n["note"])
    assert orphan["count"] == 2
    assert report["jobs"] == 2 and report["bad_rows"] == 1
    assert report["errors"][0]["row"] == 3 and report["errors"][0]["field"] == "job_name"
    stored = _by_id(load_jobs(tmp_path / "s.duckdb"))
    assert stored["i1"]["n_gpus"] == 2 and stored["i2"]["n_gpus"] is None


def test_bad_row_number_in_a_large_file(tmp_path: Path) -> None:
    n, bad = 300_000, 271_828
    path = tmp_path / "big.csv"
    lines = ["job_id,n_gpus,start_time_s,end_time_s"]
    lines += [f"j{i},{'x' if i == bad - 1 else 1 + i % 8},{i},{i + 60}" for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    report = ingest(path, db=tmp_path / "s.duckdb")
    assert report["jobs"] == n - 1
    assert [(e["row"], e["field"], e["value"]) for e in report["errors"]] == \
        [(bad, "n_gpus", "x")]


def test_quoted_line_breaks_with_short_rows(tmp_path: Path) -> None:
    """A file whose quoted fields hold line breaks and whose rows are short (DuckDB's parallel
    reader refuses both together): read whole, into a new store and into an existing one."""
    text = 'job_id,n_gpus,user\na,1,x\nb,2\nc,3,"multi\nline"\nd,4,z\n'
    path = tmp_path / "t.csv"
    path.write_text(text)
    with path.open(newline="") as f:
        expected = list(csv.DictReader(f))
    for db in (tmp_path / "new.duckdb", tmp_path / "old.duckdb"):
        if db.name == "old.duckdb":
            ingest(_write_csv(tmp_path / "o.csv", [["1", "z"]], ["n_gpus", "job_id"]), db=db)
        report = ingest(path, db=db)
        assert report["jobs"] == len(expected) == 4 and report["bad_rows"] == 0
        jobs = load_jobs(db, [report["sources"][0]["source_id"]]).to_pylist()
        assert [j["user"] for j in jobs] == [r["user"] for r in expected]
        assert [j["job_id"] for j in load_jobs(db).to_pylist()][-4:] == ["a", "b", "c", "d"]


def test_not_utf8_names_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(b"job_id,n_gpus,user\na,1,J\xe9r\xf4me\n")
    with pytest.raises(TraincastError) as exc:
        ingest(path, db=tmp_path / "s.duckdb")
    assert str(path) in str(exc.value) and "utf-8" in str(exc.value).lower()
    assert "iconv" in exc.value.hint and not (tmp_path / "s.duckdb").exists()


def test_a_folder_without_the_formats_files_is_refused_saying_what_it_holds(
        tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(TraincastError, match=r"helios: .*d: no helios trace file .*empty"):
        ingest(tmp_path / "d", format="helios", db=tmp_path / "s.duckdb")
    (tmp_path / "d" / "cluster_gpu_number.csv").write_text("a,b\n1,2\n")
    with pytest.raises(TraincastError, match=r"cluster_log\.csv.*holds cluster_gpu_number\.csv"):
        ingest(tmp_path / "d", format="helios", db=tmp_path / "s.duckdb")
    assert not (tmp_path / "s.duckdb").exists()


def test_a_folder_stands_for_the_trace_files_of_its_format(tmp_path: Path) -> None:
    """ElasticFlow: every CSV of the folder, one source each; Alibaba 2023: the pod lists, not
    the node list beside them; Helios: the release's data/<cluster>/cluster_log.csv."""
    ef = tmp_path / "ef"
    ef.mkdir()
    (ef / "cluster04.csv").write_text("job_id,submission_time,duration,num_gpu\n"
                                      "a,0,10,1\nb,5,20,2\n")
    (ef / "cluster10.csv").write_text("job_id,submission_time,duration,num_gpu\na,1,30,4\n")
    (ef / "LICENSE").write_text("MIT\n")
    report = ingest(ef, format="elasticflow", db=tmp_path / "ef.duckdb")
    assert [Path(s["files"][0]).name for s in report["sources"]] == ["cluster04.csv",
                                                                     "cluster10.csv"]
    jobs = load_jobs(tmp_path / "ef.duckdb").to_pydict()
    assert sorted(jobs["n_gpus"]) == [1, 2, 4]  # job "a" of each cluster kept: 3 jobs

    ali = tmp_path / "ali"
    ali.mkdir()
    (ali / "openb_node_list_gpu_node.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\n"
                                                      "n0,64000,262144,8,G2\n")
    (ali / "openb_pod_list_default.csv").write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        "deletion_time,scheduled_time\np0,1000,100,2,1000,G2,LS,Succeeded,0,100,5\n")
    report = ingest(ali, format="alibaba-2023", db=tmp_path / "ali.duckdb")
    assert [Path(f).name for s in report["sources"] for f in s["files"]] == [
        "openb_pod_list_default.csv"]
    assert load_jobs(tmp_path / "ali.duckdb").to_pydict()["n_gpus"] == [2]

    data = tmp_path / "helios" / "data"
    for cluster, gpus in (("Venus", 8), ("Earth", 16)):
        (data / cluster).mkdir(parents=True)
        (data / cluster / "cluster_log.csv").write_text(
            "job_id,gpu_num,node_num,state,submit_time,start_time,end_time\n"
            f"j,{gpus},2,COMPLETED,0,10,100\n")
        (data / cluster / "cluster_gpu_number.csv").write_text("date,gpus\n0,1\n")
    ingest(data, format="helios", db=tmp_path / "h.duckdb")
    jobs = load_jobs(tmp_path / "h.duckdb").to_pydict()
    assert sorted(jobs["n_gpus"]) == [8, 16] and sorted(jobs["gpus_per_node"]) == [4, 8]


def test_a_duplicate_of_a_bad_row_is_kept(tmp_path: Path) -> None:
    """The first good row of a job is stored: a bad first row does not make the next one a
    duplicate."""
    path = tmp_path / "t.csv"
    path.write_text("job_id,n_gpus\na,two\na,2\na,3\nb,1\n")
    report = ingest(path, db=tmp_path / "s.duckdb")
    assert [(e["row"], e["field"], e["value"]) for e in report["errors"]] == \
        [(1, "n_gpus", "two"), (3, "job_id", "a (a duplicate of row 2)")]
    assert [(j["job_id"], j["n_gpus"]) for j in load_jobs(tmp_path / "s.duckdb").to_pylist()] \
        == [("a", 2.0), ("b", 1.0)]


def test_pai_tables_added_later_replace_the_jobs(tmp_path: Path) -> None:
    d = tmp_path / "pai"
    d.mkdir()
    tables = {"job": [("J1", "i1", "u", "Terminated", "0", "10"),
                      ("J2", "i2", "u", "Terminated", "0", "10")],
              "task": [("J1", "worker", "2", "Terminated", "0", "10", "600", "29", "100", "V100"),
                       ("J2", "worker", "1", "Terminated", "0", "10", "600", "29", "100", "T4")],
              "instance": [("J1", "worker", "a", "w1", "i1", "Terminated", "1", "10", "m1"),
                           ("J1", "worker", "b", "w2", "i1", "Terminated", "1", "10", "m1")]}
    for name, rows in tables.items():
        with (d / f"pai_{name}_table.csv").open("w", newline="") as f:
            csv.writer(f).writerows(rows)
    db = tmp_path / "s.duckdb"
    ingest([d / "pai_job_table.csv", d / "pai_task_table.csv"], format="pai-2020", db=db)
    assert _by_id(load_jobs(db))["i1"]["architecture"] == "allreduce-cluster"
    report = ingest(d, format="pai-2020", db=db)  # now with the instance table
    assert len(report["replaced"]) == 1 and report["replaced"][0]["jobs"] == 2
    jobs = _by_id(load_jobs(db))
    assert len(jobs) == len(tables["job"]) and len(sources(db)) == 1
    assert jobs["i1"]["architecture"] == "allreduce-local"  # both workers on machine m1


def test_header_names_any_case_and_spaces(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("Job_ID , N_GPUs,User,Censored,NumGPU\na,1,x,true,3\nb,2,y,false,4\n")
    jobs = read_trace(path).to_pylist()
    assert [(j["job_id"], j["n_gpus"], j["user"], j["censored"]) for j in jobs] == \
        [("a", 1.0, "x", True), ("b", 2.0, "y", False)]
    mapped = read_trace(path, mapping=parse_mapping(["n_gpus=NumGPU"])).to_pylist()
    assert [j["n_gpus"] for j in mapped] == [3.0, 4.0]


def test_pai_archives_as_downloaded(tmp_path: Path) -> None:
    """The release is downloaded as pai_<table>_table.tar.gz: alone they are named for
    extraction; extracted beside them, the CSV files are read and the archives left alone."""
    import tarfile

    d = tmp_path / "pai"
    d.mkdir()
    src = tmp_path / "src"
    src.mkdir()
    rows = {"job": [("J1", "i1", "u", "Terminated", "0", "10")],
            "task": [("J1", "worker", "1", "Terminated", "0", "10", "600", "29", "100", "T4")]}
    for name, table in rows.items():
        csv_path = src / f"pai_{name}_table.csv"
        with csv_path.open("w", newline="") as f:
            csv.writer(f).writerows(table)
        with tarfile.open(d / f"pai_{name}_table.tar.gz", "w:gz") as tar:
            tar.add(csv_path, arcname=csv_path.name)
    with pytest.raises(TraincastError, match="an archive") as exc:
        ingest(d, format="pai-2020", db=tmp_path / "s.duckdb")
    assert "tar -xf" in exc.value.hint
    with pytest.raises(TraincastError, match="an archive"):
        ingest(d / "pai_job_table.tar.gz", db=tmp_path / "s.duckdb")
    for name in rows:
        (d / f"pai_{name}_table.csv").write_bytes((src / f"pai_{name}_table.csv").read_bytes())
    report = ingest(d, format="pai-2020", db=tmp_path / "s.duckdb")
    assert report["jobs"] == 1 and load_jobs(tmp_path / "s.duckdb")["n_gpus"].to_pylist() == [1.0]


def test_pai_jobs_without_a_job_name_are_not_duplicates(tmp_path: Path) -> None:
    """Duplicates are found by job_name: two job rows without one (told apart by inst_id) are
    two jobs, not a job and its duplicate."""
    d = tmp_path / "pai"
    d.mkdir()
    with (d / "pai_job_table.csv").open("w", newline="") as f:
        csv.writer(f).writerows([("", "i1", "u", "Terminated", "0", "10"),
                                 ("", "i2", "u", "Terminated", "0", "10"),
                                 ("J3", "i3", "u", "Terminated", "0", "10"),
                                 ("J3", "i4", "u", "Terminated", "0", "10")])
    with (d / "pai_task_table.csv").open("w", newline="") as f:
        csv.writer(f).writerow(("J3", "worker", "1", "Terminated", "0", "10", "600", "29",
                                "100", "V100"))
    report = ingest(d, format="pai-2020", db=tmp_path / "s.duckdb")
    # by hand: i1, i2 and i3 are jobs; row 4 repeats J3 (reported by its job_name)
    assert report["jobs"] == 3 and report["bad_rows"] == 1
    assert [(e["row"], e["field"], e["value"]) for e in report["errors"]] == \
        [(4, "job_name", "J3 (a duplicate of row 3)")]
    assert sorted(_by_id(load_jobs(tmp_path / "s.duckdb"))) == ["i1", "i2", "i3"]


def test_strict_reads_again_a_kept_file_with_bad_rows(tmp_path: Path) -> None:
    """An unchanged file is kept without reading it, unless --strict meets the bad rows its
    last ingest skipped: then it fails as on the first read, and the store keeps its jobs."""
    path = tmp_path / "t.csv"
    path.write_text("job_id,n_gpus\na,1\nb,x\nc,2\n")
    db = tmp_path / "s.duckdb"
    assert ingest(path, db=db)["jobs"] == 2
    assert ingest(path, db=db)["sources"][0]["unchanged"]
    with pytest.raises(TraincastError, match="row 2: field n_gpus"):
        ingest(path, db=db, strict=True)
    assert [j["job_id"] for j in load_jobs(db).to_pylist()] == ["a", "c"]
    assert [s["bad_rows"] for s in sources(db)] == [1]


def test_a_folder_is_read_once_per_table(tmp_path: Path) -> None:
    """Hidden files are left out, X.gz beside X is the same table, a file given with its
    folder (or twice) is read once; an Alibaba 2023 folder with two pod lists (alternative
    workloads of one cluster) is refused, naming them."""
    d = tmp_path / "ef"
    d.mkdir()
    body = "job_id,submission_time,duration,num_gpu\na,0,10,1\nb,5,20,2\n"
    (d / "c.csv").write_text(body)
    with gzip.open(d / "c.csv.gz", "wt") as f:
        f.write(body)
    (d / ".c.csv").write_text("not,a,trace\n")
    (d / "._c.csv").write_bytes(b"\x00\x05\x16\x07")  # a macOS resource-fork copy
    report = ingest([d, d / "c.csv", d / "c.csv"], format="elasticflow",
                    db=tmp_path / "s.duckdb")
    assert [Path(f).name for s in report["sources"] for f in s["files"]] == ["c.csv"]
    assert report["jobs"] == 2

    ali = tmp_path / "ali"
    ali.mkdir()
    for name in ("openb_pod_list_default.csv", "openb_pod_list_multigpu50.csv"):
        (ali / name).write_text("name,num_gpu,gpu_milli,gpu_spec,pod_phase,creation_time,"
                                "deletion_time,scheduled_time\np0,1,1000,,Succeeded,0,9,1\n")
    with pytest.raises(TraincastError, match=r"2 pod lists in this folder \(openb_pod_list_"
                       r"default\.csv, openb_pod_list_multigpu50\.csv\)"):
        ingest(ali, format="alibaba-2023", db=tmp_path / "a.duckdb")
    assert not (tmp_path / "a.duckdb").exists()


def test_an_output_the_next_run_would_read_as_the_trace_is_refused(tmp_path: Path) -> None:
    from traincast.analysis.study import study

    d = tmp_path / "traces"
    d.mkdir()
    (d / "a.csv").write_text("job_id,n_gpus\na,1\n")
    with pytest.raises(TraincastError, match="would be in the trace folder"):
        ingest(d, db=tmp_path / "s.duckdb", parquet=d / "all.parquet")
    assert not (d / "all.parquet").exists() and not (tmp_path / "s.duckdb").exists()
    (d / "sub").mkdir()  # a subfolder is not read as the trace: its files may be written
    ingest(d, db=tmp_path / "s.duckdb", parquet=d / "sub" / "all.parquet")
    assert (d / "sub" / "all.parquet").exists()
    with pytest.raises(TraincastError, match="is a trace folder of this study"):
        study(d, d, report=False)
    with pytest.raises(TraincastError, match="no trace file given"):
        study([], tmp_path / "out", report=False)
    assert sorted(f.name for f in d.iterdir()) == ["a.csv", "sub"]
    # a trace file named as a table the study writes, in the study's folder
    (d / "sub" / "all.parquet").rename(d / "jobs.parquet")
    before = (d / "jobs.parquet").read_bytes()
    with pytest.raises(TraincastError, match="would overwrite its trace"):
        study(d / "jobs.parquet", d, report=False)
    assert (d / "jobs.parquet").read_bytes() == before


def test_an_analysis_output_in_a_trace_folder_is_refused_before_any_work(tc, tmp_path) -> None:
    """whatif -o into the trace folder would overwrite a trace file, or add one the next run
    reads: refused, naming the flag; a store file there is no trace file (kept)."""
    d = tmp_path / "tf"
    d.mkdir()
    for name in ("a.csv", "b.csv"):
        (d / name).write_text("job_id,n_gpus,workload\nj,1,resnet50\n")
    for out in ("b.csv", "new.csv"):
        r = tc("whatif", str(d), "--scenario", "eth100", "--jobs", "-o", str(d / out),
               "--db", str(tmp_path / "w.duckdb"))
        assert r.returncode == 2 and f"-o {d / out}: is in the trace folder" in r.stderr
    assert (d / "b.csv").read_text().startswith("job_id,n_gpus") and not (d / "new.csv").exists()
    r = tc("ingest", str(d), "--db", str(d / "s.duckdb"))
    assert r.returncode == 0, r.stderr
