"""What verdicts.jsonl says of each judge call matches what the judge saw: every request a
call sent is one of its ``attempts`` (counted against the mock judge's own request count),
a failed call lists each with its outcome, time at the judge and waiting are apart, and the
reasoning the endpoint returned (``reasoning_content``) is kept for the viewer."""
from __future__ import annotations

import json
from pathlib import Path

from drscore.cli import main
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def test_attempts_time_and_reasoning_are_recorded_per_call(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cfg = MockConfig(poison_rate=0.1, reasoning_tokens=16, reasoning_style="field", seed=3)
    with MockServerProcess(cfg) as mock:
        code = main(["run", "--methods", "quality,redundancy", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                     "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--limit", "2",
                     "--judge-url", mock.url, "--judge-model", "mock", "--max-retries", "2",
                     "--cache", str(tmp_path / "c"), "--out", str(out)])
        stats = mock.stats()
    assert code in (0, 3)
    calls = [json.loads(x) for x in (out / "verdicts.jsonl").read_text().splitlines()]
    failed = [c for c in calls if c["status"] == "failed"]
    ok = [c for c in calls if c["status"] == "ok"]
    assert failed and ok  # the poisoned bodies fail every time, the others answer
    for c in failed:  # the first request and its 2 retries, each a 503
        assert [a["outcome"] for a in c["attempts"]] == ["server_error"] * 3
        assert all("503" in a["detail"] and a["seconds"] >= 0 for a in c["attempts"])
        assert abs(c["judge_s"] - sum(a["seconds"] for a in c["attempts"])) < 1e-3
    for c in ok:
        assert c["attempts"] == []  # one request: nothing more to list
        assert c["judge_s"] > 0 and c["quota_wait_s"] >= 0 and c["judge_s"] <= c["latency_s"] + 1e-3
        assert c["reasoning"] and c["reasoning_tokens"] > 0
    # every request the judge saw is a recorded attempt (an answered call without a list: one)
    assert stats["requests"] == sum(len(c["attempts"]) or 1 for c in calls)
