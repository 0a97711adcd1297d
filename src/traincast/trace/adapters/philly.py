"""``--format philly``: the Microsoft Philly ``cluster_job_log`` (JSON: a list of jobs, each
``{jobid, user, vc, status, submitted_time, attempts: [{start_time, end_time, detail: [{ip,
gpus: [...]}]}]}``; times ``YYYY-MM-DD HH:MM:SS`` or ``None``).

Mapping: ``job_id`` = jobid; ``user``; ``status`` (Pass/Killed/Failed/Running);
``submit_time_s`` = submitted_time; ``start_time_s`` = the first attempt's start_time;
``end_time_s`` = the last attempt's end_time; ``n_gpus`` = GPUs listed in the last attempt's
detail (summed over its machines); ``gpus_per_node`` = those GPUs / its machines (the mean
when machines hold different counts; the log lists machines, not workers: ``gpus_per_worker``
and ``workers_per_node`` stay NULL); a job with
no attempt never ran: ``n_gpus`` NULL. No GPU type or architecture (inferred from the GPU
count). Censored: status Running/Queued, or a start without an end. The row number in error
reports is the job's position in the list (1-based).

The file must be one whole JSON array in UTF-8 (:func:`json_end`): a file that does not start
with ``[`` (binary bytes, UTF-16, a JSON object) or does not end with ``]`` (cut, between jobs
or inside one) is an error naming the file, as DuckDB would otherwise read the jobs before a
cut between two of them as the whole list.
"""

from __future__ import annotations

import functools
import gzip
from collections.abc import Iterable, Mapping
from pathlib import Path

import duckdb

from traincast.errors import TraincastError
from traincast.files import open_bytes
from traincast.trace.adapters.base import (
    READ_ERRORS,
    Field,
    FileEnd,
    Plan,
    bytes_encoding,
    file_lit,
    file_plans,
    lit,
    not_object_error,
    source_columns,
    source_name,
    text,
    ts,
    unfinished,
)

NAME = "philly"
REQUIRED = ("jobid", "status", "submitted_time", "attempts")
FOLDER = ("cluster_job_log", "cluster_job_log.json", "cluster_job_log.gz",
          "cluster_job_log.json.gz")
"""A folder given as the trace (the release's ``trace-data``): its ``cluster_job_log``; the
utilization and machine tables beside it are not read."""
_KEYS = {"jobid": "VARCHAR", "user": "VARCHAR", "vc": "VARCHAR", "status": "VARCHAR",
         "submitted_time": "VARCHAR", "attempts": "JSON"}
"""The release's keys and how they are read: text, and ``attempts`` as JSON (a value of the
wrong type inside one job makes that job's fields NULL, and a bad row where a field had a
value, not the whole file unreadable, as a typed STRUCT column would)."""
_START = "json_extract_string(attempts, '$[0].start_time')"
_END = "json_extract_string(attempts, '$[#-1].end_time')"
_RAN = "json_array_length(attempts) > 0"
# machines of the last attempt: unknown when it is not an object; none when its detail is
# missing or null, unknown when that is not a list; GPUs of a machine: none when its gpus
# are missing or null, unknown when the machine is not an object or its gpus not a list (a
# job with an unknown one: GPUs unknown)
_MACHINES = ("CASE WHEN json_type(json_extract(attempts, '$[#-1]')) <> 'OBJECT' THEN NULL "
             "WHEN _detail IS NULL OR json_type(_detail) = 'NULL' THEN 0 "
             "WHEN json_type(_detail) = 'ARRAY' THEN json_array_length(_detail) END")
_PER_MACHINE = ("list_transform(json_extract(_detail, '$[*]'), lambda m: CASE "
                "WHEN json_type(m) <> 'OBJECT' THEN NULL "
                "WHEN json_extract(m, '$.gpus') IS NULL "
                "OR json_type(json_extract(m, '$.gpus')) = 'NULL' THEN 0 "
                "WHEN json_type(json_extract(m, '$.gpus')) = 'ARRAY' "
                "THEN json_array_length(json_extract(m, '$.gpus')) END)")
_GPUS = (f"CASE WHEN {_RAN} AND {_MACHINES} > 0 AND list_bool_and(list_transform("
         f"{_PER_MACHINE}, lambda g: g IS NOT NULL)) THEN CAST(list_sum({_PER_MACHINE}) "
         "AS DOUBLE) END")
FIELDS = {
    "job_id": Field(text("jobid"), column="jobid"),
    "user": Field(text("user")),
    "status": Field(text("status")),
    "submit_time_s": Field(ts("submitted_time"), "submitted_time", "submitted_time"),
    "start_time_s": Field(ts(_START), _START),
    "end_time_s": Field(ts(_END), _END),
    "n_gpus": Field(f"COALESCE({_GPUS}, CASE WHEN {_RAN} AND {_MACHINES} = 0 THEN 0.0 END)"),
    "gpus_per_node": Field(f"CASE WHEN {_MACHINES} > 0 THEN {_GPUS} / {_MACHINES} END"),
}


def _probe(path: Path) -> str:
    """The JSON as it is (its keys are the columns checked against REQUIRED); an empty array,
    which has no keys, as the jobs' relation (no job: ``ingest`` says so)."""
    if _empty_array(path):
        return _relation(path)
    return f"read_json({file_lit(path)}, format='array')"


def _empty_array(path: Path) -> bool:
    """Whether the file is ``[]`` (spaces and a byte-order mark aside)."""
    with open_bytes(path) as f:
        head = f.read(_EDGE + 1)
    return len(head) <= _EDGE and bytes(
        c for c in head.removeprefix(b"\xef\xbb\xbf") if c not in _SPACE) == b"[]"


def _relation(path: Path, mapping: Mapping[str, str] | None = None,
              spelled: Iterable[str] = ()) -> str:
    """The jobs with their position in the list (``_row``); the file's keys ``--map`` names
    read too (as text; in place of the release's key each replaces, ``attempts`` as JSON).
    Keys are matched in any case, as the columns are: each is read as the file spells it
    (``spelled``: the file's keys, ``JobId`` for ``jobid``)."""
    mapping = mapping or {}
    own = {k.lower(): k for k in spelled}
    replaced = {src.lower(): key.lower() for col, key in mapping.items()
                if (f := FIELDS.get(col)) is not None and (src := source_name(f.column))
                and src.lower() != key.lower()}
    keys = {k: t for k, t in _KEYS.items() if k not in replaced}
    for src, key in replaced.items():
        keys.setdefault(key, _KEYS[src])
    for key in mapping.values():
        keys.setdefault(key.lower(), "VARCHAR")
    columns = "{" + ", ".join(f"{lit(own.get(k, k))}: {lit(t)}" for k, t in keys.items()) + "}"
    return (f"(SELECT row_number() OVER () AS _row, * "
            f"FROM read_json({file_lit(path)}, format='array', columns={columns}))")


def _with_machines(rows: str) -> str:
    """The jobs with the last attempt's machines (``_detail``), after ``--map``."""
    return f"(SELECT *, json_extract(attempts, '$[#-1].detail') AS _detail FROM {rows})"


_EDGE = 4096  # bytes read at each end of the file
_SPACE = b" \t\r\n"


def json_end(_: duckdb.DuckDBPyConnection, path: Path) -> FileEnd | None:
    """Check that the file is one JSON array in UTF-8: it starts with ``[`` (after a UTF-8
    byte-order mark and spaces) and ends with ``]``; else a :class:`TraincastError` naming the
    file and what it starts or ends with. Nothing to add to the plan (None)."""
    if path.name.lower().endswith(".gz"):
        with gzip.open(path, "rb") as f:  # read through (EOFError: cut short)
            head = tail = f.read(_EDGE)
            while block := f.read(1 << 23):
                tail = (tail + block)[-_EDGE:]
    else:
        with path.open("rb") as f:
            head = f.read(_EDGE)
            f.seek(max(0, f.seek(0, 2) - _EDGE))
            tail = f.read()
    if bytes_encoding(head) == "utf-16":  # the bytes just read, not the file again
        raise TraincastError(f"{NAME}: {path}: UTF-16 text, not UTF-8",
                             hint="convert it: iconv -f utf-16 -t utf-8 FILE > FILE.utf8.json")
    start = head.removeprefix(b"\xef\xbb\xbf").lstrip(_SPACE)
    if not start.startswith(b"["):
        what = "nothing (an empty file)" if not start else repr(start[:16])
        raise TraincastError(f"{NAME}: {path}: not a JSON array of jobs: it starts with {what}",
                             hint="the Philly cluster_job_log is one JSON array of jobs in "
                                  "UTF-8: [{...}, {...}]")
    end = tail.rstrip(_SPACE)
    if not end.endswith(b"]"):
        raise TraincastError(
            f"{NAME}: {path}: not a whole JSON array: it ends with "
            f"{end[-40:].decode('utf-8', 'replace')!r}, not with the array's closing ]: the "
            "file is cut (the jobs after the cut are missing) or has text after the array",
            hint="download or copy the file again, whole")
    return None


def _refuse_non_object(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """An error naming the first element of the file's array that is not a job object (a
    number, a string, a list: ``[{...}, 5, {...}]``), where DuckDB reads such an array as one
    ``json`` column rather than the jobs' keys."""
    try:
        hit = con.sql(f"SELECT i, CAST(json AS VARCHAR) FROM (SELECT row_number() OVER () AS "
                      f"i, json FROM "
                      f"read_json({file_lit(path)}, format='array', records='false')) "
                      "WHERE json_type(json) <> 'OBJECT' LIMIT 1").fetchall()
    except READ_ERRORS:
        return  # said as the file's read error
    if hit:
        raise not_object_error(NAME, path, hit[0][0], str(hit[0][1]))


def plans(con: duckdb.DuckDBPyConnection, paths: list[Path],
          mapping: Mapping[str, str] | None) -> list[Plan]:
    @functools.cache  # the check below and each plan's relation read the keys once
    def keys(path: Path) -> list[str]:
        try:
            return source_columns(con, _probe(path))
        except READ_ERRORS:
            return []

    for path in paths:
        if keys(path) == ["json"]:  # the elements are not all objects: no keys to read
            _refuse_non_object(con, path)
    return file_plans(con, paths, mapping, NAME, REQUIRED, lambda _: FIELDS,
                      lambda fields, _: unfinished(fields),
                      relation=lambda path: _relation(path, mapping, keys(path)),
                      probe=_probe, ending=json_end, over=_with_machines, csv_file=False)
