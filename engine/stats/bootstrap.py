"""Seeded bootstrap over tasks: confidence intervals and paired comparisons.

Every interval in drscore resamples *tasks* (not reports, not judge calls): tasks are
the unit the suites sample, and the reports of one task are correlated. A resample is
represented by a vector of task multiplicities (how often each task was drawn), so any
statistic that can weight its tasks can be bootstrapped without copying data, and all
statistics of one analysis share the same resamples (common random numbers).

Intervals are percentile intervals. Everything is seeded: the same seed, data and
number of resamples give the same numbers on every machine (numpy's PCG64).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import msgspec
import numpy as np

DEFAULT_RESAMPLES = 1000
DEFAULT_CONFIDENCE = 0.95
# A statistic that is undefined in more than this share of resamples gets no interval:
# percentiles of the few defined values would look precise while meaning little.
MIN_DEFINED_SHARE = 0.5


class Interval(msgspec.Struct, frozen=True):
    """A percentile bootstrap interval; ``defined`` resamples out of ``resamples``."""

    low: float
    high: float
    defined: int
    resamples: int

    def as_list(self) -> list[float]:
        """``[low, high]``, the shape the JSON outputs use."""
        return [self.low, self.high]


class PairedResult(msgspec.Struct, frozen=True):
    """Mean of run B minus mean of run A over the tasks both scored.

    ``significant`` is True when the interval of the mean difference excludes 0;
    ``p_value`` is the two-sided bootstrap p-value (twice the smaller tail share)."""

    n: int
    mean_a: float
    mean_b: float
    delta: float
    ci: Interval | None
    p_value: float | None
    significant: bool


def resample_counts(n: int, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> np.ndarray:
    """Multiplicities of ``n`` tasks in ``resamples`` draws with replacement.

    Returns an int array of shape ``(resamples, n)``; each row sums to ``n``.
    """
    if n <= 0 or resamples <= 0:
        return np.zeros((max(resamples, 0), max(n, 0)), dtype=np.int64)
    rng = np.random.Generator(np.random.PCG64(seed))
    draws = rng.integers(0, n, size=(resamples, n))
    counts = np.zeros((resamples, n), dtype=np.int64)
    # Row-wise bincount without a Python loop: offset each row into its own block.
    flat = (draws + np.arange(resamples)[:, None] * n).ravel()
    counts.ravel()[:] = np.bincount(flat, minlength=resamples * n)
    return counts


def percentile_interval(
    values: Sequence[float | None] | np.ndarray,
    confidence: float = DEFAULT_CONFIDENCE,
    min_defined_share: float = MIN_DEFINED_SHARE,
) -> Interval | None:
    """Percentile interval of bootstrap replicates; None/NaN replicates are ignored.

    Returns None when fewer than ``min_defined_share`` of the replicates are defined.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    arr = np.array([math.nan if v is None else float(v) for v in values], dtype=float)
    total = int(arr.size)
    ok = arr[np.isfinite(arr)]
    if total == 0 or ok.size == 0 or ok.size < min_defined_share * total:
        return None
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(ok, [tail, 100.0 - tail])
    return Interval(low=float(low), high=float(high), defined=int(ok.size), resamples=total)


def bootstrap_ci(
    statistic: Callable[[np.ndarray], float | None],
    n: int,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[float | None, Interval | None]:
    """Point estimate and percentile interval of ``statistic`` over ``n`` tasks.

    ``statistic(weights)`` gets a length-``n`` float array of task multiplicities
    (all ones for the point estimate) and returns a number or None when undefined.
    """
    point = statistic(np.ones(n, dtype=float))
    counts = resample_counts(n, resamples, seed)
    replicates = [statistic(row.astype(float)) for row in counts]
    return point, percentile_interval(replicates, confidence)


def mean_ci(
    values: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[float | None, Interval | None]:
    """Mean of per-task values with a bootstrap interval (vectorised)."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return None, None
    counts = resample_counts(arr.size, resamples, seed)
    replicates = counts @ arr / arr.size
    return float(arr.mean()), percentile_interval(replicates, confidence)


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> PairedResult:
    """Paired bootstrap of ``mean(b) - mean(a)`` where ``a[i]`` and ``b[i]`` are the
    same task scored in two runs. Tasks are resampled jointly, which removes the
    between-task variance that an unpaired comparison would wrongly include."""
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.shape != xb.shape:
        raise ValueError(f"paired samples differ in length: {xa.size} vs {xb.size}")
    n = int(xa.size)
    if n == 0:
        return PairedResult(n=0, mean_a=math.nan, mean_b=math.nan, delta=math.nan,
                            ci=None, p_value=None, significant=False)
    diff = xb - xa
    delta = float(diff.mean())
    counts = resample_counts(n, resamples, seed)
    replicates = counts @ diff / n
    ci = percentile_interval(replicates, confidence)
    p_value = None
    if replicates.size:
        le = float(np.mean(replicates <= 0.0))
        ge = float(np.mean(replicates >= 0.0))
        p_value = min(1.0, 2.0 * min(le, ge))
    significant = ci is not None and (ci.low > 0.0 or ci.high < 0.0)
    return PairedResult(n=n, mean_a=float(xa.mean()), mean_b=float(xb.mean()), delta=delta,
                        ci=ci, p_value=p_value, significant=significant)
