"""The server's own prompt counts (prompt_counts): asked once where the server has no such
route, and where it has, each call charged to the token bucket at its real prompt with only
the answer's length left to guess."""
from __future__ import annotations

import asyncio
import time
from typing import Annotated

import msgspec
import pytest

from drscore import prompts
from drscore.engine.runtime.calls.cache import JudgeCache
from drscore.engine.runtime.calls.judging import ChatResponse
from drscore.engine.runtime.calls.limits import SPREAD_Z, RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import Price, PriceTable
from drscore.engine.runtime.calls.prompt_counts import MIN_ASKING, AskingLimit, CountDrift, PromptCounts


class Verdict(msgspec.Struct):
    score: Annotated[int, msgspec.Meta(ge=0, le=4)]


TEMPLATE = "---\nmax_tokens: 4000\nexpected_output_tokens: 10\n---\n## system\nJudge.\n## user\nRate: ${text}"


class CountingBackend:
    """Counts every prompt as ``count`` tokens (None: no such route), answers after ``delay`` s
    with that many prompt tokens and 20 out, and records the limiter's token level while
    each call is out."""

    name = "http"
    cacheable = True
    model = "m1"

    def __init__(self, limiter: RateLimiter | None, count: int | None, delay: float = 0.05, extra: int = 0) -> None:
        self.limiter, self.count, self.delay = limiter, count, delay
        self.extra = extra  # what the usage reports beyond the count (Gemini's example: one)
        self.counts_prompts: bool | None = None
        self.asked = 0
        self.levels: list[float] = []

    def identity(self):
        return {"base_url": "http://judge.test/v1", "model": self.model}

    async def count_prompt(self, request) -> int | None:
        self.asked += 1
        await asyncio.sleep(0.01)
        self.counts_prompts = self.count is not None
        return self.count

    async def complete(self, request):
        if self.limiter is not None and self.limiter.tokens is not None:
            self.levels.append(self.limiter.tokens.level)
        await asyncio.sleep(self.delay)
        return ChatResponse(text='{"score": 3}', input_tokens=(self.count or 40) + self.extra, output_tokens=20), None

    async def close(self):
        pass


async def test_a_server_without_the_route_is_asked_once_however_many_calls_wait():
    backend = CountingBackend(None, None)
    counts = PromptCounts(backend)
    got = await asyncio.gather(*(counts.count(object()) for _ in range(8)))
    assert got == [None] * 8 and backend.asked == 1 and not counts.available and counts.counted == 0


async def test_a_server_with_the_route_counts_every_prompt():
    backend = CountingBackend(None, 123)
    counts = PromptCounts(backend)
    got = await asyncio.gather(*(counts.count(object()) for _ in range(8)))
    assert got == [123] * 8 and backend.asked == 8 and counts.counted == 8


class SlowCounter:
    """Counts every prompt as 100 tokens after ``delay`` s, noting how many counts were out at once."""

    def __init__(self, delay: float = 0.005) -> None:
        self.counts_prompts: bool | None = True
        self.delay, self.out, self.most = delay, 0, 0

    async def count_prompt(self, request) -> int | None:
        self.out += 1
        self.most = max(self.most, self.out)
        await asyncio.sleep(self.delay)
        self.out -= 1
        return 100


async def test_calls_waiting_for_quota_ask_a_few_counts_at_a_time_not_all_at_once():
    backend = SlowCounter()
    counts = PromptCounts(backend)
    got = await asyncio.gather(*(counts.count(object()) for _ in range(64)))
    assert got == [100] * 64 and counts.counted == 64
    assert backend.most == MIN_ASKING == 4


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_the_counts_out_at_once_keep_up_with_the_rate_calls_are_granted_at():
    clock = FakeClock()
    limit = AskingLimit(clock=clock)
    assert limit.limit() == 4  # nothing measured yet
    async with limit.asking():
        clock.now += 0.125  # one count took 0.125 s
    assert limit.took == 0.125
    for _ in range(40):  # 40 counted calls granted within the last second: 40 a second
        limit.used()
        clock.now += 0.02
    # twice 40 a second x 0.125 s: 10 counts out keep one ready for each call let go
    assert limit.limit() == 10
    clock.now += 1.0  # those grants are more than a second old: the rate is forgotten
    assert limit.limit() == 4


async def test_a_caller_cancelled_while_waiting_to_ask_leaves_no_place_taken():
    limit = AskingLimit(minimum=1)
    held = asyncio.Event()
    release = asyncio.Event()

    async def hold() -> None:
        async with limit.asking():
            held.set()
            await release.wait()

    holder = asyncio.create_task(hold())
    await held.wait()

    async def wait_to_ask() -> None:
        async with limit.asking():
            pass

    waiter = asyncio.create_task(wait_to_ask())
    await asyncio.sleep(0)
    assert limit.out == 1 and not waiter.done()
    waiter.cancel()
    release.set()
    await holder
    assert waiter.cancelled() and limit.out == 0
    async with limit.asking():  # the place is free again
        assert limit.out == 1


async def _ask(tmp_path, monkeypatch, count: int | None, texts: list[str], *, extra: int = 0,
               tpm_charge: str = "counted") -> tuple[CountingBackend, JudgePool, float]:
    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse(name, TEMPLATE))
    # 600 tokens a minute in a bucket of ten minutes: 6,000 tokens, refilled at 10 a second
    limiter = RateLimiter(tpm=600, concurrency=4, burst_s=600)
    backend = CountingBackend(limiter, count, extra=extra)
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    pool = JudgePool(backend, cache=cache, limiter=limiter, prices=PriceTable({"m1": Price(1.0, 2.0)}),
                     preflight=False, tpm_charge=tpm_charge)
    t0 = time.monotonic()
    for text in texts:
        await pool.ask("alpha", Verdict, {"text": text})
    await cache.close()
    return backend, pool, (time.monotonic() - t0) * 10


async def test_a_counted_prompt_is_charged_at_its_count_and_teaches_the_estimator(tmp_path, monkeypatch):
    # The character rule puts this prompt at about 10 tokens; the server counts 1,000. While
    # the call is out the bucket holds 6,000 less the count and the 10 expected out.
    backend, pool, refill = await _ask(tmp_path, monkeypatch, 1_000, ["a short report"])
    assert backend.asked == 1 and pool.prompt_counts.counted == 1
    assert 6_000 - 1_010 <= backend.levels[0] <= 6_000 - 1_010 + refill + 1
    # learned from the count, once: the answer's usage (the same prompt) is not counted again
    assert pool.tokens.fit.calls == 1 and pool.tokens.observations == 1
    # 1,000 tokens for 16.5 by the rule (two messages' text and overhead, all ASCII): 61 a rule
    # token, beyond the estimator's ceiling of 8
    assert pool.tokens.weights[0] == 8.0


async def test_counted_prompts_widen_the_lag_a_full_bucket_is_waited_past(tmp_path, monkeypatch):
    # The server counts a prompt too before admitting its call, so admission trails the grant by
    # about a count: the lag grows by COUNTED_LAG_S once prompts are counted.
    from drscore.engine.runtime.calls.limits import COUNTED_LAG_S, LAG_S, LAG_WIDEST_S

    _, pool, _ = await _ask(tmp_path, monkeypatch, 1_000, ["a report"])
    assert pool.limiter.prompts_counted and pool.limiter.lag_s == pytest.approx(LAG_S + COUNTED_LAG_S)
    pool.limiter.lag_widened = 4  # two episodes of 429s at the known quota: doubled twice, up to the widest
    assert pool.limiter.lag_s == LAG_WIDEST_S
    # nothing counted: the lag of the connection alone
    (tmp_path / "none").mkdir()
    _, uncounted, _ = await _ask(tmp_path / "none", monkeypatch, None, ["a report"])
    assert not uncounted.limiter.prompts_counted and uncounted.limiter.lag_s == LAG_S


def test_the_drift_of_the_usage_from_the_count_is_learned_from_the_answers():
    drift = CountDrift()
    assert (drift.mean, drift.sd, drift.charge(100)) == (0.0, 0.0, 100)  # vLLM's: none until shown
    drift.observe(10, 11)  # the first difference is taken whole
    assert (drift.mean, drift.sd, drift.charge(100)) == (1.0, 0.0, 101)
    drift.observe(10, 16)  # 5 from the mean: mean 1 + 0.2 x 5 = 2, variance 0.8 x 0.2 x 25 = 4
    assert drift.mean == 2.0 and abs(drift.sd - 2.0) < 1e-12 and drift.charge(100) == 102


async def test_a_count_below_the_usage_is_charged_with_the_usual_difference(tmp_path, monkeypatch):
    # Each prompt is counted 1,000 and its usage says 1,008: the first call goes at its count
    # (6,000 less 1,000 and the 10 expected out), the second at the count and the 8 learned.
    backend, pool, refill = await _ask(tmp_path, monkeypatch, 1_000, ["a report", "another report"], extra=8)
    assert 6_000 - 1_010 <= backend.levels[0] <= 6_000 - 1_010 + refill + 1
    # the first call's 1,008 in and 20 out are spent; the second then holds its count, the 8
    # learned and the 20 out the first answer showed: 1,028 more
    assert 6_000 - 1_028 - 1_028 <= backend.levels[1] <= 6_000 - 1_028 - 1_028 + refill + 1
    assert pool.prompt_counts.drift.mean == 8.0 and pool.prompt_counts.drift.seen == 2


async def test_a_quota_of_input_tokens_is_charged_the_counted_prompt_alone(tmp_path, monkeypatch):
    # Gemini's quota counts the prompt, not the answer: the call is out at 6,000 less its
    # count of 1,000 (no expected output), and after the answer the 20 written are not charged.
    backend, pool, refill = await _ask(tmp_path, monkeypatch, 1_000, ["a report"], tpm_charge="input")
    assert pool.limiter.tokens is not None
    assert 6_000 - 1_000 <= backend.levels[0] <= 6_000 - 1_000 + refill + 1
    assert 6_000 - 1_000 <= pool.limiter.tokens.level <= 6_000 - 1_000 + refill + 1


async def test_without_the_route_the_prompt_is_charged_its_estimate(tmp_path, monkeypatch):
    backend, pool, refill = await _ask(tmp_path, monkeypatch, None, ["a short report", "another one", "a third"])
    assert backend.asked == 1 and pool.prompt_counts.counted == 0  # asked once, for the first call
    assert 6_000 - 40 <= backend.levels[0] <= 6_000  # about 10 by the character rule, plus 10 out
    assert pool.tokens.fit.calls == 3  # learned from the answers' usage instead


async def test_a_known_deviation_replaces_the_estimators_relative_error():
    limiter = RateLimiter(tpm=60_000, concurrency=4, burst_s=60)
    limiter.estimate_error = lambda: 0.3
    guessed = await limiter.acquire(1_000)
    known = await limiter.acquire(1_000, 25.0)
    assert round(guessed.var) == 300 ** 2 and round(known.var) == 25 ** 2
    # this call's own part of the spread (the two in flight add theirs alike to both)
    inflight = guessed.var + known.var
    assert round(limiter.spread(1_000, 25.0) ** 2) == round(SPREAD_Z ** 2 * (25.0 ** 2 + inflight))
    assert round(limiter.spread(1_000) ** 2) == round(SPREAD_Z ** 2 * (300.0 ** 2 + inflight))
    await guessed.done(1_000)
    await known.done(1_000)


def test_only_a_known_token_quota_asks_for_counts():
    assert RateLimiter(tpm=600).paces_known_tokens  # told
    assert not RateLimiter(rpm=600).paces_known_tokens  # no token bucket
    learned = RateLimiter()
    learned.tokens = learned._tokens_bucket(600)  # a pace learned from 429s: its probing finds the edge
    assert not learned.paces_known_tokens
    learned.announced = True  # the same bucket, announced in headers
    assert learned.paces_known_tokens
