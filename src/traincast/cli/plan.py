"""``traincast plan``: rank the hybrid-parallel configurations of a language model on a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from traincast.cli import app
from traincast.cli.common import CatalogOpt, JsonOpt, catalog_from, console, print_json
from traincast.parallel.hybrid import DTYPES


@app.command()
def plan(
    model: Annotated[str, typer.Argument(
        help="zoo:NAME (traincast.parallel models.toml: gpt3-175b, llama2-7b, llama2-70b, "
             "llama3-8b, llama3-70b, mixtral-8x7b, megatron-gpt-*) or hf:config.json.")],
    gpus: Annotated[int, typer.Option(help="GPUs N of the job (dp x tp x pp = N).")],
    node: Annotated[str, typer.Option(
        help="Node preset(s) (traincast hardware list); several separated by commas.")]
    = "dgx-a100",
    global_batch: Annotated[int | None, typer.Option(
        help="Sequences per iteration B (default: about 4M tokens).")] = None,
    seq: Annotated[int | None, typer.Option(help="Sequence length (default: the model's).")]
    = None,
    dtype: Annotated[str, typer.Option(help="Training dtype: " + "|".join(DTYPES) + ".")]
    = "bf16",
    price: Annotated[Path | None, typer.Option(
        help="TOML with usd_per_gpu_hour (one number or a table by GPU): adds cost per "
             "million tokens and a ranking by cost.")] = None,
    top: Annotated[int, typer.Option(min=1, help="How many configurations to show.")] = 5,
    network: Annotated[str | None, typer.Option(
        help="Also plan with this node network (link name or speed, e.g. eth25 or 25Gbit) "
             "and show what changes.")] = None,
    overlap: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Fraction of data-parallel communication hidden under "
                               "compute.")] = 0.0,
    catalog: CatalogOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Search every (dp, tp, pp, ep, zero, micro-batch, recompute, vp) with dp·tp·pp = N, predict
    each with the hybrid model and show the fastest that fit in GPU memory.

    Per micro-batch on the slowest stage: each matrix product's FLOPs / (peak x published GEMM
    efficiency x its tile/wave efficiency), attention products at their roofline +
    element-wise kernels' bytes / achievable memory bandwidth + tensor-parallel all-reduces +
    expert all-to-alls + pipeline point-to-point; per iteration (m + (p-1)/v) micro-batch times
    + ZeRO data-parallel traffic (one ring per network rail) + tied-embedding all-reduce +
    optimizer step (52 bytes/parameter). Memory: weights, gradients, Adam state after ZeRO
    sharding, and Korthikanti et al. activations per recompute mode. Formulas: docs/parallelism.md.
    """
    from traincast.parallel.plan import plan as run_plan

    result = run_plan(model, gpus, node, catalog=catalog_from(catalog),
                      global_batch=global_batch, seq=seq, dtype=dtype, top=top,
                      network=network, price=price, overlap=overlap)
    if json_out:
        print_json(result)
        return
    console.print(f"[bold]{result['model']}[/bold] ({result['params'] / 1e9:.1f}B parameters) "
                  f"on {gpus} GPUs of {', '.join(result['nodes'])}: global batch "
                  f"{result['global_batch']} x {result['seq']} tokens, {result['dtype']}. "
                  f"Searched {result['searched']} configurations, {result['feasible']} fit in "
                  f"memory ({result['seconds']:.2f} s).")
    _table("Fastest configurations", result["top"])
    if "by_cost" in result:
        _table("Cheapest per million tokens", result["by_cost"])
    if "network" in result:
        _table(f"With network {result['network']['nic']}", result["network"]["top"])
        if "summary" in result["network"]:
            console.print(result["network"]["summary"])
    if "note" in result:
        console.print(f"[red]{result['note']}[/red]")


def _table(title: str, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    table = Table(title=title, title_justify="left")
    for col in ("#", "configuration", "s/iter", "compute", "comm", "bubble", "mem GB",
                "tok/s/GPU", "TFLOP/s"):
        table.add_column(col, justify="left" if col == "configuration" else "right",
                         no_wrap=col == "configuration")
    cost = any("usd_per_million_tokens" in r for r in rows)
    if cost:
        table.add_column("$/M tok", justify="right")
    for r in rows:
        ts = r["time_s"]
        total = ts["total"]
        comm = ts["comm_tp"] + ts["comm_pp"] + ts["comm_ep"] + ts["comm_dp"]
        comp = ts["compute_flop"] + ts["compute_mem"]
        cells = [str(r["rank"]), f"{r['label']}" + (f" [{r['node']}]" if cost else ""),
                 f"{total:.3g}", f"{100 * comp / total:.0f}%", f"{100 * comm / total:.0f}%",
                 f"{100 * ts['bubble'] / total:.0f}%", f"{r['memory_gb']['total']:.1f}",
                 f"{r['tokens_per_s_per_gpu']:.0f}", f"{r['model_tflops_per_gpu']:.0f}"]
        if cost:
            cells.append(f"{r.get('usd_per_million_tokens', float('nan')):.3f}")
        table.add_row(*cells)
    console.print(table)
    for r in rows:
        console.print(f"[dim]{r['rank']}. {r['why']}[/dim]")
