"""Recommenders in plain torch.nn: DLRM (Naumov et al. 2019) and a MIND-style multi-interest
retrieval model (Li et al. 2019). Embedding tables use sparse gradients, as their reference
implementations train them.

Ids are drawn from a Zipf(1) law (log-uniform rank: P(rank r) ∝ 1/r) over each table with a
fixed seed, so a batch looks up popular rows repeatedly, as real click logs do; the rows a batch
really touches (unique ids) set ``embedding_bytes_touched``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def zipf_ids(gen: torch.Generator, rows: int, *shape: int) -> torch.Tensor:
    """Ids in [0, rows) with P(id = r) ∝ 1 / (r + 1) (log-uniform ranks)."""
    u = torch.rand(*shape, generator=gen, dtype=torch.float64)
    return (torch.exp(u * math.log(rows + 1)).floor().long() - 1).clamp_(0, rows - 1)


def _mlp(sizes: list[int], last_act: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2 or last_act:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


# -- DLRM, Criteo Kaggle configuration -----------------------------------------------------------

# rows of the 26 categorical features of the Criteo Kaggle Display Advertising data set, as in
# facebookresearch/dlrm (--data-set=kaggle)
CRITEO_KAGGLE_ROWS = (1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683,
                      8351593, 3194, 27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15,
                      286181, 105, 142572)
DLRM_DIM, DLRM_DENSE = 16, 13


class DLRM(nn.Module):
    """Bottom MLP on dense features, one embedding bag per sparse feature, pairwise dot-product
    interaction, top MLP, binary cross-entropy on the click label."""

    def __init__(self, rows: tuple[int, ...] = CRITEO_KAGGLE_ROWS, dim: int = DLRM_DIM) -> None:
        super().__init__()
        self.bottom = _mlp([DLRM_DENSE, 512, 256, 64, dim], last_act=True)
        self.tables = nn.ModuleList(nn.EmbeddingBag(n, dim, mode="sum", sparse=True)
                                    for n in rows)
        n = len(rows) + 1
        self.top = _mlp([dim + n * (n - 1) // 2, 512, 256, 1], last_act=False)
        self.register_buffer("pairs", torch.tril_indices(n, n, -1), persistent=False)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor,
                clicks: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        feats = torch.stack([x] + [t(sparse[:, i:i + 1]) for i, t in enumerate(self.tables)], 1)
        inter = torch.bmm(feats, feats.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
        logits = self.top(torch.cat([x, inter], dim=1)).squeeze(1)
        return F.binary_cross_entropy_with_logits(logits, clicks)


def dlrm() -> nn.Module:
    return DLRM()


def dlrm_inputs(batch: int) -> tuple[torch.Tensor, ...]:
    """Dense features, one Zipf id per table per sample, click labels (seeded)."""
    gen = torch.Generator().manual_seed(0)
    sparse = torch.stack([zipf_ids(gen, n, batch) for n in CRITEO_KAGGLE_ROWS], dim=1)
    return (torch.rand(batch, DLRM_DENSE, generator=gen), sparse,
            (torch.rand(batch, generator=gen) < 0.25).float())


# -- MIND-style multi-interest model ---------------------------------------------------------

# items of the Taobao UserBehavior data set as preprocessed by ComiRec (Cen et al., KDD 2020)
MIND_ITEMS, MIND_DIM, MIND_HISTORY, MIND_INTERESTS, MIND_ROUTING, MIND_NEGATIVES = (
    1_708_530, 64, 50, 4, 3, 1024)


def _squash(z: torch.Tensor) -> torch.Tensor:
    norm2 = (z * z).sum(-1, keepdim=True)
    return norm2 / (1 + norm2) * z / torch.sqrt(norm2 + 1e-9)


class MultiInterest(nn.Module):
    """Behaviour-to-interest dynamic routing (shared bilinear map, 3 iterations, routing logits
    not learned), a ReLU MLP on each interest capsule, label-aware attention (power 2) and a
    sampled softmax over the target and shared negative items."""

    def __init__(self, items: int = MIND_ITEMS, dim: int = MIND_DIM) -> None:
        super().__init__()
        self.items = nn.Embedding(items, dim, sparse=True)
        self.bilinear = nn.Linear(dim, dim, bias=False)
        self.mlp = _mlp([dim, 4 * dim, dim], last_act=False)

    def forward(self, history: torch.Tensor, target: torch.Tensor,
                negatives: torch.Tensor) -> torch.Tensor:
        u_hat = self.bilinear(self.items(history))  # (B, L, d)
        logits = torch.zeros(history.shape[0], MIND_INTERESTS, history.shape[1],
                             device=history.device)
        u_fixed = u_hat.detach()
        for i in range(MIND_ROUTING):
            w = torch.softmax(logits, dim=1)
            last = i == MIND_ROUTING - 1
            caps = _squash(torch.bmm(w, u_hat if last else u_fixed))  # (B, K, d)
            if not last:
                logits = logits + torch.bmm(caps, u_fixed.transpose(1, 2))
        interests = self.mlp(caps) + caps
        t = self.items(target)  # (B, d)
        att = torch.softmax(torch.bmm(interests, t.unsqueeze(2)).squeeze(2).pow(2), dim=1)
        user = (att.unsqueeze(2) * interests).sum(1)  # (B, d)
        candidates = torch.cat([t, self.items(negatives)], dim=0)  # (B + N, d)
        scores = user @ candidates.t()
        labels = torch.arange(history.shape[0], device=history.device)
        return F.cross_entropy(scores, labels)


def multi_interest() -> nn.Module:
    return MultiInterest()


def mind_inputs(batch: int) -> tuple[torch.Tensor, ...]:
    """50 history items and a target per user, 1024 shared negatives (Zipf ids, seeded)."""
    gen = torch.Generator().manual_seed(0)
    return (zipf_ids(gen, MIND_ITEMS, batch, MIND_HISTORY), zipf_ids(gen, MIND_ITEMS, batch),
            zipf_ids(gen, MIND_ITEMS, MIND_NEGATIVES))
