"""``drscore report DIR``: leaderboard.md, leaderboard.csv, a self-contained
report.html and, beside it, viewer.html (every row, its judge calls and verdicts) for a
run directory (see ``docs/reports.md``)."""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click

from drscore.commands._framework import Command, argument, fail, option, usage_error

from drscore.engine.runtime.escape import terminal
from drscore.engine.stats.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES

# matplotlib (engine.report_html -> engine.charts) is imported inside run_report: every
# drscore invocation imports all command modules, and only this command draws.


@click.command("report", cls=Command,
               short_help="write leaderboard.md, leaderboard.csv, report.html and viewer.html for a run",
               help="Summarise a run directory: per-method leaderboards with bootstrap "
                    "confidence intervals over tasks (Markdown and CSV), one HTML page "
                    "with charts, and a viewer page to open any (task, agent, method) row "
                    "with its judge calls and verdicts. Both pages open offline. Without the "
                    "report extra (matplotlib) everything is written except the charts, and a "
                    "warning says so. Exit status: 0; 1 when the run directory cannot be read "
                    "or written; 2 usage.")
@argument("dir", type=click.Path(path_type=Path), metavar="RUN_DIR", help="run directory (drscore run --out)")
@option("--out", type=click.Path(path_type=Path), metavar="OUTDIR", help="where to write the files (default: RUN_DIR)")
@option("--resamples", type=int, default=DEFAULT_RESAMPLES,
        help=f"bootstrap resamples for the intervals (default {DEFAULT_RESAMPLES})")
@option("--seed", type=int, default=0, help="bootstrap seed (default 0)")
@option("--confidence", type=float, default=DEFAULT_CONFIDENCE, help=f"interval level (default {DEFAULT_CONFIDENCE})")
@option("--redundancy-task", metavar="TASK_ID", help="task of the report whose paragraph matrix to draw "
        "(default: the report with the most scored pairs)")
@option("--redundancy-agent", metavar="AGENT", help="agent of the report whose paragraph matrix to draw")
@option("--title", help="page title (default: the run directory)")
@option("--no-viewer", is_flag=True, help="do not write viewer.html (and do not link to it from report.html)")
def command(**opts: Any) -> int:
    return run_report(SimpleNamespace(**opts))


def run_report(args: SimpleNamespace) -> int:
    """Entry point of ``drscore report``; returns the exit code."""
    from drscore.engine.reporting.html import (
        CHARTS_MISSING,
        leaderboard,
        leaderboard_csv,
        leaderboard_markdown,
        render_html,
    )
    from drscore.engine.reporting.tables import RedundancyPicker, slim_row
    from drscore.engine.reporting.viewer import MAX_VIEWER_ROWS, render_viewer, render_viewer_pointer
    from drscore.engine.runtime.models import ScoreRow
    from drscore.engine.runtime.rundir_read import RunDirError, iter_verdicts, read_run_dir
    from drscore.engine.stats.paired import decide

    if args.resamples < 1:
        usage_error("--resamples must be >= 1")
    if not 0 < args.confidence < 1:
        usage_error("--confidence must be between 0 and 1 (e.g. 0.95)")
    # One pass over scores.jsonl: each row is seen once for the redundancy matrix, then
    # kept without its bulky details (the page draws summaries; `drscore view` has rows).
    picker = RedundancyPicker(args.redundancy_task, args.redundancy_agent)

    def each(row: ScoreRow) -> ScoreRow:
        picker.see(row)
        return slim_row(row)

    try:
        run = read_run_dir(args.dir, each=each)
    except RunDirError as exc:
        return _fail(str(exc))
    note = run.unfinished_note()
    if note:
        print(f"warning: {args.dir}: {note}", file=sys.stderr)
    for problem in run.problems[:20]:
        print(f"warning: {terminal(problem)} (line skipped)", file=sys.stderr)
    if len(run.problems) > 20:
        print(f"warning: ... and {len(run.problems) - 20} more bad lines", file=sys.stderr)

    redundancy = picker.row
    if redundancy is None and (args.redundancy_task or args.redundancy_agent):
        return _fail(f"no row with paragraph pairs for task {args.redundancy_task!r}, "
                     f"agent {args.redundancy_agent!r} in {args.dir}")
    board = leaderboard(run.scores, resamples=args.resamples, seed=args.seed,
                        confidence=args.confidence)
    # once, for the three files: the same paired comparisons everywhere
    decisions = decide(run.scores, resamples=args.resamples, seed=args.seed, confidence=args.confidence)
    out = args.out or args.dir
    try:
        out.mkdir(parents=True, exist_ok=True)
        files = {
            "leaderboard.md": leaderboard_markdown(run, board, confidence=args.confidence,
                                                   resamples=args.resamples, seed=args.seed, decisions=decisions),
            "leaderboard.csv": leaderboard_csv(board, decisions),
            "report.html": render_html(run, board, redundancy_row=redundancy,
                                       confidence=args.confidence, resamples=args.resamples,
                                       seed=args.seed, title=args.title,
                                       viewer=None if args.no_viewer else "viewer.html", decisions=decisions),
        }
        viewer_title = args.title and f"{args.title}: viewer"
        if not args.no_viewer and len(run.scores) > MAX_VIEWER_ROWS:
            files["viewer.html"] = render_viewer_pointer(str(args.dir), len(run.scores), title=viewer_title)
        elif not args.no_viewer:  # small enough for one page: its rows with their details
            verdicts_path = args.dir / "verdicts.jsonl"
            verdicts = iter_verdicts(verdicts_path) if verdicts_path.is_file() else iter(())
            files["viewer.html"] = render_viewer(read_run_dir(args.dir), verdicts, title=viewer_title)
        for name, text in files.items():
            (out / name).write_text(text, encoding="utf-8")
    except OSError as exc:
        return _fail(f"cannot write to {out}: {exc.strerror or exc}")
    for name in files:
        print(out / name)
    if CHARTS_MISSING:
        print(f"warning: report.html has no charts: {CHARTS_MISSING}", file=sys.stderr)
    return 0


def _fail(message: str) -> int:
    fail(message)
