"""What a 429's body says about the quota that refused the call.

Several providers name the quota in the refusal itself, where a client without quota headers
otherwise learns it from the 429s' timing alone (``RateLimiter``'s learner):

* OpenAI and Groq (and the gateways that pass their bodies on): "Rate limit reached for MODEL
  in organization ORG on tokens per min (TPM): Limit 30000, Used 29937, Requested 385."; a
  call larger than the whole quota gets "Request too large for MODEL ... on tokens per min
  (TPM): Limit 30000, Requested 36055", and is refused however long it waits.
* Anthropic: "This request would exceed the rate limit for your organization (ID) of 30,000
  input tokens per minute".
* Gemini, which sends no quota headers: a ``google.rpc.QuotaFailure`` detail whose violations
  carry a ``quotaId`` (``GenerateContentInputTokensPerModelPerMinute-FreeTier``,
  ``GenerateRequestsPerDayPerProjectPerModel-FreeTier``) and, often, the ``quotaValue``. A
  value of 0 means the key has no quota for the model at all; a daily quota comes back at
  midnight Pacific (its rate-limit guide), not after the ``retryDelay`` beside it.
* Azure OpenAI names the quota but not its figure: "have exceeded token rate limit of your
  current OpenAI S0 pricing tier" (or "call rate limit"): a pace learned from the 429s keeps to
  that dimension.
* LiteLLM's proxy: "Crossed TPM / RPM / Max Parallel Request Limit. current rpm: 1, rpm limit:
  15, current tpm: 12260, tpm limit: 5000, ..." (an unset limit shows as 2^63 - 1).
* OpenRouter's free models: "Rate limit exceeded: free-models-per-min." (20 requests a minute,
  its limits page) and "Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000
  free model requests per day", often with ``metadata.headers`` holding ``X-RateLimit-Limit``
  and ``X-RateLimit-Reset`` (epoch milliseconds: the next midnight UTC). Read as a momentary
  429, the spent day was retried into every item.

The wording is each provider's, taken from its users' bug reports; a body in none of these
shapes names nothing, and the 429 is read as before.

Azure API Management refuses a call past a quota over a period (its ``quota``, ``quota-by-key``
and ``llm-token-limit`` policies' ``token-quota``) with a **403**, not a 429: ``{"statusCode":
403, "message": "Out of call volume quota. Quota will be replenished in 5.03:23:11"}`` (.NET's
days.hours:minutes:seconds). Read as a refused key, it stopped the run asking to check the API
key; :func:`quota_replenished_in` reads it as the quota it is.
"""
from __future__ import annotations

import json
import math
import re
from datetime import datetime, time, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
import orjson

from drscore.engine.runtime.calls.judging import RateLimitInfo

_JSON = json.JSONDecoder()
_N = r"\d{1,3}(?:,\d{3})+|\d+"  # 30000 or 1,000,000 (not the comma after it)
# A limit larger than this is a gateway's "no limit" (LiteLLM's 2^63 - 1), not a quota
_UNSET = 1e15

_OPENAI = re.compile(
    rf"on (?P<what>(?:input |output )?tokens|requests) per (?P<per>min(?:ute)?|day)\b(?:\s*\([A-Z]{{2,4}}\))?[:.]?\s*"
    rf"Limit:?\s*(?P<limit>{_N})(?:\s*/\s*min)?(?:,\s*Used\s*(?P<used>{_N}))?(?:,\s*Requested\s*(?P<requested>{_N}))?",
    re.IGNORECASE)
_ANTHROPIC = re.compile(
    rf"rate limit(?: for your organization)?(?: \([^)]{{0,200}}\))? of (?P<limit>{_N}) "
    r"(?P<what>(?:input |output )?tokens|requests) per (?P<per>minute|day)", re.IGNORECASE)
# Azure OpenAI names the quota, not its figure: "have exceeded token rate limit of your current
# OpenAI S0 pricing tier", "exceeded the token rate limit for your current AIServices S0 pricing
# tier", "exceeded call rate limit"
_AZURE = re.compile(r"exceeded (?:the )?(?P<what>token|call) rate limit", re.IGNORECASE)
_LITELLM = re.compile(r"current (?P<what>rpm|tpm): (?P<used>-?\d+), (?:rpm|tpm) limit: (?P<limit>-?\d+)", re.IGNORECASE)
_OPENROUTER = re.compile(r"free-models-per-(?P<per>day|min)\b", re.IGNORECASE)
# OpenRouter's limits page: a free model variant (":free") takes 20 requests a minute
OPENROUTER_FREE_PER_MINUTE = 20.0


class NamedQuota(msgspec.Struct, frozen=True, kw_only=True):
    """One quota a refusal named. ``dimension``: ``requests``, ``tokens``, ``input_tokens`` or
    ``output_tokens``; ``per``: ``minute`` or ``day``; ``used`` and ``requested`` where said."""

    dimension: str
    per: str
    limit: float | None  # None: named without its figure (Gemini's violation without a value)
    used: float | None = None
    requested: float | None = None
    # when a daily quota comes back, where the provider documents it: Gemini's at midnight
    # Pacific ("pacific_midnight"), OpenRouter's at midnight UTC ("utc_midnight"); other
    # providers' refusals say when in their retry hint
    resets: str = ""
    resets_at: float | None = None  # the refusal said when (epoch seconds): wins over ``resets``

    @property
    def paces(self) -> bool:
        """A per-minute quota of requests or of the tokens a call is charged (the input alone
        is a lower bound of that charge, so pacing prompt and answer against it never
        overshoots); not a daily one, nor one of output tokens alone."""
        return self.limit is not None and self.per == "minute" and \
            self.dimension in ("requests", "tokens", "input_tokens")

    def describe(self) -> str:
        what = f"{self.dimension.replace('_', ' ')} per {self.per}"
        return what if self.limit is None else f"{_figure(self.limit)} {what}"


def _figure(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,}"


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        x = float(text.replace(",", ""))
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _dimension(words: str) -> str:
    words = words.lower().strip()
    return {"requests": "requests", "tokens": "tokens", "input tokens": "input_tokens",
            "output tokens": "output_tokens"}.get(words, "tokens")


def _violations(node: Any, depth: int = 0) -> list[dict[str, Any]]:
    """The dicts under ``node`` naming a quota (``quotaId`` or ``quotaMetric``), also inside a
    message string that is itself JSON (a proxy passing Gemini's body on as text)."""
    if depth > 8:
        return []
    if isinstance(node, dict):
        if "quotaId" in node or "quotaMetric" in node:
            return [node]
        return [v for x in node.values() for v in _violations(x, depth + 1)]
    if isinstance(node, list):
        return [v for x in node for v in _violations(x, depth + 1)]
    if isinstance(node, str) and "quota" in node and "{" in node:
        # the whole string, or JSON after a prefix ("litellm.RateLimitError: VertexAIException - {...}")
        try:
            inner, _ = _JSON.raw_decode(node, node.index("{"))
        except ValueError:
            return []
        return _violations(inner, depth + 1)
    return []


def _gemini(body: bytes) -> list[NamedQuota]:
    if b"quotaId" not in body and b"quotaMetric" not in body:
        return []
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return []
    out = []
    for v in _violations(parsed):
        name = f"{v.get('quotaId') or ''} {v.get('quotaMetric') or ''}".lower()
        value = v.get("quotaValue")
        limit = _number(str(value)) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None
        per = "day" if "perday" in name else "minute" if "perminute" in name else ""
        if not per:
            continue
        dimension = "requests" if "request" in name and "token" not in name else \
            "input_tokens" if "input" in name else "tokens"
        # its daily quotas come back at midnight Pacific (Gemini's rate-limit guide), whatever
        # the retryDelay beside says
        out.append(NamedQuota(dimension=dimension, per=per, limit=limit,
                              resets="pacific_midnight" if per == "day" else ""))
    return out


def _openrouter_said(body: bytes) -> dict[str, Any]:
    """The ``error.metadata.headers`` of an OpenRouter refusal (its quota's X-RateLimit-*), if any."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    error = parsed.get("error") if isinstance(parsed, dict) else None
    metadata = error.get("metadata") if isinstance(error, dict) else None
    said = metadata.get("headers") if isinstance(metadata, dict) else None
    return {str(k).lower(): v for k, v in said.items()} if isinstance(said, dict) else {}


def _openrouter(body: bytes, text: str) -> list[NamedQuota]:
    m = _OPENROUTER.search(text)
    if m is None:
        return []
    said = _openrouter_said(body)
    limit = _number(str(said.get("x-ratelimit-limit"))) if "x-ratelimit-limit" in said else None
    if m.group("per").lower() == "min":
        return [NamedQuota(dimension="requests", per="minute", limit=limit or OPENROUTER_FREE_PER_MINUTE)]
    reset_ms = _number(str(said.get("x-ratelimit-reset"))) if "x-ratelimit-reset" in said else None
    return [NamedQuota(dimension="requests", per="day", limit=limit, resets="utc_midnight",
                       resets_at=reset_ms / 1000 if reset_ms is not None and reset_ms > 1e11 else None)]


def named_quotas(body: bytes) -> list[NamedQuota]:
    """Every quota ``body`` (a 429's) names, in any of the shapes above: with its limit, or
    (a daily Gemini quota, which waits for its reset either way) without."""
    found = _gemini(body)
    text = body[:16_000].decode("utf-8", "replace")
    found += _openrouter(body, text)
    for m in _OPENAI.finditer(text):
        limit = _number(m.group("limit"))
        if limit is not None:
            found.append(NamedQuota(dimension=_dimension(m.group("what")),
                                    per="day" if m.group("per").lower() == "day" else "minute", limit=limit,
                                    used=_number(m.group("used")), requested=_number(m.group("requested"))))
    for m in _ANTHROPIC.finditer(text):
        limit = _number(m.group("limit"))
        if limit is not None:
            found.append(NamedQuota(dimension=_dimension(m.group("what")), per=m.group("per").lower(), limit=limit))
    for m in _AZURE.finditer(text):
        found.append(NamedQuota(dimension="tokens" if m.group("what").lower() == "token" else "requests",
                                per="minute", limit=None))
    for m in _LITELLM.finditer(text):
        limit, used = _number(m.group("limit")), _number(m.group("used"))
        if limit is not None and 0 < limit < _UNSET:  # an unset limit says nothing
            found.append(NamedQuota(dimension="requests" if m.group("what").lower() == "rpm" else "tokens",
                                    per="minute", limit=limit, used=used))
    return found


_REPLENISHED = re.compile(r"quota\b.{0,80}?\breplenished in (?:(\d{1,5})\.)?(\d{1,2}):(\d{2}):(\d{2})",
                         re.IGNORECASE | re.DOTALL)


def quota_replenished_in(body: bytes) -> float | None:
    """Seconds until a quota a 403 says is spent comes back (Azure API Management's "Out of call
    volume quota. Quota will be replenished in 5.03:23:11"); None where the body says no such thing."""
    m = _REPLENISHED.search(body[:8000].decode("utf-8", "replace"))
    if m is None:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def daily_quota_spent(named: list[NamedQuota], now: datetime | None = None) -> tuple[str, float] | None:
    """``(the quota, seconds until it comes back)`` where the refusal names a daily quota and
    says when it resets, or its provider documents when (Gemini's, at midnight Pacific: its
    ``retryDelay`` of a few seconds would only send the call again into the spent quota;
    OpenRouter's, at midnight UTC)."""
    at = now or datetime.now(timezone.utc)
    for q in named:
        if q.per != "day":
            continue
        if q.resets_at is not None:
            return q.describe(), max(0.0, q.resets_at - at.timestamp())
        if q.resets == "pacific_midnight":
            return q.describe(), seconds_to_pacific_midnight(at)
        if q.resets == "utc_midnight":
            return q.describe(), _seconds_to_midnight(at, timezone.utc)
    return None


def seconds_to_pacific_midnight(now: datetime) -> float:
    """Seconds from ``now`` (aware) to the next midnight in Mountain View (America/Los_Angeles;
    UTC-8 where the system has no time-zone database, at most an hour late in summer)."""
    try:
        zone: tzinfo = ZoneInfo("America/Los_Angeles")
    except ZoneInfoNotFoundError:
        zone = timezone(timedelta(hours=-8))
    return _seconds_to_midnight(now, zone)


def _seconds_to_midnight(now: datetime, zone: tzinfo) -> float:
    """Seconds from ``now`` (aware) to the next midnight in ``zone``."""
    midnight = datetime.combine(now.astimezone(zone).date() + timedelta(days=1), time(0), tzinfo=zone)
    return (midnight - now).total_seconds()


def refusal_fault(named: list[NamedQuota]) -> tuple[str, str] | None:
    """``(kind, why)`` where the refusal can never pass by waiting: a call larger than the whole
    quota of a minute or a day (``over_quota``, a fault of that one call), or a quota of 0 (``no_quota``:
    the key has none for this model, a fault of the endpoint as configured)."""
    for q in named:
        if q.limit == 0:
            return "no_quota", f"the endpoint's quota of {q.dimension.replace('_', ' ')} per {q.per} is 0"
    for q in named:
        if q.dimension != "requests" and q.requested is not None and q.limit is not None and q.requested > q.limit:
            return "over_quota", (f"the call needs {_figure(q.requested)} {q.dimension.replace('_', ' ')} and the "
                                  f"quota allows {_figure(q.limit)} a {q.per} in all")
    return None


def fill_from_refusal(info: RateLimitInfo, named: list[NamedQuota]) -> None:
    """Where the headers did not say them, the limits a refusal named (the tightest per-minute
    quota of each dimension), and what was left of each: its limit less what it says was
    used, or nothing (the quota just refused a call). ``info.named_quota`` says which."""
    taken = []
    for dimension in ("requests", "tokens"):
        quotas = [q for q in named if q.paces and (q.dimension == "requests") == (dimension == "requests")]
        if not quotas:
            continue
        q = min(quotas, key=lambda q: q.limit or 0.0)
        limit = q.limit
        assert limit is not None  # q.paces
        left = max(0.0, limit - q.used) if q.used is not None else 0.0
        if dimension == "requests" and info.limit_requests is None:
            info.limit_requests = limit
            if info.remaining_requests is None:
                info.remaining_requests = left
            taken.append(q.describe())
        elif dimension == "tokens" and info.limit_tokens is None:
            info.limit_tokens = limit
            if info.remaining_tokens is None:
                info.remaining_tokens = left
            taken.append(q.describe())
    if taken:
        info.named_quota = "; ".join(taken)
    # which dimension refused, where the body names just one (with its figure or not)
    refusing = {"requests" if q.dimension == "requests" else "tokens"
                for q in named if q.per == "minute" and q.dimension != "output_tokens"}
    if len(refusing) == 1:
        info.binding_named = refusing.pop()
