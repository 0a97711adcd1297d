"""The one model registry of ``zoo:NAME`` (``models.toml`` in this package; no torch here).

Every zoo name, its aliases, and what it can do:

- ``torch``: a ``torch.nn`` builder and its inputs — ``profile``, ``predict --model``,
  ``merge`` and ``validate`` build it (``ZooEntry.build_meta``);
- ``llm``: a decoder-only transformer config (``traincast.zoo.llm.ModelConfig``) — ``plan`` and
  ``predict --arch hybrid`` price it. A model with only this config is built on the meta device
  through transformers from it (``ZooEntry.build_meta`` / ``meta_model``, with
  ``traincast.zoo.hf.llm_model``), so ``profile``, ``predict --model`` and ``merge`` take it
  too (``traincast.zoo.llm.transformers_family``: Llama, Mixtral or GPT-2 built).

``MODELS`` holds every entry, ``ZOO`` the ones with a torch module (their profiles ship in
``profiles.json``). ``lookup(name)`` resolves a name or alias; ``get_model(name)`` returns an
entry that has a torch module and ``get_llm(name)`` its LLM config, each with an error that says
what the name can do when it lacks the capability asked for. ``alias_index`` is the name and
alias index of this file and of ``hub.toml`` (``traincast.zoo.hub``).
"""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from traincast.errors import TraincastError
from traincast.zoo.llm import ModelConfig, config_from_table

REGISTRY_FILE = "models.toml"
_WHERE = f"traincast/zoo/{REGISTRY_FILE}"
_MODEL_KEYS = {"family", "description", "aliases", "published_params", "params_exact", "source",
               "torch", "llm"}
_TORCH_KEYS = {"builder", "inputs", "default_batch", "input_shape", "meta_only",
               "resident_inputs", "seq", "max_seq", "attention"}
ATTENTIONS = ("sdpa", "eager")
CAPABILITY_USE = {"torch": "profile, predict --model, merge, validate",
                  "llm": "plan, predict --arch hybrid; without a torch module, profile, "
                         "predict --model and merge build it through transformers from the "
                         "config"}


@dataclass(frozen=True)
class ZooEntry:
    """One zoo model and its capabilities.

    ``published_params`` is the parameter count its source gives (exact where the source gives
    a count to the unit, else rounded as published); ``params_exact`` says which. ``builder``
    is empty when the model has no torch module; ``llm`` is None when it has no LLM config.
    """

    name: str
    family: str
    description: str
    default_batch: int = 0
    input_shape: str = ""
    published_params: int = 0
    params_exact: bool = False
    source: str = ""
    builder: str = ""  # "module:function" in traincast.zoo; function() -> nn.Module
    inputs_fn: str = ""  # "module:function"; function(batch) -> tuple of CPU tensors
    meta_only: bool = False
    resident_inputs: bool = False  # inputs stay in GPU memory across iterations
    seq: int = 0  # a text model's tokens per sequence (0: not a text model)
    max_seq: int = 0  # the most tokens its positions allow (0: no limit)
    attention: tuple[str, ...] = ()  # implementations its attention offers, the default first
    aliases: tuple[str, ...] = ()
    llm: ModelConfig | None = None

    @property
    def capabilities(self) -> tuple[str, ...]:
        """``("torch",)``, ``("llm",)`` or both, in that order."""
        return tuple(c for c, has in (("torch", bool(self.builder)),
                                      ("llm", self.llm is not None)) if has)

    def _resolve(self, ref: str) -> Any:
        if not ref:
            raise _missing(self, "torch")
        module, func = ref.split(":")
        return getattr(importlib.import_module(f"traincast.zoo.{module}"), func)

    @property
    def config_only(self) -> bool:
        """Whether the model is known only by its decoder-only config (built through
        transformers from it)."""
        return not self.builder and self.llm is not None

    def build_meta(self) -> Any:
        """The model on the meta device (no memory allocated): its builder, or the
        transformers model of its config when it has only a decoder-only config."""
        if self.config_only:
            return self.meta_model(1)[0]
        import torch

        with torch.device("meta"):
            return self._resolve(self.builder)()

    @property
    def is_text(self) -> bool:
        """Whether its inputs are token sequences whose length ``seq`` sets."""
        return bool(self.seq) or self.config_only

    def seq_of(self, seq: int | None = None) -> int | None:
        """The tokens per sequence a profile at ``seq`` uses (None: not a text model)."""
        if not self.is_text:
            return None
        return seq or self.seq or (self.llm.seq if self.llm is not None else None)

    def attention_of(self, attention: str | None = None) -> str | None:
        """The attention implementation a torch module runs with ``attention`` asked for
        (its default: the first it offers; None: it has no attention of its own)."""
        return attention or (self.attention[0] if self.attention else None)

    def _check(self, seq: int | None, attention: str | None) -> None:
        """An error naming the flag when ``seq`` or ``attention`` does not apply."""
        if seq is not None and not self.is_text:
            raise TraincastError(f"--seq: zoo:{self.name} is not a text model (its inputs: "
                                 f"{self.input_shape})",
                                 hint="--seq applies to zoo text models (zoo list: the "
                                      "ones whose inputs are tokens) and hf: models")
        if seq is not None and self.max_seq and seq > self.max_seq:
            raise TraincastError(f"--seq {seq} is over the {self.max_seq} positions of "
                                 f"zoo:{self.name}", hint=f"use --seq {self.max_seq} or less")
        if attention is None or self.config_only:
            return
        if attention not in ATTENTIONS:
            raise TraincastError(f"--attention must be one of {', '.join(ATTENTIONS)}, "
                                 f"got {attention!r}")
        if not self.attention:
            raise TraincastError(f"--attention: zoo:{self.name} has no attention layers",
                                 hint="leave --attention out")
        if attention not in self.attention:
            raise TraincastError(f"--attention {attention}: zoo:{self.name}'s attention "
                                 f"offers only {', '.join(self.attention)}",
                                 hint=f"use --attention {self.attention[0]}, or an hf: model")

    def inputs(self, batch: int, seq: int | None = None) -> tuple:
        """One batch of inputs (CPU tensors; integer ids carry real values), of ``seq``
        tokens per sequence for a text model (default its own); a config-only model's come
        with its model (``meta_model``)."""
        if self.config_only:
            return self.meta_model(batch, seq=seq)[1]
        self._check(seq, None)
        make = self._resolve(self.inputs_fn)
        # a text model's inputs at the length the record states (seq_of): models.toml's seq
        return make(batch, seq=self.seq_of(seq)) if self.seq else make(batch)

    def meta_model(self, batch: int | None = None, seq: int | None = None,
                   attention: str | None = None) -> tuple[Any, tuple]:
        """(model on the meta device, one batch of inputs). A torch module: its builder and
        ``batch`` (default ``default_batch``) inputs of ``seq`` tokens (text models; default
        their own), its attention layers set to ``attention`` (one it offers). A config-only
        model: the transformers model of its config (``traincast.zoo.hf.llm_model``:
        ``batch``, default 1, sequences of ``seq`` tokens, default the config's training
        length; ``attention`` as transformers' ``attn_implementation``)."""
        self._check(seq, attention)
        if self.config_only:
            from traincast.zoo.hf import llm_model

            return llm_model(self.llm, batch, seq, attention)
        model = _with_attention(self.build_meta(), attention)
        return model, self.inputs(batch or self.default_batch, seq)

    def build_cpu(self, batch: int, seq: int | None = None,
                  attention: str | None = None) -> tuple[Any, tuple]:
        """(model on CPU with initialized weights, inputs) for the CPU fallback."""
        if self.meta_only:
            raise TraincastError(f"zoo:{self.name} is profiled on the meta device only")
        self._check(seq, attention)
        return _with_attention(self._resolve(self.builder)(), attention), \
            self.inputs(batch, seq)


def _with_attention(model: Any, attention: str | None) -> Any:
    """``model`` with every attention layer of a zoo module (one with an ``attention_impl``
    attribute: traincast.zoo.text) set to ``attention`` (unchanged when None)."""
    if attention is not None:
        for module in model.modules():
            if hasattr(module, "attention_impl"):
                module.attention_impl = attention
    return model


def _entry(name: str, raw: dict[str, Any]) -> ZooEntry:
    where = f"{_WHERE}: [model.{name}]"
    unknown = set(raw) - _MODEL_KEYS
    if unknown:
        raise TraincastError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}",
                             hint=f"known keys: {', '.join(sorted(_MODEL_KEYS))}")
    if name != name.lower() or not raw.get("family") or not raw.get("description"):
        raise TraincastError(f"{where}: needs a lower-case name, a family and a description")
    if "torch" not in raw and "llm" not in raw:
        raise TraincastError(f"{where}: needs a [model.{name}.torch] or [model.{name}.llm] table")
    fields: dict[str, Any] = {"family": raw["family"], "description": raw["description"],
                              "aliases": tuple(a.lower() for a in raw.get("aliases", ()))}
    if "torch" in raw:
        torch_t = raw["torch"]
        bad = set(torch_t) - _TORCH_KEYS
        missing = {"builder", "inputs", "default_batch", "input_shape"} - set(torch_t)
        counted = "llm" in raw or {"source", "published_params"} <= set(raw)
        if bad or missing or not counted:
            raise TraincastError(f"{where}.torch: unknown {sorted(bad)} or missing "
                                 f"{sorted(missing)} keys (and the model needs source and "
                                 "published_params, or an llm table that has them)")
        fields.update(builder=torch_t["builder"], inputs_fn=torch_t["inputs"],
                      default_batch=int(torch_t["default_batch"]),
                      input_shape=torch_t["input_shape"],
                      meta_only=bool(torch_t.get("meta_only", False)),
                      resident_inputs=bool(torch_t.get("resident_inputs", False)),
                      seq=int(torch_t.get("seq", 0)), max_seq=int(torch_t.get("max_seq", 0)),
                      attention=tuple(torch_t.get("attention", ())))
        if set(fields["attention"]) - set(ATTENTIONS) or (fields["max_seq"] and not
                                                          fields["seq"]):
            raise TraincastError(f"{where}.torch: attention must list some of "
                                 f"{', '.join(ATTENTIONS)}, and max_seq needs seq")
    if "llm" in raw:
        fields["llm"] = config_from_table(name, dict(raw["llm"]), f"{where}.llm")
    llm = fields.get("llm")
    fields["published_params"] = int(raw.get("published_params",
                                             llm.params_published if llm else 0))
    fields["params_exact"] = bool(raw.get("params_exact",
                                          llm is not None and llm.params_rtol == 0))
    fields["source"] = raw.get("source", llm.source if llm else "")
    return ZooEntry(name=name, **fields)


@cache
def load_registry() -> dict[str, Any]:
    """The parsed ``models.toml``: ``{"models": {name: ZooEntry}, "names": {name or alias:
    name}, "workloads": {tag: {"profile", "reason"}}}`` (checked: aliases are unique)."""
    raw = tomllib.loads(resources.files("traincast.zoo").joinpath(REGISTRY_FILE).read_text())
    models = {name: _entry(name, dict(values)) for name, values in raw.get("model", {}).items()}
    names = alias_index({name: entry.aliases for name, entry in models.items()}, _WHERE,
                        "model.{}")
    return {"models": models, "names": names, "workloads": raw.get("workload", {})}


def alias_index(aliases: Mapping[str, Iterable[str]], where: str,
                table: str) -> dict[str, str]:
    """``{name or alias, lower case: name}`` of ``{name: its aliases}``; an error naming the
    file ``where`` and the table (``table.format(name)``) when a name or an alias is already
    the name or an alias of any entry (names and aliases match case-insensitively)."""
    names: dict[str, str] = {}
    for name in aliases:
        if name.lower() in names:
            raise TraincastError(f"{where}: [{table.format(name)}] and "
                                 f"[{table.format(names[name.lower()])}] differ only in case")
        names[name.lower()] = name
    for name, others in aliases.items():
        for alias in others:
            key = alias.lower()
            if key in names:
                raise TraincastError(f"{where}: alias {key!r} of [{table.format(name)}] is "
                                     f"already the name or an alias of {names[key]}")
            names[key] = name
    return names


MODELS: dict[str, ZooEntry] = load_registry()["models"]
ZOO: dict[str, ZooEntry] = {n: e for n, e in MODELS.items() if e.builder}


def canonical_name(name: str) -> str | None:
    """The registry name of ``name`` (a name or alias, any case, ``zoo:`` optional), or None."""
    key = str(name).strip().lower().removeprefix("zoo:")
    return load_registry()["names"].get(key)


def lookup(name: str) -> ZooEntry:
    """The entry of a zoo name or alias (an error listing the names if unknown)."""
    canonical = canonical_name(name)
    if canonical is None:
        raise TraincastError(f"unknown zoo model {name!r}",
                             hint=f"zoo models: {', '.join(MODELS)} (traincast zoo list)")
    return MODELS[canonical]


def _missing(entry: ZooEntry, capability: str) -> TraincastError:
    has = ", ".join(f"{c} ({CAPABILITY_USE[c]})" for c in entry.capabilities)
    what = {"torch": "has no torch module to build", "llm": "has no decoder-only language-"
            "model config (the hybrid-parallel model prices decoder-only transformers)"}
    return TraincastError(f"zoo:{entry.name} ({entry.family}) {what[capability]}",
                          hint=f"zoo:{entry.name} supports: {has}")


def get_model(name: str) -> ZooEntry:
    """The entry of ``name`` with a torch module (a clear error if it has none or is unknown)."""
    entry = lookup(name)
    if not entry.builder:
        raise _missing(entry, "torch")
    return entry


def get_llm(name: str) -> ModelConfig:
    """The decoder-only LLM config of zoo model ``name`` (a clear error if it has none)."""
    entry = lookup(name)
    if entry.llm is None:
        raise _missing(entry, "llm")
    return entry.llm


def llm_names() -> list[str]:
    """Names of the zoo models that have an LLM config, sorted."""
    return sorted(n for n, e in MODELS.items() if e.llm is not None)
