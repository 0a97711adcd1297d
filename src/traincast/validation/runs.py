"""Real training runs: one process, DistributedDataParallel, and a parameter server.

Each run builds the model with ``build(spec, batch_size)`` (same weights and inputs that the
prediction profiles), trains with the profiler's optimizer (Adam, foreach), and returns the
timed steps and, on the measuring rank, the ``torch.profiler`` breakdown
(traincast.validation.measure).

* ``single``: one process (this one).
* ``ddp``: ``world`` processes, ``DistributedDataParallel`` (gloo on the CPU, NCCL with one GPU
  per rank, gloo when ranks share one GPU); every rank trains on its own batch of the same
  size; a barrier before each timed step; rank 0's times.
* ``ps``: rank 0 is a parameter server holding the weights (host memory) and the optimizer;
  ranks 1..m are workers. A worker's step: input copy, forward, backward, copy of all
  gradients into one host buffer, send to the server, receive the updated weights, copy them
  back into the model. The server receives every worker's gradients in turn, averages them,
  takes one optimizer step and sends the weights to every worker (synchronous PS). Rank 1's
  times. gloo always: the server is a host process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from traincast.calibration.bench import contention, process_runqueue_wait_s, step_clock_for
from traincast.validation.measure import (
    keep_freed_memory,
    make_step,
    profile_breakdown,
    time_steps,
)


def crop_inputs(inputs: tuple, crop: tuple[tuple[int, int, int], ...]) -> tuple:
    """Shorter inputs: each ``(input index, dim, length)`` keeps the first ``length`` entries
    of that input along ``dim`` (fewer tokens, frames or pixels; the model is unchanged)."""
    out = list(inputs)
    for idx, dim, length in crop:
        out[idx] = out[idx].narrow(dim, 0, min(length, out[idx].shape[dim])).contiguous()
    return tuple(out)


def build(spec: str, batch_size: int,
          crop: tuple[tuple[int, int, int], ...] = ()) -> tuple[Any, tuple]:
    """A real (CPU) model and its inputs for a MODEL spec (``zoo:NAME`` or ``file.py:FUNC``),
    inputs cropped by ``crop_inputs``."""
    import torch

    torch.manual_seed(0)
    if spec.startswith("zoo:"):
        from traincast.zoo.registry import get_model

        model, inputs = get_model(spec[4:]).build_cpu(batch_size)
    else:
        from traincast.features.specs import load_spec

        model, inputs = load_spec(spec, batch_size)[:2]
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    return model, crop_inputs(tuple(inputs), tuple(tuple(c) for c in crop))


def _clock_name(device: str) -> str:
    return "wall" if device.startswith("cuda") else "wall minus run-queue wait"


class _Optimizers:
    """Several optimizers stepped as one (dense Adam + SparseAdam for sparse tables)."""

    def __init__(self, opts: list[Any]) -> None:
        self.opts = opts

    def step(self) -> None:
        for opt in self.opts:
            opt.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.opts:
            opt.zero_grad(set_to_none=set_to_none)


def optimizer_for(model: Any, params: list[Any] | None = None) -> _Optimizers:
    """The optimizers the profiler assumes for a training step (traincast.features.profile):
    Adam (foreach) for dense weights, SparseAdam for tables with sparse gradients."""
    from traincast.features.profile import embedding_tables, make_optimizers

    sparse = {id(p) for p, is_sparse in embedding_tables(model).values() if is_sparse}
    params = params if params is not None else [p for p in model.parameters()
                                                if p.requires_grad]
    return _Optimizers(make_optimizers("adam", [p for p in params if id(p) not in sparse],
                                        [p for p in params if id(p) in sparse]))


def single(args: dict[str, Any]) -> dict[str, Any]:
    """Train in this process; ``{"times", "breakdown"}``."""
    import torch

    torch.set_num_threads(int(args.get("threads", 1)))
    keep_freed_memory()
    device = args["device"]
    model, inputs = build(args["model"], args["batch_size"], args.get("crop", ()))
    model = model.to(device)
    model.train()
    opt = optimizer_for(model)
    step = make_step(model, inputs, opt, device)
    wait0, wall0 = process_runqueue_wait_s(), time.perf_counter()
    timed = time_steps(step, device, steps=args["steps"], warmup=args["warmup"],
                       clock=step_clock_for(device))
    # other programs' share of the cores our threads wanted, over warm-up and timed steps
    busy = contention(wait0, time.perf_counter() - wall0, torch.get_num_threads())
    bd = profile_breakdown(step, device, steps=args["profile_steps"]) \
        if args["profile_steps"] else None
    return {**timed, "clock": _clock_name(device), "breakdown": bd,
            "runqueue_wait_fraction": busy}


def ddp_target(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any]:
    """One rank of a DistributedDataParallel run (runs inside traincast.calibration.dist)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: N817

    keep_freed_memory()
    import torch

    device = "cpu"
    if args["device"].startswith("cuda"):  # one GPU per rank; ranks share a single GPU (gloo)
        device = f"cuda:{rank % torch.cuda.device_count()}"
    model, inputs = build(args["model"], args["batch_size"], args.get("crop", ()))
    model = model.to(device).train()
    ddp = DDP(model, device_ids=[torch.device(device).index] if device != "cpu" else None)
    opt = optimizer_for(model)
    step = make_step(ddp, inputs, opt, device)
    return _time_and_profile(step, device, args, rank, profiled_rank=0, barrier=dist.barrier)


def ps_target(rank: int, world: int, args: dict[str, Any]) -> dict[str, Any] | None:
    """One rank of a synchronous parameter-server run: rank 0 serves, the others work."""
    import torch
    import torch.distributed as dist
    from torch.nn.utils import parameters_to_vector

    keep_freed_memory()
    workers = list(range(1, world))
    total = args["warmup"] + args["steps"] + args["profile_steps"]
    model, inputs = build(args["model"], args["batch_size"], args.get("crop", ()))
    params = [p for p in model.parameters() if p.requires_grad]
    if rank == 0:
        weights = torch.nn.Parameter(parameters_to_vector(params).detach().clone())
        opt = optimizer_for(model, [weights])
        incoming = torch.empty_like(weights.data)
        for _ in range(total):
            acc = torch.zeros_like(weights.data)
            for w in workers:
                dist.recv(incoming, src=w)
                acc += incoming
            weights.grad = acc.div_(len(workers))
            opt.step()
            for w in workers:
                dist.send(weights.data, dst=w)
        return None
    device = args["device"] if args["device"].startswith("cuda") else "cpu"
    if device.startswith("cuda"):
        device = f"cuda:{(rank - 1) % torch.cuda.device_count()}"
    model = model.to(device).train()
    params = [p for p in model.parameters() if p.requires_grad]
    host_weights = torch.empty(sum(p.numel() for p in params))

    def exchange() -> None:
        grads = torch.cat([p.grad.reshape(-1) for p in params]).to("cpu")  # GPU -> host
        dist.send(grads, dst=0)
        dist.recv(host_weights, src=0)
        src = host_weights.to(device)  # host -> GPU (on the CPU: the same buffer)
        with torch.no_grad():
            offset = 0
            for p in params:  # copy back into the model (a memcpy of B bytes on the CPU)
                p.copy_(src[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
        for p in params:
            p.grad = None

    step = make_step(model, inputs, None, device, after_backward=exchange)
    return _time_and_profile(step, device, args, rank, profiled_rank=1)


def _time_and_profile(step: Callable[[], None], device: str, args: dict[str, Any], rank: int,
                      profiled_rank: int, barrier: Callable[[], Any] | None = None
                      ) -> dict[str, Any]:
    """Time the steps on every rank; one rank also profiles its steps while the others step
    along (a collective needs every rank)."""
    timed = time_steps(step, device, steps=args["steps"], warmup=args["warmup"],
                       barrier=barrier, clock=step_clock_for(device))
    bd = None
    if args["profile_steps"]:
        if rank == profiled_rank:
            bd = profile_breakdown(step, device, steps=args["profile_steps"])
        else:
            for _ in range(args["profile_steps"]):
                step()
    return {**timed, "clock": _clock_name(device), "breakdown": bd}
