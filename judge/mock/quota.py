"""The mock judge's synchronous quota: RPM/TPM (and OTPM) token buckets and OpenAI-style headers.

Pure and clock-driven (tests pass a fake clock), separate from the HTTP handlers in
:mod:`judge.mock.server`. Batch requests (:mod:`judge.mock.batches`) never touch it:
providers give batch work its own queue.
"""
from __future__ import annotations

import math
from typing import Callable

import msgspec

__all__ = ["TPM_CHARGES", "UNCAPPED_RESERVATION", "Figures", "Quota", "Refusal", "TokenBucket", "ceil_ms",
           "character_guess", "figure", "format_duration"]

# What a token quota charges a request (MockConfig.tpm_charge).
TPM_CHARGES = ("counted", "reserved", "input")
# The output a reserving limiter assumes when the request set no cap: Azure's documents say the
# model's whole context; the mock's window when one is set, else this.
UNCAPPED_RESERVATION = 16_384


def character_guess(texts: list[str]) -> int:
    """A reserving limiter's guess at a prompt: OpenAI's documents say it is estimated from the
    character count, without tokenizing (four characters a token is assumed here)."""
    return math.ceil(sum(map(len, texts)) / 4)


def ceil_ms(seconds: float) -> int:
    """Whole milliseconds, rounded up so that waiting that long always suffices; the
    inner round() keeps float noise (999.9999999 or 800.0000001) from adding one."""
    return math.ceil(round(seconds * 1000, 6))


def format_duration(seconds: float) -> str:
    """Format a delay like OpenAI's ``x-ratelimit-reset-*`` headers: ``250ms``, ``1s``,
    ``6m0s``, ``1h2m3.5s`` (rounded up to whole milliseconds)."""
    ms = ceil_ms(seconds)
    if ms <= 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs = f"{ms / 1000:.3f}".rstrip("0").rstrip(".")
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


class TokenBucket:
    """A continuously refilled bucket: ``limit`` units per minute, capacity of ``burst``
    seconds of quota (never below ``min_capacity``). Costs above the capacity are admitted
    when the bucket is full and drive it into debt, so no request is refused forever."""

    def __init__(self, limit_per_min: float, burst_s: float, min_capacity: float = 0.0,
                 now: float = 0.0) -> None:
        self.limit = limit_per_min
        self.rate = limit_per_min / 60.0
        self.capacity = max(min_capacity, limit_per_min * burst_s / 60.0)
        self.level = self.capacity
        self._updated = now
        self.full_s = 0.0  # seconds spent full since the first charge: quota offered and not taken
        # units given back (a reservation's unused part) past a full bucket, and so lost: a
        # reserving quota's loss that no client's pacing can prevent (docs/providers.md)
        self.dropped = 0.0
        self._charged = False

    def refill(self, now: float) -> None:
        """Add what accrued since the last update (never above capacity)."""
        if now > self._updated:
            level = self.level + (now - self._updated) * self.rate
            if level > self.capacity and self._charged:
                self.full_s += (level - self.capacity) / self.rate
            self.level = min(self.capacity, level)
            self._updated = now

    def level_at(self, now: float) -> float:
        """The level at ``now`` (below 0: in debt), without recording the refill."""
        return min(self.capacity, self.level + max(0.0, now - self._updated) * self.rate)

    def wait_for(self, cost: float) -> float:
        """Seconds until ``cost`` fits (0 if it fits now); call :meth:`refill` first."""
        need = min(cost, self.capacity)
        # A tiny tolerance: after waiting exactly the advertised time, float rounding
        # must not leave the bucket a hair short.
        missing = need - self.level
        return 0.0 if missing <= 1e-9 else missing / self.rate

    def take(self, cost: float) -> None:
        """Charge ``cost`` (the level may go negative: debt repaid by later refills)."""
        self.level -= cost
        self._charged = True

    def give_back(self, amount: float, now: float) -> None:
        """Return ``amount`` of an earlier charge (a reservation's unused part), never above capacity."""
        self.refill(now)
        self.dropped += max(0.0, self.level + amount - self.capacity)
        self.level = min(self.capacity, self.level + amount)

    def remaining(self) -> int:
        """Whole units left now (0 while in debt)."""
        return max(0, math.floor(self.level + 1e-9))

    def reset_s(self) -> float:
        """Seconds until the bucket is full again."""
        return max(0.0, (self.capacity - self.level) / self.rate)

    def figures(self) -> Figures:
        """What a provider's headers say of this bucket now (call :meth:`refill` first)."""
        return Figures(limit=self.limit, remaining=self.remaining(), reset_s=self.reset_s())

    def refill_to_full(self, now: float) -> None:
        """Forget all charges (used by ``POST /reset``)."""
        self.level = self.capacity
        self._updated = now
        self.full_s, self.dropped, self._charged = 0.0, 0.0, False


class Figures(msgspec.Struct, frozen=True, kw_only=True):
    """One bucket as quota headers state it: per-minute limit, whole units left, seconds until full."""

    limit: float
    remaining: int
    reset_s: float


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """The bucket that refused the last call: its dimension, per-minute limit, whole units
    left, and what the call asked of it."""

    dimension: str
    limit: float
    left: int
    requested: float


class Quota:
    """RPM and TPM buckets, and optionally an output-token one (Anthropic's OTPM), checked and
    charged together (all-or-nothing admission)."""

    def __init__(self, rpm: float, tpm: float, burst: float, clock: Callable[[], float], *,
                 otpm: float = 0.0) -> None:
        self.clock = clock
        now = clock()
        self.requests = TokenBucket(rpm, burst, 1.0, now) if rpm > 0 else None
        self.tokens = TokenBucket(tpm, burst, 0.0, now) if tpm > 0 else None
        self.output = TokenBucket(otpm, burst, 0.0, now) if otpm > 0 else None
        self.refused: Refusal | None = None  # what refused the last call admit() refused

    def too_large(self, tokens: int) -> bool:
        """A call charged more than the whole minute's token quota (OpenAI refuses it with
        "Request too large", however long it waits)."""
        return self.tokens is not None and tokens > self.tokens.limit

    def _buckets(self) -> list[tuple[str, TokenBucket]]:
        """The limited dimensions, in the order a tie between refusals is settled."""
        named = (("requests", self.requests), ("tokens", self.tokens), ("output_tokens", self.output))
        return [(name, bucket) for name, bucket in named if bucket is not None]

    def admit(self, tokens: int, output: int = 0) -> float:
        """Charge one request, ``tokens`` and ``output`` (the output bucket's reservation) if all
        fit and return 0; otherwise charge nothing and return the seconds to wait."""
        buckets = self._buckets()
        if not buckets:
            return 0.0
        now = self.clock()
        costs = {"requests": 1, "tokens": tokens, "output_tokens": output}
        waits = []
        for name, bucket in buckets:
            bucket.refill(now)
            waits.append((bucket.wait_for(costs[name]), name, bucket))
        wait, name, bucket = max(waits, key=lambda w: w[0])  # the first of equal waits, as before
        if wait > 0:
            # what refused it, as a provider's 429 body names it (judge.mock.profiles)
            self.refused = Refusal(dimension=name, limit=bucket.limit, left=bucket.remaining(),
                                   requested=costs[name])
            return wait
        for name, bucket in buckets:
            bucket.take(costs[name])
        return 0.0

    def give_back(self, tokens: int) -> None:
        """Return ``tokens`` of an admitted request's token charge (its unused reservation)."""
        if self.tokens is not None and tokens > 0:
            self.tokens.give_back(tokens, self.clock())

    def give_back_output(self, n: int) -> None:
        """Return ``n`` of an admitted request's output reservation (the cap it did not use)."""
        if self.output is not None and n > 0:
            self.output.give_back(n, self.clock())

    def headers(self) -> dict[str, str]:
        """OpenAI-style ``x-ratelimit-*`` headers for the limited dimensions (requests and
        tokens: no OpenAI-style endpoint states an output quota)."""
        out: dict[str, str] = {}
        for kind, bucket in (("requests", self.requests), ("tokens", self.tokens)):
            if bucket is not None:
                out[f"x-ratelimit-limit-{kind}"] = figure(bucket.limit)
                out[f"x-ratelimit-remaining-{kind}"] = str(bucket.remaining())
                out[f"x-ratelimit-reset-{kind}"] = format_duration(bucket.reset_s())
        return out

    def figures(self) -> dict[str, Figures]:
        """Every limited bucket's figures now, by dimension (``requests``, ``tokens``,
        ``output_tokens``): what a profile with its own header set (Anthropic's split quotas) states."""
        now = self.clock()
        out: dict[str, Figures] = {}
        for name, bucket in self._buckets():
            bucket.refill(now)
            out[name] = bucket.figures()
        return out

    def reset(self) -> None:
        now = self.clock()
        for _, bucket in self._buckets():
            bucket.refill_to_full(now)


def figure(x: float) -> str:
    """A quota figure as a provider writes it: 600000, not 600000.0."""
    return str(int(x)) if float(x).is_integer() else str(x)
