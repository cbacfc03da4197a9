"""Steps the claim-level methods share (``fact``, ``factuality``, ``kae``): the
statement-URL pairs of a report (parsed, or extracted by the judge with ``fact_extract``
when its text has citation points the parser cannot resolve), fetching each cited page
once, what a fetched page amounts to (usable, unreachable, refused), how much of a page a
judge is shown (:func:`page_plan`: the whole page within the judge's context window, or
the relevant window within a token budget) and the small numbering and batching helpers
their prompts use.
"""
from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from typing import Any

import msgspec

from drscore import prompts
from drscore.engine.runtime.evidence import PageResult
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.method import ItemContext, Option, expect_calls
from drscore.engine.runtime.calls.tokens import estimate_tokens
from drscore.engine.runtime.calls.windows import window_of
from drscore.engine.text.citations import CitationPair, CitationParse, parse_citations
from drscore.engine.text.identifiers import find_identifiers, identifier_end, identifier_url, identifier_urls
from drscore.engine.text.identifiers import mentions_identifier, target_url
from drscore.engine.text.passages import Window, select_passages

DEFAULT_PAGE_BUDGET = 6000
# Page text: "whole" shows the judge the whole page as long as it fits its context window
# (the published FACT protocol); "window" shows the passages most relevant to the
# statements within --page-budget-tokens (for judges with a small context).
PAGE_TEXT_MODES = ("whole", "window")
# Context assumed for a judge whose model the window table does not know (an Azure
# deployment name, a local model): small enough for most current models to accept.
DEFAULT_JUDGE_CONTEXT = 32_000
# Share of the room left after the prompt and the output cap that page text may take:
# token counts here are estimates, and a request that overflows is paid for and fails.
CONTEXT_SHARE = 0.85
DEFAULT_EXTRACT_CHUNK = 6000
# Where a pair citing a scholarly identifier points: its canonical URL (drscore's default,
# a page that can be fetched) or the identifier as written ("arXiv:2311.10252"), which is
# what the benchmark's extractor sometimes kept and its scraper then fetched as is.
IDENTIFIER_URL_MODES = ("canonical", "as-written")
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


class PagePlan(msgspec.Struct, frozen=True):
    """How much of a page one judge call may show, and why."""

    mode: str  # whole | window
    budget: int  # tokens of page text allowed
    context: int = 0  # the judge's context window the budget came from (whole mode)
    context_source: str = ""  # "gpt-4.1" (the window table) or "default" (unknown model)

    def describe(self, window: Window) -> str:
        """What the judge was shown and by which rule; recorded with the verdict."""
        if self.mode == "window":
            rule = f"relevant-window mode, {self.budget:,}-token budget (--page-budget-tokens)"
        else:
            known = (f"{self.context_source} context {self.context:,}" if self.context_source != "default"
                     else f"unknown model, default context {self.context:,}")
            rule = f"whole-page mode, {self.budget:,} tokens fit ({known})"
        shown = "whole page" if window.whole else "relevant passages (page longer than the budget)"
        return f"{shown}; {rule}"


def page_plan(mode: str, model: str, window_budget: int, template: str, prompt_tokens: int,
              output_cap: int | None = None) -> PagePlan:
    """The page budget of one call of ``template``: ``window_budget`` in window mode; in
    whole mode what the judge's context (:func:`drscore.engine.runtime.calls.windows.window_of`,
    :data:`DEFAULT_JUDGE_CONTEXT` when unknown) leaves after everything else the request
    carries, times :data:`CONTEXT_SHARE`: ``prompt_tokens`` of prompt and the output cap
    sent, ``output_cap`` (the template's answer cap plus the thinking allowance of a
    thinking judge, see :meth:`drscore.engine.runtime.context.ItemContext.output_cap`;
    the template's answer cap alone when not given). Never below ``window_budget``."""
    if mode not in PAGE_TEXT_MODES:
        raise ValueError(f"page text mode must be one of {', '.join(PAGE_TEXT_MODES)}, not {mode!r}")
    if mode == "window":
        return PagePlan(mode="window", budget=window_budget)
    known = window_of(model) if model else None
    context = known.context if known else DEFAULT_JUDGE_CONTEXT
    cap = output_cap if output_cap is not None else prompts.load(template).max_tokens
    room = context - cap - prompt_tokens
    budget = max(window_budget, int(room * CONTEXT_SHARE))
    return PagePlan(mode="whole", budget=budget, context=context,
                    context_source=model.strip() if known else "default")


def prompt_tokens_without_page(template: str, variables: dict[str, Any]) -> int:
    """Estimated tokens of ``template`` rendered with ``variables`` and an empty page."""
    rendered = prompts.load(template).render({**variables, "page": "", "window": ""})
    return sum(estimate_tokens(content) for _, content in rendered)


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
    """Every line of ``text`` holding a URL or a scholarly identifier (the source list,
    mostly), within a budget."""
    out: list[str] = []
    used = 0
    for line in text.splitlines():
        if _HAS_URL.search(line) or mentions_identifier(line):
            t = estimate_tokens(line)
            if used + t > max_tokens:
                break
            out.append(line.strip())
            used += t
    return "\n".join(out) or "(none)"


def _parse(text: str, scope: str) -> CitationParse:
    return parse_citations(text, scope=scope)


def _url_in_report(url: str, text: str, identifiers: frozenset[str]) -> bool:
    """True when ``url`` is written in the report, or is the canonical URL of an
    identifier the report cites (``arXiv:2311.10252`` -> ``https://arxiv.org/abs/2311.10252``)."""
    url = url.strip()
    # The report may write the address without its scheme ("www.who.int/x", "arxiv.org/abs/...").
    bare = url.split("://", 1)[-1].rstrip("/")
    return bool(url) and (url in text or url.rstrip("/") in text or url in identifiers
                          or url.rstrip("/") + "/" in identifiers or (len(bare) > 8 and bare in text))


def written_identifiers(text: str) -> dict[str, str]:
    """``{canonical URL: the identifier as first written}`` for the identifiers ``text``
    cites (``https://arxiv.org/abs/2311.10252`` -> ``arXiv:2311.10252``), leaving out those
    whose canonical URL the text itself writes (a reader would take that URL)."""
    out: dict[str, str] = {}
    for m in find_identifiers(text):
        url = identifier_url(m)
        if url is not None and url not in out and url.rstrip("/") not in text:
            out[url] = text[m.start():identifier_end(m)].strip()
    return out


def _as_written(pairs: list[CitationPair], text: str) -> list[CitationPair]:
    """``pairs`` with every identifier's canonical URL replaced by the identifier as written."""
    written = written_identifiers(text)
    if not written:
        return pairs
    out: list[CitationPair] = []
    seen: set[tuple[str, str]] = set()
    for p in pairs:
        url = written.get(p.url, p.url)
        if (p.statement, url) not in seen:
            seen.add((p.statement, url))
            out.append(CitationPair(statement=p.statement, url=url, marker=p.marker, kind=p.kind))
    return out


async def report_pairs(
    ctx: ItemContext,
    *,
    scope: str = "sentence",
    extractor: str = "auto",
    chunk_tokens: int = DEFAULT_EXTRACT_CHUNK,
    template: str = "fact_extract",
    identifier_urls_mode: str = "canonical",
) -> ReportPairs:
    """Statement-URL pairs of ``ctx.report``: parsed, or extracted by the judge (with
    ``template``, ``fact_extract`` or its Chinese version) when ``extractor`` is ``llm``,
    or ``auto`` and the report has citation points the parser could not turn into pairs.
    A bibliography with no citation point in the text is parseable and yields no pairs.
    ``identifier_urls_mode``: ``canonical`` points a pair citing an identifier at its
    canonical URL; ``as-written`` at the identifier as the report writes it, which the
    benchmark's scraper fetched as is (see :data:`IDENTIFIER_URL_MODES`)."""
    if identifier_urls_mode not in IDENTIFIER_URL_MODES:
        raise ValueError(f"--identifier-urls must be one of {', '.join(IDENTIFIER_URL_MODES)}, "
                         f"not {identifier_urls_mode!r}")
    text = ctx.report.report
    parse = await ctx.offload(_parse, text, scope)
    if extractor == "parser" or (extractor == "auto" and parse.parseable):
        parsed = parse.pairs if identifier_urls_mode == "canonical" else await ctx.offload(_as_written, parse.pairs, text)
        return ReportPairs(pairs=parsed, extractor="parser", parse=parse)
    chunks = chunk_report(text, chunk_tokens)
    sources = url_lines(text)
    expect_calls(ctx, len(chunks), template, chunks[0] if chunks else "")

    async def extract(i: int, chunk: str) -> FactExtraction | JudgeFailed:
        try:
            return await ctx.ask(template, FactExtraction,
                                 {"chunk": f"{i} of {len(chunks)}", "report": chunk, "sources": sources},
                                 label=f"chunk {i}/{len(chunks)}")
        except JudgeFailed as e:
            return e

    answers = await asyncio.gather(*(extract(i, c) for i, c in enumerate(chunks, 1)))
    pairs: list[CitationPair] = []
    seen: set[tuple[str, str]] = set()
    dropped = 0
    errors: list[str] = []
    identifiers = frozenset(identifier_urls(text))
    for i, ans in enumerate(answers, 1):
        if isinstance(ans, JudgeFailed):
            errors.append(f"fact_extract chunk {i}: {ans}")
            continue
        for p in ans.pairs:
            statement, url = " ".join(p.statement.split()), p.url.strip().strip("<>")
            if identifier_urls_mode == "canonical":
                url = target_url(url) or url  # an identifier the judge copied as written
            if not statement or not _url_in_report(url, text, identifiers):
                dropped += 1  # an invented or mangled URL cannot be checked
                continue
            if (statement, url) not in seen:
                seen.add((statement, url))
                pairs.append(CitationPair(statement=statement, url=url, marker="", kind="llm"))
    if identifier_urls_mode == "as-written":
        pairs = _as_written(pairs, text)  # a canonical URL the judge wrote for an identifier
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
        Option("page-budget-tokens", "tokens of page text shown to the judge per call in the relevant-window "
               "mode (factuality, KAE; FACT with --fact-page-text window); longer pages are cut to their passages "
               "most relevant to the statement(s)", DEFAULT_PAGE_BUDGET, "int", low=1),
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
        Option("identifier-urls", "where a pair citing a scholarly identifier (arXiv:, doi:, PMID, PMCID, ISBN) "
               "points: its canonical URL (canonical; https://arxiv.org/abs/..., https://doi.org/...) or the "
               "identifier as written (as-written: what the benchmark's extractor sometimes kept and its scraper "
               "fetched as is, so the page fails as it did there)", "canonical", choices=IDENTIFIER_URL_MODES),
    )
