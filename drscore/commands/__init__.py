"""CLI sub-commands, one module per command or command group. Each module defines
``command``: a click command (or group) built with :mod:`drscore.commands._framework`,
whose function returns the exit code."""
from __future__ import annotations

import importlib
import pkgutil

import click


def all_commands() -> list[click.Command]:
    """The ``command`` of every module here, by module name."""
    out = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        out.append(module.command)
    return out
