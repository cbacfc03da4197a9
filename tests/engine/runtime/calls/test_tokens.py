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
