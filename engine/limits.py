"""Client-side quota: requests/min, tokens/min and adaptive concurrency.

Each call *reserves* its share of both buckets when it asks to go and sleeps until the
reservation is covered (virtual scheduling), so callers are served in arrival order with
no polling and no thundering herd. Buckets may go into debt; debt is paid by waiting.

Token cost is estimated before the call (prompt estimate x a learned correction factor
+ expected output) and corrected from the usage the API returns: the difference is
charged or refunded to the bucket and the factor is updated (EMA), so later estimates
match the server's own counting.

On 429 every caller pauses until the server's ``Retry-After`` (or reset header), the
local buckets are drained to what the server says remains, and the concurrency limit is
halved — at most once per cooldown, so one rate-limit episode causes one cut (AIMD, as
in inspect_ai). Concurrency then grows back by one per successful call.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from engine.judging import RateLimitInfo


class TokenBucket:
    """Continuous-refill bucket with capacity ``burst_s`` seconds of quota; may go negative."""

    def __init__(self, per_minute: float, burst_s: float = 1.0, minimum_capacity: float = 1.0) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(minimum_capacity, self.rate * burst_s)
        self.level = self.capacity
        self._t = time.monotonic()

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self._t) * self.rate)
        self._t = now

    def reserve(self, amount: float, now: float) -> float:
        """Debit ``amount`` and return how long to wait until the debit is covered."""
        self._refill(now)
        self.level -= amount
        return 0.0 if self.level >= 0 else -self.level / self.rate

    def adjust(self, delta: float, now: float) -> None:
        """Charge (delta > 0) or refund (delta < 0) after the fact."""
        self._refill(now)
        self.level = min(self.capacity, self.level - delta)

    def clamp(self, remaining: float, now: float) -> None:
        """Never believe we have more than the server says remains."""
        self._refill(now)
        self.level = min(self.level, remaining)


class AdaptiveConcurrency:
    """A semaphore whose limit moves: halved on rate limiting (once per cooldown),
    +1/limit per success (about +1 per round trip of the whole window)."""

    def __init__(self, maximum: int, cooldown_s: float = 5.0) -> None:
        self.maximum = max(1, maximum)
        self.limit = float(self.maximum)
        self.cooldown_s = cooldown_s
        self.in_use = 0
        self.cuts = 0
        self._cut_until = 0.0
        self._cond = asyncio.Condition()

    async def acquire(self) -> None:
        async with self._cond:
            while self.in_use >= int(self.limit):
                await self._cond.wait()
            self.in_use += 1

    async def release(self) -> None:
        async with self._cond:
            self.in_use -= 1
            self._cond.notify(1)

    def on_success(self) -> None:
        if self.limit < self.maximum and time.monotonic() >= self._cut_until:
            before = int(self.limit)
            self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)
            if int(self.limit) > before:
                asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._cond:
            self._cond.notify_all()

    def on_rate_limited(self) -> None:
        now = time.monotonic()
        if now >= self._cut_until:
            self.limit = max(1.0, self.limit / 2)
            self._cut_until = now + self.cooldown_s
            self.cuts += 1


class Permit:
    """A granted call slot. Call :meth:`done` exactly once with the real usage (if known)."""

    __slots__ = ("_limiter", "estimate", "_released")

    def __init__(self, limiter: RateLimiter, estimate: int) -> None:
        self._limiter = limiter
        self.estimate = estimate
        self._released = False

    async def done(self, actual_tokens: int | None = None, raw_estimate: int | None = None) -> None:
        if self._released:
            return
        self._released = True
        await self._limiter._finish(self, actual_tokens, raw_estimate)


class RateLimiter:
    """RPM + TPM + concurrency. ``rpm``/``tpm`` of 0 mean unlimited.

    ``safety`` (< 1) runs slightly under the quota: requests leave here at an exact pace
    but reach the server with jitter, and a server that sees two of them closer together
    than the pace would refuse one.
    """

    def __init__(self, rpm: float = 0, tpm: float = 0, concurrency: int = 16, *,
                 burst_s: float = 1.0, safety: float = 0.97, cooldown_s: float = 5.0) -> None:
        self.requests = TokenBucket(rpm * safety, burst_s) if rpm else None
        self.tokens = TokenBucket(tpm * safety, burst_s, minimum_capacity=0.0) if tpm else None
        self.concurrency = AdaptiveConcurrency(concurrency, cooldown_s)
        self.correction = 1.0  # server tokens / our estimate, learned from usage
        self._paused_until = 0.0
        self.waiting = 0  # callers sleeping for quota (shown as "waiting for rate limit")
        self.rate_limited = 0

    def estimate(self, raw_tokens: int) -> int:
        return max(1, round(raw_tokens * self.correction))

    async def acquire(self, raw_tokens: int) -> Permit:
        """Wait for a concurrency slot and for quota covering ``raw_tokens`` (our estimate)."""
        await self.concurrency.acquire()
        try:
            estimate = self.estimate(raw_tokens)
            while True:
                now = time.monotonic()
                if self._paused_until > now:
                    await self._sleep(self._paused_until - now)
                    continue
                wait = max(
                    self.requests.reserve(1, now) if self.requests else 0.0,
                    self.tokens.reserve(estimate, now) if self.tokens else 0.0,
                )
                if wait > 0:
                    await self._sleep(wait)
                if self._paused_until > time.monotonic():
                    # A 429 arrived while we slept: give the reservation back and queue again.
                    now = time.monotonic()
                    if self.requests:
                        self.requests.adjust(-1, now)
                    if self.tokens:
                        self.tokens.adjust(-estimate, now)
                    continue
                return Permit(self, estimate)
        except BaseException:
            await self.concurrency.release()
            raise

    async def _sleep(self, seconds: float) -> None:
        self.waiting += 1
        try:
            await asyncio.sleep(seconds)
        finally:
            self.waiting -= 1

    async def _finish(self, permit: Permit, actual: int | None, raw_estimate: int | None) -> None:
        now = time.monotonic()
        if actual is not None and self.tokens is not None:
            self.tokens.adjust(actual - permit.estimate, now)
        if actual is not None and raw_estimate:
            # EMA with a clamp: one odd response must not swing the pacing wildly.
            ratio = min(4.0, max(0.25, actual / raw_estimate))
            self.correction = 0.8 * self.correction + 0.2 * ratio
        self.concurrency.on_success()
        await self.concurrency.release()

    async def rate_limited_release(self, permit: Permit, info: RateLimitInfo | None) -> float:
        """Record a 429 for ``permit``: pause everyone, drain buckets, cut concurrency.
        Returns the pause (seconds) the caller should respect before retrying."""
        permit._released = True
        self.rate_limited += 1
        now = time.monotonic()
        delay = None
        if info is not None:
            delay = info.retry_after_s
            if delay is None:
                resets = [r for r in (info.reset_requests_s, info.reset_tokens_s) if r]
                delay = max(resets) if resets else None
            if info.remaining_tokens is not None and self.tokens is not None:
                self.tokens.clamp(info.remaining_tokens, now)
            if info.remaining_requests is not None and self.requests is not None:
                self.requests.clamp(info.remaining_requests, now)
        if delay is None:
            delay = 1.0
        self._paused_until = max(self._paused_until, now + delay)
        self.concurrency.on_rate_limited()
        await self.concurrency.release()
        return delay

    async def release_failed(self, permit: Permit) -> None:
        """Release after a failed call (no usage known; the estimate stays charged)."""
        if permit._released:
            return
        permit._released = True
        await self.concurrency.release()

    def snapshot(self) -> dict[str, Any]:
        return {
            "concurrency_limit": int(self.concurrency.limit),
            "in_flight": self.concurrency.in_use,
            "waiting_for_quota": self.waiting,
            "token_correction": round(self.correction, 3),
            "concurrency_cuts": self.concurrency.cuts,
        }
