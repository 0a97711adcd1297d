"""Write ``profiles.json``: every zoo model profiled at its default batch, fp32 and under autocast;
with ``--ops``, ``ops.json``: each model's per-op table (fp32, default batch); with ``--ops
--amp``, ``ops_amp.json``: the same under autocast (fp16), the table the mixed-precision
what-if prices.

    python -m traincast.zoo.build_profiles [-o PATH] [--ops [--amp]] [NAME ...]

Deterministic: seeded inputs, sorted keys, no timestamps; the same torch gives the same file.
The optimizer is Adam. With NAMEs, only those entries are re-profiled (the others are kept).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from traincast.zoo.registry import ZOO

DEFAULT_PATH = Path(__file__).with_name("profiles.json")
OPS_PATH = Path(__file__).with_name("ops.json")
OPS_AMP_PATH = Path(__file__).with_name("ops_amp.json")
OP_KEYS = ("op", "flops", "bytes_read", "bytes_written", "bound", "dtype", "shapes", "count")
AMP_KEYS = ("bytes_memory_bound", "bytes_memory_bound_fused", "flops_compute_bound",
            "memory_bytes")


def profile_entry(name: str) -> dict[str, Any]:
    """The shipped record of zoo model ``name``: its fp32 profile plus the autocast figures."""
    from traincast.features.profile import profile_model

    entry = ZOO[name]
    rec = profile_model(f"zoo:{name}")
    amp = profile_model(f"zoo:{name}", amp=True)
    for key in AMP_KEYS:
        rec[f"{key}_amp"] = amp[key]
    batch = rec["batch_size"]
    rec.update({
        "family": entry.family, "description": entry.description,
        "input_shape": entry.input_shape, "published_params": entry.published_params,
        "source": entry.source,
        "flops_forward_per_sample": rec["flops_forward"] / batch,
        "flops_train_per_sample": rec["flops_total"] / batch,
    })
    return rec


def _write(path: Path, data: dict[str, Any], **dumps: Any) -> None:
    """``path`` replaced whole (written beside it, then renamed): never half-written."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True, **dumps) + "\n")
    tmp.replace(path)


def _profile_all(path: Path, names: list[str] | None, entry: Callable[[str], dict[str, Any]],
                 what: str) -> dict[str, Any]:
    """``entry(name)`` for the zoo (or ``names``, keeping the other entries of ``path``)."""
    models: dict[str, Any] = json.loads(path.read_text())["models"] \
        if names and path.exists() else {}
    todo = names or list(ZOO)
    with Progress(transient=True, console=Console(stderr=True)) as progress:
        task = progress.add_task(what, total=len(todo))
        for name in todo:
            progress.update(task, description=f"{what} {name}")
            models[name] = entry(name)
            progress.advance(task)
    return models


def build(path: Path = DEFAULT_PATH, names: list[str] | None = None) -> dict[str, Any]:
    """Profile the zoo (or ``names``) and write ``path``; returns the written object."""
    import torch

    models = _profile_all(path, names, profile_entry, "profiling")
    data = {"meta": {"generator": "python -m traincast.zoo.build_profiles",
                     "torch": torch.__version__.split("+")[0], "optimizer": "adam",
                     "amp_dtype": "float16", "device": "meta",
                     "docs": "docs/profile.md, docs/zoo.md"},
            "models": {k: models[k] for k in ZOO if k in models}}
    _write(path, data, indent=1)
    return data


def ops_entry(name: str, amp: bool = False) -> dict[str, Any]:
    """Zoo model ``name``'s per-op table at its default batch with the aggregates it sums to
    (``amp``: profiled under autocast)."""
    from traincast.features.profile import profile_model

    rec = profile_model(f"zoo:{name}", ops=True, amp=amp)
    return {"batch_size": rec["batch_size"], "flops_compute_bound": rec["flops_compute_bound"],
            "bytes_memory_bound": rec["bytes_memory_bound"],
            "ops": [{k: row[k] for k in OP_KEYS if k in row} | _call_keys(row)
                    for row in rec["ops"]]}


def _call_keys(row: dict[str, Any]) -> dict[str, Any]:
    """The keys a GPU needs to price a recurrent call's rows as cuDNN's kernels (its tag and the
    row's phase, ``features.recurrent.as_cudnn``); none for other rows."""
    return {"phase": row["phase"], "recurrent": row["recurrent"]} if row.get("recurrent") \
        else {}


def build_ops(path: Path = OPS_PATH, names: list[str] | None = None,
              amp: bool = False) -> dict[str, Any]:
    """Write every zoo model's (or ``names``') per-op table to ``path`` (``amp``: under
    autocast)."""
    import torch

    models = _profile_all(path, names, lambda name: ops_entry(name, amp),
                          "profiling op by op" + (" under autocast" if amp else ""))
    data = {"meta": {"generator": "python -m traincast.zoo.build_profiles --ops"
                                  + (" --amp" if amp else ""),
                     "torch": torch.__version__.split("+")[0], "optimizer": "adam",
                     "device": "meta", **({"amp_dtype": "float16"} if amp else {})},
            "models": {k: models[k] for k in ZOO if k in models}}
    _write(path, data, separators=(",", ":"))
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="zoo models to re-profile (default: all)")
    parser.add_argument("-o", "--output", type=Path, default=None)
    parser.add_argument("--ops", action="store_true", help="write the per-op tables (ops.json)")
    parser.add_argument("--amp", action="store_true",
                        help="with --ops: under autocast (ops_amp.json)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in ZOO]
    if unknown:
        print(f"unknown zoo models: {', '.join(unknown)}", file=sys.stderr)
        return 2
    if args.amp and not args.ops:
        print("--amp goes with --ops (profiles.json holds both precisions)", file=sys.stderr)
        return 2
    out = args.output or (OPS_AMP_PATH if args.amp else OPS_PATH if args.ops else DEFAULT_PATH)
    if args.ops:
        build_ops(out, args.names or None, amp=args.amp)
    else:
        build(out, args.names or None)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
