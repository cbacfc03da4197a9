"""The openai SDK as an alternative transport (``--transport sdk``).

The SDK's own retries are switched off (``max_retries=0``): the pool owns the retry
policy, and stacking both multiplies attempts and hides 429s from our limiter.
"""
from __future__ import annotations

from typing import Any

from drscore.engine.runtime.extras import require

require("sdk", "--transport sdk")

import openai  # noqa: E402  (after the check, so a missing extra is named)

from drscore.engine.runtime.judging import (
    ChatRequest, ChatResponse, FatalError, RateLimited, RateLimitInfo, TransientError,
)
from drscore.judge.http import parse_completion
from drscore.judge.ratelimit_headers import parse_rate_limit_headers
from drscore.judge.wire import request_body


class SdkBackend:
    name = "sdk"
    cacheable = True

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 120.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        # Local servers need no key, but the SDK insists on one.
        self._client = openai.AsyncOpenAI(base_url=self.base_url, api_key=api_key or "not-needed",
                                          max_retries=0, timeout=timeout_s)

    def identity(self) -> dict[str, Any]:
        # Same answers as the HTTP transport: share its cache entries.
        return {"base_url": self.base_url, "model": self.model}

    async def complete(self, request: ChatRequest) -> tuple[ChatResponse, RateLimitInfo | None]:
        body = request_body(request, self.model)
        try:
            raw = await self._client.chat.completions.with_raw_response.create(**body)
        except openai.RateLimitError as e:
            raise RateLimited("429 from judge", limits=parse_rate_limit_headers(e.response.headers)) from None
        except openai.APITimeoutError:
            raise TransientError("judge call timed out") from None
        except openai.APIConnectionError as e:
            raise TransientError(f"connection error: {type(e).__name__}") from None
        except openai.APIStatusError as e:
            info = parse_rate_limit_headers(e.response.headers)
            if e.status_code >= 500 or e.status_code in (408, 409):
                raise TransientError(f"HTTP {e.status_code} from judge", limits=info) from None
            raise FatalError(f"HTTP {e.status_code} from judge: {e.message[:300]}", limits=info) from None
        return parse_completion(raw.content, request), parse_rate_limit_headers(raw.headers)

    async def close(self) -> None:
        await self._client.close()
