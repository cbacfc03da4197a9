"""The view index follows ``scores.jsonl`` by content, not by inode and size: a resumed
run truncates the file in place and writes other rows over the same offsets, and the
index shows exactly the file's rows afterwards (the whole sequence with a real run and
``kill -9`` is in tests/cli/test_journey_money.py)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec

from drscore.engine.reporting.view_index import RowQuery, ViewIndex
from drscore.engine.runtime.models import ScoreRow

_enc = msgspec.json.Encoder()


def _line(task: str, agent: str, latency: float = 1.0) -> bytes:
    return _enc.encode(ScoreRow(task_id=task, agent=agent, method="quality", score=0.5, latency_s=latency)) + b"\n"


def _shown(index: ViewIndex) -> set[tuple[str, str]]:
    index.refresh()
    return {(r["task"], r["agent"]) for r in index.page(RowQuery(limit=1000))["rows"]}


def _rewrite_in_place(path: Path, data: bytes) -> None:
    """As a resumed run opens the file: truncated in place (same inode), then written."""
    inode = path.stat().st_ino
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(data)
    assert path.stat().st_ino == inode


def _generation(run: Path, value: str) -> None:
    (run / "state.json").write_text(json.dumps({"state": "running", "generation": value}))


def test_a_file_truncated_and_rewritten_in_place_is_indexed_again(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    scores = run / "scores.jsonl"
    scores.write_bytes(_line("1", "a") + _line("2", "a"))
    index = ViewIndex(run)
    try:
        assert _shown(index) == {("1", "a"), ("2", "a")}
        # resumed: other rows, and more bytes than the index had read (no generation recorded)
        _rewrite_in_place(scores, _line("3", "a") + _line("4", "a") + _line("5", "a"))
        assert _shown(index) == {("3", "a"), ("4", "a"), ("5", "a")}
        # appended lines are read from where the index stopped
        with open(scores, "ab") as f:
            f.write(_line("6", "a"))
        assert index.refresh() == {"scores": 1, "verdicts": 0}
        assert _shown(index) == {("3", "a"), ("4", "a"), ("5", "a"), ("6", "a")}
    finally:
        index.close()


def test_a_new_generation_is_indexed_again_even_when_the_bytes_read_look_the_same(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    scores = run / "scores.jsonl"
    _generation(run, "g1")
    scores.write_bytes(_line("1", "a") + _line("2", "a"))
    index = ViewIndex(run)
    try:
        assert _shown(index) == {("1", "a"), ("2", "a")}
        # the run started its files again: the same first bytes, then a line the old file never had;
        # the row ("2", "a") is not in the new file and must not be shown
        _generation(run, "g2")
        _rewrite_in_place(scores, _line("1", "a") + _line("7", "b", latency=2.0) + _line("2", "b"))
        assert _shown(index) == {("1", "a"), ("7", "b"), ("2", "b")}
        # a writer that records no new generation: same inode, same size, another last line read
        size = scores.stat().st_size
        _rewrite_in_place(scores, _line("1", "a") + _line("7", "b", latency=2.0) + _line("2", "c"))
        assert scores.stat().st_size == size
        assert _shown(index) == {("1", "a"), ("7", "b"), ("2", "c")}
    finally:
        index.close()


def test_a_viewer_reopened_after_the_change_shows_the_file_too(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    scores = run / "scores.jsonl"
    scores.write_bytes(_line("1", "a"))
    index = ViewIndex(run)
    assert _shown(index) == {("1", "a")}
    index.close()
    _rewrite_in_place(scores, _line("2", "a") + _line("3", "a"))
    os.utime(scores)
    again = ViewIndex(run)
    try:
        assert _shown(again) == {("2", "a"), ("3", "a")}
    finally:
        again.close()


def test_a_line_edited_to_the_same_size_is_seen_by_the_next_viewer(tmp_path):
    # Same inode, same size, same last line, no generation: only the content changed (a hand
    # edit of an earlier row). The next process to open the index reads the file again.
    run = tmp_path / "run"
    run.mkdir()
    scores = run / "scores.jsonl"
    scores.write_bytes(_line("1", "a") + _line("2", "a") + _line("3", "a"))
    first = ViewIndex(run)
    try:
        assert _shown(first) == {("1", "a"), ("2", "a"), ("3", "a")}
    finally:
        first.close()
    edited = _line("9", "a") + _line("2", "a") + _line("3", "a")
    assert len(edited) == scores.stat().st_size
    _rewrite_in_place(scores, edited)
    second = ViewIndex(run)
    try:
        assert _shown(second) == {("9", "a"), ("2", "a"), ("3", "a")}
        assert second.refresh() == {"scores": 0, "verdicts": 0}  # checked once, then followed
    finally:
        second.close()
