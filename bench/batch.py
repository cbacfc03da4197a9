"""Batch API mode (issue 11) against the project's mock judge.

1. Cost: 1,000 reports (the 100 DeepResearch Bench reports x 10 distinct variants) scored
   with ``quality`` synchronously, then with ``--batch`` against the mock's Files +
   Batches endpoints: synchronous calls made in batch mode, rows scored, and the batch
   cost against the synchronous cost of the same tokens.
2. Crash safety: ``drscore run --batch`` (quality + ACE, 300 reports: several rounds of
   batches) in a child process, killed with SIGKILL each time a new batch is pending at
   the provider (twice), then the same command run to completion. The mock counts
   requests submitted in a batch while already in a live or completed batch.

    .venv/bin/python -m bench.batch [--reports 1000 --kill-reports 300]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench.machine import machine
from drscore.api import JudgeConfig, Run, RunConfig, run_async
from drscore.judge.mock.server import MockConfig, MockServerProcess

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "drb"
PRICES = {"mock-judge": {"input": 2.0, "output": 8.0}}  # binary-exact: sums compare exactly


def _workload(tmp: Path, n: int) -> list[str]:
    """``n`` distinct reports: DRB's 100, each in ceil(n/100) variants (a variant marker
    line first, so no two requests are equal and no cache hit helps)."""
    base = [orjson.loads(line) for line in (DATA / "reports.claude-3-7-sonnet.jsonl").read_bytes().splitlines()]
    files = []
    for k in range((n + len(base) - 1) // len(base)):
        rows = base[: n - k * len(base)]
        path = tmp / f"reports.{tmp.name}{k}.jsonl"
        path.write_bytes(b"".join(orjson.dumps({**r, "article": f"({tmp.name} variant {k})\n\n{r['article']}"}) + b"\n"
                                  for r in rows))
        files.append(str(path))
    return files


async def _run(cfg: RunConfig) -> tuple[float, dict, list, dict]:
    t0 = time.monotonic()
    rows = []
    async with Run(cfg) as run:
        async for row in run.rows():
            rows.append(row)
        stats = run.runner.pool.stats
        raw = {"cost_usd": stats.cost_usd, "input_tokens": stats.input_tokens, "output_tokens": stats.output_tokens}
    return time.monotonic() - t0, run.summary, rows, raw


def _cost_part(tmp: Path, mock: MockServerProcess, reports: list[str], prices: str) -> dict:
    tasks = str(DATA / "tasks.jsonl")
    common = dict(methods=["quality"], reports=reports, tasks=tasks)
    sync_cfg = RunConfig(**common, out=str(tmp / "sync"), judge=JudgeConfig(
        url=mock.url, model="mock-judge", concurrency=64, cache_dir=str(tmp / "cache-sync"), prices=prices))
    mock.reset()
    sync_s, sync_sum, sync_rows, sync_raw = run_async(_run(sync_cfg))
    sync_stats = mock.stats()
    batch_cfg = RunConfig(**common, out=str(tmp / "batch"), judge=JudgeConfig(
        url=mock.url, model="mock-judge", cache_dir=str(tmp / "cache-batch"), prices=prices, batch=True,
        batch_window_s=1.0, batch_poll_s=0.5))
    mock.reset()
    batch_s, batch_sum, batch_rows, batch_raw = run_async(_run(batch_cfg))
    batch_stats = mock.stats()
    return {
        "reports": len(batch_rows),
        "sync_calls": sync_stats["requests"], "sync_cost_usd": round(sync_raw["cost_usd"], 9),
        "sync_wall_s": round(sync_s, 2),
        "batch_mode_synchronous_calls": batch_stats["requests"],
        "batch_mode_batches": batch_stats["batches_created"], "batch_mode_batched_requests": batch_stats["batch_requests"],
        "batch_rows_scored": sum(r.status == "ok" for r in batch_rows),
        "batch_cost_usd": round(batch_raw["cost_usd"], 9), "batch_wall_s": round(batch_s, 2),
        "same_tokens": (sync_raw["input_tokens"], sync_raw["output_tokens"])
        == (batch_raw["input_tokens"], batch_raw["output_tokens"]),
        "batch_over_sync_cost": batch_raw["cost_usd"] / sync_raw["cost_usd"],
        "exactly_half": abs(batch_raw["cost_usd"] * 2 - sync_raw["cost_usd"]) < 1e-9,
        "summary_batched_calls": batch_sum["totals"]["batched_calls"],
    }


def _pending(journal: Path) -> set[str]:
    if not journal.exists():
        return set()
    try:
        with sqlite3.connect(journal, timeout=5) as db:
            return {r[0] for r in db.execute("SELECT local_id FROM batches WHERE state IN ('creating','submitted')")}
    except sqlite3.Error:
        return set()


def _kill_part(tmp: Path, mock: MockServerProcess, reports: list[str], prices: str, kills: int) -> dict:
    out, cache = tmp / "killed", tmp / "cache-kill"
    cmd = [sys.executable, "-c", "import sys; from drscore.cli import main; sys.exit(main(sys.argv[1:]))",
           "run", "--methods", "quality,ace", "--tasks", str(DATA / "tasks.jsonl"), "--out", str(out),
           "--judge-url", mock.url, "--judge-model", "mock-judge", "--prices", prices, "--cache", str(cache),
           "--batch", "--batch-window", "1", "--batch-poll", "0.5", "--json"]
    for r in reports:
        cmd += ["--reports", r]
    journal = cache / "batches.sqlite"
    mock.reset()
    killed_while_pending = []
    seen: set[str] = set()
    for _ in range(kills):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            fresh = _pending(journal) - seen
            if fresh:  # a batch this run submitted is pending at the provider: kill -9 now
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                seen |= fresh
                killed_while_pending.append(len(_pending(journal)))
                break
            time.sleep(0.05)
        else:
            proc.wait()
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True)
    final_s = time.monotonic() - t0
    summary = json.loads(done.stdout)
    stats = mock.stats()
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    return {
        "kills": len(killed_while_pending), "pending_batches_at_each_kill": killed_while_pending,
        "final_exit_code": done.returncode, "final_run_s": round(final_s, 2),
        "rows": len(rows), "rows_ok": sum(r["status"] == "ok" for r in rows),
        # rows a method rejected (the mock's random answers), not lost calls: listed by reason
        "row_errors": sorted({e for r in rows for e in r["errors"]}),
        "batches_created": stats["batches_created"], "batch_requests_submitted": stats["batch_requests"],
        "requests_submitted_twice": stats["batch_resubmitted"], "synchronous_calls": stats["requests"],
        "final_run_reattached": summary["totals"]["batches"]["reattached"],
        "final_run_answers_reused_from_journal": summary["totals"]["batches"]["requests_reused"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reports", type=int, default=1000)
    ap.add_argument("--kill-reports", type=int, default=300)
    ap.add_argument("--kills", type=int, default=2)
    ap.add_argument("--batch-delay", type=float, default=3.0, help="mock seconds per batch")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, MockServerProcess(MockConfig(batch_delay=args.batch_delay)) as mock:
        tmp = Path(d)
        prices = tmp / "prices.json"
        prices.write_text(json.dumps(PRICES))
        cost = _cost_part(tmp, mock, _workload(tmp, args.reports), str(prices))
        (tmp / "kill").mkdir()
        kill = _kill_part(tmp, mock, _workload(tmp / "kill", args.kill_reports), str(prices), args.kills)
    print(orjson.dumps({"benchmark": "batch", "mock_batch_delay_s": args.batch_delay, "cost": cost,
                        "kill9": kill, "machine": machine()}, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
