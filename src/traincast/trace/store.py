"""The job store: one DuckDB file holding the canonical job table and the sources it came from.

``ingest`` runs an adapter's SQL plan over the trace files and appends the jobs in one
transaction: bad rows are counted and reported (file, row, field), then skipped — or, with
``strict``, fail the whole ingest; any failure rolls back, leaving the store exactly as it was.
Ingesting the same files again replaces their jobs when the files changed and is a no-op when
they did not, so ``characterize TRACE`` twice does not duplicate jobs.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.trace.adapters import adapter
from traincast.trace.adapters.base import Plan, as_type, lit, typed, unreadable
from traincast.trace.schema import (
    ALL_COLUMNS,
    COLUMNS,
    DEFAULT_NODE_GPUS,
    FLAG_COLUMNS,
    SCHEMA,
    SQL_TYPE,
)

DEFAULT_DB = "traincast.duckdb"
MAX_ERRORS_SHOWN = 20
Progress = Callable[[str, int, int], None]


def db_path(db: str | Path | None) -> Path:
    """The store file: ``db``, else ``traincast.duckdb`` in the working directory."""
    return Path(db) if db else Path.cwd() / DEFAULT_DB


def _create(con: duckdb.DuckDBPyConnection) -> None:
    cols = ", ".join(f'"{c}" {SQL_TYPE[c]}' for c in ALL_COLUMNS)
    con.execute(f"CREATE TABLE IF NOT EXISTS jobs ({cols})")
    con.execute("CREATE TABLE IF NOT EXISTS sources (source_id INTEGER PRIMARY KEY, "
                "format VARCHAR, files VARCHAR, mapping VARCHAR, fingerprint VARCHAR, "
                "rows BIGINT, bad_rows BIGINT, ingested_at TIMESTAMP)")


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


def _node_gpus_sql(catalog: Catalog) -> str:
    """SQL: GPUs of the default node of the job's GPU type (8 when unknown)."""
    names: dict[str, int] = {}
    for name in (*catalog.gpus, *catalog.aliases):
        try:
            node = catalog.default_node_of(name)
            if node:
                names[name] = catalog.node(node).gpus
        except KeyError:
            continue
    cases = " ".join(f"WHEN {lit(n)} THEN {g}" for n, g in sorted(names.items()))
    return f"COALESCE(CASE gpu_type {cases} END, {DEFAULT_NODE_GPUS})" if cases else \
        str(DEFAULT_NODE_GPUS)


def _stage(con: duckdb.DuckDBPyConnection, plan: Plan) -> None:
    """Run the plan into the temp table ``_staged``: typed canonical columns + first error."""
    checks = plan.all_checks()
    err = " ".join(f"WHEN {c.condition} THEN {i}" for i, c in enumerate(checks))
    err_sql = f"CASE {err} END" if checks else "NULL"

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
    # typed values once (inner), then the checks over them (middle), then the stored shape
    con.execute(
        f"CREATE TEMP TABLE _staged AS SELECT _row, {out}, _censored AS censored, _err, "
        f"{by_err(lambda c: c.file or lit(plan.file))} AS _err_file, "
        f"{by_err(lambda c: c.row)} AS _err_row, "
        f"{by_err(lambda c: c.field_sql or lit(c.field))} AS _err_field, "
        f"{by_err(lambda c: c.value)} AS _err_value "
        f"FROM (SELECT *, {err_sql} AS _err FROM (SELECT *, {values}, "
        f"COALESCE(({plan.censored}), FALSE) AS _censored FROM {plan.relation}))")


def _insert(con: duckdb.DuckDBPyConnection, source_id: int, node_gpus: str) -> None:
    infer = (f"CASE WHEN n_gpus IS NULL THEN NULL WHEN n_gpus <= 1 THEN '1w1g' "
             f"WHEN n_gpus <= {node_gpus} THEN 'allreduce-local' ELSE 'allreduce-cluster' END")
    select = []
    for c in COLUMNS:
        select.append(f"COALESCE(architecture, {infer})" if c == "architecture" else f'"{c}"')
    select += ["censored", "COALESCE(n_gpus = 0, FALSE)",
               "COALESCE(n_gpus <> floor(n_gpus), FALSE)",
               f"(architecture IS NULL AND ({infer}) IS NOT NULL)", str(source_id)]
    con.execute(f"INSERT INTO jobs SELECT {', '.join(select)} FROM _staged WHERE _err IS NULL")


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


def ingest(paths: str | Path | Iterable[str | Path], format: str = "csv",
           db: str | Path | None = None, mapping: Mapping[str, str] | None = None,
           strict: bool = False, *, catalog: Catalog | None = None,
           progress: Progress | None = None) -> dict[str, Any]:
    """Ingest trace files into the store (one transaction); returns a report.

    ``paths``: the trace files (for ``pai-2020``, its directory or table files). ``mapping``:
    canonical column -> source column (``--map``). Report keys: ``db``, ``format``,
    ``sources`` (one per file or table set: ``source_id``, ``files``, ``jobs``, ``bad_rows``,
    ``flags`` (its jobs' flag counts), ``unchanged``), ``jobs`` (stored by this call),
    ``bad_rows``, ``errors`` (first 20: ``file``, ``row``, ``field``, ``value``), ``flags``
    (counts of each flag over the jobs stored by this call), ``seconds``.
    """
    t0 = time.perf_counter()
    if isinstance(paths, str | Path):
        paths = [paths]
    paths = [Path(p).resolve() for p in paths]
    for p in paths:
        if not p.exists():
            raise TraincastError(f"{p}: trace file not found")
    mod = adapter(format)
    path = db_path(db)
    existed = path.exists()
    catalog = catalog or load_catalog()
    con = duckdb.connect(str(path))
    report: dict[str, Any] = {"db": str(path), "format": format, "sources": [], "jobs": 0,
                              "bad_rows": 0, "errors": [], "flags": dict.fromkeys(FLAG_COLUMNS, 0)}
    try:
        con.execute("SET enable_progress_bar = false")  # progress is ours, on stderr
        _keep_try_casts(con)
        con.execute("BEGIN TRANSACTION")
        _create(con)
        plans = mod.plans(con, paths, mapping)
        node_gpus = _node_gpus_sql(catalog)
        mapping_json = json.dumps(dict(mapping or {}), sort_keys=True)
        for i, plan in enumerate(plans):
            if progress:
                progress(f"reading {Path(plan.file).name}", 2 * i, 2 * len(plans))
            files_json = json.dumps(sorted(plan.files))
            fp = _fingerprint(plan.files)
            old = con.execute("SELECT source_id, fingerprint, rows, bad_rows FROM sources "
                              "WHERE format = ? AND files = ? AND mapping = ?",
                              [format, files_json, mapping_json]).fetchone()
            if old and old[1] == fp:
                report["sources"].append({"source_id": old[0], "files": plan.files,
                                          "jobs": old[2], "bad_rows": old[3],
                                          "flags": _flags(con, old[0]), "unchanged": True})
                continue
            if old:
                con.execute("DELETE FROM jobs WHERE source_id = ?", [old[0]])
                con.execute("DELETE FROM sources WHERE source_id = ?", [old[0]])
            try:
                _stage(con, plan)
            except duckdb.Error as exc:
                raise unreadable(plan.adapter, plan.file, exc) from None
            n_bad, errors = _errors(con)
            if n_bad and strict:
                raise TraincastError(
                    f"{plan.adapter}: {plan.file}: {n_bad} bad row(s); nothing was stored "
                    f"(--strict):\n{format_errors(errors, n_bad)}",
                    hint="fix the rows, or ingest without --strict to skip them")
            sid = con.execute("SELECT COALESCE(max(source_id), 0) + 1 FROM sources").fetchone()[0]
            if progress:
                progress(f"storing {Path(plan.file).name}", 2 * i + 1, 2 * len(plans))
            _insert(con, sid, node_gpus)
            n_jobs = con.execute("SELECT count(*) FROM jobs WHERE source_id = ?",
                                 [sid]).fetchone()[0]
            flags = _flags(con, sid)
            for f, v in flags.items():
                report["flags"][f] += v
            con.execute("INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, now())",
                        [sid, format, files_json, mapping_json, fp, n_jobs, n_bad])
            con.execute("DROP TABLE IF EXISTS _staged")
            report["sources"].append({"source_id": sid, "files": plan.files, "jobs": n_jobs,
                                      "bad_rows": n_bad, "flags": flags, "unchanged": False})
            report["jobs"] += n_jobs
            report["bad_rows"] += n_bad
            report["errors"].extend(errors[:MAX_ERRORS_SHOWN - len(report["errors"])])
        con.execute("COMMIT")
        if progress:
            progress("done", 1, 1)
    except BaseException:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass
        con.close()
        if not existed:
            for f in (path, path.with_name(path.name + ".wal")):
                f.unlink(missing_ok=True)
        raise
    con.close()
    report["seconds"] = time.perf_counter() - t0
    return report


def _open_existing(db: str | Path | None) -> duckdb.DuckDBPyConnection:
    path = db_path(db)
    if not path.exists():
        raise TraincastError(f"{path}: no job store here",
                             hint="ingest a trace first: traincast ingest TRACE --format F "
                                  "[--db FILE]")
    return duckdb.connect(str(path), read_only=True)


def load_jobs(db: str | Path | None = None,
              source_ids: Iterable[int] | None = None) -> pa.Table:
    """The canonical job table from the store (all sources, or those given), in ingest order."""
    con = _open_existing(db)
    try:
        where = ""
        if source_ids is not None:
            ids = ", ".join(str(int(s)) for s in source_ids) or "NULL"
            where = f" WHERE source_id IN ({ids})"
        cols = ", ".join(f'"{c}"' for c in ALL_COLUMNS)
        try:
            table = con.sql(f"SELECT {cols} FROM jobs{where}").to_arrow_table()
        except duckdb.CatalogException:
            raise TraincastError(f"{db_path(db)}: not a traincast job store") from None
    finally:
        con.close()
    return table.cast(SCHEMA)


def sources(db: str | Path | None = None) -> list[dict[str, Any]]:
    """The sources recorded in the store (files, format, jobs, bad rows, time)."""
    con = _open_existing(db)
    try:
        cur = con.execute("SELECT * FROM sources ORDER BY source_id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    finally:
        con.close()


def export_parquet(path: str | Path, db: str | Path | None = None) -> Path:
    """Write the store's job table to a Parquet file (canonical columns + flags)."""
    con = _open_existing(db)
    try:
        con.execute(f"COPY (SELECT * FROM jobs) TO {lit(Path(path))} (FORMAT parquet)")
    finally:
        con.close()
    return Path(path)
