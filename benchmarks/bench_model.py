"""Vectorized time model vs a plain per-job Python loop.

Target: >= 10 million job-evaluations per second for 1,000,000 jobs on a 2-core machine, and
>= 100x the per-job loop: the same model function called once per job, as code that does not
vectorize would (timed on a subset in the same run). For reference it also times the formulas
written out in plain Python floats, the fastest a per-job loop can be.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from traincast.arch import ARCH_CODE
from traincast.predict import Hardware, evaluate

N = 1_000_000
LOOP_N = 50_000
CALL_N = 5_000


def make_jobs(n: int, seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray],
                                                 Hardware]:
    rng = np.random.default_rng(seed)
    code = rng.integers(0, len(ARCH_CODE), n)
    gpus = np.where(code == ARCH_CODE["1w1g"], 1, rng.integers(2, 65, n)).astype(np.float64)
    shape = {"arch": code, "n": gpus, "g": np.minimum(8.0, gpus), "m": gpus,
             "p": rng.integers(1, 9, n).astype(np.float64)}
    feats = {"flops_compute_bound": rng.uniform(1e10, 1e14, n),
             "bytes_memory_bound": rng.uniform(1e8, 1e11, n),
             "weight_bytes": rng.uniform(1e6, 1e10, n),
             "embedding_bytes_touched": rng.uniform(0, 1e9, n),
             "input_bytes": rng.uniform(1e5, 1e9, n)}
    hw = Hardware(flops_per_s=rng.choice([15.7e12, 14e12, 312e12], n),
                  mem_bw_bps=rng.choice([900e9, 2039e9], n),
                  pcie_bps=np.full(n, 15.75e9), intra_bps=rng.choice([15.75e9, 150e9], n),
                  nic_bps=rng.choice([3.125e9, 12.5e9], n), node_gpus=np.full(n, 8.0),
                  mem_gb=np.full(n, 16.0))
    return feats, shape, hw


def loop_total(feats, shape, hw, i: int) -> float:
    """One job, plain Python: the DESIGN.md formulas written out per architecture."""
    code, n, g = int(shape["arch"][i]), shape["n"][i], shape["g"][i]
    m, p = shape["m"][i], shape["p"][i]
    w, e = feats["weight_bytes"][i], feats["embedding_bytes_touched"][i]
    pcie, intra, nic = hw.pcie_bps[i], hw.intra_bps[i], hw.nic_bps[i]
    ring = 2 * (n - 1) / n if n > 1 else 0.0
    nodes = math.ceil(n / g)
    link = intra if nodes == 1 else min(intra, nic)
    if code == ARCH_CODE["1w1g"]:
        comm = 0.0
    elif code == ARCH_CODE["allreduce-local"]:
        comm = ring * (w + e) / intra
    elif code == ARCH_CODE["allreduce-cluster"]:
        comm = ring * (w + e) / link
    elif code == ARCH_CODE["ps-worker"]:
        k = min(g, m)
        comm = 2 * (w + e) / pcie + max(2 * (w + e) * k / nic, 2 * m * (w + e) / (p * nic))
    else:
        comm = ring * w / link + ring * e / link
    return (feats["input_bytes"][i] / pcie + feats["flops_compute_bound"][i] / hw.flops_per_s[i]
            + feats["bytes_memory_bound"][i] / hw.mem_bw_bps[i] + comm)


def main() -> int:
    feats, shape, hw = make_jobs(N)
    evaluate(feats, shape["arch"], shape["n"], shape["g"], shape["m"], shape["p"], hw)  # warm-up
    best = math.inf
    for _ in range(5):
        t0 = time.perf_counter()
        bd = evaluate(feats, shape["arch"], shape["n"], shape["g"], shape["m"], shape["p"], hw)
        best = min(best, time.perf_counter() - t0)
    vec_rate = N / best
    plain = {k: v[:LOOP_N].tolist() for k, v in feats.items()}
    pshape = {k: v[:LOOP_N].tolist() for k, v in shape.items()}
    phw = Hardware(*(getattr(hw, f)[:LOOP_N].tolist() for f in Hardware.__dataclass_fields__))
    t0 = time.perf_counter()
    loop = [loop_total(plain, pshape, phw, i) for i in range(LOOP_N)]
    loop_rate = LOOP_N / (time.perf_counter() - t0)
    np.testing.assert_allclose(bd.total[:LOOP_N], loop, rtol=1e-9)  # same answers
    t0 = time.perf_counter()
    calls = []
    for i in range(CALL_N):
        job_hw = Hardware(*(getattr(hw, f)[i] for f in Hardware.__dataclass_fields__))
        one = evaluate({k: v[i] for k, v in feats.items()}, shape["arch"][i], shape["n"][i],
                       shape["g"][i], shape["m"][i], shape["p"][i], job_hw)
        calls.append(float(one.total))
    call_rate = CALL_N / (time.perf_counter() - t0)
    np.testing.assert_allclose(bd.total[:CALL_N], calls, rtol=1e-12)
    ratio = vec_rate / call_rate
    print(f"vectorized model:          {N:,} jobs in {best * 1e3:.1f} ms = "
          f"{vec_rate / 1e6:.1f} M jobs/s")
    print(f"per-job loop (same model): {call_rate / 1e3:.1f} k jobs/s ({CALL_N:,} jobs)")
    print(f"plain-float formulas loop: {loop_rate / 1e6:.2f} M jobs/s ({LOOP_N:,} jobs), "
          f"vectorized is {vec_rate / loop_rate:.0f}x that")
    print(f"ratio vectorized / per-job loop = {ratio:.0f}x   "
          f"(targets: >= 10 M jobs/s, >= 100x)")
    return 0 if vec_rate >= 10e6 and ratio >= 100 else 1


if __name__ == "__main__":
    sys.exit(main())
