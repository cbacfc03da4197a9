"""FetchPool against the local page server (127.0.0.1 / 127.0.0.2 only)."""
from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import socket
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import aiohttp
import pytest

from drscore.fetch.failures import classify_exception
from drscore.fetch.guard import SSRFRefused
from drscore.fetch.pool import FetchPool, _HostGate

DAY = 86400.0


class Clock:
    """A settable time source for TTL tests (no sleeping)."""

    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def make_pool(tmp_path: Path, extract_executor):  # type: ignore[no-untyped-def]
    """FetchPool factory: cache in tmp_path, only 127.0.0.1 allowed, shared workers."""
    def make(**kw) -> FetchPool:  # type: ignore[no-untyped-def]
        kw.setdefault("allow_networks", ["127.0.0.1/32"])
        kw.setdefault("per_host_rate", 1000.0)  # the rate limit is tested on its own
        kw.setdefault("executor", extract_executor)
        return FetchPool(kw.pop("cache_dir", tmp_path / "cache"), **kw)
    return make


async def test_html_page_is_fetched_and_extracted(server, make_pool) -> None:
    async with make_pool() as pool:
        res = await pool.get(server.url("/page/a"))
    assert res.status == "ok" and res.http_status == 200
    assert res.final_url == server.url("/page/a")
    for paragraph in server.article:  # real report paragraphs served as an article
        assert paragraph[:60] in res.text
    assert "SCRIPT-ONLY-TOKEN" not in res.text
    assert res.content_hash == hashlib.sha256(res.text.encode()).hexdigest()
    # The page's <title> opens the text, as the benchmark's scraper sends it to the judge.
    assert res.text.split("\n\n", 1)[0] == "Page a" and res.detail == "trafilatura; title and description first"
    assert server.hits["/page/a"] == 1


async def test_other_text_kinds(server, make_pool) -> None:
    async with make_pool() as pool:
        plain, md, js, latin, pdf, fallback, blank = await asyncio.gather(*(
            pool.get(server.url(p)) for p in ("/text.txt", "/doc.md", "/data.json", "/latin1",
                                              "/doc.pdf", "/comments-only", "/blank")))
    assert plain.text == "Plain line one.\nPlain line two."
    assert md.text == "# Title\n\nSome *markdown* text."
    assert js.text == '{"answer": 42, "unit": "widgets"}'
    assert latin.text == "Caf\u00e9 cr\u00e8me \u00e0 la fran\u00e7aise"  # iso-8859-1 decoded
    assert (pdf.status, pdf.text) == ("ok", "Quarterly revenue grew 17 percent")
    assert fallback.status == "ok" and fallback.detail == "visible-text fallback"
    assert fallback.text == "Reader note: the bridge reopened in May 2021."
    assert (blank.status, blank.text) == ("empty", "")


async def test_pdf_can_be_switched_off(server, make_pool) -> None:
    async with make_pool(pdf=False) as pool:
        res = await pool.get(server.url("/doc.pdf"))
    assert res.status == "not_text"


async def test_redirect_chain_is_followed_hop_by_hop(server, make_pool) -> None:
    async with make_pool() as pool:
        res = await pool.get(server.url("/redirect/3"))
        rel = await pool.get(server.url("/relative-redirect"))
        stats = pool.stats()
    assert res.status == "ok" and res.final_url == server.url("/page/final")
    assert "Page final" in res.text
    assert rel.status == "ok" and rel.final_url == server.url("/page/relative")
    assert [server.hits[f"/redirect/{n}"] for n in (3, 2, 1)] == [1, 1, 1]
    # 4 requests for the chain (3 redirects + page) and 2 for the relative redirect
    assert stats["http_requests"] == 6 and stats["fetched"] == 2


async def test_too_many_redirects(server, make_pool) -> None:
    async with make_pool(max_redirects=5) as pool:
        res = await pool.get(server.url("/redirect/9"))
        loop = await pool.get(server.url("/loop"))
    assert res.status == "error" and "too many redirects" in res.detail
    # hop 0 is /redirect/9; hops 1..5 follow to /redirect/4; the 6th redirect is refused
    assert [server.hits[f"/redirect/{n}"] for n in (9, 8, 7, 6, 5, 4, 3)] == [1] * 6 + [0]
    assert loop.status == "error" and server.hits["/loop"] == 6


async def test_slow_page_times_out(server, make_pool) -> None:
    async with make_pool(read_timeout=0.3) as pool:
        res = await pool.get(server.url("/slow"))
    assert res.status == "timeout"


async def test_dripping_server_hits_the_total_deadline(server, make_pool) -> None:
    # each byte arrives well within read_timeout, but connect + read timeouts (0.2 + 0.3 s)
    # also bound the whole hop, long before the 3 s the server would take
    async with make_pool(connect_timeout=0.2, read_timeout=0.3) as pool:
        res = await pool.get(server.url("/drip"))
    assert res.status == "timeout"


async def test_huge_streamed_page_is_cut_off(server, make_pool) -> None:
    async with make_pool() as pool:  # default max_bytes = 10 MB
        res = await pool.get(server.url("/huge"))
        downloaded = pool.stats()["bytes_downloaded"]
    assert res.status == "too_large" and "max_bytes=10000000" in res.detail
    assert await asyncio.to_thread(server.huge_done.wait, 10)
    # the client read just past 10 MB and hung up: the server never sent all 50 MB
    assert 10_000_000 < downloaded <= 10_000_000 + 65536
    assert server.huge_sent < 50 * 1024 * 1024


async def test_announced_huge_page_is_refused_before_reading(server, make_pool) -> None:
    async with make_pool() as pool:
        res = await pool.get(server.url("/huge-declared"))
        downloaded = pool.stats()["bytes_downloaded"]
    assert res.status == "too_large" and "Content-Length 52428800" in res.detail
    assert downloaded == 0


async def test_binary_content_is_not_text(server, make_pool) -> None:
    async with make_pool() as pool:
        png = await pool.get(server.url("/binary"))
        assert pool.stats()["bytes_downloaded"] == 0  # refused on the header alone
        fake_html = await pool.get(server.url("/binary-as-html"))
    assert png.status == "not_text" and "image/png" in png.detail
    assert fake_html.status == "not_text" and "binary content" in fake_html.detail


async def test_http_errors_are_classified(server, make_pool) -> None:
    async with make_pool() as pool:
        r404, r410, r500, r503 = await asyncio.gather(*(
            pool.get(server.url(f"/status/{c}")) for c in (404, 410, 500, 503)))
    assert (r404.status, r404.http_status, r404.detail) == ("http_4xx", 404, "HTTP 404 Not Found")
    assert (r410.status, r410.http_status) == ("http_4xx", 410)
    assert (r500.status, r500.http_status) == ("http_5xx", 500)
    assert (r503.status, r503.http_status) == ("http_5xx", 503)


async def test_connection_refused(make_pool) -> None:
    with socket.socket() as s:  # a port that was free a moment ago and is closed now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with make_pool() as pool:
        res = await pool.get(f"http://127.0.0.1:{port}/")
    assert res.status == "refused_connection"


async def test_dns_failure(server, make_pool, fake_resolver) -> None:
    resolver = fake_resolver({})  # every name fails with EAI_NONAME
    async with make_pool(resolver=resolver) as pool:
        res = await pool.get(f"http://nowhere.test:{server.port}/page/x")
    assert res.status == "dns" and resolver.calls == ["nowhere.test"]


async def test_redirect_to_other_loopback_address_is_refused_unless_allowed(
        server, make_pool, tmp_path: Path) -> None:
    async with make_pool() as pool:  # only 127.0.0.1/32 allowed
        refused = await pool.get(server.url("/to-private"))
    assert refused.status == "ssrf_refused"
    assert refused.detail.startswith("redirect 1 to http://127.0.0.2:") and "loopback" in refused.detail
    assert server.hits["/page/inside"] == 0
    async with make_pool(allow_networks=["127.0.0.0/8"], cache_dir=tmp_path / "c2") as pool:
        allowed = await pool.get(server.url("/to-private"))
    assert allowed.status == "ok" and allowed.final_url == f"{server.base2}/page/inside"
    assert server.hits["/page/inside"] == 1


async def test_allow_private_reaches_loopback(server, make_pool, caplog) -> None:
    async with make_pool(allow_networks=(), allow_private=True) as pool:
        res = await pool.get(server.url("/page/private-ok"))
    assert res.status == "ok"
    assert "SSRF GUARD RELAXED" in caplog.text


async def test_default_policy_refuses_loopback_without_connecting(server, make_pool) -> None:
    async with make_pool(allow_networks=()) as pool:
        direct = await pool.get(server.url("/page/direct"))
        numeric = await pool.get(f"http://2130706433:{server.port}/page/numeric")
        meta = await pool.get("http://169.254.169.254/latest/meta-data/")
        v6 = await pool.get("http://[::ffff:10.0.0.5]/")
        name = await pool.get("http://metadata.google.internal/computeMetadata/v1/")
        stats = pool.stats()
    assert [r.status for r in (direct, numeric, meta, v6, name)] == ["ssrf_refused"] * 5
    assert numeric.normalized_url == f"http://127.0.0.1:{server.port}/page/numeric"
    assert "cloud metadata" in meta.detail
    assert server.hits["/page/direct"] == server.hits["/page/numeric"] == 0
    assert stats["http_requests"] == 0  # refused before any request was attempted


async def test_redirect_to_metadata_is_refused(server, make_pool) -> None:
    async with make_pool() as pool:
        res = await pool.get(server.url("/to-metadata"))
    assert res.status == "ssrf_refused" and "169.254.169.254" in res.detail


async def test_name_resolving_to_private_address_is_refused_before_connecting(
        server, make_pool, fake_resolver, loopback_only) -> None:
    resolver = fake_resolver({"evil.test": ["10.0.0.5"], "good.test": ["127.0.0.1"],
                              "rebind.test": ["127.0.0.1", "10.0.0.5"]})
    async with make_pool(resolver=resolver) as pool:
        evil = await pool.get(f"http://evil.test:{server.port}/page/evil")
        via_redirect = await pool.get(server.url("/to-name/evil.test"))
        mixed = await pool.get(f"http://rebind.test:{server.port}/page/mixed")
        good = await pool.get(f"http://good.test:{server.port}/page/good")
    assert evil.status == "ssrf_refused" and "evil.test resolves to 10.0.0.5" in evil.detail
    assert via_redirect.status == "ssrf_refused" and via_redirect.detail.startswith("redirect 1")
    assert mixed.status == "ssrf_refused"
    # the vetted address is the one connected to: good.test reaches the loopback server
    assert good.status == "ok" and server.hits["/page/good"] == 1
    assert server.hits["/page/evil"] == server.hits["/page/mixed"] == 0
    assert resolver.calls.count("evil.test") == 2
    assert loopback_only == []  # no connection attempt left loopback


async def test_page_cited_twice_concurrently_is_fetched_once(server, make_pool) -> None:
    url = server.url("/page/shared")
    variants = [url, url + "#section-2", url.replace("http://", "HTTP://") + "?utm_source=x"]
    async with make_pool() as pool:
        results = await asyncio.gather(*(pool.get(v) for v in variants))
        again = await pool.get(url)
        stats = pool.stats()
    assert server.hits["/page/shared"] == 1
    assert [r.url for r in results] == variants  # each caller sees its own citation
    assert {r.normalized_url for r in results} == {url}
    assert all(r.status == "ok" and r.text == results[0].text for r in results + [again])
    assert stats["fetched"] == 1 and stats["in_flight_joins"] == 2 and stats["cache_hits"] == 1
    assert stats["requests"] == 4 and stats["by_status"] == {"ok": 4}


async def test_cache_survives_the_pool_and_ttl_expiry_refetches(server, make_pool) -> None:
    clock = Clock()
    url, missing = server.url("/page/ttl"), server.url("/status/404")
    async with make_pool(clock=clock) as pool:
        assert (await pool.get(url)).status == "ok"
        assert (await pool.get(missing)).status == "http_4xx"
    clock.now += 0.5 * DAY
    async with make_pool(clock=clock) as pool:  # new pool, same cache directory
        await pool.get(url)
        await pool.get(missing)
        assert pool.stats()["cache_hits"] == 2
    assert (server.hits["/page/ttl"], server.hits["/status/404"]) == (1, 1)
    clock.now += 1.0 * DAY  # 1.5 days: the failure (TTL 1 day) expired, the page did not
    async with make_pool(clock=clock) as pool:
        await pool.get(url)
        assert (await pool.get(missing)).fetched_at == clock.now
    assert (server.hits["/page/ttl"], server.hits["/status/404"]) == (1, 2)
    clock.now += 30 * DAY  # 31.5 days: the ok page (TTL 30 days) expired too
    async with make_pool(clock=clock) as pool:
        await pool.get(url)
    assert server.hits["/page/ttl"] == 2


async def test_offline_mode_uses_only_the_cache(server, make_pool) -> None:
    clock = Clock()
    async with make_pool(offline=True) as pool:
        res = await pool.get(server.url("/page/off"))
        assert pool._session is None  # no network session was ever created
    assert res.status == "offline_missing" and server.hits["/page/off"] == 0
    async with make_pool(clock=clock) as pool:
        online = await pool.get(server.url("/page/off"))
    clock.now += 365 * DAY  # long expired, but offline runs use what they have
    async with make_pool(offline=True, clock=clock) as pool:
        cached = await pool.get(server.url("/page/off"))
        missing = await pool.get(server.url("/page/never"))
        assert pool._session is None
    assert cached.status == "ok" and cached.text == online.text
    assert cached.fetched_at == online.fetched_at
    assert missing.status == "offline_missing"
    assert server.hits["/page/off"] == 1 and server.hits["/page/never"] == 0


async def test_policy_outcomes_are_not_cached(server, make_pool, tmp_path: Path) -> None:
    url = server.url("/to-private")
    async with make_pool() as pool:
        assert (await pool.get(url)).status == "ssrf_refused"
        bad = await pool.get("mailto:someone@example.com")
    assert bad.status == "invalid_url" and bad.normalized_url == "mailto:someone@example.com"
    # the same cache, a more permissive policy: the refusal was not remembered
    async with make_pool(allow_networks=["127.0.0.0/8"]) as pool:
        assert (await pool.get(url)).status == "ok"


async def test_per_host_concurrency_is_respected(server, make_pool) -> None:
    async with make_pool(per_host_concurrency=2) as pool:
        results = await asyncio.gather(*(pool.get(server.url(f"/busy/{i}")) for i in range(6)))
    assert [r.text for r in results] == [f"busy page {i}" for i in range(6)]
    assert server.max_active <= 2


def test_host_gate_expresses_fractional_rates() -> None:
    # asyncio-throttle takes whole requests per period: 5/s -> 5 per 1 s,
    # 0.5/s -> 1 per 2 s, 2.5/s -> 2 per 0.8 s
    for rate, (n, period) in {5.0: (5, 1.0), 0.5: (1, 2.0), 2.5: (2, 0.8)}.items():
        gate = _HostGate(4, rate)
        assert (gate._throttle.rate_limit, gate._throttle.period) == (n, pytest.approx(period))


async def test_closed_pool_refuses_work(make_pool) -> None:
    pool = make_pool()
    await pool.close()
    await pool.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        await pool.get("https://example.com/")


def test_bad_settings_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="per_host_rate"):
        FetchPool(tmp_path, per_host_rate=0)
    with pytest.raises(ValueError, match="allow_networks"):
        FetchPool(tmp_path, allow_networks=["10.0.0.0/99"])


def test_exception_classification() -> None:
    key = aiohttp.client_reqrep.ConnectionKey("h", 80, False, True, None, None, None)
    dns = aiohttp.ClientConnectorDNSError(key, OSError(-2, "Name or service not known"))
    ssrf = aiohttp.ClientConnectorDNSError(key, SSRFRefused("ssrf_refused: 10.0.0.5: private"))
    refused = aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "refused"))
    assert classify_exception(dns)[0] == "dns"
    assert classify_exception(ssrf) == ("ssrf_refused", "10.0.0.5: private")
    assert classify_exception(refused)[0] == "refused_connection"
    assert classify_exception(asyncio.TimeoutError())[0] == "timeout"
    assert classify_exception(aiohttp.ServerDisconnectedError())[0] == "error"


async def test_redirects_across_hosts_cannot_deadlock_the_limits(server, make_pool) -> None:
    # One global slot, one request per host at a time: pages that redirect from
    # 127.0.0.1 into 127.0.0.2 compete with direct 127.0.0.2 pages. A task must never
    # wait for the next host while holding the global slot, or this would hang.
    urls = [server.url("/to-private")] * 2 + [f"{server.base2}/page/direct-{i}" for i in range(3)]
    urls += [server.url("/redirect/2"), server.url("/page/one")]
    async with make_pool(allow_networks=["127.0.0.0/8"], concurrency=1,
                         per_host_concurrency=1) as pool:
        results = await asyncio.wait_for(asyncio.gather(*(pool.get(u) for u in urls)), 30)
    assert [r.status for r in results] == ["ok"] * len(urls)
    assert server.hits["/page/inside"] == 1  # the two identical citations: fetched once


class StuckExecutor(concurrent.futures.Executor):
    """Extraction that never finishes, or whose worker died."""

    def __init__(self, error: BaseException | None = None):
        self.error = error

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
        future: concurrent.futures.Future = concurrent.futures.Future()
        if self.error is not None:
            future.set_exception(self.error)
        return future


async def test_extraction_faults_are_errors_and_not_cached(server, make_pool) -> None:
    url = server.url("/page/fault")
    async with make_pool(executor=StuckExecutor(BrokenProcessPool("worker killed"))) as pool:
        died = await pool.get(url)
    async with make_pool(executor=StuckExecutor(), extract_timeout=0.2) as pool:
        stuck = await pool.get(url)
    assert died.status == "error" and "extraction worker died" in died.detail
    assert stuck.status == "error" and "extraction took longer than 0.2 s" in stuck.detail
    async with make_pool() as pool:  # neither fault was cached: a healthy pool refetches
        assert (await pool.get(url)).status == "ok"
    assert server.hits["/page/fault"] == 3
