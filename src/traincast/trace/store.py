"""The job store: one DuckDB file holding the canonical job table and the sources it came from.

:class:`Store` is the store (``Store(path)``; ``Store()`` = in memory); :meth:`Store.ingest`
runs an adapter's SQL plan over the trace files and appends the jobs in one transaction: bad
rows are counted and reported (file, row, field), then skipped — or, with ``strict``, fail the
whole ingest; any failure rolls back, leaving the store at its last commit (its jobs and
sources as they were).

Rules of an ingest:

* **Same files, same content.** Ingesting the same files again is a no-op when they did not
  change (same size and modification time, or else the same bytes) and replaces their jobs
  when they did, so ``characterize TRACE`` twice does not duplicate jobs. A source's content
  is the sha256 of its file's bytes (:func:`content_hash`, read in blocks, never whole; a
  ``.gz`` file: of its decompressed bytes; a PAI table set: of all its files), kept in the
  ``sources`` table: a copy of an ingested trace under another name (or gzipped) is
  recognised and stored once (the report says which source holds it). :meth:`Store.drop`
  removes sources and their jobs (``traincast sources --drop``).
* **Whole or nothing.** The first ingest into a new store file builds it under a temporary
  name beside it (``.NAME.ingest-PID-N``, with DuckDB's ``.wal``) and renames it into place
  once committed, so a failed or killed ingest (even SIGKILL) leaves no store file; the
  temporary files of a killed ingest are removed by the next ingest beside them. An ingest
  into an existing store is one DuckDB transaction: killed, the store is at its last commit
  (DuckDB's write-ahead log).
* **Ctrl-C** rolls the ingest back and raises :class:`KeyboardInterrupt` (DuckDB reports an
  interrupted query as ``RuntimeError: Query interrupted`` or ``InterruptException``).
* **A full disk** rolls the ingest back and is a :class:`~traincast.errors.TraincastError`
  naming the store file.
* **Parquet** (``ingest(..., parquet=FILE)``): the store's whole job table is exported inside
  the ingest's transaction, to a temporary file renamed into place after the commit
  (:func:`traincast.files.write_whole`): if it cannot be written the ingest is rolled back.

The store keeps the trace's facts only: no column is filled from the hardware catalog (no
default node, GPU or architecture; ``traincast.resolve`` does defaults). A store file written
before a column was added to the schema (:data:`~traincast.trace.schema.ADDED_COLUMNS`,
:data:`SOURCE_ADDED_COLUMNS`) still opens: writing to it adds the column (null for the old
jobs and sources), reading it reads null.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import duckdb
import pyarrow as pa

from traincast.errors import (
    DAMAGED_HINT,
    NoSuchFileError,
    TraincastError,
    disk_full,
    file_cut_short,
    interrupted,
)
from traincast.files import content_sha256, refuse_stream, write_whole
from traincast.trace.adapters import adapter
from traincast.trace.adapters.base import (
    Plan,
    as_type,
    duckdb_head,
    in_folder,
    lit,
    q,
    trace_files,
    typed,
    unreadable,
)
from traincast.trace.schema import ALL_COLUMNS, COLUMNS, FLAG_COLUMNS, SCHEMA, SQL_TYPE
from traincast.units import plural

DEFAULT_DB = "traincast.duckdb"
MAX_ERRORS_SHOWN = 20
Progress = Callable[[str, int, int], None]

SOURCE_COLUMNS: dict[str, str] = {
    "source_id": "INTEGER PRIMARY KEY", "format": "VARCHAR", "files": "VARCHAR",
    "mapping": "VARCHAR", "fingerprint": "VARCHAR", "rows": "BIGINT", "bad_rows": "BIGINT",
    "ingested_at": "TIMESTAMP", "content_hash": "VARCHAR"}
"""The ``sources`` table: one row per ingested file or table set (``files`` and ``mapping``
as JSON text; ``fingerprint`` = the files' names, sizes and modification times;
``content_hash`` = :func:`content_hash` of their bytes, decompressed for ``.gz``)."""
SOURCE_ADDED_COLUMNS: tuple[str, ...] = ("content_hash",)
"""Added to ``sources`` after the store's first release: an older store gets them (null for
its sources, which are then recognised by path and fingerprint only) on its next ingest."""


CHUNK_ROWS = 262_144
"""Jobs per chunk read out of the store (:meth:`Store.batches`): about 100 MB of prepared
columns, model temporaries included."""
MEMORY_LIMIT = "1GB"
"""DuckDB's memory for the store (``SET memory_limit``): beyond it, DuckDB spills its sorts,
windows and staged rows to a temporary folder beside the store, so ingesting and reading a
trace of any size takes bounded memory. ``TRAINCAST_DB_MEMORY`` (e.g. ``8GB``) sets another."""


MIN_MEMORY_BYTES = 64e6


def memory_limit() -> str:
    """The store's DuckDB memory limit: ``TRAINCAST_DB_MEMORY`` (a size such as ``4GB`` or
    ``512MiB``, at least 64 MB), else :data:`MEMORY_LIMIT`."""
    value = os.environ.get("TRAINCAST_DB_MEMORY", "").strip()
    if not value:
        return MEMORY_LIMIT
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*([KMGT])(i?)B", value, re.IGNORECASE)
    size = float(m.group(1)) * (1024 if m.group(3) else 1000) ** (
        "KMGT".index(m.group(2).upper()) + 1) if m else 0.0
    if size < MIN_MEMORY_BYTES:
        raise TraincastError(f"TRAINCAST_DB_MEMORY={value!r}: not a memory size of at least "
                             "64 MB", hint="e.g. TRAINCAST_DB_MEMORY=4GB (or unset it: 1GB)")
    return value


def db_path(db: str | Path | None) -> Path:
    """The store file: ``db``, else ``traincast.duckdb`` in the working directory."""
    return Path(db) if db else Path.cwd() / DEFAULT_DB


def _create(con: duckdb.DuckDBPyConnection, where: str = "the store") -> None:
    """Create the tables, or bring an older store's tables up to the schema (add the columns
    they lack, null for the rows already there). Another program's database (:func:`_foreign`)
    is an error naming ``where`` (the caller's transaction rolls back)."""
    if why := _foreign(con):
        raise TraincastError(f"{where}: not a traincast job store ({why}): nothing written",
                             hint="give --db a new file or a store traincast made")
    cols = ", ".join(f"{q(c)} {SQL_TYPE[c]}" for c in ALL_COLUMNS)
    con.execute(f"CREATE TABLE IF NOT EXISTS jobs ({cols})")
    have = _columns(con, "jobs")
    for c in ALL_COLUMNS:
        if c not in have:
            con.execute(f"ALTER TABLE jobs ADD COLUMN {q(c)} {SQL_TYPE[c]}")
    cols = ", ".join(f"{q(c)} {t}" for c, t in SOURCE_COLUMNS.items())
    con.execute(f"CREATE TABLE IF NOT EXISTS sources ({cols})")
    have = _columns(con, "sources")
    for c in SOURCE_ADDED_COLUMNS:
        if c not in have:
            con.execute(f"ALTER TABLE sources ADD COLUMN {q(c)} {SOURCE_COLUMNS[c]}")
    if not _columns(con, "source_ids"):  # an older store: from its highest id on
        con.execute("CREATE TABLE source_ids AS "
                    "SELECT COALESCE(max(source_id), 0)::BIGINT AS last FROM sources")


def _new_source_id(con: duckdb.DuckDBPyConnection) -> int:
    """The id of a new source (inside the caller's transaction): one above every id the store
    ever gave (``source_ids.last``), so an id removed by ``sources --drop`` is never given
    again (a script that drops it twice does not remove another trace)."""
    sid = int(con.execute("SELECT greatest((SELECT max(last) FROM source_ids), "
                          "(SELECT COALESCE(max(source_id), 0) FROM sources)) + 1").fetchone()[0])
    con.execute("UPDATE source_ids SET last = ?", [sid])
    return sid


STORE_KEYS = {"jobs": ("job_id", "source_id"), "sources": ("source_id", "format", "files")}
"""The store's tables and the columns every release of the store has in them (older stores
lack some others, which :func:`_create` adds)."""


def _foreign(con: duckdb.DuckDBPyConnection) -> str:
    """Why the open database is not a job store, in words; empty for a store, or for a
    database that holds nothing yet (an ingest makes it one). A store is a ``jobs`` and a
    ``sources`` table with the store's key columns (:data:`STORE_KEYS`; ``sources.source_id``
    an integer), whatever else its owner added; without them, a database that holds any table,
    view or sequence, in any schema, is another program's."""
    if not _columns(con, "jobs") and not _columns(con, "sources"):
        held = [r[0] for r in con.execute(
            "SELECT schema_name || '.' || table_name FROM duckdb_tables() WHERE NOT internal "
            "UNION ALL SELECT schema_name || '.' || view_name FROM duckdb_views() "
            "WHERE NOT internal UNION ALL SELECT schema_name || '.' || sequence_name "
            "FROM duckdb_sequences() ORDER BY 1").fetchall()]
        return f"it holds what traincast does not write: {', '.join(held[:3])}" if held else ""
    for table, keys in STORE_KEYS.items():
        have = _columns(con, table)
        if not have:
            return f"no {table} table"
        if missing := [c for c in keys if c not in have]:
            return f"its {table} table has no {', '.join(missing)} column"
    kind = con.execute("SELECT data_type FROM duckdb_columns() WHERE table_name = 'sources' "
                       "AND column_name = 'source_id' AND database_name = current_database() "
                       "AND schema_name = current_schema()").fetchone()[0]
    if kind not in ("INTEGER", "BIGINT"):
        return f"its sources.source_id is {kind}, not an integer"
    return ""


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> set[str]:
    """Columns of one of the store's tables (empty when there is none)."""
    rows = con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
                       "AND database_name = current_database() "
                       "AND schema_name = current_schema()", [table]).fetchall()
    return {r[0] for r in rows}


def _is_duckdb_file(path: Path) -> bool:
    """``path`` is missing or a DuckDB database file (``DUCK`` at byte 8); an empty file is
    refused before this is asked (``Store._connect``)."""
    try:
        with path.open("rb") as f:
            head = f.read(12)
    except FileNotFoundError:
        return True
    except IsADirectoryError:
        return False
    return duckdb_head(head)


def _where(source_ids: Iterable[int] | None) -> str:
    """SQL: the ``WHERE`` clause keeping the jobs of ``source_ids`` (None: every job)."""
    if source_ids is None:
        return ""
    return f" WHERE source_id IN ({', '.join(str(int(s)) for s in source_ids) or 'NULL'})"


def _select_list(con: duckdb.DuckDBPyConnection) -> str:
    """SQL: the store's columns in schema order; a column an older store lacks reads null."""
    have = _columns(con, "jobs")
    return ", ".join(q(c) if c in have else f"CAST(NULL AS {SQL_TYPE[c]}) AS {q(c)}"
                     for c in ALL_COLUMNS)


def _keep_try_casts(con: duckdb.DuckDBPyConnection) -> None:
    """Turn off DuckDB's type pushdown where it exists: it reads a CSV column that is only used
    through ``TRY_CAST`` as that type, so one unparsable cell fails the whole read instead of
    becoming a bad row (duckdb/duckdb#23818)."""
    names = {r[0] for r in con.execute("SELECT name FROM duckdb_optimizers()").fetchall()}
    if "type_pushdown" in names:
        con.execute("SET disabled_optimizers = 'type_pushdown'")


def _fingerprint(files: Iterable[str]) -> str:
    """Names, sizes and modification times of files: when equal to a source's, its files are
    taken as unchanged without reading them."""
    h = hashlib.sha256()
    for f in sorted(files):
        st = Path(f).stat()
        h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def content_hash(files: Iterable[str | Path]) -> str:
    """The content of a source: the sha256 (hex) of its file's bytes, as ``sha256sum FILE``
    prints it; a ``.gz`` file: of its decompressed bytes (``zcat FILE | sha256sum``), so a
    table and its gzipped copy are one content. For several files (a PAI table set), the
    sha256 of their sha256 lines sorted (``HEX\\n`` each), so neither their names nor their
    order count. Files are read in blocks (:func:`hashlib.file_digest`), never whole into
    memory. A ``.gz`` file cut short raises :class:`EOFError`, one that is not gzip
    :class:`gzip.BadGzipFile` (an :class:`OSError`)."""
    digests = [content_sha256(f) for f in files]
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256("".join(f"{d}\n" for d in sorted(digests)).encode()).hexdigest()


ROWS_MAX = 10**12
"""More rows than a source holds: a row number times it orders before any row (the kept row of
a duplicated job, :func:`_stage`)."""


def _stage(con: duckdb.DuckDBPyConnection, plan: Plan) -> None:
    """Run the plan into the temp table ``_staged``: typed canonical columns + first error.

    Duplicates are found last, among the rows without another error: a job's first good row
    is kept (by the plan's ``dedup_prefer`` first, then the first), its other rows are
    duplicates (``_first_row``)."""
    checks = plan.all_checks()
    first = [i for i, c in enumerate(checks) if not c.among_good]
    last = [i for i, c in enumerate(checks) if c.among_good]

    def case(idx: list[int]) -> str:
        return ("CASE " + " ".join(f"WHEN {checks[i].condition} THEN {i}" for i in idx)
                + " END") if idx else "NULL"

    def by_err(attr: Callable[[Any], str]) -> str:
        if not checks:
            return "NULL"
        return "CASE _err " + " ".join(f"WHEN {i} THEN CAST({attr(c)} AS VARCHAR)"
                                       for i, c in enumerate(checks)) + " END"

    values = ", ".join(f"{as_type(plan.fields[c].expr, SQL_TYPE[c])} AS {typed(c)}"
                       for c in COLUMNS if c in plan.fields)
    out = ", ".join(f'{typed(c)} AS "{c}"' if c in plan.fields
                    else f'CAST(NULL AS {SQL_TYPE[c]}) AS "{c}"' for c in COLUMNS)
    con.execute("DROP TABLE IF EXISTS _staged")
    # typed values once (inner), the row checks over them, the first good row of each job,
    # the checks among good rows (duplicates), then the stored shape
    # the kept row: the least (preference, row) as one number, preference x 1e12 + row (a
    # plain min: arg_min over a pair takes half as long again on a million rows)
    order = f"CAST(({plan.dedup_prefer}) AS BIGINT) * {ROWS_MAX} + _row" \
        if plan.dedup_prefer else "_row"
    typed_rows = (f"SELECT *, {values}, COALESCE(({plan.censored}), FALSE) AS _censored, "
                  f"({plan.key()}) AS _key FROM {plan.relation}")
    checked = f"SELECT *, {case(first)} AS _err0 FROM ({typed_rows})"
    firsts = (f"SELECT *, min({order}) FILTER (WHERE _err0 IS NULL) OVER (PARTITION BY _key) "
              f"% {ROWS_MAX} AS _first_row FROM ({checked})")
    con.execute(
        f"CREATE TEMP TABLE _staged AS SELECT _row, {out}, _censored AS censored, _err, "
        f"{by_err(lambda c: c.file or lit(plan.file))} AS _err_file, "
        f"{by_err(lambda c: c.row)} AS _err_row, "
        f"{by_err(lambda c: c.field_sql or lit(c.field))} AS _err_field, "
        f"{by_err(lambda c: c.value)} AS _err_value "
        f"FROM (SELECT *, COALESCE(_err0, {case(last)}) AS _err FROM ({firsts}))")


def _insert(con: duckdb.DuckDBPyConnection, source_id: int) -> None:
    """Store the staged good rows: the trace's values as they are, plus the flags."""
    select = [q(c) for c in COLUMNS]
    select += ["censored", "COALESCE(n_gpus = 0, FALSE)",
               "COALESCE(n_gpus <> floor(n_gpus), FALSE)",
               "COALESCE(architecture IS NULL AND n_gpus > 0, FALSE)", str(source_id)]
    names = ", ".join(q(c) for c in ALL_COLUMNS)
    con.execute(f"INSERT INTO jobs ({names}) SELECT {', '.join(select)} FROM _staged "
                "WHERE _err IS NULL ORDER BY _row")  # the trace's order


def _errors(con: duckdb.DuckDBPyConnection) -> tuple[int, list[dict[str, Any]]]:
    """The staged rows' bad-row count and the first errors, each once: job rows that share one
    bad row (the job-table rows of one bad PAI task row) are one error with ``jobs``, their
    count, where more than one."""
    n = con.execute("SELECT count(*) FROM _staged WHERE _err IS NOT NULL").fetchone()[0]
    rows = con.execute("SELECT _err_file, _err_row, _err_field, _err_value, count(*) "
                       "FROM _staged WHERE _err IS NOT NULL "
                       "GROUP BY _err_file, _err_row, _err_field, _err_value "
                       "ORDER BY _err_file, TRY_CAST(_err_row AS BIGINT), _err_field "
                       f"LIMIT {MAX_ERRORS_SHOWN}").fetchall()
    return n, [{"file": f, "row": int(r) if r is not None else None, "field": fld,
                "value": v, **({"jobs": k} if k > 1 else {})} for f, r, fld, v, k in rows]


def _flags(con: duckdb.DuckDBPyConnection, source_id: int) -> dict[str, int]:
    """How many of a source's stored jobs carry each flag."""
    counts = ", ".join(f"count(*) FILTER (WHERE {f})" for f in FLAG_COLUMNS)
    row = con.execute(f"SELECT {counts} FROM jobs WHERE source_id = ?", [source_id]).fetchone()
    return {f: int(v) for f, v in zip(FLAG_COLUMNS, row, strict=True)}


def said_value(value: Any) -> str:
    """A bad row's value for people: quoted, with what a check says of it (``'35 (must be
    ...)'``, ``'10 (the file ends here ...)'``: from its first parenthesis, a space before
    it, that closes at the end) after the quotes, not inside them."""
    text = str(value)
    if text.endswith(")"):  # the first " (" whose parentheses close at the end
        for cut in (i for i in range(1, len(text)) if text.startswith(" (", i)):
            why = text[cut:]
            if why.count("(") == why.count(")"):
                return f"{text[:cut]!r}{why}"
    return repr(value)


def format_errors(errors: list[dict[str, Any]], total: int) -> str:
    """Bad rows for people: one line each (file, row, field, value: :func:`said_value`),
    first 20."""
    lines = [f"  {e['file']}: row {e['row']}: field {e['field']}: bad value "
             f"{said_value(e['value'])}"
             + (f" ({e['jobs']} jobs)" if e.get("jobs", 1) > 1 else "") for e in errors]
    shown = sum(e.get("jobs", 1) for e in errors)
    more = f"\n  ... and {total - shown} more" if total > shown else ""
    return "\n".join(lines) + more




def strict_command(report: Mapping[str, Any], files: Iterable[str | Path]) -> str:
    """The ``traincast ingest FILES ... --strict`` that names the bad rows of ``files`` as the
    ingest ``report`` read them (its ``format`` and ``mapping``; paths quoted for a shell):
    ``--strict`` reads the files again and stores nothing, whatever the store."""
    import shlex

    flags = ([f"--format {shlex.quote(str(report['format']))}"]
             if report.get("format", "csv") != "csv" else []) \
        + [f"--map {shlex.quote(f'{k}={v}')}" for k, v in (report.get("mapping") or {}).items()]
    return " ".join(["traincast ingest", *(shlex.quote(str(f)) for f in files), *flags,
                     "--strict"])


def every_row_bad(report: Mapping[str, Any], jobs: int, outcome: str) -> TraincastError | None:
    """The error when an ingest (``report``, ``Store.ingest``'s) left ``jobs`` = 0 jobs to read
    because every row of its trace was bad (each source's bad rows, a file kept from an earlier
    ingest too), naming the first, or where it was kept, the :func:`strict_command` that names
    them; None when a job was stored or no row was bad (a header alone: an empty trace,
    analysed as such). ``outcome``: what the failed command did, ends the message."""
    bad = sum(int(src.get("bad_rows") or 0) for src in report.get("sources", ())) \
        or int(report.get("bad_rows") or 0)
    if jobs or not bad:
        return None
    if report.get("errors"):
        first = report["errors"][0]
        which = (f"the first: {first.get('file')}: row {first.get('row')}: field "
                 f"{first.get('field')}: {said_value(first.get('value'))}")
    else:  # found at an earlier ingest of the same files
        files = [f for src in report.get("sources", ()) for f in src.get("files", ())]
        which = f"found when it was first ingested: {strict_command(report, files)} names them"
    return TraincastError(f"no job stored: every row of the trace was bad ({bad:,}; {which}): "
                          f"{outcome}",
                          hint="mend the rows, or check --format and --map (traincast ingest "
                               "lists the bad rows)")


class _ReadSerially(Exception):
    """A CSV file must be read by one thread (:data:`~traincast.trace.adapters.base.
    SERIAL_CSV_OPTIONS`): the ingest starts again."""


def _disk_full_error(path: Path | str, what: str, done: str) -> TraincastError:
    """The error for a full disk while writing ``what`` to ``path`` (``done``: what became of
    the ingest)."""
    folder = Path(path).absolute().parent
    return TraincastError(f"{path}: the disk is full (no space left on device) while writing "
                          f"{what}; {done}",
                          hint=f"free space on the disk holding {folder} (DuckDB also spills "
                               "large ingests to files beside the store), or write to "
                               "another disk")


_TEMP_MARK = ".ingest-"
_temp_ids = itertools.count(1)


def _open_error(path: Path, exc: BaseException, write: bool) -> TraincastError:
    """Why DuckDB could not open the store ``path``, said for its cause: another process holds
    it (DuckDB's file lock: one writer, or readers only), a read-only file system or folder
    (where the store can be read but not written), else DuckDB's first line."""
    text = str(exc)
    if "Could not set lock" in text:
        pid = re.search(r"PID (\d+)", text)
        return TraincastError(
            f"{path}: the job store is in use by another process"
            f"{f' (PID {pid.group(1)})' if pid else ''}",
            hint="a store is written by one process at a time and read while none writes it: "
                 "run this again when that one ends")
    if write and ("Read-only file system" in text or "Permission denied" in text):
        why = "read-only file system" if "Read-only" in text else "permission denied"
        return TraincastError(f"{path}: cannot write the job store ({why})",
                              hint="commands that only read the store (characterize, whatif, "
                                   "sources without --drop) still work; copy it elsewhere to "
                                   "change it")
    if "Permission denied" in text:
        return TraincastError(f"{path}: cannot read the job store (permission denied)",
                              hint="check the file's permissions, or copy it where you can "
                                   "read it")
    if file_cut_short(exc):  # as a damaged store is said when a read meets it later
        return TraincastError(f"{path}: damaged or cut short ({text.splitlines()[0]})",
                              hint=DAMAGED_HINT)
    return TraincastError(f"{path}: cannot open the job store: {text.splitlines()[0]}",
                          hint="--db names a DuckDB file written by traincast ingest "
                               "(or a new file in an existing directory)")


def _temp_store(target: Path) -> Path:
    """Where the first ingest into ``target`` builds the store: ``.NAME.ingest-PID-N`` beside
    it (DuckDB adds ``.wal`` and, when it spills, the directory ``.tmp``)."""
    return target.with_name(f".{target.name}{_TEMP_MARK}{os.getpid()}-{next(_temp_ids)}")


def _remove_store_files(db: Path) -> None:
    """A DuckDB file, its write-ahead log and its spill directory."""
    for f in (db, db.with_name(db.name + ".wal")):
        f.unlink(missing_ok=True)
    shutil.rmtree(db.with_name(db.name + ".tmp"), ignore_errors=True)


def _remove_stale_temps(target: Path) -> None:
    """Remove what killed first ingests into ``target`` left beside it (:func:`_temp_store`
    files of processes that no longer run; POSIX only: elsewhere they stay)."""
    if os.name != "posix":
        return
    prefix = f".{target.name}{_TEMP_MARK}"
    try:
        leftovers = [f for f in target.parent.iterdir() if f.name.startswith(prefix)]
    except OSError:
        return
    for f in leftovers:
        pid = f.name[len(prefix):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # still running
        except ProcessLookupError:
            pass
        except OSError:  # another user's process: running
            continue
        if f.is_dir():
            shutil.rmtree(f, ignore_errors=True)
        else:
            f.unlink(missing_ok=True)


def _copy_parquet(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """COPY the job table (schema order; a column an older store lacks: null) to ``path``."""
    con.execute(f"COPY (SELECT {_select_list(con)} FROM jobs) TO {lit(path)} (FORMAT parquet)")


def _parquet_error(path: Path, exc: BaseException, done: str) -> TraincastError:
    """The error for a Parquet export that failed (``done``: what became of the ingest)."""
    if disk_full(exc):
        return _disk_full_error(path, "the Parquet file", done)
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    reason = reason.removeprefix(f"{path}: ")  # write_whole's errors name the file already
    return TraincastError(f"{path}: cannot write the Parquet file: {reason}; {done}",
                          hint="check that its folder exists and is writable")


class Store:
    """A job store: one DuckDB file (``Store()`` = an in-memory store, nothing written).

    ``with Store("jobs.duckdb") as store: store.ingest(paths, "pai-2020"); jobs =
    store.jobs()``. Reading a file that does not exist is an error; the first ingest creates
    it, whole: under a temporary name beside it, renamed into place once committed, so a
    failed, interrupted or killed first ingest leaves no store file. Reads use a read-only
    connection, so several processes can read one store; an ingest reopens it for writing.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path: Path | None = Path(path) if path is not None else None
        self._con: duckdb.DuckDBPyConnection | None = None
        self._writable = False

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.path) if self.path else ':memory:'!r})"

    def close(self) -> None:
        """Close the connection (the store can be used again: it reopens)."""
        if self._con is not None:
            self._con.close()
            self._con = None

    def _connect(self, write: bool, at: Path | None = None) -> duckdb.DuckDBPyConnection:
        """The connection (reused when it allows ``write``); ``at``: a writable connection to
        that file instead of the store's (the first ingest's temporary store)."""
        if at is None and self._con is not None and (self._writable or not write):
            return self._con
        self.close()
        if self.path is not None and self.path.is_file() and not self.path.stat().st_size:
            raise TraincastError(f"{self.path}: an empty file, no job store",
                                 hint="remove it (an ingest then makes the store there), or "
                                      "give --db a store traincast made")
        if not write and self.path is not None and not self.path.exists():
            studies = sorted(self.path.parent.glob("*/jobs.duckdb"))[:3]
            raise TraincastError(f"{self.path}: no job store here",
                                 hint="ingest a trace first: traincast ingest TRACE "
                                      "--format F [--db FILE]" + (
                                          "; or read a study's own store: " + ", ".join(
                                              f"--db {p}" for p in studies)
                                          if studies else ""))
        where = str(at or self.path or ":memory:")
        if at is None and self.path is not None and not _is_duckdb_file(self.path):
            raise TraincastError(f"{self.path}: not a DuckDB file (a job store)",
                                 hint="--db names a DuckDB file written by traincast ingest "
                                      "(or a new file)")
        try:
            self._con = duckdb.connect(where, read_only=not write and self.path is not None)
        except duckdb.Error as exc:
            raise _open_error(Path(self.path or where), exc, write) from None
        self._writable = write or self.path is None
        self._con.execute(f"SET memory_limit = {lit(memory_limit())}")
        if self.path is None:
            _create(self._con)
        return self._con

    def _read(self) -> duckdb.DuckDBPyConnection:
        """A connection to an existing store whose job table exists."""
        con = self._connect(write=False)
        why = _foreign(con) or ("" if _columns(con, "jobs") else "no jobs table")
        if why:
            raise TraincastError(f"{self.path}: not a traincast job store ({why})",
                                 hint="give a file written by traincast ingest (--db FILE)")
        return con

    def ingest(self, paths: str | Path | Iterable[str | Path], format: str = "csv",
               mapping: Mapping[str, str] | None = None, *, strict: bool = False,
               progress: Progress | None = None,
               parquet: str | Path | None = None) -> dict[str, Any]:
        """Ingest trace files (one transaction); returns a report.

        ``paths``: the trace files (for ``pai-2020``, its directory or table files).
        ``mapping``: canonical column -> source column (``--map``). ``parquet``: also export
        the store's whole job table to this Parquet file, inside the transaction (written
        whole; when it cannot be written, nothing is stored). Report keys: ``db``,
        ``format``, ``sources`` (one per file or table set: ``source_id``, ``files``, ``jobs``,
        ``bad_rows``, ``flags`` (its jobs' flag counts), ``unchanged``, and for a copy of a
        source already in the store ``already_ingested``: ``file``, ``source_id`` of that
        source, whose jobs it names; for a moved file ``moved_from``), ``jobs`` (stored by
        this call), ``bad_rows``, ``errors`` (first 20: ``file``, ``row``, ``field``,
        ``value``, and ``jobs`` where one bad row makes several jobs bad: a PAI task row),
        ``flags`` (counts of each flag over the jobs stored by this call),
        ``notes`` (``file``, ``count``, ``note``: what the source holds that is not stored as
        read, e.g. PAI task rows without a job row), ``replaced`` (earlier sources of the same
        files or the same content, changed since or ingested with another format or mapping,
        whose jobs were replaced), ``parquet`` (the file written, when asked),
        ``seconds``. Bad rows are skipped, or with ``strict`` fail the ingest; a failed ingest
        leaves the store as it was. Ctrl-C rolls back and raises :class:`KeyboardInterrupt`;
        a full disk rolls back and raises a :class:`~traincast.errors.TraincastError`.
        """
        t0 = time.perf_counter()
        if isinstance(paths, str | Path):
            paths = [paths]
        for p in map(Path, paths):
            refuse_stream(p)
        paths = [Path(p).resolve() for p in paths]
        for p in paths:
            if not p.exists():
                raise NoSuchFileError(p, "trace")
        mod = adapter(format)
        folders = [p for p in paths if p.is_dir()]
        paths = trace_files(mod, paths)  # a folder: its files of this format, each file once
        for p in paths:  # a stream a folder holds too (PAI's tables: pai2020.find_tables)
            refuse_stream(p)
        out = Path(parquet) if parquet is not None else None
        if out is not None and (out.resolve() in paths or (
                self.path is not None and out.resolve() == self.path.resolve())):
            raise TraincastError(f"{out}: the Parquet export would overwrite "
                                 f"{'the store' if out.resolve() not in paths else 'a trace'}",
                                 hint="export to another file")
        if out is not None and (folder := in_folder(mod, out.resolve(), folders)):
            raise TraincastError(f"{out}: the Parquet export would be in the trace folder "
                                 f"{folder}, read as a trace file the next time",
                                 hint="export to another folder")
        if self.path is not None:
            _remove_stale_temps(self.path)
        try:
            report = self._ingest_once(mod, paths, format, mapping, strict, progress, False,
                                       out)
        except _ReadSerially:
            # DuckDB's parallel CSV reader cannot pad short rows of a file whose quoted fields
            # hold line breaks; the failed statement aborted the transaction (rolled back):
            # start again, reading the CSV files by one thread
            report = self._ingest_once(mod, paths, format, mapping, strict, progress, True,
                                       out)
        if progress:
            progress("done", 1, 1)
        report["seconds"] = time.perf_counter() - t0
        return report

    def _ingest_once(self, mod: Any, paths: list[Path], format: str,
                     mapping: Mapping[str, str] | None, strict: bool,
                     progress: Progress | None, one_thread: bool,
                     parquet: Path | None) -> dict[str, Any]:
        """:meth:`ingest` in one transaction, rolled back on any failure (a
        :class:`_ReadSerially` of the one-thread reading is an error). A new store file is
        built under :func:`_temp_store` and published by :meth:`_publish` after the commit;
        the Parquet file is written before the commit and renamed into place after it."""
        temp = _temp_store(self.path) if self.path is not None and not self.path.exists() \
            else None
        report: dict[str, Any] = {"db": str(self.path or ":memory:"), "format": format,
                                  "mapping": dict(mapping or {}),
                                  "sources": [], "jobs": 0, "bad_rows": 0, "errors": [],
                                  "notes": [], "replaced": [],
                                  "flags": dict.fromkeys(FLAG_COLUMNS, 0)}
        phase = "ingest"  # then "parquet" (the export), "commit", "committed"
        inner: BaseException | None = None  # raised in write_whole's writer, as raised

        def commit(parquet_tmp: Path | None) -> None:
            nonlocal phase, inner
            try:
                if parquet_tmp is not None and parquet is not None:
                    phase = "parquet"
                    if progress:
                        progress(f"writing {parquet.name}", 1, 1)
                    _copy_parquet(con, parquet_tmp)
                phase = "commit"
                con.execute("COMMIT")
                if temp is not None:
                    self._publish(temp)
                phase = "committed"
            except BaseException as exc:
                inner = exc
                raise

        try:
            con = self._connect(write=True, at=temp)
            con.execute("SET enable_progress_bar = false")  # progress is ours, on stderr
            con.execute("SET TimeZone = 'UTC'")  # date-times without an offset are UTC
            _keep_try_casts(con)
            # the adapter's look at the files (columns, how they end) reads them only: before
            # the transaction, so a probe it tries and gives up does not abort the transaction
            plans = mod.plans(con, paths, mapping)
            con.execute("BEGIN TRANSACTION")
            _create(con, str(self.path or ":memory:"))
            for i, plan in enumerate(plans):
                _ingest_plan(con, plan.serial() if one_thread else plan, format, mapping,
                             strict, report, progress, (2 * i, 2 * len(plans)))
            if strict and report["bad_rows"]:  # every file read: the rows of each named
                files = sum(1 for s in report["sources"] if s["bad_rows"])
                raise TraincastError(
                    f"{format}: {report['bad_rows']} bad row(s) in {plural(files, 'file')}; "
                    f"nothing was stored (--strict):\n"
                    f"{format_errors(report['errors'], report['bad_rows'])}",
                    hint="fix the rows, or ingest without --strict to skip them",
                    details={"bad_rows": report["bad_rows"], "errors": report["errors"]})
            if parquet is None:
                commit(None)
            else:
                write_whole(parquet, commit)
                report["parquet"] = str(parquet)
        except BaseException as exc:
            if phase == "committed":  # only the Parquet file's rename into place failed
                if parquet is None or interrupted(exc):
                    raise
                raise _parquet_error(parquet, exc, f"the ingest was committed "
                                     f"({report['jobs']:,} jobs stored in {report['db']}); "
                                     "export again with the same ingest") from None
            self._abort(temp)
            raise self._failure(inner or exc, phase, mod.NAME, one_thread, parquet) from None
        return report

    def _failure(self, exc: BaseException, phase: str, name: str, one_thread: bool,
                 parquet: Path | None) -> BaseException:
        """What a rolled-back ingest raises for ``exc``, raised while in ``phase``: Ctrl-C as
        :class:`KeyboardInterrupt`, a full disk or an unwritable Parquet file as a
        :class:`~traincast.errors.TraincastError` saying nothing was stored, the rest as it
        is."""
        if isinstance(exc, _ReadSerially):
            return TraincastError(f"{name}: cannot read the files") if one_thread else exc
        done = "nothing was stored (the ingest was rolled back)"
        if phase == "parquet" and parquet is not None and isinstance(exc, Exception) \
                and not interrupted(exc):
            return _parquet_error(parquet, exc, done)
        return self._rolled_back(exc, "ingest", done)

    def _rolled_back(self, exc: BaseException, what: str, done: str) -> BaseException:
        """What a rolled-back write (``what``: ingest, drop) raises for ``exc``: Ctrl-C as
        :class:`KeyboardInterrupt`, a full disk as a :class:`~traincast.errors.TraincastError`
        naming the store and saying ``done``, the rest as it is."""
        if isinstance(exc, KeyboardInterrupt):
            return exc
        if interrupted(exc):
            return KeyboardInterrupt(f"{what} interrupted: rolled back")
        if disk_full(exc):
            return _disk_full_error(self.path or "the in-memory store", "the job store", done)
        if isinstance(exc, duckdb.Error | OSError) and self.path is not None and (
                "Permission denied" in str(exc) or "Read-only file system" in str(exc)):
            # a folder that cannot be written: DuckDB writes its log (.wal) beside the store
            error = _open_error(self.path, exc, write=True)
            return TraincastError(f"{error}; {done}", hint=error.hint)
        return exc

    def _publish(self, temp: Path) -> None:
        """Put the committed new store ``temp`` in place: checkpointed (its write-ahead log
        merged), closed, then linked to the store's path without replacing a file another
        process put there meanwhile (else renamed)."""
        assert self.path is not None and self._con is not None
        self._con.execute("CHECKPOINT")
        self.close()
        target = self.path
        raced = TraincastError(f"{target}: another process created this store during the "
                               "ingest; nothing was stored",
                               hint="ingest again: the trace is added to that store")
        if target.exists():
            raise raced
        wal = temp.with_name(temp.name + ".wal")
        if wal.exists():  # not after a checkpoint; kept beside the store if DuckDB left one
            wal.replace(target.with_name(target.name + ".wal"))
        else:  # a log without its store (removed by hand) must not be read into this one
            target.with_name(target.name + ".wal").unlink(missing_ok=True)
        try:
            os.link(temp, target)  # never over a file
        except FileExistsError:
            raise raced from None
        except OSError:  # no hard links on this file system
            if target.exists():
                raise raced from None
            os.replace(temp, target)
        _remove_store_files(temp)

    def _abort(self, temp: Path | None) -> None:
        """Roll back a failed ingest and close the connection (an in-memory store stays open);
        the temporary new store is removed."""
        if self._con is not None:
            try:
                self._con.execute("ROLLBACK")
            except duckdb.Error:
                pass
            if self.path is not None:
                try:
                    self.close()
                except duckdb.Error:
                    self._con = None
        if temp is not None:
            _remove_store_files(temp)

    def jobs(self, source_ids: Iterable[int] | None = None) -> pa.Table:
        """The canonical job table (:data:`~traincast.trace.schema.SCHEMA`), all sources or
        those given, in ingest order."""
        con = self._read()
        return con.sql(f"SELECT {_select_list(con)} FROM jobs{_where(source_ids)}") \
            .to_arrow_table().cast(SCHEMA)

    def batches(self, source_ids: Iterable[int] | None = None,
                rows: int = CHUNK_ROWS) -> Iterator[pa.Table]:
        """:meth:`jobs` as tables of at most ``rows`` jobs, streamed out of DuckDB (Arrow
        record batches: the whole table is never in memory)."""
        con = self._read()
        reader = con.sql(f"SELECT {_select_list(con)} FROM jobs{_where(source_ids)}"
                         ).to_arrow_reader(max(int(rows), 1))
        for batch in reader:
            if batch.num_rows:
                yield pa.Table.from_batches([batch]).cast(SCHEMA)

    def count(self, source_ids: Iterable[int] | None = None) -> int:
        """How many jobs :meth:`jobs` holds."""
        return int(self._read().execute(f"SELECT count(*) FROM jobs{_where(source_ids)}")
                   .fetchone()[0])

    def trace_ends_s(self, source_ids: Iterable[int] | None = None
                     ) -> tuple[float | None, dict[float, float]]:
        """The trace end (the largest submit, start or end time; None without any) and that of
        each source (key: its ``source_id``; -1 for jobs without one), as
        :func:`traincast.analysis.characterize.trace_ends_s` reads them from a table."""
        rows = self._read().execute(
            "SELECT COALESCE(source_id, -1), max(greatest(submit_time_s, start_time_s, "
            f"end_time_s)) FROM jobs{_where(source_ids)} GROUP BY 1").fetchall()
        ends = {float(s): float(e) for s, e in rows if e is not None}
        return (max(ends.values()) if ends else None), ends

    def sources(self) -> list[dict[str, Any]]:
        """The sources recorded in the store (:data:`SOURCE_COLUMNS`: files, format, jobs, bad
        rows, time, content hash; null where an older store lacks the column)."""
        con = self._read()
        have = _columns(con, "sources")
        if not have:  # a jobs table without sources: not written by an ingest
            raise TraincastError(f"{self.path}: not a traincast job store (no sources table)",
                                 hint="give a file written by traincast ingest (--db FILE)")
        cols = ", ".join(q(c) if c in have else f"CAST(NULL AS VARCHAR) AS {q(c)}"
                         for c in SOURCE_COLUMNS)
        cur = con.execute(f"SELECT {cols} FROM sources ORDER BY source_id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def drop(self, source_ids: Iterable[int]) -> dict[str, Any]:
        """Remove sources and their jobs, in one transaction: all or none. An id the store
        does not hold is an error naming it, and nothing is removed. Returns ``db``,
        ``dropped`` (``source_id``, ``files``, ``format``, ``jobs`` of each) and ``jobs`` (how
        many were removed). Ctrl-C rolls back and raises :class:`KeyboardInterrupt`; a full
        disk rolls back and raises a :class:`~traincast.errors.TraincastError`."""
        ids = sorted({int(i) for i in source_ids})
        self._read()
        report: dict[str, Any] = {"db": str(self.path or ":memory:"), "dropped": [], "jobs": 0}
        try:
            con = self._connect(write=True)
            con.execute("BEGIN TRANSACTION")
            _create(con)  # an older store's sources table gets its added columns
            held = {s.source_id: s for s in _all_sources(con)}
            if unknown := [i for i in ids if i not in held]:
                raise TraincastError(
                    f"{self.path or ':memory:'}: no source {', '.join(map(str, unknown))} in "
                    f"the store (it holds {', '.join(map(str, held)) or 'none'}); nothing was "
                    "removed", hint="traincast sources lists them")
            for i in ids:
                n = int(con.execute("SELECT count(*) FROM jobs WHERE source_id = ?",
                                    [i]).fetchone()[0])
                _delete_source(con, i)
                report["dropped"].append({"source_id": i, "files": json.loads(held[i].files),
                                          "format": held[i].format, "jobs": n})
                report["jobs"] += n
            con.execute("COMMIT")
        except BaseException as exc:
            self._abort(None)
            raise self._rolled_back(exc, "drop", "nothing was removed (rolled back)") from None
        return report

    def export_parquet(self, path: str | Path) -> Path:
        """Write the job table to a Parquet file (canonical columns + flags, schema order),
        whole or not at all (:func:`traincast.files.write_whole`)."""
        con = self._read()
        try:
            return write_whole(path, lambda tmp: _copy_parquet(con, tmp))
        except (duckdb.Error, OSError) as exc:
            raise _parquet_error(Path(path), exc, "no file was written") from None


def source_labels(files_by_source: dict[int, list[str]]) -> dict[int, str]:
    """A short name per source: its files' names, each with as many parent folders as it takes
    to tell it from the other sources (Helios's ``venus/cluster_log.csv`` and
    ``earth/cluster_log.csv`` beside ``philly.csv``); full paths when even those agree."""
    parts = {sid: [Path(f).parts[1 if Path(f).is_absolute() else 0:] for f in fs]
             for sid, fs in files_by_source.items()}

    out: dict[int, str] = {}
    deepest = max((len(p) for ps in parts.values() for p in ps), default=1)
    for depth in range(1, deepest + 1):  # each source: the first depth where its label is alone
        labels = {sid: ", ".join("/".join(p[-depth:]) for p in ps) for sid, ps in parts.items()}
        seen = Counter(labels.values())
        out.update({sid: text for sid, text in labels.items()
                    if seen[text] == 1 and sid not in out})
    return {sid: out.get(sid, ", ".join(fs)) for sid, fs in files_by_source.items()}


def file_state(files: Iterable[str], fingerprint: str | None) -> str:
    """Whether a source's files are as ingested: ``missing`` (one or more is gone),
    ``changed`` (all there, but a name, size or modification time differs from the
    fingerprint: the next ingest of them reads them again) or ``as ingested``."""
    files = list(files)
    if not all(Path(f).is_file() for f in files):
        return "missing"
    return "as ingested" if _fingerprint(files) == fingerprint else "changed"


def _ingest_plan(con: duckdb.DuckDBPyConnection, plan: Plan, format: str,
                 mapping: Mapping[str, str] | None, strict: bool, report: dict[str, Any],
                 progress: Progress | None, step: tuple[int, int]) -> None:
    """One plan (file or table set) into the store, inside the caller's transaction; adds to
    ``report``.

    * Kept when unchanged since its last ingest with the same format and mapping (and, with
      ``strict``, no bad rows then): the same fingerprint (nothing read), or the same
      :func:`content_hash` (a file touched, its bytes the same).
    * Else kept once: when another source holds the same content (a copy under another name)
      with the same format and mapping, nothing is stored and the report names that source
      (``already_ingested``); when that source's files are gone (the file was moved or
      renamed), the source names these files from now on (``moved_from``: its old ones), so
      ``sources --drop-missing`` keeps it.
    * Else replaced: the jobs of a file are in the store once, and so are those of a content:
      ingesting it again changed, or with another ``--format``, ``--map`` or set of PAI side
      tables, replaces the earlier jobs of its path and of its content.
    """
    files_json = json.dumps(sorted(plan.files))
    mapping_json = json.dumps(dict(mapping or {}), sort_keys=True)
    name = Path(plan.file).name
    fp = _fingerprint(plan.files)
    sources = _all_sources(con)  # read once for both lookups below
    olds = [s for s in sources if plan.file in json.loads(s.files)]
    old = olds[0] if len(olds) == 1 else None

    def same_reading(s: _Source) -> bool:
        return (s.format, s.mapping) == (format, mapping_json) and not (strict and s.bad_rows)

    if old and same_reading(old) and old.files == files_json and old.fingerprint == fp:
        _kept(con, old, plan, report)
        return
    if progress:
        progress(f"hashing {name}", *step)
    try:
        digest = content_hash(plan.files)
    except (OSError, EOFError, zlib.error) as exc:  # unreadable; a .gz cut short or not gzip
        raise unreadable(plan.adapter, exc.filename or plan.file, exc) from None
    if old and same_reading(old) and old.files == files_json and old.content_hash == digest:
        con.execute("UPDATE sources SET fingerprint = ? WHERE source_id = ?",
                    [fp, old.source_id])  # touched, not changed
        _kept(con, old, plan, report)
        return
    twins = [s for s in sources if s.content_hash == digest and s not in olds]
    twin = next((s for s in twins if same_reading(s)), None)
    gone = olds if twin else olds + twins
    for o in gone:
        _delete_source(con, o.source_id)
    if gone:
        report["replaced"].extend(
            {"source_id": o.source_id, "files": json.loads(o.files), "format": o.format,
             "mapping": json.loads(o.mapping), "jobs": o.rows} for o in gone)
    if twin and file_state(json.loads(twin.files), twin.fingerprint) == "missing":
        # the stored copy's files are gone (moved or renamed): the source now names these
        con.execute("UPDATE sources SET files = ?, fingerprint = ? WHERE source_id = ?",
                    [files_json, fp, twin.source_id])
        _kept(con, twin, plan, report, moved_from=json.loads(twin.files))
        return
    if twin:
        _kept(con, twin, plan, report, already=True)
        return
    if progress:
        progress(f"reading {name}", *step)
    n_bad, errors, notes = _read_plan(con, plan)
    sid = _new_source_id(con)
    if progress:
        progress(f"storing {name}", step[0] + 1, step[1])
    _insert(con, sid)
    n_jobs = con.execute("SELECT count(*) FROM jobs WHERE source_id = ?", [sid]).fetchone()[0]
    if not n_jobs and n_bad and (kept := sum(o.rows for o in gone)):
        # a new version of stored files whose every row is bad would leave fewer jobs than
        # before and none of its own: the ingest fails and the earlier jobs stay
        earlier = "; ".join(f"source {o.source_id}: {', '.join(json.loads(o.files))}"
                            for o in gone)
        raise TraincastError(
            f"{format}: {plan.file}: every row is bad ({n_bad:,}); it would replace the "
            f"{kept:,} job(s) of an earlier ingest of it or of its content ({earlier}), which "
            f"are kept; nothing of this ingest was stored:\n{format_errors(errors, n_bad)}",
            hint="fix the rows and ingest again, or drop the earlier jobs with traincast "
                 f"sources --drop {' --drop '.join(str(o.source_id) for o in gone)}",
            details={"bad_rows": n_bad, "errors": errors[:MAX_ERRORS_SHOWN]})
    if format in OVERLAPPING_EXPORTS and (shared := _ids_in_other_sources(con, sid, format)):
        notes.append({"file": plan.file, "count": shared, "note": (
            f"job id(s) also stored from another {format} source of this store: each source's "
            "jobs are its own, so where both files are exports of one cluster (overlapping "
            "monthly sacct files) such a job counts twice; remove the overlap from one file, "
            "or drop a source (traincast sources --drop ID)")})
    flags = _flags(con, sid)
    for f, v in flags.items():
        report["flags"][f] += v
    values = {"source_id": sid, "format": format, "files": files_json, "mapping": mapping_json,
              "fingerprint": fp, "rows": n_jobs, "bad_rows": n_bad, "content_hash": digest}
    con.execute(f"INSERT INTO sources ({', '.join(map(q, values))}, ingested_at) VALUES "
                f"({', '.join('?' * len(values))}, now())", list(values.values()))
    con.execute("DROP TABLE IF EXISTS _staged")
    report["sources"].append({"source_id": sid, "files": plan.files, "jobs": n_jobs,
                              "bad_rows": n_bad, "flags": flags, "unchanged": False,
                              "notes": notes})
    report["notes"].extend(notes)
    report["jobs"] += n_jobs
    report["bad_rows"] += n_bad
    report["errors"].extend(errors[:MAX_ERRORS_SHOWN - len(report["errors"])])


OVERLAPPING_EXPORTS = frozenset({"slurm"})
"""Formats a cluster exports in periods that may overlap and whose job ids it keeps unique
(Slurm's ``sacct --starttime/--endtime``): an id two sources hold is said at ingest. Other
formats number their jobs per trace (ElasticFlow's 0..N), or are one release."""


def _ids_in_other_sources(con: duckdb.DuckDBPyConnection, source_id: int, format: str) -> int:
    """How many job ids of source ``source_id`` another stored source of the same format
    also holds."""
    return con.execute(
        "SELECT count(DISTINCT job_id) FROM jobs WHERE source_id = ? AND job_id IN ("
        "SELECT job_id FROM jobs WHERE source_id IN (SELECT source_id FROM sources WHERE "
        "format = ? AND source_id <> ?))", [source_id, format, source_id]).fetchone()[0]


def _delete_source(con: duckdb.DuckDBPyConnection, source_id: int) -> None:
    """Remove a source and its jobs (inside the caller's transaction)."""
    con.execute("DELETE FROM jobs WHERE source_id = ?", [source_id])
    con.execute("DELETE FROM sources WHERE source_id = ?", [source_id])


def _kept(con: duckdb.DuckDBPyConnection, src: _Source, plan: Plan, report: dict[str, Any],
          already: bool = False, moved_from: list[str] | None = None) -> None:
    """Report a plan whose jobs are those of source ``src`` already in the store (its own
    earlier ingest, or with ``already`` another file of the same content; with
    ``moved_from`` the files of that source, gone since, which the source now names
    ``plan.files`` in place of)."""
    entry: dict[str, Any] = {"source_id": src.source_id, "files": plan.files, "jobs": src.rows,
                             "bad_rows": src.bad_rows, "flags": _flags(con, src.source_id),
                             "unchanged": True}
    if moved_from is not None:
        entry["moved_from"] = moved_from
    if already:
        files = json.loads(src.files)
        same_name = [f for f in files if Path(f).name == Path(plan.file).name]
        entry["already_ingested"] = {"source_id": src.source_id,
                                     "file": (same_name or files)[0]}
    report["sources"].append(entry)


class _Source(NamedTuple):
    """A row of the store's ``sources`` table (``files`` and ``mapping`` as JSON text)."""

    source_id: int
    format: str
    files: str
    mapping: str
    fingerprint: str
    rows: int
    bad_rows: int
    content_hash: str | None


def _all_sources(con: duckdb.DuckDBPyConnection) -> list[_Source]:
    """The store's sources, oldest first (within the ingest's transaction: the tables are
    brought up to the schema by :func:`_create`)."""
    rows = con.execute("SELECT source_id, format, files, mapping, fingerprint, rows, bad_rows, "
                       "content_hash FROM sources ORDER BY source_id").fetchall()
    return [_Source(*r) for r in rows]


def _read_plan(con: duckdb.DuckDBPyConnection, plan: Plan
               ) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    """Stage the plan (:func:`_stage`): its bad-row count, first errors and notes.
    :class:`_ReadSerially` when DuckDB's parallel CSV reader
    refuses the files; Ctrl-C and a full disk are raised as they are (:meth:`Store.ingest`
    says them), every other DuckDB error is the trace's (:func:`unreadable`)."""
    try:
        _stage(con, plan)
        notes = [{"file": plan.file, "count": int(n), "note": what} for sql, what in plan.notes
                 if (n := con.execute(sql).fetchone()[0])]
    except (duckdb.Error, UnicodeDecodeError) as exc:  # DuckDB quoting bytes of a bad file
        if interrupted(exc) or disk_full(exc):
            raise
        if "parallel" in str(exc).lower() and "null_padding" in str(exc).lower():
            raise _ReadSerially from None
        raise unreadable(plan.adapter, erring_file(exc, plan.files) or plan.file,
                         exc) from None
    n_bad, errors = _errors(con)
    return n_bad, errors, notes


_DUCKDB_FILE = re.compile(r"^\s*file = (.+?)\s*$", re.MULTILINE)
"""The ``file = PATH`` line of a DuckDB CSV reader's error."""


def erring_file(exc: BaseException, files: Iterable[str]) -> str | None:
    """The one of a plan's ``files`` (a PAI table set) that DuckDB's error names in its
    ``file = PATH`` line, or None: the file to name in the error, not the plan's first."""
    named = _DUCKDB_FILE.search(str(exc))
    if named is None:
        return None
    said = Path(named.group(1))
    return next((f for f in files if Path(f) == said or Path(f).resolve() == said.resolve()),
                None)


def read_trace(path_or_paths: str | Path | Iterable[str | Path], format: str = "csv",
               db: str | Path | None = None, mapping: Mapping[str, str] | None = None, *,
               strict: bool = False, progress: Progress | None = None,
               on_report: Callable[[dict[str, Any]], None] | None = None) -> pa.Table:
    """The canonical job table of a trace: its files ingested into the store ``db`` (``None`` =
    in memory, nothing written; unchanged files are not ingested twice) and their jobs
    returned (only this trace's, not the rest of the store). Bad rows are skipped (``strict``:
    an error naming file, row and field); ``on_report`` receives the ingest report
    (:meth:`Store.ingest`), whose ``bad_rows`` and ``errors`` name them."""
    with Store(db) as store:
        report = store.ingest(path_or_paths, format, mapping, strict=strict, progress=progress)
        if on_report is not None:
            on_report(report)
        return store.jobs([s["source_id"] for s in report["sources"]])


# Functions over the store file ``db`` (None = ``traincast.duckdb`` in the working directory).

def ingest(paths: str | Path | Iterable[str | Path], format: str = "csv",
           db: str | Path | None = None, mapping: Mapping[str, str] | None = None,
           strict: bool = False, *, progress: Progress | None = None,
           parquet: str | Path | None = None) -> dict[str, Any]:
    """:meth:`Store.ingest` into the store file ``db`` (default: ``traincast.duckdb`` here)."""
    with Store(db_path(db)) as store:
        return store.ingest(paths, format, mapping, strict=strict, progress=progress,
                            parquet=parquet)


def load_jobs(db: str | Path | None = None,
              source_ids: Iterable[int] | None = None) -> pa.Table:
    """:meth:`Store.jobs` of the store file ``db`` (default: ``traincast.duckdb`` here)."""
    with Store(db_path(db)) as store:
        return store.jobs(source_ids)


def sources(db: str | Path | None = None) -> list[dict[str, Any]]:
    """:meth:`Store.sources` of the store file ``db``."""
    with Store(db_path(db)) as store:
        return store.sources()


def drop_sources(source_ids: Iterable[int], db: str | Path | None = None) -> dict[str, Any]:
    """:meth:`Store.drop` in the store file ``db``."""
    with Store(db_path(db)) as store:
        return store.drop(source_ids)


def export_parquet(path: str | Path, db: str | Path | None = None) -> Path:
    """:meth:`Store.export_parquet` of the store file ``db``."""
    with Store(db_path(db)) as store:
        return store.export_parquet(path)
