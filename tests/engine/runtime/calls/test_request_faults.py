"""Faults of one request stay with that request (issue 16, part 5): a prompt over the
context window, a content filter, a body the server always rejects. They fail their item
with the reason, are not retried as transient, and never trip the endpoint breaker; a
prompt clearly over the model's window is not sent at all."""
from __future__ import annotations

import asyncio

import pytest

from drscore.engine.runtime.calls.health import CircuitBreaker
from drscore.engine.runtime.calls.judging import ChatResponse, FatalError, JudgeFailed, TransientError
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from support.fakes import Verdict, one_line_templates
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.engine.runtime.calls.tokens import estimate_messages
from drscore.engine.runtime.calls.windows import StatedWindow, clearly_over, stated_window


@pytest.fixture(autouse=True)
def template(monkeypatch):
    one_line_templates(monkeypatch)


class ByPrompt:
    """A backend answering from ``script(prompt)``: an exception to raise, a finish
    reason (str), or None for a good answer. Records every prompt it was sent."""

    name, cacheable = "http", True

    def __init__(self, script, model="m"):
        self.script, self.model, self.sent = script, model, []

    def identity(self):
        return {"base_url": "http://judge.test/v1", "model": self.model}

    async def complete(self, request):
        prompt = request.messages[-1].content
        self.sent.append(prompt)
        await asyncio.sleep(0)
        out = self.script(prompt)
        if isinstance(out, Exception):
            raise out
        # usage as our own estimate: the learned counting stays the character rule
        return ChatResponse(text='{"score": 1}', input_tokens=estimate_messages(request.messages), output_tokens=3,
                            finish_reason=out or "stop"), None

    async def close(self):
        pass


def _pool(backend, **kw):
    return JudgePool(backend, cache=None, limiter=RateLimiter(concurrency=4), prices=PriceTable(),
                     backoff_base_s=0.0001, backoff_cap_s=0.001, **kw)


async def _outcomes(pool, inputs):
    async def one(i):
        try:
            await pool.ask("t", Verdict, {"i": i})
            return "ok"
        except JudgeFailed as e:
            return e.reason
    return list(await asyncio.gather(*(one(i) for i in inputs)))


def test_stated_windows_in_each_providers_words():
    assert stated_window("This model's maximum context length is 4096 tokens. However, you requested 5000 "
                         "tokens (4000 in the messages, 1000 in the completion).") == StatedWindow(4096, 5000)
    assert stated_window("prompt is too long: 215,000 tokens > 200,000 maximum") == StatedWindow(200000, 215000)
    assert stated_window("The input token count (1200000) exceeds the maximum number of tokens allowed "
                         "(1048576).") == StatedWindow(1048576, 1200000)
    assert stated_window("messages must alternate") is None


def test_only_a_clearly_oversized_estimate_is_over():
    assert not clearly_over(1000, None)  # unknown window: never refused
    assert not clearly_over(4400, 4096)  # 4400 <= 4096 * 1.1 = 4505.6: might fit, so it is tried
    assert clearly_over(4506, 4096)


def test_the_breaker_counts_retries_of_one_request_once():
    b = CircuitBreaker(3)
    assert [b.failure("server_error", "503", "poisoned") for _ in range(6)] == [False] * 6
    assert b.count == 1
    b.success()
    assert not b.failure("server_error", "503", "poisoned") and b.count == 0  # counted once for the run
    assert not b.failure("server_error", "503", "a") and not b.failure("server_error", "503", "b")
    assert b.failure("server_error", "503", "c")  # three distinct requests in a row
    b.success()
    assert not b.failure("context_length", "400", "d") and b.count == 0


async def test_always_rejected_bodies_do_not_trip_the_breaker():
    poisoned = {"1", "2", "3"}
    backend = ByPrompt(lambda p: TransientError("HTTP 503", kind="server_error") if p[-1] in poisoned else None)
    pool = _pool(backend, max_retries=5, breaker_threshold=10)
    assert await _outcomes(pool, ["0"]) == ["ok"]
    # 3 poisoned requests x 6 attempts = 18 failures in a row: 3 distinct requests, not 18
    assert await _outcomes(pool, ["1", "2", "3"]) == ["server_error"] * 3
    assert len(backend.sent) == 1 + 18 and pool.stopped is None
    assert await _outcomes(pool, ["4"]) == ["ok"]


async def test_context_length_and_filter_errors_fail_once_and_are_never_counted():
    def script(p):
        if p.endswith("long"):
            return FatalError("HTTP 400: maximum context length is 4096 tokens", kind="context_length")
        if p.endswith("rude"):
            return FatalError("HTTP 400: content_filter", kind="content_filter")
        return "content_filter" if p.endswith("filtered") else None
    backend = ByPrompt(script)
    pool = _pool(backend, breaker_threshold=3)
    inputs = [f"{k} long" for k in range(5)] + [f"{k} rude" for k in range(5)] + ["x filtered", "ok"]
    outcomes = await _outcomes(pool, inputs)
    assert outcomes == ["context_length"] * 5 + ["content_filter"] * 6 + ["ok"]
    assert len(backend.sent) == len(inputs)  # each sent once: none retried
    assert pool.stopped is None and pool.stats.request_faults == 11


async def test_a_prompt_clearly_over_the_known_window_is_not_sent():
    backend = ByPrompt(lambda p: None, model="gpt-4o")  # 128,000-token window in the table
    pool = _pool(backend)
    # Before any usage was seen only an estimate over 1.5 x 128,000 = 192,000 is refused:
    # about 200,000 estimated tokens (4 characters each) is.
    with pytest.raises(JudgeFailed) as err:
        await pool.ask("t", Verdict, {"i": "z" * 800_000})
    assert err.value.reason == "context_length" and backend.sent == []
    assert "128000-token context window" in err.value.detail and pool.stats.refused_over_window == 1
    assert await _outcomes(pool, ["short"]) == ["ok"]  # the server's usage has now been seen
    # about 150,000: over 1.1 x 128,000 = 140,800, refused; about 130,000 may fit, so it is tried
    assert await _outcomes(pool, ["a" * 600_000, "b" * 520_000]) == ["context_length", "ok"]
    assert len(backend.sent) == 2 and pool.stats.refused_over_window == 2


async def test_a_window_stated_by_the_endpoint_is_learned():
    message = ("HTTP 400: This model's maximum context length is 4096 tokens. However, you requested 6000 tokens "
               "(5000 in the messages, 1000 in the completion).")
    backend = ByPrompt(lambda p: FatalError(message, kind="context_length") if len(p) > 16_000 else None,
                       model="local-model")  # not in the table: nothing refused before the first error
    pool = _pool(backend)
    assert await _outcomes(pool, ["short"]) == ["ok"]  # the server's usage has been seen
    with pytest.raises(JudgeFailed) as first:
        await pool.ask("t", Verdict, {"i": "a" * 20_000})
    assert "6000 tokens requested, window 4096 tokens" in first.value.detail and len(backend.sent) == 2
    assert pool.window == 4096
    # 24,000 characters: about 6,000 estimated tokens, over 1.1 x 4096: refused, not sent
    assert await _outcomes(pool, ["b" * 24_000, "short"]) == ["context_length", "ok"]
    assert len(backend.sent) == 3 and pool.stats.refused_over_window == 1


class Slow(ByPrompt):
    """A ByPrompt whose answers take ``delay`` seconds."""

    def __init__(self, script, delay, model="m"):
        super().__init__(script, model)
        self.delay = delay

    async def complete(self, request):
        await asyncio.sleep(self.delay)
        return await super().complete(request)


async def test_prompts_refused_unsent_do_not_stop_the_run_while_a_sent_call_may_still_work():
    # gpt-4o's 128,000-token window: 800,000 characters (about 200,000 tokens) are refused
    # unsent, at once, where the one short prompt sent first takes 0.05 s to answer. Twelve
    # refusals before any outcome would pass the rule's ten; the short call was among the
    # first requests too, and it works: the run goes on.
    backend = Slow(lambda p: None, 0.05, model="gpt-4o")
    pool = _pool(backend)
    outcomes = await _outcomes(pool, ["short"] + [f"{k}" + "z" * 800_000 for k in range(12)])
    assert outcomes == ["ok"] + ["context_length"] * 12
    assert pool.stopped is None and backend.sent == ["Rate short"] and pool.stats.refused_over_window == 12
    # The same twelve while the sent call fails the same way: the rule trips once it has ended.
    message = "HTTP 400: This model's maximum context length is 128000 tokens. However, you requested 130000 tokens"
    backend = Slow(lambda p: FatalError(message, kind="context_length"), 0.05, model="gpt-4o")
    pool = _pool(backend)
    outcomes = await _outcomes(pool, ["short"] + [f"{k}" + "z" * 800_000 for k in range(12)])
    assert outcomes == ["context_length"] * 13 and backend.sent == ["Rate short"]
    assert pool.stopped is not None and pool.stopped.reason == "context_length"
    assert "(the first 13 calls of the run)" in pool.stopped.message
