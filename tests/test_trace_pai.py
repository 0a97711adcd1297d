"""The pai-2020 adapter on small fixtures written to the release's (headerless) schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from traincast.errors import TraincastError
from traincast.trace.adapters.pai2020 import HEADERS
from traincast.trace.store import ingest, load_jobs

# job_name, inst_id, user, status, start_time, end_time
JOBS = [
    ("J1", "i1", "u1", "Terminated", "100", "1100"),
    ("J2", "i2", "u1", "Terminated", "200", "400"),
    ("J3", "i3", "u2", "Failed", "300", "360"),
    ("J4", "i4", "u2", "Terminated", "0", "50"),
    ("J5", "i5", "u3", "Terminated", "0", "10"),
    ("J6", "i6", "u3", "Terminated", "0", "10"),
    ("J7", "i7", "u3", "Running", "500", ""),
    ("J8", "i8", "u4", "Terminated", "0", "10"),
    ("J9", "i9", "u4", "Terminated", "0", "30"),
]
# job_name, task_name, inst_num, status, start, end, plan_cpu, plan_mem, plan_gpu, gpu_type
TASKS = [
    ("J1", "ps", "2", "Terminated", "", "", "600", "20", "", ""),
    ("J1", "worker", "8", "Terminated", "", "", "600", "20", "100", "V100"),
    ("J2", "worker", "2", "Terminated", "", "", "600", "20", "800", "V100M32"),
    ("J3", "worker", "2", "Terminated", "", "", "600", "20", "100", "V100"),
    ("J4", "tensorflow", "1", "Terminated", "", "", "600", "20", "400", "T4"),
    ("J5", "PyTorchWorker", "1", "Terminated", "", "", "600", "20", "50", "P100"),
    ("J6", "worker", "1", "Terminated", "", "", "600", "20", "", ""),
    ("J7", "worker", "1", "Running", "", "", "600", "20", "100", "MISC"),
    ("J8", "worker", "1", "Terminated", "", "", "600", "20", "abc", "V100"),
    ("J9", "worker", "1", "Terminated", "", "", "600", "20", "100", "V100"),
    ("J9", "evaluator", "1", "Terminated", "", "", "600", "20", "100", "V100"),
]
# job_name, task_name, inst_name, worker_name, inst_id, status, start, end, machine
INSTANCES = [
    ("J1", "worker", "a", "w1a", "i1", "Terminated", "150", "1100", "m1"),
    ("J1", "worker", "b", "w1b", "i1", "Terminated", "160", "1100", "m2"),
    ("J1", "ps", "c", "w1c", "i1", "Terminated", "120", "1100", "m9"),
    ("J2", "worker", "a", "w2a", "i2", "Terminated", "210", "400", "m1"),
    ("J2", "worker", "b", "w2b", "i2", "Terminated", "210", "400", "m2"),
    ("J3", "worker", "a", "w3a", "i3", "Failed", "300", "360", "m3"),
    ("J3", "worker", "b", "w3b", "i3", "Failed", "300", "360", "m3"),
]
# job_name, task_name, worker_name, inst_id, machine, gpu_name, cpu_usage, gpu_wrk_util, ...
SENSORS = [
    ("J1", "worker", "w1a", "i1", "m1", "g", "300", "50", "1", "1", "1", "1", "0", "0", "0", "0"),
    ("J1", "worker", "w1b", "i1", "m2", "g", "300", "70", "1", "1", "1", "1", "0", "0", "0", "0"),
    # no planned GPU (the ps) and no reading: left out of J1's mean, not taken as a busy GPU
    ("J1", "ps", "w1c", "i1", "m9", "", "300", "0", "1", "1", "1", "1", "0", "0", "0", "0"),
    ("J1", "worker", "w1a", "i1", "m1", "g", "300", "", "1", "1", "1", "1", "0", "0", "0", "0"),
    ("J2", "worker", "w2a", "i2", "m1", "g", "300", "400", "1", "1", "1", "1", "0", "0", "0",
     "0"),
    ("J2", "worker", "w2b", "i2", "m2", "g", "300", "200", "1", "1", "1", "1", "0", "0", "0",
     "0"),
]
# inst_id, user, gpu_type_spec, group, workload
TAGS = [("i1", "u1", "", "g1", "ctr"), ("i4", "u2", "", "g2", "resnet")]


def _write(path: Path, rows: list[tuple[str, ...]]) -> Path:
    path.write_text("".join(",".join(r) + "\n" for r in rows))
    return path


def _task(job: str, role: str, inst_num: str, plan_gpu: str = "",
          gpu_type: str = "") -> tuple[str, ...]:
    """A task row of the release's schema, Terminated, 600 CPU and 20 GB planned."""
    return (job, role, inst_num, "Terminated", "", "", "600", "20", plan_gpu, gpu_type)


def _ingest_tables(tmp_path: Path, jobs: list[tuple[str, ...]],
                   tasks: list[tuple[str, ...]]) -> tuple[dict, dict[str, dict]]:
    """A PAI folder of these job and task rows, ingested: the report and the jobs by id."""
    d = tmp_path / "pai"
    d.mkdir()
    _write(d / "pai_job_table.csv", jobs)
    _write(d / "pai_task_table.csv", tasks)
    report = ingest(d, format="pai-2020", db=tmp_path / "s.duckdb")
    return report, {j["job_id"]: j for j in load_jobs(tmp_path / "s.duckdb").to_pylist()}


@pytest.fixture
def pai_dir(tmp_path: Path) -> Path:
    d = tmp_path / "pai"
    d.mkdir()
    for name, rows in (("job", JOBS), ("task", TASKS), ("instance", INSTANCES),
                       ("sensor", SENSORS), ("group_tag", TAGS)):
        assert all(len(r) == len(HEADERS[name]) for r in rows)
        _write(d / f"pai_{name}_table.csv", rows)
    return d


def test_headers_match_release(shared_data: Path) -> None:
    for name, cols in HEADERS.items():
        text = (shared_data / "alibaba-pai-v2020" / f"pai_{name}_table.header").read_text()
        assert tuple(text.strip().split(",")) == cols


def test_architecture_and_resources(pai_dir: Path, tmp_path: Path) -> None:
    report = ingest(pai_dir, format="pai-2020", db=tmp_path / "s.duckdb")
    # J8's task has plan_gpu "abc": reported against the task table (its row 9) and skipped
    assert report["bad_rows"] == 1
    err = report["errors"][0]
    assert err["file"].endswith("pai_task_table.csv") and err["row"] == 9
    assert err["field"] == "plan_gpu" and err["value"] == "abc"
    jobs = {j["job_id"]: j for j in load_jobs(tmp_path / "s.duckdb").to_pylist()}
    assert sorted(jobs) == ["i1", "i2", "i3", "i4", "i5", "i6", "i7", "i9"]
    arch = {k: j["architecture"] for k, j in jobs.items()}
    assert arch == {"i1": "ps-worker",          # ps task + workers
                    "i2": "allreduce-cluster",  # 2 worker instances on machines m1, m2
                    "i3": "allreduce-local",    # 2 worker instances, both on m3
                    "i4": "allreduce-local",    # one worker with 4 GPUs
                    "i5": "1w1g", "i7": "1w1g",
                    "i6": None,                 # plans no GPU: a CPU job, in no architecture
                    "i9": "1w1g"}               # one worker + an evaluator
    assert not any(j["arch_inferred"] for j in jobs.values())
    j1 = jobs["i1"]
    assert (j1["n_gpus"], j1["n_workers"], j1["n_ps"], j1["gpus_per_worker"]) == (8, 8, 2, 1)
    assert j1["gpu_type"] == "V100" and j1["node"] is None and j1["workload"] == "ctr"
    assert (j1["submit_time_s"], j1["start_time_s"], j1["end_time_s"]) == (100, 120, 1100)
    assert j1["gpu_util"] == pytest.approx((50 / 100 + 70 / 100) / 2)
    assert jobs["i2"]["n_gpus"] == 2 * 8
    assert jobs["i2"]["gpu_util"] == pytest.approx((400 / 800 + 200 / 800) / 2)
    assert jobs["i4"]["n_gpus"] == 4 and jobs["i4"]["workload"] == "resnet"
    assert jobs["i5"]["n_gpus"] == 0.5 and jobs["i5"]["fractional_gpu"]
    assert jobs["i6"]["zero_gpu"] and jobs["i6"]["n_gpus"] == 0
    assert jobs["i7"]["censored"] and not jobs["i1"]["censored"]
    assert jobs["i9"]["n_gpus"] == 2 and jobs["i9"]["n_workers"] == 1
    # placement from the instance table: workers_per_node = ceil(n_workers / machines of the
    # worker instances), gpus_per_node = that x gpus_per_worker; the ps machine m9 not counted
    placement = {k: (j["workers_per_node"], j["gpus_per_node"]) for k, j in jobs.items()}
    assert placement == {"i1": (4, 4.0),    # 8 workers on m1, m2; 1 GPU each
                         "i2": (1, 8.0),    # 2 workers on m1, m2; 8 GPUs each
                         "i3": (2, 2.0),    # 2 workers, both on m3
                         **dict.fromkeys(("i4", "i5", "i6", "i7", "i9"), (None, None))}


def test_optional_tables_and_strict(pai_dir: Path, tmp_path: Path) -> None:
    files = [pai_dir / "pai_job_table.csv", pai_dir / "pai_task_table.csv"]
    with pytest.raises(TraincastError, match="plan_gpu"):
        ingest(files, format="pai-2020", db=tmp_path / "s.duckdb", strict=True)
    assert not (tmp_path / "s.duckdb").exists()
    ingest(files, format="pai-2020", db=tmp_path / "s.duckdb")
    jobs = {j["job_id"]: j for j in load_jobs(tmp_path / "s.duckdb").to_pylist()}
    # without the instance table J3's two workers count as spread over machines
    assert jobs["i3"]["architecture"] == "allreduce-cluster"
    assert jobs["i1"]["gpu_util"] is None and jobs["i1"]["workload"] is None
    # no instance table: the trace does not say where workers ran
    assert {j["gpus_per_node"] for j in jobs.values()} == {None}
    assert {j["workers_per_node"] for j in jobs.values()} == {None}
    with pytest.raises(TraincastError, match="pai_task_table"):
        ingest([files[0]], format="pai-2020", db=tmp_path / "t.duckdb")


def test_placement_on_real_machines(shared_data: Path, tmp_path: Path) -> None:
    """Tables written to the release's own headers, on real machines of pai_machine_spec.csv:
    the placement the adapter reads never puts more GPUs on a machine than it has."""
    pai = shared_data / "alibaba-pai-v2020"
    spec = [line.split(",") for line in (pai / "pai_machine_spec.csv").read_text().split()]
    header = (pai / "pai_machine_spec.header").read_text().strip().split(",")
    cap = {r[header.index("machine")]: int(r[header.index("cap_gpu")]) for r in spec}
    eight = sorted(m for m, g in cap.items() if g == 8)[:3]
    two = sorted(m for m, g in cap.items() if g == 2)[:1]
    assert len(eight) == 3 and len(two) == 1
    cols = {t: (pai / f"pai_{t}_table.header").read_text().strip().split(",")
            for t in ("job", "task", "instance")}

    def row(table: str, **values: str) -> tuple[str, ...]:
        return tuple(values.get(c, "") for c in cols[table])

    jobs = [row("job", job_name="A", inst_id="a", status="Terminated", start_time="0",
                end_time="10"),
            row("job", job_name="B", inst_id="b", status="Terminated", start_time="0",
                end_time="10")]
    tasks = [row("task", job_name="A", task_name="worker", inst_num="16", plan_gpu="100",
                 gpu_type="V100"),
             row("task", job_name="A", task_name="ps", inst_num="2", plan_gpu="0"),
             row("task", job_name="B", task_name="tensorflow", inst_num="1", plan_gpu="200",
                 gpu_type="T4")]
    inst = [row("instance", job_name="A", task_name="worker", worker_name=f"w{i}",
                inst_id="a", machine=eight[i % 2]) for i in range(16)]
    inst += [row("instance", job_name="A", task_name="ps", worker_name="p0", inst_id="a",
                  machine=eight[2]),
             row("instance", job_name="B", task_name="tensorflow", worker_name="t0",
                 inst_id="b", machine=two[0])]
    d = tmp_path / "pai"
    d.mkdir()
    for name, rows in (("job", jobs), ("task", tasks), ("instance", inst)):
        _write(d / f"pai_{name}_table.csv", rows)
    ingest(d, format="pai-2020", db=tmp_path / "s.duckdb")
    got = {j["job_id"]: j for j in load_jobs(tmp_path / "s.duckdb").to_pylist()}
    a, b = got["a"], got["b"]
    # 16 one-GPU workers on 2 machines: 8 per machine, each machine's 8 GPUs
    assert (a["architecture"], a["n_workers"], a["n_ps"]) == ("ps-worker", 16, 2)
    assert (a["workers_per_node"], a["gpus_per_node"], a["gpus_per_worker"]) == (8, 8.0, 1.0)
    assert (b["architecture"], b["workers_per_node"], b["gpus_per_node"]) == \
        ("allreduce-local", 1, 2.0)
    assert a["gpus_per_node"] <= cap[eight[0]] and b["gpus_per_node"] <= cap[two[0]]


def test_a_job_with_an_evaluator_is_predicted(tmp_path: Path) -> None:
    """One worker with one GPU plus an evaluator with one (J9 above): architecture 1w1g,
    n_gpus 2. The model runs the worker's GPU (n_workers x gpus_per_worker = 1); the cluster
    shares count both GPUs."""
    import json

    from typer.testing import CliRunner

    from traincast.cli import app

    d = tmp_path / "pai"
    d.mkdir()
    _write(d / "pai_job_table.csv", [("J9", "i9", "u4", "Terminated", "0", "30"),
                                     ("J10", "i10", "u4", "Terminated", "0", "10")])
    _write(d / "pai_task_table.csv", [
        ("J9", "worker", "1", "Terminated", "", "", "600", "20", "100", "V100"),
        ("J9", "evaluator", "1", "Terminated", "", "", "600", "20", "100", "V100"),
        ("J10", "ps", "1", "Terminated", "", "", "600", "20", "", ""),
        ("J10", "worker", "4", "Terminated", "", "", "600", "20", "100", "V100"),
        ("J10", "evaluator", "1", "Terminated", "", "", "600", "20", "100", "V100")])
    _write(d / "pai_group_tag_table.csv", [("i9", "u4", "", "g", "resnet"),
                                           ("i10", "u4", "", "g", "resnet")])
    res = CliRunner().invoke(app, ["characterize", str(d), "--format", "pai-2020", "--db",
                                   str(tmp_path / "s.duckdb"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    a = out["by_architecture"]
    assert (a["1w1g"]["gpus"], a["1w1g"]["gpu_time_s"]) == (2, 2 * 30)  # both GPUs, 30 s
    assert (a["ps-worker"]["gpus"], a["ps-worker"]["gpu_time_s"]) == (5, 5 * 10)
    bd = out["breakdown"]
    assert bd["jobs"] == 2 and bd["unpredicted"] == {}
    assert bd["by_architecture"]["1w1g"]["job_weighted"]["comm"] == 0.0  # 1w1g: T_comm = 0


def test_a_job_without_end_time_is_censored_unless_its_status_is_final(tmp_path: Path) -> None:
    # no end time: Running, or no status, runs on past the trace; Failed or Terminated ended
    d = tmp_path / "pai"
    d.mkdir()
    jobs = [("A", "ia", "u", "Running", "0", ""), ("B", "ib", "u", "Failed", "0", ""),
            ("C", "ic", "u", "", "0", ""), ("D", "id", "u", "Terminated", "0", "")]
    tasks = [(j[0], "worker", "1", "Terminated", "", "", "600", "20", "100", "V100")
             for j in jobs]
    _write(d / "pai_job_table.csv", jobs)
    _write(d / "pai_task_table.csv", tasks)
    ingest(d, format="pai-2020", db=tmp_path / "s.duckdb")
    got = {j["job_id"]: j["censored"] for j in load_jobs(tmp_path / "s.duckdb").to_pylist()}
    assert got == {"ia": True, "ib": False, "ic": True, "id": False}


def test_a_waiting_job_has_not_started_and_holds_no_gpu_time(tmp_path: Path) -> None:
    # the job table's start_time is the submission: a Waiting job without a started instance
    # has no start (as Alibaba 2023's Pending pods); one whose instance started keeps it
    from traincast.analysis.characterize import characterize

    d = tmp_path / "pai"
    d.mkdir()
    jobs = [("A", "ia", "u", "Waiting", "700", ""), ("B", "ib", "u", "Waiting", "700", ""),
            ("C", "ic", "u", "Terminated", "0", "1700")]
    tasks = [(j[0], "worker", "1", "Terminated", "", "", "600", "20", "100", "V100")
             for j in jobs]
    instances = [("B", "worker", "a", "wb", "ib", "Running", "900", "", "m1")]
    _write(d / "pai_job_table.csv", jobs)
    _write(d / "pai_task_table.csv", tasks)
    _write(d / "pai_instance_table.csv", instances)
    ingest(d, format="pai-2020", db=tmp_path / "s.duckdb")
    jobs_table = load_jobs(tmp_path / "s.duckdb")
    got = {j["job_id"]: (j["start_time_s"], j["censored"]) for j in jobs_table.to_pylist()}
    assert got == {"ia": (None, True), "ib": (900.0, True), "ic": (0.0, False)}
    # GPU time: C 1 GPU x 1700 s, B from 900 s to the trace's end (1700 s); A none
    assert characterize(jobs_table)["gpu_time_s"] == pytest.approx(1700 + 800)


def test_a_folder_without_the_tables_says_what_it_holds_and_where_they_come_from(
        shared_data: Path, tmp_path: Path) -> None:
    # the shared folder holds the release's *.header files and its machine table, not the job
    # and task tables: the error names both missing tables and what it found instead, and the
    # hint where the release is
    folder = shared_data / "alibaba-pai-v2020"
    with pytest.raises(TraincastError) as err:
        ingest([folder], "pai-2020", tmp_path / "t.duckdb")
    text = str(err.value)
    assert "missing table(s) pai_job_table.csv, pai_task_table.csv (found only " in text
    assert "no table this format reads" in text and "LICENSE" in text
    assert "cluster-trace-gpu-v2020" in err.value.hint
    assert not (tmp_path / "t.duckdb").exists()


def test_a_folder_of_headers_alone_is_refused_with_what_it_holds(tmp_path: Path) -> None:
    folder = tmp_path / "pai"
    folder.mkdir()
    (folder / "LICENSE").write_text("CC BY 4.0\n")
    (folder / "pai_job_table.header").write_text(",".join(HEADERS["job"]) + "\n")
    with pytest.raises(TraincastError) as err:
        ingest([folder], "pai-2020", tmp_path / "t.duckdb")
    assert str(err.value).endswith("missing table(s) pai_job_table.csv, pai_task_table.csv "
                                   "(found only LICENSE, pai_job_table.header: no table this "
                                   "format reads; .header files give the tables' column names, "
                                   "not their rows)")
    assert "tar -xf" in err.value.hint


def test_an_empty_side_table_is_said_empty_not_cut(pai_dir: Path, tmp_path: Path) -> None:
    (pai_dir / "pai_group_tag_table.csv").write_text("")
    report = ingest(pai_dir, format="pai-2020", db=tmp_path / "s.duckdb")
    said = [n["note"] for n in report["notes"]]
    assert any("pai_group_tag_table.csv: the file is empty" in n for n in said), said
    assert not any("cut" in n for n in said), said
    jobs = load_jobs(tmp_path / "s.duckdb").to_pylist()
    assert len(jobs) == len(JOBS) - 1  # J8: its plan_gpu "abc" is a bad row
    assert all(j["workload"] is None for j in jobs)


@pytest.mark.parametrize("table", ["job", "task"])
def test_an_empty_job_or_task_table_is_an_error(pai_dir: Path, tmp_path: Path,
                                                 table: str) -> None:
    # the two tables that hold the jobs: empty, there is no trace (a side table empty: a note)
    (pai_dir / f"pai_{table}_table.csv").write_text("")
    with pytest.raises(TraincastError, match=f"pai_{table}_table.csv: the file is empty"):
        ingest(pai_dir, format="pai-2020", db=tmp_path / "s.duckdb")
    assert not (tmp_path / "s.duckdb").exists()


def test_a_bad_table_is_named_not_the_job_table(pai_dir: Path, tmp_path: Path) -> None:
    import gzip

    # a byte that is not UTF-8 in the instance table: the error names that table
    inst = pai_dir / "pai_instance_table.csv"
    inst.write_bytes(inst.read_bytes().replace(b"m1", b"m\xe91", 1))
    with pytest.raises(TraincastError, match=r"pai_instance_table\.csv: cannot read the file"):
        ingest(pai_dir, format="pai-2020", db=tmp_path / "s.duckdb")
    inst.write_bytes(inst.read_bytes().replace(b"m\xe91", b"m1"))
    # a task table gzipped and cut short, and one named .gz that is plain text: named, with
    # what to do (not an internal error)
    task = pai_dir / "pai_task_table.csv"
    packed = gzip.compress(task.read_bytes())
    task.unlink()
    cut = pai_dir / "pai_task_table.csv.gz"
    cut.write_bytes(packed[:40])
    with pytest.raises(TraincastError, match=r"pai_task_table\.csv\.gz: cannot read") as err:
        ingest(pai_dir, format="pai-2020", db=tmp_path / "s.duckdb")
    assert "cut short" in err.value.hint
    cut.write_bytes(b"J1,ps,2,Terminated,,,600,20,,\n")
    with pytest.raises(TraincastError, match=r"pai_task_table\.csv\.gz: cannot read") as err:
        ingest(pai_dir, format="pai-2020", db=tmp_path / "s.duckdb")
    assert "not gzip data" in err.value.hint


def test_side_table_values_that_do_not_parse_are_counted_in_notes(pai_dir: Path,
                                                                   tmp_path: Path) -> None:
    # the instance and sensor values the aggregates read: one that is no number (or no
    # machine) is left out of its job's figure, and a note counts the rows, naming the table
    inst = [list(r) for r in INSTANCES]
    inst[3][6] = "abc"           # J2's worker start_time
    inst[4][8] = ""              # J2's worker machine
    inst[2][8] = ""              # J1's ps machine: not read (machines are counted of workers)
    inst[0][7] = "zzz"           # J1's end_time: not read
    _write(pai_dir / "pai_instance_table.csv", [tuple(r) for r in inst])
    sens = [list(r) for r in SENSORS]
    sens[4][7] = "xyz"           # a J2 reading
    _write(pai_dir / "pai_sensor_table.csv", [tuple(r) for r in sens])
    report = ingest(pai_dir, format="pai-2020", db=tmp_path / "s.duckdb")
    notes = {n["note"].split(" with ")[0]: n["count"] for n in report["notes"]}
    assert notes["row(s) of pai_instance_table.csv"] == 2
    assert notes["reading(s) of pai_sensor_table.csv"] == 1
    jobs = {j["job_id"]: j for j in load_jobs(tmp_path / "s.duckdb").to_pylist()}
    assert jobs["i2"]["gpu_util"] == pytest.approx(200 / 800)  # the other reading alone


def test_a_header_line_prepended_to_a_table_is_passed_over(pai_dir: Path,
                                                            tmp_path: Path) -> None:
    # the release's tables have no header; one a user prepended (the .header file's names)
    # is no job and no bad row: the same jobs as the headerless set
    plain = ingest(pai_dir, format="pai-2020", db=tmp_path / "a.duckdb")
    for table in ("job", "task", "instance"):
        path = pai_dir / f"pai_{table}_table.csv"
        path.write_text(",".join(HEADERS[table]) + "\n" + path.read_text())
    headed = ingest(pai_dir, format="pai-2020", db=tmp_path / "b.duckdb")
    assert (headed["jobs"], headed["bad_rows"]) == (plain["jobs"], plain["bad_rows"])
    a, b = (sorted(load_jobs(tmp_path / db).to_pylist(), key=lambda j: j["job_id"])
            for db in ("a.duckdb", "b.duckdb"))
    assert [{k: v for k, v in j.items() if k != "source_id"} for j in a] == \
        [{k: v for k, v in j.items() if k != "source_id"} for j in b]


def test_a_cpu_job_with_parameter_servers_is_in_no_architecture(tmp_path: Path) -> None:
    # J1: ps + GPU workers; J2: ps + workers that plan no GPU (empty); J3: plan_gpu 0. Only J1
    # is PS/Worker; J2 and J3 are CPU jobs: no architecture, flagged zero_gpu, none inferred
    _, jobs = _ingest_tables(tmp_path, [(f"J{i}", f"i{i}", "u", "Terminated", "0", "10")
                                        for i in (1, 2, 3)], [
        _task("J1", "ps", "1"), _task("J1", "worker", "4", "100", "V100"),
        _task("J2", "ps", "1"), _task("J2", "worker", "4"),
        _task("J3", "ps", "1"), _task("J3", "worker", "2", "0")])
    got = {k: (j["architecture"], j["n_gpus"], j["zero_gpu"], j["arch_inferred"])
           for k, j in jobs.items()}
    assert got == {"i1": ("ps-worker", 4, False, False), "i2": (None, 0, True, False),
                   "i3": (None, 0, True, False)}


def test_a_negative_reading_is_no_reading(tmp_path: Path) -> None:
    """A sensor reading below 0 is left out of the job's mean (said in a note), the job kept,
    not a bad gpu_util reported against the job table."""
    from traincast.trace.store import Store

    def ingest_dir(name: str, jobs: list[tuple[str, ...]], tasks: list[tuple[str, ...]],
                   sensors: list[tuple[str, ...]] | None = None) -> dict:
        d = tmp_path / name
        d.mkdir()
        _write(d / "pai_job_table.csv", jobs)
        _write(d / "pai_task_table.csv", tasks)
        if sensors:
            _write(d / "pai_sensor_table.csv", sensors)
        return Store(tmp_path / f"{name}.duckdb").ingest(d, "pai-2020")

    job = [("j1", "i1", "u", "Terminated", "100", "200"), ("j2", "i2", "u", "Terminated", "100",
                                                            "300")]
    task = [(j, "worker", "1", "Terminated", "100", "200", "600", "29", "100", "V100")
            for j in ("j1", "j2")]
    sensors = [("j1", "worker", "w1", "i1", "m1", "V100", "100", "-50", *"12345678"),
               ("j2", "worker", "w2", "i2", "m1", "V100", "100", "50", *"12345678")]
    r = ingest_dir("sensor", job, task, sensors)
    assert (r["jobs"], r["bad_rows"]) == (2, 0)
    assert [n["count"] for n in r["notes"] if "below 0" in n["note"]] == [1]
    got = {j["job_id"]: j["gpu_util"] for j in load_jobs(tmp_path / "sensor.duckdb").to_pylist()}
    assert got == {"i1": None, "i2": 0.5}  # 50 % of one GPU over plan_gpu 100 %


def test_a_row_with_fewer_fields_than_the_release_is_a_bad_row(tmp_path: Path) -> None:
    # an empty end_time (as the release writes a running job's) is a field: read as none; a
    # row that ends before its last field is no row of the release: a bad row that names the
    # first field it lacks, in the job table and (its job bad) in the task table
    report, jobs = _ingest_tables(
        tmp_path, [("A", "ia", "u", "Running", "0", ""), ("B", "ib", "u", "Terminated"),
                   ("C", "ic", "u", "Terminated", "0", "10"),
                   ("D", "id", "u", "Terminated", "0", "9")],
        [_task(j, "worker", "1", "100", "V100") for j in "ABC"]
        + [_task("D", "worker", "1")[:7]])  # cut before plan_mem
    got = {k: j["censored"] for k, j in jobs.items()}
    assert got == {"ia": True, "ic": False}
    bad = {(Path(e["file"]).name, e["row"], e["field"]) for e in report["errors"]}
    assert report["bad_rows"] == 2 and bad == {("pai_job_table.csv", 2, "start_time"),
                                               ("pai_task_table.csv", 4, "plan_mem")}
    assert all("fewer fields than the release" in e["value"] for e in report["errors"])


def test_a_missing_inst_num_is_one_instance_for_roles_too(tmp_path: Path) -> None:
    # docs/traces.md: inst_num missing = one instance; n_ps and n_workers are sums of inst_num
    _, jobs = _ingest_tables(tmp_path, [(j, f"i{j.lower()}", "u", "Terminated", "0", "10")
                                        for j in "ABC"], [
        _task("A", "ps", ""), _task("A", "worker", "2", "100", "V100"),
        _task("B", "ps", "1"), _task("B", "worker", "", "100", "V100"),
        _task("C", "worker", "", "100", "V100"), _task("C", "chief", "", "100", "V100")])
    got = {k: (j["architecture"], j["n_ps"], j["n_workers"], j["n_gpus"])
           for k, j in jobs.items()}
    assert got == {"ia": ("ps-worker", 1, 2, 2), "ib": ("ps-worker", 1, 1, 1),
                   "ic": ("allreduce-cluster", 0, 2, 2)}
