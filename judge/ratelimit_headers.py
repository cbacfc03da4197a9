"""Reading what an OpenAI-compatible server says about its quota."""
from __future__ import annotations

import datetime
import email.utils
import math
import re
import time
from collections.abc import Callable, Mapping

import msgspec

from drscore.engine.runtime.calls.judging import HINT_CEILING_S, RateLimitInfo
from drscore.judge.gateway_quota import read_gateway_quota

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(value: str | None) -> float | None:
    """``"6m0s"`` -> 360.0, ``"250ms"`` -> 0.25, ``"1.5"`` -> 1.5 (seconds). May be
    anything ``float`` reads (``inf``, ``nan``, negative): :func:`usable_delay` judges it."""
    if not value:
        return None
    value = value.strip()
    try:
        return float(value)
    except ValueError:
        pass
    total, matched = 0.0, False
    for num, unit in _PART.findall(value):
        matched = True
        total += float(num) * {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[unit]
    return total if matched else None


def usable_delay(seconds: float | None) -> bool:
    """A delay hint worth believing: a finite number of seconds from 0 to
    :data:`HINT_CEILING_S`. ``inf``, ``nan``, 5,000 digits (``float`` reads them as inf),
    a negative delay or a date centuries away are not."""
    return seconds is not None and math.isfinite(seconds) and 0.0 <= seconds <= HINT_CEILING_S


def _shown(name: str, raw: str) -> str:
    """``Retry-After: inf`` for a note, the value shortened (a hostile one may be 5,000 digits)."""
    raw = " ".join(raw.split())
    return f"{name}: {raw[:40]}…" if len(raw) > 40 else f"{name}: {raw}"


# OpenAI's daily-limit 429s say when to come back only in prose: "Please try again in
# 23h59m12.5s." (also "in 20s", "in 120ms").
_TRY_AGAIN = re.compile(r"(?:try again|retry) in\s+((?:\d+(?:\.\d+)?\s*(?:ms|h|m|s)\s*)+)", re.IGNORECASE)


# Gemini says it only in the body: details [{"@type": ".../google.rpc.RetryInfo", "retryDelay": "24s"}].
_RETRY_DELAY = re.compile(r'"retryDelay"\s*:\s*"([^"]{0,6000})"')


def retry_after_from_text(text: str) -> float | None:
    """Seconds from a "try again in 23h59m12s" phrase or a ``retryDelay`` in an error body,
    if any and usable (see :func:`retry_hint_from_text`)."""
    seconds, _ = retry_hint_from_text(text)
    return seconds


def retry_hint_from_text(text: str) -> tuple[float | None, str | None]:
    """``(seconds, unusable)`` from a "try again in 23h59m12s" phrase or a Gemini
    ``retryDelay`` in an error body: the delay when usable, else what was said that could
    not be believed (for a note), or ``(None, None)`` when nothing was said."""
    m = _TRY_AGAIN.search(text or "")
    if m:
        seconds = parse_duration(m.group(1).replace(" ", ""))
        if usable_delay(seconds):
            return seconds, None
        return None, _shown("try again in", m.group(1))
    d = _RETRY_DELAY.search(text or "")
    if d is None:
        return None, None
    raw = d.group(1).strip()
    seconds = parse_duration(raw[:-1]) if raw.endswith("s") and not raw.endswith("ms") else parse_duration(raw)
    if usable_delay(seconds):
        return seconds, None
    return None, _shown("retryDelay", raw)


def _retry_after(value: str | None) -> float | None:
    """``Retry-After``: delta-seconds, or an HTTP date (seconds from now; 0 when past).
    None when it is neither (garbage, a date no calendar has)."""
    seconds = _float(value)
    if seconds is not None or not value:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _bare_reset(value: str | None) -> float | None:
    """A bare ``X-RateLimit-Reset``: OpenRouter's is epoch milliseconds (its 429s), a few APIs
    give epoch seconds, Envoy's draft headers the seconds left. Told apart by size: no delay
    a client waits on is 30 years of seconds."""
    x = _float(value)
    if x is None or not math.isfinite(x):
        return x
    if x > 1e11:
        return max(0.0, x / 1000 - time.time())  # a time past (clocks apart): now, as a past HTTP date
    if x > 1e9:
        return max(0.0, x - time.time())
    return x


def _until(value: str | None) -> float | None:
    """Seconds from now to an RFC 3339 time (``2025-08-21T12:40:59Z``; 0 when past), None when
    it is none."""
    if not value:
        return None
    try:
        when = datetime.datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _count(value: str | None) -> float | None:
    """A quota figure (limit, remaining): finite and >= 0, else as if not sent."""
    x = _float(value)
    return x if x is not None and math.isfinite(x) and x >= 0 else None


def _hint(h: Mapping[str, str], name: str, parse: Callable[[str | None], float | None],
          scale: float = 1.0) -> tuple[float | None, str | None]:
    """``(seconds, unusable)`` of the delay header ``name``: the value when usable, else
    how it read (for a note); ``(None, None)`` when the header is absent."""
    raw = h.get(name.lower())
    if raw is None:
        return None, None
    seconds = parse(raw)
    if seconds is not None:
        seconds *= scale
    if usable_delay(seconds):
        return seconds, None
    return None, _shown(name, raw)


def parse_rate_limit_headers(headers: Mapping[str, str], gateway_window_s: float | None = None) -> RateLimitInfo:
    """``retry-after-ms`` wins over ``Retry-After`` (seconds or an HTTP date).
    ``headers`` may be a case-insensitive mapping (aiohttp, httpx) or a plain dict.
    ``gateway_window_s``: the longest window an AI gateway's earlier answers implied
    (:func:`judge.gateway_quota.read_gateway_quota`)."""
    h = headers if hasattr(headers, "getall") or hasattr(headers, "get_list") else \
        {k.lower(): v for k, v in headers.items()}
    # Anthropic announces its quota in its own headers (anthropic-ratelimit-*, per minute).
    limit_requests = _count(h.get("x-ratelimit-limit-requests")) or _count(h.get("anthropic-ratelimit-requests-limit"))
    limit_tokens = _count(h.get("x-ratelimit-limit-tokens")) or _count(h.get("anthropic-ratelimit-tokens-limit"))
    remaining_requests = _count(h.get("x-ratelimit-remaining-requests"))
    if remaining_requests is None:
        remaining_requests = _count(h.get("anthropic-ratelimit-requests-remaining"))
    remaining_tokens = _count(h.get("x-ratelimit-remaining-tokens"))
    if remaining_tokens is None:
        remaining_tokens = _thousands(_count(h.get("anthropic-ratelimit-tokens-remaining")))
    # Anthropic limits input and output tokens apart, and its tokens-* figures are their sum
    # (recorded answers: 80,000 + 16,000 = 96,000): paced as one quota, the prompts alone
    # would overrun the input limit by the output's share of the sum. So its input quota is
    # the token quota, and its output quota comes apart.
    split = None if _count(h.get("x-ratelimit-limit-tokens")) else _split_quota(h)
    if split is not None:
        limit_tokens, remaining_tokens = split[0], split[1]
    # A hint drscore cannot believe (inf, nan, negative, centuries) is dropped and named in
    # ``unusable_hint``: the pool then waits its --max-rate-limit-wait bound instead.
    unusable: list[str] = []
    retry_s = None
    for name, parse, scale in (("retry-after-ms", _float, 0.001), ("Retry-After", _retry_after, 1.0)):
        retry_s, bad = _hint(h, name, parse, scale)
        if bad:
            unusable.append(bad)
        if retry_s is not None:
            break
    reset_requests, bad_requests = _hint(h, "x-ratelimit-reset-requests", parse_duration)
    reset_tokens, bad_tokens = _hint(h, "x-ratelimit-reset-tokens", parse_duration)
    grain = 0.0
    if reset_requests is None and bad_requests is None:
        # Anthropic's: when the bucket is whole again, an RFC 3339 time to the second
        reset_requests, bad_requests = _hint(h, "anthropic-ratelimit-requests-reset", _until)
        grain = 1.0 if reset_requests is not None else 0.0
    if reset_tokens is None and bad_tokens is None:
        name = "anthropic-ratelimit-input-tokens-reset" if split is not None else "anthropic-ratelimit-tokens-reset"
        reset_tokens, bad_tokens = _hint(h, name, _until)
        grain = 1.0 if reset_tokens is not None else grain
    unusable += [b for b in (bad_requests, bad_tokens) if b]
    if retry_s is None and reset_requests is None and reset_tokens is None:
        # no Retry-After and no OpenAI-style resets: a bare X-RateLimit-Reset says when
        # (OpenRouter's 429s; Envoy's); what the quota is, it does not say
        retry_s, bad = _hint(h, "x-ratelimit-reset", _bare_reset)
        if bad:
            unusable.append(bad)
    if retry_s is not None or reset_requests is not None or reset_tokens is not None:
        unusable = []  # another hint says when: the unusable one changes nothing
    gateway = read_gateway_quota(h, gateway_window_s)
    if gateway is not None:
        paces: list[str] = []
        # A gateway's own limit, where it binds tighter than the upstream's headers it passed
        # through (LiteLLM's), replaces them; their remaining counts are of the upstream's quota
        if gateway.tokens_per_minute and (limit_tokens is None or gateway.tokens_per_minute < limit_tokens):
            limit_tokens, remaining_tokens, reset_tokens = gateway.tokens_per_minute, None, None
            paces.append("tokens")
        if gateway.requests_per_minute and (limit_requests is None or gateway.requests_per_minute < limit_requests):
            limit_requests, remaining_requests, reset_requests = gateway.requests_per_minute, None, None
            paces.append("requests")
        gateway = msgspec.structs.replace(gateway, paces=tuple(paces), window_s=gateway.window_s if paces else None)
    return RateLimitInfo(
        retry_after_s=retry_s,
        limit_requests=limit_requests,
        limit_tokens=limit_tokens,
        remaining_requests=remaining_requests,
        remaining_tokens=remaining_tokens,
        reset_requests_s=reset_requests,
        reset_tokens_s=reset_tokens,
        reset_grain_s=grain,
        resets_are_times=grain > 0,
        unusable_hint="; ".join(unusable) or None,
        gateway=gateway,
        tokens_are_input=split is not None and not (gateway is not None and "tokens" in gateway.paces),
        limit_output_tokens=split[2] if split is not None else None,
        remaining_output_tokens=split[3] if split is not None else None,
    )


def _split_quota(h: Mapping[str, str]) -> tuple[float, float | None, float | None, float | None] | None:
    """``(input limit, input remaining, output limit, output remaining)`` where Anthropic
    stated its input-token quota (``anthropic-ratelimit-input-tokens-*``); None otherwise."""
    limit = _count(h.get("anthropic-ratelimit-input-tokens-limit"))
    if not limit:
        return None
    return (limit, _thousands(_count(h.get("anthropic-ratelimit-input-tokens-remaining"))),
            _count(h.get("anthropic-ratelimit-output-tokens-limit")) or None,
            _thousands(_count(h.get("anthropic-ratelimit-output-tokens-remaining"))))


# Anthropic's token counts left come in whole thousands (every recorded one does; its documents
# say rounded to the nearest thousand): one may stand for up to 500 fewer.
ROUNDED_BY = 500.0


def _thousands(remaining: float | None) -> float | None:
    """What a remaining count of Anthropic's guarantees: a whole-thousands one, 500 less."""
    if remaining is None or remaining < 1000 or remaining % 1000:
        return remaining
    return remaining - ROUNDED_BY


class QuotaHeaders:
    """Reads one endpoint's quota headers, answer after answer: APISIX states no window, so the
    longest Reset its answers said stands for it (judge.gateway_quota.read_gateway_quota)."""

    def __init__(self) -> None:
        self.gateway_window_s: float | None = None

    def read(self, headers: Mapping[str, str]) -> RateLimitInfo:
        info = parse_rate_limit_headers(headers, self.gateway_window_s)
        reset = info.gateway.reset_s if info.gateway is not None else None
        if reset is not None and reset > (self.gateway_window_s or 0.0):
            self.gateway_window_s = reset
        return info
