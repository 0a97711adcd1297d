"""Recommend: the fastest architecture that fits, by hand, and the cheapest with prices."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from test_whatif import (
    AR16_BASE,
    PS4_BASE,
    PS4_NVLINK,
    PS16_BASE,
    PSBIG_BASE,
    W,
    small_trace,
    write_small_trace,
)
from traincast.analysis.recommend import load_prices, recommend
from traincast.cli import app
from traincast.errors import TraincastError
from traincast.hardware.catalog import load_catalog


def rows_by_job(result: dict) -> dict[str, dict]:
    return {r["job_id"]: r for r in result["rows"].to_pylist()}


def test_fastest_architecture_by_hand(catalog) -> None:
    r = recommend(small_trace(), catalog, nodes=["pai-v100-nvlink"])
    rows = rows_by_job(r)
    ps4 = rows["ps4"]
    # 4 GPUs fit one node: ring all-reduce over NVLink, 2 (n-1)/n W / 150e9
    assert ps4["arch_architecture"] == "allreduce-local"
    assert ps4["arch_total_s"] == pytest.approx(PS4_NVLINK, rel=1e-12)
    assert ps4["arch_speedup"] == pytest.approx(PS4_BASE / PS4_NVLINK, rel=1e-12)
    assert ps4["base_bottleneck"] == "comm"
    assert "communication" in ps4["arch_reason"] and "NVLink" in ps4["arch_reason"]
    # 16 GPUs do not fit one node: all-reduce across 2 nodes, flat ring at the NIC
    ps16 = rows["ps16"]
    ring = 0.12 + 2 * 15 / 16 * W / 3.125e9
    assert ps16["arch_architecture"] == "allreduce-cluster"
    assert ps16["arch_speedup"] == pytest.approx(PS16_BASE / ring, rel=1e-12)
    # 20 GB of model state per GPU only fits as ps-worker (weights + grads = 10 GB): keep
    assert rows["psbig"]["arch_architecture"] == "ps-worker"
    assert rows["psbig"]["arch_speedup"] == 1.0
    assert rows["psbig"]["arch_reason"].startswith("keep")
    # a 1w1g job has nothing faster with one GPU on its own hardware
    assert rows["one"]["arch_architecture"] == "1w1g"
    assert rows["one"]["arch_speedup"] == 1.0
    assert r["summary"]["arch"]["architectures"]["allreduce-local"] == 1


def test_reason_names_the_link_of_the_architectures_rule(catalog) -> None:
    # 4 GPUs placed 2 per node span N = 2 nodes: the ring crosses the 25 Gbit NIC
    # (R bw(nic) = 3.125 GB/s <= bw(NVLink) = 150 GB/s), although n <= 8; moved into one node,
    # allreduce-local stays on NVLink
    job = {"job_id": ["j"], "architecture": ["allreduce-cluster"], "n_gpus": [4],
           "gpus_per_node": [2], "node": ["pai-v100-nvlink"], "workload": [None],
           "flops_compute_bound": [1e11], "bytes_memory_bound": [1e8], "weight_bytes": [4e9],
           "embedding_bytes_touched": [0.0], "input_bytes": [1e6]}
    row = recommend(job, catalog, nodes=["pai-v100-nvlink"])["rows"].to_pylist()[0]
    assert row["base_bottleneck"] == "comm"
    assert row["arch_architecture"] == "allreduce-local"
    assert "(allreduce-cluster over 25 Gbit Ethernet)" in row["arch_reason"]
    assert row["arch_reason"].endswith("with allreduce-local over NVLink (nvlink2-v100)")


def test_cheapest_with_prices(catalog, tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('[gpu.V100-SXM2-16GB]\nusd_per_gpu_hour = 3.06\n'
                      'source = "test price"\n')
    r = recommend(small_trace(), catalog, nodes=["pai-v100-nvlink"], prices=prices)
    ps4 = rows_by_job(r)["ps4"]
    # cost per iteration = T_total x n x USD per GPU-hour / 3600
    assert ps4["base_cost_per_iter_usd"] == pytest.approx(PS4_BASE * 4 * 3.06 / 3600, rel=1e-12)
    assert ps4["cheapest_cost_per_iter_usd"] == pytest.approx(PS4_NVLINK * 4 * 3.06 / 3600,
                                                              rel=1e-12)
    assert r["prices"]["sources"] == {"gpu.V100-SXM2-16GB": "test price"}
    assert r["unpriced_nodes"] == []
    # the summary's costs: USD per 1,000 iterations of every job priced, now and as chosen,
    # by hand: 1000 x 3.06 / 3600 x sum of T x n. Every job runs on V100s at one price, so
    # the cheapest is the fastest: ps4 moves to NVLink all-reduce, ps16 to the ring of ar16,
    # psbig (only fits as ps-worker), ar16 and the 1w1g job (T = 0.12 s) stay
    usd = 1000 * 3.06 / 3600
    now = 4 * PS4_BASE + 16 * AR16_BASE + 0.12 + 16 * PS16_BASE + 2 * PSBIG_BASE
    chosen = 4 * PS4_NVLINK + 16 * AR16_BASE + 0.12 + 16 * AR16_BASE + 2 * PSBIG_BASE
    cheap = r["summary"]["cheapest"]
    assert cheap["priced"] == 5
    assert cheap["usd_per_1k_now"] == pytest.approx(usd * now, rel=1e-9)
    assert cheap["usd_per_1k_chosen"] == pytest.approx(usd * chosen, rel=1e-9)
    # a candidate node whose GPU the file does not price is named, not dropped in silence
    r = recommend(small_trace(), catalog, nodes=["pai-v100-nvlink", "dgx-a100"], prices=prices)
    assert r["unpriced_nodes"] == ["dgx-a100"]
    by_node = tmp_path / "by_node.toml"  # a node priced by its own name
    by_node.write_text('[node.dgx-a100]\nusd_per_gpu_hour = 4.1\nsource = "test price"\n')
    r = recommend(small_trace(), catalog, nodes=["pai-v100-nvlink", "dgx-a100"], prices=by_node)
    assert r["unpriced_nodes"] == ["pai-v100-nvlink"]
    # the jobs' own hardware is named too where only other nodes are candidates
    r = recommend(small_trace(), catalog, nodes=["dgx-a100"], prices=by_node)
    assert r["unpriced_nodes"] == ["pai-v100-nvlink"]
    # a node's price is for its own GPU: another GPU on that preset takes the GPU's price
    both = tmp_path / "both.toml"
    both.write_text('[node.dgx-a100]\nusd_per_gpu_hour = 4.1\nsource = "node quote"\n'
                    '[gpu.H100-SXM5-80GB]\nusd_per_gpu_hour = 9.0\nsource = "gpu quote"\n')
    p = load_prices(both, catalog)
    assert p.per_gpu_hour("dgx-a100", "A100-SXM4-80GB") == 4.1
    assert p.per_gpu_hour("dgx-a100", "H100-SXM5-80GB") == 9.0
    assert np.isnan(p.per_gpu_hour("dgx-a100", "V100-SXM2-16GB"))
    assert p.source_of("dgx-a100", "H100-SXM5-80GB") == "gpu quote"
    # a file that prices none of the options (nor the jobs' own GPUs): no cost to compare,
    # an error naming the file, not a "cheapest" choice of unknown costs
    for text, said in (("", "prices none"), ('[gpu.V100]\nspot_usd_per_gpu_hour = 1.0\n'
                                             'spot_source = "test"\n', "spot prices only")):
        none = tmp_path / "none.toml"
        none.write_text(text)
        with pytest.raises(TraincastError, match=said) as err:
            recommend(small_trace(), catalog, nodes=["pai-v100-nvlink"], prices=none)
        assert str(none) in str(err.value)


def test_price_file_errors(tmp_path: Path) -> None:
    cat = load_catalog()
    bad = tmp_path / "p.toml"
    bad.write_text("[gpu.V100]\nusd_per_gpu_hour = 3.0\n")
    with pytest.raises(TraincastError, match="source"):
        load_prices(bad, cat)
    bad.write_text('[gpu.V100]\nusd_per_gpu_hour = -1\nsource = "x"\n')
    with pytest.raises(TraincastError, match=r"p\.toml.*usd_per_gpu_hour"):
        load_prices(bad, cat)
    assert load_prices("aws-on-demand", cat).by_gpu["V100-SXM2-16GB"] > 0
    # a figure no GPU-hour costs (1.7e308 once overflowed to a null cost), and one GPU priced
    # twice, by its alias and its name (the last table won)
    bad.write_text('[gpu.V100]\nusd_per_gpu_hour = 1.7e308\nsource = "x"\n')
    with pytest.raises(TraincastError, match=r"'usd_per_gpu_hour' = 1.7e\+308 is above 10,000"):
        load_prices(bad, cat)
    bad.write_text('[gpu.V100]\nusd_per_gpu_hour = 3\nsource = "x"\n'
                   '[gpu.V100-SXM2-16GB]\nusd_per_gpu_hour = 5\nsource = "y"\n')
    with pytest.raises(TraincastError, match=r"\[gpu.V100-SXM2-16GB\] and \[gpu.V100\] both"):
        load_prices(bad, cat)


def test_cli_whatif_and_recommend_json(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    trace = write_small_trace(tmp_path / "t.csv")
    runner = CliRunner()
    res = runner.invoke(app, ["whatif", str(trace), "--scenario", "eth100", "--db",
                              str(tmp_path / "s.duckdb"), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["summary"]["jobs"] == 5 and out["summary"]["matched"] == 5
    res = runner.invoke(app, ["recommend", "--flops", "1.57e12", "--mem-bytes", "9e9",
                              "--weight-bytes", "2.5e8", "--input-bytes", "1.575e8", "--arch",
                              "ps-worker", "--workers", "4", "--ps", "1", "--node",
                              "pai-v100-nvlink", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["jobs"] == 1
    assert out["rows"][0]["arch_architecture"] == "allreduce-local"
    # --node is the one job's node; --candidate-node limits where it may move
    res = runner.invoke(app, ["recommend", "--flops", "1.57e12", "--mem-bytes", "9e9",
                              "--weight-bytes", "2.5e8", "--input-bytes", "1.575e8", "--arch",
                              "ps-worker", "--workers", "4", "--ps", "1", "--node",
                              "pai-v100-nvlink", "--candidate-node", "dgx-a100", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert {c.split("@")[1] for c in out["candidates"]} == {"current", "dgx-a100"}
    assert out["rows"][0]["node"] == "pai-v100-nvlink"


def test_json_rows_by_default_and_left_out_with_no_jobs(catalog, tmp_path: Path,
                                                        monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    trace = write_small_trace(tmp_path / "t.csv")
    runner = CliRunner()
    args = ["recommend", str(trace), "--db", str(tmp_path / "s.duckdb"), "--candidate-node",
            "pai-v100-nvlink", "--catalog", str(tmp_path / "pinned.toml"),  # the fixture's
            "--compute", "paper",
            "--json"]
    res = runner.invoke(app, [*args, "--no-jobs"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # the summary is there, per-job rows are not: ps4 alone moves to allreduce-local
    assert "rows" not in out and out["jobs"] == 5
    assert out["summary"]["arch"]["architectures"]["allreduce-local"] == 1
    res = runner.invoke(app, args)  # per-job rows by default
    assert res.exit_code == 0, res.output
    rows = {r["job_id"]: r for r in json.loads(res.stdout)["rows"]}
    assert sorted(rows) == ["ar16", "one", "ps16", "ps4", "psbig"]
    assert rows["ps4"]["arch_total_s"] == pytest.approx(PS4_NVLINK, rel=1e-12)


def test_progress_counts_every_step(catalog, tmp_path: Path) -> None:
    seen: list[tuple[str, int, int]] = []
    recommend(small_trace(), catalog, nodes=["pai-v100-nvlink"],
              progress=lambda *a: seen.append(a))
    # 5 candidate architectures (1w1g, allreduce-local, allreduce-cluster, ps-worker, pearl) on
    # the job's own hardware and on 1 node = 10 candidates; then arch, best and the summary
    assert [d for _, d, _ in seen] == list(range(1, 14)) and {t for *_, t in seen} == {13}
    assert seen[0][0] == "1w1g@current" and seen[9][0] == "pearl@pai-v100-nvlink"
    assert [s for s, _, _ in seen[10:]] == ["choosing arch", "choosing best", "summary"]
    prices = tmp_path / "prices.toml"
    prices.write_text('[gpu.V100-SXM2-16GB]\nusd_per_gpu_hour = 3.06\nsource = "test"\n')
    seen.clear()
    recommend(small_trace(), catalog, nodes=["pai-v100-nvlink"], prices=prices,
              progress=lambda *a: seen.append(a))
    assert len(seen) == 10 + 3 + 1 and seen[-2][0] == "choosing cheapest"


def test_summary_counts_by_hand() -> None:
    import numpy as np
    import pyarrow as pa

    from traincast.analysis.recommend import _summary

    rows = pa.table({"architecture": ["1w1g", "ps-worker", "1w1g", None, "ps-worker"],
                     "node": pa.array(["a", "a", "a", "c", "a"]).dictionary_encode(),
                     "arch_speedup": [1.0, 2.0, 4.0, np.nan, 1.005],
                     "arch_architecture": ["1w1g", "pearl", "pearl", None, "ps-worker"],
                     "arch_node": pa.array(["a", "b", "b", "c", "a"]).dictionary_encode(),
                     **{f"best_{k}": v for k, v in (("speedup", [1.0] * 5),
                                                    ("architecture", ["x"] * 5),
                                                    ("node", ["n"] * 5))},
                     "cheapest_speedup": [0.5, 1.0, 1.0, 1.0, 1.0],
                     "cheapest_architecture": ["1w1g", "ps-worker", "1w1g", None, "ps-worker"],
                     "cheapest_node": pa.array(["b", "a", "a", "c", "a"]),
                     "base_cost_per_iter_usd": [1.0, 2.0, np.nan, np.nan, 3.0],
                     "cheapest_cost_per_iter_usd": [0.5, 1.0, 1.0, np.nan, 3.0]})
    summary = _summary(rows, priced=True)
    # costs over the jobs priced both ways (rows 1, 2 and 5): 1 + 2 + 3 now, 0.5 + 1 + 3 chosen,
    # per 1,000 iterations
    assert (summary["cheapest"]["priced"], summary["cheapest"]["usd_per_1k_now"],
            summary["cheapest"]["usd_per_1k_chosen"]) == (3, 6000.0, 4500.0)
    s = summary["arch"]
    # 4 predicted (NaN is not); changed = another architecture or node: rows 2 and 3
    assert s["predicted"] == 4 and s["changed_share"] == 2 / 4
    assert s["mean_speedup"] == pytest.approx((1 + 2 + 4 + 1.005) / 4)
    assert s["median_speedup"] == pytest.approx((1.005 + 2) / 2)
    # most frequent first, ties by name
    assert list(s["architectures"].items()) == [("pearl", 2), ("1w1g", 1), ("ps-worker", 1)]
    assert s["nodes"] == {"a": 2, "b": 2} and s["changed_to"] == {"pearl": 2}
    # the mean over the changed jobs alone (rows 2 and 3), beside the mean over all four
    assert s["changed_mean_speedup"] == pytest.approx((2 + 4) / 2)
    # the cheapest may be slower: a move to node b at half the speed is a change
    assert summary["cheapest"]["changed_share"] == 1 / 5
    assert summary["best"]["changed_share"] == 1.0


def test_output_file_is_checked_first_and_written_whole(tmp_path: Path, monkeypatch) -> None:
    import pyarrow as pa

    import traincast.analysis.recommend as rec_mod
    import traincast.analysis.study as study_mod

    monkeypatch.chdir(tmp_path)
    trace = write_small_trace(tmp_path / "t.csv")
    # a missing folder fails before any job is evaluated
    monkeypatch.setattr(rec_mod, "evaluate_columns", lambda *a, **k: pytest.fail("evaluated"))
    for cmd in (["recommend"], ["whatif", "--scenario", "eth100", "--jobs"]):
        res = CliRunner().invoke(app, [*cmd, str(trace), "--db", str(tmp_path / "s.duckdb"),
                                       "-o", str(tmp_path / "no" / "r.csv")])
        assert isinstance(res.exception, TraincastError), res.output
        assert str(res.exception).startswith("-o ") and "no folder" in str(res.exception)
    # a write that fails half-way leaves neither a partial file nor its temporary
    out = tmp_path / "r.csv"

    def half(table, path) -> None:  # noqa: ANN001
        Path(path).write_text("job_id\n")
        raise OSError("disk full")

    monkeypatch.setattr(study_mod.pacsv, "write_csv", half)
    with pytest.raises(OSError, match="disk full"):
        study_mod.write_csv(pa.table({"job_id": ["a"]}), out)
    assert list(tmp_path.glob("*r.csv*")) == []


def test_a_flat_peak_reference_node_is_no_default_candidate() -> None:
    # paper-2019's GPU (11 TFLOP/s flat, no SM count) can only be priced by the paper's peak
    # model: an optimistic bound the kernel-model presets would always lose to
    from traincast.analysis.recommend import default_candidates
    from traincast.hardware.catalog import load_catalog

    cat = load_catalog()
    assert "paper-2019" in cat.nodes
    nodes = {c.node for c in default_candidates(cat)}
    assert "paper-2019" not in nodes and {"dgx-a100", "pai-v100-nvlink"} <= nodes
    assert "paper-2019" in {c.node for c in default_candidates(load_catalog(compute="paper"))}
    assert "paper-2019" in {c.node for c in default_candidates(cat, nodes=["paper-2019"])}


def test_reasons_say_cost_for_the_cheapest_and_why_a_job_has_no_time(catalog,
                                                                       tmp_path: Path) -> None:
    # "one" (1w1g, V100) at 3.06 USD per GPU-hour; a T4 node at 0.01: the T4 is slower (8.1
    # against 15.7 TFLOP/s of fp32 peak for 1.57e12 FLOPs) but cheaper per iteration, and the
    # line says so, not which component the slower GPU "eases"
    prices = tmp_path / "prices.toml"
    prices.write_text('[gpu.V100-SXM2-16GB]\nusd_per_gpu_hour = 3.06\nsource = "test"\n'
                      '[gpu.T4]\nusd_per_gpu_hour = 0.01\nsource = "test"\n')
    jobs = small_trace()
    # a CPU job (0 GPUs: no architecture either) and 16 GPUs as allreduce-local, which is one
    # node of 8 GPUs
    extra = {"job_id": ["cpu", "packed"], "architecture": [None, "allreduce-local"],
             "n_gpus": [0, 16], "n_workers": [None, None], "n_ps": [None, None],
             "gpus_per_worker": [None, None], "gpu_type": [None, "V100"]}
    for k in jobs:
        jobs[k] = jobs[k][:3] + (extra[k] if k in extra else jobs[k][:2])
    rows = rows_by_job(recommend(jobs, catalog, nodes=["pai-v100-nvlink", "pai-t4"],
                                 prices=prices))
    one = rows["one"]
    assert one["cheapest_gpu"] == "T4" and one["cheapest_speedup"] < 1
    assert one["cheapest_reason"] == "1w1g on pai-t4 (T4): cheaper per iteration, though slower"
    # ps4 on two 2-GPU T4 nodes: a ring over the same 25 Gbit NICs moves 2 (n-1)/n W where the
    # server moves 2 n W per node (PS4_BASE): cheaper and faster, and it says what it cuts
    ps4 = rows["ps4"]
    assert ps4["cheapest_speedup"] > 1
    assert ps4["cheapest_reason"] == (
        "allreduce-cluster on pai-t4 (T4): cheaper per iteration, and faster: eases the "
        "weight/gradient communication bottleneck (ps-worker over 25 Gbit Ethernet) with "
        "allreduce-cluster over 25 Gbit Ethernet")
    # no GPUs: that is the reason, not an unknown architecture
    assert rows["cpu"]["arch_reason"] == "unknown: no GPUs (n_gpus missing or 0)"
    # naming no GPU type or node, no GPU node to keep or move to: the default node is no fact
    assert all(rows["cpu"][f"{p}{k}"] is None for p in ("", "arch_", "best_", "cheapest_")
               for k in ("node", "gpu")), rows["cpu"]
    assert one["node"] == "pai-v100-nvlink" and one["best_node"] is not None
    # one that names its GPU type keeps it, as does a job whose GPU count is unknown
    typed = {**jobs, "gpu_type": ["V100"] * len(jobs["job_id"])}
    again = rows_by_job(recommend(typed, catalog, nodes=["pai-v100-nvlink"]))
    assert again["cpu"]["node"] == "pai-v100-nvlink" and again["cpu"]["gpu"] == "V100-SXM2-16GB"
    unknown = {**typed, "n_gpus": [None if j == "cpu" else g
                                   for j, g in zip(typed["job_id"], typed["n_gpus"], strict=True)],
               "gpu_type": [None] * len(typed["job_id"])}
    assert rows_by_job(recommend(unknown, catalog, nodes=["pai-v100-nvlink"]))["cpu"]["node"] \
        == "pai-v100-nvlink"
    # a CPU job on a GPU type the price file leaves out costs nothing: no 'no price' for it
    p100 = {**jobs, "gpu_type": ["P100" if j == "cpu" else "V100" for j in jobs["job_id"]]}
    out = recommend(p100, catalog, nodes=["pai-v100-nvlink", "pai-t4"], prices=prices)
    assert rows_by_job(out)["cpu"]["node"] == "pai-p100" and out["unpriced_nodes"] == []
    # no time as given, but a setup that fits: named, with the reason it had none
    packed = rows["packed"]
    assert packed["base_total_s"] is None and packed["best_total_s"] > 0
    # the V100 nodes are the faster of the two presets for it, the T4 the cheaper
    for prefix in ("arch", "best"):
        assert packed[f"{prefix}_reason"] == (
            "allreduce-cluster on pai-v100-nvlink: fits and has a predicted time (as given: "
            "shape does not fit the architecture)")
        # the choice is named in its columns too (a job without one has them null)
        assert (packed[f"{prefix}_architecture"], packed[f"{prefix}_node"]) == (
            "allreduce-cluster", "pai-v100-nvlink")
    # on a cheaper GPU the line names it
    assert packed["cheapest_reason"] == (
        "allreduce-cluster on pai-t4 (T4): fits and has a predicted time (as given: shape does "
        "not fit the architecture)")


def test_the_cheapest_as_fast_and_without_a_price_for_the_present(catalog,
                                                                    tmp_path: Path) -> None:
    # the 32 GB V100 node runs "one" exactly as fast as the 16 GB one (same SMs, clocks and
    # bandwidth) at a third of the price: "as fast", not "though slower"
    prices = tmp_path / "prices.toml"
    prices.write_text('[gpu.V100-SXM2-16GB]\nusd_per_gpu_hour = 3.06\nsource = "test"\n'
                      '[node.pai-v100m32-nvlink]\nusd_per_gpu_hour = 1.0\nsource = "test"\n')
    one = rows_by_job(recommend(small_trace(), catalog,
                                nodes=["pai-v100-nvlink", "pai-v100m32-nvlink"],
                                prices=prices))["one"]
    assert one["cheapest_speedup"] == pytest.approx(1.0, rel=1e-12)
    assert one["cheapest_reason"] == ("1w1g on pai-v100m32-nvlink (V100-SXM2-32GB): cheaper per "
                                      "iteration, as fast")
    # only the T4 has a price: the V100 setup has none to be cheaper than
    prices.write_text('[gpu.T4]\nusd_per_gpu_hour = 0.01\nsource = "test"\n')
    one = rows_by_job(recommend(small_trace(), catalog, nodes=["pai-v100-nvlink", "pai-t4"],
                                prices=prices))["one"]
    assert one["base_cost_per_iter_usd"] is None
    assert one["cheapest_reason"] == ("1w1g on pai-t4 (T4): the cheapest priced option (the "
                                      "present setup has no price), though slower")
    # no job's present setup (V100) is priced: the summed costs are unknown, not $0
    out = recommend(small_trace(), catalog, nodes=["pai-v100-nvlink", "pai-t4"], prices=prices)
    cheap = out["summary"]["cheapest"]
    assert cheap["priced"] == 0 and cheap["predicted"] == 5
    assert cheap["usd_per_1k_now"] is None and cheap["usd_per_1k_chosen"] is None
    from traincast.analysis.recommend import unpriced_why
    assert unpriced_why(cheap, "p.toml").startswith("no job's present setup has a price in "
                                                    "p.toml")


def test_a_job_without_a_prediction_has_no_choice(catalog) -> None:
    # no features: no time, so no architecture, node or GPU is chosen for it (null, "-")
    jobs = {"job_id": ["known", "unknown"], "architecture": ["1w1g", "allreduce-local"],
            "n_gpus": [1.0, 4.0], "node": ["pai-v100-nvlink"] * 2,
            "flops_compute_bound": [1e12, None], "bytes_memory_bound": [1e9, None],
            "weight_bytes": [1e8, None]}
    rows = rows_by_job(recommend(jobs, catalog, nodes=["pai-v100-nvlink", "dgx-a100"]))
    for prefix in ("arch", "best"):
        assert rows["known"][f"{prefix}_architecture"] is not None
        assert rows["known"][f"{prefix}_node"] is not None
        assert rows["unknown"][f"{prefix}_architecture"] is None
        assert rows["unknown"][f"{prefix}_node"] is None and rows["unknown"][f"{prefix}_gpu"] \
            is None
        assert rows["unknown"][f"{prefix}_reason"].startswith("unknown: ")


def test_a_job_that_does_no_work_keeps_its_setup_and_says_why(catalog) -> None:
    """A job of 0 FLOPs, 0 bytes and 0 weights on one GPU takes 0 s: nothing is faster, and
    the reason says so rather than calling its features unknown."""
    jobs = {"job_id": ["idle"], "architecture": ["1w1g"], "n_gpus": [1.0],
            "flops_compute_bound": [0.0], "bytes_memory_bound": [0.0], "weight_bytes": [0.0]}
    row = rows_by_job(recommend(jobs, catalog))["idle"]
    assert row["base_total_s"] == 0.0 and row["arch_architecture"] == "1w1g"
    assert row["arch_reason"] == "keep: nothing to gain (every component of its time is 0 s)"


def test_a_move_for_compute_quotes_the_rates_the_job_was_priced_at() -> None:
    """A FLOP-bound job moved from a V100 to a B200 says how fast its fp32 work runs on each,
    as the model priced it: on the shipped catalog the measured-kernel model's large product
    (docs/model.md), below the datasheet peaks (15.7 and 75 TFLOP/s)."""
    catalog = load_catalog()
    jobs = {"job_id": ["flops"], "architecture": ["1w1g"], "n_gpus": [1.0], "gpu_type": ["V100"],
            "flops_compute_bound": [1e15], "bytes_memory_bound": [1e9], "weight_bytes": [0.0]}
    row = rows_by_job(recommend(jobs, catalog, nodes=["dgx-b200"]))["flops"]
    assert row["best_gpu"] == "B200"
    # by hand (docs/model.md): neither board is below the power reference (boost held); the
    # V100's 16 lanes per partition issue a tile's loads for free, the B200's 32 do not: its
    # best tile, 128 x 128, keeps 1 / (1 + c_issue 256 / 128^2) of the rate
    k = catalog.kernel_model["params"]
    assert 300 / (80 * 64 * 1.53 * 12) > k["power_ref"]
    assert 1000 / (148 * 128 * 1.965 * 4) > k["power_ref"]
    e_b200 = 1 / (1 + k["c_issue"] * 256 / 128**2)
    old = 2 * 80 * 64 * 1.53e9 * k["simt_efficiency"] / k["choice_linear"] / 1e12
    new = 2 * 148 * 128 * 1.965e9 * k["simt_efficiency"] * e_b200 / k["choice_linear"] / 1e12
    assert old < 15.7 and new < 75
    assert row["best_reason"].endswith(
        f"eases the FLOP-bound compute bottleneck (V100-SXM2-16GB {old:.3g} -> B200 {new:.3g} "
        "TFLOP/s achievable)"), row["best_reason"]
    assert row["best_speedup"] == pytest.approx(new / old, rel=0.01)


def test_recommend_leaves_out_gpus_no_current_pytorch_build_runs() -> None:
    """The K80 (compute capability 3.7 < 5.0) is no default candidate, and is said to be left
    out; named with --candidate-node it is one; every other default preset's GPU is 5.0 or
    more (or no CUDA GPU)."""
    from traincast.analysis.recommend import default_candidates, unsupported_nodes

    cat = load_catalog()
    assert cat.gpus["K80"].compute_capability == 3.7
    assert set(unsupported_nodes(cat)) == {"pai-misc"}
    nodes = {c.node for c in default_candidates(cat) if c.node}
    assert "pai-misc" not in nodes and "dgx-b200" in nodes
    # Pascal (6.0, NVIDIA's table) still runs on PyTorch's CUDA 12.6 build: a candidate
    assert cat.gpus["P100-PCIE-16GB"].compute_capability == 6.0 and "pai-p100" in nodes
    assert {c.node for c in default_candidates(cat, ["pai-misc"]) if c.node} == {"pai-misc"}
    jobs = {"architecture": np.array(["1w1g"], dtype=object), "n_gpus": [1.0],
            "flops_compute_bound": [2.4e13], "bytes_memory_bound": [4e10], "weight_bytes": [1e8]}
    out = recommend(jobs, cat)
    assert "pai-misc" in out["left_out"] and "3.7" in out["left_out"]["pai-misc"]
    assert not any("pai-misc" in c for c in out["candidates"])


def test_recommend_says_which_presets_flat_peaks_leave_out(tmp_path: Path) -> None:
    """A user's preset whose GPU has datasheet peaks alone (no SM count) is left out of the
    default candidates and said to be, as the paper-2019 reference node; a job that runs on
    such a GPU is priced at its flat peaks, which the result names."""
    path = tmp_path / "c.toml"
    path.write_text('[gpu.Flat]\nsource = "t"\n[gpu.Flat.datasheet]\nfp32_tflops = 50\n'
                    'fp16_tflops = 400\nmem_bw_gbs = 2000\nmem_gb = 96\n'
                    '[node.flat-node]\ngpu = "Flat"\ngpus = 8\npcie = "pcie4x16"\n'
                    'intra = "nvlink3-a100"\nnic = "ib-hdr"\nsource = "t"\n')
    cat = load_catalog([path])
    jobs = {"architecture": np.array(["1w1g", "1w1g"], dtype=object), "n_gpus": [1.0, 1.0],
            "node": np.array(["dgx-a100", "flat-node"], dtype=object),
            "flops_compute_bound": [2.4e13] * 2, "bytes_memory_bound": [4e10] * 2,
            "weight_bytes": [1e8] * 2}
    out = recommend(jobs, cat)
    for nd in ("flat-node", "paper-2019"):
        assert "flat datasheet peaks" in out["left_out"][nd]
        assert not any(nd in c for c in out["candidates"])
    assert out["own_flat_peak_gpus"] == ["Flat"] and out["flat_peak_gpus"] == []
    # two A100 jobs, one on the paper-2019 node's links: no job runs that node's flat-peak
    # V100, so no caution names it
    a100 = {**{k: v for k, v in jobs.items() if k != "node"},
            "gpu_type": np.array(["A100", "A100"], dtype=object),
            "node": np.array([None, "paper-2019"], dtype=object)}
    assert recommend(a100, cat)["own_flat_peak_gpus"] == []



def test_a_gpu_move_quotes_rates_only_for_jobs_priced_at_them() -> None:
    """A job priced from aggregate features at the large-GEMM rate: its reason quotes each GPU's
    rate; a zoo workload priced op by op (TF32 convolutions, tiles): no one rate to quote."""
    from traincast.compute import rates

    cat = load_catalog()
    jobs = {"job_id": np.array(["agg", "zoo"], dtype=object),
            "architecture": np.array(["1w1g"] * 2, dtype=object), "n_gpus": [1.0, 1.0],
            "gpu_type": np.array(["V100"] * 2, dtype=object),
            "workload": np.array([None, "resnet50"], dtype=object),
            "flops_compute_bound": [2.4e13, 2.4e13], "bytes_memory_bound": [1e9, 1e9],
            "weight_bytes": [1e8, 1e8]}
    rows = rows_by_job(recommend(jobs, cat, nodes=["dgx-b200"]))
    v100, b200 = (rates(cat.gpu(g), "fp32", cat.compute)[0] / 1e12
                  for g in ("V100-SXM2-16GB", "B200"))
    assert f"(V100-SXM2-16GB {v100:.3g} -> B200 {b200:.3g} TFLOP/s achievable)" in \
        rows["agg"]["best_reason"]
    assert "(V100-SXM2-16GB -> B200, each of its ops priced on each GPU)" in \
        rows["zoo"]["best_reason"]


def test_a_named_compute_model_keeps_every_preset_a_candidate() -> None:
    from traincast.analysis.recommend import default_candidates

    auto = {c.node for c in default_candidates(load_catalog()) if c.node}
    for compute in ("paper", "kernel", "curves"):  # curves prices curve-less GPUs by paper
        named = {c.node for c in default_candidates(load_catalog(compute=compute)) if c.node}
        assert auto <= named and "paper-2019" in named, compute
    assert "paper-2019" not in auto  # only auto leaves the flat-peak reference node out


def test_cpu_jobs_get_no_node_no_choice_and_no_empty_table(tmp_path: Path) -> None:
    # a trace of CPU jobs only (n_gpus 0): characterize prints no architecture table of no row,
    # recommend names no node for them and no top choice
    trace = tmp_path / "cpu.csv"
    trace.write_text("job_id,n_gpus,start_time_s,end_time_s\nc1,0,0,60\nc2,0,0,120\n")
    db = str(tmp_path / "s.duckdb")
    runner = CliRunner()
    res = runner.invoke(app, ["characterize", str(trace), "--db", db])
    assert res.exit_code == 0, res.output
    assert "Architectures: none (no job uses a GPU)" in res.output
    assert "2 jobs with 0 GPUs" in res.output
    res = runner.invoke(app, ["recommend", "--db", db])
    assert res.exit_code == 0, res.output
    rows = [line.split() for line in res.output.splitlines() if line.startswith("c")]
    assert rows and all(" on " not in " ".join(r) for r in rows), res.output
    assert any(r[:4] == ["c1", "-", "(0", "GPUs)"] for r in rows)
    assert not any(line.rstrip().endswith(";") for line in res.output.splitlines())


def test_a_move_to_another_gpu_says_its_compute_runs_faster_too() -> None:
    """PS/Worker BERT-base on V100s over 25 Gbit Ethernet: the fastest choice anywhere moves it
    to another node, whose GPU also runs its compute faster; the line names both, not only
    the link it changes."""
    import json

    from typer.testing import CliRunner

    from traincast.cli import app

    res = CliRunner().invoke(app, ["recommend", "--model", "zoo:bert-base", "--arch", "ps-worker",
                                   "--workers", "8", "--ps", "2", "--json"])
    row = json.loads(res.stdout)["rows"][0]
    assert row["best_gpu"] != row["gpu"] and "communication" in row["best_reason"]
    assert (f"its compute runs faster on {row['best_gpu']} than on {row['gpu']} too"
            in row["best_reason"])
    # on its own hardware the GPU is the same: nothing said of it
    assert row["arch_gpu"] == row["gpu"] and "compute runs faster" not in row["arch_reason"]
    # and the compute did get faster there: the same job on the chosen node, by predict
    best = json.loads(CliRunner().invoke(app, [
        "predict", "--model", "zoo:bert-base", "--arch", row["best_architecture"],
        "--gpus", "8", "--node", row["best_node"], "--json"]).stdout)["time_s"]
    here = json.loads(CliRunner().invoke(app, [
        "predict", "--model", "zoo:bert-base", "--arch", "ps-worker", "--workers", "8", "--ps",
        "2", "--json"]).stdout)["time_s"]
    compute = ("compute_flop", "compute_mem")
    assert sum(best[k] for k in compute) < 0.95 * sum(here[k] for k in compute)


def test_a_near_tie_keeps_the_simpler_architecture(catalog) -> None:
    """PEARL moves the embeddings' touched rows E where an all-reduce moves whole tables E_ar:
    on one NVLink node it is faster by 2 (n-1)/n (E_ar - E) / bw(intra). A difference of a
    few µs in a 0.1 s step (0.01%) keeps allreduce-local, the earlier and simpler candidate;
    tables of 4 GB (about 50 ms saved) move the job to pearl."""
    from traincast.analysis.recommend import Candidate

    def best_arch(e_ar: float, e: float, **kw) -> tuple[str, float]:
        job = {"job_id": ["j"], "architecture": ["ps-worker"], "n_gpus": [4],
               "node": ["pai-v100-nvlink"], "workload": [None],
               "flops_compute_bound": [1e12], "bytes_memory_bound": [1e9],
               "weight_bytes": [1e9], "embedding_bytes_touched": [e],
               "embedding_allreduce_bytes": [e_ar], "input_bytes": [1e6]}
        kw = kw or {"nodes": ["pai-v100-nvlink"]}
        row = recommend(job, catalog, **kw)["rows"].to_pylist()[0]
        return row["arch_architecture"], row["arch_total_s"]

    intra_bps = 150e9  # the pinned catalog's NVLink 2 (conftest.PINNED): 150 GB/s, efficiency 1
    saved_s = 2 * 3 / 4 * (1e6 - 1e5) / intra_bps  # 9 µs
    arch, total_s = best_arch(1e6, 1e5)
    assert arch == "allreduce-local"
    # the tie: each priced alone, pearl is faster by exactly the embeddings' saving, under 0.1%
    # of the step
    _, pearl_s = best_arch(1e6, 1e5, candidates=[Candidate("pearl")], min_gain=0.0)
    _, local_s = best_arch(1e6, 1e5, candidates=[Candidate("allreduce-local")], min_gain=0.0)
    assert local_s - pearl_s == pytest.approx(saved_s, rel=1e-6)
    assert saved_s / total_s < 1e-3
    arch, total_s = best_arch(4e9, 1e6)
    assert arch == "pearl"
    assert 2 * 3 / 4 * (4e9 - 1e6) / intra_bps / total_s > 0.01


def test_the_terminal_shows_the_jobs_that_gain_most() -> None:
    import pyarrow as pa

    from traincast.cli.whatif import _most_gained

    rows = pa.table({"job_id": ["a", "b", "c", "d", "e"],
                     "best_speedup": [1.0, None, 3.0, 2.0, 3.0]})
    # largest first, ties (c, e) in the trace's order, a job without a prediction last
    assert [r["job_id"] for r in _most_gained(rows, 5)] == ["c", "e", "d", "a", "b"]
    assert [r["job_id"] for r in _most_gained(rows, 2)] == ["c", "e"]


@pytest.mark.parametrize("first, second", [("a", "z"), ("z", "a")])
def test_near_ties_keep_the_jobs_own_hardware_and_node_not_a_name(monkeypatch, first: str,
                                                                   second: str) -> None:
    """Times by candidate: on the job's hardware allreduce-local 1.0 and pearl 0.995 (a near
    tie: the simpler stays); on one node allreduce-local 0.60 and pearl 0.597 (a near tie on
    its node: allreduce-local, 0.60, is its choice); on another 0.598: the faster of the two
    nodes' choices, more than 1% faster than the own hardware's 1.0, whichever name comes
    first. With the bar at the present time (min_gain 0): a node 0.5% faster than the job as
    it runs is no reason to move it, even where its own hardware offers nothing faster."""
    from types import SimpleNamespace

    import traincast.analysis.recommend as rec
    from traincast.analysis.recommend import Candidate, _search

    def run(times: dict, bar: float) -> tuple[Candidate | None, Candidate | None]:
        cands = [Candidate(a, n) for a, n in times]

        def fake(sub, ext, cand, *args):  # noqa: ANN001, ANN202
            t = np.full(sub.n, times[cand.architecture, cand.node])
            return SimpleNamespace(total=t), None, np.ones(sub.n, dtype=bool)

        monkeypatch.setattr(rec, "_candidate", fake)
        cols = rec.Columns.of({"architecture": ["ps-worker"], "n_gpus": [4.0]})
        best = {g: (np.array([bar]), np.array([-1])) for g in ("arch", "best")}
        _search(cols, rec.workload_extras(cols), cands, best, lambda *a: None, None, 0.0,
                False, lambda _: None, present_s=np.array([1.0]),
                present_node=rec.Strings(np.array([0], dtype=np.int32), ("",)))
        return tuple(cands[best[g][1][0]] if best[g][1][0] >= 0 else None
                     for g in ("arch", "best"))

    times = {("allreduce-local", ""): 1.0, ("pearl", ""): 0.995,
             ("allreduce-local", first): 0.60, ("pearl", first): 0.597,
             ("allreduce-local", second): 0.598}
    assert run(times, 2.0) == (Candidate("allreduce-local"), Candidate("allreduce-local", second))
    near = {("allreduce-local", ""): 1.0, ("allreduce-local", first): 0.995}
    assert run(near, 1.0) == (None, None)


def test_the_cheapest_keeps_the_simplest_architecture_within_a_near_tie(catalog,
                                                                       tmp_path: Path) -> None:
    # 8 GPUs of one NVLink node with a small embedding table: PEARL sends 2 x 0.1 MB of rows
    # touched x 7/8 where the plain all-reduce moves the 2 MB table, 2 x 7/8 x 2 MB: PEARL is
    # faster by about 28 us of a 0.65 s step, far less than 1%, so on one node (cost =
    # time x GPUs x price) the cheapest is the fastest's choice, allreduce-local
    prices = tmp_path / "prices.toml"
    prices.write_text('[gpu.V100-SXM2-16GB]\nusd_per_gpu_hour = 3.06\nsource = "test"\n')
    job = {"job_id": ["j"], "architecture": ["ps-worker"], "n_gpus": [8],
           "node": ["pai-v100-nvlink"], "workload": [None], "flops_compute_bound": [1e13],
           "bytes_memory_bound": [1e10], "weight_bytes": [3.4e8],
           "embedding_bytes_touched": [1e5], "embedding_allreduce_bytes": [2e6],
           "input_bytes": [1e6]}
    out = recommend(job, catalog, nodes=["pai-v100-nvlink"], prices=prices)
    row = out["rows"].to_pylist()[0]
    from traincast.predict import predict

    feats = {k: v[0] for k, v in job.items() if k.endswith(("_bound", "_bytes", "_touched"))}
    pearl = predict(feats, arch="pearl", gpus=8, node="pai-v100-nvlink",
                    catalog=catalog).time_s["total"]
    assert row["arch_total_s"] * (1 - 1e-4) < pearl < row["arch_total_s"]  # by a hair
    assert row["arch_architecture"] == "allreduce-local"
    assert row["cheapest_architecture"] == "allreduce-local"
    assert row["cheapest_cost_per_iter_usd"] == pytest.approx(
        row["arch_total_s"] * 8 * 3.06 / 3600, rel=1e-12)


def test_the_cheapest_keep_says_the_saving_its_bar_asks() -> None:
    # the bar C_base / C_new > 1 + g is a saving of g / (1 + g): 5% -> 4.76%, 160% -> 61.5%
    from traincast.analysis.recommend import _cost_text

    said = [_cost_text("", "", 0, True, g) for g in (0.05, 1.6)]
    assert said == ["keep: no option that fits saves more than 4.76% per iteration",
                    "keep: no option that fits saves more than 61.5% per iteration"]


def test_a_kept_job_that_does_not_fit_as_given_is_told_so() -> None:
    # GPT-2 XL as PS/Worker on 16 GB V100s: a worker holds w (1 - e) + g + A = 6.23 GB x
    # (1 - 0.00105) + 6.23 GB + 5.26 GB = 17.7 GB of 16 GB (the shipped profile's parts); no
    # other architecture fits either (S + A = 30.2 GB), so the job keeps its setup, and says
    from traincast.zoo.profiles import workload_features

    f = workload_features("gpt2-xl")
    keys = ("flops_compute_bound", "bytes_memory_bound", "weight_bytes", "input_bytes",
            "embedding_bytes_touched")
    job = {"job_id": ["j"], "architecture": ["ps-worker"], "n_gpus": [8], "n_workers": [8],
           "n_ps": [2], "node": ["pai-v100-nvlink"], "workload": ["gpt2-xl"],
           **{k: [f[k]] for k in keys}}
    row = recommend(job, load_catalog(), nodes=["pai-v100-nvlink"])["rows"].to_pylist()[0]
    assert row["arch_architecture"] == "ps-worker" and row["arch_speedup"] == 1.0
    assert row["arch_reason"].startswith("keep: no option that fits")
    assert row["arch_reason"].endswith(
        "; as given it does not fit its GPU's memory (17.7 GB per GPU of 16 GB)")



def test_recommend_says_why_no_job_changes_architecture(tmp_path: Path) -> None:
    # two 1-GPU jobs: on their own hardware no other architecture exists for them
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,n_gpus,gpu_type,start_time_s,end_time_s\n"
                     "a,1,V100,0,100\nb,1,V100,0,50\n")
    r = CliRunner().invoke(app, ["recommend", str(trace), "--db", str(tmp_path / "s.duckdb"),
                                 "--workload", "resnet50"])
    assert r.exit_code == 0, r.output
    said = " ".join(r.stdout.split())
    assert ("On their own hardware, no job would run more than 5% faster on another "
            "architecture (over all jobs): they keep theirs (1w1g 2)") in said, said


def test_a_reason_names_a_nodes_network_ports_and_a_pcie_bound_ps_job() -> None:
    from traincast.analysis.recommend import BOTTLENECKS, Candidate, _over, _reason_parts
    from traincast.hardware.catalog import load_catalog

    cat = load_catalog()
    # DGX A100: eight 200 Gb/s HDR ports (NVIDIA DGX A100 datasheet); a PAI node has one
    assert _over("allreduce-cluster", "nic", "dgx-a100", cat) == (
        "allreduce-cluster over InfiniBand HDR (a node of 8 network ports)")
    assert _over("allreduce-cluster", "nic", "pai-v100-nvlink", cat) == (
        "allreduce-cluster over 25 Gbit Ethernet")
    # one server per worker node shortens the network side, not the copies through the host
    comm = BOTTLENECKS.index("comm")
    cand = Candidate("ps-worker", "pai-v100-pcie")
    _, said = _reason_parts(cand, comm, comm, 0.05, "ps-worker", "pai-v100-pcie",
                            "pai-v100-pcie", "V100-PCIE-16GB", "V100-PCIE-16GB",
                            ("pcie", "nic"), cat)
    assert said == ("one parameter server per worker node cuts the network side of its "
                    "weight/gradient communication (ps-worker over PCIe (pcie3x16): its copies "
                    "through the host stay)")
