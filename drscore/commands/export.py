"""``drscore export DIR --format csv|parquet``: a run's score rows as one flat table."""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click

from drscore.commands._framework import Command, argument, fail, option

from drscore.engine.runtime.escape import terminal


@click.command("export", cls=Command,
               short_help="write a run's rows (or verdicts) as one flat CSV or Parquet table",
               help="One row per (task, agent, method): score, status, coverage, errors, "
                    "cost, tokens and every subscore as a sub.<name> column. Parquet needs "
                    "pyarrow: pip install 'drscore[pandas]'. Exit status: 0; 1 when the run directory "
                    "cannot be read or the file cannot be written; 2 usage.")
@argument("dir", type=click.Path(path_type=Path), metavar="RUN_DIR", help="run directory (drscore run --out)")
@option("--format", type=click.Choice(("csv", "parquet")), default="csv", help="file format (default csv)")
@option("--table", type=click.Choice(("rows", "verdicts", "ledger", "pacing")), default="rows",
        help="rows: one per scored report and method (default); verdicts: one per judge call of the last "
             "invocation; ledger: one per paid call, every invocation (ledger.jsonl); pacing: each 429 and "
             "learned pace, every invocation (pacing.jsonl)")
@option("--out", type=click.Path(path_type=Path), metavar="FILE",
        help="file to write (default: RUN_DIR/<table>.<format>, e.g. RUN_DIR/rows.csv)")
def command(**opts: Any) -> int:
    return _main(SimpleNamespace(**opts))


def _main(args: SimpleNamespace) -> int:
    from drscore.engine.runtime.rundir_read import RunDirError
    from drscore.results import load_run

    try:
        run = load_run(args.dir)
    except RunDirError as exc:
        fail(str(exc))
    out = args.out or args.dir / f"{args.table}.{args.format}"
    try:  # chunk by chunk: a million-row run is never held whole
        n = run.export_table(out, table=args.table, fmt=args.format)
    except ImportError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}")
    for problem in run.problems[:20]:
        print(f"warning: {terminal(problem)} (line skipped)", file=sys.stderr)
    print(f"{out} ({n} rows)")
    return 0
