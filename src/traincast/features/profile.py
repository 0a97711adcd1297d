"""Profile one full training step of a real model without a GPU: the job's features.

``profile(model, inputs)`` runs forward, the loss (the model's scalar output, else the sum of
its outputs), backward and one optimizer step on the ``meta`` device — shapes and dtypes only, no
memory — and captures every kernel (traincast.features.capture). The record it returns holds the
features (docs/profile.md) and, with ``ops=True``, the per-op table. ``profile_model(spec)``
builds the model first from ``zoo:NAME``, ``hf:CONFIG`` or ``path/file.py:FUNC``.

A model that fails on meta is profiled on CPU tensors at batch 2 and 3 and every batch-dependent
quantity is extrapolated linearly, f(B) = f(2) + (f(3) - f(2)) (B - 2) (f(3) B / 3 and no
per-op table where the two runs issue different forward ops; a batch under 3 is run as it
is); the record says so in ``method`` and ``notes``. The full rules: docs/profile.md.
"""

from __future__ import annotations

import contextlib
import copy
import math
import sys
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten, tree_map

from traincast.bounds import BATCH_MAX
from traincast.errors import TraincastError
from traincast.features import meta_kernels  # noqa: F401  (registers missing meta kernels)
from traincast.features.amp import ForwardRewrite
from traincast.features.capture import Capture, RecurrentCalls
from traincast.features.ops import OpRecord, fused_memory_bytes
from traincast.features.recurrent import extrapolated_call

OPTIMIZERS = ("adam", "sgd", "none")
"""``none``: forward and backward only (no optimizer step, no optimizer state)."""
ATTENTIONS = ("eager", "sdpa")
"""Attention implementations ``profile_model(attention=...)`` selects (``--attention``)."""
AMP_DTYPE = torch.float16
FALLBACK_MAX_PARAM_BYTES = 4e9


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def make_optimizers(name: str, dense: list[nn.Parameter],
                     sparse: list[nn.Parameter]) -> list[torch.optim.Optimizer]:
    """The step's optimizers: Adam (2 states per weight) or SGD with momentum 0.9 for dense
    weights; tables with sparse gradients get their sparse counterpart (SparseAdam, plain SGD).
    ``none``: no optimizer (a forward + backward step)."""
    if name not in OPTIMIZERS:
        raise TraincastError(f"unknown optimizer {name!r}",
                             hint=f"use one of {', '.join(OPTIMIZERS)}")
    opts: list[torch.optim.Optimizer] = []
    if name == "none":
        return opts
    if dense:
        opts.append(torch.optim.Adam(dense, lr=1e-4, foreach=True) if name == "adam" else
                    torch.optim.SGD(dense, lr=1e-2, momentum=0.9, foreach=True))
    if sparse:
        opts.append(torch.optim.SparseAdam(sparse, lr=1e-4) if name == "adam" else
                    torch.optim.SGD(sparse, lr=1e-2))
    return opts


# rows (read, written) per touched row of a sparse table when the optimizer applies it:
# SGD reads the gradient and weight rows and writes the weight row; lazy Adam (SparseAdam) also
# reads and writes the two moment rows
SPARSE_UPDATE_ROWS = {"sgd": (2, 1), "adam": (4, 3)}  # none: no update (no record)


def loss_of(out: Any) -> torch.Tensor:
    """The model's scalar output (or its ``loss``), else the sum of its floating outputs that
    have a gradient, at any depth of nested tuples, lists and dicts."""
    if isinstance(out, torch.Tensor):
        if not (out.is_floating_point() and out.requires_grad):
            raise TraincastError(
                f"the model returned a {_dtype_name(out.dtype)} tensor without a gradient "
                "(nothing to train)", hint="return the loss, logits or another floating "
                "tensor computed from the trainable parameters")
        return out.reshape(()) if out.numel() == 1 else out.sum()
    loss = getattr(out, "loss", None) if not isinstance(out, dict) else out.get("loss")
    if isinstance(loss, torch.Tensor):
        return loss.reshape(()) if loss.numel() == 1 else loss.sum()
    values = out.to_tuple() if hasattr(out, "to_tuple") else out
    parts = [v.sum() for v in tree_flatten(values)[0]  # at any depth: ((a, b), [c], {"d": d})
             if isinstance(v, torch.Tensor) and v.is_floating_point() and v.requires_grad]
    if not parts:
        raise TraincastError("the model returned no floating tensor with a gradient to take a "
                             f"loss of ({type(out).__name__})",
                             hint="return the loss, or outputs computed from the trainable "
                                  "parameters")
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def embedding_tables(model: nn.Module) -> dict[str, tuple[nn.Parameter, bool]]:
    """Weights of nn.Embedding / nn.EmbeddingBag: {name: (weight, gradient is sparse)}, each
    weight once (under its first module's name).

    Every such weight is an embedding table whatever its gradient layout: ``sparse=True``
    (a gradient and an update limited to the rows a batch looks up) or dense (a gradient over
    all rows, as DDP all-reduces it). The profile drops from the tables those a forward op other
    than a lookup also reads (an output projection tied to the token embedding, as in GPT-2 and
    BERT): their gradient covers every row, so they are dense weights: the capture
    lists them (``traincast.features.capture.Capture.shared_tables``) and ``embedding_features``
    leaves them out.
    """
    tables: dict[str, tuple[nn.Parameter, bool]] = {}
    seen: set[int] = set()
    for mod_name, mod in model.named_modules():
        if isinstance(mod, nn.Embedding | nn.EmbeddingBag) and id(mod.weight) not in seen:
            seen.add(id(mod.weight))
            tables[f"{mod_name}.weight".lstrip(".")] = (mod.weight, bool(mod.sparse))
    return tables


def _storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _capture_step(model: nn.Module, inputs: Sequence[Any], device: str, optimizer: str,
                  amp: bool, fused_dropout: bool = True) -> dict[str, Any]:
    """Run and capture one training step; raw measurements (no extrapolation)."""
    tables = embedding_tables(model)
    sparse_ids = {id(p) for p, sparse in tables.values() if sparse}
    params = [p for p in model.parameters() if p.requires_grad]
    capture = Capture(device, {_storage_key(p): n for n, (p, _) in tables.items()})
    dev_inputs = _to_device(inputs, device, capture)
    param_keys = {_storage_key(p) for p in model.parameters()}
    param_keys |= {_storage_key(x) for x in input_tensors(dev_inputs)}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key not in param_keys:
            saved[key] = max(saved.get(key, 0), t.untyped_storage().nbytes())
        return t

    for p in params:
        p.grad = None
    opts = make_optimizers(optimizer, [p for p in params if id(p) not in sparse_ids],
                            [p for p in params if id(p) in sparse_ids])
    model.train()
    with capture, RecurrentCalls(capture):
        capture.phase = "forward"
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
                ForwardRewrite(AMP_DTYPE if amp else None, fused_dropout):
            loss = loss_of(model(*dev_inputs))
        capture.phase = "backward"
        loss.backward()
    for opt in opts:  # the first step builds the state; the captured one is a steady step
        opt.step()
    # the step counters are host tensors on a GPU too (not kernels), also when run on CPU
    capture.host_keys = {_storage_key(v) for opt in opts for s in opt.state.values()
                         for k, v in s.items() if k == "step" and isinstance(v, torch.Tensor)}
    with capture:
        capture.phase = "optimizer"
        for opt in opts:
            opt.step()
    state_bytes = sum(_nbytes(v) for opt in opts for s in opt.state.values()
                      for k, v in s.items() if isinstance(v, torch.Tensor) and k != "step")

    rows_touched = _rows_touched(tables, capture)
    records = capture.records
    grads = sum(_nbytes(p.grad) for p in params if p.grad is not None and id(p) not in sparse_ids)
    for name, (p, sparse) in tables.items():
        if sparse and name in rows_touched:
            recs, grad_b = _sparse_update_records(name, p, capture.lookups[name],
                                                  rows_touched[name], optimizer)
            records += recs
            grads += grad_b
    shared = sorted(capture.shared_tables)
    return {"records": records, "activations": sum(saved.values()), "grads": grads,
            "optimizer": state_bytes, "rows_touched": rows_touched, "shared_tables": shared,
            "rows_bounded": sorted(n for n in rows_touched if n not in capture.rows_touched
                                   and n not in shared)}


def _to_device(inputs: Sequence[Any], device: str, capture: Capture) -> tuple:
    """The inputs with every tensor, at any depth (dicts, lists), on ``device``; integer ones
    keep their CPU values as shadows (``Capture.add_shadow``)."""
    def move(x: torch.Tensor) -> torch.Tensor:
        moved = x.to(device)
        if device != "cpu":
            capture.add_shadow(moved, x)
        return moved

    return map_tensors(move, tuple(inputs))


def _rows_touched(tables: Mapping[str, Any], capture: Capture) -> dict[str, int]:
    """Distinct rows each table's lookups touched (the bound without index values)."""
    rows = {}
    for name in tables:
        if name in capture.rows_touched:
            rows[name] = int(torch.unique(torch.cat(capture.rows_touched[name])).numel())
        elif name in capture.rows_bound:
            rows[name] = capture.rows_bound[name]
    return rows


def _sparse_update_records(name: str, weight: nn.Parameter, lookups: int, rows: int,
                           optimizer: str) -> tuple[list[OpRecord], int]:
    """Sparse-gradient tables: their backward and update, costed per row (meta has no sizes).

    Backward turns the output gradient of each lookup into one gradient row (read + write
    ``lookups`` rows); the update coalesces them (read ``lookups`` rows, write ``rows`` unique
    rows) and applies the optimizer to the touched rows only (SPARSE_UPDATE_ROWS; optimizer
    ``none``: no update). Returns the records and the gradient's bytes (one row per lookup
    plus its index).
    """
    row = math.prod(weight.shape[1:]) * weight.element_size()
    dtype = _dtype_name(weight.dtype)
    shape = "x".join(map(str, weight.shape))
    grad = lookups * (row + 8)
    backward = OpRecord("sparse_embedding_backward", "backward", 0, lookups * row,
                        lookups * row, "memory", False, dtype, shape)
    if optimizer == "none":
        return [backward], grad
    read_rows, written_rows = SPARSE_UPDATE_ROWS[optimizer]
    update = OpRecord("sparse_embedding_update", "optimizer", 0,
                      (lookups + read_rows * rows) * row, (rows + written_rows * rows) * row,
                      "memory", False, dtype, shape)
    return [backward, update], grad


def _aggregate(records: list[OpRecord]) -> dict[str, int]:
    agg = {"flops_forward": 0, "flops_compute_bound": 0, "flops_total": 0,
           "bytes_memory_bound": 0, "bytes_compute_bound": 0, "n_ops": len(records)}
    for r in records:
        agg["flops_total"] += r.flops
        if r.phase == "forward":
            agg["flops_forward"] += r.flops
        if r.bound == "compute":
            agg["flops_compute_bound"] += r.flops
            agg["bytes_compute_bound"] += r.bytes_read + r.bytes_written
        else:
            agg["bytes_memory_bound"] += r.bytes_read + r.bytes_written
    agg["bytes_memory_bound_fused"] = fused_memory_bytes(records)
    return agg


def input_tensors(inputs: Any) -> list[torch.Tensor]:
    """The tensors of a model's inputs, at any depth (a dict or list of tensors inside the
    tuple of positional inputs included; mappings as ``map_tensors`` opens them)."""
    found: list[torch.Tensor] = []
    for x in tree_flatten(inputs)[0]:
        if isinstance(x, torch.Tensor):
            found.append(x)
        elif isinstance(x, Mapping):  # a mapping torch's pytree keeps whole (BatchEncoding)
            found += input_tensors(list(x.values()))
    return found


def map_tensors(fn: Callable[[torch.Tensor], Any], inputs: Any) -> Any:
    """``inputs`` with ``fn(t)`` for every tensor ``t`` at any depth of its tuples, lists and
    mappings: the dicts torch's pytree opens, and the mappings it keeps whole (``UserDict``,
    transformers' ``BatchEncoding``), copied with their type; other leaves as they are."""
    def leaf(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return fn(x)
        if isinstance(x, MutableMapping):
            new = copy.copy(x)
            for key, value in x.items():
                new[key] = map_tensors(fn, value)
            return new
        return x

    return tree_map(leaf, inputs)


def _batch_of(inputs: Sequence[Any]) -> int:
    """The batch of inputs given without one: the leading size of the first tensor."""
    for x in input_tensors(inputs):
        if x.dim() > 0:
            return int(x.shape[0])
    return 1


def embedding_features(model: nn.Module, rows_touched: Mapping[str, int],
                       shared: Sequence[str] = ()) -> dict[str, int]:
    """Embedding features from the tables' rows touched (unique ids looked up in the step).

    Tables = ``embedding_tables`` less ``shared`` (tied to a non-lookup op: dense weights).
    ``params_embedding`` = their elements; over the trainable ones, with row bytes
    r = (elements per row) x element size:
    ``embedding_bytes_touched`` = sum of rows_touched x r (the rows a parameter server or PEARL
    moves: unique rows, as a coalesced sparse gradient holds them), and
    ``embedding_allreduce_bytes`` = sum of rows_touched x r for sparse-gradient tables plus the
    whole table's bytes for dense-gradient ones (what DDP's AllReduce moves); ``weight_bytes`` =
    bytes of every other trainable parameter.
    """
    tables = {n: t for n, t in embedding_tables(model).items() if n not in set(shared)}
    table_ids = {id(p) for p, _ in tables.values()}
    touched = {n: rows_touched.get(n, 0) * math.prod(p.shape[1:]) * p.element_size()
               for n, (p, _) in tables.items() if p.requires_grad}
    return {"params_embedding": sum(p.numel() for p, _ in tables.values()),
            "weight_bytes": sum(_nbytes(p) for p in model.parameters()
                                if id(p) not in table_ids and p.requires_grad),
            "embedding_bytes_touched": sum(touched.values()),
            "embedding_allreduce_bytes": sum(touched[n] if sparse else _nbytes(p)
                                             for n, (p, sparse) in tables.items()
                                             if n in touched)}


def _record(model: nn.Module, inputs: Sequence[Any], raw: dict[str, Any], *, batch: int,
            optimizer: str, amp: bool, ops: bool) -> dict[str, Any]:
    params = list(model.parameters())
    n_params = sum(p.numel() for p in params)
    emb = embedding_features(model, raw["rows_touched"], raw["shared_tables"])
    n_emb = emb["params_embedding"]
    records = raw["records"]
    dtype = params[0].dtype if params else torch.float32
    rec: dict[str, Any] = {
        "model": type(model).__name__, "params": n_params, "params_dense": n_params - n_emb,
        "params_embedding": n_emb, "batch_size": batch, "seq_len": None, "attention": None,
        "dtype": _dtype_name(AMP_DTYPE) if amp else _dtype_name(dtype), "amp": amp,
        "optimizer": optimizer, **_aggregate(records),
        "weight_bytes": emb["weight_bytes"],
        "embedding_bytes_touched": emb["embedding_bytes_touched"],
        "embedding_allreduce_bytes": emb["embedding_allreduce_bytes"],
        "embedding_rows_touched": raw["rows_touched"],
        "embedding_tables_shared": raw["shared_tables"],
        "input_bytes": sum(_nbytes(x) for x in input_tensors(inputs)),
        "memory_bytes": {"weights": sum(_nbytes(p) for p in params), "grads": raw["grads"],
                         "optimizer": raw["optimizer"], "activations": raw["activations"]},
        "method": "meta", "notes": [],
    }
    if raw["rows_bounded"]:
        rec["notes"].append("embedding ids without values (meta): rows touched of "
                            f"{', '.join(raw['rows_bounded'])} bounded by one row per lookup")
    if ops:
        rec["ops"] = [r.row() for r in records]
    return rec


def profile(model: nn.Module, inputs: Sequence[Any] | Mapping[str, Any] | torch.Tensor, *,
            optimizer: str = "adam", amp: bool = False, ops: bool = False,
            fused_dropout: bool = True) -> dict[str, Any]:
    """Features of one training step of ``model`` on ``inputs`` (the record of docs/profile.md).

    ``inputs``: a tensor, a tuple of positional inputs, or a dict of keyword inputs.
    ``model`` may live on CPU or meta; its parameters are moved to meta (no data kept), inputs
    too, with integer inputs' values kept to count embedding rows. The model is not modified:
    a meta copy is profiled. If the step fails on meta, the model is run on CPU at batch 2 and 3
    (inputs sliced along dim 0) and the result extrapolated linearly to the full batch.
    ``fused_dropout``: dropout as a GPU runs it (one fused kernel each way, the default); False
    for a step that runs on a CPU (``bernoulli_``, ``div_``, ``mul``: docs/profile.md).
    """
    model, inputs = as_positional(model, inputs)
    return _profile(model, inputs, optimizer=optimizer, amp=amp, ops=ops,
                    fused_dropout=fused_dropout)


class KeywordInputs(nn.Module):
    """Calls ``model(**dict(zip(keys, tensors)), **constants)``: keyword inputs as positional
    ones (``constants``: fixed keyword arguments that are not tensors, e.g. flags)."""

    def __init__(self, model: nn.Module, keys: tuple[str, ...],
                 constants: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.model = model
        self.keys = keys
        self.constants = dict(constants or {})

    def forward(self, *tensors: Any) -> Any:
        return self.model(**dict(zip(self.keys, tensors, strict=True)), **self.constants)


def as_positional(model: nn.Module, inputs: Any) -> tuple[nn.Module, tuple]:
    """(model, inputs tuple) from a tensor, a sequence of inputs or a dict of keyword inputs."""
    if isinstance(inputs, torch.Tensor):
        return model, (inputs,)
    if isinstance(inputs, Mapping):
        return KeywordInputs(model, tuple(inputs)), tuple(inputs.values())
    return model, tuple(inputs)


def _profile(model: nn.Module, inputs: tuple, *, optimizer: str, amp: bool, ops: bool,
             build: Callable[[int], tuple[nn.Module, tuple]] | None = None,
             batch: int | None = None, fused_dropout: bool = True) -> dict[str, Any]:
    """Capture on meta; on failure, on CPU at batch 2 and 3 (``build(n)`` rebuilds the model
    and its inputs at batch n; without it, the model is copied and the inputs sliced).
    ``batch``: the batch the inputs were built at, in ``build``'s units (a graph model's batch
    is not its edge list's length); default: the leading size of the first input tensor."""
    make_optimizers(optimizer, [], [])  # validates the name
    batch = batch or _batch_of(inputs)
    try:
        meta_model = _on_meta(model)
        raw = _capture_step(meta_model, inputs, "meta", optimizer, amp, fused_dropout)
        return _record(meta_model, inputs, raw, batch=batch, optimizer=optimizer, amp=amp,
                       ops=ops)
    except TraincastError:
        raise
    except Exception as exc:  # noqa: BLE001 - any op without a meta kernel lands here
        reason = _one_line(exc)
    try:
        return _profile_cpu_extrapolated(model, inputs, batch, reason, optimizer=optimizer,
                                         amp=amp, ops=ops, build=build,
                                         fused_dropout=fused_dropout)
    except TraincastError:
        raise
    except Exception as exc:  # noqa: BLE001
        on_cpu = _one_line(exc)
        raise TraincastError(f"{STEP_FAILS} ({on_cpu}"
                             + ("" if on_cpu == reason else f"; on meta: {reason}") + ")",
                             hint="model(*inputs) must run forward and backward on CPU: check "
                                  "that the inputs match forward()'s arguments and shapes; "
                                  "--debug shows the traceback") from exc


STEP_FAILS = "the training step fails on CPU too"
"""How the error of a step that runs neither on meta nor on CPU begins."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def _on_meta(model: nn.Module) -> nn.Module:
    """A meta-device copy of ``model`` (the original is left as it is; no data is copied)."""
    tensors = [*model.parameters(), *model.buffers()]
    if all(t.device.type == "meta" for t in tensors):
        return model
    return _copy_with(model, lambda t: torch.empty_like(t, device="meta"))


def _copy_with(model: nn.Module, make: Callable[[torch.Tensor], torch.Tensor]) -> nn.Module:
    """A copy of ``model`` whose parameters and buffers are ``make(t)``: each tensor made
    once, so weights shared by several modules (a tied output layer) stay shared."""
    memo: dict[int, Any] = {}
    for t in [*model.parameters(), *model.buffers()]:
        new = make(t)
        memo[id(t)] = (nn.Parameter(new, requires_grad=t.requires_grad)
                       if isinstance(t, nn.Parameter) else new)
    return copy.deepcopy(model, memo)


def _on_cpu(model: nn.Module) -> nn.Module:
    """A CPU copy of ``model`` (ties kept); meta tensors have no values to keep: parameters
    get N(0, 0.02) values and buffers zeros."""
    def make(t: torch.Tensor) -> torch.Tensor:
        if t.device.type != "meta":
            return t.detach().to("cpu", copy=True)
        new = torch.zeros_like(t, device="cpu")
        values = isinstance(t, nn.Parameter) and (new.is_floating_point() or new.is_complex())
        return new.normal_(0.0, 0.02) if values else new

    return _copy_with(model, make)


def _param_bytes(model: nn.Module) -> int:
    return sum(_nbytes(p) for p in model.parameters())


def _slice_batch(inputs: tuple, batch: int, n: int) -> tuple:
    """The first ``n`` samples of every input tensor (at any depth) whose leading size is
    ``batch``, on CPU; other inputs as they are. Each is a fresh leaf (``requires_grad``
    kept), as the meta run's copies are: a slice of the caller's tensor would add its
    ``slice_backward``, and a gradient kept from the run before, the accumulation into it."""
    def cut(x: torch.Tensor) -> torch.Tensor:
        part = x[:n] if x.dim() > 0 and x.shape[0] == batch else x
        return part.to("cpu").detach().clone().requires_grad_(x.requires_grad)

    return map_tensors(cut, tuple(inputs))


def _optimizer_part(rows: Sequence[Mapping[str, Any]], scale: float = 1.0) -> dict[str, float]:
    """The optimizer step's share of a step's aggregates (``_aggregate``'s keys), from its
    per-op rows of phase ``optimizer`` but a sparse table's update (which grows with the
    lookups): what does not grow with the batch, times ``scale``."""
    opt = [o for o in rows if o.get("phase") == "optimizer"
           and o.get("op") != "sparse_embedding_update"]
    compute = [o for o in opt if o.get("bound") == "compute"]
    memory = [o for o in opt if o.get("bound") != "compute"]
    return {"flops_total": scale * sum(o["flops"] for o in opt),
            "flops_compute_bound": scale * sum(o["flops"] for o in compute),
            "bytes_compute_bound": scale * sum(o["bytes_read"] + o["bytes_written"]
                                               for o in compute),
            "bytes_memory_bound": scale * sum(o["bytes_read"] + o["bytes_written"]
                                              for o in memory)}


def _sparse_grad_bytes(rows: Sequence[Mapping[str, Any]]) -> float:
    """The sparse tables' gradient bytes of a step, from its ``sparse_embedding_backward``
    rows: one row and its int64 index per lookup (``_sparse_update_records``), lookups =
    bytes read / row bytes."""
    out = 0.0
    for o in rows:
        if o.get("op") == "sparse_embedding_backward":
            row = math.prod(int(d) for d in str(o["shapes"]).split("x")[1:]) \
                * torch.empty((), dtype=getattr(torch, str(o["dtype"]))).element_size()
            out += o["bytes_read"] / row * (row + 8)
    return out


def _profile_cpu_extrapolated(model: nn.Module, inputs: tuple, batch: int, reason: str, *,
                              optimizer: str, amp: bool, ops: bool,
                              build: Callable[[int], tuple[nn.Module, tuple]] | None = None,
                              fused_dropout: bool = True) -> dict[str, Any]:
    """Capture on CPU at two batches ``n1 < n2`` and extrapolate linearly to ``batch``:
    ``f(B) = f(n1) + (f(n2) - f(n1)) (B - n1) / (n2 - n1)`` where both runs issue the same
    forward ops, else ``f(B) = o + (f(n2) - o) B / n2`` with ``o`` the optimizer step's part
    (no per-op table; the dense gradients, optimizer state and step of batch n2 raised to
    every dense trainable weight's, the sparse ones scaled per sample); a table's rows
    touched at most its rows. ``(n1, n2)`` = (2, 3) from batch 3 on (a batch of
    1 takes other kernel paths than a larger one: PyTorch skips copies of size-1
    dimensions), else the batch itself, alone."""
    size = _param_bytes(model)
    if size > FALLBACK_MAX_PARAM_BYTES:
        raise TraincastError(
            f"profiling on meta failed ({reason}) and the model, "
            f"{size / 1e9:.3g} GB of parameters, is over the "
            f"{FALLBACK_MAX_PARAM_BYTES / 1e9:.3g} GB the CPU run takes",
            hint="an op whose output's shape depends on tensor values, or one without a meta "
                 "kernel, cannot run on meta: profile a smaller "
                 "config of the model (fewer layers), or price a transformer with plan or "
                 "predict --arch hybrid (docs/parallelism.md)")
    points = []
    sizes = (2, 3) if batch >= 3 else (batch, batch)
    for n in dict.fromkeys(sizes):
        if build is not None:
            m, x = build(n)
        else:
            m = _on_cpu(model)
            x = _slice_batch(inputs, batch, n)
        raw = _capture_step(m, x, "cpu", optimizer, amp=False, fused_dropout=fused_dropout)
        points.append(_record(m, x, raw, batch=n, optimizer=optimizer, amp=False, ops=True))
    r1, r2 = points if len(points) == 2 else (points[0], copy.deepcopy(points[0]))
    n1, n2 = sizes
    out = copy.deepcopy(r2)
    rows1, rows2 = r1.pop("ops"), out.pop("ops")
    # the same forward ops at both batches: every quantity is affine in the batch; ops that
    # depend on the data (routing that skips an empty expert, a branch on a value) change the
    # sequence, and then each sample's forward and backward cost what one of batch n2's did
    # (the optimizer step's stays: it does not see the batch)
    def forward(rows: list[dict[str, Any]]) -> list[str]:
        return [o["op"] for o in rows if o.get("phase") == "forward"]

    same = forward(rows1) == forward(rows2)
    same_rows = [o["op"] for o in rows1] == [o["op"] for o in rows2]

    def affine(a: float, b: float) -> int:
        """``f(B) = f(n1) + (f(n2) - f(n1)) (B - n1) / (n2 - n1)``, at least 0; ``f(n2)``
        measured at the batch itself."""
        if n1 == n2:
            return round(b)
        return max(0, round(a + (b - a) * (batch - n1) / (n2 - n1)))

    def per_sample(b: float, fixed: float = 0.0) -> int:
        """``f(B) = fixed + (f(n2) - fixed) B / n2``: the step's batch-dependent part scaled
        per sample, ``fixed`` (the optimizer step's) kept."""
        return max(0, round(fixed + (b - fixed) * batch / n2))

    tables = embedding_tables(model)
    # where the ops differ, a weight batch n2 left without a gradient (an expert no sample
    # picked) gets one at the full batch, its optimizer state and update too: the dense part
    # of batch n2's gradient, state and step scaled up to every dense trainable weight's
    dense = sum(_nbytes(p) for p in model.parameters() if p.requires_grad
                and id(p) not in {id(w) for w, sparse in tables.values() if sparse})
    sparse2 = _sparse_grad_bytes(rows2)
    dense2 = r2["memory_bytes"]["grads"] - sparse2
    grown = max(1.0, dense / dense2) if dense2 > 0 else 1.0
    fixed = _optimizer_part(rows2, grown) if not same else {}
    for key in ("flops_forward", "flops_compute_bound", "flops_total", "bytes_memory_bound",
                "bytes_compute_bound", "input_bytes"):
        out[key] = affine(r1[key], r2[key]) if same else per_sample(r2[key], fixed.get(key, 0))
    out["bytes_memory_bound_fused"] = affine(r1["bytes_memory_bound_fused"],
                                             r2["bytes_memory_bound_fused"]) if same else round(
        r2["bytes_memory_bound_fused"] * out["bytes_memory_bound"]
        / max(r2["bytes_memory_bound"], 1))
    mem = out["memory_bytes"]
    mem["activations"] = affine(r1["memory_bytes"]["activations"], mem["activations"]) \
        if same else per_sample(mem["activations"])
    if same:  # a sparse gradient grows with the lookups
        mem["grads"] = affine(r1["memory_bytes"]["grads"], mem["grads"])
    else:
        mem["grads"] = round(dense2 * grown + sparse2 * batch / n2)
        mem["optimizer"] = round(mem["optimizer"] * grown)
    extrapolate = affine if same else (lambda _, b: per_sample(b))
    out["embedding_rows_touched"] = {  # a table has no more rows than it holds
        k: min(extrapolate(r1["embedding_rows_touched"].get(k, 0), v),
               int(tables[k][0].shape[0]) if k in tables else v * batch)
        for k, v in r2["embedding_rows_touched"].items()}
    emb = embedding_features(model, out["embedding_rows_touched"],
                             out["embedding_tables_shared"])
    out["embedding_bytes_touched"] = emb["embedding_bytes_touched"]
    out["embedding_allreduce_bytes"] = emb["embedding_allreduce_bytes"]
    out["batch_size"] = batch
    out["method"] = "cpu-extrapolated"
    at = f"batch {n1} and {n2}" if n1 != n2 else f"batch {n1}"
    out["notes"] = [f"meta capture failed ({reason}); profiled on CPU at {at}"
                    + ("" if n1 == n2 else f" and extrapolated linearly to batch {batch}")
                    if same else
                    f"meta capture failed ({reason}); profiled on CPU at {at}, whose op "
                    "sequences differ (ops that depend on the data: routing, branches): the "
                    f"forward and backward of batch {batch} taken as {batch} / {n2} times "
                    f"batch {n2}'s (the optimizer step's as it is), an approximation, and no "
                    "per-op table (its rows cannot be scaled; predict prices the aggregates)"]
    if amp:
        out["notes"].append("autocast is not emulated on the CPU fallback: fp32 figures")
    if ops and same and not same_rows:  # a gradient kept between the runs, accumulated
        out["notes"].append(f"no per-op table: the backward's ops differ between batch {n1} "
                            f"and {n2} (a module outside the model kept its gradient), so its "
                            "rows cannot be scaled; predict prices the aggregates")
    if ops and same_rows:
        for a, b in zip(rows1, rows2, strict=True):
            for key in ("flops", "bytes_read", "bytes_written"):
                b[key] = extrapolate(a[key], b[key])
            if b.get("recurrent"):  # the call's batch too, each field as the rows
                b["recurrent"] = extrapolated_call(a.get("recurrent", ""), b["recurrent"],
                                                   extrapolate)
        out["ops"] = rows2
    return out


@contextlib.contextmanager
def _transformers_quiet() -> Iterator[None]:
    """transformers' log at errors only while a step it built runs (its notes on a config,
    such as the loss it picks for ``loss_type=None``, say nothing about the profile); nothing
    when the model was not built by transformers (it is then not imported)."""
    tl = sys.modules.get("transformers.utils.logging")
    if tl is None:
        yield
        return
    level = tl.get_verbosity()
    tl.set_verbosity_error()
    try:
        yield
    finally:
        tl.set_verbosity(level)


def profile_model(spec: str, batch_size: int | None = None, amp: bool = False,
                  optimizer: str = "adam", ops: bool = False, seq_len: int | None = None,
                  attention: str | None = None) -> dict[str, Any]:
    """Profile the model named by ``spec`` (``zoo:NAME``, ``hf:CONFIG``, ``file.py:FUNC``).

    ``seq_len``: tokens per sequence of a text model (a zoo text model or an ``hf:`` model
    taking token ids; default the model's own), an error for any other model. ``attention``:
    ``eager`` or ``sdpa``, the attention implementation of an ``hf:`` model (transformers'
    ``attn_implementation``) or of a zoo model whose attention offers it. ``optimizer``:
    ``adam``, ``sgd`` or ``none`` (forward + backward only). The record states the batch, the
    sequence length (``seq_len``; None when the inputs have no tokens), the optimizer and the
    attention implementation (``attention``; None when the model's is not known)."""
    if batch_size is not None and not 1 <= batch_size <= BATCH_MAX:
        raise TraincastError(f"--batch must be a whole number from 1 to {BATCH_MAX:,.0f}, got "
                             f"{batch_size}")
    if seq_len is not None and (isinstance(seq_len, bool) or not isinstance(seq_len, int)
                                or seq_len < 1):
        raise TraincastError(f"--seq must be a positive integer, got {seq_len!r}")
    if attention is not None and attention not in ATTENTIONS:
        raise TraincastError(f"--attention must be one of {', '.join(ATTENTIONS)}, "
                             f"got {attention!r}")
    if optimizer not in OPTIMIZERS:
        raise TraincastError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, "
                             f"got {optimizer!r}")
    from traincast.features.specs import load_spec

    try:
        built = load_spec(spec, batch_size, seq_len=seq_len, attention=attention)
        try:
            with _transformers_quiet():
                rec = _profile(built.model, built.inputs, optimizer=optimizer, amp=amp,
                               ops=ops, build=built.rebuild, batch=built.batch)
        except TraincastError as exc:
            if str(exc).startswith(built.label):
                raise
            hint = exc.hint
            if spec.startswith("hf:") and str(exc).startswith(STEP_FAILS):  # our inputs
                hint = ("traincast built this model's inputs from its config (docs/profile.md, "
                        "hf:CONFIG: token ids, images, audio, labels); a model that needs more "
                        "(image tokens among a vision-language model's ids, image grid sizes, "
                        "one exact sequence length: try --seq) is profiled as FILE.py:FUNC, "
                        "which builds the model and its inputs; --debug shows the traceback")
            raise TraincastError(f"{built.label}: {exc}", hint=hint) from exc
    except (MemoryError, RuntimeError) as exc:  # the example inputs are real tensors
        if not isinstance(exc, MemoryError) and "allocate" not in str(exc):
            raise
        raise TraincastError(f"{spec}: the example inputs of batch {batch_size} do not fit "
                             "this machine's memory (the model runs on the meta device, its "
                             "inputs are made on the CPU)",
                             hint="profile at a smaller --batch: FLOPs and bytes grow with "
                                  "the batch") from None
    rec["model"] = built.label
    rec["seq_len"] = built.seq_len
    rec["attention"] = built.attention
    if built.resident:
        rec["input_bytes"] = 0
        rec["notes"].append("the inputs stay in GPU memory across iterations: no input copy")
    rec["notes"].extend(built.notes)
    return rec
