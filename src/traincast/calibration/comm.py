"""All-reduce and point-to-point bandwidth/latency between local processes (loopback).

All-reduce of ``S`` bytes over ``n`` ranks moves ``2 (n - 1) / n * S`` bytes per rank (ring);
its bus bandwidth is that over the time, the convention of ``T_comm`` for ``allreduce-local``.
Point-to-point: a ping-pong of ``S`` bytes; one-way time = round trip / 2, as a PS worker's
push or pull sees it. Each is fitted as ``t(S) = latency + bytes_moved / bw``: latency = the
time of the smallest message, bw from the largest.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from traincast.calibration.bench import step_clock_for
from traincast.calibration.dist import backend_for, run_local

QUICK_SIZES = (4, 1 << 20, 16 << 20)
FULL_SIZES = (4, 4 << 10, 64 << 10, 1 << 20, 8 << 20, 32 << 20)


def _timed(fn: Any, repeat: int, clock: Any, warmup: int = 2) -> tuple[float, float]:
    import torch.distributed as dist

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        dist.barrier()
        t0 = clock()
        fn()
        times.append(clock() - t0)
    med = float(np.median(times))
    p10, p90 = np.percentile(times, [10, 90])
    return med, float((p90 - p10) / med)


def _comm_target(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    """Runs in each rank: all-reduce and (ranks 0, 1) ping-pong at each size."""
    import torch
    import torch.distributed as dist

    device = args["device"] if dist.get_backend() == "nccl" else "cpu"
    if dist.get_backend() == "nccl":
        device = f"cuda:{rank}"

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)

    clock = step_clock_for(device)
    out: dict[str, Any] = {"allreduce": [], "p2p": []}
    for size in args["sizes"]:
        buf = torch.ones(max(size // 4, 1), device=device)
        repeat = args["repeat"] if size < (8 << 20) else max(3, args["repeat"] // 2)

        def allreduce(buf: Any = buf) -> None:
            dist.all_reduce(buf)
            sync()

        t, spread = _timed(allreduce, repeat, clock)
        out["allreduce"].append({"size_bytes": buf.numel() * 4, "time_s": t, "spread": spread,
                                 "busbw_gbs": 2 * (world - 1) / world * buf.numel() * 4 / t / 1e9})

        def pingpong(buf: Any = buf) -> None:
            if rank == 0:
                dist.send(buf, 1)
                dist.recv(buf, 1)
            elif rank == 1:
                dist.recv(buf, 0)
                dist.send(buf, 0)
            sync()

        t, spread = _timed(pingpong, repeat, clock)
        out["p2p"].append({"size_bytes": buf.numel() * 4, "time_s": t / 2, "spread": spread,
                           "bw_gbs": buf.numel() * 4 / (t / 2) / 1e9})
    return out


def fit_latency_bw(sizes_bytes: np.ndarray, times_s: np.ndarray,
                   moved_factor: float = 1.0) -> tuple[float, float]:
    """``(latency_s, bw_bps)`` of ``t = latency + moved_factor * S / bw``.

    latency = the time of the smallest message; bw from the largest one, net of the latency.
    Where the largest message took no longer than the smallest, or longer by under
    :data:`RESOLVED_SHARE` of its time (a noisy run of small sizes: the sizes did not resolve
    the bandwidth), bw is the largest message's over its whole time, a lower bound, instead of
    a size over a vanishing difference (millions of GB/s).
    """
    order = np.argsort(sizes_bytes)
    s, t = np.asarray(sizes_bytes, float)[order], np.asarray(times_s, float)[order]
    latency = float(t[0])
    net = float(t[-1]) - latency
    resolved = net > RESOLVED_SHARE * float(t[-1])
    return latency, moved_factor * float(s[-1]) / (net if resolved else float(t[-1]))


RESOLVED_SHARE = 0.05
"""The least share of the largest message's time its size must add over the smallest's for a
bandwidth to be read from the difference: 5%, about the spread of repeated timings on a busy
host (below it the difference is noise)."""


def bench_comm(device: str, *, quick: bool, world_size: int = 2, threads: int = 1,
               sizes: tuple[int, ...] | None = None) -> dict[str, Any]:
    """All-reduce and ping-pong between ``world_size`` local processes, with fitted links."""
    backend = backend_for(device, world_size)
    sizes = sizes or (QUICK_SIZES if quick else FULL_SIZES)
    res = run_local(_comm_target, world_size, {"device": device, "sizes": list(sizes),
                                               "repeat": 5 if quick else 9,
                                               "threads": threads}, backend=backend)[0]
    ar = res["allreduce"]
    lat, bw = fit_latency_bw(np.array([r["size_bytes"] for r in ar]),
                             np.array([r["time_s"] for r in ar]),
                             2 * (world_size - 1) / world_size)
    p2p = res["p2p"]
    plat, pbw = fit_latency_bw(np.array([r["size_bytes"] for r in p2p]),
                               np.array([r["time_s"] for r in p2p]))
    return {"backend": backend, "world_size": world_size, "allreduce": ar, "p2p": p2p,
            "allreduce_latency_s": lat, "allreduce_bw_bps": bw,
            "p2p_latency_s": plat, "p2p_bw_bps": pbw}
