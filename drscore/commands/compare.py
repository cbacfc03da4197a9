"""``drscore compare DIR_A DIR_B``: per method and agent, how scores moved between two
runs, with a paired bootstrap over the tasks both runs scored."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click
import msgspec

from drscore.commands._framework import Command, argument, fail, option, usage_error

from drscore.engine.runtime.escape import terminal
from drscore.engine.stats.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, paired_bootstrap
from drscore.engine.runtime.rundir_read import RunDir, RunDirError, natural_key, read_run_dir


class Delta(msgspec.Struct, kw_only=True):
    """One (method, agent): mean in A and B over shared tasks and the paired test."""

    method: str
    agent: str
    tasks: int  # tasks scored in both runs
    only_a: int  # tasks scored only in A (not used)
    only_b: int  # tasks scored only in B (not used)
    mean_a: float | None
    mean_b: float | None
    delta: float | None  # mean B - mean A
    ci: list[float] | None
    p_value: float | None
    significant: bool


@click.command("compare", cls=Command,
               short_help="score deltas between two runs with a paired bootstrap over tasks",
               help="For every method and agent present in both runs, compare mean scores "
                    "over the tasks both runs scored (B - A) with a paired bootstrap over "
                    "tasks; changes whose interval contains 0 are flagged not significant. "
                    "Exit status: 0; 1 when a run directory cannot be read; 2 usage.")
@argument("dir_a", type=click.Path(path_type=Path), metavar="RUN_DIR_A", help="baseline run directory")
@argument("dir_b", type=click.Path(path_type=Path), metavar="RUN_DIR_B", help="new run directory")
@option("--method", multiple=True, help="only this method (repeatable)")
@option("--json", is_flag=True, help="print one JSON object")
@option("--resamples", type=int, default=DEFAULT_RESAMPLES, help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})")
@option("--seed", type=int, default=0, help="bootstrap seed (default 0)")
@option("--confidence", type=float, default=DEFAULT_CONFIDENCE, help=f"interval level (default {DEFAULT_CONFIDENCE})")
def command(**opts: Any) -> int:
    return run_compare(SimpleNamespace(**opts))


def compare_runs(a: RunDir, b: RunDir, *, methods: list[str] | None = None,
                 resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                 confidence: float = DEFAULT_CONFIDENCE) -> list[Delta]:
    """Paired deltas for every (method, agent) that both runs contain."""
    def scores(run: RunDir) -> dict[tuple[str, str], dict[str, float]]:
        out: dict[tuple[str, str], dict[str, float]] = {}
        for row in run.scores:
            if methods and row.method not in methods:
                continue
            slot = out.setdefault((row.method, row.agent), {})
            if row.score is not None and math.isfinite(row.score):
                slot[row.task_id] = row.score
        return out

    sa, sb = scores(a), scores(b)
    deltas = []
    for key in sorted(set(sa) & set(sb)):
        ta, tb = sa[key], sb[key]
        shared = sorted(set(ta) & set(tb), key=natural_key)
        result = paired_bootstrap([ta[t] for t in shared], [tb[t] for t in shared],
                                  resamples=resamples, seed=seed, confidence=confidence)
        deltas.append(Delta(
            method=key[0], agent=key[1], tasks=len(shared),
            only_a=len(set(ta) - set(tb)), only_b=len(set(tb) - set(ta)),
            mean_a=None if not shared else result.mean_a,
            mean_b=None if not shared else result.mean_b,
            delta=None if not shared else result.delta,
            ci=result.ci.as_list() if result.ci else None,
            p_value=result.p_value, significant=result.significant))
    return deltas


def unmatched(a: RunDir, b: RunDir) -> tuple[list[list[str]], list[list[str]]]:
    """(method, agent) pairs found only in A, and only in B."""
    ka = {(r.method, r.agent) for r in a.scores}
    kb = {(r.method, r.agent) for r in b.scores}
    return [list(k) for k in sorted(ka - kb)], [list(k) for k in sorted(kb - ka)]


def config_differences(a: dict[str, Any], b: dict[str, Any], limit: int = 20) -> list[str]:
    """Dotted config keys whose values differ (secrets redacted), at most ``limit``."""
    from drscore.engine.reporting.html import redact  # lazy: report_html pulls in matplotlib

    fa, fb = _flatten(redact(a)), _flatten(redact(b))
    out = []
    for key in sorted(set(fa) | set(fb)):
        if fa.get(key, "<absent>") != fb.get(key, "<absent>"):
            out.append(f"{key}: {fa.get(key, '<absent>')!s:.60} -> {fb.get(key, '<absent>')!s:.60}")
    return out[:limit]


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): value}


def run_compare(args: SimpleNamespace) -> int:
    """Entry point of ``drscore compare``; returns the exit code."""
    if args.resamples < 1:
        usage_error("--resamples must be >= 1")
    if not 0 < args.confidence < 1:
        usage_error("--confidence must be between 0 and 1 (e.g. 0.95)")
    try:
        a = read_run_dir(args.dir_a)
        b = read_run_dir(args.dir_b)
    except RunDirError as exc:
        return _fail(str(exc))
    for run in (a, b):
        note = run.unfinished_note()
        if note:
            print(f"warning: {run.path}: {note}", file=sys.stderr)
        for problem in run.problems[:20]:
            print(f"warning: {terminal(problem)} (line skipped)", file=sys.stderr)
    deltas = compare_runs(a, b, methods=list(args.method) or None, resamples=args.resamples,
                          seed=args.seed, confidence=args.confidence)
    only_a, only_b = unmatched(a, b)
    changed = config_differences(a.config, b.config)
    if args.json:
        print(json.dumps({
            "a": str(args.dir_a), "b": str(args.dir_b),
            "resamples": args.resamples, "seed": args.seed, "confidence": args.confidence,
            "deltas": [msgspec.structs.asdict(d) for d in deltas],
            "only_in_a": only_a, "only_in_b": only_b, "config_changes": changed,
            "state_a": a.state.get("state"), "state_b": b.state.get("state"),
        }, ensure_ascii=False))
        return 0
    print(_text(args, deltas, only_a, only_b, changed, _state_label(a), _state_label(b)))
    if not deltas:
        print("drscore compare: no method and agent in common", file=sys.stderr)
    return 0


def _state_label(run: RunDir) -> str:
    """`` [INTERRUPTED: not finished]`` after an unfinished run's name, else ""."""
    return "" if run.finished else f"  [{run.state.get('state', 'unknown').upper()}: not finished]"


def _text(args: SimpleNamespace, deltas: list[Delta], only_a: list[list[str]],
          only_b: list[list[str]], changed: list[str], state_a: str = "", state_b: str = "") -> str:
    pct = f"{args.confidence * 100:g}%"
    lines = [f"A = {args.dir_a}{state_a}", f"B = {args.dir_b}{state_b}",
             f"delta = mean(B) - mean(A) over tasks scored in both; {pct} CI from a paired "
             f"bootstrap over tasks ({args.resamples} resamples, seed {args.seed})", ""]
    header = (f"{'method':<14} {'agent':<22} {'tasks':>5} {'mean A':>9} {'mean B':>9} "
              f"{'delta':>9}  {pct + ' CI':<21} {'p':>6}  verdict")
    lines += [header, "-" * len(header)]
    for d in deltas:
        ci = f"[{d.ci[0]:+.4f}, {d.ci[1]:+.4f}]" if d.ci else "n/a"
        verdict = ("significant" if d.significant else
                   "no shared tasks" if not d.tasks else "not significant")
        lines.append(
            f"{d.method[:14]:<14} {terminal(d.agent)[:22]:<22} {d.tasks:>5} {_n(d.mean_a):>9} "
            f"{_n(d.mean_b):>9} {_n(d.delta, signed=True):>9}  {ci:<21} "
            f"{_p(d.p_value, args.resamples):>6}  {verdict}")
    for label, keys in (("only in A", only_a), ("only in B", only_b)):
        if keys:
            lines.append(f"{label}: " + ", ".join(f"{m}/{terminal(g)}" for m, g in keys))
    if changed:
        lines += ["", "config changes (A -> B):"] + [f"  {c}" for c in changed]
    return "\n".join(lines)


def _n(value: float | None, digits: int = 4, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _p(value: float | None, resamples: int) -> str:
    """A bootstrap p-value cannot resolve below 1/resamples: print it as a bound."""
    if value is None:
        return "n/a"
    return f"<{1 / resamples:.2g}" if value == 0 else f"{value:.3f}"


def _fail(message: str) -> int:
    fail(message)
