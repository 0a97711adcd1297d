"""MODEL specs: ``zoo:NAME``, ``hf:CONFIG`` and ``path/to/file.py:FUNC`` -> model and inputs.

A zoo model with a torch module is built by its builder; one known only by its decoder-only
config is built through transformers from that config (``traincast.zoo.ZooEntry.meta_model``).

``FUNC(batch_size)`` returns ``(model, inputs)``; inputs are a tensor, a tuple of positional
inputs (each a tensor, or a dict, list or other mapping of tensors) or a dict of keyword
inputs. Each spec also says how to rebuild the model on CPU at a small batch (for the fallback
of traincast.features.profile), whether its inputs stay on the GPU, and the batch it was built
at.
An error in the user's file (import, FUNC raising, a wrong return) names the file and FUNC.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from torch import nn

from traincast.errors import TraincastError
from traincast.features.profile import _one_line, as_positional

FILE_DEFAULT_BATCH = 8


class BuiltSpec(NamedTuple):
    """A MODEL spec built: the model and its inputs, and what the profile record states.

    ``rebuild(n)`` builds it at batch n on CPU (None: meta only); ``resident``: the inputs stay
    on the GPU across steps; ``batch``: the batch it was built at, in ``rebuild``'s units (None:
    the leading size of the first input); ``seq_len``: tokens per sequence of a text model
    (None: no token inputs); ``attention``: its attention implementation (``eager``,
    ``sdpa``; None: not known); ``notes``: what the record's ``notes`` should say of how it was
    built (an ``hf:`` model_type's default config, a speech model's encoder frames)."""

    model: nn.Module
    inputs: tuple
    label: str
    rebuild: Callable[[int], tuple] | None
    resident: bool
    batch: int | None
    seq_len: int | None = None
    attention: str | None = None
    notes: tuple[str, ...] = ()


def load_spec(spec: str, batch_size: int | None, *, seq_len: int | None = None,
              attention: str | None = None) -> BuiltSpec:
    """The built MODEL spec (``BuiltSpec``) at ``batch_size`` (default: the model's own);
    ``seq_len`` and ``attention`` apply to zoo text models and ``hf:`` models (an error for
    the others, and for a file model, which builds its own inputs)."""
    if spec.startswith("zoo:"):
        from traincast.zoo import lookup

        entry = lookup(spec[4:])
        model, inputs = entry.meta_model(batch_size, seq=seq_len, attention=attention)
        rebuild = None if entry.meta_only or entry.config_only else \
            lambda n: entry.build_cpu(n, seq=seq_len, attention=attention)
        if entry.config_only:
            from traincast.zoo.hf import built_seq_and_attention

            seq, attn = built_seq_and_attention(model, inputs)
        else:
            seq, attn = entry.seq_of(seq_len), entry.attention_of(attention)
        return BuiltSpec(model, inputs, entry.name, rebuild, entry.resident_inputs, None, seq,
                         attn)
    if spec.startswith("hf:"):
        from traincast.zoo.hf import built_seq_and_attention, hf_model

        model, inputs, label, notes = hf_model(spec[3:], batch_size, seq=seq_len,
                                               attention=attention)
        return BuiltSpec(model, inputs, label, None, False, None,
                         *built_seq_and_attention(model, inputs), notes=notes)
    if ":" in spec and spec.rsplit(":", 1)[0].endswith(".py"):
        for flag, value, what in (("--seq", seq_len, "sequence length"),
                                  ("--attention", attention, "attention")):
            if value is not None:
                raise TraincastError(f"{flag} applies to zoo text models and hf: models, not "
                                     f"to {spec}", hint="FUNC builds the model and its inputs: "
                                                        f"set the {what} there")
        path, func_name = spec.rsplit(":", 1)
        func = _load_function(Path(path), func_name)
        b = batch_size or FILE_DEFAULT_BATCH
        model, inputs = _call_user(func, b, spec)
        return BuiltSpec(model, inputs, spec, lambda n: _call_user(func, n, spec), False, b)
    raise TraincastError(f"unknown MODEL {spec!r}",
                         hint="use zoo:NAME (traincast zoo list), hf:CONFIG or file.py:FUNC")


def _load_function(path: Path, name: str) -> Callable[[int], Any]:
    if not path.is_file():
        raise TraincastError(f"{path}: model file not found")
    mod_name = f"traincast_user_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise TraincastError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any error in the user's file is theirs
        sys.modules.pop(mod_name, None)
        raise TraincastError(f"{path}: importing the model file failed: {_one_line(exc)}",
                             hint="run the file with python to see the traceback") from exc
    func = getattr(module, name, None)
    if not callable(func):
        found = sorted(k for k, v in vars(module).items()
                       if callable(v) and getattr(v, "__module__", None) == mod_name
                       and not k.startswith("_") and not isinstance(v, type))
        raise TraincastError(f"{path}: no function {name!r}",
                             hint="FUNC(batch_size) must return (model, inputs); functions in "
                                  f"the file: {', '.join(found) or 'none'}")
    return func


def _call_user(func: Callable[[int], Any], batch: int, spec: str) -> tuple[nn.Module, tuple]:
    try:
        result = func(batch)
    except Exception as exc:  # noqa: BLE001 - the user's builder failed, not traincast
        raise TraincastError(f"{spec}: {func.__name__}({batch}) raised {_one_line(exc)}",
                             hint="FUNC(batch_size) must build and return (model, inputs); "
                                  "run it in python to see the traceback") from exc
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], nn.Module)):
        raise TraincastError(f"{spec}: {func.__name__}({batch}) returned "
                             f"{type(result).__name__}, not (model, inputs)",
                             hint="FUNC(batch_size) must return (nn.Module, inputs): inputs a "
                                  "tensor, a tuple of them or a dict of keyword tensors")
    return as_positional(*result)
