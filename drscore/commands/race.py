"""``drscore race``: RACE utilities that need no judge.

``drscore race rescore --criteria C --judgements J [--out FILE]`` re-aggregates judge
outputs stored in DeepResearch Bench's JSON shape (one ``{"id", "judgement"}`` line per
task) and writes the benchmark's ``raw_results.jsonl`` shape (0-1 scale); suite means go
to stderr. Bad lines are reported with file and line; the others are still scored.
"""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any

import click
import orjson

from drscore.commands._framework import Group, fail, option
from drscore.engine.methods.race.criteria import CriteriaError, find_task_criteria, load_criteria
from drscore.engine.methods.race.rescore import aggregate, benchmark_row, parse_judgement_line, suite_means


@click.group("race", cls=Group, help="RACE utilities (re-scoring stored judge outputs).",
             short_help="RACE utilities (re-scoring stored judge outputs)")
def command() -> None:
    """RACE tools that need no judge."""


@command.command("rescore", short_help="recompute RACE scores from stored judge outputs, without calling a judge",
                 help="Re-aggregate judge outputs stored in DeepResearch Bench's JSON shape. "
                      "Output: JSONL like the benchmark's raw_results.jsonl (0-1 scale). Exit status: 0, "
                      "1 when a file cannot be read or some lines were bad (named on stderr).")
@option("--criteria", required=True, metavar="FILE", help="criteria JSONL in DeepResearch Bench's format")
@option("--judgements", required=True, metavar="FILE",
        help='JSONL, one line per task: {"id": <task id>, "judgement": <judge JSON object>}')
@option("--out", metavar="FILE", help="write results here instead of stdout")
@option("--reverse", is_flag=True, help="the judge saw the reference as article 1 (reverse-position variant)")
@option("--details", is_flag=True, help="add absolute scores, match counts and warnings to every line")
def rescore(**opts: Any) -> int:
    return run_rescore(SimpleNamespace(**opts))


def rescore_file(criteria_path: str | Path, judgements_path: str | Path, out: IO[bytes], *,
                 reverse: bool = False, details: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """Score every judgement line, writing one JSON line each to ``out``.

    Returns ``(rows, errors)``; errors name file and line. Raises CriteriaError for an
    unusable criteria file and FileNotFoundError for a missing judgements file.
    """
    table = load_criteria(criteria_path)
    path = Path(judgements_path)
    if not path.is_file():
        raise FileNotFoundError(f"judgements file not found: {path}")
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    seen: set[str] = set()
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            origin = f"{path}:{lineno}"
            try:
                line = parse_judgement_line(raw, origin)
            except ValueError as e:
                errors.append(str(e))
                continue
            key = str(line.task_id).strip()
            if key in seen:
                errors.append(f"{origin}: duplicate task id {line.task_id!r}")
                continue
            tc = find_task_criteria(table, key, "")
            if tc is None:
                errors.append(f"{origin}: no criteria for task id {line.task_id!r} in {criteria_path}")
                continue
            seen.add(key)
            agg = aggregate(line.judgement, tc, reverse=reverse)
            row = benchmark_row(line.task_id, tc.prompt, agg)
            if details:
                row["details"] = {
                    "pointwise": agg.pointwise, "target": agg.target_dims, "reference": agg.reference_dims,
                    "target_total": agg.target_total, "reference_total": agg.reference_total,
                    "judged": agg.judged, "matched": agg.matched, "expected": agg.expected, "matches": agg.matches,
                    "warnings": agg.warnings,
                }
            rows.append(row)
            out.write(orjson.dumps(row) + b"\n")
    return rows, errors


def run_rescore(args: SimpleNamespace) -> int:
    try:
        if args.out:
            with open(args.out, "wb") as out:
                rows, errors = rescore_file(args.criteria, args.judgements, out,
                                            reverse=args.reverse, details=args.details)
        else:
            rows, errors = rescore_file(args.criteria, args.judgements, sys.stdout.buffer,
                                        reverse=args.reverse, details=args.details)
            sys.stdout.flush()
    except (CriteriaError, FileNotFoundError) as e:
        fail(str(e))
    for bad in errors:
        print(f"drscore: error: {bad}", file=sys.stderr)
    means = suite_means(rows)
    summary = " ".join(f"{k}={v:.4f}" for k, v in means.items())
    print(f"rescored {len(rows)} task(s), {len(errors)} bad line(s). {summary}".rstrip(), file=sys.stderr)
    return 1 if errors else 0
