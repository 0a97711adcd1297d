"""Measure single-op latencies on your GPU in the format `traincast calibrate --kernels` fits.

    python scripts/measure_kernels.py OUT_DIR [--device cuda] [--rows 200] [--seed 0]

Writes ``OUT_DIR/<family>/<GPU>.csv`` for the families of the shipped fit (linear, bmm, conv,
softmax, ln, add, mul, relu, gelu, ...), with NeuSight's columns: ``OPName, Latency`` (ms),
``Device`` (torch.cuda.get_device_name), ``Kernel Name`` (empty: no profiler here) and the
family's shape columns. Timing as NeuSight's collector: fresh ``randn`` inputs, TF32 off,
``cudnn.benchmark = True``, one call timed with CUDA events (a launch's fixed cost is in it), the
mean of the fastest 5 of 25 calls. Then::

    traincast calibrate --kernels OUT_DIR -o mine.toml   # fit (your GPU needs a catalog entry)
    traincast validate --kernels OUT_DIR                  # leave-one-GPU-out, if several GPUs

On a machine without CUDA, ``--device cpu`` times with ``time.perf_counter`` (for testing the
format only: CPU latencies are not GPU kernels).
"""

from __future__ import annotations

import argparse
import csv
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SHAPES: dict[str, tuple[str, ...]] = {
    "linear": ("B", "M", "N", "K"), "bmm": ("B", "M", "N", "K"),
    "conv": ("B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride",
             "Padding")}
UNARY = {"relu": "relu", "gelu": "gelu", "tanh": "tanh"}
BINARY = {"add": "add", "mul": "mul", "div": "div"}


def random_shape(family: str, rng: random.Random, scale: float = 1.0) -> dict[str, int]:
    """A shape of ``family`` drawn log-uniformly over the ranges of the shipped data
    (``scale`` < 1 shrinks every size, for a quick run)."""
    def size(lo: int, hi: int) -> int:
        return max(lo, int(round(lo * (hi / lo) ** rng.random() * scale)))

    if family == "linear":
        return {"B": 1, "M": size(3, 8192), "N": size(1, 16384), "K": size(2, 16384)}
    if family == "bmm":
        return {"B": size(1, 1025), "M": size(7, 1025), "N": size(1, 1025), "K": size(2, 1025)}
    if family == "conv":
        return {"B": size(1, 64), "Input_Channel": size(3, 1024), "Output_Channel": size(3, 1024),
                "Kernel_Szie": 3, "Input_Size": size(5, 128), "Stride": 1, "Padding": 1}
    return {"B": size(1, 16384), "H": size(1, 4096)}


def make_op(family: str, shape: dict[str, int], device: str) -> Callable[[], Any]:
    """The op of one row, with fresh inputs on ``device``."""
    import torch

    if family == "linear":
        layer = torch.nn.Linear(shape["N"], shape["K"], bias=True, device=device)
        x = torch.randn(shape["B"], shape["M"], shape["N"], device=device)
        return lambda: layer(x)
    if family == "bmm":
        a = torch.randn(shape["B"], shape["M"], shape["N"], device=device)
        b = torch.randn(shape["B"], shape["N"], shape["K"], device=device)
        return lambda: torch.bmm(a, b)
    if family == "conv":
        conv = torch.nn.Conv2d(shape["Input_Channel"], shape["Output_Channel"],
                               shape["Kernel_Szie"], stride=shape["Stride"],
                               padding=shape["Padding"], device=device)
        x = torch.randn(shape["B"], shape["Input_Channel"], shape["Input_Size"],
                        shape["Input_Size"], device=device)
        return lambda: conv(x)
    x = torch.randn(shape["B"], shape["H"], device=device)
    if family == "softmax":
        return lambda: torch.softmax(x, dim=-1)
    if family == "ln":
        norm = torch.nn.LayerNorm(shape["H"], device=device)
        return lambda: norm(x)
    if family in BINARY:
        y = torch.randn(shape["B"], shape["H"], device=device)
        fn = getattr(torch, BINARY[family])
        return lambda: fn(x, y)
    fn = getattr(torch.nn.functional, UNARY[family], None) or getattr(torch, UNARY[family])
    return lambda: fn(x)


def time_ms(op: Callable[[], Any], device: str, calls: int = 25, fastest: int = 5) -> float:
    """Mean of the fastest ``fastest`` of ``calls`` single calls, in ms (CUDA events on a GPU,
    ``perf_counter`` on the CPU)."""
    import torch

    samples = []
    for _ in range(calls):
        if device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            op()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            op()
            samples.append((time.perf_counter() - t0) * 1e3)
    samples.sort()
    return sum(samples[:fastest]) / fastest


def measure(out_dir: Path, device: str, rows: int, seed: int, families: list[str],
            scale: float = 1.0) -> list[Path]:
    """Measure ``rows`` shapes per family; returns the files written."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"
    rng = random.Random(seed)
    written = []
    for family in families:
        cols = SHAPES.get(family, ("B", "H"))
        path = out_dir / family / f"{name.replace(' ', '_')}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["OPName", "Latency", "Device", "Kernel Name", *cols])
            for _ in range(rows):
                shape = random_shape(family, rng, scale)
                with torch.no_grad():
                    ms = time_ms(make_op(family, shape, device), device)
                w.writerow([family, f"{ms:.9g}", name, "", *[shape[c] for c in cols]])
        written.append(path)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rows", type=int, default=200, help="shapes per family")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1.0, help="shrink sizes (quick run)")
    ap.add_argument("--families", default="linear,bmm,conv,softmax,ln,add,mul,div,relu,gelu,tanh")
    args = ap.parse_args()
    for p in measure(args.out_dir, args.device, args.rows, args.seed,
                     args.families.split(","), args.scale):
        print(f"wrote {p}")


if __name__ == "__main__":
    main()
