"""``drscore tasks``: tools over a task file rather than over reports.

* ``tasks rank``: Elo ranking of candidate tasks by pairwise judge preference
  (start 1200, K 32, R rounds of random disjoint pairs, soft outcomes from the judge's
  confidence, seeded); prints the top k as JSONL (a valid task file).
* ``tasks leakage``: continuation-based leakage check (string / TF-IDF / overlap
  composite, leaked above the threshold); prints one JSON line per task.
* ``tasks domains``: per-domain means of a run's Rigorous Bench rows (domain = the
  first two characters of the task uid).

Judge flags are the same as ``drscore run``'s; without ``--judge-url`` the offline
judge answers (a lexical baseline). Bad task lines are reported with file and line on
stderr and skipped; the totals (calls, cost) go to stderr too.
"""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click

import msgspec
import orjson

from drscore.commands._common import judge_options, open_judge_session, run_async
from drscore.commands._framework import Group, argument, option
from drscore.engine.methods.tasks import elo, leakage
from drscore.engine.methods.rigorous.drift import domain_breakdown
from drscore.engine.runtime.io import load_tasks
from drscore.engine.runtime.models import InputError, Task
from drscore.engine.runtime.rundir_read import RunDirError, read_run_dir
from drscore.engine.methods.tasks.tools import check_leakage, rank_tasks

# Same meaning as for ``drscore run``: finished, but some inputs or judge calls failed.
EXIT_INCOMPLETE = 3


@click.group("tasks", cls=Group, short_help="task tools: Elo ranking, leakage check, per-domain means",
             help="Task tools: Elo ranking, leakage check, per-domain means.")
def command() -> None:
    """Tools over a task file or a run's task groups."""


@command.command("rank", short_help="rank candidate tasks by Elo over pairwise judge preferences",
                 help="Elo ranking of tasks (DeepResearch Arena): every task starts at "
                      f"{elo.START_RATING:g}; each round pairs tasks at random; the judge picks the better "
                      "task with a confidence in [0.5, 1], used as a soft outcome. Output: JSONL, best "
                      "first, one task per line (also a valid --tasks file).")
@option("--tasks", required=True, metavar="FILE", help="tasks JSONL ({task_id, prompt} or {id, prompt})")
@option("--rounds", type=int, default=elo.DEFAULT_ROUNDS,
        help=f"rounds of random disjoint pairs (default {elo.DEFAULT_ROUNDS})")
@option("--top-k", type=int, metavar="N", help="output only the N best tasks (default: all)")
@option("--k-factor", type=float, default=elo.K_FACTOR, help=f"Elo K factor (default {elo.K_FACTOR:g})")
@option("--seed", type=int, default=0, help="seed for pairings and A/B order (default 0)")
@option("--out", metavar="FILE", help="also write the JSONL here")
@option("--verdicts", metavar="FILE", help="append every judge verdict (JSONL) here")
@judge_options
def rank(**opts: Any) -> int:
    return _rank(SimpleNamespace(**opts))


@command.command("leakage", short_help="continuation-based leakage check of task texts",
                 help="Split each task at the punctuation mark nearest its middle, ask the "
                      "judge model to continue the first half, and compare with the true second half: "
                      "composite = 0.4 LCS string + 0.4 TF-IDF cosine + 0.2 word overlap; leaked when "
                      "composite > threshold. With the offline judge this is only a baseline (it never "
                      "reproduces a text).")
@option("--tasks", required=True, metavar="FILE", help="tasks JSONL")
@option("--threshold", type=float, default=leakage.THRESHOLD,
        help=f"leaked when the composite exceeds this (default {leakage.THRESHOLD})")
@option("--out", metavar="FILE", help="also write the JSONL here")
@option("--verdicts", metavar="FILE", help="append every judge verdict (JSONL) here")
@judge_options
def leakage_command(**opts: Any) -> int:
    return _leakage(SimpleNamespace(**opts))


@command.command("domains", short_help="per-domain means of a run's scores (domain = the task uid's first "
                 "two characters)",
                 help="Per-domain means of a run's rows (domain = the first two characters of the task uid, as "
                      "Rigorous Bench names its tasks). Without --method: the run's only method, or rigorous "
                      "when the run has it.")
@argument("run_dir", metavar="RUN_DIR", help="run directory written by `drscore run --out`")
@option("--method", help="method whose rows to group (default: the run's only method, else rigorous)")
@option("--agent", help="only this agent's rows (default: one table per agent)")
def domains(**opts: Any) -> int:
    return _domains(SimpleNamespace(**opts))


def _load(path: str) -> tuple[list[Task], list[InputError]]:
    errors: list[InputError] = []
    tasks = list(load_tasks(path, errors).values())
    for e in errors:
        print(f"drscore: skipped {e}", file=sys.stderr)
    return tasks, errors


def _emit(rows: list[Any], out: str | None) -> None:
    data = b"".join(msgspec.json.encode(r) + b"\n" for r in rows)
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    if out:
        Path(out).write_bytes(data)


def _totals(totals: dict[str, Any], extra: dict[str, Any]) -> None:
    print(orjson.dumps({**extra, **totals}).decode(), file=sys.stderr)


def _rank(args: SimpleNamespace) -> int:
    if args.rounds < 0:
        raise ValueError("--rounds must be >= 0")
    if args.top_k is not None and args.top_k < 1:
        raise ValueError("--top-k must be >= 1")
    tasks, errors = _load(args.tasks)
    if len(tasks) < 2:
        raise ValueError(f"{args.tasks}: need at least 2 valid tasks to rank, found {len(tasks)}")

    async def go() -> tuple[Any, dict[str, Any]]:
        async with open_judge_session(args, purpose="tasks.rank") as judge:
            result = await rank_tasks(judge, tasks, rounds=args.rounds, k=args.k_factor, seed=args.seed)
            return result, judge.totals()

    result, totals = run_async(go())
    rows = result.rows[: args.top_k] if args.top_k else result.rows
    _emit(rows, args.out)
    for e in result.errors:
        print(f"drscore: comparison failed: {e}", file=sys.stderr)
    _totals(totals, {"tasks": len(tasks), "comparisons": len(result.outcomes), "failed": len(result.errors)})
    return EXIT_INCOMPLETE if errors or result.errors else 0


def _leakage(args: SimpleNamespace) -> int:
    if not 0.0 <= args.threshold <= 1.0:
        raise ValueError("--threshold must be between 0 and 1")
    tasks, errors = _load(args.tasks)
    if not tasks:
        raise ValueError(f"{args.tasks}: no valid tasks")

    async def go() -> tuple[Any, dict[str, Any]]:
        async with open_judge_session(args, purpose="tasks.leakage") as judge:
            return await check_leakage(judge, tasks, threshold=args.threshold), judge.totals()

    rows, totals = run_async(go())
    _emit(rows, args.out)
    failed = sum(r.status == "failed" for r in rows)
    _totals(totals, {"tasks": len(rows), "leaked": sum(bool(r.leaked) for r in rows), "failed": failed,
                     "skipped": sum(r.status == "skipped" for r in rows)})
    return EXIT_INCOMPLETE if errors or failed else 0


def _domains(args: SimpleNamespace) -> int:
    try:
        run = read_run_dir(args.run_dir)
    except RunDirError as e:
        raise ValueError(str(e)) from None
    for p in run.problems:
        print(f"drscore: skipped {p}", file=sys.stderr)
    method = args.method
    if method is None:
        present = sorted({r.method for r in run.scores})
        if len(present) == 1 or "rigorous" not in present:
            if len(present) != 1:
                raise ValueError(f"{args.run_dir}: the run has several methods ({', '.join(present) or 'none'}); "
                                 "pick one with --method")
            method = present[0]
        else:
            method = "rigorous"
    args.method = method
    rows = [r for r in run.scores if r.method == args.method and (args.agent is None or r.agent == args.agent)]
    if not rows:
        raise ValueError(f"{args.run_dir}: no rows for method {args.method!r}"
                         + (f" and agent {args.agent!r}" if args.agent else ""))
    by_agent: dict[str, list[Any]] = {}
    for r in rows:
        by_agent.setdefault(r.agent, []).append(r)
    table = {agent: domain_breakdown(agent_rows) for agent, agent_rows in sorted(by_agent.items())}
    sys.stdout.write(orjson.dumps(table, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0
