"""HTTP and SDK transports against the mock judge: structured outputs, the embedded-schema
fallback, error classification, re-ask on malformed answers, and no key leaks."""
from __future__ import annotations

import email.utils
import socket
import ssl
import time
from typing import Annotated, Literal

import msgspec
import pytest

from drscore.engine.runtime.calls.judging import ChatRequest, FatalError, JudgeFailed, Message, RateLimited
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.engine.runtime.calls.verdicts import schema_of
from drscore.judge.http import HttpBackend, classify_connection_error, classify_status
from drscore.engine.runtime.calls.local_process import free_port
from drscore.judge.mock.scripted import ScriptedJudge
from drscore.judge.mock.server import MockConfig, start
from drscore.judge.ratelimit_headers import parse_rate_limit_headers, retry_after_from_text
from drscore.judge.sdk import SdkBackend
from drscore.judge.wire import request_body


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    score: Annotated[int, msgspec.Meta(ge=0, le=4)]
    label: Literal["SUPPORTS", "OMITS", "CONTRADICTS"]
    reason: str


def _request(json_mode=True, sample=0):
    return ChatRequest(messages=(Message("system", "Judge."), Message("user", "Rate this.")), template="t",
                       template_hash="h", schema_name="Verdict", schema=schema_of(Verdict), max_tokens=50,
                       json_mode=json_mode, sample=sample)


def test_request_body_sends_schema_or_embeds_it():
    body = request_body(_request(), "m")
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["score", "label", "reason"]
    assert "seed" not in body
    plain = request_body(_request(json_mode=False, sample=2), "m")
    assert "response_format" not in plain and plain["seed"] == 2
    assert "<json-schema>" in plain["messages"][0]["content"]


@pytest.fixture
async def mock():
    servers = []

    async def make(**cfg):
        runner, port = await start(MockConfig(**cfg))
        servers.append(runner)
        return f"http://127.0.0.1:{port}/v1"

    yield make
    for r in servers:
        await r.cleanup()


@pytest.mark.parametrize("json_mode", [True, False])
@pytest.mark.parametrize("backend_cls", [HttpBackend, SdkBackend])
async def test_transports_decode_schema_valid_answers(mock, backend_cls, json_mode):
    url = await mock()
    backend = backend_cls(url, "mock", api_key="sk-test-secret-value")
    try:
        resp, info = await backend.complete(_request(json_mode=json_mode))
    finally:
        await backend.close()
    v = msgspec.json.decode(resp.text, type=Verdict)  # valid in both modes
    assert 0 <= v.score <= 4 and not resp.usage_estimated and resp.input_tokens > 0
    assert info is not None


async def test_bad_request_is_fatal_and_never_shows_the_key(mock):
    url = await mock()
    backend = HttpBackend(url.replace("/v1", "/nope"), "mock", api_key="sk-test-secret-value")
    try:
        with pytest.raises(FatalError) as err:
            await backend.complete(_request())
    finally:
        await backend.close()
    assert "sk-test-secret-value" not in str(err.value)


async def test_malformed_answers_are_reasked_and_server_errors_retried(mock, monkeypatch):
    from drscore import prompts

    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse(
        "t", "---\nmax_tokens: 60\nexpected_output_tokens: 20\n---\n## user\nCase ${i}"))
    url = await mock(malformed_rate=0.3, error_rate=0.2, seed=3)
    pool = JudgePool(HttpBackend(url, "mock"), cache=None, limiter=RateLimiter(concurrency=8),
                     prices=PriceTable(), backoff_base_s=0.001, max_reasks=4, max_retries=8)
    ok = failed = 0
    try:
        for i in range(40):
            try:
                await pool.ask("t", Verdict, {"i": i})
                ok += 1
            except JudgeFailed:
                failed += 1
    finally:
        await pool.backend.close()
    assert ok + failed == 40 and ok >= 36  # bounded retries recover almost everything
    assert pool.stats.reasks > 0 and pool.stats.retries > 0


async def test_connection_refused_stops_at_preflight_or_is_retried_mid_run(monkeypatch):
    from drscore import prompts

    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse("t", "## user\nx ${i}"))
    port = free_port()
    for preflight, retries in ((True, 0), (False, 2)):
        pool = JudgePool(HttpBackend(f"http://127.0.0.1:{port}/v1", "m"), cache=None, limiter=RateLimiter(),
                         prices=PriceTable(), backoff_base_s=0.001, max_retries=2, preflight=preflight)
        try:
            with pytest.raises(JudgeFailed) as err:
                await pool.ask("t", Verdict, {"i": 1})
        finally:
            await pool.backend.close()
        assert err.value.reason == "connection_refused" and pool.stats.retries == retries
        assert (pool.stopped is not None) is preflight


@pytest.mark.parametrize("status, body, kind, param", [
    (401, b'{"error": {"message": "Incorrect API key", "code": "invalid_api_key"}}', "auth", None),
    (403, b"forbidden", "auth", None),
    (404, b'{"error": {"message": "The model `gpt-9` does not exist", "code": "model_not_found"}}',
     "model_not_found", None),
    (404, b'{"error": "model \'llama9\' not found"}', "model_not_found", None),  # Ollama's shape
    (404, b"<html>Not Found</html>", "not_found", None),  # a wrong path
    (400, b'{"error": {"message": "Unsupported parameter: \'max_tokens\' is not supported with this model.", '
          b'"param": "max_tokens", "code": "unsupported_parameter"}}', "unsupported_parameter", "max_tokens"),
    (400, b'{"error": {"message": "Unsupported value: \'temperature\' does not support 0.0 with this model.", '
          b'"param": "temperature", "code": "unsupported_value"}}', "unsupported_parameter", "temperature"),
    (400, b'{"error": {"message": "This model\'s maximum context length is 128000 tokens.", '
          b'"code": "context_length_exceeded"}}', "context_length", None),
    # Gemini's compatible endpoint wraps its error in a list and gives the status as a word.
    (400, b'[{"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum number '
          b'of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}}]', "context_length", None),
    (400, b'{"type": "error", "error": {"type": "invalid_request_error", '
          b'"message": "prompt is too long: 215000 tokens > 200000 maximum"}}', "context_length", None),
    (400, b'{"error": {"message": "The response was filtered due to the prompt triggering Azure OpenAI\'s '
          b'content management policy.", "type": null, "param": "prompt", "code": "content_filter", '
          b'"status": 400}}', "content_filter", "prompt"),
    (400, b'{"error": {"message": "Invalid prompt: your prompt was flagged as potentially violating our '
          b'usage policy.", "type": "invalid_request_error", "param": null, "code": "invalid_prompt"}}',
     "invalid_request", None),
    (400, b'[{"error": {"code": 400, "message": "Invalid JSON payload received. Unknown name \"foo\": '
          b'Cannot find field.", "status": "INVALID_ARGUMENT"}}]', "unsupported_parameter", None),
    (400, b'{"error": {"message": "messages must alternate", "code": null}}', "bad_request", None),
    (429, b"{}", "rate_limit", None),
    (503, b"overloaded", "server_error", None),
])
def test_error_statuses_are_classified(status, body, kind, param):
    assert classify_status(status, body) == (kind, param)


def test_connection_failures_are_classified_through_their_causes():
    def chained(inner):
        try:
            try:
                raise inner
            except Exception as e:
                raise OSError("wrapped") from e
        except OSError as outer:
            return outer
    assert classify_connection_error(chained(socket.gaierror(-2, "Name or service not known"))) == "dns"
    assert classify_connection_error(chained(ssl.SSLError(1, "CERTIFICATE_VERIFY_FAILED"))) == "tls"
    assert classify_connection_error(chained(ConnectionRefusedError(111, "refused"))) == "connection_refused"
    assert classify_connection_error(ConnectionResetError(104, "reset")) == "connection"


def test_retry_delays_from_headers_and_from_openai_prose():
    assert retry_after_from_text("Please try again in 23h59m12.5s. Visit ...") == pytest.approx(86352.5)
    assert retry_after_from_text("Please try again in 120ms.") == pytest.approx(0.12)
    assert retry_after_from_text("Rate limit reached.") is None
    assert parse_rate_limit_headers({"Retry-After": "3600"}).retry_after_s == 3600.0
    when = email.utils.formatdate(time.time() + 600, usegmt=True)
    assert parse_rate_limit_headers({"Retry-After": when}).retry_after_s == pytest.approx(600, abs=2)


async def test_a_429_with_the_delay_only_in_prose_carries_it_as_retry_after():
    with ScriptedJudge("daily429") as judge:
        backend = HttpBackend(judge.url, "m")
        try:
            with pytest.raises(RateLimited) as err:
                await backend.complete(_request())
        finally:
            await backend.close()
    assert err.value.limits.retry_after_s == pytest.approx(86352.5)


@pytest.mark.parametrize("transport", [HttpBackend, SdkBackend])
async def test_each_request_tells_its_own_caller_when_it_left(mock, transport):
    # The pool sets REQUEST_LEFT around each send; many sends share one session at once, and each
    # must reach its own permit, once, after it was granted and before its answer.
    import asyncio

    from drscore.engine.runtime.calls.judging import REQUEST_LEFT

    backend = transport(await mock(seed=3), "mock")

    async def send(i: int) -> tuple[list[tuple[int, float]], float, float]:
        told: list[tuple[int, float]] = []
        REQUEST_LEFT.set(lambda: told.append((i, time.monotonic())))
        before = time.monotonic()
        await backend.complete(_request(sample=i))
        return told, before, time.monotonic()

    try:
        sent = await asyncio.gather(*(send(i) for i in range(6)))
        unset = await backend.complete(_request(sample=9))  # nobody asked: nothing to tell
    finally:
        await backend.close()
    for i, (told, before, after) in enumerate(sent):
        assert len(told) == 1 and told[0][0] == i and before <= told[0][1] <= after
    assert unset[0].text and REQUEST_LEFT.get() is None


def test_key_header_bearer_by_default_or_named_for_azure():
    assert HttpBackend("http://x/v1", "m", api_key="k1")._headers["Authorization"] == "Bearer k1"
    azure = HttpBackend("http://x/v1", "m", api_key="k2", api_key_header="api-key")._headers
    assert azure["api-key"] == "k2" and "Authorization" not in azure
    assert "Authorization" not in HttpBackend("http://x/v1", "m")._headers  # local servers: no key


async def test_the_quickest_connection_sets_the_limiters_margins(mock, monkeypatch):
    from drscore import prompts
    from drscore.engine.runtime.calls.limits import LAG_S, NEAR_LAG_S
    from drscore.engine.runtime.calls.server_bucket import AMBIGUOUS_S, NEAR_AMBIGUOUS_S

    monkeypatch.setattr(prompts, "load", lambda name: prompts.parse(
        "t", "---\nmax_tokens: 60\nexpected_output_tokens: 20\n---\n## user\nCase ${i}"))
    url = await mock(seed=3)
    backend = HttpBackend(url, "mock")
    limiter = RateLimiter(concurrency=4)
    pool = JudgePool(backend, cache=None, limiter=limiter, prices=PriceTable())
    assert backend.connect_s is None and (limiter.lag_s, limiter.ambiguous_s) == (LAG_S, AMBIGUOUS_S)
    try:
        await pool.ask("t", Verdict, {"i": 0})
        first = backend.connect_s
        assert first is not None and 0.0 < first < 10.0  # timed: a new connection was made
        await pool.ask("t", Verdict, {"i": 1})  # over the kept connection: nothing to time
        assert backend.connect_s == first
    finally:
        await backend.close()
    # the limiter was told: its margins follow the connection where it is quicker than they allow
    assert limiter.lag_s == pytest.approx(min(LAG_S, NEAR_LAG_S + first))
    assert limiter.ambiguous_s == pytest.approx(min(AMBIGUOUS_S, NEAR_AMBIGUOUS_S + 2 * first))
