"""Offline rules for the rigorous, elo and leakage templates: deterministic, schema-valid."""
from __future__ import annotations

import msgspec
import pytest

from drscore.engine.methods.rigorous.method import KeywordRelevance, format_choices, rubric_verdict
from drscore.engine.methods.rigorous.rubrics import parse_rubric_item
from drscore.engine.methods.tasks.tools import Continuation, TaskPreference
from drscore.engine.runtime.calls.verdicts import schema_of
from drscore.judge.offline import rules
from drscore.judge.offline.rubrics_rigorous import (
    GENERIC_CONTINUATION,
    key_terms,
    keyword_relevance,
    label_for_coverage,
    labels_by_points,
    rubric_coverage,
    specificity,
)

REPORT = """# QUIC and TLS 1.3

QUIC was proposed by Google. The transport uses TLS 1.3 for its handshake.

## Loss recovery
- Probe timeouts replace retransmission timers.
- See [1] for details.

| RFC | Scope |
|-----|-------|
| 9000 | transport |

[1] https://www.rfc-editor.org/rfc/rfc9002
"""


def _ask(template, verdict, variables):
    return msgspec.convert(rules()[template](variables, schema_of(verdict)), verdict)


def test_key_terms_drop_rubric_boilerplate_and_stem():
    assert key_terms("Does the report explicitly mention that QUIC was proposed by Google?") == [
        "quic", "propos", "google"]


def test_rubric_coverage_counts_terms_and_structural_cues():
    # terms: quic, propos, google (all present) + the "headings" cue (the report has "#" lines)
    assert rubric_coverage("Does the report say QUIC was proposed by Google, with headings?", REPORT) == (4, 4)
    # terms: bitcoin, mining (absent); "table" cue present -> 1 of 3
    assert rubric_coverage("Does the report give a table of bitcoin mining?", REPORT) == (1, 3)


def test_label_bands():
    assert [label_for_coverage(["Yes", "No"], c) for c in (1.0, 0.51, 0.5, 0.0)] == ["Yes", "Yes", "No", "No"]
    three = ["Yes", "Partial", "No"]
    assert [label_for_coverage(three, c) for c in (0.7, 0.5, 0.3)] == ["Yes", "Partial", "No"]


def test_labels_come_from_the_rendered_choices_not_the_enum_order():
    item = parse_rubric_item("Q? No=3, Partial=1 (brief), Yes=0")
    assert labels_by_points(format_choices(item), ["Partial", "Yes", "No"]) == ["No", "Partial", "Yes"]


def test_rubric_rule_answers_an_allowed_label():
    item = parse_rubric_item("Does the report state that QUIC was proposed by Google? Yes=2, Partial=1, No=0")
    variables = {"query": "q", "report": REPORT, "rubric": item.question, "choices": format_choices(item)}
    v = _ask("rigorous_rubric", rubric_verdict(item.labels), variables)
    assert v.label == "Yes"
    item = parse_rubric_item("Does the report compare Bitcoin mining pools? Yes=2, No=0")
    v = _ask("rigorous_rubric", rubric_verdict(item.labels),
             {"query": "q", "report": REPORT, "rubric": item.question, "choices": format_choices(item)})
    assert v.label == "No"


@pytest.mark.parametrize("keyword, expected", [
    ("SPDY", 1),  # absent
    ("Google", 2),  # once, not early (first tenth = 29 chars), not in a heading
    ("TLS 1.3", 4),  # twice -> 3, in the heading -> +1
    ("QUIC", 4),  # twice ("QUIC" in heading and body) -> 3, +1
])
def test_keyword_relevance(keyword, expected):
    assert keyword_relevance(REPORT, keyword) == expected
    v = _ask("rigorous_keyword", KeywordRelevance, {"report": REPORT, "keyword": keyword})
    assert v.relevance == expected


def test_elo_rule_prefers_the_more_specific_task():
    vague = "Write about batteries."
    specific = ("Compare the cost per kWh of LFP and NMC batteries between 2015 and 2024, including at "
                "least three markets, and quantify the learning rate for each chemistry.")
    assert specificity(specific) > specificity(vague)
    a = _ask("elo_compare", TaskPreference, {"task_a": vague, "task_b": specific})
    b = _ask("elo_compare", TaskPreference, {"task_a": specific, "task_b": vague})
    assert (a.winner, b.winner) == ("B", "A")
    assert a.confidence == b.confidence and 0.5 < a.confidence <= 1.0
    tie = _ask("elo_compare", TaskPreference, {"task_a": vague, "task_b": vague})
    assert (tie.winner, tie.confidence) == ("A", 0.5)


def test_continuation_rule_is_a_fixed_baseline():
    v = _ask("leakage_continue", Continuation, {"prefix": "anything at all,"})
    assert v.continuation == GENERIC_CONTINUATION
