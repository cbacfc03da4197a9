"""Streaming aggregation of score rows into per (agent, method) summaries.

Rows are folded in as they arrive, so a run over thousands of reports never holds them
all: per agent x method, sums and the (task, score) pairs an interval needs, kept
compactly (a task index and a float in two typed arrays, 12 bytes a scored row, where a
list of tuples took about 150). The caller
may pass the interval (``drscore.api`` passes the bootstrap over tasks that ``drscore
report`` and the terminal leaderboard use, so ``summary.json`` agrees with them); without
one, a normal approximation is used.
"""
from __future__ import annotations

import math
from array import array
from typing import Any, Callable, Iterator, Sequence

import msgspec
import numpy as np

from drscore.engine.runtime.models import ScoreRow
from drscore.engine.runtime.calls.pricing import sum_costs
from drscore.engine.runtime.task_ids import TaskIds


class _Acc(msgspec.Struct):
    n: int = 0  # rows with a score
    failed: int = 0
    skipped: int = 0  # the method did not apply to the report
    partial: int = 0
    total: float = 0.0
    total_sq: float = 0.0
    coverage_sum: float = 0.0
    coverage_n: int = 0
    cost_usd: float | None = 0.0  # None once a row's cost is unknown
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cached_input_tokens: int = 0
    cost_usd_uncached: float | None = 0.0
    judge_s: float = 0.0
    quota_wait_s: float = 0.0
    shared_wait_s: float = 0.0
    reasoning_tokens: int = 0
    rows: int = 0
    sub_sum: dict[str, float] = {}
    sub_n: dict[str, int] = {}
    # (task, score) of every scored row, for an interval over tasks: the task as an index
    # into Aggregator._tasks (ids repeat across rows, and an index is 4 bytes).
    task_ix: array = msgspec.field(default_factory=lambda: array("i"))
    scores: array = msgspec.field(default_factory=lambda: array("d"))
    # What the paired comparisons and the rank rules need of each row (no details), kept
    # compactly (21 bytes a row): task index, score and coverage (NaN for none), status
    # code; the judge samples only of the rows that have them. light_rows() rebuilds rows.
    light_task: array = msgspec.field(default_factory=lambda: array("i"))
    light_score: array = msgspec.field(default_factory=lambda: array("d"))
    light_cov: array = msgspec.field(default_factory=lambda: array("d"))
    light_status: array = msgspec.field(default_factory=lambda: array("b"))
    light_samples: dict[int, list[float | None]] = {}
    sd_sq_sum: float = 0.0  # judge samples: sum of the rows' score variance across samples
    sd_n: int = 0
    samples: int = 1


class Aggregator:
    def __init__(self) -> None:
        self._acc: dict[tuple[str, str], _Acc] = {}
        self._tasks = TaskIds()  # task id <-> the index the rows keep (compact: engine.runtime.task_ids)
        self._status_ix: dict[str, int] = {}
        self._statuses: list[str] = []

    def add(self, row: ScoreRow) -> None:
        acc = self._acc.setdefault((row.agent, row.method), _Acc())
        acc.rows += 1
        acc.cost_usd = sum_costs((acc.cost_usd, row.cost_usd))
        acc.input_tokens += row.input_tokens
        acc.output_tokens += row.output_tokens
        acc.latency_s += row.latency_s
        acc.cached_input_tokens += row.cached_input_tokens
        acc.cost_usd_uncached = sum_costs((acc.cost_usd_uncached, row.cost_usd_uncached))
        acc.judge_s += row.judge_s
        acc.quota_wait_s += row.quota_wait_s
        acc.shared_wait_s += row.shared_wait_s
        acc.reasoning_tokens += row.reasoning_tokens
        status = self._status_ix.get(row.status)
        if status is None:
            status = self._status_ix[row.status] = len(self._statuses)
            self._statuses.append(row.status)
        if row.sample_scores:
            acc.light_samples[len(acc.light_task)] = list(row.sample_scores)
        acc.light_task.append(self._tasks.index(row.task_id))
        acc.light_score.append(math.nan if row.score is None else row.score)
        acc.light_cov.append(math.nan if row.coverage is None else row.coverage)
        acc.light_status.append(status)
        acc.samples = max(acc.samples, len(row.sample_scores))
        if row.score_sd is not None:
            acc.sd_sq_sum += row.score_sd * row.score_sd
            acc.sd_n += 1
        if row.status == "skipped":
            acc.skipped += 1
            return
        if row.status == "failed" or row.score is None:
            acc.failed += 1
            return
        if row.status == "partial":
            acc.partial += 1
        acc.n += 1
        acc.total += row.score
        acc.total_sq += row.score * row.score
        acc.task_ix.append(self._tasks.index(row.task_id))
        acc.scores.append(row.score)
        if row.coverage is not None:
            acc.coverage_sum += row.coverage
            acc.coverage_n += 1
        for k, v in row.subscores.items():
            if isinstance(v, (int, float)) and math.isfinite(v):
                acc.sub_sum[k] = acc.sub_sum.get(k, 0.0) + v
                acc.sub_n[k] = acc.sub_n.get(k, 0) + 1

    def table(self, interval: Callable[[Sequence[float]], list[float] | None] | None = None
              ) -> list[dict[str, Any]]:
        """One dict per (agent, method): mean with a 95% CI, counts. ``interval`` gets
        the scores in natural task order (numeric ids numerically); without it the CI is
        a normal approximation."""
        out = []
        rank = self._task_ranks()
        for (agent, method), a in sorted(self._acc.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            mean = a.total / a.n if a.n else None
            ci = None
            if interval is not None and a.n >= 2:
                # natural task order; stable, so a task's rows keep their arrival order
                order = np.argsort(rank[np.frombuffer(a.task_ix, dtype=np.int32)], kind="stable")
                ci = interval(np.frombuffer(a.scores, dtype=float)[order].tolist())
            elif a.n >= 2 and mean is not None:
                var = max(0.0, (a.total_sq - a.n * mean * mean) / (a.n - 1))
                half = 1.96 * math.sqrt(var / a.n)
                ci = [mean - half, mean + half]
            out.append({
                "agent": agent, "method": method, "mean": mean, "ci95": ci, "n": a.n,
                "failed": a.failed, "skipped": a.skipped, "partial": a.partial, "rows": a.rows,
                "coverage_mean": a.coverage_sum / a.coverage_n if a.coverage_n else None,
                "subscores": {k: a.sub_sum[k] / a.sub_n[k] for k in sorted(a.sub_sum)},
                "cost_usd": _round(a.cost_usd), "input_tokens": a.input_tokens,
                "output_tokens": a.output_tokens, "reasoning_tokens": a.reasoning_tokens,
                "mean_latency_s": a.latency_s / a.rows if a.rows else None,
                "cached_input_tokens": a.cached_input_tokens, "cost_usd_uncached": _round(a.cost_usd_uncached),
                "mean_judge_s": a.judge_s / a.rows if a.rows else None,
                "mean_quota_wait_s": a.quota_wait_s / a.rows if a.rows else None,
                "judge_s": round(a.judge_s, 4), "quota_wait_s": round(a.quota_wait_s, 4),
                "shared_wait_s": round(a.shared_wait_s, 4),
                "samples": a.samples,
                # the typical spread of one report's score across judge samples (root mean square)
                "judge_sd": math.sqrt(a.sd_sq_sum / a.sd_n) if a.sd_n else None,
            })
        return out

    def light_rows(self) -> list[ScoreRow]:
        """Every row so far with only its task, agent, method, score, coverage, status and
        judge samples: what paired comparisons and rank rules read."""
        return list(self.iter_light_rows())

    def iter_light_rows(self) -> Iterator[ScoreRow]:
        """:meth:`light_rows` one at a time, rebuilt from the compact arrays (a million-row
        run never holds them all)."""
        for (agent, method), acc in self._acc.items():
            for i, (t, score, cov, status) in enumerate(zip(acc.light_task, acc.light_score, acc.light_cov,
                                                           acc.light_status)):
                yield ScoreRow(task_id=self._tasks[t], agent=agent, method=method,
                               score=None if math.isnan(score) else score,
                               coverage=None if math.isnan(cov) else cov, status=self._statuses[status],
                               sample_scores=acc.light_samples.get(i, []))


    def _task_ranks(self) -> np.ndarray:
        """Each task index's position in natural task order (numeric ids numerically)."""
        return self._tasks.natural_ranks()


def _round(cost: float | None) -> float | None:
    return None if cost is None else round(cost, 6)
