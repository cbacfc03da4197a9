"""drscore: score deep-research reports with LLM judges, fast and under quota.

The async API (the CLI is a thin shell over it)::

    import asyncio, drscore

    async def main():
        config = drscore.RunConfig(methods=["quality", "redundancy"],
                                   reports=["reports.jsonl"], tasks="tasks.jsonl", out="runs/r1")
        async with drscore.Run(config) as run:
            async for row in run.rows():          # ScoreRow, streamed as each finishes
                print(row.task_id, row.agent, row.method, row.score, row.cost_usd)
        print(run.summary["totals"])

    asyncio.run(main())
"""
from drscore.api import JudgeConfig, Run, RunConfig, judge_session, methods, run_async, version
from drscore.engine.runtime.models import Report, ScoreRow, Task

__all__ = ["JudgeConfig", "Report", "Run", "RunConfig", "ScoreRow", "Task", "judge_session", "methods",
           "run_async", "version"]
__version__ = version()
