"""What a header-less endpoint's 429s teach: :class:`RateLearner`, the rate it sustains in one
dimension (requests or tokens per second), and the proofs its calls make of it.

The limiter (:mod:`drscore.engine.runtime.calls.limits`) keeps one learner per dimension and
paces the one :mod:`drscore.engine.runtime.calls.binding` says binds. Pure and clock-driven.
"""
from __future__ import annotations

import bisect
import math
import time
from collections import deque
from typing import Callable, NamedTuple

import numpy as np


# The calls a learner keeps for :meth:`RateLearner.proven_rate`: the last this many, sent in the
# last this many seconds (its search is quadratic in them).
SENT_KEPT = 256
SENT_KEPT_S = 120.0
# The share of the proven rate a learner paces at after a 429 (bench.headerless, tokens,
# three runs each of an earlier form: limit / span at 0.98 0.948-0.969, at 0.99 0.968-0.971, at
# 1.0 0.926-0.956 with 4-5 429s of 105 instead of 3)
PROVEN_SHARE = 0.99
# 429s in a row met while pacing within the proven rate before proofs are no longer believed
PROVEN_MISSES = 2
# Seconds from a proven cut's pause until the pace is back at the proof. The pace follows a
# cubic in the time since (TCP CUBIC's shape): flat near the proof, about the limit, where a
# linear probe crossed it within the next seconds (bench.headerless, tokens: with a linear
# step, at a quarter of the speed beyond the proof, a third 429 in 3 runs of 15, once at
# 9,972 tokens a second against the limit's 10,000; with the cubic, in 2 runs of 40 of the
# forms tried, neither from the probe, and in 4 of 49 of the final code, not logged), then
# ever faster: at twice this the pace is 7 proof margins beyond the proof, at three times 26.
PROBE_S = 30.0
# Seconds an uncertain first cut's slow start takes to grow from its pace to the refusal's bound
# (see :meth:`RateLearner.rate_limited`): at a start-up 429 on the 3rd call, after two calls of
# one size, requests were paced at the 80 a minute the two proved, under a bound of 365, and 15% a
# second took until 10-14 s to meet the token quota that had refused it (bench.headerless,
# --p80-early 2: 0.84-0.88 of the quota; 0.93-0.96 with this and the rest of the uncertain cut).
UNCERTAIN_REACH_S = 2.0


# What a cut changes, by attribute: the state a cut is redone from (RateLearner.refused)
_CUT_STATE = ("pace", "_base", "limit", "cuts", "_cut_until", "_grown_at", "_episode", "_proven_misses", "proven",
              "_proven_ceiling", "_first_growth")


def strain_of(evidence: tuple[float, float] | None) -> float | None:
    """How far a refusal is from what one bucket of its dimension explains, from its
    :meth:`RateLearner.evidence`: the proven rate over the bound (above 1: no bucket of the rate
    the calls proved would have refused it). None without evidence."""
    return None if evidence is None else evidence[0] / evidence[1]


class _Cut(NamedTuple):
    """A learner's cut as it was made: the state before it and its inputs."""
    state: tuple[object, ...]  # the _CUT_STATE attributes' values
    at: float
    pause_s: float
    admitted: float | None
    seq: int | None
    bound: float | None
    uncertain: bool


class RateLearner:
    """The rate a header-less endpoint sustains, learned from its 429s alone: requests per
    second, or (``success(units=tokens)``) tokens per second.

    Until the first 429 it paces nothing (:meth:`rate` is None). At the first 429 it sets
    the pace to ``decrease`` x the rate the endpoint had been accepting over the last
    ``window_s`` (the successes per second; often measured on one or two answers). That
    measure is rough, so until the second 429 the pace grows exponentially
    (``first_increase_per_s`` compounded per second), as TCP's slow start finds its
    threshold before congestion avoidance.

    With ``admitted`` (the limiter's running total of units the endpoint took: sent, less
    refused, corrected by usage; :meth:`started` marks the first request) the first cut
    measures from the first request instead: admitted units over the time since plus
    ``burst_s``, the quota the server's full bucket gave on top of its rate.

    Told each call sent (:meth:`sent`; :meth:`refused` at its 429, the server's count at
    :meth:`success`), from the second cut on it paces at ``PROVEN_SHARE`` x
    :meth:`proven_rate`, a lower bound of the limit that the stretch before a 429 makes
    tight (it drained the server's bucket); the first cut paces at no less than that share
    of the proof. A 429 met while pacing within the proof (a token estimate
    off by a few percent) costs no deeper cut; two in a row (not counting one within
    ``window_s`` of the last pause's end), and proofs are no longer believed. Once proven,
    a 429 never raises the pace. Without proofs, the second cut starts from the lower of
    the pace and the accepted rate (unless the pause ended under a second ago: the window
    then holds nothing new), later cuts from the pace (multiplicative decrease), and a ``noisy``
    learner (tokens) never cuts below ``decrease`` x what the endpoint admitted since the
    previous 429. Between cuts the pace grows by ``increase_per_s`` x the pace set at the
    cut per second (additive increase); after a proven cut, along a cubic in the time since
    the pause, back at the proof after ``PROBE_S`` and ever faster beyond it. One
    cut per episode: the 429s of calls already in flight and the pause the server asked
    for (``Retry-After``) belong to the same one. Growth waits for the pause to end. Pure
    and clock-driven (tests pass a fake clock).
    """

    def __init__(self, *, decrease: float = 0.92, increase_per_s: float = 0.004, first_increase_per_s: float = 0.15,
                 window_s: float = 4.0, burst_s: float = 1.0, noisy: bool = False,
                 min_rps: float = 1 / 60, max_rps: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.decrease, self.increase_per_s, self.window_s = decrease, increase_per_s, window_s
        self.first_increase_per_s = first_increase_per_s
        self.burst_s, self.noisy = burst_s, noisy
        self.min_rps, self.max_rps, self.clock = min_rps, max_rps, clock
        self.unit_guess = 1.0  # units of one request (a token learner sets the refused request's size)
        self.pace: float | None = None  # units per second; None: not learned yet
        self.limit: float | None = None  # the limit measured between the last two 429 episodes
        self.cuts = 0
        self._base = 0.0  # the pace set at the last cut: the unit of the additive step
        self._grown_at = 0.0
        self._cut_until = 0.0
        self._episode: tuple[float, float] | None = None  # (time, admitted total) at the last cut
        self._successes: deque[tuple[float, float]] = deque()
        self._units = 0.0
        self._proven_misses = 0  # 429s met while pacing within the proven rate
        self.proven: float | None = None  # the proof at the last cut after the first (units per second)
        self._proven_ceiling: float | None = None  # the proven rate the pace was last cut to a share of
        # calls not refused: (number, sent at, units, whether the backend told it left)
        self._sent: list[tuple[int, float, float, bool]] = []
        self._tells = False  # the backend tells when a request leaves (:meth:`left`)
        self._last_cut: _Cut | None = None  # the last cut's inputs and the state before it, to redo it
        self._first_growth = first_increase_per_s  # the slow start's growth a second (faster after an uncertain cut)

    def rate(self) -> float | None:
        return self.pace

    def pausing(self, now: float) -> bool:
        """Within the pause of the last cut: a 429 met now belongs to that episode."""
        return now < self._cut_until

    def echoes(self, now: float) -> bool:
        """A 429 now would be an echo of the last cut, a proven one: it comes within
        ``window_s`` of the end of that cut's pause, where the calls of the stretch before it
        may still hold the server's bucket in debt (see :meth:`rate_limited`)."""
        return self.cuts >= 2 and self._proven_ceiling is not None and now < self._cut_until + self.window_s

    def _forget(self, now: float) -> None:
        while self._successes and self._successes[0][0] < now - self.window_s:
            _, units = self._successes.popleft()
            self._units -= units

    def accepted_rate(self, now: float) -> float | None:
        """Units answered per second over the last ``window_s`` (None with fewer than 2
        answers); the first answer marks the start, so its own units are not counted."""
        self._forget(now)
        if len(self._successes) < 2:
            return None
        first, first_units = self._successes[0]
        span = max(now - first, 1e-3)
        return (self._units - first_units) / span

    def started(self, at: float) -> None:
        """The first request left at ``at`` (the measures of admitted units start there)."""
        if self._episode is None:
            self._episode = (at, 0.0)

    def sent(self, seq: int, at: float, units: float = 1.0) -> None:
        """Call number ``seq`` (numbered in the order calls leave) of ``units`` left at ``at``,
        for :meth:`proven_rate`."""
        self._sent.append((seq, at, units, False))
        while len(self._sent) > SENT_KEPT or self._sent[0][1] < at - SENT_KEPT_S:
            self._sent.pop(0)

    def left(self, seq: int, at: float) -> None:
        """Call ``seq`` left at ``at`` (its request written), later than :meth:`sent` was
        told: its time is moved there, as is the start of the first measure for the first call.
        From the first call told so, a call not yet told proves nothing: the endpoint has not
        seen it."""
        self._tells = True
        i = self._sent_index(seq)
        if i is not None:
            _, granted, units, _ = self._sent[i]
            self._sent[i] = (seq, max(at, granted), units, True)
            if seq == 1 and self.cuts == 0 and self._episode is not None and self._episode[1] == 0.0:
                self._episode = (max(at, self._episode[0]), 0.0)

    def taken_before(self, seq: int) -> int:
        """How many calls kept went before call ``seq`` (refused ones taken out)."""
        return len(self._kept_sent(seq))

    def _sent_from(self, seq: int) -> int:
        """The position of call ``seq`` in the calls kept, or of the first sent after it."""
        return bisect.bisect_left(self._sent, (seq, -math.inf, -math.inf, False))

    def _sent_index(self, seq: int) -> int | None:
        i = self._sent_from(seq)
        return i if i < len(self._sent) and self._sent[i][0] == seq else None

    def _kept_sent(self, before: int | None) -> list[tuple[int, float, float, bool]]:
        """The calls kept: those granted before call ``before`` and, where the backend tells,
        that have left, in the order they were granted."""
        sent = self._sent if before is None else self._sent[:self._sent_from(before)]
        if self._tells:  # a call granted but still held before its send (a stalled loop) was not taken yet
            sent = [s for s in sent if s[3]]
        return sent

    def _kept(self, before: int | None) -> tuple[np.ndarray, np.ndarray]:
        """The send times and units of the calls kept (:meth:`_kept_sent`), in the order they left."""
        sent = self._kept_sent(before)
        n = len(sent)
        at, units = np.fromiter((s[1] for s in sent), float, n), np.fromiter((s[2] for s in sent), float, n)
        order = np.argsort(at, kind="stable")  # in the order they left, which a stalled call may change
        return at[order], units[order]

    def proven_rate(self, before: int | None = None) -> tuple[float, float] | None:
        """The highest rate the calls sent (before call number ``before``: at a 429, those
        sent after the refused call may be refused too) prove the endpoint holds, and the
        stretch (seconds) that proves it; None with fewer than two calls sent.

        Over a stretch of ``w`` seconds from one call's send to a later one's that got in,
        the endpoint took the ``t`` units sent in between; its bucket held at most ``b`` =
        ``burst_s`` seconds of its rate ``r`` at the start, and still held the later call's
        ``u`` units (or was full: a call larger than the bucket waits for a full one) when
        that call got in. So ``r*b + r*w - t >= min(u, r*b)``: ``r >= (t + u) / (w + b)``
        where ``r*b >= u``, else ``r >= t / w``. A lower bound (a refused call is taken out
        at its 429, an answered one counts as the server counted it), tight over a stretch
        that drained a full bucket, as the one before a 429 does.
        """
        at, units = self._kept(before)
        n = len(at)
        if n < 2:
            return None
        prior = np.concatenate(([0.0], np.cumsum(units)))[:-1]  # units sent before each call
        # rows: the call that ends the stretch; columns: the one that starts it
        taken = prior[:, None] - prior[None, :]
        stretch = at[:, None] - at[None, :]
        later = units[:, None]
        b = self.burst_s
        with np.errstate(divide="ignore", invalid="ignore"):  # the pairs without a stretch are dropped below
            fits = np.maximum(later / b, (taken + later) / (stretch + b))  # rates whose bucket holds the call
            drains = taken / stretch  # if under later / b, a full bucket let the call in
        rates = np.where(drains < later / b, np.minimum(fits, drains), fits)
        rates = np.where(stretch > 0, rates, 0.0)
        best = int(np.argmax(rates))
        end, start = divmod(best, n)
        return float(rates[end, start]), float(stretch[end, start])

    def evidence(self, seq: int, units: float, at: float) -> tuple[float, float] | None:
        """What the refusal of call ``seq`` (``units`` of it, sent at ``at``) says of this
        dimension's limit: above the rate the calls before it proved (:meth:`proven_rate`), under
        :meth:`bound`, if one bucket of it refused the call. None without either."""
        proof = self.proven_rate(before=seq)  # None unless two calls or more went before it
        bound = self.bound(seq, units, at)
        return None if proof is None or bound is None else (proof[0], bound)

    def bound(self, seq: int, units: float, at: float) -> float | None:
        """The highest rate of a bucket that refused call ``seq`` (``units`` of it, sent at
        ``at``); None with fewer than two calls before it.

        A bucket that refused the call held less than ``u`` of it. From any call ``s`` before it
        the bucket refilled at ``r`` and paid the ``t`` units sent since, so without reaching its
        capacity ``r*w - t < u`` over the ``w`` seconds; had it filled (``r*b``) just before a
        later call ``c``, ``r*(b + w_c) - t_c < u``. So ``r`` is under the larger of the two
        for each ``s``, and under the least of those over all ``s``.
        """
        sent_at, units_before = self._kept(seq)
        if len(sent_at) < 2:
            return None
        taken = np.cumsum(units_before[::-1])[::-1] + units  # from each call through the refused one
        w = at - sent_at
        with np.errstate(divide="ignore"):
            unfilled = np.where(w > 0, taken / w, np.inf)
        filled = np.maximum.accumulate(np.append(taken / (self.burst_s + w), units / self.burst_s)[::-1])[::-1][1:]
        bound = float(np.min(np.maximum(unfilled, filled)))
        return bound if bound > 0 else None

    def resume(self, rate: float, now: float) -> None:
        """Start from the rate (units per second) an earlier run's calls proved, as after a
        proven cut: pace at ``PROVEN_SHARE`` of it, back at it after ``PROBE_S`` and faster
        beyond, the next 429 cut as any later one is. Nothing was proven in this run yet."""
        self.pace = self._base = self._within_bounds(PROVEN_SHARE * rate)
        self._proven_ceiling = rate
        self.cuts = 2  # past the first cut's slow start: the proof is the earlier run's
        self._cut_until = self._grown_at = now

    def reopen(self, now: float) -> None:
        """Grow the pace again as after the first cut (``first_increase_per_s`` compounded per
        second) until the next 429, which is cut as a second one is: the pace stands below a
        limit it has not met since (the limiter's probe of a request pace that leaves the
        token quota unused, see :mod:`drscore.engine.runtime.calls.binding`)."""
        if self.pace is None:
            return
        self.cuts = 1
        self._base = self.pace
        self._first_growth = self.first_increase_per_s
        self._proven_ceiling = None
        self._grown_at = max(now, self._cut_until)

    def refused(self, seq: int) -> bool:
        """Call number ``seq`` was refused: the endpoint took nothing of it. True when the
        pace changed: the last cut counted the call in its proof (its 429 came back behind
        the one that cut, within that cut's pause) and was done again without it."""
        i = self._sent_index(seq)
        if i is None:
            return False
        units = self._sent[i][2]
        del self._sent[i]
        cut = self._last_cut
        if cut is None or cut.seq is None or seq >= cut.seq or not self.pausing(self.clock()):
            return False
        # Calls sent a few milliseconds apart reach the server in either order: the proof at
        # the cut had this one as taken, and paced and reported from that (5 a second proven of
        # a 4-a-second bucket: tests/cli/test_run_robust.py's run reported 299 requests a minute
        # of 240 in 2 runs of 46 here).
        # Nothing grew within the pause, so restoring the state before the cut loses nothing.
        self._restore(cut.state)
        admitted = None if cut.admitted is None else cut.admitted - units
        self.rate_limited(cut.pause_s, admitted, cut.seq, now=cut.at, bound=cut.bound, uncertain=cut.uncertain)
        return True

    def _state(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in _CUT_STATE)

    def _restore(self, state: tuple[object, ...]) -> None:
        for name, value in zip(_CUT_STATE, state, strict=True):
            setattr(self, name, value)

    def success(self, units: float = 1.0, seq: int | None = None) -> bool:
        """Record an answered call (``units`` of it: 1 request, or its tokens, as the server
        counted them; ``seq``: its number, see :meth:`sent`); True when the pace changed."""
        now = self.clock()
        i = self._sent_index(seq) if seq is not None else None
        recounted = False
        if i is not None:
            seq_, at, estimate, told = self._sent[i]
            self._sent[i] = (seq_, at, units, told)
            recounted = units != estimate and self._reprove(seq_)
        self._successes.append((now, units))
        self._units += units
        self._forget(now)  # bounded: a long run without 429s keeps only the window
        if self.pace is None or now < self._cut_until:
            return recounted
        start = max(self._grown_at, self._cut_until)
        self._grown_at = now
        dt = max(0.0, now - start)
        if self.cuts == 1:
            # The first cut rests on a rough measure: grow exponentially until the next 429
            # shows where the limit is.
            grown = self.pace * (1.0 + self._first_growth) ** dt
        elif self._proven_ceiling is not None:
            since = max(0.0, now - self._cut_until)
            gap = max(self._proven_ceiling - self._base, (1.0 - PROVEN_SHARE) * self._base)
            grown = max(self.pace, self._base + gap * (since / PROBE_S) ** 3)
        else:
            grown = self.pace + self.increase_per_s * self._base * dt
        self.pace = self._within_bounds(grown)  # grown from a pace already within them: min_rps holds
        return True

    def _within_bounds(self, rate: float) -> float:
        """``rate`` held within ``min_rps`` and ``max_rps`` (where set)."""
        rate = max(self.min_rps, rate)
        return min(rate, self.max_rps) if self.max_rps else rate

    def _reprove(self, seq: int) -> bool:
        """Call ``seq``'s count came in, unlike its estimate: where the last cut was a proven one
        and counted the call, its proof is made again on the count, and the pace and the cubic's
        base moved with it (True). At the cut, the calls still in flight were estimates: the
        token proof at the second cut ran up to 2.4% above what the counts proved later, the pace
        then 0.4% above the limit, and a third 429 followed (bench.headerless, tokens, stop 78)."""
        cut = self._last_cut
        if (cut is None or cut.seq is None or seq >= cut.seq or self.cuts < 2 or self._proven_ceiling is None
                or self.pace is None):
            return False
        proof = self.proven_rate(before=cut.seq)
        if proof is None or proof[0] <= 0 or proof[0] == self._proven_ceiling:
            return False
        scale = proof[0] / self._proven_ceiling
        self._proven_ceiling = self.proven = proof[0]
        self.pace, self._base = self._within_bounds(self.pace * scale), self._within_bounds(self._base * scale)
        return True

    def rate_limited(self, pause_s: float, admitted: float | None = None, seq: int | None = None,
                     now: float | None = None, *, bound: float | None = None, uncertain: bool = False) -> bool:
        """Record a 429 (the server asked for ``pause_s``; ``admitted``: the running total
        of units the endpoint took so far, see :meth:`started`; ``seq``: the refused call's
        number, see :meth:`proven_rate`; ``now``: when, if not the clock's now); True when
        the pace was cut.

        ``uncertain``, at the first cut: the refusal came on so few calls that neither the
        dimension nor its rate is known (the limiter's start-up vote found the sizes alike). The
        pace starts at the geometric mean of the measure and ``bound`` (the refusal's
        :meth:`bound`) and grows to the bound within ``UNCERTAIN_REACH_S``; the next 429, met on
        that climb, proves too little to hold, so the slow start goes on from it at the usual
        rate."""
        now = self.clock() if now is None else now
        if self.pausing(now):
            return False
        self._last_cut = _Cut(self._state(), now, pause_s, admitted, seq, bound, uncertain)
        accepted = self.accepted_rate(now)
        measured = None
        if admitted is not None and self._episode is not None and now - self._episode[0] > 0.2:
            since, before = self._episode
            # the first measure runs from the first request, when the server's bucket was
            # full: its burst (``burst_s``) of quota came on top of the rate
            extra = self.burst_s if self.cuts == 0 else 0.0
            measured = max(0.0, admitted - before) / (now - since + extra)
        proven = self.proven_rate(before=seq)
        if proven is not None and self.cuts >= 1:  # the first cut's calls are mostly estimates still
            self.proven = proven[0]
        if self.cuts == 0:
            current = measured if measured is not None else accepted
            if proven is not None:
                current = max(current or 0.0, proven[0])
        else:
            current = self.pace
            # Right after the pause the window holds only answers from before it, spread over
            # the pause: no measure of anything new.
            recent = self._cut_until > now - 1.0
            if self.cuts == 1 and accepted is not None and current is not None and not recent:
                # The end of the exponential phase overshoots: what the endpoint accepted over the
                # last seconds is the better measure of its limit.
                current = min(current, accepted)
        if current is None:  # no answer yet to measure: one unit's worth per pause
            current = self.unit_guess / max(1.0, pause_s)
        pace = self.decrease * current
        if self.cuts == 0 and proven is not None:
            # a lower bound of the limit: nothing is gained by starting the slow start under it
            pace = max(pace, PROVEN_SHARE * proven[0])
        if measured is not None and self.cuts >= 1:
            self.limit = measured
            if self.noisy:
                # What the endpoint took since the last 429 (both ends saturated: the pause
                # between refills what it drains) is a floor: a 429 the token estimate's
                # noise caused below the limit must not cost a deep cut.
                pace = max(pace, self.decrease * measured)
        if proven is not None and self.cuts >= 1 and self._proven_misses < PROVEN_MISSES:
            # The stretch before this 429 drained the server's bucket: the proven rate is about
            # the limit, where the measures above are rough (the accepted rate counts the drain).
            if self.pace is not None and self.pace <= proven[0]:
                # Refused while pacing within what was proven: the estimates' noise, or a server
                # bucket larger than burst_s, which inflates every proof. No deeper cut than the
                # proven share; twice in a row, and proofs are no longer believed. Not counted
                # within window_s of the last pause's end: an overshoot's last large calls may
                # have left the server's bucket in debt beyond that pause.
                echo = now - self._cut_until < self.window_s
                self._proven_misses += 0 if echo else 1
                pace = min(self.pace, PROVEN_SHARE * proven[0]) if self._proven_misses < PROVEN_MISSES else pace
            else:
                self._proven_misses = 0
                pace = PROVEN_SHARE * proven[0]
            self._proven_ceiling = proven[0]
        else:
            self._proven_ceiling = None
        if self.pace is not None and self.proven is not None:
            # Once proven, a 429 never raises the pace (the noisy floor, measured over the short
            # stretch since an echo's pause, may exceed it)
            pace = min(pace, self.pace)
        climbing_fast = self.cuts == 1 and self._first_growth > self.first_increase_per_s
        self._first_growth = self.first_increase_per_s
        if self.cuts == 0 and uncertain and bound is not None and bound > pace:
            # Two or three calls bound the limit only loosely, from both sides: start between
            # the two, and climb to the bound in seconds, not the tens 15% a second takes
            pace = math.sqrt(max(pace, self.min_rps) * bound)
            self._first_growth = max(self._first_growth, (bound / pace) ** (1.0 / UNCERTAIN_REACH_S) - 1.0)
        self.pace = self._base = self._within_bounds(pace)
        self._cut_until = now + max(1.0, pause_s)
        self._grown_at = self._cut_until
        if admitted is not None:
            self._episode = (now, admitted)
        self.cuts += 1
        if climbing_fast:
            # A climb of tens of percent a second drains the server's bucket for a second or
            # two before its 429: a loose proof, which the cubic would hold for PROBE_S (held,
            # bench.headerless --p80-early 2 gave 0.894-0.958, the 0.894 on a proof of 554,081
            # tokens a minute). The usual slow start from it meets the next 429 on a tighter one.
            self.cuts = 1
            self._proven_ceiling = None
        return True
