"""The mock's quota buckets by hand: refill, debt, and the time a bucket sat full (the
quota clients left unused, which the pacing bench reads)."""
from __future__ import annotations

import pytest

from drscore.judge.mock.quota import Quota, TokenBucket


def test_a_bucket_counts_the_seconds_it_sat_full_after_its_first_charge():
    b = TokenBucket(60, 2.0, now=0.0)  # one a second, capacity 2
    b.refill(5.0)
    assert b.full_s == 0.0  # never charged: a bucket nobody has used yet offers nothing lost
    b.take(2)  # empty at 5
    b.refill(8.0)  # full again at 7: 1 s of quota offered and not taken
    assert b.level == 2 and b.full_s == pytest.approx(1.0)
    b.take(5)  # a request over the capacity: debt of 3, full again at 8 + 5
    b.refill(12.0)
    assert b.level == pytest.approx(1.0) and b.full_s == pytest.approx(1.0)
    b.refill(14.5)
    assert b.full_s == pytest.approx(2.5)


def test_a_give_back_past_a_full_bucket_is_dropped_and_counted():
    b = TokenBucket(600, 1.0, now=0.0)  # 10 a second, capacity 10
    b.take(16)  # a reservation of 16: level -6, full again at 1.6
    b.give_back(4, 0.5)  # -6 + 5 refilled + 4 = 3: nothing past the top
    assert b.level == pytest.approx(3.0) and b.dropped == 0.0
    b.give_back(5, 1.1)  # 3 + 6 refilled = 9, + 5 = 14: 4 past the top, dropped
    assert b.level == pytest.approx(10.0) and b.dropped == pytest.approx(4.0)
    b.refill_to_full(2.0)
    assert b.dropped == 0.0


def test_admission_refills_before_it_charges():
    t = [0.0]
    q = Quota(rpm=60, tpm=0, burst=1.0, clock=lambda: t[0])
    assert q.admit(0) == 0.0
    assert q.admit(0) == pytest.approx(1.0)  # refused: one a second
    t[0] = 3.0
    assert q.admit(0) == 0.0 and q.requests is not None and q.requests.full_s == pytest.approx(2.0)
