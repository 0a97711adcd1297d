"""`traincast ingest`, `characterize` and `sample` through the real console script."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest


def tc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a terminal 80 columns wide."""
    return subprocess.run([sys.executable, "-c", "from traincast.cli import main; main()",
                           *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, "COLUMNS": "80"})


def test_ingest_characterize_and_strict_failure(tmp_path: Path) -> None:
    good = tmp_path / "good.csv"
    good.write_text("job_id,submission_time,duration,num_gpu\na,0,100,1\nb,0,50,16\n")
    r = tc("ingest", str(good), "--format", "elasticflow", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["jobs"] == 2
    assert (tmp_path / "traincast.duckdb").exists()  # the default store, in the cwd

    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,submission_time,duration,num_gpu\nc,0,10,1\nd,0,10,-2\n")
    r = tc("ingest", str(bad), "--format", "elasticflow", "--strict", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "row 2" in r.stderr and "num_gpu" in r.stderr and "bad.csv" in r.stderr
    con = duckdb.connect(str(tmp_path / "traincast.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM jobs").fetchone()[0] == 2
    con.close()

    r = tc("ingest", str(bad), str(good), "--format", "elasticflow", cwd=tmp_path)
    assert r.returncode == 0 and "1 bad row(s) skipped" in r.stderr
    # one table row per file: jobs, new or kept (unchanged since its last ingest), bad rows,
    # flags; every header whole at 80 columns
    assert "…" not in r.stdout
    for header in ("file", "jobs", "bad rows", "censored", "0 GPU", "frac. GPU", "inferred"):
        assert header in r.stdout, header
    rows = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines()
            if line.startswith(("bad.csv", "good.csv"))}
    assert rows["bad.csv"][:3] == ["1", "new", "1"]
    assert rows["good.csv"][:3] == ["2", "kept", "0"]

    r = tc("characterize", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["jobs"] == 3 and out["gpus"] == 1 + 16 + 1
    assert out["by_architecture"]["allreduce-cluster"] == {
        "jobs": 1, "gpus": 16, "gpu_time_s": 16 * 50, "job_share": 1 / 3, "gpu_share": 16 / 18,
        "gpu_time_share": 800 / (100 + 800 + 10)}

    r = tc("characterize", str(good), "--format", "elasticflow", "--db",
           str(tmp_path / "other.duckdb"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Architectures" in r.stdout and "2 jobs" in r.stdout


def test_missing_column_message(tmp_path: Path) -> None:
    bad = tmp_path / "pods.csv"
    bad.write_text("name,num_gpu\np,1\n")
    r = tc("ingest", str(bad), "--format", "alibaba-2023", cwd=tmp_path)
    assert r.returncode == 2
    assert "alibaba-2023" in r.stderr and "pods.csv" in r.stderr and "gpu_milli" in r.stderr
    assert not (tmp_path / "traincast.duckdb").exists()


def test_sample_command(tmp_path: Path) -> None:
    r = tc("sample", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip().endswith("sample.parquet")
    assert "\n" not in r.stdout.strip()  # one line, however long the path

    r = tc("sample", "-o", "s.csv", "--jobs", "200", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    with (tmp_path / "s.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert out["jobs"] == len(rows) == 200 and out["seed"] == 2019
    for arch, row in out["by_architecture"].items():
        mine = [r for r in rows if r["architecture"] == arch]
        assert row["jobs"] == len(mine)
        assert row["gpus"] == sum(float(r["n_gpus"]) for r in mine)

    r = tc("sample", "-o", "s.parquet", "--jobs", "200", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Sample trace s.parquet" in r.stdout and "ps-worker" in r.stdout
    assert "GPU-hours" in r.stdout and "…" not in r.stdout


def test_command_list_shows_one_line_summaries(tmp_path: Path) -> None:
    r = tc("--help", cwd=tmp_path)
    assert r.returncode == 0
    listing = r.stdout[r.stdout.index("Commands"):]
    # the first paragraph of each help is its summary in the command list; details stay in
    # the command's own --help
    for command, details in (("sample", "published statistics"),
                             ("characterize", "bottlenecks"), ("recommend", "fit rules")):
        assert command in listing and details not in listing, command
        r = tc(command, "--help", cwd=tmp_path)
        assert details in " ".join(r.stdout.replace("│", " ").split())


def test_analysis_of_a_trace_names_the_rows_it_skipped(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus,architecture,gpu_type\na,1,1w1g,V100\nb,-3,1w1g,V100\n")
    r = tc("characterize", str(trace), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["jobs"] == 1
    # the console wraps long lines and folds a path longer than the line: compared without
    # the spaces and line ends it puts in
    said = "".join(r.stderr.split())
    assert "t.csv:row2:fieldn_gpus" in said
    # read again from the store (unchanged file): still said, counted
    r = tc("characterize", str(trace), "--json", cwd=tmp_path)
    said = " ".join(r.stderr.split())
    assert "1 bad row(s)" in said and "first ingest" in said


def test_workload_for_traces_without_one(tmp_path: Path) -> None:
    # ElasticFlow gives no workload: with --workload none no job has a predicted time; with a
    # model every job takes the zoo profile's features (the same for all of them)
    trace = tmp_path / "ef.csv"
    trace.write_text("job_id,submission_time,duration,num_gpu\na,0,100,1\nb,0,50,8\n"
                     "c,10,500,16\n")
    base = ("--format", "elasticflow", "--json")
    r = tc("characterize", str(trace), *base, "--workload", "none", cwd=tmp_path)
    assert json.loads(r.stdout)["breakdown"]["unpredicted"] == {"features missing": 3}
    r = tc("characterize", str(trace), *base, "--workload", "resnet50", cwd=tmp_path)
    breakdown = json.loads(r.stdout)["breakdown"]
    assert breakdown["jobs"] == 3 and not breakdown.get("unpredicted"), breakdown
    r = tc("whatif", str(trace), *base, "--workload", "resnet50", "--scenario", "eth100",
           cwd=tmp_path)
    assert json.loads(r.stdout)["summary"]["predicted"] == 3, r.stderr
    r = tc("recommend", str(trace), *base, "--workload", "resnet50", "--no-jobs", cwd=tmp_path)
    assert "rows" not in json.loads(r.stdout), "--no-jobs leaves the per-job rows out"
    r = tc("recommend", str(trace), *base, "--workload", "resnet50", cwd=tmp_path)
    rows = json.loads(r.stdout)["rows"]
    assert len(rows) == 3 and all(row["base_total_s"] > 0 for row in rows), r.stderr
    # one job known only by its workload (no TRACE): the same resnet50 features as a 1-GPU row
    r = tc("recommend", "--workload", "resnet50", "--json", cwd=tmp_path)
    one = json.loads(r.stdout)["rows"]
    assert r.returncode == 0 and len(one) == 1, r.stderr
    single = next(row for row in rows if row["n_gpus"] == 1)
    assert one[0]["base_total_s"] == single["base_total_s"]
    r = tc("whatif", str(trace), *base, "--workload", "no-such-model", "--scenario", "eth100",
           cwd=tmp_path)
    assert r.returncode == 2 and "--workload no-such-model" in r.stderr


def test_print_json_small_indented_large_compact(capsys) -> None:  # noqa: ANN001
    import numpy as np

    from traincast.cli.common import PRETTY_JSON_MAX_BYTES, print_json

    print_json({"a": np.float64("nan"), "b": [np.int64(2), float("inf")], "c": Path("x")})
    out = capsys.readouterr().out
    assert out.startswith("{\n  ") and json.loads(out) == {"a": None, "b": [2, None], "c": "x"}
    # per-job rows of a big trace: one compact line, the same values
    rows = [{"job_id": f"j{i}", "speedup": i / 3, "gpus": np.float32(1.5)} for i in range(40_000)]
    print_json({"rows": rows, "nan": float("nan")})
    out = capsys.readouterr().out
    assert len(out) > PRETTY_JSON_MAX_BYTES and out.count("\n") == 1
    back = json.loads(out)
    assert back["nan"] is None and len(back["rows"]) == 40_000
    assert back["rows"][3] == {"job_id": "j3", "speedup": 1.0, "gpus": 1.5}


def test_jobs_without_features_are_told_where_features_come_from(tc, tmp_path: Path) -> None:
    trace = tmp_path / "u.csv"  # vgg16 is no zoo model: that job has no features
    trace.write_text("job_id,n_gpus,workload\na,1,vgg16\nb,1,resnet50\n")
    r = tc("whatif", str(trace), "-s", "eth100", "--db", str(tmp_path / "s.duckdb"))
    text = " ".join(r.stdout.split())
    assert r.returncode == 0 and "not predicted: 1 job, features missing" in text, r.stderr
    assert "no workload the zoo knows (traincast zoo list names them" in text


def test_an_empty_store_and_a_header_alone_are_said(tc, tmp_path: Path) -> None:
    trace = tmp_path / "hdr.csv"
    trace.write_text("job_id,n_gpus,start_time_s,end_time_s\n")
    db = str(tmp_path / "h.duckdb")
    r = tc("ingest", str(trace), "--db", db)
    assert r.returncode == 0, r.stderr
    assert "hdr.csv: no job stored (no row: a header alone" in r.stdout, r.stdout
    r = tc("characterize", "--db", db)
    assert "nothing to analyse: the store holds no job" in " ".join(r.stderr.split())
    assert "flags: none" in r.stdout


def test_a_scenario_that_matches_no_job_says_what_it_selects(tc, tmp_path: Path) -> None:
    trace = tmp_path / "a.csv"  # no PS/Worker job: the paper's port matches nothing
    trace.write_text("job_id,n_gpus,architecture,workload\na,4,allreduce-local,resnet50\n")
    r = tc("whatif", str(trace), "--db", str(tmp_path / "a.duckdb"), "-s", "nvlink-allreduce")
    text = " ".join(r.stdout.split())
    assert r.returncode == 0 and ("nvlink-allreduce: no job matches it (it selects "
                                  "architecture ps-worker") in text, r.stdout


def test_small_gpu_hours_are_not_rounded_to_a_wrong_whole(tc, tmp_path: Path) -> None:
    trace = tmp_path / "h.csv"  # 1 GPU x 1 h + 0.5 GPU x 1 h = 1.5 GPU-hours
    trace.write_text("job_id,n_gpus,start_time_s,end_time_s\na,1,0,3600\nb,0.5,0,3600\n")
    r = tc("characterize", str(trace), "--db", str(tmp_path / "h.duckdb"))
    assert "1.5 GPUs requested, 1.5 GPU-hours" in " ".join(r.stdout.split()), r.stdout


def test_map_names_are_checked_before_the_file_is_read(tc, tmp_path: Path) -> None:
    trace = tmp_path / "s.csv"
    trace.write_text("id,n_gpus\na,1\n")
    for flag, says in (("jobid=id", "'jobid' is not a canonical column"),
                       ("source_id=id", "'source_id' is computed by the store")):
        r = tc("ingest", str(trace), "--db", str(tmp_path / "s.duckdb"), "--map", flag)
        assert r.returncode == 2 and says in r.stderr, r.stderr
    assert not (tmp_path / "s.duckdb").exists()


def test_an_unknown_number_is_an_empty_csv_field(tc, tmp_path: Path) -> None:
    trace = tmp_path / "u.csv"  # vgg16 is no zoo model: job a has no time
    trace.write_text("job_id,n_gpus,workload\na,1,vgg16\nb,1,resnet50\n")
    out = tmp_path / "rows.csv"
    r = tc("whatif", str(trace), "--db", str(tmp_path / "u.duckdb"), "-s", "eth100", "--jobs",
           "-o", str(out))
    assert r.returncode == 0, r.stderr
    lines = out.read_text().splitlines()
    assert lines[1] == '"a","eth100",true,false,,,' and "nan" not in out.read_text()


def test_the_ps_worker_hint_only_where_the_trace_has_none(tc, tmp_path: Path) -> None:
    trace = tmp_path / "pw.csv"  # one ps-worker job of 4 GPUs: a scenario for 64+ misses it
    trace.write_text("job_id,n_gpus,architecture,n_workers,n_ps,workload\n"
                     "a,4,ps-worker,4,1,resnet50\nb,2,allreduce-local,,,resnet50\n")
    big = tmp_path / "big.toml"
    big.write_text('name = "big-ps"\n[match]\narchitecture = ["ps-worker"]\nmin_gpus = 64\n'
                   '[changes]\narchitecture = "allreduce-local"\n')
    r = tc("whatif", str(trace), "--db", str(tmp_path / "p.duckdb"), "-s", str(big))
    text = " ".join(r.stdout.split())
    assert "big-ps: no job matches it (it selects architecture ps-worker; min_gpus 64)" in text
    assert "has no ps-worker job" not in text


def test_a_study_of_an_empty_trace_says_so(tc, tmp_path: Path) -> None:
    trace = tmp_path / "h0.csv"
    trace.write_text("job_id,n_gpus\n")
    r = tc("study", str(trace), "-o", str(tmp_path / "st"))
    assert r.returncode == 0 and "The trace holds no job" in " ".join(r.stdout.split())
    assert "nothing to analyse" in r.stderr


@pytest.mark.parametrize("command", [["characterize"], ["whatif", "-s", "eth100"],
                                     ["recommend"], ["colocate"]])
def test_an_analysis_of_a_trace_of_bad_rows_alone_fails_as_study_does(
        tc, tmp_path: Path, command: list[str]) -> None:
    """Every row bad (-1 and inf GPUs): an error naming the first bad row, status 2, as
    study's, not empty tables; a header alone is still analysed (it holds no job)."""
    trace = tmp_path / "bad.csv"
    trace.write_text("job_id,n_gpus,architecture\nj1,-1,1w1g\nj2,inf,1w1g\n")
    r = tc(*command, str(trace), "--db", str(tmp_path / "s.duckdb"))
    said = " ".join(r.stderr.split())
    assert r.returncode == 2, r.stdout
    assert f"no job stored: every row of the trace was bad (2; the first: {trace}: row 1: " \
           "field n_gpus: '-1'): nothing was analysed" in said
    # again on the same store: the file is kept from the first ingest (not read again), its
    # bad rows counted all the same
    r = tc(*command, str(trace), "--db", str(tmp_path / "s.duckdb"))
    said = " ".join(r.stderr.split())
    assert r.returncode == 2, r.stdout
    assert "every row of the trace was bad (2; found when it was first ingested: traincast " \
           f"ingest {trace} --strict names them): nothing was analysed" in said
    empty = tmp_path / "h0.csv"
    empty.write_text("job_id,n_gpus\n")
    r = tc(*command, str(empty), "--db", str(tmp_path / "e.duckdb"))
    assert r.returncode == 0 and "nothing to analyse" in r.stderr


def test_trace_flags_without_a_trace_are_refused(tc, tmp_path: Path) -> None:
    """--format (the default's name too) and --map describe a trace's columns: without a
    trace (the store read as stored) they are an error naming them, and an unknown format is
    one with or without a trace."""
    for args, words in ((["--format", "slurm"], "--format: flags of a TRACE"),
                        (["-f", "csv"], "--format: flags of a TRACE"),
                        (["--map", "n_gpus=x"], "--map: flags of a TRACE"),
                        (["--format", "foo"], "unknown trace format 'foo'")):
        for command in (["characterize"], ["whatif", "-s", "eth100"], ["recommend"],
                        ["colocate"]):
            r = tc(*command, "--db", str(tmp_path / "s.duckdb"), *args)
            assert r.returncode == 2 and words in r.stderr, (command, args, r.stderr)


def test_map_names_in_any_case_and_from_the_api(tmp_path: Path) -> None:
    from traincast.errors import TraincastError
    from traincast.trace import parse_mapping, read_trace

    assert parse_mapping([" Job_ID = id"]) == {"job_id": "id"}
    assert parse_mapping(["job_id=id", "JOB_ID=id"]) == {"job_id": "id"}  # the same, twice
    with pytest.raises(TraincastError, match="--map n_gpus: given twice, as 'a' and 'b'"):
        parse_mapping(["n_gpus=a", "n_gpus=b"])
    path = tmp_path / "z.csv"
    path.write_text("job_id,n_gpus,z\na,1,1\n")
    with pytest.raises(TraincastError, match="'zero_gpu' is computed by the store"):
        read_trace(path, "csv", tmp_path / "s.duckdb", {"zero_gpu": "z"})


def test_a_named_workload_larger_than_its_gpu_is_said(tmp_path: Path) -> None:
    # GPT-2 XL (1,557,611,200 parameters) needs at least 16 bytes a parameter on each GPU of a
    # 1w1g or AllReduce job (fp32 weights, gradients and Adam's two moments): 24.9 GB, more
    # than a T4's 16 GB; an 80 GB A100 holds it. The two T4 jobs are said, priced as if it
    # fit; the job without GPUs gets no workload
    from traincast.trace.sample import replica_gb

    assert 1_557_611_200 * 16 / 1e9 > 16
    assert 1_557_611_200 * 16 / 1e9 <= replica_gb("gpt2-xl") < 80
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus,architecture,gpu_type\na,1,1w1g,T4\n"
                     "b,2,allreduce-local,T4\nc,1,1w1g,A100-SXM4-80GB\nd,0,,T4\n")
    r = tc("characterize", str(trace), "--workload", "gpt2-xl", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)["assumed_workload"]
    assert (info["jobs"], info["exceeds_gpu_memory"]) == (3, 2)
    r = tc("characterize", str(trace), "--workload", "gpt2-xl", cwd=tmp_path)
    said = " ".join(r.stdout.split())
    assert "of these, 2 jobs run on GPUs with less memory than gpt2-xl needs per GPU under " \
        "their architecture" in said and "priced as if it fit" in said
    # GPT-2 small (124 M parameters) fits every one: nothing said
    r = tc("characterize", str(trace), "--workload", "gpt2", "--json", cwd=tmp_path)
    assert json.loads(r.stdout)["assumed_workload"]["exceeds_gpu_memory"] == 0
    r = tc("characterize", str(trace), "--workload", "gpt2", cwd=tmp_path)
    assert "less memory" not in r.stdout
    # the footprint is the architecture's, as a what-if port checks it: the zoo's llm keeps
    # 27 GB of weights, 27 GB of gradients, 54 GB of Adam state and 23 GB of activations (131
    # GB) on a GPU training alone, more than an 80 GB A100; as a PS/Worker worker its optimizer
    # state lives on the parameter servers (77 GB), and it fits
    trace.write_text("job_id,n_gpus,architecture,gpu_type,n_workers,n_ps\n"
                     "p,2,ps-worker,A100-SXM4-80GB,2,1\nq,1,1w1g,A100-SXM4-80GB,,\n")
    r = tc("characterize", str(trace), "--workload", "llm", "--json", "--db",
           str(tmp_path / "llm.duckdb"), cwd=tmp_path)
    assert json.loads(r.stdout)["assumed_workload"]["exceeds_gpu_memory"] == 1


def test_whatif_says_the_node_it_assumed_for_jobs_that_name_none(tmp_path: Path) -> None:
    # ElasticFlow names no GPU type or node: the two jobs with GPUs are priced on the default
    # node, and whatif says so as characterize does (the job with 0 GPUs is not counted)
    trace = tmp_path / "ef.csv"
    trace.write_text("job_id,submission_time,duration,num_gpu\na,0,100,1\nb,0,50,16\n"
                     "c,0,50,0\n")
    base = ("whatif", str(trace), "--format", "elasticflow", "-s", "eth100")
    r = tc(*base, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    hw = json.loads(r.stdout)["default_hardware"]
    assert (hw["jobs"], hw["node"], hw["nic"]) == (2, "pai-v100-nvlink", "eth25")
    said = " ".join(tc(*base, cwd=tmp_path).stdout.split())
    assert "assumed hardware: 2 jobs with GPUs name neither a GPU type nor a node; they are " \
        "priced on pai-v100-nvlink nodes" in said


def test_a_file_of_bad_rows_only_fails_the_ingest_status(tc, tmp_path: Path) -> None:
    """Every row bad: no job stored, said, and exit status 3 (a script sees it, told from an
    unexpected error's 1); a header alone, or a file with one good row, exits 0."""
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,n_gpus\na,x\nb,y\n")
    r = tc("ingest", str(bad), "--db", str(tmp_path / "b.duckdb"))
    assert r.returncode == 3 and "bad.csv: no job stored (every row was bad" in r.stdout
    r = tc("ingest", str(bad), "--db", str(tmp_path / "j.duckdb"), "--json")
    assert r.returncode == 3 and '"bad_rows": 2' in r.stdout
    bad.write_text("job_id,n_gpus\na,x\nb,1\n")
    assert tc("ingest", str(bad), "--db", str(tmp_path / "c.duckdb")).returncode == 0


def test_ingest_parquet_takes_a_parquet_name(tc, tmp_path: Path) -> None:
    """--parquet writes Parquet: a name of another kind (out.txt) is refused before the ingest,
    as sample -o refuses one; nothing is stored."""
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus\na,1\n")
    r = tc("ingest", str(trace), "--db", str(tmp_path / "s.duckdb"), "--parquet",
           str(tmp_path / "out.txt"))
    assert r.returncode == 2 and "a Parquet file's name ends in .parquet or .pq" in r.stderr
    assert not (tmp_path / "s.duckdb").exists() and not (tmp_path / "out.txt").exists()


def test_the_strict_ingest_a_second_run_names_works_as_given(tc, tmp_path: Path) -> None:
    """A trace of bad rows alone, read through --map, analysed twice: the second error names
    the ingest --strict that lists its rows, with the run's --map and the path quoted; run as
    given, it names both bad rows."""
    import shlex

    trace = tmp_path / "m s.csv"
    trace.write_text("id,gpus\nx,-1\ny,inf\n")
    args = ["characterize", str(trace), "--map", "job_id=id", "--map", "n_gpus=gpus",
            "--db", str(tmp_path / "s.duckdb")]
    first = tc(*args)
    assert first.returncode == 2 and "every row of the trace was bad (2; the first: " in " ".join(
        first.stderr.split())
    said = " ".join(tc(*args).stderr.split())
    command = said.split("traincast ingest ", 1)[1].split(" --strict names them")[0]
    assert command == f"{shlex.quote(str(trace))} --map job_id=id --map n_gpus=gpus"
    r = tc("ingest", *shlex.split(command), "--strict", "--db", str(tmp_path / "o.duckdb"))
    assert r.returncode == 2 and "row 1: field gpus: bad value '-1'" in r.stderr
    assert "row 2: field gpus: bad value 'inf'" in r.stderr
