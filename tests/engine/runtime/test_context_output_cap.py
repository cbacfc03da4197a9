"""The output cap a method's call is sent, as the per-report context reports it: the
template's answer cap plus the judge's thinking allowance (or --max-output-tokens), the
room a page must leave in the judge's context window besides the prompt."""
from __future__ import annotations

from drscore import prompts
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.meter import Meter
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.engine.runtime.calls.thinking import ThinkingPolicy
from drscore.engine.runtime.context import ItemContext
from drscore.engine.runtime.models import Report, Task


class Backend:
    name, cacheable = "http", True

    def __init__(self, model: str) -> None:
        self.model = model

    def identity(self) -> dict:
        return {"base_url": "http://judge.test/v1", "model": self.model}

    async def complete(self, request):  # pragma: no cover - no call is made
        raise AssertionError("not called")


def _ctx(model: str, **policy) -> ItemContext:
    pool = JudgePool(Backend(model), cache=None, limiter=RateLimiter(concurrency=1), prices=PriceTable(),
                     thinking=ThinkingPolicy(model, **policy))
    return ItemContext(pool=pool, task=Task(task_id="t", prompt="p"), report=Report(task_id="t", agent="a", report="r"),
                       method="fact", options={}, seed=0, pages=None, executor=None, on_verdict=None, meter=Meter())


def test_the_cap_is_the_answer_cap_plus_the_thinking_allowance():
    answer = prompts.load("fact_support").max_tokens
    assert answer == 1_500
    assert _ctx("gpt-4o").output_cap("fact_support") == 1_500  # not a thinking model
    assert _ctx("qwen3-32b").output_cap("fact_support") == 1_500 + 8_192  # open family
    # --protocol drb-fact: Gemini with the authors' 16,000-token thinking budget
    assert _ctx("gemini-2.5-flash", thinking_budget=16_000).output_cap("fact_support") == 1_500 + 16_000
    assert _ctx("gemini-2.5-flash", max_output=3_000).output_cap("fact_support") == 3_000
