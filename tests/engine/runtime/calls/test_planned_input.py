"""A dry run's planned input per template and the error bar of each total, with fits whose
weights and residuals are worked out by hand."""
from __future__ import annotations

import math

import pytest

from drscore.engine.runtime.calls.planned_input import (
    PlannedInput, overall_error, own_error, shared_error, with_errors,
)
from drscore.engine.runtime.calls.tokens import TEMPLATE_MIN_CALLS, TokenEstimator, TokenFit


def _fit(counts: list[float], a: float = 100.0, b: float = 0.0) -> TokenFit:
    fit = TokenFit()
    for y in counts:
        fit.add(a, b, y)
    return fit


def test_a_templates_own_record_bars_its_total_by_its_error_over_both_prompt_counts():
    own = _fit([90, 110] * 3)  # six prompts of 100 units counted 90 or 110
    # The ridge term (1% of the mean diagonal, 300) pulls towards weight 1, which is also
    # the fit: w = (60,000 + 300) / (60,000 + 300) = 1, so every call misses by 10.
    assert own.weights() == pytest.approx((1.0, 1.0))
    rms = math.sqrt(6 * 10 ** 2 / (3 * 90 ** 2 + 3 * 110 ** 2))  # 0.0995, measured on the fitted prompts
    assert own.rms() == pytest.approx(rms)
    widened = rms * math.sqrt(6 / 4)  # two ratios fitted to six prompts
    assert own_error(own, 6) == pytest.approx(2 * widened * math.sqrt(1 / 6 + 1 / 6))  # 0.1407
    # more prompts planned, and the bar narrows towards what the record itself leaves
    assert own_error(own, 600) == pytest.approx(2 * widened * math.sqrt(1 / 6 + 1 / 600))


def test_without_its_own_record_a_templates_total_is_as_uncertain_as_one_call():
    model = _fit([90, 110] * 3)
    assert shared_error(model) == (pytest.approx(2 * model.rms()), "the model's ratios")  # not divided by calls
    error, basis = shared_error(None)
    assert error == TokenEstimator.PRIOR_RELATIVE_ERROR and basis.startswith("the character rule")


def test_prompts_counted_with_the_models_tokenizer_are_barred_by_the_chat_formats_few_tokens():
    counted = PlannedInput()
    for tokens in (4_000, 6_000):
        counted.add(tokens, own=False, new_prompt=True, counted=True)
    estimated = PlannedInput()
    estimated.add(5_000, own=False, new_prompt=True)
    out = with_errors({"counted": counted, "estimated": estimated}, TokenEstimator(), "tiktoken:o200k_base")
    # 12 tokens on each of 2 prompts over their 10,000: 0.24%
    assert out["counted"].error == pytest.approx(12 * 2 / 10_000)
    assert out["counted"].basis.startswith("counted with tiktoken:o200k_base")
    # a template estimated in the same plan keeps the character rule's bar
    assert out["estimated"].error == TokenEstimator.PRIOR_RELATIVE_ERROR
    # without the counter named, the counted tokens are not believed counted
    assert with_errors({"counted": counted}, TokenEstimator())["counted"].error == TokenEstimator.PRIOR_RELATIVE_ERROR


def test_the_plans_bar_is_the_token_weighted_mean_of_its_templates():
    planned = {"a": PlannedInput(calls=1, tokens=100, error=0.1), "b": PlannedInput(calls=9, tokens=300, error=0.02)}
    assert overall_error(planned) == pytest.approx((100 * 0.1 + 300 * 0.02) / 400)  # 0.04
    assert overall_error({}) == 0.0


def test_a_template_is_planned_with_its_own_ratios_once_enough_of_it_was_recorded():
    est = TokenEstimator()
    est.seed(_fit([100] * 10))  # model-wide: one token a unit
    half = _fit([50] * TEMPLATE_MIN_CALLS)  # this template's prompts count half of that
    few = _fit([50] * (TEMPLATE_MIN_CALLS - 1))
    est.seed_templates({"half": half, "few": few})
    # ridge towards the model's ratio (1 here): (5 x 5,000 + 250) / (50,000 + 250)
    w = est.weights[0]
    assert est.planned_prompt((1000.0, 0.0), "half") == (pytest.approx(1000 * (25_000 + 250 * w) / 50_250), True)
    assert est.planned_prompt((1000.0, 0.0), "few") == (pytest.approx(est.prompt((1000.0, 0.0))), False)
    assert est.planned_prompt((1000.0, 0.0), "unseen") == (pytest.approx(1000, rel=0.01), False)
    planned = {t: PlannedInput() for t in ("half", "few", "unseen")}
    for t, p in planned.items():
        for i in range(10):
            p.add(500, t == "half", new_prompt=i < 5)  # each prompt asked twice (--samples 2)
    out = with_errors(planned, est)
    assert out["half"].basis == f"learned from {TEMPLATE_MIN_CALLS} answered prompts of this template"
    assert out["half"].own_prompts == 5 and out["half"].error == pytest.approx(own_error(half, 5))
    assert out["few"].error == out["unseen"].error == pytest.approx(2 * est.seeded.rms())  # type: ignore[union-attr]
    assert out["few"].basis == (f"the model's ratios; only {TEMPLATE_MIN_CALLS - 1} prompts of this template "
                                "recorded, whose calls may miss alike")
    assert "no record of this template" in out["unseen"].basis
    assert out["half"].tokens == 5000 and out["half"].calls == 10


def test_text_of_a_kind_the_templates_record_never_held_is_planned_with_the_models_ratios():
    est = TokenEstimator()
    est.seed(_fit([100] * 5, a=100) .merge(_fit([125] * 5, a=0, b=100)))  # English 1.0, Chinese 1.25
    english = _fit([80] * TEMPLATE_MIN_CALLS)  # this template, on English text only: 0.8
    est.seed_templates({"t": english})
    chinese = (0.0, 1000.0)
    tokens, own = est.planned_prompt(chinese, "t")
    assert not own and tokens == pytest.approx(est.prompt(chinese))  # about 1,250, not the rule's 1,000
    tokens, own = est.planned_prompt((1000.0, 0.0), "t")
    assert own and tokens == pytest.approx(800, rel=0.01)
    # Even where the record is used, its ratio for the other kind leans to the model's, not to 1
    w = english.weights(est.prior_strength, est.weights)
    assert w[1] == pytest.approx(est.weights[1])
    planned = {"t": PlannedInput()}
    planned["t"].add(800, True, True)
    planned["t"].add(1250, False, True)
    out = with_errors(planned, est)["t"]
    assert out.basis.startswith(f"learned from {TEMPLATE_MIN_CALLS} answered prompts of this template for 39% "
                                "of its tokens; the model's ratios for text of a kind it has not recorded")
    assert out.error == pytest.approx((own_error(english, 1) * 800 + 2 * est.seeded.rms() * 1250) / 2050)  # type: ignore[union-attr]


def test_what_a_run_answered_is_recorded_per_template_once_a_prompt_with_what_it_was_seeded_with():
    est = TokenEstimator()
    est.seed_templates({"t": _fit([50] * 3), "other": _fit([70] * 2)})
    for _ in range(5):  # one prompt asked five times (RACE's weight samples): one prompt learned
        est.observe((100.0, 0.0), "t", 60, 5)
    est.observe((100.0, 0.0), "new", 80, 5)
    kept = est.recorded_templates()
    assert set(kept) == {"t", "new"}  # a template this run did not answer keeps its row as it is
    assert kept["t"].calls == 4 and kept["t"].say == pytest.approx(100 * (3 * 50 + 60))
    assert kept["new"].calls == 1 and kept["new"].say == pytest.approx(100 * 80)
    # the model-wide record (what paces the run) takes every answer
    assert est.recorded().calls == 6
