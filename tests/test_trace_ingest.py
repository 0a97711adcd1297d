"""Ingesting real and malformed traces into the DuckDB store (expected numbers from the stdlib)."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from traincast.errors import TraincastError
from traincast.trace import jobs_from_args, parse_mapping
from traincast.trace.schema import ALL_COLUMNS
from traincast.trace.store import export_parquet, ingest, load_jobs, sources


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _count(db: Path) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM jobs").fetchone()[0]
    finally:
        con.close()


def test_alibaba_2023_pod_list(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "alibaba-gpu-v2023" / "openb_pod_list_gpuspec33.csv"
    rows = _rows(path)
    db = tmp_path / "s.duckdb"
    report = ingest(path, format="alibaba-2023", db=db)
    assert len(rows) == 8152
    assert report["jobs"] == len(rows) and report["bad_rows"] == 0
    jobs = load_jobs(db)
    assert jobs.num_rows == 8152
    assert jobs.column_names == list(ALL_COLUMNS)
    # GPU count per pod: num_gpu whole GPUs, each used at gpu_milli / 1000
    expected = Counter(round(int(r["num_gpu"]) * int(r["gpu_milli"]) / 1000, 6) for r in rows)
    got = Counter(round(x, 6) for x in jobs["n_gpus"].to_pylist())
    assert got == expected
    # whole-GPU distribution of the file (num_gpu column)
    whole = Counter(int(r["num_gpu"]) for r in rows)
    assert sum(1 for x in jobs["n_gpus"].to_pylist() if x > 1) == \
        sum(v for k, v in whole.items() if k > 1)
    assert sum(jobs["zero_gpu"].to_pylist()) == whole[0]
    end = max(int(r["deletion_time"]) for r in rows)
    censored = sum(1 for r in rows if r["pod_phase"] in ("Running", "Pending")
                   or int(r["deletion_time"]) >= end)
    assert sum(jobs["censored"].to_pylist()) == censored
    fractional = sum(1 for r in rows if int(r["num_gpu"]) * int(r["gpu_milli"]) % 1000)
    assert sum(jobs["fractional_gpu"].to_pylist()) == fractional
    assert all(jobs["arch_inferred"].to_pylist())


def test_elasticflow_cluster04(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "elasticflow" / "cluster04.csv"
    rows = _rows(path)
    jobs = jobs_from_args(path, tmp_path / "s.duckdb", "elasticflow", None)
    assert jobs.num_rows == len(rows)
    assert Counter(int(x) for x in jobs["n_gpus"].to_pylist()) == \
        Counter(int(r["num_gpu"]) for r in rows)
    durations = [e - s for s, e in zip(jobs["start_time_s"].to_pylist(),
                                       jobs["end_time_s"].to_pylist(), strict=True)]
    assert sum(durations) == sum(int(r["duration"]) for r in rows)
    # architecture inferred by GPU count with 8-GPU nodes (no GPU type in this trace)
    arch = Counter(jobs["architecture"].to_pylist())
    n = Counter(int(r["num_gpu"]) for r in rows)
    assert arch["1w1g"] == n[1]
    assert arch["allreduce-local"] == sum(v for k, v in n.items() if 1 < k <= 8)
    assert arch["allreduce-cluster"] == sum(v for k, v in n.items() if k > 8)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


GOOD = "job_id,submission_time,duration,num_gpu\na,0,10,1\nb,5,20,2\n"


def test_missing_column_names_adapter_file_and_columns(tmp_path: Path) -> None:
    bad = _write(tmp_path / "bad.csv", "job_id,submission_time,num_gpu\na,0,1\n")
    with pytest.raises(TraincastError) as exc:
        ingest(bad, format="elasticflow", db=tmp_path / "s.duckdb")
    msg = str(exc.value)
    assert "elasticflow" in msg and str(bad) in msg and "duration" in msg
    assert "job_id, submission_time, duration, num_gpu" in msg
    assert not (tmp_path / "s.duckdb").exists()  # a new store is not left half-made


def test_bad_rows_reported_and_skipped(tmp_path: Path) -> None:
    bad = _write(tmp_path / "bad.csv", "job_id,submission_time,duration,num_gpu\n"
                 "a,0,10,1\nb,5,20,two\nc,7,30,-4\nd,x,30,1\ne,9,40,8\n")
    report = ingest(bad, format="elasticflow", db=tmp_path / "s.duckdb")
    assert report["jobs"] == 2 and report["bad_rows"] == 3
    errs = [(e["row"], e["field"], e["value"]) for e in report["errors"]]
    assert errs == [(2, "n_gpus", "two"), (3, "n_gpus", "-4"), (4, "submit_time_s", "x")]
    assert all(e["file"] == str(bad) for e in report["errors"])
    assert load_jobs(tmp_path / "s.duckdb")["job_id"].to_pylist() == ["a", "e"]


def test_strict_failure_keeps_store_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest(_write(tmp_path / "good.csv", GOOD), format="elasticflow", db=db)
    before = _count(db)
    assert before == 2
    bad = _write(tmp_path / "bad.csv", "job_id,submission_time,duration,num_gpu\n"
                 "a,0,10,1\nb,5,20,two\n")
    with pytest.raises(TraincastError) as exc:
        ingest(bad, format="elasticflow", db=db, strict=True)
    assert "row 2" in str(exc.value) and "n_gpus" in str(exc.value)
    assert _count(db) == before
    assert len(sources(db)) == 1
    # a failed ingest of several files stores none of them
    with pytest.raises(TraincastError):
        ingest([_write(tmp_path / "ok2.csv", GOOD), bad], format="elasticflow", db=db,
               strict=True)
    assert _count(db) == before


def test_reingest_is_idempotent_and_replaces_changed_files(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    path = _write(tmp_path / "t.csv", GOOD)
    ingest(path, format="elasticflow", db=db)
    again = ingest(path, format="elasticflow", db=db)
    assert again["sources"][0]["unchanged"] and _count(db) == 2
    _write(path, GOOD + "c,9,5,4\n")
    ingest(path, format="elasticflow", db=db)
    assert _count(db) == 3


def test_canonical_csv_map_and_unknown_architecture(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.csv",
                  "id,start_time_s,end_time_s,architecture,gpus,gpu_type,status\n"
                  "j1,0,100,ps-worker,4,V100,Terminated\n"
                  "j2,0,50,ring-of-fire,2,V100,Terminated\n"
                  "j3,10,,,16,T4,Running\n")
    db = tmp_path / "s.duckdb"
    report = ingest(path, db=db, mapping=parse_mapping(["job_id=id", "n_gpus=gpus"]))
    assert report["bad_rows"] == 1
    assert report["errors"][0]["field"] == "architecture"
    assert report["errors"][0]["value"] == "ring-of-fire" and report["errors"][0]["row"] == 2
    jobs = load_jobs(db).to_pylist()
    assert [j["job_id"] for j in jobs] == ["j1", "j3"]
    assert jobs[0]["architecture"] == "ps-worker" and not jobs[0]["arch_inferred"]
    # T4 nodes have 2 GPUs (catalog pai-t4): 16 GPUs span nodes
    assert jobs[1]["architecture"] == "allreduce-cluster" and jobs[1]["arch_inferred"]
    assert jobs[1]["censored"] and not jobs[0]["censored"]


def test_csv_missing_required_column(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.csv", "job_id,start_time_s\nj1,0\n")
    with pytest.raises(TraincastError, match=r"csv: .*c\.csv: missing column\(s\) n_gpus"):
        ingest(path, db=tmp_path / "s.duckdb")
    with pytest.raises(TraincastError, match="COL=FIELD"):
        parse_mapping(["n_gpus"])


def test_parquet_round_trip(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest(_write(tmp_path / "t.csv", GOOD), format="elasticflow", db=db)
    out = export_parquet(tmp_path / "jobs.parquet", db)
    table = pq.read_table(out)
    assert table.num_rows == 2
    # the exported file is a valid canonical trace as it is
    canon = table.select([c for c in table.column_names if c != "source_id"])
    pq.write_table(canon, tmp_path / "canon.parquet")
    again = jobs_from_args(tmp_path / "canon.parquet", tmp_path / "t2.duckdb", "csv", None)
    assert again["n_gpus"].to_pylist() == [1.0, 2.0]
    assert again["end_time_s"].to_pylist() == [10.0, 25.0]


def test_philly_json(tmp_path: Path) -> None:
    log = [
        {"status": "Pass", "vc": "vc1", "jobid": "application_1", "user": "u1",
         "submitted_time": "2017-10-03 14:13:52",
         "attempts": [{"start_time": "2017-10-03 14:14:00", "end_time": "2017-10-03 14:20:00",
                       "detail": [{"ip": "m1", "gpus": ["gpu0"]}]},
                      {"start_time": "2017-10-03 15:00:00", "end_time": "2017-10-03 16:00:00",
                       "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3"]},
                                  {"ip": "m2", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3"]},
                                  {"ip": "m3", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3"]}]}]},
        {"status": "Running", "vc": "vc1", "jobid": "application_2", "user": "u2",
         "submitted_time": "2017-10-03 14:13:55",
         "attempts": [{"start_time": "2017-10-03 14:14:10", "end_time": "None",
                       "detail": [{"ip": "m4", "gpus": ["gpu0", "gpu1"]}]}]},
        {"status": "Killed", "vc": "vc2", "jobid": "application_3", "user": "u1",
         "submitted_time": "2017-10-03 14:15:00", "attempts": []},
    ]
    path = _write(tmp_path / "cluster_job_log", json.dumps(log))
    jobs = jobs_from_args(path, tmp_path / "s.duckdb", "philly", None).to_pylist()
    assert [j["job_id"] for j in jobs] == ["application_1", "application_2", "application_3"]
    a, b, c = jobs
    assert a["n_gpus"] == 12 and a["gpus_per_worker"] == 4
    assert a["end_time_s"] - a["start_time_s"] == (16 * 60 - (14 * 60 + 14)) * 60
    assert a["start_time_s"] - a["submit_time_s"] == 8
    assert a["architecture"] == "allreduce-cluster" and not a["censored"]  # 12 > 8 GPUs
    assert b["censored"] and b["end_time_s"] is None and b["architecture"] == "allreduce-local"
    assert c["n_gpus"] is None and c["architecture"] is None


def test_helios_csv(tmp_path: Path) -> None:
    path = _write(tmp_path / "cluster_log.csv",
                  "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,"
                  "start_time,end_time,duration,queue\n"
                  "1,u1,vcA,j,16,64,2,COMPLETED,2020-04-01 00:00:00,2020-04-01 00:01:00,"
                  "2020-04-01 01:01:00,3600,60\n"
                  "2,u2,vcA,j,0,4,1,FAILED,2020-04-01 00:00:05,2020-04-01 00:00:05,"
                  "2020-04-01 00:00:15,10,0\n"
                  "3,u2,vcA,j,1,4,1,RUNNING,2020-04-01 00:00:05,2020-04-01 00:00:05,,,0\n"
                  "4,u2,vcA,j,1,4,1,COMPLETED,yesterday,2020-04-01 00:00:05,"
                  "2020-04-01 00:00:15,10,0\n")
    report = ingest(path, format="helios", db=tmp_path / "s.duckdb")
    assert report["bad_rows"] == 1
    assert report["errors"][0]["row"] == 4 and report["errors"][0]["field"] == "submit_time_s"
    jobs = load_jobs(tmp_path / "s.duckdb").to_pylist()
    assert jobs[0]["end_time_s"] - jobs[0]["start_time_s"] == 3600
    assert jobs[0]["gpus_per_worker"] == 8 and jobs[0]["architecture"] == "allreduce-cluster"
    assert jobs[1]["zero_gpu"] and jobs[2]["censored"] and not jobs[0]["censored"]


def test_unknown_format_and_missing_store(tmp_path: Path) -> None:
    with pytest.raises(TraincastError, match="unknown trace format"):
        ingest(_write(tmp_path / "t.csv", GOOD), format="slurm", db=tmp_path / "s.duckdb")
    with pytest.raises(TraincastError, match="no job store"):
        load_jobs(tmp_path / "none.duckdb")
    assert isinstance(jobs_from_args(_write(tmp_path / "t.csv", GOOD), tmp_path / "s.duckdb",
                                     "elasticflow", None), pa.Table)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_bad_numbers_are_bad_rows_in_csv_and_parquet(tmp_path: Path, suffix: str) -> None:
    nan, inf = float("nan"), float("inf")
    table = pa.table({
        "job_id": ["a", "b", "c", "d", "e", "f", "g", "h", "i"],
        "n_gpus": ["4", "2", "two", "1", "1", "-1", "1", "1", "8"],  # GPU counts as text
        "n_workers": [4.0, nan, 1.0, 2.5, 1e30, 1.0, 1.0, 1.0, 2.0],  # an integer column
        "n_ps": [1, 0, 0, 0, 0, 0, -3, 0, 1],
        "start_time_s": [0.0, 5.0, 0.0, 0.0, 0.0, 0.0, 0.0, inf, 7.0],
        "end_time_s": [10.0, 9.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, nan],
    })
    path = tmp_path / f"t{suffix}"
    if suffix == ".csv":
        pacsv.write_csv(table, path)
    else:
        pq.write_table(table, path)
    db = tmp_path / "s.duckdb"
    report = ingest(path, db=db)
    # NaN is a missing value (b's workers, i's end); text that is no number, a fraction or an
    # out-of-range number in an integer column, a negative count and an infinite time are not
    errs = [(e["file"], e["row"], e["field"]) for e in report["errors"]]
    assert errs == [(str(path), 3, "n_gpus"), (str(path), 4, "n_workers"),
                    (str(path), 5, "n_workers"), (str(path), 6, "n_gpus"),
                    (str(path), 7, "n_ps"), (str(path), 8, "start_time_s")]
    assert [e["value"] for e in report["errors"]][:2] == ["two", "2.5"]
    assert report["bad_rows"] == 6 and report["jobs"] == 3
    jobs = load_jobs(db).to_pylist()
    assert [j["job_id"] for j in jobs] == ["a", "b", "i"]
    assert [j["n_gpus"] for j in jobs] == [4.0, 2.0, 8.0]
    assert [j["n_workers"] for j in jobs] == [4, None, 2]
    assert jobs[2]["end_time_s"] is None and jobs[2]["censored"]  # started, no end

    with pytest.raises(TraincastError) as exc:
        ingest(path, db=tmp_path / "strict.duckdb", strict=True)
    assert f"{path}: row 4: field n_workers: bad value '2.5'" in str(exc.value)
    assert not (tmp_path / "strict.duckdb").exists()
