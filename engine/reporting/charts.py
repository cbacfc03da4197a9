"""Charts for the HTML report: matplotlib figures rendered to inline SVG strings.

Each function takes plain numbers and returns one ``<svg>`` element (no XML prolog),
ready to paste into an HTML page: text is kept as ``<text>`` (small, no font files),
heatmaps embed their raster as a data URI, element ids are prefixed with the chart id
so several charts can share one page, and the output is deterministic (no date in the
metadata, clip-path ids salted with the chart id). Only the object-oriented matplotlib
API is used: no pyplot global state and no GUI backend (``Figure.savefig`` picks
the SVG canvas by itself).
"""
from __future__ import annotations

import functools
import io
import math
import re
import textwrap
from typing import Callable, Mapping, ParamSpec, Sequence

from drscore.engine.runtime.escape import terminal
from drscore.engine.runtime.extras import require

require("report", "the charts of drscore report")

import matplotlib  # noqa: E402  (after the check, so a missing extra is named)
import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

_ID = re.compile(r'\bid="([^"]+)"')
_URL_REF = re.compile(r"url\(#([^)]+)\)")
_HREF_REF = re.compile(r'((?:xlink:)?href)="#([^"]+)"')
_STYLE = re.compile(r"<style[^>]*>.*?</style>", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_MAX_LABEL = 28
# Colours for citation outcomes: stable meaning across reports.
OUTCOME_COLOURS = {
    "supported": "#2a9d55",
    "unsupported": "#d1495b",
    "unreachable": "#8d99ae",
    "refused": "#edae49",
    "failed": "#3d3d3d",  # the judge failed on the pair
}


P = ParamSpec("P")


def _literal(chart: Callable[P, str]) -> Callable[P, str]:
    """Build and draw ``chart`` with labels as plain text: agent names and task ids are
    data, and a ``$`` in them must neither raise (bad TeX) nor typeset (good TeX)."""
    @functools.wraps(chart)
    def drawn(*args: P.args, **kwargs: P.kwargs) -> str:
        # ``text.parse_math`` off keeps ``$...$`` from being read as mathtext (which raises
        # on bad TeX and draws good TeX wrongly); usetex off keeps LaTeX out.
        with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
            return chart(*args, **kwargs)
    return drawn


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    return fig


def to_svg(fig: Figure, chart_id: str) -> str:
    """Render ``fig`` as an inline ``<svg>`` whose ids are prefixed with ``chart_id``."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": chart_id,
                                "svg.image_inline": True}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    # The global "*{...}" style matplotlib adds would leak into the page; the page's
    # own CSS sets the same stroke defaults for chart SVGs.
    svg = _STYLE.sub("", svg)
    svg = _METADATA.sub("", svg)  # RDF boilerplate only
    ids = set(_ID.findall(svg))
    prefix = re.sub(r"[^A-Za-z0-9_-]", "_", chart_id)
    svg = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    svg = _URL_REF.sub(
        lambda m: f"url(#{prefix}-{m.group(1)})" if m.group(1) in ids else m.group(0), svg)
    svg = _HREF_REF.sub(
        lambda m: f'{m.group(1)}="#{prefix}-{m.group(2)}"' if m.group(2) in ids else m.group(0),
        svg)
    return svg.strip()


def _short(label: str, limit: int = _MAX_LABEL) -> str:
    label = terminal(label)  # a control character has no glyph: show its escape
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _wrapped(label: str, width: int = 14) -> str:
    """A tick label on lines of ``width`` (``instruction_following`` whole, not cut)."""
    text = terminal(label)
    return "\n".join(textwrap.wrap(text.replace("_", " "), width, break_long_words=False)[:3]) or text


def _colour(colours: Mapping[str, str] | None, agent: str, k: int) -> str:
    """The agent's colour (engine.reporting.colours), else the k-th of the palette."""
    if colours and agent in colours:
        return colours[agent]
    from drscore.engine.reporting.colours import PALETTE
    return PALETTE[k % len(PALETTE)]


@_literal
def leaderboard_chart(
    chart_id: str,
    title: str,
    agents: Sequence[str],
    means: Sequence[float | None],
    lows: Sequence[float | None],
    highs: Sequence[float | None],
    colours: Mapping[str, str] | None = None,
) -> str:
    """Horizontal bars of each agent's mean score with its confidence interval, each bar
    in its agent's colour."""
    n = len(agents)
    fig = _figure(7.0, 1.2 + 0.38 * n)
    ax = fig.add_subplot()
    y = np.arange(n)
    vals = np.array([math.nan if v is None else v for v in means], dtype=float)
    lo = np.array([math.nan if v is None else v for v in lows], dtype=float)
    hi = np.array([math.nan if v is None else v for v in highs], dtype=float)
    ax.barh(y, np.nan_to_num(vals), color=[_colour(colours, a, k) for k, a in enumerate(agents)])
    has_ci = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(vals)
    if has_ci.any():
        err = np.vstack([vals - lo, hi - vals])[:, has_ci]
        ax.errorbar(vals[has_ci], y[has_ci], xerr=np.clip(err, 0, None), fmt="none",
                    ecolor="black", capsize=3, linewidth=1)
    ax.set_yticks(y, [_short(a) for a in agents])
    ax.invert_yaxis()  # rank 1 on top
    ax.set_xlabel("mean score over tasks (bars: bootstrap CI)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    return to_svg(fig, chart_id)


@_literal
def dimension_chart(
    chart_id: str,
    title: str,
    agents: Sequence[str],
    dimensions: Sequence[str],
    values: Mapping[str, Mapping[str, float | None]],
    colours: Mapping[str, str] | None = None,
    counts: Sequence[str] = (),
) -> str:
    """Grouped bars: one group per dimension, one bar per agent (``values[agent][dim]``),
    each agent in its colour. ``counts``: subscores that are per-report counts (FACT's
    citations beside its rates), drawn on an axis of their own to the right. The legend
    sits below the axes, never over a bar; dimension names wrap instead of being cut."""
    na = len(agents)
    groups = [(list(dimensions), "mean subscore")] + ([(list(counts), "mean per report (count)")] if counts else [])
    nd = sum(len(g) for g, _ in groups)
    fig = _figure(max(6.0, 1.2 + 0.5 * nd * max(na, 1) * 0.45 + 0.8 * (len(groups) - 1)), 3.9)
    axes = fig.subplots(1, len(groups), squeeze=False, width_ratios=[max(1, len(g)) for g, _ in groups])[0]
    width = 0.8 / max(na, 1)
    for ax, (dims, label) in zip(axes, groups):
        x = np.arange(len(dims))
        for k, agent in enumerate(agents):
            heights = [0.0 if (v := values.get(agent, {}).get(d)) is None else v for d in dims]
            ax.bar(x - 0.4 + width * (k + 0.5), heights, width, label=_short(agent),
                   color=_colour(colours, agent, k))
        ax.set_xticks(x, [_wrapped(d) for d in dims], fontsize=8)
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="outside lower center", ncols=min(max(na, 1), 4))
    return to_svg(fig, chart_id)


@_literal
def heatmap_chart(
    chart_id: str,
    title: str,
    tasks: Sequence[str],
    agents: Sequence[str],
    matrix: Sequence[Sequence[float | None]],
) -> str:
    """Agents (rows) x tasks (columns) score heatmap; missing scores are grey."""
    data = np.array([[math.nan if v is None else v for v in row] for row in matrix],
                    dtype=float).reshape(len(agents), len(tasks))
    fig = _figure(min(14.0, max(5.0, 1.8 + 0.16 * len(tasks))), 1.4 + 0.35 * len(agents))
    ax = fig.add_subplot()
    cmap = colormaps["viridis"].with_extremes(bad="#cccccc")
    finite = data[np.isfinite(data)]
    vmin = float(finite.min()) if finite.size else 0.0
    vmax = float(finite.max()) if finite.size else 1.0
    if vmax <= vmin:  # constant scores: centre them in a unit range
        vmin, vmax = vmin - 0.5, vmax + 0.5
    image = ax.imshow(np.ma.masked_invalid(data), aspect="auto", cmap=cmap,
                      vmin=vmin, vmax=vmax, interpolation="nearest")
    step = max(1, math.ceil(len(tasks) / 40))  # keep tick labels legible
    ax.set_xticks(np.arange(0, len(tasks), step), [_short(t, 10) for t in tasks[::step]],
                  rotation=90, fontsize=7)
    ax.set_yticks(np.arange(len(agents)), [_short(a) for a in agents], fontsize=8)
    ax.set_xlabel("task")
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, shrink=0.9, label="score")
    return to_svg(fig, chart_id)


@_literal
def redundancy_chart(
    chart_id: str,
    title: str,
    units: int,
    pairs: Sequence[tuple[int, int, float | None, str]],
    scale_max: float = 4.0,
) -> str:
    """Paragraph x paragraph matrix of pair scores (symmetric; 4 = no repetition);
    judge-scored pairs carry a dot, pre-filtered ("screened") pairs do not, pairs the
    judge failed on (score None) carry a cross."""
    k = max(units, 1)
    data = np.full((k, k), math.nan)
    judged_i, judged_j, failed_i, failed_j = [], [], [], []
    for i, j, score, kind in pairs:
        if not (0 <= i < k and 0 <= j < k):
            continue
        if score is None:  # the judge failed on this pair: mark it, leave the cell empty
            failed_i += [i, j]
            failed_j += [j, i]
            continue
        data[i, j] = data[j, i] = score
        if kind == "judged":
            judged_i += [i, j]
            judged_j += [j, i]
    size = min(8.0, max(3.5, 2.5 + 0.12 * k))
    fig = _figure(size + 1.2, size)
    ax = fig.add_subplot()
    cmap = colormaps["magma"].with_extremes(bad="#eeeeee")
    image = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=0.0, vmax=scale_max,
                      interpolation="nearest")
    if judged_i:
        ax.scatter(judged_j, judged_i, s=max(2.0, 60.0 / k), c="#2a9df4", marker="o",
                   label="pair scored by the judge")
    if failed_i:
        ax.scatter(failed_j, failed_i, s=max(4.0, 90.0 / k), c="#d1495b", marker="x",
                   label="judge failed")
    if judged_i or failed_i:
        fig.legend(fontsize=7, loc="outside lower center", ncols=2)
    ax.set_xlabel("paragraph")
    ax.set_ylabel("paragraph")
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, shrink=0.85, label=f"pair score (0 = repeated, {scale_max:g} = none)")
    return to_svg(fig, chart_id)


@_literal
def citation_chart(
    chart_id: str,
    title: str,
    agents: Sequence[str],
    counts: Mapping[str, Mapping[str, float]],
) -> str:
    """Stacked horizontal bars of citation outcomes per agent (``counts[agent][outcome]``)."""
    n = len(agents)
    fig = _figure(7.0, 1.4 + 0.4 * n)
    ax = fig.add_subplot()
    y = np.arange(n)
    left = np.zeros(n)
    for outcome, colour in OUTCOME_COLOURS.items():
        widths = np.array([float(counts.get(a, {}).get(outcome, 0.0)) for a in agents])
        ax.barh(y, widths, left=left, color=colour, label=outcome)
        left += widths
    ax.set_yticks(y, [_short(a) for a in agents])
    ax.invert_yaxis()
    ax.set_xlabel("statement-source pairs")
    ax.set_title(title, fontsize=10)
    fig.legend(fontsize=8, ncols=4, loc="outside lower center")
    return to_svg(fig, chart_id)


@_literal
def cost_latency_chart(
    chart_id: str,
    title: str,
    labels: Sequence[str],
    cost_usd: Sequence[float],
    latency_s: Sequence[float],
) -> str:
    """Two bar panels over the same labels: judge cost (USD) and latency (s)."""
    n = len(labels)
    fig = _figure(min(14.0, max(6.0, 1.5 + 0.18 * n)), 5.0)
    top, bottom = fig.subplots(2, 1, sharex=True)
    x = np.arange(n)
    top.bar(x, cost_usd, color="#e45756")
    top.set_ylabel("cost (USD)")
    top.set_title(title, fontsize=10)
    top.grid(axis="y", alpha=0.3)
    bottom.bar(x, latency_s, color="#72b7b2")
    bottom.set_ylabel("at the judge (s)")
    bottom.grid(axis="y", alpha=0.3)
    step = max(1, math.ceil(n / 40))
    rotation = 90 if n > 6 else 0  # few labels (methods) read better horizontally
    bottom.set_xticks(x[::step], [_short(s, 14) for s in labels[::step]], rotation=rotation,
                      fontsize=7 if rotation else 9)
    return to_svg(fig, chart_id)
