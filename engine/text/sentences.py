"""Sentence boundaries in report text, English and Chinese.

CJK terminators (``。！？``) always end a sentence; ASCII ones (``. ! ?``) only before
whitespace or the end, and not after a known abbreviation or initials, nor before a
lower-case word ("e.g. the"), so decimals, URLs and "U.S. policy" stay whole.
"""
from __future__ import annotations

import re

__all__ = ["boundaries", "split_sentences"]

# Sentence boundaries: CJK terminators always end a sentence; ASCII ones only before
# whitespace (so "3.5", "e.g.the" and URLs are not split).
BOUNDARY = re.compile(r"(?:[。！？]+|[!?]+|\.+)[”’\"'」』）)\]]*")
_ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st vs etc e.g eg i.e ie al fig figs no nos vol vols pp p
    inc ltd co corp dept est approx ca cf u.s u.k u.n e.u jan feb mar apr jun jul aug sep
    sept oct nov dec mt ft op ed eds rev gen gov sen rep ph.d""".split()
)
_INITIALS = re.compile(r"^(?:[a-z]\.)*[a-z]$")  # "J. Smith", "A.M. Best", "U.S.A."

def boundaries(clean: str) -> list[int]:
    """Start offsets of the sentences of ``clean`` (always begins with 0)."""
    starts = [0]
    n = len(clean)
    for m in BOUNDARY.finditer(clean):
        end = m.end()
        first = clean[m.start()]
        if first not in "。！？":
            # ASCII terminator: needs whitespace (or the end) after it.
            if end < n and not clean[end].isspace():
                continue
            if first == ".":
                token_start = clean.rfind(" ", 0, m.start()) + 1
                token = clean[token_start:m.start()].lower().lstrip("(\"'*_")
                if token in _ABBREVIATIONS or _INITIALS.match(token):
                    continue
            j = end
            while j < n and clean[j].isspace():
                j += 1
            if j < n and clean[j].islower():
                continue  # "e.g. the", "approx. three"
        while end < n and clean[end].isspace():
            end += 1
        if end < n and end != starts[-1]:
            starts.append(end)
    return starts


def split_sentences(text: str) -> list[str]:
    """Split plain text into sentences (English and Chinese terminators)."""
    starts = boundaries(text)
    bounds = starts[1:] + [len(text)]
    return [s for a, b in zip(starts, bounds) if (s := text[a:b].strip())]
