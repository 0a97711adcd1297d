"""One measured training step (validation/measure.py): inputs at any depth reach the device."""

from __future__ import annotations

import torch
from torch import nn

from traincast.validation.measure import device_inputs, host_inputs, make_step


class DictModel(nn.Module):
    """Takes a dict of a tensor and a list of tensors (and a non-tensor leaf)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 1)
        self.seen: list[torch.Tensor] = []

    def forward(self, batch: dict) -> torch.Tensor:
        x, (y, z) = batch["x"], batch["pair"]
        self.seen = [x, y, z]
        assert batch["scale"] == 2.0
        return (self.lin(x) * batch["scale"]).sum() + y.sum() + z.sum()


def _nested() -> list:
    return [{"x": torch.ones(3, 4), "pair": [torch.zeros(2), torch.arange(3.0)], "scale": 2.0}]


def test_nested_inputs_are_copied_each_step() -> None:
    inputs = _nested()
    model = DictModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = make_step(model, inputs, opt, "cpu")
    step()
    first = list(model.seen)
    step()
    # every tensor, however deep, is a fresh copy of the host batch each step (the step's
    # memcpy on the CPU; a device copy on CUDA), never the caller's tensor
    originals = [inputs[0]["x"], *inputs[0]["pair"]]
    for seen, prev, orig in zip(model.seen, first, originals, strict=True):
        assert seen is not orig and seen is not prev
        assert seen.data_ptr() not in (orig.data_ptr(), prev.data_ptr())
        assert torch.equal(seen, orig)


def test_host_and_device_inputs_keep_the_structure() -> None:
    inputs = _nested()
    host = host_inputs(inputs, "cpu")
    assert host[0]["scale"] == 2.0 and isinstance(host[0]["pair"], list)
    # a device other than the CPU (meta here; CUDA on a GPU machine) receives every nested
    # tensor, not only the top-level ones; other leaves pass unchanged
    moved = device_inputs(host, "meta")
    assert moved[0]["x"].device.type == "meta"
    assert [t.device.type for t in moved[0]["pair"]] == ["meta", "meta"]
    assert moved[0]["scale"] == 2.0
    tup = device_inputs([(torch.ones(1), {"k": [torch.ones(2)]}), "text"], "meta")
    assert tup[0][0].is_meta and tup[0][1]["k"][0].is_meta and tup[1] == "text"


def test_inputs_in_a_userdict_are_moved_too() -> None:
    from collections import UserDict

    batch = UserDict({"x": torch.ones(2, 4), "n": 3})
    moved = device_inputs(host_inputs([batch], "cpu"), "meta")
    assert isinstance(moved[0], UserDict) and moved[0]["x"].is_meta and moved[0]["n"] == 3
    assert batch["x"].device.type == "cpu"  # the caller's mapping is not changed
