"""Language models in plain torch.nn: Transformer-base NMT, BERT, GPT-2, LLaMA-7B.

Layouts follow the published models (and Hugging Face's modules where those define the count):
post-LN encoder-decoder (Vaswani et al.), post-LN BERT with pooler and pre-training heads,
pre-LN GPT-2 with tied output embedding, LLaMA with RMSNorm, rotary embeddings and SwiGLU.
Token ids are drawn uniformly from the vocabulary with a fixed seed; each inputs function takes
``seq``, the tokens per sequence (default the model's own).

Attention runs through ``F.scaled_dot_product_attention`` (``attention_impl = "sdpa"``, the
default) or, with ``attention_impl = "eager"`` on a layer (``traincast.zoo.registry`` sets it
for ``--attention eager``), as its parts: the scores ``q k^T`` (one batched matrix product),
the scale, a causal mask where the layer is causal, the softmax and the product with ``v``.
Neither has dropout on the attention probabilities (these models' sdpa calls take none).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from traincast.zoo.vision import Attention, PreLNBlock


def _ids(gen: torch.Generator, vocab: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=gen)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
           impl: str) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) [+ causal mask]) v: one fused kernel (``sdpa``) or its parts
    (``eager``: matmul, scale, mask, softmax, matmul)."""
    if impl == "sdpa":
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    scores = torch.matmul(q, k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    if causal:
        t, s = scores.shape[-2:]
        mask = torch.ones(t, s, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


class SelfAttention(Attention):
    """``traincast.zoo.vision.Attention`` (the same weights) whose kernels ``attention_impl``
    picks (``attend``)."""

    attention_impl = "sdpa"

    def forward(self, x: torch.Tensor, causal: bool = False) -> torch.Tensor:
        if self.attention_impl == "sdpa":
            return super().forward(x, causal)
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(
            2, 0, 3, 1, 4).unbind(0)
        out = attend(q, k, v, causal, self.attention_impl)
        return self.proj(out.transpose(1, 2).reshape(b, t, d))


# -- Transformer-base (Vaswani et al. 2017) ------------------------------------------------------

NMT_VOCAB, NMT_LEN = 37_000, 32


class CrossAttention(nn.Module):
    attention_impl = "sdpa"

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.heads
        q = self.q(x).view(b, t, h, d // h).transpose(1, 2)
        k, v = self.kv(memory).view(b, memory.shape[1], 2, h, d // h).permute(2, 0, 3, 1,
                                                                           4).unbind(0)
        out = attend(q, k, v, False, self.attention_impl)
        return self.proj(out.transpose(1, 2).reshape(b, t, d))


class PostLNLayer(nn.Module):
    """x = ln(x + attn(x)); [x = ln(x + cross(x, memory))]; x = ln(x + ffn(x))."""

    def __init__(self, dim: int, heads: int, hidden: int, cross: bool = False,
                 causal: bool = False, act: str = "relu", eps: float = 1e-5) -> None:
        super().__init__()
        self.attn = SelfAttention(dim, heads)
        self.ln_1 = nn.LayerNorm(dim, eps=eps)
        self.cross = CrossAttention(dim, heads) if cross else None
        self.ln_c = nn.LayerNorm(dim, eps=eps) if cross else None
        self.fc = nn.Linear(dim, hidden)
        self.proj = nn.Linear(hidden, dim)
        self.ln_2 = nn.LayerNorm(dim, eps=eps)
        self.act = act
        self.causal = causal
        self.dropout = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None) -> torch.Tensor:
        x = self.ln_1(x + self.dropout(self.attn(x, self.causal)))
        if self.cross is not None and self.ln_c is not None:
            x = self.ln_c(x + self.dropout(self.cross(x, memory)))
        h = F.relu(self.fc(x)) if self.act == "relu" else F.gelu(self.fc(x))
        return self.ln_2(x + self.dropout(self.proj(h)))


def _sinusoid(length: int, dim: int) -> torch.Tensor:
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    inv = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-9.210340371976184 / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(pos * inv)
    table[:, 1::2] = torch.cos(pos * inv)
    return table


class TransformerNMT(nn.Module):
    """Transformer-base: 6+6 layers, d=512, 8 heads, FFN 2048; one embedding shared by source,
    target and the output projection; label-smoothed (0.1) cross-entropy."""

    def __init__(self, vocab: int = NMT_VOCAB, dim: int = 512, layers: int = 6, heads: int = 8,
                 hidden: int = 2048, max_len: int = 1024) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.register_buffer("pos", _sinusoid(max_len, dim), persistent=False)
        self.encoder = nn.ModuleList(PostLNLayer(dim, heads, hidden) for _ in range(layers))
        self.decoder = nn.ModuleList(PostLNLayer(dim, heads, hidden, cross=True, causal=True)
                                     for _ in range(layers))
        self.scale = dim ** 0.5

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embed(ids) * self.scale + self.pos[: ids.shape[1]]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor,
                tgt_out: torch.Tensor) -> torch.Tensor:
        memory = self._embed(src)
        for layer in self.encoder:
            memory = layer(memory)
        x = self._embed(tgt_in)
        for layer in self.decoder:
            x = layer(x, memory)
        logits = F.linear(x, self.embed.weight)
        return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), label_smoothing=0.1)


def transformer_nmt() -> nn.Module:
    return TransformerNMT()


def nmt_inputs(batch: int, seq: int = NMT_LEN) -> tuple[torch.Tensor, ...]:
    """``batch`` sentence pairs of ``seq`` source and ``seq`` target tokens (default 32: the
    WMT average is ~27)."""
    gen = torch.Generator().manual_seed(0)
    tgt = _ids(gen, NMT_VOCAB, batch, seq + 1)
    return _ids(gen, NMT_VOCAB, batch, seq), tgt[:, :-1].contiguous(), \
        tgt[:, 1:].contiguous()


# -- BERT (Devlin et al. 2019) -------------------------------------------------------------------

BERT_VOCAB, BERT_LEN, BERT_POSITIONS = 30_522, 128, 512


class Bert(nn.Module):
    """BERT pre-training: embeddings, post-LN encoder, pooler, MLM head (tied decoder) + NSP."""

    def __init__(self, dim: int, layers: int, heads: int) -> None:
        super().__init__()
        self.word = nn.Embedding(BERT_VOCAB, dim)
        self.position = nn.Embedding(BERT_POSITIONS, dim)
        self.token_type = nn.Embedding(2, dim)
        self.ln = nn.LayerNorm(dim, eps=1e-12)
        self.layers = nn.ModuleList(PostLNLayer(dim, heads, 4 * dim, act="gelu", eps=1e-12)
                                    for _ in range(layers))
        self.pooler = nn.Linear(dim, dim)
        self.mlm_transform = nn.Linear(dim, dim)
        self.mlm_ln = nn.LayerNorm(dim, eps=1e-12)
        self.mlm_bias = nn.Parameter(torch.zeros(BERT_VOCAB))
        self.nsp = nn.Linear(dim, 2)
        self.dropout = nn.Dropout(0.1)

    def forward(self, ids: torch.Tensor, token_type: torch.Tensor, mlm_labels: torch.Tensor,
                nsp_labels: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.word(ids) + self.position(positions) + self.token_type(token_type)
        x = self.dropout(self.ln(x))
        for layer in self.layers:
            x = layer(x)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        h = self.mlm_ln(F.gelu(self.mlm_transform(x)))
        logits = F.linear(h, self.word.weight, self.mlm_bias)
        mlm = F.cross_entropy(logits.flatten(0, 1), mlm_labels.flatten(), ignore_index=-100)
        return mlm + F.cross_entropy(self.nsp(pooled), nsp_labels)


def bert_base() -> nn.Module:
    return Bert(768, 12, 12)


def bert_large() -> nn.Module:
    return Bert(1024, 24, 16)


def bert_inputs(batch: int, seq: int = BERT_LEN) -> tuple[torch.Tensor, ...]:
    """Sentence pairs of ``seq`` tokens (default 128; the second sentence is the second half);
    15% of positions carry an MLM label, the rest -100."""
    gen = torch.Generator().manual_seed(0)
    ids = _ids(gen, BERT_VOCAB, batch, seq)
    token_type = (torch.arange(seq) >= seq // 2).long().expand(batch, -1).contiguous()
    masked = torch.rand(batch, seq, generator=gen) < 0.15
    labels = torch.where(masked, ids, torch.full_like(ids, -100))
    return ids, token_type, labels, _ids(gen, 2, batch)


# -- GPT-2 (Radford et al. 2019) -----------------------------------------------------------------

GPT2_VOCAB, GPT2_CONTEXT = 50_257, 1024


class GPT2(nn.Module):
    def __init__(self, dim: int, layers: int, heads: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(GPT2_VOCAB, dim)
        self.wpe = nn.Embedding(GPT2_CONTEXT, dim)
        self.blocks = nn.ModuleList(PreLNBlock(dim, heads, 4 * dim, gelu="tanh", causal=True,
                                               eps=1e-5) for _ in range(layers))
        for block in self.blocks:  # the same weights, kernels picked by attention_impl
            block.attn = SelfAttention(dim, heads)
        self.ln_f = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(0.1)

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.dropout(self.wte(ids) + self.wpe(positions))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # output projection tied to wte
        return F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())


def gpt2() -> nn.Module:
    return GPT2(768, 12, 12)


def gpt2_xl() -> nn.Module:
    return GPT2(1600, 48, 25)


def gpt2_inputs(batch: int, seq: int = GPT2_CONTEXT) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` sequences of ``seq`` tokens (default the context, 1024), labels = ids."""
    gen = torch.Generator().manual_seed(0)
    ids = _ids(gen, GPT2_VOCAB, batch, seq)
    return ids, ids


# -- LLaMA-7B (Touvron et al. 2023) --------------------------------------------------------------

LLAMA_VOCAB, LLAMA_CONTEXT = 32_000, 2048


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-b, a), dim=-1) * sin


class LlamaBlock(nn.Module):
    attention_impl = "sdpa"

    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.heads = heads
        self.attn_norm = RMSNorm(dim)
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.mlp_norm = RMSNorm(dim)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.attn_norm(x)
        q, k, v = (proj(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for proj in (self.q, self.k, self.v))
        out = attend(_rotate(q, cos, sin), _rotate(k, cos, sin), v, True, self.attention_impl)
        x = x + self.o(out.transpose(1, 2).reshape(b, t, d))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, dim: int = 4096, layers: int = 32, heads: int = 32,
                 hidden: int = 11_008) -> None:
        super().__init__()
        self.embed = nn.Embedding(LLAMA_VOCAB, dim)
        self.blocks = nn.ModuleList(LlamaBlock(dim, heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, LLAMA_VOCAB, bias=False)
        self.head_dim = dim // heads

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        inv = 1.0 / (10_000 ** (torch.arange(0, self.head_dim, 2, device=ids.device,
                                             dtype=torch.float32) / self.head_dim))
        angles = torch.outer(torch.arange(t, device=ids.device, dtype=torch.float32), inv)
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos(), angles.sin()
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())


def llama_7b() -> nn.Module:
    return Llama()


def llama_inputs(batch: int, seq: int = LLAMA_CONTEXT) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` sequences of ``seq`` tokens (default the context, 2048), labels = ids."""
    gen = torch.Generator().manual_seed(0)
    ids = _ids(gen, LLAMA_VOCAB, batch, seq)
    return ids, ids


def llama2_inputs(batch: int, seq: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama 2 trains at context 4096 (Touvron et al. 2023b); the 7B model is LLaMA-7B's shape."""
    return llama_inputs(batch, seq)
