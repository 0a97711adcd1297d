"""Helpers shared by the benchmarks (``bench_*.py`` import this module from their folder)."""

from __future__ import annotations


def verdict(value: float, target: float, unit: str = "s") -> int:
    """The benchmark's exit status: 0 when ``value`` (seconds, or another measure in
    ``unit``) meets ``target``, else 1 after a ``MISSED`` line (a NaN value misses)."""
    if not value <= target:
        print(f"MISSED: {value:.2f} {unit} > {target:g} {unit}")
        return 1
    return 0
