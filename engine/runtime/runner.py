"""Streams (report x method) work items through the judge pool with bounded memory.

Reports are read lazily; at most ``max_in_flight`` items exist at once, so memory stays
flat over thousands of reports. Each finished item becomes a :class:`ScoreRow`, written
to the run directory and yielded to the caller immediately.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from concurrent.futures import Executor
from typing import Any

import msgspec

from drscore.engine.runtime.aggregate import Aggregator
from drscore.engine.runtime.context import ItemContext
from drscore.engine.runtime.evidence import PageSource
from drscore.engine.runtime.judging import JudgeFailed
from drscore.engine.runtime.meter import Meter
from drscore.engine.runtime.method import Method, MethodResult
from drscore.engine.runtime.models import InputError, Report, ScoreRow, Task
from drscore.engine.runtime.pool import JudgePool
from drscore.engine.runtime.rundir import RunWriter


class Runner:
    def __init__(self, *, tasks: dict[str, Task], methods: list[Method], pool: JudgePool,
                 pages: PageSource | None = None, seed: int = 0, writer: RunWriter | None = None,
                 executor: Executor | None = None, max_in_flight: int = 64) -> None:
        self.tasks, self.methods, self.pool, self.pages = tasks, methods, pool, pages
        self.seed, self.writer, self.executor = seed, writer, executor
        self.max_in_flight = max(1, max_in_flight)
        self.aggregate = Aggregator()
        self.per_method: dict[str, Meter] = {m.name: Meter() for m in methods}
        self.status_counts: dict[str, dict[str, int]] = {m.name: {} for m in methods}
        self.items_done = 0
        self.items_failed = 0
        self.items_skipped = 0
        self.started = time.monotonic()
        self.finished: float | None = None

    def snapshot(self) -> dict[str, Any]:
        s = self.pool.stats
        return {"items_done": self.items_done, "items_failed": self.items_failed, "calls": s.calls,
                "cache_hits": s.cache_hits, "shared": s.shared, "retries": s.retries,
                "rate_limited": s.rate_limited, "cost_usd": s.cost_usd, **self.pool.limiter.snapshot()}

    async def run(self, reports: Iterable[Report]) -> AsyncIterator[ScoreRow]:
        """Score every report with every method; yields rows as they complete."""
        queue: asyncio.Queue[ScoreRow | None] = asyncio.Queue()
        slots = asyncio.Semaphore(self.max_in_flight)

        async def one(order: int, task: Task, report: Report, method: Method) -> None:
            try:
                row = await self._score(task, report, method)
                if self.writer is not None:
                    self.writer.score(row, order)
                await queue.put(row)
            finally:
                slots.release()

        async def produce() -> None:
            pending: set[asyncio.Task[None]] = set()
            order = 0
            try:
                for report in reports:
                    task = self.tasks[report.task_id]
                    for method in self.methods:
                        await slots.acquire()
                        t = asyncio.create_task(one(order, task, report, method))
                        order += 1
                        pending.add(t)
                        t.add_done_callback(pending.discard)
                        await asyncio.sleep(0)  # let reading never starve the workers
                if pending:
                    await asyncio.gather(*list(pending))
            finally:
                await queue.put(None)

        producer = asyncio.create_task(produce())
        try:
            while True:
                row = await queue.get()
                if row is None:
                    break
                yield row
            await producer  # re-raise a producer failure
        finally:
            if not producer.done():
                producer.cancel()
            self.finished = time.monotonic()

    async def _score(self, task: Task, report: Report, method: Method) -> ScoreRow:
        meter = Meter()
        ctx = ItemContext(pool=self.pool, task=task, report=report, method=method.name, options=method.opts,
                          seed=self.seed, pages=self.pages, executor=self.executor,
                          on_verdict=self.writer.verdict if self.writer else None, meter=meter)
        t0 = time.monotonic()
        try:
            result = await method.score(ctx)
        except JudgeFailed as e:
            result = MethodResult(score=None, status="failed", errors=[f"{e.reason}: {e.detail}".rstrip(": ")])
        except Exception as e:  # a method bug must not take the run down; it is reported
            result = MethodResult(score=None, status="failed", errors=[f"internal error: {type(e).__name__}: {e}"])
        row = ScoreRow(
            task_id=task.task_id, agent=report.agent, method=method.name, score=result.score,
            subscores=result.subscores, judged=result.judged, expected=result.expected,
            coverage=(result.judged / result.expected) if result.expected else None,
            status=result.status if result.score is not None or result.status != "ok" else "failed",
            errors=result.errors, judge=self.pool.judge_label, calls=meter.calls + meter.planned,
            cache_hits=meter.cache_hits, input_tokens=meter.input_tokens, output_tokens=meter.output_tokens,
            cost_usd=round(meter.cost_usd, 8), latency_s=round(time.monotonic() - t0, 4), details=result.details,
        )
        self.items_done += 1
        if row.status == "failed":
            self.items_failed += 1
        elif row.status == "skipped":
            self.items_skipped += 1
        counts = self.status_counts[method.name]
        key = row.status
        if row.status in ("failed", "skipped") and row.errors:
            key = f"{row.status}:{row.errors[0].split(':', 1)[0]}"
        counts[key] = counts.get(key, 0) + 1
        self.per_method[method.name].merge(meter)
        self.aggregate.add(row)
        return row

    def summary(self, input_errors: list[InputError], *, dry_run: bool = False) -> dict[str, Any]:
        s = self.pool.stats
        wall = (self.finished or time.monotonic()) - self.started
        totals = {
            "items": self.items_done, "items_failed": self.items_failed, "items_skipped": self.items_skipped,
            "inputs_skipped": len(input_errors), "calls": s.calls, "cache_hits": s.cache_hits,
            "shared_in_flight": s.shared, "retries": s.retries, "rate_limited_429": s.rate_limited,
            "reasks": s.reasks, "judge_failures": s.failures, "input_tokens": s.input_tokens,
            "output_tokens": s.output_tokens, "cost_usd": round(s.cost_usd, 6), "wall_time_s": round(wall, 3),
            "budget_exhausted": self.pool.budget_exhausted,
        }
        if dry_run:
            totals.update({"planned_calls": s.planned_calls, "planned_input_tokens": s.planned_input_tokens,
                           "planned_output_tokens": s.planned_output_tokens,
                           "planned_cost_usd": round(s.planned_cost_usd, 6)})
        return {
            "judge": self.pool.judge_label,
            "dry_run": dry_run,
            "per_agent_method": self.aggregate.table(),
            "per_method": {name: {**msgspec.structs.asdict(m), "cost_usd": round(m.cost_usd, 6),
                                   "statuses": self.status_counts[name]}
                           for name, m in self.per_method.items()},
            "totals": totals,
            "input_errors": [str(e) for e in input_errors[:200]],
        }
