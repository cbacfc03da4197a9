"""How noisy the judge is, from judge samples (``drscore run --samples K``).

For one agent under one method, with K scores per report (the same report judged K
times): the typical per-report spread across samples, the spread between reports, the
spread of the suite mean across the K samples (each sample read as one run), the spread
that independence across reports would predict (``sqrt(mean variance / n)``), and the
share of the suite mean's uncertainty over tasks that is judge noise.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

import msgspec


class JudgeNoise(msgspec.Struct, kw_only=True):
    """``tasks``: reports with all ``samples`` scores (the others are left out)."""

    tasks: int
    samples: int
    per_task_sd: float  # mean over reports of the sd across samples
    per_task_sd_rms: float  # root mean square of the same (what variances add up to)
    between_task_sd: float | None  # sd of the reports' mean scores
    suite_mean_sd: float | None  # sd across samples of the mean over reports
    suite_mean_sd_independent: float  # what independent noise per report predicts
    judge_share: float | None  # share of the variance of the suite mean (over tasks) that is judge noise


def judge_noise(samples_by_task: Mapping[str, Sequence[float]]) -> JudgeNoise | None:
    """The noise figures of one agent's reports; None without two samples of two reports."""
    k = max((len(v) for v in samples_by_task.values()), default=0)
    full = [list(map(float, v)) for v in samples_by_task.values() if len(v) == k]
    if k < 2 or len(full) < 2:
        return None
    n = len(full)
    sds = [statistics.stdev(v) for v in full]
    rms = math.sqrt(sum(s * s for s in sds) / n)
    means = [statistics.fmean(v) for v in full]
    between = statistics.stdev(means)
    suite = [statistics.fmean(v[s] for v in full) for s in range(k)]
    # variance of the mean over tasks (task bootstrap) = var(task means) / n; its judge
    # part is the mean variance of a task mean, rms^2 / k, over n
    share = min(1.0, (rms * rms / k) / (between * between)) if between > 0 else None
    return JudgeNoise(tasks=n, samples=k, per_task_sd=statistics.fmean(sds), per_task_sd_rms=rms,
                      between_task_sd=between, suite_mean_sd=statistics.stdev(suite),
                      suite_mean_sd_independent=rms / math.sqrt(n), judge_share=share)
