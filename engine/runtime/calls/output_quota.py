"""An output-token quota that reserves each call's cap: Anthropic's output tokens per minute.

Anthropic limits input and output tokens apart. Its documents say the output limit is charged
the request's ``max_tokens`` when the request starts and corrected to the output used when it
ends; its answers state the two limits apart (``anthropic-ratelimit-input-tokens-*``,
``-output-tokens-*``) beside a ``tokens-*`` pair that is their sum (recorded answers: 80,000
input + 16,000 output = 96,000). The calls' prompts are paced on the input limit by the
:class:`~drscore.engine.runtime.calls.limits.RateLimiter`; their caps are held here, so that
the caps of the calls in flight never ask the server more output than its bucket holds.

The bucket mirrors the server's: it refills at the limit per minute up to a minute's worth
(the documents' bucket), each call reserves its cap before it is granted its prompt's quota
(so the send follows that grant at once, as the limiter's count-following needs) and gives
back what its answer did not use. What the server says remains corrects the mirror where the
count is unambiguous: the run's first call, alone, starts it; a refusal's count is the level
at that moment (counts as :mod:`drscore.judge.ratelimit_headers` reads them: a count Anthropic
rounded to the thousand is taken as the least it may stand for).
"""
from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

class OutputQuota:
    """Output tokens a minute, reserved at each call's cap and settled to its usage.

    ``level`` may go below 0: a cap larger than the whole bucket waits for a full bucket and
    then drives it into debt, as the server admits it (no call waits forever)."""

    def __init__(self, per_minute: float, level: float | None = None, now: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.level = per_minute if level is None else min(per_minute, level)
        self._clock = clock
        self._at = clock() if now is None else now
        self._lock = asyncio.Lock()  # first come, first served: only the head waits on the level
        self._changed = asyncio.Event()
        self.waits = 0  # reservations that had to wait
        self.wait_s = 0.0

    @property
    def rate(self) -> float:
        return self.per_minute / 60.0

    def level_at(self, now: float) -> float:
        return min(self.per_minute, self.level + max(0.0, now - self._at) * self.rate)

    def _refill(self, now: float) -> None:
        self.level, self._at = self.level_at(now), max(self._at, now)

    def wait_for(self, cap: float, now: float) -> float:
        """Seconds until ``cap`` fits (0: now); a cap over the whole bucket waits for a full one."""
        missing = min(cap, self.per_minute) - self.level_at(now)
        return 0.0 if missing <= 1e-9 else missing / self.rate

    async def reserve(self, cap: int) -> None:
        """Wait until the bucket holds ``cap`` and take it."""
        async with self._lock:
            waited = False
            t0 = self._clock()
            while True:
                now = self._clock()
                wait = self.wait_for(cap, now)
                if wait <= 0:
                    break
                waited = True
                self._changed.clear()
                # a give-back may fill it sooner than the refill alone
                try:
                    await asyncio.wait_for(self._changed.wait(), timeout=wait)
                except asyncio.TimeoutError:
                    pass
            if waited:
                self.waits += 1
                self.wait_s += self._clock() - t0
            self._take(cap, self._clock())

    def _take(self, amount: float, now: float) -> None:
        self._refill(now)
        self.level -= amount

    def resize(self, held: int, cap: int) -> int:
        """The call is sent with ``cap`` instead of the ``held`` it reserved (its room grew
        or shrank while it waited): the difference is taken or given back now. Returns ``cap``."""
        if cap > held:
            self._take(cap - held, self._clock())
        elif cap < held:
            self._give(held - cap)
        return cap

    def settle(self, held: int, used: int) -> None:
        """The call that held ``held`` was answered using ``used`` output tokens (0 for an
        answer that failed after the server admitted it): the rest comes back."""
        self._give(max(0, held - used))

    def release(self, held: int) -> None:
        """The call that held ``held`` was not admitted (never sent, or refused): all of it
        comes back."""
        self._give(held)

    def _give(self, amount: float) -> None:
        if amount <= 0:
            return
        now = self._clock()
        self._refill(now)
        self.level = min(self.per_minute, self.level + amount)
        self._changed.set()

    def restate(self, per_minute: float) -> None:
        """The server states another limit: the level keeps its share of the bucket."""
        if per_minute > 0 and not math.isclose(per_minute, self.per_minute):
            now = self._clock()
            self._refill(now)
            self.level *= per_minute / self.per_minute
            self.per_minute = per_minute
            self._changed.set()

    def refused(self, remaining: float) -> None:
        """A refusal's count: the server's level now, which the mirror may not exceed."""
        now = self._clock()
        self._refill(now)
        self.level = min(self.level, remaining)


def started(per_minute: float, remaining: float | None, sent_at: float) -> OutputQuota:
    """The quota the first statement of it shows, its call having gone alone (the preflight):
    the server's level after it reserved that call's cap (``remaining``), refilled since the
    call was sent. That call holds its cap from now on, and gives back what it did not use
    with its answer (:meth:`OutputQuota.settle`)."""
    now = time.monotonic()
    if remaining is None:
        return OutputQuota(per_minute, now=now)
    return OutputQuota(per_minute, remaining + max(0.0, now - sent_at) * per_minute / 60.0, now)
