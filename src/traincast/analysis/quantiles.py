"""Mergeable quantiles of non-negative values, so trace statistics take bounded memory.

A :class:`Quantiles` is filled chunk by chunk (:meth:`Quantiles.add`) or from parts
(:meth:`Quantiles.merge`: one per Dask partition) and answers quantiles, medians, weighted
medians and the maximum:

* while it holds at most :data:`EXACT_MAX` values it keeps them all, and its answers are those
  of numpy on the whole array (``np.quantile``'s linear interpolation, ``np.median``, the
  weighted median of :func:`weighted_median`);
* beyond, the values are folded into a histogram of logarithmic bins: bin ``i`` holds the
  ``x`` with ``γ^i <= x < γ^(i+1)``, ``γ = 1 + REL_WIDTH`` (0 has a bin of its own), and keeps
  the count, the sum of each weight, and the least and largest value that fell in it. A
  quantile is read in the bin that holds its rank, linearly between the bin's least and largest
  value, so it is within ``REL_WIDTH`` (relative) of the exact one, and exact where a bin's
  values are all equal (a speedup of exactly 1). Memory: one entry per occupied bin, at most
  ``ln(max / min) / ln γ`` (about 35,000 from 1 ms to 30 years of seconds at 0.1%).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

F = NDArray[np.float64]
EXACT_MAX = 100_000
"""Values kept exactly; a sketch holding more switches to the histogram."""
REL_WIDTH = 1e-3
"""Relative width of a histogram bin: answers beyond EXACT_MAX values are within 0.1%."""
_LOG_GAMMA = math.log1p(REL_WIDTH)
_ZERO_BIN = np.iinfo(np.int64).min


def _bracket(x: F, w: F, frac: float) -> tuple[float, float]:
    """Two values of x around its weighted ``frac`` quantile, from a strided sample of ~2048."""
    step = max(len(x) // 2048, 1)
    xs, ws = x[::step], w[::step]
    order = np.argsort(xs)
    xs, cum = xs[order], np.cumsum(ws[order])
    r = int(np.searchsorted(cum, frac * cum[-1])) if cum[-1] > 0 else len(xs) // 2
    return float(xs[max(r - 64, 0)]), float(xs[min(r + 64, len(xs) - 1)])


def weighted_median(x: F, w: F) -> float:
    """The smallest x whose weight of values <= x reaches half the total weight (NaN when no
    weight). Exact, by selection (no full sort of x): a strided sample brackets the answer
    between two values, one pass keeps the side or the middle that holds it, and the last few
    thousand values are sorted."""
    keep = np.isfinite(x) & np.isfinite(w) & (w > 0)
    x, w = x[keep], w[keep]
    if not len(x):
        return float("nan")
    target, below = 0.5 * float(w.sum()), 0.0
    pivot: float | None = None
    while len(x) > 4096:
        lo, hi = (pivot, pivot) if pivot is not None else _bracket(
            x, w, (target - below) / float(w.sum()))
        pivot = None
        lt = x < lo
        w_lt = float(np.sum(w, where=lt))
        if below + w_lt >= target:  # the answer is below lo
            x, w = x[lt], w[lt]
            continue
        le = x <= hi
        w_le = float(np.sum(w, where=le))
        if below + w_le < target and not le.all():  # the answer is above hi
            below += w_le
            x, w = x[~le], w[~le]
            continue
        if lo == hi:  # lo <= answer <= hi
            return float(lo)
        if le.all() and not lt.any():  # the bracket holds every value: split at one of them
            pivot = float(x[len(x) // 2])
            continue
        mid = le & ~lt  # holds lo and hi, which are values of x: never empty
        below += w_lt
        x, w = x[mid], w[mid]
    order = np.argsort(x, kind="stable")
    cum = below + np.cumsum(w[order])
    i = min(int(np.searchsorted(cum, target)), len(x) - 1)
    return float(x[order][i])


class Quantiles:
    """Quantiles of non-negative values with ``n_weights`` weight columns (see the module
    docstring for exactness and memory). Non-finite values are left out; a negative value is
    an error (durations, shares and speedups are never negative)."""

    def __init__(self, n_weights: int = 0) -> None:
        self.n_weights = n_weights
        self._x: list[F] = []
        self._w: list[F] = []
        self._n = 0
        self._hist: tuple[NDArray[np.int64], NDArray[np.int64], F, F, F] | None = None

    @property
    def count(self) -> int:
        """Values added (finite ones)."""
        return self._n

    @property
    def exact(self) -> bool:
        """Whether every value is still kept (answers are numpy's on the whole array)."""
        return self._hist is None

    def add(self, x: ArrayLike, w: Sequence[ArrayLike] | None = None) -> Quantiles:
        """Add values ``x`` with one array per weight column (weights that are not finite
        and positive count as 0)."""
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        ws = np.empty((self.n_weights, len(x)))
        for j, wj in enumerate(w or []):
            wj = np.broadcast_to(np.asarray(wj, dtype=np.float64), x.shape)
            ws[j] = np.where(np.isfinite(wj) & (wj > 0), wj, 0.0)
        keep = np.isfinite(x)
        if not keep.all():
            x, ws = x[keep], ws[:, keep]
        if len(x) and float(x.min()) < 0:
            raise ValueError("Quantiles holds non-negative values")
        if not len(x):
            return self
        self._n += len(x)
        if self._hist is None and self._n <= EXACT_MAX:
            self._x.append(x)
            self._w.append(ws)
            return self
        if self._hist is None:
            self._fold()
        assert self._hist is not None
        self._hist = _combine(self._hist, _histogram(x, ws))
        return self

    def merge(self, other: Quantiles) -> Quantiles:
        """Add another sketch's values (the same number of weight columns)."""
        if other._hist is None:
            for x, w in zip(other._x, other._w, strict=True):
                self.add(x, list(w))
            return self
        if self._hist is None:
            self._fold()
        assert self._hist is not None
        self._hist = _combine(self._hist, other._hist)
        self._n += other._n
        return self

    def _fold(self) -> None:
        """Fold the kept values into the histogram (for good)."""
        x, w = self._values()
        self._x, self._w = [], []
        self._hist = _histogram(x, w)

    def _values(self) -> tuple[F, F]:
        x = np.concatenate(self._x) if self._x else np.empty(0)
        w = np.concatenate(self._w, axis=1) if self._w else np.zeros((self.n_weights, 0))
        return x, w

    def quantiles(self, ps: ArrayLike) -> F:
        """The ``ps`` quantiles, linear between order statistics (``np.quantile``); NaN when
        empty."""
        ps = np.asarray(ps, dtype=np.float64)
        if self._n == 0:
            return np.full(ps.shape, np.nan)
        if self._hist is None:
            return np.quantile(self._values()[0], ps)
        _, cnt, _, lo, hi = self._hist
        cum = np.cumsum(cnt)
        rank = ps * (self._n - 1)
        k0, k1 = np.floor(rank).astype(np.int64), np.ceil(rank).astype(np.int64)

        def order_stat(k: NDArray[np.int64]) -> F:
            b = np.searchsorted(cum, k, side="right")
            before = cum[b] - cnt[b]
            frac = np.where(cnt[b] > 1, (k - before) / np.maximum(cnt[b] - 1, 1), 0.0)
            return lo[b] + (hi[b] - lo[b]) * frac

        v0, v1 = order_stat(k0), order_stat(k1)
        return v0 + (v1 - v0) * (rank - k0)

    def median(self) -> float:
        """The median (``np.median``); NaN when empty."""
        return float(self.quantiles(0.5))

    def weighted_median(self, j: int = 0) -> float:
        """The smallest value whose weight (column ``j``) of values <= it reaches half the
        total (:func:`weighted_median`); NaN without weight."""
        if self._hist is None:
            x, w = self._values()
            return weighted_median(x, w[j])
        _, _, ws, lo, hi = self._hist
        wj = ws[j]
        total = float(wj.sum())
        if total <= 0:
            return float("nan")
        cum = np.cumsum(wj)
        b = int(np.searchsorted(cum, 0.5 * total))
        b = min(b, len(cum) - 1)
        before = cum[b] - wj[b]
        frac = (0.5 * total - before) / wj[b] if wj[b] > 0 else 0.0
        return float(lo[b] + (hi[b] - lo[b]) * min(max(frac, 0.0), 1.0))

    def max(self) -> float:
        """The largest value; NaN when empty."""
        if self._n == 0:
            return float("nan")
        if self._hist is None:
            return float(max(float(x.max()) for x in self._x if len(x)))
        return float(self._hist[4][-1])


def _histogram(x: F, w: F) -> tuple[NDArray[np.int64], NDArray[np.int64], F, F, F]:
    """Bins of ``x`` (sorted bin index, count, weight sums per column, least, largest): dense
    counts over the chunk's range of bins (``np.bincount``), then its occupied bins."""
    pos = x > 0
    out: list[tuple[NDArray[np.int64], NDArray[np.int64], F, F, F]] = [
        (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64), np.zeros((len(w), 0)),
         np.empty(0), np.empty(0))]
    if not pos.all():  # zeros: a bin of their own, first
        z = ~pos
        out.append((np.array([_ZERO_BIN]), np.array([int(z.sum())]),
                    w[:, z].sum(axis=1, keepdims=True), np.zeros(1), np.zeros(1)))
    if pos.any():
        every = bool(pos.all())
        xp = x if every else x[pos]
        b = np.log(xp)
        b *= 1.0 / _LOG_GAMMA
        i = np.floor(b, out=b).astype(np.int64)
        off = int(i.min())
        i -= off
        m = int(i.max()) + 1
        cnt = np.bincount(i, minlength=m)
        lo, hi = np.full(m, np.inf), np.full(m, -np.inf)
        np.minimum.at(lo, i, xp)
        np.maximum.at(hi, i, xp)
        ws = np.stack([np.bincount(i, weights=wj if every else wj[pos], minlength=m)
                       for wj in w]) if len(w) else np.zeros((0, m))
        occ = np.flatnonzero(cnt)
        out.append((occ + off, cnt[occ], ws[:, occ], lo[occ], hi[occ]))
    return (np.concatenate([o[0] for o in out]), np.concatenate([o[1] for o in out]),
            np.concatenate([o[2] for o in out], axis=1), np.concatenate([o[3] for o in out]),
            np.concatenate([o[4] for o in out]))


def _combine(a: tuple[NDArray[np.int64], NDArray[np.int64], F, F, F],
             b: tuple[NDArray[np.int64], NDArray[np.int64], F, F, F]
             ) -> tuple[NDArray[np.int64], NDArray[np.int64], F, F, F]:
    """Two histograms as one."""
    return _reduce(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]),
                   np.concatenate([a[2], b[2]], axis=1), np.concatenate([a[3], b[3]]),
                   np.concatenate([a[4], b[4]]))


def _reduce(b: NDArray[np.int64], cnt: NDArray[np.int64], w: F, lo: F, hi: F
            ) -> tuple[NDArray[np.int64], NDArray[np.int64], F, F, F]:
    """Entries with the same bin index summed (count, weights) and bounded (least, largest),
    in bin order."""
    if not len(b):
        return b, cnt, w, lo, hi
    order = np.argsort(b, kind="stable")
    b, cnt, w, lo, hi = b[order], cnt[order], w[:, order], lo[order], hi[order]
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    return (b[starts], np.add.reduceat(cnt, starts),
            np.add.reduceat(w, starts, axis=1) if w.shape[0] else np.zeros((0, len(starts))),
            np.minimum.reduceat(lo, starts), np.maximum.reduceat(hi, starts))
