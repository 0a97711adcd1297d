"""Engines: Dask (Parquet partitions on a LocalCluster at 127.0.0.1) agrees with local."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from traincast.analysis.whatif import whatif
from traincast.engine.dask import write_partitions
from traincast.hardware.catalog import load_catalog
from traincast.jobs import Columns, Strings

pytest.importorskip("distributed")

SCENARIOS = ["eth100", "nvlink-allreduce", "gpu-a100", "allreduce-cluster",
             {"name": "big-jobs", "match": {"min_gpus": 9}, "changes": {"nic": "ib-hdr",
                                                                        "hierarchical": True}}]


def random_jobs(n: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    arch = rng.choice(["1w1g", "allreduce-local", "allreduce-cluster", "ps-worker", "pearl"], n)
    gpus = np.where(arch == "1w1g", 1, rng.integers(2, 33, n)).astype(float)
    gpus = np.where(arch == "allreduce-local", np.minimum(gpus, 8), gpus)
    weight = rng.lognormal(19, 2, n)
    weight[rng.random(n) < 0.05] = np.nan  # unknown features: NaN times, left out of means
    return pa.table({
        "job_id": [f"j{i}" for i in range(n)], "architecture": arch, "n_gpus": gpus,
        "n_workers": pa.array(np.where(arch == "ps-worker", gpus, np.nan), from_pandas=True),
        "n_ps": pa.array(np.where(arch == "ps-worker", rng.integers(1, 5, n), np.nan),
                         from_pandas=True),
        "gpus_per_worker": np.where(arch == "ps-worker", 1.0, np.nan),
        "gpu_type": rng.choice(["V100", "V100M32", "P100", "T4", "MISC"], n),
        "flops_compute_bound": rng.lognormal(27, 2, n),
        "bytes_memory_bound": rng.lognormal(22, 2, n), "weight_bytes": weight,
        "embedding_bytes_touched": np.where(rng.random(n) < 0.2, rng.lognormal(18, 2, n), 0.0),
        "input_bytes": rng.lognormal(15, 2, n),
        "start_time_s": np.zeros(n), "end_time_s": rng.lognormal(8, 2, n)})


def test_dask_equals_local(tmp_path: Path) -> None:
    cat = load_catalog()
    jobs = random_jobs(1200)
    local = whatif(jobs, SCENARIOS, cat, per_job=True)
    dist = whatif(jobs, SCENARIOS, cat, per_job=True, engine="dask", rows_per_partition=300,
                  parquet_dir=tmp_path / "parts")
    assert len(list((tmp_path / "parts").glob("part-*.parquet"))) == 4
    a, b = local.pop("job_rows"), dist.pop("job_rows")
    assert a["job_id"].to_pylist() == b["job_id"].to_pylist()
    assert a["scenario"].to_pylist() == b["scenario"].to_pylist()
    for col in ("matched", "applied"):
        assert a[col].to_pylist() == b[col].to_pylist()
    for col in ("base_total_s", "scenario_total_s", "speedup"):
        x = np.array(a[col].to_pylist(), dtype=float)
        y = np.array(b[col].to_pylist(), dtype=float)
        assert np.array_equal(np.isnan(x), np.isnan(y))
        ok = ~np.isnan(x)
        assert np.all(np.abs(x[ok] - y[ok]) <= 1e-9 * np.abs(x[ok]))
    for name, s in local["scenarios"].items():
        t = dist["scenarios"][name]
        for key, v in s.items():
            if isinstance(v, float) and np.isfinite(v):
                assert t[key] == pytest.approx(v, rel=1e-9), (name, key)
            elif not isinstance(v, dict):
                assert t[key] == v or (v != v and t[key] != t[key]), (name, key)
    assert local["scenarios"]["nvlink-allreduce"]["matched"] > 0


def test_dask_reads_an_existing_parquet_folder(tmp_path: Path) -> None:
    cat = load_catalog()
    jobs = random_jobs(300, seed=3)
    write_partitions(jobs, tmp_path, 100)
    local = whatif(jobs, "eth100", cat)
    from distributed import LocalCluster

    # a running cluster reached by its address (what --address tcp://HOST:PORT does)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                      host="127.0.0.1", scheduler_port=0, dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        dist = whatif(tmp_path, "eth100", cat, engine="dask",
                      address=cluster.scheduler_address)
    assert dist["summary"]["mean_speedup"] == pytest.approx(local["summary"]["mean_speedup"],
                                                            rel=1e-9)


def test_strings_set_and_match() -> None:
    s = Strings.of(pa.array(["a", None, "b", "a"]), 4)
    assert s.isin({"a"}).tolist() == [True, False, False, True]
    t = s.set(np.array([False, True, False, False]), "c")
    assert t.strings().tolist() == ["a", "c", "b", "a"]
    assert t.set(np.array([True, False, False, False]), None).strings().tolist() == [
        None, "c", "b", "a"]


def test_columns_from_dict_and_table_agree() -> None:
    jobs = random_jobs(50)
    a = Columns.of(jobs)
    b = Columns.of({k: jobs[k].to_pylist() for k in jobs.column_names})
    np.testing.assert_array_equal(a["n_gpus"], b["n_gpus"])
    assert a["architecture"].strings().tolist() == b["architecture"].strings().tolist()


def test_cli_engine_dask(tmp_path: Path, monkeypatch) -> None:
    import json

    from typer.testing import CliRunner

    from traincast.cli import app

    monkeypatch.chdir(tmp_path)
    import pyarrow.parquet as pq

    pq.write_table(random_jobs(200, seed=5), tmp_path / "jobs.parquet")
    runner = CliRunner()
    args = ["whatif", str(tmp_path / "jobs.parquet"), "-s", "eth100", "--db",
            str(tmp_path / "s.duckdb"), "--json"]
    local = runner.invoke(app, args)
    dist = runner.invoke(app, [*args, "--engine", "dask"])
    assert local.exit_code == 0 and dist.exit_code == 0, local.output + dist.output
    a, b = json.loads(local.stdout)["summary"], json.loads(dist.stdout)["summary"]
    assert a["mean_speedup"] == pytest.approx(b["mean_speedup"], rel=1e-9)
    assert a["matched"] == b["matched"] == 200


def test_local_chunks_and_threads_do_not_change_results() -> None:
    from traincast.engine.local import run_scenarios
    from traincast.scenarios import as_scenarios

    cat = load_catalog()
    cols = Columns.of(random_jobs(1000, seed=11))
    scs = as_scenarios(SCENARIOS, cat)
    base1, reason1, res1 = run_scenarios(cols, scs, cat, chunk_rows=1_000_000)
    base2, reason2, res2 = run_scenarios(cols, scs, cat, chunk_rows=128, threads=2)
    np.testing.assert_array_equal(reason1, reason2)
    np.testing.assert_array_equal(base1, base2)
    for a, b in zip(res1, res2, strict=True):
        np.testing.assert_array_equal(a.matched, b.matched)
        np.testing.assert_array_equal(a.applied, b.applied)
        np.testing.assert_array_equal(a.total_s, b.total_s)


@pytest.mark.parametrize(("address", "words"), [
    ("foo:bar", "invalid literal"), ("http://x", "unknown address scheme 'http'"),
    ("tcp://host", "missing port")])
def test_a_scheduler_address_dask_cannot_read_is_a_flag_error(tc, tmp_path: Path,
                                                              address: str, words: str) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus\na,1\n")
    run = tc("whatif", str(trace), "--db", str(tmp_path / "s.duckdb"), "-s", "eth100",
             "--engine", "dask", "--address", address)
    assert run.returncode == 2 and "this is a bug" not in run.stderr
    assert f"--address {address!r}: not a Dask scheduler address" in run.stderr
    assert words in run.stderr and "tcp://HOST:PORT" in run.stderr
    assert not (tmp_path / "s.duckdb").exists()  # refused before any work


def test_check_address_takes_what_dask_serves() -> None:
    from traincast.engine.dask import check_address

    for address in ("tcp://10.0.0.1:8786", "127.0.0.1:8786", "tls://h:1", "inproc://x"):
        check_address(address)


def test_a_port_that_accepts_and_stays_silent_is_no_scheduler(monkeypatch) -> None:
    # a web server waits for a request and a Dask client for the scheduler's handshake: the
    # probe stops that wait; a listener that writes first (as a scheduler does) passes
    import socket
    import threading

    import traincast.engine.dask as engine
    from traincast.errors import TraincastError

    monkeypatch.setattr(engine, "CONNECT_TIMEOUT_S", 1)

    def serve(greeting: bytes) -> int:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)

        def run() -> None:
            conn, _ = srv.accept()
            if greeting:
                conn.sendall(greeting)
            threading.Event().wait(2)
            conn.close()
            srv.close()

        threading.Thread(target=run, daemon=True).start()
        return srv.getsockname()[1]

    silent = serve(b"")
    with pytest.raises(TraincastError, match="sent nothing for 1 s"):
        engine.probe_tcp(f"tcp://127.0.0.1:{silent}")
    engine.probe_tcp(f"tcp://127.0.0.1:{serve(b'handshake')}")  # no error


def test_a_reused_parquet_dir_holds_only_the_new_partitions(tmp_path: Path) -> None:
    # 300 jobs in 3 partitions, then 150 jobs in 2: the folder read back holds the 150, and a
    # file of the user's own beside them stays
    import pyarrow.parquet as pq

    from traincast.engine.dask import partition_files

    write_partitions(random_jobs(300), tmp_path, 100)
    (tmp_path / "notes.parquet").write_bytes(b"mine")
    write_partitions(random_jobs(150), tmp_path, 100)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["notes.parquet", "part-00000.parquet", "part-00001.parquet"]
    parts = [p for p in partition_files(tmp_path) if "part-" in p]
    assert sum(pq.read_metadata(p).num_rows for p in parts) == 150


def test_a_parquet_dir_that_holds_the_trace_is_refused(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from traincast.cli import app

    trace = tmp_path / "part-00000.parquet"
    random_jobs(10).to_pandas().to_parquet(trace)
    res = CliRunner().invoke(app, ["characterize", str(trace), "--engine", "dask",
                                   "--parquet-dir", str(tmp_path), "--db",
                                   str(tmp_path / "s.duckdb")])
    assert "would be written over the trace" in str(res.exception), res.output
    assert trace.exists()
