"""Per-op rules: FLOPs, compute- vs memory-bound, per-op expansions, bytes moved, fusion.

**The op registry** (``OP_RULES``, in the style of ``torch.utils.flop_counter``): each op that
is not plain memory traffic registers, by name, its family, whether it is compute-bound, its
FLOP formula and, where one fused op runs as many kernels, an ``expand`` hook. It is the one list
every part of traincast uses: the profiler (``op_flops``), the per-op roofline
(``traincast.roofline``: ``expand_ops``, ``op_family``) and the measured breakdown
(``traincast.validation.measure``: ``is_compute_bound`` on ``torch.profiler`` event names). Names
are op names without namespace or overload (``aten::mm`` and ``mm`` are one op). This module
imports torch only inside the functions that handle tensors, so the time models use the registry
without torch.

Classification (after Wang et al., IISWC 2019): an op is **compute-bound** when it belongs to a
matrix-unit family — ``gemm`` (mm, addmm, bmm, baddbmm, scaled and grouped mm), ``conv``
(convolutions and their backward, every backend's kernel), ``attention`` (scaled-dot-product /
flash / efficient / cuDNN attention, CPU flash attention) or ``recurrent`` (fused RNN layers) — and
its FLOP count is positive; every other op (element-wise, reductions, norms, softmax, embedding
gathers, copies, casts, optimizer updates, sparse products) is **memory-bound**. The rule is by op
family, not by the op's arithmetic intensity, so it does not depend on the GPU; a per-op roofline
refines it per shape. Backend kernels that only ``torch.profiler`` sees at run time are ``conv``
ops when named like a convolution kernel (``conv`` followed by a digit, ``_`` or ``olution``:
``mkldnn_convolution``, ``_slow_conv2d_backward``, ...); the fused RNN kernels
(``mkldnn_rnn_layer``, ``_cudnn_rnn``, ...) are registered without a formula. An op that
registers a FLOP formula with torch (``torch.utils.flop_counter.register_flop_formula``) but not
here joins the registry as a
compute-bound ``gemm`` op the first time it is seen (torch's counter covers only matrix-unit ops).

FLOPs (one multiply-add = 2 FLOPs): the op's registered formula, else torch's own
(``torch.utils.flop_counter.flop_registry``), else 0. Registered formulas replace torch's for the
backward of a convolution (torch over-counts grouped convolutions: 65x for a 3x3 depthwise
convolution of 64 channels) and add the CPU flash-attention kernels torch leaves at zero.
Memory-bound ops may register a formula too (``register_op(..., compute_bound=False, flops=...,
raw=True)``, e.g. a sparse x dense product): their FLOPs are counted, the op stays
memory-bound. ``BUILTIN_RULES`` is the registry as this module leaves it, before any op joins.

Bytes of an op = unique elements read from its tensor inputs + elements written to its tensor
outputs, times the element size; a broadcast (stride-0) dimension is read once. Views (outputs that
alias an input) are metadata only and are not ops here; an in-place op writes its destination and
reads it only where it uses its old value (``copy_``, ``fill_``, ``zero_`` and random fills do not).

Gathers and scatters touch only the rows they index: an embedding lookup, ``index_select``,
``index`` or ``gather`` reads (elements gathered) x element size from its source, not the whole
table (an embedding lookup: one row per index); ``embedding_renorm_`` (``max_norm``) reads and
writes one row per index; ``index_add_``, ``index_copy_``, ``index_put_`` and ``scatter(_add)_``
read and write only as many elements of their destination as their source holds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from traincast.features.recurrent import ITEMSIZE, as_cudnn, gru_rows, parse_shapes

__all__ = ["BUILTIN_RULES", "ITEMSIZE", "OP_RULES", "OpRule", "expand_ops", "expand_ops_origin",
           "is_compute_bound", "op_family", "op_flops", "parse_shapes", "register_op", "rule_for"]

Expand = Callable[[Mapping[str, Any]], list[dict[str, Any]]]
COMPUTE_FAMILIES = ("gemm", "conv", "attention", "recurrent")


@dataclass(frozen=True)
class OpRule:
    """How every part of traincast treats one op.

    ``flops``: formula called with the op's tensors replaced by their shapes and
    ``out_shape=`` (torch's convention for unwrapped formulas), or with the tensors themselves
    when ``raw``; None = torch's registered formula, if any. ``expand``: the rows of the ops a
    fused op runs (each with a ``count``), for per-op time models.
    """

    name: str
    family: str
    compute_bound: bool
    flops: Callable[..., int] | None = None
    raw: bool = False
    expand: Expand | None = None


OP_RULES: dict[str, OpRule] = {}


def short_name(name: str) -> str:
    """``aten::mm`` / ``aten.mm.default`` / ``mm`` -> ``mm``."""
    name = str(name).split("::")[-1]
    if name.startswith("aten."):
        name = name.split(".")[1]
    return name


def register_op(names: str | Iterable[str], *, family: str, compute_bound: bool | None = None,
                flops: Callable[..., int] | None = None, raw: bool = False,
                expand: Expand | None = None) -> None:
    """Register ``names`` (op names, any namespace) with their family, bound, FLOP formula and
    expansion; ``compute_bound`` defaults to whether ``family`` is a matrix-unit family."""
    bound = family in COMPUTE_FAMILIES if compute_bound is None else compute_bound
    for name in [names] if isinstance(names, str) else names:
        OP_RULES[short_name(name)] = OpRule(short_name(name), family, bound, flops, raw, expand)


_CONV_KERNEL = re.compile(r"conv(\d|_|olution)")


def rule_for(name: str) -> OpRule | None:
    """The registered rule of op ``name`` (a convolution kernel by its name), else None."""
    short = short_name(name)
    rule = OP_RULES.get(short)
    if rule is None and _CONV_KERNEL.search(short):
        return OpRule(short, "conv", True)
    return rule


def is_compute_bound(name: str) -> bool:
    """Whether op ``name`` belongs to a compute-bound (matrix-unit) family."""
    rule = rule_for(name)
    return rule is not None and rule.compute_bound


def op_family(name: str) -> str:
    """The family of op ``name`` (``gemm``, ``conv``, ...); ``""`` for memory traffic."""
    rule = rule_for(name)
    return rule.family if rule is not None else ""


def expand_ops(ops: Sequence[Mapping[str, Any]], gpu_library: bool = False
               ) -> list[Mapping[str, Any]]:
    """The per-op table with every row of an op that has an ``expand`` hook replaced by the
    rows it returns (each with a ``count``); other rows as they are. With ``gpu_library``, the
    recurrent layers first become the kernels of cuDNN's fused RNN (``recurrent.as_cudnn``):
    the table as a GPU runs it."""
    return expand_ops_origin(ops, gpu_library)[0]


def expand_ops_origin(ops: Sequence[Mapping[str, Any]], gpu_library: bool = False
                      ) -> tuple[list[Mapping[str, Any]], NDArray[np.int64]]:
    """``expand_ops`` and, per returned row, the index of the row of ``ops`` it comes from."""
    base = np.arange(len(ops), dtype=np.int64)
    if gpu_library:
        ops, index = as_cudnn(ops)
        base = np.asarray(index, dtype=np.int64)
    hooks = [(o, rule_for(str(o["op"]))) for o in ops]
    if not any(r is not None and r.expand is not None for _, r in hooks):
        return list(ops), base
    parts = [r.expand(o) if r is not None and r.expand is not None else [o] for o, r in hooks]
    origin = np.repeat(base, [len(p) for p in parts])
    return [row for p in parts for row in p], origin


# -- FLOP formulas --------------------------------------------------------------------------
def _fc() -> Any:
    import torch.utils.flop_counter as fc

    return fc


def _cpu_flash_forward_flop(query_shape: Any, key_shape: Any, value_shape: Any, *args: Any,
                            out_shape: Any = None, **kwargs: Any) -> int:
    """The CPU flash-attention kernel: Q K^T and P V, as torch counts the CUDA kernels."""
    return int(_fc().sdpa_flop_count(query_shape, key_shape, value_shape))


def _cpu_flash_backward_flop(grad_out_shape: Any, query_shape: Any, key_shape: Any,
                             value_shape: Any, *args: Any, out_shape: Any = None,
                             **kwargs: Any) -> int:
    """Backward of the CPU flash-attention kernel (dQ, dK, dV, dP products)."""
    return int(_fc().sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape,
                                              value_shape))


def _conv_backward_flop(grad_out_shape: Any, x_shape: Any, w_shape: Any, _bias: Any,
                        _stride: Any, _padding: Any, _dilation: Any, transposed: bool,
                        _output_padding: Any, _groups: Any, output_mask: Any,
                        out_shape: Any = None) -> int:
    """Backward of a convolution: the input gradient and the weight gradient each cost the
    forward's FLOPs, ``conv_flop_count(x, w, grad_out)`` each (torch's own formula over-counts
    grouped convolutions)."""
    forward = _fc().conv_flop_count(x_shape, w_shape, grad_out_shape, transposed)
    return int(forward * (int(bool(output_mask[0])) + int(bool(output_mask[1]))))


def _addmm_activation_flop(self_shape: Any, a_shape: Any, b_shape: Any, *args: Any,
                           out_shape: Any = None, **kwargs: Any) -> int:
    """A fused linear + activation: the product's 2·M·K·N (the activation is free)."""
    return int(_fc().mm_flop(a_shape, b_shape))


def _grouped_mm_flop(a_shape: Any, b_shape: Any, *args: Any, out_shape: Any = None,
                     **kwargs: Any) -> int:
    """A grouped product (``torch._grouped_mm``, ``_scaled_grouped_mm`` in fp8: a mixture of
    experts' expert layers, one kernel for every expert), ``2 M K N`` with ``M, K = A``'s last
    two sizes and ``N = B``'s last; times the groups ``G`` when both are 3-D (``G`` separate
    products). With offsets the groups split one dimension of a 2-D operand: ``(T, K) @ (G, K,
    N)`` (each token's row by its expert's matrix), ``(K, T) @ (T, N)`` (the weight gradient,
    ``T`` split), ``(G, M, K) @ (K, N_total)`` (``N`` split) all cost ``2 M K N``. Every row
    counts: a mixture of experts routes every token (rows past the last offset would not
    run)."""
    a, b = list(a_shape), list(b_shape)
    groups = a[0] if len(a) == 3 and len(b) == 3 else 1
    return int(2 * groups * a[-2] * a[-1] * b[-1])


register_op(["mm", "addmm", "bmm", "baddbmm", "_scaled_mm"], family="gemm")
GROUPED_MM = ("_grouped_mm", "_scaled_grouped_mm")
"""A mixture of experts' grouped products (bf16 and fp8)."""
register_op(GROUPED_MM, family="gemm", flops=_grouped_mm_flop)
register_op("_addmm_activation", family="gemm", flops=_addmm_activation_flop)
register_op(["convolution", "_convolution", "convolution_overrideable", "cudnn_convolution",
             "_slow_conv2d_forward"], family="conv")
register_op("convolution_backward", family="conv", flops=_conv_backward_flop)
# backend kernels below the dispatch level the profiler records (torch.profiler's
# mkldnn_convolution, _slow_conv2d_backward, _conv_depthwise2d, ...) match _CONV_KERNEL
register_op(["_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
             "_scaled_dot_product_cudnn_attention", "_flash_attention_forward",
             "_flash_attention_backward", "_efficient_attention_forward",
             "_efficient_attention_backward", "_scaled_dot_product_flash_attention_backward",
             "_scaled_dot_product_efficient_attention_backward",
             "_scaled_dot_product_cudnn_attention_backward"], family="attention")
register_op("_scaled_dot_product_flash_attention_for_cpu", family="attention",
            flops=_cpu_flash_forward_flop)
register_op("_scaled_dot_product_flash_attention_for_cpu_backward", family="attention",
            flops=_cpu_flash_backward_flop)
# one GRU direction as one fused op (traincast.zoo.speech registers its FLOPs with torch);
# per-op time models price it by the ops each time step runs
register_op(["gru", "gru_backward"], family="recurrent", expand=gru_rows)
register_op(["mkldnn_rnn_layer", "mkldnn_rnn_layer_backward", "_cudnn_rnn",
             "_cudnn_rnn_backward"], family="recurrent")


# the rules registered above, before any op joins at capture time (``op_flops``)
BUILTIN_RULES: Mapping[str, OpRule] = MappingProxyType(dict(OP_RULES))


def _shapes(x: Any) -> Any:
    import torch

    return x.shape if isinstance(x, torch.Tensor) else x


def op_flops(func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[int, bool]:
    """(FLOPs, compute-bound) of one captured op: its registered formula, else torch's, else 0;
    compute-bound when its rule says so and the FLOPs are positive."""
    packet = func._overloadpacket
    name = packet.__name__
    rule = rule_for(name)
    torch_formula = _fc().flop_registry.get(packet)
    if rule is None and torch_formula is not None:
        register_op(name, family="gemm")
        rule = OP_RULES[name]
    if rule is None:
        return 0, False
    if rule.flops is not None and rule.raw:
        flops = int(rule.flops(*args, **kwargs))
    elif rule.flops is not None:
        from torch.utils._pytree import tree_map

        flops = int(rule.flops(*tree_map(_shapes, args), **tree_map(_shapes, kwargs),
                               out_shape=tree_map(_shapes, out)))
    elif torch_formula is not None:
        flops = int(torch_formula(*args, **kwargs, out_val=out))
    else:
        flops = 0
    return flops, rule.compute_bound and flops > 0


# -- bytes ------------------------------------------------------------------------------------
# ops that only allocate or relabel memory: no kernel reads or writes data
FREE_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "detach",
    "alias", "lift_fresh", "lift_fresh_copy", "_local_scalar_dense", "set_", "resize_",
    "_reshape_alias", "_unsafe_view", "view", "_to_copy_meta",
})
# ops that take a tensor for its shape, dtype and device alone: they write a new one (a fill)
# and read no input
LIKE_OPS = frozenset({"zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
                      "randint_like", "new_zeros", "new_ones", "new_full"})
# in-place ops whose destination is written without being read
WRITE_ONLY = frozenset({"copy_", "fill_", "zero_", "uniform_", "normal_", "bernoulli_",
                        "random_", "exponential_"})
# memory-bound ops fusible into an element-wise chain besides torch's `pointwise` tag
EXTRA_POINTWISE = frozenset({"_to_copy", "copy_", "fill_", "zero_", "native_dropout",
                             "native_dropout_backward"})
# embedding lookups (weight, indices, ...) and the max_norm renormalization of the rows looked up
EMBEDDING_OPS = frozenset({"embedding", "_embedding_bag", "_embedding_bag_forward_only",
                           "embedding_bag", "embedding_renorm_"})


def tensor_bytes(t: Any) -> int:
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


def gathered_bytes(name: str, args: tuple, outs: list[Any]) -> dict[int, int]:
    """Bytes an indexing op really touches in its large operand: {id(tensor): bytes}."""
    import torch

    if name in EMBEDDING_OPS:
        weight, indices = args[0], args[1]
        return {id(weight): indices.numel() * math.prod(weight.shape[1:]) * weight.element_size()}
    if name in GATHERS and outs and isinstance(args[0], torch.Tensor):
        return {id(args[0]): tensor_bytes(outs[0])}
    if name in SCATTERS and isinstance(args[0], torch.Tensor):
        src = [a for a in args[1:] if isinstance(a, torch.Tensor) and a.is_floating_point()]
        if src:
            return {id(args[0]): min(tensor_bytes(args[0]), tensor_bytes(src[-1]))}
    return {}


def is_pointwise(func: Any, name: str) -> bool:
    """Whether a memory-bound op can join a fused element-wise chain."""
    import torch

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
    recurrent: str = ""  # the recurrent-layer call the op belongs to (recurrent.call_spec)

    def row(self) -> dict[str, Any]:
        """The public per-op row (the per-op keys of docs/profile.md, dtype, input shapes;
        ``recurrent`` on the ops of an ``nn.LSTM``/``GRU``/``RNN`` call)."""
        row = {"op": self.op, "phase": self.phase, "flops": self.flops,
               "bytes_read": self.bytes_read, "bytes_written": self.bytes_written,
               "bound": self.bound, "dtype": self.dtype, "shapes": self.shapes}
        return row | {"recurrent": self.recurrent} if self.recurrent else row


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
