"""Methods declared in a TOML file: the file read and checked (every problem named with
file, line and field), the verdict type built from it, the score computed by hand."""
from __future__ import annotations

import asyncio
import re

import msgspec
import pytest

import drscore.engine.methods as registry
from drscore.api import load_user_methods
from drscore import prompts
from drscore.engine.methods.method_file import scoring
from drscore.engine.methods.method_file.method import load
from drscore.engine.methods.method_file.spec import MethodFileError, read
from drscore.engine.runtime.calls.verdicts import schema_of
from drscore.engine.runtime.models import Task
from support.data import ROOT
from support.fakes import FakeContext

EXAMPLE = ROOT / "examples" / "clarity_rubric.toml"

GOOD = '''name = "{name}"
description = "test rubric"
task_fields = ["audience"]

[prompt]
text = """
---
max_tokens: 400
---
## system
You grade.
## user
For ${{audience}}: ${{question}}
${{report}}
"""

[verdict]
why = {{ type = "text" }}
depth = {{ type = "int", min = 1, max = 5 }}
ratio = {{ type = "float", min = 0, max = 2 }}
sourced = {{ type = "bool" }}
claims = {{ type = "labels", labels = ["supported", "partly", "unsupported"] }}

[score]
{score}
'''


def _write(tmp_path, text: str, name: str = "m.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_shipped_example_reads_as_documented():
    spec = read(EXAMPLE)
    assert spec.name == "clarity-rubric"
    assert [(f.name, f.type) for f in spec.fields] == [
        ("justification", "text"), ("clarity", "int"), ("sourcing", "int"), ("actionability", "int"),
        ("answers_request", "bool"), ("verdict", "label")]
    assert spec.score.kind == "weights" and dict(spec.score.weights) == {"clarity": 1, "sourcing": 2,
                                                                         "actionability": 1}
    assert spec.score.scale == (0.0, 1.0)
    assert [p.language for p in spec.prompts] == ["", "zh"]
    assert spec.prompts[0].template.variables == {"topic", "question", "report"}


def test_the_verdict_schema_carries_ranges_labels_and_order(tmp_path):
    cls = load(_write(tmp_path, GOOD.format(name="schema-t", score='field = "depth"')))
    schema = schema_of(cls.verdict)
    assert list(schema["properties"]) == ["why", "depth", "ratio", "sourced", "claims"]
    assert schema["properties"]["depth"] == {"type": "integer", "minimum": 1, "maximum": 5}
    assert schema["properties"]["ratio"] == {"type": "number", "minimum": 0.0, "maximum": 2.0}
    assert schema["properties"]["claims"]["items"]["enum"] == ["partly", "supported", "unsupported"]
    assert schema["required"] == ["why", "depth", "ratio", "sourced", "claims"]
    assert schema["additionalProperties"] is False
    with pytest.raises(msgspec.ValidationError):  # out of range: the pool re-asks such an answer
        msgspec.convert({"why": "", "depth": 6, "ratio": 1, "sourced": True, "claims": []}, cls.verdict)


ANSWER = {"why": "ok", "depth": 4, "ratio": 0.5, "sourced": True, "claims": ["supported", "partly", "unsupported",
                                                                              "supported"]}


@pytest.mark.parametrize("score, expected", [
    ('field = "depth"', 4.0),  # default scale: the field's own 1-5 range, the value itself
    ('field = "depth"\nscale = [0, 100]', 75.0),  # (4 - 1) / (5 - 1) = 0.75 of 0-100
    ('field = "sourced"', 1.0),
    # fractions: depth 3/4, ratio 0.5/2 = 1/4, sourced 1; weighted (3 * 0.75 + 1 * 0.25 + 4 * 1) / 8
    ('weights = { depth = 3, ratio = 1, sourced = 4 }', (3 * 0.75 + 0.25 + 4) / 8),
    ('share = { fields = ["claims"], of = ["supported"] }', 2 / 4),
    ('share = { fields = ["claims"], of = { supported = 1, partly = 0.5 } }', (1 + 0.5 + 0 + 1) / 4),
    ('share = { fields = ["claims"], of = ["supported"] }\nscale = [0, 10]', 5.0),
])
def test_scores_by_hand(tmp_path, score, expected):
    spec = read(_write(tmp_path, GOOD.format(name="by-hand", score=score)))
    assert scoring.row_score(spec, ANSWER) == pytest.approx(expected)


def test_subscores_and_details(tmp_path):
    spec = read(_write(tmp_path, GOOD.format(name="subs", score='field = "depth"')))
    assert scoring.subscores(spec, ANSWER) == {"depth": 4.0, "ratio": 0.5, "sourced": 1.0}
    assert scoring.details(spec, ANSWER) == {"why": "ok", "claims": ANSWER["claims"]}
    spec = read(_write(tmp_path, GOOD.format(name="subs", score='field = "depth"\nsubscores = ["ratio"]')))
    assert scoring.subscores(spec, ANSWER) == {"ratio": 0.5}
    assert "depth" in scoring.details(spec, ANSWER)


def test_the_method_asks_once_and_scores_the_answer(tmp_path):
    cls = load(_write(tmp_path, GOOD.format(name="asks-once", score='weights = { depth = 1, sourced = 1 }')))
    registry.register(cls, f"file {tmp_path / 'm.toml'}")
    seen = []

    def judge(template, variables, label):
        seen.append((template, variables))
        return ANSWER

    ctx = FakeContext("THE REPORT", script=judge)
    ctx.task = Task(task_id="t1", prompt="THE QUESTION", fields={"audience": {"role": "CFO"}})
    result = asyncio.run(cls().score(ctx))
    assert seen == [("asks-once", {"audience": '{"role":"CFO"}', "question": "THE QUESTION",
                                   "report": "THE REPORT"})]
    assert result.score == pytest.approx((0.75 + 1.0) / 2) and result.status == "ok"
    assert (result.judged, result.expected) == (1, 1)
    # a task without the field the template uses: skipped, with the reason, nothing asked
    ctx.task = Task(task_id="t2", prompt="Q")
    result = asyncio.run(cls().score(ctx))
    assert result.status == "skipped" and "no field 'audience'" in result.errors[0] and len(seen) == 1


def test_a_chinese_task_gets_the_zh_template():
    cls = load(EXAMPLE)
    registry.register(cls, f"file {EXAMPLE}")
    asked = []
    answer = {"justification": "j", "clarity": 5, "sourcing": 7, "actionability": 9, "answers_request": True,
              "verdict": "revise"}

    def judge(template, variables, label):
        asked.append(template)
        return answer

    ctx = FakeContext("报告", script=judge)
    ctx.task = Task(task_id="1", prompt="收集整理中国中产阶层的资料", language="zh", topic="Finance")
    result = asyncio.run(cls().score(ctx))
    ctx.task = Task(task_id="51", prompt="How many elderly people will there be in Japan?", topic="Finance")
    asyncio.run(cls().score(ctx))
    assert asked == ["clarity-rubric_zh", "clarity-rubric"]
    # (5-1)/9, (7-1)/9, (9-1)/9 weighted 1, 2, 1 on 0-1
    assert result.score == pytest.approx((4 / 9 + 2 * 6 / 9 + 8 / 9) / 4)
    assert result.details == {"justification": "j", "verdict": "revise", "prompt_language": "zh"}
    assert prompts.origin_of("clarity-rubric_zh") == f"file {EXAMPLE}"


# --------------------------------------------------------------------------- errors

def _error(tmp_path, text: str, name: str = "m.toml") -> str:
    with pytest.raises(MethodFileError) as info:
        read(_write(tmp_path, text, name))
    return str(info.value)


def test_a_bad_type_is_named_with_file_line_and_field(tmp_path):
    text = GOOD.format(name="bad", score='field = "depth"').replace("max = 5", 'max = "five"')
    msg = _error(tmp_path, text)
    line = text.splitlines().index('depth = { type = "int", min = 1, max = "five" }') + 1
    assert msg == f"{tmp_path / 'm.toml'}:{line}: verdict.depth.max: must be a whole number, got a string ('five')"
    text = GOOD.format(name="bad", score='field = "depth"').replace('type = "bool"', 'type = "boolean"')
    assert re.search(r"m\.toml:\d+: verdict\.sourced\.type: must be one of int, float, bool, label, labels, text, "
                     r"got a string \('boolean'\)", _error(tmp_path, text))


def test_an_unknown_template_variable_is_named_where_it_is(tmp_path):
    text = GOOD.format(name="var", score='field = "depth"').replace("${question}", "${questoin}")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "${questoin}" in t)
    msg = _error(tmp_path, text)
    assert msg.startswith(f"{tmp_path / 'm.toml'}:{line}: prompt.text: unknown template variable ${{questoin}}; "
                          "did you mean ${question}?")
    # in a template file: its own file and line
    (tmp_path / "t.md").write_text("## system\nx\n## user\n${report}\n${audiense}\n", encoding="utf-8")
    text = GOOD.format(name="var", score='field = "depth"')
    text = text[:text.index("[prompt]")] + 'prompt = "t.md"\n' + text[text.index("[verdict]"):]
    msg = _error(tmp_path, text)
    assert msg.startswith(f"{tmp_path / 't.md'}:5: prompt.file: unknown template variable ${{audiense}}; "
                          "did you mean ${audience}?")


def test_a_score_field_missing_from_the_verdict(tmp_path):
    text = GOOD.format(name="miss", score='field = "overall"')
    line = text.splitlines().index('field = "overall"') + 1
    assert _error(tmp_path, text) == (f"{tmp_path / 'm.toml'}:{line}: score.field: score field 'overall' is not "
                                      "in [verdict] (fields: why, depth, ratio, sourced, claims)")
    text = GOOD.format(name="miss", score="weights = { depth = 1, dept = 2 }")
    assert re.search(r":\d+: score\.weights\.dept: score field 'dept' is not in \[verdict\]", _error(tmp_path, text))
    text = GOOD.format(name="miss", score='share = { fields = ["claims"], of = ["yes"] }')
    assert "score.share.of: label 'yes' is not among the labels of claims" in _error(tmp_path, text)


@pytest.mark.parametrize("change, expected", [
    (lambda t: t.replace('name = "x"', 'nmae = "x"'), r"m\.toml:1: nmae: unknown key; did you mean 'name'\?"),
    (lambda t: t.replace("[score]", "[score\n"), r"m\.toml:\d+: not valid TOML"),
    (lambda t: t.replace("${report}", "(no report)"), r"prompt\.text: the template never shows the judge the report"),
    (lambda t: t.replace('min = 1, max = 5', 'min = 5, max = 1'), r"verdict\.depth\.max: must be above min"),
    (lambda t: t.replace(', labels = ["supported", "partly", "unsupported"]', ''),
     r"verdict\.claims: a labels field needs labels"),
    (lambda t: t.replace('field = "depth"', 'field = "why"'), r"score\.field: field 'why' is text"),
    (lambda t: t.replace('field = "depth"', 'field = "depth"\nweights = { depth = 1 }'),
     r"score: give exactly one of .* \(got field, weights\)"),
    (lambda t: t.replace('name = "x"', 'name = "no spaces please"'), r"m\.toml:1: name: 'no spaces please': a name"),
    (lambda t: t.replace("max_tokens: 400", "max_tokens: lots"), r"m\.toml:8: prompt\.text: max_tokens must be a number"),
])
def test_other_problems_name_their_line_and_field(tmp_path, change, expected):
    assert re.search(expected, _error(tmp_path, change(GOOD.format(name="x", score='field = "depth"'))))


def test_a_name_taken_by_a_built_in_method_or_template(tmp_path):
    with pytest.raises(MethodFileError, match=r"m\.toml:1: name: method name 'quality' is taken by a built-in "
                                              r"method; choose another name"):
        registry.load_method_file(_write(tmp_path, GOOD.format(name="quality", score='field = "depth"')))
    with pytest.raises(MethodFileError, match=r"m\.toml:1: name: template name 'ace_item' is taken by a built-in "
                                              r"template"):
        registry.load_method_file(_write(tmp_path, GOOD.format(name="ace_item", score='field = "depth"')))
    assert "ace_item" not in registry.available()
    # two files of one run may not define one name; in one process, a later run's file replaces
    a = _write(tmp_path, GOOD.format(name="held", score='field = "depth"'), "a.toml")
    b = _write(tmp_path, GOOD.format(name="held", score='field = "ratio"'), "b.toml")
    with pytest.raises(ValueError, match=r"b\.toml: method name 'held' is defined by .*a\.toml too"):
        load_user_methods([a, b])
    load_user_methods([a])
    assert registry.get("held").spec.score.weights == (("depth", 1.0),)
    assert registry.origin("held") == f"file {a}"
