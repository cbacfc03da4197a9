"""Task-level tools that run over a task file with a judge session (not per report):
Elo ranking of candidate tasks and the continuation-based leakage check
(DeepResearch Arena; METHODS.md §5).

``judge`` is anything with ``async ask(template, Verdict, variables, *, sample=0,
label="")`` returning a decoded verdict and raising :class:`drscore.engine.runtime.calls.judging.JudgeFailed`
when it cannot (the CLI passes its judge session; tests pass a fake). The arithmetic is
in the pure modules :mod:`drscore.engine.methods.tasks.elo` and :mod:`drscore.engine.methods.tasks.leakage`.
"""
from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Protocol, TypeVar

import msgspec

from drscore.engine.methods.tasks import elo, leakage
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.models import Task

T = TypeVar("T")

RANK_TEMPLATE = "elo_compare"
LEAKAGE_TEMPLATE = "leakage_continue"


class TaskPreference(msgspec.Struct, forbid_unknown_fields=True):
    """Judge verdict: which of two candidate tasks is better, and how sure it is."""

    reason: str
    winner: Literal["A", "B"]
    confidence: Annotated[float, msgspec.Meta(ge=0.5, le=1.0)]


class Continuation(msgspec.Struct, forbid_unknown_fields=True):
    """Judge verdict: the model's continuation of a task's first half."""

    continuation: str


class Judge(Protocol):
    async def ask(
        self, template: str, verdict: type[T], variables: dict[str, Any], *, sample: int = 0, label: str = ""
    ) -> T: ...


class RankedTask(msgspec.Struct, kw_only=True):
    """One line of ``drscore tasks rank`` output."""

    rank: int
    task_id: str
    rating: float
    comparisons: int
    wins: int
    losses: int
    failed: int
    prompt: str


class RankResult(msgspec.Struct, kw_only=True):
    rows: list[RankedTask]  # every task, best first
    outcomes: list[elo.Outcome]
    errors: list[str]


class LeakageRow(msgspec.Struct, kw_only=True):
    """One line of ``drscore tasks leakage`` output; scores are None unless status is ok."""

    task_id: str
    status: str  # ok | failed | skipped
    leaked: bool | None = None
    composite: float | None = None
    string: float | None = None
    tfidf: float | None = None
    overlap: float | None = None
    prefix: str = ""
    suffix: str = ""
    continuation: str | None = None
    error: str | None = None


async def _compare(judge: Judge, pairing: elo.Pairing, tasks: dict[str, Task]) -> elo.Outcome | str:
    """Ask for one comparison; return the outcome, or an error line if the judge failed."""
    try:
        verdict = await judge.ask(
            RANK_TEMPLATE, TaskPreference,
            {"task_a": tasks[pairing.first].prompt, "task_b": tasks[pairing.second].prompt},
            label=f"round {pairing.round}: {pairing.first} vs {pairing.second}",
        )
    except JudgeFailed as e:
        return f"round {pairing.round} {pairing.first} vs {pairing.second}: {e}"
    winner = pairing.first if verdict.winner == "A" else pairing.second
    return elo.Outcome(round=pairing.round, first=pairing.first, second=pairing.second,
                       winner=winner, confidence=verdict.confidence)


async def rank_tasks(
    judge: Judge,
    tasks: Sequence[Task],
    *,
    rounds: int = elo.DEFAULT_ROUNDS,
    k: float = elo.K_FACTOR,
    start: float = elo.START_RATING,
    seed: int = 0,
) -> RankResult:
    """Rate ``tasks`` by Elo over ``rounds`` rounds of random disjoint pairs.

    The schedule (pairs and which task is shown as "A") is drawn from ``seed`` up front;
    pairings never depend on ratings, so every comparison is asked concurrently and the
    updates are then applied round by round in schedule order. A failed comparison
    leaves both ratings unchanged and is listed in ``errors``. Keeping the top k is
    ``result.rows[:k]``."""
    by_id = {t.task_id: t for t in tasks}
    if len(by_id) != len(tasks):
        raise ValueError("task ids must be unique")
    plan = elo.schedule(list(by_id), rounds, random.Random(seed))
    flat = [p for round_pairs in plan for p in round_pairs]
    results = await asyncio.gather(*(_compare(judge, p, by_id) for p in flat))
    outcomes = [r for r in results if isinstance(r, elo.Outcome)]
    errors = [r for r in results if isinstance(r, str)]
    ratings = elo.apply_outcomes({tid: start for tid in by_id}, outcomes, k)

    stats = {tid: {"comparisons": 0, "wins": 0, "losses": 0, "failed": 0} for tid in by_id}
    for p, r in zip(flat, results):
        for tid in (p.first, p.second):
            if isinstance(r, elo.Outcome):
                stats[tid]["comparisons"] += 1
                stats[tid]["wins" if r.winner == tid else "losses"] += 1
            else:
                stats[tid]["failed"] += 1
    rows = [
        RankedTask(rank=i + 1, task_id=tid, rating=rating, prompt=by_id[tid].prompt, **stats[tid])
        for i, (tid, rating) in enumerate(elo.ranking(ratings))
    ]
    return RankResult(rows=rows, outcomes=outcomes, errors=errors)


async def _leakage_one(judge: Judge, task: Task, threshold: float) -> LeakageRow:
    prefix, suffix = leakage.split_at_middle_punctuation(task.prompt)
    if not prefix or not suffix or len(leakage.words(task.prompt)) < leakage.MIN_WORDS:
        return LeakageRow(task_id=task.task_id, status="skipped", prefix=prefix, suffix=suffix,
                          error=f"task text is too short to split (needs {leakage.MIN_WORDS}+ words)")
    try:
        verdict = await judge.ask(LEAKAGE_TEMPLATE, Continuation, {"prefix": prefix}, label=task.task_id)
    except JudgeFailed as e:
        return LeakageRow(task_id=task.task_id, status="failed", prefix=prefix, suffix=suffix, error=str(e))
    # LCS on long continuations is the one CPU-heavy step: keep it off the event loop.
    s = await asyncio.to_thread(leakage.leakage_scores, verdict.continuation, suffix, threshold)
    return LeakageRow(task_id=task.task_id, status="ok", leaked=s.leaked, composite=s.composite,
                      string=s.string, tfidf=s.tfidf, overlap=s.overlap, prefix=prefix,
                      suffix=suffix, continuation=verdict.continuation)


async def check_leakage(
    judge: Judge, tasks: Sequence[Task], *, threshold: float = leakage.THRESHOLD
) -> list[LeakageRow]:
    """Split each task at its middle punctuation mark, ask the judge model to continue
    the first half, and score the continuation against the true second half. Rows come
    back in task order; a judge failure is a ``failed`` row, never an exception."""
    return list(await asyncio.gather(*(_leakage_one(judge, t, threshold) for t in tasks)))
