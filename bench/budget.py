"""Money and fail-fast benchmark (issue 8).

(a) ``--max-cost`` against the mock judge, run as a user runs it (the CLI in a
    subprocess): for each price table, the cap, what the endpoint billed (the mock's own
    token counts x the table), the exit status, ``budget_exhausted``, items scored and
    items failed with reason ``budget``; then the same command with a higher cap, which
    must resume from the cache without paying any answer twice.
(b) Time to fail: wall time of ``drscore run`` (subprocess, Python start-up included;
    ``drscore --version`` is timed too for reference) against a dead port, an endpoint
    answering 401, one answering 404 for the model, and one that never answers (with
    ``--timeout 5``), with the requests each received.

    .venv/bin/python -m bench.budget [--reports FILE --tasks FILE --n 20]

The workload is the issue's reproduction: the first ``--n`` DeepResearch Bench reports of
``../shared/data/drb`` with quality and redundancy. Without that data the bundled
``examples/`` are used (and the JSON says so).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.machine import machine
from bench.shared_data import DRB
from drscore.engine.runtime.calls.local_process import free_port
from drscore.judge.mock.scripted import ScriptedJudge
from drscore.judge.mock.server import MockConfig, MockServerProcess

ROOT = Path(__file__).resolve().parents[1]

SHAPES = {
    # gpt-4.1's own prices (the issue's case; the mock counts fewer tokens than OpenAI, so a lower cap)
    "gpt-4.1": ({"input": 2.0, "output": 8.0}, 0.20),
    "output-heavy": ({"input": 0.0, "output": 1000.0}, 2.0),
    "input-heavy": ({"input": 100.0, "output": 0.0}, 2.0),
}


def _cmd(url: str, tmp: Path, reports: Path, tasks: Path, model: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "drscore.cli", "run", "--methods", "quality,redundancy", "--tasks", str(tasks),
            "--reports", str(reports), "--judge-url", url, "--judge-model", model, "--rpm", "6000",
            "--cache", str(tmp / "cache"), "--out", str(tmp / "run"), "--json", *extra]


def _timed(cmd: list[str], timeout: float = 600) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OPENAI_API_KEY": "bench-key-0123456789"})
    return time.perf_counter() - t0, proc


def budget_case(name: str, price: dict[str, float], cap: float, reports: Path, tasks: Path) -> dict:
    with tempfile.TemporaryDirectory() as d, MockServerProcess(MockConfig()) as mock:
        tmp = Path(d)
        table = tmp / "prices.json"
        table.write_text(json.dumps({"bench-judge": price}))
        cmd = _cmd(mock.url, tmp, reports, tasks, "bench-judge", "--prices", str(table))
        wall, proc = _timed(cmd + ["--max-cost", str(cap)])
        s = mock.stats()
        billed = (s["prompt_tokens"] * price["input"] + s["completion_tokens"] * price["output"]) / 1e6
        summary = json.loads(proc.stdout)
        t = summary["totals"]
        wall2, proc2 = _timed(cmd + ["--max-cost", str(cap * 1000)])
        s2 = mock.stats()
        t2 = json.loads(proc2.stdout)["totals"]
    return {
        "prices_usd_per_mtok": price, "cap_usd": cap, "billed_by_endpoint_usd": round(billed, 6),
        "client_cost_usd": t["cost_usd"], "over_cap_usd": round(max(0.0, billed - cap), 6),
        "unused_usd": round(cap - billed, 6), "exit": proc.returncode, "budget_exhausted": t["budget_exhausted"],
        "items": t["items"], "items_failed": t["items_failed"], "failure_reasons": t["failure_reasons"],
        "requests": s["requests"], "wall_s": round(wall, 2),
        "rerun_higher_cap": {"exit": proc2.returncode, "items_failed": t2["items_failed"],
                             "requests": s2["requests"] - s["requests"], "paid_twice": s2["duplicate_ok"],
                             "wall_s": round(wall2, 2)},
    }


def fail_case(kind: str, reports: Path, tasks: Path) -> dict:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if kind == "dead_port":
            wall, proc = _timed(_cmd(f"http://127.0.0.1:{free_port()}/v1", tmp, reports, tasks, "gpt-4.1"), 900)
            sent = None
        elif kind == "never_answers":  # --timeout 5: the probe times out, then one wave, then the breaker
            with ScriptedJudge("hang") as judge:
                wall, proc = _timed(_cmd(judge.url, tmp, reports, tasks, "gpt-4.1", "--timeout", "5"), 900)
                sent = judge.requests
        else:
            with ScriptedJudge({"401": "401", "404_model": "404model"}[kind]) as judge:
                wall, proc = _timed(_cmd(judge.url, tmp, reports, tasks, "gpt-4.1"), 900)
                sent = judge.requests
    lines = proc.stderr.strip().splitlines()
    return {"time_to_fail_s": round(wall, 3), "exit": proc.returncode, "requests_received": sent,
            "message": lines[-1][:200] if lines else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reports", default=str(DRB / "reports.claude-3-7-sonnet.jsonl"))
    ap.add_argument("--tasks", default=str(DRB / "tasks.jsonl"))
    ap.add_argument("--n", type=int, default=20, help="reports to score (the first N)")
    args = ap.parse_args()
    source = "drb"
    reports_in, tasks = Path(args.reports), Path(args.tasks)
    if not reports_in.exists() or not tasks.exists():
        source = f"examples (not found: {reports_in})"
        reports_in, tasks = ROOT / "examples" / "reports.claude-3-7-sonnet.jsonl", ROOT / "examples" / "tasks.jsonl"
    with tempfile.TemporaryDirectory() as d:
        reports = Path(d) / "reports.claude-3-7-sonnet.jsonl"
        with open(reports_in, encoding="utf-8") as f:
            reports.write_text("".join(line for _, line in zip(range(args.n), f)), encoding="utf-8")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "drscore.cli", "--version"], capture_output=True, check=True)
        startup = time.perf_counter() - t0
        result = {
            "benchmark": "budget",
            "workload": {"data": source, "reports": min(args.n, sum(1 for _ in open(reports))),
                         "methods": "quality,redundancy", "rpm": 6000},
            "a_budget": {name: budget_case(name, price, cap, reports, tasks) for name, (price, cap) in SHAPES.items()},
            "b_fail_fast": {"python_startup_s": round(startup, 3),
                            **{k: fail_case(k, reports, tasks) for k in ("dead_port", "401", "404_model", "never_answers")}},
            "machine": machine(),
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
