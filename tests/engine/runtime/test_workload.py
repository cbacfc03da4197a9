"""Calls counted per method as they happen (engine.runtime.workload), and progress that
counts calls while a method's items are all still running."""
from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import orjson

from drscore.api import JudgeConfig, Run, RunConfig
from drscore.engine.runtime.progress import Progress, plain_line
from drscore.engine.runtime.workload import MethodWork
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def network(tokens: int = 0):
    return SimpleNamespace(source="network", input_tokens=tokens, output_tokens=0)


def test_an_items_asks_move_from_said_to_done():
    m = MethodWork()
    a, b = m.start(), m.start()
    a.asked("checklist", network(100))  # a asks once before it says anything (an ACE checklist)
    a.expect(4, "item", size=(1500.0, 500.0))  # then 4 items with the report (a first guess)
    c, i = m.templates["checklist"], m.templates["item"]
    assert m.announced == 1 and (c.announced_asks, c.unannounced_asks) == (1, 0)
    assert (i.announced_left, i.hinted, i.hinted_ascii, i.hinted_wide) == (4, 4, 6000.0, 2000.0)
    assert (i.left_sized, i.left_ascii, i.left_wide) == (4, 6000.0, 2000.0)
    a.expect(-1, "item")  # the checklist had 3 items
    assert i.announced_left == 3 and i.hinted == 4  # the size said stays a size per call
    assert (i.left_sized, i.left_ascii) == (3, 4500.0)
    a.asked("item", network(2100))
    a.asked("item", SimpleNamespace(source="shared", input_tokens=0, output_tokens=0))
    b.asked("checklist", None)  # b's ask failed; b never says anything
    assert (i.asks, i.calls, i.tokens, i.announced_asks, i.announced_left) == (2, 1, 2100, 2, 1)
    # the answered one had its item's size: 1,500 + 500 units turned into 2,100 tokens
    assert (i.answered_sized, i.answered_ascii, i.answered_wide, i.answered_tokens) == (1, 1500.0, 500.0, 2100)
    assert (i.left_sized, i.left_ascii) == (1, 1500.0)
    assert (c.asks, c.calls, c.tokens, c.unannounced_asks) == (2, 1, 100, 1)
    a.finish()  # finished with its last item unasked: dropped
    b.finish()
    assert (m.done, m.announced) == (2, 0)
    assert (c.finished_asks, c.announced_asks, c.unannounced_asks) == (2, 0, 0)
    assert (i.finished_asks, i.announced_asks, i.announced_left, i.left_sized, i.left_ascii) == (2, 0, 0, 0, 0.0)


def _copy(src: Path, dst: Path, ids: set[int]) -> Path:
    lines = [line for line in src.read_text().splitlines() if orjson.loads(line)["id"] in ids]
    dst.write_text("\n".join(lines) + "\n")
    return dst


async def test_progress_counts_calls_while_no_redundancy_item_has_finished(tmp_path: Path) -> None:
    # Two redundancy items of 10 pairs each at 10 requests/s run side by side: neither
    # finishes before about its 20th call, yet the calls are counted from the first.
    reports = _copy(EXAMPLES / "reports.claude-3-7-sonnet.jsonl", tmp_path / "reports.jsonl", {51, 52})
    with MockServerProcess(MockConfig(latency=0.05, rpm=600)) as mock:
        config = RunConfig(methods=["redundancy"], tasks=str(EXAMPLES / "tasks.jsonl"), reports=[str(reports)],
                           method_options={"redundancy_max_pairs": 10},
                           judge=JudgeConfig(url=mock.url, model="mock", cache_dir=str(tmp_path / "cache"),
                                             rpm=600, concurrency=4),
                           out=str(tmp_path / "out"))
        seen: list[str] = []
        async with Run(config) as run:
            progress = Progress(run.runner.snapshot, {"redundancy": 2}, mode="off")

            async def watch() -> None:
                while True:
                    snap = progress.snapshot()
                    w = snap["work"]["redundancy"]
                    if sum(t["asks"] for t in w["templates"].values()) >= 5:
                        seen.append(plain_line(snap, {"redundancy": 2}, 1.0, shown=progress.eta(snap)))
                        assert snap["done_by_method"].get("redundancy", 0) == 0
                        return
                    await asyncio.sleep(0.01)

            watcher = asyncio.create_task(watch())
            async for _ in run.rows():
                pass
            await watcher
    line = seen[0]
    # 0 of 2 items, but some of the 20 calls counted, none estimated: both items said theirs
    assert "[redundancy 0/2, calls " in line and "/20]" in line, line
    asks = int(line.split("calls ")[1].split("/")[0])
    assert 5 <= asks < 20
    # ETA: the calls left at 600 requests/min (quota), about (20 - asks) / 10 s
    assert "(quota)" in line


def test_against_a_quota_of_input_tokens_a_call_spends_its_prompt_alone():
    # Gemini's token quota counts the prompt only: the ETA's tokens per call leave the answer out
    counted, gemini = MethodWork(), MethodWork(quota_counts_output=False)
    for m in (counted, gemini):
        m.start().asked("quality", SimpleNamespace(source="network", input_tokens=900, output_tokens=100))
    assert (counted.templates["quality"].tokens, gemini.templates["quality"].tokens) == (1000, 900)
