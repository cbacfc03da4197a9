"""Prompt-cache and batch billing, honest per-call cost, latency split, warm-up order
and the dry run's cached-share estimate (issue 11)."""
from __future__ import annotations

import asyncio
import json
from typing import Annotated

import msgspec
import pytest

from drscore import prompts
from drscore.engine.runtime.calls.cache import JudgeCache
from drscore.engine.runtime.calls.judging import ChatRequest, ChatResponse, JudgeFailed, Message
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.meter import Meter
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.prefix import CacheEstimator, WarmupGate, cacheable_tokens, group_key
from drscore.engine.runtime.calls.pricing import Price, PriceTable
from drscore.judge.http import parse_completion


class Verdict(msgspec.Struct):
    score: Annotated[int, msgspec.Meta(ge=0, le=4)]


TEMPLATES = {
    "long": "---\nmax_tokens: 40\nexpected_output_tokens: 10\n---\n## system\nJudge.\n## user\n${doc}\n\nItem: ${item}",
}


@pytest.fixture
def templates(monkeypatch):
    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse(name, TEMPLATES[name]))


class Backend:
    """Records when each call starts and ends; reports ``cached`` cached tokens."""

    name = "http"
    cacheable = True

    def __init__(self, cached=0, batched=False, delay=0.01):
        self.model, self.cached, self.delay = "m1", cached, delay
        self.batched = batched
        self.log: list[tuple[str, str]] = []

    def identity(self):
        return {"base_url": "http://judge.test/v1", "model": self.model}

    async def complete(self, request: ChatRequest):
        item = request.variables.get("item")
        self.log.append(("start", item))
        await asyncio.sleep(self.delay)
        self.log.append(("end", item))
        return ChatResponse(text='{"score": 2}', input_tokens=2000, output_tokens=100,
                            cached_input_tokens=self.cached, batched=self.batched), None

    async def close(self):
        pass


class ExplodingLimiter(RateLimiter):
    async def acquire(self, estimate):  # batched calls must never be paced by the quota
        raise AssertionError("a batched call asked the RPM/TPM limiter")


def KNOWN_QUOTA():  # noqa: N802 - a known quota: no single-call probe at the start (with preflight=False)
    return RateLimiter(rpm=1e9, concurrency=8)


PRICES = PriceTable({"m1": Price(input=2.0, output=8.0, cached_input=0.5)})


# -- prices -----------------------------------------------------------------------------

def test_price_defaults_batch_half_and_no_assumed_cache_discount():
    p = Price(input=3.0, output=12.0)
    assert p.rates() == (3.0, 3.0, 12.0)  # unknown cached price: full input price
    assert p.rates(batch=True) == (1.5, 1.5, 6.0)
    q = Price(input=2.0, output=8.0, cached_input=0.5, batch_output=5.0)
    assert q.rates(batch=True) == (1.0, 0.25, 5.0)


def test_cost_bills_cached_part_at_cached_price():
    # 2,000 prompt tokens of which 1,536 cached, 100 output:
    # (464 * 2.0 + 1536 * 0.5 + 100 * 8.0) / 1e6 = (928 + 768 + 800) / 1e6
    assert PRICES.cost("m1", 2000, 100, 1536) == pytest.approx(2496 / 1e6, abs=1e-15)
    # batch: half of every rate
    assert PRICES.cost("m1", 2000, 100, 1536, batch=True) == pytest.approx(1248 / 1e6, abs=1e-15)
    # cached tokens can never exceed the prompt
    assert PRICES.cost("m1", 100, 0, 500) == pytest.approx(100 * 0.5 / 1e6)


def test_price_file_takes_cached_and_batch_fields(tmp_path):
    f = tmp_path / "prices.json"
    f.write_text(json.dumps({"j": {"input": 1.0, "output": 4.0, "cached_input": 0.1, "batch_input": 0.6}}))
    t = PriceTable.load(f)
    assert t.lookup("j").rates() == (1.0, 0.1, 4.0)
    assert t.lookup("j").rates(batch=True) == (0.6, 0.05, 2.0)


def test_usage_cached_tokens_read_from_prompt_tokens_details():
    req = ChatRequest(messages=(Message("user", "x"),), template="t", template_hash="h", schema_name="S", schema={})
    body = {"choices": [{"message": {"content": "{}"}}],
            "usage": {"prompt_tokens": 1500, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 1280}}}
    assert parse_completion(json.dumps(body).encode(), req).cached_input_tokens == 1280
    del body["usage"]["prompt_tokens_details"]
    assert parse_completion(json.dumps(body).encode(), req).cached_input_tokens == 0


# -- pool accounting ----------------------------------------------------------------------

async def test_pool_bills_cached_tokens_and_reports_uncached_cost(tmp_path, templates):
    cache = await JudgeCache.open(tmp_path / "c.sqlite")
    pool = JudgePool(Backend(cached=1536), cache=cache, limiter=RateLimiter(concurrency=4), prices=PRICES)
    j = await pool.ask("long", Verdict, {"doc": "d", "item": "1"})
    hit = await pool.ask("long", Verdict, {"doc": "d", "item": "1"})
    await cache.close()
    assert j.cost_usd == pytest.approx(2496 / 1e6)
    assert j.cost_uncached == pytest.approx((2000 * 2.0 + 100 * 8.0) / 1e6)
    assert j.cached_input_tokens == 1536 and pool.stats.cached_input_tokens == 1536
    # the cache hit paid nothing, but says what the call would have cost alone (> 0)
    assert hit.source == "cache" and hit.cost_usd == 0 and hit.cost_uncached > 0


async def test_batched_calls_skip_the_limiter_and_pay_batch_prices(tmp_path, templates):
    pool = JudgePool(Backend(batched=True), cache=None, limiter=ExplodingLimiter(rpm=1), prices=PRICES)
    j = await pool.ask("long", Verdict, {"doc": "d", "item": "1"})
    assert j.batched and pool.stats.batched_calls == 1
    assert j.cost_usd == pytest.approx((2000 * 1.0 + 100 * 4.0) / 1e6)
    assert j.wait_spans == []  # no quota wait in batch mode


async def test_batch_mode_reserves_worst_case_before_submitting(tmp_path, templates):
    # Worst case of one call at batch prices: estimated prompt plus the whole output cap
    # (40 tokens at $4/M = $0.00016). A cap below that must refuse before any call.
    backend = Backend(batched=True)
    pool = JudgePool(backend, cache=None, limiter=RateLimiter(), prices=PRICES, max_cost_usd=0.00016)
    with pytest.raises(JudgeFailed) as err:
        await pool.ask("long", Verdict, {"doc": "d", "item": "1"})
    assert err.value.reason == "budget" and backend.log == []


def test_latency_split_unions_concurrent_calls():
    m = Meter()
    m.judge_spans = [(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)]  # at the judge: [0,3] and [5,6] = 4 s
    m.wait_spans = [(2.5, 5.5), (7.0, 7.5)]  # waiting outside judge time: [3,5] and [7,7.5] = 2.5 s
    m.shared_spans = [(6.5, 8.0)]  # waiting for a shared call, outside both: [6.5,7] and [7.5,8] = 1 s
    judge, wait, shared = m.latency_split()
    assert judge == pytest.approx(4.0) and wait == pytest.approx(2.5) and shared == pytest.approx(1.0)


# -- prefix groups ------------------------------------------------------------------------

async def test_first_call_of_a_prefix_group_goes_alone(templates):
    backend = Backend()
    pool = JudgePool(backend, cache=None, limiter=KNOWN_QUOTA(), prices=PRICES, preflight=False)
    doc = "shared report text " * 600  # well past the grouping threshold
    await asyncio.gather(*(pool.ask("long", Verdict, {"doc": doc, "item": str(i)}) for i in range(5)))
    first_end = backend.log.index(("end", backend.log[0][1]))
    assert first_end == 1  # nothing started before the first call answered
    assert pool.stats.warmup_held == 4


async def test_short_prompts_are_not_held(templates):
    backend = Backend()
    pool = JudgePool(backend, cache=None, limiter=KNOWN_QUOTA(), prices=PRICES, preflight=False)
    await asyncio.gather(*(pool.ask("long", Verdict, {"doc": "short", "item": str(i)}) for i in range(4)))
    assert [k for k, _ in backend.log[:4]] == ["start"] * 4 and pool.stats.warmup_held == 0


async def test_gate_releases_siblings_when_the_leader_fails():
    gate = WarmupGate()
    assert await gate.enter("k") is True
    sibling = asyncio.create_task(gate.enter("k"))
    await asyncio.sleep(0)
    assert not sibling.done()
    gate.leave("k")
    assert await sibling is False


def test_cacheable_tokens_follow_openai_steps():
    assert cacheable_tokens(1023) == 0
    assert cacheable_tokens(1024) == 1024
    assert cacheable_tokens(1300) == 1280  # 1,024 + 2 x 128
    assert cacheable_tokens(5000) == 4992


def test_dry_run_estimate_counts_the_shared_prefix_of_siblings():
    est = CacheEstimator()
    doc = "a" * 8000  # 8,000 ASCII characters: 2,000 estimated tokens
    first = (Message("system", "S"), Message("user", doc + "item one"))
    second = (Message("system", "S"), Message("user", doc + "item two"))
    assert group_key(first) == group_key(second)
    assert est.cached_tokens(first, 2010) == 0  # the first call of a group warms the cache
    # shared: "\0system\0S\0user\0" (15 chars) + doc + "item " = 8,020 chars -> 2,005 tokens -> 1,920 cached
    assert est.cached_tokens(second, 2010) == 1920


async def test_dry_run_prices_with_the_estimated_cached_share(templates):
    from drscore.judge.offline.backend import OfflineBackend

    pool = JudgePool(Backend(), cache=None, limiter=RateLimiter(), prices=PRICES, dry_run_with=OfflineBackend(),
                     price_model="m1")
    doc = "b" * 8000
    a = await pool.ask("long", Verdict, {"doc": doc, "item": "1"})
    b = await pool.ask("long", Verdict, {"doc": doc, "item": "2"})
    assert a.cached_input_tokens == 0 and b.cached_input_tokens > 1024
    assert b.cost_usd < b.cost_uncached and pool.stats.planned_cached_input_tokens == b.cached_input_tokens


def test_ace_item_template_puts_the_report_before_the_item():
    text = dict(prompts.load("ace_item").render({"task_prompt": "T", "item": "ITEM-X", "report": "REPORT-Y"}))["user"]
    assert text.index("REPORT-Y") < text.index("ITEM-X")


def test_progress_shows_batches_and_their_request_counts():
    from rich.console import Console

    from drscore.engine.runtime.progress import Progress

    snap = {"items_done": 3, "batches": {"submitted": 2, "reattached": 1, "in_progress": 1, "requests_in_progress": 40,
                                         "completed": 2, "requests_answered": 75, "requests_queued": 5}}
    console = Console(width=200, record=True)
    console.print(Progress(lambda: snap, 10, enabled=False)._render())
    text = console.export_text()
    assert "batches submitted 2 (+1 re-attached)" in text and "in progress 1 (40 requests)" in text
    assert "completed 2 (75 answered)" in text and "queued for next batch 5" in text
