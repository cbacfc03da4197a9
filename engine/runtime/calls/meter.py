"""Per-item and per-method accounting of judge calls (real and planned)."""
from __future__ import annotations

from typing import Any

import msgspec


class Meter(msgspec.Struct):
    calls: int = 0  # paid calls: made now, or by an earlier invocation of the run for answers used now
    cache_hits: int = 0  # answered from cache or by an identical call in flight
    planned: int = 0  # dry run: calls that would be made
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cached_input_tokens: int = 0  # part of input_tokens served from the provider's prefix cache
    cost_usd_uncached: float = 0.0  # what these calls would have cost alone (see pool.Judged)
    batched_calls: int = 0  # network calls answered through the Batch API
    reasoning_tokens: int = 0  # part of output_tokens the judge spent thinking
    # Intervals (monotonic start, end) of this meter's calls at the judge, waiting for
    # quota, and waiting for a call shared in flight (another item or process owns it and
    # counts its time at the judge); per item only (merge() drops them), turned into
    # seconds by latency_split().
    judge_spans: list[tuple[float, float]] = msgspec.field(default_factory=list)
    wait_spans: list[tuple[float, float]] = msgspec.field(default_factory=list)
    shared_spans: list[tuple[float, float]] = msgspec.field(default_factory=list)

    def add(self, judged: Any) -> None:
        if judged.source == "network":
            self.calls += 1
        elif judged.source == "dry":
            self.planned += 1
        else:
            self.cache_hits += 1
        self.input_tokens += judged.input_tokens
        self.output_tokens += judged.output_tokens
        self.cost_usd += judged.cost_usd
        self.cached_input_tokens += getattr(judged, "cached_input_tokens", 0)
        self.cost_usd_uncached += getattr(judged, "cost_uncached", judged.cost_usd)
        self.reasoning_tokens += getattr(judged, "reasoning_tokens", 0)
        if getattr(judged, "batched", False) and judged.source == "network":
            self.batched_calls += 1
        self.judge_spans.extend(getattr(judged, "judge_spans", ()))
        self.wait_spans.extend(getattr(judged, "wait_spans", ()))
        self.shared_spans.extend(getattr(judged, "shared_spans", ()))
        earlier = getattr(judged, "earlier", None)
        if earlier is not None:  # paid by an earlier invocation of the run (its uncached cost is on judged)
            self._paid(earlier)

    def add_paid(self, paid: Any) -> None:
        """Calls billed without an answer to show for them (a failed call's attempts): a
        ``ledger.Usage``."""
        self._paid(paid)
        self.cost_usd_uncached += paid.cost_usd_uncached

    def _paid(self, paid: Any) -> None:
        self.calls += paid.calls
        self.input_tokens += paid.input_tokens
        self.output_tokens += paid.output_tokens
        self.cached_input_tokens += paid.cached_input_tokens
        self.reasoning_tokens += paid.reasoning_tokens
        self.cost_usd += paid.cost_usd

    def merge(self, other: Meter) -> None:
        for f in self.__struct_fields__:
            if f not in _SPANS:
                setattr(self, f, getattr(self, f) + getattr(other, f))

    def latency_split(self) -> tuple[float, float, float]:
        """(seconds with at least one call at the judge, seconds with calls waiting for
        quota and none at the judge, seconds only waiting for calls shared in flight):
        concurrent calls are not double counted, and the three never add up to more than
        the item's wall time. A shared call's time at the judge is its owner's alone, so
        over all rows the time at the judge is at most wall time x calls in flight."""
        judge = _union(self.judge_spans)
        waiting = _union(_subtract(self.wait_spans, judge))
        shared = _union(_subtract(_subtract(self.shared_spans, judge), waiting))
        return _length(judge), _length(waiting), _length(shared)


_SPANS = ("judge_spans", "wait_spans", "shared_spans")


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _subtract(spans: list[tuple[float, float]], cover: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Parts of ``spans`` outside the (sorted, disjoint) intervals ``cover``."""
    out = []
    for a, b in spans:
        pieces = [(a, b)]
        for c, d in cover:
            nxt = []
            for x, y in pieces:
                if d <= x or c >= y:
                    nxt.append((x, y))
                    continue
                if x < c:
                    nxt.append((x, c))
                if d < y:
                    nxt.append((d, y))
            pieces = nxt
        out.extend(pieces)
    return out


def _length(spans: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in spans)
