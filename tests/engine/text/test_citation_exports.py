"""Reference lists as OpenAI Deep Research exports write them (hand-made fixtures):
several markers on one entry, a title line with its URL after a blank line, and each URL
repeated on its own line after the entry."""
from __future__ import annotations

from drscore.engine.text.citations import cited_urls, parse_citations, strip_citations

MULTI = """Solar costs fell 80% over the decade [31]. Wind costs fell by half [48]. Storage is next [54].

[31] [48] [54] https://example.org/costs
[12] https://example.org/other
"""

TITLE_THEN_URL = """Offshore wind grew fast in 2023 [40]. Floating platforms are still costly [44].

[40] [44] Offshore Wind Market Report 2024 - Department of Energy

https://www.energy.gov/offshore-wind-report
"""

REPEATED = """Grid prices rose 5% [1]. Demand stayed flat [2].

[1] https://a.example/grid
https://a.example/grid

[2] https://b.example/demand
https://b.example/demand
"""

EXPORT = """# Energy costs

Solar costs fell 80% over the decade [31][48]. Offshore wind grew fast in 2023 [40].
Floating platforms are still costly [44]. Grid prices rose 5% [1].

## Sources

[1] https://a.example/grid
https://a.example/grid

[31] [48] [54] https://example.org/costs
https://example.org/costs

[40] [44] Offshore Wind Market Report 2024

https://www.energy.gov/offshore-wind-report
https://www.energy.gov/offshore-wind-report
"""


def _pairs(text):
    return [(p.statement, p.url, p.marker) for p in parse_citations(text).pairs]


def test_several_markers_share_one_entry_line():
    parse = parse_citations(MULTI)
    assert parse.references == {"31": "https://example.org/costs", "48": "https://example.org/costs",
                                "54": "https://example.org/costs", "12": "https://example.org/other"}
    assert _pairs(MULTI) == [
        ("Solar costs fell 80% over the decade.", "https://example.org/costs", "[31]"),
        ("Wind costs fell by half.", "https://example.org/costs", "[48]"),
        ("Storage is next.", "https://example.org/costs", "[54]"),
    ]
    assert parse.unresolved_markers == [] and parse.uncited_references == ["12"]


def test_title_line_with_the_url_after_a_blank_line():
    parse = parse_citations(TITLE_THEN_URL)
    url = "https://www.energy.gov/offshore-wind-report"
    assert parse.references == {"40": url, "44": url}
    assert [(s, u) for s, u, _ in _pairs(TITLE_THEN_URL)] == [
        ("Offshore wind grew fast in 2023.", url), ("Floating platforms are still costly.", url)]
    # the title and URL lines are the entry, not body text
    assert "Offshore Wind Market Report" not in strip_citations(TITLE_THEN_URL)
    assert parse.unlabeled_reference_urls == []


def test_url_repeated_on_its_own_line_is_part_of_the_entry():
    parse = parse_citations(REPEATED)
    assert _pairs(REPEATED) == [("Grid prices rose 5%.", "https://a.example/grid", "[1]"),
                                ("Demand stayed flat.", "https://b.example/demand", "[2]")]
    assert all(p.kind == "numbered" for p in parse.pairs)  # no bare-URL pair from the repeats
    assert strip_citations(REPEATED).strip() == "Grid prices rose 5%. Demand stayed flat."


def test_all_shapes_together_under_a_sources_heading():
    parse = parse_citations(EXPORT)
    assert parse.unresolved_markers == [] and parse.unlabeled_reference_urls == []
    assert set(cited_urls(parse)) == {"https://a.example/grid", "https://example.org/costs",
                                      "https://www.energy.gov/offshore-wind-report"}
    got = {(p.marker, p.url) for p in parse.pairs}
    # [31][48] name one URL for one sentence: one pair (statement, URL), under the first marker
    assert got == {("[31]", "https://example.org/costs"),
                   ("[40]", "https://www.energy.gov/offshore-wind-report"),
                   ("[44]", "https://www.energy.gov/offshore-wind-report"), ("[1]", "https://a.example/grid")}


def test_a_body_line_opening_with_markers_is_not_taken_for_an_entry():
    text = ("[3] [4] Analysts expect prices to keep falling through 2030.\n\n"
            "More prose follows here without any link.\n\n[3] https://a.example/x\n[4] https://b.example/y\n")
    parse = parse_citations(text)
    assert parse.references == {"3": "https://a.example/x", "4": "https://b.example/y"}
    assert {p.url for p in parse.pairs} == {"https://a.example/x", "https://b.example/y"}
    assert "Analysts expect prices" in strip_citations(text)


def test_a_url_line_later_in_the_body_is_still_a_bare_citation():
    text = ("[1] https://a.example/grid\n\nPrices are tracked daily by the operator, see\n"
            "https://a.example/grid\n")
    parse = parse_citations(text)
    assert [(p.url, p.kind) for p in parse.pairs] == [("https://a.example/grid", "bare")]


def test_title_entry_gives_a_url_to_a_label_an_earlier_bibliography_left_without_one():
    text = ("Claim one [2]. Claim two [3].\n\n参考文献：\n\n1. 某报告，2024年\n2. 另一份报告，2025年\n\n"
            "Sources\n\n[2] [502] Another Report\n\nhttps://b.example/2\nhttps://b.example/2\n\n"
            "[3] https://c.example/3\n")
    parse = parse_citations(text)
    assert parse.references["2"] == parse.references["502"] == "https://b.example/2"
    assert {p.url for p in parse.pairs} == {"https://b.example/2", "https://c.example/3"}
    assert parse.unlinked_references == ["1"]
