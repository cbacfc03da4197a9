"""Where a command's option values come from, in order of precedence: the command line,
then a ``--config`` TOML file, then ``DRSCORE_*`` environment variables, then the built-in
defaults. Also the reverse: the TOML of a command line (``drscore run --print-config``).

Nothing here knows the options by name. The mapping is read from the click command, so an
option any module adds to ``drscore run`` (method options included) is accepted in the
config file as soon as it exists. A key is the flag without its dashes (``judge-url``) or
its Python name (``judge_url``); TOML tables only group keys (``[judge]`` ``url = ...`` is
not ``judge-url``: the table name is ignored), so a file can be laid out in sections like
``--print-config`` writes it. A TOML list is accepted wherever the flag repeats
(``reports = [...]``) or takes a comma-separated list (``methods = ["quality", "redundancy"]``).

The values are checked here, with the file's name and line in the message, and laid into
click's ``default_map`` above the environment's (see :mod:`drscore.commands._framework`).
"""
from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from drscore.commands._framework import Failure, sections
from drscore.engine.runtime.calls.redact import redact_url as redact_judge_url
from drscore.engine.runtime.calls.team.link import redact_url
from drscore.ranges import JUDGE_RANGES, RUN_RANGES, check

_RANGES = {r.flag.lstrip("-"): r for r in JUDGE_RANGES + RUN_RANGES}

# Options that select or describe the config itself; never read from or written to it.
NOT_IN_FILE = frozenset({"help", "version", "config", "print_config"})


class ConfigError(Failure):
    """A config file that cannot be used, named by file (and line when known); exit 1."""


class CommaList(click.ParamType):
    """A comma-separated list kept as its text (``quality,redundancy``); a TOML list
    (``["quality", "redundancy"]``) means the same."""

    name = "LIST"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if isinstance(value, (list, tuple)):
            return ",".join(str(v).strip() for v in value)
        return str(value)


COMMA_LIST = CommaList()


def in_file(param: click.Parameter) -> bool:
    """Whether a config file may set ``param`` (an option other than help, config, ...)."""
    return (isinstance(param, click.Option) and bool(param.name) and param.name not in NOT_IN_FILE
            and not param.is_eager)  # --help, --version and --config are eager


def file_options(params: Iterable[click.Parameter]) -> dict[str, click.Option]:
    """Options that a config file may set, by name (arguments excluded)."""
    return {p.name: p for p in params if isinstance(p, click.Option) and p.name and in_file(p)}


def flag_name(param: click.Option) -> str:
    """The option's config-file key: its first long flag without the dashes."""
    longs = [o for o in param.opts if o.startswith("--")]
    return (longs or list(param.opts))[0].lstrip("-")


def _line_of(text: str, key: str) -> int | None:
    pattern = re.compile(rf"^[ \t]*[\"']?{re.escape(key)}[\"']?[ \t]*=", re.MULTILINE)
    m = pattern.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def _flatten(table: dict[str, Any], where: str, out: dict[str, tuple[str, Any]]) -> None:
    for key, value in table.items():
        if isinstance(value, dict):
            _flatten(value, f"{where}{key}.", out)
            continue
        name = key.replace("-", "_")
        if name in out:
            raise ValueError(f"option {key!r} is set twice ({out[name][0]} and {where}{key})")
        out[name] = (f"{where}{key}", value)


def _convert(param: click.Option, value: Any, name: str) -> Any:
    if param.is_flag and param.is_bool_flag:
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}")
        return value
    if param.multiple:
        items = value if isinstance(value, list) else [value]
        return [_scalar(param, v, name) for v in items]
    if isinstance(value, list) and isinstance(param.type, CommaList):
        return param.type.convert([_scalar(param, v, name) for v in value], param, None)
    if isinstance(value, list):
        raise ValueError(f"{name} takes one value, got a list")
    return _scalar(param, value, name)


def _scalar(param: click.Option, value: Any, name: str) -> Any:
    if isinstance(value, (dict, list)):
        raise ValueError(f"{name} must be a single value, got {value!r}")
    kind = param.type
    if isinstance(kind, click.Choice):
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if text not in kind.choices:
            raise ValueError(f"{name}: {text!r} is not one of {', '.join(map(str, kind.choices))}")
        return text
    if isinstance(kind, click.types.IntParamType) and isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{name} must be a whole number, got {value!r}")  # int() would truncate it
    if isinstance(kind, (click.types.IntParamType, click.types.FloatParamType)):
        if isinstance(value, bool):
            raise ValueError(f"{name}: invalid value {value!r} (a number is needed)")
        try:
            return kind.convert(value, param, None)
        except click.BadParameter as exc:
            raise ValueError(f"{name}: invalid value {value!r} ({exc.message})") from None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def load_config_file(path: str | Path, params: Iterable[click.Parameter]) -> dict[str, Any]:
    """``option name -> value`` from a TOML file, checked against the command's options."""
    path = Path(path)
    options = file_options(params)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    flat: dict[str, tuple[str, Any]] = {}
    try:
        _flatten(data, "", flat)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    by_flag = {flag_name(p).replace("-", "_"): p for p in options.values()}
    out: dict[str, Any] = {}
    for key, (name, value) in flat.items():
        leaf = name.rsplit(".", 1)[-1]
        line = _line_of(text, leaf)
        where = f"{path}:{line}" if line else str(path)
        param = options.get(key) or by_flag.get(key)
        if param is None or param.name is None:
            known = sorted(flag_name(p) for p in options.values())
            close = difflib.get_close_matches(leaf.replace("_", "-"), known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{where}: unknown option {name!r}{hint}")
        try:
            out[param.name] = _convert(param, value, name)
            allowed = _RANGES.get(flag_name(param))
            if allowed is not None:  # checked again in the configs; here the error has its line
                check(out[param.name], allowed)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return out


def config_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--config FILE`` (an eager option): lay the file's values over the environment's
    in ``default_map``, beneath whatever the command line gives."""
    if value:
        from_file = load_config_file(value, ctx.command.get_params(ctx))
        ctx.default_map = {**(ctx.default_map or {}), **from_file}
    return value


def config_option(help: str = "TOML file with any of these options (flags override it)"  # noqa: A002
                  ) -> Any:
    """The ``--config FILE`` option (read before every other option)."""
    return click.option("--config", metavar="FILE", is_eager=True, callback=config_callback, help=help)


# --------------------------------------------------------------------------- writing


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    s = str(value)
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_toml(ctx: click.Context, title: str = "") -> str:
    """The options of the command of ``ctx`` with their values as a TOML file: one
    commented section per option section; unset options are listed commented out."""
    lines = [f"# {title}" if title else "# drscore config", "# Flags given on the command line override this file.", ""]
    for section, opts in sections(ctx.command.get_params(ctx)):
        acts = [o for o in opts if in_file(o)]
        if not acts:
            continue
        lines.append(f"# --- {section}")
        for o in acts:
            key = flag_name(o)
            value = ctx.params.get(o.name or "")
            if isinstance(value, tuple):
                value = list(value) or None
            help_text = " ".join((o.help or "").split())
            if value is None:
                lines.append(f"# {key} =   # {help_text}"[:160])
            elif o.name == "judge_url" and redact_judge_url(str(value)) != str(value):
                lines.append(f"{key} = {_toml_value(redact_judge_url(str(value)))}"
                             "   # secret left out: give the full URL in DRSCORE_JUDGE_URL")
            elif o.name == "redis" and redact_url(str(value)) != str(value):
                # a config file is shared and committed: the password stays in the environment
                lines.append(f"{key} = {_toml_value(redact_url(str(value)))}"
                             "   # password left out: give the full URL in DRSCORE_REDIS")
            else:
                lines.append(f"{key} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
