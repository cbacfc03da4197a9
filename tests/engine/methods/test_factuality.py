"""ReportEval factuality with a fake context: -1/0/1 per claim-source pair."""
from __future__ import annotations

import asyncio
import functools

import pytest
from support.fakes import FakeContext, FakePages

from drscore.engine.text.citations import parse_citations
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.methods import get
from drscore.engine.methods.factuality import Factuality, SupportTally, average_support
from drscore.judge.offline import rules
from support.data import drb_report


FakePages = functools.partial(FakePages, missing="dns")
FakeContext = functools.partial(FakeContext, prompt="Research mackerel markets.", method="factuality")


REPORT = """Prices rose 12% in 2023 [1]. Japan landed 376,600 tons [2]. Korea banned imports [3].
Stocks recovered in 2021 [1]. Norway exports doubled [4].

[1] https://a.example/p
[2] https://b.example/c
[3] https://c.example/k
[4] https://d.example/gone
"""
PAGES = {"https://a.example/p": "page a", "https://b.example/c": "page b", "https://c.example/k": "page c",
         "https://d.example/gone": "!http_5xx"}
SCORES = {"Prices rose 12% in 2023.": 1, "Japan landed 376,600 tons.": 0, "Korea banned imports.": -1,
          "Stocks recovered in 2021.": 1}


def by_claim(template, variables, label):
    score = SCORES[variables["claim"]]
    if score is None:
        raise JudgeFailed("transient", "timeout")
    return {"reason": "scripted", "score": score}


def run(ctx, **opts):
    return asyncio.run(Factuality(opts).score(ctx))


def test_registered():
    assert get("factuality") is Factuality and Factuality.needs_pages
    assert {"page-budget-tokens", "factuality-max-pairs", "citation-extractor"} <= {o.flag for o in Factuality.options}


def test_unreadable_page_is_judged_on_its_failure_text_by_default():
    seen = {}

    def script(template, variables, label):
        seen[variables["claim"]] = (variables["page"], variables["window"], label)
        return {"reason": "x", "score": SCORES.get(variables["claim"], -1)}

    res = run(FakeContext(REPORT, FakePages(PAGES), script))
    page, window, label = seen["Norway exports doubled."]
    assert page.startswith("[the page could not be retrieved (http_5xx") and "failure text" in window
    assert label.endswith("| unreadable (http_5xx)")
    # 1, 0, -1, 1 and -1 for the unreadable page: (1 + 0 - 1 + 1 - 1) / 5 = 0
    assert res.score == pytest.approx(0.0)
    assert (res.judged, res.expected) == (5, 5) and res.subscores["judged_unreadable"] == 1
    assert res.details["unreadable"] == "judge"
    # an imported "scrape failed" placeholder is what the judge reads
    placeholder = dict(PAGES, **{"https://d.example/gone": "scrape failed: HTTP 403"})
    run(FakeContext(REPORT, FakePages(placeholder), script))
    assert seen["Norway exports doubled."][0] == "scrape failed: HTTP 403"


def test_average_support_and_strong_support_rate():
    res = run(FakeContext(REPORT, FakePages(PAGES), by_claim), factuality_unreadable="skip")
    # judged scores 1, 0, -1, 1 (page d unreachable): average (1 + 0 - 1 + 1) / 4 = 0.25
    # strong support rate 2/4; partial 1/4; unsupported 1/4
    assert res.score == pytest.approx(0.25)
    assert res.subscores["strong_support_rate"] == pytest.approx(0.5)
    assert res.subscores["partial_rate"] == pytest.approx(0.25)
    assert res.subscores["unsupported_rate"] == pytest.approx(0.25)
    assert (res.judged, res.expected, res.status) == (4, 5, "ok")
    assert res.details["counts"] == {"supported": 2, "partial": 1, "unsupported": 1, "unreachable": 1,
                                     "refused": 0, "failed": 0}
    assert res.details["pages"] == {"ok": 3, "unreachable": 1, "refused": 0}
    claims = {c["claim"]: c["score"] for c in res.details["claims"]}
    assert claims["Norway exports doubled."] is None


def test_failed_pair_is_counted_not_scored():
    SCORES_FAIL = dict(SCORES, **{"Korea banned imports.": None})

    def script(template, variables, label):
        if SCORES_FAIL[variables["claim"]] is None:
            raise JudgeFailed("transient", "timeout")
        return {"reason": "x", "score": SCORES_FAIL[variables["claim"]]}

    res = run(FakeContext(REPORT, FakePages(PAGES), script), factuality_unreadable="skip")
    # (1 + 0 + 1) / 3
    assert res.score == pytest.approx(2 / 3)
    assert (res.judged, res.expected, res.status) == (3, 5, "partial")
    assert any("timeout" in e for e in res.errors)


def test_max_pairs_samples_with_the_seeded_rng():
    ctx = FakeContext(REPORT, FakePages(PAGES), by_claim)
    res = run(ctx, factuality_max_pairs=2)
    assert res.expected == 2 and res.details["pairs_available"] == 5 and res.details["max_pairs"] == 2
    again = run(FakeContext(REPORT, FakePages(PAGES), by_claim), factuality_max_pairs=2)
    assert [c["claim"] for c in res.details["claims"]] == [c["claim"] for c in again.details["claims"]]


def test_no_readable_page_is_an_explained_failure():
    res = run(FakeContext(REPORT, FakePages({}), by_claim), factuality_unreadable="skip")
    assert res.score is None and res.status == "failed"
    assert res.errors == ["none of the 4 cited pages could be read"]
    empty = run(FakeContext("No citations here.", FakePages({}), by_claim))
    assert empty.score is None and empty.errors == ["no claim-source pair in the report"]
    assert empty.status == "skipped" and res.status == "failed"  # nothing cited vs nothing readable


def test_offline_rule_scale():
    rule = rules()["factuality_support"]
    page = "In 2020 Japan landed 376,600 tons of chub mackerel."
    assert rule({"page": page, "claim": "Japan landed 376,600 tons in 2020."}, {})["score"] == 1
    # terms present but the figure differs: partial
    assert rule({"page": page, "claim": "Japan landed 380,000 tons in 2020."}, {})["score"] == 0
    assert rule({"page": page, "claim": "Korea banned all fish imports."}, {})["score"] == -1
    assert average_support(SupportTally(full=1, partial=1, none=2)) == pytest.approx(-0.25)  # (1 + 0 - 2) / 4


def test_offline_judge_on_a_real_report():
    row = drb_report(61)
    parse = parse_citations(row["article"])
    pages: dict[str, str] = {}
    for p in parse.pairs:
        pages[p.url] = pages.get(p.url, "") + "\n\n" + p.statement
    res = run(FakeContext(row["article"], FakePages(pages)))
    # every page quotes its claims verbatim: all pairs fully supported
    assert res.score == 1.0 and res.subscores["strong_support_rate"] == 1.0
    assert res.expected == len(parse.pairs) == res.judged
