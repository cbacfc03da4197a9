"""Every relative link in README.md and docs/*.md points at a file that exists and, where it
names a section (``page.md#section``), at a heading that page has: sections get renamed and
moved, and a link that no longer lands is found here rather than by a reader."""
from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from support.examples import ROOT, doc_pages

FENCED = re.compile(r"^```.*?^```", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)


def _prose(text: str) -> str:
    """The page without code (a link written inside an example is not a link), its lines
    where they were."""
    return INLINE_CODE.sub("", FENCED.sub(lambda m: "\n" * m.group(0).count("\n"), text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (``-`` and ``_`` kept),
    spaces turned to ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@functools.cache  # many links name sections of one page (providers.md): read and parse it once
def anchors(page: Path) -> frozenset[str]:
    """The anchors of ``page``'s headings; a repeated heading gets ``-1``, ``-2``, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for m in HEADING.finditer(FENCED.sub("", page.read_text(encoding="utf-8"))):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return frozenset(out)


def test_slugs_follow_github():
    # worked by hand from headings in these docs
    assert slug("A known quota (`bench/pacing.py`)") == "a-known-quota-benchpacingpy"
    assert slug("Stops 53-55: estimates on cl100k") == "stops-53-55-estimates-on-cl100k"
    assert slug("`--limit N` and where runs go") == "--limit-n-and-where-runs-go"


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_land(page: Path):
    text = _prose(page.read_text(encoding="utf-8"))
    broken = []
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"[a-zA-Z][a-zA-Z+.-]*:", target):  # https:, mailto:, ...: not ours to check here
            continue
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        line = text.count("\n", 0, m.start()) + 1
        if not where.exists():
            broken.append(f"line {line}: {target}: no such file")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(f"line {line}: {target}: {where.name} has no heading #{anchor}")
    assert not broken, f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)
