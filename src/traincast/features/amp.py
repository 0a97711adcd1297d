"""Forward-pass rewrites applied while profiling: the GPU's attention and dropout kernels,
and autocast on meta.

``torch.autocast`` has no ``meta`` device, so mixed precision is emulated one level above
autograd with a ``TorchFunctionMode`` that applies CUDA autocast's op lists:

- lower-precision list (matrix products, convolutions, attention): floating fp32 tensor
  arguments are cast to the autocast dtype first (a recorded ``_to_copy``); a parameter is cast
  once per forward and the copy reused, as autocast's weight-cast cache does;
- fp32 list (softmax, log-softmax, layer/group norm, losses, exp/log/pow, sums): half
  arguments are cast to fp32 first, so these run, and write, in fp32 (batch norm is on neither
  list: it takes half inputs, as cuDNN does);
- every other op runs on whatever dtypes reach it (type promotion), as under autocast.

Casts are recorded by autograd, so backward runs in the same mixed precision.

``F.dropout`` decomposes off the GPU into ``bernoulli_``, ``div_`` and ``mul`` (three kernels and
a float mask); on a GPU ATen runs one fused ``native_dropout`` kernel with a boolean mask, and
``native_dropout_backward``: while profiling ``F.dropout`` is redirected to it, unless the step
is profiled for a CPU (``fused_dropout=False``: a CPU runs the decomposition).

``F.scaled_dot_product_attention`` decomposes into the unfused math path (two batched matmuls
and a softmax over the full score matrix) when no GPU kernel exists; a GPU runs a fused kernel
that never stores the score matrix. While profiling it is redirected to
``aten._scaled_dot_product_efficient_attention`` (the memory-efficient kernel, whose FLOPs torch
counts), with a boolean mask turned into an additive bias as PyTorch does.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

LOWER_PRECISION = frozenset({
    "linear", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "addmm", "addbmm", "baddbmm",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "einsum", "scaled_dot_product_attention", "multi_head_attention_forward", "prelu",
    "_convolution", "convolution", "chain_matmul", "addmv", "addr", "mv", "multi_dot", "gru",
})
FP32 = frozenset({  # CUDA autocast's float32 list (torch.amp docs)
    "__pow__", "__rdiv__", "__rpow__", "__rtruediv__", "acos", "asin",
    "binary_cross_entropy_with_logits", "cosh", "cosine_embedding_loss", "cdist",
    "cosine_similarity", "cross_entropy", "cumprod", "cumsum", "dist", "erfinv", "exp", "expm1",
    "group_norm", "hinge_embedding_loss", "kl_div", "l1_loss", "layer_norm", "log",
    "log_softmax", "log10", "log1p", "log2", "margin_ranking_loss", "mse_loss",
    "multilabel_margin_loss", "multi_margin_loss", "nll_loss", "norm", "normalize", "pdist",
    "poisson_nll_loss", "pow", "prod", "reciprocal", "rsqrt", "sinh", "smooth_l1_loss",
    "soft_margin_loss", "softmax", "softmin", "softplus", "sum", "renorm", "tan",
    "triplet_margin_loss", "huber_loss", "logsumexp",
})


def _sdpa_as_gpu_kernel(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                        attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
                        is_causal: bool = False, scale: float | None = None,
                        enable_gqa: bool = False) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` through the memory-efficient attention kernel."""
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        reps = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(reps, dim=-3)
        value = value.repeat_interleave(reps, dim=-3)
    bias = attn_mask
    if bias is not None and bias.dtype == torch.bool:
        bias = torch.zeros(bias.shape, dtype=query.dtype, device=query.device).masked_fill(
            ~bias, -math.inf)
    if bias is not None:
        shape = (*query.shape[:-1], key.shape[-2])
        bias = bias.to(query.dtype).expand(shape)
    out = torch.ops.aten._scaled_dot_product_efficient_attention(
        query, key, value, bias, query.requires_grad or key.requires_grad, dropout_p,
        is_causal, scale=scale)
    return out[0]


def _host_index(index: Any) -> Any:
    """Python lists of ints in an index (``x[:, [0, -1]]``) as CPU tensors: torch would build
    them on the indexed tensor's device, where meta keeps no values; a CPU index (allowed for
    any device, as on a GPU) keeps them, so the result's values can be known."""
    def convert(i: Any) -> Any:
        if isinstance(i, list) and i and all(type(v) is int for v in i):
            return torch.tensor(i, dtype=torch.int64)
        return i

    return tuple(convert(i) for i in index) if isinstance(index, tuple) else convert(index)


class ForwardRewrite(TorchFunctionMode):
    """Active during the forward pass: attention through the GPU kernel, dropout through the
    fused one when ``fused_dropout``; autocast if ``amp_dtype``."""

    def __init__(self, amp_dtype: torch.dtype | None = None, fused_dropout: bool = True) -> None:
        super().__init__()
        self.amp_dtype = amp_dtype
        self.fused_dropout = fused_dropout
        self._cast_cache: dict[int, torch.Tensor] = {}

    def _cast(self, x: Any, dtype: torch.dtype, source: tuple[torch.dtype, ...]) -> Any:
        if not isinstance(x, torch.Tensor) or x.dtype not in source:
            return x
        if x.is_leaf and x.requires_grad:  # a parameter: cast once per forward
            cached = self._cast_cache.get(id(x))
            if cached is None:
                cached = self._cast_cache[id(x)] = x.to(dtype)
            return cached
        return x.to(dtype)

    def __torch_function__(self, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "").split(".")[0]  # custom ops: "gru.default"
        if self.amp_dtype is not None:
            if name in LOWER_PRECISION:
                low = self.amp_dtype
                args = tuple(self._cast(a, low, (torch.float32,)) for a in args)
                kwargs = {k: self._cast(v, low, (torch.float32,)) for k, v in kwargs.items()}
            elif name in FP32:
                half = (torch.float16, torch.bfloat16)
                args = tuple(self._cast(a, torch.float32, half) for a in args)
                kwargs = {k: self._cast(v, torch.float32, half) for k, v in kwargs.items()}
        if func is torch.Tensor.__getitem__ and len(args) == 2:
            args = (args[0], _host_index(args[1]))
        if func is F.scaled_dot_product_attention:
            try:
                return _sdpa_as_gpu_kernel(*args, **kwargs)
            except (RuntimeError, TypeError, ValueError):
                pass  # shapes the fused kernel rejects: the math path, as PyTorch falls back
        if func is F.dropout and self.fused_dropout:
            fused = _dropout_as_gpu_kernel(*args, **kwargs)
            if fused is not None:
                return fused
        return func(*args, **kwargs)


def _dropout_as_gpu_kernel(input: torch.Tensor, p: float = 0.5, training: bool = True,
                           inplace: bool = False) -> torch.Tensor | None:
    """``F.dropout`` as a GPU runs it: one fused ``native_dropout`` kernel (output and a
    boolean mask) and one ``native_dropout_backward``, where ATen's ``dropout`` takes its fused
    path (``Dropout.cpp``, ``is_fused_kernel_acceptable``: a CUDA tensor, ``0 < p < 1``, not in
    place); None elsewhere (the caller's own path: the identity when not training)."""
    if not training or inplace or not 0.0 < float(p) < 1.0 or input.numel() == 0:
        return None
    return torch.native_dropout(input, float(p), True)[0]
