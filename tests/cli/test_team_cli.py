"""``drscore run --redis`` as a team meets it: separate processes on one Redis and one mock
judge pay for each call once, a colleague's warm re-run pays nothing, and an unreachable
Redis is one clear line."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from drscore.api import JudgeConfig, Run, RunConfig
from drscore.cli import main
from drscore.engine.runtime.calls.local_process import free_port
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"


def _argv(mock_url: str, redis_url: str, cache: Path, out: Path) -> list[str]:
    return ["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
            "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--judge-url", mock_url,
            "--judge-model", "mock", "--cache", str(cache), "--out", str(out), "--redis", redis_url, "--json"]


def _spawn(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "drscore.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_two_processes_pay_each_call_once_and_a_third_machine_pays_nothing(tmp_path, redis_url):
    with MockServerProcess(MockConfig(latency=0.2)) as mock:
        procs = [_spawn(_argv(mock.url, redis_url, tmp_path / f"cache{i}", tmp_path / f"run{i}")) for i in (1, 2)]
        outs = [p.communicate(timeout=240) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
        first = mock.stats()
        # the same 10 reports in two processes at once: every distinct request answered once
        assert first["duplicate_ok"] == 0 and first["ok"] == first["distinct_requests"] > 0
        summaries = [json.loads(o[0]) for o in outs]
        assert sum(s["totals"]["calls"] for s in summaries) == first["ok"]
        assert sum(s["team"]["joined"] + s["team"]["redis_cache_hits"] for s in summaries) > 0

        # a colleague on another machine (empty local cache) re-runs the finished job
        third = _spawn(_argv(mock.url, redis_url, tmp_path / "cache3", tmp_path / "run3"))
        out, err = third.communicate(timeout=240)
        assert third.returncode == 0, err[-2000:]
        assert mock.stats()["requests"] == first["requests"]  # 0 endpoint calls
        assert json.loads(out)["totals"]["calls"] == 0
    rows = [sorted((json.loads(ln)["task_id"], json.loads(ln)["score"])
                   for ln in (tmp_path / f"run{i}" / "scores.jsonl").read_text().splitlines()) for i in (1, 2, 3)]
    assert rows[0] == rows[1] == rows[2]


def test_unreachable_redis_is_one_line_and_exit_1(tmp_path, capsys, monkeypatch):
    port = free_port()
    monkeypatch.setenv("DRSCORE_REDIS", f"redis://127.0.0.1:{port}/0")  # the environment names it
    with MockServerProcess(MockConfig()) as mock:
        code = main(["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                     "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--judge-url", mock.url,
                     "--judge-model", "mock", "--cache", str(tmp_path / "c"), "--out", str(tmp_path / "run")])
        sent = mock.stats()["requests"]
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and sent == 0
    errors = [line for line in err if not line.startswith("run directory:")]  # announced at start
    assert len(errors) == 1 and "Traceback" not in "\n".join(err)
    assert errors[0].startswith(f"drscore: error: cannot reach Redis at redis://127.0.0.1:{port}/0")


def test_config_json_never_holds_the_redis_password():
    run = Run(RunConfig(methods=["quality"], reports=["r.jsonl"],
                        judge=JudgeConfig(url="http://x/v1", model="m", redis="redis://:s3cret@db.internal:6379/2")))
    assert run.public_config()["judge"]["redis"] == "redis://:***@db.internal:6379/2"
    assert "s3cret" not in json.dumps(run.public_config())
