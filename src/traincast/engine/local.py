"""Evaluate scenarios over a job table in this process (vectorized; the reference engine).

For each scenario: select the matched jobs (one mask), take them out as a sub-table, change
their columns (architecture, node, GPU, features), check that each still fits (GPU count and
memory, when the GPU, node or architecture changes), evaluate the sub-table once with
``predict_table`` (link, GPU, precision and overlap overrides apply to it alone), and put the
times of the jobs that fit back in place. Unmatched and unfit jobs keep their base time, so
their speedup is exactly 1. Rules and formulas: docs/scenarios.md.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from traincast.arch import ARCH_CODE
from traincast.engine.columns import Columns, Strings, effective_hardware
from traincast.engine.workload import WorkloadExtras, workload_extras
from traincast.hardware.catalog import Catalog
from traincast.model import Breakdown
from traincast.predict import predict_table
from traincast.scenarios import Scenario

F = NDArray[np.float64]
B = NDArray[np.bool_]
CHUNK_ROWS = 65_536  # rows evaluated together (their numpy temporaries fit the CPU cache)


@dataclass(frozen=True)
class ScenarioResult:
    """Per-job outcome of one scenario: matched, applied (fits) and the scenario's total time."""

    name: str
    matched: B
    applied: B
    total_s: F


def base_breakdown(cols: Columns, catalog: Catalog, overlap: float = 0.0,
                   hierarchical: bool = False) -> Breakdown:
    """Every job as it ran (the denominator of every speedup)."""
    return predict_table(cols.table(), catalog, overlap=overlap, hierarchical=hierarchical)


def match_mask(cols: Columns, sc: Scenario, catalog: Catalog,
               hw_names: tuple[Strings, Strings] | None = None) -> B:
    """Jobs selected by the scenario's ``[match]`` clause (all of its keys must hold)."""
    m = np.ones(cols.n, dtype=bool)
    spec = sc.match
    if "architecture" in spec:
        m &= cols["architecture"].isin(spec["architecture"])
    if "workload" in spec:
        m &= cols["workload"].isin(spec["workload"], key=lambda v: v.strip().lower())
    if "gpu_type" in spec or "node" in spec:
        node, gpu = hw_names or effective_hardware(cols, catalog)
        if "gpu_type" in spec:
            m &= gpu.isin(spec["gpu_type"])
        if "node" in spec:
            m &= node.isin(spec["node"])
    n = cols["n_gpus"]
    if "min_gpus" in spec:
        m &= n >= spec["min_gpus"]
    if "max_gpus" in spec:
        m &= n <= spec["max_gpus"]
    return m


def apply_changes(sub: Columns, extras: WorkloadExtras, sc: Scenario) -> Columns:
    """The matched jobs' columns after the scenario's column changes.

    ``architecture``: the new architecture; data-parallel targets pack the job's GPUs onto
    whole nodes (``gpus_per_worker`` cleared: g = min(n, node GPUs)); a ``ps-worker`` target
    has m = n workers and p = ceil(n / node GPUs) servers. ``node``: the node preset; the GPU
    becomes the node's unless ``gpu`` is given too. ``amp``/``fusion``: ``bytes_memory_bound``
    times ``amp_ratio``/``fused_ratio``/``fused_amp_ratio`` and, under amp,
    ``flops_compute_bound`` times ``amp_flops_ratio`` (``traincast.engine.workload``).
    """
    ch = sc.changes
    everyone = np.ones(sub.n, dtype=bool)
    out: dict[str, object] = {}
    if "architecture" in ch:
        arch = ch["architecture"]
        out["architecture"] = sub["architecture"].set(everyone, arch)
        if arch != "ps-worker":
            out["gpus_per_worker"] = np.full(sub.n, np.nan)
        else:
            out["n_workers"] = sub["n_gpus"].copy()
            out["n_ps"] = np.full(sub.n, np.nan)  # filled once the node is known (fit step)
            out["gpus_per_worker"] = np.ones(sub.n)
    if "node" in ch:
        out["node"] = sub["node"].set(everyone, ch["node"])
        out["gpu_type"] = sub["gpu_type"].set(everyone, None)
    amp, fusion = bool(ch.get("amp")), bool(ch.get("fusion"))
    if amp or fusion:
        ratio = extras.fused_amp_ratio if amp and fusion else \
            extras.amp_ratio if amp else extras.fused_ratio
        out["bytes_memory_bound"] = sub["bytes_memory_bound"] * ratio
    if amp:
        out["flops_compute_bound"] = sub["flops_compute_bound"] * extras.amp_flops_ratio
    return sub.replace(**out)


def node_gpus_and_memory(new: Columns, catalog: Catalog,
                         gpu: str | None = None) -> tuple[F, F]:
    """GPUs per node and memory per GPU (GB; NaN when the catalog has none) of each job."""
    node, gpu_s = effective_hardware(new, catalog)
    nan = float("nan")
    node_gpus = node.lookup(lambda v: catalog.nodes[v].gpus if v in catalog.nodes else nan,
                            nan, np.float64)

    def mem(name: str) -> float:
        try:
            return catalog.gpu(name).mem_gb or nan
        except KeyError:
            return nan

    mem_gb = np.full(new.n, mem(gpu)) if gpu else gpu_s.lookup(mem, nan, np.float64)
    return node_gpus, mem_gb


def fit_mask(new: Columns, extras: WorkloadExtras, sc: Scenario, catalog: Catalog) -> B:
    """Jobs that still fit after the change (True for all when GPU/node/architecture stay).

    GPU count: ``1w1g`` needs n <= 1, ``allreduce-local`` needs n <= node GPUs. Memory:
    footprint per GPU (``WorkloadExtras.footprint_bytes``) <= mem_gb * 1e9 of the new GPU
    (not checked for a GPU whose catalog entry has no ``mem_gb``).
    """
    if not sc.changes_hardware:
        return np.ones(new.n, dtype=bool)
    node_gpus, mem_gb = node_gpus_and_memory(new, catalog, sc.changes.get("gpu"))
    arch = new["architecture"].lookup(lambda v: ARCH_CODE.get(v, -1), -1, np.int64)
    n = new["n_gpus"]
    ok = np.isfinite(node_gpus) & (n > 0)
    ok &= (arch != ARCH_CODE["1w1g"]) | (n <= 1)
    ok &= (arch != ARCH_CODE["allreduce-local"]) | (n <= node_gpus)
    ok &= ~(extras.footprint_bytes(arch, n) > mem_gb * 1e9)  # NaN mem_gb: not checked
    return ok


def ps_servers(new: Columns, catalog: Catalog, gpu: str | None) -> F:
    """Servers of a job ported to ps-worker: ``p = ceil(n / node GPUs)`` (one per worker node)."""
    node_gpus, _ = node_gpus_and_memory(new, catalog, gpu)
    return np.ceil(new["n_gpus"] / node_gpus)


def run_scenario(cols: Columns, extras: WorkloadExtras, base_total_s: F, sc: Scenario,
                 catalog: Catalog, overlap: float = 0.0, hierarchical: bool = False,
                 hw_names: tuple[Strings, Strings] | None = None) -> ScenarioResult:
    """One scenario over every job (see the module docstring)."""
    matched = match_mask(cols, sc, catalog, hw_names)
    idx = np.flatnonzero(matched)
    total = base_total_s.copy()
    applied = np.zeros(cols.n, dtype=bool)
    if len(idx):
        ext = extras.take(idx)
        new = apply_changes(cols.take(idx), ext, sc)
        ch = sc.changes
        if ch.get("architecture") == "ps-worker":
            new = new.replace(n_ps=ps_servers(new, catalog, ch.get("gpu")))
        ok = fit_mask(new, ext, sc, catalog)
        bd = predict_table(new.table(), catalog, overlap=ch.get("overlap", overlap),
                           hierarchical=ch.get("hierarchical", hierarchical),
                           amp=bool(ch.get("amp", False)), gpu=ch.get("gpu"),
                           nic=ch.get("nic"), intra=ch.get("intra"), pcie=ch.get("pcie"))
        total[idx[ok]] = bd.total[ok]
        applied[idx[ok]] = True
    return ScenarioResult(sc.name, matched, applied, total)


def run_scenarios(cols: Columns, scenarios: list[Scenario], catalog: Catalog,
                  overlap: float = 0.0, hierarchical: bool = False,
                  progress: Callable[[int, int], None] | None = None, threads: int = 1,
                  chunk_rows: int = CHUNK_ROWS) -> tuple[F, list[ScenarioResult]]:
    """Base total time and every scenario's result for a job table.

    Rows are evaluated in chunks of ``chunk_rows`` (a job's numbers depend on its own row
    alone, so the results do not depend on the chunking; small chunks keep numpy's temporaries
    in the CPU cache). ``threads`` > 1 evaluates chunks concurrently (numpy releases the GIL in
    its loops). ``progress(rows_done, rows_total)`` is called after each chunk.
    """
    step = max(int(chunk_rows), 1)
    starts = range(0, max(cols.n, 1), step)
    done = [0]

    def chunk(start: int) -> tuple[F, list[ScenarioResult]]:
        sub = cols.slice(start, min(start + step, cols.n))
        base = base_breakdown(sub, catalog, overlap, hierarchical).total
        extras = workload_extras(sub)
        names = effective_hardware(sub, catalog) if any(
            "gpu_type" in sc.match or "node" in sc.match for sc in scenarios) else None
        out = base, [run_scenario(sub, extras, base, sc, catalog, overlap, hierarchical, names)
                     for sc in scenarios]
        done[0] += sub.n
        if progress:
            progress(done[0], cols.n)
        return out

    if threads > 1 and len(starts) > 1:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            parts = list(pool.map(chunk, starts))
    else:
        parts = [chunk(start) for start in starts]
    if len(parts) == 1:
        return parts[0]
    results = [ScenarioResult(sc.name, *(np.concatenate([getattr(p[1][i], f) for p in parts])
                                         for f in ("matched", "applied", "total_s")))
               for i, sc in enumerate(scenarios)]
    return np.concatenate([p[0] for p in parts]), results
