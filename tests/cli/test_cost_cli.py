"""``drscore run`` with a prefix-caching mock and with ``--batch``: billed cost equals what
the endpoint's usage implies, rows carry cached tokens, uncached cost and a latency
split, and batch mode makes no synchronous call (issue 11)."""
from __future__ import annotations

import json

import pytest

from drscore.cli import main
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"
# Binary-exact prices, so sums of costs compare exactly.
PRICES = {"mock-judge": {"input": 2.0, "output": 8.0, "cached_input": 0.5}}


def _run(tmp_path, mock, *extra):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    out = tmp_path / "run"
    code = main(["run", "--methods", "ace", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                 "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--judge-url", mock.url,
                 "--judge-model", "mock-judge", "--prices", str(prices), "--cache", str(tmp_path / "cache"),
                 "--out", str(out), "--json", *extra])
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    return code, json.loads((out / "summary.json").read_text()), rows


def test_prompt_cache_is_billed_as_the_endpoint_reports_it(tmp_path, capsys):
    with MockServerProcess(MockConfig(prefix_cache=True)) as mock:
        code, summary, rows = _run(tmp_path, mock)
        stats = mock.stats()
    capsys.readouterr()
    t = summary["totals"]
    assert code == 0 and stats["cached_tokens"] > 0
    assert t["cached_input_tokens"] == stats["cached_tokens"] and t["input_tokens"] == stats["prompt_tokens"]
    billed = ((stats["prompt_tokens"] - stats["cached_tokens"]) * 2.0 + stats["cached_tokens"] * 0.5
              + stats["completion_tokens"] * 8.0) / 1e6
    uncached = (stats["prompt_tokens"] * 2.0 + stats["completion_tokens"] * 8.0) / 1e6
    assert t["cost_usd"] == pytest.approx(billed, abs=1e-6) and t["cost_usd_uncached"] == pytest.approx(uncached, abs=1e-6)
    assert sum(r["cached_input_tokens"] for r in rows) == stats["cached_tokens"]
    for r in rows:
        assert r["cost_usd_uncached"] >= r["cost_usd"] > 0
        assert 0 <= r["judge_s"] and 0 <= r["quota_wait_s"] and 0 <= r["shared_wait_s"]
        assert r["judge_s"] + r["quota_wait_s"] + r["shared_wait_s"] <= r["latency_s"] + 1e-3
    agent = summary["per_agent_method"][0]
    assert agent["cached_input_tokens"] == stats["cached_tokens"]


def test_batch_run_makes_no_synchronous_call_and_costs_half(tmp_path, capsys):
    with MockServerProcess(MockConfig(batch_delay=0.2)) as mock:
        code, summary, rows = _run(tmp_path, mock, "--batch", "--batch-window", "0.2", "--batch-poll", "0.1")
        stats = mock.stats()
    capsys.readouterr()
    t = summary["totals"]
    assert code == 0 and stats["requests"] == 0 and t["synchronous_calls"] == 0
    assert all(r["status"] == "ok" for r in rows) and len(rows) == 10
    assert t["batched_calls"] == t["calls"] == stats["batch_answered"] and stats["batch_resubmitted"] == 0
    sync = (stats["batch_prompt_tokens"] * 2.0 + stats["batch_completion_tokens"] * 8.0) / 1e6
    assert t["cost_usd"] == pytest.approx(sync / 2, abs=1e-6)
    # ACE: the checklist step comes first, its items after: at least two rounds of batches
    assert t["batches"]["completed"] >= 2


def test_dry_run_with_batch_prices_at_batch_rates(tmp_path, capsys):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    args = ["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"), "--reports",
            str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--dry-run", "--judge-url", "http://127.0.0.1:9/v1",
            "--judge-model", "mock-judge", "--prices", str(prices), "--cache", str(tmp_path / "c"), "--json"]
    assert main(args) == 0
    sync = json.loads(capsys.readouterr().out)["totals"]
    assert main(args + ["--batch"]) == 0
    batch = json.loads(capsys.readouterr().out)["totals"]
    assert batch["priced_as"] == "batch" and sync["priced_as"] == "synchronous"
    assert batch["planned_cost_usd"] == pytest.approx(sync["planned_cost_usd"] / 2, rel=1e-9)
