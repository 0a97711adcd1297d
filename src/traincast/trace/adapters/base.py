"""What an adapter produces: a plan of SQL expressions that DuckDB runs over the source files.

An adapter never reads rows into Python: it names the source's columns, checks that the ones
it needs exist, and maps them to canonical columns with SQL expressions. The store runs the
plan in one statement, so GB-sized tables stream through DuckDB.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import gzip
import io
import itertools
import re
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb

from traincast.errors import TraincastError, bare_name, clip, did_you_mean
from traincast.files import open_bytes
from traincast.trace.schema import (
    BOUNDS,
    COLUMNS,
    DURATION_MAX_S,
    DURATION_MAX_TEXT,
    KNOWN_ARCHITECTURES,
    NUMERIC_COLUMNS,
    SQL_TYPE,
    TIME_COLUMNS,
)


@dataclass(frozen=True)
class Field:
    """A canonical column: its SQL expression and, when it comes straight from one source
    column, that column (``raw``: a non-empty raw value whose expression is NULL is a bad row;
    ``column``: a text column's source, named in reports as ``raw`` is)."""

    expr: str
    raw: str | None = None
    column: str | None = None


_IDENTIFIER = re.compile(r'"((?:[^"]|"")*)"|([A-Za-z_][A-Za-z0-9_]*)')
"""A SQL identifier, quoted or bare: a source column named as it is."""


def source_name(expr: str | None) -> str | None:
    """The source column a ``Field.raw`` or ``Field.column`` expression names, unquoted
    (``"n_gpus"`` -> ``n_gpus``); None for an expression that is no column name."""
    m = _IDENTIFIER.fullmatch(expr) if expr else None
    if m is None:
        return None
    return m[1].replace('""', '"') if m[1] is not None else m[2]


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
    dedup_field: str = "job_id"  # the source column a duplicate is reported at (dedup_key's)
    dedup_prefer: str | None = None
    """SQL over the relation: which of a job's rows is kept, the lowest value first, then the
    first row (default: the first row; Slurm's: a final state before a running one)."""
    spelling: dict[str, str] = field(default_factory=dict)
    """The file's column names by their lower case (``nnodes`` -> ``NNodes``): a report names a
    column as the file spells it (adapters read names in lower case, as DuckDB resolves them)."""
    notes: list[tuple[str, str]] = field(default_factory=list)
    """(SQL returning one count, what it counts): facts of the source worth saying that are not
    bad rows (e.g. task rows whose job is not in the job table); said when the count is > 0."""

    def all_checks(self) -> list[Check]:
        """The adapter's checks plus the generic ones, in this order (a row reports the first
        it fails): a missing job id; a job id holding a line break (a quote left open, the
        lines after it read into the id; free-text columns such as ``user`` may hold quoted
        line breaks);
        unparsable or infinite numbers and times, and fractional numbers in integer columns;
        values outside their physical bounds (:data:`~traincast.trace.schema.BOUNDS`: a negative
        count, size, feature or utilization, a time outside the years 1–9999, more
        than a million GPUs, a utilization above 1, ...); an end before its start, or a job
        longer than :data:`~traincast.trace.schema.DURATION_MAX_S`; unknown architecture names;
        duplicate jobs. Generic checks read the typed value of a canonical column as
        :func:`typed` names it (:func:`as_type`, computed once by the store)."""
        out: list[Check] = []
        if "job_id" in self.fields:  # a line break in a job id: a quote left open
            f = self.fields["job_id"]
            raw = f"CAST({f.raw if f.raw is not None else typed('job_id')} AS VARCHAR)"
            out.append(Check("job_id", f"{typed('job_id')} IS NULL",
                             "'(missing: every job needs an id)'"))
            out.append(Check("job_id", f"strpos({raw}, chr(10)) > 0",
                             f"split_part({raw}, chr(10), 1) || ' ... (holds a line break: a "
                             "job id is one line; the quote that opens this value closes lines "
                             "later, so the lines between were read into it)'"))
        for name, f in self.fields.items():  # reported at the source column that does not parse
            if f.raw is not None and name in NUMERIC_COLUMNS:
                said = (f"CAST({f.raw} AS VARCHAR) || {lit(NOT_READ.get(name, ''))} || "
                        f"{decimal_comma_hint(f.raw)}")
                if name in TIME_COLUMNS and "TIMESTAMPTZ" in f.expr:  # read by ts(): text too
                    said = zone_report(f.raw, said)
                out.append(Check(self.named(name, raw=True),
                                 f"{typed(name)} IS NULL AND {present(f.raw)}", said))
        for name, bound in BOUNDS.items():
            if name in self.fields:
                check = bound_check(name, self.shown(name), bound.lo, bound.hi, bound.why)
                raw = self.fields[name].raw
                if name in TIME_COLUMNS and raw is not None:  # a number, not a date-time
                    check = replace(check, value=millisecond_hint(
                        f"(CASE WHEN {num(raw)} IS NOT NULL THEN {typed(name)} END)",
                        check.value))
                out.append(check)
        if "start_time_s" in self.fields and "end_time_s" in self.fields:
            start, end = typed("start_time_s"), typed("end_time_s")
            shown_start, shown_end = self.shown("start_time_s"), self.shown("end_time_s")
            said_start = self.named("start_time_s").replace("'", "''")
            out.append(Check("end_time_s", f"{end} < {start}",
                             f"{shown_end} || ' (before {said_start} ' || {shown_start} "
                             f"|| ')'"))
            out.append(Check("end_time_s", f"{end} - {start} > {DURATION_MAX_S!r}",
                             f"{shown_end} || ' (' || CAST({end} - {start} AS VARCHAR) || "
                             f"' s after {said_start} ' || {shown_start} || ': longer than "
                             f"{DURATION_MAX_TEXT} s)'"))
        if "architecture" in self.fields:
            a = typed("architecture")
            known = ", ".join(f"'{k}'" for k in KNOWN_ARCHITECTURES)
            raw = self.fields["architecture"].raw
            out.append(Check("architecture", f"{a} IS NOT NULL AND {a} NOT IN ({known})",
                             f"CAST({raw} AS VARCHAR)" if raw else a))
        if self.dedup_key or "job_id" in self.fields:  # over the job key (_key, the store's)
            out.append(Check(self.dedup_field if self.dedup_key else "job_id",
                             "_key IS NOT NULL AND _first_row <> _row",
                             "CAST(_key AS VARCHAR) || ' (a duplicate of row ' || _first_row "
                             "|| CASE WHEN _first_row > _row THEN ', kept: its later record of "
                             "the job has its final state' ELSE '' END || ')'", among_good=True))
        every = list(self.checks) + [c if c.field not in self.fields else
                                     replace(c, field=self.named(c.field)) for c in out]
        return [replace(c, field=self.spelling.get(c.field.lower(), c.field))
                if c.field.lower() in self.spelling else c for c in every]

    def named(self, name: str, raw: bool = False) -> str:
        """The field a report names for canonical column ``name``: the source column it is
        read straight from (``Field.column``: ``num_gpu`` for ElasticFlow's GPUs, ``gpus``
        under ``--map n_gpus=gpus``), else ``name`` itself (a column computed from several,
        as ElasticFlow's end time from its submission and duration). ``raw``: the source
        column whose text is parsed (``Field.raw``), for a value that does not parse."""
        f = self.fields.get(name)
        return (source_name(f.raw if raw else f.column) if f is not None else None) or name

    def shown(self, name: str) -> str:
        """SQL: the value of canonical column ``name`` as a report shows it (the source text
        where the column comes straight from one and gives one, else the typed value)."""
        raw = self.fields[name].raw
        shown = f"CAST({typed(name)} AS VARCHAR)"
        return f"COALESCE(CAST({raw} AS VARCHAR), {shown})" if raw else shown

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


def bound_check(name: str, shown: str, lo: float, hi: float, why: str,
                expr: str | None = None) -> Check:
    """A bad row where a finite value lies outside ``[lo, hi]``: reported as its text, with
    ``(must be WHY)`` unless it is a negative value of a column that starts at 0 (a negative
    count says itself). ``expr``: the SQL value checked (default: the typed column)."""
    x = expr or typed(name)
    said = f"{shown} || ' (must be {why})'"
    value = f"CASE WHEN {x} < 0 THEN {shown} ELSE {said} END" if lo == 0 else said
    return Check(name, f"({x} < {lo!r} OR {x} > {hi!r})", value)


SUBSECOND_UNITS: tuple[tuple[str, float], ...] = (
    ("milliseconds", 1e3), ("microseconds", 1e6), ("nanoseconds", 1e9))
"""The units of an export's integer times past year 9999 as seconds (JavaScript's and Java's
milliseconds, Python's and Spark's microseconds, Go's and pandas' nanoseconds), each read as
a time of years 2000-2286 (946,684,800 to 1e10 seconds) by :func:`millisecond_hint`."""


def millisecond_hint(x: str, value: str) -> str:
    """SQL: a bad time's report ``value``, with what it reads as in milliseconds, microseconds
    or nanoseconds since 1970 where it is past year 9999 as seconds and a time of years
    2000-2286 in that unit (:data:`SUBSECOND_UNITS`)."""
    whens = " ".join(
        f"WHEN {x} BETWEEN {946684800 * k:.0f} AND {1e10 * k:.0f} THEN {value} || ' (in {unit} "
        f"since 1970 it is ' || strftime(make_timestamp(CAST({x} / {k:.0f} * 1e6 AS BIGINT)), "
        f"'%Y-%m-%d %H:%M:%S') || ' UTC: give seconds, or a date-time)'"
        for unit, k in SUBSECOND_UNITS)
    return f"CASE {whens} ELSE {value} END"


def yyyymmdd_note(col: str, label: str) -> tuple[str, str]:
    """The note of a time column whose every stored value reads as a date written
    ``YYYYMMDD`` (years 1900-2100: 20240102), over the staged rows (``_staged``, the store's
    typed values): read as seconds since 1970 they fall in 1970-1972, a day apart is 1 s. The
    values are kept as seconds (a trace of relative seconds may hold such numbers); the note
    says how to give them."""
    c = q(col)
    # a WHERE, not a FILTER: DuckDB takes a conjunction's terms in turn over the rows left, so
    # the month and day (floating-point remainders) are computed for values in range only
    ymd = (f"{c} BETWEEN 19000101 AND 21001231 AND {c} = floor({c}) "
           f"AND (floor({c} / 100) % 100) BETWEEN 1 AND 12 AND ({c} % 100) BETWEEN 1 AND 31")
    return (f"SELECT CASE WHEN given.n > 0 AND dated.n = given.n THEN given.n ELSE 0 END FROM "
            f"(SELECT count({c}) AS n FROM _staged WHERE _err IS NULL) given, "
            f"(SELECT count(*) AS n FROM _staged WHERE _err IS NULL AND {ymd}) dated",
            f"value(s) of {label} look like dates written YYYYMMDD (20240102), every one of "
            "the column's: they are read as seconds since 1970 (20240102 s is 1970-08-23; a "
            "day apart is 1 s); give them as date-times (2024-01-02) or as seconds")


def whole_check(col: str, unit: str) -> Check:
    """A bad row where the source count column ``col`` holds a fractional number (``unit``:
    what it counts, ``GPUs``, ``nodes``)."""
    n = num(col)
    return Check(col, f"{n} <> round({n})",
                 f"CAST({q(col)} AS VARCHAR) || ' (must be a whole number of {unit})'")


def duration_checks(col: str, said: str = " (not a number of seconds)") -> list[Check]:
    """A source duration column's bad rows: a value that is not a finite number (reported with
    ``said`` after it), and one outside 0 to :data:`~traincast.trace.schema.DURATION_MAX_S`
    seconds (times may be negative, durations not)."""
    d, raw = num(col), f"CAST({q(col)} AS VARCHAR)"
    return [Check(col, f"{present(q(col))} AND {d} IS NULL", raw + (f" || {lit(said)}" if said
                                                                    else "")),
            bound_check(col, raw, 0, DURATION_MAX_S, f"seconds from 0 to {DURATION_MAX_TEXT}",
                        d)]


NOT_READ: dict[str, str] = dict.fromkeys(
    TIME_COLUMNS, " (not seconds nor a date-time such as 2024-01-02 10:00:00 or "
                  "2024-01-02T10:00:00+08:00)")
"""What a time that does not parse is not, said after it in the report (a month-first date,
``07/01/2023 00:00``, is read as neither)."""


def decimal_comma_hint(col: str) -> str:
    """SQL: what a number written with a decimal comma (``0,75``, ``1.024,5``: a spreadsheet's
    in a locale that writes them so) is told, else ''."""
    return (f"CASE WHEN regexp_full_match(trim(CAST({col} AS VARCHAR)), "
            "'-?[0-9]{1,3}([.][0-9]{3})*,[0-9]+|-?[0-9]+,[0-9]+') THEN ' (a decimal comma: "
            "write numbers with a point, 0.75, as a spreadsheet in an English locale "
            "exports them)' ELSE '' END")


def typed(name: str) -> str:
    """The SQL name of canonical column ``name``'s typed value while a plan is staged."""
    return f'"_t_{name}"'


def q(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def lit(text: str | Path) -> str:
    """A SQL string literal."""
    return "'" + str(text).replace("'", "''") + "'"


GLOB_CHARACTERS = frozenset("*?[]{}")
"""Characters DuckDB's file readers take as a pattern over file names (a file ``jobs[1].csv``
would read ``jobs1.csv``)."""
_LINKS: dict[Path, Path] = {}
"""The links :func:`file_lit` made, by the file each names."""
_LINK_FOLDER: list[Path] = []
"""The folder of those links (none until the first), removed when the process ends."""


def file_lit(path: Path) -> str:
    """A SQL string literal naming the file ``path`` for DuckDB's readers (``read_csv``,
    ``read_parquet``, ``read_json``, ``sniff_csv``), read as the one file it is: a name holding
    one of :data:`GLOB_CHARACTERS` is read through a link without them (one per file, in a
    folder of the process's own, removed when it ends), same extension."""
    path = Path(path)
    if not GLOB_CHARACTERS & set(str(path)):
        return lit(path)
    if path not in _LINKS:
        import atexit
        import shutil
        import tempfile

        if not _LINK_FOLDER:
            _LINK_FOLDER.append(Path(tempfile.mkdtemp(prefix="traincast-")))
            atexit.register(shutil.rmtree, _LINK_FOLDER[0], ignore_errors=True)
        link = _LINK_FOLDER[0] / f"{len(_LINKS)}{''.join(path.suffixes)}"
        link.symlink_to(path.resolve())
        _LINKS[path] = link
    return lit(_LINKS[path])


MISSING: tuple[str, ...] = ("", "none", "null", "nan", "-nan", "na", "n/a", "#n/a", "<na>",
                            "\\n", "unknown")
"""Source values that mean "no value" (compared trimmed and lower-cased): empty, Python's
``None``, ``null``, NaN, pandas' NA spellings, ``\\N`` (the NULL of MySQL / Hive exports) and
``Unknown`` (Slurm's ``sacct`` end time of a running job, start time of a pending one).
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


AMBIGUOUS_ZONES: dict[str, str] = {
    "CST": "China Standard Time +08:00, US Central -06:00, Cuba -05:00",
    "IST": "India +05:30, Israel +02:00, Irish Summer Time +01:00",
    "BST": "British Summer Time +01:00, Bangladesh +06:00",
    "AST": "Atlantic -04:00, Arabia +03:00"}
"""Zone abbreviations that name several zones: a time ending in one is not read (a bad row
that names them), where a parser would pick one (DuckDB: US Central for CST)."""
_AMBIGUOUS = "|".join(AMBIGUOUS_ZONES)


def time_text(col: str) -> str:
    """SQL: a date-time text as DuckDB reads it: spaces trimmed, and a numeric offset after a
    space joined to the time, with a zone name after it dropped (the offset says the zone):
    Go's ``2024-03-01 10:00:00 +0800 CST`` reads as ``2024-03-01 10:00:00+0800``, and its
    numeric names too (``-0300 -03``: a zone without an abbreviation). Go's monotonic clock
    reading (`` m=+0.000``) is not read: the time is a bad row."""
    return (f"regexp_replace(trim(CAST({col} AS VARCHAR)), '([0-9])[ \t]*([+-][0-9][0-9]"
            f"(:?[0-9][0-9])?)([ \t]+([A-Za-z]+|[+-][0-9][0-9]([0-9][0-9])?))?$', '\\1\\2')")


def ambiguous_zone(col: str) -> str:
    """SQL: the abbreviation of :data:`AMBIGUOUS_ZONES` a time text ends in (with no numeric
    offset before it, :func:`time_text`), else ''."""
    return (f"upper(regexp_extract({time_text(col)}, "
            f"'[0-9][ ]+({_AMBIGUOUS})$', 1, 'i'))")


def zone_report(col: str, said: str) -> str:
    """SQL: how a time that does not parse is reported: where it ends in an abbreviation of
    several zones, the zones it names and the advice to give the offset; else ``said``."""
    zone = ambiguous_zone(col)
    names = " ".join(f"WHEN {lit(k)} THEN {lit(v)}" for k, v in AMBIGUOUS_ZONES.items())
    return (f"CASE WHEN {zone} <> '' THEN CAST({col} AS VARCHAR) || ' (' || {zone} || ' names "
            f"several time zones, ' || CASE {zone} {names} END || ': give the offset, "
            f"2024-01-02 10:00:00+08:00)' ELSE {said} END")


def ts(col: str) -> str:
    """Seconds since the epoch from a number or a date-time text: ``2017-10-03 14:13:52`` (no
    offset: read as UTC), ``2020-07-01T10:00:00Z``, ``2020-07-01 10:00:00+08:00`` and Go's
    ``2020-07-01 10:00:00 +0800 CST`` (the offset applied, :func:`time_text`); NULL for one
    ending in an abbreviation of several zones without an offset (:data:`AMBIGUOUS_ZONES`).
    The store reads with its time zone set to UTC (:mod:`traincast.trace.store`)."""
    n = num(col)  # a CASE reads the text only where the number does not parse
    return (f"(CASE WHEN {n} IS NOT NULL THEN {n} WHEN {ambiguous_zone(col)} = '' THEN "
            f"epoch(TRY_CAST({time_text(col)} AS TIMESTAMPTZ)) END)")


def text(col: str) -> str:
    """A text column; empty strings and the :data:`MISSING` spellings become NULL."""
    return f"CASE WHEN {present(col)} THEN trim(CAST({col} AS VARCHAR)) END"


TRUE_SPELLINGS: tuple[str, ...] = ("true", "yes")
FALSE_SPELLINGS: tuple[str, ...] = ("false", "no")


def boolean(col: str) -> str:
    """SQL: a boolean from a source value: ``true`` / ``yes`` / the number 1 are TRUE,
    ``false`` / ``no`` / the number 0 are FALSE (any case, spaces around ignored); NULL for a
    :data:`MISSING` spelling and for anything else (``maybe``, ``t``, ``2``: a bad row where an
    adapter reads the column, :func:`boolean_check`)."""
    v = f"lower(trim(CAST({col} AS VARCHAR)))"
    x = f"TRY_CAST(CAST({col} AS VARCHAR) AS DOUBLE)"
    yes = ", ".join(lit(t) for t in TRUE_SPELLINGS)
    no = ", ".join(lit(t) for t in FALSE_SPELLINGS)
    return (f"(CASE WHEN {v} IN ({yes}) OR {x} = 1 THEN TRUE "
            f"WHEN {v} IN ({no}) OR {x} = 0 THEN FALSE END)")


def boolean_check(name: str, col: str) -> Check:
    """The bad row of a boolean source column holding neither a boolean nor a missing value
    (:func:`boolean`)."""
    return Check(name, f"{present(col)} AND {boolean(col)} IS NULL", f"CAST({col} AS VARCHAR)")


CSV_OPTIONS = "all_varchar=true, quote='\"', escape='\"', strict_mode=false, null_padding=true"
"""How every CSV is read: text columns (typed by the adapters), short rows padded with NULL."""
SERIAL_CSV_OPTIONS = CSV_OPTIONS + ", parallel=false"
"""The same, read by one thread: DuckDB's parallel reader cannot pad short rows of a file whose
quoted fields hold line breaks; the store reads such a file again this way."""


UNQUOTED_CSV_OPTIONS = CSV_OPTIONS.replace("quote='\"', escape='\"'", "quote='', escape=''")
"""The same with ``"`` read as a character (a writer that never quotes: ``sacct
--parsable2``)."""


def serial(sql: str) -> str:
    """``sql`` with its CSV files read by one thread (:data:`SERIAL_CSV_OPTIONS`)."""
    return sql.replace(CSV_OPTIONS, SERIAL_CSV_OPTIONS).replace(
        UNQUOTED_CSV_OPTIONS, UNQUOTED_CSV_OPTIONS + ", parallel=false")


EXTRA = "_extra_field"
"""The column a CSV relation adds after the header's: the first field of a row that has more
fields than the header (NULL on every whole row). A row with one is a bad row
(:func:`extra_field_check`): its values may be shifted, as by a delimiter inside an unquoted
value. DuckDB alone drops the extra fields of a row it meets after its sniffing sample."""


def _dialect(path: Path) -> tuple[str, int, tuple[str, ...], tuple[str, ...]]:
    """:func:`_sniffed` of ``path`` as it is now (its size and time key the cache)."""
    stat = path.stat()
    return _sniffed(path, (stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=64)
def _sniffed(path: Path, stamp: tuple[int, int]
             ) -> tuple[str, int, tuple[str, ...], tuple[str, ...]]:
    """A headered CSV file's delimiter, leading rows skipped and column names, as DuckDB's
    sniffer reads them with :data:`CSV_OPTIONS`, the names cut to the header's own fields (a
    row with more fields in the sniffer's sample adds ``column3``, ... after them), and the
    header's fields as the file writes them (an empty one: ``""``). DuckDB reads the header
    line too, as its reader will (any compression, blank lines, quotes): the fields are the
    values of that line read without a header, a present empty field told from a missing one
    by a NULL spelling no file holds. ``stamp`` (the file's size and time) keys the cache."""
    con = duckdb.connect()
    try:
        try:
            delim, skip, cols = con.execute(
                f"SELECT Delimiter, SkipRows, Columns FROM sniff_csv({file_lit(path)}, "
                f"{CSV_OPTIONS}, header=true)").fetchone()
            failed = None
        except READ_ERRORS as exc:
            if stamp[0] > SNIFFED_WHOLE_BYTES or not quote_left_open_in_last_line(path):
                raise
            # a short file cut inside its last row's quoted value: no dialect at all; its
            # header as the csv module reads it (the cut row is then a bad row, ``csv_end``)
            delim, names = header_fields(path)
            skip, cols, failed = 0, [{"name": n} for n in names], exc
        # the lenient sniffer takes "," for a file whose fields are quoted and split by ";",
        # tab or "|" (R's write.csv2, pandas' QUOTE_ALL): the strict one reads it, and wins
        # where its header has more named columns (not the sniffer's padding, columnN)
        # and a quote left open in a short file makes both read each line whole (one column):
        # then the file is sniffed with quotes as characters (sacct --parsable2 never quotes)
        # and, where that leaves one column, with each other delimiter forced (a row with a
        # delimiter too many, a job name "a|b" in a sacct export, can make the sniffer take ",")
        others = [CSV_OPTIONS.replace("strict_mode=false", "strict_mode=true"),
                  UNQUOTED_CSV_OPTIONS,
                  *(f"{options}, delim={lit(d)}" for d in (",", "|", ";", "\t")
                    for options in (CSV_OPTIONS, UNQUOTED_CSV_OPTIONS))]
        for i, options in enumerate(others):
            if i and _named(cols) > 1:
                break
            with contextlib.suppress(*READ_ERRORS):
                other = con.execute(f"SELECT Delimiter, SkipRows, Columns FROM sniff_csv("
                                    f"{file_lit(path)}, {options}, header=true)").fetchone()
                if other and _named(other[2]) > _named(cols):
                    delim, skip, cols = other
        if failed is not None and not cols:
            raise failed
        names = tuple(c["name"] for c in cols)
        spec = ", ".join(f"'c{i}': 'VARCHAR'" for i in range(len(names) + 1))

        def header_line(options: str) -> tuple[Any, ...]:
            return con.execute(
                f"SELECT * FROM read_csv({file_lit(path)}, {options}, parallel=false, "
                f"header=false, skip={skip}, delim={lit(delim)}, auto_detect=false, "
                f"columns={{{spec}}}, nullstr=chr(0)) LIMIT 1").fetchone() or ()

        try:
            line = header_line(CSV_OPTIONS)
        except READ_ERRORS:  # a quote left open below the header, past DuckDB's line limit
            line = header_line(UNQUOTED_CSV_OPTIONS)
    finally:
        con.close()
    header = tuple(v for v in line if v is not None)
    return delim, skip, names[:max(1, len(header))] if len(header) < len(names) else names, \
        header


def header_fields(path: Path) -> tuple[str, list[str]]:
    """The delimiter of a CSV file's first line (its most frequent of ``, ; tab |``, as
    :func:`open_quote_row` takes it) and that line's fields, read by the csv module."""
    with open_bytes(path) as raw:
        first = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace",
                                 newline="").readline()
    delim = max(",;\t|", key=first.count)
    return delim, next(csv.reader([first], delimiter=delim), [])


SNIFFED_WHOLE_BYTES = 8 * 2**20
"""The largest file (bytes on disk) whose failed dialect sniff is checked for a last row cut
inside a quoted value (:func:`quote_left_open_in_last_line`, one pass over the file): DuckDB's
sniffer reads 20,480 rows, so only a file about that short shows it its cut last row (8 MiB:
rows of 400 bytes); a longer one fails for another reason, said at once."""


def quote_left_open_in_last_line(path: Path) -> bool:
    """Whether the one quote of a CSV file (plain or gzipped) left open opens in its last
    line that is not blank: the quotes before that line pair up, the line's own do not (a
    file cut inside its last row's quoted value, which swallows no other row). Read line by
    line; False where it cannot be read."""
    before = last = 0
    try:
        with open_bytes(path) as raw:
            for line in raw:
                if line.strip():
                    before, last = before + last, line.count(b'"')
    except (OSError, EOFError, zlib.error):
        return False
    return before % 2 == 0 and last % 2 == 1


def _named(columns: Sequence[Mapping[str, Any]]) -> int:
    """Columns of a sniffed header that it names, not the ``columnN`` DuckDB pads a row with
    more fields with."""
    return sum(not re.fullmatch(r"column\d+", str(c["name"])) for c in columns)


def duplicate_columns(path: Path) -> dict[str, tuple[int, int]]:
    """The columns a CSV file's header names twice, each with its first two positions (1-based),
    by the name as DuckDB resolves it (trimmed, lower case); empty names are none (DuckDB
    names them ``columnN``)."""
    seen: dict[str, int] = {}
    twice: dict[str, tuple[int, int]] = {}
    for i, name in enumerate(_dialect(path)[3], 1):
        key = name.strip().lower()
        if key and key in seen:
            twice.setdefault(key, (seen[key], i))
        seen.setdefault(key, i)
    return twice


def csv_relation(path: Path, names: Iterable[str] | None = None, rows: bool = True,
                 skip: int = 0, quoted: bool = True, short: bool = False) -> str:
    """A CSV file as a relation of text columns with its data-row number ``_row`` (1-based)
    and :data:`EXTRA` (a row's first field past the header's).

    ``names`` given = a headerless file with these column names, comma-separated (read
    without DuckDB's dialect sniffing, which fails on a short file whose last row is cut).
    Else the header's names as DuckDB's sniffer reads them (:func:`_dialect`; raises
    :data:`READ_ERRORS` for a file it cannot read). ``rows=False`` leaves out ``_row``
    (numbering needs a window over the whole file: skip it for big side tables that are only
    aggregated, so DuckDB streams them). ``skip``: lines of a headerless file to pass over
    (a header a user prepended to a file the release writes without one). ``quoted=False``:
    a ``"`` is a character like any other (a format whose writer never quotes, as ``sacct
    --parsable2``: a job name ``"exp 7`` opens no quoted value that would swallow the rows up
    to the next ``"``). ``short`` (with ``names``): a column ``_short``, the first of the
    names that the row ends before (NULL for a row of every field: a headerless table's empty
    field still reads as NULL, a field the row does not have is told apart).
    """
    opts = CSV_OPTIONS if quoted else UNQUOTED_CSV_OPTIONS
    if names is not None:
        delim, columns = ",", list(names)
        opts += f", header=false, skip={int(skip)}"
    else:
        delim, skip, found, _ = _dialect(path)
        columns = list(found)
        opts += f", header=true, skip={skip}"
    cols = ", ".join(f"{lit(n)}: 'VARCHAR'" for n in [*columns, EXTRA])
    opts += f", columns={{{cols}}}, delim={lit(delim)}, auto_detect=false"
    if names is None:  # a headered file: an empty field reads as '', a field the row does not
        # have (padded) as NULL, by a NULL spelling no file holds (chr(0)); its adapter reads
        # '' as missing (MISSING). Headerless tables (PAI's) keep NULL: their joins compare
        # raw columns, where '' would match ''
        opts += ", nullstr=chr(0)"
    source = f"read_csv({file_lit(path)}, {opts})"
    if names is not None and short:  # padded as chr(0)'s NULL, empty as '', then as before
        missing = " ".join(f"WHEN {q(c)} IS NULL THEN {lit(c)}" for c in columns)
        fields = ", ".join(f"NULLIF({q(c)}, '') AS {q(c)}" for c in [*columns, EXTRA])
        source = (f"(SELECT {fields}, CASE {missing} END AS _short "
                  f"FROM read_csv({file_lit(path)}, {opts}, nullstr=chr(0)))")
    if not rows:
        return source
    return f"(SELECT row_number() OVER () AS _row, * FROM {source})"


def extra_field_check(columns: int, trailing: bool = True) -> Check:
    """The bad row of a row with more fields than the header's ``columns``, reported as field
    ``columns + 1``, the first one past the header's: :data:`EXTRA` holds a value, or, unless
    the file's writer ends its data rows with a delimiter (``trailing``:
    :func:`ends_rows_with_delimiter`), is an empty field (``''``: :func:`csv_relation` reads
    an empty field as ``''``, a field the row does not have as NULL): one row of
    ``a,Smith,Jr,`` among rows of three fields is shifted."""
    x = q(EXTRA)
    return Check(str(columns + 1), present(x) if trailing else f"{x} IS NOT NULL",
                 extra_field_value(columns))


TRAILING_SAMPLE_ROWS = 64
"""Data rows :func:`ends_rows_with_delimiter` reads from a file's start."""


def ends_rows_with_delimiter(path: Path, delim: str, skip: int, columns: int) -> bool:
    """Whether a CSV file's writer ends its data rows with a delimiter: of its first
    :data:`TRAILING_SAMPLE_ROWS` data rows (past ``skip`` lines and the header), more have
    one field past the header's ``columns``, empty, than have the header's fields alone (a file
    read at its start, not scanned whole; one that cannot be read this way: True, the lenient
    reading)."""
    try:
        with open_bytes(path) as fh:
            lines = io.TextIOWrapper(fh, encoding="utf-8-sig", errors="replace", newline="")
            rows = csv.reader(itertools.islice(lines, skip + 1, skip + 1 + TRAILING_SAMPLE_ROWS),
                              delimiter=delim)
            sizes = [(len(r), not r[-1].strip()) for r in rows if r]
    except (OSError, EOFError, zlib.error, csv.Error, UnicodeError):
        return True
    trailing = sum(1 for n, empty in sizes if n == columns + 1 and empty)
    return trailing > sum(1 for n, _ in sizes if n == columns)


def header_row_check(columns: Sequence[tuple[str, str]]) -> Check:
    """The bad row of a row that repeats the header (every field of ``columns``, ``(name,
    as the header writes it)``, its header field, any case: files joined with ``cat``, each
    with its header), reported at the first column as what it is, not as a value that does
    not parse."""
    same = " AND ".join(f"lower(trim(CAST({q(c)} AS VARCHAR))) = {lit(w.lower().strip())}"
                        for c, w in columns)
    return Check(columns[0][0], same, "'(the header line again: files joined with their "
                                      "headers; give them as separate files, or drop the "
                                      "line)'")


def short_row_check(required: Sequence[str], columns: Sequence[str],
                    spelling: Mapping[str, str] | None = None) -> Check:
    """The bad row of a row that ends before a ``required`` column of the adapter (the field
    is missing, not empty: :func:`csv_relation` pads a short row with NULL and reads an empty
    field as ``''``), reported at the first such column: a footer (``(2 rows)``) or a stray
    line (``;;``) is no job. A row that leaves out optional fields at its end is read; one
    whose fields (``columns``, the file's) hold a line break is a quote left open, which the
    generic checks report at its job id."""
    cols = [q(c) for c in required]
    said = spelling or {}
    which = " ".join(f"WHEN {c} IS NULL THEN {lit(said.get(n, n))}"
                     for c, n in zip(cols, required, strict=True))
    whole = f"concat_ws('', {', '.join(q(c) for c in columns)})"
    return Check(required[0], f"({' OR '.join(f'{c} IS NULL' for c in cols)}) AND "
                              f"strpos({whole}, chr(10)) = 0",
                 "'(missing: the row ends before this field, with fewer fields than the "
                 "header; a footer or a stray line is no job)'",
                 field_sql=f"CASE {which} END")


def extra_field_value(columns: int) -> str:
    """SQL: how :func:`extra_field_check` reports its value (an empty field as ``''``)."""
    return (f"CASE WHEN {present(q(EXTRA))} THEN CAST({q(EXTRA)} AS VARCHAR) ELSE '(empty)' "
            f"END || ' (a field past the header''s {columns}: the row "
            "has more fields than the header, so its values may be shifted; quote a value that "
            "holds the delimiter)'")


_TAIL = 1 << 20   # bytes of a file's end searched for its last row
_CHUNK = 8 << 20  # bytes read at a time


@dataclass(frozen=True)
class FileEnd:
    """How a CSV file ends (:func:`csv_end`). Its last row is cut (``why`` = ``"quote"``: the
    file ends inside a quoted value; ``"short"``: without a newline, in a row with fewer
    fields than the header): a bad row, reported as ``field`` (the column the file ends in)
    and :attr:`value` (``shown``, the cut value, and ``reason``). Or (``why`` = ``""``) the
    row is whole but has no final newline: said in the notes."""

    file: str
    why: str
    field: str
    shown: str
    reason: str = ""
    columns: int = 0  # fields of a row (the header's)

    @property
    def cut(self) -> bool:
        """The last row is cut (a bad row)."""
        return bool(self.why)

    @property
    def value(self) -> str:
        """The bad value reported for a cut row: the value the file ends in, and why."""
        return f"{self.shown} ({self.reason})".lstrip()

    def check(self) -> Check:
        """The bad row of a cut last row (over a relation with ``_last_row``,
        :func:`last_row`)."""
        return Check(self.field, "_row = _last_row", lit(self.value))

    def note(self) -> tuple[str, str]:
        """The note of a whole last row without a final newline (:attr:`Plan.notes`)."""
        return ("SELECT 1", f"row at the end of {Path(self.file).name} has no final newline: "
                f"stored, as it has all {self.columns} fields (were the file cut inside its "
                "last value, that value would be cut too; end the file with a newline to say "
                "it is whole)")

    def apply(self, plan: Plan) -> None:
        """Add this end to ``plan``: a cut row's check, first (so that it is what the row
        reports), over the plan's relation with ``_last_row``; or the note."""
        if self.cut:
            plan.relation = last_row(plan.relation)
            plan.checks.insert(0, self.check())
        else:
            plan.notes.append(self.note())


def last_row(relation: str) -> str:
    """``relation`` (with ``_row``) with the number of its last row on every row
    (``_last_row``)."""
    return f"(SELECT *, max(_row) OVER () AS _last_row FROM {relation})"


READ_ERRORS: tuple[type[Exception], ...] = (duckdb.Error, UnicodeDecodeError, OSError, EOFError,
                                            zlib.error)
"""What reading a trace file may raise, each made an :func:`unreadable` error: DuckDB's
errors, DuckDB's message of a binary file (not UTF-8: Python cannot decode it), and
:func:`csv_end`'s reading (a ``.gz`` file cut short)."""


def _read_end(path: Path, quotes: bool) -> tuple[int | None, bytes, int] | None:
    """The last bytes of a file (at most 1 MiB), their offset, and with ``quotes`` the
    number of ``"`` in the whole file (counted in 8 MiB blocks). ``.gz`` files are
    decompressed (on the way, whole: only with ``quotes``); None for a file not checked
    (``.zst``, or ``.gz`` without ``quotes``)."""
    name = path.name.lower()
    if name.endswith(".zst") or (name.endswith(".gz") and not quotes):
        return None
    if not quotes:
        with path.open("rb") as f:
            size = f.seek(0, io.SEEK_END)
            f.seek(max(0, size - _TAIL))
            return None, f.read(), max(0, size - _TAIL)
    count, tail, total = 0, b"", 0
    with open_bytes(path) as f:
        while block := f.read(_CHUNK):
            count += block.count(b'"')
            total += len(block)
            tail = (tail + block)[-_TAIL:]
    return count, tail, total - len(tail)


UTF8_BOM = b"\xef\xbb\xbf"


def blank(data: bytes) -> bool:
    """Whether bytes hold nothing but white space after a UTF-8 byte-order mark."""
    return not data.removeprefix(UTF8_BOM).strip()


def empty_file(path: Path) -> bool:
    """Whether a file holds nothing but white space after a UTF-8 byte-order mark
    (:func:`blank`; a ``.gz`` file once decompressed), read block by block while it is blank;
    False where it cannot be read (its reader says why)."""
    try:
        with open_bytes(path) as f:
            if not blank(f.read(_TAIL)):  # the mark counts at the file's start alone
                return False
            while block := f.read(_TAIL):
                if block.strip():
                    return False
            return True
    except (OSError, EOFError, zlib.error):
        return False


def csv_end(con: duckdb.DuckDBPyConnection, path: Path, columns: list[str] | None = None, *,
            header: bool = True, quotes: bool = True) -> FileEnd | None:
    """How a CSV file ends, when there is something to say (None: it ends with a newline
    and no quoted value is left open, or it is not checked, :func:`_read_end`).

    The rule (docs/traces.md, "Bad input"): the last row is **cut** — a bad row, its field
    the column the file ends in — when the file ends inside a quoted value (an odd number of
    ``"`` in the file, quotes pairing up and ``""`` inside a quoted value included, confirmed
    by :func:`open_quote_row`: a quote inside an unquoted value is a character), or when it
    ends without a newline and the row has fewer fields than the header (``columns``). A
    last row without a newline that has all its fields is whole (many writers omit the final
    newline): stored, and said in a note, since a file cut inside the last value of a row
    cannot be told from a whole one. ``columns``: the file's columns (default: its header's,
    as DuckDB reads it); ``quotes=False`` skips the quote count (big side tables: only the
    file's end is read).
    """
    read = _read_end(path, quotes)  # OSError, EOFError, zlib.error: READ_ERRORS
    if read is None:
        return None
    count, tail, offset = read
    if offset == 0 and blank(tail):
        return None  # an empty file: no row to be cut (said where the file is read)
    terminated = tail.endswith((b"\n", b"\r"))
    open_quote = bool(count is not None and count % 2)
    if open_quote and open_quote_row(path) is None:
        # the odd quote is a character of an unquoted value (o"neil): no value is left open,
        # and the quote count cannot tell where the last row starts
        open_quote, count = False, None
    if terminated and not open_quote:
        return None
    body = tail.rstrip(b"\r\n")
    # the last row starts after the last line break outside a quoted value: one with an even
    # number of quotes before it in the file (the count less those after it); uncounted, the
    # last line break
    start, after, end = None, 0, len(body)
    while (nl := body.rfind(b"\n", 0, end)) >= 0:
        after += body.count(b'"', nl + 1, end)
        if count is None or (count - after) % 2 == 0:
            start = nl + 1
            break
        end = nl
    if start is None:
        if offset > 0 or header:  # a row longer than 1 MiB, or the header alone
            if not open_quote:
                return None
            return FileEnd(str(path), "quote", "(row)", "", "the file ends inside a quoted "
                           "value: its last row is cut")
        start = 0
    if columns is None:
        columns = source_columns(con, csv_relation(path, rows=False))
    text = body[start:].decode("utf-8", "replace").lstrip("\ufeff")
    delim = _dialect(path)[0] if header else ","  # a headerless file: csv_relation's comma
    try:
        fields = next(csv.reader(io.StringIO(text, newline=""), delimiter=delim,
                                 quotechar='"', doublequote=True, strict=False), [""])
    except csv.Error:  # a value over the csv module's field size limit (128 KiB)
        fields = [text[-40:]] * len(columns)
    k, n = len(fields), len(columns)
    name = columns[min(k, n) - 1] if n else "(row)"
    last = fields[-1] if fields else ""
    shown = last if len(last) <= 40 else last[:40] + "…"
    if open_quote:
        return FileEnd(str(path), "quote", name, f'"{shown}', "the file ends inside this "
                       f"quoted value, field {k} of {n}: the row is cut", n)
    if k < n:
        return FileEnd(str(path), "short", name, shown, "the file ends here, without a "
                       f"newline, after {k} of the {n} fields: the row is cut", n)
    return FileEnd(str(path), "", name, shown, columns=n)


def table_end(con: duckdb.DuckDBPyConnection, path: Path) -> FileEnd | None:
    """:func:`csv_end` of a table file read as CSV (None for Parquet)."""
    if path.suffix.lower() in (".parquet", ".pq"):
        return None
    return csv_end(con, path)


def table_relation(path: Path, names: Iterable[str] | None = None,
                   quoted: bool = True) -> str:
    """CSV or Parquet (by extension) as a relation with ``_row`` (``quoted``:
    :func:`csv_relation`)."""
    if path.suffix.lower() in (".parquet", ".pq"):
        return f"(SELECT row_number() OVER () AS _row, * FROM read_parquet({file_lit(path)}))"
    return csv_relation(path, names, quoted=quoted)


def pipe_separated(path: Path) -> bool:
    """A CSV file whose delimiter is ``|`` (as DuckDB's sniffer reads it); False for Parquet."""
    return path.suffix.lower() not in (".parquet", ".pq") and _dialect(path)[0] == "|"


def source_columns(con: duckdb.DuckDBPyConnection, relation: str) -> list[str]:
    """Column names of a relation (reads the header / schema only), without :data:`EXTRA`."""
    return [d[0] for d in con.execute(f"SELECT * FROM {relation} LIMIT 0").description
            if d[0] != EXTRA]


def require(adapter: str, path: Path | str, have: Iterable[str], needed: Iterable[str],
            hint: str = "", fits_first: bool = False) -> None:
    """Raise a clear error when the source lacks columns the adapter needs (names compared
    case-insensitively, as DuckDB resolves them: ``Job_ID`` is ``job_id``); its hint is
    ``hint``, else (or first, ``fits_first``) the format whose columns the file has."""
    names = [c for c in have if c != "_row"]  # _row: the row number table_relation adds
    have = {c.lower() for c in names}
    needed = list(needed)
    missing = [c for c in needed if c.lower() not in have]
    if missing:
        fits = formats_with_columns(have, but=adapter)
        named = formats_with_name(Path(path).name, but=adapter)
        if named and not fits:
            hint = (f"the file is named as a table of --format {' or '.join(named)}, whose "
                    "files have no header row: give that format, and the folder of its tables")
            fits_first = False
        shown = ", ".join(c if c.isprintable() else repr(c) for c in names[:8]) + \
            (", ..." if len(names) > 8 else "")
        expects = (f"; the {adapter} adapter expects the columns {', '.join(needed)}"
                   if len(missing) < len(needed) else "")
        words = {w.lower() for n in names for w in n.split()}
        if len(names) == 1 and len(words) > 2 and words & {c.lower() for c in missing}:
            hint = ("its one column holds the names split by spaces: a table aligned in "
                    "columns of fixed width (as sacct prints without --parsable2), which is "
                    "read only with a delimiter: export it with one (sacct --parsable2, or "
                    "comma-separated)")
            fits_first = False
        raise TraincastError(
            f"{adapter}: {path}: missing column(s) {', '.join(missing)} (the file's columns: "
            f"{shown}){expects}",
            hint=(f"the file has the columns of --format {' or '.join(fits)}"
                  if fits and (fits_first or not hint) else hint or
                  f"map a column with --map COL=FIELD, or check --format {adapter}"))


def refuse_non_jobs(adapter: str, path: Path | str, have: Iterable[str]) -> None:
    """Refuse a file whose columns are exactly those of a release's file that holds no jobs
    (an adapter's ``NOT_JOBS``: the Alibaba 2023 node list), whatever ``--format`` and
    ``--map`` say: mapped, its machines would be stored as jobs."""
    from traincast.trace.adapters import ADAPTERS

    cols = tuple(sorted(c.lower() for c in have if c != "_row"))
    for m in ADAPTERS.values():
        for columns, (what, instead) in getattr(m, "NOT_JOBS", {}).items():
            if cols == tuple(sorted(columns)):
                raise TraincastError(f"{adapter}: {path}: {what}", hint=instead)


def _text_head(head: bytes) -> bool:
    """Whether a file's first bytes are UTF-8 text (a character cut at the end aside) without
    control bytes other than tabs and line ends: JSON can be, binary data that happens to
    start with ``[`` cannot."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:
            return False
    return not any(b < 0x20 and b not in b"\t\r\n" for b in head)


def refuse_json(adapter: str, path: Path) -> None:
    """Refuse a CSV trace file that holds JSON (its first character, past a byte-order mark
    and white space, ``{`` or ``[``: a JSON document or JSON Lines, as Kubernetes and Philly
    export), whose "columns" would be fragments of its first object; a file that cannot be
    opened is left to the reader's own error."""
    if path.suffix.lower() in (".parquet", ".pq"):
        return
    try:
        with open_bytes(path) as fh:
            head = fh.read(4096)
    except (OSError, EOFError, zlib.error):
        return
    first = head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1]
    if first in (b"{", b"[") and _text_head(head):
        raise TraincastError(
            f"{adapter}: {path}: holds JSON (it starts with {first.decode()!r}), not a table "
            "of comma- or otherwise-separated values",
            hint="the Philly trace's cluster_job_log: --format philly; other JSON (a "
                 "Kubernetes export, JSON Lines): write it as CSV first, e.g. python -c "
                 "\"import duckdb; duckdb.sql(\\\"COPY (FROM read_json_auto('FILE')) TO "
                 "'FILE.csv'\\\")\", then --map its columns")


def formats_with_name(name: str, but: str = "") -> list[str]:
    """The ``--format`` names (other than ``but``) whose release names its files as ``name`` is
    (an adapter's ``FILE_PATTERN``, for a release whose files have no header row)."""
    from fnmatch import fnmatch

    from traincast.trace.adapters import ADAPTERS

    return [n for n, m in ADAPTERS.items() if n != but and getattr(m, "FILE_PATTERN", "")
            and fnmatch(name.lower(), m.FILE_PATTERN)]


def formats_with_columns(have: set[str], but: str = "") -> list[str]:
    """The ``--format`` names (other than ``but``) whose adapter's ``REQUIRED`` columns are all
    in ``have`` (lower-case names): the format a file given the wrong one may be in."""
    from traincast.trace.adapters import ADAPTERS

    return [name for name, m in ADAPTERS.items() if name != but and getattr(m, "REQUIRED", ())
            and all(c.lower() in have for c in m.REQUIRED)]


COMPUTED_COLUMNS: tuple[str, ...] = ("zero_gpu", "fractional_gpu", "arch_inferred", "source_id")
"""Canonical columns the store computes (a flag from the job's own fields, the source it came
from): no ``--map`` gives them."""


def check_mapped_column(col: str, src: str) -> None:
    """``--map COL=FIELD``'s COL must be a canonical column a file can give: not a name of no
    column (the closest one is named) nor one of :data:`COMPUTED_COLUMNS`."""
    if col in COMPUTED_COLUMNS:
        raise TraincastError(f"--map {col}={src}: {col!r} is computed by the store (from the "
                             "job's own fields, or the source it came from), not read from a "
                             "file", hint="leave it out")
    if col not in SQL_TYPE:
        givable = [c for c in SQL_TYPE if c not in COMPUTED_COLUMNS]
        raise TraincastError(f"--map {col}={src}: {col!r} is not a canonical column",
                             hint=did_you_mean(col, givable)
                             + f"canonical columns: {', '.join(givable)}")


def apply_mapping(fields: dict[str, Field], mapping: Mapping[str, str] | None,
                  columns: Iterable[str], adapter: str, path: Path) -> dict[str, Field]:
    """``--map COL=FIELD``: canonical column COL is read from source column FIELD
    (:func:`check_mapped_column`)."""
    columns = list(columns)  # in the file's order, as an error shows them
    out = dict(fields)
    for col, src in (mapping or {}).items():
        check_mapped_column(col, src)
        require(adapter, path, columns, [src], hint=f"--map {col}={src} names a column the file "
                "does not have")
        out[col] = field_from(col, q(src))
    return out


def field_from(col: str, src: str) -> Field:
    """A canonical column read straight from a source column, converted by its type."""
    sql_type = SQL_TYPE[col]
    if col.endswith("_time_s"):
        return Field(ts(src), src, src)
    if sql_type == "BOOLEAN":
        return Field(boolean(src), src, src)
    if col == "architecture":  # names are lower case: 'PS-Worker' is 'ps-worker'
        return Field(f"lower({text(src)})", src, src)
    if sql_type == "VARCHAR":
        return Field(text(src), column=src)
    return Field(num(src), src, src)  # DOUBLE, BIGINT: as_type makes the canonical type


def running_status(expr: str) -> str:
    """SQL: the status says the job was still running (or waiting) at the end of the trace."""
    return (f"lower(trim(COALESCE(CAST({expr} AS VARCHAR), ''))) "
            f"IN ('running', 'pending', 'waiting', 'queued')")


def unfinished(fields: Mapping[str, Field], final: str = "FALSE") -> str:
    """SQL: censored when the job's status says running (or waiting), or it has a start time
    and no end time unless ``final`` (SQL: its status is one that ends a job, so it finished
    without a recorded end: its duration unknown, not censored)."""
    status, start, end = (fields[c].expr if c in fields else "NULL"
                          for c in ("status", "start_time_s", "end_time_s"))
    return (f"({running_status(status)} OR (({start}) IS NOT NULL AND ({end}) IS NULL "
            f"AND NOT ({final})))")


QUOTED_VALUE_MAX = 16 * 2**20
"""Characters of the longest quoted value :func:`open_quote_row` reads as one (16 Mi: a
value that long is a quote left open; the pass holds at most about 64 MB)."""


def open_quote_row(path: Path) -> int | None:
    """The data row (1-based, after the header; 0: the header) of a CSV file (plain or gzipped)
    where a quoted value opens that the file never closes, or None. Read as DuckDB reads
    quotes: a ``"`` opens a quoted value only at the start of a field (one inside an unquoted
    value, ``o"neil``, is a character of it), ``""`` inside a quoted value is a quote, a quoted
    value may hold line breaks (a ``user`` note) and be of any length; records, not lines, are
    counted. The delimiter is the first line's most frequent of ``, ; tab |`` (DuckDB's
    sniffer, misled by the open quote, may read the header as one column). One pass with the
    csv module in strict mode (the file ends inside a quoted value); run only where the quote
    count is odd or the file cannot be read. A quoted value longer than
    :data:`QUOTED_VALUE_MAX` characters is taken as one left open there (no trace field is
    that long, and the pass holds at most that much)."""
    record, limit = 0, csv.field_size_limit()
    try:
        csv.field_size_limit(QUOTED_VALUE_MAX)  # a value left open runs to the file's end
        with open_bytes(path) as raw:
            text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace", newline="")
            first = text.readline()
            delim = max(",;\t|", key=first.count)
            rows = csv.reader(itertools.chain([first], text), delimiter=delim, strict=True)
            while True:
                try:
                    next(rows)
                except StopIteration:
                    return None
                except csv.Error as exc:  # a quote misplaced inside a row: read on
                    if "unexpected end of data" in str(exc) or "field limit" in str(exc):
                        return record
                record += 1
    except (OSError, EOFError, zlib.error, UnicodeError):
        return None
    finally:
        csv.field_size_limit(limit)


def open_quote_error(adapter: str, path: Path) -> TraincastError | None:
    """The error of a file whose columns cannot be told because a quote opens and is never
    closed, naming the row where it opens (:func:`open_quote_row`); None where every quote
    closes."""
    row = open_quote_row(path)
    if row is None:
        return None
    return TraincastError(f"{adapter}: {path}: {f'row {row}' if row else 'the header'}: a "
                          "quote opens there and is not closed, so the file ends inside a "
                          "quoted value (the lines after it would be read into one value) and "
                          "its columns cannot be told", hint="close the quote or remove it")


def _refuse_read_twice(adapter: str, path: Path, fields: Mapping[str, Field],
                       checks: Iterable[Check]) -> None:
    """An error when the header of CSV file ``path`` names twice a column the plan reads (its
    fields' or checks' SQL names it): which one holds the values cannot be told (DuckDB alone
    reads the first). A repeated column nothing reads is left as it is."""
    sql = " ".join([*(f.expr for f in fields.values()), *(c.condition for c in checks)])
    for name, (first, second) in duplicate_columns(path).items():
        if re.search(r'(?<![\w"])"?' + re.escape(name) + r'"?(?![\w"])', sql, re.IGNORECASE):
            raise TraincastError(
                f"{adapter}: {path}: the header names column {name!r} twice (fields {first} "
                f"and {second}): which one holds its values cannot be told",
                hint="rename or remove one of them (--map reads a column under another name)")


_NOT_OBJECT = re.compile(r"in record/value (\d+): Expected OBJECT, but got (\w+): ?(.*)")
"""DuckDB's error of a JSON array element that is not an object (past its schema sample)."""
_LINE_LIMIT = re.compile(r"maximum line size of (\d+) bytes", re.IGNORECASE)
"""DuckDB's error of a CSV line over its ``max_line_size``."""


def not_object_error(adapter: str, path: Path | str, index: int, value: str) -> TraincastError:
    """The error of the ``index``-th element (1-based) of a JSON trace's array that is no job
    object, with its ``value`` as the file writes it (clipped)."""
    return TraincastError(f"{adapter}: {path}: element {index:,} of the array is not a job "
                          f"object: {clip(value, 63)}",
                          hint="a trace in JSON is an array of job objects (Philly's "
                               'cluster_job_log: {"jobid": ..., "status": ..., ...}): remove '
                               "that element")


def first_long_line(path: Path, limit_bytes: int) -> int | None:
    """The 1-based number of the first line of ``path`` (decompressed where ``.gz``) of at
    least ``limit_bytes`` bytes before its line end (DuckDB counts the line end in its
    limit), read in blocks; None where there is none or it cannot be read."""
    line, length = 1, 0
    try:
        with open_bytes(path) as f:
            while block := f.read(1 << 20):
                for part in block.split(b"\n")[:-1]:  # the lines this block ends
                    if length + len(part) >= limit_bytes:
                        return line
                    line, length = line + 1, 0
                length += len(block) - (block.rfind(b"\n") + 1)
                if length >= limit_bytes:
                    return line
    except (OSError, EOFError, zlib.error):
        return None
    return None


def unreadable(adapter: str, path: Path | str, exc: Exception) -> TraincastError:
    """The error for a trace file that cannot be read (:data:`READ_ERRORS`): adapter, file
    and the reason (DuckDB's first line, and for CSV errors the line that says why, not its
    list of reader options), with a hint (convert to UTF-8, download a cut file again)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    why = lines[:1]
    if lines and "CSV Error" in lines[0]:
        said = [ln for ln in lines[1:] if not ln.startswith(
            ("Original Line", "Possible Solution", "LINE ")) and " = " not in ln]
        # the original line may hold a quoted line break (its tail is a line of its own):
        # the encoding's sentence is the reason wherever it stands
        why += [ln for ln in said if "utf-8" in ln.lower()][:1] or said[:1]
    reason = ": ".join(why) or type(exc).__name__
    hint = f"check that it is {'an' if adapter[0] in 'aeiou' else 'a'} {adapter} trace"
    if element := _NOT_OBJECT.search(str(exc)):  # past DuckDB's schema sample
        return not_object_error(adapter, path, int(element.group(1)), element.group(3).strip())
    if limit := _LINE_LIMIT.search(str(exc)):
        # DuckDB numbers the line within its buffer: the file's own line, found by reading it
        limit_bytes = int(limit.group(1))
        if line := first_long_line(Path(path), limit_bytes):
            return TraincastError(f"{adapter}: {path}: cannot read the file: line {line:,} is "
                                  f"{limit_bytes:,} bytes or longer, more than the CSV reader "
                                  "takes", hint="a binary file, or a field that long (cut it, "
                                                "or leave that column out of the file)")
        if quote := open_quote_error(adapter, Path(path)):  # a quoted value running on
            return quote
        return TraincastError(f"{adapter}: {path}: cannot read the file: a row is "
                              f"{limit_bytes:,} bytes or longer, more than the CSV reader "
                              "takes, though no line is: a quoted value that holds line "
                              "breaks runs that long",
                              hint="a quote closed far too late, or a field that long (cut it, "
                                   "or leave that column out of the file)")
    if empty_file(Path(path)):
        return empty_error(adapter, path)
    if "sniffing" in reason and (quote := open_quote_error(adapter, Path(path))):
        return quote
    if isinstance(exc, PermissionError) or "permission denied" in reason.lower():
        return TraincastError(f"{adapter}: {path}: cannot read the file: permission denied",
                              hint="give the user running traincast read access to it (chmod, "
                                   "or its owner), or leave it out of the folder")
    parquet = str(path).lower().endswith(PARQUET_SUFFIXES)
    if parquet and packed_kind(Path(path)) == PARQUET_KIND:  # read as Parquet, and failed
        return TraincastError(f"{adapter}: {path}: cannot read the Parquet file: {reason}",
                              hint="a Parquet file cut short or damaged (no footer): copy or "
                                   "download it again")
    if no_text := not_text_error(adapter, Path(path)):
        return no_text
    if isinstance(exc, UnicodeDecodeError):  # DuckDB quoted bytes Python cannot decode
        reason = "not UTF-8 text (binary bytes)"
        hint = f"check that it is a {adapter} trace: UTF-8 text, not a binary file"
    elif isinstance(exc, gzip.BadGzipFile) or "not a gzipped file" in reason.lower():
        hint = "the file is not gzip data: name it without .gz (gzip is read by its name)"
    elif isinstance(exc, EOFError | zlib.error) or "end of gzip" in reason.lower():
        hint = "the compressed file is cut short: download or copy it again"
    elif "not utf-8" in reason.lower():
        hint = ("the file must be UTF-8 text: convert it, e.g. iconv -f "
                f"{file_encoding(Path(path))} -t utf-8 FILE > FILE.utf8.csv")
    return TraincastError(f"{adapter}: {path}: cannot read the file: {reason}", hint=hint)


PARQUET_KIND, ELF_KIND, DUCKDB_KIND = "a Parquet file", "an executable (ELF)", "a DuckDB file"
ZSTD_KIND = "a zstd archive"
PACKED = {b"\x1f\x8b": "gzip data", b"PK\x03\x04": "a zip archive",
          b"PK\x05\x06": "a zip archive", b"\xfd7zXZ\x00": "an xz archive",
          b"BZh": "a bzip2 archive", b"7z\xbc\xaf\x27\x1c": "a 7-Zip archive",
          b"\x28\xb5\x2f\xfd": ZSTD_KIND, b"PAR1": PARQUET_KIND, b"\x7fELF": ELF_KIND}
"""Magic bytes at the start of a file that is no text (gzip is read where the name ends in
``.gz``); a DuckDB file has ``DUCK`` at bytes 8-11 (after its header's checksum)."""
PARQUET_SUFFIXES = (".parquet", ".pq")
"""The names a Parquet trace is read by."""
ZSTD_SUFFIX = ".zst"
"""The name of a zstd-compressed CSV file, which DuckDB decompresses as it reads it."""


def not_text_error(adapter: str, path: Path) -> TraincastError | None:
    """The error of a file given as a text trace that holds no text, named for what it is by
    its first bytes (:func:`packed_kind`: an archive, a Parquet file under another name, a
    job store, a program; else :func:`binary`), or None."""
    if kind := packed_kind(path):
        hint = {"gzip data": "name it .csv.gz (gzip is read by its name)",
                DUCKDB_KIND: "a job store is read with --db FILE, not as a trace",
                ELF_KIND: "give the trace file itself (CSV text, or gzipped CSV)"}.get(
            kind, "unpack it first (a trace file is CSV text, or gzipped CSV); a Parquet "
                  "trace: name it .parquet")
        return TraincastError(f"{adapter}: {path}: cannot read the file: it is {kind}, not "
                              "text", hint=hint)
    if binary(path):
        return TraincastError(f"{adapter}: {path}: cannot read the file: binary bytes, not "
                              "text", hint="give the trace file itself (CSV text, or gzipped "
                                           "CSV)")
    return None


def duckdb_head(head: bytes) -> bool:
    """Whether a file's first 12 bytes are a DuckDB database's (``DUCK`` at byte 8, after its
    header's checksum)."""
    return head[8:12] == b"DUCK"


def packed_kind(path: Path) -> str:
    """What a file is by its first bytes when it is an archive or a Parquet file
    (:data:`PACKED`; gzip and zstd only under a name that does not end in ``.gz`` or
    ``.zst``: one that does is read decompressed, and its error is the decompression's), else
    ``""``."""
    try:
        with path.open("rb") as f:
            head = f.read(12)
    except OSError:
        return ""
    if duckdb_head(head):
        return DUCKDB_KIND
    kind = next((kind for magic, kind in PACKED.items() if head.startswith(magic)), "")
    named = {"gzip data": ".gz", ZSTD_KIND: ZSTD_SUFFIX}.get(kind)  # read by its name
    return "" if named and path.name.lower().endswith(named) else kind


def file_encoding(path: Path) -> str:
    """The encoding ``iconv -f`` takes for a text file that is not UTF-8: ``utf-16`` where it
    starts with a UTF-16 byte-order mark (Excel's "Unicode text", PowerShell's default), or
    has a NUL byte in every other byte of its start (UTF-16 without one); else ``latin1``
    (:func:`bytes_encoding` of its first 256 bytes)."""
    try:
        with open_bytes(path) as f:
            return bytes_encoding(f.read(256))
    except (OSError, EOFError, zlib.error):
        return "latin1"


def bytes_encoding(head: bytes) -> str:
    """:func:`file_encoding` of a file's first bytes ``head`` (256 read): ``utf-16`` where
    NUL bytes fill one of the two byte positions (ASCII text in UTF-16), not both (binary
    data, :func:`binary`)."""
    head = head[:256]
    odd, even, quarter = head[1::2].count(0), head[0::2].count(0), len(head) // 4
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or (
            len(head) >= 4 and not binary_bytes(head)
            and (odd > quarter or even > quarter)):
        return "utf-16"
    return "latin1"


def binary_bytes(head: bytes) -> bool:
    """Whether a file's first bytes are binary data, not text in any encoding: NUL bytes in
    both byte positions, each in over an eighth of its bytes (UTF-16 text has them in one)."""
    head = head[:256]
    eighth = len(head) // 16
    return len(head) >= 16 and head[1::2].count(0) > eighth and head[0::2].count(0) > eighth


def binary(path: Path) -> bool:
    """:func:`binary_bytes` of a file's first 256 bytes (a ``.gz`` file's once decompressed)."""
    try:
        with open_bytes(path) as f:
            return binary_bytes(f.read(256))
    except (OSError, EOFError, zlib.error):
        return False


def empty_error(adapter: str, path: Path | str) -> TraincastError:
    """The error of a trace file that holds nothing (:func:`empty_file`)."""
    return TraincastError(f"{adapter}: {path}: the file is empty (no header, no rows)",
                          hint="give the trace file itself, or download it again")


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


def some_names(names: Sequence[str], shown: int = 6) -> str:
    """The first ``shown`` of ``names`` joined by ``, ``, then ``, ...`` when there are more
    (the files an error names)."""
    return ", ".join(names[:shown]) + (", ..." if len(names) > shown else "")


def held_names(paths: Iterable[Path]) -> list[str]:
    """What trace paths hold, for an error that says so: the names of each folder's entries
    (a folder's with ``/``) and of each file given, sorted; hidden names left out."""
    entries = [f for p in paths for f in (p.iterdir() if p.is_dir() else [p])]
    return sorted(f.name + ("/" if f.is_dir() else "") for f in entries
                  if not f.name.startswith("."))


DOCUMENT_NAMES = ("readme", "license", "licence", "notice", "changelog", "copying")
"""Names of the documents a trace folder holds beside its tables (``README.txt``,
``LICENSE``, any case and extension): never a trace file of a folder (:func:`folder_files`)."""


def folder_files(adapter: str, path: Path, patterns: tuple[str, ...],
                 one: str = "") -> list[Path]:
    """The trace files of a folder given as a trace: its files (in it, or in a folder of it,
    as ``*/cluster_log.csv``) whose path below it matches one of ``patterns``, sorted by name;
    hidden files (``.name``, as macOS's ``._name`` copies) left out, and ``X.gz`` where ``X``
    is there too (the same table, compressed). A folder with none is an error that lists what
    it holds; ``one`` (what its files are) allows one file only: a folder with several is an
    error that names them. Documents (:data:`DOCUMENT_NAMES`: ``README.txt`` beside sacct's
    ``*.txt`` exports) are no trace files."""
    found = {f for pat in patterns for f in path.glob(pat)
             if f.is_file() and not any(part.startswith(".") for part in
                                        f.relative_to(path).parts)
             and f.name.split(".")[0].lower() not in DOCUMENT_NAMES}
    found = sorted(f for f in found if not (f.suffix.lower() == ".gz" and
                                            f.with_suffix("") in found))
    if len(found) > 1 and one:
        raise TraincastError(
            f"{adapter}: {path}: {len(found)} {one} in this folder "
            f"({some_names([f.name for f in found])}), each a whole trace of its own",
            hint="give the file of the one to read")
    if found:
        return found
    held = held_names([path])
    holds = f"it holds {some_names(held)}" if held else "it is empty"
    deeper = sorted(sub for sub in path.iterdir() if sub.is_dir() and not sub.name.startswith(".")
                    and any(f.is_file() for pat in patterns for f in sub.glob(pat)))
    raise TraincastError(f"{adapter}: {path}: no {adapter} trace file in this folder (looked "
                         f"for {', '.join(patterns)}; {holds})",
                         hint=(f"the folder {deeper[0]} holds them: give it" if deeper else
                               f"give the {adapter} trace file(s) themselves, or the folder "
                               "that holds them"))


def in_folder(mod: Any, path: Path, folders: Iterable[Path]) -> Path | None:
    """The folder of ``folders`` of which ``path`` would be a trace file (one of the ``FOLDER``
    patterns of the adapter module ``mod`` matches it below that folder), else None."""
    for folder in folders:
        try:
            below = path.relative_to(folder)
        except ValueError:
            continue
        if any(below.match(pat) and len(below.parts) == len(Path(pat).parts)
               for pat in getattr(mod, "FOLDER", ())):
            return folder
    return None


def trace_files(mod: Any, paths: Iterable[Path]) -> list[Path]:
    """The files of a trace given as files and folders, each once, in the order given: a folder
    stands for its files of the adapter module ``mod`` (:func:`folder_files` of its
    ``FOLDER`` patterns, one file only where it sets ``FOLDER_ONE``); a format without
    ``FOLDER`` (pai-2020: a folder of tables) keeps its folders. A folder that ``traincast
    study`` wrote (it holds ``study.json``) is not a trace: an error names its job store."""
    patterns = getattr(mod, "FOLDER", None)
    out: dict[Path, None] = {}
    for p in paths:
        if p.is_dir() and (p / "study.json").is_file():
            raise TraincastError(f"{p}: is a folder written by traincast study (it holds "
                                 "study.json), not a trace",
                                 hint=(f"its jobs: --db {p / 'jobs.duckdb'}; "
                                       if (p / "jobs.duckdb").is_file() else
                                       "its jobs: the trace or store it studied (study.json "
                                       "names it); ") + f"its report: traincast report --study {p}")
        for f in (folder_files(mod.NAME, p, patterns, getattr(mod, "FOLDER_ONE", ""))
                  if patterns and p.is_dir() else [p]):
            out.setdefault(f.resolve(), None)
    return list(out)


def source_renames(fields_of: Callable[[list[str]], dict[str, Field]],
                   mapping: Mapping[str, str] | None, cols: list[str],
                   required: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """``--map COL=FIELD`` on an adapter whose canonical column COL is read from one source
    column S it requires (``Field.column``: Helios's ``n_gpus`` from ``gpu_num``, ElasticFlow's
    ``submit_time_s`` from ``submission_time``) that the file does not have: FIELD is read as
    S, so the adapter's rules for S apply to it (its conversions and checks, and every column
    it derives from S: ElasticFlow's start and end times from its submission time).
    Returns ``({S: FIELD}, the mapping left to read straight)``."""
    needed = {c.lower() for c in required}
    base = fields_of([*cols, *needed])  # the adapter's fields as if the file had them all
    renames: dict[str, str] = {}
    left: dict[str, str] = {}
    for col, src in (mapping or {}).items():
        f = base.get(col)
        s = (source_name(f.column) or "").lower() if f is not None else ""
        if s in needed and s not in cols:
            renames[s] = src
        else:
            left[col] = src
    return renames, left


SYNONYMS: dict[str, str] = {"numgpus": "n_gpus", "numgpu": "n_gpus", "gpus": "n_gpus",
                            "gpunum": "n_gpus", "ngpu": "n_gpus", "gpucount": "n_gpus",
                            "username": "user", "state": "status", "gpumodel": "gpu_type"}
"""Column names of common exports (normalized: lower case, letters and digits only) that mean a
canonical column under another name (not ``id`` nor ``gpu``: a row number, a GPU count or a
model, by the file)."""


def near_canonical(column: str) -> str | None:
    """The canonical column a file's ``column`` names under another spelling: the same letters
    and digits in any case (``JobID``, ``GPUType``), without the unit suffix ``_s`` of the
    time columns (``SubmitTime``, ``submit_time``), or a :data:`SYNONYMS` name (``num_gpus``);
    None for any other."""
    key = bare_name(column)
    for c in COLUMNS:
        if key in (bare_name(c), bare_name(c.removesuffix("_s"))):
            return c
    return SYNONYMS.get(key)


def map_hint(fields_of: Callable[[list[str]], dict[str, Field]], cols: list[str],
             required: Iterable[str]) -> str:
    """How ``--map`` gives an adapter's missing source columns: the canonical column read
    from each (:func:`source_renames`); one no canonical column reads straight (ElasticFlow's
    ``duration``) is to be renamed in the file; '' when no column is missing or the adapter's
    columns are missing."""
    needed = [c.lower() for c in required]
    missing = [c for c in needed if c not in cols]
    if not missing:
        return ""
    base = fields_of([*cols, *needed])
    gives = {name.lower(): col for col, f in base.items()
             if (name := source_name(f.column))}
    near = {near_canonical(c): c for c in cols}
    said = [f"--map {gives[c]}={near.get(gives[c], 'FIELD')} for {c}" for c in missing
            if c in gives]
    rename = [c for c in missing if c not in gives]
    return ("the file's column for each: " + ", ".join(said) if said else "") \
        + ("; " if said and rename else "") \
        + (f"the file needs a column named {', '.join(rename)} (rename the file's own; no "
           "--map gives it)" if rename else "")


def renamed_fields(fields: dict[str, Field], renames: Mapping[str, str]) -> dict[str, Field]:
    """The fields with a renamed source column (:func:`source_renames`) reported by the file's
    name: their ``raw`` and ``column`` name FIELD, which holds the same values as S."""
    def named(name: str | None) -> str | None:
        return q(renames[name.lower()]) if name and name.lower() in renames else name

    return {k: replace(f, raw=named(f.raw), column=named(f.column)) for k, f in fields.items()}


def file_plans(con: duckdb.DuckDBPyConnection, paths: Iterable[Path],
               mapping: Mapping[str, str] | None, adapter: str, required: Iterable[str],
               fields_of: Callable[[list[str]], dict[str, Field]],
               censored_of: Callable[[dict[str, Field], list[str]], str] | None = None, *,
               relation: Callable[[Path], str] = table_relation,
               probe: Callable[[Path], str] | None = None,
               ending: Callable[[duckdb.DuckDBPyConnection, Path], FileEnd | None] | None
               = table_end,
               checks_of: Callable[[list[str]], list[Check]] | None = None,
               csv_file: bool = True,
               over: Callable[[str], str] | None = None) -> list[Plan]:
    """One plan per trace file, for adapters that map one file to jobs row by row (a folder of
    them is expanded before, :func:`trace_files`).

    For each file: its columns (read from ``probe(path)``, else from ``relation(path)``, the
    relation with ``_row`` the plan runs over) must include ``required``; its canonical columns
    are ``fields_of(columns)`` with ``--map`` applied; a job is censored where
    ``censored_of(fields, columns)`` holds (default: never); its rows are also checked by
    ``checks_of(columns)`` (the adapter's bad-row rules for source columns); how the file ends,
    ``ending(con, path)`` (default :func:`table_end`: a cut last CSV row is a bad row), is
    added to the plan (:meth:`FileEnd.apply`). ``over(rel)``: the adapter's relation over the
    file's rows as ``--map`` renames them (a filter or a window over a source column: Slurm's
    job steps, Alibaba 2023's trace end), so that a mapped column serves it as the file's own.
    ``csv_file``: the files are CSV text (or Parquet), so one of white space alone is empty and
    one that holds no text is named for what it is (:func:`not_text_error`) before DuckDB reads
    it (False: JSON, which says what it starts with).
    """
    out = []
    for path in paths:
        if path.is_dir():
            raise TraincastError(f"{adapter}: {path}: a directory, not a trace file",
                                 hint=f"give the {adapter} trace file(s) themselves")
        if is_archive(path):
            raise archive_error(adapter, path)
        if relation is table_relation:
            refuse_json(adapter, path)
        if csv_file:  # (a JSON file's probe says what it starts with)
            if empty_file(path):  # white space alone: DuckDB would read one unnamed column
                raise empty_error(adapter, path)
            if not path.name.lower().endswith((*PARQUET_SUFFIXES, ZSTD_SUFFIX)) and (
                    no_text := not_text_error(adapter, path)):  # NULs read as UTF-8 text
                raise no_text
        try:
            end = ending(con, path) if ending else None
            named = source_columns(con, (probe or relation)(path))
        except READ_ERRORS as exc:
            raise unreadable(adapter, path, exc) from None
        cols = [c.lower() for c in named]  # DuckDB resolves names case-insensitively
        refuse_non_jobs(adapter, path, cols)
        renames, left = source_renames(fields_of, mapping, cols, required)
        for src in renames.values():  # errors name the columns as the file spells them
            require(adapter, path, named, [src], hint=f"--map names {src!r}, a column the "
                    "file does not have")
        try:
            left_required = [c for c in required if c.lower() not in renames]
            require(adapter, path, named, left_required,
                    hint=map_hint(fields_of, cols, left_required), fits_first=True)
        except TraincastError:
            if end is None or end.why != "quote":
                raise
            # DuckDB's sniffer, meeting an open quote in a short file, reads each line whole
            raise open_quote_error(adapter, path) or TraincastError(
                f"{adapter}: {path}: the file ends inside a quoted value (its quotes do not "
                "pair up), so its columns cannot be told",
                hint="close the quote, or remove it") from None
        cols = [*cols, *renames]
        fields = renamed_fields(apply_mapping(fields_of(cols), left, cols, adapter, path),
                                renames)
        censored = censored_of(fields, cols) if censored_of else "FALSE"
        rel = relation(path)
        checks = checks_of(cols) if checks_of else []
        if renames:  # the adapter's column read from the file's: reported by the file's name
            rel = (f"(SELECT *, {', '.join(f'{q(src)} AS {q(s)}' for s, src in renames.items())}"
                   f" FROM {rel})")
            checks = [replace(c, field=renames.get(c.field, c.field)) for c in checks]
        spelling = {c.lower(): c for c in named}
        if f"{lit(EXTRA)}: 'VARCHAR'" in rel:  # read as CSV, by csv_relation
            delim, skip, header, written = _dialect(path)
            twice = {c.lower() for c in duplicate_columns(path)}  # read by none: not named
            once = [(c, w) for c, w in zip(header, written, strict=False)
                    if w.strip() and not {c.lower(), w.strip().lower()} & twice]
            checks[:0] = [header_row_check(once), extra_field_check(
                len(header), ends_rows_with_delimiter(path, delim, skip, len(header)))]
            if needed := [c.lower() for c in required]:
                checks.insert(2, short_row_check(needed, [c for c, _ in once], spelling))
            _refuse_read_twice(adapter, path, fields, checks)
        plan = Plan(adapter, str(path), rel, fields, censored=censored, checks=checks,
                    files=[str(path)], spelling=spelling)
        plan.notes.extend(yyyymmdd_note(c, source_name(fields[c].raw) or c)
                          for c in TIME_COLUMNS if c in fields)
        if end is not None:
            end.apply(plan)  # the file's last row, before a filter leaves rows out
        if over is not None:
            plan.relation = over(plan.relation)
        out.append(plan)
    return out
