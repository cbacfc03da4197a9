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
