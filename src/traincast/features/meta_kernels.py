"""Meta (shape-only) kernels for aten ops torch ships without one, so their models profile on meta.

- ``_ctc_loss`` / ``_ctc_loss_backward``: CTC loss returns the per-sample loss (B) and the
  forward variables alpha (B, T, 2S+1) it keeps for backward; backward returns a gradient shaped
  like the log-probabilities. Shapes as in ATen's CPU/CUDA kernels.

- ``_grouped_mm`` (transformers' grouped experts): torch's meta kernel
  (``torch._meta_registrations._meta_grouped_mm_common``) accepts bf16 operands only, as the
  CUDA kernel once did, while the op runs in fp32 and fp16 too (the CPU kernel; CUDA's
  fallback). Unscaled fp32/fp16 operands take the same shape rules, with their own dtype out:
  the output's shape never depends on the routing (the offsets split rows among experts), so
  a mixture of experts profiles on meta.

Importing this module registers them (once per process).
"""

from __future__ import annotations

from typing import Any

import torch

_LIB = torch.library.Library("aten", "IMPL")


def _ctc_loss_meta(log_probs: torch.Tensor, targets: torch.Tensor, input_lengths: Any,
                   target_lengths: Any, blank: int = 0,
                   zero_infinity: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    time, batch = log_probs.shape[0], log_probs.shape[1]
    max_target = targets.shape[-1] if targets.dim() == 2 else targets.shape[0]
    return (log_probs.new_empty(batch),
            log_probs.new_empty(batch, time, 2 * max_target + 1))


def _ctc_loss_backward_meta(grad: torch.Tensor, log_probs: torch.Tensor, *args: Any,
                            **kwargs: Any) -> torch.Tensor:
    return log_probs.new_empty(log_probs.shape)


for _overload in ("_ctc_loss", "_ctc_loss.Tensor"):
    _LIB.impl(_overload, _ctc_loss_meta, "Meta")
for _overload in ("_ctc_loss_backward", "_ctc_loss_backward.Tensor"):
    _LIB.impl(_overload, _ctc_loss_backward_meta, "Meta")


def _grouped_mm_any_float(common: Any) -> Any:
    """torch's grouped-mm shape rule for unscaled fp32/fp16 operands too: the operands are
    presented to it as bf16 and the output takes their dtype (``out_dtype`` when given)."""

    def rule(mat_a: torch.Tensor, mat_b: torch.Tensor, scale_a: Any, scale_b: Any,
             *args: Any, **kwargs: Any) -> torch.Tensor:
        other = (torch.float32, torch.float16)
        if scale_a is None and scale_b is None and mat_a.dtype == mat_b.dtype \
                and mat_a.dtype in other:
            names = ("offs", "bias", "scale_result", "out_dtype", "use_fast_accum")
            given = dict(zip(names, args, strict=False)) | kwargs
            dtype = given.pop("out_dtype", None) or mat_a.dtype
            out = common(mat_a.to(torch.bfloat16), mat_b.to(torch.bfloat16), None, None,
                         **given)
            return out.to(dtype)
        return common(mat_a, mat_b, scale_a, scale_b, *args, **kwargs)

    rule.__wrapped__ = common  # type: ignore[attr-defined]
    return rule


def _register_grouped_mm() -> None:
    import torch._meta_registrations as registered

    common = getattr(registered, "_meta_grouped_mm_common", None)
    if common is not None and not hasattr(common, "__wrapped__"):
        registered._meta_grouped_mm_common = _grouped_mm_any_float(common)  # type: ignore


_register_grouped_mm()
