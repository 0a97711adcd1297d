"""Resolve a job table against the catalog: the one place where defaults, aliases, placement
and validity of jobs live. Everything that predicts (``predict``, what-if, recommend,
characterize, ``hybrid``) calls :func:`resolve`.

For each row:

* **hardware** — node preset: the row's ``node``; when empty, the ``default_node`` of its GPU
  type, else that GPU's node preset with the most GPUs (:meth:`Catalog.default_node_of`;
  where the trace's ``gpus_per_node`` exceeds its GPUs: the smallest preset of that GPU that
  holds them, :meth:`~traincast.hardware.catalog.Catalog.node_holding`, if any); else
  the caller's ``default_node``, else the catalog's (``[defaults] node`` of a catalog file),
  else ``DEFAULT_NODE``. GPU: the ``gpu_type`` (aliases
  resolved), else the node's GPU; ``gpu=`` overrides it for every row. Links: the node's
  ``pcie``/``intra``/``nic`` (``rails`` = its ``nics`` ports), each replaceable for every row.
* **placement** — ``n`` = the job's training GPUs (:func:`training_gpus`: ``n_workers ×
  gpus_per_worker`` where the trace gives both, at most ``n_gpus``; else ``n_gpus``: GPUs no
  worker holds, such as a PAI evaluator's, take no part in the training step, while the
  cluster shares of ``characterize`` still count every GPU, ``n_gpus``); ``g`` (GPUs per
  node) = ``gpus_per_node`` where the trace says, else packed: ``min(n, node GPUs)`` (8,
  ``UNKNOWN_NODE_GPUS``, where the catalog does not know the row's node or GPU);
  ``N = ceil(n / g)``; workers ``m`` = ``n_workers`` where given, else ``n / w`` with ``w`` =
  ``gpus_per_worker`` (default 1); workers per node ``k`` = ``workers_per_node`` where given,
  else ``min(m, max(1, floor(g / w)))``; parameter servers ``p`` = ``n_ps`` where given,
  else 1; the GPU share of one replica ``s`` = ``gpus_per_worker`` where the trace gives
  it, else ``n / m``, where it is below 1 (GPU sharing: Alibaba 2023's
  ``gpu_milli``, PAI's ``plan_gpu`` < 100), else 1: the compute model divides the GPU's busy
  time by ``s`` (:func:`traincast.predict.compute_s`).
* **features** — ``flops_compute_bound``, ``bytes_memory_bound``, ``weight_bytes`` required;
  ``embedding_bytes_touched`` and ``input_bytes`` default to 0; ``embedding_allreduce_bytes``
  defaults to ``embedding_bytes_touched``.
* **architecture** — the row's ``architecture``; where the trace gives none: ``n <= 1`` ->
  1w1g, ``n <= g`` (the placement's GPUs per node: the job fits on one node) ->
  allreduce-local, else allreduce-cluster.
* **validity** — a reason code per row (:data:`REASONS`); rows with a code other than 0 get
  no prediction (NaN times) and are counted by reason in ``whatif``/``characterize``. A
  feature that is negative or infinite is invalid (its time would be negative or infinite),
  a null one missing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from traincast.architectures import ARCH_CODE, ARCHITECTURES, per_architecture
from traincast.bounds import feature_max
from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, Link, canonical_gpu, unknown_name
from traincast.jobs import Columns, Strings
from traincast.resolved import Resolved  # also read as traincast.resolve.Resolved
from traincast.units import parse_speed_gbs

F = NDArray[np.float64]
DEFAULT_NODE = "pai-v100-nvlink"
UNKNOWN_NODE_GPUS = 8.0
"""GPUs per node of a row whose node or GPU the catalog does not know, for its placement and
inferred architecture (docs/traces.md: "else 8"): a 2-GPU job of an unknown GPU type is
allreduce-local, as on the default node."""
REASONS: tuple[str, ...] = (
    "ok",
    "unknown architecture",
    "unknown node or GPU type",
    "no GPUs (n_gpus missing or 0)",
    "more GPUs per node than the node has",
    "shape does not fit the architecture",
    "features missing",
    "features negative, not finite or out of bounds",
    "time not finite (a GPU count or feature at the edge of what the model prices)",
)
(OK, BAD_ARCH, BAD_HARDWARE, BAD_GPUS, BAD_PLACEMENT, BAD_SHAPE, NO_FEATURES,
 BAD_FEATURES, NOT_FINITE) = range(9)
FEATURE_FIELDS: tuple[tuple[str, str], ...] = (
    ("flops", "flops_compute_bound"), ("mem_bytes", "bytes_memory_bound"), ("w", "weight_bytes"),
    ("e", "embedding_bytes_touched"), ("e_ar", "embedding_allreduce_bytes"),
    ("input_bytes", "input_bytes"), ("n_ops", "n_ops"))
"""Feature fields of :class:`Resolved` and the job-table columns they come from (``n_ops``:
the ops one step issues, optional, NaN when not known)."""


def fallback_node(catalog: Catalog, default_node: str | None = None) -> str:
    """The node of a job that names neither a node nor a GPU type: ``default_node`` (the
    caller's), else the catalog's ``[defaults] node``, else :data:`DEFAULT_NODE`."""
    return default_node or catalog.fallback_node or DEFAULT_NODE


def reason_counts(reason: NDArray[np.integer]) -> dict[str, int]:
    """Rows without a prediction, counted by reason (``{"unknown architecture": 3, ...}``)."""
    return reason_dict(np.bincount(np.asarray(reason, dtype=np.int64), minlength=len(REASONS)))


def reason_dict(counts: NDArray[np.integer]) -> dict[str, int]:
    """Counts per reason code (``np.bincount`` of the codes) as :func:`reason_counts` says
    them: by name, the predicted rows and reasons without a row left out."""
    return {REASONS[i]: int(c) for i, c in enumerate(counts) if i != OK and c}


def resolve_link(catalog: Catalog, spec: str, role: str = "") -> Link:
    """A link by catalog name (``eth100``) or by speed (``25Gbit``, ``12.5GB/s``); ``role``
    (``nic``, ``intra``, ``pcie``) names the field in the error of an unknown one."""
    if spec in catalog.links:
        return catalog.links[spec]
    bw = parse_speed_gbs(spec)
    if bw is None:
        raise unknown_name("link", spec, catalog.links, f"(field {role})" if role else "",
                           listed=f"give a catalog link name ({', '.join(sorted(catalog.links))})"
                                  " or a speed such as 25Gbit")
    return Link(name=spec, bw_gbs=bw, source="given on the command line")


def _hardware(cols: Columns, catalog: Catalog, default_node: str, gpu: str | None,
              links: dict[str, Link]) -> tuple[Strings, Strings, F, NDArray[np.intp]]:
    """Node and GPU names of each row, a (pairs, 7) table of rates with one lookup per unique
    (node, gpu_type) pair (node GPUs, rails, memory GB, pcie/intra/nic bytes/s, known), and
    each row's pair (``rates[pair]``: the caller gathers the rates it needs); rows without a
    node that the trace fills past their default preset take a larger one
    (:func:`_larger_nodes`)."""
    node, gpu_type = cols["node"], cols["gpu_type"]
    names, rates, idx = _pairs(node, gpu_type, catalog, default_node, gpu, links)
    larger = _larger_nodes(node, gpu_type, cols["gpus_per_node"], rates[idx, 0], catalog)
    if larger is not node:
        names, rates, idx = _pairs(larger, gpu_type, catalog, default_node, gpu, links)
    return names["node"], names["gpu"], rates, idx


def _larger_nodes(node: Strings, gpu_type: Strings, gpus_per_node: F, node_gpus: F,
                  catalog: Catalog) -> Strings:
    """The node column with a preset named for each row that has none (null or empty) and
    whose trace puts more GPUs on one node (``gpus_per_node``) than its preset holds
    (``node_gpus``): the smallest preset of its GPU type that holds them
    (:meth:`Catalog.node_holding`), where there is one; ``node`` itself when no row changes.
    One lookup per (GPU type, GPUs per node) pair of such rows."""
    no_node = (node.codes < 0) | node.isin([""])
    small = no_node & (gpu_type.codes >= 0) & (gpus_per_node > node_gpus)
    out = node
    for code, gpus in set(zip(gpu_type.codes[small].tolist(), gpus_per_node[small].tolist(),
                              strict=True)):
        if name := catalog.node_holding(gpu_type.values[code], gpus):
            out = out.set(small & (gpu_type.codes == code) & (gpus_per_node == gpus), name)
    return out


def _pairs(node: Strings, gpu_type: Strings, catalog: Catalog, default_node: str,
           gpu: str | None, links: dict[str, Link]
           ) -> tuple[dict[str, Strings], F, NDArray[np.intp]]:
    """:func:`_hardware`'s lookup, one per unique (node, gpu_type) pair."""
    node_vals, gpu_vals = [*node.values, ""], [*gpu_type.values, ""]
    names: dict[str, list[str]] = {"node": [], "gpu": []}
    pairs = np.zeros((len(node_vals), len(gpu_vals), 2), dtype=np.int32)
    rates = []
    for i, nd in enumerate(node_vals):
        for j, gt in enumerate(gpu_vals):
            node_name = nd or (catalog.default_node_of(gt) if gt else "") or default_node
            gpu_name, row = _pair_rates(catalog, node_name, gpu or gt, links)
            for col, name in ((0, node_name), (1, gpu_name)):
                kind = ("node", "gpu")[col]
                if name not in names[kind]:
                    names[kind].append(name)
                pairs[i, j, col] = names[kind].index(name)
            rates.append(row)
    idx = np.where(node.codes < 0, (len(node_vals) - 1) * len(gpu_vals), node.codes
                   * len(gpu_vals)) + np.where(gpu_type.codes < 0, len(gpu_vals) - 1,
                                                gpu_type.codes)
    flat = pairs.reshape(-1, 2)
    table = np.array(rates, dtype=np.float64)
    return ({"node": Strings(flat[idx, 0], tuple(names["node"])),
             "gpu": Strings(flat[idx, 1], tuple(names["gpu"]))}, table, idx)


def _pair_rates(catalog: Catalog, node_name: str, gpu_name: str,
                links: dict[str, Link]) -> tuple[str, tuple[float, ...]]:
    """Canonical GPU name and rates of one (node, GPU) pair; NaN rates when unknown."""
    unknown = (np.nan,) * 6 + (0.0,)
    if node_name not in catalog.nodes:
        return gpu_name, unknown
    nd = catalog.nodes[node_name]
    found = canonical_gpu(gpu_name or nd.gpu, catalog.gpus, catalog.aliases)  # no "did you
    if found is None:  # mean" built for a name the caller reports as unknown anyway
        return gpu_name, unknown
    g = catalog.gpus[found]
    bw = {role: links.get(role, catalog.links[getattr(nd, role)]).bw_bps
          for role in ("pcie", "intra", "nic")}
    return g.name, (nd.gpus, nd.nics, g.mem_gb or np.nan, bw["pcie"], bw["intra"], bw["nic"],
                    1.0)


def _features(cols: Columns) -> dict[str, F]:
    """Feature arrays; a null optional feature takes its default (NaN stays NaN, an infinite
    value stays infinite, so that :func:`_reasons` can tell missing from invalid): ``e`` and
    ``input_bytes`` 0, ``e_ar`` = ``e``."""
    f = {attr: cols[col] for attr, col in FEATURE_FIELDS}
    f["e"] = np.where(np.isnan(f["e"]), 0.0, f["e"])
    f["e_ar"] = np.where(np.isnan(f["e_ar"]), f["e"], f["e_ar"])
    f["input_bytes"] = np.where(np.isnan(f["input_bytes"]), 0.0, f["input_bytes"])
    return f


def _bad_features(r: Resolved) -> NDArray[np.bool_]:
    """Rows with a feature that is negative, infinite or above its bound
    (:func:`traincast.bounds.feature_max`, as a trace's rows are bounded: a time would be
    negative, infinite or overflow); NaN (missing) is not bad here but ``features missing``."""
    bad = np.zeros(r.size, dtype=bool)
    for attr, column in FEATURE_FIELDS:
        x = getattr(r, attr)
        bad |= (x < 0) | np.isinf(x) | (x > feature_max(column))
    return bad


def _architecture(names: Strings, n: F, g: F) -> NDArray[np.int64]:
    """Architecture codes; a row whose trace gives none (null) is inferred from its placement
    (``n`` GPUs, ``g`` per node, :func:`_placement`): ``n <= 1`` -> 1w1g, ``n <= g`` (one
    node) -> allreduce-local, else allreduce-cluster; a job with no (or 0) GPUs gets none (it
    does not train on GPUs)."""
    arch = names.lookup(lambda v: ARCH_CODE.get(v, -1), -1, np.int64)
    null = names.codes < 0
    if null.any():
        inferred = np.where(n <= 1, ARCH_CODE["1w1g"], np.where(
            n <= g, ARCH_CODE["allreduce-local"], ARCH_CODE["allreduce-cluster"]))
        arch = np.where(null & (n > 0), inferred, arch)  # 0 GPUs (NaN too): no GPU training
    return arch


def training_gpus(cols: Columns) -> F:
    """GPUs of each job's training step, the ``n`` of the time model: ``n_workers ×
    gpus_per_worker`` where both are given and positive, capped at ``n_gpus`` (a worker role
    with fewer GPUs than the largest cannot hold more than the job); else ``n_gpus``. A job's
    other GPUs (a PAI evaluator's, a parameter server's) hold no replica; ``n_gpus`` keeps them
    for the cluster's GPU counts and costs."""
    n = cols["n_gpus"]
    if not (cols.given("n_workers") and cols.given("gpus_per_worker")):
        return n
    with np.errstate(invalid="ignore"):
        workers = cols["n_workers"] * cols["gpus_per_worker"]
        return np.where((workers > 0) & (workers < n), workers, n)


def _placement(cols: Columns, node_gpus: F) -> dict[str, F]:
    """``n, g, N, m, k, p`` by the rules of the module docstring (columns the table does not
    have cost nothing)."""
    n = training_gpus(cols)
    size = len(n)
    g = np.minimum(n, np.where(node_gpus > 0, node_gpus, UNKNOWN_NODE_GPUS))  # NaN: unknown
    if cols.given("gpus_per_node"):
        g = np.where(cols["gpus_per_node"] > 0, cols["gpus_per_node"], g)
    g = np.maximum(np.minimum(g, np.maximum(n, 1.0)), 1.0)
    w: Any = 1.0
    if cols.given("gpus_per_worker"):
        w = np.where(cols["gpus_per_worker"] > 0, cols["gpus_per_worker"], 1.0)
    m = np.maximum(n / w, 1.0)
    if cols.given("n_workers"):
        m = np.where(cols["n_workers"] > 0, cols["n_workers"], m)
    k = np.minimum(m, np.maximum(np.floor(g / w), 1.0))
    if cols.given("workers_per_node"):
        k = np.where(cols["workers_per_node"] > 0, cols["workers_per_node"], k)
    p = np.broadcast_to(1.0, (size,))
    if cols.given("n_ps"):
        p = np.where(cols["n_ps"] > 0, cols["n_ps"], 1.0)
    with np.errstate(invalid="ignore"):  # inf / inf: a row refused by its shape
        held = n / m  # GPUs of one replica (a fraction: a shared GPU)
    if cols.given("gpus_per_worker"):  # given: its value (0, a worker without one: no share)
        gpw = cols["gpus_per_worker"]
        held = np.where(gpw > 0, gpw, np.where(np.isnan(gpw), held, 1.0))
    share = np.where((held > 0) & (held < 1), held, 1.0)
    return {"n": n, "g": g, "nodes": np.ceil(n / g), "m": m, "k": k, "p": p, "share": share}


def _reasons(r: Resolved, known_hw: F, given_g: F) -> NDArray[np.int8]:
    """First failing check per row (0 = ok), in :data:`REASONS` order; ``known_hw`` > 0 where
    the node and GPU are in the catalog, ``given_g`` the trace's ``gpus_per_node``. A job
    without GPUs has no architecture either (``_architecture`` infers none for it): its reason
    is the missing GPUs, which is why it has none (or, before it, unknown hardware)."""
    reason = np.zeros(r.size, dtype=np.int8)
    fits = per_architecture(r.arch, lambda a, rows: a.fits(r.take(rows)), True, bool)
    no_feats = np.isnan(r.flops) | np.isnan(r.mem_bytes) | np.isnan(r.w)
    checks = (((r.arch < 0) & (r.n > 0), BAD_ARCH), (known_hw <= 0, BAD_HARDWARE),
              (~(r.n > 0), BAD_GPUS), (given_g > r.node_gpus, BAD_PLACEMENT),
              (~fits, BAD_SHAPE), (no_feats, NO_FEATURES), (_bad_features(r), BAD_FEATURES))
    for bad, code in reversed(checks):  # the first check in the list wins
        reason[bad] = code
    return reason


def resolve(jobs: Mapping[str, Any] | Any, catalog: Catalog, *, default_node: str | None = None,
            gpu: str | None = None, nic: str | None = None, intra: str | None = None,
            pcie: str | None = None, amp: Any = False, hierarchical: Any = False) -> Resolved:
    """Resolve every row of a job table (dict of columns, Arrow table, DataFrame or
    :class:`~traincast.jobs.Columns`); see the module docstring for the rules."""
    cols = jobs if isinstance(jobs, Columns) else Columns.of(jobs)
    links = {role: resolve_link(catalog, spec, role) for role, spec in
             (("nic", nic), ("intra", intra), ("pcie", pcie)) if spec}
    gpu_override = catalog.gpu_name(gpu) if gpu else None
    node, gpu_s, rates, pair = _hardware(cols, catalog, fallback_node(catalog, default_node),
                                         gpu_override, links)
    hw = np.ascontiguousarray(rates.T)[:, pair]
    shape = _placement(cols, hw[0])
    arch = _architecture(cols["architecture"], shape["n"], shape["g"])
    size = cols.n
    r = Resolved(arch=arch, node=node, gpu=gpu_s, **shape, node_gpus=hw[0], rails=hw[1],
                 mem_gb=hw[2], pcie_bps=hw[3], intra_bps=hw[4], nic_bps=hw[5],
                 amp=np.broadcast_to(np.asarray(amp, dtype=bool), (size,)),
                 hierarchical=np.broadcast_to(np.asarray(hierarchical, dtype=bool), (size,)),
                 **_features(cols), reason=np.zeros(size, dtype=np.int8))
    return replace(r, reason=_reasons(r, hw[6], cols["gpus_per_node"]))


def hardware_of(jobs: Mapping[str, Any] | Any, catalog: Catalog, *,
                default_node: str | None = None) -> tuple[Strings, Strings]:
    """Node preset and GPU names of each row by the hardware rule of :func:`resolve` alone:
    ``(r.node, r.gpu)`` of ``resolve(jobs, catalog, default_node=...)`` without the placement,
    features and checks (what a report lists as the catalog entries used). A table without
    an ``architecture`` column is read as it is: the hardware rule does not use it."""
    if isinstance(jobs, pa.Table) and "architecture" not in jobs.column_names:
        jobs = jobs.append_column("architecture", pa.nulls(jobs.num_rows, pa.string()))
    cols = jobs if isinstance(jobs, Columns) else Columns.of(jobs)
    node, gpu, _, _ = _hardware(cols, catalog, fallback_node(catalog, default_node), None, {})
    return node, gpu


def node_gpus_of(jobs: Mapping[str, Any] | Any, catalog: Catalog, *,
                 default_node: str | None = None, gpu: str | None = None) -> F:
    """GPUs per node of each row's node preset, by the hardware rule of :func:`resolve` alone
    (NaN where the node or GPU is unknown): ``resolve(jobs, catalog, default_node=...,
    gpu=...).node_gpus`` without the placement, features and checks."""
    return node_gpus_and_memory_of(jobs, catalog, default_node=default_node, gpu=gpu)[0]


def node_gpus_and_memory_of(jobs: Mapping[str, Any] | Any, catalog: Catalog, *,
                            default_node: str | None = None,
                            gpu: str | None = None) -> tuple[F, F]:
    """GPUs per node of each row's node preset and memory (GB) of its GPU, from one lookup by
    the hardware rule of :func:`resolve` alone (NaN where the node or GPU is unknown):
    ``(r.node_gpus, r.mem_gb)`` of ``resolve(jobs, catalog, default_node=..., gpu=...)``
    without the placement, features and checks."""
    cols = jobs if isinstance(jobs, Columns) else Columns.of(jobs)
    _, _, rates, pair = _hardware(cols, catalog, fallback_node(catalog, default_node),
                                  catalog.gpu_name(gpu) if gpu else None, {})
    return rates[:, 0][pair], rates[:, 2][pair]


def architecture_codes(jobs: Mapping[str, Any] | Any, catalog: Catalog, *,
                       default_node: str | None = None,
                       node_gpus: F | None = None) -> NDArray[np.int64]:
    """Architecture code of each row (index into ``ARCHITECTURES``; -1 = unknown, or null with
    no GPU count), a null one inferred from the placement as :func:`resolve` does (module
    docstring), from the node sizes alone: ``resolve(jobs, catalog, default_node=...).arch``
    without the links, features and checks (what ``trace.infer_architecture`` needs).
    ``node_gpus``: each row's GPUs per node where the caller has looked them up
    (:func:`node_gpus_and_memory_of`), else looked up here."""
    cols = jobs if isinstance(jobs, Columns) else Columns.of(jobs)
    if node_gpus is None:
        node_gpus = node_gpus_of(cols, catalog, default_node=default_node)
    shape = _placement(cols, node_gpus)
    return _architecture(cols["architecture"], shape["n"], shape["g"])


def _calibrated_ranks_hint(catalog: Catalog, node: str, node_gpus: float) -> str | None:
    """For a node ``traincast calibrate`` wrote (its GPU entry measured at ``threads`` per
    rank): how to get more local ranks; else None."""
    entry = catalog.nodes.get(node)
    gpu = catalog.gpus.get(entry.gpu) if entry else None
    if gpu is None or not gpu.threads:
        return None
    return (f"node {node!r} is a calibration of one machine: {node_gpus:g} local rank(s) of "
            f"{gpu.threads} thread(s) each (cores / threads); "
            + ("traincast calibrate --threads 1 measures one rank per core, or use "
               "allreduce-cluster" if gpu.threads > 1 else
               "one per core already: use allreduce-cluster, or calibrate a machine with more "
               "cores"))


def explain(r: Resolved, i: int, cols: Columns, catalog: Catalog) -> TraincastError:
    """Why row ``i`` gets no prediction, in terms of the job's fields (the CLI maps fields to
    its flags)."""
    error = _explain(r, i, cols, catalog)
    if r.size > 1:  # arrays of jobs: which one, counted from 1 as every row traincast names
        return type(error)(f"row {i + 1}: {error}", hint=error.hint)
    return error


def _explain(r: Resolved, i: int, cols: Columns, catalog: Catalog) -> TraincastError:
    code = int(r.reason[i])
    arch = cols["architecture"].strings()[i]
    n, node_gpus = r.n[i], r.node_gpus[i]
    node = r.node.values[r.node.codes[i]]
    if code == BAD_ARCH:
        return TraincastError(f"unknown architecture {arch!r} (field architecture)",
                              hint=f"choose one of {', '.join(ARCHITECTURES)}")
    if code == BAD_HARDWARE:
        gpu = cols["gpu_type"].strings()[i]
        if node not in catalog.nodes:
            return unknown_name("node", node, catalog.nodes, "(field node)")
        return unknown_name("GPU", gpu, catalog.gpus, "(field gpu_type)", aliases=catalog.aliases)
    if code == BAD_GPUS:
        return TraincastError(f"n_gpus must be positive, got {n:g} (field n_gpus)",
                              hint="give the GPUs the job runs on (1 or more)")
    if code == BAD_PLACEMENT:
        return TraincastError(f"gpus_per_node {cols['gpus_per_node'][i]:g} is more than the "
                              f"{node_gpus:g} GPUs of node {node!r} (field gpus_per_node)",
                              hint="give at most the node's GPUs, or a node preset with more")
    if code == BAD_SHAPE and arch == "allreduce-local":
        spread = n <= node_gpus  # it fits the node, but the trace puts it on several
        return TraincastError(f"allreduce-local runs inside one node: n_gpus = {n:g} (field "
                              + (f"n_gpus) at gpus_per_node = {r.g[i]:g} (field gpus_per_node) "
                                 f"is {r.nodes[i]:g} nodes" if spread else
                                 f"n_gpus) > the {node_gpus:g} GPUs of node {node!r}"),
                              hint="use allreduce-cluster for a job across nodes, or give "
                                   "gpus_per_node = n_gpus" if spread else
                                   _calibrated_ranks_hint(catalog, node, node_gpus)
                                   or "use allreduce-cluster, or a node preset with more GPUs")
    if code == BAD_SHAPE:
        return TraincastError(f"{arch} runs on exactly one GPU: n_gpus = {n:g} (field n_gpus)"
                              if arch == "1w1g" else
                              f"{arch} cannot run n_gpus = {n:g} (field n_gpus)",
                              hint="use a data-parallel architecture (allreduce-local, "
                                   "allreduce-cluster) for more GPUs" if arch == "1w1g" else
                              f"choose an architecture that runs {n:g} GPUs")
    if code == BAD_FEATURES:
        attr, name, high = next(
            (a, c, feature_max(c)) for a, c in FEATURE_FIELDS
            if not (np.isfinite(v := getattr(r, a)[i]) and 0 <= v <= feature_max(c))
            and not np.isnan(v))
        span = f"from 0 to {high:g}" if math.isfinite(high) else ">= 0"
        return TraincastError(f"{name} must be a finite number {span}, got "
                              f"{getattr(r, attr)[i]:g} (field {name})",
                              hint="features are bytes, FLOPs or ops per iteration "
                                   "(docs/model.md)")
    if code == NOT_FINITE:
        return TraincastError(f"the predicted time is not finite for n_gpus = {n:g} (field "
                              "n_gpus) and these features",
                              hint="a GPU count far below one GPU (or features near their "
                                   "bounds) scales the step beyond what a float holds")
    missing = [c for a, c in FEATURE_FIELDS[:3] if np.isnan(getattr(r, a)[i])]
    return TraincastError(f"features missing: {', '.join(missing)} (NaN or null; "
                          "flops_compute_bound, bytes_memory_bound and weight_bytes are "
                          "required)",
                          hint="traincast profile MODEL measures them (docs/profile.md)")
