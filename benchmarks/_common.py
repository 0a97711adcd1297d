"""Helpers shared by the benchmarks (``bench_*.py`` import this module from their folder)."""

from __future__ import annotations


def verdict(seconds: float, target_s: float) -> int:
    """The benchmark's exit status: 0 when ``seconds`` meets ``target_s``, else 1 after a
    ``MISSED`` line."""
    if seconds > target_s:
        print(f"MISSED: {seconds:.2f} s > {target_s:g} s")
        return 1
    return 0
