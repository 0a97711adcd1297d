"""Report: what the figures plot (hand arithmetic), the figures themselves, and report.html."""

from __future__ import annotations

import base64
import html
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from report_study import INJECTED, make_small_study, make_study
from traincast.errors import TraincastError
from traincast.report import write_report
from traincast.report.data import (
    aggregate_ops,
    ecdf,
    roofline_points,
    thin_steps,
    top_groups,
    weighted_shares,
)

# ---------------------------------------------------------------- data (no matplotlib)


def test_weighted_shares_by_hand():
    # job 1: times (1, 1, 1, 1) -> shares 0.25 each; job 2: (0, 3, 0, 1) -> (0, .75, 0, .25);
    # job 3 has an unknown time (left out); job 4 is group B.
    parts = {"data_io": [1, 0, np.nan, 2], "compute_flop": [1, 3, 1, 2],
             "compute_mem": [1, 0, 1, 0], "comm": [1, 1, 1, 0]}
    groups = ["A", "A", "A", "B"]
    job = weighted_shares(parts, groups)
    assert job["A"]["data_io"] == pytest.approx((0.25 + 0) / 2)
    assert job["A"]["compute_flop"] == pytest.approx((0.25 + 0.75) / 2)
    assert job["A"]["comm"] == pytest.approx((0.25 + 0.25) / 2)
    assert job["B"] == pytest.approx({"data_io": 0.5, "compute_flop": 0.5, "compute_mem": 0.0,
                                      "comm": 0.0})
    gpu = weighted_shares(parts, groups, [1, 3, 100, 8])
    assert gpu["A"]["data_io"] == pytest.approx((0.25 * 1 + 0 * 3) / 4)
    assert gpu["A"]["compute_flop"] == pytest.approx((0.25 * 1 + 0.75 * 3) / 4)
    assert list(gpu) == ["B", "A"]  # heaviest group (8 GPUs vs 4) first
    for shares in (*job.values(), *gpu.values()):
        assert sum(shares.values()) == pytest.approx(1.0)


def test_ecdf_weighted_and_nan():
    x, y = ecdf([3, 1, np.nan, 2], [1, 1, 5, 2])
    assert x.tolist() == [1, 2, 3]
    assert y.tolist() == pytest.approx([1 / 4, 3 / 4, 1.0])
    x, y = ecdf([])
    assert len(x) == len(y) == 0


def test_thin_steps_stays_within_one_step_of_the_exact_cdf():
    x, y = ecdf(np.random.default_rng(1).exponential(size=100_000))
    tx, ty = thin_steps(x, y, max_points=500)
    assert len(tx) <= 502 and tx[0] == x[0] and tx[-1] == x[-1] and ty[-1] == 1.0
    # the thinned step curve, evaluated at every exact point, is within 1/500 of the exact one
    drawn = ty[np.clip(np.searchsorted(tx, x, side="right") - 1, 0, None)]
    assert np.max(np.abs(drawn - y)) <= 1 / 500 + 1e-12


def test_top_groups_folds_the_rest_into_other():
    labels = ["a", "b", "b", "c", "c", "c", "d"]
    assert top_groups(labels, 2).tolist() == ["other", "b", "b", "c", "c", "c", "other"]


def test_roofline_points_by_hand():
    # P = 100 TFLOP/s, M = 1 TB/s -> ridge at 100 FLOP/byte
    ops = [{"op": "mm", "phase": "forward", "flops": 1e12, "bytes_read": 6e8,
            "bytes_written": 4e8, "bound": "compute"},
           {"op": "add", "phase": "backward", "flops": 1e9, "bytes_read": 1e10,
            "bytes_written": 0, "bound": "memory"},
           {"op": "copy", "phase": "optimizer", "flops": 0, "bytes_read": 1e6,
            "bytes_written": 1e6, "bound": "memory"}]
    p = roofline_points(ops, 100e12, 1e12)
    assert p["ridge_intensity"] == pytest.approx(100.0)
    assert p["intensity"].tolist() == pytest.approx([1000.0, 0.1, 0.0])
    # attainable = min(P, I * M): 100e12, 0.1e12, 0
    assert p["attainable_flops_per_s"].tolist() == pytest.approx([100e12, 1e11, 0.0])
    # time = max(F / P, B / M): max(0.01, 0.001), max(1e-5, 0.01), max(0, 2e-6)
    assert p["time_s"].tolist() == pytest.approx([0.01, 0.01, 2e-6])
    with pytest.raises(ValueError):
        roofline_points(ops, 0.0, 1e12)


def test_aggregate_ops_sums_by_op_and_phase():
    ops = [{"op": "mm", "phase": "forward", "flops": 2, "bytes_read": 1, "bytes_written": 1,
            "bound": "compute"},
           {"op": "mm", "phase": "forward", "flops": 4, "bytes_read": 2, "bytes_written": 0,
            "bound": "memory"},
           {"op": "mm", "phase": "backward", "flops": 8, "bytes_read": 1, "bytes_written": 1,
            "bound": "compute"}]
    rows = aggregate_ops(ops)
    assert [(r["op"], r["phase"], r["flops"], r["bytes_read"], r["count"], r["bound"])
            for r in rows] == [("mm", "forward", 6, 3, 2, "mixed"),
                               ("mm", "backward", 8, 1, 1, "compute")]


# ---------------------------------------------------------------- figures


def _luma(color: str) -> float:
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(color)
    return 0.299 * r + 0.587 * g + 0.114 * b


def test_breakdown_components_differ_in_gray_and_hatch():
    from traincast.report.figures import COMPONENT_STYLE

    lumas = sorted(_luma(c) for c, _ in COMPONENT_STYLE.values())
    assert min(np.diff(lumas)) >= 0.15  # distinct gray levels on a grayscale printout
    hatches = [h for _, h in COMPONENT_STYLE.values()]
    assert len(set(hatches)) == len(hatches)


def test_breakdown_figure_titles_units_and_stacks():
    from traincast.report.figures import breakdown_figure

    shares = {"ps-worker": {"data_io": 0.1, "compute_flop": 0.2, "compute_mem": 0.1,
                            "comm": 0.6},
              "1w1g": {"data_io": 0.0, "compute_flop": 0.9, "compute_mem": 0.1, "comm": 0.0}}
    fig = breakdown_figure({"job-weighted": shares, "GPU-weighted": shares},
                           title="Breakdown $x$", group_label="architecture")
    assert fig._suptitle.get_text() == r"Breakdown \$x\$"  # input text never becomes math
    axes = fig.get_axes()
    assert len(axes) == 2
    for ax in axes:
        assert "(%)" in ax.get_xlabel()
        # 4 components x 2 groups, stacked: the ps-worker bar ends at 100 %
        bars = ax.patches
        assert len(bars) == 8
        ends = {}
        for b in bars:
            y = round(b.get_y(), 3)
            ends[y] = max(ends.get(y, 0), b.get_x() + b.get_width())
        assert sorted(ends.values()) == pytest.approx([100.0, 100.0])
        assert {b.get_hatch() or "" for b in bars} == {"", "//", "..", "xx"}


def test_cdf_figure_lines_differ_in_style_and_end_at_one():
    from traincast.report.figures import cdf_figure

    fig = cdf_figure({"a": [1, 2, 3], "b": [2, 4], "c": [5]}, title="T", xlabel="x (s)",
                     log_x=True)
    ax = fig.get_axes()[0]
    lines = ax.get_lines()
    assert len(lines) == 3
    assert len({(ln.get_linestyle(), ln.get_marker()) for ln in lines}) == 3
    assert all(ln.get_ydata()[-1] == pytest.approx(1.0) for ln in lines)
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "x (s), log scale"
    assert ax.get_title() == "T"


def test_roofline_and_validate_figures_are_log_log_with_units():
    from traincast.report.figures import roofline_figure, validate_figure

    ops = [{"op": "mm", "phase": "forward", "flops": 1e12, "bytes_read": 1e9,
            "bytes_written": 0, "bound": "compute"},
           {"op": "relu", "phase": "backward", "flops": 1e6, "bytes_read": 1e8,
            "bytes_written": 1e8, "bound": "memory"}]
    ax = roofline_figure(roofline_points(ops, 15.7e12, 900e9), title="R").get_axes()[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert "FLOP/byte" in ax.get_xlabel() and "TFLOP/s" in ax.get_ylabel()
    # the roof: flat at 15.7 TFLOP/s right of the ridge (15.7e12 / 900e9 = 17.4 FLOP/byte)
    roof = ax.get_lines()[0]
    assert max(roof.get_ydata()) == pytest.approx(15.7)
    cases = [{"model": "m", "arch": "1w1g", "measured_s": 0.1, "predicted_s": 0.08,
              "paper_predicted_s": 0.03},
             {"model": "n", "arch": "ps-worker", "measured_s": 0.5, "predicted_s": 0.6}]
    ax = validate_figure(cases, title="V").get_axes()[0]
    assert "measured" in ax.get_xlabel() and "(s)" in ax.get_xlabel()
    points = sorted(tuple(p) for c in ax.collections for p in c.get_offsets())
    assert points == [(0.1, 0.03), (0.1, 0.08), (0.5, 0.6)]
    assert (ax.get_xlim()[0], ax.get_xlim()[1]) == pytest.approx((0.03 / 1.5, 0.6 * 1.5))
    assert any("paper" in t.get_text() for t in ax.get_legend().get_texts())


def test_duration_caption_counts_the_censored_jobs_it_cannot_plot():
    from traincast.report.build import _unplotted

    censored = np.array([True, True, True, False, False])
    plotted = np.array([True, False, False, True, False])  # 1 censored job has a duration
    assert _unplotted(censored, plotted) == (
        " of the 3 censored; the other 2 have no duration to plot (no start or no end time, or "
        "none yet) and are not plotted")
    assert _unplotted(censored, censored | plotted) == ""
    assert _unplotted(censored, np.array([True, True, False, False, False])) == (
        " of the 3 censored; the other one has no duration to plot (no start or no end time, "
        "or none yet) and is not plotted")


def test_duration_caption_counts_the_finished_jobs_it_cannot_plot():
    from traincast.report.build import _finished_unplotted

    dur = np.array([10.0, np.nan, np.nan, 0.0, 5.0, np.nan])
    cens = np.array([False, False, False, False, False, True])
    # two without a duration (never started, or no end), one of zero length; the censored
    # job without a duration is _unplotted's
    assert _finished_unplotted(dur, cens) == (
        " 2 finished jobs without a start or an end time (duration unknown) and 1 job of zero "
        "length are not plotted.")
    assert _finished_unplotted(dur[:1], cens[:1]) == ""
    assert _finished_unplotted(dur[3:4], cens[3:4]) == " 1 job of zero length is not plotted."


def test_save_figure_writes_png_and_svg(tmp_path):
    import matplotlib.image as mpimg

    from traincast.report.figures import cdf_figure, save_figure

    paths = save_figure(cdf_figure({"a": [1, 2]}, title="T", xlabel="x"), tmp_path, "f")
    img = mpimg.imread(paths["png"])
    assert img.shape[0] > 100 and img.shape[1] > 100
    assert ET.parse(paths["svg"]).getroot().tag.endswith("svg")


# ---------------------------------------------------------------- html pieces


def test_markdown_subset_renders_structure_and_escapes():
    from traincast.report.html import markdown

    out = markdown("# Title\n\nSome **bold** and `a<b>` text\ncontinued.\n\n- one <i>\n"
                   "- `two`\n\n| k | v |\n|---|---|\n| <s> | **9** |\n\n```\nx < y\n```\n")
    flat = out.replace("\n", "")
    for piece in ("<h3>Title</h3>", "<p>Some <strong>bold</strong> and <code>a&lt;b&gt;</code> "
                  "textcontinued.</p>", "<ul><li>one &lt;i&gt;</li><li><code>two</code></li></ul>",
                  '<div class="tbl"><table><thead><tr><th>k</th><th>v</th></tr></thead>'
                  "<tbody><tr><td>&lt;s&gt;</td><td><strong>9</strong></td></tr></tbody>"
                  "</table></div>", "<pre><code>x &lt; y</code></pre>"):
        assert piece in flat, piece


def test_markdown_renders_no_raw_html_and_no_script_links():
    from traincast.report.html import markdown

    out = markdown("<script>alert(1)</script>\n\n[x](javascript:alert(1)) <b onclick=1>")
    assert "<script" not in out and "<b " not in out and 'href="javascript' not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out


def test_report_pieces_are_jinja_templates_with_autoescape():
    from importlib.resources import files

    from traincast.report.html import _env, table

    folder = files("traincast.report") / "templates"
    assert {"page.html.j2", "parts.html.j2"} <= {p.name for p in folder.iterdir()}
    assert _env().autoescape is True
    assert table(["<th>"], [["<td>", 1.5]], caption="<c>") == (
        '<div class="tbl"><p class="tcap">&lt;c&gt;</p><table><thead><tr><th scope="col">'
        '&lt;th&gt;</th></tr></thead><tbody><tr><td>&lt;td&gt;</td><td class="num">1.5</td>'
        "</tr></tbody></table></div>")


ALLOWED_TAG = re.compile(r"</?(h[1-6]|p|b|strong|em|code|pre|ul|ol|li|div|table|thead|tbody|tr"
                         r'|th|td|blockquote|hr ?/?|br ?/?)( class="tbl"| style="[a-z:-]+")?>'
                         r'|<a href="[^"<>]*">|</a>')
"""The renderer's own tags; a link's href is markdown-it's percent-encoded, validated copy of
the input (an autolink such as ``<https://...>``; ``javascript:``, ``vbscript:``, ``file:`` and
``data:`` links are refused and stay text)."""


def test_a_link_from_the_input_is_encoded_and_never_a_script() -> None:
    from traincast.report.html import markdown

    assert markdown("<a-:>") == '<p><a href="a-:">a-:</a></p>\n'
    assert 'href="https://x.org/a%22b"' in markdown('<https://x.org/a"b>')
    for text in ("<javascript:alert(1)>", "<vbscript:x>", "[x](javascript:alert(1))"):
        assert "<a" not in markdown(text), text


def test_a_fence_s_info_string_makes_no_attribute() -> None:
    from traincast.report.html import markdown

    html = markdown("```:\nx < y\n```\n\n~~~ \"onload=alert(1)\n~~~")
    assert "language" not in html and "onload" not in html and "x &lt; y" in html


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>&\"'`*|#-: \nabscript/=()")), max_size=200))
def test_markdown_never_emits_markup_from_its_input(text):
    from traincast.report.html import markdown

    assert "<" not in ALLOWED_TAG.sub("", markdown(text))


# ---------------------------------------------------------------- report.html


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = make_study(tmp_path_factory.mktemp("study"))
    return write_report(folder)


def test_report_embeds_every_figure_with_caption_and_files(report):
    text = report.read_text()
    figures = re.findall(r"<figure id=\"fig-([a-z_]+)\"><img src=\"data:image/png;base64,"
                         r"([A-Za-z0-9+/=]+)\"", text)
    stems = {s for s, _ in figures}
    assert {"breakdown_architecture", "breakdown_workload", "cdf_gpus_per_job", "cdf_duration",
            "cdf_comm_share", "share_architecture", "cdf_speedup"} <= stems
    for stem, data in figures:
        png = base64.b64decode(data)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        assert (report.parent / "figures" / f"{stem}.png").read_bytes() == png
        assert (report.parent / "figures" / f"{stem}.svg").is_file()
    assert text.count("<figcaption>") == len(figures)
    assert text.count("<i>Input: ") == len(figures)


def test_report_escapes_input_strings(report):
    text = report.read_text()
    assert INJECTED not in text
    assert html.escape(INJECTED) in text
    assert "<script" not in text.lower()
    # the SVG files (opened on their own in a browser) carry the name only as escaped text
    for svg in (report.parent / "figures").glob("*.svg"):
        body = svg.read_text()
        assert "<script" not in body.lower(), svg.name
        ET.fromstring(body)


def test_report_is_self_contained(report):
    text = report.read_text()
    assert not re.search(r"(src|href)=\"(https?:)?//", text)
    assert "Content-Security-Policy" in text


def test_report_findings_tables_and_assumptions(report):
    text = report.read_text()
    # 1+1+8+4+32+16+16+8+8+1+0+2 = 97 GPUs
    assert html.escape("12 jobs on 97 GPUs were characterized.") in text
    # a number in the unit its key names: a share as a percentage
    assert re.search(r"<td>comm share mean</td><td[^>]*>\d+\.\d%</td>", text)
    for caption in ("Jobs, GPUs and GPU time per training architecture",
                    "What-if scenarios", "Recommendations", "holding the most GPU time",
                    "Catalog entries used", "What-if scenario definitions"):
        assert caption in text, caption
    # the what-if table's columns read as whatif's own: priced, not fit
    at = text.index("What-if scenarios (whatif.json)")
    scen = text[text.index("<table", at):]  # the caption stands above its table
    head = scen[:scen.index("</tr>")]
    assert re.findall(r"<th[^>]*>([^<]*)</th>", head)[:4] == ["scenario", "matched", "priced",
                                                               "not fit"]
    # V100 (trace alias) resolves to its catalog entry, whose source is cited
    assert "V100-SXM2-16GB" in text and "eth100" in text
    assert "Provenance of the bundled sample" in text
    from traincast.report.sections import sample_provenance

    provenance = sample_provenance()
    assert provenance, "docs/sample.md (the bundled sample's provenance) is missing"
    assert html.escape(provenance.strip().splitlines()[0].lstrip("# ")) in text
    # recommendations sorted by best_speedup: j11 (1.0 + 11 / 10) first
    rec = text[text.index("Recommendations: the 12 jobs"):]
    assert re.search(r"<tbody><tr><td>j11</td>", rec)


def test_a_number_with_its_unit_is_right_aligned_as_a_number():
    from traincast.report.html import table

    out = table(["a", "b", "c", "d"], [["25.9%", "4,023.5 GPU-h", "1w1g", "1.36×"]])
    assert out.count('class="num"') == 3 and '<td>1w1g</td>' in out


def test_a_tables_values_are_shown_in_the_unit_their_key_names():
    from traincast.report.sections import cell, label

    assert (label("gpu_time_saved_share"), cell("gpu_time_saved_share", 0.2804)) == \
        ("GPU time saved share", "28.0%")
    assert (label("gpu_time_s"), cell("gpu_time_s", 14_484_569.0)) == \
        ("GPU time", "4,023 GPU-h")  # / 3600 = 4,023.49, whole from 100 on
    assert cell("base_total_s", 0.1951) == "195 ms"
    # a time on the trace's clock (epoch seconds in Slurm) is no duration: as it is
    assert (label("trace_end_s"), cell("trace_end_s", 1.7e9)) == ("trace end (trace clock)",
                                                                  "1.700e+09 s")
    assert (cell("x_share", 0.0003), cell("x_share", 0.0)) == ("<0.1%", "0.0%")
    assert cell("eth100_mean_speedup_network_jobs", 1.325) == "1.32×"
    assert cell("gpu_util_pred_mean", 0.8137) == "81.4%"
    assert cell("weight_bytes", 2.5e9) == "2.5 GB"
    assert (cell("jobs", 260), cell("overlap", 0), cell("x_share", None)) == (260, 0, None)
    assert (label("gpus"), label("gpu")) == ("GPUs", "catalog GPU")


def test_report_breakdown_bars_match_the_jobs(tmp_path):
    """The per-architecture figure's ps-worker bar = mean of the ps-worker jobs' shares."""
    import pyarrow.parquet as pq

    from traincast.report.build import _arch_breakdown_figure
    from traincast.report.inputs import load_study

    folder = make_study(tmp_path / "s")
    jobs = pq.read_table(folder / "jobs.parquet").to_pydict()
    sel = [i for i, a in enumerate(jobs["architecture"]) if a == "ps-worker"]
    comm = [jobs["comm_s"][i] / sum(jobs[c][i] for c in ("data_io_s", "compute_flop_s",
                                                         "compute_mem_s", "comm_s"))
            for i in sel]
    gpus = [jobs["n_gpus"][i] for i in sel]
    fig = _arch_breakdown_figure(load_study(folder))[0].draw()
    job_ax, gpu_ax = fig.get_axes()
    labels = [t.get_text() for t in job_ax.get_yticklabels()]
    row = labels.index("ps-worker")
    comm_bars = [b for b in job_ax.patches if b.get_hatch() == "xx"]
    assert comm_bars[row].get_width() == pytest.approx(100 * sum(comm) / len(comm))
    comm_bars = [b for b in gpu_ax.patches if b.get_hatch() == "xx"]
    expected = 100 * sum(c * g for c, g in zip(comm, gpus, strict=True)) / sum(gpus)
    assert comm_bars[row].get_width() == pytest.approx(expected)


def test_report_with_validate_and_roofline(tmp_path):
    folder = make_small_study(tmp_path / "s")
    val = tmp_path / "validate.json"
    val.write_text(json.dumps({"cases": [
        {"model": INJECTED, "arch": "1w1g", "batch_size": 32, "measured_s": 0.2,
         "predicted_s": 0.15, "error": -0.25},
        {"model": "zoo:bert", "arch": "1w1g", "batch_size": 8, "measured_s": 0.5,
         "predicted_s": 0.55, "error": 0.1, "paper_predicted_s": 0.3, "paper_error": -0.4}],
        "median_abs_error": 0.175, "p90_abs_error": 0.235, "paper_median_abs_error": 0.4}))
    record = {"model": "toy", "batch_size": 4, "amp": False, "ops": [
        {"op": "addmm", "phase": "forward", "flops": 2e9, "bytes_read": 4e6,
         "bytes_written": 1e6, "bound": "compute"},
        {"op": "relu", "phase": "forward", "flops": 0, "bytes_read": 1e6,
         "bytes_written": 1e6, "bound": "memory"}]}
    path = write_report(folder, validate_json=val,
                        roofline={"profile": record, "gpu": "V100"}, out_dir=tmp_path / "o")
    text = path.read_text()
    assert not (folder / "report.html").exists()
    assert (tmp_path / "o" / "figures" / "validate.png").is_file()
    assert (tmp_path / "o" / "figures" / "roofline_toy_v100-sxm2-16gb.svg").is_file()
    assert "Median absolute error 17.5%, 90th percentile 23.5% (paper&#x27;s peak model: " \
        "median 40.0%)" in text
    assert "Roofline: toy on V100-SXM2-16GB" in text
    # the cases' errors in percent, as the caption says them: -0.25 -> -25.0%, 0.1 -> +10.0%
    assert ">-25.0%<" in text and ">+10.0%<" in text and ">-40.0%<" in text
    assert ">-0.25<" not in text
    assert html.escape(INJECTED) in text and INJECTED not in text
    assert text.count("<figure ") == 3  # share per architecture, validate, roofline
    # the roofline at the rates predict prices aggregate work at (docs/model.md): by hand, 300 W
    # over 80 x 64 lanes at 1.53 GHz, 12 nm is above the power reference (boost held) and 16
    # lanes per partition issue loads for free, so R = 2 x 80 x 64 x 1.53 GHz x e / rho; memory
    # at f_elementwise of 900 GB/s. addmm takes max(2e9 / R, 5e6 / (900e9 f)) = 2e9 / R
    from traincast.hardware.catalog import load_catalog

    k = load_catalog().gpu("V100").kernel
    assert 300 / (80 * 64 * 1.53 * 12) > k["power_ref"]
    rate = 2 * 80 * 64 * 1.53e9 * k["simt_efficiency"] / k["choice_linear"]
    assert 2e9 / rate > 5e6 / (900e9 * k["f_elementwise"])
    assert f"{2e9 / rate * 1e3:.4g}" in text


def test_missing_files_are_named_and_bad_files_are_errors(tmp_path):
    folder = make_small_study(tmp_path / "s")
    text = write_report(folder).read_text()
    assert "fig-share_architecture" in text and "fig-cdf_speedup" not in text
    assert "jobs.parquet" in text and "whatif_jobs.csv" in text  # named as missing
    (folder / "whatif.json").write_text("{not json")
    with pytest.raises(TraincastError, match=r"whatif\.json: not valid JSON"):
        write_report(folder)
    with pytest.raises(TraincastError, match="no such study folder"):
        write_report(tmp_path / "nope")
    with pytest.raises(TraincastError, match=r"whatif\.json: a file, not a study folder"):
        write_report(folder / "whatif.json")


@pytest.mark.parametrize(("name", "field", "value", "kind"), [
    ("characterize.json", "breakdown", "x", "an object"),
    ("characterize.json", "breakdown", True, "an object"),
    ("summary.json", "by_source", -1, "a list"),
    ("study.json", "jobs", "12", "a number")])
def test_a_study_file_field_of_another_kind_is_named(tmp_path, name, field, value, kind):
    import json

    folder = make_small_study(tmp_path / "s")
    path = folder / name
    data = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**data, field: value}))
    with pytest.raises(TraincastError, match=rf"{name}: field '{field}' must be {kind}"):
        write_report(folder)


def test_bad_validate_file_names_the_case_and_keeps_the_old_report(tmp_path):
    folder = make_small_study(tmp_path / "s")
    before = write_report(folder).read_text()
    val = tmp_path / "v.json"
    val.write_text(json.dumps({"cases": [{"model": "m", "measured_s": 0.1, "predicted_s": 0.1},
                                         {"model": "m", "measured_s": -1, "predicted_s": 0.1}]}))
    with pytest.raises(TraincastError, match=r"cases\[1\] field 'measured_s'"):
        write_report(folder, validate_json=val)
    assert (folder / "report.html").read_text() == before
    # nor is a new output folder made for a report that is not written
    with pytest.raises(TraincastError, match=r"cases\[1\] field 'measured_s'"):
        write_report(folder, validate_json=val, out_dir=tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_report_cli_and_lazy_matplotlib(tmp_path):
    folder = make_small_study(tmp_path / "s")
    code = ("import sys, traincast, traincast.report, traincast.cli;"
            "print('matplotlib' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr
    cli = [sys.executable, "-c", "from traincast.cli import main; main()", "report"]
    r = subprocess.run([*cli, "--study", str(folder), "-o", str(tmp_path / "o"), "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["report"] == str(tmp_path / "o" / "report.html")
    assert sorted(out["figures"]) == [str(tmp_path / "o" / "figures" / f"share_architecture.{e}")
                                      for e in ("png", "svg")]
    r = subprocess.run([*cli, "--study", str(folder), "--roofline", "zoo:x"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--gpu" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([*cli, "--study", str(tmp_path / "missing")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "no such study folder" in " ".join(r.stderr.split())


def test_top_jobs_count_a_running_job_up_to_the_trace_end(tmp_path):
    import pyarrow as pa

    from traincast.report.inputs import Study
    from traincast.report.sections import top_jobs

    jobs = pa.table({"job_id": ["done", "running"], "n_gpus": [1.0, 3.0],
                     "start_time_s": [0.0, 3600.0], "end_time_s": [7200.0, None],
                     "censored": [False, True]})
    text = top_jobs(jobs, Study(folder=tmp_path, jobs=jobs))
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", row)
             for row in re.findall(r"<tr><td.*?</tr>", text)]
    # trace end = 7200 s: running 3 GPUs x (7200 - 3600) s = 3 GPU-hours, first, a lower
    # bound (it still runs: "≥", and the caption says how many); done 1 x 2 h
    assert cells == [["running", "3", "≥ 3 GPU-h"], ["done", "1", "2 GPU-h"]]
    assert "1 still running at the trace's end (censored)" in text.replace("&#x27;", "'")


def test_top_jobs_leave_out_jobs_that_hold_no_gpu_time(tmp_path):
    # two CPU jobs (0 GPUs) and one of 2 GPUs for 1 h: one row, 2 GPU hours; CPU jobs alone: no
    # table of dashes
    import pyarrow as pa

    from traincast.report.inputs import Study
    from traincast.report.sections import top_jobs

    jobs = pa.table({"job_id": ["cpu1", "gpu", "cpu2"], "n_gpus": [0.0, 2.0, 0.0],
                     "start_time_s": [0.0, 0.0, 0.0], "end_time_s": [9e5, 3600.0, 9e5],
                     "censored": [False, False, False]})
    text = top_jobs(jobs, Study(folder=tmp_path, jobs=jobs))
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", row)
             for row in re.findall(r"<tr><td.*?</tr>", text)]
    assert cells == [["gpu", "2", "2 GPU-h"]] and "The 1 job holding" in text
    cpu = jobs.filter(pa.compute.equal(jobs["n_gpus"], 0.0))
    assert top_jobs(cpu, Study(folder=tmp_path, jobs=cpu)) == ""


def test_top_jobs_leave_out_a_column_no_job_has_and_say_so(tmp_path):
    import pyarrow as pa

    from traincast.report.inputs import Study
    from traincast.report.sections import top_jobs

    jobs = pa.table({"job_id": ["a", "b"], "user": pa.array([None, None], pa.string()),
                     "n_gpus": [1.0, 2.0], "start_time_s": [0.0, 0.0],
                     "end_time_s": [3600.0, 3600.0], "censored": [False, False]})
    text = top_jobs(jobs, Study(folder=tmp_path, jobs=jobs))
    assert ">user</th>" not in text and "no user: none of these jobs has one" in text
    with_user = jobs.set_column(1, "user", pa.array(["u", None]))
    assert ">user</th>" in top_jobs(with_user, Study(folder=tmp_path, jobs=with_user))
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", row)
             for row in re.findall(r"<tr><td.*?</tr>", text)]
    assert cells == [["b", "2", "2 GPU-h"], ["a", "1", "1 GPU-h"]]


def test_report_cli_shows_its_steps_on_stderr_unless_quiet(tmp_path):
    from typer.testing import CliRunner

    from traincast.cli import app

    folder = make_small_study(tmp_path / "s")
    args = ["report", "--study", str(folder), "-o", str(tmp_path / "o")]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    steps = [line.strip() for line in r.stderr.splitlines() if "report:" in line]
    # the small study has one figure: reading, preparing, the figure, the sections, the page
    assert steps == ["· report: reading the study folder", "· report: preparing the figures",
                     "· report: figure 1 of 1: share_architecture",
                     "· report: sections: findings, tables, assumptions",
                     "· report: writing report.html"]
    assert "report:" not in r.stdout
    quiet = CliRunner().invoke(app, ["--quiet", *args])
    assert quiet.exit_code == 0, quiet.output
    assert "report:" not in quiet.stderr and "Report written" in quiet.stdout


def test_the_catalog_table_lists_the_node_each_job_was_predicted_on(tmp_path) -> None:
    """A G2 (A10) pod of 8 GPUs on one node is predicted on the 8-GPU A10 preset, a 1-GPU one
    on the A10's default preset: the report's catalog table names both, with their GPU."""
    import pyarrow as pa

    from traincast.hardware.catalog import load_catalog
    from traincast.report.inputs import Study
    from traincast.report.sections import catalog_used

    jobs = pa.table({"job_id": ["a", "b"], "architecture": [None, None],
                     "n_gpus": [8.0, 1.0], "gpus_per_node": [8.0, 1.0],
                     "gpu_type": ["G2", "G2"]})
    html = catalog_used(Study(folder=tmp_path, jobs=jobs), load_catalog())
    assert ">a10-pcie-8<" in html and ">a10-pcie<" in html and ">A10<" in html
    assert "pai-v100-nvlink" not in html  # no job runs on the default node of no GPU type
    # the hardware recommendations move jobs to is listed too, with its links
    rec = pa.table({"job_id": ["a", "b"], "best_node": ["dgx-b200", "a10-pcie"],
                    "best_gpu": ["B200", "A10"], "cheapest_node": [None, "pai-v100-pcie"],
                    "cheapest_gpu": [None, "V100-PCIE-16GB"]})
    html = catalog_used(Study(folder=tmp_path, jobs=jobs, tables={"recommend.csv": rec}),
                        load_catalog())
    assert all(f">{n}<" in html for n in ("dgx-b200", "B200", "pai-v100-pcie",
                                          "V100-PCIE-16GB", "a10-pcie-8"))
    assert f">{load_catalog().nodes['dgx-b200'].nic}<" in html
    # a GPU's row: its datasheet and the rates its aggregate work is priced at (kernel model,
    # by hand: 80 SMs x 64 lanes x 2 x 1.38 GHz x simt_efficiency 0.8703 / rho 1.0172 =
    # 12.1 TFLOP/s; 900 GB/s x f_elementwise 0.7229 = 650.6 GB/s), not a flat efficiency 1
    assert ("datasheet fp32 14 TFLOP/s, fp16 112 TFLOP/s, 900 GB/s; priced (kernel strategy, "
            "aggregate fp32 work) at 12.1 TFLOP/s and 650.6 GB/s") in html


def test_the_settings_table_names_every_trace_of_the_study(tmp_path) -> None:
    from traincast.hardware.catalog import load_catalog
    from traincast.report.inputs import Study
    from traincast.report.sections import assumptions

    meta = {"trace": {"path": None, "paths": ["/x/a.csv", "/y/b.csv"], "format": "csv",
                      "sample": False}, "jobs": 3}
    html = assumptions(Study(folder=tmp_path, json={"study.json": meta}), load_catalog())
    assert "trace paths" in html and "/x/a.csv, /y/b.csv" in html
    assert "trace path<" not in html  # no empty row for the single path


def test_join_words_lists_as_a_sentence() -> None:
    from traincast.units import join_words

    assert join_words(["fp32", "bf16", "fp8"], "or") == "fp32, bf16 or fp8"
    assert join_words([1, 2]) == "1 and 2" and join_words(["a"]) == "a"
    assert join_words([]) == ""


def test_plural_counts() -> None:
    from traincast.units import plural

    assert plural(1, "merge group") == "1 merge group"
    assert plural(3, "pair") == "3 pairs" and plural(1234, "job") == "1,234 jobs"
    assert plural(5.5, "GPU") == "5.5 GPUs" and plural(1.0, "node") == "1 node"


def test_a_real_trace_report_says_what_it_assumed_for_its_jobs(tmp_path):
    # 260 ElasticFlow jobs name no workload (drawn from the sample's mix) and no GPU type
    # (priced on the default node): the top of the report and its settings say both; the
    # bundled sample keeps its own banner
    from traincast.report.inputs import Study
    from traincast.report.sections import assumed_notes, sample_banner

    study = Study(folder=tmp_path, json={
        "study.json": {"assumed_workload": {"workload": "mix", "jobs": 260,
                                            "by_workload": {"gpt2": 140, "gcn": 120}}},
        "characterize.json": {"default_hardware": {"jobs": 260, "node": "pai-v100-nvlink",
                                                   "gpu": "V100-SXM2-16GB"}}})
    notes = assumed_notes(study)
    assert notes[0].startswith("260 jobs name no workload: each was given one drawn per job "
                               "id from the bundled sample's workload mix (gpt2 140, gcn 120)")
    assert notes[1] == ("260 jobs name no GPU type or node: they are taken to run on "
                        "pai-v100-nvlink (V100-SXM2-16GB), the default node")
    assert "Assumed for this trace" in sample_banner(study)
    assert sample_banner(Study(folder=tmp_path, json={"study.json": {}})) == ""
    # --workload none: nothing assumed, and the settings table shows no raw key for it
    from traincast.hardware.catalog import load_catalog
    from traincast.report.sections import assumptions

    none = Study(folder=tmp_path, json={"study.json": {"assumed_workload": None, "seed": 1}})
    html = assumptions(none, load_catalog())
    assert "<td>seed</td>" in html and "assumed_workload" not in html


def test_a_validate_file_of_kernel_errors_is_named_so(tmp_path):
    import json

    from traincast.errors import TraincastError
    from traincast.report.inputs import load_validate

    kernels = tmp_path / "valk.json"
    kernels.write_text(json.dumps({"rows": 10, "gpus": {"T4": {}}, "default_floor": {}}))
    with pytest.raises(TraincastError, match="the JSON of `traincast validate --kernels`") as e:
        load_validate(kernels)
    assert "traincast validate --json > FILE" in e.value.hint
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"median_abs_error": 0.1}))
    with pytest.raises(TraincastError, match="no 'cases' list"):
        load_validate(other)


def test_the_share_figures_legend_lies_below_the_bars():
    # a 97.2% bar reaches the right edge: a legend inside the axes would cover its label
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from traincast.report.figures import share_figure

    fig = share_figure({"ps-worker": {"jobs": 97.2, "gpus": 50.0},
                        "1w1g": {"jobs": 2.8, "gpus": 50.0}}, title="T", group_label="arch",
                       metrics={"jobs": "jobs", "gpus": "GPUs"})
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    assert ax.get_legend() is None and len(fig.legends) == 1
    legend = fig.legends[0].get_window_extent()
    assert legend.y1 <= ax.get_window_extent().y0  # wholly below the axes
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["jobs", "GPUs"]


def test_validate_errors_are_the_times_ratio_as_their_column_says(tmp_path):
    # a hand-edited file whose error fields disagree with its times: the report computes
    # predicted / measured - 1 (0.45 / 0.5 - 1 = -10%, 0.6 / 0.5 - 1 = +20%) and their median
    # (15%), not the file's 90% and 5%; a paper time alone gives its error too (0.3 / 0.5 - 1)
    folder = make_small_study(tmp_path / "s")
    val = tmp_path / "validate.json"
    val.write_text(json.dumps({"cases": [
        {"model": "a", "arch": "1w1g", "batch_size": 1, "measured_s": 0.5, "predicted_s": 0.45,
         "error": 0.9, "paper_predicted_s": 0.3},
        {"model": "b", "arch": "1w1g", "batch_size": 1, "measured_s": 0.5, "predicted_s": 0.6,
         "error": 0.2}], "median_abs_error": 0.05, "p90_abs_error": 0.05}))
    text = write_report(folder, validate_json=val, out_dir=tmp_path / "o").read_text()
    assert ">-10.0%<" in text and ">+20.0%<" in text and ">+90.0%<" not in text
    assert ">-40.0%<" in text  # the paper model's, from its time
    assert "Median absolute error 15.0%, 90th percentile 19.0%" in text
