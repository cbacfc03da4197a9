"""``drscore view RUN_DIR``: browse a run directory of any size in a local web page (see
``docs/reports.md``). The server, page and index live in ``engine/reporting/view_*``."""
from __future__ import annotations

from pathlib import Path

import click

from drscore.commands._framework import Command, argument, fail, option


@click.command("view", cls=Command, short_help="browse a run's rows and judge calls in a local web page",
               help="Serve a run directory on a local port: every row paged, sorted and "
                    "filtered from an index kept beside the run (view.sqlite), each row's "
                    "judge calls with the full prompt and answer. Follows a run that is "
                    "still writing. Stop with Ctrl-C. Exit status: 0 when stopped; 1 when the run "
                    "directory cannot be read or the port cannot be opened; 2 usage.")
@argument("dir", type=click.Path(path_type=Path), metavar="RUN_DIR", help="run directory (drscore run --out)")
@option("--host", default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; anything but loopback "
             "shows the run to the network, with a warning)")
@option("--port", type=click.IntRange(0, 65535), default=8765, help="port (default 8765; 0 picks a free one)")
@option("--open", "open_browser", is_flag=True, help="open the page in the default browser")
@option("--cache", type=click.Path(path_type=Path), metavar="FILE",
        help="judge cache to read full prompts and answers from (default: the "
             "judge.sqlite of the run's cache directory)")
def command(dir: Path, host: str, port: int, open_browser: bool, cache: Path | None) -> int:  # noqa: A002
    """Entry point of ``drscore view``; returns the exit code."""
    from drscore.api import run_async
    from drscore.engine.reporting.view_server import ViewConfig, serve

    config = ViewConfig(run_dir=str(dir), host=host, port=port, open_browser=open_browser,
                        cache_file=str(cache) if cache else None)
    try:
        run_async(serve(config))
    except KeyboardInterrupt:
        return 0
    except OSError as exc:  # FileNotFoundError included: a missing run, a port in use
        fail(str(exc))
    return 0
