"""The judge pool: cache keys, prompt-edit invalidation, in-flight de-duplication,
decoding with re-ask, budget cap and dry-run planning."""
from __future__ import annotations

import asyncio
from typing import Annotated

import msgspec
import pytest

from drscore import prompts
from drscore.engine.runtime.calls.budget import input_token_bound
from drscore.engine.runtime.calls.cache import JudgeCache, request_key
from drscore.engine.runtime.calls.judging import ChatRequest, ChatResponse, FatalError, JudgeFailed, TransientError
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import Price, PriceTable


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    score: Annotated[int, msgspec.Meta(ge=0, le=4)]
    reason: str


TEMPLATES = {
    "alpha": "---\nmax_tokens: 50\nexpected_output_tokens: 10\n---\n## system\nJudge.\n## user\nRate: ${text}",
    "beta": "---\nmax_tokens: 50\nexpected_output_tokens: 10\n---\n## system\nOther judge.\n## user\nScore: ${text}",
}


@pytest.fixture
def templates(monkeypatch):
    current = dict(TEMPLATES)
    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse(name, current[name]))
    return current


class FakeBackend:
    """Answers in order from ``answers`` (cycling the last); counts calls; optional delay."""

    name = "http"
    cacheable = True

    def __init__(self, answers=None, delay=0.0, model="m1", base_url="http://judge.test/v1"):
        self.answers = list(answers or ['{"score": 3, "reason": "ok"}'])
        self.delay, self.model, self.base_url = delay, model, base_url
        self.requests: list[ChatRequest] = []

    def identity(self):
        return {"base_url": self.base_url, "model": self.model}

    async def complete(self, request):
        self.requests.append(request)
        await asyncio.sleep(self.delay)
        answer = self.answers[min(len(self.requests) - 1, len(self.answers) - 1)]
        if isinstance(answer, Exception):
            raise answer
        return ChatResponse(text=answer, input_tokens=100, output_tokens=20), None

    async def close(self):
        pass


async def _pool(tmp_path, backend, **kw):
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    prices = PriceTable({"m1": Price(1.0, 2.0)})
    pool = JudgePool(backend, cache=cache, limiter=RateLimiter(concurrency=8), prices=prices,
                     backoff_base_s=0.001, **kw)
    return pool, cache


def test_key_is_stable_and_covers_every_component():
    base = {"backend": "http", "base_url": "u", "model": "m1", "messages": [["user", "x"]], "temperature": 0.0,
            "max_tokens": 10, "schema": {"type": "object"}, "template_hash": "h", "sample": 0}
    k = request_key(base)
    assert k == request_key(dict(reversed(list(base.items()))))  # order of components is irrelevant
    for field, other in [("model", "m2"), ("base_url", "v"), ("temperature", 0.7), ("max_tokens", 11),
                         ("schema", {"type": "array"}), ("template_hash", "h2"), ("sample", 1),
                         ("messages", [["user", "y"]])]:
        assert request_key({**base, field: other}) != k, field


async def test_cache_hit_on_second_ask_and_cost_accounting(tmp_path, templates):
    backend = FakeBackend()
    pool, cache = await _pool(tmp_path, backend)
    first = await pool.ask("alpha", Verdict, {"text": "r1"})
    second = await pool.ask("alpha", Verdict, {"text": "r1"})
    await cache.close()
    assert first.value == Verdict(3, "ok") and first.source == "network" and second.source == "cache"
    assert len(backend.requests) == 1
    # 100 input tokens at $1/M + 20 output tokens at $2/M = 0.0001 + 0.00004
    assert first.cost_usd == pytest.approx(0.00014) and second.cost_usd == 0.0
    assert pool.stats.calls == 1 and pool.stats.cache_hits == 1


async def test_editing_one_prompt_reasks_only_its_calls(tmp_path, templates):
    backend = FakeBackend()
    pool, cache = await _pool(tmp_path, backend)
    for text in ("r1", "r2"):
        await pool.ask("alpha", Verdict, {"text": text})
        await pool.ask("beta", Verdict, {"text": text})
    assert len(backend.requests) == 4
    templates["beta"] = templates["beta"].replace("Other judge.", "Other judge, edited.")
    for text in ("r1", "r2"):
        assert (await pool.ask("alpha", Verdict, {"text": text})).source == "cache"
        assert (await pool.ask("beta", Verdict, {"text": text})).source == "network"
    await cache.close()
    assert [r.template for r in backend.requests[4:]] == ["beta", "beta"]


async def test_identical_requests_in_flight_share_one_call(tmp_path, templates):
    backend = FakeBackend(delay=0.05)
    pool, cache = await _pool(tmp_path, backend)
    results = await asyncio.gather(*(pool.ask("alpha", Verdict, {"text": "same"}) for _ in range(10)))
    await cache.close()
    assert len(backend.requests) == 1
    assert sorted(r.source for r in results) == ["network"] + ["shared"] * 9
    assert pool.stats.shared == 9


async def test_samples_of_one_step_are_not_collapsed(tmp_path, templates):
    backend = FakeBackend()
    pool, cache = await _pool(tmp_path, backend)
    await asyncio.gather(*(pool.ask("alpha", Verdict, {"text": "t"}, sample=i) for i in range(3)))
    await cache.close()
    assert sorted(r.sample for r in backend.requests) == [0, 1, 2]


async def test_tolerant_decoding_then_bounded_reask(tmp_path, templates):
    fenced = 'Sure! Here it is:\n```json\n{"score": 2, "reason": "fenced"}\n```'
    backend = FakeBackend([fenced])
    pool, cache = await _pool(tmp_path, backend)
    assert (await pool.ask("alpha", Verdict, {"text": "a"})).value.reason == "fenced"
    # broken twice, then valid: re-asked with the bad answer and a correction appended
    backend2 = FakeBackend(['{"score": 2, "rea', '{"score": 9, "reason": "out of range"}',
                            '{"score": 1, "reason": "third time"}'])
    pool.backend = backend2
    got = await pool.ask("alpha", Verdict, {"text": "b"})
    assert got.value.reason == "third time" and pool.stats.reasks == 2
    assert [m.role for m in backend2.requests[1].messages][-2:] == ["assistant", "user"]
    # the final answer is cached under the original request's key
    assert (await pool.ask("alpha", Verdict, {"text": "b"})).source == "cache"
    # never decodable: fails with a reason after max_reasks, does not raise anything else
    pool.backend = FakeBackend(["not json at all"])
    with pytest.raises(JudgeFailed) as err:
        await pool.ask("alpha", Verdict, {"text": "c"})
    await cache.close()
    assert err.value.reason == "undecodable" and len(pool.backend.requests) == 3  # 1 + 2 re-asks


async def test_transient_errors_retry_fatal_do_not(tmp_path, templates):
    backend = FakeBackend([TransientError("503"), TransientError("timeout"), '{"score": 4, "reason": "r"}'])
    pool, cache = await _pool(tmp_path, backend)
    assert (await pool.ask("alpha", Verdict, {"text": "a"})).value.score == 4
    assert pool.stats.retries == 2
    pool.backend = FakeBackend([FatalError("HTTP 401")])
    with pytest.raises(JudgeFailed) as err:
        await pool.ask("alpha", Verdict, {"text": "b"})
    await cache.close()
    assert err.value.reason == "fatal" and len(pool.backend.requests) == 1


async def test_budget_reserves_the_worst_case_output_and_never_crosses_the_cap(tmp_path, templates):
    # Output-heavy prices: input free, output $1000 per Mtok. Each call may write
    # max_tokens=50 (worst case $0.05) and writes 20 ($0.02). Cap $0.10, ten calls at once:
    # after k settled calls the next goes only if 0.02k + 0.05 <= 0.10, so k = 0, 1, 2
    # go (3 calls, $0.06) and the 4th would risk $0.11: the run stops with 'budget'.
    backend = FakeBackend()
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    pool = JudgePool(backend, cache=cache, limiter=RateLimiter(concurrency=8),
                     prices=PriceTable({"m1": Price(0.0, 1000.0)}), max_cost_usd=0.10)

    async def one(i):
        try:
            await pool.ask("alpha", Verdict, {"text": f"r{i}"})
            return "ok"
        except JudgeFailed as e:
            return e.reason

    outcomes = await asyncio.gather(*(one(i) for i in range(10)))
    await cache.close()
    assert sorted(outcomes) == ["budget"] * 7 + ["ok"] * 3
    assert len(backend.requests) == 3 and pool.stats.cost_usd == pytest.approx(0.06)
    assert pool.budget_exhausted and pool.stopped.reason == "budget" and not pool.stopped.fatal


async def test_budget_with_input_heavy_prices_stops_within_one_call_of_the_cap(tmp_path, templates):
    # Input-heavy prices: $1000 per Mtok of input, output free. The reservation bounds the
    # input by the request's bytes, so spend stays under the cap and what is left unspent
    # is less than one call's worst case.
    backend = FakeBackend()
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    pool = JudgePool(backend, cache=cache, limiter=RateLimiter(concurrency=8),
                     prices=PriceTable({"m1": Price(1000.0, 0.0)}), max_cost_usd=2.0)
    results = await asyncio.gather(*(pool.ask("alpha", Verdict, {"text": f"r{i:03d}"}) for i in range(200)),
                                   return_exceptions=True)
    await cache.close()
    spent = len(backend.requests) * 100 * 1000 / 1e6  # the fake bills 100 input tokens a call
    worst = input_token_bound(backend.requests[-1]) * 1000 / 1e6
    assert pool.stats.cost_usd == pytest.approx(spent) and spent <= 2.0
    assert 2.0 - spent < worst and pool.budget_exhausted
    assert sum(isinstance(r, JudgeFailed) and r.reason == "budget" for r in results) == 200 - len(backend.requests)


async def test_cache_hits_are_served_after_the_budget_stops_the_run(tmp_path, templates):
    backend = FakeBackend()
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    prices = PriceTable({"m1": Price(0.0, 1000.0)})
    pool = JudgePool(backend, cache=cache, limiter=RateLimiter(), prices=prices, max_cost_usd=0.06)
    await pool.ask("alpha", Verdict, {"text": "paid"})  # worst 0.05 fits; spends 0.02
    with pytest.raises(JudgeFailed) as err:  # 0.02 + 0.05 > 0.06
        await pool.ask("alpha", Verdict, {"text": "new"})
    assert err.value.reason == "budget" and "--max-cost" in err.value.detail
    assert (await pool.ask("alpha", Verdict, {"text": "paid"})).source == "cache"
    # a re-run with a higher cap resumes: the paid call comes from the cache
    rerun = JudgePool(backend, cache=cache, limiter=RateLimiter(), prices=prices, max_cost_usd=1.0)
    assert (await rerun.ask("alpha", Verdict, {"text": "paid"})).source == "cache"
    assert (await rerun.ask("alpha", Verdict, {"text": "new"})).source == "network"
    await cache.close()
    assert len(backend.requests) == 2


def test_input_bound_covers_the_mock_judges_billing_in_any_script():
    from drscore.engine.runtime.calls.judging import Message
    from drscore.engine.runtime.calls.tokens import estimate_messages
    from drscore.judge.mock.server import count_tokens

    texts = ["plain English words, with punctuation!!! ...", "一二三四五六七八九十" * 50, "🙂 " * 300,
             "a-b-c-d-e-f " * 200, "x" * 5000, "{\"k\": [1, 2, 3]}" * 100]
    for text in texts:
        req = ChatRequest(messages=(Message("system", "Judge."), Message("user", text)), template="t",
                          template_hash="h", schema_name="V", schema={"type": "object"})
        billed = sum(count_tokens(m.content) + 3 for m in req.messages)  # the mock's own count
        assert input_token_bound(req) >= max(billed, estimate_messages(req.messages))


async def test_dry_run_plans_misses_and_counts_hits_without_calling(tmp_path, templates):
    backend = FakeBackend()
    pool, cache = await _pool(tmp_path, backend)
    await pool.ask("alpha", Verdict, {"text": "cached"})
    planner = FakeBackend(['{"score": 0, "reason": "synthetic"}'])
    dry = JudgePool(backend, cache=cache, limiter=RateLimiter(), prices=PriceTable({"m1": Price(1.0, 2.0)}),
                    dry_run_with=planner)
    assert (await dry.ask("alpha", Verdict, {"text": "cached"})).source == "cache"
    planned = await dry.ask("alpha", Verdict, {"text": "new"})
    again = await dry.ask("alpha", Verdict, {"text": "new"})
    await cache.close()
    assert planned.source == "dry" and len(backend.requests) == 1
    assert dry.stats.planned_calls == 1 and dry.stats.cache_hits == 1
    assert dry.stats.planned_output_tokens == 10  # expected_output_tokens of the template
    assert dry.stats.planned_cost_usd == pytest.approx(
        (dry.stats.planned_input_tokens * 1.0 + 10 * 2.0) / 1e6)
    # the same step asked again (e.g. a task-level step from a second agent) is planned once
    assert again.source == "shared" and dry.stats.planned_calls == 1


async def test_cache_export_import_round_trip(tmp_path, templates):
    pool, cache = await _pool(tmp_path, FakeBackend())
    await pool.ask("alpha", Verdict, {"text": "x"})
    assert await cache.export(tmp_path / "c.jsonl.gz") == 1
    await cache.close()
    other = await JudgeCache.open(tmp_path / "other.sqlite")
    assert await other.import_(tmp_path / "c.jsonl.gz") == 1
    stats = await other.stats()
    await other.close()
    assert stats["entries"] == 1 and stats["by_template"][0]["template"] == "alpha"


async def test_uncached_backend_answers_a_repeated_request_once_per_run(templates):
    backend = FakeBackend()
    backend.cacheable = False  # like the offline judge
    pool = JudgePool(backend, cache=None, limiter=RateLimiter(), prices=PriceTable())
    first = await pool.ask("alpha", Verdict, {"text": "task-level step"})
    second = await pool.ask("alpha", Verdict, {"text": "task-level step"})
    assert (first.source, second.source) == ("network", "shared") and len(backend.requests) == 1


async def test_a_fault_before_the_send_gives_back_every_slot_and_reservation(tmp_path, templates, monkeypatch):
    # A fault between the quota's grant and the send (here the ledger's line for the call)
    # kept the call's concurrency slot: after 8 such faults (the concurrency) every later
    # call waited forever and the run hung without an error. Now each faulted call fails,
    # gives its slot, permit and budget reservation back, and writes no bill.
    backend = FakeBackend()
    pool, cache = await _pool(tmp_path, backend, max_cost_usd=1.0)
    real_sent = pool.ledger.sent
    faults = {"left": 10}

    def failing_sent(*args, **kwargs):
        if faults["left"]:
            faults["left"] -= 1
            raise RuntimeError("ledger fault")
        return real_sent(*args, **kwargs)

    monkeypatch.setattr(pool.ledger, "sent", failing_sent)
    for i in range(10):  # more faults than the concurrency of 8
        with pytest.raises(RuntimeError, match="ledger fault"):
            await asyncio.wait_for(pool.ask("alpha", Verdict, {"text": f"r{i}"}), 2.0)
    assert pool.limiter.concurrency.in_use == 0 and pool.budget.in_flight == 0
    judged = await asyncio.wait_for(pool.ask("alpha", Verdict, {"text": "after"}), 2.0)
    await cache.close()
    assert judged.source == "network" and backend.requests[-1].messages[-1].content.endswith("after")
    assert pool.ledger.now.calls == 1  # only the call that was sent is billed
