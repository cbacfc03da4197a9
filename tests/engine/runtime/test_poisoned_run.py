"""A run with bodies the server always rejects and prompts beyond the window finishes
every other item (issue 16, part 5): state ``finished``, nothing ``stopped``, each failed
item with its own reason."""
from __future__ import annotations

from pathlib import Path

import orjson

from drscore.api import JudgeConfig, Run, RunConfig
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"


async def test_poisoned_bodies_and_oversized_prompts_leave_the_run_finished(tmp_path: Path) -> None:
    # 20% of bodies answered 503 every time; the vLLM profile's window refuses the longest
    # quality prompts (mock tokens: one per word or punctuation mark).
    cfg = MockConfig(profile="vllm", poison_rate=0.2, context_window=3000)
    with MockServerProcess(cfg) as mock:
        config = RunConfig(methods=["quality", "redundancy"], tasks=str(EXAMPLES / "tasks.jsonl"),
                           reports=[str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl")],
                           judge=JudgeConfig(url=mock.url, model="local-judge", no_cache=True, max_retries=1),
                           out=str(tmp_path / "out"))
        async with Run(config) as run:
            rows = [row async for row in run.rows()]
        stats = mock.stats()
    summary = run.summary
    state = orjson.loads((tmp_path / "out" / "state.json").read_bytes())
    assert stats["poisoned"] > 0 and stats["context_errors"] > 0  # both faults were met
    assert len(rows) == 20 and summary["stopped"] is None and state["state"] == "finished"
    reasons = summary["totals"]["failure_reasons"]
    assert set(reasons) <= {"context_length", "server_error"} and reasons.get("context_length", 0) >= 1
    assert summary["totals"]["request_faults"] >= 1
