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
