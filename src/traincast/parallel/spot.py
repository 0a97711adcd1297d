"""Expected training time and cost on preemptible (spot) machines, after Varuna (Athlur et al.,
EuroSys 2022): checkpoints, work lost to preemptions, and restarts.

A synchronous job on ``n`` nodes stops whenever any of its nodes is preempted (every pipeline
stage and every replica is needed for the next step). With ``R`` preemptions per node-hour,
independent across nodes (a Poisson process per node), the job is interrupted at the rate

    lambda = n R / 3600                                   (per second)

It writes a checkpoint of ``S`` bytes at ``W`` GB/s every ``tau`` seconds of work:

    C   = S / (W 1e9)                                     (checkpoint write, s)
    tau = sqrt(2 C / lambda)                              (Young 1974 / Daly 2006 first-order
                                                           optimum, unless given)
    Rs  = C + 120 s unless given                          (restart: read the checkpoint back at
                                                           W, plus an assumed 120 s to replace
                                                           the machine and relaunch)

and the expected wall time per unit of useful work is, to first order in ``lambda``,

    overhead = 1 + C / tau + lambda (tau / 2 + Rs)

(checkpoint writes; on each preemption, half an interval of lost work on average plus the
restart). Expected time and cost per million tokens:

    s_per_million_tokens   = T_iter overhead / (B s) 1e6
    usd_per_million_tokens = N usd_per_gpu_hour s_per_million_tokens / 3600

with ``T_iter`` the predicted iteration time, ``B s`` tokens per iteration and ``N`` GPUs.
With ``lambda = 0`` and no interval given, nothing is checkpointed and ``overhead = 1``.
Re-planning ("morphing", Varuna Sec. 5) when machines come and go costs one checkpoint and
one restart, ``C + Rs``, per change. Left out: spot-price dynamics, correlated preemptions,
time waiting for capacity, pipeline re-partitioning beyond the restart, second-order terms
(preemptions during checkpoint writes or restarts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast.errors import TraincastError
from traincast.parallel import strategies as st
from traincast.parallel.models import ModelConfig

F = NDArray[np.float64]
SECONDS_PER_HOUR = 3600.0
RESTART_ALLOWANCE_S = 120.0  # assumption: replace the machine and relaunch (set --restart-s)
PREEMPTIONS_PER_HOUR_MAX = 3600.0
"""The most preemptions per node-hour a plan takes, one a second: beyond, no step finishes
(a typing slip such as 1e9 is refused rather than priced)."""
CHECKPOINT_GBS_MIN = 1e-6
"""The slowest checkpoint bandwidth a plan takes, GB/s (a kilobyte a second): below, a write
takes longer than any run (a typing slip in the unit)."""
_FLAGS: dict[str, tuple[str, bool, tuple[float, str], tuple[float, str], float]] = {
    "preemptions_per_hour": ("--preemptions-per-hour", True, (0.0, ""),
                             (PREEMPTIONS_PER_HOUR_MAX, "one a second"), 1.0),
    "checkpoint_gbs": ("--checkpoint-gbs", False, (CHECKPOINT_GBS_MIN, "a kilobyte a second"),
                       (1e6, "GB/s: a petabyte a second"), 1.0),
    "checkpoint_bytes": ("--checkpoint-gb", False, (0.0, ""), (1e18, "GB: an exabyte"), 1e-9),
    "checkpoint_every_s": ("--checkpoint-every", False, (0.0, ""), (1e9, "s: 31 years"), 1.0),
    "restart_s": ("--restart-s", True, (0.0, ""), (1e9, "s: 31 years"), 1.0)}
"""Each setting's flag, whether it may be 0, its smallest positive and its largest value with
why (a typing slip beyond them is refused rather than priced: overflows), and the factor from
the field to the flag's unit."""
_FLAG_HINTS = {"preemptions_per_hour": "preemptions per node (machine) per hour, e.g. 0.1",
               "checkpoint_gbs": "the job's aggregate bandwidth to checkpoint storage, GB/s, "
                                 "e.g. 2"}
"""The hint of a bound's error, by setting."""


def checkpoint_bytes(model: ModelConfig, dtype: str = "bf16") -> float:
    """Bytes of a full checkpoint: weights + optimizer state of the memory model
    (``strategies.model_state_bytes`` unsharded: ``2 Psi + 12 Psi`` in mixed precision,
    ``4 Psi + 8 Psi`` in fp32; gradients are not saved)."""
    w, _, o = st.model_state_bytes(float(model.params), 1.0, 0.0, dtype)
    return float(w + o)


def checkpoint_write_s(size_bytes: ArrayLike, bandwidth_gbs: ArrayLike) -> F:
    """``C = S / (W 1e9)``: seconds to write ``S`` bytes at ``W`` GB/s."""
    return np.asarray(size_bytes, dtype=float) / (np.asarray(bandwidth_gbs, dtype=float) * 1e9)


def job_preemption_rate_per_s(per_node_hour: ArrayLike, nodes: ArrayLike) -> F:
    """``lambda = n R / 3600``: interruptions per second of a job on ``n`` nodes, each
    preempted ``R`` times per hour."""
    return np.asarray(per_node_hour, dtype=float) * np.asarray(nodes, dtype=float) \
        / SECONDS_PER_HOUR


def young_daly_interval_s(write_s: ArrayLike, rate_per_s: ArrayLike) -> F:
    """``tau = sqrt(2 C / lambda)`` (infinite when ``lambda = 0``: never checkpoint)."""
    c, lam = np.broadcast_arrays(np.asarray(write_s, dtype=float),
                                 np.asarray(rate_per_s, dtype=float))
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(lam > 0, np.sqrt(2.0 * c / np.where(lam > 0, lam, 1.0)), np.inf)


def overhead_factor(write_s: ArrayLike, interval_s: ArrayLike, rate_per_s: ArrayLike,
                    restart_s: ArrayLike) -> F:
    """``1 + C / tau + lambda (tau / 2 + Rs)``: expected wall time per unit of useful work
    (first order in ``lambda``); an infinite ``tau`` contributes nothing (no checkpoints, which
    only makes sense with ``lambda = 0``)."""
    c, tau, lam, rs = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in
                                            (write_s, interval_s, rate_per_s, restart_s)))
    finite = np.isfinite(tau)
    writes = finite & (c > 0)  # C = 0 (no time to write): nothing to pay, whatever tau
    ckpt = np.where(writes, c / np.where(writes & (tau > 0), tau, 1.0), 0.0)
    lost = lam * (np.where(finite, tau, 0.0) / 2.0 + rs)
    return 1.0 + ckpt + lost


@dataclass(frozen=True)
class Resilience:
    """Preemption and checkpoint settings of a plan (``traincast plan --preemptions-per-hour``).

    ``preemptions_per_hour`` is per node (machine); ``checkpoint_gbs`` the aggregate bandwidth
    of the job to its checkpoint storage; ``checkpoint_bytes`` None = weights + optimizer state;
    ``checkpoint_every_s`` None = Young/Daly; ``restart_s`` None = ``C + 120 s``.
    """

    preemptions_per_hour: float = 0.0
    checkpoint_gbs: float | None = None
    checkpoint_bytes: float | None = None
    checkpoint_every_s: float | None = None
    restart_s: float | None = None

    def __post_init__(self) -> None:
        for name, (flag, may_be_zero, (low, why_low), (high, why), scale) in _FLAGS.items():
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, bool) or not math.isfinite(v) or v < 0 or (v == 0 and not may_be_zero):
                need = "non-negative" if may_be_zero else "positive"
                finite = "" if isinstance(v, bool) or math.isfinite(v) else " and finite"
                raise TraincastError(f"{flag} must be a {need}{finite} number, got "
                                     f"{v * scale!r}")
            if 0 < v < low:
                raise TraincastError(f"{flag} must be at least {low * scale:g} ({why_low}), got "
                                     f"{v * scale!r}", hint=_FLAG_HINTS.get(name, ""))
            if v > high:
                raise TraincastError(f"{flag} must be at most {high * scale:g} ({why}), got "
                                     f"{v * scale!r}", hint=_FLAG_HINTS.get(name, ""))
        if self.active and self.checkpoint_gbs is None:
            raise TraincastError("--checkpoint-gbs is needed with preemptions or a checkpoint "
                                 "interval (bandwidth of the job to its checkpoint storage)",
                                 hint="e.g. --checkpoint-gbs 2")
        unused = [_FLAGS[k][0] for k in ("checkpoint_bytes", "restart_s")
                  if getattr(self, k) is not None]
        if unused and self.checkpoint_gbs is None:
            raise TraincastError(f"{' and '.join(unused)} price checkpoints and restarts, "
                                 "which need --checkpoint-gbs (bandwidth of the job to its "
                                 "checkpoint storage)",
                                 hint="add --checkpoint-gbs with --preemptions-per-hour or "
                                      "--checkpoint-every, or leave them out")

    @property
    def active(self) -> bool:
        """Whether anything is checkpointed or preempted (else ``overhead = 1``)."""
        return self.preemptions_per_hour > 0 or self.checkpoint_every_s is not None

    def evaluate(self, nodes: ArrayLike, default_bytes: float) -> dict[str, F]:
        """Overhead terms for jobs on ``nodes`` nodes (vectorized): ``checkpoint_bytes``,
        ``checkpoint_s`` (C), ``interval_s`` (tau), ``restart_s`` (Rs),
        ``preemptions_per_hour_job`` (n R), ``overhead`` and ``switch_s`` (C + Rs, the cost of
        one re-plan). Without ``checkpoint_gbs`` (allowed only when nothing is preempted or
        checkpointed) the times are NaN and ``overhead = 1``."""
        n = np.asarray(nodes, dtype=float)
        size = np.full(n.shape, self.checkpoint_bytes or default_bytes)
        if self.checkpoint_gbs is None:  # nothing checkpointed, nothing preempted
            zero = np.zeros(n.shape)
            return {"checkpoint_bytes": size, "checkpoint_s": zero + np.nan,
                    "interval_s": zero + np.inf, "restart_s": zero + np.nan,
                    "preemptions_per_hour_job": zero, "overhead": zero + 1.0,
                    "switch_s": zero + np.nan}
        c = checkpoint_write_s(size, self.checkpoint_gbs)
        lam = job_preemption_rate_per_s(self.preemptions_per_hour, n)
        tau = (np.full(n.shape, float(self.checkpoint_every_s)) if self.checkpoint_every_s
               else young_daly_interval_s(c, lam))
        rs = np.full(n.shape, self.restart_s) if self.restart_s is not None \
            else c + RESTART_ALLOWANCE_S
        return {"checkpoint_bytes": size, "checkpoint_s": c, "interval_s": tau, "restart_s": rs,
                "preemptions_per_hour_job": lam * SECONDS_PER_HOUR,
                "overhead": overhead_factor(c, tau, lam, rs), "switch_s": c + rs}

    def with_preemptions(self, per_node_hour: float) -> Resilience:
        """The same settings with another preemption rate (0: on-demand machines)."""
        return replace(self, preemptions_per_hour=per_node_hour)

    def to_dict(self) -> dict[str, Any]:
        return {"preemptions_per_node_hour": self.preemptions_per_hour,
                "checkpoint_gbs": self.checkpoint_gbs, "checkpoint_bytes": self.checkpoint_bytes,
                "checkpoint_every_s": self.checkpoint_every_s, "restart_s": self.restart_s,
                "restart_allowance_s": RESTART_ALLOWANCE_S}
