"""The streamed call (HttpBackend.complete_streamed): the quota headers are handed over when
the server admits the call, before its answer; the answer is the same as unstreamed; an
endpoint that refuses streaming is asked again plainly and not streamed to again."""
from __future__ import annotations

import asyncio
from typing import NamedTuple

import msgspec
import orjson
import pytest
from aiohttp import web

from drscore.engine.runtime.calls.judging import ChatRequest, ChatResponse, JudgeError, Message, RateLimitInfo
from drscore.engine.runtime.calls.verdicts import schema_of
from drscore.judge.http import HttpBackend
from drscore.judge.mock.server import MockConfig, start
from support.llama import ALIAS
from support.serve import serve as serve_app

QUOTA = {"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "499",
         "x-ratelimit-reset-requests": "120ms"}


class Verdict(msgspec.Struct):
    score: int
    reason: str


def _request() -> ChatRequest:
    return ChatRequest(messages=(Message("system", "Judge."), Message("user", "Rate this.")), template="t",
                       template_hash="h", schema_name="Verdict", schema=schema_of(Verdict), max_tokens=50)


@pytest.fixture
async def serve():
    """``await serve(app)``: ``app`` on a free loopback port, its ``/v1`` base URL."""
    runners = []

    async def make(app: web.Application) -> str:
        runner, base = await serve_app(app)
        runners.append(runner)
        return f"{base}/v1"

    yield make
    for r in runners:
        await r.cleanup()


class Both(NamedTuple):
    """One request asked plainly and streamed, each by a backend of its own."""

    plain: ChatResponse
    streamed: ChatResponse
    info: RateLimitInfo | None  # the streamed answer's quota headers
    admitted: list[RateLimitInfo | None]  # what on_admitted was given
    streams: bool  # the streaming backend still streams (it was not refused)


async def _plain_and_streamed(url: str, model: str) -> Both:
    plain, streamed = HttpBackend(url, model), HttpBackend(url, model)
    seen: list[RateLimitInfo | None] = []
    try:
        a, _ = await plain.complete(_request())
        b, info = await streamed.complete_streamed(_request(), seen.append)
    finally:
        await plain.close()
        await streamed.close()
    return Both(a, b, info, seen, streamed.streams)


async def test_the_quota_headers_arrive_before_the_answer_is_written(serve):
    # The server writes the answer only once the client has the headers: without them
    # handed over on arrival, the call could never finish.
    headers_read = asyncio.Event()
    bodies: list[dict] = []

    async def chat(request: web.Request) -> web.StreamResponse:
        bodies.append(await request.json())
        resp = web.StreamResponse(headers={**QUOTA, "Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await asyncio.wait_for(headers_read.wait(), 10)
        for chunk in ({"model": "m", "choices": [{"index": 0, "delta": {"content": "fine"}, "finish_reason": None}]},
                      {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                      {"model": "m", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 1}}):
            await resp.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    backend = HttpBackend(await serve(app), "m")
    seen: list[RateLimitInfo | None] = []

    def admitted(info: RateLimitInfo | None) -> None:
        seen.append(info)
        headers_read.set()

    try:
        resp, info = await backend.complete_streamed(_request(), admitted)
    finally:
        await backend.close()
    assert bodies[0]["stream"] is True and bodies[0]["stream_options"] == {"include_usage": True}
    assert len(seen) == 1 and seen[0] is not None and seen[0].limit_requests == 500
    assert seen[0].remaining_requests == 499
    assert (resp.text, resp.input_tokens, resp.output_tokens, resp.finish_reason) == ("fine", 9, 1, "stop")
    assert not resp.usage_estimated and info is not None and info.limit_requests == 500


async def test_streamed_and_plain_answers_of_the_mock_are_the_same():
    runner, port = await start(MockConfig(profile="openai", rpm=600, tpm=100_000, seed=3))
    try:
        a, b, info, seen, _ = await _plain_and_streamed(f"http://127.0.0.1:{port}/v1", "gpt-4.1")
    finally:
        await runner.cleanup()
    assert (b.text, b.input_tokens, b.output_tokens, b.finish_reason) == \
           (a.text, a.input_tokens, a.output_tokens, a.finish_reason)
    assert a.text and not b.usage_estimated
    assert seen[0] is not None and (seen[0].limit_requests, seen[0].limit_tokens) == (600, 100_000)
    assert info is not None and info.limit_tokens == 100_000


@pytest.mark.parametrize("status, said", [
    (400, {"error": {"message": "Unknown parameter: 'stream_options'.", "type": "invalid_request_error",
                     "param": "stream_options", "code": "unknown_parameter"}}),  # Azure before its 2024 versions
    (403, {"message": "Streaming requests are not yet allowed."}),  # a deployment without streaming
])
async def test_an_endpoint_refusing_streams_is_asked_plainly_and_not_streamed_to_again(serve, status, said):
    bodies: list[dict] = []

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        bodies.append(body)
        if body.get("stream"):
            return web.json_response(said, status=status)
        return web.json_response({"model": "m", "choices": [{"index": 0, "finish_reason": "stop",
                                                              "message": {"role": "assistant", "content": "ok"}}],
                                  "usage": {"prompt_tokens": 9, "completion_tokens": 1}}, headers=QUOTA)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    backend = HttpBackend(await serve(app), "m")
    seen: list[RateLimitInfo | None] = []
    try:
        first, _ = await backend.complete_streamed(_request(), seen.append)
        second, _ = await backend.complete_streamed(_request(), seen.append)
    finally:
        await backend.close()
    assert first.text == second.text == "ok" and not backend.streams
    assert [bool(b.get("stream")) for b in bodies] == [True, False, False]  # one refusal, then plain
    assert seen == []  # nothing was admitted streamed: the headers come with the plain answers


async def test_the_mock_can_refuse_streams_as_old_azure_did():
    runner, port = await start(MockConfig(streams=False))
    backend = HttpBackend(f"http://127.0.0.1:{port}/v1", "m")
    try:
        resp, _ = await backend.complete_streamed(_request(), lambda info: None)
    finally:
        await backend.close()
        await runner.cleanup()
    assert resp.text and not backend.streams


async def test_a_refusal_that_is_not_about_streaming_is_the_calls_own_and_costs_one_request(serve):
    # A content filter's 400 (Azure's shape) is not a refusal of the stream: it is named as
    # usual, and nothing is sent again plainly.
    bodies: list[dict] = []

    async def chat(request: web.Request) -> web.Response:
        bodies.append(await request.json())
        return web.json_response({"error": {"code": "content_filter", "message": "The response was filtered "
                                            "due to the prompt triggering Azure OpenAI's content management policy."}},
                                 status=400)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    backend = HttpBackend(await serve(app), "m")
    try:
        with pytest.raises(JudgeError) as e:
            await backend.complete_streamed(_request(), lambda info: None)
    finally:
        await backend.close()
    assert e.value.kind == "content_filter" and len(bodies) == 1 and backend.streams


@pytest.mark.timeout(600)
@pytest.mark.parametrize("server, usage", [("llama_server", True), ("llama_cpp_python", False)])
async def test_a_real_servers_stream_folds_into_the_answer_it_gives_plainly(request, server, usage):
    # Real server-sent events from servers nobody here wrote (built by scripts/install-llama-servers):
    # the folded stream reads as the plain answer does. llama-cpp-python's stream carries no
    # usage (it ignores stream_options): the tokens are then estimated, and said to be, one more
    # reason the pool never streams to these servers (they announce no quota anyway).
    a, b, _, seen, streams = await _plain_and_streamed(request.getfixturevalue(server).url, ALIAS)
    assert len(seen) == 1 and streams  # admitted streamed, not refused
    assert (b.text, b.finish_reason) == (a.text, a.finish_reason) and not a.usage_estimated
    if usage:
        assert (b.input_tokens, b.output_tokens, b.usage_estimated) == (a.input_tokens, a.output_tokens, False)
    else:
        assert b.usage_estimated and b.input_tokens != a.input_tokens
