"""Search the hybrid-parallel configurations of a cluster: ``traincast plan``.

Every (dp, tp, pp, ep, cp, zero, micro-batch, recompute, vp) with ``dp tp pp cp = N`` is built
as numpy arrays (a Cartesian product filtered by the shape rules of ``hybrid.check_shapes``),
evaluated in one call of ``hybrid.evaluate``, and ranked by time per iteration (or by cost per
million tokens with a price, traincast.hardware.prices). Configurations that do not fit in GPU
memory are never recommended. On preemptible machines every row carries the expected overhead of
checkpoints, lost work and restarts (traincast.parallel.spot, after Varuna); :func:`replan`
gives the best plan for each of several GPU counts as machines come and go.
"""

from __future__ import annotations

import math
import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from traincast.compute import flat_peak_gpus
from traincast.errors import TraincastError, UnknownNameError
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.hardware.prices import MARKETS, Prices, load_prices
from traincast.model import busy_parts_s
from traincast.parallel import spot as spot_model
from traincast.parallel import strategies as st
from traincast.parallel.hybrid import (
    DEFAULT_BATCH_TOKENS,
    DEFAULT_FRAMEWORK,
    FUSED,
    FUSED_HINT,
    PART_LABEL,
    RECIPE_KNOBS,
    SHAPE_BATCH,
    SHAPE_ERRORS,
    SHAPE_LAYERS,
    SHAPE_TP,
    TIME_PARTS,
    activations_dominate,
    batch_assumption,
    check_attention,
    check_counts,
    check_dtype,
    check_framework,
    check_shapes,
    default_global_batch,
    divisors,
    evaluate,
    hybrid_hardware,
    in_node,
    model_warnings,
    priced_knobs,
    recipe_text,
    recompute_mode,
    require_fused_rate,
    resolve_knobs,
    selective_op_warning,
    zero_label,
)
from traincast.parallel.models import ModelConfig, get_model
from traincast.parallel.spot import Resilience
from traincast.units import join_words, plural

CONFIG_KEYS: tuple[str, ...] = ("dp", "tp", "pp", "ep", "cp", "zero", "shard", "micro_batch",
                                "recompute", "vp", "sp")
DEFAULT_DTYPE = "bf16"
"""The training precision ``plan`` and ``replan`` assume without ``dtype``."""
MICRO_BATCHES: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
VPS: tuple[int, ...] = (1, 2, 4)
ZEROS: tuple[int, ...] = (0, 1, 2, 3)
RECOMPUTES: tuple[int, ...] = (0, 1, 2)
RANKS: tuple[str, ...] = ("time", "expected")
"""Orders of ``plan``'s ``top``: iteration time, or expected time per million tokens (iteration
time x the preset's overhead factor, checkpoints, lost work and restarts included)."""


def enumerate_configs(model: ModelConfig, gpus: int, gpus_per_node: int,
                      global_batch: int, *, zeros: tuple[int, ...] = ZEROS,
                      recomputes: tuple[int, ...] = RECOMPUTES,
                      micro_batches: tuple[int, ...] = MICRO_BATCHES,
                      vps: tuple[int, ...] = VPS, seq: int = 0,
                      fused: bool = False, hsdp: bool = True,
                      fsdp_pp: bool = False) -> dict[str, NDArray[np.int64]]:
    """All shape-valid configurations with ``dp tp pp cp = gpus`` as int arrays
    (``CONFIG_KEYS``; ``sp`` = sequence parallelism on/off, searched wherever tp > 1).

    tp runs over the divisors of ``gpus`` whose groups stay inside a node
    (``hybrid.in_node``: dividing the node size, or any up to it on one node; tensor
    parallelism stays on the intra-node link), pp over the divisors of ``gpus / tp``, ep over
    the divisors of dp that divide the experts (1 for dense models), cp (context parallelism)
    over the divisors of ``gpus`` with a fused attention (``fused``) whose ``2 cp`` divides
    ``seq`` (and 1), else 1; the ``(tp, pp, cp)`` layouts with ``tp pp cp`` dividing ``gpus``
    are formed before the other
    axes are crossed with them. Moot axes are searched at one value: sequence parallelism off
    with tp 1, and the least ZeRO stage with one data-parallel rank (``dp cp = 1``: ZeRO shards
    over the data-parallel group, and a group of one is no sharding). ``shard``: the ranks ZeRO
    shards over, every data-parallel rank (``dp cp``); each configuration with ZeRO 1 to 3 and
    ep 1 is also searched as HSDP (``hsdp``: the recipe's stack has it), sharded over one
    node's data-parallel ranks (``shard = floor(g / tp)``, at least 2) where that divides ``dp
    cp`` and is fewer, replicated over the rest. ``fsdp_pp``: ZeRO 2 and 3 also take a
    pipeline (``hybrid.check_shapes``), priced as ZeRO 1 (``hybrid.priced_zero``).
    """
    if gpus < 1:
        raise TraincastError(f"--gpus must be at least 1, got {gpus}")
    divs = divisors(gpus)
    tps = divs[in_node(divs, gpus_per_node, gpus)]
    eps = divs[(divs <= model.experts) & (model.experts % divs == 0)] if model.experts > 1 \
        else np.array([1])
    cps = divs[(divs == 1) | (np.fmod(seq, 2 * divs) == 0)] if fused and seq > 0 \
        else np.array([1])
    # the (tp, pp, cp) layouts that use every GPU first, then every other axis over them
    t3, p3, k3 = (x.ravel() for x in np.meshgrid(tps, divs, cps, indexing="ij"))
    fits = gpus % (t3 * p3 * k3) == 0
    t3, p3, k3 = t3[fits], p3[fits], k3[fits]
    grids = np.meshgrid(np.arange(len(t3)), eps, np.array(zeros), np.array(micro_batches),
                        np.array(recomputes), np.array(vps), np.array([0, 1]), indexing="ij")
    lay, e, z, b, r, v, sp = (x.ravel() for x in grids)
    t, p, k = t3[lay], p3[lay], k3[lay]
    keep = (t > 1) | (sp == 0)  # with tp 1 sequence parallelism is moot: off, as predict says
    # with one data-parallel rank (dp cp = 1) ZeRO shards over one rank: the least stage only
    keep &= (gpus // (t * p) > 1) | (z == min(zeros))
    t, p, e, k, z, b, r, v, sp = (x[keep] for x in (t, p, e, k, z, b, r, v, sp))
    d = gpus // (t * p * k)

    def code(shard: NDArray[np.int64] | float = 0.0) -> NDArray[np.int64]:
        return check_shapes(model, d.astype(float), t.astype(float), p.astype(float),
                            e.astype(float), z.astype(float), b.astype(float),
                            np.full(d.shape, float(global_batch)), v.astype(float),
                            cp=k.astype(float), seq=float(seq), fused=fused,
                            shard=np.asarray(shard, dtype=float), fsdp_pp=fsdp_pp)

    ok = code() == 0
    # HSDP over one node's data-parallel ranks where the shape rules take it (ZeRO 1-3, ep 1,
    # a divisor of dp cp) and it is fewer than them
    node_shard = gpus_per_node // t
    extra = ok & hsdp & (node_shard >= 2) & (node_shard < d * k) & (code(node_shard) == 0)
    columns = {"dp": d, "tp": t, "pp": p, "ep": e, "cp": k, "zero": z, "shard": d * k,
               "micro_batch": b, "recompute": r, "vp": v, "sp": sp}
    return {key: np.concatenate([x[ok], node_shard[extra] if key == "shard" else x[extra]])
            for key, x in columns.items()}


def hsdp(cfg: dict[str, Any]) -> bool:
    """Whether a configuration shards ZeRO over fewer than its ``dp cp`` ranks (HSDP)."""
    return 0 < cfg.get("shard", 0) < cfg["dp"] * cfg.get("cp", 1)


def _describe(cfg: dict[str, Any]) -> str:
    rec = st.RECOMPUTE[int(cfg["recompute"])]
    parts = [f"dp={cfg['dp']}", f"tp={cfg['tp']}", f"pp={cfg['pp']}"]
    if cfg["ep"] > 1:
        parts.append(f"ep={cfg['ep']}")
    if cfg.get("cp", 1) > 1:
        parts.append(f"cp={cfg['cp']}")
    parts.append(zero_label(cfg["zero"], cfg["zero_priced"]))
    if hsdp(cfg):
        parts.append(f"shard={cfg['shard']}")
    parts += [f"mb={cfg['micro_batch']}", f"recompute={rec}"]
    if cfg["vp"] > 1:
        parts.append(f"vp={cfg['vp']}")
    if cfg["tp"] > 1:
        parts.append("sp" if cfg["sp"] else "no-sp")
    return " ".join(parts)


SHARE_PARTS: dict[str, tuple[str, ...]] = {
    "compute": ("compute_flop", "compute_mem"),
    "comm": ("comm_tp", "comm_pp", "comm_ep", "comm_cp", "comm_dp"),
    "bubble": ("bubble",), "data_io": ("data_io",)}
"""The ``share`` of a row (the table's compute, comm and bubble columns and the sentence under
it): the time of these ``TIME_PARTS`` summed, over the iteration time."""
SHARE_LABEL: dict[str, str] = {"compute": "compute", "comm": "communication",
                               "bubble": "the pipeline bubble", "data_io": "data I/O"}


BOUND_LABEL: dict[str, str] = {**PART_LABEL,
                               "host_wait": "waiting for the host to issue the kernels"}


def bound_parts(time_s: dict[str, float]) -> dict[str, float]:
    """A row's ``TIME_PARTS`` with the compute parts less their share of the GPU's wait for
    the host (``model.busy_parts_s``) and the wait itself (``host_wait``): what each sentence
    names as the largest part, or the one a faster configuration cuts most."""
    wait = time_s.get("host_wait", 0.0)
    flop, mem = busy_parts_s(time_s["compute_flop"], time_s["compute_mem"], wait)
    return {**{k: time_s[k] for k in TIME_PARTS}, "compute_flop": float(flop),
            "compute_mem": float(mem), "host_wait": wait}


def shares(time_s: dict[str, float]) -> dict[str, float]:
    """``{group: sum of its parts / total}`` for the groups of :data:`SHARE_PARTS`."""
    total = time_s["total"]
    return {g: sum(time_s[k] for k in ks) / total if total > 0 else 0.0
            for g, ks in SHARE_PARTS.items()}


def percent(share: float) -> str:
    """A share as the table and the sentences print it: ``0.874`` -> ``'87%'``."""
    return f"{100 * share:.0f}%"


def changes(before: dict[str, Any], after: dict[str, Any],
            keys: tuple[str, ...] = CONFIG_KEYS) -> list[str]:
    """The sizes that differ between two configurations, as the table names them:
    ``["dp 32→16", "pp 1→2", "mb 4→2", "sp off→on", "shard all→8"]`` (unchanged ones left
    out; ``all``: ZeRO over every data-parallel rank, :func:`hsdp` false)."""
    def val(cfg: dict[str, Any], k: str) -> Any:
        return st.RECOMPUTE[cfg[k]] if k == "recompute" else \
            ("on" if cfg[k] else "off") if k == "sp" else \
            (cfg[k] if hsdp(cfg) else "all") if k == "shard" else cfg[k]

    return [f"{'mb' if k == 'micro_batch' else k} {val(before, k)}→{val(after, k)}"
            for k in keys if val(before, k) != val(after, k)]


def _why(row: dict[str, Any], other: dict[str, Any] | None, capacity: float,
         expected: bool = False) -> str:
    """One sentence: what dominates (the largest of the row's ``share``, the numbers of the
    table), the memory headroom, and what the runner-up changes (``expected``: compared by
    expected time, iteration time x overhead factor)."""
    share = row["share"]
    top = max(share, key=share.get)
    text = f"{SHARE_LABEL[top]} is {percent(share[top])} of the iteration"
    bound = bound_parts(row["time_s"])
    if len(SHARE_PARTS[top]) > 1:
        most = max(SHARE_PARTS[top] + (("host_wait",) if top == "compute" else ()),
                   key=lambda k: bound[k])
        text += f" (mostly {BOUND_LABEL[most].removesuffix(' compute')})"
    total = row["time_s"]["total"]
    text += f"; uses {row['memory_gb']['total']:.1f}" + (
        f" of {capacity / 1e9:.0f} GB" if np.isfinite(capacity) else " GB (capacity not given)")
    if other is not None:
        diff = changes(other["config"], row["config"])
        other_bound = bound_parts(other["time_s"])
        moved = max(bound, key=lambda k: other_bound[k] - bound[k])
        if expected:
            gain = (other["time_s"]["total"] * other["overhead_factor"]
                    / (total * row["overhead_factor"]) - 1.0)
        else:
            gain = other["time_s"]["total"] / total - 1.0
        if gain < 5e-4:
            mem, other_mem = row["memory_gb"]["total"], other["memory_gb"]["total"]
            text += (f"; as fast as the next ({', '.join(diff) or 'same shape'}) within 0.05%, "
                     + ("with less memory" if round(mem, 1) < round(other_mem, 1) else
                        "with the same memory" if round(mem, 1) == round(other_mem, 1) else
                        f"which needs less memory ({other_mem:.1f} GB)"))
        elif expected:
            if other["node"] != row["node"]:
                diff.insert(0, f"node {other['node']}→{row['node']}")
            text += (f"; {100 * gain:.1f}% less expected time than the next "
                     f"({', '.join(diff) or 'same shape'}), overheads included")
        else:
            text += (f"; {100 * gain:.1f}% faster than the next ({', '.join(diff)}), "
                     f"mostly less {BOUND_LABEL[moved]}")
    return text + "."



def _rows(res: dict[str, Any], idx: NDArray[np.int64], cfgs: dict[str, NDArray[np.int64]],
          usd: float | None, tokens: float, overhead: float) -> list[dict[str, Any]]:
    out = []
    for i in idx:
        config = {k: int(cfgs[k][i]) for k in CONFIG_KEYS}
        priced = int(cfgs["zero_priced"][i])
        total = float(res["total_s"][i])
        row: dict[str, Any] = {
            "config": config,
            "zero_priced": priced,
            "label": _describe(config | {"zero_priced": priced}),
            "recompute": st.RECOMPUTE[config["recompute"]],
            "time_s": {k: float(res[f"{k}_s"][i]) for k in (*TIME_PARTS, "host_wait")}
            | {"total": total},
            "share": {},
            "bubble_fraction": float(res["bubble_fraction"][i]),
            "micro_batches": int(res["micro_batches"][i]),
            "memory_gb": {k: float(res[f"mem_{k}_bytes"][i]) / 1e9 for k in
                          ("weights", "grads", "optimizer", "activations", "recompute", "total")},
            "tokens_per_s_per_gpu": float(res["tokens_per_s_per_gpu"][i]),
            "model_tflops_per_gpu": float(res["model_tflops_per_gpu"][i]),
            "hardware_tflops_per_gpu": float(res["hardware_tflops_per_gpu"][i]),
            "mfu": float(res["mfu"][i]) if np.isfinite(res["mfu"][i]) else None,
            "hfu": float(res["hfu"][i]) if np.isfinite(res["hfu"][i]) else None,
            "overhead_factor": overhead,
            "s_per_million_tokens": total * overhead / tokens * 1e6,
        }
        row["share"] = shares(row["time_s"])
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
        change = (f"it replaces {a['label']}: fewer data-parallel replicas "
                  f"({', '.join(changes(ca, cb, ('dp', 'pp', 'tp', 'cp')))}) send fewer "
                  f"gradient bytes over the slow network; pipeline stages send only "
                  f"activations.")
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
    notes = []
    if risk > FIRST_ORDER_LIMIT:
        notes.append(f"lambda (tau + Rs) = {risk:.2f}: preemptions this frequent make the "
                     f"first-order estimate optimistic")
    if 0 < tau < out["checkpoint_s"]:
        notes.append(f"a checkpoint takes {out['checkpoint_s']:.0f} s to write, longer than "
                     f"the {tau:.0f} s of work between two: the job spends more time "
                     f"checkpointing than training (C / tau = {out['checkpoint_s'] / tau:.1f})")
    if notes:
        out["note"] = "; ".join(notes)
    return out


def _price_part(out: dict[str, Any], base: list[dict[str, Any]], prices: Prices, spot: bool,
                resilience: Resilience, ckpt: float, top: int, tokens: float) -> None:
    """``price``, ``by_cost`` and, on spot, the cheapest on-demand plan for comparison."""
    priced = [r for r in base if not math.isnan(r["usd"])]
    out["price"] = {"file": prices.path, "market": MARKETS[int(spot)],
                    "sources": {r["hw"].node: prices.source_of(r["hw"].node, r["hw"].gpu, spot)
                                for r in priced},
                    "unpriced": [r["hw"].node for r in base if math.isnan(r["usd"])]}
    out["by_cost"] = _ranked(priced, "cost", top, tokens)
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


def preset_problem(cfg: ModelConfig, catalog: Catalog, node: str, dtype: str,
                   attention: str | None = None, framework: str = DEFAULT_FRAMEWORK) -> str:
    """Why a node preset cannot run the job as asked (its GPU has no peak of ``dtype``, no
    rate for the attention), or ``""``: the checks :func:`_search_node` starts with. An
    unknown preset stays an error."""
    try:
        hw = hybrid_hardware(catalog, node, dtype)
        knobs, _ = resolve_knobs(framework, cfg, hw, attention=attention)
        if knobs["attention"] in FUSED:
            require_fused_rate(hw, knobs["attention"])
    except UnknownNameError:
        raise
    except TraincastError as exc:
        return str(exc)
    return ""


def _search_node(cfg: ModelConfig, catalog: Catalog, node: str, nic: str | None, gpus: int,
                 gb: int, seq: int, dtype: str, overlap: float,
                 attention: str | None = None,
                 framework: str = DEFAULT_FRAMEWORK) -> dict[str, Any]:
    """Every shape-valid configuration on one node preset, evaluated in one vectorized call,
    with the knobs of recipe ``framework`` on this preset (``hybrid.resolve_knobs``; a recipe's
    ZeRO stage is the only one searched)."""
    hw = hybrid_hardware(catalog, node, dtype, nic=nic)
    knobs, by_recipe = resolve_knobs(framework, cfg, hw, attention=attention)
    zeros = (int(knobs["zero"]),) if "zero" in by_recipe else ZEROS
    cp_searched = bool(knobs["context_parallel"])  # resolve_knobs: only with a fused one
    selective = st.RECOMPUTE_CODE[recompute_mode("selective", knobs)]
    cfgs = enumerate_configs(cfg, gpus, hw.gpus_per_node, gb, zeros=zeros, seq=seq,
                             fused=cp_searched, hsdp=bool(knobs["hsdp"]),
                             fsdp_pp=bool(knobs["fsdp_pp"]),
                             recomputes=tuple(selective if r == st.RECOMPUTE_CODE["selective"]
                                              else r for r in RECOMPUTES))
    res = evaluate(cfg, hw, dp=cfgs["dp"], tp=cfgs["tp"], pp=cfgs["pp"], ep=cfgs["ep"],
                   cp=cfgs["cp"], zero=cfgs["zero"], shard=cfgs["shard"],
                   micro_batch=cfgs["micro_batch"], global_batch=gb,
                   recompute=cfgs["recompute"], vp=cfgs["vp"], sp=cfgs["sp"].astype(bool),
                   seq=seq, dtype=dtype, overlap=overlap, attention=knobs["attention"],
                   **priced_knobs(knobs))
    cfgs["zero_priced"] = res["zero_priced"].astype(np.int64)  # ZeRO 1 under fsdp_pp's pipeline
    return {"hw": hw, "cfgs": cfgs, "res": res, "nodes": -(-gpus // hw.gpus_per_node),
            "knobs": knobs, "by_recipe": by_recipe, "zeros": zeros, "cp_searched": cp_searched}


def _with_price(r: dict[str, Any], prices: Prices | None, spot: bool, resilience: Resilience,
                ckpt: float) -> dict[str, Any]:
    """A search result with ``usd`` (its preset's price per GPU-hour: NaN where the price file
    has none, None without prices) and ``exp`` (its overhead terms on ``r["nodes"]`` nodes)."""
    hw = r["hw"]
    return r | {"usd": prices.per_gpu_hour(hw.node, hw.gpu, spot) if prices else None,
                "exp": resilience.evaluate(r["nodes"], ckpt)}


def layout_rules(model: ModelConfig, gpus: int, gpus_per_node: int, global_batch: int) -> str:
    """The shape rules that leave no configuration on ``gpus`` GPUs, computed from the search:
    every ``(dp, tp, pp)`` with ``dp tp pp = gpus`` and tp inside a node (``hybrid.in_node``),
    taken with the
    most permissive rest (micro-batch 1, vp 1, ZeRO 0, ep 1), is checked by
    ``hybrid.check_shapes``; the rules that reject one of them are named, with the model's
    numbers (``''`` when some layout is valid). No layout meets all the rules named."""
    divs = divisors(gpus)
    t, p = (x.ravel() for x in np.meshgrid(divs[in_node(divs, gpus_per_node, gpus)], divs,
                                           indexing="ij"))
    keep = gpus % (t * p) == 0
    t, p = t[keep].astype(float), p[keep].astype(float)
    d, one = gpus / (t * p), np.ones(t.shape)
    code = check_shapes(model, d, t, p, one, 0 * one, one, np.full(t.shape, float(global_batch)),
                        one)
    if t.size and np.any(code == 0):
        return ""
    kv = ("" if model.kv == model.heads else
          f" and the {model.kv} key/value heads")
    words = {SHAPE_BATCH: f"dp dividing the global batch {global_batch}",
             SHAPE_TP: (f"tp (within a node: dividing its {gpus_per_node} GPUs) dividing the "
                        if gpus > gpus_per_node else f"tp (at most {gpus_per_node}) dividing the ")
                       + f"{model.heads} attention heads{kv}",
             SHAPE_LAYERS: f"pp dividing the {model.layers} layers"}
    rules = [words.get(int(c), SHAPE_ERRORS[int(c)]) for c in sorted(set(code.tolist()))]
    if not rules:  # no tp fits a node (cannot happen: tp = 1 always does)
        return f"tp at most {gpus_per_node}"
    return join_words(rules)


def _empty_note(searched: int, any_fits: bool, gpus: int, rules: str,
                min_gb: dict[str, float], capacity_gb: dict[str, float],
                materialized: bool = False, state_gb: dict[str, float] | None = None) -> str:
    """Why ``plan`` recommends nothing: no layout passes the shape rules (``rules``, from
    :func:`layout_rules`), or none fits in memory (``min_gb``: the least memory per GPU of a
    configuration, per node preset, against its ``capacity_gb``; with ``materialized``
    attention the fused kernels are named too: they keep no ``s x s`` scores). Where the model
    state alone (``state_gb``: its least per GPU, weights, gradients and optimizer) outweighs
    every preset's GPU, only more GPUs help, and the note says so."""
    if not searched:
        return (f"no configuration: no dp x tp x pp = {gpus} has {rules}; change --gpus or "
                f"--global-batch")
    if not any_fits:
        need = ", ".join(f"{gb:.1f} GB per GPU of {capacity_gb[nd]:.0f}"
                         + (f" on {nd}" if len(min_gb) > 1 else "") for nd, gb in min_gb.items())
        fused = f", or price {FUSED_HINT}" if materialized else ""
        if state_gb and all(gb > capacity_gb[nd] for nd, gb in state_gb.items()):
            least = min(state_gb.values())
            return (f"no configuration fits in GPU memory (the smallest needs {need}): the "
                    f"model state alone (weights, gradients, optimizer) needs {least:.1f} GB per "
                    f"GPU, sharded as far as {plural(gpus, 'GPU')} "
                    f"{'goes' if gpus == 1 else 'go'}; add GPUs")
        return (f"no configuration fits in GPU memory (the smallest needs {need}); add GPUs, "
                f"shorten the sequence or lower the global batch{fused}")
    return ""


def _batch_multiple(seq: int, gpus: int | list[int]) -> int:
    """``k`` of plan's default global batch (:func:`~traincast.parallel.hybrid.
    default_global_batch`), so that the default batch divides among every data-parallel layout
    the GPUs allow: for ``n`` GPUs the largest divisor of ``n`` at most ``c = round(2^22 / s)``
    (64 GPUs, seq 3000: 64, so 1408 sequences, not 1398 = 2 x 3 x 233; 12 GPUs, seq 4096: 12,
    1020 sequences, which 3, 6 and 12 data-parallel ranks divide); for several counts (a
    re-plan over them) the least common multiple of theirs where it is at most ``c``, else the
    largest count's."""
    counts = [int(g) for g in gpus] if isinstance(gpus, list) else [int(gpus)]
    cap = max(1, round(DEFAULT_BATCH_TOKENS / seq))

    def largest_divisor(n: int) -> int:
        return int(max(d for d in divisors(n) if d <= cap))

    each = [largest_divisor(n) for n in counts]
    common = math.lcm(*each)
    return common if common <= cap else largest_divisor(max(counts))


def node_presets(node: str) -> list[str]:
    """The presets of a ``--node`` value (``"dgx-a100,dgx-h100"``), in order, each once; an
    error when it names none."""
    presets = list(dict.fromkeys(n.strip() for n in node.split(",") if n.strip()))
    if not presets:
        raise TraincastError(f"--node {node!r}: no node preset named",
                             hint="e.g. --node dgx-a100 (traincast hardware list)")
    return presets


def _predict_command(row: dict[str, Any], model: str, extra: str) -> str:
    """The ``traincast predict --arch hybrid`` line of a plan row: the same job, the same
    iteration time."""
    c = row["config"]
    flags = [f"--model {shlex.quote(model)}", f"--node {row['node']}", f"--dp {c['dp']}",
             f"--tp {c['tp']}",
             f"--pp {c['pp']}"]
    flags += [f"--ep {c['ep']}"] * (c["ep"] > 1)
    flags += [f"--cp {c['cp']}"] * (c["cp"] > 1)
    flags += [f"--zero {c['zero']}"] + [f"--shard {c['shard']}"] * hsdp(c)
    flags += [f"--micro-batch {c['micro_batch']}",
              f"--recompute {st.RECOMPUTE[c['recompute']]}", f"--vp {c['vp']}"]
    flags += [("--sp" if c["sp"] else "--no-sp")] * (c["tp"] > 1)
    return "traincast predict --arch hybrid " + " ".join(flags) + extra


def model_spec(cfg: ModelConfig) -> str:
    """``zoo:NAME`` of a zoo model (as ``predict --model`` takes it), else ``MODEL``."""
    from traincast.zoo.registry import canonical_name

    return f"zoo:{cfg.name}" if canonical_name(cfg.name) is not None else "MODEL"


def plan_assumed(global_batch: int | None, gb: int, s: int, seq: int | None, dtype: str,
                 overlap: float, attention: str = "materialized",
                 framework: str = DEFAULT_FRAMEWORK,
                 by_recipe: dict[str, dict[str, Any]] | None = None,
                 zeros: tuple[int, ...] = ZEROS,
                 cp_searched: dict[str, bool] | None = None,
                 gated: bool = False) -> dict[str, Any]:
    """What ``plan`` assumed and what it searched: the global batch
    (:func:`hybrid.batch_assumption`), sequence, dtype, attention, the framework recipe and
    what it set (``by_recipe``: per node preset), schedule and overlap, whether context
    parallelism was searched (``cp_searched``, per node preset: a recipe with it and a fused
    attention), with the ``text`` of its ``assumed:`` line."""
    seq_how = "the model's, --seq to change" if seq is None else "--seq"
    sets = by_recipe or {}
    distinct = {repr(v): v for v in sets.values()}
    recipe = (recipe_text(framework, next(iter(distinct.values()), {}), dtype, gated)
              if len(distinct) <= 1 else
              "; ".join(f"on {nd}: {recipe_text(framework, v, dtype, gated)}"
                        for nd, v in sets.items()))
    set_attention = any("attention" in v for v in sets.values())
    full_sets = [RECIPE_KNOBS | v for v in sets.values()]  # the knobs no recipe set: defaults
    hsdp_on = all(v["hsdp"] for v in full_sets)
    cp_on = [nd for nd, v in (cp_searched or {}).items() if v]
    cp_off = [nd for nd, v in (cp_searched or {}).items() if not v]
    cp_words = "divisors of the GPUs whose 2 cp divides the sequence"
    selective = sorted({str(v["selective"]) for v in full_sets}
                       or {str(RECIPE_KNOBS["selective"])})
    sharded = join_words([z for z in zeros if z >= 1], "or")  # what HSDP shards with
    fsdp_pp = bool(sets) and all(v["fsdp_pp"] for v in full_sets)
    no_pipeline = min(zeros) >= 2 and not fsdp_pp  # ZeRO 2 and 3 take no pipeline: pp 1, vp 1
    searched = {"recompute": ["none", *selective, "full"], "zero": list(zeros),
                "hsdp": hsdp_on,
                "shard": (f"every data-parallel rank, and one node's (HSDP) with ZeRO {sharded}"
                          if hsdp_on and sharded else "every data-parallel rank"),
                "micro_batch": list(MICRO_BATCHES), "vp": list(VPS), "sp": [False, True],
                "tp": "divisors of the GPUs up to the node's GPUs",
                "cp": ({nd: cp_words if on else [1] for nd, on in cp_searched.items()}
                       if cp_on and cp_off else cp_words if cp_on else [1])}
    cp_text = ("context parallelism cp over the divisors of the GPUs (2 cp dividing the "
               "sequence)" + (f" on {join_words(cp_on, 'and')}, none on "
                              f"{join_words(cp_off, 'and')} (no fused attention there)"
                              if cp_off else "") if cp_on else
               "no context parallelism (it needs a fused attention the GPU runs and a "
               "--framework whose stack has it: megatron-core)")

    out = batch_assumption(global_batch, gb, s) | {
        "seq": s, "seq_default": seq is None, "dtype": dtype, "schedule": "1f1b",
        "overlap": overlap, "attention": attention, "framework": framework,
        "recipe": sets, "searched": searched}
    out["text"] += (f"; sequence {s} tokens ({seq_how}); {dtype} (--dtype); "
                    + ("" if set_attention else f"{attention} attention (--attention); ")
                    + f"{recipe}; 1F1B schedule; "
                    + ("no communication overlap" if overlap == 0 else
                       f"{overlap:g} of data-parallel communication hidden") + " (--overlap)"
                    f". Searched: tp within a node, recompute "
                    f"{join_words(searched['recompute'], 'or')}, ZeRO {join_words(zeros, 'or')} "
                    + (f"(sharded over every data-parallel rank, and with ZeRO {sharded} over one "
                       "node's, HSDP), " if hsdp_on and sharded else "(sharded over every "
                       "data-parallel rank" + ("; the recipe's stack has no HSDP" if not hsdp_on
                                               else "") + "), ")
                    + f"micro-batch {join_words(MICRO_BATCHES, 'or')}, "
                    + ("pp 1 and vp 1 (ZeRO 2 and 3 take no pipeline), " if no_pipeline else
                       f"vp {join_words(VPS, 'or')}, ")
                    + ("ZeRO 2 and 3 with pp > 1 priced as ZeRO 1 (FSDP under PyTorch's "
                       "pipelining), " if fsdp_pp and max(zeros) >= 2 else "")
                    + "sequence parallelism on and off, " + cp_text)
    return out


def plan(model: str | ModelConfig, gpus: int, node: str, *, catalog: Catalog | None = None,
         global_batch: int | None = None, seq: int | None = None, dtype: str = DEFAULT_DTYPE,
         top: int = 5, network: str | None = None, price: str | Path | Prices | None = None,
         overlap: float = 0.0, spot: bool = False, resilience: Resilience | None = None,
         rank: str | None = None, attention: str | None = None,
         framework: str = DEFAULT_FRAMEWORK) -> dict[str, Any]:
    """Rank every feasible configuration of ``model`` on ``gpus`` GPUs of ``node`` presets.

    ``node`` may list several presets separated by commas (ranked together by cost with a
    price). ``price``: a price file or shipped name (traincast.hardware.prices); ``spot`` uses
    its spot prices. ``resilience``: preemptions per node-hour and checkpoints; every row gets
    ``overhead_factor = 1 + C/tau + lambda (tau/2 + Rs)`` and ``s_per_million_tokens =
    T_iter overhead / (B s) 1e6``, with a price ``usd_per_million_tokens = N usd_per_gpu_hour
    s_per_million_tokens / 3600`` (traincast.parallel.spot). ``rank`` orders ``top``
    (``RANKS``): ``"time"`` by iteration time, ``"expected"`` by expected time per million
    tokens (iteration time x overhead; differs only across presets with different overheads);
    None: ``"expected"`` when anything is preempted or checkpointed (``Resilience.active``),
    else ``"time"``.
    ``attention`` (``hybrid.ATTENTION``) prices every configuration with materialized or fused
    attention; ``framework`` names a recipe (``parallel/recipes.toml``) that sets the attention
    (where ``attention`` is None), dropout, gradient-accumulation fusion and, if it names one,
    the only ZeRO stage searched. Without ``global_batch`` the batch is
    ``hybrid.default_global_batch(s)`` (about 4M tokens), the default of ``predict --arch
    hybrid`` too. Returns ``{"model", "gpus",
    "assumed" (the global batch and the other defaults, what was searched, the ``text`` of the
    ``assumed:`` line), "searched", "feasible", "seconds", "top": [rows], "ranked_by" (the
    ``rank`` used), "by_cost": [rows]
    (with price), "resilience" (when checkpointing), "on_demand" and "spot_saving" (spot with
    on-demand prices), "network": {...} (with network), "note", "layout_rules" (no layout) or
    "min_memory_gb" (nothing fits), "memory_unchecked" (GPUs without ``mem_gb``), "flat_peak"
    (GPUs priced at flat datasheet peaks, ``compute.flat_peak_gpus``), "compute_fallback"
    (under ``--compute curves``: GPU -> why it is priced at flat peaks instead)}``; each row
    of ``top``
    has ``share`` (compute, comm, bubble and data_io over the iteration, :func:`shares`: the
    table's numbers and the sentence's) and ``predict`` (the ``traincast predict --arch
    hybrid`` line of the same job).
    """
    t0 = time.perf_counter()
    resilience = resilience or Resilience()
    rank = rank or ("expected" if resilience.active else "time")
    if rank not in RANKS:
        raise TraincastError(f"unknown ranking {rank!r}", hint=f"choose one of {', '.join(RANKS)}")
    check_counts(global_batch=global_batch, seq=seq)
    check_dtype(dtype)
    check_framework(framework)
    if attention is not None:
        check_attention(attention)
    nodes = node_presets(node)
    catalog = catalog or load_catalog()
    cfg = get_model(model) if isinstance(model, str) else model
    s = int(seq or cfg.seq)
    gb = default_global_batch(s, _batch_multiple(s, gpus)) if global_batch is None \
        else int(global_batch)
    prices = load_prices(price, catalog) if isinstance(price, str | Path) else price
    if spot and prices is None:
        raise TraincastError("--spot needs --price (a price file with spot_usd_per_gpu_hour)",
                             hint="e.g. --price aws --spot")
    ckpt = spot_model.checkpoint_bytes(cfg, dtype)

    left_out: dict[str, str] = {}

    def search(nic: str | None) -> list[dict[str, Any]]:
        out = []
        for nd in nodes:
            if len(nodes) > 1 and (why := preset_problem(cfg, catalog, nd, dtype, attention,
                                                         framework)):
                left_out[nd] = why  # one of several presets cannot run the job
                continue
            found = _search_node(cfg, catalog, nd, nic, gpus, gb, s, dtype, overlap,
                                 attention, framework)
            out.append(_with_price(found, prices, spot, resilience, ckpt))
        if not out:
            raise TraincastError(f"no preset of --node {node} can run it: "
                                 + "; ".join(f"{nd}: {why}" for nd, why in left_out.items()),
                                 hint="choose a --dtype (--attention) their GPUs run")
        return out

    base = search(None)
    nodes = [r["hw"].node for r in base]
    if prices and all(math.isnan(r["usd"]) for r in base):  # nothing to price: say which key
        prices.require(base[0]["hw"].node, base[0]["hw"].gpu, spot)
    searched = sum(len(r["cfgs"]["dp"]) for r in base)
    first_attention = base[0]["knobs"]["attention"]
    out: dict[str, Any] = {
        "model": cfg.name, "params": cfg.params, "params_active": cfg.params_active,
        "experts": cfg.experts,
        "gpus": gpus, "nodes": nodes, "dtype": dtype, "seq": s, "global_batch": gb,
        "tokens_per_iteration": gb * s,
        "assumed": plan_assumed(global_batch, gb, s, seq, dtype, overlap, first_attention,
                                framework, {r["hw"].node: r["by_recipe"] for r in base},
                                base[0]["zeros"],
                                {r["hw"].node: r["cp_searched"] for r in base}, cfg.gated),
        "searched": searched, "attention": first_attention, "framework": framework,
        "feasible": sum(int(r["res"]["fits"].sum()) for r in base),
        "top": _ranked(base, rank, top, gb * s), "ranked_by": rank, "left_out": left_out,
        "warnings": model_warnings(cfg, s, seq, first_attention)}
    ranks = [f"#{r['rank']}" for r in out["top"] if r["recompute"] == "selective-op"]
    if ranks and (w := selective_op_warning(cfg, "selective-op", first_attention)):
        out["warnings"].append(f"{', '.join(ranks)}: {w}")
    spec = model if isinstance(model, str) and model.startswith(("zoo:", "hf:")) \
        else model_spec(cfg)
    extra = "".join([f" --seq {s}"] * (seq is not None)
                    + [f" --global-batch {gb}"]
                    + [f" --dtype {dtype}"] * (dtype != "bf16")
                    + [f" --framework {framework}"] * (framework != DEFAULT_FRAMEWORK)
                    + [f" --attention {attention}"] * (attention is not None)
                    + [f" --overlap {overlap:g}"] * (overlap > 0))
    for row in out["top"]:
        row["predict"] = _predict_command(row, spec, extra)
    if resilience.checkpoint_gbs is not None:
        out["resilience"] = resilience.to_dict() | {
            "by_node": {r["hw"].node: {"nodes": r["nodes"]} | _exp_dict(r["exp"]) for r in base}}
    if prices:
        _price_part(out, base, prices, spot, resilience, ckpt, top, gb * s)
    if network:
        other = search(network)
        net_rows = _ranked(other, rank, top, gb * s)
        for row in net_rows:
            row["predict"] = _predict_command(row, spec, extra + f" --nic {network}")
        out["network"] = {"nic": network, "top": net_rows,
                          "feasible": sum(int(r["res"]["fits"].sum()) for r in other)}
        if out["top"] and net_rows:
            out["network"]["summary"] = _network_summary(network, out["top"][0], net_rows[0])
    rules = "" if searched else layout_rules(cfg, gpus, max(r["hw"].gpus_per_node for r in base),
                                             gb)
    if rules:
        out["layout_rules"] = rules
    scores_bound = False
    if searched and not out["feasible"]:
        out["min_memory_gb"] = {r["hw"].node: float(np.min(r["res"]["mem_total_bytes"])) / 1e9
                                for r in base if len(r["cfgs"]["dp"])}
        scores_bound = any(
            bool(activations_dominate(r["res"])[int(np.argmin(r["res"]["mem_total_bytes"]))])
            for r in base if len(r["cfgs"]["dp"]))
    state = {r["hw"].node: float(np.min(r["res"]["mem_state_bytes"])) / 1e9
             for r in base if len(r["cfgs"]["dp"])} if searched and not out["feasible"] else {}
    note = _empty_note(searched, bool(out["top"]), gpus, rules, out.get("min_memory_gb", {}),
                       {r["hw"].node: r["hw"].mem_bytes / 1e9 for r in base},
                       first_attention == "materialized" and scores_bound, state)
    if note:
        out["note"] = note
    out["memory_unchecked"] = sorted({r["hw"].gpu for r in base
                                      if not np.isfinite(r["hw"].mem_bytes)})
    out["flat_peak"] = flat_peak_gpus(catalog, [r["hw"].gpu for r in base])
    if catalog.compute == "curves":  # asked for, but an entry without curves is priced flat
        out["compute_fallback"] = {r["hw"].gpu: r["hw"].compute_why for r in base
                                   if r["hw"].compute_why}
    out["seconds"] = time.perf_counter() - t0
    return out


def _best(p: dict[str, Any]) -> dict[str, Any] | None:
    """The one row of a ``top=1`` plan (None when nothing fits)."""
    return p["top"][0] if p["top"] else None


def _unused_reason(q: dict[str, Any], best: dict[str, Any], used: int) -> str:
    """Why re-planning left the plan ``q`` on more GPUs than ``used`` (the chosen plan's, with
    ``best`` its row): no layout passes the shape rules, none fits in memory, or its best
    configuration takes more expected time per million tokens."""
    b = _best(q)
    if not q["searched"]:
        return f"no dp x tp x pp has {q.get('layout_rules', 'a valid shape')}"
    if b is None:
        need = q.get("min_memory_gb", {})
        return ("no configuration fits in GPU memory" + (
            f" (at least {min(need.values()):.1f} GB per GPU)" if need else ""))
    return (f"its best, {b['label']}, takes {b['s_per_million_tokens']:.3g} s per million tokens "
            f"(expected) against {best['s_per_million_tokens']:.3g} s on {used}")


def replan(model: str | ModelConfig, gpus: Sequence[int], node: str,
           progress: Callable[[int, int], None] | None = None,
           **kwargs: Any) -> dict[str, Any]:
    """Re-planning as machines come and go (Varuna's job morphing): for each count of available
    GPUs in ``gpus`` (in the order given, e.g. 64, 48, 32 as machines are lost) the plan with
    the least expected time per million tokens (preemption losses included) on at most that
    many GPUs — all of them, or fewer whole nodes when that is faster or no shape fits the
    count (unused machines are released and not paid) — with the same global batch (Varuna
    keeps it, so training stays correct); its time, expected overhead, cost with a price, and
    whether it differs from the previous count's, and for each larger count left unused why
    (``unused``: no layout, nothing fits, or more expected time per million tokens). Each change
    costs one checkpoint and one restart, ``switch_s = C + Rs`` (reported, not amortized).
    ``kwargs`` as :func:`plan`; each plan ranks by expected time (``rank="expected"``), so with
    several presets the one with the smaller overhead-weighted time wins, not the one with the
    faster iteration. ``progress(done, total)``: called after each GPU count is planned (one
    plan per whole-node count up to the largest: many for a large cluster)."""
    if not gpus or any(int(g) < 1 for g in gpus):
        raise TraincastError(f"--gpus needs positive GPU counts, got {list(gpus)}")
    catalog = kwargs.pop("catalog", None) or load_catalog()
    kwargs = kwargs | {"top": 1, "catalog": catalog, "rank": "expected"}
    model = get_model(model) if isinstance(model, str) else model  # resolved once
    default_batch = kwargs.get("global_batch") is None
    if default_batch:  # one batch for every count, which each of them divides
        s = int(kwargs.get("seq") or model.seq)
        kwargs["global_batch"] = default_global_batch(s, _batch_multiple(s, list(gpus)))
    if isinstance(kwargs.get("price"), str | Path):  # read once
        kwargs["price"] = load_prices(kwargs["price"], catalog)
    done: dict[int, dict[str, Any]] = {}  # GPU count -> its plan (counts repeat across rows)
    presets = node_presets(node)
    runs = [nd for nd in presets if not preset_problem(
        model, catalog, nd, kwargs.get("dtype", DEFAULT_DTYPE), kwargs.get("attention"),
        kwargs.get("framework", DEFAULT_FRAMEWORK))] or presets  # none: plan says why
    per_node = min(catalog.node(nd).gpus for nd in runs)  # UnknownNameError with its hint
    rows: list[dict[str, Any]] = []
    first: dict[str, Any] = {}
    every = {g: sorted({g} | set(range(per_node, g, per_node)), reverse=True)
             for g in (int(x) for x in gpus)}
    total = len(set().union(*every.values()))

    def planned(n: int) -> dict[str, Any]:
        if n not in done:
            done[n] = plan(model, n, node, **kwargs)
            if progress:
                progress(len(done), total)
        return done[n]

    for g in (int(x) for x in gpus):
        plans = [planned(n) for n in every[g]]
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
        row |= {"gpus_used": p["gpus"], "nodes": b["nodes"],
                "unused": [{"gpus": q["gpus"], "reason": _unused_reason(q, b, p["gpus"])}
                           for q in plans if q["gpus"] > p["gpus"]]}
        row |= {k: b[k] for k in ("label", "config", "zero_priced", "node", "gpu",
                                  "tokens_per_s_per_gpu",
                                  "overhead_factor", "s_per_million_tokens")}
        row |= {"time_s": b["time_s"]["total"],
                "usd_per_million_tokens": b.get("usd_per_million_tokens"),
                "switch_s": exp.get("switch_s")}
        if "note" in exp:
            row["warning"] = exp["note"]
        if p.get("on_demand") and b.get("usd_per_million_tokens") is not None:
            od = p["on_demand"]["usd_per_million_tokens"]  # the count's cheapest on-demand plan
            row |= {"spot_saving": 1.0 - b["usd_per_million_tokens"] / od,
                    "on_demand_usd_per_million_tokens": od,
                    "on_demand_label": p["on_demand"]["label"],
                    "on_demand_node": p["on_demand"]["node"]}
        prev = next((r for r in reversed(rows) if "label" in r), None)
        row["changed"] = prev is not None and (prev["label"], prev["node"], prev["gpus_used"]) \
            != (b["label"], b["node"], p["gpus"])
        rows.append(row)
    assumed = first["assumed"]
    if default_batch:  # the search was given the batch this default chose
        said = batch_assumption(None, first["global_batch"], first["seq"])
        assumed = assumed | {k: said[k] for k in ("default", "rule")} | {
            "text": assumed["text"].replace(
                batch_assumption(first["global_batch"], first["global_batch"],
                                 first["seq"])["text"], said["text"], 1)}
    return {"model": first["model"], "params": first["params"], "nodes": first["nodes"],
            "left_out": first.get("left_out", {}), "warnings": first.get("warnings", []),
            "dtype": first["dtype"], "seq": first["seq"],
            "global_batch": first["global_batch"], "assumed": assumed,
            "gpus": [int(g) for g in gpus],
            "price": first.get("price"), "resilience": first.get("resilience"), "rows": rows}
