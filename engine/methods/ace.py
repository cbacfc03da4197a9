"""ACE: adaptive checklist evaluation (DeepResearch Arena, METHODS.md §5).

Per task the judge writes a checklist of 3-6 weighted items (``ace_checklist``; asked
with the task prompt only, so every report of the task shares one call). Per report one
``ace_item`` call per item scores the report 0-10; the score is the weighted mean (0-10).

Checklist repair (documented in docs/ace.md): the schema asks for at least 3 items (a
shorter answer fails decoding and is re-asked by the engine); blank and repeated items
are dropped; more than 6 items keep the 6 heaviest (earlier item wins a tie); fewer than
3 left is rejected (every report of the task fails with reason ``checklist``); weights
are renormalised to sum to 1 (all-zero weights become uniform).
"""
from __future__ import annotations

import asyncio
from typing import Annotated, ClassVar

import msgspec

from drscore.engine.methods.race.criteria import normalise
from drscore.engine.runtime.calls.follow_ups import AnswerList
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.method import ItemContext, Method, MethodResult, expect_calls

MIN_ITEMS, MAX_ITEMS = 3, 6
EXPECTED_ITEMS = (MIN_ITEMS + MAX_ITEMS) // 2  # what the progress display counts on before a checklist is in
# The published protocol's figure: its prompt asks for 3-6 items and its one sample checklist
# (DeepResearch Arena, appendix C) has 4. A dry run plans with it until the cache holds
# checklists this judge model wrote (engine.runtime.calls.follow_ups).
PUBLISHED_ITEMS = 4
CHECKLIST = AnswerList(field="items", published=PUBLISHED_ITEMS, published_low=MIN_ITEMS, published_high=MAX_ITEMS,
                       source="the published protocol: 3-6 items asked, 4 in its sample checklist",
                       most=MAX_ITEMS, fewest=MIN_ITEMS)


class AceChecklistItem(msgspec.Struct, forbid_unknown_fields=True):
    item: str
    weight: Annotated[float, msgspec.Meta(ge=0)]


class AceChecklist(msgspec.Struct, forbid_unknown_fields=True):
    """A checklist of 3-6 weighted requirements for reports on one task."""

    # At least 3 in the schema (a shorter answer is re-asked by the engine); no upper
    # bound there, so a longer list is repaired rather than re-asked.
    items: Annotated[list[AceChecklistItem], msgspec.Meta(min_length=MIN_ITEMS)]


class AceItemScore(msgspec.Struct, forbid_unknown_fields=True):
    """How well the report meets one checklist requirement (0-10)."""

    justification: str
    score: Annotated[int, msgspec.Meta(ge=0, le=10)]


class ChecklistRejected(ValueError):
    """The judge's checklist cannot be repaired into 3-6 items."""


def repair_checklist(items: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Return 3-6 ``(item, weight)`` pairs with weights summing to 1 (rules in the module
    docstring). Raises :class:`ChecklistRejected` when fewer than 3 usable items remain."""
    seen: set[str] = set()
    kept: list[tuple[str, float]] = []
    for text, weight in items:
        text = " ".join(text.split())
        key = text.casefold()
        if text and key not in seen:
            seen.add(key)
            kept.append((text, weight))
    if len(kept) < MIN_ITEMS:
        raise ChecklistRejected(f"checklist: judge wrote {len(kept)} usable items, need {MIN_ITEMS}-{MAX_ITEMS}")
    if len(kept) > MAX_ITEMS:
        order = sorted(range(len(kept)), key=lambda i: (-kept[i][1], i))[:MAX_ITEMS]
        kept = [kept[i] for i in sorted(order)]
    weights = normalise([w for _, w in kept])
    return [(t, w) for (t, _), w in zip(kept, weights)]


def weighted_mean(scores: list[float], weights: list[float]) -> float:
    """``sum(w*s)/sum(w)``: the weights of unscored items drop out of the denominator."""
    total = sum(weights)
    if total <= 0:
        raise ValueError("weights sum to zero")
    return sum(w * s for w, s in zip(weights, scores)) / total


class Ace(Method):
    name: ClassVar[str] = "ace"
    answer_lists: ClassVar[dict[str, AnswerList]] = {"ace_checklist": CHECKLIST}
    description: ClassVar[str] = (
        "ACE (DeepResearch Arena): task checklist of 3-6 weighted items, one 0-10 call per item, "
        "weighted mean (0-10)"
    )

    async def score(self, ctx: ItemContext) -> MethodResult:
        task_vars = {"task_prompt": ctx.task.prompt}
        # the checklist, then one call per item with the report: the middle of the 3-6
        # items the prompt asks for until the checklist says how many
        expect_calls(ctx, 1, "ace_checklist")
        expect_calls(ctx, EXPECTED_ITEMS, "ace_item", ctx.report.report)
        try:
            checklist = await ctx.ask("ace_checklist", AceChecklist, task_vars, label="checklist")
            items = repair_checklist([(i.item, i.weight) for i in checklist.items])
        except JudgeFailed as e:
            return MethodResult(score=None, status="failed", errors=[f"checklist: {e}"])
        except ChecklistRejected as e:
            return MethodResult(score=None, status="failed", errors=[str(e)],
                                details={"items": [i.item for i in checklist.items]})
        expect_calls(ctx, len(items) - EXPECTED_ITEMS, "ace_item")
        results = await asyncio.gather(
            *(ctx.ask("ace_item", AceItemScore, {**task_vars, "item": text, "report": ctx.report.report},
                      label=f"item#{k}")
              for k, (text, _) in enumerate(items)),
            return_exceptions=True,
        )
        rows, errors, scores, weights = [], [], [], []
        for k, ((text, weight), r) in enumerate(zip(items, results)):
            if isinstance(r, JudgeFailed):
                errors.append(f"item {k + 1}: {r}")
                rows.append({"item": text, "weight": weight, "score": None})
                continue
            if isinstance(r, BaseException):
                raise r
            rows.append({"item": text, "weight": weight, "score": r.score, "justification": r.justification})
            scores.append(float(r.score))
            weights.append(weight)
        judged = len(scores)
        details = {"items": rows}
        if not judged:
            return MethodResult(score=None, judged=0, expected=len(items), status="failed",
                                errors=errors, details=details)
        return MethodResult(
            score=round(weighted_mean(scores, weights), 6),
            judged=judged,
            expected=len(items),
            status="ok" if judged == len(items) else "partial",
            errors=errors,
            details=details,
        )
