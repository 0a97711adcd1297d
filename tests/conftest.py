"""Shared test fixtures: the real public traces in ../shared/data and small catalogs."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` beside the repository (real public traces); skip when absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real traces not found at {SHARED_DATA}")
    return SHARED_DATA
