"""What real local servers (llama.cpp's llama-server, llama-cpp-python's server) do that
the pool must meet (issue 26): validation errors answered as HTTP 500, a window stated in
an error or in the model list and applied to calls already waiting, answers clamped by a
full window, one request at a time with no cancelling of abandoned work, and the tokens
of a failed call counted where the item is."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from drscore.engine.runtime.calls.judging import ChatResponse, FatalError, JudgeFailed, TransientError
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from support.fakes import Verdict, one_line_templates
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.engine.runtime.calls.slots import ServerFacts
from drscore.engine.runtime.calls.tokens import estimate_messages
from drscore.engine.runtime.context import ItemContext
from drscore.engine.runtime.calls.meter import Meter

# llama-cpp-python's answer to a body its pydantic model refuses (HTTP 500, as recorded).
PYDANTIC_500 = ('HTTP 500 from http://127.0.0.1:1/v1: {"error":{"message":"1 validation error for '
                'CreateChatCompletionRequest\\ntemperature\\n  Input should be a valid number, unable to parse '
                'string as a number [type=float_parsing, input_value=\'hot\', input_type=str]","type":'
                '"internal_server_error","param":null,"code":null}}')
# llama-server's answer to a prompt over its slot's window (HTTP 400).
LLAMA_SERVER_OVER = ('HTTP 400 from http://127.0.0.1:1/v1: {"error":{"code":400,"message":"request (9000 tokens) '
                     'exceeds the available context size (8192 tokens), try increasing it","type":'
                     '"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}')


@pytest.fixture(autouse=True)
def template(monkeypatch):
    one_line_templates(monkeypatch)


class Scripted:
    """A backend answering each request from ``script(request)``: an exception to raise or
    a ChatResponse; records the requests, and the most it had in flight at once."""

    name, cacheable, model = "http", True, "local"

    def __init__(self, script, facts: ServerFacts | None = None, delay: float = 0.0):
        self.script, self.facts, self.delay = script, facts, delay
        self.sent: list = []
        self.in_flight = self.max_in_flight = 0

    def identity(self):
        return {"base_url": "http://127.0.0.1:1/v1", "model": self.model}

    async def server_facts(self):
        return self.facts or ServerFacts()

    async def complete(self, request):
        self.sent.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            out = self.script(request)
        finally:
            self.in_flight -= 1
        if isinstance(out, Exception):
            raise out
        return out, None

    async def close(self):
        pass


def ok(request, output=3, finish="stop"):
    return ChatResponse(text='{"score": 1}', input_tokens=estimate_messages(request.messages), output_tokens=output,
                        finish_reason=finish)


def _pool(backend, **kw):
    kw.setdefault("limiter", RateLimiter(concurrency=16))
    return JudgePool(backend, cache=None, prices=PriceTable(), backoff_base_s=0.0001, backoff_cap_s=0.001, **kw)


async def test_the_same_validation_500_twice_is_a_request_fault_after_two_calls():
    backend = Scripted(lambda r: TransientError(PYDANTIC_500, kind="server_error", status=500))
    pool = _pool(backend)
    with pytest.raises(JudgeFailed) as e:
        await pool.ask("t", Verdict, {"i": 1})
    assert e.value.reason == "invalid_request" and "same validation error" in e.value.detail
    assert len(backend.sent) == 2  # not the 6 a transient 500 gets (1 + --max-retries 5)
    assert pool.breaker.count == 1 and pool.stopped is None  # the request's fault: the run goes on


async def test_a_plain_500_is_still_retried_as_a_server_fault():
    calls = []

    def script(r):
        calls.append(1)
        return TransientError("HTTP 500: Internal Server Error", kind="server_error", status=500) \
            if len(calls) < 3 else ok(r)
    backend = Scripted(script)
    judged = await _pool(backend).ask("t", Verdict, {"i": 1})
    assert judged.value.score == 1 and len(backend.sent) == 3


async def test_a_window_stated_in_an_error_applies_to_calls_already_waiting_for_a_slot():
    # One slot (a llama-cpp-python-like server); a long prompt is answered "over the window"
    # with llama-server's wording; the calls queued behind it are not sent at all.
    def script(r):
        return FatalError(LLAMA_SERVER_OVER, kind="context_length", status=400) \
            if len(r.messages[-1].content) > 1000 else ok(r)
    backend = Scripted(script, ServerFacts(server="test", slots=1, cancels=True), delay=0.01)
    pool = _pool(backend)
    long = "word " * 10_000  # ~12,500 tokens by the character rule: over 8,192 only once the window is known

    async def one(i, text):
        try:
            await pool.ask("t", Verdict, {"i": f"{i} {text}"})
            return "ok"
        except JudgeFailed as e:
            return e.reason
    first = asyncio.create_task(one(0, ""))  # the preflight
    await asyncio.sleep(0.05)
    outcomes = await asyncio.gather(*(one(i, long) for i in range(1, 6)), first)
    assert outcomes == ["context_length"] * 5 + ["ok"]
    sent_long = [r for r in backend.sent if len(r.messages[-1].content) > 1000]
    assert len(sent_long) == 1  # the first told the window; the four waiting behind it were refused here
    assert pool.window == 8192 and pool.stats.refused_over_window == 4


async def test_a_window_the_server_states_up_front_is_used_from_the_first_call():
    backend = Scripted(ok, ServerFacts(server="llama.cpp", window=1000, slots=4, cancels=True))
    pool = _pool(backend)
    with pytest.raises(JudgeFailed) as e:
        await pool.ask("t", Verdict, {"i": "word " * 2000})  # ~2,500 tokens > 1.5 x 1,000
    assert e.value.reason == "context_length" and "as the endpoint stated" in e.value.detail
    assert backend.sent == []


async def test_the_servers_slots_bound_what_is_in_flight_there():
    backend = Scripted(ok, ServerFacts(server="llama-cpp-python", slots=1, cancels=False), delay=0.01)
    pool = _pool(backend)
    await asyncio.gather(*(pool.ask("t", Verdict, {"i": i}) for i in range(8)))
    assert len(backend.sent) == 8 and backend.max_in_flight == 1


async def test_a_cut_off_answer_in_a_full_window_is_not_retried_with_a_cap_the_window_cannot_hold():
    # The window is 100 tokens; the prompt took 90 and the answer stopped at 8 with
    # finish_reason length: a larger cap cannot help, and the advice says so.
    def script(r):
        return ChatResponse(text='{"sco', input_tokens=90, output_tokens=8, finish_reason="length")
    backend = Scripted(script, ServerFacts(server="llama.cpp", window=100, slots=2, cancels=True))
    pool = _pool(backend)
    with pytest.raises(JudgeFailed) as e:
        await pool.ask("t", Verdict, {"i": 1})
    assert e.value.reason == "truncated" and "context window was full" in e.value.detail
    assert "--max-output-tokens" not in e.value.detail
    assert len(backend.sent) == 1


async def test_a_retry_after_a_cut_off_asks_no_more_than_the_window_leaves():
    def script(r):
        if len(backend.sent) == 1:
            return ChatResponse(text='{"sco', input_tokens=4000, output_tokens=20, finish_reason="length")
        return ok(r)
    backend = Scripted(script, ServerFacts(server="llama.cpp", window=4096, slots=2, cancels=True))
    pool = _pool(backend)
    await pool.ask("t", Verdict, {"i": 1})
    assert [r.max_tokens for r in backend.sent] == [20, 96]  # 4,096 - 4,000, not twice 20 + an allowance


async def test_a_timed_out_call_is_not_sent_again_while_the_server_may_still_be_working_on_it():
    backend = Scripted(ok, ServerFacts(server="llama-cpp-python", slots=1, cancels=False), delay=0.3)
    pool = _pool(backend, timeout_s=0.05)
    with pytest.raises(JudgeFailed) as e:
        await pool.ask("t", Verdict, {"i": 1})
    assert e.value.reason == "timeout" and "not sent again" in e.value.detail
    assert len(backend.sent) == 1 and pool.stats.timeouts_not_resent == 1


async def test_a_timed_out_call_is_sent_again_once_the_servers_speed_bounds_the_abandoned_work():
    delays = iter([0.0, 0.3, 0.0])

    class Slow(Scripted):
        async def complete(self, request):
            self.delay = next(delays)
            return await super().complete(request)
    backend = Slow(ok, ServerFacts(server="llama-cpp-python", slots=1, cancels=False))
    pool = _pool(backend, timeout_s=0.1)
    await pool.ask("t", Verdict, {"i": 0})  # answered: the server's speed is known
    judged = await pool.ask("t", Verdict, {"i": 1})  # times out once, then goes again
    assert judged.value.score == 1 and len(backend.sent) == 3


async def test_a_failed_items_paid_attempts_count_in_its_meter(monkeypatch):
    # Cut off twice (the first answer and the retry at a larger cap): the item fails as
    # truncated, and both paid answers are in its tokens.
    backend = Scripted(lambda r: ChatResponse(text="{", input_tokens=50, output_tokens=r.max_tokens,
                                              finish_reason="length"))
    pool = _pool(backend)
    meter = Meter()
    records = []
    ctx = ItemContext(pool=pool, task=SimpleNamespace(task_id="1"), report=SimpleNamespace(agent="a"),  # type: ignore[arg-type]
                      method="m", options={}, seed=0, pages=None, executor=None, on_verdict=records.append,
                      meter=meter)
    with pytest.raises(JudgeFailed):
        await ctx.ask("t", Verdict, {"i": 1})
    caps = [r.max_tokens for r in backend.sent]
    assert len(caps) == 2 and meter.input_tokens == 100 and meter.output_tokens == sum(caps)
    assert meter.failed == 1
    assert records[-1].status == "failed" and records[-1].output_tokens == sum(caps)
