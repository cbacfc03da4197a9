"""A run's tasks, read from their file when a report needs one: memory flat in the number
of tasks, as it is in the number of reports.

A task file is read once at start-up, line by line, with the same checks and line-numbered
errors as :func:`drscore.engine.runtime.io.load_tasks`; what stays in memory is 24 bytes a
task (a hash of its id, where its line starts, its length and line number) in typed arrays,
not the task: a DeepResearch Bench task with its reference report is kilobytes, and a
dict of 100,000 small tasks alone was 40 MB. A lookup hashes the id, finds it by binary
search and parses that one line again (``os.pread``: no shared file position); the last
few hundred tasks looked up stay parsed, since a task's reports usually come together.
"""
from __future__ import annotations

import os
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

import numpy as np
import orjson

from drscore.engine.runtime.io import _BOM, InputFileError, open_input, task_from
from drscore.engine.runtime.models import InputError, Task


def _numbered(f: BinaryIO, path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        yield from enumerate(f, 1)
    except OSError as exc:
        raise InputFileError(f"tasks file {path}: read failed ({exc.strerror or exc})") from None


class TaskIndex(Mapping[str, Task]):
    """``{task_id: Task}`` over a task file, holding the file open (:meth:`close` it)."""

    def __init__(self, path: str | Path, errors: list[InputError], recent: int = 512) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(f"tasks file not found: {self.path}")
        hashes, offsets, lengths, linenos = array("q"), array("Q"), array("I"), array("I")
        found: list[InputError] = []
        with open_input(self.path, "tasks") as f:
            offset = 0
            for lineno, raw in _numbered(f, self.path):
                start, offset = offset, offset + len(raw)
                body = raw[len(_BOM):] if lineno == 1 and raw.startswith(_BOM) else raw
                if not body.strip():
                    continue
                origin = f"{self.path}:{lineno}"
                try:
                    task = task_from(orjson.loads(body))
                except orjson.JSONDecodeError as e:
                    found.append(InputError(origin, f"malformed JSON ({e})"))
                    continue
                if isinstance(task, str):
                    found.append(InputError(origin, task))
                    continue
                hashes.append(hash(task.task_id))
                offsets.append(start + len(raw) - len(body))
                lengths.append(len(body))
                linenos.append(lineno)
        self._fd = os.open(self.path, os.O_RDONLY)
        h = np.frombuffer(hashes, dtype=np.int64) if hashes else np.zeros(0, np.int64)
        o = np.frombuffer(offsets, dtype=np.uint64) if offsets else np.zeros(0, np.uint64)
        order = np.lexsort((o, h))  # by hash, then by place in the file
        self._hash, self._offset = h[order], o[order]
        self._length = np.frombuffer(lengths, dtype=np.uint32)[order] if lengths else np.zeros(0, np.uint32)
        self._lineno = np.frombuffer(linenos, dtype=np.uint32)[order] if linenos else np.zeros(0, np.uint32)
        keep = np.ones(len(order), dtype=bool)
        self._recent: OrderedDict[str, Task] = OrderedDict()
        self._recent_max = recent
        # A second line with an id already seen is an error, as in load_tasks; equal hashes
        # are only candidates (their ids are compared).
        same = np.flatnonzero(self._hash[1:] == self._hash[:-1]) + 1
        for i in map(int, same):
            j = i - 1
            while j >= 0 and self._hash[j] == self._hash[i]:
                if keep[j] and self._read(j).task_id == self._read(i).task_id:
                    keep[i] = False
                    task_id = self._read(i).task_id
                    found.append(InputError(f"{self.path}:{int(self._lineno[i])}", f"duplicate task id {task_id!r}"))
                    break
                j -= 1
        if not keep.all():
            self._hash, self._offset = self._hash[keep], self._offset[keep]
            self._length, self._lineno = self._length[keep], self._lineno[keep]
        # the errors in file order, as one pass would have found them
        found.sort(key=lambda e: int(e.origin.rsplit(":", 1)[1]))
        errors.extend(found)

    def _read(self, i: int) -> Task:
        raw = os.pread(self._fd, int(self._length[i]), int(self._offset[i]))
        task = task_from(orjson.loads(raw))
        assert isinstance(task, Task)  # the line was checked when the index was built
        return task

    def __getitem__(self, task_id: str) -> Task:
        task = self._recent.get(task_id)
        if task is not None:
            self._recent.move_to_end(task_id)
            return task
        h = hash(task_id)
        i = int(np.searchsorted(self._hash, h))
        while i < len(self._hash) and self._hash[i] == h:
            task = self._read(i)
            if task.task_id == task_id:
                self._recent[task_id] = task
                if len(self._recent) > self._recent_max:
                    self._recent.popitem(last=False)
                return task
            i += 1
        raise KeyError(task_id)

    def __len__(self) -> int:
        return len(self._hash)

    def __iter__(self) -> Iterator[str]:
        """Task ids in the file's order."""
        for i in np.argsort(self._offset, kind="stable"):
            yield self._read(int(i)).task_id

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            self.close()
