"""Recommend a training architecture and placement for every job.

Candidates (each evaluated for all jobs at once, through the what-if engine's port rules):

* the job as it runs (so a recommendation is never slower than the present);
* every architecture on the job's own hardware (``arch_*`` columns: "which architecture suits
  this job here");
* every architecture on every candidate node preset, with that node's GPU (``best_*``).

A candidate is eligible when the job fits it: GPU count (1w1g: n <= 1; allreduce-local:
n <= node GPUs) and memory per GPU (docs/scenarios.md, fit checks). The job keeps its GPU count
n (its data-parallel degree); ps-worker candidates use m = n workers and p = ceil(n / node GPUs)
servers. With prices (USD per GPU-hour, TOML, each with a source), the cheapest candidate per
iteration is reported too: ``cost = T_total * n * usd_per_gpu_hour / 3600``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike, NDArray

from traincast.architectures import ARCHITECTURES, REGISTRY, per_architecture
from traincast.compute import FLAT_PEAK_WHY, flat_peak_gpus, rates
from traincast.engine.local import (
    CHUNK_ROWS,
    SHIPPED,
    Workloads,
    apply_changes,
    evaluate_columns,
    exceeds_memory,
    fit_mask,
)
from traincast.engine.workload import WorkloadExtras, workload_extras
from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.hardware.prices import Prices, load_prices
from traincast.jobs import Columns, Strings
from traincast.model import BOTTLENECK_LABEL, BOTTLENECKS, COMPONENTS, Breakdown
from traincast.predict import ops_tables
from traincast.resolve import OK, REASONS, Resolved
from traincast.scenarios import Scenario

F = NDArray[np.float64]
Progress = Callable[[str, int, int], None]
"""``progress(step, done, total)``: the step just finished, steps done, steps in all."""


@dataclass(frozen=True)
class Candidate:
    """An architecture on a node preset (``node`` '' = the job's own hardware)."""

    architecture: str
    node: str = ""

    @property
    def scenario(self) -> Scenario:
        changes: dict[str, Any] = {"architecture": self.architecture}
        if self.node:
            changes["node"] = self.node
        return Scenario(name=f"{self.architecture}@{self.node or 'current'}", changes=changes)


MIN_COMPUTE_CAPABILITY = 5.0
"""The least CUDA compute capability a default candidate's GPU may have: what the PyTorch CUDA
builds of today run. CUDA 12 dropped Kepler (3.x; pytorch/pytorch#101187, 2023: "no longer
supported by CUDA 12"), and PyTorch 2.11's CUDA 12.6 build runs Maxwell (5.0) and later (its
support matrix, dev-discuss.pytorch.org "Dropping Volta support from CUDA-12.8 binaries for
release 2.11", 2026). A GPU below it (the K80, 3.7) runs only an old stack: it can still be a
job's own GPU and a ``--nodes`` candidate, but is not one by default."""


def unsupported_nodes(catalog: Catalog) -> dict[str, str]:
    """Node presets left out of the default candidates because today's PyTorch CUDA builds do
    not run their GPU (:data:`MIN_COMPUTE_CAPABILITY`), with why."""
    out = {}
    for nd, node in sorted(catalog.nodes.items()):
        cc = catalog.gpu(node.gpu).compute_capability
        if 0 < cc < MIN_COMPUTE_CAPABILITY:
            out[nd] = (f"{catalog.gpu_name(node.gpu)}: compute capability {cc:.1f}, below "
                       f"{MIN_COMPUTE_CAPABILITY:.1f}, which no current PyTorch CUDA build runs")
    return out


def left_out_nodes(catalog: Catalog) -> dict[str, str]:
    """Node presets the default candidates leave out, with why: a GPU today's PyTorch CUDA
    builds do not run (:func:`unsupported_nodes`), and under ``auto`` compute a GPU only the
    paper's flat peaks can price (``compute.flat_peak_gpus``)."""
    out = unsupported_nodes(catalog)
    for nd, node in sorted(catalog.nodes.items()):
        if nd not in out and flat_peak_gpus(catalog, [node.gpu]):
            out[nd] = (f"{catalog.gpu_name(node.gpu)}: priced at flat datasheet peaks, "
                       f"{FLAT_PEAK_WHY}")
    return out


def default_candidates(catalog: Catalog, nodes: Iterable[str] | None = None,
                       architectures: Iterable[str] | None = None) -> list[Candidate]:
    """Every candidate architecture on the job's own hardware, then on each node preset.

    Without ``nodes``: every preset whose GPU is priced by the same kind of model as the
    others. Under ``auto`` compute a preset whose GPU only the paper's flat peaks can price
    (no SM count, no measured curves: the ``paper-2019`` reference node) is left out, since a
    flat peak is an optimistic bound that a shape-aware estimate would always lose to; under a
    named ``--compute`` (paper, kernel, curves) every GPU is priced by that one model and
    every preset is a candidate. A preset
    whose GPU today's PyTorch CUDA builds do not run (:func:`unsupported_nodes`) is left out
    too (:func:`left_out_nodes`)."""
    archs = list(architectures) if architectures is not None else [
        a for a in ARCHITECTURES if REGISTRY[a].candidate]
    old = left_out_nodes(catalog)
    node_list = list(nodes) if nodes is not None else sorted(
        nd for nd in catalog.nodes if nd not in old)
    for nd in node_list:
        catalog.node(nd)
    return [Candidate(a) for a in archs] + [Candidate(a, nd) for nd in node_list for a in archs]


def _candidate(cols: Columns, extras: WorkloadExtras, cand: Candidate, catalog: Catalog,
               overlap: float, hierarchical: bool, workloads: Workloads, present_node: Strings
               ) -> tuple[Breakdown, Resolved, NDArray[np.bool_]]:
    """The jobs ported to a candidate by the what-if engine's rules: breakdown, resolved rows
    and the mask of jobs that fit (``present_node``: the jobs' nodes as resolved already, not
    resolved again for each candidate)."""
    sc = cand.scenario
    new = apply_changes(cols, extras, sc, catalog, present_node=present_node)
    bd, r = evaluate_columns(new, catalog, overlap, hierarchical, workloads.ops_of,
                             amp=workloads.amp)
    return bd, r, fit_mask(r, extras, sc)


def _label(catalog: Catalog, link: str) -> str:
    return catalog.links[link].label() if link in catalog.links else link or "?"


def _link_roles(r: Resolved) -> NDArray[np.object_]:
    """Per row, the node link bounding ``T_comm`` by the row's architecture's ``link_role``
    rule (``"pcie"``, ``"intra"``, ``"nic"``; ``""`` = no link, or an unknown architecture)."""
    return per_architecture(r.arch, lambda a, rows: a.link_role(r.take(rows)), "", object)


def _over(arch: str, role: str, node: str, catalog: Catalog) -> str:
    """``arch over <link>``: the node's link in ``role`` (``arch`` alone for no link), saying
    how many network ports the node has where it has several (``nics``: a ring runs one per
    port it uses, ``min(nics, g)``)."""
    if not role:
        return arch
    nd = catalog.nodes.get(node)
    if nd is None:
        return f"{arch} over ?"
    ports = f" (a node of {nd.nics} network ports)" if role == "nic" and nd.nics > 1 else ""
    return f"{arch} over {_label(catalog, getattr(nd, role))}{ports}"


def _reasons(cols: Columns, base: Breakdown, new: Breakdown, cand_idx: NDArray[np.int64],
             cands: list[Candidate], base_node: Strings, new_node: Strings, base_gpu: Strings,
             new_gpu: Strings, base_role: NDArray[np.object_], new_role: NDArray[np.object_],
             catalog: Catalog, min_gain: float = 0.0,
             priced: NDArray[np.bool_] | None = None,
             by_ops: NDArray[np.bool_] | None = None) -> NDArray[np.object_]:
    """One line per job naming what its change cuts: the component whose time falls most
    (``base - new``, which the speedup comes from; a kept job: its bottleneck), and where the
    change moves the job to another GPU on which its compute time falls too (by more than
    ``min_gain`` of it), that as well; built once per distinct combination. ``priced`` (the
    cheapest choice: whether each job's present setup has a price): the change costs less per
    iteration, and the line says whether it is also faster, as fast or slower (equal within a
    relative 1e-9); for a job whose present setup has no price, that it is the cheapest priced
    option. A job the model cannot time as it is (a reason other than ok) keeps that reason; one
    that a candidate fits is told so, with the reason it has no time as given. ``by_ops``: the
    jobs priced op by op from a per-op table (their GPU's rates for aggregate work are not what
    they were priced at)."""
    bb = base.bottleneck_code()
    with np.errstate(invalid="ignore"):
        saved = np.stack([np.asarray(getattr(base, c), dtype=np.float64)
                          - np.asarray(getattr(new, c), dtype=np.float64) for c in COMPONENTS])
    cut = np.where((cand_idx >= 0) & np.isfinite(saved).all(axis=0),
                   np.argmax(saved, axis=0), bb)
    # whose compute time falls too, by more than min_gain of it (on another GPU: said beside
    # the part it cuts most)
    compute = [COMPONENTS.index("compute_flop"), COMPONENTS.index("compute_mem")]
    base_compute = np.asarray(base.compute, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        faster = (base_compute - np.asarray(new.compute, dtype=np.float64)
                  > min_gain * base_compute).astype(np.int64)
    arch = cols["architecture"]
    role_names = ("", "pcie", "intra", "nic")
    base_rc, new_rc = (_role_codes(x, role_names) for x in (base_role, new_role))
    with np.errstate(invalid="ignore"):
        t_new, t_base = np.asarray(new.total), np.asarray(base.total)
        pace = np.where(np.isclose(t_new, t_base, rtol=1e-9, atol=0.0), 1,
                        np.where(t_new < t_base, 2, 0))
    has_price = np.ones(len(pace), dtype=np.int64) if priced is None else priced.astype(np.int64)
    parts = [(cand_idx, len(cands)), (bb, len(BOTTLENECKS)), (cut, len(BOTTLENECKS)),
             (pace, 3), (has_price, 2),
             (np.zeros(len(pace)) if by_ops is None else by_ops.astype(np.int64), 2),
             (arch.codes, len(arch.values)),
             (base_node.codes, len(base_node.values)), (new_node.codes, len(new_node.values)),
             (base_gpu.codes, len(base_gpu.values)), (new_gpu.codes, len(new_gpu.values)),
             (base_rc, len(role_names)), (new_rc, len(role_names)), (faster, 2)]
    key = _mixed_radix(parts)
    uniq, inverse = np.unique(key, return_inverse=True)
    roles = np.array(role_names, dtype=object)
    texts = []
    for ci, b, cu, pc, hp, bo, ac, bn, nn, bg, ng, br, nr, fa in _digits(uniq, parts):
        target, what = _reason_parts(cands[ci] if ci >= 0 else None, int(b), int(cu), min_gain,
                                     arch.values[ac] if ac >= 0 else "?", base_node.values[bn],
                                     new_node.values[nn], base_gpu.values[bg],
                                     new_gpu.values[ng], (str(roles[br]), str(roles[nr])),
                                     catalog, bool(bo))
        gpu_from, gpu_to = base_gpu.values[bg], new_gpu.values[ng]
        if ci >= 0 and b >= 0 and fa and gpu_from != gpu_to and int(cu) not in compute:
            what += f"; its compute runs faster on {gpu_to} than on {gpu_from} too"
        if priced is not None and b >= 0:
            texts.append(_cost_text(target, what, int(pc), bool(hp), min_gain))
        else:
            texts.append(f"{target}: {what}" if target else what)
    out = np.array(texts, dtype=object)[inverse.reshape(-1)]
    why = np.asarray(base.reason, dtype=np.int64) if base.reason is not None else None
    unknown = (bb < 0) & (why != OK) if why is not None else None
    if unknown is not None and unknown.any():  # say why there is no time
        named = np.array(REASONS, dtype=object)[why]
        out = np.where(unknown & (cand_idx < 0), "unknown: " + named,
                       np.where(unknown, out + " (as given: " + named + ")", out))
    return out


def _cost_text(target: str, what: str, pace: int, has_price: bool, min_gain: float) -> str:
    """The cheapest choice's line from the parts of the same change's time line
    (``_reason_parts``): it costs less per iteration; ``pace`` 2 (faster) also says what it
    cuts, 1 that it is as fast, 0 that it is slower; without a price for the present setup,
    that it is the cheapest priced option (nothing to be cheaper than)."""
    if not target:  # the bar: C_base / C_new > 1 + g, a saving of more than g / (1 + g)
        return (f"keep: no option that fits saves more than "
                f"{100 * min_gain / (1 + min_gain):.3g}% per iteration")
    cheaper = "cheaper per iteration" if has_price else \
        "the cheapest priced option (the present setup has no price)"
    if pace == 2:
        return f"{target}: {cheaper}, and faster: {what}"
    return f"{target}: {cheaper}, " + ("as fast" if pace == 1 else "though slower")


def _role_codes(roles: NDArray[np.object_], names: tuple[str, ...]) -> NDArray[np.int64]:
    """Link roles (``Architecture.link_role``: ``""``, ``"pcie"``, ``"intra"``, ``"nic"``) as
    codes into ``names``, one comparison per name (no per-row Python)."""
    codes = np.full(len(roles), -1, dtype=np.int64)
    for i, name in enumerate(names):
        codes[roles == name] = i
    if (codes < 0).any():
        raise ValueError(f"link role {roles[np.argmax(codes < 0)]!r} is not one of {names}")
    return codes


def _mixed_radix(parts: list[tuple[NDArray[Any], int]]) -> NDArray[np.int64]:
    """One int64 per row from small code columns (``(codes, size)``; codes in ``[-1, size)``):
    ``Σ (code + 1) · Π (sizes + 1) of the columns before`` — equal keys, equal rows, so one
    1-D ``np.unique`` groups the rows (a row-wise ``unique(axis=0)`` sorts far slower)."""
    key = np.zeros(len(parts[0][0]), dtype=np.int64)
    scale = 1
    for codes, size in parts:
        key += (np.asarray(codes, dtype=np.int64) + 1) * scale
        scale *= size + 1
    if scale >= 2 ** 62:
        raise OverflowError("too many distinct codes for one int64 key")
    return key


def _digits(keys: NDArray[np.int64], parts: list[tuple[NDArray[Any], int]]
            ) -> list[tuple[int, ...]]:
    """The code columns of each :func:`_mixed_radix` key (its inverse), one tuple per key."""
    out = []
    for key in keys.tolist():
        row = []
        for _, size in parts:
            key, digit = divmod(key, size + 1)
            row.append(digit - 1)
        out.append(tuple(row))
    return out


def _reason_parts(cand: Candidate | None, b: int, cut: int, min_gain: float, arch: str,
                  base_node: str, new_node: str, base_gpu: str, new_gpu: str,
                  roles: tuple[str, str], catalog: Catalog,
                  by_ops: bool = False) -> tuple[str, str]:
    """The reason of one choice as (the change, what it does): ``b`` the job's bottleneck now,
    ``cut`` the component whose time the change cuts most (both codes into ``BOTTLENECKS``; -1 =
    unknown, or none: a job whose time is 0 s; a job without a time is said by the caller, from
    its reason). No change (``cand`` None): an empty change and the whole line."""
    if cand is None:
        if b < 0:
            return "", "keep: nothing to gain (every component of its time is 0 s)"
        return "", (f"keep: no option that fits is more than {100 * min_gain:g}% faster "
                    f"(bottleneck: {BOTTLENECK_LABEL[BOTTLENECKS[b]]})")
    target = f"{cand.architecture} on {new_node}" + (f" ({new_gpu})" if new_gpu != base_gpu
                                                      else "")
    if b < 0:
        return target, "fits and has a predicted time"
    comp = BOTTLENECKS[cut if cut >= 0 else b]
    what = BOTTLENECK_LABEL[comp]
    verb = f"eases the {what} bottleneck" if comp == BOTTLENECKS[b] else f"cuts {what} time"
    if comp == "comm":
        old = _over(arch, roles[0], base_node, catalog)
        if cand.architecture == "1w1g":
            return target, f"one GPU needs no {what} ({old})"
        if cand.architecture == arch == "ps-worker" and new_node == base_node:
            if roles[0] == "pcie":  # more servers shorten the network side alone
                return target, (f"one parameter server per worker node cuts the network side "
                                f"of its {what} ({old}: its copies through the host stay)")
            return target, f"one parameter server per worker node {verb} ({old})"
        new = _over(cand.architecture, roles[1], new_node, catalog)
        return target, f"{verb} ({old}) with {new}"
    if comp == "data_io":
        old = _label(catalog, catalog.nodes[base_node].pcie) if base_node in catalog.nodes else "?"
        new = _label(catalog, catalog.nodes[new_node].pcie) if new_node in catalog.nodes else "?"
        return target, verb + (f" ({old} -> {new})" if old != new else "")
    detail = ""
    if new_gpu != base_gpu and by_ops:  # each op at its own rate: no one rate to quote
        detail = f" ({base_gpu} -> {new_gpu}, each of its ops priced on each GPU)"
    elif new_gpu != base_gpu:
        try:  # the rates the jobs' fp32 work was priced at (compute.rates), not the datasheet's
            i, scale, unit = (0, 1e12, "TFLOP/s") if comp == "compute_flop" else (1, 1e9, "GB/s")
            old_v, new_v = (rates(catalog.gpu(g), "fp32", catalog.compute)[i] / scale
                            for g in (base_gpu, new_gpu))
            detail = f" ({base_gpu} {old_v:.3g} -> {new_gpu} {new_v:.3g} {unit} achievable)"
        except KeyError:
            pass
    return target, verb + detail


MIN_GAIN = 0.05
"""Default ``min_gain`` of :func:`recommend`: a change is recommended only when it is more than
5% faster (``--min-gain``; the cheapest choice: more than 5% cheaper) than the job as it runs.
Smaller predicted gains are within what the model's inputs (features, efficiencies) decide,
not a reason to move a job."""
MIN_GAIN_MAX = 100.0
"""The largest ``--min-gain``: a change 101 times as fast (10,000% faster); above it a typo
(an exponent), which would recommend nothing and print a gain of 1e+302%."""


NEAR_TIE = 0.01
"""On one node, a later candidate displaces the one chosen only when more than this fraction
faster, and another node displaces the job's own hardware only so: a PEARL ring over
embeddings of a few bytes, 0.004% faster than the plain all-reduce, is no reason to recommend
it (:func:`_search`)."""


def recommend(jobs: Any, catalog: Catalog | None = None, *,
              candidates: list[Candidate] | None = None, nodes: Iterable[str] | None = None,
              prices: Prices | str | Path | None = None, overlap: float = 0.0,
              hierarchical: bool = False,
              progress: Progress | None = None,
              base: tuple[Breakdown, Resolved] | None = None,
              min_gain: float = MIN_GAIN, workloads: Workloads = SHIPPED) -> dict[str, Any]:
    """For every job: the fastest architecture on its own hardware, the fastest (architecture,
    node preset) overall, each with its speedup and a one-line reason; with ``prices``, the
    cheapest per iteration. Returns ``{"jobs", "candidates", "summary", "rows"}`` (``rows`` a
    pyarrow Table, one row per job). ``base``: the jobs' own ``evaluate_columns(Columns.of(
    jobs), catalog, overlap, hierarchical)`` when the caller has it (not evaluated again).
    ``progress(step, done, total)`` is called after each step: each candidate, then each
    choice (``arch``, ``best``, ``cheapest``) and the summary (:func:`steps` counts them).
    ``min_gain``: a job keeps its present setup unless the best candidate beats it by more
    than this fraction (``T_base / T_new > 1 + min_gain``; for the cheapest, cost), so no
    change is recommended for a gain the model cannot tell from noise (:data:`MIN_GAIN`).
    ``workloads``: the per-op table of a workload, whose rows are then priced op by op, its
    profile record, for the memory a port needs, and the jobs' precision
    (``engine.local.Workloads``; the shipped zoo's, fp32, by default)."""
    if not min_gain >= 0:
        raise TraincastError(f"--min-gain {min_gain}: must be a fraction >= 0",
                             hint="e.g. --min-gain 0.05 (5%)")
    catalog = catalog or load_catalog()
    if isinstance(prices, str | Path):
        prices = load_prices(prices, catalog)
    cols = Columns.of(jobs)
    cands = candidates or default_candidates(catalog, nodes)
    total_steps = steps(len(cands), prices is not None)
    done = [0]

    def advance(step: str) -> None:
        done[0] += 1
        if progress:
            progress(step, done[0], total_steps)

    extras = workload_extras(cols, workloads.profile_of)
    base, base_r = base or evaluate_columns(cols, catalog, overlap, hierarchical,
                                            workloads.ops_of, amp=workloads.amp)
    base_node, base_gpu = base_r.node, base_r.gpu
    base_role = _link_roles(base_r)
    n = cols.n
    workload = cols["workload"]
    by_ops = np.isin(workload.codes, list(ops_tables(workload, workloads.ops_of)))  # op by op
    cost = partial(_cost_usd, prices, np.nan_to_num(cols["n_gpus"], nan=1.0))
    base_t = np.where(np.isfinite(base.total), base.total, np.inf)
    base_cost = cost(base.total, base_node, base_gpu)
    if prices is not None:
        _check_priced(prices, catalog, cands, base_node, base_gpu)
    start = {"arch": base_t, "best": base_t}
    if prices is not None:
        start["cheap"] = np.where(np.isfinite(base_cost), base_cost, np.inf)
    # the bar a candidate must beat: the job as it runs, min_gain faster (cheaper); a job no
    # candidate beats keeps its setup (index -1)
    best = {g: (v / (1.0 + min_gain), np.full(n, -1)) for g, v in start.items()}
    _search(cols, extras, cands, best, cost, catalog, overlap, hierarchical, advance, workloads,
            present_s=base_t, present_node=base_node)
    # a job with a time that as given does not fit its GPU's memory: said where it is kept
    over, need = exceeds_memory(base_r, extras)
    over &= np.isfinite(base.total)
    too_big = np.full(n, "", dtype=object)
    too_big[over] = np.char.add(np.char.add(np.char.add(
        "; as given it does not fit its GPU's memory (", np.char.mod("%.3g", need[over] / 1e9)),
        " GB per GPU of "), np.char.mod("%.3g GB)", base_r.mem_gb[over]))
    rows: dict[str, Any] = {
        "job_id": cols["job_id"],
        "architecture": cols["architecture"].arrow(), "node": base_node.arrow(),
        "gpu": base_gpu.arrow(),
        # the hardware is the trace's when it names a GPU type or node, else assumed
        "gpu_type_given": (cols["gpu_type"].codes >= 0) | (cols["node"].codes >= 0),
        "n_gpus": cols["n_gpus"], "base_total_s": base.total,
        "base_bottleneck": base.bottleneck_names()}
    for g, prefix in (("arch", "arch"), ("best", "best"), ("cheap", "cheapest")):
        if g == "cheap" and prices is None:
            continue
        idx = best[g][1]
        chosen = _chosen(cols, extras, cands, idx, base, base_node, base_gpu, base_role,
                         catalog, overlap, hierarchical, workloads)
        rows.update(_choice_columns(prefix, idx, chosen, cols, cands, base, base_node,
                                    base_gpu, base_role, catalog, min_gain,
                                    np.isfinite(base_cost) if g == "cheap" else None, by_ops))
        kept = over & (idx < 0)
        rows[f"{prefix}_reason"][kept] += too_big[kept]
        if g == "cheap":
            rows["base_cost_per_iter_usd"] = base_cost
            rows["cheapest_cost_per_iter_usd"] = cost(*chosen[:3])
        advance(f"choosing {prefix}")
    cpu = cpu_jobs(cols["n_gpus"], rows["gpu_type_given"])
    gpu_jobs = np.asarray(cols["n_gpus"], dtype=np.float64) != 0  # no cost of a CPU job
    table = without_hardware(pa.table({k: pa.array(v, from_pandas=True)
                                       if isinstance(v, np.ndarray) else v
                                       for k, v in rows.items()}), cpu)
    summary = _summary(table, prices is not None)
    advance("summary")
    left_out = {} if candidates or nodes is not None else left_out_nodes(catalog)
    unpriced = [] if prices is None else sorted(
        {c.node for c in cands if c.node and
         not np.isfinite(prices.per_gpu_hour(c.node, catalog.node(c.node).gpu))}
        | {base_node.values[a] for a, b in np.unique(  # the GPU jobs' own hardware too
            np.stack([base_node.codes, base_gpu.codes])[:, gpu_jobs], axis=1).T
           if a >= 0 and b >= 0
           and not np.isfinite(prices.per_gpu_hour(base_node.values[a], base_gpu.values[b]))})
    flat = flat_peak_gpus(catalog, {catalog.node(c.node).gpu for c in cands if c.node})
    held = np.unique(base_gpu.codes[(base_gpu.codes >= 0) & (base_r.reason == OK)])
    own_flat = flat_peak_gpus(catalog, {base_gpu.values[i] for i in held})  # priced jobs
    return {"jobs": n, "candidates": [c.scenario.name for c in cands], "min_gain": min_gain,
            "left_out": left_out, "unpriced_nodes": unpriced, "flat_peak_gpus": flat,
            "own_flat_peak_gpus": own_flat,
            "prices": None if prices is None else {"file": prices.path,
                                                   "sources": prices.sources},
            "summary": summary, "rows": table}


def _check_priced(prices: Prices, catalog: Catalog, cands: list[Candidate],
                  base_node: Strings, base_gpu: Strings) -> None:
    """A price file that prices none of the nodes the options run on, nor any job's own
    hardware, makes every cost unknown: an error naming the file (a "cheapest" choice would
    compare nothing), as ``plan`` refuses it."""
    nodes = {c.node for c in cands if c.node} | {n for n in base_node.values if n}
    pairs = {(n, catalog.node(n).gpu) for n in nodes if n in catalog.nodes}
    pairs |= {("", g) for g in base_gpu.values if g}
    if any(np.isfinite(prices.per_gpu_hour(node, gpu)) for node, gpu in pairs):
        return
    gpus = {g for _, g in pairs}
    spot = " (it gives spot prices only: plan --spot uses them)" if (
        prices.spot_by_gpu or prices.spot_by_node) else ""
    raise TraincastError(f"{prices.path}: prices none of the GPUs or nodes the options run on"
                         f"{spot}, so no cost can be compared",
                         hint="give usd_per_gpu_hour for at least one of "
                              f"{', '.join(sorted(gpus)[:6])} ([gpu.NAME] or [node.PRESET])")


def _cost_usd(prices: Prices | None, gpus: F, total_s: F, node: Strings, gpu: Strings,
              rows: slice = slice(None)) -> F:
    """Cost per iteration of the jobs ``rows``: ``total_s × gpus × USD per GPU-hour of (node,
    GPU) / 3600`` (NaN without prices, or where the time or the price is unknown)."""
    if prices is None:
        return np.full(len(total_s), np.nan)
    lut = np.array([[prices.per_gpu_hour(nd, g) for g in (*gpu.values, "")]
                    for nd in (*node.values, "")])
    with np.errstate(invalid="ignore"):  # unknown time or price -> NaN cost
        return total_s * gpus[rows] * lut[node.codes, gpu.codes] / 3600.0


def _search(cols: Columns, extras: WorkloadExtras, cands: list[Candidate],
            best: dict[str, tuple[F, NDArray[np.int64]]],
            cost: Callable[[F, Strings, Strings, slice], F], catalog: Catalog, overlap: float,
            hierarchical: bool, advance: Callable[[str], None],
            workloads: Workloads = SHIPPED, *, present_s: F, present_node: Strings) -> None:
    """Every candidate over every job: ``best[group]`` (the bar :func:`recommend` sets: the
    present setup, ``min_gain`` faster or cheaper; and the chosen candidate's index, -1 = keep,
    set in place) for ``arch`` (the job's own hardware), ``best`` (time, anywhere) and ``cheap``
    (cost, when present). Only a candidate that fits and beats the bar by more than a relative
    1e-12 counts. ``cheap``: the lowest cost, the earliest candidate (the job's own hardware
    first, then node by node) displaced only by one more than ``NEAR_TIE`` cheaper, as for time
    (on one node cost is time: PEARL 0.005% faster than AllReduce is no reason to choose it).
    Time, by :class:`_Choice`: on one node (the job's own hardware is one) the earliest
    candidate, in the registry's order of architectures (simplest first), unless a later one is
    more than ``NEAR_TIE`` faster than the one chosen so far; ``arch`` is the own hardware's
    choice; ``best`` the own hardware's, unless the fastest of the other nodes' choices is more
    than ``NEAR_TIE`` faster than it and than the job as it runs (``present_s``), then that
    choice (ties: the node first by name). The candidates are taken node by node, whatever the
    order given. Jobs are evaluated in chunks of ``engine.local.CHUNK_ROWS`` rows (a job's
    numbers depend on its own row alone; on 1 M rows a chunked candidate took 0.18 s against
    0.28 s whole: numpy's temporaries stay small)."""
    spans = [slice(a, min(a + CHUNK_ROWS, cols.n)) for a in range(0, cols.n, CHUNK_ROWS)]
    parts = [(cols.slice(sp.start, sp.stop), extras.take(rows), present_node.take(rows))
             for sp in spans for rows in [np.arange(sp.start, sp.stop)]]
    names = sorted({c.node for c in cands if c.node})
    node_of = [names.index(c.node) if c.node else -1 for c in cands]
    own = _Choice(cols.n)  # the job's own hardware
    node = _Choice(cols.n)  # the node in hand (candidates run node by node)
    other_s, other_idx = np.full(cols.n, np.inf), np.full(cols.n, -1)  # the fastest node's
    block = -1
    for i in sorted(range(len(cands)), key=lambda j: (node_of[j], j)):
        cand = cands[i]
        if node_of[i] != block:  # a node's candidates are done: the fastest node so far?
            other_s, other_idx = node.merge_into(other_s, other_idx)
            node, block = _Choice(cols.n), node_of[i]
        for sp, (sub, ext, at) in zip(spans, parts, strict=True):
            bd, r, ok = _candidate(sub, ext, cand, catalog, overlap, hierarchical, workloads,
                                   at)
            t = np.where(ok & np.isfinite(bd.total), bd.total, np.inf)
            beats = t < best["best"][0][sp] * (1 - 1e-12)  # the bar: arch's and best's alike
            (own if block < 0 else node).add(sp, np.where(beats, t, np.inf), i)
            if "cheap" in best:
                c = cost(t, r.node, r.gpu, sp)
                val = np.where(np.isfinite(c), c, np.inf)
                cur, idx = best["cheap"][0][sp], best["cheap"][1][sp]  # views
                better = val < cur * np.where(idx >= 0, 1 - NEAR_TIE, 1 - 1e-12)
                cur[better] = val[better]
                idx[better] = i
        advance(cand.scenario.name)
    other_s, other_idx = node.merge_into(other_s, other_idx)
    best["arch"][1][:] = own.idx
    ref_s = np.minimum(own.val, present_s)
    moves = (other_idx >= 0) & (other_s < ref_s * (1 - NEAR_TIE))
    best["best"][1][:] = np.where(moves, other_idx, own.idx)


class _Choice:
    """Per job, the choice among one node's candidates given in the registry's order: ``val``
    and ``idx`` of the earliest, displaced only by one more than ``NEAR_TIE`` faster (inf and
    -1: no candidate)."""

    def __init__(self, n: int) -> None:
        self.val, self.idx = np.full(n, np.inf), np.full(n, -1)

    def add(self, sp: slice, t: F, i: int) -> None:
        val, idx = self.val[sp], self.idx[sp]  # views: updated in place
        better = t < val * np.where(idx >= 0, 1 - NEAR_TIE, 1 - 1e-12)
        val[better] = t[better]
        idx[better] = i

    def merge_into(self, val: F, idx: NDArray[np.int64]) -> tuple[F, NDArray[np.int64]]:
        """``(val, idx)`` of the fastest choice so far over the nodes, this node's where its
        choice is faster (ties: the earlier node)."""
        faster = self.val < val * (1 - 1e-12)
        return np.where(faster, self.val, val), np.where(faster, self.idx, idx)


GAINED_ROWS = 20
"""Jobs a per-job table of recommend shows, the terminal's and the report's: those that gain
most (:func:`gain_order`)."""


def gain_order(speedup: ArrayLike) -> NDArray[np.int64]:
    """Job indices by speedup, largest first (ties in the trace's order), jobs without one
    (NaN) last: the order in which the terminal and the report show the jobs that gain most."""
    sp = np.asarray(speedup, dtype=np.float64)
    return np.argsort(-np.where(np.isfinite(sp), sp, -np.inf), kind="stable")


def steps(n_candidates: int, priced: bool) -> int:
    """Steps :func:`recommend` reports to ``progress``: one per candidate, one per choice
    (``arch``, ``best``, and ``cheapest`` when priced), one for the summary."""
    return n_candidates + (3 if priced else 2) + 1


HARDWARE_COLUMNS = ("node", "gpu", "arch_node", "arch_gpu", "best_node", "best_gpu",
                    "cheapest_node", "cheapest_gpu")
"""The recommendation's node and GPU columns: none for a job without GPUs."""


def cpu_jobs(n_gpus: ArrayLike, hardware_given: ArrayLike) -> NDArray[np.bool_]:
    """The jobs of 0 GPUs whose trace names neither a GPU type nor a node: their node is only
    the default one (a count that is missing is no CPU job: its GPUs are unknown)."""
    return (np.asarray(n_gpus, dtype=np.float64) == 0) & ~np.asarray(hardware_given, dtype=bool)


def without_hardware(table: pa.Table, cpu: NDArray[np.bool_]) -> pa.Table:
    """``table`` with its :data:`HARDWARE_COLUMNS` null for the ``cpu`` jobs
    (:func:`cpu_jobs`: a CPU job has no GPU node to keep or move to; the node its GPU type
    would default to is no fact of it)."""
    import pyarrow.compute as pc

    none = pa.array(cpu)
    for name in HARDWARE_COLUMNS:
        if name in table.column_names:
            col = table[name]
            table = table.set_column(table.column_names.index(name), name,
                                     pc.if_else(none, pa.scalar(None, col.type), col))
    return table


def _choice_columns(prefix: str, idx: NDArray[np.int64],
                    chosen: tuple[F, Strings, Strings, NDArray[np.object_], Breakdown],
                    cols: Columns, cands: list[Candidate], base: Breakdown, base_node: Strings,
                    base_gpu: Strings, base_role: NDArray[np.object_],
                    catalog: Catalog, min_gain: float = 0.0,
                    priced: NDArray[np.bool_] | None = None,
                    by_ops: NDArray[np.bool_] | None = None) -> dict[str, Any]:
    """The output columns ``{prefix}_architecture``, ``_node``, ``_gpu``, ``_total_s``,
    ``_speedup`` (base total / chosen total), ``_bottleneck`` and ``_reason`` of one choice:
    each job's candidate ``idx`` (-1 = as it is) and its :func:`_chosen` evaluation. A job
    whose choice has no time (no prediction: no features, or no setup that fits) has no
    choice: its architecture, node and GPU are null."""
    import pyarrow.compute as pc

    total, new_node, new_gpu, new_role, bd = chosen
    with np.errstate(divide="ignore", invalid="ignore"):
        speedup = base.total / total
    names = np.array([c.architecture for c in cands] + [""], dtype=object)
    known = np.isfinite(np.asarray(total, dtype=np.float64))

    def chosen_only(col: pa.Array) -> pa.Array:
        return pc.if_else(pa.array(known), col, pa.scalar(None, col.type))

    return {
        f"{prefix}_architecture": np.where(
            known, np.where(idx >= 0, names[idx], cols["architecture"].strings()), None),
        f"{prefix}_node": chosen_only(new_node.arrow()),
        f"{prefix}_gpu": chosen_only(new_gpu.arrow()),
        f"{prefix}_total_s": total, f"{prefix}_speedup": speedup,
        f"{prefix}_bottleneck": bd.bottleneck_names(),
        f"{prefix}_reason": _reasons(cols, base, bd, idx, cands, base_node, new_node, base_gpu,
                                     new_gpu, base_role, new_role, catalog, min_gain,
                                     priced, by_ops)}


def _chosen(cols: Columns, extras: WorkloadExtras, cands: list[Candidate], idx: NDArray[Any],
            base: Breakdown, base_node: Strings, base_gpu: Strings,
            base_role: NDArray[np.object_], catalog: Catalog, overlap: float,
            hierarchical: bool, workloads: Workloads = SHIPPED
            ) -> tuple[F, Strings, Strings, NDArray[np.object_], Breakdown]:
    """Breakdown, hardware and communication link role of each job's chosen candidate
    (evaluated once per candidate)."""
    parts = {c: np.array(getattr(base, c), dtype=np.float64)
             for c in (*COMPONENTS, "total", "host_wait")}
    roles = base_role.copy()
    node_codes, gpu_codes = base_node.codes.copy(), base_gpu.codes.copy()
    node_vals, gpu_vals = list(base_node.values), list(base_gpu.values)
    for ci in np.unique(idx[idx >= 0]):
        rows = np.flatnonzero(idx == ci)
        bd, r, _ = _candidate(cols.take(rows), extras.take(rows), cands[ci], catalog, overlap,
                              hierarchical, workloads, base_node.take(rows))
        for c in parts:
            parts[c][rows] = getattr(bd, c)
        roles[rows] = _link_roles(r)
        nn, ng = r.node, r.gpu
        for codes, vals, s in ((node_codes, node_vals, nn), (gpu_codes, gpu_vals, ng)):
            for v in s.values:
                if v not in vals:
                    vals.append(v)
            remap = np.array([vals.index(v) for v in s.values] + [-1], dtype=np.int32)
            codes[rows] = remap[s.codes]
    wait = parts.pop("host_wait")
    bd = Breakdown(**parts, idle=wait)
    return (parts["total"], Strings(node_codes, tuple(node_vals)),
            Strings(gpu_codes, tuple(gpu_vals)), roles, bd)


def _differs(a: pa.ChunkedArray, b: pa.ChunkedArray) -> NDArray[np.bool_]:
    """Per row, whether two string columns (plain or dictionary-encoded) hold different values
    (null equals null only)."""
    import pyarrow.compute as pc

    a, b = pc.cast(a, pa.string()), pc.cast(b, pa.string())
    same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
    return ~same.to_numpy(zero_copy_only=False).astype(bool)


def _summary(rows: pa.Table, priced: bool) -> dict[str, Any]:
    """Counts of recommended architectures/nodes and mean speedups over jobs with a prediction;
    ``changed_share``: the share of them whose choice is another architecture or node than the
    job's own (for the cheapest, a slower one too); ``changed_mean_speedup``: the mean speedup
    over those changed jobs alone (NaN: none). The cheapest also has ``priced`` (jobs whose
    present setup and choice both have a cost) and, summed over them, ``usd_per_1k_now`` and
    ``usd_per_1k_chosen``: USD per 1,000 iterations of every such job, as it runs and as
    chosen (None when no job's present setup is priced)."""
    out: dict[str, Any] = {}
    for prefix in ("arch", "best", *(["cheapest"] if priced else [])):
        sp = rows[f"{prefix}_speedup"].to_numpy(zero_copy_only=False).astype(float)
        ok = np.isfinite(sp)
        changed = ok & (_differs(rows[f"{prefix}_architecture"], rows["architecture"])
                        | _differs(rows[f"{prefix}_node"], rows["node"]))
        arch = rows[f"{prefix}_architecture"]
        out[prefix] = {
            "predicted": int(ok.sum()),
            "changed_share": float(changed.sum() / ok.sum()) if ok.any() else float("nan"),
            "mean_speedup": float(sp[ok].mean()) if ok.any() else float("nan"),
            "changed_mean_speedup": float(sp[changed].mean()) if changed.any()
            else float("nan"),
            "median_speedup": float(np.median(sp[ok])) if ok.any() else float("nan"),
            "architectures": _counts(arch, ok), "nodes": _counts(rows[f"{prefix}_node"], ok),
            "changed_to": _counts(arch, changed)}
    if priced:
        now, chosen = (rows[k].to_numpy(zero_copy_only=False).astype(float)
                       for k in ("base_cost_per_iter_usd", "cheapest_cost_per_iter_usd"))
        both = np.isfinite(now) & np.isfinite(chosen)
        out["cheapest"] |= {"priced": int(both.sum()),  # sums over no job: unknown, not $0
                            "usd_per_1k_now": float(1000.0 * now[both].sum()) if both.any()
                            else None,
                            "usd_per_1k_chosen": float(1000.0 * chosen[both].sum())
                            if both.any() else None}
    return out


def unpriced_why(cheapest: dict[str, Any], file: str) -> str:
    """Why the cheapest summary prices no job now and as chosen (its ``priced`` is 0): no job
    has a prediction, or no job's present setup has a price in the price ``file``."""
    if not cheapest.get("predicted"):
        return "no job has a prediction, so no cost can be compared"
    return (f"no job's present setup has a price in {file} (its GPU or node is not in the "
            "file), so the cheapest choices are not compared with what the jobs cost now")


def _counts(values: pa.ChunkedArray | pa.Array, sel: NDArray[np.bool_]) -> dict[str, int]:
    """Rows of ``sel`` per value (null counted as ``"None"``), most frequent first, ties by
    name: one dictionary encoding, then a count per code."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    enc = values.cast(pa.string()).dictionary_encode()
    names = [str(v) for v in enc.dictionary.to_pylist()] + ["None"]
    codes = enc.indices.fill_null(len(names) - 1).to_numpy(zero_copy_only=False)
    counts = np.bincount(codes[sel], minlength=len(names))
    merged: dict[str, int] = {}
    for name, c in zip(names, counts.tolist(), strict=True):
        if c:
            merged[name] = merged.get(name, 0) + c
    return dict(sorted(merged.items(), key=lambda kv: (-kv[1], kv[0])))
