"""Reference sections found by their shape, not by the words of their title; superscript
markers; links written after the full stop; headings that are never statements; identifier
spellings without a colon or a scheme. Every expected pair is written by hand."""
from __future__ import annotations

import pytest

from drscore.engine.text.citations import parse_citations, strip_citations

ENTRIES = ("1. [Solar Outlook 2024](https://iea.example/solar)\n"
           "2. Global Wind Report. GWEC (2023). https://gwec.example/wind\n"
           "3. [Storage costs](https://nrel.example/storage) - NREL\n")
BODY = ("Solar costs fell 80% over the decade [1]. Wind grew by half [2].\n\n"
        "Storage is the next frontier [3].\n")


def pairs(text: str) -> list[tuple[str, str]]:
    return [(p.statement, p.url) for p in parse_citations(text).pairs]


@pytest.mark.parametrize("title", [
    "## Sources consulted", "## Works consulted", "## List of sources", "## Endnotes", "## Notes", "## Links",
    "## Literature", "## Recommended reading", "## 主要参考资料", "## Sources and further reading",
    "## Bibliography (selected)", "**Reading list**", "Where the numbers come from", "Sources:", "",
])
def test_a_list_of_entries_closing_the_report_is_a_bibliography_whatever_its_title(title):
    text = BODY + "\n" + title + "\n" + ENTRIES
    assert pairs(text) == [
        ("Solar costs fell 80% over the decade.", "https://iea.example/solar"),
        ("Wind grew by half.", "https://gwec.example/wind"),
        ("Storage is the next frontier.", "https://nrel.example/storage"),
    ]
    # Nobody cites it: no pair and, being parseable, no call to the judge's extractor.
    bare = parse_citations(BODY.replace(" [1]", "").replace(" [2]", "").replace(" [3]", "") + "\n" + title + "\n"
                           + ENTRIES)
    assert bare.pairs == [] and bare.bibliography_only and bare.parseable and bare.citation_points == 0
    assert "iea.example" not in strip_citations(text) and "Solar costs fell 80% over the decade." in strip_citations(
        text)


def test_a_list_of_entries_closing_a_section_ends_at_the_next_heading():
    text = ("## Findings\n\nCosts fell [1].\n\n### Sources for this section\n" + ENTRIES
            + "\n## Outlook\n\nPrices will keep falling, says [IEA](https://iea.example/outlook).\n")
    assert pairs(text) == [("Costs fell.", "https://iea.example/solar"),
                           ("Prices will keep falling, says IEA.", "https://iea.example/outlook")]


def test_a_line_that_names_sources_does_not_swallow_the_text_after_it():
    # A Word export flattens a table: "Key references" is a column header, one cell a line.
    text = ("Recipient\n\nDonor\n\nKey references\n\nAmborella trichopoda\n\nGreen algae\n\n"
            "Rice et al. 2013 [1]\n\nThe transfers cluster in mitochondria. [2]\n\n来源\n\n"
            "水稻的基因转移很常见。[1]\n\n"
            "[1] https://nature.example/amborella\n\nhttps://nature.example/amborella\n\n"
            "[2] https://pnas.example/mito\n\nhttps://pnas.example/mito\n")
    assert pairs(text) == [("Rice et al. 2013", "https://nature.example/amborella"),
                           ("The transfers cluster in mitochondria.", "https://pnas.example/mito"),
                           ("水稻的基因转移很常见。", "https://nature.example/amborella")]


def test_a_bibliography_title_keeps_entries_without_urls_and_stops_at_prose():
    text = ("Claim one [1]. Claim two [2].\n\n## References\n"
            "1. Smith, A. (2020). A book.\n2. Jones, B. (2021). A paper. https://x.example/2\n\n"
            "This report was written for the board; questions to the editor [3].\n\n[3] https://x.example/3\n")
    parse = parse_citations(text)
    assert parse.unlinked_references == ["1"]
    assert pairs(text) == [("Claim two.", "https://x.example/2"),
                           ("This report was written for the board; questions to the editor.", "https://x.example/3")]


def test_list_items_with_links_in_the_body_stay_statements():
    text = ("## Key findings\n\n- Solar costs fell 80% over the decade ([IEA](https://iea.example/s)).\n"
            "- Wind capacity doubled in five years, led by China ([GWEC](https://gwec.example/w)).\n")
    assert pairs(text) == [("Solar costs fell 80% over the decade.", "https://iea.example/s"),
                           ("Wind capacity doubled in five years, led by China.", "https://gwec.example/w")]


def test_superscript_markers_resolve_like_numbered_ones():
    refs = "\n\n1. Solar report. https://x.example/1\n2. Wind report. https://x.example/2\n3. Grid. https://x.example/3\n"
    assert pairs("Solar costs fell 80%.¹ Wind grew by half.²³" + refs) == [
        ("Solar costs fell 80%.", "https://x.example/1"), ("Wind grew by half.", "https://x.example/2"),
        ("Wind grew by half.", "https://x.example/3")]
    assert pairs("Solar costs fell 80%.<sup>1</sup> Wind grew by half.<sup>[2, 3]</sup>" + refs) == [
        ("Solar costs fell 80%.", "https://x.example/1"), ("Wind grew by half.", "https://x.example/2"),
        ("Wind grew by half.", "https://x.example/3")]
    assert pairs("Solar costs fell 80%.^1^ Storage is next¹⁻³." + refs) == [
        ("Solar costs fell 80%.", "https://x.example/1"), ("Storage is next.", "https://x.example/1"),
        ("Storage is next.", "https://x.example/2"), ("Storage is next.", "https://x.example/3")]


def test_exponents_units_and_charges_are_not_markers():
    text = ("The site covers 5 km² at 10⁻³ Pa; x² grows; PO₄³⁻ and Fe³⁺ bind; "
            "the rate is 10<sup>3</sup> per s.\n\n1. A. https://x.example/1\n2. B. https://x.example/2\n"
            "3. C. https://x.example/3\n")
    parse = parse_citations(text)
    assert parse.pairs == [] and parse.citation_points == 0
    assert "5 km² at 10⁻³ Pa; x² grows; PO₄³⁻ and Fe³⁺" in strip_citations(text)


def test_a_superscript_naming_no_entry_is_text():
    assert parse_citations("Area grew.⁹\n\n1. A. https://x.example/1\n2. B. https://x.example/2\n").citation_points == 0


def test_a_link_after_the_full_stop_cites_the_sentence_before_it():
    text = ("The Moon is 384,400 km away. ([NASA](https://nasa.example/moon)) The volume is vast. "
            "It has no air. [ESA](https://esa.example/air) Tides follow it. See [the tables](https://t.example) "
            "for more.\n")
    assert pairs(text) == [("The Moon is 384,400 km away.", "https://nasa.example/moon"),
                           ("It has no air.", "https://esa.example/air"),
                           ("See the tables for more.", "https://t.example")]
    assert strip_citations(text) == ("The Moon is 384,400 km away. The volume is vast. It has no air. Tides follow "
                                     "it. See the tables for more.\n")


def test_a_parenthesis_of_links_is_a_citation_not_content():
    text = "Solar fell 80% ([IEA](https://iea.example/s); [IRENA](https://irena.example/s)) last decade.\n"
    assert pairs(text) == [("Solar fell 80% last decade.", "https://iea.example/s"),
                           ("Solar fell 80% last decade.", "https://irena.example/s")]


def test_headings_are_never_statements():
    text = ("## Scaling Laws for Neural Language Models (arXiv:2001.08361, 2020)\n\n"
            "Loss falls as a power law of compute.\n\n**[Attention Is All You Need](https://arxiv.org/abs/1706.03762)**"
            "\n\nTransformers replaced recurrence.\n")
    parse = parse_citations(text)
    assert parse.pairs == [] and parse.citation_points == 0 and parse.parseable
    assert "(2020)" in strip_citations(text) and "(, 2020)" not in strip_citations(text)


def test_identifier_spellings_without_colon_or_scheme():
    text = ("Loss follows a power law (arXiv 2001.08361). Attention suffices, per arxiv.org/abs/1706.03762. "
            "The genome is in doi.org/10.1038/nature11152, and the WHO page www.who.int/news-room agrees.\n")
    assert [p.url for p in parse_citations(text).pairs] == [
        "https://arxiv.org/abs/2001.08361", "https://arxiv.org/abs/1706.03762", "https://doi.org/10.1038/nature11152",
        "https://www.who.int/news-room"]


def test_no_residue_where_an_identifier_left_a_parenthesis():
    assert pairs("Loss falls with compute (arXiv:2001.08361, 2020). Next claim here.\n") == [
        ("Loss falls with compute (2020).", "https://arxiv.org/abs/2001.08361")]
    assert pairs("Loss falls with compute (2020; doi:10.1038/abc). Next claim here.\n") == [
        ("Loss falls with compute (2020).", "https://doi.org/10.1038/abc")]


def test_each_section_may_close_with_its_own_list_numbered_from_one():
    text = ("## Costs\n\nSolar fell 80% [1]. Wind fell 50% [2].\n\n1. https://iea.example/solar\n"
            "2. https://gwec.example/wind\n\n## Storage\n\nBatteries fell 90% [1].\n\n"
            "**Sources for this section**\n\n1. Battery survey – https://bnef.example/batteries\n")
    assert pairs(text) == [("Solar fell 80%.", "https://iea.example/solar"), ("Wind fell 50%.", "https://gwec.example/wind"),
                           ("Batteries fell 90%.", "https://bnef.example/batteries")]
    # One list that repeats a label with another URL is one list: the first definition wins.
    assert pairs("Solar fell 80% [1].\n\n[1] https://a.example/x\n[1] https://b.example/y\n") == [
        ("Solar fell 80%.", "https://a.example/x")]


def test_an_entry_wrapped_by_a_pdf_conversion_keeps_its_url():
    # The URL on the entry's last line, after the title, and itself broken after a "/".
    text = ("Accenture bought 66 firms<sup>2</sup>. Storage grew<sup>3</sup>.\n\nReferences\n\n"
            "2. Technology Service Provider Acquisitions: A Strategic Shift To AI And\n"
            "Industry Services Is Underway. Forrester. https://www.forrester.com/blogs/\n"
            "technology-service-provider-acquisitions/\n"
            "3. Monroe, C. et al. Large Scale Modular Quantum Computer Architecture with Atomic Memory and Photonic "
            "Interconnects. arXiv 1208.0391\n")
    assert pairs(text) == [("Accenture bought 66 firms.", "https://www.forrester.com/blogs/technology-service-provider-acquisitions/"),
                           ("Storage grew.", "https://arxiv.org/abs/1208.0391")]


def test_a_numbered_finding_ending_with_its_citation_link_is_no_entry():
    text = ("## Drivers\n\n1. **Inflation**\n   Gold rises when inflation is high, as investors seek a hedge "
            "([Gold Price History](https://investopedia.example/gold))\n\n2. **Rates**\n   Lower rates make gold "
            "more attractive ([J.P. Morgan](https://jpm.example/gold))\n")
    assert [u for _, u in pairs(text)] == ["https://investopedia.example/gold", "https://jpm.example/gold"]


def test_a_superscript_after_an_acronym_cites_one_after_a_unit_does_not():
    text = "Capgemini leads in AI<sup>3</sup>. The plot covers 5 km²; the fit has R² 0.9.\n\n[2] https://b.example\n[3] https://c.example\n"
    assert pairs(text) == [("Capgemini leads in AI.", "https://c.example")]


def test_an_address_broken_over_two_lines_in_the_body_is_one_url():
    text = "Costs fell, see https://www.forrester.com/blogs/\ntechnology-service-provider/\n\nNext paragraph here.\n"
    assert pairs(text) == [("Costs fell, see", "https://www.forrester.com/blogs/technology-service-provider/")]
    assert strip_citations(text) == "Costs fell, see\n\nNext paragraph here.\n"
    # A word after an address is no part of it.
    assert [u for _, u in pairs("Costs fell, see https://iea.example/data/\nagain and again.\n")] == [
        "https://iea.example/data/"]
