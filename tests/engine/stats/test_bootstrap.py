"""Seeded bootstrap over tasks: reproducibility, hand-checked intervals, paired tests."""
from __future__ import annotations

import json

import numpy as np
import pytest

from drscore.engine.stats.bootstrap import (
    bootstrap_ci,
    mean_ci,
    paired_bootstrap,
    percentile_interval,
    resample_counts,
)
from support.data import DATA


def test_resample_counts_equal_draws_with_replacement():
    counts = resample_counts(7, 50, seed=3)
    assert counts.shape == (50, 7)
    assert (counts.sum(axis=1) == 7).all()
    # Same generator, same draws, counted row by row the slow way.
    draws = np.random.Generator(np.random.PCG64(3)).integers(0, 7, size=(50, 7))
    slow = np.array([np.bincount(row, minlength=7) for row in draws])
    assert (counts == slow).all()


def test_same_seed_same_numbers_other_seed_other_numbers():
    a = resample_counts(20, 100, seed=9)
    assert (a == resample_counts(20, 100, seed=9)).all()
    assert not (a == resample_counts(20, 100, seed=10)).all()
    values = np.linspace(0, 1, 20)
    assert mean_ci(values, seed=1) == mean_ci(values, seed=1)
    assert mean_ci(values, seed=1)[1] != mean_ci(values, seed=2)[1]


def test_percentile_interval_hand_case():
    # 0..100 in steps of 1: the 2.5th and 97.5th percentiles (linear) are 2.5 and 97.5
    ci = percentile_interval(list(range(101)), 0.95)
    assert (ci.low, ci.high) == pytest.approx((2.5, 97.5))
    assert ci.defined == 101
    # None/NaN replicates are ignored ...
    ci = percentile_interval([None, 1.0, 2.0, 3.0, float("nan"), 4.0], 0.5)
    # defined [1,2,3,4]: 25th percentile = 1.75, 75th = 3.25
    assert (ci.low, ci.high) == pytest.approx((1.75, 3.25))
    # ... unless most are undefined
    assert percentile_interval([None, None, None, 1.0]) is None
    with pytest.raises(ValueError):
        percentile_interval([1.0], confidence=1.5)


def test_bootstrap_ci_generic_equals_vectorised_mean():
    values = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
    stat = lambda w: float(w @ values / w.sum())  # noqa: E731  weighted mean of tasks
    point, ci = bootstrap_ci(stat, values.size, resamples=400, seed=5)
    mean, ci2 = mean_ci(values, resamples=400, seed=5)
    assert point == mean == pytest.approx(31 / 8)  # (3+1+4+1+5+9+2+6)/8
    assert (ci.low, ci.high) == pytest.approx((ci2.low, ci2.high))


def test_paired_bootstrap_constant_shift_is_significant():
    a = [1.0, 2.0, 3.0, 4.0, 5.0]
    b = [x + 0.5 for x in a]
    res = paired_bootstrap(a, b, resamples=200, seed=0)
    # every resample of a constant difference has mean exactly 0.5
    assert res.delta == pytest.approx(0.5)
    assert (res.ci.low, res.ci.high) == pytest.approx((0.5, 0.5))
    assert res.significant and res.p_value == 0.0
    assert (res.mean_a, res.mean_b) == pytest.approx((3.0, 3.5))


def test_paired_bootstrap_no_change_and_noise_are_not_significant():
    same = paired_bootstrap([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], resamples=100)
    assert same.delta == 0.0 and not same.significant and same.p_value == 1.0
    # differences +1, -1, +1, -1: mean 0, interval straddles 0
    noisy = paired_bootstrap([0, 0, 0, 0], [1, -1, 1, -1], resamples=500, seed=2)
    assert noisy.ci.low < 0 < noisy.ci.high and not noisy.significant
    assert noisy.p_value > 0.5
    empty = paired_bootstrap([], [])
    assert empty.n == 0 and empty.ci is None and not empty.significant
    with pytest.raises(ValueError):
        paired_bootstrap([1.0], [1.0, 2.0])


def test_paired_beats_unpaired_on_real_scores():
    """Real RACE overall scores of 100 DRB tasks; run B = run A + 0.01 everywhere plus
    a tiny deterministic wobble. Between-task spread is large (0.2-0.6), so an unpaired
    interval of the difference of means is wide, while the paired one is tight and
    excludes 0."""
    rows = [json.loads(line) for line in
            (DATA / "drb" / "race-results.claude-3-7-sonnet.jsonl").read_text().splitlines()
            if line.strip()]
    a = np.array([r["overall_score"] for r in rows])
    b = a + 0.01 + 0.002 * np.sin(np.arange(a.size))
    paired = paired_bootstrap(a, b, resamples=1000, seed=0)
    assert paired.significant and paired.ci.low > 0.005
    _, ci_a = mean_ci(a, resamples=1000, seed=1)
    assert ci_a.high - ci_a.low > 10 * (paired.ci.high - paired.ci.low)
    assert paired.delta == pytest.approx(float(np.mean(b - a)))
