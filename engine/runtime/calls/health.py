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
left (was sent: :meth:`EndpointGate.sent`; not when it entered the gate, since it may
still ask the server about itself and wait for quota first), or until its outcome if that
comes first, or until the buckets have refilled what
the preflight took (:meth:`EndpointGate.shorten`, never sooner than ``PREFLIGHT_FLOOR_S``):
waiting past a full bucket only loses quota. Endpoint faults come back in about one
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

**Systematic request faults.** Unless they are all there is: :class:`SystematicFaults`
stops a run whose first calls of a prompt kind all met the same request fault (every prompt
over the window, every prompt filtered), with one line naming it.
"""
from __future__ import annotations

import asyncio
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
# The overlap ends sooner once the preflight's charge has refilled (EndpointGate.shorten): from
# then a full bucket wastes what it refills (0.42 s of quota a run at 600 requests/min before,
# bench.pacing).
# Never sooner than this: about a round trip to a nearby endpoint, TLS handshake included, so a
# fault that fast still stops the run before anything else is sent.
PREFLIGHT_FLOOR_S = 0.1


class EndpointGate:
    """Lets one probe call through, holds the rest until :meth:`open` is called, or (with
    ``overlap_s``) until that many seconds after the probe left."""

    def __init__(self, overlap_s: float | None = None) -> None:
        self.is_open = False
        self.overlap_s = overlap_s
        self._probe: asyncio.Future[None] | None = None
        # Set, and replaced, when the overlap changes mid-probe (the probe sent, an overlap
        # granted or shortened): the others waiting re-read it
        self._changed: asyncio.Future[None] | None = None
        self._sent_at: float | None = None  # when the probe left; the overlap runs from then

    async def enter(self) -> bool:
        """Wait until the gate is open (or the overlap has passed); returns True when the
        caller is the probe (the caller must then call :meth:`open` once its attempt has
        an outcome)."""
        while not self.is_open:
            if self._probe is None:
                loop = asyncio.get_running_loop()
                self._probe, self._changed = loop.create_future(), loop.create_future()
                return True
            assert self._changed is not None
            # Until the probe has left, no overlap runs: a fault it would meet is not yet known
            left = None if self.overlap_s is None or self._sent_at is None else self.overlap_left()
            if left is not None and left <= 0:
                return False
            # asyncio.wait never cancels what it waits on: the futures stay for the others
            await asyncio.wait((self._probe, self._changed), timeout=left, return_when=asyncio.FIRST_COMPLETED)
        return False

    def _wake(self) -> None:
        """The overlap changed: the waiters re-read it."""
        woken, self._changed = self._changed, asyncio.get_running_loop().create_future()
        if woken is not None and not woken.done():
            woken.set_result(None)

    def sent(self) -> None:
        """The probe is leaving now (the caller calls this just before sending it): the
        overlap runs from here."""
        if self._sent_at is None and self._probe is not None:
            self._sent_at = time.monotonic()
            self._wake()

    def overlap_left(self) -> float:
        """Seconds of the overlap still to run (0 when it has passed or there is none; the
        whole overlap while the probe has not left)."""
        if self.overlap_s is None or self._probe is None:
            return 0.0
        if self._sent_at is None:
            return self.overlap_s
        return max(0.0, self._sent_at + self.overlap_s - time.monotonic())

    def shorten(self, seconds: float) -> None:
        """The others may go ``seconds`` from now (never before PREFLIGHT_FLOOR_S after the
        probe left) if that is sooner than the overlap's end; only where there is an overlap
        and the probe has left."""
        left = self.overlap_left()
        if self.overlap_s is None or self._sent_at is None or seconds >= left:
            return
        elapsed = time.monotonic() - self._sent_at
        shorter = max(PREFLIGHT_FLOOR_S, elapsed + max(0.0, seconds))
        if shorter >= self.overlap_s:
            return
        self.overlap_s = shorter
        self._wake()

    def overlap(self, overlap_s: float) -> None:
        """The quota became known while the probe is out (its headers announced it): the
        others go ``overlap_s`` after the probe left, as with a told quota."""
        if self.overlap_s is None:
            self.overlap_s = overlap_s
            if self._probe is not None:
                self._wake()

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


# Request faults that, when every call of a prompt kind meets them, mean the run is set up
# wrong (a window too small for the reports, a filter that takes every prompt, an output cap
# no answer fits in, a quota smaller than every prompt), not that some items are unlucky.
SYSTEMATIC = frozenset({"context_length", "content_filter", "invalid_request", "truncated", "over_quota"})


class SystematicFaults:
    """Trips when the first ``first`` distinct requests of one prompt kind (a template), or
    of the whole run while nothing has succeeded, all failed with the same request fault
    (:data:`SYSTEMATIC`).

    Isolated request faults keep failing only their item (the breaker never counts them):
    this rule looks only at the start of each prompt kind, so a run whose later items meet a
    window or a filter now and then goes on, while a run where *every* prompt so far is over
    the window stops after ``first`` of them instead of grinding through thousands. Per
    kind, because one prompt kind may fit (a short pair comparison) while another never
    does (a whole report).

    While a kind is *suspect* (its only outcomes so far are one request fault; before the
    run's first success, every kind is, once anything failed) its calls go one at a time
    (:meth:`lane`), so a run where every prompt fails sends about ``first`` of them, not
    ``first`` plus a wave of concurrent calls; a success lets everyone through.

    A request sent earlier whose outcome is still unknown is among the first too: while one
    is out (:meth:`Lane.sent`), the rule does not trip (prompts refused unsent, as clearly
    over the window, can fail ten in the time one sent call takes to answer); the next
    failure after it ended does."""

    def __init__(self, first: int = 10) -> None:
        self.first = max(1, first)
        self._working: set[str] = set()  # kinds with a success (or mixed faults): the rule is off
        self._streaks: dict[str, tuple[str, set[Hashable]]] = {}  # kind -> (fault, requests)
        self._probing: set[str] = set()  # lanes with a call through
        self._out: dict[str, int] = {}  # kind -> calls sent whose outcome is not known yet
        self._freed = asyncio.Event()  # set (and replaced) whenever a lane is released

    @property
    def nothing_worked(self) -> bool:
        """No call of the run has succeeded, and some have failed with request faults."""
        return not self._working and bool(self._streaks)

    def _faults(self) -> set[str]:
        return {fault for fault, _ in self._streaks.values()}

    def success(self, kind: str) -> None:
        self._working.add(kind)
        self._streaks.pop(kind, None)

    def failure(self, kind: str, fault: str, request: Hashable) -> bool:
        """Record a request fault of ``request``; True when ``kind`` (or the run, while
        nothing has worked) has now failed ``first`` times in a row the same way."""
        if kind in self._working or fault not in SYSTEMATIC:
            return False
        streak = self._streaks.get(kind)
        if streak is None:
            streak = self._streaks[kind] = (fault, set())
        if streak[0] != fault:  # mixed faults: not one cause; the rule is off for this kind
            self.success(kind)
            return False
        streak[1].add(request)
        return self.count(kind) >= self.first and not self._awaited(kind)

    def _run_wide(self) -> bool:
        """Nothing worked and every failure so far was alike: the streak is the run's, not a kind's."""
        return self.nothing_worked and len(self._faults()) == 1

    def _awaited(self, kind: str) -> bool:
        """A call that counts toward ``kind``'s streak (any call, while nothing worked) was
        sent and has no outcome yet: it may still show the prompts work."""
        if self._run_wide():
            return any(self._out.values())
        return self._out.get(kind, 0) > 0

    def count(self, kind: str) -> int:
        """Requests failed alike so far: of ``kind``, or of the run while nothing worked."""
        if self._run_wide():
            return sum(len(requests) for _, requests in self._streaks.values())
        streak = self._streaks.get(kind)
        return len(streak[1]) if streak is not None else 0

    def lane(self, kind: str) -> Lane:
        """The lane of one call of ``kind`` (see :class:`Lane`)."""
        return Lane(self, kind)

    # the bookkeeping of :class:`Lane`

    def _sent(self, kind: str) -> None:
        self._out[kind] = self._out.get(kind, 0) + 1

    def _ended(self, kind: str) -> None:
        self._out[kind] -= 1
        if not self._out[kind]:
            del self._out[kind]

    def _suspect(self, kind: str) -> str | None:
        """The lane a call of ``kind`` queues in while suspect ("*": the run's, while nothing
        worked); None when it may go at once."""
        if self.nothing_worked:
            return "*"
        return kind if kind in self._streaks and kind not in self._working else None

    def _take(self, key: str) -> bool:
        """Let one call through lane ``key``; False when one is through already."""
        if key in self._probing:
            return False
        self._probing.add(key)
        return True

    async def _wait_freed(self) -> None:
        await self._freed.wait()

    def _free(self, key: str) -> None:
        self._probing.discard(key)
        freed, self._freed = self._freed, asyncio.Event()
        freed.set()


class Lane:
    """One call's passage through :class:`SystematicFaults`: :meth:`wait` before each
    attempt takes its quota and budget (passes at once unless the call's kind is suspect,
    then lets one call through at a time), :meth:`release` once the call has its outcome.
    Calls waiting here hold no quota, concurrency or budget, so the one let through can
    always retry."""

    def __init__(self, faults: SystematicFaults, kind: str) -> None:
        self._faults, self.kind = faults, kind
        self._held: str | None = None
        self._out = False  # this call was sent and its outcome is not known yet

    def sent(self) -> None:
        """The call is being sent (again): until :meth:`ended`, its outcome is awaited."""
        if not self._out:
            self._out = True
            self._faults._sent(self.kind)

    def ended(self) -> None:
        """The call has its outcome (called before that outcome is recorded, and in any
        ``finally``)."""
        if self._out:
            self._out = False
            self._faults._ended(self.kind)

    def failed(self, fault: str, request: Hashable) -> None:
        """Record a request fault as soon as it is known, before the preflight gate opens
        (the pool records the call's outcome again when it ends; a request counts once)."""
        self._faults.failure(self.kind, fault, request)

    async def wait(self) -> bool:
        """Wait for this call's turn; True when it had to wait."""
        f = self._faults
        waited = False
        while self._held is None:
            key = f._suspect(self.kind)
            if key is None:
                return waited
            if f._take(key):
                self._held = key
                return waited
            waited = True
            await f._wait_freed()
        return waited

    def release(self) -> None:
        """The call has its outcome: the next one may go (synchronous, so it runs in any
        ``finally``, cancelled or not)."""
        if self._held is None:
            return
        held, self._held = self._held, None
        self._faults._free(held)
