"""Rigorous Bench formulas (engine.drift) against hand-computed values."""
from __future__ import annotations

import pytest

from drscore.engine.methods.rigorous import drift
from drscore.engine.methods.rigorous.drift import KeywordScore, TslMatch


def test_count_keyword_is_case_insensitive_substring():
    text = "TLS 1.3 replaced TLS 1.2; tls 1.3 is faster. DTLS differs."
    assert drift.count_keyword(text, "TLS 1.3") == 2
    assert drift.count_keyword(text, "tls") == 4  # substring: "DTLS" counts too, as in the benchmark
    assert drift.count_keyword(text, "  ") == 0


def test_fak_drift_hand_computed():
    scores = [KeywordScore("a", 0, 1), KeywordScore("b", 1, 3), KeywordScore("c", 2, 5),
              KeywordScore("d", 5, 4), KeywordScore("e", 3, 2)]
    # eps+ = 2: min(f/2,1)*rel/5 = 0, 0.5*0.6=0.3, 1*1=1, 1*0.8=0.8, 1*0.4=0.4 -> sum 2.5, mean 0.5
    assert drift.fak_drift(scores) == pytest.approx(0.5)
    assert drift.fak_drift([]) is None


def test_fdk_drift_hand_computed():
    scores = [KeywordScore("a", 0, 1), KeywordScore("b", 1, 2), KeywordScore("c", 3, 5),
              KeywordScore("d", 0, 1), KeywordScore("e", 0, 1)]
    # eps- = 1: 0, 1*0.4, 1*1.0, 0, 0 -> 1.4 / 5 = 0.28
    assert drift.fdk_drift(scores) == pytest.approx(0.28)


def test_semantic_drift_hand_computed():
    # 0.7 * 0.5 + 0.3 * 0.28 = 0.35 + 0.084
    assert drift.semantic_drift(0.5, 0.28) == pytest.approx(0.434)


def test_relevance_out_of_range_is_an_error():
    with pytest.raises(ValueError, match="relevance"):
        drift.fak_drift([KeywordScore("a", 1, 6)])


def test_quality_hand_computed():
    # QSR 21/30 = 0.7, GRR 50/73 = 0.684932; 0.5*0.7 + 0.5*0.684932 = 0.692466
    q = drift.quality(drift.rubric_ratio(21, 30), drift.rubric_ratio(50, 73))
    assert q == pytest.approx(0.6924657534)
    assert drift.rubric_ratio(3, 0) is None


@pytest.mark.parametrize("raw, expected", [
    ("HTTPS://WWW.RFC-Editor.org/RFC/rfc9000/?x=1#sec", "https://www.rfc-editor.org/rfc/rfc9000"),
    ("https://example.org/", "https://example.org"),
    ("http://user:pw@Example.org:8080/A/b/", "http://example.org:8080/a/b"),
    ("example.org/Path/?q", "example.org/path"),
])
def test_normalize_url(raw, expected):
    assert drift.normalize_url(raw) == expected


TSL = ["https://www.rfc-editor.org/rfc/rfc9000", "https://datatracker.ietf.org/wg/quic/meetings/"]
CITED = ["https://WWW.rfc-editor.org/rfc/rfc9000/?x=1#s", "https://www.rfc-editor.org/rfc/rfc9001",
         "https://example.com/a", "https://www.rfc-editor.org/rfc/rfc9000"]


def test_match_tsl_pairs():
    m = drift.match_tsl(TSL, CITED)
    # Cited URLs after normalisation and de-duplication: rfc9000, rfc9001, example.com/a (3).
    # Full: rfc9000 TSL is inside the rfc9000 citation only (not rfc9001) -> 1.
    # Host: "www.rfc-editor.org" inside rfc9000 and rfc9001 -> 2; datatracker host nowhere.
    assert m == TslMatch(match_full=1, match_host=2, n_tsl=2, n_annotations=3)


def test_trustworthy_boost_hand_computed():
    m = TslMatch(match_full=1, match_host=2, n_tsl=2, n_annotations=3)
    # 1 + 0.2 * (0.7 * 1/2 + 0.3 * (2-1)/(3+1)) = 1 + 0.2 * (0.35 + 0.075) = 1.085
    assert drift.trustworthy_boost(m) == pytest.approx(1.085)
    assert drift.trustworthy_boost(TslMatch(match_full=0, match_host=0, n_tsl=0, n_annotations=0)) == 1.0


def test_code_counting_can_exceed_one_plus_eta_and_the_paper_formula_cannot():
    tsl = ["https://a.org/1", "https://a.org/2", "https://a.org/3"]
    cited = ["https://a.org/1", "https://a.org/x", "https://a.org/y", "https://a.org/z"]
    code = drift.match_tsl(tsl, cited, "code")
    # full: only a.org/1 in a.org/1 -> 1 (a.org/1 is not inside a.org/x ...); host: 3 TSL x 4 cited = 12
    assert (code.match_full, code.match_host) == (1, 12)
    # authors' code subtracts full matches: 1 + 0.2 * (0.7 * 1/3 + 0.3 * (12 - 1)/5) = 1.178667
    assert drift.trustworthy_boost(code) == pytest.approx(1.1786667, abs=1e-6)
    paper = drift.match_tsl(tsl, cited, "paper-formula")
    # full: 1 TSL matched; host: 4 cited URLs on a TSL host
    assert (paper.match_full, paper.match_host) == (1, 4)
    # paper's equation, nothing subtracted: 1 + 0.2 * (0.7/3 + 0.3 * 4/5) = 1 + 0.2 * (0.233333 + 0.24) = 1.094667
    assert drift.trustworthy_boost(paper, counting="paper-formula") == pytest.approx(1.0946667, abs=1e-6)
    # the same counts under the code's formula would subtract: 0.3 * 3/5 -> 1.082667
    assert drift.trustworthy_boost(paper, counting="code") == pytest.approx(1.0826667, abs=1e-6)
    with pytest.raises(ValueError, match="counting"):
        drift.match_tsl(tsl, cited, "links")
    with pytest.raises(ValueError, match="counting"):
        drift.trustworthy_boost(paper, counting="pairs")


def test_integrated_score_hand_computed():
    # 0.6924657534 * (1 - 0.434) * 1.085 * 100 = 42.525014
    assert drift.integrated_score(0.6924657534, 0.434, 1.085) == pytest.approx(42.5250144, abs=1e-6)
    # Range: at most 1 * 1 * 1.2 * 100 with bounded rates.
    assert drift.integrated_score(1.0, 0.0, 1.2) == pytest.approx(120.0)


def test_contribution_per_token():
    # 30 / (12000 - 2000) = 0.003
    assert drift.contribution_per_token(30.0, {"total_tokens": 12000, "input_tokens": 2000}) == pytest.approx(0.003)
    assert drift.contribution_per_token(30.0, {"total_tokens": 100}) is None
    assert drift.contribution_per_token(30.0, {"total_tokens": 100, "input_tokens": 100}) is None
    assert drift.contribution_per_token(30.0, None) is None


def test_retrieval_index():
    # 5 / (19 + 1) = 0.25
    assert drift.retrieval_index({"retrieved_links": 19, "annotated_links": 5}, n_cited=99) == 0.25
    # a list of 9 retrieved links, annotated defaults to the 4 cited URLs: 4 / 10
    assert drift.retrieval_index({"retrieved_links": ["u"] * 9}, n_cited=4) == pytest.approx(0.4)
    assert drift.retrieval_index({"total_tokens": 5}, n_cited=4) is None


def test_domain_breakdown_means_per_uid_prefix():
    rows = [
        {"task_id": "07001", "score": 30.0, "subscores": {"quality": 0.5, "retrieval_index": 0.2}, "details": {}},
        {"task_id": "07002", "score": 40.0, "subscores": {"quality": 0.7}, "details": {"domain": "07"}},
        {"task_id": "07003", "score": None, "subscores": {}, "details": {}},
        {"task_id": "10502", "score": 12.5, "subscores": {"quality": 0.25}, "details": {}},
    ]
    out = drift.domain_breakdown(rows)
    assert list(out) == ["07", "10"]
    # domain 07: scores 30, 40 -> 35; quality (0.5+0.7)/2 = 0.6; retrieval_index only on one row
    assert out["07"] == {"n": 2, "n_failed": 1, "score": 35.0, "quality": pytest.approx(0.6), "retrieval_index": 0.2}
    assert out["10"] == {"n": 1, "n_failed": 0, "score": 12.5, "quality": 0.25}
