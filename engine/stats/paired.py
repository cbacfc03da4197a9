"""Paired comparisons of agents inside one run: who wins, by how much, how sure.

For each pair of agents scored on shared tasks (per method): the mean paired difference
``A - B`` over those tasks, a percentile bootstrap interval that resamples tasks (so the
between-task variance, which both agents share, cancels), a two-sided bootstrap p-value,
Holm's correction across all pairs of the method, and from the same resamples the
probability that each agent ranks first (on the tasks every compared agent scored).

Judge samples (``drscore run --samples K``): each task then has K scores per agent. The
task mean already carries the judge's noise, so resampling task means alone gives an
interval of the right width. To make the judge's part explicit, each replicate resamples
the tasks *and*, inside each task, the judge samples; to avoid counting that noise twice
(once inside the spread of task means, once from the samples) the task-level differences
are shrunk towards their mean first, by ``sqrt(1 - W/V)`` where ``V`` is the variance of
the per-task differences and ``W`` the part of it that is judge noise (Davison & Hinkley,
*Bootstrap Methods*, 1997, section 3.8). ``W/V`` is reported as ``judge_noise_share``.

Small samples: a plain percentile interval is too narrow with few tasks (it uses the
standard error with divisor n and normal quantiles); at 40 tasks it covers about 93% for
a nominal 95%. The intervals here are Hesterberg's *expanded percentile* intervals
(Hesterberg 2015, "What teachers should know about the bootstrap"): the percentiles are
taken at the level whose normal quantile is ``sqrt(n / (n - 1)) * t(n - 1)``
(:func:`expanded_confidence`); for many tasks it is the plain percentile interval.

Memory: the resamples are drawn in blocks of at most ``BLOCK_CELLS`` task x sample
cells, so a run of any size needs the same working memory; only the replicates of each
pair (``resamples`` floats) are kept for the percentiles.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence

import msgspec
import numpy as np

from drscore.engine.runtime.models import ScoreRow
from drscore.engine.stats.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, percentile_interval
from drscore.engine.stats.rankable import reason_from_counts, row_reason

BLOCK_CELLS = 1 << 20  # resample x task x sample cells per block (8 MB of float64)


class PairDifference(msgspec.Struct, kw_only=True):
    """``A - B`` on the tasks both agents scored (A is the agent with the higher mean).

    ``p_value`` is the bootstrap two-sided p-value of the interval shown
    (:func:`expanded_p`), floored at one over the number of resamples (a bootstrap cannot
    show a smaller one); ``p_holm`` is Holm-adjusted over
    the method's pairs and ``significant`` means ``p_holm < 1 - confidence``.
    ``judge_noise_share`` is the share of the variance of per-task differences that is
    judge noise (None without judge samples)."""

    method: str
    a: str
    b: str
    n: int
    mean_a: float | None
    mean_b: float | None
    delta: float | None
    ci: list[float] | None
    p_value: float | None
    p_holm: float | None = None
    significant: bool = False
    judge_noise_share: float | None = None

    def text(self, digits: int = 2) -> str:
        """``A - B: +0.31 [0.12, 0.50]`` (the form the terminal shows)."""
        if self.delta is None:
            return f"{self.a} - {self.b}: no shared task"
        ci = f" [{self.ci[0]:.{digits}f}, {self.ci[1]:.{digits}f}]" if self.ci else ""
        return f"{self.a} - {self.b}: {self.delta:+.{digits}f}{ci}"


class MethodDecisions(msgspec.Struct, kw_only=True):
    """Every pair of one method, and each agent's probability of ranking first.

    ``first_tasks`` is the number of tasks every agent scored (the probabilities are
    computed over those; None when there are none). ``samples`` is the largest number of
    judge samples of a task (1: none)."""

    method: str
    agents: list[str]
    pairs: list[PairDifference]
    p_first: dict[str, float] | None
    first_tasks: int
    resamples: int
    seed: int
    confidence: float
    samples: int = 1
    unranked: dict[str, str] = {}  # agent -> why it is shown but not compared (stats.rankable)


def expanded_confidence(confidence: float, n: int) -> float:
    """The percentile level giving an expanded percentile interval over ``n`` tasks."""
    if n < 2:
        return confidence
    from scipy import stats

    alpha = 1.0 - confidence
    z = math.sqrt(n / (n - 1)) * float(stats.t.ppf(1.0 - alpha / 2.0, n - 1))
    return float(min(1.0 - 1e-9, 1.0 - 2.0 * stats.norm.sf(z)))


def expanded_p(tail: float, n: int) -> float:
    """Two-sided p-value matching the expanded interval: the smallest ``1 - confidence``
    whose expanded percentile interval excludes 0, from ``tail``, the smaller share of
    resampled differences on one side of 0. (Twice the tail share would be the plain
    percentile interval's p-value; it would call a difference significant while the
    interval shown still contains 0.)"""
    if n < 2:
        return min(1.0, 2.0 * tail)
    if tail >= 0.5:
        return 1.0
    if tail <= 0.0:
        return 0.0
    from scipy import stats

    z = float(stats.norm.isf(tail)) / math.sqrt(n / (n - 1))
    return float(min(1.0, 2.0 * stats.t.sf(z, n - 1)))


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (None stays None and is not counted)."""
    known = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(known)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(known):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def _natural(task_id: str) -> tuple[int, int | str]:
    return (0, int(task_id)) if task_id.isdigit() else (1, task_id)


class _Agent:
    """One agent's scores on the method's task list: task means, sample residuals."""

    def __init__(self, by_task: Mapping[str, Sequence[float]], tasks: list[str], kmax: int) -> None:
        n = len(tasks)
        self.mean = np.full(n, np.nan)
        self.k = np.zeros(n, dtype=np.int64)
        self.noise = np.zeros(n)  # variance of the task mean that is judge noise: s^2 / k
        # residuals of each sample from its task mean, scaled so that resampling them
        # has the variance of the task mean's noise (sqrt(k / (k - 1)))
        self.resid = np.zeros((n, kmax))
        for t, task in enumerate(tasks):
            values = [float(v) for v in by_task.get(task, ()) if v is not None and math.isfinite(v)]
            if not values:
                continue
            arr = np.asarray(values)
            k = arr.size
            self.mean[t] = arr.mean()
            self.k[t] = k
            if k >= 2:
                var = float(arr.var(ddof=1))
                self.noise[t] = var / k
                self.resid[t, :k] = (arr - arr.mean()) * math.sqrt(k / (k - 1))
        self.has = np.isfinite(self.mean)
        self.sampled = bool((self.k >= 2).any())

    def resampled_noise(self, rng: np.random.Generator, block: int) -> np.ndarray | None:
        """Mean of resampled residuals per (replicate, task): shape ``(block, n)``; None
        for an agent with one sample per task (no noise to resample, no memory spent)."""
        n, kmax = self.resid.shape
        if not self.sampled:
            return None
        k = np.maximum(self.k, 1)
        idx = np.floor(rng.random((block, n, kmax)) * k[None, :, None]).astype(np.int64)
        picked = np.take_along_axis(np.broadcast_to(self.resid, (block, n, kmax)), idx, axis=2)
        use = np.arange(kmax)[None, None, :] < self.k[None, :, None]
        return np.where(use, picked, 0.0).sum(axis=2) / k[None, :]


def _difference(na: np.ndarray | None, nb: np.ndarray | None, cols: np.ndarray) -> np.ndarray | None:
    """``na - nb`` on the columns ``cols`` (None stands for no noise)."""
    if na is None and nb is None:
        return None
    if nb is None:
        return na[:, cols] if na is not None else None
    if na is None:
        return -nb[:, cols]
    return na[:, cols] - nb[:, cols]


def _shrink(values: np.ndarray, noise: float) -> np.ndarray:
    """``values`` pulled towards their mean so their spread loses the part ``noise``
    (mean variance of judge noise per value) contributes."""
    if values.size < 2 or noise <= 0:
        return values
    var = float(values.var(ddof=1))
    c = math.sqrt(max(0.0, 1.0 - noise / var)) if var > 0 else 0.0
    return values.mean() + c * (values - values.mean())


def compare_agents(
    method: str,
    scores: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
    block_cells: int = BLOCK_CELLS,
) -> MethodDecisions:
    """Paired comparisons of the agents of one method.

    ``scores[agent][task_id]`` is the list of that report's judge samples (one value
    without ``--samples``). Agents are ordered by their mean over their own tasks, best
    first; each pair is ``(better, worse)`` so differences read as positive."""
    names = sorted(scores)
    tasks = sorted({t for a in names for t, v in scores[a].items() if any(x is not None for x in v)},
                   key=_natural)
    kmax = max([len(v) for a in names for v in scores[a].values()] or [1])
    agents = {a: _Agent(scores[a], tasks, max(kmax, 1)) for a in names}

    def own_mean(a: str) -> float:
        m = agents[a].mean[agents[a].has]
        return float(m.mean()) if m.size else -math.inf

    names.sort(key=lambda a: (-own_mean(a), a))
    n = len(tasks)
    alpha = 1.0 - confidence

    # Per pair: shared tasks, shrunk differences, the judge-noise share.
    plans = []
    for a, b in itertools.combinations(names, 2):
        A, B = agents[a], agents[b]
        shared = A.has & B.has
        d = np.where(shared, A.mean - B.mean, 0.0)
        w = float((A.noise + B.noise)[shared].mean()) if shared.any() else 0.0
        ds = d.copy()
        ds[shared] = _shrink(d[shared], w)
        share = None
        if (A.sampled or B.sampled) and shared.sum() >= 2:
            v = float(d[shared].var(ddof=1))
            share = min(1.0, w / v) if v > 0 else (1.0 if w > 0 else 0.0)
        plans.append((a, b, shared, d, ds, share))

    # The tasks every agent scored, for the probability of ranking first: each agent's
    # deviation from the task's across-agent mean is shrunk by its own noise share.
    everyone = np.ones(n, dtype=bool)
    for ag in agents.values():
        everyone &= ag.has
    first_vals: dict[str, np.ndarray] = {}
    if everyone.any() and len(names) >= 2:
        m = len(names)
        stack = np.array([agents[a].mean[everyone] for a in names])
        noise_var = np.array([agents[a].noise[everyone] for a in names])
        centre = stack.mean(axis=0)
        for i, a in enumerate(names):
            dev = stack[i] - centre
            # variance of the deviation's noise: (1 - 1/m)^2 own + (1/m^2) the others'
            own = noise_var[i] * (1 - 1 / m) ** 2 + (noise_var.sum(axis=0) - noise_var[i]) / m ** 2
            first_vals[a] = centre + _shrink(dev, float(own.mean()))

    reps = {(a, b): np.empty(resamples) for a, b, *_ in plans}
    wins = dict.fromkeys(names, 0.0)
    first_defined = 0
    rng = np.random.Generator(np.random.PCG64(seed))
    # cells held per resample: the task counts, and per agent with samples its draws
    per_resample = n * (1 + max(kmax, 1) * sum(ag.sampled for ag in agents.values()))
    block = max(1, min(resamples, block_cells // max(1, per_resample)))
    done = 0
    while done < resamples:
        size = min(block, resamples - done)
        # tasks: multiplicities per replicate (same draw as bootstrap.resample_counts)
        draws = rng.integers(0, n, size=(size, n)) if n else np.zeros((size, 0), dtype=np.int64)
        counts = np.zeros((size, n))
        if n:
            flat = (draws + np.arange(size)[:, None] * n).ravel()
            counts.ravel()[:] = np.bincount(flat, minlength=size * n)
        noise = {a: agents[a].resampled_noise(rng, size) for a in names}
        views: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}  # pairs sharing a task set share the slice
        for a, b, shared, _, ds, _ in plans:
            view = views.get(key := shared.tobytes())
            if view is None:
                sub = counts if shared.all() else counts[:, shared]
                view = views[key] = (sub, sub.sum(axis=1))
            c, total = view
            # A task drawn c times stands for c independent judge draws: its resampled
            # noise enters with weight sqrt(c), not c (variance c, as c draws would have).
            value = c @ ds[shared]
            jitter = _difference(noise[a], noise[b], shared)
            if jitter is not None:
                value = value + (jitter * np.sqrt(c)).sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                reps[(a, b)][done:done + size] = np.where(total > 0, value / np.where(total > 0, total, 1), np.nan)
        if first_vals:
            c = counts[:, everyone]
            total = c.sum(axis=1)
            ok = total > 0
            root = np.sqrt(c)
            means = np.array([(first_vals[a][None, :] * c).sum(axis=1) + (
                0.0 if (na := noise[a]) is None else (na[:, everyone] * root).sum(axis=1))
                for a in names])  # (agents, size); the common divisor does not change the order
            best = means.max(axis=0)
            tied = np.isclose(means, best[None, :], rtol=0.0, atol=1e-12) & ok[None, :]
            ties = np.maximum(tied.sum(axis=0), 1)
            for i, a in enumerate(names):
                wins[a] += float((tied[i] / ties).sum())
            first_defined += int(ok.sum())
        done += size

    pairs = []
    for a, b, shared, d, _, share in plans:
        k = int(shared.sum())
        if k == 0:
            pairs.append(PairDifference(method=method, a=a, b=b, n=0, mean_a=None, mean_b=None, delta=None,
                                        ci=None, p_value=None))
            continue
        r = reps[(a, b)]
        ok = r[np.isfinite(r)]
        interval = percentile_interval(r, expanded_confidence(confidence, k)) if k >= 2 else None
        p = None
        if ok.size and k >= 2:
            tail = min(float(np.mean(ok <= 0.0)), float(np.mean(ok >= 0.0)))
            p = max(expanded_p(tail, k), 1.0 / ok.size)
        A, B = agents[a], agents[b]
        pairs.append(PairDifference(
            method=method, a=a, b=b, n=k, mean_a=float(A.mean[shared].mean()), mean_b=float(B.mean[shared].mean()),
            delta=float(d[shared].mean()), ci=interval.as_list() if interval else None, p_value=p,
            judge_noise_share=share))
    adjusted = holm([p.p_value for p in pairs])
    for pair, padj in zip(pairs, adjusted):
        pair.p_holm = padj
        pair.significant = padj is not None and padj < alpha
    p_first = {a: wins[a] / first_defined for a in names} if first_defined else None
    return MethodDecisions(method=method, agents=names, pairs=pairs, p_first=p_first,
                           first_tasks=int(everyone.sum()) if first_vals else 0, resamples=resamples,
                           seed=seed, confidence=confidence, samples=max(kmax, 1))


def row_samples(row: ScoreRow) -> list[float]:
    """The judge samples of a row's score: ``sample_scores`` with ``--samples K``, else
    the score itself."""
    if row.sample_scores:
        return [float(v) for v in row.sample_scores if v is not None and math.isfinite(v)]
    return [] if row.score is None else [float(row.score)]


def decide(rows: Iterable[ScoreRow], *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
           confidence: float = DEFAULT_CONFIDENCE) -> dict[str, MethodDecisions]:
    """:func:`compare_agents` for every method of a run's score rows. Agents that may not
    be ranked (:func:`drscore.engine.stats.rankable.agent_reason`) and rows with coverage 0
    are left out and listed in ``unranked``; a method with fewer than two comparable
    agents is left out.

    The rows are read once and not kept: per method and agent, the rank-rule counts and
    each rankable row's judge samples (a run of a million rows is never held as rows)."""
    counts: dict[str, dict[str, list[int]]] = {}  # method -> agent -> [scored, partial, coverage 0]
    samples: dict[str, dict[str, dict[str, list[float]]]] = {}
    for r in rows:
        c = counts.setdefault(r.method, {}).setdefault(r.agent, [0, 0, 0])
        by_task = samples.setdefault(r.method, {}).setdefault(r.agent, {})
        if r.score is not None:
            c[0] += 1
            if r.coverage is not None and r.coverage <= 0.0:
                c[2] += 1
            elif r.status == "partial":
                c[1] += 1
        if row_reason(r) is None:
            by_task[r.task_id] = row_samples(r)
    out: dict[str, MethodDecisions] = {}
    for method in sorted(counts):
        unranked: dict[str, str] = {}
        scores: dict[str, dict[str, list[float]]] = {}
        for agent in sorted(counts[method]):
            why = reason_from_counts(*counts[method][agent])
            if why is not None:
                unranked[agent] = why
                continue
            by_task = {t: v for t, v in samples[method][agent].items() if v}
            if by_task:
                scores[agent] = by_task
        if len(scores) < 2:
            continue
        decision = compare_agents(method, scores, resamples=resamples, seed=seed, confidence=confidence)
        decision.unranked = unranked
        out[method] = decision
    return out
