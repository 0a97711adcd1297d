"""DeepSpeech2-style acoustic model (Amodei et al. 2016) in plain torch.nn.

Input: a 161-bin linear spectrogram (20 ms windows, 10 ms hop, 16 kHz audio) of 10 s = 1000
frames. Two 2-D convolutions (32 filters of 41x11, stride 2x2; 32 of 21x11, stride 2x1) with
batch norm and clipped ReLU, five bidirectional GRU layers of 800 units (sum of directions,
batch norm between layers), a linear layer to 29 characters and CTC loss.

Each GRU direction is one fused operator, ``traincast::gru``, as cuDNN runs it on a GPU (one
kernel sequence per layer and direction, the input projection of all time steps batched): its
forward writes the hidden states and a reserve of the 3 gate values per step kept for backward,
and its backward is the operator ``traincast::gru_backward``. FLOPs (one multiply-add = 2):
forward 2·B·T·3H·(I + H) (input and recurrent projections), backward twice that (gradients of
the inputs and of the weights). On CPU both run torch's GRU (backward by recomputation).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torch.utils.flop_counter as fc
from torch import nn

BINS, FRAMES, CHARS, HIDDEN, LAYERS, TRANSCRIPT = 161, 1000, 29, 800, 5, 150


def _gru_direction(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, b_ih: torch.Tensor,
                   b_hh: torch.Tensor, reverse: bool) -> torch.Tensor:
    """torch's own GRU over one direction: (B, T, I) -> hidden states (B, T, H)."""
    xs = x.flip(1) if reverse else x
    h0 = x.new_zeros(1, x.shape[0], w_hh.shape[1])
    y, _ = torch.gru(xs, h0, [w_ih, w_hh, b_ih, b_hh], True, 1, 0.0, False, False, True)
    return y.flip(1) if reverse else y


@torch.library.custom_op("traincast::gru", mutates_args=())
def gru(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, b_ih: torch.Tensor,
        b_hh: torch.Tensor, reverse: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """One GRU direction over (B, T, I) -> hidden states (B, T, H) and the gate reserve."""
    y = _gru_direction(x, w_ih, w_hh, b_ih, b_hh, reverse)
    return y, x.new_zeros(*x.shape[:2], w_ih.shape[0])


def _gru_grads(grad_y: torch.Tensor, x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor,
               b_ih: torch.Tensor, b_hh: torch.Tensor, reverse: bool) -> list[torch.Tensor]:
    """Gradients of (x, w_ih, w_hh, b_ih, b_hh) by recomputing the direction with autograd."""
    leaves = [t.detach().requires_grad_() for t in (x, w_ih, w_hh, b_ih, b_hh)]
    with torch.enable_grad():
        out = _gru_direction(*leaves, reverse)
    return list(torch.autograd.grad(out, leaves, grad_y))


@gru.register_fake
def _gru_fake(x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor, b_ih: torch.Tensor,
              b_hh: torch.Tensor, reverse: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return x.new_empty(*x.shape[:2], w_hh.shape[1]), x.new_empty(*x.shape[:2], w_ih.shape[0])


@torch.library.custom_op("traincast::gru_backward", mutates_args=())
def gru_backward(grad_y: torch.Tensor, x: torch.Tensor, w_ih: torch.Tensor, w_hh: torch.Tensor,
                 b_ih: torch.Tensor, b_hh: torch.Tensor, y: torch.Tensor,
                 reserve: torch.Tensor, reverse: bool) -> list[torch.Tensor]:
    """Gradients of x, w_ih, w_hh, b_ih, b_hh: one operator, so a profile counts it once."""
    return _gru_grads(grad_y, x, w_ih, w_hh, b_ih, b_hh, reverse)


@gru_backward.register_fake
def _gru_backward_fake(grad_y: torch.Tensor, x: torch.Tensor, w_ih: torch.Tensor,
                       w_hh: torch.Tensor, b_ih: torch.Tensor, b_hh: torch.Tensor,
                       y: torch.Tensor, reserve: torch.Tensor,
                       reverse: bool) -> list[torch.Tensor]:
    return [torch.empty_like(t) for t in (x, w_ih, w_hh, b_ih, b_hh)]


def _gru_setup(ctx: object, inputs: tuple, output: tuple) -> None:
    ctx.save_for_backward(*inputs[:5], *output)  # type: ignore[attr-defined]
    ctx.reverse = inputs[5]  # type: ignore[attr-defined]
    ctx.set_materialize_grads(False)  # type: ignore[attr-defined]  # no zeros for the reserve


def _gru_grad(ctx: object, grad_y: torch.Tensor, grad_reserve: torch.Tensor) -> tuple:
    x, w_ih, w_hh, b_ih, b_hh, y, reserve = ctx.saved_tensors  # type: ignore[attr-defined]
    if not x.is_meta:
        # real tensors: autograd is off inside a custom operator's body, so the recomputation
        # runs here, where it can record a graph
        reverse = ctx.reverse  # type: ignore[attr-defined]
        return (*_gru_grads(grad_y, x, w_ih, w_hh, b_ih, b_hh, reverse), None)
    grads = gru_backward(grad_y.contiguous(), x, w_ih, w_hh, b_ih, b_hh, y, reserve,
                         ctx.reverse)  # type: ignore[attr-defined]
    return (*grads, None)


gru.register_autograd(_gru_grad, setup_context=_gru_setup)


def _gru_flops(x_shape: tuple, w_ih_shape: tuple, w_hh_shape: tuple) -> int:
    batch, steps, features = x_shape
    gates, hidden = w_hh_shape
    return 2 * batch * steps * gates * (features + hidden)


@fc.register_flop_formula(torch.ops.traincast.gru)
def _gru_forward_flop(x_shape: tuple, w_ih_shape: tuple, w_hh_shape: tuple, *args: object,
                      out_shape: object = None, **kwargs: object) -> int:
    return _gru_flops(x_shape, w_ih_shape, w_hh_shape)


@fc.register_flop_formula(torch.ops.traincast.gru_backward)
def _gru_backward_flop(grad_shape: tuple, x_shape: tuple, w_ih_shape: tuple,
                       w_hh_shape: tuple, *args: object, out_shape: object = None,
                       **kwargs: object) -> int:
    return 2 * _gru_flops(x_shape, w_ih_shape, w_hh_shape)


class BiGRU(nn.Module):
    """Bidirectional GRU layer (parameters laid out as nn.GRU's), one fused op per direction."""

    def __init__(self, features: int, hidden: int) -> None:
        super().__init__()
        for d in ("", "_reverse"):
            self.register_parameter(f"weight_ih{d}", nn.Parameter(torch.empty(3 * hidden,
                                                                               features)))
            self.register_parameter(f"weight_hh{d}", nn.Parameter(torch.empty(3 * hidden,
                                                                               hidden)))
            self.register_parameter(f"bias_ih{d}", nn.Parameter(torch.zeros(3 * hidden)))
            self.register_parameter(f"bias_hh{d}", nn.Parameter(torch.zeros(3 * hidden)))
        for name, p in self.named_parameters():
            if name.startswith("weight"):
                nn.init.uniform_(p, -hidden ** -0.5, hidden ** -0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Sum of the forward and backward directions' hidden states."""
        fwd, _ = gru(x, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh, False)
        bwd, _ = gru(x, self.weight_ih_reverse, self.weight_hh_reverse, self.bias_ih_reverse,
                     self.bias_hh_reverse, True)
        return fwd + bwd


class DeepSpeech2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, (41, 11), (2, 2), (20, 5), bias=False), nn.BatchNorm2d(32),
            nn.Hardtanh(0, 20),
            nn.Conv2d(32, 32, (21, 11), (2, 1), (10, 5), bias=False), nn.BatchNorm2d(32),
            nn.Hardtanh(0, 20))
        freq = ((BINS + 40 - 41) // 2 + 1 + 20 - 21) // 2 + 1  # 41 bins after the two convs
        sizes = [32 * freq] + [HIDDEN] * (LAYERS - 1)
        self.rnns = nn.ModuleList(BiGRU(n, HIDDEN) for n in sizes)
        self.norms = nn.ModuleList(nn.BatchNorm1d(n) for n in sizes[1:])
        self.fc = nn.Linear(HIDDEN, CHARS, bias=False)

    def forward(self, spec: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.conv(spec)  # (B, 32, 41, T/2)
        b, c, f, t = x.shape
        x = x.view(b, c * f, t).transpose(1, 2)
        for i, rnn in enumerate(self.rnns):
            if i > 0:
                x = self.norms[i - 1](x.transpose(1, 2)).transpose(1, 2)
            x = rnn(x.contiguous())
        log_probs = F.log_softmax(self.fc(x), dim=-1).transpose(0, 1)  # (T, B, C)
        in_lens = torch.full((b,), t, dtype=torch.long, device=spec.device)
        out_lens = torch.full((b,), targets.shape[1], dtype=torch.long, device=spec.device)
        return F.ctc_loss(log_probs, targets, in_lens, out_lens, zero_infinity=True)


def deepspeech2() -> nn.Module:
    return DeepSpeech2()


def speech_inputs(batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` 10 s spectrograms and 150-character transcripts (seeded)."""
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(batch, 1, BINS, FRAMES, generator=gen),
            torch.randint(1, CHARS, (batch, TRANSCRIPT), generator=gen))
