"""Where a command's option values come from, in order of precedence: the command line,
then a ``--config`` TOML file, then ``DRSCORE_*`` environment variables, then the built-in
defaults. Also the reverse: the TOML of a command line (``drscore run --print-config``).

Nothing here knows the options by name. The mapping is read from the argparse parser of
the command, so an option any module adds to ``drscore run`` (method options included)
is accepted in the config file as soon as it exists. A key is the flag without its
dashes (``judge-url``) or its Python name (``judge_url``); TOML tables only group keys
(``[judge]`` ``url = ...`` is not ``judge-url``: the table name is ignored), so a file can
be laid out in sections like ``--print-config`` writes it.
"""
from __future__ import annotations

import argparse
import difflib
import os
import re
import tomllib
from pathlib import Path
from collections.abc import Callable, Mapping
from typing import Any, cast

from drscore.engine.runtime.redact import redact_url as redact_judge_url
from drscore.engine.runtime.team.link import redact_url
from drscore.ranges import JUDGE_RANGES, RUN_RANGES, check

_RANGES = {r.flag.lstrip("-"): r for r in JUDGE_RANGES + RUN_RANGES}

# Environment defaults (the option's dest -> variable). Any command with the option gets it.
ENV_DEFAULTS: dict[str, str] = {
    "judge_url": "DRSCORE_JUDGE_URL",
    "judge_model": "DRSCORE_JUDGE_MODEL",
    "api_key_env": "DRSCORE_API_KEY_ENV",
    "cache": "DRSCORE_CACHE",
    "redis": "DRSCORE_REDIS",
}
# Options that select or describe the config itself; never read from or written to it.
NOT_IN_FILE = frozenset({"help", "version", "config", "print_config"})

_UNSET = object()


class ConfigError(ValueError):
    """A config file that cannot be used, named by file (and line when known)."""


def leaf_parsers(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[argparse.ArgumentParser]:
    """The chain of parsers that parsed ``args``: the top one, then each chosen sub-command."""
    chain = [parser]
    while True:
        subs = [a for a in chain[-1]._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return chain
        chosen = getattr(args, subs[0].dest, None)
        if chosen is None or chosen not in subs[0].choices:
            return chain
        chain.append(subs[0].choices[chosen])


def file_actions(parsers: list[argparse.ArgumentParser]) -> dict[str, argparse.Action]:
    """Options that a config file may set, by dest (positional arguments excluded)."""
    out: dict[str, argparse.Action] = {}
    for p in parsers:
        for a in p._actions:
            if a.option_strings and a.dest not in NOT_IN_FILE and not isinstance(
                    a, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
                out[a.dest] = a
    return out


def explicit_dests(parser: argparse.ArgumentParser, argv: list[str],
                   parsers: list[argparse.ArgumentParser]) -> set[str]:
    """Dests the command line sets itself (as opposed to leaving at their default)."""
    saved = []
    for p in parsers:
        for a in p._actions:
            if a.option_strings and not isinstance(a, (argparse._HelpAction, argparse._VersionAction)) \
                    and a.default is not argparse.SUPPRESS:  # a SUPPRESS copy must not mask its twin
                saved.append((a, a.default))
                # append/count actions build on their default; None is their neutral start
                a.default = None if isinstance(a, (argparse._AppendAction, argparse._CountAction)) else _UNSET
    try:
        ns = parser.parse_args(argv)
    finally:
        for a, default in saved:
            a.default = default
    actions = file_actions(parsers)
    return {d for d, v in vars(ns).items() if v is not _UNSET and not (
        v is None and isinstance(actions.get(d), (argparse._AppendAction, argparse._CountAction)))}


def flag_name(action: argparse.Action) -> str:
    """The option's config-file key: its first long flag without the dashes."""
    longs = [o for o in action.option_strings if o.startswith("--")]
    return (longs or action.option_strings)[0].lstrip("-")


def _line_of(text: str, key: str) -> int | None:
    pattern = re.compile(rf"^[ \t]*[\"']?{re.escape(key)}[\"']?[ \t]*=", re.MULTILINE)
    m = pattern.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def _flatten(table: dict[str, Any], where: str, out: dict[str, tuple[str, Any]]) -> None:
    for key, value in table.items():
        if isinstance(value, dict):
            _flatten(value, f"{where}{key}.", out)
            continue
        dest = key.replace("-", "_")
        if dest in out:
            raise ConfigError(f"option {key!r} is set twice ({out[dest][0]} and {where}{key})")
        out[dest] = (f"{where}{key}", value)


def _convert(action: argparse.Action, value: Any, name: str) -> Any:
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction,
                           argparse.BooleanOptionalAction)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, got {value!r}")
        return value
    if isinstance(action, argparse._AppendAction):
        items = value if isinstance(value, list) else [value]
        return [_scalar(action, v, name) for v in items]
    if isinstance(value, list):
        raise ValueError(f"{name} takes one value, got a list")
    return _scalar(action, value, name)


def _scalar(action: argparse.Action, value: Any, name: str) -> Any:
    if isinstance(value, (dict, list)):
        raise ValueError(f"{name} must be a single value, got {value!r}")
    convert = cast("Callable[[Any], Any] | None", action.type)
    if convert is int and isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{name} must be a whole number, got {value!r}")  # int() would truncate it
    if convert is not None and callable(convert):
        try:
            value = convert(value if isinstance(value, (int, float)) and convert in (int, float) else str(value))
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"{name}: invalid value {value!r} ({exc})") from None
    elif isinstance(value, bool) or not isinstance(value, str):
        value = str(value).lower() if isinstance(value, bool) else str(value)
    if action.choices is not None and value not in action.choices:
        raise ValueError(f"{name}: {value!r} is not one of {', '.join(map(str, action.choices))}")
    return value


def load_config_file(path: str | Path, actions: dict[str, argparse.Action]) -> dict[str, Any]:
    """``dest -> value`` from a TOML file, checked against the command's options."""
    path = Path(path)
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
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    out: dict[str, Any] = {}
    for dest, (name, value) in flat.items():
        leaf = name.rsplit(".", 1)[-1]
        line = _line_of(text, leaf)
        where = f"{path}:{line}" if line else str(path)
        action = actions.get(dest)
        if action is None:
            known = sorted(flag_name(a) for a in actions.values())
            close = difflib.get_close_matches(leaf.replace("_", "-"), known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{where}: unknown option {name!r}{hint}")
        try:
            out[dest] = _convert(action, value, name)
            allowed = _RANGES.get(flag_name(action))
            if allowed is not None:  # checked again in the configs; here the error has its line
                check(out[dest], allowed)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return out


def apply_sources(parser: argparse.ArgumentParser, argv: list[str], args: argparse.Namespace,
                  environ: Mapping[str, str] | None = None) -> argparse.Namespace:
    """Fill the options the command line left unset from ``--config`` and the
    environment. Returns ``args`` (updated in place)."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    config_path = getattr(args, "config", None)
    env_hits = {d: env[v] for d, v in ENV_DEFAULTS.items() if hasattr(args, d) and env.get(v)}
    if not config_path and not env_hits:
        return args
    parsers = leaf_parsers(parser, args)
    actions = file_actions(parsers)
    explicit = explicit_dests(parser, argv, parsers)
    from_file = load_config_file(config_path, actions) if config_path else {}
    for dest, value in env_hits.items():
        if dest not in explicit and dest not in from_file:
            action = actions.get(dest)
            if action is not None:
                try:
                    value = _scalar(action, value, ENV_DEFAULTS[dest])
                except ValueError as exc:
                    raise ConfigError(f"environment: {exc}") from None
            setattr(args, dest, value)
    for dest, value in from_file.items():
        if dest not in explicit:
            setattr(args, dest, value)
    return args


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


def to_toml(parser: argparse.ArgumentParser, args: argparse.Namespace, title: str = "") -> str:
    """The options of ``parser`` with their values in ``args`` as a TOML file: one
    commented section per option group; unset options are listed commented out."""
    lines = [f"# {title}" if title else "# drscore config", "# Flags given on the command line override this file.", ""]
    for group in parser._action_groups:
        acts = [a for a in group._group_actions if a.option_strings and a.dest not in NOT_IN_FILE
                and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]
        if not acts:
            continue
        lines.append(f"# --- {group.title}")
        for a in acts:
            key = flag_name(a)
            value = getattr(args, a.dest, None)
            help_text = " ".join((a.help or "").split()).replace("%%", "%")
            if value is None:
                lines.append(f"# {key} =   # {help_text}"[:160])
            elif a.dest == "judge_url" and redact_judge_url(str(value)) != str(value):
                lines.append(f"{key} = {_toml_value(redact_judge_url(str(value)))}"
                             "   # secret left out: give the full URL in DRSCORE_JUDGE_URL")
            elif a.dest == "redis" and redact_url(str(value)) != str(value):
                # a config file is shared and committed: the password stays in the environment
                lines.append(f"{key} = {_toml_value(redact_url(str(value)))}"
                             "   # password left out: give the full URL in DRSCORE_REDIS")
            else:
                lines.append(f"{key} = {_toml_value(value)}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
