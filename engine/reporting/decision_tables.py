"""The decisions as text tables, for the files people paste into a PR or a paper.

``leaderboard.md`` gets, under each method's table, the paired differences as a Markdown
table (every pair: A minus B on the tasks both scored, its interval, the Holm-adjusted
p-value, the number of shared tasks, whether it holds after the adjustment), each
agent's probability of ranking first and, with judge samples, the judge-noise share.
``leaderboard.csv`` carries the same figures as rows of their own (``kind`` = ``pair``)
beside the agents' rows (``kind`` = ``agent``, which gain ``p_first``); the columns are
listed in docs/reports.md.

The figures are :func:`drscore.engine.stats.paired.decide`'s, the same the report page,
the terminal and ``summary.json`` show.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from drscore.engine.runtime.escape import markdown_cell
from drscore.engine.stats.paired import MethodDecisions

# The columns pair rows fill in leaderboard.csv (the agent rows leave them empty).
PAIR_FIELDS = ("vs", "delta", "delta_ci_low", "delta_ci_high", "p_value", "p_holm", "significant", "pair_tasks",
               "judge_noise_share")


def _signed(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:+.{digits}f}"


def _p(value: float | None) -> str:
    if value is None:
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3g}"


def noise_text(d: MethodDecisions) -> str | None:
    """``Judge noise (K samples per report): 12–30% ...`` or None without samples."""
    shares = [p.judge_noise_share for p in d.pairs if p.judge_noise_share is not None]
    if d.samples <= 1 or not shares:
        return None
    lo, hi = min(shares), max(shares)
    span = f"{lo:.0%}" if abs(hi - lo) < 0.005 else f"{lo:.0%}–{hi:.0%}"
    return (f"Judge noise ({d.samples} samples per report): {span} of the variance of the per-task differences "
            "comes from the judge.")


def decisions_markdown(d: MethodDecisions) -> list[str]:
    """Markdown lines for one method's decisions (pairs, P(rank first), judge noise)."""
    pct = f"{d.confidence * 100:g}%"
    lines = ["", f"Paired differences (A − B, mean over the tasks both scored; {pct} bootstrap interval over tasks, "
                 f"{d.resamples} resamples; p two-sided, Holm-adjusted over the method's pairs; "
                 "**yes**: the difference holds after the adjustment):", "",
             f"| A | B | A − B | {pct} CI | p (Holm) | shared tasks | holds |",
             "|---|---|---:|---|---:|---:|---|"]
    for p in d.pairs:
        ci = f"[{_signed(p.ci[0])}, {_signed(p.ci[1])}]" if p.ci else "–"
        lines.append(f"| {markdown_cell(p.a)} | {markdown_cell(p.b)} | {_signed(p.delta)} | {ci} | {_p(p.p_holm)} | "
                     f"{p.n} | {'**yes**' if p.significant else 'no'} |")
    if d.p_first:
        lines += ["", f"P(ranks first), over the {d.first_tasks} tasks every compared agent scored:", "",
                  "| agent | P(ranks first) |", "|---|---:|"]
        lines += [f"| {markdown_cell(a)} | {v:.3f} |" for a, v in sorted(d.p_first.items(), key=lambda kv: -kv[1])]
    noise = noise_text(d)
    if noise:
        lines += ["", noise]
    for agent, why in d.unranked.items():
        lines += ["", f"> not compared: {markdown_cell(agent)} ({markdown_cell(why)})"]
    return lines


def pair_records(d: MethodDecisions) -> Iterator[dict[str, Any]]:
    """One record per pair of the method, keyed by leaderboard.csv's column names."""
    for p in d.pairs:
        yield {"kind": "pair", "method": d.method, "agent": p.a, "vs": p.b, "delta": p.delta,
               "delta_ci_low": p.ci[0] if p.ci else None, "delta_ci_high": p.ci[1] if p.ci else None,
               "p_value": p.p_value, "p_holm": p.p_holm, "significant": int(p.significant) if p.delta is not None
               else None, "pair_tasks": p.n, "judge_noise_share": p.judge_noise_share}
