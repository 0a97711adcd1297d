"""Two-layer GCN (Kipf & Welling 2017) on a Reddit-sized graph, in plain torch.nn.

The sparse normalized adjacency  = D^-1/2 (A + I) D^-1/2 is an edge list (source and
destination node ids, int64) with one weight per edge; multiplying it by node features is one
fused operator, ``traincast::spmm`` (a CSR/COO SpMM as cuSPARSE runs it): it reads the edge list,
the edge weights and the input rows, and writes the output rows, never storing per-edge
messages. Its FLOPs are 2·E·F (one multiply-add per edge and feature), and it is memory-bound.
The backward of Â·X is Âᵀ·dY, the same operator with sources and destinations swapped.

On meta, the edge list is shape-only: 114,615,892 edges of the Reddit graph as distributed by
PyG (self-loops added: + 232,965). ``--batch N`` profiles an N-node subgraph with the same
average degree (Cluster-GCN style); the default is the full graph. The graph stays in GPU memory
across iterations, so the step copies no input.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from traincast.errors import TraincastError
from traincast.features.ops import register_op

NODES, EDGES, FEATURES, CLASSES, HIDDEN = 232_965, 114_615_892, 602, 41, 128


@torch.library.custom_op("traincast::spmm", mutates_args=())
def spmm(src: torch.Tensor, dst: torch.Tensor, weight: torch.Tensor, x: torch.Tensor,
         nodes: int) -> torch.Tensor:
    """out[dst] += weight * x[src] over the edges: sparse (nodes x rows(x)) @ dense."""
    out = x.new_zeros(nodes, x.shape[1])
    return out.index_add_(0, dst, x.index_select(0, src) * weight[:, None])


@spmm.register_fake
def _spmm_fake(src: torch.Tensor, dst: torch.Tensor, weight: torch.Tensor, x: torch.Tensor,
               nodes: int) -> torch.Tensor:
    return x.new_empty(nodes, x.shape[1])


def _spmm_setup(ctx: object, inputs: tuple, output: torch.Tensor) -> None:
    src, dst, weight, x, _ = inputs
    ctx.save_for_backward(src, dst, weight)  # type: ignore[attr-defined]
    ctx.rows = x.shape[0]  # type: ignore[attr-defined]


def _spmm_grad(ctx: object, grad: torch.Tensor) -> tuple:
    src, dst, weight = ctx.saved_tensors  # type: ignore[attr-defined]
    return None, None, None, spmm(dst, src, weight, grad.contiguous(),
                                  ctx.rows), None  # type: ignore[attr-defined]


spmm.register_autograd(_spmm_grad, setup_context=_spmm_setup)
register_op("traincast::spmm", family="sparse", compute_bound=False, raw=True,
            flops=lambda src, dst, weight, x, nodes: 2 * src.numel() * x.shape[1])


class GCN(nn.Module):
    """Â·relu(Â·X·W1)·W2 with dropout 0.5, cross-entropy on the training nodes' labels."""

    def __init__(self) -> None:
        super().__init__()
        self.layer1 = nn.Linear(FEATURES, HIDDEN)
        self.layer2 = nn.Linear(HIDDEN, CLASSES)

    def forward(self, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor,
                weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        h = F.relu(spmm(src, dst, weight, self.layer1(F.dropout(x, 0.5)), n))
        out = spmm(src, dst, weight, self.layer2(F.dropout(h, 0.5)), n)
        return F.cross_entropy(out, labels)


def gcn() -> nn.Module:
    return GCN()


def gcn_inputs(nodes: int) -> tuple[torch.Tensor, ...]:
    """Features, edge list with self-loops and weights, labels of an ``nodes``-node graph.

    The full graph's edge list (1.8 GB of ids) is shape-only (meta); a small subgraph (at most
    1M edges, for the CPU fallback and tests) gets seeded random edges. A subgraph is at most
    the whole graph: more nodes is an error.
    """
    if nodes > NODES:
        raise TraincastError(f"zoo:gcn --batch {nodes:,}: the Reddit graph has {NODES:,} nodes, "
                             "and --batch N profiles an N-node subgraph of it",
                             hint=f"--batch at most {NODES:,}; leave it out for the whole graph")
    edges = round(EDGES * nodes / NODES) + nodes
    gen = torch.Generator().manual_seed(0)
    if edges > 1_000_000:
        meta = torch.device("meta")
        ids = torch.empty(edges, dtype=torch.long, device=meta)
        return (torch.empty(nodes, FEATURES, device=meta), ids, torch.empty_like(ids),
                torch.empty(edges, device=meta),
                torch.empty(nodes, dtype=torch.long, device=meta))
    src = torch.randint(0, nodes, (edges,), generator=gen)
    dst = torch.randint(0, nodes, (edges,), generator=gen)
    return (torch.randn(nodes, FEATURES, generator=gen), src, dst,
            torch.rand(edges, generator=gen), torch.randint(0, CLASSES, (nodes,), generator=gen))
