"""``traincast hardware list`` and ``traincast hardware show NAME``."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer
from rich.table import Table

from traincast.cli import hardware_app
from traincast.cli.common import CatalogOpt, JsonOpt, catalog_from, console, print_json


@hardware_app.command("list")
def list_hardware(catalog: CatalogOpt = None, json_out: JsonOpt = False) -> None:
    """List the catalog's GPUs, links and node presets."""
    cat = catalog_from(catalog)
    if json_out:
        print_json({"gpus": {k: asdict(v) for k, v in cat.gpus.items()},
                    "links": {k: asdict(v) for k, v in cat.links.items()},
                    "nodes": {k: asdict(v) for k, v in cat.nodes.items()},
                    "aliases": cat.aliases, "files": cat.files})
        return
    gpus = Table(title="GPUs (dense peaks, TFLOP/s; 0 = unsupported)", title_justify="left")
    for col in ("name", "fp32", "tf32", "fp16", "bf16", "mem GB/s", "mem GB", "default node"):
        gpus.add_column(col, justify="left" if col in ("name", "default node") else "right")
    for g in cat.gpus.values():
        gpus.add_row(g.name, f"{g.fp32_tflops:g}", f"{g.tf32_tflops:g}", f"{g.fp16_tflops:g}",
                     f"{g.bf16_tflops:g}", f"{g.mem_bw_gbs:g}", f"{g.mem_gb:g}", g.default_node)
    links = Table(title="Links (GB/s per direction)", title_justify="left")
    for col in ("name", "GB/s", "efficiency", "latency µs", "meaning"):
        links.add_column(col)
    for ln in cat.links.values():
        links.add_row(ln.name, f"{ln.bw_gbs:g}", f"{ln.efficiency:g}", f"{ln.latency_us:g}",
                      ln.label())
    nodes = Table(title="Node presets", title_justify="left")
    for col in ("name", "GPU", "GPUs", "pcie", "intra", "nic"):
        nodes.add_column(col)
    for nd in cat.nodes.values():
        nodes.add_row(nd.name, nd.gpu, str(nd.gpus), nd.pcie, nd.intra, nd.nic)
    aliases = ", ".join(f"{a} → {t}" for a, t in cat.aliases.items() if a != t)
    for t in (gpus, links, nodes):
        console.print(t)
    console.print(f"[dim]GPU aliases (as traces write them): {aliases}[/dim]")


@hardware_app.command("show")
def show(name: Annotated[str, typer.Argument(help="A GPU (or alias), link or node name.")],
         catalog: CatalogOpt = None, json_out: JsonOpt = False) -> None:
    """Show one catalog entry with its source; for a GPU also how its compute time is priced
    (the strategy, the achievable rates, and what each kernel-model input rests on)."""
    from traincast import compute

    cat = catalog_from(catalog)
    kind, entry = cat.entry(name)
    data = {"kind": kind, **asdict(entry)}
    if kind == "gpu":
        data["compute"] = compute.basis(entry, cat.compute)
    if kind == "node":
        data["resolved"] = {"gpu": asdict(cat.gpu(entry.gpu)),
                            **{r: asdict(cat.link(getattr(entry, r)))
                               for r in ("pcie", "intra", "nic")}}
    if json_out:
        print_json(data)
        return
    table = Table(title=f"{kind} {entry.name}", title_justify="left", show_header=False)
    table.add_column("key")
    table.add_column("value")
    for key, value in data.items():
        if key not in ("resolved", "compute", "sources"):
            table.add_row(key, str(value))
    console.print(table)
    if "compute" in data:
        c = data["compute"]
        console.print(f"compute priced by the [bold]{c['strategy']}[/bold] strategy: fp32 "
                      f"{c['fp32_tflops']:.4g} TFLOP/s and {c['fp32_mem_gbs']:.4g} GB/s, mixed "
                      f"precision {c['amp_tflops']:.4g} TFLOP/s (docs/model.md)")
        for key, basis in c["inputs"].items():
            console.print(f"  {key}: {basis}", markup=False, highlight=False)
