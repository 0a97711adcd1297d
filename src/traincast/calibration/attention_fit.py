"""Fit the shape of a fused attention kernel's rate to measured single-kernel rows.

Input: ``scripts/measure_kernels.py --families sdpa`` rows (columns ``B, H, S, D, Causal,
Backend, Pass, Latency``; latency in milliseconds), one backend (``flash``: FlashAttention-2,
``cudnn``: cuDNN's fused attention, ``efficient``: the memory-efficient kernel) and pass
(``fwdbwd``: forward + backward) at a time.
Output: the shape parameters ``parallel/flash_attention.toml`` ships under ``[shape]``, and
the kernel's fraction at the reference shapes (its ``[[rate]]``).

A fused attention's achieved rate grows with the sequence and the head size (docs/
parallelism.md, "Fused attention's rate by shape"; ``traincast.parallel.hybrid.shape_curve``)::

    R(s, d, causal) = R_inf · d / (d + d_0) · s / (s + s_eff)
    s_eff = s_0 (full), T + 2 s_0 (causal)

``s_0`` (tokens): the fixed work of one block of queries (loading it, writing its output and
its gradient, the softmax's final rescale) as keys' worth of products; a row of ``s`` keys
costs ``s + s_0``. Causal: the blocks on the diagonal (``T`` tokens square) run whole although
half of them is masked, ``s^2 / 2 (1 + T / s)`` executed for ``s^2 / 2`` counted, and the
fixed work is paid on half the keys' work. ``d_0``: the exponentials and rescales per score
(independent of ``d``) as products' worth of head dimension. Counted FLOPs per row: ``4 B H S^2
D`` times ``causal_fraction`` (1/2) when causal, times ``1 + backward_factor`` (3.5) forward +
backward, as ``parallel/flash_attention.toml`` counts them; the rate is over ``peak_flops``.

The fit: least squares on ``ln(R_model / R_measured)`` over every row of the backend and pass;
for given ``(s_0, d_0)`` the best ``ln R_inf`` is the mean log ratio, so the search runs over
``(s_0, d_0)`` alone (a grid, then a finer one around its best point). numpy only.

``python -m traincast.calibration.attention_fit ROWS.csv.gz --peak-tflops 989.4`` prints the
fit of each backend.
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from traincast.parallel.hybrid import flash_rates, median_shape, reference_shapes, shape_curve

F = NDArray[np.float64]


def read_rows(path: str | Path, backend: str, passes: str = "fwdbwd") -> dict[str, F]:
    """The rows of one backend and pass of a ``measure_kernels.py --families sdpa`` file
    (``.csv`` or ``.csv.gz``) as float arrays ``B, H, S, D, Causal, Latency``. A missing column
    or a value that is not a positive number (``Causal``: 0 or 1) is a ValueError naming the
    file, the row (1 = the first after the header) and the field."""
    keys = ("B", "H", "S", "D", "Causal", "Latency")
    opener = gzip.open if str(path).endswith(".gz") else open
    out: dict[str, list[float]] = {k: [] for k in keys}
    with opener(path, "rt", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [k for k in (*keys, "Backend", "Pass") if k not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: no column {missing[0]!r} (an sdpa file of "
                             "scripts/measure_kernels.py has B, H, S, D, Causal, Backend, Pass, "
                             "Latency)")
        for i, r in enumerate(reader, start=1):
            if r["Backend"] != backend or r["Pass"] != passes:
                continue
            for k in keys:
                try:
                    v = float(r[k])
                except (TypeError, ValueError):
                    v = math.nan
                if not (v in (0.0, 1.0) if k == "Causal" else math.isfinite(v) and v > 0):
                    raise ValueError(f"{path}, row {i}: field {k!r}: {r[k]!r} is not a "
                                     f"{'0 or 1' if k == 'Causal' else 'positive number'}")
                out[k].append(v)
    return {k: np.array(v, dtype=np.float64) for k, v in out.items()}


def measured_fraction(rows: Mapping[str, F], peak_flops: float, causal_fraction: float,
                      backward_factor: float) -> F:
    """Per row, counted FLOPs over time over the peak: ``4 B H S^2 D (c if causal) (1 +
    backward_factor) / (t P)``."""
    flops = (4.0 * rows["B"] * rows["H"] * rows["S"] ** 2 * rows["D"]
             * np.where(rows["Causal"] > 0, causal_fraction, 1.0) * (1.0 + backward_factor))
    return flops / (rows["Latency"] * 1e-3) / peak_flops


def _best(rows: Mapping[str, F], log_frac: F, s0s: F, d0s: F,
          block_tokens: float) -> tuple[float, float, float]:
    best = (np.inf, 0.0, 0.0)
    for s0 in s0s:
        logs = np.log(shape_curve(rows["S"][None, :], rows["D"][None, :],
                                  rows["Causal"][None, :], float(s0), d0s[:, None],
                                  block_tokens))
        resid = log_frac[None, :] - logs
        sse = ((resid - resid.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
        i = int(np.argmin(sse))
        if sse[i] < best[0]:
            best = (float(sse[i]), float(s0), float(d0s[i]))
    return best


def fit_shape(rows: Mapping[str, F], peak_flops: float) -> dict[str, float]:
    """``{"seq_overhead_tokens": s_0, "head_dim_overhead": d_0, "rate_fraction_inf": R_inf /
    P, "fraction": R_inf g_ref / P`` (the rate at the shipped reference shapes, what a
    ``[[rate]]`` fraction is), ``"median_abs_error", "median_abs_error_constant"}`` (the
    last two: the curve's and one
    constant fraction's (the median) median |error| over the same rows). FLOPs are counted and
    ``T`` taken as the shipped ``flash_attention.toml`` has them."""
    rates = flash_rates()
    block_tokens = rates.block_tokens
    frac = measured_fraction(rows, peak_flops, rates.causal_fraction, rates.backward_factor)
    if len(frac) < 8:
        raise ValueError(f"{len(frac)} rows: too few to fit the shape (at least 8)")
    log_frac = np.log(frac)
    _, s0, d0 = _best(rows, log_frac, np.arange(0.0, 3001.0, 20.0),
                      np.arange(0.0, 401.0, 2.0), block_tokens)
    _, s0, d0 = _best(rows, log_frac, np.arange(max(s0 - 20.0, 0.0), s0 + 20.5, 1.0),
                      np.arange(max(d0 - 2.0, 0.0), d0 + 2.05, 0.1), block_tokens)
    g = shape_curve(rows["S"], rows["D"], rows["Causal"], s0, d0, block_tokens)
    r_inf = float(np.exp(np.mean(log_frac - np.log(g))))
    g_ref = median_shape(reference_shapes(), s0, d0, block_tokens)
    const = float(np.median(frac))
    return {"seq_overhead_tokens": s0, "head_dim_overhead": round(d0, 1),
            "rate_fraction_inf": r_inf, "fraction": r_inf * g_ref,
            "median_abs_error": float(np.median(np.abs(r_inf * g / frac - 1.0))),
            "median_abs_error_constant": float(np.median(np.abs(const / frac - 1.0)))}


def main(argv: Sequence[str] | None = None) -> None:
    """``attention_fit ROWS --peak-tflops P [--backends flash,cudnn,efficient]``: print each
    fit."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m traincast.calibration.attention_fit",
                                     description="Fit a fused attention's rate by shape to "
                                     "measure_kernels.py --families sdpa rows.")
    parser.add_argument("rows", type=Path, help="the sdpa rows, .csv or .csv.gz")
    parser.add_argument("--peak-tflops", type=float, required=True,
                        help="the GPU's dense 16-bit peak, TFLOP/s")
    parser.add_argument("--backends", default="flash,cudnn,efficient",
                        help="comma-separated Backend values to fit (default "
                             "flash,cudnn,efficient)")
    args = parser.parse_args(argv)
    if not args.peak_tflops > 0:
        parser.error(f"--peak-tflops must be a positive number, got {args.peak_tflops}")
    for backend in args.backends.split(","):
        try:
            rows = read_rows(args.rows, backend)
            if not len(rows["S"]):
                raise ValueError(f"{args.rows}: no forward + backward rows of backend "
                                 f"{backend!r}")
            fit = fit_shape(rows, args.peak_tflops * 1e12)
        except (ValueError, OSError) as exc:
            parser.error(str(exc))
        print(backend, {k: round(v, 4) for k, v in fit.items()})


if __name__ == "__main__":
    main()
