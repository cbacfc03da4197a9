"""The pool writes the run ledger: a reservation before each request, a paid line per billed
answer (re-asks and failed calls included), nothing for a 429; a second invocation hands
what the first paid to the row that reads the answer from the cache, once; a cap covers
both invocations."""
from __future__ import annotations

import asyncio
import json

import pytest

from drscore.engine.runtime.calls.cache import JudgeCache
from drscore.engine.runtime.calls.judging import JudgeFailed, RateLimited, RateLimitInfo
from drscore.engine.runtime.calls.ledger import LEDGER_FILE, RunLedger, fold
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.meter import Meter
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import Price, PriceTable

from .test_pool import FakeBackend, Verdict, templates  # noqa: F401  (the fixture)

pytestmark = pytest.mark.usefixtures("templates")
OK = '{"score": 3, "reason": "ok"}'
# 100 input tokens at $1/M and 20 output at $2/M (FakeBackend's usage)
ONE_CALL = (100 * 1.0 + 20 * 2.0) / 1e6


async def _pool(tmp_path, backend, cache, *, max_cost=None):
    pool = JudgePool(backend, cache=cache, limiter=RateLimiter(concurrency=8),
                     prices=PriceTable({"m1": Price(1.0, 2.0)}), backoff_base_s=0.001, max_cost_usd=max_cost)
    pool.use_ledger(RunLedger(tmp_path / LEDGER_FILE, max_cost=max_cost))
    return pool


def _lines(tmp_path):
    return [json.loads(line) for line in (tmp_path / LEDGER_FILE).read_text().splitlines()]


async def test_billed_answers_are_paid_lines_and_a_429_is_not(tmp_path):
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    backend = FakeBackend([RateLimited("429", limits=RateLimitInfo(retry_after_s=0.001)), '{"score": 2, "rea', OK])
    pool = await _pool(tmp_path, backend, cache)
    got = await pool.ask("alpha", Verdict, {"text": "a"})
    await cache.close()
    kinds = [line["type"] for line in _lines(tmp_path)]
    # the 429, then the broken answer (billed, re-asked), then the good one
    assert kinds == ["begin", "sent", "unpaid", "sent", "paid", "sent", "paid"]
    assert got.cost_usd == pytest.approx(2 * ONE_CALL) and pool.ledger.now.cost_usd == pytest.approx(2 * ONE_CALL)


async def test_a_failed_call_carries_its_billed_attempts_to_the_item(tmp_path):
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    backend = FakeBackend(["never json"])
    pool = await _pool(tmp_path, backend, cache)
    with pytest.raises(JudgeFailed) as err:
        await pool.ask("alpha", Verdict, {"text": "a"})
    await cache.close()
    sent = len(backend.requests)  # the first answer, then asked again (schema in the prompt, re-asks)
    assert err.value.reason == "undecodable" and sent >= 3
    paid = err.value.paid
    assert paid is not None and paid.calls == sent and paid.cost_usd == pytest.approx(sent * ONE_CALL)
    meter = Meter()
    meter.add_paid(paid)
    assert meter.calls == sent and meter.input_tokens == 100 * sent
    assert meter.cost_usd == pytest.approx(sent * ONE_CALL)


async def test_a_resumed_invocation_hands_what_was_paid_to_one_row(tmp_path):
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    first = await _pool(tmp_path, FakeBackend([OK]), cache)
    await first.ask("alpha", Verdict, {"text": "a"})
    first.ledger.close("interrupted")

    backend = FakeBackend([OK])
    second = await _pool(tmp_path, backend, cache)
    hit = await second.ask("alpha", Verdict, {"text": "a"})
    again = await second.ask("alpha", Verdict, {"text": "a"})
    await cache.close()
    assert backend.requests == []  # nothing asked twice
    assert hit.source == again.source == "cache"
    assert hit.earlier is not None and hit.earlier.cost_usd == pytest.approx(ONE_CALL) and not hit.reused
    assert again.earlier is None and not again.reused  # the second reader: free, and not someone else's
    meter = Meter()
    meter.add(hit)
    meter.add(again)
    assert (meter.calls, meter.cache_hits, meter.cost_usd) == (1, 2, pytest.approx(ONE_CALL))
    t = second.ledger.totals()
    assert t["invocations"] == 2 and t["run"]["cost_usd"] == pytest.approx(ONE_CALL)
    assert t["by_invocation"]["2"]["cost_usd"] == 0


async def test_an_answer_from_a_cache_the_run_never_paid_for_is_reused(tmp_path):
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    other = JudgePool(FakeBackend([OK]), cache=cache, limiter=RateLimiter(concurrency=8),
                      prices=PriceTable({"m1": Price(1.0, 2.0)}))
    await other.ask("alpha", Verdict, {"text": "a"})  # another run, its own ledger
    pool = await _pool(tmp_path / "", FakeBackend([OK]), cache)
    hit = await pool.ask("alpha", Verdict, {"text": "a"})
    await cache.close()
    assert hit.reused and hit.earlier is None and hit.cost_usd == 0 and hit.cost_uncached > 0
    assert pool.stats.reused == 1 and pool.ledger.totals()["run"]["cost_usd"] == 0


async def test_the_cap_covers_what_earlier_invocations_paid(tmp_path):
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    first = await _pool(tmp_path, FakeBackend([OK]), cache)
    await asyncio.gather(*(first.ask("alpha", Verdict, {"text": str(i)}) for i in range(3)))
    first.ledger.close("finished")
    spent = fold(tmp_path / LEDGER_FILE).paid.cost_usd
    assert spent == pytest.approx(3 * ONE_CALL)
    # a cap the first invocation alone would leave room under: the run has already used it
    backend = FakeBackend([OK])
    second = await _pool(tmp_path, backend, cache, max_cost=spent + ONE_CALL / 2)
    with pytest.raises(JudgeFailed) as err:
        await second.ask("alpha", Verdict, {"text": "new"})
    await cache.close()
    assert err.value.reason == "budget" and backend.requests == []
    assert "the run has spent $0.0004 (" in second.stopped.message and "every invocation" in second.stopped.message
