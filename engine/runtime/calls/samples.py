"""Judge samples (``drscore run --samples K``): every judge call asked K times.

An LLM judge does not give the same verdict twice, and for a paired comparison of two
agents that noise is the main term once the task variance cancels. With K samples the
runner scores each (report, method) item K times; sample ``s`` asks every judge call of
the method as a distinct request:

- its cache key gains the component ``judge_sample = s`` (only for ``s > 0``: sample 0 is
  the request drscore always made, so K = 1 keeps every cache key, and a K = 3 run reuses
  a K = 1 run's answers as its sample 0);
- the request body carries ``seed`` = :func:`request_seed` (the sample of a step that
  already samples, such as RACE's weights, keeps a distinct seed too), which the
  verdicts record as ``judge_sample``.

The K results are combined by :func:`combine`: the score and every numeric subscore are
the mean of the samples (no method's paper prescribes another rule for repeated judging;
a method may set ``sample_aggregate = "median"``), and the row keeps each sample's score
and the standard deviations (``sample_scores``, ``score_sd``, ``subscore_sd``).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from drscore.engine.runtime.method import MethodResult

MAX_SAMPLES = 100
# Seeds of judge sample s start at s * SEED_STRIDE, above any step's own sample index.
SEED_STRIDE = 1_000


def key_component(judge_sample: int) -> dict[str, Any]:
    """What a judge sample adds to a cache key: nothing for sample 0."""
    return {"judge_sample": judge_sample} if judge_sample else {}


def request_seed(sample: int, judge_sample: int) -> int:
    """The ``seed`` sent for a step's ``sample`` in judge sample ``judge_sample`` (0: none sent)."""
    return sample + judge_sample * SEED_STRIDE


def _sd(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) if len(values) >= 2 else None


def _centre(values: Sequence[float], how: str) -> float:
    return statistics.median(values) if how == "median" else statistics.fmean(values)


def combine(results: Sequence[MethodResult], how: str = "mean") -> tuple[MethodResult, dict[str, Any]]:
    """One result from the K samples' results, and the row fields of their spread
    (``sample_scores``, ``score_sd``, ``subscore_sd``).

    Samples that failed (no score) are left out of the mean and the spread; when some
    failed, the result is ``partial`` with the first failure's error; when all failed,
    the first sample's result stands. Counts (``judged``, ``expected``) and ``details``
    are those of the first scored sample; ``details["samples"]`` lists each sample's
    score and status."""
    if not results:
        raise ValueError("combine() needs at least one result")
    scored = [r for r in results if r.score is not None and math.isfinite(r.score)]
    sample_scores: list[float | None] = [r.score for r in results]
    if not scored:
        return results[0], {"sample_scores": sample_scores, "score_sd": None, "subscore_sd": {}}
    first = scored[0]
    values = [float(r.score) for r in scored if r.score is not None]
    subs: dict[str, list[float]] = {}
    for r in scored:
        for k, v in r.subscores.items():
            if isinstance(v, (int, float)) and math.isfinite(v):
                subs.setdefault(k, []).append(float(v))
    subscores: dict[str, float | None] = {k: (_centre(subs[k], how) if k in subs else None)
                                          for k in first.subscores}
    subscore_sd = {k: sd for k, v in sorted(subs.items()) if (sd := _sd(v)) is not None}
    failed = [r for r in results if r.score is None]
    statuses = {r.status for r in scored}
    status = "partial" if failed or "partial" in statuses else first.status
    errors = list(first.errors)
    if failed:
        errors = [f"{len(failed)} of {len(results)} judge samples failed: "
                  f"{failed[0].errors[0] if failed[0].errors else failed[0].status}", *errors]
    details = {**first.details, "samples": [{"score": r.score, "status": r.status} for r in results]}
    result = MethodResult(score=_centre(values, how), subscores=subscores, judged=first.judged,
                          expected=first.expected, status=status, errors=errors, details=details)
    return result, {"sample_scores": sample_scores, "score_sd": _sd(values), "subscore_sd": subscore_sd}
