"""Content classification (fetch.content) and text extraction (fetch.extract), called
directly; the pool runs the same functions in worker processes."""
from __future__ import annotations

import hashlib

import pytest

from drscore.fetch.content import content_hash, decode_body, kind_of_content_type, sniff_kind
from drscore.fetch.extract import extract_page, html_page, html_to_text, page_text, visible_text


@pytest.mark.parametrize("content_type, kind", [
    ("text/html; charset=utf-8", "html"), ("application/xhtml+xml", "html"),
    ("text/plain", "text"), ("text/markdown", "text"), ("application/json", "json"),
    ("application/ld+json", "json"), ("application/pdf", "pdf"), ("", ""),
    ("application/octet-stream", ""), ("image/png", None), ("video/mp4", None),
    ("application/zip", None), ("text/css", None),
])
def test_kind_of_content_type(content_type: str, kind: str | None) -> None:
    assert kind_of_content_type(content_type) == kind


def test_sniff_kind() -> None:
    assert sniff_kind(b"%PDF-1.7\n...", "") == "pdf"
    assert sniff_kind(b"%PDF-1.7\n...", "html") is None  # a PDF posing as HTML
    assert sniff_kind(b"<html>...", "pdf") is None        # claims PDF, is not one
    assert sniff_kind(b"<html>\x00\x01", "html") is None  # binary despite the header
    assert sniff_kind(b"  <!DOCTYPE html><html>", "") == "html"
    assert sniff_kind(b'{"a": 1}', "") == "json"
    assert sniff_kind("plain caf\u00e9".encode(), "") == "text"
    assert sniff_kind(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01", "") is None  # JPEG
    assert sniff_kind(b"\x1f\x8b\x08" + bytes(range(1, 32)) * 4, "") is None  # control bytes
    # undeclared non-UTF-8 text (GBK Chinese) is still text; so is UTF-16 with a BOM
    assert sniff_kind("\u7eaf\u6587\u672c".encode("gbk") * 20, "") == "text"
    assert sniff_kind("\ufeffhi".encode("utf-16-le"), "") == "text"
    assert sniff_kind(b"\r\n%PDF-1.4\n", "") == "pdf"  # junk before the magic number


def test_decode_body_prefers_bom_then_header_then_meta() -> None:
    text = "Caf\u00e9 cr\u00e8me"
    assert decode_body(text.encode("latin-1"), "iso-8859-1", "text") == text
    meta = b'<html><head><meta charset="windows-1252"></head><body>Caf\xe9</body></html>'
    assert "Caf\u00e9" in decode_body(meta, None, "html")
    assert decode_body(b"\xef\xbb\xbfhello", "latin-1", "text") == "hello"
    assert decode_body("\u6709\u673a".encode(), None, "text") == "\u6709\u673a"
    # a wrong declared charset that cannot decode falls back to UTF-8
    assert decode_body("\u00e9t\u00e9".encode(), "ascii", "text") == "\u00e9t\u00e9"


def test_html_extraction_keeps_the_article_and_drops_boilerplate(report_paragraphs,
                                                                 make_article_html) -> None:
    paras = report_paragraphs()
    text, extractor = html_to_text(make_article_html(paras))
    assert extractor == "trafilatura"
    # every real paragraph of the report survives; scripts and styles do not
    for p in paras:
        assert p[:80] in text
    assert "SCRIPT-ONLY-TOKEN" not in text and "color: red" not in text


def test_visible_text_fallback_when_trafilatura_finds_nothing() -> None:
    html = ('<html><body><div class="comments">Reader note: the bridge reopened in May '
            '2021.</div><script>secret()</script></body></html>')
    text, extractor = html_to_text(html)
    assert extractor == "visible-text fallback"
    assert text == "Reader note: the bridge reopened in May 2021."


def test_visible_text_separates_blocks() -> None:
    html = "<html><body><h1>Title</h1><p>First  para.</p><ul><li>a</li><li>b</li></ul></body></html>"
    assert visible_text(html) == "Title\nFirst para.\na\nb"
    assert visible_text("") == ""


def test_extract_page_statuses(make_pdf) -> None:
    ok = extract_page(b"Line one.\r\nLine two.\r\n", "text", "utf-8")
    assert ok.status == "ok" and ok.text == "Line one.\nLine two."
    # the hash is the SHA-256 of the UTF-8 text, computed independently here
    assert ok.content_hash == hashlib.sha256(b"Line one.\nLine two.").hexdigest()
    assert ok.content_hash == content_hash(ok.text)
    empty = extract_page(b"<html><body><script>x()</script></body></html>", "html", None)
    assert empty.status == "empty" and empty.content_hash is None
    pdf = extract_page(make_pdf("Quarterly revenue grew 17 percent"), "pdf", None)
    assert pdf.status == "ok" and pdf.text == "Quarterly revenue grew 17 percent"
    assert pdf.detail == "pypdf: 1 of 1 pages"
    broken = extract_page(b"%PDF-1.4 this is not really a pdf", "pdf", None)
    assert broken.status == "error" and broken.detail.startswith("pdf extraction failed")
    assert extract_page(b"   \n ", "text", None).status == "empty"


def test_the_page_text_opens_with_its_title_and_description_as_the_benchmark_sends_it() -> None:
    # A statement only the headline supports ("Moon is 384,400 km away") is judged
    # against the same words the benchmark's judge saw: title, description, content.
    html = ("<html><head><title>The Moon is 384,400 km away - Space Facts</title>"
            '<meta name="description" content="How far is the Moon from Earth, on average?">'
            "</head><body><article><p>Our natural satellite orbits Earth every 27.3 days, and its "
            "phases follow the angle to the Sun, which is why they repeat monthly.</p>"
            "<p>Tides are raised mostly by the Moon's gravity, a little by the Sun's.</p>"
            "</article></body></html>")
    title, description, text, extractor = html_page(html)
    assert extractor == "trafilatura" and "384,400" not in text
    page = extract_page(html.encode(), "html", "utf-8")
    assert page.text == page_text(title, description, text)
    assert page.text.startswith("The Moon is 384,400 km away - Space Facts\n\n"
                                "How far is the Moon from Earth, on average?\n\nOur natural satellite")
    assert page.detail == "trafilatura; title and description first"
    # A page without either keeps its text as it was; a description repeating the title goes once.
    assert page_text("", "", "Body.") == "Body." and page_text("T", "T", "Body.") == "T\n\nBody."
    fallback = extract_page(b"<html><head><title>Notice</title></head><body><div class='comments'>"
                            b"Reader note: the bridge reopened in May 2021.</div></body></html>", "html", None)
    assert fallback.text == "Notice\n\nReader note: the bridge reopened in May 2021."
