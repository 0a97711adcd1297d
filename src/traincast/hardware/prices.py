"""GPU-hour prices: one file format and one loader for every command that prices a job
(``plan``, ``recommend``, ``whatif``, ``study``).

A price file is TOML with one table per GPU (``[gpu.NAME]``, names and aliases as in the
catalog) or per node preset (``[node.PRESET]``; a node price wins over its GPU's price, for
the node's own GPU: a job that runs another GPU on that node, ``--node X --gpu Y``, takes Y's):

```toml
[gpu.A100-SXM4-80GB]
usd_per_gpu_hour = 5.1207                # on-demand, US dollars per GPU per hour
source = "where the on-demand price comes from"
spot_usd_per_gpu_hour = 1.02             # optional: spot / low-priority VMs
spot_source = "where the spot price comes from"
```

Every price needs its source (``source`` for ``usd_per_gpu_hour``, ``spot_source`` for
``spot_usd_per_gpu_hour``); prices are positive. An instance price is divided by its GPUs, so
the CPU, memory and network of the instance are included per GPU. Shipped files live in
``traincast/hardware/prices/`` and are named without ``.toml`` (``aws``; ``aws-on-demand``
names the same file).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from traincast.bounds import USD_PER_GPU_HOUR_MAX
from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog

SHIPPED_PRICES: dict[str, str] = {"aws": "aws.toml", "aws-on-demand": "aws.toml"}
MARKETS: tuple[str, ...] = ("on-demand", "spot")
_KEYS = {"usd_per_gpu_hour": "source", "spot_usd_per_gpu_hour": "spot_source"}
_FORMAT_HINT = ('[gpu.NAME] or [node.PRESET] tables with usd_per_gpu_hour = 3.06 and '
                'source = "...", optionally spot_usd_per_gpu_hour and spot_source')


@dataclass(frozen=True)
class Prices:
    """USD per GPU-hour by node preset or by GPU name (node wins), on-demand and spot.

    ``sources`` / ``spot_sources`` map ``"gpu.NAME"`` or ``"node.PRESET"`` to the source of
    that price; ``path`` names the file (or ``prices NAME`` for a shipped one).
    """

    by_node: dict[str, float]
    by_gpu: dict[str, float]
    sources: dict[str, str]
    path: str = ""
    spot_by_node: dict[str, float] = field(default_factory=dict)
    spot_by_gpu: dict[str, float] = field(default_factory=dict)
    spot_sources: dict[str, str] = field(default_factory=dict)
    node_gpus: dict[str, str] = field(default_factory=dict)
    """The catalog GPU of each priced node preset: a node's price is for that GPU only."""

    def _node_priced(self, by_node: dict[str, float], node: str, gpu: str) -> bool:
        """``node``'s own price applies: the file prices it and ``gpu`` is the node's GPU
        (or either is not known)."""
        own = self.node_gpus.get(node)
        return node in by_node and (own is None or not gpu or own == gpu)

    def _tables(self, spot: bool) -> tuple[dict[str, float], dict[str, float], dict[str, str]]:
        if spot:
            return self.spot_by_node, self.spot_by_gpu, self.spot_sources
        return self.by_node, self.by_gpu, self.sources

    def per_gpu_hour(self, node: str, gpu: str, spot: bool = False) -> float:
        """USD per GPU-hour on ``node`` for its own GPU (else ``gpu``'s); NaN when the file has
        neither."""
        by_node, by_gpu, _ = self._tables(spot)
        return by_node[node] if self._node_priced(by_node, node, gpu) else \
            by_gpu.get(gpu, float("nan"))

    def entry(self, node: str, gpu: str, spot: bool = False) -> str:
        """The table that prices ``node``/``gpu`` (``"node.X"`` or ``"gpu.Y"``), '' if none."""
        by_node, by_gpu, _ = self._tables(spot)
        return f"node.{node}" if self._node_priced(by_node, node, gpu) else \
            f"gpu.{gpu}" if gpu in by_gpu else ""

    def source_of(self, node: str, gpu: str, spot: bool = False) -> str:
        """Where the price used for ``node``/``gpu`` comes from ('' when there is none)."""
        return self._tables(spot)[2].get(self.entry(node, gpu, spot), "")

    def require(self, node: str, gpu: str, spot: bool = False) -> float:
        """Like :meth:`per_gpu_hour`, but a missing price is an error naming file and key."""
        usd = self.per_gpu_hour(node, gpu, spot)
        if math.isnan(usd):
            key = "spot_usd_per_gpu_hour" if spot else "usd_per_gpu_hour"
            raise TraincastError(
                f"{self.path}: no {key} in [node.{node}] or [gpu.{gpu}]",
                hint=f"add {key} (with its {_KEYS[key]}) to [gpu.{gpu}] or [node.{node}]")
        return usd


def _read(spec: str | Path) -> tuple[str, str]:
    path = Path(spec)
    if path.is_file():
        return path.read_text(encoding="utf-8-sig"), str(path)  # a BOM: no part of it
    name = SHIPPED_PRICES.get(str(spec))
    res = resources.files("traincast") / "hardware" / "prices" / name if name else None
    if res is None or not res.is_file():
        raise TraincastError(f"price file not found: {spec}",
                             hint="give a TOML file or a shipped name: "
                                  + ", ".join(sorted(SHIPPED_PRICES)))
    return res.read_text(), f"prices {spec}"


def _entry(where: str, kind: str, name: str, entry: Any) -> dict[str, tuple[float, str]]:
    """Check one ``[kind.name]`` table; returns ``{price key: (usd, source)}``."""
    w = f"{where}: [{kind}.{name}]"
    allowed = set(_KEYS) | set(_KEYS.values())
    if not isinstance(entry, dict):
        raise TraincastError(f"{w} must be a table", hint=_FORMAT_HINT)
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise TraincastError(f"{w}: unknown key {unknown[0]!r}; keys: "
                             + ", ".join(sorted(allowed)), hint=_FORMAT_HINT)
    out: dict[str, tuple[float, str]] = {}
    for key, src_key in _KEYS.items():
        if key not in entry:
            if src_key in entry:
                raise TraincastError(f"{w} key {src_key!r} without {key!r}")
            continue
        price = entry[key]
        if isinstance(price, bool) or not isinstance(price, int | float) or not price > 0 \
                or not math.isfinite(price):
            raise TraincastError(f"{w} key {key!r} must be a positive number, got {price!r}")
        if price > USD_PER_GPU_HOUR_MAX:
            raise TraincastError(f"{w} key {key!r} = {price:g} is above {USD_PER_GPU_HOUR_MAX:,g} "
                                 "USD per GPU-hour", hint="a price for one GPU for one hour, in "
                                 "dollars (not cents, a month or a whole node)")
        source = entry.get(src_key)
        if not isinstance(source, str) or not source.strip():
            raise TraincastError(f"{w} key {src_key!r} is required (where {key} comes from)")
        out[key] = (float(price), source)
    if not out:
        raise TraincastError(f"{w} has no price", hint=_FORMAT_HINT)
    return out


def load_prices(spec: str | Path, catalog: Catalog | None = None) -> Prices:
    """Read a price file (or a shipped name, ``aws``) into :class:`Prices`.

    GPU names are resolved through the catalog's names and aliases, node presets must exist in
    it; unknown tables, unknown keys, missing sources and non-positive prices are errors naming
    the file, the table and the key.
    """
    catalog = catalog or load_catalog()
    text, where = _read(spec)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TraincastError(f"{where}: not valid TOML: {exc}") from None
    tables: dict[str, dict[str, dict[str, float]]] = {
        k: {"gpu": {}, "node": {}} for k in _KEYS}
    sources: dict[str, dict[str, str]] = {k: {} for k in _KEYS}
    written: dict[tuple[str, str], str] = {}  # (kind, entry) -> the name its table used
    for kind, entries in data.items():
        if kind not in ("gpu", "node") or not isinstance(entries, dict):
            raise TraincastError(f"{where}: unknown table or key [{kind}]; use [gpu.NAME] or "
                                 "[node.PRESET]", hint=_FORMAT_HINT)
        for name, entry in entries.items():
            prices = _entry(where, kind, name, entry)
            try:
                key = catalog.gpu_name(name) if kind == "gpu" else catalog.node(name).name
            except KeyError as exc:
                raise TraincastError(f"{where}: [{kind}.{name}]: {exc.args[0]}",
                                     hint=getattr(exc, "hint", "")) from None
            other = written.setdefault((kind, key), name)
            if other != name:  # an alias and its entry, or one name in two cases
                raise TraincastError(f"{where}: [{kind}.{name}] and [{kind}.{other}] both price "
                                     f"{key}", hint="keep one of the two tables")
            for pk, (usd, source) in prices.items():
                tables[pk][kind][key] = usd
                sources[pk][f"{kind}.{key}"] = source
    od, sp = tables["usd_per_gpu_hour"], tables["spot_usd_per_gpu_hour"]
    nodes = {*od["node"], *sp["node"]}
    return Prices(by_node=od["node"], by_gpu=od["gpu"], sources=sources["usd_per_gpu_hour"],
                  path=where, spot_by_node=sp["node"], spot_by_gpu=sp["gpu"],
                  spot_sources=sources["spot_usd_per_gpu_hour"],
                  node_gpus={n: catalog.node(n).gpu for n in nodes})
