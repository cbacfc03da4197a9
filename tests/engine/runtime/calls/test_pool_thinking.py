"""The pool with thinking judges: the cap sent, one larger-cap retry of a cut-off answer,
thoughts kept from the decoder, reasoning tokens and their cost, the budget's worst case,
the dry run's estimate, and unchanged cache keys for models that do not think."""
from __future__ import annotations

from typing import Annotated

import msgspec
import pytest

from drscore import prompts
from drscore.engine.runtime.calls.budget import input_token_bound
from drscore.engine.runtime.calls.cache import JudgeCache, request_key
from drscore.engine.runtime.calls.judging import ChatRequest, ChatResponse, JudgeFailed
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import Price, PriceTable
from drscore.engine.runtime.calls.thinking import ThinkingPolicy


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    score: Annotated[int, msgspec.Meta(ge=0, le=4)]
    reason: str


TEMPLATE = "---\nmax_tokens: 50\nexpected_output_tokens: 10\n---\n## system\nJudge.\n## user\nRate: ${text}"
GOOD = '{"score": 3, "reason": "ok"}'


@pytest.fixture(autouse=True)
def templates(monkeypatch):
    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse(name, TEMPLATE))


class Scripted:
    """Answers with the given responses in order (the last one repeats); records requests."""

    name = "http"
    cacheable = True

    def __init__(self, model: str, responses: list[ChatResponse]) -> None:
        self.model, self.responses = model, responses
        self.requests: list[ChatRequest] = []

    def identity(self):
        return {"base_url": "http://judge.test/v1", "model": self.model}

    async def complete(self, request):
        self.requests.append(request)
        resp = self.responses[min(len(self.requests) - 1, len(self.responses) - 1)]
        return msgspec.structs.replace(resp), None

    async def close(self):
        pass


def _resp(text: str = GOOD, *, out: int = 20, reasoning: int = 0, finish: str = "stop") -> ChatResponse:
    return ChatResponse(text=text, input_tokens=100, output_tokens=out, finish_reason=finish,
                        reasoning_tokens=reasoning)


async def _pool(tmp_path, backend, **kw):
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    prices = PriceTable({backend.model: Price(1.0, 2.0)})
    pool = JudgePool(backend, cache=cache, limiter=RateLimiter(concurrency=4), prices=prices,
                     backoff_base_s=0.001, preflight=False, **kw)
    return pool, cache


async def test_a_thinking_model_is_sent_answer_cap_plus_allowance_but_keyed_on_the_template_cap(tmp_path):
    backend = Scripted("o3", [_resp()])
    pool, cache = await _pool(tmp_path, backend)
    req, components = pool.build("alpha", Verdict, {"text": "r1"})
    judged = await pool.ask("alpha", Verdict, {"text": "r1"})
    await cache.close()
    assert req.max_tokens == 50 + 25_000 and backend.requests[0].max_tokens == 25_050
    assert components["max_tokens"] == 50
    assert judged.key == request_key(components)


async def test_keys_of_a_model_that_does_not_think_are_unchanged(tmp_path):
    backend = Scripted("gpt-4o", [_resp()])
    pool, cache = await _pool(tmp_path, backend)
    req, components = pool.build("alpha", Verdict, {"text": "r1"})
    await cache.close()
    assert req.max_tokens == 50
    # the key components exactly as they were before thinking models were handled
    assert set(components) == {"backend", "base_url", "model", "messages", "temperature", "max_tokens",
                               "schema_name", "schema", "json_mode", "template", "template_hash", "sample"}


async def test_a_cut_off_answer_is_retried_once_with_a_larger_cap_and_the_model_learned(tmp_path):
    # An unknown model answers nothing within 50 tokens: it thinks.
    backend = Scripted("acme-judge-7b", [_resp("", out=50, finish="length"), _resp(out=720, reasoning=700)])
    pool, cache = await _pool(tmp_path, backend)
    judged = await pool.ask("alpha", Verdict, {"text": "r1"})
    second = await pool.ask("alpha", Verdict, {"text": "r2"})
    await cache.close()
    assert judged.value == Verdict(3, "ok") and second.value == Verdict(3, "ok")
    # 50, then 50 + the open-model allowance of 8,192; the next call starts there
    assert [r.max_tokens for r in backend.requests] == [50, 8242, 8242]
    s = pool.stats
    assert (s.truncated, s.truncation_retries, s.thinking_learned) == (1, 1, True)
    # both calls of the first ask were billed: 200 input at $1/M, 50 + 720 output at $2/M
    assert judged.output_tokens == 770 and judged.reasoning_tokens == 700
    assert judged.cost_usd == pytest.approx((200 * 1 + 770 * 2) / 1e6)


async def test_cut_off_twice_fails_as_truncated_after_exactly_two_calls(tmp_path):
    backend = Scripted("gpt-4o", [_resp('{"score": 3, "rea', out=50, finish="length")])
    pool, cache = await _pool(tmp_path, backend)
    with pytest.raises(JudgeFailed) as err:
        await pool.ask("alpha", Verdict, {"text": "r1"})
    await cache.close()
    assert err.value.reason == "truncated" and "after one retry with a larger cap" in err.value.detail
    assert [r.max_tokens for r in backend.requests] == [50, 8242]
    assert pool.stats.truncated == 2 and pool.stats.failures == 1


async def test_no_larger_cap_means_no_retry_at_the_same_cap(tmp_path):
    backend = Scripted("gemini-2.0-flash", [_resp("", out=8192, finish="length")])
    pool, cache = await _pool(tmp_path, backend, thinking=ThinkingPolicy("gemini-2.0-flash", max_output=8192,
                                                                         retry_cut_off=True))
    with pytest.raises(JudgeFailed) as err:
        await pool.ask("alpha", Verdict, {"text": "r1"})
    await cache.close()
    assert err.value.reason == "truncated" and "allows no more than 8192" in err.value.detail
    assert [r.max_tokens for r in backend.requests] == [8192]


async def test_after_a_cut_off_later_calls_start_at_the_raised_cap(tmp_path):
    # A model that does not think but needs more room than its template's answer cap: only
    # the first call pays a cut-off attempt; the run learned the room (before: every call did).
    backend = Scripted("gpt-4o", [_resp('{"score": 3, "rea', out=50, finish="length"), _resp()])
    pool, cache = await _pool(tmp_path, backend)
    for i in range(3):
        await pool.ask("alpha", Verdict, {"text": f"r{i}"})
    await cache.close()
    raised = max(2 * 50, 50 + 8192)  # at least double, and one open-model allowance more
    assert [r.max_tokens for r in backend.requests] == [50, raised, raised, raised]
    assert pool.stats.truncated == 1 and pool.thinking.learned_room == raised - 50


async def test_an_explicit_cap_fails_a_cut_off_answer_at_once_unless_asked(tmp_path):
    cut = _resp("", out=100, reasoning=100, finish="length")
    backend = Scripted("o3", [cut, _resp()])
    pool, cache = await _pool(tmp_path, backend, thinking=ThinkingPolicy("o3", max_output=100))
    with pytest.raises(JudgeFailed) as err:
        await pool.ask("alpha", Verdict, {"text": "r1"})
    assert err.value.reason == "truncated" and "--retry-cut-off" in err.value.detail
    assert [r.max_tokens for r in backend.requests] == [100]  # no second paid attempt
    assert pool.thinking.cap(50) == 100  # the explicit cap is kept, nothing learned
    await cache.close()
    backend = Scripted("o3", [cut, _resp()])
    (tmp_path / "asked").mkdir()
    pool, cache = await _pool(tmp_path / "asked", backend,
                              thinking=ThinkingPolicy("o3", max_output=100, retry_cut_off=True))
    assert (await pool.ask("alpha", Verdict, {"text": "r1"})).value == Verdict(3, "ok")
    await cache.close()
    assert [r.max_tokens for r in backend.requests] == [100, 100 + 25_000]  # o3's allowance more


async def test_a_budget_stop_says_how_much_went_to_cut_off_answers(tmp_path):
    backend = Scripted("o3", [_resp("", out=100, reasoning=100, finish="length")])
    # each call: 100 input at $1/M + 100 output at $2/M = $0.0003; room for three, not four
    pool, cache = await _pool(tmp_path, backend, thinking=ThinkingPolicy("o3", max_output=100),
                              max_cost_usd=0.0011)
    reasons = []
    for i in range(5):
        try:
            await pool.ask("alpha", Verdict, {"text": f"r{i}"})
        except JudgeFailed as e:
            reasons.append(e.reason)
    await cache.close()
    assert reasons[:3] == ["truncated"] * 3 and reasons[3:] == ["budget"] * 2
    assert pool.stopped is not None and pool.stopped.reason == "budget"
    assert "Of this invocation's spend, $0.0009 went to 3 answers cut off at their output cap (3 of 3 paid answers)" \
        in pool.stopped.message


async def test_thoughts_never_reach_the_decoder_or_the_cache(tmp_path):
    answer = '<think>maybe {"score": 1, "reason": "x"}?</think>\n' + GOOD
    backend = Scripted("deepseek-r1", [_resp(answer, out=40)])
    pool, cache = await _pool(tmp_path, backend)
    judged = await pool.ask("alpha", Verdict, {"text": "r1"})
    stored = await cache.get(judged.key)
    await cache.close()
    assert judged.value == Verdict(3, "ok") and judged.text == GOOD
    assert stored == GOOD.encode()


async def test_reasoning_is_counted_inside_output_and_billed_once(tmp_path):
    backend = Scripted("o3", [_resp(out=720, reasoning=700)])
    pool, cache = await _pool(tmp_path, backend)
    judged = await pool.ask("alpha", Verdict, {"text": "r1"})
    await cache.close()
    assert judged.reasoning_tokens == 700 and pool.stats.reasoning_tokens == 700
    assert judged.cost_usd == pytest.approx((100 * 1 + 720 * 2) / 1e6)  # not 720 + 700


async def test_the_budget_reserves_the_cap_actually_sent(tmp_path):
    # A ceiling that covers the input bound and the template's 50 output tokens, but not
    # the 25,050 an o3 call is sent: the o3 call is refused, the same call to gpt-4o is not.
    for model, expected in (("gpt-4o", "ok"), ("o3", "budget")):
        backend = Scripted(model, [_resp()])
        pool, cache = await _pool(tmp_path / model, backend)
        built, _ = pool.build("alpha", Verdict, {"text": "r1"})
        cap = (input_token_bound(built) * 1 + 50 * 2 + 1000 * 2) / 1e6
        pool.budget = type(pool.budget)(cap)
        try:
            await pool.ask("alpha", Verdict, {"text": "r1"})
            outcome = "ok"
        except JudgeFailed as e:
            outcome = e.reason
        await cache.close()
        assert outcome == expected, model


async def test_dry_run_estimates_reasoning_from_the_family_prior(tmp_path):
    backend = Scripted("o3", [_resp()])
    dry = Scripted("offline", [_resp()])
    pool, cache = await _pool(tmp_path, backend, dry_run_with=dry)
    await pool.ask("alpha", Verdict, {"text": "r1"})
    await pool.ask("alpha", Verdict, {"text": "r2"})
    await cache.close()
    s = pool.stats
    assert s.planned_reasoning_tokens == 2 * 2_000  # OpenAI's documented prior per call
    assert s.planned_output_tokens == 2 * (10 + 2_000)  # the template's expected answer + reasoning
    assert backend.requests == []
