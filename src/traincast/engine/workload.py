"""What the what-if engine needs from a job's workload profile, per job, one lookup per workload.

From ``traincast.zoo.profiles.workload_features(workload)`` (the shipped, torch-free profile of
the workload's reference model at its default batch ``b0``), for a job with batch ``b``:

* model state per GPU ``S = weights + grads + optimizer`` (``memory_bytes``) and activations
  ``A = activations * b / b0`` (``b / b0 = 1`` when either batch is unknown);
* the embedding share of parameters ``e = params_embedding / params``;
* ``amp_ratio = bytes_memory_bound_amp / bytes_memory_bound``,
  ``fused_ratio = bytes_memory_bound_fused / bytes_memory_bound`` and
  ``fused_amp_ratio = bytes_memory_bound_fused_amp / bytes_memory_bound`` (both changes; else
  ``amp_ratio * fused_ratio``): the job's own ``bytes_memory_bound`` is scaled by them, and
  ``amp_flops_ratio = flops_compute_bound_amp / flops_compute_bound`` scales its
  ``flops_compute_bound`` under mixed precision (so a job whose features came from the profile
  gets exactly the profile's figures).

Where the workload has no profile (or the profile lacks a key) the documented assumptions of
docs/scenarios.md apply: ``S = 4 W`` (weights, gradients and Adam's two moments, W =
``weight_bytes``), ``A = 0`` and ``e = 0`` (so the footprint is a lower bound and a fit check
only rejects jobs whose model state alone exceeds the GPU), and both ratios are 1 (mixed
precision then speeds up only the FLOP-bound part; fusion changes nothing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from traincast.jobs import Columns

F = NDArray[np.float64]


def _profile(workload: str) -> dict[str, Any] | None:
    """The shipped profile of ``workload`` (read once per name: :func:`_per_workload` is
    cached)."""
    if not workload:
        return None
    from traincast.zoo.profiles import workload_features

    return workload_features(workload)


def _num(record: Mapping[str, Any] | None, *keys: str) -> float:
    value: Any = record
    for k in keys:
        if not isinstance(value, Mapping) or value.get(k) is None:
            return math.nan
        value = value[k]
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _ratio(a: float, b: float) -> float:
    return a / b if a > 0 and b > 0 else math.nan


ProfileOf = Callable[[str], Mapping[str, Any] | None]
"""A workload's profile record by name (the shipped zoo's, or a job's own), None if unknown."""


@lru_cache(maxsize=512)
def _per_workload(workload: str) -> tuple[float, ...]:
    return _extras_of(_profile(workload))


RATIOS: tuple[tuple[str, str], ...] = (
    ("bytes_memory_bound_amp", "bytes_memory_bound"),
    ("bytes_memory_bound_fused", "bytes_memory_bound"),
    ("bytes_memory_bound_fused_amp", "bytes_memory_bound"),
    ("flops_compute_bound_amp", "flops_compute_bound"))
"""The profile keys the mixed-precision and fusion changes scale a job's features by, each over
its base: ``amp_ratio``, ``fused_ratio``, ``fused_amp_ratio``, ``amp_flops_ratio``."""


def _extras_of(rec: Mapping[str, Any] | None) -> tuple[float, ...]:
    """The eleven per-workload numbers :func:`workload_extras` gathers, from a profile
    record."""
    mem = ("memory_bytes",)
    state = sum(_num(rec, *mem, k) for k in ("weights", "grads", "optimizer"))
    return (1.0 if rec else 0.0, _num(rec, *mem, "weights"), state,
            _num(rec, *mem, "activations"), _num(rec, "batch_size"),
            _ratio(_num(rec, "params_embedding"), _num(rec, "params")),
            *(_ratio(_num(rec, key), _num(rec, base)) for key, base in RATIOS),
            _num(rec, *mem, "grads"))


def job_profile(own: Mapping[str, Any], shipped: Mapping[str, Any] | None) -> dict[str, Any]:
    """A job's own profile (``own``: memory, parameters, features at its own batch and
    precision) with the ratios of :data:`RATIOS` it does not give: a profile written under
    mixed precision (``amp`` true) is already mixed precision, so its ``_amp`` keys are its
    own values (ratio 1); else each ratio of its workload's shipped profile (``shipped``, at
    the zoo's batch) times the job's own base, ``own[base] x shipped[key] / shipped[base]``
    (none without a shipped profile: the ratios' defaults of docs/scenarios.md apply)."""
    out = dict(own)
    for key, base in RATIOS:
        if key in own or base not in own:
            continue
        plain = key.removesuffix("_amp")
        amp = bool(own.get("amp")) and key.endswith("_amp")
        if amp and plain in own:
            out[key] = own[plain]
            continue
        # an amp profile's own base is already mixed: over the shipped profile's amp base
        over = base + "_amp" if amp else base
        if shipped and _ratio(_num(shipped, key), _num(shipped, over)) > 0:
            out[key] = own[base] * _num(shipped, key) / _num(shipped, over)
    return out


@dataclass(frozen=True)
class WorkloadExtras:
    """Per-job arrays: memory footprint parts (bytes), embedding share, byte ratios."""

    known: NDArray[np.bool_]
    weights_bytes: F
    grads_bytes: F
    state_bytes: F
    activation_bytes: F
    embedding_share: F
    amp_ratio: F
    fused_ratio: F
    fused_amp_ratio: F
    amp_flops_ratio: F

    def take(self, idx: NDArray[np.intp]) -> WorkloadExtras:
        n = len(self.known)
        if len(idx) == n and (n == 0 or (idx[0] == 0 and idx[-1] == n - 1)):
            return self
        return WorkloadExtras(**{k: getattr(self, k)[idx] for k in self.__dataclass_fields__})

    def footprint_bytes(self, arch: NDArray[np.int64], n_gpus: F) -> F:
        """Memory per GPU of each job under architecture code ``arch``: each architecture's
        ``footprint_bytes`` rule (traincast.architectures; docs/scenarios.md)."""
        from traincast.architectures import Memory, per_architecture

        n = np.asarray(n_gpus)
        return per_architecture(arch, lambda a, rows: a.footprint_bytes(Memory(
            state=self.state_bytes[rows], weights=self.weights_bytes[rows],
            grads=self.grads_bytes[rows],
            activations=self.activation_bytes[rows], embedding_share=self.embedding_share[rows],
            n=n[rows])), np.nan)


def workload_extras(cols: Columns, profile_of: ProfileOf | None = None) -> WorkloadExtras:
    """Per-job workload extras for a job table (one profile lookup per unique workload):
    from the shipped profiles, or from ``profile_of(workload)`` when given (a job's own
    profile, ``whatif`` and ``recommend`` of one job)."""
    wl = cols["workload"]

    def extras(name: str) -> tuple[float, ...]:
        return _per_workload(name.strip().lower()) if profile_of is None else \
            _extras_of(profile_of(name) if name else None)

    table = np.array([extras(v) for v in wl.values] + [extras("")],
                     dtype=np.float64).reshape(-1, 11)
    # per-workload defaults first (small table), then one gather per column
    fill = {5: 0.0, 6: 1.0, 7: 1.0, 9: 1.0}
    for j, default in fill.items():
        table[:, j] = np.where(np.isfinite(table[:, j]), table[:, j], default)
    table[:, 8] = np.where(np.isfinite(table[:, 8]), table[:, 8], table[:, 6] * table[:, 7])
    rows = np.ascontiguousarray(table.T)[:, wl.codes]  # (11, n): contiguous per column
    known = rows[0] > 0
    w = np.nan_to_num(cols["weight_bytes"])
    batch_scale = np.where((cols["batch_size"] > 0) & (rows[4] > 0),
                           cols["batch_size"] / rows[4], 1.0)
    weights = np.where(np.isfinite(rows[1]), rows[1], w)
    grads = np.where(np.isfinite(rows[10]), rows[10], w)
    state = np.where(np.isfinite(rows[2]), rows[2], 4.0 * w)
    act = np.where(np.isfinite(rows[3]), rows[3] * batch_scale, 0.0)
    emb, amp, fused, fused_amp, amp_flops = rows[5], rows[6], rows[7], rows[8], rows[9]
    return WorkloadExtras(known=known, weights_bytes=weights, grads_bytes=grads,
                          state_bytes=state,
                          activation_bytes=act, embedding_share=emb, amp_ratio=amp,
                          fused_ratio=fused, fused_amp_ratio=fused_amp,
                          amp_flops_ratio=amp_flops)
