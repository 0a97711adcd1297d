"""Recurrent layers on a GPU: the profiler tags nn.LSTM/GRU/RNN calls, and a GPU prices them as
cuDNN's fused RNN (one GEMM per step, one fused cell kernel, batched input and weight GEMMs)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from traincast import compute, kernels
from traincast.features.ops import expand_ops, expand_ops_origin
from traincast.features.profile import profile
from traincast.features.recurrent import as_cudnn, call_spec, cudnn_rows, parse_call
from traincast.hardware.catalog import CatalogError, load_catalog
from traincast.roofline import Curves, compute_breakdown


class TwoLayerLM(nn.Module):
    """Embedding -> 2-layer LSTM (dropout between layers) -> linear: the PTB model's shape."""

    def __init__(self, mode: str = "lstm", bidirectional: bool = False) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 6)
        rnn = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[mode]
        self.rnn = rnn(6, 8, 2, batch_first=True, dropout=0.5, bidirectional=bidirectional)
        self.out = nn.Linear(16 if bidirectional else 8, 50)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        y, _ = self.rnn(self.emb(ids))
        return self.out(y).sum()


def _ops(model: nn.Module, batch: int = 3, seq: int = 5) -> list[dict]:
    ids = torch.randint(0, 50, (batch, seq))
    return profile(model, (ids,), ops=True)["ops"]


@pytest.mark.parametrize(("mode", "gates", "name"), [("lstm", 4, "lstm"), ("gru", 3, "gru"),
                                                     ("rnn", 1, "rnn_tanh")])
def test_profile_tags_every_op_of_the_recurrent_call(mode: str, gates: int, name: str) -> None:
    ops = _ops(TwoLayerLM(mode))
    tagged = [o for o in ops if o.get("recurrent")]
    specs = {o["recurrent"] for o in tagged}
    assert len(specs) == 1
    call = parse_call(specs.pop())
    assert call == {"mode": name, "call": 0, "seq": 5, "batch": 3, "input": 6, "hidden": 8,
                    "layers": 2, "directions": 1, "bias": 1, "dropout": 1}
    # forward and backward both tagged; the embedding, the output layer, the loss and the
    # optimizer are not
    assert {o["phase"] for o in tagged} == {"forward", "backward"}
    for o in ops:
        if o["op"] in ("embedding", "embedding_dense_backward") or o["phase"] == "optimizer":
            assert "recurrent" not in o
    # the tagged forward products are the layers' gate GEMMs: 2 B T G (I_l + H) each layer
    fwd = sum(o["flops"] for o in tagged if o["phase"] == "forward")
    g = gates * 8
    assert fwd == sum(2 * 3 * 5 * g * (i + 8) for i in (6, 8))


def test_bidirectional_call_is_tagged_with_both_directions() -> None:
    ops = _ops(TwoLayerLM("lstm", bidirectional=True))
    call = parse_call(next(o["recurrent"] for o in ops if o.get("recurrent")))
    assert (call["directions"], call["layers"]) == (2, 2)
    fwd = sum(o["flops"] for o in ops if o.get("recurrent") and o["phase"] == "forward")
    # each direction of each layer: 2 B T 4H (I_l + H); layer 2 reads both directions (2H)
    assert fwd == sum(2 * 2 * 3 * 5 * 32 * (i + 8) for i in (6, 16))


def test_lstm_projections_stay_untagged() -> None:
    lstm = nn.LSTM(6, 8, proj_size=4, batch_first=True)

    class Proj(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = lstm

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lstm(x)[0].sum()

    rec = profile(Proj(), (torch.randn(2, 4, 6),), ops=True)
    assert not any(o.get("recurrent") for o in rec["ops"])
    assert rec["ops"]  # its ops are recorded, priced as ATen runs them


def test_cudnn_rows_of_one_lstm_layer_by_hand() -> None:
    # B = 2, T = 3, I = 5, H = 4: G = 16, N = 6, fp32
    call = parse_call(call_spec("lstm", call=0, seq=3, batch=2, input=5, hidden=4, layers=1,
                                directions=1, bias=1, dropout=0))
    fwd = cudnn_rows(call, "forward", "float32")
    assert [(r["op"], r["count"]) for r in fwd] == [("mm", 1), ("mm", 3), ("cudnn_lstm_cell", 3)]
    assert fwd[0]["flops"] == 2 * 6 * 5 * 16 and fwd[0]["shapes"] == "6x5;5x16"
    assert fwd[1]["flops"] == 2 * 2 * 4 * 16 and fwd[1]["shapes"] == "2x4;4x16"
    # the cell reads both products' gates (2 B G), the two biases (2 G) and c (B H); writes
    # h and c (2 B H) and the gates kept for backward (B G)
    assert fwd[2]["bytes_read"] == 4 * (2 * 2 * 16 + 2 * 16 + 2 * 4)
    assert fwd[2]["bytes_written"] == 4 * (2 * 2 * 4 + 2 * 16)
    # the host issues the first kernel (the _cudnn_rnn call); cuDNN launches the others
    assert "launch" not in fwd[0] and all(r["launch"] == "library" for r in fwd[1:])
    bwd = cudnn_rows(call, "backward", "float32")
    # backward: the data gradients (per step dh: 3 x 2 B G H; the input: 2 N G I) and the
    # weight gradients (W_ih: 2 G N I; W_hh: 2 G N H)
    flops = sum(r["flops"] * r["count"] for r in bwd)
    assert flops == 3 * 2 * 2 * 16 * 4 + 2 * 6 * 16 * 5 + 2 * 16 * 6 * 5 + 2 * 16 * 6 * 4
    assert sum(r["flops"] * r["count"] for r in fwd) == 2 * 6 * 5 * 16 + 3 * 2 * 2 * 4 * 16
    assert [r["op"] for r in bwd] == ["cudnn_lstm_cell_backward", "cudnn_lstm_cell_backward",
                                      "mm", "mm", "mm", "mm", "sum"]
    assert bwd[-1]["bytes_written"] == 4 * 2 * 16  # both bias gradients
    # the host issues the backward's first cell run; cuDNN the other T - 1 = 2 and the rest
    assert [(r["count"], r.get("launch")) for r in bwd[:2]] == [(1, None), (2, "library")]
    assert all(r["launch"] == "library" for r in bwd[2:])


def test_cudnn_rows_of_stacked_bidirectional_layers() -> None:
    call = parse_call(call_spec("gru", call=0, seq=7, batch=2, input=5, hidden=4, layers=2,
                                directions=2, bias=0, dropout=1))
    fwd = cudnn_rows(call, "forward", "float16")
    g, n = 12, 14
    # layer 2 reads both directions' outputs (D H = 8 wide) after dropout
    assert fwd[0]["shapes"] == f"{n}x5;5x{2 * g}"
    drop = [r for r in fwd if r["op"] == "dropout"]
    assert len(drop) == 1 and drop[0]["bytes_read"] == 2 * n * 8
    assert [r["shapes"] for r in fwd if r["count"] == 1 and r["op"] == "mm"] == \
        [f"{n}x5;5x{2 * g}", f"{n}x8;8x{2 * g}"]
    assert sum(r["count"] for r in fwd if r["op"] == "mm" and r["count"] == 7) == 4 * 7
    total = sum(r["flops"] * r["count"] for r in fwd)
    assert total == sum(2 * n * 2 * g * (i + 4) for i in (5, 8))


def test_as_cudnn_replaces_each_tagged_call_where_it_began() -> None:
    spec = call_spec("lstm", call=0, seq=3, batch=2, input=5, hidden=4, layers=1,
                     directions=1, bias=1, dropout=0)

    def row(op: str, phase: str, tag: str = "") -> dict:
        r = {"op": op, "phase": phase, "flops": 0, "bytes_read": 8, "bytes_written": 8,
             "bound": "memory", "dtype": "float32", "shapes": ""}
        return r | {"recurrent": tag} if tag else r

    ops = [row("embedding", "forward"), *(row("sigmoid_", "forward", spec) for _ in range(9)),
           row("nll_loss_forward", "forward"), *(row("mul", "backward", spec) for _ in range(9)),
           row("embedding_dense_backward", "backward")]
    rows, origin = as_cudnn(ops)
    names = [r["op"] for r in rows]
    assert names == ["embedding", "mm", "mm", "cudnn_lstm_cell", "nll_loss_forward",
                     "cudnn_lstm_cell_backward", "cudnn_lstm_cell_backward", "mm", "mm",
                     "mm", "mm", "sum", "embedding_dense_backward"]
    assert origin == [0, 1, 1, 1, 10, 11, 11, 11, 11, 11, 11, 11, 20]
    # the same table on a CPU keeps ATen's ops
    assert expand_ops(ops) == ops
    assert [r["op"] for r in expand_ops_origin(ops, gpu_library=True)[0]] == names


def test_gru_operator_rows_keep_their_flops_as_cudnn_kernels() -> None:
    b, t, i, h = 4, 50, 32, 16
    g = 3 * h
    shapes = f"{b}x{t}x{i};{g}x{i};{g}x{h};{g};{g}"
    fwd = {"op": "gru", "phase": "forward", "flops": 2 * b * t * g * (i + h), "bytes_read": 0,
           "bytes_written": 0, "dtype": "float32", "bound": "compute", "shapes": shapes}
    bwd = fwd | {"op": "gru_backward", "phase": "backward", "flops": 2 * fwd["flops"],
                 "shapes": f"{b}x{t}x{h};" + shapes}
    rows, _ = as_cudnn([fwd, bwd])
    for phase, row in (("forward", fwd), ("backward", bwd)):
        part = [r for r in rows if r["phase"] == phase]
        assert sum(r["flops"] * r["count"] for r in part) == row["flops"]
    # no recomputation of the forward in the backward (cuDNN keeps the gates), and no
    # per-step ATen cell ops: 3 forward kernels, 6 backward (its first cell run a row apart)
    assert len(rows) == 3 + 6 + 1


def test_a_gpu_issues_one_call_and_cudnn_launches_the_rest() -> None:
    gpu = load_catalog().gpu("V100")
    ops = _ops(TwoLayerLM("lstm"), batch=4, seq=30)
    rows, _ = expand_ops_origin(ops, gpu_library=True)
    r = compute.kernel_op_times(rows, gpu, "fp32")
    library = np.array([o.get("launch") == "library" for o in rows])
    assert library.any()
    assert np.allclose(r["host_s"][library], kernels.LIBRARY_LAUNCH_US * 1e-6)
    assert (r["host_s"][~library] > 20e-6).all()  # eager ops: the fitted floor, above 20 µs
    # the step is no shorter than the host's issuing nor than the GPU's busy time
    gpu_path = compute.ops_compute_s(ops, gpu, "fp32")
    step = gpu_path["compute_flop"] + gpu_path["compute_mem"]
    assert step >= float((r["host_s"] * r["count"]).sum()) - 1e-12
    assert step >= float((r["busy_s"] * r["count"]).sum()) - 1e-12
    # ATen's per-step cells issue every op from the host: 30 steps x 2 layers of them
    aten = compute.kernel_op_times(expand_ops(ops), gpu, "fp32")
    assert step < float((aten["host_s"] * aten["count"]).sum())


def test_curves_measured_on_cuda_run_cudnn_and_on_cpu_aten() -> None:
    ops = _ops(TwoLayerLM("gru"), batch=2, seq=20)
    base = {"gemm_intensity": np.array([1.0]), "gemm_flops_per_s": np.array([1e12]),
            "conv_intensity": np.array([1.0]), "conv_flops_per_s": np.array([1e12]),
            "elementwise_bytes": np.array([1.0]), "elementwise_bps": np.array([1e11]),
            "op_overhead_s": 20e-6}
    cpu = compute_breakdown(ops, Curves(**base))
    cuda = compute_breakdown(ops, Curves(**base, gpu_library=True))
    untagged = [{k: v for k, v in o.items() if k != "recurrent"} for o in ops]
    assert compute_breakdown(untagged, Curves(**base)) == cpu  # the tag changes nothing on a CPU
    # by hand, GRU of 2 layers, T = 20, dropout between them: the host issues the forward's
    # and the backward's first kernel; cuDNN launches the rest. Forward: 2 x (20 step GEMMs +
    # 20 cells) + 1 input GEMM of layer 2 + 1 dropout = 82; backward: 2 x (20 cells + 20 step
    # GEMMs + 1 input GEMM) + 1 dropout + 2 x (dW_ih, dW_hh, bias sum) - 1 (the first) = 88
    n_lib, n_eager = 82 + 88, 2 + sum(1 for o in ops if not o.get("recurrent"))
    assert cuda["ops"] == n_lib + n_eager < cpu["ops"]
    assert cuda["overhead"] == pytest.approx(n_eager * 20e-6 + n_lib * kernels.LIBRARY_LAUNCH_US
                                             * 1e-6)


def test_catalog_device_field_is_checked(tmp_path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[gpu.x]\nfp32_tflops = 1.0\nmem_bw_gbs = 10.0\ndevice = "tpu"\n')
    with pytest.raises(CatalogError, match=r"bad.toml.*gpu\.x.*'device' must be"):
        load_catalog([bad])
    good = tmp_path / "good.toml"
    good.write_text('[gpu.x]\nfp32_tflops = 1.0\nmem_bw_gbs = 10.0\ndevice = "cuda"\n')
    assert Curves.from_gpu(load_catalog([good]).gpu("x")).gpu_library


def test_a_module_called_twice_keeps_its_calls_apart() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(6, 6, batch_first=True)
            self.mid = nn.Linear(6, 7)
            self.back = nn.Linear(7, 6)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y, _ = self.lstm(x)
            y, _ = self.lstm(self.back(self.mid(y)))  # the same weights again
            return y.sum()

    ops = profile(Twice(), (torch.randn(3, 4, 6),), ops=True)["ops"]
    calls = [parse_call(o["recurrent"])["call"] if o.get("recurrent") else None for o in ops]
    bwd = [c for c, o in zip(calls, ops, strict=True) if o["phase"] == "backward"]
    # backward runs call 1, then the two linear layers (untagged), then call 0
    runs = [c for i, c in enumerate(bwd) if i == 0 or c != bwd[i - 1]]
    assert runs[:4] == [None, 1, None, 0]
    between = [o for c, o in zip(calls, ops, strict=True) if o["phase"] == "backward" and c is None
               and o["op"] == "mm"]
    assert {o["shapes"] for o in between} >= {"12x6;6x7", "7x12;12x6"}  # the linears' products
    # each call's forward: 2 B T 4H (I + H) = 2 * 3 * 4 * 24 * 12
    for k in (0, 1):
        assert sum(o["flops"] for c, o in zip(calls, ops, strict=True)
                   if c == k and o["phase"] == "forward") == 2 * 3 * 4 * 24 * 12


def test_cpu_fallback_tags_the_call_at_its_rows_batch() -> None:
    from traincast.features.recurrent import extrapolated_call

    # rows extrapolated from batch 1 and 2 to 16: the call's batch with them, the rest as is
    one, two = (call_spec("lstm", call=0, seq=5, batch=b, input=6, hidden=8, layers=1,
                          directions=1, bias=1, dropout=0) for b in (1, 2))
    full = parse_call(extrapolated_call(one, two, lambda a, b: round(a + (b - a) * 15)))
    assert (full["batch"], full["seq"], full["input"], full["hidden"]) == (16, 5, 6, 8)

    class NeedsValues(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(6, 8, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            scale = float(x.abs().max().item())  # a float read: meta cannot answer it
            return (self.lstm(x / (1.0 + scale))[0]).sum()

    # profiled at batch 2 and 3 (batch 1 adds no input copy: another op sequence), the rows
    # and the call extrapolated to 16 (a real CPU runs the call as one fused
    # mkldnn_rnn_layer, tagged too)
    rec = profile(NeedsValues(), (torch.randn(16, 5, 6),), ops=True)
    assert rec["method"] == "cpu-extrapolated"
    assert "at batch 2 and 3 and extrapolated linearly to batch 16" in rec["notes"][0]
    tagged = [o for o in rec["ops"] if o.get("recurrent")]
    assert {parse_call(o["recurrent"])["batch"] for o in tagged} == {16}
    assert any(o["op"] == "mkldnn_rnn_layer" for o in tagged)


def test_a_gpu_marks_cudnn_gemms_compute_bound_and_cells_memory_bound() -> None:
    gpu = load_catalog().gpu("H200")
    ops = _ops(TwoLayerLM("lstm"), batch=4, seq=12)
    rows, _ = expand_ops_origin(ops, gpu_library=True)
    # the profiler marks products compute-bound and the rest memory-bound: so do cuDNN's rows
    for o in rows:
        if o.get("launch") or o["op"].startswith("cudnn_"):
            assert o["bound"] == ("compute" if o["op"] == "mm" else "memory"), o
    # and the GPU's busy time on marked rows is that of its products
    r = compute.kernel_op_times(rows, gpu, "fp32")
    products = np.array([o["op"] in ("mm", "addmm") for o in rows])
    expected = float((r["busy_s"] * r["count"])[products].sum())
    assert compute.ops_compute_s(ops, gpu, "fp32")["busy_marked"] == pytest.approx(expected)


def test_features_files_keep_the_tag_and_refuse_a_bad_one(tmp_path) -> None:
    import json

    from traincast.errors import TraincastError
    from traincast.features.io import load_features, write_features

    ids = torch.randint(0, 50, (3, 5))
    rec = profile(TwoLayerLM("gru"), (ids,), ops=True)
    tagged = sum(1 for o in rec["ops"] if o.get("recurrent"))
    for name in ("f.json", "f.parquet"):
        back = load_features(write_features(rec, tmp_path / name))
        assert sum(1 for o in back["ops"] if o.get("recurrent")) == tagged
        assert as_cudnn(back["ops"])[0] == as_cudnn(rec["ops"])[0]
    rec["ops"][7]["recurrent"] = "gru call=0 seq=five"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(rec))
    with pytest.raises(TraincastError, match=r"bad.json: ops row 8: field 'recurrent'"):
        load_features(bad)
