"""The canonical job table: column names, Arrow types, and the flags every adapter sets.

One row is one training job. Times are seconds (any origin; traces shift them). ``n_gpus`` is a
float: fractional GPUs (a job sharing a GPU, ``plan_gpu = 50`` in PAI) are kept as fractions.
The features are per-iteration, per data-parallel replica (docs/model.md); null = unknown
(filled from the zoo profile of ``workload`` by :func:`traincast.trace.fill_features`).

Placement, as the trace gives it (null = the trace does not say; the single default lives in
``traincast.resolve``): ``gpus_per_worker`` = GPUs of one worker (process/instance);
``gpus_per_node`` = GPUs of this job on each node it uses; ``workers_per_node`` = workers of
this job on each node it uses. The store never fills a column from the hardware catalog.

Flags (booleans, never null):

* ``censored`` — the job was still running when the trace ended (its end time is the trace end
  or unknown): its duration is a lower bound;
* ``zero_gpu`` — the job asked for no GPU (kept, so job counts match the trace);
* ``fractional_gpu`` — ``n_gpus`` is not a whole number (GPU sharing);
* ``arch_inferred`` — the trace gives no architecture (the stored ``architecture`` is null) for
  a job of a positive GPU count: it is not a fact of the trace but inferred by the rule in
  :data:`INFER_RULE` when jobs are resolved (:func:`traincast.trace.infer_architecture`,
  docs/traces.md); a job of 0 GPUs has none to infer.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from traincast.architectures import ARCHITECTURES
from traincast.bounds import BATCH_MAX, COUNT_MAX, feature_max
from traincast.jobs import FEATURES
from traincast.units import fmt_exp

FEATURE_COLUMNS: tuple[str, ...] = FEATURES
"""Per-iteration features (:data:`traincast.jobs.FEATURES`)."""

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
    ("gpus_per_node", pa.float64(), "DOUBLE"),
    ("workers_per_node", pa.int64(), "BIGINT"),
    ("gpu_type", pa.string(), "VARCHAR"),
    ("node", pa.string(), "VARCHAR"),
    ("workload", pa.string(), "VARCHAR"),
    ("batch_size", pa.int64(), "BIGINT"),
    *((f, pa.float64(), "DOUBLE") for f in FEATURE_COLUMNS),
    ("gpu_util", pa.float64(), "DOUBLE"),
)
FLAG_COLUMNS: tuple[str, ...] = ("censored", "zero_gpu", "fractional_gpu", "arch_inferred")

COLUMNS: tuple[str, ...] = tuple(c[0] for c in _COLUMNS)
"""The canonical columns (docs/traces.md), in order."""
ALL_COLUMNS: tuple[str, ...] = (*COLUMNS, *FLAG_COLUMNS, "source_id")
"""What the store holds and :func:`traincast.trace.store.load_jobs` returns."""

SQL_TYPE: dict[str, str] = {**{n: s for n, _, s in _COLUMNS},
                            **dict.fromkeys(FLAG_COLUMNS, "BOOLEAN"), "source_id": "INTEGER"}
SCHEMA: pa.Schema = pa.schema([*(pa.field(n, t) for n, t, _ in _COLUMNS),
                               *(pa.field(f, pa.bool_(), nullable=False) for f in FLAG_COLUMNS),
                               pa.field("source_id", pa.int32())])

TIME_COLUMNS: tuple[str, ...] = ("submit_time_s", "start_time_s", "end_time_s")
NUMERIC_COLUMNS: tuple[str, ...] = tuple(n for n, t, _ in _COLUMNS if t != pa.string())

TIME_MIN_S = -62_135_596_800.0
"""The earliest time a trace may hold: 0001-01-01T00:00:00Z in seconds since the epoch (times
may be negative: traces shift them to any origin)."""
TIME_MAX_S = 253_402_300_799.0
"""The latest time a trace may hold: 9999-12-31T23:59:59Z (a year-10000 date is not a time)."""


DURATION_MAX_S = 1e9
"""The longest a job may run (end − start, and a trace's duration column): 1e9 s, about 31.7
years, longer than any GPU cluster has existed."""
DURATION_MAX_TEXT = fmt_exp(DURATION_MAX_S)
""":data:`DURATION_MAX_S` as the bad-row reports write it (``1e9``)."""


@dataclass(frozen=True)
class Bound:
    """The physical range of a canonical column: a finite value outside ``[lo, hi]`` is a bad
    row, reported with ``why`` (a value that does not parse, NaN aside, is one already)."""

    lo: float
    hi: float
    why: str


BOUNDS: dict[str, Bound] = {
    **{t: Bound(TIME_MIN_S, TIME_MAX_S, "a time between 0001-01-01 and 9999-12-31 UTC")
       for t in TIME_COLUMNS},
    **{c: Bound(0, COUNT_MAX, f"a count from 0 to {COUNT_MAX:,}")
       for c in ("n_gpus", "n_workers", "n_ps", "gpus_per_worker", "gpus_per_node",
                 "workers_per_node")},
    "batch_size": Bound(0, BATCH_MAX, f"a batch size from 0 to {fmt_exp(BATCH_MAX)}"),
    **{f: Bound(0, feature_max(f), f"{'FLOPs' if f == 'flops_compute_bound' else 'bytes'} "
                f"per iteration from 0 to {fmt_exp(feature_max(f))}")
       for f in FEATURE_COLUMNS},
    "gpu_util": Bound(0, 1, "a utilization from 0 to 1: a percentage divided by 100, "
                            "35 -> 0.35"),
}
"""The physical bounds of every numeric canonical column (docs/traces.md, "Bad input"): times
within years 1–9999 (:data:`TIME_MIN_S`, :data:`TIME_MAX_S`); GPU, worker, PS and node counts
(and GPUs or workers per worker or node) from 0 to :data:`COUNT_MAX`; batch size from 0 to
:data:`BATCH_MAX`; FLOPs from 0 to :data:`FLOPS_MAX` and bytes from 0 to :data:`BYTES_MAX` per
iteration; ``gpu_util`` from 0 to 1. A job also may not end before it starts, nor run longer
than :data:`DURATION_MAX_S` (:meth:`traincast.trace.adapters.base.Plan.all_checks`)."""
KNOWN_ARCHITECTURES: tuple[str, ...] = ARCHITECTURES

INFER_RULE = ("n = training GPUs (n_workers x gpus_per_worker where both are given, capped at "
              "n_gpus; else n_gpus): n <= 1 -> 1w1g; n <= GPUs per node (the trace's "
              "gpus_per_node, else the GPUs of its node preset, of its GPU type's default node, "
              "or of the default node) -> allreduce-local; more -> allreduce-cluster; 0 GPUs "
              "-> none (not training on GPUs) (traincast.resolve)")
ADDED_COLUMNS: tuple[str, ...] = ("gpus_per_node", "workers_per_node",
                                  "embedding_allreduce_bytes")
"""Added after the store's first release: an older store file gets them (null) on open."""

