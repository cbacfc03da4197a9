"""The ETA arithmetic (engine.runtime.eta), with numbers worked out by hand, and the
tracker that never lets it count up without a named cause."""
from __future__ import annotations

import pytest

from drscore.engine.runtime.eta import EtaTracker, Estimate, estimate, method_left


def work(**kw):
    base = {"started": 0, "done": 0, "asks": 0, "calls": 0, "tokens": 0, "finished_asks": 0, "announced": 0,
            "announced_asks": 0, "announced_left": 0, "unannounced_asks": 0}
    base.update(kw)
    return base


# quality: 10 items, 4 done (4 asks, 1,000 tokens each), the other 6 running and each
# said it makes 1 ask -> 6 asks left, all to the network.
QUALITY = work(started=10, done=4, asks=4, calls=4, tokens=4000, finished_asks=4, announced=6, announced_left=6)
# redundancy: 10 items running, each said 30 pairs and asked 10 of them -> 200 left; 80 of
# its 100 asks went to the network (20 were shared or cached), 500 tokens each -> 160 calls left.
REDUNDANCY = work(started=10, asks=100, calls=80, tokens=40_000, announced=10, announced_asks=100,
                  announced_left=200)
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


def test_calls_in_flight_times_latency_bind_without_a_quota():
    # 166 calls x 2 s at the judge / 4 in flight = 83 s
    est = estimate(snap(rpm=0, call_latency_s=2.0, concurrency_limit=4), PER_METHOD, elapsed_s=30.0)
    assert (est.basis, est.seconds) == ("latency", pytest.approx(83.0))


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


def test_under_a_binding_token_quota_the_pace_is_in_tokens():
    # 86,000 tokens left at 12,000 tokens/min lately: 430 s (the quota says 258 s)
    est = estimate(snap(tpm=20_000, usage_rate=(20.0, 12_000.0), usage_span_s=30.0), PER_METHOD, elapsed_s=30.0)
    assert (est.basis, est.seconds) == ("pace", pytest.approx(430.0))


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
    m = work(started=4, done=2, finished_asks=10, asks=13, calls=13, unannounced_asks=3)
    assert method_left(m, items=6, items_done=2).asks_left == pytest.approx(17.0)
    # exactly what the running items said when none is left to start
    assert not method_left(REDUNDANCY, items=10, items_done=0).estimated


def test_a_method_with_no_sized_item_makes_the_eta_a_lower_bound():
    s = snap(work={"quality": QUALITY, "redundancy": work(started=3)})
    est = estimate(s, PER_METHOD, elapsed_s=30.0)
    assert est.lower_bound and est.seconds == pytest.approx(6.0)  # quality's 6 calls at 60/min, at least
    assert method_left(work(started=3), items=10, items_done=0).asks_left is None


def test_done_and_starting():
    assert estimate(snap(items_done=20), PER_METHOD, 30.0).basis == "done"
    assert estimate(snap(work={}), PER_METHOD, 30.0).seconds is None
    # everything left comes from the cache: the items' own pace (30 s for 4 items -> 16 left: 120 s)
    cached = work(started=10, done=4, asks=10, calls=0, finished_asks=4, announced=6, announced_asks=6)
    est = estimate(snap(rpm=0, work={"quality": cached, "redundancy": work(started=10, done=10, finished_asks=3)},
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
