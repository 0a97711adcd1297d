"""``--format elasticflow``: the ElasticFlow job traces (``job_id, submission_time, duration,
num_gpu``; seconds).

Mapping: ``job_id`` = job_id; ``submit_time_s`` = ``start_time_s`` = submission_time (the trace
has no queueing delay: a job is taken to start when submitted); ``end_time_s`` = submission_time
+ duration; ``n_gpus`` = num_gpu; no GPU type, workload or architecture (inferred from the GPU
count); no job is censored (every row has a duration).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import duckdb

from traincast.trace.adapters.base import (
    Field,
    Plan,
    apply_mapping,
    num,
    require,
    source_columns,
    table_relation,
    text,
)

NAME = "elasticflow"
REQUIRED = ("job_id", "submission_time", "duration", "num_gpu")


def plans(con: duckdb.DuckDBPyConnection, paths: list[Path],
          mapping: Mapping[str, str] | None) -> list[Plan]:
    out = []
    for path in paths:
        rel = table_relation(path)
        cols = source_columns(con, rel)
        require(NAME, path, cols, REQUIRED)
        fields = {
            "job_id": Field(text("job_id")),
            "submit_time_s": Field(num("submission_time"), "submission_time"),
            "start_time_s": Field(num("submission_time")),
            "end_time_s": Field(f"{num('submission_time')} + {num('duration')}", "duration"),
            "n_gpus": Field(num("num_gpu"), "num_gpu"),
        }
        fields = apply_mapping(fields, mapping, cols, NAME, path)
        out.append(Plan(NAME, str(path), rel, fields, files=[str(path)]))
    return out
