"""``drscore cache stats|vacuum|export|import|explain|check``."""
from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import click
import orjson

from drscore.commands._common import run_async
from drscore.commands._framework import Group, argument, fail, inherited, option
from drscore.engine.runtime.calls.cache import CHECK_COLUMNS, JudgeCache, check_row
from drscore.engine.runtime.paths import default_cache_dir
from drscore.engine.runtime.sqlitefile import CacheFileError, check_file, describe, salvage_rows

_CACHE_HELP = "cache directory (default: $DRSCORE_CACHE or the user cache dir)"
# --cache is accepted before and after the action (drscore cache --cache DIR stats, drscore cache stats --cache DIR)
cache_dir_option = option("--cache", metavar="DIR", help=_CACHE_HELP)


@click.group("cache", cls=Group, help="Inspect and maintain the judge cache.",
             short_help="inspect and maintain the judge cache")
@cache_dir_option
def command(cache: str | None) -> None:
    """The group: its --cache is read by the action (see :func:`_dir`)."""


def _dir() -> Path:
    return Path(inherited(click.get_current_context(), "cache") or default_cache_dir())


@command.command("stats", short_help="entries and size, by template and model",
                 help="Entries and size, by template and model, as JSON. Reads only: a cache that does not "
                      "exist yet is reported empty, not created.")
@cache_dir_option
def stats(cache: str | None) -> int:
    path = _dir() / "judge.sqlite"
    if not path.parent.exists() or (path.parent.is_dir() and not path.exists()):  # a file there is an error
        print(orjson.dumps(JudgeCache.empty_stats(path), option=orjson.OPT_INDENT_2).decode())
        return 0
    return run_async(_with_cache(path, _stats))


@command.command("vacuum", help="Delete old entries and compact the file.")
@cache_dir_option
@option("--older-than-days", type=float, help="delete entries older than this")
@option("--template", help="delete entries of this prompt template only")
def vacuum(cache: str | None, older_than_days: float | None, template: str | None) -> int:
    path = _dir() / "judge.sqlite"

    async def go(c: JudgeCache) -> int:
        older = older_than_days * 86400 if older_than_days is not None else None
        n = await c.vacuum(older_than_s=older, template=template)
        print(f"deleted {n} entries; compacted {path}")
        return 0
    return run_async(_with_cache(path, go))


@command.command("export", help="Write all entries to a portable gzip JSONL file.")
@argument("file", help="file to write (e.g. judge-cache.jsonl.gz)")
@cache_dir_option
def export(file: str, cache: str | None) -> int:
    async def go(c: JudgeCache) -> int:
        n = await c.export(file)
        skipped = f" ({c.damaged} damaged entries skipped)" if c.damaged else ""
        print(f"exported {n} entries to {file}{skipped}")
        return 0
    return run_async(_with_cache(_dir() / "judge.sqlite", go))


@command.command("import", help="Merge entries from an exported file.")
@argument("file", help="file written by `drscore cache export`")
@cache_dir_option
def import_(file: str, cache: str | None) -> int:
    if not Path(file).is_file():
        fail(f"{file}: no such file")

    async def go(c: JudgeCache) -> int:
        print(f"imported {await c.import_(file)} entries from {file}")
        return 0
    return run_async(_with_cache(_dir() / "judge.sqlite", go))


@command.command("explain", help="Show what a key was computed from, and the answer stored under it. "
                 "KEY may be the start of a key (as long as it names one entry). Exit 1 when no entry has it.")
@argument("key", help="a cache key (64 hex characters) or its first characters")
@cache_dir_option
def explain(key: str, cache: str | None) -> int:
    path = _dir() / "judge.sqlite"
    if not path.exists():
        fail(f"no entry with key {key}: {path} does not exist")

    async def go(c: JudgeCache) -> int:
        info = await c.explain(key)
        if info is None:
            fail(f"no entry with key {key} in {path}")
        print(orjson.dumps(info, option=orjson.OPT_INDENT_2).decode())
        return 0
    return run_async(_with_cache(path, go))


@command.command("check", short_help="check judge.sqlite and pages.sqlite for damage",
                 help="Check the cache files (header, SQLite integrity, unreadable rows). "
                      "Exit 0 when sound, 1 when damaged. With --repair, a damaged file is "
                      "moved aside (FILE.bad-TIME) and replaced by a new file holding every "
                      "row that could still be read. Run it while no drscore process uses "
                      "the cache.")
@cache_dir_option
@option("--repair", is_flag=True, help="move damaged files aside and rebuild them from their readable rows")
def check_command(cache: str | None, repair: bool) -> int:
    return check(_dir(), repair=repair)


async def _stats(c: JudgeCache) -> int:
    print(orjson.dumps(await c.stats(), option=orjson.OPT_INDENT_2).decode())
    return 0


async def _with_cache(path: Path, action: Callable[[JudgeCache], Awaitable[int]]) -> int:
    cache = await JudgeCache.open(path)
    try:
        return await action(cache)
    except sqlite3.Error as exc:
        raise CacheFileError(path, describe(exc)) from None
    finally:
        await cache.close()


# --- check / repair ---------------------------------------------------------------------

# What earlier runs learned, carried over by a repair too (not checked row by row: a file
# from before a table existed has none of it, and is sound).
KEPT_TOO: dict[str, dict[str, str]] = {"judge.sqlite": {
    "token_counts": "model, fit, updated",
    "template_token_counts": "model, template, fit, updated",
    "output_caps": "model, template, answers, updated",
    "quotas": "endpoint, quota, updated"}}


def _file_specs() -> dict[str, tuple[str, dict[str, tuple[str, object]]]]:
    """Per cache file: its schema and, per table, the columns to read and a row check."""
    from drscore.engine.runtime.calls import cache as judge_cache
    from drscore.fetch import store as page_store

    return {
        "judge.sqlite": (judge_cache._SCHEMA, {"responses": (CHECK_COLUMNS, check_row)}),
        page_store.STORE_FILENAME: (page_store._SCHEMA, {
            "meta": ("key, value", None),
            "pages": ("url, status, http_status, final_url, fetched_at, content_hash, detail", None),
            "contents": ("hash, size, text", page_store.check_content_row)}),
    }


def check(cache_dir: Path, *, repair: bool = False) -> int:
    """``drscore cache check``: report each file's problems; with ``repair`` rebuild the
    damaged ones from their readable rows. Exit 0 sound (or repaired), 1 damaged."""
    if cache_dir.exists() and not cache_dir.is_dir():
        raise CacheFileError(cache_dir, "is a file, but the cache needs a directory here",
                             hint="give --cache a directory")
    damaged = False
    for name, (schema, tables) in _file_specs().items():
        path = cache_dir / name
        if not path.exists():
            print(f"{path}: absent (created on first use)")
            continue
        problems = check_file(path, tables=tables)  # type: ignore[arg-type]
        if not problems:
            print(f"{path}: ok")
            continue
        print(f"{path}: DAMAGED: " + "; ".join(problems))
        if not repair:
            damaged = True
            continue
        aside, kept = _rebuild(path, schema, {**tables, **{t: (c, None) for t, c in KEPT_TOO.get(name, {}).items()}})
        print(f"{path}: rebuilt with {kept} readable row(s); the damaged file is kept as {aside}")
    if damaged:
        print("run `drscore cache check --repair` (no drscore process may use the cache meanwhile) "
              "or move the damaged file aside", file=sys.stderr)
        return 1
    return 0


def _rebuild(path: Path, schema: str, tables: dict[str, tuple[str, object]]) -> tuple[Path, int]:
    """Move ``path`` (and its -wal/-shm) aside and write a new file from its readable rows."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.bad-{stamp}")
    for suffix in ("-wal", "-shm", ""):
        src = Path(str(path) + suffix)
        if src.exists():
            src.rename(Path(str(aside) + suffix))
    kept = 0
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(schema)
        for table, (columns, row_check) in tables.items():
            names = [c.strip() for c in columns.replace("CAST(response AS BLOB)", "response").split(",")]
            marks = ",".join("?" * len(names))
            for row in salvage_rows(aside, table, columns, row_check):  # type: ignore[arg-type]
                cur = db.execute(f"INSERT OR IGNORE INTO {table} ({', '.join(names)}) VALUES ({marks})", row)
                kept += cur.rowcount
    return aside, kept
