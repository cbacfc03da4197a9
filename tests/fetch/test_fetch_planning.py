"""Page text for a dry run: stored pages as they are, a stand-in of their mean length for
the rest, and the fixed placeholder without a store."""
from __future__ import annotations

import hashlib

from drscore.engine.runtime.evidence import PlaceholderPages
from drscore.fetch.planning import PlanningPages, planning_pages
from drscore.fetch.store import PageRecord, PageStore, StoredPage
from drscore.fetch.urls import normalize_url


def _page(url: str, text: str) -> StoredPage:
    url = normalize_url(url)
    return StoredPage(PageRecord(url=url, status="ok", http_status=200, final_url=url, fetched_at=1.0,
                                 content_hash=hashlib.sha256(text.encode()).hexdigest(), detail=""), text)


async def test_without_a_store_the_fixed_placeholder(tmp_path):
    pages, store = await planning_pages(tmp_path)
    assert store is None and type(pages) is PlaceholderPages
    assert len((await pages.get("https://a.example/x")).text) == 12_000


async def test_stored_pages_as_they_are_and_their_mean_length_for_the_rest(tmp_path):
    async with PageStore(tmp_path / "pages.sqlite") as store:
        await store.put_many([_page("https://a.example/short", "a" * 1_000), _page("https://b.example/long", "b" * 3_000),
                              StoredPage(PageRecord(url="https://c.example/gone", status="http_4xx", http_status=404,
                                                    final_url=None, fetched_at=1.0, content_hash=None, detail=""), "")])
    pages, store = await planning_pages(tmp_path)
    try:
        assert isinstance(pages, PlanningPages) and isinstance(pages, PlaceholderPages)  # KAE plans the worst case
        assert (await pages.get("https://b.example/long")).text == "b" * 3_000  # stored: as it is
        other = await pages.get("https://new.example/page")
        assert other.ok and len(other.text) == 2_000  # the mean of the two stored texts, failures not counted
        assert set(other.text) <= {"a", "b", "\n"} and pages.found == 1
        assert pages.urls == {"https://b.example/long", "https://new.example/page"}
    finally:
        assert store is not None
        await store.close()
