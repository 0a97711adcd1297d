"""Hybrid parallelism: model configs, per-strategy formulas, memory, published figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from traincast.errors import TraincastError
from traincast.parallel import strategies as st
from traincast.parallel.hybrid import evaluate, hybrid_hardware, predict_hybrid
from traincast.parallel.models import get_model, list_models
from traincast.parallel.validation import megatron_2021_rows

# ----------------------------------------------------------------------------- model configs


@pytest.mark.parametrize("name", list_models())
def test_param_count_matches_published(name: str) -> None:
    cfg = get_model(name)
    assert cfg.params_published > 0 and cfg.source
    assert abs(cfg.params / cfg.params_published - 1.0) <= cfg.params_rtol + 1e-12


def test_llama2_7b_param_count_by_hand() -> None:
    h, f, layers, vocab = 4096, 11008, 32, 32000
    per_layer = 4 * h * h + 3 * h * f + 2 * h          # Q K V O, SwiGLU, two RMSNorms
    expected = layers * per_layer + 2 * vocab * h + h  # untied embedding and head, final norm
    assert expected == 6_738_415_616                   # Hugging Face meta-llama/Llama-2-7b-hf
    assert get_model("zoo:llama2-7b").params == expected
    assert get_model("zoo:llama-2-7b").params == expected  # alias
    assert get_model("zoo:llama-7b").params == expected    # LLaMA-7B: the same shape


def test_mixtral_active_params_published() -> None:
    cfg = get_model("mixtral-8x7b")
    # Jiang et al. 2024: 46.7B total, 12.9B active per token (top-2 of 8 experts)
    assert round(cfg.params / 1e9, 1) == 46.7
    assert round(cfg.params_active / 1e9, 1) == 12.9


def test_megatron_param_formula() -> None:
    # Narayanan et al. Sec. 3.2: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)) (no final norm)
    cfg = get_model("megatron-gpt-1008b")
    l_, h, v, s = 128, 25600, 51200, 2048
    formula = 12 * l_ * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * l_ * h))
    assert cfg.params - 2 * h == pytest.approx(formula, rel=1e-12)


def test_hf_config_json(tmp_path, monkeypatch) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 32, "intermediate_size": 11008, "vocab_size": 32000,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "hidden_act": "silu",
        "tie_word_embeddings": False}))
    assert get_model(f"hf:{path}").params == 6_738_415_616
    assert get_model(f"hf:{tmp_path}").params == 6_738_415_616
    monkeypatch.setenv("HOME", str(tmp_path.parent))  # ~ as profile reads it
    assert get_model(f"hf:~/{tmp_path.name}/config.json").params == 6_738_415_616
    for name in ("~no_such_user_here/config.json", "a" * 300):  # no home; too long a name
        with pytest.raises(TraincastError, match="no such file or folder|config file not found"):
            get_model(f"hf:{name}")


def test_unknown_model_and_bad_hf_file(tmp_path) -> None:
    with pytest.raises(TraincastError, match="unknown language model"):
        get_model("zoo:nope")
    # a zoo model without an LLM config says what it can do instead
    with pytest.raises(TraincastError, match="no decoder-only language-model config") as exc:
        get_model("zoo:resnet50")
    assert "profile" in exc.value.hint
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 8}')
    with pytest.raises(TraincastError, match="missing key"):
        get_model(f"hf:{bad}")


# ---------------------------------------------------------------------------- strategy formulas


def test_bubble_formula() -> None:
    assert st.bubble_fraction(4, 8) == pytest.approx(3 / 11)          # (p-1)/(m+p-1)
    assert st.bubble_fraction(4, 8, 2) == pytest.approx(3 / 19)       # (p-1)/(v m + p-1)
    assert st.bubble_fraction(1, 8) == 0.0
    assert st.pipeline_time_s(2.0, 4, 8, 1) == pytest.approx((8 + 3) * 2.0)
    assert st.pipeline_time_s(2.0, 4, 8, 3) == pytest.approx((8 + 1) * 2.0)


def test_tensor_parallel_volume_by_hand() -> None:
    b, s, h, delta, t = 2, 512, 1024, 2, 4
    buf = b * s * h * delta                      # 2,097,152 bytes per all-reduce
    # 4 all-reduces per layer (2 forward, 2 backward), each 2 (t-1)/t of the buffer
    assert st.tp_bytes_per_layer(b, s, h, delta, t, 0) == 4 * 2 * 3 / 4 * buf == 12_582_912
    # full recompute repeats the 2 forward all-reduces
    assert st.tp_bytes_per_layer(b, s, h, delta, t, 2) == 6 * 1.5 * buf
    assert st.tp_bytes_per_layer(b, s, h, delta, 1, 0) == 0.0


def test_zero_volumes_by_hand() -> None:
    g = p = 1e9
    d, m = 4, 4
    got = st.dp_bytes(g, p, d, m, np.array([0, 1, 2, 3]))
    assert got[0] == pytest.approx(2 * 3 / 4 * 1e9)           # all-reduce
    assert got[1] == pytest.approx(3 / 4 * 2e9)                # RS grads + AG params
    assert got[2] == pytest.approx(3 / 4 * (4e9 + 1e9))        # RS per micro-batch + AG once
    assert got[3] == pytest.approx(3 / 4 * 4 * 3e9)            # (2 AG + RS) per micro-batch


def test_expert_and_pipeline_volumes_by_hand() -> None:
    # 4 all-to-alls per MoE layer, each (e-1)/e of b s k h delta
    assert st.ep_bytes_per_layer(2, 512, 1024, 2, 2, 1, 8, 0) == pytest.approx(
        4 * 7 / 8 * 2 * 512 * 2 * 1024 * 2)
    assert st.p2p_bytes(2, 512, 1024, 2, 4) == 2 * 512 * 1024 * 2 / 4
    assert st.p2p_time_s(1e6, 4, 2, 1e9) == pytest.approx(2 * 2 * 1e6 / 1e9)
    assert st.p2p_time_s(1e6, 1, 1, 1e9) == 0.0


def test_activation_formulas_korthikanti() -> None:
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    sbh = s * b * h
    x = 5 * a * s / h
    assert st.activation_bytes_per_layer(s, b, h, a, 1, False, 0) == pytest.approx(sbh * (34 + x))
    assert st.activation_bytes_per_layer(s, b, h, a, t, False, 0) == pytest.approx(
        sbh * (10 + 24 / t + x / t))
    assert st.activation_bytes_per_layer(s, b, h, a, t, True, 0) == pytest.approx(
        sbh * (34 + x) / t)
    assert st.activation_bytes_per_layer(s, b, h, a, t, True, 1) == pytest.approx(34 * sbh / t)
    assert st.activation_bytes_per_layer(s, b, h, a, t, False, 2) == pytest.approx(2 * sbh)
    # full recomputation keeps each layer's input: with sequence parallelism that input is
    # the rank's [s / t, b, h] slice (Megatron-LM's ParallelTransformer turns
    # distribute_saved_activations off under sequence_parallel: already distributed)
    assert st.activation_bytes_per_layer(s, b, h, a, t, True, 2) == pytest.approx(2 * sbh / t)


def test_zero_memory_published_figure() -> None:
    # Rajbhandari et al., ZeRO (SC 2020), Figure 1: 7.5B parameters, 64 GPUs, Adam (K = 12):
    # baseline 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.9 GB per GPU.
    psi = 7.5e9
    published = [120.0, 31.4, 16.6, 1.9]
    for zero, gb in enumerate(published):
        w, g, o = st.model_state_bytes(psi, 64, zero, "bf16")
        assert float(w + g + o) / 1e9 == pytest.approx(gb, abs=0.05)


def test_gpt3_175b_memory_published_config() -> None:
    # GPT-3 175B, t = 8, p = 8, sequence parallelism + selective recomputation, micro-batch 1
    # (Korthikanti et al. 2022, Sec. 5 configuration): 1F1B keeps p micro-batches of l/p layers
    # on the first stage = 34 s b h L / t bytes (Sec. 4.3, eq. 34sbhL/t).
    hw = hybrid_hardware(None, "dgx-a100", "bf16")
    res = evaluate(get_model("gpt3-175b"), hw, dp=8, tp=8, pp=8, global_batch=512,
                   micro_batch=1, recompute=1)
    expected_act = 34 * 2048 * 1 * 12288 * 96 / 8        # 10.27 GB
    assert float(res["mem_activations_bytes"]) == pytest.approx(expected_act, rel=1e-9)
    # weights of the first stage: 12 layers + embedding, split over t = 8
    cfg = get_model("gpt3-175b")
    stage_params = (12 * cfg.layer_params + cfg.embedding_params) / 8
    assert float(res["mem_weights_bytes"]) == pytest.approx(2 * stage_params)
    assert float(res["mem_optimizer_bytes"]) == pytest.approx(12 * stage_params)
    assert bool(res["fits"])            # 2+2+12 bytes x 2.8B + 10.3 GB = 55 GB < 80 GB


def test_recompute_trades_memory_for_time() -> None:
    hw = hybrid_hardware(None, "dgx-a100", "bf16")
    res = evaluate(get_model("gpt3-175b"), hw, dp=8, tp=8, pp=8, global_batch=512,
                   recompute=np.array([0, 1, 2]))
    act, total = res["mem_activations_bytes"], res["total_s"]
    assert act[0] > act[1] > act[2]
    assert total[0] < total[1] < total[2]


def test_model_flops_by_hand() -> None:
    cfg = get_model("llama2-7b")
    out = predict_hybrid(cfg, node="dgx-a100", dp=8, global_batch=64, zero=1)
    tokens = 64 * 4096
    # matrix parameters: Q K V O (4 h^2) and SwiGLU (3 h f) per layer, the V h logits
    params_flop = 32 * (4 * 4096**2 + 3 * 4096 * 11008) + 32000 * 4096
    assert cfg.params_flop == params_flop == 6_607_077_376
    flops = (6 * params_flop + 12 * 32 * 4096 * 4096) * tokens
    assert out["model_tflops_per_gpu"] == pytest.approx(
        flops / (out["time_s"]["total"] * 8) / 1e12)
    assert out["tokens_per_s_per_gpu"] == pytest.approx(tokens / (out["time_s"]["total"] * 8))
    # MFU over the A100's dense bf16 peak, 312 TFLOP/s (NVIDIA A100 datasheet)
    assert out["mfu"] == pytest.approx(flops / (out["time_s"]["total"] * 8) / 312e12)
    parts = sum(out["time_s"][k] for k in ("data_io", "compute_flop", "compute_mem", "comm",
                                           "bubble"))
    assert parts == pytest.approx(out["time_s"]["total"])
    # no recomputation, the whole square materialized: the kernels execute the model's FLOPs
    # and no more (biases and norms are no matrix work in either count)
    plain = predict_hybrid(cfg, node="dgx-a100", dp=8, global_batch=64, zero=1,
                           recompute="none", attention="materialized")
    assert plain["mfu"] == pytest.approx(plain["hfu"], rel=1e-9)


def test_mixture_params_flop_by_hand() -> None:
    # Mixtral 8x7B: top-2 of 8 SwiGLU experts, 8 KV heads of 128, untied head (the router's
    # h x 8 is no priced product)
    cfg = get_model("mixtral-8x7b")
    h, f, layers, vocab = 4096, 14336, 32, 32000
    per_layer = h * (2 * 4096 + 2 * 1024) + 2 * 3 * h * f
    assert cfg.params_flop == layers * per_layer + vocab * h
    # no recomputation, the whole square materialized: MFU = HFU for a mixture too
    plain = predict_hybrid(cfg, node="dgx-h100", dp=8, ep=8, global_batch=64, zero=1,
                           recompute="none", attention="materialized")
    assert plain["mfu"] == pytest.approx(plain["hfu"], rel=1e-9)


def test_fp8_needs_gpu_support() -> None:
    with pytest.raises(TraincastError, match="fp8"):
        hybrid_hardware(None, "dgx-a100", "fp8")
    h100 = hybrid_hardware(None, "dgx-h100", "fp8")
    assert h100.peak_tflops == pytest.approx(1978.9)


def test_invalid_shapes_are_errors() -> None:
    with pytest.raises(TraincastError, match="multiple of pp"):
        predict_hybrid("llama2-70b", node="dgx-a100", dp=1, tp=8, pp=3)
    with pytest.raises(TraincastError, match="heads"):
        predict_hybrid("llama2-7b", node="dgx-a100", dp=1, tp=3)
    # Llama 3 8B: 32 heads, 8 key/value heads. Megatron-Core splits the key/value heads over
    # the tensor ranks (num_query_groups / tp), so tp 16 divides the heads but not the groups
    assert predict_hybrid("llama3-8b", node="dgx-h100", dp=1, tp=8)["time_s"]["total"] > 0
    with pytest.raises(TraincastError, match="must divide the attention") as err:
        predict_hybrid("llama3-8b", node="dgx-h100", dp=1, tp=16)
    assert "32 heads, 8 key/value heads" in err.value.hint


# ------------------------------------------------------------------ published measurements


def test_megatron_table_rows_are_consistent() -> None:
    table = megatron_2021_rows()
    assert "Narayanan" in table["source"]
    for row in table["row"]:
        assert row["t"] * row["p"] * row["d"] == row["gpus"]
        # aggregate PFLOP/s = per-GPU TFLOP/s x GPUs (rounding of the per-GPU column)
        assert row["aggregate_pflops"] == pytest.approx(
            row["tflops_per_gpu"] * row["gpus"] / 1000, rel=0.01)
        assert row["percent_peak"] == round(100 * row["tflops_per_gpu"] / 312)


# ------------------------------------------------------------------ links chosen per strategy


def test_link_times_by_hand() -> None:
    # dgx-a100: NVLink 3 300 GB/s x 0.8 (its packet overhead), HDR 25 GB/s x 0.9937
    # (the payload rule of docs/hardware.md: 4096 / 4122, rounded to 4 places);
    # catalog latencies: NVLink 2 us, HDR 1 us
    hw = hybrid_hardware(None, "dgx-a100", "bf16")
    intra_coll, nic_coll = 300e9 * 0.8, 25e9 * round(4096 / 4122, 4)
    assert hw.intra_coll_bps == pytest.approx(intra_coll)
    assert (hw.intra_latency_s, hw.nic_latency_s) == pytest.approx((2e-6, 1e-6))
    cfg = get_model("gpt3-175b")
    res = evaluate(cfg, hw, dp=8, tp=8, pp=8, global_batch=64, micro_batch=1, recompute=1)
    m = 64 / 8
    # tensor parallelism inside the node: 4 all-reduces per layer of 2 (t-1)/t b s h 2 bytes,
    # each paying 2 (t-1) = 14 ring steps of 2 us
    buf = 1 * 2048 * 12288 * 2
    assert float(res["comm_tp_s"]) == pytest.approx(
        m * 12 * 4 * (2 * 7 / 8 * buf / intra_coll + 14 * 2e-6))
    # t p = 64 > 8 GPUs: stage boundaries cross the NIC (25 GB/s x 0.9937: a link has one
    # efficiency, the slower hop's 2 us latency), scattered over t = 8
    assert float(res["comm_pp_s"]) == pytest.approx(m * 2 * (2e-6 + (buf / 8) / nic_coll))
    # data parallelism: one member per node (t = 8), ring over the NIC, all-reduce of the
    # first stage's 16-bit gradients; + the tied embedding's gradient all-reduced between the
    # first and last stage (a ring of 2 over the NIC: 2 x 1/2 x V h / t x 2 bytes)
    stage_params = (12 * cfg.layer_params + cfg.embedding_params) / 8
    emb = 2 * 0.5 * 50257 * 12288 / 8 * 2
    assert cfg.vocab == 50257 and cfg.tied
    assert float(res["comm_dp_s"]) == pytest.approx(
        2 * 7 / 8 * 2 * stage_params / nic_coll + emb / nic_coll)
    assert float(res["bubble_s"]) == pytest.approx(7 * float(res["microbatch_s"]))


def test_expert_state_is_sharded_over_the_ranks_that_hold_each_expert() -> None:
    """Expert parallelism keeps each expert on d / e of the d data-parallel ranks, so its
    optimizer state (and with ZeRO-3 its weights) is split d / e ways, the dense part d ways:
    over all d GPUs of one stage the state adds up to the model's, whatever e."""
    cfg = get_model("mixtral-8x7b")
    hw = hybrid_hardware(None, "dgx-h100", "bf16")
    moe = cfg.layers * cfg.expert_params_per_layer
    dense = cfg.layers * (cfg.layer_params - cfg.expert_params_per_layer) \
        + cfg.embedding_params + cfg.head_params + cfg.final_norm_params
    d = 64
    for e in (1, 2, 8):
        one = evaluate(cfg, hw, dp=d, ep=e, zero=1, global_batch=d, micro_batch=1)
        # Adam's 12 bytes per parameter (ZeRO-1), dense / d + (moe / e) / (d / e) per GPU
        assert float(one["mem_optimizer_bytes"]) * d == pytest.approx(12 * (dense + moe))
        three = evaluate(cfg, hw, dp=d, ep=e, zero=3, global_batch=d, micro_batch=1)
        gathered = (cfg.layer_params - cfg.expert_params_per_layer) * 2  # one dense layer
        assert (float(three["mem_weights_bytes"]) - gathered) * d == pytest.approx(
            2 * (dense + moe))
        assert float(one["mem_weights_bytes"]) == pytest.approx(2 * (dense + moe / e))


def test_expert_gradients_reduce_over_their_own_ring() -> None:
    # dgx-h100 with d = 64, e = 8, t = 1: the dense gradients over all 64 ranks (8 per node:
    # min(NVLink, 8 rails x NIC)), the experts' over the 8 ranks that hold each, one per node
    # (8 GPUs apart): one rail, min(NVLink, NIC); ZeRO-1 moves (n-1)/n (G + P) each
    from traincast.hardware.catalog import load_catalog

    cat = load_catalog()
    node = cat.node("dgx-h100")
    intra, nic = (cat.links[node.intra].bw_gbs * 1e9 * cat.links[node.intra].efficiency,
                  cat.links[node.nic].bw_gbs * 1e9 * cat.links[node.nic].efficiency)
    cfg = get_model("mixtral-8x7b")
    hw = hybrid_hardware(cat, "dgx-h100", "bf16")
    res = evaluate(cfg, hw, dp=64, ep=8, zero=1, global_batch=64, micro_batch=1)
    moe = cfg.layers * cfg.expert_params_per_layer
    dense = cfg.layers * (cfg.layer_params - cfg.expert_params_per_layer) \
        + cfg.embedding_params + cfg.head_params + cfg.final_norm_params
    dense_s = 63 / 64 * 2 * (2 * dense) / min(intra, node.nics * nic)
    expert_s = 7 / 8 * 2 * (2 * moe / 8) / min(intra, nic)
    assert float(res["comm_dp_s"]) == pytest.approx(dense_s + expert_s)


def test_data_parallel_ring_uses_every_rail_of_its_node() -> None:
    # t = 1: 8 members of the data-parallel group per node; NCCL runs one ring per rail, so the
    # group crosses nodes at min(NVLink, 8 rails x 25 GB/s x 0.9937) = min(240, 198.7) GB/s
    # (nccl-tests issue 119: 8 GPUs and 4 HDR rails per node -> busbw 84.8 of 4 x 25 GB/s)
    hw = hybrid_hardware(None, "dgx-a100", "bf16")
    cfg = get_model("llama2-7b")
    res = evaluate(cfg, hw, dp=np.array([8, 16]), global_batch=64, zero=0, recompute=1)
    g = 2 * cfg.params
    hdr = 25e9 * round(4096 / 4122, 4)  # HDR x the InfiniBand payload rule
    assert res["comm_dp_s"][0] == pytest.approx(2 * 7 / 8 * g / (300e9 * 0.8))
    assert res["comm_dp_s"][1] == pytest.approx(2 * 15 / 16 * g / (8 * hdr))
    # t = 4: two members (two rails) per node
    res4 = evaluate(cfg, hw, dp=4, tp=4, global_batch=64, zero=0, recompute=1)
    g4 = 2 * (cfg.layers * cfg.layer_params / 4 + cfg.embedding_params / 4
              + (cfg.head_params / 4 + cfg.final_norm_params))
    assert float(res4["comm_dp_s"]) == pytest.approx(2 * 3 / 4 * g4 / (2 * hdr))
    eth = hybrid_hardware(None, "dgx-a100", "bf16", nic="eth25")
    slow = evaluate(cfg, eth, dp=16, global_batch=64, zero=0, recompute=1)
    assert float(slow["comm_dp_s"]) == pytest.approx(
        2 * 15 / 16 * g / (8 * 3.125e9 * round(1448 / 1538, 4)))  # Ethernet payload rule


# ------------------------------------------------------------------ head size set apart (head_dim)

GEMMA_7B = {  # google/gemma-7b config.json
    "model_type": "gemma", "hidden_size": 3072, "intermediate_size": 24576,
    "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 16,
    "head_dim": 256, "vocab_size": 256000, "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-6, "hidden_act": "gelu"}


def test_gemma_7b_param_count_published() -> None:
    from traincast.zoo.llm import from_hf_dict

    cfg = from_hf_dict(GEMMA_7B, "gemma-7b", "test")
    assert (cfg.head_dim, cfg.head_size, cfg.q_dim) == (256, 256, 4096)    # 16 x 256 != 3072
    # 8,537,680,896: google/gemma-7b safetensors metadata and KerasHub's gemma_7b_en preset
    assert cfg.params == 8_537_680_896
    # Gemma Team 2024, Table 2: 7,751,248,896 non-embedding parameters
    assert cfg.params - cfg.embedding_params == 7_751_248_896
    # by hand: Q, K, V h x a d and O a d x h; GeGLU 3 h f; two RMSNorms; tied embedding
    h, ad, f = 3072, 16 * 256, 24576
    assert cfg.params == 28 * (4 * h * ad + 3 * h * f + 2 * h) + 256000 * h + h
    # without head_dim (a d = h) the count is 28 x 4 h (a d - h) = 352,321,536 (~4%) low
    low = from_hf_dict({**GEMMA_7B, "head_dim": None}, "gemma-7b", "test")
    assert low.head_size == 192 and cfg.params - low.params == 28 * 4 * h * (ad - h)


def test_a_rope_scaled_context_defaults_to_its_pretraining_sequence() -> None:
    # Llama 3.1 8B's config: 131,072 positions by RoPE scaling of an 8,192-token pre-training
    # (rope_scaling.original_max_position_embeddings); hybrid runs default to 8,192 and warn
    # only past 131,072; a config without rope_scaling keeps its max_position_embeddings
    from traincast.parallel.hybrid import seq_warning
    from traincast.zoo.llm import from_hf_dict

    raw = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "vocab_size": 128256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
           "rope_scaling": {"factor": 8.0, "original_max_position_embeddings": 8192,
                            "rope_type": "llama3"}}
    cfg = from_hf_dict(raw, "llama-3.1-8b", "test")
    assert (cfg.seq, cfg.positions) == (8192, 131072)
    assert seq_warning(cfg, 65536) == ""
    assert "131072-token context" in seq_warning(cfg, 262144)
    plain = from_hf_dict({**raw, "rope_scaling": None}, "llama-3.1-8b", "test")
    assert (plain.seq, plain.positions) == (131072, 131072)
    shipped = get_model("hf:meta-llama/Llama-3.1-8B")
    assert (shipped.seq, shipped.positions) == (8192, 131072)
    out = predict_hybrid("hf:meta-llama/Llama-3.1-8B", node="dgx-h100", dp=8)
    assert out["job"]["seq"] == 8192
    # Phi-3-mini-128k's config keeps original_max_position_embeddings (4,096) at its top
    # level, its rope_scaling a LongRoPE table without it; the 4k model's is equal to its
    # max_position_embeddings, so nothing changes there
    phi3 = {"model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
            "vocab_size": 32064, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
            "hidden_act": "silu", "original_max_position_embeddings": 4096,
            "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]}}
    cfg = from_hf_dict(phi3, "phi-3-mini-128k", "test")
    assert (cfg.seq, cfg.positions) == (4096, 131072)
    short = {**phi3, "max_position_embeddings": 4096, "rope_scaling": None}
    cfg = from_hf_dict(short, "phi-3-mini-4k", "test")
    assert (cfg.seq, cfg.positions) == (4096, 4096)


def test_uneven_stages_price_the_slowest_stage(tmp_path) -> None:
    # 10 layers over pp 4: refused unless uneven, where the slowest stage holds ceil(10 / 4)
    # = 3 layers, the stage of 12 layers over pp 4: the same step
    raw = {"model_type": "llama", "hidden_size": 1024, "intermediate_size": 2816,
           "num_hidden_layers": 10, "num_attention_heads": 16, "num_key_value_heads": 16,
           "vocab_size": 32000, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5}
    ten, twelve = tmp_path / "l10.json", tmp_path / "l12.json"
    ten.write_text(json.dumps(raw))
    twelve.write_text(json.dumps({**raw, "num_hidden_layers": 12}))
    args = {"node": "dgx-a100", "dp": 2, "pp": 4, "global_batch": 64}
    with pytest.raises(TraincastError, match="or --uneven-stages"):
        predict_hybrid(f"hf:{ten}", **args)
    uneven = predict_hybrid(f"hf:{ten}", **args, uneven_stages=True)
    even = predict_hybrid(f"hf:{twelve}", **args)
    assert uneven["job"]["layers_slowest_stage"] == even["job"]["layers_slowest_stage"] == 3
    assert uneven["time_s"]["total"] == pytest.approx(even["time_s"]["total"])
    assert uneven["job"]["uneven_stages"] is True and even["job"]["uneven_stages"] is False
    assert "uneven stages, the slowest with 3 of 10 layers" in uneven["assumed"]["text"]
    with pytest.raises(TraincastError, match="an uneven split needs at least pp x vp = 16"):
        predict_hybrid(f"hf:{ten}", **{**args, "pp": 8, "dp": 1, "global_batch": 64},
                       vp=2, uneven_stages=True)


def test_attention_shapes_and_flops_use_the_head_size() -> None:
    from traincast.parallel import gemm
    from traincast.zoo.llm import from_hf_dict

    cfg = from_hf_dict(GEMMA_7B, "gemma-7b", "test")
    b, s, t = 2, 1024, 2
    qkv, out, up, down = gemm.linear_shapes(cfg, b, s, t)
    # Q K V: (b s, (a d + 2 kv d) / t, h); output: (b s, h, a d / t)
    assert [float(x) for x in qkv] == [1, b * s, (4096 + 2 * 4096) / t, 3072]
    assert [float(x) for x in out] == [1, b * s, 3072, 4096 / t]
    assert [float(x) for x in up] == [1, b * s, 2 * 24576 / t, 3072]
    # executed FLOPs (no recomputation) = 3 x forward of every layer and the logits:
    # F_gemm = 2 b s (W_attn + W_mlp), F_attn = 4 b s^2 a d, F_logit = 2 b s h V
    hw = hybrid_hardware(None, "dgx-a100", "bf16")
    gb = 8
    res = evaluate(cfg, hw, dp=2, tp=t, global_batch=gb, micro_batch=b, seq=s, recompute=0)
    w_attn, w_mlp = 3072 * 4 * 4096, 3 * 3072 * 24576
    f_layer = 2 * b * s * (w_attn + w_mlp) + 4 * b * s * s * 4096
    hw_flops = gb / b * (28 * 3 * f_layer + 3 * 2 * b * s * 3072 * 256000)
    done = float(res["hardware_tflops_per_gpu"]) * 1e12 * float(res["total_s"]) * 4
    assert done == pytest.approx(hw_flops, rel=1e-9)
    # model FLOPs: 6 P_flop + 12 l a d s per token
    model = (6 * cfg.params_flop + 12 * 28 * 4096 * s) * gb * s
    done = float(res["model_tflops_per_gpu"]) * 1e12 * float(res["total_s"]) * 4
    assert done == pytest.approx(model, rel=1e-9)


def test_head_dim_checks() -> None:
    from traincast.zoo.llm import config_from_table

    base = {"layers": 2, "hidden": 3072, "heads": 16, "ffn": 8, "vocab": 8}
    assert config_from_table("x", base, "t").head_size == 192          # default h / a
    with pytest.raises(TraincastError, match="multiple of heads"):
        config_from_table("x", {**base, "heads": 20}, "t")
    assert config_from_table("x", {**base, "heads": 20, "head_dim": 128}, "t").q_dim == 2560
    with pytest.raises(TraincastError, match="head_dim"):
        config_from_table("x", {**base, "head_dim": -1}, "t")


def test_an_moe_config_sizes_its_experts_by_moe_intermediate_size(tmp_path) -> None:
    # Qwen3-30B-A3B's config (huggingface.co/Qwen/Qwen3-30B-A3B): 48 layers, hidden 2048, 32
    # heads of 128 (4 key/value), 128 experts of 768, 8 per token, vocabulary 151,936, untied.
    # By hand: attention 2048 x 128 x (32 + 2 x 4) + 32 x 128 x 2048 = 18,874,368 per layer;
    # one expert 3 x 2048 x 768 = 4,718,592; router 2048 x 128 = 262,144; norms 2 x 2048 (+
    # the q/k norms Qwen3 adds are not counted); embeddings 2 x 151,936 x 2048
    from traincast.zoo.llm import from_hf_config

    path = tmp_path / "Qwen3-30B-A3B.json"
    path.write_text(json.dumps({
        "model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48,
        "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
        "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
        "num_experts_per_tok": 8, "vocab_size": 151936, "rms_norm_eps": 1e-6,
        "hidden_act": "silu", "tie_word_embeddings": False}))
    cfg = from_hf_config(path)
    assert cfg.name == "Qwen3-30B-A3B"  # the file's name, not its folder's
    assert (cfg.ffn, cfg.experts, cfg.top_k) == (768, 128, 8)
    per_layer = 18_874_368 + 128 * 4_718_592 + 262_144 + 2 * 2048
    assert cfg.params == pytest.approx(48 * per_layer + 2 * 151_936 * 2048 + 2048, rel=1e-6)
    assert 30.4e9 < cfg.params < 30.6e9  # the published 30.5B
    # shared experts are not modelled: an error naming the key, not a wrong size
    path.write_text(json.dumps({**json.loads(path.read_text()),
                                "shared_expert_intermediate_size": 5632}))
    with pytest.raises(TraincastError, match="key 'shared_expert_intermediate_size'"):
        from_hf_config(path)
    path.write_text("[]")
    with pytest.raises(TraincastError, match="must be a JSON object"):
        from_hf_config(path)
    # DeepSeek's keys: routed experts under n_routed_experts, shared ones refused by name
    deepseek = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_hidden_layers": 61,
                "num_attention_heads": 128, "vocab_size": 129280, "moe_intermediate_size": 2048,
                "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1,
                "first_k_dense_replace": 3}
    path.write_text(json.dumps(deepseek))
    with pytest.raises(TraincastError, match="key 'n_shared_experts'"):
        from_hf_config(path)
    # Qwen2-MoE-style dense layers between the expert ones are refused too
    path.write_text(json.dumps({**deepseek, "n_shared_experts": 0, "first_k_dense_replace": 0,
                                "decoder_sparse_step": 2}))
    with pytest.raises(TraincastError, match="key 'decoder_sparse_step'"):
        from_hf_config(path)


def test_nested_attn_and_ffn_tables_are_read_and_latent_attention_refused(tmp_path) -> None:
    # DBRX's config (huggingface.co/databricks/dbrx-base): 40 layers, d_model 6144, 48 heads of
    # 128 with 8 key/value heads and 16 experts of 10,752 (4 per token) inside attn_config and
    # ffn_config, vocabulary 100,352, untied, no biases. By hand per layer: attention
    # 6144 x 128 x (48 + 2 x 8) + 48 x 128 x 6144 = 88,080,384; 16 experts x 3 x 6144 x 10,752
    # = 3,170,893,824; router 6144 x 16; two LayerNorms of 6144 weights (DBRX's have no bias,
    # which the model counts for every LayerNorm: 81 x 6144 more, 4e-6 of the total and
    # 1.4e-5 of the active count);
    # published 132B total, 36B active
    from traincast.zoo.llm import from_hf_config

    path = tmp_path / "dbrx.json"
    path.write_text(json.dumps({
        "model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40,
        "max_seq_len": 32768, "vocab_size": 100352, "tie_word_embeddings": False,
        "attn_config": {"clip_qkv": 8, "kv_n_heads": 8, "rope_theta": 500000},
        "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4}}))
    cfg = from_hf_config(path)
    assert (cfg.kv_heads, cfg.ffn, cfg.experts, cfg.top_k) == (8, 10752, 16, 4)
    attention, expert, norms = 88_080_384, 3 * 6144 * 10752, 2 * 6144
    total = 40 * (attention + 16 * expert + 6144 * 16 + norms) + 2 * 100_352 * 6144 + 6144
    assert cfg.params == pytest.approx(total, rel=1e-5)
    assert cfg.params_active == pytest.approx(total - 40 * 12 * expert, rel=2e-5)
    # a nested key never replaces a top-level key of its role: transformers saves DBRX's
    # ffn_config with a hidden_size of its own
    raw = json.loads(path.read_text())
    raw["ffn_config"]["hidden_size"] = 2048
    path.write_text(json.dumps(raw))
    assert from_hf_config(path).hidden == 6144
    # MPT's attn_type decides the key/value heads: kv_n_heads counts for grouped-query only
    mpt = {"model_type": "mpt", "d_model": 256, "n_heads": 8, "n_layers": 2, "vocab_size": 100,
           "attn_config": {"attn_type": "multiquery_attention"}}
    path.write_text(json.dumps(mpt))
    assert from_hf_config(path).kv_heads == 1
    mpt["attn_config"] = {"attn_type": "multihead_attention", "kv_n_heads": 2}
    path.write_text(json.dumps(mpt))
    assert from_hf_config(path).kv_heads == 8
    mpt["attn_config"] = {"attn_type": "grouped_query_attention", "kv_n_heads": 2}
    path.write_text(json.dumps(mpt))
    assert from_hf_config(path).kv_heads == 2
    assert 131e9 < cfg.params < 133e9 and 36e9 < cfg.params_active < 37e9
    # multi-head latent attention (MiniCPM3, DeepSeek-V2/V3) has no h x h projections
    path.write_text(json.dumps({"model_type": "minicpm3", "hidden_size": 2560,
                                "num_hidden_layers": 62, "num_attention_heads": 40,
                                "vocab_size": 73448, "q_lora_rank": 768, "kv_lora_rank": 256}))
    with pytest.raises(TraincastError, match="key 'kv_lora_rank': multi-head latent attention"):
        from_hf_config(path)
    path.write_text(json.dumps({**json.loads(path.read_text()), "kv_lora_rank": None}))
    with pytest.raises(TraincastError, match="key 'q_lora_rank': multi-head latent attention"):
        from_hf_config(path)


@pytest.mark.parametrize(("extra", "says"), [
    # Jamba: attention every 8th layer among Mamba layers (its plain-transformer count is +78%)
    ({"model_type": "jamba", "attn_layer_period": 8, "attn_layer_offset": 4,
      "mamba_d_state": 16}, "key 'attn_layer_period': layers other than attention and MLP"),
    ({"model_type": "falcon_h1", "mamba_d_ssm": 1024}, "key 'mamba_d_ssm': layers other"),
    ({"model_type": "recurrent_gemma", "block_types": ["recurrent", "recurrent", "attention"]},
     "key 'block_types': layers other"),
    ({"model_type": "mamba"}, "model_type 'mamba': layers other"),
    ({"model_type": "qwen3_next", "layer_types": ["linear_attention", "full_attention"]},
     "'layer_types' holds 'linear_attention' layers"),
    # Llama 4's shared expert has no key: a plain count misses 3 h f per MoE layer
    ({"model_type": "llama4_text", "num_local_experts": 16, "num_experts_per_tok": 1},
     "model_type 'llama4_text': its MoE layers hold a shared expert"),
    # Gemma 3n: one MLP width per layer
    ({"model_type": "gemma3n_text", "intermediate_size": [8192] * 35},
     "key 'intermediate_size' must be a whole number from 0 to 1e9, got a list of 35 values"),
])
def test_configs_with_layers_the_model_does_not_price_are_refused(tmp_path: Path, extra,
                                                                   says) -> None:
    from traincast.zoo.llm import from_hf_config

    path = tmp_path / "config.json"
    base = {"hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
            "intermediate_size": 1024, "vocab_size": 1000}
    path.write_text(json.dumps({**base, **extra}))
    with pytest.raises(TraincastError, match=re.escape(says)):
        from_hf_config(path)
    # windowed and full attention layers are a transformer's own: priced
    path.write_text(json.dumps({**base, "model_type": "qwen3", "sliding_window": 64,
                                "layer_types": ["sliding_attention", "full_attention"] * 2}))
    assert from_hf_config(path).window_share == 0.5


def test_logit_soft_capping_is_said_not_priced(tmp_path: Path) -> None:
    from traincast.parallel.hybrid import model_warnings
    from traincast.zoo.llm import from_hf_config

    path = tmp_path / "config.json"
    base = {"model_type": "gemma2", "hidden_size": 512, "num_hidden_layers": 4,
            "num_attention_heads": 8, "intermediate_size": 1024, "vocab_size": 1000}
    path.write_text(json.dumps({**base, "attn_logit_softcapping": 50.0,
                                "final_logit_softcapping": None}))
    cfg = from_hf_config(path)
    assert cfg.softcaps == (("attn_logit_softcapping", 50.0),)
    said = " ".join(model_warnings(cfg, 128, 128, "materialized"))
    assert "soft-caps its logits (attn_logit_softcapping 50" in said and "not priced" in said
    path.write_text(json.dumps(base))
    assert not any("soft-cap" in w for w in model_warnings(from_hf_config(path), 128, 128,
                                                             "materialized"))


def test_sequence_parallelism_asked_at_tensor_parallelism_1_is_off_and_said_so() -> None:
    # docs/parallelism.md: with t = 1 sequence parallelism has nothing to split
    res = predict_hybrid("zoo:llama2-7b", node="dgx-h100", dp=8, sp=True)
    assert res["job"]["sp"] is False and "sequence parallelism off" in res["assumed"]["text"]
    assert predict_hybrid("zoo:llama2-7b", node="dgx-h100", dp=4, tp=2, sp=True)["job"]["sp"]


def test_shape_errors_say_which_sizes_would_do() -> None:
    # Llama 2 7B: 32 heads (and key/value heads): tp divides 32; a dense model has no experts;
    # global batch 100 over dp 8 x micro-batch 1: a multiple of 8 (96) would do
    with pytest.raises(TraincastError, match="tp of 1, 2, 4, 8, 16, 32 would"):
        predict_hybrid("zoo:llama2-7b", node="dgx-h100", dp=1, tp=3)
    with pytest.raises(TraincastError, match="llama2-7b has none: use ep 1"):
        predict_hybrid("zoo:llama2-7b", node="dgx-h100", dp=8, ep=2)
    # Mixtral 8x7B: 8 experts; ep divides both the experts and dp = 16: 1, 2, 4, 8
    with pytest.raises(TraincastError, match="8 experts, dp 16; ep of 1, 2, 4, 8 would"):
        predict_hybrid("zoo:mixtral-8x7b", node="dgx-h100", dp=16, ep=16)
    with pytest.raises(TraincastError, match=r"\(8 x 1 = 8\): 96 would"):
        predict_hybrid("zoo:llama2-7b", node="dgx-h100", dp=8, global_batch=100)
    # 32 layers: pp divides 32 (and 32 / vp with interleaving, which needs pp > 1: 2..16)
    with pytest.raises(TraincastError, match="32 layers; pp of 1, 2, 4, 8, 16, 32 would, or "
                       "--uneven-stages"):
        predict_hybrid("zoo:llama2-7b", node="dgx-h100", dp=1, pp=3)
    with pytest.raises(TraincastError, match="pp of 2, 4, 8, 16 would with vp 2"):
        predict_hybrid("zoo:llama2-7b", node="dgx-h100", dp=1, pp=3, vp=2)
    # vp 3 divides no 32 / pp: no pp is named, the vp that would are (32 / (2 vp) whole)
    with pytest.raises(TraincastError, match=r"32 layers; no pp would with vp 3 \(vp of 2, 4, "
                       r"8, 16 would with pp 2\)"):
        predict_hybrid("zoo:llama2-7b", node="dgx-h100", dp=1, pp=2, vp=3)


def test_a_config_whose_heads_do_not_divide_names_both_numbers(tmp_path) -> None:
    from traincast.zoo.llm import from_hf_config

    path = tmp_path / "c.json"
    base = {"model_type": "llama", "hidden_size": 4100, "num_attention_heads": 32,
            "num_hidden_layers": 2, "vocab_size": 100}
    path.write_text(json.dumps(base))
    with pytest.raises(TraincastError, match="hidden 4100 is no multiple of heads 32"):
        from_hf_config(path)
    path.write_text(json.dumps({**base, "hidden_size": 4096, "num_key_value_heads": 5}))
    with pytest.raises(TraincastError, match="heads 32 is no multiple of kv_heads 5"):
        from_hf_config(path)


def test_config_fields_out_of_their_kind_name_the_key() -> None:
    # a list where one activation belongs, a negative or absurd size, a mixture of experts
    # routing to no expert: each an error naming its key, none silently a default
    from traincast.zoo.llm import from_hf_dict

    base = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
            "num_hidden_layers": 2, "vocab_size": 32000}
    for extra, says in (
            ({"hidden_act": ["silu"]}, "key 'hidden_act' must name one activation"),
            ({"max_position_embeddings": -1},
             "key 'max_position_embeddings' must be a whole number from 0 to 1e9, got -1"),
            ({"max_position_embeddings": 1e12}, "from 0 to 1e9, got 1000000000000.0"),
            ({"num_local_experts": 8, "num_experts_per_tok": 0},
             "key 'num_experts_per_tok' is 0")):
        with pytest.raises(TraincastError, match=re.escape(says)):
            from_hf_dict(base | extra, "m", "test")
    assert from_hf_dict(base | {"num_local_experts": 8, "num_experts_per_tok": 2}, "m",
                        "test").top_k == 2
