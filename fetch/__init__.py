"""Fetching cited web pages: pool, SSRF guard, extraction, page store and snapshots.
It implements the runtime's ``PageSource`` protocol and imports only the runtime; the
engine never imports it (only :mod:`drscore.api` wires it in). Extraction needs the
``pages`` extra (trafilatura), PDF text the ``pdf`` extra.

Modules (user documentation: ``docs/fetching.md``):

- ``drscore.fetch.pool``: :class:`~drscore.fetch.pool.FetchPool`, the ``drscore.engine.runtime.evidence.PageSource`` used
  by runs (limits, redirects, in-flight de-duplication, cache, statistics);
- ``drscore.fetch.urls``: ``normalize_url``, the cache key and the URL actually fetched;
- ``drscore.fetch.guard``: the SSRF policy, applied before each hop, after DNS resolution and
  before ``connect()``;
- ``drscore.fetch.content``: text-like or not, content kinds, charset decoding, content hash
  (light, used on the event loop);
- ``drscore.fetch.extract``: body -> text with trafilatura / visible-text fallback / pypdf (runs
  in worker processes only);
- ``drscore.fetch.failures``: exception -> page status;
- ``drscore.fetch.store``: the page cache (``<cache_dir>/pages.sqlite``);
- ``drscore.fetch.snapshot``: portable export/import of the page cache;
- ``drscore.fetch.planning``: a dry run's pages (stored ones as they are, a stand-in of their
  mean length for the rest; nothing fetched).
"""
