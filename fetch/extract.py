"""Page body -> plain text. Runs inside worker processes (see ``drscore.fetch.pool``), never on
the event loop: trafilatura and lxml on a 500 KB page take tens to hundreds of ms.

Content kinds: ``html`` (trafilatura main-content extraction, falling back to all visible
text when trafilatura finds no main content), ``text`` (plain text and markdown, used
as-is), ``json`` (used as-is) and ``pdf`` (pypdf text of the first pages, bounded in
pages and time). Everything else is ``not_text``.

A page's text opens with its title and description (an HTML page's ``<title>``/``og:title``
and meta description, a PDF's document title), each on a paragraph of its own, before the
content: DeepResearch Bench sends its judge ``title``, ``description`` and ``content`` of
every page (``utils/scrape.py``: ``f"{title}\n\n{description}\n\n{content}"``), so a
statement that only a headline supports is judged against the same words here.
"""
from __future__ import annotations

import io
import logging
import re
import time

import lxml.html
import trafilatura
from lxml.etree import ParserError

from drscore.fetch.content import Extracted, content_hash, decode_body

# Elements whose text is never visible, and block elements that end a line.
_INVISIBLE = ("script", "style", "noscript", "template", "head", "svg", "iframe", "object")
_BLOCKS = ("p", "div", "br", "li", "tr", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6",
           "section", "article", "header", "footer", "nav", "aside", "blockquote", "pre",
           "table", "ul", "ol", "dl", "dt", "dd", "figcaption", "hr", "main", "form")
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")


def visible_text(html: str) -> str:
    """All visible text of an HTML document, one line per block element."""
    try:
        doc = lxml.html.document_fromstring(html)
    except (ParserError, ValueError):
        return ""
    for el in [e for e in doc.iter(*_INVISIBLE)]:
        el.drop_tree()
    for el in doc.iter(*_BLOCKS):
        el.tail = "\n" + (el.tail or "")
    lines = (_SPACES.sub(" ", line).strip() for line in doc.text_content().split("\n"))
    return "\n".join(line for line in lines if line)


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_META_DESCRIPTION = re.compile(
    r"""<meta\s[^>]*?(?:name|property)\s*=\s*["'](?:og:)?description["'][^>]*?content\s*=\s*["']([^"']*)["']"""
    r"""|<meta\s[^>]*?content\s*=\s*["']([^"']*)["'][^>]*?(?:name|property)\s*=\s*["'](?:og:)?description["']""",
    re.IGNORECASE)


def _one_line(text: str | None) -> str:
    return _SPACES.sub(" ", " ".join((text or "").split())).strip()


def html_page(html: str, url: str | None = None) -> tuple[str, str, str, str]:
    """``(title, description, main text, extractor)`` of an HTML page.

    trafilatura first (main content, tables kept, comments dropped, and the page's title
    and description); when it finds no main text (very short pages, unusual layouts) but
    the page has visible text, that visible text is used instead, so a real page is never
    reported empty.
    """
    try:
        doc = trafilatura.bare_extraction(html, url=url, with_metadata=True, include_comments=False,
                                          include_tables=True, favor_recall=True, deduplicate=False)
    except Exception:  # trafilatura bugs on odd markup must not lose the page
        doc = None
    head = html[:65536]
    # The document's own <title> as written (the benchmark's reader returns it so; trafilatura
    # trims a site name off it), else trafilatura's (og:title, the first heading).
    m = _TITLE.search(head)
    title = _one_line(lxml.html.fromstring(f"<p>{m.group(1)}</p>").text_content()) if m and m.group(1).strip() else ""
    title = title or _one_line(getattr(doc, "title", None))
    description = _one_line(getattr(doc, "description", None))
    if not description and (m := _META_DESCRIPTION.search(head)):
        description = _one_line(lxml.html.fromstring(f"<p>{m.group(1) or m.group(2)}</p>").text_content())
    text = (getattr(doc, "text", None) or "").strip()
    if text:
        return title, description, text, "trafilatura"
    return title, description, visible_text(html), "visible-text fallback"


def html_to_text(html: str, url: str | None = None) -> tuple[str, str]:
    """Main text of an HTML page and the extractor that produced it (see :func:`html_page`)."""
    _, _, text, extractor = html_page(html, url)
    return text, extractor


def page_text(title: str, description: str, content: str) -> str:
    """The page as the judge reads it: title, description and content, each a paragraph
    (empty parts and a description that repeats the title left out)."""
    parts = [title, description if description != title else "", content]
    return "\n\n".join(p for p in parts if p)


def pdf_to_text(body: bytes, *, max_pages: int, time_budget_s: float) -> tuple[str, str, str]:
    """``(document title, text of the first max_pages pages, detail)`` of a PDF (stops
    early past the time budget)."""
    from drscore.engine.runtime.extras import require

    require("pdf", "reading PDF pages")  # the page fails with this message as its detail
    from pypdf import PdfReader  # imported here: only PDF pages pay for it

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed PDFs warn a lot
    reader = PdfReader(io.BytesIO(body))
    if reader.is_encrypted:
        reader.decrypt("")  # many "encrypted" PDFs use an empty user password
    total = len(reader.pages)
    start = time.monotonic()
    parts: list[str] = []
    for page in reader.pages[:max_pages]:
        parts.append(page.extract_text() or "")
        if time.monotonic() - start > time_budget_s:
            break
    text = "\n\n".join(p.strip() for p in parts if p.strip())
    try:
        title = _one_line(str(reader.metadata.title)) if reader.metadata and reader.metadata.title else ""
    except Exception:  # a malformed info dictionary is no reason to lose the text
        title = ""
    return title, text, f"pypdf: {len(parts)} of {total} pages"


def extract_page(body: bytes, kind: str, charset: str | None, url: str | None = None, *,
                 pdf_max_pages: int = 50, pdf_time_budget_s: float = 20.0) -> Extracted:
    """Turn a response body of a known kind into text (the worker-process entry point)."""
    try:
        if kind == "pdf":
            title, text, detail = pdf_to_text(body, max_pages=pdf_max_pages,
                                              time_budget_s=pdf_time_budget_s)
            description = ""
        else:
            decoded = decode_body(body, charset, kind)
            if kind == "html":
                title, description, text, detail = html_page(decoded, url)
            else:
                title, description = "", ""
                text, detail = decoded.replace("\r\n", "\n").strip(), kind
    except Exception as exc:  # a corrupt document is this page's failure, not the run's
        return Extracted("error", "", None, f"{kind} extraction failed: "
                                            f"{type(exc).__name__}: {str(exc)[:200]}")
    if not text.strip():
        return Extracted("empty", "", None, f"no text after extraction ({detail})")
    if title or description:
        text = page_text(title, description, text)
        detail += "; title and description first"
    return Extracted("ok", text, content_hash(text), detail)
