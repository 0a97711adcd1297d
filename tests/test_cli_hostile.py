"""Hostile flags and files at the command line: each ends in one clean error line and exit 2
(or 130 for Ctrl-C), never exit 1 "a bug in traincast", and nothing is silently accepted.

Every command runs in this process through ``traincast.cli.main`` (the ``tc`` fixture of
conftest.py), so its exit status is the console script's.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from traincast.errors import TraincastError

JOB = ("--flops", "1e12", "--mem-bytes", "1e9", "--weight-bytes", "1e8")
"""One job by its features: 1e12 FLOPs, 1e9 memory-bound bytes, 1e8 weight bytes."""
BINARY = bytes(range(256)) * 4  # not UTF-8 (0x80 cannot start a character)


def clean(r, code: int = 2) -> str:
    """The run's stderr, asserted to be a clean refusal with ``code``: no traceback, not the
    message of an unexpected error."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert "this is a bug in traincast" not in r.stderr
    return " ".join(r.stderr.replace("│", " ").split())


def first_line(r) -> str:
    line = r.stderr.splitlines()[0]
    assert line.startswith("error: "), r.stderr
    return line


# ---------------------------------------------------------------- 1. one dtype check

@pytest.mark.parametrize("dtype", ["int3", "fp64", ""])
def test_plan_refuses_an_unknown_dtype_naming_the_allowed_ones(tc, dtype: str) -> None:
    r = tc("plan", "zoo:llama2-7b", "--gpus", "8", "--dtype", dtype)
    err = clean(r)
    assert f"--dtype {dtype!r}: unknown dtype" in first_line(r)
    assert "fp32, tf32, bf16, fp16, fp8" in err.split("hint:")[1]


@pytest.mark.parametrize("args", [
    ("predict", "--arch", "hybrid", "--model", "zoo:gpt2", "--dtype", "fp4"),
    ("predict", *JOB, "--dtype", "int3"),  # checked before the flag is found not to apply
])
def test_predict_shares_the_dtype_check(tc, args: tuple[str, ...]) -> None:
    r = tc(*args)
    err = clean(r)
    assert "--dtype" in first_line(r) and "unknown dtype" in first_line(r)
    assert "fp32, tf32, bf16, fp16, fp8" in err


# ---------------------------------------------------------------- 2. --catalog files

def test_a_binary_or_folder_catalog_is_named(tc, tmp_path: Path) -> None:
    binary = tmp_path / "cat.toml"
    binary.write_bytes(BINARY)
    r = tc("hardware", "list", "--catalog", str(binary))
    clean(r)
    assert str(binary) in first_line(r) and "not UTF-8" in first_line(r)
    r = tc("hardware", "list", "--catalog", str(tmp_path))
    clean(r)
    assert f"{tmp_path}: is a folder, not a catalog file" in first_line(r)
    latin = tmp_path / "latin.toml"
    latin.write_bytes('[gpu.x]\ndescription = "caf\xe9"\n'.encode("latin-1"))
    r = tc("predict", *JOB, "--catalog", str(latin))
    clean(r)
    assert str(latin) in first_line(r)


def test_an_empty_catalog_file_merges_nothing(tc, tmp_path: Path) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    r = tc("hardware", "show", "V100", "--catalog", str(empty), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["fp32_tflops"] == 15.7


# ---------------------------------------------------------------- 3. output paths first

@pytest.mark.parametrize("args", [
    ("sample",),
    ("profile", "zoo:resnet50"),
    ("colocate", "no-trace.csv"),
    ("whatif", "no-trace.csv", "-s", "eth100", "--jobs"),
    ("recommend", "no-trace.csv"),
    ("calibrate", "--quick"),
])
def test_an_output_folder_is_refused_before_any_work(tc, tmp_path: Path, monkeypatch,
                                                     args: tuple[str, ...]) -> None:
    import traincast.calibration as calibration

    monkeypatch.setattr(calibration, "calibrate", lambda *a, **k: pytest.fail("measured"))
    r = tc(*args, "-o", str(tmp_path))
    clean(r)
    assert first_line(r) == f"error: -o {tmp_path}: is a folder, not a file"


@pytest.mark.parametrize("args", [("sample",), ("profile", "zoo:resnet50"),
                                  ("calibrate", "--quick")])
def test_a_missing_output_folder_is_refused_before_any_work(tc, tmp_path: Path, monkeypatch,
                                                            args: tuple[str, ...]) -> None:
    import traincast.calibration as calibration

    monkeypatch.setattr(calibration, "calibrate", lambda *a, **k: pytest.fail("measured"))
    out = tmp_path / "missing" / "out.csv"
    r = tc(*args, "-o", str(out))
    err = clean(r)
    assert first_line(r) == f"error: -o {out}: no folder {tmp_path / 'missing'}"
    assert "create the folder first" in err
    assert not (tmp_path / "missing").exists()  # never created


def test_other_output_flags_are_checked_alike(tc, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    assert tc("sample", "-o", str(trace), "--jobs", "20").returncode == 0
    r = tc("ingest", str(trace), "--db", str(tmp_path / "s.duckdb"), "--parquet", str(tmp_path))
    clean(r)
    assert first_line(r) == f"error: --parquet {tmp_path}: is a folder, not a file"
    assert not (tmp_path / "s.duckdb").exists()  # refused before the ingest
    r = tc("ingest", str(trace), "--db", str(tmp_path))
    clean(r)
    assert f"--db {tmp_path}: is a folder" in first_line(r)
    # output folders: a file in the way is refused; a missing folder is created
    r = tc("study", str(trace), "-o", str(trace), "--no-report")
    clean(r)
    assert first_line(r) == f"error: -o {trace}: is a file, not a folder"
    r = tc("report", "--study", str(tmp_path), "-o", str(trace))
    clean(r)
    assert f"-o {trace}: is a file, not a folder" in first_line(r)
    other = tmp_path / "other.txt"
    other.write_text("x")
    r = tc("whatif", str(trace), "-s", "eth100", "--engine", "dask", "--parquet-dir",
           str(other))
    clean(r)
    assert f"--parquet-dir {other}: is a file" in first_line(r)


def test_check_output_rules() -> None:
    from traincast.cli.common import check_output

    check_output(None)
    check_output(Path("here.csv"))  # the working directory holds it
    with pytest.raises(TraincastError, match=r"^-o \.: is a folder, not a file$"):
        check_output(Path(""))


# ---------------------------------------------------------------- 4. a full disk

def _enospc(path: object = None) -> OSError:
    return OSError(errno.ENOSPC, "No space left on device", *([str(path)] if path else []))


def test_a_full_disk_leaves_nothing_half_written(tmp_path: Path) -> None:
    from traincast.files import write_text_whole, write_whole

    target = tmp_path / "out.json"
    target.write_text("before")

    def half(tmp: Path) -> None:
        tmp.write_text("{\"half\": ")
        raise _enospc(tmp)

    with pytest.raises(TraincastError) as exc:
        write_whole(target, half)
    assert str(exc.value) == f"{target}: no space left on device; nothing written"
    assert target.read_text() == "before"  # the earlier file is kept whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no temporary left
    # a library's own error (pyarrow, DuckDB) saying so, without an errno
    with pytest.raises(TraincastError, match="no space left on device"):
        write_whole(tmp_path / "t.csv",
                    lambda tmp: (_ for _ in ()).throw(OSError("IO Error: No space left on "
                                                              "device")))
    assert write_text_whole(tmp_path / "ok.txt", "done").read_text() == "done"


def test_an_output_is_written_through_a_link_and_never_over_a_device_or_pipe(
        tc, tmp_path: Path) -> None:
    import os

    from traincast.files import write_text_whole

    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("before")
    link.symlink_to(target)
    write_text_whole(link, "after")
    assert link.is_symlink() and target.read_text() == "after"  # the link kept, written through
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(TraincastError, match=r"pipe\.json: cannot write \(not a regular file"):
        write_text_whole(fifo, "x")
    assert fifo.exists() and not fifo.is_file()  # still the pipe it was
    r = tc("profile", "zoo:resnet50", "--batch", "2", "-o", str(fifo))
    assert r.returncode == 2 and "not a regular file (a device, pipe or socket)" in r.stderr


def test_a_full_disk_during_a_command_is_one_line_naming_the_file(tc, tmp_path: Path,
                                                                  monkeypatch) -> None:
    import traincast.trace.sample as sample

    def half(table, path, kind=None) -> None:  # noqa: ANN001
        Path(path).write_bytes(b"job_id\n")
        raise _enospc(path)

    monkeypatch.setattr(sample, "write_table", half)
    out = tmp_path / "s.csv"
    r = tc("sample", "-o", str(out), "--jobs", "10")
    err = clean(r)
    assert first_line(r) == f"error: {out}: no space left on device; nothing written"
    assert "free some space" in err
    assert list(tmp_path.iterdir()) == []


def test_main_says_no_space_left_for_any_enospc(tc, monkeypatch) -> None:
    import traincast.cli.hardware as hw

    def full(*a, **k):  # noqa: ANN002, ANN003
        raise _enospc("/data/out.csv")

    monkeypatch.setattr(hw, "catalog_from", full)
    r = tc("hardware", "list")
    clean(r)
    assert first_line(r) == "error: /data/out.csv: no space left on device"

    def full_no_path(*a, **k):  # noqa: ANN002, ANN003
        raise _enospc()

    monkeypatch.setattr(hw, "catalog_from", full_no_path)
    r = tc("hardware", "list")
    clean(r)
    assert "no space left on device" in first_line(r)


# ---------------------------------------------------------------- 5. Ctrl-C

def _raiser(exc: BaseException):
    def raise_it(*a, **k):  # noqa: ANN002, ANN003
        raise exc

    return raise_it


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), RuntimeError("Query interrupted"),
                                 "duckdb"])
def test_ctrl_c_anywhere_is_exit_130_interrupted(tc, monkeypatch, exc) -> None:
    import duckdb

    import traincast.cli.hardware as hw

    if exc == "duckdb":
        exc = duckdb.InterruptException("INTERRUPT Error: Interrupted!")
    monkeypatch.setattr(hw, "catalog_from", _raiser(exc))
    r = tc("hardware", "list")
    clean(r, 130)
    assert r.stderr.strip() == "interrupted"
    r = tc("hardware", "list", "--json")  # the same, as one JSON object; nothing on stdout
    clean(r, 130)
    assert json.loads(r.stderr)["error"] == "interrupted" and r.stdout == ""
    assert json.loads(r.stderr)["exit_code"] == 130


def test_other_runtime_errors_stay_unexpected(tc, monkeypatch) -> None:
    import traincast.cli.hardware as hw

    monkeypatch.setattr(hw, "catalog_from", _raiser(RuntimeError("boom")))
    r = tc("hardware", "list")
    assert r.returncode == 1 and first_line(r) == "error: RuntimeError: boom"


# ---------------------------------------------------------------- 6. flags that contradict

def test_ps_worker_gpus_and_workers_must_agree(tc) -> None:
    r = tc("predict", "--arch", "ps-worker", "--workers", "8", "--gpus", "2", *JOB)
    clean(r)
    assert "--gpus 2 and --workers 8 disagree" in first_line(r)
    for args in (("--workers", "8", "--gpus", "8"), ("--workers", "8")):
        r = tc("predict", "--arch", "ps-worker", *args, *JOB, "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["job"]["gpus"] == 8  # one GPU per worker
    r = tc("recommend", "--arch", "ps-worker", "--workers", "8", "--gpus", "2", *JOB)
    clean(r)
    assert "--gpus 2 and --workers 8 disagree" in first_line(r)


@pytest.mark.parametrize(("args", "words"), [
    (("--arch", "allreduce-local", "--gpus", "2", "--workers", "8"),
     "--workers applies to --arch ps-worker only, not allreduce-local"),
    (("--arch", "1w1g", "--ps", "2"), "--ps applies to --arch ps-worker only"),
    (("--arch", "allreduce-local", "--gpus", "2", "--hierarchical"),
     "--hierarchical applies to --arch allreduce-cluster or pearl"),
    (("--dp", "2",), "--dp applies to --arch hybrid only, not 1w1g"),
    (("--seq", "512", "--dtype", "fp16"), "--seq, --dtype apply to --arch hybrid only"),
    (("--no-eager",), "--no-eager applies to --arch hybrid only"),
    (("--eager",), "--eager applies to --arch hybrid only"),
])
def test_flags_of_another_architecture_are_refused(tc, args: tuple[str, ...],
                                                   words: str) -> None:
    r = tc("predict", *JOB, *args)
    clean(r)
    assert words in first_line(r)


def test_a_profile_flag_on_predict_says_where_it_belongs(tc) -> None:
    # --attention sdpa (profile's word) on a job by features: the architecture's refusal, with
    # the profile command that takes it, not the hybrid model's list of kernels
    r = tc("predict", *JOB, "--attention", "sdpa")
    clean(r)
    assert "--attention applies to --arch hybrid only, not 1w1g" in first_line(r)
    assert "traincast profile MODEL --attention ... -o FILE" in " ".join(r.stderr.split())


def test_hybrid_refuses_the_flags_of_a_job_by_features(tc) -> None:
    r = tc("predict", "--arch", "hybrid", "--model", "zoo:gpt2", "--batch", "4")
    clean(r)
    assert "--batch does not apply to --arch hybrid" in first_line(r)


@pytest.mark.parametrize("args", [
    ("plan", "zoo:llama2-7b", "--gpus", "8", "--seq", "0"),
    ("plan", "zoo:llama2-7b", "--gpus", "8", "--global-batch", "0"),
    ("plan", "zoo:llama2-7b", "--gpus", "8", "--seq", "-4"),
    ("predict", "--arch", "hybrid", "--model", "zoo:gpt2", "--seq", "0"),
    ("predict", "--arch", "hybrid", "--model", "zoo:gpt2", "--global-batch", "0"),
    ("predict", *JOB, "--gpus", "0"),
    ("sample", "-o", "x.csv", "--jobs", "-5"),
])
def test_sizes_below_one_are_refused_not_replaced_by_defaults(tc, args) -> None:
    err = clean(tc(*args))
    assert "must be at least 1" in err or "must be from 1 to" in err


def test_the_api_refuses_zero_sizes_too() -> None:
    from traincast.parallel.hybrid import predict_hybrid
    from traincast.parallel.plan import plan

    with pytest.raises(TraincastError, match="--seq must be at least 1, got 0"):
        plan("zoo:llama2-7b", 8, "dgx-a100", seq=0)
    with pytest.raises(TraincastError, match="--global-batch must be at least 1, got 0"):
        predict_hybrid("zoo:gpt2", node="dgx-a100", global_batch=0)
    with pytest.raises(TraincastError, match="unknown dtype"):
        plan("zoo:llama2-7b", 8, "dgx-a100", dtype="fp64")


@pytest.mark.parametrize(("args", "words"), [
    (("predict", *JOB, "--nic", "1e400Gbit"), "speed is not a finite number: '1e400Gbit' (--nic)"),
    (("predict", "--arch", "hybrid", "--model", "zoo:gpt2", "--intra", "1e400GB/s"),
     "(--intra)"),
    (("plan", "zoo:llama2-7b", "--gpus", "8", "--network", "1e400Gbit"),
     "speed is not a finite number: '1e400Gbit' (--network)"),
    # 1e12 Gbit/s = 1.25e11 GB/s, above the 100,000 GB/s a catalog link may have
    (("predict", *JOB, "--nic", "1e12Gbit"),
     "speed '1e12Gbit' is 125,000,000,000 GB/s, above 100,000"),
    # 1e-300 Gbit/s = 1.25e-301 GB/s, below the 100 kB/s (1e-4 GB/s) of any cluster link
    (("predict", *JOB, "--pcie", "1e-300Gbit"),
     "speed '1e-300Gbit' is 1.25e-301 GB/s, below 0.0001 GB/s"),
    (("predict", "--flops", "1e308", "--mem-bytes", "1", "--weight-bytes", "1"),
     "--flops: '1e308' is out of bounds"),
    (("predict", "--flops", "1e400", "--mem-bytes", "1", "--weight-bytes", "1"),
     "--flops: not a finite number: '1e400'"),
    (("predict", "--flops", "1", "--mem-bytes", "2e18", "--weight-bytes", "1"),
     "--mem-bytes: '2e18' is out of bounds"),
    (("predict", "--flops", "1", "--mem-bytes", "1", "--weight-bytes", "1",
      "--input-bytes", "1e19"), "--input-bytes: '1e19' is out of bounds"),
    (("plan", "zoo:llama2-7b", "--gpus", "99999999999"), "--gpus: 99,999,999,999 GPUs is out "
     "of bounds (at most 1,000,000)"),
    (("plan", "zoo:llama2-7b", "--gpus", "8", "--node", ""), "--node '': no node preset named"),
    (("plan", "zoo:llama2-7b", "--gpus", "8", "--node", ",,"), "no node preset named"),
])
def test_numbers_must_be_finite_and_in_bounds(tc, args: tuple[str, ...], words: str) -> None:
    r = tc(*args)
    clean(r)
    assert words in first_line(r)


def test_flops_at_the_bound_are_still_predicted(tc) -> None:
    # 1e24 FLOPs on the paper's V100 peak, 15.7 TFLOP/s: 1e24 / 15.7e12 s of compute
    r = tc("predict", "--flops", "1e24", "--mem-bytes", "0", "--weight-bytes", "0",
           "--gpu", "V100", "--compute", "paper", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["time_s"]["total"] == pytest.approx(1e24 / 15.7e12)


@pytest.mark.parametrize("args", [
    ("predict", *JOB, "--overlap", "nan"),
    ("plan", "zoo:llama2-7b", "--gpus", "8", "--overlap", "nan"),
    ("plan", "zoo:llama2-7b", "--gpus", "8", "--preemptions-per-hour", "inf"),
    ("colocate", "no-trace.csv", "--cross-contention", "inf"),
    ("whatif", "no-trace.csv", "-s", "eth100", "--overlap", "nan"),
    ("recommend", *JOB, "--min-gain", "nan"),
    ("recommend", *JOB, "--min-gain", "inf"),
    ("study", "no-trace.csv", "--overlap", "nan"),
])
def test_nan_and_inf_options_are_refused(tc, args: tuple[str, ...]) -> None:
    assert "must be a finite number" in clean(tc(*args))


def test_a_min_gain_above_its_bound_is_refused(tc) -> None:
    # a gain of 1e300 (a fraction) recommends nothing and printed "1e+302% faster"
    said = clean(tc("recommend", *JOB, "--min-gain", "1e300"))
    assert "Invalid value for '--min-gain': must be from 0 to 100, got 1e+300" in said


def test_a_features_file_out_of_bounds_is_refused(tc, tmp_path: Path) -> None:
    feats = tmp_path / "f.json"
    feats.write_text(json.dumps({"flops_compute_bound": 1e30, "bytes_memory_bound": 1.0,
                                 "weight_bytes": 1.0}))
    r = tc("predict", "--features", str(feats))
    clean(r)
    assert f"{feats}: flops_compute_bound = 1e+30 is out of bounds" in first_line(r)
    feats.write_bytes(BINARY)
    r = tc("predict", "--features", str(feats))
    clean(r)
    assert f"--features {feats}: not UTF-8 text" in first_line(r)


def test_recommend_and_whatif_refuse_flags_that_do_not_apply(tc, tmp_path: Path) -> None:
    r = tc("recommend", "no-trace.csv", "--gpus", "4")
    clean(r)
    assert "--gpus: flags of one job" in first_line(r)
    r = tc("whatif", "no-trace.csv", "-s", "eth100", "-o", str(tmp_path / "o.csv"))
    clean(r)
    assert "-o FILE writes the per-job rows of --jobs: add --jobs" in first_line(r)
    r = tc("whatif", "no-trace.csv", "-s", "eth100", "--address", "tcp://h:1")
    clean(r)
    assert "--address applies to --engine dask only" in first_line(r)


# ---------------------------------------------------------------- 7. catalog entries

@pytest.mark.parametrize(("text", "words"), [
    ("[gpu.x]\nfp32_tflops = nan\nmem_bw_gbs = 900\n", ["[gpu.x]", "'fp32_tflops'", "finite"]),
    ("[link.fast]\nbw_gbs = inf\n", ["[link.fast]", "'bw_gbs'", "finite"]),
    ("[gpu.x]\nfp32_tflops = 20\nfp16_tflops = 10\nmem_bw_gbs = 900\n",
     ["[gpu.x]", "'fp16_tflops' = 10 is below fp32_tflops = 20"]),
    ("[gpu.x.datasheet]\nfp32_tflops = 20\nbf16_tflops = 19.5\nmem_bw_gbs = 900\n",
     ["[gpu.x]", "'bf16_tflops' = 19.5 is below fp32_tflops = 20"]),
    ("[gpu.x]\nfp32_tflops = 20\nmem_bw_gbs = 900\nmem_gb = 0\n", ["[gpu.x]", "'mem_gb'",
                                                                    "positive"]),
    ("[gpu.x]\nfp32_tflops = 20\nmem_bw_gbs = 900\nl2_mb = -inf\n", ["'l2_mb'", "finite"]),
    ("[gpu.x]\nfp32_tflops = 20\nmem_bw_gbs = 900\ngemm_intensity = [1.0, nan]\n"
     "gemm_tflops = [1.0, 2.0]\n", ["'gemm_intensity'", "finite"]),
    ("[gpu.V100-SXM2-16GB]\nfp16_tflops = 1.0\n", ["[gpu.V100-SXM2-16GB]", "'fp16_tflops'",
                                                   "below fp32_tflops = 15.7"]),
    ("[kernel_model]\ndefault_floor_us = inf\n", ["[kernel_model]", "finite"]),
])
def test_catalog_entries_are_validated_on_load(tc, tmp_path: Path, text: str,
                                               words: list[str]) -> None:
    from traincast.hardware.catalog import CatalogError, load_catalog

    path = tmp_path / "mine.toml"
    path.write_text(text)
    with pytest.raises(CatalogError) as exc:
        load_catalog([path])
    assert str(exc.value).startswith(str(path)), exc.value
    for w in words:
        assert w in str(exc.value), (w, exc.value)
    r = tc("predict", *JOB, "--catalog", str(path))
    clean(r)
    assert str(path) in first_line(r)


def test_the_shipped_catalog_and_measured_peaks_pass(tmp_path: Path) -> None:
    from traincast.hardware.catalog import load_catalog

    cat = load_catalog()
    for g in cat.gpus.values():  # the rule, checked by hand on every shipped GPU
        for peak in (g.fp16_tflops, g.bf16_tflops):
            assert peak == 0 or peak >= g.fp32_tflops, g.name
    # traincast calibrate on a CPU may measure bf16 matrix products slower than fp32 ones
    path = tmp_path / "local.toml"
    path.write_text("[gpu.cpu]\nfp32_tflops = 0.2\nbf16_tflops = 0.05\nmem_bw_gbs = 20\n"
                    "gemm_intensity = [1.0, 10.0]\ngemm_tflops = [0.01, 0.2]\n")
    assert load_catalog([path]).gpu("cpu").bf16_tflops == 0.05


# ---------------------------------------------------------------- 8. Python named in a file

ROWS = """
[model.mine]
spec = "{spec}"

[[row]]
model = "mine"
gpu = "V100"
gpus = 1
dtype = "fp32"
batch_per_gpu = 8
throughput = 100.0
unit = "samples/s"
citation = "my measurement"
"""


def _rows(tmp_path: Path, spec: str) -> Path:
    path = tmp_path / "rows.toml"
    path.write_text(ROWS.format(spec=spec))
    return path


def test_a_rows_file_does_not_run_its_python_without_trust_specs(tc, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nraise RuntimeError('ran the rows file code')\n")
    rows = _rows(tmp_path, "evil.py:build")
    r = tc("validate", "--rows", str(rows))
    err = clean(r)
    line = first_line(r)
    assert f"{rows}: row 1 ([model.mine] spec = 'evil.py:build') would import and run " \
           f"{tmp_path / 'evil.py'}" in line
    assert "pass --trust-specs" in line and "you trust" in err
    assert not marker.exists()  # refused before anything ran
    r = tc("validate", "--rows", str(rows), "--trust-specs")
    clean(r)  # the file's own error, as one line (after the progress line of the row)
    assert "importing the model file failed" in \
        next(x for x in r.stderr.splitlines() if x.startswith("error: "))
    assert marker.exists()  # asked for: it ran


def test_absolute_specs_are_untrusted_and_shipped_ones_trusted(tmp_path: Path) -> None:
    from traincast.validation.published import load_published, untrusted_specs

    elsewhere = tmp_path / "sub"
    elsewhere.mkdir()
    (elsewhere / "m.py").write_text("")
    data = load_published(_rows(tmp_path, f"{elsewhere / 'm.py'}:build"))
    assert [(b["row"], b["path"]) for b in untrusted_specs(data)] == \
        [(1, str(elsewhere / "m.py"))]
    # traincast's own model files (no squad.py beside the rows): no flag needed
    assert untrusted_specs(load_published(_rows(tmp_path, "squad.py:bert_base_squad"))) == []
    assert untrusted_specs(load_published(_rows(tmp_path, "zoo:resnet50"))) == []


def test_validate_help_says_which_flag_runs_python() -> None:
    from typer.testing import CliRunner

    from traincast.cli import app

    res = CliRunner().invoke(app, ["validate", "--help"], env={"COLUMNS": "80"})
    out = " ".join(res.output.replace("│", " ").split())
    assert "--trust-specs" in out and "runs its code" in out


# ---------------------------------------------------------------- other hostile files

@pytest.mark.parametrize(("flag", "args"), [
    ("--rows", ("validate", "--rows")),
    ("--price", ("plan", "zoo:llama2-7b", "--gpus", "8", "--price")),
    ("--price", ("recommend", *JOB, "--price")),
    ("--scenario", ("whatif", "no-trace.csv", "--scenario")),
    ("--validate", ("report", "--study", ".", "--validate")),
])
def test_binary_and_folder_inputs_name_the_flag(tc, tmp_path: Path, flag: str,
                                                args: tuple[str, ...]) -> None:
    binary = tmp_path / "bad.toml"
    binary.write_bytes(BINARY)
    r = tc(*args, str(binary))
    clean(r)
    assert first_line(r).startswith(f"error: {flag} {binary}: not UTF-8 text")
    r = tc(*args, str(tmp_path))
    clean(r)
    if flag != "--price":  # a --price that is no file is read as a shipped name
        assert f"{flag} {tmp_path}: is a folder" in first_line(r)


def test_model_files_named_on_the_command_line_are_checked(tc, tmp_path: Path) -> None:
    model = tmp_path / "m.py"
    model.write_bytes(BINARY)
    r = tc("merge", "zoo:resnet50", f"{model}:build")
    clean(r)
    assert f"{model}: not UTF-8 text" in first_line(r)
    config = tmp_path / "config.json"
    config.write_bytes(BINARY)
    r = tc("plan", f"hf:{config}", "--gpus", "8")
    clean(r)
    assert f"{config}: not UTF-8 text" in first_line(r)


def test_sample_refuses_a_negative_seed(tc, tmp_path: Path) -> None:
    assert "must be at least 0" in clean(tc("sample", "-o", str(tmp_path / "s.csv"),
                                            "--seed", "-1"))


def test_one_job_names_a_known_workload_and_hybrid_sizes_are_bounded(tc) -> None:
    r = tc("recommend", "--workload", "zoo:no-such-model")
    clean(r)
    assert "--workload 'zoo:no-such-model': no zoo model or workload tag" in first_line(r)
    r = tc("predict", "--arch", "hybrid", "--model", "zoo:gpt2", "--dp", "2000", "--tp", "1000")
    clean(r)
    assert "--dp 2000 x --tp 1000 x --pp 1 x --cp 1 = 2,000,000 GPUs is out of bounds" \
        in first_line(r)


# ---------------------------------------------------------------- the store and its outputs

TRACE = ("job_id,n_gpus,architecture,start_time_s,end_time_s\n"
         "a,1,1w1g,0,10\nb,2,allreduce-local,0,20\n")


def _store(tc, tmp_path: Path) -> Path:
    (tmp_path / "t.csv").write_text(TRACE)
    db = tmp_path / "s.duckdb"
    assert tc("ingest", str(tmp_path / "t.csv"), "--db", str(db)).returncode == 0
    return db


def test_an_output_that_is_the_store_or_the_trace_is_refused(tc, tmp_path: Path) -> None:
    db = _store(tc, tmp_path)
    before = db.read_bytes()
    for args, flag in ((["ingest", str(tmp_path / "t.csv"), "--db", str(db), "--parquet",
                         str(db)], "--parquet"),
                       (["ingest", str(tmp_path / "t.csv"), "--db", str(db), "--parquet",
                         str(tmp_path / "t.csv")], "--parquet"),
                       (["whatif", "--db", str(db), "-s", "eth100", "--jobs", "-o", str(db)],
                        "-o"),
                       (["whatif", "--db", str(db), "-s", "eth100", "--jobs", "-o",
                         str(db) + ".wal"], "-o")):
        r = tc(*args)
        assert f"error: {flag} " in first_line(r) and "is an input of this command" in \
            first_line(r), args
        clean(r)
    assert db.read_bytes() == before and (tmp_path / "t.csv").read_text() == TRACE


def test_characterize_checks_its_flags_before_ingesting(tc, tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(TRACE)
    db = tmp_path / "new.duckdb"
    r = tc("characterize", str(tmp_path / "t.csv"), "--db", str(db), "--engine", "foo")
    assert "--engine 'foo': unknown engine" in first_line(r)
    r = tc("characterize", str(tmp_path / "t.csv"), "--db", str(db), "--address",
           "tcp://127.0.0.1:1")
    assert "--address applies to --engine dask only" in first_line(r)
    assert not db.exists()  # refused before the ingest
    for value in ("nan", "5", "-0.5"):
        clean(tc("characterize", str(tmp_path / "t.csv"), "--db", str(db), "--overlap", value))
    assert not db.exists()


def test_a_db_that_is_not_a_store_is_named(tc, tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(TRACE)
    r = tc("characterize", "--db", str(tmp_path / "t.csv"))
    assert first_line(r) == f"error: {tmp_path / 't.csv'}: not a DuckDB file (a job store)"


@pytest.mark.parametrize("value", ["0KB", "63MB", "lots"])
def test_the_store_memory_limit_must_be_a_size(tc, tmp_path: Path, monkeypatch,
                                               value: str) -> None:
    db = _store(tc, tmp_path)
    monkeypatch.setenv("TRAINCAST_DB_MEMORY", value)
    r = tc("characterize", "--db", str(db))
    assert f"TRAINCAST_DB_MEMORY={value!r}: not a memory size of at least 64 MB" in first_line(r)


def test_the_store_runs_within_its_memory_limit(tmp_path: Path, monkeypatch) -> None:
    from traincast.trace import Store

    monkeypatch.setenv("TRAINCAST_DB_MEMORY", "256MB")
    (tmp_path / "t.csv").write_text(TRACE)
    with Store(tmp_path / "s.duckdb") as store:
        store.ingest(tmp_path / "t.csv")
        limit = store._read().execute("SELECT current_setting('memory_limit')").fetchone()[0]
    assert limit in ("256.0 MB", "244.1 MiB")  # DuckDB prints the size in its own units


def test_out_of_memory_is_a_clean_error(tc, tmp_path: Path, monkeypatch) -> None:
    import duckdb

    import traincast.analysis.characterize as char

    db = _store(tc, tmp_path)

    def oom(*args, **kwargs):
        raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block")

    monkeypatch.setattr(char, "characterize_chunks", oom)
    r = tc("characterize", "--db", str(db))  # the progress bar's line comes first
    assert clean(r).startswith("error: out of memory (OutOfMemoryException: Out of Memory")
    assert "TRAINCAST_DB_MEMORY" in clean(r)
    r = tc("characterize", "--db", str(db), "--json")  # the same error, as one JSON object
    clean(r)
    obj = json.loads(r.stderr)
    assert obj["error"].startswith("out of memory (OutOfMemoryException: Out of Memory")
    assert "TRAINCAST_DB_MEMORY" in obj["hint"] and obj["exit_code"] == 2


def test_with_json_every_error_is_one_json_object_on_stderr(tc, tmp_path: Path) -> None:
    """A bad input, a bad option value and an unknown option: stdout stays empty, stderr is
    one line of JSON whose exit_code is the process's; without --json the same bad value is
    the error and hint lines."""
    cases = [(("predict", *JOB, "--gpu", "NOPE", "--json"), "NOPE"),
             (("whatif", "--overlap", "3", "--json"), "--overlap"),
             (("predict", "--nosuch", "--json"), "--nosuch")]
    for args, named in cases:
        r = tc(*args)
        clean(r)
        assert r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
        obj = json.loads(r.stderr)
        assert obj["exit_code"] == 2 and named in obj["error"] and obj["hint"], obj
    r = tc("whatif", "--overlap", "3")
    assert r.returncode == 2 and "--overlap" in r.stderr and not r.stderr.startswith("{")
    r = tc("predict", *JOB, "--gpu", "NOPE", "--", "--json")  # after --: not the flag
    assert r.returncode == 2 and not r.stderr.startswith("{")


@pytest.mark.parametrize(("args", "message", "hint"), [
    (("sources", "--drop", "abc"), "Invalid value for '--drop'",
     "traincast sources --help shows the options and their units"),
    (("predict", "--bogus"), "No such option: --bogus",
     "traincast predict --help shows the options and their units"),
    (("nosuch",), "No such command 'nosuch'", "traincast --help lists the commands"),
    (("predict", "--flops", "5", "--gpu", "V100"), "--flops needs --mem-bytes",
     "traincast predict --help shows the options and their units"),
    (("predict", "--flops", "1e40", "--mem-bytes", "1", "--weight-bytes", "1"),
     "'1e40' is out of bounds", "check the exponent; traincast predict --help gives the bound"),
])
def test_a_bad_flag_is_one_error_line_and_its_hint(tc, args: tuple[str, ...], message: str,
                                                   hint: str) -> None:
    r = tc(*args)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 2, r.stderr
    assert lines[0].startswith("error: ") and message in lines[0]
    assert lines[1] == f"hint: {hint}"


def test_a_group_without_a_command_shows_its_help(tc) -> None:
    r = tc("hardware")
    assert "Usage: traincast hardware" in r.stdout + r.stderr and "show" in r.stdout + r.stderr
    assert r.returncode == 2 and r.stderr == ""  # the help alone, no error line


def test_square_brackets_in_a_trace_print_as_they_are(tc, tmp_path: Path) -> None:
    # a job id, GPU type or file name with square brackets is text, not a rich style tag:
    # before, "exp[/lr]" made recommend fail and "T4[x]" printed as a second "T4"
    trace = tmp_path / "mk[red].csv"
    trace.write_text("job_id,n_gpus,start_time_s,end_time_s,gpu_type\n"
                     "exp[/lr],1,0,10,T4\nb,2,0,10,T4[x]\nc,1,0,10,[/red]\n")
    run = tc("characterize", str(trace), "--db", str(tmp_path / "a.duckdb"))
    assert run.returncode == 0, run.stderr
    assert "T4[x]" in run.stdout and "[/red]" in run.stdout
    assert "mk[red].csv" not in "".join(run.stderr.split())  # folded or not
    run = tc("recommend", str(trace), "--db", str(tmp_path / "b.duckdb"))
    assert run.returncode == 0, run.stderr
    assert "exp[/lr]" in run.stdout
    run = tc("ingest", str(trace), "--db", str(tmp_path / "c.duckdb"))
    assert run.returncode == 0 and "mk[red].csv" in run.stdout
    trace.write_text("job_id,n_gpus,start_time_s,end_time_s,gpu_type\n")  # a header alone
    run = tc("characterize", str(trace), "--db", str(tmp_path / "d.duckdb"))
    # compared without spaces and line ends: the console folds a long temporary path
    assert "mk[red].csvholdsnojob" in "".join(run.stderr.split())


def test_a_min_gain_above_one_is_said_to_be_a_fraction(tc) -> None:
    # --min-gain 5 (a percentage meant) asks for a change more than 500% faster: said
    r = tc("recommend", *JOB, "--min-gain", "5")
    assert r.returncode == 0, r.stderr
    assert "--min-gain 5 is a fraction" in r.stderr and "500% faster" in r.stderr
    r = tc("recommend", *JOB, "--min-gain", "0.05")
    assert r.returncode == 0, r.stderr
    assert "is a fraction" not in r.stderr


def test_one_jobs_whatif_names_its_hardware(tc) -> None:
    # the title says the GPU (or node) the job runs on, at the terminal's width
    r = tc("whatif", "--model", "zoo:resnet50", "--gpu", "H100", "-s", "gpu-a100")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("zoo:resnet50, 1w1g on 1 GPU (H100-SXM5-80GB of dgx-h100): ")
    r = tc("whatif", "--model", "zoo:resnet50", "--node", "dgx-a100", "--gpus", "8",
           "--arch", "allreduce-local", "-s", "eth100")
    assert r.stdout.startswith(
        "zoo:resnet50, allreduce-local on 8 GPUs (A100-SXM4-80GB of dgx-a100): ")
    # none given: the default the job resolves to, named
    r = tc("whatif", "--model", "zoo:resnet50", "-s", "eth100")
    assert r.stdout.startswith("zoo:resnet50, 1w1g on 1 GPU (V100-SXM2-16GB of pai-v100-nvlink)")


@pytest.mark.parametrize(("args", "words"), [
    (("sample", "-o", "x.csv", "--jobs", "1.5"), "Invalid value for '--jobs'"),
    (("sample", "-o", "x.csv", "--seed=abc"), "Invalid value for '--seed'"),
    (("calibrate", "--threads", "0"), "Invalid value for '--threads'"),
])
def test_a_bad_option_value_is_repeated_in_its_error(tc, tmp_path, monkeypatch, args,
                                                      words) -> None:
    """click's messages of a bad value ('Input should be ...') do not repeat it: the error
    ends with the value as given, after the option's last use."""
    monkeypatch.chdir(tmp_path)
    r = tc(*args)
    value = args[-1].split("=")[-1]
    assert r.returncode == 2 and words in r.stderr
    assert first_line(r).endswith(f", got '{value}'"), first_line(r)


def test_a_bad_choice_names_its_flag_before_any_ingest(tc, tmp_path) -> None:
    from traincast.trace.sample import sample_path

    db = tmp_path / "s.duckdb"
    for args, said in ((("colocate", "--by", "foo"), "--by 'foo': expected predicted or "
                        "measured"),
                       (("recommend", "--candidate-node", "nosuch"),
                        "unknown node 'nosuch' (--candidate-node)")):
        run = tc(args[0], str(sample_path()), *args[1:], "--db", str(db))
        assert run.returncode == 2 and said in run.stderr, run.stderr
        assert not db.exists()
