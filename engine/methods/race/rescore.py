"""RACE aggregation of stored judge outputs (pure; no I/O, no judge).

The judge's answer has DeepResearch Bench's JSON shape: per dimension a list of
``{criterion, article_1_score, article_2_score}`` (reference-based; article 1 is the
target unless the reverse-position variant put the reference first) or
``{criterion, target_score}`` (point-wise). Other keys (``analysis`` ...) are ignored.

This module reproduces the benchmark's own aggregation (``utils/score_calculator.py``
and ``calculate_normalized_scores`` in its ``deepresearch_bench_race.py``):

* a judged criterion text (stripped) is matched to its weight in the task's criteria of
  that dimension: exact text, then case-insensitive equality, then substring either way
  (first criterion in file order), else the dimension's mean weight;
* ``S_d = sum(w * s) / sum(w)`` over the judged items of the dimension (so criteria the
  judge skipped drop out of the denominator, and a duplicated item counts twice);
* ``S_int = sum_d W_d * S_d`` with the file's dimension weights as written;
* relative scores ``t / (t + r)`` for the overall and per dimension, 0 when ``t + r == 0``.

Dimensions absent from the judgement, or not lists, or unknown to the criteria are
skipped (their relative score is 0, as in the benchmark). An item whose scores are not
numbers is skipped. Two deliberate deviations, both only for malformed judgements:
the benchmark sets a whole dimension's reference average to 0 when the *last* item of
the dimension lacks ``article_2_score`` (an artefact of a loop variable); here an item
lacking it contributes its target score and weight only (which is what the benchmark
does for every other item), and every such case is listed in ``warnings``.

Point-wise judgements have no reference, so the benchmark's ratio is meaningless (it
comes out as 1); for them the re-scorer reports absolute scores on a 0-1 scale:
``S_d / 10`` per dimension and ``S_int / (10 * sum_d W_d)`` overall.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from drscore.engine.methods.race.criteria import DIMENSIONS, TaskCriteria

# How a judged criterion text found its weight (reported per item, counted per task).
MATCH_KINDS = ("exact", "casefold", "substring", "mean")


class RaceAggregate(msgspec.Struct, kw_only=True):
    """Aggregated RACE scores of one judgement (0-10 absolute, 0-1 relative)."""

    pointwise: bool
    target_dims: dict[str, float]  # S_d(target), only dimensions that were aggregated
    reference_dims: dict[str, float]  # S_d(reference); empty when point-wise
    target_total: float  # S_int(target)
    reference_total: float  # S_int(reference); 0 when point-wise
    relative_dims: dict[str, float]  # per DIMENSIONS: t/(t+r) (point-wise: S_d/10)
    overall: float  # t/(t+r) (point-wise: S_int / (10 * sum W_d))
    judged: int  # items that entered the aggregation (the benchmark's sums)
    matched: int  # distinct criteria of the task that some item's text matched
    expected: int  # criteria in the task's criteria
    matches: dict[str, int]  # MATCH_KINDS -> count
    warnings: list[str] = []
    # Every scored item as [dimension, criterion as the judge wrote it, weight used,
    # target score, reference score or None]: what the viewer lists for a RACE row.
    items: list[list[Any]] = []


def _lower(text: str) -> str:
    return text.lower()


def match_weight(text: str, weights: Mapping[str, float]) -> tuple[float, str, str | None]:
    """Find the weight of a judged criterion text the way the benchmark does.

    ``weights`` maps criterion text (as in the criteria file, in file order) to weight.
    Returns ``(weight, kind, matched criterion text or None)`` with ``kind`` in
    :data:`MATCH_KINDS`.
    """
    text = text.strip()
    if text in weights:
        return weights[text], "exact", text
    low = _lower(text)
    for key, w in weights.items():
        if _lower(key) == low:
            return w, "casefold", key
    for key, w in weights.items():
        k = _lower(key)
        if low in k or k in low:
            return w, "substring", key
    return (sum(weights.values()) / len(weights) if weights else 0.0), "mean", None


def _number(value: Any) -> float | None:
    """The benchmark applies ``float()`` to each score; booleans and non-numbers are rejected
    here too (``float(True)`` would silently be 1)."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        f = float(value)
    elif isinstance(value, str):
        try:
            f = float(value.strip())
        except ValueError:
            raise TypeError(value) from None
    else:
        raise TypeError(value)
    if not math.isfinite(f):
        raise TypeError(value)
    return f


def _ratio(t: float, r: float) -> float:
    return t / (t + r) if t + r > 0 else 0.0


def is_pointwise(judgement: Mapping[str, Any]) -> bool:
    """True when no item carries ``article_2_score`` and some item carries ``target_score``."""
    has_target = False
    for items in judgement.values():
        if not isinstance(items, list):
            continue
        for item in items:
            if isinstance(item, dict):
                if item.get("article_2_score") is not None:
                    return False
                if item.get("target_score") is not None:
                    has_target = True
    return has_target


def aggregate(judgement: Mapping[str, Any], criteria: TaskCriteria, *, reverse: bool = False) -> RaceAggregate:
    """Aggregate one judge output against the task's ``criteria``.

    ``reverse=True`` means the judge saw the reference as article 1 and the target as
    article 2 (the reverse-position variant); scores are swapped back before the ratio.
    """
    if not isinstance(judgement, Mapping):
        raise TypeError("judgement must be a JSON object keyed by dimension")
    pointwise = is_pointwise(judgement)
    warnings: list[str] = []
    matches = dict.fromkeys(MATCH_KINDS, 0)
    target_dims: dict[str, float] = {}
    reference_dims: dict[str, float] = {}
    t_total = r_total = 0.0
    judged = 0
    matched: set[tuple[str, str]] = set()
    scored: list[list[Any]] = []
    for dim, items in judgement.items():
        if not isinstance(items, list):
            if dim in criteria.criterions:
                warnings.append(f"{dim}: not a list, dimension skipped")
            continue
        if dim not in criteria.dimension_weight or dim not in criteria.criterions:
            warnings.append(f"{dim}: unknown dimension, skipped")
            continue
        # The benchmark builds a dict: a repeated criterion text keeps its last weight.
        weights = {c.criterion: c.weight for c in criteria.criterions[dim]}
        if not weights:
            warnings.append(f"{dim}: no criteria, dimension skipped")
            continue
        t_sum = r_sum = w_sum = 0.0
        for k, item in enumerate(items):
            if not isinstance(item, dict):
                warnings.append(f"{dim}[{k}]: not an object, skipped")
                continue
            raw_text = item.get("criterion")
            text = raw_text.strip() if isinstance(raw_text, str) else ""
            try:
                if pointwise:
                    first = _number(item.get("target_score", item.get("article_1_score")))
                    second = None
                else:
                    first = _number(item.get("article_1_score", item.get("target_score")))
                    second = _number(item.get("article_2_score"))
            except TypeError as e:
                warnings.append(f"{dim}[{k}]: score {e.args[0]!r} is not a number, skipped")
                continue
            if not text or first is None:
                warnings.append(f"{dim}[{k}]: missing criterion text or score, skipped")
                continue
            if reverse and not pointwise:
                if second is None:
                    warnings.append(f"{dim}[{k}]: missing article_1_score (reverse order), skipped")
                    continue
                first, second = second, first
            weight, kind, key = match_weight(text, weights)
            matches[kind] += 1
            if key is not None:
                matched.add((dim, key))
            if kind == "mean":
                warnings.append(f"{dim}[{k}]: criterion {text[:60]!r} unmatched, mean weight used")
            t_sum += first * weight
            w_sum += weight
            judged += 1
            scored.append([dim, text, round(weight, 6), first, second])
            if second is not None:
                r_sum += second * weight
            elif not pointwise:
                warnings.append(f"{dim}[{k}]: missing article_2_score, reference not scored on it")
        t_avg = t_sum / w_sum if w_sum > 0 else 0.0
        r_avg = r_sum / w_sum if w_sum > 0 else 0.0
        target_dims[dim] = t_avg
        dim_weight = criteria.dimension_weight.get(dim, 0.0)
        t_total += t_avg * dim_weight
        if not pointwise:
            reference_dims[dim] = r_avg
            r_total += r_avg * dim_weight
    if pointwise:
        weight_sum = sum(criteria.dimension_weight.get(d, 0.0) for d in target_dims)
        relative = {d: target_dims.get(d, 0.0) / 10.0 for d in DIMENSIONS}
        overall = t_total / (10.0 * weight_sum) if weight_sum > 0 else 0.0
    else:
        relative = {
            d: _ratio(target_dims[d], reference_dims[d]) if d in target_dims else 0.0 for d in DIMENSIONS
        }
        overall = _ratio(t_total, r_total)
    for d in DIMENSIONS:
        if d not in target_dims:
            warnings.append(f"{d}: not in judgement, scored 0")
    return RaceAggregate(
        pointwise=pointwise,
        target_dims=target_dims,
        reference_dims=reference_dims,
        target_total=t_total,
        reference_total=r_total,
        relative_dims=relative,
        overall=overall,
        judged=judged,
        matched=len(matched),
        expected=criteria.n_criteria,
        matches=matches,
        warnings=warnings,
        items=scored,
    )


def benchmark_row(task_id: Any, prompt: str | None, agg: RaceAggregate) -> dict[str, Any]:
    """One line in the shape of the benchmark's ``raw_results.jsonl`` (0-1 scale)."""
    row: dict[str, Any] = {"id": task_id}
    if prompt is not None:
        row["prompt"] = prompt
    row.update({d: agg.relative_dims[d] for d in DIMENSIONS})
    row["overall_score"] = agg.overall
    return row


def suite_means(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Mean per dimension and overall over tasks (the benchmark's ``race_result.txt``)."""
    if not rows:
        return {}
    keys = (*DIMENSIONS, "overall_score")
    return {k: sum(float(r[k]) for r in rows) / len(rows) for k in keys}


class JudgementLine(msgspec.Struct, frozen=True):
    """One line of a ``--judgements`` file."""

    task_id: Any  # as written (int ids stay ints in the output)
    judgement: dict[str, Any]


def parse_judgement_line(raw: bytes | str, origin: str) -> JudgementLine:
    """Decode ``{"id": <task id>, "judgement": {...}}``; errors name ``origin``.

    ``judgement`` may also be a JSON string holding the object (how some runs stored it).
    """
    try:
        obj = msgspec.json.decode(raw)
    except msgspec.DecodeError as e:
        raise ValueError(f"{origin}: malformed JSON ({e})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{origin}: expected a JSON object")
    task_id = obj.get("id", obj.get("task_id"))
    if task_id is None or isinstance(task_id, (bool, float, list, dict)) or str(task_id).strip() == "":
        raise ValueError(f"{origin}: missing field 'id'")
    judgement = obj.get("judgement")
    if isinstance(judgement, str):
        try:
            judgement = msgspec.json.decode(judgement)
        except msgspec.DecodeError as e:
            raise ValueError(f"{origin}: field 'judgement' is a string but not JSON ({e})") from None
    if not isinstance(judgement, dict):
        raise ValueError(f"{origin}: field 'judgement' must be a JSON object keyed by dimension")
    if not any(isinstance(judgement.get(d), list) for d in DIMENSIONS):
        raise ValueError(
            f"{origin}: field 'judgement' has none of the dimensions {', '.join(DIMENSIONS)}"
        )
    return JudgementLine(task_id=task_id, judgement=judgement)
