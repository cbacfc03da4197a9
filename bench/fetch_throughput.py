"""Fetch throughput: pages/s with extraction against a local page server.

Serves N realistic HTML pages (50-100 KB: navigation, scripts, styles, an article built
from real DeepResearch Bench report paragraphs, sidebar, footer; generated
deterministically) from a separate process on 127.0.0.1, then fetches them all through
FetchPool twice: cold (network + extraction in the process pool + page store writes)
and warm (a new pool on the same cache: page store reads only).

    .venv/bin/python -m bench.fetch_throughput [--pages 300] [--workers N]

Prints one JSON object.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import random
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from bench.machine import machine
from bench.shared_data import DRB, require_data

REPORTS = DRB / "reports.claude-3-7-sonnet.jsonl"


def _paragraphs() -> list[str]:
    paras: list[str] = []
    with open(REPORTS, encoding="utf-8") as f:
        for line in f:
            for p in json.loads(line)["article"].split("\n\n"):
                p = p.strip()
                if len(p) > 200 and not p.startswith(("#", "|")):
                    paras.append(p)
    return paras


def make_page(i: int, size: int, paragraphs: list[str]) -> bytes:
    """A deterministic HTML page of about ``size`` bytes (seeded by ``i``)."""
    rng = random.Random(i)
    nav = "".join(f'<li><a href="/section/{j}">Section {j}</a></li>' for j in range(40))
    head = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Page {i}'
            f'</title><script>window.dataLayer=window.dataLayer||[];function gtag(){{'
            f'dataLayer.push(arguments)}}gtag("js",new Date());</script><style>body{{font:'
            f'15px/1.5 sans-serif}} .ad{{display:none}}</style></head><body><header>'
            f'<nav><ul>{nav}</ul></nav></header><main><article><h1>Article {i}</h1>')
    tail = ('</article></main><aside><h3>Related</h3><ul><li><a href="/r/1">More</a></li>'
            '</ul></aside><footer><p>Copyright 2025 Example Media. All rights reserved.'
            '</p></footer></body></html>')
    parts = [head]
    n = len(head.encode())
    while n < size - len(tail):
        para = rng.choice(paragraphs)
        chunk = f'<p class="para-{rng.randrange(9)}">{para}</p>\n'
        if rng.random() < 0.08:
            chunk = f'<h2>Part {len(parts)}</h2>\n' + chunk
        if rng.random() < 0.05:
            chunk += '<div class="ad"><a href="/ad">Advertisement</a></div>\n'
        parts.append(chunk)
        n += len(chunk.encode())
    parts.append(tail)
    return "".join(parts).encode()


def _serve(count: int, min_size: int, max_size: int, conn) -> None:  # type: ignore[no-untyped-def]
    """Server process: generate the pages, serve them, report the port, wait for stop."""
    from aiohttp import web

    paragraphs = _paragraphs()
    sizes = random.Random(12345)
    pages = [make_page(i, sizes.randint(min_size, max_size), paragraphs) for i in range(count)]

    async def page(request: web.Request) -> web.Response:
        return web.Response(body=pages[int(request.match_info["i"])],
                            content_type="text/html", charset="utf-8")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/p/{i}", page)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        conn.send((site._server.sockets[0].getsockname()[1], sum(map(len, pages))))
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)
        await runner.cleanup()

    asyncio.run(main())


@contextlib.contextmanager
def page_server(count: int, min_size: int, max_size: int) -> Iterator[tuple[str, int]]:
    """Run the page server in its own process (so it does not share our CPU time
    slices or event loop); yields (base URL, total bytes served for all pages)."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(count, min_size, max_size, child), daemon=True)
    proc.start()
    try:
        if not parent.poll(120):
            raise RuntimeError("bench page server did not start")
        port, total = parent.recv()
        yield f"http://127.0.0.1:{port}", total
    finally:
        with contextlib.suppress(OSError):
            parent.send("stop")
        proc.join(10)
        if proc.is_alive():
            proc.terminate()


def warm_workers(executor, workers: int) -> None:  # type: ignore[no-untyped-def]
    """Start every worker before timing (process start-up is not throughput)."""
    from drscore.fetch.pool import _extract_in_worker

    futures = [executor.submit(_extract_in_worker, b"<p>warm up</p>", "html", None)
               for _ in range(workers * 2)]
    for f in futures:
        f.result()


async def run(pages: int, workers: int, concurrency: int) -> dict:
    from drscore.fetch.pool import FetchPool, make_extract_executor

    executor = make_extract_executor(workers)
    await asyncio.to_thread(warm_workers, executor, workers)
    opts = dict(allow_networks=["127.0.0.1/32"], executor=executor, concurrency=concurrency,
                per_host_concurrency=concurrency, per_host_rate=100_000.0)
    with page_server(pages, 50_000, 100_000) as (base, total_bytes), \
            tempfile.TemporaryDirectory() as cache:
        urls = [f"{base}/p/{i}" for i in range(pages)]
        async with FetchPool(Path(cache), **opts) as pool:
            t0 = time.perf_counter()
            cold = await asyncio.gather(*(pool.get(u) for u in urls))
            cold_s = time.perf_counter() - t0
        async with FetchPool(Path(cache), **opts) as pool:
            t0 = time.perf_counter()
            warm = await asyncio.gather(*(pool.get(u) for u in urls))
            warm_s = time.perf_counter() - t0
            warm_stats = pool.stats()
    executor.shutdown()
    return {
        "bench": "fetch_throughput",
        "pages": pages,
        "page_kb_range": [50, 100],
        "total_mb": round(total_bytes / 1e6, 2),
        "extract_workers": workers,
        "concurrency": concurrency,
        "cold_s": round(cold_s, 3),
        "cold_pages_per_s": round(pages / cold_s, 1),
        "cold_mb_per_s": round(total_bytes / 1e6 / cold_s, 2),
        "warm_s": round(warm_s, 3),
        "warm_pages_per_s": round(pages / warm_s, 1),
        "warm_cache_hits": warm_stats["cache_hits"],
        "statuses": dict(Counter(r.status for r in cold)),
        "same_text_warm_and_cold": all(a.text == b.text for a, b in zip(cold, warm)),
        "mean_text_kb": round(sum(len(r.text) for r in cold) / pages / 1000, 1),
        "machine": machine(),
    }


def main() -> None:
    from drscore.fetch.pool import default_extract_workers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--workers", type=int, default=default_extract_workers())
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    require_data("fetch_throughput", REPORTS)
    print(json.dumps(asyncio.run(run(args.pages, args.workers, args.concurrency))))


if __name__ == "__main__":
    main()
