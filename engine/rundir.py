"""The run directory: ``config.json``, ``verdicts.jsonl``, ``scores.jsonl``, ``summary.json``.

Lines are appended and flushed as they arrive, so a crash loses at most the line being
written; the cache holds every paid answer, so re-running the command rebuilds the
files for free. When the run completes, ``scores.jsonl`` is rewritten in input order so
two runs of the same command give identical files.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
import orjson

from engine.models import ScoreRow, VerdictRecord

_enc = msgspec.json.Encoder()


class RunWriter:
    def __init__(self, out_dir: str | Path) -> None:
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._verdicts = open(self.dir / "verdicts.jsonl", "wb")
        self._scores = open(self.dir / "scores.jsonl", "wb")
        self._order: dict[tuple[str, str, str], int] = {}

    def write_config(self, config: dict[str, Any]) -> None:
        _atomic_write(self.dir / "config.json", orjson.dumps(config, option=orjson.OPT_INDENT_2))

    def verdict(self, rec: VerdictRecord) -> None:
        self._verdicts.write(_enc.encode(rec) + b"\n")
        self._verdicts.flush()

    def score(self, row: ScoreRow, order: int) -> None:
        self._order[(row.task_id, row.agent, row.method)] = order
        self._scores.write(_enc.encode(row) + b"\n")
        self._scores.flush()

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
