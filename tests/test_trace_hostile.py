"""Hostile trace input: values outside their physical bounds, an end before its start, files
cut short (CSV and JSON), binary bytes, and adapter-specific nonsense (gpu_milli, node_num,
booleans, PAI plan_gpu and inst_id). Each must be a bad row naming file, row, field and value
(or, for a file that cannot be read as a whole, an error naming it), the good rows stored.
Expected values are worked out by hand (or with the csv module) in each test."""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
from pathlib import Path

import pytest

from traincast.analysis.characterize import characterize
from traincast.errors import TraincastError
from traincast.trace import read_trace
from traincast.trace.store import format_errors, ingest, load_jobs

POD_LIST = ("alibaba-gpu-v2023", "openb_pod_list_gpuspec33.csv")


def _ingest(path: Path, fmt: str = "csv", db: Path | None = None) -> dict:
    return ingest(path, format=fmt, db=db or path.with_suffix(".duckdb"))


def _errors(report: dict) -> list[tuple[int, str, str]]:
    return [(e["row"], e["field"], e["value"]) for e in report["errors"]]


def _jobs(db: Path) -> dict[str, dict]:
    return {j["job_id"]: j for j in load_jobs(db).to_pylist()}


# --- physical bounds ------------------------------------------------------------------------

def test_values_outside_their_bounds_are_bad_rows(tmp_path: Path) -> None:
    header = "job_id,n_gpus,start_time_s,end_time_s,gpu_util,n_workers,batch_size,weight_bytes\n"
    rows = [
        "ok,1000000,0,10,1,2,64,1e9",            # every value at or inside its bound
        "g,1e308,0,10,,,,",                      # 1e308 GPUs
        "g2,1000001,0,10,,,,",                   # one GPU over the cap
        "t,1,0,10000-01-01 00:00:00,,,,",        # year 10000
        "t2,1,253402300800,,,,,",                # 10000-01-01 in seconds
        "t3,1,-62135596801,,,,,",                # one second before year 1
        "u,1,0,10,1.5,,,",                       # utilization above 1
        "u2,1,0,10,50,,,",                       # a percentage, not a fraction
        "w,1,0,10,,2000000,,",                   # two million workers
        "b,1,0,10,,,2e9,",                       # batch size over 1e9
        "f,1,0,10,,,,2e18",                      # 2 EB of weights per iteration
        "last,1,9999-12-31 23:59:59,9999-12-31 23:59:59,0,0,0,0",  # the latest time: fine
    ]
    path = tmp_path / "t.csv"
    path.write_text(header + "\n".join(rows) + "\n")
    report = _ingest(path)
    assert report["jobs"] == 2 and report["bad_rows"] == 10
    count = "must be a count from 0 to 1,000,000"
    time = "must be a time between 0001-01-01 and 9999-12-31 UTC"
    assert _errors(report) == [
        (2, "n_gpus", f"1e308 ({count})"),
        (3, "n_gpus", f"1000001 ({count})"),
        (4, "end_time_s", f"10000-01-01 00:00:00 ({time})"),
        (5, "start_time_s", f"253402300800 ({time})"),
        (6, "start_time_s", f"-62135596801 ({time})"),
        (7, "gpu_util", "1.5 (must be a utilization from 0 to 1: a percentage divided by "
                        "100, 35 -> 0.35)"),
        (8, "gpu_util", "50 (must be a utilization from 0 to 1: a percentage divided by "
                        "100, 35 -> 0.35)"),
        (9, "n_workers", f"2000000 ({count})"),
        (10, "batch_size", "2e9 (must be a batch size from 0 to 1e9)"),
        (11, "weight_bytes", "2e18 (must be bytes per iteration from 0 to 1e18)"),
    ]
    assert sorted(_jobs(path.with_suffix(".duckdb"))) == ["last", "ok"]


def test_characterize_counts_only_physical_jobs(tmp_path: Path) -> None:
    """1e308 GPUs or a year-10000 end would make GPU time 1.8e308 and the trace end year
    10000: they are bad rows, and the totals are those of the other jobs (by hand)."""
    path = tmp_path / "t.csv"
    path.write_text("job_id,n_gpus,start_time_s,end_time_s\n"
                    "a,2,0,100\nhuge,1e308,0,100\nb,1,50,80\n"
                    "far,1,0,10000-01-01 00:00:00\n")
    report: dict = {}
    jobs = read_trace(path, on_report=report.update)
    assert report["bad_rows"] == 2
    r = characterize(jobs, fill=False)
    assert r["jobs"] == 2 and r["gpus"] == 3
    assert r["gpu_time_s"] == 2 * 100 + 1 * 30
    assert r["trace_end_s"] == 100


def test_a_negative_count_is_reported_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,n_gpus,gpu_util\na,-2,\nb,1,-0.5\n")
    assert _errors(_ingest(path)) == [(1, "n_gpus", "-2"), (2, "gpu_util", "-0.5")]


# --- an end before its start, and durations ---------------------------------------------------

def test_an_end_before_its_start_is_a_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,n_gpus,start_time_s,end_time_s\n"
                    "a,1,10,5\nb,1,10,10\nc,1,0,2000000000\nd,1,0,1000000000\n")
    report = _ingest(path)
    # b: zero length is a job; c: 2e9 s = 63 years, longer than 1e9 s; d: exactly 1e9 s
    assert _errors(report) == [
        (1, "end_time_s", "5 (before start_time_s 10)"),
        (3, "end_time_s", "2000000000 (2000000000.0 s after start_time_s 0: longer than "
                          "1e9 s)")]
    assert sorted(_jobs(path.with_suffix(".duckdb"))) == ["b", "d"]


def test_helios_end_before_start_names_both_times(tmp_path: Path) -> None:
    path = tmp_path / "cluster_log.csv"
    path.write_text("job_id,gpu_num,node_num,state,submit_time,start_time,end_time,duration\n"
                    "h1,8,2,COMPLETED,2020-01-01 00:00:00,2020-01-03 00:00:00,"
                    "2020-01-02 00:00:00,\n"
                    "h2,8,2,COMPLETED,2020-01-01 00:00:00,2020-01-01 01:00:00,,-60\n"
                    "h3,8,2,COMPLETED,2020-01-01 00:00:00,2020-01-01 01:00:00,,abc\n")
    report = _ingest(path, "helios")
    assert report["jobs"] == 0
    assert _errors(report) == [
        (1, "end_time_s", "2020-01-02 00:00:00 (before start_time 2020-01-03 00:00:00)"),
        (2, "duration", "-60"), (3, "duration", "abc (not a number of seconds)")]


def test_elasticflow_duration_bounds(tmp_path: Path) -> None:
    path = tmp_path / "ef.csv"
    path.write_text("job_id,submission_time,duration,num_gpu\na,0,10,1\nb,0,1e10,1\n")
    assert _errors(_ingest(path, "elasticflow")) == \
        [(2, "duration", "1e10 (must be seconds from 0 to 1e9)")]


# --- files cut short --------------------------------------------------------------------------

def _cut_rows(data: bytes, fields: int) -> tuple[int, bool]:
    """By the csv module: complete data rows of a file cut at its end, and whether its last,
    unterminated line has all ``fields`` fields (a whole row)."""
    text = data.decode()
    lines = text.split("\n")
    complete, partial = lines[1:-1], lines[-1]
    whole = bool(partial) and len(next(csv.reader([partial]))) >= fields
    return len(complete), whole


def test_the_real_pod_list_cut_inside_a_row(shared_data: Path, tmp_path: Path) -> None:
    """Cut inside openb-pod-2194's deletion_time (10825655 -> 108256) and after the first
    letter of its name: 2,194 whole pods stored, the cut one a bad row naming row 2,195."""
    src = (shared_data.joinpath(*POD_LIST)).read_text()
    line = "openb-pod-2194,8000,16384,1,1000,,LS,Running,10797519,10825655,10797868"
    at = src.index(line)
    assert src[:at].count("\n") == 2195  # the header and 2,194 pods before it
    for cut, field, shown, k in ((line.index("10825655") + 6, "deletion_time", "108256", 10),
                                 (1, "name", "o", 1)):
        path = tmp_path / f"pods{k}.csv"
        path.write_text(src[:at + cut])
        report = _ingest(path, "alibaba-2023")
        assert report["jobs"] == 2194 and report["bad_rows"] == 1
        assert _errors(report) == [(2195, field, f"{shown} (the file ends here, without a "
                                    f"newline, after {k} of the 11 fields: the row is cut)")]
        assert "openb-pod-2194" not in _jobs(path.with_suffix(".duckdb"))


@pytest.mark.parametrize(("parts", "fmt", "fields"),
                         [(POD_LIST, "alibaba-2023", 11),
                          (("elasticflow", "cluster10.csv"), "elasticflow", 4)])
def test_real_traces_cut_at_random_offsets(shared_data: Path, tmp_path: Path,
                                           parts: tuple[str, ...], fmt: str,
                                           fields: int) -> None:
    """Every complete row is stored; a cut row with fewer fields is a bad row; a last line
    with all its fields (the cut fell inside its last value, or before its newline) is
    stored and said in a note, as a whole row without a final newline is."""
    data = shared_data.joinpath(*parts).read_bytes()
    rng = random.Random(2024)
    offsets = sorted(rng.randrange(len(data) // 10, len(data)) for _ in range(6))
    for i, at in enumerate(offsets):
        path = tmp_path / f"cut{i}.csv"
        path.write_bytes(data[:at])
        complete, whole = _cut_rows(data[:at], fields)
        report = _ingest(path, fmt)
        cut = not whole and not data[:at].endswith(b"\n")
        assert report["jobs"] == complete + whole, at
        assert report["bad_rows"] == cut, at
        if cut:
            assert report["errors"][0]["row"] == complete + 1
            assert "the row is cut" in report["errors"][0]["value"]
        assert any("no final newline" in n["note"] for n in report["notes"]) == whole, at


def test_a_whole_real_trace_without_final_newline_is_stored(shared_data: Path,
                                                            tmp_path: Path) -> None:
    path = shared_data / "elasticflow" / "cluster10.csv"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert not path.read_bytes().endswith(b"\n")
    report = ingest(path, format="elasticflow", db=tmp_path / "s.duckdb")
    assert report["jobs"] == len(rows) and report["bad_rows"] == 0
    note = report["notes"][0]
    assert note["count"] == 1 and "cluster10.csv has no final newline" in note["note"]


def _quoted_file(rows: int = 30_000) -> str:
    """More rows than DuckDB's sniffer samples, so the file's end does not change how it is
    read."""
    return "job_id,n_gpus,user\n" + "".join(f"j{i},{1 + i % 8},u{i}\n" for i in range(rows))


@pytest.mark.parametrize("end", ['cut,2,"unterm', 'cut,2,"unterm\n'])
def test_an_unterminated_quote_is_a_cut_row(tmp_path: Path, end: str) -> None:
    path = tmp_path / "t.csv"
    path.write_text(_quoted_file() + end)
    report = _ingest(path)
    assert report["jobs"] == 30_000 and report["bad_rows"] == 1
    (row, field, value), = _errors(report)
    assert (row, field) == (30_001, "user")
    assert value.startswith('"unterm') and "ends inside this quoted value" in value
    assert "cut" not in _jobs(path.with_suffix(".duckdb"))


def test_a_short_file_ending_inside_a_quote_is_read_as_a_long_one(tmp_path: Path) -> None:
    """In a short file the open quote changes how DuckDB sniffs the header (each line one
    column): the header is sniffed with the quote as a character, and the cut row is a bad
    row, as in a long file."""
    path = tmp_path / "t.csv"
    path.write_text('job_id,n_gpus,user\na,1,x\nb,2,"unterm')
    report = _ingest(path)
    assert report["jobs"] == 1 and set(_jobs(path.with_suffix(".duckdb"))) == {"a"}
    assert _errors(report) == [(2, "user", '"unterm (the file ends inside this quoted value, '
                                "field 3 of 3: the row is cut)")]


def test_a_sacct_export_reads_quotes_as_characters(tmp_path: Path) -> None:
    """sacct --parsable2 never quotes: a job name holding a quote (even or odd count) opens no
    quoted value that would swallow the rows after it."""
    head = "JobID|JobName|User|State|Submit|Start|End|NNodes|AllocTRES\n"
    times = "2024-01-02T10:00:00|2024-01-02T10:05:00|2024-01-02T12:05:00"
    names = {"2001": "train", "2002": '"exp 7', "2003": "eval", "2004": "eval",
             "2005": 'run 7"', "2006": "last"}
    gpus = {"2001": 2, "2002": 2, "2003": 4, "2004": 8, "2005": 1, "2006": 1}
    for drop in ("", "2005"):
        path = tmp_path / f"sacct{drop}.txt"
        path.write_text(head + "".join(
            f"{j}|{n}|a|COMPLETED|{times}|1|cpu=4,gres/gpu={gpus[j]},node=1\n"
            for j, n in names.items() if j != drop))
        report = _ingest(path, "slurm")
        jobs = _jobs(path.with_suffix(".duckdb"))
        assert report["bad_rows"] == 0
        assert {j: v["n_gpus"] for j, v in jobs.items()} == {
            j: g for j, g in gpus.items() if j != drop}


def test_a_quote_inside_an_unquoted_value_is_a_character(tmp_path: Path) -> None:
    """One ``"`` inside an unquoted user (o"neil) makes the file's quote count odd, yet no
    quoted value is left open: every job is stored, the user as written, the last row too."""
    path = tmp_path / "t.csv"
    path.write_text('job_id,user,n_gpus\na,alice,1\nb,o"neil,2\nc,carol,4\n')
    report = _ingest(path)
    assert report["jobs"] == 3 and report["bad_rows"] == 0
    jobs = _jobs(path.with_suffix(".duckdb"))
    assert jobs["b"]["user"] == 'o"neil' and jobs["c"]["n_gpus"] == 4


@pytest.mark.parametrize("quoted", [False, True])
def test_a_short_file_cut_inside_its_last_quoted_value_keeps_its_other_rows(
        tmp_path: Path, quoted: bool) -> None:
    """Three rows, the last cut inside a quoted value (no dialect for DuckDB's sniffer in a
    file this short): the cut row is the bad row, as in a long file, the others stored; with
    every field quoted (as traincast sample writes) the header's names lose their quotes."""
    q = '"' if quoted else ""
    path = tmp_path / "t.csv"
    path.write_text(f"{q}job_id{q},{q}n_gpus{q},{q}status{q}\n{q}a{q},1,{q}Done{q}\n"
                    f'{q}b{q},2,{q}Done{q}\n"c",4,"Term\n')
    report = _ingest(path)
    assert report["jobs"] == 2 and report["bad_rows"] == 1
    assert _errors(report)[0][:2] == (3, "status")
    assert "the file ends inside this quoted value" in _errors(report)[0][2]
    assert {k: j["n_gpus"] for k, j in _jobs(path.with_suffix(".duckdb")).items()} == \
        {"a": 1, "b": 2}


def test_a_quote_left_open_after_a_stray_one_names_its_row(tmp_path: Path) -> None:
    """The stray quote evens the count, but the quote opened in data row 3 is never closed:
    the error names that row."""
    path = tmp_path / "t.csv"
    path.write_text('job_id,user,n_gpus\na,alice,1\nb,o"neil,2\n"c,carol,4\n')
    with pytest.raises(TraincastError, match="row 3: a quote opens there"):
        _ingest(path)


def test_a_quote_left_open_early_in_a_big_file_names_its_row(tmp_path: Path) -> None:
    """The quote opened in data row 2 runs to the end: a value of about 300 KiB, past the
    csv module's default field limit (128 KiB), is still read as one open value."""
    from traincast.trace.adapters.base import open_quote_row

    path = tmp_path / "t.csv"
    path.write_text("job_id,user,n_gpus\na,alice,1\n\"b,bob,2\n"
                    + "".join(f"j{i},u{i},1\n" for i in range(20_000)))
    assert path.stat().st_size > 200_000
    assert open_quote_row(path) == 2
    with pytest.raises(TraincastError, match="row 2: a quote opens there"):
        _ingest(path)


def test_the_open_quote_scan_holds_at_most_its_cap(tmp_path: Path, monkeypatch) -> None:
    """A quoted value past QUOTED_VALUE_MAX characters is taken as left open where it starts
    (the pass does not hold the rest of a big file); one within the cap that closes is whole."""
    from traincast.trace.adapters import base

    monkeypatch.setattr(base, "QUOTED_VALUE_MAX", 1000)
    path = tmp_path / "t.csv"
    path.write_text('job_id,user,n_gpus\na,"' + "x" * 5000 + '",1\nb,u,2\n')
    assert base.open_quote_row(path) == 1
    path.write_text('job_id,user,n_gpus\na,"' + "x" * 500 + '",1\nb,u,2\n')
    assert base.open_quote_row(path) is None


def test_quoted_line_breaks_at_the_end_are_whole(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('job_id,n_gpus,user\na,1,"x\ny"\nb,2,"two\nlines"')
    report = _ingest(path)
    assert report["jobs"] == 2 and report["bad_rows"] == 0
    assert _jobs(path.with_suffix(".duckdb"))["b"]["user"] == "two\nlines"


def test_gzip_cut_short_and_gzip_of_a_cut_file(tmp_path: Path) -> None:
    text = "job_id,n_gpus\n" + "".join(f"j{i},1\n" for i in range(20_000))
    whole = gzip.compress(text.encode())
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(TraincastError) as exc:
        _ingest(cut, db=tmp_path / "a.duckdb")
    assert str(cut) in str(exc.value) and "cut short" in exc.value.hint
    of_cut = tmp_path / "of_cut.csv.gz"
    of_cut.write_bytes(gzip.compress((text + "j20000").encode()))
    report = _ingest(of_cut, db=tmp_path / "b.duckdb")
    assert report["jobs"] == 20_000
    assert _errors(report) == [(20_001, "job_id", "j20000 (the file ends here, without a "
                                "newline, after 1 of the 2 fields: the row is cut)")]


def test_a_cut_row_of_a_semicolon_file(tmp_path: Path) -> None:
    cut = tmp_path / "cut.csv"
    cut.write_text("job_id;n_gpus;user\na;1;x\nb;2")
    assert _errors(_ingest(cut)) == [(2, "n_gpus", "2 (the file ends here, without a newline, "
                                      "after 2 of the 3 fields: the row is cut)")]
    whole = tmp_path / "whole.csv"
    whole.write_text("job_id;n_gpus;user\na;1;x\nb;2;y")
    report = _ingest(whole)
    assert report["jobs"] == 2 and report["bad_rows"] == 0 and len(report["notes"]) == 1


@pytest.mark.parametrize("delim", [";", "\t", "|"])
def test_quoted_fields_split_by_another_delimiter(tmp_path: Path, delim: str) -> None:
    # R's write.csv2 and pandas' QUOTE_ALL: every field quoted, split by ";" (or tab, "|"),
    # a delimiter inside a quoted value kept in it
    path = tmp_path / "quoted.csv"
    rows = [["job_id", "n_gpus", "user"], ["j0", "0", "u0"], ["j1", "8", f"a{delim}b"]]
    path.write_text("".join(delim.join(f'"{v}"' if not v.isdigit() else v for v in r) + "\n"
                            for r in rows))
    report = _ingest(path)
    assert report["jobs"] == 2 and report["bad_rows"] == 0
    jobs = _jobs(path.with_suffix(".duckdb"))
    assert jobs["j1"]["n_gpus"] == 8 and jobs["j1"]["user"] == f"a{delim}b"


def test_columns_named_another_way_are_named_with_their_map(tmp_path: Path) -> None:
    """A generic export's JobID, NumGPUs, SubmitTime, ... are no canonical names: the missing
    required columns' hint names the file's own, and the columns left unread are said, each
    with the --map that reads it."""
    path = tmp_path / "export.csv"
    path.write_text("JobID,NumGPUs,SubmitTime,StartTime,EndTime,GPUType,extra\n"
                    "j1,8,2024-01-01T00:00:00,2024-01-01T00:10:00,2024-01-01T02:00:00,a100,x\n")
    with pytest.raises(TraincastError) as err:
        _ingest(path)
    assert err.value.hint.startswith("the file's column for each: --map job_id=jobid for "
                                     "job_id, --map n_gpus=numgpus for n_gpus")
    db = tmp_path / "export.duckdb"
    report = ingest(path, format="csv", db=db, mapping={"job_id": "JobID", "n_gpus": "NumGPUs"})
    assert [(n["count"], n["note"]) for n in report["notes"]] == [(
        4, "column(s) the csv format reads under another name left unread: SubmitTime, "
        "StartTime, EndTime, GPUType (read them with --map submit_time_s=SubmitTime --map "
        "start_time_s=StartTime --map end_time_s=EndTime --map gpu_type=GPUType); 1 other "
        "column(s) unread")]
    mapped = {"job_id": "JobID", "n_gpus": "NumGPUs", "submit_time_s": "SubmitTime",
              "start_time_s": "StartTime", "end_time_s": "EndTime", "gpu_type": "GPUType"}
    report = ingest(path, format="csv", db=tmp_path / "mapped.duckdb", mapping=mapped)
    assert report["notes"] == []
    # a file with the canonical columns themselves is not told to map others onto them, and
    # id / gpu (a row number, a GPU count) are no synonyms
    both = tmp_path / "both.csv"
    both.write_text("job_id,n_gpus,id,gpu,status,state\nj1,8,1,8,done,COMPLETED\n")
    assert ingest(both, format="csv", db=tmp_path / "both.duckdb")["notes"] == []
    job = _jobs(tmp_path / "mapped.duckdb")["j1"]
    assert job["end_time_s"] - job["start_time_s"] == 6600 and job["gpu_type"] is not None


def test_map_serves_the_adapters_own_rules(tmp_path: Path) -> None:
    """--map of a column an adapter filters or windows over (Slurm's JobID and its job steps,
    Alibaba 2023's deletion_time and the trace end) or reads from a fixed key list (Philly's
    JSON keys) reads the file's own column under the rule, as the hint says it will."""
    times = "2024-01-02T10:00:00|2024-01-02T10:05:00|2024-01-02T12:05:00"
    sacct = tmp_path / "sacct.txt"
    sacct.write_text("JobIDRaw|User|State|Submit|Start|End|NNodes|AllocTRES\n"
                     f"7|a|COMPLETED|{times}|1|gres/gpu=2,node=1\n"
                     f"7.batch|a|COMPLETED|{times}|1|gres/gpu=2,node=1\n")
    report = ingest(sacct, format="slurm", db=tmp_path / "s.duckdb",
                    mapping={"job_id": "JobIDRaw"})
    assert report["jobs"] == 1 and report["bad_rows"] == 0
    assert [(n["count"], n["note"][:15]) for n in report["notes"]] == [(1, "job step row(s)")]
    pods = tmp_path / "pods.csv"
    pods.write_text(POD_HEADER.replace("deletion_time", "deleted_at")
                    + "p1,1,1,1,1000,,LS,Running,0,100,10\np2,1,1,1,1000,,LS,Running,0,50,10\n")
    ingest(pods, format="alibaba-2023", db=tmp_path / "p.duckdb",
           mapping={"end_time_s": "deleted_at"})
    jobs = _jobs(tmp_path / "p.duckdb")
    assert jobs["p2"]["end_time_s"] == 50 and all(j["censored"] for j in jobs.values())
    philly = tmp_path / "jobs.json"
    philly.write_text(json.dumps([{
        "job_id": "a1", "owner": "u", "vc": "v", "status": "Pass",
        "submitted_time": "2017-10-03 10:00:00", "attempts": [{
            "start_time": "2017-10-03 10:01:00", "end_time": "2017-10-03 11:00:00",
            "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]}]))
    ingest(philly, format="philly", db=tmp_path / "j.duckdb",
           mapping={"job_id": "job_id", "user": "owner"})
    job = _jobs(tmp_path / "j.duckdb")["a1"]
    assert (job["user"], job["n_gpus"], job["end_time_s"] - job["start_time_s"]) == ("u", 2, 3540)
    # keys in another case (JobId, User, Status) are the release's, as columns are in any
    # case; --map naming one in its own case reads it too
    cased = tmp_path / "cased.json"
    cased.write_text(json.dumps([{
        "JobId": "b1", "User": "w", "vc": "v", "Status": "Pass",
        "submitted_time": "2017-10-03 10:00:00", "attempts": [{
            "start_time": "2017-10-03 10:01:00", "end_time": "2017-10-03 11:00:00",
            "detail": [{"ip": "m1", "gpus": ["gpu0"]}]}]}]))
    for i, mapping in enumerate(({}, {"user": "User"}, {"job_id": "JobId"})):
        db = tmp_path / f"cased{i}.duckdb"
        assert ingest(cased, format="philly", db=db, mapping=mapping)["bad_rows"] == 0
        job = _jobs(db)["b1"]
        assert (job["user"], job["status"], job["n_gpus"]) == ("w", "Pass", 1), mapping


def test_a_time_in_milliseconds_says_what_it_reads_as(tmp_path: Path) -> None:
    """1709287200000 is past year 9999 as seconds: a bad row that says it is 2024-03-01
    10:00:00 UTC in milliseconds; a time past year 9999 that is no time in milli-, micro- or
    nanoseconds says only its bound."""
    path = tmp_path / "ms.csv"
    path.write_text("job_id,n_gpus,submit_time_s\nj1,1,1709287200000\nj2,1,1709287200\n"
                    "j3,1,1e20\n")
    report = _ingest(path)
    assert report["jobs"] == 1
    bound = "(must be a time between 0001-01-01 and 9999-12-31 UTC)"
    assert _errors(report) == [
        (1, "submit_time_s", f"1709287200000 {bound} (in milliseconds since 1970 it is "
                             "2024-03-01 10:00:00 UTC: give seconds, or a date-time)"),
        (3, "submit_time_s", f"1e20 {bound}")]


def test_microseconds_nanoseconds_and_yyyymmdd_dates_are_said(tmp_path: Path) -> None:
    """Past year 9999 as seconds, a time of 2024 in micro- or nanoseconds says so (a bad row);
    a column whose every value reads as a date YYYYMMDD is kept as seconds, with a note."""
    path = tmp_path / "us.csv"
    path.write_text("job_id,n_gpus,submit_time_s\nj1,1,1709287200000000\n"
                    "j2,1,1709287200000000000\n")
    said = [v.split(") (")[1] for _, _, v in _errors(_ingest(path))]
    assert said == [f"in {u} since 1970 it is 2024-03-01 10:00:00 UTC: give seconds, or a "
                    "date-time)" for u in ("microseconds", "nanoseconds")]
    ymd = tmp_path / "ymd.csv"
    ymd.write_text("job_id,n_gpus,start_time_s,end_time_s\na,1,20240102,20240103\n"
                   "b,1,20231231,20240101\n")
    notes = {n["note"].split(" look")[0]: n["count"] for n in _ingest(ymd)["notes"]}
    assert notes == {"value(s) of start_time_s": 2, "value(s) of end_time_s": 2}
    # one value that is no such date (month 13), or relative seconds: no note
    ymd.write_text("job_id,n_gpus,start_time_s,end_time_s\na,1,20241302,20241303\n"
                   "b,1,0,3600\n")
    assert not _ingest(ymd, db=tmp_path / "r.duckdb")["notes"]


def test_a_zone_abbreviation_of_several_zones_is_not_guessed(tmp_path: Path) -> None:
    """CST is China's +08:00 on a Chinese cluster and US Central's -06:00 to a parser: a bad
    row naming both, not a time 14 hours off; UTC and offsets read, Go's ``+0800 CST`` too."""
    path = tmp_path / "tz.csv"
    path.write_text("job_id,n_gpus,submit_time_s\nj1,1,2024-03-01 10:00:00 CST\n"
                    "j2,1,2024-03-01 10:00:00 UTC\nj3,1,2024-03-01 10:00:00+08:00\n"
                    "j4,1,2024-03-01 10:00:00 ist\n"
                    "j5,1,2024-03-01 10:00:00 +0800 CST\nj6,1,2024-03-01 10:00:00 +0000 UTC\n"
                    "j7,1,2024-03-01 10:00:00.5 -0500 EST\nj8,1,2024-03-01 10:00:00 +0800 +08\n"
                    "j9,1,2024-03-01 10:00:00+08 CST\n")
    report = _ingest(path)
    jobs = _jobs(path.with_suffix(".duckdb"))
    assert jobs["j2"]["submit_time_s"] - jobs["j3"]["submit_time_s"] == 8 * 3600
    # Go's time format: the offset says the zone, the name after it is not needed
    assert jobs["j5"]["submit_time_s"] == jobs["j3"]["submit_time_s"]
    assert jobs["j6"]["submit_time_s"] == jobs["j2"]["submit_time_s"]
    assert jobs["j7"]["submit_time_s"] - jobs["j2"]["submit_time_s"] == 5 * 3600 + 0.5
    # a zone without an abbreviation by its number, and an hours-only offset before a name
    assert jobs["j8"]["submit_time_s"] == jobs["j9"]["submit_time_s"] == jobs["j3"]["submit_time_s"]
    assert [(r, v.split(" (")[1][:30]) for r, _, v in _errors(report)] == [
        (1, "CST names several time zones, "), (4, "IST names several time zones, ")]
    assert "China Standard Time +08:00, US Central -06:00" in _errors(report)[0][2]
    # an adapter that reads seconds only (Alibaba 2023) gives no advice of a date-time's offset
    pods = tmp_path / "pods.csv"
    pods.write_text(POD_HEADER + "p1,1,1,1,1000,,LS,Succeeded,2024-03-01 10:00:00 CST,50,10\n")
    said = _errors(_ingest(pods, "alibaba-2023"))
    assert [r for r, _, _ in said] == [1] and "names several" not in said[0][2]


def test_strict_fails_on_a_cut_row(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,n_gpus,user\na,1,x\nb,2")
    with pytest.raises(TraincastError, match=r"row 2: field n_gpus: bad value '2' \(the file"):
        ingest(path, db=tmp_path / "s.duckdb", strict=True)
    assert not (tmp_path / "s.duckdb").exists()


# --- Philly JSON ------------------------------------------------------------------------------

def _philly_jobs(n: int = 5) -> list[dict]:
    return [{"jobid": f"p{i}", "user": "u", "vc": "v", "status": "Pass",
             "submitted_time": "2017-10-03 14:00:00",
             "attempts": [{"start_time": "2017-10-03 14:10:00",
                           "end_time": "2017-10-03 15:10:00",
                           "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]}
            for i in range(n)]


@pytest.mark.parametrize(("name", "data", "says"), [
    ("binary", b"\xff\xd8\xff\xe0\x00\x10JFIF" + bytes(range(256)), "not a JSON array"),
    ("utf16", json.dumps(_philly_jobs()).encode("utf-16"), "UTF-16"),
    ("utf16le", json.dumps(_philly_jobs()).encode("utf-16-le"), "UTF-16"),  # no byte-order mark
    ("empty", b"", "not a JSON array"),
    ("object", json.dumps(_philly_jobs()[0]).encode(), "not a JSON array"),
])
def test_philly_not_a_json_array(tmp_path: Path, name: str, data: bytes, says: str) -> None:
    path = tmp_path / f"{name}.json"
    path.write_bytes(data)
    with pytest.raises(TraincastError, match=says) as exc:
        _ingest(path, "philly")
    assert str(path) in str(exc.value)


@pytest.mark.parametrize("data", [b"[]", b"\xef\xbb\xbf [ \r\n ]\n"])
def test_philly_an_empty_array_is_a_trace_of_no_job(tmp_path: Path, data: bytes) -> None:
    # as a CSV of a header alone: stored as a source of no job, not a missing-column error
    path = tmp_path / "cluster_job_log"
    path.write_bytes(data)
    report = _ingest(path, "philly")
    assert report["jobs"] == 0 and report["bad_rows"] == 0


def test_philly_a_wrong_type_inside_one_job_spoils_that_job_only(tmp_path: Path) -> None:
    jobs = _philly_jobs(8)
    jobs[5]["attempts"][0]["detail"].append({"ip": "m2", "gpus": None})  # a machine, no GPUs
    del jobs[6]["attempts"][0]["detail"]  # no machines listed: no GPUs
    jobs[7]["attempts"][0]["detail"] = "m1"  # not a list of machines: GPUs unknown
    jobs[1]["attempts"] = 1e308  # a number where the list of attempts belongs
    jobs[2]["attempts"][0]["detail"][0]["gpus"] = 1e308  # ... where a machine's GPUs belong
    jobs[3]["attempts"][0]["end_time"] = [1, 2]  # a list where a time belongs
    path = tmp_path / "log.json"
    path.write_text(json.dumps(jobs))
    report = _ingest(path, "philly")
    got = _jobs(path.with_suffix(".duckdb"))
    for j in ("p0", "p4"):  # the others as they were: 2 GPUs, one hour
        assert got[j]["n_gpus"] == 2 and got[j]["end_time_s"] - got[j]["start_time_s"] == 3600
    assert "p1" not in got or got["p1"]["n_gpus"] is None  # no attempt list: never ran
    assert "p2" not in got or got["p2"]["n_gpus"] is None  # its GPUs unknown, not 0
    assert (4, "end_time_s") in {(r, f) for r, f, _ in _errors(report)}
    assert (got["p5"]["n_gpus"], got["p5"]["gpus_per_node"]) == (2, 1.0)  # 2 GPUs, 2 machines
    assert got["p6"]["n_gpus"] == 0
    assert "p7" not in got or got["p7"]["n_gpus"] is None


def test_philly_cut_between_or_inside_jobs_is_an_error(tmp_path: Path) -> None:
    text = json.dumps(_philly_jobs())
    fourth = text.index('{"jobid": "p3"')
    for name, cut in (("between", text[:fourth]), ("between2", text[:fourth - 2]),
                      ("inside", text[:fourth + 30])):
        path = tmp_path / f"{name}.json"
        path.write_text(cut)
        with pytest.raises(TraincastError, match="not a whole JSON array") as exc:
            _ingest(path, "philly")
        assert str(path) in str(exc.value)
    whole = tmp_path / "whole.json"
    whole.write_text(text + "\n")
    assert _ingest(whole, "philly")["jobs"] == 5


def test_philly_binary_bytes_inside_the_array(tmp_path: Path) -> None:
    path = tmp_path / "bin.json"
    path.write_bytes(b'[{"jobid": "\xff\xfe\x00"}]')
    with pytest.raises(TraincastError) as exc:
        _ingest(path, "philly")
    assert str(path) in str(exc.value)


# --- adapter rules ----------------------------------------------------------------------------

POD_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
              "creation_time,deletion_time,scheduled_time\n")


def test_alibaba_gpu_milli_and_num_gpu(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(POD_HEADER +
                    "p1,1000,1,2,500,,LS,Succeeded,0,100,10\n"      # 2 x 0.5 = 1 GPU
                    "p2,1000,1,2,5000,,LS,Succeeded,0,100,10\n"     # 5000 milli: bad
                    "p3,1000,1,1,abc,,LS,Succeeded,0,100,10\n"      # not a number
                    "p4,1000,1,1.5,1000,,LS,Succeeded,0,100,10\n"   # half a GPU count
                    "p5,1000,1,1,-1,,LS,Succeeded,0,100,10\n"       # negative share
                    "p6,1000,1,1,,,LS,Succeeded,0,50,10\n"         # missing: a whole GPU
                    "p7,1000,1,-1,1000,,LS,Succeeded,0,100,10\n")  # a negative count
    report = _ingest(path, "alibaba-2023")
    share = "must be from 0 to 1000: thousandths of one GPU"
    assert _errors(report) == [(2, "gpu_milli", f"5000 ({share})"), (3, "gpu_milli", "abc"),
                               (4, "num_gpu", "1.5 (must be a whole number of GPUs)"),
                               (5, "gpu_milli", f"-1 ({share})"),
                               (7, "num_gpu", "-1")]  # the file's column, not n_gpus
    jobs = _jobs(path.with_suffix(".duckdb"))
    assert {k: j["n_gpus"] for k, j in jobs.items()} == {"p1": 1.0, "p6": 1.0}


def test_a_job_without_an_id_is_a_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,n_gpus\n,1\nb,2\n")
    report = _ingest(path)
    assert _errors(report) == [(1, "job_id", "(missing: every job needs an id)")]
    assert list(_jobs(path.with_suffix(".duckdb"))) == ["b"]


def test_elasticflow_gpu_counts_are_whole(tmp_path: Path) -> None:
    path = tmp_path / "cluster.csv"
    path.write_text("job_id,submission_time,duration,num_gpu\na,0,10,2.5\nb,0,10,2\n")
    report = _ingest(path, "elasticflow")
    assert _errors(report) == [(1, "num_gpu", "2.5 (must be a whole number of GPUs)")]
    assert {k: j["n_gpus"] for k, j in _jobs(path.with_suffix(".duckdb")).items()} == {"b": 2.0}


def test_alibaba_trace_end_ignores_a_year_10000_time(tmp_path: Path) -> None:
    """The trace end is the largest deletion_time within the time bounds: a pod deleted in
    year 10000 is a bad row and does not move the end (p2, deleted at 100 in Kubernetes'
    Unknown phase, is censored); a pod that Succeeded or Failed ended, even when it was
    deleted last (p4, p5: a slice of the release's file)."""
    path = tmp_path / "pods.csv"
    path.write_text(POD_HEADER + "p1,1,1,1,1000,,LS,Succeeded,0,50,10\n"
                    "p2,1,1,1,1000,,LS,Unknown,0,100,10\n"
                    "p3,1,1,1,1000,,LS,Succeeded,0,253402300800,10\n"
                    "p4,1,1,1,1000,,LS,Succeeded,0,100,10\n"
                    "p5,1,1,1,1000,,LS,failed,0,100,10\n")
    report = _ingest(path, "alibaba-2023")
    assert [(r, f) for r, f, _ in _errors(report)] == [(3, "deletion_time")]
    jobs = _jobs(path.with_suffix(".duckdb"))
    assert {k: j["censored"] for k, j in jobs.items()} == {"p1": False, "p2": True,
                                                            "p4": False, "p5": False}


def test_helios_node_num(tmp_path: Path) -> None:
    path = tmp_path / "cluster_log.csv"
    rows = [("h1", "8", "2"), ("h2", "8", "0.25"), ("h3", "8", "-2"), ("h4", "8", "x"),
            ("h5", "8", "2000000"), ("h6", "0", "0")]
    path.write_text("job_id,gpu_num,node_num,state,submit_time,start_time,end_time\n" + "".join(
        f"{j},{g},{n},COMPLETED,0,10,20\n" for j, g, n in rows))
    report = _ingest(path, "helios")
    assert _errors(report) == [(2, "node_num", "0.25 (must be a whole number of nodes)"),
                               (3, "node_num", "-2"), (4, "node_num", "x"),
                               (5, "node_num", "2000000 (must be a count from 0 to 1,000,000)")]
    jobs = _jobs(path.with_suffix(".duckdb"))
    assert jobs["h1"]["gpus_per_node"] == 4.0 and jobs["h6"]["gpus_per_node"] is None


def test_booleans_take_only_boolean_spellings(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    values = ["true", "FALSE", "yes", "No", "1", "0", "1.0", "", "NA", "maybe", "t", "2"]
    path.write_text("job_id,n_gpus,censored\n" + "".join(
        f"c{i},1,{v}\n" for i, v in enumerate(values)))
    report = _ingest(path)
    assert _errors(report) == [(10, "censored", "maybe"), (11, "censored", "t"),
                               (12, "censored", "2")]
    got = {k: j["censored"] for k, j in _jobs(path.with_suffix(".duckdb")).items()}
    assert got == {"c0": True, "c1": False, "c2": True, "c3": False, "c4": True, "c5": False,
                   "c6": True, "c7": False, "c8": False}


def _write_pai(d: Path, tables: dict[str, list[tuple[str, ...]]]) -> Path:
    d.mkdir(exist_ok=True)
    for name, rows in tables.items():
        with (d / f"pai_{name}_table.csv").open("w", newline="") as f:
            csv.writer(f).writerows(rows)
    return d


def test_pai_plan_gpu_nan_is_unknown_not_zero(tmp_path: Path) -> None:
    """plan_gpu NaN on a task assigned a GPU type: its GPUs are unknown (NULL, not 0 and not
    zero_gpu). A task with neither plan_gpu nor gpu_type (a CPU parameter server) has none."""
    d = _write_pai(tmp_path / "pai", {
        "job": [("J1", "i1", "u", "Terminated", "0", "10"),
                ("J2", "i2", "u", "Terminated", "0", "10")],
        "task": [("J1", "worker", "1", "Terminated", "", "", "600", "29", "NaN", "V100"),
                 ("J2", "ps", "1", "Terminated", "", "", "600", "29", "", ""),
                 ("J2", "worker", "2", "Terminated", "", "", "600", "29", "100", "V100")]})
    report = ingest(d, format="pai-2020", db=tmp_path / "s.duckdb")
    assert report["bad_rows"] == 0
    jobs = _jobs(tmp_path / "s.duckdb")
    j1, j2 = jobs["i1"], jobs["i2"]
    assert j1["n_gpus"] is None and not j1["zero_gpu"] and j1["gpus_per_worker"] is None
    assert (j2["n_gpus"], j2["architecture"]) == (2.0, "ps-worker")


def test_pai_two_jobs_sharing_an_inst_id_stay_two(tmp_path: Path) -> None:
    d = _write_pai(tmp_path / "pai", {
        "job": [("J1", "i1", "u", "Terminated", "0", "10"),
                ("J2", "i1", "u", "Terminated", "0", "20"),
                ("J3", "i3", "u", "Terminated", "0", "30")],
        "task": [(j, "worker", "1", "Terminated", "", "", "600", "29", "100", "V100")
                 for j in ("J1", "J2", "J3")]})
    report = ingest(d, format="pai-2020", db=tmp_path / "s.duckdb")
    assert report["jobs"] == 3 and report["bad_rows"] == 0
    jobs = _jobs(tmp_path / "s.duckdb")
    assert {k: j["end_time_s"] for k, j in jobs.items()} == {"J1": 10, "J2": 20, "i3": 30}
    shared = [n for n in report["notes"] if "share their inst_id" in n["note"]]
    assert [n["count"] for n in shared] == [2]


def test_pai_bounds_and_instances_that_never_started(tmp_path: Path) -> None:
    """plan_gpu over 1e8 (a million GPUs) and inst_num over a million are bad task rows; an
    instance start_time of 0 is an instance that never started (the job starts at 40);
    gpu_util counts an instance busier than its planned share as fully busy (80 / 50 -> 1)."""
    d = _write_pai(tmp_path / "pai", {
        "job": [("J1", "i1", "u", "Terminated", "30", "100"),
                ("J2", "i2", "u", "Terminated", "0", "10"),
                ("J3", "i3", "u", "Terminated", "0", "10"),
                ("J4", "i4", "u", "Terminated", "0", "10")],
        "task": [("J1", "worker", "2", "Terminated", "", "", "600", "29", "50", "V100"),
                 ("J2", "worker", "1", "Terminated", "", "", "600", "29", "2e8", "V100"),
                 ("J3", "worker", "2e6", "Terminated", "", "", "600", "29", "100", "V100"),
                 ("J4", "worker", "1.5", "Terminated", "", "", "600", "29", "100", "V100")],
        "instance": [("J1", "worker", "a", "w1", "i1", "Terminated", "0", "100", "m1"),
                     ("J1", "worker", "b", "w2", "i1", "Terminated", "40", "100", "m1")],
        "sensor": [("J1", "worker", "w1", "i1", "m1", "g", "1", "80", *["1"] * 4, *["0"] * 4),
                   ("J1", "worker", "w2", "i1", "m1", "g", "1", "20", *["1"] * 4,
                    *["0"] * 4)]})
    report = ingest(d, format="pai-2020", db=tmp_path / "s.duckdb")
    assert [(e["file"].endswith("pai_task_table.csv"), e["row"], e["field"], e["value"])
            for e in report["errors"]] == [
        (True, 2, "plan_gpu", "2e8 (must be from 0 to 1e8: GPUs of one instance in %)"),
        (True, 3, "inst_num", "2e6 (must be from 0 to 1,000,000 instances)"),
        (True, 4, "inst_num", "1.5 (must be a whole number of instances)")]
    j1 = _jobs(tmp_path / "s.duckdb")["i1"]
    assert j1["start_time_s"] == 40 and j1["gpu_util"] == pytest.approx((1 + 20 / 50) / 2)


def test_pai_cut_tables(tmp_path: Path) -> None:
    """A cut job table: its last row is a bad row. A cut task table: the job of its cut row
    is a bad row, reported at the task table. A cut sensor table: its last row is left out
    and said in a note."""
    job = "J1,i1,u,Terminated,0,10\nJ2,i2,u,Terminated,0,10\nJ3,i3,u,Termin"
    task = ("J1,worker,1,Terminated,,,600,29,100,V100\nJ2,worker,1,Terminated,,,600,29,100,"
            "V100\nJ3,worker,1,Terminated,,,600,29,10")
    sensor = ("J1,worker,w1,i1,m1,g,1,50,1,1,1,1,0,0,0,0\n"
              "J2,worker,w2,i2,m1,g,1,3")  # J2's gpu_wrk_util cut: left out, not 3 %
    d = tmp_path / "pai"
    d.mkdir()
    for name, text in (("job", job), ("task", task), ("sensor", sensor)):
        (d / f"pai_{name}_table.csv").write_text(text)
    report = ingest(d, format="pai-2020", db=tmp_path / "s.duckdb")
    assert [(Path(e["file"]).name, e["row"], e["field"]) for e in report["errors"]] == \
        [("pai_job_table.csv", 3, "status")]
    jobs = _jobs(tmp_path / "s.duckdb")
    assert sorted(jobs) == ["i1", "i2"] and jobs["i2"]["gpu_util"] is None
    assert any("pai_sensor_table.csv is cut" in n["note"] for n in report["notes"])
    # the job table whole: the task table's cut row (J3's plan_gpu, 100 -> 10, no gpu_type)
    # makes J3 a bad row, reported at the task table
    (d / "pai_job_table.csv").write_text(job.rsplit("\n", 1)[0] + "\nJ3,i3,u,Terminated,0,10\n")
    report = ingest(d, format="pai-2020", db=tmp_path / "t.duckdb")
    assert [(Path(e["file"]).name, e["row"], e["field"], e["value"])
            for e in report["errors"]] == [
        ("pai_task_table.csv", 3, "plan_gpu", "10 (the file ends here, without a newline, "
         "after 9 of the 10 fields: the row is cut)")]
    assert sorted(_jobs(tmp_path / "t.duckdb")) == ["i1", "i2"]


def test_each_rejection_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("job_id,n_gpus,start_time_s,end_time_s,censored\n"
                    "a,1e308,0,1,\nb,1,5,1,\nc,1,0,1,maybe\nd,1,0,1,\ne,1")
    report = _ingest(path)
    assert report["jobs"] == 1 and report["bad_rows"] == 4
    lines = format_errors(report["errors"], report["bad_rows"]).splitlines()
    assert len(lines) == 4
    for line, (row, field) in zip(lines, [(1, "n_gpus"), (2, "end_time_s"), (3, "censored"),
                                          (5, "n_gpus")], strict=True):
        assert line.startswith(f"  {path}: row {row}: field {field}: bad value ")
    with pytest.raises(TraincastError, match="row 1: field n_gpus"):
        ingest(path, db=tmp_path / "strict.duckdb", strict=True)


def test_a_broken_bound_is_said_after_the_quoted_value(tmp_path: Path) -> None:
    # gpu_util in percent: the value as the file gives it in quotes, then what it must be
    path = tmp_path / "t.csv"
    path.write_text("job_id,n_gpus,start_time_s,end_time_s,gpu_util\na,1,0,10,35\n"
                    "b,1,0,10,0.35\n")
    report = _ingest(path)
    [line] = format_errors(report["errors"], report["bad_rows"]).splitlines()
    assert line.endswith("field gpu_util: bad value '35' (must be a utilization from 0 to 1: "
                         "a percentage divided by 100, 35 -> 0.35)")


def test_the_rules_are_sql_not_python(tmp_path: Path) -> None:
    """A 200,000-row file with a bad row near its end: the checks run inside DuckDB (the row is
    found without reading rows into Python)."""
    n = 200_000
    buf = io.StringIO()
    buf.write("job_id,n_gpus,start_time_s,end_time_s\n")
    for i in range(n):
        buf.write(f"j{i},{'1e9' if i == n - 2 else 1},{i},{i + 10}\n")
    path = tmp_path / "big.csv"
    path.write_text(buf.getvalue())
    report = _ingest(path)
    assert report["jobs"] == n - 1
    assert _errors(report) == [(n - 1, "n_gpus", "1e9 (must be a count from 0 to 1,000,000)")]


# --- rows with more fields than the header --------------------------------------------------

_EXTRA = ("(a field past the header's {n}: the row has more fields than the header, so its "
          "values may be shifted; quote a value that holds the delimiter)")


@pytest.mark.parametrize("at", [2, 30_000])  # inside DuckDB's sniffing sample, and past it
def test_a_row_with_more_fields_than_the_header_is_a_bad_row(tmp_path: Path, at: int) -> None:
    """A job whose user holds an unquoted comma shifts its GPUs into a fourth field: the row
    is a bad row at field 4 (the first past the header's 3), not a job stored with the
    user's tail as its GPU count."""
    path = tmp_path / "t.csv"
    path.write_text("job_id,user,n_gpus\n" + "\n".join(
        f"j{i},u{i},{1 + i % 8}" if i != at else f"j{at},smith,jr,8"
        for i in range(1, 40_001)) + "\n")
    report = _ingest(path)
    assert _errors(report) == [(at, "4", "8 " + _EXTRA.format(n=3))]
    assert report["jobs"] == 39_999 and f"j{at}" not in _jobs(path.with_suffix(".duckdb"))


def test_an_empty_field_past_the_header_among_rows_without_one_is_a_bad_row(
        tmp_path: Path) -> None:
    """``a,8,smith,jr,``: a user 'smith, jr' unquoted and an empty GPU type make one empty
    field past the header; among rows of the header's four fields the row is shifted (a bad
    row, not a job of GPU type 'jr'). A writer that ends every data row with a delimiter
    leaves an empty field past the header on all of them: no bad row."""
    path = tmp_path / "t.csv"
    path.write_text("job_id,n_gpus,user,gpu_type\na,8,smith,jr,\nb,4,lee,V100\n")
    report = _ingest(path)
    assert _errors(report) == [(1, "5", "(empty) " + _EXTRA.format(n=4))]
    assert list(_jobs(path.with_suffix(".duckdb"))) == ["b"]
    every = tmp_path / "every.csv"
    every.write_text("job_id,n_gpus,user\na,8,smith,\nb,4,lee,\n")
    report = _ingest(every)
    assert (report["jobs"], report["bad_rows"]) == (2, 0)
    assert _jobs(every.with_suffix(".duckdb"))["a"]["user"] == "smith"


def test_extra_fields_of_a_semicolon_file_and_pai_tables(tmp_path: Path) -> None:
    semi = tmp_path / "s.csv"
    semi.write_bytes(b"\xef\xbb\xbfjob_id;n_gpus\r\na;1\r\nb;2;x;y\r\n")
    assert _errors(_ingest(semi)) == [(2, "3", "x " + _EXTRA.format(n=2))]
    d = _write_pai(tmp_path / "pai", {
        "job": [("J1", "i1", "u", "Terminated", "0", "10"),
                ("J2", "i2", "u", "Terminated", "0", "10", "extra")],
        "task": [("J1", "worker", "1", "Terminated", "", "", "600", "29", "100", "V100", "7"),
                 ("J2", "worker", "1", "Terminated", "", "", "600", "29", "100", "V100")]})
    report = ingest(d, format="pai-2020", db=tmp_path / "p.duckdb")
    assert [(Path(e["file"]).name, e["row"], e["field"], e["value"])
            for e in report["errors"]] == [
        ("pai_job_table.csv", 2, "7", "extra " + _EXTRA.format(n=6)),
        ("pai_task_table.csv", 1, "11", "7 " + _EXTRA.format(n=10))]
    assert report["jobs"] == 0


def test_headers_duckdb_reads_as_before(tmp_path: Path) -> None:
    """Empty trailing header names (a spreadsheet's), a repeated column nothing reads, a blank
    first line and a trailing delimiter with a blank after it read as DuckDB's own reader reads
    them; a repeated column the adapter reads is an error."""
    f = tmp_path / "a.csv"
    f.write_text("job_id,n_gpus,note,note,,\na,1,x,y,,\nb,2,,, ,\n")
    report = _ingest(f)
    assert report["jobs"] == 2 and report["bad_rows"] == 0
    f.write_text("job_id,n_gpus\na,1, \nb,2,NA\n")  # blank or missing past the header: none
    assert _ingest(f)["bad_rows"] == 0
    f.write_text("job_id,n_gpus,n_gpus\na,1,2\n")
    with pytest.raises(TraincastError, match="names column 'n_gpus' twice"):
        _ingest(f, db=tmp_path / "b.duckdb")


def test_a_zstd_compressed_trace_reads(tmp_path: Path) -> None:
    import duckdb

    f = tmp_path / "t.csv.zst"
    duckdb.sql("SELECT 'j' || i AS job_id, 1 + i % 4 AS n_gpus FROM range(50) t(i)").write_csv(
        str(f), compression="zstd")
    report = _ingest(f)
    assert report["jobs"] == 50 and report["bad_rows"] == 0


# --- a duration column in a canonical file ----------------------------------------------------

def test_a_duration_column_gives_the_end(tmp_path: Path) -> None:
    """end = start + duration where the end is missing or empty; a given end wins; a negative
    duration is a bad row at its own column; a job with a duration is not censored."""
    path = tmp_path / "dur.csv"
    path.write_text("job_id,n_gpus,start_time_s,end_time_s,Duration,status\n"
                    "a,1,0,,3600,COMPLETED\nb,8,10,70,999,COMPLETED\nc,2,100,,,RUNNING\n"
                    "d,1,5,,-3,COMPLETED\n")
    report = _ingest(path)
    jobs = _jobs(path.with_suffix(".duckdb"))
    assert (jobs["a"]["end_time_s"], jobs["a"]["censored"]) == (3600.0, False)
    assert jobs["b"]["end_time_s"] == 70.0  # the file's own end
    assert jobs["c"]["end_time_s"] is None and jobs["c"]["censored"] is True
    assert [(r, f) for r, f, _ in _errors(report)] == [(4, "Duration")]
    # an end that does not parse is a bad row, not replaced by the duration
    path.write_text("job_id,n_gpus,start_time_s,end_time_s,duration_s\n1,8,100,garbage,50\n")
    assert [(r, f) for r, f, _ in _errors(_ingest(path, db=tmp_path / "g.duckdb"))] == [
        (1, "end_time_s")]
    # without an end column at all, and with the start under another name (--map)
    other = tmp_path / "other.csv"
    other.write_text("job_id,n_gpus,began,duration_s\na,1,100,60\n")
    ingest(other, db=tmp_path / "o.duckdb", mapping={"start_time_s": "began"})
    assert _jobs(tmp_path / "o.duckdb")["a"]["end_time_s"] == 160.0
    # without a start the durations are left unread, and the note says why
    bare = tmp_path / "bare.csv"
    bare.write_text("job_id,n_gpus,submit_time_s,duration\na,1,0,3600\n")
    notes = _ingest(bare)["notes"]
    assert any("duration left unread" in n["note"] and "no start_time_s" in n["note"]
               for n in notes)


def test_a_new_version_whose_every_row_is_bad_keeps_the_stored_jobs(tmp_path: Path) -> None:
    """Re-ingesting a changed file whose every row is bad fails (nothing stored) and keeps
    the jobs of its earlier ingest; a new version with one good row replaces them."""
    import os

    path, db = tmp_path / "t.csv", tmp_path / "s.duckdb"
    path.write_text("job_id,n_gpus\na1,1\na2,2\na3,4\n")
    assert _ingest(path, db=db)["jobs"] == 3
    path.write_text("job_id,n_gpus\nq1,x\nq2,-1\n")
    os.utime(path, (1, 1))  # changed: another size and time
    with pytest.raises(TraincastError) as err:
        _ingest(path, db=db)
    said = str(err.value)
    assert "every row is bad (2)" in said and "the 3 job(s) of an earlier ingest" in said, said
    assert f"(source 1: {path})" in said and "--drop 1" in err.value.hint
    assert "row 1" in said and "n_gpus" in said
    assert sorted(_jobs(db)) == ["a1", "a2", "a3"]
    # a copy read another way (--map) would replace the source of that content: that one is
    # named, not the copy, which was never ingested
    copy = tmp_path / "copy.csv"
    copy.write_text("job_id,n_gpus\na1,1\na2,2\na3,4\n")  # the stored content
    with pytest.raises(TraincastError) as err:
        ingest(copy, db=db, mapping={"n_gpus": "job_id"})  # every row bad read so
    assert f"{copy}: every row is bad" in str(err.value)
    assert f"(source 1: {path})" in str(err.value), str(err.value)
    assert sorted(_jobs(db)) == ["a1", "a2", "a3"]
    path.write_text("job_id,n_gpus\nq1,x\nq2,2\n")
    report = _ingest(path, db=db)
    assert report["jobs"] == 1 and report["bad_rows"] == 1
    assert sorted(_jobs(db)) == ["q2"]


def test_a_pipe_is_refused_before_any_read(tmp_path: Path) -> None:
    """A FIFO (``mkfifo``, ``/dev/stdin`` of a pipe) is named as given and refused at once: a
    read of it would wait for a writer, and a trace is read more than once."""
    import os
    import signal

    fifo = tmp_path / "jobs.csv"
    os.mkfifo(fifo)

    def hung(*_: object) -> None:  # a read of the FIFO waits for a writer: fail, not hang
        raise AssertionError("the ingest opened the FIFO")

    # a FIFO a folder holds, named as a PAI table: found by the folder, refused as well
    pai = tmp_path / "pai"
    pai.mkdir()
    os.mkfifo(pai / "pai_job_table.csv")
    (pai / "pai_task_table.csv").write_text("")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        with pytest.raises(TraincastError, match=r"jobs\.csv: a pipe, not a regular file"):
            _ingest(fifo, db=tmp_path / "s.duckdb")
        with pytest.raises(TraincastError, match=r"pai_job_table\.csv: a pipe, not a regular "):
            _ingest(pai, "pai-2020", db=tmp_path / "p.duckdb")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert not (tmp_path / "s.duckdb").exists() and not (tmp_path / "p.duckdb").exists()


def test_a_line_over_the_readers_limit_is_named_by_its_line(tmp_path: Path) -> None:
    """DuckDB numbers a too-long line within its buffer (line 1 in a small file): the error
    names the file's own line."""
    path = tmp_path / "long.csv"
    rows = ["job_id,n_gpus,user", *(f"j{i},1,u" for i in range(4)), "j9,1," + "x" * 2_100_000,
            "j10,1,u"]
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(TraincastError, match="line 6 is 2,000,000 bytes or longer"):
        _ingest(path)
    # DuckDB counts the line end: a line of 2,000,000 bytes before it is one too many
    path.write_text("job_id,n_gpus,user\nj0,1,u\nj1,1," + "x" * (2_000_000 - 5) + "\nj2,1,u\n")
    with pytest.raises(TraincastError, match="line 3 is 2,000,000 bytes or longer"):
        _ingest(path, db=tmp_path / "exact.duckdb")
    # a quoted value that holds line breaks, no line too long: said so
    body = ("y" * 100_000 + "\n") * 25
    path.write_text(f'job_id,n_gpus,user\nj0,1,u\nj1,1,"{body}"\nj2,1,u\n')
    with pytest.raises(TraincastError, match="though no line is: a quoted value that holds"):
        _ingest(path, db=tmp_path / "quoted.duckdb")


def test_a_philly_array_element_that_is_no_job_object_is_named(tmp_path: Path) -> None:
    """One element that is not an object (``5``) is named by its place in the array, not
    said as the file missing every column."""
    path = tmp_path / "jobs.json"
    job = ('{"jobid": "p%d", "status": "Pass", "submitted_time": "2017-10-03 05:02:08", '
           '"attempts": []}')
    path.write_text(f"[{job % 1}, 5, {job % 3}]")
    with pytest.raises(TraincastError, match="element 2 of the array is not a job object: 5"):
        _ingest(path, "philly")
    path.write_text(f"[{job % 1}, [1, {{\"a\": 2}}]]")  # as the file writes it
    with pytest.raises(TraincastError, match=r'element 2 of the array is not a job object: '
                                             r'\[1,\{"a":2\}\]'):
        _ingest(path, "philly", db=tmp_path / "nested.duckdb")
    # past the rows DuckDB samples for the keys: said the same way
    path.write_text("[" + ", ".join(job % i for i in range(30_000)) + ", 7]")
    with pytest.raises(TraincastError, match="element 30,001 of the array is not a job object"):
        _ingest(path, "philly", db=tmp_path / "late.duckdb")
    path.write_text(f"[{job % 1}, {job % 3}]")  # all objects: read
    assert _ingest(path, "philly", db=tmp_path / "ok.duckdb")["jobs"] == 2


def test_an_analysis_of_an_all_bad_trace_quotes_the_value_alone() -> None:
    """What a check says of the first bad value stands after its quotes, as ingest lists it."""
    from traincast.trace.store import every_row_bad

    report = {"sources": [{"bad_rows": 1, "files": ["t.csv"]}], "errors": [
        {"file": "t.csv", "row": 1, "field": "end_time_s",
         "value": "10 (the file ends here, inside the row)"}]}
    error = every_row_bad(report, 0, "nothing was analysed")
    assert error is not None
    assert "field end_time_s: '10' (the file ends here, inside the row)" in str(error)


def test_binary_bytes_that_start_with_a_bracket_are_not_said_json(tmp_path: Path) -> None:
    path = tmp_path / "bin.csv"
    path.write_bytes(b"[\x01\x02\xff\xfe\x03" * 50)
    with pytest.raises(TraincastError) as err:
        _ingest(path)
    assert "holds JSON" not in str(err.value)
    path.write_text('[{"job_id": "a"}]')  # JSON text: said so
    with pytest.raises(TraincastError, match="holds JSON"):
        _ingest(path)


def test_an_empty_censored_value_is_decided_as_without_the_column(tmp_path: Path) -> None:
    """A ``censored`` cell left empty is unknown, not false: the job is censored by the rule
    of a file without the column (running status, or a start and no end); a value given wins."""
    path = tmp_path / "cens.csv"
    path.write_text("job_id,n_gpus,start_time_s,end_time_s,status,censored\n"
                    "run,1,0,,,\n"          # a start, no end, no value: censored
                    "done,1,0,50,,\n"       # an end: finished
                    "st,1,0,50,Running,\n"  # running by its status
                    "no,1,0,,,false\n"      # given: not censored
                    "yes,1,0,50,,true\n")   # given: censored
    report = _ingest(path)
    assert report["bad_rows"] == 0
    jobs = _jobs(path.with_suffix(".duckdb"))
    assert {j: jobs[j]["censored"] for j in jobs} == {
        "run": True, "done": False, "st": True, "no": False, "yes": True}


def test_a_file_name_with_pattern_characters_is_read_as_itself(tmp_path: Path) -> None:
    """``jobs[1].csv`` beside ``jobs1.csv``: DuckDB's readers take ``[1]`` as a pattern, which
    would read ``jobs1.csv``; the file is read as the one file it is (compressed too), and
    stored under its own name."""
    import gzip

    (tmp_path / "jobs[1].csv").write_text("job_id,n_gpus\nx1,1\nx2,2\n")
    (tmp_path / "jobs1.csv").write_text("job_id,n_gpus\ny1,4\n")
    with gzip.open(tmp_path / "a*b?.csv.gz", "wt") as f:
        f.write("job_id,n_gpus\nz1,8\n")
    db = tmp_path / "s.duckdb"
    report = ingest([tmp_path / "jobs[1].csv", tmp_path / "a*b?.csv.gz"], db=db)
    assert report["jobs"] == 3 and sorted(_jobs(db)) == ["x1", "x2", "z1"]
    assert [Path(f).name for s in report["sources"] for f in s["files"]] == [
        "jobs[1].csv", "a*b?.csv.gz"]


@pytest.mark.parametrize("text", ['{"job_id": "a", "n_gpus": 2}\n{"job_id": "b", "n_gpus": 1}\n',
                                  '\ufeff  [{"job_id": "a", "n_gpus": 2}]'])
def test_json_given_as_a_csv_trace_says_so(tmp_path: Path, text: str) -> None:
    """JSON Lines or a JSON array (a Kubernetes export) given as a CSV trace: an error that
    says it is JSON and how to read it, not "missing columns" listing JSON fragments; nothing
    stored."""
    path = tmp_path / "jobs.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraincastError, match=r"jobs\.csv: holds JSON \(it starts with") as exc:
        _ingest(path)
    assert "--format philly" in exc.value.hint and "read_json_auto" in exc.value.hint
    assert not path.with_suffix(".duckdb").exists()


def test_a_fixed_width_table_says_to_export_it_with_a_delimiter(tmp_path: Path) -> None:
    """sacct without --parsable2 aligns its columns with spaces: DuckDB reads one column whose
    name holds them all; the error names them as the file spells them and says what to do."""
    path = tmp_path / "sacct.txt"
    path.write_text("       JobID    JobName      State      Start        End  AllocTRES \n"
                    "------------ ---------- ---------- ---------- ---------- ---------- \n"
                    "123          train       COMPLETED 2024-01-02 2024-01-03 gres/gpu=2 \n")
    with pytest.raises(TraincastError, match=r"the file's columns: JobID +JobName") as exc:
        _ingest(path, "slurm")
    assert "fixed width" in exc.value.hint and "--parsable2" in exc.value.hint


@pytest.mark.parametrize("encoding,named", [("utf-16", "utf-16"), ("utf-16-le", "utf-16"),
                                            ("latin1", "latin1")])
def test_a_file_not_in_utf8_names_its_encoding_in_the_hint(tmp_path: Path, encoding: str,
                                                           named: str) -> None:
    """Excel's "Unicode text" is UTF-16 (with a byte-order mark, or without one): the hint
    converts from UTF-16, not from Latin-1."""
    path = tmp_path / "t.csv"
    path.write_bytes("job_id,n_gpus,user\na,1,Jürgen\n".encode(encoding))
    with pytest.raises(TraincastError, match="not utf-8") as exc:
        _ingest(path)
    assert f"iconv -f {named} -t utf-8" in exc.value.hint


@pytest.mark.parametrize("content", [b"\xef\xbb\xbf", b"\n\n  \n", b"\xef\xbb\xbf\r\n", b"",
                                     b"\n" * (2 * 2**20 + 5)])  # past one block read
def test_a_file_of_white_space_alone_is_empty(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(content)
    with pytest.raises(TraincastError, match=r"t\.csv: the file is empty \(no header, no rows\)"):
        _ingest(path)


def test_white_space_then_text_past_a_block_is_not_empty(tmp_path: Path) -> None:
    from traincast.trace.adapters.base import empty_file

    path = tmp_path / "t.csv"
    path.write_bytes(b"\n" * (2**20 + 3) + b"job_id,n_gpus\na,1\n")
    assert not empty_file(path)
    path.write_bytes(b"\n" * (2**20 + 3))
    assert empty_file(path)


def test_a_file_that_is_no_text_is_named_for_what_it_is(tmp_path: Path) -> None:
    # a job store given as a trace, a program, bytes with NULs everywhere (not UTF-16), and
    # a Parquet file cut short (no footer): none is told to convert from UTF-16
    store, trace = tmp_path / "s.duckdb", tmp_path / "a.csv"
    trace.write_text("job_id,n_gpus\na,1\n")
    _ingest(trace, db=store)
    with pytest.raises(TraincastError, match="it is a DuckDB file, not text") as exc:
        _ingest(store, db=tmp_path / "other.duckdb")
    assert exc.value.hint == "a job store is read with --db FILE, not as a trace"
    prog = tmp_path / "prog"
    prog.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(300))
    with pytest.raises(TraincastError, match=r"it is an executable \(ELF\), not text"):
        _ingest(prog, db=tmp_path / "other.duckdb")
    data = tmp_path / "data.csv"
    data.write_bytes(b"\x10\x00\x00\x00\xe8\x03\x00\x00" * 64)  # little-endian int32s:
    # NULs at even and odd positions alike
    with pytest.raises(TraincastError, match="binary bytes, not text") as exc:
        _ingest(data, db=tmp_path / "other.duckdb")
    assert "iconv" not in exc.value.hint
    table = tmp_path / "jobs.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"job_id": [str(i) for i in range(5000)], "n_gpus": [1] * 5000}),
                   table)
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(table.read_bytes()[:len(table.read_bytes()) // 2])
    with pytest.raises(TraincastError, match=r"cut\.parquet: cannot read the Parquet file") \
            as exc:
        _ingest(cut, db=tmp_path / "other.duckdb")
    assert "cut short or damaged" in exc.value.hint and "name it .parquet" not in exc.value.hint


def test_pai_tables_with_empty_job_names_join_nothing(tmp_path: Path) -> None:
    """Job rows without a job_name get no task's GPUs: an empty field of a headerless PAI
    table is missing, and two missing names are no match."""
    d = _write_pai(tmp_path / "pai", {
        "job": [("j1", "i1", "u", "Terminated", "100", "200"),
                ("", "i2", "u", "Terminated", "100", "200"),
                ("", "i3", "u", "Terminated", "100", "300")],
        "task": [("j1", "worker", "1", "Terminated", "100", "200", "600", "29", "100", "V100"),
                 ("", "worker", "4", "Terminated", "100", "200", "600", "29", "800", "V100")]})
    ingest(d, format="pai-2020", db=tmp_path / "p.duckdb")
    jobs = _jobs(tmp_path / "p.duckdb")
    assert jobs["i1"]["n_gpus"] == 1.0
    assert jobs["i2"]["n_gpus"] is None and jobs["i3"]["n_gpus"] is None


def test_a_row_ending_before_a_required_column_is_no_job(tmp_path: Path) -> None:
    """A psql footer ``(2 rows)`` and a stray ``;;`` line end before n_gpus: bad rows, not
    jobs of unknown GPUs; a row that leaves out optional fields at its end, or gives n_gpus
    empty, is a job."""
    path = tmp_path / "t.csv"
    path.write_text("job_id,n_gpus,user,gpu_type\na,1\nb,2,x\nc,,y,V100\n;;\n(2 rows)\n")
    report = _ingest(path)
    assert sorted(_jobs(path.with_suffix(".duckdb"))) == ["a", "b", "c"]
    assert [(r, f) for r, f, _ in _errors(report)] == [(4, "n_gpus"), (5, "n_gpus")]
    assert "the row ends before this field" in _errors(report)[0][2]


def test_a_decimal_comma_is_said(tmp_path: Path) -> None:
    """A ';'-separated export of a spreadsheet in a locale with decimal commas: 0,75 and
    1.024,5 are bad rows that say why; another bad number says nothing of commas."""
    path = tmp_path / "t.csv"
    path.write_text("job_id;n_gpus;gpu_util\na;1;0,75\nb;1.024,5;0.5\nc;1;x\n")
    errors = _errors(_ingest(path))
    assert [(r, f) for r, f, _ in errors] == [(1, "gpu_util"), (2, "n_gpus"), (3, "gpu_util")]
    assert ["decimal comma" in v for _, _, v in errors] == [True, True, False]


def test_quiet_leaves_out_the_notes_and_keeps_the_bad_rows(tc, tmp_path: Path) -> None:
    # a whole last row without a newline is a note; a row with a bad n_gpus is a bad row
    path = tmp_path / "t.csv"
    path.write_text("job_id,n_gpus,start_time_s,end_time_s\na,1,0,10\nb,x,0,10\nc,2,0,10")
    for quiet in (False, True):
        db = tmp_path / f"s{quiet}.duckdb"
        run = tc(*(["--quiet"] if quiet else []), "ingest", str(path), "--db", str(db))
        said = " ".join(run.stderr.split())
        assert run.returncode == 0, run.stderr
        assert ("t.csv has no final newline" in said) is not quiet
        assert "1 bad row(s) skipped" in said and "field n_gpus" in said


def test_a_release_root_one_level_above_its_traces_is_pointed_down(tmp_path: Path) -> None:
    # Helios's release: data/<cluster>/cluster_log.csv; its root holds data/ only
    log = tmp_path / "helios" / "data" / "Venus" / "cluster_log.csv"
    log.parent.mkdir(parents=True)
    log.write_text("job_id,user,gpu_num,cpu_num,node_num,state,submit_time,start_time,"
                   "end_time,duration,queue\n")
    with pytest.raises(TraincastError, match="it holds data/") as err:
        ingest(tmp_path / "helios", format="helios", db=tmp_path / "s.duckdb")
    assert err.value.hint == f"the folder {tmp_path / 'helios' / 'data'} holds them: give it"
