"""The self-contained HTML run report (``drscore report``'s ``report.html``).

The page is built from the data in :mod:`drscore.engine.reporting.tables` (leaderboard,
groupings); this module is only markup. It has no scripts, no external stylesheet, font
or image: charts are inline SVG from :mod:`drscore.engine.reporting.charts`, so it opens
offline and can be mailed as one file. The per-report viewer, which needs a script, is a
second page beside it (:mod:`drscore.engine.reporting.viewer`), linked from the
leaderboard.

The report shows what the run contains. Sections are driven by the data, not by
method names: a leaderboard and per-task heatmap for every method; per-dimension bars
for rows with dimension subscores; a redundancy matrix for rows whose ``details``
carry ``pairs``; citation outcomes for rows whose ``details`` carry ``supported`` /
``unsupported`` / ``unreachable`` / ``refused`` counts; cost and latency from every
row. A section without data says so.
"""
from __future__ import annotations

import html
import json
import re
import urllib.parse
from typing import Any, Iterable, Sequence

from drscore.engine.reporting import decisions as report_decisions
from drscore.engine.reporting.colours import agent_colours
from drscore.engine.runtime.extras import MissingExtra

try:
    from drscore.engine.reporting import charts
    CHARTS_MISSING: str | None = None
except MissingExtra as exc:  # the base install: the report is written, without its charts
    CHARTS_MISSING = str(exc)

    class _NoCharts:
        """Stands in for :mod:`charts` without matplotlib: every chart is a short note."""

        def __getattr__(self, name: str) -> Any:
            return lambda *args, **kwargs: ('<p class="nodata">Chart not drawn: matplotlib is not installed '
                                            "(pip install 'drscore[report]').</p>")

    charts = _NoCharts()  # type: ignore[assignment]
from drscore.engine.reporting.tables import (  # noqa: F401  (re-exported: the report's data API)
    OUTCOMES, LeaderboardRow, _fmt, _judges, _offline, _pairs, _units, citation_counts, comparison_note,
    cost_by, dimension_groups, dimension_names, leaderboard, leaderboard_csv, leaderboard_markdown, pick_redundancy_row,
    redact, task_sets_differ,
)
from drscore.engine.stats.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES
from drscore.engine.stats.paired import MethodDecisions
from drscore.engine.runtime.models import ScoreRow
from drscore.engine.runtime.calls.pricing import cost_text
from drscore.engine.runtime.rundir_read import RunDir, natural_key

_MAX_PROBLEMS = 50
# Per-task charts and tables stop here: a grid of 10,000 tasks is a 50 MB page nobody can
# read. Past it the heatmap shows the first tasks in task order and the cost section the
# most expensive ones; `drscore view` pages through every row.
MAX_TASKS_DRAWN = 100


# --------------------------------------------------------------------------- HTML

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;
max-width:1100px;padding:0 1rem;color:#222;line-height:1.45}
h1{font-size:1.6rem}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2.2rem}
h3{font-size:1.05rem;margin-top:1.4rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}
td.sig{background:#e3f2e1}
.note{background:#fff8e1;border-left:4px solid #edae49;padding:.5rem .8rem}
.nodata{color:#777;font-style:italic}
figure.chart{margin:.8rem 0;overflow-x:auto}figure.chart svg{max-width:100%;height:auto}
figure.chart svg *{stroke-linejoin:round;stroke-linecap:butt}
figcaption{font-size:.8rem;color:#555}
pre{background:#f6f6f6;padding:.6rem;overflow-x:auto;font-size:.8rem}
#time-money td.l{white-space:nowrap}
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
    viewer: str | None = None,
    decisions: dict[str, MethodDecisions] | None = None,
) -> str:
    """The whole report page as one string (inline CSS and SVG, no scripts). With
    ``viewer`` (the viewer page's file name), the leaderboard links into it."""
    ids = _Ids()
    title = title or f"drscore report: {run.path}"
    # one colour per agent in every chart (and in drscore view's pages)
    colours = agent_colours(e.agent for entries in board.values() for e in entries)
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
        _section_leaderboard(board, ids, confidence, viewer, colours),
        report_decisions.section_decisions(run, board, confidence=confidence, resamples=resamples, seed=seed,
                                           decisions=decisions),
        _section_dimensions(board, ids, colours),
        _section_heatmaps(run, ids),
        _section_redundancy(redundancy_row, ids),
        _section_citations(run, ids),
        _section_cost(run, ids),
        report_decisions.section_time_money(board),
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
        *report_decisions.overview_facts(run),
    ])]
    if _offline(run):
        out.insert(0, '<p class="note">Scored by the <b>offline judge</b>: a deterministic '
                      "lexical/heuristic baseline, not an LLM judgement. Use it to test "
                      "pipelines, not to rank agents.</p>")
    return "<section id=\"overview\"><h2>Overview</h2>" + "".join(out) + "</section>"


def _ci(low: float | None, high: float | None) -> str:
    return f"[{_fmt(low)}, {_fmt(high)}]" if low is not None else "–"


def viewer_link(href: str, method: str, agent: str | None = None) -> str:
    """URL of the viewer filtered to one method (and agent)."""
    query = {"method": method, **({"agent": agent} if agent is not None else {})}
    return f"{href}#{urllib.parse.urlencode(query, quote_via=urllib.parse.quote)}"


def _section_leaderboard(board: dict[str, list[LeaderboardRow]], ids: _Ids,
                         confidence: float, viewer: str | None = None,
                         colours: dict[str, str] | None = None) -> str:
    out = ['<section id="leaderboard"><h2>Leaderboard</h2>']
    if not board:
        out.append(_nodata("the run has no score rows"))
    pct = f"{confidence * 100:g}%"
    for method, entries in board.items():
        out.append(f"<h3>{_e(method)}</h3>")
        differ = task_sets_differ(entries)
        out.append(_table(
            ["agent", "rank", "score", f"{pct} CI",
             *(("shared mean", f"shared {pct} CI") if differ else ()),
             "tasks", "coverage", "failed", "partial"],
            [(e.agent, e.rank or (f"not ranked: {e.unranked_reason}" if e.unranked_reason else "–"), _fmt(e.score), _ci(e.ci_low, e.ci_high),
              *((_fmt(e.shared_score), _ci(e.shared_ci_low, e.shared_ci_high)) if differ else ()),
              f"{e.tasks_scored}/{e.tasks_total}", _fmt(e.coverage, 2), e.failed, e.partial)
             for e in entries]))
        note = comparison_note(entries)
        if note:
            out.append(f'<p class="note">{_e(note)}</p>')
        if viewer:
            links = " · ".join(f'<a href="{_e(viewer_link(viewer, method, e.agent))}">{_e(e.agent)}</a>'
                               for e in entries)
            out.append(f'<p class="open">Every report, its judge calls and verdicts: '
                       f'<a href="{_e(viewer_link(viewer, method))}">all {_e(method)} rows</a> · {links}</p>')
        scored = [e for e in entries if e.score is not None]
        if scored:
            cid = ids("leaderboard", method)
            out.append(_chart(cid, charts.leaderboard_chart(
                cid, f"{method}: mean score with {pct} CI",
                [e.agent for e in scored], [e.score for e in scored],
                [e.ci_low for e in scored], [e.ci_high for e in scored], colours),
                f"{method}: agents by mean score over tasks; whiskers show the bootstrap CI."))
        else:
            out.append(_nodata(f"no {method} row has a score (all failed)"))
    out.append("</section>")
    return "".join(out)


def _section_dimensions(board: dict[str, list[LeaderboardRow]], ids: _Ids,
                        colours: dict[str, str] | None = None) -> str:
    out = ['<section id="dimensions"><h2>Per-dimension scores</h2>']
    drawn = False
    for method, entries in board.items():
        rates, counts = dimension_groups(entries)
        dims = rates + counts
        if not dims:
            continue
        drawn = True
        cid = ids("dimensions", method)
        values = {e.agent: {d: e.subscores.get(d) for d in dims} for e in entries}
        out.append(f"<h3>{_e(method)}</h3>")
        apart = " Rates on the left axis, per-report counts on the right one." if counts else ""
        out.append(_chart(cid, charts.dimension_chart(
            cid, f"{method}: mean subscore per dimension", [e.agent for e in entries], rates,
            values, colours, counts), f"{method}: mean of each dimension subscore over tasks.{apart}"))
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
        every_task = sorted({r.task_id for r in rows}, key=natural_key)
        tasks = every_task[:MAX_TASKS_DRAWN]
        drawn = set(tasks)
        agents = sorted({r.agent for r in rows})
        cell = {(r.task_id, r.agent): r.score for r in rows if r.task_id in drawn}
        matrix = [[cell.get((t, a)) for t in tasks] for a in agents]
        cid = ids("heatmap", method)
        out.append(f"<h3>{_e(method)}</h3>")
        more = ""
        if len(every_task) > len(tasks):
            more = (f" The first {len(tasks)} of {len(every_task)} tasks in task order; "
                    "`drscore view` pages through every row.")
        out.append(_chart(cid, charts.heatmap_chart(
            cid, f"{method}: score per task", tasks, agents, matrix),
            f"{method}: one cell per task and agent; grey = no score (failed or not run).{more}"))
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
    worst = sorted(((i, j, s, kind) for i, j, s, kind in pairs if s is not None), key=lambda p: p[2])[:10]
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
    out.append("<p>Judge cost and time summed over the score rows (a row answered from the cache "
               "carries what this run paid for the answer, in whichever invocation paid it; an answer from "
               "a cache the run did not pay for costs nothing; 'uncached' is what the rows would have cost "
               "alone). Time is split into time "
               "with a call at the judge and time only waiting for quota; neither is wall time.</p>")
    headers = ["reports", "calls", "cache hits", "input tokens", "output tokens",
               "cost (USD)", "uncached (USD)", "at the judge (s)", "waiting (s)"]
    for key, label in (("method", "method"), ("task_id", "task")):
        groups = cost_by(run.scores, key)
        cid = ids("cost", label)
        out.append(f"<h3>Per {label}</h3>")
        if len(groups) > MAX_TASKS_DRAWN:  # the most expensive ones, then slowest
            total = len(groups)
            groups = sorted(groups, key=lambda g: (-(g[1]["cost_usd"] or 0.0), -(g[1]["latency_s"] or 0.0)))
            groups = groups[:MAX_TASKS_DRAWN]
            out.append(f"<p>The {len(groups)} most expensive of {total} {label}s "
                       "(then the slowest); `drscore view` lists every row.</p>")
        out.append(_chart(cid, charts.cost_latency_chart(
            cid, f"cost and latency per {label}", [g for g, _ in groups],
            [v["cost_usd"] or 0.0 for _, v in groups], [v["judge_s"] or 0.0 for _, v in groups]),
            f"Judge cost (USD) and summed time at the judge (s) per {label}."))
        table = _table([label, *headers], [
            (g, int(v["reports"] or 0), int(v["calls"] or 0), int(v["cache_hits"] or 0),
             int(v["input_tokens"] or 0), int(v["output_tokens"] or 0), cost_text(v["cost_usd"]),
             cost_text(v["cost_usd_uncached"]), f"{v['judge_s'] or 0.0:.2f}",
             f"{v['quota_wait_s'] or 0.0:.2f}") for g, v in groups])
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
