"""Elo with soft outcomes (engine.elo) against hand-computed updates."""
from __future__ import annotations

import random

import pytest

from drscore.engine.methods.tasks import elo
from drscore.engine.methods.tasks.elo import Outcome


def test_expected_score():
    assert elo.expected_score(1200, 1200) == 0.5
    # 1 / (1 + 10^(-200/400)) = 1 / (1 + 0.316228) = 0.759747
    assert elo.expected_score(1400, 1200) == pytest.approx(0.7597469, abs=1e-7)


def test_update_equal_ratings():
    # e = 0.5; a: 1200 + 32 * (0.8 - 0.5) = 1209.6; b: 1200 + 32 * (0.2 - 0.5) = 1190.4
    a, b = elo.update(1200, 1200, 0.8)
    assert (a, b) == (pytest.approx(1209.6), pytest.approx(1190.4))


def test_update_underdog_outcome():
    # e_a = 0.759747; a: 1400 + 32 * (0.3 - 0.759747) = 1385.288098; b gains the same 14.711902
    a, b = elo.update(1400, 1200, 0.3)
    assert a == pytest.approx(1385.2880983, abs=1e-6)
    assert b == pytest.approx(1214.7119017, abs=1e-6)
    with pytest.raises(ValueError):
        elo.update(1200, 1200, 1.5)


def test_soft_outcome_clamps_confidence():
    assert elo.soft_outcome(0.9) == (0.9, pytest.approx(0.1))
    assert elo.soft_outcome(0.2) == (0.5, 0.5)
    assert elo.soft_outcome(1.7) == (1.0, 0.0)


def test_two_rounds_hand_computed():
    ratings = {t: 1200.0 for t in "abcd"}
    outcomes = [
        Outcome(round=0, first="a", second="b", winner="a", confidence=0.9),  # a 1212.8, b 1187.2
        Outcome(round=0, first="c", second="d", winner="d", confidence=0.6),  # c 1196.8, d 1203.2
        # e_a = 1 / (1 + 10^((1203.2 - 1212.8)/400)) = 0.513812
        # a: 1212.8 + 32 * (1 - 0.513812) = 1228.358016; d: 1203.2 - 15.558016 = 1187.641984
        Outcome(round=1, first="d", second="a", winner="a", confidence=1.0),
    ]
    new = elo.apply_outcomes(ratings, outcomes)
    assert new["a"] == pytest.approx(1228.3580161, abs=1e-6)
    assert new["b"] == pytest.approx(1187.2)
    assert new["c"] == pytest.approx(1196.8)
    assert new["d"] == pytest.approx(1187.6419839, abs=1e-6)
    assert sum(new.values()) == pytest.approx(4 * 1200)  # updates are zero-sum
    assert ratings["a"] == 1200.0  # input untouched
    assert [t for t, _ in elo.ranking(new)] == ["a", "c", "d", "b"]


def test_winner_must_be_in_the_pair():
    with pytest.raises(ValueError, match="neither"):
        elo.apply_outcomes({"a": 1200, "b": 1200}, [Outcome(round=0, first="a", second="b", winner="c", confidence=1)])


def test_schedule_pairs_are_disjoint_and_seeded():
    ids = [f"t{i}" for i in range(7)]
    plan = elo.schedule(ids, 3, random.Random(5))
    assert len(plan) == 3
    for r, pairs in enumerate(plan):
        seen = [t for p in pairs for t in (p.first, p.second)]
        assert len(pairs) == 3 and len(set(seen)) == 6  # 7 tasks: 3 disjoint pairs, one sits out
        assert all(p.round == r for p in pairs)
    assert plan == elo.schedule(ids, 3, random.Random(5))
    assert plan != elo.schedule(ids, 3, random.Random(6))


def test_schedule_randomises_presentation_order():
    ids = [f"t{i:02d}" for i in range(40)]
    plan = elo.schedule(ids, 4, random.Random(1))
    # With sorted ids, "first < second" would always hold if order were not drawn.
    firsts_lower = sum(p.first < p.second for pairs in plan for p in pairs)
    assert 0 < firsts_lower < 80


def test_ranking_ties_break_by_id():
    assert elo.ranking({"b": 1200.0, "a": 1200.0, "c": 1300.0}) == [("c", 1300.0), ("a", 1200.0), ("b", 1200.0)]
