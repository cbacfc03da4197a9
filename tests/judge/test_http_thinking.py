"""Thinking judges on the wire: how an effort or a budget is spelled per provider, and
how an answer's usage, finish reason and thought are read."""
from __future__ import annotations

import orjson
import pytest

from drscore.engine.runtime.calls.judging import ChatRequest, Message
from drscore.judge.http import parse_completion
from drscore.judge.wire import family_profile, request_body


def _request() -> ChatRequest:
    return ChatRequest(messages=(Message("user", "Rate."),), template="t", template_hash="h",
                       schema_name="V", schema={"type": "object"}, max_tokens=1750, temperature=0.0)


def _body(model: str, **kw) -> dict:
    return request_body(_request(), model, family_profile(model, **kw))


def test_openai_effort_is_reasoning_effort_beside_max_completion_tokens():
    body = _body("o3", effort="low")
    assert body["reasoning_effort"] == "low" and body["max_completion_tokens"] == 1750
    assert "temperature" not in body and "max_tokens" not in body


def test_gemini_takes_reasoning_effort_or_an_explicit_thinking_budget_never_both():
    body = _body("gemini-2.5-pro", effort="high")
    assert body["reasoning_effort"] == "high" and body["max_tokens"] == 1750
    body = _body("gemini-2.5-pro", effort="high", thinking_budget=16_000)
    assert body["extra_body"] == {"google": {"thinking_config": {"thinking_budget": 16_000}}}
    assert "reasoning_effort" not in body


def test_claude_thinking_is_a_budget_and_drops_temperature():
    body = _body("claude-sonnet-4", effort="medium")
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 6_144}
    assert "temperature" not in body and body["max_tokens"] == 1750
    plain = _body("claude-sonnet-4")  # no effort: Claude does not think, the body is the classic one
    assert "thinking" not in plain and plain["temperature"] == 0.0


def test_open_models_get_no_thinking_field_and_default_bodies_are_unchanged():
    assert set(_body("deepseek-r1", effort="high")) == {"model", "messages", "temperature", "max_tokens",
                                                        "response_format"}
    assert set(_body("gpt-4o")) == {"model", "messages", "temperature", "max_tokens", "response_format"}
    assert family_profile("gpt-4o").identity() == {}  # cache keys of plain runs do not move


def test_provider_temperature_leaves_temperature_out_and_is_part_of_the_identity():
    profile = family_profile("gpt-4o", provider_temperature=True)
    assert "temperature" not in request_body(_request(), "gpt-4o", profile)
    assert profile.identity() == {"temperature": "provider-default"}
    assert family_profile("o3", effort="high").identity() == {"reasoning_effort": "high"}


def _completion(message: dict, usage: dict | None, finish: str = "stop") -> bytes:
    obj: dict = {"choices": [{"message": message, "finish_reason": finish}], "model": "m"}
    if usage is not None:
        obj["usage"] = usage
    return orjson.dumps(obj)


def test_openai_usage_counts_reasoning_inside_completion_tokens():
    raw = _completion({"content": '{"score": 3}'}, {"prompt_tokens": 100, "completion_tokens": 520,
                      "total_tokens": 620, "completion_tokens_details": {"reasoning_tokens": 500}})
    resp = parse_completion(raw, _request())
    assert (resp.text, resp.output_tokens, resp.reasoning_tokens) == ('{"score": 3}', 520, 500)


def test_a_bridge_reporting_thoughts_beside_completion_tokens_is_billed_for_both():
    # total = prompt + completion + reasoning: the 500 thought tokens are not inside the 20
    raw = _completion({"content": '{"score": 3}'}, {"prompt_tokens": 100, "completion_tokens": 20,
                      "total_tokens": 620, "completion_tokens_details": {"reasoning_tokens": 500}})
    resp = parse_completion(raw, _request())
    assert (resp.output_tokens, resp.reasoning_tokens) == (520, 500)


def test_an_empty_answer_cut_off_by_length_keeps_its_finish_reason():
    raw = _completion({"content": None}, {"prompt_tokens": 100, "completion_tokens": 1750, "total_tokens": 1850,
                      "completion_tokens_details": {"reasoning_tokens": 1750}}, finish="length")
    resp = parse_completion(raw, _request())
    assert (resp.text, resp.finish_reason, resp.reasoning_tokens) == ("", "length", 1750)


@pytest.mark.parametrize("message", [
    {"content": '{"score": 3}', "reasoning_content": "weigh the criteria " * 30},
    {"content": "<think>\n" + "weigh the criteria " * 30 + "\n</think>\n\n{\"score\": 3}"},
])
def test_a_visible_thought_is_taken_out_and_its_share_of_the_output_counted(message):
    raw = _completion(message, {"prompt_tokens": 100, "completion_tokens": 100, "total_tokens": 200})
    resp = parse_completion(raw, _request())
    assert resp.text == '{"score": 3}' and resp.thought_visible
    assert resp.output_tokens == 100
    assert 50 < resp.reasoning_tokens < 100  # most of the output was the thought, not all of it
