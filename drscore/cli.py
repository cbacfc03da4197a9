"""The ``drscore`` command: a thin shell over :mod:`drscore.api`."""
from __future__ import annotations

import argparse
import sqlite3
import sys

from drscore.api import version
from drscore.engine.runtime.extras import MissingExtra
from drscore.commands import register_all
from drscore.engine.runtime.rundir import RunDirError
from drscore.engine.runtime.sqlitefile import CacheFileError, describe


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="drscore", description="Score deep-research reports with LLM judges, under API quotas.")
    parser.add_argument("--version", action="version", version=f"drscore {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    register_all(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted; everything already judged is in the cache — re-run to resume", file=sys.stderr)
        return 130
    except (ValueError, KeyError, FileNotFoundError, MissingExtra, CacheFileError, RunDirError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"drscore: error: {msg}", file=sys.stderr)
        return 1
    except OSError as e:  # a path of the wrong type or without permission: one line, no traceback
        where = f"{e.filename}: " if e.filename else ""
        print(f"drscore: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except sqlite3.Error as e:  # a cache file that failed somewhere not wrapped in CacheFileError
        print(f"drscore: error: cache file: {describe(e)}; run `drscore cache check`", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
