"""CLI sub-commands, one module per command group. Each module defines
``register(subparsers)`` which adds its parser(s) and sets ``func`` (sync, taking the
parsed ``argparse.Namespace`` and returning an exit code)."""
from __future__ import annotations

import argparse
import importlib
import pkgutil


def register_all(subparsers: argparse._SubParsersAction) -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(subparsers)
