"""Continuation-based leakage check (DeepResearch Arena): similarity between a model's
continuation of a task's first half and the task's true second half.

``string`` = 2 |LCS| / (|a| + |b|) over characters, ``tfidf`` = cosine of TF-IDF
vectors, ``overlap`` = |words(a) & words(b)| / |words(b)| (b is the true suffix);
``composite`` = 0.4 string + 0.4 tfidf + 0.2 overlap; leaked when composite > 0.7.
Pure functions only; the judge call lives in :mod:`drscore.engine.methods.tasks.tools`.
"""
from __future__ import annotations

import math
import re
from collections import Counter

import msgspec

THRESHOLD = 0.7
# A task shorter than this (in words) is not split: there is nothing to reproduce.
MIN_WORDS = 4
W_STRING, W_TFIDF, W_OVERLAP = 0.4, 0.4, 0.2

# Clause and sentence punctuation where a task may be split, ASCII and CJK.
SPLIT_PUNCTUATION = frozenset(",.;:!?，。；：！？、")
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
# A word is a run of letters/digits, except that each CJK character is a word of its
# own (CJK text has no spaces, and whole runs would never match).
_WORD = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")


class LeakageScores(msgspec.Struct, frozen=True):
    string: float
    tfidf: float
    overlap: float
    composite: float
    leaked: bool


def _ascii_alnum(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def split_at_middle_punctuation(text: str) -> tuple[str, str]:
    """Split ``text`` at the punctuation mark nearest its middle; the mark starts the
    suffix, as the paper defines prefix = T[:i*] and suffix = T[i*:]. A mark between two
    ASCII letters or digits ("3.5", "1,000", "e.g") is not a split point, nor is a mark
    that would leave an empty prefix or a suffix of the mark alone.
    Without any mark, split at the whitespace nearest the middle, else at the middle
    character. Ties go to the earlier position. Both parts are stripped."""
    text = text.strip()
    if not text:
        return "", ""
    middle = len(text) / 2

    def usable(i: int) -> bool:
        if text[i] not in SPLIT_PUNCTUATION:
            return False
        inside = 0 < i < len(text) - 1 and _ascii_alnum(text[i - 1]) and _ascii_alnum(text[i + 1])
        return not inside and 0 < i < len(text) - 1  # a first or final mark leaves a part empty

    candidates = [i for i in range(len(text)) if usable(i)]
    if candidates:
        cut = min(candidates, key=lambda i: abs(i - middle))
    else:
        spaces = [i for i, ch in enumerate(text) if ch.isspace()]
        cut = min(spaces, key=lambda i: abs(i - middle)) if spaces else len(text) // 2
    return text[:cut].strip(), text[cut:].strip()


def lcs_length(a: str, b: str) -> int:
    """Length of the longest common subsequence of two strings (characters).

    Bit-parallel (Allison-Dix / Hyyrö): one big-integer step per character of ``b``,
    so a few thousand characters take milliseconds instead of an O(n*m) Python loop."""
    if not a or not b:
        return 0
    masks: dict[str, int] = {}
    for i, ch in enumerate(a):
        masks[ch] = masks.get(ch, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for ch in b:
        u = v & masks.get(ch, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def string_similarity(a: str, b: str) -> float:
    """``2 |LCS(a, b)| / (|a| + |b|)``; 0 when both are empty."""
    if not a and not b:
        return 0.0
    return 2.0 * lcs_length(a, b) / (len(a) + len(b))


def words(text: str) -> list[str]:
    """Lower-cased word tokens (each CJK character is one token)."""
    return _WORD.findall(text.lower())


def tfidf_cosine(a: str, b: str) -> float:
    """Cosine of the TF-IDF vectors of ``a`` and ``b``, fitted on just these two texts
    with smoothed idf, ``idf(t) = ln((1 + n) / (1 + df(t))) + 1`` with n = 2 (the
    scikit-learn default), raw term counts as tf."""
    ta, tb = Counter(words(a)), Counter(words(b))
    if not ta or not tb:
        return 0.0
    idf = {t: math.log(3.0 / (1.0 + (t in ta) + (t in tb))) + 1.0 for t in ta.keys() | tb.keys()}
    va = {t: c * idf[t] for t, c in ta.items()}
    vb = {t: c * idf[t] for t, c in tb.items()}
    dot = sum(w * vb[t] for t, w in va.items() if t in vb)
    norm = math.sqrt(sum(w * w for w in va.values())) * math.sqrt(sum(w * w for w in vb.values()))
    return dot / norm if norm else 0.0


def word_overlap(candidate: str, reference: str) -> float:
    """Share of the reference's unique words that the candidate also uses."""
    ref = set(words(reference))
    if not ref:
        return 0.0
    return len(ref & set(words(candidate))) / len(ref)


def composite(string: float, tfidf: float, overlap: float) -> float:
    """``0.4 string + 0.4 tfidf + 0.2 overlap``."""
    return W_STRING * string + W_TFIDF * tfidf + W_OVERLAP * overlap


def leakage_scores(continuation: str, suffix: str, threshold: float = THRESHOLD) -> LeakageScores:
    """All three similarities between a continuation and the true suffix, their
    composite, and whether it exceeds ``threshold`` (strictly)."""
    continuation, suffix = continuation.strip(), suffix.strip()
    s = string_similarity(continuation, suffix)
    t = tfidf_cosine(continuation, suffix)
    o = word_overlap(continuation, suffix)
    c = composite(s, t, o)
    return LeakageScores(string=s, tfidf=t, overlap=o, composite=c, leaked=c > threshold)
