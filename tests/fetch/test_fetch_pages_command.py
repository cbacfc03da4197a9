"""``drscore pages ...`` sub-commands, driven through the command line."""
from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import pytest

from drscore.cli import main
from drscore.fetch.content import content_hash
from drscore.fetch.store import PageRecord, PageStore, StoredPage


def run_cli(*argv: str) -> int:
    return main(list(argv))


def seed(cache: Path, n: int) -> None:
    async def fill() -> None:
        async with PageStore(cache / "pages.sqlite") as store:
            await store.put_many(StoredPage(PageRecord(
                url=f"https://a.com/{i}", status="ok", http_status=200, final_url=None,
                fetched_at=1_700_000_000.0 + i, content_hash=content_hash(f"page {i}"),
                detail="text"), f"page {i}") for i in range(n))
    asyncio.run(fill())


def test_export_import_stats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed(tmp_path / "a", 3)
    snap = tmp_path / "pages.jsonl.gz"
    assert run_cli("pages", "export", str(snap), "--cache", str(tmp_path / "a")) == 0
    assert "exported 3 pages" in capsys.readouterr().out
    assert json.loads(gzip.decompress(snap.read_bytes()).splitlines()[-1]) == \
        {"end": True, "pages": 3}
    assert run_cli("pages", "import", str(snap), "--cache", str(tmp_path / "b")) == 0
    assert "imported 3 pages (3 with text)" in capsys.readouterr().out
    assert run_cli("pages", "stats", "--cache", str(tmp_path / "b")) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["pages"] == 3 and stats["by_status"] == {"ok": 3}
    assert stats["text_chars"] == 18  # "page 0".."page 2": 3 texts x 6 chars


def test_import_error_names_file_and_line(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "drscore-pages", "version": 1, "exported_at": 1.0, '
                   '"tool": "drscore"}\n{"url": 3}\n')
    assert run_cli("pages", "import", str(bad), "--cache", str(tmp_path / "c")) == 1  # an error, not usage
    err = capsys.readouterr().err
    assert f"{bad}:2:" in err and err.startswith("drscore: error: ")  # the one error prefix of every command


def test_get_prints_status_and_text(server, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    url = server.url("/text.txt")
    cache = str(tmp_path / "cache")
    # the default policy refuses loopback: the debug command shows why
    assert run_cli("pages", "get", url, "--cache", cache) == 1
    assert "status:      ssrf_refused" in capsys.readouterr().out
    assert server.hits["/text.txt"] == 0
    assert run_cli("pages", "get", url, "--cache", cache, "--allow-private-fetch") == 0
    captured = capsys.readouterr()
    assert "status:      ok" in captured.out and "Plain line one." in captured.out
    assert "WARNING: --allow-private-fetch" in captured.err
    # offline: the page fetched above is served from the cache, an unknown one is missing
    assert run_cli("pages", "get", url, "--cache", cache, "--offline-pages", "--json") == 0
    assert json.loads(capsys.readouterr().out)["text"] == "Plain line one.\nPlain line two."
    assert run_cli("pages", "get", server.url("/doc.md"), "--cache", cache,
                   "--offline-pages") == 1
    assert "offline_missing" in capsys.readouterr().out
    assert server.hits["/text.txt"] == 1 and server.hits["/doc.md"] == 0
