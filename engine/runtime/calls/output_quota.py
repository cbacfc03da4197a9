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
from collections.abc import Callable, Coroutine
from typing import Any

from drscore.engine.runtime.calls.limits import MARGIN_S, SharedQuota


class OutputQuota:
    """Output tokens a minute, reserved at each call's cap and settled to its usage.

    ``level`` may go below 0: a cap larger than the whole bucket waits for a full bucket and
    then drives it into debt, as the server admits it (no call waits forever)."""

    def __init__(self, per_minute: float, level: float | None = None, now: float | None = None,
                 clock: Callable[[], float] = time.monotonic, shared: SharedQuota | None = None) -> None:
        self.per_minute = per_minute
        # A team (--redis) holds the caps of all its processes in one bucket there (its tokens
        # dimension); this mirror then paces only while the store is gone.
        self.shared = shared
        self._pending: set[asyncio.Task[Any]] = set()
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
        """Seconds until ``cap`` fits with MARGIN_S of the quota to spare (0: now); a cap over
        the whole bucket waits for a full one. The margin covers the way from here to the
        server's admission: a bucket full there gains nothing while the call is on its way,
        where this one refills from the take (logged: 16 tokens short, 0.15 s of a 6,000-a-minute
        quota, and a 429)."""
        missing = min(cap + MARGIN_S * self.rate, self.per_minute) - self.level_at(now)
        return 0.0 if missing <= 1e-9 else missing / self.rate

    def _shape(self) -> tuple[float, float, float, float]:
        return (0.0, 0.0, self.rate, self.per_minute)  # no request dimension: the limiter has it

    def _tell(self, update: Coroutine[Any, Any, Any]) -> None:
        """Send a change to the team's bucket without holding up the call that made it."""
        task = asyncio.ensure_future(update)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _reserve_shared(self, cap: int) -> bool | None:
        """Take ``cap`` from the team's bucket, waiting there as long as it says: whether it
        had to wait, or None when the store cannot (gone, or refusing): this call is paced
        here instead."""
        assert self.shared is not None
        waited = False
        while self.shared.available():
            wait = await self.shared.reserve(0.0, float(cap), self._shape())
            if wait is None:
                return None
            if wait <= 0:
                return waited
            waited = True
            await asyncio.sleep(min(wait, 1.0))  # others may give back sooner than the refill
        return None

    async def reserve(self, cap: int) -> None:
        """Wait until the bucket holds ``cap`` and take it."""
        async with self._lock:
            waited = False
            t0 = self._clock()
            shared = await self._reserve_shared(cap) if self.shared is not None else None
            if shared is not None:
                if shared:
                    self.waits += 1
                    self.wait_s += self._clock() - t0
                self._take(cap, self._clock())
                return
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
            self.took(cap - held)
        elif cap < held:
            self._give(held - cap)
        return cap

    def took(self, amount: int) -> None:
        """``amount`` was taken without a wait (a cap grown at the send)."""
        self._take(amount, self._clock())
        if self.shared is not None and amount > 0:
            self._tell(self.shared.adjust(float(amount), self._shape()))

    def holds_first(self, cap: int) -> None:
        """The call whose answer started the quota holds ``cap``: out of the level the server
        stated already, so only a team's bucket is told."""
        if self.shared is not None and cap > 0:
            self._tell(self.shared.adjust(float(cap), self._shape()))

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
        if self.shared is not None:
            self._tell(self.shared.adjust(-float(amount), self._shape()))

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
        if self.shared is not None:  # the team's bucket too (no pause: the limiter's store pauses)
            self._tell(self.shared.rate_limited(0.0, None, remaining, self._shape()))


def started(per_minute: float, remaining: float | None, sent_at: float,
            shared: SharedQuota | None = None) -> OutputQuota:
    """The quota the first statement of it shows, its call having gone alone (the preflight):
    the server's level after it reserved that call's cap (``remaining``), refilled since the
    call was sent. That call holds its cap from now on (a team's bucket is told so:
    :meth:`OutputQuota.holds_first`), and gives back what it did not use with its answer
    (:meth:`OutputQuota.settle`)."""
    now = time.monotonic()
    if remaining is None:
        return OutputQuota(per_minute, now=now, shared=shared)
    return OutputQuota(per_minute, remaining + max(0.0, now - sent_at) * per_minute / 60.0, now, shared=shared)
