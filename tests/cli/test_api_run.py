"""``drscore.Run`` used before it is opened: the type checker found ``Run.runner`` read as
``Runner | None`` without a check (the CLI's progress display); the run now says how to
open it instead of failing on ``None``."""
from __future__ import annotations

import pytest

import drscore
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def _config(tmp_path) -> drscore.RunConfig:
    return drscore.RunConfig(methods=["quality"], tasks=str(EXAMPLES / "tasks.jsonl"),
                             reports=[str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl")],
                             judge=drscore.JudgeConfig(cache_dir=str(tmp_path / "cache")))


def test_the_runner_of_a_run_not_opened_names_the_way_to_open_it(tmp_path):
    run = drscore.Run(_config(tmp_path))
    with pytest.raises(RuntimeError, match=r"async with Run\(config\) as run"):
        run.runner.snapshot()


async def test_rows_of_a_run_not_opened_name_the_way_to_open_it(tmp_path):
    run = drscore.Run(_config(tmp_path))
    with pytest.raises(RuntimeError, match=r"async with Run\(config\) as run"):
        async for _ in run.rows():
            pass


async def test_an_open_run_has_its_runner_and_scores(tmp_path):
    async with drscore.Run(_config(tmp_path)) as run:
        assert run.runner.pool is not None
        rows = [row async for row in run.rows()]
    assert len(rows) == 10 and {r.method for r in rows} == {"quality"}
