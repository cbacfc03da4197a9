"""Seeded bootstrap over tasks: confidence intervals and paired comparisons.

Every interval in drscore resamples *tasks* (not reports, not judge calls): tasks are
the unit the suites sample, and the reports of one task are correlated. A resample is
represented by a vector of task multiplicities (how often each task was drawn), so any
statistic that can weight its tasks can be bootstrapped without copying data, and all
statistics of one analysis share the same resamples (common random numbers).

Intervals are percentile intervals. Everything is seeded: the same seed, data and
number of resamples give the same numbers on every machine (numpy's PCG64).

Resamples are drawn in blocks (:func:`iter_resample_counts`): a block holds at most
:data:`BLOCK_CELLS` multiplicities, so memory stays bounded whatever the number of tasks
(1,000 resamples x 100,000 tasks as one matrix would be 800 MB). The generator's stream
does not depend on the block size (draws are taken row after row from one PCG64), so the
numbers are the same as drawing the whole ``resamples x n`` matrix at once.
"""
from __future__ import annotations

import math
from typing import Callable, Iterator, Sequence

import msgspec
import numpy as np

DEFAULT_RESAMPLES = 1000
DEFAULT_CONFIDENCE = 0.95
# A statistic that is undefined in more than this share of resamples gets no interval:
# percentiles of the few defined values would look precise while meaning little.
MIN_DEFINED_SHARE = 0.5
# Largest block of resample multiplicities held at once (int64 cells: 8 MB, plus the
# draws of the block); the block has at least one resample whatever n is.
BLOCK_CELLS = 1 << 20


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


def iter_resample_counts(n: int, resamples: int = DEFAULT_RESAMPLES, seed: int = 0, *,
                         block_cells: int = BLOCK_CELLS) -> Iterator[np.ndarray]:
    """The rows of :func:`resample_counts` in consecutive blocks of shape ``(b, n)``.

    One generator draws the blocks in order, ``b * n`` integers each, which is the same
    stream a single ``(resamples, n)`` draw takes, so the concatenated blocks equal
    :func:`resample_counts` exactly, for any ``block_cells``.
    """
    if n <= 0 or resamples <= 0:
        if resamples > 0:
            yield np.zeros((resamples, max(n, 0)), dtype=np.int64)
        return
    rng = np.random.Generator(np.random.PCG64(seed))
    rows = max(1, min(resamples, block_cells // n))
    done = 0
    while done < resamples:
        b = min(rows, resamples - done)
        draws = rng.integers(0, n, size=(b, n))
        counts = np.zeros((b, n), dtype=np.int64)
        # Row-wise bincount without a Python loop: offset each row into its own block.
        flat = (draws + np.arange(b)[:, None] * n).ravel()
        del draws
        counts.ravel()[:] = np.bincount(flat, minlength=b * n)
        yield counts
        done += b


def resample_counts(n: int, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> np.ndarray:
    """Multiplicities of ``n`` tasks in ``resamples`` draws with replacement.

    Returns an int array of shape ``(resamples, n)``; each row sums to ``n``. It holds
    the whole matrix: for large ``n`` use :func:`iter_resample_counts` or
    :func:`weighted_replicates`, which keep one block at a time.
    """
    if n <= 0 or resamples <= 0:
        return np.zeros((max(resamples, 0), max(n, 0)), dtype=np.int64)
    return np.concatenate(list(iter_resample_counts(n, resamples, seed)))


def weighted_replicates(values: np.ndarray, resamples: int = DEFAULT_RESAMPLES, seed: int = 0, *,
                        block_cells: int = BLOCK_CELLS) -> np.ndarray:
    """``counts @ values / n`` for every resample, one block of counts at a time: the
    bootstrap replicates of the mean of ``values`` in bounded memory."""
    n = int(values.size)
    out = np.empty(max(resamples, 0), dtype=float)
    if n == 0:
        out[:] = np.nan
        return out
    at = 0
    for block in iter_resample_counts(n, resamples, seed, block_cells=block_cells):
        out[at:at + len(block)] = block @ values / n
        at += len(block)
    return out


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
    replicates = [statistic(row.astype(float))
                  for block in iter_resample_counts(n, resamples, seed) for row in block]
    return point, percentile_interval(replicates, confidence)


def mean_ci(
    values: Sequence[float] | np.ndarray,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[float | None, Interval | None]:
    """Mean of per-task values with a bootstrap interval (vectorised)."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return None, None
    replicates = weighted_replicates(arr, resamples, seed)
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
    replicates = weighted_replicates(diff, resamples, seed)
    ci = percentile_interval(replicates, confidence)
    p_value = None
    if replicates.size:
        le = float(np.mean(replicates <= 0.0))
        ge = float(np.mean(replicates >= 0.0))
        p_value = min(1.0, 2.0 * min(le, ge))
    significant = ci is not None and (ci.low > 0.0 or ci.high < 0.0)
    return PairedResult(n=n, mean_a=float(xa.mean()), mean_b=float(xb.mean()), delta=delta,
                        ci=ci, p_value=p_value, significant=significant)
