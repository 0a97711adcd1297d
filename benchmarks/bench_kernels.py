"""Benchmark: the measured-kernel model, leave-one-GPU-out on all 256,509 measured kernels.

For each GPU of ``../shared/data/neusight-kernels`` (or ``--kernels DIR``): fit on the others,
predict it (``traincast validate --kernels``); then each GPU of ``--held-out DIR`` (default
``data/h200/kernels``: an H200 measured with ``scripts/measure_kernels.py``) from the fit on all
of them. The held-out GPU is priced with its own host's floor and dispatch ratios, as
``traincast calibrate`` measures them on a CUDA host (``fitted``), and again with the others'
median floor and fitted ratios (``uncalib.``: a catalog without that calibration). Prints
median / signed error per family and the
error of each GPU's summed time, next to the baselines measured in the same run: a naive
roofline, ``t = d + max(F / (P e), B / (M f))`` with one efficiency ``e`` for every GEMM and one
``f`` for every memory-bound op, fitted (medians) on the same training GPUs, and the kernel
strategy without the fit (datasheet peaks, published or default fractions). Targets
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
HELD_OUT = Path(__file__).resolve().parents[1] / "data" / "h200" / "kernels"


def _floors(data, kernel_fit) -> np.ndarray:
    """Each row's host floor ``d`` (its GPU's ``floor_us``, the others' median where it has
    none), as the leave-one-GPU-out gives the held-out GPU, without the fitted dispatch ratios
    the model multiplies it by."""
    floors = kernel_fit.measured_floors_us(data)
    return kernel_fit.per_gpu(data.gpu, floors, kernel_fit.default_floor_us(floors)) * 1e-6


def _work(data, kernel_fit) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs and DRAM bytes of every row (2 m n k b and 4 b (m k + k n + m n) for a product,
    ``kernel_bytes`` otherwise)."""
    flops, moved = np.zeros(len(data)), kernel_fit.memory_bytes(data)
    for fam in sorted(set(data.family.tolist())):
        if kernel_fit.FAMILIES[fam] in ("gemm", "conv"):
            sel = data.family == fam
            m, n, k, b = kernel_fit.gemm_dims(fam, {c: v[sel] for c, v in data.shape.items()})
            flops[sel], moved[sel] = 2 * m * n * k * b, 4 * b * (m * k + k * n + m * n)
    return flops, moved


def naive(data, catalog, kernel_fit, only=None) -> dict[str, dict[str, float]]:
    """Baseline 1, leave-one-chip-out: ``d + max(F / (P e), B / (M f))`` with one GEMM
    efficiency ``e`` and one bandwidth fraction ``f``, medians over the training GPUs' rows at
    least 5x their floor; with ``only``, the folds of those GPUs alone."""
    out = {}
    spec = kernel_fit.specs_of(data.gpu, catalog)
    peak = kernel_fit.per_gpu(data.gpu, {g: catalog.gpu(g).fp32_tflops * 1e12
                                         for g in set(data.gpu.tolist())})
    d = _floors(data, kernel_fit)
    flops, moved = _work(data, kernel_fit)
    work = flops > 0
    for members in kernel_fit.chip_groups(sorted(set(data.gpu.tolist())), catalog).values():
        if only is not None and not set(members) & set(only):
            continue
        train = ~np.isin(data.gpu, members)
        big = train & (data.latency_s > 5 * d)
        e = np.median(flops[big & work] / ((data.latency_s - d)[big & work] * peak[big & work]))
        f = np.median(moved[big & ~work] / ((data.latency_s - d)[big & ~work]
                                            * spec.mem_bps[big & ~work]))
        pred = d + np.maximum(flops / (peak * e), moved / (spec.mem_bps * f))
        out.update(kernel_fit.errors_by_family(data.take(~train), pred[~train]))
    return out


OP_NAMES = {"linear": "addmm", "bmm": "bmm", "conv": "convolution", "softmax": "_softmax",
            "ln": "native_layer_norm"}


def datasheet(data, catalog, kernel_fit) -> dict[str, dict[str, float]]:
    """Baseline 2, the kernel strategy before the fit: each row as a per-op table row priced by
    ``compute.kernel_op_times`` on its GPU's entry without the fitted parameters (datasheet
    peaks x published or default fractions, tile/wave quantization), TF32 off as measured,
    plus the row's floor."""
    from dataclasses import replace

    from traincast.compute import kernel_op_times

    flops, moved = _work(data, kernel_fit)
    pred = np.zeros(len(data))
    d = _floors(data, kernel_fit)
    for g in sorted(set(data.gpu.tolist())):
        gpu = replace(catalog.gpu(g), kernel={}, tf32_tflops=0.0, kernel_launch_us=0.0)
        idx = np.flatnonzero(data.gpu == g)
        rows = []
        for i in idx:
            fam = data.family[i]
            sh = {c: int(v[i]) if np.isfinite(v[i]) else 0 for c, v in data.shape.items()}
            if fam == "linear":
                shapes = f"{sh['K']};{sh['B'] * sh['M']}x{sh['N']};{sh['N']}x{sh['K']}"
            elif fam == "bmm":
                shapes = f"{sh['B']}x{sh['M']}x{sh['N']};{sh['B']}x{sh['N']}x{sh['K']}"
            elif fam == "conv":
                shapes = (f"{sh['B']}x{sh['Input_Channel']}x{sh['Input_Size']}x{sh['Input_Size']};"
                          f"{sh['Output_Channel']}x{sh['Input_Channel']}x{sh['Kernel_Szie']}x"
                          f"{sh['Kernel_Szie']}")
            else:
                shapes = f"{sh['B']}x{sh['H']}"
            rows.append({"op": OP_NAMES.get(fam, fam), "flops": flops[i], "bytes_read": moved[i],
                         "bytes_written": 0.0, "dtype": "float32", "shapes": shapes})
        pred[idx] = d[idx] + kernel_op_times(rows, gpu, "fp32")["busy_s"]
    return kernel_fit.errors_by_family(data, pred)


SIZE_BINS_MIB = (32, 128, 512, 2048)
"""Edges of the size bins of :func:`linear_by_size`, MiB."""


def linear_by_size(held: dict) -> None:
    """The held-out ``linear`` rows over 1 ms (leave-one-GPU-out, ``held``: chip -> (rows,
    predicted)), by the bytes of ``x``, ``W`` and the output together (4 (B M N + K N + B M K),
    fp32): median error per size bin and GPU; then, per GPU, the least-squares slopes of
    ``log(predicted / measured)`` on ``log2`` of those bytes and of the predicted duration
    (docs/model.md, "Known limits": how the miss follows size more than duration)."""
    bins = (0, *SIZE_BINS_MIB, np.inf)
    names = [f"< {bins[1]}"] + [f"{a}-{b}" for a, b in zip(bins[1:-2], bins[2:-1],
                                                               strict=True)] + [f"> {bins[-2]}"]
    cells: dict[str, list[str]] = {}
    slopes = {}
    for test, pred in held.values():
        for g in sorted(set(test.gpu.tolist())):
            sel = (test.gpu == g) & (test.family == "linear") & (test.latency_s > 1e-3)
            if not sel.any():
                continue
            b, m, n, k = (test.shape[c][sel] for c in ("B", "M", "N", "K"))
            mib = 4 * (b * m * n + k * n + b * m * k) / 2**20
            err = pred[sel] / test.latency_s[sel] - 1
            which = np.digitize(mib, bins[1:-1])
            cells[g] = [f"{100 * np.median(err[which == i]):+.0f}%" if (which == i).any()
                        else "-" for i in range(len(names))]
            x = np.column_stack([np.ones(sel.sum()), np.log2(mib), np.log2(pred[sel])])
            coef, *_ = np.linalg.lstsq(x, np.log(pred[sel] / test.latency_s[sel]), rcond=None)
            slopes[g] = coef[1:]
    if not cells:
        return
    print("linear rows over 1 ms, held out: median error by MiB of x, W and the output")
    print(f"{'MiB':>12s} " + " ".join(f"{g[:14]:>14s}" for g in cells))
    for i, name in enumerate(names):
        print(f"{name:>12s} " + " ".join(f"{cells[g][i]:>14s}" for g in cells))
    print("log error per doubling of the bytes / of the predicted duration: "
          + "; ".join(f"{g} {a:+.3f} / {d:+.3f}" for g, (a, d) in slopes.items()))


def main(argv: list[str]) -> int:
    from traincast.calibration import kernel_fit
    from traincast.hardware.catalog import load_catalog

    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=Path, default=DEFAULT)
    ap.add_argument("--held-out", type=Path, default=HELD_OUT,
                    help="GPUs predicted from the fit on all of --kernels (never fitted)")
    ap.add_argument("--sample", type=int, default=0, help="rows per file (0 = all)")
    args = ap.parse_args(argv)
    if not args.kernels.is_dir():
        print(f"skipped: {args.kernels} not present")
        return 0
    cat = load_catalog()
    t0 = time.perf_counter()
    data = kernel_fit.read_kernels(args.kernels, cat, sample=args.sample)
    runs = {"naive": naive(data, cat, kernel_fit), "datasheet": datasheet(data, cat, kernel_fit)}
    t1 = time.perf_counter()
    loo = kernel_fit.leave_one_gpu_out(data, cat)
    runs["fitted"], runs["uncalib."] = loo["gpus"], loo["default_floor"]
    t2 = time.perf_counter()
    print(f"{len(data):,} kernels; baselines {t1 - t0:.1f} s, leave-one-GPU-out {t2 - t1:.1f} s")
    linear_by_size(loo["held"])
    if args.held_out.is_dir():  # GPUs no fit has seen, priced from the fit on all of --kernels
        held = kernel_fit.read_kernels(args.held_out, cat, sample=args.sample)
        new = sorted(set(held.gpu.tolist()))
        if set(new) & set(data.gpu.tolist()):
            print(f"--held-out {args.held_out}: its GPUs are in --kernels too")
            return 2
        # the held-out GPU's fold alone: fitted on data
        runs["naive"].update(naive(data + held, cat, kernel_fit, only=new))
        runs["datasheet"].update(datasheet(held, cat, kernel_fit))
        own, default = kernel_fit.held_out_errors(kernel_fit.fit(data, cat), held, cat)
        runs["fitted"].update(own)
        runs["uncalib."].update(default)
        print(f"held out, never fitted: {', '.join(new)} ({len(held):,} kernels of "
              f"{args.held_out}), {time.perf_counter() - t2:.1f} s")
    print("median |error| (%) / median signed error (%: < 0 = predicted too fast); "
          "sum = error of the GPU's summed time")
    print(f"{'GPU':16s} {'model':10s} {'gemm':>13s} {'conv':>13s} {'memory':>13s} {'sum':>8s}")

    def cell(r: dict, k: str) -> str:
        return f"{100 * r[k + '_median']:5.1f} /{100 * r[k + '_bias']:+6.1f}" \
            if k + "_median" in r else f"{'-':>13s}"

    missed = []
    for g in runs["fitted"]:
        for name in ("naive", "datasheet", "fitted", "uncalib."):
            r = runs[name][g]
            print(f"{g:16s} {name:10s} {cell(r, 'gemm'):>13s} {cell(r, 'conv'):>13s} "
                  f"{cell(r, 'memory'):>13s} {100 * r['sum']:+7.1f}%")
        row = runs["fitted"][g]
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
