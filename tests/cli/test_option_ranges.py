"""Every numeric option is checked against its range before anything is sent, as one
line naming the flag (or the config file and line): the CLI and the Python API alike."""
from __future__ import annotations

from pathlib import Path

import pytest

from drscore.api import JudgeConfig, Run, RunConfig, run_async
from drscore.cli import main
from support.data import ROOT

EXAMPLES = ROOT / "examples"
# a judge URL nobody listens on: a range error must come before any attempt to reach it
DEAD_JUDGE = ["--judge-url", "http://127.0.0.1:9/v1", "--judge-model", "m"]


def _run(tmp_path: Path, *extra: str) -> int:
    return main(["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                 "--reports", str(EXAMPLES / "reports.claude-first-half.jsonl"),
                 "--out", str(tmp_path / "run"), *DEAD_JUDGE, *extra])


@pytest.mark.parametrize("flag, value, says", [
    ("--rpm", "-500", "--rpm must be a number >= 0 (got -500.0)"),
    ("--rpm", "nan", "--rpm must be a number >= 0 (got nan)"),
    ("--tpm", "inf", "--tpm must be a number >= 0 (got inf)"),
    ("--concurrency", "0", "--concurrency must be a whole number from 1"),
    ("--burst", "-1", "--burst must be a number from 0 (exclusive)"),
    ("--max-retries", "-1", "--max-retries must be a whole number from 0 to 100 (got -1)"),
    ("--timeout", "0", "--timeout must be a number from 0 (exclusive)"),
    ("--max-cost", "-2", "--max-cost must be a number >= 0 (got -2.0)"),
    ("--max-rate-limit-wait", "nan", "--max-rate-limit-wait must be"),
    ("--fetch-concurrency", "0", "--fetch-concurrency must be a whole number from 1"),
])
def test_out_of_range_flag_is_one_line_naming_it(tmp_path, capsys, flag, value, says):
    assert _run(tmp_path, flag, value) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("drscore: error: ") and says in errors[0]
    assert not (tmp_path / "run").exists()  # refused before the run directory was made


def test_config_file_value_out_of_range_names_file_and_line(tmp_path, capsys):
    config = tmp_path / "run.toml"
    config.write_text('judge-model = "m"\n\n[limits]\nrpm = 60\nmax-retries = 1e20\n')
    assert _run(tmp_path, "--config", str(config)) == 1
    assert f"{config}:5: --max-retries must be a whole number from 0 to 100" in capsys.readouterr().err
    config.write_text("max-retries = inf\n")
    assert _run(tmp_path, "--config", str(config)) == 1
    assert f"{config}:1: max-retries" in capsys.readouterr().err  # no OverflowError traceback
    config.write_text("concurrency = 2.5\n")
    assert _run(tmp_path, "--config", str(config)) == 1
    assert f"{config}:1: concurrency must be a whole number, got 2.5" in capsys.readouterr().err


def test_python_api_checks_the_same_ranges(tmp_path):
    with pytest.raises(ValueError, match=r"^--rpm must be a number >= 0 \(got -500\)$"):
        JudgeConfig(rpm=-500).validate()
    with pytest.raises(ValueError, match="--concurrency must be a whole number"):
        JudgeConfig(concurrency=2.5).validate()  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="--max-retries"):
        JudgeConfig(max_retries=10**20).validate()
    JudgeConfig(rpm=0, tpm=0, max_cost=None).validate()  # the defaults and "unlimited" pass
    cfg = RunConfig(methods=["quality"], reports=[str(EXAMPLES / "reports.claude-first-half.jsonl")],
                    tasks=str(EXAMPLES / "tasks.jsonl"), out=str(tmp_path / "api"),
                    judge=JudgeConfig(url="http://127.0.0.1:9/v1", model="m", timeout_s=0))

    async def go() -> None:
        async with Run(cfg):
            pass

    with pytest.raises(ValueError, match="--timeout must be"):
        run_async(go())
    assert not (tmp_path / "api").exists()


@pytest.mark.parametrize("method, flag, value, says", [
    ("redundancy", "--screen-threshold", "2", "--screen-threshold must be a number from 0 to 1 (got 2.0)"),
    ("redundancy", "--redundancy-max-pairs", "0", "--redundancy-max-pairs must be a whole number >= 1 (got 0)"),
    ("race", "--race-weight-samples", "-1", "--race-weight-samples must be a whole number >= 1 (got -1)"),
    ("kae", "--kae-max-pages", "-3", "--kae-max-pages must be a whole number >= 0 (got -3)"),
])
def test_method_option_out_of_range_is_refused(tmp_path, capsys, method, flag, value, says):
    assert _run(tmp_path, "--methods", method, flag, value) == 1
    assert says in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
