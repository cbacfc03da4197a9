"""Leakage similarity (engine.leakage) against hand-computed values and real tasks."""
from __future__ import annotations

import random

import orjson
import pytest

from drscore.engine.methods.tasks import leakage
from support.data import DATA


def _lcs_dp(a: str, b: str) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def test_lcs_classic_example():
    # LCS("ABCBDAB", "BDCABA") = 4 (e.g. "BCBA")
    assert leakage.lcs_length("ABCBDAB", "BDCABA") == 4
    assert leakage.lcs_length("", "abc") == 0


def test_bit_parallel_lcs_matches_dynamic_programming():
    rng = random.Random(3)
    for _ in range(300):
        a = "".join(rng.choice("abc d") for _ in range(rng.randint(0, 40)))
        b = "".join(rng.choice("abc d") for _ in range(rng.randint(0, 40)))
        assert leakage.lcs_length(a, b) == _lcs_dp(a, b)


def test_string_similarity():
    # 2 * 4 / (7 + 6) = 8/13
    assert leakage.string_similarity("ABCBDAB", "BDCABA") == pytest.approx(8 / 13)
    assert leakage.string_similarity("", "") == 0.0


def test_tfidf_cosine_hand_computed():
    # vocabulary the, cat, sat, ran; idf = ln(3/(1+df)) + 1: shared words 1, others 1 + ln(1.5) = 1.405465
    # a = (1, 1, 1.405465, 0), b = (1, 1, 0, 1.405465): dot 2, |a|^2 = |b|^2 = 2 + 1.975332
    # cos = 2 / 3.975332 = 0.503103
    assert leakage.tfidf_cosine("The cat sat", "the cat ran") == pytest.approx(0.5031026, abs=1e-6)
    assert leakage.tfidf_cosine("same words here", "here same words") == pytest.approx(1.0)
    assert leakage.tfidf_cosine("", "x") == 0.0


def test_word_overlap_is_relative_to_the_reference():
    # reference words {the, cat, ran}; candidate has the, cat -> 2/3
    assert leakage.word_overlap("the cat sat", "The cat ran") == pytest.approx(2 / 3)
    assert leakage.word_overlap("the cat sat on the mat", "cat") == 1.0


def test_cjk_characters_are_single_words():
    assert leakage.words("中国金融AI模型, ok") == ["中", "国", "金", "融", "ai", "模", "型", "ok"]


def test_composite_and_strict_threshold():
    # 0.4 * 0.5 + 0.4 * 0.25 + 0.2 * 1.0 = 0.2 + 0.1 + 0.2 = 0.5
    assert leakage.composite(0.5, 0.25, 1.0) == pytest.approx(0.5)
    s = leakage.leakage_scores("the cat sat", "the cat ran")
    # string: LCS("the cat sat", "the cat ran") = "the cat " + "a" = 9 -> 18/22 = 0.818182
    assert s.string == pytest.approx(18 / 22)
    # composite = 0.4 * 0.818182 + 0.4 * 0.503103 + 0.2 * 0.666667 = 0.661847
    assert s.composite == pytest.approx(0.6618474, abs=1e-6)
    assert s.leaked is False
    same = leakage.leakage_scores("Exactly the same text.", "Exactly the same text.")
    assert same.composite == pytest.approx(1.0) and same.leaked is True
    assert leakage.leakage_scores("a b", "a b", threshold=1.0).leaked is False  # > not >=


def test_split_at_middle_punctuation():
    text = "Alpha beta, gamma delta epsilon; zeta eta theta iota kappa."
    # len 59, middle 29.5; marks at 10 (",") and 31 (";"), final "." excluded -> 31 wins;
    # the mark opens the suffix (paper: prefix T[:i*], suffix T[i*:])
    assert leakage.split_at_middle_punctuation(text) == (
        "Alpha beta, gamma delta epsilon", "; zeta eta theta iota kappa.")
    # a mark at position 0 would leave no prefix
    assert leakage.split_at_middle_punctuation(", ab") == (",", "ab")
    # Decimal points are not split points; falls back to the whitespace nearest the middle.
    # len 25, middle 12.5; spaces at 4, 8, 16, 20 -> 16 is nearest
    assert leakage.split_at_middle_punctuation("grow 3.5 percent per year") == ("grow 3.5 percent", "per year")
    assert leakage.split_at_middle_punctuation("abcd") == ("ab", "cd")
    assert leakage.split_at_middle_punctuation("   ") == ("", "")


def test_split_real_tasks_in_chinese_and_english():
    tasks = [orjson.loads(line) for line in (DATA / "drb" / "tasks.jsonl").read_bytes().splitlines()]
    by_id = {str(t["id"]): t["prompt"] for t in tasks}
    prefix, suffix = leakage.split_at_middle_punctuation(by_id["1"])
    assert prefix == "收集整理目前中国9阶层实际收入和财务状况"
    assert suffix.startswith("，特别研究得出")
    no_mark = set()
    for t in tasks:
        p, s = leakage.split_at_middle_punctuation(t["prompt"])
        assert p and s
        assert "".join((p + s).split()) == "".join(t["prompt"].split())
        if s[0] not in leakage.SPLIT_PUNCTUATION:
            no_mark.add(str(t["id"]))
    # Only tasks whose sole marks are final (or inside "500,000") fall back to whitespace.
    assert no_mark == {"13", "20", "43", "45", "53", "77", "97"}
