"""The bundled sample trace: a synthetic cluster built from published statistics.

It is not a real trace. ``generate(jobs, seed)`` draws a deterministic job table (canonical
columns) from small count tables derived from real public traces (``stats.json``, written by
``scripts/derive_sample_stats.py``) and the parameters in :data:`PARAMS`; ``sample.parquet``
beside this file is ``generate()`` with the defaults, shipped so ``traincast study`` runs with
no input. Every assumption and its source: docs/sample.md.

Per job: architecture (PS/Worker with probability ``ps_job_share``; the rest by GPU count:
1 GPU -> 1w1g, within one node of its GPU type -> allreduce-local, more -> allreduce-cluster);
GPUs (non-PS: the pod-list GPU counts; PS/Worker: 1 GPU per worker, worker counts 2^k with
geometric weights solved so PS/Worker jobs hold ``ps_gpu_share`` of all GPUs); parameter
servers ``ceil(workers × ps_per_worker)``; GPU type (PAI 2020 GPUs per type); duration
(ElasticFlow durations of the job's GPU-count class, log-uniform inside a bin); submission
(Poisson arrivals at the ElasticFlow rate; start = submission); workload (uniform over the zoo's
models whose training replica fits the job's GPU memory). Features are left NULL: they come
from the workload's zoo profile.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.trace.schema import COLUMNS, SCHEMA

HERE = Path(__file__).parent
DEFAULT_JOBS = 3000
DEFAULT_SEED = 2019
PARAMS: dict[str, float] = {
    # Wang et al., IISWC 2019 (PAI), as summarized in secondary sources: PS/Worker jobs are
    # about 29% of jobs but use about 81% of the GPU resources.
    "ps_job_share": 0.29,
    "ps_gpu_share": 0.81,
    # assumption (no public per-job PS count in the files used here): one PS per 4 workers
    "ps_per_worker": 0.25,
    # PS/Worker worker counts: 2, 4, ..., 2^max_worker_log2
    "max_worker_log2": 7,
}


def sample_path() -> Path:
    """The shipped sample trace (Parquet, canonical columns; read with ``--format csv``)."""
    return HERE / "sample.parquet"


@cache
def load_stats() -> dict[str, Any]:
    """The count tables derived from the real traces (with their sources)."""
    return json.loads((HERE / "stats.json").read_text())


def _draw(rng: np.random.Generator, values: list[Any], counts: list[float], n: int) -> Any:
    p = np.asarray(counts, dtype=np.float64)
    return np.asarray(values)[rng.choice(len(values), size=n, p=p / p.sum())]


def worker_weights(target_mean: float, max_log2: int) -> tuple[np.ndarray, np.ndarray]:
    """Worker counts ``2^k`` (k = 1..max_log2) with weights ``r^k``, r solved by bisection so
    that the mean is ``target_mean`` (clipped to the reachable range)."""
    values = 2.0 ** np.arange(1, max_log2 + 1)
    k = np.arange(1, max_log2 + 1)

    def mean(r: float) -> float:
        w = r ** k
        return float((w * values).sum() / w.sum())

    lo, hi = 1e-6, 1e6
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if mean(mid) < target_mean else (lo, mid)
    w = math.sqrt(lo * hi) ** k
    return values, w / w.sum()


def _durations(rng: np.random.Generator, n_gpus: np.ndarray, stats: dict[str, Any]) -> np.ndarray:
    edges = np.log10(np.asarray(stats["bin_edges_s"], dtype=np.float64))
    out = np.empty(len(n_gpus))
    for cls in stats["classes"].values():
        hi = cls["max_gpus"] if cls["max_gpus"] is not None else np.inf
        sel = (n_gpus >= cls["min_gpus"]) & (n_gpus <= hi)
        if not sel.any():
            continue
        counts = np.asarray(cls["count"], dtype=np.float64)
        b = rng.choice(len(counts), size=int(sel.sum()), p=counts / counts.sum())
        out[sel] = 10.0 ** rng.uniform(edges[b], edges[b + 1])
    return np.round(out)


# The zoo models the bundled sample draws from (fixed, so that a new zoo model does not change
# the shipped sample).
SAMPLE_ZOO = ("bert-base", "bert-large", "dlrm", "gcn", "gpt2", "gpt2-xl", "llama-7b",
              "mobilenet-v2", "multi-interest", "resnet50", "speech", "transformer-nmt", "vit-b16")


def replica_gb(workload: str) -> float:
    """The memory one training replica of a zoo model or workload tag needs (GB: weights,
    gradients, optimizer state and activations of its profile at the default batch; NaN when
    unknown)."""
    from traincast.zoo.profiles import workload_features

    record = workload_features(workload) or {}
    mem = record.get("memory_bytes") or {}
    total = sum(float(v) for v in mem.values() if v is not None)
    return total / 1e9 if total > 0 else float("nan")


def zoo_workloads() -> dict[str, float]:
    """The sample's zoo models (``SAMPLE_ZOO``) and the memory one training replica needs
    (:func:`replica_gb`)."""
    return {name: replica_gb(name) for name in sorted(SAMPLE_ZOO)}


def pick_workloads(groups: NDArray[np.integer], group_mem_gb: Sequence[float],
                   memory_gb: Mapping[str, float],
                   draw: Callable[[int, NDArray[np.bool_]], NDArray[np.integer]]
                   ) -> NDArray[np.object_]:
    """A workload per job, uniform over those whose replica fits its GPU's memory (all of them
    when none fits or memory is unknown): the workload mix of the bundled sample, and of the
    ``--workload mix`` default of jobs whose trace names none (:func:`traincast.trace.
    default_workload`).

    ``groups``: each job's group (its GPU type, or its GPU's memory size) as an index into
    ``group_mem_gb`` (the group's GPU memory in GB, NaN unknown); -1 = no workload.
    ``draw(k, rows)``: an index in ``0..k-1`` for each of the jobs ``rows`` of one group
    (groups in index order): the sample's random generator, or a hash of the job id."""
    names = sorted(memory_gb)
    out = np.full(len(groups), None, dtype=object)
    if not names:
        return out
    mem = np.array([memory_gb[n] for n in names], dtype=np.float64)
    every = np.asarray(names, dtype=object)
    for g in np.unique(groups[groups >= 0]):
        sel = groups == g
        fits = ~(mem > group_mem_gb[int(g)])  # NaN (unknown) counts as fitting
        pool = every[fits] if fits.any() else every
        out[sel] = pool[draw(len(pool), sel)]
    return out


def _workloads(rng: np.random.Generator, gpu_type: np.ndarray, memory_gb: dict[str, float],
               catalog: Catalog) -> np.ndarray:
    """The sample's workload per job (:func:`pick_workloads`, drawn by ``rng`` per GPU type)."""
    types, groups = np.unique(gpu_type.astype(str), return_inverse=True)
    return pick_workloads(groups, [catalog.gpu(t).mem_gb for t in types], memory_gb,
                          lambda k, sel: rng.integers(0, k, int(sel.sum())))


def generate(jobs: int = DEFAULT_JOBS, seed: int = DEFAULT_SEED, *,
             workloads: list[str] | dict[str, float] | None = None,
             catalog: Catalog | None = None, params: dict[str, float] | None = None) -> pa.Table:
    """A deterministic synthetic job table (same ``jobs``, ``seed``, workloads -> same rows).

    ``workloads``: names (memory unknown), or name -> replica memory in GB; default: the zoo's
    (:func:`zoo_workloads`).
    """
    if jobs < 1:
        raise TraincastError(f"jobs: a sample needs at least 1 job, got {jobs}",
                             hint="traincast sample --jobs N with N >= 1")
    p = {**PARAMS, **(params or {})}
    stats = load_stats()
    catalog = catalog or load_catalog()
    if workloads is None:
        workloads = zoo_workloads()
    memory_gb = (dict(workloads) if isinstance(workloads, dict)
                 else dict.fromkeys(workloads, float("nan")))
    rng = np.random.default_rng(seed)
    n_ps_jobs = int(round(p["ps_job_share"] * jobs))
    is_ps = np.zeros(jobs, dtype=bool)
    is_ps[rng.choice(jobs, size=n_ps_jobs, replace=False)] = True
    sizes = stats["gpus_per_job"]
    gpus = _draw(rng, sizes["value"], sizes["count"], jobs).astype(np.float64)
    other = gpus[~is_ps]
    # PS/Worker jobs hold ps_gpu_share of all GPUs: their mean = s/(1-s) * (others' total)/n_ps
    target = (p["ps_gpu_share"] / (1 - p["ps_gpu_share"]) * other.sum() / max(n_ps_jobs, 1))
    values, weights = worker_weights(target, int(p["max_worker_log2"]))
    workers = np.where(is_ps, rng.choice(values, size=jobs, p=weights), 0.0)
    gpus = np.where(is_ps, workers, gpus)
    types = stats["gpu_type_gpus"]
    gpu_type = _draw(rng, types["value"], types["count"], jobs)
    node_gpus = np.array([catalog.node(catalog.default_node_of(t)).gpus for t in gpu_type],
                         dtype=np.float64)
    arch = np.where(is_ps, "ps-worker",
                    np.where(gpus <= 1, "1w1g",
                             np.where(gpus <= node_gpus, "allreduce-local", "allreduce-cluster")))
    duration = _durations(rng, gpus, stats["duration_s"])
    submit = np.round(np.cumsum(rng.exponential(1.0 / stats["arrivals_per_s"]["value"], jobs)))
    workload = _workloads(rng, gpu_type, memory_gb, catalog)
    n_ps = np.where(is_ps, np.ceil(workers * p["ps_per_worker"]), np.nan)
    cols: dict[str, Any] = {
        "job_id": [f"sample-{i:05d}" for i in range(jobs)],
        "submit_time_s": submit, "start_time_s": submit, "end_time_s": submit + duration,
        "status": ["Terminated"] * jobs, "architecture": arch, "n_gpus": gpus,
        "n_workers": np.where(is_ps, workers, np.where(arch == "1w1g", 1, np.nan)),
        "n_ps": n_ps, "gpus_per_worker": np.where(is_ps, 1.0, np.nan),
        "gpu_type": gpu_type, "workload": workload,
    }
    arrays = []
    for name in COLUMNS:
        typ = SCHEMA.field(name).type
        v = cols.get(name)
        arrays.append(pa.nulls(jobs, typ) if v is None else
                      pa.array(v, from_pandas=True).cast(typ))
    return pa.Table.from_arrays(arrays, names=list(COLUMNS))


def write(path: str | Path, jobs: int = DEFAULT_JOBS, seed: int = DEFAULT_SEED) -> Path:
    """Generate and write a sample trace, as its name says (:func:`table_kind`: .csv,
    .csv.gz, .parquet, .pq)."""
    kind = table_kind(path)  # before generating
    return write_table(generate(jobs, seed), path, kind)


TABLE_KINDS: dict[str, str] = {".csv": "csv", ".csv.gz": "csv.gz", ".parquet": "parquet",
                               ".pq": "parquet"}
"""The job-table files ``write_table`` writes, by how the name ends (what ``ingest`` reads)."""


def table_kind(path: str | Path) -> str:
    """``csv``, ``csv.gz`` or ``parquet``, by how the file name ends (any case); another name
    is a :class:`~traincast.errors.TraincastError` naming it (a ``.txt`` would be written as
    Parquet and then read as text)."""
    name = Path(path).name.lower()
    for end in sorted(TABLE_KINDS, key=len, reverse=True):
        if name.endswith(end):
            return TABLE_KINDS[end]
    raise TraincastError(f"{path}: a job table file ends in .csv, .csv.gz, .parquet or .pq",
                         hint="name the file by the format it is to hold, e.g. sample.parquet")


def write_table(table: pa.Table, path: str | Path, kind: str | None = None) -> Path:
    """Write a job table as ``kind`` (:func:`table_kind`; default: by ``path``'s name): CSV,
    gzipped CSV or Parquet."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    path = Path(path)
    kind = kind or table_kind(path)
    if kind == "csv":
        pacsv.write_csv(table, path)
    elif kind == "csv.gz":
        with pa.CompressedOutputStream(str(path), "gzip") as out:
            pacsv.write_csv(table, out)
    else:
        pq.write_table(table, path)
    return path
