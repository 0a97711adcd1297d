"""``pearl`` (PAI): dense weights all-reduced, embedding tables partitioned across the GPUs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from traincast.architectures import (
    B,
    F,
    Memory,
    architecture,
    ring_factor,
    ring_link_bps,
    ring_link_role,
)
from traincast.architectures.allreduce import allreduce_cluster_s
from traincast.architectures.single import data_parallel_port

if TYPE_CHECKING:
    from traincast.resolved import Resolved


@architecture("pearl", label="PEARL: partitioned embeddings + AllReduce", order=5)
class Pearl:
    @staticmethod
    def comm_s(r: Resolved) -> F:
        """``T_ring(W) + 2 E (n - 1) / n / bw_ring``: W as ``allreduce-cluster``; each GPU
        exchanges the embedding rows it touched (E, whatever the gradient layout) with their
        owners over the ring's link."""
        dense = allreduce_cluster_s(r.w, r.n, r.g, r.intra_bps, r.nic_bps, r.hierarchical,
                                    r.rails)
        return dense + ring_factor(r.n) * r.e / ring_link_bps(r.n, r.g, r.intra_bps, r.nic_bps,
                                                              r.rails)

    @staticmethod
    def fits(r: Resolved) -> B:
        """Every job, of any shape (embeddings over the n GPUs, the rest by all-reduce)."""
        return np.ones(r.size, dtype=bool)

    port = staticmethod(data_parallel_port)
    link_role = staticmethod(ring_link_role)

    @staticmethod
    def footprint_bytes(m: Memory) -> F:
        """Embeddings partitioned over n GPUs: ``S (1 - e) + S e / n + A``."""
        n = np.maximum(np.nan_to_num(m.n, nan=1.0), 1.0)
        return m.state * (1 - m.embedding_share) + m.state * m.embedding_share / n \
            + m.activations
