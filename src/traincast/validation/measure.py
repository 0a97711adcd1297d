"""Run real training steps and measure them: wall time per step, and a per-component breakdown.

Clocks: on the CPU a step is timed by wall time minus the time the training thread sat ready
on the run queue while other programs held the cores (``calibrate.bench.dedicated_clock``):
what the wall clock would show on a dedicated machine, waiting for communication included; for
one process with one torch thread this is its CPU time. Plain wall time is recorded as well.
CUDA steps: wall time.

One step = copy the input batch to the device (a memcpy on the CPU, pinned host-to-device on
CUDA), forward, loss (the model's scalar output, else the sum of its outputs; the profiler's rule),
backward, then the
``after_backward`` hook (a parameter-server exchange, ...) and the optimizer step. Step time =
median of ``steps`` timed steps after ``warmup`` untimed ones.

The breakdown comes from ``torch.profiler`` over a few more steps: each aten op's *self* time
(device time on CUDA, CPU time on the CPU) goes to

* ``compute_flop``: the compute-bound ops of the op registry
  (``traincast.features.ops.is_compute_bound``: matrix products, convolutions of every backend,
  e.g. ``_slow_conv2d_backward``, attention kernels, fused recurrent layers),
* ``comm``: collectives and send/recv (names with ``all_reduce``, ``allreduce``, ``send``,
  ``recv``, ``broadcast``, ``gloo``, ``nccl``),
* ``data_io``: the input copy (the ``traincast.data`` region),
* ``compute_mem``: every other aten op;

``framework`` = profiled step time minus those (Python, autograd engine, module calls, op
dispatch not counted as any op's self time). On the CPU the profiler's intervals are wall time;
they are scaled by the dedicated-clock time over the wall time of the profiled steps, so that
the components add up to the step's time as the step clock measures it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from traincast.features.ops import is_compute_bound

COMM_WORDS = ("all_reduce", "allreduce", "send", "recv", "broadcast", "gloo", "nccl")
DATA_REGION = "traincast.data"


def sync(device: str) -> None:
    """Wait for the device (CUDA) to finish queued work."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def keep_freed_memory() -> bool:
    """Keep memory freed by a step inside the process (glibc: no trimming, no mmap below 1 GB).

    By default glibc hands large freed blocks back to the OS, and the next step page-faults
    them in again (zeroed by the kernel): a cost of the allocator, not of the model's work,
    which tcmalloc/jemalloc-based training setups do not pay. Returns False where ``mallopt``
    is unavailable (not glibc), leaving the allocator as it is.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        m_trim_threshold, m_mmap_threshold = -1, -3
        return bool(libc.mallopt(m_trim_threshold, 1 << 30)
                    and libc.mallopt(m_mmap_threshold, 1 << 30))
    except (OSError, AttributeError):
        return False


def host_inputs(inputs: Sequence[Any], device: str) -> list[Any]:
    """The input batch as it sits on the host before a step (pinned on CUDA): every tensor at
    any depth of the lists, tuples and mappings of ``inputs`` (dicts, ``BatchEncoding``:
    ``traincast.features.profile.map_tensors``), other leaves as they are."""
    from traincast.features.profile import map_tensors

    pin = device.startswith("cuda")

    def host(x: Any) -> Any:
        x = x.detach().cpu()
        return x.pin_memory() if pin else x

    return list(map_tensors(host, list(inputs)))


def device_inputs(host: Sequence[Any], device: str) -> list[Any]:
    """The batch of one step: every tensor of ``host`` at any depth of its lists, tuples and
    mappings (``map_tensors``) copied to ``device``: a fresh copy on the CPU (the memcpy a step
    pays), ``.to(device)`` elsewhere (non-blocking from pinned memory on CUDA)."""
    from traincast.features.profile import map_tensors

    if device.startswith("cpu"):
        return list(map_tensors(lambda x: x.clone(), list(host)))
    cuda = device.startswith("cuda")
    return list(map_tensors(lambda x: x.to(device, non_blocking=cuda), list(host)))


def make_step(model: Any, inputs: Sequence[Any], optimizer: Any, device: str,
              after_backward: Callable[[], None] | None = None) -> Callable[[], None]:
    """One training step as a closure (see the module docstring)."""
    from torch.profiler import record_function

    from traincast.features.profile import loss_of

    host = host_inputs(inputs, device)

    def step() -> None:
        with record_function(DATA_REGION):
            batch = device_inputs(host, device)
        loss = loss_of(model(*batch))
        loss.backward()
        if after_backward is not None:
            after_backward()
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    return step


def time_steps(step: Callable[[], None], device: str, *, steps: int, warmup: int,
               barrier: Callable[[], None] | None = None,
               clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """``{"times": [...], "wall": [...]}``: seconds of each of ``steps`` steps after ``warmup``
    untimed ones, by ``clock`` and by wall time."""
    for _ in range(warmup):
        step()
    sync(device)
    times, wall = [], []
    for _ in range(steps):
        if barrier is not None:
            barrier()
        t0, w0 = clock(), time.perf_counter()
        step()
        sync(device)
        times.append(clock() - t0)
        wall.append(time.perf_counter() - w0)
    return {"times": times, "wall": wall}


def classify(name: str) -> str:
    """Component of a profiler event name (see the module docstring); '' for non-ops."""
    low = name.lower()
    if name == DATA_REGION:
        return "data_io"
    if any(w in low for w in COMM_WORDS):
        return "comm"
    if "::" in name and is_compute_bound(name):
        return "compute_flop"
    if name.startswith("aten::"):
        return "compute_mem"
    return ""


def profile_breakdown(step: Callable[[], None], device: str, *, steps: int = 2) -> dict[str, float]:
    """Per-step seconds by component from ``torch.profiler`` over ``steps`` steps (the
    profiler's own log lines on stderr are silenced unless ``KINETO_LOG_LEVEL`` is set)."""
    from torch.profiler import ProfilerActivity, profile

    os.environ.setdefault("KINETO_LOG_LEVEL", "99")  # read when the profiler starts

    cuda = device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    sync(device)
    from traincast.calibration.bench import dedicated_clock

    with profile(activities=acts) as prof:
        t0, c0 = time.perf_counter(), dedicated_clock()
        for _ in range(steps):
            step()
        sync(device)
        wall = (time.perf_counter() - t0) / steps
        dedicated = (dedicated_clock() - c0) / steps
    # on the CPU the profiler's intervals are wall time: scale them to the dedicated clock
    scale = 1.0 if cuda else min(dedicated / wall, 1.0)
    parts = {"data_io": 0.0, "compute_flop": 0.0, "compute_mem": 0.0, "comm": 0.0}
    data_children = 0.0
    for ev in prof.key_averages():
        kind = classify(ev.key)
        if not kind:
            continue
        if kind == "data_io":  # the region's total; its copy ops are counted here, not twice
            parts["data_io"] += (ev.device_time_total if cuda else ev.cpu_time_total) * 1e-6
            continue
        self_us = ev.self_device_time_total if cuda else ev.self_cpu_time_total
        parts[kind] += self_us * 1e-6
    for ev in prof.events():  # copies issued inside the data region
        if ev.cpu_parent is not None and ev.cpu_parent.name == DATA_REGION:
            data_children += (ev.self_device_time_total if cuda else ev.self_cpu_time_total)
    parts["compute_mem"] = max(parts["compute_mem"] - data_children * 1e-6, 0.0)
    out = {k: v / steps * scale for k, v in parts.items()}
    wall *= scale
    out["profiled_step_s"] = wall
    out["framework"] = max(wall - sum(out[k] for k in parts), 0.0)
    return out
