"""Where a server counts a chat prompt (judge.counting): Gemini's native countTokens beside its
OpenAI-compatible path, vLLM's /tokenize for any other server."""
from __future__ import annotations

import pytest

from drscore.judge.counting import count_body, count_route, gemini_count_body, gemini_native_root


@pytest.mark.parametrize(("base", "root"), [
    ("https://generativelanguage.googleapis.com/v1beta/openai/", "https://generativelanguage.googleapis.com/v1beta"),
    ("https://generativelanguage.googleapis.com/v1beta/openai", "https://generativelanguage.googleapis.com/v1beta"),
    ("https://gw.example/google/v1beta/openai?key=abc", "https://gw.example/google/v1beta?key=abc"),
    ("https://api.openai.com/v1", None),
    ("https://gateway.ai.cloudflare.com/v1/acct/gw/openai", None),  # a gateway's provider path, not Gemini's
    ("https://team.openai.azure.com/openai/deployments/gpt-4o", None),
])
def test_gemini_is_recognised_by_its_compatible_path(base, root):
    assert gemini_native_root(base) == root


def test_the_system_message_is_the_instruction_and_an_assistants_turn_the_models():
    messages = [{"role": "system", "content": "Judge."}, {"role": "user", "content": "Report."},
                {"role": "assistant", "content": "{}"}, {"role": "user", "content": [{"type": "text", "text": "Again."}]}]
    assert gemini_count_body(messages, "models/gemini-2.5-pro") == {"generateContentRequest": {
        "model": "models/gemini-2.5-pro", "systemInstruction": {"parts": [{"text": "Judge."}]},
        "contents": [{"role": "user", "parts": [{"text": "Report."}]}, {"role": "model", "parts": [{"text": "{}"}]},
                     {"role": "user", "parts": [{"text": "Again."}]}]}}


def test_any_other_server_is_asked_at_tokenize_beside_v1():
    route = count_route("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/tokenize", "qwen")
    assert route.url == "http://127.0.0.1:8000/tokenize" and route.field == "count" and not route.google_key
    assert count_body(route, "qwen", [{"role": "user", "content": "x"}]) == {
        "model": "qwen", "messages": [{"role": "user", "content": "x"}], "add_generation_prompt": True}
    gemini = count_route("https://generativelanguage.googleapis.com/v1beta/openai/", "unused", "gemini-2.0-flash")
    assert gemini.url == "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:countTokens"
    assert gemini.field == "totalTokens" and gemini.google_key
    assert count_body(gemini, "gemini-2.0-flash", []) == gemini_count_body([], "gemini-2.0-flash")
