"""``drscore cache stats|vacuum|export|import|explain|check``."""
from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

import orjson

from drscore.commands._common import run_async
from drscore.engine.runtime.cache import CHECK_COLUMNS, JudgeCache, check_row
from drscore.engine.runtime.paths import default_cache_dir
from drscore.engine.runtime.sqlitefile import CacheFileError, check_file, describe, salvage_rows

_CACHE_HELP = "cache directory (default: $DRSCORE_CACHE or the user cache dir)"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="inspect and maintain the judge cache")
    p.add_argument("--cache", metavar="DIR", help=_CACHE_HELP)
    # --cache is accepted after the action too (drscore cache check --cache DIR)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--cache", metavar="DIR", default=argparse.SUPPRESS, help=_CACHE_HELP)
    cs = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    cs.add_parser("stats", parents=[common], help="entries and size, by template and model")
    v = cs.add_parser("vacuum", parents=[common], help="delete old entries and compact the file")
    v.add_argument("--older-than-days", type=float, help="delete entries older than this")
    v.add_argument("--template", help="delete entries of this prompt template only")
    e = cs.add_parser("export", parents=[common], help="write all entries to a portable gzip JSONL file")
    e.add_argument("file")
    i = cs.add_parser("import", parents=[common], help="merge entries from an exported file")
    i.add_argument("file")
    x = cs.add_parser("explain", parents=[common], help="show what a key was computed from")
    x.add_argument("key")
    c = cs.add_parser("check", parents=[common], help="check judge.sqlite and pages.sqlite for damage",
                      description="Check the cache files (header, SQLite integrity, unreadable rows). "
                                  "Exit 0 when sound, 1 when damaged. With --repair, a damaged file is "
                                  "moved aside (FILE.bad-TIME) and replaced by a new file holding every "
                                  "row that could still be read. Run it while no drscore process uses "
                                  "the cache.")
    c.add_argument("--repair", action="store_true",
                   help="move damaged files aside and rebuild them from their readable rows")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    if args.cache_command == "check":
        return check(Path(args.cache or default_cache_dir()), repair=args.repair)
    return run_async(_run(args))


async def _run(args: argparse.Namespace) -> int:
    path = Path(args.cache or default_cache_dir()) / "judge.sqlite"
    cache = await JudgeCache.open(path)
    try:
        if args.cache_command == "stats":
            print(orjson.dumps(await cache.stats(), option=orjson.OPT_INDENT_2).decode())
        elif args.cache_command == "vacuum":
            older = args.older_than_days * 86400 if args.older_than_days is not None else None
            n = await cache.vacuum(older_than_s=older, template=args.template)
            print(f"deleted {n} entries; compacted {path}")
        elif args.cache_command == "export":
            n = await cache.export(args.file)
            skipped = f" ({cache.damaged} damaged entries skipped)" if cache.damaged else ""
            print(f"exported {n} entries to {args.file}{skipped}")
        elif args.cache_command == "import":
            print(f"imported {await cache.import_(args.file)} entries from {args.file}")
        elif args.cache_command == "explain":
            info = await cache.explain(args.key)
            if info is None:
                print(f"no entry with key {args.key}")
                return 1
            print(orjson.dumps(info, option=orjson.OPT_INDENT_2).decode())
        return 0
    except sqlite3.Error as exc:
        raise CacheFileError(path, describe(exc)) from None
    finally:
        await cache.close()


# --- check / repair ---------------------------------------------------------------------

def _file_specs() -> dict[str, tuple[str, dict[str, tuple[str, object]]]]:
    """Per cache file: its schema and, per table, the columns to read and a row check."""
    from drscore.engine.runtime import cache as judge_cache
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
        aside, kept = _rebuild(path, schema, tables)
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
