"""The reference zoo: published parameter counts, published FLOPs, and its shipped profiles."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from traincast.errors import TraincastError
from traincast.zoo import MODELS, ZOO, get_llm, get_model, lookup

torch = pytest.importorskip("torch")
from traincast.features.profile import profile_model  # noqa: E402


def n_params(name: str) -> int:
    return sum(p.numel() for p in get_model(name).build_meta().parameters())


@pytest.mark.parametrize("name", [n for n, e in ZOO.items() if e.params_exact])
def test_published_parameter_counts_exact(name: str) -> None:
    assert n_params(name) == ZOO[name].published_params


def test_gpt2_and_resnet_counts() -> None:
    assert n_params("gpt2") == 124_439_808
    assert n_params("resnet50") == 25_557_032
    assert n_params("resnet101") == 44_549_160  # torchvision resnet101


def resnext_formula(layers: tuple[int, ...], groups: int, base_width: int) -> int:
    # stem conv + BN; per block 1x1 (cin -> w), grouped 3x3 (w -> w, w / groups inputs per
    # output), 1x1 (w -> 4 planes), three BNs (2 per channel), a projection on each stage's
    # first block; the 1000-class head
    total, cin = 3 * 64 * 7 * 7 + 2 * 64, 64
    for i, n in enumerate(layers):
        planes = 64 * 2 ** i
        w, cout = planes * base_width // 64 * groups, 4 * planes
        for j in range(n):
            total += cin * w + w * (w // groups) * 9 + w * cout + 2 * (2 * w + cout)
            if j == 0:
                total += cin * cout + 2 * cout
            cin = cout
    return total + cin * 1000 + 1000


def test_resnext_counts_by_hand() -> None:
    assert resnext_formula((3, 4, 6, 3), 1, 64) == 25_557_032  # the formula is ResNet-50's too
    assert n_params("resnext101-32x4d") == resnext_formula((3, 4, 23, 3), 32, 4) == 44_177_704
    grouped = [m for m in get_model("resnext101-32x4d").build_meta().modules()
               if getattr(m, "groups", 1) > 1]
    assert len(grouped) == 33 and {m.groups for m in grouped} == {32}


def gpt2_formula(v: int, p: int, h: int, layers: int) -> int:
    # embeddings + per layer (4 h^2 + 4h attention, 8 h^2 + 5h MLP, 4h two LayerNorms)
    # + final LayerNorm; the output head is tied to the token embedding
    return v * h + p * h + layers * (12 * h * h + 13 * h) + 2 * h


def bert_formula(h: int, layers: int) -> int:
    v, p = 30_522, 512
    embeddings = v * h + p * h + 2 * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * 4 * h + 4 * h) + (4 * h * h + h) + 2 * h
    heads = (h * h + h) + 2 * h + v + (h * 2 + 2)  # MLM transform + LN + decoder bias, NSP
    return embeddings + layers * layer + (h * h + h) + heads


def test_hand_formulas_for_transformers() -> None:
    assert n_params("gpt2") == gpt2_formula(50_257, 1024, 768, 12)
    assert n_params("gpt2-xl") == gpt2_formula(50_257, 1024, 1600, 48)
    assert n_params("bert-base") == bert_formula(768, 12)
    assert n_params("bert-large") == bert_formula(1024, 24)
    h, f, v = 4096, 11_008, 32_000  # LLaMA-7B: untied head, no biases, RMSNorm weights
    assert n_params("llama-7b") == 2 * v * h + 32 * (4 * h * h + 3 * h * f + 2 * h) + h


def test_transformer_nmt_near_published_65m() -> None:
    d, f, v = 512, 2048, 37_000
    attn = 4 * (d * d + d)
    ffn = d * f + f + f * d + d
    expected = v * d + 6 * (attn + ffn + 2 * 2 * d) + 6 * (2 * attn + ffn + 3 * 2 * d)
    assert n_params("transformer-nmt") == expected
    assert abs(expected - 65e6) / 65e6 < 0.05  # Vaswani et al.: "65M" (vocabulary-dependent)


def test_speech_recsys_graph_hand_formulas() -> None:
    h, freq = 800, 41
    conv = 32 * 41 * 11 + 32 * 32 * 21 * 11 + 2 * (2 * 32)
    gru = sum(2 * (3 * h * (n + h) + 2 * 3 * h) for n in [32 * freq] + [h] * 4)
    assert n_params("speech") == conv + gru + 4 * 2 * h + h * 29
    rows = 33_762_577  # Criteo Kaggle tables
    bottom = (13 * 512 + 512) + (512 * 256 + 256) + (256 * 64 + 64) + (64 * 16 + 16)
    top = (367 * 512 + 512) + (512 * 256 + 256) + (256 + 1)  # 367 = 16 + 27 * 26 / 2
    assert n_params("dlrm") == rows * 16 + bottom + top
    d = 64
    assert n_params("multi-interest") == 1_708_530 * d + d * d + (d * 4 * d + 4 * d) + (
        4 * d * d + d)
    assert n_params("gcn") == (602 * 128 + 128) + (128 * 41 + 41)


def test_resnet50_forward_is_4_1_gmacs_per_image() -> None:
    rec = profile_model("zoo:resnet50", batch_size=1)
    gmacs = rec["flops_forward"] / 2 / 1e9  # one multiply-add = 2 FLOPs
    assert abs(gmacs - 4.1) / 4.1 < 0.02


def test_mobilenet_v2_forward_is_300_mmacs_per_image() -> None:
    rec = profile_model("zoo:mobilenet-v2", batch_size=1)
    assert abs(rec["flops_forward"] / 2 / 300e6 - 1) < 0.02  # Sandler et al.: 300M MACs
    # backward costs two forwards (depthwise convolutions included)
    assert 2.9 < rec["flops_total"] / rec["flops_forward"] < 3.0


def test_transformer_training_flops_near_6_params_tokens() -> None:
    # BERT-base at 128 tokens: the attention-score term (~ n_ctx / d_model of the rest) is small
    batch, seq = 2, 128
    rec = profile_model("zoo:bert-base", batch_size=batch)
    six_nt = 6 * rec["params"] * batch * seq
    assert abs(rec["flops_compute_bound"] - six_nt) / six_nt < 0.10
    # forward is a third of forward + backward (2N vs 4N FLOPs per token)
    assert abs(rec["flops_forward"] / rec["flops_compute_bound"] - 1 / 3) < 0.02


def test_dlrm_embedding_rows_touched_match_the_batch_ids() -> None:
    entry = get_model("dlrm")
    _, sparse, _ = entry.inputs(32)
    unique = sum(int(torch.unique(sparse[:, i]).numel()) for i in range(sparse.shape[1]))
    rec = profile_model("zoo:dlrm", batch_size=32)
    assert rec["embedding_bytes_touched"] == unique * 16 * 4
    assert rec["params_embedding"] == 33_762_577 * 16
    assert unique < 26 * 32  # Zipf ids repeat


def test_gru_operator_flops_match_torchs_decomposed_gru() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    from traincast.zoo.speech import BiGRU

    b, t, n, h = 2, 5, 12, 8
    ref = torch.nn.GRU(n, h, batch_first=True, bidirectional=True)
    x = torch.randn(b, t, n)
    with FlopCounterMode(display=False) as counter:
        ref(x)
    layer = BiGRU(n, h)
    with FlopCounterMode(display=False) as ours:
        layer(x)
    assert ours.get_total_flops() == counter.get_total_flops() == 2 * 2 * b * t * 3 * h * (n + h)
    # and the fused op computes the same function as torch's GRU
    for name, p in layer.named_parameters():
        src = name.replace("weight_ih", "weight_ih_l0").replace("weight_hh", "weight_hh_l0")
        src = src.replace("bias_ih", "bias_ih_l0").replace("bias_hh", "bias_hh_l0")
        with torch.no_grad():
            p.copy_(getattr(ref, src))
    y, _ = ref(x)
    assert torch.allclose(layer(x), y[..., :h] + y[..., h:], atol=1e-5)
    # and it trains on real tensors: its gradients are torch's GRU gradients
    xr = x.clone().requires_grad_()
    layer(xr).square().sum().backward()
    xg = x.clone().requires_grad_()
    out, _ = ref(xg)
    (out[..., :h] + out[..., h:]).square().sum().backward()
    assert torch.allclose(xr.grad, xg.grad, atol=1e-5)
    assert torch.allclose(layer.weight_ih.grad, ref.weight_ih_l0.grad, atol=1e-4)


def test_gcn_sparse_product_is_memory_bound_with_2ef_flops() -> None:
    nodes = 500
    rec = profile_model("zoo:gcn", batch_size=nodes, ops=True)
    x, src, *_ = get_model("gcn").inputs(nodes)
    spmm = [r for r in rec["ops"] if r["op"] == "spmm"]
    edges = src.numel()
    assert sorted(r["flops"] for r in spmm) == sorted([2 * edges * 128, 2 * edges * 41] * 2)
    assert {r["bound"] for r in spmm} == {"memory"}
    assert rec["input_bytes"] == 0  # the graph stays on the GPU
    # a subgraph is at most the Reddit graph's 232,965 nodes (Hamilton et al., 2017)
    with pytest.raises(TraincastError, match="the Reddit graph has 232,965 nodes"):
        get_model("gcn").inputs(232_966)


def test_llama_is_meta_only() -> None:
    for name in ("llama-7b", "llama2-7b"):
        assert get_model(name).meta_only
        with pytest.raises(ValueError):
            get_model(name).build_cpu(1)


def test_default_batches_and_inputs() -> None:
    for name, entry in ZOO.items():
        if name in ("gcn", "llama-7b", "llama2-7b", "gpt2-xl"):
            continue
        inputs = entry.inputs(3)
        assert inputs and all(isinstance(t, torch.Tensor) for t in inputs)
        assert inputs[0].shape[0] == 3, name
        assert entry.default_batch >= 1 and entry.input_shape and entry.family


def test_shipped_profiles_cover_the_zoo_and_match_a_fresh_profile() -> None:
    from traincast.zoo.build_profiles import profile_entry
    from traincast.zoo.profiles import load_profiles

    shipped = load_profiles()
    assert set(shipped["models"]) == set(ZOO)
    for rec in shipped["models"].values():
        for key in ("params", "flops_compute_bound", "bytes_memory_bound",
                    "bytes_memory_bound_amp", "memory_bytes_amp", "weight_bytes",
                    "embedding_bytes_touched", "input_bytes", "bytes_memory_bound_fused"):
            assert key in rec
        assert rec["bytes_memory_bound_fused"] <= rec["bytes_memory_bound"]
    if shipped["meta"]["torch"] != torch.__version__.split("+")[0]:
        pytest.skip("profiles.json was built with another torch")
    fresh = json.loads(json.dumps(profile_entry("dlrm")))
    assert fresh == shipped["models"]["dlrm"]


def test_workload_features_need_no_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from traincast.zoo.profiles import workload_features, workload_names\n"
        "import json\n"
        "names = workload_names()\n"
        "out = {t: workload_features(t)['profile'] for t in ['bert', 'nmt', 'ctr', "
        "'graphlearn', 'resnet', 'inception', 'xlnet', 'ResNet50', 'zoo:gpt2']}\n"
        "out['unknown'] = workload_features('no-such-workload')\n"
        "print(json.dumps([names, out]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    names, out = json.loads(done.stdout)
    assert out == {"bert": "bert-base", "nmt": "transformer-nmt", "ctr": "dlrm",
                   "graphlearn": "gcn", "resnet": "resnet50", "inception": "resnet50",
                   "xlnet": "bert-large", "ResNet50": "resnet50", "zoo:gpt2": "gpt2",
                   "unknown": None}
    assert set(ZOO) <= set(names) and "graphlearn" in names


def test_every_alias_names_a_model_and_a_reason() -> None:
    from traincast.zoo.profiles import load_aliases, workload_features

    aliases = load_aliases()
    assert {"bert", "nmt", "ctr", "graphlearn", "resnet", "inception", "xlnet"} <= set(aliases)
    for tag, entry in aliases.items():
        assert entry["profile"] in ZOO and len(entry["reason"]) > 20, tag
    rec = workload_features("ctr")
    assert rec["workload"] == "ctr" and rec["profile"] == "dlrm"
    assert rec["embedding_bytes_touched"] > 0


# ------------------------------------------------------------------ the one model registry

def test_every_zoo_name_says_what_it_can_do() -> None:
    # the torch modules of the zoo, by name (docs/zoo.md)
    assert set(ZOO) == {"bert-base", "bert-large", "dlrm", "gcn", "gpt2", "gpt2-xl", "llama-7b",
                        "llama2-7b", "mobilenet-v2", "multi-interest", "resnet101", "resnet50",
                        "resnext101-32x4d",
                        "speech", "transformer-nmt", "vit-b16"}
    assert all("torch" in MODELS[n].capabilities for n in ZOO)
    assert {"gpt3-175b", "llama2-70b", "mixtral-8x7b"} <= {
        n for n, e in MODELS.items() if e.capabilities == ("llm",)}
    assert MODELS["resnet50"].capabilities == ("torch",)
    for name in ("gpt2", "gpt2-xl", "llama-7b", "llama2-7b"):
        assert MODELS[name].capabilities == ("torch", "llm"), name
    for entry in MODELS.values():
        assert entry.capabilities and entry.family and entry.description and entry.source


def test_names_and_aliases_resolve_case_insensitively() -> None:
    assert lookup("zoo:ResNet-50").name == "resnet50"
    assert lookup("Llama-2-7b").name == "llama2-7b"
    assert lookup("gpt3").name == "gpt3-175b"
    seen: dict[str, str] = {}
    for entry in MODELS.values():
        for name in (entry.name, *entry.aliases):
            assert name not in seen, (name, seen.get(name))
            seen[name] = entry.name
    with pytest.raises(TraincastError, match="unknown zoo model"):
        lookup("zoo:no-such-model")


def test_llama_7b_and_llama2_7b_work_as_module_and_as_config() -> None:
    h, f, v = 4096, 11_008, 32_000  # no biases, RMSNorm weights, untied head
    by_hand = 2 * v * h + 32 * (4 * h * h + 3 * h * f + 2 * h) + h
    for name in ("llama-7b", "llama2-7b"):
        assert n_params(name) == get_llm(name).params == by_hand
    assert get_llm("llama-7b").seq == 2048 and get_llm("llama2-7b").seq == 4096
    assert get_model("llama2-7b").inputs(1)[0].shape == (1, 4096)


def test_gpt2_config_counts_its_module() -> None:
    for name, (layers, h) in {"gpt2": (12, 768), "gpt2-xl": (48, 1600)}.items():
        assert get_llm(name).params == n_params(name) == gpt2_formula(50_257, 1024, h, layers)


def test_a_missing_capability_is_a_clear_error() -> None:
    with pytest.raises(TraincastError, match="no torch module") as exc:
        get_model("zoo:gpt3-175b")
    assert "plan" in exc.value.hint
    assert "through transformers" in exc.value.hint
    with pytest.raises(TraincastError, match="no decoder-only language-model config") as exc:
        get_llm("zoo:resnet50")
    assert "profile" in exc.value.hint


def test_shipped_decoder_checkpoints_count_their_published_params() -> None:
    # no torch: every hub.toml decoder-only checkpoint with a published count, read as a
    # decoder-only config, gives that count by the config formula
    from traincast.zoo.hub import DECODER_TYPES, decoder_config, known_configs

    checked = 0
    for name, entry in known_configs().items():
        if entry.get("model_type") in DECODER_TYPES and "params" in entry:
            cfg = decoder_config(name)
            assert cfg is not None and cfg.params == entry["params"], name
            checked += 1
    assert checked >= 6  # GPT-2 small to XL, Llama 2 13B, Mistral 7B


def test_gpt2_keys_read_tie_word_embeddings() -> None:
    from traincast.zoo.llm import from_hf_dict

    keys = {"n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50_257}
    tied = from_hf_dict(keys, "gpt2", "test")
    untied = from_hf_dict({**keys, "tie_word_embeddings": False}, "gpt2", "test")
    assert tied.tied and tied.params == 124_439_808
    assert not untied.tied and untied.params == tied.params + 50_257 * 768


def test_hub_names_and_aliases_share_the_registry_index() -> None:
    from traincast.zoo.hub import hub_entry, known_configs
    from traincast.zoo.registry import alias_index

    configs = known_configs()
    assert "gpt2" in configs and "openai-community/gpt2" not in configs  # by name, once
    assert hub_entry("OpenAI-Community/GPT2") is configs["gpt2"]
    assert hub_entry("meta-llama/llama-2-13b-hf")["name"] == "meta-llama/Llama-2-13b-hf"
    assert hub_entry("no-such-checkpoint") is None
    with pytest.raises(TraincastError, match=r'hub.toml: alias \'gpt2\' of \[config."b"\] is '
                                             "already the name or an alias of gpt2"):
        alias_index({"gpt2": (), "b": ("GPT2",)}, "traincast/zoo/hub.toml", 'config."{}"')
    with pytest.raises(TraincastError, match="differ only in case"):
        alias_index({"A": (), "a": ()}, "hub.toml", 'config."{}"')


def test_registry_errors_name_the_file_and_table() -> None:
    from traincast.zoo.registry import _entry

    with pytest.raises(TraincastError, match=r"models.toml: \[model.x\]: unknown key"):
        _entry("x", {"family": "cnn", "description": "d", "colour": 1})
    with pytest.raises(TraincastError, match=r"\[model.x\]: needs a \[model.x.torch\]"):
        _entry("x", {"family": "cnn", "description": "d"})
    with pytest.raises(TraincastError, match=r"\[model.x\].llm: missing required key 'ffn'"):
        _entry("x", {"family": "transformer", "description": "d",
                     "llm": {"layers": 2, "hidden": 8, "heads": 2, "vocab": 10}})


def test_zoo_list_shows_capabilities() -> None:
    from typer.testing import CliRunner

    from traincast.cli import app

    res = CliRunner().invoke(app, ["zoo", "list", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.stdout)["models"]}
    assert set(rows) == set(MODELS)
    assert rows["resnet101"]["capabilities"] == ["torch"]
    assert rows["resnet101"]["params"] == 44_549_160
    assert rows["llama2-7b"]["capabilities"] == ["torch", "llm"]
    assert rows["llama2-7b"]["aliases"] == ["llama-2-7b"]
    assert rows["gpt3-175b"]["capabilities"] == ["llm"]
    # GPT-3 175B by hand: 96 layers of 12 h^2 + 13 h, token and position embeddings
    # (50257 + 2048) h, final layer norm 2 h; h = 12288 (Brown et al. 2020: 175B)
    h = 12288
    assert rows["gpt3-175b"]["params"] == 96 * (12 * h * h + 13 * h) + (50257 + 2048) * h + 2 * h
    res = CliRunner().invoke(app, ["zoo", "list"])
    assert res.exit_code == 0 and "llama2-7b" in res.stdout and "profile+plan" in res.stdout
