"""Delay hints a server may send that cannot be believed: each parses to a finite bounded
value or to nothing, and says what it was (for the run's note)."""
from __future__ import annotations

import math
import time

import pytest

from drscore.engine.runtime.calls.judging import HINT_CEILING_S
from drscore.judge.ratelimit_headers import parse_rate_limit_headers, retry_hint_from_text, usable_delay

DIGITS = "9" * 5000  # float() reads it as inf

HOSTILE = ["inf", "-inf", "Infinity", "nan", "NaN", "1e309", DIGITS, "-5", "-0.5",
           "Fri, 31 Dec 9999 23:59:59 GMT", "soon", f"{HINT_CEILING_S + 1:.0f}"]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_retry_after_is_dropped_and_named(value):
    info = parse_rate_limit_headers({"Retry-After": value})
    assert info.retry_after_s is None
    assert info.unusable_hint is not None and info.unusable_hint.startswith("Retry-After: ")
    assert len(info.unusable_hint) <= len("Retry-After: ") + 41  # 5,000 digits are shortened


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_reset_headers_and_ms_are_dropped(value):
    ms = f"{(HINT_CEILING_S + 1) * 1000:.0f}" if value == HOSTILE[-1] else value
    info = parse_rate_limit_headers({"x-ratelimit-reset-requests": value, "x-ratelimit-reset-tokens": value,
                                     "retry-after-ms": ms})
    assert info.reset_requests_s is None and info.reset_tokens_s is None and info.retry_after_s is None
    assert info.unusable_hint is not None
    assert {"retry-after-ms", "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"} == \
        {part.split(":")[0] for part in info.unusable_hint.split("; ")}


def test_believable_hints_are_kept_and_a_usable_one_hides_an_unusable_one():
    assert parse_rate_limit_headers({"Retry-After": "0"}).retry_after_s == 0.0
    assert parse_rate_limit_headers({"Retry-After": "Mon, 01 Jan 1990 00:00:00 GMT"}).retry_after_s == 0.0  # past
    info = parse_rate_limit_headers({"retry-after-ms": "nan", "Retry-After": "7"})
    assert info.retry_after_s == 7.0 and info.unusable_hint is None
    info = parse_rate_limit_headers({"Retry-After": "inf", "x-ratelimit-reset-requests": "6m0s"})
    assert info.retry_after_s is None and info.reset_requests_s == 360.0 and info.unusable_hint is None
    assert parse_rate_limit_headers({"Retry-After": f"{HINT_CEILING_S:.0f}"}).retry_after_s == HINT_CEILING_S


def test_hostile_quota_figures_are_as_if_not_sent():
    info = parse_rate_limit_headers({"x-ratelimit-limit-requests": "inf", "x-ratelimit-remaining-requests": "nan",
                                     "x-ratelimit-limit-tokens": "-100", "x-ratelimit-remaining-tokens": DIGITS})
    assert (info.limit_requests, info.remaining_requests, info.limit_tokens, info.remaining_tokens) == \
        (None, None, None, None)


@pytest.mark.parametrize("delay", ["inf", "nan", DIGITS, "-5", "1e309"])
def test_gemini_retry_delay_in_the_body(delay):
    body = '{"error": {"code": 429, "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", ' \
           f'"retryDelay": "{delay}s"}}]}}}}'
    seconds, bad = retry_hint_from_text(body)
    assert seconds is None and bad is not None and bad.startswith("retryDelay: ")
    assert retry_hint_from_text('{"retryDelay": "24s"}') == (24.0, None)


def test_try_again_prose_with_too_many_digits():
    seconds, bad = retry_hint_from_text(f"Please try again in {DIGITS}s.")
    assert seconds is None and bad is not None and bad.startswith("try again in: 999")
    assert retry_hint_from_text("Please try again in 20s.") == (20.0, None)
    assert retry_hint_from_text("Rate limit reached.") == (None, None)


def test_usable_delay_bounds():
    assert usable_delay(0.0) and usable_delay(HINT_CEILING_S)
    assert not any(usable_delay(x) for x in (None, -0.001, math.inf, -math.inf, math.nan, HINT_CEILING_S + 1))


def test_a_bare_x_ratelimit_reset_says_when_in_seconds_or_epoch_time():
    # OpenRouter's 429: epoch milliseconds; Envoy's draft headers: the seconds left
    in_five = parse_rate_limit_headers({"X-RateLimit-Reset": str(int((time.time() + 5) * 1000))})
    assert in_five.retry_after_s is not None and 3.5 < in_five.retry_after_s <= 5.0
    assert parse_rate_limit_headers({"x-ratelimit-reset": "3045"}).retry_after_s == 3045.0
    epoch_s = parse_rate_limit_headers({"x-ratelimit-reset": str(int(time.time()) + 60)}).retry_after_s
    assert epoch_s is not None and 58 < epoch_s <= 60
    # a time already past is now, not an unusable hint; a Retry-After wins over it
    assert parse_rate_limit_headers({"x-ratelimit-reset": "1741305600000"}).retry_after_s == 0.0
    assert parse_rate_limit_headers({"x-ratelimit-reset": "3045", "retry-after": "7"}).retry_after_s == 7.0


# Anthropic's quota headers as a real answer carried them (a tier-2 account's, recorded in a
# public test fixture): its input and output token limits apart, and a tokens pair their sum.
ANTHROPIC_ANSWER = {
    "anthropic-ratelimit-input-tokens-limit": "80000", "anthropic-ratelimit-input-tokens-remaining": "80000",
    "anthropic-ratelimit-input-tokens-reset": "2025-08-21T12:40:59Z",
    "anthropic-ratelimit-output-tokens-limit": "16000", "anthropic-ratelimit-output-tokens-remaining": "16000",
    "anthropic-ratelimit-output-tokens-reset": "2025-08-21T12:41:00Z",
    "anthropic-ratelimit-requests-limit": "1000", "anthropic-ratelimit-requests-remaining": "999",
    "anthropic-ratelimit-requests-reset": "2025-08-21T12:40:59Z",
    "anthropic-ratelimit-tokens-limit": "96000", "anthropic-ratelimit-tokens-remaining": "96000",
    "anthropic-ratelimit-tokens-reset": "2025-08-21T12:40:59Z",
}


def test_anthropics_input_quota_is_the_token_quota_and_its_output_quota_comes_apart():
    # The sum (96,000) paced as one quota lets the prompts alone reach 96,000 a minute, 20% over
    # the 80,000 the input limit allows.
    info = parse_rate_limit_headers(ANTHROPIC_ANSWER)
    # its token counts left are rounded to the thousand: each may stand for 500 fewer
    assert (info.limit_tokens, info.remaining_tokens, info.tokens_are_input) == (80_000, 79_500, True)
    assert (info.limit_output_tokens, info.remaining_output_tokens) == (16_000, 15_500)
    assert (info.limit_requests, info.remaining_requests) == (1_000, 999)  # requests are exact
    # its resets are RFC 3339 times to the second: long past here, so the buckets are whole now
    assert (info.reset_tokens_s, info.reset_requests_s) == (0.0, 0.0)


def test_anthropics_resets_are_seconds_from_now_and_an_unreadable_one_is_named():
    import datetime as dt

    soon = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    info = parse_rate_limit_headers({**ANTHROPIC_ANSWER, "anthropic-ratelimit-input-tokens-reset": soon,
                                     "anthropic-ratelimit-requests-reset": "tomorrow"})
    assert info.reset_tokens_s is not None and 28.0 <= info.reset_tokens_s <= 30.0  # to the second
    # times, so they count from the answer's arrival, not from the call's admission as the counts do
    assert info.resets_are_times and not parse_rate_limit_headers({"x-ratelimit-reset-tokens": "30s"}).resets_are_times
    assert info.reset_requests_s is None
    info = parse_rate_limit_headers({**ANTHROPIC_ANSWER, "anthropic-ratelimit-input-tokens-reset": "soon",
                                     "anthropic-ratelimit-requests-reset": "tomorrow"})
    assert (info.reset_tokens_s, info.reset_requests_s) == (None, None)
    assert info.unusable_hint == ("anthropic-ratelimit-requests-reset: tomorrow; "
                                  "anthropic-ratelimit-input-tokens-reset: soon")
    # an exact count (not whole thousands) is taken as it is
    info = parse_rate_limit_headers({**ANTHROPIC_ANSWER, "anthropic-ratelimit-input-tokens-remaining": "41234"})
    assert info.remaining_tokens == 41_234


def test_the_tokens_pair_alone_is_still_one_quota_and_openai_headers_win():
    only_sum = {k: v for k, v in ANTHROPIC_ANSWER.items() if "put-tokens" not in k}
    info = parse_rate_limit_headers(only_sum)
    assert (info.limit_tokens, info.remaining_tokens, info.tokens_are_input, info.limit_output_tokens) \
        == (96_000, 95_500, False, None)
    # a gateway passing Anthropic's headers through beside its own OpenAI-style ones: those pace
    both = {**ANTHROPIC_ANSWER, "x-ratelimit-limit-tokens": "50000", "x-ratelimit-remaining-tokens": "40000"}
    info = parse_rate_limit_headers(both)
    assert (info.limit_tokens, info.remaining_tokens, info.tokens_are_input) == (50_000, 40_000, False)
