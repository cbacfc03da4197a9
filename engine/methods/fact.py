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
   text makes its pairs ``unreachable`` (``refused`` when the fetch guard refused the
   address) without a judge call. Otherwise the statements of the URL are judged
   together (``fact_support``, at most ``--fact-statements-per-call`` per call) against a
   window of the page chosen by :func:`drscore.engine.text.passages.select_passages` within
   ``--page-budget-tokens``; the window is described in the verdict's label.

Scores (per report, ``supported`` = N_s, pairs after de-duplication = N_u):

* ``acc_published`` = supported / (supported + unsupported + unreachable + refused):
  the published convention, a page that cannot be read counts as "not support";
  0 when the report has no pair (as published). This is the row's ``score``.
* ``acc_reachable`` = supported / (supported + unsupported): the benchmark code's
  convention, pairs whose page has no text are "unknown" and excluded (None if none).

Suite level (:func:`fact_suite`): C.Acc = mean of per-report accuracy, E.Cit = mean
supported pairs per report. Pairs whose judge call failed count in neither; they lower
coverage (``judged/expected``) and make the row ``partial``.

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


class FactJudgment(msgspec.Struct, forbid_unknown_fields=True):
    statement: Annotated[int, msgspec.Meta(ge=1)]
    verdict: Literal["supported", "not_supported"]


class FactSupport(msgspec.Struct, forbid_unknown_fields=True):
    """One verdict per numbered statement of one page."""

    judgments: list[FactJudgment]


# --------------------------------------------------------------------------- shared helpers

# Fetch failures that are our own refusal to fetch (SSRF guard), not the web's fault.
REFUSED_STATUSES = frozenset({"ssrf_refused"})
PAGE_OUTCOMES = ("ok", "unreachable", "refused")


def page_outcome(page: PageResult) -> str:
    """``ok`` (usable text), ``refused`` (the fetch guard refused it) or ``unreachable``."""
    if page.status in REFUSED_STATUSES:
        return "refused"
    return "ok" if page.ok and page.text.strip() else "unreachable"


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

OUTCOMES = ("supported", "unsupported", "unreachable", "refused", "failed")


class FactTally(msgspec.Struct):
    """Pair outcomes of one report, folded in as verdicts arrive."""

    supported: int = 0
    unsupported: int = 0
    unreachable: int = 0
    refused: int = 0
    failed: int = 0

    def add(self, outcome: str, n: int = 1) -> None:
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown FACT outcome {outcome!r}")
        setattr(self, outcome, getattr(self, outcome) + n)

    @property
    def judged(self) -> int:
        """Pairs with a final label under the published convention."""
        return self.supported + self.unsupported + self.unreachable + self.refused

    @property
    def expected(self) -> int:
        return self.judged + self.failed


def accuracy_published(t: FactTally) -> float:
    """supported / all labelled pairs (unreadable pages count as not supported); 0 when
    there is no pair, as published."""
    return t.supported / t.judged if t.judged else 0.0


def accuracy_reachable(t: FactTally) -> float | None:
    """supported / (supported + unsupported): pairs without page text are excluded."""
    n = t.supported + t.unsupported
    return t.supported / n if n else None


def _get(row: Any, name: str, default: Any = None) -> Any:
    return row.get(name, default) if isinstance(row, Mapping) else getattr(row, name, default)


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def fact_suite(rows: Iterable[Any]) -> dict[str, Any]:
    """Suite metrics from FACT score rows (``ScoreRow`` objects or their dicts; rows of
    other methods are ignored; failed rows are counted, not averaged).

    ``c_acc`` = mean per-report ``acc_published`` (the published C.Acc);
    ``c_acc_reachable`` = mean per-report ``acc_reachable`` over reports that have one;
    ``e_cit`` = mean supported pairs per report (E.Cit); also mean pairs, unreachable
    and refused pairs per report.
    """
    acc, acc_r, sup, pairs, unreach, refused = [], [], [], [], [], []
    failed = 0
    for row in rows:
        if _get(row, "method", "fact") != "fact":
            continue
        subs = _get(row, "subscores", {}) or {}
        if _get(row, "status") == "failed" or _get(row, "score") is None:
            failed += 1
            continue
        acc.append(float(subs.get("acc_published", _get(row, "score"))))
        if subs.get("acc_reachable") is not None:
            acc_r.append(float(subs["acc_reachable"]))
        sup.append(float(subs.get("supported", 0)))
        pairs.append(float(subs.get("pairs", 0)))
        unreach.append(float(subs.get("unreachable", 0)))
        refused.append(float(subs.get("refused", 0)))
    return {
        "reports": len(acc),
        "failed_reports": failed,
        "c_acc": _mean(acc),
        "c_acc_reachable": _mean(acc_r),
        "e_cit": _mean(sup),
        "pairs_per_report": _mean(pairs),
        "unreachable_per_report": _mean(unreach),
        "refused_per_report": _mean(refused),
    }


def fact_suite_by_agent(rows: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """:func:`fact_suite` per agent, agents in order of first appearance."""
    groups: dict[str, list[Any]] = {}
    for row in rows:
        groups.setdefault(str(_get(row, "agent", "")), []).append(row)
    return {agent: fact_suite(rs) for agent, rs in groups.items()}


# --------------------------------------------------------------------------- the method


class _UrlResult(msgspec.Struct):
    url: str
    page: str  # page status as fetched
    page_outcome: str  # ok | unreachable | refused
    statements: int  # before de-duplication
    outcomes: list[tuple[str, str]]  # (statement, outcome) after de-duplication
    windows: list[str] = []
    errors: list[str] = []


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
        "page; score = citation accuracy (published convention), also accuracy over reachable pages")
    needs_pages: ClassVar[bool] = True
    options: ClassVar[tuple[Option, ...]] = (
        *page_options(),
        *pair_options(),
        Option("fact-statements-per-call", "statements of one URL judged per support call (0 = all)",
               DEFAULT_STATEMENTS_PER_CALL, "int"),
    )

    async def score(self, ctx: ItemContext) -> MethodResult:
        rp = await report_pairs(ctx, scope=self.opts["statement_scope"], extractor=self.opts["citation_extractor"],
                                chunk_tokens=int(self.opts["extract_chunk_tokens"]))
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
                got = verdicts.get(k)
                result.outcomes.append((s, "failed" if got is None else
                                        "supported" if got == "supported" else "unsupported"))
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
            if results and not pages["ok"]:
                # The published convention scores these pairs as unsupported (0); say why.
                errors.append(f"none of the {len(results)} cited pages could be read; "
                              "acc_published counts their pairs as unsupported")
            status = "partial" if (tally.failed or errors or rp.chunks_failed) else "ok"
            score = accuracy_published(tally)
        subscores: dict[str, float | None] = {
            "acc_published": None if score is None else score,
            "acc_reachable": accuracy_reachable(tally),
            "supported": float(tally.supported),
            "unsupported": float(tally.unsupported),
            "unreachable": float(tally.unreachable),
            "refused": float(tally.refused),
            "failed": float(tally.failed),
            "pairs": float(tally.expected),
            "pairs_extracted": float(len(rp.pairs)),
            "urls": float(len(results)),
            "pages_ok": float(pages["ok"]),
        }
        return MethodResult(score=score, subscores=subscores, judged=tally.judged, expected=tally.expected,
                            status=status, errors=errors[:50], details=details)
