"""A quality run on the first bundled example reports against a judge URL: what the pacing
tests run to watch how calls reach a mock's quota."""
from __future__ import annotations

from pathlib import Path

from drscore.api import JudgeConfig, Run, RunConfig
from support.data import ROOT

EXAMPLES = ROOT / "examples"


async def quality_scores(url: str, out: Path, *, cache: Path | None = None,
                         limit: int = 6) -> dict[tuple[str, str], float | None]:
    """Score the first ``limit`` example reports by quality (8 calls in flight, model
    ``gpt-4.1``); every score by (task, agent). Without ``cache`` nothing is cached."""
    judge = JudgeConfig(url=url, model="gpt-4.1", concurrency=8, no_cache=cache is None,
                        cache_dir=str(cache) if cache is not None else None)
    cfg = RunConfig(methods=["quality"], reports=[str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl")],
                    tasks=str(EXAMPLES / "tasks.jsonl"), out=str(out), limit=limit, judge=judge)
    async with Run(cfg) as run:
        return {(row.task_id, row.agent): row.score async for row in run.rows()}
