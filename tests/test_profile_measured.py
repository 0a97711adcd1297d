"""Profile what was measured: ``--seq``, ``--optimizer none`` and ``--attention eager|sdpa``
(zoo text models and ``hf:`` configs built offline, no weights), stated in the record and
the table. Expected numbers come from hand formulas (one multiply-add = 2 FLOPs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch import nn  # noqa: E402

from traincast.errors import TraincastError  # noqa: E402
from traincast.features.profile import profile, profile_model  # noqa: E402
from traincast.features.specs import load_spec  # noqa: E402

# a BERT-large-like encoder, small enough for the meta device in a test: hidden h, heads a
# (head size d = h / a), layers n, MLP f, vocabulary v; 512 positions as BERT's
H, A, N, F_, V, POSITIONS = 128, 8, 2, 256, 1000, 512
D = H // A
LINEAR_OPS = ("addmm", "mm")


@pytest.fixture
def bert(tmp_path: Path) -> str:
    cfg = {"model_type": "bert", "architectures": ["BertForMaskedLM"], "hidden_size": H,
           "num_attention_heads": A, "num_hidden_layers": N, "intermediate_size": F_,
           "vocab_size": V, "max_position_embeddings": POSITIONS, "type_vocab_size": 2}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return f"hf:{tmp_path}"


def _fwd(rec: dict, ops: tuple[str, ...]) -> list[dict]:
    return [r for r in rec["ops"] if r["phase"] == "forward" and r["op"] in ops]


def _scores_shape(b: int, s: int) -> str:
    return f"{b}x{A}x{s}x{s}"


def _bert_linear_flops(b: int, s: int) -> int:
    # per layer Q, K, V, O (h x h) and the MLP (h x f, f x h); then the MLM head's transform
    # (h x h) and decoder (h x v): each 2 b s d_in d_out
    per_token = N * (4 * H * H + 2 * H * F_) + H * H + H * V
    return 2 * b * s * per_token


def test_eager_attention_records_the_score_products_and_softmax(bert: str) -> None:
    b, s = 2, 512
    rec = profile_model(bert, batch_size=b, seq_len=s, attention="eager", ops=True)
    assert (rec["seq_len"], rec["attention"], rec["batch_size"]) == (s, "eager", b)
    # Q K^T and P V: per layer 2 b a s^2 d each, as batched products over b a heads
    bmm = _fwd(rec, ("bmm",))
    assert sum(r["flops"] for r in bmm) == N * 2 * (2 * b * A * s * s * D)
    assert sorted(r["shapes"] for r in bmm) == sorted(
        [f"{b * A}x{s}x{D};{b * A}x{D}x{s}", f"{b * A}x{s}x{s};{b * A}x{s}x{D}"] * N)
    scores = _scores_shape(b, s)
    softmax = [r for r in _fwd(rec, ("_softmax",)) if r["shapes"] == scores]
    assert len(softmax) == N
    # softmax reads and writes the b a s^2 fp32 scores
    assert all(r["bytes_read"] == r["bytes_written"] == 4 * b * A * s * s for r in softmax)
    # attention dropout (p = 0.1) over the scores as the GPU runs it: one fused kernel per
    # layer that reads the b a s^2 fp32 scores and writes them and a 1-byte mask
    dropout = [r for r in rec["ops"] if r["phase"] == "forward" and r["op"] == "native_dropout"
               and r["shapes"] == scores]
    assert len(dropout) == N
    assert all(r["bytes_read"] == 4 * b * A * s * s and r["bytes_written"] == 5 * b * A * s * s
               for r in dropout)
    back = [r for r in rec["ops"] if r["phase"] == "backward"
            and r["op"] == "native_dropout_backward" and r["shapes"].startswith(scores)]
    assert len(back) == N
    assert not [r for r in rec["ops"] if r["op"] in ("bernoulli_", "div_")]
    assert not [r for r in rec["ops"] if "scaled_dot_product" in r["op"]]


def test_sdpa_attention_is_one_kernel_without_the_score_matrix(bert: str) -> None:
    b, s = 2, 512
    rec = profile_model(bert, batch_size=b, seq_len=s, attention="sdpa", ops=True)
    assert rec["attention"] == "sdpa"
    fused = [r for r in rec["ops"] if "scaled_dot_product" in r["op"]
             and r["phase"] == "forward"]
    assert len(fused) == N
    assert sum(r["flops"] for r in fused) == N * 2 * (2 * b * A * s * s * D)
    assert not _fwd(rec, ("bmm",))
    assert not [r for r in rec["ops"] if _scores_shape(b, s) in r["shapes"]]
    eager = profile_model(bert, batch_size=b, seq_len=s, attention="eager")
    # the same linear layers: the forward FLOPs are equal, the memory traffic is not
    assert rec["flops_forward"] == eager["flops_forward"]
    assert rec["bytes_memory_bound"] < eager["bytes_memory_bound"]


def test_seq_scales_the_linear_layers_exactly(bert: str) -> None:
    b = 2
    recs = {s: profile_model(bert, batch_size=b, seq_len=s, ops=True) for s in (256, 512)}
    linear = {s: sum(r["flops"] for r in _fwd(rec, LINEAR_OPS)) for s, rec in recs.items()}
    assert linear[256] == _bert_linear_flops(b, 256)
    assert linear[512] == _bert_linear_flops(b, 512) == 2 * linear[256]
    assert recs[256]["seq_len"] == 256 and recs[512]["seq_len"] == 512
    assert recs[512]["input_bytes"] == 2 * 8 * b * 512  # int64 input ids and labels
    default = profile_model(bert, batch_size=b)
    assert default["seq_len"] == 512  # min(512, max positions)


def test_optimizer_none_removes_the_optimizer_step(bert: str) -> None:
    adam = profile_model(bert, batch_size=2, seq_len=128, ops=True)
    none = profile_model(bert, batch_size=2, seq_len=128, optimizer="none", ops=True)
    assert none["optimizer"] == "none" and adam["optimizer"] == "adam"
    opt_rows = [r for r in adam["ops"] if r["phase"] == "optimizer"]
    assert opt_rows and any("_foreach" in r["op"] for r in opt_rows)
    assert not [r for r in none["ops"] if r["phase"] == "optimizer"]
    assert not [r for r in none["ops"] if "_foreach" in r["op"]]
    # forward and backward are the same step; the totals drop by the optimizer's share
    step = [r for r in adam["ops"] if r["phase"] != "optimizer"]
    assert [r for r in none["ops"]] == step
    assert none["flops_total"] == adam["flops_total"] - sum(r["flops"] for r in opt_rows)
    assert none["bytes_memory_bound"] == adam["bytes_memory_bound"] - sum(
        r["bytes_read"] + r["bytes_written"] for r in opt_rows if r["bound"] == "memory")
    assert none["n_ops"] == adam["n_ops"] - len(opt_rows)
    weights = adam["memory_bytes"]["weights"]
    assert adam["memory_bytes"]["optimizer"] == 2 * weights  # Adam: two fp32 moments
    assert none["memory_bytes"]["optimizer"] == 0
    assert none["memory_bytes"]["grads"] == adam["memory_bytes"]["grads"]


def test_optimizer_none_keeps_a_sparse_tables_gradient_but_not_its_update() -> None:
    rows, dim, b, bag = 1000, 16, 8, 4
    model = nn.EmbeddingBag(rows, dim, mode="sum", sparse=True)
    ids = torch.arange(b * bag).reshape(b, bag)
    sgd = profile(model, ids, optimizer="sgd", ops=True)
    none = profile(model, ids, optimizer="none", ops=True)
    names = {r["op"] for r in none["ops"]}
    assert "sparse_embedding_backward" in names and "sparse_embedding_update" not in names
    assert "sparse_embedding_update" in {r["op"] for r in sgd["ops"]}
    # the backward writes one gradient row per lookup: b bag rows of dim fp32
    (grad,) = [r for r in none["ops"] if r["op"] == "sparse_embedding_backward"]
    assert grad["bytes_written"] == b * bag * dim * 4


def test_zoo_text_model_takes_seq_and_eager_attention() -> None:
    # GPT-2 small (h 768, 12 layers, 12 heads, vocabulary 50,257): every linear layer runs
    # over the b s tokens, so its forward FLOPs are 2 b s (12 layers x 12 h^2 + h v)
    h, layers, heads, v, b = 768, 12, 12, 50_257, 1
    recs = {s: profile_model("zoo:gpt2", batch_size=b, seq_len=s, attention="eager", ops=True)
            for s in (64, 128)}
    linear = {s: sum(r["flops"] for r in _fwd(rec, LINEAR_OPS)) for s, rec in recs.items()}
    assert linear[64] == 2 * b * 64 * (layers * 12 * h * h + h * v)
    assert linear[128] == 2 * linear[64]
    s, d = 128, h // heads
    bmm = _fwd(recs[s], ("bmm",))
    assert sum(r["flops"] for r in bmm) == layers * 2 * (2 * b * heads * s * s * d)
    assert len([r for r in _fwd(recs[s], ("_softmax",))
                if r["shapes"] == f"{b}x{heads}x{s}x{s}"]) == layers
    assert (recs[s]["seq_len"], recs[s]["attention"]) == (128, "eager")
    sdpa = profile_model("zoo:gpt2", batch_size=b, seq_len=s, ops=True)
    assert sdpa["attention"] == "sdpa" and not _fwd(sdpa, ("bmm",))
    assert len([r for r in sdpa["ops"] if "scaled_dot_product" in r["op"]
                and r["phase"] == "forward"]) == layers


def test_zoo_default_profile_is_unchanged_and_states_its_sequence() -> None:
    from traincast.zoo.profiles import load_profiles

    shipped = load_profiles()
    if shipped["meta"]["torch"] != torch.__version__.split("+")[0]:
        pytest.skip("profiles.json was built with another torch")
    rec = profile_model("zoo:bert-base")
    assert (rec["seq_len"], rec["attention"], rec["optimizer"]) == (128, "sdpa", "adam")
    old = shipped["models"]["bert-base"]
    for key in ("flops_total", "flops_compute_bound", "bytes_memory_bound",
                "bytes_memory_bound_fused", "n_ops", "input_bytes", "memory_bytes"):
        assert rec[key] == old[key], key
    assert profile_model("zoo:resnet50", batch_size=1)["seq_len"] is None


def test_config_only_zoo_llm_takes_seq_and_attention() -> None:
    rec = profile_model("zoo:megatron-gpt-1.7b", 1, seq_len=256, attention="eager")
    assert (rec["seq_len"], rec["attention"]) == (256, "eager")
    assert rec["input_bytes"] == 8 * 256 * 2  # input ids and labels, int64
    with pytest.raises(TraincastError, match="--seq 4096 is over the 2048 positions") as e:
        profile_model("zoo:megatron-gpt-1.7b", 1, seq_len=4096)
    # a zoo model has no config.json of the user's: the hint says only what the user can do
    assert e.value.hint == "use --seq 2048 or less"


def test_bad_seq_and_attention_are_one_line_errors(tc, bert: str, tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("import torch\n"
                   "def build(b):\n"
                   "    return torch.nn.Linear(2, 2), (torch.randn(b, 2),)\n")
    cases = [
        (("zoo:resnet50", "--seq", "128"), "--seq: zoo:resnet50 is not a text model"),
        (("zoo:bert-base", "--seq", "1024"), "--seq 1024 is over the 512 positions"),
        ((bert, "--seq", "1024"), "--seq 1024 is over the 512 positions"),
        ((bert, "--attention", "flash"), "--attention must be one of eager, sdpa"),
        (("zoo:vit-b16", "--attention", "eager"), "offers only sdpa"),
        (("zoo:dlrm", "--attention", "sdpa"), "has no attention layers"),
        ((f"{src}:build", "--seq", "64"), "--seq applies to zoo text models and hf: models"),
        ((bert, "--optimizer", "lamb"), "--optimizer must be one of adam, sgd, none"),
        (("hf:xlnet", "--attention", "sdpa"), "--attention sdpa: AutoModelForCausalLM does not "
                                              "offer it (XLNetLMHeadModel does not support"),
    ]
    for args, message in cases:
        r = tc("profile", *args)
        assert r.returncode == 2, (args, r.stderr)
        assert message in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr
        first = r.stderr.strip().splitlines()[0]
        assert message in first, (args, r.stderr)
    r = tc("profile", bert, "--seq", "0")
    assert r.returncode == 2 and "--seq" in r.stderr
    # the batch's bound is one rule, said alike by the flag's check and by --help
    r = tc("profile", bert, "--batch", "1000000001")
    assert r.returncode == 2 and "from 1 to 1,000,000,000" in r.stderr
    assert "1 to 1,000,000,000" in " ".join(tc("profile", "--help").stdout.split())


def test_seq_on_an_hf_model_without_tokens_is_an_error(tmp_path: Path) -> None:
    vit = {"model_type": "vit", "architectures": ["ViTForImageClassification"],
           "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
           "intermediate_size": 64, "image_size": 32, "patch_size": 16}
    (tmp_path / "config.json").write_text(json.dumps(vit))
    with pytest.raises(TraincastError, match="--seq applies to models that take token ids"):
        profile_model(f"hf:{tmp_path}", 1, seq_len=64)
    built = load_spec(f"hf:{tmp_path}", 1, attention="eager")
    assert (built.seq_len, built.attention) == (None, "eager")  # images: no sequence
    # a model without attention layers states none, whatever its config names
    assert load_spec("hf:resnet", 1).attention is None


def test_table_and_json_state_batch_seq_optimizer_and_attention(tc, bert: str,
                                                                 tmp_path: Path) -> None:
    args = ("profile", bert, "--batch", "2", "--seq", "64", "--optimizer", "none",
            "--attention", "eager")
    r = tc(*args)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())  # the title may wrap
    assert "batch 2, seq 64, float32, eager attention, optimizer none (forward + backward " \
        "only)" in text
    assert "sequence length (tokens) │ 64" in text and "attention │ eager" in text
    assert "FLOPs of compute-bound ops" in text
    j = tc(*args, "--json")
    assert j.returncode == 0, j.stderr
    rec = json.loads(j.stdout)
    assert (rec["batch_size"], rec["seq_len"], rec["optimizer"], rec["attention"]) == \
        (2, 64, "none", "eager")
    out = tmp_path / "rec.json"
    assert tc(*args, "--json", "-o", str(out)).returncode == 0
    assert json.loads(out.read_text())["seq_len"] == 64
    from traincast.features.io import load_features

    pq = tmp_path / "rec.parquet"
    assert tc(*args, "-o", str(pq)).returncode == 0
    back = load_features(pq)
    assert (back["seq_len"], back["attention"], back["optimizer"]) == (64, "eager", "none")
