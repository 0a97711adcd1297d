"""Microbenchmarks of one device (CPU or CUDA): timing, matmul, element-wise, copies, tiny ops.

Every figure is the median of repeated samples taken after warm-up; each sample times enough
calls to last at least ``min_sample_s`` (so timer resolution never matters), and the spread is
reported as ``(p90 - p10) / median`` of the samples. torch is imported by the caller.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Timing:
    """Seconds per call: the median of ``samples`` and their relative spread (p90 - p10) / p50."""

    median_s: float
    spread: float
    samples: int


def _sync(device: Any) -> None:
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        torch.cuda.synchronize(device)


def measure(fn: Callable[[], Any], device: Any = "cpu", *, repeat: int = 7, warmup: int = 2,
            min_sample_s: float = 0.02) -> Timing:
    """Median seconds per call of ``fn`` over ``repeat`` samples after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    _sync(device)
    # calls per sample so that one sample lasts at least min_sample_s
    t0 = time.perf_counter()
    fn()
    _sync(device)
    once = max(time.perf_counter() - t0, 1e-7)
    number = max(1, int(np.ceil(min_sample_s / once)))
    per_call = np.empty(repeat)
    for i in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        _sync(device)
        per_call[i] = (time.perf_counter() - t0) / number
    med = float(np.median(per_call))
    p10, p90 = np.percentile(per_call, [10, 90])
    return Timing(median_s=med, spread=float((p90 - p10) / med), samples=repeat)


def gemm_bytes(m: int, n: int, k: int, itemsize: int) -> int:
    """Bytes a GEMM ``(m x k) @ (k x n)`` reads and writes once: ``(mk + kn + mn) * itemsize``."""
    return (m * k + k * n + m * n) * itemsize


def matmul_shapes(quick: bool) -> list[tuple[int, int, int]]:
    """(m, n, k) shapes: squares of several sizes and skinny GEMMs with one small dimension.

    Training steps are full of skinny products: a batch of 32 rows times a weight matrix, and the
    weight-gradient product whose inner dimension K is the batch.
    """
    big = 512 if quick else 1024
    squares = [(s, s, s) for s in ((64, 256, big) if quick else (64, 128, 256, 512, big, 2048))]
    smalls = (8, 32, 128) if quick else (1, 4, 16, 32, 64, 128, 256)
    skinny = []
    for s in smalls:
        skinny += [(s, big, big), (big, big, s)]  # small M (batch rows) / small K (weight grad)
    return squares + skinny


def bench_matmul(device: Any, dtype: Any, shapes: list[tuple[int, int, int]], *,
                 repeat: int, min_sample_s: float) -> list[dict[str, Any]]:
    """FLOP/s of ``torch.mm`` for each (m, n, k): FLOPs = 2 m n k."""
    import torch

    out = []
    for m, n, k in shapes:
        a = torch.randn(m, k, device=device).to(dtype)
        b = torch.randn(k, n, device=device).to(dtype)
        c = torch.empty(m, n, device=device, dtype=dtype)
        t = measure(lambda a=a, b=b, c=c: torch.mm(a, b, out=c), device, repeat=repeat,
                    min_sample_s=min_sample_s)
        flops = 2.0 * m * n * k
        out.append({"m": m, "n": n, "k": k, "flops": flops,
                    "bytes": gemm_bytes(m, n, k, a.element_size()),
                    "time_s": t.median_s, "tflops": flops / t.median_s / 1e12,
                    "spread": t.spread})
    return out


def bench_conv(device: Any, *, quick: bool, repeat: int,
               min_sample_s: float) -> list[dict[str, Any]]:
    """FLOP/s of 2-D convolutions (batch 8, 3x3 and 1x1, several widths), FLOPs = 2 * MACs."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    cases = [(16, 16, 56, 3), (64, 64, 28, 3), (128, 128, 14, 3), (256, 256, 7, 3),
             (64, 256, 28, 1), (512, 128, 7, 1)]
    if quick:
        cases = cases[1::2]
    out = []
    for cin, cout, hw, r in cases:
        x = torch.randn(8, cin, hw, hw, device=device)
        w = torch.randn(cout, cin, r, r, device=device)
        t = measure(lambda x=x, w=w, r=r: F.conv2d(x, w, padding=r // 2), device, repeat=repeat,
                    min_sample_s=min_sample_s)
        flops = 2.0 * 8 * cout * hw * hw * cin * r * r
        nbytes = 4 * (x.numel() + w.numel() + 8 * cout * hw * hw)
        out.append({"shape": f"8x{cin}x{hw}x{hw} * {cout}x{cin}x{r}x{r}", "flops": flops,
                    "bytes": nbytes, "time_s": t.median_s, "tflops": flops / t.median_s / 1e12,
                    "spread": t.spread})
    return out


def bench_elementwise(device: Any, sizes_bytes: list[int], *, repeat: int,
                      min_sample_s: float) -> list[dict[str, Any]]:
    """Bandwidth of copy (2 x size bytes moved), add (3 x) and triad ``a = b + s*c`` (3 x).

    ``size`` is the bytes of one fp32 operand; bandwidth counts every byte read and written.
    """
    import torch

    out = []
    for size in sizes_bytes:
        n = max(size // 4, 1)
        a, b, c = (torch.rand(n, device=device) for _ in range(3))
        kernels = {
            "copy": (lambda a=a, b=b: a.copy_(b), 2),
            "add": (lambda a=a, b=b, c=c: torch.add(b, c, out=a), 3),
            "triad": (lambda a=a, b=b, c=c: torch.add(b, c, alpha=1.5, out=a), 3),
        }
        for name, (fn, operands) in kernels.items():
            t = measure(fn, device, repeat=repeat, min_sample_s=min_sample_s)
            moved = operands * 4 * n
            out.append({"kernel": name, "size_bytes": 4 * n, "bytes": moved,
                        "time_s": t.median_s, "gbs": moved / t.median_s / 1e9,
                        "spread": t.spread})
    return out


def bench_op_overhead(device: Any, *, repeat: int, min_sample_s: float) -> dict[str, Any]:
    """Fixed cost of one framework op: ``torch.add`` of two one-element tensors."""
    import torch

    a = torch.ones(1, device=device)
    b = torch.ones(1, device=device)
    t = measure(lambda: torch.add(a, b), device, repeat=repeat, min_sample_s=min_sample_s)
    return {"time_s": t.median_s, "spread": t.spread}


def bench_host_copy(device: Any, sizes_bytes: list[int], *, repeat: int,
                    min_sample_s: float) -> list[dict[str, Any]]:
    """Host-to-device copy bandwidth (pinned host memory on CUDA; a memcpy on the CPU)."""
    import torch

    out = []
    for size in sizes_bytes:
        n = max(size // 4, 1)
        if getattr(device, "type", str(device)) == "cuda":
            src = torch.rand(n).pin_memory()
            dst = torch.empty(n, device=device)

            def fn(src=src, dst=dst):
                return dst.copy_(src, non_blocking=True)
        else:
            src, dst = torch.rand(n), torch.empty(n)

            def fn(src=src, dst=dst):
                return dst.copy_(src)
        t = measure(fn, device, repeat=repeat, min_sample_s=min_sample_s)
        out.append({"size_bytes": 4 * n, "time_s": t.median_s,
                    "gbs": 4 * n / t.median_s / 1e9, "spread": t.spread})
    return out
