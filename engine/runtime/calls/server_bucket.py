"""A reserving server's token bucket, replayed from the last count it sent.

Against a reserving endpoint (:mod:`drscore.engine.runtime.calls.quota_charge`) the server's
bucket moves at three kinds of moment: it admits a call (charging its prompt guess and the
whole output cap), an answer leaves it (the unused cap comes back), and time refills it up to
its size. A count (``remaining``, with an answer) is its level right after it admitted that
call. Moving our bucket by that count less our level at the grant, less what moved ours since,
holds only while neither bucket sat full, and only where every give-back that reached us since
the grant had also reached the server's count. Neither holds with a one-second bucket and calls
of several times its size: both buckets sit full or in debt nearly all the time, and answers
come back all through the seconds a count takes to arrive. Logged at both ends (``bench.pacing
--workload quality --charge reserved``), a give-back the server made two milliseconds after
admitting a call was read as a miss of ours, the next count undid it, and the bucket ended
260 tokens above the server's: the next call met a 429.

So the level is replayed instead: from the count, through the calls granted after the one it
came with and the give-backs that reached us after that call's grant, each in the order it
happened, with the refill between them capped at the bucket's size. Replayed from one count to
the next, it also predicts the next count: what the server then reports above the prediction
is what it charged the prompts of the calls in between less than we did
(:class:`~drscore.engine.runtime.calls.quota_charge.ReservedCharge` learns its guess from it),
unless a give-back whose order against a grant could not be told lowered the prediction.

Pure and clock-free: times are passed in.
"""
from __future__ import annotations

from collections import deque

# A give-back that reaches us this soon after a call's grant may have left the server before
# or after it admitted that call, so that call's count is not used: on loopback the mock
# admitted calls 1.5-3 ms after the grant and its answers reached us about 1 ms after leaving;
# over a network both take longer. The window for an endpoint whose connection time is
# measured (RateLimiter.measured_connect) is this plus twice that time, where that is shorter:
# the mock's give-backs that came before an admission reached us at most 2.9 ms after its grant
# (eight logged runs).
AMBIGUOUS_S = 0.05
NEAR_AMBIGUOUS_S = 0.01
# Events kept at most: an endpoint that never sends a count (a told quota without headers)
# must not grow the record; beyond it the next count predicts nothing.
EVENTS_MAX = 4096


class _Event:
    """A take (``seq`` > 0: the call's grant order) or a give-back (``seq`` 0) at ``at``."""

    __slots__ = ("at", "delta", "seq")

    def __init__(self, at: float, delta: float, seq: int) -> None:
        self.at, self.delta, self.seq = at, delta, seq


def given_back(level: float, amount: float, capacity: float, recent: float) -> float:
    """The level after a give-back of ``amount`` reached a bucket at ``level``, ``recent``
    having been taken by calls granted too shortly before to tell whether the server had
    admitted them yet: the lower of the two orders. Given back after their admission, the
    bucket holds ``level + amount``; before it, the server's bucket may have been full and
    overflowed, then those calls took ``recent``: ``capacity - recent`` (logged at both ends: a
    give-back that reached us 2 ms after a call was granted at a full bucket had overflowed
    the server's before it admitted the call, and ours, 961 tokens above it, met a 429)."""
    return min(level + amount, max(level, capacity - recent))


def _replay(level: float, at: float, events: list[_Event], until: float, rate: float,
            capacity: float, window: float) -> tuple[float, bool]:
    """``level`` at ``at``, moved by ``events`` in order (none earlier than ``at``) and refilled
    up to ``capacity``: the level at ``until``, and whether a give-back's unknown order lowered
    it (the lower order taken, which the server's may not have been): one that came within
    ``window`` of a grant."""
    takes: deque[_Event] = deque()  # those of the last window
    lowered = False
    for event in events:
        t = max(event.at, at)
        level = min(capacity, level + (t - at) * rate)
        at = t
        while takes and takes[0].at < t - window:
            takes.popleft()
        if event.seq:
            level += event.delta
            takes.append(event)
        else:
            kept = given_back(level, event.delta, capacity, -sum(e.delta for e in takes))
            lowered = lowered or kept < min(capacity, level + event.delta) - 1.0
            level = kept
    return min(capacity, level + max(0.0, until - at) * rate), lowered


class ServerBucket:
    """The takes and give-backs of a reserving server's token bucket since the last count
    followed (the anchor: its level when it admitted a call). ``start``, where known, is the
    first anchor: (when, level, the grant order of the last call before it). ``ambiguous_s``:
    how soon after a grant a give-back's order against it cannot be told."""

    def __init__(self, start: tuple[float, float, int] | None = None, ambiguous_s: float = AMBIGUOUS_S) -> None:
        self._anchor = start
        self._events: deque[_Event] = deque()
        self.ambiguous_s = ambiguous_s

    def __len__(self) -> int:
        return len(self._events)

    def _record(self, event: _Event) -> None:
        self._events.append(event)
        if len(self._events) > EVENTS_MAX:
            self._events.popleft()
            self._anchor = None  # the replay from it misses an event

    def took(self, seq: int, at: float, amount: float) -> None:
        """Call ``seq`` was granted at ``at`` and charged ``amount``."""
        self._record(_Event(at, -amount, seq))

    def refused(self, seq: int) -> None:
        """Call ``seq`` met a 429: the server charged it nothing."""
        for event in reversed(self._events):
            if event.seq == seq:
                event.delta = 0.0
                return

    def gave_back(self, at: float, amount: float) -> None:
        """An answer that reached us at ``at`` showed the server gave ``amount`` back."""
        self._record(_Event(at, amount, 0))

    def recent(self, at: float) -> float:
        """What the calls granted in the last ``ambiguous_s`` before ``at`` took (see :func:`given_back`)."""
        taken = 0.0
        for event in reversed(self._events):
            if event.at < at - self.ambiguous_s:
                break
            if event.seq:
                taken -= event.delta
        return taken

    def _split(self, seq: int, granted_at: float) -> tuple[list[_Event], list[_Event]] | None:
        """The events in call ``seq``'s count and those after it; None when a give-back came
        too near its grant to tell."""
        before: list[_Event] = []
        after: list[_Event] = []
        for event in self._events:
            if event.seq:
                (before if event.seq <= seq else after).append(event)
            elif event.at <= granted_at:
                before.append(event)
            elif event.at <= granted_at + self.ambiguous_s:
                return None
            else:
                after.append(event)
        return before, after

    def follow(self, seq: int, granted_at: float, admitted_at: float, level: float, now: float,
               rate: float, capacity: float) -> tuple[float | None, float] | None:
        """The server had ``level`` right after admitting call ``seq`` (granted at ``granted_at``,
        admitted about ``admitted_at``). Returns the count less what the replay from the
        previous one predicted (None with nothing to predict from) and the level at ``now``; or
        None when the count cannot be placed among the give-backs, and nothing changes."""
        split = self._split(seq, granted_at)
        if split is None:
            return None
        before, after = split
        predicted = None
        if self._anchor is not None and self._anchor[2] < seq:
            at, anchor_level, _ = self._anchor
            predicted, lowered = _replay(anchor_level, at, before, admitted_at, rate, capacity, self.ambiguous_s)
            if lowered:
                # A give-back replayed as made before a call it may have followed: the count
                # holds it where the server had it later, and what it then holds above the
                # prediction is that give-back, not cheaper prompts (logged: a count 485 above
                # the prediction, 434 of it a give-back of 959 that reached us 7 ms after a
                # grant; in another run the wide-character ratio so learned fell below the
                # server's, and a call met a 429).
                predicted = None
        self._anchor = (admitted_at, level, seq)
        self._events = deque(after)
        return (None if predicted is None else level - predicted), _replay(level, admitted_at, after, now, rate,
                                                                           capacity, self.ambiguous_s)[0]

    def at_most(self, seq: int, granted_at: float, admitted_at: float, level: float, now: float, rate: float,
                capacity: float) -> float | None:
        """The level at ``now`` if the server had at most ``level`` when it admitted call
        ``seq`` (a count floored at 0, whose depth is unknown): an upper bound, nothing recorded."""
        split = self._split(seq, granted_at)
        return None if split is None else _replay(level, admitted_at, split[1], now, rate, capacity,
                                                  self.ambiguous_s)[0]
