"""A method declared in one TOML file: reading and checking it.

Every problem is a :class:`MethodFileError` naming the file, the line and the field
(``my_rubric.toml:14: verdict.clarity.max: ...``): a user who writes such a file reads no
Python to fix it. The format is documented in docs/custom-methods.md; in short::

    name = "clarity"
    description = "..."
    task_fields = ["audience"]            # task fields the template uses, beyond the standard ones

    [prompt]                              # or: prompt = "clarity.md"
    file = "clarity.md"                   # Markdown with front matter, as prompts/*.md
    zh = "clarity_zh.md"                  # optional: the instructions for Chinese tasks

    [verdict]                             # the judge's answer, field by field, in order
    justification = { type = "text" }
    clarity = { type = "int", min = 1, max = 10 }

    [score]                               # one of: field, weights, share
    field = "clarity"
    scale = [0, 1]                        # optional: the row score's scale

tomllib gives values without positions, so lines are found again in the text
(:func:`line_of`): the line of the deepest table header or key on the field's path.
"""
from __future__ import annotations

import difflib
import keyword
import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from drscore import prompts

# What every template may use, and where each value comes from (docs/custom-methods.md).
STANDARD_VARIABLES: dict[str, str] = {
    "question": "the task's prompt",
    "report": "the report being scored",
    "reference": "the task's reference report (tasks without one are skipped)",
    "topic": "the task's topic (empty when none)",
    "language": "the task's language field (empty when none)",
    "task_id": "the task's id",
    "agent": "the agent whose report it is",
}
FIELD_TYPES: dict[str, str] = {
    "int": "a whole number from min to max",
    "float": "a number from min to max",
    "bool": "true or false",
    "label": "one label of `labels`",
    "labels": "a list of labels of `labels` (e.g. one per claim)",
    "text": "free text (a justification, a quote)",
}
NUMERIC = ("int", "float", "bool")
LANGUAGES = ("zh",)  # the languages drscore tells apart (engine.methods.language); English is the default
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
TOP_KEYS = ("name", "description", "prompt", "task_fields", "verdict", "score")
FIELD_KEYS = {"int": ("min", "max"), "float": ("min", "max"), "label": ("labels",), "labels": ("labels",),
              "bool": (), "text": ()}
SCORE_KEYS = ("field", "weights", "share", "scale", "subscores")


class MethodFileError(ValueError):
    """A method file that cannot be used: the message names file, line and field."""


class FieldSpec(msgspec.Struct, frozen=True):
    """One field of the verdict."""

    name: str
    type: str  # a key of FIELD_TYPES
    low: float = 0.0  # int and float: the range; bool: 0-1
    high: float = 1.0
    labels: tuple[str, ...] = ()
    description: str = ""


class ScoreSpec(msgspec.Struct, frozen=True):
    """How the row's score comes from the verdict: a fraction in [0, 1] (of the named
    field's range, a weighted mean of such fractions, or a share of labels) laid on ``scale``."""

    kind: str  # field | weights | share
    weights: tuple[tuple[str, float], ...]  # field -> weight (kind field: one, weight 1)
    values: tuple[tuple[str, float], ...] = ()  # share: label -> credit (0-1)
    scale: tuple[float, float] = (0.0, 1.0)
    subscores: tuple[str, ...] = ()


class PromptSpec(msgspec.Struct, frozen=True):
    language: str  # "" (every task) or a key of LANGUAGES
    text: str
    where: str  # the file the text came from, for messages
    template: prompts.Template


class MethodSpec(msgspec.Struct, frozen=True):
    name: str
    description: str
    path: str
    fields: tuple[FieldSpec, ...]
    score: ScoreSpec
    prompts: tuple[PromptSpec, ...]
    task_fields: tuple[str, ...] = ()
    name_line: int | None = None

    def field(self, name: str) -> FieldSpec:
        return next(f for f in self.fields if f.name == name)


# --------------------------------------------------------------------------- lines

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"^\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*=")


def _parts(dotted: str) -> tuple[str, ...]:
    return tuple(p.strip().strip("\"'") for p in dotted.split("."))


def line_of(text: str, *keys: str) -> int | None:
    """The line of the deepest table header or key that lies on ``keys`` (``("verdict",
    "clarity", "max")`` is found at ``clarity = {... max = ...}`` under ``[verdict]``, or at
    ``max = ...`` under ``[verdict.clarity]``). Lines inside multi-line strings are skipped."""
    table: tuple[str, ...] = ()
    best: tuple[int, int] | None = None  # (depth matched, line)
    in_string = None
    for number, line in enumerate(text.splitlines(), start=1):
        if in_string is not None:
            if line.count(in_string) % 2 == 1:
                in_string = None
            continue
        header = _HEADER.match(line)
        if header:
            table = _parts(header.group(1))
            path: tuple[str, ...] = table
        else:
            key = _KEY.match(line)
            path = table + _parts(key.group(1)) if key else ()
        if path and keys[:len(path)] == path and (best is None or len(path) > best[0]):
            best = (len(path), number)
        for quote in ('"""', "'''"):
            if line.count(quote) % 2 == 1:
                in_string = quote
                break
    return best[1] if best else None


class _Checker:
    """Raises errors with the file, the line of a field path and the path's name."""

    def __init__(self, path: Path, text: str) -> None:
        self.path, self.text = path, text

    def fail(self, keys: tuple[str, ...], message: str) -> MethodFileError:
        line = line_of(self.text, *keys) if keys else None
        where = f"{self.path}:{line}" if line else str(self.path)
        field = ".".join(keys)
        return MethodFileError(f"{where}: {field}: {message}" if field else f"{where}: {message}")

    def unknown_keys(self, table: dict[str, Any], allowed: tuple[str, ...], keys: tuple[str, ...]) -> None:
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(allowed)}"
                raise self.fail((*keys, key), f"unknown key{hint}")

    def string(self, value: Any, keys: tuple[str, ...], *, empty: bool = False) -> str:
        if not isinstance(value, str) or (not empty and not value.strip()):
            raise self.fail(keys, f"must be a{'' if empty else ' non-empty'} string, got {_shown(value)}")
        return value

    def number(self, value: Any, keys: tuple[str, ...], *, whole: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and not isinstance(value, int)):
            raise self.fail(keys, f"must be a {'whole number' if whole else 'number'}, got {_shown(value)}")
        if value != value or value in (float("inf"), float("-inf")):
            raise self.fail(keys, f"must be a finite number, got {value}")
        return float(value)

    def table(self, value: Any, keys: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(keys, f"must be a table ({{ ... }} or a [section]), got {_shown(value)}")
        return value

    def strings(self, value: Any, keys: tuple[str, ...]) -> list[str]:
        if not isinstance(value, list) or not value:
            raise self.fail(keys, f"must be a non-empty list of strings, got {_shown(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise self.fail(keys, f"item {i + 1} must be a non-empty string, got {_shown(item)}")
        if len(set(value)) != len(value):
            twice = sorted({v for v in value if value.count(v) > 1})
            raise self.fail(keys, f"{', '.join(map(repr, twice))} listed twice")
        return list(value)


def _shown(value: Any) -> str:
    kind = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)
    text = repr(value)
    return f"{kind} ({text[:40]}{'...' if len(text) > 40 else ''})"


# --------------------------------------------------------------------------- parts


def _fields(c: _Checker, data: dict[str, Any]) -> tuple[FieldSpec, ...]:
    if "verdict" not in data:
        raise c.fail((), "missing [verdict]: the fields of the judge's answer (see docs/custom-methods.md)")
    table = c.table(data["verdict"], ("verdict",))
    if not table:
        raise c.fail(("verdict",), "needs at least one field")
    out = []
    for name, raw in table.items():
        keys = ("verdict", name)
        if not name.isidentifier() or keyword.iskeyword(name):
            raise c.fail(keys, "a field name must be a word of letters, digits and _ (not starting with a digit)")
        if isinstance(raw, str):  # clarity = "text": the type alone
            raw = {"type": raw}
        spec = c.table(raw, keys)
        kind = spec.get("type")
        if kind not in FIELD_TYPES:
            raise c.fail((*keys, "type"), f"must be one of {', '.join(FIELD_TYPES)}, got {_shown(kind)}"
                         if kind is not None else f"missing; one of {', '.join(FIELD_TYPES)}")
        c.unknown_keys(spec, ("type", "description", *FIELD_KEYS[kind]), keys)
        description = c.string(spec.get("description", ""), (*keys, "description"), empty=True)
        low, high = 0.0, 1.0
        labels: tuple[str, ...] = ()
        if kind in ("int", "float"):
            for bound in ("min", "max"):
                if bound not in spec:
                    raise c.fail(keys, f"an {kind} field needs min and max (its range, e.g. min = 1, max = 10)")
            low = c.number(spec["min"], (*keys, "min"), whole=kind == "int")
            high = c.number(spec["max"], (*keys, "max"), whole=kind == "int")
            if not low < high:
                raise c.fail((*keys, "max"), f"must be above min ({spec['min']}), got {spec['max']}")
        if kind in ("label", "labels"):
            if "labels" not in spec:
                raise c.fail(keys, f"a {kind} field needs labels = [...] (the labels the judge chooses from)")
            labels = tuple(c.strings(spec["labels"], (*keys, "labels")))
        out.append(FieldSpec(name, kind, low, high, labels, description))
    return tuple(out)


def _score(c: _Checker, data: dict[str, Any], fields: tuple[FieldSpec, ...]) -> ScoreSpec:
    if "score" not in data:
        raise c.fail((), "missing [score]: how the row's score comes from the verdict (field, weights or share)")
    table = c.table(data["score"], ("score",))
    c.unknown_keys(table, SCORE_KEYS, ("score",))
    by_name = {f.name: f for f in fields}
    kinds = [k for k in ("field", "weights", "share") if k in table]
    if len(kinds) != 1:
        raise c.fail(("score",), "give exactly one of field = \"...\", weights = { ... } or share = { ... }"
                     + (f" (got {', '.join(kinds)})" if kinds else ""))
    kind = kinds[0]

    def numeric(name: Any, keys: tuple[str, ...]) -> FieldSpec:
        c.string(name, keys)
        if name not in by_name:
            raise c.fail(keys, f"score field {name!r} is not in [verdict] (fields: {', '.join(by_name)})")
        if by_name[name].type not in NUMERIC:
            raise c.fail(keys, f"field {name!r} is {by_name[name].type}; a score comes from an int, float or "
                               "bool field (labels: use share)")
        return by_name[name]

    values: tuple[tuple[str, float], ...] = ()
    if kind == "field":
        used = [numeric(table["field"], ("score", "field"))]
        weights: tuple[tuple[str, float], ...] = ((used[0].name, 1.0),)
    elif kind == "weights":
        w = c.table(table["weights"], ("score", "weights"))
        if not w:
            raise c.fail(("score", "weights"), "needs at least one field = weight")
        used = [numeric(name, ("score", "weights", name)) for name in w]
        weights = tuple((name, c.number(v, ("score", "weights", name))) for name, v in w.items())
        for name, v in weights:
            if v <= 0:
                raise c.fail(("score", "weights", name), f"a weight must be above 0, got {v:g}")
    else:
        share = c.table(table["share"], ("score", "share"))
        c.unknown_keys(share, ("fields", "of"), ("score", "share"))
        if "fields" not in share or "of" not in share:
            raise c.fail(("score", "share"), "needs fields = [...] (label fields) and of = [...] "
                                             "(the labels that count, or { label = credit })")
        names = c.strings(share["fields"], ("score", "share", "fields"))
        for name in names:
            if name not in by_name:
                raise c.fail(("score", "share", "fields"), f"score field {name!r} is not in [verdict]")
            if by_name[name].type not in ("label", "labels"):
                raise c.fail(("score", "share", "fields"), f"field {name!r} is {by_name[name].type}; a share "
                                                           "counts label or labels fields")
        of = share["of"]
        if isinstance(of, list):
            credits = {label: 1.0 for label in c.strings(of, ("score", "share", "of"))}
        else:
            credits = {k: c.number(v, ("score", "share", "of", k)) for k, v in c.table(of, ("score", "share", "of"))
                       .items()}
        for label, credit in credits.items():
            if not 0 <= credit <= 1:
                raise c.fail(("score", "share", "of", label), f"a label's credit is from 0 to 1, got {credit:g}")
            if not all(label in by_name[n].labels for n in names):
                raise c.fail(("score", "share", "of"), f"label {label!r} is not among the labels of "
                             + ", ".join(n for n in names if label not in by_name[n].labels))
        weights = tuple((name, 1.0) for name in names)
        values = tuple(credits.items())
        used = []
    # The default scale: the fields' own range when they share one (a 1-10 field scores 1-10),
    # else 0-1.
    ranges = {(f.low, f.high) for f in used}
    scale = ranges.pop() if len(ranges) == 1 and kind != "share" else (0.0, 1.0)
    if "scale" in table:
        raw = table["scale"]
        if not isinstance(raw, list) or len(raw) != 2:
            raise c.fail(("score", "scale"), f"must be [low, high], got {_shown(raw)}")
        scale = (c.number(raw[0], ("score", "scale")), c.number(raw[1], ("score", "scale")))
        if not scale[0] < scale[1]:
            raise c.fail(("score", "scale"), f"low must be below high, got {raw}")
    if "subscores" in table:
        subs = tuple(numeric(n, ("score", "subscores")).name
                     for n in c.strings(table["subscores"], ("score", "subscores")))
    else:
        subs = tuple(f.name for f in fields if f.type in NUMERIC)
    return ScoreSpec(kind, weights, values, scale, subs)


def _task_fields(c: _Checker, data: dict[str, Any]) -> tuple[str, ...]:
    if "task_fields" not in data:
        return ()
    names = c.strings(data["task_fields"], ("task_fields",))
    for name in names:
        if not name.isidentifier():
            raise c.fail(("task_fields",), f"{name!r}: a template variable is a word of letters, digits and _")
        if name in STANDARD_VARIABLES:
            raise c.fail(("task_fields",), f"{name!r} is a standard variable already (no need to list it)")
    return tuple(names)


def _prompt_sources(c: _Checker, data: dict[str, Any]) -> list[tuple[str, tuple[str, ...], Any]]:
    """(language, keys, value) of each prompt given: the default first."""
    if "prompt" not in data:
        raise c.fail((), "missing prompt: the judge's instructions (prompt = \"file.md\", or [prompt] with "
                         "file = ... or text = ...)")
    raw = data["prompt"]
    if isinstance(raw, str):
        return [("", ("prompt",), {"file": raw})]
    table = c.table(raw, ("prompt",))
    c.unknown_keys(table, ("file", "text", *LANGUAGES), ("prompt",))
    out: list[tuple[str, tuple[str, ...], Any]] = [
        ("", ("prompt",), {k: v for k, v in table.items() if k in ("file", "text")})]
    for language in LANGUAGES:
        if language in table:
            value = table[language]
            out.append((language, ("prompt", language), {"file": value} if isinstance(value, str) else value))
    return out


def _inline_offset(c: _Checker, keys: tuple[str, ...]) -> int:
    """Template line 1 of an inline ``text = \"\"\"...`` is this many lines below the file's line 0."""
    line = line_of(c.text, *keys) or 0
    lines = c.text.splitlines()
    opener = lines[line - 1].rstrip() if 0 < line <= len(lines) else ""
    # TOML drops the newline right after an opening triple quote: the text starts a line below
    return line if opener.endswith(('"""', "'''")) else max(line - 1, 0)


def _prompt(c: _Checker, language: str, keys: tuple[str, ...], value: Any, name: str,
            allowed: set[str]) -> PromptSpec:
    table = c.table(value, keys)
    c.unknown_keys(table, ("file", "text"), keys)
    if ("file" in table) == ("text" in table):
        raise c.fail(keys, "give file = \"template.md\" (beside this file) or text = \"\"\"...\"\"\" (inline), one of them")
    template_name = f"{name}_{language}" if language else name
    if "file" in table:
        rel = c.string(table["file"], (*keys, "file"))
        path = (c.path.parent / rel)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise c.fail((*keys, "file"), f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
        where, offset, shown = str(path), 0, str(path)
        keys = (*keys, "file")
    else:
        text = c.string(table["text"], (*keys, "text"))
        keys = (*keys, "text")
        where, offset, shown = str(c.path), _inline_offset(c, keys), f"{c.path}"
    try:
        template = prompts.parse(template_name, text, source=where)
    except ValueError as exc:
        message = str(exc)
        m = re.match(rf"^{re.escape(where)}:(\d+): ", message)
        if m:  # a front-matter error: its line in the file that holds the text
            message = f"{shown}:{int(m.group(1)) + offset}: {'.'.join(keys)}: {message[m.end():]}"
        elif offset or where == str(c.path):
            message = f"{c.path}:{line_of(c.text, *keys) or 1}: {'.'.join(keys)}: {message}"
        else:
            message = f"{where}: {message}"
        raise MethodFileError(message) from None
    unknown = sorted(template.variables - allowed)
    if unknown:
        line = _variable_line(text, unknown[0])
        close = difflib.get_close_matches(unknown[0], sorted(allowed), n=1)
        hint = f"; did you mean ${{{close[0]}}}?" if close else ""
        raise MethodFileError(
            f"{shown}:{line + offset}: {'.'.join(keys)}: unknown template variable ${{{unknown[0]}}}{hint} "
            f"(known: {', '.join(sorted(STANDARD_VARIABLES))}; a task field must be listed in task_fields)")
    if "report" not in template.variables:
        raise MethodFileError(f"{shown}: {'.'.join(keys)}: the template never shows the judge the report: "
                              "put ${report} where it goes")
    return PromptSpec(language, text, where, template)


def _variable_line(text: str, name: str) -> int:
    m = re.search(rf"\$(?:\{{{re.escape(name)}\}}|{re.escape(name)}\b)", text)
    return text.count("\n", 0, m.start()) + 1 if m else 1


# --------------------------------------------------------------------------- the file


def read(path: str | Path) -> MethodSpec:
    """The method declared in ``path``, checked (a :class:`MethodFileError` otherwise)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MethodFileError(f"{path}: method file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise MethodFileError(f"{path}: cannot read method file: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        where = f"{path}:{m.group(1)}" if m else str(path)
        raise MethodFileError(f"{where}: not valid TOML: {str(exc).split(' (at line')[0]}") from None
    c = _Checker(path, text)
    c.unknown_keys(data, TOP_KEYS, ())
    if "name" not in data:
        raise c.fail((), "missing name = \"...\": the method's name in --methods, rows and the leaderboard")
    name = c.string(data["name"], ("name",))
    if not NAME.match(name):
        raise c.fail(("name",), f"{name!r}: a name is letters, digits, '-', '_' and '.', starting with a letter "
                                "or digit, at most 64 characters")
    description = c.string(data.get("description", ""), ("description",), empty=True)
    task_fields = _task_fields(c, data)
    fields = _fields(c, data)
    score = _score(c, data, fields)
    allowed = set(STANDARD_VARIABLES) | set(task_fields)
    specs = tuple(_prompt(c, lang, keys, value, name, allowed) for lang, keys, value in _prompt_sources(c, data))
    return MethodSpec(name=name, description=description or f"declared in {path.name}", path=str(path),
                      fields=fields, score=score, prompts=specs, task_fields=task_fields,
                      name_line=line_of(text, "name"))
