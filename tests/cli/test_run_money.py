"""``drscore run`` against endpoints that cost money or fail: the --max-cost ceiling with
output-heavy and input-heavy prices, fail-fast preflight (dead port, TLS, 401, 404
model, unsupported parameter), the circuit breaker, a 429 whose reset is an hour away, and an
endpoint that echoes the API key into every kind of answer.

Each command runs as a real subprocess with a timeout, so a hang fails the test instead
of stalling the suite, and both output streams are what a user would see."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drscore.engine.runtime.calls.local_process import free_port
from drscore.judge.mock.scripted import ScriptedJudge
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"
KEY = "drscore-test-key-0123456789abcdef"  # not sk-shaped: only the configured-key rule can catch it


def _run(url: str, tmp: Path, *extra: str, methods: str = "quality,redundancy", timeout: float = 120,
         model: str = "gpt-4.1") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DRSCORE_TEST_KEY": KEY}
    cmd = [sys.executable, "-m", "drscore.cli", "run", "--methods", methods,
           "--tasks", str(EXAMPLES / "tasks.jsonl"), "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"),
           "--judge-url", url, "--judge-model", model, "--api-key-env", "DRSCORE_TEST_KEY",
           "--cache", str(tmp / "cache"), "--out", str(tmp / "run"), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def _summary(tmp: Path) -> dict:
    return json.loads((tmp / "run" / "summary.json").read_text())


def _rows(tmp: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp / "run" / "scores.jsonl").read_text().splitlines()]


# -- budget ------------------------------------------------------------------------------

@pytest.mark.parametrize("price", [
    {"input": 0.0, "output": 2000.0},  # output-heavy: the old input-only reservation overshot
    {"input": 100.0, "output": 0.0},   # input-heavy
], ids=["output-heavy", "input-heavy"])
def test_max_cost_is_a_hard_ceiling_and_a_higher_cap_resumes(tmp_path, price):
    cap = 3.0
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"priced-judge": price}))
    with MockServerProcess(MockConfig()) as mock:
        first = _run(mock.url, tmp_path, "--prices", str(prices), "--max-cost", str(cap), model="priced-judge")
        billed = mock.stats()
        # What the endpoint billed, by its own token counts and the price table.
        spent = (billed["prompt_tokens"] * price["input"] + billed["completion_tokens"] * price["output"]) / 1e6
        summary = _summary(tmp_path)
        rows = _rows(tmp_path)
        second = _run(mock.url, tmp_path, "--prices", str(prices), "--max-cost", "1000", model="priced-judge")
        after = mock.stats()
    assert first.returncode == 3, first.stderr
    assert 0 < spent <= cap + 1e-9
    assert summary["totals"]["budget_exhausted"] is True and summary["stopped"]["reason"] == "budget"
    assert summary["totals"]["cost_usd"] == pytest.approx(spent, rel=1e-6)
    failed = [r for r in rows if r["status"] == "failed"]
    assert failed and len(failed) < len(rows) == 20
    assert all(r["errors"][0].startswith("budget: ") or ": budget: " in r["errors"][0] for r in failed)
    assert "failed items by reason: budget" in first.stderr and "--max-cost" in first.stderr
    # the re-run with a higher cap finishes without paying any answer twice
    assert second.returncode == 0, second.stderr
    assert after["duplicate_ok"] == 0 and after["ok"] > billed["ok"]
    assert all(r["status"] != "failed" for r in _rows(tmp_path))


# -- fail fast ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode, cause", [
    ("dead", "connection refused"),
    ("tls", "TLS/SSL error"),  # https:// to a plain-HTTP server
    ("401", "authentication failed"),
    ("404model", "model not found"),
    ("unsupported", "rejects a request parameter"),
    # 429s no wait passes: OpenAI's insufficient_quota, and Gemini's quota of 0 for the model
    ("no_credit", "credit or spending limit is used up"),
    ("zero_quota", "quota for this model is 0"),
])
def test_a_broken_endpoint_stops_at_the_first_call_with_one_message(tmp_path, mode, cause):
    if mode == "dead":
        url, judge = f"http://127.0.0.1:{free_port()}/v1", None
        proc = _run(url, tmp_path, timeout=60)
    elif mode == "tls":
        with ScriptedJudge("ok") as judge:
            url = judge.url.replace("http://", "https://")
            proc = _run(url, tmp_path, timeout=60)
        assert judge.requests == 0  # the handshake failed: no request was ever read
    else:
        with ScriptedJudge(mode) as judge:
            url = judge.url
            proc = _run(url, tmp_path, timeout=60)
        # the preflight only (before: one request per item); an unsupported parameter is
        # first adapted to once (judge/wire.py), and the same refusal again stops the run
        assert judge.requests == (2 if mode == "unsupported" else 1)
    assert proc.returncode == 1
    # the run directory is announced when the run starts; after it, one line says what broke
    lines = [ln for ln in proc.stderr.strip().splitlines() if not ln.startswith("run directory: ")]
    assert len(lines) == 1 and url in lines[0] and cause in lines[0], proc.stderr
    assert proc.stdout.strip() == ""
    rows = _rows(tmp_path)
    assert len(rows) == 20 and all(r["status"] == "failed" for r in rows)
    assert _summary(tmp_path)["stopped"]["fatal"] is True


def test_the_circuit_breaker_stops_a_run_whose_calls_keep_failing_the_same_way(tmp_path):
    with ScriptedJudge("500") as judge:
        proc = _run(judge.url, tmp_path, "--concurrency", "2", timeout=120)
        sent = judge.requests
    assert proc.returncode == 1
    assert "10 consecutive calls failed" in proc.stderr and "HTTP 500" in proc.stderr
    # 10 failures in a row trip it; at most the other call in flight is sent after that,
    # where 110 calls x 6 attempts would have been sent before.
    assert 10 <= sent <= 12
    assert "all 20 items failed for this reason" in proc.stderr


# -- bounded waits -----------------------------------------------------------------------

@pytest.mark.parametrize("mode, resets", [("429", "1h0m0s"), ("daily429", "23h59m1"),
                                          # Gemini's 20 s retryDelay beside a spent daily quota: not believed
                                          ("gemini_daily429", "the daily quota (250 requests per day) is spent"),
                                          # Azure API Management's spent quota is a 403: not the key
                                          ("apim403", "123h23m11s"),
                                          # OpenRouter's free models spent for the day (its X-RateLimit-Reset)
                                          ("openrouter_daily429", "the daily quota (50 requests per day) is spent")])  # 5 days 3 h 23 min 11 s
def test_a_429_resetting_beyond_the_max_wait_stops_with_rate_limit_and_resumes(tmp_path, mode, resets):
    with ScriptedJudge(mode, retry_after=3600, ok_before_429=3) as judge:
        # A daily quota comes back at midnight (Pacific for Gemini, UTC for OpenRouter): within
        # the default wait of 300 s before it, the run would wait for it (a CI run at 07:55 UTC
        # did, and timed out). One second of wait is beyond every reset here but the last second.
        first = _run(judge.url, tmp_path, "--concurrency", "1", "--max-rate-limit-wait", "1", methods="quality",
                     timeout=60)
        summary = _summary(tmp_path)
        rows = _rows(tmp_path)
        judge.mode = "ok"  # the quota is back
        before = judge.requests
        second = _run(judge.url, tmp_path, methods="quality", timeout=60)
        resent = judge.requests - before
    assert first.returncode == 3, first.stderr
    assert (f"the quota resets in {resets}" if "daily quota" not in resets else resets) in first.stderr
    assert "UTC" in first.stderr
    assert summary["stopped"]["reason"] == "rate_limit" and summary["stopped"]["resets_at"] > 0
    assert [r["status"] for r in rows].count("ok") == 3
    assert all(r["errors"][0].startswith("rate_limit: ") for r in rows if r["status"] == "failed")
    assert "failed items by reason: rate_limit 7" in first.stderr
    assert second.returncode == 0 and resent == 7  # the 3 answered items came from the cache


def test_default_concurrency_is_not_one_when_no_quota_is_given(tmp_path):
    # A judge that never answers: with a 1 s timeout and one retry, 20 items at the
    # default concurrency stop on the breaker in a few timeouts' time, not 20 x 2 x 1 s.
    with ScriptedJudge("hang") as judge:
        proc = _run(judge.url, tmp_path, "--timeout", "1", "--max-retries", "1", methods="quality", timeout=60)
        peak = judge.max_in_flight
    assert proc.returncode == 1 and "within 1 s (--timeout)" in proc.stderr
    assert peak > 1


# -- keys --------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["401", "400", "500", "html200", "echo"])
def test_an_endpoint_echoing_the_key_never_gets_it_written_or_printed(tmp_path, mode):
    with ScriptedJudge(mode) as judge:
        proc = _run(judge.url, tmp_path, "--max-retries", "1", timeout=120)
        assert judge.requests >= 1
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "scores.jsonl" for p in written) and any(p.name == "judge.sqlite" for p in written)
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in proc.stdout and KEY not in proc.stderr
    if mode == "echo":  # the answers were used, with the echoed key masked
        assert proc.returncode == 0
        assert b"[REDACTED]" in (tmp_path / "run" / "verdicts.jsonl").read_bytes()
    else:
        assert "[REDACTED]" in proc.stderr
