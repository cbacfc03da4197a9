"""A 429's body naming the quota that refused the call (judge.quota_refusal). Each body is a
provider's, as its users quote it in bug reports (ids and organisations shortened)."""
from __future__ import annotations

from datetime import datetime, timezone

import orjson
import pytest

from drscore.engine.runtime.calls.judging import FatalError, RateLimited, RateLimitInfo
from drscore.judge.http import classify_status, status_error
from drscore.judge.quota_refusal import (
    NamedQuota, daily_quota_spent, fill_from_refusal, named_quotas, quota_replenished_in, refusal_fault,
    seconds_to_pacific_midnight,
)

# OpenAI (BuilderIO/micro-agent#86); the same wording from Groq
OPENAI_TPM = (b'{"error": {"message": "Rate limit reached for gpt-4o in organization org-X on tokens per min (TPM): '
              b'Limit 30000, Used 29937, Requested 385. Please try again in 644ms.", "type": "tokens", '
              b'"param": null, "code": "rate_limit_exceeded"}}')
# OpenAI's refusal of a call larger than the whole quota (TheR1D/shell_gpt#653)
OPENAI_TOO_LARGE = (b'{"error": {"message": "Request too large for gpt-4o in organization org-X on tokens per min '
                    b'(TPM): Limit 30000, Requested 31538. The input or output tokens must be reduced in order to run '
                    b'successfully.", "type": "tokens", "param": null, "code": "rate_limit_exceeded"}}')
# OpenAI's older wording (daveshap/Medical_Intake#9)
OPENAI_OLD = (b'{"error": {"message": "Rate limit reached for 10KTPM-200RPM in organization org-X on tokens per min. '
              b'Limit: 10000 / min. Please try again in 6ms."}}')
GROQ_DAILY = (b'{"error": {"message": "Rate limit reached for model `llama-3.1-70b` in organization `org_1` service tier '
              b'`on_demand` on tokens per day (TPD): Limit 500000, Used 499000, Requested 2000. Please try again in '
              b'2m52.8s.", "type": "tokens", "code": "rate_limit_exceeded"}}')
# Anthropic (FoundationAgents/OpenManus#746)
ANTHROPIC = (b'{"type": "error", "error": {"type": "rate_limit_error", "message": "This request would exceed the rate '
             b'limit for your organization (a22c) of 1,000,000 input tokens per minute. For details, refer to the '
             b'docs."}}')
# Azure OpenAI (microsoft/sample-app-aoai-chatGPT#406): the quota named, not its figure
AZURE = (b'{"error": {"code": "429", "message": "Requests to the ChatCompletions_Create Operation under Azure OpenAI '
         b'API version 2024-02-01 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry '
         b'after 9 seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the '
         b'default rate limit."}}')
# LiteLLM's proxy (BerriAI/litellm#13898); 9223372036854775807 is its "no limit"
LITELLM = (b'{"error": {"message": "429: LiteLLM Rate Limit Handler for rate limit type = team. Crossed TPM / RPM / '
           b'Max Parallel Request Limit. current rpm: 1, rpm limit: 15, current tpm: 12260, tpm limit: 5000, current '
           b'max_parallel_requests: 0, max_parallel_requests: 9223372036854775807", "code": "429"}}')


def _gemini(quota_id: str, value: str | None, metric: str) -> bytes:
    """Gemini's 429 through its OpenAI-compatible endpoint: a list holding the error, whose
    QuotaFailure names the quota (google-gemini/gemini-cli#8437 and a user's log)."""
    violation = {"quotaMetric": f"generativelanguage.googleapis.com/{metric}", "quotaId": quota_id,
                 "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"}}
    if value is not None:
        violation["quotaValue"] = value
    return orjson.dumps([{"error": {"code": 429, "message": "You exceeded your current quota.",
                                    "status": "RESOURCE_EXHAUSTED", "details": [
                                        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [violation]},
                                        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "28s"}]}}])


GEMINI_TOKENS = _gemini("GenerateContentInputTokensPerModelPerMinute-FreeTier", "16000",
                        "generate_content_free_tier_input_token_count")


@pytest.mark.parametrize(("body", "named"), [
    (OPENAI_TPM, [NamedQuota(dimension="tokens", per="minute", limit=30000, used=29937, requested=385)]),
    (OPENAI_OLD, [NamedQuota(dimension="tokens", per="minute", limit=10000)]),
    (GROQ_DAILY, [NamedQuota(dimension="tokens", per="day", limit=500000, used=499000, requested=2000)]),
    (ANTHROPIC, [NamedQuota(dimension="input_tokens", per="minute", limit=1_000_000)]),
    (GEMINI_TOKENS, [NamedQuota(dimension="input_tokens", per="minute", limit=16000)]),
    (_gemini("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "10", "generate_content_free_tier_requests"),
     [NamedQuota(dimension="requests", per="minute", limit=10)]),
    (LITELLM, [NamedQuota(dimension="requests", per="minute", limit=15, used=1),
               NamedQuota(dimension="tokens", per="minute", limit=5000, used=12260)]),
    # no figure: Gemini's violation without its value and Azure's wording name the quota alone
    (_gemini("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", None, "generate_content_free_tier_requests"),
     [NamedQuota(dimension="requests", per="minute", limit=None)]),
    (AZURE, [NamedQuota(dimension="tokens", per="minute", limit=None)]),
    # nothing: a vLLM gateway's bare 429, an unset LiteLLM limit
    (b'{"object": "error", "message": "Too many requests", "code": 429}', []),
    (b'{"error": {"message": "current rpm: 1, rpm limit: 9223372036854775807"}}', []),
])
def test_each_providers_words_name_the_quota(body, named):
    assert named_quotas(body) == named


def test_the_limit_fills_what_the_headers_left_out_and_what_was_left():
    info = RateLimitInfo(retry_after_s=1.0)
    fill_from_refusal(info, named_quotas(OPENAI_TPM))
    # 30,000 a minute, of which 29,937 used: 63 left
    assert (info.limit_tokens, info.remaining_tokens, info.limit_requests) == (30000, 63, None)
    assert info.named_quota == "30,000 tokens per minute"
    # no "used": the quota just refused a call, so nothing is counted as left
    info = RateLimitInfo()
    fill_from_refusal(info, named_quotas(GEMINI_TOKENS))
    assert (info.limit_tokens, info.remaining_tokens, info.named_quota) == (16000, 0, "16,000 input tokens per minute")
    # LiteLLM names both limits: each dimension takes its own (15 - 1 requests left; 12,260 used of 5,000)
    info = RateLimitInfo()
    fill_from_refusal(info, named_quotas(LITELLM))
    assert (info.limit_requests, info.remaining_requests, info.limit_tokens, info.remaining_tokens) == (15, 14, 5000, 0)


def test_headers_win_and_a_daily_quota_paces_nothing():
    info = RateLimitInfo(limit_tokens=90000, remaining_tokens=1200)
    fill_from_refusal(info, named_quotas(OPENAI_TPM))
    assert (info.limit_tokens, info.remaining_tokens, info.named_quota) == (90000, 1200, None)
    info = RateLimitInfo()
    fill_from_refusal(info, named_quotas(GROQ_DAILY))
    assert (info.limit_tokens, info.limit_requests, info.named_quota) == (None, None, None)


def test_a_refusal_no_wait_passes_is_a_fault_not_a_rate_limit():
    assert refusal_fault(named_quotas(OPENAI_TPM)) is None
    kind, why = refusal_fault(named_quotas(OPENAI_TOO_LARGE))
    assert kind == "over_quota" and "31,538 tokens" in why and "30,000 a minute" in why
    daily = OPENAI_TOO_LARGE.replace(b"per min (TPM): Limit 30000", b"per day (TPD): Limit 30000")
    assert refusal_fault(named_quotas(daily)) == ("over_quota", "the call needs 31,538 tokens and the quota "
                                                                "allows 30,000 a day in all")
    zero = _gemini("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "0", "generate_content_free_tier_requests")
    assert refusal_fault(named_quotas(zero))[0] == "no_quota"
    # as the backends classify them: the call's own fault, the endpoint's, and a rate limit with its quota
    too_large = status_error(429, OPENAI_TOO_LARGE, "http://judge.test/v1", RateLimitInfo())
    assert isinstance(too_large, FatalError) and too_large.kind == "over_quota" and not too_large.endpoint_fault
    no_access = status_error(429, zero, "http://judge.test/v1", RateLimitInfo())
    assert isinstance(no_access, FatalError) and no_access.endpoint_fault
    limited = status_error(429, GEMINI_TOKENS, "http://judge.test/v1", RateLimitInfo())
    assert isinstance(limited, RateLimited) and limited.limits is not None
    assert (limited.limits.limit_tokens, limited.limits.retry_after_s) == (16000, 28.0)


def test_a_spent_gemini_daily_quota_waits_for_midnight_in_mountain_view():
    body = _gemini("GenerateRequestsPerDayPerProjectPerModel-FreeTier", None, "generate_content_free_tier_requests")
    # 2026-12-05 06:00 UTC is 22:00 PST on the 4th: two hours to midnight Pacific
    now = datetime(2026, 12, 5, 6, 0, tzinfo=timezone.utc)
    assert daily_quota_spent(named_quotas(body), now) == ("requests per day", 2 * 3600)
    # in summer (PDT, UTC-7) 06:30 UTC is 23:30 the day before: half an hour
    assert seconds_to_pacific_midnight(datetime(2026, 7, 1, 6, 30, tzinfo=timezone.utc)) == 1800
    # OpenAI's daily quotas say when in their "try again in" hint: nothing to add
    assert daily_quota_spent(named_quotas(GROQ_DAILY), now) is None
    limited = status_error(429, body, "http://judge.test/v1", RateLimitInfo())
    assert isinstance(limited, RateLimited) and limited.limits is not None
    assert limited.limits.spent_daily == "requests per day" and limited.limits.retry_after_s > 20  # not the retryDelay


def test_an_account_out_of_credit_is_told_from_a_rate_limit_worded_alike():
    # OpenAI (ChatGPTNextWeb/NextChat#3123): the type says it is the account, not a rate
    no_credit = (b'{"error": {"message": "You exceeded your current quota, please check your plan and billing details.",'
                 b' "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}')
    assert classify_status(429, no_credit) == ("no_credit", None)
    err = status_error(429, no_credit, "http://judge.test/v1", RateLimitInfo())
    assert isinstance(err, FatalError) and err.endpoint_fault
    # Gemini says "You exceeded your current quota" of a per-minute quota too: a rate limit
    assert classify_status(429, GEMINI_TOKENS) == ("rate_limit", None)
    # 402 Payment Required (DeepSeek's "Insufficient Balance")
    assert classify_status(402, b'{"error": {"message": "Insufficient Balance"}}') == ("no_credit", None)


def test_gemini_quota_passed_on_inside_a_gateways_message_is_still_read():
    # LiteLLM's proxy passes Vertex/Gemini's body on as text after its own prefix
    inner = GEMINI_TOKENS.decode()[1:-1]  # the error object, out of its list
    body = orjson.dumps({"error": {"message": f"litellm.RateLimitError: VertexAIException - {inner}", "code": "429"}})
    assert named_quotas(body) == [NamedQuota(dimension="input_tokens", per="minute", limit=16000)]


def test_a_body_naming_one_quota_without_its_figure_names_the_binding_dimension():
    info = RateLimitInfo()
    fill_from_refusal(info, named_quotas(AZURE))
    assert (info.limit_tokens, info.named_quota, info.binding_named) == (None, None, "tokens")
    info = RateLimitInfo()
    fill_from_refusal(info, named_quotas(AZURE.replace(b"token rate limit", b"call rate limit")))
    assert info.binding_named == "requests"
    # Gemini naming both a request and a token quota at once: no one dimension
    both = orjson.loads(GEMINI_TOKENS)
    both[0]["error"]["details"][0]["violations"].append(
        {"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "quotaValue": "10"})
    info = RateLimitInfo()
    fill_from_refusal(info, named_quotas(orjson.dumps(both)))
    assert info.binding_named is None and (info.limit_requests, info.limit_tokens) == (10, 16000)


# Azure API Management's spent quota, as its users quote it (MicrosoftDocs/azure-docs#16282,
# goferito/node-bing-api#34): a 403, not a 429
APIM_403 = b'{ "statusCode": 403, "message": "Out of call volume quota. Quota will be replenished in 22.14:18:12." }'


def test_api_managements_403_of_a_spent_quota_is_the_quota_not_the_key():
    # 22 days 14:18:12 = (22 x 24 + 14) x 3600 + 18 x 60 + 12 s
    assert quota_replenished_in(APIM_403) == (22 * 24 + 14) * 3600 + 18 * 60 + 12
    assert quota_replenished_in(b"Out of call volume quota. Quota will be replenished in 00:00:55") == 55
    err = status_error(403, APIM_403, "http://apim.test/v1", RateLimitInfo())
    assert isinstance(err, RateLimited) and err.limits is not None
    assert err.limits.retry_after_s == (22 * 24 + 14) * 3600 + 18 * 60 + 12 and "a quota, not the key" in str(err)
    # a Retry-After the gateway sent wins over the prose
    told = status_error(403, APIM_403, "http://apim.test/v1", RateLimitInfo(retry_after_s=60.0))
    assert told.limits is not None and told.limits.retry_after_s == 60.0
    # a 403 of a refused key is one still
    key = (b'{ "statusCode": 401, "message": "Access denied due to invalid subscription key. Make sure to provide a '
           b'valid key for an active subscription." }')
    assert quota_replenished_in(key) is None
    assert isinstance(status_error(403, key, "http://apim.test/v1", RateLimitInfo()), FatalError)


# OpenRouter's free models (Gitlawb/openclaude#936, #1549; its limits page: 20 a minute). #936's
# body as quoted, its reset (cut from the quote) a midnight UTC in epoch milliseconds, as
# OpenRouter sends it: 1741305600000 is 2025-03-07 00:00 UTC.
OPENROUTER_DAY = (b'{"error": {"message": "Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free '
                  b'model requests per day", "code": 429, "metadata": {"headers": {"X-RateLimit-Limit": "50", '
                  b'"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1741305600000"}, "provider_name": null}}}')
OPENROUTER_DAY_BARE = (b'{"error":{"message":"Rate limit exceeded: free-models-per-day-high-balance.",'
                       b'"type":"rate_limit_error","code":"429"}}')
OPENROUTER_MINUTE = b'{"error": {"code": 429, "message": "Rate limit exceeded: free-models-per-min."}}'


def test_openrouters_free_day_comes_back_when_its_refusal_says_or_at_midnight_utc():
    evening = datetime(2025, 3, 6, 21, 30, tzinfo=timezone.utc)
    (day,) = named_quotas(OPENROUTER_DAY)
    assert (day.dimension, day.per, day.limit, day.resets_at) == ("requests", "day", 50.0, 1741305600.0)
    assert daily_quota_spent([day], evening) == ("50 requests per day", 2.5 * 3600)  # 21:30 to midnight
    # no metadata: midnight UTC all the same
    assert daily_quota_spent(named_quotas(OPENROUTER_DAY_BARE), evening) == ("requests per day", 2.5 * 3600)
    err = status_error(429, OPENROUTER_DAY_BARE, "https://openrouter.ai/api/v1", RateLimitInfo())
    assert isinstance(err, RateLimited) and err.limits is not None and err.limits.spent_daily == "requests per day"
    assert err.limits.retry_after_s is not None and 0 < err.limits.retry_after_s <= 86_400


def test_openrouters_free_minute_paces_at_its_twenty_requests():
    (minute,) = named_quotas(OPENROUTER_MINUTE)
    assert minute.paces and minute.limit == 20.0
    info = RateLimitInfo()
    fill_from_refusal(info, [minute])
    assert (info.limit_requests, info.remaining_requests, info.named_quota) == (20.0, 0.0, "20 requests per minute")
    # a request "temporarily rate-limited upstream" names no quota of OpenRouter's
    upstream = b'{"error": {"message": "google/gemma-3-4b-it:free is temporarily rate-limited upstream."}}'
    assert named_quotas(upstream) == []
