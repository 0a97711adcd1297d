"""Cluster traces: canonical job table (``schema``), adapters per public trace format
(``adapters``), the DuckDB store (``store``), the bundled synthetic sample (``sample``).

Two helpers shared by every command that reads jobs:

* :func:`jobs_from_args` — ``[TRACE | --db FILE]``: ingest TRACE into the store on the way and
  return its jobs, or read the whole store;
* :func:`fill_features` — fill unknown features and batch size from the zoo profile of each
  job's ``workload``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from traincast.trace.schema import FEATURE_COLUMNS
from traincast.trace.store import Progress, ingest, load_jobs

__all__ = ["fill_features", "ingest", "jobs_from_args", "load_jobs", "parse_mapping"]


def parse_mapping(items: Sequence[str] | None) -> dict[str, str]:
    """``["gpu_type=model", ...]`` (``--map COL=FIELD``) -> ``{"gpu_type": "model"}``."""
    from traincast.errors import TraincastError

    out: dict[str, str] = {}
    for item in items or []:
        col, sep, field = item.partition("=")
        if not sep or not col.strip() or not field.strip():
            raise TraincastError(f"--map {item!r}: expected COL=FIELD",
                                 hint="e.g. --map n_gpus=num_gpu")
        out[col.strip()] = field.strip()
    return out


def jobs_from_args(trace: str | Path | Sequence[str | Path] | None = None,
                   db: str | Path | None = None, format: str = "csv",
                   mapping: Mapping[str, str] | None = None, *, strict: bool = False,
                   progress: Progress | None = None) -> pa.Table:
    """Jobs for a command taking ``[TRACE | --db FILE]``.

    TRACE given: it is ingested into the store (``db``, default ``traincast.duckdb`` in the
    working directory; unchanged files are not ingested twice) and its jobs are returned.
    No TRACE: every job in the store.
    """
    if trace is None or (isinstance(trace, Sequence) and not isinstance(trace, str)
                         and len(trace) == 0):
        return load_jobs(db)
    report = ingest(trace, format=format, db=db, mapping=mapping, strict=strict,
                    progress=progress)
    return load_jobs(db, [s["source_id"] for s in report["sources"]])


def _workload_features(name: str) -> dict[str, Any] | None:
    from traincast.zoo.profiles import workload_features

    return workload_features(name)


def fill_features(jobs: pa.Table) -> pa.Table:
    """Fill null features and batch size from the zoo profile of each job's ``workload``.

    Values given in the trace are kept; jobs whose workload is unknown to the zoo keep NULL
    features (their predicted times are then unknown). One profile lookup per distinct workload.
    """
    if "workload" not in jobs.column_names or jobs.num_rows == 0:
        return jobs
    enc = pc.cast(jobs["workload"], pa.string()).combine_chunks().dictionary_encode()
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    names = enc.dictionary.to_pylist()
    profiles = [_workload_features(n) if n else None for n in names]
    if not any(profiles):
        return jobs
    for col in (*FEATURE_COLUMNS, "batch_size"):
        lut = np.array([np.nan if not p or p.get(col) is None else float(p[col])
                        for p in profiles] + [np.nan])
        fill = lut[codes]
        if col in jobs.column_names:
            cur = jobs[col].to_numpy(zero_copy_only=False).astype(np.float64)
            idx = jobs.column_names.index(col)
        else:
            cur = np.full(jobs.num_rows, np.nan)
            idx = -1
        merged = np.where(np.isnan(cur), fill, cur)
        typ = pa.int64() if col == "batch_size" else pa.float64()
        arr = pa.array(merged, type=pa.float64(), from_pandas=True).cast(typ)
        jobs = jobs.set_column(idx, col, arr) if idx >= 0 else jobs.append_column(col, arr)
    return jobs
