"""Statements and the URLs they cite, parsed from a markdown report.

Pure functions, no I/O. The parser understands the citation styles deep-research agents
actually emit:

* numbered markers ``[3]``, ``[3][7]``, ``[3, 7]``, ranges ``[3-5]``, footnotes ``[^3]``
  and full-width ``【3】``, resolved through a reference list in the common shapes
  (``[3] url - title``, ``[3]: url``, ``3. [title](url)``, ``[3],url``, ``[^3]: ...``)
  and in the shapes of OpenAI Deep Research exports (several markers on one entry, the
  URL on a line after the title, URLs repeated on their own line); reference lists are
  read by :mod:`drscore.engine.text.reference_list`, sentences split by
  :mod:`drscore.engine.text.sentences`;
* inline links ``[text](url)`` (the link text stays in the statement; a link whose text
  is itself a marker, ``[[3]](url)``, counts as that marker);
* autolinks ``<url>`` and bare URLs;
* scholarly identifiers in place of a URL: ``(arXiv:2311.10252)``, ``[title](arXiv:1105.1834)``,
  ``[title](doi:10.1038/nature11152)``, ``PMID: 31452104``, ``PMC6800160``, ``ISBN ...``, in the
  text and in reference entries, each turned into its canonical URL
  (:mod:`drscore.engine.text.identifiers`).

A bibliography that no citation point in the text refers to yields no pairs (the
benchmark's extraction rule); :attr:`CitationParse.bibliography_only` flags it.

Each sentence (English ``.!?`` and Chinese ``。！？`` endings) becomes a statement; a
statement citing *k* distinct URLs yields *k* pairs. Markers written after a sentence's
full stop (``... growth. [3]``) belong to that sentence. Markers that resolve to nothing
and reference entries nobody cites are reported in :class:`CitationParse`, never dropped
silently. See ``docs/citations.md`` for the exact rules.
"""
from __future__ import annotations

import bisect
import re
from typing import Callable, Iterator

import msgspec

from drscore.engine.text.identifiers import IDENTIFIER_PLAIN as _IDENT
from drscore.engine.text.identifiers import LINK_TARGET as _IDENT_TARGET
from drscore.engine.text.identifiers import find_identifiers, identifier_end, identifier_url, mentions_identifier
from drscore.engine.text.identifiers import target_url
from drscore.engine.text.reference_list import FENCE as _FENCE
from drscore.engine.text.reference_list import HEADING as _HEADING
from drscore.engine.text.reference_list import SCHEMELESS as _SCHEMELESS
from drscore.engine.text.reference_list import URL_BODY as _URL_BODY
from drscore.engine.text.reference_list import clean_url as _clean_url
from drscore.engine.text.reference_list import layout as _layout
from drscore.engine.text.reference_list import trim_url as _strip_punct
from drscore.engine.text.sentences import boundaries as _boundaries
from drscore.engine.text.sentences import split_sentences

__all__ = [
    "CitationPair",
    "CitationParse",
    "parse_citations",
    "cited_urls",
    "strip_citations",
    "split_sentences",
]


class CitationPair(msgspec.Struct, frozen=True):
    """One statement and one URL it cites.

    ``marker`` is the citation as normalised from the text (``"[3]"``, ``"[^note]"``),
    empty for inline links and bare URLs; ``kind`` says which syntax produced the pair:
    ``numbered``, ``footnote``, ``inline``, ``bare`` (or ``llm`` for pairs produced by a
    judge-based extractor rather than this parser).
    """

    statement: str
    url: str
    marker: str = ""
    kind: str = "numbered"


class CitationParse(msgspec.Struct):
    """Everything :func:`parse_citations` found in one report.

    ``references`` maps a reference label (``"3"``, or a footnote label without ``^``)
    to its URL. ``unresolved_markers`` are labels cited in the text that no reference
    entry defines (unique, in order of first use); ``uncited_references`` are labels
    defined but never cited (in list order). ``unlinked_references`` are entries that
    exist but carry no URL (a marker pointing to one yields no pair and is not
    "unresolved"). ``unlabeled_reference_urls`` are URLs listed in a reference section
    without a label, so no marker can point at them. ``parseable`` is False when the
    report's text has citation points (markers, links, URLs, identifiers, or marker-like
    numbers the parser does not read next to a bibliography) yet no statement-URL pair
    could be built: callers fall back to an LLM extractor for such reports.
    ``citation_points`` counts the citations the parser read in the text;
    ``bibliography_only`` is True when the report lists references but its text cites
    none of them: it yields no pairs, as the benchmark's extractor returns none for it.
    """

    pairs: list[CitationPair]
    references: dict[str, str]
    unresolved_markers: list[str]
    uncited_references: list[str]
    parseable: bool
    unlinked_references: list[str] = []
    unlabeled_reference_urls: list[str] = []
    marker_count: int = 0
    unresolved_count: int = 0
    citation_points: int = 0
    bibliography_only: bool = False


# --------------------------------------------------------------------------- patterns

# Inline link; the target may contain one level of balanced parentheses (Wikipedia), and
# may be written without a scheme when it is unmistakably an address (``www.``, the
# arXiv and DOI resolvers).
_LINK_URL = r"(?:https?://|www\.|(?:dx\.)?doi\.org/|arxiv\.org/)(?:[^\s()<>]|\([^\s()<>]*\))+"
_LINK_TAIL = r">?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*"
_LINK_TEXT = r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]"
# A parenthesis holding nothing but links ("([NASA](https://...))", "([a](u); [b](v))"):
# a citation, not content, so its text does not stay in the statement.
_ANY_LINK = _LINK_TEXT + r"\(\s*<?(?:" + _LINK_URL + "|" + _IDENT_TARGET + ")" + _LINK_TAIL + r"\)"
_SUPERSCRIPTS = "⁰¹²³⁴⁵⁶⁷⁸⁹"
_NUMS = r"\d{1,3}(?:\s*(?:[,，、;；]|[-–—~])\s*\d{1,3})*"
_CITE_HEAD = (
    r"(?P<code>`+)[^`\n]*?(?P=code)"
    # (not "Notion![[1]](url)": a marker link right after an exclamation mark is no image)
    r"|(?P<image>!(?!\[\[\d{1,3}\]\]\()" + _LINK_TEXT + r"\(<?" + _LINK_URL + _LINK_TAIL + r"\))"
    r"|(?P<pgroup>[(（]\s*" + _ANY_LINK + r"(?:\s*[,;，；]?\s*" + _ANY_LINK + r")*\s*[)）])"
    r"|\[(?P<ltext>(?:[^\[\]]|\[[^\[\]]*\])*)\]\(<?(?P<lurl>" + _LINK_URL + ")" + _LINK_TAIL + r"\)"
    r"|\[(?P<itext>(?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?(?P<iurl>" + _IDENT_TARGET + r")>?\s*\)"
    r"|<(?P<auto>https?://[^\s<>]+)>"
    r"|(?P<bare>https?://" + _URL_BODY + "|" + _SCHEMELESS + _URL_BODY + r")"
)
# "(arXiv:2311.10252)", "[doi:10.1/x; PMID: 123]" or an identifier standing in the text.
# Scanning for it at every position is costly, so it is only in the pattern used on text
# that mentions an identifier scheme at all (mentions_identifier).
_CITE_IDENT = (
    r"|(?P<ident>[(\[（]\s*" + _IDENT + r"(?:\s*[,;，；]\s*" + _IDENT + r")*\s*[)\]）]|" + _IDENT + r")"
)
_CITE_TAIL = (
    r"|\[\^(?P<foot>[^\]\s]{1,40})\]"
    r"|(?:\[|【)(?P<num>" + _NUMS + r")(?:†[^】\]\n]{0,40})?(?:\]|】)"
    # Superscript markers: "<sup>3</sup>", "<sup>[3,4]</sup>", "^3^", "¹²", "¹,³", "¹⁻³".
    r"|<sup>\s*\[?(?P<sup>" + _NUMS + r")\]?\s*</sup>"
    r"|(?<![\[\w^])\^(?P<caret>\d{1,3}(?:,\d{1,3})*)\^?(?![\d^])"
    r"|(?P<usup>[" + _SUPERSCRIPTS + r"]+(?:[,˒‚、⁻][" + _SUPERSCRIPTS + r"]+)*)"
)
# Without identifiers the "ident" group never matches, so both patterns have the same groups.
_CITE_RE = re.compile(_CITE_HEAD + r"|(?P<ident>(?!))" + _CITE_TAIL, re.IGNORECASE)
_CITE_RE_IDENT = re.compile(_CITE_HEAD + _CITE_IDENT + _CITE_TAIL, re.IGNORECASE)
_LINK_IN_GROUP = re.compile(_LINK_TEXT + r"\(\s*<?(?P<url>" + _LINK_URL + "|" + _IDENT_TARGET + ")" + _LINK_TAIL + r"\)",
                            re.IGNORECASE)
_SUPERSCRIPT_CHAR = re.compile("[" + _SUPERSCRIPTS + "]")


def _mentions_address(text: str, low: str) -> bool:
    """Could ``text`` (``low`` being it in lower case) hold a URL, with or without a scheme?"""
    return "://" in text or "www." in low or "doi.org/" in low or "arxiv.org/" in low


def _worth_scanning(text: str) -> bool:
    """Could ``text`` cite at all: brackets, a caret, an address, ``<sup>``, superscripts?
    (Substring tests: most paragraphs of a long report cite nothing.)"""
    if "[" in text or "【" in text or "^" in text or "://" in text:
        return True
    low = text.lower()
    return "<sup" in low or _mentions_address(text, low) or _SUPERSCRIPT_CHAR.search(text) is not None
_ID_SCHEMES = ("arxiv", "doi", "pmid", "pmcid", "isbn", "pmc")
_SUPER_DIGITS = str.maketrans(_SUPERSCRIPTS + "˒‚、⁻", "0123456789,,,-")
# What a superscript number after it is not a citation but an exponent, a unit power or a
# charge: a digit or subscript ("10⁻³", "10^3", "PO₄³⁻"), a sign, or a one- or two-letter
# token ("m²", "km²", "x^2", "R²"; an acronym is no base: "AI<sup>3</sup>" cites); a sign
# right after it ("Fe³⁺", "PO₄³⁻") makes it a charge.
_EXPONENT_BEFORE = re.compile(r"(?:[\d⁻⁺₀₁₂₃₄₅₆₇₈₉]|(?<![A-Za-z])(?:[A-Za-z]|[A-Za-z][a-z]))$")
_CHARGE_AFTER = re.compile(r"[⁺⁻+\-]")
# A number an exponent can sit on: one or two digits standing alone ("10³", "2^8", "e 10")
# or any number after a subscript or sign; "$1,300", "2023" and "5.2" are no bases.
_EXPONENT_BASE = re.compile(r"(?:^|[^\d,.])\d{1,2}$|[⁻⁺₀₁₂₃₄₅₆₇₈₉]\d*$")


# Where a citation can start: every alternative of the patterns above begins with one of
# these, so trying the big pattern only there gives finditer's matches at a fraction of
# the cost (the regex engine would otherwise try every alternative at every character).
_TRIGGER_CORE = (r"[`\[【^" + _SUPERSCRIPTS + r"]|!(?=\[)|<(?=sup>|https?://)|https?://|www\.|(?:dx\.)?doi\.org/"
                 r"|arxiv\.org/")
_TRIGGER = re.compile(_TRIGGER_CORE + r"|[(（](?=\s*\[)", re.IGNORECASE)
# The same for text that holds no address: the address alternatives cost most of the scan.
_TRIGGER_PLAIN = re.compile(r"[`\[【^" + _SUPERSCRIPTS + r"]|!(?=\[)|<(?=[sS][uU][pP]>)|[(（](?=\s*\[)")
_TRIGGER_IDENT = re.compile(_TRIGGER_CORE + r"|[(（]|arxiv|doi|pmid|pmc|isbn", re.IGNORECASE)


def _cite_matches(text: str) -> Iterator[re.Match[str]]:
    """The citation matches in ``text``, in order (as ``finditer`` of the citation
    pattern, with identifiers only when the text mentions one)."""
    if mentions_identifier(text):
        pattern, trigger = _CITE_RE_IDENT, _TRIGGER_IDENT
    else:
        pattern = _CITE_RE
        trigger = _TRIGGER if _mentions_address(text, text.lower()) else _TRIGGER_PLAIN
    pos = 0
    for hit in trigger.finditer(text):
        at = hit.start()
        if at < pos:
            continue
        m = pattern.match(text, at)
        if m is not None:
            yield m
            pos = m.end()


_MARKER_TEXT = re.compile(r"^\s*\[?\^?(\d{1,3}(?:\s*[,，、;；\-–—~]\s*\d{1,3})*)\]?\s*$")
_NUM_PART = re.compile(r"\d{1,3}(?:\s*[-–—~]\s*\d{1,3})?")
_MAX_RANGE = 50  # [3-50] is a plausible range; [41-23] or [1-900] is not

_WS = re.compile(r"\s+")
_EMPHASIS = re.compile(r"(\*\*|__|~~|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w))")
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]{0,200}>")
_LIST_ITEM = re.compile(r"^(?:>\s?)+(?:[-*+•]\s+|\d{1,3}[.)、](?:\s+|(?=[^\d\s])))?|^(?:[-*+•]\s+|\d{1,3}[.)、](?:\s+|(?=[^\d\s])))")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LEADING_JUNK = re.compile(r"^[\s\-–—:：,，;；.。、]+")
_BLANKISH = re.compile(r"^[\s\W_]*$")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z0-9]+")
_SHORT_CLAIM = 8  # below this weight a citing sentence is not a claim on its own
# A paragraph that is one bold phrase without a sentence end: a title ("**Key findings**").
_LINK_TARGETS = re.compile(r"\]\([^)]*\)")
_BOLD_TITLE = re.compile(r"^\s*(\*\*|__)(?:(?!\1)[^.!?。！？])+\1\s*[:：]?\s*$")


# --------------------------------------------------------------------------- helpers


def _labels(num_group: str) -> list[str]:
    """``"3, 7"`` -> ["3", "7"]; ``"3-5"`` -> ["3", "4", "5"]; implausible ranges stay
    as one label (``"41-23"``) so they are reported as unresolved, not invented."""
    out: list[str] = []
    for part in _NUM_PART.findall(num_group):
        bounds = re.split(r"\s*[-–—~]\s*", part)
        if len(bounds) == 2:
            lo, hi = int(bounds[0]), int(bounds[1])
            if lo <= hi and hi - lo <= _MAX_RANGE:
                out.extend(str(i) for i in range(lo, hi + 1))
            else:
                out.append(f"{lo}-{hi}")
        else:
            out.append(str(int(bounds[0])))
    return out


_CJK_EDGE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")


def _join_lines(lines: list[str]) -> str:
    """A paragraph's wrapped lines as one: a space between them, none inside Chinese text
    (a PDF conversion breaks Chinese lines anywhere)."""
    if len(lines) == 1:
        return lines[0]
    out = lines[0]
    for line in lines[1:]:
        glue = "" if out and line and _CJK_EDGE.match(out[-1]) and _CJK_EDGE.match(line[0]) else " "
        out = out + glue + line
    return out


def _units(body: list[tuple[int, str]]) -> Iterator[tuple[str, bool, int]]:
    """Yield ``(unit_text, is_heading, line)``: paragraphs (wrapped lines joined), list
    items, table rows and headings, with the line each ends on; fenced code is skipped."""
    para: list[str] = []
    in_fence = False
    last = 0
    for i, line in body:
        if (fence := _FENCE.match(line)):
            in_fence = not in_fence
            if para:
                yield _join_lines(para), False, last
                para = []
            tail = line[fence.end():].strip()
            if not in_fence and tail:
                yield tail, False, i  # "``` [21]": a citation written on the closing fence
            continue
        if in_fence:
            continue
        stripped = line.strip()
        if not stripped:
            if para:
                yield _join_lines(para), False, last
                para = []
            continue
        if _HEADING.match(line):
            if para:
                yield _join_lines(para), False, last
                para = []
            yield stripped.lstrip("#").strip(), True, i
            continue
        if stripped.startswith("|"):
            if para:
                yield _join_lines(para), False, last
                para = []
            if not _TABLE_RULE.match(stripped):
                yield stripped.strip("|").replace("|", " | "), False, i
            continue
        if _LIST_ITEM.match(stripped):
            if para:
                yield _join_lines(para), False, last
            para = [_LIST_ITEM.sub("", stripped, count=1)]
            last = i
            continue
        para.append(stripped)
        last = i
    if para:
        yield _join_lines(para), False, last


_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,;:!?。，；：！？）)])")
_SEPARATOR_BEFORE_CLOSE = re.compile(r"\s*[,;，；]+(?=[)）])")
_SEPARATOR_AFTER_OPEN = re.compile(r"(?<=[(（])\s*[,;，；]+\s*")
_EMPTY_PARENS = re.compile(r"[(（]\s*[)）]")


def _statement_text(raw: str) -> str:
    text = _HTML_TAG.sub("", raw)
    text = _EMPHASIS.sub("", text)
    text = _WS.sub(" ", text).strip()
    text = _LEADING_JUNK.sub("", text)
    # Space left where a marker was removed before punctuation: "growth [3]." -> "growth."
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    if ")" in text or "）" in text:
        # Separators left where an identifier was removed: "(Smith 2020; )" -> "(Smith 2020)".
        text = _SEPARATOR_AFTER_OPEN.sub("", _SEPARATOR_BEFORE_CLOSE.sub("", text))
        text = _SPACE_BEFORE_PUNCT.sub(r"\1", _EMPTY_PARENS.sub("", text)).strip()
    return text


class _Cite(msgspec.Struct):
    pos: int  # offset in the unit's clean text
    kind: str
    labels: list[str]  # numbered / footnote labels
    url: str = ""  # inline / bare / identifier ("" when an identifier does not resolve)
    marker: str = ""  # identifier as written ("arXiv:2311.10252")


def _ident_len(m: re.Match[str]) -> int:
    """Length of an identifier match without the sentence punctuation a DOI swallowed."""
    return identifier_end(m) - m.start()


def _superscript_labels(m: re.Match[str], unit: str, known: Callable[[str], bool]) -> list[str] | None:
    """Labels of a superscript marker (``¹²``, ``^3``, ``<sup>3</sup>``), or None when it
    reads as an exponent, a unit power or a charge (``10³``, ``m²``, ``PO₄³⁻``) or, for
    the bare forms (Unicode, caret), names an entry the report does not define. After a
    number it is a marker only when it names defined entries and the number is no
    exponent's base: ``$1,300<sup>2</sup>``, ``in 2023³`` cite; ``10³``, ``2^8`` do not."""
    before = unit[max(0, m.start() - 12):m.start()]
    if m.group("sup") is None and _CHARGE_AFTER.match(unit, m.end()):
        return None
    after_number = bool(before) and before[-1].isdigit()
    if after_number:
        if _EXPONENT_BASE.search(before):
            return None
    elif _EXPONENT_BEFORE.search(before[-3:]):
        return None
    if m.group("sup") is not None:
        labels = _labels(m.group("sup"))
        return labels if not after_number or all(known(x) for x in labels) else None
    raw = m.group("caret") if m.group("caret") is not None else m.group("usup").translate(_SUPER_DIGITS)
    labels = _labels(raw)
    if labels and all(known(x) for x in labels):
        return labels
    if m.group("usup") is not None and raw.isdigit():
        # "²³" is footnote 23 when the list has it, else markers 2 and 3 written together.
        digits = [str(int(d)) for d in raw]
        if all(known(x) for x in digits):
            return list(dict.fromkeys(digits))
    return None


# After a sentence's end, before the next sentence (or the end of the unit): a link
# standing there cites the sentence before it ("... away. [NASA](https://...) The ...").
_SENTENCE_END_BEFORE = re.compile(r"[.!?。！？][”’\"')\]]*\s*$")
_NEXT_SENTENCE_AFTER = re.compile(r"\s*(?:$|[A-Z\u3400-\u9fff(\[（【]|<sup|[" + _SUPERSCRIPTS + "])")


def _scan_unit(unit: str, known: Callable[[str], bool] = lambda _: True) -> tuple[str, list[_Cite]]:
    """Remove citation syntax from one unit; return clean text and citation positions.
    ``known(label)`` says whether the report defines a reference label (bare superscript
    numbers only count as markers when it does)."""
    if not _worth_scanning(unit) and not mentions_identifier(unit):
        return unit, []  # fast path: most paragraphs of a long report cite nothing
    pieces: list[str] = []
    cites: list[_Cite] = []
    last = 0
    length = 0
    for m in _cite_matches(unit):
        before = unit[last:m.start()]
        pieces.append(before)
        length += m.start() - last
        last = m.end()
        kind = m.lastgroup
        if m.group("code") is not None:
            pieces.append(m.group(0))
            length += len(m.group(0))
        elif m.group("image") is not None:
            pass
        elif m.group("pgroup") is not None:  # "([NASA](url); [ESA](url))": a citation, no text kept
            for link in _LINK_IN_GROUP.finditer(m.group("pgroup")):
                raw = link.group("url")
                url = target_url(raw) if raw.lower().startswith(_ID_SCHEMES) else _clean_url(raw)
                cites.append(_Cite(pos=length, kind="cite_link", labels=[], url=url or ""))
        elif m.group("lurl") is not None:
            text = m.group("ltext")
            url = _clean_url(m.group("lurl"))
            mk = _MARKER_TEXT.match(text)
            if mk:  # "[[3]](url)": a numbered marker that carries its own URL
                cites.append(_Cite(pos=length, kind="inline_marker", labels=_labels(mk.group(1)), url=url))
            elif _SENTENCE_END_BEFORE.search("".join(pieces[-2:])) and _NEXT_SENTENCE_AFTER.match(unit, m.end()):
                # "... away. [NASA](url) The volume ...": the link cites the sentence it follows.
                cites.append(_Cite(pos=length, kind="cite_link", labels=[], url=url))
            else:
                cites.append(_Cite(pos=length, kind="inline", labels=[], url=url))
                pieces.append(text)
                length += len(text)
        elif m.group("iurl") is not None:  # "[title](arXiv:1105.1834)": text stays, target resolved
            text = m.group("itext")
            cites.append(_Cite(pos=length, kind="inline", labels=[], url=target_url(m.group("iurl")) or ""))
            pieces.append(text)
            length += len(text)
        elif m.group("ident") is not None:
            raw = m.group("ident")
            found = find_identifiers(raw)
            for f in found:
                cites.append(_Cite(pos=length, kind="identifier", labels=[], url=identifier_url(f) or "",
                                   marker=raw[f.start():f.start() + _ident_len(f)].strip()))
            if found and raw[0] not in "([（":  # a bare identifier: give back what followed it
                tail = raw[found[-1].start() + _ident_len(found[-1]):]
                pieces.append(tail)
                length += len(tail)
        elif m.group("auto") is not None:
            cites.append(_Cite(pos=length, kind="bare", labels=[], url=_clean_url(m.group("auto"))))
        elif m.group("bare") is not None:
            raw = m.group("bare")
            url = _clean_url(raw)
            cites.append(_Cite(pos=length, kind="bare", labels=[], url=url))
            tail = raw[len(_strip_punct(raw)):]  # punctuation that belonged to the sentence
            pieces.append(tail)
            length += len(tail)
        elif m.group("foot") is not None:
            cites.append(_Cite(pos=length, kind="footnote", labels=[m.group("foot")]))
        elif m.group("num") is not None:
            cites.append(_Cite(pos=length, kind="numbered", labels=_labels(m.group("num"))))
        elif kind in ("sup", "caret", "usup"):
            labels = _superscript_labels(m, unit, known)
            if labels is None:  # an exponent, not a citation: the text stays
                pieces.append(m.group(0))
                length += len(m.group(0))
            else:
                cites.append(_Cite(pos=length, kind="numbered", labels=labels))
        else:  # pragma: no cover - every alternative is handled above
            raise AssertionError(kind)
    pieces.append(unit[last:])
    return "".join(pieces), cites


# --------------------------------------------------------------------------- public API


def _weight(text: str) -> int:
    """Rough amount of content: CJK characters plus two per Latin word or number."""
    return len(_CJK.findall(text)) + 2 * len(_WORD.findall(text))


def _join(parts: list[str]) -> str:
    """Join sentences; no space after a CJK sentence (Chinese runs sentences together)."""
    out = ""
    for p in parts:
        if not p:
            continue
        out = p if not out else out + ("" if _CJK.match(out[-1]) or out[-1] in "。！？”」』）" else " ") + p
    return out


def _last_sentence(clean: str) -> str:
    starts = _boundaries(clean)
    for a in reversed(starts):
        text = _statement_text(clean[a:])
        if text and not _BLANKISH.match(text):
            return text
        clean = clean[:a]
    return ""


# Marker-like numbers the parser does not read as citations. Counted only when the text
# has no citation the parser reads and a bibliography exists, to tell an unusual citation
# style (sent to the judge's extractor) from a bibliography nobody cites (no pairs).
_LOOSE_MARKER = re.compile(
    r"(?:来源|出处|参考|source|ref\.?|reference)\s*[:：#]?\s*(\d{1,3})(?!\d)"  # 来源21, Source 3
    r"|(?<=[^\s\d<>=≤≥.:：])[ \u00a0](\d{1,3})(?=[ \t]*(?:$|[.。;；](?:\s|$)))",  # "... 等级 15" at a sentence end
    re.IGNORECASE | re.MULTILINE,
)
# "SAE Level 5.", "Episode 5.", "Windows 11.": a number after a capitalised word is a name.
_NAME_BEFORE = re.compile(r"(?:^|\s)[A-Z][\w.-]*$")
_LOOSE_MIN = 2  # one stray number is not a citation style


def _loose_points(body: list[tuple[int, str]], entries: int) -> int:
    """How many marker-like numbers (at most ``entries``, the bibliography's size) the
    body holds outside code and headings. Superscripts are not among them: the parser
    reads those itself."""
    count = 0
    in_fence = False
    for _, line in body:
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or _HEADING.match(line):
            continue
        for m in _LOOSE_MARKER.finditer(line):
            if m.group(1) is None and _NAME_BEFORE.search(line, 0, m.start()):
                continue
            if 1 <= int(m.group(1) or m.group(2)) <= entries:
                count += 1
    return count


def parse_citations(text: str, *, scope: str = "sentence") -> CitationParse:
    """Parse a markdown report into statement-URL pairs (see the module docstring).

    ``scope`` sets how much text a citation covers: ``"sentence"`` (default) is the
    sentence holding the marker, extended by the sentence before it when the citing
    sentence alone is too short to be a claim (``'"..." Chen said.'``); ``"span"`` is
    every sentence since the previous citation in the same paragraph.
    """
    if scope not in ("sentence", "span"):
        raise ValueError(f"scope must be 'sentence' or 'span', not {scope!r}")
    layout = _layout(text)
    refs = layout.references
    statements: list[str] = []
    cites_of: list[list[_Cite]] = []
    lines_of: list[int] = []  # the line each statement's unit ends on
    prev_clean = ""  # clean text of the previous unit without citations
    prev_last: int | None = None  # index of the previous unit's last statement, if cited

    point_count = 0
    defined = set(refs) | set(layout.unlinked)
    known = defined.__contains__
    for unit, is_heading, line in _units(layout.body):
        if is_heading or _BOLD_TITLE.match(_LINK_TARGETS.sub("]", unit)):
            # A heading names what follows; it is never a statement, and an identifier or
            # a link in it (a literature summary titling each paper) cites nothing.
            prev_clean, prev_last = "", None
            continue
        clean, cites = _scan_unit(unit, known)
        point_count += len(cites)
        if not cites:
            prev_clean, prev_last = clean, None
            continue
        starts = _boundaries(clean)
        ends = starts[1:] + [len(clean)]
        raw = [clean[a:b] for a, b in zip(starts, ends)]
        # Cleaning every sentence is the parser's hot spot; only cited ones (and the
        # ones they absorb) are needed.
        texts: dict[int, str] = {}

        def sentence(k: int) -> str:
            if k not in texts:
                texts[k] = _statement_text(raw[k])
            return texts[k]

        unit_cites: list[list[_Cite]] = [[] for _ in raw]
        orphans: list[_Cite] = []
        for c in cites:
            i = max(0, bisect.bisect_right(starts, c.pos) - 1)
            if c.kind in ("numbered", "footnote", "inline_marker", "identifier", "cite_link"):
                # A marker with only blank text before it in its sentence closes the
                # previous sentence ("... growth. [3] Next ...").
                while i > 0 and _BLANKISH.match(clean[starts[i]:c.pos]):
                    i -= 1
            if _BLANKISH.match(raw[i]):
                orphans.append(c)
            else:
                unit_cites[i].append(c)
        if orphans:
            # Marker-only unit (e.g. "[3]" alone on a line after a table or a code
            # block): it cites the last sentence before it.
            if prev_last is not None:
                cites_of[prev_last].extend(orphans)
            else:
                # An empty statement still counts its markers below (no pair is made).
                statements.append(_last_sentence(prev_clean))
                cites_of.append(orphans)
                lines_of.append(line)
        # Widen statements: previous uncited sentences join the citing one.
        last_idx = None
        for i, cs in enumerate(unit_cites):
            if not cs:
                continue
            j = i
            while j > 0 and not unit_cites[j - 1] and not _BLANKISH.match(raw[j - 1]) and (
                scope == "span" or (j == i and _weight(sentence(i)) < _SHORT_CLAIM)
            ):
                j -= 1
            statements.append(_join([sentence(k) for k in range(j, i + 1)]))
            cites_of.append(cs)
            lines_of.append(line)
            last_idx = len(statements) - 1
        prev_clean = clean
        # A later marker-only unit cites this unit's last sentence: reuse its statement
        # when that sentence holds citations, else _last_sentence(prev_clean) builds it.
        prev_last = last_idx if unit_cites[-1] else None

    pairs: list[CitationPair] = []
    seen_pairs: set[tuple[str, str]] = set()
    cited_labels: set[str] = set()
    unresolved: list[str] = []
    marker_count = 0
    unresolved_count = 0
    redefined = layout.redefined
    for statement, cites, line in zip(statements, cites_of, lines_of):
        if not cites or not statement:
            if cites:  # nowhere to attach: keep the bookkeeping honest
                for c in cites:
                    marker_count += len(c.labels)
                    cited_labels.update(c.labels)
            continue
        for c in cites:
            if c.kind in ("inline", "bare", "identifier", "cite_link"):
                items = [(c.url, c.marker, "inline" if c.kind == "cite_link" else c.kind)]
            else:
                items = []
                for label in c.labels:
                    marker_count += 1
                    cited_labels.add(label)
                    marker = f"[^{label}]" if c.kind == "footnote" else f"[{label}]"
                    kind = "footnote" if c.kind == "footnote" else "numbered"
                    if c.kind == "inline_marker":
                        items.append((c.url, marker, "inline"))
                    elif label in redefined:  # each section's own list: the one after the marker
                        items.append((_list_after(redefined[label], line), marker, kind))
                    elif label in refs:
                        items.append((refs[label], marker, kind))
                    elif label in layout.unlinked:
                        continue
                    else:
                        unresolved_count += 1
                        if label not in unresolved:
                            unresolved.append(label)
            for url, marker, kind in items:
                if not url or (statement, url) in seen_pairs:
                    continue
                seen_pairs.add((statement, url))
                pairs.append(CitationPair(statement=statement, url=url, marker=marker, kind=kind))

    uncited = [label for label in layout.order if label in refs and label not in cited_labels]
    entries = len(layout.order) + len(layout.unlabeled)
    # Citation points: syntax this parser reads, or (only when it reads none) marker-like
    # numbers it does not ("... 7个等级 15", "<sup>3</sup>", "来源21") that the judge's
    # extractor may still resolve through the bibliography.
    has_points = point_count > 0 or (entries > 0 and _loose_points(layout.body, entries) >= _LOOSE_MIN)
    return CitationParse(
        pairs=pairs,
        references=dict(refs),
        unresolved_markers=unresolved,
        uncited_references=uncited,
        parseable=bool(pairs) or not has_points,
        unlinked_references=list(layout.unlinked),
        unlabeled_reference_urls=list(layout.unlabeled),
        marker_count=marker_count,
        unresolved_count=unresolved_count,
        citation_points=point_count,
        bibliography_only=not has_points and entries > 0,
    )


def _list_after(definitions: list[tuple[int, str]], line: int) -> str:
    """The URL a label has in the first list after ``line`` (else in the last list)."""
    for at, url in definitions:
        if at > line:
            return url
    return definitions[-1][1]


def cited_urls(text: str | CitationParse) -> list[str]:
    """Unique URLs a report cites: in order of first citation in the text, then the
    reference-list URLs nobody cited (list order), then unlabeled reference URLs.
    Accepts the report text or an existing :class:`CitationParse`."""
    parse = text if isinstance(text, CitationParse) else parse_citations(text)
    out: dict[str, None] = {}
    for p in parse.pairs:
        out.setdefault(p.url)
    for label in parse.uncited_references:
        out.setdefault(parse.references[label])
    for url in parse.references.values():
        out.setdefault(url)
    for url in parse.unlabeled_reference_urls:
        out.setdefault(url)
    return list(out)


_PUNCT_AFTER = set(".,;:!?。，；：！？）)]」』")


_GAP = "\x00"  # stands where citation syntax was removed, until spacing is fixed
# "(arXiv:2001.08361, 2024)" without its identifier is "(2024)", not "(, 2024)".
_GAP_AFTER_OPEN = re.compile(r"([(（])[ \t]*\x00[\x00 \t]*[,;，；][ \t]*")
_GAP_BEFORE_PUNCT = re.compile(r"[ \t]*\x00[\x00 \t]*(?=[.,;:!?。，；：！？）)\]」』、]|$)")
_GAP_RUN = re.compile(r"([ \t]*)\x00[\x00 \t]*")


def _close_gap(m: re.Match[str]) -> str:
    """One space where the removed citation had space around it, none after CJK or at
    the start of the line ("growth [3] next" -> "growth next", "增长[3]的" -> "增长的")."""
    start = m.start()
    if start == 0 or not m.group(0).strip(_GAP):
        return ""
    prev = m.string[start - 1]
    if _CJK.match(prev) or prev in "。！？，；：、（【「『":
        return ""
    return " "


def _strip_line(line: str, known: Callable[[str], bool] = lambda _: True) -> str:
    if not _worth_scanning(line) and not mentions_identifier(line):
        return line
    out: list[str] = []
    last = 0
    for m in _cite_matches(line):
        out.append(line[last:m.start()])
        last = m.end()
        kind = m.lastgroup
        if m.group("code") is not None:
            out.append(m.group(0))
        elif m.group("lurl") is not None and not _MARKER_TEXT.match(m.group("ltext")):
            # A link standing after a sentence's end is a citation; elsewhere its text is prose.
            standing = (_SENTENCE_END_BEFORE.search(line[:m.start()])
                        and _NEXT_SENTENCE_AFTER.match(line, m.end()))
            out.append(_GAP if standing else m.group("ltext"))
        elif m.group("iurl") is not None:
            out.append(m.group("itext"))
        elif m.group("ident") is not None and m.group("ident")[0] not in "([（":
            raw = m.group("ident")
            found = find_identifiers(raw)
            out.extend((_GAP, raw[found[-1].start() + _ident_len(found[-1]):] if found else ""))
        elif m.group("bare") is not None:
            raw = m.group("bare")
            out.extend((_GAP, raw[len(_strip_punct(raw)):]))
        elif kind in ("sup", "caret", "usup") and _superscript_labels(m, line, known) is None:
            out.append(m.group(0))
        else:
            out.append(_GAP)
    if not out:
        return line
    out.append(line[last:])
    result = _GAP_AFTER_OPEN.sub(r"\1", "".join(out))
    result = _GAP_BEFORE_PUNCT.sub("", result)
    return _GAP_RUN.sub(_close_gap, result)


def strip_citations(text: str) -> str:
    """The report without citation syntax: markers removed, links replaced by their
    text, bare URLs and reference sections/entries removed, code left untouched."""
    layout = _layout(text)
    known = (set(layout.references) | set(layout.unlinked)).__contains__
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    in_fence = False
    for i, line in enumerate(lines):
        if i in layout.skipped:
            continue
        if (fence := _FENCE.match(line)):
            in_fence = not in_fence
            tail = line[fence.end():]
            # A closing fence carries no info string, so text after it is prose.
            out.append(line if in_fence or not tail.strip() else fence.group(0) + _strip_line(tail, known).rstrip())
            continue
        out.append(line if in_fence else _strip_line(line, known))
    result = "\n".join(out)
    result = re.sub(r"\n[ \t]*(?:\n[ \t]*){2,}", "\n\n", result)
    return result.strip() + ("\n" if result.strip() else "")
