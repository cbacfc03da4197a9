"""Run summaries as data and text: the per-method leaderboard (means with bootstrap
intervals over tasks, ranks over the tasks agents share), the groupings the report draws
(dimensions, redundancy pairs, citation outcomes, cost), and the Markdown and CSV tables.

Pure functions of score rows; :mod:`drscore.engine.reporting.html` turns them into the page and
the terminal leaderboard (``drscore.render``) uses the same :func:`leaderboard`, so the
numbers and intervals agree everywhere.
"""
from __future__ import annotations

import csv
import io
import math
import re
from array import array
from collections import defaultdict
from typing import Any, Iterable, Sequence

import msgspec
import numpy as np

from drscore.engine.reporting.decision_tables import PAIR_FIELDS, decisions_markdown, pair_records
from drscore.engine.stats.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, mean_ci
from drscore.engine.stats.rankable import reason_from_counts
from drscore.engine.runtime.escape import csv_cell, markdown_cell
from drscore.engine.runtime.models import ScoreRow
from drscore.engine.runtime.calls.ledger import may_have_billed, money_line
from drscore.engine.runtime.calls.pricing import cost_text, sum_costs
from drscore.engine.runtime.rundir_read import RunDir, natural_key
from drscore.engine.stats.paired import MethodDecisions

OUTCOMES = ("supported", "unsupported", "unreachable", "refused", "failed")
# Subscores that are counts or bookkeeping rather than quality dimensions (e.g. the
# redundancy method's pairs_total, FACT's supported/urls counts): listed in the
# Markdown tables, kept out of the dimension bars.
_COUNT_LIKE = re.compile(
    r"^(n_|num_|pairs|urls|pages|items|calls|tokens|units)"
    r"|(_total|_judged|_screened|_count|_expected|_pairs|_units|_extracted|_ok)$"
    r"|^(supported|unsupported|unreachable|refused|failed)$")
# ...and a subscore far off the method's score scale is not a dimension of that score.
_SCALE_FACTOR = 2.0
_SECRET_KEY = re.compile(r"(api[_-]?key|secret|passw(or)?d|authori[sz]ation|bearer|"
                         r"access[_-]?token|^token$|cookie)", re.I)


class LeaderboardRow(msgspec.Struct, kw_only=True):
    """One agent under one method, aggregated over tasks."""

    method: str
    rank: int | None
    agent: str
    score: float | None  # mean over tasks with a score
    ci_low: float | None
    ci_high: float | None
    tasks_scored: int
    tasks_total: int
    coverage: float | None  # mean judged/expected over the rows that state it
    failed: int
    partial: int
    calls: int
    cache_hits: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None  # None: the judge's price is unknown
    latency_s: float
    judge: str
    subscores: dict[str, float | None]
    # Set when the agents of this method were scored on different tasks: the mean and
    # interval over the tasks every agent has a score for, which is what ranks them.
    shared_tasks: int | None = None
    shared_score: float | None = None
    shared_ci_low: float | None = None
    shared_ci_high: float | None = None
    # Honest time and money (summed over the rows): time with a call at the judge, time
    # only waiting for quota and time only waiting for calls shared in flight (their judge
    # time is their owner's), instead of latency_s, which mixes them; what the rows would
    # have cost alone (no prompt cache, no answer shared with another agent or run).
    judge_s: float = 0.0
    quota_wait_s: float = 0.0
    shared_wait_s: float = 0.0
    cost_usd_uncached: float | None = 0.0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    # Shown but not ranked, and why (engine.stats.rankable); None when ranked normally.
    unranked_reason: str | None = None
    # --samples K: K, and the typical spread of one report's score across the samples
    samples: int = 1
    judge_sd: float | None = None


def task_sets_differ(entries: Sequence[LeaderboardRow]) -> bool:
    """True when the method's agents were ranked on the tasks they share because their
    scored task sets differ (see :func:`leaderboard`)."""
    return any(e.shared_tasks is not None for e in entries)


def comparison_note(entries: Sequence[LeaderboardRow]) -> str | None:
    """One sentence for a table whose agents were scored on different task sets."""
    if not task_sets_differ(entries):
        return None
    if all(e.rank is None for e in entries):  # nothing was ordered, by any mean
        return "Agents were scored on different tasks; none is ranked (see why beside each), so no order is given."
    shared = entries[0].shared_tasks or 0
    counts = ", ".join(f"{e.agent} {e.tasks_scored}" for e in entries)
    if shared == 0:
        return (f"Agents were scored on different tasks ({counts}) and share none: the ranks "
                "compare means over different task sets.")
    return (f"Agents were scored on different tasks ({counts}): ranked by the mean over the "
            f"{shared} task(s) all of them scored (shared mean); 'score' is each agent's own mean.")


# --------------------------------------------------------------------------- data


class _Cell(msgspec.Struct):
    """One (method, agent) folded: what its leaderboard entry needs, without the rows."""

    task_ix: array = msgspec.field(default_factory=lambda: array("i"))  # scored rows' tasks
    scores: array = msgspec.field(default_factory=lambda: array("d"))
    rows: int = 0
    coverage_sum: float = 0.0
    coverage_n: int = 0
    failed: int = 0
    partial: int = 0
    calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    latency_s: float = 0.0
    judge_s: float = 0.0
    quota_wait_s: float = 0.0
    shared_wait_s: float = 0.0
    cost_usd_uncached: float | None = 0.0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    samples: int = 1
    sd_sq_sum: float = 0.0  # judge samples: squares of the rows' score_sd
    sd_n: int = 0
    # the rank rules (engine.stats.rankable): scored rows, partial ones, coverage-0 ones
    scored: int = 0
    scored_partial: int = 0
    scored_zero: int = 0
    judges: set[str] = msgspec.field(default_factory=set)
    sub_sum: dict[str, float] = {}
    sub_n: dict[str, int] = {}
    # where each subscore name first appears in task order: the entry lists them so
    sub_first: dict[str, tuple[tuple[int, int | str], int]] = {}


class BoardFold:
    """Score rows folded one at a time into what :func:`leaderboard` needs: per method and
    agent, sums and counts, and each scored row's task (an index) and score in typed
    arrays, 12 bytes a row. ``drscore run`` folds its rows as they arrive and ``drscore
    report`` as it reads them, so neither keeps the rows for the leaderboard."""

    def __init__(self) -> None:
        self._cells: dict[str, dict[str, _Cell]] = {}
        self._task_ix: dict[str, int] = {}
        self._tasks: list[str] = []

    def add(self, row: ScoreRow) -> None:
        cell = self._cells.setdefault(row.method, {}).setdefault(row.agent, _Cell())
        cell.rows += 1
        if row.score is not None:
            ix = self._task_ix.get(row.task_id)
            if ix is None:
                ix = self._task_ix[row.task_id] = len(self._tasks)
                self._tasks.append(row.task_id)
            cell.task_ix.append(ix)
            cell.scores.append(row.score)
        if row.coverage is not None:
            cell.coverage_sum += row.coverage
            cell.coverage_n += 1
        cell.failed += row.status == "failed"
        cell.partial += row.status == "partial"
        cell.calls += row.calls
        cell.cache_hits += row.cache_hits
        cell.input_tokens += row.input_tokens
        cell.output_tokens += row.output_tokens
        cell.cost_usd = sum_costs((cell.cost_usd, row.cost_usd))
        cell.latency_s += row.latency_s
        cell.judge_s += row.judge_s
        cell.quota_wait_s += row.quota_wait_s
        cell.shared_wait_s += row.shared_wait_s
        cell.cost_usd_uncached = sum_costs((cell.cost_usd_uncached, row.cost_usd_uncached))
        cell.cached_input_tokens += row.cached_input_tokens
        cell.reasoning_tokens += row.reasoning_tokens
        cell.samples = max(cell.samples, len(row.sample_scores))
        if row.score_sd is not None:
            cell.sd_sq_sum += row.score_sd * row.score_sd
            cell.sd_n += 1
        if row.score is not None:
            cell.scored += 1
            if row.coverage is not None and row.coverage <= 0.0:
                cell.scored_zero += 1
            elif row.status == "partial":
                cell.scored_partial += 1
        if row.judge:
            cell.judges.add(row.judge)
        order = natural_key(row.task_id)
        for position, (key, value) in enumerate(row.subscores.items()):
            first = cell.sub_first.get(key)
            if first is None or (order, position) < first:
                cell.sub_first[key] = (order, position)
            cell.sub_sum.setdefault(key, 0.0)
            cell.sub_n.setdefault(key, 0)
            if value is not None and math.isfinite(value):
                cell.sub_sum[key] += value
                cell.sub_n[key] += 1

    def _ordered(self, cell: _Cell, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(task indices, scores) of the cell's scored rows in natural task order."""
        tasks = np.frombuffer(cell.task_ix, dtype=np.int32) if len(cell.task_ix) else np.zeros(0, np.int32)
        scores = np.frombuffer(cell.scores, dtype=float) if len(cell.scores) else np.zeros(0)
        order = np.argsort(rank[tasks], kind="stable")
        return tasks[order], scores[order]

    def board(self, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
              confidence: float = DEFAULT_CONFIDENCE) -> dict[str, list[LeaderboardRow]]:
        """The leaderboard (see :func:`leaderboard`)."""
        rank = np.empty(len(self._tasks), dtype=np.int64)
        for position, ix in enumerate(sorted(range(len(self._tasks)), key=lambda i: natural_key(self._tasks[i]))):
            rank[ix] = position
        board: dict[str, list[LeaderboardRow]] = {}
        for method, by_agent in self._cells.items():
            ordered = {agent: self._ordered(cell, rank) for agent, cell in by_agent.items()}
            entries = [_board_entry(method, agent, cell, ordered[agent][1], resamples, seed, confidence)
                       for agent, cell in by_agent.items()]
            scored_sets = {agent: frozenset(tasks.tolist()) for agent, (tasks, _) in ordered.items()}
            nonempty = [t for t in scored_sets.values() if t]
            differ = len(set(nonempty)) > 1
            if differ:
                shared = frozenset.intersection(*nonempty)
                keep = np.fromiter(shared, dtype=np.int64, count=len(shared))
                for e in entries:
                    e.shared_tasks = len(shared)
                    if not scored_sets[e.agent] or not shared:
                        continue
                    tasks, scores = ordered[e.agent]
                    values = scores[np.isin(tasks, keep)]
                    e.shared_score, ci = mean_ci(values, resamples=resamples, seed=seed, confidence=confidence)
                    e.shared_ci_low, e.shared_ci_high = (ci.low, ci.high) if ci else (None, None)
            for e in entries:
                cell = by_agent[e.agent]
                e.unranked_reason = reason_from_counts(cell.scored, cell.scored_partial, cell.scored_zero)
            _rank(entries, differ and any(e.shared_score is not None for e in entries))
            board[method] = entries
        return board


def _board_entry(method: str, agent: str, cell: _Cell, values: np.ndarray, resamples: int, seed: int,
                 confidence: float) -> LeaderboardRow:
    mean, ci = mean_ci(values, resamples=resamples, seed=seed, confidence=confidence)
    subs = sorted(cell.sub_first, key=lambda k: cell.sub_first[k])
    return LeaderboardRow(
        method=method, rank=None, agent=agent, score=mean,
        ci_low=ci.low if ci else None, ci_high=ci.high if ci else None,
        tasks_scored=int(values.size), tasks_total=cell.rows,
        coverage=cell.coverage_sum / cell.coverage_n if cell.coverage_n else None,
        failed=cell.failed, partial=cell.partial, calls=cell.calls, cache_hits=cell.cache_hits,
        input_tokens=cell.input_tokens, output_tokens=cell.output_tokens, cost_usd=cell.cost_usd,
        latency_s=cell.latency_s, judge=", ".join(sorted(cell.judges)),
        subscores={k: (cell.sub_sum[k] / cell.sub_n[k] if cell.sub_n[k] else None) for k in subs},
        judge_s=cell.judge_s, quota_wait_s=cell.quota_wait_s, shared_wait_s=cell.shared_wait_s,
        cost_usd_uncached=cell.cost_usd_uncached,
        cached_input_tokens=cell.cached_input_tokens, reasoning_tokens=cell.reasoning_tokens,
        samples=cell.samples, judge_sd=math.sqrt(cell.sd_sq_sum / cell.sd_n) if cell.sd_n else None,
    )


def _rank(entries: list[LeaderboardRow], use_shared: bool) -> None:
    """Sort best first and give competition ranks (equal scores share a rank)."""
    def key(e: LeaderboardRow) -> float | None:
        if e.unranked_reason is not None:
            return None  # shown, after the ranked agents, with its reason
        return e.shared_score if use_shared else e.score

    entries.sort(key=lambda e: (key(e) is None, -(key(e) or 0.0), e.agent))
    rank = 0
    previous: float | None = None
    for position, entry in enumerate(entries, start=1):
        if key(entry) is None:
            break
        if previous is None or key(entry) != previous:
            rank = position
        entry.rank = rank
        previous = key(entry)


def leaderboard(
    rows: Iterable[ScoreRow] | BoardFold,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> dict[str, list[LeaderboardRow]]:
    """Per method, the agents ranked by mean score (higher is better) with a seeded
    bootstrap interval over tasks. Agents without any score come last, unranked.

    Agents are compared on the tasks they share: when their scored task sets differ,
    each entry also gets the mean and interval over the tasks every scored agent has a
    score for (``shared_*``), and that mean ranks them (:func:`comparison_note` says
    so). With no task in common the ranks fall back to each agent's own mean.

    ``rows`` may be a :class:`BoardFold` the rows were already folded into."""
    fold = rows if isinstance(rows, BoardFold) else None
    if fold is None:
        fold = BoardFold()
        for row in rows:  # type: ignore[union-attr]
            fold.add(row)
    return fold.board(resamples=resamples, seed=seed, confidence=confidence)


# Subscores that are rates or shares (FACT's valid_rate, acc_paper): on a method whose other
# dimension-like subscores are per-report counts, these two kinds get axes of their own.
_RATE_LIKE = re.compile(r"(rate|^acc|accuracy|share|ratio|precision|recall|fraction)")


def dimension_groups(entries: Sequence[LeaderboardRow]) -> tuple[list[str], list[str]]:
    """:func:`dimension_names` split for drawing: ``(dimensions, counts)``. When some are
    rates and the others are not, the others are per-report counts and ``counts`` lists
    them (drawn on their own axis); otherwise every name is a dimension."""
    names = dimension_names(entries)
    rates = [n for n in names if _RATE_LIKE.search(n)]
    if not rates or len(rates) == len(names):
        return names, []
    return rates, [n for n in names if n not in rates]


def dimension_names(entries: Sequence[LeaderboardRow]) -> list[str]:
    """Subscore names that look like quality dimensions, in first-seen order: not a
    count by name, and on the method's score scale (every agent's mean subscore is at
    most twice the largest mean score, or 2 when scores are within [-1, 1])."""
    top = max((abs(e.score) for e in entries if e.score is not None), default=0.0)
    bound = _SCALE_FACTOR * max(top, 1.0)
    names: dict[str, None] = {}
    for entry in entries:
        for key in entry.subscores:
            if not _COUNT_LIKE.search(key):
                names[key] = None
    return [k for k in names
            if all((v := e.subscores.get(k)) is None or abs(v) <= bound for e in entries)]


def pick_redundancy_row(rows: Iterable[ScoreRow], task_id: str | None = None,
                        agent: str | None = None) -> ScoreRow | None:
    """The row whose paragraph-pair matrix to draw: the given task/agent if any, else
    the row with the most pairs (ties: first method, task, agent)."""
    candidates = [r for r in rows if _pairs(r)]
    if task_id is not None:
        candidates = [r for r in candidates if r.task_id == task_id]
    if agent is not None:
        candidates = [r for r in candidates if r.agent == agent]
    if not candidates:
        return None
    candidates.sort(key=lambda r: (-len(_pairs(r)), r.method, natural_key(r.task_id), r.agent))
    return candidates[0]


class RedundancyPicker:
    """While rows stream past, keeps only the row :func:`pick_redundancy_row` would
    choose, so the report never holds every row's pairs."""

    def __init__(self, task_id: str | None = None, agent: str | None = None) -> None:
        self.task_id, self.agent = task_id, agent
        self.row: ScoreRow | None = None
        self._key: tuple[Any, ...] | None = None

    def see(self, row: ScoreRow) -> None:
        if (self.task_id is not None and row.task_id != self.task_id) or (
                self.agent is not None and row.agent != self.agent):
            return
        pairs = len(_pairs(row))
        if not pairs:
            return
        key = (-pairs, row.method, natural_key(row.task_id), row.agent)
        if self._key is None or key < self._key:
            self.row, self._key = row, key


def slim_row(row: ScoreRow) -> ScoreRow:
    """The row without its bulky ``details`` (statements, pairs, claims), keeping the
    citation outcome counts the report draws (:func:`citation_counts`)."""
    if not row.details:
        return row
    slim: dict[str, Any] = {k: v for k, v in row.details.items() if k in OUTCOMES}
    counts = row.details.get("counts")
    if isinstance(counts, dict):
        slim["counts"] = {k: v for k, v in counts.items() if k in OUTCOMES}
    return msgspec.structs.replace(row, details=slim)


def _pairs(row: ScoreRow) -> list[tuple[int, int, float | None, str]]:
    """Valid ``details["pairs"]`` entries as (i, j, score, kind); malformed ones dropped."""
    out = []
    for item in row.details.get("pairs") or []:
        if not isinstance(item, (list, tuple)) or len(item) < 3:
            continue
        i, j, score = item[0], item[1], item[2]
        kind = str(item[3]) if len(item) > 3 else "judged"
        if isinstance(i, int) and isinstance(j, int) and (
                score is None or isinstance(score, (int, float))):
            out.append((i, j, None if score is None else float(score), kind))
    return out


def _units(row: ScoreRow, pairs: Sequence[tuple[int, int, float | None, str]]) -> tuple[int, list[str]]:
    """Number of paragraphs and their texts when the row carries them."""
    units = row.details.get("units")
    texts: list[str] = []
    if isinstance(units, list):
        texts = [u if isinstance(u, str) else str(u.get("text", "")) if isinstance(u, dict)
                 else str(u) for u in units]
        count = len(units)
    elif isinstance(units, int):
        count = units
    else:
        count = 0
    highest = max((max(i, j) for i, j, _, _ in pairs), default=-1) + 1
    return max(count, highest), texts


def citation_counts(rows: Iterable[ScoreRow]) -> dict[str, dict[str, dict[str, float]]]:
    """method -> agent -> outcome -> pairs, summed over tasks, for rows that carry any
    outcome count in ``details`` (top level or under ``details["counts"]``)."""
    out: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        sources = [row.details]
        if isinstance(row.details.get("counts"), dict):
            sources.append(row.details["counts"])
        found = {}
        for source in sources:
            for outcome in OUTCOMES:
                value = source.get(outcome)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    found[outcome] = float(value)
        if not found:
            continue
        slot = out[row.method][row.agent]
        for outcome in OUTCOMES:
            slot[outcome] = slot.get(outcome, 0.0) + found.get(outcome, 0.0)
    return {m: dict(a) for m, a in out.items()}


def cost_by(rows: Iterable[ScoreRow], key: str) -> list[tuple[str, dict[str, float | None]]]:
    """Sums of cost, latency, calls, cache hits and tokens grouped by ``task_id`` or
    ``method``, plus the number of rows (reports). The cost is None when unknown."""
    acc: dict[str, dict[str, float | None]] = {}
    for row in rows:
        slot = acc.setdefault(getattr(row, key), dict.fromkeys(
            ("reports", "cost_usd", "cost_usd_uncached", "latency_s", "judge_s", "quota_wait_s", "calls",
             "cache_hits", "input_tokens", "output_tokens"), 0.0))
        slot["cost_usd"] = sum_costs((slot["cost_usd"], row.cost_usd))
        slot["cost_usd_uncached"] = sum_costs((slot["cost_usd_uncached"], row.cost_usd_uncached))
        for name, value in (("reports", 1), ("latency_s", row.latency_s), ("judge_s", row.judge_s),
                            ("quota_wait_s", row.quota_wait_s), ("calls", row.calls),
                            ("cache_hits", row.cache_hits), ("input_tokens", row.input_tokens),
                            ("output_tokens", row.output_tokens)):
            slot[name] = (slot[name] or 0.0) + value
    order = sorted(acc, key=natural_key) if key == "task_id" else list(acc)
    return [(k, acc[k]) for k in order]


def redact(value: Any) -> Any:
    """A copy of a config with secret-looking values replaced (never show keys)."""
    if isinstance(value, dict):
        return {k: ("***" if _SECRET_KEY.search(str(k)) and v not in (None, "") else redact(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


# --------------------------------------------------------------------------- text tables


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.{digits}f}"


def _judges(run: RunDir) -> list[str]:
    return sorted({r.judge for r in run.scores if r.judge})


def _offline(run: RunDir) -> bool:
    return any("offline" in j.lower() for j in _judges(run))


def leaderboard_markdown(run: RunDir, board: dict[str, list[LeaderboardRow]], *,
                         confidence: float, resamples: int, seed: int,
                         decisions: dict[str, MethodDecisions] | None = None) -> str:
    """``leaderboard.md``: one table per method, then its subscore means and, given
    ``decisions``, its paired differences and P(rank first) (decision_tables)."""
    pct = f"{confidence * 100:g}%"
    lines = ["# Leaderboard", "",
             f"Run: `{run.path}` · judge: {', '.join(_judges(run)) or 'unknown'} · "
             f"score = mean over tasks; {pct} CI = percentile bootstrap over tasks "
             f"({resamples} resamples, seed {seed}).", ""]
    note = run.unfinished_note()
    if note:
        lines += [f"> **{note}**", ""]
    if run.ledger:  # what the run paid, from its ledger (every invocation); the table's costs are per agent
        lost = may_have_billed(run.ledger)
        lines += [f"Cost: {money_line(run.ledger, 'last invocation')}" + (f"; {lost}" if lost else "") + ".", ""]
    if _offline(run):
        lines += ["> Scored by the **offline judge**: a deterministic lexical/heuristic "
                  "baseline, not an LLM judgement.", ""]
    if not board:
        lines += ["No scores in this run.", ""]
    for method, entries in board.items():
        differ = task_sets_differ(entries)
        shared_head = f" shared mean | shared {pct} CI |" if differ else ""
        lines += [f"## {method}", "",
                  f"| rank | agent | score | {pct} CI |{shared_head} tasks | coverage | failed | cost (USD) |",
                  "|---:|---|---:|---|" + ("---:|---|" if differ else "") + "---:|---:|---:|---:|"]
        for e in entries:
            ci = f"[{_fmt(e.ci_low)}, {_fmt(e.ci_high)}]" if e.ci_low is not None else "–"
            shared = ""
            if differ:
                sci = f"[{_fmt(e.shared_ci_low)}, {_fmt(e.shared_ci_high)}]" if e.shared_ci_low is not None else "–"
                shared = f" {_fmt(e.shared_score)} | {sci} |"
            lines.append(
                f"| {e.rank or '–'} | {_md(e.agent)} | {_fmt(e.score)} | {ci} |{shared} "
                f"{e.tasks_scored}/{e.tasks_total} | {_fmt(e.coverage, 2)} | {e.failed} | "
                f"{cost_text(e.cost_usd)} |")
        note = comparison_note(entries)
        if note:
            lines += ["", f"> {_md(note)}"]  # it names the agents: data, escaped like every cell
        for e in entries:  # shown, not ranked (engine.stats.rankable)
            if e.unranked_reason:
                lines += ["", f"> not ranked: {_md(e.agent)} ({_md(e.unranked_reason)})"]
        subs = list(dict.fromkeys(k for e in entries for k in e.subscores))
        if subs:
            lines += ["", "Subscores (mean over tasks):", "",
                      "| agent | " + " | ".join(_md(s) for s in subs) + " |",
                      "|---|" + "---:|" * len(subs)]
            for e in entries:
                lines.append(f"| {_md(e.agent)} | "
                             + " | ".join(_fmt(e.subscores.get(s)) for s in subs) + " |")
        # A method's own suite figures and notes from summary.json (e.g. FACT's pooled
        # valid rate; Rigorous scores not comparable with the published ones).
        for entry in run.summary.get("per_agent_method", []):
            for convention, figures in (entry.get("suite") or {}).items() if entry.get("method") == method else ():
                shown = ", ".join(f"{k} {v if isinstance(v, int) else _fmt(v)}" for k, v in figures.items())
                lines += ["", f"{_md(str(entry.get('agent')))} · {convention}: {shown}"]
        for note in (run.summary.get("notes") or {}).get(method, []):
            lines += ["", f"> **Note:** {_md(note)}"]
        if decisions and method in decisions:
            lines += decisions_markdown(decisions[method])
        lines.append("")
    return "\n".join(lines)


def _md(text: str) -> str:
    return markdown_cell(text)


def leaderboard_csv(board: dict[str, list[LeaderboardRow]],
                    decisions: dict[str, MethodDecisions] | None = None) -> str:
    """``leaderboard.csv``: one row per method x agent (``kind`` agent); subscores as
    ``sub.<name>``; given ``decisions``, each agent's ``p_first`` and, after a method's
    agents, one row per pair of agents (``kind`` pair: A in ``agent``, B in ``vs``)."""
    subs = sorted({k for entries in board.values() for e in entries for k in e.subscores})
    fields = ["kind", "method", "rank", "agent", "score", "ci_low", "ci_high", "tasks_scored",
              "tasks_total", "coverage", "failed", "partial", "calls", "cache_hits",
              "input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens", "cost_usd",
              "cost_usd_uncached", "judge_s", "quota_wait_s", "shared_wait_s", "judge",
              "shared_tasks", "shared_score", "shared_ci_low", "shared_ci_high", "samples", "judge_sd",
              "unranked_reason"]
    fields += ["p_first", *PAIR_FIELDS]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(fields + [f"sub.{s}" for s in subs])
    decisions = decisions or {}
    for method, entries in board.items():
        decided = decisions.get(method)
        for e in entries:
            record: dict[str, Any] = {**msgspec.structs.asdict(e), "kind": "agent",
                                      "p_first": (decided.p_first or {}).get(e.agent) if decided else None}
            writer.writerow([_csv(record.get(f)) for f in fields]
                            + [_csv(e.subscores.get(s)) for s in subs])
        for pair in pair_records(decided) if decided else ():
            writer.writerow([_csv(pair.get(f)) for f in fields] + [""] * len(subs))
    return buf.getvalue()


def _csv(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if not math.isfinite(value) else f"{value:.6g}"
    return csv_cell(value)
