"""``drscore agree``: how well a method's scores agree with human judges.

Reads a human scores JSONL and a run directory, joins them on (task_id, agent) and
prints every METHODS.md section 6 figure with a seeded bootstrap interval over tasks
(see ``docs/agreement.md`` for the exact definitions).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import click

from drscore.commands._framework import Command, fail, option, usage_error
from drscore.engine.stats.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES

if TYPE_CHECKING:
    from drscore.engine.stats.agreement import AgreementResult
    from drscore.engine.runtime.models import InputError
    from drscore.engine.runtime.rundir_read import HumanScore

# scipy (engine.agreement) is imported inside run_agree: every drscore invocation
# imports all command modules, and only this command needs it.

# Human rows without a dimension (or with this one) are the overall score.
OVERALL = "overall"
_MAX_SHOWN_ERRORS = 20
LABELS = {
    "par": "PAR (pairwise agreement, method vs mean human)",
    "human_par": "human PAR (rater vs rater)",
    "par_raters": "PAR (method vs single raters)",
    "opc": "OPC (Pearson of per-agent means)",
    "fap": "FAP (filtered avg per-task Pearson)",
    "fas": "FAS (filtered avg per-task Spearman)",
    "tasks_kept": "tasks kept (ICC >= 0 or undefined)",
    "spearman": "Spearman rho, all items",
    "pearson": "Pearson r, all items",
    "kendall": "Kendall tau-b, all items",
    "mad": "MAD |method - human|",
    "exact_match": "exact-match rate of rankings",
}
ORDER = ("par", "human_par", "par_raters", "opc", "fap", "fas", "tasks_kept", "spearman",
         "pearson", "kendall", "mad", "exact_match")


@click.command("agree", cls=Command,
               short_help="agreement of a method's scores with human scores (PAR, OPC, FAP, FAS, ...)",
               help="Join a run's scores with human scores on (task_id, agent) and report "
                    "pairwise agreement, correlations, ICC-filtered averages, MAD and "
                    "exact-match rate, each with a bootstrap CI over tasks. Human file: "
                    "JSONL with task_id, agent, rater, score and optional dimension. Exit status: 0; "
                    "1 when a file is missing or the data cannot be joined; 2 usage.")
@option("--human", required=True, type=click.Path(path_type=Path), metavar="FILE",
        help="human scores JSONL (task_id, agent, rater, score[, dimension])")
@option("--run", "--run-dir", "run", required=True, type=click.Path(path_type=Path), metavar="DIR",
        help="run directory written by `drscore run --out` (--run-dir is the same option)")
@option("--method", help="method to evaluate (required if the run has several)")
@option("--dimension", help="use human rows with this dimension and the method's subscore of "
                            "the same name (default: the overall score)")
@option("--json", is_flag=True, help="print one JSON object")
@option("--per-task", is_flag=True, help="also print per-task figures")
@option("--resamples", type=int, default=DEFAULT_RESAMPLES, help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})")
@option("--seed", type=int, default=0, help="bootstrap seed (default 0)")
@option("--confidence", type=float, default=DEFAULT_CONFIDENCE, help=f"interval level (default {DEFAULT_CONFIDENCE})")
@option("--scale-method", type=float, default=1.0, metavar="F",
        help="multiply method scores by F before comparing (MAD needs one scale)")
@option("--scale-human", type=float, default=1.0, metavar="F", help="multiply human scores by F before comparing")
@option("--tie-margin", type=float, default=0.0, metavar="D",
        help="score differences <= D count as ties in PAR (default 0)")
def command(**opts: Any) -> int:
    return run_agree(SimpleNamespace(**opts))


def run_agree(args: SimpleNamespace) -> int:
    """Entry point of ``drscore agree``; returns the exit code."""
    from drscore.engine.stats.agreement import agreement, align
    from drscore.engine.runtime.rundir_read import RunDirError, method_scores, read_human_scores, read_run_dir

    problem = _check_args(args)
    if problem:
        usage_error(problem)
    if not args.human.is_file():
        return _fail(f"{args.human}: human scores file not found")
    try:
        run = read_run_dir(args.run)
        human, bad_lines = read_human_scores(args.human)
    except RunDirError as exc:
        return _fail(str(exc))
    _show_problems("human scores", bad_lines)
    _show_problems("scores.jsonl", run.problems)

    methods = run.methods()
    if not methods:
        return _fail(f"{args.run}/scores.jsonl has no score rows")
    method = args.method
    if method is None:
        if len(methods) > 1:
            return _fail(f"the run has several methods ({', '.join(methods)}); pick one with --method")
        method = methods[0]
    elif method not in methods:
        return _fail(f"method {method!r} is not in {args.run} (it has: {', '.join(methods)})")

    selected, why = _select_dimension(human, args.dimension)
    if why:
        return _fail(f"{args.human}: {why}")
    scores = method_scores(run.scores, method, args.dimension)
    if args.dimension and all(v is None for v in scores.values()):
        subs = sorted({k for r in run.scores if r.method == method for k in r.subscores})
        return _fail(f"method {method!r} has no subscore {args.dimension!r} "
                     f"(it has: {', '.join(subs) or 'none'})")

    alignment = align(scores, selected, scale_method=args.scale_method,
                      scale_human=args.scale_human)
    if not alignment.tasks:
        return _fail(_no_overlap_message(scores, selected))
    result = agreement(alignment, resamples=args.resamples, seed=args.seed,
                       confidence=args.confidence, tie_margin=args.tie_margin)
    if args.json:
        out = result.to_json()
        out.update(method=method, dimension=args.dimension, bad_lines=len(bad_lines),
                   scale_method=args.scale_method, scale_human=args.scale_human,
                   tie_margin=args.tie_margin)
        print(json.dumps(out, ensure_ascii=False))
    else:
        print(_text_report(result, method, args, len(bad_lines)))
    return 0


def _check_args(args: SimpleNamespace) -> str | None:
    if args.resamples < 1:
        return "--resamples must be >= 1"
    if not 0 < args.confidence < 1:
        return "--confidence must be between 0 and 1 (e.g. 0.95)"
    if args.scale_method <= 0 or args.scale_human <= 0:
        return "--scale-method and --scale-human must be positive"
    if args.tie_margin < 0:
        return "--tie-margin must be >= 0"
    return None


def _select_dimension(human: list[HumanScore], dimension: str | None
                      ) -> tuple[list[HumanScore], str | None]:
    """Human rows for ``dimension``. The overall score (``dimension`` None, or the
    method subscore "overall") matches rows without a dimension or with "overall"."""
    if dimension is None or dimension == OVERALL:
        rows = [h for h in human if h.dimension in (None, OVERALL)]
    else:
        rows = [h for h in human if h.dimension == dimension]
    if rows:
        return rows, None
    dims = sorted({h.dimension or OVERALL for h in human})
    wanted = dimension or "the overall score (no dimension)"
    return [], f"no human rows for {wanted}; dimensions present: {', '.join(dims) or 'none'}"


def _no_overlap_message(scores: dict[tuple[str, str], Any], human: list[HumanScore]) -> str:
    scored = sorted(k for k, v in scores.items() if v is not None)
    rated = sorted({(h.task_id, h.agent) for h in human})
    example_run = scored[0] if scored else None
    example_human = rated[0] if rated else None
    return ("no (task_id, agent) item has both a method score and a human score "
            f"(run example: {example_run}, human example: {example_human}); check that "
            "task ids and agent names match")


def _show_problems(what: str, problems: list[InputError]) -> None:
    for p in problems[:_MAX_SHOWN_ERRORS]:
        print(f"warning: {p} (line skipped)", file=sys.stderr)
    if len(problems) > _MAX_SHOWN_ERRORS:
        print(f"warning: ... and {len(problems) - _MAX_SHOWN_ERRORS} more bad lines in {what}",
              file=sys.stderr)


def _fail(message: str) -> int:
    fail(message)


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _text_report(result: AgreementResult, method: str, args: SimpleNamespace,
                 bad_lines: int) -> str:
    pct = f"{result.confidence * 100:g}%"
    head = (f"method {method}" + (f", dimension {args.dimension}" if args.dimension else "")
            + f": {result.n_items} items, {result.n_tasks} tasks, {result.n_agents} agents, "
              f"{result.n_raters} raters")
    lines = [head, f"{pct} CI: percentile bootstrap over tasks ({result.resamples} resamples, "
                   f"seed {result.seed})", ""]
    width = max(len(v) for v in LABELS.values())
    lines.append(f"{'figure':<{width}}  {'value':>9}  {pct + ' CI':<21}")
    for key in ORDER:
        value = result.figures.get(key)
        ci = result.intervals.get(key)
        shown = (str(int(value)) if key == "tasks_kept" and value is not None else _num(value))
        interval = (f"[{ci.low:g}, {ci.high:g}]" if key == "tasks_kept" else
                    f"[{_num(ci.low)}, {_num(ci.high)}]") if ci else "n/a"
        lines.append(f"{LABELS[key]:<{width}}  {shown:>9}  {interval:<21}")
    if bad_lines:
        lines.append(f"\n{bad_lines} bad line(s) in {args.human} were skipped")
    if result.notes:
        lines.append("")
        lines += [f"note: {n}" for n in result.notes]
    if args.per_task:
        lines += ["", f"{'task':<12} {'items':>5} {'raters':>6} {'PAR':>7} {'ICC':>7} "
                      f"{'kept':>4} {'pearson':>8} {'spearman':>8} {'exact':>5}"]
        for t in result.per_task:
            lines.append(
                f"{t.task_id[:12]:<12} {t.items:>5} {t.raters:>6} {_short(t.par):>7} "
                f"{_short(t.icc):>7} {'yes' if t.kept else 'no':>4} {_short(t.pearson):>8} "
                f"{_short(t.spearman):>8} "
                f"{'-' if t.exact_match is None else ('yes' if t.exact_match else 'no'):>5}")
    return "\n".join(lines)


def _short(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
