"""Prompt templates, one file per judge step, in the project's own words.

File format (``prompts/<name>.md``)::

    ---
    max_tokens: 800              # output cap sent to the judge
    expected_output_tokens: 250  # used for dry-run cost estimates
    temperature: 0.0
    ---
    ## system
    ...
    ## user
    ... ${variable} ...

Variables use ``string.Template`` syntax (``${name}``) so JSON braces and dollar signs
inside reports need no escaping. A template's hash is part of every cache key, so
editing one file re-asks only the calls made with it.

A :class:`Library` with an override directory (``drscore run --prompts DIR``) answers a
name from ``DIR/<name>.md`` when that file exists and from the built-in set otherwise.
An override must use exactly the placeholders of the built-in template it replaces (the
verdict schema is the caller's, so it cannot change); its own hash goes into the cache
key, so answers to the built-in prompt are never served for it.

Methods from outside the package (a method file, a plugin, ``--method-module``) bring
their own templates: :func:`register` adds one by name beside the built-in set, and from
then on :func:`load`, :func:`names` and ``drscore prompts`` know it like a built-in one.
"""
from __future__ import annotations

import functools
import hashlib
import re
import string
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

_SECTION = re.compile(r"^## (system|user|assistant)\s*$", re.MULTILINE)


class Template(msgspec.Struct, frozen=True):
    name: str
    hash: str
    sections: tuple[tuple[str, str], ...]
    max_tokens: int = 1024
    expected_output_tokens: int = 300
    temperature: float = 0.0
    # Derived once in parse(): every judge call renders a template.
    variables: frozenset[str] = frozenset()
    compiled: tuple[tuple[str, string.Template], ...] = ()

    def render(self, variables: dict[str, Any]) -> list[tuple[str, str]]:
        """Return ``(role, content)`` pairs; a missing variable is a KeyError naming it."""
        if not self.variables <= variables.keys():
            missing = self.variables - variables.keys()
            raise KeyError(f"prompt {self.name!r} needs variables {sorted(missing)}")
        values = {k: _text(v) for k, v in variables.items()}
        return [(role, tpl.safe_substitute(values)) for role, tpl in self.compiled]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


# Front-matter settings: (kind, lowest, highest). max_tokens is sent to the endpoint and is
# the budget's worst case, so a negative or absurd value must stop at the file, not there.
_SETTINGS: dict[str, tuple[type, float, float]] = {
    "max_tokens": (int, 1, 1_000_000),
    "expected_output_tokens": (int, 1, 1_000_000),
    "temperature": (float, 0.0, 2.0),
}


def _shown(bound: float) -> str:
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


def _setting(key: str, text: str, where: str) -> int | float:
    """One front-matter value, checked against its range (a ValueError naming ``where``)."""
    if key not in _SETTINGS:
        raise ValueError(f"{where}: unknown setting {key!r}; known: {', '.join(_SETTINGS)}")
    kind, low, high = _SETTINGS[key]
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"{where}: {key} must be a number, got {text!r}") from None
    if kind is int and not (number.is_integer() and "." not in text and "e" not in text.lower()):
        raise ValueError(f"{where}: {key} must be a whole number from {_shown(low)} to {_shown(high)}, got {text!r}")
    if not low <= number <= high:  # NaN fails this too
        raise ValueError(f"{where}: {key} must be from {_shown(low)} to {_shown(high)}, got {text!r}")
    return int(number) if kind is int else number


def _front_matter(raw: str, where: str) -> tuple[dict[str, Any], str]:
    """The settings and the body. A fence is a line of ``---`` (trailing blanks allowed)."""
    lines = raw.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return {}, raw
    meta: dict[str, Any] = {}
    for number, line in enumerate(lines[1:], start=2):
        if line.rstrip() == "---":
            return meta, "".join(lines[number:])
        if _SECTION.match(line):  # the body began: the closing fence is missing
            break
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        key, colon, value = text.partition(":")
        if not colon:
            raise ValueError(f"{where}:{number}: expected 'key: value', got {text!r}")
        meta[key.strip()] = _setting(key.strip(), value.strip(), f"{where}:{number}")
    raise ValueError(f"{where}:1: front matter opened with '---' is never closed")


def parse(name: str, raw: str, source: str | None = None) -> Template:
    """Parse template text (front matter + ``## role`` sections); ``source`` (a file name)
    goes into error messages with the line."""
    meta, body = _front_matter(raw, source or f"prompt {name!r}")
    parts = _SECTION.split(body)
    sections = tuple(
        (parts[i], parts[i + 1].strip("\n")) for i in range(1, len(parts) - 1, 2)
    )
    if not sections:
        raise ValueError(f"prompt {name!r} has no '## system' / '## user' sections")
    names = {m.group("named") or m.group("braced") for _, text in sections
             for m in string.Template.pattern.finditer(text)} - {None}
    return Template(
        name=name,
        hash=hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16],
        sections=sections,
        variables=frozenset(names),
        compiled=tuple((role, string.Template(text)) for role, text in sections),
        max_tokens=int(meta.get("max_tokens", 1024)),
        expected_output_tokens=int(meta.get("expected_output_tokens", 300)),
        temperature=float(meta.get("temperature", 0.0)),
    )


class Registered(msgspec.Struct, frozen=True):
    """A template a method from outside the package brought: its text and where it came from."""

    template: Template
    text: str
    origin: str  # "file my_rubric.toml", "plugin acme-rubrics 1.0", ...


# Templates of user methods by name (see register); the built-in ones are files.
_REGISTERED: dict[str, Registered] = {}


def register(name: str, raw: str, *, origin: str, source: str | None = None, replace: bool = False) -> Template:
    """Add the template ``name`` (text ``raw``, the format above) for a method from outside
    the package. ``origin`` says where it came from (``drscore prompts list`` shows it);
    ``source`` names the file in parse errors. A name of a built-in template, or one another
    origin registered, is a ValueError unless ``replace``; the same origin registering it
    again replaces it (a method file edited between two runs in one process)."""
    if name in builtin_names():
        raise ValueError(f"template name {name!r} is taken by a built-in template (see `drscore prompts list`)")
    held = _REGISTERED.get(name)
    if held is not None and held.origin != origin and not replace:
        raise ValueError(f"template name {name!r} is already used by {held.origin}")
    tpl = parse(name, raw, source=source)
    _REGISTERED[name] = Registered(tpl, raw, origin)
    return tpl


def origin_of(name: str) -> str:
    """Where template ``name`` comes from: ``built-in`` or its registered origin."""
    held = _REGISTERED.get(name)
    return held.origin if held is not None else "built-in"


def load(name: str) -> Template:
    """The template ``name``: a registered one, else ``prompts/<name>.md`` of the package."""
    held = _REGISTERED.get(name)
    return held.template if held is not None else _builtin(name)


@functools.cache
def _builtin(name: str) -> Template:
    path = resources.files(__name__).joinpath(f"{name}.md")
    if not path.is_file():
        raise KeyError(f"no prompt template named {name!r}")
    return parse(name, path.read_text(encoding="utf-8"))


@functools.cache
def builtin_names() -> frozenset[str]:
    """The names of the templates shipped in the package."""
    return frozenset(p.name[:-3] for p in resources.files(__name__).iterdir() if p.name.endswith(".md"))


def names() -> list[str]:
    """Every template name: the built-in ones and those registered."""
    return sorted(builtin_names() | _REGISTERED.keys())


class PromptOverrideError(ValueError):
    """An override template that cannot replace its built-in one (names the file)."""


class Library:
    """Templates by name: ``DIR/<name>.md`` overrides when given, else the built-in one.

    Every override file is checked when the library is made, so a typo in a file name or
    a placeholder fails before the first call is paid for.
    """

    def __init__(self, override_dir: str | Path | None = None) -> None:
        self.override_dir = Path(override_dir) if override_dir else None
        self._overrides: dict[str, Template] = {}
        if self.override_dir is None:
            return
        if not self.override_dir.is_dir():
            raise PromptOverrideError(f"{self.override_dir}: --prompts must be a directory of <name>.md files")
        builtin = set(names())
        for path in sorted(self.override_dir.glob("*.md")):
            name = path.name[:-3]
            if name not in builtin:
                raise PromptOverrideError(f"{path}: no built-in template named {name!r} to override "
                                          f"(see `drscore prompts list`)")
            try:
                tpl = parse(name, path.read_text(encoding="utf-8"), source=str(path))
            except UnicodeDecodeError as exc:
                raise PromptOverrideError(f"{path}: {exc}") from None
            except ValueError as exc:  # names the file (and line) already
                raise PromptOverrideError(str(exc)) from None
            want = load(name).variables
            if tpl.variables != want:
                extra, missing = sorted(tpl.variables - want), sorted(want - tpl.variables)
                raise PromptOverrideError(
                    f"{path}: placeholders differ from the built-in {name!r}: "
                    + "; ".join(x for x in (f"unknown {extra}" if extra else "",
                                            f"missing {missing}" if missing else "") if x))
            self._overrides[name] = tpl

    @property
    def overridden(self) -> list[str]:
        """Names of the templates this library takes from the override directory."""
        return sorted(self._overrides)

    def unpaired_variants(self, suffix: str = "_zh") -> list[str]:
        """Built-in language variants (``quality_zh``) whose base template (``quality``) is
        overridden here while they are not: a task in that language still gets the
        built-in variant, which a run says (see docs/everyday.md, custom prompts)."""
        builtin = set(names())
        return [f"{n}{suffix}" for n in self.overridden
                if f"{n}{suffix}" in builtin and f"{n}{suffix}" not in self._overrides]

    def load(self, name: str) -> Template:
        """The template called ``name`` (override first)."""
        tpl = self._overrides.get(name)
        return tpl if tpl is not None else load(name)


def source_of(name: str) -> str:
    """The text of the template ``name`` (for ``drscore prompts show``)."""
    held = _REGISTERED.get(name)
    if held is not None:
        return held.text
    path = resources.files(__name__).joinpath(f"{name}.md")
    if not path.is_file():
        raise KeyError(f"no prompt template named {name!r}; see `drscore prompts list`")
    return path.read_text(encoding="utf-8")
