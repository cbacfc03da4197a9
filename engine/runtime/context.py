"""The per-report context handed to methods (implements ``drscore.engine.runtime.method.ItemContext``)."""
from __future__ import annotations

import asyncio
import hashlib
import random
from concurrent.futures import Executor
from typing import Any, Callable, TypeVar

from drscore import prompts
from drscore.engine.runtime.evidence import PageSource
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.calls.ledger import CALLER, Usage
from drscore.engine.runtime.calls.meter import Meter
from drscore.engine.runtime.models import CallAttempt, Report, Task, VerdictRecord
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.tokens import split_estimate
from drscore.engine.runtime.workload import CallTimes, ItemWork

T = TypeVar("T")

INPUT_KEEP_CHARS = 1500  # a variable up to this long is recorded whole
INPUT_HEAD_CHARS = 400  # of a longer one (up to INPUT_MAX_CHARS) the start is kept
INPUT_MAX_CHARS = 6000  # beyond this (a page, a report) only the length is recorded


def call_inputs(variables: dict[str, Any]) -> dict[str, str]:
    """The variables of a judge call as recorded in ``verdicts.jsonl``: short text whole
    (a statement, a URL, a passage), longer text clipped, page- or report-sized text as
    its length only, so the record says what was judged without copying the report."""
    out: dict[str, str] = {}
    for name, value in variables.items():
        text = value if isinstance(value, str) else str(value)
        if len(text) <= INPUT_KEEP_CHARS:
            out[name] = text
        elif len(text) <= INPUT_MAX_CHARS:
            out[name] = text[:INPUT_HEAD_CHARS] + f" … [{len(text):,} chars]"
        else:
            out[name] = f"[{len(text):,} chars]"
    return out


REASONING_KEEP_CHARS = 20_000  # of a thought recorded in verdicts.jsonl (its length is kept too)


def _attempts(tries: list[tuple[str, float, str]]) -> list[CallAttempt]:
    return [CallAttempt(outcome=o, seconds=round(s, 4), detail=d) for o, s, d in tries]


def _span_seconds(spans: list[tuple[float, float]]) -> float:
    return round(sum(max(0.0, b - a) for a, b in spans), 4)


def _reasoning(text: str) -> str:
    if len(text) <= REASONING_KEEP_CHARS:
        return text
    return text[:REASONING_KEEP_CHARS] + f" … [{len(text):,} chars]"


def seeded_rng(*parts: Any) -> random.Random:
    """A generator seeded from ``parts`` (stable across processes, unlike ``hash``)."""
    digest = hashlib.sha256(repr(parts).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class ItemContext:
    def __init__(self, *, pool: JudgePool, task: Task, report: Report, method: str, options: dict[str, Any],
                 seed: int, pages: PageSource | None, executor: Executor | None,
                 on_verdict: Callable[[VerdictRecord], None] | None, meter: Meter, judge_sample: int = 0,
                 work: ItemWork | None = None, call_times: CallTimes | None = None) -> None:
        self.pool, self.task, self.report, self.method = pool, task, report, method
        self.options, self.seed, self.pages = options, seed, pages
        self._executor, self._on_verdict, self.meter = executor, on_verdict, meter
        # the progress display's counts: this item's asks made and expected, call times
        self._work, self._call_times = work, call_times
        self.judge_sample = judge_sample  # --samples K: every call of this context is ask number judge_sample
        # The judge's model name, for sizing what it is shown (its context window).
        self.judge_model: str = str(getattr(pool.backend, "model", "") or "")

    async def ask(self, template: str, verdict: type[T], variables: dict[str, Any], *,
                  sample: int = 0, label: str = "") -> T:
        # Who is asking, for the run ledger's lines (the pool's signature stays the same).
        caller = CALLER.set((self.task.task_id, self.report.agent, self.method))
        try:
            judged = await self.pool.ask(template, verdict, variables, sample=sample, judge_sample=self.judge_sample)
        except JudgeFailed as e:
            self.meter.failed += 1
            paid = e.paid if isinstance(e.paid, Usage) else Usage()
            self.meter.add_paid(paid)  # a failed call's billed attempts count in every total
            priced = self.pool.priced
            if self._work is not None:
                self._work.asked(template, None)
            self._record(VerdictRecord(task_id=self.task.task_id, agent=self.report.agent, method=self.method,
                                       template=template, key="", cached=False, status="failed",
                                       error=f"{e.reason}: {e.detail}" if e.detail else e.reason, label=label,
                                       input_tokens=paid.input_tokens, output_tokens=paid.output_tokens,
                                       cached_input_tokens=paid.cached_input_tokens,
                                       reasoning_tokens=paid.reasoning_tokens,
                                       cost_usd=round(paid.cost_usd, 8) if priced else None,
                                       cost_usd_uncached=round(paid.cost_usd_uncached, 8) if priced else None,
                                       judge_sample=self.judge_sample,
                                       inputs=call_inputs(variables) if self._on_verdict else {},
                                       judge_s=_span_seconds([(0.0, s) for _, s, _ in e.attempts]),
                                       attempts=_attempts(e.attempts)))
            raise
        finally:
            CALLER.reset(caller)
        self.meter.add(judged)
        earlier = judged.earlier or Usage()
        if self._work is not None:
            self._work.asked(template, judged)
        if self._call_times is not None:
            self._call_times.add(judged)
        self._record(VerdictRecord(
            task_id=self.task.task_id, agent=self.report.agent, method=self.method, template=template,
            key=judged.key, cached=judged.cached, status="ok", verdict=judged.value,
            input_tokens=judged.input_tokens + earlier.input_tokens,
            output_tokens=judged.output_tokens + earlier.output_tokens,
            cost_usd=round(judged.cost_usd + earlier.cost_usd, 10) if self.pool.priced else None,
            latency_s=round(judged.latency_s, 4), label=label,
            cached_input_tokens=judged.cached_input_tokens + earlier.cached_input_tokens,
            cost_usd_uncached=round(judged.cost_uncached, 8) if self.pool.priced else None, batched=judged.batched,
            reasoning_tokens=judged.reasoning_tokens + earlier.reasoning_tokens, judge_sample=self.judge_sample,
            paid_earlier=judged.earlier is not None, reused=judged.reused,
            inputs=call_inputs(variables) if self._on_verdict else {},
            judge_s=_span_seconds(judged.judge_spans), quota_wait_s=_span_seconds(judged.wait_spans),
            shared_wait_s=_span_seconds(judged.shared_spans),
            attempts=_attempts(judged.attempts) if len(judged.attempts) > 1 else [],
            reasoning=_reasoning(judged.thought)))
        return judged.value

    def expect_calls(self, n: int, template: str, text: str = "") -> None:
        """This item will make ``n`` more asks of ``template``, each carrying about ``text``
        (see :func:`drscore.engine.runtime.method.expect_calls`)."""
        if self._work is not None:
            self._work.expect(n, template, split_estimate(text) if text else None)

    def output_cap(self, template: str) -> int:
        """The output cap a call of ``template`` is sent: its answer cap plus the judge's
        thinking allowance (:class:`drscore.engine.runtime.calls.thinking.ThinkingPolicy`),
        or ``--max-output-tokens``. Room the context window must leave besides the prompt."""
        return self.pool.thinking.cap(prompts.load(template).max_tokens)

    def _record(self, rec: VerdictRecord) -> None:
        if self._on_verdict is not None:
            self._on_verdict(rec)

    def rng(self, *salt: Any) -> random.Random:
        return seeded_rng(self.seed, self.task.task_id, self.report.agent, self.method, *salt)

    async def offload(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
