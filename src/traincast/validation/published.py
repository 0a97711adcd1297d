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
beside it with its own error (predicted / published per-GPU TFLOP/s - 1).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping, Sequence
from functools import cache, partial
from importlib import resources
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from traincast.errors import TraincastError
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.jobs import FEATURES
from traincast.units import fmt_pct

__all__ = ["MEDIAN_TARGET", "RATIO_TARGET", "cross_gpu_ratios", "ddp_overlap", "evaluate_rows",
           "load_published", "profile_row", "render_markdown", "summarize", "tf32_matmuls",
           "validate_published"]

MEDIAN_TARGET = 0.10  # median |error| of the rows
RATIO_TARGET = 0.15  # every cross-GPU ratio within this
DTYPES = ("fp16", "fp32")
ROW_FIELDS: dict[str, type | tuple[type, ...]] = {
    "model": str, "gpu": str, "gpus": int, "dtype": str, "batch_per_gpu": int,
    "throughput": (int, float), "unit": str, "citation": str}
NULLABLE_KEYS = ("embedding_allreduce_bytes",)  # absent = embedding_bytes_touched
MATMUL_FAMILIES = ("gemm", "attention")


def _path(path: str | Path | None) -> Path | Any:
    return Path(path) if path else resources.files("traincast.validation").joinpath(
        "published.toml")


def load_published(path: str | Path | None = None) -> dict[str, Any]:
    """The parsed table (``source``, ``model``, ``node``, ``row``), each row checked.

    A missing or mistyped field, an unknown model or dtype, or a non-positive number is a
    TraincastError naming the file, the row (1-based) and the field.
    """
    src = _path(path)
    name = str(path) if path else "published.toml"
    try:
        data = tomllib.loads(src.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise TraincastError(f"{name}: cannot be read ({exc})") from None
    data["file"] = name
    data["base_dir"] = str(Path(path).resolve().parent) if path else ""
    models = data.get("model", {})
    rows = data.get("row", [])
    if not rows:
        raise TraincastError(f"{name}: no [[row]] tables")
    for i, row in enumerate(rows, 1):
        for key, kind in ROW_FIELDS.items():
            value = row.get(key)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise TraincastError(f"{name}: row {i}: field {key!r} missing or not "
                                     f"{getattr(kind, '__name__', 'a number')}",
                                     hint=f"every [[row]] needs {', '.join(ROW_FIELDS)}")
        if row["model"] not in models:
            raise TraincastError(f"{name}: row {i}: field 'model': unknown model "
                                 f"{row['model']!r}", hint=f"[model.*]: {', '.join(models)}")
        if row["dtype"] not in DTYPES:
            raise TraincastError(f"{name}: row {i}: field 'dtype' must be one of {DTYPES}")
        for key in ("gpus", "batch_per_gpu", "throughput"):
            if row[key] <= 0:
                raise TraincastError(f"{name}: row {i}: field {key!r} must be positive")
        if not row["citation"].strip():
            raise TraincastError(f"{name}: row {i}: field 'citation' is empty")
        if "node" in row and not isinstance(row["node"], str):
            raise TraincastError(f"{name}: row {i}: field 'node' must be a node preset name")
    return data


def check_hardware(data: Mapping[str, Any], catalog: Catalog) -> None:
    """Every row's GPU and node (the row's ``node``, else ``[node]`` of its GPU, else the GPU's
    default node) must be in the catalog: a TraincastError naming the file, row and field."""
    from traincast.errors import UnknownNameError

    name = data.get("file", "published.toml")
    for i, row in enumerate(data["row"], 1):
        try:
            catalog.gpu(row["gpu"])
        except UnknownNameError:
            raise TraincastError(f"{name}: row {i}: field 'gpu': {row['gpu']!r} is not a "
                                 "catalog GPU", hint="traincast hardware list; or merge a "
                                 "catalog file with --catalog") from None
        node = _row_node(row, data.get("node", {}))
        if node and node not in catalog.nodes:
            raise TraincastError(f"{name}: row {i}: field 'node': {node!r} is not a catalog "
                                 "node preset", hint="traincast hardware list")


def _row_node(row: Mapping[str, Any], nodes: Mapping[str, str]) -> str:
    """The node preset a row runs on: its own ``node``, else ``[node]`` of its GPU, else ""
    (the GPU's default node)."""
    return str(row.get("node") or nodes.get(row["gpu"], ""))


@cache
def _profile(spec: str, batch: int, amp: bool, ops: bool) -> dict[str, Any]:
    from traincast.features.profile import profile_model

    return profile_model(spec, batch, amp=amp, ops=ops)


def profile_row(model: Mapping[str, Any], batch: int, amp: bool,
                ops: bool = False) -> dict[str, Any]:
    """Per-iteration features of one replica: the model's profile at ``batch`` (cached; a
    ``file.py:FUNC`` spec is looked up beside the rows file, ``base_dir``, then in this
    package); ``input_bytes`` = 0 when the benchmark fed synthetic data already on the GPU;
    with ``ops`` also the per-op table (``ops``)."""
    spec = str(model["spec"])
    if not spec.startswith(("zoo:", "hf:")):
        file, func = spec.rsplit(":", 1)
        mine = Path(str(model.get("base_dir") or "."), file)
        found = mine if model.get("base_dir") and mine.is_file() else Path(__file__).with_name(file)
        spec = f"{found}:{func}"
    rec = _profile(spec, int(batch), bool(amp), bool(ops))
    feats: dict[str, Any] = {k: float(rec.get(k) or 0.0) for k in FEATURES
                             if k not in NULLABLE_KEYS or rec.get(k) is not None}
    if model.get("synthetic_inputs"):
        feats["input_bytes"] = 0.0
    if ops:
        feats["ops"] = rec["ops"]
    return feats


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
    (apex DDP: ``message_size = 10,000,000`` elements; 2 bytes under apex O2, else 4).
    0 for one GPU or a model without a bucket size."""
    out = np.zeros(len(rows))
    for i, (r, f) in enumerate(zip(rows, features, strict=True)):
        m = models.get(r["model"], {})
        if r["gpus"] <= 1:
            continue
        half = r["dtype"] == "fp16" and bool(m.get("fp16_spec"))
        bucket = float(m.get("ddp_bucket_bytes", 0.0)) or \
            float(m.get("ddp_bucket_elements", 0.0)) * (2.0 if half else 4.0)
        emb = f.get("embedding_allreduce_bytes", f.get("embedding_bytes_touched", 0.0))
        w = float(f.get("weight_bytes", 0.0)) + float(emb)
        out[i] = 1.0 - min(bucket, w) / w if bucket > 0 and w > 0 else 0.0
    return out


def evaluate_rows(rows: Sequence[Mapping[str, Any]], features: Sequence[Mapping[str, Any]],
                  nodes: Mapping[str, str], catalog: Catalog, strategy: str = "auto",
                  per_op: bool = True, overlap: Any = 0.0) -> dict[str, NDArray[np.float64]]:
    """Predicted iteration time, throughput and error of every row (one model call).

    ``T`` from ``predict_table`` (rows whose features carry ``ops`` are priced op by op when
    ``per_op``; ``overlap`` per row, ``ddp_overlap``); ``X_pred = batch_per_gpu * gpus / T``;
    ``error = X_pred / throughput - 1``.
    """
    from traincast.predict import predict_table

    n = len(rows)
    gpus = np.array([r["gpus"] for r in rows], dtype=np.float64)
    batch = np.array([r["batch_per_gpu"] for r in rows], dtype=np.float64)
    published = np.array([r["throughput"] for r in rows], dtype=np.float64)
    jobs: dict[str, Any] = {
        "architecture": np.array(["1w1g" if g == 1 else "allreduce-local" for g in gpus],
                                 dtype=object),
        "n_gpus": gpus,
        "node": np.array([_row_node(r, nodes) for r in rows], dtype=object),
        "gpu_type": np.array([r["gpu"] for r in rows], dtype=object),
        **{k: np.array([f.get(k, np.nan if k in NULLABLE_KEYS else 0.0) for f in features],
                       dtype=np.float64) for k in FEATURES}}
    amp = np.array([r["dtype"] == "fp16" for r in rows], dtype=bool)
    tables = {f"row{i}": f for i, f in enumerate(features) if per_op and f.get("ops")}
    jobs["workload"] = np.array([f"row{i}" for i in range(n)], dtype=object)
    bd = predict_table(jobs, catalog, amp=amp, strategy=strategy, overlap=overlap,
                       ops_of=tables.get if tables else None)
    total = np.asarray(bd.total, dtype=np.float64).reshape(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        predicted = batch * gpus / total
    return {"predicted_s": total, "predicted": predicted, "published": published,
            "error": predicted / published - 1.0,
            "comm_s": np.asarray(bd.comm, dtype=np.float64).reshape(n),
            "compute_s": (np.asarray(bd.compute_flop, dtype=np.float64)
                          + np.asarray(bd.compute_mem, dtype=np.float64)).reshape(n)}


def cross_gpu_ratios(rows: Sequence[Mapping[str, Any]], predicted: Sequence[float]
                     ) -> list[dict[str, Any]]:
    """Every pair (A, B) of rows with the same model, dtype and GPU count on two GPUs:
    ``R = X_A / X_B`` published and predicted, ``error = R_pred / R_pub - 1``."""
    groups: dict[tuple[str, str, int], list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault((r["model"], r["dtype"], int(r["gpus"])), []).append(i)
    out = []
    for (model, dtype, gpus), idx in groups.items():
        for a, b in combinations(sorted(idx, key=lambda i: rows[i]["gpu"]), 2):
            if rows[a]["gpu"] == rows[b]["gpu"]:
                continue
            pub = rows[a]["throughput"] / rows[b]["throughput"]
            pred = float(predicted[a]) / float(predicted[b])
            out.append({"model": model, "dtype": dtype, "gpus": gpus, "gpu_a": rows[a]["gpu"],
                        "gpu_b": rows[b]["gpu"], "published_ratio": pub,
                        "predicted_ratio": pred, "error": pred / pub - 1.0})
    return out


def summarize(errors: Sequence[float]) -> dict[str, float]:
    """``n``, median, 90th percentile (linear interpolation) and max of ``|error|`` over the
    finite errors; NaN statistics when there are none."""
    e = np.abs(np.asarray(errors, dtype=np.float64))
    e = e[np.isfinite(e)]
    if not len(e):
        return {"n": 0, "median_abs_error": float("nan"), "p90_abs_error": float("nan"),
                "max_abs_error": float("nan")}
    return {"n": int(len(e)), "median_abs_error": float(np.median(e)),
            "p90_abs_error": float(np.percentile(e, 90)), "max_abs_error": float(e.max())}


def _megatron(catalog: Catalog) -> dict[str, Any]:
    try:
        from traincast.parallel.validation import megatron_2021

        rows = megatron_2021(catalog)
    except Exception as exc:  # reported, not raised: the LLM path is validated on its own
        return {"rows": [], "failed": f"{type(exc).__name__}: {exc}"}
    keep = ("model", "t", "p", "d", "gpus", "batch", "tflops_per_gpu",
            "predicted_tflops_per_gpu", "rel_error")
    return {"rows": [{k: r[k] for k in keep} for r in rows],
            "summary": summarize([r["rel_error"] for r in rows]),
            "source": "Narayanan et al., SC 2021, Table 1 (parallel/megatron_2021.toml)"}


def _row_features(data: Mapping[str, Any], r: Mapping[str, Any], i: int,
                  progress: Callable[[str], None] | None) -> dict[str, Any]:
    """Profile of one row as its benchmark ran it: an fp16 row of a model with ``fp16_spec``
    profiles that (pure fp16) model without autocast, other fp16 rows under autocast; an fp32
    row has its matrix products marked TF32 when ``[source] fp32_matmul = "tf32"``."""
    if progress:
        progress(f"profile {r['model']} b{r['batch_per_gpu']} {r['dtype']} "
                 f"({i + 1}/{len(data['row'])})")
    model = {**data["model"][r["model"]], "base_dir": data.get("base_dir", "")}
    half = r["dtype"] == "fp16"
    if half and model.get("fp16_spec"):
        feats = profile_row({**model, "spec": model["fp16_spec"]}, r["batch_per_gpu"], False,
                            ops=True)
    else:
        feats = profile_row(model, r["batch_per_gpu"], half, ops=True)
    if not half and data.get("source", {}).get("fp32_matmul") == "tf32":
        feats = {**feats, "ops": tf32_matmuls(feats["ops"])}
    return feats


def validate_published(catalog: Catalog | None = None, path: str | Path | None = None,
                       strategy: str = "auto",
                       progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Predict every published row (per-op tables); per-row errors, summary, cross-GPU ratios,
    and the paper's flat-peak model (strategy ``paper``, aggregate features) on the same rows
    as a baseline."""
    catalog = catalog or load_catalog()
    data = load_published(path)
    check_hardware(data, catalog)
    rows = data["row"]
    features = [_row_features(data, r, i, progress) for i, r in enumerate(rows)]
    overlap = ddp_overlap(rows, features, data["model"])
    res = evaluate_rows(rows, features, data.get("node", {}), catalog, strategy,
                        overlap=overlap)
    paper = evaluate_rows(rows, features, data.get("node", {}), catalog, "paper", per_op=False)
    table = [{**{k: r[k] for k in ("model", "gpu", "gpus", "dtype", "batch_per_gpu", "unit",
                                   "citation")},
              "published": float(res["published"][i]),
              "predicted": float(res["predicted"][i]),
              "predicted_s": float(res["predicted_s"][i]),
              "comm_share": float(res["comm_s"][i] / res["predicted_s"][i]),
              "error": float(res["error"][i]),
              "paper_error": float(paper["error"][i])} for i, r in enumerate(rows)]
    ratios = cross_gpu_ratios(rows, res["predicted"])
    summary = summarize(res["error"])
    ratio_summary = summarize([q["error"] for q in ratios])
    within = [abs(q["error"]) <= RATIO_TARGET for q in ratios if np.isfinite(q["error"])]
    return {"file": data["file"], "source": data.get("source", {}), "strategy": strategy,
            "rows": table,
            "summary": summary, "paper_summary": summarize(paper["error"]),
            "ratios": ratios, "ratio_summary": ratio_summary,
            "ratios_within_target": int(sum(within)), "ratios_total": len(within),
            "targets_met": bool(summary["median_abs_error"] <= MEDIAN_TARGET and within
                                and all(within)),
            "megatron": _megatron(catalog)}


_pct = partial(fmt_pct, sign=True, missing="–")  # signed errors


def render_markdown(out: Mapping[str, Any]) -> str:
    """The per-row table, the summary and the cross-GPU ratios as Markdown (docs/validation.md,
    "Published throughputs")."""
    lines = ["| model | GPU | GPUs | dtype | batch/GPU | published | predicted | error | "
             "paper model error | comm share |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in out["rows"]:
        lines.append(f"| {r['model']} | {r['gpu']} | {r['gpus']} | {r['dtype']} | "
                     f"{r['batch_per_gpu']} | {r['published']:.0f} {r['unit']} | "
                     f"{r['predicted']:.0f} | {_pct(r['error'])} | {_pct(r['paper_error'])} | "
                     f"{100 * r['comm_share']:.0f}% |")
    s, p, q = out["summary"], out["paper_summary"], out["ratio_summary"]
    lines += ["", f"{s['n']} rows: median |error| **{100 * s['median_abs_error']:.1f}%**, p90 "
              f"{100 * s['p90_abs_error']:.1f}%, max {100 * s['max_abs_error']:.1f}% (compute "
              f"strategy `{out['strategy']}`); the paper's flat-peak model: median "
              f"{100 * p['median_abs_error']:.1f}%, p90 {100 * p['p90_abs_error']:.1f}%.",
              f"Cross-GPU ratios: {out['ratios_within_target']} of {out['ratios_total']} within "
              f"{100 * RATIO_TARGET:.0f}%; median |error| {100 * q['median_abs_error']:.1f}%, "
              f"p90 {100 * q['p90_abs_error']:.1f}%, max {100 * q['max_abs_error']:.1f}%.", "",
              "| model | dtype | GPUs | A / B | published ratio | predicted ratio | error |",
              "|---|---|---|---|---|---|---|"]
    for r in out["ratios"]:
        lines.append(f"| {r['model']} | {r['dtype']} | {r['gpus']} | {r['gpu_a']} / "
                     f"{r['gpu_b']} | {r['published_ratio']:.2f} | {r['predicted_ratio']:.2f} "
                     f"| {_pct(r['error'])} |")
    mg = out.get("megatron", {})
    if mg.get("rows"):
        ms = mg["summary"]
        lines += ["", f"Megatron-LM SC'21 Table 1 ({len(mg['rows'])} rows, per-GPU TFLOP/s): "
                  f"median |error| {100 * ms['median_abs_error']:.1f}%, p90 "
                  f"{100 * ms['p90_abs_error']:.1f}%, max {100 * ms['max_abs_error']:.1f}%."]
    elif mg.get("failed"):
        lines += ["", f"Megatron-LM SC'21 Table 1: not evaluated ({mg['failed']})."]
    return "\n".join(lines)
