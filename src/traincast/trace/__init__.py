"""Cluster traces: canonical job table (``schema``), adapters per public trace format
(``adapters``), the DuckDB store (``store``), the bundled synthetic sample (``sample``).

Reading jobs::

    jobs = read_trace("cluster04.csv", format="elasticflow")        # in memory
    jobs = read_trace(["pai/"], format="pai-2020", db="jobs.duckdb") # kept in a store file
    with Store("jobs.duckdb") as store:                                # the whole store
        store.ingest(paths, format="philly")
        jobs = store.jobs()

The job table holds the trace's facts only. Helpers that fill what the trace does not say:

* :func:`infer_architecture` — an architecture for jobs whose trace gives none
  (:data:`~traincast.trace.schema.INFER_RULE`, flag ``arch_inferred``);
* :func:`fill_features` — fill unknown features and batch size from the zoo profile of each
  job's ``workload``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from traincast.trace.schema import FEATURE_COLUMNS
from traincast.trace.store import Store, ingest, load_jobs, read_trace

if TYPE_CHECKING:
    from traincast.hardware.catalog import Catalog

__all__ = ["DEFAULT_WORKLOAD", "MIX", "NO_WORKLOAD", "Store", "default_workload",
           "fill_features", "flag_oversize", "infer_architecture", "ingest",
           "job_hash", "load_jobs", "mix_workloads", "parse_mapping", "prepare_jobs",
           "read_trace", "workload_assumption"]


def parse_mapping(items: Sequence[str] | None) -> dict[str, str]:
    """``["gpu_type=model", ...]`` (``--map COL=FIELD``) -> ``{"gpu_type": "model"}``. COL (in
    any case) must be a canonical column a file can give
    (``adapters.base.check_mapped_column``), checked before the file is read, so that a
    misspelt name is named as such; one COL given two FIELDs is an error."""
    from traincast.errors import TraincastError
    from traincast.trace.adapters.base import check_mapped_column

    out: dict[str, str] = {}
    for item in items or []:
        col, sep, field = item.partition("=")
        if not sep or not col.strip() or not field.strip():
            raise TraincastError(f"--map {item!r}: expected COL=FIELD",
                                 hint="e.g. --map n_gpus=num_gpu")
        col = col.strip().lower()
        check_mapped_column(col, field.strip())
        if col in out and out[col] != field.strip():
            raise TraincastError(f"--map {col}: given twice, as {out[col]!r} and "
                                 f"{field.strip()!r}", hint=f"keep one --map {col}=FIELD")
        out[col] = field.strip()
    return out


def infer_architecture(jobs: pa.Table, catalog: Catalog | None = None) -> pa.Table:
    """Fill a null ``architecture`` by the rule of :func:`traincast.resolve.resolve` (the one
    place it lives; :data:`~traincast.trace.schema.INFER_RULE` says it in words), read from the
    node sizes alone (:func:`traincast.resolve.architecture_codes`: no links, features or
    checks). Rows whose trace gives an architecture, or no GPU count, are kept as they are."""
    return _infer_architecture(jobs, catalog)[0]


def _infer_architecture(jobs: pa.Table, catalog: Catalog | None = None
                        ) -> tuple[pa.Table, tuple[np.ndarray, np.ndarray] | None]:
    """:func:`infer_architecture`'s table, and each row's GPUs per node and GPU memory (GB)
    where it looked them up in the catalog (:func:`traincast.resolve.node_gpus_and_memory_of`;
    None where no row needed an architecture), for :func:`flag_oversize` to take."""
    if jobs.num_rows == 0 or "architecture" not in jobs.column_names \
            or jobs["architecture"].null_count == 0:
        return jobs, None
    from traincast.architectures import ARCHITECTURES
    from traincast.hardware.catalog import load_catalog
    from traincast.jobs import Columns
    from traincast.resolve import architecture_codes, node_gpus_and_memory_of

    cat = catalog or load_catalog()
    cols = Columns.of(jobs)
    hardware = node_gpus_and_memory_of(cols, cat)
    codes = architecture_codes(cols, cat, node_gpus=hardware[0])
    names = np.array([*ARCHITECTURES, None], dtype=object)[codes]
    merged = pc.coalesce(jobs["architecture"], pa.array(names, type=pa.string()))
    return jobs.set_column(jobs.column_names.index("architecture"), "architecture",
                           merged), hardware


def _workload_features(name: str) -> dict[str, Any] | None:
    from traincast.zoo.profiles import workload_features

    return workload_features(name)


MIX = "mix"
"""``--workload mix``: the bundled sample's workload mix, drawn per job (:func:`mix_workloads`)."""
NO_WORKLOAD = "none"
"""``--workload none``: assume nothing; jobs whose trace names no workload stay unpredicted."""
DEFAULT_WORKLOAD = MIX
"""What the CLI assumes for jobs whose trace names no workload (docs/traces.md)."""
ASSUMED_COLUMN = "workload_assumed"
"""Boolean column :func:`default_workload` adds: the job's workload was assumed, not read."""
OVERSIZE_COLUMN = "workload_exceeds_gpu_memory"
"""Boolean column :func:`prepare_jobs` adds for a named workload: the job's assumed workload
needs more memory per GPU than its GPU has (:func:`flag_oversize`; priced as if it fit)."""


def job_hash(jobs: pa.Table) -> np.ndarray:
    """A stable 64-bit hash per job: the first 16 hex digits of ``md5(job_id)`` (Python:
    ``int(hashlib.md5(job_id.encode()).hexdigest()[:16], 16)``); a job without an id hashes
    its row number (``"row N"``, from 0)."""
    import duckdb

    ids = pc.cast(jobs["job_id"], pa.string()) if "job_id" in jobs.column_names \
        else pa.nulls(jobs.num_rows, pa.string())
    rows = pc.cast(pa.array(np.arange(jobs.num_rows)), pa.string())
    key = pa.table({"k": pc.coalesce(ids, pc.binary_join_element_wise("row ", rows, ""))})
    con = duckdb.connect()
    try:
        con.register("k", key)
        out = con.execute("SELECT ('0x' || substr(md5(k), 1, 16))::UBIGINT AS h FROM k"
                          ).fetchnumpy()["h"]
    finally:
        con.close()
    return np.asarray(out, dtype=np.uint64)


def mix_workloads(jobs: pa.Table, catalog: Catalog | None = None,
                  rows: np.ndarray | None = None) -> np.ndarray:
    """The ``mix`` workload of every job (None outside ``rows``, a boolean mask): the bundled
    sample's mix (:data:`traincast.trace.sample.SAMPLE_ZOO`, uniform over the models whose
    training replica fits the memory of the GPU the job resolves to:
    :func:`traincast.trace.sample.pick_workloads`), model ``sorted(fitting)[h % k]`` with ``h``
    = :func:`job_hash` and ``k`` the models that fit. Deterministic per job id, independent of
    the other jobs and their order; the job keeps its own GPUs, type and placement."""
    from traincast.hardware.catalog import load_catalog
    from traincast.resolve import resolve
    from traincast.trace.sample import pick_workloads, zoo_workloads

    if "architecture" not in jobs.column_names:  # only the hardware rule is used here
        jobs = jobs.append_column("architecture", pa.nulls(jobs.num_rows, pa.string()))
    # one group per GPU memory size (NaN: unknown GPU, one group too)
    mem, groups = np.unique(resolve(jobs, catalog or load_catalog()).mem_gb,
                            return_inverse=True)
    if rows is not None:
        groups = np.where(rows, groups, -1)
    h = job_hash(jobs)
    return pick_workloads(groups, mem.tolist(), zoo_workloads(),
                          lambda k, sel: (h[sel] % np.uint64(k)).astype(np.int64))


def default_workload(jobs: pa.Table, workload: str, catalog: Catalog | None = None) -> pa.Table:
    """``workload`` for every job with GPUs whose trace gives neither a workload nor its
    features (FLOPs, memory-bound bytes, weight bytes): a zoo model or workload tag,
    or :data:`MIX` (:func:`mix_workloads`); :data:`NO_WORKLOAD` leaves the jobs as they are.
    Marks those jobs in the boolean column :data:`ASSUMED_COLUMN` (counted by
    :func:`workload_assumption`). Jobs with 0 GPUs (or none recorded) get none: they do not
    train on GPUs."""
    from traincast.errors import TraincastError
    from traincast.features.io import REQUIRED
    from traincast.zoo.profiles import resolve_workload

    name = str(workload).strip().lower()
    if name == NO_WORKLOAD:
        return jobs
    if name != MIX and resolve_workload(workload) is None:
        raise TraincastError(f"--workload {workload}: not a zoo model or workload tag",
                             hint=f"traincast zoo list shows the names; {MIX} = the bundled "
                             f"sample's mix, {NO_WORKLOAD} = assume nothing")
    has = "workload" in jobs.column_names
    col = jobs["workload"] if has else pa.nulls(jobs.num_rows, pa.string())
    empty = pc.fill_null(pc.or_kleene(pc.is_null(col),
                                      pc.equal(pc.utf8_trim_whitespace(col), "")), True)
    if "n_gpus" in jobs.column_names:
        empty = pc.and_(empty, pc.fill_null(pc.greater(jobs["n_gpus"], 0), False))
    if all(c in jobs.column_names for c in REQUIRED):  # given features need no workload
        missing = [pc.is_null(jobs[c], nan_is_null=True) for c in REQUIRED]
        empty = pc.and_(empty, reduce(pc.or_, missing))
    mask = np.asarray(empty.to_numpy(zero_copy_only=False), dtype=bool)
    if name == MIX:
        fill = pa.array(mix_workloads(jobs, catalog, mask), type=pa.string())
    else:
        fill = pa.scalar(str(workload))
    flag = pa.array(mask)
    filled = pc.if_else(flag, fill, col)
    jobs = jobs.set_column(jobs.column_names.index("workload"), "workload", filled) if has \
        else jobs.append_column("workload", filled)
    return _or_column(jobs, ASSUMED_COLUMN, flag)


def _or_column(jobs: pa.Table, column: str, values: pa.Array) -> pa.Table:
    """``jobs`` with the boolean ``column`` set to ``values``, or to its own values or
    ``values`` where it exists already."""
    if column in jobs.column_names:
        values = pc.or_(pc.fill_null(jobs[column], False), values)
        return jobs.set_column(jobs.column_names.index(column), column, values)
    return jobs.append_column(column, values)


def flag_oversize(jobs: pa.Table, catalog: Catalog | None = None,
                  hardware: tuple[np.ndarray, np.ndarray] | None = None) -> pa.Table:
    """Mark in :data:`OVERSIZE_COLUMN` the jobs of :data:`ASSUMED_COLUMN` whose workload needs
    more memory per GPU than their GPU has, by the rule the what-if scenarios apply to a port
    (``engine.workload.WorkloadExtras.footprint_bytes``: each architecture's footprint of the
    workload's weights, gradients, optimizer state and activations scaled to the job's batch,
    against ``mem_gb``; an unknown GPU or footprint is not flagged). They are priced as if it
    fit. Run on features filled (:func:`fill_features`). ``hardware``: each row's GPUs per
    node and GPU memory (GB) as :func:`prepare_jobs` has them from the architectures'
    inference, else looked up here (:func:`traincast.resolve.node_gpus_and_memory_of`)."""
    from traincast.engine.workload import workload_extras
    from traincast.hardware.catalog import load_catalog
    from traincast.jobs import Columns
    from traincast.resolve import architecture_codes, node_gpus_and_memory_of, training_gpus

    over = np.zeros(jobs.num_rows, dtype=bool)
    if ASSUMED_COLUMN in jobs.column_names and jobs.num_rows:
        assumed = np.asarray(pc.fill_null(jobs[ASSUMED_COLUMN], False).to_numpy(
            zero_copy_only=False), dtype=bool)
        if assumed.any():  # the assumed rows alone are resolved
            cols = Columns.of(jobs.filter(pa.array(assumed)))
            cat = catalog or load_catalog()
            node_gpus, mem_gb = node_gpus_and_memory_of(cols, cat) if hardware is None \
                else (hardware[0][assumed], hardware[1][assumed])
            arch = architecture_codes(cols, cat, node_gpus=node_gpus)
            need = workload_extras(cols).footprint_bytes(arch, training_gpus(cols))
            with np.errstate(invalid="ignore"):
                over[assumed] = need > mem_gb * 1e9  # NaN: not checked
    return _or_column(jobs, OVERSIZE_COLUMN, pa.array(over))


def workload_assumption(jobs: pa.Table, workload: str | None) -> dict[str, Any] | None:
    """What :func:`default_workload` assumed: ``{"workload": the name given, "jobs": jobs
    that got it, "by_workload": {model: jobs}, "exceeds_gpu_memory": those of them whose GPU
    has less memory than the named workload needs per GPU (:func:`flag_oversize`)}``; None
    when nothing was assumed."""
    if workload is None or ASSUMED_COLUMN not in jobs.column_names:
        return None
    mask = np.asarray(pc.fill_null(jobs[ASSUMED_COLUMN], False).to_numpy(
        zero_copy_only=False), dtype=bool)
    if not mask.any():
        return None
    names = pc.filter(jobs["workload"], pa.array(mask)).value_counts()
    counts = sorted(((str(v["values"]), int(v["counts"])) for v in names.to_pylist()),
                    key=lambda kv: (-kv[1], kv[0]))
    over = int(np.asarray(pc.fill_null(jobs[OVERSIZE_COLUMN], False).to_numpy(
        zero_copy_only=False), dtype=bool)[mask].sum()) \
        if OVERSIZE_COLUMN in jobs.column_names else 0
    return {"workload": str(workload), "jobs": int(mask.sum()), "by_workload": dict(counts),
            "exceeds_gpu_memory": over}


def fill_features(jobs: pa.Table) -> pa.Table:
    """Fill null features and batch size from the zoo profile of each job's ``workload``.

    Values given in the trace are kept; jobs whose workload is unknown to the zoo keep NULL
    features (their predicted times are then unknown). One profile lookup per distinct workload.
    """
    if "workload" not in jobs.column_names or jobs.num_rows == 0:
        return jobs
    enc = pc.cast(jobs["workload"], pa.string()).combine_chunks().dictionary_encode()
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    names = enc.dictionary.to_pylist()
    profiles = [_workload_features(n) if n else None for n in names]
    if not any(profiles):
        return jobs
    for col in (*FEATURE_COLUMNS, "batch_size"):
        lut = np.array([np.nan if not p or p.get(col) is None else float(p[col])
                        for p in profiles] + [np.nan])
        fill = lut[codes]
        if col in jobs.column_names:
            cur = jobs[col].to_numpy(zero_copy_only=False).astype(np.float64)
            idx = jobs.column_names.index(col)
        else:
            cur = np.full(jobs.num_rows, np.nan)
            idx = -1
        merged = np.where(np.isnan(cur), fill, cur)
        typ = pa.int64() if col == "batch_size" else pa.float64()
        arr = pa.array(merged, type=pa.float64(), from_pandas=True).cast(typ)
        jobs = jobs.set_column(idx, col, arr) if idx >= 0 else jobs.append_column(col, arr)
    return jobs


def prepare_jobs(jobs: pa.Table, catalog: Catalog | None = None,
                 workload: str | None = None) -> pa.Table:
    """A trace's jobs ready for the model: missing architectures inferred
    (:func:`infer_architecture`), ``workload`` given to jobs whose trace names none
    (:func:`default_workload`: a zoo model, :data:`MIX` or :data:`NO_WORKLOAD`; None = nothing
    assumed), unknown features filled from the workloads' zoo profiles (:func:`fill_features`),
    and for a named workload the jobs it does not fit marked (:func:`flag_oversize`).
    """
    jobs, hardware = _infer_architecture(jobs, catalog)
    if not workload:
        return fill_features(jobs)
    jobs = fill_features(default_workload(jobs, workload, catalog))
    if str(workload).strip().lower() in (MIX, NO_WORKLOAD):
        return jobs  # the mix draws models each job's GPU holds
    return flag_oversize(jobs, catalog, hardware)  # the GPUs the inference looked up
