"""Benchmark: ``plan zoo:llama2-70b --gpus 512`` ranks every feasible configuration in <= 5 s.

Baseline, measured in the same run: the same configurations evaluated one at a time in a Python
loop (one ``hybrid.evaluate`` call per configuration). Prints both and their ratio; exits
non-zero when the vectorized search misses 5 s.
"""

from __future__ import annotations

import sys
import time

from traincast.hardware.catalog import load_catalog
from traincast.parallel.hybrid import evaluate, hybrid_hardware
from traincast.parallel.models import get_model
from traincast.parallel.plan import enumerate_configs, plan

TARGET_S = 5.0


def main() -> int:
    catalog = load_catalog()
    t0 = time.perf_counter()
    out = plan("zoo:llama2-70b", 512, "dgx-a100", catalog=catalog, top=5)
    vec_s = time.perf_counter() - t0

    cfg = get_model("llama2-70b")
    hw = hybrid_hardware(catalog, "dgx-a100", "bf16")
    # the configurations plan searched: the default recipe's (megatron-2021: no HSDP)
    cfgs = enumerate_configs(cfg, 512, hw.gpus_per_node, out["global_batch"],
                             hsdp=out["assumed"]["searched"]["hsdp"])
    n = len(cfgs["dp"])
    assert n == out["searched"], "the loop times other configurations than plan searched"
    t0 = time.perf_counter()
    best = float("inf")
    for i in range(n):
        one = {k: int(cfgs[k][i]) for k in cfgs}
        res = evaluate(cfg, hw, **one | {"sp": bool(one["sp"])},
                       global_batch=out["global_batch"])
        if bool(res["fits"]):
            best = min(best, float(res["total_s"]))
    loop_s = time.perf_counter() - t0
    assert abs(best - out["top"][0]["time_s"]["total"]) <= 1e-9 * best, "loop disagrees"
    print(f"plan llama2-70b on 512 GPUs: {out['searched']} configurations, "
          f"{out['feasible']} feasible")
    print(f"vectorized search (whole plan): {vec_s:.3f} s   (target <= {TARGET_S:.0f} s)")
    print(f"per-configuration Python loop:  {loop_s:.3f} s")
    print(f"speedup: {loop_s / vec_s:.1f}x")
    return 0 if vec_s <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
