"""Where a report defines its references: URLs in text and reference-list entries.

:func:`layout` splits a report into body lines (what the citation parser reads for
statements) and the reference definitions it finds, in the shapes agents emit:

* a reference section under a heading (``## References``, ``**Sources:**``, ``参考资料``)
  whose entries are ``[3] url - title``, ``3. [title](url)``, ``[3]: url``, ``[^3]: ...``;
* unambiguous entries anywhere (``[3] <url>``, ``[3]: url``, ``[3],url``, ``[^3]: ...``);
* exports of OpenAI Deep Research, which list **several markers on one entry**
  (``[31] [48] [54] https://...``), put **the URL on a following line** after a title
  line and a blank line (``[40] [44] Some Title`` / blank / ``https://...``), and repeat
  each URL on a line of its own after the entry. Every label of a multi-marker entry
  gets the URL; a title entry gets the next URL-only line within two lines; a URL-only
  line repeating the URL just defined is part of the entry, not body text or an
  unlabeled reference.

An entry may point by identifier instead of URL (``[3] arXiv:2311.10252``, ``4. Smith (2012).
Title. doi:10.1038/nature11152``): :func:`first_target` gives the identifier's canonical URL
(:mod:`drscore.engine.text.identifiers`) when the entry has no URL.

The URL helpers (:data:`URL_RE`, :func:`clean_url`, :func:`first_url`) are shared with
the marker scanner in :mod:`drscore.engine.text.citations`.
"""
from __future__ import annotations

import re

import msgspec

from drscore.engine.text.identifiers import IDENTIFIER, find_identifiers, identifier_url, mentions_identifier, target_url

__all__ = ["SCHEMELESS", "URL_BODY", "URL_RE", "FENCE", "HEADING", "Layout", "clean_url", "trim_url", "first_target", "first_url",
           "has_year_or_bib_words", "layout", "mentions_url"]

# Characters that end a bare URL: whitespace, brackets that delimit markdown, quotes and
# CJK punctuation (Chinese text often runs straight into a URL without a space).
URL_BODY = r"""(?:[^\s<>\[\]"'`|（）【】「」『』《》，。；！？、：]|'(?=\w))+"""  # "Athena's_Saints" keeps its '

# Addresses written without a scheme that are unmistakably addresses: ``www.`` hosts and
# the two scholarly resolvers (``arxiv.org/abs/2001.08361``, ``doi.org/10.1038/x``).
SCHEMELESS = r"(?<![\w/@.\-])(?:www\.[a-z0-9\-]+\.[a-z]|(?:dx\.)?doi\.org/|arxiv\.org/)"
URL_RE = re.compile(r"https?://" + URL_BODY + "|" + SCHEMELESS + URL_BODY, re.IGNORECASE)
_URL_TRAILING = ".,;:!?*_~'\""
# A line that is nothing but one URL (plain, <autolink> or [url](url)).
_URL_ONLY = re.compile(r"^\s*(?:[-*+•]\s+)?(?:<(https?://\S+)>|(https?://\S+|" + SCHEMELESS + r"\S+)"
                       r"|\[[^\]]*\]\((https?://\S+)\))\s*$", re.IGNORECASE)

# Reference section headings (whole line), in English and Chinese, optionally numbered
# ("## 7. 参考资料") or bold ("**Sources:**").
_REF_HEADING = re.compile(
    r"^\s*(?:#{1,6})?\s*(?:\*\*|__)?\s*"
    r"(?:(?:\d+(?:\.\d+)*|[一二三四五六七八九十]+|[IVXivx]+)\s*[.、)]?\s+)?"
    r"(?:(?:annotated|selected|select|key|primary|main|additional|recommended|consulted|cited|further)\s+)?"
    r"(?:references?|sources?|citations?|bibliography|works\s+cited|reference\s+list|"
    r"sources\s+cited|cited\s+sources|source\s+list|footnotes|further\s+reading|"
    r"references\s+and\s+sources|sources\s+and\s+references|"
    r"参考文献|参考资料|参考来源|参考链接|引用来源|引用文献|资料来源|信息来源|数据来源|来源|引用|注释|文献)"
    r"\s*(?:\*\*|__)?\s*[:：]?\s*(?:\*\*|__)?\s*$",
    re.IGNORECASE,
)
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
# An entry that is unambiguous anywhere in a document: "[3] <url>", "[3]: url",
# "[3],url", "[^3]: anything", and several markers before a URL ("[31] [48] url").
_ENTRY_ANYWHERE = re.compile(
    r"^\s*(?:[-*+•]\s+)?(?:\[(?P<num>\d{1,3})\](?P<more>(?:\s*[,，]?\s*\[\d{1,3}\])*)\s*[:：,，.\-–]?\s*"
    r"(?=<?https?://|(?:arxiv|doi|pmid|pmcid)\s*:)"
    r"|\[(?P<num2>\d{1,3})\]\s*[:：]\s*"
    r"|\[\^(?P<foot>[^\]\s]{1,40})\]\s*[:：]\s*)",
    re.IGNORECASE,
)
# Inside a reference section labels may also be "3." / "3)" / "[3]" followed by a title;
# "[40] [44] title" gives both labels.
_ENTRY_IN_SECTION = re.compile(
    r"^\s*(?:[-*+•]\s+)?(?:\[(?P<num>\d{1,3})\](?!\()(?P<more>(?:\s*[,，]?\s*\[\d{1,3}\](?!\())*)"
    r"\s*[:：,，.\-–]?\s*"
    r"|\[\^(?P<foot>[^\]\s]{1,40})\]\s*[:：]?\s*"
    r"|(?P<num2>\d{1,3})\s*[.)、:：]\s*)",
)
# Outside a section: markers then a title, only an entry when a URL-only line follows.
_TITLE_ENTRY = re.compile(r"^\s*(?:[-*+•]\s+)?\[(?P<num>\d{1,3})\](?!\()(?P<more>(?:\s*[,，]?\s*\[\d{1,3}\])*)"
                          r"\s*[:：,，.\-–]?\s*(?P<title>\S.*)$")
_MORE_LABEL = re.compile(r"\[(\d{1,3})\]")
_TITLE_URL_LOOKAHEAD = 2  # the URL line may follow the title after one blank line


def trim_url(url: str) -> str:
    """Drop punctuation that ends a sentence rather than the URL, and unbalanced ')'."""
    url = url.strip().strip("<>")
    while url:
        if url[-1] in _URL_TRAILING:
            url = url[:-1]
        elif url[-1] == ")" and url.count("(") < url.count(")"):
            url = url[:-1]
        else:
            break
    return url


def clean_url(url: str) -> str:
    """:func:`trim_url`, and ``https://`` for an address written without a scheme
    (``www.who.int/x``, ``arxiv.org/abs/2001.08361``)."""
    url = trim_url(url)
    if url and not url[:8].lower().startswith(("http://", "https://")):
        url = "https://" + url
    return url


def mentions_url(text: str) -> bool:
    """Cheap test: could ``text`` hold a URL (with or without a scheme)?"""
    return "://" in text or "www." in text or "doi.org/" in text or "arxiv.org/" in text


def first_url(text: str) -> str | None:
    """The first URL in ``text``, cleaned; None if there is none."""
    m = URL_RE.search(text)
    return clean_url(m.group(0)) if m else None


def first_target(text: str) -> str | None:
    """Where an entry points: its first URL, else the canonical URL of its first
    resolvable identifier (``doi:10.1038/...``, ``arXiv:2311.10252``); None if neither."""
    url = first_url(text)
    if url is not None:
        return url
    for m in find_identifiers(text):
        if (ident := identifier_url(m)) is not None:
            return ident
    return None


def _url_only(line: str) -> str | None:
    m = _URL_ONLY.match(line)
    if not m:
        bare = line.strip().lstrip("-*+•").strip()
        return target_url(bare) if bare and " " not in bare.replace(": ", ":") else None
    return clean_url(m.group(1) or m.group(2) or m.group(3))


def _heading_level(line: str) -> int | None:
    m = HEADING.match(line)
    return len(m.group(1)) if m else None


def _entry_labels(m: re.Match[str]) -> list[str]:
    """Every label of an entry match: the first one and any further ``[n]`` markers."""
    first = m.group("num") or m.group("num2") or m.group("foot")
    labels = [str(int(first)) if first.isdigit() else first]
    more = m.groupdict().get("more") or ""
    labels += [str(int(x)) for x in _MORE_LABEL.findall(more)]
    return list(dict.fromkeys(labels))


class Layout(msgspec.Struct):
    """Which lines are body text, plus what the reference lists define."""

    body: list[tuple[int, str]]  # (line number, line) of body lines, code fences removed
    references: dict[str, str]
    unlinked: list[str]  # labels defined without a URL, in order
    order: list[str]  # labels in definition order (linked and unlinked)
    unlabeled: list[str]  # URLs listed in a reference section without a label
    skipped: set[int]  # line numbers that belong to reference sections or entries
    # Labels that later lists define again with another URL (each section closing with its
    # own list numbered from 1): label -> [(line, url)] of every definition, in order.
    redefined: dict[str, list[tuple[int, str]]] = {}


class _Definitions:
    """Reference definitions as they accumulate, with the entry awaiting its URL."""

    def __init__(self) -> None:
        self.refs: dict[str, str] = {}
        self.unlinked: list[str] = []
        self.order: list[str] = []
        self.unlabeled: list[str] = []
        self.pending: list[str] = []  # labels of an entry seen without a URL
        self.last_url: str | None = None  # URL of the entry just completed
        self.lines: dict[str, int] = {}  # label -> line of its first definition
        self.redefined: dict[str, list[tuple[int, str]]] = {}
        self.line = 0  # line of the entry being defined

    def define(self, labels: list[str], url: str | None) -> None:
        self.pending = []
        for label in labels:
            self.lines.setdefault(label, self.line)
            if label in self.unlinked and url:
                # A later list that gives URLs beats an earlier URL-less bibliography (some
                # reports print a readable list first, then the "[n] url" list).
                self.unlinked.remove(label)
                self.refs[label] = url
            elif label in self.unlinked:
                self.pending.append(label)  # still without URL: a following URL line may give one
            elif label in self.refs:
                # Otherwise the first definition wins, unless the label is defined again in
                # another list: then a marker takes the definition of the list after it.
                if url and url != self.refs[label] and self.line > self.lines[label]:
                    self.redefined.setdefault(label, [(self.lines[label], self.refs[label])]).append((self.line, url))
                continue
            else:
                self.order.append(label)
                if url:
                    self.refs[label] = url
                else:
                    self.unlinked.append(label)
                    self.pending.append(label)
        self.last_url = url

    def complete(self, url: str) -> None:
        """Give the pending entry's labels their URL (found on a later line)."""
        for label in self.pending:
            if label in self.unlinked:
                self.unlinked.remove(label)
                self.refs[label] = url
        self.pending = []
        self.last_url = url


# --------------------------------------------------------------------------- line shapes
#
# Reference sections are found by their shape, not by the words of their title: a run of
# entry lines that each hold a URL or an identifier, closing the report or a section
# (the next line is a markdown heading or the end), optionally under one title line of
# any wording. A title from the list of bibliography words (``References``, ``参考文献``)
# also opens a section whose entries carry no URL, but only over the entry lines that
# follow it: a body line that merely names sources ("Key references" as a table column
# header in a Word export) never swallows the prose after it.

_BLANK, _MD_HEADING, _PROSE, _TITLE, _ANCHORED, _LABEL, _URL_LINE, _BIB, _BIBTEXT, _CODE, _CONT = range(11)
# A year where a bibliography puts it: "(2020)", "2020.", "2020," or "n.d.".
# A year placed as a bibliography places it: "Smith, J. (2020).", "... Press, 2019. Title",
# "国家统计局，2023。", or "n.d." (prose years, "from 2020 to 2040, while", are not).
_YEAR = re.compile(r"\((?:19|20)\d{2}[a-z]?(?:,[^)]{1,20})?\)\s*[.,:]|(?:^|[.,:;，。]\s*)(?:19|20)\d{2}[a-z]?(?:年)?"
                   r"\s*(?:[.,;。，]|$)|\bn\.d\.", re.IGNORECASE)
_BIB_WORDS = re.compile(r"\b(?:accessed|retrieved|available(?: at| from)?|doi)\b|\b(?:et al|vol|pp)\.|访问日期|访问时间|访问于|检索日期|检索于|引用日期",
                        re.IGNORECASE)
_LIST_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)、])\s+")
_LINK_ONLY = re.compile(r"^\s*(?:[-*+•]\s+|\d{1,3}[.)、]\s+)?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\([^)\s]+\)(?P<tail>.*)$")
_BOLD_LINE = re.compile(r"^\s*(\*\*|__)[^*_]+\1\s*[:：]?\s*$")
# A sentence end: at the end of the line (before any markers) or inside it before more text.
_TERMINAL = re.compile(r"[.!?。！？；;][\s\d,⁰¹²³⁴⁵⁶⁷⁸⁹⁻^]*(?:(?:\[[^\]]*\]|<sup>[^<]*</sup>)\s*)*$|[.!?。！？]\s+\S")
_WORDS = re.compile(r"\S+")
# Citation syntax: a line that cites is a (short) statement, never a title.
_CITES = re.compile(r"\[\^?\d|\]\(|<sup|[⁰¹²³⁴⁵⁶⁷⁸⁹【]")
_IDENTIFIER_TEXT = re.compile(IDENTIFIER, re.IGNORECASE)
_MARKER_LINK = re.compile(r"\[\[?\^?\d{1,3}\]?\]\([^)\s]*\)")
_LINK_TARGET_TEXT = re.compile(r"\]\([^)\s]*\)")
_CJK_CHARS = re.compile(r"[\u3400-\u9fff]")
_CJK_SENTENCE_END = re.compile(r"[。！？]")
_CITE_GROUP_END = re.compile(r"[(（]\s*\[[^\]]*\]\([^)\s]*\)(?:\s*[,;，；]?\s*\[[^\]]*\]\([^)\s]*\))*\s*[)）]"
                             r"\s*[.。]?\s*$")
_SENTENCE_THEN_LINK = re.compile(r"[.!?。！？][”’\"')]*\s*[(（]?\s*\[[^\]]*\]\(")
_TITLE_MAX_CHARS = 80  # a title line, not a short paragraph
_ENTRY_MAX_CHARS = 400  # a bibliography entry, not a paragraph


def _entry_text(rest: str) -> bool:
    """Does the text after an entry's label read as an entry (a link or an address first, a
    bibliographic record, or a short title) rather than a claim that cites?"""
    if _LINK_ONLY.match(rest) or rest.lstrip().lower().startswith(("http://", "https://", "<http", "www.")):
        return True
    if _SENTENCE_THEN_LINK.search(rest) or _CITE_GROUP_END.search(rest):
        return False  # "... may store it. ([aibase.com](url))": a claim, then its citation
    if _has_year_or_bib_words(rest):
        return True
    bare = _IDENTIFIER_TEXT.sub(" ", URL_RE.sub(" ", _LINK_TARGET_TEXT.sub("]", rest)))
    return len(_WORDS.findall(_CJK_CHARS.sub("", bare))) + len(_CJK_CHARS.findall(bare)) / 2 <= 15


def has_year_or_bib_words(text: str) -> bool:
    """Does ``text`` (its words, not its addresses) hold a year placed as a bibliography
    places it or a bibliographic word ("accessed", "et al.", "访问日期")?"""
    return _has_year_or_bib_words(text)


# Substrings without which _YEAR and _BIB_WORDS cannot match (a cheap test first).
_BIB_HINTS = ("accessed", "retrieved", "available", "et al", "vol.", "pp.", "doi", "访问", "检索", "引用日期")


def _has_year_or_bib_words(text: str) -> bool:
    # "arXiv:2001.08361" is no year 2001: look at the words around the address only.
    if mentions_url(text):
        text = URL_RE.sub(" ", text)
    if mentions_identifier(text):
        text = _IDENTIFIER_TEXT.sub(" ", text)
    head = text[:160]
    low = text.lower()
    if ("19" in head or "20" in head or "n.d." in low[:160]) and _YEAR.search(head):
        return True
    return any(h in low for h in _BIB_HINTS) and _BIB_WORDS.search(text) is not None


def _classify(line: str) -> tuple[int, str | None, re.Match[str] | None]:
    """``(shape, target, entry match)`` of one line outside code."""
    stripped = line.strip()
    if not stripped:
        return _BLANK, None, None
    first = stripped[0]
    if first == "#" and HEADING.match(line):
        return _MD_HEADING, None, None
    listed = first in "[-*+•" or first.isdigit()
    if listed:
        m = _ENTRY_ANYWHERE.match(line)
        if m:
            return _ANCHORED, first_target(line[m.end():]), m
    if listed or first in "<hwdapiHWDAPI":
        only = _url_only(line)
        if only is not None:
            return _URL_LINE, only, None
    size = len(stripped)
    if size > _ENTRY_MAX_CHARS and (not mentions_url(stripped) or len(URL_RE.sub("", stripped)) > _ENTRY_MAX_CHARS):
        return _PROSE, None, None  # a paragraph, not an entry (addresses do not count)
    if "](" in line:
        # "[[3]](url)", "[3](url)": a citation carrying its URL, not what an entry lists.
        line = _MARKER_LINK.sub(" ", line)
    target = first_target(line) if (mentions_url(line) or mentions_identifier(line)) else None
    if listed:
        m = _ENTRY_IN_SECTION.match(line)
        if m:
            rest = line[m.end():]
            entry_target = first_target(rest) if target is not None else None
            if entry_target is not None and not _entry_text(rest):
                return _PROSE, None, None  # "1. Costs fell 80% ([IEA](url))": a claim in a list
            return _LABEL, entry_target, m
    if target is not None:
        link = _LINK_ONLY.match(line)
        # An unlabeled line holding a URL is an entry when the URL is its subject (a
        # link with at most a short tail) or it reads like a bibliography entry;
        # "Costs fell 80% (https://...)." in a list of findings stays prose.
        if stripped.lower().startswith(("http://", "https://", "<http", "www.")) or (
                link and len(_WORDS.findall(link.group("tail"))) <= 12) or (
                _has_year_or_bib_words(line) and not _CJK_SENTENCE_END.search(line)
                and not _SENTENCE_THEN_LINK.search(line) and not _CITE_GROUP_END.search(line)):
            return _BIB, target, None
        return _PROSE, None, None
    if (listed and _LIST_BULLET.match(line)) or _has_year_or_bib_words(line):
        return _BIBTEXT, None, None
    if size <= _TITLE_MAX_CHARS and (_BOLD_LINE.match(line) or not _TERMINAL.search(line)) and not _CITES.search(line):
        return _TITLE, None, None
    return _PROSE, None, None


_ENTRY_SHAPES = frozenset({_ANCHORED, _LABEL, _URL_LINE, _BIB, _BIBTEXT, _CONT})


def _mark_continuations(shapes: list[int], targets: list[str | None]) -> None:
    """An entry wrapped over several lines (PDF conversions): a line right after an entry
    line that holds no address yet, with the entry's address on a line below it (no blank
    line between), continues that entry."""
    n = len(shapes)
    for k in range(1, n):
        if shapes[k] in (_PROSE, _TITLE, _BIBTEXT) and targets[k] is None and targets[k - 1] is None and \
                shapes[k - 1] in (_LABEL, _ANCHORED, _BIBTEXT, _CONT):
            for j in range(k + 1, min(n, k + 4)):
                if shapes[j] in (_BLANK, _MD_HEADING, _CODE):
                    break
                if targets[j] is not None:
                    shapes[k] = _CONT
                    break


def _trailing_url(line: str) -> str | None:
    """The bare URL that ends ``line`` ("Title. Publisher. https://..."), None if it ends
    otherwise (a link "[title](url)" included)."""
    token = line.rstrip().rsplit(None, 1)[-1] if line.strip() else ""
    if not token.lower().startswith(("http://", "https://", "<http", "www.")):
        return None
    m = URL_RE.match(token.lstrip("<"))
    return clean_url(m.group(0)) if m and trim_url(token.lstrip("<")) == trim_url(m.group(0)) else None


def _mark_late_urls(lines: list[str], shapes: list[int], targets: list[str | None]) -> None:
    """An entry wrapped over several lines whose URL closes its last line ("2. Title:
    Subtitle" / "Publisher. https://..."), as PDF conversions print them: that last line
    gives the entry its URL, whatever it reads like."""
    for k in range(1, len(lines)):
        if shapes[k] != _PROSE or "://" not in lines[k] or len(lines[k]) > _ENTRY_MAX_CHARS:
            continue
        j = k - 1
        while j >= max(0, k - 3) and shapes[j] in (_PROSE, _TITLE, _BIBTEXT) and targets[j] is None:
            j -= 1
        if j >= 0 and shapes[j] in (_LABEL, _ANCHORED) and targets[j] is None and (url := _trailing_url(lines[k])):
            shapes[k], targets[k] = _BIB, url


# The tail of an address broken at the end of a line (PDF conversions): one token of URL
# characters that looks like a path ("technology-service-provider-acquisitions/").
_URL_REST = re.compile(r"^" + URL_BODY + r"$")
_URL_BREAKS = "/-_=?&.#"


def _join_wrapped_urls(lines: list[str]) -> list[int]:
    """Join an address broken over two lines: a line ending with a URL that stops at a
    break character (``/``, ``-``, ...) and a next line holding nothing but the rest of
    an address, followed by a blank line, an entry or the end. The next line is left
    blank; its number is returned."""
    n = len(lines)
    joined: list[int] = []
    for k in range(n - 1):
        line = lines[k].rstrip()
        if not line or line[-1] not in _URL_BREAKS or "://" not in line:
            continue
        token = line.rsplit(None, 1)[-1]
        if "://" not in token or _trailing_url(token) is None:
            continue
        rest = lines[k + 1].strip()
        if (not rest or len(rest) < 3 or rest.lower().startswith(("http", "www.", "[")) or not _URL_REST.match(rest)
                or not any(c in rest for c in "-/_.=?&#") or rest[:1].isdigit() and rest[1:2] in ".)、"):
            continue
        after = lines[k + 2].strip() if k + 2 < n else ""
        if after and not (after[:1] in "[-*+•#<" or after[:1].isdigit() or mentions_url(after)):
            continue
        lines[k] = line + rest
        lines[k + 1] = ""
        joined.append(k + 1)
    return joined


def _sections(lines: list[str], shapes: list[int], targets: list[str | None]) -> list[bool]:
    """Which lines belong to a reference section (see the comment above ``_classify``)."""
    n = len(lines)
    in_section = [False] * n

    def mark(lo: int, hi: int) -> None:
        for k in range(lo, hi):
            in_section[k] = True

    def prev_nonblank(k: int) -> int:
        k -= 1
        while k >= 0 and shapes[k] == _BLANK:
            k -= 1
        return k

    def attached(k: int) -> bool:
        """A line without a target that belongs to the entry below it: a title whose
        URL follows on its own line (after at most one blank), or the first line of an
        entry wrapped onto the next line."""
        if k + 1 < n and shapes[k + 1] in (_BIB, _URL_LINE, _CONT):
            return True
        if shapes[k] in (_LABEL, _ANCHORED):
            nxt = k + 1 if k + 1 < n and shapes[k + 1] != _BLANK else k + 2
            return nxt < n and shapes[nxt] == _URL_LINE
        return False

    # Runs of entry lines (blank lines allowed inside) and what follows each run.
    i = 0
    while i < n:
        if shapes[i] not in _ENTRY_SHAPES:
            i += 1
            continue
        j, last = i, i
        while j < n and (shapes[j] in _ENTRY_SHAPES or shapes[j] == _BLANK):
            if shapes[j] != _BLANK:
                last = j
            j += 1
        head = prev_nonblank(i)
        if head >= 0 and _REF_HEADING.match(lines[head]) is not None:
            # A bibliography title: its entries, with or without URLs, up to the first prose.
            run = range(i, last + 1)
            entries = sum(1 for k in run if shapes[k] != _BLANK)
            if any(targets[k] is not None or shapes[k] in (_LABEL, _ANCHORED) for k in run) or entries >= 3:
                mark(head, last + 1)
                i = j
                continue
        if j >= n or shapes[j] == _MD_HEADING:  # the run ends the report or a section
            # Its tail of entries that each hold a URL or an identifier.
            start, with_target, strong, labelled = last + 1, 0, False, False
            k = last
            while k >= i:
                if shapes[k] == _BLANK:
                    k -= 1
                    continue
                if targets[k] is not None:
                    with_target += 1
                elif not attached(k):
                    break
                # Unmistakably an entry: labelled, a URL alone, or a link with a short tail.
                strong = strong or shapes[k] in (_LABEL, _ANCHORED, _URL_LINE) or (
                    shapes[k] == _BIB and _LINK_ONLY.match(lines[k]) is not None)
                # "[3] ..." (a numbered list item "3. ..." is no entry on its own)
                labelled = labelled or shapes[k] == _ANCHORED or lines[k].lstrip()[:1] == "["
                start = k
                k -= 1
            head = prev_nonblank(start)
            titled = head >= 0 and (shapes[head] == _MD_HEADING or
                                    (shapes[head] == _TITLE and _own_line(lines, head)))
            if with_target >= 2 or (with_target and (labelled or (titled and strong))):
                mark(head if titled else start, last + 1)
        i = j
    return in_section


def _own_line(lines: list[str], k: int) -> bool:
    """Is line ``k`` a title of its own (bold, ending with a colon, or a one-line
    paragraph) rather than the last line of a wrapped paragraph?"""
    line = lines[k].rstrip()
    if _BOLD_LINE.match(line) or line.endswith((":", "：")):
        return k == 0 or not lines[k - 1].strip() or _BOLD_LINE.match(line) is not None
    return (k == 0 or not lines[k - 1].strip()) and (k + 1 >= len(lines) or not lines[k + 1].strip())


def layout(text: str) -> Layout:
    """Split ``text`` into body lines and reference definitions."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    joined = _join_wrapped_urls(lines) if "://" in text else []
    shapes: list[int] = []
    targets: list[str | None] = []
    in_fence = False
    for line in lines:
        if FENCE.match(line):
            in_fence = not in_fence
            shapes.append(_CODE)
            targets.append(None)
        elif in_fence:
            shapes.append(_CODE)
            targets.append(None)
        else:
            shape, target, _ = _classify(line)
            shapes.append(shape)
            targets.append(target)
    _mark_late_urls(lines, shapes, targets)
    _mark_continuations(shapes, targets)
    in_section = _sections(lines, shapes, targets)

    body: list[tuple[int, str]] = []
    defs = _Definitions()
    skipped: set[int] = set()
    ahead: set[int] = set()  # lines already consumed by a title entry outside a section
    was_in_section = False
    for i, line in enumerate(lines):
        if i in ahead:
            continue
        defs.line = i
        if in_section[i]:
            if not was_in_section:
                defs.pending, defs.last_url = [], None
            was_in_section = True
            skipped.add(i)
            shape = shapes[i]
            if shape in (_BLANK, _TITLE, _MD_HEADING, _CODE, _CONT) or _REF_HEADING.match(line):
                continue
            m = _ENTRY_IN_SECTION.match(line)
            if m:
                defs.define(_entry_labels(m), first_target(line[m.end():]))
                continue
            url = targets[i]
            if url:
                if defs.pending:
                    defs.complete(url)
                elif url != defs.last_url and url not in defs.unlabeled:
                    defs.unlabeled.append(url)
            continue
        was_in_section = False
        if shapes[i] == _CODE:
            body.append((i, line))
            continue
        m = _ENTRY_ANYWHERE.match(line)
        if m:
            defs.define(_entry_labels(m), first_target(line[m.end():]))
            skipped.add(i)
            continue
        only = targets[i] if shapes[i] == _URL_LINE else None
        if only is not None and only == defs.last_url:
            skipped.add(i)  # the URL repeated on its own line after its entry
            continue
        if defs.pending and line[:1] in (" ", "\t") and (url := first_target(line)):
            # Indented continuation of a footnote definition that gave no URL yet.
            defs.complete(url)
            skipped.add(i)
            continue
        t = _TITLE_ENTRY.match(line)
        if t and not URL_RE.search(line):
            follow = _title_url(lines, i)
            if follow is not None:
                j, url = follow
                defs.define(_entry_labels(t), url)
                skipped.update(range(i, j + 1))
                ahead.update(range(i + 1, j + 1))
                continue
        if line.strip():
            defs.pending, defs.last_url = [], None
        body.append((i, line))
    skipped.update(joined)  # the second half of a broken address is part of the line above
    return Layout(body=body, references=defs.refs, unlinked=defs.unlinked, order=defs.order,
                  unlabeled=defs.unlabeled, skipped=skipped, redefined=_other_lists(defs.redefined, skipped, lines))


def _other_lists(redefined: dict[str, list[tuple[int, str]]], skipped: set[int],
                 lines: list[str]) -> dict[str, list[tuple[int, str]]]:
    """Keep the redefinitions made in another list: body text lies between the two
    definitions. A list that repeats a label with another URL is one list (first wins)."""
    out: dict[str, list[tuple[int, str]]] = {}
    for label, defs in redefined.items():
        kept = [defs[0]]
        for line, url in defs[1:]:
            if any(k not in skipped and lines[k].strip() for k in range(kept[-1][0] + 1, line)):
                kept.append((line, url))
        if len(kept) > 1:
            out[label] = kept
    return out


def _title_url(lines: list[str], i: int) -> tuple[int, str] | None:
    """``(line, url)`` of the URL-only line that completes a ``[n] title`` entry on line
    ``i``: the next non-blank line within :data:`_TITLE_URL_LOOKAHEAD` lines."""
    for j in range(i + 1, min(len(lines), i + 1 + _TITLE_URL_LOOKAHEAD)):
        if not lines[j].strip():
            continue
        url = _url_only(lines[j])
        return (j, url) if url else None
    return None
