"""Is the judge endpoint usable? The preflight gate and the circuit breaker.

**Preflight.** The first call of a run is its preflight: until that call's first
attempt has come back, every other call waits at :class:`EndpointGate`. If the attempt
meets an endpoint fault (connection refused, DNS, TLS, 401/403, 404, an unsupported
parameter: ``judging.ENDPOINT_FAULTS``) the pool stops the run before anything else is
sent; any other outcome opens the gate. The preflight is the run's own first request,
so it costs nothing extra and checks the exact request shape the run uses.

**Overlap.** Holding everyone for a whole answer (seconds, for a long prompt) wastes that
much quota when the quota is known (``--rpm``/``--tpm``): the buckets fill to their burst
and then overflow. With ``overlap_s`` the others wait only that long after the preflight
left, or until its outcome if that comes first. Endpoint faults come back in about one
round trip (no model runs), so they still stop the run before anything else is sent; a
fault slower than ``overlap_s`` lets the calls admitted meanwhile through, and each fails
with the same fault, unbilled (the pool stops the run on any endpoint fault met before
the gate opened). An endpoint that ignores ``response_format`` answers those calls in
prose; they are asked again with the schema in the prompt.

**Circuit breaker.** During the run, :class:`CircuitBreaker` counts *distinct requests*
failing the same way (same ``kind``) in a row, across all calls; a success resets it. The
retries of one request count once, for the whole run: a body the server always rejects
(a poisoned prompt answered 503 every time) is one failing request however often it is
retried, so it cannot trip the breaker alone, nor can a run's tail where only such
retries are left; ten different requests failing alike mean the endpoint is down. At ``threshold`` the pool stops scheduling. Not counted at all: 429s
(the rate limiter handles them) and faults of one request (``judging.REQUEST_FAULTS``: a
prompt over the context window, a content filter, a flagged prompt, a cut-off answer),
which fail their item with the reason and neither count nor reset the streak.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Hashable

from drscore.engine.runtime.calls.judging import REQUEST_FAULTS

# Not counted: 429s (the rate limiter handles them), and requests a batch left unanswered
# (judge/batch.py: one expired batch fails all its requests at once; they are retried).
# Nor the faults of one request (they say nothing about the endpoint).
NOT_COUNTED = frozenset({"rate_limit", "batch_unfinished", *REQUEST_FAULTS})

# How long the others wait for the preflight when the quota is known: past a round trip or
# two (endpoint faults come back that fast), short against an answer. See "Overlap" above.
PREFLIGHT_OVERLAP_S = 0.5


class EndpointGate:
    """Lets one probe call through, holds the rest until :meth:`open` is called, or (with
    ``overlap_s``) until that many seconds after the probe left."""

    def __init__(self, overlap_s: float | None = None) -> None:
        self.is_open = False
        self.overlap_s = overlap_s
        self._probe: asyncio.Future[None] | None = None
        self._probe_at = 0.0

    async def enter(self) -> bool:
        """Wait until the gate is open (or the overlap has passed); returns True when the
        caller is the probe (the caller must then call :meth:`open` once its attempt has
        an outcome)."""
        while not self.is_open:
            if self._probe is None:
                self._probe = asyncio.get_running_loop().create_future()
                self._probe_at = time.monotonic()
                return True
            if self.overlap_s is None:
                await asyncio.shield(self._probe)
                continue
            left = self._probe_at + self.overlap_s - time.monotonic()
            if left <= 0:
                return False
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._probe), left)
        return False

    def open(self) -> None:
        """Let everyone through (the probe's outcome is known, or the run is stopping)."""
        self.is_open = True
        if self._probe is not None and not self._probe.done():
            self._probe.set_result(None)


class CircuitBreaker:
    """Trips after ``threshold`` distinct requests in a row failed with the same kind."""

    def __init__(self, threshold: int = 10) -> None:
        self.threshold = max(1, threshold)
        self.kind: str | None = None
        self.count = 0
        self.last_message = ""
        # Requests already counted once (in any streak), bounded: their retries never count again.
        self._counted: OrderedDict[Hashable, None] = OrderedDict()

    def success(self) -> None:
        self.kind, self.count = None, 0

    def failure(self, kind: str, message: str, request: Hashable | None = None) -> bool:
        """Record a failed attempt of ``request`` (an identity such as its cache key; None:
        every attempt counts as its own request); True when the breaker trips."""
        if kind in NOT_COUNTED:
            return False
        if request is not None and request in self._counted:
            return False  # a retry of a request already counted
        if kind != self.kind:
            self.kind, self.count = kind, 0
        self.last_message = message
        if request is not None:
            self._counted[request] = None
            if len(self._counted) > 100_000:
                self._counted.popitem(last=False)
        self.count += 1
        return self.count >= self.threshold
