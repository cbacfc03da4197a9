"""Segmentation: hand-made markdown, and real DeepResearch Bench reports whose counts
were checked by reading the reports."""
from __future__ import annotations

import json

import pytest

from drscore.engine.text.segment import Unit, segment
from support.data import DRB as DATA


def _reports() -> dict[int, str]:
    with open(DATA / "reports.claude-3-7-sonnet.jsonl", encoding="utf-8") as f:
        return {row["id"]: row["article"] for row in map(json.loads, f)}


REPORTS = _reports()

MARKDOWN = """\
# Title of the report

Intro paragraph that opens the report and is long enough.

## Section one
First paragraph of section one, directly under its heading.
It continues on a second line.

| a | b |
|---|---|
| 1 | 2 |

```python
print("code is not a paragraph")

still code
```

- a list item that is real content
- another list item

---

![figure](img.png)

Setext heading
--------------

Paragraph after a setext heading.

[1] https://example.org/a - a source on its own
[2] https://example.org/b - another source

## References

1. Smith, J. (2020). A book without a URL.
2. Doe, A. (2021). Another book.

## Appendix

Appendix paragraph after the bibliography.

Sources:
- https://example.org/c
"""


def test_paragraphs_skip_structure_and_keep_lines():
    units = segment(MARKDOWN, "paragraphs", min_chars=1)
    assert [(u.line, u.text) for u in units] == [
        (3, "Intro paragraph that opens the report and is long enough."),
        (6, "First paragraph of section one, directly under its heading.\nIt continues on a second line."),
        (19, "- a list item that is real content\n- another list item"),
        (29, "Paragraph after a setext heading."),
        (41, "Appendix paragraph after the bibliography."),
    ]
    assert [u.index for u in units] == [0, 1, 2, 3, 4]
    assert all(isinstance(u, Unit) for u in units)


def test_paragraph_cut_by_heading_or_table_without_blank_line():
    text = "Lead text line.\n## Heading\nBody line one.\n| x | y |\n|---|---|\n| 1 | 2 |\nTail line."
    assert [(u.line, u.text) for u in segment(text, "paragraphs", min_chars=1)] == [
        (1, "Lead text line."), (3, "Body line one."), (7, "Tail line.")]


def test_bibliography_label_and_heading_variants():
    text = ("Body paragraph.\n\n**参考文献：**\n[1] https://a.cn - 甲\n[2] https://b.cn - 乙\n\n"
            "### Works Cited\n\nLee, K. Some paper.\n\n## Next\n\nBack to prose.")
    assert [u.text for u in segment(text, "paragraphs", min_chars=1)] == ["Body paragraph.", "Back to prose."]
    numbered = "## 7. References\n\n- Book one.\n\n## 8 Outlook\n\nCivic references\n\n六、参考文献\n甲书。"
    assert [u.text for u in segment(numbered, "paragraphs", min_chars=1)] == ["Civic references"]


def test_min_chars_counts_characters_not_words():
    zh = "中" * 39
    en = "word " * 7 + "ab"  # 37 characters, 8 words
    units = segment(f"{zh}\n\n{zh}文\n\n{en}\n\n{en}cde", "paragraphs")  # default min_chars = 40
    assert [len(u.text) for u in units] == [40, 40]


def test_drop_links_option_in_paragraph_mode():
    text = "See https://example.org for the data behind this claim.\n\nA paragraph without any link at all."
    assert len(segment(text, "paragraphs", min_chars=1)) == 2  # links kept by default
    assert [u.text for u in segment(text, "paragraphs", min_chars=1, drop_links=True)] == [
        "A paragraph without any link at all."]


def test_sections_follow_the_authors_code():
    body = "x" * 191
    text = (f"Preamble {body}\n\n## One\n{body}\n\n### Sub\nmore\n\n## Two\nshort\n\n"
            f"## Three\n{body} http://example.org\n\n## 四\n{'字' * 195}\n\n## 五\n{'字' * 194}")
    units = segment(text, "sections")
    # Kept: the preamble (9 + 191 = 200 characters), "## One" (with its ### part),
    # "## 四" ("## 四\n" is 5 characters + 195 = 200). Dropped: "## Two" (short),
    # "## Three" (a link), "## 五" (199 characters).
    assert [(u.index, u.line, u.text.split("\n", 1)[0]) for u in units] == [
        (0, 1, f"Preamble {body}"), (1, 3, "## One"), (2, 15, "## 四")]
    assert [len(u.text) for u in units] == [200, 7 + 191 + 2 + 7 + 1 + 4, 200]
    # Without the filters every section is a unit.
    assert len(segment(text, "sections", min_chars=0, drop_links=False)) == 6


def test_sections_without_headings_is_one_unit():
    text = "A report without level-two headings. " * 10
    assert [u.line for u in segment(text, "sections")] == [1]


def test_unknown_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown segmentation 'words'"):
        segment("text", "words")  # type: ignore[arg-type]


def test_real_chinese_report_paragraphs():
    # Report 1 (Chinese): 45 blank-line paragraphs of prose; the four agent notes of
    # 17-30 characters before the title fall under the 40-character default; the
    # "参考文献：" block is a bibliography.
    units = segment(REPORTS[1], "paragraphs")
    assert len(units) == 41
    assert (units[0].line, units[0].text[:6]) == (1, "我将为您撰写")
    assert (units[1].line, units[1].text[:6]) == (15, "中国社会阶层")
    assert (units[-1].line, units[-1].text[:6]) == (123, "然而，实际上")
    assert not any("http" in u.text for u in units)
    assert len(segment(REPORTS[1], "paragraphs", min_chars=0)) == 45


def test_real_chinese_report_sections():
    # Preamble (178 chars) is too short; "## 六、结论与展望" holds the reference list
    # (links): five sections remain.
    units = segment(REPORTS[1], "sections")
    assert [u.line for u in units] == [13, 35, 65, 91, 107]
    assert units[0].text.startswith("## 一、中国社会9阶层划分概述\n")
    assert all(len(u.text) >= 200 for u in units)


def test_real_english_report():
    # Report 51: 55 paragraphs (agent notes included: the shortest is 56 characters);
    # numbered list items separated by blank lines are paragraphs of their own.
    units = segment(REPORTS[51], "paragraphs")
    assert len(units) == 55
    assert (units[0].line, units[0].text[:12]) == (3, "I'll researc")
    assert (units[43].line, units[43].text[:29]) == (135, "1. **Population Shrinkage**: ")
    assert (units[-1].line, units[-1].text[:10]) == (161, "To succeed")
    # Sections: preamble (224 chars) + 6 sections; "## VI. Conclusion" carries the links.
    assert [u.line for u in segment(REPORTS[51], "sections")] == [1, 5, 19, 23, 49, 111, 131]


def test_a_line_that_names_sources_does_not_swallow_the_prose_after_it():
    # Word exports flatten tables one cell a line: "Key references" / "Sources" / "来源" are
    # column headers, and the report goes on after them.
    prose = ("Capgemini announced in July 2023 an investment plan of two billion euros over three years to "
             "strengthen its leadership in AI.")
    zh = "根据国家统计局数据，2023年全国居民人均可支配收入为三万九千元，比上年名义增长百分之六点三，实际增长百分之六点一。"
    text = (f"Segment\n\nKey references\n\nBig 4\n\n{prose}\n\n来源\n\n国家统计局\n\n{zh}\n\nSources\n\n"
            "Smith, J. (2020). A book on the subject of consulting firms and their many investments in AI.\n")
    assert [u.text for u in segment(text, "paragraphs")] == [prose, zh]
