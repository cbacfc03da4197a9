"""The ``llamacpp`` and ``llamacpp-python`` mock profiles are recordings of the real
servers (judge/mock/llamacpp.py), held here to a fresh recording of those servers, built
by scripts/install-llama-servers (the fixtures fail, never skip, where they are missing);
and the mock answering from them meets drscore the way the real servers do."""
from __future__ import annotations

import asyncio

import orjson
import pytest

from drscore.engine.runtime.calls.judging import ChatRequest, Message, TransientError
from drscore.engine.runtime.calls.slots import ServerFacts
from drscore.judge.http import HttpBackend
from drscore.judge.mock import llamacpp
from drscore.judge.mock.server import MockConfig, start

pytestmark = pytest.mark.timeout(600)


def test_the_committed_recordings_match_a_fresh_recording_of_the_real_servers(tmp_path, llama_server):
    # llama_server: the fixture that fails loudly when the servers are not built.
    written = asyncio.run(llamacpp.record_all(tmp_path))
    assert sorted(p.name for p in written) == ["llamacpp-python.json", "llamacpp.json"]
    for path in written:
        fresh = orjson.loads(path.read_bytes())
        committed = llamacpp.recording(path.stem)
        assert llamacpp.comparable(fresh) == llamacpp.comparable(committed), path.stem


def test_what_the_recordings_say_the_servers_do():
    server, python = llamacpp.Recorded("llamacpp"), llamacpp.Recorded("llamacpp-python")
    assert server.json_schema_ok and not python.json_schema_ok
    assert python.kinds["json_schema"]["status"] == 500  # a refused body is a 500 there
    assert python.kinds["json_object"]["status"] == 200
    assert python.completion_cap_ignored and not server.completion_cap_ignored
    assert server.states_window and server.has_props and not python.has_props
    assert server.models_owner == "llamacpp" and python.models_owner == "me"
    assert "openai-processing-ms" in python.kinds["models"]["headers"]
    assert "{window}" in server.kinds["over_window"]["body"] and "{window}" in python.kinds["over_window"]["body"]


def _request() -> ChatRequest:
    return ChatRequest(messages=(Message("user", "Rate the report."),), template="t", template_hash="h",
                       schema_name="V", schema={"type": "object", "properties": {"score": {"type": "integer"}},
                                                "required": ["score"]}, max_tokens=30)


async def _mock(profile: str, window: int = 0):
    runner, port = await start(MockConfig(profile=profile, context_window=window, model="tiny"))
    return runner, f"http://127.0.0.1:{port}/v1"


async def test_the_mocked_llama_cpp_python_refuses_json_schema_as_the_real_one_and_drscore_adapts():
    runner, url = await _mock("llamacpp-python")
    backend = HttpBackend(url, "tiny")
    try:
        resp, _ = await backend.complete(_request())
        facts = await backend.server_facts()
    finally:
        await backend.close()
        await runner.cleanup()
    assert orjson.loads(resp.text)["score"] is not None
    assert backend.wire.learned == ["response_format json_object"]
    assert facts == ServerFacts(server="llama-cpp-python", slots=1, cancels=False)


async def test_the_mocked_llama_server_states_its_window_and_slots_and_refuses_an_over_window_prompt():
    runner, url = await _mock("llamacpp", window=64)
    backend = HttpBackend(url, "tiny")
    long = ChatRequest(messages=(Message("user", "word " * 200),), template="t", template_hash="h",
                       schema_name="V", schema={"type": "object"}, max_tokens=5)
    try:
        facts = await backend.server_facts()
        with pytest.raises(Exception) as e:
            await backend.complete(long)
    finally:
        await backend.close()
        await runner.cleanup()
    assert facts == ServerFacts(server="llama.cpp", window=64, slots=llamacpp.SLOTS, cancels=True)
    assert getattr(e.value, "kind", None) == "context_length" and "64" in str(e.value)
    assert not isinstance(e.value, TransientError)
