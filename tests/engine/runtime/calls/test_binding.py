"""Which quota binds: the 429s' votes, the same read in hindsight, and the limiter's probe of
a request pace that leaves the token quota idle; hand-made states, expected figures worked out
in the comments."""
from __future__ import annotations

import time

import pytest

from drscore.engine.runtime.calls.binding import PROBES, BindingGuess, GuessVote
from drscore.engine.runtime.calls.judging import RateLimitInfo
from drscore.engine.runtime.calls.limits import RateLimiter


# the sizes most votes here are ranked among (a refused 3000 ranks 0.75, a 500 0.0625)
SIZES = (1000, 1000, 1000, 1000, 500, 4000, 800, 9000)


def _send_sizes(guess: BindingGuess) -> None:
    """Tell ``guess`` the calls of ``SIZES`` were sent."""
    for x in SIZES:
        guess.sent(x)


def test_binding_guess_by_hand():
    alike = BindingGuess(sizes=8)
    for x in (1000, 1000, 1000, 1050):
        alike.sent(x)
    # requests of about one size: pacing either is the same, so requests, and the vote says why
    # (1050 is above 3 of 4 and level with 1: 3.5 / 4)
    assert alike.refused(1050, strain=(0.9, 1.2)) == "requests"
    assert alike.votes == [GuessVote(rank=0.875, paced="none", strain=(0.9, 1.2), by="alike", guess="requests")]
    # a strain does not move it: sizes alike, the two dimensions are one
    assert alike.refused(1000, strain=(1.2, 0.9)) == "requests" and alike.votes[-1].by == "alike"
    g = BindingGuess(sizes=8)
    _send_sizes(g)
    # among 1000 x4, 500, 4000, 800, 9000 a refused 3000 ranks above 6 of 8 (0.75); nothing was
    # paced before this first vote of the run, and 0.75 > 0.7: tokens
    assert g.refused(3000) == "tokens"
    # paced by tokens, a refused 900 ranks 2/8 = 0.25, at most SMALL_RANK: requests
    assert g.refused(900) == "requests"
    # paced by requests, a refused 8000 (7/8) at a request rate well above any proven (strain
    # 0.9): a request quota refuses any call, so it stays
    assert g.refused(8000, strain=(0.9, 0.8)) == "requests"
    # the same call refused at a request rate the endpoint had accepted (strain 0.97): tokens
    assert g.refused(8000, strain=(0.97, 0.8)) == "tokens"
    # paced by tokens, a mid-sized refusal (1000: 2 below, 4 level, 4 / 8) says nothing: it stays
    assert g.refused(1000, strain=(0.9, 0.99)) == "tokens"
    # each vote kept for the summary, with the dimension paced when it came (before the first
    # 429 nothing was paced)
    assert [(v.rank, v.paced, v.guess, v.by) for v in g.votes] == [
        (0.75, "none", "tokens", "ranks"), (0.25, "tokens", "requests", "ranks"),
        (0.875, "requests", "requests", "ranks"), (0.875, "requests", "tokens", "ranks"),
        (0.5, "tokens", "tokens", "ranks")]
    assert g.votes[3] == GuessVote(rank=0.875, paced="requests", strain=(0.97, 0.8), by="ranks", guess="tokens")


def test_the_start_up_429_says_tokens_only_for_a_call_larger_than_chance_would_refuse():
    def start_up(*sizes: float) -> BindingGuess:
        g = BindingGuess(sizes=8)
        for x in sizes:  # the refused call, the last, was sent too
            g.sent(x)
        g.refused(sizes[-1])
        return g

    # the 4th call refused, the second largest of four: 2 below, itself level (2.5 / 4 = 0.625).
    # A request quota refuses the 4th call whatever its size, so one time in two a call ranks
    # this high: not over 0.7, requests
    second = start_up(1000, 4000, 2000, 3000)
    assert second.dimension == "requests" and second.votes[0].rank == 0.625 and second.guessed
    # the largest of four (3.5 / 4 = 0.875), a chance of one in four: tokens
    largest = start_up(1000, 4000, 2000, 5000)
    assert largest.dimension == "tokens" and largest.votes[0].rank == 0.875
    # after eight calls, one of the two largest (6.5 / 8 = 0.8125): tokens
    assert start_up(1000, 4000, 2000, 3000, 500, 800, 1500, 3500).dimension == "tokens"


def test_a_binding_only_the_sizes_chose_is_a_guess_and_one_a_refusals_evidence_chose_is_not():
    def guess(*strains: tuple[float, float]) -> BindingGuess:
        g = BindingGuess(sizes=8)
        _send_sizes(g)
        for strain in strains:  # a refused 3000 ranks 0.75: tokens at the start-up, kept after
            g.refused(3000, strain=strain)
        return g
    # tokens by rank at the start-up and again at the second 429: nothing ruled requests out
    ranked = guess((0.5, 0.5), (0.97, 0.96))
    assert ranked.dimension == "tokens" and [v.by for v in ranked.votes] == ["ranks", "ranks"] and ranked.guessed
    # a request strain of 1.2 rules requests out: tokens by the proofs
    proven = guess((0.5, 0.5), (1.2, 0.96))
    assert proven.dimension == "tokens" and proven.votes[-1].by == "proofs" and not proven.guessed
    # proofs that chose requests once do not make a later choice of tokens by the sizes proven
    g = BindingGuess(sizes=8)
    _send_sizes(g)
    assert g.refused(500, strain=(0.9, 1.2)) == "requests" and not g.guessed
    assert g.refused(9500, strain=(0.97, 0.98)) == "tokens"  # rank 1.0 at a proven request rate
    assert g.votes[-1].by == "ranks" and g.guessed
    # a turn in hindsight, and a body naming the quota, are evidence too
    turned = guess((0.5, 0.5))
    turned.turn_to_tokens(1.3)
    assert not turned.guessed
    named = guess((0.5, 0.5))
    assert named.refused(3000, named="requests") == "requests" and not named.guessed


def test_a_binding_resumed_from_an_earlier_run_is_a_guess_where_that_runs_was():
    def resumed(guessed: bool) -> BindingGuess:
        g = BindingGuess(sizes=8)
        g.resume("tokens", guessed=guessed)
        _send_sizes(g)
        return g
    assert resumed(True).guessed and not resumed(False).guessed
    # this run's proofs rule requests out: tokens no longer a guess
    proven = resumed(True)
    assert proven.refused(3000, strain=(1.2, 0.96)) == "tokens" and not proven.guessed
    # a small call refused at the token pace (rank 0.06): requests by the sizes, a guess whatever
    # the earlier run had ruled
    ranked = resumed(False)
    assert ranked.refused(500, strain=(0.97, 0.98)) == "requests" and ranked.votes[-1].paced == "tokens"
    assert ranked.votes[-1].by == "ranks" and ranked.guessed


def test_where_both_dimensions_were_paced_a_token_bucket_that_held_the_call_says_tokens():
    g = BindingGuess(sizes=8)
    _send_sizes(g)
    assert g.refused(900) == "requests"  # the start-up vote: 900 ranks 2 / 8 = 0.25, under 0.7
    # tokens paced too, their bucket holding the call: 0.25 is at most SMALL_RANK, which says
    # requests where tokens alone are paced; here the strains decide, and a token bucket had the
    # more room to refuse it (0.9 of its bound proved, against 1.0 of the request bucket's)
    assert g.refused(900, strain=(1.0, 0.9), held_by="tokens") == "tokens"
    assert g.votes[-1] == GuessVote(rank=0.25, paced="tokens", strain=(1.0, 0.9), by="held", guess="tokens")
    # the request strain the lower (0.954 against 0.97: a request quota of 400 a minute,
    # bench.headerless's reports, logged): requests, whatever the rank (9,000: 7.5 / 8)
    assert g.refused(9000, strain=(0.954, 0.97), held_by="tokens") == "requests" and g.votes[-1].by == "held"
    # the proofs still rule: a token strain over 1.05 rules tokens out
    g.resume("requests")
    assert g.refused(900, strain=(0.9, 1.2), held_by="tokens") == "requests" and g.votes[-1].by == "proofs"
    # the request bucket holding: read as requests paced, where only a large call refused at a
    # proven request rate (8,000: 7 / 8, strain 0.97) says tokens, and a mid-sized one nothing
    assert g.refused(1000, strain=(0.97, 0.9), held_by="requests") == "requests"
    assert g.votes[-1].paced == "requests"
    assert g.refused(8000, strain=(0.97, 0.9), held_by="requests") == "tokens"


def test_a_429_in_the_echo_of_a_proven_cut_moves_the_guess_on_the_proofs_alone():
    g = BindingGuess(sizes=8)
    g.resume("requests")
    _send_sizes(g)
    # a large call (7 of 8) refused at a request rate already proven would say tokens, but right
    # after a proven cut's pause the drained bucket refuses any call at that rate: it stays
    assert g.refused(8000, strain=(0.99, 0.9), echo=True) == "requests" and g.votes[-1].by == "echo"
    # so does a small call while tokens are paced
    g.resume("tokens")
    assert g.refused(500, strain=(0.99, 0.9), echo=True) == "tokens"
    # the proofs still decide: no token bucket of the rate proved refused it
    assert g.refused(500, strain=(0.99, 1.2), echo=True) == "requests" and g.votes[-1].by == "proofs"
    # out of the echo, the large call at a proven request rate says tokens again
    assert g.refused(8000, strain=(0.99, 0.9)) == "tokens"


def test_a_strain_over_1_05_rules_its_dimension_out_whatever_the_rank():
    g = BindingGuess(sizes=8)
    _send_sizes(g)
    assert g.refused(400) == "requests"  # the start-up: the smallest refused, rank 0
    # paced by requests, the smallest refused again, but at a request rate 20% under one the
    # endpoint had accepted: no request bucket refuses that, so tokens bind
    assert g.refused(400, strain=(1.2, 0.9)) == "tokens"
    # paced by tokens, the smallest once more: rank 0 would say requests, but requests are
    # ruled out again, and nothing rules tokens out
    assert g.refused(400, strain=(1.1, 1.0)) == "tokens"
    # now tokens are ruled out and requests are not: requests, whatever the size
    assert g.refused(9500, strain=(0.9, 1.3)) == "requests"
    # both ruled out (a server bucket larger than assumed inflates every proof): the ranks
    # decide, and a large call at a request rate already accepted says tokens
    assert g.refused(9500, strain=(1.3, 1.3)) == "tokens"
    assert [v.by for v in g.votes] == ["ranks", "proofs", "proofs", "proofs", "ranks"]

def test_a_429_naming_its_dimension_decides_the_binding_guess_for_good():
    guess = BindingGuess()
    for x in (100, 5000, 120, 4800, 90, 5100):
        guess.sent(x)
    # the smallest call refused in the start-up burst says requests by its rank; Azure's body
    # ("exceeded token rate limit") says tokens
    assert guess.refused(90, named="tokens") == "tokens" and guess.votes[-1].by == "body"
    # a later 429 naming nothing, a small call refused while tokens are paced: still tokens
    assert guess.refused(90, strain=(0.5, 0.9)) == "tokens" and guess.votes[-1].by == "body"
    # without the body, that second vote would have turned the guess to requests
    plain = BindingGuess()
    for x in (100, 5000, 120, 4800, 90, 5100):
        plain.sent(x)
    plain.refused(5100)
    assert plain.dimension == "tokens" and plain.refused(90, strain=(0.5, 0.9)) == "requests"


def test_a_429_met_by_the_probe_of_a_request_pace_moves_the_guess_on_the_proofs_alone():
    g = BindingGuess(sizes=8)
    g.resume("requests")  # paced by requests
    _send_sizes(g)
    # the probe ran requests past what they had proved: a large call (7 of 8) refused at a request
    # rate already accepted (strain 0.97) would say tokens, but at the top of a probe says nothing
    assert g.refused(8000, strain=(0.97, 0.8), probing=True) == "requests"
    assert g.votes[-1].by == "ranks"
    # the proofs still decide: no request bucket of the rate proved refused it
    assert g.refused(8000, strain=(1.2, 0.8), probing=True) == "tokens"
    assert g.votes[-1].by == "proofs"
    # and at a probe they decide from a strain over 1.02: the requests had not passed what they
    # proved (1.03: the request strain of a token quota's refusal at a probe, logged), so no
    # request quota refused the call; a small one refused so says the same
    g.resume("requests")
    assert g.refused(500, strain=(1.03, 0.95), probing=True) == "tokens"
    assert g.votes[-1].by == "proofs"
    # out of a probe that takes over 1.05: the ranks decide (a small call, paced by requests)
    g.resume("requests")
    assert g.refused(500, strain=(1.03, 0.95)) == "requests" and g.votes[-1].by == "ranks"
    # a strain just under 1 (0.996: a request quota's, logged) keeps requests, as does a token
    # strain over 1.05
    g.resume("requests")
    assert g.refused(8000, strain=(0.996, 0.99), probing=True) == "requests"
    assert g.refused(8000, strain=(1.03, 1.2), probing=True) == "requests" and g.votes[-1].by == "proofs"


def test_a_request_proof_over_an_earlier_refusals_bound_rules_requests_out_in_hindsight():
    g = BindingGuess()
    assert g.hindsight(3.0, now=0.0) is None  # no refusal yet
    g.bounded(at=10.0, bound=2.0)
    g.bounded(at=20.0, bound=None)  # no bound (too few calls before it): nothing kept
    g.bounded(at=30.0, bound=4.0)
    # the lowest bound kept is 2 a second: a proof of 2.2 is 1.1 times it
    assert g.hindsight(2.2, now=30.0) == pytest.approx(1.1)
    assert g.hindsight(None, now=30.0) is None
    # 140 s on, the refusal at 10 s is older than the two minutes the proofs span: 4.0 is the
    # lowest, whether or not a refusal came since
    assert g.hindsight(2.2, now=140.0) == pytest.approx(2.2 / 4.0)
    g.bounded(at=140.0, bound=5.0)
    assert g.hindsight(2.2, now=140.0) == pytest.approx(2.2 / 4.0)
    # and 270 s on, none is left
    assert g.lowest_bound(now=270.0) is None and g.hindsight(2.2, now=270.0) is None
    g.turn_to_tokens(1.1)
    assert g.dimension == "tokens"
    assert (g.votes[-1].by, g.votes[-1].paced, g.votes[-1].guess, g.votes[-1].strain) == (
        "hindsight", "requests", "tokens", (1.1, 0.0))


def test_the_recent_size_is_the_mean_of_the_last_sixteen_calls():
    g = BindingGuess()
    assert g.recent_size() is None
    for x in [9000.0] * 10 + [1000.0] * 16:
        g.sent(x)
    assert g.recent_size() == pytest.approx(1000.0)
    g.sent(17000.0)  # 15 of 1,000 and one of 17,000
    assert g.recent_size() == pytest.approx(2000.0)


def _paced_by_requests(size: float) -> RateLimiter:
    """A header-less limiter two cuts in, pacing 1 request a second that the ranks chose, its
    calls having proved 10,000 tokens a second, the last 16 calls a third and five thirds of
    ``size`` tokens in turn (a mean of ``size``)."""
    lim = RateLimiter(concurrency=8)
    now = time.monotonic()
    lim.learner.resume(1.0 / 0.99, now - 10.0)  # as after a proven cut: pace 1.0, cuts 2
    lim.token_learner.resume(10_000 / 0.99, now - 10.0)
    # 10 calls of 10,000 tokens 1 s apart: i -> j proves ((j - i) x 10,000 + 10,000) / ((j - i) + 1 s)
    for seq in range(1, 11):
        lim.token_learner.sent(seq, now - 21.0 + seq, 10_000.0)
    assert lim.token_learner.proven_rate()[0] == pytest.approx(10_000.0)
    for i in range(16):
        lim.binding.sent(size * (5 / 3 if i % 2 else 1 / 3))
    lim._apply_learned()
    return lim


def test_a_request_pace_that_leaves_the_token_quota_idle_is_probed_again():
    # 1 request a second of 9,000 tokens is 9,000 tokens a second: 0.9 of the token proof, no probe
    busy = _paced_by_requests(9000.0)
    busy._probe_request_pace(time.monotonic())
    assert busy.learner.cuts == 2 and not busy._pace_probe
    # of 3,000 tokens, 3,000 a second: under 0.85 of 10,000, so the slow start opens again...
    idle = _paced_by_requests(3000.0)
    idle._probe_request_pace(time.monotonic())
    assert idle.learner.cuts == 1 and idle._pace_probe and idle._pace_probes == 1
    # ...whatever the token learner's pace: cut at 429s a request quota may have sent, it is no
    # measure of what the token quota takes
    low = _paced_by_requests(3000.0)
    low.token_learner.pace = 2_900.0
    low._probe_request_pace(time.monotonic())
    assert low._pace_probe
    # the pace grows 15% a second from 1.0 (compounded), as after a first cut
    idle.learner._grown_at -= 2.0
    idle.learner.success()
    assert idle.learner.pace == pytest.approx(1.15 ** 2, rel=1e-3)
    # without a token proof (fewer than two calls kept), nothing to measure the idle quota by
    unproved = _paced_by_requests(3000.0)
    unproved.token_learner._sent.clear()
    unproved._probe_request_pace(time.monotonic())
    assert not unproved._pace_probe
    # a 429's body that named requests: no probe
    named = _paced_by_requests(3000.0)
    named.binding.refused(3000.0, named="requests")
    named._probe_request_pace(time.monotonic())
    assert named.learner.cuts == 2 and not named._pace_probe


def test_a_proof_past_an_earlier_refusals_request_bound_turns_the_pace_to_tokens_without_a_429():
    lim = _paced_by_requests(3000.0)
    now = time.monotonic()
    lim.binding.bounded(now - 20.0, 2.0)  # an earlier refusal: a request bucket of at most 2 a second
    # 7 calls 0.25 s apart since: 6 calls over 1.5 s, the last one fitting a 1 s bucket, prove at
    # least (6 + 1) / (1.5 + 1) = 2.8 a second: 1.4 times the bound, so no request quota refused it
    for seq in range(1, 8):
        lim.learner.sent(seq, now - 2.0 + 0.25 * seq)
    assert lim.learner.proven_rate()[0] == pytest.approx(2.8)
    lim._probe_request_pace(now)
    assert lim.binding.dimension == "tokens" and lim.binding.votes[-1].by == "hindsight"
    assert lim.binding.votes[-1].strain[0] == pytest.approx(1.4)
    assert lim.requests is None and lim.tokens is not None and lim.tpm == pytest.approx(600_000)


def test_the_token_evidence_is_the_refusal_with_the_lowest_request_bound():
    g = BindingGuess()
    assert g.token_evidence(now=0.0) is None
    g.bounded(at=10.0, bound=3.0, tokens=(8_000.0, 12_500.0))
    g.bounded(at=20.0, bound=1.7, tokens=(6_000.0, 10_400.0))  # the lowest request bound: hindsight reads this one
    g.bounded(at=30.0, bound=2.5)  # no token proof before it
    assert g.token_evidence(now=30.0) == (6_000.0, 10_400.0)
    # two minutes on, the refusal at 20 s is gone with its bound: the one at 30 s is the lowest
    # left, and it has no token evidence
    assert g.token_evidence(now=145.0) is None


def test_a_turn_in_hindsight_starts_the_token_pace_from_the_refusal_it_reads():
    # Requests paced (1 a second); the token learner kept 5,900 tokens a second from cuts made while
    # requests were paced. The refusal with the lowest request bound (2 a second) had 6,000 tokens
    # a second proved before it and allowed a token bucket of at most 10,400: the limit lies
    # between, and the pace starts at 0.99 x their geometric mean, sqrt(6,000 x 10,400) = 7,899.4.
    lim = _paced_by_requests(3000.0)
    now = time.monotonic()
    lim.token_learner.resume(5_900 / 0.99, now - 10.0)
    lim.binding.bounded(now - 20.0, 2.0, (6_000.0, 10_400.0))
    for seq in range(1, 8):  # 2.8 requests a second proved, as above: 1.4 times the bound
        lim.learner.sent(seq, now - 2.0 + 0.25 * seq)
    lim._probe_request_pace(now)
    assert lim.binding.dimension == "tokens"
    middle = (6_000 * 10_400) ** 0.5
    assert lim.token_learner.pace == pytest.approx(0.99 * middle) and lim.tpm == pytest.approx(0.99 * middle * 60)
    # and it grows from there as from a proof: flat near it, back at the middle after 30 s
    assert lim.token_learner.cuts == 2 and lim.token_learner._proven_ceiling == pytest.approx(middle)
    # a token learner already above that keeps its pace (the turn lowers nothing)
    high = _paced_by_requests(3000.0)
    high.binding.bounded(now - 20.0, 2.0, (6_000.0, 10_400.0))
    for seq in range(1, 8):
        high.learner.sent(seq, now - 2.0 + 0.25 * seq)
    high._probe_request_pace(now)
    assert high.binding.dimension == "tokens" and high.token_learner.pace == pytest.approx(10_000)


@pytest.mark.parametrize("echo", [False, True])
async def test_the_limiter_reads_a_429_in_a_proven_cuts_echo_on_the_proofs_alone(echo):
    lim = _paced_by_requests(3000.0)  # the last 16 sizes 1,000 and 5,000 in turn
    lim.binding.resume("requests")  # past the start-up 429: requests paced
    now = time.monotonic()
    # 80 requests 0.5 s apart over the last 40 s prove 80 / 40.5 = 1.975 a second; a bucket that
    # refuses one more now holds at most 81 / 40 = 2.025: request strain 0.975, a proven rate
    lim.learner._sent = [(s, now - 40.0 + 0.5 * (s - 1), 1.0, False) for s in range(1, 81)]
    # two calls of 500 tokens just now prove little of tokens: their strain is far under 1.05
    lim.token_learner._sent = [(81, now - 0.6, 500.0, False), (82, now - 0.5, 500.0, False)]
    lim._sent_requests = 100
    if echo:
        lim.learner._cut_until = now - 1.0  # the proven cut's pause ended a second ago
    p = lim._grant(6000, now)  # larger than every size sent: rank 1
    await lim.rate_limited_release(p, RateLimitInfo(retry_after_s=0.01))
    vote = lim.binding.votes[-1]
    assert vote.paced == "requests" and vote.rank > 0.9 and vote.strain[0] == pytest.approx(0.975, abs=1e-3) and vote.strain[1] < 1.05
    # out of the echo, a large call refused at a proven request rate says tokens; in it, nothing moves
    assert (vote.by, lim.binding.dimension) == (("echo", "requests") if echo else ("ranks", "tokens"))


async def test_a_probe_that_meets_a_request_quota_is_not_made_again():
    lim = _paced_by_requests(3000.0)
    lim._probe_request_pace(time.monotonic())
    assert lim._pace_probe and lim.learner.cuts == 1
    now = time.monotonic()
    # What the calls proved: two requests a tenth of a second apart just now, so a request bucket
    # may refuse a third (strain 0.12); and 40,000 tokens within 0.3 s half a minute ago, at least
    # 30,769 a second, where a token bucket that refuses 1,000 tokens now is under 4,167 (7.4).
    lim.learner._sent = [(1, now - 0.2, 1.0, False), (2, now - 0.1, 1.0, False)]
    lim.token_learner._sent = [(s, now - 30.0 + 0.1 * (s - 1), 10_000.0, False) for s in range(1, 5)] + [
        (5, now - 0.2, 2000.0, False), (6, now - 0.1, 2000.0, False)]
    lim._sent_requests = 10
    p = lim._grant(1000, now)
    await lim.rate_limited_release(p, RateLimitInfo(retry_after_s=0.01))
    vote = lim.binding.votes[-1]
    assert vote.by == "proofs" and vote.strain[0] == pytest.approx(0.121, abs=1e-3)
    assert vote.strain[1] == pytest.approx(7.385, abs=1e-3) and lim.binding.dimension == "requests"
    assert not lim._pace_probe and lim._requests_held
    lim.learner._cut_until = 0.0
    lim._request_pace_checked = -1e9
    lim._probe_request_pace(time.monotonic())
    assert not lim._pace_probe and lim._pace_probes == 1 < PROBES


@pytest.mark.parametrize("probing", [True, False])
async def test_the_limiter_reads_a_429_at_its_probe_against_a_request_strain_of_1_02(probing):
    lim = _paced_by_requests(3000.0)  # the last 16 sizes 1,000 and 5,000 in turn
    lim.binding.resume("requests")
    if probing:
        lim._probe_request_pace(time.monotonic())
        assert lim._pace_probe
    now = time.monotonic()
    # an earlier refusal allowed a request bucket of at most 1.9 a second; 80 requests 0.5 s apart
    # over the last 40 s prove 80 / 40.5 = 1.975 a second: strain 1.975 / 1.9 = 1.039, under the
    # 1.05 that rules requests out anywhere (so no turn in hindsight), over the probe's 1.02
    lim.binding.bounded(now - 20.0, 1.9)
    lim.learner._sent = [(s, now - 40.0 + 0.5 * (s - 1), 1.0, False) for s in range(1, 81)]
    lim.token_learner._sent = [(81, now - 0.6, 500.0, False), (82, now - 0.5, 500.0, False)]
    lim._sent_requests = 100
    p = lim._grant(1000, now)  # a small call: its rank moves nothing while requests are paced
    await lim.rate_limited_release(p, RateLimitInfo(retry_after_s=0.01))
    vote = lim.binding.votes[-1]
    assert vote.strain[0] == pytest.approx(80 / 40.5 / 1.9, abs=1e-3) and vote.strain[1] < 1.05
    if probing:
        # the requests had not passed what they proved: a token quota refused the call
        assert (vote.by, lim.binding.dimension, lim._requests_held) == ("proofs", "tokens", False)
    else:
        assert (vote.by, lim.binding.dimension) == ("ranks", "requests")
