"""Page windows for long pages: relevant passages within a token budget, never mid-word."""
from __future__ import annotations

import random

from drscore.engine.text.passages import GAP, Window, select_passages, split_passages, terms
from drscore.engine.runtime.calls.tokens import estimate_tokens
from support.data import drb_report

FILLER = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda omicron".split()


def long_page(n_paragraphs: int = 200, seed: int = 1) -> tuple[str, list[str]]:
    rng = random.Random(seed)
    paras = [" ".join(rng.choice(FILLER) for _ in range(80)) + "." for _ in range(n_paragraphs)]
    paras[120] = "The mackerel price rose to 392,556 yen in 2020 according to the ministry. " + paras[120]
    paras[30] = "Sardine landings fell by 12% after the warm current shifted north. " + paras[30]
    return "Market bulletin\n\n" + "\n\n".join(paras), paras


def boundaries_ok(text: str, window: Window) -> bool:
    """Every span starts and ends at the page edge, whitespace, or punctuation."""
    for a, b in window.spans:
        if a > 0 and not (text[a - 1].isspace() or text[a - 1] in ".!?。！？"):
            return False
        if b < len(text) and not (text[b].isspace() or text[b - 1] in ".!?。！？"):
            return False
    return True


def test_terms_words_numbers_and_cjk_bigrams():
    # stop words dropped, numbers kept (with their separators), CJK as bigrams
    assert terms("The price of Mackerel was 392,556 yen in 2020") == ["price", "mackerel", "392,556", "yen", "2020"]
    assert terms("中国经济") == ["中国", "国经", "经济"]
    assert terms("鱼") == ["鱼"]


def test_short_page_is_shown_whole():
    w = select_passages("A short page about mackerel.", "mackerel", 100)
    assert w.whole and w.text == "A short page about mackerel." and w.spans == ((0, 28),)
    assert w.describe() == "whole page (28 chars, ~7 tokens)"


def test_long_page_keeps_the_relevant_passage_within_budget():
    text, paras = long_page()
    w = select_passages(text, "Mackerel price was 392,556 yen in 2020", 500)
    assert not w.whole
    assert w.tokens <= 500 and w.page_tokens == estimate_tokens(text)
    assert "392,556 yen" in w.text
    assert boundaries_ok(text, w)
    # the window is exactly the page's spans joined by gap markers
    body = GAP.join(text[a:b] for a, b in w.spans)
    assert w.text.replace("[...]\n", "", 1).removesuffix("\n[...]") == body.removeprefix("[...]\n")
    assert [a for a, _ in w.spans] == sorted(a for a, _ in w.spans)
    assert "passages, chars" in w.describe() and f"of {len(text)}" in w.describe()


def test_several_statements_each_get_their_passage():
    text, _ = long_page()
    w = select_passages(text, ["mackerel price 392,556 yen", "sardine landings fell 12%"], 450)
    assert "392,556" in w.text and "Sardine landings" in w.text and w.tokens <= 450


def test_no_match_shows_the_page_from_the_top():
    text, _ = long_page()
    w = select_passages(text, "zebra quantum", 300)
    assert w.spans[0][0] == 0 and w.text.startswith("Market bulletin")
    assert w.tokens <= 300


def test_split_passages_cover_every_word_in_order():
    text, _ = long_page(150)
    spans = split_passages(text, passage_tokens=120)
    assert all(a < b for a, b in spans)
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))
    covered = " ".join(text[a:b] for a, b in spans)
    assert covered.split() == text.split()  # nothing lost, nothing cut inside a word
    assert max(estimate_tokens(text[a:b]) for a, b in spans) <= 2 * 120


def test_one_huge_paragraph_is_cut_at_word_boundaries():
    text = " ".join(["wordy"] * 20000)  # one 120,000-char line with no sentence end
    spans = split_passages(text, passage_tokens=100)
    for a, b in spans:
        assert text[a:b].split() == ["wordy"] * len(text[a:b].split())
    w = select_passages(text, "wordy", 400)
    assert w.tokens <= 400 and boundaries_ok(text, w)


def test_chinese_page_window():
    text = "。".join(f"中国的经济增长在第{i}季度达到百分之五点二" for i in range(3000)) + "。"
    w = select_passages(text, "第2999季度", 300)
    assert "第2999季度" in w.text and w.tokens <= 300


def test_real_report_used_as_a_long_page():
    # A real 20k-char Chinese report standing in for a long page: the passage naming
    # the statement's key figure must be kept under a small budget.
    row = drb_report(1)
    text = row["article"]
    w = select_passages(text, "2024年“中产及格线”出炉，全中国仅3320万户", 400)
    assert w.page_tokens > 4000 and w.tokens <= 400
    assert "3320万户" in w.text


def test_postings_match_a_plain_term_count():
    # The fast path (regex per passage, numpy for CJK bigrams) must count exactly what
    # terms() would: checked on a mixed Chinese/English real report.
    from collections import Counter

    from drscore.engine.text.passages import _postings

    row = drb_report(4)
    text = row["article"]
    spans = split_passages(text, 120)
    vocab = set(terms("黄金价格 2025年 central bank gold 3,500 美元 央行购金")) | {"金"}
    fast = {t: sorted(p) for t, p in _postings(text, spans, vocab).items()}
    slow: dict[str, list[tuple[int, int]]] = {}
    for k, (a, b) in enumerate(spans):
        for t, c in Counter(x for x in terms(text[a:b]) if x in vocab).items():
            slow.setdefault(t, []).append((k, c))
    assert fast == slow and len(fast) >= 5
