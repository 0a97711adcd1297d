"""``traincast merge MODEL MODEL...``: layers several models can share, and the memory saved."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from traincast.cli import app
from traincast.cli.common import (
    JsonOpt,
    check_model_spec,
    console,
    err_console,
    print_json,
)
from traincast.cli.tables import Table, print_table
from traincast.units import fmt_bytes, plural


@app.command()
def merge(
    models: Annotated[list[str], typer.Argument(
        help="Two or more models: zoo:NAME, hf:CONFIG or path/file.py:FUNC, where "
             "FUNC(batch_size) returns (model, inputs) (imported: the file's code runs; a "
             "model may repeat: copies of one architecture trained for different tasks).")],
    top: Annotated[int, typer.Option(min=1, help="How many merge groups to list (totals "
                                                 "always cover every group).")] = 10,
    json_out: JsonOpt = False,
) -> None:
    """Find the layers MODELs could share (GEMEL, Padmanabhan et al., NSDI 2023) and the
    parameter memory that sharing saves.

    Two layers (modules that own parameters) are identical when type, configuration (stride,
    padding, dilation aside for convolutions) and parameter shapes and dtypes match. A merge
    group holds one layer from each of k >= 2 models (identical layers of one model are not
    merged with each other) and saves (k - 1) x the layer's parameter bytes; groups are ranked
    by bytes saved, largest first, as GEMEL's incremental search adds them. Merged memory =
    separate memory - saved. Accuracy after merging needs joint retraining, which traincast
    does not do. Formulas: docs/merge.md.
    """
    from traincast.merge import merge_specs as run_merge

    for spec in models:
        check_model_spec(spec)

    if json_out:
        print_json(run_merge(models, top=top))
        return
    with err_console.status(f"building {len(models)} models on meta ..."):
        result = run_merge(models, top=top)
    _render(result)


def _render(result: dict[str, Any]) -> None:
    models = Table(title="Models (parameter memory in each parameter's dtype)",
                   title_justify="left")
    for col in ("model", "params", "memory", "layers", "shared layers", "shared params"):
        models.add_column(col, justify="left" if col == "model" else "right")
    for m in result["models"]:
        models.add_row(Text(m["model"]), f"{m['params']:,}", fmt_bytes(m["param_bytes"]),
                       str(m["layers"]), str(m["shared_layers"]), f"{m['shared_params']:,}")
    print_table(models, console)
    console.print(Text(
        f"Separate {fmt_bytes(result['separate_bytes'])}, merged "
        f"{fmt_bytes(result['merged_bytes'])}: saves {fmt_bytes(result['saved_bytes'])} "
        f"({result['saved_fraction']:.1%}), {result['params_saved']:,} parameters, in "
        f"{plural(result['groups_total'], 'merge group')}."))
    if not result["groups"]:
        console.print(Text(f"Rule: {result['rule']}: no two models hold such a layer.",
                           style="dim"))
        return
    groups = Table(title=f"Merge groups, largest saving first (top {len(result['groups'])} of "
                         f"{result['groups_total']})", title_justify="left")
    for col in ("#", "layer", "params/copy", "copies", "saves", "cumulative", "shared layers"):
        groups.add_column(col, justify="left" if col in ("layer", "shared layers") else "right")
    for g in result["groups"]:
        groups.add_row(str(g["rank"]), Text(f"{g['type']}({g['config']})"),
                       f"{g['params_per_copy']:,}", str(g["copies"]), fmt_bytes(g["saved_bytes"]),
                       fmt_bytes(g["cumulative_saved_bytes"]),
                       Text("\n".join(f"{x['model']}: {x['layer']}" for x in g["layers"])))
    print_table(groups, console)
    console.print(Text(f"Rule: {result['rule']}.", style="dim"))
    console.print(Text(f"Accuracy: {result['note']}", style="yellow"))
