"""``kill -9`` a real ``drscore run`` subprocess mid-run, run the same command again:
nothing committed is paid twice and the scores equal an uninterrupted run's."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import orjson

from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT as REPO_ROOT

ROOT = REPO_ROOT
EXAMPLES = ROOT / "examples"
CONCURRENCY = 4


def _cmd(url: str, cache: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "drscore.cli", "run", "--methods", "quality,redundancy",
            "--tasks", str(EXAMPLES / "tasks.jsonl"), "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"),
            "--judge-url", url, "--judge-model", "mock", "--concurrency", str(CONCURRENCY),
            "--cache", str(cache), "--out", str(out)]


def _scores(out: Path) -> dict:
    rows = [orjson.loads(line) for line in (out / "scores.jsonl").read_bytes().splitlines() if line]
    return {(r["task_id"], r["agent"], r["method"]): (r["score"], r["subscores"], r["status"]) for r in rows}


def test_sigkill_then_rerun_pays_nothing_twice_and_gives_identical_scores(tmp_path):
    env = {**os.environ, "CI": "1"}
    with MockServerProcess(MockConfig(latency=0.03, jitter=0.01, seed=11)) as mock:
        # Reference: one uninterrupted run.
        subprocess.run(_cmd(mock.url, tmp_path / "cache_ref", tmp_path / "ref"), check=True, env=env,
                       capture_output=True, cwd=ROOT, timeout=300)
        reference_calls = mock.stats()["ok"]
        assert reference_calls > 50
        mock.reset()

        # Interrupted run: SIGKILL once about a third of the calls are answered.
        proc = subprocess.Popen(_cmd(mock.url, tmp_path / "cache", tmp_path / "run"), env=env, cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while mock.stats()["ok"] < reference_calls // 3:
            assert proc.poll() is None, "run finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        while mock.stats()["in_flight"]:  # the server still answers calls the dead client sent
            time.sleep(0.01)
        answered_before_kill = mock.stats()["ok"]
        assert answered_before_kill < reference_calls
        with sqlite3.connect(tmp_path / "cache" / "judge.sqlite") as db:  # WAL replays committed work
            committed = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        assert 0 < committed <= answered_before_kill

        # The same command again.
        done = subprocess.run(_cmd(mock.url, tmp_path / "cache", tmp_path / "run"), env=env, cwd=ROOT,
                              capture_output=True, timeout=300)
        assert done.returncode in (0, 3), done.stderr.decode()[-2000:]
        stats = mock.stats()

    # The resumed run pays for exactly the calls missing from the cache: nothing committed
    # is asked again.
    assert stats["ok"] - answered_before_kill == reference_calls - committed
    assert stats["distinct_requests"] == reference_calls
    # Paid twice: only answers in flight or awaiting their group commit when the kill landed.
    assert stats["duplicate_ok"] == answered_before_kill - committed <= 2 * CONCURRENCY
    assert _scores(tmp_path / "run") == _scores(tmp_path / "ref")
