"""The conventions every ``drscore`` command follows (README, exit status): a mistyped
command or option gets the right suggestion, an error shows the usage of the command that
failed, one error prefix, exit 2 for usage only and 1 for errors, no "(default: None)" in
any help, TOML lists where a flag repeats or takes a comma-separated list, and the
environment's place in the order of defaults."""
from __future__ import annotations

import json
import tomllib

import pytest

from drscore.cli import build_cli, main, walk
from drscore.commands._framework import help_text
from support.data import ROOT

EXAMPLES = ROOT / "examples"
TASKS = EXAMPLES / "tasks.jsonl"
FULL = EXAMPLES / "reports.claude-3-7-sonnet.jsonl"


def test_a_mistyped_option_suggests_the_right_one(capsys):
    assert main(["run", "--jugde-url", "http://x/v1"]) == 2
    err = capsys.readouterr().err
    assert "did you mean --judge-url?" in err
    assert "--judge-model" not in err  # one suggestion, the closest


def test_a_mistyped_command_suggests_the_right_one(capsys):
    assert main(["rnu", "--methods", "quality"]) == 2
    assert "no such command 'rnu'; did you mean 'run'?" in capsys.readouterr().err
    assert main(["cache", "stast"]) == 2
    assert "did you mean 'stats'?" in capsys.readouterr().err


def test_an_error_shows_the_usage_of_the_sub_command_that_failed(capsys):
    assert main(["race", "rescore", "--criteria", "c.jsonl"]) == 2  # --judgements missing
    err = capsys.readouterr().err
    assert err.startswith("Usage: drscore race rescore [OPTIONS]")
    assert "Usage: drscore [OPTIONS]" not in err
    assert err.rstrip().splitlines()[-1].startswith("drscore: error: ")


def test_one_error_prefix_for_usage_and_other_errors(tmp_path, capsys):
    assert main(["run", "--methods", "quality", "--reports", str(tmp_path / "none.jsonl")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("drscore: error: ") and "none.jsonl" in err[-1]
    assert main(["run", "--reports", str(FULL)]) == 2  # --methods missing: usage
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "drscore: error: --methods required (on the command line or in the --config file)"


@pytest.mark.parametrize("argv", [
    ["report", "runs/none"],
    ["export", "runs/none"],
    ["compare", "runs/a", "runs/b"],
    ["agree", "--human", "human.jsonl", "--run", "runs/none"],
    ["race", "rescore", "--criteria", "criteria.jsonl", "--judgements", "judgements.jsonl"],
    ["fact", "rescore", "validated.jsonl"],
    ["tasks", "domains", "runs/none"],
    ["citations", "--reports", "reports.jsonl"],
])
def test_a_file_that_is_not_there_is_an_error_not_a_usage_error(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("drscore: error: ")


def test_usage_errors_exit_2(capsys):
    assert main(["run", "--methods", "quality", "--reports", "r.jsonl", "--limit", "many"]) == 2
    assert main(["run", "--methods", "quality", "--reports", "r.jsonl", "--format", "pdf"]) == 2
    assert main(["export", "r", "--format", "xls"]) == 2
    assert main(["report"]) == 2  # RUN_DIR missing
    assert main([]) == 2  # no command: the help, as a usage error
    assert main(["--version"]) == 0 and main(["run", "--help"]) == 0


def test_a_run_with_not_one_valid_input_exits_1(tmp_path, capsys):
    bad = tmp_path / "reports.jsonl"
    bad.write_text('{"task_id": "t1"}\nnot json\n')
    code = main(["run", "--methods", "quality", "--reports", str(bad), "--tasks", str(TASKS),
                 "--out", str(tmp_path / "run"), "--no-cache"])
    assert code == 1
    assert "not one valid input" in capsys.readouterr().err


def test_no_help_says_default_none():
    offenders = [" ".join(path) or "drscore" for path, command, _ in walk(build_cli())
                 if "default: None" in help_text(command, path) or "(default: None)" in help_text(command, path)]
    assert offenders == []


def test_a_toml_list_is_accepted_for_a_comma_separated_flag(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'methods = ["quality", "redundancy"]\nreports = "{FULL}"\n')
    assert main(["run", "--config", str(cfg), "--print-config"]) == 0
    printed = tomllib.loads(capsys.readouterr().out)
    # the same run as --methods quality,redundancy; a single value for a repeatable flag is one item
    assert printed["methods"] == "quality,redundancy" and printed["reports"] == [str(FULL)]


def test_openai_base_url_is_the_default_judge_url_below_drscore_judge_url(monkeypatch, capsys):
    monkeypatch.delenv("DRSCORE_JUDGE_URL", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    argv = ["run", "--methods", "quality", "--reports", str(FULL), "--print-config"]
    assert main(argv) == 0
    assert tomllib.loads(capsys.readouterr().out)["judge-url"] == "http://127.0.0.1:9/v1"
    monkeypatch.setenv("DRSCORE_JUDGE_URL", "http://127.0.0.1:10/v1")
    assert main(argv) == 0
    assert tomllib.loads(capsys.readouterr().out)["judge-url"] == "http://127.0.0.1:10/v1"
    assert main([*argv, "--judge-url", "http://127.0.0.1:11/v1"]) == 0
    assert tomllib.loads(capsys.readouterr().out)["judge-url"] == "http://127.0.0.1:11/v1"


def test_an_unset_key_variable_is_named_as_unset(mock_url_requiring_a_key, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MY_JUDGE_KEY", raising=False)
    argv = ["run", "--methods", "quality", "--reports", str(FULL), "--tasks", str(TASKS), "--limit", "1",
            "--judge-url", mock_url_requiring_a_key, "--judge-model", "m", "--api-key-env", "MY_JUDGE_KEY",
            "--no-cache", "--out", str(tmp_path / "a")]
    assert main(argv) == 1
    unset = capsys.readouterr().err
    assert "$MY_JUDGE_KEY is not set" in unset
    monkeypatch.setenv("MY_JUDGE_KEY", "wrong")
    assert main([*argv[:-1], str(tmp_path / "b")]) == 1
    wrong = capsys.readouterr().err
    assert "authentication failed" in wrong and "is not set" not in wrong


@pytest.fixture
def mock_url_requiring_a_key():
    """A tiny endpoint that answers every request 401 (as OpenAI does without a valid key)."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                         "code": "invalid_api_key"}}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_prompts_list_into_a_closed_pipe_is_quiet_and_exits_0():
    import subprocess
    import sys

    proc = subprocess.run(f"'{sys.executable}' -m drscore.cli prompts list | head -1", shell=True,
                          capture_output=True, text=True, timeout=60,
                          executable="/bin/bash", env=None)
    assert proc.stdout.startswith("name")
    assert "Broken pipe" not in proc.stderr and "Traceback" not in proc.stderr
    status = subprocess.run(["bash", "-o", "pipefail", "-c",
                             f"'{sys.executable}' -m drscore.cli prompts list | head -1 >/dev/null"],
                            timeout=60).returncode
    assert status == 0


def test_run_dir_arguments_are_named_alike_and_the_old_spelling_still_works():
    metavars = {" ".join(path): [p.make_metavar(ctx) for p in command.params if p.param_type_name == "argument"]
                for path, command, ctx in walk(build_cli())}
    assert metavars["report"] == ["RUN_DIR"] and metavars["export"] == ["RUN_DIR"]
    assert metavars["tasks domains"] == ["RUN_DIR"] and metavars["compare"] == ["RUN_DIR_A", "RUN_DIR_B"]
    agree = help_text(dict((" ".join(p), c) for p, c, _ in walk(build_cli()))["agree"], ("agree",))
    assert "--run, --run-dir DIR" in agree


def test_run_config_with_report_objects_says_what_it_takes():
    import drscore

    with pytest.raises(TypeError, match="takes JSONL file paths, not Report objects"):
        drscore.RunConfig(methods=["quality"], reports=[drscore.Report(task_id="1", agent="a", report="x")])


def test_ctrl_c_says_truthfully_whether_answers_were_cached():
    from drscore.api import JudgeConfig
    from drscore.commands._common import interrupt_note_for

    assert "in the cache" in interrupt_note_for(JudgeConfig(url="http://127.0.0.1:9/v1", model="m"))
    assert "nothing was cached" in interrupt_note_for(JudgeConfig(url="http://127.0.0.1:9/v1", model="m",
                                                                  no_cache=True))
    assert "in the cache" not in interrupt_note_for(JudgeConfig())  # the offline judge is never cached


def test_cache_explain_takes_a_key_prefix_and_shows_the_answer(tmp_path, capsys):
    import asyncio

    from drscore.engine.runtime.calls.cache import JudgeCache

    async def fill() -> None:
        cache = await JudgeCache.open(tmp_path / "judge.sqlite")
        try:
            await cache.put("ab" * 32, b'{"score": 3}', {"model": "m", "template": "quality"})
            await cache.put("ac" * 32, b'{"score": 1}', {"model": "m", "template": "quality"})
        finally:
            await cache.close()

    asyncio.run(fill())
    assert main(["cache", "explain", "abab", "--cache", str(tmp_path)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["key"] == "ab" * 32 and shown["answer"] == {"score": 3}
    assert main(["cache", "explain", "a", "--cache", str(tmp_path)]) == 1  # names two entries
    assert "matches 2 entries" in capsys.readouterr().err
    assert main(["cache", "explain", "ff", "--cache", str(tmp_path)]) == 1


def test_report_without_matplotlib_writes_everything_but_the_charts(tmp_path):
    import subprocess
    import sys

    run = tmp_path / "run"
    assert main(["run", "--methods", "quality", "--tasks", str(TASKS), "--reports", str(FULL), "--limit", "2",
                 "--out", str(run), "--no-cache"]) in (0, 3)
    # matplotlib made unimportable, as on the base install without the report extra
    code = ("import sys; sys.modules['matplotlib'] = None; from drscore.cli import main; "
            f"sys.exit(main(['report', {str(run)!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "warning: report.html has no charts" in proc.stderr and "drscore[report]" in proc.stderr
    for name in ("leaderboard.md", "leaderboard.csv", "report.html", "viewer.html"):
        assert (run / name).is_file()
    html = (run / "report.html").read_text()
    assert "Chart not drawn" in html and "<svg" not in html


def test_redis_with_the_offline_judge_is_said_to_be_unused(tmp_path, capsys):
    code = main(["run", "--methods", "quality", "--tasks", str(TASKS), "--reports", str(FULL), "--limit", "1",
                 "--redis", "redis://127.0.0.1:9/0", "--out", str(tmp_path / "run")])
    assert code in (0, 3)  # not an error: Redis (unreachable here) is never contacted
    assert "--redis is not used with the offline judge" in capsys.readouterr().err


def test_a_chinese_task_on_the_built_in_zh_template_is_warned_about(tmp_path, capsys):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "quality.md").write_text((ROOT / "prompts" / "quality.md").read_text(encoding="utf-8"),
                                        encoding="utf-8")
    argv = ["run", "--methods", "quality", "--tasks", str(TASKS), "--reports", str(FULL), "--limit", "1",
            "--prompts", str(prompts), "--dry-run"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    # examples/tasks.jsonl: tasks 1-5 are Chinese
    assert ("--prompts overrides quality but not quality_zh: Chinese tasks (5 among the tasks) are judged "
            "with the built-in quality_zh") in err
    (prompts / "quality_zh.md").write_text((ROOT / "prompts" / "quality_zh.md").read_text(encoding="utf-8"),
                                           encoding="utf-8")
    assert main(argv) == 0
    assert "quality_zh" not in capsys.readouterr().err
