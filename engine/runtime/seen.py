"""A compact record of the (task, agent) pairs already read, for duplicate detection.

A run over a million reports used to keep a dict ``(task, agent) -> "file:line"``: two
strings, a tuple and a line string per report, about 300 bytes each. Here a pair is an
8-byte hash (BLAKE2b of the two names) and its origin an 8-byte packed (file, line):
recent pairs sit in a small dict, older ones in two sorted numpy arrays merged in
blocks, so memory is 16 bytes a report and a lookup is a dict probe plus a binary search.

Two different pairs sharing a 64-bit hash would make the second one read as a duplicate;
among a million reports the chance is about 3 in 100 million.
"""
from __future__ import annotations

import hashlib

import numpy as np

_LINE_BITS = 40  # up to 10^12 lines per file, 2^23 files
_BLOCK = 1 << 16  # pairs held in the dict before they are merged into the arrays


def _hash(task_id: str, agent: str) -> int:
    digest = hashlib.blake2b(f"{task_id}\x00{agent}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class SeenKeys:
    """``(task, agent)`` pairs seen so far, with where each was first read."""

    def __init__(self) -> None:
        self._files: list[str] = []
        self._file_ix: dict[str, int] = {}
        self._recent: dict[int, int] = {}
        self._keys = np.zeros(0, dtype=np.uint64)
        self._origins = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._recent) + int(self._keys.size)

    def first(self, task_id: str, agent: str) -> str | None:
        """Where the pair was first read (``file:line``), or None when it is new."""
        packed = self._find(_hash(task_id, agent))
        if packed is None:
            return None
        return f"{self._files[packed >> _LINE_BITS]}:{packed & ((1 << _LINE_BITS) - 1)}"

    def add(self, task_id: str, agent: str, origin: str) -> None:
        """Record the pair as read at ``origin`` (``file:line``)."""
        path, _, line = origin.rpartition(":")
        ix = self._file_ix.get(path)
        if ix is None:
            ix = self._file_ix[path] = len(self._files)
            self._files.append(path)
        self._recent[_hash(task_id, agent)] = (ix << _LINE_BITS) | int(line or 0)
        if len(self._recent) >= _BLOCK:
            self._merge()

    def _find(self, key: int) -> int | None:
        packed = self._recent.get(key)
        if packed is not None or not self._keys.size:
            return packed
        at = int(np.searchsorted(self._keys, np.uint64(key)))
        if at < self._keys.size and int(self._keys[at]) == key:
            return int(self._origins[at])
        return None

    def _merge(self) -> None:
        keys = np.concatenate([self._keys, np.fromiter(self._recent.keys(), dtype=np.uint64,
                                                       count=len(self._recent))])
        origins = np.concatenate([self._origins, np.fromiter(self._recent.values(), dtype=np.int64,
                                                             count=len(self._recent))])
        order = np.argsort(keys, kind="stable")
        self._keys, self._origins = keys[order], origins[order]
        self._recent = {}
