"""Processes sharing one cache pay once per call (issue 8).

Several real ``drscore run`` processes start at the same moment on the same inputs with
one ``--cache`` (each with its own ``--out``) against the mock judge with latency. The
mock counts what it answered: distinct requests, and requests answered more than once
(paid twice). One process alone on a fresh cache gives the reference wall time.

    .venv/bin/python -m bench.shared_cache [--processes 3 --latency 0.2 --concurrency 4]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench.machine import machine
from drscore.judge.mock.server import MockConfig, MockServerProcess

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _cmd(url: str, cache: Path, out: Path, concurrency: int) -> list[str]:
    return [sys.executable, "-m", "drscore.cli", "run", "--methods", "quality,redundancy",
            "--tasks", str(EXAMPLES / "tasks.jsonl"), "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"),
            "--judge-url", url, "--judge-model", "mock", "--concurrency", str(concurrency),
            "--cache", str(cache), "--out", str(out), "--json"]


def _run_together(url: str, cache: Path, outs: list[Path], concurrency: int) -> tuple[float, list[dict]]:
    env = {**os.environ, "CI": "1"}
    t0 = time.monotonic()
    procs = [subprocess.Popen(_cmd(url, cache, out, concurrency), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL) for out in outs]
    summaries = []
    for p in procs:
        stdout, _ = p.communicate(timeout=900)
        if p.returncode != 0:
            raise SystemExit(f"a run failed with exit status {p.returncode}")
        summaries.append(orjson.loads(stdout))
    return time.monotonic() - t0, summaries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.2, help="mock judge latency (s)")
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, \
            MockServerProcess(MockConfig(latency=args.latency, jitter=args.latency / 4, seed=5)) as mock:
        tmp_path = Path(tmp)
        alone_s, _ = _run_together(mock.url, tmp_path / "cache-alone", [tmp_path / "alone"], args.concurrency)
        alone = mock.stats()
        mock.reset()
        outs = [tmp_path / f"run{i}" for i in range(args.processes)]
        together_s, summaries = _run_together(mock.url, tmp_path / "cache-shared", outs, args.concurrency)
        shared = mock.stats()
    print(orjson.dumps({
        "benchmark": "shared_cache",
        "processes": args.processes, "mock_latency_s": args.latency, "concurrency": args.concurrency,
        "one_process": {"wall_s": round(alone_s, 2), "answered": alone["ok"]},
        "together": {
            "wall_s": round(together_s, 2),
            "distinct_requests": shared["distinct_requests"],
            "answered": shared["ok"],
            "answered_twice": shared["duplicate_ok"],
            "paid_per_process": [s["totals"]["calls"] for s in summaries],
            "from_other_processes_per_process": [s["cache"]["answers_from_other_processes"] for s in summaries],
            "cache_hits_per_process": [s["totals"]["cache_hits"] for s in summaries],
            "items_failed": sum(s["totals"]["items_failed"] for s in summaries),
        },
        "machine": machine(),
    }).decode())


if __name__ == "__main__":
    main()
