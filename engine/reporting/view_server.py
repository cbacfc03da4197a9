"""`drscore view DIR`: a local web server for one run directory.

Serves the page of :mod:`view_page` (its markup, script and style are files in
``view_static/``) and a small JSON API over the run's
:class:`~drscore.engine.reporting.view_index.ViewIndex` (``view.sqlite`` beside the run):

- ``GET /api/meta``: row and call counts, filter values, the run's state, each agent's
  colour, the judge caches searched for prompts
- ``GET /api/rows?offset=&limit=&sort=&descending=&agent=&method=&status=&task=&task_prefix=``
- ``GET /api/row/ID`` or ``GET /api/row?task=&agent=&method=``: the row as written, its
  judge calls, each with the full prompt (messages, and where the template's variables
  sit in them) and answer when a judge cache holds them
- ``GET /api/task?task=[&method=]``: every agent's row of one task side by side, with the
  judge's answers and the paired difference of each pair of agents on that task
- ``GET /api/pair?method=&a=&b=[&limit=]``: the tasks where two agents differ most
- ``GET /api/decisions``: per method, the paired differences (interval, Holm-adjusted p),
  P(rank first) and the judge-noise share (:func:`drscore.engine.stats.paired.decide`)
- ``GET /api/scores?method=``: each agent's scores and the scores per task (the charts)

A parameter out of range (a number SQLite cannot hold, an unknown sort column, a
missing name) is a 400 with ``{"error": ...}`` naming it, never a 500.

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
import itertools
import signal
import sqlite3
import sys
import tempfile
import webbrowser
from pathlib import Path
from typing import Any, Awaitable, Callable

import msgspec
import orjson
from aiohttp import web

from drscore.engine.runtime.calls.ledger import money_text, read_totals
from drscore.engine.reporting import view_page
from drscore.engine.reporting.colours import agent_colours
from drscore.engine.reporting.view_index import (
    INDEX_NAME, MAX_INT, MAX_LIMIT, PromptLookup, RowQuery, ViewIndex, cache_files,
)
from drscore.engine.runtime.models import ScoreRow
from drscore.engine.runtime.rundir import run_state
from drscore.engine.stats.paired import decide

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
    # The judge cache directory to read full prompts from (its judge.sqlite), as `drscore
    # run --cache DIR` means it. None: the run's recorded one, $DRSCORE_CACHE, the user's.
    cache_dir: str | None = None
    refresh_s: float = 2.0  # how often the index follows a run that is still writing


class NotARun(Exception):
    """A directory ``drscore view`` will not serve: no score rows of drscore's in it."""


def run_problem(run_dir: Path) -> str | None:
    """Why ``run_dir`` is not a run directory ``drscore view`` can serve, or None.

    A run has a ``scores.jsonl`` whose lines are score rows; one that has just started may
    have none yet, but then it has the ``config.json`` every run writes first. The first
    few non-blank lines are read: a file none of whose lines is a score row (another
    tool's scores.jsonl) is refused rather than served as an empty run."""
    scores = run_dir / "scores.jsonl"
    hint = "is it the --out directory of `drscore run`?"
    if not run_dir.is_dir():
        return f"{run_dir}: not a directory"
    if not scores.is_file():
        return f"{run_dir}: no scores.jsonl; {hint}"
    decoder = msgspec.json.Decoder(ScoreRow)
    first: tuple[int, str] | None = None
    try:
        with open(scores, "rb") as f:
            lines = list(itertools.islice(((n, x) for n, x in enumerate(f, 1) if x.strip()), 5))
    except OSError as exc:
        return f"{scores}: cannot be read ({exc.strerror or exc})"
    for n, line in lines:
        try:
            decoder.decode(line)
            return None
        except msgspec.DecodeError as exc:
            first = first or (n, str(exc))
    if first is not None:
        return f"{scores}:{first[0]}: not a drscore score row ({first[1]}); {hint}"
    if not (run_dir / "config.json").is_file():
        return f"{run_dir}: scores.jsonl is empty and there is no config.json; {hint}"
    return None


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


class BadParameter(ValueError):
    """A query parameter out of range: answered 400 with the message."""


def _int(q: Any, name: str, default: int, low: int, high: int) -> int:
    raw = q.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadParameter(f"{name} must be a whole number from {low} to {high}, not {raw[:40]!r}") from None
    if not low <= value <= high:
        raise BadParameter(f"{name} must be a whole number from {low} to {high}, not {raw[:40]!r}")
    return value


def _flag(q: Any, name: str) -> bool:
    raw = q.get(name, "0")
    if raw not in ("0", "1", "true", "false", ""):
        raise BadParameter(f"{name} must be 1, 0, true or false, not {raw[:40]!r}")
    return raw in ("1", "true")


def _text(q: Any, name: str, required: bool = False) -> str | None:
    value = q.get(name) or None
    if required and value is None:
        raise BadParameter(f"{name} is required")
    return value


def task_pairs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per method, every pair of agents with a score on this task: ``a - b`` (agents in
    name order, the order of their colours)."""
    by_method: dict[str, dict[str, float]] = {}
    for r in rows:
        row = r["row"]
        if isinstance(row.get("score"), (int, float)):
            by_method.setdefault(row["method"], {})[row["agent"]] = float(row["score"])
    out = []
    for method, scores in by_method.items():
        for a, b in itertools.combinations(sorted(scores), 2):
            out.append({"method": method, "a": a, "b": b, "delta": scores[a] - scores[b]})
    return out


def recorded_decisions(run_dir: Path) -> dict[str, Any] | None:
    """The decisions a finished run recorded in summary.json (the same ``decide`` over the
    same rows), when they are at least as new as scores.jsonl; else None."""
    summary, scores = run_dir / "summary.json", run_dir / "scores.jsonl"
    try:
        if run_state(run_dir).get("state") != "finished" or summary.stat().st_mtime < scores.stat().st_mtime:
            return None
        found = orjson.loads(summary.read_bytes()).get("decisions")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return None
    return found if isinstance(found, dict) else None


class _Decisions:
    """The paired comparisons of the indexed rows, once per state of the index: those a
    finished run recorded, else computed (they resample every pair: seconds for a large
    run, so never twice for the same rows)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._stamp: Any = None
        self._value: dict[str, Any] = {}
        self._lock = asyncio.Lock()

    async def get(self, index: ViewIndex) -> dict[str, Any]:
        async with self._lock:
            stamp = await asyncio.to_thread(index.stamp)
            if stamp != self._stamp:
                value = await asyncio.to_thread(recorded_decisions, self.run_dir)
                if value is None:
                    decided = await asyncio.to_thread(lambda: decide(index.score_rows(), seed=0))
                    value = {m: msgspec.to_builtins(d) for m, d in decided.items()}
                self._value, self._stamp = value, stamp
            return self._value


def make_app(config: ViewConfig, index: ViewIndex, prompts: PromptLookup) -> web.Application:
    """The aiohttp application (the caller owns ``index`` and ``prompts``)."""
    title = f"drscore view: {config.run_dir}"
    decisions = _Decisions(Path(config.run_dir))

    @web.middleware
    async def guard(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                    ) -> web.StreamResponse:
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        allowed = _allowed_hosts(config.host, sock[1] if sock else config.port)
        if allowed is not None and request.host not in allowed:
            return web.Response(status=421, text="misdirected request: use the address drscore view printed")
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # (a route not found, ...) as a response the headers go on
            response = web.Response(status=exc.status, reason=exc.reason, body=exc.body, headers=exc.headers)
        except BadParameter as exc:
            response = web.json_response({"error": str(exc)}, status=400)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        return response

    async def root(_: web.Request) -> web.Response:
        return web.Response(text=view_page.page(title), content_type="text/html")

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        found = view_page.asset(name)
        if found is None:
            raise web.HTTPNotFound(text=f"no file {name}")
        text, content_type = found
        return web.Response(text=text, content_type=content_type)

    async def meta(_: web.Request) -> web.Response:
        facets = await asyncio.to_thread(index.facets)
        state = run_state(config.run_dir).get("state", "unknown")
        ledger = await asyncio.to_thread(read_totals, config.run_dir, running=state == "running")
        return web.json_response({**facets, "state": state, "colours": agent_colours(facets["agents"]),
                                  "money": money_text(ledger) if ledger else "",
                                  "prompt_caches": {"searched": prompts.searched, "opened": prompts.opened},
                                  "index_note": index.damage})

    async def rows(request: web.Request) -> web.Response:
        q = request.query
        query = RowQuery(offset=_int(q, "offset", 0, 0, MAX_INT), limit=_int(q, "limit", 50, 1, MAX_LIMIT),
                         sort=q.get("sort", "task"), descending=_flag(q, "descending"),
                         agent=_text(q, "agent"), method=_text(q, "method"), status=_text(q, "status"),
                         task=_text(q, "task"), task_prefix=_text(q, "task_prefix"))
        try:
            page = await asyncio.to_thread(index.page, query)
        except ValueError as exc:
            raise BadParameter(str(exc)) from None
        return web.json_response(page)

    def with_prompts(calls: list[dict[str, Any]], messages: bool = True) -> None:
        for call in calls:
            call["prompt"] = prompts.get(str(call.get("key") or ""), messages=messages)

    async def row(request: web.Request) -> web.Response:
        raw = request.match_info.get("id")
        if raw is None:
            q = request.query
            row_id = await asyncio.to_thread(index.find, _text(q, "task", True) or "", _text(q, "agent", True) or "",
                                             _text(q, "method", True) or "")
            if row_id is None:
                return web.json_response({"error": "no such row"}, status=404)
        else:
            row_id = _int({"id": raw}, "id", 0, 1, MAX_INT)
        found = await asyncio.to_thread(index.row, row_id)
        if found is None:
            return web.json_response({"error": f"no row {row_id}"}, status=404)
        await asyncio.to_thread(with_prompts, found["calls"])
        return web.json_response(found)

    async def task(request: web.Request) -> web.Response:
        q = request.query
        task_id = _text(q, "task", True) or ""
        found = await asyncio.to_thread(index.task_rows, task_id, _text(q, "method"))
        def answers() -> None:
            for r in found:
                with_prompts(r["calls"], messages=False)
        await asyncio.to_thread(answers)
        return web.json_response({"task": task_id, "rows": found, "pairs": task_pairs(found)})

    async def pair(request: web.Request) -> web.Response:
        q = request.query
        method, a, b = (_text(q, k, True) or "" for k in ("method", "a", "b"))
        found = await asyncio.to_thread(index.pair_tasks, method, a, b, _int(q, "limit", 20, 1, MAX_LIMIT))
        decided = (await decisions.get(index)).get(method) or {}
        summary = next((p for p in decided.get("pairs", []) if {p["a"], p["b"]} == {a, b}), None)
        return web.json_response({"method": method, "a": a, "b": b, **found, "decision": summary})

    async def decisions_route(_: web.Request) -> web.Response:
        return web.json_response(await decisions.get(index))

    charts: dict[str, tuple[Any, dict[str, Any]]] = {}  # method -> (index stamp, chart data)

    async def scores(request: web.Request) -> web.Response:
        method = _text(request.query, "method", True) or ""
        stamp = index.stamp()
        if method not in charts or charts[method][0] != stamp:  # one pass over the method's rows per state
            charts[method] = (stamp, await asyncio.to_thread(index.scores, method))
        return web.json_response(charts[method][1])

    app = web.Application(middlewares=[guard])
    app[_INDEX_KEY] = index
    app[_PROMPTS_KEY] = prompts
    app.add_routes([web.get("/", root), web.get(r"/static/{name}", static),
                    web.get("/api/meta", meta), web.get("/api/rows", rows), web.get("/api/row", row),
                    web.get(r"/api/row/{id}", row), web.get("/api/task", task), web.get("/api/pair", pair),
                    web.get("/api/decisions", decisions_route), web.get("/api/scores", scores)])
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
        problem = await asyncio.to_thread(run_problem, run_dir)
        if problem is not None:
            raise NotARun(problem)
        try:
            self._index = await asyncio.to_thread(ViewIndex, run_dir)
        except (sqlite3.Error, OSError):  # a read-only run directory: index in a temporary file
            self._tmp = tempfile.TemporaryDirectory(prefix="drscore-view-")
            self._index = await asyncio.to_thread(ViewIndex, run_dir, Path(self._tmp.name) / INDEX_NAME)
        self.built = await asyncio.to_thread(self._index.refresh)
        self._prompts = PromptLookup(cache_files(run_dir, self.config.cache_dir))
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

    @property
    def index_note(self) -> str | None:
        """What was wrong with the index, when it had to be rebuilt."""
        return self._index.damage if self._index is not None else None

    @property
    def prompt_note(self) -> str | None:
        """Where full prompts are read from, or why there are none."""
        if self._prompts is None:
            return None
        if self._prompts.opened:
            return f"full prompts and answers from {', '.join(self._prompts.opened)}"
        return (f"no judge cache found ({', '.join(self._prompts.searched)}): calls show the inputs "
                "verdicts.jsonl recorded, not the full prompt; give the run's cache directory with --cache DIR")

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
        if server.index_note:
            print(f"warning: {server.index_note}", file=sys.stderr)
        if server.prompt_note:
            print(f"note: {server.prompt_note}", file=sys.stderr)
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
