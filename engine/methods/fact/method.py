"""FACT: citation trustworthiness (DeepResearch Bench, METHODS.md §2).

Per report:

1. **Pairs.** Statement-URL pairs from :func:`drscore.engine.text.citations.parse_citations`. When
   the report's citations cannot be parsed (``parseable`` is False: it cites something
   but no pair could be built), the judge extracts pairs instead (``fact_extract``, one
   call per chunk of about ``--extract-chunk-tokens``), and URLs it returns that do not
   occur in the report are dropped. The row's ``details["extractor"]`` says which one
   produced the pairs (``parser`` or ``llm``).
   A report that lists references but cites none of them in its text has no pairs
   (``skipped``, reason "bibliography only"), as the benchmark's extractor returns none.
2. **De-duplication.** Per URL with two or more statements, one ``fact_dedup`` call
   keeps statements that say exactly the same thing once (the benchmark's rule;
   ``--fact-dedup paraphrase`` also merges reworded facts with ``fact_dedup_paraphrase``).
   If the call fails, every statement is kept.
3. **Support.** Each URL's page is fetched once (``ctx.pages``). A page without usable
   text (a failed fetch, or an imported page holding the benchmark's "scrape failed"
   placeholder) makes its pairs ``unreachable`` (``refused`` when the fetch guard
   refused the address) without a judge call. Otherwise the statements of the URL are
   judged together (``fact_support``, at most ``--fact-statements-per-call`` per call)
   against the page text: by default the whole page as long as it fits the judge's
   context window (:func:`drscore.engine.methods.cited_pages.page_plan`), else, or with
   ``--fact-page-text window`` within ``--page-budget-tokens``, the passages chosen by
   :func:`drscore.engine.text.passages.select_passages`. Each verdict records the rule
   (its ``page_text`` input). The judge answers ``supported``, ``partially``,
   ``unsupported`` or ``unknown`` (the page has no usable content) per statement.

Every step is instructed in the task's language (``--prompt-language``): Chinese tasks
get ``fact_extract_zh``, ``fact_dedup_zh`` and ``fact_support_zh``.

Figures, the benchmark's convention first (its ``utils/stat.py``):

* per report: ``citations`` = pairs judged supported, partially or unsupported (unknown
  and unreadable pages are excluded), ``valid_citations`` = supported + partially (the
  benchmark's judge counts a statement found entirely *or partially* on the page as
  supported); the row's ``score`` is ``valid_rate`` = valid / citations (0 when nothing
  could be judged, as the benchmark's own empty-denominator rule). A report that cites
  nothing is ``skipped``, as the benchmark skips it.
* suite (:func:`benchmark_figures`, used by live runs, :func:`fact_suite` and ``drscore
  fact rescore`` alike): ``total_citations`` and ``total_valid_citations`` are sums over
  the reports that have at least one citation divided by their number, and
  ``valid_rate`` = Σ valid / Σ citations, pooled over every pair of the suite.

The paper's stricter formulas are kept beside them, named ``acc_paper`` (supported only,
partial and every unreadable or unknown pair counting as not supported, 0 without
pairs), ``c_acc_paper`` (its mean over all reports, uncited ones counting 0) and
``e_cit_paper`` (strictly supported pairs over all reports). Pairs whose judge call
failed count in neither; they lower coverage (``judged/expected``) and make the row
``partial``.

The pair-extraction and page steps are shared with ``factuality`` and ``kae``
(:mod:`drscore.engine.methods.cited_pages`); the arithmetic is in :mod:`.tally`.
"""
from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from drscore.engine.methods.cited_pages import (
    PAGE_OUTCOMES, PAGE_TEXT_MODES, ReportPairs, batches, fetch_pages, group_by_url, kept_numbers, numbered,
    page_options, page_outcome, page_plan, pair_options, prompt_tokens_without_page, report_pairs, window_for,
)
from drscore.engine.methods.language import language_option, task_language, template_for
from drscore.engine.methods.fact.tally import (
    OUTCOMES, FactTally, accuracy_paper, suite_from_means, valid_rate,
)
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.method import ItemContext, Method, MethodResult, Option, expect_calls
from drscore.engine.runtime.models import Task

DEFAULT_STATEMENTS_PER_CALL = 20
# De-duplication rules: "exact" merges only statements that say exactly the same thing
# (the benchmark's rule); "paraphrase" also merges the same fact in other words.
DEDUP_RULES = ("exact", "paraphrase")
DEDUP_TEMPLATES = {"exact": "fact_dedup", "paraphrase": "fact_dedup_paraphrase"}


class FactDedup(msgspec.Struct, forbid_unknown_fields=True):
    """Numbers (1-based) of the statements to keep, one per distinct fact."""

    keep: list[Annotated[int, msgspec.Meta(ge=1)]]


SUPPORT_LABELS = ("supported", "partially", "unsupported", "unknown")


class FactJudgment(msgspec.Struct, forbid_unknown_fields=True):
    statement: Annotated[int, msgspec.Meta(ge=1)]
    verdict: Literal["supported", "partially", "unsupported", "unknown"]


class FactSupport(msgspec.Struct, forbid_unknown_fields=True):
    """One verdict per numbered statement of one page."""

    judgments: list[FactJudgment]


class _UrlResult(msgspec.Struct):
    url: str
    page: str  # page status as fetched
    page_outcome: str  # ok | unreachable | refused
    statements: int  # before de-duplication
    outcomes: list[tuple[str, str]]  # (statement, outcome) after de-duplication
    windows: list[str] = []
    page_text: list[str] = []  # per support call: what was shown and by which rule
    errors: list[str] = []


def _subscores(t: FactTally, extracted: int, urls: int, pages_ok: int) -> dict[str, float | None]:
    """The row's figures: the benchmark's per-report ones, the paper's, and every count
    (the suite figures are rebuilt from the counts)."""
    return {
        "valid_rate": valid_rate(t),
        "citations": float(t.citations),
        "valid_citations": float(t.valid),
        "acc_paper": accuracy_paper(t),
        **{o: float(getattr(t, o)) for o in OUTCOMES},
        "pairs": float(t.expected),
        "pairs_extracted": float(extracted),
        "urls": float(urls),
        "pages_ok": float(pages_ok),
    }


class Fact(Method):
    name: ClassVar[str] = "fact"
    description: ClassVar[str] = (
        "FACT (DeepResearch Bench): statement-URL pairs, per-URL de-duplication, support by the cited "
        "page; score = the report's valid rate as the benchmark computes it (partial support counts, "
        "unknown excluded); suite figures pooled as its stat.py; the paper's stricter accuracy beside it")
    needs_pages: ClassVar[bool] = True
    options: ClassVar[tuple[Option, ...]] = (
        *page_options(),
        *pair_options(),
        Option("fact-statements-per-call", "statements of one URL judged per support call (0 = all)",
               DEFAULT_STATEMENTS_PER_CALL, "int"),
        Option("fact-page-text", "page text shown to the FACT support judge: 'whole' (the published protocol: the "
               "whole page as long as it fits the judge's context window, else its most relevant passages within "
               "that room) or 'window' (the most relevant passages within --page-budget-tokens, for "
               "small-context judges)", "whole", choices=PAGE_TEXT_MODES),
        Option("fact-dedup", "FACT de-duplication per URL: 'exact' (the benchmark's rule: merge only statements "
               "that say exactly the same thing) or 'paraphrase' (also merge the same fact in other words)",
               "exact", choices=DEDUP_RULES),
        language_option(),
    )

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        for flag, allowed in (("fact_page_text", PAGE_TEXT_MODES), ("fact_dedup", DEDUP_RULES)):
            if self.opts[flag] not in allowed:
                raise ValueError(f"--{flag.replace('_', '-')} must be one of {', '.join(allowed)}, "
                                 f"not {self.opts[flag]!r}")
        task_language(Task(task_id="", prompt=""), str(self.opts["prompt_language"]))  # validates the mode

    def templates(self, ctx: ItemContext) -> dict[str, str]:
        """The template of each FACT step in the task's instruction language (--prompt-language)."""
        language = task_language(ctx.task, str(self.opts["prompt_language"]))
        return {"language": language,
                "extract": template_for("fact_extract", language),
                "dedup": template_for(DEDUP_TEMPLATES[str(self.opts["fact_dedup"])], language),
                "support": template_for("fact_support", language)}

    @classmethod
    def suite(cls, entry: Mapping[str, Any]) -> dict[str, Any]:
        """Suite figures for a run summary entry (see :func:`suite_from_means`)."""
        return suite_from_means(entry)

    async def score(self, ctx: ItemContext) -> MethodResult:
        tpl = self.templates(ctx)
        rp = await report_pairs(ctx, scope=self.opts["statement_scope"], extractor=self.opts["citation_extractor"],
                                chunk_tokens=int(self.opts["extract_chunk_tokens"]), template=tpl["extract"],
                                identifier_urls_mode=str(self.opts["identifier_urls"]))
        if not rp.pairs and rp.extractor == "parser" or (rp.extractor == "llm" and not rp.pairs
                                                          and not rp.chunks_failed):
            # The benchmark skips reports without citations (its stat.py); the paper's
            # means count them as 0 (see fact_suite).
            details: dict[str, Any] = {"extractor": rp.extractor, "prompt_language": tpl["language"],
                                       "bibliography_only": rp.parse.bibliography_only}
            reason = "no_citations: no statement-URL pair in the report (parser or judge extraction)"
            if rp.parse.bibliography_only and rp.extractor == "parser":
                listed = len(rp.parse.references) + len(rp.parse.unlinked_references) + \
                    len(rp.parse.unlabeled_reference_urls)
                reason = (f"no_citations: bibliography only: the report lists {listed} reference(s) but no "
                          "citation point in its text refers to them; the benchmark's extractor returns no "
                          "pairs for such a report")
            return MethodResult(score=None, status="skipped", subscores=_subscores(FactTally(), 0, 0, 0),
                                errors=[reason], details=details)
        by_url = group_by_url(rp.pairs)
        expect_calls(ctx, sum(1 for stmts in by_url.values() if len(stmts) >= 2), tpl["dedup"])
        results = await asyncio.gather(*(self._one_url(ctx, url, stmts, tpl) for url, stmts in by_url.items()))
        tally = FactTally()
        for r in results:
            for _, outcome in r.outcomes:
                tally.add(outcome)
        return self._result(rp, results, tally, tpl)

    async def _dedup(self, ctx: ItemContext, url: str, statements: list[str],
                     template: str) -> tuple[list[str], str | None]:
        if len(statements) < 2:
            return statements, None
        try:
            v = await ctx.ask(template, FactDedup, {"url": url, "statements": numbered(statements)},
                              label=url)
        except JudgeFailed as e:
            return statements, f"fact_dedup {url}: {e} (all statements kept)"
        return [statements[k - 1] for k in kept_numbers(v.keep, len(statements))], None

    async def _one_url(self, ctx: ItemContext, url: str, statements: list[str],
                       tpl: dict[str, str]) -> _UrlResult:
        (kept, dedup_error), pages = await asyncio.gather(self._dedup(ctx, url, statements, tpl["dedup"]),
                                                          fetch_pages(ctx, [url]))
        page = pages[url]
        outcome = page_outcome(page)
        result = _UrlResult(url=url, page=page.status, page_outcome=outcome, statements=len(statements),
                            outcomes=[], errors=[dedup_error] if dedup_error else [])
        if outcome != "ok":
            result.outcomes = [(s, outcome) for s in kept]
            return result
        mode, window_budget = str(self.opts["fact_page_text"]), int(self.opts["page_budget_tokens"])
        model = str(getattr(ctx, "judge_model", "") or "")
        # The output cap the support call is sent: its answer cap plus a thinking judge's
        # allowance, which take room in the context window as much as the page does.
        output_cap = getattr(ctx, "output_cap", None)
        cap = output_cap(tpl["support"]) if callable(output_cap) else None
        support = batches(kept, int(self.opts["fact_statements_per_call"]))
        expect_calls(ctx, len(support), tpl["support"])  # known once the page is in, the statements de-duplicated
        for batch in support:
            fixed = {"url": url, "statements": numbered(batch)}
            plan = page_plan(mode, model, window_budget, tpl["support"],
                             prompt_tokens_without_page(tpl["support"], fixed) if mode == "whole" else 0, cap)
            window = await window_for(ctx, page.text, batch, plan.budget)
            result.windows.append(window.describe())
            shown = plan.describe(window)
            result.page_text.append(shown)
            note = window.note_zh() if tpl["language"] == "zh" else window.note()
            try:
                # "page_text" is not in the prompt: it records with the verdict which rule chose the text.
                v = await ctx.ask(tpl["support"], FactSupport, {
                    **fixed, "page": window.text, "window": note, "page_text": shown},
                    label=f"{url} | {window.describe()}")
            except JudgeFailed as e:
                result.errors.append(f"fact_support {url}: {e}")
                result.outcomes.extend((s, "failed") for s in batch)
                continue
            verdicts: dict[int, str] = {}
            for j in v.judgments:
                verdicts.setdefault(j.statement, j.verdict)
            for k, s in enumerate(batch, 1):
                result.outcomes.append((s, verdicts.get(k, "failed")))
            missing = sum(1 for k in range(1, len(batch) + 1) if k not in verdicts)
            if missing:
                result.errors.append(f"fact_support {url}: no verdict for {missing} statement(s)")
        return result

    def _result(self, rp: ReportPairs, results: list[_UrlResult], tally: FactTally,
                tpl: dict[str, str]) -> MethodResult:
        errors = list(rp.errors) + [e for r in results for e in r.errors]
        pages = {o: 0 for o in PAGE_OUTCOMES}
        for r in results:
            pages[r.page_outcome] += 1
        counts = {o: getattr(tally, o) for o in OUTCOMES}
        details: dict[str, Any] = {
            "extractor": rp.extractor,
            "prompt_language": tpl["language"],
            "templates": {step: tpl[step] for step in ("extract", "dedup", "support")},
            "dedup_rule": str(self.opts["fact_dedup"]),
            "page_text": str(self.opts["fact_page_text"]),
            "identifier_urls": str(self.opts["identifier_urls"]),
            "counts": counts,
            "pages": pages,
            "urls": [{"url": r.url, "page": r.page, "statements": r.statements, "kept": len(r.outcomes),
                      **{o: sum(1 for _, x in r.outcomes if x == o) for o in OUTCOMES},
                      "windows": r.windows, "page_text": r.page_text} for r in results],
            "statements": [{"url": r.url, "statement": s, "outcome": o} for r in results for s, o in r.outcomes],
            "unresolved_markers": rp.parse.unresolved_markers,
            "uncited_references": rp.parse.uncited_references,
        }
        if rp.extractor == "llm":
            details["llm_pairs_dropped"] = rp.dropped
            details["extract_chunks"] = rp.chunks
        extraction_failed = rp.extractor == "llm" and rp.chunks and rp.chunks_failed == rp.chunks
        if extraction_failed or (tally.expected and not tally.judged):
            status, score = "failed", None
        else:
            if results and not tally.citations:
                # Nothing judgeable: the benchmark's rule gives 0; say why instead of looking healthy.
                errors.append(f"none of the {tally.labelled} pair(s) could be judged (pages unreadable or "
                              "unknown); valid_rate is 0 by the benchmark's rule")
            status = "partial" if (tally.failed or errors or rp.chunks_failed) else "ok"
            score = valid_rate(tally)
        subscores = _subscores(tally, len(rp.pairs), len(results), pages["ok"])
        if score is None:
            subscores["valid_rate"] = subscores["acc_paper"] = None
        return MethodResult(score=score, subscores=subscores, judged=tally.judged, expected=tally.expected,
                            status=status, errors=errors[:50], details=details)
