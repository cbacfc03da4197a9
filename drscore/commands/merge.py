"""``drscore merge DIR... --out DIR``: join the run directories of ``run --shard K/N``."""
from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import click
import orjson

from drscore.commands._framework import Command, argument, fail, option

from drscore.api import add_decisions, load_user_methods, method_instances, task_bootstrap_interval
from drscore.engine.runtime.rundir_merge import MergeError, merge_runs
from drscore.engine.runtime.rundir_read import RunDirError, read_run_dir
from drscore.render import leaderboard_text


@click.command("merge", cls=Command, short_help="join shard run directories (run --shard K/N) into one",
               help="Join the run directories of `drscore run --shard K/N` (every part 1..N, one configuration) "
                    "into one run directory: rows, verdicts and a summary with the statistics of a single run. "
                    "Exit status: 0 joined; 1 the shards cannot be joined (the reason is printed); 2 usage.",
               examples=["drscore run --methods quality --reports reports.a.jsonl --shard 1/2 --out runs/part1",
                         "drscore run --methods quality --reports reports.a.jsonl --shard 2/2 --out runs/part2",
                         "drscore merge runs/part1 runs/part2 --out runs/all"])
@argument("dirs", nargs=-1, required=True, metavar="RUN_DIR...", help="shard run directories")
@option("--out", required=True, metavar="RUN_DIR", help="the merged run directory (created)")
@option("--json", is_flag=True, help="print the merged summary as JSON")
def command(**opts: Any) -> int:
    return _main(SimpleNamespace(**opts))


def _main(args: SimpleNamespace) -> int:
    try:
        config = read_run_dir(args.dirs[0]).config
        load_user_methods(config.get("method_files") or [], config.get("method_modules") or [])
        methods = method_instances(config.get("methods") or [], config.get("method_options") or {})
        summary = merge_runs(list(args.dirs), args.out, interval=task_bootstrap_interval, methods=methods,
                             extend=lambda s, rows: add_decisions(s, rows, samples=int(config.get("samples") or 1)))
    except (MergeError, RunDirError) as e:
        fail(str(e))
    if args.json:
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(leaderboard_text(summary))
        print(f"\n  merged {len(summary['merged_from'])} shards into {args.out}")
    return 0
