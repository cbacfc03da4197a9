"""A token bucket's recent takes, replayed when a call's real count arrives.

A bucket charges each call its estimate at the grant; the answer's usage, seconds later,
says what the server charged. Moving the level by the difference is right only while
neither bucket was full in between: a full bucket overflows, and what it lost to the
overflow is lost whatever the counts were. An overestimated call leaves the server's bucket
fuller than ours, so it reaches full first and the refund, applied later, lifts ours above
it; an underestimated one is forgiven by the time ours sat full. With a one-second bucket
and calls near its size, buckets are full at nearly every grant, and the plain difference
put ours a call's miss above the server's.

:class:`BucketHistory` keeps the takes since the last moment every earlier count was known,
and turns a late count into the change it makes to the level *now*: the level replayed with
the real count less the level replayed with the estimate. Pure and clock-free (times are
passed in).
"""
from __future__ import annotations

from collections import deque


class Take:
    """One call's charge: when, our estimate, and the server's count once known."""

    __slots__ = ("at", "estimate", "count")

    def __init__(self, at: float, estimate: float) -> None:
        self.at, self.estimate = at, estimate
        self.count: float | None = None

    def charged(self) -> float:
        return self.estimate if self.count is None else self.count


class BucketHistory:
    """The takes of a bucket of ``rate`` units a second holding ``capacity``, since the
    level was last known with every count in it (the checkpoint). At most ``limit`` takes
    are kept: beyond, the oldest counts as its estimate (a call that never answers must not
    make every answer replay a longer list).

    ``rate`` and ``capacity`` may be changed as the bucket's change (a pace learned from
    429s moves with every answer): the replay then runs at the new ones throughout, a small
    error beside a rate that moves a fraction of a percent a second. Once closed (the bucket was
    replaced: :meth:`close`), a count is taken as the plain difference."""

    def __init__(self, rate: float, capacity: float, limit: int = 512) -> None:
        self.rate, self.capacity, self.limit = rate, capacity, limit
        self.held_until = 0.0  # the bucket refills nothing before this (a sliding window's burst)
        self.closed = False
        self._at = 0.0
        self._level = capacity
        self._takes: deque[Take] = deque()

    def close(self) -> None:
        """The bucket these takes came from is gone: no more replays."""
        self.closed = True
        self._takes.clear()

    def __len__(self) -> int:
        return len(self._takes)

    def took(self, at: float, level_before: float, estimate: float) -> Take:
        """A call was charged ``estimate`` at ``at``, the bucket holding ``level_before``."""
        if not self._takes:  # every earlier count is known: start from the bucket as it is
            self._at, self._level = at, level_before
        take = Take(at, estimate)
        self._takes.append(take)
        if len(self._takes) > self.limit:
            first = self._takes[0]
            if first.count is None:
                first.count = first.estimate
            self._fold()
        return take

    def counted(self, take: Take, count: float, now: float) -> float:
        """Record the server's ``count`` for ``take`` (one of this history's); the change it
        makes to the level at ``now`` (``take.estimate - count`` when no bucket was full
        since the take)."""
        if take.count is not None or self.closed:  # dropped at the limit, or the bucket is gone
            take.count = count
            return take.estimate - count
        before = self._level_at(now)
        take.count = count
        after = self._level_at(now)
        self._fold()
        return after - before

    def _refilled(self, level: float, since: float, until: float) -> float:
        return min(self.capacity, level + max(0.0, until - max(since, self.held_until)) * self.rate)

    def _level_at(self, now: float) -> float:
        level, at = self._level, self._at
        for take in self._takes:
            level, at = self._refilled(level, at, take.at) - take.charged(), take.at
        return self._refilled(level, at, now)

    def _fold(self) -> None:
        """Move the checkpoint past the leading takes whose counts are known."""
        while self._takes and self._takes[0].count is not None:
            take = self._takes.popleft()
            self._level, self._at = self._refilled(self._level, self._at, take.at) - take.charged(), take.at
