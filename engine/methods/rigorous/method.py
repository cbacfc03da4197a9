"""Rigorous Bench: IntegratedScore = Quality x (1 - SemanticDrift) x TrustworthyBoost x 100
(METHODS.md §4; formulas in :mod:`drscore.engine.methods.rigorous.drift`, bundles in :mod:`drscore.engine.methods.rigorous.rubrics`).

Per report, with the task's reference bundle:

* one ``rigorous_rubric`` call per query-specific rubric (QSR) and per general-report
  rubric (GRR) item; the judge answers with one of the item's allowed labels;
* one ``rigorous_keyword`` call per focus-anchor (FAK) and focus-deviation (FDK)
  keyword rating its relevance 1-5, on the report text with citations removed, where
  the keyword's frequency is also counted;
* trusted source links (TSL) matched against the URLs the report cites (no call).

Allowed labels are enforced by the response schema: the verdict Struct for an item is
built per distinct label set (:func:`rubric_verdict`, cached), with ``label`` a
``Literal`` of exactly that item's labels. Endpoints with structured outputs can only
answer an allowed label; anything else fails to decode and is re-asked by the pool,
then counted as a failed item.

Failed calls are counted in coverage, never guessed: a rubric share is taken over the
items that were judged (points / attainable points of those items), a drift over the
keywords that were rated. The score is None (status failed) only when a whole
component (all QSR, all GRR, all FAK or all FDK items) failed.
"""
from __future__ import annotations

import asyncio
import functools
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from drscore.engine.methods.rigorous import drift
from drscore.engine.text.citations import cited_urls, strip_citations
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.method import ItemContext, Method, MethodResult, Option, expect_calls
from drscore.engine.runtime.models import Task
from drscore.engine.methods.rigorous.rubrics import (
    STANDARD_QSR_MAX,
    Bundle,
    BundleSet,
    RubricError,
    RubricItem,
    default_general_rubrics,
    load_bundles,
    load_general_rubrics,
    parse_bundle,
)

RUBRIC_TEMPLATE = "rigorous_rubric"
KEYWORD_TEMPLATE = "rigorous_keyword"


@functools.cache
def rubric_verdict(labels: tuple[str, ...]) -> type[msgspec.Struct]:
    """The verdict Struct for items whose allowed labels are ``labels`` (most points
    first): ``{reason: str, label: Literal[*labels]}``. One class per label set, so its
    JSON Schema is static and cached like any other verdict's."""
    return msgspec.defstruct(
        "RubricVerdict",
        [("reason", str), ("label", Literal[labels])],
        forbid_unknown_fields=True,
    )


class KeywordRelevance(msgspec.Struct, forbid_unknown_fields=True):
    """How central a keyword is to the report, 1 (absent/unrelated) to 5 (core subject)."""

    reason: str
    relevance: Annotated[int, msgspec.Meta(ge=1, le=5)]


def format_choices(item: RubricItem) -> str:
    """The item's allowed answers as shown to the judge, one per line."""
    lines = []
    for c in item.choices:
        pts = f"{c.points:g} point" + ("" if c.points == 1 else "s")
        lines.append(f"- {c.label}: {pts}" + (f" ({c.condition})" if c.condition else ""))
    return "\n".join(lines)


class RubricTally(msgspec.Struct, kw_only=True):
    """Points over the judged items of one rubric list."""

    labels: list[str | None]
    points: float
    attainable: float  # max points of the judged items
    maximum: float  # max points of all items
    judged: int

    @property
    def ratio(self) -> float | None:
        return drift.rubric_ratio(self.points, self.attainable) if self.judged else None


def tally(items: tuple[RubricItem, ...], labels: list[str | None]) -> RubricTally:
    """Add up the points of the chosen labels (None = item not judged)."""
    points = attainable = 0.0
    judged = 0
    for item, label in zip(items, labels):
        if label is None:
            continue
        points += item.points_for(label)
        attainable += item.max_points
        judged += 1
    return RubricTally(labels=labels, points=points, attainable=attainable,
                       maximum=sum(i.max_points for i in items), judged=judged)


def citation_view(report: str) -> tuple[str, list[str]]:
    """The report text without citations (for keyword counts and relevance) and the
    distinct URLs it cites (for TSL matching)."""
    return strip_citations(report), cited_urls(report)


def _round(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else round(x, nd)


# Said on the leaderboard and in summary.json when the benchmark's own GRR file is not given.
GRR_NOT_COMPARABLE = (
    "rigorous: no --general-rubrics file was given, so the general-report rubrics are drscore's own "
    "list, not the benchmark's; Quality and the integrated scores are NOT comparable with the "
    "published Rigorous Bench numbers (pass the benchmark's general_rubrics.json to compare)")


class Rigorous(Method):
    name: ClassVar[str] = "rigorous"
    description: ClassVar[str] = (
        "Rigorous Bench: QSR/GRR rubric quality x (1 - keyword SemanticDrift) x trusted-source "
        "TrustworthyBoost x 100 (0-120); needs --bundles or task.fields['bundle']"
    )
    options: ClassVar[tuple[Option, ...]] = (
        Option("bundles", "Rigorous Bench bundles JSONL ({uid, query, qsr, tsl, fak, fdk}); "
               "matched to tasks by task id == uid", type="path"),
        Option("general-rubrics", "general-report rubric list (JSON array of {rule, max_points}); "
               "default: drscore's own list (docs/rigorous.md)", type="path"),
        Option("tsl-counting", "TrustworthyBoost's host term: 'code' = the authors' code, which the "
               "published numbers used ((TSL, cited URL) pairs, full matches subtracted); "
               "'paper-formula' = the paper's equation match_host/(T+1) (docs/rigorous.md)",
               default="code", choices=drift.TSL_COUNTING),
    )

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        path = self.opts.get("bundles")
        self.bundle_set: BundleSet | None = load_bundles(path) if path else None
        grr_path = self.opts.get("general_rubrics")
        self.grr: tuple[RubricItem, ...] = (
            load_general_rubrics(grr_path) if grr_path else default_general_rubrics())
        self.grr_source = str(grr_path) if grr_path else "drscore-default"
        self.tsl_counting = str(self.opts.get("tsl_counting") or "code")
        if self.tsl_counting not in drift.TSL_COUNTING:
            raise ValueError(f"--tsl-counting must be one of {', '.join(drift.TSL_COUNTING)}")

    def notes(self) -> list[str]:
        if self.grr_source != "drscore-default":
            return []
        return [GRR_NOT_COMPARABLE]

    def bundle_for(self, task: Task) -> Bundle | str:
        """The task's bundle (``task.fields["bundle"]`` first, then the bundles file by
        uid == task id), or an error message saying why there is none."""
        inline = task.fields.get("bundle") if task.fields else None
        if inline is not None:
            try:
                return parse_bundle(inline)
            except RubricError as e:
                return f"task {task.task_id}: field 'bundle': {e}"
        if self.bundle_set is None:
            return "rigorous needs a reference bundle: pass --bundles FILE or give the task a 'bundle' field"
        bundle = self.bundle_set.bundles.get(task.task_id)
        if bundle is not None:
            return bundle
        reason = self.bundle_set.errors_by_uid.get(task.task_id)
        return f"bundle for task {task.task_id} is invalid: {reason}" if reason else \
            f"no bundle with uid {task.task_id!r} in {self.opts.get('bundles')}"

    async def score(self, ctx: ItemContext) -> MethodResult:
        bundle = self.bundle_for(ctx.task)
        if isinstance(bundle, str):
            return MethodResult(score=None, status="failed", errors=[bundle])
        text = ctx.report.report
        # Citation parsing walks the whole report: keep it off the event loop.
        plain, cited = await ctx.offload(citation_view, text)

        async def rubric(name: str, item: RubricItem) -> str | JudgeFailed:
            variables = {"query": bundle.query, "report": text, "rubric": item.question,
                         "choices": format_choices(item)}
            try:
                v = await ctx.ask(RUBRIC_TEMPLATE, rubric_verdict(item.labels), variables, label=name)
            except JudgeFailed as e:
                return e
            return v.label  # type: ignore[attr-defined]  # a class defstruct builds at run time

        async def keyword(name: str, kw: str) -> int | JudgeFailed:
            try:
                v = await ctx.ask(KEYWORD_TEMPLATE, KeywordRelevance, {"report": plain, "keyword": kw},
                                  label=name)
            except JudgeFailed as e:
                return e
            return v.relevance

        names = [f"{kind}[{i}]" for kind, seq in (("qsr", bundle.qsr), ("grr", self.grr), ("fak", bundle.fak),
                                                   ("fdk", bundle.fdk)) for i in range(len(seq))]
        n_q, n_g, n_a = len(bundle.qsr), len(self.grr), len(bundle.fak)
        items = (*bundle.qsr, *self.grr)
        keywords = (*bundle.fak, *bundle.fdk)
        expect_calls(ctx, len(items), RUBRIC_TEMPLATE, text)
        expect_calls(ctx, len(keywords), KEYWORD_TEMPLATE, plain)
        chosen, rated = await asyncio.gather(
            asyncio.gather(*(rubric(name, item) for name, item in zip(names, items))),
            asyncio.gather(*(keyword(name, kw) for name, kw in zip(names[n_q + n_g:], keywords))))
        results: list[str | int | JudgeFailed] = [*chosen, *rated]
        errors = [f"{name}: {r}" for name, r in zip(names, results) if isinstance(r, JudgeFailed)]
        labels = [None if isinstance(r, JudgeFailed) else r for r in chosen]
        relevance = [None if isinstance(r, JudgeFailed) else r for r in rated]
        qsr = tally(bundle.qsr, labels[:n_q])
        grr = tally(self.grr, labels[n_q:])
        fak = [drift.KeywordScore(kw, drift.count_keyword(plain, kw), rel)
               for kw, rel in zip(bundle.fak, relevance[:n_a]) if rel is not None]
        fdk = [drift.KeywordScore(kw, drift.count_keyword(plain, kw), rel)
               for kw, rel in zip(bundle.fdk, relevance[n_a:]) if rel is not None]
        match = drift.match_tsl(bundle.tsl, cited, self.tsl_counting)
        boost = drift.trustworthy_boost(match, counting=self.tsl_counting)

        fak_d = drift.fak_drift(fak)
        # No FDK keywords rated (or none given) contributes no deviation.
        fdk_d = drift.fdk_drift(fdk) if fdk else (0.0 if not bundle.fdk else None)
        q = drift.quality(qsr.ratio, grr.ratio) if qsr.ratio is not None and grr.ratio is not None else None
        sd = drift.semantic_drift(fak_d, fdk_d) if fak_d is not None and fdk_d is not None else None
        score = drift.integrated_score(q, sd, boost) if q is not None and sd is not None else None

        subscores: dict[str, float | None] = {
            "quality": _round(q), "qsr": _round(qsr.ratio), "grr": _round(grr.ratio),
            "semantic_drift": _round(sd), "fak_drift": _round(fak_d), "fdk_drift": _round(fdk_d),
            "trustworthy_boost": _round(boost),
        }
        usage = ctx.report.usage
        if score is not None:
            cpt = drift.contribution_per_token(score, usage)
            if cpt is not None:
                subscores["contribution_per_token"] = _round(cpt, 8)
        ri = drift.retrieval_index(usage, match.n_annotations)
        if ri is not None:
            subscores["retrieval_index"] = _round(ri)

        expected = len(results)
        judged = expected - len(errors)
        details: dict[str, Any] = {
            "uid": bundle.uid,
            "domain": bundle.domain,
            "qsr_max": bundle.qsr_max,
            "qsr_max_standard": bundle.qsr_max == STANDARD_QSR_MAX,
            "qsr_points": qsr.points,
            "qsr_labels": qsr.labels,
            "grr_source": self.grr_source,
            "comparable_with_published": self.grr_source != "drscore-default",
            "grr_max": grr.maximum,
            "grr_points": grr.points,
            "grr_labels": grr.labels,
            "fak": [{"keyword": k.keyword, "freq": k.freq, "relevance": k.relevance} for k in fak],
            "fdk": [{"keyword": k.keyword, "freq": k.freq, "relevance": k.relevance} for k in fdk],
            "tsl": {**msgspec.to_builtins(match), "counting": self.tsl_counting},
        }
        if score is None:
            return MethodResult(score=None, subscores=subscores, judged=judged, expected=expected,
                                status="failed", errors=errors or ["no score"], details=details)
        return MethodResult(score=round(score, 6), subscores=subscores, judged=judged, expected=expected,
                            status="ok" if not errors else "partial", errors=errors, details=details)
