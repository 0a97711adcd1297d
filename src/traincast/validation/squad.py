"""BERT fine-tuning on SQuAD v1.1 as the published throughputs ran it (``file.py:FUNC`` specs).

NVIDIA DeepLearningExamples ``PyTorch/LanguageModeling/BERT/scripts/run_squad.sh`` (the script
Lambda's benchmark calls): ``BertForQuestionAnswering`` (the encoder plus one 2-way linear span
head), ``--max_seq_length=384``, ``--doc_stride=128``, the batch per GPU given on the command
line. The encoders are BERT-base (12 layers, hidden 768, 12 heads, FFN 3072) and BERT-large (24
layers, 1024, 16 heads, 4096), 30,522-token uncased WordPiece vocabulary (Devlin et al. 2019):
the config fields of the shipped ``bert-base-uncased`` and ``bert-large-uncased`` checkpoints
(``traincast/zoo/hub.toml``), less their ``architectures``. The loss is the mean of the start
and end cross-entropies; inputs are seeded random token ids with start/end positions; attention
is the eager (unfused) implementation, as NVIDIA's BERT code runs it. The padding mask is passed
as an additive ``B x 1 x 1 x 384`` float mask (transformers checks a 2-D mask's values, which
meta tensors do not have): the masked add of the scores, one memory-bound op of B x heads x 384
x 384 per layer, is profiled as the GPU runs it. The model is built on the meta device (no
weights are allocated): it serves profiling only.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from traincast.errors import TraincastError
from traincast.zoo.hub import hub_entry

SEQ_LEN = 384  # run_squad.sh: --max_seq_length=384
CHECKPOINTS = {"base": "bert-base-uncased", "large": "bert-large-uncased"}


def config_fields(size: str) -> dict[str, Any]:
    """The BertConfig fields of the ``size`` encoder ("base" or "large"): its shipped
    checkpoint's config fields, less ``architectures`` (the head here is the span head)."""
    entry = hub_entry(CHECKPOINTS[size])
    if entry is None:
        raise TraincastError(f"hub.toml has no [config.\"{CHECKPOINTS[size]}\"]")
    return {k: v for k, v in entry["fields"].items() if k != "architectures"}


def _squad(size: str, batch_size: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    import transformers

    fields = config_fields(size)
    config = transformers.BertConfig(attn_implementation="eager", **fields)
    with torch.device("meta"):
        model = transformers.BertForQuestionAnswering(config)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, fields["vocab_size"], (batch_size, SEQ_LEN), generator=gen)
    types = torch.zeros_like(ids)
    start = torch.randint(0, SEQ_LEN, (batch_size,), generator=gen)
    end = torch.randint(0, SEQ_LEN, (batch_size,), generator=gen)
    return _Positional(model), (ids, types, start, end)


class _Positional(nn.Module):
    """Calls the transformers model with keywords; returns its loss."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, types: torch.Tensor, start: torch.Tensor,
                end: torch.Tensor) -> torch.Tensor:
        # run_squad.py passes the padding mask: an additive B x 1 x 1 x S bias on the scores
        # of every layer (one memory-bound add of B x heads x S x S per layer), given here as a
        # 4-D float mask, which transformers takes as is (a 2-D mask is checked by value).
        dtype = next(self.model.parameters()).dtype
        mask = torch.zeros(ids.shape[0], 1, 1, ids.shape[1], dtype=dtype, device=ids.device)
        out = self.model(input_ids=ids, token_type_ids=types, attention_mask=mask)
        return (F.cross_entropy(out.start_logits, start)
                + F.cross_entropy(out.end_logits, end)) / 2


def bert_base_squad(batch_size: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """(model, inputs) of BERT-base SQuAD fine-tuning, ``batch_size`` sequences of 384."""
    return _squad("base", batch_size)


def bert_large_squad(batch_size: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """(model, inputs) of BERT-large SQuAD fine-tuning, ``batch_size`` sequences of 384."""
    return _squad("large", batch_size)


def bert_base_squad_half(batch_size: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """BERT-base SQuAD as ``run_squad.py --fp16`` trains it: apex ``amp.initialize(...,
    opt_level="O2", keep_batchnorm_fp32=False)`` casts the whole model to fp16 (fp32 master
    weights live in the optimizer), so every op of the step runs and stores in fp16."""
    model, inputs = _squad("base", batch_size)
    return model.half(), inputs


def bert_large_squad_half(batch_size: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """BERT-large SQuAD under apex O2 (``bert_base_squad_half``)."""
    model, inputs = _squad("large", batch_size)
    return model.half(), inputs
