"""Measure whole training steps of Hugging Face models on your GPU, to check predictions against.

    python scripts/measure_steps.py OUT.csv CASE [CASE ...] [--device cuda] [--calls 25]

CASE = ``SPEC[,batch=B][,seq=S][,attention=eager|sdpa][,optimizer=none|adamw][,amp=bf16]``, SPEC
an ``hf:`` model as ``traincast profile`` takes it (a shipped checkpoint name, a config.json):
the same transformers config and head, built for real on the device with random weights.

One step, as NeuSight's model-level rows were measured (the data README of neusight-kernels):
inputs resident on the device, forward, the model's loss, backward, then the optimizer step
when ``optimizer=adamw`` (``torch.optim.AdamW``, fused on CUDA) and gradients set to None. TF32
is off (true FP32); ``amp=bf16`` runs forward and loss under ``torch.autocast`` in bfloat16.
Timed with CUDA events around one step after 3 warm-ups; ``step_ms`` is the mean of the fastest
``--fastest`` of ``--calls`` steps, ``median_ms`` their median. A case that fails (out of
memory, a config transformers refuses) is a row with its ``error`` and no times.

``--profile`` adds three columns: ``issue_ms``, the host's time to issue one step (``step()``
returning, before the device is waited for; the median of 10: on a GPU that keeps up, the
step's host time), and from ``torch.profiler`` over 3 steps ``busy_ms``, the device time of
the step's kernels and copies, and ``kernels``, their number per step.

Check a row against the model::

    traincast profile SPEC --batch B --seq S --attention A --optimizer none --ops -o f.json
    traincast predict --features f.json --gpu GPU --synthetic-inputs

On a machine without CUDA, ``--device cpu`` times with ``time.perf_counter`` (for testing the
format only).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from measure_kernels import (  # beside this file
    check_device,
    device_name,
    exact_fp32,
    mean_fastest,
    samples_ms,
)

COLUMNS = ("model", "batch", "seq", "attention", "optimizer", "amp", "step_ms", "median_ms",
           "device", "torch", "error")
PROFILE_COLUMNS = ("issue_ms", "busy_ms", "kernels")
KEYS = {"batch": int, "seq": int, "attention": str, "optimizer": str, "amp": str}


def parse_case(text: str) -> dict[str, Any]:
    """``SPEC,key=value,...`` -> ``{"model": SPEC, key: value}`` (the keys of :data:`KEYS`;
    defaults batch 8, seq None, attention None, optimizer none, amp none)."""
    spec, *pairs = text.split(",")
    if not spec.startswith("hf:"):
        raise SystemExit(f"case {text!r}: the model must be an hf: spec, got {spec!r}")
    case: dict[str, Any] = {"model": spec, "batch": 8, "seq": None, "attention": None,
                            "optimizer": "none", "amp": "none"}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in KEYS:
            raise SystemExit(f"case {text!r}: {pair!r} is not one of "
                             f"{', '.join(k + '=...' for k in KEYS)}")
        try:
            case[key] = KEYS[key](value)
        except ValueError:
            raise SystemExit(f"case {text!r}: {key} must be an integer, got {value!r}") from None
    if case["optimizer"] not in ("none", "adamw") or case["amp"] not in ("none", "bf16"):
        raise SystemExit(f"case {text!r}: optimizer is none or adamw, amp none or bf16")
    if case["attention"] not in (None, "eager", "sdpa"):
        raise SystemExit(f"case {text!r}: attention is eager or sdpa")
    if case["batch"] < 1 or (case["seq"] is not None and case["seq"] < 1):
        raise SystemExit(f"case {text!r}: batch and seq are positive")
    return case


def build_step(case: dict[str, Any], device: str) -> Any:
    """The step closure of ``case`` on ``device`` (the model built there, inputs moved there)."""
    import torch

    from traincast.features.profile import loss_of, map_tensors
    from traincast.zoo.hf import hf_model

    model, inputs, _, _ = hf_model(case["model"][3:], case["batch"], case["seq"],
                                   case["attention"], device=device)
    model.train()
    batch = list(map_tensors(lambda x: x.to(device), list(inputs)))
    opt = None
    if case["optimizer"] == "adamw":
        opt = torch.optim.AdamW(model.parameters(), fused=device.startswith("cuda"))
    amp = case["amp"] == "bf16"

    def step() -> None:
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=amp):
            loss = loss_of(model(*batch))
        loss.backward()
        if opt is not None:
            opt.step()
        model.zero_grad(set_to_none=True)

    return step


def time_step_ms(step: Any, device: str, calls: int, fastest: int) -> tuple[float, float]:
    """(mean of the fastest ``fastest`` of ``calls`` steps after 3 warm-ups, median of all), in
    ms (``measure_kernels.samples_ms``: the single-op protocol, on a whole step)."""
    samples = samples_ms(step, device, calls, warmup=3)
    return mean_fastest(samples, fastest), statistics.median(samples)


def profile_step(step: Any, device: str, steps: int = 3) -> dict[str, str]:
    """``issue_ms`` (median host time of 10 steps before the device is waited for),
    ``busy_ms`` and ``kernels`` (device events per step: kernels, copies and sets, from
    ``torch.profiler``; 0 on the CPU), formatted for the CSV."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    issue = []
    for _ in range(10):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        issue.append((time.perf_counter() - t0) * 1e3)
    if cuda:
        torch.cuda.synchronize()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=acts) as prof:
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize()
    on_device = [e for e in prof.events()
                 if e.device_type != torch.autograd.DeviceType.CPU]
    busy_us = sum(e.time_range.elapsed_us() for e in on_device)
    return {"issue_ms": f"{statistics.median(issue):.6g}",
            "busy_ms": f"{busy_us / steps / 1e3:.6g}", "kernels": f"{len(on_device) / steps:.6g}"}


def measure(out: Path, cases: list[dict[str, Any]], device: str, calls: int,
            fastest: int, profiled: bool = False) -> None:
    """Measure every case, one CSV row each (written as it finishes)."""
    import gc

    import torch

    exact_fp32()
    name = device_name(device)
    out.parent.mkdir(parents=True, exist_ok=True)
    columns = COLUMNS + (PROFILE_COLUMNS if profiled else ())
    with out.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(columns)
        for case in cases:
            row = {**case, "seq": case["seq"] or "", "attention": case["attention"] or "",
                   "device": name, "torch": torch.__version__, "step_ms": "", "median_ms": "",
                   "error": "", **dict.fromkeys(PROFILE_COLUMNS, "")}
            step = None
            try:
                step = build_step(case, device)
                best, median = time_step_ms(step, device, calls, fastest)
                row["step_ms"], row["median_ms"] = f"{best:.6g}", f"{median:.6g}"
                if profiled:
                    row.update(profile_step(step, device))
            except Exception as exc:  # noqa: BLE001 - a failed case is a row, not the end
                row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            finally:
                del step  # the case's model, optimizer state and inputs, before the next
            w.writerow([row[c] for c in columns])
            fh.flush()
            print(", ".join(f"{c}={row[c]}" for c in columns if row[c] != ""), file=sys.stderr)
            gc.collect()
            if device.startswith("cuda"):
                torch.cuda.empty_cache()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("cases", nargs="+", help="SPEC[,batch=B][,seq=S][,attention=A]"
                    "[,optimizer=none|adamw][,amp=bf16]")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--calls", type=int, default=25, help="timed steps per case")
    ap.add_argument("--fastest", type=int, default=5, help="steps averaged, the fastest")
    ap.add_argument("--profile", action="store_true",
                    help="add issue_ms, busy_ms and kernels (torch.profiler)")
    args = ap.parse_args()
    if not 1 <= args.fastest <= args.calls:
        ap.error(f"--fastest must be between 1 and --calls ({args.calls}), got {args.fastest}")
    cases = [parse_case(c) for c in args.cases]
    check_device(args.device, "measure_steps.py")
    measure(args.out, cases, args.device, args.calls, args.fastest, args.profile)


if __name__ == "__main__":
    main()
