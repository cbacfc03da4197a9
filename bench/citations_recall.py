"""URL recall of the citation parser on reference lists shaped like OpenAI Deep Research
exports, built from the 100 real DeepResearch Bench reports.

What is measured, and against what. The shared data holds no OpenAI Deep Research
reports and no LLM extraction of cited URLs (the benchmark's ``extracted.jsonl``), so the
recall the issue quotes (~57% against the benchmark's LLM extraction) cannot be
reproduced here. Instead, each Claude 3.7 Sonnet report (``[n] url - title`` reference
lists) is rewritten into the export shapes, and the gold set is computed *without the
parser*: the URLs of the reference entries (a plain ``^[n] url`` regex) whose label is
cited by a ``[n]`` marker in the body (a plain marker regex). The rewrite:

* every label ``n`` gets an alias ``n+500`` and entries carry both (``[n] [n+500] url``);
  in the body, odd labels are always cited by their alias (only the entry's second
  marker leads to the URL), even labels alternate between the two;
* entries cycle through three shapes: markers + URL, then the URL repeated on its own
  line; markers + title, a blank line, the URL (repeated); markers + URL alone;
* half the reports keep a ``Sources`` heading above the list, half have none.

Recall = |gold ∩ URLs of the parser's statement-URL pairs| / |gold|, pooled over the
reports (also the per-report minimum), for the original reports and the rewritten ones.

    .venv/bin/python -m bench.citations_recall [--parser-file OLD_citations.py]

``--parser-file`` measures another version of the parser, e.g. the one before the export
shapes were handled: ``git show d3dd597:engine/text/citations.py > /tmp/old.py`` (a
self-contained module then). Prints one JSON object.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import orjson

from bench.machine import machine
from drscore.engine.text.citations import parse_citations

REPORTS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "drb" / "reports.claude-3-7-sonnet.jsonl"
ALIAS = 500
_ENTRY = re.compile(r"^\[(\d+)\]\s+(https?://\S+)(?:\s+-\s+(.*))?$")
_MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


def gold(article: str) -> tuple[dict[str, str], dict[str, str], list[str], list[str]]:
    """(label -> url, label -> title, body lines, entry lines) by plain regexes."""
    urls: dict[str, str] = {}
    titles: dict[str, str] = {}
    body: list[str] = []
    for line in article.splitlines():
        m = _ENTRY.match(line.strip())
        if m:
            urls.setdefault(m.group(1), m.group(2))
            titles.setdefault(m.group(1), (m.group(3) or "Untitled page").strip())
        else:
            body.append(line)
    return urls, titles, body, []


def cited_gold(urls: dict[str, str], body: list[str]) -> set[str]:
    labels = {x.strip() for m in _MARKER.finditer("\n".join(body)) for x in m.group(1).split(",")}
    return {urls[label] for label in labels if label in urls}


def export_shape(article: str, with_heading: bool) -> tuple[str, set[str]]:
    """The report rewritten in the export shapes, and its gold cited URLs."""
    urls, titles, body, _ = gold(article)
    expected = cited_gold(urls, body)
    seen: dict[str, int] = {}

    def alias(m: re.Match[str]) -> str:
        out = []
        for x in m.group(1).split(","):
            label = x.strip()
            k = seen.get(label, 0)
            seen[label] = k + 1
            use_alias = label in urls and (int(label) % 2 == 1 or k % 2 == 1)
            out.append(f"[{int(label) + ALIAS}]" if use_alias else f"[{label}]")
        return "".join(out)

    text = "\n".join(_MARKER.sub(alias, line) for line in body).rstrip()
    while text.endswith(("References", "Sources", "参考资料", "#")):
        text = text.rsplit("\n", 1)[0].rstrip()
    lines = [text, ""]
    if with_heading:
        lines += ["Sources", ""]
    for k, (label, url) in enumerate(urls.items()):
        markers = f"[{label}] [{int(label) + ALIAS}]"
        shape = k % 3
        if shape == 0:
            lines += [f"{markers} {url}", url, ""]
        elif shape == 1:
            lines += [f"{markers} {titles[label]}", "", url, url, ""]
        else:
            lines += [f"{markers} {url}", ""]
    return "\n".join(lines), expected


def recall(texts: list[tuple[str, set[str]]]) -> dict:
    hit = total = 0
    per_report = []
    for text, expected in texts:
        if not expected:
            continue
        found = {p.url for p in parse_citations(text).pairs}
        h = len(expected & found)
        hit += h
        total += len(expected)
        per_report.append(h / len(expected))
    return {"reports": len(per_report), "gold_urls": total, "recovered": hit,
            "url_recall": round(hit / total, 4) if total else None,
            "min_report_recall": round(min(per_report), 4) if per_report else None}


def _load_parser(path: str):  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location("citations_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.parse_citations


def main() -> None:
    import argparse

    global parse_citations
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parser-file", help="measure parse_citations from this file instead")
    args = ap.parse_args()
    if args.parser_file:
        parse_citations = _load_parser(args.parser_file)
    rows = [orjson.loads(line) for line in REPORTS.read_bytes().splitlines() if line.strip()]
    original = []
    exported = []
    for i, row in enumerate(rows):
        urls, _, body, _ = gold(row["article"])
        original.append((row["article"], cited_gold(urls, body)))
        exported.append(export_shape(row["article"], with_heading=i % 2 == 0))
    print(json.dumps({
        "bench": "citations_recall",
        "gold": "reference-entry URLs whose label a body marker cites (regexes, not the parser)",
        "parser": args.parser_file or "drscore.engine.text.citations",
        "original_reports": recall(original),
        "export_shapes": recall(exported),
        "export_shapes_with_heading": recall(exported[0::2]),
        "export_shapes_without_heading": recall(exported[1::2]),
        "machine": machine(),
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
