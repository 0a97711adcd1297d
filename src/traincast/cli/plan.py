"""``traincast plan``: rank the hybrid-parallel configurations of a language model on a cluster."""

from __future__ import annotations

import math
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from traincast.bounds import BATCH_MAX
from traincast.cli import app
from traincast.cli.common import (
    MAX_GPUS,
    CatalogOpt,
    ComputeOpt,
    JsonOpt,
    above_published,
    catalog_from,
    check_model_spec,
    check_price,
    check_speeds,
    console,
    one_of,
    print_full_square_note,
    print_json,
    print_mfu_caution,
    progress,
    within,
)
from traincast.cli.tables import RULES_OFF, Table, print_table
from traincast.errors import TraincastError
from traincast.parallel.hybrid import (
    ATTENTION,
    ATTENTION_HELP,
    DEFAULT_FRAMEWORK,
    DTYPES,
    check_attention,
    check_dtype,
    check_framework,
    recipes,
)
from traincast.parallel.plan import percent
from traincast.units import fmt_amount, fmt_params, fmt_sig, join_words, plural

OVERHEAD_HELP = ("Expected overhead = 1 + C/tau + lambda (tau/2 + Rs), lambda = nodes x R / 3600 "
                 "per second, C = checkpoint bytes / (checkpoint GB/s x 1e9), tau = sqrt(2 C / "
                 "lambda) (Young/Daly) unless --checkpoint-every, Rs = --restart-s (default C + "
                 "120 s)")


def parse_gpus(text: str) -> list[int]:
    """``'64'`` or ``'64,48,32'`` -> GPU counts (each at most once)."""
    try:
        counts = [int(x) for x in text.strip().removesuffix(",").split(",")]  # 16,,32: no
    except ValueError:
        raise TraincastError(f"--gpus: not a GPU count or a list of them: {text!r}",
                             hint="e.g. --gpus 64 or --gpus 64,48,32") from None
    if not counts or min(counts) < 1:
        raise TraincastError(f"--gpus: GPU counts must be positive, got {text!r}")
    if twice := sorted({c for c in counts if counts.count(c) > 1}):
        raise TraincastError(f"--gpus: {', '.join(map(str, twice))} given more than once in "
                             f"{text!r}", hint="name each GPU count once, e.g. --gpus 64,48,32")
    if max(counts) > MAX_GPUS:
        raise TraincastError(f"--gpus: {max(counts):,} GPUs is out of bounds (at most "
                             f"{MAX_GPUS:,})", hint="check the count")
    return counts


@app.command()
def plan(
    model: Annotated[str, typer.Argument(
        help="zoo:NAME with an LLM config (traincast zoo list, 'plan': gpt3-175b, llama2-7b, "
             "llama3-70b, mixtral-8x7b, megatron-gpt-*, ...) or hf:config.json.")],
    gpus: Annotated[str, typer.Option(
        help="GPUs N of the job (dp x tp x pp x cp = N, at most 1,000,000), or a list (64,48,32): "
             "the best plan for each count as machines come and go (re-planning).")],
    node: Annotated[str, typer.Option(
        help="Node preset(s) (traincast hardware list); several separated by commas.")]
    = "dgx-a100",
    global_batch: Annotated[int | None, typer.Option(
        callback=within(1, BATCH_MAX), help="Sequences per iteration B, from 1 to 1e9 "
        "(default: about 4M tokens per iteration as Llama 2 trained, B = k max(1, round(2^22 / "
        "(s k))) for sequence length s, k the largest divisor of the GPU count at most "
        "round(2^22 / s), so that B divides among every data-parallel layout; predict "
        "--arch hybrid takes k = dp x micro-batch: docs/parallelism.md, 'The default global "
        "batch').")] = None,
    seq: Annotated[int | None, typer.Option(
        callback=within(1), help="Sequence length, at least 1 (default: the model's).")]
    = None,
    dtype: Annotated[str, typer.Option(help=f"Training dtype: {one_of(DTYPES)}.")]
    = "bf16",
    attention: Annotated[str | None, typer.Option(
        help=f"Attention: {one_of(ATTENTION)} ({ATTENTION_HELP}; default: the --framework "
             "recipe's).")] = None,
    framework: Annotated[str, typer.Option(
        help=f"Framework recipe, {one_of(recipes())}: its attention, dropout and layer "
             "kernels, the one ZeRO stage searched if it sets one, what selective "
             "recomputation is (torchtitan: selective-op) and whether ZeRO 3 takes a pipeline "
             "(torchtitan: priced as ZeRO 1) (Framework recipes in the parallelism docs); "
             "--attention overrides it.")]
    = DEFAULT_FRAMEWORK,
    price: Annotated[str | None, typer.Option(
        help="Price file (TOML: [gpu.NAME] or [node.PRESET] with usd_per_gpu_hour, source and "
             "optionally spot_usd_per_gpu_hour, spot_source) or a shipped name "
             "(aws-on-demand, also aws): adds usd_per_million_tokens = N x usd_per_gpu_hour x "
             "T_iter x overhead / 3600 / (B s) x 1e6 and a ranking by cost.")] = None,
    spot: Annotated[bool, typer.Option(
        "--spot", help="Use the spot prices of --price (and compare with on-demand).")] = False,
    preemptions_per_hour: Annotated[float, typer.Option(
        callback=within(0.0, 3600.0), help="Preemptions per node (machine) per hour, R from 0 "
        "to 3,600; the job stops when any of its nodes is preempted. " + OVERHEAD_HELP
        + ".")] = 0.0,
    checkpoint_gbs: Annotated[float | None, typer.Option(
        help="Write (and read-back) bandwidth of the whole job to checkpoint storage, GB/s "
             "(needed with --preemptions-per-hour or --checkpoint-every).")] = None,
    checkpoint_gb: Annotated[float | None, typer.Option(
        help="Checkpoint size in GB, 1e9 bytes (default: weights + optimizer state of the "
             "memory model, 14 bytes per parameter in bf16/fp16, 12 in fp32).")] = None,
    checkpoint_every: Annotated[float | None, typer.Option(
        help="Seconds of work between checkpoints, tau (default: Young/Daly sqrt(2 C / "
             "lambda)).")] = None,
    restart_s: Annotated[float | None, typer.Option(
        help="Seconds to restart after a preemption, Rs (default: checkpoint read C + 120 s, "
             "an assumed allowance to replace the machine and relaunch).")] = None,
    top: Annotated[int | None, typer.Option(
        callback=within(1), help="How many configurations to show (at least 1; default 5; "
        "one GPU count).")] = None,
    network: Annotated[str | None, typer.Option(
        help="Also plan with this node network (link name or speed, e.g. eth25 or 25Gbit) "
             "and show what changes (one --gpus count).")] = None,
    overlap: Annotated[float, typer.Option(
        callback=within(0.0, 1.0), help="Fraction of data-parallel communication hidden "
        "under compute, 0 to 1.")] = 0.0,
    catalog: CatalogOpt = None,
    compute: ComputeOpt = "auto",
    json_out: JsonOpt = False,
) -> None:
    """Search every (dp, tp, pp, ep, cp, zero, micro-batch, recompute, vp) with dp·tp·pp·cp = N,
    predict each with the hybrid model and show the fastest that fit in GPU memory (with
    --preemptions-per-hour or --checkpoint-every: the least expected time, iteration time x
    overhead).

    Per micro-batch on the slowest stage: each matrix product's FLOPs / (peak x published GEMM
    efficiency x its tile/wave efficiency), attention products at their roofline
    (materialized) or a fused kernel's rate at the layer's sequence and head size (--attention,
    --framework) +
    element-wise kernels' bytes / (DRAM bandwidth x their family's fitted fraction, norm,
    softmax or other, hardware/kernel_model.toml) + tensor-parallel all-reduces +
    expert all-to-alls + pipeline point-to-point, and no less than the host's issue of its
    kernels (d r per kernel, as the per-op model); per iteration (m + (p-1)/v) micro-batch
    times + ZeRO data-parallel traffic (one ring per network rail) + tied-embedding
    all-reduce + optimizer step (52 bytes/parameter, 32 in fp32). Memory: weights, gradients,
    Adam state after ZeRO sharding, and Korthikanti et al. activations per recompute mode. On
    preemptible machines (Varuna): expected time and cost per million tokens with checkpoints,
    lost work and restarts, first order: overhead = 1 + C/tau + lambda (tau/2 + Rs).
    Formulas: docs/parallelism.md.

    The output says what it assumed (global batch, sequence, dtype, attention, schedule) and
    what it searched, what every column is with its units, and the predict --arch hybrid line
    of the best configuration (the same iteration time). Re-planning says why GPUs are left
    unused. Exit status: 0 with a plan; 1 when no configuration exists or fits in memory (a
    re-plan: at no GPU count; the output says why, --json by feasible and top, a re-plan's by
    each row's feasible and note); 2 on bad input.
    """
    from traincast.parallel.plan import plan as run_plan
    from traincast.parallel.plan import replan
    from traincast.parallel.spot import Resilience

    counts = parse_gpus(gpus)
    check_dtype(dtype)
    if attention is not None:
        check_attention(attention)
    check_framework(framework)
    check_model_spec(model)
    check_price(price)
    check_speeds(network=network)
    if not [n for n in node.split(",") if n.strip()]:
        raise TraincastError(f"--node {node!r}: no node preset named",
                             hint="e.g. --node dgx-a100 (traincast hardware list)")
    resilience = Resilience(
        preemptions_per_hour=preemptions_per_hour, checkpoint_gbs=checkpoint_gbs,
        checkpoint_bytes=None if checkpoint_gb is None else checkpoint_gb * 1e9,
        checkpoint_every_s=checkpoint_every, restart_s=restart_s)
    kwargs: dict[str, Any] = {
        "catalog": catalog_from(catalog, compute), "global_batch": global_batch, "seq": seq,
        "dtype": dtype, "price": price, "attention": attention, "framework": framework,
        "overlap": overlap, "spot": spot, "resilience": resilience}
    if len(counts) > 1:
        if network is not None:
            raise TraincastError(f"--network {network} compares one plan on two networks; "
                                 f"--gpus {gpus} re-plans over several GPU counts",
                                 hint="give one GPU count with --network, or leave --network "
                                      "out (a node preset of that network: --node)")
        if top is not None:
            raise TraincastError(f"--top {top} ranks the configurations of one GPU count; "
                                 f"--gpus {gpus} re-plans over several, the best plan of each",
                                 hint="give one GPU count with --top, or leave --top out")
        with progress(json_out) as bar:
            task = bar.add_task("planning each GPU count", total=None)
            result = replan(model, counts, node,
                            progress=lambda done, total: bar.update(task, completed=done,
                                                                    total=total), **kwargs)
        if json_out:
            print_json(result)
        else:
            _print_replan(result)
        if not any("config" in row for row in result["rows"]):
            raise typer.Exit(1)  # no GPU count has a plan (the table says why)
        return
    result = run_plan(model, counts[0], node, top=top or 5, network=network, **kwargs)
    same = "".join([f" --compute {compute}"] * (compute != "auto")
                   + [f" --catalog {p}" for p in catalog or []])
    for row in result["top"]:  # the predict line prices with the same catalog and strategy
        row["predict"] += same
    if json_out:
        print_json(result)
        _exit_without_plan(result)
        return
    console.print(f"[bold]{result['model']}[/bold] ({fmt_params(result['params'])} parameters) "
                  f"on {result['gpus']} GPUs of {', '.join(result['nodes'])}: global batch "
                  f"{result['global_batch']} x {result['seq']} tokens, {result['dtype']}. "
                  f"Searched {result['searched']} configurations, {result['feasible']} fit in "
                  f"memory ({result['seconds']:.2f} s).")
    if result.get("memory_unchecked"):
        console.print(Text(
            f"memory not checked on {', '.join(result['memory_unchecked'])}: the catalog entry "
            "gives no mem_gb, so every configuration counts as fitting (add mem_gb to the "
            "entry, docs/hardware.md)", style="yellow"))
    if result.get("flat_peak"):
        from traincast.compute import FLAT_PEAK_WHY

        console.print(Text(
            f"compute on {', '.join(result['flat_peak'])} priced at flat datasheet peaks: "
            f"{FLAT_PEAK_WHY}, so its times read optimistic beside the kernel model's "
            "(traincast hardware show, docs/hardware.md)", style="yellow"))
    for why in (result.get("compute_fallback") or {}).values():
        console.print(Text(f"compute priced at flat datasheet peaks: {why}", style="yellow"))
    print_assumed_line(result["assumed"])
    _print_plan_notes(result)
    several = len(result["nodes"]) > 1  # rows then name their node preset
    title = "Fastest configurations" + ("" if result["ranked_by"] == "time" else
                                        " by expected time (s/iter x overhead of checkpoints "
                                        "and preemptions)")
    _table(title, result["top"], overlap=overlap, node=several,
           dtype=result["dtype"], mixture=_mixture(result))
    _note_above_peak(result)
    print_mfu_caution([(f"#{r['rank']}", 100 * r["mfu"], 100 * r["hfu"])
                       for r in result["top"] if r["mfu"] is not None], result["dtype"],
                      mixture=_mixture(result))
    if result["top"]:
        console.print(Text("#1 alone (the same iteration time): " + result["top"][0]["predict"],
                           style="dim"))
    if "by_cost" in result:
        market = result["price"]["market"]
        _table(f"Cheapest per million tokens ({market}, expected)", result["by_cost"],
               money=True)
        _print_prices(result["price"])
    _print_resilience(result)
    if "network" in result:
        _table(f"With network {result['network']['nic']}", result["network"]["top"],
               overlap=overlap, legend=False, node=several)
        if "summary" in result["network"]:
            console.print(result["network"]["summary"])
    if "note" in result:
        console.print(f"[red]{result['note']}[/red]")
    _exit_without_plan(result)


def _exit_without_plan(result: dict[str, Any]) -> None:
    """Exit status 1 when no configuration exists or fits (``result['top']`` empty; the
    output says why): a script reads that no plan came back without parsing the output."""
    if not result["top"]:
        raise typer.Exit(1)


CONFIG_LEGEND = ("configuration", "dp, tp, pp: data-, tensor- and pipeline-parallel sizes "
                 "(dp x tp x pp x cp = GPUs); ep: expert-parallel size; cp: context-parallel "
                 "size (each sequence split over cp GPUs; shown when > 1); zero: ZeRO stage "
                 "(\"(as 1)\": priced as ZeRO 1, FSDP under a pipeline); "
                 "shard: HSDP, ZeRO sharded over this many of the dp x cp data-parallel "
                 "ranks (one node's) and replicated over the rest (shown when not all); mb: "
                 "micro-batch, sequences; recompute: activation recomputation; vp: interleaved "
                 "chunks per pipeline stage; sp/no-sp: sequence parallelism on/off")
TIME_LEGEND = (
    ("#", "rank"),
    CONFIG_LEGEND,
    ("s/iter", "seconds per iteration (one optimizer step over the global batch)"),
    ("compute, comm, bubble", "share of s/iter (part / s/iter) in GPU kernels (FLOP- and "
     "memory-bound, optimizer step included, and the GPU's wait for the host to issue them), "
     "in tensor-, pipeline-, expert-, context- and data-parallel communication{hidden}, and "
     "idle in the pipeline bubble ((p - 1) / v micro-batch times); data I/O, the rest, is "
     "not shown"),
    ("mem GB", "memory per GPU, GB (1e9 bytes): weights, gradients, optimizer state, "
     "activations and the layer being recomputed"),
    ("tok/s/GPU", "tokens per second per GPU, B s / (s/iter x GPUs)"),
    ("TFLOP/s", "model TFLOP/s per GPU, (6 P + 12 l a d s) FLOPs per token x tok/s/GPU / 1e12 "
     "(P parameters in matrix products, l layers, a d attention width, s sequence; "
     "recomputation not counted)"))
NODE_LEGEND = (("[node]", "the node preset the configuration runs on"),)
MARK_LEGEND = (("*", "an MFU above every published run of this precision that traincast "
                "checks (where it checks none of it, above the best of another precision): "
                "optimistic (the line under the table)"),)
MONEY_LEGEND = (
    ("[node]", "the node preset; the other columns as in the table of the fastest"),
    ("overhead", "expected time factor of checkpoints, lost work and restarts, 1 + C/tau + "
     "lambda (tau/2 + Rs) (x1.000 without preemptions)"),
    ("s/M tok", "expected seconds per million tokens, s/iter x overhead / (B s) x 1e6"),
    ("$/M tok", "expected US dollars per million tokens, GPUs x $ per GPU-hour x s/M tok / "
     "3600"))
REPLAN_LEGEND = (
    ("GPUs", "GPUs available"),
    ("used", "GPUs the plan runs on, whole nodes; the others are released (why: below)"),
    ("node", "the node preset the plan runs on"),
    ("configuration", "as in plan's table; (new): changed from the row above"),
    ("s/iter", "seconds per iteration"),
    ("overhead", "expected time factor of checkpoints, lost work and restarts"),
    ("s/M tok", "expected seconds per million tokens"),
    ("$/M tok", "expected US dollars per million tokens"),
    ("switch", "seconds one change of configuration costs, C + Rs (write a checkpoint, "
     "restart), reported, not amortized; - without checkpoints"))


def _print_plan_notes(result: dict[str, Any]) -> None:
    """The presets of --node left out of the search, each with why (its GPU has no peak of
    the dtype, no rate for the attention), and the plan's warnings (a sequence longer than
    the model's positions)."""
    for nd, why in result.get("left_out", {}).items():
        console.print(Text(f"left out: {nd}: {why}", style="yellow"))
    for warning in result.get("warnings", []):
        console.print(Text(f"warning: {warning}.", style="yellow"))


def print_assumed_line(assumed: dict[str, Any]) -> None:
    """The ``assumed:`` line above a plan's table (``plan --json``: ``assumed.text``)."""
    console.print(Text("assumed: " + assumed["text"] + ".", style="dim"))


def print_legend(legend: tuple[tuple[str, str], ...], **fill: str) -> None:
    """What the columns of the table above are, with their units: one line per column."""
    for name, text in legend:
        console.print(Text(f"  {name}: {text.format(**fill)}", style="dim"))


def _print_resilience(result: dict[str, Any]) -> None:
    res = result.get("resilience")
    if res:
        for nd, e in res["by_node"].items():
            tau = e["interval_s"]
            every = "none taken (no preemption)" if not math.isfinite(tau) else \
                f"every {tau:.0f} s"
            console.print(
                f"Checkpoints on {nd} ({plural(e['nodes'], 'node')}): "
                f"{e['checkpoint_gb']:.1f} GB at "
                f"{res['checkpoint_gbs']:g} GB/s = C {e['checkpoint_s']:.0f} s, {every}; "
                f"{fmt_sig(e['preemptions_per_hour_job'], 2)} preemptions/h for the job, restart "
                f"Rs {e['restart_s']:.0f} s: expected overhead x{e['overhead_factor']:.3f}.",
                highlight=False)
            if "note" in e:
                console.print(f"[yellow]{e['note']}[/yellow]", highlight=False)
    if "on_demand" in result and result.get("by_cost"):
        od, sp = result["on_demand"], result["by_cost"][0]
        console.print(
            f"Spot {sp['usd_per_million_tokens']:.3f} $/M tokens ({sp['label']}, "
            f"{fmt_sig(sp['s_per_million_tokens'])} s/M tokens) vs on-demand "
            f"{od['usd_per_million_tokens']:.3f} $/M tokens ({od['label']}, "
            f"{fmt_sig(od['s_per_million_tokens'])} s/M tokens): "
            f"{saving_words(result['spot_saving'])}.",
            highlight=False)
        _note_no_preemptions(res)


def _print_prices(price: dict[str, Any]) -> None:
    """Under a priced table: where each preset's price comes from, and the presets the file
    has no price for."""
    market = price["market"]
    for nd, src in price["sources"].items():
        console.print(f"[dim]{market} price of {nd}: {escape(src)}[/dim]", highlight=False)
    if price.get("unpriced"):
        console.print(f"[dim]not priced ({escape(str(price['file']))} has no {market} price for "
                      f"it): {escape(', '.join(price['unpriced']))}[/dim]", highlight=False)


def saving_words(saving: float) -> str:
    """``spot saves N%`` (``saving`` = 1 - spot / on-demand cost), or, when spot costs more,
    ``spot costs N x the on-demand cost``."""
    if saving >= 0:
        return f"spot saves {100 * saving:.0f}%"
    return f"spot costs {fmt_sig(1.0 - saving)}x the on-demand cost"


def _note_no_preemptions(res: dict[str, Any] | None) -> None:
    """The notice under a spot figure that assumes no preemptions at all."""
    if not any(e["preemptions_per_hour_job"] > 0 for e in (res or {}).get(
            "by_node", {}).values()):
        console.print(Text("assumed: no preemptions (--preemptions-per-hour 0): the spot "
                           "figure is the price alone; give the rate your provider's "
                           "machines are taken back at for the checkpoint and restart "
                           "losses (docs/parallelism.md)", style="yellow"))


def _print_replan(result: dict[str, Any]) -> None:
    console.print(f"[bold]{result['model']}[/bold] ({fmt_params(result['params'])} parameters) "
                  f"on {', '.join(result['nodes'])} as machines come and go: global batch "
                  f"{result['global_batch']} x {result['seq']} tokens (kept), {result['dtype']}; "
                  f"per count of available GPUs the plan with the least expected time per "
                  f"million tokens (preemption losses included).")
    print_assumed_line(result["assumed"])
    _print_plan_notes(result)
    priced = result.get("price") is not None
    several = len(result["nodes"]) > 1
    table = Table(title="Best plan per GPU count", title_justify="left", **RULES_OFF)
    cols = ["GPUs", "used"] + ["node"] * several + ["configuration", "s/iter", "overhead",
                                                    "s/M tok"]
    cols += ["$/M tok"] * priced + ["switch"]
    for col in cols:
        table.add_column(col, justify="left" if col == "configuration" else "right",
                         no_wrap=col != "configuration" and " " not in col,
                         min_width=_longest_word(col),
                         overflow="fold")
    for r in result["rows"]:
        if "label" not in r:
            table.add_row(str(r["gpus"]), "-", r.get("note", "nothing fits"),
                          *["-"] * (len(cols) - 3))
            continue
        label = r["label"] + (" (new)" if r["changed"] else "")
        sw = r.get("switch_s")
        cells = [str(r["gpus"]), str(r["gpus_used"]), *[r["node"]] * several, label,
                 fmt_sig(r["time_s"]), f"x{r['overhead_factor']:.3f}",
                 fmt_sig(r["s_per_million_tokens"])]
        if priced:
            cells.append(_usd(r["usd_per_million_tokens"]))
        cells.append("-" if sw is None or not math.isfinite(sw) else f"{sw:.0f} s")
        table.add_row(*cells)
    print_table(table, console)
    print_legend(tuple(x for x in REPLAN_LEGEND if x[0] in cols))
    for r in result["rows"]:
        for reason, counts in _grouped(r.get("unused", [])):
            console.print(Text(f"{r['gpus']} GPUs, {r['gpus_used']} used: with "
                               f"{join_words(counts, 'or')} GPUs {reason}.", style="dim"))
    for r in result["rows"]:
        if "warning" in r:
            console.print(f"[yellow]{r['gpus']} GPUs: {r['warning']}[/yellow]", highlight=False)
    if priced:
        _print_prices(result["price"])
    spot = [r for r in result["rows"] if r.get("spot_saving") is not None]
    for r in spot:
        console.print(f"{r['gpus']} GPUs: spot {_usd(r['usd_per_million_tokens'])} vs "
                      f"on-demand {_usd(r['on_demand_usd_per_million_tokens'])} $/M tokens "
                      f"(the cheapest on-demand plan: {r['on_demand_label']} on "
                      f"{r['on_demand_node']}): {saving_words(r['spot_saving'])}.",
                      highlight=False)
    if spot:
        _note_no_preemptions(result.get("resilience"))


def _grouped(unused: list[dict[str, Any]]) -> list[tuple[str, list[int]]]:
    """The GPU counts of ``unused`` with the same reason together, in order."""
    out: dict[str, list[int]] = {}
    for u in unused:
        out.setdefault(u["reason"], []).append(u["gpus"])
    return [(reason, counts) for reason, counts in out.items()]


def _usd(value: float | None) -> str:
    """A cost per million tokens for a table: three decimals, ``-`` where unpriced."""
    return f"{value:.3f}" if value is not None and math.isfinite(value) else "-"


def _longest_word(header: str) -> int:
    """The narrowest a column may be: its header's longest word (a header of several words
    wraps, "mem GB" over two lines, so that a table of many columns fits 80 columns)."""
    return max(len(w) for w in header.split())


def _note_above_peak(result: dict[str, Any]) -> None:
    """A line under the table when a row's model TFLOP/s is above its GPU's dense peak (MFU
    over 1): the count takes the full attention square, the executed work of a causal mask is
    half."""
    above = [(r["rank"], r["gpu"], r["model_tflops_per_gpu"] / r["mfu"])
             for r in result["top"] if r["mfu"] is not None and r["mfu"] > 1]
    if above:
        ranks = join_words([f"#{rank}" for rank, _, _ in above])
        _, gpu, peak = above[0]
        where = f"the {gpu}'s dense {result['dtype']} peak ({peak:g})" \
            if len({g for _, g, _ in above}) == 1 else \
            f"their GPUs' dense {result['dtype']} peaks"
        print_full_square_note(f"TFLOP/s of {ranks}", where)


def _mixture(result: dict[str, Any]) -> bool:
    """The plan's model is a mixture of experts (``experts > 1``, as predict tells it)."""
    return int(result.get("experts", 1)) > 1


def _table(title: str, rows: list[dict[str, Any]], money: bool = False,
           overlap: float = 0.0, legend: bool = True, node: bool = False,
           dtype: str = "", mixture: bool = False) -> None:
    """Time breakdown columns, or with ``money`` the expected cost columns; the legend of
    the columns below (``legend``); each configuration with its node preset, ``[NODE]``,
    with ``money`` or ``node`` (a plan over several presets). With ``dtype``, a model
    TFLOP/s whose MFU is above every published run of that precision (``above_published``)
    is marked ``*``."""
    if not rows:
        return
    marked = {r["rank"] for r in rows if dtype and not money and r.get("mfu") is not None
              and above_published(100 * r["mfu"], 100 * r["hfu"], dtype, mixture)}
    table = Table(title=title, title_justify="left", **RULES_OFF)
    cols = ["#", "configuration", "s/iter"]
    cols += (["mem GB", "tok/s/GPU", "overhead", "s/M tok", "$/M tok"] if money else
             ["compute", "comm", "bubble", "mem GB", "tok/s/GPU", "TFLOP/s"])
    for col in cols:
        table.add_column(col, justify="left" if col == "configuration" else "right",
                         no_wrap=col != "configuration" and " " not in col,
                         min_width=_longest_word(col), overflow="fold")
    for r in rows:
        ts = r["time_s"]
        total = ts["total"]
        label = r["label"] + (f" [{r['node']}]" if money or node else "")
        cells = [str(r["rank"]), label, fmt_sig(total)]
        if money:
            cells += [f"{r['memory_gb']['total']:.1f}", fmt_amount(r["tokens_per_s_per_gpu"]),
                      f"x{r['overhead_factor']:.3f}", fmt_sig(r['s_per_million_tokens']),
                      _usd(r.get("usd_per_million_tokens"))]
        else:
            share = r["share"]
            cells += [percent(share["compute"]), percent(share["comm"]),
                      percent(share["bubble"]), f"{r['memory_gb']['total']:.1f}",
                      fmt_amount(r["tokens_per_s_per_gpu"]), fmt_amount(r["model_tflops_per_gpu"])
                      + ("*" if r["rank"] in marked else "")]
        table.add_row(*cells)
    print_table(table, console)
    hidden = " (with --overlap, the hidden part included)" if overlap > 0 else ""
    if legend:
        print_legend((MONEY_LEGEND if money else
                      (NODE_LEGEND + TIME_LEGEND if node else TIME_LEGEND))
                     + (MARK_LEGEND if marked else ()), hidden=hidden)
    for r in rows:
        console.print(f"[dim]{r['rank']}. {escape(r['why'])}[/dim]")
