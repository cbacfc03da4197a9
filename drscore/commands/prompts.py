"""``drscore prompts list|show NAME``: the built-in judge templates (to copy and edit for
``drscore run --prompts DIR``)."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import click

from collections.abc import Callable
from typing import Any, TypeVar

from drscore import prompts
from drscore.api import load_user_methods
from drscore.commands._framework import Group, argument, fail, option
from drscore.engine.runtime.escape import terminal

F = TypeVar("F", bound=Callable[..., Any])


@click.group("prompts", cls=Group, short_help="list and show the built-in judge prompt templates",
             help="The judge prompts drscore sends, one template per judge step. To use your "
                  "own, copy one into a directory under the same file name, edit it (keep its "
                  "${placeholders}) and pass --prompts DIR to `drscore run`. A Chinese task uses the "
                  "template's _zh variant (quality_zh, ...) when there is one: override both, or the "
                  "run warns that the built-in _zh template was used.")
def command() -> None:
    """The templates, by name."""


def _user_methods(f: F) -> F:
    """--method-file / --method-module: their templates are listed and shown too."""
    f = option("--method-module", "method_modules", multiple=True, metavar="FILE",
               help="also the templates of the methods a Python file defines")(f)
    return option("--method-file", "method_files", multiple=True, metavar="FILE",
                  help="also the templates of the method declared in this TOML file")(f)


@command.command("list", help="Every template: name, hash, answer cap, where it comes from (built-in, or the "
                              "plugin, method file or module that brought it), placeholders.")
@_user_methods
def list_(method_files: tuple[str, ...], method_modules: tuple[str, ...]) -> int:
    load_user_methods(method_files, method_modules)
    return _main(SimpleNamespace(prompts_command="list"))


@command.command("show", help="Print one template's file.")
@argument("name", help="template name (see `drscore prompts list`)")
@_user_methods
def show(name: str, method_files: tuple[str, ...], method_modules: tuple[str, ...]) -> int:
    load_user_methods(method_files, method_modules)
    return _main(SimpleNamespace(prompts_command="show", name=name))


def _main(args: SimpleNamespace) -> int:
    if args.prompts_command == "list":
        rows = [(n, prompts.load(n), prompts.origin_of(n)) for n in prompts.names()]
        width = max(len(n) for n, _, _ in rows)
        origin_w = max(len(o) for _, _, o in rows)
        print(f"{'name':<{width}}  {'hash':<16}  max_tokens  {'from':<{origin_w}}  placeholders")
        for name, tpl, origin in rows:
            print(terminal(f"{name:<{width}}  {tpl.hash:<16}  {tpl.max_tokens:>10}  {origin:<{origin_w}}  "
                           f"{', '.join(sorted(tpl.variables))}"))
        return 0
    try:
        sys.stdout.write(prompts.source_of(args.name))
    except KeyError as exc:
        fail(exc.args[0])
    return 0
