"""Recurrent layers as the ops they run: ATen's per-step cells (CPU) or cuDNN's fused RNN (GPU).

The profiler records one GRU direction as one fused op (``gru`` forward, ``gru_backward``
backward, ``traincast.zoo.speech``) with the FLOPs of the whole sequence; the implementation runs
it as T sequential steps. ``gru_rows`` replaces such a row by the ops it runs (ATen's GRU cell,
torch.nn.GRU's math; the backward recomputes the direction under autograd, then runs autograd's
backward of it), each with a ``count`` (times it runs). It is registered with the op in
``traincast.features.ops`` (``expand=``), so a time model prices every op the same way:
``traincast.features.ops.expand_ops``.

On a GPU, PyTorch runs an ``nn.LSTM``/``GRU``/``RNN`` call as one cuDNN call for all its layers
and directions (``_cudnn_rnn`` forward, ``_cudnn_rnn_backward`` backward), not as per-step
cells. The
profiler tags the ATen ops of each such call with its ``call_spec`` (``traincast.features.
capture.RecurrentCalls``; the ``gru`` rows carry their shapes), and ``as_cudnn`` replaces them
by the kernels cuDNN runs (``cudnn_rows``): the algorithm of Appleyard, Kocisky and Blunsom
(2016), "Optimizing Performance of Recurrent Neural Networks on GPUs" (arXiv:1604.01946), the
one cuDNN 5 and later implement: the four (LSTM), three (GRU) or one (RNN) gate products of a
step as one GEMM, the step's element-wise work as one fused kernel, the input projection of all
time steps as one GEMM per layer, and the weight gradients as GEMMs over all time steps. Torch is
not needed here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

# bytes per element of the dtypes a per-op table names
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1,
            "float8_e5m2": 1, "int64": 8, "int32": 4, "int8": 1, "uint8": 1, "bool": 1}

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
"""Gate products per hidden unit of each recurrent mode (the ``torch._VF`` function names)."""
CALL_KEYS = ("call", "seq", "batch", "input", "hidden", "layers", "directions", "bias",
             "dropout")
"""The fields of a recurrent call's spec, after its mode (``call_spec``)."""

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
    call = _gru_call(op) if name in ("gru", "gru_backward") else None
    if call is None:
        return [dict(op)]
    b, t, i, h = call["batch"], call["seq"], call["input"], call["hidden"]
    g = GATES["gru"] * h
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


def call_spec(mode: str, **dims: int) -> str:
    """The tag of one recurrent call: ``"lstm call=0 seq=35 batch=20 input=650 hidden=650
    layers=2 directions=1 bias=1 dropout=1"`` (``CALL_KEYS``; ``call`` numbers the calls of a
    step, ``dropout`` = 1 when dropout runs between layers)."""
    return " ".join([mode, *(f"{k}={int(dims[k])}" for k in CALL_KEYS)])


def parse_call(spec: str) -> dict[str, Any]:
    """``call_spec``'s fields back: ``{"mode": ..., "seq": 35, ...}``. Raises ValueError naming
    what is wrong (an unknown mode, a missing or non-integer field)."""
    mode, *parts = str(spec).split()
    if mode not in GATES:
        raise ValueError(f"recurrent call {spec!r}: unknown mode {mode!r} (one of "
                         f"{', '.join(GATES)})")
    fields = dict(p.partition("=")[::2] for p in parts)
    missing = [k for k in CALL_KEYS if not fields.get(k, "").isdigit()]
    if missing:
        raise ValueError(f"recurrent call {spec!r}: {', '.join(missing)} must be whole numbers")
    return {"mode": mode, **{k: int(fields[k]) for k in CALL_KEYS}}


def extrapolated_call(spec_1: str, spec_2: str, extrapolate: Callable[[float, float], int]
                      ) -> str:
    """The call spec at the full batch of a profile extrapolated from two batches: each
    field by ``extrapolate(value at the first, value at the second)`` (the batch grows, the
    rest stay); the second spec when the first is not the same call."""
    two = parse_call(spec_2)
    try:
        one = parse_call(spec_1)
    except ValueError:
        return spec_2
    if one["mode"] != two["mode"]:
        return spec_2
    return call_spec(two["mode"], **{k: extrapolate(one[k], two[k]) for k in CALL_KEYS})


def _library(row: dict[str, Any]) -> dict[str, Any]:
    """A kernel the library launches from its own loop: no eager dispatch of its own."""
    return row | {"launch": "library"}


def library_launched(ops: Sequence[Mapping[str, Any]]) -> NDArray[np.bool_]:
    """Per row: whether a library launches it from its own loop (``launch = "library"``, the
    kernels of ``cudnn_rows`` after the first), so the host pays a launch, not a dispatch."""
    return np.array([o.get("launch") == "library" for o in ops], dtype=bool)


def cudnn_rows(call: Mapping[str, Any], phase: str, dtype: str) -> list[dict[str, Any]]:
    """The kernels of one cuDNN RNN call (``parse_call``'s fields), forward or backward.

    With s = bytes per element, G = gates x hidden (``GATES``), D directions, N = B T and
    I_l = the layer's input width (I, then D H), per layer l:

    * forward: the input projection of all steps, one GEMM ``N x I_l x D G``; per direction
      and step (count T): the recurrent GEMM ``B x H x G`` and one fused element-wise kernel
      reading both products' gates and the biases (and c, LSTM) and writing h (and c) and the
      gates kept for backward (s (2 B G + 2 G [biases] + B H [LSTM]) read,
      s (B H + B H [LSTM] + B G) written); between layers, dropout over the ``N x D H``
      activations;
    * backward (layers in reverse): per direction and step the fused element-wise backward
      (reads the output and state gradients, the kept gates and c; writes the gates' and c's
      gradients) and the GEMM ``B x G x H`` of the previous state's gradient; then the input
      gradient, one GEMM ``N x D G x I_l``, and dropout's backward; then the weight
      gradients over all steps: ``D G x N x I_l`` (W_ih), D x ``G x N x H`` (W_hh) and the
      bias gradient, a sum over N of the D G gate gradients.

    FLOPs: forward 2 N D G (I_l + H) per layer, backward twice that, the counts of
    ``torch.utils.flop_counter`` for the same products. The first kernel of the call is the
    op the host issues (``_cudnn_rnn``, ``_cudnn_rnn_backward``; a per-step first kernel is
    split into its first run and the other T - 1); every other row is marked
    ``launch = "library"``: cuDNN launches it from its own loop, with no eager dispatch. Layers
    run one after another (cuDNN may overlap a layer's step with the next layer's, Appleyard
    et al. Sec. 3.3: not modelled, an upper bound)."""
    mode, b, t, h = call["mode"], call["batch"], call["seq"], call["hidden"]
    d, n, layers = call["directions"], call["batch"] * call["seq"], call["layers"]
    g, s = GATES[mode] * h, ITEMSIZE.get(dtype, 4)
    lstm = mode == "lstm"
    biases = 2 * g if call["bias"] else 0
    widths = [call["input"]] + [d * h] * (layers - 1)
    rows: list[dict[str, Any]] = []

    def dropout() -> dict[str, Any]:
        return _row("dropout", 0, s * n * d * h, s * n * d * h, 1, dtype, phase)

    for layer in (range(layers) if phase != "backward" else reversed(range(layers))):
        i = widths[layer]
        if phase != "backward":
            if layer and call["dropout"]:
                rows.append(dropout())
            rows.append(_row("mm", 2 * n * i * d * g, s * (n * i + d * g * i), s * n * d * g,
                             1, dtype, phase, _mm(n, i, d * g)))
            for _ in range(d):
                rows += [_row("mm", 2 * b * h * g, s * (b * h + g * h), s * b * g, t, dtype,
                              phase, _mm(b, h, g)),
                         _row(f"cudnn_{mode}_cell", 0, s * (2 * b * g + biases + lstm * b * h),
                              s * (b * h + lstm * b * h + b * g), t, dtype, phase)]
            continue
        for _ in range(d):
            rows += [_row(f"cudnn_{mode}_cell_backward", 0,
                          s * (2 * b * h + b * g + 2 * lstm * b * h),
                          s * (b * g + lstm * b * h), t, dtype, phase),
                     _row("mm", 2 * b * g * h, s * (b * g + g * h), s * b * h, t, dtype,
                          phase, _mm(b, g, h))]
        rows.append(_row("mm", 2 * n * d * g * i, s * (n * d * g + d * g * i), s * n * i, 1,
                         dtype, phase, _mm(n, d * g, i)))
        if layer and call["dropout"]:
            rows.append(dropout())
    if phase == "backward":
        for layer in range(layers):
            i = widths[layer]
            rows += [_row("mm", 2 * d * g * n * i, s * (n * d * g + n * i), s * d * g * i, 1,
                          dtype, phase, _mm(d * g, n, i)),
                     _row("mm", 2 * g * n * h, s * (n * g + n * h), s * g * h, d, dtype,
                          phase, _mm(g, n, h))]
            if biases:
                rows.append(_row("sum", 0, s * n * d * g, s * d * biases, 1, dtype, phase))
    first, *rest = rows
    if first["count"] > 1:  # a per-step kernel first (backward): the host issues its first run
        rest = [first | {"count": first["count"] - 1}, *rest]
        first = first | {"count": 1}
    return [first] + [_library(r) for r in rest]


def _gru_call(op: Mapping[str, Any]) -> dict[str, Any] | None:
    """The call spec's fields of a ``gru``/``gru_backward`` row (one direction of one layer,
    biases, no dropout), from its shapes; None without them."""
    shapes = parse_shapes(str(op.get("shapes", "")))
    first = 1 if str(op["op"]).split("::")[-1] == "gru_backward" else 0
    if len(shapes) < first + 3:
        return None
    (b, t, i), (_, h) = shapes[first], shapes[first + 2]
    return {"mode": "gru", "call": 0, "seq": t, "batch": b, "input": i, "hidden": h,
            "layers": 1, "directions": 1, "bias": 1, "dropout": 0}


def as_cudnn(ops: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """The per-op table as a GPU runs it, and per returned row the index of the row of ``ops``
    it comes from: the ops of each tagged recurrent call (``recurrent`` = its ``call_spec``)
    and phase are replaced, where its first op was, by ``cudnn_rows``; a ``gru`` or
    ``gru_backward`` row by ``cudnn_rows`` of its shapes; every other row is kept."""
    out: list[dict[str, Any]] = []
    origin: list[int] = []
    done: set[tuple[str, str]] = set()
    for index, op in enumerate(ops):
        spec, phase = str(op.get("recurrent") or ""), str(op.get("phase", "forward"))
        name = str(op["op"]).split("::")[-1]
        try:
            call = parse_call(spec) if spec else \
                _gru_call(op) if name in ("gru", "gru_backward") else None
        except ValueError as exc:
            raise ValueError(f"per-op row {index + 1} ({name}), field 'recurrent': {exc}") \
                from None
        if call is None:
            out.append(dict(op))
            origin.append(index)
            continue
        if spec and (spec, phase) in done:
            continue
        done.add((spec, phase))
        rows = cudnn_rows(call, "backward" if name == "gru_backward" else phase,
                          str(op.get("dtype", "float32")))
        runs = int(op.get("count", 1))
        out += [r | {"count": r["count"] * runs} for r in rows] if runs != 1 else rows
        origin += [index] * len(rows)
    return out, origin
