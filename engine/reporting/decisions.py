"""The report's answers to "who wins, by how much, how sure" and its honest overview.

- :func:`overview_facts`: total cost (paid and what it would have cost uncached), wall
  time, date, drscore version, judge model and the endpoint's host only (a URL's path and
  query can hold keys; see :func:`drscore.engine.runtime.calls.redact.endpoint_host`);
- :func:`section_decisions`: a banner naming agents shown but not ranked, then per method
  the matrix of paired differences (row agent minus column agent, on the tasks both
  scored, with its interval and Holm-adjusted p), each agent's probability of ranking
  first, and with judge samples how much of the uncertainty is judge noise;
- :func:`section_time_money`: per method and agent, time at the judge and time waiting
  for quota apart, cost paid and uncached, cached input and reasoning tokens.

Kept apart from :mod:`drscore.engine.reporting.html`, which calls these three.
"""
from __future__ import annotations

import html
from typing import Any, Sequence

from drscore.engine.reporting.tables import LeaderboardRow
from drscore.engine.runtime.calls.ledger import may_have_billed, money_line
from drscore.engine.runtime.calls.pricing import cost_text, sum_costs
from drscore.engine.runtime.calls.redact import endpoint_host
from drscore.engine.runtime.rundir_read import RunDir
from drscore.engine.stats.noise import judge_noise
from drscore.engine.stats.paired import MethodDecisions, decide


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _dollars(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def overview_facts(run: RunDir) -> list[tuple[str, Any]]:
    """Key/value rows for the report's overview (what the run cost, when, with what)."""
    s, cfg = run.summary or {}, run.config or {}
    t, ov = s.get("totals") or {}, s.get("overview") or {}
    judge = cfg.get("judge") or {}
    paid = t.get("cost_usd") if "cost_usd" in t else sum_costs(r.cost_usd for r in run.scores)
    uncached = t.get("cost_usd_uncached") if "cost_usd_uncached" in t else \
        sum_costs(r.cost_usd_uncached for r in run.scores)
    ledger = run.ledger or t.get("ledger")
    money = []
    if ledger:  # the run's own record of what it paid, in every invocation (even one that never finished)
        paid, uncached = ledger["run"]["cost_usd"], ledger["run"]["cost_usd_uncached"]
        money.append(("paid per invocation", money_line(ledger, "last invocation")))
        lost = may_have_billed(ledger)
        if lost:
            money.append(("lost in flight", lost))
    reused = t.get("reused") or {}
    if reused.get("answers"):
        money.append(("reused answers", f"{reused['answers']} from a cache this run did not pay for (about "
                                        f"{_dollars(reused.get('cost_usd_list'))} at list price), not spend"))
    wall = t.get("wall_time_s")
    return [
        ("total cost", f"{_dollars(paid)} paid · {_dollars(uncached)} without prompt cache or shared answers"),
        *money,
        ("wall time", f"{wall:.1f} s" if isinstance(wall, (int, float)) else "unknown (no summary.json)"),
        ("date", ov.get("date") or "unknown"),
        ("drscore version", ov.get("drscore_version") or cfg.get("drscore_version") or "unknown"),
        ("judge model", ov.get("judge_model") or judge.get("model") or s.get("judge") or "unknown"),
        ("endpoint", ov.get("endpoint_host") or endpoint_host(judge.get("url")) or "offline"),
        ("judge samples", ov.get("samples") or cfg.get("samples") or 1),
    ]


def _cell(pair: Any) -> str:
    if pair.delta is None:
        return '<td class="l">no shared task</td>'
    ci = f" [{pair.ci[0]:.2f}, {pair.ci[1]:.2f}]" if pair.ci else ""
    p = "" if pair.p_holm is None else f"<br><small>p {pair.p_holm:.3g} (Holm), n {pair.n}</small>"
    cls = ' class="sig"' if pair.significant else ""
    return f"<td{cls}>{pair.delta:+.3f}{_e(ci)}{p}</td>"


def _matrix(d: MethodDecisions) -> str:
    by_pair = {(p.a, p.b): p for p in d.pairs}
    head = "".join(f"<th>{_e(b)}</th>" for b in d.agents[1:])
    body = []
    for i, a in enumerate(d.agents[:-1]):
        cells = []
        for j, b in enumerate(d.agents[1:], start=1):
            pair = by_pair.get((a, b))
            cells.append(_cell(pair) if j > i and pair is not None else "<td></td>")
        body.append(f'<tr><th class="l">{_e(a)}</th>{"".join(cells)}</tr>')
    return f'<table class="pairs"><thead><tr><th class="l">row − column</th>{head}</tr></thead>' \
           f'<tbody>{"".join(body)}</tbody></table>'


def _noise_text(d: MethodDecisions) -> str:
    shares = [p.judge_noise_share for p in d.pairs if p.judge_noise_share is not None]
    if d.samples <= 1:
        return ("<p>One judge sample per report: the intervals include the judge's noise only as part of "
                "the spread between tasks; run with <code>--samples K</code> to measure it.</p>")
    if not shares:
        return ""
    lo, hi = min(shares), max(shares)
    span = f"{lo:.0%}" if abs(hi - lo) < 0.005 else f"{lo:.0%}–{hi:.0%}"
    return (f"<p>Judge noise ({d.samples} samples per report): {span} of the variance of the per-task "
            "differences comes from the judge, the rest from the agents' differences between tasks.</p>")


def _noise_table(run: RunDir, method: str) -> str:
    """Per agent: the judge's spread per report and of the suite mean (judge samples only)."""
    by_agent: dict[str, dict[str, list[float]]] = {}
    for r in run.scores:
        if r.method == method and r.sample_scores:
            by_agent.setdefault(r.agent, {})[r.task_id] = [v for v in r.sample_scores if v is not None]
    rows = []
    for agent, samples in sorted(by_agent.items()):
        n = judge_noise(samples)
        if n is None:
            continue
        rows.append(f'<tr><td class="l">{_e(agent)}</td><td>{n.samples}</td><td>{n.per_task_sd:.4f}</td>'
                    f"<td>{_e(_num(n.between_task_sd))}</td><td>{_e(_num(n.suite_mean_sd, 5))}</td>"
                    f"<td>{_e('-' if n.judge_share is None else f'{n.judge_share:.0%}')}</td></tr>")
    if not rows:
        return ""
    return ("<table><thead><tr><th class=\"l\">agent</th><th>samples</th><th>judge sd per report</th>"
            "<th>sd between reports</th><th>sd of the suite mean across samples</th>"
            "<th>judge share of the mean's variance</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def section_decisions(run: RunDir, board: dict[str, list[LeaderboardRow]], *, confidence: float,
                      resamples: int, seed: int,
                      decisions: dict[str, MethodDecisions] | None = None) -> str:
    """The "Decisions" section (and the not-ranked banner above it)."""
    decisions = decisions if decisions is not None else decide(
        run.scores, resamples=resamples, seed=seed, confidence=confidence)
    unranked = [(m, e.agent, e.unranked_reason) for m, entries in board.items() for e in entries
                if e.unranked_reason]
    out = []
    if unranked:
        items = "".join(f"<li>{_e(m)}: <b>{_e(a)}</b> — {_e(why)}</li>" for m, a, why in unranked)
        out.append(f'<p class="note unranked" id="not-ranked"><b>Shown but not ranked</b> (their scores '
                   f"rest on incomplete judgements):</p><ul>{items}</ul>")
    out.append('<section id="decisions"><h2>Decisions: paired differences</h2>')
    if not decisions:
        out.append("<p>No method has two comparable agents.</p></section>")
        return "".join(out)
    pct = f"{confidence * 100:g}%"
    out.append(f"<p>Each cell: row agent minus column agent, mean over the tasks both scored, with the {pct} "
               f"bootstrap interval ({resamples} resamples over tasks, and over judge samples when there are "
               f"several; expanded percentile for small task counts; seed {seed}) and the two-sided p-value "
               "adjusted for all pairs of the method (Holm). Shaded: the difference holds after the "
               "adjustment. See docs/decisions.md.</p>")
    for method, d in decisions.items():
        out.append(f"<h3>{_e(method)}</h3>")
        out.append(_matrix(d))
        if d.p_first:
            first = " · ".join(f"{_e(a)} {v:.2f}" for a, v in sorted(d.p_first.items(), key=lambda kv: -kv[1]))
            out.append(f"<p>Probability of ranking first (over the {d.first_tasks} tasks every agent "
                       f"scored): {first}</p>")
        out.append(_noise_text(d))
        out.append(_noise_table(run, method))
    out.append("</section>")
    return "".join(out)


def section_time_money(board: dict[str, list[LeaderboardRow]]) -> str:
    """Per method and agent: time at the judge and waiting apart, cost paid and uncached."""
    rows: list[Sequence[Any]] = []
    for method, entries in board.items():
        for e in entries:
            rows.append((method, e.agent, f"{e.judge_s:.1f}", f"{e.quota_wait_s:.1f}", cost_text(e.cost_usd),
                         cost_text(e.cost_usd_uncached), e.calls, e.cache_hits, e.input_tokens,
                         e.cached_input_tokens, e.output_tokens, e.reasoning_tokens))
    head = ["method", "agent", "at the judge (s)", "waiting for quota (s)", "cost paid (USD)", "uncached (USD)",
            "calls", "cache hits", "input tokens", "cached input", "output tokens", "reasoning tokens"]
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f'<td class="{"l" if i < 2 else "n"}">{_e(v)}</td>' for i, v in enumerate(r))
                   + "</tr>" for r in rows)
    return ('<section id="time-money"><h2>Time and money per agent</h2><p>Time with a call at the judge and '
            "time only waiting for quota, summed over the rows (not wall time); the cost paid, and what the "
            "rows would have cost alone (an agent whose calls were answered from the cache or shared shows "
            f"its fair cost here).</p><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></section>")
