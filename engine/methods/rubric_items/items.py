"""A task's rubric items: ``rubric`` (or HealthBench's ``rubrics``) in the task's JSONL line,
a list of ``{"criterion": str, "points": number, "tags": [str] | {key: value}}``.

Negative points mark something a report must not do: when the judge finds it met, the
points are taken off. Tags (``"axis:accuracy"``, or ``{"axis": "accuracy"}`` written as
``axis:accuracy``) name the subscores an item counts towards. A malformed item is an
:class:`ItemsError` naming the task and the item's position."""
from __future__ import annotations

import math
from typing import Any

import msgspec

from drscore.engine.runtime.models import Task

FIELDS = ("rubric", "rubrics")  # the task field that holds the items (HealthBench says "rubrics")


class RubricItem(msgspec.Struct, frozen=True):
    criterion: str
    points: float
    tags: tuple[str, ...] = ()


class ItemsError(ValueError):
    """A task's rubric that cannot be scored; the message names the task and item."""


def _tags(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, dict):
        raw = [f"{k}:{v}" for k, v in raw.items()]
    if not isinstance(raw, list) or not all(isinstance(t, str) and t.strip() for t in raw):
        raise ItemsError(f"{where}: 'tags' must be a list of strings (\"axis:accuracy\") or a table, got {raw!r}")
    return tuple(t.strip() for t in raw)


def task_items(task: Task) -> list[RubricItem] | None:
    """The task's rubric items; None when the task has no rubric field."""
    present = [f for f in FIELDS if f in task.fields]
    if not present:
        return None
    if len(present) > 1:
        raise ItemsError(f"task {task.task_id}: both 'rubric' and 'rubrics' are given; keep one")
    raw = task.fields[present[0]]
    if not isinstance(raw, list) or not raw:
        raise ItemsError(f"task {task.task_id}: '{present[0]}' must be a non-empty list of "
                         "{\"criterion\", \"points\"} objects")
    out = []
    for i, item in enumerate(raw, start=1):
        where = f"task {task.task_id}: {present[0]} item {i}"
        if not isinstance(item, dict):
            raise ItemsError(f"{where}: must be an object {{\"criterion\", \"points\"}}, got {item!r}"[:300])
        unknown = sorted(set(item) - {"criterion", "points", "tags"})
        if unknown:
            raise ItemsError(f"{where}: unknown field(s) {', '.join(unknown)} (known: criterion, points, tags)")
        criterion, points = item.get("criterion"), item.get("points")
        if not isinstance(criterion, str) or not criterion.strip():
            raise ItemsError(f"{where}: 'criterion' must be a non-empty string")
        if isinstance(points, bool) or not isinstance(points, (int, float)) or not math.isfinite(points) \
                or points == 0:
            raise ItemsError(f"{where}: 'points' must be a non-zero number (negative: a penalty), got {points!r}")
        out.append(RubricItem(criterion.strip(), float(points), _tags(item.get("tags"), where)))
    return out
