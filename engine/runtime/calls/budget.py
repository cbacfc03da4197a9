"""The spending ceiling of a run (``--max-cost``).

Every judge call reserves its worst case before it is sent: its input tokens (see
:func:`input_reservation`) plus its whole ``max_tokens`` of output, at the model's
prices. Reservations and settled spend together never pass the cap, so nothing is sent
that could cross it. When
the answer arrives the reservation is settled from the usage the endpoint returned (and
the unused part is freed for other calls); a call whose outcome is unknown (a timeout
after the request left) keeps its worst case as possibly billed.

A call that does not fit while others are in flight waits for them to settle; a call
that would not fit even with nothing in flight exhausts the budget, and the pool stops
the run (see :class:`drscore.engine.runtime.calls.judging.StopReason`).

Seams: :func:`input_reservation` is the only estimate the cap relies on; a subclass of
:class:`Budget` may keep its ledger elsewhere (shared between processes, say) by
overriding :meth:`Budget.reserve`, :meth:`Budget.settle`, :meth:`Budget.release` and
:meth:`Budget.forfeit`.
"""
from __future__ import annotations

import asyncio
import math

import orjson

from drscore.engine.runtime.calls.judging import ChatRequest
from drscore.engine.runtime.calls.tokens import TokenEstimator, message_features

# Chat formatting adds a few tokens per message (role markers) and a few per request;
# these are generous upper bounds of both, plus the schema hint that transports without
# structured outputs fold into the system prompt.
_PER_MESSAGE = 8
_PER_REQUEST = 64
_SCHEMA_HINT = 256
# Head room over the learned input estimate: the cap holds as long as the server counts no
# more than this much above what its own usage reports taught the estimator.
INPUT_MARGIN = 1.25


def input_token_bound(request: ChatRequest) -> int:
    """An upper bound of the prompt tokens ``request`` can be billed for.

    Byte-level BPE tokenizers (OpenAI, Llama, Qwen, DeepSeek, ...) never make a token of
    less than one byte, so the UTF-8 size of the text bounds its tokens; the response
    schema is billed as input too (as ``response_format`` or folded into the prompt).
    The bound is loose (about 4x for English) on purpose: the cap must hold whatever
    the server's tokenizer.
    """
    total = _PER_REQUEST + _SCHEMA_HINT + len(orjson.dumps(request.schema))
    for m in request.messages:
        total += _PER_MESSAGE + len(m.content.encode("utf-8")) + len(m.role)
    return total


def input_reservation(request: ChatRequest, estimator: TokenEstimator | None) -> int:
    """The input tokens a call reserves: :func:`input_token_bound` until the server's own
    usage has been observed, then the learned estimate with :data:`INPUT_MARGIN` of head
    room (plus the schema, which the estimate does not see), never above the bound. The
    byte bound alone is about four times the real count for English, and would leave up
    to a whole oversized reservation of the cap unspent."""
    bound = input_token_bound(request)
    if estimator is None or not estimator.observations:
        return bound
    learned = estimator.prompt(message_features(request.messages)) * INPUT_MARGIN
    schema = len(orjson.dumps(request.schema)) / 2 + _PER_REQUEST
    return min(bound, math.ceil(learned + schema))


class Budget:
    """A hard ceiling on spend in USD (``cap_usd=None``: no ceiling, only accounting).

    The ceiling is the run's, across its invocations: ``spent_before`` is what the run
    ledger says earlier invocations may have been billed. ``spent`` is settled from returned usage, ``unsettled`` holds the worst cases of
    calls whose outcome is unknown, ``reserved`` the worst cases of calls in flight.
    """

    def __init__(self, cap_usd: float | None = None, *, spent_before: float = 0.0) -> None:
        if cap_usd is not None and cap_usd < 0:
            raise ValueError(f"--max-cost must be >= 0, got {cap_usd}")
        self.cap = cap_usd
        # What earlier invocations of the run may have been billed (the run ledger's paid
        # total plus the worst cases of their calls lost in flight): the cap is the run's.
        self.spent_before = spent_before
        self.spent = 0.0
        self.unsettled = 0.0
        self.reserved = 0.0
        self.in_flight = 0
        self.exhausted = False
        self.closed = False
        self._changed: asyncio.Event | None = None

    @property
    def committed(self) -> float:
        """What may already have been billed, by this run in every invocation: settled
        spend plus unknown outcomes."""
        return self.spent_before + self.spent + self.unsettled

    def fits_alone(self, worst_usd: float) -> bool:
        """Whether a call costing at most ``worst_usd`` fits with nothing else in flight."""
        return self.cap is None or self.committed + worst_usd <= self.cap

    def try_reserve(self, worst_usd: float) -> bool | None:
        """Reserve now if the call fits: True; False when it never will (exhausted, or
        closed); None when it must wait for calls in flight to settle."""
        if self.closed:
            return False
        if self.cap is not None:
            if not self.fits_alone(worst_usd):
                self.exhausted = True
                return False
            if self.committed + self.reserved + worst_usd > self.cap:
                return None
        self.reserved += worst_usd
        self.in_flight += 1
        return True

    async def reserve(self, worst_usd: float) -> bool:
        """Reserve ``worst_usd`` for one call. Waits while calls in flight hold the room
        it needs; returns False (and marks the budget exhausted) when the call would not
        fit even alone, or when the budget was closed."""
        while True:
            done = self.try_reserve(worst_usd)
            if done is not None:
                return done
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()

    def settle(self, worst_usd: float, actual_usd: float) -> None:
        """The call was answered and cost ``actual_usd`` (from its usage)."""
        self.spent += actual_usd
        self._end(worst_usd)

    def release(self, worst_usd: float) -> None:
        """The call was not billed (refused, or answered with an error status)."""
        self._end(worst_usd)

    def forfeit(self, worst_usd: float) -> None:
        """The call's outcome is unknown (it may have been billed): keep its worst case."""
        self.unsettled += worst_usd
        self._end(worst_usd)

    def close(self) -> None:
        """Refuse every further reservation (the run is stopping) and wake waiters."""
        self.closed = True
        self._notify()

    def _end(self, worst_usd: float) -> None:
        self.in_flight -= 1
        # Float residue must not pile up into phantom reservations.
        self.reserved = self.reserved - worst_usd if self.in_flight else 0.0
        self._notify()

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None
