"""Import DeepResearch Bench's ``scraped.jsonl`` into the page cache.

The benchmark's FACT pipeline stores the text it judged per cited URL: one line per
report, ``{id, ..., citations_deduped: {url: {facts, url_content}}}``. Importing those
texts lets a FACT run judge exactly the pages the benchmark judged (``--offline-pages``).

A ``url_content`` that is the scraper's failure placeholder (``"scrape failed: ..."``)
or empty is stored as a failed fetch (status ``error``, the placeholder kept as the
detail), so FACT treats the pair as unreadable, as the benchmark's judge answers
``unknown`` for it. Lines are validated first; nothing is written if one is bad.
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import msgspec

from drscore.fetch.content import content_hash
from drscore.fetch.snapshot import ImportSummary, SnapshotError, _open_lines
from drscore.fetch.store import PageRecord, PageStore, StoredPage
from drscore.fetch.urls import InvalidURL, normalize_url

SCRAPE_FAILED = "scrape failed"


class _Cited(msgspec.Struct):
    url_content: str | None = None


class _ScrapedLine(msgspec.Struct):
    citations_deduped: dict[str, _Cited] = {}


def looks_like_scraped(first_line: bytes) -> bool:
    """True when a JSONL line has the benchmark's ``citations_deduped`` shape."""
    try:
        obj = msgspec.json.decode(first_line)
    except msgspec.DecodeError:
        return False
    return isinstance(obj, dict) and isinstance(obj.get("citations_deduped"), dict)


def is_scraped_file(path: Path) -> bool:
    """True when the first non-blank line of ``path`` (gzip or plain) is a scraped.jsonl
    line; False for a drscore snapshot or anything unreadable (the snapshot importer
    then reports the problem)."""
    lines = _open_lines(Path(path))
    try:
        for _, line in lines:
            if line.strip():
                return looks_like_scraped(line)
    except SnapshotError:
        return False
    finally:
        lines.close()  # closes the file now, not at garbage collection
    return False


def scraped_pages(path: Path, *, clock: Any = time.time) -> list[StoredPage]:
    """Every URL's page from a scraped.jsonl (the last text seen for a URL wins).
    Raises :class:`SnapshotError` naming file and line."""
    decoder = msgspec.json.Decoder(_ScrapedLine)
    now = clock()
    pages: dict[str, StoredPage] = {}
    for lineno, line in _open_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise SnapshotError(f"{where}: not a scraped.jsonl line: {exc}") from None
        for url, cited in obj.citations_deduped.items():
            if cited.url_content is None:
                continue  # never scraped: nothing to import
            try:
                norm = normalize_url(url)
            except InvalidURL as exc:
                raise SnapshotError(f"{where}: URL {url!r}: {exc}") from None
            text = cited.url_content
            failed = not text.strip() or text.strip()[:len(SCRAPE_FAILED)].lower() == SCRAPE_FAILED
            if failed:
                record = PageRecord(url=norm, status="error", http_status=None, final_url=None,
                                    fetched_at=now, content_hash=None,
                                    detail=text.strip()[:500] or "empty page in scraped.jsonl")
                pages[norm] = StoredPage(record, "")
            else:
                record = PageRecord(url=norm, status="ok", http_status=200, final_url=url, fetched_at=now,
                                    content_hash=content_hash(text), detail="imported from scraped.jsonl")
                pages[norm] = StoredPage(record, text)
    return list(pages.values())


async def import_scraped(store: PageStore, path: Path) -> ImportSummary:
    """Load a scraped.jsonl into ``store`` (validated fully before anything is written)."""
    pages = await asyncio.to_thread(scraped_pages, Path(path))
    await store.put_many(pages)
    return ImportSummary(pages=len(pages), ok=sum(p.record.status == "ok" for p in pages),
                         exported_at=pages[0].record.fetched_at if pages else time.time())
