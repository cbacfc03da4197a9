"""Rigorous Bench reference bundles and rubric items.

A rubric item is a yes/no-style question that ends with its allowed values, e.g.
``"Does the report define QUIC? Yes=2, No=0"`` or
``"... Yes=3, Partial=1 (if only one side is covered), No=0."``. This module parses
those tails into :class:`Choice` values, loads bundles (query-specific rubrics, trusted
source links, focus-anchor and focus-deviation keywords) in the published JSONL format,
loads the benchmark's general-report rubric list, and holds the project's own default
general-report rubric list (:data:`DEFAULT_GENERAL_RUBRICS`).

Everything here is pure except the two ``load_*`` functions, which only read a file.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
import orjson

from drscore.engine.runtime.io import read_jsonl
from drscore.engine.runtime.models import InputError

# The benchmark's documented maximum for the query-specific rubrics of one bundle.
STANDARD_QSR_MAX = 30

_OPENERS = {"(": ")", "（": "）", "[": "]"}
_MASK = "\x00"
# One "label [ (condition) ] = points [ (condition) ]" entry, matched at the end of the
# masked text. A label is one word, or two when the first is a usual value word
# ("Full detail=6"). Parenthesised conditions were replaced by runs of _MASK beforehand, so
# commas or "=" inside a condition never confuse the split.
_ENTRY = re.compile(
    r"(?P<label>\b(?:(?:Yes|No|Full|Fully|Partial|Partially|Partly)\s+[a-z]+|[A-Za-z]+))\s*(?P<pre>\x00+)?\s*=\s*"
    r"(?P<low>\d+(?:\.\d+)?)(?:\s*[–-]\s*(?P<high>\d+(?:\.\d+)?))?\s*"
    r"(?P<post>\x00+)?\s*$"
)
_TRAILER = " \t\r\n.。"


class RubricError(ValueError):
    """A rubric item or bundle that cannot be used, with where it came from."""


class Choice(msgspec.Struct, frozen=True):
    """One allowed value of a rubric item.

    ``label`` is what the judge answers with and is unique within the item ("Yes",
    "Partial", ...; a points range such as ``Partial=1–3`` becomes ``Partial-1``,
    ``Partial-2``, ``Partial-3``). ``condition`` is the item's own wording of when this
    value applies (the text in parentheses), or "".
    """

    label: str
    points: float
    condition: str = ""


class RubricItem(msgspec.Struct, frozen=True):
    """A rubric question with its allowed values, ordered from most to fewest points."""

    text: str
    question: str
    choices: tuple[Choice, ...]

    @property
    def max_points(self) -> float:
        return self.choices[0].points

    @property
    def min_points(self) -> float:
        return self.choices[-1].points

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(c.label for c in self.choices)

    def points_for(self, label: str) -> float:
        """Points of the choice named ``label`` (KeyError if it is not allowed)."""
        for c in self.choices:
            if c.label == label:
                return c.points
        raise KeyError(f"{label!r} is not one of {list(self.labels)}")


class Bundle(msgspec.Struct, frozen=True):
    """One task's reference bundle (published Rigorous Bench format, parsed)."""

    uid: str
    query: str
    qsr: tuple[RubricItem, ...]
    tsl: tuple[str, ...]
    fak: tuple[str, ...]
    fdk: tuple[str, ...]

    @property
    def domain(self) -> str:
        """The benchmark's domain code: the first two characters of ``uid``."""
        return self.uid[:2]

    @property
    def qsr_max(self) -> float:
        """The real maximum of the query-specific rubrics (documented as 30; a few
        published bundles sum to something else, and the real sum is what we divide by)."""
        return sum(item.max_points for item in self.qsr)


class BundleSet(msgspec.Struct):
    """Bundles loaded from a file, keyed by uid, plus the lines that were rejected.

    ``errors_by_uid`` lets a report whose bundle was malformed fail with the reason
    (file and line) instead of a bare "no bundle"."""

    bundles: dict[str, Bundle]
    errors: list[InputError]
    errors_by_uid: dict[str, str]

    def nonstandard(self) -> dict[str, float]:
        """uid -> real QSR maximum for bundles whose maximum is not the documented 30."""
        return {uid: b.qsr_max for uid, b in self.bundles.items() if b.qsr_max != STANDARD_QSR_MAX}


def _mask_parentheses(text: str) -> str:
    """Replace each top-level parenthesised span (ASCII or full-width) by _MASK chars of
    the same length, so offsets in the masked text are offsets in ``text``."""
    out = list(text)
    stack: list[str] = []
    start = 0
    for i, ch in enumerate(text):
        if ch in _OPENERS:
            if not stack:
                start = i
            stack.append(_OPENERS[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                out[start : i + 1] = _MASK * (i + 1 - start)
    return "".join(out)


def _number(raw: str) -> float:
    value = float(raw)
    return int(value) if value.is_integer() else value


def _condition(text: str, span: tuple[int, int] | None) -> str:
    """The text inside a masked parenthesised span, without its brackets (the rubric
    author's wording, shown to the judge as is)."""
    if span is None:
        return ""
    start, end = span
    return text[start + 1 : end - 1].strip()


def parse_rubric_item(text: str) -> RubricItem:
    """Parse a rubric item whose text ends with its allowed values.

    Raises :class:`RubricError` if no ``label=points`` tail is found, if a label repeats,
    or if fewer than two distinct values remain.
    """
    if not isinstance(text, str) or not text.strip():
        raise RubricError("rubric item is empty")
    body = text.rstrip(_TRAILER)
    masked = _mask_parentheses(body)
    raw_entries: list[tuple[str, float, float, str]] = []
    cut = len(masked)
    while True:
        m = _ENTRY.search(masked, 0, cut)
        if m is None:
            break
        pre = m.span("pre") if m.group("pre") else None
        post = m.span("post") if m.group("post") else None
        cond = _condition(body, pre) or _condition(body, post)
        low = _number(m.group("low"))
        high = _number(m.group("high")) if m.group("high") else low
        raw_entries.append((m.group("label"), low, high, cond))
        cut = m.start()
        # Entries are separated by commas; anything else means the tail has ended.
        rest = masked[:cut].rstrip()
        if rest.endswith((",", "，", ";", "；")):
            cut = len(rest) - 1
            continue
        cut = len(rest)
        break
    if not raw_entries:
        raise RubricError(f"no allowed values (like 'Yes=2, No=0') at the end of: {text[-80:]!r}")
    question = body[:cut].strip()
    choices: list[Choice] = []
    for label, low, high, cond in reversed(raw_entries):
        if high < low:
            raise RubricError(f"points range {low}–{high} of {label!r} runs backwards in: {text[-80:]!r}")
        if high == low:
            choices.append(Choice(label=label, points=low, condition=cond))
        else:
            # "Partial (1–3 areas)=1–3": every whole number in the range is allowed.
            for p in range(int(low), int(high) + 1):
                choices.append(Choice(label=f"{label}-{p}", points=p, condition=cond))
    labels = [c.label for c in choices]
    dupes = sorted({lab for lab in labels if labels.count(lab) > 1})
    if dupes:
        raise RubricError(f"label {dupes[0]!r} appears twice in: {text[-80:]!r}")
    if len(choices) < 2:
        raise RubricError(f"only one allowed value ({labels[0]}) in: {text[-80:]!r}")
    if not question:
        raise RubricError(f"rubric item has allowed values but no question: {text!r}")
    # Stable sort: equal points keep the author's order.
    ordered = tuple(sorted(choices, key=lambda c: -c.points))
    return RubricItem(text=text, question=question, choices=ordered)


def _str_list(obj: dict[str, Any], field: str) -> tuple[str, ...]:
    value = obj.get(field)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RubricError(f"field {field!r} must be a list of strings")
    return tuple(v.strip() for v in value if v.strip())


def parse_bundle(obj: Any) -> Bundle:
    """Build a :class:`Bundle` from one decoded published-format record
    ``{uid, query, qsr[], tsl[], fak[], fdk[]}``; errors name the field (``qsr[3]``)."""
    if not isinstance(obj, dict):
        raise RubricError("expected a JSON object")
    uid = obj.get("uid")
    if isinstance(uid, int) and not isinstance(uid, bool):
        uid = str(uid)
    if not isinstance(uid, str) or not uid.strip():
        raise RubricError("missing field 'uid'")
    query = obj.get("query")
    if not isinstance(query, str) or not query.strip():
        raise RubricError("missing or empty field 'query'")
    raw_qsr = _str_list(obj, "qsr")
    if not raw_qsr:
        raise RubricError("field 'qsr' is empty")
    items = []
    for i, text in enumerate(raw_qsr):
        try:
            items.append(parse_rubric_item(text))
        except RubricError as e:
            raise RubricError(f"qsr[{i}]: {e}") from None
    fak, fdk = _str_list(obj, "fak"), _str_list(obj, "fdk")
    if not fak:
        raise RubricError("field 'fak' is empty")
    tsl = obj.get("tsl", [])
    if not isinstance(tsl, list) or not all(isinstance(v, str) for v in tsl):
        raise RubricError("field 'tsl' must be a list of strings")
    return Bundle(
        uid=uid.strip(), query=query.strip(), qsr=tuple(items),
        tsl=tuple(u.strip() for u in tsl if u.strip()), fak=fak, fdk=fdk,
    )


def load_bundles(path: str | Path) -> BundleSet:
    """Read a bundles JSONL file. Bad lines become :class:`InputError` (``file:line``)
    and the valid bundles are still returned; a missing file raises FileNotFoundError."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"bundles file not found: {path}")
    bundles: dict[str, Bundle] = {}
    errors: list[InputError] = []
    by_uid: dict[str, str] = {}
    for origin, obj in read_jsonl(path, errors):
        try:
            bundle = parse_bundle(obj)
        except RubricError as e:
            err = InputError(origin, str(e))
            errors.append(err)
            uid = obj.get("uid") if isinstance(obj, dict) else None
            if isinstance(uid, (str, int)) and str(uid).strip():
                by_uid[str(uid).strip()] = str(err)
            continue
        if bundle.uid in bundles:
            errors.append(InputError(origin, f"duplicate bundle uid {bundle.uid!r}"))
            continue
        bundles[bundle.uid] = bundle
    return BundleSet(bundles=bundles, errors=errors, errors_by_uid=by_uid)


def load_general_rubrics(path: str | Path) -> tuple[RubricItem, ...]:
    """Read a general-report rubric list: a JSON array of ``{rule, max_points}`` objects
    (the benchmark's ``general_rubrics.json``) or of plain rule strings. A stated
    ``max_points`` must equal the maximum parsed from the rule's allowed values."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"general rubrics file not found: {path}")
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise RubricError(f"{path}: malformed JSON ({e})") from None
    if not isinstance(data, list) or not data:
        raise RubricError(f"{path}: expected a non-empty JSON array of rubric items")
    items = []
    for i, entry in enumerate(data):
        where = f"{path}: item [{i}]"
        if isinstance(entry, str):
            rule, stated = entry, None
        elif isinstance(entry, dict) and isinstance(entry.get("rule"), str):
            rule, stated = entry["rule"], entry.get("max_points")
        else:
            raise RubricError(f"{where}: expected a string or an object with a 'rule' string")
        try:
            item = parse_rubric_item(rule)
        except RubricError as e:
            raise RubricError(f"{where}: {e}") from None
        if stated is not None and (not isinstance(stated, (int, float)) or stated != item.max_points):
            raise RubricError(
                f"{where}: max_points is {stated!r} but the rule's allowed values give {item.max_points}")
        items.append(item)
    return tuple(items)


def parse_rubric_list(rules: Iterable[str]) -> tuple[RubricItem, ...]:
    """Parse several rubric items (used for the built-in default list)."""
    return tuple(parse_rubric_item(r) for r in rules)


# The project's own general-report rubrics, written for drscore (not the benchmark's
# list). They cover the same ground in fewer items: structure and framing, argument,
# language, evidence and sourcing, analysis, data handling, balance and limits, and
# presentation. 30 items, 50 points in total. Scores made with this list are not
# comparable to published Rigorous Bench numbers; pass the benchmark's own file with
# ``--general-rubrics`` for that.
DEFAULT_GENERAL_RUBRICS: tuple[str, ...] = (
    # Structure and framing (8 points)
    "Does the opening of the report say what question it answers and what it will cover? Yes=2, No=0",
    "Is the report organised into an introduction, a body and a closing section that each do their job? Yes=2, No=0",
    "Does the report give the reader the context needed to follow it (definitions, setting, scope)? Yes=2, No=0",
    "Does the closing section pull the main findings together instead of only repeating the introduction? Yes=2, No=0",
    # Argument and reasoning (9 points)
    "Do the sections follow a logical order, with each one building on what came before? Yes=2, Partial=1, No=0",
    "Does the report explain why things happen (causes, mechanisms, trade-offs) rather than only listing facts? Yes=2, No=0",
    "Does the report compare alternatives, positions or cases where the question calls for it? Yes=2, No=0",
    "Does the report reach its own reasoned judgement rather than only restating what sources say? Yes=2, No=0",
    "Does the report stay on the question asked, without long detours into side topics? Yes=1, No=0",
    # Language and readability (6 points)
    "Is the writing precise, with concrete statements instead of vague generalities? Yes=2, No=0",
    "Is the report free of noticeable grammar, spelling and wording errors? Yes=1, No=0",
    "Does the report avoid repeating the same points or padding sections with filler? Yes=1, No=0",
    "Is the tone neutral and professional throughout (no chatty or promotional language)? Yes=1, No=0",
    "Are technical terms and abbreviations used consistently and explained when first used? Yes=1, No=0",
    # Evidence and sourcing (10 points)
    "Are the report's main claims backed by specific evidence (facts, figures, examples)? Yes=2, Partial=1, No=0",
    "Does the report attribute its information to identifiable sources? Yes=2, No=0",
    "Are citations placed next to the statements they support, not only in a list at the end? Yes=1, No=0",
    "Do the cited sources look authoritative for the topic (official bodies, peer-reviewed work, primary documents)? Yes=2, No=0",
    "Are references complete enough to be followed (title or publisher, and a link or identifier)? Yes=1, No=0",
    "Does the report avoid references or quotations that look invented or cannot be matched to a source? Yes=2, No=0",
    # Depth of analysis (7 points)
    "Does the report cover every part of the question that was asked? Yes=2, Partial=1, No=0",
    "Does the report go beyond surface description into detailed, specific analysis? Yes=2, No=0",
    "Does the report look at the topic from more than one angle (e.g. technical, economic, social, historical)? Yes=1, No=0",
    "Does the report offer insights, implications or recommendations that follow from its analysis? Yes=2, No=0",
    # Data handling (4 points)
    "Are numbers reported with their units, dates or time periods, and where they come from? Yes=2, No=0",
    "Does the report interpret figures correctly, without overstating what the data show? Yes=2, No=0",
    # Balance and limits (2 points)
    "Does the report acknowledge uncertainty, conflicting evidence or limitations of its sources? Yes=1, No=0",
    "Does the report present competing views fairly where the topic is contested? Yes=1, No=0",
    # Presentation (4 points)
    "Does the report use headings, lists or tables where they make the content easier to scan? Yes=2, No=0",
    "Is the formatting clean and consistent (heading levels, list style, no broken markup)? Yes=2, No=0",
)


def default_general_rubrics() -> tuple[RubricItem, ...]:
    """The project's own general-report rubric list, parsed."""
    return parse_rubric_list(DEFAULT_GENERAL_RUBRICS)
