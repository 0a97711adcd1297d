"""``traincast predict``: one job's iteration time and breakdown."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from traincast.arch import ARCHITECTURES
from traincast.cli import app
from traincast.cli.common import (
    CatalogOpt,
    JsonOpt,
    catalog_from,
    console,
    fmt_seconds,
    parse_number,
    print_json,
)
from traincast.errors import TraincastError
from traincast.features.io import load_features
from traincast.model import COMPONENT_LABEL, COMPONENTS
from traincast.predict import predict as predict_job

ARCH_HELP = ("Training architecture: " + ", ".join(ARCHITECTURES) + ". T_comm formulas: "
             "docs/model.md.")


def features_from_flags(features: Path | None, model: str | None, batch: int | None,
                        flops: str | None, mem_bytes: str | None, weight_bytes: str | None,
                        embedding_bytes: str | None, input_bytes: str | None,
                        amp: bool) -> dict[str, Any]:
    """The job's features from exactly one of --features, --model, or --flops/--mem-bytes/..."""
    given = [x is not None for x in (features, model, flops)]
    if sum(given) != 1:
        raise TraincastError("give exactly one of --features FILE, --model MODEL, or "
                             "--flops F --mem-bytes B --weight-bytes W")
    if features is not None:
        return load_features(features)
    if model is not None:
        from traincast.features.profile import profile_model  # needs torch: imported on demand

        return profile_model(model, batch_size=batch, amp=amp)
    if mem_bytes is None or weight_bytes is None:
        raise TraincastError("--flops needs --mem-bytes and --weight-bytes too")
    return {"flops_compute_bound": parse_number(flops, "--flops"),
            "bytes_memory_bound": parse_number(mem_bytes, "--mem-bytes"),
            "weight_bytes": parse_number(weight_bytes, "--weight-bytes"),
            "embedding_bytes_touched": parse_number(embedding_bytes or "0", "--embedding-bytes"),
            "input_bytes": parse_number(input_bytes or "0", "--input-bytes")}


@app.command()
def predict(
    arch: Annotated[str, typer.Option("--arch", help=ARCH_HELP)] = "1w1g",
    features: Annotated[Path | None, typer.Option(help="Features JSON (traincast profile -o).")]
    = None,
    model: Annotated[str | None, typer.Option(help="zoo:NAME, hf:CONFIG or file.py:FUNC.")]
    = None,
    batch: Annotated[int | None, typer.Option(help="Batch size for --model.")] = None,
    flops: Annotated[str | None, typer.Option(help="FLOPs of compute-bound ops per iteration.")]
    = None,
    mem_bytes: Annotated[str | None, typer.Option(
        help="Bytes read+written by memory-bound ops per iteration.")] = None,
    weight_bytes: Annotated[str | None, typer.Option(
        help="Dense parameter bytes (= gradient bytes exchanged).")] = None,
    embedding_bytes: Annotated[str | None, typer.Option(
        help="Embedding bytes touched per iteration.")] = None,
    input_bytes: Annotated[str | None, typer.Option(
        help="Input batch bytes copied to the GPU per iteration.")] = None,
    gpus: Annotated[int, typer.Option(help="GPUs of the job (n).")] = 1,
    gpus_per_node: Annotated[int | None, typer.Option(
        help="GPUs per node used by the job (g); default min(n, node GPUs).")] = None,
    workers: Annotated[int | None, typer.Option(help="ps-worker: workers m (1 GPU each).")]
    = None,
    ps: Annotated[int | None, typer.Option(help="ps-worker: parameter servers p.")] = None,
    node: Annotated[str | None, typer.Option(help="Node preset (traincast hardware list).")]
    = None,
    gpu: Annotated[str | None, typer.Option(help="GPU, overriding the node's.")] = None,
    nic: Annotated[str | None, typer.Option(help="NIC link name or speed (25Gbit).")] = None,
    intra: Annotated[str | None, typer.Option(help="GPU-GPU link inside the node.")] = None,
    pcie: Annotated[str | None, typer.Option(help="GPU-host link.")] = None,
    catalog: CatalogOpt = None,
    overlap: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Fraction f of communication hidden under compute.")] = 0.0,
    amp: Annotated[bool, typer.Option(
        help="Mixed precision: FLOP-bound work at the fp16 (else bf16) matrix peak.")] = False,
    hierarchical: Annotated[bool, typer.Option(
        help="Hierarchical all-reduce (intra-node ring, then across nodes).")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Predict one training iteration's time and its breakdown.

    T_total = T_data + T_comp_flop + T_comp_mem + T_comm (overlap f: T_data + max(T_comp, f
    T_comm) + (1-f) T_comm), with T_data = input_bytes / bw(pcie), T_comp_flop = FLOPs / (peak x
    flop_efficiency), T_comp_mem = bytes / (mem_bw x mem_efficiency); T_comm by architecture.
    """
    cat = catalog_from(catalog)
    feats = features_from_flags(features, model, batch, flops, mem_bytes, weight_bytes,
                                embedding_bytes, input_bytes, amp)
    result = predict_job(feats, arch=arch, gpus=gpus, gpus_per_node=gpus_per_node,
                         workers=workers, ps=ps, node=node, gpu=gpu, nic=nic, intra=intra,
                         pcie=pcie, catalog=cat, overlap=overlap,
                         amp=amp or bool(feats.get("amp", False)), hierarchical=hierarchical)
    if json_out:
        print_json(result)
        return
    render_prediction(result)


def render_prediction(result: dict[str, Any]) -> None:
    """A rich table of one prediction: components in seconds and percent, then the bottleneck."""
    job, hw = result["job"], result["hardware"]
    title = (f"{job['arch']} ({job['arch_label']}), {job['gpus']} GPU(s) on {job['nodes']} "
             f"node(s) of {hw['node']} — {hw['gpu']}")
    table = Table(title=title, title_justify="left")
    table.add_column("component")
    table.add_column("time", justify="right")
    table.add_column("share", justify="right")
    for c in COMPONENTS:
        table.add_row(COMPONENT_LABEL[c], fmt_seconds(result["time_s"][c]),
                      f"{100 * (result['share'][c] or 0):.1f}%")
    table.add_row("[bold]total per iteration[/bold]",
                  f"[bold]{fmt_seconds(result['time_s']['total'])}[/bold]", "100%")
    console.print(table)
    console.print(f"Bottleneck: [bold]{result['bottleneck_label']}[/bold]. "
                  f"Predicted GPU utilization {100 * result['gpu_util']:.0f}%.")
    links = ", ".join(f"{r} {hw[r]} ({hw[r + '_bw_gbs']:.3g} GB/s)" for r in ("pcie", "intra",
                                                                            "nic"))
    console.print(f"[dim]GPU peak {hw['peak_tflops']:g} TFLOP/s x {hw['flop_efficiency']:g}, "
                  f"memory {hw['mem_bw_gbs']:g} GB/s x {hw['mem_efficiency']:g}; {links}; "
                  f"overlap {job['overlap']:g}.[/dim]")
