"""``ps-worker``: m workers push gradients to and pull weights from p parameter servers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from traincast.architectures import B, F, Memory, architecture, network_bps

if TYPE_CHECKING:
    from traincast.resolved import Resolved


@architecture("ps-worker", label="parameter servers and workers", order=4)
class PSWorker:
    @staticmethod
    def comm_s(r: Resolved) -> F:
        """``2 B / bw(pcie) + max(2 B k / (R bw(nic)), 2 m B / (p bw(nic)))``, B = W + E.

        Each worker copies B between GPU and host and sends it over the network; k workers
        share a node's R = min(rails, k) ports; p servers on their own nodes (one port each)
        serve all m workers. The slower network side bounds the step. PS moves the embedding
        rows touched (E), whatever the gradient layout.
        """
        pcie_s, network_s = _terms_s(r)
        return pcie_s + network_s

    @staticmethod
    def fits(r: Resolved) -> B:
        """Every job, of any shape (workers and servers over the nodes the job holds)."""
        return np.ones(r.size, dtype=bool)

    @staticmethod
    def port(n_gpus: F, node_gpus: F) -> dict[str, F]:
        """m = n workers of one GPU each, packed; ``p = ceil(n / node GPUs)`` servers (one per
        worker node). A job on a share of one GPU (n < 1) stays on it: one worker of n GPUs
        (the share ``s`` of docs/model.md is kept, as the data-parallel ports keep it)."""
        nan = np.full(np.shape(n_gpus), np.nan)
        return {"gpus_per_node": nan, "workers_per_node": nan,
                "gpus_per_worker": np.minimum(n_gpus, 1.0),
                "n_workers": np.maximum(n_gpus, 1.0), "n_ps": np.ceil(n_gpus / node_gpus)}

    @staticmethod
    def link_role(r: Resolved) -> NDArray[np.str_]:
        """The link of the larger term of ``comm_s``: ``"pcie"`` when the copies between GPU
        and host take longer than the network side, else ``"nic"``."""
        pcie_s, network_s = _terms_s(r)
        return np.where(pcie_s > network_s, "pcie", "nic")

    @staticmethod
    def footprint_bytes(m: Memory) -> F:
        """Optimizer state and embedding tables live on the servers; a worker holds the dense
        weights and every gradient it computes before pushing it (as profiled: a sparse
        table's rows touched, a dense one's whole): ``w (1 - e) + g + A``."""
        return m.weights * (1.0 - m.embedding_share) + m.grads + m.activations


def _terms_s(r: Resolved) -> tuple[F, F]:
    """The two terms of ``PSWorker.comm_s``: ``2 B / bw(pcie)`` and the network's ``max(2 B k /
    (R bw(nic)), 2 m B / (p bw(nic)))``."""
    b = r.w + r.e
    k = np.maximum(r.k, 1.0)
    m = np.maximum(r.m, 1.0)
    p = np.maximum(r.p, 1.0)
    worker_side = 2.0 * b * k / network_bps(r.nic_bps, r.rails, k)
    server_side = 2.0 * m * b / (p * r.nic_bps)
    return 2.0 * b / r.pcie_bps, np.maximum(worker_side, server_side)
