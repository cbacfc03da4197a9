"""Page text for a dry run, which fetches nothing: a page the store already holds as it
is, and for every other page a stand-in as long as the stored pages are on average.

A dry run's input estimate for the methods that read cited pages (FACT, factuality, KAE)
is mostly page text, and a fixed placeholder (12,000 characters) is right only for pages
of that length. Pages from earlier runs (``<cache_dir>/pages.sqlite``) say what this
user's cited pages are like: their mean length, and a sample of their text for the mix of
scripts (Chinese pages count more tokens a character than English ones). Reading the
store is not fetching: nothing leaves the machine.
"""
from __future__ import annotations

from pathlib import Path

from drscore.engine.runtime.evidence import PageResult, PlaceholderPages
from drscore.fetch.store import PageStore
from drscore.fetch.urls import InvalidURL, normalize_url

SAMPLE_PAGES = 20  # stored pages whose text makes up the stand-in


class PlanningPages(PlaceholderPages):
    """Stored pages as they are; the rest ``sample`` (see the module)."""

    def __init__(self, store: PageStore, sample: str) -> None:
        super().__init__(chars=len(sample))
        self._text = sample
        self.store = store
        self.found = 0  # pages the store held

    async def get(self, url: str) -> PageResult:
        try:
            norm = normalize_url(url)
        except InvalidURL:
            return await super().get(url)
        page = await self.store.get(norm)
        if page is None or page.record.status != "ok" or not page.text:
            return await super().get(url)
        self.urls.add(url)
        self.found += 1
        return PageResult(url=url, normalized_url=norm, status="ok", text=page.text, detail="dry run: stored page")


async def planning_pages(cache_dir: Path) -> tuple[PlaceholderPages, PageStore | None]:
    """The page source for a dry run with ``cache_dir``, and the store to close after it
    (None when there is no store: then the fixed placeholder)."""
    path = Path(cache_dir) / "pages.sqlite"
    if not path.is_file():
        return PlaceholderPages(), None
    store = await PageStore(path).open()
    try:
        async with store.db.execute(
                "SELECT AVG(c.size), COUNT(*) FROM pages p JOIN contents c ON c.hash = p.content_hash "
                "WHERE p.status = 'ok'") as cur:
            row = await cur.fetchone()
        mean, count = (row or (None, 0))
        if not count or not mean:
            return PlaceholderPages(), store
        texts: list[str] = []
        async for page in store.iter_pages(only_ok=True, chunk=SAMPLE_PAGES):
            if page.text:
                texts.append(page.text)
            if len(texts) >= SAMPLE_PAGES:
                break
        joined = "\n\n".join(texts)
        if not joined:
            return PlaceholderPages(), store
        length = int(mean)
        sample = (joined * (length // len(joined) + 1))[:length]
        return PlanningPages(store, sample), store
    except BaseException:
        await store.close()
        raise
