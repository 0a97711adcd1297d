"""Measure single-op latencies on your GPU in the format `traincast calibrate --kernels` fits.

    python scripts/measure_kernels.py OUT_DIR [--device cuda] [--rows 200] [--seed 0]
        [--budget-s SECONDS] [--dtype fp32|bf16|fp16]

Writes ``OUT_DIR/<family>/<GPU>.csv`` for the families of the shipped fit (linear, bmm, conv,
softmax, ln, add, mul, relu, gelu, ...), with NeuSight's columns: ``OPName, Latency`` (ms),
``Device`` (torch.cuda.get_device_name), ``Kernel Name`` (empty: no profiler here) and the
family's shape columns (drawn at random, or read from ``--shapes FILE``: a CSV with the family's
shape columns, one row per shape, for measuring the products of one model). Timing as
NeuSight's collector: fresh ``randn`` inputs, TF32 off, ``cudnn.benchmark = True``, one call
timed with CUDA events (a launch's fixed cost is in it), the mean of the fastest 5 of 25 calls.
Then::

    traincast calibrate --kernels OUT_DIR -o mine.toml   # fit (your GPU needs a catalog entry)
    traincast validate --kernels OUT_DIR                  # leave-one-GPU-out, if several GPUs

``--budget-s`` starts no new shape of a family after that many seconds of it (the rows
measured so far are kept; the shape under way finishes).
``--dtype bf16`` (or fp16) measures the same ops in that dtype, on tensor cores, with a ``Dtype``
column (the fit reads FP32 rows). ``--dtype fp8`` (``linear`` only) measures cuBLASLt's FP8
GEMM as Transformer Engine runs a linear layer: ``torch._scaled_mm`` of an e4m3 input
``(B M) x N`` and an e4m3 weight ``K x N`` (transposed, column-major, as cuBLASLt's FP8 GEMMs
require) with per-tensor scales, a bf16 bias and a bf16 output; every size is rounded up to a
multiple of 16 (the FP8 GEMM's alignment). The family ``sdpa`` (not in the default list) times
``torch.nn.functional.scaled_dot_product_attention`` in the dtype (bf16 if fp32 is asked, with
its ``Dtype`` column saying so), forward
and forward + backward (``Pass``), with the backend torch picks and each one forced
(``Backend``: default, flash, cudnn, efficient; a backend that refuses a shape is skipped):
columns ``B, H, KV_H`` (key/value heads: grouped-query attention when below ``H``), ``S, D,
Causal``.

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
             "Padding"),
    "sdpa": ("B", "H", "KV_H", "S", "D", "Causal", "Backend", "Pass")}
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn"}
FP8_ALIGN = 16
"""cuBLASLt's FP8 GEMMs take sizes that are multiples of 16 (``torch._scaled_mm`` checks it)."""
SDPA_BACKENDS = ("default", "flash", "cudnn", "efficient")
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
    if family == "sdpa":  # about 16k tokens per call (scaled), as a training micro-batch
        s = max(8, int(2 ** rng.randint(8, 14) * scale))
        h = rng.choice((8, 16, 32))
        return {"B": max(1, int(16384 * scale) // s), "H": h, "KV_H": rng.choice((h, h // 4, 1)),
                "S": s, "D": rng.choice((64, 128)), "Causal": rng.choice((0, 1))}
    if family == "conv":
        return {"B": size(1, 64), "Input_Channel": size(3, 1024), "Output_Channel": size(3, 1024),
                "Kernel_Szie": 3, "Input_Size": size(5, 128), "Stride": 1, "Padding": 1}
    return {"B": size(1, 16384), "H": size(1, 4096)}


def make_sdpa(shape: dict[str, Any], device: str, dtype: Any) -> Callable[[], Any]:
    """Scaled-dot-product attention of one row: forward (``Pass`` fwd) or forward + the
    gradients of Q, K and V (``Pass`` fwdbwd), under the row's ``Backend``."""
    import contextlib

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, h, kv, s, d = (shape[k] for k in ("B", "H", "KV_H", "S", "D"))
    q = torch.randn(b, h, s, d, device=device, dtype=dtype, requires_grad=True)
    k = torch.randn(b, kv, s, d, device=device, dtype=dtype, requires_grad=True)
    v = torch.randn(b, kv, s, d, device=device, dtype=dtype, requires_grad=True)
    g = torch.randn(b, h, s, d, device=device, dtype=dtype)
    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION}.get(shape["Backend"])
    gqa = {"enable_gqa": True} if kv != h else {}

    def run() -> Any:
        ctx = sdpa_kernel(backend) if backend is not None else contextlib.nullcontext()
        with ctx:
            out = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=bool(shape["Causal"]), **gqa)
            if shape["Pass"] == "fwdbwd":
                torch.autograd.grad(out, (q, k, v), g)
        return out

    run()  # a backend that refuses the shape raises here, before the row is timed
    return run


def make_fp8_linear(shape: dict[str, Any], device: str) -> Callable[[], Any]:
    """One FP8 linear layer as Transformer Engine runs it: ``torch._scaled_mm`` (cuBLASLt) of
    an e4m3 input ``(B M) x N`` by an e4m3 weight ``K x N`` transposed, per-tensor scales, a
    bf16 bias, a bf16 output (sizes already multiples of ``FP8_ALIGN``)."""
    import torch

    fp8 = torch.float8_e4m3fn
    x = torch.randn(shape["B"] * shape["M"], shape["N"], device=device).to(fp8)
    w = torch.randn(shape["K"], shape["N"], device=device).to(fp8)
    bias = torch.randn(shape["K"], device=device, dtype=torch.bfloat16)
    one = torch.ones((), device=device)
    return lambda: torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, bias=bias,
                                    out_dtype=torch.bfloat16)


def aligned(shape: dict[str, Any], multiple: int) -> dict[str, Any]:
    """``shape`` with every size rounded up to a multiple of ``multiple`` (``B`` kept)."""
    return {k: (v if k == "B" else -(-int(v) // multiple) * multiple) for k, v in shape.items()}


def read_shapes(path: Path, family: str) -> list[dict[str, Any]]:
    """The rows of a ``--shapes`` CSV: each the family's shape columns as integers (an error
    names the file, line and column)."""
    # an attention shape is measured under every backend and pass (``_row_shapes``)
    cols = tuple(c for c in SHAPES.get(family, ("B", "H")) if c not in ("Backend", "Pass"))
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in cols if c not in (reader.fieldnames or [])]
        if missing:
            raise SystemExit(f"measure_kernels.py: {path}: no column {', '.join(missing)} "
                             f"(the {family} family needs {', '.join(cols)})")
        rows = []
        for line, row in enumerate(reader, start=2):
            shape: dict[str, Any] = {}
            for c in cols:
                try:
                    shape[c] = int(row[c])
                except (TypeError, ValueError):
                    raise SystemExit(f"measure_kernels.py: {path}: line {line}: field {c!r} = "
                                     f"{row[c]!r} is not an integer") from None
                if shape[c] < 0 or (shape[c] == 0 and c not in ("Causal", "Padding")):
                    raise SystemExit(f"measure_kernels.py: {path}: line {line}: field {c!r} = "
                                     f"{shape[c]} must be positive")
            rows.append(shape)
    return rows


def make_op(family: str, shape: dict[str, Any], device: str,
            dtype_name: str = "fp32") -> Callable[[], Any]:
    """The op of one row, with fresh inputs on ``device`` in ``dtype_name``."""
    import torch

    dt = getattr(torch, DTYPES[dtype_name])  # the caller's run_dtype
    if family == "sdpa":
        return make_sdpa(shape, device, dt)
    if dtype_name == "fp8":
        if family != "linear":
            raise SystemExit(f"measure_kernels.py: --dtype fp8 measures the linear family only, "
                             f"not {family}")
        return make_fp8_linear(shape, device)
    kw = {"device": device, "dtype": dt}
    if family == "linear":
        layer = torch.nn.Linear(shape["N"], shape["K"], bias=True, **kw)
        x = torch.randn(shape["B"], shape["M"], shape["N"], **kw)
        return lambda: layer(x)
    if family == "bmm":
        a = torch.randn(shape["B"], shape["M"], shape["N"], **kw)
        b = torch.randn(shape["B"], shape["N"], shape["K"], **kw)
        return lambda: torch.bmm(a, b)
    if family == "conv":
        conv = torch.nn.Conv2d(shape["Input_Channel"], shape["Output_Channel"],
                               shape["Kernel_Szie"], stride=shape["Stride"],
                               padding=shape["Padding"], **kw)
        x = torch.randn(shape["B"], shape["Input_Channel"], shape["Input_Size"],
                        shape["Input_Size"], **kw)
        return lambda: conv(x)
    x = torch.randn(shape["B"], shape["H"], **kw)
    if family == "softmax":
        return lambda: torch.softmax(x, dim=-1)
    if family == "ln":
        norm = torch.nn.LayerNorm(shape["H"], **kw)
        return lambda: norm(x)
    if family in BINARY:
        y = torch.randn(shape["B"], shape["H"], **kw)
        fn = getattr(torch, BINARY[family])
        return lambda: fn(x, y)
    fn = getattr(torch.nn.functional, UNARY[family], None) or getattr(torch, UNARY[family])
    return lambda: fn(x)


def samples_ms(op: Callable[[], Any], device: str, calls: int, warmup: int = 0) -> list[float]:
    """``calls`` single calls of ``op`` after ``warmup`` untimed ones, each in ms, sorted (CUDA
    events around the call on a GPU, ``perf_counter`` on the CPU)."""
    import torch

    cuda = device.startswith("cuda")
    for _ in range(warmup):
        op()
    if cuda:
        torch.cuda.synchronize()
    samples = []
    for _ in range(calls):
        if cuda:
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
    return sorted(samples)


def mean_fastest(samples: list[float], fastest: int) -> float:
    """Mean of the ``fastest`` smallest of sorted ``samples`` (``samples_ms``)."""
    return sum(samples[:fastest]) / fastest


def time_ms(op: Callable[[], Any], device: str, calls: int = 25, fastest: int = 5) -> float:
    """Mean of the fastest ``fastest`` of ``calls`` single calls, in ms (``samples_ms``)."""
    return mean_fastest(samples_ms(op, device, calls), fastest)


def device_name(device: str) -> str:
    """The CSV's ``Device``: the CUDA device's name, else ``cpu``."""
    import torch

    return torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"


def check_device(device: str, script: str) -> None:
    """Exit with one line when ``device`` is CUDA and torch sees no CUDA GPU."""
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"{script}: torch {torch.__version__} sees no CUDA GPU; run it on a "
                         "CUDA machine, or --device cpu to try the format on the CPU")


def exact_fp32() -> None:
    """True FP32 matrix products and convolutions (TF32 off), as the shipped data was measured."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def run_dtype(family: str, dtype: str) -> str:
    """The dtype a family's rows run in: ``sdpa`` has no fp32 fused kernel, so bf16 then."""
    return "bf16" if family == "sdpa" and dtype == "fp32" else dtype


def _row_shapes(family: str, shape: dict[str, Any], dtype: str) -> list[dict[str, Any]]:
    """The rows of one shape: one (fp8: its sizes aligned), or for ``sdpa`` one per backend
    and pass."""
    if dtype == "fp8":
        return [aligned(shape, FP8_ALIGN)]
    if family != "sdpa":
        return [shape]
    return [{**shape, "Backend": b, "Pass": p} for b in SDPA_BACKENDS for p in ("fwd", "fwdbwd")]


def measure(out_dir: Path, device: str, rows: int, seed: int, families: list[str],
            scale: float = 1.0, budget_s: float | None = None,
            dtype: str = "fp32", shapes: Path | None = None) -> list[Path]:
    """Measure ``rows`` shapes per family, drawn at random or the first ``rows`` of the
    ``shapes`` CSV (fewer when ``budget_s`` seconds of a family have passed); returns the files
    written."""
    import torch

    exact_fp32()
    torch.backends.cudnn.benchmark = True
    name = device_name(device)
    rng = random.Random(seed)
    written = []
    for family in families:
        cols = SHAPES.get(family, ("B", "H"))
        ran = run_dtype(family, dtype)
        extra = [] if ran == "fp32" else ["Dtype"]
        path = out_dir / family / f"{name.replace(' ', '_')}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        given = read_shapes(shapes, family)[:rows] if shapes is not None else None
        start = time.perf_counter()
        with path.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["OPName", "Latency", "Device", "Kernel Name", *cols, *extra])
            for i in range(rows if given is None else len(given)):
                if budget_s is not None and time.perf_counter() - start > budget_s:
                    break
                drawn = given[i] if given is not None else random_shape(family, rng, scale)
                for shape in _row_shapes(family, drawn, ran):
                    try:
                        with torch.no_grad() if family != "sdpa" else torch.enable_grad():
                            ms = time_ms(make_op(family, shape, device, ran), device)
                    except RuntimeError:  # out of memory too
                        if family != "sdpa":
                            raise
                        continue  # this backend does not run this shape
                    w.writerow([family, f"{ms:.9g}", name, "", *[shape[c] for c in cols],
                                *([ran] if extra else [])])
                fh.flush()
        written.append(path)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rows", type=int, default=200, help="shapes per family")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1.0, help="shrink sizes (quick run)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="start no new shape of a family after this many seconds of it")
    ap.add_argument("--dtype", default="fp32", choices=tuple(DTYPES))
    ap.add_argument("--families", default="linear,bmm,conv,softmax,ln,add,mul,div,relu,gelu,tanh")
    ap.add_argument("--shapes", type=Path, default=None,
                    help="CSV of the shapes to measure (the family's shape columns), not random")
    args = ap.parse_args()
    check_device(args.device, "measure_kernels.py")
    for p in measure(args.out_dir, args.device, args.rows, args.seed,
                     args.families.split(","), args.scale, args.budget_s, args.dtype,
                     args.shapes):
        print(f"wrote {p}")


if __name__ == "__main__":
    main()
