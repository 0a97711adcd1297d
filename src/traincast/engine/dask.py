"""Evaluate scenarios on a Dask cluster over a trace partitioned as Parquet.

Each Parquet partition (file) is one task: the worker reads it with pyarrow, runs the local
engine's ``run_scenarios`` on its rows and returns per-job arrays; the client concatenates
them in partition order. Per-job numbers are therefore the local engine's arithmetic on the
same rows (identical results); summaries are computed from the gathered arrays by the same
code as the local engine.

Without an address a ``LocalCluster`` bound to 127.0.0.1 is started (threads in this process,
no dashboard) and closed afterwards. A remote cluster (``tcp://HOST:PORT``) must see the
Parquet folder: pass one on a shared file system.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from traincast.engine.local import run_scenarios
from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog
from traincast.jobs import Columns
from traincast.scenarios import Scenario

OUTPUT_COLUMNS = ("job_id", "architecture", "n_gpus", "start_time_s", "end_time_s")


def write_partitions(jobs: pa.Table, folder: Path, rows_per_partition: int) -> list[Path]:
    """Write ``jobs`` as ``part-00000.parquet``, ... (row order kept) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    step = max(int(rows_per_partition), 1)
    for i, start in enumerate(range(0, max(jobs.num_rows, 1), step)):
        path = folder / f"part-{i:05d}.parquet"
        pq.write_table(jobs.slice(start, step), path)
        paths.append(path)
    return paths


def _evaluate_partition(path: str, scenarios: list[Scenario], catalog: Catalog, overlap: float,
                        hierarchical: bool) -> dict[str, Any]:
    """One task: read one Parquet partition and run the local engine on it."""
    table = pq.read_table(path)
    cols = Columns.of(table)
    base, reason, results = run_scenarios(cols, scenarios, catalog, overlap, hierarchical)
    out: dict[str, Any] = {k: table.column(k) if k in table.column_names else None
                           for k in OUTPUT_COLUMNS}
    out["base_total_s"] = base
    out["reason"] = reason
    out["results"] = [(r.matched, r.applied, r.total_s) for r in results]
    return out


def partition_files(path: str | Path) -> list[str]:
    """The Parquet files of a partitioned folder (sorted by name), or the one file given."""
    path = Path(path)
    if path.is_file():
        return [str(path)]
    files = sorted(str(p) for p in path.rglob("*.parquet"))
    if not files:
        raise TraincastError(f"{path}: no Parquet files to evaluate",
                             hint="give a job table or a folder of *.parquet partitions")
    return files


@contextmanager
def dask_client(address: str | None = None, workers: int = 1, threads: int = 2) -> Any:
    """A ``distributed.Client``: to ``address``, else to a LocalCluster on 127.0.0.1."""
    from distributed import Client, LocalCluster

    if address:
        with Client(address) as client:
            yield client
        return
    with LocalCluster(n_workers=workers, threads_per_worker=threads, processes=False,
                      protocol="tcp", host="127.0.0.1", scheduler_port=0,
                      dashboard_address=None) as cluster, \
            Client(cluster) as client:
        yield client


def run_dask(source: pa.Table | str | Path, scenarios: list[Scenario], catalog: Catalog,
             overlap: float = 0.0, hierarchical: bool = False, address: str | None = None,
             parquet_dir: str | Path | None = None, rows_per_partition: int = 250_000,
             progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Per-job outcome of every scenario, evaluated partition by partition on Dask.

    ``source``: a job table (written as Parquet partitions into ``parquet_dir``, else a
    temporary folder) or the path of a Parquet file/folder already partitioned.
    Returns ``{"table": pa.Table of OUTPUT_COLUMNS, "base_total_s", "results": [(matched,
    applied, total_s), ...]}`` in row order.
    """
    with tempfile.TemporaryDirectory(prefix="traincast-dask-") as tmp:
        if isinstance(source, pa.Table):
            folder = Path(parquet_dir) if parquet_dir else Path(tmp)
            files = [str(p) for p in write_partitions(source, folder, rows_per_partition)]
        else:
            files = partition_files(source)
        with dask_client(address) as client:
            futures = [client.submit(_evaluate_partition, f, scenarios, catalog, overlap,
                                     hierarchical, pure=False) for f in files]
            parts = []
            for fut in futures:
                parts.append(fut.result())
                if progress:
                    progress(len(parts), len(futures))
    return _concat(parts, len(scenarios))


def _concat(parts: list[dict[str, Any]], n_scenarios: int) -> dict[str, Any]:
    tables = [pa.table({k: p[k] for k in OUTPUT_COLUMNS if p[k] is not None}) for p in parts]
    results = [tuple(np.concatenate([p["results"][i][j] for p in parts]) for j in range(3))
               for i in range(n_scenarios)]
    return {"table": pa.concat_tables(tables, promote_options="permissive"),
            "base_total_s": np.concatenate([p["base_total_s"] for p in parts]),
            "reason": np.concatenate([p["reason"] for p in parts]), "results": results}
