"""Pair screening: pair arithmetic, hand-computed TF-IDF cosines, block streaming
against a brute-force product, and real reports from DeepResearch Bench."""
from __future__ import annotations

import itertools
import json
import math
import random

import numpy as np
import pytest

from drscore.engine.text.segment import segment
from drscore.engine.text.similarity import (
    DEFAULT_THRESHOLD, containment, featurize, iter_similar_pairs, normalize, pair_at, pair_count, screen,
)
from support.data import DRB as DATA


def _reports() -> dict[int, str]:
    with open(DATA / "reports.claude-3-7-sonnet.jsonl", encoding="utf-8") as f:
        return {row["id"]: row["article"] for row in map(json.loads, f)}


REPORTS = _reports()
IDF_UNIQUE = math.log(3 / 2) + 1  # smoothed idf of an n-gram in 1 of 2 texts: ln(3/2) + 1


def test_pair_count():
    assert [pair_count(k) for k in (0, 1, 2, 5, 200)] == [0, 0, 1, 10, 19_900]


def test_pair_at_is_row_major_without_listing():
    assert [pair_at(4, p) for p in range(6)] == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    for k in (2, 3, 37, 200):
        assert [pair_at(k, p) for p in range(pair_count(k))] == list(itertools.combinations(range(k), 2))
    with pytest.raises(IndexError):
        pair_at(4, 6)


def test_normalize_drops_markers_links_and_punctuation():
    text = "**Growth** rose 6.3% [4][5], see https://stats.gov.cn/x?y=1 — “中产，阶级。”"
    assert normalize(text) == "growth rose 6 3 see 中产 阶级"


def test_tfidf_cosine_hand_computed():
    # "abcd" -> 3-grams {abc, bcd}; "abce" -> {abc, bce}. idf(abc) = ln(3/3) + 1 = 1,
    # idf(bcd) = idf(bce) = ln(3/2) + 1 = 1.405465; tf = 1 everywhere.
    # cos = 1*1 / (1 + 1.405465^2) = 1 / 2.975332 = 0.336097
    x = featurize(["abcd", "abce"], other_ngrams=(3,), cjk_ngrams=())
    sim = (x @ x.T).toarray()
    assert sim[0, 1] == pytest.approx(1 / (1 + IDF_UNIQUE**2), abs=1e-6)
    assert sim[0, 1] == pytest.approx(0.336097, abs=1e-6)
    assert sim[0, 0] == pytest.approx(1.0, abs=1e-6)


def test_cjk_bigrams_hand_computed():
    # 中文测试 -> {中文, 文测, 测试}; 中文考试 -> {中文, 文考, 考试}: one shared bigram.
    # cos = 1 / (1 + 2 * 1.405465^2) = 1 / 4.950664 = 0.201993
    x = featurize(["中文测试", "中文考试"], cjk_ngrams=(2,), other_ngrams=())
    assert (x @ x.T).toarray()[0, 1] == pytest.approx(0.201993, abs=1e-6)


def test_sublinear_tf_hand_computed():
    # "abcabc" -> abc twice, bca, cab once; k = 1 so idf = 1.
    # weights 1 + ln 2 = 1.693147, 1, 1; norm sqrt(1.693147^2 + 2) = 2.205885
    x = featurize(["abcabc"], other_ngrams=(3,), cjk_ngrams=())
    assert sorted(x.data.tolist()) == pytest.approx(
        sorted([1 / 2.205885, 1 / 2.205885, 1.693147 / 2.205885]), abs=1e-4)  # float32


def test_ngrams_do_not_cross_units_or_scripts():
    # "ab" and "cd" joined would make "b|c" n-grams; each text alone has one 2-gram.
    x = featurize(["ab", "cd", ""], other_ngrams=(2,), cjk_ngrams=())
    assert x.getnnz(axis=1).tolist() == [1, 1, 0]
    # A NUL inside a text is a space, not a unit boundary: "a\0b" -> "a b" -> 2-grams
    # "a ", " b"; the following unit keeps its own row.
    z = featurize(["a\x00b", "cd"], other_ngrams=(2,), cjk_ngrams=())
    assert z.shape[0] == 2 and z.getnnz(axis=1).tolist() == [2, 1]
    # Mixed script: "ai芯片" -> CJK 2-gram 芯片 and other 2-gram "ai" only (no "i芯").
    y = featurize(["ai芯片"], other_ngrams=(2,), cjk_ngrams=(2,))
    assert y.nnz == 2


def test_screen_streams_the_same_pairs_as_a_brute_force_product():
    texts = [u.text for u in segment(REPORTS[51], "paragraphs")]
    x = featurize(texts)
    dense = (x @ x.T).toarray()
    k = len(texts)
    expected = {(i, j) for i in range(k) for j in range(i + 1, k) if dense[i, j] >= DEFAULT_THRESHOLD}
    for block_rows in (1, 7, 256):
        got = [(int(i), int(j)) for ii, jj, _ in iter_similar_pairs(x, DEFAULT_THRESHOLD, block_rows=block_rows)
               for i, j in zip(ii, jj)]
        assert set(got) == expected and len(got) == len(expected)
    result = screen(texts)
    assert {tuple(p) for p in result.pairs.tolist()} == expected
    assert result.total_pairs == k * (k - 1) // 2 == 1485
    assert result.candidates + result.screened_out == result.total_pairs
    assert np.all(result.similarity >= DEFAULT_THRESHOLD)


def test_screen_finds_the_copied_paragraph_in_a_real_report():
    # Report 51 repeats body paragraphs almost verbatim in its closing lists: the
    # Deloitte paragraph (unit 41) as "4. **Digital Adoption**" (unit 50), the health
    # cost paragraph (18) as "3. **Healthcare Burden**" (45), the IPSS regional
    # paragraph (14) as "2. **Regional Disparities**" (44).
    units = segment(REPORTS[51], "paragraphs")
    assert units[50].text.startswith("4. **Digital Adoption**")
    assert units[45].text.startswith("3. **Healthcare Burden**")
    result = screen([u.text for u in units])
    sims = {tuple(p): s for p, s in zip(result.pairs.tolist(), result.similarity.tolist())}
    assert sims[(41, 50)] > 0.7 and sims[(18, 45)] > 0.7 and sims[(14, 44)] > 0.7
    assert (7, 22) not in sims  # population count vs food spending: screened out
    assert result.screened_out > 0.9 * result.total_pairs


def test_screen_chinese_report_counts():
    units = segment(REPORTS[1], "paragraphs")
    result = screen([u.text for u in units])
    assert result.units == 41 and result.total_pairs == 820
    # Most pairs of different paragraphs are screened out.
    assert result.screened_out > 0.8 * result.total_pairs


def test_threshold_zero_keeps_every_pair_and_bounds_are_checked():
    result = screen(["a b c d e", "f g h i j", "k l m n o"], 0.0)
    assert result.pairs.tolist() == [[0, 1], [0, 2], [1, 2]] and result.screened_out == 0
    with pytest.raises(ValueError, match="within"):
        screen(["a", "b"], 1.5)


def test_screen_200_synthetic_paragraphs():
    rng = random.Random(7)
    vocab = [f"w{n}" for n in range(3000)]
    texts = [" ".join(rng.choice(vocab) for _ in range(60)) for _ in range(200)]
    texts[150] = texts[10] + " plus a few words"  # one planted near-duplicate
    result = screen(texts)
    assert result.total_pairs == 19_900
    assert [10, 150] in result.pairs.tolist()
    assert result.candidates < 50


def test_containment_hand_computed():
    # {abc, bcd} vs {abc, bcx}: 1 shared of min(2, 2) -> 0.5
    assert containment("abcd", "abcx", other_ngrams=(3,), cjk_ngrams=()) == 0.5
    # {abc} is wholly inside {zab, abc, bcz} -> 1.0
    assert containment("abc", "zabcz", other_ngrams=(3,), cjk_ngrams=()) == 1.0
    assert containment("", "anything at all here") == 0.0
