"""``--format philly``: the Microsoft Philly ``cluster_job_log`` (JSON: a list of jobs, each
``{jobid, user, vc, status, submitted_time, attempts: [{start_time, end_time, detail: [{ip,
gpus: [...]}]}]}``; times ``YYYY-MM-DD HH:MM:SS`` or ``None``).

Mapping: ``job_id`` = jobid; ``user``; ``status`` (Pass/Killed/Failed/Running);
``submit_time_s`` = submitted_time; ``start_time_s`` = the first attempt's start_time;
``end_time_s`` = the last attempt's end_time; ``n_gpus`` = GPUs listed in the last attempt's
detail (summed over its machines); ``gpus_per_worker`` = those GPUs / its machines; a job with
no attempt never ran: ``n_gpus`` NULL. No GPU type or architecture (inferred from the GPU
count). Censored: status Running/Queued, or a start without an end. The row number in error
reports is the job's position in the list (1-based).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import duckdb

from traincast.trace.adapters.base import (
    Field,
    Plan,
    apply_mapping,
    lit,
    require,
    running_status,
    source_columns,
    text,
    ts,
)

NAME = "philly"
REQUIRED = ("jobid", "status", "submitted_time", "attempts")
_COLUMNS = ("{jobid: 'VARCHAR', user: 'VARCHAR', vc: 'VARCHAR', status: 'VARCHAR', "
            "submitted_time: 'VARCHAR', attempts: 'STRUCT(start_time VARCHAR, end_time VARCHAR, "
            "detail STRUCT(ip VARCHAR, gpus VARCHAR[])[])[]'}")


def plans(con: duckdb.DuckDBPyConnection, paths: list[Path],
          mapping: Mapping[str, str] | None) -> list[Plan]:
    out = []
    for path in paths:
        probe = f"read_json({lit(path)}, format='array')"
        try:
            cols = source_columns(con, probe)
        except duckdb.Error as exc:
            from traincast.errors import TraincastError
            raise TraincastError(f"{NAME}: {path}: not a JSON list of jobs ({exc})".split("\n")[0],
                                 hint="the Philly cluster_job_log is one JSON array") from None
        require(NAME, path, cols, REQUIRED)
        rel = (f"(SELECT row_number() OVER () AS _row, *, attempts[-1].detail AS _detail "
               f"FROM read_json({lit(path)}, format='array', columns={_COLUMNS}))")
        gpus = ("CASE WHEN len(attempts) > 0 THEN CAST(list_sum(list_transform(_detail, "
                "lambda d: len(d.gpus))) AS DOUBLE) END")
        fields = {
            "job_id": Field(text("jobid")),
            "user": Field(text("user")),
            "status": Field(text("status")),
            "submit_time_s": Field(ts("submitted_time"), "submitted_time"),
            "start_time_s": Field(ts("attempts[1].start_time"), "attempts[1].start_time"),
            "end_time_s": Field(ts("attempts[-1].end_time"), "attempts[-1].end_time"),
            "n_gpus": Field(f"COALESCE({gpus}, CASE WHEN len(attempts) > 0 THEN 0.0 END)"),
            "gpus_per_worker": Field(f"CASE WHEN len(_detail) > 0 THEN {gpus} / len(_detail) "
                                     f"END"),
        }
        fields = apply_mapping(fields, mapping, cols, NAME, path)
        censored = (f"({running_status('status')} OR (({fields['start_time_s'].expr}) IS NOT "
                    f"NULL AND ({fields['end_time_s'].expr}) IS NULL))")
        out.append(Plan(NAME, str(path), rel, fields, censored=censored, files=[str(path)]))
    return out
