"""Helpers shared by the benchmarks (``bench_*.py`` import this module from their folder)."""

from __future__ import annotations


def verdict(seconds: float, target_s: float, unit: str = "s") -> int:
    """The benchmark's exit status: 0 when ``seconds`` (or another measure, in ``unit``)
    meets ``target_s``, else 1 after a ``MISSED`` line."""
    if seconds > target_s:
        print(f"MISSED: {seconds:.2f} {unit} > {target_s:g} {unit}")
        return 1
    return 0
