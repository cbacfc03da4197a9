"""A cache that fails in the middle of a run stops the run with the cache's error (the
answers could no longer be kept), and the run directory records it as interrupted."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from drscore.api import JudgeConfig, Run, RunConfig
from drscore.engine.runtime.calls.cache import JudgeCache
from drscore.engine.runtime.sqlitefile import CacheFileError
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"


async def test_a_cache_failing_mid_run_stops_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = JudgeCache._fetch_answers
    calls = {"n": 0}

    async def failing_after_three(self, keys):  # noqa: ANN001
        calls["n"] += 1
        if calls["n"] > 3:
            raise sqlite3.DatabaseError("database disk image is malformed")
        return await real(self, keys)

    monkeypatch.setattr(JudgeCache, "_fetch_answers", failing_after_three)
    rows = []
    with MockServerProcess(MockConfig()) as mock:
        config = RunConfig(methods=["quality"], tasks=str(EXAMPLES / "tasks.jsonl"),
                           reports=[str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl")],
                           judge=JudgeConfig(url=mock.url, model="mock", cache_dir=str(tmp_path / "cache"),
                                             concurrency=1),
                           out=str(tmp_path / "out"))
        with pytest.raises(CacheFileError, match="judge.sqlite: corrupt"):
            async with Run(config) as run:
                async for row in run.rows():
                    rows.append(row)
    assert len(rows) < 10  # it stopped instead of failing item after item
    state = orjson.loads((tmp_path / "out" / "state.json").read_bytes())
    assert state["state"] == "interrupted" and state["reason"] == "error: CacheFileError"
    assert not (tmp_path / "out" / "summary.json").exists()
