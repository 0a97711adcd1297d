"""``--format helios``: the Helios job traces (SenseTime, SC'21; ``cluster_log.csv``: job_id,
user, vc, jobname, gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time,
duration, queue; times as ``YYYY-MM-DD HH:MM:SS`` or seconds).

Mapping: ``job_id`` = job_id; ``user``; ``status`` = state; ``submit_time_s`` /
``start_time_s`` / ``end_time_s`` = submit_time / start_time / end_time in seconds since the
epoch; when end_time is empty and duration is given, end = start + duration; ``n_gpus`` =
gpu_num; ``gpus_per_worker`` = gpu_num / node_num when node_num > 0; no architecture (inferred).
Censored: state RUNNING/PENDING, or a start without an end.
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
    running_status,
    source_columns,
    table_relation,
    text,
    ts,
)

NAME = "helios"
REQUIRED = ("job_id", "gpu_num", "state", "submit_time", "start_time", "end_time")


def plans(con: duckdb.DuckDBPyConnection, paths: list[Path],
          mapping: Mapping[str, str] | None) -> list[Plan]:
    out = []
    for path in paths:
        rel = table_relation(path)
        cols = source_columns(con, rel)
        require(NAME, path, cols, REQUIRED)
        dur = num("duration") if "duration" in cols else "NULL"
        nodes = num("node_num") if "node_num" in cols else "NULL"
        fields = {
            "job_id": Field(text("job_id")),
            "user": Field(text("user") if "user" in cols else "NULL"),
            "status": Field(text("state")),
            "submit_time_s": Field(ts("submit_time"), "submit_time"),
            "start_time_s": Field(ts("start_time"), "start_time"),
            "end_time_s": Field(f"COALESCE({ts('end_time')}, {ts('start_time')} + {dur})",
                                "end_time"),
            "n_gpus": Field(num("gpu_num"), "gpu_num"),
            "gpus_per_worker": Field(f"CASE WHEN {nodes} > 0 THEN {num('gpu_num')} / {nodes} "
                                     f"END"),
        }
        fields = apply_mapping(fields, mapping, cols, NAME, path)
        censored = (f"({running_status('state')} OR (({fields['start_time_s'].expr}) IS NOT "
                    f"NULL AND ({fields['end_time_s'].expr}) IS NULL))")
        out.append(Plan(NAME, str(path), rel, fields, censored=censored, files=[str(path)]))
    return out
