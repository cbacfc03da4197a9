"""Timing a whole run through the public API (shared by the benchmarks)."""
from __future__ import annotations

import time

from drscore.api import Run, RunConfig


async def timed_run(cfg: RunConfig) -> tuple[float, dict]:
    """Run ``cfg`` to completion; return (wall seconds, summary)."""
    t0 = time.monotonic()
    async with Run(cfg) as run:
        async for _ in run.rows():
            pass
    return time.monotonic() - t0, run.summary
