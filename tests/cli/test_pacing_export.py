"""The pacing's account as data: ``drscore export DIR --table pacing`` and
``drscore.load_run(DIR).pacing``, over two invocations of a run that learned its pace."""
from __future__ import annotations

import csv

import msgspec

import drscore
from drscore.cli import main
from drscore.engine.runtime.calls.judging import RateLimitInfo
from drscore.engine.runtime.calls.limits import RateLimiter
from drscore.engine.runtime.calls.pace_log import PACING_COLUMNS, PACING_FILE, PaceLog
from drscore.engine.runtime.models import ScoreRow


async def _run_dir(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "scores.jsonl").write_bytes(msgspec.json.encode(ScoreRow(task_id="1", agent="a", method="quality",
                                                                    score=0.5)) + b"\n")
    for _ in range(2):  # two invocations, each with its limiter, one 429 each
        lim, log = RateLimiter(concurrency=4), PaceLog(run / PACING_FILE)
        lim.log_pacing(log)
        for x in (1000, 9000, 1500, 8000, 1200, 9500, 900, 8500):
            p = await lim.acquire(x)
            await p.done(x)
        p = await lim.acquire(9800)  # the largest refused: the start-up 429, tokens guessed
        await lim.rate_limited_release(p, RateLimitInfo(retry_after_s=0.25))
        log.close()
    return run


async def test_export_writes_each_429_of_every_invocation_with_its_vote(tmp_path, capsys):
    run = await _run_dir(tmp_path)
    assert main(["export", str(run), "--table", "pacing"]) == 0
    assert f"{run / 'pacing.csv'} (4 rows)" in capsys.readouterr().out
    with open(run / "pacing.csv", newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames or ()) == PACING_COLUMNS
    assert [r["kind"] for r in rows] == ["start", "429", "start", "429"]
    refused = rows[1]
    assert (refused["call"], refused["tokens"], refused["pause_s"], refused["learning"]) == ("9", "9800", "0.25", "True")
    assert (refused["vote_paced"], refused["vote_by"], refused["vote_guess"], refused["binding"]) == \
        ("none", "ranks", "tokens", "tokens")
    assert rows[0]["vote_by"] == ""  # a start has no vote


async def test_load_run_reads_the_pacing(tmp_path):
    run = drscore.load_run(await _run_dir(tmp_path))
    refusals = [e for e in run.pacing if e.kind == "429"]
    assert len(refusals) == 2 and all(e.vote is not None and e.vote.guess == "tokens" for e in refusals)
    df = run.pacing.to_pandas()
    assert list(df["kind"]) == ["start", "429", "start", "429"] and list(df["tokens"].dropna()) == [9800, 9800]
