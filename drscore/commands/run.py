"""``drscore run``: score reports with one or more methods."""
from __future__ import annotations

import asyncio
import re
import signal
import sys
import time
from pathlib import Path
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, TypeVar

import click
import orjson

from drscore.api import Run, RunConfig, load_user_methods, method_origin, methods, plugin_problems
from drscore.commands._common import interrupt_note_for, judge_config_from_args, judge_options, run_async
from drscore.commands._framework import Command, on_interrupt, option, options, usage_error
from drscore.engine.runtime.calls.judging import StopReason
from drscore.engine.runtime.calls.ledger import interrupted_money
from drscore.render import dry_run_text, end_of_run_lines, leaderboard_text, only_the_stop, team_incomplete
from drscore.engine.runtime.escape import terminal
from drscore.engine.runtime.io import FORMATS, count_lines, shard_of
from drscore.engine.reporting.tables import BoardFold
from drscore.engine.runtime.progress import Progress, progress_mode
from drscore.protocols import PROTOCOLS
from drscore.settings import COMMA_LIST, ConfigError, config_option, to_toml

EXIT_INCOMPLETE = 3  # finished, but some inputs were skipped or some items failed (or budget/quota ran out)
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT
INTERRUPTED = "interrupted"  # the stop reason of a Ctrl-C
EXIT_ERROR = 1  # includes an endpoint that cannot work (refused, DNS, TLS, 401/403, 404, bad parameter)
_PAGES = "pages (methods that read cited pages)"
F = TypeVar("F", bound=Callable[..., Any])


def _method_options(f: F) -> F:
    """One ``--flag`` per method option, in a help section per method (a flag two methods
    share is declared by the first)."""
    seen: set[str] = set()
    decorators = []
    for cls in methods().values():
        for o in cls.options:
            if o.flag in seen:
                continue
            seen.add(o.flag)
            shown = f" (default: {o.default})" if o.default is not None else ""
            kwargs: dict[str, Any] = {"help": f"{o.help}{shown}", "default": None, "section": f"method {cls.name}"}
            if o.type == "bool":
                decorators.append(option(f"--{o.flag}/--no-{o.flag}", **kwargs))
                continue
            kind: Any = {"int": int, "float": float}.get(o.type, str)
            decorators.append(option(f"--{o.flag}", type=click.Choice(o.choices) if o.choices else kind, **kwargs))
    return options(*decorators)(f)


_DESCRIPTION = (
    "Score reports with the given methods. Without --judge-url the offline judge is used. "
    "Methods: {methods}. Exit status: 0 all scored (items a method does not apply to, "
    f"status 'skipped', included); {EXIT_INCOMPLETE} finished with skipped inputs or failed items, or stopped "
    "by --max-cost or a rate-limit reset beyond --max-rate-limit-wait (re-run to resume), or the --redis "
    f"server ran out of memory; {EXIT_ERROR} error, "
    "including a judge endpoint that cannot work (stopped at the first call, or after repeated identical "
    "failures) and inputs of which not one is valid; 2 usage (an unknown or malformed option, "
    "--methods or --reports missing).\n\n"
    "Every option can come from a TOML file (--config); flags given here override it, and "
    "DRSCORE_JUDGE_URL, DRSCORE_JUDGE_MODEL, DRSCORE_API_KEY_ENV, DRSCORE_CACHE, DRSCORE_REDIS "
    "give defaults for the options they name (OPENAI_BASE_URL, too, for the judge URL).")


@click.command("run", cls=Command, short_help="score reports",
               help=_DESCRIPTION.format(methods=", ".join(methods())),
               examples=[
                   "drscore run --methods quality,redundancy --tasks tasks.jsonl --reports reports.a.jsonl --limit 5",
                   "drscore run --methods quality --reports r.jsonl --judge-url https://api.openai.com/v1 "
                   "--judge-model gpt-4.1 --print-config > run.toml",
                   "drscore run --config run.toml --max-cost 5",
                   "drscore run --method-file clarity_rubric.toml --methods clarity-rubric,quality --tasks tasks.jsonl "
                   "--reports reports.a.jsonl --limit 2"])
@option("--methods", type=COMMA_LIST, help="comma-separated method names (required, here or in --config)")
@option("--reports", multiple=True, metavar="FILE",
        help="reports JSONL (repeat for several agents; required, here or in --config)")
@option("--tasks", metavar="FILE", help="tasks JSONL (optional when reports carry their prompt)")
@option("--format", type=click.Choice(FORMATS), default="auto", help="report format (default: detected per line)")
@option("--agent", help="agent name for formats without one (default: from the file name)")
@option("--out", metavar="DIR", help="run directory (config, verdicts, scores, summary; default: "
        "runs/<date>-<time>-<methods>/); the same command on the same DIR resumes, one process at a time")
@option("--overwrite", is_flag=True, help="replace a run directory that holds a different run's configuration")
@option("--limit", type=int, metavar="N", help="score only the first N reports of each reports file")
@option("--method-file", "method_files", multiple=True, metavar="FILE",
        help="a method declared in a TOML file (repeat for several); its name goes in --methods "
             "(docs/custom-methods.md)")
@option("--method-module", "method_modules", multiple=True, metavar="FILE",
        help="a Python file defining Method subclasses (repeat for several); their names go in --methods")
@config_option()
@option("--print-config", is_flag=True, help="print this command line as a TOML config file and exit")
@option("--dry-run", is_flag=True, help="print calls, tokens and cost; spend nothing")
@option("--protocol", type=click.Choice(sorted(PROTOCOLS)), default=None,
        help="a published judge set-up as defaults (judge model, thinking budget, temperature, method "
             "options); flags given here override it; see docs/judges.md")
@option("--seed", type=int, default=0, help="seed for every sampled step (default 0)")
@option("--samples", type=int, default=1, metavar="K",
        help="ask every judge call K times (distinct requests, each cached): rows get the mean and "
             "its spread (score_sd), intervals include the judge's noise (default 1; see docs/decisions.md)")
@option("--json", is_flag=True, help="print the summary as JSON")
@option("--shard", metavar="K/N", help="score only part K of N of the reports (split by task id and "
        "agent); join the parts with `drscore merge`")
@option("--progress-every", type=float, default=30.0, metavar="SECONDS",
        help="when stderr is not a terminal (CI, a pipe), print one progress line this often "
             "(default 30; 0 = never)")
@option("--allow-private-fetch", is_flag=True, section=_PAGES,
        help="DANGEROUS: allow fetching loopback/private addresses (local testing only)")
@option("--offline-pages", is_flag=True, section=_PAGES, help="use only cached/imported pages, never the network")
@option("--fetch-concurrency", type=int, default=32, section=_PAGES,
        help="cited pages fetched at once (default 32)")
@judge_options
@_method_options
@click.pass_context
def command(ctx: click.Context, **opts: Any) -> int:
    return _main(SimpleNamespace(**opts), ctx)


# A plugin's option whose flag drscore run already has (--limit, --seed, ...) is left out:
# two parameters with one flag would shadow each other. Said before each run.
OPTION_CLASHES: list[str] = []
_LEFT_OUT: set[tuple[str, str]] = set()  # (method, option dest)


def _leave_out_clashing_plugin_options(cmd: click.Command) -> None:
    seen: set[str] = set()
    kept = []
    for p in cmd.params:
        section = str(getattr(p, "section", None) or "")
        name = section.removeprefix("method ")
        clash = [o for o in p.opts if o in seen]
        if clash and section.startswith("method ") and method_origin(name) != "built-in":
            default = next((o.default for o in methods()[name].options if o.flag.replace("-", "_") == p.name), None)
            OPTION_CLASHES.append(f"{method_origin(name)}: method {name!r} declares the option {clash[0]}, which "
                                  f"drscore run already has; it keeps its default ({default})")
            _LEFT_OUT.add((name, str(p.name)))
            continue
        seen.update(p.opts)
        kept.append(p)
    cmd.params = kept


_leave_out_clashing_plugin_options(command)


def _config(args: SimpleNamespace) -> RunConfig:
    if not args.methods or not args.reports:
        missing = " and ".join(f for f, v in (("--methods", args.methods), ("--reports", args.reports)) if not v)
        if args.config:  # the file was meant to hold them: an error in the file, not in the usage
            raise ConfigError(f"{args.config}: {missing} required (on the command line or in the --config file)")
        usage_error(f"{missing} required (on the command line or in the --config file)")
    if args.limit is not None and args.limit < 1:
        raise ValueError("--limit must be at least 1")
    names = [m.strip() for m in args.methods.split(",") if m.strip()]
    load_user_methods(args.method_files, args.method_modules)
    available = methods()
    unknown = [n for n in names if n not in available]
    if unknown:
        problems = plugin_problems()
        hint = f" (plugins that failed to load: {'; '.join(problems)})" if problems else ""
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; available: {', '.join(available)}{hint}")
    options = {}
    for cls in available.values():
        for o in cls.options:
            dest = o.flag.replace("-", "_")
            if (cls.name, dest) not in _LEFT_OUT and getattr(args, dest, None) is not None:
                options[dest] = getattr(args, dest)
    return RunConfig(methods=names, reports=list(args.reports), tasks=args.tasks, format=args.format, agent=args.agent,
                     out=args.out, judge=judge_config_from_args(args), seed=args.seed, dry_run=args.dry_run,
                     method_options=options, allow_private_fetch=args.allow_private_fetch,
                     offline_pages=args.offline_pages, fetch_concurrency=args.fetch_concurrency,
                     limit=args.limit or 0, overwrite=args.overwrite, shard=args.shard,
                     protocol=getattr(args, "protocol", None), samples=args.samples,
                     method_files=list(args.method_files), method_modules=list(args.method_modules))


def default_out_dir(methods: list[str], root: Path = Path("runs"), now: float | None = None) -> Path:
    """``runs/<date>-<time>-<methods>/``; a suffix keeps two runs in one second apart."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(methods))[:60]
    base = root / f"{stamp}-{name}"
    path, k = base, 1
    while path.exists():
        k += 1
        path = base.with_name(f"{base.name}-{k}")
    return path


def _main(args: SimpleNamespace, ctx: click.Context) -> int:
    if args.print_config:
        sys.stdout.write(to_toml(ctx, "drscore run config (drscore run --config FILE)"))
        return 0
    config = _config(args)
    on_interrupt(interrupt_note_for(config.judge))
    if not config.out and not config.dry_run:
        config.out = str(default_out_dir(config.methods))
    if config.out and not config.dry_run:
        print(f"run directory: {config.out}", file=sys.stderr)
    if config.allow_private_fetch:
        print("WARNING: --allow-private-fetch: cited URLs may reach loopback and private addresses. "
              "Use only for local testing with trusted reports.", file=sys.stderr)
    summary, rows = run_async(_run(config, args.progress_every))
    t = summary["totals"]
    stop = summary.get("stopped")
    if stop and stop.get("reason") == INTERRUPTED:  # Ctrl-C, after the calls at the judge answered
        print(f"{interrupt_note_for(config.judge)}; {interrupted_money(t.get('ledger') or {})}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if args.json:
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
        if config.out and not config.dry_run:
            print(f"run directory: {config.out}", file=sys.stderr)
    elif config.dry_run:
        print(dry_run_text(summary, config.judge.price_as or config.judge.model))
    elif not only_the_stop(summary):  # a run stopped at its first call gets its one line, no table
        print(leaderboard_text(summary, rows))
        if config.out:
            print(f"\n  run directory: {config.out}")
    for line in end_of_run_lines(summary):
        print(line, file=sys.stderr)
    errors = summary.get("input_errors", [])
    for e in errors[:20]:
        print(f"skipped: {terminal(e)}", file=sys.stderr)
    if len(errors) > 20:
        print(f"... and {len(errors) - 20} more skipped inputs (see summary.json)", file=sys.stderr)
    if stop and stop["fatal"]:
        return EXIT_ERROR
    if not t["items"] and t["inputs_skipped"] and not config.dry_run:
        print("drscore: error: not one valid input: every report line was skipped (reasons above)", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_INCOMPLETE if stop or t["inputs_skipped"] or t["items_failed"] or team_incomplete(summary) else 0


def _stop_gracefully_on_ctrl_c(pool: Any) -> Callable[[], None]:
    """The first Ctrl-C stops sending judge calls and lets the ones at the judge answer
    (they are billed either way: answered, they are in the run's total and in the cache);
    the run then ends as a stopped run. A second Ctrl-C quits at once (those calls are then
    only bounded). Returns the undo; a no-op where the loop cannot take signals."""
    loop = asyncio.get_running_loop()

    def first() -> None:
        pool.halt(StopReason(reason=INTERRUPTED, message="interrupted (Ctrl-C)"))
        waiting = pool.ledger.totals().get("in_flight_now", {}).get("calls", 0)
        lead = "\n" if sys.stderr.isatty() else ""  # past the progress line
        print(f"{lead}stopping: no new judge calls; waiting for the {waiting} at the judge to answer (they are "
              "billed either way); Ctrl-C again to quit at once", file=sys.stderr)
        loop.remove_signal_handler(signal.SIGINT)
        loop.add_signal_handler(signal.SIGINT, second)

    def second() -> None:
        loop.remove_signal_handler(signal.SIGINT)  # back to KeyboardInterrupt
        signal.raise_signal(signal.SIGINT)

    try:
        loop.add_signal_handler(signal.SIGINT, first)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
        return lambda: None

    def undo() -> None:
        loop.remove_signal_handler(signal.SIGINT)

    return undo


async def _run(config: RunConfig, progress_every: float) -> tuple[dict, BoardFold]:
    async with Run(config) as run:
        undo = _stop_gracefully_on_ctrl_c(run.runner.pool)
        try:
            return await _rows(run, config, progress_every)
        finally:
            undo()


async def _rows(run: Run, config: RunConfig, progress_every: float) -> tuple[dict, BoardFold]:
    for warning in [*OPTION_CLASHES, *run.warnings]:
        print(f"warning: {warning}", file=sys.stderr)
    per_method = {m: sum(_capped(count_lines(p), config.limit) for p in config.reports) for m in config.methods}
    shard = shard_of(config.shard)
    if shard is not None:  # about one N-th: the split is by hash
        per_method = {m: -(-n // shard[1]) for m, n in per_method.items()}
    board = BoardFold()  # the leaderboard's figures, folded: no row is kept
    try:
        with Progress(run.runner.snapshot, per_method, mode=progress_mode(), every_s=progress_every,
                      max_cost=config.judge.max_cost):
            async for row in run.rows():
                board.add(row)
    except BaseException:  # Ctrl-C: its one line says what the run has paid so far too
        on_interrupt(f"{interrupt_note_for(config.judge)}; {interrupted_money(run.runner.pool.ledger.totals())}")
        raise
    return run.summary, board


def _capped(n: int, limit: int) -> int:
    return min(n, limit) if limit else n
