"""``traincast zoo list``: every ``zoo:`` name of the model registry and what it can do."""

from __future__ import annotations

from typing import Any

import typer

from traincast.cli import app
from traincast.cli.common import JsonOpt, console, print_json
from traincast.cli.tables import Table, print_table
from traincast.units import fmt_sig
from traincast.zoo.llm import transformers_family

zoo_app = typer.Typer(no_args_is_help=True, help="The reference model zoo (one registry).")
app.add_typer(zoo_app, name="zoo")

_USES = {"torch": "profile", "llm": "plan"}


def zoo_rows() -> list[dict[str, Any]]:
    """One row per registry model: capabilities, aliases, parameters and FLOPs per sample.

    Models with a torch module take their numbers from the shipped profiles (forward and a full
    Adam training step at the default batch); models with only an LLM config show its formula
    count and the forward FLOPs of one sequence of the config's ``s`` tokens as the profile
    counts them: ``(2 P_flop + 4 l a d s) s``, 2 FLOPs per matrix parameter per token plus the
    attention products ``Q K^T`` and ``P V`` over the full ``s x s`` square."""
    from traincast.zoo import MODELS
    from traincast.zoo.profiles import load_profiles

    shipped = load_profiles()["models"]
    rows = []
    for name, entry in MODELS.items():
        rec, cfg = shipped.get(name, {}), entry.llm
        row = {"name": name, "aliases": list(entry.aliases), "family": entry.family,
               "capabilities": list(entry.capabilities), "description": entry.description,
               "params": rec.get("params", cfg.params if cfg else None),
               "published_params": entry.published_params or None,
               "default_batch": entry.default_batch or None,
               "input_shape": entry.input_shape or (f"{cfg.seq} tokens" if cfg else ""),
               "flops_forward_per_sample": rec.get("flops_forward_per_sample"),
               "flops_train_per_sample": rec.get("flops_train_per_sample"),
               "meta_only": entry.meta_only, "source": entry.source}
        if cfg is not None and not rec:
            row["flops_forward_per_sample"] = (2 * cfg.params_flop
                                               + 4 * cfg.layers * cfg.q_dim * cfg.seq) * cfg.seq
        if entry.config_only and cfg is not None and transformers_family(cfg):
            row["profiled_via"] = "transformers"  # profile builds it from the config
        rows.append(row)
    return rows


def hf_rows() -> list[dict[str, Any]]:
    """The Hub checkpoints ``hf:NAME`` builds offline (``zoo/hub.toml``)."""
    from traincast.zoo.hub import known_configs

    return [{"name": name, "aliases": list(entry.get("aliases", ())),
             "model_type": entry.get("model_type", ""), "zoo": entry.get("zoo", ""),
             "params": entry.get("params"), "source": entry["source"]}
            for name, entry in known_configs().items()]


@zoo_app.command("list")
def zoo_list(json_out: JsonOpt = False,
             hf: bool = typer.Option(False, "--hf", help="List the Hugging Face Hub "
                                     "checkpoints hf:NAME builds without a network instead.")
             ) -> None:
    """List every zoo:NAME with its aliases, what it can do, parameters and FLOPs per sample.

    Capabilities: profile = a torch.nn module (profile, predict --model, merge, validate);
    plan = a decoder-only LLM config (plan, predict --arch hybrid; profile, predict --model and
    merge build it through transformers from that config). FLOPs per sample come from the shipped
    profiles (forward, and a full training step with Adam, at the default batch); for
    config-only models, the forward of one sequence, (2 P_flop + 4 l a d s) s: 2 FLOPs per
    matrix parameter per token and the attention products over the full s x s square, as a
    profile counts them.
    With --hf: the Hub checkpoints of hf:NAME that need no network, each with its config.json.
    """
    if hf:
        rows = hf_rows()
        if json_out:
            print_json({"checkpoints": rows})
            return
        table = Table(title="hf:NAME checkpoints built offline (config fields shipped)",
                      title_justify="left")
        for col in ("name", "model_type / zoo", "aliases"):  # names whole: they are copied
            table.add_column(col, no_wrap=col != "aliases")
        for r in rows:
            table.add_row(r["name"], r["model_type"] or f"zoo:{r['zoo']}",
                          ", ".join(r["aliases"]) or "-")
        print_table(table, console)
        return
    rows = zoo_rows()
    if json_out:
        print_json({"models": rows})
        return
    table = Table(title="Model zoo (zoo:NAME); FLOPs per sample at the default batch "
                        "(family, input and source: --json)", title_justify="left")
    for col in ("name", "can", "params", "batch", "fwd GFLOP", "train GFLOP", "aliases"):
        table.add_column(col, no_wrap=col in ("name", "can", "params"),
                         justify="left" if col in ("name", "can", "aliases") else "right")
    for r in rows:
        fwd, train = r.get("flops_forward_per_sample"), r.get("flops_train_per_sample")
        can = "+".join(_USES[c] for c in r["capabilities"])
        if r["capabilities"] == ["llm"] and r.get("profiled_via") == "transformers":
            can += " (+profile)"
        table.add_row(r["name"], can,
                      _millions(r["params"]), str(r["default_batch"] or "-"),
                      fmt_sig(fwd / 1e9, 4) if fwd else "-",
                      fmt_sig(train / 1e9, 4) if train else "-",
                      ", ".join(r["aliases"]) or "-")
    print_table(table, console)
    console.print("can: profile = torch.nn module (profile, predict --model, merge, validate); "
                  "plan = LLM config (plan, predict --arch hybrid; +profile: profile, predict "
                  "--model and merge build it through transformers). fwd GFLOP: per sample "
                  "(per sequence for config-only models: 2 FLOPs per matrix parameter per "
                  "token plus the attention over the full s x s square); train GFLOP: a full "
                  "step with Adam from the shipped profile, - where none is shipped.",
                  markup=False, style="dim")


def _millions(n: int | None) -> str:
    if not n:
        return "-"
    return f"{n / 1e9:,.1f}B" if n >= 1e9 else f"{n / 1e6:,.1f}M"
