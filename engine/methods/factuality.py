"""ReportEval factuality: claim-source support on a -1/0/1 scale (METHODS.md §3).

Claims and their cited sources are the statement-URL pairs of the report (parsed, with
the judge's extraction as fallback: the same rules and options as FACT, so a run with
both methods pays for an extraction once). Each pair whose page has usable text gets
one ``factuality_support`` call on a window of the page chosen for that claim
(:func:`drscore.engine.text.passages.select_passages`, ``--page-budget-tokens``):
1 fully supported, 0 partially, -1 not supported.

* ``score`` = average support = mean of pair scores, in [-1, 1];
* ``strong_support_rate`` = share of judged pairs scored 1 (also ``partial_rate``,
  ``unsupported_rate``).

A page that cannot be read (``unreachable``/``refused``) is handled by
``--factuality-unreadable``: ``judge`` (default, as the authors' pipeline) shows the judge
the failure text in place of the page (the fetch status and detail, or an imported
"scrape failed: ..." placeholder), so such pairs are scored, usually -1, and counted in
``judged_unreadable``; ``skip`` leaves them unscored, counted apart and lowering
coverage (``judged/expected``). ``--factuality-max-pairs`` caps the pairs judged
per report with a seeded sample (0 = all); the cap is recorded in ``details``.
"""
from __future__ import annotations

import asyncio
from typing import Any, ClassVar, Literal

import msgspec

from drscore.engine.text.citations import CitationPair
from drscore.engine.runtime.evidence import PageResult
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.method import ItemContext, Method, MethodResult, Option, expect_calls
from drscore.engine.methods.cited_pages import (
    PAGE_OUTCOMES, page_options, pair_options, fetch_pages, page_outcome, report_pairs, window_for,
)


UNREADABLE_MODES = ("judge", "skip")


def failure_text(page: PageResult) -> str:
    """What the judge reads in place of a page that could not be read: the imported
    placeholder when there is one, else the fetch status and detail."""
    if page.text.strip():
        return page.text.strip()
    detail = f": {page.detail}" if page.detail else ""
    return f"[the page could not be retrieved ({page.status}{detail})]"


class FactualityVerdict(msgspec.Struct, forbid_unknown_fields=True):
    """How well one cited source backs one claim."""

    reason: str
    score: Literal[-1, 0, 1]


class SupportTally(msgspec.Struct):
    """Pair scores of one report, folded in as verdicts arrive."""

    full: int = 0  # score 1
    partial: int = 0  # score 0
    none: int = 0  # score -1
    unreachable: int = 0
    refused: int = 0
    failed: int = 0
    judged_unreadable: int = 0  # scored against the failure text (--factuality-unreadable judge)

    def add_score(self, score: int) -> None:
        if score == 1:
            self.full += 1
        elif score == 0:
            self.partial += 1
        elif score == -1:
            self.none += 1
        else:
            raise ValueError(f"support score must be -1, 0 or 1, not {score!r}")

    @property
    def judged(self) -> int:
        return self.full + self.partial + self.none

    @property
    def expected(self) -> int:
        return self.judged + self.unreachable + self.refused + self.failed


def average_support(t: SupportTally) -> float | None:
    """Mean pair score in [-1, 1] (None without a judged pair)."""
    return (t.full - t.none) / t.judged if t.judged else None


def rate(count: int, t: SupportTally) -> float | None:
    return count / t.judged if t.judged else None


class Factuality(Method):
    name: ClassVar[str] = "factuality"
    description: ClassVar[str] = (
        "ReportEval factuality: each claim-source pair scored 1/0/-1 from the cited page; "
        "score = average support, with strong support rate")
    needs_pages: ClassVar[bool] = True
    options: ClassVar[tuple[Option, ...]] = (
        *page_options(),
        *pair_options(),
        Option("factuality-max-pairs", "judge at most this many claim-source pairs per report, a seeded sample "
               "(0 = all)", 0, "int"),
        Option("factuality-unreadable", "a cited page that cannot be read: 'judge' shows the judge the failure "
               "text, as the authors' pipeline does; 'skip' leaves the pair unscored", "judge",
               choices=UNREADABLE_MODES),
    )

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        if self.opts["factuality_unreadable"] not in UNREADABLE_MODES:
            raise ValueError(f"--factuality-unreadable must be one of {', '.join(UNREADABLE_MODES)}")

    async def score(self, ctx: ItemContext) -> MethodResult:
        rp = await report_pairs(ctx, scope=self.opts["statement_scope"], extractor=self.opts["citation_extractor"],
                                chunk_tokens=int(self.opts["extract_chunk_tokens"]),
                                identifier_urls_mode=str(self.opts["identifier_urls"]))
        pairs = list(rp.pairs)
        cap = int(self.opts["factuality_max_pairs"] or 0)
        sampled_from = len(pairs)
        if 0 < cap < len(pairs):
            keep = sorted(ctx.rng("factuality-pairs").sample(range(len(pairs)), cap))
            pairs = [pairs[i] for i in keep]
        pages = await fetch_pages(ctx, (p.url for p in pairs))
        budget = int(self.opts["page_budget_tokens"])
        expect_calls(ctx, len(pairs) if self.opts["factuality_unreadable"] != "skip"
                     else sum(1 for p in pairs if page_outcome(pages[p.url]) == "ok"), "factuality_support")

        async def judge(p: CitationPair) -> tuple[CitationPair, str, int | None, str]:
            page = pages[p.url]
            outcome = page_outcome(page)
            if outcome != "ok" and self.opts["factuality_unreadable"] == "skip":
                return p, outcome, None, ""
            if outcome == "ok":
                window = await window_for(ctx, page.text, p.statement, budget)
                shown, note, described = window.text, window.note("the claim"), window.describe()
            else:  # the authors' pipeline hands the judge whatever the fetch produced
                shown, note, described = failure_text(page), "the fetch failure text (no page content)", \
                    f"unreadable ({page.status})"
            try:
                v = await ctx.ask("factuality_support", FactualityVerdict, {
                    "url": p.url, "page": shown, "window": note, "claim": p.statement},
                    label=f"{p.url} | {described}")
            except JudgeFailed as e:
                return p, "failed", None, f"factuality_support {p.url}: {e}"
            return p, "judged" if outcome == "ok" else "judged_unreadable", v.score, ""

        results = await asyncio.gather(*(judge(p) for p in pairs))
        tally = SupportTally()
        errors = list(rp.errors)
        for _, outcome, score, err in results:
            if outcome in ("judged", "judged_unreadable"):
                tally.add_score(score)  # type: ignore[arg-type]
                tally.judged_unreadable += outcome == "judged_unreadable"
            else:
                setattr(tally, outcome, getattr(tally, outcome) + 1)
            if err:
                errors.append(err)
        page_counts = {o: 0 for o in PAGE_OUTCOMES}
        for page in pages.values():
            page_counts[page_outcome(page)] += 1
        avg = average_support(tally)
        if avg is None:
            # Undefined without a judged pair: say why, so the failed row explains itself.
            status = "failed"
            if not pairs:  # nothing cited: the method does not apply
                status = "skipped"
                errors.append("no claim-source pair in the report" + (
                    " (bibliography only: it lists references but its text cites none of them)"
                    if rp.parse.bibliography_only and rp.extractor == "parser" else ""))
            elif not tally.failed:
                errors.append(f"none of the {len(pages)} cited pages could be read")
        else:
            status = "partial" if (tally.failed or errors) else "ok"
        details: dict[str, Any] = {
            "extractor": rp.extractor,
            # "supported"/"unsupported" here are scores 1 and -1; "partial" is score 0.
            "counts": {"supported": tally.full, "partial": tally.partial, "unsupported": tally.none,
                       "unreachable": tally.unreachable, "refused": tally.refused, "failed": tally.failed},
            "pages": page_counts,
            "pairs_available": sampled_from,
            "unreadable": self.opts["factuality_unreadable"],
            "max_pairs": cap,
            "claims": [{"url": p.url, "claim": p.statement, "outcome": o, "score": s} for p, o, s, _ in results],
        }
        subscores: dict[str, float | None] = {
            "average_support": avg,
            "strong_support_rate": rate(tally.full, tally),
            "partial_rate": rate(tally.partial, tally),
            "unsupported_rate": rate(tally.none, tally),
            "pairs": float(tally.expected),
            "judged": float(tally.judged),
            "unreachable": float(tally.unreachable),
            "refused": float(tally.refused),
            "failed": float(tally.failed),
            "judged_unreadable": float(tally.judged_unreadable),
        }
        return MethodResult(score=avg, subscores=subscores, judged=tally.judged, expected=tally.expected,
                            status=status, errors=errors[:50], details=details)
