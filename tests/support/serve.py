"""A throwaway aiohttp app on 127.0.0.1 for tests that need an endpoint of their own
(a judge that records or refuses requests, a page server)."""
from __future__ import annotations

from aiohttp import web


async def serve(app: web.Application) -> tuple[web.AppRunner, str]:
    """Start ``app`` on a free loopback port; returns the runner (``await
    runner.cleanup()`` stops it) and the base URL ``http://127.0.0.1:PORT``."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"


class ThreadedServer:
    """``with ThreadedServer(make_app) as url:`` an aiohttp app on a free loopback port in a
    thread with its own event loop, for tests whose code under test runs its own loop
    (drscore's CLI)."""

    def __init__(self, make_app) -> None:
        import threading

        self._make_app = make_app
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="threaded-server", daemon=True)
        self._loop = None
        self._stop = None
        self.url = ""

    def _run(self) -> None:
        import asyncio

        async def main() -> None:
            self._stop = asyncio.Event()
            runner, self.url = await serve(self._make_app())
            self._ready.set()
            await self._stop.wait()
            await runner.cleanup()

        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(main())
        self._loop.close()

    def __enter__(self) -> str:
        self._thread.start()
        if not self._ready.wait(15):
            raise RuntimeError("threaded test server did not start")
        return self.url

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(15)
