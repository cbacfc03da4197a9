"""Engine overhead benchmark (issue 2, target b).

Zero-latency mock judge, no limits: judge calls per second through the whole engine
(input reading, runner, method, pool, cache on, run directory) versus a bare aiohttp loop
posting the same number of requests to the same server in the same run.

    .venv/bin/python -m bench.overhead [--n 3000 --concurrency 64]
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import aiohttp
import orjson

from bench.machine import machine
from bench.timing import timed_run
from drscore.api import JudgeConfig, RunConfig
from judge.mock_server import MockConfig, MockServerProcess


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


async def _bare(url: str, n: int, concurrency: int) -> float:
    body = {"model": "mock", "temperature": 0, "max_tokens": 300,
            "response_format": {"type": "json_schema", "json_schema": {"name": "V", "schema": {
                "type": "object", "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 4}},
                "required": ["score"]}}}}
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)

    async def worker(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            i = queue.get_nowait()
            payload = orjson.dumps({**body, "messages": [{"role": "user", "content": f"bare request {i}"}]})
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
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    with tempfile.TemporaryDirectory() as tmp, MockServerProcess(MockConfig()) as mock:
        tasks, reports = _workload(Path(tmp), args.n)
        bare_s = runner(_bare(mock.url, args.n, args.concurrency))
        mock.reset()
        cfg = RunConfig(methods=["quality"], reports=[str(reports)], tasks=str(tasks), out=str(Path(tmp) / "run"),
                        judge=JudgeConfig(url=mock.url, model="mock", concurrency=args.concurrency,
                                          cache_dir=str(Path(tmp) / "cache")))
        engine_s, summary = runner(timed_run(cfg))
        calls = mock.stats()["ok"]
    bare_rate, engine_rate = args.n / bare_s, calls / engine_s
    print(orjson.dumps({
        "benchmark": "overhead",
        "calls": args.n, "concurrency": args.concurrency,
        "bare_aiohttp_calls_per_s": round(bare_rate, 1),
        "engine_calls_per_s": round(engine_rate, 1),
        "engine_over_bare": round(engine_rate / bare_rate, 3),
        "engine_items": summary["totals"]["items"], "engine_failed": summary["totals"]["items_failed"],
        "engine_network_calls": calls,
        "machine": machine(),
    }, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
