"""``--format csv``: a CSV or Parquet file (by extension) with canonical column names.

Every canonical column is optional except ``job_id`` and ``n_gpus``; ``--map COL=FIELD`` reads
canonical column COL from the file's column FIELD. Missing columns are NULL (placement columns
``gpus_per_worker``, ``gpus_per_node``, ``workers_per_node`` as the file gives them); a missing
or empty ``architecture`` stays NULL with the flag ``arch_inferred`` (inferred from the GPU count
when jobs are resolved). A ``censored`` column
is used when present, else a job is censored when its status is running/pending/waiting/queued,
or it has a start time and no end time. ``censored`` is a boolean: ``true`` / ``yes`` / 1 or
``false`` / ``no`` / 0 (any case); a missing value is decided by the rule without the column
(the status, or a start and no end), and anything else (``maybe``) is a bad row. A
``duration_s`` (or ``duration``) column of seconds gives the end where ``end_time_s`` is
missing or empty: ``end = start_time_s + duration``; a duration that is
not a number from 0 to :data:`~traincast.trace.schema.DURATION_MAX_S` is a bad row, and
without a start time the file's durations are left unread (a note says so).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import duckdb

from traincast.trace.adapters.base import (
    Check,
    Field,
    Plan,
    boolean,
    boolean_check,
    duration_checks,
    field_from,
    file_plans,
    near_canonical,
    num,
    present,
    q,
    source_columns,
    table_relation,
    unfinished,
)
from traincast.trace.schema import COLUMNS

NAME = "csv"
REQUIRED = ("job_id", "n_gpus")
FOLDER = ("*.csv", "*.csv.gz", "*.parquet", "*.pq")
"""A folder given as the trace: its CSV and Parquet files."""
DURATION_COLUMNS = ("duration_s", "duration")
"""A file's column of job durations in seconds (any case; the first the file has): the end
time where ``end_time_s`` is missing or empty (:func:`with_duration`)."""


def _fields(cols: list[str]) -> dict[str, Field]:
    return {c: field_from(c, q(c)) for c in COLUMNS if c in cols}


def plans(con: duckdb.DuckDBPyConnection, paths: list[Path],
          mapping: Mapping[str, str] | None) -> list[Plan]:
    censored_src = (mapping or {}).get("censored", "censored")

    def censored(fields: dict[str, Field], cols: list[str]) -> str:
        if censored_src.lower() in cols:
            return f"COALESCE({boolean(q(censored_src))}, {unfinished(fields)})"
        return unfinished(fields)

    def checks(cols: list[str]) -> list[Check]:  # a censored value that is no boolean
        if censored_src.lower() in cols:
            return [boolean_check("censored", q(censored_src))]
        return []

    required = [c for c in REQUIRED if c not in (mapping or {})]
    out = file_plans(con, paths, mapping, NAME, required, _fields, censored,
                     checks_of=checks)
    read = {*(c.lower() for c in COLUMNS), *(v.lower() for v in (mapping or {}).values()),
            censored_src.lower(), *(k.lower() for k in (mapping or {})), *DURATION_COLUMNS}
    for plan in out:
        cols = [c for c in source_columns(con, table_relation(Path(plan.file))) if c != "_row"]
        have = frozenset(c.lower() for c in cols)
        with_duration(plan, cols, mapping or {}, censored)
        if note := unread_note([c for c in cols if c.lower() not in read], mapping or {},
                               have):
            plan.notes.append(note)
    return out


def with_duration(plan: Plan, cols: list[str], mapping: Mapping[str, str],
                  censored_of: Callable[[dict[str, Field], list[str]], str]) -> None:
    """A file's :data:`DURATION_COLUMNS` column (not read by a ``--map``): the end time
    ``start_time_s + duration`` where ``end_time_s`` is missing or empty (a given end that does
    not parse is a bad row, as without a duration), its bad rows (``duration_checks``) and
    the censoring again (a job with a duration ended); without a start time, a note."""
    named = {c.lower(): c for c in cols}  # the file's own spelling, for its reports
    mapped = {v.lower() for v in mapping.values()}
    dur = next((named[c] for c in DURATION_COLUMNS if c in named and c not in mapped), None)
    if dur is None:
        return
    start = plan.fields.get("start_time_s")
    if start is None:
        plan.notes.append((f"SELECT count(*) FILTER (WHERE {present(q(dur))}) FROM "
                           f"{plan.relation}",
                           f"row(s) with a {dur} left unread: the end is start_time_s + {dur}, "
                           "and the file has no start_time_s (give it, or --map start_time_s="
                           "COLUMN)"))
        return
    by_duration = f"({start.expr}) + {num(q(dur))}"
    end = plan.fields.get("end_time_s")
    if end is None:
        plan.fields["end_time_s"] = Field(by_duration)
    elif end.raw:  # an end given wins; one that does not parse stays a bad row
        plan.fields["end_time_s"] = Field(
            f"CASE WHEN {present(end.raw)} THEN {end.expr} ELSE {by_duration} END", end.raw,
            end.column)
    else:
        plan.fields["end_time_s"] = Field(f"COALESCE({end.expr}, {by_duration})")
    plan.checks.extend(duration_checks(dur))
    plan.censored = censored_of(plan.fields, list(named))


def unread_note(unread: list[str], mapping: Mapping[str, str],
                present: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """The note of a file's columns the ``csv`` format reads under no name (every canonical
    column is read by its own name or a ``--map``): each that names a canonical column under
    another spelling with the ``--map`` that reads it (:func:`near_canonical`; not one the
    file has by its own name, ``present``), the count of the others; None when every column is
    read or none names a canonical one left unread."""
    near = {c: to for c in unread if (to := near_canonical(c)) and to not in mapping
            and to not in present}
    if not near:
        return None
    others = len(unread) - len(near)
    maps = " ".join(f"--map {to}={c}" for c, to in near.items())
    return (f"SELECT {len(near)}", "column(s) the csv format reads under another name left "
            f"unread: {', '.join(near)} (read them with {maps})"
            + (f"; {others} other column(s) unread" if others else ""))
