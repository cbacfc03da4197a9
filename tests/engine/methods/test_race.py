"""RACE method: variants with canned judge answers (hand-computed scores), task-level
sharing, context budget, failures, cleaning, and the offline rules on real data."""
from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any, Callable

import msgspec
import orjson
import pytest

from drscore import prompts
from drscore.engine.methods.race.criteria import DIMENSIONS, STATIC_CRITERIA, load_criteria
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.methods.race.method import (
    VARIANTS,
    Race,
    RacePairScores,
    check_context,
    criteria_list_json,
    load_references,
)
from drscore.engine.runtime.models import Report, Task
from drscore.engine.runtime.calls.verdicts import schema_of
from drscore.judge.offline import rule_for, rules
from drscore.judge.offline.rubrics_race import clauses, cue_weights
from support.data import DRB as DATA

CRITERIA = DATA / "criteria.jsonl"
TASKS = {str(json.loads(line)["id"]): json.loads(line) for line in open(DATA / "tasks.jsonl", encoding="utf-8")}
REPORTS = {str(json.loads(line)["id"]): json.loads(line)["article"]
           for line in open(DATA / "reports.claude-3-7-sonnet.jsonl", encoding="utf-8")}

Answer = Callable[[dict[str, Any], int], dict[str, Any]]


class FakeContext:
    """An ItemContext whose judge is canned answers (per template) or the offline rules.

    Answers go through JSON and the verdict Struct, so schema bounds are enforced as in
    the engine; every call is recorded as (template, variables, sample, label)."""

    def __init__(self, task: Task, report: Report, answers: dict[str, Answer] | None = None,
                 fail: Callable[[str, int], bool] | None = None) -> None:
        self.task, self.report = task, report
        self.method, self.options, self.seed, self.pages = "race", {}, 0, None
        self.answers, self.fail = answers or {}, fail
        self.calls: list[tuple[str, dict[str, Any], int, str]] = []

    async def ask(self, template, verdict, variables, *, sample=0, label=""):
        prompts.load(template).render(variables)  # every template variable is supplied
        self.calls.append((template, variables, sample, label))
        if self.fail is not None and self.fail(template, sample):
            raise JudgeFailed("transient", "HTTP 503 after 3 retries")
        if template in self.answers:
            data = self.answers[template](variables, sample)
        else:
            data = rule_for(template)(variables, schema_of(verdict))
        return msgspec.json.decode(orjson.dumps(data), type=verdict)

    async def offload(self, fn, *args):
        return await asyncio.to_thread(fn, *args)

    def templates(self) -> list[str]:
        return [c[0] for c in self.calls]


def _task(tid="t1", prompt="Compare solar and wind power costs in Europe.", reference="REF " * 50):
    return Task(task_id=tid, prompt=prompt, reference=reference)


def _report(text="TARGET " * 50, tid="t1", agent="a"):
    return Report(task_id=tid, agent=agent, report=text)


# Canned task-level answers: three weight samples that differ, two criteria per dimension.
WEIGHT_SAMPLES = [
    {"comprehensiveness": 0.4, "insight": 0.3, "instruction_following": 0.2, "readability": 0.1},
    {"comprehensiveness": 0.2, "insight": 0.4, "instruction_following": 0.2, "readability": 0.2},
    {"comprehensiveness": 30, "insight": 20, "instruction_following": 20, "readability": 30},  # percent
]


def _weights(variables, sample):
    return {"rationale": "r", **WEIGHT_SAMPLES[sample]}


def _criteria(variables, sample):
    d = variables["dimension"]
    return {"criteria": [{"criterion": f"{d} main", "explanation": "x", "weight": 3},
                         {"criterion": f"{d} minor", "explanation": "y", "weight": 1}]}


def _scores_by_text(table: dict[str, tuple[float, float]]) -> Answer:
    """Judge that scores the article containing 'TARGET' with table[...][0] and the one
    containing 'REF' with table[...][1], whatever the order they are shown in."""

    def answer(variables, sample):
        crit = orjson.loads(variables["criteria_list"])
        out = {}
        for d in DIMENSIONS:
            rows = []
            for c in crit[d]:
                kind = "main" if c["criterion"].endswith("main") else "minor"
                t, r = table[kind]
                s1, s2 = (t, r) if "TARGET" in variables["article_1"] else (r, t)
                rows.append({"criterion": c["criterion"], "analysis": "a", "article_1_score": s1,
                             "article_2_score": s2})
            out[d] = rows
        return out

    return answer


CANNED = {"race_weights": _weights, "race_criteria": _criteria,
          "race_score": _scores_by_text({"main": (8.0, 4.0), "minor": (4.0, 8.0)})}


async def test_full_variant_hand_computed_and_call_plan():
    ctx = FakeContext(_task(), _report(), CANNED)
    r = await Race({"race_clean": "none", "race_weight_samples": 3}).score(ctx)
    # Weights: mean of the three renormalised samples:
    #   comp (0.4+0.2+0.3)/3 = 0.3, insight (0.3+0.4+0.2)/3 = 0.3, inst 0.2, read 0.2.
    # Criteria 3:1 -> 0.75/0.25. Every dimension: t = 0.75*8 + 0.25*4 = 7, r = 0.75*4 + 0.25*8 = 5.
    # S_int: t = 7, r = 5 -> 7/12 = 58.3333 %.
    assert r.status == "ok" and r.errors == []
    assert r.score == pytest.approx(100 * 7 / 12, abs=1e-4)
    assert r.subscores == pytest.approx({d: 100 * 7 / 12 for d in DIMENSIONS}, abs=1e-4)
    assert (r.judged, r.expected) == (8, 8)
    assert r.details["dimension_weights"] == pytest.approx(
        {"comprehensiveness": 0.3, "insight": 0.3, "instruction_following": 0.2, "readability": 0.2})
    assert r.details["criteria_source"] == "generated" and r.details["weight_samples"] == 3
    assert r.details["target"]["total"] == pytest.approx(7.0)
    # 3 weight samples with distinct sample indices, 4 criteria calls, 1 scoring call.
    assert sorted(ctx.templates()) == ["race_criteria"] * 4 + ["race_score"] + ["race_weights"] * 3
    assert sorted(c[2] for c in ctx.calls if c[0] == "race_weights") == [0, 1, 2]
    score_vars = next(c[1] for c in ctx.calls if c[0] == "race_score")
    assert score_vars["article_1"].startswith("TARGET") and score_vars["article_2"].startswith("REF")
    # Weights never reach the judge's scoring prompt.
    assert '"weight"' not in score_vars["criteria_list"]


async def test_task_level_steps_use_identical_requests_for_every_report():
    method = Race({"race_clean": "none", "race_weight_samples": 3})
    seen = []
    for agent in ("a", "b"):
        ctx = FakeContext(_task(), _report(f"TARGET by {agent} " * 20, agent=agent), CANNED)
        await method.score(ctx)
        seen.append(sorted((c[0], orjson.dumps(c[1], option=orjson.OPT_SORT_KEYS), c[2])
                           for c in ctx.calls if c[0] in ("race_weights", "race_criteria")))
    # Same template, variables and sample: the engine de-duplicates and caches them.
    assert seen[0] == seen[1] and len(seen[0]) == 7


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        # no-dim-weights: every dimension is 7 vs 5 anyway -> 7/12.
        ("no-dim-weights", 7 / 12),
        # no-crit-weights: each dimension (8+4)/2 = 6 vs (4+8)/2 = 6 -> 1/2.
        ("no-crit-weights", 0.5),
        # reverse: the judge is position-independent here, so the score is unchanged.
        ("reverse", 7 / 12),
    ],
)
async def test_weight_and_position_variants(variant, expected):
    ctx = FakeContext(_task(), _report(), CANNED)
    r = await Race({"race_variant": variant, "race_clean": "none", "race_weight_samples": 3}).score(ctx)
    assert r.status == "ok"
    assert r.score == pytest.approx(100 * expected, abs=1e-4)
    score_vars = next(c[1] for c in ctx.calls if c[0] == "race_score")
    first = "REF" if variant == "reverse" else "TARGET"
    assert score_vars["article_1"].startswith(first)


async def test_dimension_weights_matter_when_dimensions_differ():
    def uneven(variables, sample):
        crit = orjson.loads(variables["criteria_list"])
        # comprehensiveness 9 vs 1, all other dimensions 5 vs 5.
        return {d: [{"criterion": c["criterion"], "analysis": "a",
                     "article_1_score": 9 if d == "comprehensiveness" else 5,
                     "article_2_score": 1 if d == "comprehensiveness" else 5} for c in crit[d]]
                for d in DIMENSIONS}

    answers = {**CANNED, "race_score": uneven}
    full = await Race({"race_clean": "none", "race_weight_samples": 3}).score(FakeContext(_task(), _report(), answers))
    flat = await Race({"race_variant": "no-dim-weights", "race_clean": "none", "race_weight_samples": 3}).score(
        FakeContext(_task(), _report(), answers))
    # full: W = .3/.3/.2/.2 -> t = .3*9 + .7*5 = 6.2, r = .3*1 + .7*5 = 3.8 -> 6.2/10 = 62 %
    assert full.score == pytest.approx(62.0, abs=1e-4)
    # uniform: t = .25*9 + .75*5 = 6, r = .25*1 + .75*5 = 4 -> 60 %
    assert flat.score == pytest.approx(60.0, abs=1e-4)
    assert full.subscores["comprehensiveness"] == pytest.approx(90.0)
    assert full.subscores["insight"] == pytest.approx(50.0)


async def test_criteria_file_is_used_as_is_with_one_call_per_report():
    table = load_criteria(CRITERIA)
    task = Task(task_id="51", prompt=TASKS["51"]["prompt"], reference="REF " * 100)
    ctx = FakeContext(task, _report("TARGET " * 100, tid="51"))
    r = await Race({"criteria": str(CRITERIA), "race_clean": "none"}).score(ctx)
    assert ctx.templates() == ["race_score"]
    shown = orjson.loads(ctx.calls[0][1]["criteria_list"])
    assert [c["criterion"] for c in shown["insight"]] == [c.criterion for c in table["51"].criterions["insight"]]
    assert r.details["criteria_source"] == "file"
    assert r.expected == table["51"].n_criteria == 25
    assert r.details["dimension_weights"] == table["51"].dimension_weight
    # The offline judge echoes every criterion text, so every match is exact.
    assert r.details["matches"]["exact"] == 25


async def test_missing_task_in_criteria_file_fails_the_item():
    ctx = FakeContext(_task(tid="nope", prompt="a task that is not in the file"), _report(tid="nope"))
    r = await Race({"criteria": str(CRITERIA)}).score(ctx)
    assert r.status == "failed" and r.score is None
    assert r.errors == [f"no criteria for task 'nope' in {CRITERIA}"]
    assert ctx.calls == []


async def test_static_variant_uses_the_generic_criteria():
    ctx = FakeContext(_task(), _report(), CANNED)
    r = await Race({"race_variant": "static", "race_clean": "none", "race_weight_samples": 3}).score(ctx)
    shown = orjson.loads(next(c[1] for c in ctx.calls if c[0] == "race_score")["criteria_list"])
    assert {d: [c["criterion"] for c in shown[d]] for d in DIMENSIONS} == {
        d: [c.criterion for c in STATIC_CRITERIA[d]] for d in DIMENSIONS}
    assert "race_criteria" not in ctx.templates() and ctx.templates().count("race_weights") == 3
    assert r.details["criteria_source"] == "static+generated weights"
    assert r.expected == sum(len(v) for v in STATIC_CRITERIA.values())


async def test_pointwise_scores_the_target_alone_without_reference():
    def point(variables, sample):
        crit = orjson.loads(variables["criteria_list"])
        return {d: [{"criterion": c["criterion"], "analysis": "a",
                     "target_score": 8.0 if c["criterion"].endswith("main") else 4.0} for c in crit[d]]
                for d in DIMENSIONS}

    ctx = FakeContext(_task(reference=None), _report(), {**CANNED, "race_score_pointwise": point})
    r = await Race({"race_variant": "pointwise", "race_clean": "none", "race_weight_samples": 3}).score(ctx)
    # Every dimension 0.75*8 + 0.25*4 = 7 -> 7/10 -> 70.
    assert r.status == "ok" and r.score == pytest.approx(70.0)
    assert r.details["pointwise"] is True and r.details["reference"] is None
    assert "article" in next(c[1] for c in ctx.calls if c[0] == "race_score_pointwise")


async def test_vanilla_is_one_call_on_0_to_10_scaled_to_100():
    ctx = FakeContext(_task(reference=None), _report(),
                      {"race_vanilla": lambda v, s: {"analysis": "fine", "score": 6.5}})
    r = await Race({"race_variant": "vanilla", "race_clean": "none"}).score(ctx)
    assert ctx.templates() == ["race_vanilla"]
    assert (r.score, r.judged, r.expected, r.status) == (65.0, 1, 1, "ok")


@pytest.mark.parametrize("variant", sorted(set(VARIANTS) - {"vanilla", "pointwise"}))
async def test_reference_variants_need_a_reference(variant):
    ctx = FakeContext(_task(reference="  "), _report(), CANNED)
    r = await Race({"race_variant": variant}).score(ctx)
    assert (r.status, r.score, r.errors) == ("failed", None, ["no reference report"])
    assert ctx.calls == []


async def test_references_file_wins_over_task_reference(tmp_path):
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"id": "t1", "prompt": "p", "article": "REF from the file " * 30}) + "\n",
                    encoding="utf-8")
    ctx = FakeContext(_task(reference="REF from the task"), _report(), CANNED)
    await Race({"references": str(refs), "race_clean": "none", "race_weight_samples": 3}).score(ctx)
    assert next(c[1] for c in ctx.calls if c[0] == "race_score")["article_2"].startswith("REF from the file")
    # A task absent from the file falls back to its own reference.
    ctx = FakeContext(_task(tid="t2", reference="REF from the task"), _report(tid="t2"), CANNED)
    await Race({"references": str(refs), "race_clean": "none", "race_weight_samples": 3}).score(ctx)
    assert next(c[1] for c in ctx.calls if c[0] == "race_score")["article_2"] == "REF from the task"


def test_bad_references_file_names_file_and_line(tmp_path):
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"id": 1, "prompt": "p", "article": "ok"}) + "\n{broken\n"
                    + json.dumps({"id": 3, "prompt": "p"}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as err:
        load_references(refs)
    assert f"{refs}:2: malformed JSON" in str(err.value)
    assert f"{refs}:3: missing field 'article'" in str(err.value)
    with pytest.raises(ValueError, match="race-variant must be one of"):
        Race({"race_variant": "best"})
    with pytest.raises(ValueError, match="at least 1"):
        Race({"race_weight_samples": 0})


async def test_context_budget_fails_the_item_without_calling_the_judge():
    table = load_criteria(CRITERIA)
    task = Task(task_id="60", prompt=TASKS["60"]["prompt"], reference=REPORTS["59"])
    ctx = FakeContext(task, _report(REPORTS["60"], tid="60"))
    r = await Race({"criteria": str(CRITERIA), "race_context_tokens": 5000}).score(ctx)
    assert r.status == "failed" and r.score is None
    assert r.errors[0].startswith("context: prompt needs ~") and r.errors[0].endswith(
        "budget is 5000 (--race-context-tokens)")
    assert ctx.calls == []
    # The estimate covers both reports and the criteria: larger than either report alone.
    variables = {"task_prompt": task.prompt, "article_1": REPORTS["60"], "article_2": REPORTS["59"],
                 "criteria_list": criteria_list_json(table["60"])}
    tokens = check_context("race_score", variables, 0)
    assert tokens > len(REPORTS["60"]) / 4 + len(REPORTS["59"]) / 4
    # The default budget (100k) fits the same pair.
    ok = await Race({"criteria": str(CRITERIA)}).score(FakeContext(task, _report(REPORTS["60"], tid="60")))
    assert ok.status == "ok" and 0 < ok.details["prompt_tokens"] < 100000


async def test_judge_failures_are_counted_not_raised():
    # One weight sample fails: the other two are averaged.
    ctx = FakeContext(_task(), _report(), CANNED, fail=lambda t, s: t == "race_weights" and s == 2)
    r = await Race({"race_clean": "none", "race_weight_samples": 3}).score(ctx)
    # (0.4+0.2)/2 = 0.3, (0.3+0.4)/2 = 0.35, 0.2, (0.1+0.2)/2 = 0.15
    assert r.status == "ok" and r.details["weight_samples"] == 2
    assert r.details["dimension_weights"] == pytest.approx(
        {"comprehensiveness": 0.3, "insight": 0.35, "instruction_following": 0.2, "readability": 0.15})
    # Every sample fails: the item fails with the reason.
    ctx = FakeContext(_task(), _report(), CANNED, fail=lambda t, s: t == "race_weights")
    r = await Race({"race_clean": "none", "race_weight_samples": 3}).score(ctx)
    assert r.status == "failed" and r.errors[0].startswith("criteria: transient: all 3 weight samples failed")
    assert "race_score" not in ctx.templates()
    # The scoring call fails.
    ctx = FakeContext(_task(), _report(), CANNED, fail=lambda t, s: t == "race_score")
    r = await Race({"race_clean": "none", "race_weight_samples": 3}).score(ctx)
    assert r.status == "failed" and r.errors == ["score: transient: HTTP 503 after 3 retries"]


async def test_judge_that_skips_criteria_gives_partial_coverage():
    def skipping(variables, sample):
        full = _scores_by_text({"main": (8.0, 4.0), "minor": (4.0, 8.0)})(variables, sample)
        full["readability"] = full["readability"][:1]  # "readability minor" not scored
        return full

    r = await Race({"race_clean": "none", "race_weight_samples": 3}).score(
        FakeContext(_task(), _report(), {**CANNED, "race_score": skipping}))
    assert r.status == "partial" and (r.judged, r.expected) == (7, 8)
    assert r.errors == ["1 of 8 criteria not matched by the judge's answer"]
    # Readability then rests on "main" alone: 8 vs 4.
    assert r.subscores["readability"] == pytest.approx(100 * 8 / 12)


CITED = ("Solar costs fell 80% [1] while wind fell 50% [2, 3].\n\nSee [the IEA](https://iea.org/x) "
         "for details.\n\n## References\n[1] https://a.example/x\n[2] https://b.example/y\n"
         "[3] https://c.example/z\n")


async def test_deterministic_cleaning_strips_markers_links_and_references():
    ctx = FakeContext(_task(reference="REF " + CITED), _report("TARGET " + CITED), CANNED)
    await Race({"race_weight_samples": 3}).score(ctx)
    shown = next(c[1] for c in ctx.calls if c[0] == "race_score")
    for text in (shown["article_1"], shown["article_2"]):
        assert "[1]" not in text and "http" not in text and "References" not in text
        assert "Solar costs fell 80% while wind fell 50%." in text and "See the IEA for details." in text
    assert "race_clean" not in ctx.templates()


async def test_llm_cleaning_asks_the_judge_and_shares_the_reference_call():
    cleaned = lambda v, s: {"article": v["article"].split(" ")[0] + " cleaned"}  # noqa: E731
    answers = {**CANNED, "race_clean": cleaned}
    method = Race({"race_clean": "llm", "race_weight_samples": 3})
    ref_calls = []
    for agent in ("a", "b"):
        ctx = FakeContext(_task(reference="REF " + CITED), _report(f"TARGET {agent} " + CITED, agent=agent),
                          answers)
        r = await method.score(ctx)
        assert r.status == "ok"
        shown = next(c[1] for c in ctx.calls if c[0] == "race_score")
        assert (shown["article_1"], shown["article_2"]) == ("TARGET cleaned", "REF cleaned")
        ref_calls += [c[1] for c in ctx.calls if c[0] == "race_clean" and c[3] == "clean:reference"]
    assert len(ref_calls) == 2 and ref_calls[0] == ref_calls[1]  # one cached call per task
    # A failed cleaning call fails the item with its reason (no silent fallback).
    ctx = FakeContext(_task(), _report(), answers, fail=lambda t, s: t == "race_clean")
    r = await method.score(ctx)
    assert r.status == "failed" and r.errors[0].startswith("clean: transient")


# ------------------------------------------------------------------ offline rules

def test_offline_weights_and_criteria_on_real_tasks():
    for tid in ("1", "4", "51", "52", "90"):
        prompt = TASKS[tid]["prompt"]
        weights, _ = cue_weights(prompt)
        assert abs(sum(weights.values()) - 1) < 1e-9 and all(w > 0 for w in weights.values())
        for d in DIMENSIONS:
            out = rules()["race_criteria"]({"task_prompt": prompt, "dimension": d,
                                            "dimension_description": ""}, {})
            texts = [c["criterion"] for c in out["criteria"]]
            assert 3 <= len(texts) <= 6 and len(set(texts)) == len(texts)
            assert abs(sum(c["weight"] for c in out["criteria"]) - 1) < 1e-3
    # Task 4 asks to analyse a trend with a mind map: insight and readability cues.
    w4, hits = cue_weights(TASKS["4"]["prompt"])
    assert hits["insight"] >= 2 and hits["readability"] >= 1
    assert w4["insight"] > w4["instruction_following"]
    # Clauses come from the prompt itself.
    assert clauses(TASKS["51"]["prompt"])[0].startswith("From 2020 to 2050, how many elderly people")


@pytest.mark.parametrize("tid", ["1", "51", "90"])
async def test_offline_judge_prefers_the_full_report_to_its_first_third(tid):
    article = REPORTS[tid]
    task = Task(task_id=tid, prompt=TASKS[tid]["prompt"], reference=article[: len(article) // 3])
    for options in ({"criteria": str(CRITERIA)}, {}):
        r = await Race(options).score(FakeContext(task, _report(article, tid=tid)))
        assert r.status == "ok" and r.score > 50.0, (options, r.score)
        # Reversing the order changes nothing for a deterministic lexical judge.
        rev = await Race({**options, "race_variant": "reverse"}).score(FakeContext(task, _report(article, tid=tid)))
        assert rev.score == pytest.approx(r.score)


async def test_every_variant_runs_on_real_data_with_the_offline_judge():
    article = REPORTS["52"]
    task = Task(task_id="52", prompt=TASKS["52"]["prompt"], reference=REPORTS["53"])
    for variant in VARIANTS:
        for clean in ("deterministic", "llm", "none"):
            r = await Race({"race_variant": variant, "race_clean": clean}).score(
                FakeContext(task, _report(article, tid="52")))
            assert r.status == "ok", (variant, clean, r.errors)
            assert 0 <= r.score <= 100
            assert r.judged == r.expected > 0


def test_offline_scores_decode_into_the_verdict_struct():
    tc = load_criteria(CRITERIA)["1"]
    variables = {"task_prompt": tc.prompt, "article_1": REPORTS["1"], "article_2": REPORTS["2"],
                 "criteria_list": criteria_list_json(tc)}
    data = rules()["race_score"](variables, schema_of(RacePairScores))
    verdict = msgspec.json.decode(orjson.dumps(data), type=RacePairScores)
    assert len(verdict.comprehensiveness) == len(tc.criterions["comprehensiveness"])
    assert all(0 <= i.article_1_score <= 10 for d in DIMENSIONS for i in getattr(verdict, d))


async def test_judge_that_rewrites_criterion_texts_is_partial_but_scored():
    def paraphrasing(variables, sample):
        full = _scores_by_text({"main": (8.0, 4.0), "minor": (4.0, 8.0)})(variables, sample)
        full["insight"][1]["criterion"] = "something the criteria never said"
        return full

    r = await Race({"race_clean": "none", "race_weight_samples": 3}).score(
        FakeContext(_task(), _report(), {**CANNED, "race_score": paraphrasing}))
    # The benchmark still uses the item, with the dimension's mean weight (0.5 each here):
    # insight t = (0.75*8 + 0.5*4) / 1.25 = 6.4, r = (0.75*4 + 0.5*8) / 1.25 = 5.6.
    assert r.status == "partial" and (r.judged, r.expected) == (7, 8)
    assert r.details["matches"] == {"exact": 7, "casefold": 0, "substring": 0, "mean": 1}
    assert r.subscores["insight"] == pytest.approx(100 * 6.4 / 12)


# ------------------------------------------------------------------ end to end (drscore run)

SLICE = ("1", "51", "90")


def _write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def drb_slice(tmp_path):
    """Three DeepResearch Bench tasks: the Claude reports as agent "claude", a shortened
    variant as agent "short", and the first half of each Claude report as reference."""
    reports = _write_jsonl(tmp_path / "reports.claude.jsonl",
                           [{"id": int(t), "prompt": TASKS[t]["prompt"], "article": REPORTS[t]} for t in SLICE])
    short = _write_jsonl(tmp_path / "reports.short.jsonl",
                         [{"id": int(t), "prompt": TASKS[t]["prompt"], "article": REPORTS[t][: len(REPORTS[t]) // 4]}
                          for t in SLICE])
    refs = _write_jsonl(tmp_path / "refs.jsonl",
                        [{"id": int(t), "prompt": TASKS[t]["prompt"], "article": REPORTS[t][: len(REPORTS[t]) // 2]}
                         for t in SLICE])
    return {"reports": reports, "short": short, "refs": refs, "tasks": DATA / "tasks.jsonl"}


def _cli(argv, monkeypatch) -> int:
    from drscore.cli import main

    monkeypatch.setenv("CI", "1")
    return main([str(a) for a in argv])


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "scores.jsonl").read_text(encoding="utf-8").splitlines()]


def test_run_race_and_ace_offline_then_rescore_the_stored_verdicts(drb_slice, tmp_path, monkeypatch):
    from drscore.commands.race import rescore_file

    out = tmp_path / "run"
    code = _cli(["run", "--methods", "race,ace", "--reports", drb_slice["reports"], "--tasks", drb_slice["tasks"],
                 "--references", drb_slice["refs"], "--criteria", CRITERIA, "--cache", tmp_path / "cache",
                 "--out", out], monkeypatch)
    assert code == 0
    rows = _rows(out)
    race = {r["task_id"]: r for r in rows if r["method"] == "race"}
    ace = {r["task_id"]: r for r in rows if r["method"] == "ace"}
    assert set(race) == set(ace) == set(SLICE)
    table = load_criteria(CRITERIA)
    for tid, r in race.items():
        assert r["status"] == "ok" and r["judge"] == "offline"
        assert r["score"] > 50  # the full report against its own first half
        assert set(r["subscores"]) == set(DIMENSIONS)
        assert r["judged"] == r["expected"] == table[tid].n_criteria and r["coverage"] == 1.0
        assert r["calls"] == 1  # criteria file: one scoring call per report
    for r in ace.values():
        assert r["status"] == "ok" and 0 <= r["score"] <= 10 and 3 <= r["expected"] <= 6
        assert r["calls"] == r["expected"] + 1

    # The race_score verdicts in verdicts.jsonl re-score to the same numbers.
    verdicts = [json.loads(line) for line in (out / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
    stored = [{"id": v["task_id"], "judgement": v["verdict"]} for v in verdicts
              if v["template"] in ("race_score", "race_score_zh")]
    assert len(stored) == 3
    # The Chinese task was judged with the Chinese template, recorded in its verdict.
    by_task = {v["task_id"]: v["template"] for v in verdicts if v["template"].startswith("race_score")}
    assert {t: by_task[t] for t in SLICE} == {t: "race_score_zh" if int(t) <= 50 else "race_score" for t in SLICE}
    judgements = _write_jsonl(tmp_path / "judgements.jsonl", stored)
    rescored, errors = rescore_file(CRITERIA, judgements, io.BytesIO())
    assert errors == []
    for row in rescored:
        r = race[row["id"]]
        assert 100 * row["overall_score"] == pytest.approx(r["score"], abs=1e-4)
        assert {d: 100 * row[d] for d in DIMENSIONS} == pytest.approx(r["subscores"], abs=1e-4)


def test_task_level_steps_are_paid_once_per_task(drb_slice, tmp_path, monkeypatch):
    from drscore.judge.mock.server import MockConfig, MockServerProcess

    out = tmp_path / "run"
    argv = ["run", "--methods", "race,ace", "--reports", drb_slice["reports"], "--reports", drb_slice["short"],
            "--tasks", drb_slice["tasks"], "--references", drb_slice["refs"], "--cache", tmp_path / "cache",
            "--out", out]
    with MockServerProcess(MockConfig(latency=0.01, seed=3)) as mock:
        code = _cli([*argv, "--judge-url", mock.url, "--judge-model", "mock"], monkeypatch)
        stats = mock.stats()
    assert code in (0, 3)
    rows = _rows(out)
    assert len(rows) == 12
    ace_items = sum(r["expected"] for r in rows if r["method"] == "ace")
    # Per task: 5 weight samples + 4 criteria calls (RACE) and 1 checklist (ACE), shared by
    # both agents; per report: 1 RACE scoring call and one ACE call per checklist item.
    assert stats["ok"] == stats["distinct_requests"] == 3 * (5 + 4) + 6 * 1 + 3 * 1 + ace_items
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["totals"]["calls"] == stats["ok"]
    assert summary["totals"]["cache_hits"] + summary["totals"]["shared_in_flight"] > 0


def test_offline_judge_ranks_short_reports_below_their_references(drb_slice, tmp_path, monkeypatch):
    out = tmp_path / "run"
    code = _cli(["run", "--methods", "race", "--reports", drb_slice["reports"], "--reports", drb_slice["short"],
                 "--tasks", drb_slice["tasks"], "--references", drb_slice["refs"], "--out", out], monkeypatch)
    assert code == 0
    rows = _rows(out)
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows)
    # A quarter of the report against its first half loses; the full report wins.
    assert all((r["score"] < 50) == (r["agent"] == "short") for r in rows)
    # Offline answers are not cached across runs, but within a run a repeated request is
    # answered once: per task 5 weight samples + 4 criteria calls are shared by both agents,
    # and each report adds its own scoring call. 3 tasks x 9 + 6 reports x 1 = 33.
    assert all(r["calls"] + r["cache_hits"] == 10 for r in rows)
    assert sum(r["calls"] for r in rows) == 3 * 9 + 6


def test_run_race_and_ace_against_the_mock_judge(drb_slice, tmp_path, monkeypatch):
    from drscore.judge.mock.server import MockConfig, MockServerProcess

    out = tmp_path / "run"
    with MockServerProcess(MockConfig(seed=5)) as mock:
        code = _cli(["run", "--methods", "race,ace", "--reports", drb_slice["reports"], "--tasks", drb_slice["tasks"],
                     "--references", drb_slice["refs"], "--judge-url", mock.url, "--judge-model", "mock",
                     "--cache", tmp_path / "cache", "--out", out], monkeypatch)
        served = mock.stats()["ok"]
    rows = _rows(out)
    assert len(rows) == 6
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert served == summary["totals"]["calls"] > 0
    for r in rows:
        assert r["judge"] == "mock"
        if r["method"] == "race":
            # The mock fills the schema with random text: criterion names do not match the
            # generated criteria, so rows are scored (mean weights) but marked partial.
            assert r["status"] in ("ok", "partial"), r["errors"]
            assert 0 <= r["score"] <= 100 and set(r["subscores"]) == set(DIMENSIONS)
            assert r["judged"] <= r["expected"]
            if r["status"] == "partial":
                assert any("not matched" in e or "missing" in e for e in r["errors"])
        elif r["status"] == "ok":
            assert 0 <= r["score"] <= 10 and 3 <= r["expected"] <= 6 and r["judged"] == r["expected"]
        else:  # random checklist texts may repeat: the documented rejection, with its reason
            assert r["status"] == "failed" and r["errors"][0].startswith("checklist:")
    assert code in (0, 3)


def test_dry_run_over_every_report_of_the_slice(tmp_path, monkeypatch, capsys):
    # The 21 reports of tests/data (all 100 tasks are in the task file; a task without a
    # report is not an item).
    reports = DATA / "reports.claude-3-7-sonnet.jsonl"
    base = ["run", "--dry-run", "--json", "--methods", "race", "--criteria", CRITERIA, "--reports", reports,
            "--tasks", DATA / "tasks.jsonl", "--references", reports, "--price-as", "gemini-2.5-pro",
            "--cache", tmp_path / "cache"]
    assert _cli(base, monkeypatch) == 0
    summary = json.loads(capsys.readouterr().out)
    totals = summary["totals"]
    # Criteria file: one call per report, nothing sent.
    assert totals["planned_calls"] == 21 and totals["calls"] == 0
    assert summary["per_method"]["race"]["statuses"] == {"ok": 21}
    assert totals["planned_input_tokens"] > 21 * 5000 and totals["planned_cost_usd"] > 0
    # A small input budget: the dry run shows how many items would hit it.
    assert _cli([*base, "--race-context-tokens", "20000"], monkeypatch) == 3
    tight = json.loads(capsys.readouterr().out)
    statuses = tight["per_method"]["race"]["statuses"]
    assert statuses.get("failed:context", 0) > 0
    assert tight["totals"]["planned_calls"] + statuses["failed:context"] == 21


async def test_default_draws_five_weight_samples_as_the_benchmark():
    five = WEIGHT_SAMPLES + [
        {"comprehensiveness": 0.25, "insight": 0.25, "instruction_following": 0.25, "readability": 0.25},
        {"comprehensiveness": 0.1, "insight": 0.2, "instruction_following": 0.3, "readability": 0.4}]
    answers = {**CANNED, "race_weights": lambda variables, sample: {"rationale": "r", **five[sample]}}
    ctx = FakeContext(_task(), _report(), answers)
    r = await Race({"race_clean": "none"}).score(ctx)
    assert sorted(c[2] for c in ctx.calls if c[0] == "race_weights") == [0, 1, 2, 3, 4]
    # comp: (0.4 + 0.2 + 0.3 + 0.25 + 0.1) / 5 = 0.25; readability (0.1 + 0.2 + 0.3 + 0.25 + 0.4) / 5 = 0.25
    assert r.details["weight_samples"] == 5
    assert r.details["dimension_weights"]["comprehensiveness"] == pytest.approx(0.25)
    assert r.details["dimension_weights"]["readability"] == pytest.approx(0.25)


def test_scoring_prompt_says_nothing_about_the_order_of_the_reports():
    from drscore import prompts

    text = " ".join(body for _, body in prompts.load("race_score").sections).lower()
    assert "order" not in text.replace("in the order given", "")
    assert "position" not in text


async def test_criteria_entry_for_the_same_id_but_another_prompt_is_partial():
    task = Task(task_id="51", prompt="A different question that shares only the id.", reference="REF " * 100)
    ctx = FakeContext(task, _report("TARGET " * 100, tid="51"))
    r = await Race({"criteria": str(CRITERIA), "race_clean": "none"}).score(ctx)
    assert r.score is not None and r.status == "partial"
    assert r.errors[0].startswith("criteria_prompt_differs: ") and "'51'" in r.errors[0]
    same = await Race({"criteria": str(CRITERIA), "race_clean": "none"}).score(
        FakeContext(Task(task_id="51", prompt=TASKS["51"]["prompt"], reference="REF " * 100),
                    _report("TARGET " * 100, tid="51")))
    assert same.status == "ok"
