"""``drscore fact``: FACT utilities that need no judge.

``drscore fact rescore FILE [--json]`` reads DeepResearch Bench's stored FACT judgements
(``validated.jsonl``) and prints its figures (citations and valid citations per cited
report, the pooled valid rate) with the aggregation live FACT runs use, plus the paper's
stricter figures under their own names.
"""
from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import click
import orjson

from drscore.commands._framework import Group, argument, option

from drscore.engine.methods.fact.rescore import rescore_validated


@click.group("fact", cls=Group, short_help="FACT utilities (re-scoring stored judgements)",
             help="FACT utilities (re-scoring stored judgements).")
def command() -> None:
    """FACT tools that need no judge."""


@command.command("rescore", short_help="FACT figures from the benchmark's validated.jsonl, without calling a judge",
                 help="Compute DeepResearch Bench's FACT figures (as its utils/stat.py) from its stored "
                      "judgements, with the same aggregation as live FACT runs. Exit status: 0; 3 when some "
                      "lines were skipped; 1 when the file cannot be read.")
@argument("file", help="validated.jsonl written by the benchmark's FACT pipeline")
@option("--json", is_flag=True, help="print the figures as JSON")
def rescore(**opts: Any) -> int:
    return run_rescore(SimpleNamespace(**opts))


def run_rescore(args: SimpleNamespace) -> int:
    res = rescore_validated(args.file)
    for e in res.errors[:20]:
        print(f"skipped: {e}", file=sys.stderr)
    out = {**res.figures, "file": args.file, "lines": res.lines,
           "reports_with_citations": res.reports_with_citations, "urls": res.urls,
           "urls_with_validate_error": res.urls_errored, "bad_lines": len(res.errors)}
    if args.json:
        sys.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        b, p = res.figures["benchmark"], res.figures["paper"]

        def f(x: object) -> str:
            return "-" if x is None else f"{x:.4f}" if isinstance(x, float) else str(x)

        print(f"{args.file}: {res.lines} reports, {res.reports_with_citations} with citations, "
              f"{res.urls} URLs ({res.urls_errored} with a validation error, left out)")
        print(f"  benchmark (utils/stat.py): total_citations {f(b['total_citations'])}  "
              f"total_valid_citations {f(b['total_valid_citations'])}  valid_rate {f(b['valid_rate'])}")
        print(f"  paper (stricter):          c_acc_paper {f(p['c_acc_paper'])}  e_cit_paper {f(p['e_cit_paper'])}")
    return 3 if res.errors else 0
