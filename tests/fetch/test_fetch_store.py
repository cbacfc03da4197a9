"""Page store: WAL file, batched writes, content stored once by hash, TTL policy."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from drscore.fetch.content import content_hash
from drscore.fetch.store import PageRecord, PageStore, StoredPage, store_path


def ok_record(url: str, text: str, fetched_at: float = 1000.0) -> PageRecord:
    return PageRecord(url=url, status="ok", http_status=200, final_url=url,
                      fetched_at=fetched_at, content_hash=content_hash(text), detail="text")


def test_store_path_default_and_explicit(tmp_path: Path, monkeypatch) -> None:
    assert store_path(tmp_path) == tmp_path / "pages.sqlite"
    monkeypatch.setenv("DRSCORE_CACHE", str(tmp_path / "env"))
    assert store_path() == tmp_path / "env" / "pages.sqlite"


async def test_put_get_round_trip_and_dedup_by_hash(tmp_path: Path) -> None:
    path = tmp_path / "pages.sqlite"
    text = "Same page body. " * 100
    async with PageStore(path) as store:
        store.put(ok_record("https://a.com/1", text), text)
        store.put(ok_record("https://a.com/2", text), text)  # mirror: same text, same hash
        store.put(PageRecord(url="https://a.com/404", status="http_4xx", http_status=404,
                             final_url="https://a.com/404", fetched_at=1000.0,
                             content_hash=None, detail="HTTP 404 Not Found"))
        # queued pages are visible before they reach the file
        assert (await store.get("https://a.com/1")).text == text
    async with PageStore(path) as store:  # reopened: everything was flushed on close
        one = await store.get("https://a.com/1")
        assert one == StoredPage(ok_record("https://a.com/1", text), text)
        assert (await store.get("https://a.com/404")).record.status == "http_4xx"
        assert await store.get("https://a.com/missing") is None
        stats = await store.stats()
    assert stats["pages"] == 3 and stats["by_status"] == {"http_4xx": 1, "ok": 2}
    assert stats["contents"] == 1  # two URLs, one stored text
    assert stats["text_chars"] == len(text) == 1600  # 16 chars x 100
    assert stats["compressed_bytes"] < 200  # a repeated string compresses well
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_older_fetch_never_replaces_newer(tmp_path: Path) -> None:
    async with PageStore(tmp_path / "p.sqlite") as store:
        store.put(ok_record("https://a.com/", "new text", fetched_at=2000.0), "new text")
        await store.flush()
        await store.put_many([StoredPage(ok_record("https://a.com/", "old text", 1000.0),
                                         "old text")])
        assert (await store.get("https://a.com/")).text == "new text"
        await store.put_many([StoredPage(ok_record("https://a.com/", "newest", 3000.0),
                                         "newest")])
        assert (await store.get("https://a.com/")).text == "newest"


async def test_batches_flush_in_background(tmp_path: Path) -> None:
    path = tmp_path / "p.sqlite"
    async with PageStore(path, batch_size=4) as store:
        for i in range(10):
            store.put(ok_record(f"https://a.com/{i}", f"text {i}"), f"text {i}")
        await store.flush()
        with sqlite3.connect(path) as db:  # a second connection sees committed rows
            assert db.execute("SELECT COUNT(*) FROM pages").fetchone()[0] == 10
        pages = [p async for p in store.iter_pages(chunk=3)]
    assert [p.record.url for p in pages] == sorted(f"https://a.com/{i}" for i in range(10))
    assert pages[0].text == "text 0"


async def test_put_rejects_a_hash_without_text(tmp_path: Path) -> None:
    async with PageStore(tmp_path / "p.sqlite") as store:
        with pytest.raises(ValueError, match="text"):
            store.put(ok_record("https://a.com/", "body"))  # text forgotten


def test_ttl_policy() -> None:
    day = 86400.0
    ok = ok_record("https://a.com/", "x", fetched_at=0.0)
    fail = PageRecord(url="https://a.com/", status="timeout", http_status=None, final_url=None,
                      fetched_at=0.0, content_hash=None, detail="")
    ttl = {"ttl_ok_s": 30 * day, "ttl_fail_s": day}
    assert not ok.expired(29 * day, **ttl) and ok.expired(31 * day, **ttl)
    assert not fail.expired(0.5 * day, **ttl) and fail.expired(1.5 * day, **ttl)


async def test_two_stores_share_one_file(tmp_path: Path) -> None:
    # two connections (as two processes would have) write concurrently without
    # "database is locked": WAL plus a busy timeout
    path = tmp_path / "shared.sqlite"
    async with PageStore(path) as a, PageStore(path) as b:
        for i in range(50):
            a.put(ok_record(f"https://a.com/{i}", f"a{i}"), f"a{i}")
            b.put(ok_record(f"https://b.com/{i}", f"b{i}"), f"b{i}")
        await a.flush()
        await b.flush()
        assert (await a.get("https://b.com/7")).text == "b7"
        assert (await a.stats())["pages"] == 100


async def test_damaged_rows_read_as_counted_misses_and_the_rest_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "pages.sqlite"
    texts = {u: f"Body of page {u}. " * 20 for u in ("https://a.com/1", "https://a.com/2", "https://a.com/3")}
    async with PageStore(path) as store:
        for url, text in texts.items():
            store.put(ok_record(url, text), text)
    with sqlite3.connect(path) as db:
        # 1: a status that is not UTF-8; 2: text that does not decompress
        db.execute("UPDATE pages SET status = CAST(x'ff6f6b' AS TEXT) WHERE url = 'https://a.com/1'")
        db.execute("UPDATE contents SET text = x'00ff00' WHERE hash = ?", (content_hash(texts["https://a.com/2"]),))
    async with PageStore(path) as store:
        assert await store.get("https://a.com/1") is None
        assert await store.get("https://a.com/2") is None
        assert (await store.get("https://a.com/3")).text == texts["https://a.com/3"]
        assert store.damaged == 2
        exported = [p.record.url async for p in store.iter_pages()]
        assert exported == ["https://a.com/3"]  # damaged rows are not exported either
        # a new fetch of a damaged page replaces it
        store.put(ok_record("https://a.com/1", "fresh text", fetched_at=2000.0), "fresh text")
        await store.flush()
    async with PageStore(path) as store:
        assert (await store.get("https://a.com/1")).text == "fresh text"
