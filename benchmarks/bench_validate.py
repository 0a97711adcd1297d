"""Benchmark: traincast's predictions against real training steps on this machine.

Calibrates (full), then runs every validation case (``traincast validate``): predicted vs
measured step time per case, and the median / 90th percentile / max of |error|. The baseline,
measured in the same run on the same cases and catalog, is the paper's additive model (one
peak FLOP rate, one memory bandwidth); the ratio of the two median errors is printed.

Targets: median |error| <= 15% and no case beyond 40%; exit 1 when missed.
``python benchmarks/bench_validate.py [--quick] [--catalog FILE] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv: list[str]) -> int:
    from traincast.cli.common import to_jsonable
    from traincast.validate import MAX_TARGET, MEDIAN_TARGET, validate

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--catalog", default=None)
    ap.add_argument("--json", default=None, help="also write the result here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = validate(args.catalog, quick=args.quick,
                   progress=lambda m: print(f"  · {m}", file=sys.stderr, flush=True))
    elapsed = time.perf_counter() - t0
    print(f"{'model':18s} {'arch':16s} {'batch':>5s} {'measured':>10s} {'predicted':>10s} "
          f"{'error':>7s} {'paper':>10s} {'paper err':>9s}")
    for c in out["cases"]:
        print(f"{c['model']:18s} {c['arch']:16s} {c['batch_size']:5d} "
              f"{c['measured_s'] * 1e3:8.1f}ms {c['predicted_s'] * 1e3:8.1f}ms "
              f"{c['error']:+7.1%} {c['paper_predicted_s'] * 1e3:8.1f}ms "
              f"{c['paper_error']:+9.1%}")
    for f in out["failed"]:
        print(f"failed: {f['model']} {f['arch']} b{f['batch_size']}: {f['reason']}")
    med, paper = out["median_abs_error"], out["paper_median_abs_error"]
    print(f"median |error| {med:.1%} (target <= {MEDIAN_TARGET:.0%}), p90 "
          f"{out['p90_abs_error']:.1%}, max {out['max_abs_error']:.1%} (target <= "
          f"{MAX_TARGET:.0%}); baseline paper model median {paper:.1%}: ratio "
          f"{med / paper if paper else float('nan'):.2f}; {elapsed:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(to_jsonable(out), fh, indent=2)
    return 0 if out["targets_met"] and not out["failed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
