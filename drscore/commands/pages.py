"""``drscore pages``: inspect, export and import the page cache.

- ``drscore pages export FILE [--cache DIR] [--only-ok]``: write a portable snapshot
- ``drscore pages import FILE [--cache DIR]``: load a snapshot (validated first), or
  DeepResearch Bench's ``scraped.jsonl`` (see :mod:`drscore.fetch.scraped`)
- ``drscore pages stats [--cache DIR]``: what the cache holds
- ``drscore pages get URL [--cache DIR] [--allow-private-fetch] [--offline-pages]``:
  fetch one URL through the same pool and policy as ``drscore run`` (debugging aid)
"""
from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click

import msgspec

from drscore.commands._framework import Group, argument, fail, inherited, option
from drscore.engine.runtime.extras import require
from drscore.fetch.pool import FetchPool
from drscore.fetch.snapshot import SnapshotError, export_snapshot, import_snapshot
from drscore.fetch.store import PageStore, store_path


_CACHE_HELP = ("cache directory (default: $DRSCORE_CACHE or the user cache dir); pages live in "
               "DIR/pages.sqlite")
# --cache is accepted before and after the action (drscore pages --cache DIR stats, drscore pages stats --cache DIR)
cache_dir_option = option("--cache", metavar="DIR", type=click.Path(path_type=Path), default=None, help=_CACHE_HELP)


@click.group("pages", cls=Group, short_help="inspect, export and import fetched web pages",
             help="The page cache holds every fetched cited page (text or failure). "
                  "Snapshots make runs reproducible offline (--offline-pages).")
@cache_dir_option
def command(cache: Path | None) -> None:
    """The group: its --cache is read by the action."""


def _args(**opts: Any) -> SimpleNamespace:
    ctx = click.get_current_context()
    return SimpleNamespace(**{**opts, "cache": inherited(ctx, "cache"), "pages_command": ctx.info_name})


@command.command("export", help="Write the page cache to a portable snapshot (gzip JSONL).")
@argument("file", type=click.Path(path_type=Path), help="snapshot file to write (e.g. pages.jsonl.gz)")
@cache_dir_option
@option("--only-ok", is_flag=True, help="export only pages with text (skip recorded failures)")
def export(**opts: Any) -> int:
    return cmd_export(_args(**opts))


@command.command("import", help="Load a snapshot into the page cache (newer entries win).")
@argument("file", type=click.Path(path_type=Path), help="snapshot written by 'drscore pages export', or "
          "DeepResearch Bench's scraped.jsonl (the page texts its FACT judge read)")
@cache_dir_option
def import_(**opts: Any) -> int:
    return cmd_import(_args(**opts))


@command.command("stats", help="Summarise the page cache.")
@cache_dir_option
def stats(**opts: Any) -> int:
    return cmd_stats(_args(**opts))


@command.command("get", help="Fetch one URL (debug): print status and the start of the text. Exit 0 when "
                 "usable text was extracted, else 1.")
@argument("url", help="the URL, as a report cites it")
@cache_dir_option
@option("--allow-private-fetch", is_flag=True, help="DANGEROUS, local testing only: allow loopback/private addresses")
@option("--offline-pages", is_flag=True, help="answer from the cache only; never touch the network")
@option("--chars", type=int, default=1500, metavar="N", help="how much of the text to print (default 1500)")
@option("--json", is_flag=True, help="print the full result as JSON")
def get(**opts: Any) -> int:
    return cmd_get(_args(**opts))


def _fail(args: SimpleNamespace, message: str) -> int:
    fail(message)


def cmd_export(args: SimpleNamespace) -> int:
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


def cmd_import(args: SimpleNamespace) -> int:
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


def cmd_stats(args: SimpleNamespace) -> int:
    """Print cache statistics as JSON."""
    async def run() -> dict:
        async with PageStore(store_path(args.cache)) as store:
            return await store.stats()
    stats = asyncio.run(run())
    sys.stdout.write(msgspec.json.format(msgspec.json.encode(stats), indent=2).decode() + "\n")
    return 0


def cmd_get(args: SimpleNamespace) -> int:
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
