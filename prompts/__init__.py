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


def parse(name: str, raw: str) -> Template:
    """Parse template text (front matter + ``## role`` sections)."""
    meta: dict[str, Any] = {}
    body = raw
    if raw.startswith("---\n"):
        end = raw.index("\n---\n", 4)
        for line in raw[4:end].splitlines():
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            key, _, value = line.partition(":")
            meta[key.strip()] = float(value) if "." in value else int(value)
        body = raw[end + 5 :]
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


@functools.cache
def load(name: str) -> Template:
    """Load ``prompts/<name>.md`` from the installed package."""
    path = resources.files(__name__).joinpath(f"{name}.md")
    if not path.is_file():
        raise KeyError(f"no prompt template named {name!r}")
    return parse(name, path.read_text(encoding="utf-8"))


def names() -> list[str]:
    return sorted(
        p.name[:-3] for p in resources.files(__name__).iterdir() if p.name.endswith(".md")
    )


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
                tpl = parse(name, path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                raise PromptOverrideError(f"{path}: {exc}") from None
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

    def load(self, name: str) -> Template:
        """The template called ``name`` (override first)."""
        tpl = self._overrides.get(name)
        return tpl if tpl is not None else load(name)


def source_of(name: str) -> str:
    """The text of the built-in template ``name`` (for ``drscore prompts show``)."""
    path = resources.files(__name__).joinpath(f"{name}.md")
    if not path.is_file():
        raise KeyError(f"no prompt template named {name!r}; see `drscore prompts list`")
    return path.read_text(encoding="utf-8")
