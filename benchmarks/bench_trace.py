"""Trace benchmark: ingest + characterize a 1,000,000-job canonical CSV.

Target: ingest into a fresh DuckDB store, load the jobs, and characterize them (architecture
and GPU-type mix, CDFs, time breakdown of the jobs with features) in <= 10 s on this machine.
Baseline, same run, same file: pandas ``read_csv`` + a groupby of jobs, GPUs and GPU time per
architecture. Exits non-zero when the target is missed.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from _common import verdict

JOBS = 1_000_000
TARGET_S = 10.0


def write_trace(path: Path, n: int = JOBS, seed: int = 0) -> None:
    """A canonical CSV of n jobs: mixed architectures, GPU types, and features for half."""
    rng = np.random.default_rng(seed)
    arch = np.array(["1w1g", "allreduce-local", "allreduce-cluster", "ps-worker"])[
        rng.choice(4, n, p=[0.6, 0.15, 0.05, 0.2])]
    gpus = np.where(arch == "1w1g", 1, 2 ** rng.integers(1, 6, n)).astype(float)
    start = np.sort(rng.uniform(0, 3e6, n)).round()
    known = rng.random(n) < 0.5

    def feat(scale: float) -> pa.Array:
        return pa.array(np.where(known, rng.lognormal(0, 1, n) * scale, np.nan), from_pandas=True)

    table = pa.table({
        "job_id": pa.array([f"job-{i}" for i in range(n)]),
        "start_time_s": start, "end_time_s": start + rng.lognormal(7, 2, n).round(),
        "architecture": arch, "n_gpus": gpus,
        "n_workers": np.where(arch == "ps-worker", gpus, 0).astype(np.int64),
        "n_ps": np.where(arch == "ps-worker", np.maximum(gpus // 4, 1), 0).astype(np.int64),
        "gpu_type": np.array(["V100", "P100", "T4", "V100M32", "MISC"])[rng.integers(0, 5, n)],
        "flops_compute_bound": feat(1e12), "bytes_memory_bound": feat(1e10),
        "weight_bytes": feat(1e8), "embedding_bytes_touched": feat(1e6),
        "input_bytes": feat(1e7),
    })
    pacsv.write_csv(table, path)


def main() -> int:
    import pandas as pd

    from traincast.analysis.characterize import characterize
    from traincast.trace import read_trace

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.csv"
        write_trace(path)
        size_mb = path.stat().st_size / 1e6

        t0 = time.perf_counter()
        df = pd.read_csv(path)
        df["gpu_time_s"] = df["n_gpus"] * (df["end_time_s"] - df["start_time_s"])
        base = df.groupby("architecture").agg(jobs=("job_id", "size"), gpus=("n_gpus", "sum"),
                                              gpu_time_s=("gpu_time_s", "sum"))
        t_base = time.perf_counter() - t0
        del df

        t0 = time.perf_counter()
        jobs = read_trace(path, "csv", Path(tmp) / "bench.duckdb")
        t_ingest = time.perf_counter() - t0
        t1 = time.perf_counter()
        result = characterize(jobs, fill=False)
        t_char = time.perf_counter() - t1
        total = t_ingest + t_char

    assert result["jobs"] == JOBS, result["jobs"]
    for arch, row in base.iterrows():
        assert row["jobs"] == result["by_architecture"][arch]["jobs"]
    print(f"trace: {JOBS:,} jobs, {size_mb:.0f} MB CSV")
    print(f"traincast ingest (DuckDB) + load: {t_ingest:6.2f} s")
    print(f"traincast characterize:           {t_char:6.2f} s "
          f"({result['breakdown']['jobs']:,} jobs with a predicted breakdown)")
    print(f"traincast total:                  {total:6.2f} s   (target <= {TARGET_S:g} s)")
    print(f"baseline pandas read_csv+groupby: {t_base:6.2f} s")
    print(f"ratio traincast / baseline:       {total / t_base:6.2f}x")
    return verdict(total, TARGET_S)


if __name__ == "__main__":
    sys.exit(main())
