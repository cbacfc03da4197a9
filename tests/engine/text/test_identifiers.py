"""Citations by identifier (arXiv, DOI, PMID, PMCID, ISBN) in every citation style the
parser reads, and bibliographies that no citation point refers to."""
from __future__ import annotations

import pytest

from drscore.engine.text.citations import cited_urls, parse_citations, strip_citations
from drscore.engine.text.identifiers import identifier_urls, target_url


def pairs_of(text: str) -> list[tuple[str, str, str, str]]:
    return [(p.statement, p.url, p.marker, p.kind) for p in parse_citations(text).pairs]


@pytest.mark.parametrize("written, url", [
    ("arXiv:2311.10252", "https://arxiv.org/abs/2311.10252"),
    ("arxiv: 2311.10252v2", "https://arxiv.org/abs/2311.10252v2"),
    ("arXiv:hep-th/9901001", "https://arxiv.org/abs/hep-th/9901001"),
    ("doi:10.1038/nature11152", "https://doi.org/10.1038/nature11152"),
    ("DOI 10.1016/S0140-6736(20)30183-5", "https://doi.org/10.1016/S0140-6736(20)30183-5"),
    ("PMID: 31452104", "https://pubmed.ncbi.nlm.nih.gov/31452104/"),
    ("PMCID: PMC6800160", "https://pmc.ncbi.nlm.nih.gov/articles/PMC6800160/"),
    ("PMC6800160", "https://pmc.ncbi.nlm.nih.gov/articles/PMC6800160/"),
    # 9780262033848: 9+21+8+0+2+18+2+0+3+9+8+12 = 92, check digit (10 - 2) = 8
    ("ISBN 978-0-262-03384-8", "https://openlibrary.org/isbn/9780262033848"),
    # 0-306-40615-2: 10*0+9*3+8*0+7*6+6*4+5*0+4*6+3*1+2*5 = 130, 130 + 2 = 132 = 12 * 11
    ("ISBN-10: 0-306-40615-2", "https://openlibrary.org/isbn/0306406152"),
])
def test_each_identifier_gets_its_canonical_url(written, url):
    assert identifier_urls(f"As shown ({written}).") == [url]
    assert target_url(written) == url


def test_what_is_not_an_identifier():
    assert identifier_urls("ISBN 978-0-262-03384-9") == []  # wrong check digit
    assert identifier_urls("version 2311.10252 and path 10.1038/nature11152") == []  # no prefix
    assert identifier_urls("https://doi.org/10.1038/x and https://x.example/PMC123456/") == []  # inside URLs
    assert target_url("see arXiv:2311.10252 for more") is None  # not only an identifier


def test_parenthetical_identifier_in_the_text():
    text = "Transformers scale with data (arXiv:2311.10252). Other prose follows."
    assert pairs_of(text) == [("Transformers scale with data.", "https://arxiv.org/abs/2311.10252",
                               "arXiv:2311.10252", "identifier")]


def test_several_identifiers_in_one_bracket_and_author_year_kept():
    text = "Mice lived longer (Smith et al., 2019; PMID: 31452104). A trial ran [PMCID: PMC6800160; doi:10.1234/ab]."
    assert pairs_of(text) == [
        ("Mice lived longer (Smith et al., 2019).", "https://pubmed.ncbi.nlm.nih.gov/31452104/",
         "PMID: 31452104", "identifier"),
        ("A trial ran.", "https://pmc.ncbi.nlm.nih.gov/articles/PMC6800160/", "PMCID: PMC6800160", "identifier"),
        ("A trial ran.", "https://doi.org/10.1234/ab", "doi:10.1234/ab", "identifier"),
    ]


def test_identifier_after_the_full_stop_and_doi_without_sentence_punctuation():
    text = "Results hold, see doi:10.1016/S0140-6736(20)30183-5. Growth was fast. (arXiv:1105.1834)"
    assert pairs_of(text) == [
        ("Results hold, see.", "https://doi.org/10.1016/S0140-6736(20)30183-5",
         "doi:10.1016/S0140-6736(20)30183-5", "identifier"),
        ("Growth was fast.", "https://arxiv.org/abs/1105.1834", "arXiv:1105.1834", "identifier"),
    ]


def test_inline_links_whose_target_is_an_identifier():
    text = ("See [Attention is all you need](arXiv:1706.03762) for the model. "
            "[ENCODE](doi:10.1038/nature11152) mapped the genome.")
    assert pairs_of(text) == [
        ("See Attention is all you need for the model.", "https://arxiv.org/abs/1706.03762", "", "inline"),
        ("ENCODE mapped the genome.", "https://doi.org/10.1038/nature11152", "", "inline"),
    ]
    assert strip_citations(text) == "See Attention is all you need for the model. ENCODE mapped the genome.\n"


def test_reference_entries_that_point_by_identifier():
    text = ("Growth was fast [1]. Levels rose [2]. Cells divided [3].\n\n## References\n"
            "[1] arXiv:2311.10252 - A paper\n"
            "2. Smith (2012). Title. Nature. doi:10.1038/nature11152.\n"
            "3. Li (2020). Book. ISBN 978-0-262-03384-8\n")
    assert pairs_of(text) == [
        ("Growth was fast.", "https://arxiv.org/abs/2311.10252", "[1]", "numbered"),
        ("Levels rose.", "https://doi.org/10.1038/nature11152", "[2]", "numbered"),
        ("Cells divided.", "https://openlibrary.org/isbn/9780262033848", "[3]", "numbered"),
    ]


def test_reference_entry_outside_a_section_and_footnote_by_identifier():
    text = "Claim one [1]. Claim two [^a].\n\n[1] arXiv:2001.00001\n[^a]: Smith 2020, PMID 12345"
    assert pairs_of(text) == [
        ("Claim one.", "https://arxiv.org/abs/2001.00001", "[1]", "numbered"),
        ("Claim two.", "https://pubmed.ncbi.nlm.nih.gov/12345/", "[^a]", "footnote"),
    ]


def test_a_url_in_an_entry_wins_over_its_identifier():
    text = "Claim [1].\n\n## References\n1. Smith. doi:10.5555/x. https://journal.example/x"
    assert pairs_of(text) == [("Claim.", "https://journal.example/x", "[1]", "numbered")]


def test_an_identifier_that_does_not_resolve_is_a_citation_point_without_pair():
    parse = parse_citations("The book says so (ISBN 978-0-262-03384-9).")
    assert parse.pairs == [] and parse.citation_points == 1 and not parse.parseable


def test_bibliography_only_yields_no_pairs():
    # An annotated bibliography: its comments are not statements the report cites.
    text = ("Cells divide. Tissues grow.\n\n## Annotated Bibliography\n"
            "- Smith (2020). Cells. https://x.example/a - shows that cells divide quickly.\n"
            "- Li (2021). Tissues. doi:10.5555/b - argues the opposite.\n")
    parse = parse_citations(text)
    assert parse.pairs == [] and parse.bibliography_only and parse.parseable
    assert parse.unlabeled_reference_urls == ["https://x.example/a", "https://doi.org/10.5555/b"]
    assert cited_urls(parse) == ["https://x.example/a", "https://doi.org/10.5555/b"]
    numbered = "Cells divide.\n\n## References\n1. Smith (2020). Cells. Nature.\n2. Li. Tissues. doi:10.5555/b\n"
    parse = parse_citations(numbered)
    assert parse.pairs == [] and parse.bibliography_only and parse.parseable


def test_a_report_with_citations_is_not_bibliography_only():
    parse = parse_citations("Cells divide (arXiv:2001.00001).\n\n## References\n1. Smith. Cells.\n")
    assert not parse.bibliography_only and len(parse.pairs) == 1
