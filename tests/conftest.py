"""Shared fixtures: paths to the slice of real benchmark data in ``tests/data``, and a
guard that fails any test reading the full data beside the checkout (a clone has none)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from support.data import DATA, SHARED

_SHARED_PREFIX = str(SHARED) + "/"


def _refuse_shared_data(event: str, args: tuple) -> None:
    # Runs on every open() in this process: keep it to one cheap prefix test.
    if event == "open" and isinstance(args[0], (str, Path)) and \
            os.path.abspath(args[0]).startswith(_SHARED_PREFIX):
        raise PermissionError(f"tests must read benchmark data from {DATA} (support.data), not {args[0]}: "
                              "a clone of the repository has nothing beside it")


sys.addaudithook(_refuse_shared_data)


@pytest.fixture(scope="session")
def drb() -> Path:
    return DATA / "drb"


@pytest.fixture(scope="session")
def rigorous_data() -> Path:
    return DATA / "rigorous"
