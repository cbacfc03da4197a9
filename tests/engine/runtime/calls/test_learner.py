"""The header-less learner by hand: its cuts, growth and proofs on a fake clock."""
from __future__ import annotations

import pytest

from drscore.engine.runtime.calls.learner import RateLearner, strain_of


def test_the_rate_learner_cuts_once_per_episode_then_grows():
    now = [0.0]
    learner = RateLearner(decrease=0.9, increase_per_s=0.01, first_increase_per_s=0.05, window_s=4.0,
                          clock=lambda: now[0])
    for t in range(9):  # 2 answers per second for 4 s: 8 intervals over 4 s
        now[0] = t * 0.5
        learner.success()
    assert learner.pace is None  # nothing paced before the first 429
    assert learner.rate_limited(pause_s=1.0) and learner.pace == pytest.approx(0.9 * 2.0)
    assert not learner.rate_limited(pause_s=1.0)  # same episode (within the pause): no second cut
    for t in (5.0, 5.5, 6.0, 6.5, 7.0):  # the pause ended at 5.0: growth from there, 5% a second compounded
        now[0] = t
        learner.success()
    assert learner.pace == pytest.approx(1.8 * 1.05 ** 2)
    # The second cut starts from the lower of the pace and the accepted rate: 8 answers in
    # the window 3.0-7.0 (none during the pause) = 7 intervals / 4 s = 1.75 per second.
    assert learner.rate_limited(pause_s=1.0) and learner.pace == pytest.approx(0.9 * 1.75)
    now[0] = 10.0  # then the slow linear step: 0.01 x 1.575 per second, from 8.0 (the pause's end)
    learner.success()
    assert learner.pace == pytest.approx(1.575 + 2 * 0.01 * 1.575)


def test_the_learner_keeps_only_its_window_of_answers():
    now = [0.0]
    learner = RateLearner(window_s=4.0, clock=lambda: now[0])
    for t in range(1000):  # a long run without a single 429
        now[0] = t * 0.1
        learner.success()
    assert len(learner._successes) <= 41  # 4 s of answers at 10 a second, not all 1,000


def test_the_first_cut_measures_from_the_first_request_less_the_servers_burst():
    now = [0.0]
    learner = RateLearner(decrease=0.9, burst_s=1.0, clock=lambda: now[0])
    learner.started(0.0)
    now[0] = 3.0
    # 8 units taken in 3 s, one second of them the server's full bucket: 8 / (3 + 1) = 2 a second
    assert learner.rate_limited(pause_s=1.0, admitted=8.0)
    assert learner.pace == pytest.approx(0.9 * 2.0)


def _uncertain_cut(now: list[float], uncertain: bool = True) -> RateLearner:
    """A first cut at 0.5 s on 3 units taken (3 / 1.5 s = 2 a second, cut to 0.9 x 2 = 1.8),
    under a refusal's bound of 7.2 a second."""
    learner = RateLearner(decrease=0.9, burst_s=1.0, first_increase_per_s=0.15, clock=lambda: now[0])
    learner.started(0.0)
    now[0] = 0.5
    assert learner.rate_limited(pause_s=1.0, admitted=3.0, bound=7.2, uncertain=uncertain)
    return learner


def test_an_uncertain_first_cut_starts_between_its_measure_and_bound_and_climbs_to_the_bound_in_two_seconds():
    now = [0.0]
    learner = _uncertain_cut(now)
    # sqrt(1.8 x 7.2) = 3.6; 3.6 x g^2 = 7.2 within UNCERTAIN_REACH_S (2 s): g = sqrt(2) a second
    for at, pace in ((0.5, 3.6), (1.5, 3.6), (2.5, 3.6 * 2 ** 0.5), (3.5, 7.2)):
        now[0] = at
        learner.success()
        assert learner.pace == pytest.approx(pace)
    # told the same bound, a certain cut starts at its measure and grows 15% a second
    now = [0.0]
    certain = _uncertain_cut(now, uncertain=False)
    for at, pace in ((0.5, 1.8), (1.5, 1.8), (2.5, 1.8 * 1.15)):
        now[0] = at
        certain.success()
        assert certain.pace == pytest.approx(pace)


def test_a_429_met_on_an_uncertain_climb_is_no_proof_to_hold_and_the_slow_start_goes_on_from_it():
    now = [0.0]
    learner = _uncertain_cut(now)
    for at in (1.5, 2.5, 3.5):
        now[0] = at
        learner.success()  # at the bound, 7.2 a second
    # ten calls 0.1 s apart got in, (9 + 1) / (0.9 + 1) = 5.26 a second proven; the 11th refused
    for seq in range(1, 11):
        learner.sent(seq, 2.5 + 0.1 * seq)
    now[0] = 3.6
    assert learner.rate_limited(pause_s=1.0, seq=11)
    learner.refused(11)
    proof = 10 / 1.9
    # 0.99 of the proof, as a second cut, but still in the slow start: 15% a second from the pause's end
    assert learner.cuts == 1 and learner.pace == pytest.approx(0.99 * proof)
    for at in (4.6, 5.6):
        now[0] = at
        learner.success()
    assert learner.pace == pytest.approx(0.99 * proof * 1.15)
    # the same ten calls again, and a 429: now a proven cut, held along the cubic
    for seq in range(12, 22):
        learner.sent(seq, 4.6 + 0.1 * (seq - 11))
    now[0] = 5.7
    assert learner.rate_limited(pause_s=1.0, seq=22)
    assert learner.cuts == 2 and learner.pace == pytest.approx(0.99 * proof)
    for at in (6.7, 7.7):
        now[0] = at
        learner.success()
    assert learner.pace == pytest.approx(0.99 * proof, rel=1e-4)  # 1 s along the cubic: flat


def test_a_noisy_learner_is_never_cut_below_what_the_endpoint_took_since_the_last_429():
    now = [0.0]
    learner = RateLearner(decrease=0.9, burst_s=1.0, noisy=True, clock=lambda: now[0])
    learner.started(0.0)
    now[0] = 3.0
    learner.rate_limited(pause_s=1.0, admitted=8.0)  # pace 1.8
    learner.pace = 1.0  # say a run of tiny requests had kept it low
    now[0] = 13.0  # 10 s later: 25 more units taken, 2.5 a second
    assert learner.rate_limited(pause_s=1.0, admitted=33.0)
    assert learner.limit == pytest.approx(2.5) and learner.pace == pytest.approx(0.9 * 2.5)


def test_a_learner_resumed_from_an_earlier_proof_paces_as_after_a_proven_cut():
    now = [100.0]
    learner = RateLearner(burst_s=1.0, clock=lambda: now[0])
    learner.resume(10.0, now[0])  # an earlier run proved 10 a second
    # 0.99 x the proof, then the cubic from now: 9.9 + 0.1 x (s / 30)^3, s seconds on
    assert learner.pace == pytest.approx(9.9) and learner.rate() == pytest.approx(9.9)
    for at, pace in ((115.0, 9.9 + 0.1 / 8), (130.0, 10.0), (160.0, 9.9 + 0.8)):
        now[0] = at
        learner.success()
        assert learner.pace == pytest.approx(pace)
    # its first 429 is a later cut's: to 0.99 x what this run's calls prove (4 of 10 units, 0.5 s
    # apart: (30 + 10) / (1.5 + 1) = 16 a second), never above the pace it had
    for seq in range(1, 5):
        learner.sent(seq, 160.0 + 0.5 * (seq - 1), 10.0)
    now[0] = 161.6
    assert learner.rate_limited(pause_s=1.0, seq=5)
    assert learner.pace == pytest.approx(min(0.99 * 16.0, 9.9 + 0.8))


def test_the_proven_rate_by_hand():
    learner = RateLearner(burst_s=1.0, clock=lambda: 10.0)
    learner.sent(1, 0.0, 4.0)
    assert learner.proven_rate() is None  # one call proves nothing
    learner.sent(2, 1.0, 30.0)
    # A bucket of 1 s of rate r: r + r x 1 - 4 >= min(30, r). r >= 30 would need 2r - 4 >= 30
    # (r >= 17: so r = 30 is the least there); below 30, 2r - 4 >= r: r >= 4. A call larger than
    # the bucket waits for a full one, so it proves little.
    rate, stretch = learner.proven_rate()
    assert rate == pytest.approx(4.0) and stretch == pytest.approx(1.0)
    learner.sent(3, 3.0, 10.0)
    # 1 -> 3: r + 3r - 34 >= min(10, r): r >= 11 (44 / 4); 2 -> 3: r + 2r - 30 >= min(10, r):
    # r >= 40 / 3, the best: the 30 units sent at 1.0 drained the bucket before the call at 3.0
    rate, stretch = learner.proven_rate()
    assert rate == pytest.approx(40 / 3) and stretch == pytest.approx(2.0)
    learner.success(34.0, seq=2)  # the server counted 34, not 30: 2 -> 3 proves (34 + 10) / 3
    assert learner.proven_rate()[0] == pytest.approx(44 / 3)
    # at call 3's 429, calls sent from 3 on prove nothing (they may be refused as well): 1 -> 2 proves 4
    assert learner.proven_rate(before=3)[0] == pytest.approx(4.0)
    learner.refused(2)  # refused after all: it took nothing. 1 -> 3: r + 3r - 4 >= min(10, r): r >= 4 / 3
    assert learner.proven_rate()[0] == pytest.approx(4 / 3)


def test_the_strain_of_a_refusal_by_hand():
    learner = RateLearner(burst_s=1.0, clock=lambda: 0.0)
    for seq, at in ((1, 0.0), (2, 0.1), (3, 0.2), (4, 0.3)):
        learner.sent(seq, at)
    # four requests in 0.3 s: r + 0.3 r >= 4, a rate of at least 4 / 1.3 = 3.08 a second
    assert learner.proven_rate()[0] == pytest.approx(4 / 1.3)
    # Call 5, refused 1.7 s after the last: from call 4 on the bucket refilled 1.7 r and paid 1,
    # so 1.7 r - 1 < 1 unless it filled first, r < 2 / 1.7 = 1.18 (filled before call 4's
    # successor, which is call 5 itself: r < 1 / 1 s). Over every start this is the least bound,
    # so no bucket of the proven 3.08 refuses it: strain 3.08 / 1.18 = 2.6
    assert strain_of(learner.evidence(5, 1.0, at=2.0)) == pytest.approx((4 / 1.3) / (2 / 1.7))
    assert learner.bound(5, 1.0, at=2.0) == pytest.approx(2 / 1.7)
    assert learner.evidence(5, 1.0, at=2.0) == pytest.approx((4 / 1.3, 2 / 1.7))  # the strain's two parts
    # refused 0.2 s after the last, a bucket drained by the four: r < 2 / 0.2 from call 4, 3 / 0.3
    # from call 3, ... 10 from each start. The proof explains it: strain 3.08 / 10
    assert strain_of(learner.evidence(5, 1.0, at=0.5)) == pytest.approx((4 / 1.3) / 10)
    # only calls sent before the refused one count, and one alone proves nothing
    assert strain_of(learner.evidence(2, 1.0, at=0.1)) is None and learner.bound(2, 1.0, at=0.1) is None
    assert learner.evidence(2, 1.0, at=0.1) is None


def test_the_proven_rate_keeps_the_calls_of_the_last_two_minutes():
    learner = RateLearner(burst_s=1.0, clock=lambda: 0.0)
    learner.sent(1, 0.0, 1000.0)
    learner.sent(2, 0.5, 1000.0)
    assert learner.proven_rate()[0] == pytest.approx(2000 / 1.5)
    learner.sent(3, 150.0, 10.0)  # both older calls are over two minutes old by then
    learner.sent(4, 150.5, 10.0)
    assert learner.proven_rate()[0] == pytest.approx(20 / 1.5)


@pytest.mark.parametrize("noisy", [True, False])  # tokens, requests
def test_a_learner_paces_at_the_proven_rate_from_its_second_cut(noisy):
    now = [0.0]
    learner = RateLearner(decrease=0.9, burst_s=1.0, noisy=noisy, clock=lambda: now[0])
    learner.started(0.0)
    for seq in range(1, 5):  # 4 calls of 10 units, 1 s apart: 3 -> 4 proves (10 + 10) / 2 = 10 a second
        learner.sent(seq, seq - 1.0, 10.0)
    now[0] = 3.5
    # the first cut: 0.9 x the higher of the measure (40 taken in 3.5 s + 1 s: 8.9) and the proof,
    # but no less than 0.99 x the proof, a lower bound of the limit
    assert learner.rate_limited(pause_s=1.0, admitted=40.0) and learner.pace == pytest.approx(9.9)
    for seq, at in ((5, 5.0), (6, 5.5), (7, 6.0)):  # then 20 units a second for 1 s: 5 -> 7 proves 30 / 2
        learner.sent(seq, at, 10.0)
    learner.pace = 20.0  # the slow start overshot
    now[0] = 6.2
    assert learner.rate_limited(pause_s=1.0, admitted=70.0)
    assert learner.pace == pytest.approx(0.99 * 15.0)
    # then a cubic from the pause's end (7.2): 14.85 + 0.15 x (s / 30)^3, s seconds after it.
    # 15 s on, an eighth of the way back to the proof; 30 s on, at it; 60 s on, 8 x 0.15 above 14.85
    for at, pace in ((7.2, 14.85), (22.2, 14.85 + 0.15 / 8), (37.2, 15.0), (67.2, 14.85 + 1.2)):
        now[0] = at
        learner.success()
        assert learner.pace == pytest.approx(pace)


def test_a_proven_cut_moves_with_the_servers_counts_of_the_calls_it_estimated():
    now = [0.0]
    learner = RateLearner(decrease=0.9, burst_s=1.0, noisy=True, clock=lambda: now[0])
    learner.started(0.0)
    for seq in range(1, 5):  # 4 calls estimated at 10 units, 1 s apart: 3 -> 4 proves 10 a second
        learner.sent(seq, seq - 1.0, 10.0)
    now[0] = 3.5
    assert learner.rate_limited(pause_s=1.0, admitted=40.0, seq=5) and learner.pace == pytest.approx(9.9)
    now[0] = 4.0
    # the first cut rests on a rough measure and grows until the next 429: a count moves nothing
    # (call 1 counted 12: 1 -> 2 would now prove (12 + 10) / 2 = 11)
    assert not learner.success(12.0, seq=1) and learner.pace == pytest.approx(9.9)
    for seq, at in ((5, 5.0), (6, 5.5), (7, 6.0)):  # 5 -> 7 proves (10 + 10 + 10) / (1 + 1) = 15
        learner.sent(seq, at, 10.0)
    learner.pace = 20.0  # the slow start overshot
    now[0] = 6.2
    assert learner.rate_limited(pause_s=1.0, admitted=72.0, seq=8) and learner.pace == pytest.approx(0.99 * 15)
    now[0] = 6.5
    # call 6 counted 14, not 10: 5 -> 7 proves (10 + 14 + 10) / 2 = 17, above 6 -> 7's (14 + 10) / 1.5
    # = 16 and 4 -> 7's (10 + 10 + 14 + 10) / 4 = 11: the cut is 0.99 x 17, its cubic's base with it
    assert learner.success(14.0, seq=6)
    assert learner.proven == pytest.approx(17.0) and learner.pace == pytest.approx(0.99 * 17)
    learner.sent(9, 7.2, 10.0)
    now[0] = 7.2  # the pause's end: a count of a call sent after the refused one proves nothing of the cut
    learner.success(20.0, seq=9)
    assert learner.proven == pytest.approx(17.0) and learner.pace == pytest.approx(0.99 * 17)
    now[0] = 37.2  # back at the counted proof 30 s after the pause
    learner.success()
    assert learner.pace == pytest.approx(17.0)


def test_a_cut_is_done_again_when_a_call_its_proof_counted_is_refused_behind_it():
    # Calls sent a millisecond apart reach the server in either order, and so do their 429s:
    # the cut at call 11's 429 counted call 10 as taken, and proved 5 requests a second
    # against a 4-a-second bucket (a CI run reported 299 a minute of an endpoint's 240).
    now = [0.0]
    learner = RateLearner(decrease=0.9, burst_s=1.0, clock=lambda: now[0])
    learner.started(0.0)
    for seq in range(1, 5):  # the server's full bucket: 4 requests in 3 ms
        learner.sent(seq, (seq - 1) / 1000)
    learner.sent(5, 0.010)
    learner.refused(5)
    now[0] = 0.020
    # 1 -> 4 proves (3 + 1) / (0.003 + 1) = 3.988; 4 taken over 1.02 s measures 3.92: 0.99 x the proof
    assert learner.rate_limited(pause_s=1.0, admitted=4.0, seq=5)
    assert learner.pace == pytest.approx(0.99 * 4 / 1.003)
    learner.pace = 6.0  # the slow start overshot
    for seq in range(6, 12):  # after the pause, 6 calls in 5 ms
        learner.sent(seq, 1.100 + (seq - 6) / 1000)
    now[0] = 1.106
    assert not learner.refused(11)  # no cut counted it yet
    # call 10's 429 is still on its way: 6 -> 10 proves (4 + 1) / (0.004 + 1) = 4.98
    assert learner.rate_limited(pause_s=1.0, admitted=9.0, seq=11)
    assert learner.proven == pytest.approx(5 / 1.004) and learner.pace == pytest.approx(0.99 * 5 / 1.004)
    now[0] = 1.107
    # then it comes: the cut is done again without it. 6 -> 9 proves (3 + 1) / 1.003 = 3.988
    assert learner.refused(10)
    assert learner.proven == pytest.approx(4 / 1.003) and learner.pace == pytest.approx(0.99 * 4 / 1.003)
    assert learner.cuts == 2 and not learner.pausing(2.106) and learner.pausing(2.105)  # one cut, its pause kept
    # a call sent after the refused one, or a refusal after the pause: nothing to redo
    learner.sent(12, 1.2)
    assert not learner.refused(12)
    now[0] = 2.2
    assert not learner.refused(9) and learner.pace == pytest.approx(0.99 * 4 / 1.003)


def test_proofs_refused_twice_in_a_row_are_no_longer_believed():
    now = [0.0]
    learner = RateLearner(decrease=0.9, burst_s=1.0, noisy=True, clock=lambda: now[0])
    learner.started(0.0)
    for seq in range(1, 5):
        learner.sent(seq, seq - 1.0, 10.0)  # proves 10 a second, as above
    now[0] = 3.5
    learner.rate_limited(pause_s=1.0, admitted=40.0)  # pace 9.9; the pause ends at 4.5
    now[0] = 9.0
    # refused at 9.9 a second, within the proven 10: noise, or a server bucket larger than
    # burst_s. No deeper cut than 0.99 x the proof: the pace stays at 9.9.
    assert learner.rate_limited(pause_s=1.0, admitted=40.0) and learner.pace == pytest.approx(9.9)
    now[0] = 10.5  # half a second after that pause: an echo (the server's bucket in debt), not counted
    assert learner.rate_limited(pause_s=1.0, admitted=40.0) and learner.pace == pytest.approx(9.9)
    now[0] = 16.0
    # a second one in a row: the proof is dropped and the cut is multiplicative (0.9 x 9.9). Nothing
    # was admitted since the last cut, so the noisy floor (0.9 x what it admitted) is 0.
    assert learner.rate_limited(pause_s=1.0, admitted=40.0) and learner.pace == pytest.approx(8.91)
    now[0] = 22.0
    # 60 units taken in the 6 s since: the noisy floor, 0.9 x 10 = 9, is above the pace, which
    # a 429 does not raise: it stays at 8.91
    assert learner.rate_limited(pause_s=1.0, admitted=100.0) and learner.pace == pytest.approx(8.91)


def test_a_429_is_an_echo_within_the_window_after_a_proven_cuts_pause():
    now = [0.0]
    learner = RateLearner(decrease=0.9, burst_s=1.0, window_s=4.0, clock=lambda: now[0])
    learner.started(0.0)
    for seq in range(1, 5):
        learner.sent(seq, seq - 1.0)  # 1 a second: 3 -> 4 proves (1 + 1) / (1 + 1) = 1
    now[0] = 3.5
    learner.rate_limited(pause_s=1.0, admitted=4.0)  # the first cut: a rough measure, never an echo after it
    assert not learner.echoes(5.0)
    now[0] = 9.0
    learner.rate_limited(pause_s=2.0, admitted=4.0)  # the second, proven: its pause ends at 11
    # within the pause the 429s belong to its episode; from its end for window_s (4 s), echoes
    assert learner.echoes(10.0) and learner.echoes(14.9) and not learner.echoes(15.0)
    learner.reopen(16.0)  # a probe's pace rests on no proof: its 429s are no echoes of one
    assert not learner.echoes(16.5)


def test_a_reopened_learner_grows_as_after_its_first_cut_and_is_cut_to_its_proof_at_the_next_429():
    now = [10.0]
    learner = RateLearner(first_increase_per_s=0.15, clock=lambda: now[0])
    learner.resume(2.0 / 0.99, now=0.0)  # a proven pace of 2 a second, cuts 2: growing along the cubic
    learner.reopen(now[0])
    assert learner.cuts == 1 and learner.pace == pytest.approx(2.0)
    now[0] = 12.0
    learner.success()
    assert learner.pace == pytest.approx(2.0 * 1.15 ** 2)  # 15% a second, compounded
    now[0] = 20.0
    learner.success()
    assert learner.pace == pytest.approx(2.0 * 1.15 ** 10)  # 8.09 a second, past what the calls prove:
    # ten requests 0.1 s apart got in, (9 + 1) / (0.9 + 1) = 5.26 a second proven; the 429 after
    # them cuts to 0.99 of that, as a second cut does
    for seq in range(1, 11):
        learner.sent(seq, 19.0 + 0.1 * seq)
    assert learner.rate_limited(pause_s=1.0, seq=11)
    assert learner.cuts == 2 and learner.pace == pytest.approx(0.99 * 10 / 1.9)
