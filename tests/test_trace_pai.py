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
                    "i5": "1w1g", "i6": "1w1g", "i7": "1w1g",
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
    with pytest.raises(TraincastError, match="pai_task_table"):
        ingest([files[0]], format="pai-2020", db=tmp_path / "t.duckdb")
