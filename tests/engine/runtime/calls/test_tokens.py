"""Token estimates and learning the server's counting from usage."""
from __future__ import annotations

import pytest

from drscore.engine.runtime.calls.tokens import TokenEstimator, estimate_tokens, message_features, split_estimate


def test_character_rule_by_hand():
    assert split_estimate("abcdefgh") == (2.0, 0.0)  # 8 ASCII chars / 4
    assert split_estimate("中文报告") == (0.0, 4.0)  # one token per wide char
    assert split_estimate("ab中文") == (0.5, 2.0)
    assert estimate_tokens("") == 0 and estimate_tokens("a") == 1
    # two messages: content + 4 overhead each, + 2 for the reply priming
    assert message_features([{"role": "user", "content": "abcd"}, {"role": "system", "content": "中"}]) == (
        2 + (1 + 4) + (0 + 4), 1.0)


def test_estimator_learns_per_script_weights_from_usage():
    est = TokenEstimator()
    # Before any usage: the prior (weights 1, 1) plus the template's expected output.
    assert est.estimate((400.0, 100.0), "t", 50) == 550
    # The server counts 0.8 per ASCII unit and 0.3 per wide unit, and answers with 120 tokens.
    mixes = [(1000.0, 0.0), (0.0, 3000.0), (500.0, 800.0), (2000.0, 10.0), (30.0, 4000.0)] * 6
    for a, w in mixes:
        est.observe((a, w), "t", round(0.8 * a + 0.3 * w), 120)
    assert est.weights[0] == pytest.approx(0.8, rel=0.02)
    assert est.weights[1] == pytest.approx(0.3, rel=0.02)
    assert est.completion("t", 50) == pytest.approx(120, rel=0.01)
    # Pure English and pure Chinese requests are each estimated right, not on average.
    assert est.estimate((3000.0, 0.0), "t", 50) == pytest.approx(2400 + 120, rel=0.03)
    assert est.estimate((0.0, 3000.0), "t", 50) == pytest.approx(900 + 120, rel=0.03)


def test_unseen_direction_stays_at_prior():
    est = TokenEstimator()
    for _ in range(10):
        est.observe((1000.0, 0.0), "t", 500, 10)  # only ASCII text seen so far
    assert est.weights[0] == pytest.approx(0.5, rel=0.05)
    assert est.weights[1] == pytest.approx(1.0, rel=0.05)  # wide text: no evidence, prior kept


def test_the_answers_length_error_by_hand():
    est = TokenEstimator()
    assert est.completion_error("t", 200) == pytest.approx(0.3 * 200)  # the prior, before any answer
    est.observe((10.0, 0.0), "t", 10, 100)
    assert est.completion_error("t", 200) == pytest.approx(0.3 * 100)  # one answer: its length, no miss yet
    est.observe((10.0, 0.0), "t", 10, 200)  # missed the mean of 100 by 100
    assert est.completion_error("t", 200) == pytest.approx(100.0)
    assert est.completion("t", 200) == pytest.approx(120.0)  # 0.8 * 100 + 0.2 * 200
    est.observe((10.0, 0.0), "t", 10, 120)  # no miss: the squared error decays by 0.8
    assert est.completion_error("t", 200) == pytest.approx((0.8 * 100 ** 2) ** 0.5)


def test_a_prompt_the_server_counted_is_learned_once():
    est = TokenEstimator()
    est.counted((100.0, 0.0), "t", 50, prompt=1)
    assert est.observations == 1 and est.fit.calls == 1 and est.weights[0] == pytest.approx(0.5, abs=0.01)
    est.observe((100.0, 0.0), "t", 50, 30, prompt=1, prompt_known=True)  # its answer: only the length is new
    assert est.observations == 1 and est.fit.calls == 1 and est.completion("t", 99) == 30
