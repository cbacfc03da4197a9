"""Fetching cited web pages: pool, SSRF guard, extraction, page store and snapshots."""
