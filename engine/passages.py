"""Choosing which part of a long cited page a judge sees.

A page that fits the judge's input budget is shown whole. A longer page is never cut
at an arbitrary length: it is split into passages at paragraph, then sentence, then
word boundaries (about ``passage_tokens`` each), every passage is scored against the
statement(s) being checked with BM25 over words and numbers (character bigrams for
Chinese and Japanese), and the best passages are kept, in page order, until the budget
is spent. With several statements the passages are picked round-robin (each
statement's best, then each one's second best, ...) so one statement cannot starve the
others. The page's first passage (usually its title and lede) is kept when it is
small, and gaps between kept passages are marked with ``[...]``.

The result, :class:`Window`, records the character spans used so the verdict can say
exactly what the judge saw (:meth:`Window.describe`). Pure and CPU-bound: call it
through ``ctx.offload`` from async code.
"""
from __future__ import annotations

import bisect
import math
import re
from collections import Counter

import msgspec

from engine.tokens import estimate_tokens

__all__ = ["Window", "select_passages", "split_passages", "terms"]

GAP = "\n[...]\n"
_GAP_TOKENS = estimate_tokens(GAP)

_WORD = re.compile(r"[a-z0-9]+(?:[.,'][a-z0-9]+)*")
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]+")
_STOP = frozenset(
    """a an and are as at be been but by can could did do does for from had has have he her his
    how i if in into is it its itself may might more most much no nor not of on or our out over
    she should so some such than that the their them then there these they this those to too
    under up very was we were what when where which while who why will with would you your also
    about after all any between both each other only same than s""".split()
)
_PARAGRAPH = re.compile(r"\n\s*\n|\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])")
_SPACE = re.compile(r"\s")
_K1, _B = 1.2, 0.75


class Window(msgspec.Struct, frozen=True):
    """The part of a page shown to the judge.

    ``spans`` are ``(start, end)`` character offsets into the page text, in page order;
    ``tokens`` estimates ``text`` (gap markers included); ``page_tokens`` the whole page.
    """

    text: str
    spans: tuple[tuple[int, int], ...]
    tokens: int
    page_tokens: int
    page_chars: int

    @property
    def whole(self) -> bool:
        """True when the judge sees the entire page."""
        return self.spans == ((0, self.page_chars),) or self.page_chars == 0

    def describe(self) -> str:
        """Short human-readable account of the window, stored with the verdict."""
        if self.whole:
            return f"whole page ({self.page_chars} chars, ~{self.page_tokens} tokens)"
        shown = ",".join(f"{a}-{b}" for a, b in self.spans[:12])
        more = f",+{len(self.spans) - 12} more" if len(self.spans) > 12 else ""
        return (f"{len(self.spans)} passages, chars {shown}{more} of {self.page_chars} "
                f"(~{self.tokens} of ~{self.page_tokens} tokens)")


def terms(text: str) -> list[str]:
    """Index terms: lower-cased words and numbers (stop words dropped) and character
    bigrams of CJK runs (a single CJK character counts as a term by itself)."""
    low = text.lower()
    out = [w for w in _WORD.findall(low) if w not in _STOP and (len(w) > 1 or w.isdigit())]
    for run in _CJK_RUN.findall(low):
        if len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i:i + 2] for i in range(len(run) - 1))
    return out


def _cut_long(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Split ``text[start:end]`` into pieces of at most ``max_chars`` at the last
    whitespace before the limit; CJK text may break between any two characters
    (each is a word). Only a single unbroken token longer than the limit is cut hard."""
    out: list[tuple[int, int]] = []
    while end - start > max_chars:
        limit = start + max_chars
        cut = -1
        for m in _SPACE.finditer(text, start + max_chars // 2, limit):
            cut = m.start()
        if cut <= start:
            cut = limit
            # Step back to a CJK boundary if there is one nearby.
            for k in range(limit, max(start, limit - 64), -1):
                if _CJK_RUN.match(text[k - 1]) or _CJK_RUN.match(text[k]):
                    cut = k
                    break
        out.append((start, cut))
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if start < end:
        out.append((start, end))
    return out


def split_passages(text: str, passage_tokens: int = 160) -> list[tuple[int, int]]:
    """Split ``text`` into ``(start, end)`` passages of roughly ``passage_tokens``.

    Paragraphs (line breaks) first; a paragraph over twice the target is split into
    sentences, and a sentence still too long at word boundaries. Short neighbouring
    pieces are then merged up to the target so passages carry enough context.
    """
    if not text:
        return []
    pieces: list[tuple[int, int]] = []
    pos = 0
    bounds = [(m.start(), m.end()) for m in _PARAGRAPH.finditer(text)] + [(len(text), len(text))]
    for gap_start, gap_end in bounds:
        a, b = pos, gap_start
        pos = gap_end
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a >= b:
            continue
        para = text[a:b]
        if estimate_tokens(para) <= 2 * passage_tokens:
            pieces.append((a, b))
            continue
        # Long paragraph: sentences, then words.
        s = a
        sentence_ends = [a + m.start() for m in _SENTENCE_END.finditer(para)] + [b]
        for e in sentence_ends:
            if e <= s:
                continue
            seg_tokens = estimate_tokens(text[s:e])
            if seg_tokens > 2 * passage_tokens:
                max_chars = max(16, int((e - s) * (passage_tokens / seg_tokens)))
                pieces.extend(_cut_long(text, s, e, max_chars))
            else:
                pieces.append((s, e))
            s = e
            while s < b and text[s].isspace():
                s += 1
    # Merge small neighbours up to the target.
    merged: list[tuple[int, int]] = []
    cur_tokens = 0
    for a, b in pieces:
        t = estimate_tokens(text[a:b])
        if merged and cur_tokens + t <= passage_tokens:
            merged[-1] = (merged[-1][0], b)
            cur_tokens += t
        else:
            merged.append((a, b))
            cur_tokens = t
    return merged


def _term_hits(text: str, spans: list[tuple[int, int]], vocabulary: set[str]) -> list[Counter[str]]:
    """Occurrences of the query ``vocabulary`` in each passage.

    One regular-expression scan of the page finds only the query terms (words and
    numbers as whole tokens; CJK bigrams at every position, overlapping), instead of
    tokenising every passage in Python: this is what keeps a 1 MB page in milliseconds.
    """
    hits: list[Counter[str]] = [Counter() for _ in spans]
    if not vocabulary or not spans:
        return hits
    words = sorted((t for t in vocabulary if not _CJK_RUN.match(t)), key=len, reverse=True)
    cjk = sorted((t for t in vocabulary if _CJK_RUN.match(t)), key=len, reverse=True)
    parts = []
    if words:
        parts.append(r"(?<![a-z0-9])(" + "|".join(map(re.escape, words)) + r")(?![a-z0-9])")
    if cjk:
        parts.append(r"(?=(" + "|".join(map(re.escape, cjk)) + r"))")
    pattern = re.compile("|".join(parts), re.IGNORECASE)
    starts = [a for a, _ in spans]
    for m in pattern.finditer(text):
        term = (m.group(1) if words else None) or m.group(len(parts))
        pos = m.start()
        k = bisect.bisect_right(starts, pos) - 1
        if k >= 0 and pos < spans[k][1]:
            hits[k][term.lower()] += 1
    return hits


def _bm25(hits: list[Counter[str]], lengths: list[int], query: set[str]) -> list[float]:
    """BM25 score of every passage for ``query`` (passage length measured in chars)."""
    n = len(hits)
    if not n or not query:
        return [0.0] * n
    avg = (sum(lengths) / n) or 1.0
    df = {t: sum(1 for c in hits if t in c) for t in query}
    idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items() if d}
    scores = []
    for counts, length in zip(hits, lengths):
        s = 0.0
        if counts:
            norm = _K1 * (1 - _B + _B * length / avg)
            for t, w in idf.items():
                f = counts.get(t, 0)
                if f:
                    s += w * f * (_K1 + 1) / (f + norm)
        scores.append(s)
    return scores


def select_passages(
    text: str,
    queries: str | list[str],
    budget_tokens: int,
    *,
    passage_tokens: int = 160,
) -> Window:
    """The part of ``text`` most relevant to ``queries`` that fits ``budget_tokens``
    (see the module docstring for the rules)."""
    page_tokens = estimate_tokens(text)
    if page_tokens <= budget_tokens:
        return Window(text=text, spans=((0, len(text)),) if text else (), tokens=page_tokens,
                      page_tokens=page_tokens, page_chars=len(text))
    qs = [queries] if isinstance(queries, str) else list(queries)
    spans = split_passages(text, passage_tokens=min(passage_tokens, max(8, budget_tokens // 4)))
    ptokens = [estimate_tokens(text[a:b]) for a, b in spans]
    lengths = [b - a for a, b in spans]
    query_terms = [set(terms(q)) for q in qs]
    hits = _term_hits(text, spans, set().union(*query_terms) if query_terms else set())
    rankings: list[list[int]] = []
    for q in query_terms:
        scores = _bm25(hits, lengths, q)
        ranked = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))
        rankings.append(ranked)

    chosen: set[int] = set()
    used = 0

    def take(i: int) -> bool:
        nonlocal used
        cost = ptokens[i] + _GAP_TOKENS
        if i in chosen or used + cost > budget_tokens:
            return False
        chosen.add(i)
        used += cost
        return True

    if spans and ptokens[0] <= budget_tokens // 10:
        take(0)  # the page's title / lede tells the judge what the page is
    cursors = [0] * len(rankings)
    progress = True
    while progress:
        progress = False
        for qi, ranked in enumerate(rankings):
            while cursors[qi] < len(ranked):
                i = ranked[cursors[qi]]
                cursors[qi] += 1
                if i in chosen:
                    continue
                if take(i):
                    progress = True
                    break
    if not any(rankings):
        # Nothing matched (or no query): show the page from the top.
        for i in range(len(spans)):
            if not take(i) and i not in chosen:
                break
    else:
        # Spend what is left on the context around the matches (a figure is often
        # explained in the next paragraph), nearest neighbours first.
        seeds = sorted(chosen)
        smallest = _GAP_TOKENS + min(ptokens)
        for dist in range(1, len(spans)):
            if used + smallest > budget_tokens:
                break
            in_range = False
            for i in seeds:
                for j in (i - dist, i + dist):
                    if 0 <= j < len(spans):
                        in_range = True
                        if j not in chosen:
                            take(j)
            if not in_range:
                break
    picked = sorted(chosen)
    # Join adjacent passages back into one span (keeping the original text between).
    out_spans: list[tuple[int, int]] = []
    for i in picked:
        a, b = spans[i]
        if out_spans and i - 1 in chosen:
            out_spans[-1] = (out_spans[-1][0], b)
        else:
            out_spans.append((a, b))
    parts = [text[a:b] for a, b in out_spans]
    body = GAP.join(parts)
    if out_spans and out_spans[0][0] > 0:
        body = "[...]\n" + body
    if out_spans and out_spans[-1][1] < len(text.rstrip()):
        body = body + "\n[...]"
    return Window(text=body, spans=tuple(out_spans), tokens=estimate_tokens(body),
                  page_tokens=page_tokens, page_chars=len(text))
