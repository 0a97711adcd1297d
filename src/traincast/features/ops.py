"""Per-op rules: FLOPs, bytes moved, compute- vs memory-bound, and the element-wise fusion estimate.

FLOPs come from torch's own per-op formulas (``torch.utils.flop_counter.flop_registry``: matrix
products, convolutions, attention kernels), plus formulas registered here for the CPU attention
kernels torch leaves at zero. One multiply-add = 2 FLOPs.

Bytes of an op = unique elements read from its tensor inputs + elements written to its tensor
outputs, times the element size; a broadcast (stride-0) dimension is read once. Views (outputs that
alias an input) are metadata only and are not ops here; an in-place op writes its destination and
reads it only where it uses its old value (``copy_``, ``fill_``, ``zero_`` and random fills do not).

Gathers and scatters touch only the rows they index: an embedding lookup, ``index_select``,
``index`` or ``gather`` reads (elements gathered) x element size from its source, not the whole
table; ``index_add_``, ``index_copy_``, ``index_put_`` and ``scatter(_add)_`` read and write only
as many elements of their destination as their source holds.

Classification (after Wang et al., IISWC 2019): an op is **compute-bound** when it is one of the
matrix-unit families torch has a FLOP formula for (mm, addmm, bmm, baddbmm, convolutions,
scaled-dot-product/flash/efficient attention) and its FLOP count is positive; every other op
(element-wise, reductions, norms, softmax, embedding gathers, copies, casts, optimizer updates) is
**memory-bound**. The rule is by op family, not by the op's arithmetic intensity, so it does not
depend on the GPU; a per-op roofline (traincast.roofline) refines it per shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils.flop_counter as fc
from torch.utils._pytree import tree_map

aten = torch.ops.aten


@fc.register_flop_formula([aten._scaled_dot_product_flash_attention_for_cpu])
def _cpu_flash_forward_flop(query_shape: Any, key_shape: Any, value_shape: Any, *args: Any,
                            out_shape: Any = None, **kwargs: Any) -> int:
    """The CPU flash-attention kernel: Q K^T and P V, as torch counts the CUDA kernels."""
    return fc.sdpa_flop_count(query_shape, key_shape, value_shape)


@fc.register_flop_formula([aten._scaled_dot_product_flash_attention_for_cpu_backward])
def _cpu_flash_backward_flop(grad_out_shape: Any, query_shape: Any, key_shape: Any,
                             value_shape: Any, *args: Any, out_shape: Any = None,
                             **kwargs: Any) -> int:
    """Backward of the CPU flash-attention kernel (dQ, dK, dV, dP products)."""
    return fc.sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


def _conv_backward_flop(grad_out_shape: Any, x_shape: Any, w_shape: Any, _bias: Any,
                        _stride: Any, _padding: Any, _dilation: Any, transposed: bool,
                        _output_padding: Any, _groups: Any, output_mask: Any,
                        out_shape: Any = None) -> int:
    """Backward of a convolution: the input gradient and the weight gradient each cost the
    forward's FLOPs. (torch's own formula over-counts grouped convolutions: 65x for a 3x3
    depthwise convolution of 64 channels.)"""
    forward = fc.conv_flop_count(x_shape, w_shape, grad_out_shape, transposed)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


# formulas used instead of torch's, by op packet; called with tensors replaced by their shapes
FLOP_OVERRIDES: dict[Any, Any] = {aten.convolution_backward: _conv_backward_flop}
FLOP_REGISTRY = fc.flop_registry


def _shapes(x: Any) -> Any:
    return x.shape if isinstance(x, torch.Tensor) else x

# ops that only allocate or relabel memory: no kernel reads or writes data
FREE_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "detach",
    "alias", "lift_fresh", "lift_fresh_copy", "_local_scalar_dense", "set_", "resize_",
    "_reshape_alias", "_unsafe_view", "view", "_to_copy_meta",
})
# in-place ops whose destination is written without being read
WRITE_ONLY = frozenset({"copy_", "fill_", "zero_", "uniform_", "normal_", "bernoulli_",
                        "random_", "exponential_"})
# memory-bound ops fusible into an element-wise chain besides torch's `pointwise` tag
EXTRA_POINTWISE = frozenset({"_to_copy", "copy_", "fill_", "zero_", "native_dropout",
                             "native_dropout_backward"})


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes of the distinct elements of ``t``: stride-0 (broadcast) dimensions count once."""
    n = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if size == 0:
            return 0
        if stride != 0:
            n *= size
    return n * t.element_size()


GATHERS = frozenset({"index_select", "index", "gather"})
SCATTERS = frozenset({"index_add_", "index_copy_", "index_put_", "scatter_", "scatter_add_"})


def gathered_bytes(name: str, args: tuple, outs: list[torch.Tensor]) -> dict[int, int]:
    """Bytes an indexing op really touches in its large operand: {id(tensor): bytes}."""
    if name in ("embedding", "_embedding_bag", "_embedding_bag_forward_only", "embedding_bag"):
        weight, indices = args[0], args[1]
        return {id(weight): indices.numel() * math.prod(weight.shape[1:]) * weight.element_size()}
    if name in GATHERS and outs and isinstance(args[0], torch.Tensor):
        return {id(args[0]): tensor_bytes(outs[0])}
    if name in SCATTERS and isinstance(args[0], torch.Tensor):
        src = [a for a in args[1:] if isinstance(a, torch.Tensor) and a.is_floating_point()]
        if src:
            return {id(args[0]): min(tensor_bytes(args[0]), tensor_bytes(src[-1]))}
    return {}


# FLOP formulas of memory-bound ops (e.g. sparse x dense products), keyed by op packet;
# formula(*args, **kwargs) -> FLOPs. Their FLOPs are counted, the op stays memory-bound.
MEMORY_BOUND_FLOPS: dict[Any, Any] = {}


def op_flops(func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[int, bool]:
    """(FLOPs, compute-bound) of one op: torch's formula for the matrix families, else a
    memory-bound formula registered in MEMORY_BOUND_FLOPS, else 0."""
    packet = func._overloadpacket
    override = FLOP_OVERRIDES.get(packet)
    if override is not None:
        flops = int(override(*tree_map(_shapes, args), **tree_map(_shapes, kwargs),
                             out_shape=tree_map(_shapes, out)))
        return flops, flops > 0
    formula = FLOP_REGISTRY.get(packet)
    if formula is not None:
        flops = int(formula(*args, **kwargs, out_val=out))
        return flops, flops > 0
    formula = MEMORY_BOUND_FLOPS.get(packet)
    return (int(formula(*args, **kwargs)), False) if formula is not None else (0, False)


def is_pointwise(func: Any, name: str) -> bool:
    """Whether a memory-bound op can join a fused element-wise chain."""
    return (torch.Tag.pointwise in func.tags or name in EXTRA_POINTWISE
            or name.startswith("_foreach_"))


@dataclass
class OpRecord:
    """One captured kernel of the training step."""

    op: str
    phase: str
    flops: int
    bytes_read: int
    bytes_written: int
    bound: str
    pointwise: bool
    dtype: str
    shapes: str
    reads: list[tuple[int, int]] = field(default_factory=list)  # (value id, bytes)
    writes: list[tuple[int, int, bool]] = field(default_factory=list)  # (id, bytes, fresh)

    def row(self) -> dict[str, Any]:
        """The public per-op row (DESIGN keys plus dtype and input shapes)."""
        return {"op": self.op, "phase": self.phase, "flops": self.flops,
                "bytes_read": self.bytes_read, "bytes_written": self.bytes_written,
                "bound": self.bound, "dtype": self.dtype, "shapes": self.shapes}


def fused_memory_bytes(records: list[OpRecord]) -> int:
    """Bytes of memory-bound ops if chains of element-wise ops were fused into one kernel each.

    Fusion rule (what XLA's loop fusion or torch.compile's pointwise fusion does): consecutive
    element-wise memory-bound ops of the same phase form one fused kernel. The kernel reads each
    value produced outside it once and writes each value it produces once, except intermediates:
    values created inside the kernel whose every reader is inside the kernel are never stored.
    Values mutated in place (parameters, optimizer state) and values read later (e.g. saved for
    backward) are written. Reductions, norms, softmax, gathers and matrix ops are not fused.
    """
    group_of: list[int] = []
    gid = -1
    prev_phase = None
    in_chain = False
    for rec in records:
        fusible = rec.bound == "memory" and rec.pointwise
        if fusible and in_chain and rec.phase == prev_phase:
            group_of.append(gid)
        elif fusible:
            gid += 1
            group_of.append(gid)
        else:
            gid += 1
            group_of.append(-1)
        in_chain, prev_phase = fusible, rec.phase

    readers: dict[int, set[int]] = {}
    for i, rec in enumerate(records):
        g = group_of[i] if group_of[i] >= 0 else -(i + 2)  # a non-fused op is its own group
        for uid, _ in rec.reads:
            readers.setdefault(uid, set()).add(g)

    total = 0
    groups: dict[int, list[OpRecord]] = {}
    for i, rec in enumerate(records):
        if rec.bound != "memory":
            continue
        if group_of[i] < 0:
            total += rec.bytes_read + rec.bytes_written
        else:
            groups.setdefault(group_of[i], []).append(rec)
    for g, recs in groups.items():
        created: set[int] = set()
        read_bytes: dict[int, int] = {}
        written: dict[int, int] = {}
        mutated: set[int] = set()
        for rec in recs:
            for uid, nbytes in rec.reads:
                if uid not in created:
                    read_bytes[uid] = max(read_bytes.get(uid, 0), nbytes)
            for uid, nbytes, fresh in rec.writes:
                if fresh:
                    created.add(uid)
                else:
                    mutated.add(uid)
                written[uid] = max(written.get(uid, 0), nbytes)
        total += sum(read_bytes.values())
        for uid, nbytes in written.items():
            outside = readers.get(uid, set()) - {g}
            if uid in mutated or outside or uid not in readers:
                total += nbytes
    return total
