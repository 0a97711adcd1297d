"""A store's jobs read chunk by chunk, so analyses of any trace size take bounded memory.

:class:`JobChunks` streams the job table out of the DuckDB store (one read-only query, read as
Arrow record batches of :data:`CHUNK_ROWS` rows) and prepares each chunk for the model as
:func:`traincast.trace.prepare_jobs` does a whole table: architectures inferred, the assumed
workload given, features filled. Every step is a function of the job's own row (the
``mix`` workload is drawn from ``md5(job_id)``), so the chunks together are the whole table
prepared at once. What needs the whole trace is read from the store by SQL beforehand: the
number of jobs, and the trace end of each source (:meth:`JobChunks.trace_ends_s`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from traincast.jobs import unnamed_hardware
from traincast.trace.store import CHUNK_ROWS, Store, db_path

if TYPE_CHECKING:
    from traincast.hardware.catalog import Catalog



class JobChunks:
    """The jobs of the store ``db`` (all sources, or ``source_ids``), in ingest order, as
    prepared tables of at most ``chunk_rows`` jobs. ``rows``: the number of jobs;
    :attr:`assumed` (after the chunks were read): what was assumed for jobs without a
    workload, as :func:`traincast.trace.workload_assumption` says of a whole table;
    :attr:`unnamed_hardware`: the jobs with GPUs that name neither a GPU type nor a node
    (:func:`traincast.jobs.unnamed_hardware`), priced on the catalog's default node."""

    def __init__(self, db: str | Path | None = None, source_ids: Iterable[int] | None = None,
                 chunk_rows: int = CHUNK_ROWS, catalog: Catalog | None = None,
                 workload: str | None = None) -> None:
        self.path = db_path(db)
        self.source_ids = None if source_ids is None else [int(s) for s in source_ids]
        self.chunk_rows = max(int(chunk_rows), 1)
        self.catalog = catalog
        self.workload = workload
        self.assumed: dict[str, Any] | None = None
        self.unnamed_hardware = 0
        with Store(self.path) as store:
            self.rows = store.count(self.source_ids)

    def trace_ends_s(self) -> tuple[float | None, dict[float, float]]:
        """The trace end and that of each source (:meth:`~traincast.trace.store.Store.
        trace_ends_s`)."""
        with Store(self.path) as store:
            return store.trace_ends_s(self.source_ids)

    def __iter__(self) -> Iterator[pa.Table]:
        from traincast.trace import prepare_jobs, workload_assumption

        self.assumed, self.unnamed_hardware = None, 0
        with Store(self.path) as store:
            for batch in store.batches(self.source_ids, self.chunk_rows):
                chunk = prepare_jobs(batch, self.catalog, self.workload)
                self.assumed = merge_assumptions(self.assumed,
                                                 workload_assumption(chunk, self.workload))
                self.unnamed_hardware += int(unnamed_hardware(
                    {c: chunk[c] for c in chunk.column_names},
                    chunk["n_gpus"].to_numpy().astype(np.float64)
                    if "n_gpus" in chunk.column_names else np.zeros(chunk.num_rows)).sum())
                yield chunk



def merge_assumptions(a: dict[str, Any] | None, b: dict[str, Any] | None
                      ) -> dict[str, Any] | None:
    """Two parts' :func:`traincast.trace.workload_assumption` as that of the whole."""
    if a is None or b is None:
        return a or b
    counts = dict(a["by_workload"])
    for k, v in b["by_workload"].items():
        counts[k] = counts.get(k, 0) + v
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return {"workload": a["workload"], "jobs": a["jobs"] + b["jobs"], "by_workload": dict(ranked),
            "exceeds_gpu_memory": a.get("exceeds_gpu_memory", 0)
            + b.get("exceeds_gpu_memory", 0)}
