"""Streaming aggregation of score rows into per (agent, method) summaries.

Rows are folded in as they arrive, so a run over thousands of reports never holds them
all: per agent x method, sums and the (task, score) pairs an interval needs. The caller
may pass the interval (``drscore.api`` passes the bootstrap over tasks that ``drscore
report`` and the terminal leaderboard use, so ``summary.json`` agrees with them); without
one, a normal approximation is used.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import msgspec

from drscore.engine.runtime.models import ScoreRow
from drscore.engine.runtime.pricing import sum_costs


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
    reasoning_tokens: int = 0
    rows: int = 0
    sub_sum: dict[str, float] = {}
    sub_n: dict[str, int] = {}
    scores: list[tuple[str, float]] = []  # (task_id, score), for an interval over tasks
    # What the paired comparisons and the rank rules need of each row (no details).
    light: list[ScoreRow] = []
    sd_sq_sum: float = 0.0  # judge samples: sum of the rows' score variance across samples
    sd_n: int = 0
    samples: int = 1


class Aggregator:
    def __init__(self) -> None:
        self._acc: dict[tuple[str, str], _Acc] = {}

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
        acc.reasoning_tokens += row.reasoning_tokens
        acc.light.append(ScoreRow(task_id=row.task_id, agent=row.agent, method=row.method, score=row.score,
                                  coverage=row.coverage, status=row.status, sample_scores=row.sample_scores))
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
        acc.scores.append((row.task_id, row.score))
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
        for (agent, method), a in sorted(self._acc.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            mean = a.total / a.n if a.n else None
            ci = None
            if interval is not None and a.n >= 2:
                ci = interval([v for _, v in sorted(a.scores, key=lambda p: _task_order(p[0]))])
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
                "samples": a.samples,
                # the typical spread of one report's score across judge samples (root mean square)
                "judge_sd": math.sqrt(a.sd_sq_sum / a.sd_n) if a.sd_n else None,
            })
        return out

    def light_rows(self) -> list[ScoreRow]:
        """Every row so far with only its task, agent, method, score, coverage, status and
        judge samples: what paired comparisons and rank rules read."""
        return [r for acc in self._acc.values() for r in acc.light]


def _task_order(task_id: str) -> tuple[int, int | str]:
    """Numeric task ids in numeric order, then the others (as rundir_read.natural_key)."""
    return (0, int(task_id)) if task_id.isdigit() else (1, task_id)


def _round(cost: float | None) -> float | None:
    return None if cost is None else round(cost, 6)
