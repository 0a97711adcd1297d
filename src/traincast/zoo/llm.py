"""Decoder-only language-model configs (the ``llm`` capability of a zoo model) and their sizes.

A config is the handful of numbers that fix a decoder-only transformer's size: layers ``l``,
hidden ``h``, heads ``a`` (``kv`` key/value heads) of size ``d`` (``head_dim``, by default
``h / a``), MLP inner size ``f``, vocabulary ``V``, sequence ``s``, MLP kind (GELU: 2 matrices,
SwiGLU: 3), experts ``E`` with ``top_k`` used per token. Parameter count (docs/parallelism.md)::

    attention matrices  W_attn = h (2 a d + 2 kv d)        (Q: h x a d, O: a d x h; K, V: h x kv d)
    one MLP             W_mlp  = n_mat h f                     (n_mat = 2 GELU, 3 SwiGLU)
    biases              a d + 2 kv d + h  (attention)  +  f (n_mat - 1) + h  (MLP), if bias
    norms per layer     2 x (2h LayerNorm | h RMSNorm)
    router              h E (MoE only)
    layer               W_attn + E W_mlp + biases + norms + router
    model               l layer + V e (embedding) + [V e untied head] + [s h learned positions]
                        + [2 e h projections in and out, where e != h] + final norm

``e`` is the token embedding's width: ``h``, but OPT-350m embeds in ``word_embed_proj_dim`` = 512
and projects to and from ``h`` = 1024 (``project_in``, ``project_out``: two ``e x h`` products).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from traincast.errors import TraincastError
from traincast.units import plural


@dataclass(frozen=True)
class ModelConfig:
    """One decoder-only transformer (sizes as in the published config)."""

    name: str
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    seq: int = 2048
    kv_heads: int = 0
    head_dim: int = 0
    mlp: str = "gelu"
    bias: bool = False
    norm: str = "layernorm"
    tied: bool = False
    position: str = "rope"
    experts: int = 1
    top_k: int = 1
    params_published: float = 0.0
    params_rtol: float = 0.0
    source: str = ""
    context: int = 0
    window: int = 0
    window_share: float = 0.0
    embed_dim: int = 0
    softcaps: tuple[tuple[str, float], ...] = ()
    """The config's logit soft-capping keys and values (Gemma 2: ``attn_logit_softcapping``
    50.0, ``final_logit_softcapping`` 30.0): ``cap tanh(x / cap)`` over the attention scores
    or the output logits, which the formulas do not price (said with the model's
    warnings)."""

    @property
    def positions(self) -> int:
        """Tokens the model takes: ``context`` (a config's ``max_position_embeddings`` when it
        is longer than the sequence ``seq`` the model was pre-trained at, as a RoPE-scaled
        config's ``rope_scaling.original_max_position_embeddings``, or Phi-3's top-level
        one), else ``seq``."""
        return max(self.context, self.seq)

    @property
    def embed_width(self) -> int:
        """Width ``e`` of the token embedding and of the logits' product: ``embed_dim``, else
        ``h``."""
        return self.embed_dim or self.hidden

    @property
    def projection_params(self) -> int:
        """``2 e h`` where the embedding is ``e`` wide and the layers ``h`` (OPT's
        ``project_in`` and ``project_out``, no bias), else 0."""
        e = self.embed_width
        return 2 * e * self.hidden if e != self.hidden else 0

    @property
    def kv(self) -> int:
        """Key/value heads (``heads`` without grouped-query attention)."""
        return self.kv_heads or self.heads

    @property
    def head_size(self) -> int:
        """Size ``d`` of one attention head: ``head_dim``, else ``h / a`` (Gemma-7B and Qwen3
        set ``head_dim`` with ``a d != h``)."""
        return self.head_dim or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        """Width of the queries (and of the attention output): ``a d``."""
        return self.heads * self.head_size

    @property
    def kv_dim(self) -> int:
        """Width of the keys (and of the values): ``kv d``."""
        return self.kv * self.head_size

    @property
    def n_mat(self) -> int:
        """Weight matrices per MLP: 2 (GELU: up, down) or 3 (SwiGLU: gate, up, down)."""
        return 3 if self.gated else 2

    @property
    def gated(self) -> bool:
        """Whether the MLP is gated (SwiGLU: gate, up and down products)."""
        return self.mlp == "swiglu"

    @property
    def attn_matrix_params(self) -> int:
        """``W_attn = h (2 a d + 2 kv d)``: Q is h x a d, O is a d x h, K and V are h x kv d."""
        return self.hidden * (2 * self.q_dim + 2 * self.kv_dim)

    @property
    def mlp_matrix_params(self) -> int:
        """One MLP (one expert): ``n_mat h f``."""
        return self.n_mat * self.hidden * self.ffn

    @property
    def layer_bias_norm_params(self) -> int:
        """Biases (when ``bias``), the two norms of a layer and the MoE router, per layer."""
        h, f = self.hidden, self.ffn
        bias = ((self.q_dim + 2 * self.kv_dim + h + (f * (self.n_mat - 1) + h) * self.experts)
                if self.bias else 0)
        norms = 2 * (2 * h if self.norm == "layernorm" else h)
        router = h * self.experts if self.experts > 1 else 0
        return bias + norms + router

    @property
    def layer_params(self) -> int:
        """All parameters of one layer (every expert counted)."""
        return (self.attn_matrix_params + self.experts * self.mlp_matrix_params
                + self.layer_bias_norm_params)

    @property
    def expert_params_per_layer(self) -> int:
        """Parameters of a layer that live in experts (sharded by expert parallelism)."""
        return self.experts * self.mlp_matrix_params if self.experts > 1 else 0

    @property
    def embedding_params(self) -> int:
        """Input embedding ``V e``, its projection in ``e h`` where ``e != h`` (OPT-350m's
        ``project_in``), plus learned positions ``s h`` when ``position = learned``: what the
        first pipeline stage holds."""
        return self.vocab * self.embed_width + self.projection_params // 2 + (
            self.seq * self.hidden if self.position == "learned" else 0)

    @property
    def head_params(self) -> int:
        """The untied output head ``V e`` (0 when tied to the input embedding), and the
        projection out ``e h`` where ``e != h`` (OPT-350m's ``project_out``): what the last
        pipeline stage holds besides its layers."""
        return (0 if self.tied else self.vocab * self.embed_width) + self.projection_params // 2

    @property
    def final_norm_params(self) -> int:
        return 2 * self.hidden if self.norm == "layernorm" else self.hidden

    @property
    def params(self) -> int:
        """Total parameter count (the formula in the module docstring)."""
        return (self.layers * self.layer_params + self.embedding_params + self.head_params
                + self.final_norm_params)

    @property
    def params_active(self) -> int:
        """Parameters used per token: the ``top_k`` experts of each layer instead of all."""
        unused = (self.experts - self.top_k) * self.mlp_matrix_params if self.experts > 1 else 0
        return self.params - self.layers * unused

    @property
    def params_flop(self) -> int:
        """Parameters that do matrix work per token, as the hardware count of
        ``parallel.hybrid`` prices products: each layer's attention matrices and its active
        experts' MLP matrices (``top_k`` of a mixture), and the ``V e`` logits with the
        embedding's projections: ``l (W_attn + k n_mat h f) + V e + 2 e h [e != h]``. Biases
        and norms are element-wise work, and a mixture's router (``h E`` per token, 0.03% of
        Mixtral's) is not priced as a product: both left out."""
        active = self.top_k if self.experts > 1 else 1
        return (self.layers * (self.attn_matrix_params + active * self.mlp_matrix_params)
                + self.vocab * self.embed_width + self.projection_params)


def window_work(seq: Any, window: int, share: float) -> Any:
    """The causal attention's work under a sliding window of ``w`` keys on a share ``sigma`` of
    the layers, over the full causal square's, for sequences of ``s`` tokens (a query ``i``
    meets ``min(i + 1, w)`` keys: ``w s - w^2 / 2`` pairs against ``s^2 / 2``)::

        W(s) = 1 - sigma + sigma min(1, 2 w / s - (w / s)^2)

    1 without a window (``w = 0`` or ``sigma = 0``) or where ``s <= w``."""
    s = np.asarray(seq, dtype=np.float64)
    if window <= 0 or share <= 0:
        return np.ones_like(s)
    r = np.minimum(1.0, window / np.maximum(s, 1.0))
    return 1.0 - share + share * np.minimum(1.0, 2.0 * r - r * r)


def config_from_table(name: str, values: dict[str, Any], where: str) -> ModelConfig:
    """A checked ``ModelConfig`` from a table of keys; errors name ``where`` (file and table)."""
    known = {f.name for f in fields(ModelConfig)} - {"name"}
    unknown = set(values) - known
    if unknown:
        raise TraincastError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}",
                             hint=f"known keys: {', '.join(sorted(known))}")
    for key in ("layers", "hidden", "heads", "ffn", "vocab"):
        if key not in values:
            raise TraincastError(f"{where}: missing required key {key!r}")
        if not isinstance(values[key], int) or values[key] <= 0:
            raise TraincastError(f"{where}: key {key!r} must be a positive "
                                 f"integer, got {values[key]!r}")
    for key in ("kv_heads", "head_dim", "embed_dim"):
        if not isinstance(values.get(key, 0), int) or values.get(key, 0) < 0:
            raise TraincastError(f"{where}: key {key!r} must be a positive integer (0: the "
                                 f"default), got {values[key]!r}")
    cfg = ModelConfig(name=name, **values)
    if not cfg.head_dim and cfg.hidden % cfg.heads:
        raise TraincastError(f"{where}: hidden {cfg.hidden} is no multiple of heads {cfg.heads}, "
                             "so the size of one head cannot be told",
                             hint="give head_dim (the size of one head), or check hidden_size "
                                  "and num_attention_heads")
    if cfg.heads % cfg.kv:
        raise TraincastError(f"{where}: heads {cfg.heads} is no multiple of kv_heads {cfg.kv}",
                             hint="grouped-query attention shares each key/value head among "
                                  "heads / kv_heads query heads: check num_key_value_heads")
    if cfg.mlp not in ("gelu", "swiglu") or cfg.norm not in ("layernorm", "rmsnorm"):
        raise TraincastError(f"{where}: mlp must be gelu|swiglu and norm "
                             f"layernorm|rmsnorm")
    if not 1 <= cfg.top_k <= cfg.experts:
        raise TraincastError(f"{where}: top_k must be in 1..experts")
    if not isinstance(cfg.window, int) or cfg.window < 0 or not 0 <= cfg.window_share <= 1:
        raise TraincastError(f"{where}: window must be a whole number of tokens (0: none) and "
                             f"window_share from 0 to 1, got {cfg.window!r} and "
                             f"{cfg.window_share!r}")
    return cfg


def transformers_family(cfg: ModelConfig) -> str | None:
    """The transformers model a config-only zoo model is built as
    (``traincast.zoo.hf.config_from_llm``): ``llama`` (SwiGLU, RMSNorm, rotary, one expert),
    ``mixtral`` (the same with experts and no biases), ``gpt2`` (GELU, LayerNorm, learned
    positions, biases, no grouped-query attention, one expert), else None."""
    rope = (cfg.mlp, cfg.norm, cfg.position) == ("swiglu", "rmsnorm", "rope")
    if rope:
        return "llama" if cfg.experts == 1 else None if cfg.bias else "mixtral"
    if (cfg.mlp, cfg.norm, cfg.position, cfg.bias, cfg.kv, cfg.experts) == \
            ("gelu", "layernorm", "learned", True, cfg.heads, 1):
        return "gpt2"
    return None


def _with_nested(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a config with those of its :data:`NESTED_TABLES` (MPT's and DBRX's
    ``attn_config``, ``ffn_config``) beside them: a nested key counts only where the top level
    gives no key of the same :data:`HF_KEYS` role (DBRX's ``ffn_config.hidden_size`` does not
    replace its ``d_model``), nor the same key."""
    nested = {k: v for sub in NESTED_TABLES if isinstance(raw.get(sub), Mapping)
              for k, v in raw[sub].items()}
    for names in HF_KEYS.values():
        if any(raw.get(n) is not None for n in names):
            for n in names:
                nested.pop(n, None)
    return {**nested, **raw}


def from_hf_config(path: str | Path) -> ModelConfig:
    """A config from a Hugging Face ``config.json`` (a file or a folder holding one; no weights),
    read by ``from_hf_dict``."""
    p = Path(path)
    try:
        if p.is_dir():
            p = p / "config.json"
        raw = json.loads(p.read_text())
    except OSError as exc:  # none there, or a name no path can be (too long)
        if not isinstance(exc, FileNotFoundError | NotADirectoryError) and \
                getattr(exc, "errno", None) != errno.ENAMETOOLONG:
            raise TraincastError(f"{p}: cannot read the config ({exc.strerror or exc})",
                                 hint="check the file and its permissions") from None
        raise TraincastError(f"{p}: config file not found",
                             hint="hf: takes a local config.json (or its folder), a shipped "
                                  "checkpoint name (traincast zoo list --hf), and where "
                                  "transformers is installed a model in the local Hugging Face "
                                  "cache or a model_type such as llama, gemma, qwen2") from None
    except json.JSONDecodeError as exc:
        raise TraincastError(f"{p}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise TraincastError(f"{p}: a config must be a JSON object of keys, got a "
                             f"{type(raw).__name__}",
                             hint="a Hugging Face config.json: {\"num_hidden_layers\": ..., "
                                  "\"hidden_size\": ..., ...}")
    named = p.parent.name if p.name == "config.json" else p.stem
    return from_hf_dict(raw, str(raw.get("_name_or_path") or named or p.stem), str(p))


DEFAULT_CONFIG = "transformers' default"
"""How the ``source`` of a config built from transformers' default for a bare ``model_type``
begins (:func:`from_transformers`; ``hybrid.default_config_warning`` looks for it)."""


def from_transformers(name: str) -> ModelConfig | None:
    """A config from transformers where it is installed (torch not needed): a model in the
    local Hugging Face cache (``local_files_only``), else the default config of a bare
    ``model_type`` (``gemma``, ``qwen2``: transformers' default sizes, not a released
    checkpoint's; its ``source`` says so); None where transformers is missing or knows
    neither."""
    try:
        import transformers
    except ImportError:
        return None
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # its notes on a default config's token ids
    try:
        config = transformers.AutoConfig.from_pretrained(name, local_files_only=True)
        how = f"the local Hugging Face cache's config of {name}"
    except (OSError, ValueError):
        if name not in transformers.CONFIG_MAPPING:
            return None
        config = transformers.AutoConfig.for_model(name)
        how = (f"{DEFAULT_CONFIG} {type(config).__name__} (model_type {name!r}), which need "
               "not be any released checkpoint's")
    finally:
        transformers.logging.set_verbosity(verbosity)
    cfg = from_hf_dict(config.to_dict(), name, f"hf:{name}")
    return dataclasses.replace(cfg, source=how)


# Config keys that name the same size in different model families (first found wins)
HF_KEYS = {
    "layers": ("num_hidden_layers", "n_layer", "n_layers", "num_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head", "n_heads", "num_heads"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num",
                 "kv_n_heads"),
    "ffn": ("intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim", "d_ff"),
    "vocab": ("vocab_size", "padded_vocab_size"),
    "seq": ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
            "max_sequence_length"),
    "act": ("hidden_act", "hidden_activation", "activation_function", "activation"),
    "bias": ("attention_bias", "use_bias", "bias", "add_bias_linear", "enable_bias"),
}
NESTED_TABLES = ("attn_config", "ffn_config")
"""Tables of a config whose keys are the model's own (MPT, DBRX), read as top-level keys."""
# Family facts a config.json leaves to its model class (transformers' code, not a key):
# biases on every linear layer; a gated (GeGLU) MLP with a GELU activation; learned absolute
# positions; the output head tied to the token embedding when the key is absent
BIASED_TYPES = frozenset({"gpt2", "gpt_neox", "gptj", "phi", "bloom", "opt", "gpt_bigcode",
                          "starcoder2", "gpt_neo", "biogpt", "codegen"})
GATED_GELU_TYPES = frozenset({"gemma", "gemma2", "gemma3", "gemma3_text"})
LEARNED_POSITION_TYPES = frozenset({"gpt2", "opt", "gpt_bigcode", "gpt_neo", "biogpt"})
TIED_TYPES = frozenset({"gpt2", "opt", "bloom", "falcon", "mpt", "gemma", "gemma2", "gemma3",
                        "gemma3_text", "gpt_bigcode", "gpt_neo", "biogpt"})
GELU_DEFAULT_TYPES = frozenset({"bloom", "falcon", "mpt", "opt", "gpt_bigcode", "gpt_neo"})
# Families that are no decoder-only transformer: encoders (bidirectional attention, a masked-LM
# or classification head) and encoder-decoders, which the hybrid model does not price
ENCODER_TYPES = frozenset({"bert", "roberta", "xlm-roberta", "deberta", "deberta-v2",
                           "distilbert", "albert", "electra", "camembert", "ernie", "mpnet",
                           "t5", "mt5", "umt5", "bart", "mbart", "pegasus", "marian", "led",
                           "whisper", "moonshine", "vit", "clip", "wav2vec2", "hubert"})


def _first(raw: Mapping[str, Any], key: str) -> Any:
    """The value of the first of ``HF_KEYS[key]`` the config gives (not null), else None."""
    name = _first_name(raw, key)
    return None if name is None else raw[name]


def _first_name(raw: Mapping[str, Any], key: str) -> str | None:
    return next((name for name in HF_KEYS[key] if raw.get(name) is not None), None)


SIZE_MAX = 1e9
"""The largest size a config field may give (layers, widths, vocabulary, sequence, window):
beyond it a value is a typo (1e9 tokens of context is a hundred times the longest trained)."""
SIZE_MAX_TEXT = f"1e{round(math.log10(SIZE_MAX))}"
"""``SIZE_MAX`` (a power of ten) as errors write it: ``1e9``."""


def _whole(value: Any, name: str, where: str) -> int:
    """A size field of a config as an int (``4096`` or ``4096.0``); anything else is an error
    naming the field (a list said by its length: Gemma 3n's sizes per layer are not
    modelled)."""
    if isinstance(value, list):
        raise TraincastError(f"{where}: key {name!r} must be a whole number from 0 to "
                             f"{SIZE_MAX_TEXT}, got a list of {plural(len(value), 'value')} (a "
                             "size per layer is not modelled)",
                             hint="a config whose layers are all alike; profile and predict "
                                  "price any model op by op")
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not 0 <= value <= SIZE_MAX or value != int(value):  # NaN fails the range
        raise TraincastError(f"{where}: key {name!r} must be a whole number from 0 to "
                             f"{SIZE_MAX_TEXT}, got {value!r}",
                             hint="a decoder-only transformer config (Llama/Mistral/GPT-2 keys)")
    return int(value)


SOFTCAP_KEYS = ("attn_logit_softcapping", "final_logit_softcapping")
"""Config keys of logit soft-capping (Gemma 2's, transformers' Gemma2Config): read into
``softcaps``."""
MIXED_LAYER_KEYS = ("attn_layer_period", "attn_layer_offset", "attn_layer_indices",
                    "expert_layer_period", "expert_layer_offset", "block_types",
                    "attn_type_list", "hybrid_override_pattern")
"""Keys of configs whose layers are not all the same transformer layer: Jamba's attention
and expert layers every ``attn_layer_period`` / ``expert_layer_period`` among Mamba layers,
Bamba's ``attn_layer_indices``, RecurrentGemma's ``block_types``, MiniMax's ``attn_type_list``
(lightning attention), Nemotron-H's ``hybrid_override_pattern``."""
ATTENTION_LAYER_TYPES = frozenset({"full_attention", "sliding_attention"})
"""``layer_types`` entries of a transformer's own attention layers (Gemma 2/3, Qwen2/3,
Mistral: full or windowed); any other (``linear_attention``: Qwen3-Next, MiniMax) is not
modelled."""
RECURRENT_TYPES = frozenset({"mamba", "mamba2", "falcon_mamba", "rwkv", "xlstm"})
"""Model types without attention layers (state-space or recurrent blocks)."""
SHARED_EXPERT_TYPES = frozenset({"llama4", "llama4_text"})
"""Model types with a shared expert in every MoE layer that no config key counts (Llama 4:
``Llama4TextMoe.shared_expert``)."""


def refuse_unmodelled_layers(raw: Mapping[str, Any], mtype: str, where: str) -> None:
    """An error naming the key of a config whose layers the hybrid model does not price:
    layers other than attention + MLP (state-space / Mamba: a ``mamba_*`` or ``ssm_*`` key;
    :data:`MIXED_LAYER_KEYS`; a ``layer_types`` entry outside
    :data:`ATTENTION_LAYER_TYPES`) and a shared expert no key counts
    (:data:`SHARED_EXPERT_TYPES`). Priced as a plain transformer they would come out tens of
    percent off (Jamba: +78% of its parameters) without a word."""
    hint = "profile and predict price any model op by op"
    if mtype in SHARED_EXPERT_TYPES:
        raise TraincastError(f"{where}: model_type {mtype!r}: its MoE layers hold a shared "
                             "expert beside the routed ones, which is not modelled (every "
                             "layer has the same routed experts)", hint=hint)
    key = next((k for k in raw if k in MIXED_LAYER_KEYS or k.startswith(("mamba_", "ssm_"))),
               None)
    if key is not None or mtype in RECURRENT_TYPES:
        what = f"key {key!r}" if key is not None else f"model_type {mtype!r}"
        raise TraincastError(f"{where}: {what}: layers other than attention and MLP "
                             "(state-space, recurrent or linear-attention layers) are not "
                             "modelled", hint=hint)
    kinds = raw.get("layer_types")
    other = sorted({str(k) for k in kinds} - ATTENTION_LAYER_TYPES) \
        if isinstance(kinds, list) else []
    if other:
        raise TraincastError(f"{where}: key 'layer_types' holds {other[0]!r} layers: only "
                             f"{' and '.join(sorted(ATTENTION_LAYER_TYPES))} layers are "
                             "modelled", hint=hint)


def _size(raw: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    """``_first(raw, key)`` as a whole number (``default`` when the config gives none)."""
    name = _first_name(raw, key)
    return default if name is None else _whole(raw[name], name, where)


def _sliding_window(raw: Mapping[str, Any], mtype: str, layers: int, where: str
                    ) -> tuple[int, float]:
    """``(window, window_share)`` of a Hugging Face config: ``sliding_window`` keys per query
    (null, 0 or absent: none), on the share of the layers that use it: ``layer_types``' count of
    ``sliding_attention`` where the config lists them; Gemma 2 every other layer
    (``is_sliding = not layer_idx % 2``); Gemma 3 all but every ``sliding_window_pattern``-th
    (default 6); none where ``use_sliding_window`` is false (Qwen2), layers from
    ``max_window_layers`` on where it is true; else every layer (Mistral, Phi-3)."""
    window = raw.get("sliding_window")
    if window is None or window is False or raw.get("use_sliding_window") is False:
        return 0, 0.0
    window = _whole(window, "sliding_window", where)
    if not window or layers <= 0:  # no layers: config_from_table says so
        return 0, 0.0
    kinds = raw.get("layer_types")
    if isinstance(kinds, list) and kinds:
        return window, sum(k == "sliding_attention" for k in kinds) / len(kinds)
    if mtype.startswith("gemma2"):
        return window, (layers + 1) // 2 / layers
    if mtype.startswith("gemma3"):
        every = _whole(raw.get("sliding_window_pattern") or 6, "sliding_window_pattern", where)
        return window, (layers - layers // max(every, 1)) / layers
    if raw.get("use_sliding_window") and isinstance(raw.get("max_window_layers"), int):
        return window, max(0, layers - raw["max_window_layers"]) / layers
    return window, 1.0


def from_hf_dict(raw: Mapping[str, Any], name: str, where: str) -> ModelConfig:
    """A config from the keys of a Hugging Face decoder-only config, whatever the family's
    spelling (``HF_KEYS``: Llama's ``num_hidden_layers``, GPT-2's ``n_layer``, MPT's
    ``n_layers``, ...; ``where`` names the source in errors):

    * ``kv_heads``: ``num_key_value_heads`` (or its synonyms); ``multi_query`` (Falcon-7B,
      without ``new_decoder_architecture``, whose ``num_kv_heads`` transformers then ignores,
      as a config saved by transformers 4 writes it: 71) means one; else ``heads``;
    * ``embed_dim``: OPT's ``word_embed_proj_dim`` where it is not ``hidden`` (OPT-350m);
    * ``head_dim``: ``head_dim`` (Gemma, Qwen3, Mistral NeMo: the size of one head, which need
      not be ``hidden / heads``); absent or null: ``hidden / heads``;
    * ``ffn``: ``intermediate_size`` (or synonyms), MPT's ``expansion_ratio`` x hidden, else
      4 x hidden;
    * ``mlp``: SwiGLU (3 matrices) for a SiLU activation or a gated-GELU family
      (``GATED_GELU_TYPES``), else GELU (2); no activation key: SiLU unless the family's is GELU;
    * ``bias``: ``attention_bias``/``use_bias``/``bias``/``add_bias_linear``, ``no_bias``
      negated, else the family's (``BIASED_TYPES``);
    * ``norm``: RMSNorm when ``rms_norm_eps`` is given; ``position``: learned for
      ``LEARNED_POSITION_TYPES`` (and GPT-2 keys), else rotary or ALiBi (no parameters);
    * ``tied``: ``tie_word_embeddings``, else the family's default (``TIED_TYPES``);
    * an encoder or encoder-decoder (``ENCODER_TYPES``, ``is_encoder_decoder``) is an error;
    * experts: ``num_local_experts``/``num_experts``/``n_routed_experts`` with
      ``num_experts_per_tok``, each expert ``moe_intermediate_size`` wide where the config
      gives it (Qwen-MoE, DeepSeek); shared experts and dense layers among the expert ones
      (``shared_expert_intermediate_size``, ``n_shared_experts``, ``first_k_dense_replace``,
      ``mlp_only_layers``, ``decoder_sparse_step`` other than 1) are not modelled: an error,
      not a guess; so is multi-head latent attention (``kv_lora_rank``: DeepSeek-V2/V3,
      MiniCPM3), whose projections are no ``h x h`` matrices; and layers other than attention
      + MLP or a shared expert no key counts (:func:`refuse_unmodelled_layers`: Jamba, Bamba,
      Falcon-H1, RecurrentGemma, MiniMax, Qwen3-Next, Llama 4); a per-layer list of sizes
      (Gemma 3n) is an error too;
    * MPT's and DBRX's nested ``attn_config`` and ``ffn_config`` are read as top-level keys
      (``kv_n_heads``, ``ffn_hidden_size``, ``moe_num_experts``, ``moe_top_k``) where the top
      level gives none of the same role (:func:`_with_nested`);
    * ``window``, ``window_share``: a sliding window of attention and the share of the layers
      that use it (:func:`_sliding_window`); MPT's ``attn_type``
      ``multiquery_attention`` means one key/value head, ``multihead_attention`` as many as
      heads (``kv_n_heads`` counts for ``grouped_query_attention``).
    """
    raw = _with_nested(raw)
    mtype = str(raw.get("model_type") or ("gpt2" if "n_embd" in raw else ""))
    if raw.get("is_encoder_decoder") or mtype in ENCODER_TYPES:
        raise TraincastError(f"{where}: {name} ({mtype or 'is_encoder_decoder'}) is not a "
                             "decoder-only transformer",
                             hint="plan and predict --arch hybrid price decoder-only models "
                                  "(Llama, Mistral, GPT-2, OPT, Falcon, ...); profile and "
                                  "predict price any model op by op")
    refuse_unmodelled_layers(raw, mtype, where)
    if latent := next((k for k in ("kv_lora_rank", "q_lora_rank") if raw.get(k)), None):
        raise TraincastError(f"{where}: key {latent!r}: multi-head latent attention (low-rank "
                             "keys, values and queries) is not modelled",
                             hint="a config with multi-head or grouped-query attention; profile "
                                  "and predict price any model op by op")
    missing = [k for k in ("layers", "hidden", "heads", "vocab") if _first(raw, k) is None]
    if missing:
        raise TraincastError(f"{where}: missing key {HF_KEYS[missing[0]][0]!r} (or "
                             f"{', '.join(HF_KEYS[missing[0]][1:])})",
                             hint="a decoder-only transformer config (Llama/Mistral/GPT-2 keys)")
    h, heads = _size(raw, "hidden", where), _size(raw, "heads", where)
    kv = _size(raw, "kv_heads", where, 0)
    if raw.get("multi_query") and not raw.get("new_decoder_architecture"):
        kv = 1  # Falcon's num_kv_heads counts in its new architecture only (FalconAttention)
    attn_type = raw.get("attn_type")  # MPT's attn_config: kv_n_heads counts for GQA only
    if attn_type == "multiquery_attention":
        kv = 1
    elif attn_type == "multihead_attention":
        kv = heads
    ratio = raw.get("expansion_ratio")
    ffn = _size(raw, "ffn", where, 0) or (int(ratio * h)  # MPT's int(d_model x ratio)
                                          if isinstance(ratio, int | float) and ratio else 4 * h)
    act = _first(raw, "act") or ("gelu" if mtype in GELU_DEFAULT_TYPES | BIASED_TYPES
                                 else "silu")
    if not isinstance(act, str):
        raise TraincastError(f"{where}: key {_first_name(raw, 'act')!r} must name one "
                             f"activation (silu, gelu, ...), got {act!r}",
                             hint="a decoder-only transformer config (Llama/Mistral/GPT-2 keys)")
    bias = _first(raw, "bias")
    if bias is None:
        bias = not raw["no_bias"] if "no_bias" in raw else mtype in BIASED_TYPES
    tied = raw.get("tie_word_embeddings")
    experts_key = next((k for k in ("num_local_experts", "num_experts", "n_routed_experts",
                                    "moe_num_experts") if raw.get(k)), "num_experts")
    top_k_key = next((k for k in ("num_experts_per_tok", "moe_top_k") if raw.get(k)),
                     "num_experts_per_tok")
    if raw.get(experts_key):
        unmodelled = [k for k in ("shared_expert_intermediate_size", "n_shared_experts",
                                  "first_k_dense_replace", "mlp_only_layers") if raw.get(k)]
        unmodelled += ["decoder_sparse_step"] * (raw.get("decoder_sparse_step", 1) not in (1, None))
        if unmodelled:
            raise TraincastError(f"{where}: key {unmodelled[0]!r}: shared experts and dense "
                                 "layers among the expert layers are not modelled (every layer "
                                 "has the same routed experts)",
                                 hint="a mixture-of-experts config with routed experts only "
                                      "(Mixtral, Qwen3-MoE), or the zoo's MoE models")
        if raw.get("moe_intermediate_size"):
            ffn = _whole(raw["moe_intermediate_size"], "moe_intermediate_size", where)

    def optional(key: str, default: int) -> int:
        return _whole(raw[key], key, where) if raw.get(key) else default

    if raw.get(experts_key) and top_k_key in raw and raw[top_k_key] is not None \
            and not raw[top_k_key]:
        raise TraincastError(f"{where}: key {top_k_key!r} is 0: a mixture of experts routes "
                             "each token to at least one expert",
                             hint="the experts each token is routed to: 2 for Mixtral")

    values = {"layers": _size(raw, "layers", where), "hidden": h, "heads": heads,
              "kv_heads": kv or heads, "head_dim": optional("head_dim", 0), "ffn": ffn,
              "vocab": _size(raw, "vocab", where),
              "seq": _size(raw, "seq", where, 0) or (1024 if mtype == "gpt2" else 2048),
              "mlp": "swiglu" if act in ("silu", "swish", "swiglu")
              or mtype in GATED_GELU_TYPES else "gelu",
              "bias": bool(bias), "norm": "rmsnorm" if "rms_norm_eps" in raw else "layernorm",
              "tied": bool(mtype in TIED_TYPES if tied is None else tied),
              "position": "learned" if mtype in LEARNED_POSITION_TYPES else "rope",
              "experts": optional(experts_key, 1), "top_k": optional(top_k_key, 1),
              "embed_dim": optional("word_embed_proj_dim", 0)}
    if values["embed_dim"] == h:
        values["embed_dim"] = 0
    values["softcaps"] = tuple((k, float(raw[k])) for k in SOFTCAP_KEYS
                               if isinstance(raw.get(k), int | float)
                               and not isinstance(raw[k], bool) and raw[k])
    values["window"], values["window_share"] = _sliding_window(raw, mtype, values["layers"],
                                                               where)
    rope = raw.get("rope_scaling")
    trained = rope.get("original_max_position_embeddings") if isinstance(rope, Mapping) else None
    if trained is None:  # Phi-3 and Phi-3.5 keep it beside max_position_embeddings
        trained = raw.get("original_max_position_embeddings")
    if values["position"] == "rope" and isinstance(trained, int) and not isinstance(
            trained, bool) and 0 < trained < values["seq"]:
        # a context extended by RoPE scaling (Llama 3.1: 8,192 -> 131,072): the default
        # sequence is the one it was pre-trained at, the longer one what it takes
        values["seq"], values["context"] = trained, values["seq"]
    return config_from_table(name, values, where)
