"""Rigorous Bench formulas: keyword counts, SemanticDrift, TSL matching,
TrustworthyBoost, Quality, IntegratedScore and the supplementary efficiency metrics.

Every function here is pure (no I/O, no judge); the method module
:mod:`drscore.engine.methods.rigorous.method` gathers the judge verdicts and calls these. Parameter
defaults are the published ones (METHODS.md §4).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

import msgspec

# Published parameters.
ALPHA = 0.5  # weight of the query-specific rubrics in Quality
BETA = 0.5  # weight of the general-report rubrics in Quality
EPS_PLUS = 2.0  # expected occurrences of a focus-anchor keyword
EPS_MINUS = 1.0  # occurrences at which a focus-deviation keyword counts fully
LAMBDA = 0.7  # weight of FAK drift in SemanticDrift
MU = 0.3  # weight of FDK drift in SemanticDrift
ETA = 0.2  # size of the trust boost
THETA = 0.7  # weight of full TSL matches
KAPPA = 0.3  # weight of host-only TSL matches
RELEVANCE_MAX = 5


class KeywordScore(msgspec.Struct, frozen=True):
    """One keyword's frequency in the report and the judge's 1-5 relevance rating."""

    keyword: str
    freq: int
    relevance: int


class TslMatch(msgspec.Struct, frozen=True):
    """Counts behind TrustworthyBoost (see :func:`match_tsl`)."""

    match_full: int
    match_host: int
    n_tsl: int
    n_annotations: int


# --------------------------------------------------------------------------- keywords

def count_keyword(text: str, keyword: str) -> int:
    """Occurrences of ``keyword`` in ``text`` as a case-insensitive substring
    (non-overlapping), as the benchmark's own code counts them. Pass the report text
    with citations already removed."""
    needle = keyword.strip().lower()
    if not needle:
        return 0
    return text.lower().count(needle)


def _keyword_term(freq: int, relevance: int, eps: float) -> float:
    if not 1 <= relevance <= RELEVANCE_MAX:
        raise ValueError(f"relevance must be in 1..{RELEVANCE_MAX}, got {relevance}")
    if freq < 0:
        raise ValueError(f"frequency must be >= 0, got {freq}")
    return min(freq / eps, 1.0) * relevance / RELEVANCE_MAX


def fak_drift(scores: Sequence[KeywordScore], eps_plus: float = EPS_PLUS) -> float | None:
    """``1 - (1/K) sum_k min(freq_k / eps_plus, 1) * rel_k / 5``; None without keywords.
    High when the report leaves out or barely touches its focus-anchor keywords."""
    if not scores:
        return None
    return 1.0 - sum(_keyword_term(s.freq, s.relevance, eps_plus) for s in scores) / len(scores)


def fdk_drift(scores: Sequence[KeywordScore], eps_minus: float = EPS_MINUS) -> float | None:
    """``(1/L) sum_l min(freq_l / eps_minus, 1) * rel_l / 5``; None without keywords.
    High when the report dwells on its focus-deviation keywords."""
    if not scores:
        return None
    return sum(_keyword_term(s.freq, s.relevance, eps_minus) for s in scores) / len(scores)


def semantic_drift(fak: float, fdk: float, lam: float = LAMBDA, mu: float = MU) -> float:
    """``lambda * FAK_drift + mu * FDK_drift`` (in [0, 1] for lambda + mu = 1)."""
    return lam * fak + mu * fdk


# --------------------------------------------------------------------------- quality

def rubric_ratio(points: float, max_points: float) -> float | None:
    """Share of the attainable points; None when nothing was attainable."""
    if max_points <= 0:
        return None
    return points / max_points


def quality(qsr_ratio: float, grr_ratio: float, alpha: float = ALPHA, beta: float = BETA) -> float:
    """``alpha * QSR share + beta * GRR share``."""
    return alpha * qsr_ratio + beta * grr_ratio


# --------------------------------------------------------------------------- sources

def normalize_url(url: str) -> str:
    """Normalise a URL for TSL matching: lower-case scheme, host and path; drop the
    query, fragment, user info and any trailing "/". A bare host
    (``example.org/page``) is read as ``http``-less text and just lower-cased."""
    raw = url.strip()
    parts = urlsplit(raw)
    if not parts.scheme or not parts.netloc:
        # Not an absolute URL: keep what there is, minus query and fragment.
        text = raw.split("#", 1)[0].split("?", 1)[0]
        return text.lower().rstrip("/")
    host = (parts.hostname or "").lower()
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme.lower()}://{host}{parts.path.lower()}".rstrip("/")


def url_host(url: str) -> str:
    """Lower-case host name of ``url`` ("" when it has none)."""
    parts = urlsplit(url.strip())
    if parts.hostname:
        return parts.hostname.lower()
    # A scheme-less "host/path": the host is the first path segment.
    return url.strip().split("/", 1)[0].split("?", 1)[0].lower() if "." in url else ""


def unique_normalized(urls: Iterable[str]) -> list[str]:
    """Normalised URLs, duplicates (after normalisation) removed, first-seen order."""
    seen: dict[str, None] = {}
    for u in urls:
        n = normalize_url(u)
        if n:
            seen.setdefault(n, None)
    return list(seen)


# "code": the authors' released code (the published numbers): (TSL, cited URL) pairs, and
# the host term counts host matches that are not full matches.
# "paper-formula": the paper's equation, match_host / (T + 1) with match_host the cited
# links sharing a TSL's host name (full matches included, nothing subtracted).
TSL_COUNTING = ("code", "paper-formula")


def match_tsl(tsl: Sequence[str], cited: Sequence[str], counting: str = "code") -> TslMatch:
    """Match trusted source links against the URLs a report cites. Both lists are
    normalised and de-duplicated first; ``n_annotations`` (T) is the number of distinct
    cited URLs.

    ``counting="code"`` (the authors' code, METHODS.md): ``match_full`` counts
    (TSL, cited URL) pairs where the normalised TSL URL is a substring of the normalised
    cited URL, ``match_host`` pairs where the TSL's host name is.
    ``counting="paper-formula"`` (the paper's equation): ``match_full`` counts TSLs
    matched by at least one cited URL, ``match_host`` cited URLs whose text contains any
    TSL host."""
    if counting not in TSL_COUNTING:
        raise ValueError(f"counting must be one of {TSL_COUNTING}, not {counting!r}")
    tsl_n = unique_normalized(tsl)
    cited_n = unique_normalized(cited)
    hosts = [h for h in (url_host(t) for t in tsl_n) if h]
    if counting == "code":
        full = sum(1 for t in tsl_n for c in cited_n if t in c)
        host = sum(1 for h in hosts for c in cited_n if h in c)
    else:
        full = sum(1 for t in tsl_n if any(t in c for c in cited_n))
        host = sum(1 for c in cited_n if any(h in c for h in hosts))
    return TslMatch(match_full=full, match_host=host, n_tsl=len(tsl_n), n_annotations=len(cited_n))


def trustworthy_boost(m: TslMatch, eta: float = ETA, theta: float = THETA, kappa: float = KAPPA, *,
                      counting: str = "code") -> float:
    """``1 + eta * (theta * match_full / |TSL| + kappa * host_rate)``. A bundle without
    TSLs contributes no full-match term.

    ``counting="code"``: host_rate = (match_host - match_full) / (T + 1), as the authors'
    code (a negative difference counts as zero); several TSLs on one host can push it
    above 1 (and the boost above 1 + eta), returned as the formula gives it.
    ``counting="paper-formula"``: host_rate = match_host / (T + 1), as the paper's
    equation; it stays within [0, 1] since each cited link counts once."""
    if counting not in TSL_COUNTING:
        raise ValueError(f"counting must be one of {TSL_COUNTING}, not {counting!r}")
    full_rate = m.match_full / m.n_tsl if m.n_tsl else 0.0
    host = m.match_host if counting == "paper-formula" else max(m.match_host - m.match_full, 0)
    return 1.0 + eta * (theta * full_rate + kappa * host / (m.n_annotations + 1))


# --------------------------------------------------------------------------- totals

def integrated_score(quality_value: float, drift: float, boost: float) -> float:
    """``Quality * (1 - SemanticDrift) * TrustworthyBoost * 100``."""
    return quality_value * (1.0 - drift) * boost * 100.0


def _count(value: Any) -> int | None:
    """A usage entry given as a number or as a list of items."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, (list, tuple)):
        return len(value)
    return None


def contribution_per_token(score: float, usage: dict[str, Any] | None) -> float | None:
    """``IntegratedScore / (total_tokens - input_tokens)`` when the report's usage gives
    both and the difference (tokens the agent produced) is positive."""
    if not usage:
        return None
    total, inp = _count(usage.get("total_tokens")), _count(usage.get("input_tokens"))
    if total is None or inp is None or total - inp <= 0:
        return None
    return score / (total - inp)


def retrieval_index(usage: dict[str, Any] | None, n_cited: int) -> float | None:
    """``annotated links / (retrieved links + 1)`` when the usage metadata gives
    ``retrieved_links`` (a count or a list). ``annotated_links`` defaults to the number
    of distinct URLs cited in the report."""
    if not usage:
        return None
    retrieved = _count(usage.get("retrieved_links"))
    if retrieved is None or retrieved < 0:
        return None
    annotated = _count(usage.get("annotated_links"))
    if annotated is None:
        annotated = n_cited
    return annotated / (retrieved + 1)


# --------------------------------------------------------------------------- per domain

def domain_of(task_id: str) -> str:
    """Rigorous Bench domain code: the first two characters of the uid."""
    return task_id[:2]


def domain_breakdown(rows: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Per-domain means of ``score`` and every subscore over score rows (ScoreRow
    objects or dicts with the same fields). The domain is ``details["domain"]`` when
    present, else the first two characters of ``task_id``. Rows without a score are
    counted in ``n_failed`` and left out of the means; a subscore's mean is taken over
    the rows that have it. Domains come out sorted."""
    sums: dict[str, dict[str, list[float]]] = {}
    failed: dict[str, int] = {}
    for row in rows:
        get = row.get if isinstance(row, dict) else (lambda k, d=None, r=row: getattr(r, k, d))
        details = get("details") or {}
        domain = details.get("domain") or domain_of(str(get("task_id")))
        acc = sums.setdefault(domain, {})
        failed.setdefault(domain, 0)
        score = get("score")
        if score is None:
            failed[domain] += 1
            continue
        acc.setdefault("score", []).append(float(score))
        for name, value in (get("subscores") or {}).items():
            if value is not None:
                acc.setdefault(name, []).append(float(value))
    out: dict[str, dict[str, Any]] = {}
    for domain in sorted(sums):
        acc = sums[domain]
        entry: dict[str, Any] = {"n": len(acc.get("score", [])), "n_failed": failed[domain]}
        for name, values in acc.items():
            entry[name] = sum(values) / len(values)
        out[domain] = entry
    return out
