"""``hf:CONFIG`` models: a ``transformers`` model built from its config alone (never weights).

CONFIG is a local ``config.json`` (or a folder holding one), a name already in the local
Hugging Face cache, or a ``model_type`` known to transformers (``gpt2``, ``bert``, ``llama``,
...: its default config). The model is built on the meta device. The head is picked from the
config's ``architectures`` when given, else the masked-LM head for model types that have one
(encoders), the causal-LM head, then the bare model. Inputs:
``batch`` sequences of ``min(512, max positions)`` token ids drawn uniformly from the
vocabulary (seeded), with ``labels`` for language-model heads so the model returns its loss;
vision configs (``image_size``, ``num_channels``) get ``batch`` random images instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from traincast.errors import TraincastError
from traincast.features.profile import KeywordInputs

DEFAULT_BATCH = 8
MAX_SEQ = 512


def _config(name: str) -> Any:
    import transformers

    path = Path(name)
    try:
        if path.is_file():
            return transformers.AutoConfig.from_pretrained(str(path.parent)) \
                if path.name == "config.json" else transformers.AutoConfig.from_json_file(path)
        if path.is_dir():
            return transformers.AutoConfig.from_pretrained(str(path))
        try:
            return transformers.AutoConfig.from_pretrained(name, local_files_only=True)
        except (OSError, ValueError):
            return transformers.AutoConfig.for_model(name)
    except (OSError, ValueError, KeyError) as exc:
        raise TraincastError(f"hf:{name}: no transformers config found ({exc})",
                             hint="give a config.json path, a cached model name, or a "
                                  "model_type such as gpt2, bert, llama") from None


def _build(config: Any) -> nn.Module:
    import transformers

    candidates = []
    for arch in getattr(config, "architectures", None) or []:
        cls = getattr(transformers, arch, None)
        if cls is not None:
            candidates.append(cls)
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    lm_heads = [transformers.AutoModelForCausalLM, transformers.AutoModelForMaskedLM]
    if getattr(config, "model_type", "") in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        lm_heads.reverse()  # encoders (BERT, RoBERTa, ...) train a masked-LM head
    candidates += [*lm_heads, transformers.AutoModel]
    errors = []
    with torch.device("meta"):
        for cls in candidates:
            try:
                build = cls._from_config if hasattr(cls, "_from_config") else cls.from_config
                return build(config)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                errors.append(f"{getattr(cls, '__name__', cls)}: {exc}")
    raise TraincastError(f"no transformers model class builds this config ({errors[-1]})")


def hf_inputs(config: Any, batch: int, with_labels: bool) -> tuple[tuple, tuple[str, ...]]:
    """Seeded inputs for a transformers config and the keyword each one binds to."""
    gen = torch.Generator().manual_seed(0)
    if hasattr(config, "image_size") and hasattr(config, "num_channels"):
        size = config.image_size if isinstance(config.image_size, int) else config.image_size[0]
        return (torch.randn(batch, config.num_channels, size, size, generator=gen),), \
            ("pixel_values",)
    positions = (getattr(config, "max_position_embeddings", None)
                 or getattr(config, "n_positions", None) or MAX_SEQ)
    seq = min(MAX_SEQ, int(positions))
    ids = torch.randint(0, int(config.vocab_size), (batch, seq), generator=gen)
    if with_labels:
        return (ids, ids.clone()), ("input_ids", "labels")
    return (ids,), ("input_ids",)


def hf_model(name: str, batch_size: int | None) -> tuple[nn.Module, tuple, str, None]:
    """(model, inputs, label, rebuild) for ``hf:NAME``; the model lives on meta."""
    config = _config(name)
    model = _build(config)
    head = type(model).__name__
    with_labels = head.endswith(("ForCausalLM", "ForMaskedLM", "LMHeadModel"))
    inputs, keys = hf_inputs(config, batch_size or DEFAULT_BATCH, with_labels)
    return KeywordInputs(model, keys), inputs, f"hf:{name}", None
