"""Client-side limits: bucket arithmetic by hand, AIMD concurrency, and behaviour against
the mock judge's real 429 + Retry-After answers."""
from __future__ import annotations

import asyncio
import math
import time

import aiohttp
import msgspec
import pytest

from drscore.engine.runtime.calls.judging import GatewayQuota, RateLimitInfo
from drscore.engine.runtime.calls.learner import UNCERTAIN_REACH_S
from drscore.engine.runtime.calls.limits import ARRIVAL_S, AdaptiveConcurrency, KnownQuota, RateLimiter, TokenBucket
from drscore.engine.runtime.calls.pool import JudgePool
from support.fakes import ScoreVerdict as V, one_line_templates
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.judge.http import HttpBackend
from drscore.judge.mock.server import MockConfig, start
from drscore.judge.ratelimit_headers import parse_duration, parse_rate_limit_headers


def test_token_bucket_arithmetic_by_hand():
    b = TokenBucket(per_minute=60, burst_s=2.0)  # 1 token/s, capacity 2
    t = b._t
    assert b.capacity == 2 and b.wait_time(2, t) == 0.0
    b.take(2, t)  # level 0
    assert b.wait_time(1, t) == pytest.approx(1.0)
    assert b.wait_time(1, t + 0.25) == pytest.approx(0.75)  # refilled 0.25
    b.take(1, t + 0.5)  # level 0.5 - 1 = -0.5 (debt)
    assert b.wait_time(1, t + 0.5) == pytest.approx(1.5)
    b.adjust(-2, t + 0.5)  # refund 2 (usage lower than estimated) -> 1.5
    assert b.level == pytest.approx(1.5)
    assert b.wait_time(5, t + 0.5) == pytest.approx(0.5)  # larger than capacity: waits for a full bucket
    b.clamp(0.25, t + 0.5)
    assert b.level == pytest.approx(0.25)


async def test_queue_is_fifo_and_estimates_are_taken_at_the_head():
    lim = RateLimiter(tpm=6000, concurrency=8, burst_s=1.0, safety=1.0)  # 100 tokens/s, capacity 100
    order, seen = [], []
    current = {"estimate": 100}

    async def caller(i):
        def est():
            seen.append((i, current["estimate"]))
            return current["estimate"]
        p = await lim.acquire(est)
        order.append(i)
        current["estimate"] = 10  # what was learned from the first answer
        await p.done()

    await asyncio.gather(*(caller(i) for i in range(4)))
    assert order == [0, 1, 2, 3]
    # caller 0 took the full bucket; the others were estimated only when they reached the
    # head, after the estimate had dropped, so they pay 10 tokens each, not 100.
    assert [e for i, e in seen if i == 0][0] == 100 and all(e == 10 for i, e in seen if i > 0)


async def test_aimd_cuts_once_per_episode_and_recovers():
    c = AdaptiveConcurrency(maximum=8, cooldown_s=0.05)
    c.on_rate_limited()
    c.on_rate_limited()  # same episode: no second cut
    assert c.limit == 4 and c.cuts == 1
    c.on_success()  # still cooling down: no growth
    assert c.limit == 4
    await asyncio.sleep(0.06)
    for _ in range(40):
        c.on_success()
    assert c.limit == 8  # additive increase back to the maximum, never beyond


def test_rate_limit_headers_are_parsed():
    info = parse_rate_limit_headers({"Retry-After": "2", "retry-after-ms": "1250",
                                     "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"})
    assert info.retry_after_s == 1.25  # the millisecond header wins
    assert info.remaining_tokens == 0 and info.reset_tokens_s == 360
    assert parse_duration("1m30.5s") == 90.5 and parse_duration("250ms") == 0.25
    assert parse_rate_limit_headers({"Retry-After": "3"}).retry_after_s == 3


async def test_429_pauses_everyone_for_retry_after():
    lim = RateLimiter(concurrency=4)
    p = await lim.acquire(10)
    delay = await lim.rate_limited_release(p, RateLimitInfo(retry_after_s=0.2))
    # No quota headers: the 429 sets a learned pace (0.92 x one request per second, nothing
    # answered yet to measure) instead of halving the concurrency.
    assert delay == 0.2 and lim.rate_limited == 1 and lim.concurrency.limit == 4
    assert lim.learner.pace == pytest.approx(0.92) and lim.rpm == pytest.approx(55.2)
    t0 = time.monotonic()
    p2 = await lim.acquire(10)
    assert time.monotonic() - t0 >= 0.18  # nobody goes before the server's delay
    await p2.done()


async def test_a_fault_in_the_accounting_of_a_release_never_keeps_the_slot(monkeypatch):
    # A fault while a 429 was learned from (here the binding guess) left its caller's slot
    # taken: with 2 slots, two such 429s and every later call waited forever, a run that hung
    # with nothing in flight. The fault now reaches the caller and the slot is free.
    lim = RateLimiter(concurrency=2)

    def broken(*args, **kwargs):
        raise RuntimeError("a fault in the learning")

    monkeypatch.setattr(lim.binding, "refused", broken)
    for _ in range(3):
        p = await asyncio.wait_for(lim.acquire(10), 2)
        with pytest.raises(RuntimeError, match="a fault in the learning"):
            await lim.rate_limited_release(p, RateLimitInfo(retry_after_s=0.01))
        assert lim.concurrency.in_use == 0
    monkeypatch.setattr(lim, "_settle", broken)  # the accounting of a failed or refused call
    for release in (lim.release_failed, lim.release_refused):
        p = await asyncio.wait_for(lim.acquire(10), 5)
        with pytest.raises(RuntimeError):
            await release(p)
        assert lim.concurrency.in_use == 0
        await release(p)  # released once: a second release gives nothing back
        assert lim.concurrency.in_use == 0


async def test_with_quota_headers_a_429_pauses_and_drains_but_keeps_the_concurrency():
    lim = RateLimiter(concurrency=4)
    p = await lim.acquire(10)
    info = RateLimitInfo(retry_after_s=0.01, limit_requests=600, remaining_requests=0)
    await lim.rate_limited_release(p, info)
    # the pacing is the control: the pause and the drained bucket correct it, nothing is learned
    assert lim.concurrency.limit == 4 and lim.learner.pace is None and lim.rpm == 600
    assert lim.requests.level <= 0 and lim._paused_until > 0


@pytest.fixture
def tiny_prompt(monkeypatch):
    one_line_templates(monkeypatch, "Item ${i}")


async def _ask_all(url: str, limiter: RateLimiter, n: int, tag: str = "") -> JudgePool:
    pool = JudgePool(HttpBackend(url, "mock"), cache=None, limiter=limiter, prices=PriceTable())
    try:
        results = await asyncio.gather(*(pool.ask("t", V, {"i": f"{tag}{i}"}) for i in range(n)))
    finally:
        await pool.backend.close()
    assert len(results) == n and all(isinstance(r.value, V) for r in results)
    return pool


async def test_quota_shared_with_another_job_429s_are_honoured_and_nothing_is_lost(tiny_prompt):
    # Two independent clients (two jobs on one API key) each learn the server's 120 rpm,
    # so together they overrun it: the server answers 429 with Retry-After, and both must
    # back off (a pause each, their buckets drained to what the server has left) and still
    # get every item answered exactly once.
    runner, port = await start(MockConfig(rpm=120, burst=1.0))
    url = f"http://127.0.0.1:{port}/v1"
    try:
        limiters = [RateLimiter(concurrency=8, cooldown_s=0.3) for _ in range(2)]
        pools = await asyncio.gather(*(_ask_all(url, lim, 6, tag=f'job{j}-') for j, lim in enumerate(limiters)))
        async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/stats") as r:
            stats = await r.json()
    finally:
        await runner.cleanup()
    assert stats["ok"] == 12 and stats["duplicate_ok"] == 0  # every item answered exactly once
    assert stats["rate_limited"] >= 1
    assert sum(p.stats.rate_limited for p in pools) == stats["rate_limited"]
    assert all(lim.announced and lim.concurrency.cuts == 0 for lim in limiters)  # paced, not throttled
    assert all(p.stats.failures == 0 for p in pools)


async def test_client_limits_matching_the_server_avoid_429s(tiny_prompt):
    runner, port = await start(MockConfig(rpm=600, burst=1.0))  # 10/s, capacity 10
    try:
        lim = RateLimiter(rpm=600, concurrency=16)
        await _ask_all(f"http://127.0.0.1:{port}/v1", lim, 30)
        async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/stats") as r:
            stats = await r.json()
    finally:
        await runner.cleanup()
    assert stats["ok"] == 30
    assert stats["rate_limited"] <= 1  # pacing, not 429s, keeps us under the quota


async def test_a_told_token_quota_ends_a_run_level_with_the_servers_bucket(tiny_prompt):
    # A told quota against an endpoint that sends no quota headers (vllm): only the answers'
    # usage corrects our bucket. 10 tokens a second in a bucket of a minute (600), so neither
    # bucket refills to full during the run: each holds 600 less what it was charged.
    runner, port = await start(MockConfig(profile="vllm", tpm=600, burst=60.0))
    try:
        lim = RateLimiter(tpm=600, concurrency=4, burst_s=60.0)
        pool = await _ask_all(f"http://127.0.0.1:{port}/v1", lim, 8)
        async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/stats") as r:
            stats = await r.json()
    finally:
        await runner.cleanup()
    assert stats["ok"] == 8 and stats["rate_limited"] == 0
    charged = stats["prompt_tokens"] + stats["completion_tokens"]
    assert pool.stats.input_tokens + pool.stats.output_tokens == charged
    # our estimates missed the server's counts by this much in all; the usage took it back out
    assert lim.tokens is not None and abs(lim._admitted_tokens - charged) < 1
    refilled = stats["tokens_level"] - (600 - charged)  # what the server's bucket regained meanwhile
    assert lim.tokens.level == pytest.approx(600 - charged + refilled, abs=2.0)


async def test_limits_announced_by_the_server_are_adopted(tiny_prompt):
    # No --rpm given: after the first answer the client paces itself by the server's
    # x-ratelimit-limit-requests instead of discovering the quota through 429s.
    runner, port = await start(MockConfig(rpm=240, burst=1.0))  # 4/s, capacity 4
    try:
        lim = RateLimiter(concurrency=8)
        assert lim.concurrency.limit == 1  # quota unknown: probe with one call first
        await _ask_all(f"http://127.0.0.1:{port}/v1", lim, 12)
        async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/stats") as r:
            stats = await r.json()
    finally:
        await runner.cleanup()
    assert lim.rpm == 240 and lim.requests is not None
    assert lim.concurrency.limit == 8  # full concurrency once the limits were known
    assert stats["ok"] == 12 and stats["rate_limited"] <= 1


def test_configured_limits_tighter_than_the_servers_are_kept():
    lim = RateLimiter(rpm=60, tpm=1000)
    lim.observe(RateLimitInfo(limit_requests=600, limit_tokens=500))
    assert lim.rpm == 60 and lim.tpm == 500  # the tighter of ours and the server's


async def test_without_quota_flags_a_failed_first_attempt_ends_the_one_at_a_time_probe():
    # Before, only a success ended the probe: against a judge that never answers every
    # call went alone, one timeout after another.
    limiter = RateLimiter(concurrency=16)
    permit = await limiter.acquire(10)
    assert limiter.concurrency.limit == 1
    await limiter.release_failed(permit)
    assert limiter.concurrency.limit == 16


async def test_before_the_first_429_of_a_learned_quota_calls_leave_spaced():
    # The slow start frees two slots an answer: two calls sent a millisecond apart met the same
    # drained bucket and were both refused. Spaced, the first one's 429 pauses the second.
    lim = RateLimiter(concurrency=8)
    lim._end_probe(announced=False)  # the first call came back without quota headers
    lim.concurrency.raise_to_maximum()  # (the slow start's slots, all at once here)
    lim.measured_connect(0.02)  # a gap of 10 ms plus two connections: 50 ms
    second = await lim.acquire(100)
    third = await lim.acquire(100)
    assert third.granted_at - second.granted_at >= 0.05 - 1e-9
    # the slow start ended (at a 429, whose cut paces the calls, or at full concurrency): no gap
    lim.concurrency.slow_start = False
    await lim.acquire(100)
    assert lim._spaced_until == pytest.approx(third.granted_at + 0.05)
    # nor at a told quota
    told = RateLimiter(rpm=6000, concurrency=8)
    await told.acquire(100)
    await told.acquire(100)
    assert told._spaced_until == 0.0


async def test_stop_wakes_callers_waiting_for_quota():
    from drscore.engine.runtime.calls.limits import LimiterStopped

    limiter = RateLimiter(rpm=60, concurrency=4, burst_s=1.0)  # one request a second
    await limiter.acquire(1)
    waiter = asyncio.ensure_future(limiter.acquire(1))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    limiter.stop()
    with pytest.raises(LimiterStopped):
        await waiter


def test_quota_headers_set_the_bucket_size_and_move_the_level_by_the_servers_count():
    lim = RateLimiter(rpm=600, concurrency=4, margin_s=0.0)  # 10 a second; --burst 1 s: capacity 10
    now = lim.requests._t
    permit = lim._grant(5, now)  # our level right after charging it: 10 - 1 = 9
    assert permit.requests_after == (lim.requests, pytest.approx(9), 0.0)
    for _ in range(3):
        lim._grant(5, now)  # three more sent after it: 6
    # The server admitted the first with 4 left and 0.6 s to full: its bucket holds 4 + 0.6 x 10 = 10.
    # Our count then was 9, the server's 4: we are 5 ahead, and still are after the three sent since.
    assert lim._follow(lim.requests, permit.requests_after, 4, 0.6, now, 1.0) is not None
    assert lim.requests.capacity == pytest.approx(10) and lim.requests.level == pytest.approx(6 - 5)
    # The same answer again moves nothing: the correction made since its grant is discounted
    assert lim._follow(lim.requests, permit.requests_after, 4, 0.6, now, 1.0) is not None
    assert lim.requests.level == pytest.approx(1)
    # A server bucket of a whole minute's quota (4 left, 59.6 s to full: 600) is used as such
    assert lim._follow(lim.requests, permit.requests_after, 4, 59.6, now, 1.0) is not None
    assert lim.requests.capacity == pytest.approx(600)


def test_a_count_the_server_made_after_refilling_is_read_as_arriving_late(monkeypatch):
    lim = RateLimiter(tpm=600_000, concurrency=4, margin_s=0.0)  # 10,000 a second, capacity 10,000
    now = lim.tokens._t
    # observe() reads the clock: held at the grants' time, a loaded machine's milliseconds do not
    # refill the bucket past the 5-token tolerance (half a millisecond) between grant and count
    monkeypatch.setattr(time, "monotonic", lambda: now)
    full = lim._grant(1000, now)  # granted from a full bucket: the server's was full too, nothing refilled
    lim.observe(RateLimitInfo(remaining_tokens=9000, reset_tokens_s=0.1), full)
    assert lim.tokens.level == pytest.approx(9000, abs=5)
    lim.tokens.take(5000, now)  # 4,000 left
    below = lim._grant(1000, now)  # 3,000 after it
    # The server says 3,000 too, but admitted the call about ARRIVAL_S (10 ms) after our grant, with
    # 100 more refilled: so it really is 100 behind our count, and the bucket moves down by that
    lim.observe(RateLimitInfo(remaining_tokens=3000), below)
    assert lim.tokens.level == pytest.approx(3000 - 100, abs=5)


def test_a_bucket_in_debt_is_read_from_its_reset():
    lim = RateLimiter(tpm=600_000, concurrency=4, margin_s=0.0)  # 10,000 a second, capacity 10,000
    now = lim.tokens._t
    permit = lim._grant(25_000, now)  # our level after it: 10,000 - 25,000 = -15,000
    # remaining 0 hides a debt: 2.6 s to full means 10,000 - 26,000 = -16,000 (it counted 26,000)
    lim.observe(RateLimitInfo(remaining_tokens=0, reset_tokens_s=2.6), permit)
    assert lim.tokens.capacity == pytest.approx(10_000)  # not learned from a bucket in debt
    # and the permit is marked: done() will not charge the difference of its usage again
    assert lim.tokens.level == pytest.approx(-16_000, abs=50) and permit.synced


def test_a_reserve_holds_back_a_bucket_of_one_request():
    b = TokenBucket(per_minute=60, burst_s=1.0)  # one a second, capacity 1
    t = b._t
    b.take(1, t)
    # a reserve of 0.1 does not fit in a bucket of one: it is waited as time, at most LAG_S
    # (15 ms), since every request pays it
    assert b.wait_time(1, t, reserve=0.1) == pytest.approx(1.015)
    assert b.wait_time(1, t + 5.0, reserve=0.1) == 0.0  # full for seconds: nothing to wait
    assert b.wait_time(1, t + 1.01, reserve=0.1) == pytest.approx(0.005)  # full at t + 1, for 0.01 s
    # a lag of 8 ms (a near endpoint's): 1.008, and nothing left to wait 10 ms after full
    assert b.wait_time(1, t, reserve=0.1, lag_s=0.008) == pytest.approx(1.008)
    assert b.wait_time(1, t + 1.01, reserve=0.1, lag_s=0.008) == 0.0
    # the lag is time: at 6 a minute (10 s a request) still 15 ms, 0.015 of a request at 1/s
    # being 0.0015 of one at 0.1/s
    slow = TokenBucket(per_minute=6, burst_s=1.0)
    slow.take(1, slow._t)
    assert slow.wait_time(1, slow._t, reserve=0.5) == pytest.approx(10.015)
    big = TokenBucket(per_minute=600, burst_s=1.0)  # capacity 10: the reserve is a level
    big.take(10, big._t)
    assert big.wait_time(1, big._t, reserve=1.0) == pytest.approx(0.2)  # 2 units at 10 a second


async def test_without_headers_the_limiter_learns_a_token_rate_when_large_requests_are_refused():
    lim = RateLimiter(concurrency=4)
    sizes = [1000, 9000, 1500, 8000, 1200, 9500, 900, 8500]
    for x in sizes:
        p = await lim.acquire(x)
        await p.done(x)
    p = await lim.acquire(9800)  # the largest of all is refused
    await lim.rate_limited_release(p, RateLimitInfo(retry_after_s=0.01))
    assert lim.binding.dimension == "tokens"
    assert lim.tokens is not None and lim.requests is None and lim.token_learner.pace is not None
    assert lim.snapshot()["binding"] == "tokens" and lim.snapshot()["learned_tpm"] > 0


async def test_a_429_the_request_proof_cannot_explain_turns_a_start_up_guess_to_tokens():
    lim = RateLimiter(concurrency=4)
    for x in (10, 90, 15, 80, 12, 95, 9, 85):
        p = await lim.acquire(x)
        await p.done(x)
    p = await lim.acquire(8)  # the start-up burst drained the server's bucket: the smallest is refused
    await lim.rate_limited_release(p, RateLimitInfo(retry_after_s=0.01))
    assert lim.binding.dimension == "requests" and lim.requests is not None  # rank 0.5 / 9
    # Say those calls went 3 s ago, within a moment: 9 requests in a moment prove about 9 a
    # second (a 1 s burst). Now two calls of 3,000 tokens go, g seconds apart (the request
    # pace's, about 0.1 s), and a third is refused. A request bucket that took 9 in a moment
    # has refilled for 3 s: it cannot refuse the third request since (strain far over 1.05).
    # A token bucket can: the two calls prove 6,000 / (1 + g) tokens a second, and the refusal
    # allows up to 9,000 / (1 + 2g), so the token strain is 2/3 (1 + 2g) / (1 + g), under 1.05
    # for any g under 1.7 s.
    for learner in (lim.learner, lim.token_learner):
        learner._sent = [(seq, at - 3.0, units, told) for seq, at, units, told in learner._sent]
        learner._cut_until = 0.0  # past the first 429's pause
    for _ in range(2):
        p = await lim.acquire(3000)
        await p.done(3000)
    p = await lim.acquire(3000)
    await lim.rate_limited_release(p, RateLimitInfo(retry_after_s=0.01))
    vote = lim.binding.votes[-1]
    # (tokens were paced too since the start-up vote, which one rank made after 8 calls, and
    # their bucket, empty at that cut, held these calls)
    assert vote.paced == "tokens" and vote.by == "proofs" and vote.strain[0] > 1.05 >= vote.strain[1]
    assert lim.binding.dimension == "tokens" and lim.tokens is not None and lim.requests is None


async def test_a_start_up_guess_of_requests_after_a_burst_of_calls_paces_tokens_too():
    lim = RateLimiter(concurrency=4)
    for x in (1000, 9000, 1500, 8000, 1200, 9500, 900, 8500):
        p = await lim.acquire(x)
        await p.done(x)
    p = await lim.acquire(850)  # the smallest refused after 8 calls: rank 0.5 / 9, requests
    await lim.rate_limited_release(p, RateLimitInfo(retry_after_s=0.01))
    assert lim.binding.dimension == "requests" and lim.learner.taken_before(p.seq) == 8
    # one rank decided: the token learner's first cut paces too, from a bucket left empty
    assert lim.requests is not None and lim.tokens is not None
    assert lim.tpm == pytest.approx(lim.token_learner.rate() * 60) and lim.tokens.level == 0.0
    # the next 429, a small call the token bucket held (its grant left it lower than the request
    # bucket, as a share of each one's size): tokens, and the request pace goes
    for learner in (lim.learner, lim.token_learner):
        learner._cut_until = 0.0  # past the first 429's pause
        learner._sent.clear()  # no proofs to rule either dimension out: the ranks and the buckets decide
    lim.requests.level = lim.requests.capacity
    p = await lim.acquire(850)
    assert lim._held_by(p) == "tokens"
    await lim.rate_limited_release(p, RateLimitInfo(retry_after_s=0.01))
    assert lim.binding.votes[-1].paced == "tokens" and lim.binding.dimension == "tokens"
    assert lim.requests is None and lim.tokens is not None and not lim._tokens_paced_too
    # after two calls, a start-up refusal's token proof rests on those two: requests alone are
    # paced
    thin = RateLimiter(concurrency=4)
    for x in (1000, 9000):
        p = await thin.acquire(x)
        await p.done(x)
    p = await thin.acquire(850)
    await thin.rate_limited_release(p, RateLimitInfo(retry_after_s=0.01))
    assert thin.binding.dimension == "requests" and thin.learner.taken_before(p.seq) == 2
    assert thin.requests is not None and thin.tokens is None
    # after two calls of one size, the third refused: the sizes say nothing, so neither does the
    # vote. Both dimensions are paced, each learner started between its measure and its bound
    alike = RateLimiter(concurrency=4)
    for _ in range(2):
        p = await alike.acquire(5000)
        await p.done(5000)
    p = await alike.acquire(5000)
    await alike.rate_limited_release(p, RateLimitInfo(retry_after_s=0.01))
    assert alike.binding.votes[-1].by == "alike" and alike.binding.dimension == "requests"
    assert alike.requests is not None and alike.tokens is not None
    for learner in (alike.learner, alike.token_learner):
        assert learner._last_cut is not None and learner._last_cut.uncertain
        bound = learner._last_cut.bound
        assert bound is not None and learner.pace is not None and learner.pace < bound
        assert learner._first_growth == pytest.approx((bound / learner.pace) ** (1 / UNCERTAIN_REACH_S) - 1)


async def test_a_429_within_the_pause_of_the_one_before_does_not_vote():
    lim = RateLimiter(concurrency=4)
    for x in (1000, 9000, 1500, 8000, 1200, 9500, 900, 8500):
        p = await lim.acquire(x)
        await p.done(x)
    # the start-up burst: a large call refused (rank 8.5 / 10 among the ten sizes sent), and
    # one sent with it, the smallest (rank 0.5 / 10), within the pause the first began
    first, second = await lim.acquire(9200), await lim.acquire(850)
    await lim.rate_limited_release(first, RateLimitInfo(retry_after_s=5.0))
    assert lim.binding.dimension == "tokens" and lim.token_learner.pausing(time.monotonic())
    # as a vote, rank 0.05 while tokens are paced would turn the guess to requests
    await lim.rate_limited_release(second, RateLimitInfo(retry_after_s=5.0))
    assert lim.binding.dimension == "tokens" and len(lim.binding.votes) == 1
    assert lim.tokens is not None and lim.requests is None


async def test_the_token_reserve_covers_the_estimates_still_in_flight():
    lim = RateLimiter(tpm=600_000, concurrency=8, margin_s=0.0)  # 10,000 a second, capacity 10,000
    lim.estimate_error = lambda: 0.1  # each count within about 10% of its estimate
    now = lim.tokens._t
    first, second = lim._grant(3000, now), lim._grant(4000, now)  # level 3,000
    assert (first.var, second.var) == (pytest.approx(300.0 ** 2), pytest.approx(400.0 ** 2))
    # the next one of 2,000: two standard deviations of its own miss (200) and those in flight (300, 400)
    assert lim.spread(2000) == pytest.approx(2 * (200 ** 2 + 300 ** 2 + 400 ** 2) ** 0.5)  # 1,077
    # a request of a whole bucket or more needs a full bucket whatever its real size: no own term
    assert lim.spread(12_000) == pytest.approx(2 * (300 ** 2 + 400 ** 2) ** 0.5)  # 1,000
    # one of 9,600 has 400 of room beside it in a full bucket: its own term is at most that (200 x 2)
    assert lim.spread(9_600) == pytest.approx(2 * (200 ** 2 + 300 ** 2 + 400 ** 2) ** 0.5)
    assert lim.spread(9_900) == pytest.approx(2 * (50 ** 2 + 300 ** 2 + 400 ** 2) ** 0.5)  # 100 of room
    # 2,000 + 1,077 is 77 more than the 3,000 left: 7.7 ms at 10,000 a second
    assert lim._wait(2000, now) == pytest.approx((2000 + 2 * 290_000 ** 0.5 - 3000) / 10_000)
    await first.done(3000)  # its answer: only the second is uncertain now
    assert lim.spread(2000) == pytest.approx(2 * (200 ** 2 + 400 ** 2) ** 0.5)
    await lim.rate_limited_release(second, None)  # refused: nothing of it to be uncertain about
    assert lim.spread(2000) == pytest.approx(400.0) and lim._inflight_var == 0.0


async def test_a_call_past_the_whole_bucket_takes_the_misses_before_it_out_of_the_spread():
    lim = RateLimiter(tpm=600_000, concurrency=8, margin_s=0.0)  # told: 10,000 a second, capacity 10,000
    lim.estimate_error = lambda: 0.1
    now = lim.tokens._t
    a = lim._grant(3000, now)  # sd 300, level 7,000
    lim.tokens.level = lim.tokens.capacity  # the bucket refilled (the clock is not moved here)
    # 10,500 from a full 10,000: level -500, less than two deviations of its own (2 x 1,050) below 0,
    # so its real count may be under the 10,000 the server had: a's miss may still be short there
    b = lim._grant(10_500, now)
    assert lim.spread(0) == pytest.approx(2 * (300 ** 2 + 1050 ** 2) ** 0.5)
    lim.tokens.level = lim.tokens.capacity
    # 13,000 from a full bucket: -3,000, past two deviations (2 x 1,300 = 2,600). Even at its low
    # end it takes more than the server can hold beside a's and b's misses; the server admits it
    # only with its own bucket at least as full as ours was, so those are spent: its own alone
    c = lim._grant(13_000, now)
    assert lim.spread(0) == pytest.approx(2 * 1300.0) and list(lim._unsettled) == [c.seq]
    await a.done(3300)  # the earlier answers come back: nothing of theirs left to take out
    await b.done(10_000)
    assert lim.spread(0) == pytest.approx(2 * 1300.0)
    await c.done(13_000)
    assert lim.spread(0) == 0.0 and not lim._unsettled


async def test_a_pace_learned_from_429s_keeps_the_misses_before_a_large_call():
    # nothing told or announced: the server's bucket is not known to hold what ours does
    lim = RateLimiter(concurrency=8, margin_s=0.0)
    lim.tokens = lim._tokens_bucket(600_000)
    lim.estimate_error = lambda: 0.1
    now = lim.tokens._t
    a = lim._grant(3000, now)
    lim.tokens.level = lim.tokens.capacity
    lim._grant(13_000, now)
    assert a.seq in lim._unsettled
    assert lim.spread(0) == pytest.approx(2 * (300 ** 2 + 1300 ** 2) ** 0.5)


async def test_a_quota_header_takes_every_call_it_counts_out_of_the_spread():
    lim = RateLimiter(tpm=600_000, concurrency=8, margin_s=0.0)  # 10,000 a second
    lim.estimate_error = lambda: 0.1
    now = lim.tokens._t
    a, b, c = lim._grant(1000, now), lim._grant(2000, now), lim._grant(3000, now)  # sd 100, 200, 300
    # b's answer comes first: the server's count after admitting b holds a's and b's real
    # counts (a is still in flight), so only c is uncertain now
    lim.observe(RateLimitInfo(remaining_tokens=7000, limit_tokens=600_000), b)
    assert lim.spread(0) == pytest.approx(2 * 300.0) and len(lim._unsettled) == 1
    await a.done(1000)  # already taken out: its answer changes nothing
    assert lim.spread(0) == pytest.approx(2 * 300.0) and len(lim._unsettled) == 1
    await b.done(2000)
    await c.done(3000)
    assert lim.spread(0) == 0.0 and not lim._unsettled


def test_a_spread_that_does_not_fit_is_waited_in_full_and_the_margin_at_most_15_ms():
    b = TokenBucket(per_minute=60_000, burst_s=1.0, minimum_capacity=0.0)  # 1,000 a second, capacity 1,000
    t = b._t
    b.take(1000, t)
    # a request of 1,500 needs the full 1,000; margin 100 trimmed to 15 ms of refill (15), spread 200 in full
    assert b.wait_time(1500, t, reserve=100, spread=200) == pytest.approx(1.0 + 0.215)
    # full since t + 1 (for 0.1 s by t + 1.1): 0.115 s more
    assert b.wait_time(1500, t + 1.1, reserve=100, spread=200) == pytest.approx(0.115)
    # where it fits it is a level: 400 + 100 + 200 = 700 of the 1,000, 0.7 s from empty
    b.take(1000, t + 1.1)
    assert b.wait_time(400, t + 1.1, reserve=100, spread=200) == pytest.approx(0.7)


def test_an_estimated_call_just_under_the_buckets_size_waits_for_a_full_bucket_where_its_reserve_does_not_fit():
    b = TokenBucket(per_minute=60_000, burst_s=1.0, minimum_capacity=0.0)  # 1,000 a second, capacity 1,000
    t = b._t
    b.take(1000, t)
    # 800 estimated, spread 60 (2 x 3.75%), reserve 250: 1,110 does not fit. Going at 800 + 60
    # + 15 would meet a 429 if the server counted 900; a full bucket admits it whatever its
    # count: full at t + 1.0, then 15 ms (LAG_S of refill)
    assert b.wait_time(800, t, reserve=250, spread=60, estimated=True) == pytest.approx(1.0 + 0.015)
    # a size the server counted (or a charge known exactly) keeps the level: 800 + 60 + 15
    assert b.wait_time(800, t, reserve=250, spread=60) == pytest.approx(0.875)
    # where all three fit, the reserve stays a level: 600 + 60 + 250 = 910, 0.91 s from empty
    assert b.wait_time(600, t, reserve=250, spread=60, estimated=True) == pytest.approx(0.91)
    # a spread larger than the room beside the call is still waited in full: 900 + 200 + 15
    assert b.wait_time(900, t, reserve=250, spread=200, estimated=True) == pytest.approx(0.9 + 0.2 + 0.015)
    # without a reserve nothing changes: 800 + 60 is a level
    assert b.wait_time(800, t, spread=60, estimated=True) == pytest.approx(0.86)


async def test_a_call_estimated_just_under_the_bucket_is_not_sent_below_full_on_a_small_recent_error():
    lim = RateLimiter(tpm=431_400, concurrency=4)  # 7,190 a second, capacity 7,190; reserve 0.25 s
    lim.estimate_error = lambda: 0.04  # the recent error after a run of good estimates
    now = lim.tokens._t
    lim._grant(7190, now, sd=0.0)  # empty, by a call the server had counted (no spread in flight)
    # 5,900 estimated: two deviations take it to 6,372, short of a server count of 6,509 (a
    # prompt the fit puts 9% short); the reserve (1,797.5) does not fit beside it, so it waits
    # for the full bucket (1.0 s) and 15 ms past it
    assert lim._wait(5900, now) == pytest.approx(1.015, abs=1e-6)
    # a small call keeps its reserve as a level: 3,000 + 240 + 1,797.5 of 7,190
    assert lim._wait(3000, now) == pytest.approx((3000 + 240 + 1797.5) / 7190, abs=1e-6)
    # the server counted the prompt (sd: the answer's length alone, 100): 5,900 + 200 + 15 ms of refill
    assert lim._wait(5900, now, sd=100.0) == pytest.approx((5900 + 200 + 107.85) / 7190, abs=1e-6)


async def test_a_queued_calls_deviation_is_read_when_its_turn_comes():
    # A counted call's deviation is its answer's length: at the start of a run a prior (0.3 x the
    # template's expectation), then what the answers show. Read when the call entered the queue,
    # every call of a run's first wave kept the prior while the answers showed lengths within a
    # token (bench.pacing, told, the mock counting with Llama 3's vocabulary: a 105-token deviation
    # on all 100 calls, 35-60 ms waited past a full bucket on each of 54).
    lim = RateLimiter(tpm=60_000, concurrency=4, margin_s=0.0)  # 1,000 a second, capacity 1,000
    first = await lim.acquire(1000, sd=0.0)  # empties the bucket
    deviation = [105.0]
    queued = asyncio.create_task(lim.acquire(200, sd=lambda: deviation[0]))
    await asyncio.sleep(0.05)
    assert not queued.done()
    deviation[0] = 1.0  # an answer came back meanwhile
    permit = await queued
    assert permit.var == pytest.approx(1.0)  # the spread it adds for the calls after it is the new one
    for p in (first, permit):
        await p.done(None)


async def test_the_servers_count_moves_the_bucket_both_ways_and_the_usage_it_holds_is_not_counted_again():
    lim = RateLimiter(tpm=60_000, concurrency=4, margin_s=0.0)  # 1,000 a second, capacity 1,000
    now = lim.tokens._t
    a, b = lim._grant(500, now), lim._grant(300, now)  # our level: 500 after a, 200 after b
    # a really counted 440: the server had 560 left after it, 60 more than we had then
    lim.observe(RateLimitInfo(remaining_tokens=560, limit_tokens=60_000), a)
    assert lim.tokens.level == pytest.approx(260, abs=5)  # 200 + 60: up too
    await a.done(440)  # its own count came with its answer: nothing more
    assert lim.tokens.level == pytest.approx(260, abs=5)
    # b counted 330: 560 - 330 = 230 left on the server, against our 200 then and the 60 since;
    # b was granted from a bucket below full, so the server's 230 holds about 10 ms of refill (10
    # at 1,000 a second, ARRIVAL_S) that ours had not: 220
    lim.observe(RateLimitInfo(remaining_tokens=230, limit_tokens=60_000), b)
    await b.done(330)
    assert lim.tokens.level == pytest.approx(220, abs=5)


async def test_answers_out_of_order_the_later_calls_count_holds_the_earlier_ones_miss():
    lim = RateLimiter(tpm=60_000, concurrency=4, margin_s=0.0)
    now = lim.tokens._t
    c, d = lim._grant(400, now), lim._grant(100, now)  # our level: 600 after c, 500 after d
    # d answers first; c really counted 370: the server had 1,000 - 370 - 100 = 530 after d
    # (less 10 for the refill the server had before admitting d, which was granted below full)
    lim.observe(RateLimitInfo(remaining_tokens=530, limit_tokens=60_000), d)
    await d.done(100)
    assert lim.tokens.level == pytest.approx(520, abs=5)
    lim.observe(RateLimitInfo(remaining_tokens=630, limit_tokens=60_000), c)  # older than d's: not followed
    await c.done(370)  # its miss (30) was in d's count already
    assert lim.tokens.level == pytest.approx(520, abs=5)
    # without headers the usage corrects each call by its own miss
    told = RateLimiter(tpm=60_000, concurrency=4, margin_s=0.0)
    p = told._grant(400, told.tokens._t)
    await p.done(370)
    assert told.tokens.level == pytest.approx(630, abs=5)


async def test_the_first_count_of_an_announced_quota_levels_its_new_bucket_and_settles_that_call():
    # Nothing told: the first call is granted before any bucket exists, its estimate as
    # uncertain as the prior error (30%). Its headers announce 60,000 a minute (1,000 a second,
    # a bucket of 1,000) and, by a reset of 1.2 s behind a count floored at 0, a debt of 200.
    # That count holds the call's real charge, so the call leaves the in-flight spread now,
    # not at its answer (which came half a second past a full bucket), and its usage does not
    # move the bucket again.
    lim = RateLimiter(concurrency=4, margin_s=0.0)
    lim.estimate_error = lambda: 0.3
    first = await lim.acquire(1_200)
    assert lim.tokens is None
    assert lim.spread(500) == pytest.approx(2 * math.hypot(150, 360))  # its 360 in flight beside 150 of the next
    first.granted_at -= 0.5  # the count is read half a second after the grant (an answer's headers)
    lim.observe(RateLimitInfo(limit_tokens=60_000, remaining_tokens=0, reset_tokens_s=1.2), first)
    bucket = lim.tokens
    assert bucket is not None and first.synced
    assert lim.spread(500) == pytest.approx(2 * 150)  # the next call's own error alone
    # -200 when the server admitted it (ARRIVAL_S after the grant), and 0.49 s of refill since:
    # 290, and more by however long the test took since the grant
    assert bucket.level == pytest.approx(-200 + (bucket._t - first.granted_at - ARRIVAL_S) * 1_000, abs=1)
    assert 289 <= bucket.level < 1_000
    shifted = bucket.shifted
    await first.done(1_250)
    assert bucket.shifted == shifted

    # A count floored at 0 with no reset hides how deep the debt is: the bucket is only
    # clamped to it, and the call stays uncertain until its usage comes back
    lim = RateLimiter(concurrency=4, margin_s=0.0)
    lim.estimate_error = lambda: 0.3
    first = await lim.acquire(1_200)
    lim.observe(RateLimitInfo(limit_tokens=60_000, remaining_tokens=0), first)
    assert lim.tokens is not None and lim.tokens.level <= 0 and not first.synced
    assert lim.spread(500) == pytest.approx(2 * math.hypot(150, 360))


async def test_an_answer_without_the_servers_count_leaves_the_usage_to_correct_the_bucket():
    # What the pool does with every answer: observe its headers, then report its usage. A told
    # quota's endpoint sends no count (or only a request count): the usage must still correct
    # the tokens bucket, this call's and the earlier ones' (it once did not, after any answer).
    for info in (RateLimitInfo(), RateLimitInfo(retry_after_s=1.0),
                 RateLimitInfo(remaining_requests=5, limit_requests=600)):
        lim = RateLimiter(tpm=60_000, rpm=600, concurrency=4, margin_s=0.0)  # 1,000 tokens a second
        now = lim.tokens._t
        a, b = lim._grant(400, now), lim._grant(100, now)  # 500 left
        lim.observe(info, b)
        await b.done(160)  # 60 more than estimated
        lim.observe(info, a)
        await a.done(370)  # 30 less
        assert lim.tokens.level == pytest.approx(470, abs=5), info


async def test_a_refund_the_full_bucket_already_overflowed_is_not_given_twice():
    lim = RateLimiter(tpm=60_000, concurrency=4, margin_s=0.0)  # 1,000 a second, capacity 1,000
    now = lim.tokens._t
    p = lim._grant(800, now)  # 200 left; the server charged 500 (500 left)
    lim.tokens.take(0, now + 0.9)  # 0.9 s later ours holds 1,100 -> full; the server's has been full since 0.5 s
    q = lim._grant(1000, now + 0.9)  # a call of a whole bucket: both at 0
    await p.done(500)
    # the 300 not charged overflowed at the server before q came: ours must not rise by it now
    # (the plain difference would have put ours 300 above the server's)
    assert lim.tokens.level == pytest.approx(0.0, abs=1)  # the clock has not reached q's grant yet
    await q.done(1000)


def test_a_remembered_quota_paces_until_the_endpoints_own_headers_replace_it():
    lim = RateLimiter(concurrency=8)  # nothing told: one call at a time until the first answer
    assert lim.concurrency.limit == 1
    assert lim.remember(KnownQuota(rpm=600, tpm=0))
    assert lim.remembered and lim.rpm == 600 and lim.requests is not None and lim.tokens is None
    assert lim.concurrency.limit == 8  # paced from the first request instead
    # the endpoint now announces more requests and a token limit: both taken, though not tighter
    lim.observe(RateLimitInfo(limit_requests=900, remaining_requests=899, limit_tokens=60_000,
                              remaining_tokens=59_000))
    assert not lim.remembered and lim.announced and (lim.rpm, lim.tpm) == (900, 60_000)
    assert lim.known_quota() == KnownQuota(rpm=900, tpm=60_000)
    # announced once, a looser figure later is not taken (as before)
    lim.observe(RateLimitInfo(limit_requests=1200))
    assert lim.rpm == 900
    assert not RateLimiter(rpm=60).remember(KnownQuota(rpm=600))  # a told quota wins
    assert RateLimiter().known_quota() is None  # nothing announced: nothing to keep


def test_a_learned_quota_kept_from_an_earlier_run_starts_the_pace_and_the_learning_goes_on():
    lim = RateLimiter(concurrency=8)  # nothing told: one call at a time until the first answer
    assert lim.known_quota() is None
    assert lim.remember(KnownQuota(tpm=600_000, learned="tokens"))
    # the token learner paces at 0.99 x the proof from the first request, its bucket full (the
    # server's is, at the start of a run), at full concurrency; requests are not paced
    assert lim.binding.dimension == "tokens" and lim.requests is None and lim.tokens is not None
    assert lim.tpm == pytest.approx(0.99 * 600_000)
    assert lim.tokens.level == pytest.approx(lim.tokens.capacity) and lim.tokens.capacity == pytest.approx(9_900)
    assert lim.concurrency.limit == 8 and not lim.remembered
    # still learning: a 429 cuts the pace and is read against the tokens paced, not as a start-up's
    assert lim._learns and lim.learned_quota() is not None
    assert lim.learned_quota()["resumed"] == {"binding": "tokens", "per_minute": 600_000}
    # nothing cut it yet: what is kept for the next run stays the earlier proof, not this run's
    # lower one (0.99 of it, run after run)
    assert lim.known_quota() == KnownQuota(tpm=600_000, learned="tokens")
    assert lim.learned_quota()["guessed"] is False  # the earlier run's evidence chose tokens
    # where the sizes alone had chosen the dimension, the guess goes with the pace: this run's
    # summary and what it keeps say so until a 429's evidence of its own rules the other out (a
    # request quota paced as tokens meets no 429 to correct it)
    guessed = RateLimiter(concurrency=8)
    assert guessed.remember(KnownQuota(tpm=600_000, learned="tokens", guessed=True))
    assert guessed.learned_quota()["guessed"] is True
    assert guessed.known_quota() == KnownQuota(tpm=600_000, learned="tokens", guessed=True)
    # a quota kept before the field was: read, and claimed to be no guess
    old = msgspec.json.decode(b'{"rpm": 0.0, "tpm": 600000.0, "learned": "tokens"}', type=KnownQuota)
    assert old == KnownQuota(tpm=600_000, learned="tokens") and not old.guessed
    # a learned request quota, the other dimension unpaced
    lim = RateLimiter(concurrency=8)
    assert lim.remember(KnownQuota(rpm=120, learned="requests"))
    assert lim.binding.dimension == "requests" and lim.tokens is None and lim.rpm == pytest.approx(0.99 * 120)
    assert not RateLimiter(tpm=100_000).remember(KnownQuota(tpm=600_000, learned="tokens"))  # a told quota wins
    assert not RateLimiter().remember(KnownQuota(tpm=600_000, learned="seconds"))  # a dimension this version lacks


async def test_a_resumed_learned_quota_is_cut_by_this_runs_429s_and_kept_at_its_new_proof():
    lim = RateLimiter(concurrency=4)
    assert lim.remember(KnownQuota(rpm=600, learned="requests"))
    for x in (100, 900, 150, 800, 120, 950):  # six calls go at once: the bucket starts full
        p = await lim.acquire(x)
        await p.done(x)
    p = await lim.acquire(130)
    await lim.rate_limited_release(p, RateLimitInfo(retry_after_s=0.01))
    vote = lim.binding.votes[0]
    assert vote.paced == "requests" and vote.guess == "requests"  # read against the pace it started from
    # cut to 0.99 x what this run's six calls proved, and that proof is what the next run starts from
    proof = lim.learner.proven_rate()
    assert proof is not None and lim.rpm == pytest.approx(min(0.99 * proof[0], 0.99 * 10) * 60)
    kept = lim.known_quota()
    assert kept is not None and kept.learned == lim.binding.dimension
    # that 429, in the echo of the proven pace it started from, ruled on nothing: the earlier
    # run's evidence for requests stands
    assert vote.by == "echo" and not kept.guessed
    assert kept.rpm == lim.learned_quota()["proven_rpm"]
    # quota headers replace the learned pace, as they replace a remembered one
    lim.observe(RateLimitInfo(limit_requests=900, remaining_requests=899))
    assert lim.announced and lim.rpm == 900 and lim.known_quota() == KnownQuota(rpm=900)


class SlowStore:
    """A shared (``--redis``) quota store that takes a while to answer after the fact."""

    def attach(self, on_pause):
        pass

    def available(self):
        return True

    async def reserve(self, requests, tokens, shape):
        return 0.0

    async def adjust(self, tokens, shape):
        await asyncio.sleep(5)
        return True

    async def rate_limited(self, delay_s, remaining_requests, remaining_tokens, shape):
        await asyncio.sleep(5)
        return True


@pytest.mark.parametrize("ending", ["answered", "rate_limited"])
async def test_a_call_cancelled_while_the_shared_store_answers_still_gives_its_slot_back(ending):
    limiter = RateLimiter(tpm=60_000, concurrency=2)
    limiter.use_shared(SlowStore())
    permit = await limiter.acquire(100)
    assert limiter.concurrency.in_use == 1
    end = permit.done(120) if ending == "answered" else limiter.rate_limited_release(permit, None)
    task = asyncio.ensure_future(end)
    await asyncio.sleep(0.05)  # now awaiting the store
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert limiter.concurrency.in_use == 0  # else each such cancel lowers the run's concurrency for good
    second = await asyncio.wait_for(limiter.acquire(100), 1.0)
    await limiter.release_failed(second)


async def test_the_buckets_are_full_again_only_once_the_slowest_has_refilled():
    # 600 requests/min in a bucket of 10 (1-s burst) and 60,000 tokens/min in one of 1,000:
    # a call of 800 tokens takes one request (back in 0.1 s) and 800 tokens (back in 0.8 s).
    limiter = RateLimiter(rpm=600, tpm=60_000, concurrency=4)
    assert limiter.until_full() == 0.0
    permit = await limiter.acquire(800)
    assert limiter.until_full() == pytest.approx(0.8, abs=0.02)  # not the requests bucket's 0.1 s
    await limiter.release_failed(permit)
    assert RateLimiter(concurrency=4).until_full() == float("inf")  # nothing paces: no bucket to wait for


@pytest.mark.parametrize("queued", [False, True])
async def test_a_fault_while_estimating_gives_the_slot_back(queued):
    # An estimate that raises (any fault between the slot and the grant) failed that call but
    # kept its concurrency slot on the fast path: after `concurrency` such faults every later
    # call waited for a slot forever, and the run hung without a word.
    limiter = RateLimiter(tpm=60_000, concurrency=2)
    if queued:  # the bucket is empty: the caller queues, and estimates at the head
        held = await limiter.acquire(1_000)

    def broken() -> int:
        raise ZeroDivisionError("estimate")

    for _ in range(3):
        with pytest.raises(ZeroDivisionError):
            await asyncio.wait_for(limiter.acquire(broken), 1.0)
    assert limiter.concurrency.in_use == (1 if queued else 0)
    if queued:
        await limiter.release_failed(held)
    permit = await asyncio.wait_for(limiter.acquire(10), 2.0)
    await limiter.release_failed(permit)


async def test_a_reset_stated_as_a_time_reads_the_level_at_the_calls_admission():
    # Anthropic states when its bucket is whole again as a clock time, parsed as seconds from
    # the answer's arrival; its count is as of the call's admission, an answer's latency
    # earlier. A count of 0 (under 500 left, or a debt) is read through the reset: read as of
    # the admission, a 2.5 s answer showed 2.5 s of refill the server did not have then.
    limiter = RateLimiter(tpm=60_000, concurrency=4, burst_s=60)  # 60,000 tokens, 1,000 a second
    permit = await limiter.acquire(5_000)
    assert limiter.tokens is not None and limiter.tokens.level == pytest.approx(55_000, abs=20)
    permit.granted_at -= 2.5  # its answer comes 2.5 s after the grant
    # the server's bucket is whole again 57.5 s after the arrival (60 s after the admission),
    # stated to the second: from its high end, 60,000 - (57.5 + 2.5 + 1) x 1,000 = -1,000 at
    # the admission, against our 55,000 then
    info = RateLimitInfo(limit_tokens=60_000, remaining_tokens=0, reset_tokens_s=57.5, reset_grain_s=1.0,
                         resets_are_times=True)
    limiter.observe(info, permit)
    assert limiter.tokens.level == pytest.approx(-1_000, abs=20)  # not the arrival's 1,500
    # a duration (OpenAI's "57.5s") counts from the admission, as the count does: read as it is
    again = RateLimiter(tpm=60_000, concurrency=4, burst_s=60)
    permit = await again.acquire(5_000)
    permit.granted_at -= 2.5
    again.observe(RateLimitInfo(limit_tokens=60_000, remaining_tokens=0, reset_tokens_s=57.5), permit)
    assert again.tokens is not None and again.tokens.level == pytest.approx(2_500, abs=20)


async def test_a_remaining_count_floored_at_zero_without_a_reset_never_raises_a_bucket_in_debt():
    # Azure sends remaining counts without resets: a bucket in debt reads 0 left whatever its
    # depth. Followed as the level, it lifted our bucket out of its debt, and the next request
    # met a 429 (a told quota a fifth of a call's size: 25-41 of 100 calls).
    limiter = RateLimiter(tpm=60_000, concurrency=4, burst_s=1)  # 1,000 tokens, 1,000 a second
    permit = await limiter.acquire(3_000)  # larger than the bucket: admitted full, 2,000 in debt
    assert limiter.tokens is not None and permit.tokens_after is not None
    limiter.observe(RateLimitInfo(remaining_tokens=0), permit)
    assert not permit.synced and limiter.tokens.level < -1_900  # still in debt, as the server is



async def test_the_learners_are_told_what_each_call_cost_and_what_was_refused():
    lim = RateLimiter(concurrency=4)  # nothing told, no headers: the learners listen
    now = time.monotonic()
    sent = [lim._grant(n, now + i) for i, n in enumerate((100, 200, 300))]
    assert [units for _, _, units, _ in lim.token_learner._sent] == [100, 200, 300]
    await sent[0].done(120)  # the server counted 120
    await lim.rate_limited_release(sent[1], RateLimitInfo(retry_after_s=0.01))  # the server took nothing
    assert [(seq, units) for seq, _, units, _ in lim.token_learner._sent] == [(1, 120), (3, 300)]
    assert [(seq, units) for seq, _, units, _ in lim.learner._sent] == [(1, 1), (3, 1)]  # and the requests


def test_margins_follow_a_measured_connection_only_where_it_is_quicker():
    lim = RateLimiter(tpm=60_000)
    assert (lim.lag_s, lim.ambiguous_s) == (0.015, 0.05)  # nothing measured: the fixed margins
    lim.measured_connect(0.0004)  # a loopback connection: 8 ms + 0.4 ms, 10 ms + 2 x 0.4 ms
    assert lim.lag_s == pytest.approx(0.0084) and lim.ambiguous_s == pytest.approx(0.0108)
    lim.measured_connect(0.03)  # an endpoint 30 ms away: the fixed margins, never wider
    assert (lim.lag_s, lim.ambiguous_s) == (0.015, 0.05)
    lim.measured_connect(0.005)  # 13 ms of lag, 20 ms of window
    assert lim.lag_s == pytest.approx(0.013) and lim.ambiguous_s == pytest.approx(0.02)
    lim.measured_connect(0.008)  # the lag at 15 ms again, the window 26 ms
    assert lim.lag_s == pytest.approx(0.015) and lim.ambiguous_s == pytest.approx(0.026)


async def test_a_known_quotas_429_widens_the_lag_once_an_episode_up_to_50_ms():
    # A told quota paced to the token: a 429 means the server admitted the call behind our
    # grant by more than the lag covered (its own work on the prompt varies), so the lag doubles
    lim = RateLimiter(tpm=6_000_000, concurrency=4, burst_s=60)
    lim.measured_connect(0.002)  # loopback: 8 ms + 2 ms
    assert lim.lag_s == pytest.approx(0.010)
    first, second = await lim.acquire(10), await lim.acquire(10)
    await lim.rate_limited_release(first, RateLimitInfo(retry_after_s=0.05))
    assert lim.lag_s == pytest.approx(0.020)
    # refused with it, in its pause: the same short bucket, no second widening
    await lim.rate_limited_release(second, RateLimitInfo(retry_after_s=0.05))
    assert lim.lag_s == pytest.approx(0.020)
    await asyncio.sleep(0.06)
    for expected in (0.040, 0.050, 0.050):  # a later episode each: doubled, then held at 50 ms
        await lim.rate_limited_release(await lim.acquire(10), RateLimitInfo(retry_after_s=0.0))
        assert lim.lag_s == pytest.approx(expected)
    # a quicker connection measured later keeps the widening
    lim.measured_connect(0.0005)
    assert lim.lag_s == pytest.approx(0.050)


async def test_a_pace_learned_from_429s_keeps_its_lag():
    # nothing told, no headers: the 429s set the pace itself, not the margin past a full bucket
    lim = RateLimiter(concurrency=4)
    lim.measured_connect(0.002)
    await lim.rate_limited_release(await lim.acquire(10), RateLimitInfo(retry_after_s=0.0))
    assert lim.lag_s == pytest.approx(0.010)


async def test_a_429_naming_the_quota_paces_at_it_from_then_on():
    # No headers, nothing told: the first 429's body names the quota (judge.quota_refusal), so
    # the run paces at it as at an announced one, and learns nothing from the 429s
    lim = RateLimiter(concurrency=4)
    lim.measured_connect(0.002)
    p = await lim.acquire(5000)
    await lim.rate_limited_release(p, RateLimitInfo(retry_after_s=0.01, limit_tokens=60000, remaining_tokens=0,
                                                    named_quota="60,000 tokens per minute"))
    assert lim.announced and lim.tpm == 60000 and lim.requests is None
    assert lim.tokens is not None and lim.tokens.level <= 0  # it just refused a call: nothing left
    assert lim.learned_quota() is None and not lim.binding.votes
    assert lim.lag_s == pytest.approx(0.010)  # the 429 that named the quota met no pace of ours: not widened
    assert lim.known_quota() == KnownQuota(tpm=60000)  # kept for the next run as an announced quota


async def test_a_429_naming_the_quota_replaces_a_pace_learned_before_it():
    # An earlier 429 named nothing (a Gemini violation without its value) and a request pace
    # was learned; a later one names a token quota: that replaces the guess, both dimensions
    lim = RateLimiter(concurrency=4)
    for x in (100, 100, 100):
        p = await lim.acquire(x)
        await p.done(x)
    await lim.rate_limited_release(await lim.acquire(100), RateLimitInfo(retry_after_s=0.0))
    assert lim.learner.cuts and lim.rpm > 0 and lim.requests is not None  # requests paced, as learned
    await lim.rate_limited_release(await lim.acquire(100), RateLimitInfo(retry_after_s=0.0, limit_tokens=90000,
                                                                         remaining_tokens=0))
    assert lim.announced and lim.tpm == 90000 and lim.rpm == 0 and lim.requests is None
    assert lim.learned_quota() is None


async def test_a_call_refused_whole_gives_its_charge_back_and_pauses_nobody():
    lim = RateLimiter(tpm=60000, concurrency=4)  # a bucket of 1,000 tokens
    p = await lim.acquire(400)
    assert lim.tokens is not None and lim.tokens.level == pytest.approx(600, abs=5)
    await lim.release_refused(p)
    assert lim.tokens.level == pytest.approx(1000, abs=5) and lim.concurrency.in_use == 0
    assert lim.snapshot()["paused_s"] == 0 and lim.rate_limited == 0


def _gateway(tpm: float, window_s: float, wait_s: float | None = None, fixed: bool = True) -> RateLimitInfo:
    return RateLimitInfo(limit_tokens=tpm, retry_after_s=wait_s, gateway=GatewayQuota(
        headers="x-ai-ratelimit", tokens_per_minute=tpm, window_s=window_s, wait_s=wait_s, paces=("tokens",),
        fixed=fixed))


async def test_a_gateways_fixed_window_is_spent_at_once_and_a_refusal_starts_it_over():
    lim = RateLimiter(concurrency=8)
    lim.observe(_gateway(360_000, 20))  # 6,000 tokens a second, 120,000 a window
    tokens = lim.tokens
    assert tokens is not None and tokens.capacity == pytest.approx(120_000)
    # a provider's announced quota of the same rate holds one second of it
    provider = RateLimiter(concurrency=8)
    provider.observe(RateLimitInfo(limit_tokens=360_000))
    assert provider.tokens is not None and provider.tokens.capacity == pytest.approx(6_000)
    first = await lim.acquire(100_000)  # the window's first 100,000 go at once
    second = await lim.acquire(1_000)
    # 30,000 more need the 11,000 past the 19,000 left: 11,000 / 6,000 = 1.83 s
    assert tokens.wait_time(30_000, time.monotonic()) == pytest.approx(11_000 / 6_000, abs=0.05)
    # refused until the window starts over (7 s): then the whole window is there again, less
    # the 1,000 still in flight, which the gateway charges when they are answered
    delay = await lim.rate_limited_release(first, _gateway(360_000, 20, wait_s=7.0))
    assert delay == 7.0 and tokens.level == pytest.approx(119_000, abs=5)
    await lim.release_failed(second)


async def test_a_sliding_window_is_spent_once_then_refills_a_window_later_and_a_refusal_empties_it():
    lim = RateLimiter(concurrency=8)
    lim.observe(_gateway(360_000, 20, fixed=False))  # Kong's: the window slides
    tokens = lim.tokens
    assert tokens is not None and tokens.capacity == pytest.approx(120_000)
    first = await lim.acquire(100_000)  # the whole window at once, as a fixed one
    # but what it spent counts until the window has slid past it: 30,000 more wait the 20 s
    # hold, then the 10,000 past the 20,000 left at 6,000 a second: 21.7 s
    assert tokens.wait_time(30_000, time.monotonic()) == pytest.approx(20 + 10_000 / 6_000, abs=0.1)
    # refused: the count is at the limit; the wait its Retry-After said, and nothing left after
    delay = await lim.rate_limited_release(first, _gateway(360_000, 20, wait_s=3.0, fixed=False))
    assert delay == 3.0 and tokens.level <= 0.0


def test_a_team_shares_a_fixed_window_whole_and_a_sliding_one_as_a_second():
    # --redis: the store's buckets refill without pause, so a sliding window's burst would be
    # refilled while it still counts; the team paces it as a provider's one-second bucket
    fixed, sliding = RateLimiter(concurrency=8), RateLimiter(concurrency=8)
    fixed.observe(_gateway(360_000, 20))
    sliding.observe(_gateway(360_000, 20, fixed=False))
    assert fixed._shape()[3] == pytest.approx(120_000) and sliding._shape()[3] == pytest.approx(6_000)
    assert sliding._shape()[2] == fixed._shape()[2] == pytest.approx(6_000 * 0.97)


def test_a_longer_window_widens_the_bucket_and_keeps_its_level():
    lim = RateLimiter(concurrency=8)
    lim.observe(_gateway(360_000, 10))  # APISIX's first Reset said 10 s: 60,000
    assert lim.tokens is not None
    lim.tokens.take(50_000, time.monotonic())
    lim.observe(_gateway(180_000, 20))  # a 20 s Reset: half the pace, a window of 60,000
    assert lim.tpm == 180_000 and lim.tokens.capacity == pytest.approx(60_000)
    assert lim.tokens.level == pytest.approx(10_000, abs=50)  # what was spent stays spent
    assert lim.gateway_window_s == 20.0
    # a quota kept from an earlier run paces with a second's bucket until the gateway's headers
    # say its window: then what was spent of that second is spent of the window, no more
    kept = RateLimiter(concurrency=8)
    kept.remember(KnownQuota(tpm=360_000))
    assert kept.tokens is not None and kept.tokens.capacity == pytest.approx(6_000)
    kept.tokens.take(1_000, time.monotonic())
    kept.observe(_gateway(360_000, 20))
    assert kept.tokens.capacity == pytest.approx(120_000) and kept.tokens.level == pytest.approx(119_000, abs=50)
    # a told quota is the user's and stays, at its one second, beside a looser gateway's
    told = RateLimiter(tpm=100_000, concurrency=8)
    told.observe(_gateway(360_000, 20))
    assert told.tpm == 100_000 and told.tokens is not None and told.tokens.capacity == pytest.approx(100_000 / 60)
    # a limit the gateway did not set (the upstream's) keeps a provider's one-second bucket
    upstream = RateLimiter(concurrency=8)
    upstream.observe(RateLimitInfo(limit_tokens=360_000, gateway=GatewayQuota(
        headers="litellm", requests_per_minute=10, window_s=60.0, paces=("requests",))))
    assert upstream.tokens is not None and upstream.tokens.capacity == pytest.approx(6_000)
