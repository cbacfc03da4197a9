"""The allowed range of every numeric run and judge setting, checked before anything is
sent: a sign typo (``--rpm -500``), ``nan`` or a zero must not quietly remove a quota or
stall a run. :meth:`drscore.api.JudgeConfig.validate` and
:meth:`drscore.api.RunConfig.validate` call :func:`check` with the flag the user typed,
so the CLI (whatever parses it) and the Python API give the same one-line error."""
from __future__ import annotations

import math
from typing import Any

import msgspec


class Range(msgspec.Struct, frozen=True):
    """``field`` of a config, shown as ``flag``: a number from ``low`` to ``high``;
    ``above`` makes ``low`` itself invalid (``--timeout 0``)."""

    field: str
    flag: str
    low: float
    high: float = math.inf
    above: bool = False
    integer: bool = False
    optional: bool = False  # None means "not set" (e.g. --max-cost)


def _shown(bound: float) -> str:
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


def _describe(r: Range) -> str:
    kind = "a whole number" if r.integer else "a number"
    low = _shown(r.low)
    if r.high == math.inf:
        return f"{kind} {'>' if r.above else '>='} {low}"
    return f"{kind} from {low}{' (exclusive)' if r.above else ''} to {_shown(r.high)}"


def check(value: Any, r: Range) -> None:
    """Raise ValueError ``--flag must be ... (got X)`` unless ``value`` is in range ``r``."""
    if value is None and r.optional:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and r.integer:
        ok = isinstance(value, int) or float(value).is_integer()
    if ok:
        ok = (value > r.low if r.above else value >= r.low) and value <= r.high
    if not ok:
        raise ValueError(f"{r.flag} must be {_describe(r)} (got {value!r})")


def check_all(config: Any, ranges: tuple[Range, ...]) -> None:
    for r in ranges:
        check(getattr(config, r.field), r)


JUDGE_RANGES = (
    Range("timeout_s", "--timeout", 0, 86_400, above=True),
    Range("max_rate_limit_wait_s", "--max-rate-limit-wait", 0, 7 * 86_400),
    Range("rpm", "--rpm", 0),  # 0 = unlimited
    Range("tpm", "--tpm", 0),
    Range("otpm", "--otpm", 0),
    Range("concurrency", "--concurrency", 1, 100_000, integer=True),
    Range("burst_s", "--burst", 0, 3_600, above=True),
    Range("max_cost", "--max-cost", 0, optional=True),
    Range("max_retries", "--max-retries", 0, 100, integer=True),
    Range("batch_window_s", "--batch-window", 0, 86_400),
    Range("batch_poll_s", "--batch-poll", 0, 86_400, above=True),
    Range("batch_max_requests", "--batch-max-requests", 1, 50_000, integer=True),
    Range("redis_ttl_days", "--redis-ttl", 0, 3_650, above=True),
    Range("max_output_tokens", "--max-output-tokens", 1, 10_000_000, integer=True, optional=True),
    Range("thinking_budget", "thinking_budget", 0, 10_000_000, integer=True, optional=True),
)

RUN_RANGES = (
    Range("fetch_concurrency", "--fetch-concurrency", 1, 10_000, integer=True),
    Range("max_in_flight", "max_in_flight", 0, 10_000_000, integer=True),  # 0 = auto; no flag
    Range("limit", "--limit", 0, integer=True),  # 0 = all
    Range("seed", "--seed", -(2**63), 2**63 - 1, integer=True),
    Range("samples", "--samples", 1, 100, integer=True),  # engine.runtime.samples.MAX_SAMPLES
)

__all__ = ["JUDGE_RANGES", "RUN_RANGES", "Range", "check", "check_all"]
