"""Damaged caches and bad paths end a real ``drscore`` process at once, in one line.

Before issue 8 a garbage or truncated ``judge.sqlite``/``pages.sqlite`` printed a
traceback and then hung forever (an aiosqlite connection thread was never closed), and a
row holding invalid UTF-8 failed its item on every run. Each test runs the real command
in a subprocess with a timeout: a hang fails the test instead of stalling the suite.
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"
TIMEOUT_S = 60  # generous on a loaded machine; a hang is infinite


def drscore(*args: str, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drscore.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout, env={**os.environ, "CI": "1"})


def run_args(cache: Path, out: Path | None = None, url: str | None = None) -> list[str]:
    args = ["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
            "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--cache", str(cache)]
    if url:
        args += ["--judge-url", url, "--judge-model", "mock"]
    else:  # the offline judge is not cached: ask for a judge URL that is never reached
        args += ["--judge-url", "http://127.0.0.1:9/v1", "--judge-model", "mock"]
    if out:
        args += ["--out", str(out)]
    return args


def one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("drscore: error:")]
    assert len(errors) == 1, proc.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def _real_sqlite(path: Path, rows: int = 400) -> None:
    """A valid SQLite file of several hundred KB (so truncating it cuts real pages)."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE filler (x BLOB)")
        db.executemany("INSERT INTO filler VALUES (?)", [(os.urandom(1000),) for _ in range(rows)])


@pytest.fixture(params=["garbage", "truncated"])
def damaged(request: pytest.FixtureRequest, tmp_path: Path):
    def make(name: str) -> Path:
        cache = tmp_path / "cache"
        cache.mkdir(exist_ok=True)
        path = cache / name
        if request.param == "garbage":
            path.write_bytes(b"this is not a database\n" * 400)
        else:
            _real_sqlite(path)
            with open(path, "r+b") as f:
                f.truncate(path.stat().st_size // 3)
        return cache
    return make


def test_run_with_a_damaged_judge_cache_fails_in_one_line(damaged, tmp_path: Path) -> None:
    cache = damaged("judge.sqlite")
    proc = drscore(*run_args(cache, tmp_path / "out"))
    line = one_line_error(proc, str(cache / "judge.sqlite"), "drscore cache check", "move it aside")
    assert "truncated" in line or "not a SQLite database" in line
    # a run that could not start leaves no run directory behind
    assert not (tmp_path / "out").exists()


def test_cache_stats_with_a_damaged_judge_cache_fails_in_one_line(damaged) -> None:
    cache = damaged("judge.sqlite")
    one_line_error(drscore("cache", "--cache", str(cache), "stats"), str(cache / "judge.sqlite"))


@pytest.mark.parametrize("command", [["stats"], ["get", "https://example.org/", "--offline-pages"]])
def test_pages_commands_with_a_damaged_page_store_fail_in_one_line(damaged, command: list[str]) -> None:
    cache = damaged("pages.sqlite")
    one_line_error(drscore("pages", command[0], "--cache", str(cache), *command[1:]),
                   str(cache / "pages.sqlite"), "drscore cache check")


def test_cache_check_names_the_damage_and_repair_lets_the_run_start(damaged) -> None:
    cache = damaged("judge.sqlite")
    proc = drscore("cache", "check", "--cache", str(cache))
    assert proc.returncode == 1
    assert f"{cache / 'judge.sqlite'}: DAMAGED" in proc.stdout
    fixed = drscore("cache", "check", "--cache", str(cache), "--repair")
    assert fixed.returncode == 0, fixed.stderr
    assert list(cache.glob("judge.sqlite.bad-*")), "the damaged file is kept aside"
    assert drscore("cache", "check", "--cache", str(cache)).returncode == 0
    assert drscore("cache", "--cache", str(cache), "stats").returncode == 0


def test_out_pointing_at_a_file_fails_in_one_line_after_nothing_is_left_open(tmp_path: Path) -> None:
    """Set-up failing after the cache could be opened used to hang (the cache stayed open)."""
    target = tmp_path / "a-file"
    target.write_text("not a directory")
    proc = drscore(*run_args(tmp_path / "cache", target))
    one_line_error(proc, str(target), "is a file")
    assert target.read_text() == "not a directory"
    # the cache was opened before the run directory was refused, and closed again
    assert (tmp_path / "cache" / "judge.sqlite").exists()


def test_cache_pointing_at_a_file_fails_in_one_line(tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("x")
    one_line_error(drscore(*run_args(target, tmp_path / "out")), str(target), "is a file")
    one_line_error(drscore("cache", "--cache", str(target), "stats"), str(target))


def test_a_row_with_invalid_utf8_is_a_miss_that_is_asked_again(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with MockServerProcess(MockConfig()) as mock:
        first = drscore(*run_args(cache, tmp_path / "r1", mock.url))
        assert first.returncode == 0, first.stderr
        calls = mock.stats()["ok"]
        assert calls == 10  # one quality call per report
        with sqlite3.connect(cache / "judge.sqlite") as db:
            keys = [k for (k,) in db.execute("SELECT key FROM responses ORDER BY key LIMIT 2")]
            db.execute("UPDATE responses SET response = CAST(x'ff7b22' AS TEXT) WHERE key = ?", (keys[0],))
            db.execute("UPDATE responses SET response = x'c328' WHERE key = ?", (keys[1],))
        second = drscore(*run_args(cache, tmp_path / "r2", mock.url), "--json")
        assert second.returncode == 0, second.stderr
        assert mock.stats()["ok"] == calls + 2  # exactly the two damaged answers are paid again
    summary = orjson.loads(second.stdout)
    assert summary["totals"]["items_failed"] == 0
    assert summary["cache"]["damaged_entries"] == 2
    assert "damaged" in second.stderr and "Traceback" not in second.stderr
    # the answers were stored again: the file is sound now
    assert drscore("cache", "check", "--cache", str(cache)).returncode == 0
