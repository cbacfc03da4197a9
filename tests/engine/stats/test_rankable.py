"""Rows and agents shown but not ranked, with the reason."""
from drscore.engine.runtime.models import ScoreRow
from drscore.engine.stats.rankable import agent_reason, rankable_rows, row_reason


def _row(score, status="ok", coverage=None):
    return ScoreRow(task_id="1", agent="a", method="race", score=score, status=status, coverage=coverage)


def test_row_with_coverage_zero_is_not_ranked():
    assert row_reason(_row(0.4, "partial", 0.0)) == "coverage 0: the judge assessed nothing of this report"
    assert row_reason(_row(0.4, "partial", 0.5)) is None
    assert row_reason(_row(None, "failed")) == "no score"
    assert len(rankable_rows([_row(0.4, coverage=0.0), _row(0.5), _row(None, "failed")])) == 1


def test_agent_mostly_partial_is_not_ranked():
    rows = [_row(0.5, "partial", 0.5), _row(0.6, "partial", 0.4), _row(0.7)]
    assert agent_reason(rows) == "2 of 3 scored rows partial"
    # exactly half is not "mostly"
    assert agent_reason([_row(0.5, "partial", 0.5), _row(0.7)]) is None
    # failed rows count neither way
    assert agent_reason([_row(0.5, "partial", 0.5), _row(0.7), _row(None, "failed"), _row(None, "failed")]) is None


def test_coverage_zero_counts_as_partial_and_is_named():
    rows = [_row(0.1, "partial", 0.0), _row(0.2, "partial", 0.5), _row(0.7)]
    assert agent_reason(rows) == "2 of 3 scored rows partial, 1 with coverage 0"
    assert agent_reason([_row(0.1, "partial", 0.0)]) == "all 1 scored rows have coverage 0 (nothing judged)"
