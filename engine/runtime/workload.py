"""How many judge asks each method has made and how many it still expects: the counts
the progress display turns into calls done, calls left and an ETA
(:mod:`drscore.engine.runtime.eta`).

A method's items differ in size: one ``quality`` ask per report, up to thirty
``redundancy`` pairs, a FACT support call per cited page. Counting finished items
alone says nothing while a method's items are all still running (the redundancy bar
sat at 0/20 while 300 of its calls were done). So an item may say what it is about to
ask, as soon as it knows (:func:`drscore.engine.runtime.method.expect_calls`: the
pairs it drew, the checklist's items, a page's statement batches), and each ask is
counted as it happens. A method's items that said nothing are estimated from the mean
size of its items that finished or said.

Counters change in the event loop only (one :class:`ItemWork` per item, folded into
one :class:`MethodWork` per method as it goes); the display thread reads plain
numbers through :meth:`MethodWork.snapshot`.
"""
from __future__ import annotations

from typing import Any

import msgspec


class MethodWork(msgspec.Struct):
    """One method's asks: made (and how many went to the network, their tokens), and
    expected by the items still running."""

    started: int = 0  # items begun
    done: int = 0  # items finished (any status)
    asks: int = 0  # judge asks made by its items, answered from anywhere (network, cache, shared)
    calls: int = 0  # of them, sent over the network and answered
    tokens: int = 0  # input + output tokens of those network calls
    finished_asks: int = 0  # asks made by finished items
    announced: int = 0  # running items that said how many asks they make
    announced_asks: int = 0  # asks those items made so far
    announced_left: int = 0  # asks those items said they still make
    unannounced_asks: int = 0  # asks made by running items that said nothing

    def start(self) -> ItemWork:
        self.started += 1
        return ItemWork(self)

    def snapshot(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


class ItemWork:
    """One item's asks; every context of the item (``--samples K`` gives it K) shares it."""

    __slots__ = ("method", "asks", "left", "said")

    def __init__(self, method: MethodWork) -> None:
        self.method, self.asks, self.left, self.said = method, 0, 0, False

    def expect(self, n: int) -> None:
        """The item will make ``n`` more asks than it made so far (added to what it said
        before: an ACE item says 1 for its checklist, then the checklist's items)."""
        n = max(0, int(n))
        m = self.method
        if not self.said:
            self.said = True
            m.announced += 1
            m.unannounced_asks -= self.asks
            m.announced_asks += self.asks
        self.left += n
        m.announced_left += n

    def asked(self, judged: Any | None) -> None:
        """One ask made: ``judged`` is its :class:`drscore.engine.runtime.calls.pool.Judged`
        (None when it failed)."""
        m = self.method
        self.asks += 1
        m.asks += 1
        if self.said:
            m.announced_asks += 1
            if self.left > 0:
                self.left -= 1
                m.announced_left -= 1
        else:
            m.unannounced_asks += 1
        if judged is not None and judged.source == "network":
            m.calls += 1
            m.tokens += judged.input_tokens + judged.output_tokens

    def finish(self) -> None:
        m = self.method
        m.done += 1
        m.finished_asks += self.asks
        if self.said:
            m.announced -= 1
            m.announced_asks -= self.asks
            m.announced_left -= self.left
        else:
            m.unannounced_asks -= self.asks
        self.left = 0


class CallTimes(msgspec.Struct):
    """Time at the judge per network attempt, over the run (for the concurrency bound)."""

    attempts: int = 0
    seconds: float = 0.0

    def add(self, judged: Any) -> None:
        for a, b in getattr(judged, "judge_spans", ()):
            self.attempts += 1
            self.seconds += max(0.0, b - a)

    @property
    def mean(self) -> float | None:
        return self.seconds / self.attempts if self.attempts else None
