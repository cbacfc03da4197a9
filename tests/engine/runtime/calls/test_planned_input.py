"""A dry run's planned input per template and the error bar of each total, with fits whose
weights and residuals are worked out by hand."""
from __future__ import annotations

import math

import pytest

from drscore.engine.runtime.calls.planned_input import PlannedInput, overall_error, total_error, with_errors
from drscore.engine.runtime.calls.tokens import TEMPLATE_MIN_CALLS, TokenEstimator, TokenFit


def _fit(counts: list[float], a: float = 100.0) -> TokenFit:
    fit = TokenFit()
    for y in counts:
        fit.add(a, 0.0, y)
    return fit


def test_a_templates_own_record_bars_its_total_by_its_error_over_both_call_counts():
    own = _fit([90, 110] * 3)  # six calls of 100 units counted 90 or 110
    # The ridge term (1% of the mean diagonal, 300) pulls towards weight 1, which is also
    # the fit: w = (60,000 + 300) / (60,000 + 300) = 1, so every call misses by 10.
    assert own.weights() == pytest.approx((1.0, 1.0))
    rms = math.sqrt(6 * 10 ** 2 / (3 * 90 ** 2 + 3 * 110 ** 2))  # 0.0995
    assert own.rms() == pytest.approx(rms)
    error, basis = total_error(own, None, 6)
    assert error == pytest.approx(2 * rms * math.sqrt(1 / 6 + 1 / 6))  # two standard deviations: 0.1149
    assert basis == "learned from 6 answered calls of this template"
    # more calls planned, and the bar narrows towards what the record itself leaves
    assert total_error(own, None, 600)[0] == pytest.approx(2 * rms * math.sqrt(1 / 6 + 1 / 600))


def test_without_its_own_record_a_templates_total_is_as_uncertain_as_one_call():
    model = _fit([90, 110] * 3)
    error, basis = total_error(None, model, 1000)
    assert error == pytest.approx(2 * model.rms())  # not divided by the calls: they may miss alike
    assert "no record of this template" in basis
    assert total_error(None, None, 1000) == (TokenEstimator.PRIOR_RELATIVE_ERROR, "the character rule")


def test_the_plans_bar_is_the_token_weighted_mean_of_its_templates():
    planned = {"a": PlannedInput(calls=1, tokens=100, error=0.1), "b": PlannedInput(calls=9, tokens=300, error=0.02)}
    assert overall_error(planned) == pytest.approx((100 * 0.1 + 300 * 0.02) / 400)  # 0.04
    assert overall_error({}) == 0.0


def test_a_template_is_planned_with_its_own_ratios_once_enough_of_it_was_recorded():
    est = TokenEstimator()
    est.seed(_fit([100] * 10))  # model-wide: one token a unit
    half = _fit([50] * TEMPLATE_MIN_CALLS)  # this template's calls count half of that
    few = _fit([50] * (TEMPLATE_MIN_CALLS - 1))
    est.seed_templates({"half": half, "few": few})
    # (5 x 5,000 + 250) / (50,000 + 250): the ridge keeps it a little above 0.5
    assert est.planned_prompt((1000.0, 0.0), "half") == pytest.approx(1000 * 25_250 / 50_250)
    assert est.planned_prompt((1000.0, 0.0), "few") == pytest.approx(est.prompt((1000.0, 0.0)))
    assert est.planned_prompt((1000.0, 0.0), "unseen") == pytest.approx(1000)
    out = with_errors({t: PlannedInput(calls=10, tokens=5000) for t in ("half", "few", "unseen")}, est)
    assert out["half"].basis == f"learned from {TEMPLATE_MIN_CALLS} answered calls of this template"
    assert out["half"].error == pytest.approx(total_error(half, None, 10)[0])
    assert out["few"].error == out["unseen"].error == pytest.approx(2 * est.seeded.rms())  # type: ignore[union-attr]
    assert out["few"].basis == (f"the model's ratios; only {TEMPLATE_MIN_CALLS - 1} calls of this template "
                                "recorded, whose calls may miss alike")
    assert "no record of this template" in out["unseen"].basis
    assert out["half"].tokens == 5000 and out["half"].calls == 10


def test_what_a_run_answered_is_recorded_per_template_with_what_it_was_seeded_with():
    est = TokenEstimator()
    est.seed_templates({"t": _fit([50] * 3), "other": _fit([70] * 2)})
    est.observe((100.0, 0.0), "t", 60, 5)
    est.observe((100.0, 0.0), "new", 80, 5)
    kept = est.recorded_templates()
    assert set(kept) == {"t", "new"}  # a template this run did not answer keeps its row as it is
    assert kept["t"].calls == 4 and kept["t"].say == pytest.approx(100 * (3 * 50 + 60))
    assert kept["new"].calls == 1 and kept["new"].say == pytest.approx(100 * 80)
    # and the model-wide record holds both of this run's calls
    assert est.recorded().calls == 2
