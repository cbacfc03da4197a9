"""A small end-to-end run per provider profile of the mock judge (issue 16, part 7):
the engine's HTTP backend and pool against each profile, checking the behaviour that
profile exists for."""
from __future__ import annotations

import asyncio

import msgspec
import pytest

from drscore import prompts
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pool import JudgePool
from drscore.engine.runtime.calls.pricing import PriceTable
from drscore.judge.http import HttpBackend
from drscore.judge.mock.profiles import profile, rate_limit_response
from drscore.judge.mock.quota import Refusal
from drscore.judge.mock.server import MockConfig, start
from drscore.judge.quota_refusal import NamedQuota, named_quotas


class V(msgspec.Struct, forbid_unknown_fields=True):
    score: int


@pytest.fixture(autouse=True)
def tiny_prompt(monkeypatch):
    tpl = prompts.parse("t", "---\nmax_tokens: 40\nexpected_output_tokens: 5\n---\n## system\nJudge.\n"
                             "## user\nItem ${i}")
    monkeypatch.setattr(prompts, "load", lambda name: tpl)


async def _run(cfg: MockConfig, items: list[str], *, path: str = "/v1", model: str = "judge-x"):
    runner, port = await start(cfg)
    backend = HttpBackend(f"http://127.0.0.1:{port}{path}", model)
    pool = JudgePool(backend, cache=None, limiter=RateLimiter(concurrency=4), prices=PriceTable(),
                     backoff_base_s=0.001, backoff_cap_s=0.002, max_retries=2)

    async def one(i):
        try:
            return (await pool.ask("t", V, {"i": i})).value
        except JudgeFailed as e:
            return e.reason
    try:
        out = await asyncio.gather(*(one(i) for i in items))
    finally:
        await backend.close()
        await runner.cleanup()
    return pool, out


async def test_openai_profile_reports_cached_and_reasoning_tokens():
    pool, out = await _run(MockConfig(profile="openai", reasoning_tokens=30), ["a", "b", "c"])
    assert all(isinstance(v, V) for v in out)
    assert pool.stats.reasoning_tokens == 3 * 30  # from completion_tokens_details, hidden thought


async def test_azure_profile_needs_the_api_version_and_its_filter_fails_one_item():
    cfg = MockConfig(profile="azure", filter_word="forbidden")
    path = "/openai/deployments/judge-4o"
    pool, out = await _run(cfg, ["a", "a forbidden b", "c"], path=path + "?api-version=2024-10-21")
    assert isinstance(out[0], V) and out[1] == "content_filter" and isinstance(out[2], V)
    assert pool.stopped is None
    pool, out = await _run(cfg, ["a", "b"], path=path)  # no api-version: Azure's 404, an endpoint fault
    assert out == ["not_found", "not_found"] and pool.stopped is not None and pool.stopped.fatal


async def test_gemini_profile_list_wrapped_context_error_teaches_the_window():
    long = "word " * 400
    pool, out = await _run(MockConfig(profile="gemini", context_window=200), ["a", long, "b"])
    assert isinstance(out[0], V) and out[1] == "context_length" and isinstance(out[2], V)
    assert pool.window == 200 and pool.window_source == "endpoint"


async def test_gemini_profile_429_says_when_only_in_the_body():
    pool, out = await _run(MockConfig(profile="gemini", rpm=600, burst=0.1), ["a", "b", "c"])
    assert all(isinstance(v, V) for v in out)
    assert pool.stats.rate_limited >= 1  # paced by retryDelay; nothing lost
    # its QuotaFailure named the quota: paced at it from then on, as at an announced one
    assert pool.stats.named_quota == "600 requests per minute"
    assert pool.limiter.announced and pool.limiter.rpm == 600 and pool.limiter.learned_quota() is None


def test_each_profiles_429_names_the_quota_in_its_providers_words():
    refusal = Refusal(dimension="tokens", limit=30000, left=63, requested=385)
    _, body = rate_limit_response(profile("openai"), 0.5, {}, "gpt-4o", refusal)
    assert named_quotas(body) == [NamedQuota(dimension="tokens", per="minute", limit=30000, used=29937, requested=385)]
    _, body = rate_limit_response(profile("gemini"), 0.5, {}, "gemini-2.5-flash", refusal, input_only=True)
    assert named_quotas(body) == [NamedQuota(dimension="input_tokens", per="minute", limit=30000)]
    _, body = rate_limit_response(profile("gemini"), 0.5, {}, "gemini-2.5-flash", refusal)
    assert named_quotas(body) == [NamedQuota(dimension="tokens", per="minute", limit=30000)]
    _, body = rate_limit_response(profile("azure"), 0.5, {}, "gpt-4o", refusal)  # the quota, not its figure
    assert named_quotas(body) == [NamedQuota(dimension="tokens", per="minute", limit=None)]
    _, body = rate_limit_response(profile("vllm"), 0.5, {}, "m", refusal)  # a bare gateway names nothing
    assert named_quotas(body) == []


async def test_anthropic_profile_ignores_response_format_and_the_engine_falls_back():
    pool, out = await _run(MockConfig(profile="anthropic"), ["a", "b", "c"])
    assert all(isinstance(v, V) for v in out)
    assert pool.stats.structured_output_ignored and pool.json_mode is False and pool.stats.reasks == 0
    assert pool.stats.calls == 3 + 1  # only the preflight was asked twice; the others went with the schema


async def test_vllm_profile_reasoning_content_and_poisoned_bodies():
    pool, out = await _run(MockConfig(profile="vllm", reasoning_tokens=20), ["a", "b"])
    assert all(isinstance(v, V) for v in out) and pool.stats.reasoning_tokens > 0
    pool, out = await _run(MockConfig(profile="vllm", poison_rate=1.0), ["a", "b"])
    assert out == ["server_error", "server_error"] and pool.stopped is None


async def test_ollama_profile_think_blocks_and_a_prompt_over_its_context():
    pool, out = await _run(MockConfig(profile="ollama", reasoning_tokens=10, context_window=50),
                           ["a", "word " * 200])
    # Ollama would cut the oversized prompt silently; the context it states at /api/ps once the
    # first answer loaded the model keeps it from being sent (docs/providers.md)
    assert isinstance(out[0], V) and out[1] == "context_length"
    assert pool.stats.refused_over_window == 1 and (pool.window, pool.window_source) == (50, "ollama")
    assert pool.stats.reasoning_tokens > 0


async def test_gemini_filter_withholds_the_answer_and_the_item_fails_alone():
    pool, out = await _run(MockConfig(profile="gemini", filter_word="forbidden"), ["a", "forbidden b", "c"])
    assert isinstance(out[0], V) and out[1] == "content_filter" and isinstance(out[2], V)
    assert pool.stats.request_faults == 1 and pool.stopped is None
