"""`traincast predict` and `traincast hardware` through the real console script."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from traincast.errors import TraincastError


def tc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from traincast.cli import main; main()",
                           *args], capture_output=True, text=True, timeout=120)


def test_predict_json_ps_worker_on_pai_pcie():
    # the paper's flat peaks: V100-PCIE 14 TFLOP/s, 900 GB/s; pcie3x16 15.75 GB/s x 12 / 15.75
    # (NCCL's 12 GB/s for a Gen3 x16 link, docs/hardware.md); eth25
    # 3.125 GB/s x 1448 / 1538 (TCP payload per Ethernet frame, docs/hardware.md, rounded to
    # 4 places); 8 workers, 2 PS,
    # k = min(8, 8) = 8. W = 1e8.
    r = tc("predict", "--arch", "ps-worker", "--workers", "8", "--ps", "2", "--node",
           "pai-v100-pcie", "--flops", "1.4e12", "--mem-bytes", "9e9", "--weight-bytes", "1e8",
           "--input-bytes", "15.75M", "--compute", "paper", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    t = out["time_s"]
    assert t["compute_flop"] == pytest.approx(0.1)
    assert t["compute_mem"] == pytest.approx(0.01)
    pcie = 15.75e9 * round(12 / 15.75, 4)
    assert t["data_io"] == pytest.approx(15.75e6 / pcie)
    eth = 3.125e9 * round(1448 / 1538, 4)
    comm = 2 * 1e8 / pcie + max(2 * 1e8 * 8 / eth, 2 * 8 * 1e8 / (2 * eth))
    assert t["comm"] == pytest.approx(comm)
    assert t["total"] == pytest.approx(0.11 + 15.75e6 / pcie + comm)
    assert sum(out["share"].values()) == pytest.approx(1.0)
    assert out["bottleneck"] == "comm"
    assert out["gpu_util"] == pytest.approx(0.11 / (0.11 + 15.75e6 / pcie + comm))


def test_predict_table_output_names_the_bottleneck_in_words():
    r = tc("predict", "--arch", "allreduce-cluster", "--gpus", "16", "--node", "pai-v100-nvlink",
           "--flops", "1e12", "--mem-bytes", "1e9", "--weight-bytes", "4e8")
    assert r.returncode == 0, r.stderr
    assert "weight/gradient communication over 25 Gbit Ethernet" in r.stdout


def test_a_step_of_no_work_shows_no_share():
    # every component 0 s: the JSON's shares are null, and the table shows none (not 0% of a
    # total of 100%)
    r = tc("predict", "--flops", "0", "--mem-bytes", "0", "--weight-bytes", "0")
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if "│" in ln and " s │" in ln]
    assert len(rows) == 5 and all(ln.rstrip(" │").endswith("-") for ln in rows), rows
    assert "%" not in "".join(rows)


def test_bad_input_is_one_line_without_traceback():
    r = tc("predict", "--arch", "allreduce-local", "--gpus", "16", "--flops", "1",
           "--mem-bytes", "1", "--weight-bytes", "1")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "allreduce-cluster" in r.stderr
    r = tc("predict", "--flops", "lots", "--mem-bytes", "1", "--weight-bytes", "1")
    assert r.returncode == 2 and "--flops" in r.stderr
    # --per-op / --aggregate choose how a profile is priced: beside --flops, nothing to choose
    for flag in ("--per-op", "--aggregate"):
        r = tc("predict", "--flops", "1", "--mem-bytes", "1", "--weight-bytes", "1", flag)
        assert r.returncode == 2
        assert f"{flag} chooses how a profile's compute is priced" in r.stderr


@pytest.mark.parametrize("text, unit, value", [
    ("1.2GB", "bytes", 1.2e9), ("350M", "bytes", 3.5e8), ("2k", "bytes", 2e3),
    ("2K", "bytes", 2e3), ("24T", "flops", 24e12), ("24TFLOP", "flops", 24e12),
    ("8 tflops", "flops", 8e12), ("4.1e9", "flops", 4.1e9), ("4.1E9", "bytes", 4.1e9),
    ("5GiB", "bytes", 5 * 2**30), ("1.5 MiB", "bytes", 1.5 * 2**20), ("2KiB", "bytes", 2048),
    ("-0", "bytes", 0.0), ("-0.0GB", "bytes", 0.0)])
def test_number_flags_read_decimal_prefixes_and_their_unit(text, unit, value) -> None:
    from traincast.cli.common import parse_number

    assert parse_number(text, "--x", None, unit) == pytest.approx(value)


@pytest.mark.parametrize("text, unit, words", [
    ("1Gb", "bytes", "'b' is bits (8 to a byte); write B for bytes: 1GB"),
    ("24m", "flops", "'m' is milli; write M for mega (24M)"),
    ("24TB", "flops", "a count of flops ends in FLOP, not B"),
    ("1GFLOP", "bytes", "a count of bytes ends in B, not FLOP"),
    ("8Gb", "flops", "a count of flops ends in FLOP, not b"),
    ("5Gi", "bytes", "a binary prefix (Ki, Mi, Gi, Ti) is for a byte count ending in B"),
    ("5GiFLOP", "flops", "a binary prefix (Ki, Mi, Gi, Ti) is for a byte count ending in B"),
    ("-1e-9", "bytes", "must not be negative, got '-1e-9'")])
def test_number_flags_refuse_bits_milli_and_the_other_unit(text, unit, words) -> None:
    from traincast.cli.common import parse_number

    with pytest.raises(TraincastError, match="^--x: ") as err:
        parse_number(text, "--x", None, unit)
    assert words in str(err.value)


def test_hardware_show_and_list():
    r = tc("hardware", "show", "V100", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["name"] == "V100-SXM2-16GB" and data["fp32_tflops"] == 15.7 and data["source"]
    r = tc("hardware", "list", "--json")
    data = json.loads(r.stdout)
    assert "paper-2019" in data["nodes"] and data["aliases"]["MISC"] == "K80"


def test_catalog_error_keeps_bracketed_names_verbatim(tmp_path):
    # rich would read "[gpu.x]" as markup and drop it; the message is printed as text
    bad = tmp_path / "bad.toml"
    bad.write_text("[gpu.x]\nfp32_tflops = -1\nmem_bw_gbs = 900\n")
    r = tc("hardware", "list", "--catalog", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    line = r.stderr.splitlines()[0]
    assert line.startswith("error: ") and "[gpu.x]" in line and "fp32_tflops" in line
    assert str(bad) in line and r.stderr.splitlines()[1].startswith("hint: ")


def test_unexpected_error_is_one_line_and_a_traceback_with_debug(tmp_path):
    # an exception that is not bad input (a corrupt internal state, here monkeypatched):
    # one line naming it and exit 1; --debug shows the traceback
    code = ("import sys, traincast.cli.hardware as h, traincast.cli.common as c\n"
            "def boom(paths): raise RuntimeError('boom [gpu.y]')\n"
            "h.catalog_from = boom\n"
            "from traincast.cli import main; main()")

    def run(*args):
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                              text=True, timeout=120)

    r = run("hardware", "list")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.splitlines()[0] == "error: RuntimeError: boom [gpu.y]"
    assert "--debug" in r.stderr
    r = run("hardware", "list", "--debug")
    assert r.returncode == 1 and "Traceback" in r.stderr and "RuntimeError" in r.stderr


def test_link_flag_errors_name_the_flag():
    base = ("predict", "--arch", "allreduce-cluster", "--gpus", "16", "--flops", "1e12",
            "--mem-bytes", "1e9", "--weight-bytes", "1e8")
    r = tc(*base, "--nic", "-5Gbit")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "speed must be positive" in r.stderr and "(--nic)" in r.stderr
    assert "unknown link" not in r.stderr
    r = tc(*base, "--pcie", "0GB/s")
    assert r.returncode == 2 and "speed must be positive" in r.stderr and "(--pcie)" in r.stderr
    r = tc(*base, "--intra", "no-such-link")
    assert r.returncode == 2 and "unknown link" in r.stderr and "(--intra)" in r.stderr
    # nan and inf are no link names: numbers that are not finite, said so
    for speed in ("nanGbit", "infGbit", "-InfGB/s"):
        r = tc(*base, "--nic", speed)
        assert r.returncode == 2 and "not a finite number" in r.stderr, speed
    # a huge speed is said in few digits, not 300
    r = tc(*base, "--nic", "1e308Gbit")
    assert r.returncode == 2 and "1.25e+307 GB/s" in r.stderr and len(r.stderr) < 400


def test_a_job_without_work_has_no_bottleneck():
    from traincast.model import Breakdown

    nan = float("nan")
    bd = Breakdown(data_io=np.array([0.0, 0.0, 1.0]), compute_flop=np.array([0.0, nan, 2.0]),
                   compute_mem=np.array([0.0, 0.0, 0.5]), comm=np.array([0.0, 0.0, 0.0]),
                   total=np.array([0.0, nan, 3.5]))
    assert bd.bottleneck_code().tolist() == [-1, -1, 1]  # none, unknown, FLOP-bound compute
    r = tc("predict", "--flops", "0", "--mem-bytes", "0", "--weight-bytes", "0")
    assert r.returncode == 0, r.stderr
    assert "Bottleneck: none" in r.stdout and "data I/O" not in r.stdout.split("Bottleneck")[1]
    r = tc("predict", "--flops", "0", "--mem-bytes", "0", "--weight-bytes", "0", "--json")
    out = json.loads(r.stdout)
    assert out["bottleneck"] is None and out["bottleneck_label"] is None


def test_a_job_that_does_not_fit_says_so(tmp_path):
    # 10 + 10 + 20 + 10 GB = 50 GB per GPU on a 16 GB V100; 5 GB fits
    feats = {"flops_compute_bound": 1e12, "bytes_memory_bound": 1e9, "weight_bytes": 1e8,
             "input_bytes": 0}
    big, small = tmp_path / "big.json", tmp_path / "small.json"
    big.write_text(json.dumps({**feats, "memory_bytes": {
        "weights": 1e10, "grads": 1e10, "optimizer": 2e10, "activations": 1e10}}))
    small.write_text(json.dumps({**feats, "memory_bytes": {
        "weights": 1e9, "grads": 1e9, "optimizer": 2e9, "activations": 1e9}}))
    r = tc("predict", "--features", str(big), "--gpu", "V100")
    assert r.returncode == 0, r.stderr
    assert "Does not fit: 50 GB per GPU of 16 GB" in " ".join(r.stdout.split())
    r = tc("predict", "--features", str(small), "--gpu", "V100")
    assert r.returncode == 0, r.stderr
    assert "Does not fit" not in r.stdout


def test_hybrid_size_and_dtype_errors_are_clean():
    r = tc("predict", "--arch", "hybrid", "--model", "zoo:gpt2", "--dp", "0")
    assert r.returncode == 2
    assert "at least 1" in r.stderr
    assert "Warning" not in r.stderr and "Traceback" not in r.stderr
    r = tc("predict", "--arch", "hybrid", "--model", "zoo:gpt2", "--gpu", "K80", "--node",
           "pai-misc", "--dtype", "bf16")
    assert r.returncode == 2
    hint = r.stderr.split("hint:")[1]
    assert "fp32" in hint and "bf16" not in hint and "fp16" not in hint  # a K80 has fp32 only


def _hardware_at_80_columns(*args: str) -> str:
    from typer.testing import CliRunner

    from traincast.cli import app

    res = CliRunner().invoke(app, ["hardware", *args], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    return res.output


def test_hardware_list_fits_80_columns_without_truncated_cells():
    out = _hardware_at_80_columns("list")
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    # rich marks a cut cell with "…": no word of the tables may end in it
    assert not [w for line in lines for w in line.split() if w.endswith("…")]
    for name in ("V100-SXM2-16GB", "V100-SXM2-32GB", "pai-v100m32-nvlink", "MI250X-GCD",
                 "infinity-fabric-mi250x-cpu", "A100-PCIE-80GB"):
        assert name in out, name  # whole, on one line


def test_hardware_show_prints_only_set_fields_grouped_with_units_and_sources():
    out = _hardware_at_80_columns("show", "V100")
    assert "()" not in out and "{}" not in out
    assert not re.search(r"\s0\.0(\s|$)", out)  # no bare zero of an unset field
    assert "thread_" not in out and "gemm_intensity" not in out
    lines = out.splitlines()
    heads = [i for i, line in enumerate(lines) if line.strip() == "datasheet"]
    assert heads, out
    assert "fitted: measured-kernel model (docs/model.md)" in (line.strip() for line in lines)
    assert "floor_us" in out and "simt_efficiency" in out
    body = "\n".join(lines[heads[0]:])
    assert "15.7 TFLOP/s" in body and "900 GB/s" in body and "1530 MHz" in body
    assert "6 MB" in body and "300 W" in body
    assert "Table 1" in body  # the whitepaper citation beside sms / clocks
    a100 = _hardware_at_80_columns("show", "A100-SXM4-80GB")
    assert "fitted" in (line.strip() for line in a100.splitlines())
    assert "gemm_max_fraction" in a100 and "bf16 0.869" in a100


def test_hardware_show_json_keeps_every_field():
    out = json.loads(_hardware_at_80_columns("show", "V100", "--json"))
    from traincast import kernels

    assert out["gemm_intensity"] == [] and out["l2_mb"] == 6
    assert set(kernels.FITTED_KEYS) <= set(out["kernel"])


def test_hardware_show_prices_a_gpu_without_measurements_by_hand():
    """L4 (72 W, 58 SMs x 128 lanes, 2040 MHz, 4 nm, 300 GB/s) is in no fit: what the
    measured-kernel model takes for it, recomputed from the datasheet and the shipped
    parameters (docs/model.md formulas)."""
    from traincast.hardware.catalog import load_catalog

    params = load_catalog().kernel_model["params"]
    fig = json.loads(_hardware_at_80_columns("show", "L4", "--json"))["kernel_model"]
    p = 72 / (58 * 128 * 2.040 * 4)
    c = min(1.0, p / params["power_ref"])
    assert fig["power_w_per_lane_ghz_nm"] == pytest.approx(p, rel=1e-9)
    assert c < 0.6 and fig["clock_fraction"] == pytest.approx(c, rel=1e-9)
    assert fig["sustained_clock_mhz"] == pytest.approx(2040 * c, rel=1e-9)
    rate = 2 * 58 * 128 * 2040e6 * c * params["simt_efficiency"]
    assert fig["simt_tflops"] == pytest.approx(rate / 1e12, rel=1e-9)
    assert fig["peak_fraction"] == pytest.approx(rate / 30.3e12, rel=1e-9)
    assert fig["issue_slots"] == 1.0  # 128 lanes / 4 partitions = 32: one slot per FFMA
    e64 = 1 / (1 + params["c_issue"] * 128 / 64**2)
    assert fig["tile_efficiency"]["64x64"] == pytest.approx(e64, rel=1e-9)
    assert fig["memory_gbs"]["norm"] == pytest.approx(300 * params["f_norm"], rel=1e-9)
    e128 = 1 / (1 + params["c_issue"] * 256 / 128**2)  # the best tile on one slot per FFMA
    eta = rate * e128 / (params["choice_linear"] * 30.3e12)
    assert fig["gemm_fraction"] == pytest.approx(eta, rel=1e-9)
    shown = json.loads(_hardware_at_80_columns("show", "L4", "--json"))["compute"]
    assert shown["fp32_tflops"] == pytest.approx(30.3 * eta, rel=1e-9)
    assert shown["fp32_mem_gbs"] == pytest.approx(300 * params["f_elementwise"], rel=1e-9)
    assert shown["inputs"]["fp32 products"].startswith(f"{eta:.3f} of the fp32 peak")
    out = _hardware_at_80_columns("show", "L4")
    assert max(len(line) for line in out.splitlines()) <= 80
    assert f"{2040 * c:.0f} MHz" in out and f"R = {rate / 1e12:.3g} TFLOP/s" in out
    assert f"eta = {eta:.3f}: {30.3 * eta:.3g} TFLOP/s" in out
    # one parameter per row, each with what it is: no wrapped blob of the kernel table
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("simt_efficiency"))
    assert f"{params['simt_efficiency']:.4g}" in line and "FMA rate" in line
    assert "{" not in out and "dispatch_linear" not in out and "linear 2.19" in out
    assert "L4 is not among the GPUs the kernel model was fitted to" in " ".join(out.split())


def test_a_prediction_from_aggregate_features_says_it_is_a_lower_bound(tmp_path) -> None:
    """Aggregate features priced by the kernel strategy: the output says what that leaves out
    and how to get the op-by-op time from where the features came; a per-op prediction and
    the paper's strategy say nothing of it."""
    env = {**os.environ, "COLUMNS": "200"}

    def run(*args: str) -> str:
        r = subprocess.run([sys.executable, "-c", "from traincast.cli import main; main()",
                            "predict", *args], capture_output=True, text=True, timeout=300,
                           env=env)
        assert r.returncode == 0, r.stderr
        return " ".join(r.stdout.split())

    flags = ("--flops", "1e12", "--mem-bytes", "1e9", "--weight-bytes", "1e8", "--gpu", "L4")
    text = run(*flags)
    assert "a lower bound of the op-by-op time" in text
    assert "Profile the model (traincast profile MODEL -o FILE) for the op-by-op time" in text
    assert "per-op table" not in text and "--aggregate)" not in text  # nothing was profiled
    assert "lower bound of the op-by-op" not in run(*flags, "--compute", "paper")
    profile = tmp_path / "mlp.json"
    profile.write_text(json.dumps({"flops_compute_bound": 1e12, "bytes_memory_bound": 1e9,
                                   "weight_bytes": 1e8}))
    text = run("--features", str(profile), "--gpu", "L4")
    assert "these features have no per-op table: traincast profile MODEL -o FILE writes one" \
        in text
    assert "Write the profile with -o FILE (it keeps the per-op table) for the op-by-op" in text
    text = run("--model", "zoo:gcn", "--aggregate", "--gpu", "L4")
    assert "Leave out --aggregate for the op-by-op time" in text and "--aggregate)" in text
    text = run("--model", "zoo:gcn", "--gpu", "L4")
    assert "compute priced op by op" in text and "lower bound of the op-by-op" not in text
    assert "op by op, the measured-kernel model" in text


def test_a_paper_step_shorter_than_the_hosts_issue_of_its_ops_is_flagged(tmp_path):
    # 200 tiny ops: the paper's flat peak prices them in nanoseconds; the host issues each at
    # the kernel model's floor d: a calibrated host's 10 µs here, 200 x 10 µs = 2 ms
    op = {"op": "add", "phase": "forward", "flops": 0, "bytes_read": 8, "bytes_written": 4,
          "bound": "memory", "dtype": "float32", "shapes": "1"}
    feats = {"flops_compute_bound": 0, "bytes_memory_bound": 2400, "weight_bytes": 4,
             "ops": [op] * 200}
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(feats))
    host = tmp_path / "host.toml"
    host.write_text('[kernel_model]\nhost_floor_us = 10\nhost_floor_source = "test"\n')
    r = tc("predict", "--features", str(path), "--gpu", "B200", "--compute", "paper", "--json",
           "--catalog", str(host))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["host_issue_s"] == pytest.approx(2e-3)
    assert out["time_s"]["total"] < out["host_issue_s"]
    r = tc("predict", "--features", str(path), "--gpu", "B200", "--compute", "paper")
    said = " ".join(r.stdout.split())
    assert "caution: the paper strategy does not charge the host's issue" in said
    assert "--compute kernel prices it" in said
    r = tc("predict", "--features", str(path), "--gpu", "B200")  # auto: the kernel model
    assert r.returncode == 0 and "caution" not in r.stdout


def test_predict_names_misaligned_products_on_hopper_only(tmp_path):
    # a bf16 logits product with GPT-2's odd vocabulary (4096 tokens x 1600 -> 50257) beside an
    # aligned one of the same FLOPs order: the odd one is named, with its 2-byte slowdown
    def mm(m: int, k: int, n: int) -> dict:
        return {"op": "mm", "phase": "forward", "flops": 2.0 * m * n * k,
                "bytes_read": 2.0 * (m * k + k * n), "bytes_written": 2.0 * m * n,
                "bound": "compute", "dtype": "bfloat16", "shapes": f"{m}x{k};{k}x{n}"}
    ops = [mm(4096, 1600, 50257), mm(4096, 1600, 6400)]
    feats = {"flops_compute_bound": sum(o["flops"] for o in ops),
             "bytes_memory_bound": 0, "weight_bytes": 2.0 * 1600 * 56657, "amp": True,
             "ops": ops}
    path = tmp_path / "logits.json"
    path.write_text(json.dumps(feats))
    r = tc("predict", "--features", str(path), "--gpu", "H100-SXM5-80GB", "--json")
    assert r.returncode == 0, r.stderr
    bad = json.loads(r.stdout)["misaligned"]
    share = 50257 / (50257 + 6400)  # the odd product's part of the FLOPs, by hand
    assert bad["products"] == 1 and bad["flop_share"] == pytest.approx(share)
    assert bad["largest"]["shape"] == "4096 x 50257 x 1600" and bad["largest"]["slowdown"] > 6
    said = " ".join(tc("predict", "--features", str(path), "--gpu", "H100-SXM5-80GB")
                    .stdout.split())
    assert "misaligned: 1 matrix product(s) per step" in said and "multiple of 64" in said
    assert f"up to {bad['slowdown_max']:.3g}x slower" in said
    a100 = tc("predict", "--features", str(path), "--gpu", "A100-SXM4-80GB", "--json")
    assert a100.returncode == 0 and json.loads(a100.stdout)["misaligned"] is None
    # not priced op by op under the kernel strategy: the key is there, null
    paper = tc("predict", "--features", str(path), "--gpu", "H100-SXM5-80GB", "--compute",
               "paper", "--json")
    assert paper.returncode == 0 and json.loads(paper.stdout)["misaligned"] is None


def test_predict_says_when_a_gpu_entry_leaves_fp32_unthrottled(tc, tmp_path) -> None:
    # the SIMT model holds fp32 to the power limit by power_w and process_nm; an entry without
    # one runs at its boost clock (kernels.sustained_clock_fraction): predict says so
    cat = tmp_path / "c.toml"
    cat.write_text('[gpu.MyL4]\nsource = "L4 without process_nm"\n[gpu.MyL4.datasheet]\n'
                   "fp32_tflops = 30.3\nfp16_tflops = 121\nbf16_tflops = 121\n"
                   "mem_bw_gbs = 300\nmem_gb = 24\nsms = 58\nfp32_cores_per_sm = 128\n"
                   "boost_clock_mhz = 2040\npower_w = 72\n")
    args = ["predict", "--node", "l4-pcie", "--flops", "1e13", "--mem-bytes", "1e11",
            "--weight-bytes", "1e8"]
    run = tc(*args, "--catalog", str(cat), "--gpu", "MyL4")
    assert run.returncode == 0, run.stderr
    assert "fp32 on MyL4 at its boost clock, not held to a power limit: the entry gives no " \
        "process_nm" in " ".join(run.stdout.split())
    run = tc(*args, "--gpu", "L4", "--json")
    assert json.loads(run.stdout)["hardware"]["fp32_unthrottled_by"] == []
    run = tc(*args, "--catalog", str(cat), "--gpu", "MyL4", "--json")
    assert json.loads(run.stdout)["hardware"]["fp32_unthrottled_by"] == ["process_nm"]


def test_predict_says_when_a_gpu_entry_leaves_tf32_convolutions_unpriced(tc, tmp_path) -> None:
    # cuDNN runs fp32 convolutions as TF32 from compute capability 8.0; an entry of such a GPU
    # without tf32_tflops prices them at the fp32 peak: predict says so, and adding the peak
    # (an A100's 156 TFLOP/s) makes the same convolution faster
    conv = {"op": "convolution", "phase": "forward", "flops": 2.0 * 64 * 56 * 56 * 64 * 64 * 9,
            "bytes_read": 4.0 * (64 * 64 * 56 * 56 + 64 * 64 * 9),
            "bytes_written": 4.0 * 64 * 64 * 56 * 56, "bound": "compute", "dtype": "float32",
            "shapes": "64x64x56x56;64x64x3x3"}
    feats = {"flops_compute_bound": conv["flops"], "bytes_memory_bound": 0,
             "weight_bytes": 4.0 * 64 * 64 * 9, "ops": [conv]}
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(feats))
    entry = ('[gpu.NewAmpere]\nsource = "an A100 PCIe datasheet{}"\n[gpu.NewAmpere.datasheet]\n'
             "fp32_tflops = 19.5\nbf16_tflops = 312\nfp16_tflops = 312\nmem_bw_gbs = 1935\n"
             "mem_gb = 80\nsms = 108\nfp32_cores_per_sm = 64\nboost_clock_mhz = 1410\n"
             "power_w = 300\nprocess_nm = 7\ncompute_capability = 8.0\n{}")
    without, with_tf32 = tmp_path / "a.toml", tmp_path / "b.toml"
    without.write_text(entry.format(" without its TF32 peak", ""))
    with_tf32.write_text(entry.format("", "tf32_tflops = 156\n"))
    args = ["predict", "--features", str(path), "--gpu", "NewAmpere", "--node", "dgx-a100"]
    run = tc(*args, "--catalog", str(without))
    assert run.returncode == 0, run.stderr
    assert "assumed: TF32 ops on NewAmpere (fp32 convolutions, which cuDNN runs as TF32 by " \
        "default, and --tf32-matmul products) at its fp32 peak: the entry gives no " \
        "tf32_tflops" in " ".join(run.stdout.split())
    slow = json.loads(tc(*args, "--catalog", str(without), "--json").stdout)
    fast = json.loads(tc(*args, "--catalog", str(with_tf32), "--json").stdout)
    assert slow["tf32_unpriced"] is True and fast["tf32_unpriced"] is None
    assert fast["time_s"]["compute_flop"] < slow["time_s"]["compute_flop"] / 2
    amp = json.loads(tc(*args, "--catalog", str(without), "--amp", "--json").stdout)
    assert amp["tf32_unpriced"] is False  # an --amp job's convolutions run in fp16
    conv16 = tmp_path / "conv16.json"
    conv16.write_text(json.dumps({**feats, "ops": [{**conv, "dtype": "bfloat16"}]}))
    run = tc("predict", "--features", str(conv16), "--gpu", "NewAmpere", "--node", "dgx-a100",
             "--catalog", str(without), "--json")
    assert json.loads(run.stdout)["tf32_unpriced"] is False  # no fp32 convolution to price
    # a product marked TF32 (--tf32-matmul) asks for the same peak
    mm = {"op": "mm", "phase": "forward", "flops": 2.0 * 512 ** 3, "bytes_read": 8.0 * 512 ** 2,
          "bytes_written": 4.0 * 512 ** 2, "bound": "compute", "dtype": "float32",
          "shapes": "512x512;512x512"}
    products = tmp_path / "mm.json"
    products.write_text(json.dumps({**feats, "flops_compute_bound": mm["flops"], "ops": [mm]}))
    run = tc("predict", "--features", str(products), "--gpu", "NewAmpere", "--node",
             "dgx-a100", "--catalog", str(without), "--json", "--tf32-matmul")
    assert json.loads(run.stdout)["tf32_unpriced"] is True
    run = tc("predict", "--features", str(products), "--gpu", "NewAmpere", "--node",
             "dgx-a100", "--catalog", str(without), "--json")
    assert json.loads(run.stdout)["tf32_unpriced"] is False  # fp32 products stay fp32


def test_predict_says_when_tf32_or_amp_cannot_act_as_asked(tc, tmp_path) -> None:
    # --tf32-matmul on a GPU without TF32 tensor cores (V100, compute capability 7.0) prices
    # the products at the fp32 peak, exactly as without the flag, and says so; on an A100 it
    # speeds them up and says nothing
    mm = {"op": "mm", "phase": "forward", "flops": 2.0 * 2048 ** 3,
          "bytes_read": 8.0 * 2048 ** 2, "bytes_written": 4.0 * 2048 ** 2,
          "bound": "compute", "dtype": "float32", "shapes": "2048x2048;2048x2048"}
    path = tmp_path / "mm.json"
    path.write_text(json.dumps({"flops_compute_bound": mm["flops"], "bytes_memory_bound": 0,
                                "weight_bytes": 4.0 * 2048 ** 2, "amp": False, "ops": [mm]}))
    base = ["predict", "--features", str(path)]
    said = "--tf32-matmul changes nothing on V100-SXM2-16GB: its entry gives no TF32 peak"
    v100 = [*base, "--gpu", "V100-SXM2-16GB"]
    run = tc(*v100, "--tf32-matmul")
    assert run.returncode == 0, run.stderr
    assert said in " ".join(run.stdout.split())
    asked = json.loads(tc(*v100, "--tf32-matmul", "--json").stdout)
    plain = json.loads(tc(*v100, "--json").stdout)
    assert asked["setup"]["tf32_matmul_no_effect"] is True
    assert asked["setup"]["tf32_matmul_why"] == "gpu"
    assert asked["time_s"]["total"] == plain["time_s"]["total"]
    assert plain["setup"]["tf32_matmul_no_effect"] is False  # not asked: nothing to say
    rtx = [*base, "--gpu", "RTX-4090"]  # TF32 peak = FP32 peak: priced as fp32, said
    asked = json.loads(tc(*rtx, "--tf32-matmul", "--json").stdout)
    assert asked["setup"]["tf32_matmul_why"] == "no faster"
    assert asked["time_s"]["total"] == json.loads(tc(*rtx, "--json").stdout)["time_s"]["total"]
    assert ("--tf32-matmul changes nothing on RTX-4090: its TF32 tensor-core peak is no higher "
            "than its FP32 one") in " ".join(tc(*rtx, "--tf32-matmul").stdout.split())
    a100 = [*base, "--gpu", "A100-SXM4-80GB", "--tf32-matmul"]
    assert "changes nothing" not in tc(*a100).stdout
    took = json.loads(tc(*a100, "--json").stdout)["setup"]
    assert took["tf32_matmul_no_effect"] is False and took["tf32_matmul_why"] is None
    # under --amp the products run in 16 bits: the flag changes nothing on an A100 either
    amp_a100 = json.loads(tc(*a100, "--amp", "--json").stdout)
    assert amp_a100["setup"]["tf32_matmul_why"] == "no fp32 products"
    assert amp_a100["time_s"]["total"] == json.loads(tc(
        *base, "--gpu", "A100-SXM4-80GB", "--amp", "--json").stdout)["time_s"]["total"]
    # --amp on a table recorded without autocast: priced, with what stays fp32 said
    run = tc(*v100, "--amp")
    assert "assumed: --amp on a profile recorded without autocast" in " ".join(
        run.stdout.split())
    assert json.loads(tc(*v100, "--amp", "--json").stdout)["setup"]["amp_unprofiled"] is True
    # not said of a table recorded under autocast, of a whole-fp16 model (dtype float16,
    # "amp": false) nor on a GPU that runs --amp in fp32 (no 16-bit peak: said otherwise)
    for name, record in (("amp.json", {"amp": True, "dtype": "float16"}),
                         ("half.json", {"amp": False, "dtype": "float16"})):
        recorded = tmp_path / name
        recorded.write_text(json.dumps({**json.loads(path.read_text()), **record,
                                        "ops": [{**mm, "dtype": "float16"}]}))
        run = tc("predict", "--features", str(recorded), "--gpu", "V100-SXM2-16GB", "--amp",
                 "--json")
        assert json.loads(run.stdout)["setup"]["amp_unprofiled"] is False, name
    k80 = json.loads(tc(*base, "--gpu", "K80", "--amp", "--json").stdout)
    assert k80["hardware"]["amp_dtype"] == "fp32" and k80["setup"]["amp_unprofiled"] is False
    # under --amp on a V100 the reason is the 16-bit products, not the GPU
    run = json.loads(tc(*v100, "--amp", "--tf32-matmul", "--json").stdout)
    assert run["setup"]["tf32_matmul_why"] == "no fp32 products"
    # a features file's own notes are printed as lines, whatever they hold
    for notes, said in (("hand made", ["note: hand made"]), ([1, None, "x"], ["note: 1",
                                                                              "note: x"])):
        noted = tmp_path / "noted.json"
        noted.write_text(json.dumps({**json.loads(path.read_text()), "notes": notes}))
        run = tc("predict", "--features", str(noted), "--gpu", "V100-SXM2-16GB")
        assert run.returncode == 0, run.stderr
        assert [ln for ln in run.stdout.splitlines() if ln.startswith("note: ")] == said


def test_predict_says_whose_links_a_gpu_without_a_node_takes(tc, tmp_path) -> None:
    cat = tmp_path / "c.toml"
    cat.write_text('[gpu.Lone]\nsource = "t"\n[gpu.Lone.datasheet]\nfp32_tflops = 19.5\n'
                   "mem_bw_gbs = 1935\nmem_gb = 80\n")
    args = ["predict", "--flops", "1e13", "--mem-bytes", "1e11", "--weight-bytes", "1e8",
            "--arch", "allreduce-cluster", "--gpus", "16", "--catalog", str(cat), "--gpu", "Lone"]
    run = tc(*args)
    assert run.returncode == 0, run.stderr
    assert "no node preset of the catalog holds Lone: its links are pai-v100-nvlink's" in \
        " ".join(run.stdout.split())
    assert json.loads(tc(*args, "--json").stdout)["hardware"]["node_assumed"] is True
    named = json.loads(tc(*args, "--node", "dgx-a100", "--json").stdout)
    assert named["hardware"]["node_assumed"] is False and named["hardware"]["node"] == "dgx-a100"


def test_predict_says_a_link_that_was_not_measured(tc, tmp_path) -> None:
    # as calibrate --no-comm writes it: the memcpy bandwidth stands in for a link's figure
    stood = ('[link.stood]\nbw_gbs = 10.0\nstand_in = true\n'
             'source = "not measured (--no-comm); memcpy bandwidth"\n')
    cat = tmp_path / "c.toml"
    cat.write_text(stood + '[node.box]\ngpu = "V100-SXM2-16GB"\ngpus = 4\npcie = "pcie3x16"\n'
                   'intra = "stood"\nnic = "eth25"\n'
                   '[node.nvl]\ngpu = "V100-SXM2-16GB"\ngpus = 4\npcie = "pcie3x16"\n'
                   'intra = "nvlink2-v100"\nnic = "stood"\n')
    args = ["predict", "--flops", "1e12", "--mem-bytes", "1e9", "--weight-bytes", "1e9",
            "--catalog", str(cat), "--compute", "paper"]

    def said(*more: str) -> dict:
        return json.loads(tc(*args, *more, "--json").stdout)

    out = said("--node", "box", "--arch", "allreduce-local", "--gpus", "4")
    assert out["hardware"]["links_stand_in"] == {
        "stood": "not measured (--no-comm); memcpy bandwidth"}
    # priced over the stand-in all the same: ring 2 (n-1)/n W / bw = 1.5e9 / 10e9
    assert out["time_s"]["comm"] == pytest.approx(2 * 3 / 4 * 1e9 / 10e9, rel=1e-9)
    run = tc(*args, "--node", "box", "--arch", "allreduce-local", "--gpus", "4")
    assert "assumed: link stood is a stand-in (not measured (--no-comm); memcpy bandwidth)" \
        in " ".join(run.stdout.split())
    # a job that does not communicate over it is not told: one GPU, or a ring inside a node
    # whose NVLink is measured while its NIC stands in
    assert said("--node", "box", "--arch", "1w1g")["hardware"]["links_stand_in"] == {}
    assert said("--node", "nvl", "--arch", "allreduce-local", "--gpus", "4")["hardware"][
        "links_stand_in"] == {}
    assert "stand-in" not in tc(*args, "--node", "nvl", "--arch", "allreduce-local",
                                "--gpus", "4").stdout
    # across two nodes the flat ring runs at the stand-in NIC: told
    assert said("--node", "nvl", "--arch", "allreduce-cluster", "--gpus", "8")["hardware"][
        "links_stand_in"] == {"stood": "not measured (--no-comm); memcpy bandwidth"}
    # the hybrid model alike: data parallelism in one node, then over two
    hybrid = ["predict", "--arch", "hybrid", "--model", "zoo:gpt2", "--dtype", "fp16",
              "--catalog", str(cat), "--node", "nvl", "--json"]
    one = json.loads(tc(*hybrid, "--dp", "4").stdout)
    two = json.loads(tc(*hybrid, "--dp", "8").stdout)
    assert one["hardware"]["links_stand_in"] == {} and one["time_s"]["comm"] > 0
    assert list(two["hardware"]["links_stand_in"]) == ["stood"]
    # a later file that gives the link a figure of its own clears the stand-in
    measured = tmp_path / "m.toml"
    measured.write_text('[link.stood]\nbw_gbs = 40.0\nsource = "measured"\n')
    later = json.loads(tc(*args, "--catalog", str(measured), "--node", "box", "--arch",
                          "allreduce-local", "--gpus", "4", "--json").stdout)
    assert later["hardware"]["links_stand_in"] == {}
    assert later["time_s"]["comm"] == pytest.approx(2 * 3 / 4 * 1e9 / 40e9, rel=1e-9)
    # hardware show writes the flag as the catalog file does
    shown = tc("hardware", "show", "stood", "--catalog", str(cat)).stdout
    assert re.search(r"stand_in\s+true\b", shown)
    bad = tmp_path / "bad.toml"
    bad.write_text('[link.stood]\nbw_gbs = 10.0\nstand_in = 1\n')
    run = tc("predict", "--flops", "1e12", "--mem-bytes", "1e9", "--catalog", str(bad))
    assert run.returncode == 2 and "key 'stand_in' must be true or false" in run.stderr


def test_hardware_show_lists_only_what_the_gpus_strategy_prices_with(tc) -> None:
    # the paper-2019 V100 is priced at flat peaks: its entry lists no kernel-model parameters
    # or defaults (tiles, floors) that its forecasts never use; an A100's does
    flat = tc("hardware", "show", "V100-paper-2019")
    said = " ".join(flat.stdout.split())
    assert flat.returncode == 0, flat.stderr
    assert "the measured-kernel model does not price V100-paper-2019" in said
    assert "simt_efficiency" not in said and "per-op floor:" not in said
    inputs = json.loads(tc("hardware", "show", "V100-paper-2019", "--json").stdout)["compute"]
    assert inputs["strategy"] == "paper" and list(inputs["inputs"]) == ["rates"]
    assert inputs["fp32_tflops"] == pytest.approx(11.0)  # the paper's effective rate, flat
    a100 = " ".join(tc("hardware", "show", "A100-SXM4-80GB").stdout.split())
    assert "simt_efficiency" in a100 and "per-op floor:" in a100


def test_a_speeds_unit_counts_bits_with_a_small_b_and_bytes_with_a_capital_b() -> None:
    # SI symbols: b is the bit, B the byte; 100 Gbit/s = 12.5 GB/s however it is written
    from traincast.units import parse_speed_gbs

    for bits in ("100Gbit", "100Gb/s", "100Gbps", "100gbps", "100GBIT/s",
                 "100000Mbit", "100000Mbps"):
        assert parse_speed_gbs(bits) == pytest.approx(12.5), bits
    for byte_text in ("12.5GB/s", "12.5GBps", "12.5GBs", "12500MB/s"):
        assert parse_speed_gbs(byte_text) == pytest.approx(12.5), byte_text
    assert parse_speed_gbs("eth100") is None
    for unclear in ("100 gb/s", "12.5gbs", "800mb/s"):  # bits or bytes: asked, not guessed
        with pytest.raises(TraincastError, match="bits or bytes"):
            parse_speed_gbs(unclear)


def test_predict_says_when_memory_goes_unchecked(tc, tmp_path) -> None:
    # a profile's footprint against a GPU entry without mem_gb: the footprint is still given,
    # with no capacity and no verdict, and predict says it did not check
    mem = {"weights": 4e8, "grads": 4e8, "optimizer": 8e8, "activations": 2e9}
    feats = {"flops_compute_bound": 1e12, "bytes_memory_bound": 1e10, "weight_bytes": 4e8,
             "params": 1e8, "memory_bytes": mem}
    path = tmp_path / "f.json"
    path.write_text(json.dumps(feats))
    cat = tmp_path / "c.toml"
    cat.write_text('[gpu.NoMem]\nsource = "t"\n[gpu.NoMem.datasheet]\nfp32_tflops = 19.5\n'
                   "mem_bw_gbs = 1935\n")
    args = ["predict", "--features", str(path), "--gpu", "NoMem", "--node", "dgx-a100",
            "--catalog", str(cat)]
    out = json.loads(tc(*args, "--json").stdout)["memory"]
    assert out == {"footprint_gb": pytest.approx(3.6), "state_gb": pytest.approx(1.6),
                   "capacity_gb": None, "fits": None}
    said = " ".join(tc(*args).stdout.split())
    assert "memory not checked on NoMem: the catalog entry gives no mem_gb (the job needs " \
        "3.6 GB per GPU" in said
    a100 = json.loads(tc("predict", "--features", str(path), "--node", "dgx-a100",
                         "--json").stdout)["memory"]
    assert a100["capacity_gb"] == 80 and a100["fits"] is True


def test_predict_says_when_amp_runs_at_fp32(tc) -> None:
    # a K80 has no fp16 or bf16 peak: --amp is priced as fp32, and predict says so
    args = ["predict", "--flops", "1e13", "--mem-bytes", "1e10", "--weight-bytes", "1e8",
            "--amp"]
    k80 = tc(*args, "--gpu", "K80")
    assert "assumed: --amp on K80, whose entry gives no fp16 or bf16 peak" in \
        " ".join(k80.stdout.split())
    assert json.loads(tc(*args, "--gpu", "K80", "--json").stdout)["hardware"]["amp_dtype"] \
        == "fp32"
    v100 = tc(*args, "--gpu", "V100", "--json")
    assert json.loads(v100.stdout)["hardware"]["amp_dtype"] == "fp16"
    assert "assumed: --amp" not in tc(*args, "--gpu", "V100").stdout


def test_compute_curves_on_a_gpu_without_curves_says_what_prices_it(tc):
    """--compute curves on a GPU the catalog has no measured curves for (T4) is priced at its
    flat peak (the paper strategy): predict says so, and which flag gives the default."""
    job = ("--flops", "1e12", "--mem-bytes", "1e9", "--weight-bytes", "1e8", "--gpu", "T4")
    r = tc("predict", *job, "--compute", "curves")
    text = " ".join(r.stdout.split())
    assert r.returncode == 0
    assert "assumed: --compute curves, but T4 has no measured curves" in text
    assert "priced by the paper strategy" in text
    assert "no measured curves" not in " ".join(tc("predict", *job).stdout.split())
    assert json.loads(tc("predict", *job, "--compute", "curves", "--json").stdout)[
        "hardware"]["compute"] == "paper"


def test_a_model_state_beyond_the_gpu_is_not_told_to_shrink_its_batch(tc, tmp_path):
    """Weights 6 + gradients 6 + Adam state 12 = 24 GB on a 16 GB T4: no batch size fits it,
    and the hint says so (state_gb in --json); 2 GB of state and 20 GB of activations: a
    smaller batch is the hint."""
    def run(parts: dict) -> tuple[str, dict]:
        path = tmp_path / "f.json"
        path.write_text(json.dumps({"flops_compute_bound": 1e12, "bytes_memory_bound": 1e9,
                                    "weight_bytes": 6e9, "memory_bytes": parts}))
        text = " ".join(tc("predict", "--features", str(path), "--gpu", "T4").stdout.split())
        out = json.loads(tc("predict", "--features", str(path), "--gpu", "T4",
                            "--json").stdout)
        return text, out["memory"]

    text, mem = run({"weights": 6e9, "grads": 6e9, "optimizer": 12e9, "activations": 1e9})
    assert mem["state_gb"] == pytest.approx(24.0) and mem["footprint_gb"] == pytest.approx(25.0)
    assert "Does not fit: 25 GB per GPU of 16 GB" in text
    assert "alone take 24 GB, which no batch size changes" in text and "--batch" not in text
    text, mem = run({"weights": 0.5e9, "grads": 0.5e9, "optimizer": 1e9, "activations": 20e9})
    assert mem["state_gb"] == pytest.approx(2.0)
    assert "profile a smaller --batch" in text


def test_input_bytes_with_synthetic_inputs_is_refused(tc):
    """--synthetic-inputs makes the data on the GPU (input_bytes = 0): --input-bytes beside it
    would be dropped without a word; both is an error naming them."""
    r = tc("predict", "--flops", "1e12", "--mem-bytes", "1e9", "--weight-bytes", "1e8",
           "--input-bytes", "1e9", "--synthetic-inputs")
    assert r.returncode == 2
    assert "--input-bytes and --synthetic-inputs disagree" in r.stderr


def test_amp_on_the_kernel_model_says_its_products_rest_on_a_fraction_not_a_fit(tc, tmp_path):
    """Under --amp the held-out errors cover memory-bound kernels only: predict says what the
    16-bit products rest on, the assumed 0.79 on a T4 (no published figure), the catalog's
    figure on an A100 (MAMF: 0.869 x its 312 TFLOP/s)."""
    from traincast.features.profile import profile_model

    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(profile_model("zoo:gcn", ops=True)))

    def said(gpu: str) -> str:
        r = tc("predict", "--features", str(path), "--gpu", gpu, "--amp")
        assert r.returncode == 0, r.stderr
        return " ".join(r.stdout.split())

    t4 = said("T4")
    assert "Its fp16 products run on matrix units at 0.79 of the dense peak" in t4
    assert "assumed for a GPU without a published figure" in t4
    a100 = said("A100")
    assert "products run on matrix units at 0.87 of the dense peak" in a100
    assert "the catalog cites for it" in a100
    assert "products run on matrix units" not in " ".join(
        tc("predict", "--features", str(path), "--gpu", "T4").stdout.split())


def test_too_many_ranks_on_a_calibrated_node_says_how_to_get_more(tc, tmp_path) -> None:
    # calibrate writes [node.local] gpus = cores / threads: 2 ranks asked of a node of one
    cat = tmp_path / "local.toml"
    cat.write_text('[gpu.local]\nfp32_tflops = 0.1\nmem_bw_gbs = 10\nthreads = 2\n'
                   'device = "cpu"\nsource = "t"\n[link.lh]\nbw_gbs = 5\n[node.local]\n'
                   'gpu = "local"\ngpus = 1\npcie = "lh"\nintra = "lh"\nnic = "lh"\n')
    args = ["predict", "--catalog", str(cat), "--node", "local", "--arch", "allreduce-local",
            "--gpus", "2", "--flops", "1e9", "--mem-bytes", "1e8", "--weight-bytes", "1e6"]
    run = tc(*args)
    said = " ".join(run.stderr.split())
    assert run.returncode == 2 and "n_gpus = 2 (--gpus) > the 1 GPUs of node 'local'" in said
    assert "1 local rank(s) of 2 thread(s) each" in said and "calibrate --threads 1" in said
    # calibrated at one thread: a rank per core already, no calibrate --threads 1 to give
    cat.write_text(cat.read_text().replace("threads = 2", "threads = 1"))
    said = " ".join(tc(*args).stderr.split())
    assert "1 local rank(s) of 1 thread(s) each" in said and "one per core already" in said
    assert "--threads 1" not in said
    # a datasheet node keeps the plain hint
    run = tc("predict", "--node", "dgx-a100", "--arch", "allreduce-local", "--gpus", "16",
             "--flops", "1e9", "--mem-bytes", "1e8", "--weight-bytes", "1e6")
    assert run.returncode == 2 and "a node preset with more GPUs" in run.stderr
