"""Fixtures for the fetch tests: a local page server on 127.0.0.1 (and 127.0.0.2), a fake
DNS resolver, a shared extraction process pool and a loopback-only tripwire.

Safety rule: test traffic may only ever go to 127.0.0.0/8. The autouse tripwire wraps
the connection routine aiohttp uses; any attempt to connect elsewhere is blocked before
the socket connects and fails the test.
"""
from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import threading
from collections import Counter
from collections.abc import Iterator

import aiohappyeyeballs
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver

from drscore.fetch.pool import make_extract_executor
from support.data import DATA

LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
HUGE_BYTES = 50 * 1024 * 1024


def real_report(index: int = 52) -> dict:
    """One real DeepResearch Bench report (English ids are 51-100)."""
    with open(DATA / "drb" / "reports.claude-3-7-sonnet.jsonl", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if rec["id"] == index:
                return rec
    raise LookupError(index)


def article_paragraphs(index: int = 52, n: int = 12) -> list[str]:
    """Prose paragraphs (no headings, tables or reference lines) of a real report."""
    paras = [p.strip() for p in real_report(index)["article"].split("\n\n")]
    prose = [p for p in paras if len(p) > 200 and not p.startswith(("#", "|", "[", "-", "*"))]
    return prose[:n]


def article_html(paragraphs: list[str], title: str = "Report") -> str:
    """A realistic page: navigation, scripts, an article, a sidebar and a footer."""
    body = "\n".join(f"<p>{p}</p>" for p in paragraphs)
    return f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>{title}</title><script>var trackingSecret = "SCRIPT-ONLY-TOKEN";</script>
<style>.x {{ color: red }}</style></head><body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/about">About</a></li></ul></nav>
<header><h1>{title}</h1></header>
<main><article><h2>{title}</h2>
{body}
</article></main>
<aside><h3>Related</h3><ul><li><a href="/x">Something else</a></li></ul></aside>
<footer><p>Copyright 2025 Example Publisher. All rights reserved.</p></footer>
</body></html>"""


def minimal_pdf(text: str) -> bytes:
    """A one-page PDF showing ``text`` in Helvetica (correct xref offsets)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources "
        b"<< /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1, xref)
    return bytes(out)


class PageServer:
    """An aiohttp app on 127.0.0.1 and 127.0.0.2, run in its own thread and loop so it
    serves sync tests (CLI) and async tests alike. ``hits`` counts requests per path."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.active = 0
        self.max_active = 0
        self.huge_sent = 0
        self.huge_done = threading.Event()
        self.port = 0
        self.port2 = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="page-server", daemon=True)
        self.article = article_paragraphs()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base2(self) -> str:
        return f"http://127.0.0.2:{self.port2}"

    def url(self, path: str) -> str:
        return self.base + path

    def reset(self) -> None:
        self.hits.clear()
        self.active = self.max_active = 0
        self.huge_sent = 0
        self.huge_done.clear()

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("page server did not start")

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._ready.set()
        self._loop.run_forever()

    async def _start(self) -> None:
        app = web.Application()
        app.middlewares.append(self._count)
        r = app.router
        r.add_get("/page/{name}", self.page)
        r.add_get("/short", self.short)
        r.add_get("/blank", self.blank)
        r.add_get("/comments-only", self.comments_only)
        r.add_get("/text.txt", self.plain)
        r.add_get("/doc.md", self.markdown)
        r.add_get("/data.json", self.json_data)
        r.add_get("/latin1", self.latin1)
        r.add_get("/doc.pdf", self.pdf)
        r.add_get("/redirect/{n}", self.redirect_chain)
        r.add_get("/relative-redirect", self.relative_redirect)
        r.add_get("/loop", self.loop_redirect)
        r.add_get("/slow", self.slow)
        r.add_get("/busy/{i}", self.busy)
        r.add_get("/drip", self.drip)
        r.add_get("/huge", self.huge)
        r.add_get("/huge-declared", self.huge_declared)
        r.add_get("/binary", self.binary)
        r.add_get("/binary-as-html", self.binary_as_html)
        r.add_get("/status/{code}", self.status)
        r.add_get("/to-private", self.to_private)
        r.add_get("/to-metadata", self.to_metadata)
        r.add_get("/to-name/{host}", self.to_name)
        r.add_get("/to-ftp", self.to_ftp)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        site2 = web.TCPSite(self._runner, "127.0.0.2", 0)
        await site2.start()
        self.port2 = site2._server.sockets[0].getsockname()[1]

    @web.middleware
    async def _count(self, request: web.Request, handler):  # type: ignore[no-untyped-def]
        self.hits[request.path] += 1
        return await handler(request)

    async def page(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        return web.Response(text=article_html(self.article, title=f"Page {name}"),
                            content_type="text/html")

    async def short(self, request: web.Request) -> web.Response:
        html = ("<html><head><title>t</title></head><body><div>Tiny page: the sky is "
                "blue.</div><script>hidden()</script></body></html>")
        return web.Response(text=html, content_type="text/html")

    async def comments_only(self, request: web.Request) -> web.Response:
        # trafilatura (comments excluded) finds no main content here, yet text is visible
        html = ('<html><body><div class="comments">Reader note: the bridge reopened '
                'in May 2021.</div></body></html>')
        return web.Response(text=html, content_type="text/html")

    async def blank(self, request: web.Request) -> web.Response:
        return web.Response(text="<html><body><script>x()</script>  </body></html>",
                            content_type="text/html")

    async def plain(self, request: web.Request) -> web.Response:
        return web.Response(text="Plain line one.\r\nPlain line two.\r\n",
                            content_type="text/plain")

    async def markdown(self, request: web.Request) -> web.Response:
        return web.Response(text="# Title\n\nSome *markdown* text.\n",
                            content_type="text/markdown")

    async def json_data(self, request: web.Request) -> web.Response:
        return web.json_response({"answer": 42, "unit": "widgets"})

    async def latin1(self, request: web.Request) -> web.Response:
        body = "<html><body><p>Caf\u00e9 cr\u00e8me \u00e0 la fran\u00e7aise</p></body></html>"
        return web.Response(body=body.encode("latin-1"),
                            headers={"Content-Type": "text/html; charset=iso-8859-1"})

    async def pdf(self, request: web.Request) -> web.Response:
        return web.Response(body=minimal_pdf("Quarterly revenue grew 17 percent"),
                            content_type="application/pdf")

    async def redirect_chain(self, request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        target = f"/redirect/{n - 1}" if n > 1 else "/page/final"
        raise web.HTTPFound(self.base + target)

    async def relative_redirect(self, request: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("../page/relative")

    async def loop_redirect(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("/loop")

    async def slow(self, request: web.Request) -> web.Response:
        await asyncio.sleep(1.5)
        return web.Response(text="<p>too late</p>", content_type="text/html")

    async def busy(self, request: web.Request) -> web.Response:
        # records how many requests are being served at once (per-host limit tests)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await asyncio.sleep(0.05)
        finally:
            self.active -= 1
        return web.Response(text=f"busy page {request.match_info['i']}",
                            content_type="text/plain")

    async def drip(self, request: web.Request) -> web.StreamResponse:
        # one byte every 50 ms for up to 3 s: never silent long enough for a read timeout
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        try:
            for _ in range(60):
                await resp.write(b"x")
                await asyncio.sleep(0.05)
        except (ConnectionError, RuntimeError):
            pass
        return resp

    async def huge(self, request: web.Request) -> web.StreamResponse:
        # chunked, no Content-Length: the client only learns the size by reading
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        chunk = b"x" * 65536
        try:
            while self.huge_sent < HUGE_BYTES:
                await resp.write(chunk)
                self.huge_sent += len(chunk)
        except (ConnectionError, RuntimeError, asyncio.CancelledError):
            pass  # the client hung up, as it should
        finally:
            self.huge_done.set()
        return resp

    async def huge_declared(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html",
                                           "Content-Length": str(HUGE_BYTES)})
        await resp.prepare(request)
        try:
            await resp.write(b"<html>" + b" " * 65536)
        except (ConnectionError, RuntimeError):
            pass
        return resp

    async def binary(self, request: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40,
                            content_type="image/png")

    async def binary_as_html(self, request: web.Request) -> web.Response:
        return web.Response(body=b"<html>\x00\x01\x02" + bytes(range(256)) * 40,
                            content_type="text/html")

    async def status(self, request: web.Request) -> web.Response:
        return web.Response(status=int(request.match_info["code"]), text="nope")

    async def to_private(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(f"{self.base2}/page/inside")

    async def to_metadata(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("http://169.254.169.254/latest/meta-data/")

    async def to_name(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://{request.match_info['host']}:{self.port}/page/named")

    async def to_ftp(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("ftp://127.0.0.1/file")


class FakeResolver(AbstractResolver):
    """DNS stand-in: name -> list of addresses, or an exception to raise."""

    def __init__(self, table: dict[str, list[str] | BaseException]):
        self.table = table
        self.calls: list[str] = []

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[dict]:
        self.calls.append(host)
        answer = self.table.get(host, socket.gaierror(socket.EAI_NONAME, "Name not known"))
        if isinstance(answer, BaseException):
            raise answer
        return [{"hostname": host, "host": a, "port": port,
                 "family": socket.AF_INET6 if ":" in a else socket.AF_INET,
                 "proto": 0, "flags": socket.AI_NUMERICHOST} for a in answer]

    async def close(self) -> None:
        pass


@pytest.fixture(scope="session")
def page_server() -> Iterator[PageServer]:
    server = PageServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def server(page_server: PageServer) -> PageServer:
    """The shared page server with its counters reset for this test."""
    page_server.reset()
    return page_server


@pytest.fixture(scope="session")
def extract_executor():  # type: ignore[no-untyped-def]
    executor = make_extract_executor(2)
    yield executor
    executor.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list]:
    """Block (and fail the test on) any connection attempt outside 127.0.0.0/8."""
    violations: list = []
    real = aiohappyeyeballs.start_connection

    async def guarded(addr_infos, *args, **kwargs):  # type: ignore[no-untyped-def]
        for info in addr_infos:
            host = info[4][0]
            if ipaddress.ip_address(host.split("%")[0]) not in LOOPBACK:
                violations.append(host)
                raise OSError(f"test tripwire: connection to {host} blocked")
        return await real(addr_infos, *args, **kwargs)

    monkeypatch.setattr(aiohappyeyeballs, "start_connection", guarded)
    yield violations
    assert not violations, f"a test tried to connect outside loopback: {violations}"


@pytest.fixture
def fake_resolver() -> type[FakeResolver]:
    """The FakeResolver class (test modules cannot import conftest under importlib mode)."""
    return FakeResolver


@pytest.fixture
def make_pdf():  # type: ignore[no-untyped-def]
    return minimal_pdf


@pytest.fixture
def report_paragraphs():  # type: ignore[no-untyped-def]
    return article_paragraphs


@pytest.fixture
def make_article_html():  # type: ignore[no-untyped-def]
    return article_html
