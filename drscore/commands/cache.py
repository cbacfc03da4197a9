"""``drscore cache stats|vacuum|export|import|explain``."""
from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from drscore.commands._common import run_async
from drscore.engine.runtime.cache import JudgeCache
from drscore.engine.runtime.paths import default_cache_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="inspect and maintain the judge cache")
    p.add_argument("--cache", metavar="DIR", help="cache directory (default: $DRSCORE_CACHE or the user cache dir)")
    cs = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    cs.add_parser("stats", help="entries and size, by template and model")
    v = cs.add_parser("vacuum", help="delete old entries and compact the file")
    v.add_argument("--older-than-days", type=float, help="delete entries older than this")
    v.add_argument("--template", help="delete entries of this prompt template only")
    e = cs.add_parser("export", help="write all entries to a portable gzip JSONL file")
    e.add_argument("file")
    i = cs.add_parser("import", help="merge entries from an exported file")
    i.add_argument("file")
    x = cs.add_parser("explain", help="show what a key was computed from")
    x.add_argument("key")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
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
            print(f"exported {await cache.export(args.file)} entries to {args.file}")
        elif args.cache_command == "import":
            print(f"imported {await cache.import_(args.file)} entries from {args.file}")
        elif args.cache_command == "explain":
            info = await cache.explain(args.key)
            if info is None:
                print(f"no entry with key {args.key}")
                return 1
            print(orjson.dumps(info, option=orjson.OPT_INDENT_2).decode())
        return 0
    finally:
        await cache.close()
