"""The parser against the benchmark's own LLM extraction on real reports of other agents
(tests/data/drb_agents, provenance in its manifest.json: a DLS report, a gpt-researcher
report and seven OpenAI Deep Research exports): every URL the benchmark's extractor found
is found (but the two it wrote with characters changed, listed as ``unreachable_urls``),
and the same report with its markers removed is a bibliography nobody cites, which yields
no pair."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from drscore.engine.text.citations import parse_citations

DATA = Path(__file__).resolve().parents[2] / "data" / "drb_agents"
MANIFEST = json.loads((DATA / "manifest.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("report", MANIFEST["reports"], ids=lambda r: r["file"])
def test_every_url_the_benchmark_extracted_is_found(report):
    parse = parse_citations((DATA / report["file"]).read_text(encoding="utf-8"))
    found = {p.url for p in parse.pairs}
    reachable = set(report["gold_urls"]) - set(report.get("unreachable_urls", []))
    assert sorted(reachable - found) == []
    assert parse.parseable and not parse.bibliography_only


def test_the_same_report_without_markers_is_bibliography_only():
    article = (DATA / "dls-63.md").read_text(encoding="utf-8")
    body, refs = article.split("\n## References\n", 1)
    parse = parse_citations(re.sub(r"(?:\[\d+\])+", "", body) + "\n## References\n" + refs)
    assert parse.pairs == [] and parse.bibliography_only and parse.parseable
    assert len(parse.unlinked_references) + len(parse.references) == 9


def test_the_reference_list_rewritten_to_identifiers_resolves_to_canonical_urls():
    article = (DATA / "dls-63.md").read_text(encoding="utf-8")
    # "1. [title](https://arxiv.org/pdf/2306.06998.pdf)" -> "1. [title](arXiv:2306.06998)"
    rewritten = re.sub(r"\]\(https://arxiv\.org/pdf/([\d.]+)\.pdf\)", r"](arXiv:\1)", article)
    rewritten = re.sub(r"\]\(https://doi\.org/([^)]+)\)", r"](doi:\1)", rewritten)
    found = {p.url for p in parse_citations(rewritten).pairs}
    assert found == {
        "https://arxiv.org/abs/2306.06998", "https://doi.org/10.1515/nanoph-2022-0676",
        "https://arxiv.org/abs/2303.01184", "https://pmc.ncbi.nlm.nih.gov/articles/PMC11194688/",
        "https://doi.org/10.1038/s41467-023-40502-8", "https://arxiv.org/abs/2310.10592",
        "https://arxiv.org/abs/2208.05556", "https://arxiv.org/abs/2306.10504",
        "https://pmc.ncbi.nlm.nih.gov/articles/PMC7876212/"}
