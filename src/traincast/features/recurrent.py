"""Per-op expansion of a recurrent layer: one fused GRU row -> the ops each time step runs.

The profiler records one GRU direction as one fused op (``gru`` forward, ``gru_backward``
backward, ``traincast.zoo.speech``) with the FLOPs of the whole sequence; the implementation runs
it as T sequential steps. ``gru_rows`` replaces such a row by the ops it runs (ATen's GRU cell,
torch.nn.GRU's math; the backward recomputes the direction under autograd, then runs autograd's
backward of it), each with a ``count`` (times it runs). It is registered with the op in
``traincast.features.ops`` (``expand=``), so a time model prices every op the same way:
``traincast.features.ops.expand_ops``. Torch is not needed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# bytes per element of the dtypes a per-op table names
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1,
            "float8_e5m2": 1, "int64": 8, "int32": 4, "int8": 1, "uint8": 1, "bool": 1}

# Element-wise rows of one step: (kernel, input arrays read, output arrays written,
# elements: "h" = B*H, "g" = B*G per step)
_GRU_CELL = (("add_", 2, 1, "h"), ("sigmoid_", 1, 1, "h"), ("add_", 2, 1, "h"),
             ("sigmoid_", 1, 1, "h"), ("mul_", 2, 1, "h"), ("add", 2, 1, "h"),
             ("tanh_", 1, 1, "h"), ("sub", 2, 1, "h"), ("mul_", 2, 1, "h"), ("add_", 2, 1, "h"))
_GRU_CELL_BACKWARD = (("sigmoid_backward", 2, 1, "h"), ("sigmoid_backward", 2, 1, "h"),
                      ("tanh_backward", 2, 1, "h"), ("mul", 2, 1, "h"), ("mul", 2, 1, "h"),
                      ("mul", 2, 1, "h"), ("mul", 2, 1, "h"), ("neg", 1, 1, "h"),
                      ("add", 2, 1, "h"), ("add", 2, 1, "h"), ("add", 2, 1, "h"),
                      ("add_", 2, 1, "h"), ("add_", 2, 1, "h"), ("cat", 1, 1, "g"),
                      ("cat", 1, 1, "g"))


def _row(op: str, flops: float, read: float, written: float, count: int, dtype: str,
         phase: str, shapes: str = "") -> dict[str, Any]:
    return {"op": op, "phase": phase, "flops": float(flops), "bytes_read": float(read),
            "bytes_written": float(written), "dtype": dtype, "count": count,
            "bound": "compute" if flops else "memory", "shapes": shapes}


def _mm(m: int, k: int, n: int) -> str:
    """Input shapes of ``mm`` on ``A[m x k] @ B[k x n]`` (read by traincast.kernels)."""
    return f"{m}x{k};{k}x{n}"


def parse_shapes(shapes: str) -> list[list[int]]:
    """The input shapes of a per-op row, ``"64x512;512x1024"`` -> ``[[64, 512], [512, 1024]]``
    (``;`` between inputs, ``x`` between dimensions; an empty input, a scalar, is ``[]``).
    Raises ValueError on a dimension that is not a whole number."""
    return [[int(d) for d in sh.split("x")] if sh else [] for sh in shapes.split(";")]


def gru_rows(op: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ops one GRU-direction row runs, with counts; a row without its shapes: ``[op]``.

    From the row's ``shapes`` (x: B x T x I, w_ih: G x I, w_hh: G x H, G = 3H; the backward's
    first input is the gradient of the outputs) and itemsize s, the forward is:
    1 input GEMM (BT x I x G), T recurrent GEMMs (B x H x G, bias added), T x the cell's 10
    element-wise ops on B*H elements, 1 stack of the outputs (B*T*H). The backward is that
    forward again (recomputation) plus: 2 GEMMs of the input projection (dX: BT x G x I,
    dW_ih: G x BT x I), the sum for its bias and the stack of its per-step gradients (B*T*G);
    per step 2 GEMMs (dh: B x G x H, dW_hh: G x B x H), the accumulation of dW_hh (G*H) and of
    the bias gradient (a sum of B*G, an add of G) and the cell's 15 element-wise backward ops.
    Rows with a FLOP count are compute-bound (GEMMs), the others memory-bound.
    """
    name = str(op["op"]).split("::")[-1]
    shapes = parse_shapes(str(op.get("shapes", "")))
    if name not in ("gru", "gru_backward") or len(shapes) < 4:
        return [dict(op)]
    first = 1 if name == "gru_backward" else 0
    (b, t, i), (g, h) = shapes[first], shapes[first + 2]
    dtype = str(op.get("dtype", "float32"))
    s = ITEMSIZE.get(dtype, 4)
    phase = str(op.get("phase", "forward"))
    elems = {"h": b * h, "g": b * g}

    def cell(kinds: tuple[tuple[str, int, int, str], ...]) -> list[dict[str, Any]]:
        return [_row(k, 0, r * elems[e] * s, w * elems[e] * s, t, dtype, phase)
                for k, r, w, e in kinds]

    rows = [_row("mm", 2 * b * t * i * g, s * (b * t * i + g * i), s * b * t * g, 1, dtype,
                 phase, _mm(b * t, i, g)),
            _row("addmm", 2 * b * h * g, s * (b * h + g * h + g), s * b * g, t, dtype, phase,
                 f"{g};{_mm(b, h, g)}"),
            *cell(_GRU_CELL),
            _row("stack", 0, s * b * t * h, s * b * t * h, 1, dtype, phase)]
    if name == "gru":
        return rows
    return rows + [
        _row("mm", 2 * b * t * g * i, s * (b * t * g + g * i), s * b * t * i, 1, dtype, phase,
             _mm(b * t, g, i)),
        _row("mm", 2 * g * b * t * i, s * (b * t * g + b * t * i), s * g * i, 1, dtype, phase,
             _mm(g, b * t, i)),
        _row("sum", 0, s * b * t * g, s * g, 1, dtype, phase),
        _row("stack", 0, s * b * t * g, s * b * t * g, 1, dtype, phase),
        _row("mm", 2 * b * g * h, s * (b * g + g * h), s * b * h, t, dtype, phase, _mm(b, g, h)),
        _row("mm", 2 * g * b * h, s * (b * g + b * h), s * g * h, t, dtype, phase, _mm(g, b, h)),
        _row("add_", 0, 2 * s * g * h, s * g * h, t, dtype, phase),
        _row("sum", 0, s * b * g, s * g, t, dtype, phase),
        _row("add_", 0, 2 * s * g, s * g, t, dtype, phase),
        *cell(_GRU_CELL_BACKWARD)]
