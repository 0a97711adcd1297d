"""`traincast profile` / `zoo list`, MODEL specs (file.py:FUNC, hf:), and features files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from traincast.errors import TraincastError  # noqa: E402
from traincast.features.io import load_features, write_features  # noqa: E402
from traincast.features.profile import profile_model  # noqa: E402
from traincast.zoo import ZOO  # noqa: E402

DESIGN_KEYS = ("params", "params_dense", "params_embedding", "batch_size", "flops_forward",
               "flops_compute_bound", "bytes_memory_bound", "weight_bytes",
               "embedding_bytes_touched", "embedding_allreduce_bytes", "input_bytes",
               "memory_bytes")


def test_profile_json_then_predict_reads_it(tc, tmp_path: Path) -> None:
    out = tmp_path / "mnv2.json"
    r = tc("profile", "zoo:mobilenet-v2", "--batch", "2", "--optimizer", "sgd", "--json",
           "-o", str(out))
    assert r.returncode == 0, r.stderr
    # -o: the record goes to the file only; stdout stays JSON, naming it
    assert json.loads(r.stdout) == {"wrote": str(out)}
    rec = json.loads(out.read_text())
    for key in DESIGN_KEYS:
        assert key in rec
    assert set(rec["memory_bytes"]) == {"weights", "grads", "optimizer", "activations"}
    assert rec["batch_size"] == 2 and rec["optimizer"] == "sgd"
    p = tc("predict", "--features", str(out), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["time_s"]["compute_flop"] > 0


def test_profile_parquet_holds_the_op_table(tc, tmp_path: Path) -> None:
    out = tmp_path / "ops.parquet"
    r = tc("profile", "zoo:dlrm", "--batch", "8", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "Top ops" in r.stdout  # the table for people
    rec = load_features(out)
    assert rec["ops"] and {"op", "phase", "flops", "bytes_read", "bytes_written",
                           "bound"} <= set(rec["ops"][0])
    assert sum(o["flops"] for o in rec["ops"]) == rec["flops_total"]
    mem = sum(o["bytes_read"] + o["bytes_written"] for o in rec["ops"] if o["bound"] == "memory")
    assert mem == rec["bytes_memory_bound"]
    p = tc("predict", "--features", str(out), "--arch", "pearl", "--gpus", "8", "--json")
    assert p.returncode == 0, p.stderr


def test_profile_bad_input_is_one_clean_line(tc) -> None:
    r = tc("profile", "zoo:no-such-model")
    assert r.returncode == 2 and "unknown zoo model" in r.stderr
    assert "Traceback" not in r.stderr
    r = tc("profile", "zoo:gcn", "--optimizer", "lamb")
    assert r.returncode == 2 and "--optimizer" in r.stderr


def test_zoo_list_json(tc) -> None:
    r = tc("zoo", "list", "--json")
    assert r.returncode == 0, r.stderr
    models = {m["name"]: m for m in json.loads(r.stdout)["models"]}
    assert set(ZOO) <= set(models)
    assert models["resnet50"]["params"] == 25_557_032
    # ResNet-50: 4.1 GMACs = 8.2 GFLOPs forward per image
    assert abs(models["resnet50"]["flops_forward_per_sample"] / 8.2e9 - 1) < 0.02
    # a config-only LLM counts as a profile does: Llama 3 8B (32 layers, 32 heads of 128,
    # 8,192 tokens; Meta's config) 2 FLOPs per matrix parameter per token + the attention
    # products over the full square, 4 l a d s^2 = 4 x 32 x 4096 x 8192^2
    from traincast.parallel.models import get_model

    cfg = get_model("llama3-8b")
    attention = 4 * 32 * 4096 * 8192**2
    assert models["llama3-8b"]["flops_forward_per_sample"] == pytest.approx(
        2 * cfg.params_flop * 8192 + attention)
    # and the profiled Llama 2 7B agrees with that count of its own config within 0.1%
    cfg = get_model("llama2-7b")
    assert models["llama2-7b"]["flops_forward_per_sample"] == pytest.approx(
        2 * cfg.params_flop * 4096 + 4 * 32 * 4096 * 4096**2, rel=1e-3)


def test_file_spec_profiles_a_user_model(tmp_path: Path) -> None:
    src = tmp_path / "mymodel.py"
    src.write_text(
        "import torch\n"
        "def build(batch):\n"
        "    model = torch.nn.Sequential(torch.nn.Linear(20, 30), torch.nn.Tanh(),\n"
        "                                torch.nn.Linear(30, 1))\n"
        "    return model, (torch.randn(batch, 20),)\n")
    rec = profile_model(f"{src}:build", batch_size=5)
    assert rec["model"] == f"{src}:build"
    assert rec["flops_forward"] == 2 * 5 * (20 * 30 + 30 * 1)
    with pytest.raises(TraincastError, match="no function"):
        profile_model(f"{src}:missing")
    with pytest.raises(TraincastError, match="not found"):
        profile_model(f"{tmp_path / 'absent.py'}:build")


def test_hf_config_spec_builds_from_config_only(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    cfg = {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "n_positions": 128,
           "vocab_size": 1000, "architectures": ["GPT2LMHeadModel"]}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    rec = profile_model(f"hf:{tmp_path}", batch_size=2)
    h, v, p, layers = 64, 1000, 128, 2
    assert rec["params"] == v * h + p * h + layers * (12 * h * h + 13 * h) + 2 * h
    tokens = 2 * 128
    # matrix FLOPs of the blocks and the tied head dominate: 6 N T within 25% at this tiny size
    assert abs(rec["flops_compute_bound"] / (6 * rec["params"] * tokens) - 1) < 0.25


def test_a_per_op_table_apart_from_its_totals_is_refused(tmp_path: Path) -> None:
    """The per-op table and the totals of one record describe one step: a table cut to one
    row (n_ops says 4: the rows' counts 2 + 1 + 1), or whose compute-bound FLOPs (5e11 per
    call x count 2 = 1e12) are not the total (2e12), is refused naming the field; the same
    table with its own totals loads."""
    ops = [{"op": "mm", "flops": 5e11, "count": 2, "bound": "compute"},
           {"op": "add", "bytes_read": 6e8, "bytes_written": 4e8, "bound": "memory"},
           {"op": "relu", "bytes_read": 5e8, "bytes_written": 5e8, "bound": "memory"}]
    good = {"flops_compute_bound": 1e12, "bytes_memory_bound": 2e9, "weight_bytes": 1e8,
            "n_ops": 4, "ops": ops}
    assert load_features(write_features(good, tmp_path / "good.json"))["ops"] == ops
    cases = [({"ops": ops[1:]}, "field 'n_ops' is 4, but the per-op table ('ops') runs 2 ops "
                                "(its rows' counts summed)"),
             ({"flops_compute_bound": 2e12}, "field 'flops_compute_bound' is 2e+12, but the "
                                             "per-op table's compute-bound rows sum to 1e+12"),
             ({"bytes_memory_bound": 3e9}, "field 'bytes_memory_bound' is 3e+09, but the "
                                           "per-op table's memory-bound rows sum to 2e+09")]
    for i, (change, words) in enumerate(cases):
        path = tmp_path / f"bad{i}.json"
        path.write_text(json.dumps({**good, **change}))
        with pytest.raises(TraincastError) as err:
            load_features(path)
        assert str(err.value) == f"{path}: {words}" and "leave 'ops' out" in err.value.hint


def test_features_files_round_trip_and_errors(tmp_path: Path) -> None:
    rec = {"flops_compute_bound": 1e12, "bytes_memory_bound": 2e9, "weight_bytes": 1e8,
           "ops": [{"op": "mm", "phase": "forward", "flops": 1e12, "bytes_read": 4,
                    "bytes_written": 4, "bound": "compute", "dtype": "float32", "shapes": "2x2"},
                   {"op": "add", "phase": "forward", "flops": 0, "bytes_read": 1.5e9,
                    "bytes_written": 0.5e9, "bound": "memory", "dtype": "float32",
                    "shapes": "2x2;2x2"}]}
    assert load_features(write_features(rec, tmp_path / "f.json")) == rec
    back = load_features(write_features(rec, tmp_path / "f.parquet"))
    assert back["ops"] == rec["ops"] and back["weight_bytes"] == 1e8
    with pytest.raises(TraincastError, match="per-op table"):
        write_features({k: v for k, v in rec.items() if k != "ops"}, tmp_path / "g.parquet")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [1]}), tmp_path / "plain.parquet")
    with pytest.raises(TraincastError, match="without a traincast features record"):
        load_features(tmp_path / "plain.parquet")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"flops_compute_bound": -1, "bytes_memory_bound": 0,
                               "weight_bytes": 0}))
    with pytest.raises(TraincastError, match="non-negative"):
        load_features(bad)
    emb = {"flops_compute_bound": 1, "bytes_memory_bound": 0, "weight_bytes": 0}
    bad.write_text(json.dumps({**emb, "embedding_allreduce_bytes": None}))
    assert load_features(bad)["embedding_allreduce_bytes"] is None  # = embedding_bytes_touched
    bad.write_text(json.dumps({**emb, "embedding_allreduce_bytes": -5}))
    with pytest.raises(TraincastError, match="embedding_allreduce_bytes"):
        load_features(bad)


# the start of a user's model file: class Net, its layers follow in __init__
_NET_HEAD = ("import torch\n"
             "class Net(torch.nn.Module):\n"
             "    def __init__(self):\n"
             "        super().__init__()\n")


def test_file_spec_failing_on_meta_is_rebuilt_on_cpu(tmp_path: Path) -> None:
    src = tmp_path / "datadep.py"
    src.write_text(
        _NET_HEAD + "        self.lin = torch.nn.Linear(6, 4)\n"
        "    def forward(self, x):\n"
        "        y = self.lin(x)\n"
        "        return y.sum() / (1.0 + y.abs().max().item())  # needs real data\n"
        "def build(batch):\n"
        "    return Net(), (torch.randn(batch, 6),)\n")
    rec = profile_model(f"{src}:build", batch_size=50)
    assert rec["method"] == "cpu-extrapolated" and rec["batch_size"] == 50
    assert rec["flops_forward"] == 2 * 50 * 6 * 4
    assert rec["memory_bytes"]["weights"] == (6 * 4 + 4) * 4


def test_file_spec_batch_is_funcs_batch_not_the_first_inputs_length(tmp_path: Path) -> None:
    # a graph model: FUNC(b) builds 10 b nodes and 50 b edges; the first input (the edge
    # list) is not the batch. Forced onto the CPU fallback (a float .item()), it is rebuilt
    # at b = 1, 2 and extrapolated to the b asked for, not to the edge list's length
    src = tmp_path / "graph.py"
    src.write_text(
        _NET_HEAD + "        self.lin = torch.nn.Linear(8, 4)\n"
        "    def forward(self, src, dst, x):\n"
        "        m = self.lin(x)[src]\n"
        "        out = torch.zeros(x.shape[0], 4, device=x.device).index_add(0, dst, m)\n"
        "        return out.sum() / (1.0 + out.abs().max().item())\n"
        "def build(b):\n"
        "    n, e = 10 * b, 50 * b\n"
        "    return Net(), (torch.randint(0, n, (e,)), torch.randint(0, n, (e,)),\n"
        "                   torch.randn(n, 8))\n")
    rec = profile_model(f"{src}:build", batch_size=3)
    assert rec["method"] == "cpu-extrapolated" and rec["batch_size"] == 3
    assert rec["flops_forward"] == 2 * (10 * 3) * 8 * 4  # the linear layer over 30 nodes
    assert rec["input_bytes"] == 2 * 50 * 3 * 8 + 10 * 3 * 8 * 4


def test_errors_in_the_users_file_name_the_file_and_function(tc, tmp_path: Path) -> None:
    src = tmp_path / "user.py"
    src.write_text(
        "import torch\n"
        "def broken(b):\n"
        "    raise RuntimeError('no data here')\n"
        "def half(b):\n"
        "    return torch.nn.Linear(2, 2)\n"
        "def mismatch(b):\n"
        "    return torch.nn.Bilinear(4, 4, 1), (torch.randn(b, 4),)\n")
    cases = {"broken": ("broken(8) raised RuntimeError: no data here", "FUNC(batch_size)"),
             "half": ("half(8) returned Linear, not (model, inputs)", "inputs a tensor"),
             "nothing": ("no function 'nothing'", "broken, half, mismatch"),
             "mismatch": ("fails on CPU too (TypeError", "forward()'s arguments")}
    for func, (message, hint) in cases.items():
        r = tc("profile", f"{src}:{func}")
        assert r.returncode == 2, (func, r.stderr)
        assert str(src) in r.stderr and message in r.stderr and hint in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and "bug in traincast" not in r.stderr
    bad = tmp_path / "bad_import.py"
    bad.write_text("import no_such_module_here\n")
    r = tc("profile", f"{bad}:build")
    assert r.returncode == 2 and f"{bad}: importing the model file failed" in r.stderr
    assert "ModuleNotFoundError" in r.stderr and "Traceback" not in r.stderr
