"""Agreement of a scoring method with human judges (METHODS.md section 6).

Units and conventions (also in ``docs/agreement.md``):

* An *item* is one (task, agent) report that has a method score and at least one
  human score. Its human score is the mean over its raters.
* **PAR** (pairwise agreement rate): over every pair of items of the same task, the
  method's preference sign(m_a - m_b) is compared with the humans' sign(h_a - h_b);
  a tie (|difference| <= ``tie_margin``) is a third class, so "tie vs tie" agrees and
  "tie vs preference" disagrees. PAR = agreeing pairs / all pairs, pooled over tasks.
* **human_par**: the same rate between individual raters: for each task, each pair of
  raters and each pair of agents both raters scored, sign(r1_a - r1_b) vs
  sign(r2_a - r2_b), pooled over all such comparisons (the comparison-weighted mean of
  the per-rater-pair rates). **par_raters** is the method against each single rater,
  pooled the same way, so it is directly comparable with human_par.
* **OPC**: Pearson r between per-agent mean method score and per-agent mean human
  score (means over the agent's items).
* **ICC(1,1)** per task: one-way random effects over the task's items (targets) x
  their ratings; unequal numbers of ratings use the usual k0 correction. Tasks with
  ICC < 0 are filtered out; tasks whose ICC is undefined (a single rater, or no
  variance at all) are kept and counted.
* **FAP / FAS**: mean over kept tasks of the per-task Pearson / Spearman between method
  scores and mean human scores; tasks where the correlation is undefined (fewer than
  two items, or constant scores) are left out of the mean and counted.
* **spearman / pearson / kendall** (tau-b): over all items pooled.
* **MAD**: mean |method - human| over items, after multiplying by the scale factors
  (it assumes both are on the same scale; the rank statistics do not).
* **exact_match**: share of tasks with >= 2 items where the method's full ranking
  (ties included) equals the mean-human ranking, i.e. every pair of the task agrees.

Every figure gets a percentile interval from a seeded bootstrap over tasks
(:mod:`drscore.engine.stats.bootstrap`). Undefined figures are None with a note; nothing
here raises on constant or tiny inputs.

One module (~510 lines) because every figure is computed from the same aligned,
per-task prepared arrays inside each bootstrap resample; the pure metric functions
above :func:`agreement` are small and separately tested.
"""
from __future__ import annotations

import itertools
import math
import warnings
from collections import defaultdict
from typing import Any, Iterable, Literal, Mapping, Sequence, SupportsFloat

import msgspec
import numpy as np
from scipy import stats

from drscore.engine.stats.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    Interval,
    percentile_interval,
    iter_resample_counts,
)
from drscore.engine.runtime.rundir_read import HumanScore, natural_key

# Differences this small are ties even with tie_margin=0: float noise, not preference.
FLOAT_TIE = 1e-9

FIGURE_KEYS = (
    "par",
    "opc",
    "fap",
    "fas",
    "spearman",
    "pearson",
    "kendall",
    "mad",
    "exact_match",
    "tasks_kept",
    "human_par",
    "par_raters",
)

Correlation = Literal["pearson", "spearman", "kendall"]


class TaskItems(msgspec.Struct, kw_only=True):
    """The matched items of one task, in a fixed agent order."""

    task_id: str
    agents: list[str]
    method: list[float]
    human: list[float]  # mean human score per agent
    ratings: dict[str, dict[str, float]]  # rater -> agent -> score


class Alignment(msgspec.Struct, kw_only=True):
    """Method scores joined with human scores, and what could not be joined."""

    tasks: list[TaskItems]
    method_only: int = 0  # items the method scored that no human rated
    human_only: int = 0  # items humans rated that the method did not score
    duplicate_ratings: int = 0  # repeated (task, agent, rater) rows; the last one wins

    @property
    def n_items(self) -> int:
        return sum(len(t.agents) for t in self.tasks)


class TaskAgreement(msgspec.Struct, kw_only=True):
    """Per-task figures (point estimates), for tables and debugging."""

    task_id: str
    items: int
    raters: int
    par: float | None
    icc: float | None
    kept: bool
    pearson: float | None
    spearman: float | None
    exact_match: bool | None


class AgreementResult(msgspec.Struct, kw_only=True):
    """All agreement figures with their bootstrap intervals."""

    figures: dict[str, float | None]
    intervals: dict[str, Interval | None]
    n_tasks: int
    n_items: int
    n_agents: int
    n_raters: int
    tasks_icc_undefined: int
    tasks_corr_undefined: int
    method_only: int
    human_only: int
    resamples: int
    seed: int
    confidence: float
    per_task: list[TaskAgreement]
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        """The figures as one flat JSON object: ``<key>`` and ``<key>_ci`` ([low, high]
        or null) for every figure, then counts and notes."""
        out: dict[str, Any] = {}
        for key in FIGURE_KEYS:
            out[key] = self.figures.get(key)
            ci = self.intervals.get(key)
            out[f"{key}_ci"] = ci.as_list() if ci is not None else None
        out.update(
            n_tasks=self.n_tasks,
            n_items=self.n_items,
            n_agents=self.n_agents,
            n_raters=self.n_raters,
            tasks_icc_undefined=self.tasks_icc_undefined,
            tasks_corr_undefined=self.tasks_corr_undefined,
            method_only=self.method_only,
            human_only=self.human_only,
            resamples=self.resamples,
            seed=self.seed,
            confidence=self.confidence,
            notes=list(self.notes),
        )
        return out


# --------------------------------------------------------------------------- primitives


def preference_signs(x: Sequence[float] | np.ndarray, tie_margin: float = 0.0) -> np.ndarray:
    """sign(x_i - x_j) for every pair i < j (row-major order), with |diff| <= margin -> 0."""
    arr = np.asarray(x, dtype=float)
    i, j = np.triu_indices(arr.size, k=1)
    diff = arr[i] - arr[j]
    signs = np.sign(diff)
    signs[np.abs(diff) <= max(tie_margin, FLOAT_TIE)] = 0.0
    return signs


def pair_agreement(
    x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, tie_margin: float = 0.0
) -> tuple[int, int]:
    """(agreeing pairs, pairs) between two score vectors over the same items; ties are
    a third preference class."""
    if len(x) != len(y):
        raise ValueError(f"score vectors differ in length: {len(x)} vs {len(y)}")
    sx = preference_signs(x, tie_margin)
    sy = preference_signs(y, tie_margin)
    return int(np.sum(sx == sy)), int(sx.size)


def icc_1_1(groups: Sequence[Sequence[float]]) -> float | None:
    """ICC(1,1), one-way random effects, single rating: ``groups[i]`` holds the ratings
    of target i. (MSB - MSW) / (MSB + (k0 - 1) MSW), where k0 is the number of ratings
    per target (the standard k0 = (N - sum n_i^2 / N) / (n - 1) when unequal).

    None when undefined: fewer than two targets, no target with two ratings, or no
    variance at all."""
    rated = [np.asarray(g, dtype=float) for g in groups if len(g) > 0]
    n = len(rated)
    sizes = np.array([g.size for g in rated], dtype=float)
    total = float(sizes.sum()) if n else 0.0
    if n < 2 or total - n < 1:
        return None
    grand = float(np.concatenate(rated).mean())
    means = np.array([g.mean() for g in rated])
    ssb = float(np.sum(sizes * (means - grand) ** 2))
    ssw = float(sum(np.sum((g - m) ** 2) for g, m in zip(rated, means)))
    msb = ssb / (n - 1)
    msw = ssw / (total - n)
    k0 = (total - float(np.sum(sizes**2)) / total) / (n - 1)
    denom = msb + (k0 - 1.0) * msw
    if denom <= 0.0 or not math.isfinite(denom):
        return None
    return (msb - msw) / denom


def correlation(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray,
                kind: Correlation) -> float | None:
    """Pearson r, Spearman rho or Kendall tau-b (scipy.stats); None when undefined
    (fewer than two points or a constant vector)."""
    ax = np.asarray(x, dtype=float)
    ay = np.asarray(y, dtype=float)
    if ax.size != ay.size:
        raise ValueError(f"vectors differ in length: {ax.size} vs {ay.size}")
    if ax.size < 2 or np.ptp(ax) <= FLOAT_TIE or np.ptp(ay) <= FLOAT_TIE:
        return None
    with warnings.catch_warnings():
        # Near-constant inputs can still warn; the guard above covers the real cases.
        warnings.simplefilter("ignore")
        if kind == "pearson":
            r = stats.pearsonr(ax, ay).statistic
        elif kind == "spearman":
            r = stats.spearmanr(ax, ay).statistic
        elif kind == "kendall":
            r = stats.kendalltau(ax, ay, variant="b").statistic
        else:
            raise ValueError(f"unknown correlation {kind!r}")
    r = float(r)
    return r if math.isfinite(r) else None


def rater_pair_agreement(
    ratings: Mapping[str, Mapping[str, float]], tie_margin: float = 0.0
) -> tuple[int, int]:
    """(agreeing, compared) agent pairs between every pair of raters of one task, over
    the agents both raters scored."""
    agree = total = 0
    for r1, r2 in itertools.combinations(sorted(ratings), 2):
        common = sorted(set(ratings[r1]) & set(ratings[r2]))
        if len(common) < 2:
            continue
        a, t = pair_agreement([ratings[r1][g] for g in common],
                              [ratings[r2][g] for g in common], tie_margin)
        agree += a
        total += t
    return agree, total


def method_rater_agreement(
    method: Mapping[str, float], ratings: Mapping[str, Mapping[str, float]],
    tie_margin: float = 0.0,
) -> tuple[int, int]:
    """(agreeing, compared) agent pairs between the method and each single rater."""
    agree = total = 0
    for rater in sorted(ratings):
        common = sorted(set(method) & set(ratings[rater]))
        if len(common) < 2:
            continue
        a, t = pair_agreement([method[g] for g in common],
                              [ratings[rater][g] for g in common], tie_margin)
        agree += a
        total += t
    return agree, total


# --------------------------------------------------------------------------- joining


def align(
    method_scores: Mapping[tuple[str, str], float | None],
    human: Iterable[HumanScore],
    *,
    scale_method: float = 1.0,
    scale_human: float = 1.0,
) -> Alignment:
    """Join method scores keyed by (task_id, agent) with human ratings.

    Items without a method score (None) or without a human rating are counted, not
    used. Scores are multiplied by the scale factors (which must be positive, so
    rankings are unchanged; only MAD depends on them).
    """
    if scale_method <= 0 or scale_human <= 0:
        raise ValueError("scale factors must be positive")
    ratings: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    duplicates = 0
    for h in human:
        slot = ratings[(h.task_id, h.agent)]
        if h.rater in slot:
            duplicates += 1
        slot[h.rater] = float(h.score) * scale_human
    scored = {k: float(v) * scale_method for k, v in method_scores.items()
              if v is not None and math.isfinite(float(v))}
    by_task: dict[str, list[str]] = defaultdict(list)
    for task_id, agent in sorted(set(scored) & set(ratings)):
        by_task[task_id].append(agent)
    tasks = []
    for task_id in sorted(by_task, key=natural_key):
        agents = by_task[task_id]
        per_rater: dict[str, dict[str, float]] = defaultdict(dict)
        for agent in agents:
            for rater, value in ratings[(task_id, agent)].items():
                per_rater[rater][agent] = value
        tasks.append(TaskItems(
            task_id=task_id,
            agents=agents,
            method=[scored[(task_id, a)] for a in agents],
            human=[float(np.mean(list(ratings[(task_id, a)].values()))) for a in agents],
            ratings=dict(per_rater),
        ))
    return Alignment(
        tasks=tasks,
        method_only=len(set(scored) - set(ratings)),
        human_only=len(set(ratings) - set(scored)),
        duplicate_ratings=duplicates,
    )


# --------------------------------------------------------------------------- statistics


class _Prepared:
    """Per-task quantities computed once; every bootstrap replicate only reweights them."""

    def __init__(self, alignment: Alignment, tie_margin: float) -> None:
        tasks = alignment.tasks
        self.n = len(tasks)
        self.agents = sorted({a for t in tasks for a in t.agents})
        self.raters = sorted({r for t in tasks for r in t.ratings})
        col = {a: i for i, a in enumerate(self.agents)}
        n, na = self.n, len(self.agents)
        self.par = np.zeros((n, 2))
        self.hpar = np.zeros((n, 2))
        self.rpar = np.zeros((n, 2))
        self.exact = np.zeros(n)
        self.rankable = np.zeros(n)
        self.icc = np.full(n, np.nan)
        self.pearson = np.full(n, np.nan)
        self.spearman = np.full(n, np.nan)
        self.abs_err = np.zeros(n)
        self.items = np.zeros(n)
        self.msum = np.zeros((n, na))
        self.hsum = np.zeros((n, na))
        self.cnt = np.zeros((n, na))
        item_task, item_m, item_h = [], [], []
        for t, task in enumerate(tasks):
            m = np.asarray(task.method)
            h = np.asarray(task.human)
            agree, total = pair_agreement(m, h, tie_margin)
            self.par[t] = agree, total
            self.hpar[t] = rater_pair_agreement(task.ratings, tie_margin)
            self.rpar[t] = method_rater_agreement(dict(zip(task.agents, task.method)),
                                                  task.ratings, tie_margin)
            if total > 0:
                self.rankable[t] = 1.0
                self.exact[t] = float(agree == total)
            groups = [[task.ratings[r][a] for r in task.ratings if a in task.ratings[r]]
                      for a in task.agents]
            self.icc[t] = _nan(icc_1_1(groups))
            self.pearson[t] = _nan(correlation(m, h, "pearson"))
            self.spearman[t] = _nan(correlation(m, h, "spearman"))
            self.abs_err[t] = float(np.sum(np.abs(m - h)))
            self.items[t] = m.size
            for a, mv, hv in zip(task.agents, m, h):
                self.msum[t, col[a]] += mv
                self.hsum[t, col[a]] += hv
                self.cnt[t, col[a]] += 1
            item_task.extend([t] * m.size)
            item_m.extend(m.tolist())
            item_h.extend(h.tolist())
        # Negative-ICC filter; an undefined ICC cannot say the raters disagree.
        self.kept = ~(self.icc < 0)  # NaN < 0 is False, so undefined ICC is kept
        self.item_task = np.asarray(item_task, dtype=np.int64)
        self.item_m = np.asarray(item_m, dtype=float)
        self.item_h = np.asarray(item_h, dtype=float)

    def figures(self, w: np.ndarray) -> dict[str, float | None]:
        """Every figure for task weights ``w`` (ones = the observed data)."""
        f: dict[str, float | None] = {}
        f["par"] = _ratio(w @ self.par[:, 0], w @ self.par[:, 1])
        f["human_par"] = _ratio(w @ self.hpar[:, 0], w @ self.hpar[:, 1])
        f["par_raters"] = _ratio(w @ self.rpar[:, 0], w @ self.rpar[:, 1])
        f["exact_match"] = _ratio(w @ self.exact, w @ self.rankable)
        f["tasks_kept"] = float(w @ self.kept)
        for key, per_task in (("fap", self.pearson), ("fas", self.spearman)):
            use = self.kept & np.isfinite(per_task)
            f[key] = _ratio(w[use] @ per_task[use], float(np.sum(w[use])))
        f["mad"] = _ratio(w @ self.abs_err, w @ self.items)
        counts = w @ self.cnt
        present = counts > 0
        if np.count_nonzero(present) >= 2:
            f["opc"] = correlation((w @ self.msum)[present] / counts[present],
                                   (w @ self.hsum)[present] / counts[present], "pearson")
        else:
            f["opc"] = None
        reps = np.rint(w).astype(np.int64)[self.item_task] if self.item_task.size else None
        if reps is not None:
            xm = np.repeat(self.item_m, reps)
            xh = np.repeat(self.item_h, reps)
        else:
            xm = xh = np.zeros(0)
        for kind in ("pearson", "spearman", "kendall"):
            f[kind] = correlation(xm, xh, kind)
        return f


def _nan(v: float | None) -> float:
    return math.nan if v is None else v


def _ratio(num: SupportsFloat, den: SupportsFloat) -> float | None:
    # weighted sums arrive as numpy scalars (``w @ v``; numpy's stubs call them arrays)
    n, d = float(num), float(den)
    return n / d if d > 0 else None


def agreement(
    alignment: Alignment,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
    tie_margin: float = 0.0,
) -> AgreementResult:
    """All METHODS.md section 6 figures, each with a seeded bootstrap interval over
    tasks. Pure: the same inputs and seed give the same result."""
    prep = _Prepared(alignment, tie_margin)
    point = prep.figures(np.ones(prep.n))
    if point["tasks_kept"] is not None:
        point["tasks_kept"] = int(point["tasks_kept"])
    replicates: dict[str, list[float | None]] = {k: [] for k in FIGURE_KEYS}
    if prep.n > 0:
        for row in (r for block in iter_resample_counts(prep.n, resamples, seed) for r in block):
            for key, value in prep.figures(row.astype(float)).items():
                replicates[key].append(value)
    intervals = {k: percentile_interval(v, confidence) if v else None
                 for k, v in replicates.items()}
    per_task = []
    for t, task in enumerate(alignment.tasks):
        per_task.append(TaskAgreement(
            task_id=task.task_id,
            items=len(task.agents),
            raters=len(task.ratings),
            par=_ratio(prep.par[t, 0], prep.par[t, 1]),
            icc=None if math.isnan(prep.icc[t]) else float(prep.icc[t]),
            kept=bool(prep.kept[t]),
            pearson=None if math.isnan(prep.pearson[t]) else float(prep.pearson[t]),
            spearman=None if math.isnan(prep.spearman[t]) else float(prep.spearman[t]),
            exact_match=bool(prep.exact[t]) if prep.rankable[t] else None,
        ))
    icc_undefined = int(np.sum(np.isnan(prep.icc)))
    corr_undefined = int(np.sum(prep.kept & np.isnan(prep.pearson)))
    notes = _notes(point, intervals, prep, alignment, icc_undefined, corr_undefined)
    return AgreementResult(
        figures=point,
        intervals=intervals,
        n_tasks=prep.n,
        n_items=alignment.n_items,
        n_agents=len(prep.agents),
        n_raters=len(prep.raters),
        tasks_icc_undefined=icc_undefined,
        tasks_corr_undefined=corr_undefined,
        method_only=alignment.method_only,
        human_only=alignment.human_only,
        resamples=resamples,
        seed=seed,
        confidence=confidence,
        per_task=per_task,
        notes=notes,
    )


def _notes(point: dict[str, float | None], intervals: dict[str, Interval | None],
           prep: _Prepared, alignment: Alignment, icc_undefined: int,
           corr_undefined: int) -> list[str]:
    """Plain-language reasons for every undefined figure or interval."""
    notes = []
    if prep.n == 0:
        notes.append("no (task, agent) item has both a method score and a human score")
    if alignment.method_only:
        notes.append(f"{alignment.method_only} scored items have no human score (not used)")
    if alignment.human_only:
        notes.append(f"{alignment.human_only} human-rated items have no method score "
                     "(failed or not run; not used)")
    if alignment.duplicate_ratings:
        notes.append(f"{alignment.duplicate_ratings} repeated (task, agent, rater) ratings: "
                     "the last one was used")
    if icc_undefined:
        notes.append(f"ICC undefined for {icc_undefined} task(s) (single rater or no "
                     "variance); they are kept by the ICC filter")
    if corr_undefined:
        notes.append(f"per-task correlation undefined for {corr_undefined} kept task(s) "
                     "(fewer than 2 items or constant scores); left out of FAP/FAS")
    if len(prep.agents) < 3 and prep.n:
        notes.append(f"only {len(prep.agents)} agent(s): OPC is undefined or trivially +/-1")
    reasons = {
        "par": "no task has two scored items",
        "human_par": "no task has two raters who scored the same two agents",
        "par_raters": "no rater scored two items of a task",
        "exact_match": "no task has two scored items",
        "opc": "fewer than 2 agents, or constant per-agent means",
        "fap": "no kept task has a defined per-task Pearson",
        "fas": "no kept task has a defined per-task Spearman",
        "pearson": "fewer than 2 items or constant scores",
        "spearman": "fewer than 2 items or constant scores",
        "kendall": "fewer than 2 items or constant scores",
        "mad": "no items",
    }
    for key, why in reasons.items():
        if point.get(key) is None:
            notes.append(f"{key} undefined: {why}")
        elif intervals.get(key) is None and prep.n:
            notes.append(f"{key}: no interval (undefined in most resamples)")
    return notes
