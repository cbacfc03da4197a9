"""Task Elo ranking and leakage check orchestration (engine.tasktools) with a fake judge."""
from __future__ import annotations

import pytest

from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.models import Task
from drscore.engine.methods.tasks.tools import Continuation, TaskPreference, check_leakage, rank_tasks


class FakeJudge:
    """Prefers the task with the higher ``quality`` (whatever side it is shown on)."""

    def __init__(self, quality=None, confidence=0.75, fail_with=(), continuations=None):
        self.quality = quality or {}
        self.confidence = confidence
        self.fail_with = set(fail_with)
        self.continuations = continuations or {}
        self.calls = []

    async def ask(self, template, verdict, variables, *, sample=0, label=""):
        self.calls.append((template, dict(variables), label))
        if template == "elo_compare":
            a, b = variables["task_a"], variables["task_b"]
            if a in self.fail_with or b in self.fail_with:
                raise JudgeFailed("transient", "server kept failing")
            assert verdict is TaskPreference
            winner = "A" if self.quality[a] >= self.quality[b] else "B"
            return TaskPreference(reason="fake", winner=winner, confidence=self.confidence)
        assert template == "leakage_continue" and verdict is Continuation
        prefix = variables["prefix"]
        if prefix in self.fail_with:
            raise JudgeFailed("decode", "not JSON")
        return Continuation(continuation=self.continuations.get(prefix, "something else entirely"))


def _tasks(*prompts):
    return [Task(task_id=f"t{i}", prompt=p) for i, p in enumerate(prompts)]


async def test_two_tasks_two_rounds_hand_computed():
    tasks = _tasks("strong task", "weak task")
    judge = FakeJudge({"strong task": 2, "weak task": 1}, confidence=0.75)
    result = await rank_tasks(judge, tasks, rounds=2, seed=3)
    # Round 0: 1200 + 32 * (0.75 - 0.5) = 1208 / 1192.
    # Round 1: e = 1 / (1 + 10^(-16/400)) = 0.523010; 1208 + 32 * (0.75 - 0.523010) = 1215.263693
    top, bottom = result.rows
    assert (top.task_id, bottom.task_id) == ("t0", "t1")
    assert top.rating == pytest.approx(1215.2636932, abs=1e-6)
    assert bottom.rating == pytest.approx(1184.7363068, abs=1e-6)
    assert (top.rank, top.wins, top.losses, top.comparisons) == (1, 2, 0, 2)
    assert (bottom.wins, bottom.losses) == (0, 2)
    assert result.errors == [] and len(result.outcomes) == 2
    assert len(judge.calls) == 2


async def test_results_are_seeded_and_order_independent_of_presentation():
    prompts = [f"task number {i}" for i in range(10)]
    quality = {p: i for i, p in enumerate(prompts)}
    a = await rank_tasks(FakeJudge(quality), _tasks(*prompts), rounds=3, seed=11)
    b = await rank_tasks(FakeJudge(quality), _tasks(*prompts), rounds=3, seed=11)
    assert [(r.task_id, r.rating) for r in a.rows] == [(r.task_id, r.rating) for r in b.rows]
    assert sum(r.rating for r in a.rows) == pytest.approx(10 * 1200)
    # Every comparison went to the better task, whichever side it was shown on.
    assert all(o.winner == max((o.first, o.second), key=lambda t: int(t[1:])) for o in a.outcomes)
    # The best task never loses, the worst never wins.
    by_id = {r.task_id: r for r in a.rows}
    assert by_id["t9"].losses == 0 and by_id["t0"].wins == 0
    # Presentation order is drawn: the better task appears as "A" in some calls and "B" in others.
    judge = FakeJudge(quality)
    await rank_tasks(judge, _tasks(*prompts), rounds=3, seed=11)
    better_first = [quality[v["task_a"]] > quality[v["task_b"]] for _, v, _ in judge.calls]
    assert any(better_first) and not all(better_first)


async def test_failed_comparisons_leave_ratings_and_are_listed():
    tasks = _tasks("a", "b", "c", "broken")
    judge = FakeJudge({"a": 3, "b": 2, "c": 1}, fail_with={"broken"})
    result = await rank_tasks(judge, tasks, rounds=2, seed=1)
    by_id = {r.task_id: r for r in result.rows}
    broken = by_id["t3"]
    # 4 tasks: "broken" is in one pair per round, both fail and its rating stays at 1200.
    assert (broken.failed, broken.comparisons, broken.rating) == (2, 0, 1200.0)
    assert len(result.errors) == 2 and all("server kept failing" in e for e in result.errors)
    assert [r.rank for r in result.rows] == [1, 2, 3, 4]


async def test_duplicate_task_ids_are_rejected():
    with pytest.raises(ValueError, match="unique"):
        await rank_tasks(FakeJudge(), [Task(task_id="x", prompt="a"), Task(task_id="x", prompt="b")])


async def test_leakage_flags_a_verbatim_continuation():
    tasks = [
        Task(task_id="leaky", prompt="Compare the two rulings, then explain what changed afterwards."),
        Task(task_id="clean", prompt="List the main causes; rank them by importance for the region."),
        Task(task_id="short", prompt="Hi"),
        Task(task_id="fails", prompt="Alpha beta gamma, delta epsilon zeta."),
    ]
    judge = FakeJudge(continuations={"Compare the two rulings": ", then explain what changed afterwards."},
                      fail_with={"Alpha beta gamma"})
    rows = await check_leakage(judge, tasks)
    assert [r.task_id for r in rows] == ["leaky", "clean", "short", "fails"]
    leaky, clean, short, fails = rows
    assert leaky.status == "ok" and leaky.leaked is True
    assert leaky.composite == pytest.approx(1.0)
    assert leaky.suffix == ", then explain what changed afterwards."  # the mark opens the suffix
    assert clean.status == "ok" and clean.leaked is False and clean.composite < 0.7
    assert clean.prefix == "List the main causes"
    assert short.status == "skipped" and short.composite is None and "too short" in short.error
    assert fails.status == "failed" and fails.leaked is None and "not JSON" in fails.error
    assert len(judge.calls) == 3  # the short task asks nothing


async def test_leakage_threshold_is_configurable():
    tasks = [Task(task_id="t", prompt="The cat sat on the mat, and the dog ran in the park.")]
    judge = FakeJudge(continuations={"The cat sat on the mat": ", and the dog sat in the park."})
    (row,) = await check_leakage(judge, tasks, threshold=0.95)
    assert 0.7 < row.composite < 0.95 and row.leaked is False
    (row,) = await check_leakage(judge, tasks)
    assert row.leaked is True
