"""``hybrid``: data, tensor, pipeline and expert parallelism (traincast.parallel).

A job table row carries no tensor/pipeline degrees, so a ``hybrid`` row is priced as its data-
parallel part over the same resolved hardware: a ring all-reduce of ``W + E_ar`` exactly as
``allreduce-cluster`` (ZeRO stage 0, dp = n). ``traincast predict --arch hybrid`` and
``traincast plan`` evaluate the full model (docs/parallelism.md) with the same rates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from traincast.architectures import B, F, architecture
from traincast.architectures.allreduce import AllReduceCluster
from traincast.architectures.single import data_parallel_port, replica_footprint_bytes

if TYPE_CHECKING:
    from traincast.resolved import Resolved


@architecture("hybrid", label="hybrid data/tensor/pipeline parallelism", candidate=False,
              order=6)
class Hybrid:
    @staticmethod
    def comm_s(r: Resolved) -> F:
        """The data-parallel all-reduce of ``allreduce-cluster`` (a trace row's aggregate
        features: ``T_comm = 2 (n - 1) / n x (W + E_ar) / bw``, a ring over the slowest link
        it crosses, hierarchical per node where asked); a configuration's tensor, pipeline,
        expert and context communication are priced by ``traincast.parallel.hybrid``."""
        return AllReduceCluster.comm_s(r)

    @staticmethod
    def fits(r: Resolved) -> B:
        """Every job, of any shape (its layout is priced by ``traincast.parallel``)."""
        return np.ones(r.size, dtype=bool)

    port = staticmethod(data_parallel_port)
    footprint_bytes = staticmethod(replica_footprint_bytes)
    link_role = staticmethod(AllReduceCluster.link_role)
