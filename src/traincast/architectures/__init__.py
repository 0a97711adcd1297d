"""Training architectures: a registry in the style of ``torch/utils/flop_counter.py``.

Each architecture is one module of this package that registers a class::

    @architecture("ps-worker", label="parameter servers and workers")
    class PSWorker:
        def comm_s(r): ...            # weight/gradient communication seconds (arrays)
        def fits(r): ...              # mask: jobs whose shape this architecture can run
        def port(n_gpus, node_gpus): ...  # shape columns of a job moved to this architecture
        def footprint_bytes(m): ...   # memory per GPU from a job's memory parts
        def link_role(r): ...         # "pcie", "intra", "nic" or "": the link that bounds T_comm

``r`` is a :class:`traincast.resolved.Resolved` holding only this architecture's jobs: every
formula sees arrays and runs once for one job or a million. Adding an architecture is adding
one module to this package: it is imported and registered with the others (docs/model.md,
"Where things go").

Notation shared by all (per data-parallel replica, per iteration): ``W`` = dense weight bytes,
``E`` = embedding bytes touched, ``E_ar`` = embedding bytes an AllReduce moves (whole tables
for dense-gradient tables), ``n`` GPUs, ``g`` GPUs per node, ``N = ceil(n / g)`` nodes,
``R = min(rails, g)`` network ports used per node, ``m`` workers, ``k`` workers per node,
``p`` parameter servers; ``bw(x)`` = bytes/s of link x after its efficiency. Bandwidth only
(no per-message latency), full-duplex links, no overlap (the time model applies overlap).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from traincast.jobs import groups

if TYPE_CHECKING:
    from traincast.resolved import Resolved

F = NDArray[np.float64]
B = NDArray[np.bool_]


@dataclass(frozen=True)
class Memory:
    """Memory parts of jobs (bytes per replica) that a footprint rule combines.

    ``state`` = weights + gradients + optimizer state, ``weights``, ``grads`` (as profiled: a
    table with sparse gradients holds the rows a step touches), ``activations``,
    ``embedding_share`` = embedding parameters / all parameters, ``n`` GPUs.
    """

    state: F
    weights: F
    grads: F
    activations: F
    embedding_share: F
    n: F


@dataclass(frozen=True)
class Architecture:
    """One registered architecture: its name, label and four rules."""

    name: str
    label: str
    comm_s: Callable[[Resolved], F]
    fits: Callable[[Resolved], B]
    port: Callable[[F, F], dict[str, F]]
    footprint_bytes: Callable[[Memory], F]
    link_role: Callable[[Resolved], NDArray[np.str_]]
    candidate: bool = True  # offered by `recommend` as a port target
    order: int = 100  # position in listings (the paper's order for the shipped five)


REGISTRY: dict[str, Architecture] = {}


def architecture(name: str, label: str, candidate: bool = True,
                 order: int = 100) -> Callable[[type], type]:
    """Class decorator: register the class's static rules under ``name``."""

    def register(cls: type) -> type:
        REGISTRY[name] = Architecture(name, label, cls.comm_s, cls.fits, cls.port,
                                      cls.footprint_bytes, cls.link_role, candidate, order)
        return cls

    return register


# ------------------------------------------------------------------ formulas shared by modules
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


def network_bps(nic_bps: ArrayLike, rails: ArrayLike, g: ArrayLike) -> F:
    """A node's network bandwidth for one job: ``min(rails, g) bw(nic)`` (NCCL runs one ring per
    rail, so a job with g GPUs on a node uses at most g of its ports)."""
    rails = np.maximum(np.asarray(rails, dtype=np.float64), 1.0)
    return np.minimum(rails, np.maximum(np.asarray(g, dtype=np.float64), 1.0)) * nic_bps


def ring_link_bps(n: ArrayLike, g: ArrayLike, intra_bps: ArrayLike, nic_bps: ArrayLike,
                  rails: ArrayLike = 1.0) -> F:
    """Bandwidth of a flat ring: ``bw(intra)`` inside one node (N = 1), else
    ``min(bw(intra), min(rails, g) bw(nic))`` — as slow as its slowest hop."""
    intra = np.asarray(intra_bps, dtype=np.float64)
    net = network_bps(nic_bps, rails, g)
    return np.where(nodes_of(n, g) > 1, np.minimum(intra, net), intra)


def ring_link_role(r: Resolved) -> NDArray[np.str_]:
    """The link bounding a ring: ``"nic"`` when it crosses nodes and ``R bw(nic) <=
    bw(intra)``, else ``"intra"``."""
    net = network_bps(r.nic_bps, r.rails, r.g)
    return np.where((r.nodes > 1) & (net <= r.intra_bps), "nic", "intra")


def per_architecture(arch: NDArray[np.integer],
                     rule: Callable[[Architecture, NDArray[np.intp] | slice], ArrayLike],
                     fill: Any, dtype: Any = np.float64) -> NDArray[Any]:
    """``rule(architecture, rows)`` on the rows of each architecture code in ``arch`` (one call
    per architecture present); ``fill`` where the code is unknown (-1)."""
    out = np.full(len(arch), fill, dtype=dtype)
    for code, rows in groups(arch):
        if code >= 0:
            out[rows] = rule(REGISTRY[ARCHITECTURES[code]], rows)
    return out


# the architectures: every module of this package registers itself on import
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

ARCHITECTURES: tuple[str, ...] = tuple(sorted(REGISTRY, key=lambda a: REGISTRY[a].order))
ARCH_CODE: dict[str, int] = {name: i for i, name in enumerate(ARCHITECTURES)}
"""Architecture name -> code (its index in :data:`ARCHITECTURES`)."""
ARCH_LABEL: dict[str, str] = {a.name: a.label for a in REGISTRY.values()}
NETWORK_ARCHS: tuple[str, ...] = ("ps-worker", "allreduce-cluster", "pearl", "hybrid")
"""The architectures whose jobs communicate over the node's NIC (the others run on one node;
a ``hybrid`` trace row is priced as ``allreduce-cluster``'s ring)."""

__all__ = ["ARCHITECTURES", "ARCH_CODE", "ARCH_LABEL", "NETWORK_ARCHS", "REGISTRY",
           "Architecture", "Memory", "architecture", "nodes_of", "per_architecture", "ring_factor",
           "ring_link_bps"]
