"""OpenAI-compatible chat completions over aiohttp (OpenAI, Azure, Gemini's compatible
endpoint, vLLM, Ollama, llama.cpp server, OpenRouter, the mock)."""
from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson

from drscore.engine.runtime.judging import (
    ChatRequest, ChatResponse, FatalError, RateLimited, RateLimitInfo, TransientError,
)
from drscore.engine.runtime.tokens import estimate_messages, estimate_tokens
from drscore.judge.ratelimit_headers import parse_rate_limit_headers
from drscore.judge.wire import family_profile, request_body

_RETRYABLE = {408, 409, 425, 500, 502, 503, 504, 520, 522, 524, 529}


class HttpBackend:
    name = "http"
    cacheable = True

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 120.0,
                 connections: int = 256, extra_headers: dict[str, str] | None = None,
                 api_key_header: str = "Authorization", params: dict[str, Any] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.wire = family_profile(model, params)  # body spelling per model family (judge/wire.py)
        self._url = self.base_url + "/chat/completions"
        self._headers = {"Content-Type": "application/json", **(extra_headers or {})}
        if api_key:
            # Most endpoints take "Authorization: Bearer KEY"; Azure OpenAI keys go in "api-key".
            self._headers[api_key_header] = f"Bearer {api_key}" if api_key_header.lower() == "authorization" \
                else api_key
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None

    def identity(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "model": self.model, **self.wire.identity()}

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._connections, ttl_dns_cache=300),
                timeout=self._timeout, json_serialize=lambda o: orjson.dumps(o).decode())
        return self._session

    async def complete(self, request: ChatRequest) -> tuple[ChatResponse, RateLimitInfo | None]:
        sent = self.wire.spelling()
        body = orjson.dumps(request_body(request, self.model, self.wire))
        try:
            async with self._get_session().post(self._url, data=body, headers=self._headers) as resp:
                raw = await resp.read()
                status = resp.status
                headers = resp.headers
        except asyncio.TimeoutError:
            raise TransientError("judge call timed out") from None
        except aiohttp.ClientError as e:
            raise TransientError(f"connection error: {type(e).__name__}: {e}") from None
        info = parse_rate_limit_headers(headers)
        if status == 429:
            raise RateLimited(f"429 from {self.base_url}", limits=info)
        if status in _RETRYABLE or status >= 500:
            raise TransientError(f"HTTP {status} from {self.base_url}: {_excerpt(raw)}", limits=info)
        if status == 400 and self.wire.learn(status, raw, sent):
            return await self.complete(request)  # adapted once (e.g. max_completion_tokens); remembered
        if status >= 400:
            raise FatalError(f"HTTP {status} from {self.base_url}: {_excerpt(raw)}", limits=info)
        return parse_completion(raw, request), info

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def parse_completion(raw: bytes, request: ChatRequest) -> ChatResponse:
    """Content and usage of a chat-completion body; missing usage is estimated (and flagged)."""
    try:
        obj = orjson.loads(raw)
        choice = obj["choices"][0]
        text = choice["message"].get("content") or ""
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
        raise TransientError(f"unexpected response body: {_excerpt(raw)}") from None
    usage = obj.get("usage") or {}
    pin, pout = usage.get("prompt_tokens"), usage.get("completion_tokens")
    estimated = not (isinstance(pin, int) and isinstance(pout, int))
    if estimated:
        pin, pout = estimate_messages(list(request.messages)), estimate_tokens(text)
    return ChatResponse(text=text, input_tokens=pin, output_tokens=pout, usage_estimated=estimated,
                        finish_reason=choice.get("finish_reason"), model=obj.get("model"))


def _excerpt(raw: bytes, n: int = 300) -> str:
    return raw[:n].decode("utf-8", "replace").replace("\n", " ")
