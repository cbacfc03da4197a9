"""Streams (report x method) work items through the judge pool with bounded memory.

Reports are read lazily; at most ``max_in_flight`` items exist at once, so memory stays
flat over thousands of reports. Each finished item becomes a :class:`ScoreRow`, written
to the run directory and yielded to the caller immediately.

When the pool stops (budget, a long rate-limit reset, a broken endpoint; see
:attr:`JudgePool.stopped`), no further item is started: every remaining item still gets
its row, status ``failed`` with the stop's reason, so the run directory lists what was
not done and why, and a re-run resumes from the cache. A stop that cost no item anything
(the breaker tripped on the run's last calls, every item already had its own row) is no
stop: the summary records it under ``totals.stop_after_all_items`` and the run is
``finished``, with exit 3 when some items failed.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from concurrent.futures import Executor
from typing import Any, Callable, Sequence

import msgspec

from drscore.engine.runtime.aggregate import Aggregator
from drscore.engine.runtime.context import ItemContext
from drscore.engine.runtime.evidence import PageSource
from drscore.engine.runtime.calls.judging import ENDPOINT_FAULTS, OTHER_FAULTS, JudgeFailed
from drscore.engine.runtime.calls.meter import Meter
from drscore.engine.runtime.calls.planned_input import overall_error
from drscore.engine.runtime.method import Method, MethodResult
from drscore.engine.runtime.models import InputError, Report, ScoreRow, Task
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import known_cost
from drscore.engine.runtime.calls.redact import redact
from drscore.engine.runtime.rundir import RunWriter
from drscore.engine.runtime.calls.samples import combine
from drscore.engine.runtime.workload import CallTimes, MethodWork


_KNOWN_REASONS = frozenset({*ENDPOINT_FAULTS, *OTHER_FAULTS, "budget", "undecodable", "fatal", "transient",
                            "error", "internal error"})


def failure_reason(errors: list[str]) -> str:
    """The reason word of a failed item: the first known reason among the ``: ``-separated
    parts of its first error (methods prefix their own context, ``pair 1-2: timeout: ...``),
    else that error's first part."""
    if not errors:
        return "unknown"
    parts = [p.strip() for p in errors[0].split(":")]
    return next((p for p in parts if p in _KNOWN_REASONS), parts[0])


class Runner:
    def __init__(self, *, tasks: Mapping[str, Task], methods: list[Method], pool: JudgePool,
                 pages: PageSource | None = None, seed: int = 0, writer: RunWriter | None = None,
                 executor: Executor | None = None, max_in_flight: int = 64, samples: int = 1) -> None:
        self.tasks, self.methods, self.pool, self.pages = tasks, methods, pool, pages
        self.seed, self.writer, self.executor = seed, writer, executor
        self.max_in_flight = max(1, max_in_flight)
        self.samples = max(1, samples)  # --samples K: each item scored K times (engine.runtime.samples)
        self.aggregate = Aggregator()
        self.per_method: dict[str, Meter] = {m.name: Meter() for m in methods}
        # asks made and expected per method, time per network call: the progress display's ETA
        # (a quota of input tokens, Gemini's, is spent by the prompts alone)
        self.work: dict[str, MethodWork] = {m.name: MethodWork(quota_counts_output=not pool.charges_input)
                                            for m in methods}
        self.call_times = CallTimes()
        self.status_counts: dict[str, dict[str, int]] = {m.name: {} for m in methods}
        self.items_done = 0
        self.items_failed = 0
        self.items_skipped = 0
        self.items_not_run = 0  # rows written for items never started because the pool stopped
        self.failure_reasons: dict[str, int] = {}
        self.started = time.monotonic()
        self.finished: float | None = None

    def snapshot(self) -> dict[str, Any]:
        s = self.pool.stats
        for w in self.work.values():  # an endpoint may show its token quota to be of input alone mid-run
            w.quota_counts_output = not self.pool.charges_input
        snap = {"items_done": self.items_done, "items_failed": self.items_failed, "calls": s.calls,
                "cache_hits": s.cache_hits, "shared": s.shared, "retries": s.retries,
                "rate_limited": s.rate_limited, "cost_usd": self.pool.ledger.run_cost_usd(),  # the run's, as --max-cost
                **self.pool.limiter.snapshot(),
                # for the progress display: per-method counts and what the quota allows
                "done_by_method": {m: sum(c.values()) for m, c in list(self.status_counts.items())},
                "rpm": self.pool.limiter.rpm, "tpm": self.pool.limiter.tpm,
                "input_tokens": s.input_tokens, "output_tokens": s.output_tokens,
                # what the token quota was spent on: a quota of input tokens not by the answers
                "quota_tokens": s.input_tokens + (0 if self.pool.charges_input else s.output_tokens),
                # asks made and said per method and template: the calls left and the ETA
                "work": {m: w.snapshot() for m, w in self.work.items()},
                "token_weights": self.pool.tokens.weights,  # the server's counting, as learned
                "call_latency_s": self.call_times.mean}
        batches = getattr(self.pool.backend, "batch_snapshot", None)
        if batches is not None:  # a batching backend: batches submitted / in progress / done
            snap["batches"] = batches()
        return snap

    async def run(self, reports: Iterable[Report]) -> AsyncIterator[ScoreRow]:
        """Score every report with every method; yields rows as they complete."""
        queue: asyncio.Queue[ScoreRow | None] = asyncio.Queue()
        slots = asyncio.Semaphore(self.max_in_flight)

        async def one(order: int, task: Task, report: Report, method: Method) -> None:
            try:
                if self.pool.stopped is not None:  # stopped while this item waited for a slot
                    row = self._not_run(task, report, method)
                else:
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
                        if self.pool.stopped is not None:
                            row = self._not_run(task, report, method)
                            if self.writer is not None:
                                self.writer.score(row, order)
                            order += 1
                            await queue.put(row)
                            continue
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
                # Its items are cancelled with it: wait for them, so none is still writing when
                # the caller closes the run's files (Ctrl-C printed a traceback from one).
                await asyncio.gather(producer, return_exceptions=True)
            self.finished = time.monotonic()

    async def _score(self, task: Task, report: Report, method: Method) -> ScoreRow:
        meter = Meter()
        work = self.work[method.name].start()

        def context(judge_sample: int) -> ItemContext:
            return ItemContext(pool=self.pool, task=task, report=report, method=method.name, options=method.opts,
                               seed=self.seed, pages=self.pages, executor=self.executor,
                               on_verdict=self.writer.verdict if self.writer else None, meter=meter,
                               judge_sample=judge_sample, work=work, call_times=self.call_times)

        t0 = time.monotonic()
        spread: dict[str, Any] = {}
        try:
            if self.samples == 1:
                result = await self._attempt(method, context(0))
            else:  # the K samples run side by side; each asks its own distinct requests
                results = await asyncio.gather(*(self._attempt(method, context(s)) for s in range(self.samples)))
                result, spread = combine(results, method.sample_aggregate)
        finally:
            work.finish()
        judge_s, wait_s, shared_s = meter.latency_split()
        row = ScoreRow(
            task_id=task.task_id, agent=report.agent, method=method.name, score=result.score,
            subscores=result.subscores, judged=result.judged, expected=result.expected,
            coverage=(result.judged / result.expected) if result.expected else None,
            status=result.status if result.score is not None or result.status != "ok" else "failed",
            errors=result.errors, judge=self.pool.judge_label, calls=meter.calls + meter.planned,
            cache_hits=meter.cache_hits, input_tokens=meter.input_tokens, output_tokens=meter.output_tokens,
            cost_usd=known_cost(meter.cost_usd, self.pool.priced), latency_s=round(time.monotonic() - t0, 4),
            details=result.details, cached_input_tokens=meter.cached_input_tokens,
            cost_usd_uncached=known_cost(meter.cost_usd_uncached, self.pool.priced),
            judge_s=round(judge_s, 4), quota_wait_s=round(wait_s, 4), shared_wait_s=round(shared_s, 4),
            reasoning_tokens=meter.reasoning_tokens,
            **spread,
        )
        self._count(row)
        self.per_method[method.name].merge(meter)
        return row

    async def _attempt(self, method: Method, ctx: ItemContext) -> MethodResult:
        """One scoring of the item; a judge failure or a method bug becomes a failed result."""
        try:
            return await method.score(ctx)
        except JudgeFailed as e:
            return MethodResult(score=None, status="failed", errors=[f"{e.reason}: {e.detail}".rstrip(": ")])
        except Exception as e:  # a method bug must not take the run down; it is reported
            return MethodResult(score=None, status="failed",
                                errors=[redact(f"internal error: {type(e).__name__}: {e}")])

    def _not_run(self, task: Task, report: Report, method: Method) -> ScoreRow:
        """The row of an item never started because the pool stopped."""
        stop = self.pool.stopped
        assert stop is not None
        self.items_not_run += 1
        row = ScoreRow(task_id=task.task_id, agent=report.agent, method=method.name, score=None, status="failed",
                       errors=[f"{stop.reason}: {stop.message}"], judge=self.pool.judge_label)
        self._count(row)
        return row

    def _count(self, row: ScoreRow) -> None:
        self.items_done += 1
        reason = ""
        if row.status == "failed":
            self.items_failed += 1
            reason = failure_reason(row.errors)
            self.failure_reasons[reason] = self.failure_reasons.get(reason, 0) + 1
        elif row.status == "skipped":
            self.items_skipped += 1
        counts = self.status_counts[row.method]
        key = row.status
        if row.status == "failed":
            key = f"failed:{reason}"
        elif row.status == "skipped" and row.errors:
            key = f"skipped:{row.errors[0].split(':', 1)[0]}"
        counts[key] = counts.get(key, 0) + 1
        self.aggregate.add(row)

    def _with_suite(self, table: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Add each method's own suite figures (``Method.suite``) to its entries."""
        by_name = {m.name: m for m in self.methods}
        for entry in table:
            method = by_name.get(entry["method"])
            extra = method.suite(entry) if method is not None else None
            if extra:
                entry["suite"] = extra
        return table

    def summary(self, input_errors: list[InputError], *, dry_run: bool = False,
                interval: Callable[[Sequence[float]], list[float] | None] | None = None) -> dict[str, Any]:
        s = self.pool.stats
        priced = self.pool.priced
        wall = (self.finished or time.monotonic()) - self.started
        totals: dict[str, Any] = {
            "items": self.items_done, "items_failed": self.items_failed, "items_skipped": self.items_skipped,
            "inputs_skipped": len(input_errors), "calls": s.calls, "cache_hits": s.cache_hits,
            "shared_in_flight": s.shared, "retries": s.retries, "rate_limited_429": s.rate_limited,
            "reasks": s.reasks, "judge_failures": s.failures, "input_tokens": s.input_tokens,
            "output_tokens": s.output_tokens, "cost_usd": known_cost(s.cost_usd, priced, 6),
            "wall_time_s": round(wall, 3),
            "budget_exhausted": self.pool.budget_exhausted,
            "cached_input_tokens": s.cached_input_tokens,
            "cost_usd_uncached": known_cost(s.cost_usd_uncached, priced, 6), "batched_calls": s.batched_calls, "synchronous_calls": s.calls - s.batched_calls,
            "prefix_warmup_held": s.warmup_held,
            "reasoning_tokens": s.reasoning_tokens, "truncated_answers": s.truncated,
            "truncation_retries": s.truncation_retries, "thinking_learned": s.thinking_learned,
            "truncated_cost_usd": known_cost(s.truncated_cost_usd, priced, 6),
            "learned_output_room": self.pool.thinking.learned_room,
            "failure_reasons": dict(sorted(self.failure_reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        }
        # Money and tokens are the run's (the ledger: every invocation, failed calls included);
        # what this invocation did is beside them.
        ledger = self.pool.ledger.totals()
        run = ledger["run"]
        totals["this_invocation"] = {
            "calls": s.calls, "input_tokens": s.input_tokens, "output_tokens": s.output_tokens,
            "cached_input_tokens": s.cached_input_tokens, "reasoning_tokens": s.reasoning_tokens,
            "cost_usd": known_cost(s.cost_usd, priced, 6), "cost_usd_uncached": known_cost(s.cost_usd_uncached,
                                                                                           priced, 6)}
        for k in ("calls", "input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens"):
            totals[k] = run[k]
        totals["cost_usd"] = run["cost_usd"] if priced else None
        totals["cost_usd_uncached"] = run["cost_usd_uncached"] if priced else None
        totals["ledger"] = ledger
        totals["reused"] = {"answers": s.reused, "cost_usd_list": known_cost(s.reused_cost_usd, priced, 6)}
        totals["request_faults"] = s.request_faults
        totals["refused_over_window"] = s.refused_over_window
        if s.prompts_cut:  # answered about part of their prompt (engine.runtime.calls.prompt_cut): failed
            totals["prompts_cut"] = {"prompts": s.prompts_cut, "read_to": self.pool.cut_to,
                                     "scored_before_known": s.cut_before_known}
        if s.suspect_reads:  # read far short of their estimates, not shown to be cut: scored
            totals["prompts_read_short"] = s.suspect_reads
        if s.structured_output_ignored:
            totals["structured_output_ignored"] = True  # the schema went into the prompt instead
        if s.unusable_hints:  # 429 delay hints not believed: each waited --max-rate-limit-wait instead
            totals["unusable_rate_limit_hints"] = {"count": s.unusable_hints, "last": s.unusable_hint,
                                                   "waited_s": self.pool.max_rate_limit_wait_s}
        caps = self.pool.output_caps.summary() if self.pool.output_caps is not None else {}
        if caps:  # a reserving endpoint sent caps fitted to each template's answers (output_cap)
            totals["output_caps_fitted"] = {
                "templates": caps, "cut": s.fitted_cap_cuts,
                "cut_cost_usd": known_cost(s.fitted_cap_cut_cost_usd, priced, 6),
                "reserved_less": sum(int(c["reserved_less"]) for c in caps.values())}
        if s.named_quota:  # no headers said the quota, a 429's body did: paced at it from then on
            totals["quota_named_by_429"] = {"quota": s.named_quota, "kept": self.pool.keeps_quota}
        output = self.pool.output_quota
        if s.input_quota or output is not None:  # input and output token quotas apart (Anthropic's)
            limiter = self.pool.limiter
            totals["split_token_quota"] = {
                "input_tokens_per_minute": round(limiter.tpm) if s.input_quota and limiter.tpm else None,
                "output_tokens_per_minute": round(output.per_minute) if output is not None else None,
                "waited_for_output": output.waits if output is not None else 0,
                "output_wait_s": round(output.wait_s, 3) if output is not None else 0.0}
        if s.gateway:  # an AI gateway keeps the quota (judge.gateway_quota): what its headers gave the pace
            limiter = self.pool.limiter
            totals["gateway_quota"] = {
                "headers": s.gateway, "refusals": s.gateway_refusals,
                "tokens_per_minute": round(limiter.tpm) if limiter.tpm and limiter.announced else None,
                "requests_per_minute": round(limiter.rpm) if limiter.rpm and limiter.announced else None,
                # the quota the pace may spend at once: the gateway's window, up to a minute
                "window_s": limiter.gateway_window_s}
        adapted = getattr(getattr(self.pool.backend, "wire", None), "learned", None)
        if adapted:  # request spellings the endpoint refused or ignored, and what was sent instead
            totals["judge_adapted"] = list(adapted)
        server = self.pool.server
        if server is not None and server.server:  # what the endpoint said about itself
            totals["judge_server"] = {k: v for k, v in msgspec.to_builtins(server).items() if v is not None}
            if self.pool.vocabulary_note:  # Ollama's vocabulary not read: its prompts were estimated
                totals["judge_server"]["vocabulary_not_used"] = self.pool.vocabulary_note
        if s.timeouts_not_resent:
            totals["timeouts_not_resent"] = s.timeouts_not_resent
        counts = self.pool.prompt_counts
        if counts.counted:  # prompts counted before their calls (a server's route or --tokenizer)
            totals["prompts_counted"] = {"by": counts.counted_by, "prompts": counts.counted,
                                         "usage_less_count": round(counts.drift.mean, 2)}
        proxy, limiter = self.pool.proxy, self.pool.limiter
        if proxy is not None and self.pool.proxied:
            # the token quota's estimates learned on another tokenizer's counts (judge.local_tokenizer)
            # (and how many answered calls of earlier runs the estimates started from)
            earlier = self.pool.proxy_tokens.seeded
            totals["prompts_estimated"] = {"on": f"{proxy.counted_by} counts", "prompts": self.pool.proxied,
                                           "relative_error": round(self.pool.proxy_tokens.relative_error(), 4),
                                           "earlier_calls": earlier.calls if earlier is not None else 0,
                                           # a token quota paced them at the end (told, announced, or
                                           # learned to bind), not only a learner watching sizes
                                           "token_quota": limiter.tokens is not None}
        if limiter.requests is not None or limiter.tokens is not None:
            # what a call larger than the bucket waited past a full one, and why (providers.md,
            # "Margins that follow the connection")
            connect_s = getattr(self.pool.backend, "connect_s", None)
            totals["quota_margins"] = {"connect_ms": None if connect_s is None else round(connect_s * 1000, 3),
                                       "lag_ms": round(limiter.lag_s * 1000, 3), "lag_widened": limiter.lag_widened,
                                       # the part of the lag for the server's own count of a counted prompt
                                       "counted_ms": round(limiter.counted_lag_s * 1000, 3),
                                       "ambiguous_ms": round(limiter.ambiguous_s * 1000, 3)}
        learned = limiter.learned_quota()
        if learned is not None:  # no headers, nothing told: what the 429s taught, for the next run
            log = limiter.pace_log  # each 429 and how the pace moved, where the run has a directory
            totals["learned_quota"] = {**learned, "kept": self.pool.keeps_quota,
                                       "pacing_file": log.path.name if log is not None and log.path else None}
        stopped = self.pool.stopped
        if stopped is not None and not s.stopped_calls and not self.items_not_run:
            # Nothing was refused for the stop: every item has the row its own calls earned.
            totals["stop_after_all_items"] = msgspec.to_builtins(stopped)
            stopped = None
        if not priced:
            totals["price_unknown"] = self.pool.price_model  # costs above are None, not 0
        batches = getattr(self.pool.backend, "batch_summary", None)
        if batches is not None:
            totals["batches"] = batches()
        budget = self.pool.budget
        if budget.cap is not None:
            totals["max_cost_usd"] = budget.cap
            totals["cost_unsettled_usd"] = round(budget.unsettled, 6)  # timed out: may have been billed
        if dry_run:
            planned_input = self.pool.planned_input()
            if s.planned_over_quota:  # each larger than a minute of the known token quota
                totals["planned_over_quota"] = {"calls": s.planned_over_quota, "tpm": self.pool.limiter.tpm}
            totals.update({"planned_calls": s.planned_calls, "planned_input_tokens": s.planned_input_tokens,
                           "planned_output_tokens": s.planned_output_tokens,
                           "planned_cost_usd": known_cost(s.planned_cost_usd, priced, 6),
                           "planned_cached_input_tokens_estimate": s.planned_cached_input_tokens,
                           "planned_reasoning_tokens_estimate": s.planned_reasoning_tokens,
                           "reasoning_estimate_source": self.pool.thinking.expected_reasoning()[1],
                           "planned_input_tokens_error": round(self.pool.input_estimate_error()[0], 4),
                           "planned_input_tokens_basis": self.pool.input_estimate_error()[1],
                           # the total's error bar, from each template's (engine.runtime.calls.planned_input)
                           "planned_input_tokens_error_total": round(overall_error(planned_input), 4),
                           "planned_input_by_template": {t: msgspec.to_builtins(p) for t, p in planned_input.items()},
                           # the follow-up calls planned with a list length (ACE's checklist items)
                           "planned_follow_ups": {t: n.summary() for t, n in sorted(self.pool.list_lengths.items())},
                           "priced_as": "batch" if self.pool.batched else "synchronous"})
        return {
            "judge": self.pool.judge_label,
            "dry_run": dry_run,
            "per_agent_method": self._with_suite(self.aggregate.table(interval)),
            "notes": {m.name: m.notes() for m in self.methods if m.notes()},
            "per_method": {name: {**{k: v for k, v in msgspec.structs.asdict(m).items()
                                     if k not in ("judge_spans", "wait_spans", "shared_spans")},
                                  "cost_usd": known_cost(m.cost_usd, priced, 6),
                                  "cost_usd_uncached": known_cost(m.cost_usd_uncached, priced, 6),
                                  "statuses": self.status_counts[name]}
                           for name, m in self.per_method.items()},
            "totals": totals,
            "stopped": msgspec.to_builtins(stopped) if stopped is not None else None,
            "input_errors": [str(e) for e in input_errors[:200]],
        }
