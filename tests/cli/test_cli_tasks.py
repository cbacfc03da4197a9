"""``drscore tasks rank | leakage | domains`` end to end, with the offline and the mock judge."""
from __future__ import annotations


import orjson
import pytest

from drscore.cli import main
from drscore.engine.runtime.io import load_tasks
from support.data import DATA


@pytest.fixture
def tasks_file(tmp_path):
    """Six real English DeepResearch Bench tasks (ids 51-56)."""
    lines = [line for line in (DATA / "drb" / "tasks.jsonl").read_bytes().splitlines()
             if 51 <= int(orjson.loads(line)["id"]) <= 56]
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _jsonl(text):
    return [orjson.loads(line) for line in text.splitlines() if line.strip()]


def test_rank_offline_top_k_and_out_file(tasks_file, tmp_path, capsys):
    out = tmp_path / "top.jsonl"
    assert main(["tasks", "rank", "--tasks", str(tasks_file), "--rounds", "3", "--seed", "4",
                 "--no-cache", "--out", str(out)]) == 0
    rows = _jsonl(capsys.readouterr().out)
    assert len(rows) == 6 and [r["rank"] for r in rows] == [1, 2, 3, 4, 5, 6]
    ratings = [r["rating"] for r in rows]
    assert ratings == sorted(ratings, reverse=True)
    assert sum(ratings) == pytest.approx(6 * 1200)  # Elo updates are zero-sum
    assert sum(r["comparisons"] for r in rows) == 2 * 3 * 3  # 3 pairs a round, 3 rounds
    assert _jsonl(out.read_text()) == rows
    # The output is itself a task file.
    errors = []
    assert list(load_tasks(out, errors)) == [r["task_id"] for r in rows] and errors == []

    assert main(["tasks", "rank", "--tasks", str(tasks_file), "--rounds", "3", "--seed", "4",
                 "--no-cache", "--top-k", "2"]) == 0
    assert _jsonl(capsys.readouterr().out) == rows[:2]


def test_leakage_offline_is_a_baseline_that_never_leaks(tasks_file, capsys):
    assert main(["tasks", "leakage", "--tasks", str(tasks_file), "--no-cache"]) == 0
    captured = capsys.readouterr()
    rows = _jsonl(captured.out)
    assert [r["task_id"] for r in rows] == ["51", "52", "53", "54", "55", "56"]
    assert all(r["status"] == "ok" and r["leaked"] is False and r["composite"] < 0.7 for r in rows)
    assert all(r["prefix"] and r["suffix"] for r in rows)
    totals = orjson.loads(captured.err.strip().splitlines()[-1])
    assert (totals["tasks"], totals["leaked"], totals["judge"]) == (6, 0, "offline")


def test_bad_task_lines_are_reported_and_the_rest_ranked(tasks_file, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(tasks_file.read_bytes() + b'{"id": 99}\n{oops\n')
    assert main(["tasks", "rank", "--tasks", str(bad), "--no-cache"]) == 3
    captured = capsys.readouterr()
    assert len(_jsonl(captured.out)) == 6
    assert f"{bad}:7: missing or empty field 'prompt'" in captured.err
    assert f"{bad}:8: malformed JSON" in captured.err


def test_rank_needs_two_tasks(tmp_path, capsys):
    one = tmp_path / "one.jsonl"
    one.write_bytes(b'{"task_id": "a", "prompt": "p"}\n')
    assert main(["tasks", "rank", "--tasks", str(one), "--no-cache"]) == 1
    assert "need at least 2 valid tasks" in capsys.readouterr().err


def test_rank_and_leakage_with_the_mock_judge(tasks_file, tmp_path, capsys):
    from drscore.judge.mock.server import MockConfig, MockServerProcess

    with MockServerProcess(MockConfig(seed=5)) as mock:
        judge = ["--judge-url", mock.url, "--judge-model", "mock", "--cache", str(tmp_path / "cache")]
        assert main(["tasks", "rank", "--tasks", str(tasks_file), "--rounds", "2", *judge]) == 0
        rows = _jsonl(capsys.readouterr().out)
        # 2 rounds x 3 pairs; a pair drawn twice in the same A/B order is asked once.
        assert 1 <= mock.stats()["ok"] <= 6
        assert sum(r["comparisons"] for r in rows) == 12 and all(r["failed"] == 0 for r in rows)
        assert sum(r["rating"] for r in rows) == pytest.approx(6 * 1200)
        asked = mock.stats()["ok"]
        assert main(["tasks", "leakage", "--tasks", str(tasks_file), *judge]) == 0
        leak = _jsonl(capsys.readouterr().out)
        assert mock.stats()["ok"] == asked + 6
        assert all(r["status"] == "ok" and 0 <= r["composite"] <= 1 for r in leak)
        assert all(r["leaked"] == (r["composite"] > 0.7) for r in leak)


def test_rank_records_every_verdict_when_asked(tasks_file, tmp_path, capsys):
    verdicts = tmp_path / "verdicts.jsonl"
    assert main(["tasks", "rank", "--tasks", str(tasks_file), "--rounds", "2", "--seed", "4",
                 "--no-cache", "--verdicts", str(verdicts)]) == 0
    capsys.readouterr()
    records = _jsonl(verdicts.read_text())
    # 6 tasks -> 3 disjoint pairs a round, 2 rounds: 6 comparisons, each recorded once
    assert len(records) == 6
    assert {r["method"] for r in records} == {"tasks.rank"} and all(r["status"] == "ok" for r in records)
    assert all(r["label"].startswith("round ") and " vs " in r["label"] for r in records)
