"""traincast merge: shared layers and memory saved, against counts derived by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from traincast.errors import TraincastError

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from traincast.merge import merge_models, merge_specs, model_layers  # noqa: E402

# ---------------------------------------------------------------- ResNet counts from the paper
# He et al. 2016, Table 1: a 7x7/2 stem conv (3 -> 64) with batch norm, four stages of
# bottleneck blocks of width w = 64, 128, 256, 512 (1x1 cin->w, 3x3 w->w, 1x1 w->4w, each
# with batch norm: 2 parameters per channel), a 1x1 projection shortcut (cin -> 4w, batch
# norm) on each stage's first block, and a 2048 -> 1000 fully connected layer with bias.
# ResNet-50 has 3, 4, 6, 3 blocks per stage; ResNet-101 has 3, 4, 23, 3.

STEM = 3 * 64 * 7 * 7 + 2 * 64
FC = 2048 * 1000 + 1000


def block(cin: int, w: int, first: bool) -> int:
    convs = cin * w + 9 * w * w + w * 4 * w
    norms = 2 * w + 2 * w + 2 * 4 * w
    projection = cin * 4 * w + 2 * 4 * w if first else 0
    return convs + norms + projection


def stage(i: int, blocks: int) -> int:
    w = 64 * 2 ** i
    cin = 64 if i == 0 else 2 * w  # the previous stage's 4 w_prev = 2 w
    return block(cin, w, True) + (blocks - 1) * block(4 * w, w, False)


def resnet(blocks: tuple[int, ...]) -> int:
    return STEM + sum(stage(i, n) for i, n in enumerate(blocks)) + FC


def test_hand_formula_gives_the_published_resnet_counts() -> None:
    assert resnet((3, 4, 6, 3)) == 25_557_032   # torchvision resnet50
    assert resnet((3, 4, 23, 3)) == 44_549_160  # torchvision resnet101


def test_resnet50_and_resnet101_share_all_of_resnet50() -> None:
    out = merge_specs(["zoo:resnet50", "zoo:resnet101"])
    # shared: stem, layer1 (3 blocks), layer2 (4), the first 6 of layer3's 23 blocks, layer4 (3),
    # fc: one layer per ResNet-50 layer, each with its ResNet-101 twin
    shared = STEM + stage(0, 3) + stage(1, 4) + stage(2, min(6, 23)) + stage(3, 3) + FC
    assert shared == 25_557_032
    assert out["params_shared"] == out["params_saved"] == shared
    assert out["params_separate"] == 25_557_032 + 44_549_160
    assert out["params_merged"] == 44_549_160
    assert out["saved_bytes"] == 4 * shared                     # fp32
    assert out["separate_bytes"] == 4 * (25_557_032 + 44_549_160)
    assert out["merged_bytes"] == 4 * 44_549_160
    # layers: stem conv + bn, 3 per block conv + bn pairs (6), a projection pair per stage, fc
    r50_layers = 2 + 6 * 16 + 2 * 4 + 1
    assert out["groups_total"] == r50_layers == 107
    assert [m["shared_layers"] for m in out["models"]] == [107, 107]
    assert out["models"][1]["layers"] == 2 + 6 * 33 + 2 * 4 + 1


def test_resnet_groups_pair_the_same_positions_and_rank_by_bytes() -> None:
    out = merge_specs(["zoo:resnet50", "zoo:resnet101"])
    groups = out["groups"]
    saved = [g["saved_bytes"] for g in groups]
    assert saved == sorted(saved, reverse=True)
    # the heaviest layers: the three 3x3 512 -> 512 convolutions of layer4, 4 bytes each param
    assert [g["params_per_copy"] for g in groups[:3]] == [9 * 512 * 512] * 3
    assert groups[0]["saved_bytes"] == 9 * 512 * 512 * 4
    assert groups[-1]["cumulative_saved_bytes"] == out["saved_bytes"]
    # block b of ResNet-50's flat block list is block b of ResNet-101's below layer4 (index 13)
    # and block b + 17 inside layer4 (17 more layer3 blocks come first)
    for g in groups:
        (a, b) = (x["layer"] for x in g["layers"])
        if a.startswith("net.layers."):
            i, rest = a.removeprefix("net.layers.").split(".", 1)
            assert b == f"net.layers.{int(i) + (17 if int(i) >= 13 else 0)}.{rest}"
        else:
            assert a == b  # stem and fc


def test_three_models_groups_of_three() -> None:
    out = merge_specs(["zoo:resnet50", "zoo:resnet101", "zoo:resnet50"], top=2)
    assert out["params_saved"] == 2 * 25_557_032          # every ResNet-50 layer: 3 copies
    assert out["params_shared"] == 25_557_032
    assert out["merged_bytes"] == 4 * 44_549_160
    assert [m["model"] for m in out["models"]] == ["zoo:resnet50", "zoo:resnet101",
                                                   "zoo:resnet50#2"]
    assert len(out["groups"]) == 2 and out["groups_total"] == 107
    assert out["groups"][0]["copies"] == 3


# ----------------------------------------------------------------------------- a hand pair

class A(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 8, 3, bias=False)             # 72: weight (8, 1, 3, 3)
        self.conv = nn.Conv2d(3, 8, 3, stride=1, padding=1)    # 3*8*9 + 8 = 224
        self.bn = nn.BatchNorm2d(8)                            # 16
        self.fc1 = nn.Linear(32, 16)                           # 528
        self.fc2 = nn.Linear(32, 16)                           # 528, identical to fc1
        self.head = nn.Linear(16, 10)                          # 170


class B(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=0)    # 224: shares (stride aside)
        self.dw = nn.Conv2d(8, 8, 3, groups=8, bias=False)     # 72: A.stem's shape, not config
        self.bn = nn.BatchNorm2d(8, eps=1e-3)                  # 16: other eps, no share
        self.fc = nn.Linear(32, 16)                            # 528: shares with fc1 only
        self.head = nn.Linear(16, 10, bias=False)              # 160: no bias, no share
        self.head16 = nn.Linear(16, 10).half()                 # 170 in fp16: dtype differs


def test_hand_pair() -> None:
    with torch.device("meta"):
        a, b = A(), B()
    out = merge_models([a, b], ["a", "b"])
    a_bytes = 4 * (72 + 224 + 16 + 528 + 528 + 170)
    b_bytes = 4 * (224 + 72 + 16 + 528 + 160) + 2 * 170
    assert [m["params"] for m in out["models"]] == [1538, 1170]
    assert out["separate_bytes"] == a_bytes + b_bytes == 6152 + 4340
    assert out["groups_total"] == 2
    assert out["params_saved"] == 528 + 224
    assert out["saved_bytes"] == 4 * (528 + 224)
    assert out["merged_bytes"] == a_bytes + b_bytes - 4 * 752
    first, second = out["groups"]
    assert first["layers"] == [{"model": "a", "layer": "fc1"}, {"model": "b", "layer": "fc"}]
    assert second["layers"] == [{"model": "a", "layer": "conv"}, {"model": "b", "layer": "conv"}]
    assert first["saved_bytes"] == 4 * 528 and second["cumulative_saved_bytes"] == 4 * 752
    assert "retrain" in out["note"]


def test_one_layer_per_model_per_group() -> None:
    with torch.device("meta"):
        a1, a2, b = A(), A(), B()
    out = merge_models([a1, a2, b], ["a1", "a2", "b"])
    # fc1 (a1, a2, b), fc2 (a1, a2), conv (a1, a2, b), stem, bn, head (a1, a2)
    assert out["params_saved"] == 2 * 528 + 528 + 2 * 224 + 72 + 16 + 170
    for g in out["groups"]:
        models = [x["model"] for x in g["layers"]]
        assert len(models) == len(set(models))


def test_tied_parameters_count_once() -> None:
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.out = nn.Linear(4, 10, bias=False)
            self.out.weight = self.emb.weight

    layers = model_layers(Tied())
    assert [(x.name, x.params) for x in layers] == [("emb", 40)]
    out = merge_models([Tied(), Tied()], ["x", "y"])
    assert out["params_separate"] == 80 and out["params_saved"] == 40


def test_a_module_with_children_is_named_by_its_own_parameters() -> None:
    # a model that holds a bias itself besides its layers (BERT's MLM output bias): that
    # layer is the bias, not the whole model ("(root)"); a leaf keeps its module's name
    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = nn.Sequential(nn.Linear(4, 4))
            self.block.scale = nn.Parameter(torch.ones(4))
            self.fc = nn.Linear(4, 10)
            self.out_bias = nn.Parameter(torch.zeros(10))

    names = [x.name for x in model_layers(Head())]
    assert names == ["out_bias", "block.scale", "block.0", "fc"]


def test_file_specs_are_built_on_meta(tmp_path: Path) -> None:
    src = tmp_path / "pair.py"
    src.write_text(
        "import torch\n"
        "from torch import nn\n"
        "def small(batch):\n"
        "    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2)), "
        "(torch.ones(batch, 64),)\n"
        "def wide(batch):\n"
        "    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 512)), "
        "(torch.ones(batch, 64),)\n")
    out = merge_specs([f"{src}:small", f"{src}:wide"])
    assert out["params_saved"] == 64 * 64 + 64
    assert out["groups_total"] == 1


def test_a_config_only_zoo_model_merges_through_transformers() -> None:
    pytest.importorskip("transformers")
    from traincast.zoo import MODELS

    # Megatron GPT 1.7B: only a decoder-only config (GPT-2 layout: 24 layers, h = 2304,
    # V = 51,200, 2048 learned positions, head tied to the token embedding), built on meta.
    # Layers: token and position embeddings, 6 per block (ln_1, c_attn, c_proj, ln_2, c_fc,
    # mlp c_proj), the final norm; two copies share every one.
    cfg = MODELS["megatron-gpt-1.7b"].llm
    h, f, v, p, n = 2304, 9216, 51_200, 2048, 24
    block = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * f + f) + (f * h + h)
    params = (v + p) * h + n * block + 2 * h
    assert params == cfg.params
    out = merge_specs(["zoo:megatron-gpt-1.7b", "zoo:megatron-gpt-1.7b"])
    assert [m["params"] for m in out["models"]] == [params, params]
    assert out["params_saved"] == out["params_shared"] == out["params_merged"] == params
    assert out["groups_total"] == 2 + 6 * n + 1
    assert out["saved_bytes"] == 4 * params  # fp32


def test_errors() -> None:
    with pytest.raises(TraincastError, match="at least two"):
        merge_specs(["zoo:resnet50"])
    with pytest.raises(TraincastError, match="unknown zoo model"):
        merge_specs(["zoo:resnet50", "zoo:nope"])


def test_cli_json_and_table() -> None:
    from typer.testing import CliRunner

    from traincast.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["merge", "zoo:resnet50", "zoo:resnet101", "--top", "3", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert len(out["groups"]) == 3 and out["saved_bytes"] == 4 * 25_557_032
    res = runner.invoke(app, ["merge", "zoo:resnet-50", "zoo:resnet-101", "--top", "2"])
    assert res.exit_code == 0, res.output
    assert "retrain" in res.stdout and "36.5%" in res.stdout


def test_lazy_layers_are_refused_by_name() -> None:
    lazy = nn.Sequential(nn.Linear(4, 4), nn.LazyLinear(10))
    with pytest.raises(TraincastError, match=r"lazy.*parameter 1\.weight|parameter 1\.weight"
                       r".*lazy"):
        merge_models([lazy, nn.Sequential(nn.Linear(4, 4))], ["a", "b"])


def test_every_model_keeps_a_name_of_its_own() -> None:
    from traincast.merge import _labels

    assert _labels(["hf:cfg", "hf:cfg", "hf:cfg#2"]) == ["hf:cfg", "hf:cfg#3", "hf:cfg#2"]
    assert _labels(["m", "m", "m"]) == ["m", "m#2", "m#3"]
    assert _labels(["a#2", "a", "a"]) == ["a#2", "a", "a#3"]


def test_a_layer_of_mixed_dtypes_names_both() -> None:
    def mixed() -> nn.Module:
        lin = nn.Linear(10, 10)
        lin.weight = nn.Parameter(lin.weight.detach().to(torch.bfloat16))
        return lin

    out = merge_models([mixed(), mixed()], ["a", "b"])
    [group] = out["groups"]
    assert group["dtype"] == "bfloat16, float32"
    assert group["bytes_per_copy"] == 100 * 2 + 10 * 4  # each parameter in its own dtype


def test_no_shared_layer_is_one_line_not_an_empty_table() -> None:
    from typer.testing import CliRunner

    from traincast.cli import app

    res = CliRunner().invoke(app, ["merge", "zoo:gpt2", "zoo:resnet50"])
    assert res.exit_code == 0, res.output
    assert "no two models hold such a layer" in " ".join(res.stdout.split())
    assert "Merge groups" not in res.stdout
