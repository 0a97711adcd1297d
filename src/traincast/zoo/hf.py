"""``hf:CONFIG`` models: a ``transformers`` model built from its config alone (never weights).

CONFIG is, in this order: a local ``config.json`` (or a folder holding one); a name in the local
Hugging Face cache; a Hub checkpoint of ``zoo/hub.toml`` (shipped with its source: works
without a network); a ``model_type`` known to transformers (``gpt2``, ``bert``, ``llama``, ...:
its default config). The model is built on the meta device. The head is picked from the
config's ``architectures`` when given, else the masked-LM head for model types that have one
(encoders), the causal-LM head, then the bare model. Inputs (seeded): what the model's
``forward`` takes (``hf_inputs``): token ids, images, raw audio or log-mel frames, with
``labels`` for language-model and classification heads so the model returns its loss.

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

from traincast.errors import TraincastError, clip, close_names
from traincast.features.profile import KeywordInputs
from traincast.zoo.hub import hub_entry, local_config

DEFAULT_BATCH = 8
MAX_SEQ = 512
PADDED_POSITION_TYPES = frozenset({
    "roberta", "roberta-prelayernorm", "xlm-roberta", "xlm-roberta-xl", "camembert",
    "data2vec-text", "esm", "ibert", "layoutlmv3", "lilt", "longformer", "luke", "markuplm",
    "mpnet", "xmod", "altclip_text_model", "bridgetower_text_model", "clap_text_model"})
"""Text models whose learned position table starts after the padding id (transformers'
``create_position_ids_from_input_ids``: position ``pad_token_id + 1`` is the first token's),
so ``max_position_embeddings - pad_token_id - 1`` tokens fit (RoBERTa: 514 rows, 512 tokens)."""
POSITION_KEYS = ("n_positions", "max_encoder_position_embeddings",
                 "max_decoder_position_embeddings")
"""Further limits of a text config's tokens beside ``max_position_embeddings`` (GPT-2's; LED's
encoder and decoder tables, both of which a sequence-to-sequence step's tokens pass through)."""


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
    return clip(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 160)


def _config(name: str) -> tuple[Any, bool]:
    """``(config, default)`` of ``hf:NAME`` (resolution order: module docstring of
    ``zoo/hub.toml``); ``default``: NAME is a bare transformers ``model_type`` and the config
    is transformers' default for it, not a released checkpoint's."""
    import transformers

    if not name.strip():
        raise TraincastError("hf: needs a name after it",
                             hint="hf:CONFIG.json, hf:FOLDER, a Hub name (traincast zoo list "
                                  "--hf) or a model_type such as gpt2, bert, llama")
    path = local_config(name)
    local = path is not None
    try:
        if local:  # a folder, or a config file of any name (its model_type)
            return transformers.AutoConfig.from_pretrained(str(path)), False
        try:
            return transformers.AutoConfig.from_pretrained(name, local_files_only=True), False
        except (OSError, ValueError):
            shipped = _shipped_config(name)
            if shipped is not None:
                return shipped, False
            return transformers.AutoConfig.for_model(name), True
    except TraincastError:
        raise  # a shipped checkpoint's own reason (a mixture of experts), whole
    except (OSError, ValueError, KeyError, AttributeError, TypeError) as exc:
        unknown = not local and ("/" in name
                                         or name not in transformers.CONFIG_MAPPING)
        raise TraincastError(
            f"hf:{name}: " + (("not a checkpoint shipped for offline use nor one in the local "
                               "Hugging Face cache" if "/" in name else
                               "not a transformers model_type, a shipped checkpoint or a model "
                               "in the local Hugging Face cache") + _did_you_mean(name)
                              if unknown else f"no transformers config found ({_short(exc)})"),
            hint="give a config.json path or folder (the checkpoint's config.json), a model "
                 "name in the local Hugging Face cache, a shipped checkpoint (traincast zoo "
                 "list --hf) or a model_type such as gpt2, bert, llama") from None
    except _strict_dataclass_error() as exc:  # huggingface_hub's check of a field's type
        raise TraincastError(f"hf:{name}: {path if local else 'its config'}: "
                             f"{' '.join(str(exc).split())}",
                             hint="a field of the config has a value of the wrong type: "
                                  "write it as the checkpoint's config.json does") from None


def _strict_dataclass_error() -> type[Exception] | tuple[()]:
    """huggingface_hub's error for a config field of the wrong type (``StrictDataclassError``,
    from huggingface_hub 0.34 on; none before: an empty tuple, which catches nothing)."""
    import huggingface_hub.errors as hub_errors

    return getattr(hub_errors, "StrictDataclassError", ())


def _did_you_mean(name: str) -> str:
    """``"; did you mean hf:A, zoo:B?"``: the shipped checkpoints (each under its own name,
    found by any alias or by the part after its owner), transformers model types and zoo
    models whose names begin with ``name`` or are closest to it (at most four); empty when
    none is close."""
    import transformers

    from traincast.zoo import MODELS
    from traincast.zoo.hub import load_hub

    shown = {t.lower(): f"hf:{t}" for t in transformers.CONFIG_MAPPING.keys()}
    for alias, canonical in load_hub()["names"].items():
        shown[alias] = shown[alias.split("/")[-1]] = f"hf:{canonical}"
    shown |= {n.lower(): f"zoo:{n}" for n in MODELS}
    key = name.strip().lower()
    close = sorted(c for c in shown if key and c.startswith(key))[:3] + close_names(
        key, list(shown), 3, cutoff=0.75)
    named = list(dict.fromkeys(shown[c] for c in close))[:4]
    return f"; did you mean {', '.join(named)}?" if named else ""


def config_beside(name: str, base_dir: str | Path) -> str:
    """``name`` as a path under ``base_dir`` when it names a config there (a ``.json`` file, or
    a folder holding ``config.json``), else ``name`` unchanged (a Hub name, a model type): how a
    rows file finds a config beside it without hiding a Hub name behind a folder of that name."""
    path = Path(base_dir) / Path(name).expanduser()
    if (path.is_file() and path.suffix == ".json") or (path / "config.json").is_file():
        return str(path)
    return name


def config_from_llm(cfg: Any) -> Any:
    """The transformers config of a decoder-only zoo config (``traincast.zoo.llm.ModelConfig``):

    * SwiGLU, RMSNorm, rotary: ``LlamaConfig`` (``attention_bias``/``mlp_bias`` = bias);
    * GELU, LayerNorm, learned positions, biases, no grouped-query attention: ``GPT2Config``
      (``n_inner`` = ffn);

    * a mixture of experts (``experts > 1``) of SwiGLU, RMSNorm and rotary without biases:
      ``MixtralConfig`` (``num_local_experts`` = experts, ``num_experts_per_tok`` = top_k,
      each expert ffn wide; its grouped expert products profile on meta,
      ``features.meta_kernels``);

    each with hidden, layers, heads, kv heads, ffn, vocab, ``max_position_embeddings`` = seq
    and ``tie_word_embeddings`` = tied. Any other combination is an error naming the fields."""
    import transformers

    from traincast.zoo.llm import transformers_family

    if cfg.projection_params:
        raise TraincastError(
            f"zoo:{cfg.name}: embed_dim = {cfg.embed_dim} (a token embedding narrower than the "
            f"layers' {cfg.hidden}, projected in and out) builds no zoo profile",
            hint="give its Hugging Face config instead (hf:facebook/opt-350m, or a folder with "
                 "its config.json)")
    family = transformers_family(cfg)
    common = {"vocab_size": cfg.vocab, "tie_word_embeddings": cfg.tied}
    llama = {"hidden_size": cfg.hidden, "intermediate_size": cfg.ffn,
             "num_hidden_layers": cfg.layers, "num_attention_heads": cfg.heads,
             "num_key_value_heads": cfg.kv, "head_dim": cfg.head_size,
             "max_position_embeddings": cfg.positions, **common}
    if family == "mixtral":
        return transformers.MixtralConfig(num_local_experts=cfg.experts,
                                          num_experts_per_tok=cfg.top_k, **llama)
    if family == "llama":
        return transformers.LlamaConfig(attention_bias=cfg.bias, mlp_bias=cfg.bias, **llama)
    if family == "gpt2":
        return transformers.GPT2Config(n_embd=cfg.hidden, n_layer=cfg.layers, n_head=cfg.heads,
                                       n_inner=cfg.ffn, n_positions=cfg.positions, **common)
    raise TraincastError(
        f"zoo:{cfg.name}: no transformers model for mlp={cfg.mlp}, norm={cfg.norm}, "
        f"position={cfg.position}, bias={cfg.bias}, kv_heads={cfg.kv}, experts={cfg.experts}",
        hint="supported: swiglu + rmsnorm + rope (Llama; with experts and no biases, "
             "Mixtral) or gelu + layernorm + learned positions with biases (GPT-2)")


FUNC_HINT = "profile it with FILE.py:FUNC building the model and its inputs yourself"
"""What to do about a config traincast cannot build a model or its inputs from."""


def saved_dtype(config: Any) -> str | None:
    """The dtypes a checkpoint's config says its weights were saved in (``torch_dtype``,
    ``dtype`` in transformers 5: ``float16``, ``bfloat16``), taken off the config and its
    sub-configs at every depth (a vision-language model's ``text_config``, ...): transformers
    builds a model in them, and a training step keeps its weights, gradients and optimizer
    state in fp32 (mixed precision computes in 16 bits over them). None where they say none,
    ``float32`` or ``auto``; else the others, joined (``bfloat16 and float16``)."""
    said: list[str] = []
    stack = [config]
    while stack:
        cfg = stack.pop()
        for key in ("dtype", "torch_dtype"):  # (transformers 4 stores the second)
            if vars(cfg).get(key) is not None:
                said.append(str(vars(cfg)[key]).removeprefix("torch."))
                setattr(cfg, key, None)
        stack += [v for v in vars(cfg).values()
                  if type(v).__name__.endswith("Config") and hasattr(v, "__dict__")]
    kept = sorted({d for d in said if d not in ("float32", "auto")})
    return " and ".join(kept) or None


def _build(config: Any, attention: str | None = None, device: str = "meta") -> nn.Module:
    """The model of ``config`` on ``device`` (meta unless a measurement builds it for real; the
    head as the module docstring says), in fp32 (the config's saved dtype taken off,
    ``saved_dtype``), with transformers' ``attn_implementation`` = ``attention`` when given
    (``eager``, ``sdpa``); a model class that does not offer it is an error naming
    ``--attention``."""
    import transformers

    saved_dtype(config)

    candidates = []
    for arch in getattr(config, "architectures", None) or []:
        cls = getattr(transformers, arch, None)
        if cls is not None:
            candidates.append(cls)
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
        MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES,
    )

    lm_heads = [transformers.AutoModelForCausalLM, transformers.AutoModelForMaskedLM]
    if getattr(config, "model_type", "") in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        lm_heads.reverse()  # encoders (BERT, RoBERTa, ...) train a masked-LM head
    if getattr(config, "is_encoder_decoder", False):
        lm_heads.insert(0, transformers.AutoModelForSeq2SeqLM)  # T5, BART: labels -> loss
        if getattr(config, "model_type", "") in MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES:
            # Whisper, Moonshine: the audio encoder and its decoder (a causal-LM class would
            # build the decoder alone)
            lm_heads.insert(0, transformers.AutoModelForSpeechSeq2Seq)
        if getattr(config, "decoder_start_token_id", None) is None:
            # the decoder's first input token: T5's convention, the padding token
            config.decoder_start_token_id = getattr(config, "pad_token_id", None) or 0
        if getattr(config, "pad_token_id", None) is None:
            # shifting the labels into decoder inputs needs one (Moonshine's config has none);
            # which id it is costs nothing
            config.pad_token_id = config.decoder_start_token_id
    candidates += [*lm_heads, transformers.AutoModel]
    errors = []
    kwargs = {} if attention is None else {"attn_implementation": attention}
    with torch.device(device):
        for cls in candidates:
            try:
                build = cls._from_config if hasattr(cls, "_from_config") else cls.from_config
                return build(config, **kwargs)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                if attention is not None and _about_attention(exc):
                    raise TraincastError(
                        f"--attention {attention}: {getattr(cls, '__name__', cls)} does not "
                        f"offer it ({_short(exc)})",
                        hint="leave --attention out for the implementation transformers "
                             "picks, or try the other of eager and sdpa") from None
                errors.append(f"{getattr(cls, '__name__', cls)}: {exc}")
    raise TraincastError(f"no transformers model class builds this config ({errors[-1]})")


LAYERDROP_KEYS = ("layerdrop", "encoder_layerdrop", "decoder_layerdrop")
"""Config keys of LayerDrop (Fan et al., 2019): in a training step each layer is skipped with
that probability (wav2vec 2.0, HuBERT and WavLM default to 0.1, M2M-100 to 0.05)."""


def no_layerdrop(config: Any) -> dict[str, float]:
    """Set every LayerDrop probability of ``config`` (and of its sub-configs) above 0 to 0, and
    return ``{key: probability}`` of those set: one profiled step then runs, and prices, every
    layer, the same on every run (with LayerDrop ``p`` a step runs ``1 - p`` of them on
    average, a random draw each step)."""
    dropped: dict[str, float] = {}
    stack = [config]
    while stack:
        cfg = stack.pop()
        for key in LAYERDROP_KEYS:
            p = getattr(cfg, key, None)
            if isinstance(p, int | float) and not isinstance(p, bool) and p > 0:
                dropped[key] = float(p)
                setattr(cfg, key, 0.0)
        stack += [v for v in vars(cfg).values()
                  if type(v).__name__.endswith("Config") and hasattr(v, "__dict__")]
    return dropped


def _about_attention(exc: Exception) -> bool:
    """Whether transformers refused the attention implementation asked for."""
    text = str(exc).lower()
    return "attn_implementation" in text or "attention implementation" in text or \
        "scaled_dot_product_attention" in text


AUDIO_SECONDS = 10
SAMPLE_RATE_HZ = 16_000


def _text_config(config: Any) -> Any:
    """The text part of a config (CLIP's ``text_config``; the config itself otherwise)."""
    get = getattr(config, "get_text_config", None)
    return get() if callable(get) else config


def _tokens(config: Any, batch: int, seq: int | None, gen: torch.Generator,
            positions_key: str = "max_position_embeddings") -> torch.Tensor:
    text = _text_config(config)
    vocab = getattr(text, "vocab_size", None)
    if not vocab:
        raise TraincastError(f"{type(config).__name__}: no vocab_size to draw token ids from",
                             hint="give a config.json with vocab_size (or a text_config)")
    keys = (positions_key, *POSITION_KEYS) if positions_key == "max_position_embeddings" \
        else (positions_key,)
    if not getattr(text, "position_biased_input", True):  # DeBERTa-v2/v3: no table is
        keys = tuple(k for k in keys if k != "max_position_embeddings")  # added, relative only
    known = [(key, int(n)) for key in keys if isinstance(n := getattr(text, key, None), int)
             and not isinstance(n, bool) and n > 0]  # XLNet's -1: no limit
    pad = getattr(text, "pad_token_id", None)
    if getattr(text, "model_type", "") in PADDED_POSITION_TYPES and isinstance(pad, int) \
            and 0 <= pad:
        known = [(f"{key} less pad_token_id + 1" if key == "max_position_embeddings" else key,
                  n - pad - 1 if key == "max_position_embeddings" else n) for key, n in known]
    key, positions = min(known, key=lambda kn: kn[1]) if known else ("", MAX_SEQ)
    if positions < 1:  # a table no larger than the padding offset holds no token
        raise TraincastError(f"{type(text).__name__}: {key} leaves no position for a token "
                             f"({positions})", hint="a config.json whose max_position_embeddings "
                             "is over pad_token_id + 1")
    if seq is not None and known and seq > positions:
        raise TraincastError(f"--seq {seq} is over the {positions} positions of "
                             f"{type(text).__name__} ({key})",
                             hint=f"use --seq {positions} or less, or a config.json with a "
                                  f"larger {key.split()[0]}")
    seq = seq or min(MAX_SEQ, positions)
    return torch.randint(0, int(vocab), (batch, seq), generator=gen)


def _images(config: Any, batch: int, gen: torch.Generator) -> torch.Tensor:
    """``batch`` images of the vision config's ``num_channels`` (default 3) and
    ``image_size`` (default 224; a ``[height, width]`` pair for non-square images)."""
    vision = getattr(config, "vision_config", None) or config
    size = getattr(vision, "image_size", None) or 224
    height, width = (size, size) if isinstance(size, int) else (size[0], size[-1])
    channels = getattr(vision, "num_channels", None) or 3
    return torch.randn(batch, channels, int(height), int(width), generator=gen)


def _audio_features(config: Any, batch: int, gen: torch.Generator) -> torch.Tensor:
    """Log-mel frames as Whisper's encoder takes them: ``num_mel_bins`` x (2 x
    ``max_source_positions``) (its convolutions halve the frames: 3,000 frames = 30 s)."""
    mels = getattr(config, "num_mel_bins", None)
    frames = getattr(config, "max_source_positions", None)
    if not mels or not frames:
        raise TraincastError(f"{type(config).__name__}: input_features need num_mel_bins and "
                             "max_source_positions", hint="profile it with file.py:FUNC, "
                             "building the model and its inputs yourself")
    return torch.randn(batch, int(mels), 2 * int(frames), generator=gen)


def hf_inputs(config: Any, batch: int, labels: str | None, seq: int | None = None,
              params: tuple[str, ...] | None = None) -> tuple[tuple, tuple[str, ...]]:
    """Seeded inputs for a transformers config and the keyword each one binds to.

    ``params``: the names of the model's ``forward`` arguments; one input is built for each
    of: ``input_ids`` (``seq`` tokens, default ``min(512, max positions)`` of the text config),
    ``pixel_values`` (images of the vision config's ``image_size`` and ``num_channels``),
    ``input_values`` (``AUDIO_SECONDS`` of raw ``SAMPLE_RATE_HZ`` audio) and
    ``input_features`` (Whisper's log-mel frames). ``labels``: ``"tokens"`` (language-model
    heads: the input ids, or, for a decoder over speech, ``min(512, max_target_positions)``
    token ids), ``"classes"`` (classification heads: one of ``num_labels`` per sample, the token
    ids ending with ``eos_token_id``: ``_ending_with_eos``) or
    None. Without ``params``: token ids, or images for vision configs (``image_size`` and
    ``num_channels``).
    """
    gen = torch.Generator().manual_seed(0)
    if params is None:
        vision = hasattr(config, "image_size") and hasattr(config, "num_channels")
        params = ("pixel_values",) if vision else ("input_ids",)
    values: dict[str, torch.Tensor] = {}
    if "input_ids" in params:
        values["input_ids"] = _tokens(config, batch, seq, gen)
    if "pixel_values" in params:
        values["pixel_values"] = _images(config, batch, gen)
    if "input_values" in params:
        values["input_values"] = torch.randn(batch, AUDIO_SECONDS * SAMPLE_RATE_HZ, generator=gen)
    if "input_features" in params:
        values["input_features"] = _audio_features(config, batch, gen)
    if not values:
        raise TraincastError(f"{type(config).__name__}: no input traincast knows how to build "
                             f"among {', '.join(params[:6])}",
                             hint="profile it with file.py:FUNC, building the model and its "
                                  "inputs yourself")
    if labels == "classes":
        if "input_ids" in values:
            values["input_ids"] = _ending_with_eos(config, values["input_ids"])
        values["labels"] = torch.randint(0, int(config.num_labels), (batch,), generator=gen)
    elif labels == "tokens":
        values["labels"] = (values["input_ids"].clone() if "input_ids" in values else
                            _tokens(config, batch, seq, gen, "max_target_positions"))
    return tuple(values.values()), tuple(values)


def _eos_id(config: Any) -> int | None:
    """The text config's end-of-sequence token id (the first one when it lists several)."""
    eos = getattr(_text_config(config), "eos_token_id", None)
    eos = eos[0] if isinstance(eos, list | tuple) and eos else eos
    return eos if isinstance(eos, int) and eos >= 0 else None


def _ending_with_eos(config: Any, ids: torch.Tensor) -> torch.Tensor:
    """Token ids as a tokenizer gives a classifier: one end-of-sequence token, the last
    (BART's classification head pools the hidden state at it and needs one per sequence);
    an eos drawn elsewhere becomes the next id. Unchanged without an eos id."""
    eos = _eos_id(config)
    if eos is None:
        return ids
    vocab = int(_text_config(config).vocab_size)
    ids = torch.where(ids == eos, (ids + 1) % vocab, ids)
    ids[:, -1] = eos
    return ids


def _label_kind(head: str) -> str | None:
    """``"tokens"`` for language-model heads (causal, masked, sequence-to-sequence, speech to
    text: transformers' auto-class tables, which name MarianMTModel too), ``"classes"`` for
    classification heads, else None (the loss is the sum of the outputs)."""
    from transformers.models.auto import modeling_auto as auto

    def heads(*tables: str) -> set[str]:
        names: set[str] = set()
        for table in tables:
            for value in getattr(auto, table, {}).values():
                names.update(value if isinstance(value, list | tuple) else [value])
        return names

    if head in heads("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
                     "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
                     "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "MODEL_WITH_LM_HEAD_MAPPING_NAMES"
                     ) or head.endswith(("ForCausalLM", "ForMaskedLM", "LMHeadModel",
                                         "ForConditionalGeneration")):
        return "tokens"
    if head in heads("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
                     "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
                     "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"):
        return "classes"
    return None


def model_from_config(config: Any, batch: int, seq: int | None = None,
                      attention: str | None = None,
                      device: str = "meta") -> tuple[nn.Module, tuple]:
    """(model on ``device`` taking positional inputs, seeded inputs on the CPU) of a
    transformers config (``device``: meta, or cuda for ``scripts/measure_steps.py``): the
    inputs its ``forward`` takes (``hf_inputs``), with labels for heads that return a loss
    from them (language-model, sequence-to-sequence and classification heads) and
    ``return_loss`` for models that take it (CLIP's contrastive loss). ``seq``: tokens per
    sequence (an error for a model that takes no token ids); ``attention``: transformers'
    ``attn_implementation`` (``_build``)."""
    import inspect

    model = _build(config, attention, device)
    head = type(model).__name__
    params = tuple(inspect.signature(model.forward).parameters)
    labels = _label_kind(head) if "labels" in params else None
    if seq is not None and "input_ids" not in params and labels != "tokens":
        raise TraincastError(f"--seq applies to models that take token ids; {head} takes "
                             f"{', '.join(p for p in params[:3])}",
                             hint="leave --seq out: the inputs are sized by the config")
    inputs, keys = hf_inputs(config, batch, labels, seq, params)
    if labels == "classes" and getattr(model.config, "pad_token_id", 0) is None:
        # a decoder's classifier pools the last token before padding, and needs a pad id
        # for batches over 1; fine-tuning sets the eos token (GPT-2 and Llama have none)
        model.config.pad_token_id = _eos_id(config)
    constants = {"return_loss": True} if "return_loss" in params else {}
    return KeywordInputs(model, keys, constants), inputs


def hf_model(name: str, batch_size: int | None, seq: int | None = None,
             attention: str | None = None,
             device: str = "meta") -> tuple[nn.Module, tuple, str, tuple[str, ...]]:
    """(model, inputs, label, notes) for ``hf:NAME`` at ``seq`` tokens per sequence and
    attention implementation ``attention`` when given (``model_from_config``); the model
    lives on ``device`` (meta, or a GPU for ``scripts/measure_steps.py``), the inputs on the
    CPU. ``notes``: for a bare ``model_type``, that the sizes are transformers' default config
    for it (``hf:qwen2`` is no released Qwen2 checkpoint); for a model over audio frames
    (Whisper), that its sequence length is the decoder's tokens and what the encoder takes;
    for a config with LayerDrop, that every layer is priced (``no_layerdrop``)."""
    config, default = _config(name)
    saved = saved_dtype(config)
    dropped = no_layerdrop(config)
    try:
        model, inputs = model_from_config(config, batch_size or DEFAULT_BATCH, seq, attention,
                                          device)
    except TraincastError as exc:
        raise TraincastError(f"hf:{name}: {exc}", hint=exc.hint or (
            "give the checkpoint's own config.json (hf:PATH): a bare model_type's default "
            "config need not build; or " if default else "") + FUNC_HINT) from exc
    except Exception as exc:  # noqa: BLE001 - transformers' own checks of the config
        if isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError)
                                            and "allocate" in str(exc)):
            raise  # the inputs of a batch too large for this machine, said by the profile
        raise TraincastError(f"hf:{name}: building the {type(config).__name__} model or its "
                             f"inputs failed ({type(exc).__name__}: {_short(exc)})",
                             hint="check the config's fields, or " + FUNC_HINT) from exc
    notes = [f"hf:{name}: the sizes of transformers' default {type(config).__name__} "
             f"(model_type {name!r}), which need not be any released checkpoint's; give the "
             "checkpoint's config.json or a shipped Hub name (traincast zoo list --hf) for "
             "its own"] if default else []
    if saved:
        notes.append(f"hf:{name}: the config's torch_dtype, {saved}, is the dtype its weights "
                     "were saved in; training keeps weights, gradients and optimizer state in "
                     "fp32 (under --amp its products compute in 16 bits)")
    if dropped:
        said = ", ".join(f"{k} {v:g}" for k, v in sorted(dropped.items()))
        notes.append(f"hf:{name}: the config's LayerDrop ({said}) skips each layer with that "
                     "probability in a training step, at random; every layer is priced (a step "
                     "runs 1 - p of them on average), so the profile is the same on every run")
    seq, _ = built_seq_and_attention(model, inputs)
    window = getattr(config, "sliding_window", None)
    if seq and isinstance(window, int) and 0 < window < seq \
            and getattr(config, "use_sliding_window", True) is not False:
        notes.append(f"the config's sliding window of {window:,} tokens is not discounted: "
                     f"attention is counted over the whole {seq:,} x {seq:,} square, the window "
                     "a mask (docs/profile.md)")
    frames = _named_inputs(model, inputs).get("input_features")
    if isinstance(frames, torch.Tensor) and frames.dim() == 3:
        notes.append(f"the sequence length is the decoder's tokens; the encoder takes "
                     f"{frames.shape[2]:,} log-mel frames of {frames.shape[1]} mel bins per "
                     "sample (input_features)")
    return model, inputs, f"hf:{name}", tuple(notes)


def llm_model(cfg: Any, batch_size: int | None, seq: int | None = None,
              attention: str | None = None) -> tuple[nn.Module, tuple]:
    """(model, inputs) of a decoder-only zoo config on meta: ``batch_size`` (default 1)
    sequences of ``seq`` tokens (default the config's training length ``seq``; longer only
    for rotary positions, which have no table of positions), attention ``attention``
    (default: transformers' pick)."""
    config = config_from_llm(cfg)
    if seq is not None and seq > cfg.positions and cfg.position == "rope":
        config.max_position_embeddings = seq
    try:
        return model_from_config(config, batch_size or 1, seq or cfg.seq, attention)
    except TraincastError as exc:  # a zoo model has no config.json of the user's to change
        raise TraincastError(f"zoo:{cfg.name}: {exc}",
                             hint=(exc.hint or FUNC_HINT).split(", or a config.json")[0]) from exc


def _named_inputs(model: nn.Module, inputs: tuple) -> dict[str, Any]:
    """The inputs ``model_from_config`` built, by the keyword each is passed as (empty for a
    model that takes them positionally)."""
    keys = model.keys if isinstance(model, KeywordInputs) else ()
    return dict(zip(keys, inputs, strict=False))


def built_seq_and_attention(model: nn.Module, inputs: tuple) -> tuple[int | None, str | None]:
    """(tokens per sequence, attention implementation) of a model and inputs
    ``model_from_config`` built: the length of its token ids (``input_ids``, else token
    ``labels``; None without tokens) and its config's ``_attn_implementation`` (None for a model
    without one, or without attention layers: no module whose class name holds Attention,
    such as ResNet, for which transformers still names an implementation)."""
    if not isinstance(model, KeywordInputs):
        return None, None
    named = _named_inputs(model, inputs)
    seq = None
    for key in ("input_ids", "labels"):
        value = named.get(key)
        if isinstance(value, torch.Tensor) and value.dim() == 2:
            seq = int(value.shape[1])
            break
    attention = getattr(getattr(model.model, "config", None), "_attn_implementation", None)
    has_attention = any("Attention" in type(m).__name__ for m in model.model.modules())
    return seq, attention if isinstance(attention, str) and has_attention else None
