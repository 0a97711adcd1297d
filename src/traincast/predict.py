"""Predict iteration time: resolve jobs (:mod:`traincast.resolve`), price their communication
by architecture (:mod:`traincast.architectures`) and their compute by the strategy the catalog
selects (:mod:`traincast.compute`), then add the parts (:mod:`traincast.model`).

* ``predict_table(jobs, catalog)`` — a job table (dict of columns, Arrow, DataFrame), each row
  with its own architecture, GPU type, node and placement; vectorized over millions of rows.
* ``predict(...)`` — one job: builds a one-row table and calls ``predict_table``; returns a
  :class:`Prediction`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from numbers import Real
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast import compute, kernels
from traincast.architectures import ARCH_LABEL, REGISTRY, Memory, per_architecture
from traincast.errors import TraincastError
from traincast.features.io import check_record
from traincast.files import to_jsonable
from traincast.hardware.catalog import GPU, Catalog, Link, load_catalog
from traincast.jobs import FEATURES, STEP_COLUMNS, Columns, Strings
from traincast.model import (
    BOTTLENECK_LABEL,
    COMPONENTS,
    Breakdown,
    data_time_s,
    total_time_s,
)
from traincast.resolve import NOT_FINITE, OK, Resolved, explain, resolve, resolve_link
from traincast.roofline import op_runs, table_features

F = NDArray[np.float64]


def comm_s(r: Resolved) -> F:
    """``T_comm`` of every row by its architecture's rule (NaN for unknown architectures)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return per_architecture(r.arch, lambda a, rows: a.comm_s(r.take(rows)), np.nan)


OpsOf = Callable[[str], Mapping[str, Any] | None]
"""A workload's profile with its per-op table (``ops``), or None: how a job table's rows find
the table they are priced op by op from (:func:`zoo_ops`: the shipped ones)."""


def compute_s(r: Resolved, catalog: Catalog, strategy: str = "auto",
              workload: Strings | None = None,
              ops_of: OpsOf | None = None
              ) -> tuple[F, F, F | None]:
    """``(T_comp_flop, T_comp_mem, T_idle)`` of every row; NaN for rows whose GPU is unknown.
    ``T_idle`` is the part of the other two during which the GPU waits for the host to issue
    its ops (``None`` when it is 0 on every row).

    A job that holds a share ``s < 1`` of its GPU (``r.share``: GPU sharing, a slice of the
    GPU's time, SMs and memory bandwidth; its neighbours use the rest) runs its kernels at
    ``s`` of the GPU: ``F`` and ``B`` below are the row's features over ``s``, the host's
    dispatch of its ops unchanged.

    Aggregate features: ``F / R_flop`` and ``B / R_mem`` at the rates of
    :func:`traincast.compute.rates` (one call per GPU and precision), together no shorter than
    the host's issue of the row's ``n_ops`` ops, ``n_ops d`` (:func:`issue_bound_s`,
    :func:`host_floor_s`; a row without ``n_ops`` has no such bound).
    Rows whose workload has a per-op table (``ops_of(workload)`` returns a profile with
    ``ops``) are priced by :func:`traincast.compute.ops_compute_s` on their own GPU, once per
    (workload, GPU, precision) (:func:`ops_times`), scaled to the row's own features: the GPU's
    busy time on the profile's compute-bound ops ``u_F`` scales with ``a = F_row /
    F_profile``, on its memory-bound ops ``u_B`` with ``b = B_row / B_profile``; the host's
    dispatches do not scale, so the GPU's wait for them is the host queue of the scaled busy
    times, solved exactly at the nodes of ``IDLE_SCALES`` and linear in ``a`` and ``b``
    between them (``I(a, b)``); the total is split into FLOP- and memory-bound time as the
    profile's step is::

        T_comp      = a u_F + b u_B + I(a, b)
        T_comp_flop = T_comp t_flop / (t_flop + t_mem),  T_comp_mem = T_comp - T_comp_flop
        T_idle      = I(a, b)

    A row with the profile's own features gets ``t_flop`` and ``t_mem`` (``I(1, 1)`` is the
    profile's own queue); inside a grid cell ``T_comp`` is the weighted mean of the exact
    steps at its corners, each of which falls with a faster GPU, so the row's does too,
    whichever way its ops move between FLOP- and memory-bound.
    """
    strategy = catalog.compute if strategy == "auto" else strategy
    n_gpu = len(r.gpu.values)
    rates = np.full((2 * n_gpu + 1, 2), np.nan)  # (GPU, precision) -> FLOP/s, bytes/s
    floors = np.zeros(n_gpu + 1)  # GPU -> host floor d (the last: an unknown GPU, 0)
    known = np.array([name in catalog.gpus for name in r.gpu.values] + [False])
    for code in np.flatnonzero(known).tolist():
        gpu = catalog.gpus[r.gpu.values[code]]
        floors[code] = host_floor_s(gpu, strategy)
        for amp in (0, 1):
            rates[2 * code + amp] = compute.rates(gpu, "amp" if amp else "fp32", strategy)
    gpu_amp = np.where(r.gpu.codes < 0, 2 * n_gpu, r.gpu.codes.astype(np.int64) * 2 + r.amp)
    with np.errstate(over="ignore", invalid="ignore"):  # rows out of bounds have a reason
        flops, mem_bytes = r.flops / r.share, r.mem_bytes / r.share  # a shared GPU's slice
        flop, mem, idle = issue_bound_s(flops / rates[gpu_amp, 0],
                                        mem_bytes / rates[gpu_amp, 1],
                                        r.n_ops * floors[r.gpu.codes])
    if workload is None or ops_of is None:
        return flop, mem, _waits(idle)
    tables = ops_tables(workload, ops_of)
    cache = catalog.cache  # each table priced once per GPU, precision and strategy
    # rows priced op by op: a workload with a per-op table on a known GPU (the others: key -1)
    has_ops = np.array([i in tables for i in range(len(workload.values))] + [False])
    priced = has_ops[workload.codes] & known[r.gpu.codes]  # code -1: the appended False
    key = workload.codes.astype(np.int64) * (2 * n_gpu + 2) + gpu_amp
    rows = np.flatnonzero(priced)
    if not rows.size:
        return flop, mem, _waits(idle)
    # one step per (workload, GPU, precision), then every priced row at once
    present = np.zeros(len(workload.values) * (2 * n_gpu + 2), dtype=bool)
    present[key[rows]] = True  # keys are small: a dense map from key to group, no sort
    unique = np.flatnonzero(present)
    which = (np.cumsum(present) - 1)[key[rows]]
    steps, profile = [], []
    for k in unique.tolist():
        wl, rest = divmod(k, 2 * n_gpu + 2)
        code, amp = divmod(rest, 2)
        prof = tables[wl]
        key_ = ("ops", id(prof["ops"]), r.gpu.values[code], amp, strategy)
        if key_ not in cache:  # the table is kept with its step, so its id stays its own
            cache[key_] = (prof["ops"], ops_times(prof["ops"], catalog.gpus[r.gpu.values[code]],
                                                  "amp" if amp else "fp32", strategy))
        steps.append(cache[key_][1])
        profile.append((prof["flops_compute_bound"], prof["bytes_memory_bound"]))
    feats = np.array(profile, dtype=np.float64)
    flop[rows], mem[rows], idle[rows] = _scaled(steps, which, flops[rows], mem_bytes[rows],
                                                feats[:, 0], feats[:, 1])
    return flop, mem, _waits(idle)


def ops_tables(workload: Strings, ops_of: OpsOf) -> dict[int, Mapping[str, Any]]:
    """The profiles with a per-op table of a job table's workloads, by workload code: the rows
    :func:`compute_s` prices op by op (on a GPU of the catalog)."""
    return {i: p for i, p in enumerate(map(ops_of, workload.values)) if p and p.get("ops")}


def _waits(idle: F) -> F | None:
    """``T_idle``, or None where the GPU never waits (``compute_s``)."""
    return idle if np.any(idle > 0) else None


def host_floor_s(gpu: Any, strategy: str) -> float:
    """The host's time to issue one op under the GPU's strategy: the kernel model's floor ``d``
    (``kernels.op_floor_s``: an element-wise add's dispatch, the cheapest kind but a few) under
    ``kernel``; 0 under ``paper`` and ``curves``, which carry no per-op host time for
    aggregate features."""
    return kernels.op_floor_s(gpu) if compute.strategy_of(gpu, strategy) == "kernel" else 0.0


def issue_bound_s(flop_s: ArrayLike, mem_s: ArrayLike, host_s: ArrayLike) -> tuple[F, F, F]:
    """Aggregate compute no shorter than the host's issue of its ops: with ``H = n_ops d``
    (``host_s``; NaN = unknown, no bound) and ``T = T_flop + T_mem``, where ``H > T`` both
    parts grow by ``H / T`` (all of ``H`` memory-bound when ``T = 0``) and the GPU waits
    ``T_idle = H - T`` for the host; elsewhere nothing changes and ``T_idle = 0``. Returns
    ``(T_comp_flop, T_comp_mem, T_idle)``."""
    flop, mem = np.asarray(flop_s, dtype=np.float64), np.asarray(mem_s, dtype=np.float64)
    host = np.nan_to_num(np.asarray(host_s, dtype=np.float64), nan=0.0)
    busy = flop + mem
    idle = np.where(host > busy, host - busy, 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        grow = np.where((idle > 0) & (busy > 0), host / busy, 1.0)
    return flop * grow, np.where((idle > 0) & (busy <= 0), host, mem * grow), idle


IDLE_SCALES: NDArray[np.float64] = np.concatenate([[0.0], 2.0 ** np.arange(-6.0, 0.0, 0.25),
                                                   2.0 ** np.arange(0.0, 6.5, 0.5)])
"""Nodes of a profile's idle grid (:func:`ops_times`): the ratios of a row's features to its
profile's at which the host queue is solved exactly: 0, 1/64 to 1 in quarter octaves (where a
smaller job turns from GPU- to host-bound and the wait bends most), 1 to 64 in half octaves."""


class StepTimes(NamedTuple):
    """One profile's step on one GPU and precision (:func:`ops_times`)."""

    flop_s: float        # t_flop: FLOP-bound ops, with the GPU's waits before them
    mem_s: float         # t_mem: the others, alike
    busy_f_s: float      # GPU busy time of the ops the profile marks compute-bound
    busy_b_s: float      # GPU busy time of the others
    idle_grid_s: F       # GPU waits for the host with the busy times scaled (IDLE_SCALES)
    flat_from: float     # the wait is idle_grid_s[-1, -1] wherever a and b are both >= this


def ops_times(ops: list[Mapping[str, Any]], gpu: Any, dtype: str, strategy: str) -> StepTimes:
    """A profile's step from its per-op table (:func:`traincast.compute.ops_compute_s`): its
    FLOP- and memory-bound time, the GPU's busy time on the ops the profile counts as
    compute-bound (``bound = "compute"``, whose FLOPs make ``flops_compute_bound``; a table
    without marks: its FLOP-bound ops) and on the others, and the GPU's wait for the host with
    the first part's busy time times ``IDLE_SCALES[i]`` and the second's times
    ``IDLE_SCALES[j]`` (``kernels.queue_idle_grid_s``; zeros outside the kernel strategy)."""
    out = compute.ops_compute_s(ops, gpu, dtype, strategy, scales=IDLE_SCALES)
    busy = out["compute_flop"] + out["compute_mem"] - out["idle"]
    grid = out["idle_grid"]
    m = len(IDLE_SCALES) - 1  # the wait stops changing from node m on (a GPU-bound job)
    while m > 0 and (grid[m - 1:, m - 1:] == grid[-1, -1]).all():
        m -= 1
    return StepTimes(out["compute_flop"], out["compute_mem"], out["busy_marked"],
                     busy - out["busy_marked"], grid, float(IDLE_SCALES[m]))


def _scaled(steps: Sequence[StepTimes], which: NDArray[np.int64], flops: F, mem_bytes: F,
            profile_flops: F, profile_bytes: F) -> tuple[F, F, F]:
    """Rows' ``(T_comp_flop, T_comp_mem, T_idle)``, row ``i`` from the profile step
    ``steps[which[i]]`` (:func:`ops_times`) with features ``profile_flops[which[i]]``,
    ``profile_bytes[which[i]]`` (formulas in :func:`compute_s`). A profile feature of 0 gives
    no ratio to scale by: its part keeps the profile's time (``a = 1`` or ``b = 1``), so the
    profile's own row still gets its step."""
    grids = np.stack([t.idle_grid_s for t in steps])
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.array([t.flop_s / (t.flop_s + t.mem_s) if t.flop_s + t.mem_s > 0 else 0.0
                          for t in steps])
        pf, pb = profile_flops[which], profile_bytes[which]
        a = np.where(pf > 0, flops / pf, 1.0)
        b = np.where(pb > 0, mem_bytes / pb, 1.0)
        # the wait: its constant where the grid has stopped changing, else the grid's
        flat = np.array([t.flat_from for t in steps])[which]
        idle = grids[which, -1, -1]
        rest = np.flatnonzero(~((a >= flat) & (b >= flat)))  # NaN too: the grid gives NaN
        idle[rest] = _bilinear(grids, which[rest], IDLE_SCALES, a[rest], b[rest])
        total = (a * np.array([t.busy_f_s for t in steps])[which]
                 + b * np.array([t.busy_b_s for t in steps])[which] + idle)
        flop = total * share[which]
    return flop, total - flop, idle


def _bilinear(grids: F, which: NDArray[np.int64], nodes: F, x: F, y: F) -> F:
    """``grids[w, i, j]`` (grid ``w``'s value at ``(nodes[i], nodes[j])``) at points
    ``(x, y)`` of grid ``which``: linear in ``x`` and in ``y`` inside each cell, the edge's
    value beyond the last node::

        u = (x - x_i) / (x_{i+1} - x_i),  v = (y - y_j) / (y_{j+1} - y_j)   (clipped to [0, 1])
        f = (1-u)(1-v) g[i, j] + u (1-v) g[i+1, j] + (1-u) v g[i, j+1] + u v g[i+1, j+1]"""
    (i, u), (j, v) = _cells(x, nodes), _cells(y, nodes)
    flat, n = grids.reshape(-1), len(nodes)
    k = (which * n + i) * n + j  # grid[which, i, j]
    lo = flat[k] + v * (flat[k + 1] - flat[k])
    hi = flat[k + n] + v * (flat[k + n + 1] - flat[k + n])
    return lo + u * (hi - lo)


def _cells(x: F, nodes: F) -> tuple[NDArray[np.int64], F]:
    """Per point, the cell ``i`` of ``nodes`` (0, then powers of ``2^(1/4)``, as
    ``IDLE_SCALES``) with ``nodes[i] <= x < nodes[i + 1]`` (clipped to the cells) and the
    point's place in it, ``u = (x - nodes[i]) / (nodes[i + 1] - nodes[i])`` in [0, 1]. The cell
    comes from the quarter octave ``q = floor(4 log2 x)`` (a lookup of ``q``, 10x faster than a
    binary search over a million points): the number of positive nodes at or below
    ``2^(q / 4)``; a point within 1e-9 of a node's quarter octave may land in the cell above,
    where ``u`` clips to the node's own value."""
    quarter = np.round(4.0 * np.log2(nodes[1:])).astype(np.int64)
    if nodes[0] != 0.0 or not np.allclose(2.0 ** (quarter / 4.0), nodes[1:], rtol=1e-12):
        raise ValueError("grid nodes must be 0, then powers of 2^(1/4)")
    lo, hi = int(quarter[0]) - 1, int(quarter[-1])
    lookup = np.minimum(np.searchsorted(quarter, np.arange(lo, hi + 1), side="right"),
                        len(nodes) - 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.log2(x)
    q *= 4.0
    q += 1e-9  # a point on a node (log2 rounds it either way) goes to the node's own cell
    np.floor(q, out=q)
    q = np.fmin(np.fmax(q, lo), hi)  # NaN and -inf (x <= 0) to the first cell, inf the last
    i = lookup[q.astype(np.int64) - lo]
    width = np.diff(nodes)
    u = (x - nodes[:-1][i]) / width[i]
    return i, np.clip(u, 0.0, 1.0, out=u)


def zoo_ops(workload: str) -> Mapping[str, Any] | None:
    """The shipped per-op table of a workload's zoo model (``traincast.zoo.profiles``)."""
    from traincast.zoo.profiles import workload_ops

    return workload_ops(workload)


def zoo_amp_ops(workload: str) -> Mapping[str, Any] | None:
    """The shipped per-op table of a workload's zoo model profiled under autocast, with its
    casts (``traincast.zoo.profiles``, ``ops_amp.json``)."""
    from traincast.zoo.profiles import workload_ops

    return workload_ops(workload, amp=True)


def evaluate(r: Resolved, catalog: Catalog, overlap: ArrayLike = 0.0, strategy: str = "auto",
             workload: Strings | None = None,
             ops_of: OpsOf | None = None) -> Breakdown:
    """The time model on resolved rows; rows with a reason code other than 0 get NaN, and so
    does a valid row whose time is not finite (reason ``NOT_FINITE``: a GPU count or feature
    at the edge of the float range, e.g. 1e-300 GPUs)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        flop, mem, idle = compute_s(r, catalog, strategy, workload, ops_of)
        parts = {"data_io": data_time_s(r.input_bytes, r.pcie_bps), "compute_flop": flop,
                 "compute_mem": mem, "comm": comm_s(r)}
    with np.errstate(invalid="ignore", over="ignore"):
        total = total_time_s(parts["data_io"], parts["compute_flop"] + parts["compute_mem"],
                             parts["comm"], overlap)
    reason = np.where((r.reason == OK) & ~np.isfinite(total), NOT_FINITE,
                      r.reason).astype(r.reason.dtype)
    bad = reason != OK
    if bad.any():
        parts = {c: np.where(bad, np.nan, v) for c, v in parts.items()}
        total = np.where(bad, np.nan, total)
        idle = None if idle is None else np.where(bad, np.nan, idle)
    return Breakdown(**parts, total=total, reason=reason, idle=idle)


def predict_table(jobs: Mapping[str, Any] | Any, catalog: Catalog | None = None, *,
                  overlap: ArrayLike = 0.0, hierarchical: bool | ArrayLike = False,
                  amp: bool | ArrayLike = False, default_node: str | None = None,
                  gpu: str | None = None, nic: str | None = None, intra: str | None = None,
                  pcie: str | None = None, strategy: str = "auto",
                  ops_of: OpsOf | None = zoo_ops
                  ) -> Breakdown:
    """Breakdown of every job of a job table (canonical columns, docs/traces.md).

    Rows that cannot be predicted get NaN times; ``Breakdown.reason`` says why
    (:data:`traincast.resolve.REASONS`). ``ops_of(workload)``: a profile with a per-op table
    for a workload name, priced op by op on each row's GPU (:func:`compute_s`); by default the
    zoo's shipped tables (``None``: aggregate features only).
    """
    catalog = catalog or load_catalog()
    cols = jobs if isinstance(jobs, Columns) else Columns.of(jobs)
    r = resolve(cols, catalog, default_node=default_node, gpu=gpu, nic=nic, intra=intra,
                pcie=pcie, amp=amp, hierarchical=hierarchical)
    return evaluate(r, catalog, overlap, strategy, cols["workload"] if ops_of else None, ops_of)


@dataclass(frozen=True)
class Prediction:
    """One job's prediction (values are arrays when the features were arrays)."""

    time_s: dict[str, Any]
    share: dict[str, Any]
    bottleneck: Any
    bottleneck_label: str | None
    gpu_util: Any
    job: dict[str, Any]
    hardware: dict[str, Any]
    memory: dict[str, Any] | None = None  # footprint per GPU (memory_fit) when features tell it
    host_issue_s: Any = None  # n_ops x the host's floor d (ops counted; per row), any strategy
    kernel_strategy_available: bool | None = None  # with host_issue_s: could the kernel model?
    misaligned: dict[str, Any] | None = None  # compute.misaligned_products, kernel strategy only
    tf32_unpriced: bool | None = None  # ops asking for TF32 at the fp32 peak: no tf32_tflops

    def to_dict(self) -> dict[str, Any]:
        """The ``predict --json`` object (docs/model.md): plain JSON values (a share of a step
        with no work, NaN, is null)."""
        return to_jsonable(asdict(self))


def memory_fit(features: Mapping[str, Any], arch: str, n_gpus: float,
               mem_gb: float) -> dict[str, Any] | None:
    """Memory per GPU of a job whose features carry ``memory_bytes`` (a profile), by its
    architecture's ``footprint_bytes`` rule (``S + A`` for a replica; docs/model.md), against
    the GPU's ``mem_gb``: ``{"footprint_gb", "state_gb" (the same without activations: the
    weights, gradients and optimizer state no batch size changes), "capacity_gb", "fits"}``;
    ``None`` when the
    features do not tell; ``capacity_gb`` and ``fits`` None when the catalog entry does not (no
    ``mem_gb``, or one that is not a positive number: a calibrated entry may have none)."""
    mem = features.get("memory_bytes")
    if not isinstance(mem, Mapping):
        return None
    known = bool(mem_gb and mem_gb > 0)  # NaN: not > 0

    def part(*keys: str) -> NDArray[np.float64]:
        return np.array([sum(float(mem.get(k) or 0.0) for k in keys)])

    params = float(features.get("params") or 0.0)
    share = float(features.get("params_embedding") or 0.0) / params if params > 0 else 0.0

    def footprint(activations: NDArray[np.float64]) -> float:
        return float(REGISTRY[arch].footprint_bytes(Memory(
            state=part("weights", "grads", "optimizer"), weights=part("weights"),
            grads=part("grads"),
            activations=activations, embedding_share=np.array([share]),
            n=np.array([float(n_gpus)])))[0])

    need, state = footprint(part("activations")), footprint(np.zeros(1))
    return {"footprint_gb": need / 1e9, "state_gb": state / 1e9,
            "capacity_gb": float(mem_gb) if known else None,
            "fits": bool(need <= mem_gb * 1e9) if known else None}


def _scalar_or_list(x: Any) -> Any:
    x = np.asarray(x)
    return x.item() if x.size == 1 else x


def job_row(features: Mapping[str, ArrayLike], *, arch: str, gpus: int,
            gpus_per_node: int | None, workers: int | None, ps: int | None, node: str | None,
            gpu: str | None) -> dict[str, Any]:
    """The one-job table of ``predict`` (one row per element when features are arrays)."""
    feats = {k: np.atleast_1d(np.asarray(v, dtype=np.float64)) for k, v in features.items()
             if k in (*FEATURES, *STEP_COLUMNS) and v is not None}
    size = max((len(v) for v in feats.values()), default=1)
    if arch == "ps-worker" and workers is not None:
        gpus = workers  # one GPU per worker

    def col(value: Any) -> NDArray[Any]:
        return np.full(size, np.nan if value is None else value, dtype=np.float64)

    return {"architecture": np.full(size, arch, dtype=object), "n_gpus": col(gpus),
            "gpus_per_node": col(gpus_per_node), "n_workers": col(workers), "n_ps": col(ps),
            "node": np.full(size, node or "", dtype=object),
            "gpu_type": np.full(size, gpu or "", dtype=object),
            **{k: np.broadcast_to(v, (size,)) for k, v in feats.items()}}


def predict(features: Mapping[str, ArrayLike] | None = None, *, arch: str = "1w1g",
            gpus: int = 1, gpus_per_node: int | None = None, workers: int | None = None,
            ps: int | None = None, node: str | None = None, gpu: str | None = None,
            nic: str | None = None, intra: str | None = None, pcie: str | None = None,
            catalog: Catalog | None = None, overlap: float = 0.0, amp: bool = False,
            hierarchical: bool = False, strategy: str = "auto",
            **feature_values: ArrayLike) -> Prediction:
    """Predict one job's iteration time and breakdown (feature values may be numpy arrays).

    ``features`` holds ``flops_compute_bound``, ``bytes_memory_bound``, ``weight_bytes`` and
    optionally ``embedding_bytes_touched``, ``embedding_allreduce_bytes`` and ``input_bytes``
    (also accepted as keywords); a profile with its per-op table (``ops``, ``profile --ops``)
    is priced op by op (:func:`compute_s`). Raises :class:`TraincastError` naming the job's
    fields when the job cannot be predicted.
    """
    unknown = sorted(set(feature_values) - {*FEATURES, *STEP_COLUMNS})
    if unknown:
        raise TraincastError(f"predict: unknown keyword(s) {', '.join(unknown)}",
                             hint=f"the features are {', '.join(FEATURES)}")
    if not 0.0 <= overlap <= 1.0:  # also refuses nan
        raise TraincastError(f"overlap must be a fraction from 0 to 1, got {overlap!r}")
    catalog = catalog or load_catalog()
    feats = {**(features or {}), **feature_values}
    missing = [k for k in FEATURES[:3] if k not in feats]
    if missing:
        raise TraincastError(f"missing features: {', '.join(missing)}")
    check_record(feats, "features")
    _check_counts(arch, gpus=gpus, gpus_per_node=gpus_per_node, n_workers=workers, n_ps=ps)
    row = job_row(feats, arch=arch, gpus=gpus, gpus_per_node=gpus_per_node, workers=workers,
                  ps=ps, node=node, gpu=gpu)
    cols = Columns.of(row)
    r = resolve(cols, catalog, nic=nic, intra=intra, pcie=pcie, amp=amp,
                hierarchical=hierarchical)
    bad = np.flatnonzero(r.reason != OK)  # feature arrays: every row must be predictable
    if len(bad):
        raise explain(r, int(bad[0]), cols, catalog)
    # a profile with its per-op table: priced op by op, scaled to the features given (as
    # predict_table scales a workload's table), against the table's own sums
    profile = {**feats, **table_features(feats["ops"])} if feats.get("ops") else None
    strategy = catalog.compute if strategy == "auto" else strategy
    bd = evaluate(r, catalog, overlap, strategy, Strings(np.zeros(r.size, np.int32), ("job",)),
                  lambda _: profile)
    if bd.reason is not None and (lost := np.flatnonzero(bd.reason != OK)).size:
        raise explain(replace(r, reason=bd.reason), int(lost[0]), cols, catalog)
    out = _prediction(bd, r, catalog, arch, overlap, amp, hierarchical, nic, intra, pcie,
                      strategy)
    out.hardware["node_assumed"] = node_assumed(catalog, gpu, node)
    gpu = catalog.gpus[out.hardware["gpu"]]
    basis = kernels.kernel_model_basis(gpu, catalog.kernel_model) \
        if profile and out.hardware["compute"] == "kernel" else None
    if basis:  # the per-op table was priced by the measured-kernel model: say with what
        out.hardware["kernel_model"] = basis
    return replace(out, memory=memory_fit(feats, arch, r.n[0], r.mem_gb[0]),
                   **_host_and_alignment(feats, gpu, out.hardware["compute"], amp))


def node_assumed(catalog: Catalog, gpu: str | None, node: str | None) -> bool:
    """Whether ``gpu`` names a GPU that no node preset of the catalog holds and no
    ``default_node`` names, with no ``node`` given: the job then takes the default node's links
    (``pcie``, ``intra``, ``nic``), which ``predict`` says (``hardware.node_assumed``)."""
    return bool(gpu and not node and not catalog.default_node_of(gpu))


def links_stand_in(links: Mapping[str, Link], comm_s: Any,
                   comm_if_faster: Callable[[str], Any]) -> dict[str, str]:
    """The links of ``links`` (role -> link) whose figure stands in for one never measured (a
    link with ``stand_in = true``: ``traincast calibrate --no-comm`` writes the memcpy bandwidth
    for the local all-reduce and loopback) and on which the job's communication time rests:
    ``comm_if_faster(role)``, the communication with that link twice as fast, differs from
    ``comm_s`` (a link the job does not communicate over, or one a slower link bounds, is not
    named); name -> source. What ``predict`` says (``hardware.links_stand_in``)."""
    out: dict[str, str] = {}
    for role, link in links.items():
        if link.stand_in and link.name not in out and not np.array_equal(
                np.asarray(comm_if_faster(role)), np.asarray(comm_s)):
            out[link.name] = link.source
    return out


def _host_and_alignment(feats: Mapping[str, Any], gpu: GPU, compute_strategy: str,
                        amp: bool) -> dict[str, Any]:
    """What a prediction says beside its time: ``host_issue_s = n_ops d`` (the host's issue
    of the job's ops at the kernel model's floor, whatever the strategy; ``n_ops`` the runs of
    a per-op table's rows, ``sum count``, as a profile's ``n_ops`` counts them (a recurrent
    layer one row: the per-op queue issues its steps), else the features' ``n_ops``; with it
    ``kernel_strategy_available``), ``misaligned`` (the per-op table's tensor-core
    products no multiple of 16 bytes, :func:`compute.misaligned_products`; priced op by op
    under the kernel strategy only, else None) and ``tf32_unpriced`` (a per-op table with ops
    that ask for TF32, ``compute.op_asked_dtypes``: fp32 convolutions, ``--tf32-matmul``
    products, on a GPU whose entry lacks the TF32 peak its compute capability has,
    :func:`kernels.tf32_unpriced`: they are priced at the fp32 peak)."""
    out: dict[str, Any] = {}
    ops = feats.get("ops")
    given = feats.get("n_ops")
    runs = op_runs(ops or ())  # each row as often as it runs
    n_ops = np.asarray(runs if ops else (0.0 if given is None else given), dtype=np.float64)
    if np.any(n_ops > 0):  # features may be arrays: one time per row
        out["host_issue_s"] = _scalar_or_list(n_ops * kernels.op_floor_s(gpu))
        out["kernel_strategy_available"] = compute.kernel_model_available(gpu)
    if ops and compute_strategy == "kernel":
        out["misaligned"] = compute.misaligned_products(ops, gpu, "amp" if amp else "fp32")
    if ops and kernels.tf32_unpriced(gpu):
        out["tf32_unpriced"] = "tf32" in compute.op_asked_dtypes(ops, gpu,
                                                                 "amp" if amp else "fp32")
    return out


def _check_counts(arch: str, **counts: float | None) -> None:
    """A count the caller gives must be a positive number: ``predict`` takes no default for a
    given value (a trace row's 0 or null means "not recorded" and takes the default of
    :mod:`traincast.resolve`; a value given to ``predict`` is never silently replaced).
    ``n_gpus`` of ``ps-worker`` with ``n_workers`` is the workers', so only they are checked."""
    if arch == "ps-worker" and counts.get("n_workers") is not None:
        counts.pop("gpus")
    for name, value in counts.items():
        field = "n_gpus" if name == "gpus" else name
        if value is not None and (isinstance(value, bool) or not isinstance(value, Real)):
            raise TraincastError(f"{field} must be a number, got {value!r}")
        if value is not None and not value > 0:
            raise TraincastError(f"{field} must be a positive number, got {value} "
                                 f"(field {field})",
                                 hint=f"{arch} needs at least one; see docs/model.md")


def _prediction(bd: Breakdown, r: Resolved, catalog: Catalog, arch: str, overlap: float,
                amp: bool, hierarchical: bool, nic: str | None, intra: str | None,
                pcie: str | None, strategy: str) -> Prediction:
    shares = bd.shares()
    names = bd.bottleneck_names()  # None: no work
    node = catalog.nodes[r.node.values[r.node.codes[0]]]
    gpu = catalog.gpus[r.gpu.values[r.gpu.codes[0]]]
    links = {role: resolve_link(catalog, spec or getattr(node, role))
             for role, spec in (("pcie", pcie), ("intra", intra), ("nic", nic))}
    bottleneck = _scalar_or_list(names)
    label = None
    if isinstance(bottleneck, str):
        label = BOTTLENECK_LABEL.get(bottleneck, bottleneck)
        role = str(REGISTRY[arch].link_role(r)[0])
        if bottleneck == "comm" and role:
            label += f" over {links[role].label()}"
        elif bottleneck == "data_io":
            label = f"data I/O over {links['pcie'].label()}"
    n, g = int(r.n[0]), int(r.g[0])
    comm_s = REGISTRY[arch].comm_s  # the architecture's communication formula
    flop_rate, byte_rate = compute.rates(gpu, "amp" if amp else "fp32", strategy)
    return Prediction(
        time_s={**{c: _scalar_or_list(getattr(bd, c)) for c in (*COMPONENTS, "total")},
                "host_wait": _scalar_or_list(bd.host_wait)},
        share={c: _scalar_or_list(shares[c]) for c in COMPONENTS},
        bottleneck=bottleneck, bottleneck_label=label,
        gpu_util=_scalar_or_list(bd.gpu_util()),
        job={"arch": arch, "arch_label": ARCH_LABEL[arch], "gpus": n, "gpus_per_node": g,
             "nodes": int(r.nodes[0]),
             "workers": int(r.m[0]) if arch == "ps-worker" else None,
             "workers_per_node": int(r.k[0]) if arch == "ps-worker" else None,
             "ps": int(r.p[0]) if arch == "ps-worker" else None, "overlap": overlap,
             "amp": amp, "hierarchical": hierarchical},
        hardware={"node": node.name, "gpu": gpu.name, "vendor": kernels.vendor_of(gpu),
                  "nics": node.nics,
                  "compute": compute.strategy_of(gpu, strategy),
                  "compute_asked": strategy, "device": gpu.device or "cuda",
                  "gemm_fraction_default": kernels.gemm_max_fraction(
                      gpu, "amp" if amp else "fp32") is None,
                  "achievable_tflops": flop_rate / 1e12, "achievable_mem_gbs": byte_rate / 1e9,
                  "peak_tflops": gpu.peak_tflops("amp" if amp else "fp32"),
                  "flop_efficiency": gpu.flop_efficiency, "mem_bw_gbs": gpu.mem_bw_gbs,
                  "mem_efficiency": gpu.mem_efficiency,
                  "fp32_unthrottled_by": kernels.unthrottled_by(gpu),
                  "amp_dtype": gpu.math_dtype("amp") if amp else None,
                  "links_stand_in": links_stand_in(links, comm_s(r), lambda role: comm_s(
                      replace(r, **{f"{role}_bps": 2.0 * getattr(r, f"{role}_bps")}))),
                  **{r_: links[r_].name for r_ in links},
                  **{f"{r_}_bw_gbs": links[r_].bw_gbs * links[r_].efficiency for r_ in links}})
