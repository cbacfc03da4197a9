"""``drscore run`` against Gemini's stand-in (the mock's ``gemini`` profile at its compatible
path) with a told token quota, as a user points it at Gemini: each prompt is counted at
Gemini's native countTokens first (the key in Google's header), and the quota is charged the
prompts alone, as Gemini's input-token quota is."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def test_a_told_quota_at_gemini_counts_each_prompt_first_and_charges_the_prompt_alone(tmp_path):
    # 10 quality calls of about 5,000-27,000 tokens against 300,000 input tokens a minute (a
    # one-second bucket of 5,000): the quota binds, and each call must be paced on its count.
    with MockServerProcess(MockConfig(profile="gemini", tpm=300_000, tpm_charge="input", latency=0.2)) as mock:
        cmd = [sys.executable, "-m", "drscore.cli", "run", "--methods", "quality",
               "--tasks", str(EXAMPLES / "tasks.jsonl"), "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"),
               "--judge-url", f"{mock.base}/v1beta/openai/", "--judge-model", "gemini-2.5-flash",
               "--api-key-env", "GEMINI_API_KEY", "--tpm", "300000", "--tpm-charge", "input",
               "--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "run")]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                              env={**os.environ, "GEMINI_API_KEY": "test-gemini-key-7f3a"})
        served = mock.stats()
    assert proc.returncode == 0, proc.stderr
    totals = json.loads((tmp_path / "run" / "summary.json").read_text())["totals"]
    assert totals["items"] == 10 and totals["items_failed"] == 0
    # every call was counted first: the countTokens route took the key (a bearer token there
    # is answered 401 and the route given up), and none was refused by the quota
    assert served["ok"] == 10 and served["tokenize_requests"] == served["requests"] == 10
    assert served["rate_limited"] == 0
    # the calls waiting for quota asked a few counts at a time, not all nine after the first at once
    assert 1 <= served["max_counting"] <= 4
    # what the quota kept is the prompts, not the answers
    assert served["quota_tokens"] == served["prompt_tokens"] < served["prompt_tokens"] + served["completion_tokens"]
    assert "test-gemini-key-7f3a" not in proc.stdout + proc.stderr
