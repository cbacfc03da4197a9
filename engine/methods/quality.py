"""Quality (DeepResearch-ReportEval, METHODS.md §3): one judge call per report.

The judge reads the task and the whole report and gives five integer scores on 0-4
(comprehensiveness, coherence, clarity, insightfulness, overall) with a
justification. The report's score is the judge's *overall* score (the published
protocol reports it as its own column, not as a mean of the other four); the five
scores are the subscores, and their plain mean is kept in ``details`` for reference.
"""
from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.method import ItemContext, Method, MethodResult, Option, expect_calls
from drscore.engine.methods.language import language_option, task_language, template_for

Score04 = Annotated[int, msgspec.Meta(ge=0, le=4)]
DIMENSIONS: tuple[str, ...] = (
    "comprehensiveness", "coherence", "clarity", "insightfulness", "overall",
)


class QualityVerdict(msgspec.Struct, forbid_unknown_fields=True):
    """Five 0-4 quality scores for one report. The justification comes first so the
    judge reasons before it commits to numbers."""

    justification: str
    comprehensiveness: Score04
    coherence: Score04
    clarity: Score04
    insightfulness: Score04
    overall: Score04


def quality_subscores(verdict: QualityVerdict) -> dict[str, float | None]:
    """The five dimension scores as floats, keyed by dimension name."""
    return {d: float(getattr(verdict, d)) for d in DIMENSIONS}


def dimension_mean(verdict: QualityVerdict) -> float:
    """Mean of the four specific dimensions (overall excluded): a cross-check on the
    judge's holistic ``overall`` score, e.g. 4, 3, 3, 2 -> 12 / 4 = 3.0."""
    specific = [getattr(verdict, d) for d in DIMENSIONS if d != "overall"]
    return sum(specific) / len(specific)


class Quality(Method):
    name: ClassVar[str] = "quality"
    description: ClassVar[str] = (
        "DeepResearch-ReportEval quality: one call, five 0-4 scores (comprehensiveness, coherence, "
        "clarity, insightfulness, overall); score = overall"
    )
    options: ClassVar[tuple[Option, ...]] = (language_option(),)

    async def score(self, ctx: ItemContext) -> MethodResult:
        variables = {"question": ctx.task.prompt, "report": ctx.report.report}
        language = task_language(ctx.task, self.opts["prompt_language"])
        template = template_for("quality", language)
        expect_calls(ctx, 1, template, ctx.report.report)
        try:
            verdict = await ctx.ask(template, QualityVerdict, variables, label="quality")
        except JudgeFailed as e:
            return MethodResult(score=None, judged=0, expected=1, status="failed",
                                errors=[str(e)])
        return MethodResult(
            score=float(verdict.overall),
            subscores=quality_subscores(verdict),
            judged=1,
            expected=1,
            details={
                "justification": verdict.justification,
                "dimension_mean": dimension_mean(verdict),
                "prompt_language": language,
            },
        )
