"""NVIDIA NeMo's FP8 pre-training tables (``parallel/nemo.toml``) through the one table
comparison (``compare_table``): the data entry checked against NeMo's own FLOP count, the
comparison in tokens per second, context parallelism in a row's layout, and the report of
``traincast validate --published``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from test_llm_foundry import validate_published_output
from traincast.errors import TraincastError
from traincast.hardware.catalog import load_catalog
from traincast.parallel import strategies as st
from traincast.parallel.hybrid import evaluate, hybrid_hardware
from traincast.parallel.models import config_from_table, get_model
from traincast.parallel.validation import compare_table, median_abs_error, nemo, table_rows

NEMO = "https://github.com/NVIDIA/NeMo/blob/070a0bb168d405d653b9734c0017cf5078e77c0d/"
BRIDGE = ("https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/"
          "0a25f911b2ed6c6905a539504fdb8e5b40e3438b/")


def _model(row: dict[str, Any]) -> Any:
    return (config_from_table(row["model"], dict(row["config"]), "test") if "config" in row
            else get_model(row["model"]))


def _megatron_flops_per_token(row: dict[str, Any]) -> float:
    """Megatron-LM's num_floating_point_operations over batch x seq (training.py, the formula
    NeMo reports its Model TFLOP/s with)::

        12 l h^2 [(1 + g / a + c s / h) + (f / h) x m + V / (2 l h)]

    ``g`` key/value groups, ``a`` heads, ``m`` 3/2 for a gated (SwiGLU) MLP, else 1; ``c`` 1
    in NeMo 24.07 (the full s x s scores), 1/2 from 25.11 on (the causal half)."""
    cfg = _model(row)
    layers, h, a, s = cfg.layers, float(cfg.hidden), cfg.heads, float(row["seq"])
    groups = cfg.kv_heads or a
    causal = 1.0 if row["container"] == "24.07" else 0.5
    gated = 1.5 if cfg.mlp == "swiglu" else 1.0
    per = ((1.0 + groups / a + causal * s / h) + cfg.ffn / h * gated
           + cfg.vocab / (2.0 * layers * h))
    return 12.0 * layers * h * h * per


def test_rows_are_cited_and_laid_out() -> None:
    table = table_rows("nemo.toml")
    rows = table["row"]
    assert len(rows) == 16
    assert table["framework"] == "megatron-core" and table["dtype"] == "fp8"
    for r in rows:
        assert r["source"].startswith(NEMO if r["container"] == "24.07" else BRIDGE), r["run"]
        assert r["t"] * r["p"] * r.get("cp", 1) * r["d"] == r["gpus"], r["run"]
        assert r["batch"] % (r["d"] * r.get("micro_batch", table["micro_batch"])) == 0
        assert "tflops_per_gpu" not in r and "mfu_percent" not in r  # compared in tokens


def test_published_tflops_are_the_tokens_by_nemos_flop_count() -> None:
    # each row's Model TFLOP/s / its tokens/s per GPU is Megatron-LM's FLOPs per token:
    # checks the transcription of both columns and of the model sizes
    for r in table_rows("nemo.toml")["row"]:
        per_token = r["tflops_per_gpu_as_published"] * 1e12 / r["tokens_per_gpu_s"]
        assert per_token == pytest.approx(_megatron_flops_per_token(r), rel=1.5e-3), r["run"]


def test_rows_are_compared_in_tokens_per_second() -> None:
    rows = nemo()
    assert len(rows) == 16
    for r in rows:
        assert r["published_tflops_per_gpu"] is None  # nobody published traincast's count
        # tokens/s per GPU = B s / (T gpus), from the predicted step
        tokens = r["batch"] * r["seq"] / (r["predicted_s"] * r["gpus"])
        assert r["rel_error"] == pytest.approx(tokens / r["tokens_per_gpu_s"] - 1.0, rel=1e-9)
        assert r["gpu"] == ("B200" if "B200" in r["run"] else "H100-SXM5-80GB")
    cp = {r["run"]: r["cp"] for r in rows}  # the pages' CP column
    assert (cp["24.07 LLAMA3-8B"], cp["24.07 LLAMA2-7B"], cp["25.11 LLAMA3.1_405B H100"]) == \
        (2, 1, 2)


def test_the_checks_stay_where_docs_validation_md_says() -> None:
    # docs/validation.md "NVIDIA NeMo performance tables", against the targets (a
    # guard against a regression on these published runs, not a fit: nothing is fitted to
    # them): median |error| within 10%, the H100 rows with tensor parallelism within the
    # comparison's target (TARGET_REL_ERROR); the rows without tensor parallelism or FSDP,
    # almost all compute, forecast faster than they ran (the FP8 compute priced too fast)
    rows = nemo()
    assert median_abs_error(rows) <= 0.10
    for r in rows:
        if r["t"] > 1 and r["gpu"] == "H100-SXM5-80GB":
            assert r["within_target"], r["run"]
        if r["t"] == 1 and r.get("zero") != 3:
            assert r["rel_error"] > 0, r["run"]


def test_the_llama2_13b_rows_pipeline_crosses_its_two_nodes() -> None:
    # 16 GPUs as 4 stages of 4 (t 1, d 4) on 8-GPU nodes: stages 0-1 on one node, 2-3 on the
    # other (pipeline outermost, Megatron-LM's order), so a stage boundary is on the network
    # and the pipeline's transfers take a visible share of the step
    (row,) = [r for r in nemo() if r["model"] == "llama2-13b"]
    assert (row["gpus"], row["t"], row["p"], row["d"]) == (16, 1, 4, 4)
    assert row["shares"]["comm_pp"] > 0.1


def _one_row(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "rows.toml"
    path.write_text('dtype = "bf16"\nnode = "dgx-h100"\nframework = "megatron-core"\n'
                    'metric = "model"\n[[row]]\nmodel = "llama3-8b"\nseq = 8192\nbatch = 32\n'
                    'source = "x"\n' + body)
    return path


def test_a_row_with_context_parallelism_is_priced_with_it(tmp_path: Path) -> None:
    path = _one_row(tmp_path, "t = 1\np = 1\ncp = 2\nd = 4\ngpus = 8\ntokens_per_gpu_s = 1e4\n")
    (row,) = compare_table(path)
    hw = hybrid_hardware(load_catalog(), "dgx-h100", "bf16")
    res = evaluate(get_model("llama3-8b"), hw, dp=4, cp=2, global_batch=32, seq=8192,
                   dtype="bf16", recompute=st.RECOMPUTE_CODE["full"], attention="cudnn",
                   dropout=False, sp=False)
    assert row["predicted_s"] == pytest.approx(float(res["total_s"]), rel=1e-12)
    no_cp = _one_row(tmp_path, "t = 1\np = 1\nd = 8\ngpus = 8\ntokens_per_gpu_s = 1e4\n")
    (plain,) = compare_table(no_cp)
    assert plain["predicted_s"] != pytest.approx(row["predicted_s"])
    # each context rank holds the activations of 4,096 of the 8,192 tokens: less memory
    assert row["memory_gb"] < plain["memory_gb"]


@pytest.mark.parametrize(("body", "message"), [
    ("t = 1\np = 1\ncp = 2\nd = 4\ngpus = 8\ntokens_per_gpu_s = 1e4\nattention = "
     '"materialized"\n', r"rows\.toml, row 1 \(llama3-8b\): the hybrid model rejects its shape: "
     r"context parallelism \(cp > 1\) needs a fused attention"),
    ("t = 1\np = 1\ncp = 2\nd = 8\ngpus = 8\ntokens_per_gpu_s = 1e4\n",
     r"rows\.toml, row 1: t x p x cp x d = 16 is not the row's 8 GPUs"),
    ("t = 1\np = 1\ncp = 0\nd = 8\ngpus = 8\ntokens_per_gpu_s = 1e4\n",
     r"rows\.toml, row 1: field 'cp' must be a positive integer"),
    ("t = 1\np = 1\nd = 8\ngpus = 8\n",
     r"rows\.toml, row 1: give exactly one of 'tflops_per_gpu' and 'mfu_percent', or "
     r"'tokens_per_gpu_s' alone"),
    ("t = 1\np = 1\nd = 8\ngpus = 8\ntflops_per_gpu = 400\nmfu_percent = 40\n",
     r"rows\.toml, row 1: give exactly one of"),
])
def test_bad_rows_are_named(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(TraincastError, match=message):
        compare_table(_one_row(tmp_path, body))


def test_validate_published_prints_the_nemo_tables(monkeypatch: Any) -> None:
    out = validate_published_output(monkeypatch, "nemo")
    assert "NVIDIA NeMo performance tables (16 rows, tokens/s per GPU" in out
    assert "| H100-SXM5-80GB | fp8 | 14 |" in out and "| B200 | fp8 | 2 |" in out
    assert "| 25.11 LLAMA3.1_405B H100 | H100-SXM5-80GB | 1024 | 8 / 8 / 2 / 8 | 292 |" in out


def test_hardware_show_says_how_the_published_runs_on_a_gpu_went(monkeypatch: Any) -> None:
    from typer.testing import CliRunner

    from traincast.cli import app
    from traincast.parallel.validation import published_checks

    # H100 SXM: llm-foundry's "H100 80GB BF16" (52 rows) and "FP8" (10) tables, and the 14
    # NeMo rows on DGX H100; no shipped run used an L4
    checks = {c["table"]: c for c in published_checks("H100-SXM5-80GB")}
    assert set(checks) == {"llm_foundry.toml", "nemo.toml"}
    assert (checks["llm_foundry.toml"]["rows"], checks["nemo.toml"]["rows"]) == (62, 14)
    assert checks["nemo.toml"]["dtypes"] == ["fp8"]
    assert checks["nemo.toml"]["compared_in"] == "tokens/s"
    assert checks["llm_foundry.toml"]["compared_in"] == "TFLOP/s"
    # the table's summary is its own rows' (nemo(), those on H100 SXM)
    h100 = [r["rel_error"] for r in nemo() if r["gpu"] == "H100-SXM5-80GB"]
    assert checks["nemo.toml"]["too_fast"] == sum(e > 0 for e in h100)
    assert checks["nemo.toml"]["median_error"] == pytest.approx(float(np.median(h100)))
    assert checks["nemo.toml"]["median_abs_error"] == pytest.approx(
        float(np.median(np.abs(h100))))
    assert published_checks("L4") == []
    assert published_checks("H100") == published_checks("H100-SXM5-80GB")  # an alias
    with pytest.raises(TraincastError, match="unknown GPU 'nope'"):
        published_checks("nope")
    res = CliRunner().invoke(app, ["hardware", "show", "H100"])
    said = " ".join(res.stdout.split())
    assert res.exit_code == 0 and "Published training runs on H100-SXM5-80GB" in said
    assert "NVIDIA NeMo FP8 tables (14 rows, fp8, in tokens/s)" in said
    res = CliRunner().invoke(app, ["hardware", "show", "L4"])
    assert res.exit_code == 0, res.output
    assert "No shipped published LLM training run used L4" in " ".join(res.stdout.split())


def test_a_hybrid_forecast_names_the_published_runs_of_its_gpu_and_precision() -> None:
    import json

    from typer.testing import CliRunner

    from traincast.cli import app

    res = CliRunner().invoke(app, ["predict", "--arch", "hybrid", "--model", "zoo:llama3-8b",
                                   "--node", "dgx-h100", "--dp", "8", "--dtype", "fp8",
                                   "--json"])
    assert res.exit_code == 0, res.output
    checks = {c["table"]: c["rows"] for c in json.loads(res.stdout)["published_checks"]}
    assert checks == {"llm_foundry.toml": 10, "nemo.toml": 14}  # the fp8 rows on H100 SXM
    res = CliRunner().invoke(app, ["predict", "--arch", "hybrid", "--model", "zoo:llama3-8b",
                                   "--node", "dgx-h100", "--dp", "8", "--dtype", "fp8"])
    assert "Published fp8 runs on H100-SXM5-80GB" in " ".join(res.stdout.split())
