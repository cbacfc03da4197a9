"""Reasoning-model judges: bodies per model family, adapting once to a 400 "unsupported
parameter" answer, --judge-param in the body and the cache key, unchanged keys otherwise."""
from __future__ import annotations

from typing import Annotated

import msgspec
import orjson
import pytest
from aiohttp import web

from drscore.engine.runtime.calls.cache import request_key
from drscore.engine.runtime.calls.judging import ChatRequest, FatalError, Message
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.engine.runtime.calls.verdicts import schema_of
from drscore.judge.http import HttpBackend
from drscore.judge.wire import WireProfile, family_profile, is_reasoning_model, parse_judge_params, request_body
from support.serve import serve


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    score: Annotated[int, msgspec.Meta(ge=0, le=4)]


def _request() -> ChatRequest:
    return ChatRequest(messages=(Message("system", "Judge."), Message("user", "Rate.")), template="t",
                       template_hash="h", schema_name="Verdict", schema=schema_of(Verdict), max_tokens=77,
                       temperature=0.0)


@pytest.mark.parametrize("model", ["o1", "o1-mini", "o3", "o3-mini", "o3-pro", "o4-mini", "gpt-5", "gpt-5-mini",
                                   "gpt-5-nano", "openai/o3", "O4-MINI-2025-04-16"])
def test_reasoning_families_get_max_completion_tokens_and_no_temperature(model):
    assert is_reasoning_model(model)
    body = request_body(_request(), model)
    assert body["max_completion_tokens"] == 77 and "max_tokens" not in body
    assert "temperature" not in body


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4.1-mini", "gemini-2.5-pro", "qwen3-32b", "llama3.1:8b",
                                   "o", "omni-judge", "gpt-50x"])
def test_other_models_keep_the_classic_body(model):
    assert not is_reasoning_model(model)
    body = request_body(_request(), model)
    assert body["max_tokens"] == 77 and body["temperature"] == 0.0
    assert "max_completion_tokens" not in body


def test_judge_params_parse_as_json_when_they_can_and_go_into_the_body():
    params = parse_judge_params(["reasoning_effort=high", "seed=7", 'extra_body={"google": {"x": 1}}', "flag=true"])
    assert params == {"reasoning_effort": "high", "seed": 7, "extra_body": {"google": {"x": 1}}, "flag": True}
    body = request_body(_request(), "o3", family_profile("o3", params))
    assert body["reasoning_effort"] == "high" and body["seed"] == 7
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_judge_params(["novalue"])
    with pytest.raises(ValueError, match="messages"):
        family_profile("gpt-4o", {"messages": []})


def test_learning_from_a_400_is_specific_and_happens_once():
    p = WireProfile()
    other = orjson.dumps({"error": {"message": "Invalid schema for response_format", "param": "response_format"}})
    assert not p.learn(400, other)
    refusal = orjson.dumps({"error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                   "Use 'max_completion_tokens' instead.", "param": "max_tokens", "code": "unsupported_parameter"}})
    assert not p.learn(401, refusal)  # only a 400 teaches anything
    assert p.learn(400, refusal) and p.completion_tokens and not p.omit_temperature
    assert not p.learn(400, refusal)  # already known: no second retry
    temp = orjson.dumps({"error": {"message": "Unsupported value: 'temperature' does not support 0.0 with this "
                                              "model. Only the default (1) value is supported.",
                                   "param": "temperature", "code": "unsupported_value"}})
    assert p.learn(400, temp) and p.omit_temperature


class _StrictEndpoint:
    """A local endpoint that behaves like OpenAI for reasoning models: 400 for
    ``max_tokens`` and for a non-default temperature on the names in ``strict``."""

    def __init__(self, strict: set[str]) -> None:
        self.strict = strict
        self.bodies: list[dict] = []
        self.reject_with: dict | None = None

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        if self.reject_with is not None:
            return web.json_response(self.reject_with, status=400)
        if body["model"] in self.strict:
            if "max_tokens" in body:
                return web.json_response({"error": {
                    "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                               "Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
                    "param": "max_tokens", "code": "unsupported_parameter"}}, status=400)
            if "temperature" in body and body["temperature"] != 1:
                return web.json_response({"error": {
                    "message": "Unsupported value: 'temperature' does not support 0.0 with this model. "
                               "Only the default (1) value is supported.", "type": "invalid_request_error",
                    "param": "temperature", "code": "unsupported_value"}}, status=400)
        return web.json_response({"choices": [{"message": {"content": '{"score": 3}'}, "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 10, "completion_tokens": 3}, "model": body["model"]})


@pytest.fixture
async def strict_endpoint():
    runners = []

    async def make(strict: set[str]) -> tuple[str, _StrictEndpoint]:
        ep = _StrictEndpoint(strict)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", ep.chat)
        runner, base = await serve(app)
        runners.append(runner)
        return f"{base}/v1", ep

    yield make
    for r in runners:
        await r.cleanup()


def _pool(backend) -> JudgePool:
    return JudgePool(backend, cache=None, prices=PriceTable.load(None), limiter=RateLimiter(0, 0, 4))


async def test_o_series_judge_succeeds_first_time_against_a_refusing_endpoint(strict_endpoint):
    url, ep = await strict_endpoint({"o3", "o4-mini"})
    for model in ("o3", "o4-mini"):
        backend = HttpBackend(url, model)
        try:
            resp, _ = await backend.complete(_request())
        finally:
            await backend.close()
        assert orjson.loads(resp.text) == {"score": 3}
    assert len(ep.bodies) == 2  # no rejected attempt at all
    assert all("max_tokens" not in b and "temperature" not in b for b in ep.bodies)


async def test_unknown_strict_model_is_adapted_once_then_remembered(strict_endpoint):
    url, ep = await strict_endpoint({"house-reasoner"})
    backend = HttpBackend(url, "house-reasoner")
    pool = _pool(backend)
    try:
        for i in range(3):
            judged = await pool.ask("quality", _Score, {"question": f"q{i}", "report": "r"})
            assert judged.value.score == 3
    finally:
        await backend.close()
    # first call: max_tokens refused, then temperature refused, then accepted; later calls right away
    assert [("max_tokens" in b, "temperature" in b) for b in ep.bodies] == [
        (True, True), (False, True), (False, False), (False, False), (False, False)]
    assert backend.wire.learned == ["max_completion_tokens", "omit temperature"]


async def test_concurrent_calls_in_flight_while_the_profile_adapts_all_succeed(strict_endpoint):
    import asyncio

    url, ep = await strict_endpoint({"house-reasoner"})
    backend = HttpBackend(url, "house-reasoner")
    try:
        answers = await asyncio.gather(*(backend.complete(_request()) for _ in range(8)))
    finally:
        await backend.close()
    assert all(orjson.loads(resp.text) == {"score": 3} for resp, _ in answers)
    assert backend.wire.learned == ["max_completion_tokens", "omit temperature"]
    accepted = [b for b in ep.bodies if "max_tokens" not in b and "temperature" not in b]
    assert len(accepted) == 8


async def test_sdk_transport_adapts_too(strict_endpoint):
    from drscore.judge.sdk import SdkBackend

    url, ep = await strict_endpoint({"house-reasoner"})
    backend = SdkBackend(url, "house-reasoner", params={"reasoning_effort": "low"})
    try:
        resp, _ = await backend.complete(_request())
    finally:
        await backend.close()
    assert orjson.loads(resp.text) == {"score": 3}
    assert ep.bodies[-1]["reasoning_effort"] == "low" and "max_completion_tokens" in ep.bodies[-1]


async def test_other_400s_still_fail_without_retry(strict_endpoint):
    url, ep = await strict_endpoint(set())
    ep.reject_with = {"error": {"message": "Invalid schema for response_format 'Verdict'",
                                "param": "response_format"}}
    backend = HttpBackend(url, "gpt-4o")
    try:
        with pytest.raises(FatalError, match="Invalid schema"):
            await backend.complete(_request())
    finally:
        await backend.close()
    assert len(ep.bodies) == 1


class _Score(msgspec.Struct):
    score: int


class _QualityLike(msgspec.Struct):
    justification: str
    overall: int


def test_cache_key_unchanged_for_models_that_worked_and_params_enter_it():
    old_identity = {"backend": "http", "base_url": "http://x/v1", "model": "gpt-4o"}
    plain = HttpBackend("http://x/v1", "gpt-4o")
    assert {"backend": plain.name, **plain.identity()} == old_identity
    req, comps = _pool(plain).build("quality", _QualityLike, {"question": "q", "report": "r"})
    assert {k: comps[k] for k in old_identity} == old_identity and "params" not in comps
    with_params = HttpBackend("http://x/v1", "gpt-4o", params={"seed": 7})
    _, comps2 = _pool(with_params).build("quality", _QualityLike, {"question": "q", "report": "r"})
    assert comps2["params"] == {"seed": 7} and request_key(comps2) != request_key(comps)


def test_judge_param_flag_reaches_config(tmp_path):
    from drscore.commands._common import judge_config_from_args
    from drscore.commands.run import command as run_command

    ctx = run_command.make_context("run", ["--judge-param", "reasoning_effort=high", "--judge-param", "seed=7"])
    jc = judge_config_from_args(ctx.params)
    assert jc.params == {"reasoning_effort": "high", "seed": 7}
    from drscore.api import Run, RunConfig

    config = Run(RunConfig(methods=["quality"], reports=["r.jsonl"], judge=jc)).public_config()
    assert config["judge"]["params"] == {"reasoning_effort": "high", "seed": 7}  # what config.json holds
