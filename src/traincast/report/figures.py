"""The report's figures: matplotlib ``Figure`` objects built from plain data (dicts, arrays).

Each function returns a figure (titled, axes labelled with units) and never touches files or
global pyplot state; :func:`save_figure` writes it as PNG (Agg) and SVG. Figures stay readable
in grayscale: the components of a breakdown differ in lightness *and* hatch, and the series of
a chart differ in line style and marker, not only in colour.

matplotlib is imported inside the functions, so importing this module costs nothing.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from traincast.files import write_bytes_whole
from traincast.model import COMPONENT_NAME, COMPONENTS
from traincast.report.data import ecdf, thin_steps

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# (face colour, hatch): grayscale lightness 0.88 / 0.46 / 0.64 / 0.29 (Rec. 601 luma), each
# with its own hatch, so the stack reads on a black-and-white printout.
COMPONENT_STYLE: dict[str, tuple[str, str]] = {
    "data_io": ("#fee08b", ""),
    "compute_flop": ("#3288bd", "//"),
    "compute_mem": ("#66c2a5", ".."),
    "comm": ("#762a83", "xx"),
}
# (colour, line style, marker) of the n-th series of a line chart.
SERIES_STYLE: tuple[tuple[str, Any, str], ...] = (
    ("#000000", "-", "o"), ("#3288bd", "--", "s"), ("#d53e4f", ":", "^"),
    ("#1b7837", "-.", "D"), ("#e08214", (0, (5, 1, 1, 1)), "v"),
    ("#762a83", (0, (1, 3)), "P"), ("#666666", (0, (8, 2)), "X"), ("#8073ac", "-", "*"),
)
# (colour, hatch) of the n-th bar of a group.
BAR_STYLE: tuple[tuple[str, str], ...] = (("#d9d9d9", ""), ("#3288bd", "//"),
                                          ("#252525", ".."), ("#fdae61", "xx"))
PHASE_MARKER = {"forward": "o", "backward": "s", "optimizer": "^"}
DPI = 110


def _figure(width: float = 8.0, height: float = 4.5) -> Figure:
    from matplotlib.figure import Figure  # lazy: matplotlib only when a report is drawn

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    return fig


def text(s: object) -> str:
    """A label from input data, safe for matplotlib (``$`` would start math mode)."""
    return str(s).replace("$", r"\$")


def _log_x(ax: Any) -> None:
    """Log x axis with plain numbers (1, 2, 5, 10, ...); minor ticks labelled over short spans."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    plain = FuncFormatter(lambda v, _: f"{int(v):,}" if v >= 1 and v == int(v) else f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    lo, hi = ax.get_xlim()
    short = lo > 0 and hi / lo < 30
    ax.xaxis.set_minor_formatter(plain if short else NullFormatter())


def series_style(i: int) -> tuple[str, Any, str]:
    """Colour, line style and marker of the ``i``-th series (cycles after eight)."""
    return SERIES_STYLE[i % len(SERIES_STYLE)]


def breakdown_figure(panels: Mapping[str, Mapping[str, Mapping[str, float]]], *, title: str,
                     group_label: str, counts: Mapping[str, Mapping[str, float]] | None = None
                     ) -> Figure:
    """Stacked horizontal bars of time shares, one panel per weighting.

    ``panels`` = ``{"job-weighted": {group: {component: share}}, "GPU-weighted": {...}}``
    (shares of ``COMPONENTS`` summing to 1); ``counts`` (same panel keys) annotates each bar.
    """
    groups: list[str] = []
    for shares in panels.values():
        groups += [g for g in shares if g not in groups]
    fig = _figure(2.0 + 3.0 * max(len(panels), 1), 1.8 + 0.42 * max(len(groups), 1))
    axes = fig.subplots(1, max(len(panels), 1), sharey=True, squeeze=False)[0]
    y = np.arange(len(groups))
    for ax, (panel, shares) in zip(axes, panels.items(), strict=False):
        left = np.zeros(len(groups))
        for c in COMPONENTS:
            vals = np.array([shares.get(g, {}).get(c, 0.0) for g in groups]) * 100
            color, hatch = COMPONENT_STYLE[c]
            ax.barh(y, vals, left=left, color=color, hatch=hatch, edgecolor="black",
                    linewidth=0.6, label=COMPONENT_NAME[c])
            left += vals
        if counts and panel in counts:
            for yi, g in enumerate(groups):
                if g in shares:
                    ax.text(101, yi, f"{counts[panel].get(g, 0):,.0f}", va="center", fontsize=8)
        ax.set_xlim(0, 112)
        ax.set_xticks([0, 25, 50, 75, 100])
        ax.set_xlabel("share of iteration time (%)")
        ax.set_title(text(panel), fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y, [text(g) for g in groups])
    axes[0].set_ylabel(text(group_label))
    axes[0].invert_yaxis()
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=8)
    fig.suptitle(text(title))
    return fig


def cdf_figure(series: Mapping[str, ArrayLike], *, title: str, xlabel: str,
               ylabel: str = "fraction of jobs (CDF)",
               weights: Mapping[str, ArrayLike] | None = None, log_x: bool = False,
               reference_x: float | None = None) -> Figure:
    """Empirical CDFs, one step line per series (weighted where ``weights`` has the name)."""
    fig = _figure()
    ax = fig.subplots()
    for i, (name, values) in enumerate(series.items()):
        x, yv = ecdf(values, (weights or {}).get(name))
        n = len(x)
        if n == 0:
            continue
        x, yv = thin_steps(x, yv)
        if log_x:
            keep = x > 0
            x, yv = x[keep], yv[keep]
            if len(x) == 0:
                continue
        color, ls, marker = series_style(i)
        ax.step(np.r_[x[0], x], np.r_[0.0, yv], where="post", color=color, linestyle=ls,
                marker=marker, markevery=max(1, (len(x) + 1) // 8), markersize=5,
                label=f"{text(name)} (n={n:,}{' jobs' if name in (weights or {}) else ''})")
    if reference_x is not None:
        ax.axvline(reference_x, color="gray", linewidth=0.8)
    if log_x:
        _log_x(ax)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(text(xlabel) + (", log scale" if log_x else ""))
    ax.set_ylabel(text(ylabel))
    ax.set_title(text(title))
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="lower right")
    return fig


def share_figure(by_group: Mapping[str, Mapping[str, float]], *, title: str, group_label: str,
                 metrics: Mapping[str, str]) -> Figure:
    """Grouped horizontal bars: each group's share (%) of each metric's total.

    ``by_group`` = ``{group: {metric: value}}``; ``metrics`` = ``{metric: legend label}``.
    """
    groups = list(by_group)
    fig = _figure(8.0, 1.6 + 0.55 * max(len(groups), 1))
    ax = fig.subplots()
    height = 0.8 / max(len(metrics), 1)
    y = np.arange(len(groups))
    for i, (metric, label) in enumerate(metrics.items()):
        vals = np.array([float(by_group[g].get(metric) or 0.0) for g in groups])
        total = vals.sum()
        pct = vals / total * 100 if total > 0 else np.zeros_like(vals)
        color, hatch = BAR_STYLE[i % len(BAR_STYLE)]
        bars = ax.barh(y + (i - (len(metrics) - 1) / 2) * height, pct, height=height,
                       color=color, hatch=hatch, edgecolor="black", linewidth=0.6, label=label)
        ax.bar_label(bars, fmt="%.1f", fontsize=7, padding=2)
    ax.set_yticks(y, [text(g) for g in groups])
    ax.invert_yaxis()
    ax.set_xlim(0, 112)
    ax.set_xlabel("share of the cluster total (%)")
    ax.set_ylabel(text(group_label))
    ax.set_title(text(title))
    ax.grid(axis="x", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()  # below the axes: over no bar's label
    fig.legend(handles, labels, loc="outside lower center", ncols=max(len(metrics), 1),
               fontsize=8)
    return fig


def roofline_figure(points: Mapping[str, Any], *, title: str, label_top: int = 5) -> Figure:
    """Ops of a profile on a GPU's roofline (log-log), from :func:`data.roofline_points`.

    Marker shape = phase, filled = profiled compute-bound, hollow = memory-bound; marker area
    grows with the op's roofline time. The x axis spans at least two decades each side of the
    ridge; ops without FLOPs (intensity 0) sit at its left edge, ops without bytes at its right.
    """
    peak = float(points["peak_flops_per_s"])
    bw = float(points["mem_bw_bps"])
    ridge = float(points["ridge_intensity"])
    inten = np.asarray(points["intensity"], dtype=np.float64)
    time_s = np.asarray(points["time_s"], dtype=np.float64)
    finite = inten[np.isfinite(inten) & (inten > 0)]
    lo = min(finite.min() / 2 if finite.size else ridge, ridge / 100)
    hi = max(finite.max() * 2 if finite.size else ridge, ridge * 100)
    x = np.clip(np.where(np.isfinite(inten), inten, hi), lo, hi)
    y = np.minimum(peak, x * bw) / 1e12
    fig = _figure(8.0, 5.0)
    ax = fig.subplots()
    xs = np.geomspace(lo, hi, 200)
    ax.plot(xs, np.minimum(peak, xs * bw) / 1e12, color="black", linewidth=1.5,
            label=f"roof: min({peak / 1e12:.3g} TFLOP/s, I × {bw / 1e9:.4g} GB/s)")
    ax.axvline(ridge, color="gray", linestyle=":", linewidth=1)
    ax.annotate(f"ridge {ridge:.3g} FLOP/B", (ridge, peak / 1e12), textcoords="offset points",
                xytext=(4, -14), fontsize=8)
    from matplotlib.lines import Line2D

    share = time_s / time_s.sum() if time_s.sum() > 0 else np.zeros_like(time_s)
    size = 12 + 400 * np.sqrt(share)
    phases = list(points["phase"])
    compute = np.asarray(points["bound"], dtype=object) == "compute"
    handles = [ax.get_lines()[0]]
    for i, phase in enumerate(dict.fromkeys(phases)):
        sel = np.array([p == phase for p in phases])
        color, _, _ = series_style(i)
        marker = PHASE_MARKER.get(phase, "D")
        for filled, kind in ((True, "compute-bound"), (False, "memory-bound")):
            m = sel & (compute == filled)
            if not m.any():
                continue
            ax.scatter(x[m], y[m], s=size[m], marker=marker, linewidths=1.0,
                       facecolors=color if filled else "none",
                       edgecolors="black" if filled else color, alpha=0.85)
            handles.append(Line2D([], [], linestyle="none", marker=marker, markersize=7,
                                  markerfacecolor=color if filled else "none",
                                  markeredgecolor="black" if filled else color,
                                  label=f"{text(phase)}, profiled {kind}"))
    # label the slowest ops; ops at (nearly) the same spot share one label
    spots: dict[tuple[int, int], tuple[int, list[str]]] = {}
    for i in np.argsort(-time_s, kind="stable")[:label_top]:
        key = (round(np.log10(x[i]) * 20), round(np.log10(max(y[i], 1e-30)) * 20))
        first, names = spots.setdefault(key, (int(i), []))
        if text(points["op"][i]) not in names:
            names.append(text(points["op"][i]))
    for k, (first, names) in enumerate(spots.values()):
        ax.annotate(", ".join(names), (x[first], y[first]), textcoords="offset points",
                    xytext=(6, -12 if k % 2 == 0 else 6), fontsize=7)
    if (inten == 0).any():
        ax.annotate("ops without FLOPs (intensity 0)", (lo, lo * bw / 1e12),
                    textcoords="offset points", xytext=(12, 12), fontsize=7, color="gray")
    ax.set_xscale("log")
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylim(lo * bw / 1e12 / 3, peak / 1e12 * 2)
    ax.set_xlabel("arithmetic intensity (FLOP/byte), log scale")
    ax.set_ylabel("attainable performance (TFLOP/s), log scale")
    ax.set_title(text(title))
    ax.grid(alpha=0.3, which="both")
    ax.legend(handles=handles, fontsize=7, loc="lower right")
    return fig


def validate_figure(cases: Sequence[Mapping[str, Any]], *, title: str,
                    band: float = 0.25) -> Figure:
    """Predicted vs measured iteration time (log-log) with y = x and ±``band`` lines.

    Filled markers: ``predicted_s``, shape by architecture; where cases carry
    ``paper_predicted_s`` (the paper's peak model on the same catalog), hollow gray markers of
    the same shape, so the two models' errors can be compared case by case.
    """
    def col(key: str) -> np.ndarray:
        return np.array([float(c[key]) if isinstance(c.get(key), int | float) else np.nan
                         for c in cases])

    meas, pred, paper = col("measured_s"), col("predicted_s"), col("paper_predicted_s")
    arch = [str(c.get("arch", "")) for c in cases]
    ok = np.isfinite(meas) & np.isfinite(pred) & (meas > 0) & (pred > 0)
    okp = ok & np.isfinite(paper) & (paper > 0)
    fig = _figure(6.5, 5.5)
    ax = fig.subplots()
    every = np.r_[meas[ok], pred[ok], paper[okp]]
    lo, hi = (every.min() / 1.5, every.max() * 1.5) if every.size else (1e-3, 1.0)
    xs = np.geomspace(lo, hi, 50)
    ax.plot(xs, xs, color="black", linewidth=1, label="predicted = measured")
    ax.plot(xs, xs * (1 + band), color="gray", linestyle="--", linewidth=1,
            label=f"±{band:.0%}")
    ax.plot(xs, xs * (1 - band), color="gray", linestyle="--", linewidth=1)
    for i, a in enumerate(dict.fromkeys(arch)):
        sel = np.array([x == a for x in arch])
        color, _, marker = series_style(i)
        ax.scatter(meas[ok & sel], pred[ok & sel], marker=marker, color=color,
                   edgecolors="black", linewidths=0.5, s=40,
                   label=f"{text(a or 'cases')} (traincast)")
        if (okp & sel).any():
            ax.scatter(meas[okp & sel], paper[okp & sel], marker=marker, facecolors="none",
                       edgecolors="gray", linewidths=1.0, s=40,
                       label=f"{text(a or 'cases')} (paper's peak model)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured iteration time (s), log scale")
    ax.set_ylabel("predicted iteration time (s), log scale")
    ax.set_title(text(title))
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left")
    return fig


def figure_bytes(fig: Figure, fmt: str) -> bytes:
    """The figure encoded as ``png`` (Agg) or ``svg``, reproducibly (no timestamps)."""
    import matplotlib

    buf = io.BytesIO()
    metadata: dict[str, Any] = {"Software": None} if fmt == "png" else {"Date": None}
    with matplotlib.rc_context({"svg.hashsalt": "traincast", "svg.fonttype": "path"}):
        fig.savefig(buf, format=fmt, metadata=metadata)
    return buf.getvalue()


def save_figure(fig: Figure, out_dir: str | Path, stem: str) -> dict[str, Path]:
    """Write ``stem.png`` and ``stem.svg`` into ``out_dir`` (each replaced atomically)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for fmt in ("png", "svg"):
        path = out / f"{stem}.{fmt}"
        write_bytes_whole(path, figure_bytes(fig, fmt))
        paths[fmt] = path
        fig.set_layout_engine("none")  # laid out once by the first save; keep that layout
    return paths
