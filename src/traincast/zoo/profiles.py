"""The shipped profiles of the zoo models and trace workload tags — no torch needed.

``profiles.json`` (written by ``python -m traincast.zoo.build_profiles``) holds the profile of
every zoo model at its default batch, fp32 and under autocast; ``workloads.toml`` maps trace
workload tags (PAI 2020: bert, nmt, ctr, graphlearn, resnet, inception, xlnet, ...) to them.
"""

from __future__ import annotations

import copy
import json
import tomllib
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
    """Workload tag -> ``{"profile": zoo name, "reason": ...}`` from ``workloads.toml``."""
    text = resources.files("traincast.zoo").joinpath("workloads.toml").read_text()
    aliases = tomllib.loads(text).get("alias", {})
    models = load_profiles()["models"]
    for tag, entry in aliases.items():
        if entry.get("profile") not in models or not entry.get("reason"):
            raise TraincastError(f"workloads.toml: [alias.{tag}] needs a profile among "
                                 f"{', '.join(models)} and a reason")
    return {tag.lower(): entry for tag, entry in aliases.items()}


def resolve_workload(name: str) -> str | None:
    """The zoo model standing in for workload ``name`` (a zoo name or a tag), or None."""
    key = str(name).strip().lower()
    if key.startswith("zoo:"):
        key = key[4:]
    if key in load_profiles()["models"]:
        return key
    entry = load_aliases().get(key)
    return entry["profile"] if entry else None


def workload_features(name: str) -> dict[str, Any] | None:
    """The precomputed features record of a zoo model or trace workload tag (None if unknown).

    The record is the profile of the model at its default batch (DESIGN.md keys), plus
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


def workload_names() -> list[str]:
    """Every name ``workload_features`` knows: zoo models and workload tags, sorted."""
    return sorted({*load_profiles()["models"], *load_aliases()})
