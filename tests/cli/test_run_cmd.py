"""``drscore run`` as a user meets it: bad input, exit status, dry run, secrets, cache CLI."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from drscore.cli import main
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT as REPO_ROOT

ROOT = REPO_ROOT
EXAMPLES = ROOT / "examples"
SECRET = "sk-test-do-not-leak-0123456789abcdef"


def _reports_with_bad_lines(tmp_path: Path) -> Path:
    good = (EXAMPLES / "reports.claude-3-7-sonnet.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    lines = [good[0], "{not json", good[1], json.dumps({"id": 999, "prompt": "x", "article": "text"}),
             json.dumps({"id": 3, "prompt": "x", "article": "  "}), good[2]]
    p = tmp_path / "reports.agent-x.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_bad_lines_are_named_counted_and_the_rest_scored(tmp_path, capsys):
    reports = _reports_with_bad_lines(tmp_path)
    out = tmp_path / "run"
    code = main(["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                 "--reports", str(reports), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 3  # finished, but inputs were skipped
    assert f"{reports}:2: malformed JSON" in err
    assert f"{reports}:4: unknown task id '999'" in err
    assert f"{reports}:5: empty report" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"]["inputs_skipped"] == 3 and summary["totals"]["items"] == 3
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in rows] == ["1", "2", "3"]  # input order
    assert all(r["agent"] == "agent-x" and r["judge"] == "offline" for r in rows)


def test_dry_run_prints_the_plan_and_writes_and_sends_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    with MockServerProcess(MockConfig()) as mock:
        code = main(["run", "--methods", "quality,redundancy", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                     "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--dry-run",
                     "--judge-url", mock.url, "--judge-model", "gpt-4.1", "--cache", str(tmp_path / "c"),
                     "--out", str(out)])
        sent = mock.stats()["requests"]
    text = capsys.readouterr().out
    assert code == 0 and sent == 0 and not out.exists()
    assert "Dry run: nothing was sent" in text and "priced as gpt-4.1" in text
    total = next(line for line in text.splitlines() if line.strip().startswith("total"))
    calls, cost = int(total.split()[1]), float(total.split()[-1])
    assert calls >= 10 and cost > 0  # 10 quality calls at least, priced at gpt-4.1 rates


def test_api_key_never_reaches_the_run_directory_or_the_cache(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DRSCORE_TEST_KEY", SECRET)
    out, cache = tmp_path / "run", tmp_path / "cache"
    with MockServerProcess(MockConfig()) as mock:
        code = main(["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                     "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--judge-url", mock.url,
                     "--judge-model", "mock", "--api-key-env", "DRSCORE_TEST_KEY", "--cache", str(cache),
                     "--out", str(out)])
    assert code == 0
    config = json.loads((out / "config.json").read_text())
    assert config["judge"]["api_key_env"] == "DRSCORE_TEST_KEY" and config["judge"]["api_key_present"] is True
    printed = capsys.readouterr()
    for blob in [p.read_bytes() for p in (*out.iterdir(), *cache.iterdir())] + [printed.out.encode(),
                                                                              printed.err.encode()]:
        assert SECRET.encode() not in blob


def test_cache_commands(tmp_path, capsys):
    cache = tmp_path / "cache"
    with MockServerProcess(MockConfig()) as mock:
        assert main(["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                     "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--judge-url", mock.url,
                     "--judge-model", "mock", "--cache", str(cache), "--out", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    assert main(["cache", "--cache", str(cache), "stats"]) == 0
    stats = json.loads(capsys.readouterr().out)
    # the example tasks are half Chinese, half English: each judged in its language
    assert stats["entries"] == 10 and {t["template"] for t in stats["by_template"]} == {"quality", "quality_zh"}
    key = json.loads((tmp_path / "run" / "verdicts.jsonl").read_text().splitlines()[0])["key"]
    assert main(["cache", "--cache", str(cache), "explain", key]) == 0
    explained = json.loads(capsys.readouterr().out)
    assert explained["components"]["model"] == "mock" and explained["components"]["template"] in ("quality",
                                                                                                "quality_zh")
    assert main(["cache", "--cache", str(cache), "export", str(tmp_path / "c.gz")]) == 0
    assert main(["cache", "--cache", str(tmp_path / "other"), "import", str(tmp_path / "c.gz")]) == 0
    assert "imported 10 entries" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--methods", "nope"], "unknown method(s) nope"),
    (["--methods", "quality", "--judge-url", "http://127.0.0.1:9/v1"], "--judge-model is required"),
])
def test_usage_errors_are_clear(tmp_path, capsys, argv, message):
    code = main(["run", "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), *argv])
    assert code == 1 and message in capsys.readouterr().err


def test_items_a_method_does_not_apply_to_are_skipped_not_failed(tmp_path, capsys):
    # The half-length example reports have too few '## ' sections for the released script's
    # segmentation (--segmentation sections): not applicable, with the reason, and the
    # run still succeeds.
    out = tmp_path / "run"
    code = main(["run", "--methods", "redundancy", "--tasks", str(EXAMPLES / "tasks.jsonl"), "--segmentation",
                 "sections", "--reports", str(EXAMPLES / "reports.claude-first-half.jsonl"), "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    skipped = [r for r in rows if r["status"] == "skipped"]
    assert skipped and all(r["score"] is None and r["errors"][0].startswith("too_few_units") for r in skipped)
    assert summary["totals"]["items_skipped"] == len(skipped) and summary["totals"]["items_failed"] == 0
    assert summary["per_method"]["redundancy"]["statuses"]["skipped:too_few_units"] == len(skipped)
    (line,) = [r for r in summary["per_agent_method"] if r["method"] == "redundancy"]
    assert line["skipped"] == len(skipped) and line["n"] == len(rows) - len(skipped)


def test_a_dry_run_prints_each_templates_input_with_the_bar_its_record_gives(tmp_path, capsys):
    import re
    import sqlite3

    rows = (EXAMPLES / "reports.claude-3-7-sonnet.jsonl").read_text(encoding="utf-8").splitlines()
    history, target = tmp_path / "history.agent.jsonl", tmp_path / "target.agent.jsonl"
    history.write_text("".join(r + "\n" for r in rows if json.loads(r)["id"] in (1, 2, 51, 52, 53)), encoding="utf-8")
    target.write_text("".join(r + "\n" for r in rows if json.loads(r)["id"] in (3, 4, 5, 54, 55)), encoding="utf-8")
    common = ["--methods", "redundancy", "--tasks", str(EXAMPLES / "tasks.jsonl"), "--judge-model", "gpt-4.1",
              "--cache", str(tmp_path / "c")]
    with MockServerProcess(MockConfig(tokenizer="cl100k")) as mock:
        assert main(["run", *common, "--judge-url", mock.url, "--reports", str(history),
                     "--out", str(tmp_path / "history-run")]) == 0
        capsys.readouterr()
        assert main(["run", *common, "--judge-url", mock.url, "--reports", str(history), "--dry-run"]) == 0
        cached = capsys.readouterr().out  # every call is in the cache: nothing to estimate
        assert main(["run", *common, "--judge-url", mock.url, "--reports", str(target), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "Dry run: nothing was sent" in cached and "input tokens: an estimate" not in cached
    with sqlite3.connect(tmp_path / "c" / "judge.sqlite") as db:
        recorded = dict(db.execute("SELECT template, COUNT(*) FROM responses GROUP BY template").fetchall())
    whole = re.search(r"input tokens: an estimate; counting the planned text, the total is within about "
                      r"±([\d.]+)% \(one call: ±(\d+)%, learned from ([\d,]+) answered calls of gpt-4.1\)", text)
    assert whole, text
    assert int(whole.group(3).replace(",", "")) == sum(recorded.values())
    parts = re.findall(r"^    (redundancy_pair\w*): ([\d,]+) in ([\d,]+) calls, ±([\d.]+)% "
                       r"\(learned from ([\d,]+) answered prompts of this template\)$", text, re.M)
    assert {p[0] for p in parts} == {"redundancy_pair", "redundancy_pair_zh"}
    total = next(line for line in text.splitlines() if line.strip().startswith("total")).split()
    assert sum(int(p[2].replace(",", "")) for p in parts) == int(total[1])  # every planned call, by template
    assert sum(int(p[1].replace(",", "")) for p in parts) == int(total[3])  # and every input token
    for name, _, _, bar, learned in parts:
        assert int(learned.replace(",", "")) == recorded[name]
        assert float(bar) < float(whole.group(2))  # a template's own record: narrower than one call's error


@pytest.mark.parametrize("tpm, over", [(100, 10), (10_000_000, 0)])
def test_a_dry_run_warns_of_calls_larger_than_a_minute_of_the_told_token_quota(tmp_path, capsys, tpm, over):
    # 100 tokens a minute: each of the 10 quality calls is larger than the whole quota, which
    # OpenAI refuses outright ("Request too large"); ten million: none is
    code = main(["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                 "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"), "--dry-run",
                 "--judge-url", "http://127.0.0.1:9/v1", "--judge-model", "gpt-4.1", "--tpm", str(tpm),
                 "--cache", str(tmp_path / "c"), "--out", str(tmp_path / "run")])
    text = capsys.readouterr().out
    assert code == 0
    warned = [line for line in text.splitlines() if "larger than the token quota's whole minute" in line]
    assert len(warned) == (1 if over else 0)
    if over:
        assert f"warning: {over} planned call(s) are each larger" in warned[0] and f"({tpm:,} tokens)" in warned[0]
