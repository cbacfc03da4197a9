"""Is the judge endpoint usable? The preflight gate and the circuit breaker.

**Preflight.** The first call of a run is its preflight: until that call's first
attempt has come back, every other call waits at :class:`EndpointGate`. If the attempt
meets an endpoint fault (connection refused, DNS, TLS, 401/403, 404, an unsupported
parameter: ``judging.ENDPOINT_FAULTS``) the pool stops the run before anything else is
sent; any other outcome opens the gate. The preflight is the run's own first request,
so it costs nothing extra and checks the exact request shape the run uses.

**Circuit breaker.** During the run, :class:`CircuitBreaker` counts consecutive failed
attempts that failed the same way (same ``kind``), across all calls; a success resets
it. At ``threshold`` the pool stops scheduling. 429s are not counted (the rate limiter
handles them). A request-specific 400 (one oversized prompt) is counted like any other
failure, but a success in between resets the count, so only a run of them trips it.
"""
from __future__ import annotations

import asyncio

# Not counted: 429s (the rate limiter handles them), and requests a batch left unanswered
# (judge/batch.py: one expired batch fails all its requests at once; they are retried).
NOT_COUNTED = frozenset({"rate_limit", "batch_unfinished"})


class EndpointGate:
    """Lets one probe call through, holds the rest until :meth:`open` is called."""

    def __init__(self) -> None:
        self.is_open = False
        self._probe: asyncio.Future[None] | None = None

    async def enter(self) -> bool:
        """Wait until the gate is open; returns True when the caller is the probe (the
        caller must then call :meth:`open` once its attempt has an outcome)."""
        while not self.is_open:
            if self._probe is None:
                self._probe = asyncio.get_running_loop().create_future()
                return True
            await asyncio.shield(self._probe)
        return False

    def open(self) -> None:
        """Let everyone through (the probe's outcome is known, or the run is stopping)."""
        self.is_open = True
        if self._probe is not None and not self._probe.done():
            self._probe.set_result(None)


class CircuitBreaker:
    """Trips after ``threshold`` consecutive attempts failing with the same kind."""

    def __init__(self, threshold: int = 10) -> None:
        self.threshold = max(1, threshold)
        self.kind: str | None = None
        self.count = 0
        self.last_message = ""

    def success(self) -> None:
        self.kind, self.count = None, 0

    def failure(self, kind: str, message: str) -> bool:
        """Record a failed attempt; True when the breaker trips."""
        if kind in NOT_COUNTED:
            return False
        if kind == self.kind:
            self.count += 1
        else:
            self.kind, self.count = kind, 1
        self.last_message = message
        return self.count >= self.threshold
