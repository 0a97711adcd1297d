"""A small study folder with the files ``traincast study`` writes, for the report tests.

Times come from the core model (``predict_table``); the JSON files carry the keys of the
characterize / what-if outputs. One job is named ``<script>alert(1)</script>``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from traincast.hardware.catalog import load_catalog
from traincast.model import COMPONENTS
from traincast.predict import predict_table

INJECTED = "<script>alert(1)</script>"
COMPONENT_COLUMNS = ("data_io_s", "compute_flop_s", "compute_mem_s", "comm_s")


def jobs_table() -> dict[str, np.ndarray]:
    """Twelve jobs over all five architectures; one with unknown features, one without GPUs."""
    arch = ["1w1g", "1w1g", "allreduce-local", "allreduce-local", "allreduce-cluster",
            "allreduce-cluster", "ps-worker", "ps-worker", "pearl", "1w1g", "1w1g",
            "allreduce-local"]
    n_gpus = [1, 1, 8, 4, 32, 16, 16, 8, 8, 1, 0, 2]
    workload = ["resnet", "bert", "bert", "resnet", "bert", "nmt", "ctr", "ctr", "ctr",
                INJECTED, "resnet", "unknown-model"]
    job_id = [f"j{i:02d}" for i in range(len(arch))]
    job_id[9] = INJECTED
    flops = [2.4e12, 9e12, 9e12, 2.4e12, 9e12, 3e12, 4e11, 4e11, 4e11, 1e12, 2.4e12, np.nan]
    mem = [4e10, 2e10, 2e10, 4e10, 2e10, 1e10, 5e9, 5e9, 5e9, 1e9, 4e10, np.nan]
    weight = [1e8, 1.3e9, 1.3e9, 1e8, 1.3e9, 8e8, 2e7, 2e7, 2e7, 1e7, 1e8, np.nan]
    emb = [0, 0, 0, 0, 0, 2e8, 5e8, 5e8, 5e8, 0, 0, np.nan]
    inp = [1.9e7, 2e6, 2e6, 1.9e7, 2e6, 1e6, 4e6, 4e6, 4e6, 1e6, 1.9e7, np.nan]
    start = np.arange(len(arch), dtype=float) * 100.0
    dur = np.array([60, 3600, 7200, 600, 86400, 40000, 9000, 300, 1200, 30, 10, 500.0])
    return {
        "job_id": np.array(job_id, dtype=object),
        "submit_time_s": start - 5, "start_time_s": start, "end_time_s": start + dur,
        "status": np.array(["Terminated"] * len(arch), dtype=object),
        "user": np.array([f"u{i % 3}" for i in range(len(arch) - 1)] + [INJECTED],
                         dtype=object),
        "architecture": np.array(arch, dtype=object),
        "n_gpus": np.array(n_gpus, dtype=float),
        "n_workers": np.array([0, 0, 0, 0, 0, 0, 16, 8, 0, 0, 0, 0]),
        "n_ps": np.array([0, 0, 0, 0, 0, 0, 4, 2, 0, 0, 0, 0]),
        "gpus_per_worker": np.array([1, 1, 8, 4, 8, 8, 1, 1, 8, 1, 0, 2], dtype=float),
        "gpu_type": np.array(["V100", "V100", "V100", "P100", "V100", "V100", "T4", "V100",
                              "V100", "V100", "V100", "V100"], dtype=object),
        "node": np.array([""] * len(arch), dtype=object),
        "workload": np.array(workload, dtype=object),
        "flops_compute_bound": np.array(flops), "bytes_memory_bound": np.array(mem),
        "weight_bytes": np.array(weight), "embedding_bytes_touched": np.array(emb, dtype=float),
        "input_bytes": np.array(inp), "censored": np.array([False] * 11 + [True]),
    }


def make_study(folder: Path, *, sample: bool = True) -> Path:
    """Write study.json, summary.json, characterize.json, whatif.json, whatif_jobs.csv,
    recommend.json/csv and jobs.parquet for :func:`jobs_table` into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    cat = load_catalog()
    jobs = jobs_table()
    bd = predict_table(jobs, cat)
    table = dict(jobs)
    for c, col in zip(COMPONENTS, COMPONENT_COLUMNS, strict=True):
        table[col] = getattr(bd, c)
    table["total_s"] = bd.total
    table["bottleneck"] = bd.bottleneck_names()
    table["gpu_util_pred"] = bd.gpu_util()
    pq.write_table(pa.table(table), folder / "jobs.parquet")

    gpus = jobs["n_gpus"]
    dur = jobs["end_time_s"] - jobs["start_time_s"]
    by_arch = {}
    for a in dict.fromkeys(jobs["architecture"]):
        sel = jobs["architecture"] == a
        by_arch[a] = {"jobs": int(sel.sum()), "gpus": float(gpus[sel].sum()),
                      "gpu_time_s": float((gpus * dur)[sel].sum())}
    characterize = {"jobs": len(gpus), "gpus": float(gpus.sum()),
                    "gpu_time_s": float((gpus * dur).sum()), "by_architecture": by_arch}
    (folder / "characterize.json").write_text(json.dumps(characterize))

    fast = predict_table(jobs, cat, nic="eth100")
    amp = predict_table(jobs, cat, amp=True)
    rows = []
    for name, scen in (("eth100", fast), ("mixed-precision", amp)):
        for i, jid in enumerate(jobs["job_id"]):
            matched = bool(np.isfinite(bd.total[i]))
            rows.append({"job_id": jid, "scenario": name, "matched": matched,
                         "base_total_s": bd.total[i], "scenario_total_s": scen.total[i],
                         "speedup": bd.total[i] / scen.total[i]})
    with (folder / "whatif_jobs.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    defs = {"eth100": {"name": "eth100", "description": "Every node's NIC becomes 100 Gbit/s",
                       "source": "Wang et al., IISWC 2019", "match": {},
                       "changes": {"nic": "eth100"}, "path": None},
            "mixed-precision": {"name": "mixed-precision", "description": "Mixed precision",
                                "source": "Micikevicius et al., ICLR 2018", "match": {},
                                "changes": {"amp": True}, "path": None}}
    summaries = {}
    for name in defs:
        s = np.array([r["speedup"] for r in rows if r["scenario"] == name and r["matched"]])
        summaries[name] = {"jobs": len(gpus), "matched": len(s), "predicted": len(s),
                           "not_applied": 0,
                           "sped_up_share": float((s > 1.01).mean()),
                           "mean_speedup": float(s.mean()), "median_speedup": float(np.median(s))}
    (folder / "whatif.json").write_text(json.dumps({"jobs": len(gpus), "scenarios": summaries,
                                                    "definitions": defs}))
    rec = [{"job_id": jid, "architecture": a, "n_gpus": n, "base_total_s": t,
            "best_architecture": "allreduce-local", "best_node": "dgx-a100",
            "best_speedup": 1.0 + i / 10, "best_reason": "faster GPU"}
           for i, (jid, a, n, t) in enumerate(zip(jobs["job_id"], jobs["architecture"],
                                                  jobs["n_gpus"], bd.total, strict=True))]
    with (folder / "recommend.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rec[0]))
        w.writeheader()
        w.writerows(rec)
    (folder / "recommend.json").write_text(json.dumps({"jobs": len(rec)}))
    (folder / "summary.json").write_text(json.dumps({
        "sample": sample,
        "sentences": [f"{len(gpus)} jobs on {gpus.sum():g} GPUs were characterized.",
                      f"The user {INJECTED} ran one job."],
        "numbers": {"jobs": len(gpus), "comm_share_mean": 0.4}}))
    (folder / "study.json").write_text(json.dumps({
        "trace": "bundled sample" if sample else "trace.csv", "sample": sample,
        "catalog_files": cat.files}))
    return folder


def make_small_study(folder: Path) -> Path:
    """Only characterize.json (one figure's input): a fast study folder for option tests."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "characterize.json").write_text(json.dumps(
        {"jobs": 2, "gpus": 5, "by_architecture": {
            "1w1g": {"jobs": 1, "gpus": 1, "gpu_time_s": 10},
            "ps-worker": {"jobs": 1, "gpus": 4, "gpu_time_s": 90}}}))
    return folder
