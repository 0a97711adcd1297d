"""The report's words and tables: findings, the study's tables, assumptions and inputs.

Each function reads a :class:`~traincast.report.inputs.Study` and returns HTML built with
:mod:`traincast.report.html` (which escapes every value).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from traincast.hardware.catalog import Catalog
from traincast.model import BOTTLENECK_NAME, COMPONENT_NAME, COMPONENTS
from traincast.report import html as H
from traincast.report.inputs import Study, floats
from traincast.resolve import hardware_of
from traincast.units import fmt_amount, fmt_bytes, fmt_pct, fmt_seconds, fmt_x, plural

TOP_ROWS = 20
SCENARIO_KEYS = ("matched", "predicted", "not_applied", "sped_up_share", "slowed_down_share",
                 "mean_speedup", "median_speedup", "gpu_weighted_mean_speedup",
                 "gpu_time_weighted_mean_speedup", "gpu_time_saved_share")
SCENARIO_LABELS = {"predicted": "priced", "not_applied": "not fit"}
"""The what-if table's columns (``whatif`` prints the same names: priced = matched jobs with a
prediction, which the shares and speedups are over; not fit = those whose change does not
fit)."""
RECOMMEND_KEYS = {"job_id": "job_id", "architecture": "architecture", "node": "node",
                  "n_gpus": "GPUs", "base_total_s": "iteration", "base_bottleneck":
                  "bottleneck", "arch_architecture": "best here", "arch_speedup": "speedup here",
                  "best_speedup": "best speedup", "best_reason": "best anywhere (why)"}
NOT_SENTENCES = {"sample"}


def label(key: str) -> str:
    """A JSON key as a column or row name for people: words, ``GPU`` capitalized, the unit
    left to the cell (:func:`cell`): ``gpu_time_saved_share`` -> ``GPU time saved share``,
    ``gpu_time_s`` -> ``GPU time``."""
    if key == "gpu":
        return "catalog GPU"
    if key.endswith("end_s"):  # a time on the trace's clock
        return f"{label(key.removesuffix('_s'))} (trace clock)"
    words = key.removesuffix("_s").replace("_", " ")
    return " ".join("GPU" if w == "gpu" else "GPUs" if w == "gpus" else w
                    for w in words.split()) or key


def cell(key: str, value: Any) -> Any:
    """A JSON value in the unit its key names: ``*_share*`` or a utilization (``*util*``) a
    percentage, ``*gpu_time*_s`` GPU-hours, another ``*_s`` seconds (not a time on the trace's
    clock, ``*end_s``), ``*speedup*`` a factor, ``*_bytes`` GB; anything else as it is
    (``html.fmt_value`` formats it)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return value
    if key.endswith("end_s"):  # a time on the trace's clock (trace_end_s), not a duration
        return f"{H.fmt_value(float(value))} s"
    if "_share" in key or "util" in key:
        return "<0.1%" if 0 < abs(value) < 0.0005 else fmt_pct(value)
    if key.endswith("_s") and "gpu_time" in key:
        return f"{fmt_amount(value / 3600)} GPU-h"
    if key.endswith("_s"):
        return fmt_seconds(value)
    if "speedup" in key:
        return fmt_x(value)
    if key.endswith("_bytes"):
        return fmt_bytes(value)
    return value


def scalar_items(obj: Any) -> dict[str, Any]:
    """The plain (string, number, bool, null) values of a mapping."""
    if not isinstance(obj, Mapping):
        return {}
    return {str(k): v for k, v in obj.items()
            if isinstance(v, str | int | float | bool) or v is None}


def scenarios(study: Study) -> dict[str, Any]:
    """``{scenario: summary}`` from whatif.json (``scenarios``, or one ``summary``)."""
    whatif = study.get("whatif.json")
    scen = whatif.get("scenarios")
    if isinstance(scen, Mapping):
        return dict(scen)
    summary, defs = whatif.get("summary"), whatif.get("definitions")
    if isinstance(summary, Mapping):
        name = next(iter(defs)) if isinstance(defs, Mapping) and len(defs) == 1 else "scenario"
        return {name: summary}
    return {}


def findings(study: Study) -> str:
    """summary.json in words: its ``sentences``, then its ``numbers`` (other keys likewise)."""
    summary = study.get("summary.json")
    sentences: list[str] = []
    numbers: list[tuple[str, Any]] = []

    def walk(obj: Any, key: str) -> None:
        if isinstance(obj, str) and " " in obj.strip():
            sentences.append(obj)
        elif isinstance(obj, Mapping):
            for k, v in obj.items():
                walk(v, f"{key}.{k}" if key else str(k))
        elif isinstance(obj, list | tuple):
            for i, v in enumerate(obj):
                walk(v, f"{key}[{i}]" if not isinstance(v, str) else key)
        elif key and key not in NOT_SENTENCES:
            numbers.append((key.removeprefix("numbers."), obj))

    walk({k: v for k, v in summary.items() if k != "by_source"}, "")
    body = H.bullets(sentences)
    if numbers:
        body += H.table(("quantity", "value"), [(label(k), cell(k, v)) for k, v in numbers],
                        caption="Numbers behind the findings (summary.json, where shares are "
                                "fractions and times seconds)")
    body += _by_source_table(summary.get("by_source"))
    return body or '<p class="missing">summary.json is absent or empty.</p>'


def _by_source_table(rows: Any) -> str:
    """The study's findings by trace file (summary.json ``by_source``), when it has several."""
    from traincast.analysis.study import BY_SOURCE_COLUMNS, by_source_caption, by_source_cells

    rows = [r for r in rows or [] if isinstance(r, Mapping)
            and isinstance(r.get("numbers"), Mapping)]
    if not rows:
        return ""
    return H.table(("trace", *(h for h, *_ in BY_SOURCE_COLUMNS)),
                   [(r.get("trace"), *by_source_cells(dict(r["numbers"]))) for r in rows],
                   caption="By trace file, each on its own jobs: " + by_source_caption(counts=True))


def _by_table(rows: Any, first: str, caption: str) -> str:
    if not isinstance(rows, Mapping) or not rows:
        return ""
    cols: list[str] = []
    for v in rows.values():
        cols += [k for k in scalar_items(v) if k not in cols]
    return H.table((first, *map(label, cols)),
                   [(a, *(cell(c, scalar_items(v).get(c)) for c in cols))
                    for a, v in rows.items()], caption=caption)


def _with_default_hardware(char: Mapping[str, Any]) -> Any:
    """``by_gpu_type`` with its ``unknown`` row (jobs whose trace names no GPU type) saying
    where the ones that name no node either are priced: the default node
    (``default_hardware``), as the findings say."""
    rows, dh = char.get("by_gpu_type"), char.get("default_hardware")
    if not (isinstance(rows, Mapping) and isinstance(rows.get("unknown"), Mapping)
            and isinstance(dh, Mapping) and dh.get("jobs") and dh.get("gpu")):
        return rows
    said = (f"{dh['jobs']:,} job(s) with GPUs and no node either: priced on the default node, "
            f"{dh['node']} ({dh['gpu']})")
    return {**rows, "unknown": {**rows["unknown"], "assumed": said}}


def _breakdown_table(char: Mapping[str, Any]) -> str:
    bd = char.get("breakdown")
    if not isinstance(bd, Mapping) or not bd.get("jobs"):
        return ""
    views = [("all jobs", k, bd.get(k)) for k in ("job_weighted", "gpu_weighted",
                                                  "gpu_time_weighted")]
    for arch, v in (bd.get("by_architecture") or {}).items():
        if isinstance(v, Mapping):
            views += [(arch, k, v.get(k)) for k in ("job_weighted", "gpu_weighted")]
    rows = [(who, k.replace("_", "-"), *(fmt_pct(s[c]) if isinstance(s.get(c), int | float)
                                        else None for c in COMPONENTS))
            for who, k, s in views if isinstance(s, Mapping)]
    out = H.table(("jobs", "weighting", *(COMPONENT_NAME[c] for c in COMPONENTS)), rows,
                  caption=f"Where the time goes: mean share of predicted iteration time "
                          f"({bd.get('jobs'):,} jobs with known features; characterize.json)")
    extra = {k: v for k, v in scalar_items(bd).items() if k not in ("jobs",)}
    if isinstance(bd.get("bottleneck"), Mapping):
        extra.update({f"jobs whose bottleneck is {BOTTLENECK_NAME.get(k, k)}": v
                      for k, v in bd["bottleneck"].items()})
    if extra:
        out += H.table(("quantity", "value"), [(label(k), cell(k, v)) for k, v in extra.items()],
                       caption="Breakdown statistics (characterize.json)")
    return out


def _scenario_table(study: Study) -> str:
    scen = scenarios(study)
    if not scen:
        return ""
    cols = [k for k in SCENARIO_KEYS if any(isinstance(v, Mapping) and k in v
                                            for v in scen.values())]
    if not cols:
        cols = list(dict.fromkeys(k for v in scen.values() for k in scalar_items(v)))
    return H.table(("scenario", *(SCENARIO_LABELS.get(c) or label(c) for c in cols)),
                   [(s, *(cell(c, v.get(c)) for c in cols)) for s, v in scen.items()
                    if isinstance(v, Mapping)],
                   caption="What-if scenarios (whatif.json): matched = jobs the scenario "
                           "selects; priced = those with a prediction, which the shares and "
                           "speedups are over; not fit = priced jobs whose change does not fit "
                           "(they keep their time); speedup = base time / scenario time")


def _recommend_tables(study: Study) -> str:
    out = ""
    summary = study.get("recommend.json").get("summary")
    if isinstance(summary, Mapping) and summary:
        rows = []
        for kind, s in summary.items():
            if isinstance(s, Mapping):
                rows.append((kind, *(cell(k, s.get(k)) for k in (
                    "predicted", "changed_share", "mean_speedup", "median_speedup")),
                             H.fmt_value(s.get("architectures") or {})))
        out += H.table(("candidates", "jobs predicted", "share changed", "mean speedup",
                        "median speedup", "recommended architectures (jobs)"), rows,
                       caption="Recommendations: summary (recommend.json; arch = another "
                               "architecture on the job's hardware, best = any architecture "
                               "and node preset)")
    rec = study.tables.get("recommend.csv")
    if rec is not None and rec.num_rows:
        cols = [c for c in RECOMMEND_KEYS if c in rec.column_names] or rec.column_names
        from traincast.analysis.recommend import GAINED_ROWS, gain_order

        speed = floats(rec, "best_speedup")
        priced = np.flatnonzero(np.isfinite(speed))  # a job without a prediction: no row
        order = gain_order(speed)[:min(priced.size, GAINED_ROWS)]
        rows = rec.select(cols).take(pa.array(order, pa.int64())).to_pylist()
        if rows:
            out += H.table([RECOMMEND_KEYS.get(c, c) for c in cols],
                           [[BOTTLENECK_NAME.get(r[c], r[c]) if c.endswith("bottleneck")
                             else cell(c, r[c]) for c in cols] for r in rows],
                           caption=f"Recommendations: the {plural(len(rows), 'job')} with "
                                   f"the largest speedup of {priced.size:,} with a prediction "
                                   f"(recommend.csv: {rec.num_rows:,} jobs)")
    return out


def top_jobs(jobs: pa.Table | None, study: Study) -> str:
    """The jobs holding the most GPU time (``characterize``'s rule: a job still running at the
    trace end counts up to it), with their predicted iteration and bottleneck."""
    from traincast.analysis.characterize import job_gpu_time_s

    if jobs is None or jobs.num_rows == 0:
        return ""
    gpu_time = job_gpu_time_s(jobs)
    key = np.where(np.isfinite(gpu_time), gpu_time, -1.0)
    held = np.flatnonzero(key > 0)  # jobs of 0 GPUs (or no known time) hold none: no row
    order = held[np.argsort(-key[held], kind="stable")][:TOP_ROWS]
    if not order.size:
        return ""
    cols = [c for c in ("job_id", "user", "workload", "architecture", "n_gpus", "gpu_type",
                        "total_s", "bottleneck", "gpu_util_pred") if c in jobs.column_names]
    extra = [c for c in ("workload_assumed", "censored") if c in jobs.column_names]
    picked = jobs.select(cols + extra).take(pa.array(order, pa.int64())).to_pylist()
    names = {"total_s": "predicted iteration", "gpu_util_pred": "predicted GPU util",
             "n_gpus": "GPUs"}
    empty = [c for c in cols if c != "job_id" and all(r[c] is None for r in picked)]
    cols = [c for c in cols if c not in empty]  # a column the trace never gives: said below

    def job_cell(r: Mapping[str, Any], c: str) -> Any:
        if c == "workload" and r.get("workload_assumed"):
            return f"{r[c]} (assumed)"  # the trace names none: drawn from --workload
        if c == "bottleneck" and r[c] is not None:
            return BOTTLENECK_NAME.get(r[c], r[c])
        return cell(c, r[c])  # the iteration in s or ms, the utilization in %

    rows = [(*(job_cell(r, c) for c in cols),
             ("≥ " if r.get("censored") else "") + cell("gpu_time_s", float(gpu_time[i])))
            for r, i in zip(picked, order, strict=True)]
    censored = sum(1 for r in picked if r.get("censored"))
    note = (f"; ≥: {censored} still running at the trace's end (censored), counted up to it: "
            "a lower bound" if censored else "")
    if empty:
        note += f"; no {', '.join(names.get(c, c) for c in empty)}: none of these jobs has one"

    return H.table([names.get(c, c) for c in cols] + ["GPU time"], rows,
                   caption=f"The {plural(len(rows), 'job')} holding the most GPU time "
                           "(jobs.parquet; "
                           "GPU time = GPUs x (end - start)" + note + ")")


def tables(study: Study) -> str:
    """The study's tables: characterize, what-if, recommend, and the largest jobs."""
    char = study.get("characterize.json")
    totals = scalar_items(char)
    totals.update({f"jobs flagged {k.replace('_', ' ')}": v
                   for k, v in scalar_items(char.get("flags")).items()})
    parts = [
        H.table(("quantity", "value"), [(label(k), cell(k, v)) for k, v in totals.items()],
                caption="Cluster totals (characterize.json)") if totals else "",
        _by_table(char.get("by_architecture"), "architecture",
                  "Jobs, GPUs and GPU time per training architecture (characterize.json)"),
        _by_table(_with_default_hardware(char), "GPU type",
                  "Jobs, GPUs and GPU time per GPU type (characterize.json)"),
        _breakdown_table(char),
        _scenario_table(study),
        _recommend_tables(study),
        top_jobs(study.jobs, study),
    ]
    return "".join(parts)


def catalog_used(study: Study, catalog: Catalog) -> str:
    """Catalog entries the study's jobs, its scenarios and its recommendations refer to, with
    their sources."""
    gpus: dict[str, None] = {}
    nodes: dict[str, None] = {}
    links: dict[str, None] = {}
    if study.jobs is not None:  # the node and GPU each job was predicted on
        node, gpu = hardware_of(study.jobs, catalog)
        for column, used in ((node, nodes), (gpu, gpus)):
            for name in sorted({column.values[c] for c in np.unique(column.codes) if c >= 0}):
                if name in catalog.nodes or name in catalog.gpus:
                    used[name] = None
    for d in definitions(study).values():
        changes = d.get("changes") if isinstance(d, Mapping) else None
        for k, v in (changes or {}).items():
            if not isinstance(v, str):
                continue
            if k in ("nic", "intra", "pcie") and v in catalog.links:
                links[v] = None
            elif k == "node" and v in catalog.nodes:
                nodes[v] = None
            elif k == "gpu" and (v in catalog.gpus or v in catalog.aliases):
                gpus[catalog.gpu_name(v)] = None
    rec = study.tables.get("recommend.csv")  # the nodes and GPUs recommendations name
    for prefix in ("arch", "best", "cheapest"):
        for column, used, known in (("node", nodes, catalog.nodes), ("gpu", gpus, catalog.gpus)):
            if rec is not None and f"{prefix}_{column}" in rec.column_names:
                for name in sorted(v for v in pc.unique(rec[f"{prefix}_{column}"]).to_pylist()
                                   if isinstance(v, str) and v in known):
                    used.setdefault(name, None)
    for nd in nodes:
        for role in ("pcie", "intra", "nic"):
            links.setdefault(getattr(catalog.nodes[nd], role), None)
    from traincast import compute

    rows = []
    for name in gpus:
        g = catalog.gpus[name]
        fp16 = f"fp16 {g.fp16_tflops:g} TFLOP/s" if g.fp16_tflops > 0 else "fp16 unsupported"
        strategy = compute.strategy_of(g, catalog.compute)
        flop_s, byte_s = compute.rates(g, "fp32", catalog.compute)
        rows.append(("GPU", name, f"datasheet fp32 {g.fp32_tflops:g} TFLOP/s, {fp16}, "
                     f"{g.mem_bw_gbs:g} GB/s; priced ({strategy} strategy, aggregate fp32 "
                     f"work) at {flop_s / 1e12:.3g} TFLOP/s and {byte_s / 1e9:.4g} GB/s",
                     g.source))
    for name in nodes:
        nd = catalog.nodes[name]
        rows.append(("node", name, f"{nd.gpus} × {nd.gpu}; pcie {nd.pcie}, intra {nd.intra}, "
                     f"nic {nd.nic}", nd.source))
    for name in links:
        ln = catalog.links[name]
        rows.append(("link", name, f"{ln.bw_gbs:g} GB/s per direction × efficiency "
                     f"{ln.efficiency:g}", ln.source))
    if not rows:
        return '<p class="missing">No catalog entry could be matched to the jobs.</p>'
    return H.table(("kind", "name", "numbers used", "source"), rows,
                   caption="Catalog entries used (files: " + ", ".join(catalog.files) + ")")


def definitions(study: Study) -> dict[str, Any]:
    """Scenario definitions: whatif.json ``definitions``, else study.json's."""
    defs = study.get("whatif.json").get("definitions") or \
        study.get("study.json").get("scenario_definitions")
    return dict(defs) if isinstance(defs, Mapping) else {}


def _definitions_table(study: Study) -> str:
    defs = definitions(study)
    if not defs:
        return ""
    rows = []
    for name, d in defs.items():
        d = d if isinstance(d, Mapping) else {"description": d}
        rows.append((name, d.get("description", ""), H.fmt_value(d.get("match") or {}) or
                     "every job", H.fmt_value(d.get("changes") or {}), d.get("source", "")))
    return H.table(("scenario", "description", "applies to", "changes", "source"), rows,
                   caption="What-if scenario definitions (docs/scenarios.md)")


def sample_provenance() -> str:
    """The bundled sample's provenance (docs/sample.md, or a copy shipped beside the sample)."""
    from importlib import resources

    try:
        pkg = resources.files("traincast.trace.sample")
        for entry in sorted(pkg.iterdir(), key=lambda p: p.name):
            if entry.name.lower().endswith(".md"):
                return entry.read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        pass
    docs = Path(__file__).resolve().parents[3] / "docs" / "sample.md"
    return docs.read_text(encoding="utf-8") if docs.is_file() else ""


def uses_sample(study: Study) -> str:
    """``"all"`` where the study ran on the bundled synthetic sample alone, ``"part"`` where
    its traces hold it beside others (``study.json`` ``trace.sample``), else ``""``."""
    meta = study.get("study.json")
    trace = meta.get("trace")
    said = trace.get("sample") if isinstance(trace, Mapping) else None
    if said == "part":
        return "part"
    return "all" if meta.get("sample") or said else ""


def assumed_notes(study: Study) -> list[str]:
    """What the study assumed for jobs its trace does not describe, in words: workloads drawn
    for jobs that name none (``study.json`` ``assumed_workload``) and the default node for jobs
    that name no GPU type or node (``characterize.json`` ``default_hardware``)."""
    out = []
    wl = study.get("study.json").get("assumed_workload")
    if isinstance(wl, Mapping) and wl.get("jobs"):
        mix = wl.get("by_workload") or {}
        drawn = ", ".join(f"{k} {v:,}" for k, v in list(mix.items())[:6]) + (
            ", ..." if len(mix) > 6 else "")
        out.append(f"{wl['jobs']:,} jobs name no workload: each was given "
                   + ("one drawn per job id from the bundled sample's workload mix"
                      if wl.get("workload") == "mix" else f"one of '{wl.get('workload')}'")
                   + (f" ({drawn})" if mix else "")
                   + ", so their compute, communication and what-if numbers are those models', "
                     "not the jobs' own (--workload, docs/traces.md)")
        if wl.get("exceeds_gpu_memory"):
            out.append(f"{wl['exceeds_gpu_memory']:,} of them run on GPUs with less memory "
                       f"than {wl.get('workload')} needs per GPU under their architecture: "
                       "priced as if it fit")
    hw = study.get("characterize.json").get("default_hardware")
    if isinstance(hw, Mapping) and hw.get("jobs"):
        out.append(f"{hw['jobs']:,} jobs name no GPU type or node: they are taken to run on "
                   f"{hw.get('node')} ({hw.get('gpu')}), the default node")
    return out


def sample_banner(study: Study) -> str:
    """A notice at the top when the study ran on the bundled synthetic sample, else one that
    names what it assumed for a real trace's jobs (:func:`assumed_notes`)."""
    used = uses_sample(study)
    if used == "all":
        return ('<p class="missing"><b>Bundled synthetic sample.</b> The default trace '
                "(<code>traincast sample</code>): these "
                "jobs were generated from published statistics, so the numbers illustrate the "
                'method, not a real cluster (<a href="#provenance">provenance</a>).</p>')
    part = ('<p class="missing"><b>Part bundled synthetic sample.</b> Some of these jobs are '
            "the bundled sample's (<code>traincast sample</code>), generated from published "
            "statistics, beside the other traces' real ones: the numbers mix the two "
            '(<a href="#provenance">provenance</a>).</p>') if used == "part" else ""
    notes = assumed_notes(study)
    return part + (('<p class="missing"><b>Assumed for this trace.</b> '
                    + H.esc("; ".join(notes)) + ".</p>") if notes else "")


def assumptions(study: Study, catalog: Catalog) -> str:
    """The model's assumptions, the study settings, catalog entries, scenarios, provenance."""
    meta = study.get("study.json")
    parts = [H.bullets([
        "Iteration time of a job = data I/O + FLOP-bound compute + memory-bound compute + "
        "weight/gradient communication (Wang et al., IISWC 2019), each a size over a catalog "
        "rate; communication overlaps compute by the configured fraction (0 = none, the "
        "paper's assumption). Formulas: docs/model.md.",
        "Breakdown shares are each job's shares averaged over jobs (job-weighted), over GPUs "
        "(GPU-weighted) or over GPU time, not shares of summed time.",
        "Trace jobs get their features from the profile of their workload tag; a job whose "
        "trace names no workload gets one assumed by --workload (default mix: the bundled "
        "sample's workload mix, docs/traces.md; the study settings say which), and with "
        "--workload none, or a workload traincast does not know, it has no prediction and is "
        "left out of breakdown and what-if figures.",
        "A job on a fraction of a GPU (GPU sharing) runs its kernels on that share of the GPU: "
        "its compute time is the whole GPU's over the share (docs/model.md, \"A shared "
        "GPU\")."])]
    settings = {k: v for k, v in scalar_items(meta).items()
                if k != "assumed_workload"}  # said in words: the "assumed" rows below
    trace = meta.get("trace")
    if isinstance(trace, Mapping):
        given = dict(scalar_items(trace))
        if isinstance(trace.get("paths"), list) and trace["paths"]:  # one or several traces
            given.pop("path", None)
            given["paths"] = ", ".join(map(str, trace["paths"]))
        settings = {**{f"trace {k}": v for k, v in given.items()}, **settings}
    for key in ("scenarios", "catalog_files"):
        if isinstance(meta.get(key), list):
            settings[key.replace("_", " ")] = ", ".join(map(str, meta[key]))
    prices = meta.get("prices")
    if isinstance(prices, Mapping):  # --price: the file and each price's source
        cited = prices.get("sources") or {}
        settings["prices"] = f"{prices.get('file')}" + (
            ": " + "; ".join(f"{k}: {v}" for k, v in cited.items()) if cited else "")
    for i, said in enumerate(assumed_notes(study)):
        settings[f"assumed ({i + 1})"] = said
    if isinstance(meta.get("timings_s"), Mapping):
        settings.update({f"time of {k} (s)": v for k, v in meta["timings_s"].items()})
    if settings:
        parts.append(H.table(("setting", "value"), list(settings.items()),
                             caption="Study settings (study.json)"))
    parts.append(catalog_used(study, catalog))
    parts.append(_definitions_table(study))
    if uses_sample(study):
        text = sample_provenance()
        parts.append('<h3 id="provenance">Provenance of the bundled sample (docs/sample.md)</h3>' +
                     (f'<div class="md">{H.markdown(text)}</div>' if text else
                      '<p class="missing">docs/sample.md was not found.</p>'))
    if study.missing:
        parts.append(f'<p class="missing">Not in the study folder (the parts of the report '
                     f'that need them are left out): {H.esc(", ".join(study.missing))}.</p>')
    return "".join(parts)
