"""The mock's quota buckets by hand: refill, debt, the time a bucket sat full (the quota
clients left unused, which the pacing bench reads), and Anthropic's output-token bucket."""
from __future__ import annotations

import pytest

from drscore.judge.mock.quota import Figures, Quota, Refusal, TokenBucket


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


def test_an_output_quota_reserves_the_cap_and_keeps_only_what_the_answer_used():
    t = [0.0]
    # burst 60 s: each bucket holds its whole minute. tokens: 600, 10 a second; output: 120, 2 a second
    q = Quota(rpm=0, tpm=600, burst=60.0, clock=lambda: t[0], otpm=120)
    assert q.tokens is not None and q.output is not None
    assert q.admit(10, output=100) == 0.0  # the prompt's 10, and the cap of 100 held
    assert q.tokens.level == 590 and q.output.level == 20
    t[0] = 5.0  # output: 20 + 5 x 2 = 30
    q.give_back_output(100 - 25)  # the answer used 25 of its cap: 30 + 75
    assert q.output.level == pytest.approx(105.0) and q.output.dropped == 0.0
    # a cap of 110 against 105 left waits (110 - 105) / 2 = 2.5 s, and nothing is charged meanwhile
    assert q.admit(10, output=110) == pytest.approx(2.5)
    assert q.refused == Refusal(dimension="output_tokens", limit=120, left=105, requested=110)
    assert q.tokens.level == 600 and q.output.level == pytest.approx(105.0)  # tokens: 590 + 50, full
    # full again in (120 - 105) / 2 = 7.5 s; the tokens bucket is full now
    assert q.figures() == {"tokens": Figures(limit=600, remaining=600, reset_s=0.0),
                           "output_tokens": Figures(limit=120, remaining=105, reset_s=pytest.approx(7.5))}
    # OpenAI-style headers state requests and tokens only, never the output bucket
    assert sorted(q.headers()) == ["x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens",
                                   "x-ratelimit-reset-tokens"]
    q.give_back_output(0)  # nothing unused: nothing changes
    assert q.output.level == pytest.approx(105.0)
    q.reset()
    assert q.output.level == 120


def test_the_refusal_names_the_bucket_that_waits_longest():
    t = [0.0]
    q = Quota(rpm=0, tpm=600, burst=60.0, clock=lambda: t[0], otpm=60)  # tokens 10 a second; output 1
    assert q.admit(590, output=50) == 0.0  # left: 10 tokens, 10 output
    # tokens: (40 - 10) / 10 = 3 s; output: (20 - 10) / 1 = 10 s, the longer
    assert q.admit(40, output=20) == pytest.approx(10.0)
    assert q.refused is not None and q.refused.dimension == "output_tokens" and q.refused.requested == 20
    # tokens: (400 - 10) / 10 = 39 s; output: (11 - 10) / 1 = 1 s
    assert q.admit(400, output=11) == pytest.approx(39.0)
    assert q.refused is not None and q.refused.dimension == "tokens"
    assert q.tokens is not None and q.output is not None
    assert q.tokens.level == 10 and q.output.level == 10  # all or nothing: neither refusal charged a bucket
    # without an output quota the output asked is ignored
    plain = Quota(rpm=0, tpm=600, burst=60.0, clock=lambda: t[0])
    assert plain.output is None and plain.admit(10, output=10**9) == 0.0 and "output_tokens" not in plain.figures()
