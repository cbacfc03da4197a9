"""How many judge asks each method has made and how many it still expects, per prompt
template: the counts the progress display turns into calls done, calls left and an ETA
(:mod:`drscore.engine.runtime.eta`).

A method's items differ in size: one ``quality`` ask per report, up to thirty
``redundancy`` pairs, a FACT support call per batch of a cited page's statements.
Counting finished items alone says nothing while a method's items are all still
running (the redundancy bar sat at 0/20 while 300 of its calls were done). So an item
may say what it is about to ask as soon as it knows
(:func:`drscore.engine.runtime.method.expect_calls`: the pairs it drew, the checklist's
items, a page's statement batches), and each ask is counted as it happens. A method's
items that said nothing are estimated from the mean of its items that finished or said.

Counts are kept per template because the calls of one method differ in size (an ACE
checklist sees the task, each of its items the whole report): the token quota is
spent by template, and a template's tokens per call are learned from its answers, or
until then taken from the size the method said its calls carry.

Counters change in the event loop only (one :class:`ItemWork` per item, folded into one
:class:`MethodWork` per method as it goes); the display thread reads plain numbers
through :meth:`MethodWork.snapshot`.
"""
from __future__ import annotations

from typing import Any

import msgspec


class TemplateWork(msgspec.Struct):
    """One template's asks within a method."""

    asks: int = 0  # made, answered from anywhere (network, cache, a call in flight) or failed
    calls: int = 0  # of them, sent over the network and answered
    tokens: int = 0  # input + output tokens of those network calls (input alone: MethodWork.quota_counts_output)
    finished_asks: int = 0  # made by finished items
    announced_asks: int = 0  # made by running items that said what they ask
    announced_left: int = 0  # still to make, as those items said
    unannounced_asks: int = 0  # made by running items that said nothing
    # Sizes of the text calls carry, as (ASCII, wide) token estimates by the fixed
    # character rule (calls.tokens.split_estimate), turned into tokens with the server's
    # counting as learned when needed. Every call said with a size, summed (the mean size
    # of an item's calls); the said calls not yet asked (reports differ in length: the
    # calls left are those of particular items); and the answered calls that had a size,
    # with their tokens (how the size relates to a call's tokens: the template around the
    # text, the answer).
    hinted: int = 0
    hinted_ascii: float = 0.0
    hinted_wide: float = 0.0
    left_sized: int = 0
    left_ascii: float = 0.0
    left_wide: float = 0.0
    answered_sized: int = 0
    answered_ascii: float = 0.0
    answered_wide: float = 0.0
    answered_tokens: int = 0


class MethodWork(msgspec.Struct):
    started: int = 0  # items begun
    done: int = 0  # items finished (any status)
    announced: int = 0  # running items that said what they ask
    templates: dict[str, TemplateWork] = msgspec.field(default_factory=dict)
    # False where the token quota counts the prompt alone (Gemini's): a call's tokens are then its input
    quota_counts_output: bool = True

    def start(self) -> ItemWork:
        self.started += 1
        return ItemWork(self)

    def template(self, name: str) -> TemplateWork:
        work = self.templates.get(name)
        if work is None:
            work = self.templates[name] = TemplateWork()
        return work

    def snapshot(self) -> dict[str, Any]:
        # a copy of plain numbers (the display thread reads it while the loop goes on)
        return {"started": self.started, "done": self.done, "announced": self.announced,
                "templates": {t: msgspec.structs.asdict(w) for t, w in list(self.templates.items())}}


class ItemWork:
    """One item's asks per template; every context of the item (``--samples K`` gives it
    K) shares it."""

    __slots__ = ("method", "asks", "left", "said", "sizes")

    def __init__(self, method: MethodWork) -> None:
        self.method = method
        self.asks: dict[str, int] = {}
        self.left: dict[str, int] = {}
        self.sizes: dict[str, tuple[float, float]] = {}  # the size said of each call of a template
        self.said = False

    def expect(self, n: int, template: str, size: tuple[float, float] | None = None) -> None:
        """The item will make ``n`` more asks of ``template`` than it said before
        (negative: fewer, when a first guess turns out high), each carrying text of
        ``size`` (its ASCII and wide token estimates) if given."""
        m = self.method
        if not self.said:
            self.said = True
            m.announced += 1
            for t, k in self.asks.items():
                work = m.template(t)
                work.unannounced_asks -= k
                work.announced_asks += k
        work = m.template(template)
        before = self.left.get(template, 0)
        after = max(0, before + int(n))
        self.left[template] = after
        work.announced_left += after - before
        if size is not None and n > 0:
            work.hinted += int(n)
            work.hinted_ascii += int(n) * size[0]
            work.hinted_wide += int(n) * size[1]
            self.sizes[template] = size
        self._sized_left(template, after - before)

    def asked(self, template: str, judged: Any | None) -> None:
        """One ask of ``template`` made: ``judged`` is its
        :class:`drscore.engine.runtime.calls.pool.Judged` (None when it failed)."""
        work = self.method.template(template)
        self.asks[template] = self.asks.get(template, 0) + 1
        work.asks += 1
        if self.said:
            work.announced_asks += 1
            if self.left.get(template, 0) > 0:
                self.left[template] -= 1
                work.announced_left -= 1
                self._sized_left(template, -1)
        else:
            work.unannounced_asks += 1
        if judged is not None and judged.source == "network":
            tokens = judged.input_tokens + (judged.output_tokens if self.method.quota_counts_output else 0)
            work.calls += 1
            work.tokens += tokens
            size = self.sizes.get(template)
            if size is not None:
                work.answered_sized += 1
                work.answered_ascii += size[0]
                work.answered_wide += size[1]
                work.answered_tokens += tokens

    def _sized_left(self, template: str, change: int) -> None:
        size = self.sizes.get(template)
        if size is None or not change:
            return
        work = self.method.template(template)
        work.left_sized += change
        work.left_ascii += change * size[0]
        work.left_wide += change * size[1]

    def finish(self) -> None:
        m = self.method
        m.done += 1
        if self.said:
            m.announced -= 1
        for t in set(self.asks) | set(self.left):
            work = m.template(t)
            asks = self.asks.get(t, 0)
            work.finished_asks += asks
            if self.said:
                work.announced_asks -= asks
                work.announced_left -= self.left.get(t, 0)
                self._sized_left(t, -self.left.get(t, 0))
            else:
                work.unannounced_asks -= asks
        self.left.clear()


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
