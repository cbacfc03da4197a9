"""``drscore run`` with a judge the price table does not know: said at the start and in
the dry run, costs unknown (None) rather than $0; a provider prefix is priced as the model."""
from __future__ import annotations

import json

import pytest

from drscore.cli import main
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def mock():
    with MockServerProcess(MockConfig()) as server:
        yield server


def _args(mock, model: str, *extra: str) -> list[str]:
    return ["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
            "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--limit", "2",
            "--judge-url", mock.url, "--judge-model", model, "--no-cache", *extra]


def test_an_unknown_price_is_said_and_costs_are_unknown_not_zero(tmp_path, mock, capsys):
    out = tmp_path / "run"
    assert main(_args(mock, "acme-judge-7b", "--out", str(out))) == 0
    captured = capsys.readouterr()
    assert "warning: the price of 'acme-judge-7b' is unknown" in captured.err
    assert "--prices" in captured.err and "--price-as" in captured.err
    assert "$0.0000" not in captured.out and "unknown" in captured.out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"]["cost_usd"] is None and summary["totals"]["price_unknown"] == "acme-judge-7b"
    assert all(e["cost_usd"] is None for e in summary["per_agent_method"])
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["status"] == "ok" and r["cost_usd"] is None for r in rows)
    verdicts = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert verdicts and all(v["cost_usd"] is None for v in verdicts)


def test_the_dry_run_says_the_price_is_unknown(mock, capsys):
    assert main(_args(mock, "acme-judge-7b", "--dry-run")) == 0
    out = capsys.readouterr().out
    assert "the price of 'acme-judge-7b' is unknown" in out and "--price-as" in out
    assert "0.0000" not in out


def test_a_provider_prefix_is_billed_as_the_model(tmp_path, mock, capsys):
    mock.reset()
    out = tmp_path / "run"
    assert main(_args(mock, "openai/gpt-4.1", "--out", str(out))) == 0
    assert "unknown" not in capsys.readouterr().err
    totals = json.loads((out / "summary.json").read_text())["totals"]
    stats = mock.stats()
    price = PriceTable().lookup("gpt-4.1")
    expected = (stats["prompt_tokens"] * price.input + stats["completion_tokens"] * price.output) / 1e6
    assert expected > 0 and totals["cost_usd"] == pytest.approx(expected, abs=1e-6)
