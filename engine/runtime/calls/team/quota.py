"""One requests/min and tokens/min budget per endpoint, shared through Redis.

The state of both buckets (levels, last refill, pause) lives in one Redis hash per
endpoint identity (base URL, model, key fingerprint). A Lua script refills, checks and
charges atomically, on Redis's own clock (``TIME``), so processes on different machines
agree without synchronised clocks. The same script corrects a reservation from the usage
a call returned and records a 429: it pauses everyone until the server's ``Retry-After``
and publishes the pause, which every process's limiter adopts at once.

Implements :class:`drscore.engine.runtime.calls.limits.SharedQuota`; every method returns None when
Redis is gone, and the limiter then paces on its local buckets.
"""
from __future__ import annotations

from typing import Callable

from drscore.engine.runtime.calls.team.link import TeamLink

# KEYS[1] quota hash, KEYS[2] pause channel.
# ARGV: op, req_rate, req_cap, tok_rate, tok_cap, a, b, c   (rates per second)
#   reserve: a = requests, b = tokens        -> "0" when taken, else seconds to wait
#   adjust:  a = token delta (+ charge, - refund)
#   limited: a = pause seconds, b = remaining requests (-1 unknown), c = remaining tokens (-1)
_SCRIPT = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local op = ARGV[1]
local rrate, rcap = tonumber(ARGV[2]), tonumber(ARGV[3])
local krate, kcap = tonumber(ARGV[4]), tonumber(ARGV[5])
local a, b, c = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local st = redis.call('HMGET', KEYS[1], 'r', 'k', 't', 'p')
local r = tonumber(st[1]) or rcap
local k = tonumber(st[2]) or kcap
local last = tonumber(st[3]) or now
local paused = tonumber(st[4]) or 0
local dt = now - last
if dt < 0 then dt = 0 end
if rrate > 0 then r = math.min(rcap, r + dt * rrate) end
if krate > 0 then k = math.min(kcap, k + dt * krate) end
local result = 0
if op == 'reserve' then
  if paused > now then
    result = paused - now
  else
    local wait = 0
    if rrate > 0 and a > 0 then
      local need = math.min(a, rcap)
      if r < need then wait = (need - r) / rrate end
    end
    if krate > 0 and b > 0 then
      local need = math.min(b, kcap)
      if k < need then wait = math.max(wait, (need - k) / krate) end
    end
    if wait > 0 then
      result = wait
    else
      if rrate > 0 then r = r - a end
      if krate > 0 then k = k - b end
    end
  end
elseif op == 'adjust' then
  if krate > 0 then k = math.min(kcap, k - a) end
elseif op == 'limited' then
  if now + a > paused then paused = now + a end
  if b >= 0 and rrate > 0 and r > b then r = b end
  if c >= 0 and krate > 0 and k > c then k = c end
  redis.call('PUBLISH', KEYS[2], tostring(a))
  result = paused - now
end
redis.call('HSET', KEYS[1], 'r', tostring(r), 'k', tostring(k), 't', tostring(now), 'p', tostring(paused))
redis.call('PEXPIRE', KEYS[1], 3600000)
return tostring(result)
"""

Shape = tuple[float, float, float, float]


class RedisQuota:
    """The shared buckets of one endpoint (see the module docstring)."""

    def __init__(self, link: TeamLink, name: str = "q", channel: str = "pause") -> None:
        """``name`` and ``channel``: another bucket of the same endpoint (its output-token
        quota, where the server states one apart) keeps its own hash and pause channel."""
        self.link = link
        self.key = link.key(name, link.endpoint)
        self.pause_channel = link.channel(channel)
        self._script = link.client.register_script(_SCRIPT)
        self.reservations = 0  # quota taken through Redis
        self.waits = 0  # reservations answered "not yet"
        self.pauses_received = 0
        self._on_pause: Callable[[float], None] | None = None
        link.subscribe(self.pause_channel, self._pause_message)

    def attach(self, on_pause: Callable[[float], None]) -> None:
        self._on_pause = on_pause

    def _pause_message(self, data: bytes) -> None:
        try:
            seconds = float(data)
        except ValueError:
            return
        self.pauses_received += 1
        if self._on_pause is not None and seconds > 0:
            self._on_pause(seconds)

    def available(self) -> bool:
        return self.link.up

    async def _run(self, op: str, shape: Shape, a: float = 0, b: float = 0, c: float = 0) -> float | None:
        if not self.link.up:
            return None
        reply = await self.link.guard(
            self._script(keys=[self.key, self.pause_channel], args=[op, *map(repr, shape), repr(a), repr(b), repr(c)]),
            None)
        return None if reply is None else float(reply)

    async def reserve(self, requests: float, tokens: float, shape: Shape) -> float | None:
        wait = await self._run("reserve", shape, requests, tokens)
        if wait is not None:
            if wait <= 0:
                self.reservations += 1
            else:
                self.waits += 1
        return wait

    async def adjust(self, tokens: float, shape: Shape) -> bool | None:
        return None if await self._run("adjust", shape, tokens) is None else True

    async def rate_limited(self, delay_s: float, remaining_requests: float | None, remaining_tokens: float | None,
                           shape: Shape) -> bool | None:
        rem_r = -1.0 if remaining_requests is None else remaining_requests
        rem_t = -1.0 if remaining_tokens is None else remaining_tokens
        return None if await self._run("limited", shape, delay_s, rem_r, rem_t) is None else True

    def stats(self) -> dict[str, int]:
        return {"reservations": self.reservations, "reservation_waits": self.waits,
                "pauses_received": self.pauses_received}
