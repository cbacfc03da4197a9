"""The mock judge served in this process on a free loopback port, with a client session, and
a clock the test moves (its quota buckets then refill exactly as the test says)."""
from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from drscore.judge.mock.server import MockConfig, start


class FakeClock:
    """Drives the quota buckets so refill arithmetic is exact and timing-independent."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def served(cfg: MockConfig, clock: Any = None) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    """A session and the mock's base URL (``http://127.0.0.1:PORT``); ``clock`` drives its quota."""
    kwargs = {"clock": clock} if clock is not None else {}
    runner, port = await start(cfg, "127.0.0.1", 0, **kwargs)
    try:
        async with aiohttp.ClientSession() as session:
            yield session, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
