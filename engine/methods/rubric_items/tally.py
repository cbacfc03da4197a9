"""The rubric arithmetic (pure).

score = (points of the items judged met, penalties included) / (positive points
available), clipped to [0, 1]. A met penalty item (negative points) takes its points off;
an unmet one costs nothing. Only judged items count: an item whose call failed is in
neither the numerator nor the denominator (the row is then ``partial``).

A tag's subscore is the same formula over the items carrying the tag; a tag whose items
offer no positive points has no subscore (nothing to be a share of).

Example: items +5 met, +3 not met, +2 met, -4 met -> (5 + 2 - 4) / (5 + 3 + 2) = 0.3."""
from __future__ import annotations

from collections.abc import Iterable, Sequence


def rubric_score(judged: Iterable[tuple[float, bool]]) -> float | None:
    """``(points, met)`` pairs -> the clipped share; None without positive points."""
    earned = available = 0.0
    for points, met in judged:
        if points > 0:
            available += points
        if met:
            earned += points
    if available <= 0:
        return None
    return min(1.0, max(0.0, earned / available))


def tag_scores(judged: Sequence[tuple[float, bool, Sequence[str]]]) -> dict[str, float | None]:
    """The score of each tag's items, by tag (tags without positive points left out)."""
    tags = sorted({t for _, _, item_tags in judged for t in item_tags})
    out: dict[str, float | None] = {}
    for tag in tags:
        score = rubric_score((p, met) for p, met, item_tags in judged if tag in item_tags)
        if score is not None:
            out[tag] = score
    return out
