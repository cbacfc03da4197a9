"""The methods room: one module per published scoring method, each beside the pure
functions it alone uses (a method with several such modules is a package whose
``method.py`` holds the :class:`Method`: ``race/``, ``rigorous/``). ``tasks/`` holds
DeepResearch Arena's task-level tools (Elo, leakage), which score tasks, not reports.

Methods may import the runtime (:mod:`drscore.engine.runtime`), the shared text tools
(:mod:`drscore.engine.text`) and statistics (:mod:`drscore.engine.stats`); never
``judge``, ``fetch`` or the reporting room.

This module is the registry: every module (or package ``method.py``) here that defines a
:class:`Method` subclass with a ``name`` is discovered, so adding a method never edits
this file."""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil

from drscore.engine.runtime.method import Method, MethodResult, Option

__all__ = ["Method", "MethodResult", "Option", "available", "get"]

_REGISTRY: dict[str, type[Method]] = {}


def _discover() -> None:
    if _REGISTRY:
        return
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        qualified = f"{__name__}.{info.name}"
        if info.ispkg:
            if importlib.util.find_spec(f"{qualified}.method") is None:
                continue
            qualified += ".method"
        module = importlib.import_module(qualified)
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Method) and obj is not Method:
                name = getattr(obj, "name", None)
                if name and obj.__module__ == module.__name__:
                    _REGISTRY[name] = obj


def available() -> dict[str, type[Method]]:
    """All registered methods by name."""
    _discover()
    return dict(sorted(_REGISTRY.items()))


def get(name: str) -> type[Method]:
    _discover()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown method {name!r}; available: {', '.join(sorted(_REGISTRY))}") from None
