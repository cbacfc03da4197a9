"""The server's own count of a prompt, asked before the call is charged to the quota.

A token quota paced on estimates pays for their error twice: before the first answers come
back, the character rule can be far off (a line of Chinese counted as one token runs at a
fifth of its guess), and later every call waits out the spread of the estimates still in
flight. Where the server counts a chat prompt itself in a millisecond, no model run (vLLM's
``POST /tokenize``), each call is charged its real prompt instead: only the answer's length
is left to guess. A backend offers this as ``count_prompt(request) -> int | None`` and says
by ``counts_prompts`` (None until known) whether the server has the route.

The first call asks alone and the others wait for its outcome, so a server without the
route is asked once, not once per call in flight.

A count need not be the usage to the token: Gemini's own example counts a prompt one token
below what its answer's usage reports. :class:`CountDrift` learns that difference from the
answers, so a call is charged its count plus the usual difference, give or take its spread.
"""
from __future__ import annotations

import asyncio
import math
from typing import Any, Protocol, runtime_checkable


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


class PromptCounts:
    """Asks ``backend`` (one with ``count_prompt``; None: nothing to ask) for prompt counts."""

    def __init__(self, backend: Counting | None) -> None:
        self.backend = backend
        self.counted = 0  # prompts the server counted this run
        self.drift = CountDrift()
        self._first: asyncio.Future[None] | None = None  # the first ask, while in flight

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
            count = await backend.count_prompt(request)
        finally:
            if first and self._first is not None:
                self._first.set_result(None)
                self._first = None
        if count is not None:
            self.counted += 1
        return count
