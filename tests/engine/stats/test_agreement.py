"""Agreement statistics: hand-computed small cases, a published ICC worked example,
scipy on random data, and real DeepResearch Bench scores."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from scipy import stats

from drscore.engine.stats.agreement import (
    FIGURE_KEYS,
    agreement,
    align,
    correlation,
    icc_1_1,
    pair_agreement,
    preference_signs,
    rater_pair_agreement,
)
from drscore.engine.runtime.rundir_read import HumanScore
from support.data import DATA


def H(task: str, agent: str, rater: str, score: float) -> HumanScore:
    return HumanScore(task_id=task, agent=agent, rater=rater, score=score)


# --------------------------------------------------------------------------- PAR


def test_pair_agreement_ties_are_a_third_class():
    # method [3,2,2], human [2,1,2]; pairs (0,1),(0,2),(1,2):
    # method signs +,+,0 ; human signs +,0,-  -> only (0,1) agrees -> 1 of 3
    assert pair_agreement([3, 2, 2], [2, 1, 2]) == (1, 3)
    # tie vs tie agrees
    assert pair_agreement([1, 1], [5, 5]) == (1, 1)
    # a preference against a tie disagrees, in both directions
    assert pair_agreement([1, 2], [5, 5]) == (0, 1)
    assert pair_agreement([5, 5], [1, 2]) == (0, 1)


def test_tie_margin_turns_small_differences_into_ties():
    # |1.0 - 1.05| = 0.05 <= 0.1 -> tie, and the humans tie too
    assert pair_agreement([1.0, 1.05], [2, 2], tie_margin=0.1) == (1, 1)
    assert pair_agreement([1.0, 1.05], [2, 2], tie_margin=0.0) == (0, 1)
    # float noise is a tie even with margin 0: 0.1 + 0.2 vs 0.3
    assert preference_signs([0.1 + 0.2, 0.3]).tolist() == [0.0]


def test_pair_agreement_matches_brute_force_on_random_data():
    rng = random.Random(7)
    for _ in range(50):
        n = rng.randint(2, 7)
        x = [rng.randint(0, 3) for _ in range(n)]
        y = [rng.randint(0, 3) for _ in range(n)]
        sign = lambda v: (v > 0) - (v < 0)  # noqa: E731
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
        expected = sum(sign(x[i] - x[j]) == sign(y[i] - y[j]) for i, j in pairs)
        assert pair_agreement(x, y) == (expected, len(pairs))


def test_rater_pair_agreement_uses_only_agents_both_rated():
    ratings = {"r1": {"a": 1, "b": 2, "c": 3}, "r2": {"a": 3, "b": 2}, "r3": {"c": 1}}
    # r1 vs r2 on {a, b}: r1 a<b, r2 a>b -> 0 of 1; r3 shares < 2 agents with anyone
    assert rater_pair_agreement(ratings) == (0, 1)


# --------------------------------------------------------------------------- ICC


def test_icc_shrout_fleiss_worked_example():
    # Shrout & Fleiss (1979), 6 targets x 4 judges; published ICC(1,1) = .17.
    # Row sums 24,12,26,16,30,19 (total 127, N 24); sum x^2 = 841.
    # SSB = (24²+12²+26²+16²+30²+19²)/4 - 127²/24 = 728.25 - 672.0417 = 56.2083 -> MSB = 11.2417
    # SSW = (841 - 672.0417) - 56.2083 = 112.75 -> MSW = 112.75 / 18 = 6.2639
    # ICC = (11.2417 - 6.2639) / (11.2417 + 3 * 6.2639) = 4.9778 / 30.0333 = 0.16574
    data = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]
    assert icc_1_1(data) == pytest.approx(0.165742, abs=1e-6)
    assert round(icc_1_1(data), 2) == 0.17


def test_icc_unbalanced_uses_k0():
    # targets [1,3] and [4,6,8]: means 2 and 6, grand mean 22/5 = 4.4
    # SSB = 2*(2-4.4)² + 3*(6-4.4)² = 11.52 + 7.68 = 19.2 -> MSB = 19.2 / 1
    # SSW = (1+1) + (4+0+4) = 10 -> MSW = 10 / (5-2) = 3.3333
    # k0 = (5 - (2²+3²)/5) / (2-1) = 2.4
    # ICC = (19.2 - 3.3333) / (19.2 + 1.4 * 3.3333) = 15.8667 / 23.8667 = 0.664804
    assert icc_1_1([[1, 3], [4, 6, 8]]) == pytest.approx(0.664804, abs=1e-6)


def test_icc_negative_and_undefined():
    # means 3 and 3 -> MSB = 0; MSW = (4+4+4+4)/2 = 8 -> ICC = -8 / 8 = -1
    assert icc_1_1([[1, 5], [5, 1]]) == pytest.approx(-1.0)
    assert icc_1_1([[1], [2], [3]]) is None  # a single rater: no within-target variance
    assert icc_1_1([[2, 2], [2, 2]]) is None  # no variance at all
    assert icc_1_1([[1, 2]]) is None  # one target


def test_icc_matches_scipy_anova_on_random_data():
    # For balanced data F = MSB/MSW from scipy's one-way ANOVA, and
    # ICC(1,1) = (F - 1) / (F + k - 1).
    rng = np.random.default_rng(3)
    for _ in range(20):
        n, k = rng.integers(3, 9), rng.integers(2, 6)
        groups = rng.normal(rng.normal(0, 1, size=(n, 1)), 1.0, size=(n, k))
        f = stats.f_oneway(*groups).statistic
        assert icc_1_1(groups.tolist()) == pytest.approx((f - 1) / (f + k - 1), rel=1e-9)


# --------------------------------------------------------------------------- correlations


def test_correlations_match_scipy_on_random_data_with_ties():
    rng = np.random.default_rng(11)
    for _ in range(20):
        x = rng.integers(0, 5, size=30).astype(float)  # many ties: tau-b matters
        y = x + rng.integers(-2, 3, size=30)
        assert correlation(x, y, "pearson") == pytest.approx(stats.pearsonr(x, y)[0])
        assert correlation(x, y, "spearman") == pytest.approx(stats.spearmanr(x, y)[0])
        assert correlation(x, y, "kendall") == pytest.approx(
            stats.kendalltau(x, y, variant="b")[0])


def test_correlation_guards_constant_and_tiny_inputs():
    assert correlation([1, 1, 1], [1, 2, 3], "pearson") is None
    assert correlation([1, 2, 3], [4, 4, 4], "spearman") is None
    assert correlation([1], [2], "kendall") is None
    assert correlation([], [], "pearson") is None


# --------------------------------------------------------------------------- full figures


def small_case() -> tuple[dict, list[HumanScore]]:
    """Two tasks x three agents x two raters (figures worked out in the test below)."""
    method = {("1", "a"): 3, ("1", "b"): 2, ("1", "c"): 1,
              ("2", "a"): 1, ("2", "b"): 2, ("2", "c"): 4}
    human = [H("1", "a", "r1", 4), H("1", "b", "r1", 2), H("1", "c", "r1", 1),
             H("1", "a", "r2", 2), H("1", "b", "r2", 2), H("1", "c", "r2", 1),
             H("2", "a", "r1", 3), H("2", "b", "r1", 1), H("2", "c", "r1", 2),
             H("2", "a", "r2", 3), H("2", "b", "r2", 2), H("2", "c", "r2", 1)]
    return method, human


def test_figures_on_a_hand_computed_case():
    method, human = small_case()
    res = agreement(align(method, human), resamples=200, seed=1)
    f = res.figures
    # Task 1: method 3,2,1; human means a=3, b=2, c=1 -> all 3 pairs agree, exact match.
    # Task 2: method 1,2,4 (a<b<c); human means a=3, b=1.5, c=1.5 (a>b, a>c, b=c) -> 0 of 3.
    assert f["par"] == pytest.approx(3 / 6)
    assert f["exact_match"] == pytest.approx(1 / 2)
    # Raters. Task 1: r1 +,+,+ vs r2 0,+,+ -> 2/3. Task 2: r1 +,+,- vs r2 +,+,+ -> 2/3.
    assert f["human_par"] == pytest.approx(4 / 6)
    # Method vs single raters: task 1 3/3 (r1) + 2/3 (r2); task 2 1/3 (r1) + 0/3 (r2) -> 6/12
    assert f["par_raters"] == pytest.approx(6 / 12)
    # MAD: task 1 all 0; task 2 |1-3| + |2-1.5| + |4-1.5| = 5 -> 5 / 6 items
    assert f["mad"] == pytest.approx(5 / 6)
    # ICC task 1: groups [4,2],[2,2],[1,1]: MSB = 2*(1+0+1)/2 = 2, MSW = 2/3 -> 0.5
    # ICC task 2: groups [3,3],[1,2],[2,1]: MSB = 2*(1+.25+.25)/2 = 1.5, MSW = 1/3 -> 0.63636
    assert [t.icc for t in res.per_task] == pytest.approx([0.5, 0.636364], abs=1e-6)
    assert f["tasks_kept"] == 2
    # Per-task Pearson: task 1 = 1; task 2: m-mean [-4/3,-1/3,5/3], h-mean [1,-.5,-.5]
    # cov -2, |m|² 42/9, |h|² 1.5 -> r = -2 / sqrt(7) = -0.755929. FAP = (1 - 0.755929)/2
    assert f["fap"] == pytest.approx((1 - 2 / 7**0.5) / 2)
    # Per-task Spearman: task 1 = 1; task 2 ranks [1,2,3] vs [3,1.5,1.5] -> -0.866025
    assert f["fas"] == pytest.approx((1 - 0.866025) / 2, abs=1e-6)
    # OPC: per-agent method means a=2, b=2, c=2.5; human means a=3, b=1.75, c=1.25
    # centred m [-1/6,-1/6,1/3], h [1,-.25,-.75]: cov -0.375, |m|² 1/6, |h|² 1.625
    # r = -0.375 / sqrt(1.625/6) = -0.720577
    assert f["opc"] == pytest.approx(-0.720577, abs=1e-6)
    # Item-level statistics are scipy's on the six items.
    m = [3, 2, 1, 1, 2, 4]
    h = [3, 2, 1, 3, 1.5, 1.5]
    assert f["pearson"] == pytest.approx(stats.pearsonr(m, h)[0])
    assert f["spearman"] == pytest.approx(stats.spearmanr(m, h)[0])
    assert f["kendall"] == pytest.approx(stats.kendalltau(m, h)[0])


def test_negative_icc_task_is_filtered_from_fap_fas_only():
    method, human = small_case()
    base = agreement(align(method, human), resamples=50).figures
    # Task 3: raters disagree completely: r1 a<b, r2 a>b -> ICC = -1, filtered out.
    method.update({("3", "a"): 1, ("3", "b"): 2})
    human += [H("3", "a", "r1", 1), H("3", "b", "r1", 5), H("3", "a", "r2", 5),
              H("3", "b", "r2", 1)]
    res = agreement(align(method, human), resamples=50)
    assert res.figures["tasks_kept"] == 2 and res.n_tasks == 3
    assert res.figures["fap"] == pytest.approx(base["fap"])
    assert res.figures["fas"] == pytest.approx(base["fas"])
    # ...but PAR still counts task 3's pair: the method prefers b, humans tie -> 3 of 7
    assert res.figures["par"] == pytest.approx(3 / 7)


def test_scaling_changes_mad_only():
    method, human = small_case()
    plain = agreement(align(method, human), resamples=20).figures
    scaled = agreement(align(method, human, scale_method=10, scale_human=10),
                       resamples=20).figures
    assert scaled["mad"] == pytest.approx(10 * plain["mad"])
    for key in ("par", "opc", "fap", "fas", "spearman", "kendall", "exact_match"):
        assert scaled[key] == pytest.approx(plain[key])
    with pytest.raises(ValueError):
        align(method, human, scale_method=0)


def test_alignment_counts_what_it_cannot_join():
    method = {("1", "a"): 1.0, ("1", "b"): None, ("1", "c"): 2.0}
    human = [H("1", "a", "r", 1), H("1", "b", "r", 2), H("1", "d", "r", 3),
             H("1", "a", "r", 4)]  # repeated rater: the last one wins
    al = align(method, human)
    assert al.n_items == 1 and al.tasks[0].human == [4.0]
    assert al.method_only == 1  # c
    assert al.human_only == 2  # b (failed) and d
    assert al.duplicate_ratings == 1


def test_degenerate_inputs_give_none_with_notes_not_exceptions():
    # one agent per task: no pairs, no correlation, no OPC
    method = {("1", "a"): 1.0, ("2", "a"): 2.0}
    human = [H("1", "a", "r", 1), H("2", "a", "r", 2)]
    res = agreement(align(method, human), resamples=30)
    for key in ("par", "human_par", "exact_match", "opc", "fap", "fas"):
        assert res.figures[key] is None, key
        assert res.intervals[key] is None
    assert res.figures["pearson"] == pytest.approx(1.0)  # two items still correlate
    assert any(n.startswith("par undefined") for n in res.notes)
    # constant method scores everywhere
    method = {(t, a): 1.0 for t in "12" for a in "ab"}
    human = [H(t, a, "r", s) for t in "12" for a, s in (("a", 1), ("b", 2))]
    res = agreement(align(method, human), resamples=30)
    assert res.figures["pearson"] is None and res.figures["opc"] is None
    assert res.figures["par"] == 0.0  # method ties every pair, humans never do
    # nothing joined at all
    empty = agreement(align({}, []), resamples=30)
    assert empty.n_tasks == 0 and all(empty.figures[k] is None for k in FIGURE_KEYS
                                      if k != "tasks_kept")


def test_bootstrap_intervals_are_seeded_and_bracket_the_estimate():
    rng = random.Random(5)
    method, human = {}, []
    for t in range(30):
        for a in range(4):
            q = rng.random()
            method[(str(t), f"g{a}")] = q + rng.gauss(0, 0.3)
            human += [H(str(t), f"g{a}", f"r{r}", round(4 * q + rng.gauss(0, 0.8)))
                      for r in range(3)]
    al = align(method, human)
    one = agreement(al, resamples=300, seed=42)
    two = agreement(al, resamples=300, seed=42)
    other = agreement(al, resamples=300, seed=43)
    assert one.to_json() == two.to_json()
    assert one.intervals["par"] != other.intervals["par"]
    for key in ("par", "pearson", "spearman", "kendall", "mad", "fap", "human_par"):
        ci = one.intervals[key]
        assert ci.low <= one.figures[key] <= ci.high, key
        assert ci.high - ci.low > 0, key
    out = one.to_json()
    assert all(f"{k}_ci" in out for k in FIGURE_KEYS)
    json.dumps(out)  # plain JSON types only


def test_real_drb_dimension_scores_as_two_judges():
    """Real data: the benchmark's own RACE dimension scores for Claude 3.7 Sonnet.
    Treat each of 4 dimensions as an "agent" of a task and compare instruction
    following (method) with readability (human) - two genuinely different real score
    columns. The figures are checked against direct computations on the same columns."""
    rows = [json.loads(line) for line in
            (DATA / "drb" / "race-results.claude-3-7-sonnet.jsonl").read_text().splitlines()
            if line.strip()][:40]
    dims = ["comprehensiveness", "insight", "instruction_following", "readability"]
    method, human = {}, []
    for row in rows:
        for d in dims:
            method[(str(row["id"]), d)] = row[d]
            human.append(H(str(row["id"]), d, "overall-judge", row["overall_score"]))
            human.append(H(str(row["id"]), d, "dim-judge", row[d]))
    res = agreement(align(method, human), resamples=100, seed=0)
    m = np.array([[r[d] for d in dims] for r in rows])
    h = (m + np.array([[r["overall_score"]] * 4 for r in rows])) / 2
    assert res.n_items == 160 and res.n_tasks == 40
    assert res.figures["pearson"] == pytest.approx(stats.pearsonr(m.ravel(), h.ravel())[0])
    assert res.figures["kendall"] == pytest.approx(stats.kendalltau(m.ravel(), h.ravel())[0])
    assert res.figures["mad"] == pytest.approx(np.mean(np.abs(m - h)))
    # Within a task, human = (dim + overall)/2 is a monotone transform of the method's
    # dim score, so every pair agrees unless the method ties: PAR = 1, exact match 1.
    assert res.figures["par"] == pytest.approx(1.0)
    assert res.figures["exact_match"] == pytest.approx(1.0)
    # The constant "overall-judge" gives every agent the same score inside a task, so
    # raters agree only on ties: human_par = share of pairs the dim scores tie.
    ties = sum(int(np.isclose(r[a], r[b])) for r in rows
               for i, a in enumerate(dims) for b in dims[i + 1:])
    assert res.figures["human_par"] == pytest.approx(ties / (40 * 6))
