"""Map what went wrong during a fetch to a page status (``drscore.engine.runtime.evidence.PAGE_STATUSES``).

Every failure becomes a status plus a short detail; nothing is swallowed and nothing is
turned into a verdict. The mapping, most specific first:

=====================  ==============================================================
``ssrf_refused``       the SSRF guard refused the host or one of its addresses
``dns``                the host name did not resolve
``timeout``            connect, read or total deadline exceeded
``refused_connection`` TCP connection refused, reset or unreachable
``invalid_url``        the URL (or a redirect target) is not a fetchable http(s) URL
``error``              anything else (TLS failure, malformed HTTP, too many redirects...)
=====================  ==============================================================

HTTP statuses, sizes and content types are classified by the pool itself
(``http_4xx``, ``http_5xx``, ``too_large``, ``not_text``, ``empty``).
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterator

import aiohttp

from drscore.fetch.guard import SSRFRefused


def _causes(exc: BaseException | None) -> Iterator[BaseException]:
    """The exception, then what it wraps (aiohttp's ``os_error``, ``__cause__``...)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        inner = getattr(exc, "os_error", None)
        exc = inner if isinstance(inner, BaseException) else (exc.__cause__ or exc.__context__)


def classify_exception(exc: BaseException) -> tuple[str, str]:
    """(status, detail) for an exception raised while fetching one hop."""
    chain = list(_causes(exc))
    for e in chain:
        if isinstance(e, SSRFRefused) or str(e).startswith("ssrf_refused:"):
            return "ssrf_refused", str(e).removeprefix("ssrf_refused: ")
    detail = f"{type(exc).__name__}: {exc}"[:300]
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "dns", detail
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout", detail or "timed out"
    if isinstance(exc, (aiohttp.ClientConnectorCertificateError, aiohttp.ClientSSLError)):
        return "error", detail
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "refused_connection", detail
    if isinstance(exc, aiohttp.InvalidURL):
        return "invalid_url", detail
    if isinstance(exc, (ConnectionRefusedError, ConnectionResetError)):
        return "refused_connection", detail
    return "error", detail
