"""Method registry: every module in this package that defines a :class:`Method`
subclass with a ``name`` is discovered, so adding a method never edits this file."""
from __future__ import annotations

import importlib
import pkgutil

from engine.methods.base import Method, MethodResult, Option

__all__ = ["Method", "MethodResult", "Option", "available", "get"]

_REGISTRY: dict[str, type[Method]] = {}


def _discover() -> None:
    if _REGISTRY:
        return
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
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
