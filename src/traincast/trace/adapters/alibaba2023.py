"""``--format alibaba-2023``: the Alibaba GPU cluster pod list (``openb_pod_list_*.csv``).

Mapping: ``job_id`` = name; ``submit_time_s`` = creation_time; ``start_time_s`` =
scheduled_time (NULL for Pending pods, which never started); ``end_time_s`` = deletion_time;
``status`` = pod_phase; ``n_gpus`` = num_gpu × gpu_milli / 1000 (gpu_milli is the share of each
GPU: 1 GPU at 460 milli = 0.46 GPU, flagged ``fractional_gpu``; CPU pods have 0 GPUs, flagged
``zero_gpu``); ``gpu_type`` = the first model listed in gpu_spec (the models a pod may run on,
``|``-separated; empty = any, left NULL); ``gpus_per_node`` = n_gpus for pods with GPUs (a pod
runs on one node; NULL for CPU pods); ``workers_per_node`` NULL (a pod's processes are not
listed); no architecture (inferred from the GPU count).
Censored: pod_phase Running or Pending, or deletion_time equal to the file's largest
deletion_time (the trace end).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import duckdb

from traincast.trace.adapters.base import (
    Field,
    Plan,
    file_plans,
    num,
    running_status,
    table_relation,
    text,
)

NAME = "alibaba-2023"
REQUIRED = ("name", "num_gpu", "gpu_milli", "gpu_spec", "pod_phase", "creation_time",
            "deletion_time", "scheduled_time")
_GPUS = f"{num('num_gpu')} * COALESCE({num('gpu_milli')}, 1000) / 1000.0"
FIELDS = {
    "job_id": Field(text("name")),
    "submit_time_s": Field(num("creation_time"), "creation_time"),
    "start_time_s": Field(f"CASE WHEN lower(pod_phase) = 'pending' THEN NULL "
                          f"ELSE {num('scheduled_time')} END", "scheduled_time"),
    "end_time_s": Field(num("deletion_time"), "deletion_time"),
    "status": Field(text("pod_phase")),
    "n_gpus": Field(_GPUS, "num_gpu"),
    "gpu_type": Field("NULLIF(split_part(COALESCE(gpu_spec, ''), '|', 1), '')"),
    "gpus_per_node": Field(f"CASE WHEN {_GPUS} > 0 THEN {_GPUS} END"),
}
CENSORED = f"({running_status('pod_phase')} OR {num('deletion_time')} >= _trace_end)"


def _relation(path: Path) -> str:
    """The pod list with the trace end (the largest deletion_time) on every row."""
    return (f"(SELECT *, max({num('deletion_time')}) OVER () AS _trace_end "
            f"FROM {table_relation(path)})")


def plans(con: duckdb.DuckDBPyConnection, paths: list[Path],
          mapping: Mapping[str, str] | None) -> list[Plan]:
    return file_plans(con, paths, mapping, NAME, REQUIRED, lambda _: FIELDS,
                      lambda _, __: CENSORED, relation=_relation, probe=table_relation)
