"""The ETA of a run: the judge calls it still needs over the rate it can make them.

A quota-bound run goes as fast as its quota lets it, whatever its items look like, so
the ETA counts calls, not items. Per method, the asks left (:func:`method_left`) are
what its running items said they still make (:mod:`drscore.engine.runtime.workload`),
plus, for items that said nothing and items not started, the method's mean asks per
item (over its items that finished or said); times the share of its asks that went to
the network (the rest were answered by the cache or by a call in flight). The seconds
those calls need (:func:`estimate`) are the slowest of:

- ``quota``: calls left / requests per minute (``--rpm``, a limit the server announced,
  or the pace learned from 429s, whichever is lowest);
- ``token quota``: per method, calls left x its tokens per call so far / ``--tpm``;
- ``latency``: calls left x seconds per call at the judge / calls in flight allowed;
- ``pace``: calls left / calls per minute over the last minute (tokens left / tokens
  per minute when the token quota binds: a run's calls are not all the same size);

plus a 429 pause still to run. A method none of whose items finished or said anything
has unknown calls: the figure is then a lower bound.

:class:`EtaTracker` turns successive estimates into what is shown: the ETA never counts
up between two draws without naming the cause (``429 pause``, ``new calls discovered``,
``fewer answers from the cache``, ``quota lowered``, ``larger calls``, ``slower answers``,
``slower pace``); a rise it cannot explain, or one within ``tolerance``, holds the last
figure instead.
"""
from __future__ import annotations

from typing import Any

import msgspec

MIN_PACE_WINDOW_S = 10.0  # a pace measured over less is the first seconds' burst, not the run's pace


class MethodLeft(msgspec.Struct, frozen=True):
    """One method's judge asks: made so far, still to make (None: unknown) and how many
    of those will go to the network."""

    asks_done: int
    asks_left: float | None
    calls_left: float
    tokens_per_call: float | None
    estimated: bool = False  # asks_left counts items by the method's mean size (not all said theirs)


def method_left(work: dict[str, Any], items: int, items_done: int, tokens_per_call: float | None = None) -> MethodLeft:
    """What one method still needs. ``work`` is its :class:`drscore.engine.runtime.workload.MethodWork`
    snapshot, ``items`` its items in the run, ``items_done`` those with a row (including
    rows of items never started because the run stopped). ``tokens_per_call``: the run's,
    for a method with no network call yet."""
    started, done, announced = int(work["started"]), int(work["done"]), int(work["announced"])
    running = max(0, started - done)
    pending = max(0, items - items_done - running)
    unsaid = max(0, running - announced)
    sized = done + announced  # items whose number of asks is known (or known so far)
    said_left = max(0, int(work["announced_left"]))
    left: float | None
    if sized:
        per_item = (int(work["finished_asks"]) + int(work["announced_asks"]) + said_left) / sized
        left = said_left + max(0.0, unsaid * per_item - int(work["unannounced_asks"])) + pending * per_item
    else:
        left = float(said_left) if not (pending or unsaid) else None
    asks, calls = int(work["asks"]), int(work["calls"])
    share = calls / asks if asks else 1.0  # the rest came from the cache or a call in flight
    own = int(work["tokens"]) / calls if calls else None
    return MethodLeft(asks_done=asks, asks_left=left, calls_left=(left or 0.0) * share,
                      tokens_per_call=own if own is not None else tokens_per_call, estimated=bool(pending or unsaid))


class Estimate(msgspec.Struct, frozen=True):
    """An ETA and the inputs it came from (the tracker names what changed)."""

    seconds: float | None  # None: nothing to go on yet
    basis: str  # quota | token quota | latency | pace | items | done | starting
    lower_bound: bool = False  # a method's calls are unknown: at least this long
    calls_left: float = 0.0
    asks_total: float = 0.0  # asks done + left over the methods with a known size
    network_share: float = 1.0
    rpm: float = 0.0  # the request rate the quota allows (0: none)
    tpm: float = 0.0
    tokens_per_call: float = 0.0
    latency_s: float = 0.0
    pace: float = 0.0  # calls (or tokens, under a binding token quota) per minute lately
    rate_limited: int = 0
    paused_s: float = 0.0


def request_rate(snap: dict[str, Any]) -> float:
    """Requests per minute the run may send: the lowest of the configured or announced
    ``rpm`` and the pace learned from 429s (0: no request quota)."""
    rates = [float(r) for r in (snap.get("rpm"), snap.get("learned_rpm")) if r]
    return min(rates) if rates else 0.0


def estimate(snap: dict[str, Any], per_method: dict[str, int], elapsed_s: float) -> Estimate:
    """The ETA of a run from the runner's snapshot (``work`` per method, ``rpm``, ``tpm``,
    ``concurrency_limit``, ``call_latency_s``, ``usage_rate`` and its ``usage_span_s``,
    ``paused_s``) and each method's number of items."""
    total = sum(per_method.values())
    done = int(snap.get("items_done", 0))
    rate_limited, paused = int(snap.get("rate_limited", 0)), float(snap.get("paused_s") or 0.0)
    if total and done >= total:
        return Estimate(0.0, "done", rate_limited=rate_limited)
    works = snap.get("work") or {}
    by_method = snap.get("done_by_method") or {}
    calls, tokens = int(snap.get("calls", 0)), int(snap.get("input_tokens", 0)) + int(snap.get("output_tokens", 0))
    run_tpc = tokens / calls if calls else None
    lefts = [method_left(works[m], n, int(by_method.get(m, 0)), run_tpc) for m, n in per_method.items() if m in works]
    if not lefts:
        return Estimate(None, "starting", rate_limited=rate_limited, paused_s=paused)
    lower = any(x.asks_left is None for x in lefts)
    calls_left = sum(x.calls_left for x in lefts)
    asks_total = sum(x.asks_done + (x.asks_left or 0.0) for x in lefts)
    asks_done = sum(x.asks_done for x in lefts)
    share = sum(int(works[m]["calls"]) for m in per_method if m in works) / asks_done if asks_done else 1.0
    tokens_left = sum(x.calls_left * x.tokens_per_call for x in lefts if x.tokens_per_call is not None)
    tpc = tokens_left / calls_left if calls_left and tokens_left else (run_tpc or 0.0)
    rpm, tpm = request_rate(snap), float(snap.get("tpm") or 0.0)
    latency = float(snap.get("call_latency_s") or 0.0)
    concurrency = int(snap.get("concurrency_limit") or 0)
    rate = snap.get("usage_rate")
    recent = rate is not None and float(snap.get("usage_span_s") or 0.0) >= MIN_PACE_WINDOW_S

    bounds: dict[str, float] = {}
    if rpm > 0:
        bounds["quota"] = calls_left / rpm * 60.0
    if tpm > 0 and tokens_left > 0:
        bounds["token quota"] = tokens_left / tpm * 60.0
    if latency > 0 and concurrency > 0:
        bounds["latency"] = calls_left * latency / concurrency
    pace = 0.0
    if recent:
        assert rate is not None
        by_tokens = bounds.get("token quota", 0.0) > bounds.get("quota", 0.0)
        pace = float(rate[1] if by_tokens else rate[0])
        if pace > 0:
            bounds["pace"] = (tokens_left if by_tokens else calls_left) / pace * 60.0
    base = Estimate(None, "starting", lower_bound=lower, calls_left=calls_left, asks_total=asks_total,
                    network_share=share, rpm=rpm, tpm=tpm, tokens_per_call=tpc, latency_s=latency, pace=pace,
                    rate_limited=rate_limited, paused_s=paused)
    if not bounds:
        if calls_left == 0 and not lower and done:  # what is left comes from the cache: the items' pace
            return msgspec.structs.replace(base, seconds=elapsed_s / done * max(0, total - done) + paused,
                                           basis="items")
        return base
    basis = max(bounds, key=lambda k: bounds[k])
    seconds = bounds[basis]
    if basis == "pace":  # the quota's own pace (a few percent under it): the quota binds
        quota = max(bounds.get("quota", 0.0), bounds.get("token quota", 0.0))
        if quota >= seconds * 0.9:
            basis = "quota" if bounds.get("quota", 0.0) >= bounds.get("token quota", 0.0) else "token quota"
    return msgspec.structs.replace(base, seconds=seconds + paused, basis=basis)


def cause_of_rise(before: Estimate, now: Estimate) -> str | None:
    """What made the ETA go up between two estimates, or None if nothing did."""
    if now.rate_limited > before.rate_limited or now.paused_s > 0:
        return "429 pause"
    if now.asks_total > before.asks_total + 0.5 or (now.lower_bound and not before.lower_bound):
        return "new calls discovered"
    if now.network_share > before.network_share + 0.01:
        return "fewer answers from the cache"
    if (0 < now.rpm < before.rpm) or (0 < now.tpm < before.tpm):
        return "quota lowered"
    if now.basis == "token quota" and now.tokens_per_call > before.tokens_per_call * 1.01:
        return "larger calls"
    if now.basis == "latency" and now.latency_s > before.latency_s * 1.01:
        return "slower answers"
    if now.basis == "pace" and (now.pace < before.pace * 0.99 or before.basis != "pace"):
        return "slower pace"
    return None


class Shown(msgspec.Struct, frozen=True):
    seconds: float | None
    basis: str
    lower_bound: bool = False
    cause: str | None = None  # why it went up, while that is news


class EtaTracker:
    """What the display shows, estimate after estimate: a figure that goes down, or up
    with its cause named (kept on the line for ``cause_s`` seconds)."""

    def __init__(self, tolerance: float = 0.05, cause_s: float = 15.0) -> None:
        self.tolerance, self.cause_s = tolerance, cause_s
        self._ref: Estimate | None = None  # the estimate behind the figure shown
        self._shown: Shown | None = None
        self._cause: tuple[str, float] | None = None  # (cause, until)

    def show(self, now: float, est: Estimate) -> Shown:
        last, ref = self._shown, self._ref
        if est.seconds is None or last is None or last.seconds is None or ref is None or est.basis == "done" \
                or est.seconds <= last.seconds:
            return self._accept(now, est, None)
        cause = cause_of_rise(ref, est)
        if cause is None or est.seconds <= last.seconds * (1 + self.tolerance) + 1.0:
            return last  # hold: a rise without a cause, or too small to tell, is not shown
        return self._accept(now, est, cause)

    def _accept(self, now: float, est: Estimate, cause: str | None) -> Shown:
        if cause is not None:
            self._cause = (cause, now + self.cause_s)
        elif self._cause is not None and now >= self._cause[1]:
            self._cause = None
        self._ref = est
        self._shown = Shown(est.seconds, est.basis, est.lower_bound, self._cause[0] if self._cause else None)
        return self._shown
