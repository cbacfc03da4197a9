"""A set of 64-bit cache-key ids held in a typed table.

The run ledger remembers every key the invocation paid for (:func:`ledger.key_id`), one
per paid call. As a Python ``set`` of ints that costs about 78 bytes a key (the boxed int
and its share of the set's table, tracemalloc at 50,000 calls); here a key costs 8 bytes in
an open-addressing table of ``array('Q')`` slots kept at most half full: 16 to 32 bytes.
The ids are already hashes (a sha256 prefix), yet a key is still mixed (Fibonacci hashing)
before it chooses its slot: keys alike in their low bits would otherwise share one probe run.
"""
from __future__ import annotations

from array import array

_EMPTY = 0  # a free slot; the key 0 itself is kept aside
_MIX = 0x9E3779B97F4A7C15  # 2^64 / the golden ratio, odd: multiplying by it permutes 64-bit keys
_U64 = (1 << 64) - 1


class KeySet:
    """``add`` and ``in`` for unsigned 64-bit integers."""

    __slots__ = ("_slots", "_mask", "_shift", "_count", "_has_zero")

    def __init__(self) -> None:
        self._slots = array("Q", [_EMPTY]) * 16
        self._mask = 15
        self._shift = 64 - 4  # the mixed key's top bits choose the slot: log2(16) of them
        self._count = 0  # keys in the table (the zero key not counted)
        self._has_zero = False

    def __len__(self) -> int:
        return self._count + self._has_zero

    def _slot(self, key: int) -> int:
        """The slot holding ``key``, or the free one it would go in."""
        slots, mask = self._slots, self._mask
        i = ((key * _MIX) & _U64) >> self._shift
        while True:
            held = slots[i]
            if held == _EMPTY or held == key:
                return i
            i = (i + 1) & mask

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, int) or not 0 <= key < 1 << 64:
            return False
        if key == _EMPTY:
            return self._has_zero
        return self._slots[self._slot(key)] == key

    def add(self, key: int) -> None:
        """Keep ``key`` (an int in [0, 2**64)); a key already kept is a no-op."""
        if not 0 <= key < 1 << 64:
            raise ValueError(f"key {key} is not an unsigned 64-bit integer")
        if key == _EMPTY:
            self._has_zero = True
            return
        i = self._slot(key)
        if self._slots[i] == key:
            return
        self._slots[i] = key
        self._count += 1
        if 2 * self._count > len(self._slots):
            self._grow()

    def _grow(self) -> None:
        old = self._slots
        self._slots = array("Q", [_EMPTY]) * (2 * len(old))
        self._mask = len(self._slots) - 1
        self._shift -= 1
        for key in old:
            if key != _EMPTY:
                self._slots[self._slot(key)] = key
