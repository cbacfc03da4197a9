"""An endpoint that limits input and output tokens apart, as Anthropic does: its answers state
the two quotas (and a ``tokens`` pair that is their sum), its input quota charges the prompt at
admission, and its output quota holds each call's ``max_tokens`` until the answer gives back what
it did not use. Runs through the public API against the mock in that shape (its ``anthropic``
profile with ``otpm``), which refuses a call either quota cannot take."""
from __future__ import annotations

from pathlib import Path

from drscore.api import JudgeConfig, Run, RunConfig
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"


async def _run(url: str, out: Path, *, concurrency: int = 8, otpm: float = 0.0) -> tuple[list, dict]:
    judge = JudgeConfig(url=url, model="mock", concurrency=concurrency, no_cache=True, otpm=otpm)
    cfg = RunConfig(methods=["quality"], reports=[str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl")],
                    tasks=str(EXAMPLES / "tasks.jsonl"), out=str(out), judge=judge)
    async with Run(cfg) as run:
        rows = [row async for row in run.rows()]
    return rows, run.summary


async def test_the_prompts_are_paced_on_the_input_quota_not_on_the_sum_the_tokens_pair_states(tmp_path):
    # 240,000 input tokens a minute in a 5-second bucket (20,000), and an output quota so large
    # it never binds: the tokens pair states 1,240,000. Paced on that sum, the ten quality calls
    # (about 3,000 prompt tokens each as the mock counts) all go at once and overrun the input
    # bucket; paced on the input quota, none is refused.
    cfg = MockConfig(profile="anthropic", tpm=240_000, tpm_charge="input", otpm=1_000_000, burst=5.0, latency=0.2)
    with MockServerProcess(cfg) as mock:
        rows, summary = await _run(mock.url, tmp_path / "out")
        stats = mock.stats()
    assert len(rows) == 10 and all(r.score is not None for r in rows)
    assert stats["rate_limited"] == 0
    assert stats["prompt_tokens"] > 20_000  # more than the input bucket holds: the pace mattered
    split = summary["totals"]["split_token_quota"]
    assert split["input_tokens_per_minute"] == 240_000 and split["output_tokens_per_minute"] == 1_000_000


async def test_the_caps_in_flight_never_ask_more_output_than_the_output_quota_holds(tmp_path):
    # 6,000 output tokens a minute in a minute's bucket (Anthropic's): eight calls at once would
    # hold 8 x the quality template's 1,000-token cap. The answers use a few dozen tokens each,
    # so the quota is never short of output, only of room for the caps held: the seventh call
    # waits for an answer to give its unused cap back instead of meeting a 429.
    cfg = MockConfig(profile="anthropic", tpm=10_000_000, tpm_charge="input", otpm=6_000, burst=60.0, latency=0.3)
    with MockServerProcess(cfg) as mock:
        rows, summary = await _run(mock.url, tmp_path / "out")
        stats = mock.stats()
    assert len(rows) == 10 and all(r.score is not None for r in rows)
    assert stats["rate_limited"] == 0 and stats["rate_limited_output"] == 0
    split = summary["totals"]["split_token_quota"]
    assert split["output_tokens_per_minute"] == 6_000 and split["waited_for_output"] >= 1
    # what the output quota kept is what the answers used: every unused cap came back
    assert stats["output_tokens_charged"] == stats["completion_tokens"]
    # the waits are on the rows as waiting, not lost: some item waited for quota
    assert any(r.quota_wait_s > 0 for r in rows)


async def test_an_output_quota_told_holds_the_caps_where_no_header_states_it(tmp_path):
    # The plain mock behind the same output quota: its OpenAI-style headers state a token quota
    # too large to bind, so the calls go eight at once after the preflight, and say nothing of
    # output (untold, two of them met 429s in each of two runs). Told as --otpm, the caps are
    # held against it from the first call.
    cfg = MockConfig(tpm=10_000_000, otpm=6_000, burst=60.0, latency=0.3)
    with MockServerProcess(cfg) as mock:
        rows, summary = await _run(mock.url, tmp_path / "out", otpm=6_000)
        stats = mock.stats()
    assert len(rows) == 10 and all(r.score is not None for r in rows)
    assert stats["rate_limited"] == 0
    split = summary["totals"]["split_token_quota"]
    assert split["output_tokens_per_minute"] == 6_000 and split["waited_for_output"] >= 1
    assert split["input_tokens_per_minute"] is None  # nothing said the token quota is of input alone
