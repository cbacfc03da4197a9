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
