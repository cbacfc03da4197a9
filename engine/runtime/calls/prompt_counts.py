"""The server's own count of a prompt, asked before the call is charged to the quota.

A token quota paced on estimates pays for their error twice: before the first answers come
back, the character rule can be far off (a line of Chinese counted as one token runs at a
fifth of its guess), and later every call waits out the spread of the estimates still in
flight. Where the server counts a chat prompt itself in a millisecond, no model run (vLLM's
``POST /tokenize``), each call is charged its real prompt instead: only the answer's length
is left to guess. A backend offers this as ``count_prompt(request) -> int | None`` and says
by ``counts_prompts`` (None until known) whether the server has the route.

The first call asks alone and the others wait for its outcome, so a server without the
route is asked once, not once per call in flight. After that, a few counts are out at once
(:class:`AskingLimit`), not one for every call waiting for quota.

A count need not be the usage to the token: Gemini's own example counts a prompt one token
below what its answer's usage reports. :class:`CountDrift` learns that difference from the
answers, so a call is charged its count plus the usual difference, give or take its spread.
"""
from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from typing import Any, AsyncIterator, Callable, Protocol, runtime_checkable

from drscore.engine.runtime.calls.limits import MovingSemaphore


@runtime_checkable
class Counting(Protocol):
    counts_prompts: bool | None

    async def count_prompt(self, request: Any) -> int | None: ...


class CountDrift:
    """How the usage of a counted prompt differs from its count: an exponentially weighted
    mean and standard deviation of (usage - count), in tokens; 0 and 0 until an answer shows
    one (vLLM's count is the usage exactly)."""

    WEIGHT = 0.2  # of the newest difference: a few answers settle it

    def __init__(self) -> None:
        self.mean = 0.0
        self._var = 0.0
        self.seen = 0

    def observe(self, counted: int, used: int) -> None:
        miss = used - counted
        if self.seen == 0:
            self.mean = float(miss)
        else:
            d = miss - self.mean
            self.mean += self.WEIGHT * d
            self._var = (1.0 - self.WEIGHT) * (self._var + self.WEIGHT * d * d)
        self.seen += 1

    def charge(self, counted: int) -> int:
        """What the server will count of a prompt it counted ``counted``."""
        return max(1, counted + math.ceil(self.mean))

    @property
    def sd(self) -> float:
        return math.sqrt(self._var)


# Counts out at once, at least. A count costs the server a millisecond, but the 64 a run's
# calls asked at its start held up its admission of the calls already granted by up to 0.7 s
# (bench.pacing, 1,090 calls, logged at both ends: the mock counts on worker threads of the
# process that admits the calls, as vLLM's API server tokenizes in its own). Its bucket refilled
# past full meanwhile, a loss ours never saw, and a call sized to our full bucket met a 429 up
# to a minute later.
MIN_ASKING = 4
# How long the rate counted calls are granted at is measured over (seconds)
USE_WINDOW_S = 1.0


class AskingLimit:
    """How many counts may be out at once: enough to have one ready for each call the quota
    lets go (Little's law, twice over: the rate counted calls are granted at times how long a
    count takes), never fewer than ``minimum``. The grants set the rate, not the counts' own
    returns: while calls wait for counts, that would be the limit's own rate."""

    WEIGHT = 0.2  # of the newest count's duration in the mean

    def __init__(self, minimum: int = MIN_ASKING, clock: Callable[[], float] = time.monotonic) -> None:
        self.minimum, self.clock = minimum, clock
        self.took: float | None = None  # a count's mean duration (seconds)
        self._used: deque[float] = deque()  # grants of counted calls over the last USE_WINDOW_S
        self._slots = MovingSemaphore(minimum)

    @property
    def out(self) -> int:
        """Counts out now."""
        return self._slots.in_use

    def limit(self) -> int:
        now = self.clock()
        while self._used and self._used[0] < now - USE_WINDOW_S:
            self._used.popleft()
        if self.took is None:
            return self.minimum
        rate = len(self._used) / USE_WINDOW_S
        return max(self.minimum, math.ceil(2.0 * rate * self.took))

    @contextlib.asynccontextmanager
    async def asking(self) -> AsyncIterator[None]:
        """Hold one of the counts out while the body runs, waiting for one first."""
        self._slots.set_limit(self.limit())  # the grants' rate may have aged out since
        await self._slots.acquire()
        started = self.clock()
        try:
            yield
        finally:
            took = self.clock() - started
            self.took = took if self.took is None else self.took + self.WEIGHT * (took - self.took)
            self._slots.limit = self.limit()
            await self._slots.release()

    def used(self) -> None:
        """A counted call was granted (the limit may grow)."""
        self._used.append(self.clock())
        self._slots.set_limit(self.limit())


class PromptCounts:
    """Asks ``backend`` (one with ``count_prompt``; None: nothing to ask) for prompt counts:
    the server's, or a counter's on this machine (``--tokenizer``) in its place."""

    def __init__(self, backend: Counting | None) -> None:
        self.backend = backend
        # who counts: "server" (its route), or what a counter here says it is (--tokenizer's spec)
        self.counted_by: str = getattr(backend, "counted_by", "server")
        self.counted = 0  # prompts counted this run
        self.drift = CountDrift()
        self._first: asyncio.Future[None] | None = None  # the first ask, while in flight
        self.asking = AskingLimit()

    @property
    def available(self) -> bool:
        """Whether asking may still give a count (the server has the route, or it is not known yet)."""
        return self.backend is not None and self.backend.counts_prompts is not False

    async def count(self, request: Any) -> int | None:
        """The server's count of ``request``'s prompt; None where it gives none."""
        backend = self.backend
        while backend is not None and backend.counts_prompts is None and self._first is not None:
            await asyncio.shield(self._first)  # whether the route exists is being learned
        if backend is None or backend.counts_prompts is False:
            return None
        first = backend.counts_prompts is None
        if first:
            self._first = asyncio.get_running_loop().create_future()
        try:
            async with self.asking.asking():
                count = await backend.count_prompt(request)
        finally:
            if first and self._first is not None:
                self._first.set_result(None)
                self._first = None
        if count is not None:
            self.counted += 1
        return count
