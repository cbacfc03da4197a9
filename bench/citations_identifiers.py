"""Source recall of the citation parser against the benchmark's own LLM extraction, on
real reports of agents other than the shared data's, in several citation styles,
including citations by identifier (arXiv, DOI, PMCID).

Data: ``tests/data/drb_agents/`` (see its ``manifest.json`` for provenance): real
DeepResearch Bench reports with the set of URLs the benchmark's extractor
(``utils/extract.py``, an LLM) found in each. Nine are measured as published:

* ``dls-63``: numbered markers ``[n]``, a reference list ``1. [title](url)`` of arXiv,
  DOI and PMC links;
* ``gpt-researcher-61``: inline links ``([Author, year](url))`` and an unlabeled APA list;
* ``openai-58`` ... ``openai-65`` (seven): OpenAI Deep Research exported from Word, markers
  after the full stop, headings without ``#``, tables flattened one cell a line (a "Key
  references" column header), a ``[n] url`` / blank / ``url`` list. Two gold URLs were
  mangled by the benchmark's extractor (``unreachable_urls`` in the manifest): no parser
  can reach more than 0.971 on openai-58 and 0.981 on openai-59.

The identifier styles come from the same real reports, rewritten the way agents write
identifiers (no published DRB report in reach cites by identifier together with the
benchmark's extraction of it). Their gold set is the benchmark's URL set with each
rewritten URL replaced by the canonical address of its identifier
(``https://arxiv.org/pdf/2306.06998.pdf`` -> ``https://arxiv.org/abs/2306.06998``):

* ``dls-63/refs-by-identifier``: each entry ``1. Title. arXiv:2306.06998`` (``doi:...``,
  ``PMCID: PMC...``), no link;
* ``dls-63/links-to-identifiers``: ``1. [title](arXiv:2306.06998)``, ``[title](doi:...)``;
* ``dls-63/parenthetical-in-text``: every marker run ``[1][2]`` in the text replaced by
  ``(arXiv:2306.06998; doi:10.1515/...)`` and the reference list dropped;
* ``gpt-researcher-61/inline-doi-links``: every link whose URL carries a DOI rewritten to
  ``[Wang et al., 2022](doi:10.3389/fmars.2022.996626)``.

And one control: ``dls-63/bibliography-only`` (markers removed from the text, list kept)
must yield no pair, as the benchmark's extractor returns none by rule.

Source recall of a report = |gold ∩ URLs of the parser's pairs| / |gold| (URLs compared
with scheme and host lower-cased and a trailing ``/`` dropped). Prints one JSON line per
report, then one with the mean and the minimum::

    .venv/bin/python -m bench.citations_identifiers
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

from bench.machine import machine
from drscore.engine.text.citations import parse_citations

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "drb_agents"
_ARXIV_URL = re.compile(r"^https?://arxiv\.org/(?:abs|pdf)/([^\s?#]+?)(?:\.pdf)?/?$")
_DOI_URL = re.compile(r"^https?://(?:dx\.)?doi\.org/(10\.\d{4,9}/\S+)$")
_PMC_URL = re.compile(r"^https?://pmc\.ncbi\.nlm\.nih\.gov/articles/(PMC\d+)/?$")
_DOI_IN_URL = re.compile(r"(10\.\d{4,9}/[^/\s)]+?)(?:v\d+)?(?:\.full(?:\.pdf)?)?(?=/full|/|\)|$)")


def norm(url: str) -> str:
    parts = urlsplit(url.strip())
    rest = url.strip()[len(parts.scheme) + 3 + len(parts.netloc):]
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{rest}".rstrip("/")


def identifier_of(url: str) -> tuple[str, str] | None:
    """``(written identifier, canonical URL)`` for an arXiv, DOI or PMC address."""
    if m := _ARXIV_URL.match(url):
        return f"arXiv:{m.group(1)}", f"https://arxiv.org/abs/{m.group(1)}"
    if m := _DOI_URL.match(url):
        return f"doi:{m.group(1)}", f"https://doi.org/{m.group(1)}"
    if m := _PMC_URL.match(url):
        return f"PMCID: {m.group(1)}", f"https://pmc.ncbi.nlm.nih.gov/articles/{m.group(1)}/"
    return None


_ENTRY = re.compile(r"^(\d+)\. \[(.+?)\]\((https?://[^)\s]+)\)(.*)$")
_MARKERS = re.compile(r"(?:\[\d+\])+")


def _split(article: str) -> tuple[str, list[tuple[str, str, str, str]]]:
    """Body text and the ``(label, title, url, tail)`` reference entries of dls-63."""
    body, refs = article.split("\n## References\n", 1)
    entries = [(m.group(1), m.group(2), m.group(3), m.group(4))
               for line in refs.splitlines() if (m := _ENTRY.match(line))]
    return body, entries


def written(url: str) -> str:
    """The identifier as an agent would write it, or the URL when it has none."""
    ident = identifier_of(url)
    return ident[0] if ident else url


def canonical(url: str) -> str:
    """The canonical URL of the identifier in ``url``, or ``url`` itself."""
    ident = identifier_of(url)
    return ident[1] if ident else url


def refs_by_identifier(article: str) -> str:
    body, entries = _split(article)
    lines = [f"{label}. {title}. {written(url)}{tail}" for label, title, url, tail in entries]
    return body + "\n## References\n" + "\n".join(lines) + "\n"


def links_to_identifiers(article: str) -> str:
    body, entries = _split(article)
    lines = []
    for label, title, url, tail in entries:
        ident = identifier_of(url)
        target = ident[0].replace("PMCID: ", "") if ident else url
        lines.append(f"{label}. [{title}]({target}){tail}")
    return body + "\n## References\n" + "\n".join(lines) + "\n"


def parenthetical_in_text(article: str) -> str:
    body, entries = _split(article)
    by_label = {label: written(url) for label, _, url, _ in entries}

    def cite(m: re.Match[str]) -> str:
        labels = re.findall(r"\d+", m.group(0))
        return "(" + "; ".join(by_label[x] for x in labels if x in by_label) + ")"

    return _MARKERS.sub(cite, body)


def bibliography_only(article: str) -> str:
    body, refs_block = article.split("\n## References\n", 1)
    return _MARKERS.sub("", body) + "\n## References\n" + refs_block


_LINK = re.compile(r"\]\((https?://[^)\s]+)\)")


def inline_doi_links(article: str) -> str:
    def swap(m: re.Match[str]) -> str:
        d = _DOI_IN_URL.search(m.group(1))
        return f"](doi:{d.group(1)})" if d else m.group(0)

    return _LINK.sub(swap, article)


def doi_gold(url: str) -> str:
    d = _DOI_IN_URL.search(url)
    return f"https://doi.org/{d.group(1)}" if d else url


def measure(name: str, text: str, gold: list[str], agent: str) -> dict:
    parse = parse_citations(text)
    found = {norm(p.url) for p in parse.pairs}
    wanted = {norm(u) for u in gold}
    hit = len(wanted & found)
    return {"report": name, "agent": agent, "gold_urls": len(wanted), "recovered": hit,
            "source_recall": round(hit / len(wanted), 4) if wanted else None,
            "pairs": len(parse.pairs), "missed": sorted(wanted - found),
            "bibliography_only": getattr(parse, "bibliography_only", None), "parseable": parse.parseable}


def main() -> None:
    manifest = json.loads((DATA / "manifest.json").read_text(encoding="utf-8"))
    rows: list[dict] = []
    variants: dict[str, list[tuple[str, Callable[[str], str], Callable[[str], str]]]] = {
        "dls-63.md": [
            ("refs-by-identifier", refs_by_identifier, canonical),
            ("links-to-identifiers", links_to_identifiers, canonical),
            ("parenthetical-in-text", parenthetical_in_text, canonical),
        ],
        "gpt-researcher-61.md": [("inline-doi-links", inline_doi_links, doi_gold)],
    }
    control: dict | None = None
    for report in manifest["reports"]:
        article = (DATA / report["file"]).read_text(encoding="utf-8")
        stem = report["file"].removesuffix(".md")
        rows.append(measure(stem, article, report["gold_urls"], report["agent"]))
        for label, rewrite, gold_of in variants.get(report["file"], []):
            rows.append(measure(f"{stem}/{label}", rewrite(article), [gold_of(u) for u in report["gold_urls"]],
                                report["agent"]))
        if report["file"] == "dls-63.md":
            parse = parse_citations(bibliography_only(article))
            control = {"report": f"{stem}/bibliography-only", "pairs": len(parse.pairs),
                       "bibliography_only": getattr(parse, "bibliography_only", None), "parseable": parse.parseable}
    for row in rows:
        print(json.dumps(row, ensure_ascii=False))
    print(json.dumps(control, ensure_ascii=False))
    recalls = [r["source_recall"] for r in rows if r["source_recall"] is not None]
    print(json.dumps({
        "bench": "citations_identifiers",
        "gold": "the benchmark's LLM-extracted URL set per report (identifier styles: the same set, "
                "rewritten URLs as their identifiers' canonical addresses)",
        "reports": len(recalls),
        "mean_source_recall": round(sum(recalls) / len(recalls), 4),
        "min_source_recall": min(recalls),
        "bibliography_only_pairs": control["pairs"] if control else None,
        "machine": machine(),
    }, ensure_ascii=False))


if __name__ == "__main__":
    main()
