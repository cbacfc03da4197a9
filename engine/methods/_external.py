"""Methods from outside the package: plugins (entry points of the group ``drscore.methods``
in any installed distribution) and a user's module given by path (``--method-module``).

A plugin that fails to import is a :class:`Problem` naming its distribution and the
exception; the other methods are unaffected. A module given by path is the user's explicit
request, so its failure is an error (:class:`MethodModuleError`) naming the file and line."""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import sys
import traceback
import types
from collections.abc import Iterator
from pathlib import Path

import msgspec

from drscore.engine.runtime.method import Method

GROUP = "drscore.methods"


class Problem(msgspec.Struct, frozen=True):
    """A plugin that could not be used, and why (shown by ``drscore methods`` and ``run``)."""

    distribution: str  # "acme-rubrics 1.2"
    entry_point: str  # "acme = acme_rubrics.method:Acme"
    error: str  # "ImportError: No module named 'numpyy'"

    def __str__(self) -> str:
        return f"plugin {self.entry_point!r} of distribution {self.distribution} failed: {self.error}"


class MethodModuleError(ValueError):
    """A ``--method-module`` file that cannot be used: names the file (and line)."""


def methods_in(module: types.ModuleType) -> list[type[Method]]:
    """The Method subclasses with a ``name`` that ``module`` itself defines."""
    return [obj for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, Method) and obj is not Method
            and isinstance(getattr(obj, "name", None), str) and obj.__module__ == module.__name__]


def _distribution(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "(unknown distribution)"
    return f"{dist.metadata['Name'] or dist.name} {dist.version}"


def entry_point_methods() -> Iterator[tuple[type[Method], str] | Problem]:
    """Each plugin method with its origin (``plugin acme-rubrics 1.2``), or the Problem of
    an entry point that failed. An entry point names a Method subclass (``module:Class``)
    or a module whose named Method subclasses are all taken."""
    for ep in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda e: (e.name, e.value)):
        dist = _distribution(ep)
        label = f"{ep.name} = {ep.value}"
        try:
            obj = ep.load()
        except (Exception, SystemExit) as exc:  # a plugin's failure is its own, never the run's
            yield Problem(dist, label, f"{type(exc).__name__}: {exc}")
            continue
        if isinstance(obj, types.ModuleType):
            found = methods_in(obj)
            if not found:
                yield Problem(dist, label, "the module defines no Method subclass with a name")
            for cls in found:
                yield cls, f"plugin {dist}"
        elif isinstance(obj, type) and issubclass(obj, Method) and isinstance(getattr(obj, "name", None), str):
            yield obj, f"plugin {dist}"
        else:
            yield Problem(dist, label, f"{obj!r} is neither a Method subclass with a name nor a module")


def import_module_file(path: str | Path) -> list[type[Method]]:
    """Import the Python file ``path`` and return the methods it defines."""
    path = Path(path)
    if not path.is_file():
        raise MethodModuleError(f"{path}: method module not found")
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    name = f"drscore_method_module_{path.stem.replace('-', '_')}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise MethodModuleError(f"{path}: not a Python module (a .py file is needed)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses, pickling and msgspec look classes up by module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise MethodModuleError(f"{exc.filename or path}:{exc.lineno}: {exc.msg}") from None
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path.resolve()]
        where = f"{path}:{frames[-1].lineno}" if frames else str(path)
        raise MethodModuleError(f"{where}: the method module failed to import: {type(exc).__name__}: {exc}") from None
    found = methods_in(module)
    if not found:
        raise MethodModuleError(f"{path}: defines no Method subclass with a name "
                                "(class MyMethod(drscore.Method): name = \"my-method\" ...)")
    return found
