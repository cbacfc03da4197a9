"""FACT end to end over the 100 real DeepResearch Bench reports, with local stand-ins
for the judge and the web.

* Reports: ``../shared/data/drb/reports.claude-3-7-sonnet.jsonl``, text untouched.
* Judge: the project's mock judge (:class:`drscore.judge.mock.server.MockServerProcess`, a child
  process, OpenAI-compatible, schema-valid answers; ``--latency`` adds delay per call).
* Web: a page-server child process on 127.0.0.1 serving ``/p/<sha1(url)>`` for every
  cited URL: generated HTML (navigation, scripts, an article made of the statements
  that cite that URL between filler paragraphs of other reports, footer), 20-80 KB,
  deterministic; URLs whose SHA-1 starts with ``0`` answer 404 (about 1 in 16).
* :class:`MappedPages` (bench only) maps each cited URL to its local address and asks
  a real :class:`drscore.fetch.pool.FetchPool` (SSRF guard with ``allow_networks=
  ["127.0.0.1/32"]``, HTML extraction in its process pool, page store); the result keeps
  the URL as cited.

A cold run (empty cache: every page fetched and extracted, every judge call sent) is
followed by a warm run on the same cache (no fetch, no judge call).

    .venv/bin/python -m bench.fact_e2e [--reports N] [--latency 0] [--concurrency 64]

Prints one JSON object.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hashlib
import json
import multiprocessing
import random
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec

from bench.machine import machine
from bench.shared_data import DRB, require_data
from drscore.engine.runtime.evidence import PageResult

REPORTS = DRB / "reports.claude-3-7-sonnet.jsonl"


def url_key(url: str) -> str:
    return hashlib.sha1(url.encode("utf-8")).hexdigest()


def _statements_by_key() -> tuple[dict[str, list[str]], list[str]]:
    """sha1(url) -> statements citing it, and filler paragraphs, from the real reports."""
    from drscore.engine.text.citations import parse_citations

    by_key: dict[str, list[str]] = {}
    filler: list[str] = []
    with open(REPORTS, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["article"]
            for p in parse_citations(text).pairs:
                by_key.setdefault(url_key(p.url), []).append(p.statement)
            filler.extend(p.strip() for p in text.split("\n\n") if len(p.strip()) > 200 and p[:1] not in "#|[")
    return by_key, filler


def make_page(key: str, statements: list[str], filler: list[str]) -> bytes:
    """A deterministic page of 20-80 KB: the citing statements among filler paragraphs."""
    rng = random.Random(key)
    size = rng.randint(20_000, 80_000)
    nav = "".join(f'<li><a href="/s/{j}">Section {j}</a></li>' for j in range(30))
    head = (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>Source {key[:8]}</title>'
            '<script>var tracking = {enabled: true};</script><style>p{margin:0}</style></head><body>'
            f'<header><nav><ul>{nav}</ul></nav></header><main><article><h1>Source {key[:8]}</h1>')
    tail = '</article></main><footer><p>Copyright 2025 Example Media.</p></footer></body></html>'
    body = [f"<p>{rng.choice(filler)}</p>" for _ in range(max(1, size // 900))]
    for s in statements:
        body.insert(rng.randrange(len(body) + 1), f"<p>{s}</p>")
    page = head + "\n".join(body) + tail
    return page.encode("utf-8")


def _serve(conn) -> None:  # type: ignore[no-untyped-def]
    """Page-server process: pages generated on first request, then kept."""
    from aiohttp import web

    by_key, filler = _statements_by_key()

    @functools.lru_cache(maxsize=None)
    def page_bytes(key: str) -> bytes:
        return make_page(key, by_key.get(key, []), filler)

    async def page(request: web.Request) -> web.Response:
        key = request.match_info["key"]
        if key.startswith("0"):
            raise web.HTTPNotFound()
        return web.Response(body=page_bytes(key), content_type="text/html", charset="utf-8")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/p/{key}", page)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        conn.send(site._server.sockets[0].getsockname()[1])
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)
        await runner.cleanup()

    asyncio.run(main())


@contextlib.contextmanager
def page_server() -> Iterator[str]:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child,), daemon=True)
    proc.start()
    try:
        if not parent.poll(120):
            raise RuntimeError("bench page server did not start")
        yield f"http://127.0.0.1:{parent.recv()}"
    finally:
        with contextlib.suppress(OSError):
            parent.send("stop")
        proc.join(10)
        if proc.is_alive():
            proc.terminate()


class MappedPages:
    """Bench-only PageSource: the cited URL is fetched from its local stand-in."""

    def __init__(self, pool, base: str) -> None:  # type: ignore[no-untyped-def]
        self.pool, self.base = pool, base

    async def get(self, url: str) -> PageResult:
        result = await self.pool.get(f"{self.base}/p/{url_key(url)}")
        return msgspec.structs.replace(result, url=url, normalized_url=url)


async def one_run(reports, tasks, mock_url: str, base: str, cache: str, concurrency: int) -> dict:  # type: ignore[no-untyped-def]
    from drscore.api import JudgeConfig, open_pool
    from drscore.engine.methods.fact.method import Fact
    from drscore.engine.methods.fact.tally import fact_suite
    from drscore.engine.runtime.runner import Runner
    from drscore.fetch.pool import FetchPool

    pool, judge_cache = await open_pool(JudgeConfig(url=mock_url, model="mock", cache_dir=cache,
                                                    concurrency=concurrency))
    executor = ThreadPoolExecutor(max_workers=2)
    try:
        async with FetchPool(Path(cache), allow_networks=["127.0.0.1/32"], concurrency=32,
                             per_host_concurrency=32, per_host_rate=1e6) as fetch_pool:
            runner = Runner(tasks=tasks, methods=[Fact()], pool=pool, pages=MappedPages(fetch_pool, base),
                            executor=executor, max_in_flight=max(32, 4 * concurrency))
            t0 = time.perf_counter()
            rows = [row async for row in runner.run(reports)]
            wall = time.perf_counter() - t0
            fetch_stats = fetch_pool.stats()
    finally:
        executor.shutdown(wait=False)
        await pool.backend.close()
        if judge_cache is not None:
            await judge_cache.close()
    s = pool.stats
    pages = sum(r.subscores.get("urls") or 0 for r in rows)
    return {
        "wall_s": round(wall, 3),
        "reports": len(rows),
        "rows_by_status": {st: sum(r.status == st for r in rows) for st in ("ok", "partial", "failed")},
        "pairs_parsed": int(sum(r.subscores.get("pairs_extracted") or 0 for r in rows)),
        "pairs_after_dedup": int(sum(r.subscores.get("pairs") or 0 for r in rows)),
        "pages": int(pages),
        "pages_per_s": round(pages / wall, 1),
        "judge_calls": s.calls,
        "judge_cache_hits": s.cache_hits,
        "judge_shared_in_flight": s.shared,
        "calls_per_s": round(s.calls / wall, 1),
        "input_tokens": s.input_tokens,
        "output_tokens": s.output_tokens,
        "fetch": fetch_stats,
        "suite": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in fact_suite(rows).items()},
    }


async def run(n_reports: int, latency: float, concurrency: int) -> dict:
    from drscore.engine.runtime.io import iter_reports, tasks_from_reports
    from drscore.judge.mock.server import MockConfig, MockServerProcess

    errors: list = []
    reports = list(iter_reports(REPORTS, fmt="drb", errors=errors))[:n_reports]
    tasks = tasks_from_reports(REPORTS, fmt="drb")
    with page_server() as base, MockServerProcess(MockConfig(latency=latency, seed=7)) as mock, \
            tempfile.TemporaryDirectory() as cache:
        cold = await one_run(reports, tasks, mock.url, base, cache, concurrency)
        cold["mock_requests"] = mock.stats()["requests"]
        mock.reset()
        warm = await one_run(reports, tasks, mock.url, base, cache, concurrency)
        warm["mock_requests"] = mock.stats()["requests"]
    return {"cold": cold, "warm": warm}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=int, default=100, help="how many of the 100 reports (default all)")
    ap.add_argument("--latency", type=float, default=0.0, help="mock judge seconds per call (default 0)")
    ap.add_argument("--concurrency", type=int, default=64, help="judge calls in flight (default 64)")
    args = ap.parse_args()
    require_data("fact_e2e", REPORTS)
    t0 = time.perf_counter()
    result = asyncio.run(run(args.reports, args.latency, args.concurrency))
    print(json.dumps({
        "bench": "fact_e2e",
        "setup": {"reports_file": str(REPORTS.name), "judge": "mock (schema-valid random verdicts)",
                  "pages": "local server, /p/<sha1(url)>, 20-80 KB HTML, ~1/16 answer 404",
                  "latency_s": args.latency, "concurrency": args.concurrency},
        **result,
        "total_s": round(time.perf_counter() - t0, 2),
        "machine": machine(),
    }))


if __name__ == "__main__":
    main()
