"""``--format helios``: the Helios job traces (SenseTime, SC'21; ``cluster_log.csv``: job_id,
user, vc, jobname, gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time,
duration, queue; times as ``YYYY-MM-DD HH:MM:SS`` or seconds).

Mapping: ``job_id`` = job_id; ``user``; ``status`` = state; ``submit_time_s`` /
``start_time_s`` / ``end_time_s`` = submit_time / start_time / end_time in seconds since the
epoch; when end_time is empty and duration is given, end = start + duration; ``n_gpus`` =
gpu_num; ``gpus_per_node`` = gpu_num / node_num when node_num > 0 (the trace counts nodes, not
workers: ``gpus_per_worker`` and ``workers_per_node`` stay NULL); no architecture (inferred).
Censored: state RUNNING/PENDING, or a start without an end.
Bad rows beside the generic ones (:meth:`~traincast.trace.adapters.base.Plan.all_checks`): a
node_num that is not a whole number from 0 to :data:`~traincast.bounds.COUNT_MAX`; a
duration that is not a number from 0 to :data:`~traincast.trace.schema.DURATION_MAX_S`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import duckdb

from traincast.bounds import COUNT_MAX
from traincast.trace.adapters.base import (
    Check,
    Field,
    Plan,
    bound_check,
    duration_checks,
    file_plans,
    num,
    present,
    text,
    ts,
    unfinished,
    whole_check,
)

NAME = "helios"
REQUIRED = ("job_id", "gpu_num", "state", "submit_time", "start_time", "end_time")
FOLDER = ("cluster_log.csv", "*/cluster_log.csv")
"""A folder given as the trace: its ``cluster_log.csv``, or one per cluster folder in it (the
release's ``data/<cluster>/cluster_log.csv``); the other tables beside it are not read."""


def _fields(cols: list[str]) -> dict[str, Field]:
    dur = num("duration") if "duration" in cols else "NULL"
    nodes = num("node_num") if "node_num" in cols else "NULL"
    return {
        "job_id": Field(text("job_id"), column="job_id"),
        "user": Field(text("user") if "user" in cols else "NULL"),
        "status": Field(text("state")),
        "submit_time_s": Field(ts("submit_time"), "submit_time", "submit_time"),
        "start_time_s": Field(ts("start_time"), "start_time", "start_time"),
        "end_time_s": Field(f"COALESCE({ts('end_time')}, {ts('start_time')} + {dur})",
                            "end_time"),
        "n_gpus": Field(num("gpu_num"), "gpu_num", "gpu_num"),
        "gpus_per_node": Field(f"CASE WHEN {nodes} > 0 THEN {num('gpu_num')} / {nodes} END"),
    }


def _checks(cols: list[str]) -> list[Check]:
    """node_num: a whole count of nodes; duration: seconds from 0 to the longest job."""
    out: list[Check] = []
    if "node_num" in cols:
        n = num("node_num")
        out += [Check("node_num", f"{present('node_num')} AND {n} IS NULL",
                      "CAST(node_num AS VARCHAR)"),
                whole_check("node_num", "nodes"),
                bound_check("node_num", "CAST(node_num AS VARCHAR)", 0, COUNT_MAX,
                            f"a count from 0 to {COUNT_MAX:,}", n)]
    if "duration" in cols:
        out += duration_checks("duration")
    return out


def plans(con: duckdb.DuckDBPyConnection, paths: list[Path],
          mapping: Mapping[str, str] | None) -> list[Plan]:
    return file_plans(con, paths, mapping, NAME, REQUIRED, _fields,
                      lambda fields, _: unfinished(fields), checks_of=_checks)
