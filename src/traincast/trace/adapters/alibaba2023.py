"""``--format alibaba-2023``: the Alibaba GPU cluster pod list (``openb_pod_list_*.csv``).

Mapping: ``job_id`` = name; ``submit_time_s`` = creation_time; ``start_time_s`` =
scheduled_time (NULL for Pending pods, which never started); ``end_time_s`` = deletion_time;
``status`` = pod_phase; ``n_gpus`` = num_gpu × gpu_milli / 1000 (gpu_milli is the share of each
GPU in thousandths: 1 GPU at 460 milli = 0.46 GPU, flagged ``fractional_gpu``; a missing
gpu_milli = whole GPUs; CPU pods have 0 GPUs, flagged ``zero_gpu``); ``gpu_type`` = the first
model listed in gpu_spec (the models a pod may run on, ``|``-separated; empty = any, left
NULL); ``gpus_per_node`` = n_gpus for pods with GPUs (a pod runs on one node; NULL for CPU
pods); ``workers_per_node`` NULL (a pod's processes are not listed); no architecture (inferred
from the GPU count).
Censored: pod_phase Running or Pending, or a pod whose phase does not say it ended (Succeeded,
Failed) with deletion_time equal to the trace end (the file's largest deletion_time within the
time bounds, :data:`~traincast.trace.schema.TIME_MAX_S`: the release writes the trace end for
pods still running); a finished pod deleted last, as in a slice of the file, is not censored.
Bad rows beside the generic ones (:meth:`~traincast.trace.adapters.base.Plan.all_checks`): a
gpu_milli that is not a number from 0 to 1000 (:data:`GPU_MILLI_MAX`: thousandths of one
GPU), a num_gpu that is not a whole number.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import duckdb

from traincast.trace.adapters.base import (
    READ_ERRORS,
    Check,
    Field,
    Plan,
    file_plans,
    num,
    present,
    running_status,
    table_relation,
    text,
    whole_check,
)
from traincast.trace.schema import TIME_MAX_S, TIME_MIN_S

NAME = "alibaba-2023"
REQUIRED = ("name", "num_gpu", "gpu_milli", "gpu_spec", "pod_phase", "creation_time",
            "deletion_time", "scheduled_time")
FOLDER = ("openb_pod_list_*.csv", "openb_pod_list_*.csv.gz", "openb_pod_list_*.parquet")
"""A folder given as the trace: its pod list (the node list beside it is read for a note
alone, :func:`_node_list_text`)."""
NOT_JOBS = {("sn", "cpu_milli", "memory_mib", "gpu", "model"): (
    "the Alibaba 2023 release's node list (one row per machine: its CPUs, memory, GPUs and GPU "
    "model), not a list of jobs", "give the release's pod list, openb_pod_list_*.csv, with "
    "--format alibaba-2023 (docs/traces.md)")}
"""Files of a trace release that hold no jobs, by their exact columns: what each is, and what
to give instead (:func:`traincast.trace.adapters.base.refuse_non_jobs`)."""
FOLDER_ONE = "pod lists"
"""A folder may hold one pod list only: the release's are alternatives (``default`` and the
workloads sampled from it, ``gpuspec33``, ``multigpu50``, ...), not parts of one trace."""
GPU_MILLI_MAX = 1000
"""gpu_milli is the share of each of a pod's GPUs in thousandths: 1000 is a whole GPU."""
_GPUS = f"{num('num_gpu')} * COALESCE({num('gpu_milli')}, 1000) / 1000.0"
FIELDS = {
    "job_id": Field(text("name"), column="name"),
    "submit_time_s": Field(num("creation_time"), "creation_time", "creation_time"),
    "start_time_s": Field(f"CASE WHEN lower(pod_phase) = 'pending' THEN NULL "
                          f"ELSE {num('scheduled_time')} END", "scheduled_time", "scheduled_time"),
    "end_time_s": Field(num("deletion_time"), "deletion_time", "deletion_time"),
    "status": Field(text("pod_phase")),
    "n_gpus": Field(_GPUS, "num_gpu", "num_gpu"),  # a bad count is num_gpu's (gpu_milli: own)
    "gpu_type": Field("NULLIF(split_part(COALESCE(gpu_spec, ''), '|', 1), '')"),
    "gpus_per_node": Field(f"CASE WHEN {_GPUS} > 0 THEN {_GPUS} END"),
}
FINISHED = "lower(trim(CAST(pod_phase AS VARCHAR))) IN ('succeeded', 'failed')"
"""SQL: the pod's phase says it ended (Kubernetes' Succeeded and Failed phases)."""
CENSORED = (f"({running_status('pod_phase')} OR (NOT COALESCE({FINISHED}, FALSE) AND "
            f"{num('deletion_time')} >= _trace_end))")
_MILLI = num("gpu_milli")
CHECKS = [
    Check("gpu_milli", f"{present('gpu_milli')} AND ({_MILLI} IS NULL OR {_MILLI} < 0 "
          f"OR {_MILLI} > {GPU_MILLI_MAX})",
          f"CAST(gpu_milli AS VARCHAR) || CASE WHEN {_MILLI} IS NULL THEN '' ELSE "
          f"' (must be from 0 to {GPU_MILLI_MAX}: thousandths of one GPU)' END"),
    whole_check("num_gpu", "GPUs"),
]


def _with_trace_end(rows: str) -> str:
    """The pod list's rows with the trace end (the largest deletion_time within the time
    bounds) on every row."""
    d = num("deletion_time")
    return (f"(SELECT *, max(CASE WHEN {d} BETWEEN {TIME_MIN_S!r} AND {TIME_MAX_S!r} THEN {d} "
            f"END) OVER () AS _trace_end FROM {rows})")


def plans(con: duckdb.DuckDBPyConnection, paths: list[Path],
          mapping: Mapping[str, str] | None) -> list[Plan]:
    out = file_plans(con, paths, mapping, NAME, REQUIRED, lambda _: FIELDS,
                     lambda _, __: CENSORED, checks_of=lambda _: list(CHECKS),
                     over=_with_trace_end)
    mapped = set(mapping or {})
    said: dict[Path, str] = {}  # the node list's sentence, read once per folder
    for plan in out:  # the notes read the release's columns: not where --map replaces them
        pods = Path(plan.file)
        if not mapped & {"n_gpus", "gpu_type"}:
            if pods.parent not in said:
                said[pods.parent] = _node_list_text(con, pods.parent)
            if said[pods.parent]:
                plan.notes.append((f"SELECT count(*) FROM {table_relation(pods)} WHERE "
                                   f"{_GPUS} > 0 AND NULLIF(trim(COALESCE(CAST(gpu_spec AS "
                                   "VARCHAR), '')), '') IS NULL", said[pods.parent]))
        if "qos" in plan.spelling:  # the file's own columns, as file_plans read them
            plan.notes.append((f"SELECT count(*) FROM {table_relation(pods)} "
                               "WHERE upper(trim(CAST(qos AS VARCHAR))) = 'LS'",
                               "pod(s) of QoS class LS (latency-sensitive) are stored as jobs "
                               "like the best-effort (BE) ones: the pod list does not say which "
                               "pods train"))
    return out


NODE_LIST = "openb_node_list*.csv"
"""The release's node list, read beside a pod list for :func:`_node_list_text` alone."""


def _node_list_text(con: duckdb.DuckDBPyConnection, folder: Path) -> str:
    """The note on the pods whose gpu_spec names no GPU model (any GPU; priced on the default
    node) where the release's node list lies in ``folder``, beside the pod list: the GPU model
    most of the cluster's GPUs are (``sum(gpu)`` by ``model``), so that the user can price
    them there (a ``--catalog`` file's ``[defaults] node``); "" without a node list or a
    model."""
    lists = sorted(folder.glob(NODE_LIST))
    if not lists:
        return ""
    try:
        rows = con.execute(f"SELECT model, sum(TRY_CAST(gpu AS DOUBLE)) AS g FROM "
                           f"{table_relation(lists[0])} GROUP BY model ORDER BY g DESC, model"
                           ).fetchall()
    except READ_ERRORS:
        return ""
    rows = [(str(m), float(g)) for m, g in rows if m and g]
    if not rows:
        return ""
    total = sum(g for _, g in rows)
    model, most = rows[0]
    from traincast.hardware.catalog import load_catalog

    try:
        priced = load_catalog().gpu_name(model)
    except KeyError:
        priced = ""
    return (f"pod(s) with GPUs whose gpu_spec names no model (any GPU) are priced on the "
            f"default node; the release's node list beside it, {lists[0].name}, holds mostly "
            f"{model} GPUs ({most:,.0f} of {total:,.0f}"
            + (f"; priced as {priced}, the catalog's name for it" if priced and priced != model
               else "") + "): a --catalog file with [defaults] node = a preset of that GPU "
            "prices them there (traincast hardware list; docs/hardware.md)")
