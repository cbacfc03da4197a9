"""Fetching cited web pages: pool, SSRF guard, extraction, page store and snapshots.

Modules (user documentation: ``docs/fetching.md``):

- ``fetch.pool``: :class:`~fetch.pool.FetchPool`, the ``engine.evidence.PageSource`` used
  by runs (limits, redirects, in-flight de-duplication, cache, statistics);
- ``fetch.urls``: ``normalize_url``, the cache key and the URL actually fetched;
- ``fetch.guard``: the SSRF policy, applied before each hop, after DNS resolution and
  before ``connect()``;
- ``fetch.content``: text-like or not, content kinds, charset decoding, content hash
  (light, used on the event loop);
- ``fetch.extract``: body -> text with trafilatura / visible-text fallback / pypdf (runs
  in worker processes only);
- ``fetch.failures``: exception -> page status;
- ``fetch.store``: the page cache (``<cache_dir>/pages.sqlite``);
- ``fetch.snapshot``: portable export/import of the page cache.
"""
