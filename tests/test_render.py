"""The printed summary's notes that no run of the mock reaches: fitted caps an answer ran past, and a
learned binding the sizes alone chose."""
from __future__ import annotations

from drscore.render import _judge_notes


def test_fitted_caps_an_answer_ran_past_say_what_the_cut_answers_cost():
    fitted = {"templates": {}, "cut": 2, "cut_cost_usd": 0.0123, "reserved_less": 12_345}
    (line,) = [n for n in _judge_notes({"output_caps_fitted": fitted}) if "fitted" in n]
    assert "12,345 tokens of quota not reserved" in line
    assert "2 answers ran past it and were asked again at the template's cap (they cost $0.0123)" in line
    unpriced = _judge_notes({"output_caps_fitted": {**fitted, "cut_cost_usd": None}})
    assert any("(they cost unknown)" in n for n in unpriced)  # a model without a price: never "free"


def _learned(guessed: bool) -> dict:
    return {"learned_quota": {
        "binding": "tokens", "guessed": guessed, "proven_rpm": 380, "proven_tpm": 806_999, "kept": True,
        "pacing_file": None, "resumed": None, "votes": []}}


def test_a_binding_the_sizes_alone_chose_is_called_a_guess_with_the_options_that_tell_the_quota():
    guessed = "which quota binds was guessed from the refused calls' sizes"
    # which votes make a guess: tests/engine/runtime/calls/test_binding.py
    notes = _judge_notes(_learned(True))
    assert any("(tokens bind): the endpoint took at least 380 requests/min and 806,999 tokens/min" in n for n in notes)
    (line,) = [n for n in notes if guessed in n]
    assert "--rpm or --tpm tells it" in line
    assert not any(guessed in n for n in _judge_notes(_learned(False)))
    # a summary written before the field: nothing claimed
    old = _learned(False)
    del old["learned_quota"]["guessed"]
    assert not any(guessed in n for n in _judge_notes(old))
    # a run started from such a pace, with no 429 of its own: the earlier run's guess
    resumed = _learned(True)
    resumed["learned_quota"]["resumed"] = {"binding": "tokens", "per_minute": 806_999}
    (line,) = [n for n in _judge_notes(resumed) if "which quota binds was guessed" in n]
    assert "guessed from the refused calls' sizes by the earlier run this one started from (no 429 ruled" in line
    # with votes of its own, the guess is this run's
    resumed["learned_quota"]["votes"] = [{"rank": 0.8, "paced": "tokens", "strain": [0.9, 0.9], "by": "ranks",
                                          "guess": "tokens"}]
    assert not any("by the earlier run this one started from" in n for n in _judge_notes(resumed))
