"""Lines appended to a JSON-lines record a crash may have torn (``ledger.jsonl``,
``pacing.jsonl``): :func:`open_lines`."""
from __future__ import annotations

import os
from pathlib import Path


def open_lines(path: str | Path) -> int:
    """An ``O_APPEND`` descriptor on ``path``, created if missing. A last line without its
    newline (a power cut mid-write) is ended first: the next invocation's first line would
    otherwise be glued to it, and a reader skipping the torn line would lose that one too."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            os.write(fd, b"\n")
    except OSError:
        pass  # the writes that follow meet the same fault and say so, or skip as theirs do
    return fd
