"""`drscore view DIR`: a local web server for one run directory.

Serves the page of :mod:`view_page` and a small JSON API over the run's
:class:`~drscore.engine.reporting.view_index.ViewIndex` (``view.sqlite`` beside the run):

- ``GET /api/meta``: row and call counts, filter values, the run's state
- ``GET /api/rows?offset=&limit=&sort=&descending=&agent=&method=&status=&task=&task_prefix=``
- ``GET /api/row/ID``: the row as written, its judge calls, each with the full prompt and
  answer when the judge cache holds them

Index queries run in a worker thread, never on the event loop. While the run is still
writing, the index follows it (a refresh every ``refresh_s`` seconds reads only the new
lines), and the page polls ``/api/meta`` to redraw.

Security: loopback only by default; every response carries a Content-Security-Policy
allowing only the server's own script, style and API; requests whose ``Host`` header is
not this server's loopback name are refused (a web page elsewhere cannot reach it by DNS
rebinding). Nothing here reads the API key: config.json is never served, and of a cached
request only its messages, model and answer are shown.
"""
from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
import sqlite3
import sys
import tempfile
import webbrowser
from pathlib import Path
from typing import Any, Awaitable, Callable

import msgspec
from aiohttp import web

from drscore.engine.runtime.calls.ledger import money_text, read_totals
from drscore.engine.reporting import view_page
from drscore.engine.reporting.view_index import INDEX_NAME, PromptLookup, RowQuery, ViewIndex, default_cache_file
from drscore.engine.runtime.rundir import run_state

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
DEFAULT_PORT = 8765
_INDEX_KEY = web.AppKey("index", ViewIndex)
_PROMPTS_KEY = web.AppKey("prompts", PromptLookup)


class ViewConfig(msgspec.Struct, kw_only=True):
    """What ``drscore view`` serves and where."""

    run_dir: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT  # 0: any free port
    open_browser: bool = False
    cache_file: str | None = None  # judge.sqlite for full prompts (default: the run's cache)
    refresh_s: float = 2.0  # how often the index follows a run that is still writing


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _allowed_hosts(host: str, port: int) -> set[str] | None:
    """Host header values accepted when bound to loopback (None: any, for --host)."""
    if not is_loopback(host):
        return None
    names = {"localhost", "127.0.0.1", "[::1]", host if ":" not in host else f"[{host.strip('[]')}]"}
    return {f"{n}:{port}" for n in names} | names


def make_app(config: ViewConfig, index: ViewIndex, prompts: PromptLookup) -> web.Application:
    """The aiohttp application (the caller owns ``index`` and ``prompts``)."""
    title = f"drscore view: {config.run_dir}"

    @web.middleware
    async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                    ) -> web.StreamResponse:
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        allowed = _allowed_hosts(config.host, sock[1] if sock else config.port)
        if allowed is not None and request.host not in allowed:
            return web.Response(status=421, text="misdirected request: use the address drscore view printed")
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            response = exc
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        return response

    async def root(_: web.Request) -> web.Response:
        return web.Response(text=view_page.page(title), content_type="text/html")

    async def script(_: web.Request) -> web.Response:
        return web.Response(text=view_page.JS, content_type="application/javascript")

    async def style(_: web.Request) -> web.Response:
        return web.Response(text=view_page.CSS, content_type="text/css")

    async def meta(_: web.Request) -> web.Response:
        facets = await asyncio.to_thread(index.facets)
        state = run_state(config.run_dir).get("state", "unknown")
        ledger = await asyncio.to_thread(read_totals, config.run_dir, running=state == "running")
        return web.json_response({**facets, "state": state, "money": money_text(ledger) if ledger else ""})

    async def rows(request: web.Request) -> web.Response:
        q = request.query
        try:
            query = RowQuery(offset=int(q.get("offset", 0)), limit=int(q.get("limit", 50)),
                             sort=q.get("sort", "task"), descending=q.get("descending") in ("1", "true"),
                             agent=q.get("agent") or None, method=q.get("method") or None,
                             status=q.get("status") or None, task=q.get("task") or None,
                             task_prefix=q.get("task_prefix") or None)
            page = await asyncio.to_thread(index.page, query)
        except ValueError as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response(page)

    async def row(request: web.Request) -> web.Response:
        try:
            row_id = int(request.match_info["id"])
        except ValueError:
            return web.json_response({"error": "row id must be a number"}, status=400)
        found = await asyncio.to_thread(index.row, row_id)
        if found is None:
            return web.json_response({"error": f"no row {row_id}"}, status=404)

        def prompts_of(calls: list[dict[str, Any]]) -> None:
            for call in calls:
                call["prompt"] = prompts.get(str(call.get("key") or ""))
        await asyncio.to_thread(prompts_of, found["calls"])
        return web.json_response(found)

    app = web.Application(middlewares=[guard])
    app[_INDEX_KEY] = index
    app[_PROMPTS_KEY] = prompts
    app.add_routes([web.get("/", root), web.get("/view.js", script), web.get("/view.css", style),
                    web.get("/api/meta", meta), web.get("/api/rows", rows), web.get(r"/api/row/{id}", row)])
    return app


async def _follow(index: ViewIndex, every: float) -> None:
    """Keep the index up to date with a run that is still writing."""
    while True:
        await asyncio.sleep(every)
        with contextlib.suppress(OSError):
            await asyncio.to_thread(index.refresh)


class ViewServer:
    """Open the index (building or refreshing it), serve, and close everything on exit.

    ``async with ViewServer(config) as server:`` then ``server.url``; tests use it on
    port 0. :func:`serve` runs one until interrupted."""

    def __init__(self, config: ViewConfig) -> None:
        self.config = config
        self.url = ""
        self.built: dict[str, int] = {}
        self._runner: web.AppRunner | None = None
        self._task: asyncio.Task[None] | None = None
        self._index: ViewIndex | None = None
        self._prompts: PromptLookup | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    async def __aenter__(self) -> ViewServer:
        run_dir = Path(self.config.run_dir)
        if not (run_dir / "scores.jsonl").is_file():
            raise FileNotFoundError(f"{run_dir}: no scores.jsonl; is it the --out directory of `drscore run`?")
        try:
            self._index = await asyncio.to_thread(ViewIndex, run_dir)
        except (sqlite3.Error, OSError):  # a read-only run directory: index in a temporary file
            self._tmp = tempfile.TemporaryDirectory(prefix="drscore-view-")
            self._index = await asyncio.to_thread(ViewIndex, run_dir, Path(self._tmp.name) / INDEX_NAME)
        self.built = await asyncio.to_thread(self._index.refresh)
        cache = Path(self.config.cache_file) if self.config.cache_file else default_cache_file(run_dir)
        self._prompts = PromptLookup(cache)
        self._runner = web.AppRunner(make_app(self.config, self._index, self._prompts), access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.config.host, self.config.port).start()
        port = self._runner.addresses[0][1]
        host = self.config.host if ":" not in self.config.host else f"[{self.config.host}]"
        self.url = f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}/"
        self._task = asyncio.create_task(_follow(self._index, self.config.refresh_s))
        return self

    @property
    def index_path(self) -> Path | None:
        return self._index.path if self._index is not None else None

    async def __aexit__(self, *exc: Any) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._runner is not None:
            await self._runner.cleanup()
        if self._prompts is not None:
            self._prompts.close()
        if self._index is not None:
            self._index.close()
        if self._tmp is not None:
            self._tmp.cleanup()


async def serve(config: ViewConfig) -> None:
    """Serve until interrupted (Ctrl-C, SIGINT or SIGTERM)."""
    if not is_loopback(config.host):
        print(f"warning: serving on {config.host}, not loopback: anyone who can reach this machine "
              "can read the run's reports, prompts and answers", file=sys.stderr)
    async with ViewServer(config) as server:
        print(f"indexed {server.built.get('scores', 0)} new score lines and {server.built.get('verdicts', 0)} "
              f"new judge calls into {server.index_path}", file=sys.stderr)
        print(f"serving {config.run_dir} at {server.url} (Ctrl-C to stop)", flush=True)
        if config.open_browser:
            webbrowser.open(server.url)
        # Ctrl-C and a plain `kill` both stop it cleanly. Handlers are installed, not
        # inherited: a shell starts a background job with SIGINT ignored, and Python then
        # leaves it ignored, so without them `kill -INT` would never stop the server.
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):  # non-POSIX, or not the main thread
                loop.add_signal_handler(sig, stop.set)
        await stop.wait()
