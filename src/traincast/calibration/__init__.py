"""``traincast calibrate``: measure this machine and write it as a catalog file.

Microbenchmarks (``bench``, ``comm``) of the current device — the CPU, or the first CUDA GPU
when present — become ``[gpu.local]`` (peaks plus measured efficiency curves and per-op
overhead), three links and ``[node.local]``, so that
``traincast predict --catalog FILE --node local ...`` predicts for this machine:

* ``gpu.local``: ``fp32_tflops`` = best measured fp32 matmul rate, ``bf16_tflops`` (or fp16 on
  CUDA) likewise; ``mem_bw_gbs`` = element-wise ``add`` bandwidth on operands far beyond the
  caches; curves ``gemm_intensity/gemm_tflops`` (matmul FLOP/s by arithmetic intensity, squares
  and skinny shapes), ``conv_intensity/conv_tflops``, ``elementwise_bytes/elementwise_gbs``
  (copy/add/triad bandwidth by bytes moved), ``kernel_gelems`` (elements/s of element-wise,
  normalization and softmax kernels, by aten name; ``sparse_embedding_update`` = a sparse
  table's backward + SparseAdam step), ``fresh_bytes/fresh_gbs`` (the extra cost
  of writing a freshly allocated output, by size: page faults on the CPU),
  ``foreach_tensor_us`` (fixed cost per tensor of a multi-tensor op), each rate net of the
  fixed cost of one plain op call; ``op_overhead_us`` = the fixed cost of one op of a training
  step (a whole training step of tiny layers, over the ops it runs), which the per-op roofline
  adds to every op.
* ``link.local-host`` (role ``pcie``): host-to-device copy (a memcpy on the CPU);
  ``link.local-allreduce`` (``intra``): all-reduce bus bandwidth between 2 local processes
  (NCCL with 2+ GPUs, else gloo over loopback), ``latency_us`` = a 4-byte all-reduce;
  ``link.local-loopback`` (``nic``): point-to-point send/recv between 2 local processes (gloo).
* ``node.local``: ``gpus`` = local ranks (CUDA devices; on the CPU, cores / threads per rank).

**Threads (CPU).** Calibration runs at the torch intra-op thread count the user trains with
(``threads``; default ``torch.get_num_threads()``, torch's own default = the cores) and records
it as ``gpu.local.threads``; one rank ("device") = ``threads`` cores. Every curve, kernel rate
and the fixed cost per op ``o`` are measured at that thread count. With ``threads > 1`` the
1-thread kernel rates and a grain are measured as well (traincast.calibration.threads), because a
small op runs on one thread whatever the thread count::

    K(op, E; T) = K_1(op) * min(K_T(op) / K_1(op), max(1, E / g))

(``kernel_gelems_1t`` = K_1, ``kernel_gelems`` = K_T, ``thread_grain_elems`` = g), and a GEMM
of F FLOPs at intensity I with m output rows at ``P_1(I) * min(S, max(1, F / g_F), S_m(m))``
(``gemm_tflops_1t`` = P_1 over ``gemm_intensity``, ``thread_gemm_speedup`` = S,
``thread_gemm_grain_flops`` = g_F, ``thread_gemm_rows``/``thread_gemm_rows_speedup`` = S_m,
the measured speedup of the skinny shapes by rows: a product of a few rows runs on one
thread; absent = no row limit). The fixed
cost per op is taken as measured at T threads (not scaled with threads).
Communication ranks run 1 thread each (2 processes must not oversubscribe the cores).
Every figure is the median of repeated samples after warm-up; the ``[calibration]`` table of
the file records spreads, the date, the device, torch's version and the raw measurements.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from traincast.calibration import bench
from traincast.calibration import threads as thread_model
from traincast.errors import TraincastError
from traincast.files import write_text_whole
from traincast.roofline import curve_from_points

__all__ = ["CONTENTION_LIMIT", "ContendedCalibration", "RETRIES", "calibrate", "catalog_text",
           "default_device"]

CONTENTION_LIMIT = 0.05
"""The largest share of a stage's time that other programs may hold the cores (CPU, several
threads) before the stage is measured again."""
RETRIES = 2
"""How many more times a disturbed stage is measured before the calibration is refused."""


class ContendedCalibration(TraincastError):
    """Other programs held the cores during a calibration's stages, even after ``RETRIES``
    more tries: the figures would be a busy machine's. Nothing is written."""

    def __init__(self, stages: list[dict[str, Any]], threads: int,
                 output: str | Path | None) -> None:
        worst = max(stages, key=lambda s: s["runqueue_wait_fraction"])
        where = f"{output}: not written: " if output is not None else ""
        super().__init__(
            f"{where}other programs held the cores {worst['runqueue_wait_fraction']:.0%} of the "
            f"time during '{worst['stage']}' ({len(stages)} stage(s) above "
            f"{CONTENTION_LIMIT:.0%} after {RETRIES + 1} tries at {threads} threads)",
            hint="calibrate when the machine is quiet, with --threads 1 (timed by CPU time), or "
                 "pass --force to write it anyway (the file then names the disturbed stages)")
        self.stages = stages


def default_device() -> str:
    """``cuda`` when torch sees a GPU, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def check_device(device: str | None) -> str:
    """The device to measure on: ``cpu``, ``cuda`` or ``cuda:N``, checked before any
    measurement (``None``: :func:`default_device`); anything else, or CUDA where torch sees no
    GPU, is an input error naming ``--device``."""
    if device is None:
        return default_device()
    name = device.strip().lower()
    if name != "cpu" and not (name == "cuda" or (name.startswith("cuda:")
                                                 and name[5:].isdigit())):
        raise TraincastError(f"--device {device!r}: not a device traincast measures on",
                             hint="cpu, cuda or cuda:N (leave it out for cuda where present, "
                                  "else cpu)")
    if name.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise TraincastError(f"--device {device}: torch sees no CUDA device here "
                                 "(torch.cuda.is_available() is False)",
                                 hint="--device cpu, or run on a machine with an NVIDIA GPU and "
                                      "a CUDA build of torch")
        index = int(name[5:]) if ":" in name else 0
        if index >= torch.cuda.device_count():
            raise TraincastError(f"--device {device}: torch sees "
                                 f"{torch.cuda.device_count()} CUDA device(s), numbered from 0")
    return name


def device_name(device: str) -> str:
    """A person's name for the device: the GPU's name, or the CPU model."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_device_name(0)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def _net_rate(amount: np.ndarray, time_s: np.ndarray, overhead_s: float) -> np.ndarray:
    """``amount / (t - o)``, never counting less than half of t as the op's own work."""
    return amount / bench.net_time_s(time_s, overhead_s)


def _rate_curve(rows: list[dict[str, Any]], plain_s: float, amount: str = "flops",
                monotone: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The rate curve of microbenchmark rows: x = FLOP/byte (``amount = "flops"``) or bytes
    moved (``"bytes"``), y = amount / net time (:func:`_net_rate`)."""
    amt = np.array([r[amount] for r in rows], dtype=np.float64)
    x = amt / np.array([r["bytes"] for r in rows]) if amount == "flops" else amt
    rate = _net_rate(amt, np.array([r["time_s"] for r in rows]), plain_s)
    return curve_from_points(x, rate, monotone=monotone)


def _count_ops(fn: Callable[[], None]) -> tuple[int, int]:
    """(kernels, tensors of multi-tensor kernels) that ``fn`` runs, counted as the profiler's
    per-op table does: views and allocations are not ops."""
    from torch.utils._python_dispatch import TorchDispatchMode

    skip = ("empty", "empty_like", "empty_strided", "detach", "alias", "lift_fresh",
            "_local_scalar_dense", "set_", "resize_", "view", "_unsafe_view", "_reshape_alias")

    class Count(TorchDispatchMode):
        ops = 0
        foreach_tensors = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            name = func._overloadpacket.__name__
            if not func.is_view and name not in skip:
                self.ops += 1
                if name.startswith("_foreach_") and args and isinstance(args[0], list | tuple):
                    self.foreach_tensors += len(args[0])
            return func(*args, **(kwargs or {}))

    with Count() as counter:
        fn()
    return counter.ops, counter.foreach_tensors


def _op_overhead(device: str, repeat: int, foreach_tensor_s: float) -> dict[str, Any]:
    """Fixed cost per op of a training step: a whole step (zero_grad, forward, backward, Adam)
    of 16 blocks Linear(8, 8) + LayerNorm + GELU on 2 rows, where every op is tiny: its time,
    less the multi-tensor ops' per-tensor cost, over the ops it runs (module calls, autograd
    and the optimizer's Python included)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(16)
                            for m in (nn.Linear(8, 8), nn.LayerNorm(8), nn.GELU())]).to(device)
    x = torch.randn(2, 8, device=device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=True)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(x).sum().backward()
        opt.step()

    step()
    ops, foreach_tensors = _count_ops(step)
    t = bench.measure(step, device, repeat=repeat)
    tiny = bench.bench_op_overhead(device, repeat=repeat, min_sample_s=0.02)
    per_op = max(t.median_s - foreach_tensors * foreach_tensor_s, 0.5 * t.median_s) / ops
    alone = bench.bench_op_alone(device) if str(device).startswith("cuda") else {}
    return {"training_op_s": per_op, "training_op_spread": t.spread, "step_ops": ops,
            "plain_op_s": tiny["time_s"], "plain_op_spread": tiny["spread"],
            **({"alone_op_s": alone["time_s"], "alone_op_calls": alone["calls"],
                "alone_kinds_s": alone["kinds_s"]} if alone else {})}


# sizes of each level: full (< 2 min on 2 CPU cores), quick (< 30 s), tiny (tests only: the
# figures of tiny sizes say little about the machine)
_PLAN: dict[str, dict[str, Any]] = {
    "full": {"repeat": 7, "sample_s": 0.02, "low_n": (256, 512, 1024), "kernel_n": 1 << 20,
             "ew": [1 << 12, 1 << 15, 1 << 18, 1 << 21, 1 << 24, 1 << 26],
             "host": [1 << 20, 1 << 24], "conv": None, "comm": None,
             "fresh": [1 << 20, 1 << 23, 1 << 26, 1 << 28],
             "sparse": {"table_rows": 1 << 19, "dim": 64, "lookups": 8192},
             "thread_sizes": [1 << e for e in range(10, 21)]},
    "quick": {"repeat": 5, "sample_s": 0.01, "low_n": (512,), "kernel_n": 1 << 18,
              "ew": [1 << 15, 1 << 21, 1 << 25], "host": [1 << 20, 1 << 24], "conv": None,
              "comm": None, "fresh": [1 << 22, 1 << 26],
              "sparse": {"table_rows": 1 << 18, "dim": 64, "lookups": 4096},
              "thread_sizes": [1 << e for e in range(10, 21, 2)]},
    "tiny": {"repeat": 3, "sample_s": 0.002, "low_n": (32,), "kernel_n": 1 << 12,
             "ew": [1 << 12, 1 << 16], "host": [1 << 12], "conv": ((8, 8, 8, 3, 1, 1),
                                                                  (8, 8, 8, 3, 1, 8)),
             "comm": (4, 1 << 12), "fresh": [1 << 12, 1 << 16],
             "sparse": {"table_rows": 1024, "dim": 8, "lookups": 64},
             "thread_sizes": [1 << 10, 1 << 16],
             "mm": [(16, 16, 16, "nn"), (4, 64, 64, "nt"), (64, 64, 4, "tn")]},
}


def calibrate(output: str | Path | None = None, *, quick: bool = False,
              device: str | None = None, threads: int | None = None, comm: bool = True,
              tiny: bool = False, force: bool = False,
              progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the microbenchmarks and (when ``output`` is given) write the catalog file.

    ``quick``: fewer sizes and repeats; ``tiny``: the smallest sizes (for tests); ``threads``:
    torch intra-op threads to measure at (default ``torch.get_num_threads()``; restored
    afterwards). Returns ``{"catalog": TOML text, "results": raw measurements, "path": output
    or None}``.

    Contention (CPU, ``threads > 1``, timed by wall time): a stage during which other programs
    held the cores more than ``CONTENTION_LIMIT`` of the time is measured again, at most
    ``RETRIES`` more times (the least disturbed try is kept); a stage still disturbed then
    raises :class:`ContendedCalibration` and nothing is written, unless ``force``: the file is
    written and says which stages were disturbed (``[calibration.local] disturbed_stages``).
    """
    import torch

    before = torch.get_num_threads()
    threads = before if threads is None else int(threads)
    if threads < 1:
        raise TraincastError(f"calibrate: threads must be >= 1, got {threads}",
                             hint="pass --threads N with N >= 1 (default: torch's count)")
    return thread_model.at_threads(threads, lambda: _calibrate(
        output, quick=quick, device=check_device(device), threads=threads, comm=comm,
        tiny=tiny, force=force, say=progress))


def _calibrate(output: str | Path | None, *, quick: bool, device: str, threads: int,
               comm: bool, tiny: bool, force: bool,
               say: Callable[[str], None] | None) -> dict[str, Any]:
    """``calibrate`` with torch already at ``threads`` threads."""
    import torch

    say = say or (lambda _msg: None)
    level = "tiny" if tiny else ("quick" if quick else "full")
    plan = _PLAN[level]
    from traincast.validation.measure import keep_freed_memory

    allocator_kept = keep_freed_memory()  # as in the measured training steps
    t_start, wait_start = time.perf_counter(), bench.process_runqueue_wait_s()
    repeat, sample = plan["repeat"], plan["sample_s"]
    res: dict[str, Any] = {"device": device, "device_name": device_name(device),
                           "vendor": device_vendor(device),
                           "torch": torch.__version__, "threads": threads,
                           "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                           "quick": quick, "level": level, "allocator_kept": allocator_kept}
    # several threads are timed by wall time: what other programs took of the cores shows
    # in the figures, so such a stage is measured again, at most RETRIES more times
    checked = threads > 1 and not device.startswith("cuda")
    stages: list[dict[str, Any]] = []

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        say(name)
        best: tuple[float, Any] | None = None
        for attempt in range(1, RETRIES + 2):
            wait0, t0 = bench.process_runqueue_wait_s(), time.perf_counter()
            value = fn()
            busy = bench.contention(wait0, time.perf_counter() - t0, threads)
            if best is None or busy < best[0]:
                best = (busy, value)
            if not checked or busy <= CONTENTION_LIMIT or attempt == RETRIES + 1:
                break
            say(f"{name}: other programs held the cores {busy:.0%} of the time; "
                f"measuring again ({attempt + 1} of {RETRIES + 1})")
        stages.append({"stage": name, "runqueue_wait_fraction": best[0], "tries": attempt})
        return best[1]

    def overhead() -> tuple[dict[str, Any], dict[str, Any]]:
        fe = bench.bench_foreach(device, repeat=repeat, min_sample_s=sample)
        return fe, _op_overhead(device, repeat, fe["per_tensor_s"])

    res["foreach"], res["op_overhead"] = stage(
        "per-op overhead (multi-tensor ops, a step of tiny ops)", overhead)
    res["matmul_fp32"] = stage("matmul fp32 (squares and skinny shapes)",
                               lambda: bench.bench_matmul(
                                   device, torch.float32,
                                   plan.get("mm") or bench.matmul_shapes(quick), repeat=repeat,
                                   min_sample_s=sample))
    low = torch.float16 if device.startswith("cuda") else torch.bfloat16
    res["matmul_low"] = stage(f"matmul {str(low).split('.')[-1]}", lambda: bench.bench_matmul(
        device, low, [(s, s, s) for s in plan["low_n"]], repeat=repeat, min_sample_s=sample))
    res["matmul_low_dtype"] = "fp16" if low == torch.float16 else "bf16"
    res["conv"] = stage("convolution, forward and backward", lambda: bench.bench_conv(
        device, quick=quick, repeat=repeat, min_sample_s=sample, cases=plan["conv"]))
    ew_sizes = list(plan["ew"])
    if device.startswith("cuda"):
        ew_sizes = [s * 16 for s in ew_sizes]  # beyond a GPU's L2 as well
    res["elementwise"] = stage("element-wise bandwidth (copy, add, triad)",
                               lambda: bench.bench_elementwise(device, ew_sizes, repeat=repeat,
                                                               min_sample_s=sample))
    res["kernels"] = stage("element-wise, normalization and softmax kernels",
                           lambda: bench.bench_kernels(
                               device, plan["kernel_n"], repeat=repeat, min_sample_s=sample,
                               overhead_s=res["op_overhead"]["plain_op_s"]))
    res["sparse"] = stage("sparse embedding update (SparseAdam)", lambda: bench.bench_sparse_update(
        device, **plan["sparse"], repeat=repeat, min_sample_s=sample))
    if not device.startswith("cuda"):  # CUDA's caching allocator reuses blocks
        res["fresh"] = stage("fresh output allocation", lambda: bench.bench_fresh(
            device, plan["fresh"], repeat=repeat, min_sample_s=sample))
    res["host_copy"] = stage("host-to-device copy", lambda: bench.bench_host_copy(
        device, plan["host"], repeat=repeat, min_sample_s=sample))
    if checked:  # several CPU threads
        res["thread_scaling"] = stage(
            f"thread scaling: kernels at 1 thread, exp/add at 1 and {threads} threads",
            lambda: thread_model.measure_scaling(
                device, threads, kernel_n=plan["kernel_n"], sizes=plan["thread_sizes"],
                repeat=repeat, sample_s=sample,
                op_overhead=lambda: _op_overhead(device, repeat, res["foreach"]["per_tensor_s"]),
                matmul_t=res["matmul_fp32"], conv_t=res["conv"],
                conv=lambda: bench.bench_conv(device, quick=quick, repeat=repeat,
                                              min_sample_s=sample, cases=plan["conv"])))
    if comm:
        from traincast.calibration.comm import bench_comm

        say("all-reduce and send/recv between 2 local processes (1 thread each)")
        res["comm"] = bench_comm(device, quick=quick or tiny, threads=1, sizes=plan["comm"])
    res["elapsed_s"] = time.perf_counter() - t_start
    # the share of the time other programs held the cores our threads were ready to run on
    res["runqueue_wait_fraction"] = bench.contention(wait_start, res["elapsed_s"], threads)
    res["stages"] = stages
    disturbed = [s for s in stages if s["runqueue_wait_fraction"] > CONTENTION_LIMIT] \
        if checked else []
    res["disturbed"] = [s["stage"] for s in disturbed]
    res["forced"] = bool(disturbed) and force
    if disturbed and not force:
        raise ContendedCalibration(disturbed, threads, output)
    text = catalog_text(res)
    if output is not None:
        write_text_whole(output, text)  # never leave a half-written catalog behind
    return {"catalog": text, "results": res, "path": str(output) if output else None}


def _plain(v: Any) -> Any:
    """A value as TOML takes it (tomli-w): numpy scalars and arrays to Python numbers and
    lists, tuples to lists, dicts key by key."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v.item() if isinstance(v, np.generic) else v


def _dotted(tables: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``{"gpu.local": {...}}`` -> ``{"gpu": {"local": {...}}}`` (TOML's dotted table names)."""
    out: dict[str, Any] = {}
    for name, values in tables.items():
        node = out
        for part in name.split(".")[:-1]:
            node = node.setdefault(part, {})
        node[name.split(".")[-1]] = _plain(values)
    return out


def device_vendor(device: str) -> str | None:
    """The vendor of the GPU a CUDA ``device`` is, as torch runs it: ``amd`` under ROCm
    (``torch.version.hip`` set: torch's ``cuda`` device is a HIP one), else ``nvidia``; None on
    the CPU. Written to the entry, it picks the libraries' defaults the model assumes
    (``kernels.vendor_of``)."""
    if not device.startswith("cuda"):
        return None
    import torch

    return "amd" if getattr(torch.version, "hip", None) else "nvidia"


def summarize(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The catalog tables (``gpu.local``, links, ``node.local``) from raw measurements."""
    o = res["op_overhead"]["training_op_s"]
    plain = res["op_overhead"]["plain_op_s"]  # what each microbenchmark call pays besides work
    gi, gp = _rate_curve(res["matmul_fp32"], plain)
    ci, cp = _rate_curve(res["conv"], plain)
    ew = res["elementwise"]
    eb, ebw = _rate_curve(ew, plain, amount="bytes", monotone=False)
    largest = max(r["size_bytes"] for r in ew)
    add_big = [r for r in ew if r["kernel"] == "add" and r["size_bytes"] == largest][0]
    low = res["matmul_low"]
    when = f"traincast calibrate {res['date']} on {res['device_name']}, torch {res['torch']}, " \
           f"{res['threads']} thread(s) per rank"
    gpu = {
        "fp32_tflops": float(max(r["tflops"] for r in res["matmul_fp32"])),
        f"{res['matmul_low_dtype']}_tflops": float(max(r["tflops"] for r in low)),
        "mem_bw_gbs": float(add_big["gbs"]),
        "op_overhead_us": o * 1e6,
        "gemm_intensity": gi, "gemm_tflops": gp / 1e12,
        "conv_intensity": ci, "conv_tflops": cp / 1e12,
        "elementwise_bytes": eb, "elementwise_gbs": ebw / 1e9,
        "kernel_gelems": {**{r["op"]: r["gelems"] for r in res["kernels"]},
                          "sparse_embedding_update": res["sparse"]["gelems"]},
        "foreach_tensor_us": res["foreach"]["per_tensor_s"] * 1e6,
        **_fresh_keys(res.get("fresh")),
        **_thread_keys(res),
        "device": str(res["device"]).split(":")[0],
        "default_node": "local",
        "source": f"{when}: best fp32/{res['matmul_low_dtype']} matmul, element-wise add on "
                  f"{largest / 1e6:.0f} MB operands; curves = medians net of per-op overhead",
        "description": res["device_name"],
        **({"vendor": res["vendor"]} if res.get("vendor") else {}),
    }
    hc = max(res["host_copy"], key=lambda r: r["size_bytes"])
    host_kind = "pinned host-to-device copy" if res["device"].startswith("cuda") else "memcpy"
    links: dict[str, dict[str, Any]] = {
        "local-host": {"bw_gbs": float(hc["gbs"]),
                       "source": f"{when}: {host_kind} of {hc['size_bytes'] / 1e6:.0f} MB"},
    }
    comm = res.get("comm")
    if comm:
        links["local-allreduce"] = {
            "bw_gbs": comm["allreduce_bw_bps"] / 1e9,
            "latency_us": comm["allreduce_latency_s"] * 1e6,
            "source": f"{when}: all-reduce bus bandwidth ({comm['backend']}, "
                      f"{comm['world_size']} local processes, loopback)"}
        links["local-loopback"] = {
            "bw_gbs": comm["p2p_bw_bps"] / 1e9, "latency_us": comm["p2p_latency_s"] * 1e6,
            "source": f"{when}: send/recv one way (gloo, 2 local processes, loopback)"}
    else:  # not measured: the node still needs links; they name their source
        for name in ("local-allreduce", "local-loopback"):
            links[name] = {"bw_gbs": float(hc["gbs"]), "stand_in": True,
                           "source": f"{when}: not measured (--no-comm); memcpy bandwidth"}
    ranks = res.get("ranks") or _local_ranks(res)
    node = {"gpu": "local", "gpus": ranks, "pcie": "local-host", "intra": "local-allreduce",
            "nic": "local-loopback",
            "source": f"{when}: {ranks} local rank(s)"}
    return {"gpu.local": gpu, **{f"link.{k}": v for k, v in links.items()}, "node.local": node,
            **host_floor_table(res)}


def host_floor_table(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """On a CUDA device, ``{"kernel_model": {"host_floor_us", "host_floor_source",
    "host_dispatch_kinds", "params"}}``:
    the median time of the plain op (``torch.add`` of two one-element tensors) timed alone between
    CUDA events (``bench.bench_op_alone``), as the kernel model's measured rows were and as its
    fitted floors are (the median of the least-work rows), is this host's dispatch of the
    simplest ATen op: the per-op floor ``d`` the kernel model gives every GPU once the file is
    merged (``kernels.op_floors_s``; the host issues each op in ``d r_x``, docs/model.md "The
    host queue"). Back to back the same call costs the host less (on an H200 host 9.7 µs,
    against 25 µs alone): a stream of calls overlaps what a lone call waits for, so that figure
    is not ``d``. ``params``: this host's dispatch ratios (``host_dispatch_ratios``, as
    ``dispatch_<kind>``), from the least-work op of each kind timed the same way;
    ``host_dispatch_kinds``: the kinds timed (the catalog then counts the host as calibrated,
    ``kernels.fit_trust``). On the CPU
    the call runs its kernel on the host, with no launch: no floor is written."""
    if not str(res["device"]).startswith("cuda") or "alone_op_s" not in res["op_overhead"]:
        return {}
    us = float(res["op_overhead"]["alone_op_s"]) * 1e6
    calls = res["op_overhead"].get("alone_op_calls")
    median_of = f"median of {calls} calls" if calls else "median of its calls"
    ratios = host_dispatch_ratios(res["op_overhead"].get("alone_kinds_s") or {}, us * 1e-6)
    timed = [k for k in ratios if k != "elementwise"]  # the pooled element-wise ratio is derived
    kinds = (f"; the dispatch ratios of {', '.join(timed)} "
             "from each kind's least-work op timed the same way, over the add"
             if ratios else "")
    return {"kernel_model": {
        "host_floor_us": us,
        "host_floor_source": f"traincast calibrate {res['date']} on {res['device_name']}, "
                             f"torch {res['torch']}: one-element torch.add timed alone between "
                             f"CUDA events, {median_of}, {us:.1f} µs (this host's "
                             "dispatch of the simplest op, as the kernel model's rows were "
                             f"timed){kinds}",
        **({"host_dispatch_kinds": timed,
            "params": {f"dispatch_{k}": v for k, v in ratios.items()}} if ratios else {})}}


def host_dispatch_ratios(kinds_s: dict[str, float], add_s: float) -> dict[str, float]:
    """This host's dispatch ratio ``r_x`` of each op kind timed alone (``bench_op_alone``):
    its median time over the add's (``add_s``, the floor ``d``), as the fit's stage 1 takes a
    measured GPU's (its least-work rows over its floor, ``kernel_fit.host_dispatch``), with
    ``elementwise`` (``kernel_fit.with_elementwise``). The merged ``[kernel_model.params]``
    then give every GPU this host's ratios, as ``host_floor_us`` gives it this host's floor
    (``kernels.op_floors_s``)."""
    from traincast.calibration.kernel_fit import with_elementwise

    if add_s <= 0:
        return {}
    return with_elementwise({k: float(t) / add_s for k, t in kinds_s.items()
                             if t > 0 and math.isfinite(t)})


def _thread_keys(res: dict[str, Any]) -> dict[str, Any]:
    """``threads`` (always, on the CPU), and with a thread-scaling measurement the 1-thread
    kernel rates ``kernel_gelems_1t`` and the grain ``thread_grain_elems``."""
    if res["device"].startswith("cuda"):
        return {}
    out: dict[str, Any] = {"threads": int(res["threads"])}
    ts = res.get("thread_scaling")
    if ts:  # grain 0 (no thread gain measured at any size): the T-thread rates everywhere
        out["kernel_gelems_1t"] = {r["op"]: r["gelems"] for r in ts["kernels_1t"]}
        out["thread_grain_elems"] = float(ts["grain_elems"])
    for kind, rows_key in (("gemm", "matmul_1t"), ("conv", "conv_1t")):
        if ts and ts.get(rows_key) and ts.get(f"{kind}_grain_flops", 0) > 0:
            _, rate_1t = _rate_curve(ts[rows_key], ts["op_overhead_1t"]["plain_op_s"])
            out[f"{kind}_tflops_1t"] = rate_1t / 1e12
            out[f"thread_{kind}_speedup"] = float(ts[f"{kind}_top_speedup"])
            out[f"thread_{kind}_grain_flops"] = float(ts[f"{kind}_grain_flops"])
            if ts.get(f"{kind}_rows"):  # GEMMs: thread speedup by output rows
                out[f"thread_{kind}_rows"] = [float(x) for x in ts[f"{kind}_rows"]]
                out[f"thread_{kind}_rows_speedup"] = [float(x) for x in ts[f"{kind}_rows_speedup"]]
    return out


def _fresh_keys(fresh: list[dict[str, Any]] | None) -> dict[str, Any]:
    """``fresh_bytes``/``fresh_gbs`` (first-touch cost of new outputs by size), when measured."""
    if not fresh:
        return {}
    xs, ys = curve_from_points([r["size_bytes"] for r in fresh], [r["gbs"] for r in fresh],
                               monotone=False)
    return {"fresh_bytes": xs, "fresh_gbs": ys}


def _local_ranks(res: dict[str, Any]) -> int:
    if res["device"].startswith("cuda"):
        import torch

        return max(torch.cuda.device_count(), 1)
    return max((os.cpu_count() or 1) // max(res["threads"], 1), 1)


def catalog_text(res: dict[str, Any]) -> str:
    """The catalog file (TOML) of one calibration: tables, then the raw record."""
    tables = summarize(res)
    head = (f"# traincast calibrate: {res['device_name']}, torch {res['torch']}, {res['date']}\n"
            "# Use: traincast predict --catalog THIS_FILE --node local ...\n"
            "# Every rate is the median of repeated runs after warm-up; spreads are\n"
            "# (p90 - p10) / median of the samples, in [calibration] below.\n\n")
    if res.get("forced"):
        head += ("# WARNING: written with --force although other programs held the cores during "
                 "these stages:\n" + "".join(
                     f"#   {s['stage']}: {s['runqueue_wait_fraction']:.0%}\n"
                     for s in res["stages"] if s["stage"] in res["disturbed"])
                 + "# Its figures are a busy machine's: calibrate again when it is quiet.\n\n")
    record = {"date": res["date"], "device": res["device"], "device_name": res["device_name"],
              "torch": res["torch"], "threads": res["threads"], "quick": res["quick"],
              "level": res.get("level", "quick" if res["quick"] else "full"),
              "allocator_kept": res.get("allocator_kept", False),
              "op_overhead_step_ops": res["op_overhead"].get("step_ops", 0),
              "elapsed_s": res.get("elapsed_s", 0.0),
              "runqueue_wait_fraction": res.get("runqueue_wait_fraction", 0.0),
              "stage_names": [s["stage"] for s in res.get("stages", [])],
              "stage_runqueue_wait_fraction": [s["runqueue_wait_fraction"]
                                               for s in res.get("stages", [])],
              "stage_tries": [s["tries"] for s in res.get("stages", [])],
              "disturbed_stages": list(res.get("disturbed", [])),
              "forced": bool(res.get("forced", False)),
              "op_overhead_training_us": res["op_overhead"]["training_op_s"] * 1e6,
              "op_overhead_training_spread": res["op_overhead"]["training_op_spread"],
              "op_overhead_plain_us": res["op_overhead"]["plain_op_s"] * 1e6,
              "matmul_mnk": [[r["m"], r["n"], r["k"]] for r in res["matmul_fp32"]],
              "matmul_layout": [r["layout"] for r in res["matmul_fp32"]],
              "matmul_tflops": [r["tflops"] for r in res["matmul_fp32"]],
              "matmul_spread": [r["spread"] for r in res["matmul_fp32"]],
              "matmul_low_dtype": res["matmul_low_dtype"],
              "matmul_low_n": [r["m"] for r in res["matmul_low"]],
              "matmul_low_tflops": [r["tflops"] for r in res["matmul_low"]],
              "conv_shape": [f"{r['shape']} {r['phase']}" for r in res["conv"]],
              "conv_tflops": [r["tflops"] for r in res["conv"]],
              "conv_spread": [r["spread"] for r in res["conv"]],
              "elementwise_kernel": [r["kernel"] for r in res["elementwise"]],
              "elementwise_operand_bytes": [r["size_bytes"] for r in res["elementwise"]],
              "elementwise_gbs": [r["gbs"] for r in res["elementwise"]],
              "elementwise_spread": [r["spread"] for r in res["elementwise"]],
              "kernel_op": [r["op"] for r in res["kernels"]],
              "kernel_spread": [r["spread"] for r in res["kernels"]],
              "foreach_tensor_spread": res["foreach"]["spread"],
              "sparse_update_rows": res["sparse"]["rows"],
              "sparse_update_spread": res["sparse"]["spread"],
              "fresh_spread": [r["spread"] for r in res.get("fresh", [])],
              "host_copy_bytes": [r["size_bytes"] for r in res["host_copy"]],
              "host_copy_gbs": [r["gbs"] for r in res["host_copy"]],
              "host_copy_spread": [r["spread"] for r in res["host_copy"]]}
    ts = res.get("thread_scaling")
    if ts:
        record.update({
            "op_overhead_training_1t_us": ts["op_overhead_1t"]["training_op_s"] * 1e6,
            "op_overhead_plain_1t_us": ts["op_overhead_1t"]["plain_op_s"] * 1e6,
            "op_overhead_plain_t_us": ts["plain_op_t_s"] * 1e6,
            "thread_sweep_elements": ts["sizes"],
            "thread_sweep_exp_1t_us": [t * 1e6 for t in ts["sweep_1t_s"]["exp"]],
            "thread_sweep_exp_t_us": [t * 1e6 for t in ts["sweep_t_s"]["exp"]],
            "thread_sweep_add_1t_us": [t * 1e6 for t in ts["sweep_1t_s"]["add"]],
            "thread_sweep_add_t_us": [t * 1e6 for t in ts["sweep_t_s"]["add"]],
            "thread_sweep_speedup": ts["speedup"],
            "thread_grain_elems": ts["grain_elems"],
            "matmul_1t_tflops": [r["tflops"] for r in ts.get("matmul_1t", [])],
            "matmul_thread_speedup": ts.get("gemm_speedup", []),
            "thread_gemm_grain_flops": ts.get("gemm_grain_flops", 0.0),
            "thread_gemm_rows": ts.get("gemm_rows", []),
            "thread_gemm_rows_speedup": ts.get("gemm_rows_speedup", []),
            "conv_1t_tflops": [r["tflops"] for r in ts.get("conv_1t", [])],
            "conv_thread_speedup": ts.get("conv_speedup", []),
            "thread_conv_grain_flops": ts.get("conv_grain_flops", 0.0)})
    comm = res.get("comm")
    if comm:
        record.update({
            "comm_backend": comm["backend"],
            "allreduce_bytes": [r["size_bytes"] for r in comm["allreduce"]],
            "allreduce_time_us": [r["time_s"] * 1e6 for r in comm["allreduce"]],
            "allreduce_spread": [r["spread"] for r in comm["allreduce"]],
            "p2p_bytes": [r["size_bytes"] for r in comm["p2p"]],
            "p2p_time_us": [r["time_s"] * 1e6 for r in comm["p2p"]],
            "p2p_spread": [r["spread"] for r in comm["p2p"]]})
    import tomli_w

    return head + tomli_w.dumps(_dotted({**tables, "calibration.local": record}))
