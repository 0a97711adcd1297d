"""Prices (one format, on-demand and spot) and plan on preemptible machines (Varuna): every
formula against numbers worked by hand."""

from __future__ import annotations

import json
import math
import tomllib
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from traincast.cli import app
from traincast.errors import TraincastError
from traincast.hardware.catalog import load_catalog
from traincast.hardware.prices import Prices, load_prices
from traincast.parallel import spot
from traincast.parallel.models import get_model
from traincast.parallel.plan import plan, replan
from traincast.parallel.spot import Resilience

runner = CliRunner()
SPOT_A100 = 1.0
OD_A100 = 4.0


def price_file(tmp_path: Path) -> Path:
    p = tmp_path / "prices.toml"
    p.write_text(f'[gpu.A100-SXM4-80GB]\nusd_per_gpu_hour = {OD_A100}\nsource = "od test"\n'
                 f'spot_usd_per_gpu_hour = {SPOT_A100}\nspot_source = "spot test"\n')
    return p


# ---- the formulas, by hand ---------------------------------------------------------------

def test_checkpoint_write_and_job_rate() -> None:
    # 18 GB at 1 GB/s = 18 s; 0.18 preemptions per node-hour on 2 nodes = 0.36/h = 1e-4 /s
    assert spot.checkpoint_write_s(18e9, 1.0) == pytest.approx(18.0)
    assert spot.job_preemption_rate_per_s(0.18, 2) == pytest.approx(1e-4)


def test_young_daly_interval() -> None:
    # tau = sqrt(2 x 18 / 1e-4) = sqrt(360000) = 600 s; no preemptions: never checkpoint
    assert spot.young_daly_interval_s(18.0, 1e-4) == pytest.approx(600.0)
    assert np.isinf(spot.young_daly_interval_s(18.0, 0.0))


def test_overhead_factor_by_hand() -> None:
    # 1 + 18/600 + 1e-4 (600/2 + 200) = 1 + 0.03 + 0.05 = 1.08
    assert spot.overhead_factor(18.0, 600.0, 1e-4, 200.0) == pytest.approx(1.08)
    # a given interval of 900 s: 1 + 0.02 + 1e-4 (450 + 200) = 1.085
    assert spot.overhead_factor(18.0, 900.0, 1e-4, 200.0) == pytest.approx(1.085)
    # on-demand machines still pay for the checkpoints they write: 1 + 18/900
    assert spot.overhead_factor(18.0, 900.0, 0.0, 200.0) == pytest.approx(1.02)
    assert spot.overhead_factor(18.0, np.inf, 0.0, 200.0) == 1.0
    # nothing to write (C = 0, so Young/Daly's tau = 0): the limit 1 + lambda Rs, not 0/0
    assert spot.overhead_factor(0.0, spot.young_daly_interval_s(0.0, 1e-4), 1e-4,
                                200.0) == pytest.approx(1.02)


def test_young_daly_minimizes_the_first_order_overhead() -> None:
    tau = spot.young_daly_interval_s(18.0, 1e-4)
    taus = tau * np.array([0.5, 0.9, 1.0, 1.1, 2.0])
    f = spot.overhead_factor(18.0, taus, 1e-4, 200.0)
    assert np.argmin(f) == 2
    # at the optimum: 1 + sqrt(2 C lambda) + lambda Rs = 1 + 0.06 + 0.02
    assert f[2] == pytest.approx(1.0 + math.sqrt(2 * 18 * 1e-4) + 1e-4 * 200)


def test_resilience_evaluate_defaults_and_vectorized() -> None:
    r = Resilience(preemptions_per_hour=0.18, checkpoint_gbs=1.0, checkpoint_bytes=18e9)
    e = r.evaluate(np.array([2, 4]), default_bytes=1.0)
    # default restart = C + 120 s = 138 s; 2 nodes: 1 + 0.03 + 1e-4 (300 + 138) = 1.0738
    assert e["restart_s"] == pytest.approx([138.0, 138.0])
    assert e["overhead"][0] == pytest.approx(1.0738)
    # 4 nodes: lambda = 2e-4, tau = sqrt(36 / 2e-4) = 424.26 s,
    # 1 + 18/424.26 + 2e-4 (212.13 + 138) = 1.11246
    tau4 = math.sqrt(36 / 2e-4)
    assert e["interval_s"][1] == pytest.approx(tau4)
    assert e["overhead"][1] == pytest.approx(1 + 18 / tau4 + 2e-4 * (tau4 / 2 + 138))
    assert e["preemptions_per_hour_job"] == pytest.approx([0.36, 0.72])
    assert e["switch_s"] == pytest.approx([156.0, 156.0])          # C + Rs


def test_no_preemptions_no_overhead() -> None:
    e = Resilience().evaluate(8, default_bytes=1e9)
    assert float(e["overhead"]) == 1.0
    with pytest.raises(TraincastError, match="--checkpoint-gbs"):
        Resilience(preemptions_per_hour=0.5)
    # a checkpoint size or restart time prices nothing without the storage bandwidth: refused,
    # not dropped
    for kw, flags in (({"checkpoint_bytes": 500e9}, "--checkpoint-gb"),
                      ({"restart_s": 99.0}, "--restart-s"),
                      ({"checkpoint_bytes": 500e9, "restart_s": 99.0},
                       "--checkpoint-gb and --restart-s")):
        with pytest.raises(TraincastError, match=f"^{flags} price checkpoints .* need "
                                                 "--checkpoint-gbs"):
            Resilience(**kw)
    with pytest.raises(TraincastError, match="--preemptions-per-hour"):
        Resilience(preemptions_per_hour=-1.0, checkpoint_gbs=1.0)
    with pytest.raises(TraincastError, match="--checkpoint-gbs must be a positive number"):
        Resilience(checkpoint_gbs=0.0)
    # infinity is positive: what it is not is finite, and the error says so
    with pytest.raises(TraincastError, match="must be a positive and finite number, got inf"):
        Resilience(checkpoint_gbs=float("inf"))
    # typing slips beyond any machine are refused, in the flag's unit, not priced
    for kw, says in (({"checkpoint_gbs": 1e300}, "--checkpoint-gbs must be at most 1e+06"),
                     ({"checkpoint_gbs": 1e-300}, "--checkpoint-gbs must be at least 1e-06"),
                     ({"checkpoint_bytes": 1e30}, "--checkpoint-gb must be at most 1e+09"),
                     ({"checkpoint_every_s": 1e300}, "--checkpoint-every must be at most 1e+09"),
                     ({"restart_s": 1e12}, "--restart-s must be at most 1e+09"),
                     ({"preemptions_per_hour": 4000.0}, "--preemptions-per-hour must be at most "
                                                        "3600")):
        with pytest.raises(TraincastError, match=says.replace("+", r"\+")):
            Resilience(**{"checkpoint_gbs": 2.0, **kw})


def test_checkpoint_bytes_are_weights_and_adam_state() -> None:
    cfg = get_model("llama2-7b")
    # mixed precision: 2 bytes of weights + 12 of Adam state (fp32 master, m, v) per parameter
    assert spot.checkpoint_bytes(cfg, "bf16") == pytest.approx(14 * cfg.params)
    # fp32: 4 bytes of weights + 8 of Adam moments
    assert spot.checkpoint_bytes(cfg, "fp32") == pytest.approx(12 * cfg.params)


# ---- plan with prices and preemptions ------------------------------------------------------

def test_plan_spot_cost_by_hand(tmp_path: Path) -> None:
    # 64 GPUs of dgx-a100 = 8 nodes; 0.045 preemptions per node-hour -> lambda = 1e-4 /s;
    # an 18 GB checkpoint at 1 GB/s: C = 18 s, tau = 600 s; Rs = 200 s: overhead 1.08
    res = Resilience(preemptions_per_hour=0.045, checkpoint_gbs=1.0, checkpoint_bytes=18e9,
                     restart_s=200.0)
    out = plan("zoo:llama2-7b", 64, "dgx-a100", global_batch=256, top=2,
               price=price_file(tmp_path), spot=True, resilience=res)
    best = out["by_cost"][0]
    tokens = 256 * 4096
    assert best["overhead_factor"] == pytest.approx(1.08)
    assert best["s_per_million_tokens"] == pytest.approx(
        best["time_s"]["total"] * 1.08 / tokens * 1e6)
    assert best["usd_per_million_tokens"] == pytest.approx(
        SPOT_A100 * 64 * best["time_s"]["total"] * 1.08 / 3600 / tokens * 1e6)
    assert out["price"]["market"] == "spot"
    assert out["price"]["sources"] == {"dgx-a100": "spot test"}
    e = out["resilience"]["by_node"]["dgx-a100"]
    assert e["nodes"] == 8 and e["interval_s"] == pytest.approx(600.0)
    assert "note" not in e                  # lambda (tau + Rs) = 1e-4 x 800 = 0.08
    # on-demand machines are not preempted: overhead 1 at 4x the price
    od = out["on_demand"]
    assert od["overhead_factor"] == 1.0 and od["source"] == "od test"
    assert od["usd_per_million_tokens"] == pytest.approx(
        4.0 * best["usd_per_million_tokens"] / 1.08)
    assert out["spot_saving"] == pytest.approx(1 - 1.08 / 4.0)


def test_frequent_preemptions_are_flagged() -> None:
    # 2 per node-hour on 8 nodes: lambda = 16/3600 /s, tau = sqrt(36 / lambda) = 90 s;
    # lambda (tau + Rs) = (16/3600) x 290 = 1.29 > 0.3
    res = Resilience(preemptions_per_hour=2.0, checkpoint_gbs=1.0, checkpoint_bytes=18e9,
                     restart_s=200.0)
    out = plan("zoo:llama2-7b", 64, "dgx-a100", global_batch=256, top=1, resilience=res)
    e = out["resilience"]["by_node"]["dgx-a100"]
    assert e["interval_s"] == pytest.approx(90.0)
    assert "1.29" in e["note"] and "optimistic" in e["note"]
    assert "usd_per_million_tokens" not in out["top"][0]      # no price: time only
    assert out["top"][0]["overhead_factor"] == pytest.approx(1 + 18 / 90 + 16 / 3600 * 245)


def test_plan_on_demand_price_file_without_preemptions(tmp_path: Path) -> None:
    out = plan("zoo:llama2-7b", 16, "dgx-a100", global_batch=128, top=1,
               price=price_file(tmp_path))
    best = out["by_cost"][0]
    assert best["overhead_factor"] == 1.0 and "resilience" not in out
    assert best["usd_per_million_tokens"] == pytest.approx(
        OD_A100 * 16 * best["time_s"]["total"] / 3600 / (128 * 4096) * 1e6)
    with pytest.raises(TraincastError, match="--spot needs --price"):
        plan("zoo:llama2-7b", 16, "dgx-a100", spot=True)


def test_plan_reads_the_shipped_price_file_by_name_and_by_path() -> None:
    path = resources.files("traincast") / "hardware" / "prices" / "aws.toml"
    by_name = plan("zoo:llama2-7b", 8, "dgx-a100", global_batch=64, top=1, price="aws")
    by_path = plan("zoo:llama2-7b", 8, "dgx-a100", global_batch=64, top=1, price=Path(str(path)))
    old = plan("zoo:llama2-7b", 8, "dgx-a100", global_batch=64, top=1, price="aws-on-demand")
    usd = {o["by_cost"][0]["usd_per_million_tokens"] for o in (by_name, by_path, old)}
    assert len(usd) == 1


def test_missing_spot_price_names_file_and_key(tmp_path: Path) -> None:
    p = tmp_path / "od.toml"
    p.write_text('[gpu.A100-SXM4-80GB]\nusd_per_gpu_hour = 4.0\nsource = "x"\n')
    with pytest.raises(TraincastError, match=r"od\.toml: no spot_usd_per_gpu_hour in "
                                             r"\[node\.dgx-a100\] or \[gpu\.A100-SXM4-80GB\]"):
        plan("zoo:llama2-7b", 8, "dgx-a100", price=p, spot=True)


def test_replan_as_machines_go(tmp_path: Path) -> None:
    res = Resilience(preemptions_per_hour=0.045, checkpoint_gbs=1.0, checkpoint_bytes=18e9,
                     restart_s=200.0)
    out = replan("zoo:llama2-7b", [64, 48, 32], "dgx-a100", price=price_file(tmp_path),
                 spot=True, resilience=res, global_batch=1024)
    rows = {r["gpus"]: r for r in out["rows"]}
    assert [r["gpus"] for r in out["rows"]] == [64, 48, 32]
    # a global batch of 1024 = 2^10 sequences splits over no data-parallel width with a factor
    # 3 or 5, and tp/pp cannot take it (32 heads, 32 layers): with 48 GPUs the best plan uses 4
    # whole nodes (32 GPUs) and releases the other 2 (the default batch, 960 = lcm(64, 48, 32)
    # x 5, would divide among all 48)
    assert out["global_batch"] == 1024
    assert rows[48]["gpus_used"] == 32 and rows[32]["gpus_used"] == 32
    assert rows[48]["label"] == rows[32]["label"] and not rows[32]["changed"]
    assert rows[48]["changed"] and not rows[64]["changed"]
    # 8 nodes -> lambda = 1e-4 /s: 1.08 as above; one re-plan costs C + Rs = 218 s
    assert rows[64]["overhead_factor"] == pytest.approx(1.08)
    assert rows[64]["switch_s"] == pytest.approx(218.0)
    # 4 nodes: lambda = 5e-5, tau = sqrt(36 / 5e-5) = 848.5 s
    tau = math.sqrt(36 / 5e-5)
    assert rows[32]["overhead_factor"] == pytest.approx(1 + 18 / tau + 5e-5 * (tau / 2 + 200))
    for r in out["rows"]:
        assert r["usd_per_million_tokens"] == pytest.approx(
            SPOT_A100 * r["gpus_used"] * r["s_per_million_tokens"] / 3600)
        # each count compared with its cheapest on-demand plan (no preemptions, 4x the price)
        od = OD_A100 * r["gpus_used"] * r["s_per_million_tokens"] / r["overhead_factor"] / 3600
        assert r["on_demand_usd_per_million_tokens"] == pytest.approx(od)
        assert r["spot_saving"] == pytest.approx(1 - r["usd_per_million_tokens"] / od)


def test_replan_across_presets_minimizes_expected_time() -> None:
    # Llama 2 7B on 16 GPUs, fp16, 2 preemptions per node-hour, checkpoints at 0.5 GB/s:
    # C = 14 bytes x 6.738e9 parameters / 0.5e9 = 188.7 s, Rs = C + 120 s. pai-v100-pcie has
    # 8 GPUs per node (2 nodes), a10-pcie 4 (4 nodes): the A10 iteration is faster, but twice
    # the nodes preempt twice as often, so its expected time per million tokens is larger.
    kw = {"global_batch": 128, "dtype": "fp16",
          "resilience": Resilience(2.0, checkpoint_gbs=0.5)}
    c = 14 * get_model("zoo:llama2-7b").params / 0.5e9
    rows = {}
    for nd, nodes in (("pai-v100-pcie", 2), ("a10-pcie", 4)):
        rows[nd] = plan("zoo:llama2-7b", 16, nd, top=1, **kw)["top"][0]
        lam = 2.0 * nodes / 3600
        tau = math.sqrt(2 * c / lam)
        overhead = 1 + c / tau + lam * (tau / 2 + c + 120)
        assert rows[nd]["overhead_factor"] == pytest.approx(overhead)
        assert rows[nd]["s_per_million_tokens"] == pytest.approx(
            rows[nd]["time_s"]["total"] * overhead / (128 * 4096) * 1e6)
    v100, a10 = rows["pai-v100-pcie"], rows["a10-pcie"]
    assert a10["time_s"]["total"] < v100["time_s"]["total"]
    assert v100["overhead_factor"] == pytest.approx(1.990, abs=1e-3)
    assert a10["overhead_factor"] == pytest.approx(2.602, abs=1e-3)
    # the hand comparison: the smaller expected time per million tokens wins
    want = min(rows.values(), key=lambda r: r["s_per_million_tokens"])
    assert want is v100
    out = replan("zoo:llama2-7b", [16], "pai-v100-pcie,a10-pcie", **kw)
    row = out["rows"][0]
    assert (row["node"], row["gpus_used"], row["label"]) == ("pai-v100-pcie", 16, want["label"])
    assert row["s_per_million_tokens"] == pytest.approx(want["s_per_million_tokens"])
    # plan ranks the two presets together the same way: with preemptions its default is
    # rank="expected"; by iteration time (rank="time") the A10 comes first
    both = "pai-v100-pcie,a10-pcie"
    expected = plan("zoo:llama2-7b", 16, both, top=3, **kw)
    assert expected["ranked_by"] == "expected"
    assert expected["top"][0]["node"] == "pai-v100-pcie"
    assert expected["top"][0]["label"] == want["label"]
    spm = [r["s_per_million_tokens"] for r in expected["top"]]
    assert spm == sorted(spm)
    by_time = plan("zoo:llama2-7b", 16, both, top=1, rank="time", **kw)
    assert (by_time["ranked_by"], by_time["top"][0]["node"]) == ("time", "a10-pcie")
    # without preemptions or checkpoints, iteration time ranks (every overhead is 1)
    calm = plan("zoo:llama2-7b", 16, both, top=1, global_batch=128, dtype="fp16")
    assert (calm["ranked_by"], calm["top"][0]["node"]) == ("time", "a10-pcie")


def test_replan_unknown_node_keeps_its_hint() -> None:
    with pytest.raises(TraincastError, match="unknown node 'nope'") as exc:
        replan("zoo:llama2-7b", [16, 8], "dgx-a100,nope")
    assert "dgx-a100" in exc.value.hint


# ---- the price format ------------------------------------------------------------------

def test_price_format_errors(tmp_path: Path) -> None:
    cat = load_catalog()
    bad = tmp_path / "p.toml"
    cases = {
        '[gpu.V100]\nusd_per_gpu_hour = 3.0\nsource = "x"\nspot_usd_per_gpu_hour = 1.0\n':
            r"p\.toml: \[gpu\.V100\] key 'spot_source' is required",
        '[gpu.V100]\nusd_per_gpu_hour = 3.0\nsource = "x"\nspot_usd_per_gpu_hour = 0\n'
        'spot_source = "y"\n': r"p\.toml: \[gpu\.V100\] key 'spot_usd_per_gpu_hour' must be "
                               r"a positive number",
        '[gpu.V100]\nusd_per_gpu_hour = 3.0\nsource = "x"\nprice = 1\n':
            r"p\.toml: \[gpu\.V100\]: unknown key 'price'",
        'usd_per_gpu_hour = 2.0\n': r"p\.toml: unknown table or key \[usd_per_gpu_hour\]",
        '[gpu.V100]\nsource = "x"\n': r"\[gpu\.V100\] key 'source' without 'usd_per_gpu_hour'",
        '[gpu.NOPE]\nusd_per_gpu_hour = 3.0\nsource = "x"\n': r"\[gpu\.NOPE\]: unknown GPU",
        '[node.nope]\nusd_per_gpu_hour = 3.0\nsource = "x"\n': r"\[node\.nope\]: unknown node",
    }
    for text, msg in cases.items():
        bad.write_text(text)
        with pytest.raises(TraincastError, match=msg):
            load_prices(bad, cat)
    with pytest.raises(TraincastError, match="price file not found"):
        load_prices("no-such-prices", cat)
    # an unknown name keeps the catalog's hint (the known names)
    bad.write_text('[node.nope]\nusd_per_gpu_hour = 3.0\nsource = "x"\n')
    with pytest.raises(TraincastError) as exc:
        load_prices(bad, cat)
    assert "dgx-a100" in exc.value.hint


def test_node_price_wins_and_spot_is_separate(tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    p.write_text('[gpu.V100]\nusd_per_gpu_hour = 3.0\nsource = "gpu od"\n'
                 'spot_usd_per_gpu_hour = 1.0\nspot_source = "gpu spot"\n'
                 '[node.pai-v100-nvlink]\nusd_per_gpu_hour = 2.5\nsource = "node od"\n')
    pr = load_prices(p)
    assert pr.per_gpu_hour("pai-v100-nvlink", "V100-SXM2-16GB") == 2.5
    assert pr.source_of("pai-v100-nvlink", "V100-SXM2-16GB") == "node od"
    # the node has no spot price of its own: its GPU's
    assert pr.per_gpu_hour("pai-v100-nvlink", "V100-SXM2-16GB", spot=True) == 1.0
    assert pr.source_of("pai-v100-nvlink", "V100-SXM2-16GB", spot=True) == "gpu spot"
    assert math.isnan(pr.per_gpu_hour("dgx-a100", "A100-SXM4-80GB"))
    assert pr.sources == {"gpu.V100-SXM2-16GB": "gpu od", "node.pai-v100-nvlink": "node od"}


def test_shipped_prices_cite_every_number() -> None:
    text = (resources.files("traincast") / "hardware" / "prices" / "aws.toml").read_text()
    raw = tomllib.loads(text)["gpu"]
    pr = load_prices("aws")
    assert set(pr.by_gpu) == set(pr.spot_by_gpu) == set(raw)
    for gpu, entry in raw.items():
        assert entry["source"].strip() and entry["spot_source"].strip()
        assert 0 < entry["spot_usd_per_gpu_hour"] < entry["usd_per_gpu_hour"], gpu
    # derived entries say how: on-demand / 5 (Varuna's published ratio)
    a100 = raw["A100-SXM4-80GB"]
    assert a100["spot_usd_per_gpu_hour"] == pytest.approx(a100["usd_per_gpu_hour"] / 5)
    assert "Varuna" in a100["spot_source"]


def test_recommend_reexports_the_one_loader() -> None:
    from traincast.analysis.recommend import Prices as RecPrices
    from traincast.analysis.recommend import load_prices as rec_load_prices

    assert RecPrices is Prices and rec_load_prices is load_prices


# ---- command line ----------------------------------------------------------------------

def test_cli_plan_spot_json(tmp_path: Path) -> None:
    res = runner.invoke(app, ["plan", "zoo:llama2-7b", "--gpus", "16", "--global-batch", "128",
                              "--price", str(price_file(tmp_path)), "--spot",
                              "--preemptions-per-hour", "0.09", "--checkpoint-gbs", "1",
                              "--checkpoint-gb", "18", "--restart-s", "200", "--top", "1",
                              "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # 2 nodes x 0.09 = 0.18/h = 5e-5 /s; tau = sqrt(36 / 5e-5) = 848.5 s
    tau = math.sqrt(36 / 5e-5)
    e = out["resilience"]["by_node"]["dgx-a100"]
    assert e["interval_s"] == pytest.approx(tau)
    assert out["by_cost"][0]["overhead_factor"] == pytest.approx(
        1 + 18 / tau + 5e-5 * (tau / 2 + 200))
    assert out["price"]["market"] == "spot" and 0 < out["spot_saving"] < 1


def test_cli_plan_gpu_list_table_and_json(tmp_path: Path) -> None:
    args = ["plan", "zoo:llama2-7b", "--gpus", "32,16", "--global-batch", "128", "--price",
            str(price_file(tmp_path)), "--spot", "--preemptions-per-hour", "0.1",
            "--checkpoint-gbs", "2"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "Best plan per GPU count" in res.stdout and "$/M tok" in res.stdout
    res = runner.invoke(app, [*args, "--json"], env={"COLUMNS": "200"})
    out = json.loads(res.stdout)
    assert [r["gpus"] for r in out["rows"]] == [32, 16]
    assert all(r["overhead_factor"] > 1 for r in out["rows"])
    text = " ".join(runner.invoke(app, args, env={"COLUMNS": "200"}).stdout.split())
    for r in out["rows"]:  # the spot figure next to on-demand, as plan on one count says it
        assert (f"{r['gpus']} GPUs: spot {r['usd_per_million_tokens']:.3f} vs on-demand "
                f"{r['on_demand_usd_per_million_tokens']:.3f} $/M tokens") in text
        assert f"spot saves {100 * r['spot_saving']:.0f}%" in text
    assert "spot price of dgx-a100: spot test" in text
    assert "assumed: no preemptions" not in text
    calm = runner.invoke(app, ["plan", "zoo:llama2-7b", "--gpus", "32,16", "--global-batch",
                               "128", "--price", str(price_file(tmp_path)), "--spot"])
    assert "assumed: no preemptions" in " ".join(calm.stdout.split())


def test_replan_over_presets_names_each_rows_node() -> None:
    args = ["plan", "zoo:llama2-7b", "--gpus", "16,8", "--node", "dgx-a100,dgx-h100",
            "--global-batch", "128"]
    out = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    res = runner.invoke(app, args, env={"COLUMNS": "200"})
    lines = res.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:3] == ["GPUs", "used",
                                                                            "node"])
    for r, line in zip(out["rows"], lines[header + 2:], strict=False):
        assert line.split()[:3] == [str(r["gpus"]), str(r["gpus_used"]), r["node"]]


def test_spot_dearer_than_on_demand_is_said_so() -> None:
    from traincast.cli.plan import saving_words

    assert saving_words(0.76) == "spot saves 76%"
    assert saving_words(-2.0) == "spot costs 3x the on-demand cost"  # spot / on-demand = 3


def test_a_checkpoint_longer_than_its_interval_is_flagged() -> None:
    # an 18 GB checkpoint at 1 GB/s, C = 18 s, written every 10 s of work: C / tau = 1.8
    res = Resilience(checkpoint_gbs=1.0, checkpoint_bytes=18e9, checkpoint_every_s=10.0)
    out = plan("zoo:llama2-7b", 8, "dgx-a100", global_batch=64, top=1, resilience=res)
    note = out["resilience"]["by_node"]["dgx-a100"]["note"]
    assert "takes 18 s to write, longer than the 10 s" in note and "1.8" in note
    assert out["top"][0]["overhead_factor"] == pytest.approx(1 + 18 / 10)
    with pytest.raises(TraincastError, match="at most 3600"):
        Resilience(preemptions_per_hour=1e9, checkpoint_gbs=1.0)


def test_cli_plan_bad_flags() -> None:
    res = runner.invoke(app, ["plan", "zoo:llama2-7b", "--gpus", "64,x"])
    assert res.exit_code != 0 and isinstance(res.exception, TraincastError)
    res = runner.invoke(app, ["plan", "zoo:llama2-7b", "--gpus", "8",
                              "--preemptions-per-hour", "1"])
    assert isinstance(res.exception, TraincastError)
    assert "--checkpoint-gbs" in str(res.exception)
    # --top ranks one count's configurations; a re-plan shows one per count
    res = runner.invoke(app, ["plan", "zoo:llama2-7b", "--gpus", "64,32", "--top", "1"])
    assert isinstance(res.exception, TraincastError)
    assert "--top 1 ranks the configurations of one GPU count" in str(res.exception)


def test_a_preset_without_a_price_is_planned_by_time_not_by_cost() -> None:
    """The shipped AWS file prices no B200 (sold by capacity block only): planned with an H100
    preset, the B200 is left out of the cost ranking and named; alone, it is an error."""
    from traincast.errors import TraincastError
    from traincast.parallel.plan import plan

    out = plan("zoo:llama3-8b", 8, "dgx-h100,dgx-b200", price="aws")
    assert out["price"]["unpriced"] == ["dgx-b200"]
    assert {r["node"] for r in out["by_cost"]} == {"dgx-h100"}
    assert "dgx-b200" in {r["node"] for r in out["top"]}  # the fastest is still shown
    with pytest.raises(TraincastError, match=r"no usd_per_gpu_hour in \[node.dgx-b200\]"):
        plan("zoo:llama3-8b", 8, "dgx-b200", price="aws")


def test_each_counts_spot_saving_is_its_own_plans() -> None:
    # over two presets a count's plan (least expected time) need not be the cheapest spot
    # plan: its saving is its own cost against the count's cheapest on-demand plan
    out = replan("zoo:llama2-7b", [64, 32], "dgx-a100,dgx-h100", price="aws", spot=True)
    for r in out["rows"]:
        assert r["spot_saving"] == pytest.approx(
            1 - r["usd_per_million_tokens"] / r["on_demand_usd_per_million_tokens"])


def test_replan_steps_by_the_nodes_of_the_presets_that_can_run_it() -> None:
    # fp8: the A10 (4 per node, no fp8 peak) is left out, so 16 GPUs are tried as whole
    # dgx-h100 nodes of 8 (16 and 8), not in steps of 4
    out = replan("zoo:llama2-7b", [16], "a10-pcie,dgx-h100", dtype="fp8", global_batch=128)
    assert "a10-pcie" in out["left_out"] and out["nodes"] == ["dgx-h100"]
    (row,) = out["rows"]
    assert row["searched"] == sum(plan("zoo:llama2-7b", n, "dgx-h100", dtype="fp8",
                                       global_batch=128, top=1)["searched"] for n in (16, 8))
