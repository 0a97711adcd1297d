"""Ring all-reduce of ``W + E_ar`` among the job's GPUs: ``allreduce-local`` and
``allreduce-cluster``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast.architectures import (
    B,
    F,
    architecture,
    network_bps,
    nodes_of,
    ring_factor,
    ring_link_bps,
    ring_link_role,
)
from traincast.architectures.single import data_parallel_port, replica_footprint_bytes

if TYPE_CHECKING:
    from traincast.resolved import Resolved


def allreduce_cluster_s(w_bytes: ArrayLike, n: ArrayLike, g: ArrayLike, intra_bps: ArrayLike,
                        nic_bps: ArrayLike, hierarchical: bool | ArrayLike = False,
                        rails: ArrayLike = 1.0) -> F:
    """All-reduce of ``w_bytes`` among n GPUs, g per node, ``N = ceil(n / g)`` nodes.

    Flat ring: ``2 (n - 1) / n * bytes / bw_ring`` with ``bw_ring = bw(intra)`` when N = 1, else
    ``min(bw(intra), R bw(nic))``, ``R = min(rails, g)``. Hierarchical:
    ``2 (g - 1) / g * bytes / bw(intra) + 2 (N - 1) / N * bytes / (R bw(nic))``.
    """
    w = np.asarray(w_bytes, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    g = np.minimum(np.maximum(np.asarray(g, dtype=np.float64), 1.0), np.maximum(n, 1.0))
    intra = np.asarray(intra_bps, dtype=np.float64)
    flat = ring_factor(n) * w / ring_link_bps(n, g, intra, nic_bps, rails)
    hier = ring_factor(g) * w / intra + ring_factor(nodes_of(n, g)) * w / network_bps(
        nic_bps, rails, g)
    return np.where(np.asarray(hierarchical, dtype=bool), hier, flat)


@architecture("allreduce-local", label="AllReduce inside one node", order=2)
class AllReduceLocal:
    @staticmethod
    def comm_s(r: Resolved) -> F:
        """``2 (n - 1) / n * (W + E_ar) / bw(intra)``."""
        return ring_factor(r.n) * (r.w + r.e_ar) / r.intra_bps

    @staticmethod
    def fits(r: Resolved) -> B:
        """All GPUs in one node: ``n <= node GPUs`` and the job on one node, ``N = ceil(n / g)
        = 1`` (a trace's ``gpus_per_node`` below ``n`` spreads it over several: an
        AllReduce across nodes, which ``allreduce-cluster`` prices)."""
        return (r.n <= r.node_gpus) & (r.nodes <= 1)

    port = staticmethod(data_parallel_port)
    footprint_bytes = staticmethod(replica_footprint_bytes)

    @staticmethod
    def link_role(r: Resolved) -> NDArray[np.str_]:
        """The ring stays inside the node."""
        return np.full(r.size, "intra")


@architecture("allreduce-cluster", label="AllReduce across nodes", order=3)
class AllReduceCluster:
    @staticmethod
    def comm_s(r: Resolved) -> F:
        """:func:`allreduce_cluster_s` of ``W + E_ar`` (flat ring, or hierarchical)."""
        return allreduce_cluster_s(r.w + r.e_ar, r.n, r.g, r.intra_bps, r.nic_bps,
                                   r.hierarchical, r.rails)

    @staticmethod
    def fits(r: Resolved) -> B:
        """Every job, of any shape (its ring spans the nodes the job holds)."""
        return np.ones(r.size, dtype=bool)

    port = staticmethod(data_parallel_port)
    footprint_bytes = staticmethod(replica_footprint_bytes)
    link_role = staticmethod(ring_link_role)
