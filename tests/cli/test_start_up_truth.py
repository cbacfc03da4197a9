"""What ``drscore run`` says before it scores: with ``--offline-pages``, how many of the
cited pages the page cache holds (the rest count as unreachable); the dry run counts the
cached and missing pages and claims no fetch offline mode will not make."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

from drscore.cli import main
from drscore.engine.text.citations import cited_urls
from drscore.fetch.store import PageRecord, PageStore, store_path
from drscore.fetch.urls import normalized_set
from support.data import ROOT

EXAMPLES = ROOT / "examples"
REPORTS = EXAMPLES / "reports.claude-3-7-sonnet.jsonl"


def _cited(limit: int) -> list[str]:
    import json

    urls: set[str] = set()
    with open(REPORTS, encoding="utf-8") as f:
        for _, line in zip(range(limit), f):
            urls |= normalized_set(cited_urls(json.loads(line)["article"]))
    return sorted(urls)


def _store_one(cache: Path, url: str) -> None:
    async def put() -> None:
        async with PageStore(store_path(cache)) as store:
            store.put(PageRecord(url=url, status="ok", http_status=200, final_url=url, fetched_at=time.time(),
                                 content_hash="h1", detail=""), "page text")
            await store.flush()

    asyncio.run(put())


def _run(tmp: Path, *extra: str) -> list[str]:
    return ["run", "--methods", "fact", "--tasks", str(EXAMPLES / "tasks.jsonl"), "--reports", str(REPORTS),
            "--limit", "2", "--cache", str(tmp / "cache"), *extra]


def test_offline_pages_says_how_many_cited_pages_the_cache_holds(tmp_path, capsys):
    cited = _cited(2)
    assert len(cited) > 2
    _store_one(tmp_path / "cache", cited[0])
    main(_run(tmp_path, "--offline-pages", "--out", str(tmp_path / "run")))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "--offline-pages:" in line]
    assert len(lines) == 1
    assert (f"--offline-pages: 1 of {len(cited)} cited pages are in the page cache "
            f"({store_path(tmp_path / 'cache')}); the other {len(cited) - 1} cannot be read offline") in lines[0]


def test_the_dry_run_counts_cached_and_missing_pages(tmp_path, capsys):
    cited = _cited(2)
    _store_one(tmp_path / "cache", cited[0])
    assert main(_run(tmp_path, "--dry-run")) == 0
    out = capsys.readouterr().out
    n = int(out.split("  pages: ")[1].split(" cited")[0])
    assert n >= len(cited)  # what the methods would ask for: the parsed citations at least
    assert f"  pages: {n} cited, 1 in the page cache; would be fetched: {n - 1}" in out
    # the other pages' text is a stand-in, which the input estimate's bar says nothing of
    assert f"    the {n - 1} not in the page cache are planned with stand-ins of a typical length" in out
    assert main(_run(tmp_path, "--dry-run", "--offline-pages")) == 0
    out = capsys.readouterr().out
    assert f"  pages: {n} cited, 1 in the page cache; --offline-pages: the other {n - 1} would not be fetched" in out
    assert "would be fetched" not in out
    assert "stand-ins" not in out  # unfetched pages count as unreachable: no text is planned for them
