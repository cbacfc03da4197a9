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

Your own method (docs/custom-methods.md): a :class:`Method` subclass whose ``score`` asks
the judge through ``ctx.ask`` (:class:`ItemContext`) and returns a :class:`MethodResult`,
installed as a plugin (entry-point group ``drscore.methods``) or given by path
(``RunConfig(method_modules=[...])``, ``drscore run --method-module``); a method declared
in a TOML file needs no Python (``RunConfig(method_files=[...])``). These names are
stable API.

A finished run as data (pandas is the optional ``drscore[pandas]`` extra)::

    run = drscore.load_run("runs/r1")
    run.rows.to_pandas().groupby(["method", "agent"]).score.mean()
    run.verdicts.to_pandas()              # one row per judge call
"""
from drscore.api import JudgeConfig, Run, RunConfig, judge_session, methods, run_async, version
from drscore.engine.runtime.calls.judging import JudgeFailed
from drscore.engine.runtime.method import ItemContext, Method, MethodResult, Option
from drscore.engine.runtime.models import Report, ScoreRow, Task
from drscore.results import load_run

__all__ = ["ItemContext", "JudgeConfig", "JudgeFailed", "Method", "MethodResult", "Option", "Report", "Run",
           "RunConfig", "ScoreRow", "Task", "judge_session", "load_run", "methods", "run_async", "version"]
__version__ = version()
