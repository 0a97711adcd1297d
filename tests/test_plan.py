"""traincast plan: the configuration search and its command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from typer.testing import CliRunner

from traincast.cli import app
from traincast.errors import TraincastError
from traincast.parallel.models import get_model
from traincast.parallel.plan import enumerate_configs, plan

runner = CliRunner()


@settings(max_examples=25, deadline=None)
@given(gpus=hs.sampled_from([1, 2, 8, 24, 64, 96, 512]), batch=hs.sampled_from([32, 96, 512]))
def test_every_config_uses_all_gpus(gpus: int, batch: int) -> None:
    cfg = get_model("llama2-70b")
    c = enumerate_configs(cfg, gpus, 8, batch)
    assert np.all(c["dp"] * c["tp"] * c["pp"] == gpus)
    assert np.all(c["tp"] <= 8)
    assert np.all(batch % (c["dp"] * c["micro_batch"]) == 0)
    assert np.all(cfg.layers % (c["pp"] * c["vp"]) == 0)
    # one data-parallel rank: ZeRO moot, searched at stage 0 only
    assert np.all(c["zero"][c["dp"] * c["cp"] == 1] == 0)


def test_one_data_parallel_rank_searches_no_zero_stage_beyond_the_least() -> None:
    """8 GPUs, tp 8: dp 1, so ZeRO 1-3 would repeat ZeRO 0 (each at its own rank before)."""
    c = enumerate_configs(get_model("llama2-7b"), 8, 8, 8)
    one = c["dp"] == 1
    assert one.any() and set(c["zero"][one].tolist()) == {0}
    assert set(c["zero"][~one].tolist()) == {0, 1, 2, 3}


def test_recommended_configs_fit_and_are_sorted() -> None:
    out = plan("zoo:llama2-70b", 64, "dgx-a100", global_batch=256, top=10)
    assert out["searched"] > 1000 and 0 < out["feasible"] <= out["searched"]
    times = [r["time_s"]["total"] for r in out["top"]]
    assert times == sorted(times)
    for r in out["top"]:
        c = r["config"]
        assert c["dp"] * c["tp"] * c["pp"] == 64
        assert r["memory_gb"]["total"] <= 80.0
        assert r["why"]


def test_nothing_fits_is_said() -> None:
    # 70B parameters need 16 bytes each of model state: 1.1 TB over 8 x 16 GB cannot hold it
    out = plan("zoo:llama2-70b", 8, "pai-v100-nvlink", global_batch=8, dtype="fp16")
    assert out["top"] == [] and out["feasible"] == 0
    assert "no configuration fits" in out["note"]
    # the command says so and exits 1 (no plan came back), with --json too; a plan exits 0
    args = ["plan", "zoo:llama2-70b", "--gpus", "8", "--node", "pai-v100-nvlink",
            "--global-batch", "8", "--dtype", "fp16"]
    res = runner.invoke(app, args)
    assert res.exit_code == 1 and "no configuration fits" in " ".join(res.output.split())
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 1 and json.loads(res.stdout)["feasible"] == 0
    assert runner.invoke(app, ["plan", "zoo:llama2-7b", "--gpus", "8", "--top", "1"]
                         ).exit_code == 0
    # a re-plan over GPU counts none of which holds it: 1 too; one that holds it at one: 0
    replan_args = ["plan", "zoo:llama2-70b", "--gpus", "8,16", "--node", "pai-v100-nvlink",
                   "--global-batch", "8", "--dtype", "fp16"]
    assert runner.invoke(app, replan_args).exit_code == 1
    assert runner.invoke(app, ["plan", "zoo:llama2-7b", "--gpus", "8,16"]).exit_code == 0


def test_price_ranks_by_cost(tmp_path) -> None:
    price = tmp_path / "price.toml"
    price.write_text('[gpu.A100-SXM4-80GB]\nusd_per_gpu_hour = 2.0\nsource = "example"\n'
                     '[gpu.H100-SXM5-80GB]\nusd_per_gpu_hour = 8.0\nsource = "example"\n')
    out = plan("zoo:llama2-7b", 16, "dgx-a100,dgx-h100", global_batch=128, top=3, price=price)
    best = out["by_cost"][0]
    # the H100 is faster per iteration but costs 4x per GPU-hour: the A100 is cheaper per token
    assert out["top"][0]["gpu"] == "H100-SXM5-80GB"
    assert best["gpu"] == "A100-SXM4-80GB"
    usd = 2.0 if best["gpu"] == "A100-SXM4-80GB" else 8.0
    expected = usd * 16 * best["time_s"]["total"] / 3600 / (128 * 4096) * 1e6
    assert best["usd_per_million_tokens"] == pytest.approx(expected)
    costs = [r["usd_per_million_tokens"] for r in out["by_cost"]]
    assert costs == sorted(costs)


def test_rank_must_be_known() -> None:
    with pytest.raises(TraincastError, match="unknown ranking 'cost'") as exc:
        plan("zoo:llama2-7b", 8, "dgx-a100", rank="cost")
    assert "time, expected" in exc.value.hint


def test_bad_price_file(tmp_path) -> None:
    bad = tmp_path / "p.toml"
    bad.write_text('[gpu.A100-SXM4-80GB]\nusd_per_gpu_hour = -1\nsource = "x"\n')
    with pytest.raises(TraincastError, match="positive"):
        plan("zoo:llama2-7b", 8, "dgx-a100", price=bad)


def test_slow_network_costs_time() -> None:
    out = plan("zoo:llama2-70b", 128, "dgx-a100", global_batch=512, top=3, network="eth25")
    assert out["network"]["top"][0]["time_s"]["total"] >= out["top"][0]["time_s"]["total"]
    assert "eth25" in out["network"]["summary"]


def test_cli_plan_json() -> None:
    res = runner.invoke(app, ["plan", "zoo:mixtral-8x7b", "--gpus", "64", "--node", "dgx-h100",
                              "--global-batch", "256", "--top", "2", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert len(out["top"]) == 2
    for r in out["top"]:
        assert r["config"]["ep"] in (1, 2, 4, 8)          # divides the 8 experts
        assert r["memory_gb"]["total"] <= 80.0


def test_cli_plan_table() -> None:
    res = runner.invoke(app, ["plan", "zoo:llama3-8b", "--gpus", "16", "--top", "2"])
    assert res.exit_code == 0, res.output
    assert "Fastest configurations" in res.stdout
    assert "[node]" not in res.stdout  # one preset: no row names it


def test_cli_plan_over_several_presets_names_each_rows_preset() -> None:
    res = runner.invoke(app, ["plan", "zoo:llama2-7b", "--gpus", "16", "--top", "3",
                              "--node", "dgx-a100,dgx-b200"])
    assert res.exit_code == 0, res.output
    fastest = res.stdout.split("Fastest configurations")[1].split("#: rank")[0]
    assert fastest.count("[dgx-b200]") + fastest.count("[dgx-a100]") == 3
    assert "[node]: the node preset the configuration runs on" in fastest


def test_cli_predict_hybrid_json() -> None:
    res = runner.invoke(app, ["predict", "--arch", "hybrid", "--model", "zoo:gpt3-175b",
                              "--node", "dgx-a100", "--dp", "8", "--tp", "8", "--pp", "8",
                              "--global-batch", "512", "--recompute", "selective", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    for key in ("time_s", "share", "bottleneck", "gpu_util", "tokens_per_s_per_gpu",
                "model_tflops_per_gpu", "memory_gb"):
        assert key in out
    assert out["job"]["gpus"] == 512
    assert out["tokens_per_s_per_gpu"] == pytest.approx(
        512 * 2048 / (out["time_s"]["total"] * 512))


def test_no_zero3_with_pipelines() -> None:
    c = enumerate_configs(get_model("llama2-70b"), 64, 8, 256)
    assert not np.any((c["zero"] >= 2) & (c["pp"] > 1))
    assert np.any(c["zero"] == 3) and np.any(c["pp"] > 1)


def test_plan_takes_every_llm_zoo_name_and_rejects_a_cnn() -> None:
    out = plan("zoo:llama-7b", 8, "dgx-a100", global_batch=64, top=1)
    assert out["seq"] == 2048 and out["params"] == 6_738_415_616 and out["top"]
    with pytest.raises(TraincastError, match="zoo:resnet50 .*no decoder-only"):
        plan("zoo:resnet50", 8, "dgx-a100")


def test_model_tflops_above_the_peak_are_explained() -> None:
    import json

    # FlashAttention-3 (0.75 of the peak on the causal half it runs): at 131k tokens the
    # full-square count credits twice the attention FLOPs the kernel runs, above the peak
    args = ["plan", "zoo:llama2-7b", "--gpus", "64", "--node", "dgx-h100", "--top", "2",
            "--framework", "megatron-core", "--attention", "flash3"]
    long = runner.invoke(app, [*args, "--seq", "131072"], env={"COLUMNS": "200"})
    assert long.exit_code == 0, long.output
    rows = json.loads(runner.invoke(app, [*args, "--seq", "131072", "--json"]).output)["top"]
    # the H100 SXM's dense bf16 peak, NVIDIA's datasheet: 989.4 TFLOP/s
    above = [r["rank"] for r in rows if r["model_tflops_per_gpu"] > 989.4]
    assert [r["rank"] for r in rows if r["mfu"] > 1] == above
    assert rows[0]["mfu"] == pytest.approx(rows[0]["model_tflops_per_gpu"] / 989.4, rel=1e-3)
    assert above, "the full-square count at 131k tokens should exceed the peak"
    assert f"TFLOP/s of #{above[0]}" in long.output
    assert "full attention square" in long.output
    short = runner.invoke(app, [*args, "--seq", "4096"], env={"COLUMNS": "200"})
    assert short.exit_code == 0 and "full attention square" not in short.output
    # predict of the same configuration says it too, of its MFU over the dense peak
    one = runner.invoke(app, rows[0]["predict"].split()[1:], env={"COLUMNS": "200"})
    assert one.exit_code == 0, one.output
    assert f"MFU {100 * rows[0]['mfu']:.0f}% is above the 989.4 TFLOP/s dense bf16 peak" \
        in one.output and "full attention square" in one.output


def test_changes_name_only_what_changed_as_the_table_names_it() -> None:
    from traincast.parallel.plan import changes

    a = {"dp": 32, "tp": 2, "pp": 1, "ep": 1, "cp": 1, "zero": 1, "micro_batch": 4,
         "recompute": 0, "vp": 1, "sp": 0}
    b = a | {"dp": 16, "pp": 2, "micro_batch": 2, "sp": 1}
    assert changes(a, b) == ["dp 32→16", "pp 1→2", "mb 4→2", "sp off→on"]
    assert changes(a, b, ("dp", "pp", "tp")) == ["dp 32→16", "pp 1→2"]  # tp 2→2 not said
    assert changes(a, a) == []
    assert changes(a, a | {"shard": 8}) == ["shard all→8"]  # HSDP over 8 of the 32 ranks
    assert changes(a, a | {"shard": 32}) == []  # every rank, said or not


def test_a_preset_that_cannot_run_the_dtype_is_left_out_and_named() -> None:
    from traincast.errors import TraincastError
    from traincast.parallel.plan import plan

    out = plan("zoo:llama2-7b", 16, "dgx-a100,dgx-h100", dtype="fp8", top=3)
    assert out["nodes"] == ["dgx-h100"] and {r["node"] for r in out["top"]} == {"dgx-h100"}
    assert "no fp8 peak" in out["left_out"]["dgx-a100"]  # the A100 has no fp8 tensor cores
    with pytest.raises(TraincastError, match="no preset of --node dgx-a100,pai-v100-nvlink"):
        plan("zoo:llama2-7b", 16, "dgx-a100,pai-v100-nvlink", dtype="fp8")
    with pytest.raises(TraincastError, match="no fp8 peak"):  # one preset: its own error
        plan("zoo:llama2-7b", 16, "dgx-a100", dtype="fp8")


def test_a_preset_without_a_rate_for_the_attention_is_left_out_and_named() -> None:
    from traincast.errors import TraincastError
    from traincast.parallel.plan import plan

    # cuDNN's fused attention needs compute capability 8.0: the V100 (7.0) is left out
    out = plan("zoo:llama2-7b", 16, "pai-v100-nvlink,dgx-a100", dtype="fp16",
               attention="cudnn", top=2)
    assert out["nodes"] == ["dgx-a100"]
    assert "attention cudnn has no rate" in out["left_out"]["pai-v100-nvlink"]
    # FlashAttention-3 runs on Hopper only: the A100 is left out
    out = plan("zoo:llama2-7b", 16, "dgx-a100,dgx-h100", attention="flash3", top=2)
    assert out["nodes"] == ["dgx-h100"] and "flash3 has no rate" in out["left_out"]["dgx-a100"]
    with pytest.raises(TraincastError, match="flash3 has no rate"):
        plan("zoo:llama2-7b", 16, "dgx-a100", attention="flash3")


def test_a_preset_named_twice_is_searched_once_and_a_model_path_is_quoted(tmp_path) -> None:
    import shlex

    from traincast.parallel.plan import plan

    once = plan("zoo:llama2-7b", 16, "dgx-a100")
    twice = plan("zoo:llama2-7b", 16, "dgx-a100, dgx-a100")
    assert twice["searched"] == once["searched"] and twice["nodes"] == ["dgx-a100"]
    # a path with a space comes back as one shell word in the predict line
    folder = tmp_path / "my models"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 1024, "num_hidden_layers": 4,
        "num_attention_heads": 8, "intermediate_size": 2816, "vocab_size": 32000,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5}))
    spec = f"hf:{folder}/config.json"
    res = plan(spec, 8, "dgx-a100")
    assert res["model"] == "my models"  # a config.json is named after its folder
    words = shlex.split(res["top"][0]["predict"])
    assert words[words.index("--model") + 1] == spec


def test_a_tensor_group_that_does_not_divide_the_node_is_priced_across_it() -> None:
    # ranks tensor-innermost: tp = 3 on nodes of 4 puts ranks 3-5 on two nodes, so the groups
    # run at the network's rate and plan does not search it; tp = 3 on one node of 4 stays
    from traincast.hardware.catalog import load_catalog
    from traincast.parallel.hybrid import in_node, predict_hybrid

    assert in_node(3, 4, 12) == np.False_ and in_node(3, 4, 3) == np.True_
    assert in_node(4, 8, 64) == np.True_ and in_node(16, 8, 64) == np.False_
    assert list(in_node(np.array([1, 2, 3, 4, 6]), 4, 12)) == [True, True, False, True, False]
    cat = load_catalog()
    node = cat.nodes["ws-rtx4090"]
    assert node.gpus == 4
    intra = predict_hybrid("zoo:gpt2", node="ws-rtx4090", dp=1, tp=3, global_batch=8)
    cross = predict_hybrid("zoo:gpt2", node="ws-rtx4090", dp=4, tp=3, global_batch=8)
    nic_bw = cat.links[node.nic].bw_gbs * cat.links[node.nic].efficiency
    # the same per-GPU tensor all-reduces, at the NIC's rate across nodes, not the intra link's
    assert cross["comm_s"]["tp"] > 3 * intra["comm_s"]["tp"]
    assert cross["hardware"]["nic_collective_gbs"] <= nic_bw + 1e-9
    assert any("does not divide nodes of 4" in w for w in cross["warnings"])
    assert not any("tensor parallelism" in w for w in intra["warnings"])
    top = plan("zoo:gpt2", 12, "ws-rtx4090", global_batch=96)["top"]
    assert top and all(row["config"]["tp"] in (1, 2, 4) for row in top)


def test_pipeline_stages_are_outermost_so_two_nodes_put_a_stage_boundary_on_the_network() -> None:
    # Megatron-LM's rank order (tensor, context, data, pipeline): dp 4 x tp 2 x pp 2 on two
    # 8-GPU nodes puts stage 0 on one node and stage 1 on the other, so the pipeline's
    # transfers cross the NIC (a 1 Gbit/s one: far slower); on one node (dp 2) they do not
    from traincast.parallel.hybrid import predict_hybrid

    kw = {"node": "dgx-a100", "tp": 2, "pp": 2, "global_batch": 64}
    two_nodes = [predict_hybrid("zoo:gpt2", dp=4, nic=nic, **kw)["comm_s"]["pp"]
                 for nic in (None, "1Gbit")]
    one_node = [predict_hybrid("zoo:gpt2", dp=2, nic=nic, **kw)["comm_s"]["pp"]
                for nic in (None, "1Gbit")]
    assert two_nodes[1] > 10 * two_nodes[0]
    assert one_node[1] == one_node[0]
    # the data-parallel ring of each stage (4 ranks, 2 apart: 8 consecutive GPUs) stays in
    # its node whatever the NIC (Llama 2's embedding and head are not tied: no first-to-last
    # stage all-reduce, which GPT-2's tied ones add over the network)
    dp = [predict_hybrid("zoo:llama2-7b", dp=4, nic=nic, **kw)["comm_s"]["dp"]
          for nic in (None, "1Gbit")]
    assert dp[1] == dp[0] > 0


def test_rows_above_every_published_mfu_are_marked_in_the_table() -> None:
    """A row whose MFU and HFU are both above the best published bf16 run (llm-foundry's
    MPT-7B on A100 80 GB, 64.23% MFU) gets a '*' beside its TFLOP/s, with a legend line and
    the caution under the table naming each; a row within it gets none."""
    args = ["plan", "zoo:llama2-7b", "--gpus", "32", "--node", "dgx-a100", "--framework",
            "fsdp", "--top", "12"]
    rows = json.loads(runner.invoke(app, [*args, "--json"]).stdout)["top"]
    text = runner.invoke(app, args, env={"COLUMNS": "200"}).stdout
    marked = {r["rank"] for r in rows if r["mfu"] > 0.6423 and r["hfu"] > 0.6423}
    assert marked and len(marked) < len(rows)  # both kinds of row in the table
    for r in rows:
        line = next(ln for ln in text.splitlines() if ln.lstrip().startswith(f"{r['rank']} ")
                    and "dp=" in ln)
        assert line.rstrip().endswith("*") == (r["rank"] in marked), line
    flat = " ".join(text.split())
    assert "*: an MFU above every published run of this precision" in flat
    assert all(f"#{k} " in flat.split("MFU (")[1] for k in marked)


def test_a_mixture_above_the_best_published_mfu_is_marked_whatever_its_hfu() -> None:
    """Mixtral on 64 H100: its best rows' MFU is above the best published bf16 run (64.23%)
    while their HFU is within it, which for a dense model would read as the attention square;
    no mixture of experts is among the published runs, so plan marks the rows and both plan
    and predict --arch hybrid say so."""
    args = ["plan", "zoo:mixtral-8x7b", "--gpus", "64", "--node", "dgx-h100", "--framework",
            "megatron-core", "--top", "1"]
    row = json.loads(runner.invoke(app, [*args, "--json"]).stdout)["top"][0]
    assert row["mfu"] > 0.6423 >= row["hfu"]
    text = runner.invoke(app, args, env={"COLUMNS": "200"}).stdout
    line = next(ln for ln in text.splitlines() if ln.lstrip().startswith("1 ") and "dp=" in ln)
    assert line.rstrip().endswith("*")
    flat = " ".join(text.split())
    assert "none of them is a mixture of experts" in flat and "attention square" not in flat
    said = " ".join(runner.invoke(app, row["predict"].split()[1:]).stdout.split())
    assert "none of them is a mixture of experts" in said


def test_plan_says_when_compute_curves_falls_back_to_flat_peaks() -> None:
    from traincast.hardware.catalog import load_catalog

    # the shipped A100 entry has no measured curves: asked for, it is priced at flat peaks
    out = plan("zoo:llama2-7b", 8, "dgx-a100", catalog=load_catalog(compute="curves"), top=1)
    assert list(out["compute_fallback"]) == ["A100-SXM4-80GB"]
    assert out["compute_fallback"]["A100-SXM4-80GB"].startswith(
        "--compute curves, but A100-SXM4-80GB has no measured curves")
    assert "compute_fallback" not in plan("zoo:llama2-7b", 8, "dgx-a100", top=1)


def test_a_curves_run_without_curves_says_so_once(tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from traincast.cli import app
    from traincast.cli.common import within

    monkeypatch.chdir(tmp_path)
    sample = str(Path(__file__).resolve().parents[1] / "src/traincast/trace/sample/"
                 "sample.parquet")
    res = CliRunner().invoke(app, ["colocate", sample, "--db", str(tmp_path / "s.duckdb"),
                                   "--compute", "curves"])
    assert res.exit_code == 0, res.output
    said = " ".join(res.stderr.split())
    assert said.count("--compute curves, but no GPU of the catalog has measured curves") == 1
    # -0 given to a ranged option reads 0 (a table then shows "0", not "-0")
    assert str(within(0.0, 1.0)(-0.0)) == "0.0"
