"""Published large-scale training measurements against the hybrid model.

``megatron_2021()`` predicts every row of Narayanan et al. (SC 2021) Table 1
(``megatron_2021.toml``) with the row's own t, p, d and batch on the row's node, full activation
recomputation, no sequence parallelism, micro-batch 1, unfused gradient accumulation (the code
of the time), and compares the predicted per-GPU TFLOP/s (the paper's FLOP count over the
predicted iteration time) with the published one. The paper ran the interleaved schedule with an
unpublished number of chunks; each row is predicted with the plain 1F1B schedule (``vp = 1``)
and, where the row's shape allows one, with the smallest interleaving ``vp > 1``.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any

from traincast.hardware.catalog import Catalog
from traincast.parallel import strategies as st
from traincast.parallel.hybrid import evaluate, hybrid_hardware
from traincast.parallel.models import ModelConfig, get_model

TARGET_REL_ERROR = 0.15


def megatron_2021_rows() -> dict[str, Any]:
    """The table as shipped: ``{"source", "node", "recompute", "row": [...]}``."""
    text = resources.files("traincast.parallel").joinpath("megatron_2021.toml").read_text()
    return tomllib.loads(text)


def megatron_2021(catalog: Catalog | None = None) -> list[dict[str, Any]]:
    """Predicted vs published per-GPU TFLOP/s for every row (``rel_error`` = pred / pub - 1;
    ``rel_error_interleaved`` with the smallest valid ``vp > 1``, None when none fits the row)."""
    table = megatron_2021_rows()
    hw = hybrid_hardware(catalog, table["node"], "fp16")
    fused = bool(table.get("grad_accum_fused", True))
    out = []
    for row in table["row"]:
        cfg = get_model(row["model"])

        def run(vp: int, cfg: ModelConfig = cfg, row: dict[str, Any] = row) -> dict[str, Any]:
            return evaluate(cfg, hw, dp=row["d"], tp=row["t"], pp=row["p"],
                            global_batch=row["batch"], micro_batch=1, vp=vp,
                            recompute=st.RECOMPUTE_CODE[table["recompute"]], sp=False,
                            dtype="fp16", grad_accum_fused=fused)

        res = run(1)
        total = float(res["total_s"])
        parts = {k: float(res[f"{k}_s"]) / total for k in
                 ("compute_flop", "compute_mem", "comm_tp", "comm_pp", "comm_dp", "bubble")}
        pred = float(res["hardware_tflops_per_gpu"])
        published = row["tflops_per_gpu"]
        inter = next(((vp, r) for vp in range(2, 9) if row["p"] > 1
                      for r in [run(vp)] if int(r["shape_error"]) == 0), None)
        pred_i = float(inter[1]["hardware_tflops_per_gpu"]) if inter else None
        out.append({**row, "predicted_tflops_per_gpu": pred,
                    "rel_error": pred / published - 1.0,
                    "within_target": abs(pred / published - 1.0) <= TARGET_REL_ERROR,
                    "vp_interleaved": inter[0] if inter else None,
                    "predicted_interleaved_tflops_per_gpu": pred_i,
                    "rel_error_interleaved": pred_i / published - 1.0 if pred_i else None,
                    "predicted_s": total, "shares": parts,
                    "fits": bool(res["fits"]),
                    "memory_gb": float(res["mem_total_bytes"]) / 1e9})
    return out
