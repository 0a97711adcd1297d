"""Published throughputs (validation/published.toml), the runner's arithmetic, and the
microbenchmark data (hardware/microbench.toml and the catalog's kernel-model fields)."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path

import pytest

from traincast.errors import TraincastError
from traincast.hardware.catalog import load_catalog
from traincast.validation.published import (
    cross_gpu_ratios,
    evaluate_rows,
    load_published,
    profile_row,
    summarize,
)

HARDWARE = resources.files("traincast.hardware")
LAMBDA = "lambdal/deeplearning-benchmark@0551cb70ffdc155dc4cb2c10dddebb65651c3883"


def _find(rows: list[dict], **key: object) -> dict:
    hits = [r for r in rows if all(r[k] == v for k, v in key.items())]
    assert len(hits) == 1, key
    return hits[0]


def test_table_parses_and_every_row_is_cited() -> None:
    data = load_published()
    rows = data["row"]
    # 3 models x 2 dtypes x (V100, A100, H100 PCIe, H100 SXM5 at 1 and 8 GPUs; A10 at 1)
    assert len(rows) == 54
    catalog = load_catalog()
    for r in rows:
        assert r["citation"].startswith(LAMBDA)
        assert f"pytorch/pytorch-train-throughput-{r['dtype']}.csv" in r["citation"]
        assert r["batch_source"]
        assert r["gpu"] in catalog.gpus
        assert r["gpus"] in (1, 8)
        if r["gpus"] == 8:
            node = catalog.node(data["node"][r["gpu"]])
            assert node.gpus == 8 and node.gpu == r["gpu"]


# Source numbers read from lambdal/deeplearning-benchmark (stored version 0551cb70...):
# pytorch/pytorch-train-throughput-{fp16,fp32}.csv and, for the batch, pytorch/pytorch-train-bs-
# {fp16,fp32}.csv (commit 08d77c41..., the whole run's batch) or the config_v1 template.
@pytest.mark.parametrize(("key", "throughput", "batch"), [
    # fp16 csv, row "LambdaCloud V100 16GB", resnet50 = 833.0; bs-fp16 csv: 256
    ({"model": "resnet50", "gpu": "V100-SXM2-16GB", "gpus": 1, "dtype": "fp16"}, 833.0, 256),
    # fp16 csv, row "H100 80GB SXM5", bert_large_squad = 301.0; config_pytorch_80GB.sh: "112"
    ({"model": "bert-large-squad", "gpu": "H100-SXM5-80GB", "gpus": 1, "dtype": "fp16"},
     301.0, 112),
    # fp32 csv, row "8x A100 80GB SXM4", resnet50 = 7397.0; bs-fp32 csv: 5120 = 640 x 8
    ({"model": "resnet50", "gpu": "A100-SXM4-80GB", "gpus": 8, "dtype": "fp32"}, 7397.0, 640),
    # fp32 csv, row "LambdaCloud A10", bert_base_squad = 70.0; config_pytorch_24GB.sh: "48"
    ({"model": "bert-base-squad", "gpu": "A10", "gpus": 1, "dtype": "fp32"}, 70.0, 48),
    # fp16 csv, row "8x H100 80GB PCIe Gen5", bert_base_squad = 6182.0; bs-fp16: 2560 = 320 x 8
    ({"model": "bert-base-squad", "gpu": "H100-PCIE-80GB", "gpus": 8, "dtype": "fp16"},
     6182.0, 320),
])
def test_hand_checked_rows_match_the_source(key: dict, throughput: float, batch: int) -> None:
    row = _find(load_published()["row"], **key)
    assert row["throughput"] == throughput
    assert row["batch_per_gpu"] == batch


def test_bad_row_names_file_row_and_field(tmp_path: Path) -> None:
    text = (resources.files("traincast.validation").joinpath("published.toml").read_text())
    head = text[:text.index("[[row]]")]
    bad = tmp_path / "bad.toml"
    bad.write_text(head + '[[row]]\nmodel = "resnet50"\ngpu = "A10"\ngpus = 1\ndtype = "fp16"\n'
                   'batch_per_gpu = 8\nthroughput = 10.0\nunit = "images/s"\n')
    with pytest.raises(TraincastError, match=r"bad\.toml: row 1: field 'citation'"):
        load_published(bad)
    bad.write_text(head + '[[row]]\nmodel = "vgg"\ngpu = "A10"\ngpus = 1\ndtype = "fp16"\n'
                   'batch_per_gpu = 8\nthroughput = 10.0\nunit = "images/s"\ncitation = "x"\n')
    with pytest.raises(TraincastError, match="row 1: field 'model'"):
        load_published(bad)


TEST_CATALOG = """
[gpu.hand]
fp32_tflops = 10.0
fp16_tflops = 40.0
mem_bw_gbs = 1000
mem_gb = 16
source = "hand case"

[node.hand-node]
gpu = "hand"
gpus = 8
pcie = "pcie4x16"
intra = "pcie4x16"
nic = "eth100"
source = "hand case"
"""


def test_runner_errors_on_a_hand_case(tmp_path: Path) -> None:
    path = tmp_path / "hand.toml"
    path.write_text(TEST_CATALOG)
    catalog = load_catalog([path])
    rows = [{"model": "m", "gpu": "hand", "gpus": 1, "dtype": "fp32", "batch_per_gpu": 32,
             "throughput": 300.0}]
    feats = [{"flops_compute_bound": 1e12, "bytes_memory_bound": 1e9, "weight_bytes": 0.0,
              "embedding_bytes_touched": 0.0, "input_bytes": 0.0}]
    res = evaluate_rows(rows, feats, {"hand": "hand-node"}, catalog, strategy="paper")
    # paper model: T = 1e12 / 10e12 + 1e9 / 1000e9 = 0.101 s; X = 32 / 0.101 = 316.83 /s
    assert res["predicted_s"][0] == pytest.approx(0.101)
    assert res["predicted"][0] == pytest.approx(32 / 0.101)
    assert res["error"][0] == pytest.approx(32 / 0.101 / 300.0 - 1.0)  # +5.61%
    # fp16 (amp) on the same GPU uses the 40 TFLOP/s peak: T = 0.025 + 0.001
    rows16 = [dict(rows[0], dtype="fp16")]
    res16 = evaluate_rows(rows16, feats, {"hand": "hand-node"}, catalog, strategy="paper")
    assert res16["predicted_s"][0] == pytest.approx(0.026)
    # 8 GPUs: all-reduce adds communication, throughput counts every GPU's batch
    rows8 = [dict(rows[0], gpus=8, throughput=2000.0)]
    feats8 = [dict(feats[0], weight_bytes=1e8)]
    res8 = evaluate_rows(rows8, feats8, {"hand": "hand-node"}, catalog, strategy="paper")
    assert res8["comm_s"][0] > 0
    assert res8["predicted"][0] == pytest.approx(32 * 8 / res8["predicted_s"][0])
    assert res8["predicted_s"][0] > 0.101


def test_cross_gpu_ratios_and_summary_by_hand() -> None:
    rows = [{"model": "m", "dtype": "fp16", "gpus": 1, "gpu": "X", "throughput": 200.0},
            {"model": "m", "dtype": "fp16", "gpus": 1, "gpu": "Y", "throughput": 100.0},
            {"model": "m", "dtype": "fp16", "gpus": 8, "gpu": "Y", "throughput": 700.0},
            {"model": "m", "dtype": "fp32", "gpus": 1, "gpu": "Y", "throughput": 50.0}]
    ratios = cross_gpu_ratios(rows, [300.0, 100.0, 800.0, 40.0])
    assert len(ratios) == 1  # only X vs Y at the same model, dtype and GPU count
    (q,) = ratios
    assert (q["gpu_a"], q["gpu_b"]) == ("X", "Y")
    assert q["published_ratio"] == pytest.approx(2.0)
    assert q["predicted_ratio"] == pytest.approx(3.0)
    assert q["error"] == pytest.approx(0.5)
    s = summarize([0.1, -0.2, 0.3, float("nan")])
    assert s["n"] == 3
    assert s["median_abs_error"] == pytest.approx(0.2)
    assert s["p90_abs_error"] == pytest.approx(0.28)  # 0.2 + 0.8 * (0.3 - 0.2)
    assert s["max_abs_error"] == pytest.approx(0.3)


def test_squad_profile_matches_the_hand_formula() -> None:
    model = load_published()["model"]["bert-base-squad"]
    feats = profile_row(model, 2, amp=False)
    # per sequence: 3 x L S (24 H^2 + 4 S H) FLOPs (forward + backward of the 12 encoder layers;
    # the 2-way span head adds 3 x 2 S H x 2 = 0.007 GFLOP): L = 12, S = 384, H = 768
    L, S, H = 12, 384, 768
    hand = 3 * L * S * (24 * H * H + 4 * S * H)
    assert feats["flops_compute_bound"] / 2 == pytest.approx(hand, rel=0.01)
    assert feats["input_bytes"] > 0  # real SQuAD batches are copied; ResNet's are synthetic


def test_microbench_rows_are_cited_and_consistent() -> None:
    data = tomllib.loads(HARDWARE.joinpath("microbench.toml").read_text())
    catalog = load_catalog()
    assert len(data["gemm"]) >= 15 and len(data["conv"]) >= 5
    for row in data["gemm"] + data["conv"]:
        assert row["gpu"] in catalog.gpus and row["source"]
    for row in data["gemm"]:
        if "time_us" in row and "tflops" in row:
            rate = 2 * row["m"] * row["n"] * row["k"] / (row["time_us"] * 1e-6) / 1e12
            # times are published to 0.01 ms, so short kernels round by up to ~15%
            assert rate == pytest.approx(row["tflops"], rel=0.15)
    # DeepBench README (commit a5a2b60f): V100 M=5124, N=9124, K=2560, T/N: 8.73 ms, 27.43 TF
    big = [r for r in data["gemm"] if r["gpu"] == "V100-SXM2-16GB" and r["n"] == 9124]
    assert big[0]["time_us"] == 8730 and big[0]["tflops"] == 27.43


def test_kernel_data_is_sourced_and_reproduces_the_peaks() -> None:
    catalog = load_catalog()
    data = {name: {k: getattr(g, k) for k in ("sms", "boost_clock_mhz", "gemm_max_fraction",
                                              "sources") if getattr(g, k)}
            for name, g in catalog.gpus.items() if g.sms}
    assert set(data) == {g for g in catalog.gpus if g != "V100-paper-2019" and g != "local"}
    for name, entry in data.items():
        for field in ("sms", "boost_clock_mhz", "gemm_max_fraction"):
            if field in entry:
                assert entry["sources"][field], (name, field)
        for frac in entry.get("gemm_max_fraction", {}).values():
            assert 0 < frac <= 1
    # MAMF (stas00/ml-engineering): H100 SXM bf16 794.5 of 989 TF, fp8 1402.6 of 1979 TF
    h100 = data["H100-SXM5-80GB"]["gemm_max_fraction"]
    assert h100["bf16"] == pytest.approx(794.5 / 989, abs=1e-3)
    assert h100["fp8"] == pytest.approx(1402.6 / 1979, abs=1e-3)
    # SMs x dense FP16 FLOP per SM per clock x clock = the catalog's dense peak (within 1%)
    per_sm_clk = {"A100-SXM4-80GB": 2048, "H100-SXM5-80GB": 4096, "V100-SXM2-16GB": 1024}
    for name, flop in per_sm_clk.items():
        peak = data[name]["sms"] * flop * data[name]["boost_clock_mhz"] * 1e6 / 1e12
        assert peak == pytest.approx(catalog.gpus[name].fp16_tflops, rel=0.01)
    assert catalog.gpus["A10"].fp32_tflops == 31.2  # NVIDIA A10 datasheet


def test_ddp_overlap_and_tf32_marks_by_hand() -> None:
    from traincast.validation.published import ddp_overlap, tf32_matmuls

    models = {"cnn": {"ddp_bucket_bytes": 25 * 2**20},
              "bert": {"ddp_bucket_elements": 10_000_000, "fp16_spec": "x.py:f"}}
    rows = [{"model": "cnn", "gpus": 8, "dtype": "fp16"},
            {"model": "bert", "gpus": 8, "dtype": "fp16"},
            {"model": "bert", "gpus": 8, "dtype": "fp32"},
            {"model": "cnn", "gpus": 1, "dtype": "fp32"}]
    feats = [{"weight_bytes": 100 * 2**20, "embedding_bytes_touched": 0.0},
             {"weight_bytes": 1e8, "embedding_allreduce_bytes": 1e8},
             {"weight_bytes": 1e7, "embedding_allreduce_bytes": 0.0},
             {"weight_bytes": 1e8}]
    f = ddp_overlap(rows, feats, models)
    # all buckets but the last hide under backward: 1 - 25 MiB / 100 MiB; apex O2: 1e7 x 2 B of
    # 2e8 B; fp32 bucket 4e7 B > W = 1e7 B: nothing hides; one GPU: no all-reduce
    assert f.tolist() == pytest.approx([0.75, 0.9, 0.0, 0.0])
    ops = [{"op": "mm", "dtype": "float32"}, {"op": "convolution", "dtype": "float32"},
           {"op": "mm", "dtype": "float16"}, {"op": "add", "dtype": "float32"}]
    assert [o["dtype"] for o in tf32_matmuls(ops)] == ["tf32", "float32", "float16", "float32"]


USER_MODEL = '''
import torch
from torch import nn


def tiny(batch):
    return nn.Linear(64, 64), (torch.randn(batch, 64),)
'''


def _user_rows(tmp_path: Path, gpu2: str = "hand") -> Path:
    (tmp_path / "tiny.py").write_text(USER_MODEL)
    rows = tmp_path / "mine.toml"
    rows.write_text(f'''
[model.tiny]
spec = "tiny.py:tiny"
synthetic_inputs = true

[[row]]
model = "tiny"
gpu = "hand"
gpus = 1
dtype = "fp32"
batch_per_gpu = 32
throughput = 1000.0
unit = "samples/s"
citation = "my own measurement"

[[row]]
model = "tiny"
gpu = "{gpu2}"
gpus = 8
node = "hand-node"
dtype = "fp32"
batch_per_gpu = 32
throughput = 7000.0
unit = "samples/s"
citation = "my own measurement"
''')
    return rows


def test_rows_of_your_own_beside_their_model_file(tmp_path: Path) -> None:
    from traincast.validation.published import validate_published

    cat = tmp_path / "hand.toml"
    cat.write_text(TEST_CATALOG)
    catalog = load_catalog([cat])
    out = validate_published(catalog, path=_user_rows(tmp_path))
    assert out["file"].endswith("mine.toml") and len(out["rows"]) == 2
    one, eight = out["rows"]
    # the hand GPU has no SM count: the paper's split, T = F / 10 TFLOP/s + B / 1000 GB/s
    # of the profiled Linear(64, 64) step: forward 2 * 32 * 64 * 64 FLOPs, backward twice that
    assert one["predicted_s"] >= 3 * 2 * 32 * 64 * 64 / 10e12
    assert one["predicted"] == pytest.approx(32 / one["predicted_s"])
    assert one["error"] == pytest.approx(one["predicted"] / 1000.0 - 1.0)
    assert eight["predicted"] == pytest.approx(32 * 8 / eight["predicted_s"])
    assert eight["predicted_s"] > one["predicted_s"]  # the 8-GPU row all-reduces its weights


def test_rows_of_your_own_name_the_row_of_an_unknown_gpu(tmp_path: Path) -> None:
    from traincast.validation.published import validate_published

    cat = tmp_path / "hand.toml"
    cat.write_text(TEST_CATALOG)
    with pytest.raises(TraincastError, match=r"mine.toml: row 2: field 'gpu'"):
        validate_published(load_catalog([cat]), path=_user_rows(tmp_path, gpu2="no-such-gpu"))
