"""Paired comparisons inside one run: tiny cases with expectations computed by hand."""
from __future__ import annotations

import math

import pytest

from drscore.engine.runtime.models import ScoreRow
from drscore.engine.stats.bootstrap import paired_bootstrap
from drscore.engine.stats.paired import compare_agents, decide, expanded_confidence, expanded_p, holm


def test_holm_adjusts_in_order_and_keeps_monotone():
    # sorted: 0.01 * 3 = 0.03; 0.03 * 2 = 0.06; 0.04 * 1 = 0.04 -> raised to 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None])
    assert holm([0.5, 0.9]) == [1.0, 1.0]  # 0.5 * 2 = 1.0 capped; 0.9 is raised to max(1.0, 0.9)


def test_constant_difference_is_exact_and_significant():
    a = {str(t): [t + 0.5] for t in range(1, 6)}
    b = {str(t): [float(t)] for t in range(1, 6)}
    d = compare_agents("m", {"b": b, "a": a}, resamples=200)
    assert d.agents == ["a", "b"]  # a's mean 3.5 > b's 3.0: pairs read as positive
    (pair,) = d.pairs
    assert (pair.a, pair.b, pair.n) == ("a", "b", 5)
    assert pair.delta == pytest.approx(0.5) and pair.ci == pytest.approx([0.5, 0.5])
    assert pair.p_value == pytest.approx(1 / 200)  # floored: no resample reaches 0
    assert pair.significant and pair.text() == "a - b: +0.50 [0.50, 0.50]"
    assert d.p_first == {"a": 1.0, "b": 0.0}
    assert pair.judge_noise_share is None  # no judge samples


def test_only_shared_tasks_are_paired():
    a = {"1": [1.0], "2": [2.0], "3": [3.0]}  # own mean 2
    b = {"1": [0.0], "2": [2.0]}  # own mean 1
    (pair,) = compare_agents("m", {"a": a, "b": b}, resamples=100).pairs
    # tasks 1 and 2: differences 1 and 0
    assert pair.n == 2 and pair.delta == pytest.approx(0.5)
    assert (pair.mean_a, pair.mean_b) == (pytest.approx(1.5), pytest.approx(1.0))
    assert 0.0 <= pair.ci[0] <= pair.ci[1] <= 1.0  # resamples are means of {0, 1}


def test_single_samples_match_the_paired_bootstrap_of_bootstrap_py():
    a = [0.2, 0.9, 0.4, 0.7, 0.1, 0.8, 0.55]
    b = [0.1, 0.5, 0.5, 0.3, 0.2, 0.6, 0.35]
    d = compare_agents("m", {"a": {str(i): [v] for i, v in enumerate(a)},
                             "b": {str(i): [v] for i, v in enumerate(b)}}, resamples=500, seed=3, block_cells=21)
    # mean(a) - mean(b), same seed, one block, at the expanded level for 7 tasks
    ref = paired_bootstrap(b, a, resamples=500, seed=3, confidence=expanded_confidence(0.95, 7))
    (pair,) = d.pairs
    assert pair.delta == pytest.approx(ref.delta)
    # blocks of 3 resamples draw the same stream as one draw of all 500
    assert pair.ci == pytest.approx(ref.ci.as_list())


def test_expanded_confidence_by_hand():
    # n = 40: t(39) at 0.975 = 2.02269; * sqrt(40/39) = 2.04846; 1 - 2 * Phi(-2.04846) = 0.95948
    assert expanded_confidence(0.95, 40) == pytest.approx(0.95948, abs=2e-5)
    # n = 2: t(1) = 12.7062 * sqrt(2) = 17.97: essentially the whole range
    assert expanded_confidence(0.95, 2) > 0.999999
    assert expanded_confidence(0.95, 1) == 0.95


def test_ties_share_the_first_place():
    same = {"1": [1.0], "2": [2.0]}
    d = compare_agents("m", {"x": same, "y": dict(same), "z": dict(same)}, resamples=50)
    assert d.p_first == pytest.approx({"x": 1 / 3, "y": 1 / 3, "z": 1 / 3})
    assert all(p.delta == 0.0 and p.p_value == 1.0 and not p.significant for p in d.pairs)
    assert len(d.pairs) == 3 and d.first_tasks == 2


def test_judge_noise_share_from_samples():
    # a: task 1 samples [1, 3] (mean 2, variance 2, noise of the mean 2/2 = 1); tasks 2, 3 no spread
    a = {"1": [1.0, 3.0], "2": [2.0, 2.0], "3": [5.0, 5.0]}
    b = {"1": [0.0], "2": [0.0], "3": [0.0]}
    d = compare_agents("m", {"a": a, "b": b}, resamples=300)
    (pair,) = d.pairs
    # differences [2, 2, 5]: variance ((1 + 1 + 4) / 2) = 3; judge part mean(1, 0, 0) = 1/3
    assert pair.judge_noise_share == pytest.approx(1 / 9)
    assert pair.delta == pytest.approx(3.0) and d.samples == 2


def test_judge_samples_widen_nothing_when_they_agree():
    a = {str(t): [t + 1.0, t + 1.0, t + 1.0] for t in range(6)}
    b = {str(t): [float(t)] * 3 for t in range(6)}
    (pair,) = compare_agents("m", {"a": a, "b": b}, resamples=100).pairs
    assert pair.ci == pytest.approx([1.0, 1.0]) and pair.judge_noise_share == 0.0


def _row(task, agent, score, *, coverage=1.0, status="ok", samples=()):
    return ScoreRow(task_id=task, agent=agent, method="race", score=score, coverage=coverage, status=status,
                    sample_scores=list(samples))


def test_decide_leaves_out_unrankable_agents_and_zero_coverage_rows():
    rows = [_row("1", "a", 0.6), _row("2", "a", 0.7), _row("3", "a", 0.9, coverage=0.0),
            _row("1", "b", 0.5), _row("2", "b", 0.5), _row("3", "b", 0.1),
            _row("1", "c", 0.2, coverage=0.0), _row("2", "c", 0.3, coverage=0.0)]
    d = decide(rows, resamples=100)["race"]
    assert d.unranked == {"c": "all 2 scored rows have coverage 0 (nothing judged)"}
    (pair,) = d.pairs
    # a's task 3 (coverage 0) is left out: differences 0.1 and 0.2 on tasks 1 and 2
    assert (pair.a, pair.b, pair.n) == ("a", "b", 2) and pair.delta == pytest.approx(0.15)


def test_decide_reads_the_judge_samples_of_rows():
    rows = [_row("1", "a", 2.0, samples=[1.0, 3.0]), _row("2", "a", 2.0, samples=[2.0, 2.0]),
            _row("3", "a", 5.0, samples=[5.0, 5.0]),
            _row("1", "b", 0.0), _row("2", "b", 0.0), _row("3", "b", 0.0)]
    (pair,) = decide(rows, resamples=50)["race"].pairs
    assert pair.judge_noise_share == pytest.approx(1 / 9)


def test_one_agent_gives_no_decision():
    assert decide([_row("1", "a", 0.5), _row("2", "a", 0.4)]) == {}


def test_memory_blocks_do_not_change_results():
    a = {str(t): [math.sin(t), math.cos(t)] for t in range(30)}
    b = {str(t): [math.sin(t + 1)] for t in range(30)}
    one = compare_agents("m", {"a": a, "b": b}, resamples=64, seed=1)
    small = compare_agents("m", {"a": a, "b": b}, resamples=64, seed=1, block_cells=60)
    assert one.pairs[0].delta == pytest.approx(small.pairs[0].delta)
    assert one.pairs[0].ci is not None and small.pairs[0].ci is not None


def test_judge_noise_figures_by_hand():
    from drscore.engine.stats.noise import judge_noise

    # two reports, two samples each: sds sqrt(2) and 0; means 2 and 5
    noise = judge_noise({"1": [1.0, 3.0], "2": [5.0, 5.0]})
    assert noise is not None and (noise.tasks, noise.samples) == (2, 2)
    assert noise.per_task_sd == pytest.approx(2 ** 0.5 / 2)
    assert noise.per_task_sd_rms == pytest.approx(1.0)  # sqrt((2 + 0) / 2)
    assert noise.between_task_sd == pytest.approx(3 / 2 ** 0.5)  # sd of [2, 5]
    # sample means: (1 + 5) / 2 = 3 and (3 + 5) / 2 = 4 -> sd sqrt(0.5)
    assert noise.suite_mean_sd == pytest.approx(0.5 ** 0.5)
    assert noise.suite_mean_sd_independent == pytest.approx(1 / 2 ** 0.5)
    assert noise.judge_share == pytest.approx((1.0 / 2) / 4.5)
    assert judge_noise({"1": [1.0], "2": [2.0]}) is None


def test_expanded_p_agrees_with_the_expanded_interval():
    # n = 40: the 95% interval uses the 95.948% percentiles, so a tail share of
    # (1 - 0.959485) / 2 = 0.0202575 sits exactly on its edge: p = 0.05
    assert expanded_p((1 - expanded_confidence(0.95, 40)) / 2, 40) == pytest.approx(0.05, abs=1e-6)
    assert expanded_p(0.016, 10) > 0.05  # twice the tail would say 0.032
    assert expanded_p(0.0, 10) == 0.0 and expanded_p(0.6, 10) == 1.0
    assert expanded_p(0.01, 1) == 0.02


def test_p_value_and_interval_never_disagree():
    import numpy as np

    rng = np.random.Generator(np.random.PCG64(5))
    for trial in range(30):
        a = {str(t): [float(v)] for t, v in enumerate(rng.normal(0.3, 1.0, 10))}
        b = {str(t): [float(v)] for t, v in enumerate(rng.normal(0.0, 1.0, 10))}
        (pair,) = compare_agents("m", {"a": a, "b": b}, resamples=400, seed=trial).pairs
        excludes = pair.ci[0] > 0 or pair.ci[1] < 0
        # one pair: Holm changes nothing; allow the percentile's interpolation at the edge
        if abs(pair.p_value - 0.05) > 0.01:
            assert excludes == (pair.p_value < 0.05), (pair.ci, pair.p_value)
