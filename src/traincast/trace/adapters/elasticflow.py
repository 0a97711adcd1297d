"""``--format elasticflow``: the ElasticFlow job traces (``job_id, submission_time, duration,
num_gpu``; seconds).

Mapping: ``job_id`` = job_id; ``submit_time_s`` = ``start_time_s`` = submission_time (the trace
has no queueing delay: a job is taken to start when submitted); ``end_time_s`` = submission_time
+ duration (a negative duration is a bad row); ``n_gpus`` = num_gpu; no GPU type, workload,
placement (``gpus_per_worker``, ``gpus_per_node``, ``workers_per_node`` NULL) or architecture
(inferred from the GPU count); no job is censored (every row has a duration).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import duckdb

from traincast.trace.adapters.base import Check, Field, Plan, file_plans, num, text

NAME = "elasticflow"
REQUIRED = ("job_id", "submission_time", "duration", "num_gpu")


def _fields(cols: list[str]) -> dict[str, Field]:
    return {
        "job_id": Field(text("job_id")),
        "submit_time_s": Field(num("submission_time"), "submission_time"),
        "start_time_s": Field(num("submission_time")),
        "end_time_s": Field(f"{num('submission_time')} + {num('duration')}", "duration"),
        "n_gpus": Field(num("num_gpu"), "num_gpu"),
    }


def plans(con: duckdb.DuckDBPyConnection, paths: list[Path],
          mapping: Mapping[str, str] | None) -> list[Plan]:
    out = file_plans(con, paths, mapping, NAME, REQUIRED, _fields)
    for plan in out:  # a negative duration is a bad value (times may be negative, durations not)
        plan.checks.append(Check("duration", f"{num('duration')} < 0", "duration"))
    return out
