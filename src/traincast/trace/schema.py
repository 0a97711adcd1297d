"""The canonical job table: column names, Arrow types, and the flags every adapter sets.

One row is one training job. Times are seconds (any origin; traces shift them). ``n_gpus`` is a
float: fractional GPUs (a job sharing a GPU, ``plan_gpu = 50`` in PAI) are kept as fractions.
The five features are per-iteration, per data-parallel replica (DESIGN.md); null = unknown
(filled from the zoo profile of ``workload`` by :func:`traincast.trace.fill_features`).

Flags (booleans, never null):

* ``censored`` — the job was still running when the trace ended (its end time is the trace end
  or unknown): its duration is a lower bound;
* ``zero_gpu`` — the job asked for no GPU (kept, so job counts match the trace);
* ``fractional_gpu`` — ``n_gpus`` is not a whole number (GPU sharing);
* ``arch_inferred`` — the trace has no architecture; the adapter assigned one by the rule in
  :data:`INFER_RULE` (docs/traces.md).
"""

from __future__ import annotations

import pyarrow as pa

from traincast.arch import ARCHITECTURES

FEATURE_COLUMNS: tuple[str, ...] = ("flops_compute_bound", "bytes_memory_bound", "weight_bytes",
                                    "embedding_bytes_touched", "input_bytes")

# name -> (Arrow type, DuckDB type)
_COLUMNS: tuple[tuple[str, pa.DataType, str], ...] = (
    ("job_id", pa.string(), "VARCHAR"),
    ("submit_time_s", pa.float64(), "DOUBLE"),
    ("start_time_s", pa.float64(), "DOUBLE"),
    ("end_time_s", pa.float64(), "DOUBLE"),
    ("status", pa.string(), "VARCHAR"),
    ("user", pa.string(), "VARCHAR"),
    ("architecture", pa.string(), "VARCHAR"),
    ("n_gpus", pa.float64(), "DOUBLE"),
    ("n_workers", pa.int64(), "BIGINT"),
    ("n_ps", pa.int64(), "BIGINT"),
    ("gpus_per_worker", pa.float64(), "DOUBLE"),
    ("gpu_type", pa.string(), "VARCHAR"),
    ("node", pa.string(), "VARCHAR"),
    ("workload", pa.string(), "VARCHAR"),
    ("batch_size", pa.int64(), "BIGINT"),
    *((f, pa.float64(), "DOUBLE") for f in FEATURE_COLUMNS),
    ("gpu_util", pa.float64(), "DOUBLE"),
)
FLAG_COLUMNS: tuple[str, ...] = ("censored", "zero_gpu", "fractional_gpu", "arch_inferred")

COLUMNS: tuple[str, ...] = tuple(c[0] for c in _COLUMNS)
"""The canonical columns (DESIGN.md), in order."""
ALL_COLUMNS: tuple[str, ...] = (*COLUMNS, *FLAG_COLUMNS, "source_id")
"""What the store holds and :func:`traincast.trace.store.load_jobs` returns."""

SQL_TYPE: dict[str, str] = {**{n: s for n, _, s in _COLUMNS},
                            **dict.fromkeys(FLAG_COLUMNS, "BOOLEAN"), "source_id": "INTEGER"}
SCHEMA: pa.Schema = pa.schema([*(pa.field(n, t) for n, t, _ in _COLUMNS),
                               *(pa.field(f, pa.bool_(), nullable=False) for f in FLAG_COLUMNS),
                               pa.field("source_id", pa.int32())])

TIME_COLUMNS: tuple[str, ...] = ("submit_time_s", "start_time_s", "end_time_s")
NUMERIC_COLUMNS: tuple[str, ...] = tuple(n for n, t, _ in _COLUMNS if t != pa.string())
NONNEGATIVE_COLUMNS: tuple[str, ...] = tuple(n for n in NUMERIC_COLUMNS if n not in TIME_COLUMNS)
"""Counts, sizes, features and utilization: a negative value is a bad row (times may be)."""
KNOWN_ARCHITECTURES: tuple[str, ...] = ARCHITECTURES

DEFAULT_NODE_GPUS = 8
INFER_RULE = ("n_gpus <= 1 -> 1w1g; n_gpus <= GPUs of the GPU type's default node (8 when "
              "unknown) -> allreduce-local; more -> allreduce-cluster")


def empty_table() -> pa.Table:
    """A job table with no rows and the store's schema."""
    return SCHEMA.empty_table()
