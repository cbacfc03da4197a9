"""The judge server's own parallel slots, and what a timed-out call leaves behind there.

A local server answers a fixed number of requests at once: llama.cpp's ``llama-server``
has ``--parallel`` slots (its ``/props`` says ``total_slots``), llama-cpp-python's server
one (a lock around its model). Requests beyond that queue *inside the server*, where the
client's per-attempt ``--timeout`` runs while nothing is being done for them: with 16 in
flight at a one-request server, the 16th waits fifteen answers and times out through no
fault of its own. :class:`ServerSlots` keeps that queue on our side instead, where waiting
is a wait (a wait span), not time at the judge, and the timeout covers only the server's
work.

A call that timed out may still be running there: llama-server stops a request when its
client goes away, llama-cpp-python's server finishes it. Sending it again at once would
queue the retry behind the abandoned work (and pay for it twice on a metered server). So
the slot of a timed-out call on a server that does not cancel stays taken for as long as
the abandoned request can still take, by the slowest generation speed this run has seen
(``busy_bound``); with no answered call yet there is no such bound and the call is not
sent again (:meth:`resend_allowed`).
"""
from __future__ import annotations

import asyncio
from collections import deque

import msgspec


class ServerFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What a server says about itself before the run (all optional).

    ``server``: a name for messages (``llama.cpp``, ``llama-cpp-python``); ``window``: the
    context window it serves each request with; ``slots``: requests it works on at once;
    ``cancels``: whether it stops working on a request whose client disconnected (None:
    unknown)."""

    server: str | None = None
    window: int | None = None
    slots: int | None = None
    cancels: bool | None = None


class ServerSlots:
    """At most ``n`` calls at the server; a timed-out call's slot may be held a while."""

    def __init__(self, n: int, *, cancels: bool | None = None) -> None:
        self.n = max(1, n)
        self.cancels = cancels
        self._free = asyncio.Semaphore(self.n)
        self._rates: deque[float] = deque(maxlen=32)  # tokens/s of answered calls
        self.held_s = 0.0  # seconds slots were kept for timed-out calls

    async def acquire(self) -> None:
        await self._free.acquire()

    def release(self) -> None:
        self._free.release()

    def observe(self, tokens: int, seconds: float) -> None:
        """An answered call: ``tokens`` (prompt + output) in ``seconds`` at the server."""
        if tokens > 0 and seconds > 0:
            self._rates.append(tokens / seconds)

    def busy_bound(self, tokens: int) -> float | None:
        """Longest the server can still spend on a request of ``tokens`` (prompt + cap), at
        the slowest speed seen this run; None before any call was answered."""
        if not self._rates:
            return None
        return tokens / min(self._rates)

    def resend_allowed(self, tokens: int) -> bool:
        """Whether a timed-out call may be sent again: the server cancels abandoned
        requests, or a bound on the abandoned one's remaining work is known."""
        return self.cancels is True or self.busy_bound(tokens) is not None

    def release_after_timeout(self, tokens: int, spent_s: float) -> None:
        """Give back the slot of a call that timed out after ``spent_s`` at the server: at
        once when the server cancels it, else once its bound has passed."""
        if self.cancels is True:
            self.release()
            return
        bound = self.busy_bound(tokens)
        # No bound known: the call is not sent again (resend_allowed), and the slot is kept
        # one more timeout's worth before others may load the server.
        hold = max(0.0, bound - spent_s) if bound is not None else spent_s
        if hold <= 0:
            self.release()
            return
        self.held_s += hold
        asyncio.get_running_loop().call_later(hold, self.release)
