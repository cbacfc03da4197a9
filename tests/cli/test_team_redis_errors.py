"""``drscore run --redis`` against a Redis at its memory limit finishes its work, says so
at once and at the end, records the reason in summary.json and exits 3; ``--redis-ttl``
sets how long shared answers live."""
from __future__ import annotations

import json

import redis

from drscore.cli import main
from drscore.engine.runtime.calls.team.local_server import LocalRedis
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def _argv(mock_url: str, redis_url: str, tmp_path, *extra: str) -> list[str]:
    return ["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"), "--limit", "3",
            "--reports", str(EXAMPLES / "reports.claude-first-half.jsonl"), "--judge-url", mock_url,
            "--judge-model", "mock", "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "run"),
            "--redis", redis_url, *extra]


def test_redis_out_of_memory_exits_3_with_the_reason(tmp_path, capsys):
    with LocalRedis() as server, MockServerProcess(MockConfig()) as mock:
        client = redis.Redis.from_url(server.url)
        client.config_set("maxmemory", "1")
        try:
            code = main(_argv(mock.url, server.url, tmp_path))
        finally:
            client.config_set("maxmemory", "0")
            client.close()
    err = capsys.readouterr().err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert code == 3
    assert summary["totals"]["items"] == 3 and summary["totals"]["items_failed"] == 0  # the work was done
    team = summary["team"]
    assert team["degraded"] is True and team["out_of_memory"] is True
    assert team["degraded_reason"].startswith("Redis out of memory: command not allowed")
    warnings = [line for line in err.splitlines() if line.startswith("drscore: warning:")]
    assert len(warnings) == 1 and "out of memory" in warnings[0]  # once, when it happened
    assert err.strip().splitlines()[-1].startswith("drscore: team: Redis out of memory")


def test_redis_ttl_sets_the_lifetime_of_shared_answers(tmp_path, redis_url):
    with MockServerProcess(MockConfig()) as mock:
        assert main(_argv(mock.url, redis_url, tmp_path, "--redis-ttl", "2")) == 0
    client = redis.Redis.from_url(redis_url)
    try:
        answers = list(client.scan_iter("drscore:c:*"))
        assert len(answers) == 3
        two_days_ms = 2 * 86_400_000
        assert all(two_days_ms - 60_000 < client.pttl(k) <= two_days_ms for k in answers)
    finally:
        client.close()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["team"]["answer_ttl_s"] == 2 * 86_400 and summary["team"]["degraded"] is False


def test_redis_ttl_out_of_range_is_refused(tmp_path, capsys):
    assert main(_argv("http://127.0.0.1:9/v1", "redis://127.0.0.1:9/0", tmp_path, "--redis-ttl", "0")) == 1
    assert "--redis-ttl must be a number from 0 (exclusive) to 3,650" in capsys.readouterr().err
