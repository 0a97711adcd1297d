"""Meta (shape-only) kernels for aten ops torch ships without one, so their models profile on meta.

- ``_ctc_loss`` / ``_ctc_loss_backward``: CTC loss returns the per-sample loss (B) and the
  forward variables alpha (B, T, 2S+1) it keeps for backward; backward returns a gradient shaped
  like the log-probabilities. Shapes as in ATen's CPU/CUDA kernels.

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
