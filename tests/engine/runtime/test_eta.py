"""The ETA arithmetic (engine.runtime.eta), with numbers worked out by hand, and the
tracker that never lets it count up without a named cause."""
from __future__ import annotations

import pytest

from drscore.engine.runtime.eta import EtaTracker, Estimate, estimate, method_left, quota_time, quota_tokens
from support.fakes import template_work as tw


def work(templates, **kw):
    return {"started": 0, "done": 0, "announced": 0, "templates": templates, **kw}


# quality: 10 items, 4 done (4 asks, 1,000 tokens each), the other 6 running and each
# said it makes 1 ask -> 6 asks left, all to the network.
QUALITY = work({"quality": tw(asks=4, calls=4, tokens=4000, finished_asks=4, announced_left=6)},
               started=10, done=4, announced=6)
# redundancy: 10 items running, each said 30 pairs and asked 10 of them -> 200 left; 80 of
# its 100 asks went to the network (20 were shared or cached), 500 tokens each -> 160 calls left.
REDUNDANCY = work({"pair": tw(asks=100, calls=80, tokens=40_000, announced_asks=100, announced_left=200)},
                  started=10, announced=10)
PER_METHOD = {"quality": 10, "redundancy": 10}


def snap(**kw):
    base = {"items_done": 4, "done_by_method": {"quality": 4, "redundancy": 0},
            "work": {"quality": QUALITY, "redundancy": REDUNDANCY},
            "calls": 84, "input_tokens": 34_000, "output_tokens": 10_000, "rpm": 60, "tpm": 0, "rate_limited": 0}
    base.update(kw)
    return base


def test_the_request_quota_binds():
    # 6 + 160 = 166 calls left at 60 requests/min: 166 s
    est = estimate(snap(), PER_METHOD, elapsed_s=30.0)
    assert (est.basis, est.seconds, est.lower_bound) == ("quota", pytest.approx(166.0), False)
    assert est.calls_left == pytest.approx(166.0)
    assert est.asks_total == pytest.approx(4 + 6 + 100 + 200)


def test_the_token_quota_binds_with_each_methods_tokens_per_call():
    # tokens left: 6 quality calls x 1,000 + 160 redundancy calls x 500 = 86,000;
    # at 20,000 tokens/min that is 258 s (the request quota allows 166 s)
    est = estimate(snap(tpm=20_000), PER_METHOD, elapsed_s=30.0)
    assert (est.basis, est.seconds) == ("token quota", pytest.approx(258.0))


def test_a_quota_of_input_tokens_is_spent_by_the_prompts_alone():
    # the runner says what the token quota was spent on; an older snapshot counts both
    assert quota_tokens(snap()) == 44_000
    assert quota_tokens(snap(quota_tokens=34_000)) == 34_000
    # a template with neither answers nor a said size takes the run's tokens per call:
    # 34,000 over 84 calls, not 44,000 over 84
    unsized = work({"t": tw(announced_left=84)}, started=1, announced=1)
    both, inputs = (estimate(snap(tpm=60_000, rpm=0, items_done=0, work={"m": unsized}, done_by_method={"m": 0}, **kw),
                             {"m": 1}, 30.0) for kw in ({}, {"quota_tokens": 34_000}))
    assert (both.seconds, inputs.seconds) == (pytest.approx(44.0), pytest.approx(34.0))


def test_calls_in_flight_times_latency_bind_without_a_quota():
    # 166 calls x 2 s at the judge / 4 in flight = 83 s, and the last one's 2 s
    est = estimate(snap(rpm=0, call_latency_s=2.0, concurrency_limit=4), PER_METHOD, elapsed_s=30.0)
    assert (est.basis, est.seconds) == ("latency", pytest.approx(85.0))


def test_a_slower_pace_than_the_limits_binds():
    # 50 calls/min over the last 30 s: 166 / 50 min = 199.2 s, slower than the quota's 166 s
    est = estimate(snap(usage_rate=(50.0, 30_000.0), usage_span_s=30.0), PER_METHOD, elapsed_s=30.0)
    assert (est.basis, est.seconds) == ("pace", pytest.approx(199.2))
    # at 59/min the pace is the quota's own (within 10%): 166 / 59 min = 168.8 s, named quota
    est = estimate(snap(usage_rate=(59.0, 30_000.0), usage_span_s=30.0), PER_METHOD, elapsed_s=30.0)
    assert (est.basis, est.seconds) == ("quota", pytest.approx(166 / 59 * 60))
    # a pace over the first 5 s (the bucket's burst) is not used
    est = estimate(snap(usage_rate=(10.0, 0.0), usage_span_s=5.0), PER_METHOD, elapsed_s=5.0)
    assert est.basis == "quota"


def test_the_pace_reads_both_shares_of_the_quota():
    # the quota says 258 s (tokens bind). The last minute used 20 of 60 requests (1/3) and
    # 12,000 of 20,000 tokens (0.6) a minute: mixed, 0.6 of the quota was used; in turn,
    # 0.933; the middle, 0.7667 -> 258 / 0.7667 = 336.5 s
    est = estimate(snap(tpm=20_000, usage_rate=(20.0, 12_000.0), usage_span_s=30.0), PER_METHOD, elapsed_s=30.0)
    assert (est.basis, est.seconds) == ("pace", pytest.approx(258 / ((0.6 + 14 / 15) / 2)))
    # a minute of small calls at the request quota, then large ones at the token quota,
    # reads as 0.8 and 0.7: the quota used in turn (0.9 in the middle), not a slow run
    est = estimate(snap(tpm=20_000, usage_rate=(48.0, 14_000.0), usage_span_s=60.0), PER_METHOD, elapsed_s=60.0)
    assert est.basis == "token quota" and est.seconds == pytest.approx(258.0 / 0.9)


def test_tokens_are_counted_per_template_and_from_the_size_said_before_any_answer():
    # ACE: 10 checklists answered (100 tokens each); each of the 10 items said 4 calls with
    # the report (2,000 ASCII estimate units each), none answered yet. The server counts
    # 0.5 token per unit (learned): 40 x 1,000 = 40,000 tokens left, at 20,000/min 120 s.
    # (The method's mean so far, 100 a call, would say 12 s.)
    ace = work({"ace_checklist": tw(asks=10, calls=10, tokens=1000, announced_asks=10),
                "ace_item": tw(announced_left=40, hinted=40, hinted_ascii=80_000.0, left_sized=40,
                               left_ascii=80_000.0)}, started=10, announced=10)
    left = method_left(ace, items=10, items_done=0, weights=(0.5, 1.0))
    assert (left.asks_left, left.calls_left, left.tokens_left) == (40.0, 40.0, 40_000.0)
    est = estimate(snap(work={"ace": ace}, done_by_method={}, items_done=0, rpm=0, tpm=20_000,
                        token_weights=(0.5, 1.0)), {"ace": 10}, elapsed_s=30.0)
    assert (est.basis, est.seconds) == ("token quota", pytest.approx(120.0))
    # once item calls are answered, how their size turned out scales the rest: 2 calls of
    # 2,000 units took 3,000 tokens each (x1.5), so the 38 left of 2,000 units take 38 x 3,000
    answered = work({"ace_item": tw(asks=2, calls=2, tokens=6000, announced_asks=2, announced_left=38, hinted=40,
                                    hinted_ascii=80_000.0, left_sized=38, left_ascii=76_000.0, answered_sized=2,
                                    answered_ascii=4000.0, answered_tokens=6000)}, started=10, announced=10)
    assert method_left(answered, items=10, items_done=0).tokens_left == pytest.approx(38 * 3000)


def test_the_calls_left_count_the_size_of_their_own_items_text():
    # A short report's 4 calls were answered (1,000 units -> 1,500 tokens each); a long
    # report's 4 calls (4,000 units each) are left: 4 x 4,000 x 1.5 = 24,000 tokens, not
    # the 6,000 the answered calls' mean would say. An item not started counts the mean
    # size said (2,500 units x 1.5 = 3,750 tokens) per call: 4 x 3,750 more.
    t = tw(asks=4, calls=4, tokens=6000, finished_asks=4, announced_left=4, hinted=8, hinted_ascii=20_000.0,
           left_sized=4, left_ascii=16_000.0, answered_sized=4, answered_ascii=4000.0, answered_tokens=6000)
    m = work({"item": t}, started=2, done=1, announced=1)
    assert method_left(m, items=2, items_done=1).tokens_left == pytest.approx(24_000.0)
    assert method_left(m, items=3, items_done=1).tokens_left == pytest.approx(24_000.0 + 4 * 3750.0)


def test_small_and_large_calls_under_both_quotas_take_the_middle_of_mixed_and_in_turn():
    # 100 small calls (10,000 tokens) and 10 large ones (100,000 tokens) at 60 requests and
    # 60,000 tokens a minute. Mixed, both quotas are spent at once: max(110 s, 110 s) = 110 s.
    # In turn: max(100 s, 10 s) + max(10 s, 100 s) = 200 s. The estimate: 155 s.
    seconds, basis = quota_time([(100.0, 10_000.0), (10.0, 100_000.0)], rpm=60, tpm=60_000)
    assert seconds == pytest.approx(155.0) and basis == "quota"
    assert quota_time([(100.0, 10_000.0)], rpm=0, tpm=0) is None
    assert quota_time([(100.0, 10_000.0), (10.0, 100_000.0)], rpm=60, tpm=0) == (pytest.approx(110.0), "quota")


def test_a_429_pause_still_to_run_is_added():
    est = estimate(snap(paused_s=20.0), PER_METHOD, elapsed_s=30.0)
    assert est.seconds == pytest.approx(186.0)


def test_items_not_started_and_items_that_said_nothing_take_the_methods_mean():
    # 20 items, 10 running (each said 30: 100 asked + 200 left) -> 30 per item; 10 not started: 300 more
    left = method_left(REDUNDANCY, items=20, items_done=0)
    assert left.asks_left == pytest.approx(500.0) and left.estimated
    assert left.calls_left == pytest.approx(400.0)  # 80% of asks go to the network
    # 6 items: 2 finished with 10 asks (5 each); 2 running said nothing and asked 3 between
    # them -> 2 x 5 - 3 = 7 more; 2 not started -> 10 more
    m = work({"t": tw(finished_asks=10, asks=13, calls=13, unannounced_asks=3)}, started=4, done=2)
    assert method_left(m, items=6, items_done=2).asks_left == pytest.approx(17.0)
    # exactly what the running items said when none is left to start
    assert not method_left(REDUNDANCY, items=10, items_done=0).estimated


def test_a_method_with_no_sized_item_makes_the_eta_a_lower_bound():
    s = snap(work={"quality": QUALITY, "redundancy": work({}, started=3)})
    est = estimate(s, PER_METHOD, elapsed_s=30.0)
    assert est.lower_bound and est.seconds == pytest.approx(6.0)  # quality's 6 calls at 60/min, at least
    assert method_left(work({}, started=3), items=10, items_done=0).asks_left is None


def test_done_and_starting():
    assert estimate(snap(items_done=20), PER_METHOD, 30.0).basis == "done"
    assert estimate(snap(work={}), PER_METHOD, 30.0).seconds is None
    # everything left comes from the cache: the items' own pace (30 s for 4 items -> 16 left: 120 s)
    cached = work({"quality": tw(asks=10, finished_asks=4, announced_asks=6)}, started=10, done=4, announced=6)
    finished = work({"pair": tw(asks=3, finished_asks=3)}, started=10, done=10)
    est = estimate(snap(rpm=0, work={"quality": cached, "redundancy": finished},
                        done_by_method={"quality": 4, "redundancy": 10}, items_done=14), PER_METHOD, 30.0)
    assert (est.basis, est.seconds) == ("items", pytest.approx(30.0 / 14 * 6))


def e(seconds, **kw):
    return Estimate(seconds, kw.pop("basis", "quota"), **kw)


def test_the_eta_goes_down_or_up_with_a_named_cause():
    t = EtaTracker(tolerance=0.05, cause_s=15.0)
    assert t.show(0.0, e(100.0, asks_total=300)).seconds == 100.0
    assert t.show(5.0, e(95.0, asks_total=300)).seconds == 95.0
    # up with nothing to show for it (the inputs did not move): the last figure holds
    held = t.show(10.0, e(120.0, asks_total=300))
    assert (held.seconds, held.cause) == (95.0, None)
    # up because items said they make more calls than estimated
    up = t.show(15.0, e(130.0, asks_total=340))
    assert (up.seconds, up.cause) == (130.0, "new calls discovered")
    # the cause stays on the line a while, then goes
    assert t.show(20.0, e(125.0, asks_total=340)).cause == "new calls discovered"
    assert t.show(31.0, e(110.0, asks_total=340)).cause is None
    # up because the server answered 429
    up = t.show(35.0, e(160.0, asks_total=340, rate_limited=1))
    assert (up.seconds, up.cause) == (160.0, "429 pause")
    # up by less than the tolerance: held even with a cause
    assert t.show(40.0, e(162.0, asks_total=350)).seconds == 160.0


def test_each_input_of_the_estimate_names_its_own_cause():
    t0 = EtaTracker()
    cases = [
        (e(100.0, network_share=0.5), e(150.0, network_share=0.9), "fewer answers from the cache"),
        (e(100.0, rpm=60), e(150.0, rpm=30), "quota lowered"),
        (e(100.0, basis="token quota", tokens_per_call=500), e(150.0, basis="token quota", tokens_per_call=800),
         "larger calls"),
        (e(100.0, basis="latency", latency_s=1.0), e(150.0, basis="latency", latency_s=1.6), "slower answers"),
        (e(100.0, basis="pace", pace=60), e(150.0, basis="pace", pace=40), "slower pace"),
        (e(100.0), e(150.0, paused_s=30.0), "429 pause"),
    ]
    for before, after, cause in cases:
        t0 = EtaTracker()
        t0.show(0.0, before)
        assert t0.show(1.0, after).cause == cause
