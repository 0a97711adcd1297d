"""``--format csv``: a CSV or Parquet file (by extension) with canonical column names.

Every canonical column is optional except ``job_id`` and ``n_gpus``; ``--map COL=FIELD`` reads
canonical column COL from the file's column FIELD. Missing columns are NULL; a missing or empty
``architecture`` is inferred from the GPU count (flag ``arch_inferred``). A ``censored`` column
is used when present, else a job is censored when its status is running/pending/waiting/queued,
or it has a start time and no end time.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import duckdb

from traincast.trace.adapters.base import (
    Field,
    Plan,
    apply_mapping,
    field_from,
    q,
    require,
    running_status,
    source_columns,
    table_relation,
)
from traincast.trace.schema import COLUMNS

NAME = "csv"
REQUIRED = ("job_id", "n_gpus")


def plans(con: duckdb.DuckDBPyConnection, paths: list[Path],
          mapping: Mapping[str, str] | None) -> list[Plan]:
    out = []
    for path in paths:
        rel = table_relation(path)
        cols = source_columns(con, rel)
        mapped = set((mapping or {}).keys())
        require(NAME, path, cols, [c for c in REQUIRED if c not in mapped])
        fields = {c: field_from(c, q(c)) for c in COLUMNS if c in cols}
        fields = apply_mapping(fields, mapping, cols, NAME, path)
        censored_src = (mapping or {}).get("censored", "censored")
        if censored_src in cols:
            censored = f"COALESCE(TRY_CAST({q(censored_src)} AS BOOLEAN), FALSE)"
        else:
            status = fields.get("status", Field("NULL")).expr
            start = fields.get("start_time_s", Field("NULL")).expr
            end = fields.get("end_time_s", Field("NULL")).expr
            censored = (f"({running_status(status)} OR (({start}) IS NOT NULL "
                        f"AND ({end}) IS NULL))")
        out.append(Plan(NAME, str(path), rel, fields, censored=censored, files=[str(path)]))
    return out
