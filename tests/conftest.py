"""Shared test fixtures: the real public traces in ../shared/data, small catalogs and an
in-process ``traincast`` runner (``tc``)."""

from __future__ import annotations

import sys
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


class Run:
    """Exit code, stdout and stderr of one in-process ``traincast`` command."""

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def tc(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """``tc(*args)`` runs ``traincast ARGS`` in this process and returns its :class:`Run`."""
    from traincast.cli import main

    def run(*args: str) -> Run:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["traincast", *args])
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0
        out = capsys.readouterr()
        return Run(code, out.out, out.err)

    return run


@pytest.fixture(scope="session", autouse=True)
def no_test_writes_the_default_store():
    """A test that stores a trace writes it to its own folder: the default store of the
    working folder (``traincast.duckdb`` in the clone) would be shared by tests running side
    by side (``make test`` runs one worker per core), each locking it in turn."""
    store = ROOT / "traincast.duckdb"
    before = store.exists()
    yield
    assert before or not store.exists(), (
        f"a test wrote {store}: give it --db in tmp_path, or run it there (cwd=tmp_path)")
