"""Task ids numbered 0, 1, 2, ... in the order first seen, held compactly.

A run keeps, for its intervals and paired comparisons, each scored row's task as a small
integer, and the map from task id to that integer. As a dict and a list that map costs
about 140 bytes a task (the id string, a dict entry, a boxed int, a list slot): 14 MB at
100,000 tasks, most of what still grew with the number of tasks once the tasks themselves
were no longer held (:mod:`drscore.engine.runtime.task_index`). Here an id costs its UTF-8
bytes plus about 24: its end offset and hash in typed arrays, and an open-addressing table
of 4-byte slots kept at most half full.
"""
from __future__ import annotations

from array import array
from collections.abc import Iterator

import numpy as np

_EMPTY = -1


class TaskIds:
    """``task_id -> index`` (:meth:`index` numbers a new id) and ``index -> task_id``."""

    __slots__ = ("_blob", "_ends", "_hashes", "_slots", "_mask")

    def __init__(self) -> None:
        self._blob = bytearray()  # every id's UTF-8 bytes, one after another
        self._ends = array("Q")  # where id i ends in _blob
        self._hashes = array("q")  # hash of id i: compared before its bytes, and used to grow
        self._slots = array("i", [_EMPTY]) * 8  # an index, or _EMPTY; the size a power of two
        self._mask = 7

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, ix: int) -> str:
        """The id numbered ``ix``."""
        if not 0 <= ix < len(self._ends):
            raise IndexError(ix)
        start = self._ends[ix - 1] if ix else 0
        return self._blob[start:self._ends[ix]].decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        """The ids in index order."""
        return (self[i] for i in range(len(self._ends)))

    def _find(self, task_id: str, h: int) -> tuple[int, int]:
        """(the id's index or _EMPTY, the slot it is in or would go in)."""
        slots, mask, hashes = self._slots, self._mask, self._hashes
        encoded: bytes | None = None
        i = h & mask
        while True:
            ix = slots[i]
            if ix == _EMPTY:
                return _EMPTY, i
            if hashes[ix] == h:
                if encoded is None:
                    encoded = task_id.encode("utf-8")
                start = self._ends[ix - 1] if ix else 0
                if self._blob[start:self._ends[ix]] == encoded:
                    return ix, i
            i = (i + 1) & mask  # linear probing

    def get(self, task_id: str) -> int | None:
        """The id's index, or None when it was never numbered."""
        ix, _ = self._find(task_id, hash(task_id))
        return None if ix == _EMPTY else ix

    def index(self, task_id: str) -> int:
        """The id's index, numbering it (the next integer) the first time it is seen."""
        h = hash(task_id)
        ix, slot = self._find(task_id, h)
        if ix != _EMPTY:
            return ix
        ix = len(self._ends)
        self._blob += task_id.encode("utf-8")
        self._ends.append(len(self._blob))
        self._hashes.append(h)
        self._slots[slot] = ix
        if 2 * (ix + 1) > len(self._slots):  # keep the table at most half full: short probes
            self._grow()
        return ix

    def natural_ranks(self) -> np.ndarray:
        """Each index's position in natural task order: numeric ids in numeric order, then
        the others by their text (as :func:`natural_key`; ties keep the order first seen).
        Sorted in numpy over the ids' bytes, not over a key tuple a task: those tuples and
        the id strings they hold cost more than the map."""
        n = len(self._ends)
        numeric = np.zeros(n, dtype=bool)
        value = np.zeros(n, dtype=np.int64)
        ends = np.frombuffer(self._ends, dtype=np.uint64).astype(np.int64) if n else np.zeros(0, np.int64)
        starts = np.concatenate(([0], ends[:-1])) if n else ends
        lengths = ends - starts
        width = int(lengths.max()) if n else 0
        fallback = width * n > 2**26 or b"\x00" in self._blob  # an id past this size, or with a NUL: keys in Python
        for i in range(n):
            number = _number(self[i])
            if number is not None:
                if number >= 2**63:
                    fallback = True
                    break
                numeric[i], value[i] = True, number
        if fallback:
            rank = np.empty(n, dtype=np.int64)
            by_key = sorted(range(n), key=lambda i: natural_key(self[i]))
            rank[by_key] = np.arange(n)
            return rank
        # every id's bytes in a row of ``width`` (NUL-padded: UTF-8 byte order is code point
        # order, and a shorter id sorts first); numeric ids' rows left empty, so they tie there
        text = np.zeros((n, max(1, width)), dtype=np.uint8)
        blob = np.frombuffer(bytes(self._blob), dtype=np.uint8)
        rows = np.repeat(np.arange(n), lengths)
        cols = np.arange(len(blob)) - np.repeat(starts, lengths)
        keep = ~numeric[rows]
        text[rows[keep], cols[keep]] = blob[keep]
        keys = text.view(f"S{max(1, width)}").ravel()
        order = np.lexsort((keys, value, ~numeric))  # stable: ties keep the order first seen
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)
        return rank

    def _grow(self) -> None:
        size = 2 * len(self._slots)
        slots, mask = array("i", [_EMPTY]) * size, size - 1
        for ix, h in enumerate(self._hashes):
            i = h & mask
            while slots[i] != _EMPTY:
                i = (i + 1) & mask
            slots[i] = ix
        self._slots, self._mask = slots, mask


def _number(task_id: str) -> int | None:
    """The id's number when it is all digits (a superscript digit is a digit int() refuses)."""
    if not task_id.isdigit():
        return None
    try:
        return int(task_id)
    except ValueError:
        return None


def natural_key(task_id: str) -> tuple[int, int | str]:
    """Sort key for task ids: numeric ids in numeric order ("2" before "10"), then the
    others by their text."""
    number = _number(task_id)
    return (0, number) if number is not None else (1, task_id)
