"""Offline (lexical) rules for the claim-level prompts of FACT, factuality and KAE.

Baselines, not judges: deterministic, fast, explainable. Terms are those of
:func:`drscore.engine.text.passages.terms` (words and numbers without stop words; character bigrams
for Chinese/Japanese).

* ``fact_extract``: the citation parser run on the chunk plus the report's URL lines;
  if that finds nothing, sentences naming a cited site's host are paired with it.
* ``fact_dedup``: statements identical once case and punctuation are ignored merge (the
  benchmark's exact-duplicate rule); the first of each group is kept.
* ``fact_dedup_paraphrase`` / ``kae_merge``: greedy grouping of items whose term sets
  overlap (Jaccard >= 0.7); the first item of each group is kept.
* ``fact_support``: supported when at least 60% of the statement's distinct terms
  occur in the page window and every number in the statement occurs there too.
* ``factuality_support``: 1 at >= 70% coverage with all numbers present, 0 at >= 40%,
  else -1.
* ``kae_keypoints``: the window's sentences sharing the most terms with the task,
  each quoted verbatim as its own span.
* ``kae_label``: SUPPORTS when at least half of the key point's terms occur in the
  report, else OMITS (the lexical rule never claims a contradiction).
"""
from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from drscore.engine.text.citations import parse_citations, split_sentences
from drscore.engine.text.passages import GAP, terms
from drscore.judge.offline import rule

SUPPORT_COVERAGE = 0.6
FULL_COVERAGE, PARTIAL_COVERAGE = 0.7, 0.4
LABEL_COVERAGE = 0.5
DUPLICATE_JACCARD = 0.7
MAX_POINT_WORDS = 40

_NUMBERED = re.compile(r"^\[(\d+)\]\s?(.*)$", re.MULTILINE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_URL = re.compile(r"https?://[^\s<>\]\[)(\"']+")


def numbered_items(text: str) -> list[str]:
    """Items of a ``[1] ...`` / ``[2] ...`` list, in number order."""
    found = {int(n): item.strip() for n, item in _NUMBERED.findall(text)}
    return [found[k] for k in sorted(found)]


def coverage(claim: str, evidence_terms: set[str]) -> float:
    """Share of the claim's distinct terms present in the evidence (1.0 for no terms)."""
    ts = set(terms(claim))
    return sum(1 for t in ts if t in evidence_terms) / len(ts) if ts else 1.0


def numbers_present(claim: str, evidence: str) -> bool:
    """Every number written in the claim also occurs in the evidence ("1,200" == "1200")."""
    have = {n.replace(",", "") for n in _NUMBER.findall(evidence)}
    return all(n.replace(",", "") in have for n in _NUMBER.findall(claim))


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def keep_distinct(items: list[str], threshold: float = DUPLICATE_JACCARD) -> list[int]:
    """1-based numbers of the first item of each group of near-duplicates."""
    kept: list[tuple[int, set[str]]] = []
    for i, item in enumerate(items, 1):
        ts = set(terms(item))
        if not any(_jaccard(ts, other) >= threshold for _, other in kept):
            kept.append((i, ts))
    return [i for i, _ in kept]


@rule("fact_extract")
def fact_extract(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    chunk, sources = variables["report"], variables.get("sources", "")
    parse = parse_citations(f"{chunk}\n\nReferences\n{sources}")
    pairs = [{"statement": p.statement, "url": p.url} for p in parse.pairs]
    if not pairs:
        hosts: dict[str, str] = {}
        for url in _URL.findall(sources):
            host = (urlsplit(url).hostname or "").removeprefix("www.")
            if host and "." in host:
                hosts.setdefault(host, url.rstrip(".,;"))
        for sentence in split_sentences(chunk):
            low = sentence.lower()
            pairs.extend({"statement": sentence, "url": url} for host, url in hosts.items() if host in low)
    return {"pairs": pairs}


@rule("fact_dedup")
def fact_dedup(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The benchmark's rule: only statements saying exactly the same thing merge; here,
    statements whose words and numbers are identical once case and punctuation are ignored."""
    seen: set[str] = set()
    keep: list[int] = []
    for k, item in enumerate(numbered_items(variables["statements"]), 1):
        norm = " ".join(re.findall(r"\w+", item.lower()))
        if norm not in seen:
            seen.add(norm)
            keep.append(k)
    return {"keep": keep}


@rule("fact_dedup_paraphrase")
def fact_dedup_paraphrase(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    return {"keep": keep_distinct(numbered_items(variables["statements"]))}


@rule("kae_merge")
def kae_merge(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    return {"keep": keep_distinct(numbered_items(variables["keypoints"]))}


@rule("fact_support")
def fact_support(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    page = variables["page"]
    page_terms = set(terms(page))
    out = []
    for i, statement in enumerate(numbered_items(variables["statements"]), 1):
        cov = coverage(statement, page_terms)
        numbers = numbers_present(statement, page)
        verdict = ("supported" if cov >= SUPPORT_COVERAGE and numbers
                   else "partially" if cov >= PARTIAL_COVERAGE else "unsupported")
        out.append({"statement": i, "verdict": verdict})
    return {"judgments": out}


@rule("factuality_support")
def factuality_support(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    page, claim = variables["page"], variables["claim"]
    cov = coverage(claim, set(terms(page)))
    numbers = numbers_present(claim, page)
    score = 1 if cov >= FULL_COVERAGE and numbers else 0 if cov >= PARTIAL_COVERAGE else -1
    reason = f"{cov:.0%} of the claim's terms occur in the source" + ("" if numbers else "; a number is missing")
    return {"reason": reason, "score": score}


def _shorten(sentence: str, max_words: int = MAX_POINT_WORDS) -> str:
    words = sentence.split()
    return sentence if len(words) <= max_words else " ".join(words[:max_words]) + " ..."


@rule("kae_keypoints")
def kae_keypoints(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    task_terms = set(terms(variables["task"]))
    limit = int(variables.get("max_points", 8))
    scored: list[tuple[int, int, str]] = []
    for part in variables["page"].split(GAP.strip()):
        for sentence in split_sentences(part):
            if len(sentence) < 20:
                continue  # too short to be a key point (and to pass the span check)
            hits = len(task_terms & set(terms(sentence)))
            if hits:
                scored.append((-hits, len(scored), sentence))
    best = sorted(scored)[:max(0, limit)]
    best.sort(key=lambda x: x[1])  # page order
    return {"keypoints": [{"point": _shorten(s), "spans": [s]} for _, _, s in best]}


@rule("kae_label")
def kae_label(variables: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    report_terms = set(terms(variables["report"]))
    labels = []
    for i, point in enumerate(numbered_items(variables["keypoints"]), 1):
        supported = coverage(point, report_terms) >= LABEL_COVERAGE
        labels.append({"keypoint": i, "label": "SUPPORTS" if supported else "OMITS"})
    return {"labels": labels}
