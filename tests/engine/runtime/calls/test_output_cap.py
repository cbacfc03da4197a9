"""The output cap a reserving endpoint is sent, fitted to each template's answers: the rule
worked by hand, and the pool sending it, asking a cut-off answer again at the template's cap,
and leaving every other endpoint, a thinking model and an explicit cap alone."""
from __future__ import annotations

from typing import Annotated

import msgspec
import pytest

from drscore import prompts
from drscore.engine.runtime.calls.cache import JudgeCache
from drscore.engine.runtime.calls.judging import ChatRequest, ChatResponse
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.output_cap import FittedCaps, ranks_correlate
from drscore.engine.runtime.calls.pool import JudgePool, PoolStats
from drscore.engine.runtime.calls.pricing import Price, PriceTable
from drscore.engine.runtime.calls.thinking import ThinkingPolicy


def test_the_cap_is_the_templates_until_twenty_answers_then_one_and_a_half_times_the_longest_plus_64():
    caps = FittedCaps()
    for i in range(19):
        caps.observe("quality", "h", 4_000, 60 + i % 5 * 10)  # 60..100, whatever the prompt
    assert caps.cap("quality", "h", 1_000, 5_000) == 1_000
    caps.observe("quality", "h", 4_000, 90)
    assert caps.cap("quality", "h", 1_000, 5_000) == 214  # 1.5 x 100 + 64
    assert caps.cap("quality", "h", 200, 5_000) == 200  # never above the template's own
    assert caps.cap("quality", "edited", 1_000, 5_000) == 1_000  # another text of the template: not fitted
    assert caps.cap("other", "h", 500, 5_000) == 500  # a template with no answers yet


def test_answers_that_grow_with_the_prompt_scale_the_cap_to_each_prompt():
    caps = FittedCaps()
    for i in range(1, 21):
        caps.observe("race_clean", "h", 1_000 * i, 80 * i)  # the ratio is 0.08 throughout
    assert caps.templates["race_clean"].grows
    assert caps.cap("race_clean", "h", 16_000, 5_000) == 664  # 1.5 x 0.08 x 5,000 + 64
    assert caps.cap("race_clean", "h", 16_000, 50_000) == 6_064  # longer than any answer seen: it scales


def test_a_cut_off_answer_grows_the_cap_and_cuts_past_two_percent_give_the_template_its_own_cap_back():
    caps = FittedCaps()
    for _ in range(20):
        caps.observe("quality", "h", 4_000, 100)
    caps.cut_off("quality", "h", 4_000, 214)  # at least 214 long
    assert caps.cap("quality", "h", 1_000, 4_000) == 385  # 1.5 x 214 + 64
    assert not caps.templates["quality"].given_up  # one cut: never given up
    caps.cut_off("quality", "h", 4_000, 385)  # two of twenty answers: over 2%
    assert caps.templates["quality"].given_up and caps.cap("quality", "h", 1_000, 4_000) == 1_000


def test_a_template_whose_answers_carried_reasoning_is_never_fitted_even_in_a_later_run():
    # kept per model: a model that thought once is a thinker, before this run's answers show it
    caps = FittedCaps()
    for i in range(20):
        caps.observe("quality", "h", 4_000, 100, reasoning_tokens=60 if i == 7 else 0)
    assert caps.cap("quality", "h", 1_000, 4_000) == 1_000
    later = FittedCaps()
    later.seed(caps.kept())
    assert later.cap("quality", "h", 1_000, 4_000) == 1_000


def test_rank_correlation_by_hand():
    assert ranks_correlate([(1, 10), (2, 20), (3, 30)]) == pytest.approx(1.0)
    assert ranks_correlate([(1, 30), (2, 20), (3, 10)]) == pytest.approx(-1.0)
    # ranks (0,1,2,3) against (1,0,3,2): 1 - 6 x 4 / (4 x 15) = 0.6
    assert ranks_correlate([(1, 20), (2, 10), (3, 40), (4, 30)]) == pytest.approx(0.6)
    assert ranks_correlate([(5, 1), (5, 2), (5, 3)]) == 0.0  # one prompt length: nothing to correlate


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    score: Annotated[int, msgspec.Meta(ge=0, le=4)]


TEMPLATE = "---\nmax_tokens: 500\nexpected_output_tokens: 40\n---\n## system\nJudge.\n## user\nRate: ${text}"


@pytest.fixture(autouse=True)
def templates(monkeypatch):
    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse(name, TEMPLATE))


class Answers:
    """Answers 20 output tokens, or, for a prompt holding "long", 300 (cut off at a smaller
    cap, as a real server stops there); records every request."""

    name = "http"
    cacheable = True

    def __init__(self, model: str = "gpt-4.1") -> None:
        self.model = model
        self.requests: list[ChatRequest] = []

    def identity(self):
        return {"base_url": "http://judge.test/v1", "model": self.model}

    async def complete(self, request: ChatRequest):
        self.requests.append(request)
        want = 300 if "long" in request.messages[-1].content else 20
        out = min(want, request.max_tokens)
        finish = "length" if out < want else "stop"
        return ChatResponse(text='{"score": 2}' if finish == "stop" else '{"sco', input_tokens=1_000,
                            output_tokens=out, finish_reason=finish), None

    async def close(self):
        pass


async def _pool(tmp_path, backend, tpm: float = 10_000_000, **kw) -> tuple[JudgePool, JudgeCache]:
    cache = await JudgeCache.open(tmp_path / "judge.sqlite")
    prices = PriceTable({backend.model: Price(1.0, 2.0)})
    pool = JudgePool(backend, cache=cache, limiter=RateLimiter(tpm=tpm, concurrency=1), prices=prices,
                     backoff_base_s=0.001, preflight=False, **kw)
    return pool, cache


async def _twenty_then(pool: JudgePool, *texts: str) -> None:
    for i in range(20):
        await pool.ask("alpha", Verdict, {"text": f"report {i}"})
    for text in texts:
        await pool.ask("alpha", Verdict, {"text": text})


async def test_a_reserving_endpoint_is_sent_the_fitted_cap_and_a_cut_answer_is_asked_again_at_the_templates(
        tmp_path):
    backend = Answers()
    pool, cache = await _pool(tmp_path, backend, tpm_charge="reserved")
    await _twenty_then(pool, "report 20", "a long report")
    await cache.close()
    caps = [r.max_tokens for r in backend.requests]
    # twenty at the template's 500, then 1.5 x 20 + 64 = 94; the long answer cut at 94 goes again at 500
    assert caps == [500] * 20 + [94, 94, 500]
    assert backend.requests[-1].messages == backend.requests[-2].messages
    s = pool.stats
    assert s.fitted_cap_cuts == 1 and s.truncated == 0 and s.calls == 23
    assert s.fitted_cap_cut_cost_usd == pytest.approx((1_000 * 1.0 + 94 * 2.0) / 1e6)
    assert pool.thinking.learned_room == 0  # a fitted cap's cut teaches the thinking policy nothing
    assert pool.ledger.totals()["run"]["calls"] == 23  # the cut-off attempt was paid and is on the bill
    summary = pool.output_caps.summary() if pool.output_caps is not None else {}
    # 406 less for each of the two calls sent at 94; the next cap covers the 300-token answer
    assert summary["alpha"] == {"answers": 22, "earlier": 0, "largest": 300, "grows_with_prompt": False, "cut": 1,
                                "given_up": False, "reserved_less": 812}
    tpl_hash = prompts.load("alpha").hash
    assert pool.output_caps is not None and pool.output_caps.cap("alpha", tpl_hash, 500, 1_000) == 500  # 1.5 x 300 + 64


class BatchAnswers(Answers):
    batched = True  # answered through the Batch API


@pytest.mark.parametrize("setting", ["counted", "fixed", "explicit", "thinking", "batch", "no token quota"])
async def test_the_cap_stays_the_templates_where_nothing_reserves_it_or_the_user_or_a_thinker_sets_it(
        tmp_path, setting):
    backend = (BatchAnswers if setting == "batch" else Answers)("o3" if setting == "thinking" else "gpt-4.1")
    kw: dict = {"tpm_charge": "counted" if setting == "counted" else "reserved"}
    if setting == "no token quota":  # the reservation holds back nothing: a cut would cost for no gain
        kw["tpm"] = 0
    if setting == "fixed":
        kw["fit_output_cap"] = False
    if setting == "explicit":
        kw["thinking"] = ThinkingPolicy("gpt-4.1", max_output=500)
    pool, cache = await _pool(tmp_path, backend, **kw)
    await _twenty_then(pool, "report 20")
    await cache.close()
    expected = 500 + (pool.thinking.cap(500) - 500)  # a thinker's allowance on top of the template's
    assert {r.max_tokens for r in backend.requests} == {expected}


async def test_the_next_run_fits_from_its_first_call_and_an_edited_template_starts_over(tmp_path, monkeypatch):
    backend = Answers()
    pool, cache = await _pool(tmp_path, backend, tpm_charge="reserved")
    await _twenty_then(pool)
    pool.keep_token_counting()  # as the runner does before the cache closes
    await cache.close()

    again = Answers()
    pool, cache = await _pool(tmp_path, again, tpm_charge="reserved")
    await pool.load_token_counting()
    await pool.ask("alpha", Verdict, {"text": "new report"})
    assert [r.max_tokens for r in again.requests] == [94]  # 1.5 x 20 + 64 from the first call
    assert pool.output_caps is not None
    assert pool.output_caps.summary()["alpha"]["earlier"] == 20
    assert pool.output_caps.summary()["alpha"]["answers"] == 21
    await cache.close()

    edited = TEMPLATE.replace("Judge.", "Judge carefully.")
    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse(name, edited))
    third = Answers()
    pool, cache = await _pool(tmp_path, third, tpm_charge="reserved")
    await pool.load_token_counting()
    await pool.ask("alpha", Verdict, {"text": "new report"})
    await cache.close()
    assert [r.max_tokens for r in third.requests] == [500]  # the answers were to another text


async def test_a_dry_run_plans_a_reserving_quotas_charge_with_the_kept_caps(tmp_path):
    # The planned charge is the prompt's planned tokens plus the cap each call would be sent:
    # over a minute of (those tokens + 300) with the template's 500, not with the fitted 94.
    backend = Answers()
    pool, cache = await _pool(tmp_path, backend, tpm_charge="reserved")
    await _twenty_then(pool)
    pool.keep_token_counting()
    await cache.close()

    async def plan(tpm: float, fitted: bool) -> PoolStats:
        cache = await JudgeCache.open(tmp_path / "judge.sqlite")
        pool = JudgePool(Answers(), cache=cache, limiter=RateLimiter(tpm=tpm, concurrency=1),
                         prices=PriceTable({"gpt-4.1": Price(1.0, 2.0)}), preflight=False, tpm_charge="reserved",
                         dry_run_with=Answers(), fit_output_cap=fitted)
        await pool.load_token_counting()
        await pool.ask("alpha", Verdict, {"text": "report 20"})
        await cache.close()
        return pool.stats

    prompt = (await plan(1e9, True)).planned_input_tokens
    assert prompt > 0
    over = [(await plan(prompt + 300, fitted)).planned_over_quota for fitted in (True, False)]
    assert over == [0, 1]
