"""Nothing is cut off at 80 columns: tables split or wrap, --help keeps whole words."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

from traincast.cli.tables import print_table, split_table


def tc80(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in a terminal 80 columns wide, in ``cwd`` (a command that stores a trace writes
    its default store, ``traincast.duckdb``, there: a test's own folder, so that tests running
    side by side do not share one)."""
    return subprocess.run([sys.executable, "-c", "from traincast.cli import main; main()",
                           *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "COLUMNS": "80"})


@pytest.mark.parametrize("args", [
    ("zoo", "list"),
    ("merge", "zoo:resnet50", "zoo:resnet101", "--top", "3"),
    ("plan", "zoo:llama2-70b", "--gpus", "512", "--node", "dgx-h100", "--top", "3"),
    ("predict", "--help"),
    ("plan", "--help"),
    ("whatif", "--help"),
])
def test_no_cell_is_cut_at_80_columns(args: tuple[str, ...]) -> None:
    r = tc80(*args)
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout, r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 80


@pytest.mark.parametrize(("args", "message"), [
    (("plan", "zoo:llama2-7b", "--gpus", "8", "--top", "0"), "'--top': must be at least 1, got 0"),
    (("plan", "zoo:llama2-7b", "--gpus", "8", "--overlap", "1.5"),
     "'--overlap': must be from 0 to 1, got 1.5"),
    (("predict", "--flops", "1e9", "--mem-bytes", "1e6", "--weight-bytes", "1e6", "--zero", "4"),
     "'--zero': must be from 0 to 3, got 4"),
    # a huge value in a few digits, not its 309; a whole number no float holds, by its length
    (("plan", "zoo:llama2-7b", "--gpus", "8", "--overlap", "1e308"),
     "'--overlap': must be from 0 to 1, got 1e+308"),
    (("plan", "zoo:llama2-7b", "--gpus", "8", "--global-batch", "9" * 400),
     "must be from 1 to 1,000,000,000, got a number of 400 digits"),
])
def test_range_checks_moved_out_of_help_still_refuse(args: tuple[str, ...], message: str) -> None:
    """``within`` (cli/common.py) replaces typer's min/max: the same refusal, exit 2."""
    from typer.testing import CliRunner

    from traincast.cli import app

    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 2
    assert message in " ".join(r.output.replace("│", " ").split())


def test_choice_lists_are_words_rich_can_wrap() -> None:
    from traincast.cli.common import one_of

    assert one_of(["fp32", "tf32", "bf16"]) == "fp32, tf32 or bf16"
    assert one_of(["none"]) == "none"


def test_zoo_list_keeps_every_header_and_name_whole() -> None:
    out = tc80("zoo", "list").stdout
    for word in ("fwd GFLOP", "train GFLOP", "aliases", "megatron-gpt-145.6b",
                 "vit-base-patch16-224"):
        assert word in out, word


def test_a_wide_table_splits_into_tables_that_repeat_the_name_column() -> None:
    table = Table(title="wide")
    names = ["first-model-name", "second-model-name"]
    cols = [f"column-{i}" for i in range(6)]  # 6 x 10 wide: about 80 with the name column
    table.add_column("name", no_wrap=True)
    for c in cols:
        table.add_column(c, justify="right")
    for n in names:
        table.add_row(n, *[f"{i},234,567.8" for i in range(6)])
    buf = io.StringIO()
    console = Console(file=buf, width=40, color_system=None)
    parts = split_table(table, 40, console)
    assert len(parts) > 1
    assert all(p.columns[0].header == "name" for p in parts)
    assert sorted(c.header for p in parts for c in p.columns[1:]) == cols
    print_table(table, console)
    text = buf.getvalue()
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 40
    for word in [*names, *cols, *[f"{i},234,567.8" for i in range(6)]]:
        assert word in text, word


def test_a_no_wrap_column_wider_than_the_terminal_folds_instead_of_being_cropped() -> None:
    table = Table()
    table.add_column("name", no_wrap=True)
    table.add_column("value", no_wrap=True)
    word = "x" * 30 + "y" * 30  # one word, wider than the 40-column terminal
    table.add_row("a", word)
    buf = io.StringIO()
    console = Console(file=buf, width=40, color_system=None)
    print_table(table, console)
    text = buf.getvalue()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 40
    assert "".join(ch for ch in text if ch in "xy") == word  # every letter printed, in order


def _command_paths() -> list[tuple[str, ...]]:
    """Every command of the CLI, sub-commands included (``("hardware", "show")``)."""
    import typer.main

    from traincast.cli import app

    root = typer.main.get_command(app)
    out: list[tuple[str, ...]] = []
    for name, cmd in root.commands.items():  # type: ignore[attr-defined]
        subs = getattr(cmd, "commands", None)
        out += [(name, s) for s in subs] if subs else [(name,)]
    return out


def test_every_help_page_keeps_whole_words_at_80_columns() -> None:
    from typer.testing import CliRunner

    from traincast.cli import app

    paths = _command_paths()
    assert ("colocate",) in paths and ("hardware", "show") in paths and len(paths) >= 17
    runner = CliRunner()
    cut = {}
    for path in paths:
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
        assert res.exit_code == 0, (path, res.output)
        lines = [line for line in res.output.splitlines() if "…" in line]
        if lines:
            cut[" ".join(path)] = lines
    assert not cut, cut


def test_a_markdown_report_prints_as_tables_that_fit_80_columns() -> None:
    # a Markdown table wider than 80 columns, with text around it, printed for a terminal
    from io import StringIO

    from rich.console import Console

    from traincast.cli.tables import print_markdown

    head = "| " + " | ".join(f"column number {i}" for i in range(8)) + " |"
    row = "| " + " | ".join(f"value-{i}-{'x' * 12}" for i in range(8)) + " |"
    text = "Intro **bold** line.\n\n" + head + "\n|" + "---|" * 8 + "\n" + row + "\n\nAfter."
    buf = StringIO()
    print_markdown(text, Console(file=buf, width=80, emoji=False))
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80 and not [ln for ln in lines if "…" in ln]
    flat = "".join(buf.getvalue().split())
    for i in range(8):  # every value whole (folding may break it across lines, never cut)
        assert f"value-{i}-{'x' * 12}" in flat.replace("│", "")
    assert "Intro" in flat and "After." in flat and "|---|" not in flat


def test_table_keeps_every_word_whole_while_a_layout_with_whole_words_fits() -> None:
    from traincast.cli.tables import Table as WordTable

    cells = ["j1", "allreduce-local on pai-v100-nvlink", "205 ms", "allreduce-cluster",
             "keep: no option that fits is more than 5% faster (bottleneck: FLOP-bound "
             "compute), said at length so that this column must wrap"]
    out = {}
    for name, kind in (("rich", Table), ("traincast", WordTable)):
        table = kind()
        for header in ("job", "now", "time", "recommended", "reason"):
            table.add_column(header, overflow="fold")
        table.add_row(*cells)
        buf = io.StringIO()
        Console(file=buf, width=72, color_system=None).print(table)
        out[name] = buf.getvalue()
        assert max(len(line) for line in out[name].splitlines()) <= 72
    # rich alone folds a short column's word; the table keeps the short columns' words whole,
    # and short cells on one line, the long text wrapping at its words
    assert "allreduce-cluster" not in out["rich"]
    for word in ("allreduce-local", "pai-v100-nvlink", "205 ms", "allreduce-cluster",
                 "FLOP-bound", "(bottleneck:"):
        assert word in out["traincast"], word


def test_recommend_per_job_tables_keep_names_whole_at_80_columns(tmp_path) -> None:
    trace = tmp_path / "jobs.csv"
    trace.write_text("job_id,architecture,n_gpus,gpu_type,workload\n"
                     "j1,allreduce-local,16,V100,resnet50\nj2,1w1g,1,V100,resnet50\n")
    r = tc80("recommend", str(trace), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for word in ("allreduce-cluster", "pai-v100-nvlink", "FLOP-bound"):
        assert word in r.stdout, word
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    # each reason once, under its table, keyed from its job's row: two jobs, two reasons;
    # the time cell on one line
    # the jobs that gain most first: j2 (a speedup anywhere), then j1 (none: no time as given)
    per_job = r.stdout[r.stdout.index("Per job"):r.stdout.index("Fastest anywhere")]
    rows = [ln for ln in per_job.splitlines() if ln.startswith(("j1 ", "j2 "))]
    assert [ln.split()[0] for ln in rows] == ["j2", "j1"]
    assert [ln.split()[-1] for ln in rows] == ["[1]", "[2]"]
    assert re.search(r"\s\d+(\.\d+)? ms\s", rows[0]), "the time cell on one line"
    legend = " ".join(per_job[per_job.index("time = per iteration"):].split())
    assert legend.count("[2] allreduce-cluster on pai-v100-nvlink: fits") == 1
    assert "[1] keep: no option that fits is more than 5% faster" in legend
    # a job whose GPUs do not fit its node says why it has no time, not just "unknown", and
    # the architecture that fits them
    import json

    rows = json.loads(tc80("recommend", str(trace), "--json", cwd=tmp_path).stdout)["rows"]
    assert rows[0]["arch_reason"] == ("allreduce-cluster on pai-v100-nvlink: fits and has a "
                                      "predicted time (as given: shape does not fit the "
                                      "architecture)")
    assert rows[1]["arch_reason"].startswith("keep:")


def test_table_keeps_no_wrap_columns_at_their_width() -> None:
    from traincast.cli.tables import Table as WordTable

    table = WordTable()
    table.add_column("name")
    table.add_column("tokens", no_wrap=True)
    table.add_column("note")
    table.add_row("first", "1,234,567 tok", "a long remark that has to wrap over several "
                  "lines of the table so the layout is tight")
    buf = io.StringIO()
    Console(file=buf, width=40, color_system=None).print(table)
    text = buf.getvalue()
    assert "1,234,567 tok" in text and max(len(line) for line in text.splitlines()) <= 40


def test_when_the_longest_words_cannot_fit_the_table_splits_and_folds_no_short_word() -> None:
    from traincast.cli.tables import Table as WordTable

    def printed(width: int) -> str:
        table = WordTable()
        for header in ("file", "jobs", "bad rows", "censored", "0 GPU", "frac. GPU",
                       "inferred"):
            table.add_column(header, justify="right" if header != "file" else "left",
                             overflow="fold")
        table.add_row(name, "8,152", "0", "6,090", "1,088", "3,078", "8,152")
        buf = io.StringIO()
        Console(file=buf, width=width, color_system=None).print(table)  # not print_table
        return buf.getvalue()

    name = "openb_pod_list_gpuspec33.csv"
    text = printed(66)  # rich alone folds the numbers; folding only the name takes 13 wide
    assert max(len(line) for line in text.splitlines()) <= 66
    assert "(continued)" in text  # split by columns, the file column repeated
    for word in (name, "8,152", "6,090", "1,088", "3,078", "censored", "inferred", "rows"):
        assert word in text, word  # every word whole
    text = printed(24)  # no split fits the name: it folds, every letter kept, in order
    assert max(len(line) for line in text.splitlines()) <= 24 and name not in text
    first = [line.split("│")[1].strip() for line in text.splitlines() if "│" in line]
    assert name in "".join(first)


def test_help_at_80_columns_shows_no_value_for_a_flag() -> None:
    """An on/off flag takes no value: no ``<bool>`` beside it; a file option says FILE; the
    descriptions keep a column of at least 30 characters on predict's widest page."""
    r = tc80("predict", "--help")
    assert r.returncode == 0, r.stderr
    assert "<bool>" not in r.stdout and "<list[Path]>" not in r.stdout
    lines = r.stdout.splitlines()
    amp = next(ln for ln in lines if ln.startswith("│ --amp "))
    catalog = next(ln for ln in lines if ln.startswith("│ --catalog "))
    assert "FILE" in catalog
    assert len(amp) - 2 - amp.index("Mixed precision") >= 30, amp  # the description column


def test_recommend_shows_every_job_id_whole_at_80_columns(tmp_path) -> None:
    # an Alibaba pod name shows on one line; a UUID folds onto more lines, whole, never "…"
    uuid = "c9c620ea-4336-c1a9-8abe-e26bd13076b8"
    trace = tmp_path / "jobs.csv"
    trace.write_text("job_id,architecture,n_gpus,gpu_type,workload\n"
                     f"openb-pod-0000,1w1g,1,V100,resnet50\n{uuid},1w1g,1,V100,resnet50\n")
    r = tc80("recommend", str(trace), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout and max(len(line) for line in r.stdout.splitlines()) <= 80
    per_job = r.stdout[r.stdout.index("Per job"):r.stdout.index("Fastest anywhere")]
    assert any(line.startswith("openb-pod-0000 ") for line in per_job.splitlines())
    firsts = "".join(line.split()[0] for line in per_job.splitlines()
                     if line.split() and line.split()[0] in uuid)
    assert uuid in firsts


def test_a_table_between_widths_folds_its_first_column_alone_and_splits_below() -> None:
    from traincast.cli.tables import Table as WordTable

    def printed(width: int) -> str:
        table = WordTable(title="x[/y] title", caption="a caption [/z] below the parts")
        for header in ("file", "arch", "arch2", "n"):
            table.add_column(header, justify="right" if header == "n" else "left")
        table.add_row(name, "allreduce-local", "allreduce-clust", "1,234")
        buf = io.StringIO()
        Console(file=buf, width=width, color_system=None).print(table)
        return buf.getvalue()

    name = "openb_pod_list_gpuspec33_xx.csv"
    text = printed(70)  # fits with the file name folded, in the first column only
    assert "(continued)" not in text and "…" not in text and name not in text
    assert "allreduce-local" in text and "allreduce-clust" in text and "1,234" in text
    for width in (50, 56):  # too narrow for it: split, the file column repeated
        text = printed(width)
        assert "x[/y] title (continued)" in text and "…" not in text, width
        assert max(len(line) for line in text.splitlines()) <= width
        for word in ("allreduce-local", "allreduce-clust", "1,234", name):
            assert word in text, (width, word)  # the name whole in the part it fits
        assert "a caption [/z] below the parts" in " ".join(text.split())
        assert text.rstrip().endswith("parts")  # the caption once, after the parts


def test_a_link_entry_gives_units_and_room_to_its_sources() -> None:
    # eth100: its own long source folds in the value column, so the efficiency's and the
    # latency's sources get half the line, not a sliver; link fields carry their units
    r = tc80("hardware", "show", "eth100")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(re.search(r"bw_gbs\s+12\.5 GB/s", line) for line in lines)
    assert any(re.search(r"latency_us\s+25 µs", line) for line in lines)
    effic = next(line for line in lines if line.lstrip().startswith("efficiency"))
    source_at = effic.index("payload rule")
    assert len(effic) - source_at >= 25  # the source column is 25 characters wide at least


def test_recommend_keeps_job_ids_whole_and_prices_per_thousand(tmp_path: Path) -> None:
    # 12-character ids at 80 columns with --price: each id whole on its row, prices as
    # US dollars per 1,000 iterations in one number format (no exponent)
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus,workload,gpu_type,start_time_s,end_time_s\n"
                     "job-00000001,1,resnet50,V100,0,3600\njob-00000002,8,bert-base,V100,0,3600\n")
    r = tc80("recommend", str(trace), "--price", "aws-on-demand", "--db",
             str(tmp_path / "s.duckdb"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    table = r.stdout[r.stdout.index("Fastest anywhere"):]
    assert "$/1k now" in table and "$/iter" not in table
    for job in ("job-00000001", "job-00000002"):
        assert any(line.startswith(job) for line in table.splitlines()), job
    assert not re.search(r"\de[-+]?\d", table)
    # the cheapest's reason is keyed in the table's last column and said under it, as the
    # fastest's is (a kept setup says why it is kept)
    rows = json.loads(tc80("recommend", str(trace), "--price", "aws-on-demand", "--db",
                           str(tmp_path / "s.duckdb"), "--json", cwd=tmp_path).stdout)["rows"]
    said = " ".join(table.split())
    for row in rows:
        assert row["cheapest_reason"] and " ".join(row["cheapest_reason"].split()) in said
        line = next(ln for ln in table.splitlines() if ln.startswith(row["job_id"]))
        assert re.search(r"\[\d+\]\s*$", line), line


def test_hardware_show_keeps_field_names_whole_at_80_columns(tmp_path: Path) -> None:
    # a long source (a URL) beside a field name folds; the field name stays one word
    r = tc80("hardware", "show", "L4", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    words = {w for line in r.stdout.splitlines() for w in line.split()}
    assert {"fp32_cores_per_sm", "boost_clock_mhz", "compute_capability"} <= words
