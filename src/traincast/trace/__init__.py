"""Cluster traces: canonical job table (``schema``), adapters per public trace format
(``adapters``), the DuckDB store (``store``), the bundled synthetic sample (``sample``).

Reading jobs::

    jobs = read_trace("cluster04.csv", format="elasticflow")        # in memory
    jobs = read_trace(["pai/"], format="pai-2020", db="jobs.duckdb") # kept in a store file
    with Store("jobs.duckdb") as store:                                # the whole store
        store.ingest(paths, format="philly")
        jobs = store.jobs()

The job table holds the trace's facts only. Helpers that fill what the trace does not say:

* :func:`infer_architecture` — an architecture for jobs whose trace gives none
  (:data:`~traincast.trace.schema.INFER_RULE`, flag ``arch_inferred``);
* :func:`fill_features` — fill unknown features and batch size from the zoo profile of each
  job's ``workload``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from traincast.trace.schema import FEATURE_COLUMNS
from traincast.trace.store import Store, ingest, load_jobs, read_trace

if TYPE_CHECKING:
    from traincast.hardware.catalog import Catalog

__all__ = ["Store", "default_workload", "fill_features", "infer_architecture", "ingest",
           "load_jobs", "parse_mapping", "prepare_jobs", "read_trace"]


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


def infer_architecture(jobs: pa.Table, catalog: Catalog | None = None) -> pa.Table:
    """Fill a null ``architecture`` by the rule of :func:`traincast.resolve.resolve` (the one
    place it lives; :data:`~traincast.trace.schema.INFER_RULE` says it in words), read from the
    node sizes alone (:func:`traincast.resolve.architecture_codes`: no links, features or
    checks). Rows whose trace gives an architecture, or no GPU count, are kept as they are."""
    if jobs.num_rows == 0 or "architecture" not in jobs.column_names \
            or jobs["architecture"].null_count == 0:
        return jobs
    from traincast.architectures import ARCHITECTURES
    from traincast.hardware.catalog import load_catalog
    from traincast.resolve import architecture_codes

    codes = architecture_codes(jobs, catalog or load_catalog())
    names = np.array([*ARCHITECTURES, None], dtype=object)[codes]
    merged = pc.coalesce(jobs["architecture"], pa.array(names, type=pa.string()))
    return jobs.set_column(jobs.column_names.index("architecture"), "architecture", merged)


def _workload_features(name: str) -> dict[str, Any] | None:
    from traincast.zoo.profiles import workload_features

    return workload_features(name)


def default_workload(jobs: pa.Table, workload: str) -> pa.Table:
    """``workload`` (a zoo model or workload tag) for every job whose trace gives none."""
    from traincast.errors import TraincastError
    from traincast.zoo.profiles import resolve_workload

    if resolve_workload(workload) is None:
        raise TraincastError(f"--workload {workload}: not a zoo model or workload tag",
                             hint="traincast zoo list shows the names")
    has = "workload" in jobs.column_names
    col = jobs["workload"] if has else pa.nulls(jobs.num_rows, pa.string())
    empty = pc.or_kleene(pc.is_null(col), pc.equal(pc.utf8_trim_whitespace(col), ""))
    filled = pc.if_else(empty, pa.scalar(workload), col)
    return jobs.set_column(jobs.column_names.index("workload"), "workload", filled) if has \
        else jobs.append_column("workload", filled)


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


def prepare_jobs(jobs: pa.Table, catalog: Catalog | None = None,
                 workload: str | None = None) -> pa.Table:
    """A trace's jobs ready for the model: missing architectures inferred
    (:func:`infer_architecture`), ``workload`` given to jobs whose trace names none
    (:func:`default_workload`), unknown features filled from the workloads' zoo profiles
    (:func:`fill_features`)."""
    jobs = infer_architecture(jobs, catalog)
    return fill_features(default_workload(jobs, workload) if workload else jobs)
