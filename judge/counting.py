"""Where a server counts a chat prompt before the call: the route, its body, its answer.

Two servers count a prompt in a few milliseconds without running the model, and say the count
its usage will give:

* vLLM's ``POST /tokenize`` (beside ``/v1``), in its chat form (``messages``, the chat
  template applied as the completion applies it): ``{"count": N, ...}``.
* Gemini's ``models.countTokens`` on its native API, beside the OpenAI-compatible one
  (``.../v1beta/openai`` → ``.../v1beta/models/NAME:countTokens``): a
  ``generateContentRequest`` with the system instruction and the turns, ``{"totalTokens": N}``.
  It takes the key as ``x-goog-api-key`` (Google's documents), not as the compatible
  endpoint's bearer token. Google's Firebase documents (for Gemini through Vertex AI) say
  counting is free, with a quota of its own (3,000 requests a minute); a busy answer there
  leaves that call to its estimate. Its own example counts a prompt one
  token below what the same prompt's usage reports, so the pool learns the difference
  (:class:`~drscore.engine.runtime.calls.prompt_counts.CountDrift`).

Any other server gets the vLLM route first; one without it answers 404 and is not asked again.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec

# The version segments Gemini's OpenAI-compatible path sits under (``/v1beta/openai``)
_GEMINI_VERSIONS = ("v1beta", "v1", "v1alpha")


class CountRoute(msgspec.Struct, frozen=True, kw_only=True):
    url: str
    field: str  # the answer's field holding the count
    google_key: bool = False  # Gemini's native API: its body, and the key as x-goog-api-key


def gemini_native_root(base_url: str) -> str | None:
    """Gemini's native API root (``https://HOST/v1beta``, the query kept) behind its
    OpenAI-compatible base URL (``https://HOST/v1beta/openai``); None for any other URL."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if not path.endswith("/openai"):
        return None
    root = path[: -len("/openai")]
    if root.rsplit("/", 1)[-1] not in _GEMINI_VERSIONS:
        return None
    return urlunsplit(parts._replace(path=root))


def _model_name(model: str) -> str:
    """The native API's resource name of ``model`` (``models/NAME``)."""
    return model if model.startswith("models/") else f"models/{model}"


def content_text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def gemini_count_body(messages: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """``models.countTokens``'s body for a chat prompt: system and developer messages as the
    system instruction, the others as turns (an assistant's as the model's)."""
    system = [{"text": content_text(m.get("content"))} for m in messages if m.get("role") in ("system", "developer")]
    contents = [{"role": "model" if m.get("role") == "assistant" else "user", "parts": [{"text": content_text(m.get("content"))}]}
                for m in messages if m.get("role") not in ("system", "developer")]
    request: dict[str, Any] = {"model": _model_name(model), "contents": contents}
    if system:
        request["systemInstruction"] = {"parts": system}
    return {"generateContentRequest": request}


def count_route(base_url: str, tokenize_url: str, model: str) -> CountRoute:
    """Where the server behind ``base_url`` counts a prompt: Gemini's countTokens behind its
    compatible path, else ``tokenize_url`` (vLLM's ``/tokenize``). The same for every call."""
    native = gemini_native_root(base_url)
    if native is None:
        return CountRoute(url=tokenize_url, field="count")
    parts = urlsplit(native)
    url = urlunsplit(parts._replace(path=f"{parts.path}/{_model_name(model)}:countTokens"))
    return CountRoute(url=url, field="totalTokens", google_key=True)


def count_body(route: CountRoute, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``route`` is sent to count a prompt of ``messages``."""
    if route.google_key:
        return gemini_count_body(messages, model)
    return {"model": model, "messages": messages, "add_generation_prompt": True}
