"""Input files (issue 8): duplicates across files, a byte-order mark, and paths that are
not readable files, through the reader and through the real command."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from drscore.engine.runtime.io import InputFileError, iter_reports, load_tasks
from drscore.engine.runtime.models import InputError
from drscore.engine.runtime.seen import SeenKeys
from support.data import ROOT

BOM = b"\xef\xbb\xbf"


def _jsonl(path: Path, objs: list[dict], prefix: bytes = b"") -> Path:
    path.write_bytes(prefix + b"".join(orjson.dumps(o) + b"\n" for o in objs))
    return path


def _tasks(tmp_path: Path, prefix: bytes = b"") -> Path:
    return _jsonl(tmp_path / "tasks.jsonl", [{"task_id": "t1", "prompt": "Question one?"},
                                             {"task_id": "t2", "prompt": "Question two?"}], prefix)


def _report(task: str, agent: str = "a") -> dict:
    return {"task_id": task, "agent": agent, "report": f"## Part\n\nA report for {task} by {agent}.\n"}


def test_a_duplicate_in_another_file_is_reported_with_both_places_and_read_once(tmp_path: Path) -> None:
    one = _jsonl(tmp_path / "one.jsonl", [_report("t1"), _report("t2")])
    two = _jsonl(tmp_path / "two.jsonl", [_report("t2", "b"), _report("t1")])  # line 2 repeats one.jsonl:1
    errors: list[InputError] = []
    seen = SeenKeys()
    reports = [r for p in (one, two) for r in iter_reports(p, errors=errors, seen=seen)]
    assert [(r.task_id, r.agent) for r in reports] == [("t1", "a"), ("t2", "a"), ("t2", "b")]
    assert len(errors) == 1
    assert errors[0].origin == f"{two}:2"
    assert f"first at {one}:1" in errors[0].message


def test_a_byte_order_mark_does_not_cost_the_first_record(tmp_path: Path) -> None:
    errors: list[InputError] = []
    tasks = load_tasks(_tasks(tmp_path, BOM), errors)
    reports = list(iter_reports(_jsonl(tmp_path / "r.jsonl", [_report("t1"), _report("t2")], BOM),
                                tasks=tasks, errors=errors))
    assert errors == []
    assert list(tasks) == ["t1", "t2"]
    assert [r.task_id for r in reports] == ["t1", "t2"]


def test_a_directory_is_not_a_reports_file(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match=f"reports file {tmp_path}: is a directory"):
        list(iter_reports(tmp_path, errors=[]))
    with pytest.raises(InputFileError, match=f"tasks file {tmp_path}: is a directory"):
        load_tasks(tmp_path, [])


def _drscore(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drscore.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env={**os.environ, "CI": "1"})


def _said(stderr: str) -> list[str]:
    """stderr without the start-of-run announcement of the run directory."""
    return [ln for ln in stderr.strip().splitlines() if not ln.startswith("run directory: ")]


def test_run_scores_a_duplicate_across_files_once_and_exits_3(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path)
    one = _jsonl(tmp_path / "one.jsonl", [_report("t1"), _report("t2")])
    two = _jsonl(tmp_path / "two.jsonl", [_report("t1")], BOM)
    proc = _drscore("run", "--methods", "quality", "--tasks", str(tasks), "--reports", str(one),
                    "--reports", str(two), "--out", str(tmp_path / "out"), "--json")
    assert proc.returncode == 3, proc.stderr
    summary = orjson.loads(proc.stdout)
    assert summary["totals"]["items"] == 2  # t1 and t2, each once
    assert summary["totals"]["inputs_skipped"] == 1
    assert f"{two}:1" in summary["input_errors"][0] and f"first at {one}:1" in summary["input_errors"][0]
    rows = (tmp_path / "out" / "scores.jsonl").read_bytes().splitlines()
    assert len(rows) == 2


@pytest.mark.parametrize("flag", ["--reports", "--tasks"])
def test_run_with_a_directory_as_input_fails_in_one_line(tmp_path: Path, flag: str) -> None:
    tasks = _tasks(tmp_path)
    reports = _jsonl(tmp_path / "r.jsonl", [_report("t1")])
    args = {"--tasks": str(tasks), "--reports": str(reports)}
    args[flag] = str(tmp_path)  # a directory
    proc = _drscore("run", "--methods", "quality", *[x for kv in args.items() for x in kv],
                    "--out", str(tmp_path / "out"))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert _said(proc.stderr) == [
        f"drscore: error: {flag[2:]} file {tmp_path}: is a directory, expected a JSONL file"]


def test_run_with_an_unreadable_input_fails_in_one_line(tmp_path: Path) -> None:
    # root reads any file, so unreadability comes from a path through a regular file
    blocker = tmp_path / "plain"
    blocker.write_text("x")
    proc = _drscore("run", "--methods", "quality", "--reports", str(blocker / "r.jsonl"),
                    "--out", str(tmp_path / "out"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    said = _said(proc.stderr)
    assert len(said) == 1 and str(blocker / "r.jsonl") in said[0]
