"""Engine overhead benchmark (issue 2, target b).

Zero-latency mock judge, no limits: judge calls per second through the whole engine
(input reading, runner, method, pool, cache on, run directory) versus a bare aiohttp loop
posting the identical request bodies to the same server in the same run. Both share the
machine's two cores with the mock server, so absolute rates depend on request size.

    .venv/bin/python -m bench.overhead [--n 3000 --concurrency 64]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

from bench.machine import machine
from drscore.api import JudgeConfig, Run, RunConfig, run_async
from drscore.judge.mock.server import MockConfig, MockServerProcess


def _workload(tmp: Path, n: int) -> tuple[Path, Path]:
    """n distinct short reports over 50 tasks (distinct texts: no cache hit helps the engine)."""
    tasks, reports = tmp / "tasks.jsonl", tmp / "reports.jsonl"
    with open(tasks, "wb") as f:
        for t in range(50):
            f.write(orjson.dumps({"task_id": f"t{t}", "prompt": f"Research question number {t}."}) + b"\n")
    with open(reports, "wb") as f:
        for i in range(n):
            text = (f"# Report {i}\n\nFinding {i} about topic {i % 50} is summarised here with evidence.\n\n"
                    f"A second paragraph discusses implication {i * 7 % 101} and its limits.")
            f.write(orjson.dumps({"task_id": f"t{i % 50}", "agent": f"agent{i // 50}", "report": text}) + b"\n")
    return tasks, reports


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def _engine_with_memory(cfg: RunConfig, n_items: int) -> tuple[float, dict, dict]:
    """Like timed_run, recording resident memory as rows stream out: flat memory means
    the figure at 100% of the items is about the figure at 20%."""
    marks, t0 = {}, time.monotonic()
    async with Run(cfg) as run:
        done = 0
        async for _ in run.rows():
            done += 1
            for pct in (20, 50, 100):
                if done == n_items * pct // 100:
                    marks[f"rss_mb_at_{pct}pct"] = round(_rss_mb(), 1)
    return time.monotonic() - t0, run.summary, marks


def _bodies(tasks: Path, reports: Path) -> list[bytes]:
    """The exact request bodies the engine sends for this workload (same prompt, schema and
    size), so the bare loop gives the server the same work and the ratio measures only the
    client side: runner, method, pool, cache and run directory."""
    from drscore.engine.runtime.io import iter_reports, load_tasks
    from drscore.engine.runtime.calls.limits import RateLimiter
    from drscore.engine.methods.quality import QualityVerdict
    from drscore.engine.runtime.calls.pool import JudgePool
    from drscore.engine.runtime.calls.pricing import PriceTable
    from drscore.judge.http import HttpBackend
    from drscore.judge.wire import request_body

    errors: list = []
    task_map = load_tasks(tasks, errors)
    pool = JudgePool(HttpBackend("http://unused/v1", "mock"), cache=None, limiter=RateLimiter(), prices=PriceTable())
    out = []
    for r in iter_reports(reports, tasks=task_map, errors=errors):
        req, _ = pool.build("quality", QualityVerdict, {"question": task_map[r.task_id].prompt, "report": r.report})
        out.append(orjson.dumps(request_body(req, "mock")))
    return out


def _tiny_bodies(n: int) -> list[bytes]:
    """Minimal requests (a three-word prompt, a one-field schema): the cheapest possible
    work for the server, i.e. the bare client's best case."""
    schema = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 4}},
              "required": ["score"]}
    return [orjson.dumps({"model": "mock", "temperature": 0, "max_tokens": 300,
                          "messages": [{"role": "user", "content": f"bare request {i}"}],
                          "response_format": {"type": "json_schema", "json_schema": {"name": "V", "schema": schema}}})
            for i in range(n)]


async def _bare(url: str, bodies: list[bytes], concurrency: int) -> float:
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)

    async def worker(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            payload = queue.get_nowait()
            async with session.post(url + "/chat/completions", data=payload,
                                    headers={"Content-Type": "application/json"}) as r:
                await r.read()

    t0 = time.monotonic()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency * 2)) as s:
        await asyncio.gather(*(worker(s) for _ in range(concurrency)))
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, MockServerProcess(MockConfig()) as mock:
        tasks, reports = _workload(Path(tmp), args.n)
        bare_s = run_async(_bare(mock.url, _bodies(tasks, reports), args.concurrency))
        tiny_s = run_async(_bare(mock.url, _tiny_bodies(args.n), args.concurrency))
        mock.reset()
        cfg = RunConfig(methods=["quality"], reports=[str(reports)], tasks=str(tasks), out=str(Path(tmp) / "run"),
                        judge=JudgeConfig(url=mock.url, model="mock", concurrency=args.concurrency,
                                          cache_dir=str(Path(tmp) / "cache")))
        engine_s, summary, memory = run_async(_engine_with_memory(cfg, args.n))
        calls = mock.stats()["ok"]
    bare_rate, tiny_rate, engine_rate = args.n / bare_s, args.n / tiny_s, calls / engine_s
    print(orjson.dumps({
        "benchmark": "overhead",
        "calls": args.n, "concurrency": args.concurrency,
        "bare_aiohttp_calls_per_s": round(bare_rate, 1),  # the engine's own request bodies
        "engine_calls_per_s": round(engine_rate, 1),
        "engine_over_bare": round(engine_rate / bare_rate, 3),
        "bare_aiohttp_tiny_requests_calls_per_s": round(tiny_rate, 1),  # 3-word prompts: server's best case
        "engine_over_bare_tiny": round(engine_rate / tiny_rate, 3),
        "engine_items": summary["totals"]["items"], "engine_failed": summary["totals"]["items_failed"],
        "engine_network_calls": calls,
        "memory_while_streaming": memory,
        "machine": machine(),
    }, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
