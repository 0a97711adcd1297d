"""Model merging (after GEMEL, Padmanabhan et al., NSDI 2023): which layers several models can
share, and the parameter memory that sharing saves.

GEMEL serves several vision models on one edge GPU and shares layers (weights included) between
models whose layers are architecturally identical; the shared weights are then retrained jointly.
traincast finds the candidates and sizes the saving; it does not retrain, so it says nothing of
the accuracy of the merged models.

Rule (docs/merge.md):

- a *layer* is a module that owns parameters directly (``named_parameters(recurse=False)``; a
  parameter already owned by an earlier module of the same model — a tied weight — counts once);
- two layers are identical when they have the same module type, the same configuration
  (``extra_repr()``; for convolutions: channels, kernel size, groups, bias, padding mode — stride,
  padding and dilation aside, as they change no weight shape) and the same parameter names,
  shapes and dtypes;
- a merge group holds at most one layer per model and at least two models; identical layers
  inside one model are never merged with each other (that would change the model's function).
  Per identity key, the i-th such layer of each model (in module order) joins group i, which
  shares the most possible: with c_m layers of the key in model m, the groups remove
  Σ_m c_m − max_m c_m copies, the maximum when no group holds two layers of one model.

Memory (parameter bytes in each parameter's dtype, P_g = parameters of one layer of group g,
b_g = its bytes, k_g = models in the group)::

    separate_bytes = Σ_models Σ_params numel · element_size
    saved_bytes    = Σ_g (k_g − 1) · b_g           params_saved  = Σ_g (k_g − 1) · P_g
    merged_bytes   = separate_bytes − saved_bytes  params_shared = Σ_g P_g

Groups are ranked by saved bytes, largest first: the order in which GEMEL's incremental search
adds layers to the shared set (heaviest layers first, since a few large layers hold most of the
memory); ``cumulative_saved_bytes`` is the saving after the first r groups.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traincast.errors import TraincastError

ACCURACY_NOTE = (
    "Merged layers share one set of weights, so the merged models must be retrained together "
    "(GEMEL retrains jointly and keeps a merge only if every model still meets its accuracy "
    "target); traincast does not retrain and makes no claim about accuracy after merging: the "
    "savings are an upper bound on what a merge that keeps accuracy can reach.")
RULE = ("same module type, same configuration (stride, padding, dilation aside for "
        "convolutions) and same parameter shapes and dtypes; at most one layer per model in a "
        "group; identical layers within one model are not merged with each other")


@dataclass(frozen=True)
class Layer:
    """One module that owns parameters, in one model."""

    model: int  # index of the model in the merge
    order: int  # position among the model's layers (module order)
    name: str  # module path in the model
    kind: str  # module class name
    config: str
    shapes: tuple[tuple[str, tuple[int, ...], str], ...]  # (param name, shape, dtype)
    params: int
    param_bytes: int

    @property
    def key(self) -> tuple:
        """The identity key: layers with equal keys can share weights."""
        return (self.kind, self.config, self.shapes)


@dataclass(frozen=True)
class Group:
    """Identical layers of k >= 2 distinct models, sharing one set of weights once merged."""

    members: tuple[Layer, ...]

    @property
    def saved_bytes(self) -> int:
        """(k − 1) · bytes of one layer."""
        return (len(self.members) - 1) * self.members[0].param_bytes

    @property
    def params_saved(self) -> int:
        return (len(self.members) - 1) * self.members[0].params


def layer_config(module: Any) -> str:
    """The configuration that identifies a module: ``extra_repr()``, except for convolutions,
    whose stride, padding and dilation are left out (they change no weight shape)."""
    from torch import nn

    if isinstance(module, nn.modules.conv._ConvNd):
        fields = {k: getattr(module, k) for k in ("in_channels", "out_channels", "kernel_size",
                                                   "groups", "padding_mode")}
        fields["bias"] = module.bias is not None
        if isinstance(module, nn.modules.conv._ConvTransposeNd):
            fields["transposed"] = True
        return ", ".join(f"{k}={v}" for k, v in fields.items())
    # one line (a ParameterList's extra_repr lists its parameters, one per line)
    return "; ".join(ln.strip() for ln in module.extra_repr().splitlines() if ln.strip())


def model_layers(model: Any, index: int = 0) -> list[Layer]:
    """The layers (modules owning parameters) of ``model`` in module order; a module with
    children that owns parameters of its own (BERT's output bias on the model itself) is
    named by those parameters (``bias``, ``encoder.scale``), not as the whole module."""
    seen: set[int] = set()
    layers: list[Layer] = []
    for name, module in model.named_modules():
        own = [(n, p) for n, p in module.named_parameters(recurse=False) if id(p) not in seen]
        if not own:
            continue
        seen.update(id(p) for _, p in own)
        shapes = tuple((n, tuple(p.shape), str(p.dtype).removeprefix("torch.")) for n, p in own)
        label = name or "(root)"
        if next(module.children(), None) is not None:  # not a leaf: only its own parameters
            label = ", ".join(f"{name}.{n}" if name else n for n, _ in own)
        layers.append(Layer(model=index, order=len(layers), name=label,
                            kind=type(module).__name__, config=layer_config(module),
                            shapes=shapes, params=sum(p.numel() for _, p in own),
                            param_bytes=sum(p.numel() * p.element_size() for _, p in own)))
    return layers


def merge_groups(layers_by_model: list[list[Layer]]) -> list[Group]:
    """Merge groups ranked by saved bytes (largest first; ties in model and module order).

    Per identity key, the i-th layer of each model joins group i; groups of one model are
    dropped (nothing is shared)."""
    n = len(layers_by_model)
    by_key: dict[tuple, list[list[Layer]]] = {}
    for layers in layers_by_model:
        for layer in layers:
            by_key.setdefault(layer.key, [[] for _ in range(n)])[layer.model].append(layer)
    groups = []
    for per_model in by_key.values():
        for i in range(max(len(ls) for ls in per_model)):
            members = tuple(ls[i] for ls in per_model if len(ls) > i)
            if len(members) >= 2:
                groups.append(Group(members))
    groups.sort(key=lambda g: (-g.saved_bytes, g.members[0].model, g.members[0].order))
    return groups


def build_meta(spec: str) -> Any:
    """The model of a MODEL spec on the meta device: ``zoo:NAME`` (the zoo registry; a model
    known only by its decoder-only config through transformers), ``hf:CONFIG`` (a transformers
    config, no weights) or ``path/file.py:FUNC``."""
    import torch

    if spec.startswith("zoo:"):
        from traincast.zoo import lookup

        return lookup(spec[4:]).build_meta()
    from traincast.features.specs import load_spec

    with torch.device("meta"):
        return load_spec(spec, 1)[0]


def _labels(specs: list[str]) -> list[str]:
    """The specs, with ``#2``, ``#3`` ... on repeats (two copies of a model can merge); a
    suffix is skipped where it would name another spec (``hf:cfg`` twice beside ``hf:cfg#2``:
    ``hf:cfg``, ``hf:cfg#3``, ``hf:cfg#2``), so every model has a name of its own."""
    taken = set(specs)
    out: list[str] = []
    for s in specs:
        label, k = s, 1
        while label in out or (k > 1 and label in taken):
            k += 1
            label = f"{s}#{k}"
        out.append(label)
    return out


def _check_shaped(model: Any, label: str) -> None:
    """A model whose parameters have shapes: a lazy layer (``nn.LazyLinear``) has none until a
    forward pass, so it cannot be compared (a :class:`TraincastError` naming it)."""
    from torch.nn.parameter import UninitializedParameter

    for name, p in model.named_parameters():
        if isinstance(p, UninitializedParameter):
            raise TraincastError(f"{label}: parameter {name} is lazy (no shape until the "
                                 "model runs forward once): its layer cannot be compared",
                                 hint="build the model with fixed sizes (nn.Linear(in, out), "
                                      "not nn.LazyLinear)")


def merge_specs(specs: list[str], top: int | None = None) -> dict[str, Any]:
    """Merge the models named by ``specs`` (each built on the meta device); see
    ``merge_models``."""
    if len(specs) < 2:
        raise TraincastError("merge needs at least two models",
                             hint="e.g. traincast merge zoo:resnet50 zoo:resnet101")
    return merge_models([build_meta(s) for s in specs], _labels(specs), top=top)


def merge_models(models: list[Any], labels: list[str], top: int | None = None) -> dict[str, Any]:
    """The merge report of torch modules ``models`` named ``labels``: totals over every group,
    the first ``top`` groups (all when None) with their layers, the rule and the accuracy note.
    """
    for m, label in zip(models, labels, strict=True):
        _check_shaped(m, label)
    layers = [model_layers(m, i) for i, m in enumerate(models)]
    groups = merge_groups(layers)
    separate = [_param_totals(m) for m in models]
    separate_bytes = sum(b for _, b in separate)
    saved = sum(g.saved_bytes for g in groups)
    in_group = [0] * len(models)
    shared_by_model = [0] * len(models)
    for g in groups:
        for layer in g.members:
            in_group[layer.model] += 1
            shared_by_model[layer.model] += layer.params
    rows, cumulative = [], 0
    for rank, g in enumerate(groups[:top] if top else groups, start=1):
        cumulative += g.saved_bytes
        rows.append(_group_row(rank, g, labels, cumulative, separate_bytes))
    return {
        "models": [{"model": label, "params": p, "param_bytes": b, "layers": len(ls),
                    "shared_layers": k, "shared_params": s}
                   for label, (p, b), ls, k, s in zip(labels, separate, layers, in_group,
                                                      shared_by_model, strict=True)],
        "rule": RULE,
        "params_separate": sum(p for p, _ in separate),
        "params_merged": sum(p for p, _ in separate) - sum(g.params_saved for g in groups),
        "params_saved": sum(g.params_saved for g in groups),
        "params_shared": sum(g.members[0].params for g in groups),
        "separate_bytes": separate_bytes,
        "merged_bytes": separate_bytes - saved,
        "saved_bytes": saved,
        "saved_fraction": saved / separate_bytes if separate_bytes else 0.0,
        "groups_total": len(groups),
        "groups": rows,
        "note": ACCURACY_NOTE,
    }


def _param_totals(model: Any) -> tuple[int, int]:
    """(parameters, parameter bytes) of a model, tied parameters counted once."""
    params = list(model.parameters())
    return sum(p.numel() for p in params), sum(p.numel() * p.element_size() for p in params)


def _group_row(rank: int, g: Group, labels: list[str], cumulative: int,
               separate_bytes: int) -> dict[str, Any]:
    first = g.members[0]
    return {"rank": rank, "type": first.kind, "config": first.config,
            "shapes": {n: list(s) for n, s, _ in first.shapes},
            "dtype": ", ".join(dict.fromkeys(d for _, _, d in first.shapes)),
            "params_per_copy": first.params, "bytes_per_copy": first.param_bytes,
            "copies": len(g.members), "saved_bytes": g.saved_bytes,
            "cumulative_saved_bytes": cumulative,
            "merged_bytes_after": separate_bytes - cumulative,
            "layers": [{"model": labels[m.model], "layer": m.name} for m in g.members]}
