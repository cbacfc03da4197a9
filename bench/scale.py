"""Peak memory and wall time of a whole run against the number of reports.

Each size runs in a fresh Python process (so its peak RSS, ``ru_maxrss``, is its own):
a synthetic suite of ``n`` distinct short reports (10 agents x n/10 tasks by default, ``--agents 1`` for n tasks; 3 paragraphs
each, fixed texts) scored with one method (quality) through the public API into a run
directory, exactly what ``drscore run`` does. Sizes run with the offline judge; ``--mock``
sizes run against the project's mock judge (zero latency, in its own process) with the
cache on, so every judge call goes through the pool, the HTTP client and the cache.

    .venv/bin/python -m bench.scale [--sizes 1000,10000,100000] [--mock 10000] [--profile 5000]

``--profile N`` instead runs N reports offline under tracemalloc and prints the top
allocation sites still alive at the end of the run (what stays per item).

Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson

from bench.machine import machine

AGENTS = 10


def write_workload(tmp: Path, n: int, agents: int = AGENTS) -> tuple[Path, Path]:
    """``n`` distinct reports over ``n / agents`` tasks, streamed to disk (never in memory)."""
    n_tasks = max(1, n // agents)
    tasks, reports = tmp / "tasks.jsonl", tmp / "reports.jsonl"
    with open(tasks, "wb") as f:
        for t in range(n_tasks):
            f.write(orjson.dumps({"task_id": f"t{t}", "prompt": f"Research question number {t}: "
                                  f"what changed in market {t % 97} and why?"}) + b"\n")
    with open(reports, "wb") as f:
        for i in range(n):
            t = i // agents
            text = (f"# Report {i}\n\nFinding {i} about market {t % 97} is summarised here with evidence "
                    f"from source {i % 13}.\n\nA second paragraph discusses implication {i * 7 % 101} "
                    f"and its limits.\n\nA third paragraph weighs option {i % 5} against option {i % 7}.")
            f.write(orjson.dumps({"task_id": f"t{t}", "agent": f"agent{i % agents}", "report": text}) + b"\n")
    return tasks, reports


def _peak_mb() -> float:
    """This process's peak RSS (VmHWM; ru_maxrss would include a parent's peak across exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def child(n: int, judge_url: str | None, tmp: Path, agents: int = AGENTS) -> dict[str, Any]:
    """One size in this process: write the inputs, run, report peak RSS and wall time."""
    from drscore.api import JudgeConfig, Run, RunConfig, run_async

    tasks, reports = write_workload(tmp, n, agents)
    before = _peak_mb()
    judge = (JudgeConfig(url=judge_url, model="mock", concurrency=32, cache_dir=str(tmp / "cache"))
             if judge_url else JudgeConfig(cache_dir=str(tmp / "cache")))
    cfg = RunConfig(methods=["quality"], reports=[str(reports)], tasks=str(tasks), out=str(tmp / "run"),
                    judge=judge)

    async def go() -> dict[str, Any]:
        rows = 0
        async with Run(cfg) as run:
            async for _ in run.rows():
                rows += 1
        return {"rows": rows, "failed": run.summary["totals"]["items_failed"]}

    t0 = time.monotonic()
    out = run_async(go())
    wall = time.monotonic() - t0
    return {"reports": n, "tasks": max(1, n // agents), "judge": "mock" if judge_url else "offline", **out,
            "wall_s": round(wall, 2), "reports_per_s": round(n / wall, 1),
            "peak_rss_mb": _peak_mb(), "rss_before_run_mb": before,
            "scores_jsonl_mb": round((tmp / "run" / "scores.jsonl").stat().st_size / 2**20, 1)}


def profile(n: int, tmp: Path, top: int = 15, agents: int = AGENTS) -> dict[str, Any]:
    """Run ``n`` reports offline under tracemalloc; the largest live allocation sites at
    the end of the run (before the run object is released) and the traced peak."""
    from drscore.api import JudgeConfig, Run, RunConfig, run_async

    tasks, reports = write_workload(tmp, n, agents)
    cfg = RunConfig(methods=["quality"], reports=[str(reports)], tasks=str(tasks), out=str(tmp / "run"),
                    judge=JudgeConfig(cache_dir=str(tmp / "cache")))
    tracemalloc.start(8)
    sites: list[dict[str, Any]] = []

    async def go() -> None:
        async with Run(cfg) as run:
            async for _ in run.rows():
                pass
            snap = tracemalloc.take_snapshot()
            for stat in snap.statistics("traceback")[:top]:
                # the innermost frames: where the memory was allocated
                frames = [f"{'/'.join(f.filename.split('/')[-2:])}:{f.lineno}"
                          for f in stat.traceback][-4:]
                sites.append({"kib": round(stat.size / 1024), "blocks": stat.count, "where": frames})

    run_async(go())
    _, peak = tracemalloc.get_traced_memory()
    return {"reports": n, "traced_peak_mb": round(peak / 2**20, 1), "live_at_end": sites,
            "peak_rss_mb": _peak_mb()}


def _spawn(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "bench.scale", *args], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    if proc.returncode != 0:
        return {"args": args, "error": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="offline sizes, comma-separated")
    ap.add_argument("--mock", default="10000", help="sizes against the mock judge ('' for none)")
    ap.add_argument("--profile", type=int, default=0, help="tracemalloc profile of N reports instead")
    ap.add_argument("--agents", type=int, default=AGENTS,
                    help="agents per task (1: as many tasks as reports; memory must stay flat in tasks too)")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--judge-url", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child or args.profile:
        with tempfile.TemporaryDirectory(prefix="drscore-scale-") as tmp:
            if args.profile:
                result = profile(args.profile, Path(tmp), agents=args.agents)
            else:
                result = child(args.child, args.judge_url, Path(tmp), args.agents)
        print(json.dumps(result))
        return
    agents = ["--agents", str(args.agents)]
    results = [_spawn(["--child", str(n), *agents]) for n in _sizes(args.sizes)]
    mock_sizes = _sizes(args.mock)
    if mock_sizes:
        from drscore.judge.mock.server import MockConfig, MockServerProcess

        with MockServerProcess(MockConfig()) as mock:
            results += [_spawn(["--child", str(n), "--judge-url", mock.url, *agents]) for n in mock_sizes]
    offline = {r["reports"]: r for r in results if r.get("judge") == "offline"}
    ratios = {}
    if 10000 in offline and 100000 in offline:
        ratios["peak_100k_over_10k"] = round(offline[100000]["peak_rss_mb"] / offline[10000]["peak_rss_mb"], 2)
    print(json.dumps({"benchmark": "scale", "method": "quality", "agents": args.agents, "runs": results,
                      **ratios, "machine": machine(), "pid": os.getpid()}, indent=2))


def _sizes(spec: str) -> list[int]:
    return [int(s) for s in spec.split(",") if s.strip()]


if __name__ == "__main__":
    main()
