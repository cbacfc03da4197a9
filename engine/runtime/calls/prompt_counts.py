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
"""
from __future__ import annotations

import asyncio
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Counting(Protocol):
    counts_prompts: bool | None

    async def count_prompt(self, request: Any) -> int | None: ...


class PromptCounts:
    """Asks ``backend`` (one with ``count_prompt``; None: nothing to ask) for prompt counts."""

    def __init__(self, backend: Counting | None) -> None:
        self.backend = backend
        self.counted = 0  # prompts the server counted this run
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
