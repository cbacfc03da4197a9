"""Run directories (issue 8): one process per directory, processes sharing a cache pay
once per call, a run's state is recorded and a killed run reads as interrupted, and a
directory holding a different run is not overwritten silently. Real subprocesses
against the mock judge; every wait has a timeout."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson

from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"
ENV = {**os.environ, "CI": "1"}


def _args(out: Path, cache: Path, url: str | None, *extra: str, methods: str = "quality,redundancy") -> list[str]:
    args = [sys.executable, "-m", "drscore.cli", "run", "--methods", methods,
            "--tasks", str(EXAMPLES / "tasks.jsonl"), "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"),
            "--cache", str(cache), "--out", str(out), *extra]
    if url:
        args += ["--judge-url", url, "--judge-model", "mock"]
    return args


def _run(args: list[str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=timeout)


def _wait_for(predicate, timeout: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _said(stderr: str) -> list[str]:
    """stderr without the start-of-run announcement of the run directory."""
    return [ln for ln in stderr.strip().splitlines() if not ln.startswith("run directory: ")]


def _state(out: Path) -> dict:
    return orjson.loads((out / "state.json").read_bytes())


def test_a_second_process_on_the_same_out_exits_at_once_naming_the_first(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with MockServerProcess(MockConfig(latency=0.05)) as mock:
        first = subprocess.Popen(_args(out, tmp_path / "cache", mock.url, "--concurrency", "1"), cwd=ROOT, env=ENV,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _wait_for(lambda: mock.stats()["ok"] >= 3)
            second = _run(_args(out, tmp_path / "cache2", mock.url), timeout=60)
            assert first.poll() is None, "the first run must still be working"
            assert second.returncode == 1
            assert _said(second.stderr) == [
                f"drscore: error: run directory {out} is in use by pid {first.pid}"]
            assert _state(out)["state"] == "running" and _state(out)["pid"] == first.pid
        finally:
            assert first.wait(timeout=180) == 0, first.stderr.read()[-2000:]
    # the first run's files are whole: every line is JSON, the summary is there
    rows = [orjson.loads(ln) for ln in (out / "scores.jsonl").read_bytes().splitlines()]
    assert len(rows) == 20
    assert orjson.loads((out / "summary.json").read_bytes())["totals"]["items"] == 20
    assert _state(out)["state"] == "finished"


def test_two_processes_sharing_a_cache_pay_once_per_call(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with MockServerProcess(MockConfig(latency=0.2, jitter=0.05, seed=3)) as mock:
        procs = [subprocess.Popen(_args(tmp_path / f"run{i}", cache, mock.url, "--concurrency", "4"), cwd=ROOT,
                                  env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for i in (1, 2)]
        for p in procs:
            assert p.wait(timeout=300) == 0, p.stderr.read()[-2000:]
        stats = mock.stats()
    summaries = [orjson.loads((tmp_path / f"run{i}" / "summary.json").read_bytes()) for i in (1, 2)]
    # every distinct request was answered exactly once, whoever asked for it
    assert stats["duplicate_ok"] == 0
    assert stats["ok"] == stats["distinct_requests"]
    paid = sum(s["totals"]["calls"] for s in summaries)
    assert paid == stats["ok"]
    # both runs have every answer: what one did not pay for came from the other
    assert all(s["totals"]["items_failed"] == 0 for s in summaries)
    shared = sum(s["cache"]["answers_from_other_processes"] + s["totals"]["cache_hits"] for s in summaries)
    assert shared >= stats["ok"]  # each call was paid by one run and reused by the other
    scores = [sorted(orjson.loads(ln)["score"] for ln in (tmp_path / f"run{i}" / "scores.jsonl").read_bytes()
                     .splitlines()) for i in (1, 2)]
    assert scores[0] == scores[1]


def test_a_killed_run_reads_as_interrupted_in_report_and_compare(tmp_path: Path) -> None:
    out = tmp_path / "killed"
    with MockServerProcess(MockConfig(latency=0.05)) as mock:
        proc = subprocess.Popen(_args(out, tmp_path / "cache", mock.url, "--concurrency", "1"), cwd=ROOT, env=ENV,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for(lambda: (out / "scores.jsonl").exists() and (out / "scores.jsonl").stat().st_size > 0
                  and mock.stats()["ok"] >= 15)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert _state(out)["state"] == "running"  # what the dead process left behind
    assert not (out / "summary.json").exists()
    report = _run([sys.executable, "-m", "drscore.cli", "report", str(out), "--resamples", "50"], timeout=120)
    assert report.returncode == 0, report.stderr
    assert "INTERRUPTED" in report.stderr and f"pid {proc.pid}" in report.stderr
    assert 'id="unfinished"' in (out / "report.html").read_text()
    assert "INTERRUPTED" in (out / "leaderboard.md").read_text()
    # a finished run for comparison
    done = _run(_args(tmp_path / "done", tmp_path / "cache_offline", None, methods="quality"))
    assert done.returncode == 0, done.stderr
    compare = _run([sys.executable, "-m", "drscore.cli", "compare", str(tmp_path / "done"), str(out),
                    "--resamples", "50"], timeout=120)
    assert compare.returncode == 0, compare.stderr
    first_lines = compare.stdout.splitlines()[:2]
    assert first_lines == [f"A = {tmp_path / 'done'}", f"B = {out}  [INTERRUPTED: not finished]"]


def test_an_out_holding_another_run_is_refused_unless_overwrite(tmp_path: Path) -> None:
    out, cache = tmp_path / "run", tmp_path / "cache"
    assert _run(_args(out, cache, None, methods="quality")).returncode == 0
    # the same configuration resumes (limits may change)
    again = _run(_args(out, cache, None, "--concurrency", "3", methods="quality"))
    assert again.returncode == 0, again.stderr
    # a different one is refused and the directory is untouched
    before = (out / "scores.jsonl").read_bytes()
    other = _run(_args(out, cache, None, methods="quality,redundancy"))
    assert other.returncode == 1
    said = _said(other.stderr)
    assert len(said) == 1 and "Traceback" not in other.stderr
    assert said[0].startswith(f"drscore: error: run directory {out} holds a different run (methods: ")
    assert "--overwrite" in said[0]
    assert (out / "scores.jsonl").read_bytes() == before
    assert _state(out)["state"] == "finished"
    # --overwrite replaces it
    replaced = _run(_args(out, cache, None, "--overwrite", methods="quality,redundancy"))
    assert replaced.returncode == 0, replaced.stderr
    assert len((out / "scores.jsonl").read_bytes().splitlines()) == 20


def test_a_run_stopped_by_its_budget_reads_as_interrupted_and_resumes(tmp_path: Path) -> None:
    out, cache = tmp_path / "run", tmp_path / "cache"
    with MockServerProcess(MockConfig()) as mock:
        capped = _run(_args(out, cache, mock.url, "--price-as", "gpt-4.1", "--max-cost", "0.05", methods="quality"))
        assert capped.returncode == 3, capped.stderr
        state = _state(out)
        assert state["state"] == "interrupted" and "budget" in state["reason"]
        report = _run([sys.executable, "-m", "drscore.cli", "report", str(out), "--resamples", "50"])
        assert "INTERRUPTED" in report.stderr and "budget" in report.stderr
        # the same command with a higher cap is the same run: it resumes and finishes
        done = _run(_args(out, cache, mock.url, "--price-as", "gpt-4.1", "--max-cost", "5", methods="quality"))
        assert done.returncode == 0, done.stderr
    assert _state(out)["state"] == "finished"


def test_run_identity_ignores_limits_and_budget_but_not_what_is_computed(tmp_path: Path) -> None:
    from drscore.engine.runtime.rundir import run_identity

    base = {"methods": ["quality"], "reports": ["r.jsonl"], "tasks": "t.jsonl", "seed": 0, "method_options": {},
            "judge": {"url": "http://x/v1", "model": "m", "rpm": 10, "max_cost": 1.0, "concurrency": 4}}
    same = {**base, "judge": {**base["judge"], "rpm": 500, "max_cost": 9.0, "concurrency": 64, "params": {}},
            "reports": [str(tmp_path / "r.jsonl")]}
    assert run_identity(base, tmp_path) == run_identity(same, tmp_path)  # relative == absolute path too
    for change in ({"seed": 1}, {"methods": ["quality", "race"]}, {"judge": {**base["judge"], "model": "n"}},
                   {"judge": {**base["judge"], "params": {"seed": 7}}},
                   {"method_options": {"samples": 3}}):
        assert run_identity({**base, **change}, tmp_path) != run_identity(base, tmp_path), change
