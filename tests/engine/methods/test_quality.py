"""Quality method: score and subscores from the verdict, failures, the prompt and
its schema, and the offline rule on real DeepResearch Bench reports."""
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
from drscore.engine.methods.quality import Quality, QualityVerdict, dimension_mean, quality_subscores
from drscore.engine.runtime.models import Report, Task
from drscore.engine.runtime.calls.verdicts import schema_of
from drscore.judge.offline import rule_for
from drscore.judge.offline.reporteval import ReportFeatures, moving_ttr, quality_scores, report_features
from support.data import DRB as DATA


def _jsonl(name: str) -> dict[int, dict[str, Any]]:
    with open(DATA / name, encoding="utf-8") as f:
        return {row["id"]: row for row in map(json.loads, f)}


REPORTS = _jsonl("reports.claude-3-7-sonnet.jsonl")
TASKS = _jsonl("tasks.jsonl")


class FakeContext:
    """Minimal ItemContext: canned answers (or the offline rules) decoded through
    JSON into the verdict Struct, calls recorded, optional failures."""

    def __init__(self, text: str, prompt: str = "Question?", answer: Callable[[dict], dict] | None = None,
                 fail: bool = False) -> None:
        self.task = Task(task_id="t1", prompt=prompt)
        self.report = Report(task_id="t1", agent="a", report=text)
        self.method, self.options, self.seed, self.pages = "quality", {}, 0, None
        self.answer, self.fail = answer, fail
        self.calls: list[tuple[str, dict[str, Any], str]] = []

    async def ask(self, template, verdict, variables, *, sample=0, label=""):
        prompts.load(template).render(variables)  # every variable the prompt needs
        self.calls.append((template, variables, label))
        if self.fail:
            raise JudgeFailed("invalid_output", "answer does not match the schema")
        data = self.answer(variables) if self.answer else rule_for(template)(variables, schema_of(verdict))
        return msgspec.json.decode(orjson.dumps(data), type=verdict)

    def rng(self, *salt: Any) -> random.Random:
        return random.Random(repr((self.seed, salt)))

    async def offload(self, fn, *args):
        return await asyncio.to_thread(fn, *args)


CANNED = {"justification": "Covers most parts.", "comprehensiveness": 4, "coherence": 3, "clarity": 3,
          "insightfulness": 2, "overall": 3}


def test_registered_under_its_name():
    assert available()["quality"] is Quality


async def test_score_is_overall_and_subscores_are_the_five():
    ctx = FakeContext("Some report.", "What is X?", answer=lambda v: CANNED)
    r = await Quality().score(ctx)
    assert r.score == 3.0
    assert r.subscores == {"comprehensiveness": 4.0, "coherence": 3.0, "clarity": 3.0,
                           "insightfulness": 2.0, "overall": 3.0}
    # mean of the four specific dimensions: (4 + 3 + 3 + 2) / 4 = 3.0
    assert r.details == {"justification": "Covers most parts.", "dimension_mean": 3.0,
                         "prompt_language": "en"}
    assert (r.judged, r.expected, r.status) == (1, 1, "ok")
    assert [(t, v) for t, v, _ in ctx.calls] == [("quality", {"question": "What is X?", "report": "Some report."})]


def test_pure_helpers_hand_computed():
    v = QualityVerdict(justification="", comprehensiveness=1, coherence=2, clarity=4, insightfulness=0, overall=2)
    assert dimension_mean(v) == 1.75  # (1 + 2 + 4 + 0) / 4
    assert quality_subscores(v)["clarity"] == 4.0


async def test_failed_call_is_a_failed_row_not_a_crash():
    r = await Quality().score(FakeContext("text", fail=True))
    assert (r.score, r.status, r.judged, r.expected) == (None, "failed", 0, 1)
    assert r.errors == ["invalid_output: answer does not match the schema"]


def test_out_of_range_score_is_rejected_by_the_struct():
    bad = dict(CANNED, overall=5)
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(orjson.dumps(bad), type=QualityVerdict)


def test_schema_is_strict_friendly():
    schema = schema_of(QualityVerdict)
    assert set(schema["required"]) == {"justification", "comprehensiveness", "coherence", "clarity",
                                       "insightfulness", "overall"}
    assert schema["properties"]["overall"] == {"type": "integer", "minimum": 0, "maximum": 4}
    assert schema.get("additionalProperties") is False


def test_prompt_renders_a_real_task_and_report():
    msgs = prompts.load("quality").render({"question": TASKS[51]["prompt"], "report": REPORTS[51]["article"]})
    assert [role for role, _ in msgs] == ["system", "user"]
    assert TASKS[51]["prompt"] in msgs[1][1] and "## V. Challenges and Opportunities" in msgs[1][1]


def test_moving_ttr_hand_computed():
    assert moving_ttr(["a", "b", "a", "c"], window=2) == 1.0  # ab, ba, ac
    assert moving_ttr(["a", "b", "a", "c"], window=3) == pytest.approx(5 / 6)  # aba 2/3, bac 3/3
    assert moving_ttr(["a", "a"], window=50) == 0.5  # shorter than the window: 1 type / 2
    assert moving_ttr([]) == 0.0


def test_quality_scores_hand_computed():
    f = ReportFeatures(tokens=2000, headings=4, paragraphs=20, cited_share=0.35, diversity=0.78,
                       repeated_share=0.06, reasoning_per_1k=3.0)
    # size band 3 (>=1800), structure 2 (>=3): round((2*3 + 2) / 3) = round(2.67) = 3
    # coherence = structure = 2; clarity: band 2 (>=0.76) - 1 (6% repeated) = 1
    # insightfulness: reasoning band 2 (>=2.5), cited band 2 (>=0.3): round(6/3) = 2
    # overall: (3 + 2 + 1 + 2) / 4 = 2.0 -> 2
    assert quality_scores(f) == {"comprehensiveness": 3, "coherence": 2, "clarity": 1,
                                 "insightfulness": 2, "overall": 2}


def test_report_features_on_a_real_report():
    # Report 51: 26 markdown headings (# to ####, the title twice), 55 paragraphs,
    # and list items that copy body sentences verbatim (about 6% of its sentences).
    f = report_features(REPORTS[51]["article"])
    assert f.headings == 26 and f.paragraphs == 55
    assert 0.05 <= f.repeated_share < 0.1
    assert 4000 < f.tokens < 7000
    assert 0.5 < f.cited_share <= 1.0  # most paragraphs end with a [n] marker


async def test_offline_rule_separates_a_real_report_from_a_stub():
    real = await Quality().score(FakeContext(REPORTS[51]["article"], TASKS[51]["prompt"]))
    stub = await Quality().score(FakeContext("Japan is ageing. Spending will change.", TASKS[51]["prompt"]))
    assert real.status == stub.status == "ok"
    assert real.score >= 3 and stub.score <= 1
    assert real.details["justification"].startswith("Offline heuristic baseline")
    zh = await Quality().score(FakeContext(REPORTS[1]["article"], TASKS[1]["prompt"]))
    assert zh.score >= 3


def test_quality_prompt_carries_the_published_calibration():
    from drscore import prompts

    user = dict(prompts.load("quality").sections)["user"]
    calibration = user[:user.index("comprehensiveness:")]
    # a satisfactory report sits in the middle (2 of 0-4), the ends are rare
    assert "satisfactory" in calibration and "middle of the scale, at 2" in calibration
    assert "rare" in calibration
    overall = user[user.index("overall:"):user.index("First write")]
    assert "preference" in overall and "not an average" in overall
