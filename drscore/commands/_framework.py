"""The command-line conventions every ``drscore`` command shares, on top of click.

* a mistyped command or option gets a "did you mean" (difflib);
* an error prints the usage of the command that failed (not the top level), then one
  line ``drscore: error: ...``;
* exit status 2 for usage only (an unknown option, a missing or malformed value), 1 for
  every other error (a missing file, an unusable endpoint, a config file that cannot be
  used), as the README's exit-status table says;
* defaults come from, in order: the command line, then ``--config FILE`` (TOML), then
  ``DRSCORE_*`` environment variables, then the built-in default. click's own ``envvar``
  outranks its ``default_map``, the opposite of that order, so both the environment and
  the file are laid into ``default_map`` here (the file over the environment);
* an example at the end of every ``--help`` (``examples=[...]``), printed as written.

Adding an option to a command is one ``@click.option(...)`` line on its function.
"""
from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NoReturn, TypeVar

import click
from click.core import ParameterSource

F = TypeVar("F", bound=Callable[..., Any])

# The option's name -> the variables that give its default (the first one set), for every
# command that has it. OPENAI_BASE_URL is read by the openai SDK and many tools: a user
# who set it means that endpoint, not the offline judge.
ENV_DEFAULTS: dict[str, str | tuple[str, ...]] = {
    "judge_url": ("DRSCORE_JUDGE_URL", "OPENAI_BASE_URL"),
    "judge_model": "DRSCORE_JUDGE_MODEL",
    "api_key_env": "DRSCORE_API_KEY_ENV",
    "cache": "DRSCORE_CACHE",
    "redis": "DRSCORE_REDIS",
}

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 110}


class Failure(click.ClickException):
    """An error that is not a usage error: printed as one line, exit status 1."""

    exit_code = 1


def fail(message: str) -> NoReturn:
    """Stop the command with ``drscore: error: MESSAGE`` and exit status 1."""
    raise Failure(message)


def usage_error(message: str) -> NoReturn:
    """Stop with the failing command's usage and ``drscore: error: MESSAGE`` (exit 2)."""
    raise click.UsageError(message, click.get_current_context(silent=True))


def env_defaults(params: Sequence[click.Parameter], environ: Mapping[str, str]) -> dict[str, Any]:
    """``default_map`` entries from ``DRSCORE_*`` variables for the options ``params`` has."""
    names = {p.name for p in params}
    out: dict[str, Any] = {}
    for name, variables in ENV_DEFAULTS.items():
        for var in (variables,) if isinstance(variables, str) else variables:
            if name in names and environ.get(var):
                out[name] = environ[var]
                break
    return out


class _Conventions(click.Command):
    """What commands and groups share: the project's context settings, environment
    defaults beneath any ``default_map`` already set, and the examples printed verbatim
    after the help."""

    def __init__(self, *args: Any, examples: Sequence[str] = (), **kwargs: Any) -> None:
        kwargs.setdefault("context_settings", dict(CONTEXT_SETTINGS))
        super().__init__(*args, **kwargs)
        self.examples = list(examples)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.default_map = {**env_defaults(self.get_params(ctx), os.environ), **(ctx.default_map or {})}
        return super().parse_args(ctx, args)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)
        _format_examples(self.examples, formatter)


class Command(_Conventions):
    """A click command with the conventions above, whose unknown options get one suggestion."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as e:  # one suggestion, the closest (click lists every near one)
            known = [o for p in self.get_params(ctx) for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]
            close = difflib.get_close_matches(e.option_name, known, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise click.UsageError(f"no such option {e.option_name}{hint}", ctx) from None

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # (click lists the arguments, with their help, under "Positional arguments" itself)
        _format_sections(self, ctx, formatter)


class Argument(click.Argument):
    """A positional argument with a help line (click's own have none)."""

    def __init__(self, *args: Any, help: str | None = None, **kwargs: Any) -> None:  # noqa: A002
        super().__init__(*args, **kwargs)
        self.help = help

    def get_help_record(self, ctx: click.Context) -> tuple[str, str]:
        return (self.make_metavar(ctx), self.help or "")


def argument(*decls: str, help: str | None = None, **attrs: Any) -> Callable[[F], F]:  # noqa: A002
    """``click.argument`` with a help line shown under "Arguments"."""
    return click.argument(*decls, cls=Argument, help=help, **attrs)


class Group(_Conventions, click.Group):
    """A command group with the conventions above, whose unknown sub-commands get a
    suggestion, and whose own options may also be given after the sub-command (see
    :func:`inherited`)."""

    command_class = Command

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0]) if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else f" (commands: {', '.join(self.list_commands(ctx))})"
            raise click.UsageError(f"no such command {name!r}{hint}", ctx)
        return super().resolve_command(ctx, args)


Group.group_class = Group  # sub-groups made with @group.group() follow the same conventions


def _format_examples(examples: Sequence[str], formatter: click.HelpFormatter) -> None:
    if not examples:
        return
    # written as is: click would re-wrap an epilog and break the command lines apart
    formatter.write("\n" + ("example:\n" if len(examples) == 1 else "examples:\n"))
    for line in examples:
        formatter.write(f"  {line}\n")


def inherited(ctx: click.Context, name: str) -> Any:
    """The value of option ``name`` that a command and its group both declare
    (``drscore cache --cache DIR stats`` and ``drscore cache stats --cache DIR``): the
    one given on the command line wins, the sub-command's first; else the sub-command's
    default (which already holds the environment's)."""
    here: click.Context | None = ctx
    while here is not None:
        if name in here.params and here.get_parameter_source(name) == ParameterSource.COMMANDLINE:
            return here.params[name]
        here = here.parent
    return ctx.params.get(name)


def explicit(ctx: click.Context, name: str) -> bool:
    """Whether the command line itself gave option ``name``."""
    return ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE


def walk(command: click.Command, path: tuple[str, ...] = (), ctx: click.Context | None = None
         ) -> Iterator[tuple[tuple[str, ...], click.Command, click.Context]]:
    """Every (command path, command, context) of the tree, depth first, the top first."""
    ctx = click.Context(command, info_name=" ".join(("drscore", *path)) if path else "drscore", parent=None)
    yield path, command, ctx
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            child = command.get_command(ctx, name)
            if child is not None:
                yield from walk(child, (*path, name))


def help_text(command: click.Command, path: tuple[str, ...] = ()) -> str:
    """The ``--help`` text of ``command``, as ``drscore PATH --help`` prints it."""
    ctx = click.Context(command, info_name=" ".join(("drscore", *path)))
    return command.get_help(ctx)


class Option(click.Option):
    """An option with a help section (``judge``, ``limits``, ...): ``--help`` lists the
    options by section, and ``--print-config`` writes one commented block per section."""

    def __init__(self, *args: Any, section: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.section = section


def option(*decls: str, section: str | None = None, **attrs: Any) -> Callable[[F], F]:
    """``click.option`` with the project's defaults: no "(default: None)" in the help
    (defaults are written into the help text where they mean something)."""
    attrs.setdefault("show_default", False)
    return click.option(*decls, cls=Option, section=section, **attrs)


def sections(params: Sequence[click.Parameter]) -> list[tuple[str, list[click.Option]]]:
    """The command's options grouped by section, in declaration order (``options`` first)."""
    out: dict[str, list[click.Option]] = {}
    for p in params:
        if isinstance(p, click.Option):
            out.setdefault(getattr(p, "section", None) or "options", []).append(p)
    return list(out.items())


def _format_sections(command: click.Command, ctx: click.Context, formatter: click.HelpFormatter) -> None:
    for title, opts in sections(command.get_params(ctx)):
        records = [r for r in (o.get_help_record(ctx) for o in opts) if r is not None]
        if records:
            with formatter.section(title[:1].upper() + title[1:]):
                formatter.write_dl(records)


def options(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several option decorators as one, applied so that ``--help`` lists them in the
    order written."""
    def apply(f: F) -> F:
        for d in reversed(decorators):
            f = d(f)
        return f
    return apply


_INTERRUPT_NOTE = ["interrupted"]


def on_interrupt(note: str) -> None:
    """What Ctrl-C prints for the running command (it knows whether answers were cached)."""
    _INTERRUPT_NOTE[0] = note


def interrupt_note() -> str:
    return _INTERRUPT_NOTE[0]
