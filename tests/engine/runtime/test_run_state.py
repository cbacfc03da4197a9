"""A stop that cost no item anything leaves the run finished (issue 16, part 5): when the
breaker trips on the run's last call, every item already has the row its own calls
earned, so the summary records no stop (exit 3 for the failed items, not exit 1)."""
from __future__ import annotations

import asyncio

import msgspec
import pytest

from drscore import prompts
from drscore.engine.runtime.calls.judging import ChatResponse, FatalError, JudgeFailed
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.method import Method, MethodResult
from drscore.engine.runtime.models import Report, Task
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.engine.runtime.runner import Runner


class V(msgspec.Struct):
    score: int


@pytest.fixture(autouse=True)
def template(monkeypatch):
    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse(
        name, "---\nmax_tokens: 20\nexpected_output_tokens: 5\n---\n## user\nRate ${r}"))


class OneCall(Method):
    name = "one"

    async def score(self, ctx):
        try:
            await ctx.ask("t", V, {"r": ctx.report.report})
        except JudgeFailed as e:
            return MethodResult(score=None, status="failed", errors=[f"{e.reason}: {e.detail}"])
        return MethodResult(score=1.0)


class FailsFor:
    name, model, cacheable = "http", "m", True

    def __init__(self, bad):
        self.bad = bad

    def identity(self):
        return {"base_url": "http://judge.test/v1", "model": "m"}

    async def complete(self, request):
        await asyncio.sleep(0)
        if request.messages[-1].content.split()[-1] in self.bad:
            raise FatalError("HTTP 400 something every call shares", kind="bad_request")
        return ChatResponse(text='{"score": 1}', input_tokens=5, output_tokens=2), None


async def _run(n_reports, bad):
    pool = JudgePool(FailsFor(bad), cache=None, limiter=RateLimiter(concurrency=1), prices=PriceTable(),
                     breaker_threshold=2)
    runner = Runner(tasks={"t1": Task(task_id="t1", prompt="p")}, methods=[OneCall()], pool=pool, max_in_flight=1)
    reports = [Report(task_id="t1", agent=f"a{i}", report=f"r{i}") for i in range(n_reports)]
    rows = [row async for row in runner.run(reports)]
    return rows, runner.summary([])


async def test_a_breaker_tripped_by_the_last_call_is_no_stop():
    rows, summary = await _run(4, {"r2", "r3"})  # the 2nd failure in a row is the run's last call
    assert [r.status for r in rows] == ["ok", "ok", "failed", "failed"]
    assert summary["stopped"] is None and summary["totals"]["stop_after_all_items"]["reason"] == "bad_request"


async def test_a_breaker_that_left_items_unrun_is_a_stop():
    rows, summary = await _run(5, {"r2", "r3"})
    assert [r.status for r in rows] == ["ok", "ok", "failed", "failed", "failed"]
    assert summary["stopped"]["reason"] == "bad_request" and "stop_after_all_items" not in summary["totals"]
