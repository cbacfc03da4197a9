"""Shared fixtures: paths to the real benchmark data beside the checkout."""
from __future__ import annotations

from pathlib import Path

import pytest

from support.data import DATA


@pytest.fixture(scope="session")
def drb() -> Path:
    return DATA / "drb"


@pytest.fixture(scope="session")
def rigorous_data() -> Path:
    return DATA / "rigorous"
