"""`drscore view` refuses what it cannot serve: a run it cannot read, or a folder that is not
a run, is an error (exit 1); a port out of range a usage error (exit 2)."""
from __future__ import annotations

from pathlib import Path

import pytest

from drscore.cli import main


def test_a_directory_without_scores_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(tmp_path), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and "no scores.jsonl" in err


def test_a_port_out_of_range_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["view", str(tmp_path), "--port", "70000"]) == 2
    err = capsys.readouterr().err
    assert "--port" in err and "0<=x<=65535" in err and "Usage: drscore view" in err


def test_a_folder_with_another_tools_scores_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "scores.jsonl").write_text('{"model": "x", "bleu": 0.31}\n')
    assert main(["view", str(tmp_path), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "scores.jsonl:1: not a drscore score row" in err and "--out directory of `drscore run`" in err
    assert not (tmp_path / "view.sqlite").exists()
