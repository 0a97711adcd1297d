"""The iteration-time model: small pure functions over numpy arrays.

For each job (per data-parallel replica, one iteration)::

    T_data      = input_bytes / bw(pcie)
    T_comp_flop = flops_compute_bound / R_flop   (traincast.compute; the paper: P 1e12 flop_eff)
    T_comp_mem  = bytes_memory_bound / R_mem     (traincast.compute; the paper: M 1e9 mem_eff)
    T_comm      = see traincast.architectures (by architecture)
    T_comp      = T_comp_flop + T_comp_mem
    T_total     = T_data + max(T_comp, f * T_comm) + (1 - f) * T_comm      (f = overlap, 0 default)

With f = 0 (the paper's assumption) ``T_total`` is the plain sum. Shares are each component's
time over the sum of components (so they add to 1 whatever f is); predicted GPU utilization is
``(T_comp - T_idle) / T_total`` (``T_idle``: the part of the compute time the GPU waits for the
host to issue its next op, ``kernels.queue_idle_s``, traincast.compute); the bottleneck is the
largest of ``T_data``, the GPU-busy parts of ``T_comp_flop`` and ``T_comp_mem`` (each times
``(T_comp - T_idle) / T_comp``), ``T_comm`` and ``T_idle`` (``host``: the GPU waits for the
host to issue its ops, so a faster GPU does not help).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import ArrayLike, NDArray

COMPONENTS: tuple[str, ...] = ("data_io", "compute_flop", "compute_mem", "comm")
COMPONENT_LABEL: dict[str, str] = {
    "data_io": "data I/O (input copy to the GPU)",
    "compute_flop": "FLOP-bound compute",
    "compute_mem": "memory-bound compute",
    "comm": "weight/gradient communication",
}
COMPONENT_NAME: dict[str, str] = {"data_io": "data I/O", "compute_flop": "FLOP-bound compute",
                                  "compute_mem": "memory-bound compute", "comm": "communication"}
"""Short names of the components, for figures and the report's tables (``COMPONENT_LABEL``
says each in full)."""
BOTTLENECKS: tuple[str, ...] = (*COMPONENTS, "host")
"""What can bound a step (:meth:`Breakdown.bottleneck_code` indexes it): the components, and
``host``, the GPU waiting for the host to issue its ops (``T_idle``, inside ``T_comp``)."""
BOTTLENECK_LABEL: dict[str, str] = {
    **COMPONENT_LABEL, "host": "host op dispatch (the GPU waits for the CPU to issue its ops)"}
BOTTLENECK_NAME: dict[str, str] = {**COMPONENT_NAME, "host": "host dispatch"}

F = NDArray[np.float64]


def _f(x: ArrayLike) -> F:
    return np.asarray(x, dtype=np.float64)


def data_time_s(input_bytes: ArrayLike, pcie_bps: ArrayLike) -> F:
    """``T_data = input_bytes / bw(pcie)``."""
    return np.nan_to_num(_f(input_bytes)) / _f(pcie_bps)


def busy_parts_s(flop_s: ArrayLike, mem_s: ArrayLike, idle_s: ArrayLike) -> tuple[F, F]:
    """The GPU-busy parts of the compute time: each part less its share of the wait ``T_idle``
    for the host, ``part (T_comp - T_idle) / T_comp`` (``T_comp = flop + mem``; unchanged
    where ``T_comp`` is 0; a NaN wait counts as none)."""
    flop, mem, idle = np.broadcast_arrays(_f(flop_s), _f(mem_s), np.nan_to_num(_f(idle_s)))
    comp = flop + mem
    with np.errstate(divide="ignore", invalid="ignore"):
        keep = np.where(comp > 0, (comp - idle) / comp, 1.0)
    return flop * keep, mem * keep


def total_time_s(data_s: ArrayLike, comp_s: ArrayLike, comm_s: ArrayLike,
                 overlap: ArrayLike = 0.0) -> F:
    """``T_data + max(T_comp, f T_comm) + (1 - f) T_comm``; f = 0 gives the plain sum."""
    f = np.clip(_f(overlap), 0.0, 1.0)
    comm = _f(comm_s)
    if not f.any():
        return _f(data_s) + _f(comp_s) + comm
    return _f(data_s) + np.maximum(_f(comp_s), f * comm) + (1.0 - f) * comm


@dataclass(frozen=True)
class Breakdown:
    """Per-job component times (seconds), arrays of equal shape."""

    data_io: F
    compute_flop: F
    compute_mem: F
    comm: F
    total: F
    reason: NDArray[np.int8] | None = None  # traincast.resolve.REASONS code per job (0 = ok)
    idle: F | None = None  # the part of the compute time the GPU waits on the host (None = 0)

    @property
    def compute(self) -> F:
        """Compute time in seconds, ``T_comp = T_comp_flop + T_comp_mem``."""
        return self.compute_flop + self.compute_mem

    @property
    def reason_name(self) -> NDArray[np.object_] | None:
        """``reason`` in words, per job (``"ok"``, ``"features missing"``, ...:
        :data:`traincast.resolve.REASONS`); None when no reasons were recorded."""
        if self.reason is None:
            return None
        from traincast.resolve import REASONS

        return np.array(REASONS, dtype=object)[np.asarray(self.reason, dtype=np.int64)]

    def reasons(self) -> dict[str, int]:
        """Jobs without a prediction, counted by reason in words (``{"features missing":
        3}``; empty when every job was predicted)."""
        from traincast.resolve import reason_counts

        return {} if self.reason is None else reason_counts(self.reason)

    def take(self, idx: NDArray[np.intp]) -> Breakdown:
        """The breakdown of the jobs at ``idx`` (row indices), in that order."""
        return Breakdown(*(None if v is None else np.asarray(v)[idx]
                           for v in (getattr(self, f.name) for f in fields(self))))

    def stacked(self) -> F:
        """Components as a (4, jobs) array in ``COMPONENTS`` order."""
        return np.stack([np.atleast_1d(getattr(self, c)) for c in COMPONENTS])

    def shares(self) -> dict[str, F]:
        """Each component's share of the sum of components (sums to 1)."""
        parts = self.stacked()
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = parts / parts.sum(axis=0)
        return {c: frac[i] for i, c in enumerate(COMPONENTS)}

    def bottleneck_code(self) -> NDArray[np.int64]:
        """Index into ``BOTTLENECKS`` of the largest of ``T_data``, ``k T_comp_flop``, ``k
        T_comp_mem``, ``T_comm`` and ``T_idle`` (``k = (T_comp - T_idle) / T_comp``, the GPU-busy
        share of the compute time); -1 (none) where times are unknown or every component is
        0 s (a job with no work has no bottleneck)."""
        parts = self.stacked()
        bad = np.isnan(parts).any(axis=0) | ~(np.nan_to_num(parts, nan=0.0) > 0).any(axis=0)
        idle, *comps = np.broadcast_arrays(np.nan_to_num(np.atleast_1d(self.host_wait)), *parts)
        parts, bad = np.stack(comps), np.broadcast_to(bad, idle.shape)
        parts = np.stack([parts[0], *busy_parts_s(parts[1], parts[2], idle), parts[3], idle])
        code = np.argmax(np.nan_to_num(parts, nan=-1.0), axis=0)
        return np.where(bad, -1, code)

    def bottleneck_names(self) -> NDArray[np.object_]:
        """:meth:`bottleneck_code` as names of ``BOTTLENECKS`` (None: no bottleneck)."""
        return np.array([*BOTTLENECKS, None], dtype=object)[self.bottleneck_code()]

    @property
    def host_wait(self) -> F:
        """``T_idle``, the part of the compute time the GPU waits for the host (0 where none
        was priced)."""
        return np.zeros_like(_f(self.total)) if self.idle is None else _f(self.idle)

    @property
    def busy(self) -> F:
        """The GPU's busy time: ``T_comp - T_idle``."""
        return self.compute - self.host_wait

    def gpu_util(self) -> F:
        """Predicted GPU utilization ``(T_comp - T_idle) / T_total``: busy over the step (the
        GPU idles while the host has not yet issued its next op, traincast.compute)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.atleast_1d(self.busy / self.total)
