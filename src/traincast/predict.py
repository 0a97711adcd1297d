"""Predict iteration time: resolve each job's hardware from the catalog, then run the model.

Two entry points, one mechanism:

* ``predict(...)`` — one job (or numpy arrays of jobs sharing one hardware setup), as the CLI's
  ``traincast predict`` does;
* ``predict_table(jobs, catalog)`` — a canonical job table (dict of columns, arrays or Arrow),
  each row with its own architecture, GPU type and node; vectorized over millions of rows.

Hardware of a job: its ``node`` preset; when empty, the ``default_node`` of its GPU type; else
``DEFAULT_NODE``. The GPU is the job's ``gpu_type`` when given, else the node's. Link overrides
(``nic``, ``intra``, ``pcie``) replace the node's links for every job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike, NDArray

from traincast.arch import ARCH_CODE, ARCH_LABEL, check_shape, comm_link_role, comm_time_s
from traincast.hardware.catalog import Catalog, Link, load_catalog
from traincast.model import COMPONENT_LABEL, COMPONENTS, Breakdown, breakdown
from traincast.units import parse_speed_gbs

DEFAULT_NODE = "pai-v100-nvlink"
FEATURES: tuple[str, ...] = ("flops_compute_bound", "bytes_memory_bound", "weight_bytes",
                             "embedding_bytes_touched", "input_bytes")


def resolve_link(catalog: Catalog, spec: str) -> Link:
    """A link by catalog name (``eth100``) or by speed (``25Gbit``, ``12.5GB/s``)."""
    if spec in catalog.links:
        return catalog.links[spec]
    bw = parse_speed_gbs(spec)
    if bw is None:
        raise KeyError(f"unknown link {spec!r}: give a catalog link name "
                       f"({', '.join(sorted(catalog.links))}) or a speed such as 25Gbit")
    return Link(name=spec, bw_gbs=bw, source="given on the command line")


def _factorize(values: Any) -> tuple[NDArray[np.int64], list[str]]:
    """Dictionary-encode a string column (numpy, list or Arrow): codes and unique values."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        values = pa.array(np.asarray(values, dtype=object), type=pa.string(), from_pandas=True)
    if pa.types.is_dictionary(values.type):
        enc = values
    else:
        enc = values.cast(pa.string()).dictionary_encode()
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, [v if v is not None else "" for v in enc.dictionary.to_pylist()]


def _num(values: Any, n: int, default: float = np.nan) -> NDArray[np.float64]:
    if values is None:
        return np.full(n, default)
    if isinstance(values, pa.ChunkedArray | pa.Array):
        values = values.to_numpy(zero_copy_only=False)
    out = np.asarray(values, dtype=np.float64)
    return np.broadcast_to(out, (n,)) if out.ndim == 0 else out


@dataclass(frozen=True)
class Hardware:
    """Per-job effective rates (arrays): FLOP/s, bytes/s, and the node's GPU count."""

    flops_per_s: NDArray[np.float64]
    mem_bw_bps: NDArray[np.float64]
    pcie_bps: NDArray[np.float64]
    intra_bps: NDArray[np.float64]
    nic_bps: NDArray[np.float64]
    node_gpus: NDArray[np.float64]
    mem_gb: NDArray[np.float64]


def resolve_hardware(catalog: Catalog, node: Any, gpu_type: Any, n: int, *,
                     default_node: str | None = None, amp: bool | ArrayLike = False,
                     gpu: str | None = None, nic: str | None = None, intra: str | None = None,
                     pcie: str | None = None) -> Hardware:
    """Rates for ``n`` jobs from their node and GPU-type columns (vectorized by unique pairs).

    Unknown nodes or GPU types give NaN rates for those jobs (their times are then NaN).
    """
    node_codes, node_names = _factorize(node if node is not None else [""] * n)
    gpu_codes, gpu_names = _factorize(gpu_type if gpu_type is not None else [""] * n)
    if len(node_codes) != n:
        node_codes = np.broadcast_to(node_codes, (n,))
    if len(gpu_codes) != n:
        gpu_codes = np.broadcast_to(gpu_codes, (n,))
    links = {role: resolve_link(catalog, spec) for role, spec in
             (("nic", nic), ("intra", intra), ("pcie", pcie)) if spec}
    gpu_override = catalog.gpu_name(gpu) if gpu else None
    pair = (node_codes + 1) * (len(gpu_names) + 1) + (gpu_codes + 1)
    # unique (node, GPU) pairs without sorting: O(n) counting over the small pair space
    seen = np.bincount(pair, minlength=(len(node_names) + 1) * (len(gpu_names) + 1)) > 0
    uniq = np.flatnonzero(seen)
    inverse = (np.cumsum(seen) - 1)[pair]
    amp_arr = np.broadcast_to(np.asarray(amp, dtype=bool), (n,))
    table = np.full((len(uniq), 8), np.nan)
    for i, key in enumerate(uniq):
        nc, gc = divmod(int(key), len(gpu_names) + 1)
        node_name = node_names[nc - 1] if nc > 0 else ""
        gpu_name = gpu_names[gc - 1] if gc > 0 else ""
        try:
            if not node_name:
                node_name = (catalog.default_node_of(gpu_name) if gpu_name else "") or \
                    (default_node or DEFAULT_NODE)
            nd = catalog.node(node_name)
            g = catalog.gpu(gpu_override or gpu_name or nd.gpu)
        except KeyError:
            continue
        table[i] = (g.flops_per_s("fp32"), g.flops_per_s("amp"), g.mem_bw_bps,
                    links.get("pcie", catalog.links[nd.pcie]).bw_bps,
                    links.get("intra", catalog.links[nd.intra]).bw_bps,
                    links.get("nic", catalog.links[nd.nic]).bw_bps, nd.gpus, g.mem_gb)
    rows = np.ascontiguousarray(table.T)[:, inverse.reshape(-1)]  # (8, n): contiguous rows
    return Hardware(flops_per_s=np.where(amp_arr, rows[1], rows[0]),
                    mem_bw_bps=rows[2], pcie_bps=rows[3], intra_bps=rows[4],
                    nic_bps=rows[5], node_gpus=rows[6], mem_gb=rows[7])


def evaluate(features: Mapping[str, ArrayLike], arch_code: ArrayLike, n_gpus: ArrayLike,
             gpus_per_node: ArrayLike, n_workers: ArrayLike, n_ps: ArrayLike, hw: Hardware,
             overlap: ArrayLike = 0.0, hierarchical: bool | ArrayLike = False) -> Breakdown:
    """The time model on resolved arrays: communication by architecture, then the breakdown."""
    comm = comm_time_s(arch_code, features["weight_bytes"],
                       features.get("embedding_bytes_touched", 0.0), n_gpus, gpus_per_node,
                       n_workers, n_ps, hw.pcie_bps, hw.intra_bps, hw.nic_bps, hierarchical)
    return breakdown(input_bytes=features.get("input_bytes", 0.0),
                     flops_compute_bound=features["flops_compute_bound"],
                     bytes_memory_bound=features["bytes_memory_bound"], comm_s=comm,
                     pcie_bps=hw.pcie_bps, flops_per_s=hw.flops_per_s,
                     mem_bw_bps=hw.mem_bw_bps, overlap=overlap)


def job_shape(jobs: Mapping[str, Any], hw: Hardware, n: int) -> dict[str, NDArray[np.float64]]:
    """Architecture codes and (n, g, m, p) of trace jobs, with documented defaults.

    ``n`` = ``n_gpus``; ``g`` = ``gpus_per_worker`` when positive (one worker per node), else the
    node's GPUs, capped at n; ``m`` = ``n_workers`` when positive, else n; ``p`` = ``n_ps`` when
    positive, else 1.
    """
    codes, names = _factorize(jobs["architecture"])
    lut = np.array([ARCH_CODE.get(name, -1) for name in names] + [-1], dtype=np.int64)
    arch = lut[codes]
    n_gpus = _num(jobs.get("n_gpus"), n)
    gpw = _num(jobs.get("gpus_per_worker"), n)
    workers = _num(jobs.get("n_workers"), n)
    ps = _num(jobs.get("n_ps"), n)
    g = np.where(gpw > 0, np.minimum(gpw, hw.node_gpus), hw.node_gpus)
    return {"arch": arch, "n": n_gpus, "g": np.minimum(g, np.maximum(n_gpus, 1)),
            "m": np.where(workers > 0, workers, n_gpus), "p": np.where(ps > 0, ps, 1.0)}


def predict_table(jobs: Mapping[str, Any] | pa.Table, catalog: Catalog | None = None, *,
                  overlap: ArrayLike = 0.0, hierarchical: bool | ArrayLike = False,
                  amp: bool | ArrayLike = False, default_node: str | None = None,
                  gpu: str | None = None, nic: str | None = None, intra: str | None = None,
                  pcie: str | None = None) -> Breakdown:
    """Breakdown of every job of a canonical job table (columns of DESIGN.md).

    Jobs with unknown features, architecture, node or GPU type get NaN times.
    """
    catalog = catalog or load_catalog()
    if isinstance(jobs, pa.Table):
        jobs = {name: jobs.column(name) for name in jobs.column_names}
    n = len(jobs["architecture"])
    hw = resolve_hardware(catalog, jobs.get("node"), jobs.get("gpu_type"), n,
                          default_node=default_node, amp=amp, gpu=gpu, nic=nic, intra=intra,
                          pcie=pcie)
    s = job_shape(jobs, hw, n)
    feats = {k: _num(jobs.get(k), n, 0.0 if k in ("embedding_bytes_touched", "input_bytes")
                     else np.nan) for k in FEATURES}
    return evaluate(feats, s["arch"], s["n"], s["g"], s["m"], s["p"], hw, overlap, hierarchical)


def _scalar_or_list(x: NDArray[Any]) -> Any:
    x = np.asarray(x)
    return x.item() if x.size == 1 else x


def predict(features: Mapping[str, ArrayLike] | None = None, *, arch: str = "1w1g",
            gpus: int = 1, gpus_per_node: int | None = None, workers: int | None = None,
            ps: int | None = None, node: str | None = None, gpu: str | None = None,
            nic: str | None = None, intra: str | None = None, pcie: str | None = None,
            catalog: Catalog | None = None, overlap: float = 0.0, amp: bool = False,
            hierarchical: bool = False, **feature_values: ArrayLike) -> dict[str, Any]:
    """Predict one job's iteration time and breakdown (feature values may be numpy arrays).

    ``features`` holds ``flops_compute_bound``, ``bytes_memory_bound``, ``weight_bytes`` and
    optionally ``embedding_bytes_touched`` and ``input_bytes`` (also accepted as keywords).
    Returns ``{"time_s": {...}, "share": {...}, "bottleneck", "gpu_util", ...}`` as DESIGN.md.
    """
    catalog = catalog or load_catalog()
    feats = dict(features or {})
    feats.update(feature_values)
    missing = [k for k in FEATURES[:3] if k not in feats]
    if missing:
        raise ValueError(f"missing features: {', '.join(missing)}")
    node_name = node or (catalog.default_node_of(gpu) if gpu else "") or DEFAULT_NODE
    nd = catalog.node(node_name)
    if arch == "ps-worker" and workers is not None:
        gpus = workers  # one GPU per worker
    g_per_node = gpus_per_node or min(gpus, nd.gpus)
    m = workers if workers is not None else gpus
    check_shape(arch, gpus, g_per_node, nd.gpus, workers, ps)
    hw = resolve_hardware(catalog, [node_name], [gpu or ""], 1, amp=amp, nic=nic,
                          intra=intra, pcie=pcie)
    bd = evaluate({k: np.asarray(v, dtype=np.float64) for k, v in feats.items()
                   if k in FEATURES}, ARCH_CODE[arch], gpus, g_per_node, m, ps or 1, hw,
                  overlap, hierarchical)
    shares = bd.shares()
    codes = bd.bottleneck_code()
    names = np.array(COMPONENTS + ("unknown",))[codes]
    gpu_used = catalog.gpu(gpu or nd.gpu)
    links = {role: resolve_link(catalog, spec or getattr(nd, role))
             for role, spec in (("pcie", pcie), ("intra", intra), ("nic", nic))}
    role = comm_link_role(arch, gpus, g_per_node, links["intra"].bw_bps, links["nic"].bw_bps)
    bottleneck = _scalar_or_list(names)
    label = None
    if isinstance(bottleneck, str):
        label = COMPONENT_LABEL.get(bottleneck, bottleneck)
        if bottleneck == "comm" and role:
            label += f" over {links[role].label()}"
        elif bottleneck == "data_io":
            label = f"data I/O over {links['pcie'].label()}"
    return {
        "time_s": {c: _scalar_or_list(getattr(bd, c)) for c in (*COMPONENTS, "total")},
        "share": {c: _scalar_or_list(shares[c]) for c in COMPONENTS},
        "bottleneck": bottleneck,
        "bottleneck_label": label,
        "gpu_util": _scalar_or_list(bd.gpu_util()),
        "job": {"arch": arch, "arch_label": ARCH_LABEL[arch], "gpus": gpus,
                "gpus_per_node": g_per_node, "nodes": -(-gpus // g_per_node),
                "workers": m if arch == "ps-worker" else None,
                "ps": ps if arch == "ps-worker" else None, "overlap": overlap, "amp": amp,
                "hierarchical": hierarchical},
        "hardware": {"node": node_name, "gpu": gpu_used.name,
                     "peak_tflops": gpu_used.peak_tflops("amp" if amp else "fp32"),
                     "flop_efficiency": gpu_used.flop_efficiency,
                     "mem_bw_gbs": gpu_used.mem_bw_gbs,
                     "mem_efficiency": gpu_used.mem_efficiency,
                     **{f"{r}": links[r].name for r in links},
                     **{f"{r}_bw_gbs": links[r].bw_gbs * links[r].efficiency for r in links}},
    }
