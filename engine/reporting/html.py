"""Run reports: leaderboard tables (Markdown, CSV) and one self-contained HTML page.

Everything here is a pure function of a loaded :class:`drscore.engine.runtime.rundir_read.RunDir`: the
command layer reads the run directory and writes the files. The HTML page has no
scripts, no external stylesheet, font or image: charts are inline SVG from
:mod:`drscore.engine.reporting.charts`, so it opens offline and can be mailed as one file.

The report shows what the run contains. Sections are driven by the data, not by
method names: a leaderboard and per-task heatmap for every method; per-dimension bars
for rows with dimension subscores; a redundancy matrix for rows whose ``details``
carry ``pairs``; citation outcomes for rows whose ``details`` carry ``supported`` /
``unsupported`` / ``unreachable`` / ``refused`` counts; cost and latency from every
row. A section without data says so.
"""
from __future__ import annotations

import csv
import html
import io
import json
import math
import re
from collections import defaultdict
from typing import Any, Iterable, Sequence

import msgspec

from drscore.engine.reporting import charts
from drscore.engine.stats.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, mean_ci
from drscore.engine.runtime.models import ScoreRow
from drscore.engine.runtime.rundir_read import RunDir, natural_key

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
_MAX_PROBLEMS = 50


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
    cost_usd: float
    latency_s: float
    judge: str
    subscores: dict[str, float | None]


# --------------------------------------------------------------------------- data


def leaderboard(
    rows: Iterable[ScoreRow],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
) -> dict[str, list[LeaderboardRow]]:
    """Per method, the agents ranked by mean score (higher is better) with a seeded
    bootstrap interval over tasks. Agents without any score come last, unranked."""
    grouped: dict[str, dict[str, list[ScoreRow]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        grouped[row.method][row.agent].append(row)
    board: dict[str, list[LeaderboardRow]] = {}
    for method, by_agent in grouped.items():
        entries = [_board_row(method, agent, rs, resamples, seed, confidence)
                   for agent, rs in by_agent.items()]
        entries.sort(key=lambda e: (e.score is None, -(e.score or 0.0), e.agent))
        rank = 0
        previous: float | None = None
        for position, entry in enumerate(entries, start=1):
            if entry.score is None:
                break
            if previous is None or entry.score != previous:
                rank = position  # competition ranking: equal scores share a rank
            entry.rank = rank
            previous = entry.score
        board[method] = entries
    return board


def _board_row(method: str, agent: str, rows: list[ScoreRow], resamples: int, seed: int,
               confidence: float) -> LeaderboardRow:
    rows = sorted(rows, key=lambda r: natural_key(r.task_id))
    values = [r.score for r in rows if r.score is not None]
    mean, ci = mean_ci(values, resamples=resamples, seed=seed, confidence=confidence)
    coverages = [r.coverage for r in rows if r.coverage is not None]
    return LeaderboardRow(
        method=method,
        rank=None,
        agent=agent,
        score=mean,
        ci_low=ci.low if ci else None,
        ci_high=ci.high if ci else None,
        tasks_scored=len(values),
        tasks_total=len(rows),
        coverage=sum(coverages) / len(coverages) if coverages else None,
        failed=sum(r.status == "failed" for r in rows),
        partial=sum(r.status == "partial" for r in rows),
        calls=sum(r.calls for r in rows),
        cache_hits=sum(r.cache_hits for r in rows),
        input_tokens=sum(r.input_tokens for r in rows),
        output_tokens=sum(r.output_tokens for r in rows),
        cost_usd=sum(r.cost_usd for r in rows),
        latency_s=sum(r.latency_s for r in rows),
        judge=", ".join(sorted({r.judge for r in rows if r.judge})),
        subscores=_subscore_means(rows),
    )


def _subscore_means(rows: Sequence[ScoreRow]) -> dict[str, float | None]:
    sums: dict[str, list[float]] = {}
    for row in rows:
        for key, value in row.subscores.items():
            bucket = sums.setdefault(key, [])
            if value is not None and math.isfinite(value):
                bucket.append(value)
    return {k: (sum(v) / len(v) if v else None) for k, v in sums.items()}


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
            if all(e.subscores.get(k) is None or abs(e.subscores[k]) <= bound for e in entries)]


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


def cost_by(rows: Iterable[ScoreRow], key: str) -> list[tuple[str, dict[str, float]]]:
    """Sums of cost, latency, calls, cache hits and tokens grouped by ``task_id`` or
    ``method``, plus the number of rows (reports)."""
    acc: dict[str, dict[str, float]] = {}
    for row in rows:
        slot = acc.setdefault(getattr(row, key), dict.fromkeys(
            ("reports", "cost_usd", "latency_s", "calls", "cache_hits", "input_tokens",
             "output_tokens"), 0.0))
        slot["reports"] += 1
        slot["cost_usd"] += row.cost_usd
        slot["latency_s"] += row.latency_s
        slot["calls"] += row.calls
        slot["cache_hits"] += row.cache_hits
        slot["input_tokens"] += row.input_tokens
        slot["output_tokens"] += row.output_tokens
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
                         confidence: float, resamples: int, seed: int) -> str:
    """``leaderboard.md``: one table per method, then its subscore means."""
    pct = f"{confidence * 100:g}%"
    lines = ["# Leaderboard", "",
             f"Run: `{run.path}` · judge: {', '.join(_judges(run)) or 'unknown'} · "
             f"score = mean over tasks; {pct} CI = percentile bootstrap over tasks "
             f"({resamples} resamples, seed {seed}).", ""]
    note = run.unfinished_note()
    if note:
        lines += [f"> **{note}**", ""]
    if _offline(run):
        lines += ["> Scored by the **offline judge**: a deterministic lexical/heuristic "
                  "baseline, not an LLM judgement.", ""]
    if not board:
        lines += ["No scores in this run.", ""]
    for method, entries in board.items():
        lines += [f"## {method}", "",
                  f"| rank | agent | score | {pct} CI | tasks | coverage | failed | cost (USD) |",
                  "|---:|---|---:|---|---:|---:|---:|---:|"]
        for e in entries:
            ci = f"[{_fmt(e.ci_low)}, {_fmt(e.ci_high)}]" if e.ci_low is not None else "–"
            lines.append(
                f"| {e.rank or '–'} | {_md(e.agent)} | {_fmt(e.score)} | {ci} | "
                f"{e.tasks_scored}/{e.tasks_total} | {_fmt(e.coverage, 2)} | {e.failed} | "
                f"{e.cost_usd:.4f} |")
        subs = list(dict.fromkeys(k for e in entries for k in e.subscores))
        if subs:
            lines += ["", "Subscores (mean over tasks):", "",
                      "| agent | " + " | ".join(_md(s) for s in subs) + " |",
                      "|---|" + "---:|" * len(subs)]
            for e in entries:
                lines.append(f"| {_md(e.agent)} | "
                             + " | ".join(_fmt(e.subscores.get(s)) for s in subs) + " |")
        lines.append("")
    return "\n".join(lines)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def leaderboard_csv(board: dict[str, list[LeaderboardRow]]) -> str:
    """``leaderboard.csv``: one row per method x agent; subscores as ``sub.<name>``."""
    subs = sorted({k for entries in board.values() for e in entries for k in e.subscores})
    fields = ["method", "rank", "agent", "score", "ci_low", "ci_high", "tasks_scored",
              "tasks_total", "coverage", "failed", "partial", "calls", "cache_hits",
              "input_tokens", "output_tokens", "cost_usd", "latency_s", "judge"]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(fields + [f"sub.{s}" for s in subs])
    for entries in board.values():
        for e in entries:
            record = msgspec.structs.asdict(e)
            writer.writerow([_csv(record[f]) for f in fields]
                            + [_csv(e.subscores.get(s)) for s in subs])
    return buf.getvalue()


def _csv(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if not math.isfinite(value) else f"{value:.6g}"
    return value


# --------------------------------------------------------------------------- HTML

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;
max-width:1100px;padding:0 1rem;color:#222;line-height:1.45}
h1{font-size:1.6rem}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2.2rem}
h3{font-size:1.05rem;margin-top:1.4rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}
.note{background:#fff8e1;border-left:4px solid #edae49;padding:.5rem .8rem}
.nodata{color:#777;font-style:italic}
figure.chart{margin:.8rem 0;overflow-x:auto}figure.chart svg{max-width:100%;height:auto}
figure.chart svg *{stroke-linejoin:round;stroke-linecap:butt}
figcaption{font-size:.8rem;color:#555}
pre{background:#f6f6f6;padding:.6rem;overflow-x:auto;font-size:.8rem}
"""


class _Ids:
    """Unique, readable chart ids (also used as SVG id prefixes)."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def __call__(self, *parts: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_-]+", "_", "-".join(parts)).strip("_") or "chart"
        name, k = base, 1
        while name in self.used:
            k += 1
            name = f"{base}-{k}"
        self.used.add(name)
        return name


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _chart(chart_id: str, svg: str, caption: str) -> str:
    return (f'<figure class="chart" data-chart="{_e(chart_id)}">{svg}'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def _nodata(why: str) -> str:
    return f'<p class="nodata">No data: {_e(why)}</p>'


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]], left: int = 1) -> str:
    """An HTML table; the first ``left`` columns are left-aligned text."""
    head = "".join(f'<th class="l">{_e(h)}</th>' if i < left else f"<th>{_e(h)}</th>"
                   for i, h in enumerate(headers))
    body = []
    for row in rows:
        cells = "".join(f'<td class="l">{_e(c)}</td>' if i < left else f"<td>{_e(c)}</td>"
                        for i, c in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _facts(rows: Iterable[tuple[str, Any]]) -> str:
    """A two-column key/value table without a header row."""
    body = "".join(f'<tr><th class="l">{_e(k)}</th><td class="l">{_e(v)}</td></tr>'
                   for k, v in rows)
    return f"<table><tbody>{body}</tbody></table>"


def render_html(
    run: RunDir,
    board: dict[str, list[LeaderboardRow]],
    *,
    redundancy_row: ScoreRow | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    title: str | None = None,
) -> str:
    """The whole report page as one string (inline CSS and SVG, no scripts)."""
    ids = _Ids()
    title = title or f"drscore report: {run.path}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # An empty inline icon: without it browsers request /favicon.ico (a network
        # request, and a console error when opened from disk).
        '<link rel="icon" href="data:,">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        _unfinished(run),
        _section_header(run, confidence, resamples, seed),
        _section_leaderboard(board, ids, confidence),
        _section_dimensions(board, ids),
        _section_heatmaps(run, ids),
        _section_redundancy(redundancy_row, ids),
        _section_citations(run, ids),
        _section_cost(run, ids),
        _section_problems(run),
        _section_config(run),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _unfinished(run: RunDir) -> str:
    """A banner above everything when the run did not finish (killed, stopped, running)."""
    note = run.unfinished_note()
    return f'<p class="note unfinished" id="unfinished"><b>{_e(note)}</b></p>' if note else ""


def _section_header(run: RunDir, confidence: float, resamples: int, seed: int) -> str:
    tasks = {r.task_id for r in run.scores}
    out = [_facts([
        ("run directory", run.path),
        ("judge", ", ".join(_judges(run)) or "unknown"),
        ("methods", ", ".join(run.methods()) or "none"),
        ("agents", len(run.agents())),
        ("tasks", len(tasks)),
        ("score rows", len(run.scores)),
        ("intervals", f"{confidence * 100:g}% percentile bootstrap over tasks, "
                      f"{resamples} resamples, seed {seed}"),
    ])]
    if _offline(run):
        out.insert(0, '<p class="note">Scored by the <b>offline judge</b>: a deterministic '
                      "lexical/heuristic baseline, not an LLM judgement. Use it to test "
                      "pipelines, not to rank agents.</p>")
    return "<section id=\"overview\"><h2>Overview</h2>" + "".join(out) + "</section>"


def _section_leaderboard(board: dict[str, list[LeaderboardRow]], ids: _Ids,
                         confidence: float) -> str:
    out = ['<section id="leaderboard"><h2>Leaderboard</h2>']
    if not board:
        out.append(_nodata("the run has no score rows"))
    pct = f"{confidence * 100:g}%"
    for method, entries in board.items():
        out.append(f"<h3>{_e(method)}</h3>")
        out.append(_table(
            ["agent", "rank", "score", f"{pct} CI", "tasks", "coverage", "failed", "partial"],
            [(e.agent, e.rank or "–", _fmt(e.score),
              f"[{_fmt(e.ci_low)}, {_fmt(e.ci_high)}]" if e.ci_low is not None else "–",
              f"{e.tasks_scored}/{e.tasks_total}", _fmt(e.coverage, 2), e.failed, e.partial)
             for e in entries]))
        scored = [e for e in entries if e.score is not None]
        if scored:
            cid = ids("leaderboard", method)
            out.append(_chart(cid, charts.leaderboard_chart(
                cid, f"{method}: mean score with {pct} CI",
                [e.agent for e in scored], [e.score for e in scored],
                [e.ci_low for e in scored], [e.ci_high for e in scored]),
                f"{method}: agents by mean score over tasks; whiskers show the bootstrap CI."))
        else:
            out.append(_nodata(f"no {method} row has a score (all failed)"))
    out.append("</section>")
    return "".join(out)


def _section_dimensions(board: dict[str, list[LeaderboardRow]], ids: _Ids) -> str:
    out = ['<section id="dimensions"><h2>Per-dimension scores</h2>']
    drawn = False
    for method, entries in board.items():
        dims = dimension_names(entries)
        if not dims:
            continue
        drawn = True
        cid = ids("dimensions", method)
        values = {e.agent: {d: e.subscores.get(d) for d in dims} for e in entries}
        out.append(f"<h3>{_e(method)}</h3>")
        out.append(_chart(cid, charts.dimension_chart(
            cid, f"{method}: mean subscore per dimension", [e.agent for e in entries], dims,
            values), f"{method}: mean of each dimension subscore over tasks."))
        out.append(_table(["agent", *dims],
                          [(e.agent, *(_fmt(e.subscores.get(d)) for d in dims))
                           for e in entries]))
    if not drawn:
        out.append(_nodata("no method in this run reports dimension subscores"))
    out.append("</section>")
    return "".join(out)


def _section_heatmaps(run: RunDir, ids: _Ids) -> str:
    out = ['<section id="tasks"><h2>Per-task scores</h2>']
    if not run.scores:
        out.append(_nodata("the run has no score rows"))
    for method in run.methods():
        rows = [r for r in run.scores if r.method == method]
        tasks = sorted({r.task_id for r in rows}, key=natural_key)
        agents = sorted({r.agent for r in rows})
        cell = {(r.task_id, r.agent): r.score for r in rows}
        matrix = [[cell.get((t, a)) for t in tasks] for a in agents]
        cid = ids("heatmap", method)
        out.append(f"<h3>{_e(method)}</h3>")
        out.append(_chart(cid, charts.heatmap_chart(
            cid, f"{method}: score per task", tasks, agents, matrix),
            f"{method}: one cell per task and agent; grey = no score (failed or not run)."))
    out.append("</section>")
    return "".join(out)


def _section_redundancy(row: ScoreRow | None, ids: _Ids) -> str:
    out = ['<section id="redundancy"><h2>Paragraph redundancy matrix</h2>']
    if row is None:
        out.append(_nodata("no score row carries paragraph pairs (run the redundancy "
                           "method to see this matrix)"))
        out.append("</section>")
        return "".join(out)
    pairs = _pairs(row)
    units, texts = _units(row, pairs)
    judged = sum(kind == "judged" for _, _, _, kind in pairs)
    cid = ids("redundancy", row.method, row.task_id, row.agent)
    out.append(f"<p>Method <b>{_e(row.method)}</b>, task <b>{_e(row.task_id)}</b>, agent "
               f"<b>{_e(row.agent)}</b>: {units} paragraphs, {len(pairs)} pairs scored "
               f"({judged} by the judge, {len(pairs) - judged} pre-filtered as "
               f"non-redundant), report score {_fmt(row.score)}.</p>")
    out.append(_chart(cid, charts.redundancy_chart(
        cid, f"{row.method}: task {row.task_id}, {row.agent}", units, pairs),
        "Pair scores 0-4 (4 = no repetition); dots mark pairs sent to the judge."))
    worst = sorted((p for p in pairs if p[2] is not None), key=lambda p: p[2])[:10]
    if worst:
        out.append("<p>Most repetitive pairs:</p>")
        if texts:
            out.append(_table(["pair", "score", "scored by", "paragraph i", "paragraph j"], [
                (f"{i} × {j}", _fmt(s, 2), kind, _snippet(texts, i), _snippet(texts, j))
                for i, j, s, kind in worst]))
        else:
            out.append(_table(["pair", "score", "scored by"], [
                (f"{i} × {j}", _fmt(s, 2), kind) for i, j, s, kind in worst]))
    out.append("</section>")
    return "".join(out)


def _snippet(texts: Sequence[str], index: int, limit: int = 90) -> str:
    if 0 <= index < len(texts):
        text = " ".join(texts[index].split())
        return text if len(text) <= limit else text[: limit - 1] + "…"
    return ""


def _section_citations(run: RunDir, ids: _Ids) -> str:
    out = ['<section id="citations"><h2>Citation outcomes</h2>']
    counts = citation_counts(run.scores)
    if not counts:
        out.append(_nodata("no score row carries citation outcome counts (run a "
                           "citation-checking method such as FACT)"))
    for method, by_agent in counts.items():
        agents = sorted(by_agent)
        cid = ids("citations", method)
        out.append(f"<h3>{_e(method)}</h3>")
        out.append(_chart(cid, charts.citation_chart(
            cid, f"{method}: citation outcomes per agent", agents, by_agent),
            f"{method}: statement-source pairs summed over tasks."))
        out.append(_table(["agent", *OUTCOMES, "supported / (supported + unsupported)",
                           "supported / all pairs"], [
            (a, *(f"{by_agent[a].get(o, 0):g}" for o in OUTCOMES),
             _fmt(_ratio(by_agent[a].get("supported", 0.0),
                         by_agent[a].get("supported", 0.0) + by_agent[a].get("unsupported", 0.0))),
             _fmt(_ratio(by_agent[a].get("supported", 0.0), sum(by_agent[a].values()))))
            for a in agents]))
        out.append("<p>The first ratio leaves out pages that could not be read; the "
                   "second counts them as not supported (the published protocol).</p>")
    out.append("</section>")
    return "".join(out)


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def _section_cost(run: RunDir, ids: _Ids) -> str:
    out = ['<section id="cost"><h2>Cost and latency</h2>']
    if not run.scores:
        out.append(_nodata("the run has no score rows"))
        out.append("</section>")
        return "".join(out)
    out.append("<p>Judge cost and latency summed over the score rows (a cache hit costs "
               "nothing). Latency is the sum of the rows' judge latencies, not wall time.</p>")
    headers = ["reports", "calls", "cache hits", "input tokens", "output tokens",
               "cost (USD)", "latency (s)"]
    for key, label in (("method", "method"), ("task_id", "task")):
        groups = cost_by(run.scores, key)
        cid = ids("cost", label)
        out.append(f"<h3>Per {label}</h3>")
        out.append(_chart(cid, charts.cost_latency_chart(
            cid, f"cost and latency per {label}", [g for g, _ in groups],
            [v["cost_usd"] for _, v in groups], [v["latency_s"] for _, v in groups]),
            f"Judge cost (USD) and summed latency (s) per {label}."))
        table = _table([label, *headers], [
            (g, int(v["reports"]), int(v["calls"]), int(v["cache_hits"]),
             int(v["input_tokens"]), int(v["output_tokens"]), f"{v['cost_usd']:.4f}",
             f"{v['latency_s']:.2f}") for g, v in groups])
        if len(groups) > 12:  # long per-task tables fold away under the chart
            table = f"<details><summary>table ({len(groups)} rows)</summary>{table}</details>"
        out.append(table)
    out.append("</section>")
    return "".join(out)


def _section_problems(run: RunDir) -> str:
    failed = [r for r in run.scores if r.status != "ok"]
    if not failed and not run.problems and not run.duplicates:
        return '<section id="problems"><h2>Problems</h2><p>None: every row is ok.</p></section>'
    out = ['<section id="problems"><h2>Problems</h2>']
    if run.problems:
        out.append(f"<p>{len(run.problems)} unreadable line(s) in scores.jsonl were skipped:</p>")
        out.append("<pre>" + _e("\n".join(str(p) for p in run.problems[:_MAX_PROBLEMS])) + "</pre>")
    if run.duplicates:
        out.append(f"<p>{run.duplicates} repeated (task, agent, method) row(s): the last "
                   "one was used.</p>")
    if failed:
        out.append(f"<p>{len(failed)} row(s) not fully scored:</p>")
        out.append(_table(["method", "task", "agent", "status", "coverage", "errors"], [
            (r.method, r.task_id, r.agent, r.status, _fmt(r.coverage, 2),
             "; ".join(r.errors)[:300]) for r in failed[:_MAX_PROBLEMS]], left=4))
    out.append("</section>")
    return "".join(out)


def _section_config(run: RunDir) -> str:
    out = ['<section id="config"><h2>Run configuration</h2>']
    if run.summary:
        out.append("<details><summary>summary.json</summary><pre>"
                   + _e(json.dumps(redact(run.summary), indent=2, sort_keys=True, default=str))
                   + "</pre></details>")
    if run.config:
        out.append("<details><summary>config.json</summary><pre>"
                   + _e(json.dumps(redact(run.config), indent=2, sort_keys=True, default=str))
                   + "</pre></details>")
    if not run.summary and not run.config:
        out.append(_nodata("the run directory has no config.json or summary.json"))
    out.append("</section>")
    return "".join(out)
