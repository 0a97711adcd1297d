"""``traincast validate --published``: predictions against published training throughputs.

The rows (``published.toml``, each with its citation) are measured training throughputs of
whole models on named GPUs, 1 and 8 GPUs of one node (Lambda's PyTorch benchmark: ResNet-50 and
BERT SQuAD fine-tuning, fp16 mixed precision and fp32). For each row:

1. **job** — the model profiled at the row's batch per GPU (``traincast.features.profile`` on
   the meta device; under autocast for fp16 rows), inputs not copied when the benchmark used
   synthetic data; architecture ``1w1g`` for one GPU, else ``allreduce-local`` over the row's
   GPUs on the 8-GPU node preset of its GPU (``[node]`` of the file);
2. **predict** — the iteration time ``T`` of the project's model
   (``traincast.predict.predict_table``, one call for all rows; ``amp`` for fp16 rows), each
   row's compute priced op by op from its profile's per-op table (``ops_of``: the kernel model
   on GPUs with kernel data, the paper's split elsewhere, ``traincast.compute``);
3. **compare** — predicted throughput ``X = b n / T`` (b = batch per GPU, n = GPUs) and
   ``error = X_pred / X_published - 1`` per row; the summary gives the median and 90th
   percentile of ``|error|``. Every pair of rows with the same model, dtype and GPU count on
   two GPUs A and B gives a cross-GPU ratio ``R = X_A / X_B``; its error is
   ``R_pred / R_published - 1``.

The Megatron-LM SC'21 table (``traincast.parallel.validation.megatron_2021``) is reported
beside it with its own error (predicted / published per-GPU TFLOP/s - 1), and so are MosaicML
llm-foundry's MPT tables (``traincast.parallel.validation.llm_foundry``: MFU, per GPU and
precision and per sequence length) and NVIDIA NeMo's FP8 pre-training tables
(``traincast.parallel.validation.nemo``: tokens/s per GPU on DGX H100 and DGX B200). All are
checks of the hybrid model; nothing is fitted to them.

``validate --rows FILE`` runs rows of your own in the same format (docs/validation.md, "Row
format"): precisions as benchmark tables write them (``AMP``, ``mixed``, ``bf16``, ``TF32``,
``FP32``; ``DTYPE_ALIASES``), units per sample or per token, summed or per GPU
(``parse_unit``), the batch per GPU or the global batch, rows over several nodes
(``allreduce-cluster``), and the benchmark's optimizer and memory format. Every bad field is a
TraincastError naming the file, the row or model table, and the field, with a hint.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from functools import cache, partial
from importlib import resources
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from traincast.bounds import COUNT_MAX
from traincast.errors import TraincastError, did_you_mean
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.jobs import FEATURES
from traincast.units import fmt_pct
from traincast.zoo.llm import SIZE_MAX

__all__ = ["MEDIAN_TARGET", "RATIO_TARGET", "by_gpu_and_dtype", "check_hardware",
           "cross_gpu_ratios", "ddp_overlap", "evaluate_rows", "grouped_errors", "load_published",
           "memory_warnings", "parse_unit", "profile_row", "render_markdown",
           "row_architectures", "summarize", "tf32_matmuls", "validate_published"]

MEDIAN_TARGET = 0.10  # median |error| of the rows
RATIO_TARGET = 0.15  # every cross-GPU ratio within this
DTYPES = ("fp16", "bf16", "tf32", "fp32")
MIXED = ("fp16", "bf16")  # mixed precision: the model profiled under autocast (or fp16_spec)
DTYPE_ALIASES = {  # how benchmark tables write precisions (lower case, "_"/"-" as " ") -> DTYPES
    "fp16": "fp16", "amp": "fp16", "mixed": "fp16", "mixed precision": "fp16",
    "amp fp16": "fp16", "fp16 amp": "fp16", "float16": "fp16", "half": "fp16",
    "bf16": "bf16", "bfloat16": "bf16", "amp bf16": "bf16", "bf16 amp": "bf16",
    "tf32": "tf32", "fp32": "fp32", "float32": "fp32", "single": "fp32"}
SAMPLE_WORDS = frozenset({
    "image", "images", "img", "imgs", "sample", "samples", "sequence", "sequences", "seq",
    "seqs", "sentence", "sentences", "example", "examples", "record", "records", "query",
    "queries", "utterance", "utterances", "item", "items"})
TOKEN_WORDS = frozenset({"token", "tokens", "tok", "toks"})
UNIT_RE = re.compile(r"^(?P<what>[a-z]+)\s*(?:/|per)\s*(?:s|sec|second)"
                     r"(?P<per_gpu>\s*(?:/|per)\s*gpu)?$")
ROW_FIELDS: dict[str, type | tuple[type, ...]] = {
    "model": str, "gpu": str, "gpus": int, "dtype": str, "batch_per_gpu": int,
    "throughput": (int, float), "unit": str, "citation": str}
ROW_OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "node": str, "nodes": int, "global_batch": int, "tokens_per_sample": int, "url": str,
    "published_as": str, "note": str}
MODEL_FIELDS: dict[str, type | tuple[type, ...]] = {
    "spec": str, "fp16_spec": str, "synthetic_inputs": bool, "ddp_bucket_bytes": (int, float),
    "ddp_bucket_elements": (int, float), "optimizer": str, "memory_format": str,
    "tokens_per_sample": int, "seq": int, "attention": str, "note": str, "description": str,
    "source": str}
FIELD_HINTS = {
    "nodes": 'nodes = N counts the nodes; node = "PRESET" names the node preset',
    "gpus": "gpus = N counts every GPU of the run (all nodes)",
    "batch_per_gpu": "one GPU's batch in samples (images, sequences), a whole number",
    "ddp_bucket_bytes": "bytes: 26214400 for PyTorch DDP's 25 MiB buckets"}
MEMORY_WARN_FACTOR = 2.0  # footprint / GPU memory above which a row's batch is questioned
ROW_FORMAT_HINT = "the row format: docs/validation.md, 'Row format (--rows FILE)'"
MEMORY_FORMATS = ("nchw", "nhwc", "channels_last")
NULLABLE_KEYS = ("embedding_allreduce_bytes",)  # absent = embedding_bytes_touched
MATMUL_FAMILIES = ("gemm", "attention")


def _path(path: str | Path | None) -> Path | Any:
    return Path(path) if path else resources.files("traincast.validation").joinpath(
        "published.toml")


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {int: "an integer", str: "a string", bool: "true or false"}
    return names.get(kind, "a number") if isinstance(kind, type) else "a number"


def _is(value: Any, kind: type | tuple[type, ...]) -> bool:
    """``isinstance`` where a TOML boolean is never a number."""
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def _check_keys(where: str, table: Mapping[str, Any], known: Sequence[str],
                kinds: Mapping[str, type | tuple[type, ...]]) -> None:
    """Every key known (or free text ending in ``_source``/``_note``) and of its type."""
    for key, value in table.items():
        if key.endswith(("_source", "_note")):
            continue
        if key not in known:
            raise TraincastError(f"{where}: unknown field {key!r}",
                                 hint=f"{did_you_mean(key, known)}fields: {', '.join(known)} "
                                 "(free text: any NAME_source or NAME_note)")
        if key in kinds and not _is(value, kinds[key]):
            raise TraincastError(f"{where}: field {key!r} must be {_kind_name(kinds[key])}, "
                                 f"not {value!r}", hint=FIELD_HINTS.get(key, ""))


def parse_unit(unit: str) -> tuple[str, bool] | None:
    """``(kind, per_gpu)`` of a throughput unit: kind ``"sample"`` (images/s, sequences/s,
    samples/s, ...) or ``"token"`` (tokens/s); ``per_gpu`` for a trailing ``/gpu`` or
    ``per GPU`` (the figure of one GPU, not the sum over the row's GPUs). None: not a unit this
    runner can compare."""
    m = UNIT_RE.match(" ".join(unit.lower().replace("-", " ").split()))
    if not m:
        return None
    what = m["what"]
    kind = "sample" if what in SAMPLE_WORDS else "token" if what in TOKEN_WORDS else ""
    return (kind, bool(m["per_gpu"])) if kind else None


def _check_model(name: str, label: str, model: Any) -> None:
    """One ``[model.NAME]`` table: known fields of the right type, a MODEL spec of a known
    form, a known optimizer and memory format, positive bucket sizes."""
    where = f"{name}: [model.{label}]"
    if not isinstance(model, dict):
        raise TraincastError(f"{where} must be a table", hint='[model.NAME] spec = "zoo:NAME"')
    _check_keys(where, model, list(MODEL_FIELDS), MODEL_FIELDS)
    if "spec" not in model:
        raise TraincastError(f"{where}: field 'spec' missing",
                             hint='spec = "zoo:NAME", "hf:NAME" or "FILE.py:FUNC"')
    for key in ("spec", "fp16_spec"):
        spec = model.get(key)
        if spec is not None and not (spec.startswith(("zoo:", "hf:"))
                                     or re.fullmatch(r".+\.py:\w+", spec)):
            raise TraincastError(f"{where}: field {key!r}: {spec!r} is not a MODEL spec",
                                 hint=f"write zoo:{spec}, hf:{spec} or FILE.py:FUNC "
                                 "(traincast zoo list)")
    from traincast.features.profile import ATTENTIONS, OPTIMIZERS

    if model.get("optimizer", "adam") not in OPTIMIZERS:
        raise TraincastError(f"{where}: field 'optimizer' must be one of {OPTIMIZERS}")
    if model.get("attention", "eager") not in ATTENTIONS:
        raise TraincastError(f"{where}: field 'attention' must be one of {ATTENTIONS}")
    if str(model.get("memory_format", "nchw")).lower() not in MEMORY_FORMATS:
        raise TraincastError(f"{where}: field 'memory_format' must be one of {MEMORY_FORMATS}")
    for key in ("ddp_bucket_bytes", "ddp_bucket_elements", "tokens_per_sample", "seq"):
        if key in model and not (model[key] > 0 and math.isfinite(model[key])):
            raise TraincastError(f"{where}: field {key!r} must be positive and finite, got "
                                 f"{model[key]!r}")
    refuse_above(where, model, MODEL_BOUNDS)


def _row_key(row: Mapping[str, Any]) -> str:
    """A row as written, for telling twins apart: numbers as floats (``1000`` = ``1000.0``),
    the precision in lower case (``FP32`` = ``fp32``)."""
    def norm(key: str, v: Any) -> Any:
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
        return v.strip().lower() if key == "dtype" and isinstance(v, str) else v

    return json.dumps({k: norm(k, v) for k, v in row.items()}, sort_keys=True, default=str)


def _row_where(name: str, i: int) -> str:
    return f"{name}: row {i}"


def _check_batch(where: str, row: dict[str, Any]) -> None:
    """``batch_per_gpu`` from itself or from ``global_batch / gpus`` (both given: they agree)."""
    glob, per = row.get("global_batch"), row.get("batch_per_gpu")
    if glob is None:
        return
    if not _is(glob, int) or glob <= 0:
        raise TraincastError(f"{where}: field 'global_batch' must be a positive integer")
    if per is None and glob % row["gpus"]:
        raise TraincastError(f"{where}: field 'global_batch': {glob} is not a multiple of "
                             f"gpus = {row['gpus']}", hint="global_batch = batch_per_gpu x gpus "
                             "(the batch of one step over all GPUs)")
    if per is not None and per * row["gpus"] != glob:
        raise TraincastError(f"{where}: field 'batch_per_gpu': {per} x gpus {row['gpus']} != "
                             f"global_batch {glob}", hint="batch_per_gpu is one GPU's batch; "
                             "give one of the two")
    row["batch_per_gpu"] = glob // row["gpus"]


def _check_row(name: str, i: int, row: Any, models: Mapping[str, Any]) -> None:
    """One ``[[row]]``: fields and types, then normalized in place: ``dtype`` to one of
    ``DTYPES`` (``dtype_written`` keeps the text), ``batch_per_gpu`` from ``global_batch``,
    ``unit_factor`` = row units per (sample/s summed over the row's GPUs)."""
    where = _row_where(name, i)
    if not isinstance(row, dict):
        raise TraincastError(f"{where} must be a table", hint="write each row as [[row]]")
    _check_keys(where, row, [*ROW_FIELDS, *ROW_OPTIONAL], {**ROW_FIELDS, **ROW_OPTIONAL})
    for key, kind in ROW_FIELDS.items():
        if key == "batch_per_gpu" and "global_batch" in row:
            continue
        if not _is(row.get(key), kind):
            raise TraincastError(f"{where}: field {key!r} missing or not {_kind_name(kind)}",
                                 hint=f"every [[row]] needs {', '.join(ROW_FIELDS)} "
                                 "(or global_batch for batch_per_gpu)")
    if row["model"] not in models:
        raise TraincastError(f"{where}: field 'model': unknown model {row['model']!r}",
                             hint=f"{did_you_mean(row['model'], list(models))}[model.*]: "
                             f"{', '.join(models)}" if models else "the file has no "
                             f"[model.NAME] table: add [model.{row['model']}] with its spec "
                             "(docs/validation.md, 'Row format (--rows FILE)')")
    for key in ("gpus", "nodes", "batch_per_gpu", "throughput", "tokens_per_sample"):
        value = row.get(key)
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise TraincastError(f"{where}: field {key!r} must be positive and finite, "
                                 f"not {value!r}")
    _check_batch(where, row)
    refuse_above(where, row, ROW_BOUNDS)
    written = row["dtype"]
    dtype = DTYPE_ALIASES.get(" ".join(re.split(r"[\s_-]+", written.lower().strip())))
    if dtype is None:
        raise TraincastError(f"{where}: field 'dtype': unknown precision {written!r}",
                             hint=f"one of {', '.join(DTYPES)} (also written "
                             f"{', '.join(k for k in DTYPE_ALIASES if k not in DTYPES)})")
    row["dtype"], row["dtype_written"] = dtype, written
    _check_unit(where, row, models[row["model"]])
    if not row["citation"].strip():
        raise TraincastError(f"{where}: field 'citation' is empty")


def _check_unit(where: str, row: dict[str, Any], model: Mapping[str, Any]) -> None:
    """``unit_factor``: the published figure over (samples/s summed over the GPUs) —
    ``tokens_per_sample`` for a token unit, ``1 / gpus`` more for a per-GPU unit."""
    parsed = parse_unit(row["unit"])
    if parsed is None:
        raise TraincastError(f"{where}: field 'unit': {row['unit']!r} is not a throughput unit",
                             hint="images/s, sequences/s, samples/s, ... (one per sample), "
                             "tokens/s (with tokens_per_sample); add /gpu for a per-GPU figure")
    kind, per_gpu = parsed
    factor = 1.0 / row["gpus"] if per_gpu else 1.0
    if kind == "token":
        tokens = row.get("tokens_per_sample", model.get("tokens_per_sample"))
        if tokens is None:
            raise TraincastError(f"{where}: field 'tokens_per_sample' missing for unit "
                                 f"{row['unit']!r}", hint="tokens per sample (e.g. the "
                                 "sequence length) on the row or its [model.NAME]; "
                                 "batch_per_gpu counts samples, not tokens")
        factor *= float(tokens)
    row["unit_factor"] = factor


ROW_BOUNDS: dict[str, float] = {"gpus": COUNT_MAX, "nodes": COUNT_MAX, "batch_per_gpu": COUNT_MAX,
                                "throughput": COUNT_MAX**2, "tokens_per_sample": SIZE_MAX}
"""Upper bounds of a row's counts and rate (``predict`` and ``plan`` take at most a million
GPUs; a per-GPU batch above a million samples is a typo that would allocate its activations;
a throughput above 1e12 samples or tokens per second is a million GPUs at a million each, a
typo in the exponent)."""
MODEL_BOUNDS: dict[str, float] = {"tokens_per_sample": SIZE_MAX, "seq": SIZE_MAX}
"""Upper bounds of a ``[model.NAME]`` table's lengths, as a row's (``ROW_BOUNDS``)."""


def refuse_above(where: str, values: Mapping[str, Any], bounds: Mapping[str, float]) -> None:
    """An error naming the first of ``values`` above its bound (``bounds``): a typo."""
    for key, bound in bounds.items():
        if values.get(key) is not None and values[key] > bound:
            raise TraincastError(f"{where}: field {key!r} = {values[key]!r} is above "
                                 f"{bound:,.0f}", hint="check the exponent")


def _read_table(path: str | Path | None) -> dict[str, Any]:
    """A rows file's TOML, parsed (the shipped ``published.toml`` without ``path``); a file
    that cannot be read or parsed is a TraincastError naming it."""
    try:
        return tomllib.loads(_path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TraincastError(f"{path or 'published.toml'}: cannot be read ({exc})") from None


def load_published(path: str | Path | None = None,
                   table: dict[str, Any] | None = None) -> dict[str, Any]:
    """The parsed table (``source``, ``model``, ``node``, ``row``), each model and row checked
    and each row normalized (``_check_row``). ``table``: the file's TOML as already parsed
    (:func:`validate_published` reads it once), checked and normalized in place.

    A missing, unknown or mistyped field, an unknown model, precision or unit, or a
    non-positive number is a TraincastError naming the file, the row (1-based) or model table,
    and the field.
    """
    name = str(path) if path else "published.toml"
    data = _read_table(path) if table is None else table
    if unknown := sorted(set(data) - {"source", "model", "node", "row"}):
        raise TraincastError(f"{name}: unknown table [{unknown[0]}]; known: [source], "
                             "[model.NAME], [node], [[row]]", hint=ROW_FORMAT_HINT)
    if not isinstance(data.get("source", {}), dict):
        raise TraincastError(f"{name}: [source] must be a table (source.KEY = value), got "
                             f"{data['source']!r}", hint=ROW_FORMAT_HINT)
    matmul = data.get("source", {}).get("fp32_matmul", "fp32")
    if matmul not in ("fp32", "tf32"):
        raise TraincastError(f"{name}: [source] fp32_matmul = {matmul!r}: one of \"fp32\" or "
                             "\"tf32\" (how the run's fp32 matrix products ran)")
    data["file"] = name
    data["base_dir"] = str(Path(path).resolve().parent) if path else ""
    models, rows, nodes = data.get("model", {}), data.get("row", []), data.get("node", {})
    if not isinstance(models, dict) or not isinstance(nodes, dict) \
            or not all(isinstance(v, str) for v in nodes.values()):
        raise TraincastError(f"{name}: [model.NAME] must be tables and [node] GPU = \"preset\"")
    if not isinstance(rows, list) or not rows:
        raise TraincastError(f"{name}: no [[row]] tables",
                             hint="docs/validation.md, 'Row format (--rows FILE)'")
    try:
        for label, model in models.items():
            _check_model(name, label, model)
        seen: dict[str, int] = {}
        for i, row in enumerate(rows, 1):
            key = _row_key(row)
            _check_row(name, i, row, models)
            if (first := seen.setdefault(key, i)) != i:
                raise TraincastError(f"{_row_where(name, i)}: the same row as row {first} (it "
                                     "would count twice in the medians)",
                                     hint="keep one of the two")
    except TraincastError as exc:
        raise TraincastError(str(exc), hint=exc.hint or ROW_FORMAT_HINT) from None
    return data


def check_hardware(data: Mapping[str, Any], catalog: Catalog) -> None:
    """Every row's GPU and node must be in the catalog and agree; checked rows are normalized.

    The row's ``gpu`` becomes the catalog name (an alias resolved; ``gpu_written`` keeps the
    text) and ``node`` the preset it runs on (the row's ``node``, else ``[node]`` of its GPU,
    else the GPU's default node). A TraincastError names the file, row and field: an unknown
    GPU or node, a node of another GPU, more GPUs than ``nodes`` hold, a multi-GPU row with no
    node, bf16 or tf32 on a GPU without those tensor cores."""
    name = data.get("file", "published.toml")
    nodes, known = {}, [*catalog.gpus, *catalog.aliases]
    for gpu, node in data.get("node", {}).items():
        if node not in catalog.nodes:  # the table's own error, before any row takes it
            raise TraincastError(f"{name}: [node] key {gpu!r}: node preset {node!r} is not in "
                                 "the catalog", hint=f"{did_you_mean(str(node), catalog.nodes)}"
                                 "traincast hardware list")
        try:
            nodes[catalog.gpu_name(gpu)] = node
        except KeyError:  # no row can run on it: a misspelling that would go unused
            raise TraincastError(f"{name}: [node] key {gpu!r}: not a catalog GPU",
                                 hint=f"{did_you_mean(str(gpu), known)}traincast hardware list"
                                 ) from None
    for i, row in enumerate(data["row"], 1):
        where = _row_where(name, i)
        try:
            gpu = catalog.gpu_name(row["gpu"])
        except KeyError:
            raise TraincastError(f"{where}: field 'gpu': {row['gpu']!r} is not a catalog GPU",
                                 hint=f"{did_you_mean(row['gpu'], known)}"
                                 "traincast hardware list; or add it in a catalog file "
                                 "merged with --catalog (docs/hardware.md)") from None
        row["gpu_written"], row["gpu"] = row["gpu"], gpu
        _check_dtype_on(where, row, catalog)
        named = _row_node(row, nodes)  # the row's or its [node] table's
        node = str(named or catalog.default_node_of(gpu))
        field = "node" if row.get("node") else "gpu"
        if node and node not in catalog.nodes:
            raise TraincastError(f"{where}: field {field!r}: node preset {node!r} is not in the "
                                 "catalog", hint=f"{did_you_mean(node, list(catalog.nodes))}"
                                 "traincast hardware list")
        row["node"] = node
        _check_node_fit(where, row, catalog, named=bool(named))


def _check_dtype_on(where: str, row: Mapping[str, Any], catalog: Catalog) -> None:
    """bf16 needs a bf16 peak and tf32 a TF32 peak on the row's GPU."""
    dtype = row["dtype"]
    if dtype in ("bf16", "tf32") and not getattr(catalog.gpu(row["gpu"]), f"{dtype}_tflops"):
        raise TraincastError(f"{where}: field 'dtype': {row['dtype_written']!r} on "
                             f"{row['gpu']}, which has no {dtype} tensor cores (catalog "
                             f"{dtype}_tflops = 0)", hint="the benchmark ran another precision: "
                             "fp32, or fp16 mixed precision")


def _check_node_fit(where: str, row: Mapping[str, Any], catalog: Catalog,
                    named: bool = True) -> None:
    """The node preset holds the row's GPU, a multi-GPU row has one, and ``nodes`` (when
    given) is ``ceil(gpus / GPUs per node)``: ``gpus`` counts every GPU of every node. A node
    the file does not name (``named`` False: the GPU's ``default_node``) may hold a sibling
    GPU (A100-PCIE-80GB's ``a100-pcie`` holds the 40 GB card): its links are taken, the row's
    GPU priced, as ``predict --gpu`` does."""
    node, gpus = row["node"], int(row["gpus"])
    if not node:
        if gpus > 1:
            raise TraincastError(f"{where}: field 'node': {gpus} GPUs need a node preset",
                                 hint=f"node = \"...\" on the row, or [node] {row['gpu']} = "
                                 "\"...\" (traincast hardware list)")
        return
    preset = catalog.node(node)
    if named and catalog.gpu_name(preset.gpu) != row["gpu"]:
        raise TraincastError(f"{where}: field 'node': {node!r} holds {preset.gpu}, not "
                             f"{row['gpu']}", hint="a node preset of the row's GPU, or no "
                             "node (a single GPU takes its GPU's default node's links)")
    if "nodes" in row and -(-gpus // preset.gpus) != row["nodes"]:
        raise TraincastError(f"{where}: field 'gpus': {gpus} GPUs on {row['nodes']} node(s) of "
                             f"{preset.gpus} ({node})", hint=f"gpus counts all GPUs: "
                             f"{row['nodes']} x {preset.gpus} = {row['nodes'] * preset.gpus}")


def _row_node(row: Mapping[str, Any], nodes: Mapping[str, str]) -> str:
    """The node preset a row runs on: its own ``node``, else ``[node]`` of its GPU, else ""
    (the GPU's default node)."""
    return str(row.get("node") or nodes.get(row["gpu"], ""))


@cache
def _profile(spec: str, batch: int, amp: bool, ops: bool, optimizer: str = "adam",
             seq: int | None = None, attention: str | None = None) -> dict[str, Any]:
    from traincast.features.profile import profile_model

    return profile_model(spec, batch, amp=amp, ops=ops, optimizer=optimizer, seq_len=seq,
                         attention=attention)


PACKAGE_DIR = Path(__file__).resolve().parent
"""Model files shipped with traincast (``squad.py``, ``rnn.py``): a ``file.py:FUNC`` spec found
here runs traincast's own code; one found anywhere else runs the rows file's (``trust_specs``)."""
TRUST_FLAG = "--trust-specs"


def _model_file(model: Mapping[str, Any], spec: str) -> str:
    """A ``file.py:FUNC`` spec with its file found beside the rows file (``base_dir``), else in
    this package; a TraincastError naming the places looked in when it is in neither."""
    file, func = spec.rsplit(":", 1)
    tried = [Path(str(model["base_dir"]), file)] if model.get("base_dir") else []
    tried.append(PACKAGE_DIR / file)
    for path in tried:
        if path.is_file():
            return f"{path}:{func}"
    raise TraincastError(f"model file {file!r} not found (looked in "
                         f"{' and '.join(str(t.parent) for t in tried)})",
                         hint="a path relative to the rows file, or absolute")


def is_shipped_file(path: str | Path) -> bool:
    """Whether ``path`` is one of traincast's own files (under :data:`PACKAGE_DIR`)."""
    return Path(path).resolve().is_relative_to(PACKAGE_DIR)


def _row_field(data: Mapping[str, Any], r: Mapping[str, Any]) -> str:
    """The MODEL spec field a row profiles: ``fp16_spec`` for a mixed-precision row of a
    model that has one, else ``spec``."""
    model = data["model"][r["model"]]
    return "fp16_spec" if r["dtype"] in MIXED and model.get("fp16_spec") else "spec"


def untrusted_specs(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows whose ``file.py:FUNC`` spec would import a Python file that is not
    traincast's own (beside the rows file, or an absolute path): ``row`` (1-based),
    ``model``, ``field``, ``spec`` and ``path``. A spec whose file is nowhere is left to the
    profile step, which names it."""
    out = []
    for i, r in enumerate(data["row"], 1):
        model = {**data["model"][r["model"]], "base_dir": data.get("base_dir", "")}
        field = _row_field(data, r)
        spec = str(model[field])
        if spec.startswith(("zoo:", "hf:")):
            continue
        try:
            path = _model_file(model, spec).rsplit(":", 1)[0]
        except TraincastError:
            continue
        if not is_shipped_file(path):
            out.append({"row": i, "model": r["model"], "field": field, "spec": spec,
                        "path": path})
    return out


def check_trusted(data: Mapping[str, Any]) -> None:
    """Refuse a rows file that would run Python of its own (:func:`untrusted_specs`): a
    TraincastError naming the file, the first such row, its spec and the flag to pass."""
    bad = untrusted_specs(data)
    if bad:
        b = bad[0]
        more = f" (and {len(bad) - 1} more row(s))" if len(bad) > 1 else ""
        raise TraincastError(
            f"{data.get('file', 'published.toml')}: row {b['row']} ([model.{b['model']}] "
            f"{b['field']} = {b['spec']!r}) would import and run {b['path']}{more}; pass "
            f"{TRUST_FLAG} to run Python named in a rows file",
            hint="importing a model file runs its code: pass the flag only for a rows file "
                 "(and the .py files beside it) you trust")


def profile_row(model: Mapping[str, Any], batch: int, amp: bool,
                ops: bool = False) -> dict[str, Any]:
    """Per-iteration features of one replica: the model's profile at ``batch`` (cached; a
    ``file.py:FUNC`` spec is looked up beside the rows file, ``base_dir``, then in this
    package; an ``hf:`` config file or folder beside the rows file is used there
    (``zoo.hf.config_beside``); the step's optimizer from ``optimizer``, Adam by default;
    ``seq`` tokens per sequence and ``attention`` for text models); ``input_bytes`` = 0
    when the benchmark fed synthetic data already on the GPU; ``memory_bytes`` (weights,
    gradients, optimizer state, activations) for the memory check; with ``ops`` also the per-op
    table (``ops``)."""
    spec = str(model["spec"])
    if not spec.startswith(("zoo:", "hf:")):
        spec = _model_file(model, spec)
    elif spec.startswith("hf:") and model.get("base_dir"):
        from traincast.zoo.hf import config_beside

        spec = f"hf:{config_beside(spec[3:], str(model['base_dir']))}"
    rec = _profile(spec, int(batch), bool(amp), bool(ops), str(model.get("optimizer", "adam")),
                   model.get("seq"), model.get("attention"))
    feats: dict[str, Any] = {k: float(rec.get(k) or 0.0) for k in FEATURES
                             if k not in NULLABLE_KEYS or rec.get(k) is not None}
    if model.get("synthetic_inputs"):
        feats = apply_setup(feats, synthetic_inputs=True)
    if rec.get("memory_bytes"):
        feats["memory_bytes"], feats["params"] = rec["memory_bytes"], rec.get("params", 0)
    if ops:
        feats["ops"] = rec["ops"]
    return feats


def apply_setup(feats: Mapping[str, Any], *, synthetic_inputs: bool = False,
                memory_format: str = "nchw", tf32_matmul: bool = False) -> dict[str, Any]:
    """A profile as a benchmark ran it — the one place ``validate --published`` and ``predict``
    (its flags ``--synthetic-inputs``, ``--memory-format``, ``--tf32-matmul``) set the run up:
    ``synthetic_inputs``: the data is made on the GPU, no input copy (``input_bytes`` = 0);
    ``memory_format`` nhwc / channels_last: every op of the per-op table marked ``layout =
    "nhwc"`` (no cuDNN layout transposes); ``tf32_matmul``: fp32 matrix products marked TF32
    (:func:`tf32_matmuls`). The per-op marks need the profile's ``ops``."""
    nhwc = memory_layout(memory_format) == "nhwc"
    out = dict(feats)
    if synthetic_inputs:
        out["input_bytes"] = 0.0
    if out.get("ops") and tf32_matmul:
        out["ops"] = tf32_matmuls(out["ops"])
    if out.get("ops") and nhwc:
        out["ops"] = [dict(o, layout="nhwc") for o in out["ops"]]
    return out


def memory_layout(memory_format: str) -> str:
    """``"nhwc"`` (nhwc, channels_last) or ``"nchw"``: the layout a memory format (one of
    :data:`MEMORY_FORMATS`, any case) gives the ops; another is a TraincastError."""
    fmt = str(memory_format).lower()
    if fmt not in MEMORY_FORMATS:
        raise TraincastError(f"memory format {memory_format!r}: one of {', '.join(MEMORY_FORMATS)}")
    return "nchw" if fmt == "nchw" else "nhwc"


def setup_of(feats: Mapping[str, Any], *, synthetic_inputs: bool, memory_format: str,
             tf32_matmul: bool, per_op_asked: bool = True,
             from_flags: bool = False, amp: bool = False,
             half_model: bool = False, gpu: Any = None) -> dict[str, Any]:
    """The run's setup as both ``predict`` and ``validate --published`` print it: inputs,
    memory format, TF32 matrix products, and how compute is priced (``per_op``: op by op from
    the profile's per-op table, else from its aggregate features; ``no_ops_table``: a profile
    was to be priced op by op, ``per_op_asked``, but carries no per-op table;
    ``from_flags``: the features were typed as flags, ``--flops ...``, no profile; ``amp``:
    mixed precision, asked with ``--amp`` or profiled under autocast; ``half_model``: the
    profile is of a whole-fp16 model, a rows file's ``fp16_spec``, with no autocast casts;
    ``amp_unprofiled``: ``--amp`` on an fp32 per-op table whose record says it was taken
    without autocast, ``"amp": false``, whose products are then priced in 16 bits but whose
    memory-bound ops and memory stay fp32 as recorded, on ``gpu`` when it runs ``--amp`` in
    16 bits (one without a 16-bit peak prices the job in fp32); ``tf32_matmul_no_effect``:
    TF32 products were asked and change nothing, ``tf32_matmul_why``: ``"gpu"`` (``gpu``'s
    entry gives no TF32 peak, ``kernels.tf32_absent``), ``"no faster"`` (its TF32 peak is no
    higher than its fp32 one: ``GPU.math_dtype``) or ``"no fp32 products"`` (mixed
    precision, or a table none of whose products ``feats`` marks TF32); None where TF32 takes
    effect or was not asked)."""
    from traincast.kernels import tf32_absent

    per_op, mixed = bool(feats.get("ops")), bool(amp or feats.get("amp"))
    amp_math = gpu.math_dtype("amp") if gpu is not None else None  # the 16-bit dtype, or fp32
    why = ""
    if tf32_matmul:
        marked = any(o.get("dtype") == "tf32" for o in feats.get("ops") or ())
        why = ("no fp32 products" if per_op and (mixed or not marked) else
               "gpu" if gpu is not None and tf32_absent(gpu) else
               "no faster" if gpu is not None and gpu.math_dtype("tf32") == "fp32" else "")
    return {"inputs": "synthetic" if synthetic_inputs else "copied",
            "memory_format": memory_layout(memory_format), "tf32_matmul": bool(tf32_matmul),
            "per_op": per_op, "from_flags": bool(from_flags),
            "no_ops_table": bool(per_op_asked) and not from_flags and not per_op,
            "amp": mixed, "half_model": bool(half_model),
            "amp_from_profile": bool(feats.get("amp")) and not amp,
            "amp_as_fp32": mixed and amp_math == "fp32",
            "amp_unprofiled": bool(amp) and per_op and feats.get("amp") is False
            and str(feats.get("dtype") or "float32") == "float32"
            and not half_model and not from_flags
            and amp_math != "fp32",
            "tf32_matmul_no_effect": bool(why), "tf32_matmul_why": why or None}


def setup_text(setup: Mapping[str, Any]) -> str:
    """``setup_of`` in words, with the ``predict`` flags that reproduce it."""
    flags = [*(["--synthetic-inputs"] if setup["inputs"] == "synthetic" else []),
             *([f"--memory-format {setup['memory_format']}"]
               if setup["memory_format"] != "nchw" else []),
             *(["--tf32-matmul"] if setup["tf32_matmul"] else []),
             *(["--features FILE --amp"] if setup.get("half_model")
               else ["--amp"] if setup.get("amp") and not setup.get("amp_from_profile")
               else []),
             *([] if setup["per_op"] or setup.get("no_ops_table") or setup.get("from_flags")
               else ["--aggregate"])]
    inputs = ("synthetic (made on the GPU)" if setup["inputs"] == "synthetic"
              else "copied from the host")
    priced = "op by op" if setup["per_op"] else "from aggregate features" + (
        " (these features have no per-op table: traincast profile MODEL -o FILE writes one)"
        if setup.get("no_ops_table") else "")
    return (f"inputs {inputs}, memory format {setup['memory_format']}"
            + (", a whole-fp16 model (fp16_spec: every tensor in 16 bits, no autocast casts; "
               "FILE: its profile), priced at the mixed-precision peak"
               if setup.get("half_model") else
               ", mixed precision" + (" as profiled" if setup.get("amp_from_profile")
                                       else "")
               + (", priced in fp32 on this GPU, which has no 16-bit peak"
                  if setup.get("amp_as_fp32") else
                  " (autocast: matmuls and convolutions in 16 bits)")
               if setup.get("amp") else
               ", fp32 matmuls " + (
                   "fp32 (--tf32-matmul: this GPU has no TF32)"
                   if setup.get("tf32_matmul_why") == "gpu" else
                   "fp32 (--tf32-matmul: this GPU's TF32 is no faster)"
                   if setup.get("tf32_matmul_why") == "no faster" else
                   "fp32 (--tf32-matmul: the table has no fp32 products)"
                   if setup.get("tf32_matmul_no_effect") else
                   "TF32" if setup["tf32_matmul"] else "fp32") + ", fp32 "
               "convolutions TF32 on NVIDIA GPUs whose TF32 is faster than their fp32 (cuDNN's "
               "default; ROCm keeps fp32)")
            + f", compute priced {priced} (predict flags: {' '.join(flags) or 'the defaults'})")


def row_setup(data: Mapping[str, Any], r: Mapping[str, Any]) -> dict[str, bool | str]:
    """The setup keywords of :func:`apply_setup` for one row: its model's ``synthetic_inputs``
    and ``memory_format``; TF32 matrix products for a tf32 row, and for an fp32 row when
    ``[source] fp32_matmul = "tf32"``."""
    model = data["model"][r["model"]]
    return {"synthetic_inputs": bool(model.get("synthetic_inputs")),
            "memory_format": str(model.get("memory_format", "nchw")),
            "tf32_matmul": r["dtype"] == "tf32" or (r["dtype"] == "fp32" and data.get(
                "source", {}).get("fp32_matmul") == "tf32")}


def tf32_matmuls(ops: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The per-op table with its fp32 matrix products (GEMM and attention families) marked
    ``dtype = "tf32"``: what ``torch.backends.cuda.matmul.allow_tf32 = True`` does (set by the
    NGC PyTorch container's ``TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1``; ``[source] fp32_matmul``).
    fp32 convolutions need no mark: they run in TF32 by PyTorch's default
    (``traincast.compute.op_math_dtypes``)."""
    from traincast.features.ops import op_family

    return [dict(o, dtype="tf32") if str(o.get("dtype", "float32")) == "float32"
            and op_family(str(o.get("op", ""))) in MATMUL_FAMILIES else dict(o) for o in ops]


def ddp_overlap(rows: Sequence[Mapping[str, Any]], features: Sequence[Mapping[str, Any]],
                models: Mapping[str, Mapping[str, Any]]) -> NDArray[np.float64]:
    """Overlap fraction ``f`` of each row's gradient all-reduce with compute (``predict``'s
    ``overlap``: ``T = max(T_comp, f T_comm) + (1 - f) T_comm``).

    Data-parallel wrappers all-reduce gradients in buckets of ``b`` bytes, each launched as soon
    as backward has produced its gradients, so all but the last bucket run under the remaining
    backward: ``f = 1 - min(b, W) / W`` with ``W`` = the bytes all-reduced (``weight_bytes +
    embedding_allreduce_bytes``). ``b`` from the model's ``ddp_bucket_bytes`` (PyTorch DDP:
    ``bucket_cap_mb = 25``) or ``ddp_bucket_elements`` times the gradient's bytes per element
    (apex DDP: ``message_size = 10,000,000`` elements; 2 bytes under apex O2 — a mixed row of
    a model with ``fp16_spec`` — else 4). 0 for one GPU or a model without a bucket size."""
    out = np.zeros(len(rows))
    for i, (r, f) in enumerate(zip(rows, features, strict=True)):
        m = models.get(r["model"], {})
        if r["gpus"] <= 1:
            continue
        half = r["dtype"] in MIXED and bool(m.get("fp16_spec"))
        bucket = float(m.get("ddp_bucket_bytes", 0.0)) or \
            float(m.get("ddp_bucket_elements", 0.0)) * (2.0 if half else 4.0)
        emb = f.get("embedding_allreduce_bytes", f.get("embedding_bytes_touched", 0.0))
        w = float(f.get("weight_bytes", 0.0)) + float(emb)
        out[i] = 1.0 - min(bucket, w) / w if bucket > 0 and w > 0 else 0.0
    return out


def row_architectures(rows: Sequence[Mapping[str, Any]], nodes: Mapping[str, str],
                      catalog: Catalog) -> NDArray[np.object_]:
    """Each row's architecture: ``1w1g`` on one GPU, ``allreduce-local`` when its GPUs fit one
    node of its preset (the row's node, ``[node]`` of its GPU, else the GPU's default node),
    else ``allreduce-cluster`` (a ring over ``ceil(n / g)`` nodes through their NICs)."""
    out = []
    for r in rows:
        node = _row_node(r, nodes) or catalog.default_node_of(r["gpu"])
        per_node = catalog.nodes[node].gpus if node in catalog.nodes else r["gpus"]
        out.append("1w1g" if r["gpus"] == 1 else
                   "allreduce-local" if r["gpus"] <= per_node else "allreduce-cluster")
    return np.array(out, dtype=object)


def evaluate_rows(rows: Sequence[Mapping[str, Any]], features: Sequence[Mapping[str, Any]],
                  nodes: Mapping[str, str], catalog: Catalog, strategy: str = "auto",
                  per_op: bool = True, overlap: Any = 0.0) -> dict[str, NDArray[np.float64]]:
    """Predicted iteration time, throughput and error of every row (one model call).

    ``T`` from ``predict_table`` (rows whose features carry ``ops`` are priced op by op when
    ``per_op``; ``overlap`` per row, ``ddp_overlap``; architecture by ``row_architectures``;
    mixed precision for fp16 and bf16 rows); ``X_pred = u * batch_per_gpu * gpus / T`` in the
    row's unit (``u = unit_factor``: 1 for samples/s summed over the GPUs, tokens per sample
    for tokens/s, divided by the GPUs for a per-GPU unit); ``error = X_pred / throughput - 1``.
    """
    from traincast.predict import predict_table

    n = len(rows)
    gpus = np.array([r["gpus"] for r in rows], dtype=np.float64)
    batch = np.array([r["batch_per_gpu"] for r in rows], dtype=np.float64)
    unit = np.array([r.get("unit_factor", 1.0) for r in rows], dtype=np.float64)
    published = np.array([r["throughput"] for r in rows], dtype=np.float64)
    jobs: dict[str, Any] = {
        "architecture": row_architectures(rows, nodes, catalog),
        "n_gpus": gpus,
        "node": np.array([_row_node(r, nodes) for r in rows], dtype=object),
        "gpu_type": np.array([r["gpu"] for r in rows], dtype=object),
        **{k: np.array([f.get(k, np.nan if k in NULLABLE_KEYS else 0.0) for f in features],
                       dtype=np.float64) for k in FEATURES}}
    amp = np.array([r["dtype"] in MIXED for r in rows], dtype=bool)
    tables = {f"row{i}": f for i, f in enumerate(features) if per_op and f.get("ops")}
    jobs["workload"] = np.array([f"row{i}" for i in range(n)], dtype=object)
    bd = predict_table(jobs, catalog, amp=amp, strategy=strategy, overlap=overlap,
                       ops_of=tables.get if tables else None)
    total = np.asarray(bd.total, dtype=np.float64).reshape(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        predicted = unit * batch * gpus / total
    return {"predicted_s": total, "predicted": predicted, "published": published,
            "error": predicted / published - 1.0,
            "comm_s": np.asarray(bd.comm, dtype=np.float64).reshape(n),
            "compute_s": (np.asarray(bd.compute_flop, dtype=np.float64)
                          + np.asarray(bd.compute_mem, dtype=np.float64)).reshape(n)}


def cross_gpu_ratios(rows: Sequence[Mapping[str, Any]], predicted: Sequence[float]
                     ) -> list[dict[str, Any]]:
    """Every pair (A, B) of rows with the same model, dtype and GPU count on two GPUs:
    ``R = X_A / X_B`` published and predicted (each in samples/s over its GPUs: the figure
    over its ``unit_factor``), ``error = R_pred / R_pub - 1``."""
    groups: dict[tuple[str, str, int], list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault((r["model"], r["dtype"], int(r["gpus"])), []).append(i)
    out = []
    for (model, dtype, gpus), idx in groups.items():
        for a, b in combinations(sorted(idx, key=lambda i: rows[i]["gpu"]), 2):
            if rows[a]["gpu"] == rows[b]["gpu"]:
                continue
            ua, ub = rows[a].get("unit_factor", 1.0), rows[b].get("unit_factor", 1.0)
            pub = (rows[a]["throughput"] / ua) / (rows[b]["throughput"] / ub)
            pred = (float(predicted[a]) / ua) / (float(predicted[b]) / ub)
            out.append({"model": model, "dtype": dtype, "gpus": gpus, "gpu_a": rows[a]["gpu"],
                        "gpu_b": rows[b]["gpu"], "published_ratio": pub,
                        "predicted_ratio": pred, "error": pred / pub - 1.0})
    return out


def summarize(errors: Sequence[float | None]) -> dict[str, float]:
    """``n``, median, 90th percentile (linear interpolation) and max of ``|error|`` and the
    signed median (``median_error``) over the finite errors (None counts as missing); NaN
    statistics when there are none."""
    signed = np.asarray([np.nan if x is None else x for x in errors], dtype=np.float64)
    signed = signed[np.isfinite(signed)]
    e = np.abs(signed)
    if not len(e):
        return {"n": 0, "median_abs_error": float("nan"), "p90_abs_error": float("nan"),
                "max_abs_error": float("nan"), "median_error": float("nan")}
    return {"n": int(len(e)), "median_abs_error": float(np.median(e)),
            "p90_abs_error": float(np.percentile(e, 90)), "max_abs_error": float(e.max()),
            "median_error": float(np.median(signed))}


def _llm_table(name: str, keep: Sequence[str], catalog: Catalog) -> dict[str, Any]:
    """A shipped table of the hybrid model (``traincast.parallel.validation.compare_table``)
    as the report carries it: the ``keep`` fields of each row, the summary of ``rel_error``;
    a table that cannot be evaluated is reported (``failed``), not raised: the LLM path is
    validated on its own."""
    try:
        from traincast.parallel.validation import compare_table

        rows = compare_table(name, catalog)
    except Exception as exc:
        return {"rows": [], "failed": f"{type(exc).__name__}: {exc}"}
    return _kept(rows, keep)


def _kept(rows: Sequence[Mapping[str, Any]], keep: Sequence[str]) -> dict[str, Any]:
    """``compare_table`` rows as a report carries them: the ``keep`` fields of each and the
    summary of their ``rel_error``."""
    return {"rows": [{k: r.get(k) for k in keep} for r in rows],
            "summary": summarize([r["rel_error"] for r in rows])}


def _megatron(catalog: Catalog) -> dict[str, Any]:
    keep = ("model", "t", "p", "d", "gpus", "batch", "tflops_per_gpu",
            "predicted_tflops_per_gpu", "rel_error")
    return {**_llm_table("megatron_2021.toml", keep, catalog),
            "source": "Narayanan et al., SC 2021, Table 1 (parallel/megatron_2021.toml)"}


LLM_FOUNDRY_SOURCE = ("MosaicML llm-foundry scripts/train/benchmarking/README.md at commit "
                      "061f2c7c (parallel/llm_foundry.toml)")


def _llm_foundry(catalog: Catalog) -> dict[str, Any]:
    """llm-foundry's MPT tables (``parallel/llm_foundry.toml``): the rows, the summaries of the
    MFU error overall (``summary``), per GPU and precision (``by_gpu_dtype``) and per sequence
    length (``by_seq``), and of the tokens/s error (``tokens_summary``)."""
    keep = ("run", "model", "seq", "gpu", "dtype", "gpus", "batch", "micro_batch",
            "recompute", "mfu_percent", "published_tflops_per_gpu", "predicted_tflops_per_gpu",
            "rel_error", "tokens_per_gpu_s", "predicted_tokens_per_gpu_s", "rel_error_tokens",
            "fits", "memory_gb", "attention")
    out = _llm_table("llm_foundry.toml", keep, catalog)
    rows = out["rows"]
    by_seq = grouped_errors(rows, lambda r: str(r["seq"]), "rel_error")
    return {**out, "source": LLM_FOUNDRY_SOURCE,
            "attention": ", ".join(sorted({str(r["attention"]) for r in rows})),
            "tokens_summary": summarize([r["rel_error_tokens"] for r in rows]),
            "by_gpu_dtype": by_gpu_and_dtype(rows, "rel_error"),
            "by_seq": dict(sorted(by_seq.items(), key=lambda kv: int(kv[0])))}


NEMO_SOURCE = ("NVIDIA NeMo performance summaries: NeMo 24.07 (NVIDIA/NeMo "
               "docs/source/performance/performance_summary.md) and 25.11 / 26.02 "
               "(NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md) "
               "(parallel/nemo.toml)")


LLM_KEEP = ("run", "model", "gpu", "dtype", "gpus", "t", "p", "cp", "d", "batch", "seq",
            "tokens_per_gpu_s", "predicted_tokens_per_gpu_s", "published_tflops_per_gpu",
            "predicted_tflops_per_gpu", "rel_error", "shares", "fits", "memory_gb")
"""The fields of a hybrid-model table's rows that ``validate`` reports (:func:`_llm_rows`)."""


def _llm_rows(out: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The report of a hybrid-model table's rows (``_llm_table``'s ``out``, kept fields
    :data:`LLM_KEEP`): ``source`` and the errors per GPU and precision (``by_gpu_dtype``) of
    ``rel_error`` (tokens/s per GPU for a row that gives only ``tokens_per_gpu_s``, else
    TFLOP/s per GPU) beside the rows and their ``summary``."""
    return {**out, "source": source, "by_gpu_dtype": by_gpu_and_dtype(out["rows"],
                                                                      "rel_error")}


PUBLISHED_LLM_SOURCE = ("BLOOM-176B (Le Scao et al. 2022), OPT-175B (Zhang et al. 2022), "
                        "Megatron-Turing NLG 530B (Smith et al. 2022) and Korthikanti et al. "
                        "(2022), each row with its own source (parallel/published_llm.toml)")


def _published_llm(catalog: Catalog) -> dict[str, Any]:
    """The published large-model runs of ``parallel/published_llm.toml`` (TFLOP/s per GPU)."""
    return _llm_rows(_llm_table("published_llm.toml", LLM_KEEP, catalog), PUBLISHED_LLM_SOURCE)


def _nemo(catalog: Catalog) -> dict[str, Any]:
    """NeMo's FP8 pre-training tables (``parallel/nemo.toml``, compared in tokens/s per GPU)."""
    return _llm_rows(_llm_table("nemo.toml", LLM_KEEP, catalog), NEMO_SOURCE)


def is_llm_table(table: Mapping[str, Any]) -> bool:
    """Whether a rows file's TOML, as parsed, is a table of the hybrid model (``[[row]]``
    tables, no ``[model.NAME]`` tables and no row with ``batch_per_gpu``, as
    ``parallel/published_llm.toml``) rather than of per-op profiles."""
    rows = table.get("row")
    return "model" not in table and isinstance(rows, list) and bool(rows) and not any(
        isinstance(r, dict) and "batch_per_gpu" in r for r in rows)


def _row_features(data: Mapping[str, Any], r: Mapping[str, Any], i: int,
                  progress: Callable[[str], None] | None) -> dict[str, Any]:
    """Profile of one row as its benchmark ran it: a mixed-precision row (fp16, bf16) of a
    model with ``fp16_spec`` profiles that (pure half) model without autocast, other mixed rows
    under autocast; an fp32 row has its matrix products marked TF32 when ``[source]
    fp32_matmul = "tf32"``, a tf32 row always; ``memory_format = "nhwc"`` marks every op
    ``layout = "nhwc"`` (no cuDNN layout transposes). A model that cannot be profiled is a
    TraincastError naming the file, the model table and its spec field."""
    if progress:
        progress(f"profile {r['model']} b{r['batch_per_gpu']} {r['dtype']} "
                 f"({i + 1}/{len(data['row'])})")
    model = {**data["model"][r["model"]], "base_dir": data.get("base_dir", "")}
    half = r["dtype"] in MIXED
    field = _row_field(data, r)
    try:
        feats = profile_row({**model, "spec": model[field]}, r["batch_per_gpu"],
                            half and field == "spec", ops=True)
    except Exception as exc:  # the user's model, file or Hub name: one clear line, not a trace
        what = str(exc) if isinstance(exc, TraincastError) else f"{type(exc).__name__}: {exc}"
        raise TraincastError(f"{data.get('file', 'published.toml')}: [model.{r['model']}] "
                             f"field {field!r} ({model[field]}), row {i + 1} at batch "
                             f"{r['batch_per_gpu']}: {what}",
                             hint=getattr(exc, "hint", "") or f"traincast profile "
                             f"{model[field]} --batch {r['batch_per_gpu']} shows the model "
                             "on its own") from None
    return apply_setup(feats, **row_setup(data, r))


def memory_warnings(rows: Sequence[Mapping[str, Any]], features: Sequence[Mapping[str, Any]],
                    arch: Sequence[str], catalog: Catalog) -> list[str]:
    """One line per row whose profiled footprint per GPU (``predict.memory_fit``: weights,
    gradients, optimizer state and activations at ``batch_per_gpu``) is over
    ``MEMORY_WARN_FACTOR`` times its GPU's memory. The published run fitted, so such a batch is
    likely the whole run's: a global batch written as ``batch_per_gpu`` inflates the footprint
    by the GPU count. The profile's footprint runs somewhat high (every saved activation, no
    allocator reuse): at most 1.17x the GPU's memory on the 54 shipped rows, hence a margin."""
    from traincast.predict import memory_fit

    out = []
    for i, (r, f, a) in enumerate(zip(rows, features, arch, strict=True), 1):
        fit = memory_fit(f, str(a), r["gpus"], catalog.gpu(r["gpu"]).mem_gb)
        if fit and fit["capacity_gb"] and \
                fit["footprint_gb"] > MEMORY_WARN_FACTOR * fit["capacity_gb"]:
            out.append(f"row {i}: batch_per_gpu = {r['batch_per_gpu']} needs "
                       f"{fit['footprint_gb']:.0f} GB per GPU by the profile, the "
                       f"{r['gpu']} has {fit['capacity_gb']:.0f} GB"
                       + (": is it the whole run's batch (global_batch = ...)?"
                          if r["gpus"] > 1 else ": check the batch and the model"))
    return out


def validate_published(catalog: Catalog | None = None, path: str | Path | None = None,
                       strategy: str = "auto",
                       progress: Callable[[str], None] | None = None,
                       trust_specs: bool = False) -> dict[str, Any]:
    """Predict every published row (per-op tables); per-row errors, summary, cross-GPU ratios,
    and the paper's flat-peak model (strategy ``paper``, aggregate features) on the same rows
    as a baseline. The Megatron-LM table (``megatron``) and llm-foundry's MPT tables
    (``llm_foundry``) are reported with the shipped rows, not with a rows file of your own
    (``path``).

    A ``file.py:FUNC`` spec of a rows file imports (runs) that Python file; with
    ``trust_specs`` False a rows file that names one other than traincast's own is refused
    before anything runs (:func:`check_trusted`; ``traincast validate --rows`` passes False
    unless ``--trust-specs``). A rows file of the hybrid model's form (:func:`is_llm_table`) is
    priced by it instead, its errors raised: ``{"file", "llm_rows"}`` (:func:`_llm_rows`).
    The file is read and parsed once, for either model."""
    catalog = catalog or load_catalog()
    table = None if path is None else _read_table(path)
    if table is not None and is_llm_table(table):  # a table of the hybrid model: no profiles
        from traincast.parallel.validation import compare_table

        return {"file": str(path), "llm_rows": _llm_rows(
            _kept(compare_table(path, catalog, table=table), LLM_KEEP), "")}
    data = load_published(path, table)
    if not trust_specs:
        check_trusted(data)
    check_hardware(data, catalog)
    rows = data["row"]
    features = [_row_features(data, r, i, progress) for i, r in enumerate(rows)]
    overlap = ddp_overlap(rows, features, data["model"])
    res = evaluate_rows(rows, features, data.get("node", {}), catalog, strategy,
                        overlap=overlap)
    paper = evaluate_rows(rows, features, data.get("node", {}), catalog, "paper", per_op=False)
    arch = row_architectures(rows, data.get("node", {}), catalog)
    table = [{**{k: r[k] for k in ("model", "gpu", "gpus", "dtype", "batch_per_gpu", "unit",
                                   "citation", "node")},
              "dtype_written": r.get("dtype_written", r["dtype"]),
              "architecture": str(arch[i]),
              "published": float(res["published"][i]),
              "predicted": float(res["predicted"][i]),
              "predicted_s": float(res["predicted_s"][i]),
              "comm_share": float(res["comm_s"][i] / res["predicted_s"][i]),
              "error": float(res["error"][i]),
              "paper_error": float(paper["error"][i]),
              "setup": setup_of(features[i], **row_setup(data, r),
                                amp=r["dtype"] in MIXED,
                                half_model=_row_field(data, r) == "fp16_spec",
                                gpu=catalog.gpu(r["gpu"]))}
             for i, r in enumerate(rows)]
    warnings = memory_warnings(rows, features, arch, catalog)
    ratios = cross_gpu_ratios(rows, res["predicted"])
    summary = summarize(res["error"])
    ratio_summary = summarize([q["error"] for q in ratios])
    within = [abs(q["error"]) <= RATIO_TARGET for q in ratios if np.isfinite(q["error"])]
    return {"file": data["file"], "source": data.get("source", {}), "strategy": strategy,
            "rows": table,
            "summary": summary, "paper_summary": summarize(paper["error"]),
            "by_gpu_dtype": by_gpu_and_dtype(table), "warnings": warnings,
            "ratios": ratios, "ratio_summary": ratio_summary,
            "ratios_within_target": int(sum(within)), "ratios_total": len(within),
            "targets_met": bool(summary["median_abs_error"] <= MEDIAN_TARGET and within
                                and all(within)),
            **({} if path else {"megatron": _megatron(catalog),
                                "published_llm": _published_llm(catalog),
                                "llm_foundry": _llm_foundry(catalog),
                                "nemo": _nemo(catalog)})}


_pct = partial(fmt_pct, sign=True, missing="–")  # signed errors


def _num(x: float) -> str:
    """A throughput as tables print it: whole numbers from 100 up, else 3 significant digits."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _ratio_lines(out: Mapping[str, Any]) -> list[str]:
    q = out["ratio_summary"]
    if not out["ratios"]:
        return ["Cross-GPU ratios: none (no two GPUs share a model, precision and GPU count)."]
    lines = [f"Cross-GPU ratios: {out['ratios_within_target']} of {out['ratios_total']} within "
             f"{100 * RATIO_TARGET:.0f}%; median |error| {100 * q['median_abs_error']:.1f}%, "
             f"p90 {100 * q['p90_abs_error']:.1f}%, max {100 * q['max_abs_error']:.1f}%.", "",
             "| model | dtype | GPUs | A / B | published ratio | predicted ratio | error |",
             "|---|---|---|---|---|---|---|"]
    for r in out["ratios"]:
        lines.append(f"| {r['model']} | {r['dtype']} | {r['gpus']} | {r['gpu_a']} / "
                     f"{r['gpu_b']} | {r['published_ratio']:.2f} | {r['predicted_ratio']:.2f} "
                     f"| {_pct(r['error'])} |")
    return lines


def grouped_errors(rows: Sequence[Mapping[str, Any]], label: Callable[[Mapping[str, Any]], str],
                   key: str = "error") -> dict[str, dict[str, float]]:
    """``summarize`` of the rows' ``key`` per group (``label(row)``), in the order the rows
    first name the groups."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        groups.setdefault(label(r), []).append(r[key])
    return {k: summarize(v) for k, v in groups.items()}


def by_gpu_and_dtype(rows: Sequence[Mapping[str, Any]],
                     key: str = "error") -> dict[str, dict[str, float]]:
    """``summarize`` of the rows' errors (``key``) per GPU and precision (key ``"GPU dtype"``,
    sorted)."""
    return dict(sorted(grouped_errors(rows, lambda r: f"{r['gpu']} {r['dtype']}", key).items()))


def render_markdown(out: Mapping[str, Any]) -> str:
    """The per-row table, the summary (also per GPU and precision) and the cross-GPU ratios as
    Markdown (docs/validation.md, "Published throughputs"). A precision written otherwise in
    the rows file shows as ``dtype (as written)``; a row over several nodes as ``GPUs
    (allreduce-cluster)``. A hybrid-model rows file's report (``llm_rows``) as the NeMo
    section is."""
    if "llm_rows" in out:
        return "\n".join(_nemo_lines(out["llm_rows"], f"Rows of {out['file']}")).strip() + "\n"
    lines = ["| model | GPU | GPUs | dtype | batch/GPU | published | predicted | error | "
             "paper model error | comm share |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in out["rows"]:
        dtype, written = r["dtype"], r.get("dtype_written", r["dtype"])
        dtype += f" ({written})" if written != dtype else ""
        gpus = f"{r['gpus']}" + (" (allreduce-cluster)"
                                 if r.get("architecture") == "allreduce-cluster" else "")
        lines.append(f"| {r['model']} | {r['gpu']} | {gpus} | {dtype} | "
                     f"{r['batch_per_gpu']} | {_num(r['published'])} {r['unit']} | "
                     f"{_num(r['predicted'])} | {_pct(r['error'])} | {_pct(r['paper_error'])} | "
                     f"{100 * r['comm_share']:.0f}% |")
    s, p = out["summary"], out["paper_summary"]
    lines += ["", f"{s['n']} rows: median |error| **{100 * s['median_abs_error']:.1f}%**, p90 "
              f"{100 * s['p90_abs_error']:.1f}%, max {100 * s['max_abs_error']:.1f}% (compute "
              f"strategy `{out['strategy']}`); the paper's flat-peak model: median "
              f"{100 * p['median_abs_error']:.1f}%, p90 {100 * p['p90_abs_error']:.1f}%.",
              "", "predicted: the throughput forecast, in the published unit; error = predicted "
              "throughput / published - 1 (+: the forecast is faster than published); paper "
              "model error: the same for the paper's flat-peak model; comm share: "
              "communication's share of the predicted iteration.", ""]
    groups = out.get("by_gpu_dtype") or by_gpu_and_dtype(out["rows"])
    lines += ["| GPU | dtype | rows | median abs. error | max abs. error |",
              "|---|---|---|---|---|"]
    for key, g in groups.items():
        gpu, dtype = key.rsplit(" ", 1)
        lines.append(f"| {gpu} | {dtype} | {g['n']} | {100 * g['median_abs_error']:.1f}% | "
                     f"{100 * g['max_abs_error']:.1f}% |")
    setups = {f"{r['model']} {r['dtype']}": r["setup"] for r in out["rows"] if r.get("setup")}
    if setups:
        lines += ["", "Setup (as `predict` runs it with the flags named):", "",
                  *(f"* {k}: {setup_text(v)}" for k, v in setups.items())]
    lines += ["", *_ratio_lines(out)]
    if out.get("warnings"):
        lines += ["", "Warnings:", *(f"* {w}" for w in out["warnings"])]
    mg = out.get("megatron", {})
    if mg.get("rows"):
        ms = mg["summary"]
        lines += ["", f"Megatron-LM SC'21 Table 1 ({len(mg['rows'])} rows, per-GPU TFLOP/s): "
                  f"median |error| {100 * ms['median_abs_error']:.1f}%, p90 "
                  f"{100 * ms['p90_abs_error']:.1f}%, max {100 * ms['max_abs_error']:.1f}% "
                  "(error = predicted / published TFLOP/s per GPU - 1)."]
    elif mg.get("failed"):
        lines += ["", f"Megatron-LM SC'21 Table 1: not evaluated ({mg['failed']})."]
    from traincast.parallel.validation import CHECK_TITLES

    lines += _nemo_lines(out.get("published_llm", {}), CHECK_TITLES["published_llm.toml"])
    lines += _llm_foundry_lines(out.get("llm_foundry", {}))
    lines += _nemo_lines(out.get("nemo", {}))
    return "\n".join(lines)


def _error_table(first: Sequence[str], groups: Mapping[str, Mapping[str, float]],
                 split: Callable[[str], Sequence[str]]) -> list[str]:
    """A Markdown table of group summaries: the ``first`` columns (``split`` of the group's
    key), rows, median and worst ``|error|`` and the signed median."""
    head = [*first, "rows", "median abs. error", "worst abs. error", "signed median"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, g in groups.items():
        lines.append("| " + " | ".join(split(key)) + f" | {g['n']} | "
                     f"{100 * g['median_abs_error']:.1f}% | {100 * g['max_abs_error']:.1f}% | "
                     f"{_pct(g['median_error'])} |")
    return lines


def _llm_foundry_lines(lf: Mapping[str, Any]) -> list[str]:
    """The llm-foundry section of ``render_markdown`` (docs/validation.md, "MosaicML
    llm-foundry MPT tables"): the summary, per GPU and precision, per sequence length, and the
    largest misses."""
    if lf.get("failed"):
        return ["", f"MosaicML llm-foundry MPT tables: not evaluated ({lf['failed']})."]
    if not lf.get("rows"):
        return []
    s, tok = lf["summary"], lf["tokens_summary"]
    worst = sorted(lf["rows"], key=lambda r: -abs(r["rel_error"]))[:3]
    from traincast.parallel.hybrid import ATTENTION_WORDS

    att = lf.get("attention", "")
    att_text = (f"; attention {att}" + (f" ({ATTENTION_WORDS[att]})" if att in ATTENTION_WORDS
                                        else "")) if att else ""
    return ["", f"MosaicML llm-foundry MPT tables ({s['n']} rows, MFU; checks only, nothing "
            f"fitted; {lf['source']}{att_text}): median |error| "
            f"{100 * s['median_abs_error']:.1f}%, p90 {100 * s['p90_abs_error']:.1f}%, worst "
            f"{100 * s['max_abs_error']:.1f}%, signed median {_pct(s['median_error'])}; on "
            f"tokens/s per GPU: median |error| "
            f"{100 * tok['median_abs_error']:.1f}%. error = predicted model TFLOP/s / (MFU x "
            "peak) - 1 (+: the forecast is faster).", "",
            *_error_table(("GPU", "dtype"), lf["by_gpu_dtype"], lambda k: k.rsplit(" ", 1)),
            "", *_error_table(("sequence",), lf["by_seq"], lambda k: (k,)), "",
            "Largest misses: " + "; ".join(f"{r['run']} {_pct(r['rel_error'])}"
                                           for r in worst) + "."]


def _nemo_lines(nm: Mapping[str, Any],
                title: str = "NVIDIA NeMo performance tables") -> list[str]:
    """The NeMo section of ``render_markdown`` (docs/validation.md, "NVIDIA NeMo performance
    tables"), or of any hybrid-model table under ``title``: the summary, per GPU and
    precision, and every row with its layout, the tensor- and data-parallel shares of the
    predicted step (in series: the model overlaps none) and the error in tokens/s per GPU, or
    in TFLOP/s per GPU for rows that publish those (a table of both marks each cell)."""
    if nm.get("failed"):
        return ["", f"{title}: not evaluated ({nm['failed']})."]
    if not nm.get("rows"):
        return []
    s = nm["summary"]
    tflops = sum(r.get("published_tflops_per_gpu") is not None for r in nm["rows"])
    unit = ("tokens/s per GPU" if not tflops else "TFLOP/s per GPU" if tflops == len(nm["rows"])
            else "tokens/s or TFLOP/s per GPU, as each row publishes")
    lines = ["", f"{title} ({s['n']} rows, {unit}; checks "
             f"only, nothing fitted{'; ' + nm['source'] if nm.get('source') else ''}): "
             "median |error| "
             f"{100 * s['median_abs_error']:.1f}%, p90 {100 * s['p90_abs_error']:.1f}%, worst "
             f"{100 * s['max_abs_error']:.1f}%, signed median {_pct(s['median_error'])}. error "
             f"= predicted / published {unit} - 1 (+: the forecast is faster); t / p / "
             "cp / d: tensor, pipeline, context and data-parallel sizes; communication share: "
             "of the predicted step, tensor- and data-parallel.", "",
             *_error_table(("GPU", "dtype"), nm["by_gpu_dtype"], lambda k: k.rsplit(" ", 1)),
             "", f"| run | GPU | GPUs | t / p / cp / d | published {unit} | predicted | "
             "error | communication share: tp / dp |", "|---|---|---|---|---|---|---|---|"]
    for r in nm["rows"]:
        tokens = r.get("published_tflops_per_gpu") is None
        published, predicted = ((r["tokens_per_gpu_s"], r["predicted_tokens_per_gpu_s"]) if tokens
                                else (r["published_tflops_per_gpu"],
                                      r["predicted_tflops_per_gpu"]))
        cell = "" if not tflops or tflops == len(nm["rows"]) else \
            " tokens/s" if tokens else " TFLOP/s"
        lines.append(f"| {r.get('run') or r['model']} | {r['gpu']} | {r['gpus']} | {r['t']} / "
                     f"{r['p']} / {r['cp']} / {r['d']} | {_num(published)}{cell} | "
                     f"{_num(predicted)}{cell} | {_pct(r['rel_error'])} | "
                     f"{100 * r['shares']['comm_tp']:.0f}% / "
                     f"{100 * r['shares']['comm_dp']:.0f}% |")
    return lines
