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
from traincast.hardware.catalog import load_catalog
from traincast.trace import Store, infer_architecture, parse_mapping, read_trace
from traincast.trace.schema import ADDED_COLUMNS, ALL_COLUMNS, SQL_TYPE
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
    # the node list beside it: the GPU model most of the cluster's GPUs are, for the pods
    # whose gpu_spec names none (counted from the two files by hand)
    nodes = _rows(shared_data / "alibaba-gpu-v2023" / "openb_node_list_gpu_node.csv")
    by_model = Counter()
    for r in nodes:
        by_model[r["model"]] += int(r["gpu"])
    model, most = by_model.most_common(1)[0]
    [note] = [n for n in report["notes"] if "gpu_spec names no model" in n["note"]]
    assert note["count"] == sum(1 for r in rows if not r["gpu_spec"] and int(r["num_gpu"]) and
                                int(r["gpu_milli"]))
    assert f"holds mostly {model} GPUs ({most:,} of {sum(by_model.values()):,}; priced as " \
        "A10, the catalog's name for it)" in note["note"]
    [qos] = [n for n in report["notes"] if "QoS class LS" in n["note"]]
    assert qos["count"] == sum(1 for r in rows if r["qos"] == "LS")
    # under --map: both notes where the mapping leaves their columns as the release's; the
    # GPU-model note left out where gpu_type is mapped (its count reads gpu_spec)
    from traincast.trace import parse_mapping

    for m, gpu_note in ((["status=pod_phase"], True), (["gpu_type=gpu_spec"], False)):
        notes = ingest(path, format="alibaba-2023", db=tmp_path / f"{m[0]}.duckdb",
                       mapping=parse_mapping(m))["notes"]
        assert [n["count"] for n in notes if "QoS class LS" in n["note"]] == [qos["count"]]
        assert [n["count"] for n in notes if "gpu_spec names no model" in n["note"]] == \
            ([note["count"]] if gpu_note else [])
    # no architecture in the pod list: inferred for every pod with GPUs, none for CPU pods
    assert jobs["arch_inferred"].to_pylist() == [x > 0 for x in jobs["n_gpus"].to_pylist()]
    assert set(jobs["architecture"].to_pylist()) == {None}  # the trace gives none
    # a pod runs on one node: all its GPUs are on that node (NULL for CPU pods)
    gpn = jobs["gpus_per_node"].to_pylist()
    assert all(g == n if n > 0 else g is None
               for g, n in zip(gpn, jobs["n_gpus"].to_pylist(), strict=True))
    assert set(jobs["workers_per_node"].to_pylist()) == {None}


def test_the_alibaba_2023_node_list_is_named_not_stored(shared_data: Path,
                                                       tmp_path: Path) -> None:
    # the release's node list holds machines, not jobs: refused as such, with its own format
    # and with the default one mapped onto it (its machines would be stored as jobs)
    path = shared_data / "alibaba-gpu-v2023" / "openb_node_list_gpu_node.csv"
    db = tmp_path / "t.duckdb"
    for fmt, mapping in (("alibaba-2023", None),
                         ("csv", parse_mapping(["job_id=sn", "n_gpus=gpu", "gpu_type=model"]))):
        with pytest.raises(TraincastError, match="node list .* not a list of jobs") as err:
            ingest(path, format=fmt, db=db, mapping=mapping)
        assert "openb_pod_list_" in (err.value.hint or "")
    assert not db.exists() or _count(db) == 0


def test_elasticflow_cluster04(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "elasticflow" / "cluster04.csv"
    rows = _rows(path)
    stored = read_trace(path, "elasticflow", tmp_path / "s.duckdb")
    assert set(stored["architecture"].to_pylist()) == {None} and all(stored["arch_inferred"])
    for col in ("gpus_per_worker", "gpus_per_node", "workers_per_node"):
        assert set(stored[col].to_pylist()) == {None}, col  # the trace does not say
    jobs = infer_architecture(stored, load_catalog())
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
    # a time that does not parse says what it is not (seconds, a date-time)
    assert errs == [(2, "num_gpu", "two"), (3, "num_gpu", "-4"), (
        4, "submission_time", "x (not seconds nor a date-time such as 2024-01-02 10:00:00 or "
                              "2024-01-02T10:00:00+08:00)")]
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
    assert "row 2" in str(exc.value) and "num_gpu" in str(exc.value)
    assert _count(db) == before
    assert len(sources(db)) == 1
    # a failed ingest of several files stores none of them, and names the bad rows of each
    bad2 = _write(tmp_path / "bad2.csv", "job_id,submission_time,duration,num_gpu\n"
                  "c,x,10,1\n")
    with pytest.raises(TraincastError) as exc:
        ingest([_write(tmp_path / "ok2.csv", GOOD), bad, bad2], format="elasticflow", db=db,
               strict=True)
    said = str(exc.value)
    assert said.startswith("elasticflow: 2 bad row(s) in 2 files; nothing was stored")
    assert f"{bad}: row 2: field num_gpu" in said
    assert f"{bad2}: row 1: field submission_time" in said
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
    stored = load_jobs(db)
    jobs = infer_architecture(stored, load_catalog()).to_pylist()
    assert [j["job_id"] for j in jobs] == ["j1", "j3"]
    assert jobs[0]["architecture"] == "ps-worker" and not jobs[0]["arch_inferred"]
    # the store keeps the trace's NULL; T4 nodes have 2 GPUs (catalog pai-t4): 16 GPUs span nodes
    assert stored["architecture"].to_pylist()[1] is None
    assert jobs[1]["architecture"] == "allreduce-cluster" and jobs[1]["arch_inferred"]
    assert jobs[1]["censored"] and not jobs[0]["censored"]


def test_csv_missing_required_column(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.csv", "job_id,start_time_s\nj1,0\n")
    with pytest.raises(TraincastError, match=r"csv: .*c\.csv: missing column\(s\) n_gpus"):
        ingest(path, db=tmp_path / "s.duckdb")
    with pytest.raises(TraincastError, match="COL=FIELD"):
        parse_mapping(["n_gpus"])


def test_a_file_in_another_format_names_its_columns_and_that_format(tmp_path: Path) -> None:
    # ElasticFlow's columns given as the default csv: the error shows the file's columns, and
    # the hint the format whose required columns they are
    path = _write(tmp_path / "ef.csv", "job_id,submission_time,duration,num_gpu\nj1,0,60,2\n")
    with pytest.raises(TraincastError, match=r"missing column\(s\) n_gpus \(the file's columns: "
                       r"job_id, submission_time, duration, num_gpu\)") as err:
        ingest(path, db=tmp_path / "s.duckdb")
    assert err.value.hint == "the file has the columns of --format elasticflow"
    # a headerless PAI 2020 table read as csv: its first row is taken for the header, so only
    # its name tells the format
    pai = _write(tmp_path / "pai_group_tag_table.csv", "inst0000,u0,V100M32,grp,bert\n")
    with pytest.raises(TraincastError, match="missing column") as err:
        ingest(pai, db=tmp_path / "p.duckdb")
    assert err.value.hint.startswith("the file is named as a table of --format pai-2020, "
                                     "whose files have no header row")
    # none fits: which --map gives each missing column, and which none gives
    other = _write(tmp_path / "o.csv", "sn,gpu,model\nn1,8,G2\n")
    with pytest.raises(TraincastError, match="missing column") as err:
        ingest(other, format="elasticflow", db=tmp_path / "t.duckdb")
    assert err.value.hint == (
        "the file's column for each: --map job_id=FIELD for job_id, --map submit_time_s=FIELD "
        "for submission_time, --map n_gpus=FIELD for num_gpu; the file needs a column named "
        "duration (rename the file's own; no --map gives it)")


def test_map_names_an_adapters_column_the_file_names_otherwise(tmp_path: Path) -> None:
    # ElasticFlow with its submission time and GPUs under other names: --map of the canonical
    # column reads the file's column as the adapter's, with every rule the adapter has for it
    # (start = submission, end = submission + duration; bad values named by the file's column)
    path = _write(tmp_path / "ef.csv", "id,submit_time,duration,gpus\n"
                  "a,10,100,2\nb,xyz,100,2\nc,5,50,1\n")
    db = tmp_path / "s.duckdb"
    report = ingest(path, format="elasticflow", db=db,
                    mapping={"job_id": "id", "submit_time_s": "submit_time", "n_gpus": "gpus"})
    assert report["bad_rows"] == 1
    assert (report["errors"][0]["row"], report["errors"][0]["field"]) == (2, "submit_time")
    jobs = {j["job_id"]: j for j in load_jobs(db).to_pylist()}
    assert set(jobs) == {"a", "c"}
    assert (jobs["a"]["start_time_s"], jobs["a"]["end_time_s"], jobs["a"]["n_gpus"]) == \
        (10.0, 110.0, 2.0)
    with pytest.raises(TraincastError, match="missing column") as err:
        ingest(path, format="elasticflow", db=tmp_path / "t.duckdb",
               mapping={"job_id": "id", "submit_time_s": "nope", "n_gpus": "gpus"})
    assert err.value.hint == "--map names 'nope', a column the file does not have"


def test_parquet_round_trip(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest(_write(tmp_path / "t.csv", GOOD), format="elasticflow", db=db)
    out = export_parquet(tmp_path / "jobs.parquet", db)
    table = pq.read_table(out)
    assert table.num_rows == 2
    # the exported file is a valid canonical trace as it is
    canon = table.select([c for c in table.column_names if c != "source_id"])
    pq.write_table(canon, tmp_path / "canon.parquet")
    again = read_trace(tmp_path / "canon.parquet", "csv", tmp_path / "t2.duckdb")
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
    stored = read_trace(path, "philly", tmp_path / "s.duckdb")
    jobs = infer_architecture(stored, load_catalog()).to_pylist()
    assert [j["job_id"] for j in jobs] == ["application_1", "application_2", "application_3"]
    a, b, c = jobs
    # the last attempt: 3 machines x 4 GPUs; the log lists machines, not workers
    assert a["n_gpus"] == 12 and a["gpus_per_node"] == 4 and b["gpus_per_node"] == 2
    assert a["gpus_per_worker"] is None and a["workers_per_node"] is None
    assert a["end_time_s"] - a["start_time_s"] == (16 * 60 - (14 * 60 + 14)) * 60
    assert a["start_time_s"] - a["submit_time_s"] == 8
    assert a["architecture"] == "allreduce-cluster" and not a["censored"]  # 12 > 4 per node
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
    assert report["errors"][0]["row"] == 4 and report["errors"][0]["field"] == "submit_time"
    jobs = infer_architecture(load_jobs(tmp_path / "s.duckdb")).to_pylist()
    assert jobs[0]["end_time_s"] - jobs[0]["start_time_s"] == 3600
    # 16 GPUs on node_num 2: 8 per node; the trace counts nodes, not workers
    assert jobs[0]["gpus_per_node"] == 8 and jobs[0]["gpus_per_worker"] is None
    assert jobs[0]["architecture"] == "allreduce-cluster" and jobs[2]["gpus_per_node"] == 1
    assert jobs[1]["zero_gpu"] and jobs[2]["censored"] and not jobs[0]["censored"]


def test_an_archive_under_a_csv_name_is_said_to_be_one(tmp_path: Path) -> None:
    import bz2
    import lzma
    import zipfile

    text = b"job_id,n_gpus\nj1,1\n"
    zipfile.ZipFile(tmp_path / "z.csv", "w").writestr("a.csv", text)
    (tmp_path / "x.csv").write_bytes(lzma.compress(text))
    (tmp_path / "b.csv").write_bytes(bz2.compress(text))
    for name, kind in (("z", "a zip archive"), ("x", "an xz archive"), ("b", "a bzip2 archive")):
        with pytest.raises(TraincastError, match=rf"{name}\.csv: cannot read the file: it is "
                                                 rf"{kind}, not text") as err:
            ingest(tmp_path / f"{name}.csv", db=tmp_path / "s.duckdb")
        assert err.value.hint.startswith("unpack it first")
    import gzip

    (tmp_path / "g.csv").write_bytes(gzip.compress(text))
    with pytest.raises(TraincastError, match=r"g\.csv: cannot read the file: it is gzip data, "
                                             r"not text") as err:
        ingest(tmp_path / "g.csv", db=tmp_path / "s.duckdb")
    assert err.value.hint == "name it .csv.gz (gzip is read by its name)"
    assert not (tmp_path / "s.duckdb").exists()


def test_a_file_without_read_permission_is_said_so(tmp_path: Path, monkeypatch) -> None:
    # (the test may run as root, who reads any file: the read is made to fail as the OS would
    # fail it, where ingest reads the file's columns)
    import traincast.trace.adapters.base as base

    path = _write(tmp_path / "b.csv", GOOD)

    def denied(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(base, "source_columns", denied)
    with pytest.raises(TraincastError) as err:
        ingest(path, format="elasticflow", db=tmp_path / "s.duckdb")
    assert str(err.value) == f"elasticflow: {path}: cannot read the file: permission denied"
    assert err.value.hint.startswith("give the user running traincast read access to it")
    assert not (tmp_path / "s.duckdb").exists()


def test_unknown_format_and_missing_store(tmp_path: Path) -> None:
    with pytest.raises(TraincastError, match="unknown trace format"):
        ingest(_write(tmp_path / "t.csv", GOOD), format="lsf", db=tmp_path / "s.duckdb")
    with pytest.raises(TraincastError, match="no job store") as err:
        load_jobs(tmp_path / "none.duckdb")
    assert "study" not in err.value.hint
    # a study's own store beside it (traincast study -o DIR writes DIR/jobs.duckdb): named
    (tmp_path / "my-study").mkdir()
    (tmp_path / "my-study" / "jobs.duckdb").write_bytes(b"")
    with pytest.raises(TraincastError, match="no job store") as err:
        load_jobs(tmp_path / "none.duckdb")
    assert err.value.hint.endswith(f"a study's own store: --db {tmp_path}/my-study/jobs.duckdb")
    assert isinstance(read_trace(_write(tmp_path / "t.csv", GOOD), "elasticflow",
                                 tmp_path / "s.duckdb"), pa.Table)


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


def _old_store(path: Path, source: Path) -> None:
    """A store as written before the columns of ADDED_COLUMNS existed, with one job."""
    old = [c for c in ALL_COLUMNS if c not in ADDED_COLUMNS]
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE jobs ({', '.join(f'{c} {SQL_TYPE[c]}' for c in old)})")
    con.execute("CREATE TABLE sources (source_id INTEGER PRIMARY KEY, format VARCHAR, "
                "files VARCHAR, mapping VARCHAR, fingerprint VARCHAR, rows BIGINT, "
                "bad_rows BIGINT, ingested_at TIMESTAMP)")
    values = {"job_id": "'old'", "n_gpus": "4", "architecture": "'allreduce-local'",
              "source_id": "1", **dict.fromkeys(("censored", "zero_gpu", "fractional_gpu",
                                                 "arch_inferred"), "FALSE")}
    con.execute(f"INSERT INTO jobs ({', '.join(values)}) VALUES ({', '.join(values.values())})")
    con.execute("INSERT INTO sources VALUES (1, 'elasticflow', ?, '{}', 'x', 1, 0, now())",
                [json.dumps([str(source)])])
    con.close()


def test_old_store_file_opens_and_gains_the_new_columns(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    _old_store(db, tmp_path / "gone.csv")
    # read-only: the new columns read NULL, in schema order
    jobs = load_jobs(db)
    assert jobs.column_names == list(ALL_COLUMNS) and jobs.num_rows == 1
    assert all(jobs[c].to_pylist() == [None] for c in ADDED_COLUMNS)
    # writing adds the columns; the old job keeps NULL, a new job stores the trace's value
    canon = _write(tmp_path / "c.csv", "job_id,n_gpus,gpus_per_node,workers_per_node\n"
                   "new,16,8,2\n")
    with Store(db) as store:
        report = store.ingest(canon)
        assert report["jobs"] == 1 and [s["source_id"] for s in report["sources"]] == [2]
        rows = {j["job_id"]: j for j in store.jobs().to_pylist()}
        assert len(store.sources()) == 2
    assert rows["old"]["gpus_per_node"] is None and rows["old"]["n_gpus"] == 4
    assert (rows["new"]["gpus_per_node"], rows["new"]["workers_per_node"]) == (8.0, 2)
    con = duckdb.connect(str(db), read_only=True)
    have = {r[0] for r in con.execute("DESCRIBE jobs").fetchall()}
    con.close()
    assert set(ADDED_COLUMNS) <= have
    out = pq.read_table(export_parquet(tmp_path / "all.parquet", db))
    assert out.column_names == list(ALL_COLUMNS) and out.num_rows == 2


def test_read_trace_in_memory_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path / "t.csv", GOOD)
    jobs = read_trace(path, format="elasticflow")
    assert jobs["job_id"].to_pylist() == ["a", "b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]
    # a Store keeps only this trace's jobs apart from the others it holds
    with Store(tmp_path / "s.duckdb") as store:
        store.ingest(path, "elasticflow")
        store.ingest(_write(tmp_path / "u.csv", GOOD.replace("a,", "z,")), "elasticflow")
        assert store.jobs()["job_id"].to_pylist() == ["a", "b", "z", "b"]
    assert read_trace(path, "elasticflow", tmp_path / "s.duckdb").num_rows == 2
    with pytest.raises(TraincastError, match="no job store"):
        Store(tmp_path / "none.duckdb").jobs()
    with pytest.raises(TraincastError, match="t.csv: not a DuckDB file"):
        Store(path).jobs()  # a CSV is no DuckDB file


def test_bad_placement_value_names_file_row_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.csv", "job_id,n_gpus,gpus_per_node,workers_per_node\n"
                  "a,8,8,1\nb,16,8,2.5\nc,16,-8,2\n")
    report = ingest(path, db=tmp_path / "s.duckdb")
    errs = [(e["file"], e["row"], e["field"], e["value"]) for e in report["errors"]]
    assert errs == [(str(path), 2, "workers_per_node", "2.5"),
                    (str(path), 3, "gpus_per_node", "-8")]
    with pytest.raises(TraincastError) as exc:
        read_trace(path, strict=True)
    assert f"{path}: row 2: field workers_per_node: bad value '2.5'" in str(exc.value)


def test_infer_architecture_uses_the_trace_placement_first() -> None:
    jobs = pa.table({"architecture": pa.array([None, None, None, None, "ps-worker", None],
                                              pa.string()),
                     "n_gpus": [1.0, 16.0, 16.0, 4.0, 8.0, None],
                     "gpus_per_node": [None, 16.0, None, None, None, None],
                     "gpu_type": ["V100", "V100", "V100", "T4", "T4", None]})
    got = infer_architecture(jobs, load_catalog())["architecture"].to_pylist()
    # 16 GPUs on one 16-GPU node (the trace says) vs the V100's 8-GPU default node; T4 nodes
    # hold 2 GPUs; an architecture the trace gives is kept; no GPU count, no architecture
    assert got == ["1w1g", "allreduce-local", "allreduce-cluster", "allreduce-cluster",
                   "ps-worker", None]


def test_bad_rows_name_the_field_as_the_file_names_it(tmp_path: Path) -> None:
    """Under --map, a bad value is reported at the file's column (``gpus``, ``st``), and an
    end before its start names both of the file's columns; a canonical file keeps its names."""
    path = _write(tmp_path / "m.csv", "id,gpus,st,en\na,two,0,5\nb,1,10,5\nb,1,1,5\n")
    mapping = {"job_id": "id", "n_gpus": "gpus", "start_time_s": "st", "end_time_s": "en"}
    report = ingest(path, mapping=mapping, db=tmp_path / "m.duckdb")
    assert [(e["row"], e["field"], e["value"]) for e in report["errors"]] == [
        (1, "gpus", "two"), (2, "en", "5 (before st 10)")]
    same = _write(tmp_path / "c.csv", "job_id,n_gpus\na,two\na,1\na,2\n")
    assert [(e["row"], e["field"]) for e in ingest(same, db=tmp_path / "c.duckdb")["errors"]] \
        == [(1, "n_gpus"), (3, "job_id")]
    assert [(e["row"], e["field"]) for e in ingest(
        _write(tmp_path / "d.csv", "id,gpus\na,1\na,2\n"), mapping={"job_id": "id", "n_gpus":
                                                                   "gpus"},
        db=tmp_path / "d.duckdb")["errors"]] == [(2, "id")]


def test_an_analysis_of_a_file_and_its_gzip_copy_says_it_read_it_once(tmp_path: Path) -> None:
    import gzip

    from typer.testing import CliRunner

    from traincast.cli import app

    text = "job_id,n_gpus,start_time_s,end_time_s\na,1,0,60\nb,2,0,60\n"
    folder = tmp_path / "trace"
    folder.mkdir()
    (folder / "t.csv").write_text(text)
    (folder / "u.csv.gz").write_bytes(gzip.compress(text.encode()))
    res = CliRunner().invoke(app, ["characterize", str(folder), "--db",
                                   str(tmp_path / "s.duckdb"), "--json"])
    assert res.exit_code == 0, res.output
    assert "u.csv.gz: already ingested as" in res.stderr
    assert "counted once" in res.stderr
    assert '"jobs": 2' in res.stdout
