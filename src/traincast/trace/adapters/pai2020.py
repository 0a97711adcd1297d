"""``--format pai-2020``: the Alibaba PAI GPU cluster trace of 2020 (cluster-trace-gpu-v2020).

Input: the directory holding the headerless tables, or the table files themselves, recognised
by name: ``pai_job_table*`` and ``pai_task_table*`` (required), ``pai_instance_table*``,
``pai_sensor_table*``, ``pai_group_tag_table*`` (optional; the columns each adds are NULL
without it). Column names are those of the release's ``*.header`` files (:data:`HEADERS`); the
tables are read as the release writes them, comma-separated and headerless (a first line of
the release's column names, which a user may prepend, is passed over).
The release's ``.tar.gz`` archives are extracted by the user: beside their tables they are left
alone; alone, an error says to extract them. A job repeated in the job table (its
``job_name``) is a bad row; jobs found in only one of the job and task tables are counted in
the report's notes. A cut last row (:func:`~traincast.trace.adapters.base.csv_end`) of the job
table is a bad row, of the task table makes its job one (reported at the task table), of a side
table is left out of its aggregates (said in the notes).

Mapping (one job = one row of the job table; all joins run in DuckDB, streaming the tables):

* ``job_id`` = inst_id (else job_name): the release says to treat inst_id as the job id, each
  job_name having one; job rows of several job_names sharing one inst_id stay distinct jobs,
  each with its job_name as job_id (counted in the notes). ``user``; ``status``;
  ``submit_time_s`` = the job's start_time (its submission); ``start_time_s`` = the first
  instance's start_time above 0 (0 is an instance that never started, as the release's own
  analysis reads it; else the job's, except for a job whose status is Waiting: it has not
  started, NULL, as Alibaba 2023's Pending pods, and holds no GPU time);
  ``end_time_s`` = the job's end_time.
* Roles come from the task table: a task named ``ps`` is a parameter server; every other task
  except ``evaluator`` is a worker role. ``n_ps`` = Σ inst_num of ``ps`` tasks; ``n_workers`` =
  Σ inst_num of worker roles; ``gpus_per_worker`` = the largest plan_gpu / 100 of a worker role;
  ``n_gpus`` = Σ over all tasks of plan_gpu / 100 × inst_num (plan_gpu 50 = half a GPU: flagged
  ``fractional_gpu``; inst_num missing = one instance); a missing plan_gpu (empty, NaN) is no
  GPU on a task naming no gpu_type (a CPU task, as parameter servers are) and unknown on one
  naming a gpu_type: the job's ``n_gpus`` (and, for a worker role, ``gpus_per_worker``) is then
  NULL, not 0; ``gpu_type`` = the GPU type of the task holding most GPUs (V100, V100M32,
  P100, T4, MISC: catalog aliases); ``node`` empty (the trace names machines, not node
  presets).
* Placement from the instance table: with ``M`` = distinct machines of the job's worker
  instances, ``workers_per_node`` = ceil(n_workers / M) and ``gpus_per_node`` =
  workers_per_node × gpus_per_worker (parameter servers run on their own machines and are not
  counted); both NULL without the instance table or instances with a machine.
* Architecture (:data:`ARCH_RULE`): none for a job of 0 GPUs (its tasks plan none: a CPU
  job, flagged ``zero_gpu`` as in every format); else ``ps-worker`` when the job has a ``ps``
  task and at least one worker instance; else ``allreduce-cluster`` when it has more than one
  worker instance, unless the instance table places all of them on one machine, then
  ``allreduce-local``; else
  ``allreduce-local`` when its one worker has more than one GPU; else ``1w1g``. Evaluators are
  not workers: their GPUs count in ``n_gpus`` but not in the training GPUs ``n_workers ×
  gpus_per_worker`` the model runs (``traincast.resolve.training_gpus``), so a 1-GPU worker
  with a 1-GPU evaluator is ``1w1g`` on ``n_gpus`` = 2 and is predicted on one GPU.
* ``workload`` = the group tag's workload of the job's inst_id (bert, nmt, ctr, ...; most jobs
  are untagged: NULL).
* ``gpu_util`` = mean over the job's sensor rows of gpu_wrk_util / plan_gpu of the instance's
  task, each at most 1 (gpu_wrk_util is % of one GPU busy; dividing by the planned GPUs in %
  gives the busy fraction of the GPUs the instance holds; an instance sharing a GPU can use
  more than its planned share: fully busy).
* Bad task rows (the job is a bad row, reported at the task table and row): plan_gpu
  unparsable, negative or above :data:`PLAN_GPU_MAX`; inst_num unparsable, negative, not whole
  or above :data:`~traincast.bounds.COUNT_MAX`; a row with fewer fields than the release's
  (of the job table: its job is a bad row), reported at the first field it lacks.
* Censored: status Running or Waiting, or no end_time.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from pathlib import Path

import duckdb

from traincast.bounds import COUNT_MAX
from traincast.errors import TraincastError
from traincast.files import open_bytes, refuse_stream
from traincast.trace.adapters.base import (
    EXTRA,
    READ_ERRORS,
    UTF8_BOM,
    Check,
    Field,
    FileEnd,
    Plan,
    archive_error,
    csv_end,
    csv_relation,
    empty_error,
    empty_file,
    extra_field_check,
    extra_field_value,
    held_names,
    is_archive,
    last_row,
    lit,
    num,
    present,
    q,
    running_status,
    some_names,
    text,
    unreadable,
)
from traincast.units import fmt_exp

NAME = "pai-2020"
HEADERS: dict[str, tuple[str, ...]] = {
    "job": ("job_name", "inst_id", "user", "status", "start_time", "end_time"),
    "task": ("job_name", "task_name", "inst_num", "status", "start_time", "end_time",
             "plan_cpu", "plan_mem", "plan_gpu", "gpu_type"),
    "instance": ("job_name", "task_name", "inst_name", "worker_name", "inst_id", "status",
                 "start_time", "end_time", "machine"),
    "sensor": ("job_name", "task_name", "worker_name", "inst_id", "machine", "gpu_name",
               "cpu_usage", "gpu_wrk_util", "avg_mem", "max_mem", "avg_gpu_wrk_mem",
               "max_gpu_wrk_mem", "read", "write", "read_count", "write_count"),
    "group_tag": ("inst_id", "user", "gpu_type_spec", "group", "workload"),
}
REQUIRED_TABLES = ("job", "task")
FILE_PATTERN = "pai_*_table*"
"""The release's file names (headerless CSVs): a file so named read as another format is
pointed here (``base.require``)."""
ARCH_RULE = ("0 GPUs -> none (not training on GPUs); ps task and >= 1 worker instance -> "
             "ps-worker; > 1 worker instance -> "
             "allreduce-cluster (allreduce-local if all on one machine); one worker with > 1 "
             "GPU -> allreduce-local; else 1w1g")
_WORKER = "lower(task_name) NOT IN ('ps', 'evaluator')"
_WPN = "CASE WHEN t_workers > 0 AND i_machines > 0 THEN ceil(t_workers / i_machines) END"
"""Workers per machine: the job's workers over the machines its worker instances ran on."""


def find_tables(paths: list[Path]) -> dict[str, Path]:
    """Table name -> file, from directories and files named ``pai_<table>_table*``."""
    files: list[Path] = []
    for p in paths:
        files.extend(sorted(p.glob(FILE_PATTERN)) if p.is_dir() else [p])
    for f in files:  # a FIFO named as a table would block its first read
        refuse_stream(f)
    found: dict[str, Path] = {}
    archives: dict[str, Path] = {}  # as downloaded (pai_job_table.tar.gz): used once extracted
    for f in files:
        if f.suffix == ".header":
            continue
        for table in HEADERS:
            if f.name.startswith(f"pai_{table}_table"):
                if is_archive(f):
                    archives.setdefault(table, f)
                    continue
                if table in found:
                    raise TraincastError(f"{NAME}: two files for table pai_{table}_table: "
                                         f"{found[table]} and {f}",
                                         hint="a pai-2020 trace is one set of tables: give one "
                                              "folder (or its table files); ingest another "
                                              "trace on its own")
                found[table] = f
    for table, f in archives.items():
        if table not in found:
            raise archive_error(NAME, f)
    missing = [t for t in REQUIRED_TABLES if t not in found]
    if missing:
        others = held_names(paths)
        headers = [n for n in others if n.endswith("_table.header")]
        seen = (f" (found only {some_names(others)}: no table this format reads"
                + ("; .header files give the tables' column names, not their rows"
                   if headers else "") + ")") if others and not found else ""
        raise TraincastError(
            f"{NAME}: {', '.join(str(p) for p in paths)}: missing table(s) "
            f"{', '.join(f'pai_{t}_table.csv' for t in missing)}{seen}",
            hint="give the directory of the trace or its table files (pai_job_table.csv, "
                 "pai_task_table.csv, and optionally the instance, sensor and group-tag "
                 "tables); the release (github.com/alibaba/clusterdata, cluster-trace-gpu-v2020) "
                 "downloads them as pai_<table>_table.tar.gz: extract them with tar -xf")
    return found


def plans(con: duckdb.DuckDBPyConnection, paths: list[Path],
          mapping: Mapping[str, str] | None) -> list[Plan]:
    """One plan for the table set: the job table joined with the per-job aggregates of the
    other tables (module docstring)."""
    if mapping:
        raise TraincastError(f"{NAME}: --map is not supported for the multi-table PAI trace",
                             hint="use --format csv with --map for single-table traces")
    tables = find_tables(paths)
    for t in REQUIRED_TABLES:  # the job and task tables hold the jobs: an empty one is no trace
        if empty_file(tables[t]):
            raise empty_error(NAME, tables[t])
    # row numbers (for error reports) only on the job and task tables; the big instance and
    # sensor tables are streamed through aggregations
    rel = {t: _table(p, t, rows=t in REQUIRED_TABLES) for t, p in tables.items()}
    ends: dict[str, FileEnd | None] = {}
    for t, path in tables.items():  # how each file ends: the big side tables by their end only
        try:
            ends[t] = csv_end(con, path, list(HEADERS[t]), header=False,
                              quotes=t in REQUIRED_TABLES)
        except READ_ERRORS as exc:
            raise unreadable(NAME, path, exc) from None
    notes = _notes(tables)
    every_job = f"SELECT count(*) FROM {_table(tables['job'], 'job', rows=False)}"
    if "instance" in tables:  # what the aggregate reads (_side_joins): a start, a worker's machine
        unread = (f"({present(q('start_time'))} AND {num('start_time')} IS NULL) OR "
                  f"({_WORKER} AND {text('machine')} IS NULL)")
        notes.append((f"SELECT count(*) FROM {rel['instance']} "
                      f"WHERE {unread}",
                      f"row(s) of {tables['instance'].name} with a start_time that is no number, "
                      "or a worker without a machine: that value is left out of its job's start "
                      "and machine count"))
    if "sensor" in tables:  # one pass: a reading below 0 or that is no number is none
        notes.append((f"SELECT count(*) FROM {rel['sensor']} "
                      f"WHERE {num('gpu_wrk_util')} < 0 OR ({present(q('gpu_wrk_util'))} AND "
                      f"{num('gpu_wrk_util')} IS NULL)",
                      f"reading(s) of {tables['sensor'].name} with a gpu_wrk_util below 0 (no "
                      "utilization) or that is no number: left out of their job's measured "
                      "utilization"))
    for t in ("instance", "sensor", "group_tag"):
        if t in tables and empty_file(tables[t]):
            notes.append((every_job, f"job(s) take nothing from {tables[t].name}: the file is "
                          "empty (the columns it gives are NULL)"))
    task_cut = ends["task"] if ends["task"] is not None and ends["task"].cut else None
    if task_cut:
        rel["task"] = last_row(rel["task"])
    for t in ("instance", "sensor", "group_tag"):
        end = ends.get(t)
        if end is not None and end.cut:  # its cut last row is left out of the aggregates
            rel[t] = (f"(SELECT * FROM {last_row(_table(tables[t], t))} "
                      "WHERE _row < _last_row)")
            notes.append(("SELECT 1", f"row at the end of {tables[t].name} is cut "
                          f"({end.reason}): left out"))
    rel["job"] = (f"(SELECT *, {text('inst_id')} IS NOT NULL AND min({_JOB}) OVER w <> "
                  f"max({_JOB}) OVER w AS _inst_shared FROM {rel['job']} "
                  f"WINDOW w AS (PARTITION BY {text('inst_id')}))")
    joins, cols = _side_joins(rel, task_cut)
    relation = (f"(SELECT j.*, {', '.join(cols)} FROM {rel['job']} j {' '.join(joins)})")
    checks = [extra_field_check(len(HEADERS["job"])),
              Check(HEADERS["job"][-1], "_short IS NOT NULL", SHORT_VALUE, field_sql="_short"),
              Check("plan_gpu", "t_bad_row IS NOT NULL", "t_bad_value",
                    file=lit(tables["task"]), row="t_bad_row", field_sql="t_bad_field")]
    # running (or waiting) by its status, or no end time and no final status: a Terminated or
    # Failed job without an end time has ended when the trace does not say (not counted on)
    final = f"lower({text('status')}) IN ('terminated', 'failed')"
    censored = (f"({running_status('status')} OR ({num('end_time')} IS NULL "
                f"AND NOT COALESCE({final}, FALSE)))")
    plan = Plan(NAME, str(tables["job"]), relation, _fields(), censored=censored,
                checks=checks, files=[str(p) for p in tables.values()],
                dedup_key=text("job_name"), dedup_field="job_name", notes=notes)
    for t in ("job", "task", "instance", "sensor", "group_tag"):
        end = ends.get(t)
        if end is not None and (t == "job" or not end.cut):
            end.apply(plan)  # the job table's cut row: a bad row; a whole one: a note
    return [plan]


def _headed(path: Path, table: str) -> bool:
    """Whether the file's first line is the release's column names of ``table`` (a header a
    user prepended: the release writes its tables without one)."""
    try:
        with open_bytes(path) as f:
            first = f.readline(1 << 16).removeprefix(UTF8_BOM).strip().decode("utf-8",
                                                                               "replace")
    except (OSError, EOFError, zlib.error) as exc:  # a .gz cut short, or not gzip at all
        raise unreadable(NAME, path, exc) from None
    return [c.strip().lower() for c in first.split(",")] == list(HEADERS[table])


def _table(path: Path, table: str, rows: bool = True) -> str:
    """A PAI table file as a relation of its release columns (:func:`csv_relation`), a
    prepended header line passed over (:func:`_headed`); with its row numbers, each row's
    first missing field ``_short`` (a row with fewer fields than the release's)."""
    return csv_relation(path, HEADERS[table], rows=rows, skip=int(_headed(path, table)),
                        short=rows)


SHORT_VALUE = ("'(missing: the row ends before this field, with fewer fields than the "
               "release''s table has)'")
"""How a row of the job or task table that ends before its last field is reported (an empty
field, as the release writes a running job's end_time, is a field, and reads as none)."""


_JOB = f"COALESCE({text('job_name')}, '#' || _row)"
"""A job row's identity for :func:`plans`' shared-inst_id test: its job_name (a row without
one is a job of its own)."""
PLAN_GPU_MAX = 100 * COUNT_MAX
"""The largest plan_gpu (GPUs of one instance in %): a million GPUs."""


def _task_aggregate(task_rel: str, cut: FileEnd | None = None) -> str:
    """SQL: the task table per job (``t_gpus``, ``t_ps``, ``t_workers``, ``t_gpw``,
    ``t_gpu_type``) with its first bad task row (``t_bad_row``, ``t_bad_field``,
    ``t_bad_value``: the table's cut last row (``cut``, over ``_last_row``), an unparsable or
    negative ``plan_gpu`` or one above :data:`PLAN_GPU_MAX`, a bad, fractional or negative
    ``inst_num`` or one above :data:`~traincast.bounds.COUNT_MAX`).

    A task's GPUs are plan_gpu / 100 × inst_num (inst_num missing: one instance). A missing
    plan_gpu is no GPU when the task names no gpu_type either (a CPU task, as parameter
    servers are), and unknown when it names one: then the job's ``t_gpus`` is NULL (and
    ``t_gpw`` where the task is a worker role)."""
    pg, n = num("plan_gpu"), num("inst_num")
    rules: list[tuple[str, str, str]] = (  # (condition, field, value) in SQL, first wins
        [] if cut is None else [("_row = _last_row", lit(cut.field), lit(cut.value))])
    rules += [
        (present(q(EXTRA)), lit(str(len(HEADERS["task"]) + 1)),
         extra_field_value(len(HEADERS["task"]))),
        ("_short IS NOT NULL", "_short", SHORT_VALUE),
        (f"{present('inst_num')} AND {n} IS NULL", "'inst_num'", "CAST(inst_num AS VARCHAR)"),
        (f"{present('plan_gpu')} AND {pg} IS NULL", "'plan_gpu'", "CAST(plan_gpu AS VARCHAR)"),
        (f"{pg} < 0", "'plan_gpu'", "CAST(plan_gpu AS VARCHAR)"),
        (f"{pg} > {PLAN_GPU_MAX}", "'plan_gpu'", "CAST(plan_gpu AS VARCHAR) || ' (must be "
         f"from 0 to {fmt_exp(PLAN_GPU_MAX)}: GPUs of one instance in %)'"),
        (f"{n} < 0", "'inst_num'", "CAST(inst_num AS VARCHAR)"),
        (f"{n} <> round({n})", "'inst_num'",
         "CAST(inst_num AS VARCHAR) || ' (must be a whole number of instances)'"),
        (f"{n} > {COUNT_MAX}", "'inst_num'",
         f"CAST(inst_num AS VARCHAR) || ' (must be from 0 to {COUNT_MAX:,} instances)'"),
    ]
    bad = "CASE " + " ".join(f"WHEN {c} THEN {f}" for c, f, _ in rules) + " END"
    bad_value = "CASE " + " ".join(f"WHEN {c} THEN {v}" for c, _, v in rules) + " END"
    unknown = f"(NOT {present('plan_gpu')} AND {present('gpu_type')})"
    inst = f"COALESCE({n}, 1)"  # inst_num missing: one instance, for GPUs and roles alike
    gpus = f"COALESCE({pg}, 0) / 100.0 * {inst}"
    return (f"(SELECT job_name, CASE WHEN bool_or(_unknown) THEN NULL ELSE sum({gpus}) END "
            f"AS t_gpus, "
            f"sum(CASE WHEN lower(task_name) = 'ps' THEN {inst} ELSE 0 END) AS t_ps, "
            f"sum(CASE WHEN {_WORKER} THEN {inst} ELSE 0 END) AS t_workers, "
            f"CASE WHEN bool_or(_unknown AND {_WORKER}) THEN NULL "
            f"ELSE max(CASE WHEN {_WORKER} THEN {pg} / 100.0 END) END AS t_gpw, "
            f"arg_max({text('gpu_type')}, {gpus}) AS t_gpu_type, "
            f"min(CASE WHEN _bad IS NOT NULL THEN _row END) AS t_bad_row, "
            f"arg_min(_bad, _row) AS t_bad_field, arg_min(_bad_value, _row) AS t_bad_value "
            f"FROM (SELECT *, {bad} AS _bad, {bad_value} AS _bad_value, {unknown} AS _unknown "
            f"FROM {task_rel}) GROUP BY job_name)")


def _side_joins(rel: dict[str, str], task_cut: FileEnd | None = None
                ) -> tuple[list[str], list[str]]:
    """The joins onto the job table ``j`` and the columns they add: the task aggregate
    (:func:`_task_aggregate`), and where their tables are given the instance machines and
    start (``i_machines``; ``i_start``, the earliest instance start_time above 0: 0 is an
    instance that never started), the sensor utilization (``s_util``: the mean of each sensor
    row's gpu_wrk_util / plan_gpu, at most 1; a reading below 0 is none, left out of the mean
    and counted in a note) and the group tag's workload (``g_workload``);
    NULL columns for a table not given."""
    joins = [f"LEFT JOIN {_task_aggregate(rel['task'], task_cut)} t "
             "ON t.job_name = j.job_name"]
    cols = ["t.*"]
    if "instance" in rel:
        joins.append(f"LEFT JOIN (SELECT job_name, NULLIF(count(DISTINCT {text('machine')}) "
                     f"FILTER (WHERE {_WORKER}), 0) AS i_machines, "
                     f"min({num('start_time')}) FILTER (WHERE {num('start_time')} > 0) "
                     f"AS i_start "
                     f"FROM {rel['instance']} GROUP BY job_name) i ON i.job_name = j.job_name")
        cols += ["i.i_machines", "i.i_start"]
    else:
        cols += ["NULL AS i_machines", "NULL AS i_start"]
    if "sensor" in rel:
        plan = (f"(SELECT job_name, task_name, max({num('plan_gpu')}) AS plan_gpu "
                f"FROM {rel['task']} GROUP BY job_name, task_name)")
        # at most 1; NULL (left out of the mean) without a reading or a planned GPU: DuckDB's
        # least() skips NULLs, so least(NULL, 1) would be 1, a busy GPU
        util = f"{num('s.gpu_wrk_util')} / NULLIF(p.plan_gpu, 0)"
        joins.append(f"LEFT JOIN (SELECT s.job_name, avg(CASE WHEN {util} > 1 THEN 1.0 "
                     f"WHEN {util} >= 0 THEN {util} END) AS s_util "  # below 0: no reading
                     f"FROM {rel['sensor']} s JOIN {plan} p "
                     f"ON p.job_name = s.job_name AND p.task_name = s.task_name "
                     f"GROUP BY s.job_name) s ON s.job_name = j.job_name")
        cols.append("s.s_util")
    else:
        cols.append("NULL AS s_util")
    if "group_tag" in rel:
        joins.append(f"LEFT JOIN (SELECT inst_id, min({text('workload')}) AS g_workload "
                     f"FROM {rel['group_tag']} GROUP BY inst_id) g ON g.inst_id = j.inst_id")
        cols.append("g.g_workload")
    else:
        cols.append("NULL AS g_workload")
    return joins, cols


def _fields() -> dict[str, Field]:
    """Canonical columns over the joined relation (module docstring, :data:`ARCH_RULE`)."""
    arch = ("CASE WHEN t_gpus = 0 THEN NULL "
            "WHEN t_ps > 0 AND t_workers > 0 THEN 'ps-worker' "
            "WHEN t_workers > 1 THEN CASE WHEN i_machines = 1 THEN 'allreduce-local' "
            "ELSE 'allreduce-cluster' END "
            "WHEN t_gpw > 1 THEN 'allreduce-local' "
            "WHEN t_gpus IS NOT NULL THEN '1w1g' END")
    return {
        "job_id": Field(f"CASE WHEN _inst_shared AND {text('job_name')} IS NOT NULL "
                        f"THEN {text('job_name')} ELSE COALESCE({text('inst_id')}, "
                        f"{text('job_name')}) END"),
        "user": Field(text("user")),
        "status": Field(text("status")),
        "submit_time_s": Field(num("start_time"), "start_time", "start_time"),
        "start_time_s": Field(f"COALESCE(i_start, CASE WHEN lower({text('status')}) = "
                              f"'waiting' THEN NULL ELSE {num('start_time')} END)"),
        "end_time_s": Field(num("end_time"), "end_time", "end_time"),
        "architecture": Field(arch),
        "n_gpus": Field("t_gpus"),
        "n_workers": Field("t_workers"),
        "n_ps": Field("t_ps"),
        "gpus_per_worker": Field("t_gpw"),
        "workers_per_node": Field(_WPN),
        "gpus_per_node": Field(f"{_WPN} * t_gpw"),
        "gpu_type": Field("t_gpu_type"),
        "workload": Field("g_workload"),
        "gpu_util": Field("s_util"),
    }


def _notes(tables: dict[str, Path]) -> list[tuple[str, str]]:
    """The report's notes (:attr:`Plan.notes`): jobs of the task table without a job row (not
    stored), jobs of the job table without a task row (stored, GPUs unknown), and jobs whose
    inst_id another job_name shares (stored apart, by job_name)."""
    job, task = tables["job"], tables["task"]
    jobs_of = (f"(SELECT DISTINCT {text('job_name')} AS k FROM "
               f"{_table(job, 'job', rows=False)})")
    tasks_of = (f"(SELECT DISTINCT {text('job_name')} AS k FROM "
                f"{_table(task, 'task', rows=False)})")
    jobs = _table(job, "job", rows=False)
    shared = (f"SELECT COALESCE(sum(n), 0) FROM (SELECT count(DISTINCT {text('job_name')}) + "
              f"count(*) FILTER (WHERE {text('job_name')} IS NULL) AS n FROM {jobs} "
              f"WHERE {text('inst_id')} IS NOT NULL GROUP BY {text('inst_id')}) WHERE n > 1")
    return [(f"SELECT count(*) FROM {tasks_of} t ANTI JOIN {jobs_of} j ON t.k = j.k",
             f"job(s) of {task.name} have no row in {job.name}: not stored (a job is a row "
             "of the job table)"),
            (f"SELECT count(*) FROM {jobs_of} j ANTI JOIN {tasks_of} t ON t.k = j.k",
             f"job(s) of {job.name} have no row in {task.name}: each is stored with an "
             "unknown GPU count and architecture, unless it is a bad row (listed apart)"),
            (shared, f"job(s) of {job.name} share their inst_id with another job_name: each is "
             "stored as its own job, its job_name as its job_id (a group tag of that inst_id "
             "goes to each)")]
