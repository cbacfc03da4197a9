"""Source recall and sentence accuracy of the citation parser on real reports rewritten
into the citation styles of real exports, against gold computed from the original reports
with plain regexes, not by the parser.

Data: the 100 DeepResearch Bench reports of the shared data (Claude 3.7 Sonnet; numbered
markers ``[n]`` and a ``[n] url - title`` list), or ``--reports FILE``. Each report is
rewritten, keeping its prose, into these styles:

* ``numbered``: as published (the control);
* ``footnotes``: ``[^n]`` markers, ``[^n]: title, url`` definitions (Perplexity, pandoc);
* ``superscripts``: Unicode superscripts after the sentence's full stop, ``Works cited``
  list ``n. title, accessed ..., url`` (Gemini exports);
* ``sup-tags``: ``<sup>n</sup>`` after the word, lines hard-wrapped at 80 columns, a
  ``References`` list wrapped as well (PDF-to-Markdown conversions);
* ``link-markers``: ``[[n]](url)`` and a ``**Sources:**`` list (Grok's inline citations,
  Onyx);
* ``inline-links``: ``([title](url))`` in place of the markers, no list (Claude);
* ``links-after-stop``: ``sentence. ([host](url))`` after the full stop (ChatGPT's
  citation links);
* ``word-export``: markers after the full stop, headings without ``#``, tables flattened
  to one cell a line with a ``Key references`` column header, the list as ``[n] url``,
  a blank line and the URL again, or ``[n] title``, blank, URL (OpenAI Deep Research
  exported from Word);
* ``mixed``: the paragraphs cycle through the inline styles above;
* ``bibliography-only``: the markers removed and the list kept, under each of 12 titles
  (``Sources consulted``, ``Works consulted``, ``Endnotes``, ``主要参考资料`` ...) in turn.

Gold (regexes on the original): the URLs of the entries whose label a body marker cites,
and for every citation point the last words before it (an *anchor*: up to five words, or
ten characters of Chinese text). Measured per rewritten report: source recall (gold URLs
among the URLs of the parser's pairs) and sentence accuracy (citation points for which a
pair with one of the point's URLs has a statement containing the anchor). For
``bibliography-only``: pairs (must be 0) and whether the report goes to the judge's
extractor (``parseable`` False) or is ``bibliography_only``. Prints one JSON line::

    .venv/bin/python -m bench.citation_styles [--reports FILE]
"""
from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from bench.machine import machine
from bench.shared_data import DRB, require_data
from drscore.engine.text.citations import parse_citations

REPORTS = DRB / "reports.claude-3-7-sonnet.jsonl"
_ENTRY = re.compile(r"^\[(\d+)\]\s+(https?://\S+)(?:\s+-\s+(.*))?$")
_GROUP = re.compile(r"(?:[ \t]?\[\d{1,3}(?:\s*[,，、]\s*\d{1,3})*\])+")
_NUMS = re.compile(r"\d{1,3}")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_CJK = re.compile(r"[\u3400-\u9fff]")
_NORM_DROP = re.compile(r"[^0-9a-z\u3400-\u9fff]+")
_TERMINATORS = ".!?。！？"
_BIB_TITLE = re.compile(r"^\s*#*\s*(?:\*\*)?(?:References|Sources|Bibliography|参考文献|参考资料)(?:\*\*)?\s*[:：]?\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:>\s*)*(?:[-*+•]|\d{1,3}[.)、])\s*")
_SUPER = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
BIB_TITLES = ["## Sources consulted", "## Works consulted", "## List of sources", "## Endnotes", "## Notes",
              "## Links", "## Literature", "## Recommended reading", "## 主要参考资料", "## Sources and further reading",
              "## Bibliography (selected)", "Works cited"]


def norm(text: str) -> str:
    """Letters, digits and CJK characters only: "7.7%" and "7,7" compare alike."""
    return _NORM_DROP.sub("", text.lower())


class Source:
    """One original report: body lines, entries, gold URLs and citation points."""

    def __init__(self, article: str) -> None:
        self.entries: dict[str, tuple[str, str]] = {}
        self.body: list[str] = []
        for line in article.splitlines():
            m = _ENTRY.match(line.strip())
            if m:
                self.entries.setdefault(m.group(1), (m.group(2), (m.group(3) or "Untitled page").strip()))
            else:
                self.body.append(line)
        while self.body and (not self.body[-1].strip() or self.body[-1].strip().lstrip("#").strip().rstrip(":：")
                             in ("References", "Sources", "参考文献", "参考资料", "参考来源", "资料来源")):
            self.body.pop()
        self.points: list[tuple[str, frozenset[str]]] = []  # (anchor, urls)
        in_code = False
        for line in self.body:
            if line.lstrip().startswith("```"):
                in_code = not in_code
                continue
            if in_code:
                continue
            if _BIB_TITLE.match(line):
                break  # a readable bibliography before the list: its markers cite nothing
            for m in _GROUP.finditer(line):
                urls = frozenset(self.entries[x][0] for x in _NUMS.findall(m.group(0)) if x in self.entries)
                anchor = _anchor(line[:m.start()])
                if urls and anchor:
                    self.points.append((anchor, urls))
        self.gold = {u for _, urls in self.points for u in urls}

    def url(self, label: str) -> str | None:
        e = self.entries.get(label)
        return e[0] if e else None


def _anchor(prefix: str) -> str:
    """The last words before a marker, without markup: what its statement must contain."""
    text = _LINK.sub(r"\1", _GROUP.sub("", prefix)).replace("**", "").replace("|", " ").replace("#", " ")
    text = _LIST_ITEM.sub("", text).rstrip().rstrip(_TERMINATORS + ",;:，；：\"”")
    # Only the words of the sentence the marker closes.
    text = re.split(r"[。！？]|[.!?][\"”')]*\s+(?=[A-Z\u3400-\u9fff\"“(])", text)[-1]
    if _CJK.search(text[-20:]):
        chars = [c for c in text if c.isalnum()]
        tail = "".join(chars[-10:])
        return tail if len(tail) >= 4 else ""
    words = _NORM_DROP.sub(" ", text.lower()).split()
    return " ".join(words[-5:]) if len(words) >= 2 else ""


# --------------------------------------------------------------------------- styles


def _markers(src: Source, line: str, render: Callable[[list[str]], str], after_stop: bool = False) -> str:
    """``line`` with each marker group replaced by ``render(labels)``; ``after_stop`` moves
    a group written just before a sentence's full stop after it."""
    def sub(m: re.Match[str]) -> str:
        labels = [x for x in _NUMS.findall(m.group(1)) if src.url(x)]
        out = render(labels) if labels else ""
        return (m.group(2) + out) if (after_stop and m.group(2)) else (out + (m.group(2) or ""))
    return re.sub(r"((?:[ \t]?\[\d{1,3}(?:\s*[,，、]\s*\d{1,3})*\])+)([" + _TERMINATORS + "])?", sub, line)


def _host(url: str) -> str:
    return urlsplit(url).netloc.removeprefix("www.") or url


def _each(src: Source, fn: Callable[[str], str]) -> list[str]:
    out, in_code = [], False
    for line in src.body:
        if line.lstrip().startswith("```"):
            in_code = not in_code
        out.append(line if in_code else fn(line))
    return out


def footnotes(src: Source) -> str:
    body = _each(src, lambda ln: _markers(src, ln, lambda ls: "".join(f"[^{x}]" for x in ls)))
    refs = [f"[^{k}]: {t}, {u}" for k, (u, t) in src.entries.items()]
    return "\n".join(body + [""] + refs) + "\n"


def superscripts(src: Source) -> str:
    body = _each(src, lambda ln: _markers(src, ln, lambda ls: ",".join(x.translate(_SUPER) for x in ls),
                                            after_stop=True).replace(" ,", ","))
    refs = [f"{k}. {t}, accessed June 3, 2025, {u}" for k, (u, t) in src.entries.items()]
    return "\n".join(body + ["", "Works cited", ""] + refs) + "\n"


def _wrap(line: str, width: int = 80) -> list[str]:
    """Hard-wrap ``line`` as a PDF conversion does: at spaces for Latin text, anywhere but
    inside a tag or a number for Chinese text."""
    if len(line) <= width or line.lstrip().startswith(("|", "#", "```")):
        return [line]
    if _CJK.search(line):
        out, start = [], 0
        while len(line) - start > width:
            cut = start + width
            while cut < len(line) and (line[cut].isdigit() or line[cut] in ",.%$" or
                                       line.rfind("<", start, cut) > line.rfind(">", start, cut)):
                cut += 1
            out.append(line[start:cut])
            start = cut
        return out + [line[start:]] if start < len(line) else out
    out, cur = [], ""
    for word in line.split(" "):
        if cur and len(cur) + 1 + len(word) > width and not _LIST_ITEM.fullmatch(cur + " "):
            out.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    return out + [cur] if cur else out


def sup_tags(src: Source) -> str:
    body = _each(src, lambda ln: _markers(src, ln, lambda ls: f"<sup>{','.join(ls)}</sup>"))
    wrapped = [w for line in body for w in _wrap(line.replace(" <sup>", "<sup>"))]
    refs: list[str] = []
    for k, (u, t) in src.entries.items():
        refs += _wrap(f"[{k}] {t}.") + [f"    {u}"]
    return "\n".join(wrapped + ["", "## References", ""] + refs) + "\n"


def link_markers(src: Source) -> str:
    body = _each(src, lambda ln: _markers(src, ln, lambda ls: "".join(f"[[{x}]]({src.url(x)})" for x in ls)))
    refs = [f"- [{t}]({u})" for u, t in src.entries.values()]
    return "\n".join(body + ["", "**Sources:**"] + refs) + "\n"


def inline_links(src: Source) -> str:
    def render(ls: list[str]) -> str:
        return " (" + "; ".join(f"[{src.entries[x][1]}]({src.url(x)})" for x in ls) + ")"
    return "\n".join(_each(src, lambda ln: _markers(src, ln, render))) + "\n"


def links_after_stop(src: Source) -> str:
    def render(ls: list[str]) -> str:
        return " (" + " ".join(f"[{_host(src.url(x) or '')}]({src.url(x)})" for x in ls) + ")"
    return "\n".join(_each(src, lambda ln: _markers(src, ln, render, after_stop=True))) + "\n"


def word_export(src: Source) -> str:
    out: list[str] = []
    header_done = False
    for line in _each(src, lambda ln: _markers(src, ln, lambda ls: " " + "".join(f"[{x}]" for x in ls),
                                                after_stop=True)):
        s = line.strip()
        if s.startswith("#"):
            out += [s.lstrip("#").strip(), ""]
        elif s.startswith("|"):
            if re.match(r"^\|?\s*:?-{2,}", s):
                continue
            cells = [c.strip() for c in s.strip("|").split("|")]
            if not header_done:
                cells.append("Key references")
                header_done = True
            for c in cells:
                out += [c, ""]
        else:
            header_done = header_done and bool(s)
            out.append(line)
    refs: list[str] = []
    for i, (k, (u, t)) in enumerate(src.entries.items()):
        refs += ([f"[{k}] {u}", "", u, ""] if i % 3 else [f"[{k}] {t}", "", u, ""])
    return "\n".join(out + [""] + refs) + "\n"


_INLINE_STYLES = [footnotes, link_markers, inline_links, links_after_stop]


def mixed(src: Source) -> str:
    lines, k = [], 0
    renders: list[tuple[Callable[[list[str]], str], bool]] = [
        (lambda ls: "".join(f"[{x}]" for x in ls), False),
        (lambda ls: "".join(f"[[{x}]]({src.url(x)})" for x in ls), False),
        (lambda ls: " (" + "; ".join(f"[{src.entries[x][1]}]({src.url(x)})" for x in ls) + ")", False),
        (lambda ls: " (" + " ".join(f"[{_host(src.url(x) or '')}]({src.url(x)})" for x in ls) + ")", True),
    ]
    for line in _each(src, lambda ln: ln):
        if not line.strip():
            k += 1
            lines.append(line)
            continue
        render, after = renders[k % len(renders)]
        lines.append(_markers(src, line, render, after_stop=after))
    refs = [f"[{k}] {u} - {t}" for k, (u, t) in src.entries.items()]
    return "\n".join(lines + ["", "参考资料：" if any(_CJK.search(x) for x in lines[:5]) else "References:"] + refs) + "\n"


STYLES: dict[str, Callable[[Source], str]] = {
    "numbered": lambda s: "\n".join(s.body + [""] + [f"[{k}] {u} - {t}" for k, (u, t) in s.entries.items()]) + "\n",
    "footnotes": footnotes, "superscripts": superscripts, "sup-tags": sup_tags, "link-markers": link_markers,
    "inline-links": inline_links, "links-after-stop": links_after_stop, "word-export": word_export, "mixed": mixed,
}


def bibliography_only(src: Source, title: str) -> str:
    body = _each(src, lambda ln: _GROUP.sub("", ln))
    refs = [f"{k}. [{t}]({u})" for k, (u, t) in src.entries.items()]
    return "\n".join(body + ["", title, ""] + refs) + "\n"


# --------------------------------------------------------------------------- measure


def measure(src: Source, text: str) -> tuple[float, float, int]:
    """(source recall, sentence accuracy, pairs) of the parser on ``text``."""
    pairs = parse_citations(text).pairs
    found = {p.url for p in pairs}
    by_url: dict[str, list[str]] = {}
    for p in pairs:
        by_url.setdefault(p.url, []).append(norm(p.statement))
    recall = len(src.gold & found) / len(src.gold)
    right = sum(1 for anchor, urls in src.points
                if any(norm(anchor) in st for u in urls for st in by_url.get(u, ())))
    return recall, right / len(src.points), len(pairs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", default=str(REPORTS), help="DRB-shaped reports JSONL (default: the shared data)")
    args = ap.parse_args()
    require_data("citation_styles", args.reports)
    sources = [Source(orjson.loads(line)["article"]) for line in Path(args.reports).read_bytes().splitlines()
               if line.strip()]
    sources = [s for s in sources if s.gold]
    t0 = time.perf_counter()
    styles: dict[str, dict] = {}
    every_report: list[float] = []
    every_sentence: list[float] = []
    for name, rewrite in STYLES.items():
        recalls, sentences, pairs = [], [], 0
        for src in sources:
            r, s, n = measure(src, rewrite(src))
            recalls.append(r)
            sentences.append(s)
            pairs += n
        every_report += recalls
        every_sentence += sentences
        styles[name] = {"reports": len(recalls), "mean_source_recall": round(sum(recalls) / len(recalls), 4),
                        "min_source_recall": round(min(recalls), 4),
                        "reports_below_0.95": sum(1 for r in recalls if r < 0.95),
                        "mean_right_sentence": round(sum(sentences) / len(sentences), 4),
                        "min_right_sentence": round(min(sentences), 4), "pairs": pairs}
    bib = {"reports": 0, "pairs": 0, "to_judge": 0, "bibliography_only": 0}
    for i, src in enumerate(sources):
        parse = parse_citations(bibliography_only(src, BIB_TITLES[i % len(BIB_TITLES)]))
        bib["reports"] += 1
        bib["pairs"] += len(parse.pairs)
        bib["to_judge"] += 0 if parse.parseable else 1
        bib["bibliography_only"] += 1 if parse.bibliography_only else 0
    points = sum(len(s.points) for s in sources)
    print(json.dumps({
        "bench": "citation_styles",
        "gold": "regexes on the original reports: cited entry URLs; per citation point the words before it",
        "reports": len(sources), "citation_points_per_style": points, "styles": styles,
        "all_styles": {"rewritten_reports": len(every_report),
                       "mean_source_recall": round(sum(every_report) / len(every_report), 4),
                       "min_source_recall": round(min(every_report), 4),
                       "mean_right_sentence": round(sum(every_sentence) / len(every_sentence), 4),
                       "min_right_sentence": round(min(every_sentence), 4)},
        "bibliography_only": bib,
        "seconds": round(time.perf_counter() - t0, 1),
        "machine": machine(),
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
