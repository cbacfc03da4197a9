"""The ``drscore`` command: a thin shell over :mod:`drscore.api`."""
from __future__ import annotations

import argparse
import copy
import sqlite3
import sys
from collections.abc import Iterator

from drscore.api import version
from drscore.engine.runtime.escape import terminal
from drscore.engine.runtime.extras import MissingExtra
from drscore.commands import register_all
from drscore.engine.runtime.rundir import RunDirError
from drscore.engine.runtime.sqlitefile import CacheFileError, describe
from drscore.engine.runtime.redact import install_excepthook, install_log_filter, redact
from drscore.settings import apply_sources


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="drscore", description="Score deep-research reports with LLM judges, under API quotas.")
    parser.add_argument("--version", action="version", version=f"drscore {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    register_all(sub)
    harmonise(parser)
    add_examples(parser)
    return parser


# One example per command, shown at the end of its --help. Kept here (not in each command
# module) so that a test can hold every command to it and the modules stay focused.
EXAMPLES: dict[str, str] = {
    "": "drscore run --methods quality --tasks tasks.jsonl --reports reports.a.jsonl --limit 5",
    "agree": "drscore agree --human human.jsonl --run runs/r1 --method race",
    "cache": "drscore cache stats --cache ~/.cache/drscore",
    "cache stats": "drscore cache stats --cache ~/.cache/drscore",
    "cache vacuum": "drscore cache vacuum --older-than-days 30",
    "cache export": "drscore cache export judge-cache.jsonl.gz",
    "cache import": "drscore cache import judge-cache.jsonl.gz --cache ./cache",
    "cache explain": "drscore cache explain 3f2a9c...",
    "cache check": "drscore cache check --cache ~/.cache/drscore --repair",
    "citations": "drscore citations --reports reports.a.jsonl --summary",
    "compare": "drscore compare runs/before runs/after --method race",
    "export": "drscore export runs/r1 --format csv",
    "mock-judge": "drscore mock-judge --port 8900 --rpm 600 --error-rate 0.05",
    "pages": "drscore pages stats --cache ./cache",
    "pages export": "drscore pages export pages.jsonl.gz --only-ok",
    "pages import": "drscore pages import pages.jsonl.gz --cache ./cache",
    "pages stats": "drscore pages stats --cache ./cache",
    "pages get": "drscore pages get https://example.org/article --offline-pages",
    "prompts": "drscore prompts show quality",
    "prompts list": "drscore prompts list",
    "prompts show": "drscore prompts show race_score",
    "fact": "drscore fact rescore results/fact/validated.jsonl --json",
    "fact rescore": "drscore fact rescore results/fact/validated.jsonl --json",
    "race": "drscore race rescore --criteria criteria.jsonl --judgements judgements.jsonl",
    "race rescore": "drscore race rescore --criteria criteria.jsonl --judgements judgements.jsonl",
    "report": "drscore report runs/r1 && open runs/r1/report.html",
    "run": "drscore run --config run.toml --limit 10",
    "view": "drscore view runs/r1 --port 8800",
    "tasks": "drscore tasks rank --tasks tasks.jsonl --judge-url URL --judge-model gpt-4.1",
    "tasks rank": "drscore tasks rank --tasks tasks.jsonl --rounds 3 --out ranked.jsonl",
    "tasks leakage": "drscore tasks leakage --tasks tasks.jsonl --out leakage.jsonl",
    "tasks domains": "drscore tasks domains runs/r1 --method race",
}


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
         ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (command path, parser) pair, depth first, the top parser first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) not in seen:  # aliases share a parser
                    seen.add(id(child))
                    yield from walk(child, (*path, name))


def add_examples(parser: argparse.ArgumentParser) -> None:
    """Append ``examples:`` to the help of every command that has none of its own."""
    for path, p in walk(parser):
        example = EXAMPLES.get(" ".join(path))
        if example and not (p.epilog and "example" in p.epilog):
            p.epilog = ((p.epilog + "\n\n") if p.epilog else "") + f"example:\n  {example}"
            if p.formatter_class is argparse.HelpFormatter:
                p.formatter_class = argparse.RawDescriptionHelpFormatter


def harmonise(parser: argparse.ArgumentParser) -> None:
    """Accept a command group's options before and after the action: an option every
    action of a group takes is also taken by the group (``pages --cache DIR stats``),
    and an option of the group is also taken by each action (``cache stats --cache
    DIR``). The copy on the inner parser defaults to SUPPRESS, so a value given at
    either position survives."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        children = list({id(c): c for c in action.choices.values()}.values())
        if not children:
            continue
        common = set.intersection(*(set(c._option_string_actions) for c in children)) - {"-h", "--help"}
        for option in sorted(common):
            if option in parser._option_string_actions:
                continue
            inner = [c._option_string_actions[option] for c in children]
            if len({a.dest for a in inner}) != 1 or not all(o in parser._option_string_actions or
                                                          o in common for o in inner[0].option_strings):
                continue
            outer = copy.copy(inner[0])
            parser._add_action(outer)
            for a in inner:
                a.default = argparse.SUPPRESS
        for outer in [a for a in parser._actions if a.option_strings and not isinstance(
                a, (argparse._HelpAction, argparse._VersionAction))]:
            for child in children:
                if any(o in child._option_string_actions for o in outer.option_strings):
                    continue
                clone = copy.copy(outer)
                clone.default = argparse.SUPPRESS
                child._add_action(clone)
        for child in children:
            harmonise(child)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    install_log_filter()
    install_excepthook()
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        # --config FILE and DRSCORE_* variables fill what the command line left unset
        apply_sources(parser, argv, args)
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted; everything already judged is in the cache — re-run to resume", file=sys.stderr)
        return 130
    except (ValueError, KeyError, FileNotFoundError, MissingExtra, CacheFileError, RunDirError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(terminal(redact(f"drscore: error: {msg}")), file=sys.stderr)
        return 1
    except OSError as e:  # a path of the wrong type or without permission: one line, no traceback
        where = f"{e.filename}: " if e.filename else ""
        print(terminal(redact(f"drscore: error: {where}{e.strerror or e}")), file=sys.stderr)
        return 1
    except sqlite3.Error as e:  # a cache file that failed somewhere not wrapped in CacheFileError
        print(f"drscore: error: cache file: {describe(e)}; run `drscore cache check`", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
