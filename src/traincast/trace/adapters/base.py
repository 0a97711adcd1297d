"""What an adapter produces: a plan of SQL expressions that DuckDB runs over the source files.

An adapter never reads rows into Python: it names the source's columns, checks that the ones
it needs exist, and maps them to canonical columns with SQL expressions. The store runs the
plan in one statement, so GB-sized tables stream through DuckDB.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb

from traincast.errors import TraincastError
from traincast.trace.schema import (
    KNOWN_ARCHITECTURES,
    NONNEGATIVE_COLUMNS,
    NUMERIC_COLUMNS,
    SQL_TYPE,
)


@dataclass(frozen=True)
class Field:
    """A canonical column: its SQL expression and, when it comes straight from one source
    column, that column (a non-empty raw value whose expression is NULL is a bad row)."""

    expr: str
    raw: str | None = None


@dataclass(frozen=True)
class Check:
    """A bad-row condition (SQL over the source relation) and how to report it."""

    field: str
    condition: str
    value: str
    file: str | None = None   # SQL expression of the file named in the report (default: plan's)
    row: str = "_row"         # SQL expression of the row number named in the report
    field_sql: str | None = None  # SQL expression of the field's name, when it varies by row
    among_good: bool = False  # checked only on rows without another error (duplicates)


@dataclass
class Plan:
    """One source relation (SQL with a 1-based ``_row`` column) mapped to canonical columns."""

    adapter: str
    file: str
    relation: str
    fields: dict[str, Field]
    censored: str = "FALSE"
    checks: list[Check] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    dedup_key: str | None = None  # SQL identifying a job (default: the job_id expression)
    notes: list[tuple[str, str]] = field(default_factory=list)
    """(SQL returning one count, what it counts): facts of the source worth saying that are not
    bad rows (e.g. task rows whose job is not in the job table); said when the count is > 0."""

    def all_checks(self) -> list[Check]:
        """The adapter's checks plus the generic ones: unparsable, infinite or (integer
        columns) fractional numbers and times, negative counts and sizes, unknown architecture
        names. Generic checks read the typed value of a canonical column as :func:`typed`
        names it (:func:`as_type`, computed once by the store)."""
        out = list(self.checks)
        for name, f in self.fields.items():
            if f.raw is not None and name in NUMERIC_COLUMNS:
                out.append(Check(name, f"{typed(name)} IS NULL AND {present(f.raw)}",
                                 f"CAST({f.raw} AS VARCHAR)"))
        for name in NONNEGATIVE_COLUMNS:
            if name in self.fields:
                out.append(Check(name, f"{typed(name)} < 0",
                                 f"CAST({self.fields[name].raw or typed(name)} AS VARCHAR)"))
        if "architecture" in self.fields:
            a = typed("architecture")
            known = ", ".join(f"'{k}'" for k in KNOWN_ARCHITECTURES)
            raw = self.fields["architecture"].raw
            out.append(Check("architecture", f"{a} IS NOT NULL AND {a} NOT IN ({known})",
                             f"CAST({raw} AS VARCHAR)" if raw else a))
        if self.dedup_key or "job_id" in self.fields:  # over the job key (_key, the store's)
            out.append(Check("job_id", "_key IS NOT NULL AND _first_row < _row",
                             "CAST(_key AS VARCHAR) || ' (a duplicate of row ' || _first_row "
                             "|| ')'", among_good=True))
        return out

    def serial(self) -> Plan:
        """This plan with its CSV files read by one thread (:func:`serial`)."""
        return replace(self, relation=serial(self.relation),
                       notes=[(serial(q), what) for q, what in self.notes])

    def key(self) -> str:
        """SQL over the relation: what identifies a job of this source (a later row with the
        same key is a duplicate, a bad row; a NULL key is no job's). Default: the ``job_id``
        expression."""
        if self.dedup_key:
            return self.dedup_key
        return self.fields["job_id"].expr if "job_id" in self.fields else "NULL"


def as_type(expr: str, sql_type: str) -> str:
    """SQL: ``expr`` as a value of a canonical column's type, never a cast error: NaN (a
    missing value) and infinite numbers become NULL, and so, for ``BIGINT`` columns, do numbers
    that are not whole or out of range. A NULL typed value from a non-empty source value is a
    bad row (:meth:`Plan.all_checks`)."""
    if sql_type not in ("DOUBLE", "BIGINT"):
        return f"CAST(({expr}) AS {sql_type})"
    x = f"TRY_CAST(({expr}) AS DOUBLE)"
    if sql_type == "DOUBLE":
        return f"CASE WHEN isfinite({x}) THEN {x} END"
    return f"CASE WHEN {x} = round({x}) THEN TRY_CAST({x} AS BIGINT) END"


def typed(name: str) -> str:
    """The SQL name of canonical column ``name``'s typed value while a plan is staged."""
    return f'"_t_{name}"'


def q(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def lit(text: str | Path) -> str:
    """A SQL string literal."""
    return "'" + str(text).replace("'", "''") + "'"


MISSING: tuple[str, ...] = ("", "none", "null", "nan", "-nan", "na", "n/a", "#n/a", "<na>",
                            "\\n")
"""Source values that mean "no value" (compared trimmed and lower-cased): empty, Python's
``None``, ``null``, NaN, pandas' NA spellings, and ``\\N`` (the NULL of MySQL / Hive exports).
They are missing values, never bad rows."""


def present(col: str) -> str:
    """SQL: the source value is given (not NULL and not a :data:`MISSING` spelling)."""
    spellings = ", ".join(lit(m) for m in MISSING)
    return (f"({col} IS NOT NULL AND lower(trim(CAST({col} AS VARCHAR))) "
            f"NOT IN ({spellings}))")


def num(col: str) -> str:
    """A finite number from a source column; NULL when it does not parse, is NaN (missing) or
    infinite (a bad row, :meth:`Plan.all_checks`)."""
    x = f"TRY_CAST({col} AS DOUBLE)"
    return f"(CASE WHEN isfinite({x}) THEN {x} END)"


def ts(col: str) -> str:
    """Seconds since the epoch from a number or a date-time text: ``2017-10-03 14:13:52`` (no
    offset: read as UTC), ``2020-07-01T10:00:00Z``, ``2020-07-01 10:00:00+08:00`` (the offset
    applied). The store reads with its time zone set to UTC (:mod:`traincast.trace.store`)."""
    return f"COALESCE({num(col)}, epoch(TRY_CAST(CAST({col} AS VARCHAR) AS TIMESTAMPTZ)))"


def text(col: str) -> str:
    """A text column; empty strings and the :data:`MISSING` spellings become NULL."""
    return f"CASE WHEN {present(col)} THEN trim(CAST({col} AS VARCHAR)) END"


CSV_OPTIONS = "all_varchar=true, quote='\"', escape='\"', strict_mode=false, null_padding=true"
"""How every CSV is read: text columns (typed by the adapters), short rows padded with NULL."""
SERIAL_CSV_OPTIONS = CSV_OPTIONS + ", parallel=false"
"""The same, read by one thread: DuckDB's parallel reader cannot pad short rows of a file whose
quoted fields hold line breaks; the store reads such a file again this way."""


def serial(sql: str) -> str:
    """``sql`` with its CSV files read by one thread (:data:`SERIAL_CSV_OPTIONS`)."""
    return sql.replace(CSV_OPTIONS, SERIAL_CSV_OPTIONS)


def csv_relation(path: Path, names: Iterable[str] | None = None, rows: bool = True) -> str:
    """A CSV file as a relation of text columns with its data-row number ``_row`` (1-based).

    ``names`` given = a headerless file with these column names. ``rows=False`` leaves out
    ``_row`` (numbering needs a window over the whole file: skip it for big side tables that
    are only aggregated, so DuckDB streams them).
    """
    opts = CSV_OPTIONS
    if names is not None:
        cols = ", ".join(f"{lit(n)}: 'VARCHAR'" for n in names)
        opts += f", header=false, columns={{{cols}}}"
    else:
        opts += ", header=true"
    if not rows:
        return f"read_csv({lit(path)}, {opts})"
    return (f"(SELECT row_number() OVER () AS _row, * FROM read_csv({lit(path)}, {opts}))")


def table_relation(path: Path, names: Iterable[str] | None = None) -> str:
    """CSV or Parquet (by extension) as a relation with ``_row``."""
    if path.suffix.lower() in (".parquet", ".pq"):
        return f"(SELECT row_number() OVER () AS _row, * FROM read_parquet({lit(path)}))"
    return csv_relation(path, names)


def source_columns(con: duckdb.DuckDBPyConnection, relation: str) -> list[str]:
    """Column names of a relation (reads the header / schema only)."""
    return [d[0] for d in con.execute(f"SELECT * FROM {relation} LIMIT 0").description]


def require(adapter: str, path: Path | str, have: Iterable[str], needed: Iterable[str],
            hint: str = "") -> None:
    """Raise a clear error when the source lacks columns the adapter needs (names compared
    case-insensitively, as DuckDB resolves them: ``Job_ID`` is ``job_id``)."""
    have = {c.lower() for c in have}
    missing = [c for c in needed if c.lower() not in have]
    if missing:
        raise TraincastError(
            f"{adapter}: {path}: missing column(s) {', '.join(missing)}; the {adapter} adapter "
            f"expects the columns {', '.join(needed)}",
            hint=hint or f"map a column with --map COL=FIELD, or check --format {adapter}")


def apply_mapping(fields: dict[str, Field], mapping: Mapping[str, str] | None,
                  columns: Iterable[str], adapter: str, path: Path) -> dict[str, Field]:
    """``--map COL=FIELD``: canonical column COL is read from source column FIELD."""
    columns = set(columns)
    out = dict(fields)
    for col, src in (mapping or {}).items():
        if col not in SQL_TYPE:
            raise TraincastError(f"--map {col}={src}: {col!r} is not a canonical column",
                                 hint=f"canonical columns: {', '.join(SQL_TYPE)}")
        require(adapter, path, columns, [src], hint=f"--map {col}={src} names a column the file "
                "does not have")
        out[col] = field_from(col, q(src))
    return out


def field_from(col: str, src: str) -> Field:
    """A canonical column read straight from a source column, converted by its type."""
    sql_type = SQL_TYPE[col]
    if col.endswith("_time_s"):
        return Field(ts(src), src)
    if sql_type == "BOOLEAN":
        return Field(f"TRY_CAST({src} AS BOOLEAN)", src)
    if col == "architecture":  # names are lower case: 'PS-Worker' is 'ps-worker'
        return Field(f"lower({text(src)})", src)
    if sql_type == "VARCHAR":
        return Field(text(src))
    return Field(num(src), src)  # DOUBLE, BIGINT: as_type makes the canonical type


def running_status(expr: str) -> str:
    """SQL: the status says the job was still running (or waiting) at the end of the trace."""
    return (f"lower(trim(COALESCE(CAST({expr} AS VARCHAR), ''))) "
            f"IN ('running', 'pending', 'waiting', 'queued')")


def unfinished(fields: Mapping[str, Field]) -> str:
    """SQL: censored when the job's status says running (or waiting), or it has a start time
    and no end time."""
    status, start, end = (fields[c].expr if c in fields else "NULL"
                          for c in ("status", "start_time_s", "end_time_s"))
    return f"({running_status(status)} OR (({start}) IS NOT NULL AND ({end}) IS NULL))"


def unreadable(adapter: str, path: Path | str, exc: Exception) -> TraincastError:
    """The error for a trace file DuckDB cannot read: adapter, file and the reason (DuckDB's
    first line, and for CSV errors the line that says why, not its list of reader options)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    why = lines[:1]
    if lines and "CSV Error" in lines[0]:
        why += [ln for ln in lines[1:] if not ln.startswith(
            ("Original Line", "Possible Solution", "LINE ")) and " = " not in ln][:1]
    reason = ": ".join(why) or type(exc).__name__
    hint = f"check that it is a {adapter} trace"
    if "not utf-8" in reason.lower():
        hint = ("the file must be UTF-8 text: convert it, e.g. iconv -f latin1 -t utf-8 FILE "
                "> FILE.utf8.csv")
    return TraincastError(f"{adapter}: {path}: cannot read the file: {reason}", hint=hint)


ARCHIVE_SUFFIXES: tuple[str, ...] = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")
"""Archives, as traces are downloaded (the PAI release: ``pai_job_table.tar.gz``): extracted
first, never read (``.gz`` alone is a compressed file, read as it is)."""


def is_archive(path: Path) -> bool:
    """The file is an archive (:data:`ARCHIVE_SUFFIXES`), not a table."""
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def archive_error(adapter: str, path: Path) -> TraincastError:
    """The error for an archive given as a trace file."""
    how = f"unzip {path.name}" if path.name.lower().endswith(".zip") else f"tar -xf {path.name}"
    return TraincastError(f"{adapter}: {path}: an archive, not a trace file",
                          hint=f"extract it first ({how}) and give the extracted file(s)")


def file_plans(con: duckdb.DuckDBPyConnection, paths: Iterable[Path],
               mapping: Mapping[str, str] | None, adapter: str, required: Iterable[str],
               fields_of: Callable[[list[str]], dict[str, Field]],
               censored_of: Callable[[dict[str, Field], list[str]], str] | None = None, *,
               relation: Callable[[Path], str] = table_relation,
               probe: Callable[[Path], str] | None = None) -> list[Plan]:
    """One plan per trace file, for adapters that map one file to jobs row by row.

    For each file: its columns (read from ``probe(path)``, else from ``relation(path)``, the
    relation with ``_row`` the plan runs over) must include ``required``; its canonical columns
    are ``fields_of(columns)`` with ``--map`` applied; a job is censored where
    ``censored_of(fields, columns)`` holds (default: never).
    """
    out = []
    for path in paths:
        if path.is_dir():
            raise TraincastError(f"{adapter}: {path}: a directory, not a trace file",
                                 hint=f"give the {adapter} trace file(s) themselves (only "
                                      "--format pai-2020 reads a directory of tables)")
        if is_archive(path):
            raise archive_error(adapter, path)
        try:
            cols = source_columns(con, (probe or relation)(path))
        except duckdb.Error as exc:
            raise unreadable(adapter, path, exc) from None
        cols = [c.lower() for c in cols]  # DuckDB resolves names case-insensitively
        require(adapter, path, cols, required)
        fields = apply_mapping(fields_of(cols), mapping, cols, adapter, path)
        censored = censored_of(fields, cols) if censored_of else "FALSE"
        out.append(Plan(adapter, str(path), relation(path), fields, censored=censored,
                        files=[str(path)]))
    return out
