"""A run's life as a user lives it, against the project's mock judge: ``drscore run`` as a
subprocess (budget stops, re-runs, Ctrl-C, ``kill -9``, resume), with what the mock
itself billed (its own token counts x the price table, as ``bench/budget.py``) beside
what the run reports. Used by the journey tests and ``bench/ledger.py``."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from drscore.engine.reporting.view_index import ViewIndex
from drscore.engine.runtime.calls.ledger import read_totals
from drscore.judge.mock.server import MockServerProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PRICE = {"input": 2.0, "output": 8.0}  # gpt-4.1's list prices, USD per million tokens
MODEL = "journey-judge"


class Journey:
    """One run directory and cache, run again and again against one mock judge."""

    def __init__(self, tmp: Path, mock: MockServerProcess, *, methods: str = "quality,redundancy",
                 reports: Path = EXAMPLES / "reports.claude-3-7-sonnet.jsonl", tasks: Path = EXAMPLES / "tasks.jsonl",
                 concurrency: int = 4) -> None:
        self.tmp, self.mock, self.methods, self.reports, self.concurrency = tmp, mock, methods, reports, concurrency
        self.tasks = tasks
        self.prices = tmp / "prices.json"
        self.prices.write_text(json.dumps({MODEL: PRICE}))
        self.out = tmp / "run"
        with open(reports, encoding="utf-8") as f:
            self.items = sum(1 for line in f if line.strip()) * len(methods.split(","))

    def cmd(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "drscore.cli", "run", "--methods", self.methods,
                "--tasks", str(self.tasks), "--reports", str(self.reports),
                "--judge-url", self.mock.url, "--judge-model", MODEL, "--prices", str(self.prices),
                "--concurrency", str(self.concurrency), "--cache", str(self.tmp / "cache"), "--out", str(self.out),
                *extra]

    def _env(self) -> dict[str, str]:
        return {**os.environ, "OPENAI_API_KEY": "journey-key-0123456789", "CI": "1"}

    def run(self, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.cmd(*extra), capture_output=True, text=True, env=self._env(), timeout=timeout,
                              cwd=ROOT)

    def interrupted(self, sig: int, after_calls: int, *extra: str, twice: bool = False
                    ) -> subprocess.CompletedProcess[str]:
        """Start the command, send ``sig`` once the mock has answered ``after_calls`` more
        requests (``twice``: and again at once, as an impatient user), and wait until the
        mock has answered everything the client sent."""
        start = self.mock.stats()["ok"]
        proc = subprocess.Popen(self.cmd(*extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self._env(), cwd=ROOT)
        deadline = time.monotonic() + 120
        while self.mock.stats()["ok"] < start + after_calls:
            if proc.poll() is not None:
                raise AssertionError(f"the run ended before it could be interrupted: {proc.stderr.read()[-2000:]}"
                                     if proc.stderr else "the run ended before it could be interrupted")
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError("the run made no progress")
            time.sleep(0.01)
        proc.send_signal(sig)
        if twice:
            time.sleep(0.02)
            proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
        while self.mock.stats()["in_flight"]:  # the server still answers (and bills) what the dead client sent
            time.sleep(0.01)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)

    def kill9(self, after_calls: int, *extra: str) -> subprocess.CompletedProcess[str]:
        return self.interrupted(signal.SIGKILL, after_calls, *extra)

    # -- what was billed, what the run says --------------------------------------------
    def billed(self) -> float:
        """USD the mock billed: its own token counts at the price table's rates."""
        s = self.mock.stats()
        return (s["prompt_tokens"] * PRICE["input"] + s["completion_tokens"] * PRICE["output"]) / 1e6

    def ledger(self) -> dict[str, Any]:
        totals = read_totals(self.out)
        assert totals is not None, "the run wrote no ledger.jsonl"
        return totals

    def reported(self) -> float:
        """The run's total as its ledger (and every report of it) states it."""
        return float(self.ledger()["run"]["cost_usd"])

    def bound(self) -> float:
        """What the run says may have been billed beyond its total (calls lost in flight)."""
        t = self.ledger()
        return float(t["interrupted_in_flight"]["up_to_usd"] + t["outcome_unknown"]["up_to_usd"])

    def largest_call(self) -> float:
        """The most one paid call cost (the ledger's lines)."""
        from drscore.engine.runtime.calls.ledger import iter_paid

        return max((p.cost_usd for p in iter_paid(self.out / "ledger.jsonl")), default=0.0)

    def summary(self) -> dict[str, Any]:
        return json.loads((self.out / "summary.json").read_text())

    def rows(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.out / "scores.jsonl").read_text().splitlines() if line.strip()]

    def verdicts(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.out / "verdicts.jsonl").read_text().splitlines() if line.strip()]

    def row_keys(self) -> set[tuple[str, str, str]]:
        return {(r["task_id"], r["agent"], r["method"]) for r in self.rows()}


def viewer_rows(index: ViewIndex) -> set[tuple[str, str, str]]:
    """The rows ``drscore view`` shows, after its refresh (every page of them)."""
    from drscore.engine.reporting.view_index import RowQuery

    index.refresh()
    total = index.facets()["rows"]
    page = index.page(RowQuery(limit=max(1, total)))
    return {(r["task"], r["agent"], r["method"]) for r in page["rows"]}
