"""``1w1g``: one worker on one GPU (or a share of one). No communication: ``T_comm = 0``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from traincast.architectures import B, F, Memory, architecture

if TYPE_CHECKING:
    from traincast.resolved import Resolved


def data_parallel_port(n_gpus: F, node_gpus: F) -> dict[str, F]:
    """A job moved to a data-parallel architecture: placement cleared, so the default packs its
    GPUs onto whole nodes (``g = min(n, node GPUs)``); no workers or servers."""
    nan = np.full(np.shape(n_gpus), np.nan)
    return {"gpus_per_node": nan, "workers_per_node": nan, "gpus_per_worker": nan,
            "n_workers": nan, "n_ps": nan}


def replica_footprint_bytes(m: Memory) -> F:
    """Every GPU holds a whole replica: ``S + A`` (state plus activations)."""
    return m.state + m.activations


@architecture("1w1g", label="one worker, one GPU", order=1)
class OneWorkerOneGPU:
    @staticmethod
    def comm_s(r: Resolved) -> F:
        """``T_comm = 0``."""
        return np.zeros(r.size)

    @staticmethod
    def fits(r: Resolved) -> B:
        """At most one GPU (fractions of one GPU are 1w1g jobs sharing it)."""
        return r.n <= 1

    port = staticmethod(data_parallel_port)
    footprint_bytes = staticmethod(replica_footprint_bytes)

    @staticmethod
    def link_role(r: Resolved) -> NDArray[np.str_]:
        """No communication, no link."""
        return np.full(r.size, "")
