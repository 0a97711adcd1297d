"""What-if analysis: how much faster would each job run under a scenario?

``speedup = T_total(base) / T_total(scenario)`` per job (1 exactly for jobs the scenario does not
match or that do not fit its change). Summaries over the matched jobs with a prediction:
``sped_up_share`` (speedup > 1.01), mean and median speedup weighted by job, by GPUs (n) and by
GPU time (n x duration), the share of the matched jobs' GPU time saved
(``1 - sum(w / speedup) / sum(w)``, w = n x duration), and the same per architecture.
Scenario rules: docs/scenarios.md; engines: ``traincast.engine``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from traincast.engine import ENGINES
from traincast.engine.local import CHUNK_ROWS, run_scenarios
from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.jobs import Columns, Strings
from traincast.model import Breakdown
from traincast.resolve import Resolved, reason_counts
from traincast.scenarios import Scenario, as_scenarios, parse_sweep, sweep

F = NDArray[np.float64]
SPED_UP = 1.01  # a job "speeds up" when its speedup exceeds this


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


def _median(s: F) -> float:
    return float(np.median(s)) if len(s) else float("nan")


def _div(a: F, b: F) -> F:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1.0), np.nan)


def summarize(architecture: Strings, gpus: F, duration_s: F, base_total_s: F,
              matched: NDArray[np.bool_], applied: NDArray[np.bool_],
              total_s: F) -> dict[str, Any]:
    """The summary (docs/scenarios.md keys) of one scenario, with ``by_architecture``.

    ``not_applied`` counts matched jobs with a prediction that the scenario cannot apply (they
    do not fit); jobs without a prediction are counted in ``unpredicted`` by reason.
    Statistics are over matched jobs with a finite speedup s: shares and means are weighted
    sums per architecture (``np.bincount``) — job-weighted, GPU-weighted (w = n) and
    GPU-time-weighted (w = n x duration; jobs without a duration are left out of it); GPU time
    saved = ``1 - sum(w / s) / sum(w)``; medians by selection (no sort). Sums are taken by
    chunk of rows (cache-friendly); medians over all the matched jobs.
    """
    k = len(architecture.values) + 1  # groups: architectures, then null
    keys = ("n", "s", "up", "down", "g", "gs", "t", "ts", "t_over_s", "a", "as")
    acc = np.zeros((len(keys), k))
    cnt = np.zeros((4, k))
    n = len(base_total_s)
    kept = {name: np.empty(n) for name in ("s", "g", "t")}
    kept_c = np.empty(n, dtype=np.int32)
    m = 0
    for start in range(0, n, CHUNK_ROWS):  # sums by chunk: temporaries stay in the CPU cache
        sl = slice(start, start + CHUNK_ROWS)
        with np.errstate(divide="ignore", invalid="ignore"):
            sp = base_total_s[sl] / total_s[sl]
        codes = architecture.codes[sl]
        c = np.where(codes >= 0, codes, k - 1)
        mt, ap = matched[sl], applied[sl]
        known = mt & np.isfinite(base_total_s[sl])  # matched jobs with a base prediction
        cnt += [np.bincount(c, weights=w, minlength=k) for w in (None, mt, mt & ap, known)]
        v = mt & np.isfinite(sp)
        s, c, a = sp[v], c[v], ap[v]
        g = gpus[sl][v]
        g = np.where(np.isfinite(g) & (g > 0), g, 0.0)
        t = g * duration_s[sl][v]
        t = np.where(np.isfinite(t) & (t > 0), t, 0.0)
        acc += [np.bincount(c, weights=w, minlength=k) for w in (
            None, s, s > SPED_UP, s < 1 / SPED_UP, g, g * s, t, t * s, t / s, a, a * s)]
        j = len(s)
        for name, x in (("s", s), ("g", g), ("t", t)):
            kept[name][m:m + j] = x
        kept_c[m:m + j] = c
        m += j
    s, g, t, c = kept["s"][:m], kept["g"][:m], kept["t"][:m], kept_c[:m]
    per = dict(zip(keys, acc, strict=True))
    per_all = {key: v.sum(keepdims=True) for key, v in per.items()}
    counts = dict(zip(("jobs", "matched", "applied", "known"), cnt.astype(np.int64),
                      strict=True))

    def block(sm: dict[str, F], i: int, n: dict[str, int], median: float) -> dict[str, Any]:
        def x(key: str) -> float:
            return float(sm[key][i])

        return {"jobs": n["jobs"], "matched": n["matched"], "applied": n["applied"],
                "not_applied": n["known"] - n["applied"], "predicted": int(x("n")),
                "sped_up_share": float(_div(sm["up"], sm["n"])[i]),
                "slowed_down_share": float(_div(sm["down"], sm["n"])[i]),
                "mean_speedup": float(_div(sm["s"], sm["n"])[i]),
                "median_speedup": median,
                "gpu_weighted_mean_speedup": float(_div(sm["gs"], sm["g"])[i]),
                "gpu_time_weighted_mean_speedup": float(_div(sm["ts"], sm["t"])[i]),
                "gpu_time_saved_share": 1.0 - float(_div(sm["t_over_s"], sm["t"])[i]),
                "applied_mean_speedup": float(_div(sm["as"], sm["a"])[i])}

    out = block(per_all, 0, {key: int(v.sum()) for key, v in counts.items()}, _median(s))
    out["max_speedup"] = float(s.max()) if len(s) else float("nan")
    out["gpu_weighted_median_speedup"] = weighted_median(s, g)
    out["gpu_time_weighted_median_speedup"] = weighted_median(s, t)
    names = [*architecture.values, "unknown"]
    out["by_architecture"] = {
        names[i]: block(per, i, {key: int(v[i]) for key, v in counts.items()},
                        _median(s[c == i]))
        for i in range(k) if counts["jobs"][i]}
    return out


def _outcome_local(jobs: Any, scenarios: list[Scenario], catalog: Catalog, overlap: float,
                   hierarchical: bool, progress: Callable[[int, int], None] | None,
                   threads: int, base: tuple[Breakdown, Resolved] | None = None
                   ) -> dict[str, Any]:
    if isinstance(jobs, str | Path):
        import pyarrow.parquet as pq

        jobs = pq.read_table(jobs)
    cols = Columns.of(jobs)
    base_s, reason, results = run_scenarios(cols, scenarios, catalog, overlap, hierarchical,
                                            progress, threads, base=base)
    return {"job_id": cols["job_id"], "architecture": cols["architecture"],
            "n_gpus": cols["n_gpus"], "duration_s": cols.duration_s(), "base_total_s": base_s,
            "reason": reason, "results": [(r.matched, r.applied, r.total_s) for r in results]}


def _outcome_dask(jobs: Any, scenarios: list[Scenario], catalog: Catalog, overlap: float,
                  hierarchical: bool, progress: Callable[[int, int], None] | None,
                  address: str | None, parquet_dir: str | Path | None,
                  rows_per_partition: int) -> dict[str, Any]:
    from traincast.engine.dask import run_dask

    if not isinstance(jobs, pa.Table | str | Path):
        cols = Columns.of(jobs)
        jobs = pa.table({**cols.table(), "job_id": cols["job_id"]})
    out = run_dask(jobs, scenarios, catalog, overlap, hierarchical, address=address,
                   parquet_dir=parquet_dir, rows_per_partition=rows_per_partition,
                   progress=progress)
    cols = Columns.of(out["table"])
    return {"job_id": cols["job_id"], "architecture": cols["architecture"],
            "n_gpus": cols["n_gpus"], "duration_s": cols.duration_s(),
            "base_total_s": out["base_total_s"], "reason": out["reason"],
            "results": out["results"]}


def job_rows(outcome: dict[str, Any], names: list[str]) -> pa.Table:
    """Per-job rows: job_id, scenario, matched, applied, base_total_s, scenario_total_s,
    speedup (one row per job and scenario)."""
    n = len(outcome["base_total_s"])
    ids = outcome["job_id"]
    tables = []
    for name, (matched, applied, total) in zip(names, outcome["results"], strict=True):
        with np.errstate(divide="ignore", invalid="ignore"):
            speedup = outcome["base_total_s"] / total
        tables.append(pa.table({
            "job_id": ids, "scenario": pa.repeat(pa.scalar(name, pa.string()), n),
            "matched": matched, "applied": applied,
            "base_total_s": outcome["base_total_s"], "scenario_total_s": total,
            "speedup": speedup}))
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables)


def whatif(jobs: Any, scenarios: str | Path | Scenario | Iterable[Any],
           catalog: Catalog | None = None, *, sweep_spec: str | None = None,
           overlap: float = 0.0, hierarchical: bool = False, engine: str = "local",
           address: str | None = None, parquet_dir: str | Path | None = None,
           rows_per_partition: int = 250_000, per_job: bool = False, threads: int = 2,
           progress: Callable[[int, int], None] | None = None,
           base: tuple[Breakdown, Resolved] | None = None) -> dict[str, Any]:
    """Run scenarios over a job table and summarize the speedups.

    ``jobs``: a canonical job table (pyarrow Table, dict of columns, pandas DataFrame) or a
    Parquet path. ``scenarios``: shipped names, TOML paths, dicts or ``Scenario`` objects;
    ``sweep_spec`` (``"nic=25Gbit,100Gbit"``) turns them (or every job) into one scenario per
    value. ``engine``: ``"local"`` or ``"dask"`` (``address`` of a cluster, else a LocalCluster
    on 127.0.0.1); ``threads``: row chunks evaluated and scenarios summarized concurrently
    (local); ``progress(done, total)`` is called as rows (local) or partitions (dask) finish.
    Returns ``{"jobs", "summary"}`` for one scenario or ``{"jobs",
    "scenarios": {name: summary}}`` for several, plus ``"definitions"``; with ``per_job``
    also ``"job_rows"`` (a pyarrow Table, see ``job_rows``). ``base``: the jobs' own
    ``engine.local.evaluate_columns(Columns.of(jobs), catalog, overlap, hierarchical)`` when
    the caller has it (``traincast study``), so the local engine does not evaluate it again.
    """
    catalog = catalog or load_catalog()
    specs = [] if scenarios is None else scenarios
    scs = as_scenarios(specs, catalog) if specs != [] else []
    if sweep_spec:
        key, values = parse_sweep(sweep_spec)
        scs = sweep(scs, key, values, catalog)
    if not scs:
        raise TraincastError("no scenario given", hint="--scenario NAME|FILE or --sweep KEY=V,...")
    if engine not in ENGINES:
        raise TraincastError(f"unknown engine {engine!r}", hint=f"choose {' or '.join(ENGINES)}")
    if engine == "local":
        outcome = _outcome_local(jobs, scs, catalog, overlap, hierarchical, progress, threads,
                                 base)
    else:
        outcome = _outcome_dask(jobs, scs, catalog, overlap, hierarchical, progress, address,
                                parquet_dir, rows_per_partition)
    def summary(res: tuple[Any, Any, Any]) -> dict[str, Any]:
        return summarize(outcome["architecture"], outcome["n_gpus"], outcome["duration_s"],
                         outcome["base_total_s"], *res)

    with ThreadPoolExecutor(max_workers=max(threads, 1)) as pool:
        summaries = dict(zip([sc.name for sc in scs], pool.map(summary, outcome["results"]),
                             strict=True))
    result: dict[str, Any] = {"jobs": len(outcome["base_total_s"]), "engine": engine,
                              "unpredicted": reason_counts(outcome["reason"])}
    if len(scs) == 1:
        result["summary"] = summaries[scs[0].name]
    else:
        result["scenarios"] = summaries
    result["definitions"] = {sc.name: sc.to_dict() for sc in scs}
    if per_job:
        result["job_rows"] = job_rows(outcome, [sc.name for sc in scs])
    return result
