"""The citation-styles corpus (``citation_styles/``, provenance in its README): excerpts of
two real reports of the test data rewritten by hand into the citation styles of real
exports, each with the (statement, URL) pairs a reader would draw from it, written here by
hand, not produced by the parser."""
from __future__ import annotations

from pathlib import Path

import pytest

from drscore.engine.text.citations import parse_citations, strip_citations

CORPUS = Path(__file__).parent / "citation_styles"

# DeepResearch Bench report 57 (Claude 3.7 Sonnet), "Other Major Consulting Firms".
U1 = "https://thefinancestory.com/big-4-invest-over-usd-4-bn-in-ai"
U2 = ("https://www.forrester.com/blogs/technology-service-provider-acquisitions-a-strategic-shift-to-ai-and-"
      "industry-services-is-underway/")
U3 = "https://www.capgemini.com/news/press-releases/capgemini-announces-augmented-engineering-offerings-powered-by-gen-ai/"
U4 = "https://www.entrepreneur.com/business-news/meet-the-leaders-of-the-big-4-ey-deloitte-pwc-and-kpmg/485168"
U5 = "https://www.marketingscoop.com/ai/ai-consulting/"
U6 = "https://emerj.com/ai-in-the-accounting-big-four-comparing-deloitte-pwc-kpmg-and-ey/"
DELOITTE = ("Deloitte AI Institute functions as the firm's global center for everything related to Artificial "
            "Intelligence, serving as a hub for research, development, and implementation of AI solutions.")
ACCENTURE = ("Accenture added 66 firms to the 131 it acquired between 2019 and 2022, far outpacing other firms like "
             "Deloitte, which made only nine deals in the same period.")
CAPGEMINI = ("Capgemini announced in July 2023 an investment plan of €2 billion over 3 years to strengthen its "
             "leadership in AI.")
CAMPUS = "The firm has already trained over 120,000 team members on generative AI tools through its Gen AI Campus."
KPMG = ("KPMG, under CEO Thomas, has launched a $5 billion digital strategy investment plan as part of its focus on "
        "overseeing the development and implementation of the firm's global strategy.")
BIG4 = "Big 4 – Deloitte, EY, KPMG, PwC combining advisory experience with AI investments"
FIRMS = [(DELOITTE, U1), (ACCENTURE, U2), (CAPGEMINI, U3), (CAMPUS, U3), (KPMG, U4)]

# DeepResearch Bench report 1 (Claude 3.7 Sonnet, Chinese), sections 一 and 二.
Z1 = "https://www.epochtimes.com/gb/14/8/27/n4234092.htm"
Z2 = "https://chinadigitaltimes.net/chinese/550513.html"
Z4 = "https://www.stats.gov.cn/sj/zxfb/202401/t20240116_1946622.html"
Z6 = "https://www.mckinsey.com.cn/mapping-chinasmiddle/"
CLASSES = ("中国社会阶层的划分模型将社会人群分为9个阶层，可以大致归为三大类：1-3级是统治阶层，为社会最大的既得利益者；"
           "4-6级属于中产阶级；7-9级是中国社会的底层，其中9级被视为社会最悲惨的阶层。")
INCOME = "其中，城镇居民人均可支配收入51,821元，增长5.1%；农村居民人均可支配收入21,691元，增长7.7%。"
SHARE = "值得注意的是，上述定义的中产阶级在2000年仅占中国城市家庭的4%，而到2012年，这一数字已增长到68%。"
CHINESE = [(CLASSES, Z1), (CLASSES, Z2), (INCOME, Z4), (SHARE, Z6)]

UTM = "?utm_source=chatgpt.com"
ARXIV_IONS = "https://arxiv.org/abs/2310.07058"

EXPECTED: dict[str, list[tuple[str, str]]] = {
    # As published: "[n]" after the paragraph or before the stop, a "[n] url - title" list.
    "numbered": FIRMS + [(BIG4, U5), (BIG4, U6)],
    # OpenAI Deep Research exported from Word: headings without "#", a table flattened to one
    # cell a line under a "Key references" column header, a "Sources" line followed by prose,
    # the list as "[n] url" (or "[n] title"), a blank line and the URL again.
    "openai-word-export": FIRMS + [("Marketing Scoop guide to AI consulting", U5),
                                   ("Emerj comparison of the Big Four", U6)],
    # ChatGPT: "sentence. ([host](url?utm_source=chatgpt.com))", one after another in a paragraph.
    "chatgpt-links-after-stop": [(s, u + UTM) for s, u in FIRMS] + [(BIG4 + ".", U5 + UTM), (BIG4 + ".", U6 + UTM)],
    # Gemini: superscripts after the stop, "⁵,⁶", a "Works cited" list "n. title, accessed ..., [url](url)".
    "gemini-superscripts": FIRMS + [(BIG4 + ".", U5), (BIG4 + ".", U6)],
    # Perplexity (and pandoc): "[^n]" markers, "[^n]: url" definitions after a "⁂" divider.
    "perplexity-footnotes": FIRMS + [(BIG4, U5), (BIG4, U6)],
    # Perplexity copied from the web: "[n]" glued to the word, a "Citations:" list of bare URLs.
    "perplexity-citations": FIRMS + [(BIG4, U5), (BIG4, U6)],
    # Claude: "([title](url))" before the stop, "According to [Forrester](url), ...", no list.
    "claude-inline-links": [
        (DELOITTE, U1),
        ("According to Forrester, " + ACCENTURE, U2),
        (CAPGEMINI, U3), (CAMPUS, U3), (KPMG, U4), (BIG4, U5), (BIG4, U6)],
    # Grok: "[[n]](url)" before the stop, a cited table row, a "Key Citations" list of links.
    "grok-link-markers": FIRMS + [
        ("Big 4 | Deloitte, EY, KPMG, PwC | Advisory experience combined with AI investments", U5),
        ("Big 4 | Deloitte, EY, KPMG, PwC | Advisory experience combined with AI investments", U6)],
    # Onyx: "[[n]](url)" after the stop, bold lines as headings, "**Sources:**" and a numbered list.
    "onyx-sources": FIRMS + [(BIG4 + ".", U5), (BIG4 + ".", U6)],
    # PDF converted to Markdown: "<sup>n</sup>", lines hard-wrapped at 80 columns (a URL too),
    # numbered headings, "•" bullets, a "References" list whose URLs sit on the next line.
    "pdf-to-markdown": FIRMS + [(BIG4, U5), (BIG4, U6)],
    # Papers cited by identifier: "doi:", "arXiv 1208.0391" (no colon), "arxiv.org/abs/..." (no
    # scheme), "DOI: ...", an inline "(arXiv 2310.07058)" and a link whose target is "arXiv:...".
    "identifiers": [
        ("However, the outstanding challenge remains scaling trapped ions to hundreds or thousands of qubits and "
         "beyond—the scale at which quantum processors can outperform classical computers in certain applications.",
         "https://doi.org/10.1126/science.1231298"),
        ("A scalable architecture featuring two elements: stable trapped ion multi-qubit registers that can be "
         "connected with ion shuttling, and scalable photonic interconnects that can link these registers in a "
         "flexible configuration over large distances, can potentially allow scaling to 10^6 qubits.",
         "https://arxiv.org/abs/1208.0391"),
        ("In 2023-2024, researchers demonstrated an ion trap system with the highest reported free-space photon "
         "collection efficiency for quantum networking.", ARXIV_IONS),
        ("The system uses a pair of in-vacuum aspheric lenses, each with a numerical aperture of 0.8, to couple 10% "
         "of the 493 nm photons emitted from a 138Ba+ ion into single-mode fibers.", ARXIV_IONS),
        ("An arbitrarily large quantum computer may best be constructed using a modular approach.",
         "https://doi.org/10.1126/sciadv.1601540"),
        ("While two-dimensional ion crystals have been demonstrated as a plausible approach to scale up qubit numbers, "
         "the long-range Coulomb interaction between the ions also complicates the design of parallel gates and "
         "leads to intrinsic crosstalk errors.",  # "([title](arXiv:...))" cites: its text is no claim
         "https://arxiv.org/abs/2501.09554"),
    ],
    # Nothing in the body cites: a list under a title of any wording is a bibliography.
    "bibliography-only": [],
    # Each section closes with its own list, numbered from 1, with or without a title; a
    # "Key references" heading followed by prose is a heading, not a list.
    "section-lists": [(ACCENTURE, U2), (KPMG, U4), (CAPGEMINI, U3), (CAMPUS, U3)],
    # The Chinese report as published: " [1][2]" after the paragraph, the list without a title.
    "numbered-zh": CHINESE,
    # The same exported from Word: a table flattened under a "来源" column header.
    "word-export-zh": [(CLASSES, Z1), (CLASSES, Z2), ("国家统计局", Z4), ("麦肯锡", Z6), (INCOME, Z4), (SHARE, Z6)],
    # Gemini in Chinese: "。¹²" (labels 1 and 2, there being no 12), a "引用的著作" list.
    "superscripts-zh": CHINESE,
}


def test_every_file_of_the_corpus_has_its_pairs_written_here():
    assert sorted(p.stem for p in CORPUS.glob("*.md") if p.name != "README.md") == sorted(EXPECTED)


@pytest.mark.parametrize("style", sorted(EXPECTED))
def test_the_pairs_of_each_style_are_the_ones_a_reader_draws(style):
    text = (CORPUS / f"{style}.md").read_text(encoding="utf-8")
    parsed = parse_citations(text)
    assert [(p.statement, p.url) for p in parsed.pairs] == EXPECTED[style]
    # Every style is read by the parser: none goes to the judge's extractor.
    assert parsed.parseable
    assert parsed.bibliography_only == (not EXPECTED[style])
    # No statement keeps a marker, a URL or the residue of one.
    for statement, _ in EXPECTED[style]:
        assert "http" not in statement and "[" not in statement and "(," not in statement
    # Stripped for the judge, the prose stays and the reference list goes.
    stripped = strip_citations(text)
    assert "https://" not in stripped and "arxiv.org" not in stripped.lower()
