"""The default global batch that ``plan`` and ``predict --arch hybrid`` share, the pipeline
bubble ``predict`` reports and warns about, and what ``plan`` prints about its table."""

from __future__ import annotations

import json
import re
import shlex

import numpy as np
import pytest
from typer.testing import CliRunner

from traincast.cli import app
from traincast.parallel.hybrid import (
    bubble_warning,
    default_global_batch,
    evaluate,
    hybrid_hardware,
)
from traincast.parallel.models import get_model
from traincast.parallel.plan import plan, replan
from traincast.parallel.spot import Resilience

runner = CliRunner()
TOKENS = 4 * 1024 * 1024  # 2^22: Llama 2's 4M tokens per iteration


def cli(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def flat(text: str) -> str:
    """Console output with its line breaks (rich wraps at 80 columns) as spaces."""
    return " ".join(text.split())


# ---- the rule ------------------------------------------------------------------------------

@pytest.mark.parametrize(("seq", "multiple", "want"), [
    (4096, 1, 1024),            # 2^22 / 2^12
    (2048, 1, 2048),
    (3000, 1, 1398),            # 4,194,304 / 3000 = 1398.1
    (4096, 8, 1024),            # 8 divides 1024: unchanged
    (4096, 3, 1023),            # 3 x round(1024 / 3 = 341.3) = 3 x 341
    (4096, 64 * 4, 1024),       # dp 64 x pp 4 (interleaved): 256 x 4
    (2 ** 23, 1, 1),            # round(0.5) = 0 -> at least one sequence
    (2 ** 23, 6, 6),            # at least one multiple
])
def test_default_global_batch_by_hand(seq: int, multiple: int, want: int) -> None:
    assert default_global_batch(seq, multiple) == want
    assert default_global_batch(seq, multiple) % multiple == 0


def test_plan_and_predict_default_to_it() -> None:
    out = plan("zoo:llama2-70b", 64, "dgx-h100", top=1)
    assert out["seq"] == 4096 and out["global_batch"] == TOKENS // 4096 == 1024
    assert out["assumed"]["default"] and out["assumed"]["tokens_per_iteration"] == TOKENS
    given = plan("zoo:llama2-70b", 64, "dgx-h100", top=1, global_batch=512)
    assert given["global_batch"] == 512 and not given["assumed"]["default"]
    assert "(2,097,152 tokens: --global-batch)" in given["assumed"]["text"]

    res = json.loads(cli("predict", "--arch", "hybrid", "--model", "zoo:llama2-70b", "--node",
                         "dgx-h100", "--dp", "8", "--tp", "8", "--pp", "8", "--json"))
    job = res["job"]
    assert job["global_batch"] == 1024 and res["assumed"]["default"]
    assert job["micro_batches"] == 1024 // (8 * 1) == 128
    # 1F1B, p = 8 stages, m = 128 micro-batches: (p - 1) / (m + p - 1) of the pipeline
    assert res["bubble_fraction"] == pytest.approx(7 / 135, rel=1e-12)
    assert res["bubble_share"] == pytest.approx(res["time_s"]["bubble"] / res["time_s"]["total"],
                                                rel=1e-12)
    assert res["bubble_share"] <= res["bubble_fraction"] and res["warnings"] == []


def test_predict_prints_the_assumption_micro_batches_and_bubble_share() -> None:
    args = ("predict", "--arch", "hybrid", "--model", "zoo:llama2-70b", "--node", "dgx-h100",
            "--dp", "8", "--tp", "8", "--pp", "8")
    text = flat(cli(*args))
    res = json.loads(cli(*args, "--json"))
    assert ("assumed: global batch 1024 sequences (4,194,304 tokens: the default, "
            "--global-batch to change)") in text
    assert "assumed: " + res["assumed"]["text"] in text
    assert "128 micro-batches per pipeline (m = B / (dp x micro-batch) = 1024 / (8 x 1))" in text
    share = 100 * res["time_s"]["bubble"] / res["time_s"]["total"]
    assert f"= {share:.1f}% of the step" in text
    assert f"({100 * 7 / 135:.1f}% of the pipeline time" in text
    assert "warning" not in text


def test_a_given_global_batch_is_said_so() -> None:
    text = flat(cli("predict", "--arch", "hybrid", "--model", "zoo:llama2-7b", "--dp", "4",
                    "--global-batch", "64"))
    assert "assumed: global batch 64 sequences (262,144 tokens: --global-batch)" in text
    assert "16 micro-batches per pipeline" in text


def test_default_rounds_to_a_multiple_of_dp_times_micro_batch() -> None:
    # dp 3: 3 x round(1024 / 3) = 1023 sequences, 341 micro-batches (1024 would be refused)
    res = json.loads(cli("predict", "--arch", "hybrid", "--model", "zoo:llama2-7b", "--dp", "3",
                         "--json"))
    assert res["job"]["global_batch"] == 1023 and res["job"]["micro_batches"] == 341


# ---- the bubble warning --------------------------------------------------------------------

def test_bubble_warning_threshold() -> None:
    assert bubble_warning(0.25, 4, 4, 1) == ""            # a quarter is allowed
    text = bubble_warning(0.2501, 4, 4, 1)
    assert "25.0% of the step (over 25%)" in text and "--vp" in text
    assert "--global-batch" in text


def test_bubble_formula_by_hand() -> None:
    """1F1B: bubble = (p - 1) / v micro-batch times, (p - 1) / (v m + p - 1) of the pipeline."""
    cfg = get_model("llama2-7b")
    hw = hybrid_hardware(None, "dgx-a100", "bf16")
    p = np.array([2.0, 4.0, 8.0, 8.0, 4.0])
    m = np.array([64.0, 4.0, 1.0, 16.0, 8.0])
    v = np.array([1.0, 1.0, 1.0, 2.0, 4.0])
    res = evaluate(cfg, hw, dp=1, pp=p, global_batch=m, vp=v)
    assert res["bubble_s"] == pytest.approx((p - 1) / v * res["microbatch_s"], rel=1e-12)
    assert res["bubble_fraction"] == pytest.approx((p - 1) / (v * m + p - 1), rel=1e-12)


@pytest.mark.parametrize(("pp", "gb", "warned"), [
    # p = 8, m = 1: (8 - 1) / (1 + 8 - 1) = 7/8 of the pipeline idles; the rest of the step
    # (optimizer, data, no dp sync at dp = 1) is far smaller than 8 micro-batch times
    (8, 1, True),
    # p = 2, m = 64: 1/65 of the pipeline, so at most 1.5% of the step: no warning
    (2, 64, False),
])
def test_the_warning_appears_when_the_bubble_exceeds_a_quarter(pp: int, gb: int,
                                                               warned: bool) -> None:
    args = ("predict", "--arch", "hybrid", "--model", "zoo:llama2-7b", "--node", "dgx-a100",
            "--pp", str(pp), "--global-batch", str(gb))
    res = json.loads(cli(*args, "--json"))
    m = gb  # dp = 1, micro-batch 1
    assert res["bubble_fraction"] == pytest.approx((pp - 1) / (m + pp - 1), rel=1e-12)
    share = res["time_s"]["bubble"] / res["time_s"]["total"]
    assert share <= res["bubble_fraction"]
    assert (share > 0.25) is warned and bool(res["warnings"]) is warned
    text = flat(cli(*args))
    assert ("warning: the pipeline bubble is" in text) is warned
    if warned:
        assert f"{100 * share:.1f}% of the step (over 25%)" in text
        assert "1 micro-batch for 8 stages" in text and "interleaving (--vp" in text


# ---- plan and predict: the same job, the same time -----------------------------------------

@pytest.mark.parametrize(("model", "gpus", "node"), [
    ("zoo:llama2-70b", "64", "dgx-h100"),
    ("zoo:mixtral-8x7b", "32", "dgx-h100"),
    ("zoo:llama2-7b", "16", "dgx-a100"),
])
def test_plan_best_through_predict_gives_the_same_time(model: str, gpus: str, node: str) -> None:
    out = json.loads(cli("plan", model, "--gpus", gpus, "--node", node, "--top", "2", "--json"))
    for row in out["top"]:
        c = row["config"]
        flags = ["predict", "--arch", "hybrid", "--model", model, "--node", row["node"],
                 "--dp", str(c["dp"]), "--tp", str(c["tp"]), "--pp", str(c["pp"]),
                 "--ep", str(c["ep"]), "--zero", str(c["zero"]),
                 "--micro-batch", str(c["micro_batch"]), "--recompute", row["recompute"],
                 "--vp", str(c["vp"]), "--sp" if c["sp"] else "--no-sp", "--json"]
        flags += ["--shard", str(c["shard"])] if c["shard"] < c["dp"] * c["cp"] else []
        res = json.loads(cli(*flags))           # no --global-batch: the shared default
        assert res["job"]["global_batch"] == out["global_batch"]
        assert res["time_s"]["total"] == pytest.approx(row["time_s"]["total"], rel=1e-9)
        # the line plan prints for the row is the same job
        line = shlex.split(row["predict"])
        assert line[:3] == ["traincast", "predict", "--arch"]
        again = json.loads(cli(*line[1:], "--json"))
        assert again["time_s"]["total"] == pytest.approx(row["time_s"]["total"], rel=1e-9)


def test_plan_default_batch_divides_among_the_gpus() -> None:
    # seq 3000: round(2^22 / 3000) = 1398 = 2 x 3 x 233 sequences; on 64 GPUs plan rounds to a
    # multiple of k = 64 (the largest power of two <= 64 GPUs and <= 1398): 64 x round(1398.1 /
    # 64) = 64 x 22 = 1408, so dp up to 64 divides it
    out = plan("zoo:llama2-7b", 64, "dgx-h100", seq=3000, top=1)
    assert out["global_batch"] == 1408
    assert max(r["config"]["dp"] for r in plan("zoo:llama2-7b", 64, "dgx-h100", seq=3000,
                                               top=50)["top"]) > 2


@pytest.mark.parametrize("extra", [("--compute", "paper"), ("--seq", "3000")])
def test_the_printed_predict_line_keeps_plans_flags(extra: tuple[str, str]) -> None:
    out = json.loads(cli("plan", "zoo:llama2-7b", "--gpus", "8", "--node", "dgx-a100",
                         "--top", "1", *extra, "--json"))
    row = out["top"][0]
    line = shlex.split(row["predict"])
    assert extra[0] in line and "--global-batch" in line
    again = json.loads(cli(*line[1:], "--json"))
    assert again["time_s"]["total"] == pytest.approx(row["time_s"]["total"], rel=1e-9)


def test_plan_prints_the_line_of_its_best() -> None:
    text = flat(cli("plan", "zoo:llama2-7b", "--gpus", "16", "--node", "dgx-a100", "--top", "1"))
    out = json.loads(cli("plan", "zoo:llama2-7b", "--gpus", "16", "--node", "dgx-a100", "--top",
                         "1", "--json"))
    assert out["top"][0]["predict"] in text


# ---- plan's output explains itself ---------------------------------------------------------

PLAN = ("plan", "zoo:llama2-70b", "--gpus", "64", "--node", "dgx-h100", "--top", "3")


def test_plan_prints_what_it_assumed_above_the_table() -> None:
    raw = cli(*PLAN)
    text = flat(raw)
    assert ("assumed: global batch 1024 sequences (4,194,304 tokens: the default, "
            "--global-batch to change)") in text
    assert raw.index("assumed:") < raw.index("Fastest configurations")
    for said in ("sequence 4096 tokens", "bf16 (--dtype)", "1F1B schedule",
                 "recompute none, selective or full", "ZeRO 0, 1, 2 or 3"):
        assert said in text
    out = json.loads(cli(*PLAN, "--json"))
    assert "assumed: " + out["assumed"]["text"] in text


def header_columns(raw: str, title: str) -> list[str]:
    """The column names of a table without vertical rules: the header lines between its title
    and its rule, a name wrapped over two lines (``mem`` above ``GB``) joined by where its
    words end (right-justified) or start."""
    lines = raw.splitlines()
    top = next(k for k, line in enumerate(lines) if line.startswith(title))
    rule = next(k for k in range(top + 1, len(lines)) if set(lines[k].strip()) == {"─"})
    head = [[(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", line)]
            for line in lines[top + 1:rule]]
    names = {(a, b): text for a, b, text in head[-1]}
    for row in head[:-1]:
        for a, b, text in row:
            key = next(k for k in names if k[1] == b or k[0] == a)
            names[key] = f"{text} {names[key]}"
    return list(names.values())


def test_plan_legend_names_every_column_with_its_unit() -> None:
    raw = cli(*PLAN)
    columns = [c for c in header_columns(raw, "Fastest configurations") if c != "#"]
    assert "mem GB" in columns and "TFLOP/s" in columns
    text = flat(raw)
    legend = re.findall(r"(?m)^  ([^:]+): ", raw)
    named = {name.strip() for entry in legend for name in entry.split(",")}
    assert set(columns) <= named, (columns, named)
    for unit in ("s/iter: seconds per iteration", "share of s/iter", "mem GB: memory per GPU, GB "
                 "(1e9 bytes)", "tok/s/GPU: tokens per second per GPU",
                 "TFLOP/s: model TFLOP/s per GPU"):
        assert unit in text


def test_compute_share_of_table_and_sentence_is_one_number() -> None:
    raw = cli(*PLAN)
    out = json.loads(cli(*PLAN, "--json"))
    assert header_columns(raw, "Fastest configurations")[3] == "compute"  # the first share
    for row in out["top"]:
        ts = row["time_s"]
        compute = (ts["compute_flop"] + ts["compute_mem"]) / ts["total"]   # by hand
        assert row["share"]["compute"] == pytest.approx(compute, rel=1e-12)
        cells = next(line for line in raw.splitlines()
                     if line.startswith(f"{row['rank']}  ")).split()
        assert next(c for c in cells if c.endswith("%")) == f"{100 * compute:.0f}%"
        assert row["why"].startswith(f"compute is {100 * compute:.0f}% of the iteration")


def test_replan_says_why_gpus_are_left_unused_and_the_switch_unit() -> None:
    # a global batch of 1024 sequences: 56 = 2^3 7 and 48 = 2^4 3: the factor 7 or 3 fits
    # neither dp (1024 = 2^10) nor pp (80 layers = 2^4 5), and tp stays inside a node of 8 (a
    # divisor of 8); 40 = 2^3 5 takes pp = 5
    out = replan("zoo:llama2-70b", [56], "dgx-h100", global_batch=1024)
    row = out["rows"][0]
    assert row["gpus_used"] == 40
    assert [u["gpus"] for u in row["unused"]] == [56, 48]
    for u in row["unused"]:
        assert u["reason"].startswith("no dp x tp x pp has dp dividing the global batch 1024")
        assert u["reason"].endswith("and pp dividing the 80 layers")
    text = flat(cli("plan", "zoo:llama2-70b", "--gpus", "56,40", "--node", "dgx-h100",
                    "--global-batch", "1024", "--preemptions-per-hour", "0.1",
                    "--checkpoint-gbs", "2"))
    assert "56 GPUs, 40 used: with 56 or 48 GPUs no dp x tp x pp has" in text
    assert "switch: seconds one change of configuration costs, C + Rs" in text
    sw = replan("zoo:llama2-70b", [56], "dgx-h100", global_batch=1024, resilience=Resilience(
        preemptions_per_hour=0.1, checkpoint_gbs=2.0))["rows"][0]["switch_s"]
    assert f"{sw:.0f} s" in text


def test_unused_reason_when_fewer_gpus_are_faster() -> None:
    """The third reason (a count whose best takes more expected time per million tokens), on
    plan results made by hand: no search gives it with one preset unless a larger count
    scales worse than its nodes' preemptions grow."""
    from traincast.parallel.plan import _unused_reason

    best = {"label": "dp=4 tp=2 pp=1", "s_per_million_tokens": 20.0}
    slower = {"gpus": 16, "searched": 10, "feasible": 3,
              "top": [{"label": "dp=8 tp=2 pp=1", "s_per_million_tokens": 23.94}]}
    assert _unused_reason(slower, best, 8) == ("its best, dp=8 tp=2 pp=1, takes 23.9 s per "
                                               "million tokens (expected) against 20 s on 8")
    full = {"gpus": 16, "searched": 10, "feasible": 0, "top": [],
            "min_memory_gb": {"dgx-a100": 91.25}}
    assert _unused_reason(full, best, 8) == ("no configuration fits in GPU memory (at least "
                                             "91.2 GB per GPU)")


def test_replan_without_a_price_prints() -> None:
    text = flat(cli("plan", "zoo:llama2-7b", "--gpus", "16,8", "--node", "dgx-a100"))
    assert "Best plan per GPU count" in text and "$/M tok" not in text


def test_replan_refuses_a_second_network_it_would_not_show() -> None:
    res = runner.invoke(app, ["plan", "zoo:llama2-7b", "--gpus", "16,8", "--network", "eth25"])
    assert res.exit_code != 0
    assert "--network eth25 compares one plan on two networks" in str(res.exception)


def test_the_default_global_batch_divides_among_the_gpus() -> None:
    # plan's k: the largest divisor of the GPU count at most round(2^22 / s) = 1024 (s = 4096):
    # 56 GPUs -> k = 56, B = 56 x round(1024 / 56) = 56 x 18 = 1008, which dp = 7 divides; 12
    # GPUs -> 12 x 85 = 1020; 64 -> 1024 as before; a re-plan over 64, 48 and 32 GPUs takes
    # lcm(64, 48, 32) = 192: 192 x round(1024 / 192) = 960 (64, 48 and 32 ranks divide it)
    from traincast.parallel.plan import _batch_multiple

    assert [_batch_multiple(4096, n) for n in (56, 12, 64, 7)] == [56, 12, 64, 7]
    assert _batch_multiple(4096, [64, 48, 32]) == 192
    assert _batch_multiple(131072, 48) == 24          # at most round(2^22 / 131072) = 32
    assert _batch_multiple(4096, [1000, 999]) == 1000  # lcm 999,000 > 1024: the largest's
    out = plan("zoo:llama2-70b", 56, "dgx-h100", top=1)
    assert out["global_batch"] == 1008 and out["top"]
    assert out["top"][0]["config"]["dp"] * out["top"][0]["config"]["tp"] \
        * out["top"][0]["config"]["pp"] == 56
    assert plan("zoo:llama2-7b", 12, "dgx-h100", top=1)["global_batch"] == 1020
    # a re-plan says its batch is the default, not a --global-batch
    said = replan("zoo:llama2-7b", [64, 48, 32], "dgx-a100")["assumed"]
    assert said["default"] and said["global_batch"] == 960
    assert said["text"].startswith("global batch 960 sequences (3,932,160 tokens: the default")
    assert not replan("zoo:llama2-7b", [32], "dgx-a100", global_batch=512)["assumed"]["default"]


def test_no_layout_note_names_the_rules() -> None:
    out = plan("zoo:llama2-70b", 56, "dgx-h100", global_batch=1024)
    assert out["top"] == [] and out["searched"] == 0
    assert out["note"].startswith("no configuration: no dp x tp x pp = 56 has dp dividing the "
                                  "global batch 1024")


def test_a_sequence_beyond_the_models_positions_is_warned_about() -> None:
    from traincast.parallel.hybrid import predict_hybrid
    from traincast.parallel.plan import plan

    # GPT-2: 1,024 learned positions (n_positions); Llama 2: a 4,096-token rotary context
    learned = predict_hybrid("gpt2", node="dgx-a100", dp=8, seq=2048, global_batch=64)
    assert any("1024 learned positions" in w for w in learned["warnings"])
    rotary = plan("zoo:llama2-7b", 8, "dgx-a100", seq=8192, top=1)
    assert any("4096-token context" in w for w in rotary["warnings"])
    within = predict_hybrid("gpt2", node="dgx-a100", dp=8, seq=1024, global_batch=64)
    assert not any("positions" in w for w in within["warnings"])


def test_the_paper_strategy_prices_the_hybrid_model_at_flat_rates() -> None:
    # the paper's model: every GEMM at the dense peak (H100 SXM bf16 989.4 TFLOP/s), every
    # memory-bound byte at the full 3,350 GB/s, no wave quantization (sms 0)
    import dataclasses

    from traincast.hardware.catalog import load_catalog

    cat = load_catalog()
    paper = hybrid_hardware(dataclasses.replace(cat, compute="paper"), "dgx-h100", "bf16")
    assert paper.compute == "paper" and paper.sms == 0.0
    assert paper.flops_per_s == pytest.approx(989.4e12)
    for family in ("elementwise", "softmax", "norm"):
        assert paper.memory_bps(family) == pytest.approx(3350e9)
    kernel = hybrid_hardware(cat, "dgx-h100", "bf16")
    assert kernel.compute == "kernel" and kernel.sms == 132.0
    assert kernel.memory_bps("norm") < kernel.memory_bps("elementwise") < 3350e9


FLAT_GPU = """
[gpu.FLATGPU]
source = "a test entry: datasheet peaks only"
[gpu.FLATGPU.datasheet]
fp32_tflops = 100.0
bf16_tflops = 200.0
fp16_tflops = 200.0
mem_bw_gbs = 1800
[node.flat-node]
gpu = "FLATGPU"
gpus = 8
pcie = "pcie4x16"
intra = "nvlink3-a100"
nic = "ib-hdr"
source = "a test node"
"""


def test_a_gpu_priced_at_flat_peaks_is_named_and_said_so(tc, tmp_path) -> None:
    # an entry without the kernel model's fields runs at its dense peak (paper strategy): the
    # hybrid forecast names the GPU and says so; plan says memory went unchecked (no mem_gb)
    cat = tmp_path / "flat.toml"
    cat.write_text(FLAT_GPU)
    run = tc("predict", "--arch", "hybrid", "--model", "zoo:llama2-7b", "--catalog", str(cat),
             "--node", "flat-node", "--dp", "8")
    text = " ".join(run.stdout.split())
    assert run.returncode == 0, run.stderr
    assert "GPU(s) of flat-node — FLATGPU" in text
    assert "compute by the paper strategy on FLATGPU: dense peak 200 TFLOP/s, GEMMs at 1.00" \
        in text and "flat peaks" in text
    run = tc("plan", "zoo:llama2-7b", "--gpus", "8", "--catalog", str(cat), "--node",
             "flat-node")
    assert run.returncode == 0, run.stderr
    said = " ".join(run.stdout.split())
    assert "memory not checked on FLATGPU: the catalog entry gives no mem_gb" in said
    assert "compute on FLATGPU priced at flat datasheet peaks" in said
    run = tc("plan", "zoo:llama2-7b", "--gpus", "8", "--catalog", str(cat), "--node",
             "flat-node", "--json")
    import json

    out = json.loads(run.stdout)
    assert out["memory_unchecked"] == ["FLATGPU"] and out["flat_peak"] == ["FLATGPU"]
    run = tc("plan", "zoo:llama2-7b", "--gpus", "8", "--node", "dgx-a100", "--json")
    assert json.loads(run.stdout)["flat_peak"] == []  # the kernel model prices an A100


def test_replan_reports_its_progress_count_by_count() -> None:
    # 24 and 16 GPUs on 8-GPU nodes: the whole-node counts 24, 16 and 8, each planned once
    seen: list[tuple[int, int]] = []
    replan("zoo:gpt2", [24, 16], "dgx-a100", progress=lambda d, t: seen.append((d, t)))
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_predict_says_when_the_gpu_waits_for_the_host() -> None:
    # one 128-token sequence of GPT-2 on an H100: the host's issue of its kernels bounds it
    args = ("predict", "--arch", "hybrid", "--model", "zoo:gpt2", "--gpus", "1", "--dp", "1",
            "--seq", "128", "--micro-batch", "1", "--global-batch", "1", "--node", "dgx-h100")
    out = json.loads(cli(*args, "--json"))
    assert out["bottleneck"] == "host"
    wait = out["time_s"]["host_wait"]
    assert wait > out["time_s"]["total"] / 2
    compute = out["time_s"]["compute_flop"] + out["time_s"]["compute_mem"]
    assert out["gpu_util"] == pytest.approx((compute - wait) / out["time_s"]["total"])
    text = flat(cli(*args))
    assert "of both compute rows: GPU waits for the host" in text
    assert "Bottleneck: host op dispatch" in text
    # a large step: no wait, none printed
    big = ("predict", "--arch", "hybrid", "--model", "zoo:llama2-7b", "--gpus", "8", "--dp", "8",
           "--seq", "4096", "--micro-batch", "1", "--node", "dgx-h100")
    assert json.loads(cli(*big, "--json"))["time_s"]["host_wait"] == 0.0
    assert "waits for the host" not in flat(cli(*big))
    # plan's sentence names the wait where it is most of the compute
    said = flat(cli("plan", "zoo:gpt2", "--gpus", "8", "--node", "dgx-h100", "--seq", "128",
                    "--global-batch", "64"))
    assert "(mostly waiting for the host to issue the kernels)" in said


def test_a_long_config_context_as_the_default_sequence_is_warned(tmp_path) -> None:
    """A config whose max_position_embeddings is 32,768 (Mistral 7B v0.1's) and gives no
    pre-training length: without --seq plan and predict take 32,768 tokens and say it is the
    model's longest context, not necessarily its training length; with --seq, or a model whose
    own sequence is at most 8,192 tokens, no such warning."""
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "mistral", "hidden_size": 1024, "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 2816,
        "vocab_size": 32000, "max_position_embeddings": 32768, "rms_norm_eps": 1e-5,
        "hidden_act": "silu", "tie_word_embeddings": False}))
    model = f"hf:{tmp_path}"
    out = plan(model, 8, "dgx-a100", top=1)
    long = [w for w in out["warnings"] if "longest context" in w]
    assert out["seq"] == 32768 and len(long) == 1 and "32,768 tokens" in long[0]
    assert "give --seq" in long[0]
    assert not [w for w in plan(model, 8, "dgx-a100", top=1, seq=32768)["warnings"]
                if "longest context" in w]
    text = " ".join(cli("predict", "--arch", "hybrid", "--model", model, "--node", "dgx-a100",
                        "--dp", "8").split())
    assert "32,768 tokens, is" in text and "longest context" in text
    assert not [w for w in plan("zoo:llama2-7b", 8, "dgx-a100", top=1)["warnings"]
                if "longest context" in w]


def test_a_slow_job_reads_its_throughput_not_zero() -> None:
    """Llama 2 7B on two DGX A100 nodes over 1 Mbit/s: its 13.48 GB of bf16 gradients (6.738e9
    parameters x 2 bytes) in a ring of 16 over 8 rails of 125 kB/s take 2 x 15/16 x 13.48e9 /
    1e6 = 25,269 s a step, for 16 x 4,096 tokens on 16 GPUs: 0.162 tokens/s per GPU. The line
    gives it in significant digits (tokens/s and model TFLOP/s), not a rounded 0."""
    out = json.loads(cli("predict", "--arch", "hybrid", "--model", "zoo:llama2-7b", "--node",
                         "dgx-a100", "--dp", "16", "--nic", "1Mbit", "--global-batch", "16",
                         "--json"))
    ring_s = 2 * 15 / 16 * 6_738_415_616 * 2 / (8 * 125e3)
    assert out["tokens_per_s_per_gpu"] == pytest.approx(16 * 4096 / (16 * ring_s), rel=0.01)
    assert out["model_tflops_per_gpu"] < 0.1
    text = " ".join(cli("predict", "--arch", "hybrid", "--model", "zoo:llama2-7b", "--node",
                        "dgx-a100", "--dp", "16", "--nic", "1Mbit", "--global-batch",
                        "16").split())
    assert f"{out['tokens_per_s_per_gpu']:.3g} tokens/s/GPU" in text
    assert f"{out['model_tflops_per_gpu']:.3g} model TFLOP/s/GPU" in text
