"""Pages cited by reports, as methods see them. ``fetch/`` implements :class:`PageSource`."""
from __future__ import annotations

from typing import Protocol

import msgspec

# Failure classes of a fetch; "ok" means usable text was extracted.
PAGE_STATUSES = (
    "ok", "dns", "timeout", "http_4xx", "http_5xx", "refused_connection", "too_large",
    "not_text", "empty", "ssrf_refused", "invalid_url", "offline_missing", "error",
)


class PageResult(msgspec.Struct, kw_only=True):
    url: str  # as cited
    normalized_url: str
    status: str  # one of PAGE_STATUSES
    text: str = ""
    final_url: str | None = None
    http_status: int | None = None
    content_hash: str | None = None
    fetched_at: float | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class PageSource(Protocol):
    async def get(self, url: str) -> PageResult: ...


class PlaceholderPages:
    """A page source for dry runs: every URL "resolves" to placeholder text of a typical
    length, so methods plan their calls and token counts without fetching anything."""

    def __init__(self, chars: int = 12000) -> None:
        self._text = ("placeholder page text for cost planning " * (chars // 40 + 1))[:chars]
        self.urls: set[str] = set()

    async def get(self, url: str) -> PageResult:
        self.urls.add(url)
        return PageResult(url=url, normalized_url=url, status="ok", text=self._text, detail="dry-run placeholder")
