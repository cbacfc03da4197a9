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
import msgspec
import numpy as np

from drscore.engine.runtime.calls.tokens import estimate_tokens

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

    def note(self, relevant_to: str = "the statements") -> str:
        """What the judge is told about the text it sees (part of the prompt)."""
        if self.whole:
            return "the whole text"
        return (f"excerpts only: the {len(self.spans)} passages most relevant to {relevant_to} "
                f"(about {self.tokens} of {self.page_tokens} tokens); [...] marks omitted text")

    def note_zh(self) -> str:
        """:meth:`note` for instructions written in Chinese."""
        if self.whole:
            return "网页全文"
        return (f"仅为节选：与待核查陈述最相关的 {len(self.spans)} 段（约 {self.tokens} / {self.page_tokens} "
                "个 token）；[...] 表示省略的内容")

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


def _cjk_bigram_counts(text: str, spans: list[tuple[int, int]], bigrams: set[str]) -> dict[tuple[int, str], int]:
    """``{(passage, bigram): count}`` for query CJK bigrams, vectorised with numpy (a
    Python loop over every character of a long Chinese page costs milliseconds)."""
    low = text.lower()
    if len(low) != len(text):  # a case mapping changed lengths: offsets would drift
        low = "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in text)
    codes = np.frombuffer(low.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    if codes.size < 2:
        return {}
    pairs = (codes[:-1] << np.uint64(32)) | codes[1:]
    wanted = sorted({(ord(b[0]) << 32) | ord(b[1]) for b in bigrams})
    wanted_arr = np.array(wanted, dtype=np.uint64)
    pos = np.nonzero(np.isin(pairs, wanted_arr))[0]
    if not pos.size:
        return {}
    starts = np.array([a for a, _ in spans], dtype=np.int64)
    ends = np.array([b for _, b in spans], dtype=np.int64)
    k = np.searchsorted(starts, pos, side="right") - 1
    inside = (k >= 0) & (pos + 2 <= ends[np.clip(k, 0, None)])
    pos, k = pos[inside], k[inside]
    which = np.searchsorted(wanted_arr, pairs[pos])
    n = len(wanted)
    names = [chr(code >> 32) + chr(code & 0xFFFFFFFF) for code in wanted]
    keys, counts = np.unique(k * n + which, return_counts=True)
    return {(key // n, names[key % n]): c for key, c in zip(keys.tolist(), counts.tolist())}


def _postings(text: str, spans: list[tuple[int, int]], vocabulary: set[str]) -> dict[str, list[tuple[int, int]]]:
    """``{term: [(passage, count), ...]}`` for the query ``vocabulary``.

    Words and numbers are found per passage with the same regex as :func:`terms`
    (C-level scans), CJK bigrams with :func:`_cjk_bigram_counts`; only query terms
    are counted, since ranking never needs the rest of the page's vocabulary.
    """
    postings: dict[str, list[tuple[int, int]]] = {}
    if not vocabulary:
        return postings
    bigrams = {t for t in vocabulary if len(t) == 2 and _CJK_RUN.fullmatch(t)}
    singles = {t for t in vocabulary if len(t) == 1 and _CJK_RUN.fullmatch(t)}
    words = vocabulary - bigrams - singles
    for k, (a, b) in enumerate(spans):
        low = text[a:b].lower()
        counts: dict[str, int] = {}
        if words:
            for w in _WORD.findall(low):
                if w in words:
                    counts[w] = counts.get(w, 0) + 1
        if singles:  # rare: a query with an isolated CJK character
            for run in _CJK_RUN.findall(low):
                if len(run) == 1 and run in singles:
                    counts[run] = counts.get(run, 0) + 1
        for t, c in counts.items():
            postings.setdefault(t, []).append((k, c))
    if bigrams:
        for (k, t), c in sorted(_cjk_bigram_counts(text, spans, bigrams).items()):
            postings.setdefault(t, []).append((k, c))
    return postings


def _bm25(postings: dict[str, list[tuple[int, int]]], lengths: list[int], query: set[str]) -> dict[int, float]:
    """BM25 score of the passages that contain a ``query`` term (length in chars)."""
    n = len(lengths)
    scores: dict[int, float] = {}
    if not n:
        return scores
    avg = (sum(lengths) / n) or 1.0
    for t in query:
        plist = postings.get(t)
        if not plist:
            continue
        d = len(plist)
        idf = math.log(1 + (n - d + 0.5) / (d + 0.5))
        for k, f in plist:
            norm = _K1 * (1 - _B + _B * lengths[k] / avg)
            scores[k] = scores.get(k, 0.0) + idf * f * (_K1 + 1) / (f + norm)
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
    postings = _postings(text, spans, set().union(*query_terms) if query_terms else set())
    rankings: list[list[int]] = []
    for q in query_terms:
        scores = _bm25(postings, lengths, q)
        rankings.append(sorted((i for i, sc in scores.items() if sc > 0), key=lambda i: (-scores[i], i)))

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

        def distance(j: int) -> int:
            k = bisect.bisect_left(seeds, j)
            near = [abs(seeds[x] - j) for x in (k - 1, k) if 0 <= x < len(seeds)]
            return min(near)

        for j in sorted((j for j in range(len(spans)) if j not in chosen), key=lambda j: (distance(j), j)):
            if used + smallest > budget_tokens:
                break
            take(j)
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
