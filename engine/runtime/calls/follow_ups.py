"""How many calls follow an answer, for a dry run: the judge's own habit, from the cache.

Some answers decide how many calls come next: ACE's checklist has 3 to 6 items and each
item is one more call per report. A dry run has no judge to write that answer; the offline
judge stands in, and its lists are as long as its own rule makes them, not as long as the
judge would. So a method names such an answer (:class:`AnswerList`: which template, which
list field, what the published protocol says when nothing better is known) and a dry run
plans with the mean length of that list over the answers the same judge model gave in
earlier runs (the cache holds them: :meth:`JudgeCache.answers`), and states the error bar
of the calls that follow (:meth:`ListLength.error`).

A mean of 3.48 items cannot be one checklist's length: each planned answer gets a whole
number, chosen so that the running total stays the mean times the answers planned so far
(error diffusion), whatever order the answers are planned in.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import msgspec
import orjson

# At most this many recorded answers are read per template: enough for a mean, bounded for a big cache.
MAX_RECORDED = 2000


class AnswerList(msgspec.Struct, frozen=True, kw_only=True):
    """An answer's list whose length decides how many calls follow."""

    field: str  # the list in the answer's top-level object (ACE: "items")
    published: float  # the length to plan with when no answer of this judge model is on record
    published_low: int  # the range the protocol allows, for the error bar of that fallback
    published_high: int
    source: str  # where the published figure comes from, for the dry run's statement
    # The method keeps at most this many (ACE: 6) and rejects fewer than ``fewest`` (no calls follow)
    most: int | None = None
    fewest: int = 0

    def calls(self, length: int) -> int:
        """The calls that follow an answer whose list has ``length`` entries."""
        if length < self.fewest:
            return 0
        return min(length, self.most) if self.most is not None else length


class ListLength:
    """The length a dry run plans an answer's list with: learned, or the published figure."""

    def __init__(self, spec: AnswerList, recorded: Iterable[int] = (), model: str = "") -> None:
        self.spec = spec
        counts = [spec.calls(n) for n in recorded]
        self.answers = len(counts)
        if counts:
            self.mean = sum(counts) / len(counts)
            self.sd = math.sqrt(sum((c - self.mean) ** 2 for c in counts) / max(1, len(counts) - 1))
            self.basis = f"learned from {len(counts):,} answers of {model}" if model else \
                f"learned from {len(counts):,} recorded answers"
        else:
            self.mean, self.sd = float(spec.published), 0.0
            self.basis = spec.source
        self._planned = 0  # answers planned so far
        self._given = 0  # entries given them so far

    def next(self) -> int:
        """The length of the next planned answer (error diffusion: the total given stays
        round(mean x answers planned)); never below ``fewest`` nor above ``most``, since the
        planned answer must still be one the method accepts."""
        self._planned += 1
        n = math.floor(self.mean * self._planned + 0.5) - self._given
        n = max(n, self.spec.fewest)
        if self.spec.most is not None:
            n = min(n, self.spec.most)
        self._given += n
        return n

    def error(self, answers: int) -> tuple[float, float]:
        """The relative error bar (low, high) of the calls that follow ``answers`` planned
        answers. Learned: two standard errors of their total, from the answers' spread and the
        uncertainty of the mean itself (sd^2/answers + sd^2/recorded). Published: the range
        the protocol allows, as if every answer were at its low or its high end."""
        if self.mean <= 0:
            return 0.0, 0.0
        if self.answers:
            planned = max(1, answers)
            half = 2.0 * self.sd * math.sqrt(1.0 / planned + 1.0 / self.answers) / self.mean
            return -half, half
        low, high = self.spec.calls(self.spec.published_low), self.spec.calls(self.spec.published_high)
        return low / self.mean - 1.0, high / self.mean - 1.0

    def summary(self) -> dict[str, Any]:
        low, high = self.error(self._planned)
        return {"field": self.spec.field, "per_answer": round(self.mean, 3), "answers_planned": self._planned,
                "entries_planned": self._given, "error_low": round(low, 4), "error_high": round(high, 4),
                "basis": self.basis}


def list_lengths(answers: Iterable[bytes], field: str) -> list[int]:
    """The length of ``field`` in each recorded answer that is a JSON object holding a list
    there (others: not answers of this shape, skipped)."""
    out = []
    for raw in answers:
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict) and isinstance(value.get(field), list):
            out.append(len(value[field]))
    return out


def resized(text: str, field: str, n: int) -> str:
    """The answer ``text`` with its list ``field`` cut or extended to ``n`` entries. Added
    entries copy the existing ones in turn, the first text in each made distinct ("... (2)"),
    so a method that drops repeated entries keeps them."""
    value = orjson.loads(text)
    items = value.get(field) if isinstance(value, dict) else None
    if not isinstance(items, list) or not items or n < 0:
        return text
    out = items[:n]
    k = 0
    while len(out) < n:
        out.append(_distinct(items[k % len(items)], f" ({len(out) + 1})"))
        k += 1
    value[field] = out
    return orjson.dumps(value).decode()


def _distinct(entry: Any, suffix: str) -> Any:
    if isinstance(entry, str):
        return entry + suffix
    if isinstance(entry, dict):
        out = dict(entry)
        for key, v in out.items():
            if isinstance(v, str):
                out[key] = v + suffix
                break
        return out
    return entry
