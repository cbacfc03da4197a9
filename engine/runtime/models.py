"""Records that flow through a run: tasks, reports, score rows."""
from __future__ import annotations

from typing import Any

import msgspec


class Task(msgspec.Struct, kw_only=True):
    """A research task. ``fields`` carries optional per-method inputs (reference report,
    criteria, rubric bundle, ...) keyed by name."""

    task_id: str
    prompt: str
    language: str | None = None
    topic: str | None = None
    reference: str | None = None
    fields: dict[str, Any] = {}


class Report(msgspec.Struct, kw_only=True):
    """One agent's report for one task. ``origin`` is ``file:line`` for error messages."""

    task_id: str
    agent: str
    report: str
    usage: dict[str, Any] | None = None
    origin: str = ""


class ScoreRow(msgspec.Struct, kw_only=True, omit_defaults=False):
    """One line of ``scores.jsonl``: one report scored by one method."""

    task_id: str
    agent: str
    method: str
    score: float | None
    subscores: dict[str, float | None] = {}
    judged: int = 0
    expected: int = 0
    coverage: float | None = None
    status: str = "ok"  # ok | partial | failed | skipped (method not applicable)
    errors: list[str] = []
    judge: str = ""
    calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0  # None: the judge's price is unknown (see engine.runtime.pricing)
    latency_s: float = 0.0
    details: dict[str, Any] = {}
    cached_input_tokens: int = 0  # part of input_tokens served from the provider's prefix cache
    cost_usd_uncached: float | None = 0.0  # what this item would have cost alone (no cache, no sharing)
    judge_s: float = 0.0  # of latency_s: time with at least one call at the judge
    quota_wait_s: float = 0.0  # of latency_s: time only waiting for quota (or prefix warm-up, the preflight)
    # of latency_s: time only waiting for calls shared in flight, whose time at the judge
    # is their owner's (another item of the run, or another process sharing the cache)
    shared_wait_s: float = 0.0
    reasoning_tokens: int = 0  # of output_tokens: hidden thinking the endpoint billed as output
    # With judge samples (--samples K > 1): the score of each sample in sample order, their
    # standard deviation, and that of each numeric subscore (engine.runtime.samples).
    sample_scores: list[float | None] = []
    score_sd: float | None = None
    subscore_sd: dict[str, float] = {}


class CallAttempt(msgspec.Struct, kw_only=True):
    """One request of a judge call as sent: ``answered``, or the failure's kind
    (``timeout``, ``rate_limit``, ``server_error``, ...), its seconds at the judge, and a
    detail (the answer's finish reason, or the error)."""

    outcome: str
    seconds: float
    detail: str = ""


class VerdictRecord(msgspec.Struct, kw_only=True):
    """One line of ``verdicts.jsonl``: one judge call (or cache hit) as it arrived."""

    task_id: str
    agent: str
    method: str
    template: str
    key: str
    cached: bool
    status: str  # ok | failed
    verdict: Any = None
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0  # None: the judge's price is unknown
    latency_s: float = 0.0
    label: str = ""
    cached_input_tokens: int = 0
    cost_usd_uncached: float | None = 0.0
    batched: bool = False
    reasoning_tokens: int = 0  # of output_tokens: hidden thinking the endpoint billed as output
    judge_sample: int = 0  # --samples K: which of the K asks this is (0 = the only one without it)
    # Money across invocations (the run ledger): True when the answer came from the cache and
    # an earlier invocation of this run paid for it (its usage and cost_usd are what was paid
    # then); reused: from a cache this run never paid for (another run's), not spend.
    paid_earlier: bool = False
    reused: bool = False
    # What the call judged, for reading it back (the report viewer): the short template
    # variables (statements, URLs, passages), each clipped; long ones (pages, whole
    # reports) only as their length. See engine.runtime.context.call_inputs.
    inputs: dict[str, str] = {}
    # Time with this call at the judge and time it only waited (quota, a prefix warm-up,
    # backoff), apart, and time it waited for an identical call another item had sent
    # (shared_wait_s: that call's time at the judge is its owner's); latency_s is all of
    # them. Every request it took when there was more than one, or when it failed (its
    # reason is ``error``). The model's visible reasoning (``reasoning_content`` or
    # ``<think>``), clipped like ``inputs``.
    judge_s: float = 0.0
    quota_wait_s: float = 0.0
    shared_wait_s: float = 0.0
    attempts: list[CallAttempt] = []
    reasoning: str = ""


class InputError(msgspec.Struct):
    """A rejected input record, reported with its file and line."""

    origin: str
    message: str

    def __str__(self) -> str:
        return f"{self.origin}: {self.message}"
