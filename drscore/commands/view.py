"""``drscore view DIR``: browse a run directory of any size in a local web page (see
``docs/reports.md``). The server, page and index live in ``engine/reporting/view_*``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``view`` sub-command."""
    p = subparsers.add_parser(
        "view", help="browse a run's rows and judge calls in a local web page",
        description="Serve a run directory on a local port: every row paged, sorted and "
                    "filtered from an index kept beside the run (view.sqlite), each row's "
                    "judge calls with the full prompt and answer. Follows a run that is "
                    "still writing. Stop with Ctrl-C.")
    p.add_argument("dir", type=Path, metavar="DIR", help="run directory (drscore run --out)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; anything but loopback "
                        "shows the run to the network, with a warning)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--open", action="store_true", help="open the page in the default browser")
    p.add_argument("--cache", type=Path, metavar="FILE",
                   help="judge cache to read full prompts and answers from (default: the "
                        "judge.sqlite of the run's cache directory)")
    p.set_defaults(func=run_view)


def run_view(args: argparse.Namespace) -> int:
    """Entry point of ``drscore view``; returns the exit code."""
    from drscore.api import run_async
    from drscore.engine.reporting.view_server import ViewConfig, serve

    if not 0 <= args.port <= 65535:
        print("drscore view: error: --port must be between 0 and 65535", file=sys.stderr)
        return 2
    config = ViewConfig(run_dir=str(args.dir), host=args.host, port=args.port, open_browser=args.open,
                        cache_file=str(args.cache) if args.cache else None)
    try:
        run_async(serve(config))
    except KeyboardInterrupt:
        return 0
    except (FileNotFoundError, OSError) as exc:
        print(f"drscore view: error: {exc}", file=sys.stderr)
        return 2
    return 0
