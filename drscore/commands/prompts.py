"""``drscore prompts list|show NAME``: the built-in judge templates (to copy and edit for
``drscore run --prompts DIR``)."""
from __future__ import annotations

import argparse
import sys

from drscore import prompts


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("prompts", help="list and show the built-in judge prompt templates",
                       description="The judge prompts drscore sends, one template per judge step. To use your "
                                   "own, copy one into a directory under the same file name, edit it (keep its "
                                   "${placeholders}) and pass --prompts DIR to `drscore run`.")
    ps = p.add_subparsers(dest="prompts_command", metavar="ACTION", required=True)
    ps.add_parser("list", help="every template: name, hash, placeholders")
    s = ps.add_parser("show", help="print one template's file")
    s.add_argument("name", help="template name (see `drscore prompts list`)")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
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
        print(f"drscore prompts show: error: {exc.args[0]}", file=sys.stderr)
        return 2
    return 0
