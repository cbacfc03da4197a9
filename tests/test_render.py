"""The printed summary's notes that no run of the mock reaches: fitted caps an answer ran past."""
from __future__ import annotations

from drscore.render import _judge_notes


def test_fitted_caps_an_answer_ran_past_say_what_the_cut_answers_cost():
    fitted = {"templates": {}, "cut": 2, "cut_cost_usd": 0.0123, "reserved_less": 12_345}
    (line,) = [n for n in _judge_notes({"output_caps_fitted": fitted}) if "fitted" in n]
    assert "12,345 tokens of quota not reserved" in line
    assert "2 answers ran past it and were asked again at the template's cap (they cost $0.0123)" in line
    unpriced = _judge_notes({"output_caps_fitted": {**fitted, "cut_cost_usd": None}})
    assert any("(they cost unknown)" in n for n in unpriced)  # a model without a price: never "free"
