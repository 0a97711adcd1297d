"""Profiling LLaMA-7B's full training step (batch 1 x 2048 tokens) on meta: time and peak RSS.

Target: the traincast capture (forward, loss, backward, Adam step; per-op FLOPs, bytes, phases,
fusion estimate, memory footprint) in <= 10 s and <= 1.5 GB peak RSS. Baseline, measured in the
same run: torch's FlopCounterMode alone over the same step of the same model. Each runs in its
own fresh process so that its peak RSS is its own; the time is that of the step (model built on
meta, imports excluded), and the ratio traincast / FlopCounterMode is printed.
"""

from __future__ import annotations

import json
import subprocess
import sys

TARGET_S = 10.0
TARGET_RSS_GB = 1.5
MODEL = "llama-7b"

CHILD = r"""
import json, resource, sys, time
import torch
mode = sys.argv[1]
from traincast.zoo import get_model
entry = get_model(sys.argv[2])
if mode == "traincast":
    from traincast.features.profile import profile_model
    t0 = time.perf_counter()
    rec = profile_model("zoo:" + sys.argv[2])
    elapsed = time.perf_counter() - t0
    flops = rec["flops_total"]
else:
    from torch.utils.flop_counter import FlopCounterMode
    t0 = time.perf_counter()
    model = entry.build_meta()
    inputs = [t.to("meta") for t in entry.inputs(entry.default_batch)]
    opt = torch.optim.Adam(model.parameters(), foreach=True)
    with FlopCounterMode(display=False) as counter:
        model(*inputs).backward()
        opt.step()
    elapsed = time.perf_counter() - t0
    flops = counter.get_total_flops()
rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
print(json.dumps({"time_s": elapsed, "rss_gb": rss_gb, "flops": flops}))
"""


def run(mode: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, mode, MODEL], capture_output=True,
                          text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{mode} run failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    ours = run("traincast")
    base = run("flopcounter")
    print(f"{MODEL} training step, batch 1 x 2048 tokens, on meta")
    print(f"{'':24}{'time s':>10}{'peak RSS GB':>14}{'FLOPs':>12}")
    for name, r in (("traincast profile", ours), ("FlopCounterMode alone", base)):
        print(f"{name:24}{r['time_s']:>10.2f}{r['rss_gb']:>14.3f}{r['flops']:>12.4g}")
    print(f"ratio traincast / FlopCounterMode: time {ours['time_s'] / base['time_s']:.2f}x, "
          f"RSS {ours['rss_gb'] / base['rss_gb']:.2f}x")
    print(f"targets: time <= {TARGET_S:g} s, RSS <= {TARGET_RSS_GB:g} GB")
    missed = ours["time_s"] > TARGET_S or ours["rss_gb"] > TARGET_RSS_GB
    # the two counts agree: same torch formulas over the same step
    if abs(ours["flops"] - base["flops"]) > 1e-6 * base["flops"]:
        print(f"note: FLOP totals differ (traincast {ours['flops']:.6g}, "
              f"FlopCounterMode {base['flops']:.6g}: attention kernels counted differently)")
    print("MISSED" if missed else "ok")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
