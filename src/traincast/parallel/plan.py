"""Search the hybrid-parallel configurations of a cluster: ``traincast plan``.

Every (dp, tp, pp, ep, zero, micro-batch, recompute, vp) with ``dp tp pp = N`` is built as numpy
arrays (a Cartesian product filtered by the shape rules of ``hybrid.check_shapes``), evaluated in
one call of ``hybrid.evaluate``, and ranked by time per iteration (or by cost per million tokens
with a price). Configurations that do not fit in GPU memory are never recommended.
"""

from __future__ import annotations

import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.parallel import strategies as st
from traincast.parallel.hybrid import (
    PART_LABEL,
    TIME_PARTS,
    check_shapes,
    evaluate,
    hybrid_hardware,
)
from traincast.parallel.models import ModelConfig, get_model

CONFIG_KEYS: tuple[str, ...] = ("dp", "tp", "pp", "ep", "zero", "micro_batch", "recompute", "vp",
                                "sp")
MICRO_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
VPS: tuple[int, ...] = (1, 2, 4)


def divisors(n: int) -> NDArray[np.int64]:
    """Positive divisors of ``n`` in increasing order."""
    k = np.arange(1, n + 1)
    return k[n % k == 0]


def enumerate_configs(model: ModelConfig, gpus: int, gpus_per_node: int,
                      global_batch: int, *, zeros: tuple[int, ...] = (0, 1, 2, 3),
                      recomputes: tuple[int, ...] = (0, 1, 2),
                      micro_batches: tuple[int, ...] = MICRO_BATCHES,
                      vps: tuple[int, ...] = VPS) -> dict[str, NDArray[np.int64]]:
    """All shape-valid configurations with ``dp tp pp = gpus`` as int arrays (``CONFIG_KEYS``;
    ``sp`` = sequence parallelism on/off, searched wherever tp > 1).

    tp runs over the divisors of ``gpus`` up to the node size (tensor parallelism stays on the
    intra-node link), pp over the divisors of ``gpus / tp``, ep over the divisors of dp that
    divide the experts (1 for dense models).
    """
    if gpus < 1:
        raise TraincastError(f"--gpus must be at least 1, got {gpus}")
    divs = divisors(gpus)
    tps = divs[divs <= gpus_per_node]
    eps = divs[(divs <= model.experts) & (model.experts % divs == 0)] if model.experts > 1 \
        else np.array([1])
    grids = np.meshgrid(tps, divs, eps, np.array(zeros), np.array(micro_batches),
                        np.array(recomputes), np.array(vps), np.array([0, 1]), indexing="ij")
    t, p, e, z, b, r, v, sp = (x.ravel() for x in grids)
    keep = (gpus % (t * p) == 0) & ((t > 1) | (sp == 1))
    t, p, e, z, b, r, v, sp = (x[keep] for x in (t, p, e, z, b, r, v, sp))
    d = gpus // (t * p)
    code = check_shapes(model, d.astype(float), t.astype(float), p.astype(float),
                        e.astype(float), z.astype(float), b.astype(float),
                        np.full(d.shape, float(global_batch)), v.astype(float))
    ok = code == 0
    return {"dp": d[ok], "tp": t[ok], "pp": p[ok], "ep": e[ok], "zero": z[ok],
            "micro_batch": b[ok], "recompute": r[ok], "vp": v[ok], "sp": sp[ok]}


def load_price(path: str | Path) -> dict[str, Any]:
    """A price file: ``usd_per_gpu_hour = 2.0`` (every GPU) and/or a table
    ``[usd_per_gpu_hour]`` of GPU name -> price; ``source`` names where prices come from."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise TraincastError(f"{p}: price file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise TraincastError(f"{p}: not valid TOML: {exc}") from None
    price = data.get("usd_per_gpu_hour")
    if price is None:
        raise TraincastError(f"{p}: missing key 'usd_per_gpu_hour'",
                             hint="usd_per_gpu_hour = 2.0, or a [usd_per_gpu_hour] table by GPU")
    table = price if isinstance(price, dict) else {"*": price}
    for k, val in table.items():
        if isinstance(val, bool) or not isinstance(val, int | float) or val <= 0:
            raise TraincastError(f"{p}: usd_per_gpu_hour {k!r} must be a positive number, "
                                 f"got {val!r}")
    return {"file": str(p), "usd_per_gpu_hour": {k: float(v) for k, v in table.items()},
            "source": str(data.get("source", ""))}


def _price_of(price: dict[str, Any] | None, gpu: str) -> float | None:
    if not price:
        return None
    table = price["usd_per_gpu_hour"]
    if gpu in table:
        return table[gpu]
    if "*" in table:
        return table["*"]
    raise TraincastError(f"{price['file']}: no usd_per_gpu_hour for GPU {gpu!r}",
                         hint="add it to the [usd_per_gpu_hour] table or give one global price")


def _describe(cfg: dict[str, Any]) -> str:
    rec = st.RECOMPUTE[int(cfg["recompute"])]
    parts = [f"dp={cfg['dp']}", f"tp={cfg['tp']}", f"pp={cfg['pp']}"]
    if cfg["ep"] > 1:
        parts.append(f"ep={cfg['ep']}")
    parts += [f"zero={cfg['zero']}", f"mb={cfg['micro_batch']}", f"recompute={rec}"]
    if cfg["vp"] > 1:
        parts.append(f"vp={cfg['vp']}")
    if cfg["tp"] > 1:
        parts.append("sp" if cfg["sp"] else "no-sp")
    return " ".join(parts)


def _why(row: dict[str, Any], other: dict[str, Any] | None, capacity: float) -> str:
    """One sentence: what dominates, the memory headroom, and what the runner-up changes."""
    parts = {k: row["time_s"][k] for k in TIME_PARTS}
    top = max(parts, key=parts.get)
    total = row["time_s"]["total"]
    text = (f"{PART_LABEL[top]} is {100 * parts[top] / total:.0f}% of the iteration; "
            f"uses {row['memory_gb']['total']:.1f} of {capacity / 1e9:.0f} GB")
    if other is not None:
        def val(r: dict[str, Any], k: str) -> Any:
            return st.RECOMPUTE[r["config"][k]] if k == "recompute" else r["config"][k]

        diff = [f"{k} {val(other, k)}→{val(row, k)}" for k in CONFIG_KEYS
                if other["config"][k] != row["config"][k]]
        gain = other["time_s"]["total"] / total - 1.0
        moved = max(TIME_PARTS, key=lambda k: other["time_s"][k] - row["time_s"][k])
        if gain < 5e-4:
            text += (f"; as fast as the next ({', '.join(diff) or 'same shape'}) within 0.05%, "
                     f"with less memory")
        else:
            text += (f"; {100 * gain:.1f}% faster than the next ({', '.join(diff)}), "
                     f"mostly less {PART_LABEL[moved]}")
    return text + "."


def _rows(res: dict[str, Any], idx: NDArray[np.int64], cfgs: dict[str, NDArray[np.int64]],
          usd: float | None, tokens: float) -> list[dict[str, Any]]:
    out = []
    for i in idx:
        config = {k: int(cfgs[k][i]) for k in CONFIG_KEYS}
        row: dict[str, Any] = {
            "config": config,
            "label": _describe(config),
            "recompute": st.RECOMPUTE[config["recompute"]],
            "time_s": {k: float(res[f"{k}_s"][i]) for k in TIME_PARTS}
            | {"total": float(res["total_s"][i])},
            "bubble_fraction": float(res["bubble_fraction"][i]),
            "micro_batches": int(res["micro_batches"][i]),
            "memory_gb": {k: float(res[f"mem_{k}_bytes"][i]) / 1e9 for k in
                          ("weights", "grads", "optimizer", "activations", "total")},
            "tokens_per_s_per_gpu": float(res["tokens_per_s_per_gpu"][i]),
            "model_tflops_per_gpu": float(res["model_tflops_per_gpu"][i]),
        }
        if usd is not None:
            gpus = float(res["gpus"][i])
            row["usd_per_million_tokens"] = usd * gpus * row["time_s"]["total"] / 3600.0 \
                / tokens * 1e6
        out.append(row)
    return out


def plan(model: str | ModelConfig, gpus: int, node: str, *, catalog: Catalog | None = None,
         global_batch: int | None = None, seq: int | None = None, dtype: str = "bf16",
         top: int = 5, network: str | None = None, price: str | Path | dict[str, Any] | None
         = None, overlap: float = 0.0) -> dict[str, Any]:
    """Rank every feasible configuration of ``model`` on ``gpus`` GPUs of ``node`` presets.

    ``node`` may list several presets separated by commas (ranked together by cost with a
    price). Returns ``{"model", "gpus", "searched", "valid", "feasible", "seconds", "top":
    [rows], "by_cost": [rows] (with price), "network": {...} (with network)}``; each row holds
    the configuration, its time breakdown, memory per GPU, throughput and why it wins.
    """
    t0 = time.perf_counter()
    catalog = catalog or load_catalog()
    cfg = get_model(model) if isinstance(model, str) else model
    s = int(seq or cfg.seq)
    gb = int(global_batch or max(1, round(4 * 1024 * 1024 / s)))  # ~4M tokens per iteration
    prices = load_price(price) if isinstance(price, str | Path) else price
    nodes = [n.strip() for n in node.split(",") if n.strip()]

    def search(nic: str | None) -> list[dict[str, Any]]:
        results = []
        for nd in nodes:
            hw = hybrid_hardware(catalog, nd, dtype, nic=nic)
            cfgs = enumerate_configs(cfg, gpus, hw.gpus_per_node, gb)
            res = evaluate(cfg, hw, dp=cfgs["dp"], tp=cfgs["tp"], pp=cfgs["pp"], ep=cfgs["ep"],
                           zero=cfgs["zero"], micro_batch=cfgs["micro_batch"], global_batch=gb,
                           recompute=cfgs["recompute"], vp=cfgs["vp"],
                           sp=cfgs["sp"].astype(bool), seq=s, dtype=dtype,
                           overlap=overlap)
            results.append({"hw": hw, "cfgs": cfgs, "res": res,
                            "usd": _price_of(prices, hw.gpu)})
        return results

    def ranked(results: list[dict[str, Any]], by_cost: bool) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for r in results:
            res = r["res"]
            key = res["total_s"] * (r["usd"] or 1.0) if by_cost else res["total_s"]
            fit = np.flatnonzero(res["fits"])
            if fit.size == 0:
                continue
            # ties on time (within one part in a million) go to the configuration using less
            # memory per GPU
            rel = np.round(key[fit] / key[fit].min(), 6)
            order = fit[np.lexsort((res["mem_total_bytes"][fit], rel))][: top + 1]
            for row in _rows(res, order, r["cfgs"], r["usd"], gb * s):
                row["node"], row["gpu"] = r["hw"].node, r["hw"].gpu
                row["capacity"] = r["hw"].mem_bytes
                rows.append(row)
        sort_key = "usd_per_million_tokens" if by_cost else None
        rows.sort(key=lambda x: x[sort_key] if sort_key else x["time_s"]["total"])
        rows = rows[: top + 1]
        for i, row in enumerate(rows):
            row["rank"] = i + 1
            row["why"] = _why(row, rows[i + 1] if i + 1 < len(rows) else None,
                              row.pop("capacity"))
        return rows[:top]

    base = search(None)
    searched = sum(len(r["cfgs"]["dp"]) for r in base)
    feasible = sum(int(r["res"]["fits"].sum()) for r in base)
    out: dict[str, Any] = {
        "model": cfg.name, "params": cfg.params, "params_active": cfg.params_active,
        "gpus": gpus, "nodes": nodes, "dtype": dtype, "seq": s, "global_batch": gb,
        "tokens_per_iteration": gb * s, "searched": searched, "feasible": feasible,
        "top": ranked(base, False)}
    if prices:
        out["price"] = {"file": prices.get("file"), "source": prices.get("source")}
        out["by_cost"] = ranked(base, True)
    if network:
        other = search(network)
        net_rows = ranked(other, False)
        out["network"] = {"nic": network, "feasible": sum(int(r["res"]["fits"].sum())
                                                          for r in other),
                          "top": net_rows}
        if out["top"] and net_rows:
            a, b = out["top"][0], net_rows[0]
            ca, cb = a["config"], b["config"]
            if a["label"] == b["label"]:
                change = "the same shape wins."
            elif cb["dp"] < ca["dp"]:
                change = (f"it replaces {a['label']}: fewer data-parallel replicas (dp "
                          f"{ca['dp']}→{cb['dp']}, pp {ca['pp']}→{cb['pp']}, tp {ca['tp']}→"
                          f"{cb['tp']}) send fewer gradient bytes over the slow network; "
                          f"pipeline stages send only activations.")
            else:
                change = f"it replaces {a['label']}."
            out["network"]["summary"] = (
                f"On {network} the best configuration is {b['label']} "
                f"({b['time_s']['total']:.3g} s per iteration, "
                f"{b['time_s']['total'] / a['time_s']['total']:.2f}x the time on the node's own "
                f"network); " + change)
    if not searched:
        out["note"] = (f"no configuration has dp x tp x pp = {gpus} with the global batch "
                       f"{gb} a multiple of dp x micro-batch and the layers a multiple of pp; "
                       f"change --gpus or --global-batch")
    elif not out["top"]:
        out["note"] = ("no configuration fits in GPU memory; add GPUs, shorten the sequence or "
                       "lower the global batch")
    out["seconds"] = time.perf_counter() - t0
    return out
