"""``traincast hardware list`` and ``traincast hardware show NAME``."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Annotated, Any

import typer
from rich import box
from rich.text import Text

from traincast import kernels
from traincast.cli import hardware_app
from traincast.cli.common import (
    CatalogOpt,
    JsonOpt,
    catalog_from,
    console,
    memory_rates_text,
    print_json,
    trust_text,
)
from traincast.cli.tables import Table
from traincast.hardware.catalog import DTYPES, FIELD_GROUPS, FIELD_UNITS


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
    fold = {"overflow": "fold"}  # a cell too long wraps onto the next line, never ends in "…"
    gpus = Table(title="GPUs: dense peaks (TFLOP/s; 0 = unsupported), memory",
                 title_justify="left", box=None, pad_edge=False)
    for col in ("name", "fp32", "tf32", "fp16", "bf16", "fp8", "GB/s", "GB"):
        gpus.add_column(col, justify="left" if col == "name" else "right", **fold)
    for g in cat.gpus.values():
        gpus.add_row(g.name, *(f"{getattr(g, f'{d}_tflops'):g}" for d in DTYPES),
                     f"{g.mem_bw_gbs:g}", f"{g.mem_gb:g}")
    chips = Table(title="GPUs: chip and default node", title_justify="left",
                  box=None, pad_edge=False)
    for col in ("name", "SMs", "cores/SM", "boost MHz", "L2 MB", "W", "default node"):
        chips.add_column(col, justify="left" if col in ("name", "default node") else "right",
                         **fold)
    for g in cat.gpus.values():
        chips.add_row(g.name, *(f"{v:g}" if v else "" for v in (
            g.sms, g.fp32_cores_per_sm, g.boost_clock_mhz, g.l2_mb, g.power_w)), g.default_node)
    links = Table(title="Links (GB/s per direction; eff. = efficiency)", title_justify="left",
                  box=None, pad_edge=False)
    for col in ("name", "GB/s", "eff.", "latency µs", "meaning"):
        links.add_column(col, justify="left" if col in ("name", "meaning") else "right", **fold)
    for ln in cat.links.values():
        label = ln.label()
        links.add_row(ln.name, f"{ln.bw_gbs:g}", f"{ln.efficiency:g}", f"{ln.latency_us:g}",
                      "" if ln.name in label else label)
    nodes = Table(title="Node presets (rails = nic ports)",
                  title_justify="left", box=None, pad_edge=False, leading=1)
    for col in ("name", "GPU", "GPUs", "rails", "pcie / intra / nic"):
        nodes.add_column(col, justify="right" if col in ("GPUs", "rails") else "left", **fold)
    for nd in cat.nodes.values():  # the three links one per line: the table fits 80 columns
        nodes.add_row(nd.name, nd.gpu, str(nd.gpus), str(nd.nics),
                      f"{nd.pcie}\n{nd.intra}\n{nd.nic}")
    aliases = ", ".join(f"{a} → {t}" for a, t in cat.aliases.items() if a != t)
    for t in (gpus, chips, links, nodes):
        console.print(t)
    console.print(f"[dim]GPU aliases (as traces write them): {aliases}[/dim]")


def _show_value(key: str, value: Any) -> str:
    unit = FIELD_UNITS.get(key, "")
    if isinstance(value, dict):
        text = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                         for k, v in value.items())
    elif isinstance(value, tuple):
        text = f"{len(value)} points: " + ", ".join(f"{v:g}" for v in value)
    elif key == "compute_capability":
        text = f"{value:.1f}"  # a version, 9.0: major.minor
    elif isinstance(value, bool):  # as the catalog file writes it
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    return f"{text} {unit}".rstrip()


VALUE_WIDTH = 32
"""The widest an entry's value column grows at 80 columns (a third of a wider terminal), so
that a long value (an entry's own source) leaves its sources' column room."""


def _entry_table(title: str, rows: list[tuple[str, Any]], sources: dict[str, str]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False, box=box.SIMPLE,
                  pad_edge=False)
    table.add_column("key", style="bold", no_wrap=True)  # a field name: one word, whole
    table.add_column("value", overflow="fold",  # the sources the rest
                     max_width=max(VALUE_WIDTH, console.width // 3))
    table.add_column("source", style="dim", overflow="fold")
    for key, value in rows:
        cited = sources.get(key, "the entry's source" if key in FIELD_GROUPS["datasheet"] else "")
        table.add_row(key, _show_value(key, value), cited)
    return table


def _print_entry(kind: str, entry: Any, basis: dict[str, Any] | None = None,
                 strategy: str = "kernel") -> None:
    """The set fields of one entry; a GPU's grouped as datasheet / fitted / measured, and
    ``basis`` (``kernels.kernel_model_basis``) after its fitted kernel parameters; under
    another ``strategy`` than ``kernel`` one line says the kernel model does not price it."""
    sources: dict[str, str] = getattr(entry, "sources", {}) or {}
    about = [(k, v) for k in ("name", "vendor", "description", "default_node", "source")
             if hasattr(entry, k)  # unset fields (0, "") left out; a CPU has no GPU vendor
             and (v := kernels.vendor_of(entry) if k == "vendor" else getattr(entry, k))]
    if kind != "gpu":
        about += [(f.name, getattr(entry, f.name)) for f in fields(entry)
                  if f.name not in ("name", "description", "source", "sources")
                  and getattr(entry, f.name)]
        console.print(_entry_table(f"{kind} {entry.name}", about, sources))
        return
    console.print(_entry_table(f"gpu {entry.name}", about, {}))
    for group, keys in FIELD_GROUPS.items():
        rows = [(k, getattr(entry, k)) for k in keys if getattr(entry, k)
                and k != "kernel"]  # the kernel parameters get their own table, one per row
        if group == "measured":  # 1.0 is the unset efficiency
            rows = [(k, v) for k, v in rows if not (k.endswith("_efficiency") and v == 1.0)]
        if rows:
            console.print(_entry_table(group, rows, sources))
        if group == "fitted" and entry.kernel and strategy != "kernel":
            console.print(Text(f"fitted: the measured-kernel model does not price {entry.name} "
                               f"(the {strategy} strategy does, below); traincast hardware "
                               "show of a GPU it prices lists its parameters", style="dim"))
        elif group == "fitted" and entry.kernel:
            console.print(_kernel_table(entry.kernel, sources.get("kernel", "")))
            if basis:
                console.print(_figures_table(entry, basis))
                console.print(trust_text(entry.name, basis), highlight=False, markup=False)


def _kernel_table(params: dict[str, float], source: str) -> Table:
    """The fitted kernel-model parameters, one per row with what each is; the dispatch ratios
    on one row."""
    table = Table(title="fitted: measured-kernel model (docs/model.md)", title_justify="left",
                  caption=source, caption_justify="left", box=box.SIMPLE, pad_edge=False)
    for col in ("parameter", "value", "what it is"):
        table.add_column(col, overflow="fold", style="bold" if col == "parameter" else None)
    ratios = kernels.dispatch_table(params)
    for key, value in params.items():
        if not key.startswith("dispatch_"):
            shown = "0" if abs(value) < 1e-9 else f"{value:.4g}"  # a fitted 3.6e-13 µs is 0
            table.add_row(key, shown, kernels.PARAM_MEANINGS.get(key, ""))
    if ratios:
        table.add_row("dispatch_<kind>", "r_x", "the host's time to issue an op of kind x, in "
                      "floor_us: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    return table


def _figures_table(gpu: Any, fig: dict[str, Any]) -> Table:
    """What the measured-kernel model takes for this GPU (``kernels.simt_figures``), each
    figure with its formula on the line below."""
    table = Table(title=f"what the measured-kernel model takes for {gpu.name} (fp32 products "
                        "and memory-bound kernels)", title_justify="left",
                  show_header=False, box=box.SIMPLE, pad_edge=False)
    table.add_column("quantity", style="bold", overflow="fold")
    table.add_column("value and formula", overflow="fold")

    def row(name: str, value: str, formula: str) -> None:
        table.add_row(name, Text.assemble(f"{value}\n", (formula, "dim")))

    p = fig["power_w_per_lane_ghz_nm"]
    row("power per lane", "unknown: taken as unthrottled" if p is None else
        f"p = {p:.4g} W per lane-GHz-nm", "p = power_w / (sms · fp32_cores_per_sm · boost GHz · "
                                          "process_nm)")
    row("sustained clock", f"{fig['clock_fraction']:.3g} × {gpu.boost_clock_mhz:g} = "
                           f"{fig['sustained_clock_mhz']:.0f} MHz",
        f"f = boost · c, c = min(1, p / p0), p0 = power_ref = "
        f"{fig['power_ref_w_per_lane_ghz_nm']:.4g}")
    row("issue slots", f"h = {fig['issue_slots']:.3g}; e_T " + ", ".join(
        f"{t} {e:.3g}" for t, e in fig["tile_efficiency"].items()),
        "h = 32 / (fp32_cores_per_sm / sm_partitions), "
        "e_T = h / max(h, 1 + c_issue (T_m + T_n) / (T_m T_n))")
    share = f" ({fig['peak_fraction']:.2f} of {gpu.fp32_tflops:g})" \
        if fig["peak_fraction"] else ""
    row("fp32 SIMT rate", f"R = {fig['simt_tflops']:.3g} TFLOP/s{share}; 128x128 tile "
                          f"{fig['large_tile_tflops']:.1f}",
        "R = 2 · sms · fp32_cores_per_sm · f · simt_efficiency; a tile R · e_T")
    if fig["gemm_fraction"] is not None:
        row("large product", f"eta = {fig['gemm_fraction']:.3f}: "
                             f"{fig['gemm_fraction'] * gpu.fp32_tflops:.3g} TFLOP/s",
            "eta = min(1, R · max e_T / (rho · fp32 peak)): aggregate fp32 FLOPs and fp32 "
            "convolutions on CUDA cores, unless the entry gives its own fp32 fraction")
    if fig["memory_gbs"]:
        row("memory-bound", memory_rates_text(fig), "mem_bw_gbs · f_family")
    kinds = {k: fig["op_floors_us"][k] for k in ("add", "ln", "bmm", "linear")
             if k in fig["op_floors_us"]}
    row("host floor", f"d = {fig['floor_us']:.1f} µs; " + ", ".join(
        f"{k} {v:.1f}" for k, v in kinds.items()), "d · r_x per op kind x, µs")
    return table


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
        from traincast.parallel.validation import shipped_gpu_checks

        data["vendor"] = kernels.vendor_of(entry)  # null for a CPU calibration
        data["compute"] = compute.basis(entry, cat.compute)
        data["kernel_model"] = kernels.kernel_model_basis(entry, cat.kernel_model) \
            if data["compute"]["strategy"] == "kernel" else None
        data["published_checks"] = shipped_gpu_checks(entry.name)
    if kind == "node":
        data["resolved"] = {"gpu": asdict(cat.gpu(entry.gpu)),
                            **{r: asdict(cat.link(getattr(entry, r)))
                               for r in ("pcie", "intra", "nic")}}
    if json_out:
        print_json(data)
        return
    _print_entry(kind, entry, data.get("kernel_model"),
                 data["compute"]["strategy"] if "compute" in data else "kernel")
    if "compute" in data:
        c = data["compute"]
        per_op = data.get("kernel_model")
        console.print(f"compute priced by the [bold]{c['strategy']}[/bold] strategy: fp32 "
                      f"{c['fp32_tflops']:.4g} TFLOP/s and {c['fp32_mem_gbs']:.4g} GB/s, mixed "
                      f"precision {c['amp_tflops']:.4g} TFLOP/s"
                      + (" for a job's aggregate features; a per-op profile's fp32 products and "
                         "memory-bound kernels by the measured-kernel model above"
                         if per_op else "") + " (docs/model.md)")
        for key, basis in c["inputs"].items():
            console.print(f"  {key}: {basis}", markup=False, highlight=False)
    if kind == "gpu":
        _print_published_checks(entry.name, data["published_checks"])
    if kind != "gpu" and name in cat.gpus:  # calibrate's node and GPU are both "local"
        console.print(f"{name} is a GPU too: traincast hardware show gpu.{name}", style="dim",
                      highlight=False, markup=False)


def _print_published_checks(gpu: str, checks: list[dict[str, Any]]) -> None:
    """How the shipped hybrid model did on the shipped published training runs on this GPU
    (``parallel.validation.published_checks``), the tables in one paragraph; or that none ran
    on it."""
    whole = ("Whole models priced op by op (predict) against published throughputs: "
             "docs/validation.md, \"Published throughputs\".")
    if not checks:
        console.print(f"No shipped published LLM training run used {gpu}. {whole}",
                      markup=False, highlight=False, style="dim")
        return
    said = "; ".join(
        f"{c['title']} ({c['rows']} {'row' if c['rows'] == 1 else 'rows'}, "
        f"{', '.join(c['dtypes'])}, in {c['compared_in']}): median |error| "
        f"{100 * c['median_abs_error']:.1f}%, median {100 * c['median_error']:+.1f}%, worst "
        f"{100 * c['max_abs_error']:.1f}%, forecast faster than published in {c['too_fast']} "
        f"of {c['rows']}" for c in checks)
    console.print(f"Published training runs on {gpu}, as the shipped hybrid model (predict "
                  f"--arch hybrid, plan) prices them (traincast validate --published; docs/"
                  f"validation.md; + = forecast faster): {said}. {whole}", markup=False,
                  highlight=False, style="dim")

