"""KAE with a fake context: keypoints per page, verbatim check, UEK, KSR/KCR/KOR."""
from __future__ import annotations

import asyncio
import functools

import pytest
from support.fakes import FakeContext, FakePages

from drscore.engine.runtime.evidence import PlaceholderPages
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.methods import get
from drscore.engine.methods.kae import (
    Kae,
    KaeKeypoint,
    KaeTally,
    kae_rates,
    normalise,
    span_found,
    verified,
)
from support.data import drb_report


FakePages = functools.partial(FakePages, missing="timeout")
FakeContext = functools.partial(FakeContext, prompt="How do mackerel prices move?", method="kae")


REPORT = """Mackerel prices rose 12% in 2023 [1]. Catches fell [2]. See also [3].

[1] https://a.example/p
[2] https://b.example/c
[3] https://c.example/gone
"""
PAGE_A = "Prices of chub mackerel rose 12% in 2023.\nThe warm current shifted north in 2022."
PAGE_B = "Japanese landings fell to 300,000 tons.\nPrices rose 12% in 2023 as supply fell."
PAGES = {"https://a.example/p": PAGE_A, "https://b.example/c": PAGE_B}

KEYPOINTS = {
    "https://a.example/p": [
        {"point": "Prices rose 12% in 2023", "spans": ["Prices of chub mackerel rose 12% in 2023"]},
        {"point": "The current moved north", "spans": ["The  warm current shifted NORTH in 2022"]},  # case/space
        {"point": "Invented", "spans": ["this sentence is not on the page"]},  # dropped
    ],
    "https://b.example/c": [
        {"point": "Landings fell to 300,000 t", "spans": ["Japanese landings fell to 300,000 tons"]},
        {"point": "Prices rose 12% in 2023 on low supply", "spans": ["Prices rose 12% in 2023 as supply fell"]},
        {"point": "No spans", "spans": []},  # dropped
    ],
}


def script(overrides=None):
    overrides = overrides or {}

    def answer(template, variables, label=""):
        if template in overrides:
            return overrides[template]
        if template == "kae_keypoints":
            return {"keypoints": KEYPOINTS[variables["url"]]}
        if template == "kae_merge":
            # candidates: 1 prices (a), 2 current (a), 3 landings (b), 4 prices (b) -> 4 duplicates 1
            assert variables["keypoints"].count("\n") == 3
            return {"keep": [1, 2, 3]}
        if template == "kae_label":
            return {"labels": [{"keypoint": 1, "label": "SUPPORTS"}, {"keypoint": 2, "label": "OMITS"},
                               {"keypoint": 3, "label": "CONTRADICTS"}]}
        return None

    return answer


def run(ctx, **opts):
    return asyncio.run(Kae(opts).score(ctx))


def test_registered():
    assert get("kae") is Kae and Kae.needs_pages
    assert {"kae-keypoints-per-page", "kae-keypoints-per-call", "kae-report-budget-tokens"} <= {o.flag for o in Kae.options}


def test_rates_and_counts():
    ctx = FakeContext(REPORT, FakePages(PAGES), script())
    res = run(ctx)
    # 6 extracted, 2 fail the span check -> 4 candidates -> merge keeps 3 (UEK);
    # labels S, O, C: KSR = KOR = KCR = 1/3
    assert res.score == pytest.approx(1 / 3)
    assert res.subscores["ksr"] == pytest.approx(1 / 3)
    assert res.subscores["kcr"] == pytest.approx(1 / 3)
    assert res.subscores["kor"] == pytest.approx(1 / 3)
    assert res.subscores["extracted"] == 6 and res.subscores["dropped_unverified"] == 2
    assert res.details["keypoints"]["candidates"] == 4 and res.details["keypoints"]["uek"] == 3
    assert res.details["pages"] == {"ok": 2, "unreachable": 1, "refused": 0}
    assert (res.judged, res.expected, res.status) == (3, 3, "ok")
    assert [u["label"] for u in res.details["uek"]] == ["SUPPORTS", "OMITS", "CONTRADICTS"]
    label_call = next(v for t, _, v in ctx.calls if t == "kae_label")
    assert "[1]" not in label_call["report"]  # citations stripped before labelling
    assert label_call["window"] == "the whole text"


def test_local_duplicates_are_removed_before_the_merge_call():
    same = {"kae_keypoints": {"keypoints": [{"point": "Prices rose 12% in 2023",
                                             "spans": ["Prices rose 12% in 2023"]}]}}
    ctx = FakeContext(REPORT, FakePages({"https://a.example/p": PAGE_B, "https://b.example/c": PAGE_B}),
                      script(same))
    res = run(ctx)
    assert res.details["keypoints"]["candidates"] == 1
    assert [t for t, _, _ in ctx.calls].count("kae_merge") == 0  # nothing to merge


def test_merge_failure_falls_back_to_local_list():
    res = run(FakeContext(REPORT, FakePages(PAGES), script({"kae_merge": JudgeFailed("fatal", "400")})))
    assert res.details["keypoints"]["uek"] == 4 and res.status == "partial"
    assert any("local de-duplication used" in e for e in res.errors)


def test_labelling_in_batches_and_missing_labels():
    ctx = FakeContext(REPORT, FakePages(PAGES), script({"kae_label": {"labels": [
        {"keypoint": 1, "label": "SUPPORTS"}]}}))
    res = run(ctx, kae_keypoints_per_call=2)
    # UEK of 3 labelled in batches [1, 2] and [3]; each batch's answer labels only its #1
    assert [t for t, _, _ in ctx.calls].count("kae_label") == 2
    assert res.subscores["keypoints"] == 2 and res.details["keypoints"]["failed"] == 1
    assert res.score == 1.0 and (res.judged, res.expected) == (2, 3) and res.status == "partial"


def test_no_readable_page():
    res = run(FakeContext(REPORT, FakePages({}), script()))
    assert res.score is None and res.status == "failed"
    assert res.errors == ["none of the 3 cited pages could be read"]
    res = run(FakeContext("No sources.", FakePages({}), script()))
    assert res.errors == ["the report cites no URL"] and res.status == "skipped"


def test_verbatim_check_normalises_and_rejects_fragments():
    page = normalise("The “warm” current\u00a0shifted — north.")
    assert span_found('the "warm" current shifted - north', page)
    assert not span_found("current", page)  # too short to prove anything
    assert not span_found("the cold current shifted", page)
    assert span_found("中国经济增长", normalise("今年中国经济增长较快"))
    kept, dropped = verified([KaeKeypoint(point="p", spans=["The warm current"]),
                              KaeKeypoint(point="q", spans=["The warm current", "made up span here"])],
                             "The warm current shifted north.")
    assert [k.point for k in kept] == ["p"] and dropped == 1
    assert kae_rates(KaeTally()) == {"ksr": None, "kcr": None, "kor": None}


def test_offline_judge_on_a_real_report():
    # Real report, pages = the report's own cited sentences: the offline rules extract
    # sentences sharing terms with the task (verbatim, so none is dropped) and find
    # them in the report.
    from drscore.engine.text.citations import parse_citations

    row = drb_report(61)
    pages: dict[str, str] = {}
    for p in parse_citations(row["article"]).pairs:
        pages[p.url] = pages.get(p.url, "") + "\n" + p.statement
    res = run(FakeContext(row["article"], FakePages(pages), prompt=row["prompt"]))
    assert res.subscores["dropped_unverified"] == 0
    assert res.subscores["keypoints"] >= 5
    assert res.score is not None and res.score >= 0.9
    assert res.subscores["kcr"] == 0.0  # the lexical rule never claims a contradiction


def test_dry_run_with_placeholder_pages_plans_the_worst_case():
    row = drb_report(61)
    ctx = FakeContext(row["article"], PlaceholderPages(), prompt=row["prompt"])
    res = run(ctx, kae_keypoints_per_page=8, kae_keypoints_per_call=20)
    n_urls = len(ctx.pages.urls)
    calls = [t for t, _, _ in ctx.calls]
    # one keypoint call per cited page (13), one merge, and every planned key point
    # (13 x 8 = 104) labelled 20 per call: ceil(104 / 20) = 6 label calls
    assert n_urls == res.subscores["urls"] == 13
    assert calls.count("kae_keypoints") == 13 and calls.count("kae_merge") == 1
    assert calls.count("kae_label") == 6 and res.expected == 104
