"""A server whose 429s carry delay hints that cannot be believed (``Retry-After: inf``,
``nan``, 5,000 digits, negative, a date in year 9999; Gemini's ``retryDelay`` in the body):
each such 429 pauses for ``--max-rate-limit-wait`` instead, the run finishes, and the run
says what it was told. Before: ``inf`` hung the run for ever, ``nan`` failed every item."""
from __future__ import annotations

import asyncio
import math

import pytest

from drscore.engine.runtime.calls.judging import RateLimitInfo
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from support.fakes import ScoreVerdict as V, one_line_templates
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.judge.http import HttpBackend
from drscore.judge.mock.server import MockConfig, start

BOUND_S = 0.5  # --max-rate-limit-wait of these runs


@pytest.fixture
def tiny_prompt(monkeypatch):
    one_line_templates(monkeypatch, "Item ${i}")


@pytest.mark.parametrize("hint", [math.inf, math.nan, -5.0, 1e309])
async def test_the_limiter_pauses_for_the_bound_on_an_unbelievable_delay(hint):
    lim = RateLimiter(concurrency=2)
    permit = await lim.acquire(10)
    # built by hand, as a backend other than judge.http might: the limiter still guards the pause
    assert await lim.rate_limited_release(permit, RateLimitInfo(retry_after_s=hint), unusable_wait_s=7.0) == 7.0


async def test_the_limiter_pauses_for_the_bound_when_the_only_hint_was_unusable():
    lim = RateLimiter(concurrency=2)
    permit = await lim.acquire(10)
    info = RateLimitInfo(unusable_hint="Retry-After: soon")
    assert await lim.rate_limited_release(permit, info, unusable_wait_s=3.0) == 3.0
    lim = RateLimiter(concurrency=2)
    permit = await lim.acquire(10)  # no hint at all: the limiter's own short pause, as before
    assert await lim.rate_limited_release(permit, RateLimitInfo(), unusable_wait_s=3.0) == 1.0


@pytest.mark.parametrize("profile,hint", [
    ("vllm", "inf"), ("vllm", "nan"), ("vllm", "9" * 5000), ("vllm", "-5"),
    ("vllm", "Fri, 31 Dec 9999 23:59:59 GMT"), ("gemini", "inf"), ("gemini", "1e309"),
])
async def test_a_run_against_unbelievable_hints_finishes_every_item(tiny_prompt, profile, hint):
    # No quota headers (vLLM, Gemini): the client learns the quota from 429s alone, so it
    # meets several, each carrying the hostile hint (Gemini's in the body's retryDelay).
    runner, port = await start(MockConfig(rpm=240, burst=1.0, profile=profile, rate_limit_hint=hint))
    url = f"http://127.0.0.1:{port}/v1"
    pool = JudgePool(HttpBackend(url, "mock"), cache=None, limiter=RateLimiter(concurrency=8, cooldown_s=0.2),
                     prices=PriceTable(), max_rate_limit_wait_s=BOUND_S)
    try:
        async with asyncio.timeout(60):  # a hang (the bug) fails here instead of blocking the suite
            results = await asyncio.gather(*(pool.ask("t", V, {"i": i}) for i in range(16)))
    finally:
        await pool.backend.close()
        await runner.cleanup()
    assert len(results) == 16 and all(isinstance(r.value, V) for r in results)
    s = pool.stats
    assert s.rate_limited >= 1 and s.unusable_hints == s.rate_limited  # every 429 said it, every one was noted
    assert s.failures == 0 and pool.stopped is None  # not read as a reset beyond the bound
    shown = "retryDelay: " if profile == "gemini" else "Retry-After: "
    assert s.unusable_hint.startswith(shown) and len(s.unusable_hint) < 80
