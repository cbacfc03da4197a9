"""From a method file's verdict to the row's score, subscores and details (pure).

Every kind of score is first a fraction in [0, 1], then laid on the scale:

* ``field``: where the field's value lies in its range (``(v - min) / (max - min)``; a
  bool is 0 or 1);
* ``weights``: the weighted mean of those fractions, one per field;
* ``share``: the credit of the labels given (1 for a label in ``of``, or the credit ``of``
  gives it; 0 for any other) divided by the number of labels, over every listed field
  (a ``labels`` field counts each of its labels).

score = scale.low + fraction * (scale.high - scale.low). With the default scale (the
fields' own range when they share one) a ``field`` score is the judge's number itself."""
from __future__ import annotations

from typing import Any

from drscore.engine.methods.method_file.spec import FieldSpec, MethodSpec


def fraction_of(f: FieldSpec, value: Any) -> float:
    """Where ``value`` lies in the range of numeric field ``f``, 0-1."""
    number = float(value)
    return (number - f.low) / (f.high - f.low)


def score_fraction(spec: MethodSpec, verdict: dict[str, Any]) -> float | None:
    """The score as a fraction in [0, 1]; None when a share has no label to count."""
    rule = spec.score
    if rule.kind == "share":
        credit = dict(rule.values)
        given: list[str] = []
        for name, _ in rule.weights:
            value = verdict[name]
            given.extend(value if isinstance(value, list) else [value])
        if not given:
            return None
        return sum(credit.get(label, 0.0) for label in given) / len(given)
    total = sum(w for _, w in rule.weights)
    return sum(w * fraction_of(spec.field(name), verdict[name]) for name, w in rule.weights) / total


def row_score(spec: MethodSpec, verdict: dict[str, Any]) -> float | None:
    """The row's score on the method's scale (None: nothing to score)."""
    fraction = score_fraction(spec, verdict)
    if fraction is None:
        return None
    low, high = spec.score.scale
    return low + fraction * (high - low)


def subscores(spec: MethodSpec, verdict: dict[str, Any]) -> dict[str, float | None]:
    """The subscore fields' values as the judge gave them (a bool as 0 or 1)."""
    return {name: float(verdict[name]) for name in spec.score.subscores}


def details(spec: MethodSpec, verdict: dict[str, Any]) -> dict[str, Any]:
    """Every verdict field that is not a subscore (justifications, labels), for the viewer."""
    shown = set(spec.score.subscores)
    return {f.name: verdict[f.name] for f in spec.fields if f.name not in shown}
