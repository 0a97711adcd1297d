"""The job store: one DuckDB file holding the canonical job table and the sources it came from.

:class:`Store` is the store (``Store(path)``; ``Store()`` = in memory); :meth:`Store.ingest`
runs an adapter's SQL plan over the trace files and appends the jobs in one transaction: bad
rows are counted and reported (file, row, field), then skipped — or, with ``strict``, fail the
whole ingest; any failure rolls back, leaving the store exactly as it was.
Ingesting the same files again replaces their jobs when the files changed and is a no-op when
they did not, so ``characterize TRACE`` twice does not duplicate jobs.

The store keeps the trace's facts only: no column is filled from the hardware catalog (no
default node, GPU or architecture; ``traincast.resolve`` does defaults). A store file written
before a column was added to the schema (:data:`~traincast.trace.schema.ADDED_COLUMNS`)
still opens: writing to it adds the column (null for the old jobs), reading it reads null.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import duckdb
import pyarrow as pa

from traincast.errors import NoSuchFileError, TraincastError
from traincast.trace.adapters import adapter
from traincast.trace.adapters.base import Plan, as_type, lit, q, typed, unreadable
from traincast.trace.schema import ALL_COLUMNS, COLUMNS, FLAG_COLUMNS, SCHEMA, SQL_TYPE

DEFAULT_DB = "traincast.duckdb"
MAX_ERRORS_SHOWN = 20
Progress = Callable[[str, int, int], None]


def db_path(db: str | Path | None) -> Path:
    """The store file: ``db``, else ``traincast.duckdb`` in the working directory."""
    return Path(db) if db else Path.cwd() / DEFAULT_DB


def _create(con: duckdb.DuckDBPyConnection) -> None:
    """Create the tables, or bring an older store's job table up to the schema (add the
    columns it lacks, null for its jobs)."""
    cols = ", ".join(f"{q(c)} {SQL_TYPE[c]}" for c in ALL_COLUMNS)
    con.execute(f"CREATE TABLE IF NOT EXISTS jobs ({cols})")
    have = _job_columns(con)
    for c in ALL_COLUMNS:
        if c not in have:
            con.execute(f"ALTER TABLE jobs ADD COLUMN {q(c)} {SQL_TYPE[c]}")
    con.execute("CREATE TABLE IF NOT EXISTS sources (source_id INTEGER PRIMARY KEY, "
                "format VARCHAR, files VARCHAR, mapping VARCHAR, fingerprint VARCHAR, "
                "rows BIGINT, bad_rows BIGINT, ingested_at TIMESTAMP)")


def _job_columns(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Columns of the store's job table (empty when there is none)."""
    rows = con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'jobs' "
                       "AND database_name = current_database() "
                       "AND schema_name = current_schema()").fetchall()
    return {r[0] for r in rows}


def _select_list(con: duckdb.DuckDBPyConnection) -> str:
    """SQL: the store's columns in schema order; a column an older store lacks reads null."""
    have = _job_columns(con)
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
    h = hashlib.sha256()
    for f in sorted(files):
        st = Path(f).stat()
        h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _stage(con: duckdb.DuckDBPyConnection, plan: Plan) -> None:
    """Run the plan into the temp table ``_staged``: typed canonical columns + first error.

    Duplicates are found last, among the rows without another error: a job's first good row
    is kept, its later rows are duplicates (``_first_row``)."""
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
    typed_rows = (f"SELECT *, {values}, COALESCE(({plan.censored}), FALSE) AS _censored, "
                  f"({plan.key()}) AS _key FROM {plan.relation}")
    checked = f"SELECT *, {case(first)} AS _err0 FROM ({typed_rows})"
    firsts = (f"SELECT *, min(_row) FILTER (WHERE _err0 IS NULL) OVER (PARTITION BY _key) "
              f"AS _first_row FROM ({checked})")
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
               "(architecture IS NULL AND n_gpus IS NOT NULL)", str(source_id)]
    names = ", ".join(q(c) for c in ALL_COLUMNS)
    con.execute(f"INSERT INTO jobs ({names}) SELECT {', '.join(select)} FROM _staged "
                "WHERE _err IS NULL ORDER BY _row")  # the trace's order


def _errors(con: duckdb.DuckDBPyConnection) -> tuple[int, list[dict[str, Any]]]:
    n = con.execute("SELECT count(*) FROM _staged WHERE _err IS NOT NULL").fetchone()[0]
    rows = con.execute("SELECT _err_file, _err_row, _err_field, _err_value FROM _staged "
                       "WHERE _err IS NOT NULL ORDER BY _err_file, TRY_CAST(_err_row AS BIGINT) "
                       f"LIMIT {MAX_ERRORS_SHOWN}").fetchall()
    return n, [{"file": f, "row": int(r) if r is not None else None, "field": fld,
                "value": v} for f, r, fld, v in rows]


def _flags(con: duckdb.DuckDBPyConnection, source_id: int) -> dict[str, int]:
    """How many of a source's stored jobs carry each flag."""
    counts = ", ".join(f"count(*) FILTER (WHERE {f})" for f in FLAG_COLUMNS)
    row = con.execute(f"SELECT {counts} FROM jobs WHERE source_id = ?", [source_id]).fetchone()
    return {f: int(v) for f, v in zip(FLAG_COLUMNS, row, strict=True)}


def format_errors(errors: list[dict[str, Any]], total: int) -> str:
    """Bad rows for people: one line each (file, row, field, value), first 20."""
    lines = [f"  {e['file']}: row {e['row']}: field {e['field']}: bad value {e['value']!r}"
             for e in errors]
    more = f"\n  ... and {total - len(errors)} more" if total > len(errors) else ""
    return "\n".join(lines) + more




class _ReadSerially(Exception):
    """A CSV file must be read by one thread (:data:`~traincast.trace.adapters.base.
    SERIAL_CSV_OPTIONS`): the ingest starts again."""


class Store:
    """A job store: one DuckDB file (``Store()`` = an in-memory store, nothing written).

    ``with Store("jobs.duckdb") as store: store.ingest(paths, "pai-2020"); jobs =
    store.jobs()``. Reading a file that does not exist is an error; the first ingest creates
    it (and removes it again when that ingest fails). Reads use a read-only connection, so
    several processes can read one store; an ingest reopens it for writing.
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

    def _connect(self, write: bool) -> duckdb.DuckDBPyConnection:
        if self._con is not None and (self._writable or not write):
            return self._con
        self.close()
        if not write and self.path is not None and not self.path.exists():
            raise TraincastError(f"{self.path}: no job store here",
                                 hint="ingest a trace first: traincast ingest TRACE "
                                      "--format F [--db FILE]")
        where = str(self.path) if self.path else ":memory:"
        try:
            self._con = duckdb.connect(where, read_only=not write and self.path is not None)
        except duckdb.Error as exc:
            raise TraincastError(f"{where}: cannot open the job store: "
                                 f"{str(exc).splitlines()[0]}",
                                 hint="--db names a DuckDB file written by traincast ingest "
                                      "(or a new file)") from None
        self._writable = write or self.path is None
        if self.path is None:
            _create(self._con)
        return self._con

    def _read(self) -> duckdb.DuckDBPyConnection:
        """A connection to an existing store whose job table exists."""
        con = self._connect(write=False)
        if not _job_columns(con):
            raise TraincastError(f"{self.path}: not a traincast job store",
                                 hint="give a file written by traincast ingest (--db FILE)")
        return con

    def ingest(self, paths: str | Path | Iterable[str | Path], format: str = "csv",
               mapping: Mapping[str, str] | None = None, *, strict: bool = False,
               progress: Progress | None = None) -> dict[str, Any]:
        """Ingest trace files (one transaction); returns a report.

        ``paths``: the trace files (for ``pai-2020``, its directory or table files).
        ``mapping``: canonical column -> source column (``--map``). Report keys: ``db``,
        ``format``, ``sources`` (one per file or table set: ``source_id``, ``files``, ``jobs``,
        ``bad_rows``, ``flags`` (its jobs' flag counts), ``unchanged``), ``jobs`` (stored by
        this call), ``bad_rows``, ``errors`` (first 20: ``file``, ``row``, ``field``,
        ``value``), ``flags`` (counts of each flag over the jobs stored by this call),
        ``notes`` (``file``, ``count``, ``note``: what the source holds that is not stored as
        read, e.g. PAI task rows without a job row), ``replaced`` (earlier sources of the same
        files, changed since or ingested with another format or mapping, whose jobs were
        replaced),
        ``seconds``. Bad rows are skipped, or with ``strict`` fail the ingest; a failed ingest
        leaves the store as it was.
        """
        t0 = time.perf_counter()
        if isinstance(paths, str | Path):
            paths = [paths]
        paths = [Path(p).resolve() for p in paths]
        for p in paths:
            if not p.exists():
                raise NoSuchFileError(p, "trace")
        mod = adapter(format)
        try:
            report = self._ingest_once(mod, paths, format, mapping, strict, progress, False)
        except _ReadSerially:
            # DuckDB's parallel CSV reader cannot pad short rows of a file whose quoted fields
            # hold line breaks; the failed statement aborted the transaction (rolled back):
            # start again, reading the CSV files by one thread
            report = self._ingest_once(mod, paths, format, mapping, strict, progress, True)
        if progress:
            progress("done", 1, 1)
        report["seconds"] = time.perf_counter() - t0
        return report

    def _ingest_once(self, mod: Any, paths: list[Path], format: str,
                     mapping: Mapping[str, str] | None, strict: bool,
                     progress: Progress | None, one_thread: bool) -> dict[str, Any]:
        """:meth:`ingest` in one transaction, rolled back on any failure (a
        :class:`_ReadSerially` of the one-thread reading is an error)."""
        existed = self.path is None or self.path.exists()
        con = self._connect(write=True)
        report: dict[str, Any] = {"db": str(self.path or ":memory:"), "format": format,
                                  "sources": [], "jobs": 0, "bad_rows": 0, "errors": [],
                                  "notes": [], "flags": dict.fromkeys(FLAG_COLUMNS, 0)}
        try:
            con.execute("SET enable_progress_bar = false")  # progress is ours, on stderr
            con.execute("SET TimeZone = 'UTC'")  # date-times without an offset are UTC
            _keep_try_casts(con)
            con.execute("BEGIN TRANSACTION")
            _create(con)
            plans = mod.plans(con, paths, mapping)
            for i, plan in enumerate(plans):
                if progress:
                    progress(f"reading {Path(plan.file).name}", 2 * i, 2 * len(plans))
                _ingest_plan(con, plan.serial() if one_thread else plan, format, mapping,
                             strict, report, progress, (2 * i + 1, 2 * len(plans)))
            con.execute("COMMIT")
        except BaseException as exc:
            self._abort(existed)
            if one_thread and isinstance(exc, _ReadSerially):
                raise TraincastError(f"{mod.NAME}: cannot read the files") from None
            raise
        return report

    def _abort(self, existed: bool) -> None:
        """Roll back a failed ingest; a store file this ingest created is removed."""
        if self._con is not None:
            try:
                self._con.execute("ROLLBACK")
            except duckdb.Error:
                pass
        if not existed and self.path is not None:
            self.close()
            for f in (self.path, self.path.with_name(self.path.name + ".wal")):
                f.unlink(missing_ok=True)

    def jobs(self, source_ids: Iterable[int] | None = None) -> pa.Table:
        """The canonical job table (:data:`~traincast.trace.schema.SCHEMA`), all sources or
        those given, in ingest order."""
        con = self._read()
        where = ""
        if source_ids is not None:
            ids = ", ".join(str(int(s)) for s in source_ids) or "NULL"
            where = f" WHERE source_id IN ({ids})"
        return con.sql(f"SELECT {_select_list(con)} FROM jobs{where}").to_arrow_table() \
            .cast(SCHEMA)

    def sources(self) -> list[dict[str, Any]]:
        """The sources recorded in the store (files, format, jobs, bad rows, time)."""
        cur = self._read().execute("SELECT * FROM sources ORDER BY source_id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def export_parquet(self, path: str | Path) -> Path:
        """Write the job table to a Parquet file (canonical columns + flags, schema order)."""
        con = self._read()
        con.execute(f"COPY (SELECT {_select_list(con)} FROM jobs) TO {lit(Path(path))} "
                    "(FORMAT parquet)")
        return Path(path)


def _ingest_plan(con: duckdb.DuckDBPyConnection, plan: Plan, format: str,
                 mapping: Mapping[str, str] | None, strict: bool, report: dict[str, Any],
                 progress: Progress | None, step: tuple[int, int]) -> None:
    """One plan (file or table set) into the store, inside the caller's transaction: kept
    when unchanged since its last ingest with the same format and mapping (and, with
    ``strict``, no bad rows then), else replaced (the jobs of a file are in the store once:
    ingesting it again with another ``--format``, ``--map`` or set of PAI side tables replaces
    its earlier jobs); adds to ``report``."""
    files_json = json.dumps(sorted(plan.files))
    mapping_json = json.dumps(dict(mapping or {}), sort_keys=True)
    fp = _fingerprint(plan.files)
    olds = _sources_of(con, plan.file)
    old = olds[0] if len(olds) == 1 else None
    if old and (old.format, old.files, old.mapping, old.fingerprint) == \
            (format, files_json, mapping_json, fp) and not (strict and old.bad_rows):
        report["sources"].append({"source_id": old.source_id, "files": plan.files,
                                  "jobs": old.rows, "bad_rows": old.bad_rows,
                                  "flags": _flags(con, old.source_id), "unchanged": True})
        return
    for o in olds:
        con.execute("DELETE FROM jobs WHERE source_id = ?", [o.source_id])
        con.execute("DELETE FROM sources WHERE source_id = ?", [o.source_id])
    if olds:
        report.setdefault("replaced", []).extend(
            {"source_id": o.source_id, "files": json.loads(o.files), "format": o.format,
             "mapping": json.loads(o.mapping), "jobs": o.rows} for o in olds)
    n_bad, errors, notes = _read_plan(con, plan, strict)
    sid = con.execute("SELECT COALESCE(max(source_id), 0) + 1 FROM sources").fetchone()[0]
    if progress:
        progress(f"storing {Path(plan.file).name}", *step)
    _insert(con, sid)
    n_jobs = con.execute("SELECT count(*) FROM jobs WHERE source_id = ?", [sid]).fetchone()[0]
    flags = _flags(con, sid)
    for f, v in flags.items():
        report["flags"][f] += v
    con.execute("INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, now())",
                [sid, format, files_json, mapping_json, fp, n_jobs, n_bad])
    con.execute("DROP TABLE IF EXISTS _staged")
    report["sources"].append({"source_id": sid, "files": plan.files, "jobs": n_jobs,
                              "bad_rows": n_bad, "flags": flags, "unchanged": False,
                              "notes": notes})
    report["notes"].extend(notes)
    report["jobs"] += n_jobs
    report["bad_rows"] += n_bad
    report["errors"].extend(errors[:MAX_ERRORS_SHOWN - len(report["errors"])])


class _Source(NamedTuple):
    """A row of the store's ``sources`` table (``files`` and ``mapping`` as JSON text)."""

    source_id: int
    format: str
    files: str
    mapping: str
    fingerprint: str
    rows: int
    bad_rows: int


def _sources_of(con: duckdb.DuckDBPyConnection, file: str) -> list[_Source]:
    """The earlier sources holding ``file`` (a plan's jobs file; PAI: its job table, with any
    side tables), oldest first."""
    rows = con.execute("SELECT source_id, format, files, mapping, fingerprint, rows, bad_rows "
                       "FROM sources ORDER BY source_id").fetchall()
    return [_Source(*r) for r in rows if file in json.loads(r[2])]


def _read_plan(con: duckdb.DuckDBPyConnection, plan: Plan, strict: bool
               ) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    """Stage the plan (:func:`_stage`): its bad-row count, first errors and notes; with
    ``strict`` a bad row is an error. :class:`_ReadSerially` when DuckDB's parallel CSV reader
    refuses the files."""
    try:
        _stage(con, plan)
        notes = [{"file": plan.file, "count": int(n), "note": what} for sql, what in plan.notes
                 if (n := con.execute(sql).fetchone()[0])]
    except duckdb.Error as exc:
        if "parallel" in str(exc).lower() and "null_padding" in str(exc).lower():
            raise _ReadSerially from None
        raise unreadable(plan.adapter, plan.file, exc) from None
    n_bad, errors = _errors(con)
    if n_bad and strict:
        raise TraincastError(
            f"{plan.adapter}: {plan.file}: {n_bad} bad row(s); nothing was stored "
            f"(--strict):\n{format_errors(errors, n_bad)}",
            hint="fix the rows, or ingest without --strict to skip them")
    return n_bad, errors, notes


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
           strict: bool = False, *, progress: Progress | None = None) -> dict[str, Any]:
    """:meth:`Store.ingest` into the store file ``db`` (default: ``traincast.duckdb`` here)."""
    with Store(db_path(db)) as store:
        return store.ingest(paths, format, mapping, strict=strict, progress=progress)


def load_jobs(db: str | Path | None = None,
              source_ids: Iterable[int] | None = None) -> pa.Table:
    """:meth:`Store.jobs` of the store file ``db`` (default: ``traincast.duckdb`` here)."""
    with Store(db_path(db)) as store:
        return store.jobs(source_ids)


def sources(db: str | Path | None = None) -> list[dict[str, Any]]:
    """:meth:`Store.sources` of the store file ``db``."""
    with Store(db_path(db)) as store:
        return store.sources()


def export_parquet(path: str | Path, db: str | Path | None = None) -> Path:
    """:meth:`Store.export_parquet` of the store file ``db``."""
    with Store(db_path(db)) as store:
        return store.export_parquet(path)
