"""Shared fixtures: paths to the real benchmark data beside the checkout."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def drb() -> Path:
    return DATA / "drb"


@pytest.fixture(scope="session")
def rigorous_data() -> Path:
    return DATA / "rigorous"
