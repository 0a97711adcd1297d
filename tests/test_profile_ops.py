"""The op registry: one list of compute-bound ops and per-op expansions, used everywhere."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from traincast.features import ops as registry
from traincast.features.ops import (
    BUILTIN_RULES,
    OP_RULES,
    expand_ops,
    is_compute_bound,
    op_family,
    register_op,
    rule_for,
)
from traincast.roofline import Curves, compute_breakdown, is_conv


def test_every_op_torch_counts_flops_for_is_registered_compute_bound() -> None:
    torch = pytest.importorskip("torch")
    import torch.utils.flop_counter as fc

    packets = [p for p in fc.flop_registry if isinstance(p, torch._ops.OpOverloadPacket)]
    assert len(packets) >= 15
    # against the rules ops.py registers itself: op_flops adds to OP_RULES any op torch counts
    # the first time a capture meets it, so after a profile OP_RULES would hold every one
    missing = [p.__name__ for p in packets if not (p.__name__ in BUILTIN_RULES
                                                   and BUILTIN_RULES[p.__name__].compute_bound)]
    assert missing == []


def test_names_resolve_whatever_their_namespace() -> None:
    assert rule_for("aten::mm") is rule_for("mm") is rule_for("aten.mm.default")
    assert op_family("aten::addmm") == "gemm"
    assert op_family("_scaled_dot_product_flash_attention_for_cpu_backward") == "attention"
    assert op_family("traincast::gru_backward") == "recurrent"
    # backend convolution kernels, registered or named like one
    assert op_family("aten::_slow_conv2d_backward") == "conv"
    assert op_family("aten::conv_tbc") == "conv"
    # "conv" inside another word is not a convolution
    assert op_family("aten::_convert_indices_from_coo_to_csr") == ""
    assert not is_compute_bound("aten::add_") and not is_compute_bound("embedding")


def test_measured_breakdown_and_roofline_use_the_registry() -> None:
    from traincast.validation.measure import classify

    for name, rule in OP_RULES.items():
        if rule.compute_bound:
            assert classify(f"aten::{name}") == "compute_flop", name
    assert classify("aten::_convert_indices_from_coo_to_csr") == "compute_mem"
    assert classify("aten::embedding_dense_backward") == "compute_mem"
    names = ["convolution_backward", "mkldnn_convolution", "mm", "_convert_element_type"]
    assert is_conv(names).tolist() == [True, True, False, False]


def _fast_curves() -> Curves:
    return Curves(gemm_intensity=np.array([1.0]), gemm_flops_per_s=np.array([1e30]),
                  conv_intensity=np.array([1.0]), conv_flops_per_s=np.array([1e30]),
                  elementwise_bytes=np.array([1.0]), elementwise_bps=np.array([1e30]),
                  op_overhead_s=1e-5)


def test_an_expansion_registers_with_its_op_and_the_roofline_applies_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "OP_RULES", dict(OP_RULES))

    def two_kernels(row: dict) -> list[dict]:
        half = float(row["flops"]) / 2
        return [{**row, "op": "mm", "flops": half, "count": 3},
                {**row, "op": "add", "flops": 0.0, "bound": "memory", "count": 1}]

    register_op("fused_thing", family="gemm", expand=two_kernels)
    row = {"op": "fused_thing", "phase": "forward", "flops": 8.0, "bytes_read": 4.0,
           "bytes_written": 4.0, "bound": "compute", "dtype": "float32"}
    other = {**row, "op": "relu", "flops": 0.0, "bound": "memory"}
    assert [r["op"] for r in expand_ops([row, other])] == ["mm", "add", "relu"]
    # every op costs its fixed cost o = 10 us: 3 mm runs + 1 add + 1 relu
    bd = compute_breakdown([row, other], _fast_curves())
    assert bd["ops"] == 5 and bd["overhead"] == pytest.approx(5e-5)


def test_gru_rows_expand_through_the_registry() -> None:
    b, t, i, h = 2, 7, 5, 4
    g = 3 * h
    gru = {"op": "gru", "phase": "forward", "flops": 2 * b * t * g * (i + h), "bytes_read": 0,
           "bytes_written": 0, "bound": "compute", "dtype": "float32",
           "shapes": f"{b}x{t}x{i};{g}x{i};{g}x{h};{g};{g}"}
    rows = expand_ops([gru])
    # 1 input GEMM + T recurrent GEMMs: the FLOPs of the fused op, split
    assert sum(r["flops"] * r.get("count", 1) for r in rows) == gru["flops"]
    assert sum(r.get("count", 1) for r in rows) == 11 * t + 2


def test_a_memory_bound_flop_formula_stays_memory_bound() -> None:
    pytest.importorskip("torch")
    import traincast.zoo.graph  # noqa: F401  (registers traincast::spmm)

    rule = rule_for("traincast::spmm")
    assert rule is not None and rule.family == "sparse" and not rule.compute_bound


def test_the_registry_needs_no_torch() -> None:
    code = ("import sys; sys.modules['torch'] = None\n"
            "from traincast.features.ops import is_compute_bound, expand_ops\n"
            "import traincast.roofline\n"
            "print(is_compute_bound('aten::bmm'), is_compute_bound('aten::add'))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["True", "False"]



def test_a_grouped_product_counts_its_flops_forward_and_backward() -> None:
    """A mixture of experts' expert layer as transformers runs it: the routed tokens' rows
    (``T x K``, sorted by expert) times each expert's ``K x N`` matrix in one grouped product
    (``torch._grouped_mm``), after a ``K x K`` linear layer. Hand count: the grouped product
    2 T K N forward whatever the split over experts; backward the input gradient (T, N) @ (G,
    N, K) and the weight gradient (K, T) @ (T, N), 2 T K N each; the linear layer 2 T K K
    forward and its weight gradient (its input, the step's, needs none)."""
    import torch

    from traincast.features.profile import profile

    class Experts(torch.nn.Module):
        def __init__(self, experts: int, k: int, n: int) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(k, k, bias=False)
            self.w = torch.nn.Parameter(torch.randn(experts, k, n) * 0.02)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            cuts = torch.linspace(0, x.shape[1], self.w.shape[0] + 1)[1:]
            y = torch._grouped_mm(self.proj(x[0]), self.w, offs=cuts.round().to(torch.int32))
            return (y * y).sum()  # a gradient with strides (an expanded one has none)

    t, k, n, g = 64, 32, 48, 4
    rec = profile(Experts(g, k, n), torch.randn(1, t, k), optimizer="none", ops=True)
    assert rec["flops_forward"] == 2 * t * k * n + 2 * t * k * k
    assert rec["flops_compute_bound"] == 3 * 2 * t * k * n + 2 * 2 * t * k * k
    grouped = [o for o in rec["ops"] if o["op"].endswith("_grouped_mm")]
    assert len(grouped) == 3 and all(o["bound"] == "compute" for o in grouped)


def test_the_grouped_product_formula_by_hand_for_every_layout() -> None:
    # (M, K) @ (G, K, N), (G, M, K) @ (K, N_total), (K, T) @ (T, N): 2 M K N, the groups
    # splitting one dimension; (G, M, K) @ (G, K, N): G products of 2 M K N; fp8 alike
    for name in ("_grouped_mm", "_scaled_grouped_mm"):
        f = registry.rule_for(name).flops
        assert f((1024, 256), (4, 256, 512)) == 2 * 1024 * 256 * 512
        assert f((4, 64, 256), (256, 2048)) == 2 * 64 * 256 * 2048
        assert f((256, 1024), (1024, 512)) == 2 * 256 * 1024 * 512
        assert f((4, 64, 256), (4, 256, 512)) == 4 * 2 * 64 * 256 * 512
        assert registry.is_compute_bound(name)
