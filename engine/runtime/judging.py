"""What a judge call is, independent of how it is transported.

Backends (``judge/``) implement :class:`Backend`; the pool (:mod:`drscore.engine.runtime.pool`) adds
limits, cache, in-flight de-duplication, decoding and retries around them.
"""
from __future__ import annotations

from typing import Any, Protocol

import msgspec


class Message(msgspec.Struct, frozen=True):
    role: str
    content: str


class ChatRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A fully rendered judge call.

    ``variables`` (the template inputs) and ``template`` travel with the request so the
    offline judge can score from structured inputs; they are not sent over HTTP.
    """

    messages: tuple[Message, ...]
    template: str
    template_hash: str
    schema_name: str
    schema: dict[str, Any]
    temperature: float = 0.0
    max_tokens: int = 1024
    sample: int = 0
    variables: dict[str, Any] = {}
    json_mode: bool = True


class ChatResponse(msgspec.Struct, kw_only=True):
    """The judge's raw answer and what it cost. ``input_tokens``/``output_tokens`` come
    from the API's usage when given, else from our estimate (``usage_estimated``)."""

    text: str
    input_tokens: int
    output_tokens: int
    usage_estimated: bool = False
    finish_reason: str | None = None
    model: str | None = None


class RateLimitInfo(msgspec.Struct, kw_only=True):
    """What a response said about the server's quota (all optional)."""

    retry_after_s: float | None = None
    limit_requests: float | None = None  # per minute, as OpenAI-style servers announce it
    limit_tokens: float | None = None
    remaining_requests: float | None = None
    remaining_tokens: float | None = None
    reset_requests_s: float | None = None
    reset_tokens_s: float | None = None


class JudgeError(Exception):
    """Base class for backend failures. ``reason`` is a short machine-readable word."""

    reason = "error"

    def __init__(self, message: str, *, limits: RateLimitInfo | None = None) -> None:
        super().__init__(message)
        self.limits = limits


class RateLimited(JudgeError):
    """HTTP 429: retry after the server's delay; the pool also cuts concurrency."""

    reason = "rate_limited"


class TransientError(JudgeError):
    """5xx, timeout or connection fault: retry with jittered backoff."""

    reason = "transient"


class FatalError(JudgeError):
    """4xx other than 429 (bad request, auth): do not retry."""

    reason = "fatal"


class JudgeFailed(Exception):
    """Raised to methods when a verdict could not be obtained after bounded retries."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class Backend(Protocol):
    """A transport to a judge model."""

    name: str  # "http", "sdk", "offline", ...
    model: str

    def identity(self) -> dict[str, Any]:
        """Everything about the endpoint that changes answers (never the API key)."""

    async def complete(self, request: ChatRequest) -> tuple[ChatResponse, RateLimitInfo | None]:
        """One call. Raises RateLimited, TransientError or FatalError."""

    async def close(self) -> None: ...
