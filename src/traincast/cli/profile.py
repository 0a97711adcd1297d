"""``traincast profile MODEL``: one training step's features (``zoo list``: cli/zoo.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from traincast.bounds import BATCH_MAX
from traincast.cli import app
from traincast.cli.common import (
    JsonOpt,
    check_model_spec,
    check_output,
    console,
    note,
    print_json,
    profiling,
    within,
)
from traincast.cli.tables import Table
from traincast.errors import TraincastError
from traincast.units import fmt_bytes

PROFILE_HELP = """Profile one training step of MODEL without a GPU: its per-iteration features.

MODEL is zoo:NAME (traincast zoo list), hf:CONFIG (a transformers config: a config.json, a
cached name or a model_type such as gpt2; no weights) or path/file.py:FUNC where FUNC(batch)
returns (model, inputs). The step — forward, loss (the model's scalar output, else the sum of
its outputs), backward, optimizer step (none with --optimizer none) — runs on the meta device
(shapes only) and every kernel is captured. --seq sets the tokens per sequence of a text model
(zoo text models, hf:); --attention eager|sdpa its attention kernels (hf: models, zoo text
models). The record and the table state the batch, sequence, optimizer and attention used.
FLOPs per op are torch's formulas (one multiply-add = 2 FLOPs); bytes = inputs read plus
outputs written (views free, gathers touch only the rows indexed). Compute-bound = matrix
products, convolutions, attention; everything else is memory-bound. The fused estimate assumes
each chain of consecutive element-wise ops runs as one kernel that stores no intermediate.
--amp emulates CUDA autocast (fp16 matrix ops, fp32 reductions/norms/losses). A model that
fails on meta is run on CPU at batch 2 and 3 and extrapolated linearly (the output says so).
A file.py:FUNC MODEL is imported and FUNC is called: it runs that Python file (as the command
line asks). Rules and the memory model: docs/profile.md.
"""


def _optimizer_label(name: str) -> str:
    return "none (forward + backward only)" if name == "none" else name


def _render(rec: dict[str, Any]) -> None:
    seq = f", seq {rec['seq_len']}" if rec.get("seq_len") else ""
    attention = f", {rec['attention']} attention" if rec.get("attention") else ""
    title = (f"{rec['model']}: batch {rec['batch_size']}{seq}, {rec['dtype']}"
             f"{' (autocast)' if rec['amp'] else ''}{attention}, optimizer "
             f"{_optimizer_label(rec['optimizer'])}")
    table = Table(title=Text(title), title_justify="left")  # the model name is not markup
    table.add_column("feature")
    table.add_column("value", justify="right")
    rows = [
        ("batch", f"{rec['batch_size']:,}"),
        ("sequence length (tokens)", f"{rec['seq_len']:,}" if rec.get("seq_len") else "-"),
        ("attention", rec.get("attention") or "-"),
        ("optimizer", _optimizer_label(rec["optimizer"])),
        ("parameters (dense + embedding)",
         f"{rec['params']:,} ({rec['params_dense']:,} + {rec['params_embedding']:,})"),
        ("forward FLOPs", f"{rec['flops_forward']:.4g}"),
        ("FLOPs of compute-bound ops", f"{rec['flops_compute_bound']:.4g}"),
        ("FLOPs of all ops (element-wise: 0)", f"{rec['flops_total']:.4g}"),
        ("memory-bound bytes", fmt_bytes(rec["bytes_memory_bound"])),
        ("memory-bound bytes, element-wise fused", fmt_bytes(rec["bytes_memory_bound_fused"])),
        ("weight bytes (dense gradients)", fmt_bytes(rec["weight_bytes"])),
        ("embedding bytes touched", fmt_bytes(rec["embedding_bytes_touched"])),
        ("embedding bytes all-reduced", fmt_bytes(rec.get("embedding_allreduce_bytes",
                                                          rec["embedding_bytes_touched"]))),
        ("input bytes", fmt_bytes(rec["input_bytes"])),
    ]
    rows += [(f"memory: {k}", fmt_bytes(v)) for k, v in rec["memory_bytes"].items()]
    rows.append(("captured ops", f"{rec['n_ops']:,}"))
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)
    if rec.get("ops"):
        _render_top_ops(rec["ops"])
    for said in rec.get("notes", []):
        console.print(f"[yellow]note:[/yellow] {said}")


def _render_top_ops(ops: list[dict[str, Any]], top: int = 15) -> None:
    groups: dict[tuple[str, str, str], list[float]] = {}
    for row in ops:
        key = (row["op"], row["phase"], row["bound"])
        acc = groups.setdefault(key, [0, 0.0, 0.0])
        acc[0] += 1
        acc[1] += row["flops"]
        acc[2] += row["bytes_read"] + row["bytes_written"]
    table = Table(title=f"Top ops by bytes moved ({len(ops):,} ops)", title_justify="left")
    for col in ("op", "phase", "bound", "calls", "FLOPs", "bytes"):
        table.add_column(col, justify="left" if col in ("op", "phase", "bound") else "right")
    for (op, phase, bound), (n, flops, nbytes) in sorted(groups.items(),
                                                         key=lambda kv: -kv[1][2])[:top]:
        table.add_row(op, phase, bound, f"{n:,}", f"{flops:.3g}", fmt_bytes(nbytes))
    console.print(table)


@app.command(help=PROFILE_HELP)
def profile(
    model: Annotated[str, typer.Argument(help="zoo:NAME, hf:CONFIG or path/file.py:FUNC.")],
    batch: Annotated[int | None, typer.Option(
        callback=within(1, BATCH_MAX), help=f"Batch size, 1 to {BATCH_MAX:,.0f} (default: the "
        "model's own).")] = None,
    amp: Annotated[bool, typer.Option(
        "--amp", help="Profile under (emulated) CUDA autocast, fp16.")] = False,
    optimizer: Annotated[str, typer.Option(
        help="adam, sgd (momentum 0.9) or none (forward + backward only, no optimizer step); "
             "sparse tables use SparseAdam / plain SGD.")] = "adam",
    seq: Annotated[int | None, typer.Option(
        "--seq", callback=within(1), help="Tokens per sequence, at least 1, of a text model "
        "(zoo text models, hf:); default the model's own. An error for other models.")] = None,
    attention: Annotated[str | None, typer.Option(
        "--attention", help="eager (matmul + softmax + matmul over the b·heads·s² scores) or "
        "sdpa (one fused kernel, torch's scaled dot product attention): transformers' "
        "attn_implementation of an hf: model, or a zoo text model's attention; default the "
        "model's own.")] = None,
    ops: Annotated[bool | None, typer.Option(
        "--ops/--no-ops", help="Include the per-op table (default: with -o FILE, so that "
        "predict --features FILE prices op by op, as predict --model does; --no-ops writes "
        "aggregate features only).")] = None,
    json_out: JsonOpt = False,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Write the record: JSON, or Parquet (the per-op table, record "
        "in its metadata) when FILE ends in .parquet.")] = None,
) -> None:
    check_output(output)  # before the profile
    check_model_spec(model)
    from traincast.features.io import write_features
    from traincast.features.profile import profile_model  # checks --optimizer, --attention

    parquet = output is not None and output.suffix.lower() in (".parquet", ".pq")
    if parquet and ops is False:
        raise TraincastError("--no-ops with a Parquet FILE: the Parquet record is the per-op "
                             "table", hint="write FILE.json for aggregate features only")
    with_ops = parquet or (output is not None if ops is None else ops)
    kwargs: dict[str, Any] = {"batch_size": batch, "amp": amp, "optimizer": optimizer,
                              "ops": with_ops, "seq_len": seq, "attention": attention}
    with profiling(model, json_out):
        rec = profile_model(model, **kwargs)
    if output is not None:
        write_features(rec, output)
        if json_out:  # the JSON went to the file: one line here, not the record again
            print_json({"wrote": str(output)})
            return
        note(f"[dim]wrote {escape(str(output))}[/dim]")
    if json_out:
        print_json(rec)
    else:
        _render(rec)
