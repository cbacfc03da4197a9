"""``drscore run``: score reports with one or more methods."""
from __future__ import annotations

import argparse
import sys

import orjson

from drscore.api import Run, RunConfig, methods
from drscore.commands._common import add_judge_args, judge_config_from_args, run_async
from drscore.render import dry_run_text, leaderboard_text
from drscore.engine.runtime.io import FORMATS, count_lines
from drscore.engine.runtime.progress import Progress, progress_enabled

EXIT_INCOMPLETE = 3  # finished, but some inputs were skipped or some items failed


def register(sub: argparse._SubParsersAction) -> None:
    available = methods()
    p = sub.add_parser("run", help="score reports", description=(
        "Score reports with the given methods. Without --judge-url the offline judge is used. "
        f"Methods: {', '.join(available)}. Exit status: 0 all scored (items a method does not apply to, "
        f"status 'skipped', included); {EXIT_INCOMPLETE} finished with skipped inputs or failed items; 1 error."))
    p.add_argument("--methods", required=True, help="comma-separated method names")
    p.add_argument("--reports", required=True, action="append", metavar="FILE",
                   help="reports JSONL (repeat for several agents)")
    p.add_argument("--tasks", metavar="FILE", help="tasks JSONL (optional when reports carry their prompt)")
    p.add_argument("--format", choices=FORMATS, default="auto", help="report format (default: detected per line)")
    p.add_argument("--agent", help="agent name for formats without one (default: from the file name)")
    p.add_argument("--out", metavar="DIR", help="run directory (config, verdicts, scores, summary); the same "
                   "command on the same DIR resumes, one process at a time")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a run directory that holds a different run's configuration")
    p.add_argument("--dry-run", action="store_true", help="print calls, tokens and cost; spend nothing")
    p.add_argument("--seed", type=int, default=0, help="seed for every sampled step (default 0)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    f = p.add_argument_group("pages (methods that read cited pages)")
    f.add_argument("--allow-private-fetch", action="store_true",
                   help="DANGEROUS: allow fetching loopback/private addresses (local testing only)")
    f.add_argument("--offline-pages", action="store_true", help="use only cached/imported pages, never the network")
    f.add_argument("--fetch-concurrency", type=int, default=32)
    add_judge_args(p)
    seen: set[str] = set()
    for cls in available.values():
        opts = [o for o in cls.options if o.flag not in seen]
        if not opts:
            continue
        g = p.add_argument_group(f"method {cls.name}")
        for o in opts:
            seen.add(o.flag)
            kwargs: dict = {"help": f"{o.help} (default: {o.default})", "default": None}
            if o.type == "bool":
                kwargs["action"] = argparse.BooleanOptionalAction
            else:
                kwargs["type"] = {"int": int, "float": float}.get(o.type, str)
                if o.choices:
                    kwargs["choices"] = o.choices
            g.add_argument(f"--{o.flag}", **kwargs)
    p.set_defaults(func=_main)


def _config(args: argparse.Namespace) -> RunConfig:
    names = [m.strip() for m in args.methods.split(",") if m.strip()]
    available = methods()
    unknown = [n for n in names if n not in available]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; available: {', '.join(available)}")
    options = {}
    for cls in available.values():
        for o in cls.options:
            dest = o.flag.replace("-", "_")
            if getattr(args, dest, None) is not None:
                options[dest] = getattr(args, dest)
    return RunConfig(methods=names, reports=args.reports, tasks=args.tasks, format=args.format, agent=args.agent,
                     out=args.out, judge=judge_config_from_args(args), seed=args.seed, dry_run=args.dry_run,
                     method_options=options, allow_private_fetch=args.allow_private_fetch,
                     offline_pages=args.offline_pages, fetch_concurrency=args.fetch_concurrency,
                     overwrite=args.overwrite)


def _main(args: argparse.Namespace) -> int:
    config = _config(args)
    if config.allow_private_fetch:
        print("WARNING: --allow-private-fetch: cited URLs may reach loopback and private addresses. "
              "Use only for local testing with trusted reports.", file=sys.stderr)
    summary = run_async(_run(config))
    if args.json:
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif config.dry_run:
        print(dry_run_text(summary, config.judge.price_as or config.judge.model))
    else:
        print(leaderboard_text(summary))
        if config.out:
            print(f"\n  run directory: {config.out}")
    errors = summary.get("input_errors", [])
    for e in errors[:20]:
        print(f"skipped: {e}", file=sys.stderr)
    if len(errors) > 20:
        print(f"... and {len(errors) - 20} more skipped inputs (see summary.json)", file=sys.stderr)
    t = summary["totals"]
    return EXIT_INCOMPLETE if t["inputs_skipped"] or t["items_failed"] else 0


async def _run(config: RunConfig) -> dict:
    async with Run(config) as run:
        total = sum(count_lines(p) for p in config.reports) * len(config.methods)
        with Progress(run.runner.snapshot, total, progress_enabled()):
            async for _ in run.rows():
                pass
        return run.summary
