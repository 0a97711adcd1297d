"""Published large-scale training measurements against the hybrid model.

One comparison, ``compare_table(FILE)``, runs over a table file of this package: each row is a
published run (model, tensor-parallel ``t``, pipeline ``p``, data-parallel ``d``, GPUs, global
batch, achieved TFLOP/s per GPU or MFU) with the settings it ran with; table-level keys are the
defaults of its rows, and a row may override any of them (``ROW_KEYS``; ``attention``:
``materialized``, the default, or ``flash``, hybrid.ATTENTION; ``framework``: a recipe of
``parallel/recipes.toml`` whose knobs apply where neither the row nor the table sets them,
``megatron-2021`` by default); ``[gemm_fraction.GPU]`` (``DTYPE = fraction``, ``source``) sets
the GEMM rate of the library the table's runs used on that GPU, from a per-op measurement
(``stack_catalog``). Each row is predicted
with ``hybrid.evaluate`` on its node and compared with the published per-GPU rate::

    rel_error = predicted / published - 1

``metric = "hardware"`` compares the executed FLOPs (recomputation included: Narayanan et al.'s
``96 B s l h^2 (1 + s/6h + V/16lh)`` with full recomputation) over the predicted time;
``metric = "model"`` the model FLOPs (``6 P + 12 l a d s`` per token, no recomputation: MFU).
A row gives ``tflops_per_gpu`` or ``mfu_percent`` (then published = MFU x the GPU's dense peak
of the dtype, from the catalog).

Shipped tables:

* ``megatron_2021.toml`` (``megatron_2021()``): Narayanan et al. (SC 2021) Table 1. The paper
  ran the interleaved schedule with an unpublished number of chunks; each row is predicted with
  the plain 1F1B schedule (``vp = 1``) and, where the row's shape allows one, with the smallest
  interleaving ``vp > 1`` (``rel_error_interleaved``).
* ``published_llm.toml`` (``published_llm()``): BLOOM-176B, OPT-175B, Megatron-Turing NLG 530B
  and Korthikanti et al. (2022), each row with its own source.
* ``llm_foundry.toml`` (``llm_foundry()``): the 201 rows of MosaicML llm-foundry's MPT throughput
  tables (FSDP on H100 bf16 and fp8, A100 80 GB and 40 GB); a row with ``tokens_per_gpu_s``
  also gets ``rel_error_tokens`` (predicted / published tokens per second per GPU - 1, free of
  FLOP-counting conventions).
* ``nemo.toml`` (``nemo()``): NVIDIA NeMo's published FP8 pre-training throughputs
  (Megatron-Core, containers 24.07, 25.11 and 26.02) on DGX H100 and DGX B200, GPT-3 5B to
  Llama 3.1 405B, 8 to 1,024 GPUs, with context parallelism (``cp``); compared in tokens per
  second per GPU (their rows give ``tokens_per_gpu_s`` alone: ``rel_error`` is then
  ``rel_error_tokens``, since NeMo's FLOP count is not traincast's).

A row's ``seq`` is the sequence the run trained at, and the model is sized to it (a learned
position table of ``seq`` rows).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import math
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from traincast.bounds import PEAK_TFLOPS_MAX
from traincast.errors import TraincastError, UnknownNameError
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.parallel import strategies as st
from traincast.parallel.hybrid import (
    ATTENTION,
    DEFAULT_FRAMEWORK,
    RECIPE_KNOBS,
    SHAPE_ERRORS,
    HybridHardware,
    evaluate,
    hybrid_hardware,
    model_flops_per_token,
    package_toml,
    priced_knobs,
    recipes,
    recompute_mode,
    resolve_knobs,
)
from traincast.parallel.models import ModelConfig, config_from_table, get_model

TARGET_REL_ERROR = 0.15
TABLES: tuple[str, ...] = ("megatron_2021.toml", "published_llm.toml", "llm_foundry.toml",
                           "nemo.toml")

# settings a table gives its rows (a row may override each); value: default when absent
SETTINGS: dict[str, Any] = {
    "node": "dgx-a100", "dtype": "fp16", "recompute": "full", "sp": False,
    "micro_batch": 1, "vp": 1, "seq": None,  # zero, grad_accum_fused: RECIPE_KNOBS
    "metric": "hardware", "nic": None, "rails": None, "interleaved": False,
    "uneven_stages": False, "framework": DEFAULT_FRAMEWORK, **RECIPE_KNOBS,
}
# published columns and notes a row may carry besides the settings
ROW_KEYS: frozenset[str] = frozenset(SETTINGS) | {
    "model", "config", "t", "p", "cp", "d", "gpus", "batch", "shard", "tflops_per_gpu",
    "mfu_percent",
    "hfu_percent", "percent_peak", "aggregate_pflops", "iteration_s", "source", "note", "run",
    "tokens_per_gpu_s", "grad_accum", "precision", "mp_mode", "num_params", "container",
    "tflops_per_gpu_as_published"}
TABLE_KEYS: frozenset[str] = frozenset(SETTINGS) | {"source", "note", "row", "gemm_fraction"}


def table_rows(name: str | Path) -> dict[str, Any]:
    """A table as written, ``{"source", <settings>, "row": [...]}``: a shipped one by name
    (``TABLES``) or a TOML file of the same form."""
    if str(name) in TABLES:
        return copy.deepcopy(package_toml(str(name)))  # the caller may change its copy
    path = Path(name)
    if not path.is_file():
        raise TraincastError(f"unknown published table {str(name)!r}",
                             hint=f"shipped tables: {', '.join(TABLES)}; or a TOML file path")
    try:
        table = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise TraincastError(f"{path}: not valid TOML: {exc}") from None
    if not isinstance(table.get("row"), list) or not table["row"]:
        raise TraincastError(f"{path}: no [[row]] tables", hint="one [[row]] per published run")
    return table


@functools.cache
def best_published_mfu(dtype: str = "") -> tuple[float, str]:
    """The highest model FLOPs utilization (MFU, model FLOP/s over the dense peak of the run's
    precision, in %) of the shipped published runs (``TABLES``) in precision ``dtype`` (a
    row's own, else its table's; every row when none is in it), and that row (its run, its
    table): a forecast above it is more than any published run of its precision reached,
    worth saying under it (the label says so where no run of ``dtype`` is checked and the best
    of another precision stands in). A row's MFU is its ``mfu_percent``, else, from its
    ``tokens_per_gpu_s``, ``100 x tokens/s x model_flops_per_token(s) / P`` (the model FLOPs
    of ``hybrid.model_flops_per_token``, ``P`` the dense peak of its node's GPU in its
    precision, the shipped catalog's)."""
    cat = load_catalog()
    rows = []
    for name in TABLES:
        table = package_toml(name)
        defaults = {k: table.get(k, v) for k, v in SETTINGS.items()}  # as published_rows
        for i, r in enumerate(table["row"]):
            cfg = {k: r.get(k, v) for k, v in defaults.items()}
            dtype_of = cfg["dtype"]
            label = f"{r.get('run') or r.get('model', '')} ({name})"
            if "mfu_percent" in r:
                rows.append((float(r["mfu_percent"]), label, dtype_of))
            elif "tokens_per_gpu_s" in r:
                model = _row_model(name, i, r, cfg["seq"])  # sized to the row's sequence
                gpu = cat.gpu(cat.node(cfg["node"]).gpu)
                peak = float(getattr(gpu, f"{dtype_of}_tflops", 0.0) or 0.0) * 1e12
                if peak > 0:
                    per_token = float(model_flops_per_token(model, model.seq))
                    rows.append((100.0 * float(r["tokens_per_gpu_s"]) * per_token / peak,
                                 label, dtype_of))
    same = [row for row in rows if row[2] == dtype]
    best = max(same or rows, key=lambda x: x[0])
    label = best[1] if same or not dtype else \
        f"{best[1]}, a {best[2]} run: traincast checks no {dtype} one"
    return best[0], label


def megatron_2021_rows() -> dict[str, Any]:
    """The Narayanan et al. table as shipped: ``{"source", "node", "recompute", "row": [...]}``."""
    return table_rows("megatron_2021.toml")


def _whole(value: Any, least: int) -> bool:
    """Whether ``value`` is a TOML integer (not a boolean) of at least ``least``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _check_row(name: str | Path, i: int, row: dict[str, Any], table_source: str) -> None:
    """One published row: known fields, its layout and batch as positive integers with
    ``t p cp d = gpus`` (``cp`` 1 when absent; ``shard``, HSDP's shard group, every
    data-parallel rank when absent), exactly one published rate (``tflops_per_gpu``
    or ``mfu_percent``; or neither, with ``tokens_per_gpu_s``: compared in tokens), and a
    source (its own or the table's)."""
    where = f"{name}, row {i + 1}"
    unknown = set(row) - ROW_KEYS
    if unknown:
        raise TraincastError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}",
                             hint=f"known fields: {', '.join(sorted(ROW_KEYS))}")
    for key in ("model", "t", "p", "d", "gpus", "batch"):
        if key not in row:
            raise TraincastError(f"{where}: missing field {key!r}")
    rates = [k for k in ("tflops_per_gpu", "mfu_percent") if k in row]
    if len(rates) > 1 or not (rates or "tokens_per_gpu_s" in row):
        raise TraincastError(f"{where}: give exactly one of 'tflops_per_gpu' and 'mfu_percent', "
                             "or 'tokens_per_gpu_s' alone (compared in tokens per second)")
    for key in ("t", "p", "cp", "d", "gpus", "batch", "shard"):
        if key in ("cp", "shard") and key not in row:
            continue
        if not _whole(row[key], 1):
            raise TraincastError(f"{where}: field {key!r} must be a positive integer, "
                                 f"got {row[key]!r}")
    if not (row.get("source") or table_source):
        raise TraincastError(f"{where}: field 'source' is missing or empty",
                             hint="every published row names where it is published (or the "
                                  "table a source for all its rows)")
    layout = row["t"] * row["p"] * row.get("cp", 1) * row["d"]
    if layout != row["gpus"]:
        raise TraincastError(f"{where}: t x p x cp x d = {layout} is not the row's "
                             f"{row['gpus']} GPUs (field 'gpus')")


METRICS = ("hardware", "model")
SELECTIVE = tuple(k for k in st.RECOMPUTE if k.startswith("selective"))
"""The selective recomputations a stack may have (recipe knob ``selective``)."""


SWITCHES = ("sp", "interleaved", "uneven_stages",
            *(k for k, v in RECIPE_KNOBS.items() if isinstance(v, bool)))
"""The settings that are on or off (the table's own and the recipe knobs whose default is a
boolean): TOML booleans (a string ``"false"`` is refused, not read as on)."""


def _check_settings(name: str | Path, i: int, row: dict[str, Any], cfg: dict[str, Any]) -> None:
    """The row's settings (its own or the table's): a known ``recompute``, ``attention`` and
    ``metric``, a positive ``micro_batch`` and ``vp``, the on/off settings (:data:`SWITCHES`)
    true or false, ``zero`` 0 to 3, ``seq`` and ``rails`` positive integers where given,
    ``node``, ``dtype`` and ``nic`` text, and numbers where numbers are published. An
    ``mfu_percent`` is model FLOPs over the peak, so it is compared by ``metric = "model"``
    only."""
    where = f"{name}, row {i + 1}"
    for key in SWITCHES:
        if not isinstance(cfg[key], bool):
            raise TraincastError(f"{where}: field {key!r} must be true or false, got "
                                 f"{cfg[key]!r}", hint="a TOML boolean, unquoted: "
                                 f"{key} = true (the row's own or its table's)")
    if cfg["zero"] is not None and not (_whole(cfg["zero"], 0) and cfg["zero"] <= 3):
        raise TraincastError(f"{where}: field 'zero' must be 0, 1, 2 or 3, got {cfg['zero']!r}")
    for key in ("seq", "rails"):
        if cfg[key] is not None and not _whole(cfg[key], 1):
            raise TraincastError(f"{where}: field {key!r} must be a positive integer, got "
                                 f"{cfg[key]!r}", hint="leave it out for the default")
    for key in ("node", "dtype", "nic"):
        if cfg[key] is not None and not (isinstance(cfg[key], str) and cfg[key].strip()):
            raise TraincastError(f"{where}: field {key!r} must be a name, got {cfg[key]!r}")
    if cfg["dtype"] not in st.DTYPE_BYTES:
        raise TraincastError(f"{where}: field 'dtype' must be one of "
                             f"{', '.join(st.DTYPE_BYTES)}, got {cfg['dtype']!r}")
    if cfg["framework"] not in recipes():
        raise TraincastError(f"{where}: field 'framework' must be one of "
                             f"{', '.join(recipes())}, got {cfg['framework']!r}")
    if cfg["recompute"] not in st.RECOMPUTE_CODE:
        raise TraincastError(f"{where}: field 'recompute' must be one of "
                             f"{', '.join(st.RECOMPUTE_CODE)}, got {cfg['recompute']!r}")
    if cfg["selective"] not in SELECTIVE:
        raise TraincastError(f"{where}: field 'selective' must be one of "
                             f"{', '.join(SELECTIVE)}, got {cfg['selective']!r}",
                             hint="what recompute = \"selective\" runs: Megatron's attention "
                                  "core or torchtitan's op policy")
    if cfg["attention"] not in ATTENTION:
        raise TraincastError(f"{where}: field 'attention' must be one of "
                             f"{', '.join(ATTENTION)}, got {cfg['attention']!r}")
    if cfg["metric"] not in METRICS:
        raise TraincastError(f"{where}: field 'metric' must be one of {', '.join(METRICS)}, "
                             f"got {cfg['metric']!r}", hint="hardware: executed FLOPs "
                             "(recomputation included); model: model FLOPs (MFU)")
    if "mfu_percent" in row and cfg["metric"] != "model":
        raise TraincastError(f"{where}: field 'mfu_percent' needs metric = \"model\" (MFU "
                             "counts model FLOPs, not the executed ones)",
                             hint='metric = "model" on the row or the table')
    for key in ("micro_batch", "vp"):
        if not _whole(cfg[key], 1):
            raise TraincastError(f"{where}: field {key!r} must be a positive integer, "
                                 f"got {cfg[key]!r}")
    for key, (most, why) in RATE_MAX.items():
        value = row.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                  or not 0 < value <= most):
            raise TraincastError(f"{where}: field {key!r} must be a positive number up to "
                                 f"{most:,g} ({why}), got {value!r}")


RATE_MAX: dict[str, tuple[float, str]] = {
    "tflops_per_gpu": (PEAK_TFLOPS_MAX, "TFLOP/s per GPU, the catalog's bound on a peak"),
    "mfu_percent": (100.0, "a percentage of the peak"),
    "tokens_per_gpu_s": (1e9, "tokens/s per GPU: a typo in the exponent above")}
"""A published rate's largest value, ``field -> (bound, why)``: above it, a typo."""


@contextlib.contextmanager
def _naming(name: str | Path, i: int, fields: str) -> Iterator[None]:
    """Say the file, row and field(s) in a TraincastError raised inside (an unknown node,
    model, dtype or link that the catalog or the zoo reports by its flag), unless it names
    them already."""
    where = f"{name}, row {i + 1}"
    try:
        yield
    except TraincastError as exc:
        if str(exc).startswith(where):
            raise
        raise type(exc)(f"{where}: field {fields}: {exc}", hint=exc.hint) from None


def _row_model(name: str | Path, i: int, row: dict[str, Any], seq: int | None) -> ModelConfig:
    """The row's model (a zoo name, an ``hf:`` name or config — a config file or folder
    beside a table file is found there, ``zoo.hf.config_beside`` — or its inline
    ``config``), sized to the row's ``seq`` when it gives one."""
    spec = str(row["model"])
    if spec.startswith("hf:") and str(name) not in TABLES:
        from traincast.zoo.hf import config_beside

        spec = f"hf:{config_beside(spec[3:], Path(name).resolve().parent)}"
    where = f"{name}, row {i + 1}, field 'config'"
    if "config" in row and not isinstance(row["config"], dict):
        raise TraincastError(f"{where}: must be a table of the model's sizes (layers, hidden, "
                             f"heads, ffn, vocab, ...), got {row['config']!r}",
                             hint="config = { layers = 32, hidden = 4096, heads = 32, "
                                  "ffn = 11008, vocab = 32000 }, or a model name alone")
    model = (config_from_table(row["model"], dict(row["config"]), where)
             if "config" in row else get_model(spec))
    return dataclasses.replace(model, seq=seq) if seq else model


def stack_catalog(name: str | Path, table: dict[str, Any], cat: Catalog) -> Catalog:
    """The catalog a table's rows are priced with: ``cat``, with each ``[gemm_fraction.GPU]``
    entry of the table (``DTYPE = fraction``, ``source``: the GEMM rate of the library its runs
    used on that GPU, from a per-op measurement) over that GPU's ``gemm_max_fraction`` and its
    source, so the rows' ``R = P eta`` comes from the one catalog path
    (``traincast.compute.rates``). ``cat`` itself is unchanged."""
    gpus = dict(cat.gpus)
    for gpu, entry in (table.get("gemm_fraction") or {}).items():
        where = f"{name}: [gemm_fraction.{gpu}]"
        try:
            gpu_name = cat.gpu_name(gpu)
        except UnknownNameError:
            raise TraincastError(f"{where}: unknown GPU {gpu!r}",
                                 hint="a catalog GPU name (traincast hardware list)") from None
        if not isinstance(entry, dict) or not str(entry.get("source", "")).strip():
            raise TraincastError(f"{where}: field 'source' is missing or empty",
                                 hint="the per-op measurement the fraction is taken from")
        fractions = {k: v for k, v in entry.items() if k != "source"}
        for dtype, value in fractions.items():
            if dtype not in st.DTYPE_BYTES or isinstance(value, bool) \
                    or not isinstance(value, int | float) or not 0 < value <= 1:
                raise TraincastError(f"{where}: field {dtype!r} must be a dtype "
                                     f"({', '.join(st.DTYPE_BYTES)}) with a fraction in (0, 1], "
                                     f"got {value!r}")
        g = gpus[gpu_name]
        gpus[gpu_name] = dataclasses.replace(
            g, gemm_max_fraction={**g.gemm_max_fraction, **{k: float(v) for k, v in
                                                              fractions.items()}},
            sources={**g.sources, "gemm_max_fraction": str(entry["source"])})
    return dataclasses.replace(cat, gpus=gpus, cache={}) if gpus != cat.gpus else cat


def row_hardware(cat: Catalog, cfg: dict[str, Any]) -> HybridHardware:
    """The row's node, with its NIC and rails where the row gives them."""
    hw = hybrid_hardware(cat, cfg["node"], cfg["dtype"], nic=cfg["nic"])
    return hw if cfg["rails"] is None else dataclasses.replace(hw, rails=float(cfg["rails"]))


def _predict(model: ModelConfig, hw: HybridHardware, cfg: dict[str, Any], row: dict[str, Any],
             vp: int) -> dict[str, Any]:
    return evaluate(model, hw, dp=row["d"], tp=row["t"], pp=row["p"], zero=cfg["zero"],
                    global_batch=row["batch"], micro_batch=cfg["micro_batch"], vp=vp,
                    recompute=st.RECOMPUTE_CODE[recompute_mode(cfg["recompute"], cfg)],
                    sp=cfg["sp"], seq=cfg["seq"], dtype=cfg["dtype"],
                    uneven_stages=cfg["uneven_stages"], attention=cfg["attention"],
                    cp=row.get("cp", 1), shard=row.get("shard", 0), **priced_knobs(cfg))


def compare_table(name: str | Path, catalog: Catalog | None = None,
                  gpu: str | None = None, interleaved: bool = True,
                  table: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Predicted vs published per-GPU TFLOP/s (or, for a row that gives ``tokens_per_gpu_s``
    alone, tokens per second per GPU: ``published_tflops_per_gpu`` None) for every row of the
    table ``name`` (shipped, or a file)
    (module docstring): the row's fields plus ``cp`` (1 when absent), ``published_tflops_per_gpu``,
    ``predicted_tflops_per_gpu``, ``rel_error``, ``within_target``, ``predicted_s``,
    ``shares`` (of the predicted iteration), ``fits``, ``memory_gb``, the row's resolved
    ``gpu``, ``dtype`` and ``node``, ``predicted_tokens_per_gpu_s`` and ``rel_error_tokens``
    (None unless the row gives ``tokens_per_gpu_s``) and, for tables with
    ``interleaved = true``, the smallest valid ``vp > 1`` (``vp_interleaved``,
    ``predicted_interleaved_tflops_per_gpu``, ``rel_error_interleaved``; None when none fits).
    With ``gpu`` (a catalog name) only the rows whose node has that GPU are predicted and
    returned (the others' fields are checked, not their shapes); ``interleaved`` False skips
    the search for an interleaved ``vp`` (its fields None). ``table``: the file ``name``'s
    TOML as its caller already parsed it (``[[row]]`` tables present), else read by
    :func:`table_rows`."""
    table = table_rows(name) if table is None else table
    unknown = set(table) - TABLE_KEYS
    if unknown:
        raise TraincastError(f"{name}: unknown table key(s) {', '.join(sorted(unknown))}",
                             hint=f"known keys: {', '.join(sorted(TABLE_KEYS))}")
    cat = stack_catalog(name, table, catalog or load_catalog())
    defaults = {k: table.get(k, v) for k, v in SETTINGS.items()}
    out = []
    for i, row in enumerate(table["row"]):
        _check_row(name, i, row, str(table.get("source", "")))
        cfg = {k: row.get(k, v) for k, v in defaults.items()}
        _check_settings(name, i, row, cfg)
        with _naming(name, i, "node"):
            node_gpu = cat.node(cfg["node"]).gpu
        if gpu is not None and node_gpu != gpu:
            continue  # a row on another GPU: its fields checked, not priced
        with _naming(name, i, "model"):
            model = _row_model(name, i, row, cfg["seq"])
        with _naming(name, i, "nic"):
            hw = row_hardware(cat, cfg)
        cfg |= resolve_knobs(cfg["framework"], model, hw,
                             **{k: row.get(k, table.get(k)) for k in RECIPE_KNOBS})[0]
        res = _predict(model, hw, cfg, row, cfg["vp"])
        if code := int(res["shape_error"]):
            raise TraincastError(f"{name}, row {i + 1} ({row['model']}): the hybrid model "
                                 f"rejects its shape: {SHAPE_ERRORS[code]}",
                                 hint=f"t={row['t']} p={row['p']} cp={row.get('cp', 1)} "
                                 f"d={row['d']} shard={row.get('shard', 'all')} "
                                 f"batch={row['batch']} vp={cfg['vp']} "
                                 f"micro_batch={cfg['micro_batch']} seq={model.seq}; a flag "
                                 "named there is the row's or table's key of that name")
        key = "model_tflops_per_gpu" if cfg["metric"] == "model" else "hardware_tflops_per_gpu"
        total, pred = float(res["total_s"]), float(res[key])
        tokens = float(res["tokens_per_s_per_gpu"])
        published = (row["tflops_per_gpu"] if "tflops_per_gpu" in row
                     else row["mfu_percent"] / 100.0 * hw.peak_tflops if "mfu_percent" in row
                     else None)  # a tokens-only row: compared in tokens/s
        rel_tokens = (tokens / row["tokens_per_gpu_s"] - 1.0 if "tokens_per_gpu_s" in row
                      else None)
        rel = pred / published - 1.0 if published is not None else float(rel_tokens)
        inter = next(((vp, r) for vp in range(2, 9)
                      if interleaved and cfg["interleaved"] and row["p"] > 1
                      for r in [_predict(model, hw, cfg, row, vp)]
                      if int(r["shape_error"]) == 0), None)
        pred_i = float(inter[1][key]) if inter else None
        out.append({**row, "metric": cfg["metric"], "gpu": hw.gpu, "dtype": cfg["dtype"],
                    "attention": cfg["attention"],
                    "node": cfg["node"], "cp": row.get("cp", 1),
                    "published_tflops_per_gpu": published,
                    "predicted_tflops_per_gpu": pred, "rel_error": rel,
                    "within_target": abs(rel) <= TARGET_REL_ERROR,
                    "vp_interleaved": inter[0] if inter else None,
                    "predicted_interleaved_tflops_per_gpu": pred_i,
                    "rel_error_interleaved": (pred_i / published - 1.0
                                              if pred_i and published else None),
                    "predicted_tokens_per_gpu_s": tokens,
                    "rel_error_tokens": rel_tokens,
                    "predicted_s": total,
                    "shares": {k: float(res[f"{k}_s"]) / total for k in
                               ("compute_flop", "compute_mem", "comm_tp", "comm_pp",
                                "comm_dp", "bubble")},
                    "fits": bool(res["fits"]),
                    "memory_gb": float(res["mem_total_bytes"]) / 1e9})
    return out


def megatron_2021(catalog: Catalog | None = None) -> list[dict[str, Any]]:
    """Narayanan et al. (SC 2021) Table 1 through ``compare_table`` (``rel_error`` with
    ``vp = 1``, ``rel_error_interleaved`` with the smallest valid ``vp > 1``)."""
    return compare_table("megatron_2021.toml", catalog)


def published_llm(catalog: Catalog | None = None) -> list[dict[str, Any]]:
    """BLOOM-176B, OPT-175B, MT-NLG 530B and Korthikanti et al. (2022) through
    ``compare_table`` (``published_llm.toml``; each row names its source)."""
    return compare_table("published_llm.toml", catalog)


def llm_foundry(catalog: Catalog | None = None) -> list[dict[str, Any]]:
    """MosaicML llm-foundry's MPT throughput tables through ``compare_table``
    (``llm_foundry.toml``: every row of the README's four tables, each with its source)."""
    return compare_table("llm_foundry.toml", catalog)


def nemo(catalog: Catalog | None = None) -> list[dict[str, Any]]:
    """NVIDIA NeMo's FP8 pre-training throughput tables through ``compare_table``
    (``nemo.toml``: each row with its source; compared in tokens per second per GPU)."""
    return compare_table("nemo.toml", catalog)


CHECK_TITLES: dict[str, str] = {
    "megatron_2021.toml": "Megatron-LM SC'21 Table 1",
    "published_llm.toml": "BLOOM, OPT, MT-NLG and Korthikanti et al.",
    "llm_foundry.toml": "MosaicML llm-foundry MPT tables",
    "nemo.toml": "NVIDIA NeMo FP8 tables",
}
"""The shipped published tables (``TABLES``) by the name ``published_checks`` gives them."""


def published_checks(gpu: str, dtype: str | None = None) -> list[dict[str, Any]]:
    """How the shipped hybrid model (the shipped catalog, its default compute strategy) did on
    the shipped published runs (``TABLES``) on one GPU (in one precision, ``dtype``, when
    given): per table with such rows on ``gpu`` (a catalog name or alias: an unknown one is an
    error), ``{"table", "title", "rows", "compared_in", "dtypes",
    "median_abs_error", "median_error", "max_abs_error", "too_fast"}`` (errors as
    ``rel_error``: predicted / published - 1, so > 0 is a forecast faster than the run;
    ``too_fast`` the rows above 0; ``compared_in``: ``tokens/s`` for rows that give tokens per
    second alone, else ``TFLOP/s``). Empty for a GPU no shipped run used. The runs' hardware
    is the shipped catalog's, as they ran it: a user's catalog does not move them."""
    return copy.deepcopy(_published_checks(load_catalog().gpu_name(gpu), dtype))


def shipped_gpu_checks(gpu: str, dtype: str | None = None) -> list[dict[str, Any]]:
    """:func:`published_checks` of ``gpu`` when the shipped catalog has it; ``[]`` for a GPU
    only a user's catalog gives (no shipped run can have used it)."""
    return published_checks(gpu, dtype) if gpu in load_catalog().gpus else []


@functools.cache
def _published_checks(gpu: str, dtype: str | None) -> list[dict[str, Any]]:
    """``published_checks`` of a catalog GPU name, priced once per process (shipped data)."""
    from traincast.validation.published import summarize

    cat = load_catalog()
    out = []
    for name in TABLES:
        rows = [r for r in compare_table(name, cat, gpu=gpu, interleaved=False)
                if dtype is None or r["dtype"] == dtype]
        if not rows:
            continue
        s = summarize([r["rel_error"] for r in rows])
        out.append({"table": name, "title": CHECK_TITLES[name], "rows": len(rows),
                    "compared_in": ("tokens/s" if all(r["published_tflops_per_gpu"] is None
                                                      for r in rows) else "TFLOP/s"),
                    "dtypes": sorted({str(r["dtype"]) for r in rows}),
                    "median_abs_error": s["median_abs_error"], "median_error": s["median_error"],
                    "max_abs_error": s["max_abs_error"],
                    "too_fast": sum(r["rel_error"] > 0 for r in rows)})
    return out


def median_abs_error(rows: list[dict[str, Any]]) -> float:
    """Median of ``|rel_error|`` over the rows (NaN when a row has none)."""
    errs = sorted(abs(r["rel_error"]) for r in rows)
    if not errs or any(math.isnan(e) for e in errs):
        return math.nan
    mid = len(errs) // 2
    return errs[mid] if len(errs) % 2 else 0.5 * (errs[mid - 1] + errs[mid])
