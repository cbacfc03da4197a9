"""A key in the judge URL (``?key=...``, as some gateways take it, or ``user:pass@``) is
used for the request and shown nowhere: not in config.json, the rows, the summary, the
report, the viewer, the cache, the terminal."""
from __future__ import annotations

from pathlib import Path

import pytest

from drscore.cli import main
from drscore.judge.mock.server import MockConfig, MockServerProcess
from drscore.engine.runtime.calls.redact import forget_secrets
from support.data import ROOT

EXAMPLES = ROOT / "examples"
KEY = "gwkey-7f3a9c2e51"
PASSWORD = "pw-0d5e8b1a77"


@pytest.fixture(autouse=True)
def clean_registry():
    forget_secrets()
    yield
    forget_secrets()


def _everything(*dirs: Path) -> str:
    return "".join(p.read_bytes().decode("utf-8", "replace") for d in dirs for p in d.rglob("*") if p.is_file())


def test_key_in_judge_url_reaches_the_endpoint_and_nothing_else(tmp_path, capsys):
    with MockServerProcess(MockConfig()) as mock:
        host = mock.url.split("://", 1)[1]
        url = f"http://drscore:{PASSWORD}@{host}?key={KEY}&region=eu"
        out, cache = tmp_path / "run", tmp_path / "cache"
        code = main(["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                     "--reports", str(EXAMPLES / "reports.claude-first-half.jsonl"), "--limit", "2",
                     "--judge-url", url, "--judge-model", "mock", "--cache", str(cache), "--out", str(out)])
        sent = mock.stats()["requests"]
    terminal = capsys.readouterr()
    assert code == 0, terminal.err
    assert sent >= 2  # the requests went to the real URL (path before the query)
    assert main(["report", str(out)]) == 0
    assert main(["export", str(out), "--out", str(tmp_path / "rows.csv")]) == 0
    terminal2 = capsys.readouterr()
    stored = _everything(out, cache) + (tmp_path / "rows.csv").read_text()
    for secret in (KEY, PASSWORD):
        assert secret not in stored and secret not in terminal.out + terminal.err + terminal2.out + terminal2.err
    config = (out / "config.json").read_text()
    assert "key=[REDACTED]" in config and "drscore:[REDACTED]@" in config and "region=eu" in config


def test_unreachable_judge_url_error_hides_the_key(tmp_path, capsys):
    url = f"http://127.0.0.1:9/v1?api-key={KEY}"
    code = main(["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                 "--reports", str(EXAMPLES / "reports.claude-first-half.jsonl"), "--limit", "1",
                 "--judge-url", url, "--judge-model", "m", "--cache", str(tmp_path / "c"),
                 "--out", str(tmp_path / "run"), "--max-retries", "0"])
    err = capsys.readouterr().err
    assert code != 0 and "127.0.0.1:9" in err and KEY not in err
    assert KEY not in _everything(tmp_path)


def test_print_config_leaves_the_url_secret_out(capsys):
    assert main(["run", "--methods", "quality", "--reports", "r.jsonl",
                 "--judge-url", f"https://gw.example/v1?token={KEY}", "--print-config"]) == 0
    out = capsys.readouterr().out
    assert KEY not in out and 'judge-url = "https://gw.example/v1?token=[REDACTED]"' in out
