"""Search the hybrid-parallel configurations of a cluster: ``traincast plan``.

Every (dp, tp, pp, ep, zero, micro-batch, recompute, vp) with ``dp tp pp = N`` is built as numpy
arrays (a Cartesian product filtered by the shape rules of ``hybrid.check_shapes``), evaluated in
one call of ``hybrid.evaluate``, and ranked by time per iteration (or by cost per million tokens
with a price, traincast.hardware.prices). Configurations that do not fit in GPU memory are never
recommended. On preemptible machines every row carries the expected overhead of checkpoints,
lost work and restarts (traincast.parallel.spot, after Varuna); :func:`replan` gives the best
plan for each of several GPU counts as machines come and go.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.hardware.prices import MARKETS, Prices, load_prices
from traincast.parallel import spot as spot_model
from traincast.parallel import strategies as st
from traincast.parallel.hybrid import (
    PART_LABEL,
    TIME_PARTS,
    check_counts,
    check_dtype,
    check_shapes,
    evaluate,
    hybrid_hardware,
)
from traincast.parallel.models import ModelConfig, get_model
from traincast.parallel.spot import Resilience

CONFIG_KEYS: tuple[str, ...] = ("dp", "tp", "pp", "ep", "zero", "micro_batch", "recompute", "vp",
                                "sp")
MICRO_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
VPS: tuple[int, ...] = (1, 2, 4)
RANKS: tuple[str, ...] = ("time", "expected")
"""Orders of ``plan``'s ``top``: iteration time, or expected time per million tokens (iteration
time x the preset's overhead factor, checkpoints, lost work and restarts included)."""


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


def _why(row: dict[str, Any], other: dict[str, Any] | None, capacity: float,
         expected: bool = False) -> str:
    """One sentence: what dominates, the memory headroom, and what the runner-up changes
    (``expected``: compared by expected time, iteration time x overhead factor)."""
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
        moved = max(TIME_PARTS, key=lambda k: other["time_s"][k] - row["time_s"][k])
        if expected:
            gain = (other["time_s"]["total"] * other["overhead_factor"]
                    / (total * row["overhead_factor"]) - 1.0)
        else:
            gain = other["time_s"]["total"] / total - 1.0
        if gain < 5e-4:
            text += (f"; as fast as the next ({', '.join(diff) or 'same shape'}) within 0.05%, "
                     f"with less memory")
        elif expected:
            if other["node"] != row["node"]:
                diff.insert(0, f"node {other['node']}→{row['node']}")
            text += (f"; {100 * gain:.1f}% less expected time than the next "
                     f"({', '.join(diff) or 'same shape'}), overheads included")
        else:
            text += (f"; {100 * gain:.1f}% faster than the next ({', '.join(diff)}), "
                     f"mostly less {PART_LABEL[moved]}")
    return text + "."



def _rows(res: dict[str, Any], idx: NDArray[np.int64], cfgs: dict[str, NDArray[np.int64]],
          usd: float | None, tokens: float, overhead: float) -> list[dict[str, Any]]:
    out = []
    for i in idx:
        config = {k: int(cfgs[k][i]) for k in CONFIG_KEYS}
        total = float(res["total_s"][i])
        row: dict[str, Any] = {
            "config": config,
            "label": _describe(config),
            "recompute": st.RECOMPUTE[config["recompute"]],
            "time_s": {k: float(res[f"{k}_s"][i]) for k in TIME_PARTS} | {"total": total},
            "bubble_fraction": float(res["bubble_fraction"][i]),
            "micro_batches": int(res["micro_batches"][i]),
            "memory_gb": {k: float(res[f"mem_{k}_bytes"][i]) / 1e9 for k in
                          ("weights", "grads", "optimizer", "activations", "total")},
            "tokens_per_s_per_gpu": float(res["tokens_per_s_per_gpu"][i]),
            "model_tflops_per_gpu": float(res["model_tflops_per_gpu"][i]),
            "overhead_factor": overhead,
            "s_per_million_tokens": total * overhead / tokens * 1e6,
        }
        if usd is not None:
            row["usd_per_million_tokens"] = usd * float(res["gpus"][i]) \
                * row["s_per_million_tokens"] / 3600.0
        out.append(row)
    return out


def _ranked(results: list[dict[str, Any]], by: str, top: int,
            tokens: float) -> list[dict[str, Any]]:
    """The ``top`` fitting configurations over all presets, by iteration time (``by="time"``),
    by expected time per million tokens (``"expected"``: iteration time x overhead) or by
    expected cost per million tokens (``"cost"``: price x overhead x time); each row says why
    it wins. Within one preset ``"time"`` and ``"expected"`` give the same order (one overhead
    factor per preset)."""
    by_cost = by == "cost"
    rows: list[dict[str, Any]] = []
    for r in results:
        res = r["res"]
        overhead = float(r["exp"]["overhead"])
        key = res["total_s"] * ((r["usd"] or 1.0) * overhead if by_cost else 1.0)
        fit = np.flatnonzero(res["fits"])
        if fit.size == 0:
            continue
        # ties on time (within one part in a million) go to the configuration using less
        # memory per GPU
        rel = np.round(key[fit] / key[fit].min(), 6)
        order = fit[np.lexsort((res["mem_total_bytes"][fit], rel))][: top + 1]
        for row in _rows(res, order, r["cfgs"], r["usd"], tokens, overhead):
            row["node"], row["gpu"], row["nodes"] = r["hw"].node, r["hw"].gpu, r["nodes"]
            row["capacity"] = r["hw"].mem_bytes
            rows.append(row)
    if by_cost:
        rows.sort(key=lambda x: x["usd_per_million_tokens"])
    elif by == "expected":
        rows.sort(key=lambda x: (x["time_s"]["total"] * x["overhead_factor"],
                                 x["s_per_million_tokens"]))
    else:
        rows.sort(key=lambda x: x["time_s"]["total"])
    rows = rows[: top + 1]
    for i, row in enumerate(rows):
        row["rank"] = i + 1
        row["why"] = _why(row, rows[i + 1] if i + 1 < len(rows) else None, row.pop("capacity"),
                          expected=by == "expected")
    return rows[:top]


def _network_summary(network: str, a: dict[str, Any], b: dict[str, Any]) -> str:
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
    return (f"On {network} the best configuration is {b['label']} "
            f"({b['time_s']['total']:.3g} s per iteration, "
            f"{b['time_s']['total'] / a['time_s']['total']:.2f}x the time on the node's own "
            f"network); " + change)


FIRST_ORDER_LIMIT = 0.3


def _exp_dict(exp: dict[str, Any]) -> dict[str, Any]:
    """One preset's overhead terms; a note when ``lambda (tau + Rs)`` (the chance of a
    preemption within one interval and restart) exceeds 0.3, where the first-order estimate
    gets optimistic (preemptions during checkpoints and restarts are left out)."""
    out = {"checkpoint_gb": float(exp["checkpoint_bytes"]) / 1e9,
           "checkpoint_s": float(exp["checkpoint_s"]),
           "interval_s": float(exp["interval_s"]), "restart_s": float(exp["restart_s"]),
           "preemptions_per_hour_job": float(exp["preemptions_per_hour_job"]),
           "overhead_factor": float(exp["overhead"]), "switch_s": float(exp["switch_s"])}
    tau = out["interval_s"] if np.isfinite(out["interval_s"]) else 0.0
    risk = out["preemptions_per_hour_job"] / 3600.0 * (tau + out["restart_s"])
    if risk > FIRST_ORDER_LIMIT:
        out["note"] = (f"lambda (tau + Rs) = {risk:.2f}: preemptions this frequent make the "
                       f"first-order estimate optimistic")
    return out


def _price_part(out: dict[str, Any], base: list[dict[str, Any]], prices: Prices, spot: bool,
                resilience: Resilience, ckpt: float, top: int, tokens: float) -> None:
    """``price``, ``by_cost`` and, on spot, the cheapest on-demand plan for comparison."""
    out["price"] = {"file": prices.path, "market": MARKETS[int(spot)],
                    "sources": {r["hw"].node: prices.source_of(r["hw"].node, r["hw"].gpu, spot)
                                for r in base}}
    out["by_cost"] = _ranked(base, "cost", top, tokens)
    if not spot or any(np.isnan(prices.per_gpu_hour(r["hw"].node, r["hw"].gpu))
                       for r in base):
        return
    calm = resilience.with_preemptions(0.0)
    od = [r | {"usd": prices.per_gpu_hour(r["hw"].node, r["hw"].gpu),
               "exp": calm.evaluate(r["nodes"], ckpt)} for r in base]
    best = _ranked(od, "cost", 1, tokens)
    if best and out["by_cost"]:
        b, s = best[0], out["by_cost"][0]
        out["on_demand"] = {k: b[k] for k in ("label", "node", "gpu", "overhead_factor",
                                              "s_per_million_tokens", "usd_per_million_tokens")}
        out["on_demand"]["source"] = prices.source_of(b["node"], b["gpu"])
        out["spot_saving"] = 1.0 - s["usd_per_million_tokens"] / b["usd_per_million_tokens"]


def _search_node(cfg: ModelConfig, catalog: Catalog, node: str, nic: str | None, gpus: int,
                 gb: int, seq: int, dtype: str, overlap: float) -> dict[str, Any]:
    """Every shape-valid configuration on one node preset, evaluated in one vectorized call."""
    hw = hybrid_hardware(catalog, node, dtype, nic=nic)
    cfgs = enumerate_configs(cfg, gpus, hw.gpus_per_node, gb)
    res = evaluate(cfg, hw, dp=cfgs["dp"], tp=cfgs["tp"], pp=cfgs["pp"], ep=cfgs["ep"],
                   zero=cfgs["zero"], micro_batch=cfgs["micro_batch"], global_batch=gb,
                   recompute=cfgs["recompute"], vp=cfgs["vp"], sp=cfgs["sp"].astype(bool),
                   seq=seq, dtype=dtype, overlap=overlap)
    return {"hw": hw, "cfgs": cfgs, "res": res, "nodes": -(-gpus // hw.gpus_per_node)}


def _with_price(r: dict[str, Any], prices: Prices | None, spot: bool, resilience: Resilience,
                ckpt: float) -> dict[str, Any]:
    """A search result with ``usd`` (its preset's price per GPU-hour, None without prices) and
    ``exp`` (its overhead terms on ``r["nodes"]`` nodes)."""
    hw = r["hw"]
    return r | {"usd": prices.require(hw.node, hw.gpu, spot) if prices else None,
                "exp": resilience.evaluate(r["nodes"], ckpt)}


def _empty_note(searched: int, any_fits: bool, gpus: int, gb: int) -> str:
    if not searched:
        return (f"no configuration has dp x tp x pp = {gpus} with the global batch {gb} a "
                f"multiple of dp x micro-batch and the layers a multiple of pp; change --gpus or "
                f"--global-batch")
    if not any_fits:
        return ("no configuration fits in GPU memory; add GPUs, shorten the sequence or lower "
                "the global batch")
    return ""


def plan(model: str | ModelConfig, gpus: int, node: str, *, catalog: Catalog | None = None,
         global_batch: int | None = None, seq: int | None = None, dtype: str = "bf16",
         top: int = 5, network: str | None = None, price: str | Path | Prices | None = None,
         overlap: float = 0.0, spot: bool = False, resilience: Resilience | None = None,
         rank: str = "time") -> dict[str, Any]:
    """Rank every feasible configuration of ``model`` on ``gpus`` GPUs of ``node`` presets.

    ``node`` may list several presets separated by commas (ranked together by cost with a
    price). ``price``: a price file or shipped name (traincast.hardware.prices); ``spot`` uses
    its spot prices. ``resilience``: preemptions per node-hour and checkpoints; every row gets
    ``overhead_factor = 1 + C/tau + lambda (tau/2 + Rs)`` and ``s_per_million_tokens =
    T_iter overhead / (B s) 1e6``, with a price ``usd_per_million_tokens = N usd_per_gpu_hour
    s_per_million_tokens / 3600`` (traincast.parallel.spot). ``rank`` orders ``top``
    (``RANKS``): ``"time"`` by iteration time, ``"expected"`` by expected time per million
    tokens (iteration time x overhead; differs only across presets with different overheads).
    Returns ``{"model", "gpus", "searched", "feasible", "seconds", "top": [rows], "by_cost":
    [rows] (with price), "resilience" (when checkpointing), "on_demand" and "spot_saving" (spot
    with on-demand prices), "network": {...} (with network)}``.
    """
    t0 = time.perf_counter()
    if rank not in RANKS:
        raise TraincastError(f"unknown ranking {rank!r}", hint=f"choose one of {', '.join(RANKS)}")
    check_counts(global_batch=global_batch, seq=seq)
    check_dtype(dtype)
    nodes = [n.strip() for n in node.split(",") if n.strip()]
    if not nodes:
        raise TraincastError(f"--node {node!r}: no node preset named",
                             hint="e.g. --node dgx-a100 (traincast hardware list)")
    catalog = catalog or load_catalog()
    cfg = get_model(model) if isinstance(model, str) else model
    s = int(seq or cfg.seq)
    gb = int(global_batch or max(1, round(4 * 1024 * 1024 / s)))  # ~4M tokens per iteration
    prices = load_prices(price, catalog) if isinstance(price, str | Path) else price
    if spot and prices is None:
        raise TraincastError("--spot needs --price (a price file with spot_usd_per_gpu_hour)",
                             hint="e.g. --price aws --spot")
    resilience = resilience or Resilience()
    ckpt = spot_model.checkpoint_bytes(cfg, dtype)

    def search(nic: str | None) -> list[dict[str, Any]]:
        return [_with_price(_search_node(cfg, catalog, nd, nic, gpus, gb, s, dtype, overlap),
                            prices, spot, resilience, ckpt) for nd in nodes]

    base = search(None)
    searched = sum(len(r["cfgs"]["dp"]) for r in base)
    out: dict[str, Any] = {
        "model": cfg.name, "params": cfg.params, "params_active": cfg.params_active,
        "gpus": gpus, "nodes": nodes, "dtype": dtype, "seq": s, "global_batch": gb,
        "tokens_per_iteration": gb * s, "searched": searched,
        "feasible": sum(int(r["res"]["fits"].sum()) for r in base),
        "top": _ranked(base, rank, top, gb * s)}
    if resilience.checkpoint_gbs is not None:
        out["resilience"] = resilience.to_dict() | {
            "by_node": {r["hw"].node: {"nodes": r["nodes"]} | _exp_dict(r["exp"]) for r in base}}
    if prices:
        _price_part(out, base, prices, spot, resilience, ckpt, top, gb * s)
    if network:
        other = search(network)
        net_rows = _ranked(other, rank, top, gb * s)
        out["network"] = {"nic": network, "top": net_rows,
                          "feasible": sum(int(r["res"]["fits"].sum()) for r in other)}
        if out["top"] and net_rows:
            out["network"]["summary"] = _network_summary(network, out["top"][0], net_rows[0])
    note = _empty_note(searched, bool(out["top"]), gpus, gb)
    if note:
        out["note"] = note
    out["seconds"] = time.perf_counter() - t0
    return out


def _best(p: dict[str, Any]) -> dict[str, Any] | None:
    """The one row of a ``top=1`` plan (None when nothing fits)."""
    return p["top"][0] if p["top"] else None


def replan(model: str | ModelConfig, gpus: Sequence[int], node: str,
           **kwargs: Any) -> dict[str, Any]:
    """Re-planning as machines come and go (Varuna's job morphing): for each count of available
    GPUs in ``gpus`` (in the order given, e.g. 64, 48, 32 as machines are lost) the plan with
    the least expected time per million tokens (preemption losses included) on at most that
    many GPUs — all of them, or fewer whole nodes when that is faster or no shape fits the
    count (unused machines are released and not paid) — with the same global batch (Varuna
    keeps it, so training stays correct); its time, expected overhead, cost with a price, and
    whether it differs from the previous count's. Each change
    costs one checkpoint and one restart, ``switch_s = C + Rs`` (reported, not amortized).
    ``kwargs`` as :func:`plan`; each plan ranks by expected time (``rank="expected"``), so with
    several presets the one with the smaller overhead-weighted time wins, not the one with the
    faster iteration."""
    if not gpus or any(int(g) < 1 for g in gpus):
        raise TraincastError(f"--gpus needs positive GPU counts, got {list(gpus)}")
    catalog = kwargs.pop("catalog", None) or load_catalog()
    kwargs = kwargs | {"top": 1, "catalog": catalog, "rank": "expected"}
    model = get_model(model) if isinstance(model, str) else model  # resolved once
    if isinstance(kwargs.get("price"), str | Path):  # read once
        kwargs["price"] = load_prices(kwargs["price"], catalog)
    done: dict[int, dict[str, Any]] = {}  # GPU count -> its plan (counts repeat across rows)
    presets = [n.strip() for n in node.split(",") if n.strip()]
    if not presets:
        raise TraincastError(f"--node {node!r}: no node preset named",
                             hint="e.g. --node dgx-a100 (traincast hardware list)")
    per_node = min(catalog.node(nd).gpus for nd in presets)  # UnknownNameError with its hint
    rows: list[dict[str, Any]] = []
    first: dict[str, Any] = {}
    for g in (int(x) for x in gpus):
        counts = sorted({g} | set(range(per_node, g, per_node)), reverse=True)
        plans = [done[n] if n in done else done.setdefault(n, plan(model, n, node, **kwargs))
                 for n in counts]
        first = first or plans[0]
        row: dict[str, Any] = {"gpus": g, "searched": sum(p["searched"] for p in plans),
                               "feasible": sum(p["feasible"] for p in plans)}
        cands = [(p, b) for p in plans if (b := _best(p)) is not None]
        if not cands:
            row["note"] = plans[0].get("note", "nothing fits")
            rows.append(row)
            continue
        p, b = min(cands, key=lambda pb: pb[1]["s_per_million_tokens"])
        exp = (p.get("resilience") or {}).get("by_node", {}).get(b["node"], {})
        row |= {"gpus_used": p["gpus"], "nodes": b["nodes"]}
        row |= {k: b[k] for k in ("label", "config", "node", "gpu", "tokens_per_s_per_gpu",
                                  "overhead_factor", "s_per_million_tokens")}
        row |= {"time_s": b["time_s"]["total"],
                "usd_per_million_tokens": b.get("usd_per_million_tokens"),
                "switch_s": exp.get("switch_s")}
        if "note" in exp:
            row["warning"] = exp["note"]
        prev = next((r for r in reversed(rows) if "label" in r), None)
        row["changed"] = prev is not None and (prev["label"], prev["node"], prev["gpus_used"]) \
            != (b["label"], b["node"], p["gpus"])
        rows.append(row)
    return {"model": first["model"], "params": first["params"], "nodes": first["nodes"],
            "dtype": first["dtype"], "seq": first["seq"],
            "global_batch": first["global_batch"], "gpus": [int(g) for g in gpus],
            "price": first.get("price"), "resilience": first.get("resilience"), "rows": rows}
