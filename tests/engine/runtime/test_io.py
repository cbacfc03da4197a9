"""Reading tasks and reports: published formats, and every bad-input case named by file and line."""
from __future__ import annotations

import itertools

import orjson

from drscore.engine.runtime.io import agent_from_path, iter_reports, load_tasks, tasks_from_reports
from drscore.engine.runtime.models import InputError
from support.data import drb_report_ids


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_drb_tasks_and_reports_are_read_as_published(drb):
    errors: list[InputError] = []
    tasks = load_tasks(drb / "tasks.jsonl", errors)
    assert errors == []
    assert len(tasks) == 100 and tasks["1"].language == "zh" and tasks["51"].language == "en"
    assert tasks["7"].topic  # DRB tasks carry a topic
    reports = list(iter_reports(drb / "reports.claude-3-7-sonnet.jsonl", tasks=tasks, errors=errors))
    assert errors == []
    # The slice in tests/data holds 21 of the 100 reports (see its README), every one read.
    assert [r.task_id for r in reports] == drb_report_ids() and len(reports) == 21
    assert {r.agent for r in reports} == {"claude-3-7-sonnet"}  # from the file name
    assert reports[0].task_id == "1" and reports[0].origin.endswith("reports.claude-3-7-sonnet.jsonl:1")
    assert reports[-1].origin.endswith("reports.claude-3-7-sonnet.jsonl:21")


def test_agent_flag_overrides_file_name(drb):
    errors: list[InputError] = []
    first = next(iter_reports(drb / "reports.claude-3-7-sonnet.jsonl", agent="claude", errors=errors))
    assert first.agent == "claude"
    assert agent_from_path("runs/reports.gpt-4o.jsonl") == "gpt-4o"


def test_reporteval_format_uses_topic_as_task(tmp_path):
    p = _write(tmp_path / "openai.jsonl", [orjson.dumps({"topic": "Solar storage", "report": "Body."}).decode()])
    tasks = tasks_from_reports(p)
    assert list(tasks) == ["Solar storage"] and tasks["Solar storage"].prompt == "Solar storage"
    errors: list[InputError] = []
    (r,) = list(iter_reports(p, tasks=tasks, errors=errors))
    assert (r.task_id, r.agent, r.report) == ("Solar storage", "openai", "Body.")


def test_each_bad_line_is_reported_with_file_and_line_and_the_rest_still_read(tmp_path):
    tasks_path = _write(tmp_path / "tasks.jsonl", [
        '{"task_id": "a", "prompt": "Question A"}',
        '{"task_id": "b", "prompt": "Question B"}',
    ])
    reports_path = _write(tmp_path / "r.jsonl", [
        '{"task_id": "a", "agent": "x", "report": "fine"}',        # 1 ok
        '{"task_id": "a", "agent": "x", "report": ',                # 2 malformed JSON
        '{"agent": "x", "report": "no task"}',                      # 3 missing task_id
        '{"task_id": "zzz", "agent": "x", "report": "unknown"}',    # 4 unknown task
        '{"task_id": "b", "agent": "x", "report": "   "}',          # 5 empty report
        '{"task_id": "a", "agent": "x", "report": "again"}',        # 6 duplicate
        '[1, 2]',                                                   # 7 not an object
        '{"task_id": "b", "agent": "y", "report": "fine too"}',    # 8 ok
    ])
    errors: list[InputError] = []
    tasks = load_tasks(tasks_path, errors)
    got = list(iter_reports(reports_path, tasks=tasks, errors=errors))
    assert [(r.task_id, r.agent) for r in got] == [("a", "x"), ("b", "y")]
    by_line = {int(e.origin.rsplit(":", 1)[1]): e.message for e in errors}
    assert set(by_line) == {2, 3, 4, 5, 6, 7}
    assert "malformed JSON" in by_line[2]
    assert "task_id" in by_line[3]
    assert "unknown task id 'zzz'" in by_line[4]
    assert by_line[5] == "empty report"
    assert "duplicate" in by_line[6]
    assert all(e.origin.startswith(str(reports_path)) for e in errors)


def test_task_file_errors_are_line_numbered(tmp_path):
    p = _write(tmp_path / "t.jsonl", ['{"id": 1, "prompt": "ok"}', '{"id": 2}', 'nope', '{"id": 1, "prompt": "dup"}'])
    errors: list[InputError] = []
    tasks = load_tasks(p, errors)
    assert list(tasks) == ["1"]
    assert [e.origin.rsplit(":", 1)[1] for e in errors] == ["2", "3", "4"]


def test_reports_are_streamed_lazily(drb):
    errors: list[InputError] = []
    it = iter_reports(drb / "reports.claude-3-7-sonnet.jsonl", errors=errors)
    assert len(list(itertools.islice(it, 2))) == 2  # a generator: nothing forces the whole file
