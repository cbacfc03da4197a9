"""A bucket's takes replayed when a count arrives: hand-computed levels at 100 a second
in a bucket of 1,000."""
from __future__ import annotations

import pytest

from drscore.engine.runtime.calls.history import BucketHistory


def test_without_a_full_bucket_in_between_a_count_moves_the_level_by_the_miss():
    h = BucketHistory(rate=100.0, capacity=1000.0)
    first = h.took(0.0, 1000.0, 500.0)  # 500 left
    h.took(1.0, 600.0, 300.0)  # 500 + 100 refilled, then 300 left
    # replayed with 600 for the first: 400 at t=0, 200 at t=1, 300 at t=2; with 500: 400 at t=2
    assert h.counted(first, 600.0, now=2.0) == pytest.approx(-100.0)


def test_an_overestimate_is_forgiven_once_the_bucket_was_full():
    h = BucketHistory(rate=100.0, capacity=1000.0)
    take = h.took(0.0, 1000.0, 500.0)
    # 10 s later both replays are full: the 200 the server did not charge overflowed
    assert h.counted(take, 300.0, now=10.0) == 0.0
    take = h.took(20.0, 1000.0, 500.0)
    # 3 s later: with 300, 700 + 300 is just full at t=23, nothing lost yet; with 500, 800: the whole 200
    assert h.counted(take, 300.0, now=23.0) == pytest.approx(200.0)
    take = h.took(30.0, 1000.0, 500.0)
    # 4 s later: with 300 full since t=33 (1,000); with 500, 900: the refund is 100, not 200
    assert h.counted(take, 300.0, now=34.0) == pytest.approx(100.0)


def test_an_underestimate_is_forgiven_by_the_time_our_bucket_sat_full():
    h = BucketHistory(rate=100.0, capacity=1000.0)
    take = h.took(0.0, 1000.0, 500.0)
    # at t=6 with 500: full since t=5 (1,000); with 700: 300 + 600 = 900. One second full forgave 100 of 200
    assert h.counted(take, 700.0, now=6.0) == pytest.approx(-100.0)


def test_counts_out_of_order_keep_the_takes_until_the_first_is_known():
    h = BucketHistory(rate=100.0, capacity=1000.0)
    a, b = h.took(0.0, 1000.0, 400.0), h.took(0.0, 600.0, 400.0)  # 200 left
    assert h.counted(b, 300.0, now=1.0) == pytest.approx(100.0)  # nothing full: its own miss
    assert len(h) == 2  # a's count is still unknown: b stays in the replay
    assert h.counted(a, 500.0, now=1.0) == pytest.approx(-100.0)
    assert len(h) == 0
    # the next take starts from the bucket as it is then
    c = h.took(5.0, 250.0, 100.0)
    assert h.counted(c, 150.0, now=5.0) == pytest.approx(-50.0) and len(h) == 0


def test_beyond_its_limit_the_oldest_take_counts_as_its_estimate():
    h = BucketHistory(rate=100.0, capacity=1000.0, limit=2)
    lost, b = h.took(0.0, 1000.0, 500.0), h.took(0.0, 500.0, 100.0)
    h.took(0.0, 400.0, 100.0)  # a third: the first (never answered so far) is folded at 500
    assert len(h) == 2
    # its count arrives after all: the plain difference, as without a history
    assert h.counted(lost, 450.0, now=20.0) == pytest.approx(50.0)
    assert h.counted(b, 100.0, now=20.0) == 0.0


def test_a_closed_history_takes_a_count_as_the_plain_difference():
    h = BucketHistory(rate=100.0, capacity=1000.0)
    take = h.took(0.0, 1000.0, 500.0)
    h.close()  # the bucket was replaced: its takes are no longer the level's story
    assert h.counted(take, 300.0, now=10.0) == pytest.approx(200.0) and len(h) == 0


async def test_the_limiter_keeps_one_history_while_a_learned_rate_moves_and_a_new_one_for_a_new_bucket():
    from drscore.engine.runtime.calls.limits import RateLimiter

    lim = RateLimiter(tpm=60_000, concurrency=4, margin_s=0.0)
    now = lim.tokens._t
    a = lim._grant(500, now)
    lim.tokens.set_rate(66_000, now)  # a pace that grew: the same bucket, the same history
    b = lim._grant(100, now)
    assert a.take is not None and b.take is not None and a.take[0] is b.take[0]
    assert a.take[0].rate == pytest.approx(1100.0)
    lim.tokens = lim._tokens_bucket(120_000)  # announced limits: a new bucket
    c = lim._grant(100, now)
    assert c.take is not None and c.take[0] is not a.take[0] and a.take[0].closed
    for p in (a, b, c):
        await p.done(p.estimate)


def test_a_bucket_held_from_refilling_forgives_nothing_while_held():
    # 10 a second into 100, refilling nothing before t = 10 (a sliding window's burst): a call
    # estimated at 10 and counted at 5 a second later leaves 95, not 90, where a refilling
    # bucket would have been full either way by then (90 + 10 and 95 + 10, capped at 100)
    held = BucketHistory(rate=10, capacity=100)
    held.held_until = 10.0
    assert held.counted(held.took(0.0, 100, 10), 5, 1.0) == pytest.approx(5)
    refilling = BucketHistory(rate=10, capacity=100)
    assert refilling.counted(refilling.took(0.0, 100, 10), 5, 1.0) == pytest.approx(0)
