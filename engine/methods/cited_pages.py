"""Steps the claim-level methods share (``fact``, ``factuality``, ``kae``): the
statement-URL pairs of a report (parsed, or extracted by the judge with ``fact_extract``
when its citations cannot be parsed), fetching each cited page once, what a fetched page
amounts to (usable, unreachable, refused), the window of a long page shown to the judge,
and the small numbering and batching helpers their prompts use.
"""
from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from typing import Any

import msgspec

from drscore.engine.runtime.evidence import PageResult
from drscore.engine.runtime.judging import JudgeFailed
from drscore.engine.runtime.method import ItemContext, Option
from drscore.engine.runtime.tokens import estimate_tokens
from drscore.engine.text.citations import CitationPair, CitationParse, parse_citations
from drscore.engine.text.passages import Window, select_passages

DEFAULT_PAGE_BUDGET = 6000
DEFAULT_EXTRACT_CHUNK = 6000
SOURCES_BUDGET = 2000  # tokens of URL-bearing lines sent with every extraction chunk


class FactExtractedPair(msgspec.Struct, forbid_unknown_fields=True):
    statement: str
    url: str


class FactExtraction(msgspec.Struct, forbid_unknown_fields=True):
    """Statement-URL pairs the judge found in one chunk of a report."""

    pairs: list[FactExtractedPair]


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


def page_options() -> tuple[Option, ...]:
    """The page-window option shared by the methods that read cited pages."""
    return (
        Option("page-budget-tokens", "tokens of page text shown to the judge per call; longer pages are "
               "cut to their passages most relevant to the statement(s)", DEFAULT_PAGE_BUDGET, "int", low=1),
    )


def pair_options() -> tuple[Option, ...]:
    """Pair-extraction options shared by FACT and factuality (one flag serves both)."""
    return (
        Option("citation-extractor", "where statement-URL pairs come from: the parser, the judge (llm), "
               "or the parser with the judge as fallback for unparseable reports (auto)", "auto",
               choices=("auto", "parser", "llm")),
        Option("statement-scope", "text a citation covers: its sentence (widened when very short) or "
               "every sentence since the previous citation (span)", "sentence", choices=("sentence", "span")),
        Option("extract-chunk-tokens", "report tokens per judge extraction call", DEFAULT_EXTRACT_CHUNK, "int", low=1),
    )
