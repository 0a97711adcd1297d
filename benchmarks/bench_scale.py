"""Scale benchmark: ingest + characterize + five what-if scenarios of 10 M and 50 M jobs, each
step a ``traincast`` command in its own process, with its seconds and peak memory (RSS).

Targets: peak RSS of every step <= 1.5 GB at 10 M jobs and <= 2 GB at 50 M jobs; the model
evaluation of 1 M jobs through the five scenarios in <= 1 s. Baselines measured in the same
run: the in-memory path (the whole store loaded as one Arrow table, then characterized and
run through the scenarios) at the smallest size, its peak RSS per job printed beside the
streamed commands'; for the model time, a per-job ``predict()`` loop over a sample,
extrapolated. ``TRAINCAST_SCALE_JOBS=1000000,5000000`` runs other sizes. Needs about 90 bytes
of disk per job (the CSV and the store, in a temporary folder).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from _common import verdict

SIZES = [int(s) for s in os.environ.get("TRAINCAST_SCALE_JOBS", "10000000,50000000").split(",")]
RSS_TARGET_GB = {10_000_000: 1.5, 50_000_000: 2.0}
MODEL_JOBS = 1_000_000
MODEL_TARGET_S = 1.0
SCENARIOS = ["eth100", "nvlink-allreduce", "gpu-a100", "mixed-precision", "op-fusion"]
GEN_ROWS = 1_000_000
WORKLOADS = np.array(["resnet50", "bert-base", "transformer-nmt", "mobilenet-v2"])
BIN = Path(sys.executable).parent


def write_trace(path: Path, n: int, seed: int = 0) -> None:
    """A canonical CSV of n jobs, written 1 M rows at a time: the PAI-like architecture mix,
    GPU types, zoo workloads for a third, features for another third, none for the rest."""
    rng = np.random.default_rng(seed)
    writer = None
    try:
        for start in range(0, n, GEN_ROWS):
            m = min(GEN_ROWS, n - start)
            arch = np.array(["1w1g", "allreduce-local", "allreduce-cluster", "ps-worker"])[
                rng.choice(4, m, p=[0.6, 0.15, 0.05, 0.2])]
            gpus = np.where(arch == "1w1g", 1, 2 ** rng.integers(1, 4, m)).astype(float)
            t0 = np.sort(rng.uniform(0, 3e7, m)).round() + start * 30.0
            kind = rng.integers(0, 3, m)  # 0: features, 1: a zoo workload, 2: nothing

            def feat(scale: float, kind: np.ndarray = kind, m: int = m) -> pa.Array:
                return pa.array(np.where(kind == 0, rng.lognormal(0, 1, m) * scale, np.nan),
                                from_pandas=True)

            ps = arch == "ps-worker"
            table = pa.table({
                "job_id": pa.array(np.char.add("job-", np.arange(start, start + m).astype(str))),
                "start_time_s": t0, "end_time_s": t0 + rng.lognormal(7, 2, m).round(),
                "architecture": arch, "n_gpus": gpus,
                "n_workers": pa.array(np.where(ps, gpus, np.nan), from_pandas=True),
                "n_ps": pa.array(np.where(ps, np.maximum(gpus // 4, 1), np.nan),
                                 from_pandas=True),
                "gpu_type": np.array(["V100", "P100", "T4", "V100M32", "MISC"])[
                    rng.integers(0, 5, m)],
                "workload": pa.array(np.where(kind == 1, WORKLOADS[rng.integers(0, 4, m)],
                                              None), type=pa.string()),
                "flops_compute_bound": feat(1e12), "bytes_memory_bound": feat(1e10),
                "weight_bytes": feat(1e8), "embedding_bytes_touched": feat(1e6),
                "input_bytes": feat(1e7),
            })
            writer = writer or pacsv.CSVWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def run_step(args: list[str]) -> tuple[float, float, str]:
    """Run a command; its wall seconds, the peak RSS in GB it printed on stderr (the
    :data:`WRAPPER` line) and its stdout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    elapsed = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {err[-2000:]}")
    rss_line = [ln for ln in err.splitlines() if ln.startswith("peak_rss_kb=")]
    if not rss_line:
        raise RuntimeError(f"{' '.join(args)} printed no peak RSS: {err[-2000:]}")
    return elapsed, int(rss_line[-1].split("=")[1]) * 1024 / 1e9, out


WRAPPER = ("import resource, sys\n"
           "sys.argv = ['traincast', *sys.argv[1:]]\n"
           "try:\n"
           "    from traincast.cli import main\n"
           "    main()\n"
           "except SystemExit as e:\n"
           "    code = e.code\n"
           "else:\n"
           "    code = 0\n"
           "print(f'peak_rss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', "
           "file=sys.stderr)\n"
           "sys.exit(code)\n")
IN_MEMORY = ("import resource, sys, time\n"
             "from traincast.analysis.characterize import characterize\n"
             "from traincast.analysis.whatif import whatif\n"
             "from traincast.hardware.catalog import load_catalog\n"
             "from traincast.trace import load_jobs, prepare_jobs\n"
             "cat = load_catalog()\n"
             "jobs = prepare_jobs(load_jobs(sys.argv[1]), cat, 'mix')\n"
             "characterize(jobs, cat, fill=False)\n"
             "whatif(jobs, sys.argv[2].split(','), cat)\n"
             "print(f'peak_rss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', "
             "file=sys.stderr)\n")


def traincast(*args: str) -> list[str]:
    return [sys.executable, "-c", WRAPPER, *args]


def model_time() -> tuple[float, float, float]:
    """Seconds (best of 3) of the five scenarios over 1 M jobs in the time model (the local
    engine's ``run_scenarios``: base and scenario times of every job), of the whole
    ``whatif`` (the same plus the summaries), and of the per-job loop, extrapolated."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_whatif import baseline_loop, make_jobs
    from traincast.analysis.whatif import whatif
    from traincast.engine.local import run_scenarios
    from traincast.hardware.catalog import load_catalog
    from traincast.jobs import Columns
    from traincast.scenarios import as_scenarios

    catalog = load_catalog()
    jobs = make_jobs(MODEL_JOBS)
    whatif(jobs.slice(0, 1000), SCENARIOS, catalog)  # warm-up: imports, profile lookups
    scs = as_scenarios(SCENARIOS, catalog)

    def best(f: object) -> float:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            f()  # type: ignore[operator]
            times.append(time.perf_counter() - t0)
        return min(times)

    model_s = best(lambda: run_scenarios(Columns.of(jobs), scs, catalog, threads=2))
    whatif_s = best(lambda: whatif(jobs, SCENARIOS, catalog))
    return model_s, whatif_s, baseline_loop(jobs, catalog) * MODEL_JOBS


def main() -> int:
    ok = 0
    scen = [a for s in SCENARIOS for a in ("-s", s)]
    print(f"scenarios: {', '.join(SCENARIOS)}")
    baseline_per_job_b = None
    for n in SIZES:
        target = RSS_TARGET_GB.get(n, 2.0)
        with tempfile.TemporaryDirectory(prefix="traincast-scale-") as tmp:
            csv, db = Path(tmp) / "jobs.csv", Path(tmp) / "jobs.duckdb"
            t0 = time.perf_counter()
            write_trace(csv, n)
            print(f"\n{n:,} jobs: wrote a {csv.stat().st_size / 1e9:.1f} GB CSV in "
                  f"{time.perf_counter() - t0:.0f} s")
            steps = {
                "ingest": traincast("--quiet", "ingest", str(csv), "--db", str(db), "--json"),
                "characterize": traincast("--quiet", "characterize", "--db", str(db),
                                          "--json"),
                "whatif x5": traincast("--quiet", "whatif", "--db", str(db), *scen, "--json"),
            }
            peak = 0.0
            for name, args in steps.items():
                s, rss, _ = run_step(args)
                peak = max(peak, rss)
                print(f"  {name:13s} {s:7.1f} s   peak RSS {rss:5.2f} GB "
                      f"({rss * 1e9 / n:5.0f} B/job)")
            print(f"  peak RSS {peak:.2f} GB (target <= {target:g} GB)")
            if baseline_per_job_b is None:
                s, rss, _ = run_step([sys.executable, "-c", IN_MEMORY, str(db),
                                      ",".join(SCENARIOS)])
                baseline_per_job_b = rss * 1e9 / n
                print(f"  baseline, in memory (load + characterize + whatif): {s:.1f} s, "
                      f"peak RSS {rss:.2f} GB ({baseline_per_job_b:.0f} B/job)")
            print(f"  ratio peak RSS per job, streamed / in memory (measured at "
                  f"{SIZES[0]:,} jobs): {peak * 1e9 / n / baseline_per_job_b:.2f}")
            ok |= verdict(peak, target, "GB")
    model_s, whatif_s, loop_s = model_time()
    print(f"\nmodel time: {len(SCENARIOS)} scenarios x {MODEL_JOBS:,} jobs in {model_s:.2f} s "
          f"(the time model: base and scenario times of every job; target <= "
          f"{MODEL_TARGET_S:g} s); the whole whatif with its summaries: {whatif_s:.2f} s")
    print(f"baseline: per-job predict() loop, extrapolated: {loop_s:,.0f} s; ratio "
          f"{loop_s / model_s:,.0f}x (model), {loop_s / whatif_s:,.0f}x (whole whatif)")
    ok |= verdict(model_s, MODEL_TARGET_S)
    return ok


if __name__ == "__main__":
    sys.exit(main())
