"""Derive the small count tables behind the bundled sample trace from the real public traces.

Reads ../shared/data (beside the repository; or the directory given as the first argument) and
writes ``src/traincast/trace/sample/stats.json``; the package reads only that JSON at run time.
Standard library only, so every count can be checked by hand:

* ``gpus_per_job``: pods of the Alibaba GPU cluster pod list (``openb_pod_list_gpuspec33.csv``)
  by ``num_gpu``, pods with at least one GPU (CPU pods are not training jobs);
* ``gpu_type_gpus``: GPUs per GPU type in the PAI 2020 machine table (``pai_machine_spec.csv``,
  Σ ``cap_gpu`` by ``gpu_type``, CPU machines excluded);
* ``duration_s``: job durations of the ElasticFlow ``cluster04.csv`` trace, as counts in
  log-spaced bins, per GPU-count class (1 GPU, 2–8 GPUs, more than 8);
* ``arrivals_per_s``: that trace's jobs / (last − first submission).

Run: ``python scripts/derive_sample_stats.py [DATA_DIR]``.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "traincast" / "trace" / "sample" / "stats.json"
BIN_EDGES_S = [10 ** (k / 4) for k in range(0, 29)]  # 1 s .. 10^7 s, four bins per decade
SIZE_CLASSES = {"1": (1, 1), "2-8": (2, 8), "9+": (9, math.inf)}


def size_class(n: int) -> str:
    return next(k for k, (lo, hi) in SIZE_CLASSES.items() if lo <= n <= hi)


def derive(data: Path) -> dict:
    pods = data / "alibaba-gpu-v2023" / "openb_pod_list_gpuspec33.csv"
    with pods.open(newline="") as f:
        sizes = Counter(int(r["num_gpu"]) for r in csv.DictReader(f) if int(r["num_gpu"]) >= 1)
    machines = data / "alibaba-pai-v2020" / "pai_machine_spec.csv"
    with machines.open(newline="") as f:
        types: Counter[str] = Counter()
        for _machine, gpu_type, _cpu, _mem, cap_gpu in csv.reader(f):
            if gpu_type != "CPU":
                types[gpu_type] += int(cap_gpu)
    jobs = data / "elasticflow" / "cluster04.csv"
    hist = {k: [0] * (len(BIN_EDGES_S) - 1) for k in SIZE_CLASSES}
    submits = []
    with jobs.open(newline="") as f:
        for r in csv.DictReader(f):
            d = float(r["duration"])
            submits.append(float(r["submission_time"]))
            d = min(max(d, BIN_EDGES_S[0]), BIN_EDGES_S[-1] * 0.999999)
            b = sum(1 for e in BIN_EDGES_S[1:-1] if d >= e)
            hist[size_class(int(r["num_gpu"]))][b] += 1
    return {
        "gpus_per_job": {
            "source": f"{pods.name} (Alibaba GPU cluster pod list, Weng et al., ATC 2023): pods "
                      "by num_gpu, pods with >= 1 GPU",
            "value": sorted(sizes), "count": [sizes[k] for k in sorted(sizes)]},
        "gpu_type_gpus": {
            "source": f"{machines.name} (Alibaba PAI 2020 trace): sum of cap_gpu by gpu_type, "
                      "CPU machines excluded",
            "value": sorted(types), "count": [types[k] for k in sorted(types)]},
        "duration_s": {
            "source": f"elasticflow/{jobs.name}: duration (s) counted in log-spaced bins per "
                      "GPU-count class (durations clipped to [1 s, 1e7 s])",
            "bin_edges_s": BIN_EDGES_S,
            "classes": {k: {"min_gpus": lo, "max_gpus": None if hi == math.inf else hi,
                            "count": hist[k]} for k, (lo, hi) in SIZE_CLASSES.items()}},
        "arrivals_per_s": {
            "source": f"elasticflow/{jobs.name}: jobs / (last - first submission_time)",
            "value": len(submits) / (max(submits) - min(submits))},
    }


def main(argv: list[str]) -> int:
    data = Path(argv[0]) if argv else ROOT.parent / "shared" / "data"
    stats = derive(data)
    OUT.write_text(json.dumps(stats, indent=1) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
