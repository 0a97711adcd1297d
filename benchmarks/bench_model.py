"""Vectorized time model vs a plain per-job Python loop.

Target: the time model (``evaluate`` on resolved rows: communication by architecture, compute,
total) at >= 10 million job-evaluations per second for 1,000,000 jobs on a 2-core machine, and
``predict_table`` end to end at >= 100x the per-job loop: ``predict_table`` called on one-row
tables, as code that does not vectorize would (timed on a subset in the same run). For reference
it also times the formulas written out in plain Python floats, the fastest a per-job loop can be.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
import pyarrow as pa

from traincast.architectures import ARCHITECTURES
from traincast.hardware.catalog import load_catalog
from traincast.predict import compute_s, evaluate, predict_table
from traincast.resolve import Resolved, resolve

N = 1_000_000
LOOP_N = 50_000
CALL_N = 2_000
NODES = ("pai-v100-pcie", "pai-v100-nvlink", "dgx-a100")
ARCHS = ("1w1g", "allreduce-local", "allreduce-cluster", "ps-worker", "pearl")


def _dictionary(codes: np.ndarray, values: tuple[str, ...]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), pa.array(values))


def make_jobs(n: int, seed: int = 0) -> dict[str, object]:
    """A job table as a trace store returns it (string columns dictionary-encoded)."""
    rng = np.random.default_rng(seed)
    code = rng.integers(0, len(ARCHS), n)
    gpus = np.where(code == 0, 1, np.where(code == 1, rng.integers(2, 9, n),
                                           rng.integers(2, 65, n))).astype(np.float64)
    return {"architecture": _dictionary(code, ARCHS),
            "node": _dictionary(rng.integers(0, len(NODES), n), NODES),
            "n_gpus": gpus, "n_ps": rng.integers(1, 9, n).astype(np.float64),
            "flops_compute_bound": rng.uniform(1e10, 1e14, n),
            "bytes_memory_bound": rng.uniform(1e8, 1e11, n),
            "weight_bytes": rng.uniform(1e6, 1e10, n),
            "embedding_bytes_touched": rng.uniform(0, 1e9, n),
            "input_bytes": rng.uniform(1e5, 1e9, n)}


def loop_total(r: Resolved, flop_s: list[float], mem_s: list[float], i: int) -> float:
    """One job, plain Python floats: the docs/model.md formulas written out per architecture."""
    name = ARCHITECTURES[int(r.arch[i])]
    n, g, nodes, m, k, p = r.n[i], r.g[i], r.nodes[i], r.m[i], r.k[i], r.p[i]
    w, e = r.w[i], r.e[i]
    pcie, intra, nic, rails = r.pcie_bps[i], r.intra_bps[i], r.nic_bps[i], r.rails[i]
    ring = 2 * (n - 1) / n if n > 1 else 0.0
    link = intra if nodes == 1 else min(intra, min(rails, g) * nic)
    if name == "1w1g":
        comm = 0.0
    elif name == "allreduce-local":
        comm = ring * (w + e) / intra
    elif name == "allreduce-cluster":
        comm = ring * (w + e) / link
    elif name == "ps-worker":
        comm = 2 * (w + e) / pcie + max(2 * (w + e) * k / (min(rails, k) * nic),
                                        2 * m * (w + e) / (p * nic))
    else:
        comm = ring * w / link + ring * e / link
    return r.input_bytes[i] / pcie + flop_s[i] + mem_s[i] + comm


def main() -> int:
    cat = load_catalog()
    jobs = make_jobs(N)
    predict_table(jobs, cat)  # warm-up
    best, best_model = math.inf, math.inf
    r_all = resolve(jobs, cat)  # the time model alone is timed on these resolved rows
    for _ in range(5):
        t0 = time.perf_counter()
        bd = predict_table(jobs, cat)
        best = min(best, time.perf_counter() - t0)
        t0 = time.perf_counter()
        evaluate(r_all, cat)
        best_model = min(best_model, time.perf_counter() - t0)
    assert np.isfinite(bd.total).all()
    vec_rate, model_rate = N / best, N / best_model
    r = resolve({k: v[:LOOP_N] for k, v in jobs.items()}, cat)
    flop_s, mem_s = (x.tolist() for x in compute_s(r, cat)[:2])  # idle: part of both
    plain = Resolved(**{f: (getattr(r, f).tolist() if isinstance(getattr(r, f), np.ndarray)
                            else getattr(r, f)) for f in Resolved.__dataclass_fields__})
    t0 = time.perf_counter()
    loop = [loop_total(plain, flop_s, mem_s, i) for i in range(LOOP_N)]
    loop_rate = LOOP_N / (time.perf_counter() - t0)
    np.testing.assert_allclose(bd.total[:LOOP_N], loop, rtol=1e-9)  # same answers
    t0 = time.perf_counter()
    calls = [float(predict_table({k: v[i:i + 1] for k, v in jobs.items()}, cat).total[0])
             for i in range(CALL_N)]
    call_rate = CALL_N / (time.perf_counter() - t0)
    np.testing.assert_allclose(bd.total[:CALL_N], calls, rtol=1e-12)
    ratio = vec_rate / call_rate
    print(f"time model (evaluate):     {N:,} resolved jobs in {best_model * 1e3:.1f} ms = "
          f"{model_rate / 1e6:.1f} M jobs/s (communication + compute + total)")
    print(f"end to end (predict_table): {N:,} jobs in {best * 1e3:.1f} ms = "
          f"{vec_rate / 1e6:.1f} M jobs/s (+ reading the table and resolve())")
    print(f"per-job loop (same model): {call_rate / 1e3:.2f} k jobs/s ({CALL_N:,} one-row "
          "tables)")
    print(f"plain-float formulas loop: {loop_rate / 1e6:.2f} M jobs/s ({LOOP_N:,} jobs, rates "
          f"resolved beforehand), vectorized is {vec_rate / loop_rate:.0f}x that")
    print(f"ratio end to end / per-job loop = {ratio:.0f}x   "
          f"(targets: time model >= 10 M jobs/s, >= 100x)")
    return 0 if model_rate >= 10e6 and ratio >= 100 else 1


if __name__ == "__main__":
    sys.exit(main())
