"""``drscore citations``: the statement-URL pairs of reports, without judging or fetching.

``drscore citations --reports R [--tasks T] [--format F] [--agent A]`` prints one JSON
line per pair: ``task_id``, ``agent``, ``statement``, ``url``, ``marker``, ``kind``,
``extractor``. ``--summary`` prints one line per report instead (pairs, references,
unresolved markers, uncited references, whether it is parseable). Reports the parser
cannot read are named on stderr: FACT would send those to the judge's extractor.
Bad input lines are reported with file and line; the others are still parsed.
Exit status: 0, or 3 when some input lines were skipped.
"""
from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import IO, Any

import click
import orjson

from drscore.commands._framework import Command, option

from drscore.engine.text.citations import cited_urls, parse_citations
from drscore.engine.runtime.io import FORMATS, iter_reports, load_tasks
from drscore.engine.runtime.models import InputError

EXIT_INCOMPLETE = 3


@click.command("citations", cls=Command, short_help="list statement-URL pairs of reports (no judge, no fetching)",
               help="Parse reports' citations (numbered markers and reference lists, footnotes, inline "
                    "links, bare URLs) and print one JSON line per statement-URL pair. Exit status: 0; 3 when "
                    "some input lines were skipped; 1 when a file cannot be read.")
@option("--reports", required=True, multiple=True, metavar="FILE", help="reports JSONL (repeatable)")
@option("--tasks", metavar="FILE", help="tasks JSONL: reports of unknown tasks are reported")
@option("--format", type=click.Choice(FORMATS), default="auto", help="report format (default: detected per line)")
@option("--agent", help="agent name for formats without one (default: from the file name)")
@option("--scope", type=click.Choice(("sentence", "span")), default="sentence",
        help="text a citation covers: its sentence (default) or all text since the previous citation")
@option("--summary", is_flag=True, help="one line per report with counts instead of pairs")
def command(**opts: Any) -> int:
    return run_citations(SimpleNamespace(**opts))


def report_lines(report: Any, *, scope: str = "sentence", summary: bool = False) -> tuple[list[dict[str, Any]], bool]:
    """The output lines for one report and whether its citations were parseable."""
    parse = parse_citations(report.report, scope=scope)
    if summary:
        return [{
            "task_id": report.task_id, "agent": report.agent, "pairs": len(parse.pairs),
            "urls": len(cited_urls(parse)), "references": len(parse.references),
            "markers": parse.marker_count, "unresolved_markers": parse.unresolved_markers,
            "uncited_references": parse.uncited_references, "parseable": parse.parseable,
            "citation_points": parse.citation_points, "bibliography_only": parse.bibliography_only,
        }], parse.parseable
    return [{"task_id": report.task_id, "agent": report.agent, "statement": p.statement, "url": p.url,
             "marker": p.marker, "kind": p.kind, "extractor": "parser"} for p in parse.pairs], parse.parseable


def write_citations(args: SimpleNamespace, out: IO[str], err: IO[str]) -> int:
    """Parse every report of ``args.reports`` and write JSON lines to ``out``."""
    errors: list[InputError] = []
    tasks = load_tasks(args.tasks, errors) if args.tasks else None
    unparseable = 0
    for path in args.reports:
        for report in iter_reports(path, fmt=args.format, agent=args.agent, tasks=tasks, errors=errors):
            lines, parseable = report_lines(report, scope=args.scope, summary=args.summary)
            if not parseable:
                unparseable += 1
                print(f"{report.origin}: citations not parseable (FACT would use the judge's extractor)",
                      file=err)
            out.write("".join(orjson.dumps(line).decode() + "\n" for line in lines))
    for e in errors:
        print(f"skipped: {e}", file=err)
    if unparseable:
        print(f"{unparseable} report(s) not parseable", file=err)
    return EXIT_INCOMPLETE if errors else 0


def run_citations(args: SimpleNamespace) -> int:
    return write_citations(args, sys.stdout, sys.stderr)  # a broken pipe (| head) is quiet: see cli.main
