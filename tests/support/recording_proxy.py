"""A loopback proxy in front of a real judge server that writes down what crossed it.

drscore talks to the proxy; the proxy forwards every request unchanged to the server and
keeps, per request: the status, the body drscore sent, and the ``usage`` the server
answered with. Tests compare drscore's own figures with these (tokens recorded = the
server's usage; how many refused bodies before the run adapted; how many requests the
server had at once). It runs in a thread with its own event loop, because ``drscore``'s
CLI runs its own.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any

import aiohttp
import orjson
from aiohttp import web


class Exchange:
    __slots__ = ("method", "path", "status", "sent", "answer")

    def __init__(self, method: str, path: str, status: int, sent: Any, answer: Any) -> None:
        self.method, self.path, self.status, self.sent, self.answer = method, path, status, sent, answer


class RecordingProxy:
    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")  # the server's root (no /v1)
        self.exchanges: list[Exchange] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None

    # --- what crossed -----------------------------------------------------------
    def completions(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.path.endswith("/chat/completions")]

    def usage_totals(self) -> tuple[int, int]:
        """(prompt_tokens, completion_tokens) summed over every answered completion."""
        pin = pout = 0
        for e in self.completions():
            usage = e.answer.get("usage") if e.status == 200 and isinstance(e.answer, dict) else None
            if usage:
                pin += usage.get("prompt_tokens", 0)
                pout += usage.get("completion_tokens", 0)
        return pin, pout

    def reset(self) -> None:
        self.exchanges.clear()
        self.max_in_flight = self.in_flight

    # --- the server --------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "authorization")}
            async with self._session.request(request.method, self.target + request.path_qs, data=body,
                                             headers=headers) as resp:
                raw = await resp.read()
                out_headers = {k: v for k, v in resp.headers.items()
                               if k.lower() not in ("content-length", "transfer-encoding", "connection",
                                                    "content-encoding", "keep-alive")}
                status = resp.status
        finally:
            self.in_flight -= 1
        try:
            sent: Any = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            sent = body
        try:
            answer: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            answer = raw
        self.exchanges.append(Exchange(request.method, request.path, status, sent, answer))
        return web.Response(status=status, body=raw, headers=out_headers)

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        # No client timeout: a request drscore gave up on is left to the server, as without us.
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()
        await self._session.close()

    def start(self) -> RecordingProxy:
        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._main())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="recording-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(15):
            raise RuntimeError("recording proxy did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(15)

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
