"""The shipped profiles of the zoo models and trace workload tags — no torch needed.

``profiles.json`` (written by ``python -m traincast.zoo.build_profiles``) holds the profile of
every zoo model with a torch module at its default batch, fp32 and under autocast; the
``[workload.TAG]`` tables of the registry (``models.toml``) map trace workload tags (PAI 2020:
bert, nmt, ctr, graphlearn, resnet, inception, xlnet, ...) to them.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

from traincast.errors import TraincastError


@cache
def load_profiles() -> dict[str, Any]:
    """The parsed ``profiles.json`` (``{"meta": ..., "models": {name: record}}``)."""
    text = resources.files("traincast.zoo").joinpath("profiles.json").read_text()
    return json.loads(text)


@cache
def load_aliases() -> dict[str, dict[str, str]]:
    """Workload tag -> ``{"profile": zoo name, "reason": ...}`` (``[workload.TAG]`` tables)."""
    from traincast.zoo.registry import REGISTRY_FILE, load_registry

    aliases = load_registry()["workloads"]
    models = load_profiles()["models"]
    for tag, entry in aliases.items():
        if entry.get("profile") not in models or not entry.get("reason"):
            raise TraincastError(f"traincast/zoo/{REGISTRY_FILE}: [workload.{tag}] needs a "
                                 f"profile among {', '.join(models)} and a reason")
    return {tag.lower(): entry for tag, entry in aliases.items()}


def workload_identity(name: str) -> tuple[str, str | None, str | None]:
    """What a workload name is: ``(key, model, stand_in)``: the name trimmed, lower case,
    without ``zoo:``; the profiled zoo model it names (a zoo name or alias), or None; the zoo
    model its workload tag stands for (``[workload.TAG]``), or None."""
    from traincast.zoo.registry import canonical_name

    key = str(name).strip().lower().removeprefix("zoo:")
    canonical = canonical_name(key)
    entry = load_aliases().get(key)
    return (key, canonical if canonical in load_profiles()["models"] else None,
            entry["profile"] if entry else None)


def resolve_workload(name: str) -> str | None:
    """The zoo model standing in for workload ``name`` (a zoo name, alias or tag), or None."""
    _, model, stand_in = workload_identity(name)
    return model or stand_in


def workload_features(name: str) -> dict[str, Any] | None:
    """The precomputed features record of a zoo model or trace workload tag (None if unknown).

    The record is the profile of the model at its default batch (docs/profile.md keys), plus
    ``bytes_memory_bound_amp`` / ``memory_bytes_amp`` (under autocast), ``workload`` (the name
    asked for) and ``profile`` (the zoo model used).
    """
    if name is None:
        return None
    model = resolve_workload(name)
    if model is None:
        return None
    record = copy.deepcopy(load_profiles()["models"][model])
    record["workload"] = str(name)
    record["profile"] = model
    return record


@cache
def _ops(amp: bool = False) -> dict[str, Any]:
    path = resources.files("traincast.zoo").joinpath("ops_amp.json" if amp else "ops.json")
    return json.loads(path.read_text())["models"] if path.is_file() else {}


def workload_ops(name: str, amp: bool = False) -> dict[str, Any] | None:
    """The per-op table of the zoo model standing in for workload ``name`` (``ops.json``:
    ``{"ops", "flops_compute_bound", "bytes_memory_bound", "batch_size"}``; ``amp``: profiled
    under autocast, ``ops_amp.json``), or None."""
    if not name:
        return None
    model = resolve_workload(name)
    return _ops(amp).get(model) if model else None


def workload_names() -> list[str]:
    """Every name ``workload_features`` knows: profiled zoo models, their aliases and workload
    tags, sorted."""
    from traincast.zoo.registry import load_registry

    profiled = load_profiles()["models"]
    names = {n for n, c in load_registry()["names"].items() if c in profiled}
    return sorted({*names, *load_aliases()})  # names: every profiled model maps to itself
