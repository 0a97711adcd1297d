"""Run every benchmark in this folder (``bench_*.py``), each printing ratios against a baseline
measured in the same run. ``make bench`` calls this; ``python benchmarks/run.py NAME`` runs one.
"""

from __future__ import annotations

import runpy
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


def main(argv: list[str]) -> int:
    files = sorted(HERE.glob("bench_*.py"))
    if argv:
        files = [f for f in files if any(a in f.stem for a in argv)]
    failed = []
    for f in files:
        print(f"\n=== {f.stem} ===", flush=True)
        t0 = time.perf_counter()
        saved, sys.argv = sys.argv, [str(f)]  # each benchmark sees its own command line
        try:
            runpy.run_path(str(f), run_name="__main__")
        except SystemExit as exc:
            if exc.code not in (0, None):
                failed.append(f.stem)
        finally:
            sys.argv = saved
        print(f"--- {f.stem}: {time.perf_counter() - t0:.1f} s", flush=True)
    if failed:
        print(f"\nbenchmarks that missed their target: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
