"""Benchmark: the measured-kernel model, leave-one-GPU-out on all 256,509 measured kernels.

For each GPU of ``../shared/data/neusight-kernels`` (or ``--kernels DIR``): fit on the others,
predict it (``traincast validate --kernels``). Prints median / p90 |error| per family and the
error of each GPU's summed time, next to the baseline measured in the same run: a naive
roofline, ``t = d + max(F / (P e), B / (M f))`` with one efficiency ``e`` for every GEMM and one
``f`` for every memory-bound op, fitted (medians) on the same training GPUs. Targets
(docs/model.md): median |error| <= 15% for GEMMs and memory-bound ops, <= 10% on the sum;
exit 1 when missed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "neusight-kernels"


def naive(data, catalog, kernel_fit) -> dict[str, dict[str, float]]:
    """The baseline, leave-one-chip-out: one fitted GEMM efficiency and one bandwidth fraction."""
    out = {}
    spec = kernel_fit.specs_of(data.gpu, catalog)
    peak = np.array([catalog.gpu(g).fp32_tflops * 1e12 for g in data.gpu])
    floors = kernel_fit.measured_floors_us(data)
    d = kernel_fit._floor_col(data, floors, kernel_fit.default_floor_us(floors))
    flops, moved = np.zeros(len(data)), np.zeros(len(data))
    for fam in sorted(set(data.family.tolist())):
        sel = data.family == fam
        shape = {k: v[sel] for k, v in data.shape.items()}
        if kernel_fit.FAMILIES[fam] in ("gemm", "conv"):
            m, n, k, b = kernel_fit.gemm_dims(fam, shape)
            flops[sel], moved[sel] = 2 * m * n * k * b, 4 * b * (m * k + k * n + m * n)
        else:
            moved[sel] = kernel_fit.kernel_bytes(fam, shape)
    work = flops > 0
    for members in kernel_fit.chip_groups(sorted(set(data.gpu.tolist())), catalog).values():
        train = ~np.isin(data.gpu, members)
        big = train & (data.latency_s > 5 * d)
        e = np.median(flops[big & work] / ((data.latency_s - d)[big & work] * peak[big & work]))
        f = np.median(moved[big & ~work] / ((data.latency_s - d)[big & ~work]
                                            * spec.mem_bps[big & ~work]))
        pred = d + np.maximum(flops / (peak * e), moved / (spec.mem_bps * f))
        held = ~train
        out.update(kernel_fit.errors_by_family(data.take(held), pred[held]))
    return out


def main(argv: list[str]) -> int:
    from traincast.calibration import kernel_fit
    from traincast.hardware.catalog import load_catalog

    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=Path, default=DEFAULT)
    ap.add_argument("--sample", type=int, default=0, help="rows per file (0 = all)")
    args = ap.parse_args(argv)
    if not args.kernels.is_dir():
        print(f"skipped: {args.kernels} not present")
        return 0
    cat = load_catalog()
    t0 = time.perf_counter()
    data = kernel_fit.read_kernels(args.kernels, cat, sample=args.sample)
    base = naive(data, cat, kernel_fit)
    t1 = time.perf_counter()
    loo = kernel_fit.leave_one_gpu_out(data, cat)["gpus"]
    t2 = time.perf_counter()
    print(f"{len(data):,} kernels; baseline {t1 - t0:.1f} s, leave-one-GPU-out {t2 - t1:.1f} s")
    print(f"{'GPU':16s} {'gemm':>13s} {'conv':>13s} {'memory':>13s} {'sum':>7s}   "
          "naive roofline: gemm / memory / sum")
    missed = []
    for g, row in loo.items():
        b = base.get(g, {})

        def cell(r: dict, k: str) -> str:
            return f"{100 * r[k + '_median']:5.1f} /{100 * r[k + '_p90']:4.0f}" \
                if k + "_median" in r else f"{'-':>11s}"

        print(f"{g:16s} {cell(row, 'gemm'):>13s} {cell(row, 'conv'):>13s} "
              f"{cell(row, 'memory'):>13s} {100 * row['sum']:+6.1f}%   "
              f"{100 * b.get('gemm_median', np.nan):5.1f} / "
              f"{100 * b.get('memory_median', np.nan):5.1f} / {100 * b.get('sum', np.nan):+6.1f}%")
        for k, target in (("gemm_median", 0.15), ("memory_median", 0.15)):
            if row.get(k, 0.0) > target:
                missed.append(f"{g} {k} {row[k]:.1%}")
        if abs(row["sum"]) > 0.10:
            missed.append(f"{g} sum {row['sum']:+.1%}")
    if missed:
        print("missed targets: " + "; ".join(missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
