"""An AI gateway's token quota in front of the mock model (``--gateway apisix|kong``).

Teams put a gateway in front of a self-hosted model to share it under a token quota. The
gateways meter it unlike a provider's bucket, and the mock copies what their sources and
documents say (docs/providers.md, "AI gateways"):

* a window of ``limit`` tokens per ``window_s`` seconds; APISIX's is **fixed** and starts at
  its first charge (its counter's key expires a window later); Kong's are aligned to the clock
  and, by default, **sliding**: the count is this window's charges plus the last window's,
  weighted by the share of the last window still inside the sliding one
  (``--gateway-fixed``: its ``fixed`` windows);
* tokens are **charged after the answer**, from its usage (prompt and answer), and a request
  is admitted while the window's counter is under the limit: the last one admitted
  overshoots, and a remaining count never includes the calls still in flight;
* **apisix** (``ai-rate-limiting``): ``X-AI-RateLimit-{Limit,Remaining,Reset}-<instance>`` on
  every response, Remaining one below what is left (its peek charges one), Reset the seconds
  left in the window (its Redis policy); a refusal is its default ``rejected_code``, **503**,
  nginx's error page, no ``Retry-After``;
* **kong** (``ai-rate-limiting-advanced``): ``X-AI-RateLimit-{Limit,Remaining}-<window>-<provider>``
  (``minute`` for 60 s), and on a refusal, a 429 with
  ``X-AI-RateLimit-{Reset,Retry-After}`` (alone and suffixed) and no plain ``Retry-After``,
  as captured from Kong 3.11; with ``hide_client_headers`` (``--gateway-hides-limits``) only
  the Reset and Retry-After of a refusal.
"""
from __future__ import annotations

import math
from typing import Callable

import orjson

__all__ = ["GATEWAYS", "GatewayWindow"]

GATEWAYS = ("apisix", "kong")
_KONG_WINDOWS = {1: "second", 60: "minute", 3600: "hour", 86400: "day"}
APISIX_INSTANCE = "mock-instance"
KONG_PROVIDER = "openai"
# What nginx answers for a bare 503 (APISIX's rejection without a rejected_msg)
_NGINX_503 = (b"<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n"
              b"<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n<hr><center>openresty</center>\r\n"
              b"</body>\r\n</html>\r\n")


class GatewayWindow:
    """One gateway's token window: admitted while under ``limit``, charged after the answer."""

    def __init__(self, kind: str, limit: float, window_s: float, clock: Callable[[], float],
                 hides_limits: bool = False, fixed: bool = False) -> None:
        if kind not in GATEWAYS:
            raise ValueError(f"mock judge: gateway must be one of {', '.join(GATEWAYS)}, got {kind!r}")
        if window_s <= 0 or limit <= 0:
            raise ValueError("mock judge: a gateway needs tpm > 0 and gateway_window > 0")
        self.kind, self.limit, self.window_s, self.clock = kind, limit, window_s, clock
        # Kong's hide_client_headers: no Limit or Remaining, a refusal's Reset and Retry-After kept
        self.hides_limits = hides_limits
        self.sliding = kind == "kong" and not fixed  # Kong's window_type, sliding by default
        self.used = 0.0
        self.before = 0.0  # the last window's charges (kong)
        self.started: float | None = None  # the current window's start (None: no charge yet, apisix)
        self.refused = 0
        self.windows = 0  # windows that held a charge

    def reset(self) -> None:
        """Forget every charge (``POST /reset``)."""
        self.used, self.before, self.started, self.refused, self.windows = 0.0, 0.0, None, 0, 0

    def _start(self, now: float) -> float | None:
        if self.kind == "kong":
            return math.floor(now / self.window_s) * self.window_s
        return self.started

    def _roll(self, now: float) -> None:
        start = self._start(now)
        if self.kind == "kong":
            if self.started != start:
                assert start is not None
                # the window before this one: the last one's charges, or none after a gap
                self.before = self.used if self.started is not None and start - self.started <= self.window_s else 0.0
                self.started, self.used = start, 0.0
        elif start is not None and now >= start + self.window_s:
            self.started, self.used = None, 0.0

    def count(self) -> float:
        """What the window holds now: its charges, and with a sliding one the last window's,
        weighted by the share of it still inside the sliding window."""
        now = self.clock()
        self._roll(now)
        if not self.sliding or self.started is None:
            return self.used
        return self.used + self.before * (1.0 - (now - self.started) / self.window_s)

    def admit(self) -> bool:
        """Whether a request may pass now (the count under the limit)."""
        if self.count() < self.limit:
            return True
        self.refused += 1
        return False

    def charge(self, tokens: float) -> None:
        """An answer's usage, charged when it leaves (into the window open then)."""
        now = self.clock()
        self._roll(now)
        if self.started is None:
            self.started = now
        if self.used == 0:
            self.windows += 1
        self.used += tokens

    def reset_s(self) -> float:
        """Seconds until the count is under the limit again, nothing more charged meanwhile: a
        fixed window's end (a whole window before any charge); for a sliding one, when the
        last window's weighted share has fallen far enough, in this window or the next."""
        now = self.clock()
        self._roll(now)
        if self.started is None:
            return self.window_s
        end = self.started + self.window_s
        if not self.sliding:
            return max(0.0, end - now)
        if self.used >= self.limit:  # in the next window, this one's charges are what slides out
            return max(0.0, end - now + self.window_s * (1.0 - self.limit / self.used))
        if self.before <= 0:
            return 0.0
        return max(0.0, self.started + self.window_s * (1.0 - (self.limit - self.used) / self.before) - now)

    def _suffix(self) -> str:
        if self.kind == "apisix":
            return APISIX_INSTANCE
        w = round(self.window_s)
        return f"{_KONG_WINDOWS.get(w, str(w))}-{KONG_PROVIDER}"

    def headers(self) -> dict[str, str]:
        """What the gateway adds to a response it let through (counted before this call's charge)."""
        self._roll(self.clock())
        if self.hides_limits:
            return {}
        left = max(0, math.floor(self.limit - self.count()))
        s = self._suffix()
        out = {f"X-AI-RateLimit-Limit-{s}": str(int(self.limit)),
               f"X-AI-RateLimit-Remaining-{s}": str(max(0, left - 1) if self.kind == "apisix" else left)}
        if self.kind == "apisix":
            out[f"X-AI-RateLimit-Reset-{s}"] = str(math.ceil(self.reset_s()))
        return out

    def rejection(self) -> tuple[int, dict[str, str], bytes, str]:
        """(status, headers, body, content type) of a refused request."""
        s = self._suffix()
        wait = str(max(1, math.ceil(self.reset_s())))
        out = {} if self.hides_limits else {f"X-AI-RateLimit-Limit-{s}": str(int(self.limit)),
                                            f"X-AI-RateLimit-Remaining-{s}": "0"}
        if self.kind == "apisix":
            out[f"X-AI-RateLimit-Reset-{s}"] = wait
            return 503, out, _NGINX_503, "text/html"
        out.update({f"X-AI-RateLimit-Retry-After-{s}": wait, f"X-AI-RateLimit-Reset-{s}": wait,
                    "X-AI-RateLimit-Reset": wait, "X-AI-RateLimit-Retry-After": wait})
        body = orjson.dumps({"message": f"AI token rate limit exceeded for provider(s): {KONG_PROVIDER}"})
        return 429, out, body, "application/json"
