"""The task index: the same tasks and the same line-numbered errors as load_tasks, with
none of the tasks held in memory."""
from __future__ import annotations

import pytest

from drscore.engine.runtime.io import load_tasks
from drscore.engine.runtime.models import InputError
from drscore.engine.runtime.task_index import TaskIndex


def test_the_index_reads_what_load_tasks_reads(drb):
    errors: list[InputError] = []
    index = TaskIndex(drb / "tasks.jsonl", errors)
    try:
        loaded = load_tasks(drb / "tasks.jsonl", [])
        assert errors == [] and len(index) == len(loaded) == 100
        assert list(index) == list(loaded)  # the file's order
        for task_id in ("1", "51", "100"):
            assert index[task_id] == loaded[task_id]  # the whole task: prompt, language, topic, fields
        assert "nope" not in index and "7" in index
        with pytest.raises(KeyError):
            index["nope"]
    finally:
        index.close()


def test_the_index_reports_bad_lines_and_duplicates_in_file_order(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + "\n".join([
        '{"id": 1, "prompt": "first"}', '{"id": 2}', 'nope', '', '{"id": 1, "prompt": "dup"}',
        '{"task_id": "b", "prompt": "fine", "reference": "R", "criteria": [1]}',
    ]).encode() + b"\n")
    errors: list[InputError] = []
    index = TaskIndex(p, errors)
    try:
        assert [e.origin.rsplit(":", 1)[1] for e in errors] == ["2", "3", "5"]
        assert "duplicate task id '1'" in errors[2].message
        assert list(index) == ["1", "b"] and index["1"].prompt == "first"  # the first of a duplicate wins
        assert index["b"].reference == "R" and index["b"].fields == {"criteria": [1]}
    finally:
        index.close()
    # the same as load_tasks says about the same file
    expected: list[InputError] = []
    load_tasks(p, expected)
    assert [(e.origin, e.message) for e in errors] == [(e.origin, e.message) for e in expected]


def test_lookups_do_not_depend_on_recent_ones(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text("".join(f'{{"task_id": "t{i}", "prompt": "question {i}"}}\n' for i in range(50)))
    index = TaskIndex(p, [], recent=4)  # fewer kept parsed than asked for
    try:
        for _ in range(2):
            assert [index[f"t{i}"].prompt for i in range(50)] == [f"question {i}" for i in range(50)]
    finally:
        index.close()
