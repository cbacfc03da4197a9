"""``rubric-items``: per-task rubric items, the arithmetic by hand, malformed items named,
and the shipped example set scored end to end against a judge that decides by criterion:
every row equals the hand computation from the judge's own answers, one call per item
and several items per call give the same scores."""
from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re

import pytest
from aiohttp import web

import drscore
from drscore.engine.methods.rubric_items.items import ItemsError, task_items
from drscore.engine.methods.rubric_items.method import RubricItems
from drscore.engine.methods.rubric_items.tally import rubric_score, tag_scores
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.models import Task
from support.data import ROOT
from support.fakes import FakeContext
from support.serve import serve

EXAMPLES = ROOT / "examples"
REPORT_FILES = [EXAMPLES / "reports.claude-3-7-sonnet.jsonl", EXAMPLES / "reports.claude-first-half.jsonl",
                EXAMPLES / "rubric_reports.jsonl"]


def test_the_score_by_hand():
    # +5 met, +3 not met, +2 met, -4 met: (5 + 2 - 4) / (5 + 3 + 2)
    assert rubric_score([(5, True), (3, False), (2, True), (-4, True)]) == pytest.approx(0.3)
    assert rubric_score([(5, True), (-4, False)]) == 1.0  # a penalty not met costs nothing
    assert rubric_score([(2, False), (-4, True)]) == 0.0  # clipped at 0, not -2
    assert rubric_score([(-4, True)]) is None  # nothing to earn
    judged = [(5, True, ("axis:accuracy",)), (3, False, ("axis:accuracy", "theme:x")), (-2, True, ("theme:x",)),
              (-1, True, ("theme:penalties",))]
    assert tag_scores(judged) == {"axis:accuracy": pytest.approx(5 / 8), "theme:x": 0.0}


@pytest.mark.parametrize("rubric, message", [
    ("not a list", "task t1: 'rubric' must be a non-empty list"),
    ([{"criterion": "x", "points": 0}], "task t1: rubric item 1: 'points' must be a non-zero number"),
    ([{"criterion": "x", "points": 2}, {"criterion": " ", "points": 2}], "rubric item 2: 'criterion' must be"),
    ([{"criterion": "x", "points": True}], "'points' must be a non-zero number"),
    ([{"criterion": "x", "points": 1, "weight": 2}], "rubric item 1: unknown field(s) weight"),
    ([{"criterion": "x", "points": 1, "tags": "axis:a"}], "rubric item 1: 'tags' must be a list of strings"),
])
def test_malformed_items_are_named(rubric, message):
    with pytest.raises(ItemsError, match=re.escape(message)):
        task_items(Task(task_id="t1", prompt="p", fields={"rubric": rubric}))


def test_tags_as_a_table_and_healthbench_field_name():
    items = task_items(Task(task_id="t", prompt="p", fields={"rubrics": [
        {"criterion": "c", "points": 3, "tags": {"axis": "accuracy", "theme": "emergency"}}]}))
    assert items is not None and items[0].tags == ("axis:accuracy", "theme:emergency")
    assert task_items(Task(task_id="t", prompt="p")) is None


def test_a_row_without_rubric_is_skipped_and_a_bad_one_fails():
    ctx = FakeContext("report")
    result = asyncio.run(RubricItems().score(ctx))
    assert result.status == "skipped" and result.errors[0].startswith("no rubric: task t1")
    ctx.task = Task(task_id="t1", prompt="p", fields={"rubric": [{"criterion": "c"}]})
    result = asyncio.run(RubricItems().score(ctx))
    assert result.status == "failed" and "rubric item 1: 'points'" in result.errors[0]


def test_a_failed_call_leaves_its_items_out_and_the_row_partial():
    rubric = [{"criterion": f"c{i}", "points": p} for i, p in enumerate([4, 2, 3, -1])]

    def judge(template, variables, label):
        if variables["criterion"] == "c1":
            return JudgeFailed("timeout", "no answer")
        return {"reason": "r", "met": variables["criterion"] in ("c0", "c3")}

    ctx = FakeContext("report", script=judge)
    ctx.task = Task(task_id="t1", prompt="p", fields={"rubric": rubric})
    result = asyncio.run(RubricItems().score(ctx))
    # c1 (2 points) not judged: (4 - 1) / (4 + 3)
    assert result.score == pytest.approx(3 / 7) and result.status == "partial"
    assert (result.judged, result.expected) == (3, 4) and result.errors == ["timeout: no answer"]
    assert result.details["items"][1]["met"] is None and "not judged" in result.details["items"][1]["reason"]
    assert (result.details["points_met"], result.details["points_available"]) == (3, 7)


# --------------------------------------------------------------------------- the example set


def decide(criterion: str, report: str) -> bool:
    """The consistent judge's decision: a fixed function of the criterion and the report."""
    return hashlib.sha256(f"{' '.join(criterion.split())}\0{report}".encode()).digest()[0] % 5 < 3


class CriterionJudge:
    """An OpenAI-compatible judge that decides each criterion by :func:`decide`, whether
    asked one item per call or several; it logs every decision it gave."""

    def __init__(self) -> None:
        self.requests = 0
        self.decisions: dict[tuple[str, str], bool] = {}  # (criterion, sha of the report) -> met

    def _met(self, criterion: str, report: str) -> bool:
        met = decide(criterion, report)
        self.decisions[(" ".join(criterion.split()), hashlib.sha256(report.encode()).hexdigest())] = met
        return met

    async def chat(self, request: web.Request) -> web.Response:
        self.requests += 1
        payload = await request.json()
        user = payload["messages"][-1]["content"]
        report = re.search(r"<report>\n(.*)\n</report>", user, re.S).group(1)
        one = re.search(r"<criterion>\n(.*?)\n</criterion>", user, re.S)
        if one:
            answer: dict = {"reason": "decided by criterion", "met": self._met(one.group(1), report)}
        else:
            criteria = re.search(r"<criteria>\n(.*?)\n</criteria>", user, re.S).group(1)
            answer = {}
            for line in criteria.splitlines():
                key, criterion = re.match(r"(item_\d+)(?: \(penalty\))?: (.*)", line).groups()
                answer[key] = {"reason": "decided by criterion", "met": self._met(criterion, report)}
        content = json.dumps(answer)
        return web.json_response({
            "id": "x", "object": "chat.completion", "model": payload["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": len(content) // 4,
                      "total_tokens": len(user) // 4 + len(content) // 4}})


def _reports() -> dict[tuple[str, str], str]:
    out = {}
    for path in REPORT_FILES:
        for line in path.read_text(encoding="utf-8").splitlines():
            obj = json.loads(line)
            if "article" in obj:  # DeepResearch Bench's shape: the agent is in the file name
                out[(str(obj["id"]), path.name.removeprefix("reports.").removesuffix(".jsonl"))] = obj["article"]
            else:
                out[(obj["task_id"], obj["agent"])] = obj["report"]
    return out


def _tasks() -> dict[str, list[dict]]:
    lines = (EXAMPLES / "rubric_tasks.jsonl").read_text(encoding="utf-8").splitlines()
    return {str(json.loads(line)["id"]): json.loads(line)["rubric"] for line in lines}


def test_the_example_set_is_the_documented_size():
    tasks = _tasks()
    assert len(tasks) == 20 and all(8 <= len(items) <= 15 for items in tasks.values())
    assert sum(len(items) for items in tasks.values()) == 231  # docs/custom-methods.md says so
    assert all(any(i["points"] < 0 for i in items) for items in tasks.values())  # every task has a penalty
    reports = _reports()
    assert {t for t, _ in reports} == set(tasks) and len(reports) == 40


async def _score(tmp_path, url: str, per_call: int) -> list[drscore.ScoreRow]:
    config = drscore.RunConfig(
        methods=["rubric-items"], tasks=str(EXAMPLES / "rubric_tasks.jsonl"), reports=[str(p) for p in REPORT_FILES],
        judge=drscore.JudgeConfig(url=f"{url}/v1", model="criterion-judge", cache_dir=str(tmp_path / "cache"),
                                  concurrency=32),
        method_options={"rubric_items_per_call": per_call})
    async with drscore.Run(config) as run:
        return [row async for row in run.rows()]


async def test_every_row_equals_the_hand_computation_in_both_modes(tmp_path):
    judge = CriterionJudge()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", judge.chat)
    runner, url = await serve(app)
    try:
        per_item = await _score(tmp_path, url, 1)
        per_item_requests = judge.requests
        batched = await _score(tmp_path, url, 5)
        batched_requests = judge.requests - per_item_requests
    finally:
        await runner.cleanup()
    tasks, reports = _tasks(), _reports()
    assert per_item_requests == 2 * sum(len(items) for items in tasks.values())  # 462: one per item and report
    assert batched_requests == 2 * sum(math.ceil(len(items) / 5) for items in tasks.values())
    assert len(per_item) == len(batched) == 40
    by_key = {(r.task_id, r.agent): r for r in batched}
    spread = set()
    for row in per_item:
        items = tasks[row.task_id]
        report = reports[(row.task_id, row.agent)]
        digest = hashlib.sha256(report.encode()).hexdigest()
        met = [judge.decisions[(" ".join(i["criterion"].split()), digest)] for i in items]  # what the judge said
        earned = sum(i["points"] for i, m in zip(items, met) if m)
        available = sum(i["points"] for i in items if i["points"] > 0)
        expected = min(1.0, max(0.0, earned / available))
        assert row.score == pytest.approx(expected), (row.task_id, row.agent)
        assert by_key[(row.task_id, row.agent)].score == pytest.approx(expected), (row.task_id, row.agent)
        assert row.status == "ok" and (row.judged, row.expected) == (len(items), len(items))
        assert [d["met"] for d in row.details["items"]] == met
        assert [d["criterion"] for d in row.details["items"]] == [i["criterion"] for i in items]
        assert row.details["points_met"] == earned and row.details["points_available"] == available
        for tag in {t for i in items for t in i["tags"]}:
            positive = sum(i["points"] for i in items if tag in i["tags"] and i["points"] > 0)
            if positive:
                got = sum(i["points"] for i, m in zip(items, met) if m and tag in i["tags"])
                assert row.subscores[tag] == pytest.approx(min(1.0, max(0.0, got / positive)))
                assert by_key[(row.task_id, row.agent)].subscores[tag] == pytest.approx(row.subscores[tag])
            else:
                assert tag not in row.subscores
        spread.add(round(expected, 6))
    assert len(spread) > 10  # the judge's decisions differ between rows: the comparison is not vacuous
