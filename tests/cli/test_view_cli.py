"""`drscore view` refuses what it cannot serve, with one line and exit 2."""
from __future__ import annotations

from pathlib import Path

import pytest

from drscore.cli import main


def test_a_directory_without_scores_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(tmp_path), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "drscore view: error:" in err and "no scores.jsonl" in err


def test_a_port_out_of_range_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(tmp_path), "--port", "70000"]) == 2
    assert "--port must be between 0 and 65535" in capsys.readouterr().err
