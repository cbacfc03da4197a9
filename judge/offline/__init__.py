"""The offline judge: deterministic lexical/heuristic verdicts, no network.

Each module in this package registers rules with :func:`rule` keyed by prompt template
name; a rule gets the template variables and the verdict's JSON Schema and returns a
JSON-able dict that must validate against that schema. Modules are discovered, so a
method adds its heuristics without editing this file.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable

Rule = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]
_RULES: dict[str, Rule] = {}
_loaded = False


def rule(template: str) -> Callable[[Rule], Rule]:
    def deco(fn: Rule) -> Rule:
        _RULES[template] = fn
        return fn

    return deco


def rule_for(template: str) -> Rule | None:
    """The rule for ``template``; a language version (``<name>_zh``) has the same inputs
    and verdict as its base template, so it shares the base template's rule."""
    found = rules()
    return found.get(template) or found.get(template.removesuffix("_zh"))


def rules() -> dict[str, Rule]:
    global _loaded
    if not _loaded:
        for info in pkgutil.iter_modules(__path__):
            if not info.name.startswith("_"):
                importlib.import_module(f"{__name__}.{info.name}")
        _loaded = True
    return _RULES
