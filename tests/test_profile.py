"""Profiling a training step on meta: FLOPs and bytes against hand formulas, phases, memory."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from traincast.errors import TraincastError  # noqa: E402
from traincast.features.ops import OpRecord, fused_memory_bytes  # noqa: E402
from traincast.features.profile import profile  # noqa: E402

F32 = 4  # bytes per fp32 element


def rows(rec: dict, op: str, phase: str | None = None) -> list[dict]:
    return [r for r in rec["ops"] if r["op"] == op and (phase is None or r["phase"] == phase)]


class Lambda(nn.Module):
    def __init__(self, fn, *params: nn.Parameter) -> None:
        super().__init__()
        self.fn = fn
        self.ps = nn.ParameterList(params)

    def forward(self, *xs):
        return self.fn(*xs, *self.ps)


def test_linear_flops_forward_and_backward() -> None:
    b, n_in, n_out = 32, 64, 48
    rec = profile(nn.Linear(n_in, n_out), torch.randn(b, n_in), ops=True)
    (fwd,) = rows(rec, "addmm", "forward")
    assert fwd["flops"] == 2 * b * n_in * n_out
    assert rec["flops_forward"] == 2 * b * n_in * n_out
    # input needs no gradient: backward is the weight gradient only, one more GEMM
    assert [r["flops"] for r in rows(rec, "mm", "backward")] == [2 * b * n_in * n_out]
    assert rec["flops_compute_bound"] == 4 * b * n_in * n_out
    # the addmm reads x, W, bias and writes y
    assert fwd["bytes_read"] == (b * n_in + n_in * n_out + n_out) * F32
    assert fwd["bytes_written"] == b * n_out * F32
    assert fwd["bound"] == "compute"


def test_linear_input_gradient_doubles_backward() -> None:
    b, n_in, n_out = 8, 16, 24
    x = torch.randn(b, n_in, requires_grad=True)
    rec = profile(nn.Linear(n_in, n_out, bias=False), x)
    assert rec["flops_compute_bound"] == 3 * 2 * b * n_in * n_out


@pytest.mark.parametrize("groups", [1, 8])
def test_conv2d_flops(groups: int) -> None:
    n, c_in, c_out, h, w, k = 2, 8, 16, 10, 12, 3
    x = torch.randn(n, c_in, h, w, requires_grad=True)
    rec = profile(nn.Conv2d(c_in, c_out, k, stride=2, padding=1, groups=groups), x, ops=True)
    h_out, w_out = (h + 2 - k) // 2 + 1, (w + 2 - k) // 2 + 1  # 5, 6
    forward = 2 * n * c_out * h_out * w_out * (c_in // groups) * k * k
    assert [r["flops"] for r in rows(rec, "convolution", "forward")] == [forward]
    # input gradient + weight gradient, each the forward's cost
    assert [r["flops"] for r in rows(rec, "convolution_backward")] == [2 * forward]


def test_batched_matmul_flops() -> None:
    b, m, k, n = 3, 5, 7, 11
    weight = nn.Parameter(torch.randn(k, n))
    rec = profile(Lambda(lambda x, w: torch.matmul(x, w), weight), torch.randn(b, m, k))
    assert rec["flops_forward"] == 2 * b * m * k * n


def test_attention_forward_and_backward_flops() -> None:
    b, h, s, d = 2, 4, 64, 16
    q, k, v = (torch.randn(b, h, s, d, requires_grad=True) for _ in range(3))
    rec = profile(Lambda(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)), (q, k, v),
                  ops=True)
    fwd = [r for r in rec["ops"] if "attention" in r["op"] and r["phase"] == "forward"]
    bwd = [r for r in rec["ops"] if "attention" in r["op"] and r["phase"] == "backward"]
    # forward: S = Q K^T and O = P V, each 2 b h s s d
    assert [r["flops"] for r in fwd] == [2 * (2 * b * h * s * s * d)]
    # backward: the fused kernel stored no P, so it recomputes S = Q K^T, then dV = P^T dO,
    # dP = dO V^T, dQ = dS K, dK = dS^T Q: five products of 2 b h s s d
    assert [r["flops"] for r in bwd] == [5 * (2 * b * h * s * s * d)]
    assert all(r["bound"] == "compute" for r in fwd + bwd)
    # the fused kernel never stores the s x s score matrix
    assert fwd[0]["bytes_written"] < b * h * s * s * F32


def test_elementwise_add_bytes() -> None:
    n = 1000
    p = nn.Parameter(torch.randn(n))
    rec = profile(Lambda(lambda x, p: x + p, p), torch.randn(n), ops=True)
    (add,) = rows(rec, "add", "forward")
    assert add["bytes_read"] + add["bytes_written"] == 3 * n * F32
    assert add["bound"] == "memory"


def test_broadcast_operand_is_read_once_and_views_are_free() -> None:
    b, n = 16, 100
    p = nn.Parameter(torch.randn(n))
    rec = profile(Lambda(lambda x, p: (x.view(b, n).t().t() + p), p), torch.randn(b * n),
                  ops=True)
    (add,) = rows(rec, "add", "forward")
    assert add["bytes_read"] == (b * n + n) * F32
    assert not rows(rec, "view") and not rows(rec, "t")


def test_inplace_op_costs_its_read_and_write() -> None:
    n = 256
    lin = nn.Linear(n, n)
    rec = profile(nn.Sequential(lin, nn.ReLU(inplace=True)), torch.randn(4, n), ops=True)
    (relu,) = rows(rec, "relu_", "forward")
    assert relu["bytes_read"] == relu["bytes_written"] == 4 * n * F32


def test_phases_and_optimizer_state() -> None:
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
    weights = sum(p.numel() for p in model.parameters()) * F32
    adam = profile(model, torch.randn(4, 32), ops=True)
    sgd = profile(model, torch.randn(4, 32), optimizer="sgd", ops=True)
    assert {r["phase"] for r in adam["ops"]} == {"forward", "backward", "optimizer"}
    assert adam["memory_bytes"]["weights"] == adam["memory_bytes"]["grads"] == weights
    assert adam["memory_bytes"]["optimizer"] == 2 * weights  # exp_avg, exp_avg_sq
    assert sgd["memory_bytes"]["optimizer"] == weights  # momentum buffer
    # Adam's update reads and writes more state than SGD's
    opt_bytes = [sum(r["bytes_read"] + r["bytes_written"] for r in rec["ops"]
                     if r["phase"] == "optimizer") for rec in (adam, sgd)]
    assert opt_bytes[0] > opt_bytes[1] > 0
    assert all(r["bound"] == "memory" for r in adam["ops"] if r["phase"] == "optimizer")
    assert adam["weight_bytes"] == weights
    with pytest.raises(TraincastError):
        profile(model, torch.randn(4, 32), optimizer="lamb")


def test_frozen_weights_exchange_no_gradient() -> None:
    model = nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 4))
    model[0].requires_grad_(False)
    rec = profile(model, torch.randn(2, 16))
    assert rec["weight_bytes"] == (16 * 4 + 4) * F32
    assert rec["memory_bytes"]["weights"] == (16 * 16 + 16 + 16 * 4 + 4) * F32
    assert rec["memory_bytes"]["optimizer"] == 2 * (16 * 4 + 4) * F32


def test_activation_memory_is_what_backward_keeps() -> None:
    b, n = 8, 128
    model = nn.Sequential(nn.Linear(n, n), nn.ReLU(), nn.Linear(n, n))
    rec = profile(model, torch.randn(b, n))
    # kept for backward: ReLU's output (for its own backward and the second Linear's weight
    # gradient); the input and the weights are not activations
    assert rec["memory_bytes"]["activations"] == b * n * F32


def test_original_model_is_left_untouched() -> None:
    model = nn.Linear(4, 4)
    before = model.weight.detach().clone()
    profile(model, torch.randn(2, 4))
    assert model.weight.device.type == "cpu" and torch.equal(model.weight.detach(), before)
    assert model.weight.grad is None


def test_amp_runs_matrix_ops_in_half_precision() -> None:
    model = nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64), nn.Linear(64, 64))
    x = torch.randn(32, 64)
    fp32 = profile(model, x, ops=True)
    amp = profile(model, x, amp=True, ops=True)
    assert amp["amp"] and amp["dtype"] == "float16"
    assert {r["dtype"] for r in rows(amp, "addmm", "forward")} == {"float16"}
    assert {r["dtype"] for r in rows(amp, "native_layer_norm")} == {"float32"}
    assert rows(amp, "_to_copy")  # the casts themselves are ops
    assert amp["flops_compute_bound"] == fp32["flops_compute_bound"]
    assert sum(r["bytes_read"] for r in rows(amp, "addmm", "forward")) < \
        sum(r["bytes_read"] for r in rows(fp32, "addmm", "forward"))


class TwoTables(nn.Module):
    def __init__(self, sparse: bool, **kw: object) -> None:
        super().__init__()
        self.items = nn.Embedding(1000, 8, sparse=sparse, **kw)  # type: ignore[arg-type]
        self.head = nn.Linear(8, 1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.items(ids + 10)).sum()


def test_embedding_rows_touched_from_real_ids() -> None:
    ids = torch.tensor([[1, 2, 2, 3], [3, 3, 4, 5]])  # 5 distinct ids, 8 lookups
    rec = profile(TwoTables(sparse=True), ids, ops=True)
    assert rec["embedding_rows_touched"] == {"items.weight": 5}
    assert rec["embedding_bytes_touched"] == 5 * 8 * F32
    assert rec["embedding_allreduce_bytes"] == 5 * 8 * F32  # sparse gradient: the rows
    assert rec["params_embedding"] == 8000
    assert rec["weight_bytes"] == (8 + 1) * F32
    (lookup,) = rows(rec, "embedding", "forward")
    assert lookup["bytes_read"] == 8 * 8 * F32 + ids.numel() * 8  # 8 rows + the int64 ids
    update = rows(rec, "sparse_embedding_update", "optimizer")
    assert len(update) == 1 and update[0]["bytes_written"] == (5 + 3 * 5) * 8 * F32


class Bag(nn.Module):
    """EmbeddingBag(1000, 16) summing each row of ids, then a Linear(16, 1)."""

    def __init__(self, sparse: bool, **kw: object) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(1000, 16, mode="sum", sparse=sparse, **kw)  # type: ignore
        self.head = nn.Linear(16, 1)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.bag(ids)).sum()


BAG_IDS = torch.tensor([[1, 2, 2, 3], [3, 3, 4, 999]])  # 8 lookups, 5 unique rows
ROW = 16 * F32  # bytes of one row


@pytest.mark.parametrize("sparse", [False, True])
def test_embedding_bag_is_a_table_whatever_its_gradient(sparse: bool) -> None:
    rec = profile(Bag(sparse), BAG_IDS, ops=True)
    assert rec["params_embedding"] == 16_000 and rec["params_dense"] == 17
    assert rec["weight_bytes"] == (16 + 1) * F32  # the Linear only
    assert rec["embedding_rows_touched"] == {"bag.weight": 5}
    # rows whose gradient is exchanged: the 5 unique rows, not the 8 lookups
    assert rec["embedding_bytes_touched"] == 5 * ROW
    # an AllReduce of a dense gradient moves the whole table (as DDP does); sparse: the rows
    assert rec["embedding_allreduce_bytes"] == (5 * ROW if sparse else 1000 * ROW)
    # the lookup reads one row per lookup, the int64 ids and the 2 bag offsets
    (lookup,) = rows(rec, "_embedding_bag", "forward")
    assert lookup["bytes_read"] == 8 * ROW + 8 * 8 + 2 * 8


def test_dense_embedding_is_a_table_with_a_dense_gradient() -> None:
    ids = torch.tensor([[1, 2, 2, 3]])
    rec = profile(TwoTables(sparse=False), ids, ops=True)
    assert rec["params_embedding"] == 8000 and rec["weight_bytes"] == (8 + 1) * F32
    assert rec["embedding_rows_touched"] == {"items.weight": 3}
    assert rec["embedding_bytes_touched"] == 3 * 8 * F32
    assert rec["embedding_allreduce_bytes"] == 8000 * F32
    # its backward writes a gradient over every row
    (grad,) = rows(rec, "embedding_dense_backward")
    assert grad["bytes_written"] == 8000 * F32


def test_padding_row_is_not_a_row_touched() -> None:
    # ids 1, 2, 3, 4, 999 and the padding id 0: its gradient is always zero, never exchanged
    ids = torch.tensor([[1, 2, 0, 3], [3, 0, 4, 999]])
    rec = profile(Bag(False, padding_idx=0), ids)
    assert rec["embedding_rows_touched"] == {"bag.weight": 5}
    assert rec["embedding_bytes_touched"] == 5 * ROW


def test_max_norm_renormalizes_only_the_rows_looked_up() -> None:
    rec = profile(TwoTables(sparse=False, max_norm=1.0), torch.tensor([[1, 2, 2, 3]]), ops=True)
    (renorm,) = rows(rec, "embedding_renorm_")
    assert renorm["bytes_written"] == 4 * 8 * F32  # one row per index, not the 8000-row table
    assert rec["params_embedding"] == 8000 and rec["embedding_rows_touched"] == {"items.weight": 3}


class TiedLM(nn.Module):
    """Token table tied to the output projection (GPT-2's layout) plus a position table."""

    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(100, 8)
        self.wpe = nn.Embedding(16, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        return F.linear(x, self.wte.weight).logsumexp(-1).sum()


def test_a_table_tied_to_the_output_layer_is_a_dense_weight() -> None:
    rec = profile(TiedLM(), torch.tensor([[5, 6, 6, 7]]))
    assert rec["embedding_tables_shared"] == ["wte.weight"]
    assert rec["params_embedding"] == 16 * 8  # wpe only
    assert rec["weight_bytes"] == 100 * 8 * F32  # wte: its gradient covers every row
    assert rec["embedding_bytes_touched"] == 4 * 8 * F32  # 4 positions of wpe
    assert rec["embedding_allreduce_bytes"] == 16 * 8 * F32  # wpe, dense gradient


def test_embedding_ids_without_values_give_an_upper_bound() -> None:
    ids = torch.empty(2, 4, dtype=torch.long, device="meta")
    rec = profile(TwoTables(sparse=True), ids)
    assert rec["embedding_rows_touched"] == {"items.weight": 8}
    assert any("bounded" in note for note in rec["notes"])


def _record(op: str, reads: list, writes: list, pointwise: bool = True,
            phase: str = "forward") -> OpRecord:
    return OpRecord(op, phase, 0, sum(b for _, b in reads), sum(b for _, b, _ in writes),
                    "memory", pointwise, "float32", "", reads, writes)


def test_fusion_drops_only_intermediates() -> None:
    n = 100 * F32
    # y = relu(x * 2 + 1): values 1 = x, 2 = x*2, 3 = +1, 4 = relu; backward reads 4
    recs = [_record("mul", [(1, n)], [(2, n, True)]),
            _record("add", [(2, n)], [(3, n, True)]),
            _record("relu", [(3, n)], [(4, n, True)]),
            _record("threshold_backward", [(4, n), (5, n)], [(6, n, True)], phase="backward")]
    unfused = sum(r.bytes_read + r.bytes_written for r in recs)
    assert unfused == (2 + 2 + 2 + 3) * n
    # forward kernel: read x, write relu's output (read later); backward kernel unchanged
    assert fused_memory_bytes(recs) == 2 * n + 3 * n
    # a reduction after the mul breaks the chain: mul's output is stored (the sum reads it);
    # add + relu still fuse, dropping only add's output (written n, read n)
    recs.insert(1, _record("sum", [(2, n)], [(7, F32, True)], pointwise=False))
    unfused = sum(r.bytes_read + r.bytes_written for r in recs)
    assert fused_memory_bytes(recs) == unfused - 2 * n


def test_fusion_keeps_in_place_updates() -> None:
    n = 10 * F32
    # optimizer: p.mul_(a); p.add_(g) — the parameter is mutated, so it is written once
    recs = [_record("mul_", [(1, n)], [(1, n, False)], phase="optimizer"),
            _record("add_", [(1, n), (2, n)], [(1, n, False)], phase="optimizer")]
    assert fused_memory_bytes(recs) == 2 * n + n


def test_model_failing_on_meta_falls_back_to_cpu_and_extrapolates() -> None:
    b, n_in, n_out = 6, 10, 5
    lin = nn.Linear(n_in, n_out)

    def fn(x, *params):
        y = lin(x)
        return (y / (y.abs().max().item() + 1.0)).sum()  # .item() needs data

    model = Lambda(fn)
    model.lin = lin
    rec = profile(model, torch.randn(b, n_in))
    assert rec["method"] == "cpu-extrapolated"
    assert any("extrapolated linearly" in note for note in rec["notes"])
    assert rec["batch_size"] == b
    assert rec["flops_forward"] == 2 * b * n_in * n_out  # exact: FLOPs are linear in batch
    assert rec["input_bytes"] == b * n_in * F32


def test_meta_capture_matches_a_real_cpu_run() -> None:
    from traincast.features.profile import _capture_step, _on_meta

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Flatten(), nn.Linear(8 * 6 * 6, 10), nn.LogSoftmax(-1))
    x = torch.randn(4, 3, 6, 6)
    meta = _capture_step(_on_meta(model), (x,), "meta", "adam", False)
    cpu = _capture_step(model, (x,), "cpu", "adam", False)  # really computes

    def key(records):
        return [(r.op, r.phase, r.flops, r.bytes_read, r.bytes_written) for r in records]

    assert key(meta["records"]) == key(cpu["records"])
    assert meta["activations"] == cpu["activations"] > 0
    assert meta["optimizer"] == cpu["optimizer"]


def test_keyword_inputs_as_a_dict() -> None:
    class Pair(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 2)

        def forward(self, x: torch.Tensor, *, scale: torch.Tensor) -> torch.Tensor:
            return (self.lin(x) * scale).sum()

    rec = profile(Pair(), {"x": torch.randn(3, 4), "scale": torch.randn(3, 2)})
    assert rec["batch_size"] == 3 and rec["flops_forward"] == 2 * 3 * 4 * 2
    assert rec["input_bytes"] == (3 * 4 + 3 * 2) * F32


def test_meta_built_model_falls_back_with_fresh_weights() -> None:
    class DataDependent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.lin(x)
            return y.sum() / (1.0 + y.abs().max().item())

    with torch.device("meta"):
        model = DataDependent()
    rec = profile(model, torch.randn(7, 8))
    assert rec["method"] == "cpu-extrapolated"
    assert rec["flops_forward"] == 2 * 7 * 8 * 3
    assert model.lin.weight.device.type == "meta"  # the caller's model is untouched


def test_inputs_nested_in_a_dict_reach_the_device_with_their_values() -> None:
    class DictBatch(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(100, 8)
            self.lin = nn.Linear(8 + 5, 1)

        def forward(self, batch: dict) -> torch.Tensor:
            pooled = self.emb(batch["ids"]).mean(1)
            return self.lin(torch.cat([pooled, batch["feat"]], 1)).mean()

    b, n_ids = 4, 7
    ids = torch.arange(b * n_ids).reshape(b, n_ids) % 10  # 10 distinct rows
    rec = profile(DictBatch(), ({"ids": ids, "feat": torch.randn(b, 5)},))
    assert rec["method"] == "meta" and rec["batch_size"] == b
    assert rec["input_bytes"] == b * n_ids * 8 + b * 5 * F32
    assert rec["embedding_rows_touched"] == {"emb.weight": 10}
    assert rec["flops_forward"] == 2 * b * 13 * 1


def test_nested_outputs_all_enter_the_loss() -> None:
    # the weight is the model's parameter (a closure's module would stay on the CPU and send
    # the step to the CPU fallback)
    model = Lambda(lambda x, w: (x @ w, [(2 * x) @ w], {"c": (3 * x) @ w, "i": x.argmax(1)}),
                   nn.Parameter(torch.randn(6, 3)))
    rec = profile(model, torch.randn(5, 6))
    assert rec["method"] == "meta"
    forward = 3 * 2 * 5 * 6 * 3  # three products of 5 x 6 by 6 x 3
    assert rec["flops_forward"] == forward
    assert rec["flops_compute_bound"] == 2 * forward  # each one's weight gradient: all trained


def test_an_output_without_a_gradient_is_a_clear_error() -> None:
    model = Lambda(lambda x, w: (x @ w).argmax(1), nn.Parameter(torch.randn(4, 3)))
    with pytest.raises(TraincastError, match="without a gradient"):
        profile(model, torch.randn(2, 4))


def test_host_reads_of_integer_inputs_see_their_values_on_meta() -> None:
    # .item() of a value computed from the ids (a padding check) and the CPU lengths that
    # pack_padded_sequence takes are device-to-host reads of real values: no CPU fallback
    from torch.nn.utils.rnn import pack_padded_sequence

    class Packed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(50, 8)
            self.lstm = nn.LSTM(8, 16, batch_first=True)

        def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            if (ids == 0).any():  # never true here: ids start at 1
                ids = ids.clamp(min=1)
            packed = pack_padded_sequence(self.emb(ids), lengths.cpu(), batch_first=True,
                                          enforce_sorted=False)
            return self.lstm(packed)[0].data.sum()

    lengths = torch.tensor([9, 4, 6])
    ids = torch.arange(1, 28).reshape(3, 9)
    rec = profile(Packed(), (ids, lengths))
    assert rec["method"] == "meta"
    # the LSTM runs only the valid steps: 2 (4H (I + H)) FLOPs per token and step
    tokens, i, h = int(lengths.sum()), 8, 16
    assert rec["flops_forward"] == 2 * tokens * 4 * h * (i + h)
    assert rec["embedding_rows_touched"] == {"emb.weight": 27}


def test_cpu_fallback_keeps_tied_weights_tied() -> None:
    class TiedLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(300, 16)
            self.out = nn.Linear(16, 300, bias=False)
            self.out.weight = self.emb.weight  # one matrix, two modules

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            logits = self.out(self.emb(ids))
            return logits.logsumexp(-1).mean() / (1.0 + logits.abs().max().item())  # data

    with torch.device("meta"):
        model = TiedLM()
    rec = profile(model, torch.randint(0, 300, (2, 5)))
    assert rec["method"] == "cpu-extrapolated"
    assert rec["params"] == 300 * 16  # counted once, as the model holds it
    assert rec["memory_bytes"]["weights"] == 300 * 16 * F32
    assert rec["embedding_tables_shared"] == ["emb.weight"]


def test_masks_from_constants_and_list_indices_keep_their_values_on_meta() -> None:
    class Checks(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(50, 8)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            mask = torch.ones(ids.shape, device=ids.device)  # float, from a constant
            if mask.sum() != mask.numel():  # the all-ones test of attention-mask code
                raise AssertionError("the mask lost its values")
            if 0 in ids[:, [-1, 0]]:  # a padding check on a list index: ids start at 1
                raise AssertionError("the index lost its values")
            return (self.emb(ids) * mask[..., None]).sum()

    rec = profile(Checks(), torch.arange(1, 13).reshape(3, 4))
    assert rec["method"] == "meta" and rec["embedding_rows_touched"] == {"emb.weight": 12}


def _add_in_place(buf: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    buf += y
    return buf


def _through_a_view_read_by_the_base(buf: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    buf[:2] = y[:2]
    return buf


def _base_read_by_a_view(buf: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    view = buf[:2]
    buf.copy_(y)
    return view


def _view_read_by_a_view_of_a_view(buf: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    rows = buf.view(2, 2)
    first = rows[0]
    rows[1].mul_(y[:2])  # zeros times anything: still zeros, but no shadow can know that
    rows[0].add_(y[2:])
    return first


def _out_argument(buf: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    torch.add(y.detach(), 1.0, out=buf)
    return buf


@pytest.mark.parametrize("overwrite", [_add_in_place, _through_a_view_read_by_the_base,
                                       _base_read_by_a_view, _view_read_by_a_view_of_a_view,
                                       _out_argument])
def test_a_shadow_overwritten_without_values_is_dropped_not_stale(overwrite) -> None:
    # a buffer of known values (zeros) overwritten by data-dependent ones, in place, through
    # a view, or by out=: no tensor of its storage may answer .item() with the old zeros
    def fn(x, w):  # w: the model's own weight (its meta copy on meta, not a closure's)
        buf = torch.zeros(4, device=x.device)
        read = overwrite(buf, (x @ w).sum(0))
        return (x @ w).sum() * (2.0 if read.sum().item() > -1e30 else 0.0)

    rec = profile(Lambda(fn, nn.Parameter(torch.randn(4, 4))), torch.randn(3, 4))
    assert rec["method"] == "cpu-extrapolated"  # not a meta run that read the stale zeros
    assert "item()" in rec["notes"][0]  # the read, not another failure, left meta


def test_in_place_ops_on_known_values_stay_on_meta_and_leave_the_callers_inputs() -> None:
    # ids.add_(1) on the device copy of the input: its values follow (rows 1..12 are looked
    # up, so 12 rows), and the caller's CPU tensor is not written
    class Shift(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(100, 4)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            ids.view(-1).add_(1)
            if int(ids.min()) != 1:
                raise AssertionError("the in-place shift is not in the values")
            return self.emb(ids).sum()

    ids = torch.arange(12).reshape(3, 4)
    rec = profile(Shift(), ids)
    assert rec["method"] == "meta" and rec["embedding_rows_touched"] == {"emb.weight": 12}
    assert torch.equal(ids, torch.arange(12).reshape(3, 4))


def test_transposed_and_3d_convolutions_by_formula() -> None:
    # ConvTranspose2d(c_in, c_out, k, stride k): every input pixel meets every weight once,
    # c_in c_out k^2 H W MACs; Conv3d: c_out T' H' W' c_in k^3 MACs
    n, c_in, c_out, h, w = 2, 6, 4, 5, 7
    up = nn.ConvTranspose2d(c_in, c_out, 2, stride=2)
    rec = profile(up, torch.randn(n, c_in, h, w, requires_grad=True))
    forward = 2 * n * c_in * c_out * 4 * h * w
    assert rec["flops_forward"] == forward
    assert rec["flops_compute_bound"] == 3 * forward  # input and weight gradients
    t = 4
    vol = nn.Conv3d(3, 8, 3, padding=1)
    rec = profile(vol, torch.randn(n, 3, t, h, w))
    forward = 2 * n * 8 * t * h * w * 3 * 27
    assert rec["flops_forward"] == forward
    assert rec["flops_compute_bound"] == 2 * forward  # the input needs no gradient


@pytest.mark.parametrize("container", ["UserDict", "BatchEncoding"])
def test_inputs_in_mappings_torch_does_not_open_are_found(container: str) -> None:
    # a tokenizer's BatchEncoding (a UserDict) inside the positional inputs: its ids reach the
    # device with their values, count in the input bytes and give the batch; on the CPU
    # fallback (a float .item()) they are sliced to batch 1 and 2 like any input
    from collections import UserDict

    from transformers import BatchEncoding

    kind = UserDict if container == "UserDict" else BatchEncoding

    class Pooled(nn.Module):
        def __init__(self, data_dependent: bool) -> None:
            super().__init__()
            self.emb = nn.Embedding(50, 8)
            self.data_dependent = data_dependent

        def forward(self, batch) -> torch.Tensor:
            out = self.emb(batch["ids"]).sum()
            return out / (1 + out.abs().item()) if self.data_dependent else out

    b, s = 3, 4
    ids = torch.arange(b * s).reshape(b, s)
    rec = profile(Pooled(False), (kind({"ids": ids}),))
    assert rec["method"] == "meta" and rec["batch_size"] == b
    assert rec["input_bytes"] == b * s * 8
    assert rec["embedding_rows_touched"] == {"emb.weight": b * s}
    rec = profile(Pooled(True), (kind({"ids": ids}),))
    assert rec["method"] == "cpu-extrapolated" and rec["batch_size"] == b
    assert rec["input_bytes"] == b * s * 8  # sliced to 1 and 2 rows, extrapolated to 3


def test_dropout_is_fused_for_a_gpu_and_decomposed_for_a_cpu() -> None:
    # a 64 x 256 fp32 activation through nn.Dropout(0.1) in training: on a GPU one fused kernel
    # reads it (4 B/elem) and writes the output and a 1-byte mask (5 B/elem); a CPU draws a float
    # mask (bernoulli_), scales it (div_) and multiplies (mul)
    model = nn.Sequential(nn.Linear(256, 256), nn.Dropout(0.1), nn.Linear(256, 10))
    x = torch.randn(64, 256)
    gpu = [r for r in profile(model, x, ops=True)["ops"] if r["phase"] == "forward"]
    fused = [r for r in gpu if r["op"] == "native_dropout"]
    assert len(fused) == 1 and not [r for r in gpu if r["op"] == "bernoulli_"]
    assert fused[0]["bytes_read"] == 4 * 64 * 256 and fused[0]["bytes_written"] == 5 * 64 * 256
    cpu = [r for r in profile(model, x, ops=True, fused_dropout=False)["ops"]
           if r["phase"] == "forward"]
    assert {"bernoulli_", "div_", "mul"} <= {r["op"] for r in cpu}
    assert not [r for r in cpu if r["op"] == "native_dropout"]


class Experts(nn.Module):
    """Top-1 routing over ``k`` 4 x 4 experts by the first feature (its rounded value), an
    expert no sample picks skipped: ``nonzero`` has no meta kernel, so profiles fall back to
    the CPU, where the ops depend on the data."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.experts = nn.ModuleList(nn.Linear(4, 4, bias=False) for _ in range(k))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(x)
        for e, layer in enumerate(self.experts):
            rows = torch.nonzero(x[:, 0].round() == e).squeeze(1)
            if rows.numel():
                out = out.index_add(0, rows, layer(x[rows]))
        return out.sum()


def test_a_fallback_whose_ops_depend_on_the_data_keeps_no_per_op_table() -> None:
    # at batch 2 and 3 the forward runs different experts, so no affine rule holds; the
    # aggregates are 3's scaled per sample, and no per-op table is kept (batch 3's rows would
    # be priced as 64)
    x = torch.ones(64, 4)
    x[:2, 0] = 0.0  # samples 0-1 go to expert 0; the rest, from the third on, to expert 1
    rec = profile(Experts(2), x, ops=True)
    assert rec["method"] == "cpu-extrapolated" and "ops" not in rec
    assert "whose op sequences differ" in rec["notes"][0]
    # batch 3: expert 0 on 2 samples, expert 1 on 1, each a 4 x 4 product forward (2 FLOPs a
    # multiply-add) and its weight gradient backward: 3 samples x 2 x 16 x 2 FLOPs
    assert rec["flops_compute_bound"] == round(3 * 2 * 16 * 2 * 64 / 3)
    # what does not see the batch stays: the gradients of the two 4 x 4 weights, and the
    # optimizer step is not scaled: with SGD, the extrapolated step moves exactly the bytes
    # of SGD's step on two 4 x 4 weights more than with no optimizer
    assert rec["memory_bytes"]["grads"] == rec["memory_bytes"]["weights"] == 2 * 16 * F32
    two = nn.Sequential(nn.Linear(4, 4, bias=False), nn.Linear(4, 4, bias=False))
    sgd_step = sum(o["bytes_read"] + o["bytes_written"]
                   for o in profile(two, torch.ones(8, 4), optimizer="sgd", ops=True)["ops"]
                   if o["phase"] == "optimizer")
    assert sgd_step > 0
    with_sgd, without = (profile(Experts(2), x, optimizer=o)["bytes_memory_bound"]
                         for o in ("sgd", "none"))
    assert with_sgd - without == sgd_step


def test_a_fallback_touches_no_more_rows_than_a_table_holds() -> None:
    # a sparse table with padding_idx runs on CPU: 1000 rows, 4096 samples of 50 ids: the rows
    # touched stop at the table's size, and the sparse gradient (one row and its int64 index
    # per lookup) grows with the batch
    class Bag(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(1000, 16, padding_idx=0, sparse=True)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.emb(ids).sum()

    ids = torch.randint(1, 1000, (4096, 50), generator=torch.Generator().manual_seed(0))
    rec = profile(Bag(), ids, optimizer="sgd")
    assert rec["method"] == "cpu-extrapolated"
    assert rec["embedding_rows_touched"] == {"emb.weight": 1000}
    assert rec["embedding_bytes_touched"] == 1000 * 16 * F32
    assert rec["memory_bytes"]["grads"] == pytest.approx(4096 * 50 * (16 * F32 + 8), rel=0.01)


def test_a_fill_shaped_like_a_tensor_reads_nothing() -> None:
    # zeros_like / ones_like / full_like / new_zeros take their input's shape alone: they
    # write the new tensor (64 x 1024 fp32) and read nothing
    class Fills(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(1024))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x * self.w
            return (y + torch.zeros_like(y) + torch.full_like(y, 2.0) + y.new_ones(y.shape)).sum()

    rec = profile(Fills(), torch.randn(64, 1024), ops=True)
    for op in ("zeros_like", "full_like", "new_ones"):
        (row,) = rows(rec, op, "forward")
        assert (row["bytes_read"], row["bytes_written"]) == (0, 64 * 1024 * F32), op


def test_a_fallback_gives_an_expert_no_sample_of_batch_3_picked_its_gradient_and_state() -> None:
    # three experts; samples 0-2 go to experts 0 and 1, the rest to expert 2: at the full
    # batch every expert trains, so the gradients are the three weights' (3 x 16 x 4 bytes)
    # and Adam's state two moments of each (2 x 192 bytes)
    x = torch.ones(64, 4)
    x[:2, 0], x[2, 0], x[3:, 0] = 0.0, 1.0, 2.0
    mem = profile(Experts(3), x)["memory_bytes"]
    assert (mem["grads"], mem["optimizer"]) == (3 * 16 * F32, 2 * 3 * 16 * F32)


def test_a_fallback_scales_a_sparse_gradient_per_sample_when_the_ops_differ() -> None:
    # a sparse table of 16-wide fp32 rows, 4 ids per sample, and a branch on the ids (no meta
    # kernel for nonzero): the sparse gradient is one row and its int64 index per lookup,
    # 64 x 4 x (16 x 4 + 8) bytes, plus the dense head's 17 weights
    class Branch(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(100_000, 16, sparse=True)
            self.lin = nn.Linear(16, 1)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            h = self.emb(ids).sum(1)
            rows = torch.nonzero(ids[:, 0] == 2).squeeze(1)
            if rows.numel():
                h = h.index_add(0, rows, h[rows])
            return self.lin(h).sum()

    ids = torch.arange(64 * 4).reshape(64, 4) * 7
    ids[:, 0] = torch.arange(64) % 3
    rec = profile(Branch(), ids, optimizer="sgd")
    assert rec["method"] == "cpu-extrapolated" and "op sequences differ" in rec["notes"][0]
    assert rec["memory_bytes"]["grads"] == 64 * 4 * (16 * F32 + 8) + 17 * F32
