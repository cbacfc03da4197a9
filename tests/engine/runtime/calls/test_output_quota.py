"""The output-token quota that holds each call's cap (Anthropic's OTPM): every level below is
worked by hand on a clock the test moves."""
from __future__ import annotations

import asyncio
import time

import pytest

from drscore.engine.runtime.calls.output_quota import OutputQuota, started
from support.mock_http import FakeClock as Clock


async def test_a_cap_is_held_until_the_answer_gives_back_what_it_did_not_use():
    clock = Clock()
    q = OutputQuota(6_000, clock=clock)  # 100 tokens a second, a minute's worth held
    await q.reserve(4_000)
    assert q.level == 2_000
    clock.now += 3.0  # refilled 300
    q.settle(4_000, 500)  # used 500: 3,500 back
    assert q.level == pytest.approx(2_000 + 300 + 3_500)
    clock.now += 60.0
    assert q.level_at(clock()) == 6_000  # never above a minute's worth


async def test_a_refused_or_unsent_call_gives_its_whole_cap_back_and_a_failed_one_too():
    clock = Clock()
    q = OutputQuota(6_000, clock=clock)
    await q.reserve(1_000)
    await q.reserve(2_000)
    q.release(1_000)  # refused: the server never held it
    q.settle(2_000, 0)  # admitted, then failed with nothing written
    assert q.level == 6_000


async def test_a_cap_over_the_whole_bucket_goes_when_the_bucket_is_full_and_leaves_a_debt():
    clock = Clock()
    q = OutputQuota(6_000, clock=clock)
    assert q.wait_for(8_000, clock()) == 0.0  # a full bucket admits it, as the server does
    await q.reserve(8_000)
    assert q.level == -2_000
    # 2,100 to refill at 100 a second, and the margin (MARGIN_S of the quota: 25) to spare
    assert q.wait_for(100, clock()) == pytest.approx(21.25)


async def test_a_call_waits_for_the_refill_and_a_give_back_ends_the_wait_sooner():
    q = OutputQuota(6_000)  # the real clock: 100 tokens a second
    await q.reserve(6_000)
    waiter = asyncio.create_task(q.reserve(3_000))  # 30 s of refill
    await asyncio.sleep(0.05)
    assert not waiter.done()
    q.settle(6_000, 0)  # the first call failed: its whole cap back
    await asyncio.wait_for(waiter, timeout=10.0)  # not the 30 s of refill
    assert q.waits == 1 and q.wait_s > 0.0
    assert q.level <= 3_100  # 6,000 back, 3,000 taken, a few tokens refilled


async def test_a_larger_or_smaller_cap_at_the_send_takes_or_gives_the_difference():
    clock = Clock()
    q = OutputQuota(6_000, clock=clock)
    await q.reserve(1_000)
    assert q.resize(1_000, 1_500) == 1_500 and q.level == 4_500
    assert q.resize(1_500, 500) == 500 and q.level == 5_500


def test_the_first_statement_starts_the_bucket_where_the_server_had_it_refilled_since():
    # 16,000 a minute (266.7 a second); the preflight was sent 2 s ago, and the server said
    # 14,500 remained after it held the preflight's cap: plus 533 refilled since
    q = started(16_000, 14_500, time.monotonic() - 2.0)
    assert q.level == pytest.approx(14_500 + 2.0 * 16_000 / 60, abs=30)
    assert started(16_000, 15_900, time.monotonic() - 2.0).level == 16_000  # never above a minute's worth
    assert started(16_000, None, time.monotonic()).level == 16_000  # no count: a full bucket


def test_a_refusals_count_lowers_the_mirror_and_a_new_limit_keeps_its_share():
    clock = Clock()
    q = OutputQuota(6_000, clock=clock)
    q.refused(2_500)
    assert q.level == 2_500
    q.refused(4_000)  # never raised by a count
    assert q.level == 2_500
    q.restate(12_000)  # the same share of a bucket twice the size
    assert (q.per_minute, q.level) == (12_000, 5_000)


async def test_a_wait_cancelled_takes_nothing_and_the_next_caller_goes_first():
    clock = Clock()
    q = OutputQuota(6_000, clock=clock)
    await q.reserve(6_000)
    waiter = asyncio.create_task(q.reserve(3_000))  # 30 s of refill on the frozen clock
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert q.level == 0  # nothing was taken for it
    q.settle(6_000, 1_000)  # 5,000 back: the next caller is not held behind the cancelled one
    await asyncio.wait_for(q.reserve(4_000), timeout=5.0)
    assert q.level == 1_000


class Store:
    """A team's bucket as the limiter's store protocol gives it: says how long to wait, records
    what it is told; ``up`` False: gone."""

    def __init__(self, waits: list[float]) -> None:
        self.waits, self.told, self.up = waits, [], True

    def attach(self, on_pause) -> None:
        pass

    def available(self) -> bool:
        return self.up

    async def reserve(self, requests, tokens, shape):
        self.told.append(("reserve", tokens, shape))
        return self.waits.pop(0) if self.waits else 0.0

    async def adjust(self, tokens, shape):
        self.told.append(("adjust", tokens, shape))
        return True

    async def rate_limited(self, delay_s, remaining_requests, remaining_tokens, shape):
        self.told.append(("limited", delay_s, remaining_tokens))
        return True


async def test_a_teams_bucket_holds_the_caps_and_hears_every_give_back():
    clock = Clock()
    store = Store(waits=[0.02])  # the team's bucket says: not yet, then yes
    q = OutputQuota(6_000, clock=clock, shared=store)
    await q.reserve(1_000)
    q.holds_first(400)  # the first call's cap, already out of the level the server stated
    q.settle(1_000, 100)
    q.refused(2_000)
    await asyncio.sleep(0)  # the store is told without holding up the call
    shape = (0.0, 0.0, 100.0, 6_000)  # no request dimension; 100 tokens a second, a minute's bucket
    assert store.told == [("reserve", 1_000, shape), ("reserve", 1_000, shape), ("adjust", 400, shape),
                          ("adjust", -900, shape), ("limited", 0.0, 2_000)]
    assert q.waits == 1
    store.up = False  # the store gone: the mirror here paces alone
    await q.reserve(500)
    assert store.told[-1][0] == "limited" and q.level == pytest.approx(2_000 - 500)
