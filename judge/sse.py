"""A streamed chat completion (server-sent events) read back into one completion body.

Streaming is used for what arrives before the answer: the status and the quota headers,
which a provider sends when it admits the call (see :meth:`judge.http.HttpBackend.complete_streamed`).
The events are folded into the body a non-streamed call would have returned, so the same
parser (:func:`judge.http.parse_completion`) reads both and nothing about usage, thought
or finish reasons is handled twice.
"""
from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import orjson

from drscore.engine.runtime.calls.judging import TransientError
from drscore.engine.runtime.calls.redact import redact

__all__ = ["fold_events"]


async def _lines(chunks: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """The lines of a body arriving in chunks of any size: a line is never cut at a chunk's
    edge, and none is too long to read (a whole answer may come as one event)."""
    pending = b""
    async for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line
    if pending:
        yield pending


async def fold_events(chunks: AsyncIterable[bytes]) -> bytes:
    """The completion body (JSON bytes) the ``data:`` events of a stream (its bytes, in
    chunks of any size) add up to: the deltas of the first choice joined (``content``, and
    ``reasoning_content`` or ``reasoning``), its last finish reason, the usage chunk
    (``stream_options.include_usage``) and the model. An ``error`` event raises
    :class:`TransientError`; a stream that ends without ``[DONE]`` keeps what arrived (its
    finish reason is then missing)."""
    content: list[str] = []
    thought: list[str] = []
    finish: str | None = None
    usage: Any = None
    model: Any = None
    async for raw in _lines(chunks):
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue  # comments (": keep-alive"), event names, blank separators
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise TransientError(f"unreadable stream event: {redact(data[:200].decode('utf-8', 'replace'))}",
                                 kind="bad_response") from None
        if not isinstance(chunk, dict):
            continue
        if "error" in chunk:
            error = chunk["error"]
            said = error.get("message") if isinstance(error, dict) else error
            raise TransientError(redact(f"the stream ended in an error: {said}"), kind="server_error")
        model = chunk.get("model") or model
        if chunk.get("usage"):
            usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            continue
        choice = choices[0]
        delta = choice.get("delta")
        if isinstance(delta, dict):
            if isinstance(delta.get("content"), str):
                content.append(delta["content"])
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str):
                thought.append(reasoning)
        finish = choice.get("finish_reason") or finish
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content)}
    if thought:
        message["reasoning_content"] = "".join(thought)
    body: dict[str, Any] = {"object": "chat.completion", "model": model,
                            "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return orjson.dumps(body)
