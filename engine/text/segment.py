"""Split a markdown report into the units that redundancy compares.

Two segmentations (METHODS.md §3), both line-based and language-neutral (lengths are
counted in characters, so Chinese and English reports use the same thresholds):

``paragraphs``
    Blank-line separated blocks of prose. Headings, horizontal rules, tables, fenced
    code, image-only lines and reference lists (a block whose every line cites a URL,
    or the entries under a "References" / "Sources" / "参考文献" heading or label, up to
    the first block of prose: a line that merely names sources, a table's "Key
    references" column header in a Word export, never swallows the text after it) are
    not paragraphs; they also end the paragraph they interrupt. Ordinary lists are
    content and stay.

``sections``
    The DeepResearch-ReportEval authors' code: each ``## `` heading starts a unit that
    runs to the next ``## `` heading (the heading line is part of the unit), the text
    before the first ``## `` is one more unit, and units that contain a link or are
    shorter than 200 characters are dropped.

The first and last unit are *not* trimmed here: that is a rule of the redundancy
protocol, applied by the method.
"""
from __future__ import annotations

import re
from typing import Literal

import msgspec

from drscore.engine.text.identifiers import mentions_identifier
from drscore.engine.text.reference_list import has_year_or_bib_words

Mode = Literal["paragraphs", "sections"]
MODES: tuple[str, ...] = ("paragraphs", "sections")

# Per-mode defaults, chosen so ``segment(text, mode)`` alone gives the documented
# behaviour. Sections: the authors' filter (200 characters, no links). Paragraphs:
# drop fragments such as table captions and short agent notes ("让我搜索更具体的数据：")
# but keep one-sentence paragraphs (a Chinese sentence of content is often 40-60
# characters); paragraphs with inline links are normal prose and are kept.
DEFAULT_MIN_CHARS: dict[str, int] = {"paragraphs": 40, "sections": 200}
DEFAULT_DROP_LINKS: dict[str, bool] = {"paragraphs": False, "sections": True}


class Unit(msgspec.Struct, frozen=True):
    """One segment of a report: its position in the segment list, its text (original
    markdown, stripped) and the 1-based line of the report where it starts."""

    index: int
    text: str
    line: int


_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_ATX_HEADING = re.compile(r"^\s{0,3}#{1,6}(\s|$)")
_SETEXT_UNDERLINE = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_TABLE_ROW = re.compile(r"^\s*\|")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)+\|?\s*$")
_IMAGE_ONLY = re.compile(r"^\s*!\[[^\]]*\]\([^)]*\)\s*$")
_URL = re.compile(r"https?://|www\.", re.IGNORECASE)
# A line that opens a list item or a citation entry: "- ", "* ", "1. ", "1) ",
# "[1] ", "[^1]: ", "1 - "...
_LIST_OR_ENTRY = re.compile(r"^\s*([-*+•]\s|\d+[.)、]\s?|\[\^?\d+\]:?|\^?\d+\s+-\s)")
# Headings/labels that open a bibliography: "## References", "**Sources:**",
# "参考文献：", "Works Cited". Matched against the line without markdown decoration.
_REFERENCE_TITLE = re.compile(
    # Optional numbering: "7. References", "7 References", "IV. Works Cited", "六、参考文献".
    r"^(?:(?:\d+|[ivxlc]+|[一二三四五六七八九十]+)\s*[.)、．]\s*|\d+\s+)?"
    r"(references?|reference list|sources?|sources cited|works cited|citations?|"
    r"bibliography|further reading|notes and references|参考文献|参考资料|参考来源|"
    r"引用来源|引用|资料来源|来源|文献)(\s*(and|&)\s*(notes|sources|references))?"
    r"\s*[:：]?$",
    re.IGNORECASE,
)
_DECORATION = re.compile(r"^[\s#>*_]+|[\s*_]+$")


def segment(
    text: str,
    mode: Mode = "paragraphs",
    *,
    min_chars: int | None = None,
    drop_links: bool | None = None,
) -> list[Unit]:
    """Split ``text`` into units (see the module docstring for both modes).

    ``min_chars`` drops units with fewer characters (after stripping); ``drop_links``
    drops units containing a URL. ``None`` uses the mode's default
    (:data:`DEFAULT_MIN_CHARS`, :data:`DEFAULT_DROP_LINKS`). Units are re-indexed
    0..n-1 after filtering; ``Unit.line`` keeps the position in the report.
    """
    if mode not in MODES:
        raise ValueError(f"unknown segmentation {mode!r}; expected one of {', '.join(MODES)}")
    min_chars = DEFAULT_MIN_CHARS[mode] if min_chars is None else min_chars
    drop_links = DEFAULT_DROP_LINKS[mode] if drop_links is None else drop_links
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    raw = _sections(lines) if mode == "sections" else _paragraphs(lines)
    kept = [
        (body, line)
        for body, line in raw
        if len(body) >= min_chars and not (drop_links and _URL.search(body))
    ]
    return [Unit(index=i, text=body, line=line) for i, (body, line) in enumerate(kept)]


def _sections(lines: list[str]) -> list[tuple[str, int]]:
    """``## `` sections as the authors' code cuts them (not fence-aware, like theirs)."""
    out: list[tuple[str, int]] = []
    start = 0  # first line of the current unit (0-based)
    for n, line in enumerate(lines):
        if line.startswith("## "):
            _add_section(out, lines, start, n)
            start = n
    _add_section(out, lines, start, len(lines))
    return out


def _add_section(out: list[tuple[str, int]], lines: list[str], start: int, end: int) -> None:
    body = "\n".join(lines[start:end]).strip()
    if not body:
        return
    first = start + next(i for i, ln in enumerate(lines[start:end]) if ln.strip())
    out.append((body, first + 1))


def _paragraphs(lines: list[str]) -> list[tuple[str, int]]:
    """Blank-line paragraphs, skipping structure that is not prose."""
    out: list[tuple[str, int]] = []
    block: list[tuple[int, str]] = []
    fence_marker = ""  # non-empty while inside a fenced code block
    # Set by a references heading or label line; cleared by the next heading.
    in_references = False
    for n, line in enumerate(lines):
        fence = _FENCE.match(line)
        if fence_marker:
            if fence and fence.group(1) == fence_marker:
                fence_marker = ""
            continue
        if fence or not line.strip():
            # A code fence ends the paragraph before it, like a blank line does.
            in_references = _emit_block(block, out, in_references)
            block = []
            fence_marker = fence.group(1) if fence else ""
            continue
        block.append((n, line))
    _emit_block(block, out, in_references)
    return out


def _emit_block(
    block: list[tuple[int, str]], out: list[tuple[str, int]], in_references: bool
) -> bool:
    """Cut one blank-line block at its non-prose lines, append the prose pieces to
    ``out`` and return the updated "inside a bibliography" state."""
    is_table = any(_TABLE_SEPARATOR.match(t) for _, t in block)
    piece: list[tuple[int, str]] = []

    def close_piece() -> None:
        nonlocal in_references
        texts = [t for _, t in piece]
        if not texts:
            return
        # Entries under a bibliography title, and any block made only of URL-citing
        # entries, are a reference list, not a paragraph; prose ends the bibliography.
        if in_references and any(_prose_line(t) for t in texts):
            in_references = False
        if not (in_references or _is_reference_list(texts)):
            out.append(("\n".join(t.rstrip() for t in texts).strip(), piece[0][0] + 1))
        piece.clear()

    for n, line in block:
        if piece and _SETEXT_UNDERLINE.match(line):
            # "Title\n=====" or "Title\n-----": the line above was a heading.
            title = piece.pop()[1]
            close_piece()
            in_references = bool(_REFERENCE_TITLE.match(_undecorate(title)))
            continue
        if _ATX_HEADING.match(line):
            close_piece()
            in_references = bool(_REFERENCE_TITLE.match(_undecorate(line)))
            continue
        if _RULE.match(line) or _IMAGE_ONLY.match(line) or (is_table and _TABLE_ROW.match(line)):
            close_piece()
            continue
        if _REFERENCE_TITLE.match(_undecorate(line)):
            # A bare label line ("参考文献：", "**Sources:**") opens a bibliography.
            close_piece()
            in_references = True
            continue
        piece.append((n, line))
    close_piece()
    return in_references


def _undecorate(line: str) -> str:
    return _DECORATION.sub("", line.strip())


_PROSE_CHARS = 80  # a line this long (a CJK character counting two) is a paragraph's
_CJK = re.compile(r"[\u3400-\u9fff]")


def _prose_line(text: str) -> bool:
    """A line of prose, not a bibliography entry: long, no list or entry marker, no
    address or identifier, no year or words placed as a bibliography places them."""
    t = text.strip()
    if len(t) + len(_CJK.findall(t)) < _PROSE_CHARS or _LIST_OR_ENTRY.match(t) or _URL.search(t):
        return False
    return not mentions_identifier(t) and not has_year_or_bib_words(t)


def _is_reference_list(texts: list[str]) -> bool:
    """A block made only of entries that each cite a URL: a reference list even
    without a "References" title (e.g. ``[3] https://... - Title``)."""
    entries = [t for t in texts if _LIST_OR_ENTRY.match(t) or _URL.match(t.strip())]
    return len(entries) == len(texts) and all(_URL.search(t) for t in entries)
