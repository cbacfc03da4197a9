"""Page store: ``<cache_dir>/pages.sqlite`` (aiosqlite, WAL, busy timeout).

Two tables: ``pages`` maps a normalised URL to the outcome of its last fetch (status,
HTTP status, final URL, fetch time, content hash, detail), and ``contents`` maps a
content hash to the zlib-compressed extracted text, so identical pages are stored once.
Writes are queued and committed in batches by one writer task per store (one
transaction per batch), which keeps several processes sharing the file from fighting
over the lock. A row is only replaced by a newer fetch (``fetched_at``), so importing
an old snapshot never overwrites fresher pages.

Expiry (TTL) is decided by the caller (:meth:`PageRecord.expired`), not by the key.

A damaged file fails fast with :class:`CacheFileError` (one line: the file and what to
do; nothing is left open). A damaged row (text that is not UTF-8, text that does not
decompress) reads as a miss, is counted in ``damaged`` and logged, and is replaced by
the next fetch. A SQLite error while the store is in use is kept in ``failure`` (the
run stops on it) and the lookup reads as a miss.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import zlib
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path
from typing import Any

import aiosqlite
import msgspec

from drscore.engine.runtime.paths import default_cache_dir
from drscore.engine.runtime.sqlitefile import CacheFileError, describe, is_damaged, open_db

log = logging.getLogger("drscore.fetch")

STORE_FILENAME = "pages.sqlite"
SCHEMA_VERSION = 1
_INLINE_DECOMPRESS_LIMIT = 256 * 1024  # larger blobs are decompressed off the loop

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pages (
    url TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    http_status INTEGER,
    final_url TEXT,
    fetched_at REAL NOT NULL,
    content_hash TEXT,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS contents (
    hash TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    text BLOB NOT NULL
);
"""
_UPSERT_PAGE = """
INSERT INTO pages (url, status, http_status, final_url, fetched_at, content_hash, detail)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(url) DO UPDATE SET
    status = excluded.status, http_status = excluded.http_status,
    final_url = excluded.final_url, fetched_at = excluded.fetched_at,
    content_hash = excluded.content_hash, detail = excluded.detail
WHERE excluded.fetched_at >= pages.fetched_at
"""
_INSERT_CONTENT = "INSERT OR IGNORE INTO contents (hash, size, text) VALUES (?, ?, ?)"


class PageRecord(msgspec.Struct, frozen=True):
    """The stored outcome of fetching one normalised URL."""
    url: str  # normalised
    status: str
    http_status: int | None
    final_url: str | None
    fetched_at: float
    content_hash: str | None
    detail: str

    def expired(self, now: float, *, ttl_ok_s: float, ttl_fail_s: float) -> bool:
        """True when the record is older than its TTL (ok pages and failures differ)."""
        ttl = ttl_ok_s if self.status == "ok" else ttl_fail_s
        return now - self.fetched_at > ttl


class StoredPage(msgspec.Struct, frozen=True):
    """A record with its text ("" when the fetch failed)."""
    record: PageRecord
    text: str


def check_content_row(row: tuple) -> bool:
    """A ``contents`` row (hash, size, text) whose text decompresses to UTF-8 (for
    ``drscore cache check``)."""
    try:
        zlib.decompress(row[2]).decode("utf-8")
    except (TypeError, zlib.error, UnicodeDecodeError):
        return False
    return True


def store_path(cache_dir: Path | None = None) -> Path:
    """``<cache_dir>/pages.sqlite`` (default cache dir from ``drscore.engine.runtime.paths``)."""
    return Path(cache_dir if cache_dir is not None else default_cache_dir()) / STORE_FILENAME


def _compress_batch(items: list[tuple[str, str]]) -> list[tuple[str, int, bytes]]:
    return [(h, len(t), zlib.compress(t.encode("utf-8"), 6)) for h, t in items]


class PageStore:
    """Async page cache. ``async with PageStore(path) as store:`` or ``open()``/``close()``.

    ``put`` is synchronous and only queues; queued pages are visible to ``get`` at once
    and reach the file within ``flush_interval_s`` (or on ``flush()``/``close()``).
    """

    def __init__(self, path: Path, *, flush_interval_s: float = 0.25, batch_size: int = 256,
                 busy_timeout_ms: int = 30_000):
        self.path = Path(path)
        self.flush_interval_s = flush_interval_s
        self.batch_size = batch_size
        self.busy_timeout_ms = busy_timeout_ms
        self._db: aiosqlite.Connection | None = None
        self._pending: dict[str, StoredPage] = {}
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._write_lock = asyncio.Lock()
        self._write_error: BaseException | None = None
        self._closing = False
        self.failure: CacheFileError | None = None
        self.damaged = 0

    async def open(self) -> PageStore:
        """Create the file and schema if needed, and start the writer task."""
        db = await open_db(self.path, pragmas=(
            f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}", "PRAGMA journal_mode = WAL",
            "PRAGMA synchronous = NORMAL"), schema=_SCHEMA)
        try:
            await db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                             ("schema_version", str(SCHEMA_VERSION)))
            await db.commit()
            async with db.execute("SELECT value FROM meta WHERE key = 'schema_version'") as cur:
                row = await cur.fetchone()
        except sqlite3.Error as exc:
            await db.close()
            raise CacheFileError(self.path, describe(exc)) from None
        except BaseException:
            await db.close()
            raise
        if row is None or not str(row[0]).isdigit() or int(row[0]) != SCHEMA_VERSION:
            await db.close()
            raise CacheFileError(self.path, f"page store schema version {row and row[0]} is not "
                                 f"supported (expected {SCHEMA_VERSION})")
        self._db = db
        self._writer = asyncio.create_task(self._write_loop(), name="page-store-writer")
        return self

    async def __aenter__(self) -> PageStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("PageStore is not open")
        return self._db

    async def get(self, url: str) -> StoredPage | None:
        """The stored page for a normalised URL (queued writes included), or None."""
        pending = self._pending.get(url)
        if pending is not None:
            return pending
        if self.failure is not None:
            return None
        try:
            async with self.db.execute(
                    "SELECT p.url, p.status, p.http_status, p.final_url, p.fetched_at, "
                    "p.content_hash, p.detail, c.text FROM pages p "
                    "LEFT JOIN contents c ON c.hash = p.content_hash WHERE p.url = ?",
                    (url,)) as cur:
                row = await cur.fetchone()
        except sqlite3.Error as exc:
            if self.failure is None:
                self.failure = CacheFileError(self.path, describe(exc))
                log.error("%s", self.failure)
            return None
        if row is None:
            return None
        return await self._stored(row)

    async def _stored(self, row: Sequence[Any] | sqlite3.Row) -> StoredPage | None:
        """A row as a StoredPage, or None (counted) when it is damaged or its text is lost."""
        if any(is_damaged(v) for v in row[:7]) or not isinstance(row[4], (int, float)):
            self._damaged(row[0])
            return None
        record = PageRecord(*row[:7])
        blob = row[7]
        if record.content_hash and blob is None:
            return None  # text lost (e.g. a partial copy of the file): treat as a miss
        if blob is not None and not isinstance(blob, bytes):
            self._damaged(row[0])
            return None
        try:
            text = await self._decompress(blob) if blob else ""
        except (zlib.error, UnicodeDecodeError):
            self._damaged(row[0])
            return None
        return StoredPage(record, text)

    def _damaged(self, url: object) -> None:
        self.damaged += 1
        if self.damaged <= 3:
            log.warning("%s: the stored page for %s is damaged; treated as a miss", self.path,
                        url if not is_damaged(url) else "(unreadable URL)")

    @staticmethod
    async def _decompress(blob: bytes) -> str:
        if len(blob) <= _INLINE_DECOMPRESS_LIMIT:
            return zlib.decompress(blob).decode("utf-8")
        return await asyncio.to_thread(lambda: zlib.decompress(blob).decode("utf-8"))

    def put(self, record: PageRecord, text: str = "") -> None:
        """Queue a page for the next batch (a newer queued fetch of the URL wins)."""
        if self._write_error is not None:
            raise RuntimeError(f"page store writer failed: {self._write_error}")
        if bool(record.content_hash) != bool(text):
            raise ValueError(f"{record.url}: a page has text exactly when it has a "
                             f"content hash")
        old = self._pending.get(record.url)
        if old is None or record.fetched_at >= old.record.fetched_at:
            self._pending[record.url] = StoredPage(record, text)
        if len(self._pending) >= self.batch_size:
            self._wake.set()

    async def flush(self) -> None:
        """Write every queued page now (one transaction)."""
        async with self._write_lock:
            if not self._pending:
                return
            batch, self._pending = self._pending, {}
            try:
                await self._write(batch.values())
            except BaseException:
                # keep the pages queued so a later flush can retry them
                for url, page in batch.items():
                    self._pending.setdefault(url, page)
                raise

    async def _write(self, pages: Iterable[StoredPage]) -> None:
        pages = list(pages)
        texts = {p.record.content_hash: p.text for p in pages if p.record.content_hash}
        contents = await asyncio.to_thread(_compress_batch, list(texts.items()))
        rows = [(r.url, r.status, r.http_status, r.final_url, r.fetched_at, r.content_hash,
                 r.detail) for r in (p.record for p in pages)]
        await self.db.executemany(_INSERT_CONTENT, contents)
        await self.db.executemany(_UPSERT_PAGE, rows)
        await self.db.commit()

    async def _write_loop(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.flush_interval_s)
            self._wake.clear()
            try:
                await self.flush()
            except Exception as exc:  # surfaced to the next put()/close()
                self._write_error = exc
                if isinstance(exc, sqlite3.Error) and self.failure is None:
                    self.failure = CacheFileError(self.path, describe(exc))
                return

    async def put_many(self, pages: Iterable[StoredPage]) -> None:
        """Write pages directly in one transaction (bulk import)."""
        async with self._write_lock:
            await self._write(pages)

    async def iter_pages(self, *, only_ok: bool = False,
                         chunk: int = 500) -> AsyncIterator[StoredPage]:
        """All stored pages ordered by URL, read in chunks (bounded memory)."""
        await self.flush()
        last = ""
        where = "AND p.status = 'ok' " if only_ok else ""
        while True:
            async with self.db.execute(
                    "SELECT p.url, p.status, p.http_status, p.final_url, p.fetched_at, "
                    "p.content_hash, p.detail, c.text FROM pages p "
                    "LEFT JOIN contents c ON c.hash = p.content_hash "
                    f"WHERE p.url > ? {where}ORDER BY p.url LIMIT ?", (last, chunk)) as cur:
                rows = list(await cur.fetchall())
            if not rows:
                return
            for row in rows:
                stored = await self._stored(row)
                if stored is not None:  # damaged or text missing: nothing portable to export
                    yield stored
            last = rows[-1][0]

    async def stats(self) -> dict:
        """Counts by status, distinct contents, stored bytes, oldest/newest fetch."""
        try:
            return await self._stats()
        except sqlite3.Error as exc:
            raise CacheFileError(self.path, describe(exc)) from None

    async def _stats(self) -> dict:
        await self.flush()
        async with self.db.execute(
                "SELECT status, COUNT(*) FROM pages GROUP BY status ORDER BY status") as cur:
            by_status = {s: n for s, n in await cur.fetchall()}
        async with self.db.execute(
                "SELECT COUNT(*), COALESCE(SUM(size), 0), COALESCE(SUM(LENGTH(text)), 0) "
                "FROM contents") as cur:
            contents = await cur.fetchone()
        async with self.db.execute("SELECT MIN(fetched_at), MAX(fetched_at) FROM pages") as cur:
            span = await cur.fetchone()
        # aggregate queries without GROUP BY return one row
        assert contents is not None and span is not None
        n_contents, text_chars, stored_bytes = contents
        oldest, newest = span
        return {"path": str(self.path), "pages": sum(by_status.values()),
                "by_status": by_status, "contents": n_contents, "text_chars": text_chars,
                "compressed_bytes": stored_bytes, "oldest_fetched_at": oldest,
                "newest_fetched_at": newest}

    async def close(self) -> None:
        """Flush queued pages, stop the writer and close the file."""
        if self._db is None:
            return
        if self._writer is not None:
            # let the writer finish its current batch rather than cancel it mid-transaction
            self._closing = True
            self._wake.set()
            await self._writer
            self._writer = None
        try:
            if self._write_error is None and self.failure is None:
                await self.flush()
        except sqlite3.Error as exc:
            self.failure = self.failure or CacheFileError(self.path, describe(exc))
        finally:
            await self._db.close()
            self._db = None
        if self.failure is not None:
            raise self.failure
        if self._write_error is not None:
            raise RuntimeError(f"page store writer failed: {self._write_error}")


def count_stored(path: Path, urls: Iterable[str]) -> int:
    """How many of ``urls`` (normalised) the page store at ``path`` holds (synchronous, read
    only: a dry run never creates the file). 0 when there is no store."""
    if not path.is_file():
        return 0
    wanted = list(dict.fromkeys(urls))
    found = 0
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    try:
        for i in range(0, len(wanted), 500):
            part = wanted[i:i + 500]
            found += db.execute(f"SELECT COUNT(*) FROM pages WHERE url IN ({','.join('?' * len(part))})",
                                part).fetchone()[0]
    except sqlite3.Error:
        return found
    finally:
        db.close()
    return found
