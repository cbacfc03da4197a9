"""Event-loop stall while fetching and extracting big pages.

A ticker task sleeps 5 ms in a loop and records the gap between its wake-ups while
FetchPool fetches and extracts N pages of about 500 KB from a local server process.
The largest gap is the worst time the loop could not run anything else (target: under
50 ms). For contrast it also times one extraction run inline, which is what the loop
would suffer per page if extraction were not in worker processes.

    .venv/bin/python -m bench.fetch_stall [--pages 200] [--kb 500]

Prints one JSON object.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.fetch_throughput import _paragraphs, make_page, page_server, warm_workers
from bench.machine import machine

TICK_S = 0.005
TARGET_MS = 50.0


async def ticker(stop: asyncio.Event, gaps: list[tuple[float, float]]) -> None:
    """Sleep TICK_S repeatedly; record each actual gap between wake-ups and the CPU time
    the loop thread itself used during it. A long gap with little loop CPU means the
    process was waiting for a core (a busy machine), not that our code blocked."""
    loop = asyncio.get_running_loop()
    last, last_cpu = loop.time(), time.thread_time()
    while not stop.is_set():
        await asyncio.sleep(TICK_S)
        now, cpu = loop.time(), time.thread_time()
        gaps.append((now - last, cpu - last_cpu))
        last, last_cpu = now, cpu


async def run(pages: int, kb: int, workers: int, concurrency: int) -> dict:
    from drscore.fetch.extract import html_to_text
    from drscore.fetch.pool import FetchPool, make_extract_executor

    executor = make_extract_executor(workers)
    await asyncio.to_thread(warm_workers, executor, workers)
    size = kb * 1000
    with page_server(pages, size, size) as (base, total_bytes), \
            tempfile.TemporaryDirectory() as cache:
        stop, gaps = asyncio.Event(), []
        tick = asyncio.create_task(ticker(stop, gaps))
        await asyncio.sleep(0.05)  # let the ticker settle
        t0 = time.perf_counter()
        async with FetchPool(Path(cache), allow_networks=["127.0.0.1/32"], executor=executor,
                             concurrency=concurrency, per_host_concurrency=concurrency,
                             per_host_rate=100_000.0) as pool:
            results = await asyncio.gather(*(pool.get(f"{base}/p/{i}") for i in range(pages)))
        elapsed = time.perf_counter() - t0
        stop.set()
        await tick
    executor.shutdown()
    # the same work done inline, once, for contrast (not on the measured loop)
    sample = make_page(0, size, _paragraphs()).decode()
    t0 = time.perf_counter()
    html_to_text(sample)
    inline_ms = (time.perf_counter() - t0) * 1000
    gaps_ms = sorted(g * 1000 for g, _ in gaps)
    max_gap = gaps_ms[-1]
    worst_gap, worst_gap_cpu = max(gaps)
    busiest_cpu, busiest_gap = max((c, g) for g, c in gaps)
    return {
        "bench": "fetch_stall",
        "pages": pages,
        "page_kb": kb,
        "total_mb": round(total_bytes / 1e6, 1),
        "extract_workers": workers,
        "concurrency": concurrency,
        "elapsed_s": round(elapsed, 2),
        "pages_per_s": round(pages / elapsed, 1),
        "statuses": dict(Counter(r.status for r in results)),
        "ticks": len(gaps_ms),
        "tick_ms": TICK_S * 1000,
        "max_gap_ms": round(max_gap, 1),
        "p99_gap_ms": round(gaps_ms[int(0.99 * (len(gaps_ms) - 1))], 1),
        "median_gap_ms": round(statistics.median(gaps_ms), 1),
        "max_stall_ms": round(max_gap - TICK_S * 1000, 1),
        # loop-thread CPU inside the worst gap, and the most CPU the loop thread spent
        # between two ticks (our own blocking work, whatever the machine load)
        "loop_cpu_ms_in_max_gap": round(worst_gap_cpu * 1000, 1),
        "max_loop_cpu_ms_between_ticks": round(busiest_cpu * 1000, 1),
        "gap_ms_at_max_loop_cpu": round(busiest_gap * 1000, 1),
        "target_max_gap_ms": TARGET_MS,
        "within_target": max_gap < TARGET_MS,
        "inline_extraction_ms_per_page": round(inline_ms, 1),
        "machine": machine(),
    }


def main() -> None:
    from drscore.fetch.pool import default_extract_workers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--kb", type=int, default=500)
    parser.add_argument("--workers", type=int, default=default_extract_workers())
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.pages, args.kb, args.workers, args.concurrency))))


if __name__ == "__main__":
    main()
