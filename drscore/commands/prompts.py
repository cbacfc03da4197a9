"""``drscore prompts list|show NAME``: the built-in judge templates (to copy and edit for
``drscore run --prompts DIR``)."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import click

from drscore import prompts
from drscore.commands._framework import Group, argument, fail


@click.group("prompts", cls=Group, short_help="list and show the built-in judge prompt templates",
             help="The judge prompts drscore sends, one template per judge step. To use your "
                  "own, copy one into a directory under the same file name, edit it (keep its "
                  "${placeholders}) and pass --prompts DIR to `drscore run`. A Chinese task uses the "
                  "template's _zh variant (quality_zh, ...) when there is one: override both, or the "
                  "run warns that the built-in _zh template was used.")
def command() -> None:
    """The templates, by name."""


@command.command("list", help="Every template: name, hash, answer cap, placeholders.")
def list_() -> int:
    return _main(SimpleNamespace(prompts_command="list"))


@command.command("show", help="Print one template's file.")
@argument("name", help="template name (see `drscore prompts list`)")
def show(name: str) -> int:
    return _main(SimpleNamespace(prompts_command="show", name=name))


def _main(args: SimpleNamespace) -> int:
    if args.prompts_command == "list":
        rows = [(n, prompts.load(n)) for n in prompts.names()]
        width = max(len(n) for n, _ in rows)
        print(f"{'name':<{width}}  {'hash':<16}  max_tokens  placeholders")
        for name, tpl in rows:
            print(f"{name:<{width}}  {tpl.hash:<16}  {tpl.max_tokens:>10}  {', '.join(sorted(tpl.variables))}")
        return 0
    try:
        sys.stdout.write(prompts.source_of(args.name))
    except KeyError as exc:
        fail(exc.args[0])
    return 0
