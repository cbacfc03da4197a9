"""``--samples K``: every judge call asked K times as distinct requests, each cached;
K = 1 keeps today's cache keys; the dry run and a warm re-run count them right."""
from __future__ import annotations

import aiohttp
import orjson
import pytest

import drscore
from drscore.engine.runtime.calls.cache import request_key
from drscore.engine.runtime.calls.judging import ChatRequest
from drscore.engine.runtime.method import MethodResult
from drscore.engine.runtime.calls.samples import combine
from drscore.judge.mock.server import MockConfig, start
from drscore.judge.wire import request_body
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def test_combine_means_and_spreads_by_hand():
    results = [MethodResult(score=1.0, subscores={"a": 2.0, "n": 3.0}, judged=3, expected=4),
               MethodResult(score=2.0, subscores={"a": 4.0, "n": 3.0}, judged=2, expected=4),
               MethodResult(score=3.0, subscores={"a": 6.0, "n": 3.0}, judged=1, expected=4)]
    result, spread = combine(results)
    assert result.score == 2.0 and result.subscores == {"a": 4.0, "n": 3.0}
    assert spread["sample_scores"] == [1.0, 2.0, 3.0]
    assert spread["score_sd"] == pytest.approx(1.0)  # sqrt(((1-2)^2 + 0 + (3-2)^2) / 2)
    assert spread["subscore_sd"] == {"a": pytest.approx(2.0), "n": 0.0}
    assert (result.judged, result.expected, result.status) == (3, 4, "ok")  # the first sample's counts
    median, _ = combine([MethodResult(score=v) for v in (1.0, 2.0, 9.0)], "median")
    assert median.score == 2.0


def test_a_failed_sample_makes_the_row_partial_and_is_named():
    result, spread = combine([MethodResult(score=1.0), MethodResult(score=None, status="failed",
                                                                     errors=["timeout: no answer"]),
                              MethodResult(score=3.0)])
    assert result.score == 2.0 and result.status == "partial"
    assert result.errors == ["1 of 3 judge samples failed: timeout: no answer"]
    assert spread["sample_scores"] == [1.0, None, 3.0] and spread["score_sd"] == pytest.approx(2 ** 0.5)


def _config(tmp_path, out: str, samples: int, **kw) -> drscore.RunConfig:
    return drscore.RunConfig(methods=["quality"], tasks=str(EXAMPLES / "tasks.jsonl"),
                             reports=[str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl")], limit=2,
                             out=str(tmp_path / out) if out else None, samples=samples, **kw)


async def _requests(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(f"{url}/stats") as r:
        return int((await r.json())["requests"])


async def _run(cfg: drscore.RunConfig) -> tuple[list, dict]:
    async with drscore.Run(cfg) as run:
        rows = [r async for r in run.rows()]
    return rows, run.summary


async def test_samples_are_distinct_cached_requests(tmp_path):
    runner, port = await start(MockConfig())
    url = f"http://127.0.0.1:{port}/v1"
    judge = dict(url=url, model="mock-judge", cache_dir=str(tmp_path / "cache"))
    try:
        async with aiohttp.ClientSession() as session:
            rows1, _ = await _run(_config(tmp_path, "one", 1, judge=drscore.JudgeConfig(**judge)))
            one = await _requests(session, f"http://127.0.0.1:{port}")
            assert one == 2 and all(r.sample_scores == [] and r.score_sd is None for r in rows1)
            # dry run of K = 3 on a cold cache: three times the calls
            dry_cfg = _config(tmp_path, "", 3, dry_run=True,
                              judge=drscore.JudgeConfig(**{**judge, "cache_dir": str(tmp_path / "cold")}))
            _, dry = await _run(dry_cfg)
            assert dry["totals"]["planned_calls"] == 6
            from drscore.render import dry_run_text

            assert "--samples 3: every judge call is asked 3 times" in dry_run_text(dry, "mock-judge")
            rows3, summary = await _run(_config(tmp_path, "three", 3, judge=drscore.JudgeConfig(**judge)))
            # sample 0 is the K = 1 request (same key): only samples 1 and 2 are new
            assert await _requests(session, f"http://127.0.0.1:{port}") == one + 4
            for r1, r3 in zip(sorted(rows1, key=lambda r: r.task_id), sorted(rows3, key=lambda r: r.task_id)):
                assert len(r3.sample_scores) == 3 and r3.sample_scores[0] == r1.score
                assert r3.score == pytest.approx(sum(r3.sample_scores) / 3)
                assert r3.score_sd is not None
            verdicts = [orjson.loads(x) for x in (tmp_path / "three" / "verdicts.jsonl").read_bytes().splitlines()]
            assert sorted(v["judge_sample"] for v in verdicts) == [0, 0, 1, 1, 2, 2]
            assert len({v["key"] for v in verdicts}) == 6
            assert summary["overview"]["samples"] == 3
            # warm re-run: nothing new is asked
            await _run(_config(tmp_path, "three", 3, judge=drscore.JudgeConfig(**judge)))
            assert await _requests(session, f"http://127.0.0.1:{port}") == one + 4
    finally:
        await runner.cleanup()


def test_sample_zero_keeps_the_key_and_sends_no_seed():
    from drscore.engine.runtime.calls.limits import RateLimiter
    from drscore.engine.runtime.calls.pool import JudgePool
    from drscore.engine.runtime.calls.pricing import PriceTable
    from drscore.engine.methods.quality import QualityVerdict  # noqa: F401 (a real verdict Struct)

    class Backend:
        name, model, cacheable = "http", "m", True

        def identity(self):
            return {"base_url": "http://x/v1", "model": "m"}

    pool = JudgePool(Backend(), cache=None, limiter=RateLimiter(0, 0, 1), prices=PriceTable.load(None))
    variables = {"question": "t", "report": "r"}
    req0, c0 = pool.build("quality", QualityVerdict, variables)
    req0b, c0b = pool.build("quality", QualityVerdict, variables, 0, 0)
    req2, c2 = pool.build("quality", QualityVerdict, variables, 0, 2)
    # exactly the components every key had before --samples existed
    assert set(c0) == {"backend", "base_url", "model", "messages", "temperature", "max_tokens", "schema_name",
                       "schema", "json_mode", "template", "template_hash", "sample"}
    assert "judge_sample" not in c0 and request_key(c0) == request_key(c0b)
    assert request_key(c2) != request_key(c0) and c2["judge_sample"] == 2
    assert "seed" not in request_body(req0, "m") and request_body(req2, "m")["seed"] == 2000
    assert isinstance(req2, ChatRequest) and req2.judge_sample == 2


async def test_samples_go_through_the_batch_api(tmp_path):
    runner, port = await start(MockConfig(batch_delay=0.05))
    base = f"http://127.0.0.1:{port}"
    judge = drscore.JudgeConfig(url=f"{base}/v1", model="mock-judge", cache_dir=str(tmp_path / "cache"), batch=True,
                                batch_window_s=0.2, batch_poll_s=0.05)
    try:
        rows, summary = await _run(_config(tmp_path, "batch", 2, judge=judge))
        async with aiohttp.ClientSession() as session, session.get(f"{base}/stats") as r:
            stats = await r.json()
        # 2 reports x 1 quality call x 2 samples, all batched, none synchronous
        assert (stats["batch_requests"], stats["requests"]) == (4, 0)
        assert summary["totals"]["batched_calls"] == 4
        assert all(len(r.sample_scores) == 2 and r.status == "ok" for r in rows)
    finally:
        await runner.cleanup()


def test_the_cli_prints_the_paired_difference_and_refuses_zero_samples(tmp_path, capsys):
    from drscore.cli import main

    args = ["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
            "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"),
            "--reports", str(EXAMPLES / "reports.claude-first-half.jsonl"), "--cache", str(tmp_path / "c")]
    assert main([*args, "--out", str(tmp_path / "zero"), "--samples", "0"]) == 1
    assert "--samples" in capsys.readouterr().err and not (tmp_path / "zero").exists()
    assert main([*args, "--out", str(tmp_path / "two"), "--samples", "2"]) == 0
    out = capsys.readouterr().out
    summary = orjson.loads((tmp_path / "two" / "summary.json").read_bytes())
    (pair,) = summary["decisions"]["quality"]["pairs"]
    ci = f"[{pair['ci'][0]:.2f}, {pair['ci'][1]:.2f}]"
    assert f"{pair['a']} - {pair['b']}: {pair['delta']:+.2f} {ci}" in out
    assert summary["overview"]["samples"] == 2 and "judge sd" in out
    for entry in summary["per_agent_method"]:
        assert (entry["samples"], entry["judge_sd"], entry["unranked_reason"]) == (2, 0.0, None)
        assert entry["judge_s"] >= 0 and entry["quota_wait_s"] >= 0 and "cost_usd_uncached" in entry
    noise = summary["judge_noise"]["quality"]["claude-3-7-sonnet"]
    assert (noise["samples"], noise["tasks"], noise["per_task_sd"]) == (2, 10, 0.0)
    # the Python API on the finished run gives the summary's numbers
    (again,) = drscore.load_run(tmp_path / "two").decisions()["quality"].pairs
    assert (again.delta, again.ci, again.p_holm) == (pytest.approx(pair["delta"]), pair["ci"], pair["p_holm"])
    rows = [orjson.loads(x) for x in (tmp_path / "two" / "scores.jsonl").read_bytes().splitlines()]
    # the offline judge is deterministic: two samples, no spread
    assert all(len(r["sample_scores"]) == 2 and r["score_sd"] == 0.0 for r in rows)


def test_flat_rows_carry_the_honest_columns():
    from drscore.results import flat_row

    row = drscore.ScoreRow(task_id="1", agent="a", method="quality", score=2.0, judge_s=1.5, quota_wait_s=40.0,
                           latency_s=42.0, cost_usd=0.0, cost_usd_uncached=0.02, cached_input_tokens=900,
                           reasoning_tokens=12, score_sd=0.5, subscores={"depth": 3.0}, subscore_sd={"depth": 1.0})
    flat = flat_row(row)
    assert (flat["judge_s"], flat["quota_wait_s"], flat["latency_s"]) == (1.5, 40.0, 42.0)
    assert (flat["cost_usd"], flat["cost_usd_uncached"]) == (0.0, 0.02)
    assert (flat["cached_input_tokens"], flat["reasoning_tokens"], flat["score_sd"]) == (900, 12, 0.5)
    assert (flat["sub.depth"], flat["sd.depth"]) == (3.0, 1.0)
