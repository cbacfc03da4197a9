"""``drscore view RUN_DIR``: browse a run directory of any size in a local web page (see
``docs/reports.md``). The server, page and index live in ``engine/reporting/view_*``."""
from __future__ import annotations

from pathlib import Path

import click
from click.core import ParameterSource

from drscore.commands._framework import Command, argument, fail, option, usage_error


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
@option("--cache", type=click.Path(path_type=Path), metavar="DIR",
        help="cache directory to read full prompts and answers from, as for `drscore run` "
             "(its judge.sqlite; default: the run's recorded cache directory, then "
             "$DRSCORE_CACHE, then the user cache dir)")
def command(dir: Path, host: str, port: int, open_browser: bool, cache: Path | None) -> int:  # noqa: A002
    """Entry point of ``drscore view``; returns the exit code."""
    from drscore.api import run_async
    from drscore.engine.reporting.view_server import NotARun, ViewConfig, serve

    ctx = click.get_current_context()
    if cache is not None and cache.is_file():
        # One option, one meaning in every command: --cache names the directory.
        usage_error(f"--cache {cache}: is a file; --cache is the cache directory (as for `drscore run`), "
                    f"give {cache.parent}")
    # $DRSCORE_CACHE is a default, not an order: it is searched after the cache the run
    # recorded (a run made with another --cache keeps its prompts readable).
    explicit = ctx.get_parameter_source("cache") is ParameterSource.COMMANDLINE
    config = ViewConfig(run_dir=str(dir), host=host, port=port, open_browser=open_browser,
                        cache_dir=str(cache) if cache is not None and explicit else None)
    try:
        run_async(serve(config))
    except KeyboardInterrupt:
        return 0
    except (OSError, NotARun) as exc:  # a missing run or not a run, a port in use
        fail(str(exc))
    return 0
