"""Offline (lexical/heuristic) rules for the DeepResearch-ReportEval prompts.

Baselines, not judges: deterministic, fast, and explained in their own justification.

* ``quality``: five 0-4 scores from surface features of the report
  (:func:`report_features`): size, heading structure, lexical diversity, repeated
  sentences, citation density and the density of reasoning connectives.
* ``redundancy_pair``: how much of the shorter passage's phrasing (4-character CJK /
  12-character other shingles, :func:`drscore.engine.text.similarity.containment`) recurs in the
  other passage; high overlap gives a low score.
"""
from __future__ import annotations

import re
from typing import Any

import msgspec

from drscore.engine.text.segment import segment
from drscore.engine.text.similarity import containment
from drscore.engine.runtime.calls.tokens import estimate_tokens
from drscore.judge.offline import rule

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+\S", re.MULTILINE)
_CITATION = re.compile(r"\[\^?\d+(?:\s*[,，\-–]\s*\d+)*\]|https?://")
# Words, or single CJK characters (Chinese has no spaces to split words on).
_TOKEN = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?|[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|[。！？；\n]+")
# Connectives that mark explanation, contrast, inference or comparison: a rough proxy
# for analysis as opposed to a list of facts. Counted as whole words (English) or
# substrings (Chinese).
_REASONING_EN = re.compile(
    r"\b(because|therefore|thus|hence|however|whereas|although|consequently|implies|"
    r"suggests?|indicates?|means that|in contrast|compared (?:with|to)|as a result|"
    r"due to|driven by|trade-?offs?|which explains|this shows|on the other hand)\b"
)
_REASONING_ZH = re.compile(
    r"因此|因为|所以|然而|但是|不过|表明|意味着|导致|相比|反映|由于|从而|说明|可见|"
    r"换言之|一方面|另一方面|原因|取决于|趋势"
)
MATTR_WINDOW = 50  # tokens per window of the moving-average type-token ratio


class ReportFeatures(msgspec.Struct, frozen=True):
    """Surface measurements of a report that the offline quality rule scores."""

    tokens: int  # estimated LLM tokens (engine.tokens)
    headings: int
    paragraphs: int
    cited_share: float  # share of paragraphs with a citation marker or URL
    diversity: float  # moving-average type-token ratio, 0-1
    repeated_share: float  # share of sentences that occur more than once
    reasoning_per_1k: float  # reasoning connectives per 1,000 tokens


def _band(value: float, cuts: tuple[float, float, float, float]) -> int:
    """0-4: how many of the four increasing ``cuts`` ``value`` reaches."""
    return sum(value >= c for c in cuts)


def _word_tokens(text: str) -> list[str]:
    """Lower-cased words and single CJK characters, in text order."""
    return _TOKEN.findall(text.lower())


def moving_ttr(tokens: list[str], window: int = MATTR_WINDOW) -> float:
    """Mean type-token ratio over sliding windows of ``window`` tokens (the whole
    list when shorter): lexical diversity that does not fall with length.
    E.g. ["a", "b", "a", "c"] with window 2: windows ab, ba, ac -> 1, 1, 1 -> 1.0;
    with window 3: aba (2/3), bac (3/3) -> 5/6."""
    if not tokens:
        return 0.0
    if len(tokens) <= window:
        return len(set(tokens)) / len(tokens)
    counts: dict[str, int] = {}
    for t in tokens[:window]:
        counts[t] = counts.get(t, 0) + 1
    total = len(counts)
    for start in range(1, len(tokens) - window + 1):
        out, inn = tokens[start - 1], tokens[start + window - 1]
        counts[out] -= 1
        if not counts[out]:
            del counts[out]
        counts[inn] = counts.get(inn, 0) + 1
        total += len(counts)
    return total / (len(tokens) - window + 1) / window


def report_features(text: str) -> ReportFeatures:
    """Measure ``text`` (markdown) for the offline quality rule."""
    paragraphs = segment(text, "paragraphs", min_chars=1)
    body = "\n\n".join(p.text for p in paragraphs)
    tokens = estimate_tokens(body)
    words = _word_tokens(body)
    sentences = [" ".join(s.split()).lower() for s in _SENTENCE_END.split(body)]
    sentences = [s for s in sentences if len(s) >= 20]
    seen: dict[str, int] = {}
    for s in sentences:
        seen[s] = seen.get(s, 0) + 1
    repeated = sum(n for n in seen.values() if n > 1)
    low = body.lower()
    reasoning = len(_REASONING_EN.findall(low)) + len(_REASONING_ZH.findall(low))
    return ReportFeatures(
        tokens=tokens,
        headings=len(_HEADING.findall(text)),
        paragraphs=len(paragraphs),
        cited_share=(sum(bool(_CITATION.search(p.text)) for p in paragraphs) / len(paragraphs)
                     if paragraphs else 0.0),
        diversity=moving_ttr(words),
        repeated_share=repeated / len(sentences) if sentences else 0.0,
        reasoning_per_1k=1000.0 * reasoning / tokens if tokens else 0.0,
    )


def quality_scores(f: ReportFeatures) -> dict[str, int]:
    """Five 0-4 scores from :class:`ReportFeatures` (cut points set on the 100 real
    DeepResearch Bench reports so that they spread over the scale):

    * comprehensiveness: size (tokens 300/800/1800/3500) and heading count
      (1/3/6/12), weighted 2:1;
    * coherence: heading count, minus 1 when a text over 800 tokens has fewer than
      3 paragraphs (a wall of text);
    * clarity: lexical diversity (MATTR 0.70/0.76/0.80/0.84; the real reports span
      0.75-0.88), minus 1 or 2 when 5% or 15% of sentences are repeated verbatim;
    * insightfulness: reasoning connectives per 1k tokens (1/2.5/4/6) and the share of
      cited paragraphs (0.1/0.3/0.5/0.7), weighted 2:1;
    * overall: the rounded mean of the four.
    """
    size = _band(f.tokens, (300, 800, 1800, 3500))
    structure = _band(f.headings, (1, 3, 6, 12))
    comprehensiveness = round((2 * size + structure) / 3)
    coherence = structure
    if f.paragraphs < 3 and f.tokens > 800:
        coherence -= 1  # long text in one or two blocks
    clarity = _band(f.diversity, (0.70, 0.76, 0.80, 0.84))
    clarity -= 2 if f.repeated_share >= 0.15 else 1 if f.repeated_share >= 0.05 else 0
    reasoning = _band(f.reasoning_per_1k, (1, 2.5, 4, 6))
    cited = _band(f.cited_share, (0.1, 0.3, 0.5, 0.7))
    insightfulness = round((2 * reasoning + cited) / 3)
    scores = {
        "comprehensiveness": comprehensiveness,
        "coherence": coherence,
        "clarity": clarity,
        "insightfulness": insightfulness,
    }
    scores = {k: min(4, max(0, v)) for k, v in scores.items()}
    # Round half up (Python's round() goes to even: 2.5 -> 2).
    scores["overall"] = int(sum(scores.values()) / 4 + 0.5)
    return scores


@rule("quality")
def quality(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Offline answer for ``prompts/quality.md``."""
    f = report_features(str(variables["report"]))
    scores = quality_scores(f)
    justification = (
        f"Offline heuristic baseline, not a reading of the report: about {f.tokens} tokens, "
        f"{f.headings} headings, {f.paragraphs} paragraphs, {f.cited_share:.0%} of paragraphs cite "
        f"sources, lexical diversity {f.diversity:.2f}, {f.repeated_share:.0%} repeated sentences, "
        f"{f.reasoning_per_1k:.1f} reasoning connectives per 1k tokens."
    )
    return {"justification": justification, **scores}


def redundancy_from_overlap(overlap: float) -> int:
    """0-4 redundancy score from the shorter passage's shingle overlap with the other
    (4 = no repetition): >= 0.6 -> 0, >= 0.4 -> 1, >= 0.25 -> 2, >= 0.1 -> 3."""
    return 4 - _band(overlap, (0.1, 0.25, 0.4, 0.6))


@rule("redundancy_pair")
def redundancy_pair(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Offline answer for ``prompts/redundancy_pair.md``."""
    overlap = containment(str(variables["passage_a"]), str(variables["passage_b"]))
    return {
        "reason": (f"Offline heuristic: {overlap:.0%} of the shorter passage's phrasing "
                   "(word-pair / 4-character shingles) also occurs in the other."),
        "score": redundancy_from_overlap(overlap),
    }
