"""``rubric-items``: score a report against its task's own rubric items.

Each item is judged met / not met with a reason, by one call per item (``rubric_item``,
the default) or ``--rubric-items-per-call N`` items per call (``rubric_items``: one
answer key per item, so a structured-output judge answers every item exactly once).

The trade-off: one call per item judges each criterion on its own, the way the
benchmarks that publish rubric items grade, and a failed call loses one item; the
report is sent once per item, but it is the prompt's prefix, which providers with a
prompt cache bill at the cached rate after the first call. Several items per call
send the report once per call (fewer input tokens and calls, which counts against a
requests-per-minute quota), but the judge's answers may lean on each other, a long
list dilutes its attention, and a failed call loses all its items.

Score, subscores by tag: :mod:`~drscore.engine.methods.rubric_items.tally`. Per-item
results (criterion, points, tags, met, reason) are the row's ``details["items"]``."""
from __future__ import annotations

import asyncio
import functools
from typing import Any, ClassVar

import msgspec

from drscore.engine.methods.rubric_items.items import ItemsError, RubricItem, task_items
from drscore.engine.methods.rubric_items.tally import rubric_score, tag_scores
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.method import ItemContext, Method, MethodResult, Option

WANTED = "This criterion is something a good report does: `met` is true when the report does it."
PENALTY = ("This criterion is something a report must not do (a penalty): `met` is true when the report "
           "does it anyway.")
MAX_PER_CALL = 50


class RubricItemVerdict(msgspec.Struct, forbid_unknown_fields=True):
    """The judge's decision on one criterion; the reason first, so it reasons before deciding."""

    reason: str
    met: bool


@functools.cache
def batch_verdict(n: int) -> type[msgspec.Struct]:
    """The answer to a call of ``n`` items: keys ``item_1`` .. ``item_n``, all required."""
    return msgspec.defstruct(f"RubricItems{n}Verdict", [(f"item_{i}", RubricItemVerdict) for i in range(1, n + 1)],
                             forbid_unknown_fields=True)


def criteria_text(items: list[RubricItem]) -> str:
    """The numbered criteria of one call: ``item_2 (penalty): ...``."""
    lines = []
    for i, item in enumerate(items, start=1):
        mark = " (penalty)" if item.points < 0 else ""
        lines.append(f"item_{i}{mark}: {' '.join(item.criterion.split())}")
    return "\n".join(lines)


class RubricItems(Method):
    name: ClassVar[str] = "rubric-items"
    description: ClassVar[str] = (
        "per-task rubric items {criterion, points, tags} in the task's 'rubric' field: the judge decides met / "
        "not met per item; score = points met / positive points available, clipped to 0-1; subscores per tag")
    options: ClassVar[tuple[Option, ...]] = (
        Option("rubric-items-per-call", "rubric items judged in one call (1: one call per item; more: fewer "
               "calls, answers that may lean on each other; see docs/custom-methods.md)", 1, "int",
               low=1, high=MAX_PER_CALL),
    )

    async def _one(self, ctx: ItemContext, base: dict[str, Any], item: RubricItem,
                   index: int) -> list[RubricItemVerdict | str]:
        variables = {**base, "criterion": item.criterion, "polarity": PENALTY if item.points < 0 else WANTED}
        try:
            return [await ctx.ask("rubric_item", RubricItemVerdict, variables, label=f"item {index}")]
        except JudgeFailed as e:
            return [str(e)]

    async def _batch(self, ctx: ItemContext, base: dict[str, Any], items: list[RubricItem],
                     first: int) -> list[RubricItemVerdict | str]:
        verdict = batch_verdict(len(items))
        label = f"items {first}-{first + len(items) - 1}" if len(items) > 1 else f"item {first}"
        try:
            answer = await ctx.ask("rubric_items", verdict, {**base, "criteria": criteria_text(items)}, label=label)
        except JudgeFailed as e:
            return [str(e)] * len(items)
        return [getattr(answer, f"item_{i}") for i in range(1, len(items) + 1)]

    async def score(self, ctx: ItemContext) -> MethodResult:
        try:
            items = task_items(ctx.task)
        except ItemsError as e:
            return MethodResult(score=None, status="failed", errors=[f"bad rubric: {e}"])
        if items is None:
            return MethodResult(score=None, status="skipped",
                                errors=[f"no rubric: task {ctx.task.task_id} has no 'rubric' list of items"])
        base = {"question": ctx.task.prompt, "report": ctx.report.report}
        per_call = int(self.opts.get("rubric_items_per_call") or 1)
        if per_call == 1:
            calls = [self._one(ctx, base, item, i) for i, item in enumerate(items, start=1)]
        else:
            calls = [self._batch(ctx, base, items[k:k + per_call], k + 1) for k in range(0, len(items), per_call)]
        answers = [a for part in await asyncio.gather(*calls) for a in part]
        records, judged, errors = [], [], []
        for item, answer in zip(items, answers):
            record: dict[str, Any] = {"criterion": item.criterion, "points": item.points, "tags": list(item.tags)}
            if isinstance(answer, str):
                record.update(met=None, reason=f"not judged: {answer}")
                if answer not in errors:
                    errors.append(answer)
            else:
                record.update(met=answer.met, reason=answer.reason)
                judged.append((item.points, answer.met, item.tags))
            records.append(record)
        details: dict[str, Any] = {
            "items": records,
            "points_met": sum(p for p, met, _ in judged if met),
            "points_available": sum(p for p, _, _ in judged if p > 0),
            "items_per_call": per_call,
        }
        score = rubric_score((p, met) for p, met, _ in judged)
        if not judged:
            return MethodResult(score=None, judged=0, expected=len(items), status="failed", errors=errors,
                                details=details)
        if score is None:
            return MethodResult(score=None, judged=len(judged), expected=len(items), status="skipped",
                                errors=["no positive points: the judged items offer no points to earn"],
                                details=details)
        return MethodResult(score=score, subscores=tag_scores(judged), judged=len(judged), expected=len(items),
                            status="ok" if len(judged) == len(items) else "partial", errors=errors, details=details)
