"""FetchPool: the ``drscore.engine.runtime.evidence.PageSource`` that fetches cited pages.

One ``get(url)`` = normalise the URL -> join an identical fetch already in flight, or
answer from the page store if the entry is fresh (or if offline), or fetch it:

- limits: per-host concurrency and per-host rate (asyncio-throttle) are taken first, then
  a global slot (``concurrency``), so a flood of URLs on one slow host never starves the
  others. The global slot is held until the page is extracted, which bounds how many
  bodies sit in memory, but it is given back between redirect hops, so a task never
  waits for a host gate while holding a slot (that order cannot deadlock);
- every hop (the URL and each redirect, followed by hand, at most ``max_redirects``) is
  checked by the SSRF guard, and the connector resolves and connects through it;
- connect / read / total deadlines, ``max_bytes`` cap (announced length refused before
  reading, streamed bodies cut off as soon as they pass it), text-like types only;
- text extraction (trafilatura, PDF via pypdf) in a process pool, never on the loop;
- every outcome is a ``PageResult`` whose status says what happened.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from types import TracebackType
from urllib.parse import urljoin, urlsplit

import aiohttp
import msgspec
from aiohttp.abc import AbstractResolver
from asyncio_throttle import Throttler
from yarl import URL

from drscore.engine.runtime.evidence import PageResult
from drscore.fetch.content import SNIFF_BYTES, Extracted, kind_of_content_type, sniff_kind
from drscore.fetch.failures import classify_exception
from drscore.fetch.guard import GuardedResolver, SSRFGuard
from drscore.fetch.store import PageRecord, PageStore, StoredPage, store_path
from drscore.fetch.urls import InvalidURL, normalize_url

log = logging.getLogger("drscore.fetch")

USER_AGENT = "drscore/0.1 (research-report citation checker)"
_ACCEPT = ("text/html,application/xhtml+xml,text/plain;q=0.9,text/markdown;q=0.9,"
           "application/json;q=0.8,application/pdf;q=0.7,*/*;q=0.1")
EXTRACT_NICENESS = 10
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Outcomes decided by policy or syntax are recomputed each time rather than cached:
# they cost nothing and must follow the current policy (e.g. --allow-private-fetch).
_UNCACHED = frozenset({"ssrf_refused", "invalid_url", "offline_missing"})


class _Redirect(msgspec.Struct, frozen=True):
    location: str
    http_status: int


class _Body(msgspec.Struct, frozen=True):
    body: bytes
    kind: str
    charset: str | None
    http_status: int


class _Failure(msgspec.Struct, frozen=True):
    status: str
    detail: str
    http_status: int | None = None
    cacheable: bool = True


class _HostGate:
    """Per-host concurrency (semaphore) and request rate (sliding-window throttle)."""

    def __init__(self, concurrency: int, rate: float):
        self._sem = asyncio.Semaphore(concurrency)
        # asyncio-throttle counts whole requests per period: express a fractional rate
        # as "n requests per n/rate seconds" (5.0/s -> 5 per 1 s; 0.5/s -> 1 per 2 s).
        per_period = max(1, int(rate))
        self._throttle = Throttler(rate_limit=per_period, period=per_period / rate)

    async def __aenter__(self) -> None:
        await self._sem.acquire()
        try:
            await self._throttle.acquire()
        except BaseException:
            self._sem.release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._sem.release()


def _start_worker() -> None:
    """Worker-process initialiser: lower the worker's CPU priority, so that when cores
    are scarce the event-loop process (network, judge calls) is scheduled first and
    extraction takes the leftover time; and pay trafilatura's import once per worker."""
    with contextlib.suppress(OSError, AttributeError):  # no nice() on some platforms
        os.nice(EXTRACT_NICENESS)
    import drscore.fetch.extract  # noqa: F401


def _extract_in_worker(*args: object, **kwargs: object) -> Extracted:
    """Runs in a worker. Importing ``drscore.fetch.extract`` here, not at the top, keeps
    trafilatura and lxml out of the event-loop process."""
    from drscore.fetch.extract import extract_page

    return extract_page(*args, **kwargs)  # type: ignore[arg-type]


def make_extract_executor(workers: int | None = None) -> concurrent.futures.ProcessPoolExecutor:
    """A process pool for page extraction.

    ``forkserver`` rather than ``fork``: forking a process that runs an event loop and
    sqlite threads can deadlock the child. The fork server preloads the extraction
    module, so each worker starts without re-importing trafilatura.
    """
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["drscore.fetch.extract"])
    return concurrent.futures.ProcessPoolExecutor(
        max_workers=workers or default_extract_workers(), mp_context=ctx,
        initializer=_start_worker)


def default_extract_workers() -> int:
    """One worker per core but one, which stays free for the event loop (network, judge
    calls, the page store); at least one worker."""
    return max(1, (os.cpu_count() or 1) - 1)


class FetchPool:
    """Fetch cited pages politely and safely; see the module docstring.

    ``async with FetchPool(cache_dir) as pool: res = await pool.get(url)``.
    ``offline=True`` answers only from the page store (``offline_missing`` otherwise)
    and never opens a network connection. ``executor``, ``resolver`` and ``clock`` are
    injection points for tests and embedding (a shared process pool, a fake DNS, a
    fake time).
    """

    def __init__(self, cache_dir: Path | None = None, *, offline: bool = False,
                 allow_private: bool = False, allow_networks: Sequence[str] = (),
                 concurrency: int = 32, per_host_concurrency: int = 4,
                 per_host_rate: float = 5.0, connect_timeout: float = 10.0,
                 read_timeout: float = 30.0, max_bytes: int = 10_000_000,
                 ttl_ok_s: float = 30 * 86400, ttl_fail_s: float = 86400,
                 max_redirects: int = 5, extract_timeout: float = 120.0,
                 pdf: bool = True, pdf_max_pages: int = 50,
                 executor: concurrent.futures.Executor | None = None,
                 extract_workers: int | None = None,
                 resolver: AbstractResolver | None = None,
                 clock: Callable[[], float] = time.time,
                 user_agent: str = USER_AGENT):
        if concurrency < 1 or per_host_concurrency < 1:
            raise ValueError("concurrency and per_host_concurrency must be >= 1")
        if per_host_rate <= 0:
            raise ValueError("per_host_rate must be > 0 (requests per second per host)")
        if max_bytes < 1:
            raise ValueError("max_bytes must be >= 1")
        self.offline = offline
        self.guard = SSRFGuard(allow_private=allow_private, allow_networks=allow_networks)
        self.concurrency = concurrency
        self.per_host_concurrency = per_host_concurrency
        self.per_host_rate = per_host_rate
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_bytes = max_bytes
        self.ttl_ok_s = ttl_ok_s
        self.ttl_fail_s = ttl_fail_s
        self.max_redirects = max_redirects
        self.extract_timeout = extract_timeout
        self.pdf = pdf
        self.pdf_max_pages = pdf_max_pages
        self.user_agent = user_agent
        self._clock = clock
        self._store = PageStore(store_path(cache_dir))
        self._store_open = False
        self._executor = executor
        self._owns_executor = executor is None
        self._extract_workers = extract_workers
        self._resolver = resolver
        self._session: aiohttp.ClientSession | None = None
        self._session_lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(concurrency)
        self._gates: dict[str, _HostGate] = {}
        self._inflight: dict[str, asyncio.Task[PageResult]] = {}
        self._counts: Counter[str] = Counter()
        self._by_status: Counter[str] = Counter()
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------
    async def open(self) -> FetchPool:
        """Open the page store (the network session is created on first use)."""
        if not self._store_open:
            await self._store.open()
            self._store_open = True
        return self

    async def __aenter__(self) -> FetchPool:
        return await self.open()

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Cancel unfinished fetches, then close the session, the store and the workers."""
        if self._closed:
            return
        self._closed = True
        pending = list(self._inflight.values())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._store_open:
            await self._store.close()
            self._store_open = False
        if self._executor is not None and self._owns_executor:
            executor, self._executor = self._executor, None
            await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=True)

    # -- public API ----------------------------------------------------------------------
    async def get(self, url: str) -> PageResult:
        """The page text of ``url`` or a failure status; never raises for a bad page."""
        if self._closed:
            raise RuntimeError("FetchPool is closed")
        await self.open()
        self._counts["requests"] += 1
        try:
            norm = normalize_url(url)
        except InvalidURL as exc:
            return self._count(PageResult(url=url, normalized_url=url.strip(),
                                          status="invalid_url", detail=str(exc)))
        task = self._inflight.get(norm)
        if task is None:
            task = asyncio.create_task(self._load(norm), name=f"fetch {norm[:80]}")
            self._inflight[norm] = task
            task.add_done_callback(functools.partial(self._forget, norm))
        else:
            self._counts["in_flight_joins"] += 1
        # shield: one impatient caller must not cancel the fetch others are waiting for
        result = await asyncio.shield(task)
        return self._count(msgspec.structs.replace(result, url=url))

    @property
    def store_failure(self) -> BaseException | None:
        """The page store's failure (a damaged file found mid-run), if any."""
        return self._store.failure

    def stats(self) -> dict:
        """Counters: get() calls, network fetches, HTTP requests (hops), cache hits,
        in-flight joins, bytes downloaded, page-store write failures, results by status."""
        keys = ("requests", "fetched", "http_requests", "cache_hits", "in_flight_joins",
                "bytes_downloaded", "store_errors")
        return {**{k: self._counts[k] for k in keys}, "by_status": dict(self._by_status)}

    # -- internals -----------------------------------------------------------------------
    def _count(self, result: PageResult) -> PageResult:
        self._by_status[result.status] += 1
        return result

    def _forget(self, norm: str, task: asyncio.Task[PageResult]) -> None:
        if self._inflight.get(norm) is task:
            del self._inflight[norm]

    async def _load(self, norm: str) -> PageResult:
        try:
            stored = await self._store.get(norm)
            if stored is not None and (self.offline or not stored.record.expired(
                    self._clock(), ttl_ok_s=self.ttl_ok_s, ttl_fail_s=self.ttl_fail_s)):
                self._counts["cache_hits"] += 1
                return _result_from_stored(stored)
            if self.offline:
                return PageResult(url=norm, normalized_url=norm, status="offline_missing",
                                  detail="not in the page cache or an imported snapshot "
                                         "(offline mode never fetches)")
            result, cacheable = await self._fetch(norm)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug here must cost one page, not the run
            log.exception("fetching %s failed unexpectedly", norm)
            return PageResult(url=norm, normalized_url=norm, status="error",
                              detail=f"internal error: {type(exc).__name__}: {exc}"[:300])
        if cacheable and result.status not in _UNCACHED:
            self._remember(norm, result)
        return result

    def _remember(self, norm: str, result: PageResult) -> None:
        """Queue the result for the page store; a store failure costs the cache entry,
        never the page (the caller still gets its result)."""
        try:
            self._store.put(PageRecord(
                url=norm, status=result.status, http_status=result.http_status,
                final_url=result.final_url, fetched_at=result.fetched_at or self._clock(),
                content_hash=result.content_hash, detail=result.detail), result.text)
        except Exception as exc:
            self._counts["store_errors"] += 1
            log.warning("page store: could not cache %s: %s", norm, exc)

    def _gate(self, host: str) -> _HostGate:
        gate = self._gates.get(host)
        if gate is None:
            gate = self._gates[host] = _HostGate(self.per_host_concurrency,
                                                 self.per_host_rate)
        return gate

    async def _fetch(self, norm: str) -> tuple[PageResult, bool]:
        """Fetch and extract one normalised URL; returns (result, cacheable)."""
        self._counts["fetched"] += 1
        fetched_at = self._clock()
        current = norm

        def result(status: str, detail: str, http_status: int | None = None,
                   text: str = "", content_hash: str | None = None) -> PageResult:
            return PageResult(url=norm, normalized_url=norm, status=status, text=text,
                              final_url=current, http_status=http_status,
                              content_hash=content_hash, fetched_at=fetched_at,
                              detail=detail)

        slot_held = False
        try:
            for hop in range(self.max_redirects + 2):
                host = urlsplit(current).hostname or ""
                why = self.guard.hostname_refusal(host)
                if why is not None:
                    where = f"redirect {hop} to {current}: " if hop else ""
                    return result("ssrf_refused", where + why), False
                async with self._gate(host):
                    await self._slots.acquire()
                    slot_held = True
                    outcome = await self._request(current)
                if isinstance(outcome, _Failure):
                    where = f"redirect {hop} to {current}: " if hop else ""
                    return result(outcome.status, where + outcome.detail,
                                  outcome.http_status), outcome.cacheable
                if isinstance(outcome, _Body):
                    break
                # Give the global slot back before queueing at the next host's gate: a
                # task must never wait for a host while holding a slot, or tasks
                # redirected into a busy host and tasks already holding that host's
                # gate (waiting for a slot) would wait for each other forever.
                self._slots.release()
                slot_held = False
                if hop >= self.max_redirects:
                    return result("error", f"too many redirects (more than "
                                           f"{self.max_redirects})", outcome.http_status), True
                try:
                    current = normalize_url(urljoin(current, outcome.location))
                except InvalidURL as exc:
                    return result("invalid_url", f"redirect to {outcome.location[:200]!r}: "
                                                 f"{exc}", outcome.http_status), False
            else:  # every path in the loop breaks or returns by hop max_redirects
                raise AssertionError("redirect loop ran out without an outcome")
            extracted, cacheable = await self._extract(outcome, current)
            return result(extracted.status, extracted.detail, outcome.http_status,
                          extracted.text, extracted.content_hash), cacheable
        finally:
            if slot_held:
                self._slots.release()

    async def _session_for_fetch(self) -> aiohttp.ClientSession:
        async with self._session_lock:
            if self._session is None:
                connector = aiohttp.TCPConnector(
                    limit=self.concurrency, limit_per_host=self.per_host_concurrency,
                    resolver=GuardedResolver(self.guard,
                                             self._resolver or aiohttp.ThreadedResolver()),
                    socket_factory=self.guard.socket_factory, ttl_dns_cache=10)
                self._session = aiohttp.ClientSession(
                    connector=connector,
                    timeout=aiohttp.ClientTimeout(
                        total=self.connect_timeout + self.read_timeout,
                        sock_connect=self.connect_timeout, sock_read=self.read_timeout),
                    # no proxies from the environment (they would bypass the guard),
                    # no cookies carried from one cited site to another
                    trust_env=False, cookie_jar=aiohttp.DummyCookieJar(),
                    headers={"User-Agent": self.user_agent, "Accept": _ACCEPT})
            return self._session

    async def _request(self, url: str) -> _Redirect | _Body | _Failure:
        """One HTTP GET without following redirects; the body is read within limits."""
        session = await self._session_for_fetch()
        self._counts["http_requests"] += 1
        try:
            async with session.get(URL(url, encoded=True), allow_redirects=False) as resp:
                status = resp.status
                if status in _REDIRECTS:
                    location = resp.headers.get("Location")
                    if not location:
                        return _Failure("error", f"HTTP {status} redirect without Location",
                                        status)
                    return _Redirect(location, status)
                if 400 <= status < 500:
                    return _Failure("http_4xx", f"HTTP {status} {resp.reason or ''}".strip(),
                                    status)
                if status >= 500:
                    return _Failure("http_5xx", f"HTTP {status} {resp.reason or ''}".strip(),
                                    status)
                if not 200 <= status < 300:
                    return _Failure("error", f"unexpected HTTP {status}", status)
                return await self._read_body(resp)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            status_word, detail = classify_exception(exc)
            return _Failure(status_word, detail)

    async def _read_body(self, resp: aiohttp.ClientResponse) -> _Body | _Failure:
        content_type = resp.headers.get("Content-Type", "")
        kind = kind_of_content_type(content_type)
        if kind is None or (kind == "pdf" and not self.pdf):
            resp.close()
            return _Failure("not_text", f"content type {content_type[:100]!r} is not "
                                        f"text-like", resp.status)
        if resp.content_length is not None and resp.content_length > self.max_bytes:
            resp.close()
            return _Failure("too_large", f"Content-Length {resp.content_length} exceeds "
                                         f"max_bytes={self.max_bytes}", resp.status)
        body = bytearray()
        sniffed = False
        async for chunk in resp.content.iter_chunked(65536):
            body += chunk
            self._counts["bytes_downloaded"] += len(chunk)
            if len(body) > self.max_bytes:
                resp.close()  # drop the connection instead of draining the rest
                return _Failure("too_large", f"body exceeds max_bytes={self.max_bytes}",
                                resp.status)
            if not sniffed and len(body) >= SNIFF_BYTES:
                sniffed = True
                kind = sniff_kind(bytes(body[:SNIFF_BYTES]), kind)
                if kind is None:
                    resp.close()
                    return _Failure("not_text", f"binary content (declared "
                                                f"{content_type[:100]!r})", resp.status)
        if not sniffed:
            kind = sniff_kind(bytes(body), kind)
            if kind is None:
                return _Failure("not_text", f"binary content (declared "
                                            f"{content_type[:100]!r})", resp.status)
        return _Body(bytes(body), kind, resp.charset, resp.status)

    def _extract_executor(self) -> concurrent.futures.Executor:
        if self._executor is None:
            self._executor = make_extract_executor(self._extract_workers)
            self._owns_executor = True
        return self._executor

    async def _extract(self, body: _Body, final_url: str) -> tuple[Extracted, bool]:
        """Run extraction in the process pool; pool faults are page errors, not cached."""
        loop = asyncio.get_running_loop()
        executor = self._extract_executor()
        job = functools.partial(_extract_in_worker, body.body, body.kind, body.charset, final_url,
                                pdf_max_pages=self.pdf_max_pages,
                                pdf_time_budget_s=self.extract_timeout / 2)
        try:
            extracted = await asyncio.wait_for(loop.run_in_executor(executor, job),
                                               self.extract_timeout)
        except TimeoutError:
            return Extracted("error", "", None, f"extraction took longer than "
                                                f"{self.extract_timeout:g} s"), False
        except BrokenProcessPool as exc:
            # a worker died (e.g. a parser crash): replace the pool for the next pages
            if self._owns_executor and self._executor is executor:
                self._executor = None
                executor.shutdown(wait=False, cancel_futures=True)
            return Extracted("error", "", None, f"extraction worker died: {exc}"), False
        return extracted, True


def _result_from_stored(stored: StoredPage) -> PageResult:
    r = stored.record
    return PageResult(url=r.url, normalized_url=r.url, status=r.status, text=stored.text,
                      final_url=r.final_url, http_status=r.http_status,
                      content_hash=r.content_hash, fetched_at=r.fetched_at, detail=r.detail)
