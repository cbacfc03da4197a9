"""The methods room: one module per published scoring method, each beside the pure
functions it alone uses (a method with several such modules is a package whose
``method.py`` holds the :class:`Method`: ``race/``, ``rigorous/``). ``tasks/`` holds
DeepResearch Arena's task-level tools (Elo, leakage), which score tasks, not reports.

Methods may import the runtime (:mod:`drscore.engine.runtime`), the shared text tools
(:mod:`drscore.engine.text`) and statistics (:mod:`drscore.engine.stats`); never
``judge``, ``fetch`` or the reporting room.

This module is the registry: every module (or package ``method.py``) here that defines a
:class:`Method` subclass with a ``name`` is discovered, so adding a method never edits
this file. Methods from outside the package join it with their origin (``drscore
methods`` lists it): plugins (entry points of the group ``drscore.methods``, discovered
with the built-in methods), method files (:func:`load_method_file`) and Python files
(:func:`load_method_module`). A name is one method: a user method may not take a
built-in method's name, nor another origin's."""
from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from pathlib import Path

from drscore import prompts
from drscore.engine.runtime.method import Method, MethodResult, Option

__all__ = ["BUILT_IN", "Method", "MethodResult", "Option", "available", "get", "load_method_file",
           "load_method_module", "origin", "plugin_problems", "register"]

BUILT_IN = "built-in"
_REGISTRY: dict[str, type[Method]] = {}
_ORIGINS: dict[str, str] = {}
_PROBLEMS: list[str] = []  # plugins that could not be used (each names its distribution)
_discovered = False
_MODULES: dict[tuple[str, int, int], tuple[str, ...]] = {}  # method modules imported: (path, mtime, size)


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True
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
                    _ORIGINS[name] = BUILT_IN
    from drscore.engine.methods._external import entry_point_methods

    for found in entry_point_methods():
        if not isinstance(found, tuple):
            _PROBLEMS.append(str(found))
            continue
        cls, where = found
        try:
            register(cls, where)
        except ValueError as exc:
            _PROBLEMS.append(f"{where}: {exc}")


def _user(where: str) -> bool:
    """A method file or module: the user's own, given for a run (not installed)."""
    return where.startswith(("file ", "module "))


def register(cls: type[Method], where: str) -> None:
    """Add a method from outside the package, with its origin (``file my.toml``, ``plugin
    acme 1.0``, ``module my.py``) and its templates. ValueError when its name is a
    built-in method's or a plugin's. A method file or module replaces one registered
    earlier under its name by a file or module (in one process, the last loaded wins:
    a script running several configurations in turn); :func:`load_user_methods` refuses
    two of them with one name in one run."""
    _discover()
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{cls.__qualname__} has no name (name: ClassVar[str] = \"my-method\")")
    held = _ORIGINS.get(name)
    if held is not None and held != where and not (_user(held) and _user(where)):
        taken = "a built-in method" if held == BUILT_IN else held
        raise ValueError(f"method name {name!r} is taken by {taken}; choose another name")
    for template, text in getattr(cls, "prompt_templates", {}).items():
        prompts.register(template, text, origin=where, source=f"{where}, template {template!r}",
                         replace=_user(where))
    _REGISTRY[name] = cls
    _ORIGINS[name] = where


def load_method_file(path: str | Path) -> str:
    """Register the method declared in the TOML file ``path``; its name. A problem is a
    :class:`~drscore.engine.methods.method_file.spec.MethodFileError` naming file, line
    and field."""
    from drscore.engine.methods.method_file.method import load
    from drscore.engine.methods.method_file.spec import MethodFileError

    cls = load(path)
    try:
        register(cls, f"file {path}")
    except ValueError as exc:
        line = cls.spec.name_line
        raise MethodFileError(f"{path}:{line}: name: {exc}" if line else f"{path}: name: {exc}") from None
    return cls.name


def load_method_module(path: str | Path) -> list[str]:
    """Import the Python file ``path`` and register the methods it defines; their names.
    A file already imported, unchanged since, is not imported again."""
    from drscore.engine.methods._external import MethodModuleError, import_module_file

    try:
        stat = Path(path).stat()
        stamp = (str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)
    except OSError:
        stamp = None
    if stamp is not None and stamp in _MODULES:
        return list(_MODULES[stamp])
    names = []
    for cls in import_module_file(path):
        try:
            register(cls, f"module {path}")
        except ValueError as exc:
            raise MethodModuleError(f"{path}: {cls.__qualname__}: {exc}") from None
        names.append(cls.name)
    if stamp is not None:
        _MODULES[stamp] = tuple(names)
    return names


def available() -> dict[str, type[Method]]:
    """All registered methods by name."""
    _discover()
    return dict(sorted(_REGISTRY.items()))


def origin(name: str) -> str:
    """Where method ``name`` comes from: ``built-in``, ``plugin DIST VERSION``,
    ``file PATH`` or ``module PATH``."""
    _discover()
    return _ORIGINS[name]


def plugin_problems() -> list[str]:
    """Plugins that could not be used, one message each (distribution and exception)."""
    _discover()
    return list(_PROBLEMS)


def get(name: str) -> type[Method]:
    _discover()
    try:
        return _REGISTRY[name]
    except KeyError:
        hint = f" ({'; '.join(_PROBLEMS)})" if _PROBLEMS else ""
        raise KeyError(f"unknown method {name!r}; available: {', '.join(sorted(_REGISTRY))}{hint}") from None
