"""`hf:NAME` of shipped Hub checkpoints (no network) and zoo models known only by their
decoder-only config, built through transformers on the meta device."""

from __future__ import annotations

import tomllib
from importlib import resources

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from traincast.errors import TraincastError  # noqa: E402
from traincast.features.profile import profile_model  # noqa: E402
from traincast.features.specs import load_spec  # noqa: E402
from traincast.zoo import MODELS  # noqa: E402
from traincast.zoo.hub import HUB_FILE  # noqa: E402


def _params(spec: str) -> int:
    model, *_ = load_spec(spec, 1)
    return sum(p.numel() for p in model.parameters())


def test_every_shipped_checkpoint_names_its_source_and_builds() -> None:
    raw = tomllib.loads(resources.files("traincast.zoo").joinpath(HUB_FILE).read_text())["config"]
    assert len(raw) >= 20
    for name, entry in raw.items():
        assert entry["source"].startswith("https://huggingface.co/"), name
        assert ("zoo" in entry) != ("model_type" in entry), name
        if "params" in entry:  # the published count of the checkpoint's model class
            assert entry.get("params_source"), name
            assert _params(f"hf:{name}") == entry["params"], name


def test_bert_base_uncased_by_hand_formula() -> None:
    # BertForMaskedLM, no pooler: embeddings (V + P + 2) h + 2h (LayerNorm), 12 layers of
    # 4 h^2 + 4h (Q, K, V, O) + 2 h f + f + h (MLP) + 4h (two LayerNorms), MLM head h^2 + h +
    # 2h + V (the decoder weight is tied to the word embeddings, its bias is not)
    v, p, h, f, n = 30522, 512, 768, 3072, 12
    layer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h
    expected = (v + p + 2) * h + 2 * h + n * layer + h * h + h + 2 * h + v
    assert expected == 109_514_298
    assert _params("hf:bert-base-uncased") == expected
    assert _params("hf:google-bert/bert-base-uncased") == expected  # alias, any case
    assert _params("hf:BERT-BASE-UNCASED") == expected


def test_zoo_llm_configs_build_with_their_published_counts() -> None:
    # every decoder-only zoo config without a torch module builds through transformers with
    # the parameter count its source publishes (mixtures of experts are refused: routing)
    for name, entry in MODELS.items():
        if entry.builder or entry.llm is None:
            continue
        cfg = entry.llm
        if cfg.experts > 1:
            with pytest.raises(TraincastError, match="mixture-of-experts"):
                load_spec(f"zoo:{name}", 1)
            continue
        built = _params(f"zoo:{name}")
        assert abs(built / cfg.params_published - 1) <= max(cfg.params_rtol, 1e-12), name


def test_zoo_llm_profile_runs_at_its_training_sequence() -> None:
    rec = profile_model("zoo:megatron-gpt-1.7b", 1)
    cfg = MODELS["megatron-gpt-1.7b"].llm
    assert rec["method"] == "meta" and rec["batch_size"] == 1
    # forward matrix FLOPs: 2 N T over the non-embedding weights at T = seq, plus the head
    tokens = cfg.seq
    lower = 2 * cfg.layers * 12 * cfg.hidden ** 2 * tokens
    assert lower < rec["flops_forward"] < 1.5 * lower
    assert rec["input_bytes"] == 8 * tokens * 2  # input ids and labels, int64


def test_encoder_decoder_default_config_trains_with_labels() -> None:
    rec = profile_model("hf:t5", 2)
    assert rec["method"] == "meta" and rec["flops_forward"] > 0


def test_unknown_name_error_is_short_and_says_what_works() -> None:
    with pytest.raises(TraincastError) as err:
        load_spec("hf:no-such-org/no-such-model", 1)
    assert len(str(err.value)) < 400
    assert "zoo list --hf" in err.value.hint


def test_plan_reads_shipped_decoder_checkpoints_and_refuses_encoders() -> None:
    from traincast.parallel.models import get_model

    # Llama-2-13B by its shipped fields: the config formula gives the published count
    cfg = get_model("hf:meta-llama/Llama-2-13b-hf")
    assert (cfg.layers, cfg.hidden, cfg.heads, cfg.ffn) == (40, 5120, 40, 13824)
    assert cfg.params == 13_015_864_320
    assert get_model("hf:gpt2-xl").params == 1_557_611_200  # tied head, learned positions
    assert get_model("hf:meta-llama/Llama-2-7b-hf") == MODELS["llama2-7b"].llm
    with pytest.raises(TraincastError, match="not a decoder-only"):
        get_model("hf:bert-base-uncased")
