"""Rubric parsing and bundle loading (engine.rubrics), on hand cases and real bundles (the
tests/data slice; bench/full_data.py checks all 214)."""
from __future__ import annotations


import orjson
import pytest

from drscore.engine.methods.rigorous.rubrics import (
    DEFAULT_GENERAL_RUBRICS,
    STANDARD_QSR_MAX,
    RubricError,
    default_general_rubrics,
    load_bundles,
    load_general_rubrics,
    parse_bundle,
    parse_rubric_item,
)
from support.data import RIGOROUS as DATA


def _pairs(item):
    return [(c.label, c.points) for c in item.choices]


def test_binary_item():
    item = parse_rubric_item("Does the report define QUIC? Yes=2, No=0")
    assert item.question == "Does the report define QUIC?"
    assert _pairs(item) == [("Yes", 2), ("No", 0)]
    assert item.max_points == 2 and item.min_points == 0
    assert item.points_for("No") == 0


def test_partial_with_trailing_condition_and_period():
    item = parse_rubric_item(
        "Does it compare A and B? Yes=3, Partial=1 (if only one side is covered), No=0.")
    assert item.question == "Does it compare A and B?"
    assert _pairs(item) == [("Yes", 3), ("Partial", 1), ("No", 0)]
    assert item.choices[1].condition == "if only one side is covered"


def test_fullwidth_condition_containing_equals_and_commas():
    # The "=" and "," inside the full-width parentheses must not split entries.
    item = parse_rubric_item(
        "Does it state N_schools=7, with the URL? Yes=2, Partial（definition=missing form, or URL）=1, No=0")
    assert item.question == "Does it state N_schools=7, with the URL?"
    assert _pairs(item) == [("Yes", 2), ("Partial", 1), ("No", 0)]
    assert item.choices[1].condition == "definition=missing form, or URL"


def test_points_range_expands_to_one_label_per_value():
    item = parse_rubric_item("Does it list the four advantages? Full=4, Partial (1–3)=1–3, No=0.")
    assert _pairs(item) == [("Full", 4), ("Partial-3", 3), ("Partial-2", 2), ("Partial-1", 1), ("No", 0)]
    assert item.choices[2].condition == "1–3"


def test_inverted_item_keeps_labels_with_their_points():
    item = parse_rubric_item("Does it avoid listing results? No=3, Partial=1 (brief mention), Yes=0")
    assert _pairs(item) == [("No", 3), ("Partial", 1), ("Yes", 0)]
    assert item.max_points == 3


def test_two_word_label_and_condition_before_equals():
    item = parse_rubric_item(
        "Does it explain the offer? Full detail=6, Partial (mentions at least two aspects, e.g., x + y)=3, No=0")
    assert _pairs(item) == [("Full detail", 6), ("Partial", 3), ("No", 0)]
    assert item.question == "Does it explain the offer?"


def test_question_keeps_its_own_equals_signs():
    item = parse_rubric_item("Is PaybackMonths = CAC / GrossProfit shown? Yes=1, No=0")
    assert item.question == "Is PaybackMonths = CAC / GrossProfit shown?"
    assert _pairs(item) == [("Yes", 1), ("No", 0)]


@pytest.mark.parametrize("text, message", [
    ("Does the report define QUIC?", "no allowed values"),
    ("Does it? Yes=2, Yes=1, No=0", "appears twice"),
    ("Does it? Yes=2", "only one allowed value"),
    ("Yes=2, No=0", "no question"),
    ("", "empty"),
])
def test_bad_items_are_rejected_with_a_reason(text, message):
    with pytest.raises(RubricError, match=message):
        parse_rubric_item(text)


def test_published_bundles_parse():
    # The slice in tests/data keeps 14 of the 214 bundles, chosen to hold every label
    # shape and every non-standard maximum (bench/full_data.py checks all 214).
    raw = [orjson.loads(line) for line in (DATA / "bundles.jsonl").read_bytes().splitlines()]
    bs = load_bundles(DATA / "bundles.jsonl")
    assert bs.errors == []
    assert list(bs.bundles) == [r["uid"] for r in raw] and len(raw) == 14
    labels_seen = set()
    n_items = 0
    for b in bs.bundles.values():
        assert len(b.qsr) >= 8 and len(b.fak) == 5 and len(b.fdk) == 5
        for item in b.qsr:
            n_items += 1
            labels_seen.update(item.labels)
            assert item.min_points == 0 and item.max_points > 0
            assert item.question and "=" not in item.question[-6:]
    assert n_items == sum(len(r["qsr"]) for r in raw)
    assert labels_seen == {"Yes", "No", "Partial", "Full", "Full detail", "Partial-1", "Partial-2", "Partial-3"}
    # Bundles whose real QSR maximum is not the documented 30 (docs/rigorous.md lists them).
    assert bs.nonstandard() == {"09208": 31, "06356": 29, "10502": 22, "02701": 31, "05705": 29, "10707": 28}
    assert sum(1 for b in bs.bundles.values() if b.qsr_max == STANDARD_QSR_MAX) == 14 - 6
    # Domain codes are the uid prefix.
    assert all(b.domain == uid[:2] for uid, b in bs.bundles.items())
    assert sorted({b.domain for b in bs.bundles.values()}) == ["00", "02", "03", "05", "06", "07", "08", "09", "10"]


def test_real_bundle_07001_in_detail():
    b = load_bundles(DATA / "bundles.jsonl").bundles["07001"]
    assert b.domain == "07"
    assert len(b.qsr) == 17 and b.qsr_max == 30  # 13 items x 2 + 4 items x 1 = 30
    assert b.tsl[0] == "https://www.rfc-editor.org/rfc/rfc8999"
    assert b.fak == ("0-RTT", "TLS 1.3", "Long Header", "Probe Timeout", "NewReno")


def test_benchmark_general_rubrics_file():
    items = load_general_rubrics(DATA / "general_rubrics.json")
    assert len(items) == 48
    assert sum(i.max_points for i in items) == 73
    assert all(i.labels == ("Yes", "No") for i in items)


def test_default_general_rubrics_are_the_projects_own():
    items = default_general_rubrics()
    assert len(items) == len(DEFAULT_GENERAL_RUBRICS) == 30
    assert sum(i.max_points for i in items) == 50
    bench = {i.question for i in load_general_rubrics(DATA / "general_rubrics.json")}
    assert not bench & {i.question for i in items}


def test_bad_bundle_lines_name_file_and_line(tmp_path):
    good = orjson.loads((DATA / "bundles.jsonl").read_bytes().splitlines()[0])
    broken = dict(good, uid="99999", qsr=["Does it? Yes=2, No=0", "Is this scored?"])
    path = tmp_path / "b.jsonl"
    path.write_bytes(b"\n".join([
        orjson.dumps(good), b"{not json", orjson.dumps(broken), orjson.dumps(good), b"",
        orjson.dumps({"uid": "1", "query": "q", "qsr": "nope"}),
    ]) + b"\n")
    bs = load_bundles(path)
    assert list(bs.bundles) == ["07001"]
    msgs = [str(e) for e in bs.errors]
    assert msgs[0].startswith(f"{path}:2: malformed JSON")
    assert msgs[1] == f"{path}:3: qsr[1]: no allowed values (like 'Yes=2, No=0') at the end of: 'Is this scored?'"
    assert msgs[2] == f"{path}:4: duplicate bundle uid '07001'"
    assert msgs[3] == f"{path}:6: field 'qsr' must be a list of strings"
    assert bs.errors_by_uid["99999"].startswith(f"{path}:3: qsr[1]")


def test_missing_bundle_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="bundles file not found"):
        load_bundles(tmp_path / "nope.jsonl")


def test_parse_bundle_accepts_numeric_uid_and_checks_fields():
    b = parse_bundle({"uid": 7, "query": "q?", "qsr": ["A? Yes=1, No=0"], "tsl": [], "fak": ["x"], "fdk": []})
    assert b.uid == "7" and b.qsr_max == 1
    with pytest.raises(RubricError, match="field 'fak' is empty"):
        parse_bundle({"uid": "1", "query": "q", "qsr": ["A? Yes=1, No=0"], "tsl": [], "fak": [], "fdk": []})


def test_general_rubrics_max_points_must_match(tmp_path):
    path = tmp_path / "g.json"
    path.write_bytes(orjson.dumps([{"rule": "A? Yes=2, No=0", "max_points": 2},
                                   {"rule": "B? Yes=1, No=0", "max_points": 2}]))
    with pytest.raises(RubricError, match=r"item \[1\]: max_points is 2 but the rule's allowed values give 1"):
        load_general_rubrics(path)
    path.write_bytes(orjson.dumps(["A? Yes=2, No=0", "B? Yes=1, Partial=0.5, No=0"]))
    items = load_general_rubrics(path)
    assert [i.max_points for i in items] == [2, 1] and items[1].choices[1].points == 0.5
