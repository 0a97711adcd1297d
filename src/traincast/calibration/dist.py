"""Local process groups over loopback: start N processes, join a torch.distributed group, collect.

``run_local(target, world_size, args)`` spawns ``world_size`` fresh interpreters (the ``spawn``
start method, so no state leaks from the parent), each calling ``target(rank, world_size, args)``
after ``init_process_group`` on ``tcp://127.0.0.1:PORT``; the backend is ``gloo`` on the CPU and
``nccl`` when the device is CUDA and every rank has its own GPU. Each target returns a JSON-able
value; ``run_local`` returns them by rank. Gloo is bound to the loopback interface
(``GLOO_SOCKET_IFNAME=lo``), so the measured links are those of this machine only.
"""

from __future__ import annotations

import os
import queue as queue_mod
import socket
import traceback
from collections.abc import Callable
from typing import Any

from traincast.errors import TraincastError


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(target: Callable[[int, int, dict[str, Any]], Any], rank: int, world: int, port: int,
           backend: str, args: dict[str, Any], results: Any) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(int(args.get("threads", 1)))
    if backend == "nccl":
        torch.cuda.set_device(rank)
    try:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world)
        try:
            results.put((rank, "ok", target(rank, world, args)))
        finally:
            dist.destroy_process_group()
    except Exception:  # reported to the parent, which raises it
        results.put((rank, "error", traceback.format_exc()))


def backend_for(device: str, world_size: int) -> str:
    """``nccl`` when ``device`` is CUDA and there is one GPU per rank, else ``gloo``."""
    if device.startswith("cuda"):
        import torch

        if torch.cuda.device_count() >= world_size:
            return "nccl"
    return "gloo"


def run_local(target: Callable[[int, int, dict[str, Any]], Any], world_size: int,
              args: dict[str, Any], *, backend: str = "gloo", timeout_s: float = 300.0) -> list:
    """Run ``target`` in ``world_size`` local processes; its return values, by rank."""
    import torch.multiprocessing as mp

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_entry, args=(target, r, world_size, port, backend, args, results),
                         daemon=True) for r in range(world_size)]
    for p in procs:
        p.start()
    out: dict[int, Any] = {}
    waited = 0.0
    try:
        while len(out) < world_size:
            try:
                rank, status, value = results.get(timeout=1.0)
            except queue_mod.Empty:
                waited += 1.0
                dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
                if dead:
                    raise TraincastError(f"local process {dead[0]} exited with code "
                                         f"{procs[dead[0]].exitcode} before reporting") from None
                if waited > timeout_s:
                    raise TraincastError(f"local process group timed out after {timeout_s:.0f} s",
                                         hint="another program may hold the CPU or the port"
                                         ) from None
                continue
            if status == "error":
                raise TraincastError(f"local process {rank} failed:\n{value}")
            out[rank] = value
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
    return [out[r] for r in range(world_size)]
