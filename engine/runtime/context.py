"""The per-report context handed to methods (implements ``drscore.engine.runtime.method.ItemContext``)."""
from __future__ import annotations

import asyncio
import hashlib
import random
from concurrent.futures import Executor
from typing import Any, Callable, TypeVar

from drscore.engine.runtime.evidence import PageSource
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.calls.meter import Meter
from drscore.engine.runtime.models import Report, Task, VerdictRecord
from drscore.engine.runtime.calls.pool import JudgePool

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


def seeded_rng(*parts: Any) -> random.Random:
    """A generator seeded from ``parts`` (stable across processes, unlike ``hash``)."""
    digest = hashlib.sha256(repr(parts).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class ItemContext:
    def __init__(self, *, pool: JudgePool, task: Task, report: Report, method: str, options: dict[str, Any],
                 seed: int, pages: PageSource | None, executor: Executor | None,
                 on_verdict: Callable[[VerdictRecord], None] | None, meter: Meter, judge_sample: int = 0) -> None:
        self.pool, self.task, self.report, self.method = pool, task, report, method
        self.options, self.seed, self.pages = options, seed, pages
        self._executor, self._on_verdict, self.meter = executor, on_verdict, meter
        self.judge_sample = judge_sample  # --samples K: every call of this context is ask number judge_sample
        # The judge's model name, for sizing what it is shown (its context window).
        self.judge_model: str = str(getattr(pool.backend, "model", "") or "")

    async def ask(self, template: str, verdict: type[T], variables: dict[str, Any], *,
                  sample: int = 0, label: str = "") -> T:
        try:
            judged = await self.pool.ask(template, verdict, variables, sample=sample, judge_sample=self.judge_sample)
        except JudgeFailed as e:
            self.meter.failed += 1
            spent = e.spent
            if spent is not None:  # the failed call's paid attempts count in every total
                self.meter.add(spent)
            self._record(VerdictRecord(task_id=self.task.task_id, agent=self.report.agent, method=self.method,
                                       template=template, key="", cached=False, status="failed",
                                       error=f"{e.reason}: {e.detail}" if e.detail else e.reason, label=label,
                                       judge_sample=self.judge_sample,
                                       input_tokens=spent.input_tokens if spent is not None else 0,
                                       output_tokens=spent.output_tokens if spent is not None else 0,
                                       cost_usd=(spent.cost_usd if spent is not None else 0.0)
                                       if self.pool.priced else None,
                                       inputs=call_inputs(variables) if self._on_verdict else {}))
            raise
        self.meter.add(judged)
        self._record(VerdictRecord(
            task_id=self.task.task_id, agent=self.report.agent, method=self.method, template=template,
            key=judged.key, cached=judged.cached, status="ok", verdict=judged.value,
            input_tokens=judged.input_tokens, output_tokens=judged.output_tokens,
            cost_usd=judged.cost_usd if self.pool.priced else None,
            latency_s=round(judged.latency_s, 4), label=label, cached_input_tokens=judged.cached_input_tokens,
            cost_usd_uncached=round(judged.cost_uncached, 8) if self.pool.priced else None, batched=judged.batched,
            reasoning_tokens=judged.reasoning_tokens, judge_sample=self.judge_sample,
            inputs=call_inputs(variables) if self._on_verdict else {}))
        return judged.value

    def _record(self, rec: VerdictRecord) -> None:
        if self._on_verdict is not None:
            self._on_verdict(rec)

    def rng(self, *salt: Any) -> random.Random:
        return seeded_rng(self.seed, self.task.task_id, self.report.agent, self.method, *salt)

    async def offload(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
