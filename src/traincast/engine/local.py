"""Evaluate scenarios over a job table in this process (vectorized; the reference engine).

For each scenario: select the matched jobs (one mask), take them out as a sub-table, change
their columns (node, features, then the architecture's port rule), resolve and evaluate the
sub-table once (link, GPU, precision and overlap overrides apply to it alone), keep the jobs
that still fit (resolved without a reason code; memory when the GPU, node or architecture
changes), and put the
times of the jobs that fit back in place. Unmatched and unfit jobs keep their base time, so
their speedup is exactly 1. Rules and formulas: docs/scenarios.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from traincast.architectures import REGISTRY
from traincast.engine.workload import ProfileOf, WorkloadExtras, workload_extras
from traincast.hardware.catalog import Catalog
from traincast.jobs import Columns, Strings
from traincast.model import Breakdown
from traincast.predict import OpsOf, evaluate, zoo_amp_ops, zoo_ops
from traincast.resolve import (
    OK,
    Resolved,
    hardware_of,
    node_gpus_of,
    resolve,
    resolve_link,
    training_gpus,
)
from traincast.scenarios import LINK_KEYS, Scenario

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


@dataclass(frozen=True)
class Workloads:
    """Where the jobs' workloads come from: their per-op tables (``ops_of``, the shipped zoo's
    by default), their profile records for the fit checks and the mixed-precision and fusion
    ratios (``profile_of``; None: the shipped profiles, ``engine.workload.workload_extras``),
    whether the jobs already train in mixed precision (``amp``: one job given by a profile
    written under ``--amp``, priced as ``predict`` prices it; a scenario cannot turn it off),
    and their per-op tables under autocast (``amp_ops_of``, the shipped zoo's by default: the
    tables a scenario that turns mixed precision on prices, with autocast's casts, as
    ``predict --amp`` prices the model; None: the fp32 tables at the mixed-precision rates)."""

    ops_of: OpsOf = zoo_ops
    profile_of: ProfileOf | None = None
    amp: bool = False
    amp_ops_of: OpsOf | None = zoo_amp_ops

    def scenario_ops(self, amp: bool) -> OpsOf:
        """The per-op tables a scenario prices: where it turns mixed precision on for jobs that
        train in fp32, a workload's table under autocast where one is given, else its own."""
        amp_ops, ops = self.amp_ops_of, self.ops_of
        if not amp or self.amp or amp_ops is None:
            return ops
        return lambda workload: amp_ops(workload) or ops(workload)


SHIPPED = Workloads()
"""The shipped zoo's tables and profiles, fp32 jobs: every trace."""


def evaluate_columns(cols: Columns, catalog: Catalog, overlap: float = 0.0,
                     hierarchical: bool = False, ops_of: OpsOf = zoo_ops,
                     **overrides: Any) -> tuple[Breakdown, Resolved]:
    """Resolve a job table once and evaluate it: the breakdown and the resolved rows (a row
    whose workload has a per-op table, ``ops_of(workload)``: by default a shipped one, is
    priced op by op, as ``predict_table``). The rows carry the breakdown's reasons, so a row
    whose time is not finite (``NOT_FINITE``) is unpredicted for every caller alike."""
    amp = bool(overrides.pop("amp", False))
    r = resolve(cols, catalog, amp=amp, hierarchical=hierarchical, **overrides)
    bd = evaluate(r, catalog, overlap, workload=cols["workload"], ops_of=ops_of)
    if bd.reason is not None and bd.reason is not r.reason:
        r = replace(r, reason=bd.reason)
    return bd, r


def base_breakdown(cols: Columns, catalog: Catalog, overlap: float = 0.0,
                   hierarchical: bool = False) -> Breakdown:
    """Every job as it ran (the denominator of every speedup)."""
    return evaluate_columns(cols, catalog, overlap, hierarchical)[0]


def workload_matcher(wanted: Iterable[str]) -> Callable[[str], bool]:
    """Whether a job's workload is one of ``wanted``: the same name (any case, ``zoo:`` or
    not), the same zoo model under another name or alias, or a workload tag and the zoo model
    it stands for (``traincast.zoo.profiles.workload_identity``: the tag ``bert`` and the
    model ``bert-base`` are one workload, as they are priced). Two tags are one only by name:
    ``resnet`` and ``inception`` share a stand-in but are different jobs. Called once per
    distinct workload of the jobs."""
    from traincast.zoo.profiles import workload_identity

    ids = [workload_identity(w) for w in wanted]
    keys = {k for k, _, _ in ids}
    models = {m for _, m, _ in ids if m}
    named = models | {t for _, _, t in ids if t}  # a wanted model, or a wanted tag's stand-in

    def matches(value: str) -> bool:
        key, model, stand_in = workload_identity(value)
        return key in keys or (model is not None and model in named) or \
            (stand_in is not None and stand_in in models)

    return matches


def runs_on_gpus(n_gpus: Any) -> B:
    """The jobs with GPUs, ``n_gpus > 0`` (missing, NaN: none): the only ones a scenario
    matches."""
    with np.errstate(invalid="ignore"):
        return np.asarray(n_gpus, dtype=np.float64) > 0


def match_mask(cols: Columns, sc: Scenario, base: Resolved, catalog: Catalog) -> B:
    """Jobs with GPUs (``runs_on_gpus``) selected by the scenario's ``[match]`` clause (all
    of its keys must hold); ``base``: the jobs as resolved (their node and GPU names; for
    ``upgrade_only`` their links: every link the scenario changes must be slower, ``bw_gbs x
    efficiency``, than the new one, so a job already on a faster network is left as it is)."""
    m = runs_on_gpus(cols["n_gpus"])
    spec = sc.match
    if "architecture" in spec:
        m &= cols["architecture"].isin(spec["architecture"])
    if "workload" in spec:
        m &= cols["workload"].lookup(workload_matcher(spec["workload"]), False, bool)
    if spec.get("upgrade_only"):
        for role in LINK_KEYS:
            if role in sc.changes:
                new_bps = resolve_link(catalog, sc.changes[role]).bw_bps
                m &= getattr(base, f"{role}_bps") < new_bps  # NaN (unknown node): not matched
    node, gpu = base.node, base.gpu
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


def apply_changes(sub: Columns, extras: WorkloadExtras, sc: Scenario,
                  catalog: Catalog, present_node: Strings | None = None) -> Columns:
    """The matched jobs' columns after the scenario's column changes.

    ``node``: the node preset; the GPU becomes the node's unless ``gpu`` is given too, and a
    job that moves to another preset has its GPUs packed onto the new nodes (``gpus_per_node``
    and ``workers_per_node`` cleared: ``g = min(n, node GPUs)``; the trace's placement was on
    its own machines); a job already on that preset keeps its placement (``present_node``:
    each job's node as resolved, where the caller has it; else resolved here).
    ``architecture``: the new architecture's ``port`` rule on the new node
    (traincast.architectures: data-parallel targets clear the placement so the default packs
    the job's GPUs onto whole nodes; ``ps-worker`` has m = n workers and p = ceil(n / node GPUs)
    servers), with n = the job's training GPUs (``traincast.resolve.training_gpus``: GPUs no
    worker holds, such as an evaluator's, are not ported). ``amp``/``fusion``:
    ``bytes_memory_bound`` times ``amp_ratio``/``fused_ratio``/``fused_amp_ratio`` and, under
    amp, ``flops_compute_bound`` times ``amp_flops_ratio`` (``traincast.engine.workload``).
    """
    ch = sc.changes
    everyone = np.ones(sub.n, dtype=bool)
    out: dict[str, object] = {}
    if "node" in ch:
        out["node"] = sub["node"].set(everyone, ch["node"])
        out["gpu_type"] = sub["gpu_type"].set(everyone, None)
        node = hardware_of(sub, catalog)[0] if present_node is None else present_node
        moved = ~node.isin([ch["node"]])
        for col in ("gpus_per_node", "workers_per_node"):
            out[col] = np.where(moved, np.nan, sub[col])
    amp, fusion = bool(ch.get("amp")), bool(ch.get("fusion"))
    if amp or fusion:
        ratio = extras.fused_amp_ratio if amp and fusion else \
            extras.amp_ratio if amp else extras.fused_ratio
        out["bytes_memory_bound"] = sub["bytes_memory_bound"] * ratio
    if amp:
        out["flops_compute_bound"] = sub["flops_compute_bound"] * extras.amp_flops_ratio
    new = sub.replace(**out)
    if "architecture" in ch:
        arch = ch["architecture"]
        node_gpus = node_gpus_of(new, catalog, gpu=ch.get("gpu"))
        n = training_gpus(new)  # the ported shape keeps the training GPUs alone
        new = new.replace(architecture=new["architecture"].set(everyone, arch), n_gpus=n,
                          **REGISTRY[arch].port(n, node_gpus))
    return new


def fit_mask(r: Resolved, extras: WorkloadExtras, sc: Scenario) -> B:
    """Jobs that can run the scenario: resolved without a reason code and, when the GPU, node
    or architecture changes, a footprint per GPU (``WorkloadExtras.footprint_bytes``) within
    ``mem_gb * 1e9`` of the new GPU (not checked for a GPU whose catalog entry has no
    ``mem_gb``)."""
    ok = r.reason == OK
    if sc.changes_hardware:
        ok &= ~exceeds_memory(r, extras)[0]
    return ok


def exceeds_memory(r: Resolved, extras: WorkloadExtras) -> tuple[B, F]:
    """``(over, need)``: the jobs whose footprint per GPU, ``need`` bytes
    (``WorkloadExtras.footprint_bytes`` under their resolved architecture), exceeds their
    GPU's ``mem_gb * 1e9`` (an unknown footprint or ``mem_gb``, NaN: not over)."""
    need = extras.footprint_bytes(r.arch, r.n)
    with np.errstate(invalid="ignore"):
        return need > r.mem_gb * 1e9, need


def run_scenario(cols: Columns, extras: WorkloadExtras, base_total_s: F, sc: Scenario,
                 catalog: Catalog, base: Resolved, overlap: float = 0.0,
                 hierarchical: bool = False, workloads: Workloads = SHIPPED) -> ScenarioResult:
    """One scenario over every job (see the module docstring); ``base``: the jobs as
    resolved (``match_mask``); ``workloads``: :class:`Workloads`."""
    matched = match_mask(cols, sc, base, catalog)
    idx = np.flatnonzero(matched)
    total = base_total_s.copy()
    applied = np.zeros(cols.n, dtype=bool)
    if len(idx):
        ext = extras.take(idx)
        ch = sc.changes
        new = apply_changes(cols.take(idx), ext, sc, catalog, base.node.take(idx))
        bd, r = evaluate_columns(new, catalog, ch.get("overlap", overlap),
                                 ch.get("hierarchical", hierarchical),
                                 amp=bool(ch.get("amp", False)) or workloads.amp,
                                 gpu=ch.get("gpu"), nic=ch.get("nic"), intra=ch.get("intra"),
                                 pcie=ch.get("pcie"),
                                 ops_of=workloads.scenario_ops(bool(ch.get("amp"))))
        ok = fit_mask(r, ext, sc)
        total[idx[ok]] = bd.total[ok]
        applied[idx[ok]] = True
    return ScenarioResult(sc.name, matched, applied, total)


def run_scenarios(cols: Columns, scenarios: list[Scenario], catalog: Catalog,
                  overlap: float = 0.0, hierarchical: bool = False,
                  progress: Callable[[int, int], None] | None = None, threads: int = 1,
                  chunk_rows: int = CHUNK_ROWS,
                  base: tuple[Breakdown, Resolved] | None = None,
                  workloads: Workloads = SHIPPED
                  ) -> tuple[F, NDArray[np.int8], list[ScenarioResult]]:
    """Base total time, each job's reason code (traincast.resolve.REASONS; 0 = predicted) and
    every scenario's result for a job table.

    Rows are evaluated in chunks of ``chunk_rows`` (a job's numbers depend on its own row
    alone, so the results do not depend on the chunking; small chunks keep numpy's temporaries
    in the CPU cache). ``threads`` > 1 evaluates chunks concurrently (numpy releases the GIL in
    its loops). ``progress(rows_done, rows_total)`` is called after each chunk. ``base``: the
    table's own :func:`evaluate_columns` at the same ``overlap`` and ``hierarchical``, when the
    caller has it (not evaluated again). ``workloads``: where the jobs' per-op tables and
    profiles come from, and their precision (:class:`Workloads`; a job's own for one job given
    by its profile).
    """
    step = max(int(chunk_rows), 1)
    starts = range(0, max(cols.n, 1), step)
    done = [0]

    def chunk(start: int) -> tuple[F, NDArray[np.int8], list[ScenarioResult]]:
        stop = min(start + step, cols.n)
        sub = cols.slice(start, stop)
        if base is None:
            bd, r = evaluate_columns(sub, catalog, overlap, hierarchical, workloads.ops_of,
                                     amp=workloads.amp)
            base_s = bd.total
        else:
            r = base[1] if (start, stop) == (0, cols.n) else base[1].take(np.arange(start, stop))
            base_s = base[0].total[start:stop]
        extras = workload_extras(sub, workloads.profile_of)
        out = base_s, r.reason, [run_scenario(sub, extras, base_s, sc, catalog, r,
                                              overlap, hierarchical, workloads)
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
    results = [ScenarioResult(sc.name, *(np.concatenate([getattr(p[2][i], f) for p in parts])
                                         for f in ("matched", "applied", "total_s")))
               for i, sc in enumerate(scenarios)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), results
