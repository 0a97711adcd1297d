"""Predicted GPU utilization and an interference-aware co-location what-if (after Horus).

Horus (Yeung et al., "Horus: Interference-Aware and Prediction-Based Scheduling in Deep
Learning Systems", IEEE TPDS 33(1), 2022) predicts each job's GPU utilization from its model's
computation-graph features, without profiling it on a reserved GPU, and uses the prediction as
the proxy that decides which jobs may share a GPU. traincast does the same with its time model
and replays a trace under such a placement. Every formula here is in docs/colocate.md.

Per job, from the breakdown of :func:`traincast.predict.predict_table` (overlap 0)::

    u   = (T_comp - T_idle) / T_total       predicted GPU utilization (T_comp = flop + mem)
    phi = T_comp_flop k / T_total           share of the iteration on SMs (FLOP-bound kernels)
    mu  = T_comp_mem k / T_total            share of the iteration on DRAM bandwidth
    k   = (T_comp - T_idle) / T_comp        T_idle: the GPU waiting for the host to issue its
                                            next op (kernel model, kernels.queue_idle_s)

Measured utilization (the ``gpu_util`` column) is a fraction in [0, 1] in the job store (the
PAI 2020 adapter divides gpu_wrk_util, % of one GPU, by plan_gpu, % of GPUs held); errors are
reported in percentage points (pp): ``|u - measured| * 100``.

Pairing. Eligible jobs: known prediction, a whole number of GPUs (1 by default; any count
with ``multi_gpu``: both jobs of a pair then share all their n GPUs, one job per GPU each),
the same GPU model, and a start time where the trace gives start times (a job that never
started, a pending pod, runs beside nothing). Within each group (GPU model, n) the jobs are
sorted by ``u``, equal ``u`` by job id (so the pairs do not depend on the trace's row
order), and the
largest ``k`` is found such that the ``2k`` lowest-utilization jobs, paired outside-in
(lowest with ``2k``-th lowest, ...), all satisfy ``u_a + u_b <= bound``. That is the maximum
number of pairs any matching under the bound can have (exchange argument), and pairing
outside-in minimizes the sum of products ``u_a u_b`` over those jobs (rearrangement
inequality), so it also keeps contention low. ``k`` is found by bisection, each test one
numpy comparison: ``O(m log m)`` per group, no loop over jobs. With a memory check, pairs
whose footprints sum beyond the GPU memory (``S + A`` of each job, engine/workload.py) are
then split again (not re-paired).

Contention (both jobs run their kernels as independent, uniformly spread phases; a resource
wanted by both at once is split evenly, so the overlapping part takes twice as long)::

    T_flop_a' = T_flop_a * (1 + phi_b + kappa * mu_b)      SM time shared
    T_mem_a'  = T_mem_a  * (1 + mu_b  + kappa * phi_b)     memory bandwidth shared
    slowdown  = T_total_a' / T_total_a
              = 1 + phi_a phi_b + mu_a mu_b + kappa (phi_a mu_b + mu_a phi_b)

(data I/O and communication are not stretched). ``kappa`` (cross contention) is how much a
FLOP-bound kernel and a memory-bound kernel of the two jobs slow each other: 1 = time slicing
(CUDA's default for two processes: one kernel at a time, slowdown ``1 + u_a u_b``), 0 = ideal
spatial sharing (only like kernels contend). The slowdown is the same for both jobs of a pair.

GPU accounting against exclusive placement (durations D = end - start)::

    GPU time exclusive        = sum over jobs of n * D
    GPU time of a paired job  = n * slowdown * D / 2      (holds half of its n GPUs, longer)
    GPUs freed                = sum over pairs of n        (one job's GPUs per pair)

The half-GPU charge is steady state: a paired job is taken to have a co-runner for its whole
(stretched) run, as when a scheduler refills a freed slot with a similar job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike, NDArray

from traincast.analysis.characterize import default_hardware
from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.model import busy_parts_s
from traincast.resolve import reason_counts
from traincast.units import join_words

F = NDArray[np.float64]
I64 = NDArray[np.int64]

DEFAULT_UTIL_BOUND = 1.0
"""Pairs must have predicted utilizations summing to at most this (Horus: one GPU's worth)."""
DEFAULT_CROSS = 1.0
"""kappa: 1 = time slicing, the default for two processes on one GPU."""


def _f(x: ArrayLike) -> F:
    return np.asarray(x, dtype=np.float64)


def utilization_shares(compute_flop_s: ArrayLike, compute_mem_s: ArrayLike,
                       total_s: ArrayLike, idle_s: ArrayLike = 0.0) -> tuple[F, F, F]:
    """``(u, phi, mu)``: ``phi = flop busy / total``, ``mu = mem busy / total``, ``u = phi + mu``
    = busy / total, each compute part less its share of the GPU-idle time ``idle`` (the host's
    dispatch running behind the GPU): ``busy = part (flop + mem - idle) / (flop + mem)``. NaN
    where the total is unknown or not positive."""
    flop, mem = busy_parts_s(compute_flop_s, compute_mem_s, idle_s)
    total = np.broadcast_to(_f(total_s), flop.shape)
    ok = total > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        phi = np.where(ok, flop / total, np.nan)
        mu = np.where(ok, mem / total, np.nan)
    return phi + mu, phi, mu


def _ranks(x: F) -> F:
    """Ranks 1..n with ties given their average rank (for Spearman's rho)."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    first = np.r_[True, xs[1:] != xs[:-1]]
    starts = np.flatnonzero(first)
    ends = np.r_[starts[1:], len(xs)]
    avg = (starts + ends + 1) / 2.0  # mean of ranks starts+1 .. ends
    out = np.empty(len(x))
    out[order] = np.repeat(avg, ends - starts)
    return out


MIN_CORRELATION_JOBS = 3
"""The fewest jobs a correlation is computed over: through two points any line passes, so
their Pearson and Spearman coefficients are +-1 whatever the prediction (NaN below it)."""


def _pearson(x: F, y: F) -> float:
    if len(x) < MIN_CORRELATION_JOBS:
        return float("nan")
    dx, dy = x - x.mean(), y - y.mean()
    den = np.sqrt((dx * dx).sum() * (dy * dy).sum())
    return float((dx * dy).sum() / den) if den > 0 else float("nan")


def util_error(predicted: ArrayLike, measured: ArrayLike) -> dict[str, Any]:
    """Predicted vs measured utilization (both fractions) over jobs where both are known.

    ``mean_abs_error_pp`` / ``median_abs_error_pp`` = mean / median of ``|p - m| * 100``;
    ``bias_pp`` = mean of ``(p - m) * 100``; ``pearson`` on the values, ``spearman`` = Pearson
    on ranks (ties averaged), both NaN under :data:`MIN_CORRELATION_JOBS` jobs; ``jobs`` =
    jobs compared.
    """
    p, m = np.broadcast_arrays(_f(predicted), _f(measured))
    ok = np.isfinite(p) & np.isfinite(m)
    p, m = p[ok], m[ok]
    if not len(p):
        return {"jobs": 0, "mean_abs_error_pp": None, "median_abs_error_pp": None,
                "bias_pp": None, "pearson": None, "spearman": None}
    err = (p - m) * 100.0
    return {"jobs": int(len(p)), "mean_abs_error_pp": float(np.abs(err).mean()),
            "median_abs_error_pp": float(np.median(np.abs(err))), "bias_pp": float(err.mean()),
            "pearson": _pearson(p, m), "spearman": _pearson(_ranks(p), _ranks(m))}


def _max_pairs(x: F, bound: float) -> int:
    """Largest k with ``x[i] + x[2k-1-i] <= bound`` for all i < k (``x`` sorted ascending)."""
    lo, hi = 0, len(x) // 2
    while lo < hi:
        k = (lo + hi + 1) // 2
        i = np.arange(k)
        if np.all(x[i] + x[2 * k - 1 - i] <= bound + 1e-12):
            lo = k
        else:
            hi = k - 1
    return lo


def pair_jobs(util: ArrayLike, group: ArrayLike, bound: float = DEFAULT_UTIL_BOUND,
              eligible: ArrayLike | None = None, order: ArrayLike | None = None
              ) -> tuple[I64, I64]:
    """Row indices ``(a, b)`` of the pairs: within each ``group`` value, the most pairs with
    ``u_a + u_b <= bound``, lowest utilizations paired outside-in (see the module docstring);
    equal utilizations in ``order`` (the job ids' ranks; default the rows' order).

    Rows with NaN utilization, a negative group code or ``eligible`` False are never paired.
    """
    u = _f(util)
    g = np.asarray(group, dtype=np.int64)
    ok = np.isfinite(u) & (g >= 0)
    if eligible is not None:
        ok &= np.asarray(eligible, dtype=bool)
    rows = np.flatnonzero(ok)
    empty = np.empty(0, dtype=np.int64)
    if not len(rows):
        return empty, empty
    tie = np.arange(len(u)) if order is None else np.asarray(order)
    rows = rows[np.lexsort((tie[rows], u[rows], g[rows]))]  # group, utilization, job id
    starts = np.flatnonzero(np.r_[True, g[rows][1:] != g[rows][:-1]])
    ends = np.r_[starts[1:], len(rows)]
    a_parts, b_parts = [], []
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):  # one pass per group
        k = _max_pairs(u[rows[s:e]], bound)
        i = np.arange(k)
        a_parts.append(rows[s + i])
        b_parts.append(rows[s + 2 * k - 1 - i])
    return np.concatenate(a_parts).astype(np.int64), np.concatenate(b_parts).astype(np.int64)


def pair_slowdown(phi_a: ArrayLike, mu_a: ArrayLike, phi_b: ArrayLike, mu_b: ArrayLike,
                  cross: float = DEFAULT_CROSS) -> F:
    """``1 + phi_a phi_b + mu_a mu_b + kappa (phi_a mu_b + mu_a phi_b)`` (same for a and b)."""
    pa_, ma, pb, mb = (_f(v) for v in (phi_a, mu_a, phi_b, mu_b))
    return 1.0 + pa_ * pb + ma * mb + cross * (pa_ * mb + ma * pb)


_UTIL_STATS = ("mean", "median", "p10", "p90")  # of a utilization


def _stats(x: F, names: tuple[str, ...]) -> dict[str, float | None]:
    """Statistics of the finite values of ``x`` by name: ``mean``, ``median``, ``max`` and
    ``pNN`` (NNth percentile, linear interpolation); None each when there are none."""
    x = x[np.isfinite(x)]
    if not len(x):
        return dict.fromkeys(names)
    named = {"mean": np.mean, "median": np.median, "max": np.max}
    return {k: float(named[k](x) if k in named else np.percentile(x, float(k[1:])))
            for k in names}


@dataclass(frozen=True)
class Colocation:
    """Per-job outcome: partner row (-1 = alone) and slowdown (1 alone, NaN when unknown)."""

    partner: I64
    slowdown: F
    memory_rejected_pairs: int


def colocate_arrays(phi: ArrayLike, mu: ArrayLike, group: ArrayLike, *,
                    bound: float = DEFAULT_UTIL_BOUND, cross: float = DEFAULT_CROSS,
                    eligible: ArrayLike | None = None, footprint_bytes: ArrayLike | None = None,
                    gpu_mem_bytes: ArrayLike | None = None,
                    order: ArrayLike | None = None) -> Colocation:
    """Pair jobs (:func:`pair_jobs` on ``u = phi + mu``, ties in ``order``), drop pairs over
    the GPU memory (``footprint_a + footprint_b > gpu_mem``; NaN = not checked) and give each
    job its slowdown."""
    if not 0 < bound <= 2:
        raise TraincastError(f"utilization bound {bound}: must be in (0, 2]",
                             hint="Horus pairs jobs whose utilizations sum to at most 1.0")
    if not 0 <= cross <= 1:
        raise TraincastError(f"cross contention {cross}: must be in [0, 1]",
                             hint="1 = time slicing, 0 = ideal spatial sharing")
    phi_, mu_ = np.broadcast_arrays(_f(phi), _f(mu))
    n = len(phi_)
    a, b = pair_jobs(phi_ + mu_, group, bound, eligible, order)
    rejected = 0
    if footprint_bytes is not None and gpu_mem_bytes is not None and len(a):
        fp = np.broadcast_to(_f(footprint_bytes), (n,))
        cap = np.broadcast_to(_f(gpu_mem_bytes), (n,))
        over = fp[a] + fp[b] > cap[a]  # NaN compares False: not checked
        rejected = int(over.sum())
        a, b = a[~over], b[~over]
    partner = np.full(n, -1, dtype=np.int64)
    partner[a], partner[b] = b, a
    slow = np.where(np.isfinite(phi_ + mu_), 1.0, np.nan)
    s = pair_slowdown(phi_[a], mu_[a], phi_[b], mu_[b], cross)
    slow[a], slow[b] = s, s
    return Colocation(partner=partner, slowdown=slow, memory_rejected_pairs=rejected)


def gpu_accounting(n_gpus: ArrayLike, duration_s: ArrayLike, partner: ArrayLike,
                   slowdown: ArrayLike) -> dict[str, Any]:
    """GPUs freed and GPU time saved against exclusive placement (module docstring).

    Jobs without a known positive GPU count (``jobs_without_gpus``), and jobs with GPUs but
    without a known duration (``jobs_without_duration``), are left out of the GPU-time sums.
    """
    n = _f(n_gpus)
    d = _f(duration_s)
    part = np.asarray(partner, dtype=np.int64)
    s = _f(slowdown)
    paired = part >= 0
    known = np.isfinite(n) & (n > 0) & np.isfinite(d) & (d >= 0)
    excl = np.where(known, n * d, 0.0)
    after = np.where(paired, excl * s / 2.0, excl)
    total_gpus = float(np.nansum(np.where(n > 0, n, 0.0)))
    # each pair counted once: at its lower row index
    freed = float(n[paired & (np.arange(len(part)) < part)].sum())
    saved = float(excl.sum() - after.sum())
    return {"gpus_freed": freed, "gpus_total": total_gpus,
            "gpus_freed_share": freed / total_gpus if total_gpus > 0 else None,
            "gpu_time_exclusive_s": float(excl.sum()), "gpu_time_colocated_s": float(after.sum()),
            "gpu_time_saved_s": saved,
            "gpu_time_saved_share": saved / float(excl.sum()) if excl.sum() > 0 else None,
            "jobs_without_duration": int((np.isfinite(n) & (n > 0) & ~known).sum()),
            "jobs_without_gpus": int((~(np.isfinite(n) & (n > 0))).sum())}


def job_arrays(jobs: pa.Table | Mapping[str, Any], catalog: Catalog, *,
               multi_gpu: bool = False) -> dict[str, Any]:
    """Per-job arrays the what-if needs from a canonical job table.

    ``phi``, ``mu``, ``util`` (module docstring), ``measured`` (``gpu_util``), ``n_gpus``,
    ``duration_s``, ``group`` (code of (GPU model, n); -1 = not eligible), ``footprint_bytes``
    (per GPU, by architecture: engine/workload.py), ``gpu_mem_bytes`` (``mem_gb`` x 1e9) and
    ``reason`` (why a job has no prediction: ``traincast.resolve.REASONS``),
    ``unnamed_hardware`` (how many jobs with GPUs name neither a GPU type nor a node: priced,
    and grouped for pairing, on the default node's GPU).
    """
    from traincast.engine.local import evaluate_columns
    from traincast.engine.workload import workload_extras
    from traincast.jobs import Columns, unnamed_hardware

    cols = Columns.of(jobs)
    bd, r = evaluate_columns(cols, catalog)  # r: the GPU model, memory, architecture per row
    util, phi, mu = utilization_shares(bd.compute_flop, bd.compute_mem, bd.total, bd.host_wait)
    n = cols["n_gpus"]
    whole = np.isfinite(n) & (n >= 1) & (n == np.round(n))
    start = cols["start_time_s"]
    ran = np.isfinite(start) | ~np.isfinite(start).any()  # times given: it started
    ok = whole & ((n == 1) | multi_gpu) & ran
    key = r.gpu.codes.astype(np.int64) * 1_000_003 + np.nan_to_num(n).astype(np.int64)
    _, group = np.unique(np.where(ok, key, -1), return_inverse=True)
    group = np.where(ok, group.reshape(-1), -1)
    footprint = workload_extras(cols).footprint_bytes(r.arch, n)
    mem_gb = r.mem_gb
    import pyarrow.compute as pc

    order = pc.rank(cols["job_id"], sort_keys="ascending", tiebreaker="dense").to_numpy()
    return {"job_id": cols["job_id"], "order": order, "phi": phi, "mu": mu, "util": util,
            "measured": cols["gpu_util"], "n_gpus": n, "duration_s": cols.duration_s(),
            "group": group, "footprint_bytes": footprint, "gpu_mem_bytes": mem_gb * 1e9,
            "reason": bd.reason, "unnamed_hardware": int(unnamed_hardware(cols.data, n).sum())}


def measured_shares(measured: ArrayLike, phi: ArrayLike, mu: ArrayLike) -> tuple[F, F]:
    """``(phi_m, mu_m)``: measured utilization ``m`` split in the predicted proportions,
    ``phi_m = m * phi / (phi + mu)``, ``mu_m = m - phi_m``; all SM time (``phi_m = m``) where
    the prediction is unknown."""
    m, p, q = np.broadcast_arrays(_f(measured), _f(phi), _f(mu))
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(p + q > 0, p / (p + q), 1.0)
    frac = np.where(np.isfinite(frac), frac, 1.0)
    return m * frac, m * (1.0 - frac)


UTIL_SOURCES = ("predicted", "measured")
"""What :func:`colocate` pairs jobs by: their predicted or their measured utilization."""


def check_util_source(by: str, said: str = "utilization source") -> None:
    """An error unless ``by`` is one of :data:`UTIL_SOURCES` (``said``: how the caller names
    it, ``--by`` on the command line)."""
    if by not in UTIL_SOURCES:
        raise TraincastError(f"{said} {by!r}: expected {join_words(UTIL_SOURCES, 'or')}")


def colocate(jobs: pa.Table | Mapping[str, Any], catalog: Catalog | None = None, *,
             bound: float = DEFAULT_UTIL_BOUND, cross: float = DEFAULT_CROSS,
             multi_gpu: bool = False, memory_check: bool = True, by: str = "predicted",
             per_job: bool = False) -> dict[str, Any]:
    """Predicted vs measured utilization and the co-location what-if of a job table.

    ``by``: pair and slow down jobs by their ``predicted`` utilization (Horus) or by the
    ``measured`` one (:func:`measured_shares`; jobs without a measurement stay alone).
    Returns ``{"jobs", "utilization": {"predicted", "measured", "comparison"},
    "colocation": {...}}`` (docs/colocate.md lists every key); with ``per_job`` also
    ``"job_rows"``: a pyarrow Table (job_id, predicted_util, measured_util, partner, slowdown).
    """
    check_util_source(by)
    catalog = catalog or load_catalog()
    arr = job_arrays(jobs, catalog, multi_gpu=multi_gpu)
    phi, mu = (arr["phi"], arr["mu"]) if by == "predicted" else \
        measured_shares(arr["measured"], arr["phi"], arr["mu"])
    co = colocate_arrays(phi, mu, arr["group"], bound=bound, cross=cross,
                         footprint_bytes=arr["footprint_bytes"] if memory_check else None,
                         gpu_mem_bytes=arr["gpu_mem_bytes"] if memory_check else None,
                         order=arr["order"])
    paired = co.partner >= 0
    ok = (arr["group"] >= 0) & np.isfinite(phi + mu)
    per_group = np.bincount(arr["group"][ok].astype(np.int64)) if ok.any() else np.zeros(0)
    acct = gpu_accounting(arr["n_gpus"], arr["duration_s"], co.partner, co.slowdown)
    n = len(arr["util"])
    out: dict[str, Any] = {
        "jobs": n,
        "unpredicted": reason_counts(arr["reason"]),
        "default_hardware": default_hardware(catalog, arr["unnamed_hardware"]),
        "utilization": {
            "predicted_jobs": int(np.isfinite(arr["util"]).sum()),
            "predicted": _stats(arr["util"], _UTIL_STATS),
            "measured_jobs": int(np.isfinite(arr["measured"]).sum()),
            "measured": _stats(arr["measured"], _UTIL_STATS),
            "comparison": util_error(arr["util"], arr["measured"]),
        },
        "colocation": {
            "util_bound": bound, "cross_contention": cross, "multi_gpu": multi_gpu,
            "memory_check": memory_check, "by": by,
            "eligible": int(ok.sum()),
            # eligible jobs with another of their group (GPU model, n): the ones that can pair
            "pairable": int(per_group[per_group >= 2].sum()),
            "pairs": int(paired.sum() // 2), "paired_jobs": int(paired.sum()),
            "memory_rejected_pairs": co.memory_rejected_pairs, **acct,
            "slowdown": _stats(co.slowdown[paired], ("mean", "median", "p90", "max")),
        },
    }
    if per_job:
        ids = arr["job_id"]
        import pyarrow.compute as pc

        partner_id = pc.if_else(pa.array(co.partner < 0), pa.scalar(None, pa.string()),
                                ids.take(pa.array(np.maximum(co.partner, 0))))
        out["job_rows"] = pa.table({
            "job_id": ids, "predicted_util": pa.array(arr["util"], from_pandas=True),
            "measured_util": pa.array(arr["measured"], from_pandas=True),
            "partner": partner_id, "slowdown": pa.array(co.slowdown, from_pandas=True)})
    return out
