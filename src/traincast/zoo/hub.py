"""Hugging Face Hub checkpoints known without a network (``hub.toml``; no torch here).

``hf:NAME`` of a shipped checkpoint builds its transformers model from the size fields of its
``config.json`` (``traincast.features.hf``); ``plan``/``predict --arch hybrid`` read the same
fields as a decoder-only config (``decoder_config``). A checkpoint marked ``zoo = "NAME"`` is
that zoo model's decoder-only config.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from typing import Any

from traincast.errors import TraincastError
from traincast.zoo.llm import ModelConfig, from_hf_dict

HUB_FILE = "hub.toml"
DECODER_TYPES = frozenset({"gpt2", "llama", "mistral", "mixtral"})
"""Model types whose config keys ``zoo.llm.from_hf_dict`` reads as a decoder-only model."""


@cache
def known_configs() -> dict[str, dict[str, Any]]:
    """The shipped checkpoints by lower-case name and alias (each with its ``name``)."""
    raw = tomllib.loads(resources.files("traincast.zoo").joinpath(HUB_FILE).read_text())
    out: dict[str, dict[str, Any]] = {}
    for name, entry in raw.get("config", {}).items():
        for key in (name, *entry.get("aliases", ())):
            out[key.lower()] = {"name": name, **entry}
    return out


def hub_entry(name: str) -> dict[str, Any] | None:
    """The shipped checkpoint ``name`` (any case, a name or an alias), or None."""
    return known_configs().get(name.strip().lower())


def decoder_config(name: str) -> ModelConfig | None:
    """The decoder-only config of a shipped checkpoint (None when ``name`` is not one); an
    error for a checkpoint that is not a decoder-only transformer (BERT, T5, ViT, ...)."""
    entry = hub_entry(name)
    if entry is None:
        return None
    if "zoo" in entry:
        from traincast.zoo.registry import get_llm

        return get_llm(entry["zoo"])
    if entry["model_type"] not in DECODER_TYPES:
        raise TraincastError(f"hf:{entry['name']} ({entry['model_type']}) is not a decoder-only "
                             "transformer", hint="plan and predict --arch hybrid price "
                             f"decoder-only models ({', '.join(sorted(DECODER_TYPES))})")
    fields = dict(entry.get("fields", {}))
    cfg = from_hf_dict(fields, entry["name"], f"{HUB_FILE}: [config.\"{entry['name']}\"]")
    return cfg
