"""What an AI gateway's headers say about its token quota (judge.gateway_quota), and how a
refusal carrying them is classified (judge.http.status_error). The headers are the gateways'
own, as their sources, documents and users' captures show them (docs/providers.md, "AI
gateways")."""
from __future__ import annotations

import pytest

from drscore.engine.runtime.calls.judging import GatewayQuota, RateLimited, RateLimitInfo, TransientError
from drscore.judge.gateway_quota import read_gateway_quota
from drscore.judge.http import status_error
from drscore.judge.mock.gateway import _NGINX_503
from drscore.judge.ratelimit_headers import QuotaHeaders, parse_rate_limit_headers

# A 429 captured from Kong 3.11's ai-rate-limiting-advanced (no plain Retry-After)
KONG_429 = {"X-AI-RateLimit-Limit-minute-openai": "500", "X-AI-RateLimit-Remaining-minute-openai": "0",
            "X-AI-RateLimit-Retry-After-minute-openai": "9", "X-AI-RateLimit-Reset-minute-openai": "9",
            "X-AI-RateLimit-Reset": "9", "X-AI-RateLimit-Retry-After": "9"}
KONG_429_BODY = b'{"message":"AI token rate limit exceeded for provider(s): openai"}'
# APISIX's documented refusal, two instances, its local counters (Reset 0 on a refusal)
APISIX_503 = {"X-AI-RateLimit-Limit-openai-instance": "100", "X-AI-RateLimit-Remaining-openai-instance": "0",
              "X-AI-RateLimit-Reset-openai-instance": "0", "X-AI-RateLimit-Limit-deepseek-instance": "100",
              "X-AI-RateLimit-Remaining-deepseek-instance": "0", "X-AI-RateLimit-Reset-deepseek-instance": "0"}


def _lower(headers: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def test_kong_names_its_window_and_says_when_on_a_refusal() -> None:
    assert read_gateway_quota(_lower(KONG_429)) == GatewayQuota(
        headers="x-ai-ratelimit", tokens_per_minute=500.0, window_s=60.0, spent=True, wait_s=9.0, reset_s=9.0)
    ok = read_gateway_quota(_lower({"X-AI-RateLimit-Limit-minute-openai": "500",
                                    "X-AI-RateLimit-Remaining-minute-openai": "310"}))
    assert ok == GatewayQuota(headers="x-ai-ratelimit", tokens_per_minute=500.0, window_s=60.0)


@pytest.mark.parametrize(("headers", "per_minute", "window"), [
    # 310 tokens per 3 s: 310 x 20 a minute
    ({"X-AI-RateLimit-Limit-3-openai": "310"}, 6200.0, 3.0),
    # a minute's and an hour's limit: the hour is not paced (evenly over an hour, a short run
    # would get a sixtieth of it a minute), the minute's is
    ({"X-AI-RateLimit-Limit-minute-openai": "500", "X-AI-RateLimit-Limit-hour-openai": "1000"}, 500.0, 60.0),
    # a second's limit, 20 tokens: 1,200 a minute, tighter than the minute's 1,500
    ({"X-AI-RateLimit-Limit-second-p": "20", "X-AI-RateLimit-Limit-minute-p": "1500"}, 1200.0, 1.0),
    # 300 s is longer than a minute: not paced
    ({"X-AI-RateLimit-Limit-300-llama2": "1000"}, None, None),
])
def test_a_window_of_a_minute_or_less_gives_a_pace(headers: dict[str, str], per_minute: float | None,
                                                   window: float | None) -> None:
    quota = read_gateway_quota(_lower(headers))
    assert quota is not None and (quota.tokens_per_minute, quota.window_s) == (per_minute, window)


def test_apisix_names_no_window_its_reset_bounds_it_from_below() -> None:
    refused = read_gateway_quota(_lower(APISIX_503))
    # the window is in no header and a Reset of 0 says nothing: no pace and no wait
    assert refused == GatewayQuota(headers="x-ai-ratelimit", spent=True)
    ok = {"X-AI-RateLimit-Limit-openai-instance": "100", "X-AI-RateLimit-Remaining-openai-instance": "41",
          "X-AI-RateLimit-Reset-openai-instance": "30"}
    # 30 s left: the window is at least 30 s, so at most 100 x 60 / 30 = 200 a minute
    assert read_gateway_quota(_lower(ok)) == GatewayQuota(headers="x-ai-ratelimit", tokens_per_minute=200.0,
                                                          window_s=30.0, fixed=True, wait_s=30.0, reset_s=30.0)
    # an earlier answer said 60 s left: 100 a minute
    assert read_gateway_quota(_lower(ok), window_s=60.0).tokens_per_minute == 100.0
    # a window of 45.2 s said: 46 (whole seconds, so never faster than the limit allows)
    assert read_gateway_quota(_lower(ok), window_s=45.2).tokens_per_minute == pytest.approx(100 * 60 / 46)


def test_litellm_own_limit_replaces_the_upstreams_it_passes_through() -> None:
    headers = {"x-ratelimit-api_key-limit-tokens": "1000", "x-ratelimit-api_key-remaining-tokens": "0",
               "x-ratelimit-api_key-limit-requests": "10", "x-ratelimit-api_key-remaining-requests": "7",
               # OpenAI's account quota, passed through unprefixed: another quota than the key's
               "x-ratelimit-limit-tokens": "2000000", "x-ratelimit-remaining-tokens": "1999000",
               "x-ratelimit-reset-tokens": "30ms"}
    assert read_gateway_quota(headers) == GatewayQuota(headers="litellm", tokens_per_minute=1000.0,
                                                       requests_per_minute=10.0, window_s=60.0, fixed=True, spent=True)
    info = parse_rate_limit_headers(headers)
    assert (info.limit_tokens, info.remaining_tokens, info.reset_tokens_s) == (1000.0, None, None)
    assert info.gateway is not None and (info.gateway.window_s, info.gateway.paces) == (60.0, ("tokens", "requests"))
    assert (info.limit_requests, info.gateway.headers, info.gateway.spent) == (10.0, "litellm", True)
    # the upstream's own limit, where it is the tighter, stays with its counts
    looser = {**headers, "x-ratelimit-api_key-limit-tokens": "5000000"}
    info = parse_rate_limit_headers(looser)
    assert (info.limit_tokens, info.remaining_tokens) == (2000000.0, 1999000.0)
    # the key's requests limit still binds its dimension
    assert info.limit_requests == 10.0 and info.gateway is not None
    assert (info.gateway.window_s, info.gateway.paces) == (60.0, ("requests",))


def test_kong_with_its_limits_hidden_still_says_when_on_a_refusal() -> None:
    # hide_client_headers: no Limit or Remaining, the Reset and Retry-After stay
    hidden = {k: v for k, v in KONG_429.items() if "RateLimit-Limit" not in k and "Remaining" not in k}
    assert read_gateway_quota(_lower(hidden)) == GatewayQuota(headers="x-ai-ratelimit", wait_s=9.0, reset_s=9.0)
    err = status_error(429, KONG_429_BODY, "http://gw.test/v1", parse_rate_limit_headers(_lower(hidden)))
    assert isinstance(err, RateLimited) and err.limits is not None and err.limits.retry_after_s == 9.0


def test_higress_says_only_when_on_a_refusal_and_nothing_is_no_gateway() -> None:
    assert read_gateway_quota({"x-tokenratelimit-reset": "42"}) == GatewayQuota(headers="higress", spent=True,
                                                                                 wait_s=42.0)
    assert read_gateway_quota({"x-ratelimit-limit-tokens": "1000", "retry-after": "3"}) is None
    # values a gateway should never send are not read
    junk = read_gateway_quota({"x-ai-ratelimit-limit-minute-p": "inf", "x-ai-ratelimit-remaining-minute-p": "-3",
                               "x-ai-ratelimit-retry-after": "soon"})
    assert junk is None


def test_a_gateways_503_is_a_quota_refusal_with_its_wait() -> None:
    headers = {**APISIX_503, "X-AI-RateLimit-Reset-openai-instance": "17"}  # its Redis counters say the TTL
    err = status_error(503, _NGINX_503, "http://gw.test/v1", parse_rate_limit_headers(_lower(headers)))
    assert isinstance(err, RateLimited) and err.kind == "rate_limit"
    assert err.limits is not None and err.limits.retry_after_s == 17.0 and err.limits.binding_named == "tokens"
    assert "AI gateway's token quota" in str(err)
    # the same 503 without the gateway's headers is a failing server, retried as one
    plain = status_error(503, _NGINX_503, "http://gw.test/v1", RateLimitInfo())
    assert isinstance(plain, TransientError) and plain.kind == "server_error"
    # a 503 whose gateway headers leave tokens is not the quota either
    left = {**headers, "X-AI-RateLimit-Remaining-openai-instance": "40", "X-AI-RateLimit-Remaining-deepseek-instance": "9"}
    assert isinstance(status_error(503, _NGINX_503, "http://gw.test/v1", parse_rate_limit_headers(_lower(left))),
                      TransientError)


def test_kongs_429_waits_its_own_retry_after() -> None:
    err = status_error(429, KONG_429_BODY, "http://gw.test/v1", parse_rate_limit_headers(_lower(KONG_429)))
    assert isinstance(err, RateLimited)
    assert err.limits is not None and err.limits.retry_after_s == 9.0 and err.limits.binding_named == "tokens"
    # a plain Retry-After, where one came, is the server's own word and wins
    err = status_error(429, KONG_429_BODY, "http://gw.test/v1",
                       parse_rate_limit_headers(_lower({**KONG_429, "Retry-After": "4"})))
    assert err.limits is not None and err.limits.retry_after_s == 4.0


def test_an_endpoints_longest_reset_stands_for_the_window_apisix_does_not_name() -> None:
    reader = QuotaHeaders()
    said = {"x-ai-ratelimit-limit-i": "1000", "x-ai-ratelimit-remaining-i": "500"}
    # 12 s left in a window that began before: at most 1,000 x 60 / 12 = 5,000 a minute
    first = reader.read({**said, "x-ai-ratelimit-reset-i": "12"})
    assert first.gateway is not None and (first.limit_tokens, first.gateway.window_s, first.gateway.paces) == (
        5000.0, 12.0, ("tokens",))
    # a fresh window's 20 s: 3,000 a minute, and a later, shorter Reset does not raise it again
    assert reader.read({**said, "x-ai-ratelimit-reset-i": "20"}).limit_tokens == 3000.0
    later = reader.read({**said, "x-ai-ratelimit-reset-i": "3"})
    assert later.gateway is not None and (later.limit_tokens, later.gateway.window_s) == (3000.0, 20.0)
