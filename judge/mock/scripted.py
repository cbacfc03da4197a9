"""Misbehaving judge endpoints on 127.0.0.1 for tests and benches: a server that answers
every chat completion the way ``mode`` says, in a thread of its own (a CLI under test
runs its own event loop), counting what it received.

Modes: ``ok`` (schema-valid answers, like the mock judge), ``echo`` (schema-valid answers
whose free-text fields repeat the request's Authorization header), ``401``, ``400``,
``500`` and ``404model`` (OpenAI-style error bodies that echo the header), ``html200``
(a non-JSON 200 that echoes it), ``unsupported`` (400 naming an unsupported parameter),
``429`` (``Retry-After`` seconds after ``ok_before_429`` good answers), ``daily429`` (the
same, but the delay only in OpenAI's "try again in 23h59m" prose), ``gemini_daily429`` (the
same, as Gemini's free tier spent for the day: a per-day QuotaFailure and a ``retryDelay`` of
20 s), ``no_credit`` (OpenAI's 429 ``insufficient_quota``), ``zero_quota`` (Gemini's 429 naming a
quota of 0), ``openrouter_daily429`` (OpenRouter's free models spent for the day: "Rate limit exceeded:
free-models-per-day", its quota in ``metadata.headers``, reset at the next midnight UTC), ``apim403`` (after ``ok_before_429`` good answers, Azure API Management's 403 of a
spent quota: "Out of call volume quota. Quota will be replenished in 5.03:23:11."), ``hang`` (never
answers). ``mode`` may be changed while the server runs.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from typing import Any

import orjson
from aiohttp import web

from drscore.judge.mock.schema_fill import compile_schema


def _fill_text(value: Any, schema: dict[str, Any], text: str) -> Any:
    """Replace every free-text string (no enum, no const) in ``value`` by ``text``."""
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: _fill_text(v, props.get(k, {}), text) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_text(v, schema.get("items", {}), text) for v in value]
    if isinstance(value, str) and "enum" not in schema and "const" not in schema:
        return text
    return value


def _gemini_quota_429(quota_id: str, value: str, retry_delay: str | None = None) -> web.Response:
    """Gemini's 429 naming the request quota ``quota_id`` of ``value`` (a QuotaFailure), with a
    RetryInfo where ``retry_delay`` is given."""
    details: list[dict[str, Any]] = [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests", "quotaId": quota_id,
        "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"}, "quotaValue": value}]}]
    if retry_delay is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay})
    return web.json_response([{"error": {
        "code": 429, "message": "You exceeded your current quota, please check your plan and billing details.",
        "status": "RESOURCE_EXHAUSTED", "details": details}}], status=429)


class ScriptedJudge:
    """``with ScriptedJudge("401") as judge: ... judge.url ... judge.requests``."""

    def __init__(self, mode: str, *, retry_after: int | str = 3600, ok_before_429: int = 0) -> None:
        self.mode, self.retry_after, self.ok_before_429 = mode, retry_after, ok_before_429
        self.requests = 0
        self.in_flight = self.max_in_flight = 0
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _answer(self, payload: dict[str, Any], text: str | None) -> web.Response:
        schema = payload["response_format"]["json_schema"]["schema"]
        digest = hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).digest()
        value = compile_schema(schema)(digest)
        if text is not None:
            value = _fill_text(value, schema, text)
        content = json.dumps(value)
        words = sum(len(m["content"].split()) for m in payload["messages"])
        body = {"id": "x", "object": "chat.completion", "model": payload.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": words, "completion_tokens": len(content.split()),
                          "total_tokens": words + len(content.split())}}
        return web.json_response(body)

    async def _chat(self, request: web.Request) -> web.Response:
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._reply(request)
        finally:
            self.in_flight -= 1

    async def _reply(self, request: web.Request) -> web.Response:
        payload = await request.json()
        auth = request.headers.get("Authorization", "")
        mode = self.mode

        def error(status: int, message: str, code: str | None = None, param: str | None = None,
                  headers: dict[str, str] | None = None) -> web.Response:
            return web.json_response({"error": {"message": message, "type": "invalid_request_error",
                                                "param": param, "code": code}}, status=status, headers=headers)

        if mode == "ok":
            return self._answer(payload, None)
        if mode == "hang":  # until the server stops (a sleep would be cut off mid-task at exit)
            assert self._stop is not None
            await self._stop.wait()
            return error(503, "shutting down")
        if mode == "echo":
            return self._answer(payload, f"you sent {auth}")
        if mode == "401":
            return error(401, f"Incorrect API key provided: {auth}.", "invalid_api_key")
        if mode == "400":
            return error(400, f"Bad request with header {auth}")
        if mode == "500":
            return error(500, f"internal error while handling {auth}")
        if mode == "404model":
            return error(404, f"The model `{payload.get('model')}` does not exist (key {auth}).", "model_not_found")
        if mode == "html200":
            return web.Response(text=f"<html><body>Welcome! Your token: {auth}</body></html>",
                                content_type="text/html")
        if mode == "unsupported":
            return error(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                              "Use 'max_completion_tokens' instead.", "unsupported_parameter", "max_tokens")
        if mode == "no_credit":  # OpenAI's answer to an account out of credit
            return error(429, "You exceeded your current quota, please check your plan and billing details.",
                         "insufficient_quota")
        if mode == "zero_quota":  # Gemini's to a key with no quota for the model
            return _gemini_quota_429("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "0")
        if mode == "apim403" and self.requests > self.ok_before_429:
            return web.json_response({"statusCode": 403, "message": "Out of call volume quota. Quota will be "
                                                                   "replenished in 5.03:23:11."}, status=403)
        if mode == "apim403":
            return self._answer(payload, None)
        if mode in ("429", "daily429", "gemini_daily429", "openrouter_daily429"):
            if self.requests <= self.ok_before_429:
                return self._answer(payload, None)
            if mode == "openrouter_daily429":
                midnight = (int(time.time()) // 86_400 + 1) * 86_400_000
                return web.json_response({"error": {
                    "message": "Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free model "
                               "requests per day", "code": 429,
                    "metadata": {"headers": {"X-RateLimit-Limit": "50", "X-RateLimit-Remaining": "0",
                                             "X-RateLimit-Reset": str(midnight)}, "provider_name": None}}},
                    status=429, headers={"X-RateLimit-Limit": "50", "X-RateLimit-Remaining": "0",
                                         "X-RateLimit-Reset": str(midnight)})
            if mode == "gemini_daily429":
                # Gemini's free tier spent for the day: a short retryDelay beside a per-day violation
                return _gemini_quota_429("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "250", retry_delay="20s")
            if mode == "429":
                return error(429, "Rate limit reached.", "rate_limit_exceeded",
                             headers={"Retry-After": str(self.retry_after)})
            return error(429, "Rate limit reached for gpt-4.1 on requests per day (RPD): Limit 10000, "
                              "Used 10000. Please try again in 23h59m12.5s.", "rate_limit_exceeded")
        raise AssertionError(f"unknown mode {mode}")

    def __enter__(self) -> ScriptedJudge:
        ready = threading.Event()

        async def main() -> None:
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self._chat)
            runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = runner.addresses[0][1]
            self._stop = asyncio.Event()
            ready.set()
            try:
                await self._stop.wait()
            finally:
                await runner.cleanup()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(main())
            self._loop.close()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("scripted judge did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)
