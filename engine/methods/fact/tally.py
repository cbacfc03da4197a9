"""FACT's arithmetic: per-report tallies of pair outcomes and the suite figures, under the
benchmark's convention (its ``utils/stat.py``: unknown excluded, partial support valid,
``valid_rate`` pooled over every pair) and the paper's stricter one. Pure functions; live
runs, :func:`fact_suite` and ``drscore fact rescore`` all aggregate through here.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

OUTCOMES = ("supported", "partially", "unsupported", "unknown", "unreachable", "refused", "failed")


class FactTally(msgspec.Struct):
    """Pair outcomes of one report, folded in as verdicts arrive."""

    supported: int = 0
    partially: int = 0
    unsupported: int = 0
    unknown: int = 0  # the judge found no usable content on the page
    unreachable: int = 0  # no page text at all (fetch failed, "scrape failed")
    refused: int = 0  # the fetch guard refused the address
    failed: int = 0  # no verdict (judge call failed)

    def add(self, outcome: str, n: int = 1) -> None:
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown FACT outcome {outcome!r}")
        setattr(self, outcome, getattr(self, outcome) + n)

    @property
    def labelled(self) -> int:
        """Pairs with a final label (everything but failed judge calls)."""
        return self.supported + self.partially + self.unsupported + self.unknown + self.unreachable + self.refused

    @property
    def judged(self) -> int:
        return self.labelled

    @property
    def expected(self) -> int:
        return self.labelled + self.failed

    @property
    def citations(self) -> int:
        """The benchmark's judged citations: unknown and unreadable pages excluded."""
        return self.supported + self.partially + self.unsupported

    @property
    def valid(self) -> int:
        """The benchmark's valid citations: found entirely or partially on the page."""
        return self.supported + self.partially


def valid_rate(t: FactTally) -> float:
    """The report's valid / citations under the benchmark's convention; 0 when nothing
    could be judged (the benchmark's rule for an empty denominator)."""
    return t.valid / t.citations if t.citations else 0.0


def accuracy_paper(t: FactTally) -> float:
    """The paper's stricter Acc_t: strictly supported / every labelled pair (partial,
    unknown and unreadable pages count as not supported); 0 without pairs."""
    return t.supported / t.labelled if t.labelled else 0.0


def benchmark_figures(reports: int, citations: float, valid: float) -> dict[str, Any]:
    """The benchmark's ``stat.py`` figures from sums over the ``reports`` that have at
    least one citation: citations and valid citations per report, and the pooled
    ``valid_rate`` = Σ valid / Σ citations (0 when nothing was judged). The one
    aggregation used by live runs, :func:`fact_suite` and ``drscore fact rescore``."""
    return {
        "reports": reports,
        "total_citations": citations / reports if reports else None,
        "total_valid_citations": valid / reports if reports else None,
        "valid_rate": valid / citations if citations else 0.0,
    }


def paper_figures(all_reports: int, acc_sum: float, strictly_supported: float) -> dict[str, Any]:
    """The paper's formulas over every report of the suite (uncited ones count 0):
    C.Acc = mean Acc_t (:func:`accuracy_paper`), E.Cit = strictly supported pairs per report."""
    return {
        "reports": all_reports,
        "c_acc_paper": acc_sum / all_reports if all_reports else None,
        "e_cit_paper": strictly_supported / all_reports if all_reports else None,
    }


def suite_from_tallies(tallies: Iterable[FactTally | None]) -> dict[str, Any]:
    """Both conventions for a suite given one tally per report (``None`` for a report
    that cites nothing: skipped by the benchmark, 0 in the paper's means)."""
    n_all = n_cited = 0
    citations = valid = strict = acc = 0.0
    for t in tallies:
        n_all += 1
        if t is None:
            continue
        n_cited += 1
        citations += t.citations
        valid += t.valid
        strict += t.supported
        acc += accuracy_paper(t)
    return {"benchmark": benchmark_figures(n_cited, citations, valid),
            "paper": paper_figures(n_all, acc, strict)}


def _get(row: Any, name: str, default: Any = None) -> Any:
    return row.get(name, default) if isinstance(row, Mapping) else getattr(row, name, default)


def tally_of(subscores: Mapping[str, Any]) -> FactTally:
    """A report's tally back from its row's subscores (the counts are stored there)."""
    return FactTally(**{o: int(subscores.get(o) or 0) for o in OUTCOMES})


def fact_suite(rows: Iterable[Any]) -> dict[str, Any]:
    """Suite figures from FACT score rows (``ScoreRow`` objects or their dicts; rows of
    other methods are ignored). Skipped rows (the report cites nothing) are left out of
    the benchmark figures and count 0 in the paper's; failed rows are counted apart."""
    tallies: list[FactTally | None] = []
    failed = 0
    for row in rows:
        if _get(row, "method", "fact") != "fact":
            continue
        status = _get(row, "status")
        if status == "skipped":
            tallies.append(None)
        elif status == "failed" or _get(row, "score") is None:
            failed += 1
        else:
            tallies.append(tally_of(_get(row, "subscores", {}) or {}))
    out = suite_from_tallies(tallies)
    out["failed_reports"] = failed
    return out


def fact_suite_by_agent(rows: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """:func:`fact_suite` per agent, agents in order of first appearance."""
    groups: dict[str, list[Any]] = {}
    for row in rows:
        groups.setdefault(str(_get(row, "agent", "")), []).append(row)
    return {agent: fact_suite(rs) for agent, rs in groups.items()}


def suite_from_means(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Both conventions from a run summary's per (agent, method) entry: its subscore
    means over the ``n`` scored rows give the sums back (mean x n), ``skipped`` rows are
    the reports that cite nothing."""
    n = int(entry.get("n") or 0)
    subs = entry.get("subscores") or {}
    total = n + int(entry.get("skipped") or 0)
    return {"benchmark": benchmark_figures(n, n * float(subs.get("citations", 0.0)),
                                           n * float(subs.get("valid_citations", 0.0))),
            "paper": paper_figures(total, n * float(subs.get("acc_paper", 0.0)),
                                   n * float(subs.get("supported", 0.0)))}
