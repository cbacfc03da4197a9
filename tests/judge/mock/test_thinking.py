"""The mock judge as a thinking model: the thought counts against the cap, usage reports
it inside completion_tokens, and each style shows it the way its servers do."""
from __future__ import annotations

import pytest

from drscore.judge.mock.completions import count_tokens
from drscore.judge.mock.server import MockConfig
from drscore.judge.mock.thinking import planned_reasoning, shape_body, think, thought_text

ANSWER = '{"score": 3, "reason": "clear"}'
ANSWER_TOKENS = count_tokens(ANSWER)


def test_thought_text_is_exactly_n_mock_tokens():
    assert count_tokens(thought_text(2000)) == 2000 and thought_text(0) == ""


def test_room_for_thought_and_answer_answers_in_full():
    t = think({"max_completion_tokens": 2000 + ANSWER_TOKENS}, ANSWER, ANSWER_TOKENS, 2000, "hidden")
    assert (t.content, t.finish_reason) == (ANSWER, "stop")
    assert (t.completion_tokens, t.reasoning_tokens) == (2000 + ANSWER_TOKENS, 2000)


def test_a_cap_below_the_thought_gives_an_empty_answer_cut_by_length():
    t = think({"max_tokens": 250}, ANSWER, ANSWER_TOKENS, 2000, "hidden")
    assert (t.content, t.finish_reason, t.completion_tokens, t.reasoning_tokens) == ("", "length", 250, 250)


def test_a_cap_inside_the_answer_cuts_the_answer():
    t = think({"max_tokens": 2005}, ANSWER, ANSWER_TOKENS, 2000, "hidden")
    assert t.finish_reason == "length" and t.content != ANSWER and t.completion_tokens == 2005


def test_effort_and_budgets_change_the_thought():
    assert planned_reasoning({"reasoning_effort": "low"}, 2000) == 1000
    assert planned_reasoning({"reasoning_effort": "high"}, 2000) == 4000
    assert planned_reasoning({"thinking": {"type": "enabled", "budget_tokens": 1024}}, 2000) == 1024
    assert planned_reasoning({"extra_body": {"google": {"thinking_config": {"thinking_budget": 500}}}},
                             2000) == 500
    assert planned_reasoning({}, 0) == 0


def test_styles_show_the_thought_as_their_servers_do():
    usage = {"prompt_tokens": 10, "completion_tokens": 2000 + ANSWER_TOKENS}

    def body(content):
        return {"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": dict(usage)}

    hidden = think({}, ANSWER, ANSWER_TOKENS, 2000, "hidden")
    out = shape_body(body(hidden.content), hidden, "hidden")
    assert out["usage"]["completion_tokens_details"] == {"reasoning_tokens": 2000}

    field = think({}, ANSWER, ANSWER_TOKENS, 2000, "field")
    out = shape_body(body(field.content), field, "field")
    assert out["choices"][0]["message"]["content"] == ANSWER
    assert count_tokens(out["choices"][0]["message"]["reasoning_content"]) == 2000
    assert "completion_tokens_details" not in out["usage"]

    tagged = think({}, ANSWER, ANSWER_TOKENS, 2000, "think")
    assert tagged.content.startswith("<think>\n") and tagged.content.endswith("</think>\n\n" + ANSWER)
    cut = think({"max_tokens": 100}, ANSWER, ANSWER_TOKENS, 2000, "think")
    assert cut.content.startswith("<think>") and "</think>" not in cut.content


def test_an_unknown_style_is_refused_by_name():
    with pytest.raises(ValueError, match="reasoning_style"):
        MockConfig(reasoning_style="loud")


async def test_the_server_counts_thought_and_cut_off_answers():
    import aiohttp

    from drscore.judge.mock.server import start

    runner, port = await start(MockConfig(reasoning_tokens=100))
    url = f"http://127.0.0.1:{port}"
    body = {"model": "o3", "messages": [{"role": "user", "content": "Rate it."}]}
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(f"{url}/v1/chat/completions", json={**body, "max_completion_tokens": 50}) as r:
                cut = await r.json()
            async with s.post(f"{url}/v1/chat/completions", json=body) as r:
                full = await r.json()
            async with s.get(f"{url}/stats") as r:
                stats = await r.json()
    finally:
        await runner.cleanup()
    assert cut["choices"][0]["finish_reason"] == "length" and cut["choices"][0]["message"]["content"] == ""
    assert cut["usage"]["completion_tokens"] == 50
    assert cut["usage"]["completion_tokens_details"] == {"reasoning_tokens": 50}
    answer_tokens = count_tokens(full["choices"][0]["message"]["content"])
    assert full["choices"][0]["finish_reason"] == "stop"
    assert full["usage"]["completion_tokens"] == 100 + answer_tokens
    assert (stats["ok"], stats["cut_off"], stats["reasoning_tokens"]) == (1, 1, 150)
    assert stats["requests"] == stats["ok"] + stats["cut_off"]
    assert stats["completion_tokens"] == 50 + 100 + answer_tokens
