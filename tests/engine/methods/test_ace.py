"""ACE method: checklist repair, weighted mean (hand-computed), failures, task-level
sharing, and the offline rules on real DeepResearch Bench tasks."""
from __future__ import annotations

import json
from typing import Any, Callable

import msgspec
import orjson
import pytest

from drscore import prompts
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.methods.ace import Ace, AceChecklist, AceItemScore, ChecklistRejected, repair_checklist, weighted_mean
from drscore.engine.runtime.models import Report, Task
from drscore.engine.runtime.calls.verdicts import schema_of
from drscore.judge.offline import rule_for, rules
from support.data import DRB as DATA

TASKS = {str(json.loads(line)["id"]): json.loads(line)["prompt"]
         for line in open(DATA / "tasks.jsonl", encoding="utf-8")}
REPORTS = {str(json.loads(line)["id"]): json.loads(line)["article"]
           for line in open(DATA / "reports.claude-3-7-sonnet.jsonl", encoding="utf-8")}


class CannedContext:
    """ItemContext with canned answers per template (else the offline rules); answers are
    decoded through JSON into the verdict Struct, so schema bounds apply."""

    def __init__(self, task: Task, report: Report, answers: dict[str, Callable[[dict[str, Any]], Any]] | None = None,
                 fail: Callable[[str, dict[str, Any]], bool] | None = None) -> None:
        self.task, self.report = task, report
        self.method, self.options, self.seed, self.pages = "ace", {}, 0, None
        self.answers, self.fail = answers or {}, fail
        self.calls: list[tuple[str, dict[str, Any], int]] = []

    async def ask(self, template, verdict, variables, *, sample=0, label=""):
        prompts.load(template).render(variables)
        self.calls.append((template, variables, sample))
        if self.fail is not None and self.fail(template, variables):
            raise JudgeFailed("invalid_output", "answer does not match the schema")
        data = (self.answers[template](variables) if template in self.answers
                else rule_for(template)(variables, schema_of(verdict)))
        return msgspec.json.decode(orjson.dumps(data), type=verdict)


CHECKLIST = {"items": [{"item": "Covers costs", "weight": 5}, {"item": "Compares regions", "weight": 3},
                       {"item": "Gives a recommendation", "weight": 2}]}
ITEM_SCORES = {"Covers costs": 8, "Compares regions": 6, "Gives a recommendation": 10}
CANNED = {"ace_checklist": lambda v: CHECKLIST,
          "ace_item": lambda v: {"justification": "j", "score": ITEM_SCORES[v["item"]]}}


def _ctx(answers=CANNED, fail=None, agent="a", text="A report about costs."):
    return CannedContext(Task(task_id="t", prompt="Compare energy costs."),
                         Report(task_id="t", agent=agent, report=text), answers, fail)


async def test_weighted_mean_hand_computed():
    ctx = _ctx()
    r = await Ace().score(ctx)
    # Weights 5:3:2 -> 0.5/0.3/0.2; 0.5*8 + 0.3*6 + 0.2*10 = 4 + 1.8 + 2 = 7.8
    assert r.score == pytest.approx(7.8)
    assert (r.status, r.judged, r.expected, r.errors) == ("ok", 3, 3, [])
    assert [(i["item"], i["weight"], i["score"]) for i in r.details["items"]] == [
        ("Covers costs", 0.5, 8), ("Compares regions", 0.3, 6), ("Gives a recommendation", 0.2, 10)]
    assert [c[0] for c in ctx.calls] == ["ace_checklist", "ace_item", "ace_item", "ace_item"]


async def test_failed_item_is_partial_and_drops_out_of_the_mean():
    r = await Ace().score(_ctx(fail=lambda t, v: t == "ace_item" and v["item"] == "Gives a recommendation"))
    # (0.5*8 + 0.3*6) / (0.5 + 0.3) = 5.8 / 0.8 = 7.25
    assert r.score == pytest.approx(7.25)
    assert (r.status, r.judged, r.expected) == ("partial", 2, 3)
    assert r.errors == ["item 3: invalid_output: answer does not match the schema"]
    assert r.details["items"][2]["score"] is None


async def test_all_items_or_checklist_failing_fails_the_report():
    r = await Ace().score(_ctx(fail=lambda t, v: t == "ace_item"))
    assert (r.status, r.score, r.judged, r.expected) == ("failed", None, 0, 3)
    r = await Ace().score(_ctx(fail=lambda t, v: t == "ace_checklist"))
    assert r.status == "failed" and r.errors == ["checklist: invalid_output: answer does not match the schema"]


async def test_checklist_is_asked_with_the_same_request_for_every_report():
    seen = []
    for agent in ("a", "b"):
        ctx = _ctx(agent=agent, text=f"report by {agent}")
        await Ace().score(ctx)
        seen.append([(c[0], c[1], c[2]) for c in ctx.calls if c[0] == "ace_checklist"])
    assert seen[0] == seen[1] and seen[0][0][1] == {"task_prompt": "Compare energy costs."}


def test_repair_checklist():
    # Blank and repeated (case/space-insensitive) items dropped, weights renormalised.
    assert repair_checklist([("A", 1), (" ", 5), ("a ", 9), ("B", 1), ("C", 2)]) == [
        ("A", 0.25), ("B", 0.25), ("C", 0.5)]
    # Eight items: the six heaviest stay, in their original order; ties keep the earlier item.
    items = [("i1", 1), ("i2", 8), ("i3", 1), ("i4", 5), ("i5", 5), ("i6", 2), ("i7", 3), ("i8", 1)]
    kept = repair_checklist(items)
    assert [t for t, _ in kept] == ["i1", "i2", "i4", "i5", "i6", "i7"]
    # Kept weights 1, 8, 5, 5, 2, 3 (sum 24) -> renormalised.
    assert [w for _, w in kept] == pytest.approx([1 / 24, 8 / 24, 5 / 24, 5 / 24, 2 / 24, 3 / 24])
    # All-zero weights become uniform.
    assert [w for _, w in repair_checklist([("x", 0), ("y", 0), ("z", 0)])] == pytest.approx([1 / 3] * 3)
    with pytest.raises(ChecklistRejected, match="judge wrote 2 usable items, need 3-6"):
        repair_checklist([("x", 1), ("X", 1), ("y", 1)])
    assert weighted_mean([8, 6], [0.5, 0.3]) == pytest.approx(7.25)


async def test_too_short_checklist_fails_with_reason():
    # Three items in the answer, but two repeat the first: one usable item is left.
    answers = {**CANNED, "ace_checklist": lambda v: {"items": [{"item": "Covers costs", "weight": 1}] * 3}}
    ctx = _ctx(answers=answers)
    r = await Ace().score(ctx)
    assert r.status == "failed" and r.errors == ["checklist: judge wrote 1 usable items, need 3-6"]
    assert [c[0] for c in ctx.calls] == ["ace_checklist"]
    # Fewer than three items do not even decode: the engine re-asks, then fails the call.
    assert schema_of(AceChecklist)["properties"]["items"]["minItems"] == 3
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"items": [{"item": "a", "weight": 1}, {"item": "b", "weight": 1}]}',
                            type=AceChecklist)


def test_item_scores_are_integers_0_to_10_in_the_schema():
    schema = schema_of(AceItemScore)
    assert schema["properties"]["score"] == {"type": "integer", "minimum": 0, "maximum": 10}
    assert set(schema["required"]) == {"justification", "score"}
    for bad in (b'{"justification": "j", "score": 11}', b'{"justification": "j", "score": 7.5}'):
        with pytest.raises(msgspec.ValidationError):
            msgspec.json.decode(bad, type=AceItemScore)


def test_offline_checklists_for_all_100_tasks():
    for tid, prompt in TASKS.items():
        out = rules()["ace_checklist"]({"task_prompt": prompt}, {})
        items = [i["item"] for i in out["items"]]
        assert 3 <= len(items) <= 6, tid
        assert len(set(items)) == len(items)
        assert abs(sum(i["weight"] for i in out["items"]) - 1) < 1e-3


@pytest.mark.parametrize("tid", ["1", "51", "90"])
async def test_offline_ace_on_real_reports(tid):
    task = Task(task_id=tid, prompt=TASKS[tid])
    full = await Ace().score(CannedContext(task, Report(task_id=tid, agent="c", report=REPORTS[tid])))
    assert full.status == "ok" and 0 <= full.score <= 10 and 3 <= full.expected <= 6
    # A report on another task covers this task's checklist less well.
    other = "51" if tid != "51" else "90"
    off = await Ace().score(CannedContext(task, Report(task_id=tid, agent="c", report=REPORTS[other])))
    assert off.score < full.score
