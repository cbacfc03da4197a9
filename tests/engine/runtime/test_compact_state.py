"""The compact per-run state of issue 17: seen (task, agent) pairs and the ordering of
scores.jsonl without reading it back into memory."""
from __future__ import annotations

from array import array
from pathlib import Path

import pytest

from drscore.engine.runtime import seen as seen_module
from drscore.engine.runtime.rundir import _sort_lines
from drscore.engine.runtime.seen import SeenKeys


def test_seen_pairs_survive_the_merge_into_sorted_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seen_module, "_BLOCK", 4)  # merge every 4 pairs
    seen = SeenKeys()
    for i in range(10):
        seen.add(f"t{i}", "a" if i % 2 else "b", f"/data/r{i % 3}.jsonl:{i + 1}")
    assert len(seen) == 10
    assert seen.first("t7", "a") == "/data/r1.jsonl:8"  # merged into the arrays
    assert seen.first("t0", "b") == "/data/r0.jsonl:1"
    assert seen.first("t9", "a") == "/data/r0.jsonl:10"  # still in the recent dict
    assert seen.first("t7", "b") is None and seen.first("t10", "a") is None


def test_a_colon_in_the_path_keeps_the_line(tmp_path: Path) -> None:
    seen = SeenKeys()
    seen.add("t", "a", "C:/runs/x.jsonl:12")
    assert seen.first("t", "a") == "C:/runs/x.jsonl:12"


def test_lines_are_put_in_input_order(tmp_path: Path) -> None:
    path = tmp_path / "scores.jsonl"
    path.write_bytes(b'{"o":2}\n{"o":0}\n\n{"o":3}\n{"o":1}')  # blank line, no final newline
    _sort_lines(path, array("q", [2, 0, 3, 1]))
    assert path.read_bytes() == b'{"o":0}\n{"o":1}\n{"o":2}\n{"o":3}\n'


def test_a_file_in_order_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "scores.jsonl"
    path.write_bytes(b"a\nb\n")
    before = path.stat().st_ino
    _sort_lines(path, array("q", [0, 1]))
    assert path.stat().st_ino == before and path.read_bytes() == b"a\nb\n"
