"""Scholarly identifiers cited in place of a URL, and the URL each one resolves to.

Research agents often cite papers by identifier rather than by link: ``(arXiv:2311.10252)``,
``[title](doi:10.1038/nature11152)``, ``PMID: 31452104``, ``PMCID: PMC6800160``,
``ISBN 978-0-262-03384-8``. Each is turned into the canonical address a reader (or the
benchmark's LLM extractor, which writes URLs) would follow:

=========  ==========================================  ==============================================
scheme     written as                                  URL
=========  ==========================================  ==============================================
arXiv      ``arXiv:2311.10252``, ``arXiv 2311.10252``  ``https://arxiv.org/abs/<id>``
DOI        ``doi:10.1038/nature11152``, ``DOI 10.1/x``  ``https://doi.org/<doi>``
PMID       ``PMID: 31452104``                          ``https://pubmed.ncbi.nlm.nih.gov/<id>/``
PMCID      ``PMCID: PMC6800160``, ``PMC6800160``       ``https://pmc.ncbi.nlm.nih.gov/articles/<id>/``
ISBN       ``ISBN 978-0-262-03384-8`` (checksum valid)  ``https://openlibrary.org/isbn/<digits>``
=========  ==========================================  ==============================================

A prefix is required (``arXiv:``, ``doi:``/``DOI``, ``PMID``, ``PMCID``/``PMC``, ``ISBN``):
a bare ``2311.10252`` or ``10.1038/...`` is too easily a number or a path. An ISBN whose
check digit is wrong resolves to nothing. Pure functions, no I/O.
"""
from __future__ import annotations

import re

__all__ = ["IDENTIFIER", "IDENTIFIER_HINT", "IDENTIFIER_PLAIN", "LINK_TARGET", "find_identifiers", "mentions_identifier", "identifier_end", "identifier_url",
           "identifier_urls", "target_url"]

# One identifier with its prefix; exactly one named group is set per match.
IDENTIFIER = (
    r"(?:(?<![\w/.])arxiv(?:\s*:\s*|\s+(?=\d{4}\.\d{4,5}(?:v\d+)?\b))"
    r"(?P<arxiv>\d{4}\.\d{4,5}(?:v\d+)?|[a-z][a-z\-]*(?:\.[a-z]{2})?/\d{7}(?:v\d+)?)"
    r"|(?<![\w/.])doi\s*(?::\s*|\s)(?P<doi>10\.\d{4,9}/(?:[^\s()<>\[\]\"'，。；、]|\([^\s()<>]*\))+)"
    r"|(?<![\w/.])pmid\s*:?\s*(?P<pmid>\d{1,9})(?!\d)"
    r"|(?<![\w/.])(?:pmcid\s*:?\s*)?(?P<pmc>pmc\d{4,9})(?!\d)"
    r"|(?<![\w/.])isbn(?:-1[03])?\s*:?\s*(?P<isbn>(?:97[89][\- ]?)?\d{1,5}[\- ]?\d{1,7}[\- ]?\d{1,7}[\- ]?[\dx])(?![\w\-]))"
)
_IDENTIFIER_RE = re.compile(IDENTIFIER, re.IGNORECASE)
# The same without group names, for embedding in larger patterns (and repeating).
IDENTIFIER_PLAIN = re.sub(r"\(\?P<\w+>", "(?:", IDENTIFIER)
# A link target that is an identifier: ``(arXiv:1105.1834)``, ``(doi:10.1038/x)``, ``(PMC123)``.
LINK_TARGET = r"(?:arxiv|doi|pmid|pmcid|isbn)\s*:\s*[^\s()<>]+(?:\([^\s()<>]*\)[^\s()<>]*)*|pmc\d{4,9}"
# Cheap test before the full scan: does a piece of text mention a scheme at all?
IDENTIFIER_HINT = re.compile(r"(?:arxiv|doi|pmid|pmcid|isbn(?:-1[03])?)\s*:|\b(?:doi|pmid|isbn|arxiv)\s+\d|pmc\d",
                             re.IGNORECASE)
_DOI_TRAILING = ".,;:!?*_~'\""


def _clean_doi(doi: str) -> str:
    """Drop sentence punctuation and an unbalanced closing parenthesis after a DOI."""
    while doi:
        if doi[-1] in _DOI_TRAILING:
            doi = doi[:-1]
        elif doi[-1] == ")" and doi.count("(") < doi.count(")"):
            doi = doi[:-1]
        else:
            break
    return doi


def _isbn_ok(digits: str) -> bool:
    """True when ``digits`` (10 or 13 characters, separators removed) has a valid check digit."""
    if len(digits) == 10 and digits[:9].isdigit() and (digits[9].isdigit() or digits[9] in "xX"):
        total = sum((10 - i) * int(d) for i, d in enumerate(digits[:9]))
        total += 10 if digits[9] in "xX" else int(digits[9])
        return total % 11 == 0
    if len(digits) == 13 and digits.isdigit():
        total = sum(int(d) * (1 if i % 2 == 0 else 3) for i, d in enumerate(digits))
        return total % 10 == 0
    return False


def identifier_url(m: re.Match[str]) -> str | None:
    """The canonical URL of one :data:`IDENTIFIER` match, None when it does not resolve
    (an ISBN with a wrong check digit)."""
    if (arxiv := m.group("arxiv")) is not None:
        return f"https://arxiv.org/abs/{arxiv}"
    if (doi := m.group("doi")) is not None:
        doi = _clean_doi(doi)
        return f"https://doi.org/{doi}" if "/" in doi and not doi.endswith("/") else None
    if (pmid := m.group("pmid")) is not None:
        return f"https://pubmed.ncbi.nlm.nih.gov/{int(pmid)}/"
    if (pmc := m.group("pmc")) is not None:
        return f"https://pmc.ncbi.nlm.nih.gov/articles/PMC{pmc[3:]}/"
    isbn = re.sub(r"[\- ]", "", m.group("isbn") or "").upper()
    return f"https://openlibrary.org/isbn/{isbn}" if _isbn_ok(isbn) else None


def identifier_end(m: re.Match[str]) -> int:
    """Where the identifier of match ``m`` really ends (a DOI loses trailing punctuation)."""
    if m.group("doi") is not None:
        return m.start("doi") + len(_clean_doi(m.group("doi")))
    return m.end()


_SCHEMES = ("arxiv", "doi", "pmid", "pmc", "isbn")


def mentions_identifier(text: str) -> bool:
    """Cheap test: could ``text`` hold an identifier? (Substring checks first: the
    parser asks this of every paragraph, and most name no scheme at all.)"""
    low = text.lower()
    return ("arxiv" in low or "doi" in low or "pmid" in low or "pmc" in low or "isbn" in low) and \
        IDENTIFIER_HINT.search(text) is not None


def find_identifiers(text: str) -> list[re.Match[str]]:
    """Every identifier written in ``text``, in order."""
    if not mentions_identifier(text):
        return []
    return list(_IDENTIFIER_RE.finditer(text))


def identifier_urls(text: str) -> list[str]:
    """Canonical URLs of every resolvable identifier in ``text``, unique, in order."""
    out: dict[str, None] = {}
    for m in find_identifiers(text):
        if (url := identifier_url(m)) is not None:
            out.setdefault(url)
    return list(out)


def target_url(target: str) -> str | None:
    """A link target or entry that is nothing but an identifier (``arXiv:1105.1834``,
    ``doi:10.1038/nature11152``) as its canonical URL; None for anything else."""
    target = target.strip().strip("<>")
    m = _IDENTIFIER_RE.fullmatch(target) or _IDENTIFIER_RE.match(target)
    if m is None or target[identifier_end(m):].strip(_DOI_TRAILING + " "):
        return None
    return identifier_url(m)
