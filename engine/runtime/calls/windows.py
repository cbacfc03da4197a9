"""What we know of a model's token limits: its context window and its output ceiling.

Used to refuse a request that cannot fit before it is paid for, to bound the output cap
sent to thinking models, and to decide how much of a cited page a judge can be shown.
The table is a snapshot of the providers' published figures and will age; a window stated
in an endpoint's own 400 message is learned at run time and wins over it (see the pool).

Names are matched after dropping a router's provider prefix (``openai/gpt-4.1``,
``google/gemini-2.5-pro``), exactly first, then by the longest known prefix
(``gpt-4o-2024-08-06`` -> ``gpt-4o``). Unknown models (an Azure deployment name, a local
model) have no entry: callers treat that as "unknown", never as a small window.
"""
from __future__ import annotations

import re

import msgspec


class ModelWindow(msgspec.Struct, frozen=True):
    context: int  # input + output tokens the model accepts in one request
    max_output: int  # the largest output cap the provider accepts (thinking included)


# Published figures (provider model pages). Thinking models count hidden reasoning
# against ``max_output``.
WINDOWS: dict[str, ModelWindow] = {
    "gpt-4o": ModelWindow(128_000, 16_384),
    "gpt-4o-mini": ModelWindow(128_000, 16_384),
    "gpt-4-turbo": ModelWindow(128_000, 4_096),
    "gpt-4.1": ModelWindow(1_047_576, 32_768),
    "gpt-4.1-mini": ModelWindow(1_047_576, 32_768),
    "gpt-4.1-nano": ModelWindow(1_047_576, 32_768),
    "gpt-5": ModelWindow(400_000, 128_000),
    "gpt-5-mini": ModelWindow(400_000, 128_000),
    "gpt-5-nano": ModelWindow(400_000, 128_000),
    "o1": ModelWindow(200_000, 100_000),
    "o1-mini": ModelWindow(128_000, 65_536),
    "o3": ModelWindow(200_000, 100_000),
    "o3-mini": ModelWindow(200_000, 100_000),
    "o4-mini": ModelWindow(200_000, 100_000),
    "gemini-2.0-flash": ModelWindow(1_048_576, 8_192),
    "gemini-2.5-pro": ModelWindow(1_048_576, 65_536),
    "gemini-2.5-flash": ModelWindow(1_048_576, 65_536),
    "gemini-3-pro": ModelWindow(1_048_576, 65_536),
    "claude-3-5-sonnet": ModelWindow(200_000, 8_192),
    "claude-3-7-sonnet": ModelWindow(200_000, 64_000),
    "claude-sonnet-4": ModelWindow(200_000, 64_000),
    "claude-opus-4": ModelWindow(200_000, 32_000),
    "deepseek-chat": ModelWindow(128_000, 8_192),
    "deepseek-reasoner": ModelWindow(128_000, 64_000),
    "deepseek-r1": ModelWindow(128_000, 32_768),
    "qwen3": ModelWindow(40_960, 32_768),
    "llama-3.1": ModelWindow(131_072, 131_072),
    "llama-3.3": ModelWindow(131_072, 131_072),
}

# Routers and gateways put the provider before the model (OpenRouter, LiteLLM, Vertex).
_PROVIDER_PREFIXES = ("openai/", "google/", "anthropic/", "deepseek/", "deepseek-ai/", "qwen/",
                      "meta-llama/", "gemini/", "azure/", "models/")


def base_model_name(model: str) -> str:
    """``model`` lower-cased, without a router's provider prefix (``openai/gpt-4.1`` -> ``gpt-4.1``)."""
    name = model.strip().lower()
    changed = True
    while changed:
        changed = False
        for prefix in _PROVIDER_PREFIXES:
            if name.startswith(prefix):
                name, changed = name[len(prefix):], True
    return name


def window_of(model: str, table: dict[str, ModelWindow] | None = None) -> ModelWindow | None:
    """The known limits of ``model``, or None when the table does not know it."""
    known = WINDOWS if table is None else table
    name = base_model_name(model)
    if name in known:
        return known[name]
    best = max((m for m in known if name.startswith(m)), key=len, default=None)
    return known[best] if best else None


# Token counts before a call are estimates (engine.runtime.tokens: learned from the
# server's usage, but never exact): a request is refused before it is sent only when its
# estimate is this far over the window, so a prompt that might fit is always tried.
OVER_MARGIN = 1.1
# Before any usage was seen the estimate is the fixed character rule (4 ASCII characters
# or 1 wide character per token), which over-counts CJK text for large vocabularies.
UNLEARNED_OVER_MARGIN = 1.5


def clearly_over(tokens: float, window: int | None, margin: float = OVER_MARGIN) -> bool:
    """Whether an estimated ``tokens`` is certainly too many for ``window`` (None: unknown
    window, never over)."""
    return window is not None and window > 0 and tokens > window * margin


class StatedWindow(msgspec.Struct, frozen=True):
    """What an endpoint's context-length error says: the window, and the tokens the
    request came to when the message states them."""

    window: int
    requested: int | None = None


# How providers state the window in a context-length error (their documented or observed
# wording; numbers may carry thousands separators):
#   OpenAI, vLLM: "This model's maximum context length is 4096 tokens. However, you requested
#                  5000 tokens (4000 in the messages, 1000 in the completion)."
#                 "... maximum context length is 32768 tokens. However, your messages resulted
#                  in 40000 tokens" / "... and your request has 40000 input tokens"
#   Anthropic:    "prompt is too long: 215000 tokens > 200000 maximum"
#   Gemini:       "The input token count (1200000) exceeds the maximum number of tokens
#                  allowed (1048576)."
#   llama-server: "request (5000 tokens) exceeds the available context size (4096 tokens), try
#                  increasing it" (type exceed_context_size_error, with "n_ctx": 4096 beside it)
_N = r"(\d[\d,]*)"
_WINDOW_PATTERNS = (
    re.compile(rf"maximum context length is {_N}", re.IGNORECASE),
    re.compile(rf"{_N} tokens > {_N} maximum", re.IGNORECASE),
    re.compile(rf"maximum number of tokens allowed(?: is)? \(?{_N}\)?", re.IGNORECASE),
    re.compile(rf"context (?:window|size|length) (?:is |of )?\(?{_N}", re.IGNORECASE),
    re.compile(rf"\"n_ctx\"\s*:\s*{_N}"),
)
_REQUESTED_PATTERNS = (
    re.compile(rf"you requested {_N} tokens", re.IGNORECASE),
    re.compile(rf"resulted in {_N} tokens", re.IGNORECASE),
    re.compile(rf"your request has {_N} input tokens", re.IGNORECASE),
    re.compile(rf"prompt is too long: {_N} tokens", re.IGNORECASE),
    re.compile(rf"input token count \(?(?:of )?{_N}\)?", re.IGNORECASE),
    re.compile(rf"(?:request|input) \({_N} tokens\)", re.IGNORECASE),
    re.compile(rf"\"n_prompt_tokens\"\s*:\s*{_N}"),
)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def stated_window(message: str) -> StatedWindow | None:
    """The window (and the request's size) a context-length error message states, or None."""
    for pattern in _WINDOW_PATTERNS:
        m = pattern.search(message)
        if m:
            # Anthropic's "N tokens > W maximum": the window is the second number.
            window = _int(m.group(m.lastindex or 1))
            break
    else:
        return None
    requested = None
    for pattern in _REQUESTED_PATTERNS:
        r = pattern.search(message)
        if r:
            requested = _int(r.group(1))
            break
    return StatedWindow(window, requested) if window > 0 else None
