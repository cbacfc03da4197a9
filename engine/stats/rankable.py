"""Which rows and agents may be ranked, and why not.

A rank says "this agent did better". Two kinds of score cannot carry that:

- a row with coverage 0: the method judged nothing of the report (RACE with no criterion
  matched, a claim method with no judged pair), so its number is a default, not a verdict;
- an agent whose scored rows are mostly ``partial``: its mean rests on incomplete
  judgements, and a rank would present it as comparable with complete ones.

Such rows and agents are still shown, with the reason beside them; they are left out of
ranks and of the paired comparisons (:mod:`drscore.engine.stats.paired`).
"""
from __future__ import annotations

from collections.abc import Iterable

from drscore.engine.runtime.models import ScoreRow

# More than this share of an agent's scored rows partial (or with coverage 0): not ranked.
MAX_PARTIAL_SHARE = 0.5


def row_reason(row: ScoreRow) -> str | None:
    """Why this row's score may not rank its agent (None when it may)."""
    if row.score is None:
        return "no score"
    if row.coverage is not None and row.coverage <= 0.0:
        return "coverage 0: the judge assessed nothing of this report"
    return None


def agent_reason(rows: Iterable[ScoreRow]) -> str | None:
    """Why this agent (its rows under one method) is shown but not ranked, or None.

    Rows without a score (failed, not applicable) do not count either way; coverage-0
    rows count as partial."""
    counts = [0, 0, 0]
    for r in rows:
        count_row(counts, r)
    return reason_from_counts(*counts)


def count_row(counts: list[int], row: ScoreRow) -> None:
    """Fold one row into ``[scored, partial, coverage 0]``, the counts
    :func:`reason_from_counts` reads (a streaming caller keeps only these three numbers)."""
    if row.score is None:
        return
    counts[0] += 1
    if row.coverage is not None and row.coverage <= 0.0:
        counts[2] += 1
    elif row.status == "partial":
        counts[1] += 1


def reason_from_counts(scored: int, partial: int, zero: int) -> str | None:
    """:func:`agent_reason` from the counts alone (the leaderboard folds rows into them):
    ``scored`` rows with a score, ``partial`` of them partial, ``zero`` with coverage 0."""
    if scored == 0:
        return None  # nothing to rank anyway: the leaderboard leaves it unranked as unscored
    if zero == scored:
        return f"all {scored} scored rows have coverage 0 (nothing judged)"
    if (partial + zero) / scored > MAX_PARTIAL_SHARE:
        extra = f", {zero} with coverage 0" if zero else ""
        return f"{partial + zero} of {scored} scored rows partial{extra}"
    return None


def rankable_rows(rows: Iterable[ScoreRow]) -> list[ScoreRow]:
    """The rows whose scores may rank (see :func:`row_reason`)."""
    return [r for r in rows if row_reason(r) is None]
