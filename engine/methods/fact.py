"""FACT: citation trustworthiness (DeepResearch Bench, METHODS.md §2).

Per report:

1. **Pairs.** Statement-URL pairs from :func:`drscore.engine.text.citations.parse_citations`. When
   the report's citations cannot be parsed (``parseable`` is False: it cites something
   but no pair could be built), the judge extracts pairs instead (``fact_extract``, one
   call per chunk of about ``--extract-chunk-tokens``), and URLs it returns that do not
   occur in the report are dropped. The row's ``details["extractor"]`` says which one
   produced the pairs (``parser`` or ``llm``).
2. **De-duplication.** Per URL with two or more statements, one ``fact_dedup`` call
   keeps one statement per distinct fact (if the call fails, every statement is kept).
3. **Support.** Each URL's page is fetched once (``ctx.pages``). A page without usable
   text (a failed fetch, or an imported page holding the benchmark's "scrape failed"
   placeholder) makes its pairs ``unreachable`` (``refused`` when the fetch guard
   refused the address) without a judge call. Otherwise the statements of the URL are
   judged together (``fact_support``, at most ``--fact-statements-per-call`` per call)
   against a window of the page chosen by :func:`drscore.engine.text.passages.select_passages` within
   ``--page-budget-tokens``. The judge answers ``supported``, ``partially``,
   ``unsupported`` or ``unknown`` (the page has no usable content) per statement.

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

The pair-extraction and page helpers here are shared with ``factuality`` and ``kae``.
"""
from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, ClassVar, Literal

import msgspec

from drscore.engine.text.citations import CitationPair, CitationParse, parse_citations
from drscore.engine.runtime.evidence import PageResult
from drscore.engine.runtime.judging import JudgeFailed
from drscore.engine.runtime.method import ItemContext, Method, MethodResult, Option
from drscore.engine.text.passages import Window, select_passages
from drscore.engine.runtime.tokens import estimate_tokens

DEFAULT_PAGE_BUDGET = 6000
DEFAULT_STATEMENTS_PER_CALL = 20
DEFAULT_EXTRACT_CHUNK = 6000
SOURCES_BUDGET = 2000  # tokens of URL-bearing lines sent with every extraction chunk

# --------------------------------------------------------------------------- verdicts


class FactExtractedPair(msgspec.Struct, forbid_unknown_fields=True):
    statement: str
    url: str


class FactExtraction(msgspec.Struct, forbid_unknown_fields=True):
    """Statement-URL pairs the judge found in one chunk of a report."""

    pairs: list[FactExtractedPair]


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


# --------------------------------------------------------------------------- shared helpers

# Fetch failures that are our own refusal to fetch (SSRF guard), not the web's fault.
REFUSED_STATUSES = frozenset({"ssrf_refused"})
PAGE_OUTCOMES = ("ok", "unreachable", "refused")


# The placeholder text the benchmark's scraper stores for a page it could not fetch.
SCRAPE_FAILED = "scrape failed"


def page_outcome(page: PageResult) -> str:
    """``ok`` (usable text), ``refused`` (the fetch guard refused it) or ``unreachable``
    (no text, or the benchmark's "scrape failed: ..." placeholder imported as text)."""
    if page.status in REFUSED_STATUSES:
        return "refused"
    text = page.text.strip() if page.ok else ""
    if not text or text[:len(SCRAPE_FAILED)].lower() == SCRAPE_FAILED:
        return "unreachable"
    return "ok"


async def fetch_pages(ctx: ItemContext, urls: Iterable[str]) -> dict[str, PageResult]:
    """Fetch every URL once, concurrently (the page source applies its own limits).
    Never raises: a missing page source or an exception becomes a failed PageResult."""
    urls = list(dict.fromkeys(urls))
    if ctx.pages is None:
        return {u: PageResult(url=u, normalized_url=u, status="error", detail="no page source configured")
                for u in urls}

    async def one(url: str) -> PageResult:
        try:
            return await ctx.pages.get(url)  # type: ignore[union-attr]
        except Exception as e:  # a page source bug must not sink the whole report
            return PageResult(url=url, normalized_url=url, status="error", detail=f"{type(e).__name__}: {e}")

    results = await asyncio.gather(*(one(u) for u in urls))
    return dict(zip(urls, results))


def numbered(items: Iterable[str]) -> str:
    """``[1] first`` / ``[2] second`` lines, each item on one line (whitespace collapsed)."""
    return "\n".join(f"[{i}] {' '.join(t.split())}" for i, t in enumerate(items, 1))


def kept_numbers(keep: Iterable[int], n: int) -> list[int]:
    """Valid, unique 1-based numbers from a judge's ``keep`` list, in order; all of
    ``1..n`` when the judge kept nothing usable (dropping everything is never right)."""
    out = sorted({k for k in keep if 1 <= k <= n})
    return out or list(range(1, n + 1))


async def window_for(ctx: ItemContext, text: str, queries: str | list[str], budget: int) -> Window:
    """Page window for ``queries`` within ``budget`` tokens, computed off the event loop."""
    return await ctx.offload(select_passages, text, queries, budget)


class ReportPairs(msgspec.Struct):
    """The pairs of one report and where they came from."""

    pairs: list[CitationPair]
    extractor: str  # parser | llm
    parse: CitationParse
    dropped: int = 0  # LLM pairs whose URL does not occur in the report
    errors: list[str] = []
    chunks: int = 0
    chunks_failed: int = 0


_PARAGRAPHS = re.compile(r"\n\s*\n")
_HAS_URL = re.compile(r"https?://|www\.", re.IGNORECASE)


def chunk_report(text: str, max_tokens: int) -> list[str]:
    """Split a report into chunks of at most ``max_tokens`` at paragraph boundaries (a
    single paragraph larger than that is its own chunk)."""
    chunks: list[str] = []
    cur: list[str] = []
    cur_tokens = 0
    for para in _PARAGRAPHS.split(text):
        if not para.strip():
            continue
        t = estimate_tokens(para)
        if cur and cur_tokens + t > max_tokens:
            chunks.append("\n\n".join(cur))
            cur, cur_tokens = [], 0
        cur.append(para)
        cur_tokens += t
    if cur:
        chunks.append("\n\n".join(cur))
    return chunks


def url_lines(text: str, max_tokens: int = SOURCES_BUDGET) -> str:
    """Every line of ``text`` holding a URL (the source list, mostly), within a budget."""
    out: list[str] = []
    used = 0
    for line in text.splitlines():
        if _HAS_URL.search(line):
            t = estimate_tokens(line)
            if used + t > max_tokens:
                break
            out.append(line.strip())
            used += t
    return "\n".join(out) or "(none)"


def _parse(text: str, scope: str) -> CitationParse:
    return parse_citations(text, scope=scope)


def _url_in_report(url: str, text: str) -> bool:
    url = url.strip()
    return bool(url) and (url in text or url.rstrip("/") in text)


async def report_pairs(
    ctx: ItemContext,
    *,
    scope: str = "sentence",
    extractor: str = "auto",
    chunk_tokens: int = DEFAULT_EXTRACT_CHUNK,
) -> ReportPairs:
    """Statement-URL pairs of ``ctx.report``: parsed, or extracted by the judge when
    ``extractor`` is ``llm``, or ``auto`` and the citations cannot be parsed."""
    text = ctx.report.report
    parse = await ctx.offload(_parse, text, scope)
    if extractor == "parser" or (extractor == "auto" and parse.parseable):
        return ReportPairs(pairs=parse.pairs, extractor="parser", parse=parse)
    chunks = chunk_report(text, chunk_tokens)
    sources = url_lines(text)

    async def extract(i: int, chunk: str) -> FactExtraction | JudgeFailed:
        try:
            return await ctx.ask("fact_extract", FactExtraction,
                                 {"chunk": f"{i} of {len(chunks)}", "report": chunk, "sources": sources},
                                 label=f"chunk {i}/{len(chunks)}")
        except JudgeFailed as e:
            return e

    answers = await asyncio.gather(*(extract(i, c) for i, c in enumerate(chunks, 1)))
    pairs: list[CitationPair] = []
    seen: set[tuple[str, str]] = set()
    dropped = 0
    errors: list[str] = []
    for i, ans in enumerate(answers, 1):
        if isinstance(ans, JudgeFailed):
            errors.append(f"fact_extract chunk {i}: {ans}")
            continue
        for p in ans.pairs:
            statement, url = " ".join(p.statement.split()), p.url.strip().strip("<>")
            if not statement or not _url_in_report(url, text):
                dropped += 1  # an invented or mangled URL cannot be checked
                continue
            if (statement, url) not in seen:
                seen.add((statement, url))
                pairs.append(CitationPair(statement=statement, url=url, marker="", kind="llm"))
    return ReportPairs(pairs=pairs, extractor="llm", parse=parse, dropped=dropped, errors=errors,
                       chunks=len(chunks), chunks_failed=sum(isinstance(a, JudgeFailed) for a in answers))


def group_by_url(pairs: Iterable[CitationPair]) -> dict[str, list[str]]:
    """``{url: [statement, ...]}`` in order of first citation, statements unique per URL."""
    out: dict[str, list[str]] = {}
    for p in pairs:
        stmts = out.setdefault(p.url, [])
        if p.statement not in stmts:
            stmts.append(p.statement)
    return out


def batches(items: list[Any], size: int) -> list[list[Any]]:
    """``items`` in consecutive groups of at most ``size`` (one group when ``size`` < 1)."""
    if size < 1:
        return [items] if items else []
    return [items[i:i + size] for i in range(0, len(items), size)]


# --------------------------------------------------------------------------- aggregation

OUTCOMES = ("supported", "partially", "unsupported", "unknown", "unreachable", "refused", "failed")


class FactTally(msgspec.Struct):
    """Pair outcomes of one report, folded in as verdicts arrive."""

    supported: int = 0
    partially: int = 0
    unsupported: int = 0
    unknown: int = 0  # the judge found no usable content on the page
    unreachable: int = 0  # no page text at all (fetch failed, "scrape failed")
    refused: int = 0  # the fetch guard refused the address
    failed: int = 0  # no verdict (judge call failed)

    def add(self, outcome: str, n: int = 1) -> None:
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown FACT outcome {outcome!r}")
        setattr(self, outcome, getattr(self, outcome) + n)

    @property
    def labelled(self) -> int:
        """Pairs with a final label (everything but failed judge calls)."""
        return self.supported + self.partially + self.unsupported + self.unknown + self.unreachable + self.refused

    @property
    def judged(self) -> int:
        return self.labelled

    @property
    def expected(self) -> int:
        return self.labelled + self.failed

    @property
    def citations(self) -> int:
        """The benchmark's judged citations: unknown and unreadable pages excluded."""
        return self.supported + self.partially + self.unsupported

    @property
    def valid(self) -> int:
        """The benchmark's valid citations: found entirely or partially on the page."""
        return self.supported + self.partially


def valid_rate(t: FactTally) -> float:
    """The report's valid / citations under the benchmark's convention; 0 when nothing
    could be judged (the benchmark's rule for an empty denominator)."""
    return t.valid / t.citations if t.citations else 0.0


def accuracy_paper(t: FactTally) -> float:
    """The paper's stricter Acc_t: strictly supported / every labelled pair (partial,
    unknown and unreadable pages count as not supported); 0 without pairs."""
    return t.supported / t.labelled if t.labelled else 0.0


def benchmark_figures(reports: int, citations: float, valid: float) -> dict[str, Any]:
    """The benchmark's ``stat.py`` figures from sums over the ``reports`` that have at
    least one citation: citations and valid citations per report, and the pooled
    ``valid_rate`` = Σ valid / Σ citations (0 when nothing was judged). The one
    aggregation used by live runs, :func:`fact_suite` and ``drscore fact rescore``."""
    return {
        "reports": reports,
        "total_citations": citations / reports if reports else None,
        "total_valid_citations": valid / reports if reports else None,
        "valid_rate": valid / citations if citations else 0.0,
    }


def paper_figures(all_reports: int, acc_sum: float, strictly_supported: float) -> dict[str, Any]:
    """The paper's formulas over every report of the suite (uncited ones count 0):
    C.Acc = mean Acc_t (:func:`accuracy_paper`), E.Cit = strictly supported pairs per report."""
    return {
        "reports": all_reports,
        "c_acc_paper": acc_sum / all_reports if all_reports else None,
        "e_cit_paper": strictly_supported / all_reports if all_reports else None,
    }


def suite_from_tallies(tallies: Iterable[FactTally | None]) -> dict[str, Any]:
    """Both conventions for a suite given one tally per report (``None`` for a report
    that cites nothing: skipped by the benchmark, 0 in the paper's means)."""
    n_all = n_cited = 0
    citations = valid = strict = acc = 0.0
    for t in tallies:
        n_all += 1
        if t is None:
            continue
        n_cited += 1
        citations += t.citations
        valid += t.valid
        strict += t.supported
        acc += accuracy_paper(t)
    return {"benchmark": benchmark_figures(n_cited, citations, valid),
            "paper": paper_figures(n_all, acc, strict)}


def _get(row: Any, name: str, default: Any = None) -> Any:
    return row.get(name, default) if isinstance(row, Mapping) else getattr(row, name, default)


def tally_of(subscores: Mapping[str, Any]) -> FactTally:
    """A report's tally back from its row's subscores (the counts are stored there)."""
    return FactTally(**{o: int(subscores.get(o) or 0) for o in OUTCOMES})


def fact_suite(rows: Iterable[Any]) -> dict[str, Any]:
    """Suite figures from FACT score rows (``ScoreRow`` objects or their dicts; rows of
    other methods are ignored). Skipped rows (the report cites nothing) are left out of
    the benchmark figures and count 0 in the paper's; failed rows are counted apart."""
    tallies: list[FactTally | None] = []
    failed = 0
    for row in rows:
        if _get(row, "method", "fact") != "fact":
            continue
        status = _get(row, "status")
        if status == "skipped":
            tallies.append(None)
        elif status == "failed" or _get(row, "score") is None:
            failed += 1
        else:
            tallies.append(tally_of(_get(row, "subscores", {}) or {}))
    out = suite_from_tallies(tallies)
    out["failed_reports"] = failed
    return out


def fact_suite_by_agent(rows: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """:func:`fact_suite` per agent, agents in order of first appearance."""
    groups: dict[str, list[Any]] = {}
    for row in rows:
        groups.setdefault(str(_get(row, "agent", "")), []).append(row)
    return {agent: fact_suite(rs) for agent, rs in groups.items()}


def suite_from_means(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Both conventions from a run summary's per (agent, method) entry: its subscore
    means over the ``n`` scored rows give the sums back (mean x n), ``skipped`` rows are
    the reports that cite nothing."""
    n = int(entry.get("n") or 0)
    subs = entry.get("subscores") or {}
    total = n + int(entry.get("skipped") or 0)
    return {"benchmark": benchmark_figures(n, n * float(subs.get("citations", 0.0)),
                                           n * float(subs.get("valid_citations", 0.0))),
            "paper": paper_figures(total, n * float(subs.get("acc_paper", 0.0)),
                                   n * float(subs.get("supported", 0.0)))}


# --------------------------------------------------------------------------- the method


class _UrlResult(msgspec.Struct):
    url: str
    page: str  # page status as fetched
    page_outcome: str  # ok | unreachable | refused
    statements: int  # before de-duplication
    outcomes: list[tuple[str, str]]  # (statement, outcome) after de-duplication
    windows: list[str] = []
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


def page_options() -> tuple[Option, ...]:
    """The page-window option shared by the methods that read cited pages."""
    return (
        Option("page-budget-tokens", "tokens of page text shown to the judge per call; longer pages are "
               "cut to their passages most relevant to the statement(s)", DEFAULT_PAGE_BUDGET, "int"),
    )


def pair_options() -> tuple[Option, ...]:
    """Pair-extraction options shared by FACT and factuality (one flag serves both)."""
    return (
        Option("citation-extractor", "where statement-URL pairs come from: the parser, the judge (llm), "
               "or the parser with the judge as fallback for unparseable reports (auto)", "auto",
               choices=("auto", "parser", "llm")),
        Option("statement-scope", "text a citation covers: its sentence (widened when very short) or "
               "every sentence since the previous citation (span)", "sentence", choices=("sentence", "span")),
        Option("extract-chunk-tokens", "report tokens per judge extraction call", DEFAULT_EXTRACT_CHUNK, "int"),
    )


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
    )

    @classmethod
    def suite(cls, entry: Mapping[str, Any]) -> dict[str, Any]:
        """Suite figures for a run summary entry (see :func:`suite_from_means`)."""
        return suite_from_means(entry)

    async def score(self, ctx: ItemContext) -> MethodResult:
        rp = await report_pairs(ctx, scope=self.opts["statement_scope"], extractor=self.opts["citation_extractor"],
                                chunk_tokens=int(self.opts["extract_chunk_tokens"]))
        if not rp.pairs and rp.extractor == "parser" or (rp.extractor == "llm" and not rp.pairs
                                                          and not rp.chunks_failed):
            # The benchmark skips reports without citations (its stat.py); the paper's
            # means count them as 0 (see fact_suite).
            return MethodResult(score=None, status="skipped", subscores=_subscores(FactTally(), 0, 0, 0),
                                errors=["no_citations: no statement-URL pair in the report (parser or judge extraction)"],
                                details={"extractor": rp.extractor})
        by_url = group_by_url(rp.pairs)
        results = await asyncio.gather(*(self._one_url(ctx, url, stmts) for url, stmts in by_url.items()))
        tally = FactTally()
        for r in results:
            for _, outcome in r.outcomes:
                tally.add(outcome)
        return self._result(rp, results, tally)

    async def _dedup(self, ctx: ItemContext, url: str, statements: list[str]) -> tuple[list[str], str | None]:
        if len(statements) < 2:
            return statements, None
        try:
            v = await ctx.ask("fact_dedup", FactDedup, {"url": url, "statements": numbered(statements)},
                              label=url)
        except JudgeFailed as e:
            return statements, f"fact_dedup {url}: {e} (all statements kept)"
        return [statements[k - 1] for k in kept_numbers(v.keep, len(statements))], None

    async def _one_url(self, ctx: ItemContext, url: str, statements: list[str]) -> _UrlResult:
        (kept, dedup_error), pages = await asyncio.gather(self._dedup(ctx, url, statements),
                                                          fetch_pages(ctx, [url]))
        page = pages[url]
        outcome = page_outcome(page)
        result = _UrlResult(url=url, page=page.status, page_outcome=outcome, statements=len(statements),
                            outcomes=[], errors=[dedup_error] if dedup_error else [])
        if outcome != "ok":
            result.outcomes = [(s, outcome) for s in kept]
            return result
        budget = int(self.opts["page_budget_tokens"])
        for batch in batches(kept, int(self.opts["fact_statements_per_call"])):
            window = await window_for(ctx, page.text, batch, budget)
            result.windows.append(window.describe())
            try:
                v = await ctx.ask("fact_support", FactSupport, {
                    "url": url, "page": window.text, "window": window.note(),
                    "statements": numbered(batch)}, label=f"{url} | {window.describe()}")
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

    def _result(self, rp: ReportPairs, results: list[_UrlResult], tally: FactTally) -> MethodResult:
        errors = list(rp.errors) + [e for r in results for e in r.errors]
        pages = {o: 0 for o in PAGE_OUTCOMES}
        for r in results:
            pages[r.page_outcome] += 1
        counts = {o: getattr(tally, o) for o in OUTCOMES}
        details: dict[str, Any] = {
            "extractor": rp.extractor,
            "counts": counts,
            "pages": pages,
            "urls": [{"url": r.url, "page": r.page, "statements": r.statements, "kept": len(r.outcomes),
                      **{o: sum(1 for _, x in r.outcomes if x == o) for o in OUTCOMES},
                      "windows": r.windows} for r in results],
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
