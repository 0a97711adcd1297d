"""`hf:NAME` of shipped Hub checkpoints (no network) and zoo models known only by their
decoder-only config, built through transformers on the meta device."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from traincast.errors import TraincastError  # noqa: E402
from traincast.features.profile import profile_model  # noqa: E402
from traincast.features.specs import load_spec  # noqa: E402
from traincast.zoo import MODELS  # noqa: E402
from traincast.zoo.hub import known_configs  # noqa: E402


def _params(spec: str) -> int:
    model, *_ = load_spec(spec, 1)
    return sum(p.numel() for p in model.parameters())


def test_every_shipped_checkpoint_names_its_source_and_builds() -> None:
    raw = known_configs()
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


def test_llama_3_1_keeps_its_long_context() -> None:
    # Llama 3.1 8B has Llama 3 8B's sizes (untied head, GQA with 8 KV heads, SwiGLU) but
    # 131,072 positions: a 16,384-token profile runs, where Llama 3's 8,192 would refuse it
    v, h, f, layers, kv = 128_256, 4096, 14_336, 32, 1024
    expected = 2 * v * h + layers * (2 * h * h + 2 * h * kv + 3 * h * f + 2 * h) + h
    assert expected == 8_030_261_248
    assert _params("hf:meta-llama/Llama-3.1-8B") == expected
    rec = profile_model("hf:meta-llama/Llama-3.1-8B", 1, seq_len=16_384)
    assert rec["seq_len"] == 16_384
    # forward: 2 x the matrix weights (head included, embedding table not) per token, plus
    # the full attention square 4 L s^2 (heads x head size)
    tokens = 16_384
    matrices = expected - v * h - layers * 2 * h - h
    assert rec["flops_forward"] == pytest.approx(
        2 * matrices * tokens + 4 * layers * tokens ** 2 * h, rel=1e-3)
    with pytest.raises(TraincastError, match="8192 positions"):  # Llama 3 8B: 8,192
        profile_model("hf:meta-llama/Meta-Llama-3-8B", 1, seq_len=16_384)


def test_an_unknown_hub_name_is_said_with_the_names_close_to_it() -> None:
    # a Hub id that is neither shipped nor cached: said as such, not as transformers' list of
    # model types; close names are offered (a prefix, or a near spelling)
    with pytest.raises(TraincastError) as err:
        load_spec("hf:Qwen/Qwen2.5-7B", 1)
    assert "not a checkpoint shipped for offline use nor one in the local Hugging Face " \
        "cache" in str(err.value) and "Should contain" not in str(err.value)
    with pytest.raises(TraincastError) as err:
        load_spec("hf:bert-base", 1)
    assert "did you mean zoo:bert-base" in str(err.value)
    assert "hf:bert-base-uncased" in str(err.value)  # a shipped checkpoint by its own name
    with pytest.raises(TraincastError) as err:  # found by the name after its owner, once
        load_spec("hf:Llama-3.1-8B", 1)
    assert str(err.value).count("hf:meta-llama/Llama-3.1-8B") == 1
    with pytest.raises(TraincastError, match="needs a name"):
        load_spec("hf:", 1)
    with pytest.raises(TraincastError, match="did you mean hf:mixtral"):
        load_spec("hf:mixtrl", 1)
    with pytest.raises(TraincastError) as err:
        load_spec("hf:qqqqzzzz", 1)
    assert "did you mean" not in str(err.value)


def test_a_bad_config_folder_keeps_transformers_reason(tmp_path) -> None:
    # a folder that exists but holds no usable config.json: its own reason, not "not shipped"
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(TraincastError) as err:
        load_spec(f"hf:{tmp_path}", 1)
    assert "no transformers config found" in str(err.value)
    assert "not a checkpoint shipped" not in str(err.value)


@pytest.mark.parametrize("value, got", [('"64"', "got str"), ("64.5", "got float")])
def test_a_config_field_of_the_wrong_type_names_the_file_and_field(tmp_path, value: str,
                                                                   got: str) -> None:
    # transformers checks each field's type: an input error naming file and field, not a bug
    from traincast.zoo.hf import _strict_dataclass_error

    if _strict_dataclass_error() == ():  # huggingface_hub before 0.34 checks no field types
        pytest.skip("this huggingface_hub checks no config field's type")
    path = tmp_path / "c.json"
    path.write_text('{"model_type": "bert", "hidden_size": ' + value + ', "num_hidden_layers": '
                    '2, "num_attention_heads": 2, "intermediate_size": 128}')
    with pytest.raises(TraincastError) as err:
        load_spec(f"hf:{path}", 1)
    assert str(err.value).startswith(f"hf:{path}: {path}: Validation error for field "
                                     "'hidden_size'") and got in str(err.value)
    assert "wrong type" in err.value.hint


def test_a_bare_model_type_says_its_sizes_are_the_default_config() -> None:
    # hf:qwen2 is transformers' default Qwen2Config (no released checkpoint has its sizes):
    # the record says so; a shipped checkpoint's record does not
    rec = profile_model("hf:qwen2", 1, seq_len=16)
    assert any("the sizes of transformers' default Qwen2Config (model_type 'qwen2')" in n
               for n in rec["notes"])
    shipped = profile_model("hf:bert-base-uncased", 1, seq_len=16)
    assert not any("default" in n for n in shipped["notes"])
    # Whisper's sequence length is its decoder's; the encoder's frames are said beside it:
    # 2 x max_source_positions (1,500 by default) frames of num_mel_bins (80)
    whisper = profile_model("hf:whisper", 1, seq_len=8)
    assert whisper["seq_len"] == 8
    assert "the encoder takes 3,000 log-mel frames of 80 mel bins per sample " \
        "(input_features)" in " ".join(whisper["notes"])


def test_a_sliding_window_shorter_than_the_sequence_is_said_not_discounted(tmp_path) -> None:
    cfg = {"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 64,
           "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
           "intermediate_size": 128, "vocab_size": 100, "sliding_window": 16,
           "max_position_embeddings": 256}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    rec = profile_model(f"hf:{tmp_path}", 1, seq_len=64)
    said = " ".join(rec["notes"])
    assert "sliding window of 16 tokens is not discounted" in said and "64 x 64" in said
    # a sequence inside the window: nothing to discount, nothing said
    assert "sliding window" not in " ".join(profile_model(f"hf:{tmp_path}", 1,
                                                          seq_len=16)["notes"])


def test_relative_positions_only_set_no_sequence_limit(tmp_path) -> None:
    # DeBERTa-v3 adds no position table to its inputs (position_biased_input = false: relative
    # attention only), so its max_position_embeddings (256 here) bounds nothing; with the
    # table added (true) it does
    base = {"model_type": "deberta-v2", "hidden_size": 64, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 128, "vocab_size": 1000,
            "max_position_embeddings": 256, "relative_attention": True,
            "pos_att_type": ["p2c", "c2p"], "position_buckets": 256}
    for biased in (False, True):
        folder = tmp_path / str(biased)
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({**base,
                                                        "position_biased_input": biased}))
        if biased:
            with pytest.raises(TraincastError, match="over the 256 positions"):
                load_spec(f"hf:{folder}", 1, seq_len=1024)
            assert load_spec(f"hf:{folder}", 1).seq_len == 256  # min(512, positions)
        else:
            assert load_spec(f"hf:{folder}", 1, seq_len=1024).seq_len == 1024
            assert load_spec(f"hf:{folder}", 1).seq_len == 512  # no limit: the default 512


def test_zoo_llm_configs_build_with_their_published_counts() -> None:
    # every decoder-only zoo config without a torch module builds through transformers with
    # the parameter count its source publishes (a mixture of experts as transformers' Mixtral)
    for name, entry in MODELS.items():
        if entry.builder or entry.llm is None:
            continue
        cfg = entry.llm
        built = _params(f"zoo:{name}")
        assert abs(built / cfg.params_published - 1) <= max(cfg.params_rtol, 1e-12), name


def test_the_shipped_mixtral_checkpoint_builds_with_its_published_count() -> None:
    # Mixtral's Hub name maps to its config's sizes: 46.7B parameters (Jiang et al. 2024),
    # built on meta as transformers' Mixtral
    assert _params("hf:mistralai/Mixtral-8x7B-v0.1") == pytest.approx(46.7e9, rel=1e-3)


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


# size fields of published config.json files (Hugging Face Hub, main branch)
DECODERS = {
    # EleutherAI/pythia-160m: 162,322,944 parameters (Biderman et al. 2023, Table 1)
    "pythia-160m": ({"model_type": "gpt_neox", "hidden_size": 768, "intermediate_size": 3072,
                     "num_attention_heads": 12, "num_hidden_layers": 12,
                     "max_position_embeddings": 2048, "vocab_size": 50304,
                     "tie_word_embeddings": False, "hidden_act": "gelu"}, 162_322_944),
    # bigscience/bloom-560m: 559,214,592 parameters (its model card)
    "bloom-560m": ({"model_type": "bloom", "hidden_size": 1024, "n_head": 16, "n_layer": 24,
                    "vocab_size": 250880}, 559_214_592),
    # tiiuae/falcon-7b: 6,921,720,704 (the Hub's count of its safetensors)
    "falcon-7b": ({"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71,
                   "num_hidden_layers": 32, "vocab_size": 65024, "multi_query": True,
                   "parallel_attn": True, "bias": False}, 6_921_720_704),
    # the same as transformers 4.x saves it: num_kv_heads copied from the heads, which
    # FalconAttention ignores without new_decoder_architecture (multi-query: one K/V head)
    "falcon-7b-saved-by-4x": ({"model_type": "falcon", "hidden_size": 4544,
                               "num_attention_heads": 71, "num_kv_heads": 71,
                               "new_decoder_architecture": False, "num_hidden_layers": 32,
                               "vocab_size": 65024, "multi_query": True, "parallel_attn": True,
                               "bias": False}, 6_921_720_704),
    # facebook/opt-350m: 331,196,416 (transformers' count of OPTForCausalLM): a 512-wide
    # token embedding (word_embed_proj_dim) projected to and from the 1024-wide layers
    "opt-350m": ({"model_type": "opt", "hidden_size": 1024, "ffn_dim": 4096,
                  "num_attention_heads": 16, "num_hidden_layers": 24, "vocab_size": 50272,
                  "max_position_embeddings": 2048, "word_embed_proj_dim": 512,
                  "do_layer_norm_before": False, "activation_function": "relu"}, 331_196_416),
    # mosaicml/mpt-7b: 6,649,286,656 (the Hub's count)
    "mpt-7b": ({"model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 32,
                "expansion_ratio": 4, "max_seq_len": 2048, "vocab_size": 50432,
                "no_bias": True}, 6_649_286_656),
    # Qwen/Qwen2-0.5B: 494,032,768 (the Hub's count)
    "qwen2-0.5b": ({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
                    "num_attention_heads": 14, "num_key_value_heads": 2, "num_hidden_layers": 24,
                    "vocab_size": 151936, "tie_word_embeddings": True, "hidden_act": "silu",
                    "rms_norm_eps": 1e-6, "max_position_embeddings": 131072}, 494_032_768),
    # microsoft/phi-2: 2,779,683,840 (the Hub's count)
    "phi-2": ({"model_type": "phi", "hidden_size": 2560, "intermediate_size": 10240,
               "num_attention_heads": 32, "num_hidden_layers": 32, "vocab_size": 51200,
               "hidden_act": "gelu_new", "tie_word_embeddings": False}, 2_779_683_840),
}


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_plan_reads_decoder_configs_of_every_family(name: str, tmp_path) -> None:
    import json

    from traincast.parallel.models import get_model

    raw, published = DECODERS[name]
    (tmp_path / "config.json").write_text(json.dumps(raw))
    cfg = get_model(f"hf:{tmp_path / 'config.json'}")
    # what the size formula leaves out (one LayerNorm per parallel block, biases on Q/K/V
    # only, bias-free norms) is below 1e-4 of the model
    assert abs(cfg.params / published - 1) < 1e-4, (name, cfg.params)


def test_gemma_gated_gelu_and_tied_head_by_default(tmp_path) -> None:
    import json

    from traincast.parallel.models import get_model

    # google/gemma-2b: 1,981,884,416 non-embedding parameters (Gemma Team 2024, Table 2);
    # its config says hidden_act "gelu" but the MLP is gated (GeGLU: 3 matrices) and the
    # head is tied without a tie_word_embeddings key
    raw = {"model_type": "gemma", "hidden_size": 2048, "intermediate_size": 16384,
           "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
           "num_hidden_layers": 18, "vocab_size": 256000, "hidden_act": "gelu",
           "rms_norm_eps": 1e-6, "max_position_embeddings": 8192}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    cfg = get_model(f"hf:{tmp_path}")
    assert cfg.mlp == "swiglu" and cfg.tied and cfg.kv == 1
    assert cfg.params - cfg.embedding_params == 1_981_884_416


def _write(tmp_path, raw: dict) -> str:
    import json

    (tmp_path / "config.json").write_text(json.dumps(raw))
    return f"hf:{tmp_path}"


def test_vision_classifiers_train_on_labels_at_their_published_macs(tmp_path) -> None:
    # Swin-T (Liu et al. 2021, Table 1) and ConvNeXt-T (Liu et al. 2022, Table 1): 28.3M /
    # 28.6M parameters, 4.5 GMACs per 224 x 224 image (1 MAC = 2 FLOPs)
    swin = {"model_type": "swin", "architectures": ["SwinForImageClassification"],
            "embed_dim": 96, "depths": [2, 2, 6, 2], "num_heads": [3, 6, 12, 24],
            "window_size": 7, "image_size": 224, "num_labels": 1000}
    convnext = {"model_type": "convnext", "architectures": ["ConvNextForImageClassification"],
                "depths": [3, 3, 9, 3], "hidden_sizes": [96, 192, 384, 768],
                "image_size": 224, "num_labels": 1000}
    for raw, params in ((swin, 28.3e6), (convnext, 28.6e6)):
        (tmp_path / raw["model_type"]).mkdir()
        rec = profile_model(_write(tmp_path / raw["model_type"], raw), 1)
        assert rec["method"] == "meta"
        assert abs(rec["params"] / params - 1) < 0.01
        assert abs(rec["flops_forward"] / 2 / 4.5e9 - 1) < 0.02
        assert rec["input_bytes"] == 3 * 224 * 224 * 4 + 8  # the image and its class label


def test_speech_and_multimodal_models_get_the_inputs_their_forward_takes(tmp_path) -> None:
    # wav2vec 2.0 base (Baevski et al. 2020): raw 16 kHz audio, 95M parameters; Whisper
    # tiny (Radford et al. 2022): 80 log-mel bins x 3,000 frames (30 s), 448-token labels,
    # 37.8M parameters (the Hub's count for openai/whisper-tiny; the paper's table rounds
    # to 39M); CLIP ViT-B/32: token ids and
    # images, 151,277,313 parameters (openai/clip-vit-base-patch32)
    wav2vec2 = {"model_type": "wav2vec2", "architectures": ["Wav2Vec2ForPreTraining"]}
    whisper = {"model_type": "whisper", "architectures": ["WhisperForConditionalGeneration"],
               "d_model": 384, "encoder_layers": 4, "decoder_layers": 4,
               "encoder_attention_heads": 6, "decoder_attention_heads": 6,
               "encoder_ffn_dim": 1536, "decoder_ffn_dim": 1536, "num_mel_bins": 80,
               "vocab_size": 51865, "max_source_positions": 1500, "max_target_positions": 448,
               "pad_token_id": 50257, "decoder_start_token_id": 50258}
    for name, raw, params, in_bytes in (
            ("wav2vec2", wav2vec2, 95.0e6, 10 * 16_000 * 4),
            ("whisper", whisper, 37.8e6, 80 * 3000 * 4 + 448 * 8)):
        (tmp_path / name).mkdir()
        rec = profile_model(_write(tmp_path / name, raw), 1)
        assert rec["method"] == "meta" and rec["flops_forward"] > 0, name
        assert abs(rec["params"] / params - 1) < 0.01, name
        assert rec["input_bytes"] == in_bytes, name
    clip = {"model_type": "clip", "architectures": ["CLIPModel"], "projection_dim": 512,
            "text_config": {"hidden_size": 512, "intermediate_size": 2048,
                            "num_attention_heads": 8, "num_hidden_layers": 12,
                            "vocab_size": 49408, "max_position_embeddings": 77},
            "vision_config": {"hidden_size": 768, "intermediate_size": 3072,
                              "num_attention_heads": 12, "num_hidden_layers": 12,
                              "image_size": 224, "patch_size": 32}}
    (tmp_path / "clip").mkdir()
    model, inputs, *_ = load_spec(_write(tmp_path / "clip", clip), 2)
    assert sum(p.numel() for p in model.parameters()) == 151_277_313
    assert [tuple(x.shape) for x in inputs] == [(2, 77), (2, 3, 224, 224)]
    assert model.constants == {"return_loss": True}  # the contrastive loss is trained


def test_a_missing_config_path_says_so(tmp_path) -> None:
    for spec in (f"hf:{tmp_path / 'absent'}", "hf:./absent/config.json"):
        with pytest.raises(TraincastError, match="no such file or folder") as err:
            load_spec(spec, 1)
        assert "config.json" in err.value.hint


def test_heads_named_by_transformers_tables_get_labels_and_masks_stay_on_meta(tmp_path) -> None:
    # MarianMTModel is a sequence-to-sequence LM whose class name does not say so; BART builds
    # a float mask of ones and checks it (.item()) before attention; XLNet's
    # max_position_embeddings is -1 (no limit): 512 tokens
    small = {"d_model": 32, "encoder_layers": 1, "decoder_layers": 1,
             "encoder_attention_heads": 2, "decoder_attention_heads": 2,
             "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "vocab_size": 500,
             "max_position_embeddings": 64}
    for mtype in ("marian", "bart"):
        (tmp_path / mtype).mkdir()
        rec = profile_model(_write(tmp_path / mtype, {"model_type": mtype, **small,
                                                      "decoder_start_token_id": 2,
                                                      "pad_token_id": 1}), 2)
        assert rec["method"] == "meta", (mtype, rec["notes"])
        assert rec["input_bytes"] == 2 * (2 * 64 * 8), mtype  # input ids and labels
    (tmp_path / "xlnet").mkdir()
    model, inputs, *_ = load_spec(_write(tmp_path / "xlnet", {
        "model_type": "xlnet", "d_model": 32, "n_layer": 1, "n_head": 2, "d_inner": 64,
        "vocab_size": 500}), 1)
    assert [tuple(x.shape) for x in inputs] == [(1, 512), (1, 512)]


def test_an_explicit_head_dim_sizes_the_built_attention() -> None:
    # a Llama-shaped config whose heads x head_dim (16 x 256 = 4096) is not its hidden (3072),
    # as Gemma-7B: q/o are 3072 x 4096, k/v (16 kv heads) too, so one layer holds
    # 4 x 3072 x 4096 attention + 3 x 3072 x 24576 SwiGLU + 2 x 3072 norm weights
    import torch

    from traincast.zoo.hf import config_from_llm
    from traincast.zoo.llm import config_from_table

    cfg = config_from_table("x", {"layers": 1, "hidden": 3072, "heads": 16, "head_dim": 256,
                                  "ffn": 24576, "vocab": 8, "mlp": "swiglu", "norm": "rmsnorm",
                                  "seq": 16}, "test")
    import transformers

    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config_from_llm(cfg))
    attn = model.model.layers[0].self_attn
    assert tuple(attn.q_proj.weight.shape) == (4096, 3072)
    assert tuple(attn.o_proj.weight.shape) == (3072, 4096)
    layer = sum(p.numel() for p in model.model.layers[0].parameters())
    assert layer == 4 * 3072 * 4096 + 3 * 3072 * 24576 + 2 * 3072


def test_sequence_classifiers_get_one_eos_per_sequence_and_a_pad_id(tmp_path) -> None:
    # a decoder's classifier (GPT-2, Llama) needs a pad id for batches over 1, and BART's
    # pools at the one end-of-sequence token each sequence must carry, as a tokenizer gives
    small = {"gpt2": {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 300,
                      "n_positions": 64, "eos_token_id": 7},
             "bart": {"d_model": 32, "encoder_layers": 1, "decoder_layers": 1,
                      "encoder_attention_heads": 2, "decoder_attention_heads": 2,
                      "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "vocab_size": 300,
                      "max_position_embeddings": 64, "eos_token_id": 7}}
    for mtype, fields in small.items():
        (tmp_path / mtype).mkdir()
        head = "GPT2ForSequenceClassification" if mtype == "gpt2" else \
            "BartForSequenceClassification"
        spec = _write(tmp_path / mtype, {"model_type": mtype, "architectures": [head],
                                         **fields})
        _, inputs, *_ = load_spec(spec, 3)
        ids = inputs[0]
        assert (ids[:, -1] == 7).all() and int((ids == 7).sum()) == 3, mtype
        rec = profile_model(spec, 3)
        assert rec["method"] == "meta", (mtype, rec["notes"])
        assert rec["input_bytes"] == 3 * 64 * 8 + 3 * 8, mtype  # ids and one class each


def test_a_size_field_that_is_not_a_whole_number_is_named() -> None:
    from traincast.zoo.llm import from_hf_dict

    good = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "vocab_size": 10}
    assert from_hf_dict({**good, "hidden_size": 64.0}, "x", "c.json").hidden == 64
    for key, value in (("hidden_size", "big"), ("num_hidden_layers", 2.5),
                       ("max_position_embeddings", True), ("head_dim", [16]),
                       ("intermediate_size", float("nan")), ("vocab_size", float("inf"))):
        with pytest.raises(TraincastError, match=f"c.json: key '{key}' must be a whole"):
            from_hf_dict({**good, key: value}, "x", "c.json")


def test_non_square_images_take_the_configs_height_and_width(tmp_path) -> None:
    # ViT with image_size [224, 160] (14 x 10 patches of 16) refuses any other size: 2 images
    # of 3 x 224 x 160 fp32 and their two class labels
    spec = _write(tmp_path, {"model_type": "vit", "architectures": ["ViTForImageClassification"],
                             "num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 2,
                             "intermediate_size": 128, "image_size": [224, 160],
                             "patch_size": 16, "num_labels": 3})
    rec = profile_model(spec, 2)
    assert rec["method"] == "meta"
    assert rec["input_bytes"] == 2 * 3 * 224 * 160 * 4 + 2 * 8


def test_profile_reads_a_config_file_of_any_name(tmp_path, monkeypatch) -> None:
    import json

    from typer.testing import CliRunner

    from traincast.cli import app

    # Qwen2, hidden h = 64, 4 heads of 16, 2 KV heads (32), MLP 128, 2 layers, vocab 1000,
    # untied head: per layer q 64*64 + 64, k and v 64*32 + 32 each, o 64*64, gated MLP
    # 3*64*128, two RMSNorms 2*64 = 37,120; embedding and head 2*1000*64; final norm 64
    raw = {"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128,
           "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
           "vocab_size": 1000, "tie_word_embeddings": False}
    (tmp_path / "qwen_cfg.json").write_text(json.dumps(raw))
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["profile", "hf:qwen_cfg.json", "--batch", "1", "--json"])
    assert res.exit_code == 0, res.output
    rec = json.loads(res.stdout)
    assert rec["params"] == 2 * 37_120 + 2 * 1000 * 64 + 64


@pytest.mark.parametrize(("model_type", "in_bytes"), [
    # Whisper's default config (tiny-sized): 80 log-mel bins x 3,000 frames and 448 labels
    ("whisper", 80 * 3000 * 4 + 448 * 8),
    # Moonshine: 10 s of 16 kHz audio and 512 labels; its config names no pad id
    ("moonshine", 10 * 16_000 * 4 + 512 * 8)])
def test_a_speech_model_type_alone_builds_its_encoder_and_decoder(model_type: str,
                                                                  in_bytes: int) -> None:
    # a model_type with no architectures: the speech sequence-to-sequence class (audio in,
    # labels out), not the causal-LM class that holds the decoder alone
    import transformers

    config = transformers.AutoConfig.for_model(model_type)
    with torch.device("meta"):
        whole = transformers.AutoModelForSpeechSeq2Seq.from_config(config)
    rec = profile_model(f"hf:{model_type}", 1, optimizer="none")
    assert rec["params"] == sum(p.numel() for p in whole.parameters())
    assert rec["input_bytes"] == in_bytes


@pytest.mark.parametrize("raw", [
    {"model_type": "bert", "num_hidden_layers": 12, "hidden_size": 768,
     "num_attention_heads": 12, "vocab_size": 30522},
    {"model_type": "t5", "is_encoder_decoder": True, "num_layers": 6, "d_model": 512,
     "num_heads": 8, "vocab_size": 32128}])
def test_plan_refuses_an_encoder_config_file_as_it_refuses_a_shipped_one(tmp_path,
                                                                        raw: dict) -> None:
    from traincast.parallel.models import get_model

    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(TraincastError, match="is not a decoder-only transformer"):
        get_model(f"hf:{path}")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_mixture_of_experts_profiles_on_meta_in_any_precision(tmp_path, dtype: str) -> None:
    # transformers' grouped experts (_grouped_mm): torch's meta kernel took bf16 only, so an
    # fp32 Mixtral once fell back to CPU (and a large one was refused). Its shapes do not depend
    # on the routing. By hand, b = 2 sequences of s = 8 tokens (T = 16), h = 16, 2 heads of
    # d = 8, 4 experts of f = 32, top-2, V = 50, eager attention, no optimizer; forward:
    # q, k, v, o 4 x 2 T h^2; scores and values 2 x 2 b a s^2 d; router 2 T h E; experts
    # 2 T k (2 h f + f h); head 2 T h V; backward twice the forward (input and weight grads)
    raw = {"model_type": "mixtral", "hidden_size": 16, "intermediate_size": 32,
           "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
           "num_local_experts": 4, "num_experts_per_tok": 2, "vocab_size": 50,
           "max_position_embeddings": 64, "tie_word_embeddings": False, "torch_dtype": dtype}
    rec = profile_model(_write(tmp_path, raw), 2, optimizer="none", seq_len=8,
                        attention="eager")
    t, h, f = 16, 16, 32
    forward = (4 * 2 * t * h * h + 2 * 2 * 2 * 2 * 8 * 8 * 8 + 2 * t * h * 4
               + 2 * t * 2 * (2 * h * f + f * h) + 2 * t * h * 50)
    assert rec["method"] == "meta" and rec["dtype"] == "float32"  # a saved dtype is said
    assert len(rec["notes"]) == (dtype != "float32")
    assert rec["flops_compute_bound"] == 3 * forward


def test_the_zoo_mixture_of_experts_profiles_from_its_config() -> None:
    # zoo:mixtral-8x7b (config only) is built as transformers' Mixtral: 46.7B parameters
    rec = profile_model("zoo:mixtral-8x7b", 1, optimizer="none", seq_len=64)
    assert rec["method"] == "meta" and rec["params"] == pytest.approx(46.7e9, rel=1e-3)


def test_position_limits_count_roberta_padding_and_led_encoder_and_decoder(tmp_path) -> None:
    # RoBERTa's positions start after pad_token_id (1): 514 rows hold 512 tokens, and the 514th
    # token indexes past the table on a real run; LED names its tables' sizes per side
    with pytest.raises(TraincastError, match=r"--seq 514 is over the 512 positions of "
                                             r"RobertaConfig \(max_position_embeddings less"):
        profile_model("hf:roberta-base", 1, seq_len=514, optimizer="none")
    led = {"model_type": "led", "vocab_size": 100, "d_model": 16, "encoder_layers": 1,
           "decoder_layers": 1, "encoder_attention_heads": 2, "decoder_attention_heads": 2,
           "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "attention_window": [16],
           "max_encoder_position_embeddings": 256, "max_decoder_position_embeddings": 64}
    tiny = {"model_type": "roberta", "vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 16, "max_position_embeddings": 2,
            "pad_token_id": 1}  # 2 rows, the first token's is row 2: none fits
    (tmp_path / "r").mkdir()
    with pytest.raises(TraincastError, match="leaves no position for a token"):
        profile_model(_write(tmp_path / "r", tiny), 1, optimizer="none")
    rec = profile_model(_write(tmp_path, led), 1, optimizer="none")
    assert rec["seq_len"] == 64  # the smaller table: every token passes through both
    with pytest.raises(TraincastError, match=r"over the 64 positions of LEDConfig "
                                             r"\(max_decoder_position_embeddings\)"):
        profile_model(_write(tmp_path, led), 1, seq_len=128, optimizer="none")


def test_a_step_that_fails_on_the_inputs_traincast_built_says_so(monkeypatch) -> None:
    # a vision-language model that wants image tokens among its ids, or a model of one exact
    # sequence length, fails on meta and on CPU: the hint says the inputs were traincast's
    import traincast.features.profile as prof

    def fails(*_args, **_kwargs):
        raise TraincastError(f"{prof.STEP_FAILS} (ValueError: image tokens do not match)")

    monkeypatch.setattr(prof, "_profile", fails)
    with pytest.raises(TraincastError, match="hf:gpt2: the training step fails") as err:
        profile_model("hf:gpt2", 1, seq_len=8)
    assert "built this model's inputs from its config" in err.value.hint
    assert "FILE.py:FUNC" in err.value.hint


def test_plan_takes_a_bare_model_type_as_profile_does(monkeypatch) -> None:
    # hf:gemma: transformers' default GemmaConfig (28 layers of 3072, 16 heads of 256, one
    # key/value head), said to be no released checkpoint's; without transformers, the error
    # names what hf: takes
    import sys

    from traincast.parallel.hybrid import default_config_warning
    from traincast.parallel.models import get_model
    from traincast.parallel.plan import plan

    cfg = get_model("hf:gemma")
    default = transformers_default("gemma")
    assert (cfg.layers, cfg.hidden, cfg.heads, cfg.head_size, cfg.kv) == (
        default.num_hidden_layers, default.hidden_size, default.num_attention_heads,
        default.head_dim, default.num_key_value_heads)
    assert "need not be any released checkpoint's" in default_config_warning(cfg)
    out = plan("hf:gemma", 8, "dgx-h100", top=1)
    assert out["top"] and any("GemmaConfig" in w for w in out["warnings"])
    assert default_config_warning(get_model("zoo:llama2-7b")) == ""
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(TraincastError, match="config file not found") as err:
        get_model("hf:gemma")
    assert "model_type" in err.value.hint


def transformers_default(model_type: str):
    import transformers

    return transformers.AutoConfig.for_model(model_type)


@pytest.mark.parametrize("saved", ["float16", "bfloat16"])
def test_a_config_saved_in_half_precision_is_trained_in_fp32(saved: str, tmp_path) -> None:
    # a checkpoint's torch_dtype is how its weights were stored, not how a step trains: the
    # weights, gradients and Adam's two moments stay fp32, said in a note.
    # GPT-NeoX, h = 128, 2 layers, V = 1000, 4h MLP, untied: 2 V h + 2 layers x (QKV 3h^2 + 3h,
    # out h^2 + h, MLP 8h^2 + 5h, two LayerNorms 4h: 12 h^2 + 13 h) + 2 h (final norm)
    # = 652,800 parameters, 4 bytes each
    raw = {"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox",
           "hidden_size": 128, "intermediate_size": 512, "num_attention_heads": 4,
           "num_hidden_layers": 2, "vocab_size": 1000, "max_position_embeddings": 256,
           "rotary_pct": 0.25, "torch_dtype": saved}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    rec = profile_model(f"hf:{tmp_path / 'config.json'}", 1, seq_len=16)
    params = 2 * 1000 * 128 + 2 * (12 * 128**2 + 13 * 128) + 2 * 128
    assert rec["params"] == params == 652_800
    assert rec["dtype"] == "float32"
    assert rec["memory_bytes"]["weights"] == rec["memory_bytes"]["grads"] == 4 * params
    assert rec["memory_bytes"]["optimizer"] == 8 * params
    assert any(f"torch_dtype, {saved}, is the dtype its weights were saved in" in n
               for n in rec["notes"])


def test_a_folder_without_a_config_is_said_and_hides_no_shipped_name(tmp_path,
                                                                     monkeypatch) -> None:
    from traincast.parallel.models import get_model

    empty = tmp_path / "empty"
    empty.mkdir()
    for build in (lambda n: profile_model(n, 1, seq_len=16), get_model):
        with pytest.raises(TraincastError, match=f"the folder {empty} holds no config.json"):
            build(f"hf:{empty}")
    # ./gpt2 without a config.json beside the work: hf:gpt2 is still the shipped GPT-2,
    # 124,439,808 parameters (Radford et al. 2019, the 117M model as released)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpt2").mkdir()
    assert profile_model("hf:gpt2", 1, seq_len=16, optimizer="none")["params"] == 124_439_808
    assert get_model("hf:gpt2").params == 124_439_808
    with pytest.raises(TraincastError, match="the folder gpt2 holds no config.json"):
        get_model("hf:./gpt2")  # named as a path: that folder


@pytest.mark.parametrize("spec", ["hf:meta-llama/Llama-3.1-8B", "zoo:resnet50"])
def test_a_batch_too_large_for_this_machine_blames_the_batch(spec: str) -> None:
    # 1e9 sequences of 131,072 int64 token ids = 1.0e18 bytes; 1e9 images of 3 x 224 x 224 fp32
    # = 6.0e14 bytes, both past a 47-bit address space (1.4e14), so no allocator takes them:
    # the inputs are real CPU tensors, and the batch is what to change
    with pytest.raises(TraincastError, match=r"the example inputs of batch 1000000000 do not "
                                             r"fit this machine's memory") as exc:
        profile_model(spec, 10**9, seq_len=131_072 if spec.startswith("hf:") else None)
    assert exc.value.hint.startswith("profile at a smaller --batch")


def test_a_config_no_model_class_builds_says_what_to_give(monkeypatch) -> None:
    # as transformers' default DBRX config, whose attention reads a field it lacks: every
    # model class refuses the config
    import transformers

    def refuse(cls, config, **kwargs):  # noqa: ANN001, ANN202, ARG001
        raise AttributeError("'DbrxAttentionConfig' object has no attribute 'rope_theta'")

    monkeypatch.setattr(transformers.PreTrainedModel, "_from_config", classmethod(refuse))
    # a bare model_type: transformers' default config, for which the checkpoint's own helps
    with pytest.raises(TraincastError, match="hf:gptj: no transformers model class builds "
                                             "this config") as exc:
        profile_model("hf:gptj", 1, seq_len=16, optimizer="none")
    assert exc.value.hint.startswith("give the checkpoint's own config.json (hf:PATH)")
    # a shipped checkpoint (its config.json given already): build it yourself
    with pytest.raises(TraincastError, match="no transformers model class") as exc:
        profile_model("hf:gpt2", 1, seq_len=16, optimizer="none")
    assert exc.value.hint.startswith("profile it with FILE.py:FUNC")


def test_the_saved_dtype_of_a_config_is_taken_off_at_every_depth() -> None:
    from traincast.zoo.hf import saved_dtype

    class TextConfig:
        def __init__(self, dtype: str) -> None:
            self.dtype = dtype

    class ThinkerConfig:
        def __init__(self) -> None:
            self.text_config = TextConfig("bfloat16")  # two levels down

    class OmniConfig:
        def __init__(self) -> None:
            self.dtype = "float32"
            self.thinker_config = ThinkerConfig()
            self.vision_config = TextConfig("float16")

    config = OmniConfig()
    assert saved_dtype(config) == "bfloat16 and float16"
    assert config.dtype is None and config.thinker_config.text_config.dtype is None
    assert saved_dtype(config) is None  # taken off: nothing left
    assert saved_dtype(TextConfig("auto")) is None and saved_dtype(TextConfig("float32")) is None


def test_a_narrower_token_embedding_prices_its_logits_at_its_own_width(tmp_path) -> None:
    import json

    from traincast.parallel.models import get_model

    raw, _ = DECODERS["opt-350m"]
    (tmp_path / "config.json").write_text(json.dumps(raw))
    cfg = get_model(f"hf:{tmp_path / 'config.json'}")
    h, f, v, e = 1024, 4096, 50272, 512
    # per token: each layer's Q, K, V, O and two MLP matrices; the logits over the 512-wide
    # embedding and the two 512 x 1024 projections (not V x 1024)
    assert cfg.params_flop == 24 * (4 * h * h + 2 * h * f) + v * e + 2 * e * h
    # the head is tied to the embedding: the last stage holds project_out alone, the first
    # the V x e embedding, project_in and the 2048 learned positions
    assert cfg.embed_width == e and cfg.head_params == e * h
    assert cfg.embedding_params == v * e + e * h + 2048 * h
    raw = {**raw, "word_embed_proj_dim": 1024}  # as every other OPT: no projection
    (tmp_path / "config.json").write_text(json.dumps(raw))
    same = get_model(f"hf:{tmp_path / 'config.json'}")
    assert same.embed_dim == 0 and same.params_flop == 24 * (4 * h * h + 2 * h * f) + v * h


def test_layerdrop_is_off_so_every_layer_is_priced_the_same_each_run(tmp_path) -> None:
    # wav2vec 2.0 skips each layer with probability layerdrop in a training step: at 0.5 over
    # 4 layers a profile that kept the draw would price all 4 once in 16 runs
    cfg = {"model_type": "wav2vec2", "architectures": ["Wav2Vec2ForCTC"], "hidden_size": 32,
           "num_hidden_layers": 4, "num_attention_heads": 2, "intermediate_size": 64,
           "vocab_size": 32, "layerdrop": 0.5}
    (tmp_path / "drop").mkdir()
    (tmp_path / "drop" / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "config.json").write_text(json.dumps(cfg | {"layerdrop": 0.0}))
    keep = profile_model(f"hf:{tmp_path / 'keep'}", 1)
    runs = [profile_model(f"hf:{tmp_path / 'drop'}", 1) for _ in range(3)]
    for rec in runs:
        assert rec["flops_forward"] == keep["flops_forward"]
        assert rec["memory_bytes"]["grads"] == keep["memory_bytes"]["grads"]
    assert "LayerDrop (layerdrop 0.5)" in " ".join(runs[0]["notes"])
    assert "LayerDrop" not in " ".join(keep["notes"])
