"""The bundled sample: deterministic, built from the count tables, honest about its mix."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from traincast.trace import read_trace
from traincast.trace.sample import PARAMS, generate, load_stats, sample_path, worker_weights

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["bert", "ctr", "resnet"]


def test_deterministic() -> None:
    a = generate(400, seed=7, workloads=NAMES)
    assert a.equals(generate(400, seed=7, workloads=NAMES))
    assert not a.equals(generate(400, seed=8, workloads=NAMES))


def test_architecture_mix_follows_parameters() -> None:
    t = generate(3000, workloads=NAMES)
    arch = np.array(t["architecture"].to_pylist())
    gpus = t["n_gpus"].to_numpy()
    ps = arch == "ps-worker"
    assert ps.sum() == round(PARAMS["ps_job_share"] * 3000)
    assert gpus[ps].sum() / gpus.sum() == pytest.approx(PARAMS["ps_gpu_share"], abs=0.03)
    workers = t["n_workers"].to_numpy(zero_copy_only=False)[ps]
    n_ps = t["n_ps"].to_numpy(zero_copy_only=False)[ps]
    assert np.array_equal(n_ps, np.ceil(workers * PARAMS["ps_per_worker"]))
    assert set(np.unique(workers)) <= {2.0 ** k for k in range(1, 8)}
    # non-PS jobs: architecture from the GPU count and the GPU type's node size
    nodes = {"V100": 8, "V100M32": 8, "MISC": 8, "P100": 2, "T4": 2}
    for a, g, ty in zip(arch[~ps], gpus[~ps], np.array(t["gpu_type"].to_pylist())[~ps],
                        strict=True):
        want = "1w1g" if g <= 1 else "allreduce-local" if g <= nodes[ty] else "allreduce-cluster"
        assert a == want


def test_gpu_type_and_size_mix_match_the_count_tables() -> None:
    t = generate(3000, workloads=NAMES)
    stats = load_stats()
    types = stats["gpu_type_gpus"]
    share = np.array(types["count"]) / sum(types["count"])
    drawn = np.array(t["gpu_type"].to_pylist())
    for name, p in zip(types["value"], share, strict=True):
        assert (drawn == name).mean() == pytest.approx(p, abs=0.03)
    sizes = stats["gpus_per_job"]
    one = sizes["count"][sizes["value"].index(1)] / sum(sizes["count"])
    non_ps = np.array(t["architecture"].to_pylist()) != "ps-worker"
    assert (t["n_gpus"].to_numpy()[non_ps] == 1).mean() == pytest.approx(one, abs=0.02)


def test_worker_weights_hit_the_target_mean() -> None:
    values, w = worker_weights(11.0, 7)
    assert (values * w).sum() == pytest.approx(11.0)
    assert w.sum() == pytest.approx(1.0)


def test_stats_derived_from_the_real_traces(shared_data: Path) -> None:
    spec = importlib.util.spec_from_file_location("derive", ROOT / "scripts" /
                                                  "derive_sample_stats.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.derive(shared_data) == json.loads(json.dumps(load_stats()))
    assert load_stats()["gpu_type_gpus"]["value"] == ["MISC", "P100", "T4", "V100", "V100M32"]


def test_shipped_sample_is_the_generator_output(tmp_path: Path) -> None:
    pytest.importorskip("traincast.zoo.profiles")
    shipped = pq.read_table(sample_path())
    assert shipped.equals(generate())
    jobs = read_trace(sample_path(), "csv", tmp_path / "s.duckdb")
    assert jobs.num_rows == shipped.num_rows
    assert not any(jobs["arch_inferred"].to_pylist())


def test_workloads_fit_gpu_memory() -> None:
    from traincast.hardware.catalog import load_catalog

    cat = load_catalog()
    t = generate(600, workloads={"small": 1.0, "mid": 20.0, "huge": 1e4})
    rows = list(zip(t["workload"].to_pylist(), t["gpu_type"].to_pylist(), strict=True))
    assert {w for w, _ in rows} == {"small", "mid"}  # "huge" fits no GPU of the PAI mix
    for w, ty in rows:
        if w == "mid":
            assert cat.gpu(ty).mem_gb >= 20.0


def test_the_written_file_is_what_its_name_says(tc, tmp_path: Path) -> None:
    import gzip

    out = tmp_path / "s.csv.gz"
    assert tc("sample", "-o", str(out), "--jobs", "7").returncode == 0
    with gzip.open(out, "rt") as f:  # gzipped CSV, which ingest reads as such
        assert f.readline().startswith('"job_id"') and len(f.read().splitlines()) == 7
    assert len(read_trace(out, db=tmp_path / "s.duckdb")) == 7
    # a name of no format is refused before anything is written
    r = tc("sample", "-o", str(tmp_path / "s.txt"), "--jobs", "3")
    assert r.returncode == 2 and ".csv.gz, .parquet" in r.stderr
    assert not (tmp_path / "s.txt").exists()
    # --jobs or --seed without -o would be ignored: refused
    r = tc("sample", "--seed", "3")
    assert r.returncode == 2 and "give -o FILE" in r.stderr


def test_the_sample_given_by_its_path_is_still_the_sample(tmp_path: Path) -> None:
    # traincast report $(traincast sample): the same synthetic jobs, said to be the sample
    import shutil

    from traincast.analysis.study import is_bundled_sample

    path = sample_path()
    assert is_bundled_sample([path]) and is_bundled_sample([str(path)])
    copy = tmp_path / Path(path).name
    shutil.copy(path, copy)
    assert not is_bundled_sample([copy]) and not is_bundled_sample([])
    assert not is_bundled_sample([path, copy])
