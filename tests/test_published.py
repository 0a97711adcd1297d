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


def _one_row(tmp_path: Path, fields: str) -> Path:
    """The shipped rows file's models and one ``[[row]]`` of ``fields``."""
    text = (resources.files("traincast.validation").joinpath("published.toml").read_text())
    bad = tmp_path / "bad.toml"
    bad.write_text(text[:text.index("[[row]]")] + "[[row]]\n" + fields)
    return bad


RESNET_ROW = 'model = "resnet50"\ngpu = "A10"\ngpus = 1\ndtype = "fp16"\nbatch_per_gpu = 8\n'


def test_bad_row_names_file_row_and_field(tmp_path: Path) -> None:
    bad = _one_row(tmp_path, RESNET_ROW + 'throughput = 10.0\nunit = "images/s"\n')
    with pytest.raises(TraincastError, match=r"bad\.toml: row 1: field 'citation'"):
        load_published(bad)
    bad = _one_row(tmp_path, RESNET_ROW.replace("resnet50", "vgg")
                   + 'throughput = 10.0\nunit = "images/s"\ncitation = "x"\n')
    with pytest.raises(TraincastError, match="row 1: field 'model'"):
        load_published(bad)
    # a throughput beyond any cluster's is a typo
    bad = _one_row(tmp_path, RESNET_ROW + 'throughput = 1e300\nunit = "images/s"\n'
                   'citation = "x"\n')
    with pytest.raises(TraincastError, match=r"row 1: field 'throughput' = 1e\+300 is above"):
        load_published(bad)
    # a context of 2^20 tokens is a length, not a typo
    bad = _one_row(tmp_path, RESNET_ROW.replace("resnet50", "bert-base-squad")
                   + 'throughput = 10.0\nunit = "tokens/s"\ntokens_per_sample = 1048576\n'
                   'citation = "x"\n')
    assert load_published(bad)["row"][0]["tokens_per_sample"] == 2**20


TEST_CATALOG = """
[gpu.hand]
fp32_tflops = 10.0
fp16_tflops = 40.0
mem_bw_gbs = 1000
mem_gb = 16
source = "hand case"

[gpu.lone]
fp32_tflops = 10.0
mem_bw_gbs = 1000
source = "hand case: a GPU no node preset holds"

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
    with pytest.raises(TraincastError, match="trust"):  # their Python runs only when trusted
        validate_published(catalog, path=_user_rows(tmp_path))
    out = validate_published(catalog, path=_user_rows(tmp_path), trust_specs=True)
    assert out["file"].endswith("mine.toml") and len(out["rows"]) == 2
    one, eight = out["rows"]
    # the hand GPU has no SM count: the paper's split, T = F / 10 TFLOP/s + B / 1000 GB/s
    # of the profiled Linear(64, 64) step: forward 2 * 32 * 64 * 64 FLOPs, backward twice that
    assert one["predicted_s"] >= 3 * 2 * 32 * 64 * 64 / 10e12
    assert one["predicted"] == pytest.approx(32 / one["predicted_s"])
    assert one["error"] == pytest.approx(one["predicted"] / 1000.0 - 1.0)
    assert eight["predicted"] == pytest.approx(32 * 8 / eight["predicted_s"])
    assert eight["predicted_s"] > one["predicted_s"]  # the 8-GPU row all-reduces its weights


def test_rows_of_the_hybrid_model_go_through_predict_hybrid(tmp_path: Path) -> None:
    # a rows file of the hybrid model's form ([[row]] with t, p, d) is priced by it, not
    # profiled: each row's error is predict_hybrid's tokens/s over the published one, less 1
    from traincast.parallel.hybrid import predict_hybrid
    from traincast.validation.published import (
        _read_table,
        is_llm_table,
        render_markdown,
        validate_published,
    )

    rows = tmp_path / "llm.toml"
    rows.write_text('node = "dgx-a100"\ndtype = "bf16"\nframework = "fsdp"\nsp = false\n'
                    '[[row]]\nrun = "mine"\nmodel = "llama2-7b"\nt = 1\np = 1\nd = 16\n'
                    'gpus = 16\nbatch = 32\nmicro_batch = 2\nseq = 4096\n'
                    'recompute = "none"\ntokens_per_gpu_s = 3000\nsource = "a test"\n')
    assert is_llm_table(_read_table(rows)) and not is_llm_table(_read_table(_user_rows(tmp_path)))
    out = validate_published(load_catalog(), path=rows)
    (row,) = out["llm_rows"]["rows"]
    same = predict_hybrid("llama2-7b", node="dgx-a100", dp=16, micro_batch=2, global_batch=32,
                          seq=4096, recompute="none", sp=False, framework="fsdp")
    assert row["rel_error"] == pytest.approx(same["tokens_per_s_per_gpu"] / 3000 - 1)
    text = render_markdown(out)
    assert text.startswith(f"Rows of {rows} (1 rows, tokens/s per GPU")
    assert "| mine | A100-SXM4-80GB | 16 | 1 / 1 / 1 / 16 | 3000 |" in text
    broken = tmp_path / "broken.toml"
    broken.write_text(rows.read_text().replace("t = 1\n", "t = 0\n"))
    with pytest.raises(TraincastError, match="row 1: field 't' must be a positive integer"):
        validate_published(load_catalog(), path=broken)
    # an hf: config beside the rows file is found there, from any working folder
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "small.json").write_text(
        '{"model_type": "llama", "hidden_size": 1024, "intermediate_size": 2816, '
        '"num_hidden_layers": 4, "num_attention_heads": 16, "vocab_size": 32000, '
        '"max_position_embeddings": 4096, "rms_norm_eps": 1e-5}')
    beside = tmp_path / "sub" / "beside.toml"
    beside.write_text(rows.read_text().replace('model = "llama2-7b"', 'model = "hf:small.json"'))
    (row,) = validate_published(load_catalog(), path=beside)["llm_rows"]["rows"]
    assert row["model"] == "hf:small.json" and row["rel_error"] > 0  # 4 layers: fast
    misspelt = tmp_path / "misspelt.toml"  # still the hybrid form: its own error, by field
    misspelt.write_text(rows.read_text().replace("d = 16\n", "dp = 16\n"))
    with pytest.raises(TraincastError, match="row 1: unknown field"):
        validate_published(load_catalog(), path=misspelt)
    # a table that publishes TFLOP/s per GPU says so, in the line and the header
    megatron = resources.files("traincast.parallel").joinpath("megatron_2021.toml")
    text = render_markdown(validate_published(load_catalog(), path=Path(str(megatron))))
    assert "(10 rows, TFLOP/s per GPU;" in text and "| published TFLOP/s per GPU |" in text
    assert "tokens/s" not in text


def test_a_rows_file_is_read_once_whichever_model_prices_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # its form (hybrid model or per-op profiles) is told from the table the run then uses
    from traincast.validation.published import validate_published

    reads: list[Path] = []
    read_text = Path.read_text

    def counted(self: Path, *args: object, **kwargs: object) -> str:
        reads.append(self)
        return read_text(self, *args, **kwargs)

    llm = tmp_path / "llm.toml"
    llm.write_text('node = "dgx-a100"\ndtype = "bf16"\nframework = "fsdp"\nsp = false\n'
                   '[[row]]\nrun = "mine"\nmodel = "llama2-7b"\nt = 1\np = 1\nd = 16\n'
                   'gpus = 16\nbatch = 32\nmicro_batch = 2\nseq = 4096\n'
                   'recompute = "none"\ntokens_per_gpu_s = 3000\nsource = "a test"\n')
    mine = _user_rows(tmp_path)
    broken = tmp_path / "broken.toml"
    broken.write_text("[[row]\n")
    catalog = load_catalog()
    monkeypatch.setattr(Path, "read_text", counted)
    (row,) = validate_published(catalog, path=llm)["llm_rows"]["rows"]
    assert row["run"] == "mine"
    with pytest.raises(TraincastError, match="mine.toml: .*trust"):  # refused once loaded
        validate_published(catalog, path=mine)
    with pytest.raises(TraincastError, match=r"broken.toml: cannot be read \(Expected"):
        validate_published(catalog, path=broken)
    assert [p for p in reads if p in (llm, mine, broken)] == [llm, mine, broken]


def test_rows_of_your_own_name_the_row_of_an_unknown_gpu(tmp_path: Path) -> None:
    from traincast.validation.published import validate_published

    cat = tmp_path / "hand.toml"
    cat.write_text(TEST_CATALOG)
    with pytest.raises(TraincastError, match=r"mine.toml: row 2: field 'gpu'"):
        validate_published(load_catalog([cat]), path=_user_rows(tmp_path, gpu2="no-such-gpu"),
                           trust_specs=True)


# ---------------------------------------------------------------- rows files of your own

ROW = {"model": "tiny", "gpu": "hand", "gpus": 1, "dtype": "fp32", "batch_per_gpu": 32,
       "throughput": 1000.0, "unit": "samples/s", "citation": "my own measurement"}


def _toml_value(v: object) -> str:
    return str(v).lower() if isinstance(v, bool) else f'"{v}"' if isinstance(v, str) else repr(v)


def _rows_file(tmp_path: Path, rows: list[dict], model: dict | None = None) -> Path:
    """A rows file with one [model.tiny] (USER_MODEL beside it) and the given rows."""
    (tmp_path / "tiny.py").write_text(USER_MODEL)
    model = {"spec": "tiny.py:tiny", "synthetic_inputs": True, **(model or {})}
    text = "[model.tiny]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in model.items())
    for row in rows:
        text += "\n[[row]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in row.items()
                                          if v is not None)
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return path


def _hand_catalog(tmp_path: Path):
    cat = tmp_path / "hand.toml"
    cat.write_text(TEST_CATALOG)
    return load_catalog([cat])


@pytest.mark.parametrize(("written", "dtype"), [
    ("fp16", "fp16"), ("AMP", "fp16"), ("mixed", "fp16"), ("Mixed Precision", "fp16"),
    ("half", "fp16"), ("AMP_FP16", "fp16"), ("mixed-precision", "fp16"), ("bf16", "bf16"),
    ("BFloat16", "bf16"), ("TF32", "tf32"),
    ("fp32", "fp32"), ("FP32", "fp32")])
def test_precisions_as_benchmark_tables_write_them(tmp_path: Path, written: str,
                                                   dtype: str) -> None:
    row = load_published(_rows_file(tmp_path, [dict(ROW, dtype=written)]))["row"][0]
    assert (row["dtype"], row["dtype_written"]) == (dtype, written)


@pytest.mark.parametrize(("over", "match"), [
    ({"dtype": "int8"}, r"mine\.toml: row 1: field 'dtype': unknown precision 'int8'"),
    ({"unit": "furlongs"}, r"row 1: field 'unit': 'furlongs' is not a throughput unit"),
    ({"unit": "tokens/s"}, r"row 1: field 'tokens_per_sample' missing for unit 'tokens/s'"),
    ({"throughput": float("nan")}, r"row 1: field 'throughput' must be positive and finite"),
    ({"throughput": float("inf")}, r"row 1: field 'throughput' must be positive and finite"),
    ({"batch_per_gpu": 32.0}, r"row 1: field 'batch_per_gpu' must be an integer"),
    ({"batch_size": 32}, r"row 1: unknown field 'batch_size'"),
    ({"nodes": "dgx-a100"}, r"row 1: field 'nodes' must be an integer"),
    ({"model": "tinny"}, r"row 1: field 'model': unknown model 'tinny'"),
    ({"gpus": 8, "batch_per_gpu": None, "global_batch": 100},
     r"field 'global_batch': 100 is not a multiple of gpus"),
    ({"gpus": 8, "global_batch": 512}, r"field 'batch_per_gpu': 32 x gpus 8 != global_batch"),
])
def test_a_bad_row_names_file_row_and_field_with_a_hint(tmp_path: Path, over: dict,
                                                        match: str) -> None:
    with pytest.raises(TraincastError, match=match) as err:
        load_published(_rows_file(tmp_path, [dict(ROW, **over)]))
    assert err.value.hint


def test_misspelled_fields_get_a_suggestion(tmp_path: Path) -> None:
    with pytest.raises(TraincastError) as err:
        load_published(_rows_file(tmp_path, [dict(ROW, batch_size=32)]))
    assert "did you mean 'batch_per_gpu'" in err.value.hint
    with pytest.raises(TraincastError, match=r"\[model\.tiny\]: unknown field "
                       r"'synthetic_input'") as err:
        load_published(_rows_file(tmp_path, [ROW], {"synthetic_input": True}))
    assert "did you mean 'synthetic_inputs'" in err.value.hint
    # free-text citations of the model's own settings are allowed
    load_published(_rows_file(tmp_path, [dict(ROW, batch_source="x")], {"ddp_source": "y"}))


@pytest.mark.parametrize(("model", "match"), [
    ({"spec": "resnet50"}, r"\[model\.tiny\]: field 'spec': 'resnet50' is not a MODEL spec"),
    ({"ddp_bucket_bytes": "25MB"}, r"field 'ddp_bucket_bytes' must be a number"),
    ({"optimizer": "lamb"}, r"field 'optimizer' must be one of"),
    ({"memory_format": "nwhc"}, r"field 'memory_format' must be one of"),
    ({"attention": "flash"}, r"field 'attention' must be one of"),
    ({"seq": 0}, r"field 'seq' must be positive"),
    ({"seq": "512"}, r"field 'seq' must be an integer"),
])
def test_a_bad_model_table_names_file_table_and_field(tmp_path: Path, model: dict,
                                                      match: str) -> None:
    with pytest.raises(TraincastError, match=match):
        load_published(_rows_file(tmp_path, [ROW], model))


def test_a_model_table_without_spec(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('[model.tiny]\nsynthetic_inputs = true\n\n[[row]]\n' + "".join(
        f"{k} = {_toml_value(v)}\n" for k, v in ROW.items()))
    with pytest.raises(TraincastError, match=r"mine\.toml: \[model\.tiny\]: field 'spec' "
                       "missing"):
        load_published(path)


def test_global_batch_gives_the_batch_per_gpu(tmp_path: Path) -> None:
    rows = [dict(ROW, gpus=8, batch_per_gpu=None, global_batch=256),
            dict(ROW, gpus=8, global_batch=256)]
    assert [r["batch_per_gpu"] for r in load_published(_rows_file(tmp_path, rows))["row"]] \
        == [32, 32]  # 256 / 8


@pytest.mark.parametrize(("unit", "parsed"), [
    ("images/s", ("sample", False)), ("img/sec", ("sample", False)),
    ("sequences per second", ("sample", False)), ("Sentences/s", ("sample", False)),
    ("records/s", ("sample", False)), ("tokens/s", ("token", False)),
    ("tok/s/gpu", ("token", True)), ("images/s per GPU", ("sample", True)),
    ("TFLOP/s", None), ("ms/iter", None), ("images", None)])
def test_units(unit: str, parsed: tuple | None) -> None:
    from traincast.validation.published import parse_unit

    assert parse_unit(unit) == parsed


def test_token_and_per_gpu_units_by_hand(tmp_path: Path) -> None:
    catalog = _hand_catalog(tmp_path)
    rows = load_published(_rows_file(tmp_path, [
        dict(ROW, unit="tokens/s", tokens_per_sample=128, throughput=40000.0),
        dict(ROW, gpus=8, node="hand-node", unit="images/s/gpu", throughput=300.0)]))["row"]
    feats = [{"flops_compute_bound": 1e12, "bytes_memory_bound": 1e9, "weight_bytes": 0.0,
              "embedding_bytes_touched": 0.0, "input_bytes": 0.0}] * 2
    res = evaluate_rows(rows, feats, {}, catalog, strategy="paper")
    # T = 1e12 / 10e12 + 1e9 / 1000e9 = 0.101 s (no weights: no all-reduce)
    assert res["predicted_s"].tolist() == pytest.approx([0.101, 0.101])
    # tokens/s = samples/s x 128 tokens; per GPU = the 8 GPUs' samples/s / 8
    assert res["predicted"][0] == pytest.approx(32 * 128 / 0.101)
    assert res["predicted"][1] == pytest.approx(32 / 0.101)
    assert res["error"][0] == pytest.approx(32 * 128 / 0.101 / 40000.0 - 1.0)


def test_multi_node_rows_all_reduce_across_nodes_by_hand(tmp_path: Path) -> None:
    from traincast.validation.published import check_hardware, row_architectures

    catalog = _hand_catalog(tmp_path)
    data = load_published(_rows_file(tmp_path, [
        dict(ROW, gpus=8, node="hand-node"), dict(ROW, gpus=16, nodes=2, node="hand-node")]))
    check_hardware(data, catalog)
    rows = data["row"]
    assert row_architectures(rows, {}, catalog).tolist() == ["allreduce-local",
                                                           "allreduce-cluster"]
    feats = [{"flops_compute_bound": 1e12, "bytes_memory_bound": 1e9, "weight_bytes": 1e8,
              "embedding_bytes_touched": 0.0, "input_bytes": 0.0}] * 2
    res = evaluate_rows(rows, feats, {}, catalog, strategy="paper")
    # one node: ring over pcie4x16 at NCCL's rating of a Gen4 x16 link, 16 x 120 / 80 = 24
    # GB/s (efficiency 24 / 31.5 = 0.7619 of the 31.5 GB/s line rate: docs/hardware.md):
    # 2 x 7/8 x 1e8 / 24e9; two nodes: a flat ring
    # as slow as one eth100 port (12.5 GB/s x 0.9415, the TCP payload of an Ethernet frame,
    # 1448 / 1538: docs/hardware.md): 2 x 15/16 x 1e8 / 11.77e9 = 15.93 ms
    eth100 = 12.5e9 * round(1448 / 1538, 4)
    pcie4 = 31.5e9 * round(24 / 31.5, 4)
    assert res["comm_s"].tolist() == pytest.approx([2 * 7 / 8 * 1e8 / pcie4,
                                                    2 * 15 / 16 * 1e8 / eth100])
    assert res["predicted"][1] == pytest.approx(32 * 16 / (0.101 + 2 * 15 / 16 * 1e8 / eth100))


@pytest.mark.parametrize(("over", "match"), [
    ({"gpu": "hnad"}, r"row 1: field 'gpu': 'hnad' is not a catalog GPU"),
    ({"gpu": "lone", "gpus": 8}, r"row 1: field 'node': 8 GPUs need a node preset"),
    ({"gpus": 8, "node": "hand-nod"}, r"row 1: field 'node': node preset 'hand-nod' is not"),
    ({"gpu": "A100", "gpus": 8, "node": "hand-node"},
     r"row 1: field 'node': 'hand-node' holds hand, not A100-SXM4-80GB"),
    ({"gpus": 8, "nodes": 4, "node": "hand-node"},
     r"row 1: field 'gpus': 8 GPUs on 4 node\(s\) of 8"),
    ({"gpu": "V100", "dtype": "bf16"}, r"row 1: field 'dtype': 'bf16' on V100-SXM2-16GB, "
     "which has no bf16"),
    ({"gpu": "V100", "dtype": "TF32"}, r"field 'dtype': 'TF32' on V100-SXM2-16GB"),
])
def test_hardware_errors_name_file_row_and_field(tmp_path: Path, over: dict,
                                                 match: str) -> None:
    from traincast.validation.published import check_hardware

    data = load_published(_rows_file(tmp_path, [dict(ROW, **over)]))
    with pytest.raises(TraincastError, match=match) as err:
        check_hardware(data, _hand_catalog(tmp_path))
    assert err.value.hint


def test_gpu_aliases_resolve_for_nodes_and_ratios(tmp_path: Path) -> None:
    from traincast.validation.published import check_hardware

    path = _rows_file(tmp_path, [dict(ROW, gpu="A100", gpus=8), dict(ROW, gpu="hand")])
    path.write_text(path.read_text() + '\n[node]\nA100 = "dgx-a100"\n')
    data = load_published(path)
    check_hardware(data, _hand_catalog(tmp_path))
    a100 = data["row"][0]
    assert (a100["gpu"], a100["gpu_written"], a100["node"]) == ("A100-SXM4-80GB", "A100",
                                                                "dgx-a100")
    # a preset the [node] table misspells is the table's error, not a row's field
    path.write_text(path.read_text().replace('A100 = "dgx-a100"', 'A100 = "dgx-a1000"'))
    with pytest.raises(TraincastError, match=r"\[node\] key 'A100': node preset 'dgx-a1000' "
                                             "is not in the catalog") as err:
        check_hardware(load_published(path), _hand_catalog(tmp_path))
    assert "did you mean 'dgx-a100'?" in err.value.hint


def test_a_model_that_cannot_be_profiled_names_its_table(tmp_path: Path) -> None:
    from traincast.validation.published import validate_published

    catalog = _hand_catalog(tmp_path)
    for model, match in (({"spec": "zoo:no-such-model"}, r"\[model\.tiny\] field 'spec' "
                          r"\(zoo:no-such-model\), row 1"),
                         ({"spec": "gone.py:tiny"}, r"model file 'gone\.py' not found \("
                          r"looked in .+ and .+validation\)"),
                         ({"spec": "tiny.py:nope"}, r"field 'spec' \(tiny\.py:nope\)")):
        with pytest.raises(TraincastError, match=match):
            validate_published(catalog, path=_rows_file(tmp_path, [ROW], model),
                               trust_specs=True)
    with pytest.raises(TraincastError, match=r"\[model\.tiny\] field 'fp16_spec'"):
        validate_published(catalog, path=_rows_file(tmp_path, [dict(ROW, dtype="amp")],
                                                     {"fp16_spec": "zoo:no-such-model"}),
                           trust_specs=True)


def test_rows_of_your_own_report_by_gpu_and_precision(tmp_path: Path) -> None:
    from traincast.validation.published import render_markdown, validate_published

    out = validate_published(_hand_catalog(tmp_path), path=_rows_file(
        tmp_path, [ROW, dict(ROW, dtype="AMP", throughput=2000.0)]), trust_specs=True)
    assert "megatron" not in out  # the shipped Megatron table is not part of your rows
    assert set(out["by_gpu_dtype"]) == {"hand fp32", "hand fp16"}
    assert out["by_gpu_dtype"]["hand fp16"]["n"] == 1
    text = render_markdown(out)
    assert "| fp16 (AMP) |" in text and "Megatron" not in text
    assert "Cross-GPU ratios: none" in text


def test_optimizer_and_memory_format_reach_the_profile(tmp_path: Path) -> None:
    from traincast.kernels import layout_transpose_bytes
    from traincast.validation.published import _row_features

    path = _rows_file(tmp_path, [ROW], {"optimizer": "sgd", "memory_format": "nhwc"})
    data = load_published(path)
    feats = _row_features(data, data["row"][0], 0, None)
    opt = {str(o["op"]) for o in feats["ops"] if o["phase"] == "optimizer"}
    assert not any("sqrt" in op for op in opt)  # SGD with momentum: no Adam denominator
    assert all(o["layout"] == "nhwc" for o in feats["ops"])
    adam = _row_features(load_published(_rows_file(tmp_path, [ROW])), data["row"][0], 0, None)
    assert any("sqrt" in str(o["op"]) for o in adam["ops"] if o["phase"] == "optimizer")
    # a tensor-core convolution in NCHW pays 2 (B_read + B_written) of transposes, NHWC none
    conv = {"op": "convolution", "bytes_read": 100.0, "bytes_written": 50.0}
    assert layout_transpose_bytes([conv, dict(conv, layout="nhwc")],
                                  ["fp16", "fp16"]).tolist() == [300.0, 0.0]


def test_a_batch_far_over_the_gpu_memory_is_questioned(tmp_path: Path) -> None:
    from traincast.validation.published import memory_warnings

    catalog = _hand_catalog(tmp_path)  # the hand GPU has 16 GB
    rows = [dict(ROW, gpus=8, node="hand-node"), dict(ROW, gpus=8, node="hand-node"),
            dict(ROW)]
    mem = {"weights": 1e9, "grads": 1e9, "optimizer": 2e9}
    feats = [{"params": 1.0, "memory_bytes": dict(mem, activations=a)}
             for a in (30e9, 20e9, 40e9)]
    # footprint S + A = 4 GB + A: 34 GB > 2 x 16 GB is questioned, 24 GB (1.5x) is not
    out = memory_warnings(rows, feats, ["allreduce-local", "allreduce-local", "1w1g"], catalog)
    assert len(out) == 2
    assert out[0].startswith("row 1: batch_per_gpu = 32 needs 34 GB") and "global_batch" in out[0]
    assert out[1].startswith("row 3:") and "check the batch" in out[1]


def test_seq_attention_and_a_config_beside_the_rows_file_reach_the_profile(
        tmp_path: Path) -> None:
    # an hf: config file named relative to the rows file, at 16 tokens, eager or sdpa
    pytest.importorskip("transformers")
    from traincast.validation.published import _row_features

    (tmp_path / "tiny.json").write_text(
        '{"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 1, '
        '"num_attention_heads": 2, "intermediate_size": 64, "vocab_size": 100, '
        '"max_position_embeddings": 64}')
    ops = {}
    for attention in ("eager", "sdpa"):
        path = _rows_file(tmp_path, [dict(ROW, batch_per_gpu=2)],
                          {"spec": "hf:tiny.json", "seq": 16, "attention": attention,
                           "optimizer": "none"})
        data = load_published(path)
        feats = _row_features(data, data["row"][0], 0, None)
        ops[attention] = {str(o["op"]) for o in feats["ops"]}
        assert "optimizer" not in {o["phase"] for o in feats["ops"]}
        # the embedding reads one row per token: 2 sequences x 16 tokens
        emb = next(o for o in feats["ops"] if o["op"] == "embedding")
        assert "2x16" in str(emb["shapes"])
    assert any("softmax" in op for op in ops["eager"])
    assert any("attention" in op for op in ops["sdpa"]) and not any(
        "attention" in op for op in ops["eager"])


H200_ROWS = Path(__file__).resolve().parents[1] / "data" / "h200" / "steps.toml"


def test_the_h200_steps_are_rows_a_gpu_bound_one_within_5_percent(tmp_path: Path) -> None:
    # data/h200/steps.toml: measured steps of a GPU the kernel model never saw; GPT-2 Large at
    # batch 1 (the GPU busy 97% of its step) measured 166.3 ms, 6.01 sequences/s
    pytest.importorskip("transformers")
    import tomllib

    from traincast.validation.published import validate_published

    data = tomllib.loads(H200_ROWS.read_text())
    row = next(r for r in data["row"] if r["model"] == "gpt2-large-eager")
    one = tmp_path / "one.toml"
    model = data["model"]["gpt2-large-eager"]
    one.write_text("[model.gpt2-large-eager]\n"
                   + "".join(f"{k} = {_toml_value(v)}\n" for k, v in model.items())
                   + "\n[[row]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in row.items()))
    out = validate_published(path=one)
    (r,) = out["rows"]
    assert abs(r["error"]) < 0.05


def test_the_h200_rows_are_the_measured_steps() -> None:
    # each row of data/h200/steps.toml is batch / step time of its line of steps.csv
    import csv
    import tomllib

    data = tomllib.loads(H200_ROWS.read_text())
    measured = list(csv.DictReader((H200_ROWS.parent / "steps.csv").open()))
    assert len(data["row"]) == len(measured) == 7
    for row, m in zip(data["row"], measured, strict=True):
        model = data["model"][row["model"]]
        assert (row["batch_per_gpu"], model["seq"], model["attention"]) == \
            (int(m["batch"]), int(m["seq"]), m["attention"])
        assert row["throughput"] == pytest.approx(int(m["batch"]) / float(m["step_ms"]) * 1e3,
                                                  rel=1e-5)
        assert row["dtype"] == ("bf16" if m["amp"] == "bf16" else "fp32")


def test_a_hub_name_is_not_hidden_by_a_folder_of_that_name(tmp_path: Path) -> None:
    from traincast.zoo.hf import config_beside

    (tmp_path / "gpt2").mkdir()  # a results folder, say: no config.json
    assert config_beside("gpt2", tmp_path) == "gpt2"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.json").write_text("{}")
    (tmp_path / "tiny.json").write_text("{}")
    assert config_beside("mine", tmp_path) == str(tmp_path / "mine")
    assert config_beside("tiny.json", tmp_path) == str(tmp_path / "tiny.json")
    assert config_beside("absent.json", tmp_path) == "absent.json"


def test_a_row_without_a_node_takes_its_gpus_own_preset(tmp_path: Path) -> None:
    # the hand GPU names no default_node; the one preset that holds it carries its 8 GPUs
    from traincast.validation.published import check_hardware

    data = load_published(_rows_file(tmp_path, [dict(ROW, gpus=8)]))
    check_hardware(data, _hand_catalog(tmp_path))
    assert data["row"][0]["node"] == "hand-node"


def test_a_gpu_whose_default_node_holds_a_sibling_runs_alone_and_named_nodes_stay_checked(
        tmp_path: Path) -> None:
    # A100-PCIE-80GB's default node a100-pcie holds the 40 GB card: a 1-GPU row without a node
    # takes its links and is priced on the 80 GB card; a row that names that node is refused
    from traincast.validation.published import check_hardware

    data = load_published(_rows_file(tmp_path, [dict(ROW, gpu="A100-PCIE-80GB")]))
    check_hardware(data, load_catalog())
    assert (data["row"][0]["gpu"], data["row"][0]["node"]) == ("A100-PCIE-80GB", "a100-pcie")
    data = load_published(_rows_file(tmp_path, [dict(ROW, gpu="A100-PCIE-80GB",
                                                     node="a100-pcie")]))
    with pytest.raises(TraincastError, match="'a100-pcie' holds A100-PCIE-40GB"):
        check_hardware(data, load_catalog())


def test_rows_files_refuse_twins_unknown_node_keys_and_infinite_buckets(tmp_path: Path) -> None:
    from traincast.validation.published import check_hardware

    with pytest.raises(TraincastError, match="row 3: the same row as row 1"):
        load_published(_rows_file(tmp_path, [ROW, dict(ROW, batch_per_gpu=64), ROW]))
    # 1000 and 1000.0, FP32 and fp32 are the same row
    with pytest.raises(TraincastError, match="row 2: the same row as row 1"):
        load_published(_rows_file(tmp_path, [ROW, dict(ROW, throughput=1000, dtype="FP32")]))
    path = _rows_file(tmp_path, [ROW])
    path.write_text(path.read_text() + '\n[node]\nA100-SXM4-80G = "dgx-a100"\n')
    with pytest.raises(TraincastError, match=r"\[node\] key 'A100-SXM4-80G': not a catalog "
                                             "GPU") as err:
        check_hardware(load_published(path), load_catalog())
    assert "did you mean 'A100-SXM4-80GB'?" in err.value.hint
    with pytest.raises(TraincastError, match="'ddp_bucket_bytes' must be positive and finite, "
                                             "got inf"):
        load_published(_rows_file(tmp_path, [ROW], {"ddp_bucket_bytes": float("inf")}))
    bare = tmp_path / "bare.toml"
    bare.write_text('[[row]]\nmodel = "resnet50"\ngpu = "V100"\ngpus = 1\ndtype = "fp32"\n'
                    'batch_per_gpu = 64\nthroughput = 300.0\nunit = "images/s"\n'
                    'citation = "c"\n')
    with pytest.raises(TraincastError) as err:
        load_published(bare)
    assert "has no [model.NAME] table" in err.value.hint


def test_the_setup_of_a_whole_fp16_row_says_so() -> None:
    from traincast.validation.published import setup_of, setup_text

    feats = {"ops": [{}]}
    kw = {"synthetic_inputs": False, "memory_format": "nchw", "tf32_matmul": False}
    half = setup_text(setup_of(feats, **kw, amp=True, half_model=True))
    assert "whole-fp16 model" in half and "autocast: matmuls" not in half
    assert "autocast: matmuls" in setup_text(setup_of(feats, **kw, amp=True))


def test_the_setup_says_where_mixed_precision_and_tf32_come_from_and_act() -> None:
    """A profile taken under autocast is mixed precision as profiled (no --amp to repeat it);
    on a GPU without a 16-bit peak (K80) mixed precision is priced in fp32, and says so;
    --tf32-matmul on a GPU without TF32 (T4) leaves fp32 products fp32, and says why."""
    from traincast.hardware.catalog import load_catalog
    from traincast.validation.published import setup_of, setup_text

    cat = load_catalog()
    kw = {"synthetic_inputs": False, "memory_format": "nchw"}
    profiled = {"ops": [{"dtype": "float16"}], "amp": True}
    text = setup_text(setup_of(profiled, **kw, tf32_matmul=False, gpu=cat.gpu("V100")))
    assert "mixed precision as profiled (autocast" in text and "--amp" not in text
    text = setup_text(setup_of({"ops": [{}]}, **kw, tf32_matmul=False, amp=True,
                               gpu=cat.gpu("K80")))
    assert "mixed precision, priced in fp32 on this GPU, which has no 16-bit peak" in text
    assert "(predict flags: --amp)" in text and "autocast" not in text
    marked = {"ops": [{"dtype": "tf32"}]}
    text = setup_text(setup_of(marked, **kw, tf32_matmul=True, gpu=cat.gpu("T4")))
    assert "fp32 matmuls fp32 (--tf32-matmul: this GPU has no TF32)" in text
    text = setup_text(setup_of(marked, **kw, tf32_matmul=True, gpu=cat.gpu("A100")))
    assert "fp32 matmuls TF32," in text
    setup = setup_of(marked, **kw, tf32_matmul=True, gpu=cat.gpu("RTX-4090"))
    assert (setup["tf32_matmul_no_effect"], setup["tf32_matmul_why"]) == (True, "no faster")
    assert "fp32 matmuls fp32 (--tf32-matmul: this GPU's TF32 is no faster)" in setup_text(setup)


def test_an_fp16_spec_row_is_set_up_as_a_whole_fp16_model(tmp_path: Path) -> None:
    from traincast.validation.published import validate_published

    out = validate_published(_hand_catalog(tmp_path), path=_rows_file(
        tmp_path, [ROW, dict(ROW, dtype="fp16")], {"fp16_spec": "tiny.py:tiny"}),
        trust_specs=True)
    fp32, half = out["rows"]
    assert half["setup"]["half_model"] and half["setup"]["amp"]
    assert not fp32["setup"]["half_model"] and not fp32["setup"]["amp"]
