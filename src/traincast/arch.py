"""Weight/gradient communication time per training architecture (vectorized).

Notation (per data-parallel replica, per iteration): ``W`` = dense weight bytes (= dense
gradient bytes), ``E`` = embedding bytes touched, ``n`` = GPUs of the job, ``g`` = GPUs per node
used by the job, ``N = ceil(n / g)`` nodes, ``m`` = PS workers (one GPU each), ``p`` = parameter
servers, ``k = min(g, m)`` workers per node; ``bw(x)`` = bytes/s of link x after efficiency.

Every function takes numpy arrays (or scalars) and returns seconds; one call evaluates one job
or a million. Assumptions shared by all: bandwidth-only (no per-message latency), full-duplex
links at their per-direction bandwidth, no overlap with compute (the time model applies overlap).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

ARCHITECTURES: tuple[str, ...] = ("1w1g", "allreduce-local", "allreduce-cluster", "ps-worker",
                                  "pearl")
ARCH_CODE: dict[str, int] = {name: i for i, name in enumerate(ARCHITECTURES)}
ARCH_LABEL: dict[str, str] = {
    "1w1g": "one worker, one GPU",
    "allreduce-local": "AllReduce inside one node",
    "allreduce-cluster": "AllReduce across nodes",
    "ps-worker": "parameter servers and workers",
    "pearl": "PEARL: partitioned embeddings + AllReduce",
}

F = NDArray[np.float64]


def ring_factor(n: ArrayLike) -> F:
    """Ring all-reduce traffic per byte per GPU: ``2 (n - 1) / n`` (0 for n <= 1)."""
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 1, 2.0 * (n - 1.0) / np.maximum(n, 1.0), 0.0)


def nodes_of(n: ArrayLike, g: ArrayLike) -> F:
    """Nodes a job spans: ``N = ceil(n / g)``."""
    n = np.asarray(n, dtype=np.float64)
    g = np.maximum(np.asarray(g, dtype=np.float64), 1.0)
    return np.ceil(n / g)


def allreduce_local_s(w_bytes: ArrayLike, n: ArrayLike, intra_bps: ArrayLike) -> F:
    """``allreduce-local``: ``2 (n - 1) / n * bytes / bw(intra)`` (one ring inside a node)."""
    return ring_factor(n) * np.asarray(w_bytes, dtype=np.float64) / np.asarray(intra_bps)


def allreduce_cluster_s(w_bytes: ArrayLike, n: ArrayLike, g: ArrayLike, intra_bps: ArrayLike,
                        nic_bps: ArrayLike, hierarchical: bool | ArrayLike = False) -> F:
    """``allreduce-cluster`` over ``N = ceil(n / g)`` nodes.

    Flat ring: ``2 (n - 1) / n * bytes / min(bw(intra), bw(nic))`` — the ring is as slow as its
    slowest hop; a job that fits one node (N = 1) never crosses the NIC: ``bw(intra)`` alone.
    Hierarchical: ``2 (g - 1) / g * bytes / bw(intra) + 2 (N - 1) / N * bytes / bw(nic)``.
    """
    w = np.asarray(w_bytes, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    g = np.minimum(np.maximum(np.asarray(g, dtype=np.float64), 1.0), np.maximum(n, 1.0))
    nodes = nodes_of(n, g)
    intra = np.asarray(intra_bps, dtype=np.float64)
    nic = np.asarray(nic_bps, dtype=np.float64)
    flat_bw = np.where(nodes > 1, np.minimum(intra, nic), intra)
    flat = ring_factor(n) * w / flat_bw
    hier = ring_factor(g) * w / intra + ring_factor(nodes) * w / nic
    return np.where(np.asarray(hierarchical, dtype=bool), hier, flat)


def ps_worker_s(w_bytes: ArrayLike, m: ArrayLike, p: ArrayLike, g: ArrayLike,
                pcie_bps: ArrayLike, nic_bps: ArrayLike) -> F:
    """``ps-worker``: ``2 B / bw(pcie) + max(2 B k / bw(nic), 2 m B / (p bw(nic)))``.

    B = bytes pushed (gradients) and pulled (weights) by each worker; the first term copies
    them between GPU and host; k = min(g, m) workers share one node's NIC; p servers on their
    own nodes (same NIC) serve all m workers. The slower of the two NIC sides bounds the step.
    """
    b = np.asarray(w_bytes, dtype=np.float64)
    m = np.maximum(np.asarray(m, dtype=np.float64), 1.0)
    p = np.maximum(np.asarray(p, dtype=np.float64), 1.0)
    k = np.minimum(np.maximum(np.asarray(g, dtype=np.float64), 1.0), m)
    nic = np.asarray(nic_bps, dtype=np.float64)
    return 2.0 * b / np.asarray(pcie_bps) + np.maximum(2.0 * b * k / nic, 2.0 * m * b / (p * nic))


def pearl_s(w_bytes: ArrayLike, e_bytes: ArrayLike, n: ArrayLike, g: ArrayLike,
            intra_bps: ArrayLike, nic_bps: ArrayLike, hierarchical: bool | ArrayLike = False) -> F:
    """``pearl``: ``T_ring(W) + 2 E (n - 1) / n / bw(ring link)``.

    Dense weights are all-reduced as ``allreduce-cluster`` (which is the local ring when N = 1);
    embeddings are partitioned over the n GPUs, each exchanging the rows it touched with their
    owners over the ring's link: ``bw(intra)`` when N = 1, else ``min(bw(intra), bw(nic))``.
    """
    n_arr = np.asarray(n, dtype=np.float64)
    g_arr = np.minimum(np.maximum(np.asarray(g, dtype=np.float64), 1.0), np.maximum(n_arr, 1.0))
    intra = np.asarray(intra_bps, dtype=np.float64)
    ring_bw = np.where(nodes_of(n_arr, g_arr) > 1, np.minimum(intra, nic_bps), intra)
    emb = ring_factor(n_arr) * np.asarray(e_bytes, dtype=np.float64) / ring_bw
    return allreduce_cluster_s(w_bytes, n_arr, g_arr, intra, nic_bps, hierarchical) + emb


def comm_time_s(arch_code: ArrayLike, weight_bytes: ArrayLike, embedding_bytes: ArrayLike,
                n_gpus: ArrayLike, gpus_per_node: ArrayLike, n_workers: ArrayLike,
                n_ps: ArrayLike, pcie_bps: ArrayLike, intra_bps: ArrayLike, nic_bps: ArrayLike,
                hierarchical: bool | ArrayLike = False) -> F:
    """``T_comm`` of each job by its architecture code (``ARCH_CODE``); NaN for unknown codes.

    ``1w1g``: 0. ``allreduce-local``/``-cluster``/``ps-worker`` exchange ``W + E``;
    ``pearl`` all-reduces ``W`` and partitions ``E`` (see each function's formula). Each
    architecture's formula runs only on its own jobs.
    """
    code = np.asarray(arch_code)
    cols = np.broadcast_arrays(
        code, np.asarray(weight_bytes, dtype=np.float64),
        np.nan_to_num(np.asarray(embedding_bytes, dtype=np.float64)),
        *(np.asarray(x, dtype=np.float64) for x in (n_gpus, gpus_per_node, n_workers, n_ps,
                                                    pcie_bps, intra_bps, nic_bps)),
        np.asarray(hierarchical, dtype=bool))
    code, w, e, n, g, m, p, pcie, intra, nic, hier = (np.atleast_1d(c) for c in cols)
    out = np.full(code.shape, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        for name, k in ARCH_CODE.items():
            rows = np.flatnonzero(code == k)
            if rows.size == 0:
                continue
            if rows.size == code.size:
                rows = slice(None)  # all jobs share one architecture: no gather needed
            we = w[rows] + e[rows]
            if name == "1w1g":
                out[rows] = 0.0
            elif name == "allreduce-local":
                out[rows] = allreduce_local_s(we, n[rows], intra[rows])
            elif name == "allreduce-cluster":
                out[rows] = allreduce_cluster_s(we, n[rows], g[rows], intra[rows], nic[rows],
                                                hier[rows])
            elif name == "ps-worker":
                out[rows] = ps_worker_s(we, m[rows], p[rows], g[rows], pcie[rows], nic[rows])
            else:
                out[rows] = pearl_s(w[rows], e[rows], n[rows], g[rows], intra[rows], nic[rows],
                                    hier[rows])
    return out.reshape(np.shape(cols[0]))


def comm_link_role(arch: str, n_gpus: int, gpus_per_node: int, intra_bps: float,
                   nic_bps: float) -> str:
    """Which link bounds the communication of one job: ``'intra'``, ``'nic'`` or ``''``."""
    if arch == "1w1g":
        return ""
    if arch == "allreduce-local" or (arch in ("allreduce-cluster", "pearl")
                                     and n_gpus <= gpus_per_node):
        return "intra"
    if arch == "ps-worker":
        return "nic"
    return "nic" if nic_bps <= intra_bps else "intra"


def check_shape(arch: str, n_gpus: int, gpus_per_node: int, node_gpus: int,
                n_workers: int | None, n_ps: int | None) -> None:
    """Raise ValueError with a clear message when a job's shape does not fit its architecture."""
    if arch not in ARCH_CODE:
        raise ValueError(f"unknown architecture {arch!r}; choose one of {', '.join(ARCHITECTURES)}")
    if n_gpus < 1:
        raise ValueError(f"--gpus must be at least 1, got {n_gpus}")
    if gpus_per_node < 1 or gpus_per_node > node_gpus:
        raise ValueError(f"--gpus-per-node must be between 1 and the node's {node_gpus} GPUs, "
                         f"got {gpus_per_node}")
    if arch == "1w1g" and n_gpus != 1:
        raise ValueError(f"1w1g runs on exactly one GPU, got --gpus {n_gpus}")
    if arch == "allreduce-local" and n_gpus > node_gpus:
        raise ValueError(f"allreduce-local needs all GPUs in one node: {n_gpus} GPUs > "
                         f"{node_gpus} per node; use allreduce-cluster")
    if arch == "ps-worker":
        if not n_ps or n_ps < 1:
            raise ValueError("ps-worker needs --ps P (parameter servers, at least 1)")
        if n_workers is not None and n_workers < 1:
            raise ValueError(f"ps-worker needs at least one worker, got --workers {n_workers}")
