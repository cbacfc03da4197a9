"""The compact task-id map: numbering in first-seen order, lookups both ways, growth,
colliding hashes, and what it holds a task (against the dict and list it replaced)."""
from __future__ import annotations

import tracemalloc

import pytest

from drscore.engine.runtime import rundir_read
from drscore.engine.runtime.task_ids import TaskIds


def test_ids_are_numbered_in_the_order_first_seen_and_read_back():
    ids = TaskIds()
    assert [ids.index(t) for t in ("7", "b", "7", "统计", "b", "")] == [0, 1, 0, 2, 1, 3]
    assert len(ids) == 4
    assert [ids[i] for i in range(4)] == ["7", "b", "统计", ""]
    assert list(ids) == ["7", "b", "统计", ""]
    assert ids.get("统计") == 2 and ids.get("8") is None and len(ids) == 4  # get() numbers nothing
    with pytest.raises(IndexError):
        ids[4]


def test_growth_keeps_every_number():
    ids = TaskIds()
    n = 5000  # the table starts at 8 slots: ten doublings
    for i in range(n):
        assert ids.index(f"task-{i}") == i
    assert all(ids.get(f"task-{i}") == i for i in range(0, n, 7))
    assert ids[4321] == "task-4321" and ids.get("task-5000") is None


class _Colliding(str):
    """A task id whose hash is always the same: every lookup probes past the others."""

    def __hash__(self) -> int:
        return 12345


def test_ids_with_equal_hashes_are_told_apart_by_their_text():
    ids = TaskIds()
    names = [_Colliding(f"c{i}") for i in range(40)]
    assert [ids.index(t) for t in names] == list(range(40))
    assert [ids.get(_Colliding(f"c{i}")) for i in range(40)] == list(range(40))
    assert ids.get(_Colliding("c40")) is None
    assert ids.index(names[17]) == 17 and len(ids) == 40


def _held(build) -> int:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = build()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del kept
    return held


def test_an_id_costs_its_bytes_and_a_few_dozen_more():
    n = 50_000
    names = [f"t{i}" for i in range(n)]  # the ids exist anyway (the rows carry them)

    def compact() -> TaskIds:
        ids = TaskIds()
        for name in names:
            ids.index(name[:])
        return ids

    def as_dict() -> tuple[dict[str, int], list[str]]:
        ix: dict[str, int] = {}
        order: list[str] = []
        for i in range(n):
            name = f"t{i}"  # a row's own copy of the id, kept by the map
            ix[name] = len(order)
            order.append(name)
        return ix, order

    per_id = _held(compact) / n
    # 5 or 6 bytes of text, 8 + 8 in the typed arrays, 4-byte slots at most half full
    # (131,072 at 50,000 ids: 10.5 bytes an id), and the arrays' spare room
    assert per_id < 40
    assert _held(as_dict) / n > 3 * per_id


@pytest.mark.parametrize("extra", [[], ["nul\x00id"], ["9" * 25]], ids=["bytes", "a-nul", "past-int64"])
def test_natural_order_numbers_first_then_text_ties_as_first_seen(extra):
    seen = ["10", "b", "2", "01", "a", "1", "ä", "", "aa", "统计", "²", "A", "9", *extra]
    ids = TaskIds()
    for t in seen:
        ids.index(t)
    ranks = ids.natural_ranks()
    ordered = [ids[i] for i in sorted(range(len(ids)), key=lambda i: ranks[i])]
    # "01" and "1" are both 1: the one seen first first; text by code point ("²" is no number int() reads)
    numbers = ["01", "1", "2", "9", "10"]
    if extra == ["9" * 25]:  # a number past 64 bits: sorted in Python, still numerically
        numbers.append("9" * 25)
    texts = sorted(t for t in seen if t not in numbers)
    assert ordered == numbers + texts
    # the key readers of a run sort by (reports, the paired maps) gives the same order
    assert sorted(seen, key=rundir_read.natural_key) == ordered
