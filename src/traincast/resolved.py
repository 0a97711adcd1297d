"""The per-row arrays of resolved jobs (:class:`Resolved`), apart from the resolver.

``traincast.resolve`` builds them; the architecture formulas (``traincast.architectures``) read
them. Both import this module, so neither imports the other's module for the type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from traincast.jobs import Strings

F = NDArray[np.float64]


@dataclass(frozen=True)
class Resolved:
    """Per-row arrays of resolved jobs (every field has one entry per row)."""

    arch: NDArray[np.int64]
    node: Strings
    gpu: Strings
    n: F
    g: F
    nodes: F
    m: F
    k: F
    p: F
    share: F  # the GPU share of one replica: 1, or a fraction where the job shares its GPU
    node_gpus: F
    rails: F
    mem_gb: F
    pcie_bps: F
    intra_bps: F
    nic_bps: F
    amp: NDArray[np.bool_]
    hierarchical: NDArray[np.bool_]
    w: F
    e: F
    e_ar: F
    flops: F
    mem_bytes: F
    input_bytes: F
    n_ops: F  # ops one step issues (NaN: not known)
    reason: NDArray[np.int8]

    @property
    def size(self) -> int:
        return len(self.n)

    def take(self, rows: NDArray[np.intp] | slice) -> Resolved:
        """The rows ``rows``: a view that gathers each field on first use (a formula reads a
        few of the fields; ``slice(None)`` returns ``self``)."""
        if isinstance(rows, slice) and rows == slice(None):
            return self
        return _Rows(self, rows)  # type: ignore[return-value]


class _Rows:
    """Some rows of a :class:`Resolved`, gathered field by field on access."""

    def __init__(self, whole: Resolved, rows: NDArray[np.intp]) -> None:
        self._whole, self._rows = whole, rows

    @property
    def size(self) -> int:
        return len(self._rows)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._whole, name)
        value = Strings(value.codes[self._rows], value.values) if isinstance(value, Strings) \
            else value[self._rows]
        setattr(self, name, value)
        return value

    def take(self, rows: NDArray[np.intp] | slice) -> Any:
        return _Rows(self._whole, self._rows[rows])
