"""Benchmark: traincast's predictions against real training steps on this machine.

At 1 torch thread and at all cores (``traincast.validation.validate_threads``), each thread count
with its own calibration (full; ``--quick``: quick calibration and the quick cases): predicted vs
measured step time per case, and the median / 90th percentile / max of |error| per thread
count. The baseline, measured in the same run on the same cases and catalog, is the paper's
additive model (one peak FLOP rate, one memory bandwidth); the ratio of the two median errors
is printed. Cases of P processes run at T threads only when P * T <= cores. "contention" =
the share of the time other programs held the cores our threads were ready to run on (run-queue
wait over threads x wall time), for the calibration and for each 1-process case: results taken
under contention describe the machine's sharing, not the model.

Targets, at every thread count: median |error| <= 15% and no case beyond 40%; exit 1 when
missed. ``python benchmarks/bench_validate.py [--quick] [--threads N ...] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def _report(out: dict) -> None:
    from traincast.validation import MAX_TARGET, MEDIAN_TARGET

    t = out["threads"]
    print(f"\n-- {t} thread(s) per process --")
    if out.get("calibration_contention") is not None:
        print(f"calibration: cores held by other programs {out['calibration_contention']:.0%}"
              " of the time our threads were ready to run")
    print(f"{'model':18s} {'arch':16s} {'batch':>5s} {'measured':>10s} {'predicted':>10s} "
          f"{'error':>7s} {'paper':>10s} {'paper err':>9s} {'contention':>10s}")
    for c in out["cases"]:
        wait = c.get("runqueue_wait_fraction")
        print(f"{c['model']:18s} {c['arch']:16s} {c['batch_size']:5d} "
              f"{c['measured_s'] * 1e3:8.1f}ms {c['predicted_s'] * 1e3:8.1f}ms "
              f"{c['error']:+7.1%} {c['paper_predicted_s'] * 1e3:8.1f}ms "
              f"{c['paper_error']:+9.1%} {'-' if wait is None else f'{wait:.0%}':>10s}")
    for f in out["failed"]:
        print(f"failed: {f['model']} {f['arch']} b{f['batch_size']}: {f['reason']}")
    for f in out["skipped"]:
        print(f"skipped: {f['model']} {f['arch']} b{f['batch_size']}: {f['reason']}")
    med, paper = out["median_abs_error"], out["paper_median_abs_error"]
    print(f"threads={t}: median |error| {med:.1%} (target <= {MEDIAN_TARGET:.0%}), p90 "
          f"{out['p90_abs_error']:.1%}, max {out['max_abs_error']:.1%} (target <= "
          f"{MAX_TARGET:.0%}); baseline paper model median {paper:.1%}: ratio "
          f"{med / paper if paper else float('nan'):.2f}")


def main(argv: list[str]) -> int:
    from traincast.cli.common import to_jsonable
    from traincast.validation import validate_threads

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, nargs="*", default=None,
                    help="thread counts (default: 1 and all cores)")
    ap.add_argument("--json", default=None, help="also write the result here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    both = validate_threads(args.threads or None, quick=args.quick, device="cpu",
                            progress=lambda m: print(f"  · {m}", file=sys.stderr, flush=True))
    for out in both["runs"]:
        _report(out)
    print()
    for t, s in both["by_threads"].items():
        print(f"CPU cases at {t} thread(s): median |error| {s['median_abs_error']:.1%}, p90 "
              f"{s['p90_abs_error']:.1%}, max {s['max_abs_error']:.1%} ({s['cases']} cases, "
              f"{s['skipped']} skipped, {s['failed']} failed)")
    print(f"{time.perf_counter() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(to_jsonable(both), fh, indent=2)
    ok = all(r["targets_met"] and not r["failed"] for r in both["runs"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
