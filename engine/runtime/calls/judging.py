"""What a judge call is, independent of how it is transported.

Backends (``judge/``) implement :class:`Backend`; the pool (:mod:`drscore.engine.runtime.calls.pool`) adds
limits, cache, in-flight de-duplication, decoding and retries around them.
"""
from __future__ import annotations

import contextvars
import re
from typing import Any, Callable, Protocol, runtime_checkable

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
    judge_sample: int = 0  # --samples K: which ask of this call (engine.runtime.samples)
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
    # Part of ``input_tokens`` served from the provider's prefix cache
    # (``usage.prompt_tokens_details.cached_tokens``), billed at the cached-input price.
    cached_input_tokens: int = 0
    batched: bool = False  # answered through the Batch API (billed at batch prices)
    # Part of ``output_tokens`` the model spent thinking (hidden, or shown and taken out of
    # ``text``); ``thought_visible``: the answer carried its thought (``reasoning_content``
    # or ``<think>`` blocks), which shows an unknown model thinks.
    reasoning_tokens: int = 0
    thought_visible: bool = False
    thought: str = ""  # the thought itself, when the endpoint returned it (shown by `drscore view`)


# The longest delay a server's hint (Retry-After, retryDelay, x-ratelimit-reset-*) may
# state and still be believed: a week, the top of --max-rate-limit-wait's range.
HINT_CEILING_S = 7 * 86_400.0

# What a backend calls when a call's request has left (its headers written to the socket), set
# by the pool around each send: the learner times a call by its departure, not by the limiter's
# grant, which a busy event loop may have made well before (a stretch timed from grants came
# out short, and the rate it proved over the endpoint's). A backend that cannot tell leaves the
# grant's time.
REQUEST_LEFT: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "drscore_request_left", default=None)


def request_left() -> None:
    """Tell the pool this task's request has left, where it asked (``REQUEST_LEFT``): what a
    backend's send hook calls, in the request's own task."""
    told = REQUEST_LEFT.get()
    if told is not None:
        told()


class GatewayQuota(msgspec.Struct, frozen=True, kw_only=True):
    """What an AI gateway's headers said of its quota (``None``: not said), read by
    :mod:`judge.gateway_quota`."""

    headers: str  # their family: "x-ai-ratelimit" (APISIX, Kong), "litellm" or "higress"
    tokens_per_minute: float | None = None  # the tightest token limit of a known window up to a minute
    requests_per_minute: float | None = None
    window_s: float | None = None  # the window of that limit: what a client may spend at once
    # the window is fixed: when it ends, the whole limit is there again (APISIX's, LiteLLM's); else
    # it may slide (Kong's default), and what was spent leaves it only as the window slides past
    fixed: bool = False
    spent: bool = False  # a limit with nothing left
    wait_s: float | None = None  # seconds until the window starts over (a Reset, Kong's Retry-After)
    # APISIX's Reset on any answer: seconds left in the window; the longest seen is a lower
    # bound of a window no header states (its counter starts a whole window at its first charge)
    reset_s: float | None = None
    # which of RateLimitInfo's limit_tokens / limit_requests are this gateway's (another's, an
    # upstream's passed through, may be the tighter)
    paces: tuple[str, ...] = ()


class RateLimitInfo(msgspec.Struct, kw_only=True):
    """What a response said about the server's quota (all optional). Delays are finite
    seconds within :data:`HINT_CEILING_S`; a hint that was not (``inf``, ``nan``, 5,000
    digits, negative, a date centuries away, unreadable) is dropped and named in
    ``unusable_hint`` (the pool waits its ``--max-rate-limit-wait`` bound instead)."""

    retry_after_s: float | None = None
    limit_requests: float | None = None  # per minute, as OpenAI-style servers announce it
    limit_tokens: float | None = None
    remaining_requests: float | None = None
    remaining_tokens: float | None = None
    reset_requests_s: float | None = None
    reset_tokens_s: float | None = None
    reset_grain_s: float = 0.0  # the resets were stated to this many seconds (Anthropic's times: 1.0)
    # The resets were clock times (Anthropic's), parsed as seconds from the answer's arrival,
    # where the counts beside them are as of the call's admission, an answer's latency earlier
    resets_are_times: bool = False
    unusable_hint: str | None = None  # e.g. "Retry-After: inf" (shortened)
    # The limits above came from a 429's body, which named them (judge.quota_refusal):
    # "250,000 input tokens per minute"
    named_quota: str | None = None
    # The body named a daily quota, spent until a time its provider documents (Gemini's, at
    # midnight Pacific): ``retry_after_s`` runs to then ("250 requests per day")
    spent_daily: str | None = None
    # The body named which quota refused the call but not its figure (Azure's "exceeded token
    # rate limit"): "requests" or "tokens", the dimension a pace learned from 429s keeps to
    binding_named: str | None = None
    # An AI gateway's quota headers came with it (judge.gateway_quota)
    gateway: GatewayQuota | None = None
    # The token quota above is of input tokens alone, and the server states its output tokens
    # apart (Anthropic's ITPM and OTPM; its tokens-* headers are their sum): the calls are
    # charged their prompts against it, and their output caps against the output quota
    tokens_are_input: bool = False
    limit_output_tokens: float | None = None  # per minute: the cap is reserved from it at admission
    remaining_output_tokens: float | None = None


# What went wrong with a call, as a backend classifies it (``JudgeError.kind``). The
# ENDPOINT_FAULTS mean the endpoint itself is unusable (wrong URL, bad key, unknown model, a
# request shape it refuses): the first call that meets one stops the run at once.
ENDPOINT_FAULTS: dict[str, str] = {
    "connection_refused": "connection refused (is the server running on that port?)",
    "dns": "DNS lookup failed (check the host name)",
    "tls": "TLS/SSL error (check https vs http and the certificate)",
    "connect_timeout": "could not connect within the connect timeout (host unreachable?)",
    "auth": "authentication failed (check the API key and --api-key-env/--api-key-header)",
    # told apart from a wrong key: the variable is named in the message
    "auth_no_key": "authentication failed and no API key was sent: the key variable is not set",
    "model_not_found": "model not found (check --judge-model)",
    "not_found": "URL not found (check --judge-url; most servers want the base URL ending in /v1)",
    "unsupported_parameter": "the endpoint rejects a request parameter this judge call uses",
    # a 429 whose body names a quota of 0 (Gemini's quotaValue "0"): waiting never helps
    "no_quota": "the endpoint's quota for this model is 0 (the key, project or tier has no access to it)",
    # OpenAI's 429 insufficient_quota, any 402: no wait brings the money back
    "no_credit": "the account's credit or spending limit is used up (check the provider's billing page)",
}
OTHER_FAULTS: dict[str, str] = {
    "timeout": "no answer within the call timeout (--timeout)",
    "connection": "connection error",
    "server_error": "server error (HTTP 5xx)",
    "bad_request": "request rejected (HTTP 4xx)",
    "bad_response": "answer was not a chat completion",
    "rate_limit": "rate limited (HTTP 429)",
    "truncated": "answer cut off at the output cap (finish_reason length), also after one retry with a larger cap",
    "context_length": "the prompt does not fit the model's context window",
    "content_filter": "the provider's content filter refused the prompt or the answer",
    "over_quota": "the call alone is larger than the endpoint's whole token quota of a minute or a day (HTTP 429 that no wait "
                  "passes): shorten the prompt, lower max_tokens, or raise the quota",
    "invalid_request": "the endpoint rejected this request's content (HTTP 400, or the same validation error twice)",
}
# Faults of one request, not of the endpoint: the item fails with the reason, the request
# is never retried as transient (it would fail the same way), and the circuit breaker
# (engine.runtime.health) neither counts them nor resets on them. ``truncated`` has its own
# single retry with a larger cap (engine.runtime.pool).
REQUEST_FAULTS = frozenset({"context_length", "content_filter", "invalid_request", "truncated", "over_quota"})
# A server error body that is really a refusal of the request's shape: pydantic's
# "1 validation error for ...", "Input should be ...", "Field required" (llama-cpp-python's
# server answers these with HTTP 500). The pool treats the same body refused the same way
# twice as an ``invalid_request``, not as a server fault to retry.
VALIDATION_ERROR = re.compile(r"validation errors? for|Input should be|Field required|value is not a valid|"
                              r"\[type=[a-z_]+", re.IGNORECASE)


class JudgeError(Exception):
    """Base class for backend failures. ``reason`` is the coarse class (retry or not);
    ``kind`` says what happened (a key of :data:`ENDPOINT_FAULTS` or :data:`OTHER_FAULTS`),
    ``status`` the HTTP status when there was one, ``param`` the offending request
    parameter of a 400 when the server named it."""

    reason = "error"

    def __init__(self, message: str, *, limits: RateLimitInfo | None = None, kind: str | None = None,
                 status: int | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.limits = limits
        self.kind = kind or self.reason
        self.status = status
        self.param = param

    @property
    def endpoint_fault(self) -> bool:
        """True when the endpoint as configured cannot work (see :data:`ENDPOINT_FAULTS`)."""
        return self.kind in ENDPOINT_FAULTS


class RateLimited(JudgeError):
    """HTTP 429: retry after the server's delay; the pool also cuts concurrency."""

    reason = "rate_limit"


class TransientError(JudgeError):
    """5xx, timeout or connection fault: retry with jittered backoff."""

    reason = "transient"


class FatalError(JudgeError):
    """4xx other than 429 (bad request, auth): do not retry."""

    reason = "fatal"


class JudgeFailed(Exception):
    """Raised to methods when a verdict could not be obtained after bounded retries.
    ``reason`` is one word (``budget``, ``rate_limit``, ``auth``, ``timeout``, ...).
    ``paid`` is what the failed call's billed attempts cost (a ``ledger.Usage``, set by the
    pool), so a failed item's tokens and cost count in every total."""

    paid: Any = None

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        # (outcome, seconds at the judge, detail) of each request sent for the call
        self.attempts: list[tuple[str, float, str]] = []


class StopReason(msgspec.Struct, frozen=True, kw_only=True):
    """Why a run stopped scheduling judge calls before its work was done.

    ``reason`` is the word recorded on every item not run (``budget``, ``rate_limit``,
    or an endpoint fault such as ``auth``); ``message`` is the one line shown to the user;
    ``fatal`` is True for endpoint faults (the command exits 1; budget and rate-limit
    stops exit 3 and resume on a re-run); ``resets_at`` is the wall-clock time (epoch
    seconds) a rate-limit quota resets, when known.
    """

    reason: str
    message: str
    fatal: bool = False
    resets_at: float | None = None


class Backend(Protocol):
    """A transport to a judge model."""

    name: str  # "http", "sdk", "offline", ...
    model: str

    def identity(self) -> dict[str, Any]:
        """Everything about the endpoint that changes answers (never the API key)."""

    async def complete(self, request: ChatRequest) -> tuple[ChatResponse, RateLimitInfo | None]:
        """One call. Raises RateLimited, TransientError or FatalError."""

    async def close(self) -> None: ...


@runtime_checkable
class StreamingBackend(Backend, Protocol):
    """A transport that can hand over a call's quota headers when the server admits it,
    before the answer (``judge.http.HttpBackend``: a streamed call). The pool sends its
    preflight this way."""

    async def complete_streamed(self, request: ChatRequest, on_admitted: Callable[[RateLimitInfo | None], None],
                                ) -> tuple[ChatResponse, RateLimitInfo | None]:
        """As :meth:`Backend.complete`; ``on_admitted`` is called with the quota headers once
        the server has accepted the call, if it says so before answering."""
