"""An LSTM language model for validation's RNN family (``file.py:FUNC`` spec).

The "medium" word-level LSTM of Zaremba et al. (2014), "Recurrent Neural Network
Regularization", Penn Treebank: 10,000-word vocabulary, 650-dimensional embeddings, 2 LSTM
layers of 650 units, 35 unrolled steps, dropout 0.5, softmax over the vocabulary; inputs are
seeded random word ids.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

VOCAB, DIM, LAYERS, STEPS = 10_000, 650, 2, 35


class LSTMLanguageModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.lstm = nn.LSTM(DIM, DIM, LAYERS, batch_first=True, dropout=0.5)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(DIM, VOCAB)

    def forward(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.drop(self.embed(ids)))
        logits = self.out(self.drop(h))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def ptb_lstm(batch_size: int) -> tuple[nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    """(model, (ids, targets)) for ``batch_size`` sequences of 35 words."""
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (batch_size, STEPS + 1), generator=gen)
    return LSTMLanguageModel(), (ids[:, :-1].contiguous(), ids[:, 1:].contiguous())
