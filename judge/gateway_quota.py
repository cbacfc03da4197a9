"""What an AI gateway in front of a model says about its token quota.

Teams share a self-hosted model (vLLM, Ollama, llama.cpp) through a gateway that keeps a token
quota: Apache APISIX's ``ai-rate-limiting``, Kong's ``ai-rate-limiting-advanced``, LiteLLM's
proxy, Higress's ``ai-token-ratelimit``. None of them speaks OpenAI's ``x-ratelimit-*-tokens``
(docs/providers.md, "AI gateways", with the sources):

* APISIX and Kong send ``X-AI-RateLimit-Limit-<suffix>`` and ``X-AI-RateLimit-Remaining-<suffix>``,
  one pair per limit. Kong's suffix begins with the window (``minute-openai``, ``300-llama2``);
  APISIX's is the upstream's instance name, and its window is in no header. APISIX adds
  ``X-AI-RateLimit-Reset-<suffix>`` (seconds left in the window); Kong sends
  ``X-AI-RateLimit-Reset`` and ``X-AI-RateLimit-Retry-After`` (alone and suffixed) on a
  refusal only, and no plain ``Retry-After``.
* LiteLLM sends ``x-ratelimit-<scope>-limit-tokens`` and ``-remaining-tokens`` (scope:
  ``api_key``, ``user``, ``team``...) for its own per-minute limits, and passes the upstream
  provider's ``x-ratelimit-*-tokens`` through unprefixed: those describe another quota.
* Higress says nothing on success and ``X-TokenRateLimit-Reset`` on a refusal.

These gateways charge a call's tokens after its answer, from the usage, and admit a call while
the window's counter is under the limit. So a remaining count leaves out every call in flight
and the call it came with: it is not a level a client's bucket can follow, as OpenAI's is.
What a client can use is the limit of a window it knows the length of (a pace, as if told),
and, on a refusal, how long until the window starts over.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping

from drscore.engine.runtime.calls.judging import GatewayQuota

__all__ = ["GatewayQuota", "read_gateway_quota"]

_AI = re.compile(r"x-ai-ratelimit-(limit|remaining|reset|retry-after)(?:-(.+))?$")
_LITELLM = re.compile(r"x-ratelimit-(api_key|user|team|team_member|end_user|model_per_key)-(limit|remaining)-"
                      r"(tokens|requests)$")
_KONG_WINDOWS = {"second": 1.0, "minute": 60.0, "hour": 3600.0, "day": 86400.0}
# LiteLLM's rate-limit window (LITELLM_RATE_LIMIT_WINDOW_SIZE, 60 s unless its operator changed it)
LITELLM_WINDOW_S = 60.0
# A pace is taken only from a window this long or shorter: a daily quota paced evenly would
# hold a short run to a 1,440th of it a minute.
PACED_WINDOW_S = 60.0


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        x = float(value.strip())
    except ValueError:
        return None
    return x if math.isfinite(x) and x >= 0 else None


def _kong_window(suffix: str) -> float | None:
    """The window a Kong suffix names (``minute-openai``: 60; ``300-llama2``: 300), or None (APISIX's
    instance names)."""
    head = suffix.split("-", 1)[0]
    if head in _KONG_WINDOWS:
        return _KONG_WINDOWS[head]
    return float(head) if head.isdigit() and int(head) > 0 and "-" in suffix else None


def _tightest(current: tuple[float, float] | None, limit: float,
              window_s: float | None) -> tuple[float, float] | None:
    """(per minute, window) of the tighter of ``current`` and ``limit`` per ``window_s``."""
    if window_s is None or window_s > PACED_WINDOW_S:
        return current
    per_minute = limit * 60.0 / window_s
    return (per_minute, window_s) if current is None or per_minute < current[0] else current


def read_gateway_quota(headers: Mapping[str, str], window_s: float | None = None) -> GatewayQuota | None:
    """The gateway quota ``headers`` (lower-cased names, or a case-insensitive mapping) announce;
    None where no gateway header is present. ``window_s``: the longest Reset the endpoint's
    earlier answers said (see ``reset_s``), the window of a limit whose name states none
    (APISIX's): at least that long, so the pace it gives is at most the limit's own, and it
    only falls as longer Resets come."""
    limits: dict[str, float] = {}
    remaining: dict[str, float] = {}
    waits: list[float] = []
    resets: list[float] = []
    litellm: dict[tuple[str, str], dict[str, float]] = {}
    higress = None
    for name, value in headers.items():
        key = name.lower()
        if key == "x-tokenratelimit-reset":
            higress = _number(value)
            continue
        m = _AI.match(key)
        if m is not None:
            x = _number(value)
            if x is None:
                continue
            kind, suffix = m.group(1), m.group(2) or ""
            if kind == "limit":
                limits[suffix] = x
            elif kind == "remaining":
                remaining[suffix] = x
            elif x > 0:  # APISIX's local counters say 0 on a refusal: no hint
                waits.append(x)
                if kind == "reset":
                    resets.append(x)
            continue
        m = _LITELLM.match(key)
        if m is not None:
            x = _number(value)
            if x is not None:
                litellm.setdefault((m.group(1), m.group(3)), {})[m.group(2)] = x
    if limits or remaining or waits:
        paced = None
        seen = max([*resets, window_s or 0.0])
        named = False  # Kong names its windows (and slides them by default); APISIX's are fixed
        for suffix, limit in limits.items():
            named = named or _kong_window(suffix) is not None
            paced = _tightest(paced, limit, _kong_window(suffix) or (math.ceil(seen) if seen >= 1 else None))
        spent = any(x < 1 for x in remaining.values())
        return GatewayQuota(headers="x-ai-ratelimit", tokens_per_minute=paced[0] if paced else None,
                            window_s=paced[1] if paced else None, fixed=paced is not None and not named,
                            spent=spent, wait_s=max(waits) if waits else None,
                            reset_s=max(resets) if resets else None)
    if litellm:
        tokens = requests = None
        spent = False
        for (_, dimension), said in litellm.items():
            if "limit" in said:
                if dimension == "tokens":
                    tokens = _tightest(tokens, said["limit"], LITELLM_WINDOW_S)
                else:
                    requests = _tightest(requests, said["limit"], LITELLM_WINDOW_S)
            spent = spent or said.get("remaining", 1.0) < 1
        return GatewayQuota(headers="litellm", tokens_per_minute=tokens[0] if tokens else None,
                            requests_per_minute=requests[0] if requests else None,
                            window_s=LITELLM_WINDOW_S if tokens or requests else None, fixed=True, spent=spent)
    if higress is not None:
        return GatewayQuota(headers="higress", spent=True, wait_s=higress if higress > 0 else None)
    return None
