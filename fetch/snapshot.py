"""Portable page snapshots: ``drscore pages export FILE`` / ``drscore pages import FILE``.

Format: gzip-compressed JSON Lines, UTF-8.

- line 1, header: ``{"format": "drscore-pages", "version": 1, "exported_at": <unix s>,
  "tool": "drscore"}``
- one line per page: ``{"url", "status", "http_status", "final_url", "fetched_at",
  "content_hash", "detail", "text"}`` (``url`` normalised, ``content_hash`` = SHA-256
  of the UTF-8 ``text``, failures carry their status and an empty text)
- last line, trailer: ``{"end": true, "pages": <count>}``, so a truncated file is
  detected instead of silently importing part of it.

Import validates the whole file first (header, every field of every line, hashes,
trailer count) and writes nothing if anything is wrong; errors name the file and line.
Plain (not gzipped) JSONL is accepted too. On import, a page already in the cache is
replaced only by a snapshot entry fetched at the same time or later.
"""
from __future__ import annotations

import asyncio
import gzip
import itertools
import math
import os
import time
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any

import msgspec

from drscore.engine.runtime.evidence import PAGE_STATUSES
from drscore.fetch.content import content_hash
from drscore.fetch.store import PageRecord, PageStore, StoredPage
from drscore.fetch.urls import InvalidURL, normalize_url

FORMAT = "drscore-pages"
VERSION = 1
_BATCH = 500
# Statuses that describe a fetch outcome; offline_missing is a lookup result, never stored.
_STORABLE = frozenset(PAGE_STATUSES) - {"offline_missing"}


class SnapshotError(ValueError):
    """A snapshot file is unreadable or invalid; the message names file and line."""


class SnapshotHeader(msgspec.Struct, forbid_unknown_fields=True):
    format: str
    version: int
    exported_at: float
    tool: str


class SnapshotPage(msgspec.Struct, forbid_unknown_fields=True):
    url: str
    status: str
    http_status: int | None
    final_url: str | None
    fetched_at: float
    content_hash: str | None
    detail: str
    text: str


class SnapshotEnd(msgspec.Struct, forbid_unknown_fields=True):
    end: bool
    pages: int


class ImportSummary(msgspec.Struct):
    """What an import did: pages read from the file, of which ``ok`` had text."""
    pages: int
    ok: int
    exported_at: float


_encoder = msgspec.json.Encoder()


def _page_line(page: StoredPage) -> bytes:
    r = page.record
    return _encoder.encode(SnapshotPage(
        url=r.url, status=r.status, http_status=r.http_status, final_url=r.final_url,
        fetched_at=r.fetched_at, content_hash=r.content_hash, detail=r.detail,
        text=page.text)) + b"\n"


async def export_snapshot(store: PageStore, path: Path, *, only_ok: bool = False,
                          clock: Any = time.time) -> int:
    """Write every stored page (or only ``ok`` ones) to ``path``; returns the page count.

    Written to a temporary file renamed at the end, so a crash never leaves a
    half-written snapshot under the final name.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".partial")
    out = await asyncio.to_thread(gzip.GzipFile, tmp, "wb")
    count = 0
    try:
        header = SnapshotHeader(format=FORMAT, version=VERSION, exported_at=clock(),
                                tool="drscore")
        lines = [_encoder.encode(header) + b"\n"]
        async for page in store.iter_pages(only_ok=only_ok):
            lines.append(_page_line(page))
            count += 1
            if len(lines) >= _BATCH:
                await asyncio.to_thread(out.writelines, lines)
                lines = []
        lines.append(_encoder.encode(SnapshotEnd(end=True, pages=count)) + b"\n")
        await asyncio.to_thread(out.writelines, lines)
        await asyncio.to_thread(out.close)
        os.replace(tmp, path)
    except BaseException:
        out.close()
        tmp.unlink(missing_ok=True)
        raise
    return count


def _open_lines(path: Path) -> Generator[tuple[int, bytes], None, None]:
    """(line number, line) of a gzip or plain JSONL file."""
    try:
        with open(path, "rb") as raw:
            gzipped = raw.read(2) == b"\x1f\x8b"
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot read: {exc.strerror or exc}") from None
    opener = gzip.open if gzipped else open
    try:
        with opener(path, "rb") as f:
            for lineno, line in enumerate(f, 1):
                yield lineno, line
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise SnapshotError(f"{path}: corrupt or truncated file: {exc}") from None


def _validated(path: Path) -> Iterator[tuple[int, SnapshotHeader | StoredPage]]:
    """Parse and check each line; raises SnapshotError naming file and line."""
    saw_header = False
    end: SnapshotEnd | None = None
    count = 0
    for lineno, line in _open_lines(path):
        where = f"{path}:{lineno}"
        if not line.strip():
            continue
        if end is not None:
            raise SnapshotError(f"{where}: data after the end-of-snapshot line")
        try:
            obj = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            raise SnapshotError(f"{where}: not valid JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise SnapshotError(f"{where}: expected a JSON object")
        if not saw_header:
            yield lineno, _check_header(obj, where)
            saw_header = True
            continue
        if "end" in obj:
            end = _convert(obj, SnapshotEnd, where)
            if end.pages != count:
                raise SnapshotError(f"{where}: trailer says {end.pages} pages but the file "
                                    f"has {count}")
            continue
        yield lineno, _check_page(_convert(obj, SnapshotPage, where), where)
        count += 1
    if not saw_header:
        raise SnapshotError(f"{path}: empty file (no snapshot header)")
    if end is None:
        raise SnapshotError(f"{path}: no end-of-snapshot line: the file is truncated")


def _convert(obj: dict, kind: type, where: str) -> Any:
    try:
        return msgspec.convert(obj, kind)
    except msgspec.ValidationError as exc:
        raise SnapshotError(f"{where}: {exc}") from None


def _check_header(obj: dict, where: str) -> SnapshotHeader:
    if obj.get("format") != FORMAT:
        raise SnapshotError(f"{where}: not a drscore page snapshot (header 'format' is "
                            f"{obj.get('format')!r}, expected {FORMAT!r})")
    header = _convert(obj, SnapshotHeader, where)
    if header.version != VERSION:
        raise SnapshotError(f"{where}: snapshot version {header.version} is not supported "
                            f"(this drscore reads version {VERSION})")
    return header


def _check_page(page: SnapshotPage, where: str) -> StoredPage:
    if page.status not in _STORABLE:
        raise SnapshotError(f"{where}: field 'status': unknown status {page.status!r}")
    try:
        url = normalize_url(page.url)
    except InvalidURL as exc:
        raise SnapshotError(f"{where}: field 'url': {exc}") from None
    if not math.isfinite(page.fetched_at) or page.fetched_at <= 0 \
            or page.fetched_at > time.time() + 86400:
        raise SnapshotError(f"{where}: field 'fetched_at': {page.fetched_at} is not a "
                            f"plausible Unix time")
    if page.status == "ok" and not (page.text and page.content_hash):
        raise SnapshotError(f"{where}: an 'ok' page needs 'text' and 'content_hash'")
    if page.status != "ok" and page.text:
        raise SnapshotError(f"{where}: field 'text': only 'ok' pages carry text")
    if page.content_hash is not None and page.content_hash != content_hash(page.text):
        raise SnapshotError(f"{where}: field 'content_hash' does not match the SHA-256 of "
                            f"'text' (file corrupted or edited)")
    record = PageRecord(url=url, status=page.status, http_status=page.http_status,
                        final_url=page.final_url, fetched_at=page.fetched_at,
                        content_hash=page.content_hash if page.status == "ok" else None,
                        detail=page.detail)
    return StoredPage(record, page.text)


_Batch = list[tuple[int, SnapshotHeader | StoredPage]]


async def _batches(path: Path) -> AsyncIterator[_Batch]:
    """Validated pages in batches, parsed (and gunzipped) in a worker thread."""
    lines = _validated(path)
    while True:
        batch = await asyncio.to_thread(lambda: list(itertools.islice(lines, _BATCH)))
        if not batch:
            return
        yield batch


async def import_snapshot(store: PageStore, path: Path) -> ImportSummary:
    """Validate ``path`` completely, then load its pages into ``store``.

    Raises :class:`SnapshotError` (nothing written) if any line is invalid.
    """
    path = Path(path)
    header: SnapshotHeader | None = None
    pages = ok = 0
    async for batch in _batches(path):  # pass 1: validate everything, keep nothing
        for _, item in batch:
            if isinstance(item, SnapshotHeader):
                header = item
            else:
                pages += 1
                ok += item.record.status == "ok"
    assert header is not None  # _validated guarantees a header
    async for batch in _batches(path):  # pass 2: write, in bounded batches
        await store.put_many(item for _, item in batch if isinstance(item, StoredPage))
    return ImportSummary(pages=pages, ok=ok, exported_at=header.exported_at)
