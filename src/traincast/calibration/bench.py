"""Microbenchmarks of one device (CPU or CUDA): timing, matmul, element-wise, copies, tiny ops.

Every figure is the median of repeated samples taken after warm-up; each sample times enough
calls to last at least ``min_sample_s`` (so timer resolution never matters), and the spread is
reported as ``(p90 - p10) / median`` of the samples.

Clock: on the CPU with one torch thread, the CPU time of the calling thread
(``time.thread_time``; all work is on that thread) — the time the work takes on its core, not
counting the time the OS gives other programs on a shared machine; on the CPU with several
torch threads, wall time and the fastest sample instead of the median (the work is spread over
the threads, so no one thread's CPU time measures it, and a team of threads stalls whenever
one of them loses its core to another program: these figures are far noisier on a shared
machine); on CUDA, wall time after ``torch.cuda.synchronize``. Where waiting matters
(communication, whole training steps), ``dedicated_clock``: wall time minus the time the
calling thread sat ready on the run queue while other programs held the cores (Linux
``/proc/thread-self/schedstat``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike


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


def _schedstat_wait_s(path: str) -> float:
    """Run-queue wait (seconds) of one thread's ``schedstat``; 0 where unknown."""
    try:
        with open(path) as fh:
            return int(fh.read().split()[1]) * 1e-9
    except (OSError, IndexError, ValueError):
        return 0.0


def runqueue_wait_s() -> float:
    """Seconds the calling thread has waited, ready to run, for a core (0 where unknown)."""
    return _schedstat_wait_s("/proc/thread-self/schedstat")


def process_runqueue_wait_s() -> float:
    """Seconds all threads of this process have waited, ready to run, for a core (the sum over
    ``/proc/self/task/*/schedstat``; 0 where unknown)."""
    import os

    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0.0
    return sum(_schedstat_wait_s(f"/proc/self/task/{task}/schedstat") for task in tasks)


def contention(wait_start_s: float, elapsed_s: float, threads: int) -> float:
    """The share of the time other programs held the cores our threads were ready to run on
    since ``wait_start_s = process_runqueue_wait_s()``: wait / (threads x elapsed)."""
    return (process_runqueue_wait_s() - wait_start_s) / (threads * elapsed_s)


def net_time_s(time_s: ArrayLike, overhead_s: ArrayLike) -> Any:
    """An op's own time: ``max(t - o, t / 2)`` (the fixed cost ``o`` never counts for more than
    half of what was measured)."""
    t = np.asarray(time_s, dtype=np.float64)
    return np.maximum(t - overhead_s, 0.5 * t)


def dedicated_clock() -> float:
    """Wall time minus run-queue wait: what a dedicated machine's wall clock would show."""
    return time.perf_counter() - runqueue_wait_s()


def step_clock_for(device: Any) -> Callable[[], float]:
    """The clock of whole steps and communication: ``dedicated_clock`` on the CPU, wall time
    on CUDA."""
    return time.perf_counter if getattr(device, "type", str(device)).startswith("cuda") \
        else dedicated_clock


def team_of_threads(device: Any) -> bool:
    """True on the CPU when torch runs several intra-op threads (read when called)."""
    if getattr(device, "type", str(device)).startswith("cuda"):
        return False
    import torch

    return torch.get_num_threads() > 1


def clock_for(device: Any) -> Callable[[], float]:
    """The clock of measurements on ``device``: on the CPU thread CPU time with one torch
    thread, wall time with several (``team_of_threads``); wall time on CUDA."""
    if getattr(device, "type", str(device)).startswith("cuda") or team_of_threads(device):
        return time.perf_counter
    return time.thread_time


def measure(fn: Callable[[], Any], device: Any = "cpu", *, repeat: int = 7, warmup: int = 2,
            min_sample_s: float = 0.02) -> Timing:
    """Median seconds per call of ``fn`` over ``repeat`` samples after ``warmup`` calls; with
    several CPU threads (``team_of_threads``) the *fastest* sample's, by wall time: other
    programs' time slices only ever add time, and a team of threads stalls whenever one of
    its threads loses its core, so the fastest sample is the best estimate of a dedicated
    machine (``median_s`` then holds that minimum)."""
    clock = clock_for(device)
    fastest = team_of_threads(device)
    for _ in range(warmup):
        fn()
    _sync(device)
    # calls per sample so that one sample lasts at least min_sample_s
    t0 = clock()
    fn()
    _sync(device)
    once = max(clock() - t0, 1e-7)
    number = max(1, int(np.ceil(min_sample_s / once)))
    per_call = np.empty(repeat)
    for i in range(repeat):
        t0 = clock()
        for _ in range(number):
            fn()
        _sync(device)
        per_call[i] = (clock() - t0) / number
    med = float(np.min(per_call) if fastest else np.median(per_call))
    p10, p90 = np.percentile(per_call, [10, 90])
    return Timing(median_s=med, spread=float((p90 - p10) / med), samples=repeat)


def gemm_bytes(m: int, n: int, k: int, itemsize: int) -> int:
    """Bytes a GEMM ``(m x k) @ (k x n)`` reads and writes once: ``(mk + kn + mn) * itemsize``."""
    return (m * k + k * n + m * n) * itemsize


def matmul_shapes(quick: bool) -> list[tuple[int, int, int, str]]:
    """(m, n, k, layout) shapes: squares of several sizes and skinny GEMMs with one small
    dimension in the three layouts of a linear layer's training step.

    A linear layer with a batch of ``s`` rows runs ``x @ W^T`` (m = s, layout ``nt``), the input
    gradient ``dY @ W`` (m = s, ``nn``) and the weight gradient ``dY^T @ X`` (k = s, ``tn``):
    skinny products, each with its own operand layout.
    """
    big = 512 if quick else 1024
    squares = [(s, s, s, "nn") for s in ((64, 256, big) if quick else
                                         (64, 128, 256, 512, big, 2048))]
    smalls = (2, 8, 32, 128) if quick else (1, 4, 16, 32, 64, 128, 256)
    skinny = []
    for s in smalls:
        skinny += [(s, big, big, "nt"), (s, big, big, "nn"), (big, big, s, "tn")]
    # wide layers (4x wider output, as feed-forward and output projections): up-projection
    # forward, down-projection input gradient, up-projection weight gradient
    for s in ((32,) if quick else (16, 64, 256)):
        skinny += [(s, 4 * big, big, "nt"), (s, big, 4 * big, "nn"), (4 * big, big, s, "tn")]
    return squares + skinny


def bench_matmul(device: Any, dtype: Any, shapes: list[tuple], *, repeat: int,
                 min_sample_s: float) -> list[dict[str, Any]]:
    """FLOP/s of ``torch.mm`` for each (m, n, k[, layout]): FLOPs = 2 m n k; layout ``t`` = that
    operand is a transposed view (``nt``: A @ B^T)."""
    import torch

    out = []
    for shape in shapes:
        m, n, k = shape[:3]
        layout = shape[3] if len(shape) > 3 else "nn"
        a = (torch.randn(k, m, device=device).t() if layout[0] == "t" else
             torch.randn(m, k, device=device)).to(dtype)
        b = (torch.randn(n, k, device=device).t() if layout[1] == "t" else
             torch.randn(k, n, device=device)).to(dtype)
        t = measure(lambda a=a, b=b: torch.mm(a, b), device, repeat=repeat,
                    min_sample_s=min_sample_s)
        flops = 2.0 * m * n * k
        out.append({"m": m, "n": n, "k": k, "layout": layout, "flops": flops,
                    "bytes": gemm_bytes(m, n, k, a.element_size()),
                    "time_s": t.median_s, "tflops": flops / t.median_s / 1e12,
                    "spread": t.spread})
    return out


CONV_CASES = (  # (channels in, channels out, spatial size, kernel, stride, groups), batch 4
    (64, 64, 56, 1, 1, 1), (64, 64, 56, 3, 1, 1), (64, 256, 56, 1, 1, 1),
    (128, 128, 28, 3, 1, 1), (256, 64, 56, 1, 1, 1), (256, 256, 14, 3, 1, 1),
    (1024, 256, 14, 1, 1, 1), (512, 512, 7, 3, 1, 1), (3, 64, 112, 7, 2, 1),
    (32, 32, 112, 3, 1, 32), (96, 96, 56, 3, 2, 96), (144, 144, 56, 3, 1, 144),
    (384, 384, 14, 3, 1, 384), (960, 960, 7, 3, 1, 960), (96, 24, 56, 1, 1, 1),
    (2048, 512, 7, 1, 1, 1), (256, 256, 4, 3, 1, 1),
    # small feature maps (small images, deep stages): 4x4 and 2x2
    (1024, 256, 4, 1, 1, 1), (512, 2048, 2, 1, 1, 1), (512, 512, 2, 3, 1, 1),
)


def bench_conv(device: Any, *, quick: bool, repeat: int, min_sample_s: float,
               cases: tuple[tuple[int, ...], ...] | None = None) -> list[dict[str, Any]]:
    """FLOP/s of 2-D convolutions, forward and backward (input and weight gradients), batch 4:
    dense 1x1, 3x3 and 7x7 and depthwise (groups = channels) shapes of CNNs, on feature maps
    from 112x112 down to 2x2.

    Forward FLOPs = 2 * batch * out_h * out_w * cout * cin / groups * k * k; backward = twice
    that. Bytes = every tensor read or written once (input, weight, output; backward: grad
    output, input, weight read, grad input and grad weight written).
    """
    import torch
    import torch.nn.functional as F  # noqa: N812

    aten = torch.ops.aten
    batch = 4
    out = []
    if cases is None:
        cases = CONV_CASES[::3] if quick else CONV_CASES
    for cin, cout, hw, k, stride, groups in cases:
        x = torch.randn(batch, cin, hw, hw, device=device)
        w = torch.randn(cout, cin // groups, k, k, device=device)
        pad = k // 2
        y = F.conv2d(x, w, stride=stride, padding=pad, groups=groups)
        gy = torch.randn_like(y)
        flops = 2.0 * batch * y.shape[2] * y.shape[3] * cout * (cin // groups) * k * k
        xb, wb, yb = 4 * x.numel(), 4 * w.numel(), 4 * y.numel()
        shape = f"{batch}x{cin}x{hw}x{hw} * {cout}x{cin // groups}x{k}x{k}/s{stride}/g{groups}"
        fwd = measure(lambda x=x, w=w, s=stride, p=pad, g=groups:
                      F.conv2d(x, w, stride=s, padding=p, groups=g),
                      device, repeat=repeat, min_sample_s=min_sample_s)
        bwd = measure(lambda gy=gy, x=x, w=w, s=stride, p=pad, g=groups:
                      aten.convolution_backward(gy, x, w, None, [s, s], [p, p], [1, 1], False,
                                                [0, 0], g, [True, True, False]),
                      device, repeat=repeat, min_sample_s=min_sample_s)
        for phase, t, f, nbytes in (("forward", fwd, flops, xb + wb + yb),
                                    ("backward", bwd, 2 * flops, yb + xb + wb + xb + wb)):
            out.append({"shape": shape, "phase": phase, "flops": f, "bytes": nbytes,
                        "time_s": t.median_s, "tflops": f / t.median_s / 1e12,
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


def tiny_ops(device: Any) -> dict[str, Callable[[], Any]]:
    """The least-work op of each kind the kernel fit gives a dispatch ratio
    (``kernel_fit.DISPATCH_FOLDERS``: the folders of the NeuSight data; ``scripts/
    measure_kernels.py`` calls ``add``, ``mul``, ``div``, ``relu``, ``gelu``, ``tanh``,
    softmax, LayerNorm, linear and bmm the same way): two 1 x 1 tensors (``add``, ``mul``,
    ``div``, ``pow``), one and a scalar (``addu``, ``mulu``, ``divu``, ``powu``: ``x + 2``,
    ``x * 2``, ``x / 2``, ``x ** 2``), one (``torch.nn.functional`` ``relu``, ``gelu``,
    ``tanh``; ``torch.softmax`` over the last dimension; an ``nn.LayerNorm(1)``), an
    ``nn.Linear(1, 1)`` with bias on a 1 x 1 x 1 input, a ``torch.bmm`` of two 1 x 1 x 1
    tensors."""
    import torch

    fn = torch.nn.functional
    x, y = torch.ones(1, 1, device=device), torch.ones(1, 1, device=device)
    a = torch.ones(1, 1, 1, device=device)
    layer, norm = torch.nn.Linear(1, 1, device=device), torch.nn.LayerNorm(1, device=device)
    return {"add": lambda: torch.add(x, y), "mul": lambda: torch.mul(x, y),
            "div": lambda: torch.div(x, y), "pow": lambda: torch.pow(x, y),
            "addu": lambda: torch.add(x, 2.0), "mulu": lambda: torch.mul(x, 2.0),
            "divu": lambda: torch.div(x, 2.0), "powu": lambda: torch.pow(x, 2.0),
            "relu": lambda: fn.relu(x), "gelu": lambda: fn.gelu(x), "tanh": lambda: fn.tanh(x),
            "softmax": lambda: torch.softmax(x, dim=-1), "ln": lambda: norm(x),
            "linear": lambda: layer(a), "bmm": lambda: torch.bmm(a, a)}


def bench_op_alone(device: Any, calls: int = 200) -> dict[str, Any]:
    """Each op of ``tiny_ops`` timed alone on a CUDA device, as the kernel model's measured rows
    were: CUDA events around the call, the device waited for after each. ``kinds_s``: per kind
    the median of ``calls`` (the host's dispatch of that kind as a lone op pays it; over the
    add's, the kind's dispatch ratio ``r_x``); ``time_s``: the add's (the fit's floor ``d``);
    ``calls``: how many were timed per kind. ``samples_ms`` of ``scripts/measure_kernels.py``
    times each measured row by the same protocol (the script runs without traincast
    installed)."""
    import torch

    kinds = {}
    with torch.no_grad():
        for kind, op in tiny_ops(device).items():
            for _ in range(10):
                op()
            torch.cuda.synchronize(device)
            samples = []
            for _ in range(calls):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                op()
                end.record()
                torch.cuda.synchronize(device)
                samples.append(start.elapsed_time(end) * 1e-3)
            kinds[kind] = float(np.median(samples))
    return {"time_s": kinds["add"], "calls": calls, "kinds_s": kinds}


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


def kernel_cases(device: Any, n: int) -> dict[str, Callable[[], Any]]:
    """Element-wise, normalization and softmax kernels of training steps, by aten op name, each
    on ``n`` fp32 elements (rows of 1024 where the op works on rows)."""
    import torch

    aten = torch.ops.aten
    x = torch.rand(n, device=device) + 0.5
    g = torch.rand(n, device=device)
    y = torch.empty(n, device=device)
    rows = x.view(-1, 1024)
    w = torch.ones(1024, device=device)
    b = torch.zeros(1024, device=device)
    img = x.view(8, 128, -1)  # batch norm over 128 channels
    cw = torch.ones(128, device=device)
    cb = torch.zeros(128, device=device)
    mean, rstd = aten.native_layer_norm(rows, [1024], w, b, 1e-5)[1:]
    sm = aten._softmax(rows, -1, False)
    bn_out, bn_mean, bn_invstd = aten.native_batch_norm(img, cw, cb, None, None, True, 0.1,
                                                        1e-5)
    cases: dict[str, Callable[[], Any]] = {
        name: (lambda f=getattr(torch, name): f(x, out=y))
        for name in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "reciprocal")}
    cases |= {
        "gelu": lambda: aten.gelu(x),
        "silu": lambda: aten.silu(x),
        "pow": lambda: aten.pow(x, 2),
        "div": lambda: torch.div(x, g, out=y),
        "mul": lambda: torch.mul(x, g, out=y),
        "gelu_backward": lambda: aten.gelu_backward(g, x),
        "silu_backward": lambda: aten.silu_backward(g, x),
        "tanh_backward": lambda: aten.tanh_backward(g, x),
        "sigmoid_backward": lambda: aten.sigmoid_backward(g, x),
        "threshold_backward": lambda: aten.threshold_backward(g, x, 0.0),
        "_softmax": lambda: aten._softmax(rows, -1, False),
        "_log_softmax": lambda: aten._log_softmax(rows, -1, False),
        "_softmax_backward_data": lambda: aten._softmax_backward_data(
            g.view(-1, 1024), sm, -1, torch.float32),
        "native_layer_norm": lambda: aten.native_layer_norm(rows, [1024], w, b, 1e-5),
        "native_layer_norm_backward": lambda: aten.native_layer_norm_backward(
            g.view(-1, 1024), rows, [1024], mean, rstd, w, b, [True, True, True]),
        "native_batch_norm": lambda: aten.native_batch_norm(img, cw, cb, None, None, True, 0.1,
                                                            1e-5),
        "native_batch_norm_backward": lambda: aten.native_batch_norm_backward(
            g.view(8, 128, -1), img, cw, None, None, bn_mean, bn_invstd, True, 1e-5,
            [True, True, True]),
        "sum": lambda: aten.sum(rows, [0]),
        "mean": lambda: aten.mean(rows, [-1]),
    }
    del bn_out
    return cases


def bench_kernels(device: Any, n: int, *, repeat: int, min_sample_s: float,
                  overhead_s: float) -> list[dict[str, Any]]:
    """Elements per second of each kernel of ``kernel_cases``, net of the plain per-call cost."""
    out = []
    for name, fn in kernel_cases(device, n).items():
        t = measure(fn, device, repeat=repeat, min_sample_s=min_sample_s)
        net = float(net_time_s(t.median_s, overhead_s))
        out.append({"op": name, "elements": n, "time_s": t.median_s,
                    "gelems": n / net / 1e9, "spread": t.spread})
    return out


def bench_fresh(device: Any, sizes_bytes: list[int], *, repeat: int,
                min_sample_s: float) -> list[dict[str, Any]]:
    """Cost of writing a freshly allocated output, per size: ``neg(x)`` (new output) minus
    ``neg(x, out=y)`` (existing output). On the CPU large fresh blocks come from the OS and
    every page faults in (zeroed) on first write; GB/s = bytes / extra time (1e4 when the
    extra time is not measurable)."""
    import torch

    out = []
    for size in sizes_bytes:
        n = max(size // 4, 1)
        x = torch.rand(n, device=device)
        y = torch.empty(n, device=device)
        fresh = measure(lambda x=x: torch.neg(x), device, repeat=repeat,
                        min_sample_s=min_sample_s)
        reuse = measure(lambda x=x, y=y: torch.neg(x, out=y), device, repeat=repeat,
                        min_sample_s=min_sample_s)
        extra = fresh.median_s - reuse.median_s
        gbs = 4 * n / extra / 1e9 if extra > 0 else 1e4
        out.append({"size_bytes": 4 * n, "fresh_s": fresh.median_s, "reuse_s": reuse.median_s,
                    "gbs": min(gbs, 1e4), "spread": max(fresh.spread, reuse.spread)})
    return out


def bench_foreach(device: Any, *, repeat: int, min_sample_s: float,
                  tensors: int = 64) -> dict[str, Any]:
    """Fixed cost per tensor inside a multi-tensor (``_foreach_``) op: an in-place add over
    ``tensors`` one-element tensors, divided by their number (on the CPU each tensor is one
    kernel call; on CUDA they share fused launches)."""
    import torch

    xs = [torch.ones(1, device=device) for _ in range(tensors)]
    t = measure(lambda: torch._foreach_add_(xs, 1.0), device, repeat=repeat,
                min_sample_s=min_sample_s)
    return {"per_tensor_s": t.median_s / tensors, "spread": t.spread, "tensors": tensors}


def bench_sparse_update(device: Any, *, table_rows: int, dim: int, lookups: int, repeat: int,
                        min_sample_s: float) -> dict[str, Any]:
    """A sparse embedding table's backward and SparseAdam update, as elements per second.

    ``nn.Embedding(table_rows, dim, sparse=True)``, ``lookups`` random rows: time of forward +
    backward + ``SparseAdam.step`` minus the forward alone. Elements are counted as the
    profiler's ``sparse_embedding_update`` row counts them (traincast.features.profile: reads
    ``lookups + 4 rows`` and writes ``4 rows`` rows of ``dim``), ``E = max(written, read / 2)``.
    """
    import torch
    from torch import nn

    gen = torch.Generator().manual_seed(0)
    emb = nn.Embedding(table_rows, dim, sparse=True).to(device)
    opt = torch.optim.SparseAdam(emb.parameters(), lr=1e-4)
    idx = torch.randint(0, table_rows, (lookups,), generator=gen).to(device)
    rows = int(idx.unique().numel())

    def full() -> None:
        emb(idx).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step = measure(full, device, repeat=repeat, min_sample_s=min_sample_s)
    fwd = measure(lambda: emb(idx).sum(), device, repeat=repeat, min_sample_s=min_sample_s)
    net = float(net_time_s(step.median_s, fwd.median_s))
    elements = max(4 * rows * dim, (lookups + 4 * rows) * dim / 2)
    return {"table_rows": table_rows, "dim": dim, "lookups": lookups, "rows": rows,
            "time_s": net, "gelems": elements / net / 1e9,
            "spread": max(step.spread, fwd.spread)}
