"""``--format slurm``: Slurm accounting records, as ``sacct --parsable2`` writes them (one
header line, ``|``-separated; DuckDB detects the delimiter, so a CSV export reads too)::

    sacct --allusers --starttime 2024-01-01 --parsable2 \\
          --format JobID,User,State,Submit,Start,End,NNodes,AllocTRES,ReqTRES > jobs.txt

Columns (any case; required ``JobID``, ``State``, ``Submit``, ``Start``, ``End``,
``AllocTRES``; ``User``, ``NNodes`` and ``ReqTRES`` read where given):

* ``job_id`` = JobID. A *step* (a JobID with a dot: ``123.batch``, ``123.extern``, ``123.0``)
  runs inside its job's allocation and is no job: its rows are left out (counted in the
  notes); ``sacct -X`` writes allocations only. An array task (``123_7``) is a job.
* ``user``; ``status`` = State (``CANCELLED by 1001`` as written).
* ``submit_time_s`` / ``start_time_s`` / ``end_time_s`` = Submit / Start / End (date-times as
  sacct writes them, ``2024-01-02T10:00:00``, read as UTC: sacct writes the cluster's local
  time without an offset); ``Unknown`` (a pending job's start, a running job's end) is
  missing, as ``None`` is.
* ``n_gpus`` = the GPU count of the allocated trackable resources, ``gres/gpu=N`` in AllocTRES
  (else ReqTRES, for a job not allocated yet); a TRES list without ``gres/gpu`` is 0 GPUs (a
  CPU job); an empty one is unknown (NULL).
* ``gpu_type`` = the ``TYPE`` of ``gres/gpu:TYPE=N`` when the TRES list names one (``a100``,
  ``h100``; catalog aliases or a ``--catalog`` ``[alias]`` map it), else NULL.
* an older export with GRES columns and no TRES one (``AllocGRES``, else ``ReqGRES``:
  ``gpu:2``, ``gpu:tesla:4(IDX:0-3)``) requires AllocGRES in place of AllocTRES: ``n_gpus``
  the sum of its ``gpu:N`` and ``gpu:TYPE:N``, ``gpu_type`` the first TYPE (:data:`GRES`);
* ``gpus_per_node`` = n_gpus / NNodes when NNodes > 0; no architecture (inferred).

Censored: State RUNNING/PENDING (any case), or a start without an end in a state that is
not final (SUSPENDED, REQUEUED, ...). A job in a final state (:data:`FINAL_STATES`: COMPLETED,
FAILED, CANCELLED, TIMEOUT, ...) without an End finished: it is not censored, its duration is
unknown (a record slurmdbd did not close), said in the notes.
The components of a heterogeneous job (``2002+0``, ``2002+1``) are one job (``2002``), their
GPUs and nodes summed (:func:`_het_jobs`), said in the notes. Jobs holding GPU shards
(``gres/shard=N``) and no GPU are read as CPU jobs (a shard's share of a GPU is the node's
``gres.conf``), said in the notes too.
Bad rows beside the generic ones (:meth:`~traincast.trace.adapters.base.Plan.all_checks`):
NNodes that is not a whole number from 0 to :data:`~traincast.bounds.COUNT_MAX`; a TRES list
with a ``gres/gpu`` entry whose count is no whole number or that has none read here (the GRES
form ``gres/gpu:a100:2``); a GRES list with a ``gpu`` entry that is not ``gpu:N`` or
``gpu:TYPE:N``, ``N`` whole (:func:`_checks`). A file whose
AllocTRES lists never name ``gres/gpu`` is read as CPU jobs, said in the notes (Slurm records GPUs
in AllocTRES only where ``AccountingStorageTRES`` lists ``gres/gpu``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import duckdb

from traincast.bounds import COUNT_MAX
from traincast.trace.adapters.base import (
    EXTRA,
    READ_ERRORS,
    Check,
    Field,
    FileEnd,
    Plan,
    bound_check,
    csv_end,
    file_plans,
    lit,
    num,
    pipe_separated,
    present,
    q,
    running_status,
    source_columns,
    table_end,
    table_relation,
    text,
    ts,
    unfinished,
    whole_check,
)

NAME = "slurm"
REQUIRED = ("jobid", "state", "submit", "start", "end", "alloctres")
FOLDER = ("*.txt", "*.csv", "*.psv")
"""A folder given as the trace: its sacct exports."""
STEP = "contains(CAST(jobid AS VARCHAR), '.')"
"""SQL: the row is a job step (``123.batch``, ``123.extern``, ``123.0``), not a job."""
HET_COMPONENT = r"regexp_full_match(CAST(jobid AS VARCHAR), '[0-9]+[+][0-9]+')"
"""SQL: the row is a component of a heterogeneous job (``2002+0``, ``2002+1``: Slurm's
``JobID`` of each; ``sacct`` writes one row per component; :func:`_het_jobs` makes one job
of them)."""
FINAL_STATES = ("completed", "failed", "cancelled", "timeout", "node_fail", "preempted",
                "out_of_memory", "boot_fail", "deadline", "revoked")
"""Slurm's job states that end a job (sacct's State, ``CANCELLED by 1001`` included: the
"Job State Codes" of the sacct manual)."""
LISTS = ("alloctres", "reqtres", "allocgres", "reqgres")
"""The resource lists of a heterogeneous job's components, joined into the job's."""
JOINED = ";"
"""What joins a heterogeneous job's components' lists (none holds it: TRES and GRES lists are
``,``-separated ``name=N`` and ``name:type:N`` items), so each is read on its own where
that matters (:func:`gpus_of_tres`)."""


def _tres(cols: list[str], names: tuple[str, str] = ("alloctres", "reqtres")) -> str:
    """SQL: the job's TRES list: AllocTRES, else ReqTRES (a job not allocated yet); with
    ``names`` = :data:`GRES`, its GRES list: AllocGRES, else ReqGRES."""
    have = [c for c in names if c in cols]
    return "COALESCE(" + ", ".join(f"CASE WHEN {present(c)} THEN CAST({c} AS VARCHAR) END"
                                   for c in have) + ", NULL)"


MIG_PROFILE = "[0-9]+g[.][0-9]+gb(?:[+]me)?"
"""A MIG device's profile as Slurm types its GPUs (``gres/gpu:1g.10gb=3``): ``Ng.Mgb``, N
compute slices of M GB, ``+me`` with media extensions (NVIDIA MIG user guide, "Supported MIG
Profiles")."""
MIG_MODEL = "(?:([^=,;:(]*)_)?"
"""What may stand before a MIG profile in a GPU type: the model's name and ``_``
(``a100_3g.20gb``; ``nvidia_a100_3g.40gb``, ``nvidia_h100_80gb_hbm3_3g.40gb`` as Slurm's
NVML autodetection names them), kept as the GPU type (``_first_model``)."""


def mig_share(profile: str) -> str:
    """SQL: the share of a whole GPU a MIG ``profile`` holds, ``N / G``: G = 4 compute slices
    where each holds 6 GB (the A30's 1g.6gb, 2g.12gb, 4g.24gb), else 7 (A100, H100, H200, B200:
    1g.5gb ... 7g.80gb; NVIDIA MIG user guide, "Supported GPUs": 7 instances at most, A30 4).
    Other GPUs' profiles of 4 or 2 slices (RTX PRO Blackwell) read as of 7."""
    n = f"TRY_CAST(regexp_extract({profile}, '^([0-9]+)g', 1) AS DOUBLE)"
    gb = f"TRY_CAST(regexp_extract({profile}, '[.]([0-9]+)gb', 1) AS DOUBLE)"
    return f"({n} / CASE WHEN {gb} / {n} = 6 THEN 4 ELSE 7 END)"


def gpus_of_tres(tres: str) -> str:
    """SQL: the GPUs of a TRES list ``billing=64,cpu=64,gres/gpu:a100=8,mem=500G,node=1``: the
    ``N`` of ``gres/gpu=N`` (or of ``gres/gpu:TYPE=N`` where the list has no untyped count;
    typed counts of several types summed); 0 where the list names no GPU, NULL where there
    is no list. MIG devices (``gres/gpu:1g.10gb=3``, :data:`MIG_PROFILE`) count as the share
    of a GPU each holds (:func:`mig_share`: 3/7), whole GPUs typed beside them as whole. A
    heterogeneous job's components' lists, joined by ``;`` (:data:`JOINED`), are counted each
    on its own and summed (one component may give ``gres/gpu=N`` and its types, another its
    types alone)."""
    one = _gpus_of_one_tres("x")
    return (f"CASE WHEN {tres} IS NOT NULL THEN list_sum(list_transform("
            f"string_split({tres}, '{JOINED}'), lambda x: {one})) END")


def _gpus_of_one_tres(tres: str) -> str:
    """SQL: :func:`gpus_of_tres` of one component's list."""
    plain = (f"list_sum(TRY_CAST(regexp_extract_all({tres}, '(?:^|,)gres/gpu=([0-9]+)', 1) "
             "AS DOUBLE[]))")
    typed = (f"list_sum(TRY_CAST(regexp_extract_all({tres}, "
             f"'(?:^|,)gres/gpu:[^=,]+=([0-9]+)', 1) AS DOUBLE[]))")
    migs, less = _mig_terms(tres, f"'(?:^|,)gres/gpu:{MIG_MODEL}({MIG_PROFILE})=([0-9]+)'")
    return (f"CASE WHEN {tres} IS NOT NULL THEN CASE WHEN {migs} > 0 THEN {typed} + {less} "
            f"ELSE COALESCE({plain}, {typed}, 0) END END")


def _mig_terms(text: str, pattern: str) -> tuple[str, str]:
    """SQL: the MIG devices a list names by ``pattern`` (a regex whose groups are the model
    before the profile, :data:`MIG_MODEL`, the profile and the count) and what counting them
    as their share of a GPU (:func:`mig_share`) takes off counting them whole: ``(sum N,
    sum N (share - 1))``, 0 where there are none."""
    pairs = (f"list_zip(regexp_extract_all({text}, {pattern}, 2), "
             f"regexp_extract_all({text}, {pattern}, 3))")
    return (f"COALESCE(list_sum(list_transform({pairs}, lambda p: TRY_CAST(p[2] AS DOUBLE))), 0)",
            f"COALESCE(list_sum(list_transform({pairs}, lambda p: TRY_CAST(p[2] AS DOUBLE) "
            f"* ({mig_share('p[1]')} - 1))), 0)")


def _first_model(types: str) -> str:
    """SQL: the first model a list's GPU types (``types``, a list expression) name: a type as
    written, a MIG device's the model before its profile (``a100`` of ``a100_3g.20gb``;
    a bare profile, ``3g.40gb``, names none), else NULL."""
    model = f"regexp_extract(t, '^{MIG_MODEL}{MIG_PROFILE}$', 1)"
    return (f"NULLIF(list_filter(list_transform({types}, lambda t: CASE WHEN "
            f"regexp_full_match(t, '{MIG_MODEL}{MIG_PROFILE}') THEN {model} ELSE t END), "
            "lambda t: t <> '')[1], '')")


def nodes_of_tres(tres: str) -> str:
    """SQL: the nodes of a TRES list (the ``N`` of ``node=N``, summed over a heterogeneous
    job's joined lists), else NULL: the job's node count where the export has no NNodes
    column."""
    return (f"list_sum(TRY_CAST(regexp_extract_all({tres}, '(?:^|[,;])node=([0-9]+)', 1) "
            "AS DOUBLE[]))")


def gpu_type_of_tres(tres: str) -> str:
    """SQL: the GPU type a TRES list names (``a100`` of ``gres/gpu:a100=8``; not a MIG
    profile, which names no model), else NULL."""
    return _first_model(f"regexp_extract_all({tres}, '(?:^|[,;])gres/gpu:([^=,;]+)=', 1)")


GRES = ("allocgres", "reqgres")
"""The GRES columns of older sacct exports (``gpu:2``, ``gpu:tesla:4(IDX:0-3)``), read where
the file has no TRES column."""


def gpus_of_gres(gres: str, started: str) -> str:
    """SQL: the GPUs of a GRES list ``gpu:tesla:4(IDX:0-3),mps:100``: the ``N`` of each
    ``gpu:N`` or ``gpu:TYPE:N`` summed, a MIG device (``gpu:3g.40gb:2``, :data:`MIG_PROFILE`)
    as its share of a GPU (:func:`mig_share`); 0 where it names no GPU, or where there is none
    and the job ``started`` (a GRES list is empty for a CPU job, where a TRES one lists its CPUs);
    NULL for a job not started without one."""
    counts = (f"list_sum(list_transform({_gres_entries(gres)}, lambda e: TRY_CAST("
              f"regexp_extract(e, '^{GRES_GPU}$', 1) AS DOUBLE)))")
    # a MIG device (gpu:3g.40gb:2) counts as its share of a GPU, as in a TRES list
    _, less = _mig_terms(gres, f"'(?:^|[,;])gpu:{MIG_MODEL}({MIG_PROFILE}):([0-9]+)'")
    return (f"CASE WHEN {gres} IS NOT NULL THEN COALESCE({counts}, 0) + {less} "
            f"WHEN {started} THEN 0 END")


GRES_GPU = "gpu(?::[^:]+)?:([0-9]+)"
"""A GRES list's GPU entry with its count (``gpu:N``, ``gpu:TYPE:N``), its ``(IDX:...)`` taken
off: the count is the whole entry's last part."""


def _gres_entries(gres: str) -> str:
    """SQL: a GRES list's entries (split at ``,`` and ``;``), each without its ``(IDX:0,2)``
    (which may hold commas)."""
    return f"string_split_regex(regexp_replace({gres}, '[(][^)]*[)]', '', 'g'), '[,;]')"


def gpu_type_of_gres(gres: str) -> str:
    """SQL: the GPU type a GRES list names (``tesla`` of ``gpu:tesla:4``; not a MIG profile,
    which names no model), else NULL."""
    return _first_model(f"regexp_extract_all({gres}, '(?:^|[,;])gpu:([^:,;(]+):[0-9]+', 1)")


def uses_gres(cols: list[str]) -> bool:
    """The file gives GRES columns and no TRES one: its GPUs are read from AllocGRES."""
    return not any(c in cols for c in ("alloctres", "reqtres")) and any(c in cols for c in GRES)


def _fields(cols: list[str]) -> dict[str, Field]:
    gres = uses_gres(cols)
    tres = _tres(cols, GRES) if gres else _tres(cols)
    nodes = num("nnodes") if "nnodes" in cols else "NULL" if gres else nodes_of_tres(tres)
    submit, start, end = q("submit"), q("start"), q("end")  # SQL keywords: quoted
    gpus = gpus_of_gres(tres, present(start)) if gres else gpus_of_tres(tres)
    return {
        "job_id": Field(text("jobid"), column="jobid"),
        "user": Field(text(q("user")) if "user" in cols else "NULL"),
        "status": Field(text("state")),
        "submit_time_s": Field(ts(submit), submit, submit),
        "start_time_s": Field(ts(start), start, start),
        "end_time_s": Field(ts(end), end, end),
        "n_gpus": Field(gpus),
        "gpu_type": Field(gpu_type_of_gres(tres) if gres else gpu_type_of_tres(tres)),
        "gpus_per_node": Field(f"CASE WHEN {nodes} > 0 THEN {gpus} / {nodes} END"),
    }


def _checks(cols: list[str]) -> list[Check]:
    """NNodes: a whole count of nodes; a TRES list with a ``gres/gpu`` entry whose count is no
    whole number (``gres/gpu=2.5``, ``=1e9``, ``=8GPUs``) or that has none this adapter reads
    (``gres/gpu:a100:2``, the GRES form, is not the TRES one), every entry of every
    heterogeneous component's list checked; a GRES list with a ``gpu`` entry that is not
    ``gpu:N`` or ``gpu:TYPE:N`` with a whole ``N`` (``gpu:2.5``, ``gpu:tesla:1e3``, ``gpu:-4``,
    ``gpu:k80`` or ``gpu:3g.40gb`` without a count)."""
    gres = uses_gres(cols)
    tres = _tres(cols, GRES) if gres else _tres(cols)
    if gres:
        bad = f"lambda e: regexp_matches(e, '^gpu(:|$)') AND NOT regexp_full_match(e, '{GRES_GPU}')"
        out = [Check(next(c for c in GRES if c in cols),
                     f"COALESCE(list_bool_or(list_transform({_gres_entries(tres)}, {bad})), "
                     "FALSE)",
                     f"{tres} || ' (a GPU entry is gpu:N or gpu:TYPE:N, N a whole number)'")]
    else:
        entries = f"string_split_regex({tres}, '[,{JOINED}]')"
        bad = ("lambda e: regexp_matches(e, '^gres/gpu([:=]|$)') AND NOT "
               "regexp_full_match(e, 'gres/gpu(:[^=]+)?=[0-9]+')")
        field = next((c for c in ("alloctres", "reqtres") if c in cols), "alloctres")
        out = [Check(field, f"COALESCE(list_bool_or(list_transform({entries}, {bad})), "
                     "FALSE)",
                     f"{tres} || ' (a GPU count is a whole number: gres/gpu=N or "
                     "gres/gpu:TYPE=N)'")]
    return out + (_nnodes_checks() if "nnodes" in cols else [])


def _nnodes_checks() -> list[Check]:
    """The checks of a row's NNodes (a number, whole, from 0 to ``COUNT_MAX``): of a job's,
    and of each component of a heterogeneous job (:func:`_het_jobs`)."""
    n = num("nnodes")
    return [Check("nnodes", f"{present('nnodes')} AND {n} IS NULL", "CAST(nnodes AS VARCHAR)"),
            whole_check("nnodes", "nodes"),
            bound_check("nnodes", "CAST(nnodes AS VARCHAR)", 0, COUNT_MAX,
                        f"a count from 0 to {COUNT_MAX:,}", n)]


def _rows(path: Path) -> str:
    """The file's rows; a ``|``-separated one (``sacct --parsable2``, which never quotes) read
    with ``"`` as a character, so that a job name holding one opens no quoted value."""
    return table_relation(path, quoted=not pipe_separated(path))


def _end(con: duckdb.DuckDBPyConnection, path: Path) -> FileEnd | None:
    """How the file ends (:func:`~traincast.trace.adapters.base.table_end`), its quotes not
    counted where it is read without them (:func:`_rows`)."""
    if pipe_separated(path):
        return csv_end(con, path, quotes=False)
    return table_end(con, path)


def _columns(con: duckdb.DuckDBPyConnection, path: Path) -> list[str]:
    """The file's column names in lower case (empty where it cannot be read: file_plans says
    why)."""
    if path.is_dir() or not path.exists():
        return []
    try:
        return [c.lower() for c in source_columns(con, _rows(path))]
    except READ_ERRORS:
        return []


def _jobs(rows: str, cols: list[str] | None = None) -> str:
    """The rows of a relation without its job steps (``_row``: the file's own row numbers),
    but for a cut last row (``_last_row``, :class:`~traincast.trace.adapters.base.FileEnd`):
    a bad row whatever it held, so that the cut is said. With the relation's columns
    ``cols`` (lower case), the components of each heterogeneous job are one row
    (:func:`_het_jobs`)."""
    cut = "_row = _last_row" if "_last_row" in rows else "FALSE"
    step, het = f"COALESCE({STEP}, FALSE)", f"COALESCE({HET_COMPONENT}, FALSE)"
    if cols is None:
        return f"(SELECT * FROM {rows} WHERE NOT {step} OR {cut})"
    return (f"(SELECT * FROM {rows} WHERE (NOT {step} AND NOT {het}) OR {cut} "
            f"UNION ALL BY NAME {_het_jobs(rows, cols, f'NOT {step} AND {het} AND NOT {cut}')})")


def _het_jobs(rows: str, cols: list[str], where: str) -> str:
    """SQL: one row per heterogeneous job of the ``where`` rows (its components, ``2002+0``,
    ``2002+1``), as Slurm accounts it: ``JobID`` the job's (``2002``); ``Submit`` and
    ``Start`` the earliest given, ``End`` the latest, each by its time (:func:`base.ts`), not
    its text, or ``End`` missing where a component's is (the job runs on); ``NNodes``
    summed; the TRES (or GRES) lists joined by :data:`JOINED`, so that the GPUs and
    nodes the job reads are the components' summed; every other column the first
    component's; ``_row`` the first component's row. A component with a time that does not
    parse, an End before its Start or a bad NNodes makes the job bad: ``_row`` and that
    field are then the component's own, as read (the job's other components are not
    reported). A
    component given twice (exports of several windows joined: ``2002+0`` RUNNING in one,
    COMPLETED in the next) is read once (:func:`_components_once`), as a job given twice is."""
    rows = _components_once(rows, cols, where)
    first = "arg_min({c}, _row)"
    n = "TRY_CAST(nnodes AS DOUBLE)"
    bad = {c: f"({present(q(c))} AND {ts(q(c))} IS NULL)"
           for c in ("submit", "start", "end") if c in cols}
    if "start" in cols and "end" in cols:  # a component that ends before it starts
        inverted = f"({ts(q('end'))} < {ts(q('start'))})"
        bad["start"] = f"({bad['start']} OR {inverted})"
        bad["end"] = f"({bad['end']} OR {inverted})"
    if "nnodes" in cols:
        bad["nnodes"] = "(" + " OR ".join(f"COALESCE({c.condition}, FALSE)"
                                          for c in _nnodes_checks()) + ")"
    # a bad component makes the job bad, reported at its own row with its own value
    any_bad = " OR ".join(bad.values()) or "FALSE"
    agg = ["split_part(CAST(jobid AS VARCHAR), '+', 1) AS jobid",
           f"COALESCE(min(_row) FILTER (WHERE {any_bad}), min(_row)) AS _row"]
    for c in ("submit", "start"):
        if c in cols:
            agg.append(f"COALESCE(arg_min({q(c)}, _row) FILTER (WHERE {bad[c]}), "
                       f"arg_min({q(c)}, {ts(q(c))}) FILTER (WHERE {present(q(c))}), "
                       f"{first.format(c=q(c))}) AS {q(c)}")
    if "end" in cols:
        e = q("end")
        agg.append(f"COALESCE(arg_min({e}, _row) FILTER (WHERE {bad['end']}), "
                   f"CASE WHEN bool_and({present(e)}) THEN arg_max({e}, {ts(e)}) ELSE "
                   f"arg_min({e}, CASE WHEN {present(e)} THEN 1 ELSE 0 END) END) AS {e}")
    if "nnodes" in cols:
        agg.append(f"COALESCE(arg_min(CAST(nnodes AS VARCHAR), _row) FILTER (WHERE "
                   f"{bad['nnodes']}), CAST(sum({n}) AS VARCHAR)) AS nnodes")
    agg += [f"string_agg(CASE WHEN {present(c)} THEN CAST({c} AS VARCHAR) END, '{JOINED}' "
            f"ORDER BY _row) AS {c}" for c in LISTS if c in cols]
    done = ["jobid", "_row", "submit", "start", "end", "nnodes", *LISTS]
    agg.append("arg_min(COLUMNS(lambda c: lower(c) NOT IN ("
               + ", ".join(lit(c) for c in done) + ")), _row)")
    return (f"SELECT {', '.join(agg)} FROM {rows} "
            "GROUP BY split_part(CAST(jobid AS VARCHAR), '+', 1)")


def _components_once(rows: str, cols: list[str], where: str) -> str:
    """SQL: the ``where`` rows with one row per ``JobID``: of a component given twice, the
    record of its final state (a State not running or pending, as the plan's
    ``dedup_prefer`` keeps a job's), else its first row."""
    running = f"CASE WHEN {running_status('state')} THEN 1 ELSE 0 END" if "state" in cols \
        else "0"
    return (f"(SELECT * EXCLUDE (_once) FROM (SELECT *, row_number() OVER (PARTITION BY "
            f"CAST(jobid AS VARCHAR) ORDER BY {running}, _row) AS _once FROM {rows} "
            f"WHERE {where}) WHERE _once = 1)")


def final_state(expr: str) -> str:
    """SQL: the State is one that ends a job (:data:`FINAL_STATES`, any case, ``CANCELLED by
    N`` as written)."""
    states = "|".join(FINAL_STATES)
    return (f"regexp_matches(lower(trim(COALESCE(CAST({expr} AS VARCHAR), ''))), "
            f"'^({states})( |$)')")


def _censored(fields: Mapping[str, Field], _cols: list[str]) -> str:
    """SQL: the job was unfinished at the export (:func:`unfinished`), a finished one (its
    State final, :func:`final_state`) without an End not."""
    return unfinished(fields, final_state(fields["status"].expr))


def plans(con: duckdb.DuckDBPyConnection, paths: list[Path],
          mapping: Mapping[str, str] | None) -> list[Plan]:
    file_rows: list[str] = []  # each file's rows, --map applied (what _jobs filters)
    file_jobs: list[str] = []  # and its jobs (steps left out, heterogeneous ones joined)

    def jobs(rows: str) -> str:
        file_rows.append(rows)
        file_jobs.append(_jobs(rows, [c.lower() for c in source_columns(con, rows)]))
        return file_jobs[-1]

    out, gres = [], []
    for path in paths:  # a file of GRES columns (older sacct) requires AllocGRES, not AllocTRES
        gres.append(uses_gres(_columns(con, path)))
        required = REQUIRED if not gres[-1] else (*REQUIRED[:-1], "allocgres")
        out += file_plans(con, [path], mapping, NAME, required, _fields,
                          _censored, relation=_rows, ending=_end,
                          checks_of=_checks, over=jobs)
    for plan, rows, joined, by_gres in zip(out, file_rows, file_jobs, gres, strict=True):
        path = Path(plan.file)
        # exports of several windows joined (a job RUNNING in one, COMPLETED in the next):
        # the record of its final state is the job
        plan.dedup_prefer = (f"CASE WHEN {running_status(plan.fields['status'].expr)} "
                             "THEN 1 ELSE 0 END")
        steps = f"SELECT count(*) FROM {rows} WHERE {STEP}"
        plan.notes.append((steps, "job step row(s) left out (a JobID with a dot: .batch, "
                                  ".extern, .0 run inside their job's allocation; sacct -X "
                                  "writes allocations only)"))
        split = present(q(EXTRA)) if lit(EXTRA) in rows else "FALSE"  # a row's extra field
        if lit(EXTRA) in rows and not pipe_separated(path):  # TRES lists cut at their commas
            plan.notes.append((
                f"SELECT count(*) FROM {rows} WHERE {split}",
                "row(s) with more fields than the header: an export separated by ',' splits "
                "the TRES lists (cpu=4,gres/gpu=2) into fields unless they are quoted; export "
                "with sacct --parsable2 ('|'-separated)"))
        f = plan.fields
        end = f["end_time_s"]  # not given (Unknown, empty): an End that does not parse is a
        no_end = f"NOT {present(end.raw)}" if end.raw else f"({end.expr}) IS NULL"  # bad row
        plan.notes.append((
            f"SELECT count(*) FROM {joined} WHERE {final_state(f['status'].expr)} "
            f"AND ({f['start_time_s'].expr}) IS NOT NULL AND {no_end}",
            "job(s) in a final state (COMPLETED, FAILED, CANCELLED, ...) without an End: "
            "finished, so not censored; their duration is unknown (a record slurmdbd left "
            "open: sacctmgr show runawayjobs lists them)"))
        plan.notes.append((
            f"SELECT count(*) - count(DISTINCT CAST(jobid AS VARCHAR)) FROM {_jobs(rows)} "
            f"WHERE {HET_COMPONENT}",
            "row(s) repeat a component of a heterogeneous job (the same JobID N+K again, "
            "as in exports of several windows joined): each component read once, its record "
            "of a final state kept"))
        plan.notes.append((
            f"SELECT count(*) FROM {_jobs(rows)} WHERE {HET_COMPONENT}",
            "row(s) are components of heterogeneous jobs (JobIDs of the form N+0, N+1, ...), "
            "each job read "
            "as one: its components' GPUs and nodes summed, the earliest start, the latest "
            "end"))
        if by_gres:
            continue  # GRES lists name GPUs as the cluster gives them
        tres = _tres(["alloctres"])  # the required column: its lists record what was allocated
        plan.notes.append((
            f"SELECT count(*) FROM {joined} WHERE contains({tres}, 'gres/shard') AND NOT "
            f"contains({tres}, 'gres/gpu')",
            "job(s) hold GPU shards (gres/shard=N) and no whole GPU: read as CPU jobs (0 GPUs), "
            "since a shard's share of a GPU is the node's configuration (its gres.conf), not "
            "in the record"))
        no_gpu = (f"SELECT CASE WHEN count(*) FILTER (WHERE contains({tres}, 'gres/gpu')) = 0 "
                  f"AND count(*) FILTER (WHERE {split}) = 0 "
                  f"THEN count(*) FILTER (WHERE {tres} IS NOT NULL) ELSE 0 END FROM "
                  f"{joined}")
        plan.notes.append((no_gpu, "job(s) read as CPU jobs: no AllocTRES list of the file "
                                   "names gres/gpu (Slurm records GPUs in AllocTRES only where "
                                   "the cluster's AccountingStorageTRES lists gres/gpu)"))
    return out
