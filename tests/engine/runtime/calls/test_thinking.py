"""The thinking policy: output caps per family, the one larger cap of a retry, learning
that an unknown model thinks, and taking thoughts out of answers."""
from __future__ import annotations

import pytest

from drscore.engine.runtime.calls.thinking import ThinkingPolicy, family_of, is_cut_off, split_thinking


@pytest.mark.parametrize("model, family", [
    ("o3", "openai"), ("o4-mini", "openai"), ("gpt-5-mini", "openai"), ("openai/o3", "openai"),
    ("gemini-2.5-pro", "gemini"), ("google/gemini-2.5-flash", "gemini"), ("gemini-3-pro-preview", "gemini"),
    ("claude-sonnet-4-20250514", "claude"), ("claude-3-7-sonnet-latest", "claude"),
    ("deepseek-r1", "open"), ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "open"), ("qwen3:8b", "open"),
    ("gpt-4o", None), ("gpt-4.1", None), ("gemini-2.0-flash", None), ("claude-3-5-sonnet", None),
    ("acme-judge-7b", None), ("deepseek-chat", None),
])
def test_family_of_known_names(model, family):
    assert family_of(model) == family


def test_non_thinking_models_keep_the_template_cap():
    for model in ("gpt-4o", "acme-judge-7b", "claude-sonnet-4"):  # Claude thinks only when asked
        assert ThinkingPolicy(model).cap(250) == 250


def test_thinking_models_get_the_family_allowance_within_the_ceiling():
    assert ThinkingPolicy("o3").cap(1500) == 1500 + 25_000  # OpenAI's suggested 25k reserve
    assert ThinkingPolicy("o3", effort="low").cap(1500) == 1500 + 8_000
    assert ThinkingPolicy("gemini-2.5-pro").cap(250) == 250 + 16_384
    assert ThinkingPolicy("gemini-2.5-pro", effort="high").cap(250) == 250 + 28_672
    assert ThinkingPolicy("claude-sonnet-4", effort="medium").cap(250) == 250 + 8_192
    assert ThinkingPolicy("deepseek-r1").cap(250) == 250 + 8_192
    # the DRB preset's budget is the allowance
    assert ThinkingPolicy("gemini-2.5-pro", thinking_budget=16_000).cap(1500) == 17_500
    # bounded by the model's published output ceiling: o3 allows 100,000
    assert ThinkingPolicy("o3", effort="high").cap(60_000) == 100_000


def test_max_output_tokens_sets_the_cap_outright():
    assert ThinkingPolicy("o3", max_output=4000).cap(1500) == 4000
    assert ThinkingPolicy("gpt-4o", max_output=900).cap(250) == 900


def test_bad_values_are_named():
    with pytest.raises(ValueError, match="--reasoning-effort"):
        ThinkingPolicy("o3", effort="extreme")
    with pytest.raises(ValueError, match="--max-output-tokens"):
        ThinkingPolicy("o3", max_output=0)


def test_raised_cap_is_larger_and_bounded():
    # gpt-4o (16,384 ceiling) cut at 250: 250 + the open-model room of 8,192
    assert ThinkingPolicy("gpt-4o").raised_cap(250) == 8442
    # o3 cut at 26,500: doubled (53,000 > 26,500 + 25,000)
    assert ThinkingPolicy("o3").raised_cap(26_500) == 53_000
    assert ThinkingPolicy("o3").raised_cap(80_000) == 100_000
    assert ThinkingPolicy("o3").raised_cap(100_000) is None  # never the same cap again
    assert ThinkingPolicy("gemini-2.0-flash").raised_cap(8192) is None
    # an unknown model has no published ceiling: 32,768 stands in
    assert ThinkingPolicy("acme-judge-7b").raised_cap(30_000) == 32_768


@pytest.mark.parametrize("signal", [
    {"reasoning_tokens": 300, "thought_visible": False, "cut_empty": False},
    {"reasoning_tokens": 0, "thought_visible": True, "cut_empty": False},
    {"reasoning_tokens": 0, "thought_visible": False, "cut_empty": True},
])
def test_an_unknown_model_that_thinks_is_adapted_to_once(signal):
    policy = ThinkingPolicy("acme-judge-7b")
    assert policy.cap(250) == 250
    assert policy.observe(**signal) is True
    assert policy.cap(250) == 250 + 8_192
    assert policy.observe(**signal) is False  # remembered, not learned again


def test_a_plain_answer_teaches_nothing():
    policy = ThinkingPolicy("acme-judge-7b")
    assert policy.observe(reasoning_tokens=0, thought_visible=False, cut_empty=False) is False
    assert policy.cap(250) == 250 and not policy.learned


def test_expected_reasoning_is_the_prior_then_the_learned_mean():
    policy = ThinkingPolicy("o3")
    assert policy.expected_reasoning() == (2_000, "prior")
    policy.observe(reasoning_tokens=1000, thought_visible=False, cut_empty=False)
    policy.observe(reasoning_tokens=3000, thought_visible=False, cut_empty=False)
    assert policy.expected_reasoning() == (2_000, "learned")  # (1000 + 3000) / 2
    policy.observe(reasoning_tokens=5000, thought_visible=False, cut_empty=False)
    assert policy.expected_reasoning() == (3_000, "learned")
    assert ThinkingPolicy("gpt-4o").expected_reasoning() == (0, "none")


@pytest.mark.parametrize("reason, cut", [("length", True), ("MAX_TOKENS", True), ("max_tokens", True),
                                         ("stop", False), ("content_filter", False), (None, False)])
def test_is_cut_off(reason, cut):
    assert is_cut_off(reason) is cut


def test_split_thinking_takes_every_thought_out():
    assert split_thinking('<think>\nscore 1?\n</think>\n\n{"score": 3}') == ('{"score": 3}', "score 1?")
    assert split_thinking('<thinking>a</thinking>{"x": 1}<think>b</think>') == ('{"x": 1}', "ab")
    # cut off while thinking: no answer at all
    assert split_thinking("<think>\nstill weighing {\"score\": 2") == ("", 'still weighing {"score": 2')
    # the chat template opened the block in the prompt: only the closing tag arrives
    assert split_thinking('weighing...</think>{"score": 4}') == ('{"score": 4}', "weighing...")
    assert split_thinking('{"score": 4}') == ('{"score": 4}', "")


def test_a_cut_off_teaches_the_run_the_room_later_calls_start_with():
    p = ThinkingPolicy("o3")  # answer cap + 25,000
    assert p.cap(1000) == 26_000 and p.cap(300) == 25_300
    p.learn_cut_off(1000, 26_000)  # its retry: max(2 x 26,000, 26,000 + 25,000) = 52,000
    assert p.learned_room == 51_000
    assert p.cap(1000) == 52_000 and p.cap(300) == 51_300  # every template gets the room
    p.learn_cut_off(300, 25_300)  # an older call in flight, cut lower: never shrinks
    assert p.learned_room == 51_000
    p.learn_cut_off(1000, 52_000)  # cut again at the learned cap: grows, within o3's ceiling
    assert p.cap(1000) == min(104_000, p.bound())


def test_an_explicit_cap_learns_only_when_cut_off_answers_may_be_retried():
    fixed = ThinkingPolicy("o3", max_output=1000)
    fixed.learn_cut_off(50, 1000)
    assert fixed.raised_cap(1000) is None and fixed.cap(50) == 1000
    asked = ThinkingPolicy("o3", max_output=1000, retry_cut_off=True)
    asked.learn_cut_off(50, 1000)
    assert asked.raised_cap(1000) == 26_000 and asked.cap(50) == 26_000 and asked.cap(5000) == 30_950
