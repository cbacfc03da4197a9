"""Snapshots: export / import round trip, validation with file:line errors."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from drscore.fetch.content import content_hash
from drscore.fetch.snapshot import SnapshotError, export_snapshot, import_snapshot
from drscore.fetch.store import PageRecord, PageStore, StoredPage


def page(url: str, text: str, fetched_at: float = 1_700_000_000.0) -> StoredPage:
    return StoredPage(PageRecord(url=url, status="ok", http_status=200, final_url=url,
                                 fetched_at=fetched_at, content_hash=content_hash(text),
                                 detail="trafilatura"), text)


FAILED = StoredPage(PageRecord(url="https://b.org/gone", status="http_4xx", http_status=404,
                               final_url="https://b.org/gone", fetched_at=1_700_000_100.0,
                               content_hash=None, detail="HTTP 404 Not Found"), "")


async def fill(path: Path, pages: list[StoredPage]) -> None:
    async with PageStore(path) as store:
        await store.put_many(pages)


def write_snapshot(path: Path, lines: list[dict | str]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for line in lines:
            f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    return path


HEADER = {"format": "drscore-pages", "version": 1, "exported_at": 1_700_000_500.0,
          "tool": "drscore"}


def entry(**over) -> dict:  # type: ignore[no-untyped-def]
    text = over.pop("text", "Some page text.")
    base = {"url": "https://a.com/x", "status": "ok", "http_status": 200,
            "final_url": "https://a.com/x", "fetched_at": 1_700_000_000.0,
            "content_hash": content_hash(text), "detail": "", "text": text}
    return {**base, **over}


async def test_export_import_round_trip(tmp_path: Path) -> None:
    pages = [page("https://a.com/1", "First page \u6709\u673a text."),
             page("https://a.com/2", "Second page."), FAILED]
    await fill(tmp_path / "src" / "pages.sqlite", pages)
    snap = tmp_path / "pages.jsonl.gz"
    async with PageStore(tmp_path / "src" / "pages.sqlite") as store:
        assert await export_snapshot(store, snap, clock=lambda: 1_700_000_500.0) == 3
    lines = gzip.decompress(snap.read_bytes()).decode().splitlines()
    assert json.loads(lines[0]) == HEADER
    assert json.loads(lines[-1]) == {"end": True, "pages": 3}
    assert json.loads(lines[1])["text"] == "First page \u6709\u673a text."
    async with PageStore(tmp_path / "dst" / "pages.sqlite") as store:
        summary = await import_snapshot(store, snap)
        got = [p async for p in store.iter_pages()]
    assert (summary.pages, summary.ok, summary.exported_at) == (3, 2, 1_700_000_500.0)
    assert got == sorted(pages, key=lambda p: p.record.url)
    assert not (tmp_path / "pages.jsonl.gz.partial").exists()


async def test_export_only_ok(tmp_path: Path) -> None:
    await fill(tmp_path / "pages.sqlite", [page("https://a.com/1", "x"), FAILED])
    async with PageStore(tmp_path / "pages.sqlite") as store:
        assert await export_snapshot(store, tmp_path / "s.gz", only_ok=True) == 1


async def test_import_keeps_newer_local_pages(tmp_path: Path) -> None:
    db = tmp_path / "pages.sqlite"
    await fill(db, [page("https://a.com/x", "fresh local text", fetched_at=1_700_000_900.0)])
    snap = write_snapshot(tmp_path / "s.gz", [HEADER, entry(text="old snapshot text"),
                                              {"end": True, "pages": 1}])
    async with PageStore(db) as store:
        await import_snapshot(store, snap)
        assert (await store.get("https://a.com/x")).text == "fresh local text"


async def test_plain_jsonl_and_url_renormalised(tmp_path: Path) -> None:
    snap = tmp_path / "s.jsonl"
    snap.write_text("\n".join(json.dumps(x) for x in [
        HEADER, entry(url="HTTPS://A.com/x#frag"), {"end": True, "pages": 1}]) + "\n")
    async with PageStore(tmp_path / "pages.sqlite") as store:
        await import_snapshot(store, snap)
        assert (await store.get("https://a.com/x")).text == "Some page text."


@pytest.mark.parametrize("lines, message", [
    ([], "empty file"),
    ([{"format": "something-else", "version": 1}], "not a drscore page snapshot"),
    ([{**HEADER, "version": 2}], "version 2 is not supported"),
    ([HEADER, "{not json", {"end": True, "pages": 0}], ":2: not valid JSON"),
    ([HEADER, entry(status="great"), {"end": True, "pages": 1}], ":2: field 'status'"),
    ([HEADER, entry(fetched_at="yesterday"), {"end": True, "pages": 1}], r":2: .*fetched_at"),
    ([HEADER, entry(extra=1), {"end": True, "pages": 1}], ":2: .*unknown field"),
    ([HEADER, entry(), entry(content_hash="0" * 64), {"end": True, "pages": 2}],
     ":3: field 'content_hash' does not match"),
    ([HEADER, entry(url="ftp://a.com/x"), {"end": True, "pages": 1}], ":2: field 'url'"),
    ([HEADER, entry(status="timeout", content_hash=None), {"end": True, "pages": 1}],
     ":2: field 'text': only 'ok' pages"),
    ([HEADER, entry(), {"end": True, "pages": 5}], ":3: trailer says 5 pages but the file has 1"),
    ([HEADER, entry()], "truncated"),
])
async def test_invalid_snapshots_are_rejected_with_file_and_line(
        tmp_path: Path, lines: list, message: str) -> None:
    snap = write_snapshot(tmp_path / "bad.jsonl.gz", lines)
    async with PageStore(tmp_path / "pages.sqlite") as store:
        with pytest.raises(SnapshotError, match=message) as info:
            await import_snapshot(store, snap)
        assert str(snap) in str(info.value)
        assert (await store.stats())["pages"] == 0  # all or nothing


async def test_truncated_gzip_is_detected(tmp_path: Path) -> None:
    good = write_snapshot(tmp_path / "good.gz", [HEADER] + [entry(url=f"https://a.com/{i}",
                                                                  text=f"text {i} " * 50)
                                                            for i in range(200)]
                          + [{"end": True, "pages": 200}])
    cut = tmp_path / "cut.gz"
    cut.write_bytes(good.read_bytes()[:len(good.read_bytes()) // 2])
    async with PageStore(tmp_path / "pages.sqlite") as store:
        with pytest.raises(SnapshotError, match="corrupt or truncated"):
            await import_snapshot(store, cut)
        assert (await store.stats())["pages"] == 0


async def test_missing_file(tmp_path: Path) -> None:
    async with PageStore(tmp_path / "pages.sqlite") as store:
        with pytest.raises(SnapshotError, match="cannot read"):
            await import_snapshot(store, tmp_path / "nope.gz")
