"""Offline (lexical) baselines for Rigorous Bench rubrics and keywords, task Elo and the
leakage continuation. Deterministic and fast; every answer is a heuristic, not a
judgement, and outputs made with them are labelled "offline".

* ``rigorous_rubric``: share of the item's key terms (content words of the question,
  lightly stemmed) found in the report, where structural words such as "headings",
  "table" or "citations" are checked against the report's markdown instead, mapped onto the allowed labels
  from most to fewest points.
* ``rigorous_keyword``: relevance from the keyword's frequency, +1 when it appears in a
  heading or in the first tenth of the text.
* ``elo_compare``: the more specific task wins (length, numbers, explicit constraints);
  confidence grows with the gap.
* ``leakage_continue``: a fixed, generic continuation. It never reproduces a task, so
  the offline leakage check only exercises the pipeline and always reports "not leaked".
"""
from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from typing import Any

from drscore.engine.methods.rigorous.drift import count_keyword
from drscore.judge.offline import rule

GENERIC_CONTINUATION = (
    "and summarise the findings in a structured report that cites its sources, states its "
    "assumptions and ends with recommendations."
)

_TOKEN = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")
_STOP = frozenset("""
a about above across after again against all also an and any are as at be because been
before being between both but by can could did do does doing done during each either else
etc for from further had has have having how however if in into is it its itself just more
most must no nor not of off on once only or other others our out over own per same should
so some such than that the their them then there these they this those through to too under
until up upon very was were what when where whether which while who whom why will with
within without would yes you your
report reports explicitly clearly correctly accurately precisely thoroughly systematically
mention mentions mentioned state states stated describe describes described provide provides
provided include includes included discuss discusses discussed explain explains explained
present presents use uses using least well whole give gives given say says e.g i.e
""".split())
_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ed", "es", "ly", "s")

# Structural cues: if the rubric mentions the left pattern, the report must show the
# right markdown feature (checked on the raw report text).
_CUES: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...] = (
    (re.compile(r"heading|subheading|markdown|section", re.I), re.compile(r"^\s{0,3}#{1,6}\s", re.M)),
    (re.compile(r"\blists?\b|bullet", re.I), re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S", re.M)),
    (re.compile(r"table|chart|visual", re.I), re.compile(r"^\s*\|.*\|\s*$", re.M)),
    (re.compile(r"citation|cite|source|reference|link", re.I), re.compile(r"https?://|\[\d{1,3}\]")),
    (re.compile(r"\bdata\b|statistic|quantitative|figure|number|percent", re.I),
     re.compile(r"\d+(?:[.,]\d+)?\s*(?:%|percent|million|billion)", re.I)),
)


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def key_terms(rubric: str, drop: Sequence[re.Pattern[str]] = ()) -> list[str]:
    """Stemmed content words of a rubric question, unique, in order; words matching a
    ``drop`` pattern are left out."""
    out: dict[str, None] = {}
    for tok in _TOKEN.findall(rubric.lower()):
        if tok in _STOP or (len(tok) < 3 and not tok.isdigit()) or any(p.search(tok) for p in drop):
            continue
        out.setdefault(_stem(tok))
    return list(out)


@functools.lru_cache(maxsize=16)
def _report_stems(report: str) -> frozenset[str]:
    # One report is graded against dozens of items: tokenise it once.
    return frozenset(_stem(t) for t in _TOKEN.findall(report.lower()))


def rubric_coverage(rubric: str, report: str) -> tuple[int, int]:
    """(found, total) over the rubric's key terms and structural cues."""
    cues = [(mention, feature) for mention, feature in _CUES if mention.search(rubric)]
    # A structural word ("headings") is checked on the markdown, not as a term.
    terms = key_terms(rubric, [mention for mention, _ in cues])
    stems = _report_stems(report)
    found = sum(1 for t in terms if t in stems) + sum(1 for _, feature in cues if feature.search(report))
    return found, len(terms) + len(cues)


def _enum(schema: dict[str, Any], field: str) -> list[Any]:
    prop = schema.get("properties", {}).get(field, {})
    if "enum" in prop:
        return list(prop["enum"])
    if "const" in prop:
        return [prop["const"]]
    raise ValueError(f"schema field {field!r} has no enum")


_CHOICE_LINE = re.compile(r"^- (?P<label>[^:\n]+): (?P<points>\d+(?:\.\d+)?) points?\b", re.M)


def labels_by_points(choices: str, allowed: list[Any]) -> list[str]:
    """Allowed labels from most to fewest points, read from the rendered ``choices``
    list (the schema's enum order is not meaningful: msgspec sorts it)."""
    found = [(m.group("label"), float(m.group("points"))) for m in _CHOICE_LINE.finditer(choices)]
    ordered = [label for label, _ in sorted(found, key=lambda lp: -lp[1]) if label in allowed]
    if not ordered:
        raise ValueError("no allowed label found in the rendered choices")
    return ordered


def label_for_coverage(labels: list[str], coverage: float) -> str:
    """Map coverage in [0, 1] onto labels ordered from most to fewest points: the range
    is cut into equal bands, the best band first."""
    n = len(labels)
    index = min(n - 1, int((1.0 - coverage) * n))
    return labels[max(index, 0)]


@rule("rigorous_rubric")
def rubric_label(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    labels = labels_by_points(variables["choices"], _enum(schema, "label"))
    found, total = rubric_coverage(variables["rubric"], variables["report"])
    coverage = found / total if total else 0.0
    return {"reason": f"offline baseline: {found} of {total} key terms of the item occur in the report",
            "label": label_for_coverage(labels, coverage)}


def keyword_relevance(report: str, keyword: str) -> int:
    """1-5 from frequency (0 -> 1, 1 -> 2, 2-3 -> 3, 4+ -> 4), +1 when the keyword is in
    a heading or first occurs in the first tenth of the text; capped at 5."""
    freq = count_keyword(report, keyword)
    if freq == 0:
        return 1
    base = 2 if freq == 1 else 3 if freq <= 3 else 4
    low, kw = report.lower(), keyword.strip().lower()
    early = low.find(kw) < max(len(low) // 10, 1)
    in_heading = any(kw in line for line in low.splitlines() if line.lstrip().startswith("#"))
    return min(5, base + (1 if early or in_heading else 0))


@rule("rigorous_keyword")
def keyword_rule(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    rel = keyword_relevance(variables["report"], variables["keyword"])
    return {"reason": f"offline baseline: frequency and position give relevance {rel}", "relevance": rel}


_CONSTRAINT = re.compile(
    r"\d+|\b(?:must|should|including|include|compare|comparison|each|specific|at least|between|"
    r"quantif\w*|evaluate|assess|deliver\w*|analy[sz]\w*)\b|[，,;；:：]",
    re.I,
)
_WORDISH = re.compile(r"[\u3400-\u9fff]|[A-Za-z0-9]+")


def specificity(task: str) -> float:
    """How specific a task text is: log length plus half a point per explicit
    constraint (numbers, comparisons, required deliverables, clause breaks)."""
    return math.log1p(len(_WORDISH.findall(task))) + 0.5 * len(_CONSTRAINT.findall(task))


@rule("elo_compare")
def compare_rule(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    a, b = specificity(variables["task_a"]), specificity(variables["task_b"])
    winner = "A" if a >= b else "B"
    confidence = 0.5 + 0.5 * abs(a - b) / (a + b) if a + b > 0 else 0.5
    return {"reason": f"offline baseline: specificity A={a:.2f}, B={b:.2f}",
            "winner": winner, "confidence": round(min(max(confidence, 0.5), 1.0), 4)}


@rule("leakage_continue")
def continuation_rule(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    return {"continuation": GENERIC_CONTINUATION}
