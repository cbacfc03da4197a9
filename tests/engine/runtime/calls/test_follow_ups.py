"""A dry run's follow-up calls: the list length learned from recorded answers (or the
published figure), whole lengths that keep the mean, the error bar, and resized answers
the method still accepts."""
from __future__ import annotations

import math

import orjson
import pytest

from drscore.engine.methods.ace import CHECKLIST, AceChecklist, repair_checklist
from drscore.engine.runtime.calls.follow_ups import AnswerList, ListLength, list_lengths, resized
from drscore.engine.runtime.calls.verdicts import decode_verdict


def test_a_learned_length_counts_what_the_method_keeps():
    # ACE keeps at most 6 items: a checklist of 8 is planned as 6 calls
    n = ListLength(CHECKLIST, [3, 4, 4, 3, 8], model="gpt-4.1")
    assert n.mean == pytest.approx(4.0)  # (3 + 4 + 4 + 3 + 6) / 5
    assert n.sd == pytest.approx(math.sqrt(1.5))  # squares 1, 0, 0, 1, 4 over 4
    assert n.basis == "learned from 5 answers of gpt-4.1"
    assert [n.next() for _ in range(3)] == [4, 4, 4]
    # two standard errors of the total of 10 answers' calls: spread and the mean's own uncertainty
    low, high = n.error(10)
    assert high == pytest.approx(2 * math.sqrt(1.5) * math.sqrt(1 / 10 + 1 / 5) / 4) and low == -high


def test_whole_lengths_keep_the_mean_in_total():
    n = ListLength(CHECKLIST, [3, 4])  # mean 3.5
    given = [n.next() for _ in range(4)]
    # round(3.5) = 4, round(7) - 4 = 3, round(10.5) - 7 = 4, round(14) - 11 = 3
    assert given == [4, 3, 4, 3] and sum(given) == 14
    assert n.summary()["entries_planned"] == 14 and n.summary()["answers_planned"] == 4


def test_with_nothing_recorded_the_published_figure_and_its_range():
    n = ListLength(CHECKLIST, [])
    assert n.mean == 4 and n.answers == 0 and "published protocol" in n.basis
    # the protocol allows 3-6 items: 3/4 - 1 and 6/4 - 1 of the calls that follow
    assert n.error(50) == (pytest.approx(-0.25), pytest.approx(0.5))


def test_lengths_stay_ones_the_method_accepts():
    spec = AnswerList(field="items", published=4, published_low=3, published_high=6, source="s", most=6, fewest=3)
    short = ListLength(spec, [3, 0, 0, 3])  # two rejected checklists (no calls): mean 1.5
    assert short.mean == pytest.approx(1.5)
    assert all(3 <= short.next() <= 6 for _ in range(5))


def test_lengths_read_from_recorded_answers():
    answers = [b'{"items": [1, 2, 3]}', b'{"items": []}', b'not json', b'{"other": [1]}', b'[1, 2]',
               orjson.dumps({"items": list(range(7))})]
    assert list_lengths(answers, "items") == [3, 0, 7]


def test_a_resized_checklist_is_one_ace_accepts_with_every_item():
    text = orjson.dumps({"items": [{"item": "Cover the 2023 prices", "weight": 0.5},
                                   {"item": "Compare regions", "weight": 0.3},
                                   {"item": "State the method", "weight": 0.2}]}).decode()
    longer = decode_verdict(resized(text, "items", 5), AceChecklist)
    items = repair_checklist([(i.item, i.weight) for i in longer.items])
    assert [t for t, _ in items] == ["Cover the 2023 prices", "Compare regions", "State the method",
                                     "Cover the 2023 prices (4)", "Compare regions (5)"]
    assert sum(w for _, w in items) == pytest.approx(1.0)
    shorter = orjson.loads(resized(text, "items", 2))
    assert [i["item"] for i in shorter["items"]] == ["Cover the 2023 prices", "Compare regions"]
    assert resized('{"items": []}', "items", 3) == '{"items": []}'  # nothing to copy from
