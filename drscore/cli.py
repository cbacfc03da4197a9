"""The ``drscore`` command: a thin shell over :mod:`drscore.api`, on click (the
conventions every command shares are in :mod:`drscore.commands._framework`)."""
from __future__ import annotations

import os
import sqlite3
import sys

import click

from drscore.api import version
from drscore.commands import all_commands
from drscore.commands._framework import Command, Group, interrupt_note, walk
from drscore.engine.runtime.escape import terminal
from drscore.engine.runtime.extras import MissingExtra
from drscore.engine.runtime.calls.ledger import RunBudgetSpent
from drscore.engine.runtime.calls.redact import install_excepthook, install_log_filter, redact
from drscore.engine.runtime.rundir import RunDirError
from drscore.engine.runtime.sqlitefile import CacheFileError, describe

__all__ = ["EXAMPLES", "build_cli", "main", "walk"]

# One example per command, shown at the end of its --help. Kept here (not in each command
# module) so that a test can hold every command to it and the modules stay focused.
EXAMPLES: dict[str, str] = {
    "": "drscore run --methods quality --tasks tasks.jsonl --reports reports.a.jsonl --limit 5",
    "agree": "drscore agree --human human.jsonl --run-dir runs/r1 --method quality",
    "cache": "drscore cache stats --cache ~/.cache/drscore",
    "cache stats": "drscore cache stats --cache ~/.cache/drscore",
    "cache vacuum": "drscore cache vacuum --older-than-days 30",
    "cache export": "drscore cache export judge-cache.jsonl.gz",
    "cache import": "drscore cache export judge-cache.jsonl.gz && drscore cache import judge-cache.jsonl.gz --cache ./cache",
    "cache explain": "drscore cache explain 3f2a9c   # exit 1 (no entry starts so in an empty cache)",
    "cache check": "drscore cache check --cache ~/.cache/drscore --repair",
    "citations": "drscore citations --reports reports.a.jsonl --summary",
    "compare": "drscore compare runs/before runs/after --method quality",
    "export": "drscore export runs/r1 --format csv",
    "mock-judge": "drscore mock-judge --port 8900 --rpm 600 --error-rate 0.05",
    "pages": "drscore pages stats --cache ./cache",
    "pages export": "drscore pages export pages.jsonl.gz --only-ok",
    "pages import": "drscore pages export pages.jsonl.gz && drscore pages import pages.jsonl.gz --cache ./cache",
    "pages stats": "drscore pages stats --cache ./cache",
    "pages get": "drscore pages get https://example.org/article --offline-pages   # exit 1 (not in the page cache)",
    "prompts": "drscore prompts show quality",
    "prompts list": "drscore prompts list",
    "prompts show": "drscore prompts show race_score",
    "fact": "drscore fact rescore results/fact/validated.jsonl --json",
    "fact rescore": "drscore fact rescore results/fact/validated.jsonl --json",
    "race": "drscore race rescore --criteria criteria.jsonl --judgements judgements.jsonl",
    "race rescore": "drscore race rescore --criteria criteria.jsonl --judgements judgements.jsonl",
    "report": "drscore report runs/r1",
    "run": "drscore run --methods quality --reports reports.a.jsonl --print-config > run.toml && drscore run --config run.toml --limit 10",
    "tasks": "drscore tasks rank --tasks tasks.jsonl --judge-url https://api.openai.com/v1 --judge-model gpt-4.1",
    "view": "drscore view runs/r1 --port 8800",
    "tasks rank": "drscore tasks rank --tasks tasks.jsonl --rounds 3 --out ranked.jsonl",
    "tasks leakage": "drscore tasks leakage --tasks tasks.jsonl --out leakage.jsonl",
    "tasks domains": "drscore tasks domains runs/r1 --method quality",
}



def build_cli() -> Group:
    """The ``drscore`` group with every sub-command, each with its example."""
    @click.group("drscore", cls=Group, invoke_without_command=True,
                 help="Score deep-research reports with LLM judges, under API quotas.")
    @click.version_option(version(), "--version", prog_name="drscore", message="%(prog)s %(version)s")
    @click.pass_context
    def cli(ctx: click.Context) -> int:
        if ctx.invoked_subcommand is None:  # `drscore` alone: the help, as a usage error
            click.echo(ctx.get_help())
            ctx.exit(2)
        return 0

    for command in all_commands():
        cli.add_command(command)
    for path, command, _ in walk(cli):
        example = EXAMPLES.get(" ".join(path))
        if isinstance(command, (Command, Group)) and example and not command.examples:
            command.examples = [example]
    return cli


def _error(message: object) -> None:
    print(terminal(redact(f"drscore: error: {message}")), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    install_log_filter()
    install_excepthook()
    try:
        # make_context + invoke rather than click's main(): its main turns a closed pipe
        # (`| head`) into exit status 1, where Unix tools stop quietly with 0.
        cli = build_cli()
        with cli.make_context("drscore", argv) as ctx:
            result = cli.invoke(ctx)
        sys.stdout.flush()  # here, so that a reader gone away (| head) is caught below
        return int(result or 0)
    except click.exceptions.Exit as e:  # --help, --version, ctx.exit(N)
        return e.exit_code
    except click.UsageError as e:  # the usage of the command that failed, then one line
        if e.ctx is not None:
            print(e.ctx.get_usage(), file=sys.stderr)
            print(f"Try '{e.ctx.command_path} --help' for help.\n", file=sys.stderr)
        _error(e.format_message())
        return 2
    except click.ClickException as e:
        _error(e.format_message())
        return e.exit_code
    except RunBudgetSpent as e:  # nothing to spend at this --max-cost: one line, exit 3 as a budget stop
        print(terminal(redact(f"drscore: stopped: {e}")), file=sys.stderr)
        return 3
    except (click.Abort, KeyboardInterrupt):
        print(interrupt_note(), file=sys.stderr)
        return 130
    except BrokenPipeError:  # piped into `head`: stop quietly, as other Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ValueError, KeyError, FileNotFoundError, MissingExtra, CacheFileError, RunDirError) as e:
        _error(e.args[0] if isinstance(e, KeyError) and e.args else e)
        return 1
    except OSError as e:  # a path of the wrong type or without permission: one line, no traceback
        where = f"{e.filename}: " if e.filename else ""
        _error(f"{where}{e.strerror or e}")
        return 1
    except sqlite3.Error as e:  # a cache file that failed somewhere not wrapped in CacheFileError
        _error(f"cache file: {describe(e)}; run `drscore cache check`")
        return 1


if __name__ == "__main__":
    sys.exit(main())
