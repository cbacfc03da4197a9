"""What a response body is: text-like or not, which kind, how to decode it.

Light and pure (no parser imports), so the event loop can classify a response from its
headers and first bytes before deciding to read or extract it. The heavy part,
turning a body into text, is ``drscore.fetch.extract`` and runs in worker processes.
"""
from __future__ import annotations

import codecs
import hashlib
import re
from typing import NamedTuple

# Declared media types we read, by kind; "" means "unknown, sniff the first bytes".
_KIND_BY_TYPE = {
    "text/html": "html", "application/xhtml+xml": "html",
    "text/plain": "text", "text/markdown": "text", "text/x-markdown": "text",
    "application/json": "json", "text/json": "json",
    "application/pdf": "pdf", "application/x-pdf": "pdf",
    "": "", "application/octet-stream": "", "binary/octet-stream": "",
}
SNIFF_BYTES = 8192
# Bytes that occur in text; the rest (C0 controls other than whitespace, DEL) mark binary.
_TEXT_BYTES = bytes([7, 8, 9, 10, 11, 12, 13, 27]) + bytes(range(0x20, 0x7F)) \
    + bytes(range(0x80, 0x100))

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]+)""", re.I)


class Extracted(NamedTuple):
    """What a worker sends back: a page status (``ok``, ``empty``, ``not_text`` or
    ``error``), the text, its SHA-256 and a short human-readable detail."""
    status: str
    text: str
    content_hash: str | None
    detail: str


def kind_of_content_type(content_type: str) -> str | None:
    """Map a media type to ``html``/``text``/``json``/``pdf``, ``""`` (unknown: sniff) or
    None (not text-like). Parameters such as ``; charset=...`` are ignored."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media in _KIND_BY_TYPE:
        return _KIND_BY_TYPE[media]
    if media.endswith("+json"):
        return "json"
    return None


def sniff_kind(head: bytes, declared: str) -> str | None:
    """Refine the declared kind from the first bytes of the body.

    PDFs are recognised by their magic number (anywhere in the first KB, as readers
    allow); binary bodies (NUL bytes, or more than 1% control characters) are never
    text, whatever the header says; undeclared text is HTML if it looks like HTML.
    """
    if b"%PDF-" in head[:1024]:
        return "pdf" if declared in ("", "pdf") else None
    if declared == "pdf":
        return None  # claims PDF but is not one
    head = head[:SNIFF_BYTES]
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return declared or "text"  # UTF-16 text has NUL bytes by nature
    if b"\x00" in head or len(head.translate(None, _TEXT_BYTES)) > len(head) // 100:
        return None
    if declared:
        return declared
    lowered = head[:1024].lstrip(codecs.BOM_UTF8 + b" \t\r\n").lower()
    if lowered.startswith((b"<!doctype html", b"<html")) or b"<body" in lowered:
        return "html"
    if lowered.startswith((b"{", b"[")):
        return "json"
    return "text"


def content_hash(text: str) -> str:
    """SHA-256 (hex) of the UTF-8 text; the page store keys content by it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def decode_body(body: bytes, charset: str | None, kind: str) -> str:
    """Decode using BOM, then the HTTP charset, then an HTML ``<meta charset>``, then
    UTF-8; the first that decodes cleanly wins, else UTF-8 with replacement."""
    for bom, enc in ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
                     (codecs.BOM_UTF16_BE, "utf-16-be")):
        if body.startswith(bom):
            return body[len(bom):].decode(enc, "replace")
    candidates = [charset] if charset else []
    if kind == "html":
        m = _META_CHARSET.search(body[:4096])
        if m:
            candidates.append(m.group(1).decode("ascii", "ignore"))
    candidates.append("utf-8")
    for enc in candidates:
        try:
            return body.decode(enc)
        except (LookupError, UnicodeDecodeError):
            continue
    return body.decode("utf-8", "replace")


