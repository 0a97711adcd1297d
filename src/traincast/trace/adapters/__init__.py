"""Trace adapters: each maps one public trace format onto the canonical job table (SQL plans
run by DuckDB). ``ADAPTERS`` maps the ``--format`` name to the adapter module; every module has
``NAME``, a docstring with its mapping rules (docs/traces.md), and ``plans(con, paths, mapping)``.
"""

from __future__ import annotations

from types import ModuleType

from traincast.errors import TraincastError
from traincast.trace.adapters import (
    alibaba2023,
    canonical,
    elasticflow,
    helios,
    pai2020,
    philly,
    slurm,
)

ADAPTERS: dict[str, ModuleType] = {m.NAME: m for m in (pai2020, alibaba2023, elasticflow, philly,
                                                       helios, slurm, canonical)}
FORMATS: tuple[str, ...] = tuple(ADAPTERS)


def adapter(name: str) -> ModuleType:
    """The adapter module of a ``--format`` name."""
    try:
        return ADAPTERS[name]
    except KeyError:
        raise TraincastError(f"unknown trace format {name!r}",
                             hint=f"--format is one of {', '.join(FORMATS)}") from None
