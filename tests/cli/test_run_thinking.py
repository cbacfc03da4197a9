"""``drscore run`` against a judge that thinks (the mock with 2,000 reasoning tokens per
call): every row scored, reasoning tokens recorded in verdicts, rows and totals."""
from __future__ import annotations

import json

import pytest

from drscore.cli import main
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def thinking_mock():
    with MockServerProcess(MockConfig(reasoning_tokens=2000)) as mock:
        yield mock


@pytest.mark.parametrize("model", ["o3", "gemini-2.5-pro"])
def test_every_row_is_scored_and_its_thinking_recorded(tmp_path, thinking_mock, model):
    thinking_mock.reset()
    out = tmp_path / "run"
    code = main(["run", "--methods", "quality,redundancy", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                 "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--limit", "3",
                 "--judge-url", thinking_mock.url, "--judge-model", model, "--no-cache", "--out", str(out)])
    assert code == 0
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and all(r["status"] == "ok" and r["score"] is not None for r in rows)
    # every call the row paid for thought 2,000 tokens (the mock reports them in usage)
    assert all(r["calls"] > 0 and r["reasoning_tokens"] == 2000 * r["calls"] for r in rows)
    verdicts = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    paid = [v for v in verdicts if not v["cached"]]
    assert paid and all(v["reasoning_tokens"] == 2000 for v in paid)
    totals = json.loads((out / "summary.json").read_text())["totals"]
    stats = thinking_mock.stats()
    assert totals["truncated_answers"] == 0 and stats["cut_off"] == 0
    assert totals["reasoning_tokens"] == stats["reasoning_tokens"] == 2000 * totals["calls"]
    assert totals["output_tokens"] == stats["completion_tokens"]  # reasoning inside, counted once


def test_an_unknown_model_that_thinks_is_adapted_to_and_scored(tmp_path, thinking_mock):
    thinking_mock.reset()
    out = tmp_path / "run"
    code = main(["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                 "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--limit", "2",
                 "--judge-url", thinking_mock.url, "--judge-model", "acme-judge-7b", "--no-cache",
                 "--out", str(out)])
    assert code == 0
    totals = json.loads((out / "summary.json").read_text())["totals"]
    assert totals["thinking_learned"] is True and totals["items_failed"] == 0
    # the first answer came back empty at the template's cap; its one retry had room
    assert totals["truncated_answers"] == totals["truncation_retries"] == thinking_mock.stats()["cut_off"] >= 1


def _run(mock: MockServerProcess, out, *extra: str) -> int:
    return main(["run", "--methods", "quality,redundancy", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                 "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--judge-url", mock.url,
                 "--judge-model", "o3", "--no-cache", "--out", str(out), *extra])


def test_a_cap_too_small_for_the_thought_is_learned_once_for_the_run(tmp_path, thinking_mock, capsys):
    # 2,000 tokens of thought do not fit --max-output-tokens 1000. Before: each of the 310
    # calls paid a cut-off attempt and then its retry. With --retry-cut-off the first cut
    # teaches the run the room, so later calls start there.
    thinking_mock.reset()
    code = _run(thinking_mock, tmp_path / "run", "--max-output-tokens", "1000", "--retry-cut-off")
    assert code == 0
    totals = json.loads((tmp_path / "run" / "summary.json").read_text())["totals"]
    stats = thinking_mock.stats()
    assert totals["items_failed"] == 0 and stats["cut_off"] == totals["truncated_answers"]
    assert 1 <= totals["truncated_answers"] <= 0.05 * totals["calls"]
    assert totals["learned_output_room"] > 2000  # at least the thought, above each template's answer cap
    assert "later calls started" in capsys.readouterr().out


def test_an_explicit_cap_cuts_off_without_a_second_paid_attempt_and_stops_the_run(tmp_path, thinking_mock, capsys):
    thinking_mock.reset()
    code = _run(thinking_mock, tmp_path / "run", "--max-output-tokens", "1000")
    stats = thinking_mock.stats()
    err = capsys.readouterr().err
    assert code == 1
    # every answer cut off at the given cap, none retried; after the first 10 the run stops
    assert stats["requests"] == stats["cut_off"] == 10
    assert "every answer so far was cut off at its output cap" in err and "--retry-cut-off" in err
