"""Shared test fixtures: the real public traces in ../shared/data and small catalogs."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


# The shipped V100 node with every efficiency 1, priced by the paper's flat peaks
# (load_catalog(compute="paper")), so hand arithmetic is exact.
PINNED = """
[gpu.V100-SXM2-16GB]
fp32_tflops = 15.7
fp16_tflops = 125.0
mem_bw_gbs = 900
mem_gb = 16
flop_efficiency = 1.0
mem_efficiency = 1.0
[link.pcie3x16]
bw_gbs = 15.75
efficiency = 1.0
[link.nvlink2-v100]
bw_gbs = 150.0
efficiency = 1.0
[link.eth25]
bw_gbs = 3.125
efficiency = 1.0
[link.eth100]
bw_gbs = 12.5
efficiency = 1.0
[node.pai-v100-nvlink]
gpu = "V100-SXM2-16GB"
gpus = 8
pcie = "pcie3x16"
intra = "nvlink2-v100"
nic = "eth25"
"""


@pytest.fixture
def catalog(tmp_path: Path):
    """The shipped catalog with :data:`PINNED` merged over it, pricing compute as the paper."""
    from traincast.hardware.catalog import load_catalog

    path = tmp_path / "pinned.toml"
    path.write_text(PINNED)
    return load_catalog([path], compute="paper")


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` beside the repository (real public traces); skip when absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real traces not found at {SHARED_DATA}")
    return SHARED_DATA
