"""The HTTP backend against the answers of real local servers (issue 26), replayed by a
small endpoint: llama-cpp-python refusing ``json_schema`` with a pydantic 500, ignoring
``max_completion_tokens``; what llama-server and llama-cpp-python say about themselves.
The real servers themselves are met in tests/cli/test_local_llama_servers.py."""
from __future__ import annotations

import msgspec
import orjson
import pytest
from aiohttp import web

from drscore.engine.runtime.calls.judging import ChatRequest, Message, TransientError
from drscore.engine.runtime.calls.slots import ServerFacts
from drscore.judge.http import HttpBackend
from drscore.judge.mock.llamacpp import recording
from drscore.judge.wire import WireProfile
from support.serve import serve

# llama-cpp-python 0.3.36's answer to response_format {type: json_schema} (HTTP 500), as
# recorded from the real server (judge/mock/recordings/llamacpp-python.json)
REFUSED_JSON_SCHEMA = orjson.loads(recording("llamacpp-python")["kinds"]["json_schema"]["body"])


def _request(cap: int = 50) -> ChatRequest:
    return ChatRequest(messages=(Message("user", "Rate."),), template="t", template_hash="h", schema_name="V",
                       schema={"type": "object", "properties": {"score": {"type": "integer"}}}, max_tokens=cap)


def _answer(tokens: int = 5) -> dict:
    return {"choices": [{"message": {"content": '{"score": 2}'}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": tokens, "total_tokens": 9 + tokens}}


class LlamaCppPythonLike:
    """Refuses json_schema with its 500, takes json_object + schema; ignores
    max_completion_tokens (answers 300 tokens then)."""

    def __init__(self, refuse_json_object: bool = False) -> None:
        self.bodies: list[dict] = []
        self.refuse_json_object = refuse_json_object

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        kind = (body.get("response_format") or {}).get("type")
        if kind == "json_schema":
            return web.json_response(REFUSED_JSON_SCHEMA, status=500)
        if kind == "json_object" and self.refuse_json_object:
            return web.json_response({"error": {"message": "response_format json_object is not supported"}},
                                     status=400)
        return web.json_response(_answer(300 if "max_tokens" not in body else 5),
                                 headers={"openai-processing-ms": "3"})

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "tiny", "object": "model", "owned_by": "me",
                                                              "permissions": []}]},
                                 headers={"openai-processing-ms": "0", "server": "uvicorn"})


@pytest.fixture
async def endpoint():
    runners = []

    async def start(server):
        app = web.Application()
        app.router.add_post("/v1/chat/completions", server.chat)
        app.router.add_get("/v1/models", server.models)
        if hasattr(server, "props"):
            app.router.add_get("/props", server.props)
        runner, url = await serve(app)
        runners.append(runner)
        return url + "/v1"
    yield start
    for r in runners:
        await r.cleanup()


async def test_a_refused_json_schema_costs_one_call_and_the_servers_json_mode_is_remembered(endpoint):
    server = LlamaCppPythonLike()
    backend = HttpBackend(await endpoint(server), "tiny")
    try:
        first, _ = await backend.complete(_request())
        second, _ = await backend.complete(_request())
    finally:
        await backend.close()
    assert first.text == second.text == '{"score": 2}'
    kinds = [b.get("response_format", {}).get("type") for b in server.bodies]
    assert kinds == ["json_schema", "json_object", "json_object"]  # 2 calls to adapt, then straight
    assert server.bodies[1]["response_format"]["schema"] == _request().schema
    assert backend.wire.learned == ["response_format json_object"]


async def test_a_server_refusing_both_spellings_gets_the_schema_in_the_prompt(endpoint):
    server = LlamaCppPythonLike(refuse_json_object=True)
    backend = HttpBackend(await endpoint(server), "tiny")
    try:
        await backend.complete(_request())
    finally:
        await backend.close()
    assert [("response_format" in b) for b in server.bodies] == [True, True, False]
    assert "<json-schema>" in server.bodies[-1]["messages"][0]["content"]


async def test_an_error_that_does_not_name_response_format_is_not_taken_for_a_refusal(endpoint):
    class Down(LlamaCppPythonLike):
        async def chat(self, request):
            self.bodies.append(await request.json())
            return web.json_response({"error": {"message": "Internal Server Error"}}, status=500)
    server = Down()
    backend = HttpBackend(await endpoint(server), "tiny")
    try:
        with pytest.raises(TransientError):
            await backend.complete(_request())
    finally:
        await backend.close()
    assert len(server.bodies) == 1 and backend.wire.structured == "json_schema"


async def test_an_ignored_max_completion_tokens_is_replaced_by_max_tokens(endpoint):
    server = LlamaCppPythonLike()
    wire = WireProfile(completion_tokens=True, structured="json_object")
    backend = HttpBackend(await endpoint(server), "tiny", profile=wire)
    try:
        over, _ = await backend.complete(_request(cap=50))  # 300 tokens for a cap of 50: ignored
        within, _ = await backend.complete(_request(cap=50))
    finally:
        await backend.close()
    assert over.output_tokens == 300 and within.output_tokens == 5
    assert "max_completion_tokens" in server.bodies[0] and server.bodies[1]["max_tokens"] == 50
    assert "max_completion_tokens" not in server.bodies[1]


async def test_llama_cpp_python_is_known_as_one_request_at_a_time(endpoint):
    backend = HttpBackend(await endpoint(LlamaCppPythonLike()), "tiny")
    try:
        facts = await backend.server_facts()
    finally:
        await backend.close()
    assert facts == ServerFacts(server="llama-cpp-python", slots=1, cancels=False)


async def test_llama_servers_window_and_slots_come_from_its_model_list_and_props(endpoint):
    class LlamaServerLike:
        async def chat(self, request):
            return web.json_response(_answer())

        async def models(self, request):
            return web.json_response({"object": "list", "data": [
                {"id": "tiny", "object": "model", "owned_by": "llamacpp",
                 "meta": {"n_ctx": 8192, "n_ctx_train": 32768, "n_vocab": 9000}}]})

        async def props(self, request):
            return web.json_response({"total_slots": 4, "default_generation_settings": {"n_ctx": 8192}})
    backend = HttpBackend(await endpoint(LlamaServerLike()), "tiny")
    try:
        facts = await backend.server_facts()
    finally:
        await backend.close()
    assert facts == ServerFacts(server="llama.cpp", window=8192, slots=4, cancels=True)


async def test_an_endpoint_without_a_model_list_says_nothing(endpoint):
    class Bare:
        async def chat(self, request):
            return web.json_response(_answer())

        async def models(self, request):
            return web.Response(status=404)
    backend = HttpBackend(await endpoint(Bare()), "tiny")
    try:
        assert await backend.server_facts() == ServerFacts()
    finally:
        await backend.close()


def test_the_json_object_body_carries_the_schema_where_llama_cpp_reads_it():
    from drscore.judge.wire import request_body
    body = request_body(_request(), "tiny", WireProfile(structured="json_object"))
    assert body["response_format"] == {"type": "json_object", "schema": _request().schema}
    assert orjson.dumps(msgspec.to_builtins(body))  # plain JSON
