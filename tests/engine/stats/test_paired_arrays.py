"""The paired comparisons fed from compact arrays give the same numbers as before.

``paired_golden.json`` holds what the previous implementation (per-agent task -> samples
dicts, three arrays kept per pair) returned for the random cases below, written before it
was replaced; the new path must reproduce it: the same draws and every count exactly, every
float to 1e-12 of its value (the last digit of a sum depends on the order the BLAS build and
its thread count add in, which differs between machines)."""
from __future__ import annotations

import json
import math
import random
from pathlib import Path

import msgspec
import pytest

from drscore.engine.runtime.models import ScoreRow
from drscore.engine.stats.paired import compare_agents, decide, expanded_confidence

GOLDEN = Path(__file__).with_name("paired_golden.json")


def random_rows(seed: int, *, tasks: int = 200, agents: int = 3, samples: int = 1) -> list[ScoreRow]:
    """A run's rows: some tasks missing per agent, a repeated row (the later one counts),
    rows without a score, with coverage 0, and (``samples`` > 1) judge samples with a
    missing sample now and then."""
    rnd = random.Random(seed)
    rows = []
    for t in range(tasks):
        base = rnd.uniform(2, 8)
        for a in range(agents):
            if rnd.random() < 0.08:
                continue  # this agent has no report for the task
            score = round(base + a * 0.3 + rnd.gauss(0, 1), 3)
            kind = rnd.random()
            extra: dict = {}
            if samples > 1:
                drawn: list[float | None] = [round(score + rnd.gauss(0, 0.5), 3) for _ in range(samples)]
                if rnd.random() < 0.1:
                    drawn[rnd.randrange(samples)] = None
                if rnd.random() < 0.1:
                    drawn = drawn[:1]  # a row scored with one sample only
                extra["sample_scores"] = drawn
            task = str(t) if t % 7 else f"x{t}"  # numeric and other ids: natural order
            if kind < 0.03:
                rows.append(ScoreRow(task_id=task, agent=f"a{a}", method="m", score=None, status="failed"))
            elif kind < 0.06:
                rows.append(ScoreRow(task_id=task, agent=f"a{a}", method="m", score=score, coverage=0.0, **extra))
            else:
                rows.append(ScoreRow(task_id=task, agent=f"a{a}", method="m", score=score, coverage=1.0, **extra))
            if kind > 0.97:  # the same report scored again: the later row counts
                rows.append(ScoreRow(task_id=task, agent=f"a{a}", method="m", score=score - 1.0, **extra))
    rnd.shuffle(rows)
    # a second method where one agent is mostly partial (left out, listed as unranked)
    for t in range(20):
        for a in range(3):
            rows.append(ScoreRow(task_id=str(t), agent=f"a{a}", method="n", score=float((t * 7 + a * 3) % 10),
                                 status="partial" if a == 2 else "ok"))
    return rows


CASES = {"single": dict(seed=1), "samples": dict(seed=2, samples=3), "blocks": dict(seed=3, samples=2)}


def outputs(name: str) -> dict:
    kw = dict(CASES[name])
    seed = kw.pop("seed")
    if name == "blocks":  # many small resampling blocks, through the task -> samples maps
        scores: dict[str, dict[str, list[float]]] = {}
        for r in random_rows(seed, **kw):
            if r.method == "m" and r.score is not None and r.sample_scores:
                scores.setdefault(r.agent, {})[r.task_id] = [v for v in r.sample_scores if v is not None]
        return {"m": msgspec.to_builtins(compare_agents("m", scores, resamples=300, seed=seed, block_cells=5000))}
    return {m: msgspec.to_builtins(d) for m, d in
            decide(random_rows(seed, **kw), resamples=300, seed=seed).items()}


def _same(got, want, where: str = "") -> None:
    if isinstance(want, float) and isinstance(got, (int, float)):
        assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-15), f"{where}: {got!r} != {want!r}"
    elif isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            _same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            _same(g, w, f"{where}[{i}]")
    else:
        assert got == want and type(got) is type(want), f"{where}: {got!r} != {want!r}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_numbers_as_the_dict_implementation(name):
    golden = json.loads(GOLDEN.read_text())[name]
    _same(outputs(name), golden, name)


def test_the_comparison_of_outputs_can_fail():
    golden = json.loads(GOLDEN.read_text())["single"]
    changed = json.loads(json.dumps(golden))
    changed["m"]["pairs"][0]["delta"] += 1e-6
    with pytest.raises(AssertionError):
        _same(changed, golden)


def test_three_tasks_two_agents_by_hand():
    # a: 3, 5, 4; b: 1, 4, 4 -> differences 2, 1, 0; delta 1, means 4 and 3
    a = {"1": [3.0], "2": [5.0], "3": [4.0]}
    b = {"1": [1.0], "2": [4.0], "3": [4.0]}
    d = compare_agents("m", {"b": b, "a": a}, resamples=400, seed=5)
    assert d.agents == ["a", "b"] and d.first_tasks == 3 and d.samples == 1
    (pair,) = d.pairs
    assert (pair.n, pair.mean_a, pair.mean_b, pair.delta) == (3, 4.0, 3.0, 1.0)
    # a resample mean of three draws from {2, 1, 0} lies in [0, 2], in steps of 1/3
    lo, hi = pair.ci
    assert 0.0 <= lo <= 1.0 <= hi <= 2.0
    assert all(math.isclose(3 * v, round(3 * v)) for v in (lo, hi))
    # the mean difference is <= 0 only when all three draws are the zero (task 3):
    # probability (1/3)^3 = 1/27; >= 0 always. tail = share of resamples at 0.
    # expanded p for n = 3 from that tail: small but the interval's lower end is 0
    # with the expanded level for n = 3 (> 0.99), so the difference is not significant.
    assert expanded_confidence(0.95, 3) > 0.99 and lo == 0.0
    assert pair.p_value is not None and pair.p_value > 0.05 and not pair.significant
    # a wins a resample unless every draw is task 3 (tie 4 = 4: shared first place)
    # P(a first) = 1 - (1/27) / 2 in expectation; with 400 resamples it is close.
    assert d.p_first is not None and d.p_first["a"] + d.p_first["b"] == pytest.approx(1.0)
    assert d.p_first["a"] == pytest.approx(1 - 1 / 54, abs=0.03)


def test_special_functions_agree_with_scipy_stats_exactly():
    from scipy import stats

    from drscore.engine.stats.paired import expanded_p

    for n in (2, 3, 7, 40, 1000, 100000):
        z = math.sqrt(n / (n - 1)) * float(stats.t.ppf(0.975, n - 1))
        assert expanded_confidence(0.95, n) == float(min(1.0 - 1e-9, 1.0 - 2.0 * stats.norm.sf(z)))
        for tail in (1e-4, 0.01, 0.2, 0.49):
            zz = float(stats.norm.isf(tail)) / math.sqrt(n / (n - 1))
            assert expanded_p(tail, n) == float(min(1.0, 2.0 * stats.t.sf(zz, n - 1)))


def test_later_row_counts_even_when_it_has_no_valid_sample():
    def row(task, agent, score, samples=()):
        return ScoreRow(task_id=task, agent=agent, method="m", score=score, sample_scores=list(samples))

    rows = [row("1", "a", 3.0), row("2", "a", 5.0), row("3", "a", 9.0),
            row("3", "a", 4.0, samples=[None, None]),  # rescored: no valid sample, task 3 is not a's
            row("1", "b", 1.0), row("2", "b", 9.0), row("2", "b", 4.0),  # rescored: 4 counts
            row("3", "b", 4.0)]
    d = decide(rows, resamples=50)["m"]
    (pair,) = d.pairs
    # a on 1, 2: 3, 5 (own mean 4); b on 1, 2, 3: 1, 4, 4 (own mean 3); shared 1, 2:
    # b's mean there (1 + 4) / 2 = 2.5, differences 2 and 1
    assert d.agents == ["a", "b"] and (pair.n, pair.mean_a, pair.mean_b, pair.delta) == (2, 4.0, 2.5, 1.5)
    assert d.first_tasks == 2 and d.samples == 1  # the row without a valid sample counts no samples
