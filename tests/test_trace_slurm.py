"""``--format slurm``: sacct --parsable2 exports, every field checked against the rows by hand."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from traincast.trace.store import Store

SACCT = (
    "JobID|User|State|Submit|Start|End|NNodes|AllocTRES|ReqTRES\n"
    "100|alice|COMPLETED|2024-01-02T10:00:00|2024-01-02T10:05:00|2024-01-02T12:05:00|2|billing=128,cpu=128,gres/gpu:a100=16,gres/gpu=16,mem=1000G,node=2|billing=128,cpu=128,gres/gpu=16,node=2\n"
    "100.batch||COMPLETED|2024-01-02T10:05:00|2024-01-02T10:05:00|2024-01-02T12:05:00|1|cpu=64,gres/gpu:a100=8,gres/gpu=8,node=1|\n"
    "100.extern||COMPLETED|2024-01-02T10:05:00|2024-01-02T10:05:00|2024-01-02T12:05:00|2|billing=128,cpu=128,gres/gpu=16,node=2|\n"
    "101|bob|RUNNING|2024-01-02T11:00:00|2024-01-02T11:00:00|Unknown|1|billing=8,cpu=8,gres/gpu:h100=1,mem=64G,node=1|billing=8,gres/gpu=1\n"
    "102_3|carol|PENDING|2024-01-02T11:30:00|Unknown|Unknown|1||billing=16,cpu=16,gres/gpu=2,node=1\n"
    "103|dave|CANCELLED by 1001|"
    "2024-01-02T09:00:00|2024-01-02T09:10:00|2024-01-02T09:20:00|1|billing=4,cpu=4,mem=16G,node=1|cpu=4\n"
    "104|erin|FAILED|2024-01-02T09:00:00|2024-01-02T09:00:00|2024-01-02T09:01:00|1.5|billing=4,gres/gpu=4,node=1|\n"
    "105|frank|COMPLETED|2024-01-02T09:00:00|2024-01-02T09:00:00|2024-01-02T10:00:00|2|gres/gpu:a100=8,gres/gpu:v100=4,node=2|\n"
)
T0 = 1704153600  # 2024-01-02T00:00:00 UTC


def stored(db: Path, columns: str) -> dict[str, tuple]:
    """The store's jobs by id: the ``columns`` (SQL) of each."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {r[0]: r[1:] for r in con.execute(
            f"SELECT job_id, {columns} FROM jobs").fetchall()}
    finally:
        con.close()


def test_sacct_rows_map_to_jobs(tmp_path: Path) -> None:
    f = tmp_path / "jobs.txt"
    f.write_text(SACCT)
    db = tmp_path / "s.duckdb"
    report = Store(db).ingest(f, "slurm")
    # 8 data rows: two steps left out (a note), row 7 (job 104) bad: 1.5 nodes
    assert report["jobs"] == 5 and report["bad_rows"] == 1
    assert [(e["row"], e["field"]) for e in report["errors"]] == [(7, "NNodes")]
    [note] = report["notes"]
    assert note["count"] == 2 and "job step" in note["note"]
    rows = stored(db, "user, status, submit_time_s, start_time_s, end_time_s, n_gpus, gpu_type, "
                  "gpus_per_node, censored")
    h = 3600
    assert rows == {
        # gres/gpu=16 counted once (not again as its typed a100=16), over 2 nodes
        "100": ("alice", "COMPLETED", T0 + 10 * h, T0 + 10 * h + 300, T0 + 12 * h + 300, 16.0,
                "a100", 8.0, False),
        # only a typed count; End Unknown: running, censored
        "101": ("bob", "RUNNING", T0 + 11 * h, T0 + 11 * h, None, 1.0, "h100", 1.0, True),
        # pending: no allocation, the requested GPUs; an array task is a job
        "102_3": ("carol", "PENDING", T0 + 11.5 * h, None, None, 2.0, None, 2.0, True),
        # no gres/gpu: a CPU job
        "103": ("dave", "CANCELLED by 1001", T0 + 9 * h, T0 + 9 * h + 600, T0 + 9 * h + 1200,
                0.0, None, 0.0, False),
        # two typed counts and no plain one: their sum; the first type named
        "105": ("frank", "COMPLETED", T0 + 9 * h, T0 + 9 * h, T0 + 10 * h, 12.0, "a100", 6.0,
                False),
    }


def test_a_sacct_file_given_as_csv_is_pointed_to_slurm(tc, tmp_path: Path) -> None:
    f = tmp_path / "jobs.txt"
    f.write_text(SACCT)
    r = tc("characterize", str(f), "--db", str(tmp_path / "s.duckdb"))
    assert r.returncode == 2 and "--format slurm" in r.stderr
    r = tc("characterize", str(f), "--format", "slurm", "--db", str(tmp_path / "s.duckdb"),
           "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # 5 jobs, 16 + 1 + 2 + 0 + 12 GPUs; the A100 and H100 types known to the catalog
    assert out["jobs"] == 5 and out["gpus"] == 31
    assert out["unknown_gpu_types"] == {}


def test_gpus_the_adapter_cannot_read_are_said(tmp_path: Path) -> None:
    head = "JobID|State|Submit|Start|End|AllocTRES\n"
    times = "COMPLETED|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T01:00:00"
    # the GRES form (gpu:TYPE:N) in a TRES column: a bad row, not a CPU job
    f = tmp_path / "gres.txt"
    f.write_text(head + f"1|{times}|cpu=4,mem=1G\n2|{times}|cpu=4,gres/gpu:a100:2\n")
    report = Store(tmp_path / "a.duckdb").ingest(f, "slurm")
    assert (report["jobs"], report["bad_rows"]) == (1, 1)
    assert (report["errors"][0]["row"], report["errors"][0]["field"]) == (2, "AllocTRES")
    # a count that is no whole number: a bad row naming it, not its leading digits read
    # (2.5 -> 2, 1e9 -> 1); another resource named gres/gpu... (gpumem) and a MIG type are no
    # GPU counts
    f = tmp_path / "frac.txt"
    f.write_text(head + "".join(f"{i}|{times}|cpu=4,{tres}\n" for i, tres in enumerate([
        "gres/gpu=2.5", "gres/gpu=1e9", "gres/gpu=8GPUs", "gres/gpu:a100=4.9,gres/gpu=4",
        "gres/gpu:a100=4,gres/gpu=4,gres/gpumem=40G", "gres/gpu:3g.40gb=2"], 1)))
    report = Store(tmp_path / "c.duckdb").ingest(f, "slurm")
    assert [(e["row"], e["field"]) for e in report["errors"]] == [(r, "AllocTRES")
                                                                 for r in (1, 2, 3, 4)]
    assert "(a GPU count is a whole number: gres/gpu=N" in report["errors"][0]["value"]
    assert report["jobs"] == 2
    # row 5: 4 GPUs (gres/gpumem=40G is memory, not GPUs); row 6: two 3g.40gb MIG slices, 3 of
    # an A100's 7 compute slices each, 2 x 3/7 of a GPU
    with Store(tmp_path / "c.duckdb") as store:
        stored = store.jobs().select(["job_id", "n_gpus"]).to_pylist()
    assert {r["job_id"]: r["n_gpus"] for r in stored} == {"5": 4.0, "6": pytest.approx(6 / 7)}
    # no TRES list names gres/gpu: every job a CPU job, and a note says why that may be wrong
    f = tmp_path / "cpu.txt"
    f.write_text(head + f"1|{times}|cpu=4,mem=1G\n2|{times}|cpu=8\n")
    report = Store(tmp_path / "b.duckdb").ingest(f, "slurm")
    assert report["flags"]["zero_gpu"] == 2
    assert [n["count"] for n in report["notes"] if "AccountingStorageTRES" in n["note"]] == [2]


def test_an_older_export_of_gres_columns(tmp_path: Path) -> None:
    """sacct before TRES accounting writes AllocGRES (gpu:2, gpu:tesla:4(IDX:0-3)): its GPUs
    are read from there, the type from gpu:TYPE:N, no GPU where it names none or, for a job
    that started, where it is empty (a CPU job's); unknown for a pending job without one. Job
    steps are left out and said, as in a TRES export."""
    from traincast.trace.store import ingest, load_jobs

    times = "2024-01-02T10:00:00|2024-01-02T10:05:00|2024-01-02T12:05:00"
    path = tmp_path / "gres.txt"
    path.write_text("JobID|User|State|Submit|Start|End|NNodes|AllocGRES\n"
                    f"1|a|COMPLETED|{times}|1|gpu:2\n2|a|COMPLETED|{times}|2|gpu:tesla:4(IDX:0-3)\n"
                    f"3|a|COMPLETED|{times}|1|\n4|a|COMPLETED|{times}|1|mps:100\n"
                    f"4.batch|a|COMPLETED|{times}|1|mps:100\n"
                    "5|a|PENDING|2024-01-02T10:00:00|Unknown|Unknown|1|\n"
                    f"6|a|COMPLETED|{times}|1|gpu:3g.40gb:2(IDX:0-1),gpu:a100:1(IDX:2)\n")
    report = ingest(path, format="slurm", db=tmp_path / "g.duckdb")
    assert report["jobs"] == 6 and report["bad_rows"] == 0
    assert [(n["count"], n["note"][:15]) for n in report["notes"]] == [(1, "job step row(s)")]
    jobs = {j["job_id"]: j for j in load_jobs(tmp_path / "g.duckdb").to_pylist()}
    assert {k: (j["n_gpus"], j["gpu_type"], j["gpus_per_node"]) for k, j in jobs.items()} == {
        "1": (2, None, 2), "2": (4, "tesla", 2), "3": (0, None, 0), "4": (0, None, 0),
        "5": (None, None, None), "6": (pytest.approx(1 + 2 * 3 / 7), "a100",
                                       pytest.approx(1 + 2 * 3 / 7))}
    # job 6: two MIG devices of 3 of 7 slices, as in a TRES list, and one whole A100
    # a gpu entry that is not gpu:N or gpu:TYPE:N, N whole: a bad row, not its leading digits
    # (or, for -4, no GPU; for a MIG type without its count, 3 GPUs); an (IDX:0,2) with a comma
    # is no entry of its own; gpu:tesla:2 and a MIG device's count read
    bad = tmp_path / "bad.txt"
    bad.write_text("JobID|User|State|Submit|Start|End|NNodes|AllocGRES\n" + "".join(
        f"{i}|a|COMPLETED|{times}|1|{g}\n" for i, g in enumerate(
            ["gpu:2.5", "gpu:tesla:1e3", "gpu:-4", "gpu:tesla:2(IDX:0,2)", "gpu:3g.40gb",
             "gpu:k80", "mps:100,gpu:3g.40gb:2(IDX:0-1)"], 1)))
    report = ingest(bad, format="slurm", db=tmp_path / "b.duckdb")
    assert [(e["row"], e["field"]) for e in report["errors"]] == [(r, "AllocGRES")
                                                                 for r in (1, 2, 3, 5, 6)]
    assert "(a GPU entry is gpu:N or gpu:TYPE:N, N a whole number)" in \
        report["errors"][0]["value"]
    got = {j["job_id"]: j["n_gpus"] for j in load_jobs(tmp_path / "b.duckdb").to_pylist()}
    assert got == {"4": 2, "7": pytest.approx(2 * 3 / 7)}


def test_a_comma_separated_export_is_told_to_use_parsable2(tmp_path: Path) -> None:
    """sacct --delimiter=, leaves the TRES lists' commas unquoted: each row has more fields
    than the header (a bad row), said once in the notes with --parsable2, and not read as a
    CPU job."""
    from traincast.trace.store import ingest

    path = tmp_path / "comma.csv"
    path.write_text("JobID,User,State,Submit,Start,End,NNodes,AllocTRES\n"
                    "1,a,COMPLETED,2024-01-02T10:00:00,2024-01-02T10:05:00,2024-01-02T12:05:00,"
                    "1,cpu=4,gres/gpu=2,node=1\n")
    report = ingest(path, format="slurm", db=tmp_path / "c.duckdb")
    assert report["jobs"] == 0 and report["bad_rows"] == 1
    assert [(n["count"], n["note"].split(":")[0]) for n in report["notes"]] == [
        (1, "row(s) with more fields than the header")]
    assert "sacct --parsable2" in report["notes"][0]["note"]


def test_a_job_in_two_exports_is_said(tmp_path: Path) -> None:
    """Monthly sacct exports overlap (a job RUNNING in one, COMPLETED in the next): each
    source keeps its jobs, and the ingest says how many ids another source of the format holds;
    a file ingested again in place of its earlier self says nothing."""
    from traincast.trace.store import ingest

    t = "2024-01-02T10:00:00|2024-01-02T10:05:00|2024-01-02T12:05:00"
    head = "JobID|User|State|Submit|Start|End|NNodes|AllocTRES\n"
    jan, feb = tmp_path / "2024-01.txt", tmp_path / "2024-02.txt"
    jan.write_text(head + f"5001|a|COMPLETED|{t}|1|gres/gpu=2\n"
                   "5002|a|RUNNING|2024-01-02T10:00:00|2024-01-02T10:05:00|Unknown|1|gres/gpu=4\n")
    feb.write_text(head + f"5002|a|COMPLETED|{t}|1|gres/gpu=4\n5003|a|COMPLETED|{t}|1|gres/gpu=1\n")
    db = tmp_path / "s.duckdb"
    assert ingest(jan, format="slurm", db=db)["notes"] == []
    report = ingest(feb, format="slurm", db=db)
    assert report["jobs"] == 2
    assert [(n["count"], n["note"][:45]) for n in report["notes"]] == [
        (1, "job id(s) also stored from another slurm sour")]
    alone = tmp_path / "alone.duckdb"
    ingest(jan, format="slurm", db=alone)
    jan.write_text(jan.read_text() + f"5009|a|COMPLETED|{t}|1|gres/gpu=2\n")
    again = ingest(jan, format="slurm", db=alone)  # stored in place of its earlier self
    assert again["jobs"] == 3 and again["replaced"] and again["notes"] == []


def test_a_cut_step_row_at_the_end_is_the_cut_row(tmp_path: Path) -> None:
    """A file cut inside its last row, a job step's (steps follow their job): that row is the
    bad row, the job before it is stored whole."""
    from traincast.trace.store import ingest, load_jobs

    t = "2024-01-01T00:00:00|2024-01-01T00:01:00|2024-01-01T01:00:00"
    path = tmp_path / "cut.txt"
    path.write_text("JobID|User|State|Submit|Start|End|NNodes|AllocTRES\n"
                    f"1|a|COMPLETED|{t}|1|gres/gpu=2\n2|a|COMPLETED|{t}|1|gres/gpu=2\n"
                    "2.batch|a|COMPL")
    report = ingest(path, format="slurm", db=tmp_path / "c.duckdb")
    assert sorted(j["job_id"] for j in load_jobs(tmp_path / "c.duckdb").to_pylist()) == ["1", "2"]
    assert [(e["row"], e["field"]) for e in report["errors"]] == [(3, "State")]
    assert "the row is cut" in report["errors"][0]["value"]


def _named_jobs(tmp_path: Path, jobs: int, odd: int, name: str) -> dict:
    """Ingest a sacct export of ``jobs`` one-GPU jobs named ``run``, job ``odd`` named
    ``name``."""
    from traincast.trace.store import ingest

    t = "2024-01-02T10:00:00|2024-01-02T10:05:00|2024-01-02T12:05:00"
    rows = [f"{j}|{name if j == odd else 'run'}|u|COMPLETED|{t}|1|cpu=4,gres/gpu=1,node=1"
            for j in range(jobs)]
    path = tmp_path / "named.txt"
    path.write_text("JobID|JobName|User|State|Submit|Start|End|NNodes|AllocTRES\n"
                    + "\n".join(rows) + "\n")
    return ingest(path, format="slurm", db=tmp_path / "named.duckdb")


def test_a_job_name_with_an_odd_quote_in_a_long_export(tmp_path: Path) -> None:
    """30,000 rows with a job name "exp 7 near the top: the header read with the quote as a
    character where the quoted reading runs past DuckDB's longest line; every job stored."""
    report = _named_jobs(tmp_path, 30_000, 10, '"exp 7')
    assert report["jobs"] == 30_000 and report["bad_rows"] == 0


def test_a_job_name_holding_the_delimiter(tmp_path: Path) -> None:
    """sacct does not escape a job name "a|b": that row has a field too many (a bad row, its
    values may be shifted), and the file is still read as '|'-separated (DuckDB's sniffer,
    meeting the longer row, takes ',' for the whole file)."""
    report = _named_jobs(tmp_path, 200, 5, "a|b")
    assert report["jobs"] == 199 and report["bad_rows"] == 1
    assert [(e["row"], e["field"]) for e in report["errors"]] == [(6, "10")]


def test_without_nnodes_the_tres_node_count_gives_gpus_per_node(tmp_path: Path) -> None:
    """An export without NNodes: ``node=2`` of AllocTRES makes 16 GPUs 8 per node (a
    multi-node job, not one node's); a list without ``node=`` leaves it unknown."""
    f = tmp_path / "jobs.txt"
    f.write_text("JobID|State|Submit|Start|End|AllocTRES\n"
                 "1|COMPLETED|2024-01-02T10:00:00|2024-01-02T10:00:00|2024-01-02T11:00:00|"
                 "cpu=16,gres/gpu:a100=16,node=2\n"
                 "2|COMPLETED|2024-01-02T10:00:00|2024-01-02T10:00:00|2024-01-02T11:00:00|"
                 "cpu=4,gres/gpu=4\n")
    db = tmp_path / "s.duckdb"
    Store(db).ingest(f, "slurm")
    rows = {j: v for j, (v,) in stored(db, "gpus_per_node").items()}
    assert rows == {"1": 8.0, "2": None}


def test_a_repeated_header_line_is_said_as_one(tmp_path: Path) -> None:
    """Two monthly exports joined with cat: the second header is a bad row that says what it
    is, not an NNodes that does not parse; both months' jobs are stored."""
    month = ("JobID|State|Submit|Start|End|NNodes|AllocTRES\n{j}|COMPLETED|2024-01-02T10:00:00|"
             "2024-01-02T10:00:00|2024-01-02T11:00:00|1|gres/gpu=1,node=1\n")
    f = tmp_path / "all.txt"
    f.write_text(month.format(j=1) + month.format(j=2))
    report = Store(tmp_path / "s.duckdb").ingest(f, "slurm")
    assert report["jobs"] == 2
    [err] = report["errors"]
    assert (err["row"], err["field"]) == (2, "JobID") and "the header line again" in err["value"]


def test_a_readme_beside_the_exports_is_no_trace_file(tmp_path: Path) -> None:
    """A folder of sacct exports with its README.txt: the exports are read, the README not."""
    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "jan.txt").write_text(
        "JobID|State|Submit|Start|End|AllocTRES\n1|COMPLETED|2024-01-02T10:00:00|"
        "2024-01-02T10:00:00|2024-01-02T11:00:00|gres/gpu=1\n")
    (tmp_path / "exports" / "README.txt").write_text("sacct exports, one per month\n")
    report = Store(tmp_path / "s.duckdb").ingest(tmp_path / "exports", "slurm")
    assert report["jobs"] == 1
    assert [Path(f).name for s in report["sources"] for f in s["files"]] == ["jan.txt"]


def test_joined_windows_keep_a_jobs_final_state(tmp_path: Path) -> None:
    """Job 3002 RUNNING in January's export and COMPLETED in February's, joined: the completed
    record is the job (not censored, its end), the running one a duplicate that says so; two
    equal records keep the first."""
    row = "{j}|{state}|2024-01-30T10:00:00|2024-01-30T10:00:00|{end}|gres/gpu=8\n"
    f = tmp_path / "all.txt"
    f.write_text("JobID|State|Submit|Start|End|AllocTRES\n"
                 + row.format(j=3002, state="RUNNING", end="Unknown")
                 + row.format(j=3003, state="COMPLETED", end="2024-01-30T11:00:00")
                 + row.format(j=3002, state="COMPLETED", end="2024-02-02T10:00:00")
                 + row.format(j=3003, state="COMPLETED", end="2024-01-30T11:00:00"))
    db = tmp_path / "s.duckdb"
    report = Store(db).ingest(f, "slurm")
    assert [(e["row"], e["value"].split(" (")[1]) for e in report["errors"]] == [
        (1, "a duplicate of row 3, kept: its later record of the job has its final state)"),
        (4, "a duplicate of row 2)")]
    jobs = stored(db, "censored, end_time_s")
    rows, end = {j: c for j, (c, _) in jobs.items()}, jobs["3002"][1]
    assert rows == {"3002": False, "3003": False} and end == T0 + 31 * 86400 + 10 * 3600


def test_joined_windows_keep_a_heterogeneous_jobs_final_state_once(tmp_path: Path) -> None:
    """Job 3009's two components of 4 GPUs each, RUNNING in one export and COMPLETED in the
    next, joined: one job of 4 + 4 = 8 GPUs (not 16), its final state and end; the repeats
    are said."""
    row = "{j}|{state}|2024-01-30T10:00:00|2024-01-30T10:00:00|{end}|gres/gpu=4\n"
    f = tmp_path / "all.txt"
    f.write_text("JobID|State|Submit|Start|End|AllocTRES\n"
                 + "".join(row.format(j=j, state="RUNNING", end="Unknown")
                           for j in ("3009+0", "3009+1"))
                 + "".join(row.format(j=j, state="COMPLETED", end="2024-01-30T11:00:00")
                           for j in ("3009+0", "3009+1")))
    db = tmp_path / "s.duckdb"
    report = Store(db).ingest(f, "slurm")
    assert stored(db, "n_gpus, status, censored, end_time_s") == {
        "3009": (8.0, "COMPLETED", False, T0 + 28 * 86400 + 11 * 3600)}
    assert [n["count"] for n in report["notes"]
            if n["note"].startswith("row(s) repeat a component")] == [2]


def test_mig_devices_count_as_their_share_of_a_gpu(tmp_path: Path) -> None:
    """``gres/gpu:1g.10gb=3`` is three 1-slice MIG devices of an A100/H100 (7 slices): 3/7 of
    a GPU, not 3 GPUs, and no GPU type; an A30's ``2g.12gb`` (4 slices of 6 GB) is 2/4; whole
    GPUs typed beside MIG devices count whole (NVIDIA MIG user guide, "Supported MIG
    Profiles")."""
    row = "{j}|COMPLETED|2024-01-02T10:00:00|2024-01-02T10:00:00|2024-01-02T11:00:00|{tres}\n"
    f = tmp_path / "jobs.txt"
    f.write_text("JobID|State|Submit|Start|End|AllocTRES\n"
                 + row.format(j=1, tres="cpu=8,gres/gpu:1g.10gb=3,gres/gpu=3,node=1")
                 + row.format(j=2, tres="cpu=8,gres/gpu:2g.12gb+me=1,gres/gpu=1,node=1")
                 + row.format(j=3, tres="cpu=8,gres/gpu:a100=2,gres/gpu:3g.40gb=1,gres/gpu=3")
                 + row.format(j=4, tres="cpu=8,gres/gpu:a100=2,gres/gpu=2")
                 # a MIG type with its model before the profile (Slurm's NVML autodetection)
                 + row.format(j=5, tres="cpu=45,gres/gpu=3,gres/gpu:a100_3g.20gb=3")
                 + row.format(j=6, tres="gres/gpu:nvidia_h100_80gb_hbm3_1g.10gb=2,gres/gpu=2"))
    db = tmp_path / "s.duckdb"
    Store(db).ingest(f, "slurm")
    rows = stored(db, "n_gpus, gpu_type, fractional_gpu")
    assert rows["5"][0] == pytest.approx(9 / 7) and rows["5"][1:] == ("a100", True)
    assert rows["6"][0] == pytest.approx(2 / 7) and rows["6"][1] == "nvidia_h100_80gb_hbm3"
    assert rows["1"][0] == pytest.approx(3 / 7) and rows["1"][1:] == (None, True)
    assert rows["2"][0] == pytest.approx(0.5) and rows["2"][1] is None
    assert rows["3"][0] == pytest.approx(2 + 3 / 7) and rows["3"][1] == "a100"
    assert rows["4"] == (2.0, "a100", False)


def test_a_row_cut_before_a_required_column_is_named_as_the_file_spells_it(
        tmp_path: Path) -> None:
    f = tmp_path / "jobs.txt"
    f.write_text("JobID|User|State|Submit|Start|End|AllocTRES\n9|u|COMPLETED|"
                 "2024-01-02T10:00:00|2024-01-02T10:00:00|2024-01-02T11:00:00|gres/gpu=1\n"
                 "10|u|RUNNING\n")
    report = Store(tmp_path / "s.duckdb").ingest(f, "slurm")
    assert [(e["row"], e["field"]) for e in report["errors"]] == [(2, "Submit")]


def test_a_heterogeneous_jobs_components_are_one_job_and_gpu_shards_are_said(
        tmp_path: Path) -> None:
    """A heterogeneous job's components (``2002+0``, ``2002+1``) are one job ``2002``: its GPUs
    and nodes summed (1 + 8 GPUs on 1 + 1 nodes), the earliest submit and start, the latest
    end; a component still running leaves the job running (``2005``); a job holding GPU
    shards (``gres/shard=2``) and no GPU is a CPU job; both said in the notes."""
    t = "2024-01-02T{}:00:00"
    f = tmp_path / "het.txt"
    f.write_text("JobID|State|Submit|Start|End|NNodes|AllocTRES\n"
                 f"2002+0|COMPLETED|{t.format(10)}|{t.format(10)}|{t.format(11)}|1|"
                 "cpu=4,gres/gpu=1,node=1\n"
                 f"2002+0.batch|COMPLETED|{t.format(10)}|{t.format(10)}|{t.format(11)}|1|"
                 "cpu=4,gres/gpu=1,node=1\n"
                 f"2002+1|COMPLETED|{t.format(10)}|{t.format(10)}|{t.format(12)}|1|"
                 "cpu=64,gres/gpu:a100=8,gres/gpu=8,node=1\n"
                 f"2003|COMPLETED|{t.format(10)}|{t.format(10)}|{t.format(11)}|1|"
                 "cpu=8,gres/shard=2,node=1\n"
                 f"2004|COMPLETED|{t.format(10)}|{t.format(10)}|{t.format(11)}|1|"
                 "cpu=8,gres/gpu=2,gres/shard=2,node=1\n"
                 f"2005+0|RUNNING|{t.format(9)}|{t.format(10)}|Unknown|2|gres/gpu=16,node=2\n"
                 f"2005+1|COMPLETED|{t.format(9)}|{t.format(10)}|{t.format(11)}|1|"
                 "gres/gpu=4,node=1\n")
    db = tmp_path / "s.duckdb"
    report = Store(db).ingest(f, "slurm")
    assert report["bad_rows"] == 0, report["errors"]
    notes = {n["note"].split(" (")[0]: n["count"] for n in report["notes"]}
    assert notes == {"job step row(s) left out": 1,
                     "row(s) are components of heterogeneous jobs": 4,
                     "job(s) hold GPU shards": 1}
    rows = stored(db, "n_gpus, gpus_per_node, gpu_type, start_time_s, end_time_s, censored")
    h = 3600
    assert rows == {"2002": (9.0, 4.5, "a100", T0 + 10 * h, T0 + 12 * h, False),
                    "2003": (0.0, 0.0, None, T0 + 10 * h, T0 + 11 * h, False),
                    "2004": (2.0, 2.0, None, T0 + 10 * h, T0 + 11 * h, False),
                    "2005": (20.0, 20.0 / 3, None, T0 + 10 * h, None, True)}


def test_a_heterogeneous_jobs_components_are_counted_each_on_its_own(tmp_path: Path) -> None:
    # 3001: component 0 lists its GPUs untyped and typed (2), component 1 typed only (4 A100s):
    # 6 GPUs on 2 nodes. 3002: 2 whole GPUs, then 3 MIG slices (1g.10gb: 3/7 of a GPU) listed
    # typed and untyped: 2 + 3/7. Read as one joined text, the first component's untyped count
    # would stand for both (3001: 2), and the MIG slices would hide the whole GPUs (3002: 3/7)
    t = "2024-01-02T{}:00:00"
    f = tmp_path / "het.txt"
    f.write_text("JobID|State|Submit|Start|End|NNodes|AllocTRES\n"
                 f"3001+0|COMPLETED|{t.format(10)}|{t.format(10)}|{t.format(11)}|1|"
                 "cpu=4,gres/gpu:v100=2,gres/gpu=2,node=1\n"
                 f"3001+1|COMPLETED|{t.format(10)}|{t.format(10)}|{t.format(11)}|1|"
                 "cpu=8,gres/gpu:a100=4,node=1\n"
                 f"3002+0|COMPLETED|{t.format(10)}|{t.format(10)}|{t.format(11)}|1|"
                 "cpu=4,gres/gpu=2,node=1\n"
                 f"3002+1|COMPLETED|{t.format(10)}|{t.format(10)}|{t.format(11)}|1|"
                 "cpu=2,gres/gpu:1g.10gb=3,gres/gpu=3,node=1\n"
                 f"3003+0|COMPLETED|{t.format(10)}|{t.format(10)}|{t.format(11)}|1|"
                 "cpu=2,gres/shard=2,node=1\n"
                 f"3003+1|COMPLETED|{t.format(10)}|{t.format(10)}|{t.format(11)}|1|"
                 "cpu=2,gres/gpu=1,node=1\n"
                 f"3004+0|COMPLETED|{t.format(10)}|{t.format(10)}|Unknown|1|gres/gpu=1,node=1\n"
                 f"3004+1|COMPLETED|{t.format(10)}|{t.format(10)}|Unknown|1|gres/gpu=1,node=1\n")
    db = tmp_path / "s.duckdb"
    report = Store(db).ingest(f, "slurm")
    assert report["bad_rows"] == 0, report["errors"]
    # the notes count jobs: 3003 holds a whole GPU beside its shards; 3004 is one job
    notes = {n["note"].split(" (")[0]: n["count"] for n in report["notes"]}
    assert "job(s) hold GPU shards" not in notes
    assert notes["job(s) in a final state"] == 1
    assert notes["row(s) are components of heterogeneous jobs"] == 8
    rows = stored(db, "n_gpus, gpus_per_node, gpu_type, end_time_s, censored")
    assert rows["3001"] == (6.0, 3.0, "v100", T0 + 11 * 3600, False)
    assert rows["3002"][:2] == (pytest.approx(2 + 3 / 7), pytest.approx((2 + 3 / 7) / 2))
    # 3003: its shards are no GPU, its other component's one is, on 2 nodes; 3004: 1 + 1 GPUs,
    # finished (COMPLETED) without an End: no end time, not censored
    assert rows["3003"] == (1.0, 0.5, None, T0 + 11 * 3600, False)
    assert rows["3004"] == (2.0, 1.0, None, None, False)
    # a component naming gres/gpu in the GRES form is a bad job, as it would be alone
    bad = tmp_path / "bad.txt"
    bad.write_text("JobID|State|Submit|Start|End|NNodes|AllocTRES\n"
                   f"4001+0|COMPLETED|{t.format(10)}|{t.format(10)}|{t.format(11)}|1|"
                   "cpu=4,gres/gpu=2,node=1\n"
                   f"4001+1|COMPLETED|{t.format(10)}|{t.format(10)}|{t.format(11)}|1|"
                   "cpu=4,gres/gpu:a100:2,node=1\n")
    errors = Store(tmp_path / "b.duckdb").ingest(bad, "slurm")["errors"]
    assert [(e["row"], e["field"]) for e in errors] == [(1, "AllocTRES")]


def test_a_finished_job_without_an_end_is_not_censored(tmp_path: Path) -> None:
    # slurmdbd leaves a record open (a runaway job): COMPLETED or CANCELLED with End Unknown
    # finished, its duration unknown; SUSPENDED with no End is still unfinished: censored
    f = tmp_path / "jobs.txt"
    f.write_text(
        "JobID|User|State|Submit|Start|End|NNodes|AllocTRES\n"
        "1|a|COMPLETED|2024-01-02T10:00:00|2024-01-02T10:01:00|Unknown|1|gres/gpu=4,node=1\n"
        "2|a|CANCELLED by 7|2024-01-02T10:00:00|2024-01-02T10:01:00|Unknown|1|gres/gpu=1\n"
        "3|a|SUSPENDED|2024-01-02T10:00:00|2024-01-02T10:01:00|Unknown|1|gres/gpu=1\n"
        "4|a|RUNNING|2024-01-02T10:00:00|2024-01-02T10:01:00|Unknown|1|gres/gpu=1\n"
        "5|a|timeout|2024-01-02T10:00:00|2024-01-02T10:01:00|2024-01-02T11:01:00|1|gres/gpu=1\n"
        # an End that does not parse is a bad row, not a job without an End
        "6|a|COMPLETED|2024-01-02T10:00:00|2024-01-02T10:01:00|garbage|1|gres/gpu=1\n")
    db = tmp_path / "s.duckdb"
    report = Store(db).ingest(f, "slurm")
    assert stored(db, "censored, end_time_s") == {
        "1": (False, None), "2": (False, None), "3": (True, None), "4": (True, None),
        "5": (False, T0 + 11 * 3600 + 60)}
    assert [(e["row"], e["field"]) for e in report["errors"]] == [(6, "End")]
    [note] = [n for n in report["notes"] if "final state" in n["note"]]
    assert note["count"] == 2 and "duration is unknown" in note["note"]


def test_a_heterogeneous_jobs_times_are_ordered_as_times(tmp_path: Path) -> None:
    # times given as epoch seconds: as text "999" sorts after "1500" and "99999" after
    # "100000"; as times the earliest submit is 999 and the latest end 100000
    f = tmp_path / "het.txt"
    f.write_text("JobID|State|Submit|Start|End|NNodes|AllocTRES\n"
                 "7+0|COMPLETED|999|1000|100000|1|gres/gpu=1,node=1\n"
                 "7+1|COMPLETED|1500|2000|99999|1|gres/gpu=1,node=1\n")
    db = tmp_path / "s.duckdb"
    Store(db).ingest(f, "slurm")
    assert stored(db, "submit_time_s, start_time_s, end_time_s") == {
        "7": (999.0, 1000.0, 100000.0)}


def test_a_bad_component_makes_its_heterogeneous_job_a_bad_row_at_its_own_row(
        tmp_path: Path) -> None:
    # each component is checked as it is written: a time that does not parse, an End before
    # its own Start, a NNodes that is no count; the row and value named are the component's
    f = tmp_path / "het.txt"
    f.write_text("JobID|State|Submit|Start|End|NNodes|AllocTRES\n"
                 "9+0|COMPLETED|0|10|100|1|gres/gpu=1,node=1\n"
                 "9+1|COMPLETED|0|yesterday|100|1|gres/gpu=1,node=1\n"     # row 2
                 "4+0|COMPLETED|0|10|100|1|gres/gpu=1,node=1\n"
                 "4+1|COMPLETED|0|50|20|1|gres/gpu=1,node=1\n"             # row 4
                 "3+0|COMPLETED|0|10|100|1|gres/gpu=1,node=1\n"
                 "3+1|COMPLETED|0|10|100|x|gres/gpu=1,node=1\n"            # row 6
                 "2+0|COMPLETED|0|10|100|1|gres/gpu=1,node=1\n"
                 "2+1|COMPLETED|0|10|100|-3|gres/gpu=1,node=1\n"           # row 8
                 "1+0|COMPLETED|0|10|100|1|gres/gpu=1,node=1\n"
                 "1+1|COMPLETED|5|20|90|2|gres/gpu=2,node=2\n"
                 "8+0|COMPLETED|0|10|100|1|gres/gpu=1,node=1\n"
                 "8+1|COMPLETED|0|10|100|1.5|gres/gpu=1,node=1\n"          # row 12
                 "10+0|COMPLETED|0|10|100|99999999999|gres/gpu=1,node=1\n"  # row 13
                 "10+1|COMPLETED|0|10|100|1|gres/gpu=1,node=1\n")
    db = tmp_path / "s.duckdb"
    report = Store(db).ingest(f, "slurm")
    errors = [(e["row"], e["field"], e["value"].split(" (")[0]) for e in report["errors"]]
    assert errors == [(2, "Start", "yesterday"), (4, "End", "20"), (6, "NNodes", "x"),
                      (8, "NNodes", "-3"), (12, "NNodes", "1.5"), (13, "NNodes", "99999999999")]
    assert stored(db, "n_gpus, start_time_s, end_time_s") == {"1": (3, 10.0, 100.0)}
