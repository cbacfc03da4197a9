"""Everyday use of ``drscore run``: a config file and DRSCORE_* defaults, ``--print-config``,
``--limit``, the default run directory, options in the same place across sub-commands,
an example in every ``--help``, and the terminal leaderboard agreeing with the report."""
from __future__ import annotations

import csv
import json
import re
import tomllib
from pathlib import Path

import pytest

from drscore.cli import build_cli, main, walk
from drscore.commands._framework import help_text
from drscore.commands.run import default_out_dir
from drscore.engine.reporting.tables import leaderboard
from drscore.engine.runtime.rundir_read import read_run_dir
from support.data import ROOT

EXAMPLES = ROOT / "examples"
TASKS = EXAMPLES / "tasks.jsonl"
FULL = EXAMPLES / "reports.claude-3-7-sonnet.jsonl"
HALF = EXAMPLES / "reports.claude-first-half.jsonl"


def rows_of(run: Path) -> list[dict]:
    """Score rows without the wall-clock fields (two runs never time alike)."""
    rows = [json.loads(x) for x in (run / "scores.jsonl").read_text().splitlines()]
    for r in rows:
        for timing in ("latency_s", "judge_s", "quota_wait_s", "shared_wait_s"):
            r.pop(timing, None)
    return rows


def config_of(run: Path) -> dict:
    cfg = json.loads((run / "config.json").read_text())
    cfg.pop("out")
    return cfg


def test_a_config_file_gives_the_rows_the_flags_give(tmp_path):
    flags = ["--methods", "quality,redundancy", "--tasks", str(TASKS), "--reports", str(FULL),
             "--reports", str(HALF), "--limit", "3", "--redundancy-protocol", "sampled",
             "--redundancy-max-pairs", "4", "--seed", "7", "--cache", str(tmp_path / "c")]
    assert main(["run", *flags, "--out", str(tmp_path / "by-flags")]) in (0, 3)
    cfg = tmp_path / "run.toml"
    # Sections only group keys; both key spellings are accepted; method options included.
    cfg.write_text(f"""
methods = "quality,redundancy"
reports = ["{FULL}", "{HALF}"]
tasks = "{TASKS}"
limit = 3
seed = 7

[limits]
cache = "{tmp_path / 'c'}"

[method.redundancy]
redundancy-protocol = "sampled"
redundancy_max_pairs = 4
""")
    assert main(["run", "--config", str(cfg), "--out", str(tmp_path / "by-file")]) in (0, 3)
    by_flags, by_file = rows_of(tmp_path / "by-flags"), rows_of(tmp_path / "by-file")
    assert len(by_flags) == 2 * 3 * 2  # 2 agents x 3 reports x 2 methods
    assert by_file == by_flags
    assert config_of(tmp_path / "by-file") == config_of(tmp_path / "by-flags")
    assert config_of(tmp_path / "by-file")["method_options"]["redundancy_max_pairs"] == 4


def test_flags_override_the_file_and_the_file_overrides_the_environment(tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'methods = "quality"\nreports = ["{FULL}"]\nlimit = 1\njudge-model = "from-file"\n'
                   f'redundancy-max-pairs = 9\n')
    monkeypatch.setenv("DRSCORE_JUDGE_MODEL", "from-env")
    monkeypatch.setenv("DRSCORE_JUDGE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("DRSCORE_API_KEY_ENV", "MY_KEY")
    assert main(["run", "--config", str(cfg), "--limit", "2", "--print-config"]) == 0
    printed = tomllib.loads(capsys.readouterr().out)
    assert printed["limit"] == 2  # flag beats file
    assert printed["judge-model"] == "from-file"  # file beats environment
    assert printed["judge-url"] == "http://127.0.0.1:9/v1"  # environment beats built-in default
    assert printed["api-key-env"] == "MY_KEY"
    assert printed["methods"] == "quality" and printed["reports"] == [str(FULL)]
    assert printed["redundancy-max-pairs"] == 9
    assert main(["run", "--config", str(cfg), "--judge-model", "from-flag", "--print-config"]) == 0
    assert tomllib.loads(capsys.readouterr().out)["judge-model"] == "from-flag"


def test_print_config_round_trips_to_the_same_run_config(tmp_path, capsys):
    argv = ["run", "--methods", "quality", "--tasks", str(TASKS), "--reports", str(FULL), "--limit", "2",
            "--race-variant", "vanilla", "--no-json-schema", "--cache", str(tmp_path / "c")]
    assert main([*argv, "--print-config"]) == 0
    text = capsys.readouterr().out
    (tmp_path / "run.toml").write_text(text)
    assert "# --- judge" in text and "race-variant = \"vanilla\"" in text and "no-json-schema = true" in text
    assert main([*argv, "--out", str(tmp_path / "a")]) in (0, 3)
    assert main(["run", "--config", str(tmp_path / "run.toml"), "--out", str(tmp_path / "b")]) in (0, 3)
    assert config_of(tmp_path / "a") == config_of(tmp_path / "b")


def test_config_errors_name_the_file_and_line(tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(f'methods = "quality"\nreports = ["{FULL}"]\n\njudge-ulr = "http://x"\n')
    assert main(["run", "--config", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert f"{cfg}:4: unknown option 'judge-ulr'; did you mean 'judge-url'?" in err
    cfg.write_text('methods = "quality"\nconcurrency = "many"\n')
    assert main(["run", "--config", str(cfg)]) == 1
    assert f"{cfg}:2: concurrency: invalid value" in capsys.readouterr().err
    cfg.write_text('methods = "quality"\nrace-variant = "nope"\n')
    assert main(["run", "--config", str(cfg)]) == 1
    assert "race-variant: 'nope' is not one of" in capsys.readouterr().err
    cfg.write_text('methods = "quality"\n')
    assert main(["run", "--config", str(cfg)]) == 1
    assert "--reports required" in capsys.readouterr().err


def test_limit_scores_the_first_n_reports_of_each_file(tmp_path):
    out = tmp_path / "run"
    assert main(["run", "--methods", "quality", "--tasks", str(TASKS), "--reports", str(FULL),
                 "--reports", str(HALF), "--limit", "2", "--out", str(out), "--cache", str(tmp_path / "c")]) in (0, 3)
    rows = rows_of(out)
    first_two = [str(json.loads(line)["id"]) for line in FULL.read_text().splitlines()[:2]]
    assert sorted((r["agent"], r["task_id"]) for r in rows) == sorted(
        [("claude-3-7-sonnet", t) for t in first_two] + [("claude-first-half", t) for t in first_two])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"]["items"] == 4


def test_without_out_a_run_is_saved_under_runs_and_the_path_printed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--methods", "quality,redundancy", "--tasks", str(TASKS), "--reports", str(FULL),
                 "--limit", "1", "--cache", str(tmp_path / "c")]) in (0, 3)
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1 and re.fullmatch(r"\d{8}-\d{6}-quality-redundancy", runs[0].name)
    assert (runs[0] / "scores.jsonl").is_file() and (runs[0] / "config.json").is_file()
    captured = capsys.readouterr()
    rel = f"runs/{runs[0].name}"
    assert captured.err.startswith(f"run directory: {rel}")  # at the start...
    assert captured.out.rstrip().endswith(f"run directory: {rel}")  # ...and at the end


def test_default_run_dirs_never_collide(tmp_path):
    now = 1_800_000_000.0
    first = default_out_dir(["race", "fact"], tmp_path, now)
    first.mkdir()
    second = default_out_dir(["race", "fact"], tmp_path, now)
    assert first.name.endswith("-race-fact") and second.name == first.name + "-2"


def test_options_are_accepted_before_and_after_the_action(tmp_path, capsys):
    for name, argv in (("a", ["cache", "stats", "--cache", str(tmp_path / "a")]),
                       ("b", ["cache", "--cache", str(tmp_path / "b"), "stats"])):
        assert main(argv) == 0
        # the cache it read (cache stats only reads: an absent cache is reported empty, not created)
        assert json.loads(capsys.readouterr().out)["path"] == str(tmp_path / name / "judge.sqlite")
    assert not (tmp_path / "a" / "judge.sqlite").exists()
    for argv in (["pages", "stats", "--cache", str(tmp_path / "p")],
                 ["pages", "--cache", str(tmp_path / "q"), "stats"]):
        assert main(argv) == 0
    assert (tmp_path / "p" / "pages.sqlite").is_file() and (tmp_path / "q" / "pages.sqlite").is_file()


def test_an_option_given_in_either_place_beats_the_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DRSCORE_CACHE", str(tmp_path / "env"))
    for name, argv in (("a", ["cache", "stats", "--cache", str(tmp_path / "a")]),
                       ("b", ["cache", "--cache", str(tmp_path / "b"), "stats"])):
        assert main(argv) == 0
        assert json.loads(capsys.readouterr().out)["path"] == str(tmp_path / name / "judge.sqlite")
    assert main(["pages", "--cache", str(tmp_path / "c"), "stats"]) == 0
    assert main(["pages", "stats"]) == 0  # nothing given: the environment's
    assert (tmp_path / "c" / "pages.sqlite").is_file() and (tmp_path / "env" / "pages.sqlite").is_file()
    assert not (tmp_path / "env" / "judge.sqlite").exists()


def test_every_command_help_has_an_example():
    missing = []
    for path, command, _ in walk(build_cli()):
        text = help_text(command, path)
        if not re.search(r"^examples?:\n  drscore ", text, re.MULTILINE):
            missing.append(" ".join(path) or "drscore")
    assert missing == []


def test_terminal_leaderboard_uses_the_report_intervals_and_shared_tasks(tmp_path, capsys):
    # The second agent has only 3 of the first agent's 5 tasks.
    few = tmp_path / "reports.few.jsonl"
    few.write_text("\n".join(HALF.read_text().splitlines()[:3]) + "\n")
    out = tmp_path / "run"
    assert main(["run", "--methods", "quality", "--tasks", str(TASKS), "--reports", str(FULL), "--limit", "5",
                 "--reports", str(few), "--out", str(out), "--cache", str(tmp_path / "c")]) in (0, 3)
    text = capsys.readouterr().out
    board = leaderboard(read_run_dir(out).scores, seed=0)["quality"]
    assert "note: Agents were scored on different tasks (" in text and "3 task(s) all of them scored" in text
    for e in board:
        line = next(x for x in text.splitlines() if f" {e.agent} " in f" {x} ")
        assert f"[{e.ci_low:.2f}, {e.ci_high:.2f}]" in line
        assert f"[{e.shared_ci_low:.2f}, {e.shared_ci_high:.2f}]" in line
    # summary.json carries the same intervals
    summary = json.loads((out / "summary.json").read_text())
    for e in board:
        entry = next(r for r in summary["per_agent_method"] if r["agent"] == e.agent)
        assert entry["ci95"] == pytest.approx([e.ci_low, e.ci_high])
    # and drscore report prints the same numbers
    assert main(["report", str(out)]) == 0
    md = (out / "leaderboard.md").read_text()
    for e in board:
        assert f"[{e.ci_low:.3f}, {e.ci_high:.3f}]" in md
    # ...and the paired difference and P(rank first) summary.json holds, in both leaderboard files
    (pair,) = summary["decisions"]["quality"]["pairs"]
    assert f"| {pair['a']} | {pair['b']} | {pair['delta']:+.3f} | [{pair['ci'][0]:+.3f}, {pair['ci'][1]:+.3f}] |" in md
    with open(out / "leaderboard.csv", newline="") as f:
        table = list(csv.DictReader(f))
    (row,) = [r for r in table if r["kind"] == "pair"]
    assert (row["agent"], row["vs"]) == (pair["a"], pair["b"])
    assert float(row["delta"]) == pytest.approx(pair["delta"], rel=1e-5)
    firsts = {r["agent"]: float(r["p_first"]) for r in table if r["kind"] == "agent"}
    assert firsts == pytest.approx(summary["decisions"]["quality"]["p_first"], rel=1e-5)  # 6 digits in CSV


@pytest.mark.parametrize("name", ["quality", "race_score"])
def test_prompts_list_and_show(capsys, name):
    assert main(["prompts", "list"]) == 0
    listing = capsys.readouterr().out
    assert re.search(rf"^{name}\s+[0-9a-f]{{16}}\s+\d+\s+\S", listing, re.MULTILINE)
    assert main(["prompts", "show", name]) == 0
    shown = capsys.readouterr().out
    assert shown == (ROOT / "prompts" / f"{name}.md").read_text(encoding="utf-8")


def test_print_config_leaves_a_redis_password_out(capsys):
    secret = "hunter2-team-password"
    assert main(["run", "--methods", "quality", "--reports", str(FULL),
                 "--redis", f"redis://:{secret}@127.0.0.1:6390/0", "--print-config"]) == 0
    text = capsys.readouterr().out
    assert secret not in text
    assert 'redis = "redis://:***@127.0.0.1:6390/0"' in text and "DRSCORE_REDIS" in text
