"""Benchmark: traincast's predictions against published GPU training throughputs.

Every row of ``traincast/validation/published.toml`` (Lambda's PyTorch benchmark: ResNet-50,
BERT-base and BERT-large SQuAD, fp16 and fp32, 1 and 8 GPUs on V100, A10, A100, H100 PCIe and
H100 SXM5) predicted with the shipped catalog and the default compute strategy
(``traincast.validation.published``); prints the median / 90th percentile / max of |error| of
the rows and of the cross-GPU ratios, the paper's flat-peak model on the same rows as the
baseline (ratio of the two medians), the Megatron-LM SC'21 table, llm-foundry's MPT tables and
NVIDIA NeMo's FP8 tables (median and worst per GPU and precision), the PyTorch FSDP runs of
Llama models in ``docs/published-rows-llm.toml`` (torchtitan, fms-fsdp) and the steps measured
on an H200 no fit has seen (``data/h200/steps.toml``); the last two reported, no target.

Targets: median |error| <= 10%, every cross-GPU ratio within 15%; exit 1 when missed.
``python benchmarks/bench_published.py [--catalog FILE] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

H200_ROWS = Path(__file__).resolve().parents[1] / "data" / "h200" / "steps.toml"
FSDP_ROWS = Path(__file__).resolve().parents[1] / "docs" / "published-rows-llm.toml"


def main(argv: list[str]) -> int:
    from traincast.cli.common import to_jsonable
    from traincast.hardware.catalog import load_catalog
    from traincast.validation.published import MEDIAN_TARGET, RATIO_TARGET, validate_published

    ap = argparse.ArgumentParser()
    ap.add_argument("--catalog", default=None, help="a catalog file merged over the shipped one")
    ap.add_argument("--json", default=None, help="also write the result here")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    catalog = load_catalog([args.catalog] if args.catalog else None)
    out = validate_published(catalog)
    print(f"{'model':17s} {'GPU':15s} {'n':>2s} {'dtype':5s} {'batch':>5s} {'published':>10s} "
          f"{'predicted':>10s} {'error':>7s} {'paper':>7s}")
    for r in out["rows"]:
        print(f"{r['model']:17s} {r['gpu']:15s} {r['gpus']:2d} {r['dtype']:5s} "
              f"{r['batch_per_gpu']:5d} {r['published']:10.0f} {r['predicted']:10.0f} "
              f"{r['error']:+7.1%} {r['paper_error']:+7.1%}")
    s, p, q = out["summary"], out["paper_summary"], out["ratio_summary"]
    print(f"\npublished set ({s['n']} rows): median |error| {s['median_abs_error']:.1%} (target "
          f"<= {MEDIAN_TARGET:.0%}), p90 {s['p90_abs_error']:.1%}, max {s['max_abs_error']:.1%};"
          f" baseline paper model median {p['median_abs_error']:.1%}, p90 "
          f"{p['p90_abs_error']:.1%}: ratio {s['median_abs_error'] / p['median_abs_error']:.2f}")
    print(f"cross-GPU ratios: {out['ratios_within_target']} of {out['ratios_total']} within "
          f"{RATIO_TARGET:.0%}; median |error| {q['median_abs_error']:.1%}, p90 "
          f"{q['p90_abs_error']:.1%}, max {q['max_abs_error']:.1%}")
    mg = out["megatron"]
    if mg.get("rows"):
        m = mg["summary"]
        print(f"Megatron-LM SC'21 ({m['n']} rows): median |error| {m['median_abs_error']:.1%}, "
              f"p90 {m['p90_abs_error']:.1%}, max {m['max_abs_error']:.1%}")
    else:
        print(f"Megatron-LM SC'21: not evaluated ({mg.get('failed')})")
    from traincast.parallel.validation import CHECK_TITLES

    for key, title in (("published_llm", CHECK_TITLES["published_llm.toml"] + " (TFLOP/s)"),
                       ("llm_foundry", "llm-foundry MPT (MFU)"),
                       ("nemo", "NVIDIA NeMo FP8 (tokens/s)")):
        tab = out.get(key, {})
        if not tab.get("rows"):
            print(f"{title}: not evaluated ({tab.get('failed')})")
            continue
        m = tab["summary"]
        groups = "; ".join(f"{g} {v['median_abs_error']:.1%} / worst {v['max_abs_error']:.1%}"
                           for g, v in tab["by_gpu_dtype"].items())
        print(f"{title} ({m['n']} rows, never fitted): median |error| "
              f"{m['median_abs_error']:.1%}, p90 {m['p90_abs_error']:.1%}, max "
              f"{m['max_abs_error']:.1%}, signed median {m['median_error']:+.1%}; {groups}")
    if FSDP_ROWS.is_file():
        fsdp = out["fsdp_rows"] = validate_published(catalog, path=FSDP_ROWS)["llm_rows"]
        m = fsdp["summary"]
        worst = max(fsdp["rows"], key=lambda r: abs(r["rel_error"]))
        print(f"PyTorch FSDP Llama runs ({m['n']} rows of {FSDP_ROWS.name}, never fitted): median "
              f"|error| {m['median_abs_error']:.1%}, p90 {m['p90_abs_error']:.1%}, max "
              f"{m['max_abs_error']:.1%} ({worst['run']}), signed median "
              f"{m['median_error']:+.1%}")
    if H200_ROWS.is_file():
        h = out["h200"] = validate_published(catalog, path=H200_ROWS)
        for r in h["rows"]:
            print(f"  H200 measured: {r['model']:17s} {r['dtype']:5s} b{r['batch_per_gpu']:<3d} "
                  f"{r['published']:8.2f} {r['predicted']:8.2f} {r['unit']}  {r['error']:+7.1%}")
        hs = h["summary"]
        print(f"H200 measured steps ({hs['n']} rows, never fitted): median |error| "
              f"{hs['median_abs_error']:.1%}, p90 {hs['p90_abs_error']:.1%}, max "
              f"{hs['max_abs_error']:.1%}; the paper model "
              f"{h['paper_summary']['median_abs_error']:.1%}")
    print(f"{time.perf_counter() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(to_jsonable(out), fh, indent=2)
    if not out["targets_met"]:
        print("MISSED: published-throughput targets")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
