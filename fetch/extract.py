"""Page body -> plain text. Runs inside worker processes (see ``drscore.fetch.pool``), never on
the event loop: trafilatura and lxml on a 500 KB page take tens to hundreds of ms.

Content kinds: ``html`` (trafilatura main-content extraction, falling back to all visible
text when trafilatura finds no main content), ``text`` (plain text and markdown, used
as-is), ``json`` (used as-is) and ``pdf`` (pypdf text of the first pages, bounded in
pages and time). Everything else is ``not_text``.
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


def html_to_text(html: str, url: str | None = None) -> tuple[str, str]:
    """Main text of an HTML page and the extractor that produced it.

    trafilatura first (main content, tables kept, comments dropped); when it returns
    nothing (very short pages, unusual layouts) but the page has visible text, that
    visible text is used instead, so a real page is never reported empty.
    """
    try:
        text = trafilatura.extract(html, url=url, include_comments=False,
                                   include_tables=True, favor_recall=True,
                                   deduplicate=False) or ""
    except Exception:  # trafilatura bugs on odd markup must not lose the page
        text = ""
    if text.strip():
        return text.strip(), "trafilatura"
    return visible_text(html), "visible-text fallback"


def pdf_to_text(body: bytes, *, max_pages: int, time_budget_s: float) -> tuple[str, str]:
    """Text of the first ``max_pages`` pages of a PDF (stops early past the time budget)."""
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
    return text, f"pypdf: {len(parts)} of {total} pages"


def extract_page(body: bytes, kind: str, charset: str | None, url: str | None = None, *,
                 pdf_max_pages: int = 50, pdf_time_budget_s: float = 20.0) -> Extracted:
    """Turn a response body of a known kind into text (the worker-process entry point)."""
    try:
        if kind == "pdf":
            text, detail = pdf_to_text(body, max_pages=pdf_max_pages,
                                       time_budget_s=pdf_time_budget_s)
        else:
            decoded = decode_body(body, charset, kind)
            if kind == "html":
                text, detail = html_to_text(decoded, url)
            else:
                text, detail = decoded.replace("\r\n", "\n").strip(), kind
    except Exception as exc:  # a corrupt document is this page's failure, not the run's
        return Extracted("error", "", None, f"{kind} extraction failed: "
                                            f"{type(exc).__name__}: {str(exc)[:200]}")
    if not text.strip():
        return Extracted("empty", "", None, f"no text after extraction ({detail})")
    return Extracted("ok", text, content_hash(text), detail)
