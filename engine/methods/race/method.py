"""RACE: report quality relative to a reference report (DeepResearch Bench, METHODS.md §1).

Per task (asked with the same variables from every report of the task, so the engine's
cache and in-flight de-duplication pay for them once):
  * ``race_weights``: the four dimension weights, sampled ``--race-weight-samples`` times
    (distinct ``sample`` indices) and averaged;
  * ``race_criteria``: weighted criteria for each dimension (one call per dimension).
A criteria file in the benchmark's format (``--criteria``) replaces both steps.

Per report: optional cleaning of citations (deterministic by default, ``race_clean``
with the judge as an option; the reference's cleaning is task-level too), then one
``race_score`` call that scores target and reference on every criterion, aggregated by
:mod:`drscore.engine.methods.race.rescore` (the same code the ``drscore race rescore`` command uses, so
a stored verdict re-scores to the same numbers).

Scores are x100: ``score`` = S_int(t) / (S_int(t) + S_int(r)), subscores per dimension.
Variants (``--race-variant``): see :data:`VARIANTS` and docs/race.md.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import Annotated, Any, ClassVar

import msgspec
import orjson

from drscore import prompts
from drscore.engine.text.citations import strip_citations
from drscore.engine.methods.language import language_option, task_language, template_for
from drscore.engine.methods.race.criteria import (
    DIMENSION_DESCRIPTIONS,
    DIMENSION_DESCRIPTIONS_ZH,
    DIMENSIONS,
    Criterion,
    TaskCriteria,
    build_task_criteria,
    find_task_criteria,
    load_criteria,
    mean_dimension_weights,
    static_task_criteria,
    uniform_criterion_weights,
    uniform_dimension_weights,
)
from drscore.engine.runtime.io import iter_reports
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.method import ItemContext, Method, MethodResult, Option, expect_calls
from drscore.engine.runtime.models import InputError, Task
from drscore.engine.methods.race.rescore import RaceAggregate, aggregate
from drscore.engine.runtime.calls.tokens import estimate_messages

VARIANTS = ("full", "vanilla", "static", "pointwise", "no-dim-weights", "no-crit-weights", "reverse")
CLEAN_MODES = ("deterministic", "llm", "none")
# Variants that compare against a reference report.
REFERENCE_VARIANTS = frozenset({"full", "static", "no-dim-weights", "no-crit-weights", "reverse"})

Score10 = Annotated[float, msgspec.Meta(ge=0, le=10)]
Share = Annotated[float, msgspec.Meta(ge=0)]


# ------------------------------------------------------------------ judge verdicts

class RaceWeights(msgspec.Struct, forbid_unknown_fields=True):
    """Weights of the four quality dimensions for one task, adding up to 1."""

    rationale: str
    comprehensiveness: Share
    insight: Share
    instruction_following: Share
    readability: Share


class RaceCriterion(msgspec.Struct, forbid_unknown_fields=True):
    criterion: str
    explanation: str
    weight: Share


class RaceCriteria(msgspec.Struct, forbid_unknown_fields=True):
    """Criteria of one dimension for one task."""

    criteria: list[RaceCriterion]


class RacePairItem(msgspec.Struct, forbid_unknown_fields=True):
    criterion: str
    analysis: str
    article_1_score: Score10
    article_2_score: Score10


class RacePairScores(msgspec.Struct, forbid_unknown_fields=True):
    """Both reports scored on every criterion, grouped by dimension."""

    comprehensiveness: list[RacePairItem]
    insight: list[RacePairItem]
    instruction_following: list[RacePairItem]
    readability: list[RacePairItem]


class RacePointItem(msgspec.Struct, forbid_unknown_fields=True):
    criterion: str
    analysis: str
    target_score: Score10


class RacePointScores(msgspec.Struct, forbid_unknown_fields=True):
    """The report scored on every criterion, grouped by dimension."""

    comprehensiveness: list[RacePointItem]
    insight: list[RacePointItem]
    instruction_following: list[RacePointItem]
    readability: list[RacePointItem]


class RaceOverall(msgspec.Struct, forbid_unknown_fields=True):
    """One overall 0-10 score for the report."""

    analysis: str
    score: Score10


class RaceCleaned(msgspec.Struct, forbid_unknown_fields=True):
    """A report with citation markers, links and the reference list removed."""

    article: str


# ------------------------------------------------------------------ pure helpers

class ContextExceeded(Exception):
    """The scoring prompt would not fit the judge's input budget."""


def criteria_list_json(tc: TaskCriteria) -> str:
    """The criteria as the judge sees them: per dimension, names and explanations only
    (weights stay hidden so they cannot sway the scores)."""
    shown = {
        d: [{"criterion": c.criterion, "explanation": c.explanation} for c in tc.criterions[d]]
        for d in DIMENSIONS
    }
    return orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode("utf-8")


def prompt_tokens(template: str, variables: dict[str, Any]) -> int:
    """Estimated input tokens of ``template`` rendered with ``variables``."""
    rendered = prompts.load(template).render(variables)
    return estimate_messages([{"role": r, "content": c} for r, c in rendered])


def check_context(template: str, variables: dict[str, Any], budget: int) -> int:
    """Return the prompt's estimated tokens; raise :class:`ContextExceeded` over budget.

    Nothing is ever truncated: a report pair that does not fit is failed with reason
    ``context`` so the user sees it (docs/race.md).
    """
    tokens = prompt_tokens(template, variables)
    if budget > 0 and tokens > budget:
        raise ContextExceeded(f"context: prompt needs ~{tokens} tokens, budget is {budget} (--race-context-tokens)")
    return tokens


def apply_variant(tc: TaskCriteria, variant: str) -> TaskCriteria:
    """Uniform dimension or criterion weights for the two weight ablations."""
    if variant == "no-dim-weights":
        return uniform_dimension_weights(tc)
    if variant == "no-crit-weights":
        return uniform_criterion_weights(tc)
    return tc


def load_references(path: str | Path) -> dict[str, str]:
    """``{id, prompt, article}`` JSONL -> ``{task_id: article}``; any bad line is an error
    naming file and line (every reference-based score depends on this file)."""
    errors: list[InputError] = []
    refs = {r.task_id: r.report for r in iter_reports(path, fmt="drb", agent="reference", errors=errors)}
    if errors:
        shown = "; ".join(str(e) for e in errors[:5])
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise ValueError(f"bad references file: {shown}{more}")
    return refs


async def gather_all(*aws: Awaitable[Any]) -> list[Any]:
    """Await every step, then raise the first failure: a sibling's answer is still
    received (and cached) and no exception is left unretrieved."""
    results = await asyncio.gather(*aws, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def _failed(error: str, **details: Any) -> MethodResult:
    return MethodResult(score=None, status="failed", errors=[error], details=details)


def _pct(x: float) -> float:
    return round(100.0 * x, 6)


# ------------------------------------------------------------------ the method

class Race(Method):
    name: ClassVar[str] = "race"
    description: ClassVar[str] = (
        "RACE (DeepResearch Bench): weighted task-specific criteria, target and reference "
        "scored in one call, score = target/(target+reference) x100"
    )
    options: ClassVar[tuple[Option, ...]] = (
        Option("race-variant", "RACE variant", default="full", choices=VARIANTS),
        Option("criteria", "DeepResearch Bench criteria JSONL, used as is (else generated by the judge)",
               type="path"),
        Option("race-weight-samples", "judge samples averaged for the dimension weights (the benchmark's "
               "generator draws 5)", default=5, type="int", low=1),
        Option("references", "reference reports JSONL {id, prompt, article} (else task.reference)", type="path"),
        Option("race-clean", "citation cleaning before scoring", default="deterministic", choices=CLEAN_MODES),
        Option("race-context-tokens", "judge input budget; larger prompts fail with reason 'context'",
               default=100000, type="int", low=1),
        language_option(),
    )

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.variant = str(self.opts["race_variant"])
        if self.variant not in VARIANTS:
            raise ValueError(f"--race-variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        self.clean_mode = str(self.opts["race_clean"])
        if self.clean_mode not in CLEAN_MODES:
            raise ValueError(f"--race-clean must be one of {', '.join(CLEAN_MODES)}, got {self.clean_mode!r}")
        self.weight_samples = int(self.opts["race_weight_samples"])
        if self.weight_samples < 1:
            raise ValueError("--race-weight-samples must be at least 1")
        self.context_tokens = int(self.opts["race_context_tokens"])
        self.language_mode = str(self.opts["prompt_language"])
        task_language(Task(task_id="", prompt=""), self.language_mode)  # validates the mode
        path = self.opts.get("criteria")
        self.criteria_path = str(path) if path else None
        self.criteria = load_criteria(path) if path else None
        refs = self.opts.get("references")
        self.references = load_references(refs) if refs else None

    # -- inputs ------------------------------------------------------------------

    def template(self, ctx: ItemContext, name: str) -> str:
        """``name`` in the task's instruction language (``--prompt-language``)."""
        return template_for(name, task_language(ctx.task, self.language_mode))

    def reference_for(self, ctx: ItemContext) -> str | None:
        """The task's reference report: the references file first, else ``task.reference``."""
        if self.references is not None and ctx.task.task_id in self.references:
            return self.references[ctx.task.task_id]
        ref = ctx.task.reference
        return ref if ref and ref.strip() else None

    async def clean(self, ctx: ItemContext, text: str, label: str) -> str:
        """Remove citations as configured. Raises JudgeFailed in ``llm`` mode."""
        if self.clean_mode == "none":
            return text
        if self.clean_mode == "deterministic":
            # A few milliseconds of regex work per long report: keep it off the event loop.
            return await ctx.offload(strip_citations, text)
        out = await ctx.ask(self.template(ctx, "race_clean"), RaceCleaned, {"article": text}, label=label)
        return out.article

    async def dimension_weights(self, ctx: ItemContext) -> tuple[dict[str, float], int]:
        """Average of the judge's weight samples; returns (weights, samples used)."""
        variables = {"task_prompt": ctx.task.prompt}
        results = await asyncio.gather(
            *(ctx.ask(self.template(ctx, "race_weights"), RaceWeights, variables, sample=i, label=f"weights#{i}")
              for i in range(self.weight_samples)),
            return_exceptions=True,
        )
        samples = []
        for r in results:
            if isinstance(r, JudgeFailed):
                continue
            if isinstance(r, BaseException):
                raise r
            samples.append({d: getattr(r, d) for d in DIMENSIONS})
        if not samples:
            failure = next(r for r in results if isinstance(r, JudgeFailed))
            raise JudgeFailed(failure.reason, f"all {self.weight_samples} weight samples failed: {failure.detail}")
        return mean_dimension_weights(samples), len(samples)

    async def generated_criteria(self, ctx: ItemContext, dim: str) -> list[Criterion]:
        template = self.template(ctx, "race_criteria")
        descriptions = DIMENSION_DESCRIPTIONS_ZH if template.endswith("_zh") else DIMENSION_DESCRIPTIONS
        out = await ctx.ask(
            template,
            RaceCriteria,
            {"task_prompt": ctx.task.prompt, "dimension": dim, "dimension_description": descriptions[dim]},
            label=f"criteria:{dim}",
        )
        items = [c for c in out.criteria if c.criterion.strip()]
        if not items:
            raise JudgeFailed("empty", f"no criteria for dimension {dim}")
        return [Criterion(criterion=c.criterion.strip(), explanation=c.explanation, weight=c.weight) for c in items]

    async def task_criteria(self, ctx: ItemContext) -> tuple[TaskCriteria, dict[str, Any]]:
        """Criteria for this variant plus details on where they came from.
        Raises LookupError (task missing from the criteria file) or JudgeFailed."""
        task = ctx.task
        info: dict[str, Any] = {}
        filed = None
        if self.criteria is not None:
            filed = find_task_criteria(self.criteria, task.task_id, task.prompt)
            if filed is None:
                raise LookupError(f"no criteria for task {task.task_id!r} in {self.criteria_path}")
            if filed.prompt.strip() and filed.prompt.strip() != task.prompt.strip():
                # Same id, other prompt: the criteria may have been written for another task.
                info["criteria_prompt_differs"] = True
        if self.variant == "static":
            if filed is not None:
                weights, info["criteria_source"] = filed.dimension_weight, "static+file weights"
            else:
                weights, used = await self.dimension_weights(ctx)
                info.update(criteria_source="static+generated weights", weight_samples=used)
            return static_task_criteria(task.task_id, task.prompt, weights), info
        if filed is not None:
            info["criteria_source"] = "file"
            return filed, info
        (weights, used), *per_dim = await gather_all(
            self.dimension_weights(ctx), *(self.generated_criteria(ctx, d) for d in DIMENSIONS)
        )
        info.update(criteria_source="generated", weight_samples=used)
        return build_task_criteria(task.task_id, task.prompt, weights, dict(zip(DIMENSIONS, per_dim))), info

    # -- scoring -----------------------------------------------------------------

    def expect_asks(self, ctx: ItemContext, reference: str | None) -> None:
        """Say the judge asks of one report: the clean-ups asked of the judge, the criteria
        the run generates (weights, then criteria per dimension, unless filed), the score."""
        report = ctx.report.report
        if self.clean_mode == "llm":
            expect_calls(ctx, 1 + (reference is not None), self.template(ctx, "race_clean"), report)
        if self.variant == "vanilla":
            expect_calls(ctx, 1, self.template(ctx, "race_vanilla"), report)
            return
        if self.criteria is None:
            expect_calls(ctx, self.weight_samples, self.template(ctx, "race_weights"))
            if self.variant != "static":
                expect_calls(ctx, len(DIMENSIONS), self.template(ctx, "race_criteria"))
        score = "race_score_pointwise" if reference is None else "race_score"
        expect_calls(ctx, 1, self.template(ctx, score), report + (reference or ""))

    async def score(self, ctx: ItemContext) -> MethodResult:
        if self.variant == "vanilla":
            self.expect_asks(ctx, None)
            return await self._score_vanilla(ctx)
        reference = None
        if self.variant in REFERENCE_VARIANTS:
            reference = self.reference_for(ctx)
            if reference is None:
                return _failed("no reference report", variant=self.variant)
        self.expect_asks(ctx, reference)
        try:
            tc, info = await self.task_criteria(ctx)
        except LookupError as e:
            return _failed(str(e), variant=self.variant)
        except JudgeFailed as e:
            return _failed(f"criteria: {e}", variant=self.variant)
        tc = apply_variant(tc, self.variant)
        info.update(variant=self.variant, clean=self.clean_mode,
                    prompt_language=task_language(ctx.task, self.language_mode))
        try:
            target, ref_clean = await gather_all(
                self.clean(ctx, ctx.report.report, "clean:target"),
                self.clean(ctx, reference, "clean:reference") if reference is not None else _none(),
            )
        except JudgeFailed as e:
            return _failed(f"clean: {e}", **info)
        criteria_text = criteria_list_json(tc)
        verdict_type: type[RacePointScores] | type[RacePairScores]
        if reference is None:
            template, verdict_type = self.template(ctx, "race_score_pointwise"), RacePointScores
            variables = {"task_prompt": ctx.task.prompt, "article": target, "criteria_list": criteria_text}
        else:
            template, verdict_type = self.template(ctx, "race_score"), RacePairScores
            first, second = (ref_clean, target) if self.variant == "reverse" else (target, ref_clean)
            variables = {"task_prompt": ctx.task.prompt, "article_1": first, "article_2": second,
                         "criteria_list": criteria_text}
        try:
            info["prompt_tokens"] = check_context(template, variables, self.context_tokens)
        except ContextExceeded as e:
            return _failed(str(e), **info)
        try:
            verdict = await ctx.ask(template, verdict_type, variables, label="score")
        except JudgeFailed as e:
            return _failed(f"score: {e}", **info)
        agg = aggregate(msgspec.to_builtins(verdict), tc, reverse=self.variant == "reverse")
        result = race_result(agg, tc, info)
        if info.get("criteria_prompt_differs") and result.status != "failed":
            result.status = "partial"
            result.errors.insert(0, f"criteria_prompt_differs: the criteria entry for task {ctx.task.task_id!r} in "
                                    f"{self.criteria_path} was written for a different prompt text")
        return result

    async def _score_vanilla(self, ctx: ItemContext) -> MethodResult:
        info: dict[str, Any] = {"variant": "vanilla", "clean": self.clean_mode,
                                "prompt_language": task_language(ctx.task, self.language_mode)}
        try:
            target = await self.clean(ctx, ctx.report.report, "clean:target")
        except JudgeFailed as e:
            return _failed(f"clean: {e}", **info)
        variables = {"task_prompt": ctx.task.prompt, "article": target}
        try:
            info["prompt_tokens"] = check_context(self.template(ctx, "race_vanilla"), variables,
                                                  self.context_tokens)
        except ContextExceeded as e:
            return _failed(str(e), **info)
        try:
            verdict = await ctx.ask(self.template(ctx, "race_vanilla"), RaceOverall, variables, label="score")
        except JudgeFailed as e:
            return _failed(f"score: {e}", **info)
        info["analysis"] = verdict.analysis
        return MethodResult(score=round(verdict.score * 10.0, 6), judged=1, expected=1, details=info)


async def _none() -> None:
    return None


def race_result(agg: RaceAggregate, tc: TaskCriteria, info: dict[str, Any]) -> MethodResult:
    """Turn an aggregate into the method's row: x100, per-dimension subscores, coverage.

    The score follows the benchmark (every scored item counts, unmatched texts with the
    dimension's mean weight); coverage counts the task's criteria whose text the judge
    actually matched, so a judge that rewrote or skipped criteria shows as ``partial``.
    """
    if agg.judged == 0:
        return _failed("score: the judge scored no criterion", **info)
    missing = [d for d in DIMENSIONS if d not in agg.target_dims]
    errors = [f"dimension {d} missing from the judgement" for d in missing]
    if agg.matched < agg.expected:
        errors.append(f"{agg.expected - agg.matched} of {agg.expected} criteria not matched by the judge's answer")
    details = dict(info)
    details.update(
        pointwise=agg.pointwise,
        dimension_weights=tc.dimension_weight,
        n_criteria=tc.n_criteria,
        target={"dims": agg.target_dims, "total": agg.target_total},
        reference=None if agg.pointwise else {"dims": agg.reference_dims, "total": agg.reference_total},
        items_scored=agg.judged,
        matches=agg.matches,
        criteria=agg.items,
    )
    if agg.warnings:
        details["warnings"] = agg.warnings[:20]
    return MethodResult(
        score=_pct(agg.overall),
        subscores={d: _pct(agg.relative_dims[d]) for d in DIMENSIONS},
        judged=agg.matched,
        expected=agg.expected,
        status="partial" if errors else "ok",
        errors=errors,
        details=details,
    )
