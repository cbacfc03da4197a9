"""The mock judge as a thinking model (``--reasoning-tokens N``, ``--reasoning-style``).

Modelled on what the providers document and what their users report:

* The thought is spent **before** the answer and counts against the output cap
  (``max_completion_tokens`` or ``max_tokens``). A cap smaller than the thought leaves an
  empty answer with ``finish_reason: "length"``; a cap between the thought and thought +
  answer cuts the answer off, also with ``"length"``. Either way every token up to the cap
  is billed.
* ``usage.completion_tokens`` includes the reasoning tokens, as OpenAI reports them.
* How the thought shows depends on the server: ``hidden`` (OpenAI's o-series, Gemini's
  compatible endpoint: only ``usage.completion_tokens_details.reasoning_tokens``),
  ``field`` (vLLM with a reasoning parser, DeepSeek: ``message.reasoning_content``, no
  reasoning count in usage), ``think`` (Ollama, llama.cpp: ``<think>...</think>`` before
  the answer in ``content``, no reasoning count).
* Asking for less or more thinking works as documented: ``reasoning_effort`` low/high
  halves/doubles the thought; a thinking budget (Gemini's
  ``extra_body.google.thinking_config.thinking_budget``, Anthropic's ``thinking.budget_tokens``)
  bounds it.
"""
from __future__ import annotations

from typing import Any

import msgspec

from drscore.judge.mock.completions import truncated

STYLES = ("hidden", "field", "think")
_EFFORT_SCALE = {"low": 0.5, "medium": 1.0, "high": 2.0, "minimal": 0.1}
# The thought's words: one mock token each (no punctuation), so N words are N tokens.
_WORDS = ("consider", "the", "criteria", "weigh", "evidence", "against", "report", "section", "then", "score")


class Thought(msgspec.Struct, kw_only=True):
    """What a thinking call answers: the content, the billed output, the reasoning part
    of it, and how it ended."""

    content: str
    completion_tokens: int
    reasoning_tokens: int
    finish_reason: str
    reasoning_content: str | None = None  # the ``field`` style's visible thought


def thought_text(tokens: int) -> str:
    """A thought of exactly ``tokens`` mock tokens."""
    return " ".join(_WORDS[i % len(_WORDS)] for i in range(max(0, tokens)))


def output_cap(payload: dict[str, Any]) -> int | None:
    """The output cap the request set (None: the server's own, here unlimited)."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = payload.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def planned_reasoning(payload: dict[str, Any], base: int) -> int:
    """Reasoning tokens this request would spend with no cap in the way."""
    if base <= 0:
        return 0
    effort = payload.get("reasoning_effort")
    tokens = round(base * _EFFORT_SCALE.get(effort, 1.0)) if isinstance(effort, str) else base
    budget = _thinking_budget(payload)
    return min(tokens, budget) if budget is not None else tokens


def _thinking_budget(payload: dict[str, Any]) -> int | None:
    thinking = payload.get("thinking")
    if isinstance(thinking, dict) and isinstance(thinking.get("budget_tokens"), int):
        return int(thinking["budget_tokens"])
    extra = payload.get("extra_body")
    google = extra.get("google") if isinstance(extra, dict) else None
    config = google.get("thinking_config") if isinstance(google, dict) else None
    budget = config.get("thinking_budget") if isinstance(config, dict) else None
    if isinstance(budget, int) and budget >= 0:
        return budget
    return None


def think(payload: dict[str, Any], answer: str, answer_tokens: int, base: int, style: str) -> Thought:
    """The answer of a thinking model spending ``base`` reasoning tokens (before effort
    and budget) on a request whose plain answer is ``answer`` (``answer_tokens`` long)."""
    reasoning = planned_reasoning(payload, base)
    cap = output_cap(payload)
    if reasoning == 0:
        if cap is not None and cap < answer_tokens:  # a real server stops at the cap too
            return Thought(content=truncated(answer), completion_tokens=max(0, cap), reasoning_tokens=0,
                           finish_reason="length")
        return Thought(content=answer, completion_tokens=answer_tokens, reasoning_tokens=0, finish_reason="stop")
    finish = "stop"
    if cap is not None and cap <= reasoning:  # cut off while thinking: nothing of the answer
        reasoning, answer, answer_tokens, finish = max(0, cap), "", 0, "length"
    elif cap is not None and cap < reasoning + answer_tokens:  # cut off mid-answer
        answer, answer_tokens, finish = truncated(answer), cap - reasoning, "length"
    thought = thought_text(reasoning)
    if style == "field":
        return Thought(content=answer, completion_tokens=reasoning + answer_tokens, reasoning_tokens=reasoning,
                       finish_reason=finish, reasoning_content=thought)
    if style == "think":
        closed = answer or finish == "stop"
        content = f"<think>\n{thought}\n</think>\n\n{answer}" if closed else f"<think>\n{thought}"
        return Thought(content=content, completion_tokens=reasoning + answer_tokens, reasoning_tokens=reasoning,
                       finish_reason=finish)
    return Thought(content=answer, completion_tokens=reasoning + answer_tokens, reasoning_tokens=reasoning,
                   finish_reason=finish)


def shape_body(body: dict[str, Any], thought: Thought, style: str) -> dict[str, Any]:
    """Put a thinking answer's finish reason, visible thought and reasoning count into a
    chat-completion body (only the ``hidden`` style reports the count in usage)."""
    choice = body["choices"][0]
    choice["finish_reason"] = thought.finish_reason
    if thought.reasoning_content is not None:
        choice["message"]["reasoning_content"] = thought.reasoning_content
    if style == "hidden" and thought.reasoning_tokens:
        body["usage"]["completion_tokens_details"] = {"reasoning_tokens": thought.reasoning_tokens}
    return body
