"""``drscore export DIR --format csv|parquet``: a run's score rows as one flat table."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from drscore.engine.runtime.escape import terminal


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a run's rows (or verdicts) as one flat CSV or Parquet table",
                       description="One row per (task, agent, method): score, status, coverage, errors, "
                                   "cost, tokens and every subscore as a sub.<name> column. Parquet needs "
                                   "pyarrow: pip install 'drscore[pandas]'.")
    p.add_argument("dir", type=Path, metavar="DIR", help="run directory (drscore run --out)")
    p.add_argument("--format", choices=("csv", "parquet"), default="csv", help="file format (default csv)")
    p.add_argument("--table", choices=("rows", "verdicts"), default="rows",
                   help="rows: one per scored report and method (default); verdicts: one per judge call")
    p.add_argument("--out", type=Path, metavar="FILE",
                   help="file to write (default: DIR/<table>.<format>, e.g. DIR/rows.csv)")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    from drscore.engine.runtime.rundir_read import RunDirError
    from drscore.results import load_run

    try:
        run = load_run(args.dir)
    except RunDirError as exc:
        print(f"drscore export: error: {exc}", file=sys.stderr)
        return 2
    out = args.out or args.dir / f"{args.table}.{args.format}"
    try:  # chunk by chunk: a million-row run is never held whole
        n = run.export_table(out, table=args.table, fmt=args.format)
    except ImportError as exc:
        print(f"drscore export: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"drscore export: error: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    for problem in run.problems[:20]:
        print(f"warning: {terminal(problem)} (line skipped)", file=sys.stderr)
    print(f"{out} ({n} rows)")
    return 0
