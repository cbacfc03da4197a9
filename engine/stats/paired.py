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

Memory: :func:`decide` keeps each row as a task index and a score in typed arrays (not
as task -> samples maps); :func:`compare_tasks` gives each agent a few arrays over the
method's task list and each pair only numbers, rebuilding a pair's differences inside each
resampling block and freeing them. The resamples are drawn in blocks of at most
``BLOCK_CELLS`` task x sample cells, so the working memory does not grow with the run;
only the replicates of each pair (``resamples`` floats) are kept for the percentiles.
"""
from __future__ import annotations

import itertools
import math
from array import array
from collections.abc import Iterable, Mapping, Sequence

import msgspec
import numpy as np

from drscore.engine.runtime.models import ScoreRow
from drscore.engine.runtime.task_ids import TaskIds, natural_key
from drscore.engine.stats.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, percentile_interval
from drscore.engine.stats.rankable import count_row, reason_from_counts, row_reason

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
    # scipy.special, not scipy.stats: the same functions (stats.t.ppf is stdtrit, norm.sf
    # is ndtr(-z)), without the ~50 MB that importing scipy.stats adds to every run
    from scipy import special

    alpha = 1.0 - confidence
    z = math.sqrt(n / (n - 1)) * float(special.stdtrit(n - 1, 1.0 - alpha / 2.0))
    return float(min(1.0 - 1e-9, 1.0 - 2.0 * special.ndtr(-z)))


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
    from scipy import special  # norm.isf(q) is -ndtri(q), t.sf(z, df) is stdtr(df, -z)

    z = float(-special.ndtri(tail)) / math.sqrt(n / (n - 1))
    return float(min(1.0, 2.0 * special.stdtr(n - 1, -z)))


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


class TaskScores:
    """One agent's scores under one method, aligned on the method's task list (positions
    into it, sorted in natural task order): compact arrays, not a task -> samples map.

    ``pos``/``value``: the tasks with one finite score (numpy arrays, positions ascending
    or not, each at most once); ``multi``: position -> that task's finite judge samples
    (more than one; a task is in ``pos`` or in ``multi``, not both)."""

    __slots__ = ("pos", "value", "multi")

    def __init__(self, pos: np.ndarray, value: np.ndarray, multi: Mapping[int, Sequence[float]] | None = None
                 ) -> None:
        self.pos = np.asarray(pos, dtype=np.int64)
        self.value = np.asarray(value, dtype=np.float64)
        self.multi = dict(multi or {})


class _Agent:
    """One agent's scores on the method's task list: task means, sample residuals."""

    def __init__(self, scores: TaskScores, n: int, kmax: int) -> None:
        self.mean = np.full(n, np.nan)
        self.mean[scores.pos] = scores.value  # one score: the task mean is that score
        self.k = np.zeros(n, dtype=np.int64)
        self.k[scores.pos] = 1
        # variance of the task mean that is judge noise: s^2 / k (np.zeros: pages stay
        # untouched, so no memory, for an agent without samples)
        self.noise = np.zeros(n)
        # residuals of each sample from its task mean, scaled so that resampling them
        # has the variance of the task mean's noise (sqrt(k / (k - 1))); only with samples
        self.resid: np.ndarray | None = None
        for t, values in scores.multi.items():
            arr = np.asarray(values, dtype=np.float64)
            k = arr.size
            if not k:
                continue
            self.mean[t] = arr.mean()
            self.k[t] = k
            if k >= 2:
                if self.resid is None:
                    self.resid = np.zeros((n, kmax))
                var = float(arr.var(ddof=1))
                self.noise[t] = var / k
                self.resid[t, :k] = (arr - arr.mean()) * math.sqrt(k / (k - 1))
        self.has = np.isfinite(self.mean)
        self.sampled = self.resid is not None

    def resampled_noise(self, rng: np.random.Generator, block: int) -> np.ndarray | None:
        """Mean of resampled residuals per (replicate, task): shape ``(block, n)``; None
        for an agent with one sample per task (no noise to resample, no memory spent)."""
        if self.resid is None:
            return None
        n, kmax = self.resid.shape
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
    centre, c = _shrink_factor(values, noise)
    return values if c is None else centre + c * (values - centre)


def _shrink_factor(values: np.ndarray, noise: float) -> tuple[float, float | None]:
    """What :func:`_shrink` applies: the mean and the factor (None: left as they are)."""
    if values.size < 2 or noise <= 0:
        return 0.0, None
    var = float(values.var(ddof=1))
    return values.mean(), (math.sqrt(max(0.0, 1.0 - noise / var)) if var > 0 else 0.0)


class _Pair(msgspec.Struct):
    """What a pair keeps between resampling blocks: a few numbers, no per-task array (its
    shrunk differences are rebuilt from the two agents' task means for each block)."""

    a: str
    b: str
    n: int
    centre: float
    factor: float | None
    share: float | None
    delta: float | None
    mean_a: float | None
    mean_b: float | None

    def values(self, A: _Agent, B: _Agent) -> tuple[np.ndarray, np.ndarray]:
        """The shared tasks and the shrunk differences on them."""
        shared = A.has & B.has
        d = (A.mean - B.mean)[shared]
        return shared, d if self.factor is None else self.centre + self.factor * (d - self.centre)


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
    first; each pair is ``(better, worse)`` so differences read as positive. (A run's
    rows go through :func:`decide`, which never builds these maps: :func:`compare_tasks`.)"""
    tasks = sorted({t for a in scores for t, v in scores[a].items() if any(x is not None for x in v)},
                   key=natural_key)
    where = {t: i for i, t in enumerate(tasks)}
    kmax = max([len(v) for a in scores for v in scores[a].values()] or [1])
    compact = {}
    for agent, by_task in scores.items():
        pos, value, multi = [], [], {}
        for task, raw in by_task.items():
            values = [float(v) for v in raw if v is not None and math.isfinite(v)]
            if len(values) == 1:
                pos.append(where[task])
                value.append(values[0])
            elif values:
                multi[where[task]] = values
        compact[agent] = TaskScores(np.array(pos, dtype=np.int64), np.array(value, dtype=np.float64), multi)
    return compare_tasks(method, len(tasks), compact, kmax=kmax, resamples=resamples, seed=seed,
                         confidence=confidence, block_cells=block_cells)


def compare_tasks(
    method: str,
    n: int,
    scores: Mapping[str, TaskScores],
    *,
    kmax: int = 1,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
    block_cells: int = BLOCK_CELLS,
) -> MethodDecisions:
    """:func:`compare_agents` from compact arrays: ``n`` tasks (the union of the agents'
    tasks, in natural order), each agent's :class:`TaskScores` on them, ``kmax`` the
    largest number of judge samples a task's entry had.

    Memory: per agent a few arrays of ``n``; per pair only numbers (its differences are
    rebuilt one pair at a time inside each resampling block and freed); the resampling
    blocks hold at most about ``block_cells`` cells (two arrays of them while counting)."""
    names = sorted(scores)
    kmax = max(kmax, 1)
    agents = {a: _Agent(scores[a], n, kmax) for a in names}

    def own_mean(a: str) -> float:
        m = agents[a].mean[agents[a].has]
        return float(m.mean()) if m.size else -math.inf

    names.sort(key=lambda a: (-own_mean(a), a))
    alpha = 1.0 - confidence

    # Per pair: the judge-noise share and what shrinks its differences (numbers only).
    plans: list[_Pair] = []
    for a, b in itertools.combinations(names, 2):
        A, B = agents[a], agents[b]
        shared = A.has & B.has
        k = int(shared.sum())
        d = (A.mean - B.mean)[shared]
        w = float((A.noise + B.noise)[shared].mean()) if k else 0.0
        centre, factor = _shrink_factor(d, w)
        share = None
        if (A.sampled or B.sampled) and k >= 2:
            v = float(d.var(ddof=1))
            share = min(1.0, w / v) if v > 0 else (1.0 if w > 0 else 0.0)
        plans.append(_Pair(a, b, k, centre, factor, share, float(d.mean()) if k else None,
                           float(A.mean[shared].mean()) if k else None, float(B.mean[shared].mean()) if k else None))
        del shared, d

    # The tasks every agent scored, for the probability of ranking first: each agent's
    # deviation from the task's across-agent mean is shrunk by its own noise share.
    everyone = np.ones(n, dtype=bool)
    for ag in agents.values():
        everyone &= ag.has
    all_tasks = bool(everyone.all())
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
        del stack, noise_var, centre

    reps = {(p.a, p.b): np.empty(resamples) for p in plans}
    wins = dict.fromkeys(names, 0.0)
    first_defined = 0
    rng = np.random.Generator(np.random.PCG64(seed))
    # cells held per resample: the task counts, and per agent with samples its draws
    per_resample = n * (1 + kmax * sum(ag.sampled for ag in agents.values()))
    block = max(1, min(resamples, block_cells // max(1, per_resample)))
    done = 0
    while done < resamples:
        size = min(block, resamples - done)
        # tasks: multiplicities per replicate (same draw as bootstrap.resample_counts)
        if n:
            draws = rng.integers(0, n, size=(size, n))
            draws += (np.arange(size) * n)[:, None]
            tally = np.bincount(draws.ravel(), minlength=size * n)
            del draws
            counts = tally.astype(np.float64).reshape(size, n)
            del tally
        else:
            counts = np.zeros((size, 0))
        noise = {a: agents[a].resampled_noise(rng, size) for a in names}
        full_total = counts.sum(axis=1) if any(p.n == n for p in plans) else None
        for p in plans:
            shared, ds = p.values(agents[p.a], agents[p.b])
            if p.n == n and full_total is not None:  # every task shared: no copy of the counts
                c, total = counts, full_total
            else:
                c = counts[:, shared]
                total = c.sum(axis=1)
            # A task drawn c times stands for c independent judge draws: its resampled
            # noise enters with weight sqrt(c), not c (variance c, as c draws would have).
            value = c @ ds
            jitter = _difference(noise[p.a], noise[p.b], shared)
            if jitter is not None:
                value = value + (jitter * np.sqrt(c)).sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                reps[(p.a, p.b)][done:done + size] = np.where(total > 0, value / np.where(total > 0, total, 1), np.nan)
            del shared, ds, c, jitter
        if first_vals:
            c = counts if all_tasks else counts[:, everyone]
            total = c.sum(axis=1)
            ok = total > 0
            root = np.sqrt(c) if any(v is not None for v in noise.values()) else None
            means = np.array([(first_vals[a][None, :] * c).sum(axis=1) + (
                0.0 if (na := noise[a]) is None or root is None else (na[:, everyone] * root).sum(axis=1))
                for a in names])  # (agents, size); the common divisor does not change the order
            best = means.max(axis=0)
            tied = np.isclose(means, best[None, :], rtol=0.0, atol=1e-12) & ok[None, :]
            ties = np.maximum(tied.sum(axis=0), 1)
            for i, a in enumerate(names):
                wins[a] += float((tied[i] / ties).sum())
            first_defined += int(ok.sum())
            del c, root
        del counts, noise
        done += size

    pairs = []
    for p in plans:
        if p.n == 0:
            pairs.append(PairDifference(method=method, a=p.a, b=p.b, n=0, mean_a=None, mean_b=None, delta=None,
                                        ci=None, p_value=None))
            continue
        r = reps.pop((p.a, p.b))
        ok = r[np.isfinite(r)]
        interval = percentile_interval(r, expanded_confidence(confidence, p.n)) if p.n >= 2 else None
        pv = None
        if ok.size and p.n >= 2:
            tail = min(float(np.mean(ok <= 0.0)), float(np.mean(ok >= 0.0)))
            pv = max(expanded_p(tail, p.n), 1.0 / ok.size)
        pairs.append(PairDifference(
            method=method, a=p.a, b=p.b, n=p.n, mean_a=p.mean_a, mean_b=p.mean_b, delta=p.delta,
            ci=interval.as_list() if interval else None, p_value=pv, judge_noise_share=p.share))
    adjusted = holm([p.p_value for p in pairs])
    for pair, padj in zip(pairs, adjusted):
        pair.p_holm = padj
        pair.significant = padj is not None and padj < alpha
    p_first = {a: wins[a] / first_defined for a in names} if first_defined else None
    return MethodDecisions(method=method, agents=names, pairs=pairs, p_first=p_first,
                           first_tasks=int(everyone.sum()) if first_vals else 0, resamples=resamples,
                           seed=seed, confidence=confidence, samples=kmax)


def row_samples(row: ScoreRow) -> list[float]:
    """The judge samples of a row's score: ``sample_scores`` with ``--samples K``, else
    the score itself."""
    if row.sample_scores:
        return [float(v) for v in row.sample_scores if v is not None and math.isfinite(v)]
    return [] if row.score is None else [float(row.score)]


class _Collected:
    """One (method, agent)'s rankable rows, compactly: a task index (into the run's task
    list) and the score of each row in typed arrays (12 bytes a row), the judge samples
    only of the rows that do not have exactly one (as lists), and the rank-rule counts."""

    __slots__ = ("task", "value", "multi", "counts")

    def __init__(self) -> None:
        self.task = array("i")
        self.value = array("d")
        self.multi: dict[int, list[float]] = {}  # row position -> its samples (several, or none valid)
        self.counts = [0, 0, 0]  # scored, partial, coverage 0 (stats.rankable.reason_from_counts)

    def add(self, task: int, samples: list[float]) -> None:
        if len(samples) != 1:
            self.multi[len(self.task)] = samples
        self.task.append(task)
        self.value.append(samples[0] if len(samples) == 1 else math.nan)

    def kept(self) -> np.ndarray:
        """The positions of the rows that count: each task's last row (a report scored
        again counts once, as its later row), unless it has no valid sample (then the
        task is not the agent's, as with the row alone)."""
        task = np.frombuffer(self.task, dtype=np.int32)
        _, first_rev = np.unique(task[::-1], return_index=True)  # last row = first one reversed
        last = np.sort(len(task) - 1 - first_rev)
        if self.multi:
            empty = [i for i, v in self.multi.items() if not v]
            if empty:
                last = last[~np.isin(last, empty)]
        return last

    def scores(self, kept: np.ndarray, where: np.ndarray) -> tuple[TaskScores, int]:
        """This agent's :class:`TaskScores` from its kept rows and the largest number of
        samples of one; ``where`` maps a run task index to its position in the method's
        task list."""
        task = np.frombuffer(self.task, dtype=np.int32)
        value = np.frombuffer(self.value, dtype=np.float64)
        if not self.multi:
            return TaskScores(where[task[kept]], value[kept]), 1
        is_multi = np.zeros(len(task), dtype=bool)
        is_multi[list(self.multi)] = True
        one = kept[~is_multi[kept]]
        multi = {int(where[task[i]]): self.multi[int(i)] for i in kept[is_multi[kept]].tolist()}
        return TaskScores(where[task[one]], value[one], multi), max([len(v) for v in multi.values()] or [1])


def decide(rows: Iterable[ScoreRow], *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
           confidence: float = DEFAULT_CONFIDENCE) -> dict[str, MethodDecisions]:
    """:func:`compare_agents` for every method of a run's score rows. Agents that may not
    be ranked (:func:`drscore.engine.stats.rankable.agent_reason`) and rows with coverage 0
    are left out and listed in ``unranked``; a method with fewer than two comparable
    agents is left out.

    The rows are read once and not kept: per method and agent, the rank-rule counts and
    each rankable row's task index and score in typed arrays (judge samples as lists only
    for the rows that have several), so a run of a million rows is never held as rows or
    as task -> samples maps; :func:`compare_tasks` then works from arrays aligned on the
    method's task list."""
    task_ids = TaskIds()  # compact: a dict and a list of 100,000 ids took 14 MB
    collected: dict[str, dict[str, _Collected]] = {}
    for r in rows:
        col = collected.setdefault(r.method, {}).get(r.agent)
        if col is None:
            col = collected[r.method][r.agent] = _Collected()
        count_row(col.counts, r)
        if row_reason(r) is None:
            col.add(task_ids.index(r.task_id), row_samples(r))
    out: dict[str, MethodDecisions] = {}
    ranks = task_ids.natural_ranks()  # natural task order, sorted over the ids' bytes
    for method in sorted(collected):
        unranked: dict[str, str] = {}
        kept: dict[str, np.ndarray] = {}
        for agent in sorted(collected[method]):
            col = collected[method][agent]
            why = reason_from_counts(*col.counts)
            if why is not None:
                unranked[agent] = why
                continue
            rows_kept = col.kept()
            if rows_kept.size:
                kept[agent] = rows_kept
        if len(kept) < 2:
            continue
        # the method's tasks: every task a comparable agent scored, in natural order
        present = np.unique(np.concatenate([np.frombuffer(collected[method][a].task, dtype=np.int32)[k]
                                            for a, k in kept.items()]))
        order = present[np.argsort(ranks[present], kind="stable")]
        where = np.full(len(task_ids), -1, dtype=np.int64)
        where[order] = np.arange(len(order))
        scores: dict[str, TaskScores] = {}
        kmax = 1
        for agent, k in kept.items():
            scores[agent], most = collected[method][agent].scores(k, where)
            kmax = max(kmax, most)
        del where, present, kept
        decision = compare_tasks(method, len(order), scores, kmax=kmax, resamples=resamples, seed=seed,
                                 confidence=confidence)
        del scores
        decision.unranked = unranked
        out[method] = decision
    return out
