"""Hugging Face Hub checkpoints known without a network (``hub.toml``; no torch here).

``hf:NAME`` of a shipped checkpoint builds its transformers model from the size fields of its
``config.json`` (``traincast.zoo.hf``); ``plan``/``predict --arch hybrid`` read the same
fields as a decoder-only config (``decoder_config``). A checkpoint marked ``zoo = "NAME"`` is
that zoo model's decoder-only config.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from traincast.errors import TraincastError
from traincast.zoo.llm import ModelConfig, from_hf_dict
from traincast.zoo.registry import alias_index

HUB_FILE = "hub.toml"
DECODER_TYPES = frozenset({"gpt2", "llama", "mistral", "mixtral", "opt"})
"""Model types whose config keys ``zoo.llm.from_hf_dict`` reads as a decoder-only model."""


@cache
def load_hub() -> dict[str, Any]:
    """The parsed ``hub.toml``: ``{"configs": {name: entry (with its "name")}, "names":
    {lower-case name or alias: name}}`` (checked: aliases are unique, as in the zoo
    registry)."""
    raw = tomllib.loads(resources.files("traincast.zoo").joinpath(HUB_FILE).read_text())
    configs = {name: {"name": name, **entry} for name, entry in raw.get("config", {}).items()}
    names = alias_index({name: e.get("aliases", ()) for name, e in configs.items()},
                        f"traincast/zoo/{HUB_FILE}", 'config."{}"')
    return {"configs": configs, "names": names}


def known_configs() -> dict[str, dict[str, Any]]:
    """The shipped checkpoints by name, each once (with its ``name`` and ``aliases``)."""
    return load_hub()["configs"]


def hub_entry(name: str) -> dict[str, Any] | None:
    """The shipped checkpoint ``name`` (any case, a name or an alias), or None."""
    hub = load_hub()
    canonical = hub["names"].get(name.strip().lower())
    return None if canonical is None else hub["configs"][canonical]


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
    return from_hf_dict({"model_type": entry["model_type"], **entry.get("fields", {})},
                        entry["name"],
                        f"{HUB_FILE}: [config.\"{entry['name']}\"]")


PATH_PREFIXES = ("/", "./", "../", "~")
"""How an ``hf:`` name says it is a path (or by ending in ``.json``)."""


def local_config(name: str) -> Path | None:
    """The local ``config.json`` file or folder ``hf:NAME`` names (``~`` expanded), or None
    where NAME is found elsewhere (a shipped checkpoint, the local Hugging Face cache, a
    ``model_type``). Errors: a name written as a path (:data:`PATH_PREFIXES`, ``.json``) that
    does not exist; a folder without a ``config.json``, unless a folder of the working
    directory happens to bear a shipped checkpoint's or a transformers ``model_type``'s name
    (``./gpt2``), which does not hide it."""
    as_path = name.startswith(PATH_PREFIXES) or name.endswith(".json")
    try:
        path = Path(name).expanduser()
        found = path.exists()
    except (RuntimeError, OSError):  # ~user unknown, a name too long for a path
        path, found = Path(name), False
    if not found:
        if as_path:
            raise TraincastError(f"hf:{name}: no such file or folder",
                                 hint="give the path of a config.json or of the folder "
                                      "holding it")
        return None
    if path.is_dir() and not (path / "config.json").exists():
        if as_path or not _known_name(name):
            raise TraincastError(f"hf:{name}: the folder {path} holds no config.json",
                                 hint="give the checkpoint's config.json, or the folder that "
                                      "holds it")
        return None
    return path


def _known_name(name: str) -> bool:
    """Whether ``hf:NAME`` names a shipped checkpoint or, where transformers is installed, a
    ``model_type`` it knows."""
    if hub_entry(name) is not None:
        return True
    try:
        import transformers
    except ImportError:
        return False
    return name in transformers.CONFIG_MAPPING
