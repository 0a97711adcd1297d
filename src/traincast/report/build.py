"""``write_report``: a study folder -> ``report.html`` (self-contained) + ``figures/*.png|svg``.

Reads the files ``traincast study`` writes (any may be absent; the report says which), draws
the figures of :mod:`traincast.report.figures` from them, and writes one HTML page with the
figures embedded, the findings in words, the tables and the assumptions. Every file is written
to a temporary name and renamed, so an interrupted run leaves the previous report intact.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from traincast.errors import TraincastError
from traincast.files import write_text_whole
from traincast.hardware.catalog import Catalog, load_catalog
from traincast.model import COMPONENTS
from traincast.report import html as H
from traincast.report import sections
from traincast.report.data import (
    aggregate_ops,
    component_shares,
    group_totals,
    ordered_unique,
    roofline_points,
    top_groups,
    weighted_shares,
)
from traincast.report.inputs import Study, floats, labels, load_study, load_validate
from traincast.units import fmt_amount, fmt_pct, plural

TOP_WORKLOADS = 12
TOP_ROWS = sections.TOP_ROWS


@dataclass
class Fig:
    """One figure of the report: how to draw it and what its caption says."""

    stem: str
    title: str
    caption: str
    source: str
    draw: Callable[[], Any]


NO_FIGURE = "No figure: the study folder has no jobs, what-if or characterize data"
"""What the report and ``traincast report`` say when there is nothing to draw."""


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "x"


def _breakdown_panels(study: Study, groups: np.ndarray) -> tuple[dict, dict]:
    """Job- and GPU-weighted mean shares per group from jobs.parquet, and the bar labels."""
    parts = study.parts()
    gpus = study.floats("n_gpus")
    panels = {"job-weighted": weighted_shares(parts, groups),
              "GPU-weighted": weighted_shares(parts, groups, gpus)}
    ok = np.isfinite(np.stack(list(component_shares(parts).values()))).all(axis=0)
    counts = {"job-weighted": group_totals(groups[ok]),
              "GPU-weighted": group_totals(groups[ok], gpus[ok])}
    return {k: v for k, v in panels.items() if v}, counts


PANELS = {"job_weighted": "job-weighted", "gpu_weighted": "GPU-weighted",
          "gpu_time_weighted": "GPU-time-weighted"}
PANEL_MEANING = {"job-weighted": "every job counts once",
                 "GPU-weighted": "a job counts as many times as it has GPUs",
                 "GPU-time-weighted": "a job counts in proportion to its GPU time "
                                      "(GPUs × duration)"}


def _finite_shares(v: Any) -> bool:
    return isinstance(v, Mapping) and all(isinstance(v.get(c), int | float)
                                          and np.isfinite(v[c]) for c in COMPONENTS)


def _arch_breakdown_figure(study: Study) -> list[Fig]:
    """Per-architecture breakdown: characterize.json's ``breakdown.by_architecture`` (job-,
    GPU- and GPU-time-weighted mean shares), else computed from jobs.parquet."""
    from traincast.report import figures as figs

    by_arch = (study.get("characterize.json").get("breakdown") or {}).get("by_architecture")
    if isinstance(by_arch, Mapping) and by_arch:
        panels = {label: {str(a): {c: float(v[key][c]) for c in COMPONENTS}
                          for a, v in by_arch.items()
                          if isinstance(v, Mapping) and _finite_shares(v.get(key))}
                  for key, label in PANELS.items()}
        panels = {k: v for k, v in panels.items() if v}
        counts = {"job-weighted": {str(a): v.get("jobs", 0) for a, v in by_arch.items()},
                  "GPU-weighted": {str(a): v.get("gpus", 0) for a, v in by_arch.items()}}
        source = "characterize.json (breakdown.by_architecture)"
    elif study.has_breakdown:
        panels, counts = _breakdown_panels(study, study.labels("architecture"))
        source = "jobs.parquet (predicted breakdown columns, architecture, n_gpus)"
    else:
        return []
    if not panels:
        return []
    title = "Time breakdown per training architecture"
    weights = "; ".join(f"{k}: {PANEL_MEANING[k]}" for k in panels)
    return [Fig("breakdown_architecture", title,
                "Mean share of each job's predicted iteration time spent in data I/O, "
                "FLOP-bound compute, memory-bound compute and weight/gradient communication, "
                f"per training architecture. Panels: {weights}. Numbers beside the bars: jobs "
                "(job-weighted panel) and GPUs (GPU-weighted panel) with a known breakdown; "
                "jobs whose features are unknown are left out.", source,
                lambda: figs.breakdown_figure(panels, counts=counts, title=title,
                                              group_label="architecture"))]


def _job_figures(study: Study) -> list[Fig]:
    from traincast.report import figures as figs

    jobs = study.jobs
    out = _arch_breakdown_figure(study)
    if jobs is None or jobs.num_rows == 0:
        return out
    arch = study.labels("architecture")
    gpus = study.floats("n_gpus")
    if study.has_breakdown:
        work = top_groups(study.labels("workload"), TOP_WORKLOADS)
        wpanels, wcounts = _breakdown_panels(study, work)
        if wpanels:
            out.append(Fig(
                "breakdown_workload", "Time breakdown per workload",
                "Mean share of each job's predicted iteration time per component, per workload "
                f"(the {TOP_WORKLOADS} most frequent workloads; the rest as 'other'; a job "
                "whose trace names no workload appears under the one assumed for it, see "
                "'Assumed for this trace' above, or as 'unknown' with --workload none); left: "
                "every job counts once, right: every job counts as "
                "many times as it has GPUs; numbers beside the bars: jobs and GPUs with a known "
                "breakdown. Jobs of one workload share its profiled features; their breakdowns "
                "differ by architecture, GPU count and hardware.",
                "jobs.parquet (predicted breakdown columns, workload, n_gpus)",
                lambda: figs.breakdown_figure(wpanels, counts=wcounts,
                                              title="Time breakdown per workload",
                                              group_label="workload")))
    pos = np.isfinite(gpus) & (gpus > 0)
    if pos.any():
        out.append(Fig(
            "cdf_gpus_per_job", "GPUs per job",
            "Cumulative distribution of the GPUs a job requests: the solid line counts jobs, "
            "the dashed line counts GPUs (a job with n GPUs counts n times), so the gap shows "
            "how much of the cluster large jobs hold. Jobs without a GPU are left out "
            f"({plural(int((~pos).sum()), 'job')}).", "jobs.parquet (n_gpus)",
            lambda: figs.cdf_figure({"jobs": gpus[pos], "GPUs": gpus[pos]},
                                    weights={"GPUs": gpus[pos]}, log_x=True,
                                    title="GPUs per job (CDF)", xlabel="GPUs per job",
                                    ylabel="cumulative fraction")))
    dur = study.floats("end_time_s") - study.floats("start_time_s")
    okd = np.isfinite(dur) & (dur > 0)
    if okd.any():
        cens = np.nan_to_num(study.floats("censored")) > 0
        series = {"all jobs": dur[okd]}
        if (cens & okd).any():
            series["finished jobs (not censored)"] = dur[okd & ~cens]
        out.append(Fig(
            "cdf_duration", "Job duration",
            "Cumulative distribution of job run time (end − start), log scale. Jobs still "
            "running when the trace ended are censored: their duration is a lower bound"
            + (f" ({plural(int((cens & okd).sum()), 'such job')}{_unplotted(cens, okd)}; the "
               "second line leaves them out)." if (cens & okd).any() else
               f" ({plural(int(cens.sum()), 'censored job')} with no start or no end time, "
               "not plotted)." if cens.any() else ".")
            + _finished_unplotted(dur, cens),
            "jobs.parquet (start_time_s, end_time_s, censored)",
            lambda: figs.cdf_figure(series, log_x=True, title="Job duration (CDF)",
                                    xlabel="job duration (s)")))
    if study.has_breakdown:
        comm = component_shares(study.parts())["comm"] * 100
        by_arch = {a: comm[arch == a] for a in ordered_unique(arch[np.isfinite(comm)])}
        if by_arch:
            out.append(Fig(
                "cdf_comm_share", "Communication share",
                "Cumulative distribution of the share of each job's predicted iteration time "
                "spent in weight/gradient communication, one line per training architecture "
                "(1w1g jobs communicate nothing: their line jumps at 0 %).",
                "jobs.parquet (comm_s and the other breakdown columns, architecture)",
                lambda: figs.cdf_figure(by_arch, title="Communication share of iteration "
                                        "time (CDF)",
                                        xlabel="communication share of iteration time (%)")))
    return out


def _speedup_figure(study: Study) -> list[Fig]:
    from traincast.report import figures as figs

    rows = study.tables.get("whatif_jobs.csv")
    if rows is None or rows.num_rows == 0:
        return []
    speedup = floats(rows, "speedup")
    matched = floats(rows, "matched")
    keep = np.isfinite(speedup) & ~(matched == 0)  # rows the scenario matched (all if absent)
    scenario = labels(rows, "scenario")
    data = {name: speedup[keep & (scenario == name)] for name in ordered_unique(scenario)}
    data = {k: v for k, v in data.items() if len(v)}
    if not data:
        return []
    return [Fig("cdf_speedup", "Speedup per what-if scenario",
                "Cumulative distribution of the predicted speedup (base iteration time / "
                "scenario iteration time) of the jobs each scenario applies to, one line per "
                "scenario; the vertical line marks no change (1×), log scale.",
                "whatif_jobs.csv (scenario, matched, speedup)",
                lambda: figs.cdf_figure(data, log_x=True, reference_x=1.0,
                                        title="Speedup per what-if scenario (CDF)",
                                        xlabel="speedup (×, base time / scenario time)"))]


def _share_figure(study: Study) -> list[Fig]:
    from traincast.report import figures as figs

    by_arch = study.get("characterize.json").get("by_architecture")
    if not isinstance(by_arch, Mapping) or not by_arch:
        return []
    metrics = {"jobs": "jobs", "gpus": "GPUs", "gpu_time_s": "GPU time"}
    data = {str(a): v for a, v in by_arch.items() if isinstance(v, Mapping)}
    return [Fig("share_architecture", "Jobs, GPUs and GPU time per architecture",
                "Share of the cluster's jobs, of the GPUs they request, and of GPU time "
                "(GPUs × duration) per training architecture, each as a percentage of its "
                "total.", "characterize.json (by_architecture: jobs, gpus, gpu_time_s)",
                lambda: figs.share_figure(data, metrics=metrics, group_label="architecture",
                                          title="Jobs, GPUs and GPU time per architecture"))]


def _roofline_record(roofline: Any) -> tuple[dict[str, Any], str]:
    """``(profile record with ops, GPU name)`` from ``(MODEL | record, GPU)`` or a mapping."""
    if isinstance(roofline, Mapping):
        record, gpu = roofline.get("profile"), roofline.get("gpu")
    else:
        record, gpu = roofline
    if isinstance(record, str):
        from traincast.features.profile import profile_model  # needs torch

        record = profile_model(record, ops=True)
    if not isinstance(record, Mapping) or not record.get("ops"):
        raise TraincastError("roofline: the profile has no per-op table",
                             hint="profile the model with ops=True (traincast profile --ops)")
    return dict(record), str(gpu)


def _roofline_figure(roofline: Any, catalog: Catalog) -> tuple[list[Fig], str, dict]:
    from traincast.report import figures as figs

    record, gpu_name = _roofline_record(roofline)
    gpu = catalog.gpu(gpu_name)
    amp = bool(record.get("amp"))
    dtype = "amp" if amp else "fp32"
    ops = aggregate_ops(record["ops"])
    from traincast.compute import rates, strategy_of

    flop_rate, byte_rate = rates(gpu, dtype, catalog.compute)  # as predict prices aggregates
    basis = {"kernel": "the kernel strategy: achievable for large GEMMs",
             "paper": "the paper's strategy: peak x flop_efficiency",
             "curves": "the curves strategy: the measured curve's largest point"}[
        strategy_of(gpu, catalog.compute)]
    pts = roofline_points(ops, flop_rate, byte_rate)
    model = str(record.get("model", "model"))
    title = f"Roofline: {model} on {gpu.name} ({'mixed precision' if amp else 'fp32'})"
    fig = Fig(f"roofline_{_slug(Path(model).name)}_{_slug(gpu.name)}", title,
              f"Each op kind of one training step of {model} (batch "
              f"{record.get('batch_size', '?')}; forward, backward and optimizer ops summed "
              f"by kind and phase) placed by arithmetic intensity (FLOP per byte moved) on "
              f"the roofline of {gpu.name} at the rates predict prices aggregate work at "
              f"(docs/model.md; {basis}): {flop_rate / 1e12:.3g} TFLOP/s (of a "
              f"{gpu.peak_tflops(dtype):g} TFLOP/s peak), memory {byte_rate / 1e9:.4g} GB/s "
              f"(of {gpu.mem_bw_gbs:g} GB/s). Ops left of the ridge point are limited "
              "by memory bandwidth, right of it by the FLOP rate; marker area grows with the "
              "op's roofline time; filled markers are ops the profiler classed compute-bound, "
              "hollow ones memory-bound. The five slowest are labelled.",
              f"per-op profile of {model} and the catalog entry of {gpu.name}",
              lambda: figs.roofline_figure(pts, title=title))
    order = np.argsort(-pts["time_s"])[:TOP_ROWS]
    total = float(pts["time_s"].sum())
    rows = [(pts["op"][i], pts["phase"][i], ops[i]["count"], pts["flops"][i], pts["bytes"][i],
             pts["intensity"][i], pts["time_s"][i] * 1e3,
             100 * pts["time_s"][i] / total if total else np.nan, pts["bound"][i])
            for i in order]
    tbl = H.table(("op", "phase", "calls", "FLOPs", "bytes", "FLOP/byte", "roofline ms",
                   "% of step", "profiled bound"), rows,
                  caption=f"Slowest ops of {model} on {gpu.name} by roofline time "
                          f"max(FLOPs / {flop_rate / 1e12:.3g} TFLOP/s, bytes / "
                          f"{byte_rate / 1e9:.4g} GB/s): the achievable rates of the figure"
                          + ("" if (flop_rate / 1e12 >= gpu.peak_tflops(dtype) * (1 - 1e-9)
                                    and byte_rate / 1e9 >= gpu.mem_bw_gbs * (1 - 1e-9))
                             else ", not the datasheet peaks"))
    return [fig], tbl, {"gpu": gpu.name, "model": model,
                        "step_s": total, "ridge": pts["ridge_intensity"]}


def _num(x: Any) -> float | None:
    """A number of a JSON file, or None (a string, a bool, null)."""
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def _ratio_error(predicted: Any, measured: Any, given: Any) -> Any:
    """``predicted / measured - 1`` where both are positive numbers, else ``given``."""
    p, m = _num(predicted), _num(measured)
    return p / m - 1.0 if p is not None and m is not None and p > 0 and m > 0 else given


def _validate_figure(data: dict[str, Any], source: str) -> tuple[list[Fig], str]:
    from traincast.report import figures as figs
    from traincast.validation import summarize

    # each error from the times the file gives, as its column says (its own error field where
    # a time is missing); the statistics of those, as validate computes them
    cases = [{**c, "error": _ratio_error(c.get("predicted_s"), c.get("measured_s"),
                                         c.get("error")),
              "paper_error": _ratio_error(c.get("paper_predicted_s"), c.get("measured_s"),
                                          c.get("paper_error"))} for c in data["cases"]]
    got = summarize([{"error": _num(c["error"]), "paper_error": _num(c["paper_error"])}
                     for c in cases])  # NaN where no error is known
    med, p90, pmed = (got[k] for k in ("median_abs_error", "p90_abs_error",
                                       "paper_median_abs_error"))
    stats = ""
    if math.isfinite(med) and math.isfinite(p90):
        stats = f" Median absolute error {med:.1%}, 90th percentile {p90:.1%}"
        stats += (f" (paper's peak model: median {pmed:.1%})." if math.isfinite(pmed) else ".")
    where = f" on {data['device_name']}" if data.get("device_name") else ""
    title = "Predicted vs measured iteration time"
    fig = Fig("validate", title,
              "Each point is one validation case (a model, architecture and batch size whose "
              f"training steps were timed for real{where}): measured iteration time against "
              "the prediction, log-log; filled markers are traincast's prediction, hollow gray "
              "ones the paper's peak model where the file has it. Points on the solid line are "
              f"exact; the dashed lines mark ±25 %; marker shape = architecture.{stats}",
              source, lambda: figs.validate_figure(cases, title=title))
    paper = any("paper_predicted_s" in c for c in cases)
    def pct(x: Any) -> str:  # a signed percent, as the caption and the terminal say errors
        return fmt_pct(float(x), sign=True, missing="–") if isinstance(x, int | float) else "–"

    rows = [(c.get("model"), c.get("arch"), c.get("batch_size"), c.get("measured_s"),
             c.get("predicted_s"), pct(c.get("error")),
             *((c.get("paper_predicted_s"), pct(c.get("paper_error"))) if paper else ()))
            for c in cases]
    tbl = H.table(("model", "architecture", "batch", "measured s", "predicted s",
                   "error (predicted / measured − 1)",
                   *(("paper model s", "paper model error") if paper else ())), rows,
                  caption="Validation cases" + (f" (median |error| {med:.1%}, p90 {p90:.1%})"
                                                if stats else ""))
    return [fig], tbl


def _colocate_figure(study: Study, catalog: Catalog) -> list[Fig]:
    """Predicted (and measured) GPU utilization CDF; co-location numbers in the caption."""
    from traincast.analysis.colocate import colocate
    from traincast.report import figures as figs

    if study.jobs is None or study.jobs.num_rows == 0 or "architecture" not in \
            study.jobs.column_names:
        return []
    res = colocate(study.jobs, catalog, multi_gpu=True, per_job=True)
    rows = res["job_rows"]
    series = {name: 100 * floats(rows, col) for name, col in
              (("predicted", "predicted_util"), ("measured (gpu_util)", "measured_util"))}
    series = {k: v[np.isfinite(v)] for k, v in series.items() if np.isfinite(v).any()}
    if not series:
        return []
    co = res["colocation"]
    med = co["slowdown"]["median"]
    return [Fig("cdf_gpu_util", "GPU utilization and co-location",
                "Cumulative distribution of each job's predicted GPU utilization (busy over "
                "the step, (T_comp - T_idle) / T_total) and, where the trace measured it, of "
                "the measured one. Pairing jobs "
                "of the same GPU model and GPU count whose predicted utilizations sum to at "
                f"most 1 (traincast colocate --multi-gpu) forms {plural(co['pairs'], 'pair')}, "
                f"frees {fmt_amount(co['gpus_freed'])} of {fmt_amount(co['gpus_total'])} GPUs and "
                f"saves "
                f"{100 * (co['gpu_time_saved_share'] or 0):.0f}% of GPU time"
                + (f" at a median slowdown of {med:.2f}×" if med else "")
                + " (contention model: docs/colocate.md).",
                "jobs.parquet (canonical columns, gpu_util); traincast.analysis.colocate",
                lambda: figs.cdf_figure(series, title="GPU utilization per job (CDF)",
                                        xlabel="GPU utilization (%)"))]


def _catalog_of(study: Study, catalog: Catalog | None) -> Catalog:
    if catalog is not None:
        return catalog
    files = study.get("study.json").get("catalog_files") or study.get("study.json").get(
        "catalog") or []
    user = [f for f in files if isinstance(f, str) and f.endswith(".toml")
            and "traincast/hardware/" not in f and Path(f).is_file()] \
        if isinstance(files, list) else []
    return load_catalog(user)


def write_report(study_dir: str | Path, validate_json: str | Path | None = None,
                 roofline: Any = None, out_dir: str | Path | None = None,
                 catalog: Catalog | None = None,
                 on_figure: Callable[[str, str], None] | None = None,
                 on_step: Callable[[str, int, int | None], None] | None = None) -> Path:
    """Write ``report.html`` and ``figures/*.png|svg`` for the study in ``study_dir``.

    ``validate_json``: a validate JSON file (adds the predicted-vs-measured scatter);
    ``roofline``: ``(MODEL_SPEC or profile record with ops, GPU name)`` (adds a roofline chart;
    a spec is profiled, which needs torch); ``out_dir``: where to write (default: the study
    folder); ``on_figure(stem, title)`` is called after each figure; ``on_step(step, done,
    total)`` as each step starts: reading the study, preparing the figures, each figure, the
    sections, writing the page (``total`` is None until the figures are known). Both are for
    progress bars. Returns the path of ``report.html``.
    """
    try:  # used lazily below (figures, the page, notes): fail early and clearly
        import jinja2  # noqa: F401
        import markdown_it  # noqa: F401
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise TraincastError(f"the report needs {exc.name}, which is not installed",
                             hint="pip install 'traincast[report]'") from None
    step = on_step or (lambda _step, _done, _total: None)
    step("reading the study folder", 0, None)
    study = load_study(study_dir)
    checked = load_validate(validate_json) if validate_json is not None else None  # before
    out = Path(out_dir) if out_dir is not None else study.folder  # any folder is made
    out.mkdir(parents=True, exist_ok=True)
    step("preparing the figures", 1, None)
    cat = _catalog_of(study, catalog)
    figs = [*_job_figures(study), *_share_figure(study), *_speedup_figure(study),
            *_colocate_figure(study, cat)]
    extra_tables: list[str] = []
    if roofline is not None:
        rf, tbl, _ = _roofline_figure(roofline, cat)
        figs += rf
        extra_tables.append(tbl)
    if checked is not None:
        vf, tbl = _validate_figure(checked, Path(str(validate_json)).name)
        figs += vf
        extra_tables.insert(0, tbl)
    from traincast.report.figures import save_figure

    total = len(figs) + 4  # reading, preparing, each figure, the sections, the page
    fig_html = []
    for i, f in enumerate(figs, start=1):
        step(f"figure {i} of {len(figs)}: {f.stem}", 1 + i, total)
        drawn = f.draw()
        paths = save_figure(drawn, out / "figures", f.stem)
        fig_html.append(H.figure(i, f"fig-{f.stem}", paths["png"].read_bytes(), f.title,
                                 f.caption, f.source, f"figures/{f.stem}.svg"))
        if on_figure:
            on_figure(f.stem, f.title)
    step("sections: findings, tables, assumptions", 2 + len(figs), total)
    meta = study.get("study.json")
    trace = meta.get("trace")
    trace_text = (", ".join(trace.get("paths") or []) or trace.get("path") or trace.get("name")
                  if isinstance(trace, Mapping) else trace)
    when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        ("findings", "Findings", sections.sample_banner(study) + sections.findings(study)),
        ("figures", "Figures", "".join(fig_html) or
         f'<p class="missing">{NO_FIGURE}.</p>'),
        ("tables", "Tables", sections.tables(study) + "".join(extra_tables)),
        ("assumptions", "Assumptions and inputs", sections.assumptions(study, cat)),
    ]
    title = "traincast report"
    subtitle = (f"Study folder {study.folder}" + (f" · trace {trace_text}" if trace_text else "")
                + f" · generated {when}")
    path = out / "report.html"
    step("writing report.html", 3 + len(figs), total)
    write_text_whole(path, H.page(title, subtitle, parts))
    return path


def _finished_unplotted(duration_s: np.ndarray, censored: np.ndarray) -> str:
    """The caption's words for the finished (not censored) jobs the figure leaves out: those
    without a start or an end time (one that never started, or a record the scheduler left
    open: the duration unknown) and those of zero length (a log scale has no 0); empty when
    there are none."""
    unknown = int((~censored & ~np.isfinite(duration_s)).sum())
    zero = int((~censored & (duration_s == 0)).sum())
    words = ([f"{plural(unknown, 'finished job')} without a start or an end time (duration "
              "unknown)"] if unknown else []) \
        + ([f"{plural(zero, 'job')} of zero length"] if zero else [])
    return "" if not words else (" " + " and ".join(words) + " "
                                 + ("is" if unknown + zero == 1 else "are") + " not plotted.")


def _unplotted(censored: np.ndarray, plotted: np.ndarray) -> str:
    """The caption's words for the censored jobs without a duration to plot (no start or no
    end, or none yet: not in the figure, but counted as censored by ``characterize``), empty
    when there are none."""
    left = int((censored & ~plotted).sum())
    if not left:
        return ""
    return (f" of the {int(censored.sum()):,} censored; the other "
            + ("one has no duration to plot (no start or no end time, or none yet) and is"
               if left == 1 else f"{left:,} have no duration to plot (no start or no end time, "
               "or none yet) and are") + " not plotted")
