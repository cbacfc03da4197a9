"""``drscore run`` against endpoints that say hostile or useless things (issue 26): delay
hints that cannot be believed, credentials in the judge URL, and every request failing
with the same request fault.

Each command runs as a real subprocess with a timeout, so a hang fails the test instead
of stalling the suite, and both output streams are what a user would see."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

from drscore.judge.mock.scripted import ScriptedJudge
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def _run(url: str, tmp: Path, *extra: str, methods: str = "quality", timeout: float = 120,
         model: str = "gpt-4.1", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "drscore.cli", "run", "--methods", methods,
           "--tasks", str(EXAMPLES / "tasks.jsonl"), "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"),
           "--judge-url", url, "--judge-model", model, "--cache", str(tmp / "cache"), "--out", str(tmp / "run"),
           *extra]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout)


def _summary(tmp: Path) -> dict:
    return json.loads((tmp / "run" / "summary.json").read_text())


def test_retry_after_inf_waits_the_bound_and_the_run_says_so(tmp_path):
    # Before: Retry-After: inf paused every caller for ever (the run never ended).
    with MockServerProcess(MockConfig(rpm=240, profile="vllm", rate_limit_hint="inf")) as mock:
        proc = _run(mock.url, tmp_path, "--max-rate-limit-wait", "0.5", timeout=90)
        served = mock.stats()
    assert proc.returncode == 0, proc.stderr
    totals = _summary(tmp_path)["totals"]
    assert served["rate_limited"] >= 1 and totals["items"] == 10 and totals["items_failed"] == 0
    assert totals["unusable_rate_limit_hints"] == {"count": served["rate_limited"], "last": "Retry-After: inf",
                                                   "waited_s": 0.5}
    assert "cannot be believed (Retry-After: inf); waited --max-rate-limit-wait 0.5 s instead" in proc.stdout


# -- credentials in the judge URL ----------------------------------------------------------

PASSWORD = "pw-5c1e9a0b77"


def test_url_credentials_with_a_key_in_the_same_header_are_refused_at_start(tmp_path):
    # Before: aiohttp refused to combine the two and every item failed as "internal error".
    with ScriptedJudge("ok") as judge:
        url = judge.url.replace("http://", f"http://drscore:{PASSWORD}@")
        proc = _run(url, tmp_path, "--api-key-env", "DRSCORE_TEST_KEY",
                    env={"DRSCORE_TEST_KEY": "drscore-test-key-0123456789"})
        sent = judge.requests
    assert proc.returncode != 0 and sent == 0
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "carries a user and password" in errors[0] and "$DRSCORE_TEST_KEY is set" in errors[0]
    assert "drscore:[REDACTED]@" in errors[0]
    assert PASSWORD not in proc.stdout + proc.stderr and "internal error" not in proc.stdout + proc.stderr


def test_url_credentials_without_a_key_are_sent_as_basic_auth_and_shown_nowhere(tmp_path):
    # The echo judge repeats the Authorization header it received into every free-text field.
    with ScriptedJudge("echo") as judge:
        url = judge.url.replace("http://", f"http://drscore:{PASSWORD}@")
        proc = _run(url, tmp_path, "--api-key-env", "DRSCORE_UNSET_KEY", env={"DRSCORE_UNSET_KEY": ""})
    assert proc.returncode == 0, proc.stderr
    basic = base64.b64encode(f"drscore:{PASSWORD}".encode()).decode()
    stored = "".join(p.read_text(errors="replace") for p in (tmp_path / "run").rglob("*") if p.is_file())
    assert "you sent Basic [REDACTED]" in stored  # the header arrived, and its echo is masked
    assert basic not in stored and PASSWORD not in stored and PASSWORD not in proc.stdout + proc.stderr


def test_url_credentials_with_the_sdk_transport_are_refused_at_start(tmp_path):
    proc = _run(f"http://drscore:{PASSWORD}@127.0.0.1:9/v1", tmp_path, "--transport", "sdk")
    assert proc.returncode != 0
    assert "which --transport sdk cannot send; use --transport http" in proc.stderr
    assert PASSWORD not in proc.stdout + proc.stderr
