"""Prices: a router's provider prefix is priced as the model, an unknown model is priced
as unknown (None), never as free."""
from __future__ import annotations

import pytest

from drscore.engine.runtime.calls.pricing import PriceTable, cost_text, known_cost, sum_costs


@pytest.mark.parametrize("model, base", [("openai/gpt-4.1", "gpt-4.1"), ("google/gemini-2.5-pro", "gemini-2.5-pro"),
                                         ("openai/gpt-4.1-2025-04-14", "gpt-4.1"), ("OpenAI/o3", "o3")])
def test_a_provider_prefix_is_priced_as_the_model(model, base):
    table = PriceTable()
    assert table.lookup(model) == table.lookup(base) is not None
    # 1,000 input tokens and 500 output tokens at the model's own rates
    price = table.lookup(base)
    assert table.cost(model, 1000, 500) == pytest.approx((1000 * price.input + 500 * price.output) / 1e6)


def test_an_unknown_model_is_not_known():
    table = PriceTable()
    assert not table.known("acme-judge-7b") and table.lookup("acme/judge") is None
    assert table.known("gpt-4o-2024-08-06")


def test_unknown_costs_stay_unknown_when_summed_and_shown():
    assert sum_costs([0.5, 0.25]) == 0.75
    assert sum_costs([0.5, None, 0.25]) is None
    assert sum_costs([]) == 0.0
    assert known_cost(0.123456789, True) == 0.12345679 and known_cost(0.1, False) is None
    assert cost_text(None) == "unknown" and cost_text(0.0) == "0.0000" and cost_text(1.23456, 2) == "1.23"
