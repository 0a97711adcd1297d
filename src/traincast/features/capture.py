"""Capture every kernel of a training step with a ``TorchDispatchMode``.

The mode sits below autograd, so it sees the forward ops, the backward ops autograd runs, and the
optimizer's ops, each once, as aten calls with their real shapes and dtypes. On the ``meta``
device no data exists; two things still need values and get them from CPU "shadows":

- integer tensors that come from the user's real inputs (token ids, item ids) keep a CPU copy;
  an op whose tensor inputs all have shadows (``ids + offset``, ``ids.view(-1)``) is also run on
  the CPU shadows, so embedding lookups see the real indices and count the rows they touch;
- ops with no tensor inputs (``arange``, ``ones``) run on CPU the same way, so masks built
  from constants (a float mask of ones) keep their values too.

Inputs get shadows (copies) when they are integer/bool; any tensor keeps one only up to
``SHADOW_MAX_NUMEL`` elements. The host's reads of a shadowed tensor (``.item()``, ``.cpu()``)
get its values, as a device-to-host copy would, and an op that cannot run on meta without them
(indexing by a boolean mask) gets the CPU values of its shadowed arguments; a tensor written by
an op whose shadow cannot be computed loses its shadow, and so does every tensor viewing the
same storage (its base, its views).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.modules.rnn as torch_rnn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakTensorKeyDictionary

from traincast.features.ops import (
    EMBEDDING_OPS,
    FREE_OPS,
    LIKE_OPS,
    WRITE_ONLY,
    OpRecord,
    gathered_bytes,
    is_pointwise,
    op_flops,
    tensor_bytes,
)
from traincast.features.recurrent import GATES, call_spec

SHADOW_MAX_NUMEL = 1 << 24
LOOKUP_OPS = EMBEDDING_OPS - {"embedding_renorm_"}


def _storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


class Capture(TorchDispatchMode):
    """Records one ``OpRecord`` per kernel; ``phase`` is set by the caller between steps.

    ``embedding_tables`` maps the storage key of each embedding weight to its name; lookups into
    them collect the unique row ids they touch (``rows_touched``; the ``padding_idx`` row, whose
    gradient is always zero, excluded) or, without index values, an upper bound (``rows_bound``:
    one row per lookup, at most the table's rows). A table that a forward op other than a lookup
    (or its ``max_norm`` renormalization) reads — an output projection tied to it — is named in
    ``shared_tables``: its gradient covers every row.
    """

    def __init__(self, device: str, embedding_tables: dict[int, str] | None = None) -> None:
        super().__init__()
        self.device = torch.device(device)
        self.phase = "forward"
        self.records: list[OpRecord] = []
        self.shadow: WeakTensorKeyDictionary = WeakTensorKeyDictionary()
        self._shadowed_storages: set[int] = set()  # storages some shadowed tensor views
        self.embedding_tables = embedding_tables or {}
        self.rows_touched: dict[str, list[torch.Tensor]] = {}
        self.rows_bound: dict[str, int] = {}
        self.sparse_ops = 0
        self.lookups: dict[str, int] = {}
        self.shared_tables: set[str] = set()
        self.host_keys: set[int] = set()  # storages kept on the host (optimizer step counts)
        self._uid: dict[int, tuple[int, StorageWeakRef]] = {}
        self._next_uid = 0
        self.recurrent = ""  # the recurrent-layer call running now (RecurrentCalls)

    # -- value identities (for the fusion estimate) ---------------------------------------
    # A value is a storage. Each storage seen keeps a weak reference, so its address is never
    # reused for another storage during the capture (a freed address would alias two values).
    def _new_uid(self, t: torch.Tensor) -> int:
        self._next_uid += 1
        self._uid[_storage_key(t)] = (self._next_uid, StorageWeakRef(t.untyped_storage()))
        return self._next_uid

    def _uid_of(self, t: torch.Tensor) -> int:
        entry = self._uid.get(_storage_key(t))
        return entry[0] if entry is not None else self._new_uid(t)

    # -- shadows ----------------------------------------------------------------------------
    def add_shadow(self, t: torch.Tensor, value: torch.Tensor) -> None:
        """Remember the CPU values of an integer tensor ``t`` living on the capture device: a
        copy, so an in-place op of the model on ``t`` never writes into the caller's tensor."""
        if (value.device.type == "cpu" and not t.is_floating_point()
                and value.numel() <= SHADOW_MAX_NUMEL):
            self._set_shadow(t, value.detach().clone())

    def _set_shadow(self, t: torch.Tensor, value: torch.Tensor) -> None:
        self.shadow[t] = value
        self._shadowed_storages.add(_storage_key(t))

    def _drop_shadows(self, written: list[torch.Tensor]) -> None:
        """Forget the values of every tensor that shares a storage with one of ``written``
        (the tensor, its base, its views and their views): the op wrote values no shadow
        knows, so none of them may answer a host read."""
        keys = {_storage_key(t) for t in written if t.layout == torch.strided}
        if not keys & self._shadowed_storages:
            return
        for t in list(self.shadow.keys()):
            if t.layout == torch.strided and _storage_key(t) in keys:
                del self.shadow[t]
        self._shadowed_storages -= keys

    def _run_shadow(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        """Run ``func`` on the CPU shadows of its inputs when every device tensor it takes has
        one (ops without tensor inputs too: ``arange``, ``ones``), and keep the results as the
        outputs' shadows, whatever their dtype (a float mask built from constants keeps its
        values). A tensor the op writes (in place, ``out=``) without a new shadow loses its
        old one, and so does every view of its storage: a shadow is never stale."""
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        cout = self._shadow_result(func, args, kwargs, outs)
        if cout is None:
            if func._schema.is_mutable:
                self._drop_shadows(_written(func, args, kwargs))
            return
        for o, c in zip(outs, [c for c in tree_flatten(cout)[0] if isinstance(c, torch.Tensor)],
                        strict=False):
            self._set_shadow(o, c)

    def _shadow_result(self, func: Any, args: tuple, kwargs: dict,
                       outs: list[torch.Tensor]) -> Any:
        if not outs or any(o.device != self.device or o.numel() > SHADOW_MAX_NUMEL
                           for o in outs):
            return None
        missing = False

        def to_cpu(x: Any) -> Any:
            nonlocal missing
            if isinstance(x, torch.Tensor):
                if x.device.type == "cpu":
                    return x
                s = self.shadow.get(x)
                if s is None:
                    missing = True
                return s
            if isinstance(x, torch.device) and x == self.device:
                return torch.device("cpu")
            return x

        cargs, ckwargs = tree_map(to_cpu, args), tree_map(to_cpu, kwargs)
        if missing:
            return None
        try:
            return func(*cargs, **ckwargs)
        except Exception:  # a shadow is a convenience; the captured op already ran
            return None

    def _embedding_lookup(self, func: Any, args: tuple, kwargs: dict) -> None:
        weight, indices = args[0], args[1]
        table = self.embedding_tables.get(_storage_key(weight))
        if table is None:
            return
        self.lookups[table] = self.lookups.get(table, 0) + indices.numel()
        values = indices if indices.device.type == "cpu" else self.shadow.get(indices)
        if values is not None:
            rows = torch.unique(values.reshape(-1))
            padding = _argument(func, args, kwargs, "padding_idx")
            if isinstance(padding, int) and padding >= 0:
                rows = rows[rows != padding]
            self.rows_touched.setdefault(table, []).append(rows)
        else:
            bound = self.rows_bound.get(table, 0) + indices.numel()
            self.rows_bound[table] = min(bound, weight.shape[0])

    # -- the capture ------------------------------------------------------------------------
    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = func._overloadpacket.__name__
        host = self._host_read(func, name, args, kwargs)
        if host is not None:
            return host[0]
        try:
            out = func(*args, **kwargs)
        except (RuntimeError, NotImplementedError):
            hosted = self._host_shadows(args, kwargs)  # an op that takes host tensors
            if hosted is None:
                raise
            args, kwargs = hosted
            out = func(*args, **kwargs)
        if self.phase == "forward" and name in LOOKUP_OPS:
            self._embedding_lookup(func, args, kwargs)
        elif (self.phase == "forward" and self.embedding_tables and name not in EMBEDDING_OPS
              and not func.is_view and name not in FREE_OPS):
            self._note_shared(args, kwargs)
        if self.device.type != "cpu":  # on CPU the values are real
            self._run_shadow(func, args, kwargs, out)
        if func.is_view:
            return out
        ins = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        if (name in FREE_OPS or not any(t.device == self.device for t in (*ins, *outs))
                or self._on_host(ins)):
            # allocation, relabelling or host-side bookkeeping (the optimizer's step counter)
            self._fresh_outputs(ins, outs)
            return out
        if any(t.layout != torch.strided for t in (*ins, *outs)):
            self.sparse_ops += 1  # sizes unknown on meta: sparse updates are costed apart
            self._fresh_outputs(ins, outs)
            return out
        self._record(func, name, args, kwargs, out, ins, outs)
        return out

    def _host_read(self, func: Any, name: str, args: tuple, kwargs: dict) -> tuple | None:
        """A host read of a shadowed tensor's values: its real values, as on a GPU.

        ``.item()`` (``_local_scalar_dense``: ``if (ids == pad).any()``, ``int(n)``) returns the
        shadow's value, and a copy to the CPU (``lengths.cpu()``, as ``pack_padded_sequence``
        makes) returns the shadow's copy; both are device-to-host transfers, not kernels, and
        are not recorded. None when the op is not one of these or the tensor has no shadow."""
        if self.device.type == "cpu" or name not in ("_local_scalar_dense", "_to_copy"):
            return None
        src = args[0] if args and isinstance(args[0], torch.Tensor) else None
        shadow = self.shadow.get(src) if src is not None and src.device == self.device else None
        if shadow is None:
            return None
        if name == "_local_scalar_dense":
            return (shadow.item(),)
        target = kwargs.get("device")
        if target is None or torch.device(target).type != "cpu":
            return None
        return (shadow.to(dtype=kwargs.get("dtype") or shadow.dtype, copy=True),)

    def _host_shadows(self, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        """The arguments with every shadowed tensor replaced by its CPU values, for an op that
        fails on meta without values (indexing by a boolean mask, whose output size is the
        mask's count; an index may live on the CPU for a device tensor, as on a GPU); None when
        no argument has a shadow (the op fails on its own)."""
        found = False

        def host(x: Any) -> Any:
            nonlocal found
            s = self.shadow.get(x) if isinstance(x, torch.Tensor) else None
            found = found or s is not None
            return x if s is None else s

        new_args, new_kwargs = tree_map(host, args), tree_map(host, kwargs)
        return (new_args, new_kwargs) if found else None

    def _note_shared(self, args: tuple, kwargs: dict) -> None:
        """Tables read by a forward op that is not a lookup (tied to an output layer)."""
        for t in tree_flatten((args, kwargs))[0]:
            if isinstance(t, torch.Tensor) and t.layout == torch.strided:
                table = self.embedding_tables.get(_storage_key(t))
                if table is not None:
                    self.shared_tables.add(table)

    def _on_host(self, ins: list[torch.Tensor]) -> bool:
        """An op on the host-side step counters (and scalars): no kernel on a GPU."""
        if not self.host_keys:
            return False
        host = {id(t) for t in ins
                if t.layout == torch.strided and _storage_key(t) in self.host_keys}
        return bool(host) and all(id(t) in host or t.dim() == 0 for t in ins)

    def _fresh_outputs(self, ins: list[torch.Tensor], outs: list[torch.Tensor]) -> None:
        """New storages of an op not recorded get new value ids (their address may be reused)."""
        in_keys = {_storage_key(t) for t in ins if t.layout == torch.strided}
        for o in outs:
            if o.layout == torch.strided and _storage_key(o) not in in_keys:
                self._new_uid(o)

    def _record(self, func: Any, name: str, args: tuple, kwargs: dict, out: Any,
                ins: list[torch.Tensor], outs: list[torch.Tensor]) -> None:
        mutable = func._schema.is_mutable
        in_keys = {_storage_key(t) for t in ins}
        seen: set[tuple] = set()
        reads: list[tuple[int, int]] = []
        write_only = set()
        if mutable and name in WRITE_ONLY and ins:
            write_only.add(id(ins[0]))
        partial = gathered_bytes(name, args, outs)
        for t in ins:
            if t.device != self.device or id(t) in write_only or name in LIKE_OPS:
                continue
            key = (_storage_key(t), t.storage_offset(), tuple(t.shape), t.stride())
            if key in seen:
                continue
            seen.add(key)
            nbytes = partial.get(id(t), tensor_bytes(t))
            reads.append((self._uid_of(t), nbytes))
        writes: list[tuple[int, int, bool]] = []
        if mutable:  # in-place / out= ops: the mutated arguments are what they write
            for t in _written(func, args, kwargs):
                writes.append((self._uid_of(t), partial.get(id(t), tensor_bytes(t)), False))
        for o in outs:
            key = _storage_key(o)
            if key in in_keys:
                continue  # returned alias of an input (in-place result): counted above
            writes.append((self._new_uid(o), tensor_bytes(o), True))
        flops, compute = op_flops(func, args, kwargs, out)
        ref = outs[0] if outs else (ins[0] if ins else None)
        self.records.append(OpRecord(
            op=name, phase=self.phase, flops=flops,
            bytes_read=sum(b for _, b in reads), bytes_written=sum(b for _, b, _ in writes),
            bound="compute" if compute else "memory",
            pointwise=is_pointwise(func, name),
            dtype=str(ref.dtype).removeprefix("torch.") if ref is not None else "",
            shapes=";".join("x".join(map(str, t.shape)) for t in ins if t.device == self.device),
            reads=reads, writes=writes, recurrent=self.recurrent))


def _written(func: Any, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors an op writes in place: the arguments its schema marks as written
    (``Tensor(a!)``), positional or keyword (``out=``, ``values=``), tensor lists included."""
    found: list[torch.Tensor] = []
    for i, arg in enumerate(func._schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
        items = value if isinstance(value, list | tuple) else [value]
        found += [t for t in items if isinstance(t, torch.Tensor)]
    return found


def _argument(func: Any, args: tuple, kwargs: dict, name: str) -> Any:
    """The value of argument ``name`` of an op call (positional or keyword), else None."""
    if name in kwargs:
        return kwargs[name]
    for i, arg in enumerate(func._schema.arguments):
        if arg.name == name:
            return args[i] if i < len(args) else arg.default_value
    return None


class RecurrentCalls:
    """While active, every ``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` call on a padded batch (the
    ``_VF`` functions of ``torch.nn.modules.rnn``: ``lstm``, ``gru``, ``rnn_tanh``,
    ``rnn_relu``) tags the ops it runs with its ``recurrent.call_spec`` (``Capture.recurrent``):
    its forward ops while the call runs, and its backward ops from the moment a gradient reaches
    one of its outputs until the gradients of all its inputs that need one (the input, initial
    states, weights) are complete (tensor hooks). On meta and on a CPU the call runs as ATen's
    per-step cell ops, which the capture records as they run; the tag lets a time model price the
    call as the fused library call it is on a GPU (``recurrent.as_cudnn``). Packed sequences and
    LSTMs with projections are not tagged (their ops are priced as recorded)."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture
        self.calls = 0
        self._handles: list[Any] = []
        self._vf: Any = None

    def __enter__(self) -> RecurrentCalls:
        self._vf = torch_rnn._VF
        torch_rnn._VF = _VFProxy(self._vf, self)  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        torch_rnn._VF = self._vf
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.capture.recurrent = ""

    def call(self, mode: str, fn: Any, *args: Any) -> Any:
        """Run one ``_VF`` recurrent call, its ops tagged (see the class)."""
        spec = self._spec(mode, args)
        if spec is None:
            return fn(*args)
        args, ins = _aliased(args)  # the call's own gradients, apart from other uses of them
        self.capture.recurrent = spec
        try:
            out = fn(*args)
        finally:
            self.capture.recurrent = ""
        self._tag_backward(spec, ins, out)
        return out

    def _spec(self, mode: str, args: tuple) -> str | None:
        # padded input: (input, hx, params, has_biases, num_layers, dropout, train,
        # bidirectional, batch_first); a packed sequence passes a 2-D input
        if len(args) != 9 or not isinstance(args[0], torch.Tensor) or args[0].dim() != 3:
            return None
        x, hx, params, bias, layers, dropout, train, bidirectional, batch_first = args
        states = list(hx) if isinstance(hx, list | tuple) else [hx]
        if mode == "lstm" and states[0].shape[-1] != states[-1].shape[-1]:
            return None  # proj_size: cuDNN's projection is not modelled
        seq, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
        spec = call_spec(mode, call=self.calls, seq=seq, batch=batch, input=x.shape[2],
                         hidden=states[-1].shape[-1], layers=layers,
                         directions=2 if bidirectional else 1, bias=int(bool(bias)),
                         dropout=int(dropout > 0 and bool(train) and layers > 1))
        self.calls += 1
        return spec

    def _tag_backward(self, spec: str, ins: list[torch.Tensor], out: Any) -> None:
        """Open the call's backward region when a gradient reaches an output, close it when
        the gradients of all its inputs that need one are complete (``ins``: this call's own
        aliases of its input, states and weights, so a weight used again elsewhere, the same
        module called twice, does not hold the region open)."""
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and t.requires_grad]
        if not outs or not ins:
            return
        left = [len(ins)]
        capture = self.capture

        def opening(grad: torch.Tensor) -> None:
            if left[0] == len(ins):
                capture.recurrent = spec

        def closing(grad: torch.Tensor) -> None:
            left[0] -= 1
            if left[0] == 0 and capture.recurrent == spec:
                capture.recurrent = ""

        self._handles += [t.register_hook(opening) for t in outs]
        self._handles += [t.register_hook(closing) for t in ins]


def _aliased(args: tuple) -> tuple[tuple, list[torch.Tensor]]:
    """``_VF`` recurrent arguments with the input, initial states and weights that need a
    gradient replaced by views of themselves (no data moved, no op recorded), and those
    views."""
    made: list[torch.Tensor] = []

    def alias(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.requires_grad:
            made.append(t.view_as(t))
            return made[-1]
        return t

    x, hx, params, *rest = args
    states = type(hx)(alias(h) for h in hx) if isinstance(hx, list | tuple) else alias(hx)
    return (alias(x), states, [alias(p) for p in params], *rest), made


class _VFProxy:
    """``torch._VF`` with its recurrent functions routed through ``RecurrentCalls.call``."""

    def __init__(self, vf: Any, calls: RecurrentCalls) -> None:
        self._vf, self._calls = vf, calls

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._vf, name)
        if name not in GATES:
            return fn
        return lambda *args: self._calls.call(name, fn, *args)
