"""The run directory: ``config.json``, ``verdicts.jsonl``, ``scores.jsonl``, ``summary.json``.

Lines are appended as they arrive and flushed within 100 ms (one flush per line costs
more than the rest of the write at thousands of verdicts a second), so a crash loses at
most the last moment of lines; the cache holds every paid answer, so re-running the
command rebuilds the files for free. When the run completes, ``scores.jsonl`` is rewritten in input order so
two runs of the same command give identical files.
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import msgspec
import orjson

from drscore.engine.runtime.models import ScoreRow, VerdictRecord

_enc = msgspec.json.Encoder()


class RunWriter:
    def __init__(self, out_dir: str | Path) -> None:
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._verdicts = open(self.dir / "verdicts.jsonl", "wb")
        self._scores = open(self.dir / "scores.jsonl", "wb")
        self._order: dict[tuple[str, str, str], int] = {}
        self._flush_pending = False

    def _schedule_flush(self) -> None:
        if self._flush_pending:
            return
        self._flush_pending = True
        try:
            asyncio.get_running_loop().call_later(0.1, self._flush)
        except RuntimeError:  # no loop (synchronous use): flush now
            self._flush()

    def _flush(self) -> None:
        self._flush_pending = False
        for f in (self._verdicts, self._scores):
            if not f.closed:
                f.flush()

    def write_config(self, config: dict[str, Any]) -> None:
        _atomic_write(self.dir / "config.json", orjson.dumps(config, option=orjson.OPT_INDENT_2))

    def verdict(self, rec: VerdictRecord) -> None:
        self._verdicts.write(_enc.encode(rec) + b"\n")
        self._schedule_flush()

    def score(self, row: ScoreRow, order: int) -> None:
        self._order[(row.task_id, row.agent, row.method)] = order
        self._scores.write(_enc.encode(row) + b"\n")
        self._schedule_flush()

    def finish(self, summary: dict[str, Any]) -> None:
        self._verdicts.close()
        self._scores.close()
        path = self.dir / "scores.jsonl"
        lines = [ln for ln in path.read_bytes().splitlines() if ln]
        rows = [(orjson.loads(ln), ln) for ln in lines]
        rows.sort(key=lambda r: self._order.get((r[0]["task_id"], r[0]["agent"], r[0]["method"]), 1 << 60))
        _atomic_write(path, b"".join(ln + b"\n" for _, ln in rows))
        _atomic_write(self.dir / "summary.json", orjson.dumps(summary, option=orjson.OPT_INDENT_2))

    def abort(self) -> None:
        self._verdicts.close()
        self._scores.close()


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
