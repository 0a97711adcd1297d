"""Property-based fuzzing of every trace adapter through the store (hypothesis).

Each test starts from a small valid file of its format (written here from the adapter's
documented columns), damages it — truncated at any byte, bytes flipped, a value replaced by an
extreme or non-finite number (1e308, -1e308, inf, nan, -0, 1e400, huge integers) or a year-10000
date, columns swapped, binary garbage inserted, the file replaced by garbage or emptied — and
ingests it into a store that already holds one committed trace. Whatever the input:

* the ingest returns a report or raises a :class:`~traincast.errors.TraincastError` with a
  one-line message and a hint, never another exception (the command line: exit 0 or 2, never 1);
* every number stored is finite;
* a failed ingest leaves the store file byte-identical (its sha256, taken with every connection
  closed: DuckDB's read-only open and close leave the file's bytes as they are, checked below)
  and nothing new beside it; a successful one keeps the committed trace's jobs.

Adapters are also held to what their mapping rules promise: one bad value in an otherwise valid
file is a bad row or a value, never the whole file's failure; a job's end is not before its
start; a row cut short by a truncated file is not stored as a job; the report's job count is
what was stored. Fixed inputs of each kind of damage, with their expected outcome, follow the
fuzz tests.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import duckdb
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from traincast.errors import TraincastError
from traincast.trace import Store
from traincast.trace.schema import NUMERIC_COLUMNS

# ---- small valid traces, from each adapter's documented columns ----------------------------

CANONICAL = (
    "job_id,submit_time_s,start_time_s,end_time_s,status,user,architecture,n_gpus,n_workers,"
    "n_ps,gpus_per_worker,gpus_per_node,workers_per_node,gpu_type,workload,batch_size,"
    "flops_compute_bound,weight_bytes,gpu_util\n"
    "c1,0,10,3610,Terminated,u1,ps-worker,8,4,2,2,8,4,V100,resnet50,64,1.2e12,1.0e8,0.8\n"
    "c2,100,100,,Running,u2,allreduce-local,4,1,0,4,4,1,T4,bert,32,3e11,4e8,\n"
    "c3,2020-07-01 10:00:00,2020-07-01T10:05:00Z,2020-07-01 14:00:00+02:00,Failed,u1,,1,,,,,,"
    "P100,,,,,0.5\n")
ALIBABA = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
    "openb-pod-0000,12000,16384,1,1000,,LS,Succeeded,0,12537496,0\n"
    "openb-pod-0001,6000,12288,1,460,V100M16|V100M32,LS,Running,427061,12902960,427061\n"
    "openb-pod-0002,4000,15360,0,0,,BE,Pending,1000,12902960,\n"
    "openb-pod-0003,32000,65536,8,1000,A100,Guaranteed,Failed,5000,9000,5100\n")
ELASTICFLOW = ("job_id,submission_time,duration,num_gpu\n"
               "e1,0,3600,1\ne2,60,120,8\ne3,90,86400,64\ne4,200,5,2\n")
HELIOS = (
    "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
    "duration,queue\n"
    "h1,u1,vc1,train,8,48,1,COMPLETED,2020-04-01 10:00:00,2020-04-01 10:05:00,"
    "2020-04-01 12:05:00,7200,300\n"
    "h2,u2,vc2,train,16,96,2,RUNNING,2020-04-02 00:00:00,2020-04-02 00:01:00,,,60\n"
    "h3,u1,vc1,eval,1,6,1,FAILED,1585735200,1585735260,1585738860,3600,60\n")
PAI_JOB = ("j1,i1,u1,Terminated,100,900\n"
           "j2,i2,u2,Failed,150,400\n"
           "j3,i3,u1,Running,300,\n")
PAI_TASK = ("j1,ps,2,Terminated,100,900,600,29.3,,\n"
            "j1,worker,4,Terminated,100,900,600,29.3,100,V100\n"
            "j2,tensorflow,1,Failed,150,400,400,10,50,T4\n"
            "j3,PyTorchWorker,2,Running,300,,800,60,800,V100M32\n")
PAI_INSTANCE = ("j1,worker,i1w0,w0,i1,Terminated,110,900,m1\n"
                "j1,worker,i1w1,w1,i1,Terminated,111,900,m2\n"
                "j3,PyTorchWorker,i3w0,w0,i3,Running,310,,m3\n")
PHILLY = [
    {"jobid": "application_1", "user": "u1", "vc": "vc1", "status": "Pass",
     "submitted_time": "2017-10-03 14:13:52",
     "attempts": [{"start_time": "2017-10-03 14:14:00", "end_time": "2017-10-03 15:00:00",
                   "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]},
    {"jobid": "application_2", "user": "u2", "vc": "vc2", "status": "Killed",
     "submitted_time": "2017-10-04 09:00:00",
     "attempts": [{"start_time": "2017-10-04 09:01:00", "end_time": "2017-10-04 09:30:00",
                   "detail": [{"ip": "m2", "gpus": ["gpu0"]}]},
                  {"start_time": "2017-10-04 09:40:00", "end_time": "2017-10-04 11:00:00",
                   "detail": [{"ip": "m2", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3"]},
                              {"ip": "m3", "gpus": ["gpu0", "gpu1", "gpu2", "gpu3"]}]}]},
    {"jobid": "application_3", "user": "u1", "vc": "vc1", "status": "Running",
     "submitted_time": "2017-10-05 00:00:00",
     "attempts": [{"start_time": "2017-10-05 00:10:00", "end_time": None,
                   "detail": [{"ip": "m4", "gpus": ["gpu0"]}]}]},
    {"jobid": "application_4", "user": "u3", "vc": "vc1", "status": "Failed",
     "submitted_time": "2017-10-06 00:00:00", "attempts": []},
]


@dataclass(frozen=True)
class Format:
    """A trace format as fuzzed: its files (name -> valid bytes), the file damaged, how its
    rows are laid out, and what to give ``ingest``."""

    name: str
    files: dict[str, bytes]
    target: str  # the file the mutations damage (PAI: one table, drawn)
    header: bool = True  # CSV with a header row (False: headerless PAI tables; JSON: philly)
    json: bool = False
    directory: bool = False  # give the folder (pai-2020), not the file

    def damaged(self, target: str | None = None) -> Format:
        return Format(self.name, self.files, target or self.target, self.header, self.json,
                      self.directory)


FORMATS: dict[str, Format] = {
    "csv": Format("csv", {"jobs.csv": CANONICAL.encode()}, "jobs.csv"),
    "alibaba-2023": Format("alibaba-2023", {"openb_pod_list.csv": ALIBABA.encode()},
                           "openb_pod_list.csv"),
    "elasticflow": Format("elasticflow", {"cluster.csv": ELASTICFLOW.encode()}, "cluster.csv"),
    "helios": Format("helios", {"cluster_log.csv": HELIOS.encode()}, "cluster_log.csv"),
    "pai-2020": Format("pai-2020", {"pai_job_table.csv": PAI_JOB.encode(),
                                    "pai_task_table.csv": PAI_TASK.encode(),
                                    "pai_instance_table.csv": PAI_INSTANCE.encode()},
                       "pai_job_table.csv", header=False, directory=True),
    "philly": Format("philly", {"cluster_job_log.json": json.dumps(PHILLY).encode()},
                     "cluster_job_log.json", header=False, json=True),
}
PAI_TABLES = ("pai_job_table.csv", "pai_task_table.csv", "pai_instance_table.csv")

# ---- damage --------------------------------------------------------------------------------

EXTREME_CELLS = ("1e308", "-1e308", "1.7976931348623157e308", "inf", "-inf", "Infinity",
                 "nan", "NaN", "-0", "-0.0", "1e400", "-1e400", "1e-400", "1e309",
                 "9223372036854775807", "9223372036854775808", "-9223372036854775809",
                 "99999999999999999999999999999999", "1" * 400, "10000-01-01 00:00:00",
                 "9999-12-31 23:59:59", "0001-01-01 00:00:00", "-1", "1.5", "")
EXTREME_JSON = ("1e308", "-1e308", "1e400", "-1e400", "NaN", "Infinity", "-Infinity", "-0",
                "123456789012345678901234567890", '"1e308"', '"inf"', '"nan"', '"-1e400"',
                '"10000-01-01 00:00:00"', '"9999-12-31 23:59:59"', '"0000-01-01 00:00:00"',
                "null", "true", "[]", "{}", '""', '"\\u0000"')
JSON_VALUE = re.compile(r'(?<=: )(?:"[^"]*"|null|\[\])|(?<=\[)"[^"]*"|(?<=, )"[^"]*"(?=[,\]])')
"""A value of json.dumps' layout: of a key (a string, null, an empty list) or in a list."""

Mutation = tuple  # ("truncate", i) | ("flip", i, x) | ("cell", r, c, token) | ("swap", a, b)
#                   | ("garbage", i, bytes) | ("replace", bytes) | ("empty",)


def mutations(json_format: bool) -> st.SearchStrategy[list[Mutation]]:
    """One to three damages of a file."""
    index = st.integers(0, 10**6)
    cells = EXTREME_JSON if json_format else EXTREME_CELLS
    one = st.one_of(
        st.tuples(st.just("truncate"), index),
        st.tuples(st.just("flip"), index, st.integers(1, 255)),
        st.tuples(st.just("cell"), index, index, st.sampled_from(cells)),
        st.tuples(st.just("swap"), index, index),
        st.tuples(st.just("garbage"), index, st.binary(min_size=1, max_size=24)),
        st.tuples(st.just("replace"), st.binary(min_size=1, max_size=200)),
        st.tuples(st.just("empty")),
    )
    return st.lists(one, min_size=1, max_size=3)


def _cut(data: bytes, i: int) -> bytes:
    return data[:i % (len(data) + 1)]


def apply(fmt: Format, data: bytes, m: Mutation) -> bytes:
    """``data`` (a file of ``fmt``) with damage ``m``."""
    kind = m[0]
    if kind == "truncate":
        return _cut(data, m[1])
    if kind == "flip":
        if not data:
            return data
        i = m[1] % len(data)
        return data[:i] + bytes([data[i] ^ m[2]]) + data[i + 1:]
    if kind == "garbage":
        i = m[1] % (len(data) + 1)
        return data[:i] + m[2] + data[i:]
    if kind == "replace":
        return m[1]
    if kind == "empty":
        return b""
    if fmt.json:
        return _json_cell(data, m) if kind == "cell" else _json_swap(data, m)
    lines = data.split(b"\n")
    rows = [i for i, ln in enumerate(lines) if ln and (i > 0 or not fmt.header)]
    if kind == "cell":
        if not rows:
            return data
        r = rows[m[1] % len(rows)]
        cells = lines[r].split(b",")
        cells[m[2] % len(cells)] = m[3].encode()
        lines[r] = b",".join(cells)
    else:  # swap two columns: the header's names (data stays), or a headerless table's data
        targets = [0] if fmt.header else rows
        for r in targets:
            cells = lines[r].split(b",")
            a, b = m[1] % len(cells), m[2] % len(cells)
            cells[a], cells[b] = cells[b], cells[a]
            lines[r] = b",".join(cells)
    return b"\n".join(lines)


def _json_cell(data: bytes, m: Mutation) -> bytes:
    text = data.decode("utf-8", "replace")
    spans = [s.span() for s in JSON_VALUE.finditer(text)]
    if not spans:
        return data
    a, b = spans[m[1] % len(spans)]
    return (text[:a] + m[3] + text[b:]).encode()


def _json_swap(data: bytes, m: Mutation) -> bytes:
    text = data.decode("utf-8", "replace")
    spans = [s.span() for s in JSON_VALUE.finditer(text)]
    if len(spans) < 2:
        return data
    i, j = m[1] % len(spans), m[2] % len(spans)
    (a0, a1), (b0, b1) = sorted((spans[i], spans[j if j != i else (i + 1) % len(spans)]))
    return (text[:a0] + text[b0:b1] + text[a1:b0] + text[a0:a1] + text[b1:]).encode()


# ---- the properties ------------------------------------------------------------------------

BASE_TRACE = ("job_id,submission_time,duration,num_gpu\n"
              "base1,0,100,1\nbase2,5,20,8\n")
BASE_JOBS = ["base1", "base2"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def base_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding one committed trace (elasticflow, two jobs), copied for each example."""
    root = tmp_path_factory.mktemp("base")
    trace = root / "base.csv"
    trace.write_text(BASE_TRACE)
    db = root / "s.duckdb"
    with Store(db) as store:
        assert store.ingest(trace, "elasticflow")["jobs"] == 2
    return db


@contextlib.contextmanager
def example_dir(base_store: Path) -> Iterator[Path]:
    """A fresh folder for one example (removed after it), holding a copy of the base store."""
    d = Path(tempfile.mkdtemp(dir=base_store.parent))
    try:
        shutil.copy(base_store, d / "s.duckdb")
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def write_trace(fmt: Format, where: Path, damaged: bytes) -> Path:
    """The trace files of ``fmt`` in ``where`` (the target file damaged): what to ingest."""
    folder = where / "trace"
    folder.mkdir()
    for name, data in fmt.files.items():
        (folder / name).write_bytes(damaged if name == fmt.target else data)
    return folder if fmt.directory else folder / fmt.target


@dataclass
class Outcome:
    """What one ingest of a damaged trace did, and the properties it broke (kind -> detail)."""

    report: dict | None = None
    error: BaseException | None = None
    broken: dict[str, str] = field(default_factory=dict)


def ingest_damaged(fmt: Format, damaged: bytes, steps: list[Mutation], db: Path,
                   trace: Path) -> Outcome:
    """Ingest ``trace`` into the store ``db`` and check every property."""
    before = _sha(db)
    out = Outcome()
    try:
        with Store(db) as store:
            out.report = store.ingest(trace, fmt.name)
    except TraincastError as exc:
        out.error = exc
        lines = str(exc).splitlines()
        if len(lines) != 1 or not lines[0].strip() or not exc.hint:
            out.broken["message"] = f"not one line and a hint: {str(exc)!r} / {exc.hint!r}"
    except Exception as exc:  # the property under test: never another exception
        out.error = exc
        out.broken[f"escaped {type(exc).__name__}"] = str(exc)[:300]
    left = sorted(f.name for f in db.parent.iterdir() if f.name != "trace")
    if out.report is None:
        if _sha(db) != before:
            out.broken["store changed by a failed ingest"] = ""
        if left != ["s.duckdb"]:
            out.broken["files left beside the store"] = str(left)
        if len(steps) == 1 and steps[0][0] == "cell":
            out.broken["one bad value fails the file"] = f"{steps[0][3]!r}: {out.error}"
        return out
    con = duckdb.connect(str(db), read_only=True)
    try:
        cols = ", ".join(NUMERIC_COLUMNS)
        rows = con.execute(f"SELECT job_id, source_id, start_time_s, end_time_s, {cols} "
                           "FROM jobs").fetchall()
    finally:
        con.close()
    base = sorted(r[0] for r in rows if r[1] == 1)
    if base != BASE_JOBS:
        out.broken["committed jobs changed"] = str(base)
    new = [r for r in rows if r[1] != 1]
    if len(new) != out.report["jobs"]:
        out.broken["report's job count"] = f"{out.report['jobs']} != {len(new)} stored"
    for r in new:
        for name, v in zip(NUMERIC_COLUMNS, r[4:], strict=True):
            if v is not None and not math.isfinite(v):
                out.broken[f"non-finite {name}"] = f"job {r[0]!r}: {v}"
        start, end = r[2], r[3]
        if start is not None and end is not None and end < start:
            out.broken["end before start"] = f"job {r[0]!r}: start {start}, end {end}"
    if any(s[0] == "truncate" for s in steps) and not fmt.json and fmt.target != \
            "pai_task_table.csv":
        short = _short_last_row(fmt, damaged)
        if short is not None and any(r[0] == short for r in new):
            out.broken["truncated last row stored"] = f"{short!r} from {damaged[-60:]!r}"
    return out


def _short_last_row(fmt: Format, damaged: bytes) -> str | None:
    """The job id of the damaged file's last row when it was cut short (no final newline,
    fewer fields than the valid file's rows), else None."""
    if not damaged or damaged.endswith(b"\n"):
        return None
    lines = damaged.split(b"\n")
    last = lines[-1]
    if (fmt.header and len(lines) < 2) or not last.strip():
        return None
    width = fmt.files[fmt.target].split(b"\n")[0].count(b",")
    if last.count(b",") >= width:
        return None
    cells = last.decode("utf-8", "replace").split(",")
    key = 1 if fmt.name == "pai-2020" else 0  # job_id = inst_id (the second column)
    return cells[key].strip() if len(cells) > key and cells[key].strip() else None


def _check(fmt: Format, steps: list[Mutation], base_store: Path) -> Outcome:
    damaged = fmt.files[fmt.target]
    for m in steps:
        damaged = apply(fmt, damaged, m)
    with example_dir(base_store) as d:
        out = ingest_damaged(fmt, damaged, steps, d / "s.duckdb", write_trace(fmt, d, damaged))
    assert not out.broken, f"{fmt.name} {fmt.target} after {steps!r}: {out.broken}"
    return out


FUZZ = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@FUZZ
@given(steps=mutations(json_format=False))
def test_fuzz_csv(base_store: Path, steps: list[Mutation]) -> None:
    _check(FORMATS["csv"], steps, base_store)


@FUZZ
@given(steps=mutations(json_format=False))
def test_fuzz_alibaba_2023(base_store: Path, steps: list[Mutation]) -> None:
    _check(FORMATS["alibaba-2023"], steps, base_store)


@FUZZ
@given(steps=mutations(json_format=False))
@example(steps=[("cell", 0, 1, "1e308"), ("cell", 0, 2, "1e308")])
@example(steps=[("truncate", len(ELASTICFLOW) - 3)])
def test_fuzz_elasticflow(base_store: Path, steps: list[Mutation]) -> None:
    _check(FORMATS["elasticflow"], steps, base_store)


@FUZZ
@given(steps=mutations(json_format=False))
def test_fuzz_helios(base_store: Path, steps: list[Mutation]) -> None:
    _check(FORMATS["helios"], steps, base_store)


@FUZZ
@given(table=st.sampled_from(PAI_TABLES), steps=mutations(json_format=False))
@example(table="pai_job_table.csv", steps=[("replace", b"\xe5<")])  # not UTF-8: a probe that
# DuckDB refuses must not abort the ingest's transaction (it runs before it)
@example(table="pai_task_table.csv", steps=[("cell", 1, 8, "1e308"), ("cell", 1, 2, "1e308")])
def test_fuzz_pai_2020(base_store: Path, table: str, steps: list[Mutation]) -> None:
    _check(FORMATS["pai-2020"].damaged(table), steps, base_store)


@FUZZ
@given(steps=mutations(json_format=True))
@example(steps=[("replace", b"\x89PNG\r\n\x1a\n\x00\xff\xfe")])
@example(steps=[("cell", 4, 0, '"10000-01-01 00:00:00"')])
def test_fuzz_philly(base_store: Path, steps: list[Mutation]) -> None:
    _check(FORMATS["philly"], steps, base_store)


def test_valid_files_ingest_cleanly(base_store: Path) -> None:
    """The starting files are valid: every job stored, no bad row, nothing broken."""
    expected = {"csv": 3, "alibaba-2023": 4, "elasticflow": 4, "helios": 3, "pai-2020": 3,
                "philly": 4}
    for name, fmt in FORMATS.items():
        with example_dir(base_store) as d:
            data = fmt.files[fmt.target]
            out = ingest_damaged(fmt, data, [], d / "s.duckdb", write_trace(fmt, d, data))
        assert out.error is None and not out.broken, (name, out.error, out.broken)
        assert out.report is not None
        assert (out.report["jobs"], out.report["bad_rows"]) == (expected[name], 0), name


def test_read_only_open_leaves_the_store_bytes_unchanged(base_store: Path) -> None:
    """Why comparing a store's sha256 before and after a failed ingest is sound: reading it
    (DuckDB read-only, and traincast's reads) does not rewrite the file."""
    with example_dir(base_store) as d:
        db = d / "s.duckdb"
        before = _sha(db)
        duckdb.connect(str(db), read_only=True).close()
        with Store(db) as store:
            assert store.jobs()["job_id"].to_pylist() == BASE_JOBS
            store.sources()
        assert _sha(db) == before


# ---- the command line: exit 0 or 2, never 1 --------------------------------------------------

def run_cli(*args: str) -> tuple[int, str]:
    """``traincast ARGS`` in this process (its ``main``): exit status and stderr."""
    from traincast.cli import main

    err = io.StringIO()
    with mock.patch.object(sys, "argv", ["traincast", *args]), \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0
    return code, err.getvalue()


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(FORMATS)), steps=mutations(json_format=False))
def test_fuzz_cli_exit_status(base_store: Path, name: str, steps: list[Mutation]) -> None:
    fmt = FORMATS[name]
    damaged = fmt.files[fmt.target]
    for m in steps:
        damaged = apply(fmt, damaged, m)
    with example_dir(base_store) as d:
        db = d / "s.duckdb"
        before = _sha(db)
        code, err = run_cli("ingest", str(write_trace(fmt, d, damaged)), "--format", name,
                            "--db", str(db), "--json")
        # 0 stored, 3 a file read whose every row was bad (stored as a source of no job), 2
        # an error that stored nothing
        assert code in (0, 2, 3), f"{name} after {steps!r}: exit {code}: {err}"
        if code == 3:
            assert not err.strip() and _sha(db) != before, err
        if code == 2:  # with --json: one JSON object naming the error and a hint
            obj = json.loads(err)
            assert set(obj) == {"error", "hint", "exit_code"} and obj["exit_code"] == 2, err
            assert obj["error"] and obj["hint"] and "\n" not in err.strip(), err
            assert _sha(db) == before


# ---- fixed inputs of each kind of damage (expected outcomes by hand) ------------------------

def _replace_in(fmt: str, old: str, new: str) -> bytes:
    data = FORMATS[fmt].files[FORMATS[fmt].target].decode()
    assert data.count(old) == 1, old
    return data.replace(old, new).encode()


FIXED = {
    # the file cut inside its last row ("e4,200" of "e4,200,5,2"): that row is bad, not a job
    "truncated-last-row": ("elasticflow", ELASTICFLOW[:ELASTICFLOW.index("e4,200") + 6].encode(),
                           3, 1),
    # 1e308 + 1e308 overflows to inf: e1's end is not a finite time
    "1e308-sum": ("elasticflow", _replace_in("elasticflow", "e1,0,3600", "e1,1e308,1e308"), 3, 1),
    "1e400": ("csv", _replace_in("csv", "ps-worker,8,", "ps-worker,1e400,"), 2, 1),
    "bigint-overflow": ("csv", _replace_in("csv", "ps-worker,8,4,", "ps-worker,8,"
                                           "9223372036854775808,"), 2, 1),
    "inf": ("alibaba-2023", _replace_in("alibaba-2023", "0000,12000,16384,1,", "0000,12000,16384,"
                                        "inf,"), 3, 1),
    "nan-is-missing": ("elasticflow", _replace_in("elasticflow", "e2,60,120,8", "e2,60,120,nan"),
                       4, 0),
    "end-before-start": ("helios", _replace_in("helios", "2020-04-01 12:05:00",
                                               "2020-04-01 09:00:00"), 2, 1),
    "year-10000": ("helios", _replace_in("helios", "2020-04-01 10:05:00",
                                         "10000-01-01 00:00:00"), 2, 1),
    "philly-year-10000": ("philly", _replace_in("philly", '"2017-10-05 00:00:00"',
                                                '"10000-01-01 00:00:00"'), 3, 1),
    "philly-binary": ("philly", b"\x89PNG\r\n\x1a\n\x00\xff\xfe" + bytes(range(256)), None, None),
    "philly-cut": ("philly", json.dumps(PHILLY).encode()[:150], None, None),
    "pai-binary": ("pai-2020", b"\xe5<", None, None),
    "csv-binary": ("csv", bytes(range(256)) * 4, None, None),
    "empty": ("helios", b"", None, None),
}


@pytest.mark.parametrize("case", sorted(FIXED))
def test_fixed_damage(base_store: Path, case: str) -> None:
    """``(format, damaged file, jobs, bad rows)``; ``None``: the ingest fails, one line and a
    hint, the store unchanged."""
    name, damaged, jobs, bad = FIXED[case]
    fmt = FORMATS[name]
    with example_dir(base_store) as d:
        out = ingest_damaged(fmt, damaged, [], d / "s.duckdb", write_trace(fmt, d, damaged))
    assert not out.broken, out.broken
    if jobs is None:
        assert isinstance(out.error, TraincastError), out.error
    else:
        assert out.report is not None, out.error
        assert (out.report["jobs"], out.report["bad_rows"]) == (jobs, bad)
