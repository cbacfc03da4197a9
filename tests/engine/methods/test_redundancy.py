"""Redundancy method: both protocols with hand-computed means, seeded sampling,
screening counts, failures, too-short reports, and the offline rule on real
DeepResearch Bench reports."""
from __future__ import annotations

import asyncio
import json
import random
from typing import Any, Callable

import msgspec
import orjson
import pytest

from drscore import prompts
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.methods import available
from drscore.engine.methods.redundancy import (
    PairOutcome, Redundancy, RedundancyPairVerdict, listed_pairs, redundancy_score,
    sample_pairs, screened_out_pairs,
)
from drscore.engine.runtime.models import Report, Task
from drscore.engine.text.segment import segment
from drscore.engine.text.similarity import ScreenResult, screen
from drscore.engine.runtime.calls.verdicts import schema_of
from drscore.judge.offline import rules
from drscore.judge.offline.reporteval import redundancy_from_overlap
from support.data import DRB as DATA


def _reports() -> dict[int, str]:
    with open(DATA / "reports.claude-3-7-sonnet.jsonl", encoding="utf-8") as f:
        return {row["id"]: row["article"] for row in map(json.loads, f)}


REPORTS = _reports()


class FakeContext:
    """Minimal ItemContext: ``answer(variables)`` gives a canned verdict dict (default:
    the offline rule); ``fail(variables)`` makes that call raise JudgeFailed."""

    def __init__(self, text: str, answer: Callable[[dict], dict] | None = None,
                 fail: Callable[[dict], bool] | None = None, seed: int = 0, agent: str = "a") -> None:
        self.task = Task(task_id="t1", prompt="Question?")
        self.report = Report(task_id="t1", agent=agent, report=text)
        self.method, self.options, self.seed, self.pages = "redundancy", {}, seed, None
        self.answer, self.fail = answer, fail
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.rng_salts: list[tuple] = []
        self.offloaded: list[str] = []

    async def ask(self, template, verdict, variables, *, sample=0, label=""):
        prompts.load(template).render(variables)
        self.calls.append((template, variables, label))
        await asyncio.sleep(0)  # let other calls interleave, like a real pool
        if self.fail is not None and self.fail(variables):
            raise JudgeFailed("invalid_output", "answer does not match the schema")
        data = self.answer(variables) if self.answer else rules()[template](variables, schema_of(verdict))
        return msgspec.json.decode(orjson.dumps(data), type=verdict)

    def rng(self, *salt: Any) -> random.Random:
        self.rng_salts.append(salt)
        return random.Random(repr((self.seed, self.task.task_id, self.report.agent, salt)))

    async def offload(self, fn, *args):
        self.offloaded.append(fn.__name__)
        return await asyncio.to_thread(fn, *args)


def _sections_report(n: int) -> str:
    """``n`` sections "## S<i>" of about 300 characters of distinct filler each."""
    rng = random.Random(n)
    parts = []
    for i in range(n):
        words = " ".join(f"{rng.choice('bcdfghjklmnpqrstvwz')}{rng.randrange(10**6)}" for _ in range(40))
        parts.append(f"## S{i}\n{words}")
    return "\n\n".join(parts)


def _score_if(pred: Callable[[dict], bool], yes: int, no: int = 4) -> Callable[[dict], dict]:
    return lambda v: {"reason": "canned", "score": yes if pred(v) else no}


def _mentions(v: dict, heading: str) -> bool:
    return v["passage_a"].startswith(heading + "\n") or v["passage_b"].startswith(heading + "\n")


# Topics far apart, so that only the planted copy passes the screen.
PARAGRAPHS = [
    "This report looks at several unrelated subjects, one paragraph each, as a test fixture for screening.",
    "Braising softens tough cuts of beef: brown the meat, add stock and aromatics, then simmer covered for hours.",
    "Neutron stars pack more mass than the Sun into a sphere about twenty kilometres across, spinning rapidly.",
    "The midfielder's late run split the defence, and a low cross found the striker unmarked at the far post.",
    "Depreciation spreads the cost of a machine over its useful life, lowering taxable profit in each year.",
    "Tomato seedlings need full sun, steady watering and a stake once the first flower trusses appear.",
    "Neutron stars pack more mass than the Sun into a sphere about twenty kilometres across, spinning rapidly. "
    "Some of them emit beams we observe as pulsars.",
    "In short, each subject stands on its own and none of them repeats another, except where planted.",
]
FULL_REPORT = "\n\n".join(PARAGRAPHS)


def test_registered_with_its_options():
    cls = available()["redundancy"]
    assert cls is Redundancy
    flags = {o.flag: o.default for o in cls.options}
    assert flags == {"redundancy-protocol": "sampled", "redundancy-max-pairs": 30, "segmentation": "paragraphs",
                     "screen-threshold": 0.15, "redundancy-min-chars": None, "prompt-language": "auto"}


def test_redundancy_score_hand_computed():
    assert redundancy_score([0, 2], 13) == pytest.approx(54 / 15)  # (0 + 2 + 4*13) / 15 = 3.6
    assert redundancy_score([3, 4, 2]) == 3.0  # 9 / 3
    assert redundancy_score([], 5) == 4.0
    assert redundancy_score([]) is None


def test_sample_pairs_all_when_under_the_cap_else_seeded():
    assert sample_pairs(4, 30, random.Random(1)) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    a = sample_pairs(200, 30, random.Random("s"))
    assert len(a) == len(set(a)) == 30 and a == sorted(a)
    assert all(0 <= i < j < 200 for i, j in a)
    assert a == sample_pairs(200, 30, random.Random("s"))
    assert a != sample_pairs(200, 30, random.Random("other"))


def test_published_protocol_segments_by_paragraphs_and_sections_is_a_named_option():
    assert Redundancy().opts["segmentation"] == "paragraphs"
    with pytest.raises(ValueError, match="segmentation"):
        Redundancy({"segmentation": "auto"})


def test_listed_pairs_caps_judged_first_then_screened():
    outcomes = [PairOutcome(1, 2, 3, "judged"), PairOutcome(1, 3, None, "failed", "x")]
    rows, cut = listed_pairs(outcomes, iter([(2, 3), (2, 4), (3, 4)]), cap=3)
    assert rows == [[1, 2, 3, "judged"], [1, 3, None, "failed"], [2, 3, 4, "screened"]] and cut
    rows, cut = listed_pairs(outcomes, iter([(2, 3)]), cap=10)
    assert len(rows) == 3 and not cut


def test_screened_out_pairs_skip_candidates_and_shift_indices():
    result = ScreenResult(units=4, threshold=0.5, pairs=[[0, 2], [1, 3]], similarity=[0.9, 0.8])
    assert list(screened_out_pairs(result, 1)) == [(1, 2), (1, 4), (2, 3), (3, 4)]


def test_option_validation():
    for bad, match in [({"redundancy_protocol": "all"}, "redundancy-protocol"),
                       ({"segmentation": "words"}, "segmentation"),
                       ({"redundancy_max_pairs": 0}, "max-pairs"),
                       ({"screen_threshold": 1.5}, "screen-threshold"),
                       ({"redundancy_min_chars": -1}, "min-chars")]:
        with pytest.raises(ValueError, match=match):
            Redundancy(bad)


async def test_sampled_protocol_judges_all_pairs_under_the_cap():
    # 8 sections -> units 0..7, first and last excluded -> units 1..6: 15 pairs <= 30.
    # Pairs touching S3 score 2 (5 pairs), the other 10 score 4: (5*2 + 10*4) / 15 = 50/15.
    ctx = FakeContext(_sections_report(8), answer=_score_if(lambda v: _mentions(v, "## S3"), 2))
    r = await Redundancy({"segmentation": "sections"}).score(ctx)
    assert r.score == pytest.approx(50 / 15)
    assert (r.status, r.judged, r.expected) == ("ok", 15, 15)
    assert r.subscores == {"units": 8.0, "pairs_total": 15.0, "pairs_judged": 15.0, "pairs_failed": 0.0,
                           "pairs_screened_out": 0.0, "pairs_unsampled": 0.0}
    assert r.details["segmentation"] == "sections" and r.details["protocol"] == "sampled"
    assert {i for row in r.details["pairs"] for i in row[:2]} == {1, 2, 3, 4, 5, 6}
    assert sorted(row[2] for row in r.details["pairs"]).count(2) == 5
    assert len(ctx.calls) == 15 and all(t == "redundancy_pair" for t, _, _ in ctx.calls)
    assert ctx.offloaded == ["prepare"]


async def test_sampled_protocol_caps_with_a_seeded_sample():
    # 12 sections -> 10 compared units -> 45 pairs; 30 are sampled.
    text = _sections_report(12)
    r1 = await Redundancy({"segmentation": "sections"}).score(ctx1 := FakeContext(text, answer=_score_if(lambda v: False, 0)))
    r2 = await Redundancy({"segmentation": "sections"}).score(FakeContext(text, answer=_score_if(lambda v: False, 0)))
    r3 = await Redundancy({"segmentation": "sections"}).score(FakeContext(text, answer=_score_if(lambda v: False, 0), seed=1))
    assert (r1.judged, r1.expected, r1.subscores["pairs_total"], r1.subscores["pairs_unsampled"]) == (30, 30, 45, 15)
    assert r1.details["pairs"] == r2.details["pairs"] != r3.details["pairs"]
    assert ctx1.rng_salts == [("redundancy",)]
    small = await Redundancy({"redundancy_max_pairs": 5, "segmentation": "sections"}).score(FakeContext(text))
    assert (small.judged, small.details["max_pairs"]) == (5, 5)


async def test_full_protocol_judges_only_candidates():
    # 8 paragraphs -> 6 compared (units 1..6) -> 15 pairs; only units 2 and 6 (the
    # copied neutron-star paragraph) pass the screen. Judge says 1 for it:
    # (1 + 4*14) / 15 = 57 / 15 = 3.8.
    ctx = FakeContext(FULL_REPORT, answer=_score_if(lambda v: True, 1))
    r = await Redundancy({"redundancy_protocol": "full"}).score(ctx)
    assert r.score == pytest.approx(57 / 15)
    assert (r.status, r.judged, r.expected) == ("ok", 1, 1)
    assert r.subscores["pairs_total"] == 15 and r.subscores["pairs_screened_out"] == 14
    assert r.details["segmentation"] == "paragraphs" and r.details["screen_threshold"] == 0.15
    assert r.details["pairs"][0] == [2, 6, 1, "judged"]
    assert sum(row[3] == "screened" for row in r.details["pairs"]) == 14
    assert [label for _, _, label in ctx.calls] == ["pair 2-6"]
    assert r.details["unit_lines"][0] == [1, 3]  # unit 1 starts on report line 3


async def test_full_protocol_with_threshold_zero_judges_every_pair():
    r = await Redundancy({"redundancy_protocol": "full", "screen_threshold": 0.0}).score(
        FakeContext(FULL_REPORT, answer=_score_if(lambda v: True, 3)))
    assert (r.score, r.judged, r.expected, r.subscores["pairs_screened_out"]) == (3.0, 15, 15, 0)


async def test_failed_pairs_are_reported_not_dropped():
    # Sampled, 15 pairs; the judge fails on both pairs S1-S2 and S1-S3 and says 2
    # elsewhere: mean of 13 judged = 2.0, status partial.
    def fail(v):
        return _mentions(v, "## S1") and (_mentions(v, "## S2") or _mentions(v, "## S3"))

    r = await Redundancy({"segmentation": "sections"}).score(FakeContext(_sections_report(8), answer=_score_if(lambda v: True, 2), fail=fail))
    assert (r.score, r.status, r.judged, r.expected) == (2.0, "partial", 13, 15)
    assert r.subscores["pairs_failed"] == 2
    assert r.errors == ["pair 1-2: invalid_output: answer does not match the schema",
                        "pair 1-3: invalid_output: answer does not match the schema"]
    assert [1, 2, None, "failed"] in r.details["pairs"]


async def test_every_candidate_failing_fails_the_report():
    # Screened-out pairs alone would give a misleading 4.0.
    r = await Redundancy({"redundancy_protocol": "full"}).score(FakeContext(FULL_REPORT, fail=lambda v: True))
    assert (r.score, r.status, r.judged, r.expected) == (None, "failed", 0, 1)


async def test_too_few_units_is_skipped_with_a_clear_reason():
    r = await Redundancy({"segmentation": "sections"}).score(FakeContext(_sections_report(3)))
    assert (r.score, r.status, r.judged, r.expected) == (None, "skipped", 0, 0)
    assert r.errors[0].startswith("too_few_units: 3 unit(s) after sections segmentation")
    assert r.subscores["units"] == 3


async def test_full_protocol_on_a_real_report_with_the_offline_judge():
    # Report 51, 55 paragraphs -> 53 compared -> 1378 pairs.
    ctx = FakeContext(REPORTS[51])
    r = await Redundancy({"redundancy_protocol": "full"}).score(ctx)
    units = segment(REPORTS[51], "paragraphs")
    expected = screen([u.text for u in units[1:-1]])
    assert r.subscores["pairs_total"] == 1378 == expected.total_pairs
    assert r.expected == r.judged == expected.candidates == len(ctx.calls)
    assert r.subscores["pairs_screened_out"] == expected.screened_out
    judged = {(i, j): s for i, j, s, src in r.details["pairs"] if src == "judged"}
    assert judged[(18, 45)] <= 1 and judged[(41, 50)] <= 1  # copied paragraphs
    # score = (sum of judged + 4 * screened out) / total
    assert r.score == pytest.approx((sum(judged.values()) + 4 * expected.screened_out) / 1378)
    assert len(r.details["pairs"]) == 1378 and not r.details["pairs_truncated"]


async def test_sampled_protocol_on_real_reports():
    # Sections, as the released script: report 51 keeps 7 sections -> 5 compared -> 10 pairs;
    # report 1 (Chinese): 5 -> 3 -> 3.
    en = await Redundancy({"segmentation": "sections"}).score(FakeContext(REPORTS[51]))
    zh = await Redundancy({"segmentation": "sections"}).score(FakeContext(REPORTS[1]))
    assert (en.judged, en.subscores["units"], zh.judged, zh.subscores["units"]) == (10, 7, 3, 5)
    assert en.status == zh.status == "ok" and 0 <= en.score <= 4 and 0 <= zh.score <= 4
    # The published protocol's paragraphs: report 51 has 55 -> 53 compared -> 1378 pairs, 30 judged.
    default = await Redundancy().score(FakeContext(REPORTS[51]))
    assert default.details["segmentation"] == "paragraphs"
    assert (default.subscores["units"], default.subscores["pairs_total"], default.judged) == (55, 1378, 30)


def test_offline_rule_scale():
    assert [redundancy_from_overlap(x) for x in (0.05, 0.1, 0.3, 0.45, 0.7)] == [4, 3, 2, 1, 0]
    rule = rules()["redundancy_pair"]
    schema = schema_of(RedundancyPairVerdict)
    same = rule({"passage_a": PARAGRAPHS[2], "passage_b": PARAGRAPHS[2]}, schema)
    apart = rule({"passage_a": PARAGRAPHS[1], "passage_b": PARAGRAPHS[3]}, schema)
    assert (same["score"], apart["score"]) == (0, 4)
    msgspec.convert(same, RedundancyPairVerdict)
    assert schema["properties"]["score"] == {"type": "integer", "minimum": 0, "maximum": 4}
