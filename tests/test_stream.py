"""Analyses over a store read chunk by chunk: the same answers as over the whole table, in
bounded memory (quantile sketches exact up to EXACT_MAX values, within 0.1% beyond)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from traincast.analysis import quantiles as qmod
from traincast.analysis.characterize import characterize, characterize_chunks
from traincast.analysis.quantiles import Quantiles, weighted_median
from traincast.analysis.whatif import whatif
from traincast.hardware.catalog import load_catalog
from traincast.trace import Store, load_jobs, prepare_jobs
from traincast.trace.chunks import JobChunks

SCENARIOS = ["eth100", "nvlink-allreduce", "gpu-a100"]


def test_quantiles_exact_below_the_cap_are_numpys() -> None:
    rng = np.random.default_rng(1)
    x = rng.lognormal(0, 2, 5000)
    q = Quantiles(n_weights=1)
    for part in np.array_split(x, 7):
        q.add(part, [part])  # weight = the value itself
    ps = np.linspace(0, 1, 11)
    assert q.exact
    assert np.array_equal(q.quantiles(ps), np.quantile(x, ps))
    assert q.median() == np.median(x)
    assert q.weighted_median(0) == weighted_median(x, x)
    assert q.max() == x.max()


def test_quantiles_beyond_the_cap_are_within_the_bin_width(monkeypatch) -> None:
    monkeypatch.setattr(qmod, "EXACT_MAX", 1000)
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.lognormal(3, 2, 20_000), np.zeros(500), np.full(3000, 7.25e5)])
    rng.shuffle(x)
    q = Quantiles()
    for part in np.array_split(x, 13):
        q.add(part)
    assert not q.exact and q.count == len(x)
    ps = np.linspace(0, 1, 101)
    exact = np.quantile(x, ps)
    got = q.quantiles(ps)
    assert got[0] == 0.0 and got[-1] == x.max()
    pos = exact > 0
    assert np.all(np.abs(got[pos] / exact[pos] - 1) <= qmod.REL_WIDTH)
    # a bin whose values are all one value gives it exactly: the 3,000 values 7.25e5 are ranks
    # k .. k + 2,999 (k = how many values are below), alone in their bin (the lognormal has
    # no value within 0.1% of it)
    xs = np.sort(x)
    k = int(np.searchsorted(xs, 7.25e5))
    near = (xs > 7.25e5 / (1 + qmod.REL_WIDTH)) & (xs < 7.25e5 * (1 + qmod.REL_WIDTH))
    assert near.sum() == 3000
    assert q.quantiles([(k + 1500) / (len(x) - 1)])[0] == 7.25e5


def test_quantiles_merge_equals_one_sketch(monkeypatch) -> None:
    monkeypatch.setattr(qmod, "EXACT_MAX", 500)
    rng = np.random.default_rng(3)
    x, w = rng.lognormal(0, 1, 4000), rng.random(4000)
    whole = Quantiles(1).add(x, [w])
    parts = [Quantiles(1).add(a, [b]) for a, b in zip(np.array_split(x, 5),
                                                     np.array_split(w, 5), strict=True)]
    merged = parts[0]
    for p in parts[1:]:
        merged.merge(p)
    ps = [0.1, 0.5, 0.9]
    assert np.allclose(merged.quantiles(ps), whole.quantiles(ps), rtol=0, atol=0)
    assert merged.weighted_median(0) == whole.weighted_median(0)
    wm = weighted_median(x, w)
    assert abs(merged.weighted_median(0) / wm - 1) <= qmod.REL_WIDTH


def test_quantiles_refuse_negative_values_and_skip_nan() -> None:
    q = Quantiles().add([1.0, np.nan, np.inf, 2.0])
    assert q.count == 2 and q.median() == 1.5
    with pytest.raises(ValueError):
        q.add([-1.0])
    assert math.isnan(Quantiles().median())


def _trace(path: Path, n: int = 300) -> None:
    """A canonical CSV: mixed architectures, two sources' worth of times, zoo workloads for
    some jobs, features for others, running jobs (no end) and 0-GPU jobs."""
    rng = np.random.default_rng(7)
    arch = rng.choice(["1w1g", "allreduce-local", "allreduce-cluster", "ps-worker"], n)
    gpus = np.where(arch == "1w1g", 1, 2 ** rng.integers(1, 5, n)).astype(float)
    gpus[::37] = 0
    start = rng.uniform(0, 1e5, n).round()
    end = start + rng.lognormal(6, 2, n).round()
    end[::11] = np.nan  # still running at the trace end
    kind = rng.integers(0, 3, n)
    feat = np.where(kind == 0, rng.lognormal(0, 1, n), np.nan)
    ps = arch == "ps-worker"
    pacsv.write_csv(pa.table({
        "job_id": [f"j{i}" for i in range(n)], "start_time_s": start,
        "end_time_s": pa.array(end, from_pandas=True), "architecture": arch, "n_gpus": gpus,
        "n_workers": pa.array(np.where(ps, gpus, np.nan), from_pandas=True),
        "n_ps": pa.array(np.where(ps, 2, np.nan), from_pandas=True),
        "gpu_type": rng.choice(["V100", "P100", "T4"], n),
        "workload": pa.array(np.where(kind == 1, rng.choice(["resnet50", "bert-base"], n), None),
                             type=pa.string()),
        "flops_compute_bound": pa.array(feat * 1e12, from_pandas=True),
        "bytes_memory_bound": pa.array(feat * 1e10, from_pandas=True),
        "weight_bytes": pa.array(feat * 1e8, from_pandas=True),
        "input_bytes": pa.array(feat * 1e7, from_pandas=True)}), path)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "s.duckdb"
    for i in range(2):  # two sources: each has its own trace end
        _trace(tmp_path / f"t{i}.csv", 300 + 50 * i)
        with Store(db) as s:
            s.ingest(tmp_path / f"t{i}.csv", "csv")
    return db


def _same(a: object, b: object, path: str = "") -> None:
    """Equal results: floats to 1e-9 relative (sums in another order), the rest exactly."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), path
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert (math.isnan(a) and math.isnan(b)) or b == pytest.approx(a, rel=1e-9), path
    else:
        assert a == b, path


@pytest.mark.parametrize("exact_max", [qmod.EXACT_MAX, 50])
def test_characterize_in_chunks_equals_the_whole_table(store: Path, exact_max: int,
                                                       monkeypatch) -> None:
    monkeypatch.setattr(qmod, "EXACT_MAX", exact_max)  # 50: the sketches' histograms merge
    cat = load_catalog()
    whole = prepare_jobs(load_jobs(store), cat, "mix")
    expected = characterize(whole, cat, fill=False)
    chunks = JobChunks(store, chunk_rows=64, catalog=cat, workload="mix")
    assert chunks.rows == 650
    got = characterize_chunks(chunks, cat)
    _same(expected, got)
    assert expected["breakdown"]["jobs"] > 100  # the breakdown is compared, not empty
    assert chunks.assumed["jobs"] == int(np.asarray(whole["workload_assumed"]).sum())


def test_characterize_one_source_of_the_store(store: Path) -> None:
    cat = load_catalog()
    whole = prepare_jobs(load_jobs(store, [2]), cat, "mix")
    got = characterize_chunks(JobChunks(store, [2], chunk_rows=50, catalog=cat,
                                        workload="mix"), cat)
    _same(characterize(whole, cat, fill=False), got)
    assert got["jobs"] == 350


@pytest.mark.parametrize("exact_max", [qmod.EXACT_MAX, 50])
def test_whatif_in_chunks_equals_the_whole_table(store: Path, exact_max: int,
                                                 monkeypatch) -> None:
    monkeypatch.setattr(qmod, "EXACT_MAX", exact_max)  # 50: the sketches' histograms merge
    cat = load_catalog()
    whole = prepare_jobs(load_jobs(store), cat, "mix")
    expected = whatif(whole, SCENARIOS, cat, per_job=True)
    rows: list[pa.Table] = []
    got = whatif(JobChunks(store, chunk_rows=100, catalog=cat, workload="mix"), SCENARIOS,
                 cat, per_job=True, on_rows=rows.append)
    assert len(rows) == 7  # one part per chunk
    a, b = expected.pop("job_rows"), pa.concat_tables(rows)
    assert a.num_rows == 650 * len(SCENARIOS)
    assert a["job_id"].to_pylist() == b["job_id"].to_pylist()
    assert a["job_id"].to_pylist()[:3] == ["j0"] * 3  # a job's rows together
    assert a["scenario"].to_pylist()[:3] == SCENARIOS
    _same(expected, got)
    assert expected["scenarios"]["eth100"]["matched"] > 0


def test_characterize_on_dask_equals_local(store: Path, tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    cat = load_catalog()
    local = characterize_chunks(JobChunks(store, chunk_rows=200, catalog=cat, workload="mix"),
                                cat)
    dist = characterize_chunks(JobChunks(store, chunk_rows=200, catalog=cat, workload="mix"),
                               cat, engine="dask", parquet_dir=tmp_path / "parts")
    assert len(list((tmp_path / "parts").glob("part-*.parquet"))) == 4
    _same(local, dist)


def test_cli_whatif_streams_per_job_rows_to_a_file(store: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from traincast.cli import app

    out = tmp_path / "rows.csv"
    r = CliRunner().invoke(app, ["whatif", "--db", str(store), "-s", "eth100", "-s",
                                 "gpu-a100", "--jobs", "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    rows = pacsv.read_csv(out)
    assert rows.num_rows == 650 * 2
    assert rows["scenario"].to_pylist()[:4] == ["eth100", "gpu-a100"] * 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "rows.csv", "s.duckdb", "t0.csv", "t1.csv"]  # no temporary file left
