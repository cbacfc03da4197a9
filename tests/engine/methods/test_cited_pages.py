"""How much of a page a judge is shown (page_plan): the whole page within the judge's
context window, a conservative default for unknown models, or the relevant window."""
from __future__ import annotations

import pytest

from drscore.engine.methods.cited_pages import page_plan, url_lines
from drscore.engine.text.passages import select_passages


def test_whole_mode_uses_the_judges_context_from_the_window_table():
    # gpt-4o: 128,000-token context; fact_support caps output at 1,500 tokens;
    # 500 prompt tokens: (128,000 - 1,500 - 500) * 0.85 = 107,100
    plan = page_plan("whole", "openai/gpt-4o-2024-08-06", 6000, "fact_support", 500)
    assert (plan.mode, plan.budget, plan.context) == ("whole", 107_100, 128_000)
    assert plan.context_source == "openai/gpt-4o-2024-08-06"


def test_unknown_model_gets_the_conservative_default_context():
    # (32,000 - 1,500 - 500) * 0.85 = 25,500
    plan = page_plan("whole", "my-azure-deployment", 6000, "fact_support", 500)
    assert (plan.budget, plan.context, plan.context_source) == (25_500, 32_000, "default")
    assert plan == page_plan("whole", "", 6000, "fact_support", 500)


def test_whole_mode_never_shows_less_than_the_window_budget():
    # qwen3: 40,960-token context; a 40,000-token prompt leaves nothing: the window budget stands
    assert page_plan("whole", "qwen3-32b", 6000, "fact_support", 40_000).budget == 6000


def test_whole_mode_leaves_room_for_everything_the_request_carries():
    # qwen3-32b: 40,960-token context. A thinking judge is sent the answer cap (1,500) plus
    # its allowance (open family: 8,192), 9,692 in all; with a 400-token prompt the page may
    # take (40,960 - 9,692 - 400) * 0.85 = 26,237.8 -> 26,237 tokens. Counting the answer cap
    # alone gave (40,960 - 1,500 - 400) * 0.85 = 33,201, and 33,201 + 9,692 + 400 > 40,960.
    assert page_plan("whole", "qwen3-32b", 6000, "fact_support", 400).budget == 33_201
    plan = page_plan("whole", "qwen3-32b", 6000, "fact_support", 400, output_cap=9_692)
    assert plan.budget == 26_237 and plan.budget + 9_692 + 400 <= 40_960


def test_window_mode_is_the_page_budget():
    plan = page_plan("window", "gpt-4.1", 6000, "fact_support", 500)
    assert (plan.mode, plan.budget, plan.context) == ("window", 6000, 0)
    with pytest.raises(ValueError, match="whole, window"):
        page_plan("all", "gpt-4.1", 6000, "fact_support", 500)


def test_the_description_says_what_was_shown_and_why():
    page = "Mackerel prices rose 12% in 2023."
    plan = page_plan("whole", "gpt-4o", 6000, "fact_support", 500)
    assert plan.describe(select_passages(page, ["prices"], plan.budget)) == (
        "whole page; whole-page mode, 107,100 tokens fit (gpt-4o context 128,000)")
    unknown = page_plan("whole", "local", 6000, "fact_support", 500)
    assert unknown.describe(select_passages(page, ["prices"], unknown.budget)).endswith(
        "(unknown model, default context 32,000)")


def test_source_lines_for_the_extractor_include_identifier_entries():
    text = "Prose.\n1. Smith (2012). Title. doi:10.1038/nature11152\n2. https://x.example/a\nMore prose."
    assert url_lines(text) == "1. Smith (2012). Title. doi:10.1038/nature11152\n2. https://x.example/a"
