"""``hf:CONFIG`` models: a ``transformers`` model built from its config alone (never weights).

CONFIG is, in this order: a local ``config.json`` (or a folder holding one); a name in the local
Hugging Face cache; a Hub checkpoint of ``zoo/hub.toml`` (shipped with its source: works
without a network); a ``model_type`` known to transformers (``gpt2``, ``bert``, ``llama``, ...:
its default config). The model is built on the meta device. The head is picked from the
config's ``architectures`` when given, else the masked-LM head for model types that have one
(encoders), the causal-LM head, then the bare model. Inputs: ``batch`` sequences of
``min(512, max positions)`` token ids drawn uniformly from the vocabulary (seeded), with
``labels`` for language-model heads so the model returns its loss; vision configs
(``image_size``, ``num_channels``) get ``batch`` random images instead.

Zoo models known only by a decoder-only config (``[model.NAME.llm]`` of ``zoo/models.toml``:
GPT-3, Llama 2/3, the Megatron GPTs; not Mixtral, a mixture of experts) are built the same way
from the transformers config their fields describe (``config_from_llm``), at their training
sequence length (``llm_model``, called by ``traincast.zoo.ZooEntry.meta_model``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from traincast.errors import TraincastError
from traincast.features.profile import KeywordInputs
from traincast.zoo.hub import hub_entry

DEFAULT_BATCH = 8
MAX_SEQ = 512


def _shipped_config(name: str) -> Any | None:
    """The transformers config of a shipped checkpoint (None when ``name`` is not one)."""
    import transformers

    entry = hub_entry(name)
    if entry is None:
        return None
    if "zoo" in entry:
        from traincast.zoo import get_llm

        return config_from_llm(get_llm(entry["zoo"]))
    return transformers.AutoConfig.for_model(entry["model_type"], **entry.get("fields", {}))


def _short(exc: Exception) -> str:
    """The first line of an exception, at most 160 characters (transformers lists every
    model type it knows in some of its messages)."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."


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
            shipped = _shipped_config(name)
            return shipped if shipped is not None else transformers.AutoConfig.for_model(name)
    except (OSError, ValueError, KeyError) as exc:
        raise TraincastError(f"hf:{name}: no transformers config found ({_short(exc)})",
                             hint="give a config.json path or folder, a model name in the "
                                  "local Hugging Face cache, a shipped checkpoint (traincast "
                                  "zoo list --hf) or a model_type such as gpt2, bert, "
                                  "llama") from None


def config_from_llm(cfg: Any) -> Any:
    """The transformers config of a decoder-only zoo config (``traincast.zoo.llm.ModelConfig``):

    * SwiGLU, RMSNorm, rotary: ``LlamaConfig`` (``attention_bias``/``mlp_bias`` = bias);
    * GELU, LayerNorm, learned positions, biases, no grouped-query attention: ``GPT2Config``
      (``n_inner`` = ffn);

    each with hidden, layers, heads, kv heads, ffn, vocab, ``max_position_embeddings`` = seq
    and ``tie_word_embeddings`` = tied. Any other combination is an error naming the fields,
    and so is a mixture of experts (``experts > 1``): its routing depends on the data, which
    the meta device does not have."""
    import transformers

    common = {"vocab_size": cfg.vocab, "tie_word_embeddings": cfg.tied}
    rope = cfg.mlp == "swiglu" and cfg.norm == "rmsnorm" and cfg.position == "rope"
    llama = {"hidden_size": cfg.hidden, "intermediate_size": cfg.ffn,
             "num_hidden_layers": cfg.layers, "num_attention_heads": cfg.heads,
             "num_key_value_heads": cfg.kv, "max_position_embeddings": cfg.seq, **common}
    if cfg.experts > 1:
        raise TraincastError(
            f"zoo:{cfg.name}: a mixture-of-experts model has no torch module and is not "
            "built from its config (which expert each token takes is decided by the data, "
            "which the meta device does not have)",
            hint=f"plan and predict --arch hybrid price zoo:{cfg.name} from its config "
                 "(experts, top_k)")
    if rope:
        return transformers.LlamaConfig(attention_bias=cfg.bias, mlp_bias=cfg.bias, **llama)
    if (cfg.mlp, cfg.norm, cfg.position, cfg.bias, cfg.kv, cfg.experts) == \
            ("gelu", "layernorm", "learned", True, cfg.heads, 1):
        return transformers.GPT2Config(n_embd=cfg.hidden, n_layer=cfg.layers, n_head=cfg.heads,
                                       n_inner=cfg.ffn, n_positions=cfg.seq, **common)
    raise TraincastError(
        f"zoo:{cfg.name}: no transformers model for mlp={cfg.mlp}, norm={cfg.norm}, "
        f"position={cfg.position}, bias={cfg.bias}, kv_heads={cfg.kv}, experts={cfg.experts}",
        hint="supported: swiglu + rmsnorm + rope (Llama) or gelu + "
             "layernorm + learned positions with biases (GPT-2)")


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
    if getattr(config, "is_encoder_decoder", False):
        lm_heads.insert(0, transformers.AutoModelForSeq2SeqLM)  # T5, BART: labels -> loss
        if getattr(config, "decoder_start_token_id", None) is None:
            # the decoder's first input token: T5's convention, the padding token
            config.decoder_start_token_id = getattr(config, "pad_token_id", None) or 0
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


def hf_inputs(config: Any, batch: int, with_labels: bool,
              seq: int | None = None) -> tuple[tuple, tuple[str, ...]]:
    """Seeded inputs for a transformers config and the keyword each one binds to; ``seq``
    tokens per sequence (default ``min(512, max positions)``)."""
    gen = torch.Generator().manual_seed(0)
    if hasattr(config, "image_size") and hasattr(config, "num_channels"):
        size = config.image_size if isinstance(config.image_size, int) else config.image_size[0]
        return (torch.randn(batch, config.num_channels, size, size, generator=gen),), \
            ("pixel_values",)
    positions = (getattr(config, "max_position_embeddings", None)
                 or getattr(config, "n_positions", None) or MAX_SEQ)
    seq = seq or min(MAX_SEQ, int(positions))
    ids = torch.randint(0, int(config.vocab_size), (batch, seq), generator=gen)
    if with_labels:
        return (ids, ids.clone()), ("input_ids", "labels")
    return (ids,), ("input_ids",)


def model_from_config(config: Any, batch: int,
                      seq: int | None = None) -> tuple[nn.Module, tuple]:
    """(model on meta taking positional inputs, seeded inputs) of a transformers config."""
    model = _build(config)
    head = type(model).__name__
    with_labels = head.endswith(("ForCausalLM", "ForMaskedLM", "LMHeadModel",
                                 "ForConditionalGeneration"))
    inputs, keys = hf_inputs(config, batch, with_labels, seq)
    return KeywordInputs(model, keys), inputs


def hf_model(name: str, batch_size: int | None) -> tuple[nn.Module, tuple, str, None]:
    """(model, inputs, label, rebuild) for ``hf:NAME``; the model lives on meta."""
    model, inputs = model_from_config(_config(name), batch_size or DEFAULT_BATCH)
    return model, inputs, f"hf:{name}", None


def llm_model(cfg: Any, batch_size: int | None) -> tuple[nn.Module, tuple]:
    """(model, inputs) of a decoder-only zoo config on meta: ``batch_size`` (default 1)
    sequences of the config's training length ``seq``."""
    return model_from_config(config_from_llm(cfg), batch_size or 1, cfg.seq)
