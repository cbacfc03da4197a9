"""The server's own prompt count (HttpBackend.count_prompt): vLLM's POST /tokenize in its chat
form, as the mock's vllm profile serves it, gives the count the completion's usage then
reports; a server without the route is recorded as such and not asked again."""
from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import msgspec
from aiohttp import web

from drscore.engine.runtime.calls.judging import ChatRequest, Message
from drscore.engine.runtime.calls.verdicts import schema_of
from drscore.judge.http import COUNT_TRIES, HttpBackend
from drscore.judge.mock.server import MockConfig, start
from support.serve import serve as serve_app


class Verdict(msgspec.Struct):
    score: int


def _request(text: str) -> ChatRequest:
    return ChatRequest(messages=(Message("system", "Judge the report."), Message("user", text)), template="t",
                       template_hash="h", schema_name="Verdict", schema=schema_of(Verdict), max_tokens=50)


@contextlib.asynccontextmanager
async def _backend(runner: web.AppRunner, url: str) -> AsyncIterator[HttpBackend]:
    """A backend of the server ``runner`` runs at ``url``; both stopped after."""
    backend = HttpBackend(url, "m")
    try:
        yield backend
    finally:
        await backend.close()
        await runner.cleanup()


@contextlib.asynccontextmanager
async def _mock(profile: str) -> AsyncIterator[HttpBackend]:
    runner, port = await start(MockConfig(profile=profile, seed=1))
    async with _backend(runner, f"http://127.0.0.1:{port}/v1") as backend:
        yield backend


@contextlib.asynccontextmanager
async def _tokenize_answered_by(handler: Callable[[web.Request], Awaitable[web.Response]]
                                ) -> AsyncIterator[HttpBackend]:
    """A backend of a server whose only route is ``POST /tokenize``, answered by ``handler``."""
    app = web.Application()
    app.router.add_post("/tokenize", handler)
    runner, base = await serve_app(app)
    async with _backend(runner, f"{base}/v1") as backend:
        yield backend


async def test_the_vllm_count_is_the_usage_the_completion_then_reports():
    counts = []
    async with _mock("vllm") as backend:
        for text in ("短的报告。", "A longer report, in English, with several words and a second clause. " * 20):
            count = await backend.count_prompt(_request(text))
            answer, _ = await backend.complete(_request(text))
            counts.append((count, answer.input_tokens))
    assert backend.counts_prompts is True
    assert all(count == used for count, used in counts)
    assert counts[1][0] > 10 * counts[0][0]  # the counts are the prompts' own, not one figure


async def test_only_the_vllm_profile_of_the_mock_has_the_route():
    async with _mock("openai") as backend:
        assert await backend.count_prompt(_request("a report")) is None
    assert backend.counts_prompts is False


async def test_a_server_without_the_route_is_asked_once():
    seen: list[str] = []

    async def tokenize(request: web.Request) -> web.Response:
        seen.append(request.path)
        raise web.HTTPNotFound()

    async with _tokenize_answered_by(tokenize) as backend:
        first = await backend.count_prompt(_request("a report"))
        second = await backend.count_prompt(_request("another report"))
    assert (first, second, backend.counts_prompts) == (None, None, False)
    assert seen == ["/tokenize"]  # beside /v1, as vLLM serves it; and only once


async def test_a_route_of_another_shape_is_not_read_as_a_count():
    # llama.cpp's /tokenize takes {"content": ...} and answers {"tokens": [...]}: no count of a
    # chat prompt, so the server is taken as not counting them
    async def tokenize(request: web.Request) -> web.Response:
        return web.json_response({"tokens": []})

    async with _tokenize_answered_by(tokenize) as backend:
        assert await backend.count_prompt(_request("a report")) is None
    assert backend.counts_prompts is False


async def test_a_busy_answer_leaves_the_route_to_be_asked_again():
    statuses = [503, 200]

    async def tokenize(request: web.Request) -> web.Response:
        status = statuses.pop(0)
        return web.json_response({"count": 7, "max_model_len": 4096, "tokens": list(range(7))}
                                 if status == 200 else {"error": "busy"}, status=status)

    async with _tokenize_answered_by(tokenize) as backend:
        busy = await backend.count_prompt(_request("a report"))
        assert backend.counts_prompts is None
        counted = await backend.count_prompt(_request("a report"))
    assert (busy, counted, backend.counts_prompts) == (None, 7, True)


async def test_a_route_that_never_counts_is_given_up():
    seen: list[int] = []

    async def tokenize(request: web.Request) -> web.Response:
        seen.append(1)
        return web.json_response({"error": "internal"}, status=500)

    async with _tokenize_answered_by(tokenize) as backend:
        got = [await backend.count_prompt(_request("a report")) for _ in range(COUNT_TRIES + 2)]
    assert got == [None] * (COUNT_TRIES + 2) and backend.counts_prompts is False
    assert len(seen) == COUNT_TRIES  # asked no more once given up


async def test_gemini_counts_at_its_native_count_tokens_with_the_key_in_googles_header():
    # The mock's gemini profile answers 401 to a bearer token there, as Google's native API
    # does; its count leaves out the few tokens each message adds to the usage.
    runner, port = await start(MockConfig(profile="gemini", seed=1))
    backend = HttpBackend(f"http://127.0.0.1:{port}/v1beta/openai/", "gemini-2.0-flash", api_key="sk-test-key")
    async with _backend(runner, f"http://127.0.0.1:{port}") as unused:
        del unused
        try:
            text = "A report on trade, with figures. " * 30
            count = await backend.count_prompt(_request(text))
            answer, _ = await backend.complete(_request(text))
        finally:
            await backend.close()
    assert backend.counts_prompts is True and count is not None
    assert answer.input_tokens - count == 2 * 3  # two messages' overhead in the mock's usage
    assert count > 100  # the prompt's own count


async def test_the_count_tokens_request_is_googles_shape():
    seen: list[tuple[str, dict, dict]] = []

    async def count_tokens(request: web.Request) -> web.Response:
        seen.append((request.path, dict(request.headers), await request.json()))
        return web.json_response({"totalTokens": 42})

    app = web.Application()
    app.router.add_post("/v1beta/models/{model}:countTokens", count_tokens)
    runner, base = await serve_app(app)
    backend = HttpBackend(f"{base}/v1beta/openai", "gemini-2.0-flash", api_key="sk-test-key")
    async with _backend(runner, base) as unused:
        del unused
        try:
            assert await backend.count_prompt(_request("a report")) == 42
        finally:
            await backend.close()
    path, headers, body = seen[0]
    assert path == "/v1beta/models/gemini-2.0-flash:countTokens"
    assert headers.get("x-goog-api-key") == "sk-test-key" and "Authorization" not in headers
    assert body == {"generateContentRequest": {
        "model": "models/gemini-2.0-flash", "systemInstruction": {"parts": [{"text": "Judge the report."}]},
        "contents": [{"role": "user", "parts": [{"text": "a report"}]}]}}
