"""Fail fast: the first call is a preflight that stops the run on an endpoint fault;
the circuit breaker stops it on a run of identical failures; a long 429 stops it with
reason rate_limit; every stop fails later calls at once."""
from __future__ import annotations

import asyncio

import pytest

from drscore.engine.runtime.calls import health
from drscore.engine.runtime.calls.health import (
    PREFLIGHT_FLOOR_S, PREFLIGHT_OVERLAP_S, CircuitBreaker, EndpointGate, SystematicFaults,
)
from drscore.engine.runtime.calls.judging import (
    ChatResponse, FatalError, JudgeFailed, RateLimited, RateLimitInfo, TransientError,
)
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from support.fakes import Verdict, one_line_templates
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.engine.runtime.calls.slots import ServerFacts


@pytest.fixture(autouse=True)
def template(monkeypatch):
    one_line_templates(monkeypatch)


class Scripted:
    """A backend answering from ``script(n)`` (n = attempt number, from 1)."""

    name, model, cacheable = "http", "m", True

    def __init__(self, script, delay=0.0):
        self.script, self.delay, self.sent = script, delay, 0

    def identity(self):
        return {"base_url": "http://judge.test/v1", "model": "m"}

    async def complete(self, request):
        self.sent += 1
        n = self.sent
        await asyncio.sleep(self.delay)
        out = self.script(n)
        if isinstance(out, Exception):
            raise out
        return ChatResponse(text='{"score": 1}', input_tokens=10, output_tokens=3), None

    async def close(self):
        pass


def _pool(backend, **kw):
    return JudgePool(backend, cache=None, limiter=RateLimiter(concurrency=8), prices=PriceTable(),
                     backoff_base_s=0.001, **kw)


async def _ask_many(pool, n):
    async def one(i):
        try:
            await pool.ask("t", Verdict, {"i": i})
            return "ok"
        except JudgeFailed as e:
            return e.reason
    return await asyncio.gather(*(one(i) for i in range(n)))


@pytest.mark.parametrize("error, kind", [
    (FatalError("HTTP 401", kind="auth"), "auth"),
    (FatalError("HTTP 404", kind="model_not_found"), "model_not_found"),
    (TransientError("refused", kind="connection_refused"), "connection_refused"),
])
async def test_an_endpoint_fault_at_the_first_call_stops_everything_after_one_request(error, kind):
    backend = Scripted(lambda n: error)
    pool = _pool(backend, max_retries=5)
    outcomes = await _ask_many(pool, 20)
    assert backend.sent == 1  # the other 19 waited at the gate and were never sent
    assert outcomes == [kind] * 20
    assert pool.stopped.fatal and pool.stopped.reason == kind and "http://judge.test/v1" in pool.stopped.message


async def test_a_transient_first_failure_opens_the_gate_and_is_retried():
    backend = Scripted(lambda n: TransientError("HTTP 503", kind="server_error") if n == 1 else None)
    pool = _pool(backend)
    assert await _ask_many(pool, 5) == ["ok"] * 5
    assert pool.stopped is None and pool.stats.retries == 1


async def test_the_breaker_trips_on_ten_identical_failures_in_a_row():
    # the first call succeeds (the endpoint is fine), then everything fails with a 401
    backend = Scripted(lambda n: None if n == 1 else FatalError("HTTP 401", kind="auth"))
    pool = _pool(backend)
    first = await _ask_many(pool, 1)
    outcomes = await _ask_many(pool, 30)
    # 10 failures trip it; only calls already in flight (at most 7 more at concurrency 8) follow
    assert first == ["ok"] and 1 + 10 <= backend.sent <= 1 + 10 + 7
    assert outcomes == ["auth"] * 30 and "10 consecutive calls" in pool.stopped.message


def test_breaker_counts_only_a_run_of_one_kind():
    b = CircuitBreaker(3)
    assert not b.failure("timeout", "t") and not b.failure("timeout", "t")
    assert not b.failure("server_error", "s")  # a different kind restarts the run
    b.success()
    assert not b.failure("rate_limit", "r") and b.count == 0  # 429s belong to the limiter
    assert [b.failure("timeout", "t") for _ in range(3)] == [False, False, True]


async def test_gate_lets_one_probe_through_and_holds_the_rest_until_open():
    gate = EndpointGate()
    assert await gate.enter() is True
    waiter = asyncio.ensure_future(gate.enter())
    await asyncio.sleep(0)
    assert not waiter.done()
    gate.open()
    assert await waiter is False and await gate.enter() is False


async def test_with_an_overlap_the_others_go_that_long_after_the_probe_left():
    gate = EndpointGate(overlap_s=0.05)
    assert await gate.enter() is True
    loop = asyncio.get_running_loop()
    waiting = asyncio.ensure_future(gate.enter())
    # The probe entered but has not left (it may still be asking the server about itself or
    # waiting for quota): no overlap runs yet, however long that takes
    await asyncio.sleep(0.2)
    assert not waiting.done()
    t0 = loop.time()
    gate.sent()
    assert await asyncio.wait_for(waiting, 2.0) is False  # the probe has not answered, but the overlap has passed
    assert 0.04 <= loop.time() - t0 < 0.5 and not gate.is_open


async def test_a_shortened_overlap_lets_the_waiting_ones_go_sooner_but_never_before_the_floor():
    gate = EndpointGate(overlap_s=5.0)
    assert await gate.enter() is True
    loop = asyncio.get_running_loop()
    gate.shorten(0.0)  # not sent yet: nothing to shorten from
    assert gate.overlap_s == 5.0
    t0 = loop.time()
    gate.sent()
    waiting = asyncio.ensure_future(gate.enter())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    gate.shorten(0.0)  # the buckets are full again already: only the floor is left
    assert gate.overlap_s == PREFLIGHT_FLOOR_S
    assert await asyncio.wait_for(waiting, 2.0) is False and not gate.is_open
    assert loop.time() - t0 >= PREFLIGHT_FLOOR_S - 0.01
    gate.shorten(10.0)  # never lengthened
    assert gate.overlap_s == PREFLIGHT_FLOOR_S
    unknown = EndpointGate()  # no overlap (the quota unknown): nothing to shorten
    assert await unknown.enter() is True
    unknown.shorten(0.0)
    assert unknown.overlap_s is None


class Timed(Scripted):
    """Scripted, recording when each call reached it (loop time)."""

    def __init__(self, script, delay=0.0):
        super().__init__(script, delay)
        self.at: list[float] = []

    async def complete(self, request):
        self.at.append(asyncio.get_running_loop().time())
        return await super().complete(request)


class Recording(RateLimiter):
    """A limiter recording the estimate of every call it grants."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.granted: list[int] = []

    def _grant(self, tokens, now, **kw):
        self.granted.append(tokens)
        return super()._grant(tokens, now, **kw)


async def _estimate_of_a_call() -> int:
    limiter = Recording(tpm=6_000_000, concurrency=1)
    await _ask_many(JudgePool(Scripted(lambda n: None), cache=None, limiter=limiter, prices=PriceTable()), 1)
    return limiter.granted[0]


@pytest.mark.parametrize("bound", ["requests", "tokens"])
async def test_the_others_go_once_the_bucket_has_refilled_the_preflight_or_the_overlap_has_passed(bound):
    # The preflight answers in 1 s. Waiting the whole overlap with a full bucket would leave
    # the quota idle. Requests: the preflight is one of a bucket of ten at 600/min, back in
    # 0.1 s. Tokens: a bucket of 1.9 calls' estimates, so the preflight's takes 0.53 s to come
    # back: the overlap stays.
    if bound == "requests":
        limiter = RateLimiter(rpm=600, concurrency=8)
    else:
        limiter = RateLimiter(tpm=await _estimate_of_a_call() * 1.9 * 60, concurrency=8)
    backend = Timed(lambda n: None, delay=1.0)
    pool = JudgePool(backend, cache=None, limiter=limiter, prices=PriceTable())
    assert await _ask_many(pool, 3) == ["ok"] * 3
    first_other = min(backend.at[1:]) - backend.at[0]
    if bound == "requests":
        assert PREFLIGHT_FLOOR_S - 0.02 <= first_other < PREFLIGHT_OVERLAP_S - 0.2
    else:
        assert PREFLIGHT_OVERLAP_S - 0.02 <= first_other < 1.0  # before the preflight's answer


async def test_an_overlap_granted_while_the_probe_is_out_wakes_the_ones_already_waiting():
    gate = EndpointGate()  # quota unknown: the others wait for the probe's outcome
    assert await gate.enter() is True
    gate.sent()
    waiting = asyncio.ensure_future(gate.enter())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    gate.overlap(0.0)  # the probe's headers announced the quota: its overlap has already passed
    assert await asyncio.wait_for(waiting, 1.0) is False and not gate.is_open
    gate.overlap(5.0)  # a second announcement changes nothing
    assert gate.overlap_s == 0.0


@pytest.mark.parametrize("error, kind", [
    (FatalError("HTTP 401", kind="auth"), "auth"),
    (TransientError("refused", kind="connection_refused"), "connection_refused"),
])
async def test_a_told_quota_overlaps_the_preflight_yet_a_fast_fault_still_sends_one_request(error, kind,
                                                                                         monkeypatch):
    # --rpm told: the others would go PREFLIGHT_OVERLAP_S after the probe left, but a fault
    # that comes back within a round trip stops the run before any of them is sent. The
    # floor that holds them that long is 0.1 s; a loaded CI machine once stalled the loop
    # past its 90 ms of slack beside a 10 ms fault (8 sent), so the floor here is 0.4 s (still
    # under the overlap, which the refilled bucket shortens to it).
    monkeypatch.setattr(health, "PREFLIGHT_FLOOR_S", 0.4)
    backend = Scripted(lambda n: error, delay=0.01)
    pool = JudgePool(backend, cache=None, limiter=RateLimiter(rpm=6000, concurrency=8), prices=PriceTable(),
                     backoff_base_s=0.001)
    assert pool.gate is not None and pool.gate.overlap_s == PREFLIGHT_OVERLAP_S
    assert await _ask_many(pool, 20) == [kind] * 20
    assert backend.sent == 1 and pool.stopped.reason == kind


class SlowToDescribe(Scripted):
    """A backend whose endpoint takes ``facts_s`` to describe itself (GET /models, /props),
    which the preflight asks before it is sent."""

    def __init__(self, script, delay, facts_s):
        super().__init__(script, delay)
        self.facts_s = facts_s

    async def server_facts(self):
        await asyncio.sleep(self.facts_s)
        return None


async def test_the_overlap_runs_from_the_preflights_send_not_from_its_turn_at_the_gate():
    # Told quota: the others may go PREFLIGHT_OVERLAP_S after the preflight left. Here the
    # preflight spends 0.7 s asking the server about itself first; had the overlap run from
    # its turn at the gate, six others would be sent before its 401 (20 ms) came back.
    backend = SlowToDescribe(lambda n: FatalError("HTTP 401", kind="auth"), delay=0.02, facts_s=0.7)
    pool = JudgePool(backend, cache=None, limiter=RateLimiter(rpm=6000, concurrency=8), prices=PriceTable(),
                     backoff_base_s=0.001)
    assert await _ask_many(pool, 8) == ["auth"] * 8
    assert backend.sent == 1 and pool.stopped.reason == "auth"


async def test_a_slow_answer_no_longer_holds_everyone_when_the_quota_is_told():
    # The preflight takes 0.8 s to answer; with a told quota the other calls go after the
    # overlap instead of one whole answer later.
    backend = Scripted(lambda n: None, delay=0.8)
    pool = JudgePool(backend, cache=None, limiter=RateLimiter(rpm=6000, concurrency=8), prices=PriceTable())
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await _ask_many(pool, 8) == ["ok"] * 8
    assert loop.time() - t0 < 0.8 + PREFLIGHT_OVERLAP_S + 0.4  # held, they would take 0.8 + 0.8


async def test_a_slow_fault_met_by_calls_sent_in_the_overlap_still_stops_the_run():
    # A 401 slower than the overlap: the calls admitted meanwhile meet it too; any endpoint
    # fault before the gate opened stops the run, whichever call met it first.
    backend = Scripted(lambda n: FatalError("HTTP 401", kind="auth"), delay=PREFLIGHT_OVERLAP_S + 0.2)
    pool = JudgePool(backend, cache=None, limiter=RateLimiter(rpm=6000, concurrency=4), prices=PriceTable(),
                     backoff_base_s=0.001)
    assert await _ask_many(pool, 12) == ["auth"] * 12
    assert 1 < backend.sent <= 4 and pool.stopped.reason == "auth" and pool.stats.stopped_calls >= 8


class Streaming(Scripted):
    """A backend that streams: the preflight is admitted (``on_admitted`` with ``info``),
    then answers only once ``others`` more calls have reached the server, or after
    ``hold_s`` if they never do."""

    def __init__(self, info, others, hold_s=5.0):
        super().__init__(lambda n: None)
        self.info, self.others, self.hold_s = info, others, hold_s
        self.streamed = 0
        self.sent_before_first_answer: int | None = None
        self.gate = None  # the pool's gate, when the test wants to know if admission opened it
        self.open_at_admission: bool | None = None
        self._arrived = asyncio.Event()

    async def complete(self, request):
        self.sent += 1
        if self.sent > self.others:
            self._arrived.set()
        return ChatResponse(text='{"score": 1}', input_tokens=10, output_tokens=3), None

    async def complete_streamed(self, request, on_admitted):
        self.sent += 1
        self.streamed += 1
        on_admitted(self.info)
        if self.gate is not None:
            self.open_at_admission = self.gate.is_open
        try:
            await asyncio.wait_for(self._arrived.wait(), self.hold_s)
        except asyncio.TimeoutError:
            pass
        self.sent_before_first_answer = self.sent
        return ChatResponse(text='{"score": 1}', input_tokens=10, output_tokens=3), self.info


ANNOUNCED = RateLimitInfo(limit_requests=6000, remaining_requests=5999, reset_requests_s=0.01)


@pytest.mark.parametrize("told, info", [(0, ANNOUNCED), (6000, None)])
async def test_a_streamed_preflight_admitted_with_a_known_quota_lets_the_others_go_before_its_answer(told, info):
    # Announced by the preflight's own headers when the server admits it, or told: the
    # others go PREFLIGHT_OVERLAP_S after the preflight left, not one whole answer later, and
    # sooner (the floor) once the bucket of 100 requests has refilled the preflight's one.
    backend = Streaming(info, others=7)
    pool = JudgePool(backend, cache=None, limiter=RateLimiter(rpm=told, concurrency=8), prices=PriceTable())
    backend.gate = pool.gate
    assert pool.gate is not None and pool.gate.overlap_s == (PREFLIGHT_OVERLAP_S if told else None)
    assert await _ask_many(pool, 8) == ["ok"] * 8
    assert backend.open_at_admission is False
    assert pool.gate.overlap_s == PREFLIGHT_FLOOR_S
    assert backend.streamed == 1 and backend.sent_before_first_answer == 8
    assert pool.limiter.rpm == 6000 and pool.limiter.concurrency.limit == 8


async def test_a_preflight_admitted_without_quota_headers_still_goes_alone():
    # Nothing told and nothing announced: the quota is unknown until the answer (which
    # starts the slow start), so nobody else goes before it.
    backend = Streaming(None, others=7, hold_s=0.05)
    pool = _pool(backend)
    backend.gate = pool.gate
    assert await _ask_many(pool, 8) == ["ok"] * 8
    assert backend.open_at_admission is False
    assert backend.streamed == 1 and backend.sent_before_first_answer == 1


def test_a_local_server_is_not_streamed_to():
    # llama.cpp and llama-cpp-python announce no quota: their preflight is an ordinary call.
    pool = _pool(Streaming(None, others=1))
    assert pool.gate is not None and pool._preflight_admitted(pool.gate, None) is not None
    pool.server = ServerFacts(server="llama.cpp", window=4096, slots=4)
    assert pool._preflight_admitted(pool.gate, None) is None


@pytest.mark.parametrize("retry_after, stops", [(3600.0, True), (0.01, False)])
async def test_a_429_beyond_the_max_wait_stops_with_rate_limit(retry_after, stops):
    limited = RateLimited("429", limits=RateLimitInfo(retry_after_s=retry_after), kind="rate_limit")
    backend = Scripted(lambda n: None if n != 2 else limited)
    pool = _pool(backend, max_rate_limit_wait_s=300)
    assert await _ask_many(pool, 1) == ["ok"]
    outcomes = await _ask_many(pool, 4)
    if stops:
        assert pool.stopped.reason == "rate_limit" and not pool.stopped.fatal
        assert "1h0m0s" in pool.stopped.message and pool.stopped.resets_at is not None
        assert "rate_limit" in outcomes
    else:
        assert pool.stopped is None and outcomes == ["ok"] * 4


async def test_every_attempt_has_its_own_timeout():
    backend = Scripted(lambda n: None, delay=5.0)
    pool = _pool(backend, timeout_s=0.05, max_retries=1)
    with pytest.raises(JudgeFailed) as err:
        await pool.ask("t", Verdict, {"i": 0})
    assert err.value.reason == "timeout" and backend.sent == 2 and "within 0.05 s" in err.value.detail


# -- systematic request faults --------------------------------------------------------------

def test_the_first_n_requests_of_a_kind_failing_alike_trip_the_rule():
    rule = SystematicFaults(first=3)
    assert not rule.failure("quality", "context_length", "a")
    assert not rule.failure("quality", "context_length", "a")  # the same request again counts once
    assert not rule.failure("quality", "context_length", "b")
    assert rule.failure("quality", "context_length", "c") and rule.count("quality") == 3
    assert not rule.failure("quality", "timeout", "d")  # not a request fault: ignored


def test_a_success_first_or_mixed_faults_keep_the_rule_off():
    rule = SystematicFaults(first=2)
    rule.success("quality")
    assert not any(rule.failure("quality", "content_filter", k) for k in "abcdef")
    rule.success("other")  # the run has worked: kinds are counted on their own
    assert not rule.failure("pair", "context_length", "a")
    assert not rule.failure("pair", "truncated", "b")  # two causes: not one systematic fault
    assert not rule.failure("pair", "truncated", "c") and not rule.failure("pair", "truncated", "d")


def test_before_any_success_the_run_counts_as_one_kind():
    rule = SystematicFaults(first=4)
    assert rule.nothing_worked is False
    for k, kind in enumerate(["quality", "pair", "quality"]):
        assert not rule.failure(kind, "content_filter", k)
    assert rule.nothing_worked and rule.failure("pair", "content_filter", 9) and rule.count("pair") == 4
    rule.success("quality")  # once something worked, each kind counts only its own requests
    assert rule.count("pair") == 2 and not rule.failure("pair", "content_filter", 10)


async def test_a_suspect_kind_goes_one_call_at_a_time_until_a_success():
    rule = SystematicFaults(first=10)
    first = rule.lane("quality")
    assert not await first.wait()  # nothing failed yet: no lane
    first.failed("context_length", "r0")
    first.release()
    lanes = [rule.lane("quality") for _ in range(3)]
    assert not await lanes[0].wait()  # suspect: the first through holds the lane
    waiting = [asyncio.ensure_future(lane.wait()) for lane in lanes[1:]]
    await asyncio.sleep(0.01)
    assert not any(w.done() for w in waiting)
    lanes[0].failed("context_length", "r1")
    lanes[0].release()
    await asyncio.sleep(0.01)
    assert sum(w.done() for w in waiting) == 1  # the next one, alone
    rule.success("quality")
    for lane in lanes[1:]:
        lane.release()
    await asyncio.wait_for(asyncio.gather(*waiting), 1)
    assert all(w.result() for w in waiting)  # both had to wait
    assert not await rule.lane("quality").wait()  # it works now: no lane
