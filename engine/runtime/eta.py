"""The ETA of a run: the judge calls it still needs over the rate it can make them.

A quota-bound run goes as fast as its quota lets it, whatever its items look like, so
the ETA counts calls, not items. Per method and prompt template, the asks left
(:func:`method_left`) are what its running items said they still make
(:mod:`drscore.engine.runtime.workload`), plus, for items that said nothing and items
not started, the template's mean asks per item (over the method's items that finished
or said); times the share of its asks that went to the network (the rest were answered
by the cache or by a call in flight); each with the template's tokens per call (as
answered so far, else the size of the text the method said the calls carry, counted
the way the server counts, as learned). The seconds those calls need
(:func:`estimate`) are the slowest of:

- ``quota`` / ``token quota``: the time the calls left need under ``--rpm`` (or a limit
  the server announced, or the pace learned from 429s) and ``--tpm``. When both are set,
  small calls spend the request quota and large ones the token quota: mixed together
  they spend both at once (the larger of the two times), one kind after the other they
  add up (per template, the larger of its two times, summed). A run does some of each
  (the calls an item discovers late come after the others), so the estimate is the
  middle of the two; the basis names the quota the mixed figure is bound by;
- ``latency``: calls left x seconds per call at the judge / calls in flight allowed;
- ``pace``: when the last minute used less than 90% of the quota (the middle of the
  larger of its request and token shares and their sum, as above; or there is none),
  the quota time over that share (calls left over the recent calls per minute without
  a quota): what is slower than the limits, e.g. items waiting for pages (between 90%
  and 100%, the quota's time over that share, still named ``quota``: a limiter runs a
  little under its quota);

plus the time at the judge of the last call, and a 429 pause still to run. A method none of whose items finished or said anything
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
    """One method's judge asks: made so far, still to make (None: unknown), how many of
    those will go to the network, and ``parts``: (calls left, their tokens) per template."""

    asks_done: int
    asks_left: float | None
    calls_left: float
    parts: tuple[tuple[float, float], ...] = ()
    estimated: bool = False  # asks_left counts items by the method's mean size (not all said theirs)

    @property
    def tokens_left(self) -> float:
        return sum(k for _, k in self.parts)


def method_left(work: dict[str, Any], items: int, items_done: int, tokens_per_call: float | None = None,
                weights: tuple[float, float] = (1.0, 1.0)) -> MethodLeft:
    """What one method still needs. ``work`` is its :class:`drscore.engine.runtime.workload.MethodWork`
    snapshot, ``items`` its items in the run, ``items_done`` those with a row (including
    rows of items never started because the run stopped). ``tokens_per_call``: the run's,
    for a template with neither an answered call nor a said size (which counts 0 before
    any call of the run is answered); ``weights``: tokens per (ASCII, wide) estimate unit,
    the server's counting as learned (:class:`drscore.engine.runtime.calls.tokens.TokenEstimator`)."""
    started, done, announced = int(work["started"]), int(work["done"]), int(work["announced"])
    running = max(0, started - done)
    pending = max(0, items - items_done - running)
    unsaid = max(0, running - announced)
    sized = done + announced  # items whose number of asks is known (or known so far)
    templates: dict[str, dict[str, Any]] = work.get("templates") or {}
    asks_done = sum(int(t["asks"]) for t in templates.values())
    all_calls = sum(int(t["calls"]) for t in templates.values())
    method_share = all_calls / asks_done if asks_done else 1.0
    if not sized and (pending or unsaid):
        return MethodLeft(asks_done, None, 0.0)
    asks_left = calls_left = 0.0
    parts = []
    for t in templates.values():
        said = max(0, int(t["announced_left"]))
        left = float(said)
        if sized:
            per_item = (int(t["finished_asks"]) + int(t["announced_asks"]) + said) / sized
            left += max(0.0, unsaid * per_item - int(t["unannounced_asks"])) + pending * per_item
        asks, calls = int(t["asks"]), int(t["calls"])
        share = calls / asks if asks else method_share  # the rest came from the cache or a call in flight
        tokens = _template_tokens(t, said, left - said, weights, tokens_per_call)
        asks_left += left
        calls_left += left * share
        parts.append((left * share, tokens * share))
    return MethodLeft(asks_done, asks_left, calls_left, tuple(parts), estimated=bool(pending or unsaid))


def _template_tokens(t: dict[str, Any], said: int, others: float, weights: tuple[float, float],
                     tokens_per_call: float | None) -> float:
    """Tokens of a template's calls left: ``said`` by running items, ``others`` estimated.

    Said calls with a size count their own size (the text of their item), scaled by how
    answered calls of that size turned out (the template around the text, the answer).
    The others, and said calls without a size, count the template's mean: of the sizes
    said, else of its answered calls, else ``tokens_per_call``."""
    def units(ascii_part: float, wide_part: float) -> float:
        return weights[0] * ascii_part + weights[1] * wide_part

    calls, hinted = int(t["calls"]), int(t["hinted"])
    answered = units(float(t["answered_ascii"]), float(t["answered_wide"]))
    scale = int(t["answered_tokens"]) / answered if int(t["answered_sized"]) and answered > 0 else 1.0
    if hinted:
        mean = units(float(t["hinted_ascii"]), float(t["hinted_wide"])) / hinted * scale
    elif calls:
        mean = int(t["tokens"]) / calls
    else:
        mean = tokens_per_call or 0.0
    sized = min(max(0, int(t["left_sized"])), said)
    own = units(max(0.0, float(t["left_ascii"])), max(0.0, float(t["left_wide"]))) * scale if sized else 0.0
    return own + (said - sized + others) * mean


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
    pace: float = 0.0  # calls per minute lately
    rate_limited: int = 0
    paused_s: float = 0.0


def quota_tokens(snap: dict[str, Any]) -> int:
    """The tokens the run's calls spent of a token quota: ``quota_tokens`` where the runner
    says (a quota of input tokens is not spent by the answers), else input and output."""
    said = snap.get("quota_tokens")
    return int(said) if said is not None else int(snap.get("input_tokens", 0)) + int(snap.get("output_tokens", 0))


def request_rate(snap: dict[str, Any]) -> float:
    """Requests per minute the run may send: the lowest of the configured or announced
    ``rpm`` and the pace learned from 429s (0: no request quota)."""
    rates = [float(r) for r in (snap.get("rpm"), snap.get("learned_rpm")) if r]
    return min(rates) if rates else 0.0


def quota_time(parts: list[tuple[float, float]], rpm: float, tpm: float) -> tuple[float, str] | None:
    """Seconds the (calls, tokens) per template need under the quota, and which quota
    binds (see the module's docstring); None without a quota."""
    if rpm <= 0 and tpm <= 0:
        return None
    def need(c: float, k: float) -> tuple[float, float]:
        return (c / rpm * 60.0 if rpm > 0 else 0.0), (k / tpm * 60.0 if tpm > 0 else 0.0)
    by_requests, by_tokens = need(sum(c for c, _ in parts), sum(k for _, k in parts))
    mixed = max(by_requests, by_tokens)
    in_turn = sum(max(need(c, k)) for c, k in parts)
    return (mixed + in_turn) / 2, ("quota" if by_requests >= by_tokens else "token quota")


def estimate(snap: dict[str, Any], per_method: dict[str, int], elapsed_s: float) -> Estimate:
    """The ETA of a run from the runner's snapshot (``work`` per method, ``token_weights``,
    ``rpm``, ``tpm``, ``learned_rpm``, ``concurrency_limit``, ``call_latency_s``,
    ``usage_rate`` and its ``usage_span_s``, ``paused_s``) and each method's number of items."""
    total = sum(per_method.values())
    done = int(snap.get("items_done", 0))
    rate_limited, paused = int(snap.get("rate_limited", 0)), float(snap.get("paused_s") or 0.0)
    if total and done >= total:
        return Estimate(0.0, "done", rate_limited=rate_limited)
    works = snap.get("work") or {}
    by_method = snap.get("done_by_method") or {}
    calls, tokens = int(snap.get("calls", 0)), quota_tokens(snap)
    run_tpc = tokens / calls if calls else None
    weights = tuple(snap.get("token_weights") or (1.0, 1.0))
    lefts = [method_left(works[m], n, int(by_method.get(m, 0)), run_tpc, (float(weights[0]), float(weights[1])))
             for m, n in per_method.items() if m in works]
    if not lefts:
        return Estimate(None, "starting", rate_limited=rate_limited, paused_s=paused)
    lower = any(x.asks_left is None for x in lefts)
    parts = [p for x in lefts for p in x.parts]
    calls_left = sum(x.calls_left for x in lefts)
    asks_total = sum(x.asks_done + (x.asks_left or 0.0) for x in lefts)
    share = calls_left / sum(x.asks_left or 0.0 for x in lefts) if calls_left else 1.0
    tokens_left = sum(x.tokens_left for x in lefts)
    tpc = tokens_left / calls_left if calls_left and tokens_left else (run_tpc or 0.0)
    rpm, tpm = request_rate(snap), float(snap.get("tpm") or 0.0)
    latency = float(snap.get("call_latency_s") or 0.0)
    concurrency = int(snap.get("concurrency_limit") or 0)
    rate = snap.get("usage_rate")
    recent = rate is not None and float(snap.get("usage_span_s") or 0.0) >= MIN_PACE_WINDOW_S

    bounds: dict[str, float] = {}
    quota = quota_time(parts, rpm, tpm)
    if quota is not None:
        bounds[quota[1]] = quota[0]
    if latency > 0 and concurrency > 0:
        bounds["latency"] = calls_left * latency / concurrency
    pace = 0.0
    if recent:
        assert rate is not None
        pace = float(rate[0])
        if quota is not None:  # the share of the quota the last minute used (a limiter runs a little under it)
            by_requests = float(rate[0]) / rpm if rpm > 0 else 0.0
            by_tokens = float(rate[1]) / tpm if tpm > 0 else 0.0
            # as for the time left: the middle of mixed (the larger share) and in turn (their sum),
            # or a minute of small calls then large ones reads as half used
            used = (max(by_requests, by_tokens) + min(1.0, by_requests + by_tokens)) / 2
            if 0 < used < 1:
                bounds["pace" if used < 0.9 else quota[1]] = quota[0] / used
        elif pace > 0:
            bounds["pace"] = calls_left / pace * 60.0
    base = Estimate(None, "starting", lower_bound=lower, calls_left=calls_left, asks_total=asks_total,
                    network_share=share, rpm=rpm, tpm=tpm, tokens_per_call=tpc, latency_s=latency, pace=pace,
                    rate_limited=rate_limited, paused_s=paused)
    if not bounds:
        if calls_left == 0 and not lower and done:  # what is left comes from the cache: the items' pace
            return msgspec.structs.replace(base, seconds=elapsed_s / done * max(0, total - done) + paused,
                                           basis="items")
        return base
    basis = max(bounds, key=lambda k: bounds[k])
    # the last call is answered a call's time at the judge after it was sent
    tail = latency if calls_left >= 1 else 0.0
    return msgspec.structs.replace(base, seconds=bounds[basis] + tail + paused, basis=basis)


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

    def __init__(self, tolerance: float = 0.05, cause_s: float = 10.0) -> None:
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
