"""The openai SDK as an alternative transport (``--transport sdk``).

The SDK's own retries are switched off (``max_retries=0``): the pool owns the retry
policy, and stacking both multiplies attempts and hides 429s from our limiter.
"""
from __future__ import annotations

from typing import Any

from drscore.engine.runtime.extras import require

require("sdk", "--transport sdk")

import openai  # noqa: E402  (after the check, so a missing extra is named)

from drscore.engine.runtime.calls.judging import (
    ChatRequest, ChatResponse, RateLimitInfo, TransientError, request_left,
)
from drscore.engine.runtime.calls.redact import redact, redact_url, register_secret, register_url_secrets
from drscore.judge.http import CONNECT_TIMEOUT_S, classify_connection_error, parse_completion, status_error
from drscore.judge.ratelimit_headers import QuotaHeaders
from drscore.judge.wire import WireProfile, family_profile, request_body

# Body fields the SDK's create() takes as keyword arguments; every other field (user
# parameters, Anthropic's ``thinking``, Gemini's ``extra_body``) travels in ``extra_body``.
_SDK_FIELDS = frozenset({"model", "messages", "temperature", "max_tokens", "max_completion_tokens", "seed",
                         "response_format", "reasoning_effort"})


async def _leaving(_request: Any) -> None:
    """httpx's hook as a request is about to be sent (before its connection is taken: the
    nearest to its departure the SDK tells), in the request's task: the pool's ``REQUEST_LEFT``."""
    request_left()


class SdkBackend:
    name = "sdk"
    cacheable = True

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 120.0,
                 params: dict[str, Any] | None = None, profile: WireProfile | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        register_url_secrets(base_url)
        self.model = model
        self.timeout_s = timeout_s
        register_secret(api_key)
        self.wire = profile if profile is not None else family_profile(model, params)
        self.quota_headers = QuotaHeaders()  # each answer's quota headers, read against the ones before
        # Local servers need no key, but the SDK insists on one.
        self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=api_key or "not-needed",
                                          max_retries=0,
                                          timeout=openai.Timeout(timeout_s, connect=min(timeout_s, CONNECT_TIMEOUT_S)),
                                          http_client=openai.DefaultAsyncHttpxClient(
                                              event_hooks={"request": [_leaving]}))

    def identity(self) -> dict[str, Any]:
        # Same answers as the HTTP transport: share its cache entries.
        return {"base_url": redact_url(self.base_url), "model": self.model, **self.wire.identity()}

    async def complete(self, request: ChatRequest) -> tuple[ChatResponse, RateLimitInfo | None]:
        sent = self.wire.spelling()
        body = request_body(request, self.model, self.wire)
        try:
            # --judge-param fields travel as extra_body: the SDK rejects keyword arguments it does not know.
            extra = {k: body.pop(k) for k in [*self.wire.params, *body] if k in body
                     and (k in self.wire.params or k not in _SDK_FIELDS)}
            raw = await self._client.chat.completions.with_raw_response.create(**body, extra_body=extra or None)
        except openai.APITimeoutError as e:
            if classify_connection_error(e) == "connect_timeout":
                raise TransientError(f"could not connect to {self.base_url} in time", kind="connect_timeout") from None
            raise TransientError(f"no answer from {self.base_url} within {self.timeout_s:g} s (--timeout)",
                                 kind="timeout") from None
        except openai.APIConnectionError as e:
            raise TransientError(redact(f"cannot reach {self.base_url}: {type(e).__name__}"),
                                 kind=classify_connection_error(e)) from None
        except openai.APIStatusError as e:
            # The same classification as the aiohttp transport, from the raw status and body.
            info = self.quota_headers.read(e.response.headers)
            content = e.response.content or b""
            if e.status_code == 400 and self.wire.learn(e.status_code, content, sent):
                return await self.complete(request)
            raise status_error(e.status_code, content, self.base_url, info) from None
        return parse_completion(raw.content, request), self.quota_headers.read(raw.headers)

    async def close(self) -> None:
        await self._client.close()
