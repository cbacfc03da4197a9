"""``drscore merge DIR... --out DIR``: join the run directories of ``run --shard K/N``."""
from __future__ import annotations

import argparse
import sys

import orjson

from drscore.api import add_decisions, method_instances, task_bootstrap_interval
from drscore.engine.runtime.rundir_merge import MergeError, merge_runs
from drscore.engine.runtime.rundir_read import RunDirError, read_run_dir
from drscore.render import leaderboard_text


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``merge`` sub-command."""
    p = subparsers.add_parser(
        "merge", help="join shard run directories (run --shard K/N) into one",
        description="Join the run directories of `drscore run --shard K/N` (every part 1..N, one configuration) "
                    "into one run directory: rows, verdicts and a summary with the statistics of a single run. "
                    "Exit status: 0 joined; 1 the shards cannot be joined (the reason is printed).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=("examples:\n"
                "  drscore run --methods race --reports r.jsonl --redis redis://10.0.0.5:6379/0 --shard 2/3 "
                "--out runs/part2\n"
                "  drscore merge runs/part1 runs/part2 runs/part3 --out runs/all"))
    p.add_argument("dirs", nargs="+", metavar="DIR", help="shard run directories")
    p.add_argument("--out", required=True, metavar="DIR", help="the merged run directory (created)")
    p.add_argument("--json", action="store_true", help="print the merged summary as JSON")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    try:
        config = read_run_dir(args.dirs[0]).config
        methods = method_instances(config.get("methods") or [], config.get("method_options") or {})
        summary = merge_runs(args.dirs, args.out, interval=task_bootstrap_interval, methods=methods,
                             extend=lambda s, rows: add_decisions(s, rows, samples=int(config.get("samples") or 1)))
    except (MergeError, RunDirError) as e:
        print(f"drscore merge: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(leaderboard_text(summary))
        print(f"\n  merged {len(summary['merged_from'])} shards into {args.out}")
    return 0
