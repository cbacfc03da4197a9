"""``drscore pages``: inspect, export and import the page cache.

- ``drscore pages export FILE [--cache DIR] [--only-ok]``: write a portable snapshot
- ``drscore pages import FILE [--cache DIR]``: load a snapshot (validated first), or
  DeepResearch Bench's ``scraped.jsonl`` (see :mod:`drscore.fetch.scraped`)
- ``drscore pages stats [--cache DIR]``: what the cache holds
- ``drscore pages get URL [--cache DIR] [--allow-private-fetch] [--offline-pages]``:
  fetch one URL through the same pool and policy as ``drscore run`` (debugging aid)
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import msgspec

from drscore.engine.runtime.extras import require
from drscore.fetch.pool import FetchPool
from drscore.fetch.snapshot import SnapshotError, export_snapshot, import_snapshot
from drscore.fetch.store import PageStore, store_path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``pages`` and its sub-commands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--cache", metavar="DIR", type=Path, default=None,
                        help="cache directory (default: $DRSCORE_CACHE or the user cache "
                             "dir); pages live in DIR/pages.sqlite")
    parser = subparsers.add_parser(
        "pages", help="inspect, export and import fetched web pages",
        description="The page cache holds every fetched cited page (text or failure). "
                    "Snapshots make runs reproducible offline (--offline-pages).")
    sub = parser.add_subparsers(dest="pages_command", metavar="COMMAND", required=True)

    p = sub.add_parser("export", parents=[common], help="write the page cache to a "
                       "portable snapshot (gzip JSONL)")
    p.add_argument("file", type=Path, help="snapshot file to write (e.g. pages.jsonl.gz)")
    p.add_argument("--only-ok", action="store_true",
                   help="export only pages with text (skip recorded failures)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", parents=[common],
                       help="load a snapshot into the page cache (newer entries win)")
    p.add_argument("file", type=Path, help="snapshot written by 'drscore pages export', or DeepResearch "
                   "Bench's scraped.jsonl (the page texts its FACT judge read)")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("stats", parents=[common], help="summarise the page cache")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("get", parents=[common],
                       help="fetch one URL (debug): print status and the start of the text")
    p.add_argument("url")
    p.add_argument("--allow-private-fetch", action="store_true",
                   help="DANGEROUS, local testing only: allow loopback/private addresses")
    p.add_argument("--offline-pages", action="store_true",
                   help="answer from the cache only; never touch the network")
    p.add_argument("--chars", type=int, default=1500, metavar="N",
                   help="how much of the text to print (default 1500)")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.set_defaults(func=cmd_get)


def _fail(args: argparse.Namespace, message: str) -> int:
    print(f"drscore pages {args.pages_command}: error: {message}", file=sys.stderr)
    return 2


def cmd_export(args: argparse.Namespace) -> int:
    """Export the cache to ``args.file``."""
    async def run() -> int:
        async with PageStore(store_path(args.cache)) as store:
            return await export_snapshot(store, args.file, only_ok=args.only_ok)
    try:
        count = asyncio.run(run())
    except OSError as exc:
        return _fail(args, f"{args.file}: {exc.strerror or exc}")
    print(f"exported {count} pages to {args.file}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Import ``args.file`` into the cache (all-or-nothing validation)."""
    from drscore.fetch.scraped import import_scraped, is_scraped_file

    scraped = is_scraped_file(args.file)

    async def run():  # type: ignore[no-untyped-def]
        async with PageStore(store_path(args.cache)) as store:
            if scraped:  # the benchmark's scraped.jsonl
                return await import_scraped(store, args.file)
            return await import_snapshot(store, args.file)
    try:
        summary = asyncio.run(run())
    except SnapshotError as exc:
        return _fail(args, str(exc))
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(summary.exported_at))
    print(f"imported {summary.pages} pages ({summary.ok} with text) from {args.file} "
          f"(exported {when}) into {store_path(args.cache)}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Print cache statistics as JSON."""
    async def run() -> dict:
        async with PageStore(store_path(args.cache)) as store:
            return await store.stats()
    stats = asyncio.run(run())
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(stats), indent=2).decode() + "\n")
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    """Fetch one URL through the pool; exit 0 if usable text was extracted, else 1."""
    if args.allow_private_fetch:
        print("WARNING: --allow-private-fetch disables the SSRF guard for loopback and "
              "private addresses. Use only for local testing.", file=sys.stderr)

    if not args.offline_pages:
        require("pages", "drscore pages get")

    async def run():  # type: ignore[no-untyped-def]
        async with FetchPool(args.cache, offline=args.offline_pages,
                             allow_private=args.allow_private_fetch) as pool:
            return await pool.get(args.url)
    res = asyncio.run(run())
    if args.json:
        sys.stdout.write(msgspec.json.encode(res).decode() + "\n")
        return 0 if res.ok else 1
    fetched = (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(res.fetched_at))
               if res.fetched_at else "-")
    print(f"status:      {res.status}")
    print(f"http status: {res.http_status if res.http_status is not None else '-'}")
    print(f"normalised:  {res.normalized_url}")
    print(f"final url:   {res.final_url or '-'}")
    print(f"fetched at:  {fetched}")
    print(f"hash:        {res.content_hash or '-'}")
    print(f"detail:      {res.detail or '-'}")
    if res.text:
        shown = res.text[:max(0, args.chars)]
        more = len(res.text) - len(shown)
        print(f"text ({len(res.text)} chars):\n{shown}" + (f"\n[... {more} more chars]"
                                                           if more > 0 else ""))
    return 0 if res.ok else 1
