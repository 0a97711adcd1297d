"""``--format elasticflow``: the ElasticFlow job traces (``job_id, submission_time, duration,
num_gpu``; seconds).

Mapping: ``job_id`` = job_id; ``submit_time_s`` = ``start_time_s`` = submission_time (the trace
has no queueing delay: a job is taken to start when submitted); ``end_time_s`` = submission_time
+ duration (a duration that is negative or longer than
:data:`~traincast.trace.schema.DURATION_MAX_S` is a bad row); ``n_gpus`` = num_gpu; no GPU
type, workload,
placement (``gpus_per_worker``, ``gpus_per_node``, ``workers_per_node`` NULL) or architecture
(inferred from the GPU count); no job is censored (every row has a duration).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import duckdb

from traincast.trace.adapters.base import (
    Check,
    Field,
    Plan,
    duration_checks,
    file_plans,
    num,
    present,
    text,
    whole_check,
)

NAME = "elasticflow"
REQUIRED = ("job_id", "submission_time", "duration", "num_gpu")
FOLDER = ("*.csv", "*.csv.gz")
"""A folder given as the trace: its CSV files, one cluster each (``cluster04.csv``, ...)."""


def _fields(cols: list[str]) -> dict[str, Field]:
    return {
        "job_id": Field(text("job_id"), column="job_id"),
        "submit_time_s": Field(num("submission_time"), "submission_time", "submission_time"),
        "start_time_s": Field(num("submission_time")),
        "end_time_s": Field(f"{num('submission_time')} + {num('duration')}", "duration"),
        "n_gpus": Field(num("num_gpu"), "num_gpu", "num_gpu"),
    }


def _checks(_: list[str]) -> list[Check]:
    """num_gpu is a whole count of GPUs; a duration is seconds from 0 to the longest job
    (times may be negative, durations not); a duration that is not a finite number, or one
    without a submission time (the end is submission_time + duration), is named at its own
    field, and so is a missing duration (every ElasticFlow job has one: without it the job
    would have a start and no end)."""
    parsed, bound = duration_checks("duration", " (not a finite number of seconds)")
    return [whole_check("num_gpu", "GPUs"), parsed,
            Check("submission_time",
                  f"NOT {present('submission_time')} AND {present('duration')}",
                  "ltrim(coalesce(CAST(submission_time AS VARCHAR), '') || ' (missing: the "
                  "job ends at submission_time + duration)')"),
            Check("duration", f"NOT {present('duration')} AND {present('submission_time')}",
                  "ltrim(coalesce(CAST(duration AS VARCHAR), '') || ' (missing: every job of "
                  "the trace has one, its end is submission_time + duration)')"),
            bound]


def plans(con: duckdb.DuckDBPyConnection, paths: list[Path],
          mapping: Mapping[str, str] | None) -> list[Plan]:
    return file_plans(con, paths, mapping, NAME, REQUIRED, _fields, checks_of=_checks)
