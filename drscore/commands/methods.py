"""``drscore methods``: every scoring method, with where it comes from."""
from __future__ import annotations

import sys
from typing import Any

import click
import orjson

from drscore.api import load_user_methods, method_origin, methods, plugin_problems
from drscore.commands._framework import Command, option
from drscore.engine.runtime.escape import terminal


@click.command("methods", cls=Command, short_help="list every scoring method and where it comes from",
               help="Every method `drscore run --methods` accepts: its name, where it comes from (built-in; "
                    "plugin DIST VERSION, an installed distribution's entry point in the group drscore.methods; "
                    "file PATH, a TOML method file; module PATH, a Python file), its options and what it "
                    "does. Plugins that fail to load are listed as warnings on stderr (the other methods are "
                    "unaffected). Writing your own: docs/custom-methods.md. Exit status: 0; 1 when a "
                    "--method-file or --method-module cannot be used (the message names the file, line and "
                    "field); 2 usage.",
               examples=["drscore methods",
                         "drscore methods --method-file clarity_rubric.toml --json"])
@option("--method-file", "method_files", multiple=True, metavar="FILE",
        help="also load the method declared in this TOML file (repeat for several)")
@option("--method-module", "method_modules", multiple=True, metavar="FILE",
        help="also load the methods a Python file defines (repeat for several)")
@option("--json", "as_json", is_flag=True, help="print the list as JSON")
def command(method_files: tuple[str, ...], method_modules: tuple[str, ...], as_json: bool) -> int:
    load_user_methods(method_files, method_modules)
    rows: list[dict[str, Any]] = [
        {"name": name, "origin": method_origin(name), "description": cls.description,
         "options": [f"--{o.flag}" for o in cls.options]}
        for name, cls in methods().items()]
    problems = plugin_problems()
    if as_json:
        sys.stdout.write(orjson.dumps({"methods": rows, "plugin_problems": problems},
                                      option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        name_w = max(len(r["name"]) for r in rows)
        origin_w = max(len(r["origin"]) for r in rows)
        print(f"{'name':<{name_w}}  {'from':<{origin_w}}  description")
        for r in rows:
            options = f" (options: {', '.join(r['options'])})" if r["options"] else ""
            print(terminal(f"{r['name']:<{name_w}}  {r['origin']:<{origin_w}}  {r['description']}{options}"))
    for problem in problems:
        print(f"warning: {terminal(problem)}", file=sys.stderr)
    return 0
