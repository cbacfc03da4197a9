"""Reading what an OpenAI-compatible server says about its quota."""
from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping

from drscore.engine.runtime.calls.judging import RateLimitInfo

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(value: str | None) -> float | None:
    """``"6m0s"`` -> 360.0, ``"250ms"`` -> 0.25, ``"1.5"`` -> 1.5 (seconds)."""
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


# OpenAI's daily-limit 429s say when to come back only in prose: "Please try again in
# 23h59m12.5s." (also "in 20s", "in 120ms").
_TRY_AGAIN = re.compile(r"(?:try again|retry) in\s+((?:\d+(?:\.\d+)?\s*(?:ms|h|m|s)\s*)+)", re.IGNORECASE)


# Gemini says it only in the body: details [{"@type": ".../google.rpc.RetryInfo", "retryDelay": "24s"}].
_RETRY_DELAY = re.compile(r'"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"')


def retry_after_from_text(text: str) -> float | None:
    """Seconds from a "try again in 23h59m12s" phrase or a ``retryDelay`` in an error body, if any."""
    m = _TRY_AGAIN.search(text or "")
    if m:
        return parse_duration(m.group(1).replace(" ", ""))
    d = _RETRY_DELAY.search(text or "")
    return float(d.group(1)) if d else None


def _retry_after(value: str | None) -> float | None:
    """``Retry-After``: delta-seconds, or an HTTP date (seconds from now)."""
    seconds = _float(value)
    if seconds is not None or not value:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def parse_rate_limit_headers(headers: Mapping[str, str]) -> RateLimitInfo:
    """``retry-after-ms`` wins over ``Retry-After`` (seconds or an HTTP date).
    ``headers`` may be a case-insensitive mapping (aiohttp, httpx) or a plain dict."""
    h = headers if hasattr(headers, "getall") or hasattr(headers, "get_list") else \
        {k.lower(): v for k, v in headers.items()}
    # Anthropic announces its quota in its own headers (anthropic-ratelimit-*, per minute).
    limit_requests = _float(h.get("x-ratelimit-limit-requests")) or _float(h.get("anthropic-ratelimit-requests-limit"))
    limit_tokens = _float(h.get("x-ratelimit-limit-tokens")) or _float(h.get("anthropic-ratelimit-tokens-limit"))
    remaining_requests = _float(h.get("x-ratelimit-remaining-requests"))
    if remaining_requests is None:
        remaining_requests = _float(h.get("anthropic-ratelimit-requests-remaining"))
    remaining_tokens = _float(h.get("x-ratelimit-remaining-tokens"))
    if remaining_tokens is None:
        remaining_tokens = _float(h.get("anthropic-ratelimit-tokens-remaining"))
    retry = _float(h.get("retry-after-ms"))
    retry_s = retry / 1000.0 if retry is not None else _retry_after(h.get("retry-after"))
    return RateLimitInfo(
        retry_after_s=retry_s,
        limit_requests=limit_requests,
        limit_tokens=limit_tokens,
        remaining_requests=remaining_requests,
        remaining_tokens=remaining_tokens,
        reset_requests_s=parse_duration(h.get("x-ratelimit-reset-requests")),
        reset_tokens_s=parse_duration(h.get("x-ratelimit-reset-tokens")),
    )
