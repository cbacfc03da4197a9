"""``drscore run`` against endpoints that say hostile or useless things (issue 26): delay
hints that cannot be believed, credentials in the judge URL, and every request failing
with the same request fault.

Each command runs as a real subprocess with a timeout, so a hang fails the test instead
of stalling the suite, and both output streams are what a user would see."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
