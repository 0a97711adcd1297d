"""What-if scenarios: TOML files of changes applied to the jobs a match clause selects.

A scenario file (the shipped ones live beside this module; users write their own)::

    description = "..."
    source = "..."
    [match]                      # every key optional; an empty table matches every job
    architecture = ["ps-worker"] # job architectures
    gpu_type = ["V100"]          # GPU names or aliases (resolved through the catalog)
    node = ["pai-v100-pcie"]     # node presets
    workload = ["bert", "nmt"]   # workload tags (case-insensitive)
    min_gpus = 1                 # n_gpus range, inclusive
    max_gpus = 8
    upgrade_only = true          # only jobs whose links [changes] names are all slower now
    [changes]                    # at least one key
    architecture = "allreduce-local"   # port the job (fit checked: GPUs and memory)
    node = "pai-v100-nvlink"     # move the job to a node preset (its GPU and links)
    gpu = "A100-SXM4-80GB"       # GPU model (the node's links stay)
    nic = "eth100"               # link name or speed ("100Gbit"); also intra, pcie
    amp = true                   # mixed precision
    fusion = true                # memory-bound bytes = the profile's fused estimate
    overlap = 0.5                # communication overlap fraction f
    hierarchical = true          # hierarchical all-reduce across nodes

Format, port rules and fit formulas: docs/scenarios.md.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from traincast.architectures import ARCHITECTURES
from traincast.errors import TraincastError, UnknownNameError
from traincast.hardware.catalog import Catalog
from traincast.resolve import resolve_link

MATCH_LISTS = ("architecture", "gpu_type", "node", "workload")
MATCH_KEYS = (*MATCH_LISTS, "min_gpus", "max_gpus", "upgrade_only")
LINK_KEYS = ("nic", "intra", "pcie")
BOOL_KEYS = ("amp", "fusion", "hierarchical")
CHANGE_KEYS = ("architecture", "node", "gpu", *LINK_KEYS, *BOOL_KEYS, "overlap")
TOP_KEYS = ("name", "description", "source", "match", "changes")


@dataclass(frozen=True)
class Scenario:
    """One scenario: ``match`` (key -> tuple of values or a number) and ``changes``."""

    name: str
    description: str = ""
    source: str = ""
    match: dict[str, Any] = field(default_factory=dict)
    changes: dict[str, Any] = field(default_factory=dict)
    path: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The definition as plain JSON values (what whatif/study write out)."""
        return {"name": self.name, "description": self.description, "source": self.source,
                "match": {k: list(v) if isinstance(v, tuple) else v
                          for k, v in self.match.items()},
                "changes": dict(self.changes), "path": self.path}

    @property
    def changes_hardware(self) -> bool:
        """True when the job's GPU, node or architecture changes (memory and GPU-count checks)."""
        return any(k in self.changes for k in ("architecture", "node", "gpu"))


def _shipped_dir() -> Any:
    return resources.files("traincast") / "scenarios"


def shipped_scenarios() -> list[str]:
    """Names of the scenarios shipped with traincast (``traincast whatif --scenario NAME``)."""
    return sorted(p.name[:-5] for p in _shipped_dir().iterdir()
                  if p.name.endswith(".toml") and p.is_file())


def names_file(spec: str | Path) -> bool:
    """Whether a ``--scenario`` names a file: a ``.toml`` path, or an existing path that is not
    a shipped scenario's bare name (``eth100`` is the shipped one even beside a file
    ``eth100``; ``./eth100`` is the file)."""
    path = Path(spec)
    bare = isinstance(spec, str) and spec in shipped_scenarios()
    return path.suffix == ".toml" or (path.exists() and not bare)


def _fail(where: str, msg: str, hint: str = "") -> TraincastError:
    """An error in a scenario file at ``where``; ``hint`` (an unknown name's) before the
    format's pointer."""
    return TraincastError(f"{where}: {msg}", hint=(f"{hint}; " if hint else "")
                          + "scenario format: docs/scenarios.md")


def _fail_from(where: str, exc: Exception) -> TraincastError:
    """``_fail`` with an unknown name's error (its message and hint)."""
    return _fail(where, str(exc.args[0]), getattr(exc, "hint", ""))


def _check_match(where: str, raw: Any, catalog: Catalog) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _fail(where, "[match] must be a table")
    out: dict[str, Any] = {}
    for key, value in raw.items():
        w = f"{where} [match] key {key!r}"
        if key in MATCH_LISTS:
            values = [value] if isinstance(value, str) else value
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise _fail(w, f"must be a string or a list of strings, got {value!r}")
            if not values:  # an empty list matches no job: a scenario of nothing
                raise _fail(w, "is an empty list: it would match no job (leave the key out "
                               "to match every job)")
            if key == "architecture":
                bad = [v for v in values if v not in ARCHITECTURES]
                if bad:
                    raise _fail(w, f"unknown architecture {bad[0]!r}; known: "
                                   f"{', '.join(ARCHITECTURES)}")
            elif key == "gpu_type":
                try:
                    values = [catalog.gpu_name(v) for v in values]
                except KeyError as exc:
                    raise _fail_from(w, exc) from None
            elif key == "node":
                try:
                    for v in values:
                        catalog.node(v)
                except KeyError as exc:
                    raise _fail_from(w, exc) from None
            elif key == "workload":
                values = [v.lower() for v in values]
            out[key] = tuple(values)
        elif key == "upgrade_only":
            if not isinstance(value, bool):
                raise _fail(w, f"must be true or false, got {value!r}")
            out[key] = value
        elif key in ("min_gpus", "max_gpus"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise _fail(w, f"must be a non-negative integer, got {value!r}")
            out[key] = value
        else:
            raise _fail(where, f"unknown [match] key {key!r}; known: {', '.join(MATCH_KEYS)}")
    if out.get("min_gpus", 0) > out.get("max_gpus", float("inf")):
        raise _fail(where, f"[match] min_gpus = {out['min_gpus']} is larger than max_gpus = "
                           f"{out['max_gpus']}")
    return out


def check_change(where: str, key: str, value: Any, catalog: Catalog) -> Any:
    """Validate one ``[changes]`` entry; returns the cleaned value."""
    w = f"{where} [changes] key {key!r}"
    if key not in CHANGE_KEYS:
        raise _fail(where, f"unknown [changes] key {key!r} (= {value!r}); known: "
                           f"{', '.join(CHANGE_KEYS)}")
    if key in BOOL_KEYS:
        if not isinstance(value, bool):
            raise _fail(w, f"must be true or false, got {value!r}")
        return value
    if key == "overlap":
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise _fail(w, f"must be a number in [0, 1], got {value!r}")
        return float(value)
    if not isinstance(value, str):
        raise _fail(w, f"must be a string, got {value!r}")
    try:
        if key == "architecture" and value not in ARCHITECTURES:
            raise UnknownNameError(f"unknown architecture {value!r}",
                                       hint=f"known: {', '.join(ARCHITECTURES)}")
        if key == "node":
            catalog.node(value)
        if key == "gpu":
            value = catalog.gpu_name(value)
        if key in LINK_KEYS:
            resolve_link(catalog, value)
    except (KeyError, ValueError) as exc:
        raise _fail_from(w, exc) from None
    return value


def parse_scenario(data: dict[str, Any], name: str, catalog: Catalog,
                   path: str = "") -> Scenario:
    """Build a checked ``Scenario`` from a parsed TOML document."""
    where = path or f"scenario {name!r}"
    for key in data:
        if key not in TOP_KEYS:
            raise _fail(where, f"unknown key {key!r}; known: {', '.join(TOP_KEYS)}")
    for key in ("name", "description", "source"):
        if key in data and not isinstance(data[key], str):
            raise _fail(where, f"key {key!r} must be a string, got {data[key]!r}")
    if "name" in data and not data["name"].strip():
        raise _fail(where, "key 'name' is empty (it names the scenario's rows and columns)")
    changes_raw = data.get("changes")
    if not isinstance(changes_raw, dict) or not changes_raw:
        got = "" if changes_raw is None else f", got changes = {changes_raw!r}"
        raise _fail(where, f"needs a [changes] table with at least one change{got}")
    changes = {k: check_change(where, k, v, catalog) for k, v in changes_raw.items()}
    match = _check_match(where, data.get("match", {}), catalog)
    if match.get("upgrade_only") and not any(k in changes for k in LINK_KEYS):
        raise _fail(where, "[match] upgrade_only needs a link in [changes] (nic, intra or pcie)")
    return Scenario(name=data.get("name", name), description=data.get("description", ""),
                    source=data.get("source", ""), match=match, changes=changes, path=path)


def load_scenario(spec: str | Path, catalog: Catalog) -> Scenario:
    """A scenario by shipped name (``eth100``) or by TOML file path. A shipped name given bare
    is the shipped scenario even where the working folder holds a file of that name (a path,
    ``./eth100``, names the file)."""
    path = Path(spec)
    if names_file(spec):
        if not path.is_file():
            raise TraincastError(f"scenario file not found: {path}",
                                 hint=f"shipped scenarios: {', '.join(shipped_scenarios())}")
        text, name, where = path.read_text(encoding="utf-8-sig"), path.stem, str(path)
    else:
        res = _shipped_dir() / f"{spec}.toml"
        if not res.is_file():
            raise TraincastError(f"unknown scenario {str(spec)!r}",
                                 hint=f"shipped scenarios: {', '.join(shipped_scenarios())}; "
                                      "or give a TOML file (docs/scenarios.md)")
        text, name, where = res.read_text(), str(spec), f"scenario {spec}"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TraincastError(f"{where}: not valid TOML: {exc}") from None
    return parse_scenario(data, name, catalog, where)


def as_scenarios(specs: Any, catalog: Catalog) -> list[Scenario]:
    """Scenario objects from names, paths, dicts (``{"name", "match", "changes"}``) or objects."""
    if isinstance(specs, str | Path | Scenario | dict):
        specs = [specs]
    out = []
    for spec in specs:
        if isinstance(spec, Scenario):
            out.append(spec)
        elif isinstance(spec, dict):
            out.append(parse_scenario(spec, str(spec.get("name", f"scenario{len(out) + 1}")),
                                      catalog))
        else:
            out.append(load_scenario(spec, catalog))
    names = [s.name for s in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        first = sorted(dup)[0]
        given = [str(s.path or f"scenario {s.name}") for s in out if s.name == first]
        raise TraincastError(f"scenario name used twice: {', '.join(sorted(dup))} "
                             f"({' and '.join(given)})",
                             hint="give one of them its own name = \"...\" (a file's name "
                                  "is its file name without .toml; docs/scenarios.md)")
    return out


def parse_sweep(text: str) -> tuple[str, list[str]]:
    """``'nic=25Gbit,50Gbit'`` -> ``('nic', ['25Gbit', '50Gbit'])``."""
    key, sep, values = text.partition("=")
    items = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not items:
        raise TraincastError(f"--sweep {text!r}: expected KEY=V1,V2,... "
                             "(for example nic=25Gbit,50Gbit,100Gbit)")
    return key.strip(), items


def _sweep_value(key: str, text: str) -> Any:
    if key in BOOL_KEYS:
        low = text.lower()
        if low not in ("true", "false", "on", "off", "1", "0"):
            raise TraincastError(f"--sweep {key}: {text!r} is not true/false")
        return low in ("true", "on", "1")
    if key == "overlap":
        try:
            return float(text)
        except ValueError:
            raise TraincastError(f"--sweep overlap: {text!r} is not a number") from None
    return text


def sweep(base: list[Scenario], key: str, values: list[str],
          catalog: Catalog) -> list[Scenario]:
    """One scenario per value of ``key``: each base scenario (or every job) with key = value.
    A base scenario's ``upgrade_only`` is dropped where the sweep sets a link: a sweep asks
    what every value does, slower ones included."""
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise TraincastError(f"--sweep {key}: {', '.join(twice)} given twice",
                             hint="each value once")
    bases = base or [Scenario(name="", description="every job")]
    out = []
    for sc in bases:
        match = {k: v for k, v in sc.match.items()
                 if not (k == "upgrade_only" and key in LINK_KEYS)}
        for text in values:
            value = check_change(f"--sweep {key}", key, _sweep_value(key, text), catalog)
            name = f"{sc.name}:{key}={text}" if sc.name else f"{key}={text}"
            out.append(replace(sc, name=name, match=match, changes={**sc.changes, key: value},
                               description=f"{sc.description}; {key} = {text}"))
    return out
