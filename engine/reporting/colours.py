"""One colour per agent, the same in every chart of a run: report.html's charts and the
pages of ``drscore view`` both take it from :func:`agent_colours`.

Colours follow the agents' names in sorted order, not a chart's own order (a ranking, the
tasks an agent has), so an agent keeps its colour from chart to chart. The first colours
are Okabe and Ito's palette, told apart with the common colour-vision deficiencies;
past twelve agents the palette repeats.
"""
from __future__ import annotations

from collections.abc import Iterable

PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9",
           "#8C564B", "#7F7F7F", "#BCBD22", "#17BECF", "#1F3A93", "#9467BD")


def agent_colours(agents: Iterable[str]) -> dict[str, str]:
    """Agent name -> ``#rrggbb``, by the names' sorted order."""
    return {a: PALETTE[i % len(PALETTE)] for i, a in enumerate(sorted(set(agents)))}
