"""Framework recipes (``parallel/recipes.toml``): the file, the knobs each recipe sets, the
dropout knob by hand (docs/parallelism.md, "Framework recipes"), flags over recipes and
plan -> predict with ``--framework``."""

from __future__ import annotations

import json
import shlex
import tomllib
from importlib import resources

import numpy as np
import pytest
from typer.testing import CliRunner

from traincast.cli import app
from traincast.errors import TraincastError
from traincast.parallel.hybrid import (
    ATTENTION,
    PRICED_KNOBS,
    RECIPE_KNOBS,
    activation_bytes_per_layer,
    configs,
    elementwise_time_s,
    evaluate,
    hybrid_hardware,
    predict_hybrid,
    recipe_settings,
)
from traincast.parallel.models import get_model
from traincast.parallel.plan import plan

runner = CliRunner()
RAW = tomllib.loads(resources.files("traincast.parallel").joinpath("recipes.toml").read_text())
LLAMA = get_model("llama2-7b")   # h 4096, a 32, s 4096, l 32, SwiGLU (n_mat 3), MHA


def cli(*args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


# ---- the file ------------------------------------------------------------------------------

def test_the_file_parses_and_every_setting_names_its_source() -> None:
    recipes = RAW["recipe"]
    assert {"megatron-2021", "megatron-core", "fsdp", "torchtitan", "deepspeed"} <= set(recipes)
    for name, r in recipes.items():
        assert r["title"] and r["source"].startswith("https://"), name
        for knob, s in r.get("set", {}).items():
            assert knob in RECIPE_KNOBS, (name, knob)
            assert s["source"].startswith("https://"), (name, knob)
            assert set(s) <= {"value", "source", "sm90", "fallback", "gated"}, (name, knob)
            assert knob == "attention" or "fallback" not in s, (name, knob)
            assert all(k in ATTENTION for k in s.get("fallback", [])), (name, knob)
            for key in ("value", "sm90", "gated"):
                if key in s and knob == "attention":
                    assert s[key] in ATTENTION
                if key in s and knob == "zero":
                    assert s[key] in (0, 1, 2, 3)
                if key in s and isinstance(RECIPE_KNOBS[knob], bool):  # an on/off knob
                    assert isinstance(s[key], bool), (name, knob)
                if key in s and knob == "selective":
                    assert s[key] in ("selective", "selective-op"), (name, knob)
        for kept in r.get("kept", []):
            assert kept["what"] and kept["source"].startswith("https://"), name


def test_every_recipe_knob_reaches_the_model() -> None:
    # a knob evaluate takes as it is, or one turned into its other arguments first (attention,
    # ZeRO, the selective mode) or deciding what plan searches (context parallelism, HSDP):
    # none is left unpriced
    import inspect

    turned = {"attention", "zero", "selective", "context_parallel", "hsdp"}
    assert set(RECIPE_KNOBS) == set(PRICED_KNOBS) | turned
    assert not set(PRICED_KNOBS) & turned
    assert set(PRICED_KNOBS) <= set(inspect.signature(evaluate).parameters)
    # and each priced knob moves the price of a job where it applies
    llama = get_model("llama3-8b")
    where = {"dropout": {}, "grad_accum_fused": {}, "eager": {},
             "fp8_weight_cache": {"dtype": "fp8"}, "fsdp_pp": {"zero": 3, "pp": 2}}
    assert set(where) == set(PRICED_KNOBS)
    for knob, job in where.items():
        hw = hybrid_hardware(None, "dgx-h100", job.get("dtype", "bf16"))
        sizes = dict(dp=4, micro_batch=1, global_batch=32, seq=4096, attention="flash") | job
        on, off = (evaluate(llama, hw, **sizes, **{knob: v}) for v in (True, False))
        assert float(on["total_s"]) != float(off["total_s"]) or \
            float(on["mem_total_bytes"]) != float(off["mem_total_bytes"]), knob


def test_each_recipe_sets_what_docs_say() -> None:
    a100 = hybrid_hardware(None, "dgx-a100")
    h100 = hybrid_hardware(None, "dgx-h100")
    gpt3 = get_model("gpt3-175b")   # GeLU MLP (n_mat 2): not gated
    assert recipe_settings("megatron-2021", LLAMA, h100) == {"attention": "materialized",
                                                             "dropout": True, "hsdp": False}
    assert recipe_settings("megatron-core", LLAMA, a100) == {"attention": "flash",
                                                             "dropout": False,
                                                             "context_parallel": True,
                                                             "fp8_weight_cache": True}
    # Transformer Engine prefers cuDNN's fused attention from compute capability 9.0 on
    assert recipe_settings("megatron-core", LLAMA, h100)["attention"] == "cudnn"
    b200 = hybrid_hardware(None, "dgx-b200")
    assert b200.compute_capability == 10.0 and h100.compute_capability == 9.0
    assert recipe_settings("megatron-core", LLAMA, b200)["attention"] == "cudnn"
    assert a100.compute_capability == 8.0
    assert recipe_settings("megatron-core", gpt3, h100)["dropout"] is True
    # below compute capability 8.0 FlashAttention-2 and cuDNN's fused attention do not run:
    # Transformer Engine falls back to its unfused attention, PyTorch SDPA (fsdp) to its
    # memory-efficient kernel; an AMD GPU (no compute capability) keeps the recipe's value
    v100 = hybrid_hardware(None, "pai-v100-nvlink", "fp16")
    t4 = hybrid_hardware(None, "pai-t4", "fp16")
    assert (v100.compute_capability, t4.compute_capability) == (7.0, 7.5)
    for hw in (v100, t4):
        assert recipe_settings("megatron-core", LLAMA, hw)["attention"] == "materialized"
        assert recipe_settings("fsdp", LLAMA, hw)["attention"] == "efficient"
    mi300x = hybrid_hardware(None, "mi300x-node")
    assert mi300x.compute_capability == 0.0
    assert recipe_settings("fsdp", LLAMA, mi300x)["attention"] == "flash"
    assert recipe_settings("fsdp", LLAMA, a100)["attention"] == "flash"
    assert recipe_settings("fsdp", LLAMA, h100) == {"zero": 3, "attention": "flash",
                                                    "dropout": False, "grad_accum_fused": True}
    assert recipe_settings("deepspeed", LLAMA, a100) == {"zero": 1, "attention": "materialized"}


def test_plan_searches_cp_only_for_a_recipe_with_it_and_predict_warns() -> None:
    from traincast.parallel.plan import plan

    kw = {"seq": 32768, "global_batch": 16, "top": 3}
    mc = plan("zoo:llama2-7b", 16, "dgx-h100", framework="megatron-core", **kw)
    fs = plan("zoo:llama2-7b", 16, "dgx-h100", framework="fsdp", **kw)
    assert mc["assumed"]["searched"]["cp"] != [1] and fs["assumed"]["searched"]["cp"] == [1]
    assert "no context parallelism" in fs["assumed"]["text"]
    assert all(r["config"]["cp"] == 1 for r in fs["top"])
    from traincast.parallel.hybrid import predict_hybrid

    out = predict_hybrid("llama2-7b", node="dgx-h100", dp=4, cp=2, seq=32768,
                         global_batch=64, framework="fsdp")
    assert any("no context parallelism" in w for w in out["warnings"])
    out = predict_hybrid("llama2-7b", node="dgx-h100", dp=4, cp=2, seq=32768,
                         global_batch=64, framework="megatron-core", zero=1)
    assert not any("context parallelism" in w for w in out["warnings"])
    assert "ZeRO 1 (--zero)" in out["assumed"]["text"]


def test_a_configuration_that_does_not_fit_says_what_shrinks_it() -> None:
    from traincast.parallel.hybrid import predict_hybrid

    out = predict_hybrid("llama2-7b", node="dgx-h100", dp=4, cp=2, seq=32768,
                         global_batch=64, framework="megatron-core", recompute="selective")
    assert not out["fits"]
    w = next(x for x in out["warnings"] if x.startswith("does not fit"))
    # ZeRO 0 (the default): the optimizer state is what ZeRO 1 shards first
    assert "--zero 1" in w and "--recompute full" in w and "--cp 4" in w


def test_zero_over_one_data_parallel_rank_shards_nothing_and_is_not_offered() -> None:
    from traincast.parallel.hybrid import predict_hybrid

    # d cp = 1: each ZeRO stage holds the whole model state, so the memory is the same at every
    # stage (ZeRO-3 once added a gathered layer, 50 MB more than ZeRO 0), and the warning of
    # a run that does not fit offers no ZeRO stage
    totals = {z: predict_hybrid("llama2-7b", node="dgx-a100", tp=8, zero=z, global_batch=8,
                                recompute="full")["memory_gb"]["total"] for z in range(4)}
    assert len(set(totals.values())) == 1, totals
    out = predict_hybrid("llama2-7b", node="dgx-a100", zero=2, global_batch=8, recompute="full")
    w = next(x for x in out["warnings"] if x.startswith("does not fit"))
    assert "--zero" not in w and "--tp 2" in w


def test_the_memory_warning_offers_only_changes_the_shape_rules_accept() -> None:
    from traincast.parallel.hybrid import predict_hybrid
    from traincast.parallel.plan import plan

    # GPT-3 175B on 16 A100s, pp 2 with ZeRO 1: ZeRO 2 does not combine with pipelines
    out = predict_hybrid("gpt3-175b", node="dgx-a100", tp=8, pp=2, zero=1, global_batch=8)
    w = next(x for x in out["warnings"] if x.startswith("does not fit"))
    assert "--zero" not in w and "--tp" not in w and "--pp 4" in w     # tp 16 > 8 per node
    assert "fused attention" not in w and "--cp" not in w   # model state, not scores
    # Llama-2-7B at 131,072 tokens, materialized: the scores decide, cp needs a fused kernel
    out = predict_hybrid("llama2-7b", node="dgx-h100", tp=8, seq=131072, global_batch=8,
                         recompute="full")
    w = next(x for x in out["warnings"] if x.startswith("does not fit"))
    assert "fused attention" in w and "--cp" not in w and "--tp 16" not in w
    # plan names the fused attention only when the scores, not the model state, are too big
    assert "fused attention" not in plan("zoo:gpt3-175b", 8, "dgx-a100")["note"]


def test_an_unknown_framework_names_the_recipes() -> None:
    with pytest.raises(TraincastError, match="unknown framework") as e:
        predict_hybrid("zoo:llama2-7b", node="dgx-a100", dp=8, framework="jax")
    assert "megatron-core" in (e.value.hint or "")


# ---- megatron-2021: today's model exactly --------------------------------------------------

def test_megatron_2021_is_the_explicit_knobs_of_today() -> None:
    hw = hybrid_hardware(None, "dgx-a100")
    kw = {"node": "dgx-a100", "dp": 4, "tp": 2, "pp": 1, "micro_batch": 2, "global_batch": 64}
    rec = predict_hybrid("zoo:llama2-7b", **kw, framework="megatron-2021")
    default = predict_hybrid("zoo:llama2-7b", **kw)
    explicit = predict_hybrid("zoo:llama2-7b", **kw, zero=0, attention="materialized",
                              dropout=True, grad_accum_fused=True)
    assert rec == default == explicit
    res = evaluate(LLAMA, hw, dp=4, tp=2, micro_batch=2, global_batch=64,
                   recompute=1)   # evaluate's own defaults: materialized, dropout on, zero 0
    assert rec["time_s"]["total"] == float(res["total_s"])


# ---- the dropout knob by hand (one Llama layer) --------------------------------------------

def _c(dropout: bool, attention: str = "materialized", t: int = 1, sp: bool = False,
       r: int = 0):
    return configs(LLAMA, dp=1, tp=t, pp=1, ep=1, zero=0, micro_batch=1, global_batch=1,
                   recompute=r, vp=1, sp=sp, gpipe=False, seq=None, dtype="bf16",
                   attention=attention, dropout=dropout)


def test_dropout_off_removes_the_dropout_kernels_bytes_by_hand() -> None:
    hw = hybrid_hardware(None, "dgx-a100")
    ew_bw = hw.memory_bps("elementwise")    # dropout kernels: the element-wise family's rate
    s, h, a, layers = 4096.0, 4096.0, 32.0, 32.0
    # per direction (forward, backward): 2 hidden masks of 1 byte per b s h element, and the
    # attention-dropout kernel (read, write, 1-byte mask: 2 delta + 1 = 5 bytes) per b a s^2
    per_dir = 2 * s * h + 5 * a * s * s           # 33,554,432 + 2,684,354,560
    assert per_dir == 2_717_908_992
    diff = elementwise_time_s(LLAMA, hw, _c(True)) - elementwise_time_s(LLAMA, hw, _c(False))
    assert float(diff) == pytest.approx(layers * 2 * per_dir / ew_bw, rel=1e-12)
    # tp 2 with sequence parallelism: the masks over b s h / 2, the attention kernel / 2
    per_dir_tp = 2 * s * h / 2 + 5 * a * s * s / 2
    diff = (elementwise_time_s(LLAMA, hw, _c(True, t=2, sp=True))
            - elementwise_time_s(LLAMA, hw, _c(False, t=2, sp=True)))
    assert float(diff) == pytest.approx(layers * 2 * per_dir_tp / ew_bw, rel=1e-12)
    # fused attention: the attention dropout is inside the kernel already; only the masks go
    diff = (elementwise_time_s(LLAMA, hw, _c(True, "flash"))
            - elementwise_time_s(LLAMA, hw, _c(False, "flash")))
    assert float(diff) == pytest.approx(layers * 2 * (2 * s * h) / ew_bw, rel=1e-12)
    # selective recomputation repeats the attention forward: its dropout (5 b a s^2) too
    diff = (elementwise_time_s(LLAMA, hw, _c(True, r=1))
            - elementwise_time_s(LLAMA, hw, _c(False, r=1)))
    assert float(diff) == pytest.approx(layers * (2 * per_dir + 5 * a * s * s)
                                        / ew_bw, rel=1e-12)


def test_dropout_off_removes_the_mask_activations_by_hand() -> None:
    s, h, a = 4096.0, 4096.0, 32.0
    sbh = s * h
    # Korthikanti et al., bf16, t = 1, no recomputation: s b h (18 + m + 5 a s / h), the MLP's
    # kept products m = 2 n_mat f / h = 2 x 3 x 11008 / 4096 = 16.125 for Llama 2 7B's SwiGLU
    # (16 for their GeLU MLP of 4h: the paper's 34); without dropout s b h (16 + m + 2 a s /
    # h): the two hidden masks (2 s b h) and the attention dropout's mask and output
    # (3 a s^2 b) go
    m = 2 * 3 * 11008 / 4096
    assert m == 16.125
    assert float(activation_bytes_per_layer(LLAMA, _c(True))) == sbh * (18 + m + 5 * a * s / h)
    assert float(activation_bytes_per_layer(LLAMA, _c(False))) == sbh * (16 + m + 2 * a * s / h)
    assert sbh * (16 + m + 2 * a * s / h) == 1_612_709_888
    # selective: (18 + m) s b h -> (16 + m) s b h; full: 2 s b h either way
    assert float(activation_bytes_per_layer(LLAMA, _c(False, r=1))) == (16 + m) * sbh
    assert float(activation_bytes_per_layer(LLAMA, _c(False, r=2))) == 2 * sbh
    # tp 2 without sequence parallelism: s b h (10 + (8 + m)/t + 5as/(ht)), the masks in the 10
    assert float(activation_bytes_per_layer(LLAMA, _c(False, t=2))) == \
        sbh * (8 + (8 + m) / 2 + 2 * a * s / h / 2)
    # tp 2 with it: s b h (18 + m + 5as/h) / t -> s b h (16 + m + 2as/h) / t
    assert float(activation_bytes_per_layer(LLAMA, _c(False, t=2, sp=True))) == \
        sbh * (16 + m + 2 * a * s / h) / 2
    # flash: s b h (18 + m) -> (16 + m) (no scores to begin with)
    assert float(activation_bytes_per_layer(LLAMA, _c(False, "flash"))) == (16 + m) * sbh


def test_the_mlp_term_follows_the_mlp() -> None:
    # Korthikanti et al.'s GeLU MLP of 4h keeps 8 s b h before and after its GeLU (m = 16);
    # Llama 3 8B's SwiGLU of f = 14336 = 3.5 h keeps its gate's and up product's outputs and
    # the activation's output, 3 x 2 x 3.5 = 21 s b h: 5 s b h more than the GeLU count
    from traincast.parallel import strategies as st

    sbh = 4096.0 * 4096.0
    gelu = st.activation_bytes_per_layer(4096, 1, 4096, 32, 1, False, 1)
    assert float(gelu) == 34 * sbh
    # through the model: Llama 3 8B, selective, flash, t = 1: (18 + 21) s b h, K and V
    # 1024 wide: + 4 s (1024 - 4096)
    llama3 = get_model("llama3-8b")
    c = configs(llama3, dp=1, tp=1, pp=1, ep=1, zero=0, micro_batch=1, global_batch=1,
                recompute=1, vp=1, sp=None, gpipe=False, seq=4096, dtype="bf16",
                attention="flash")
    assert float(activation_bytes_per_layer(llama3, c)) == \
        39 * sbh + 4 * 4096 * (1024 - 4096)


# ---- flags over recipes, the assumed line ---------------------------------------------------

def test_explicit_flags_override_the_recipe() -> None:
    kw = {"node": "dgx-h100", "dp": 8, "global_batch": 64}
    rec = predict_hybrid("zoo:llama2-7b", **kw, framework="fsdp")
    assert rec["job"]["zero"] == 3 and rec["job"]["attention"] == "flash"
    assert rec["job"]["dropout"] is False
    assert "framework fsdp (--framework): ZeRO 3, flash attention, dropout off" \
        in rec["assumed"]["text"]
    mine = predict_hybrid("zoo:llama2-7b", **kw, framework="fsdp", zero=1,
                          attention="materialized")
    assert mine["job"]["zero"] == 1 and mine["job"]["attention"] == "materialized"
    assert "materialized attention (--attention)" in mine["assumed"]["text"]
    assert "ZeRO 3" not in mine["assumed"]["text"]
    # the same as the explicit knobs without a recipe
    plain = predict_hybrid("zoo:llama2-7b", **kw, zero=1, attention="materialized",
                           dropout=False)
    assert mine["time_s"] == plain["time_s"]


def test_cli_framework_and_override() -> None:
    base = ["predict", "--arch", "hybrid", "--model", "zoo:llama2-7b", "--node", "dgx-h100",
            "--dp", "8", "--json"]
    core = json.loads(cli(*base, "--framework", "megatron-core"))
    assert core["job"]["attention"] == "cudnn" and core["job"]["dropout"] is False
    over = json.loads(cli(*base, "--framework", "megatron-core", "--attention", "flash"))
    assert over["job"]["attention"] == "flash"
    ds = json.loads(cli(*base, "--framework", "deepspeed"))
    assert ds["job"]["zero"] == 1 and ds["job"]["attention"] == "materialized"
    assert json.loads(cli(*base, "--framework", "deepspeed", "--zero", "0"))["job"]["zero"] == 0


# ---- plan -> predict with --framework --------------------------------------------------------

@pytest.mark.parametrize(("framework", "node"), [("fsdp", "dgx-a100"),
                                                 ("megatron-core", "dgx-h100"),
                                                 ("deepspeed", "dgx-a100")])
def test_plan_best_through_predict_with_framework(framework: str, node: str) -> None:
    out = json.loads(cli("plan", "zoo:llama2-7b", "--gpus", "16", "--node", node, "--top", "2",
                         "--framework", framework, "--json"))
    zero = {"fsdp": 3, "deepspeed": 1}.get(framework)
    for row in out["top"]:
        if zero is not None:
            assert row["config"]["zero"] == zero   # the recipe's stage, the only one searched
        line = shlex.split(row["predict"])
        assert line[line.index("--framework") + 1] == framework
        again = json.loads(cli(*line[1:], "--json"))
        assert again["time_s"]["total"] == pytest.approx(row["time_s"]["total"], rel=1e-9)


def test_plan_assumed_names_the_recipe_per_preset() -> None:
    out = plan("zoo:llama2-7b", 16, "dgx-a100,dgx-h100", framework="megatron-core", top=1)
    text = out["assumed"]["text"]
    assert "on dgx-a100: framework megatron-core (--framework): flash attention" in text
    assert "on dgx-h100: framework megatron-core (--framework): cudnn attention" in text
    default = plan("zoo:llama2-7b", 16, "dgx-a100", top=1)
    assert default["assumed"]["searched"]["zero"] == [0, 1, 2, 3]
    assert "materialized attention" in default["assumed"]["text"]
    assert np.isfinite(default["top"][0]["time_s"]["total"])


def test_dropout_on_for_a_gated_model_says_that_such_models_train_without() -> None:
    """megatron-2021 keeps the 2021 stack's dropout for every model (its Megatron SC'21 table
    unchanged); for a Llama-class (gated MLP) model the assumed line says that such a model
    trains without, and which recipes turn it off; a GeLU model (GPT-3) gets no such words."""
    kw = {"node": "dgx-a100", "dp": 8, "global_batch": 64}
    llama = predict_hybrid("zoo:llama2-7b", **kw)["assumed"]["text"]
    gpt = predict_hybrid("zoo:megatron-gpt-1.7b", **kw)["assumed"]["text"]
    assert "dropout on (the stack's default; a gated-MLP model" in llama
    assert "--framework megatron-core, fsdp or torchtitan" in llama
    assert "dropout on" in gpt and "gated-MLP" not in gpt
    core = predict_hybrid("zoo:llama2-7b", **kw, framework="megatron-core")["assumed"]["text"]
    assert "dropout off" in core and "gated-MLP" not in core
