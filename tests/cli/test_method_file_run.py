"""A rubric written as a TOML method file, run by ``drscore run`` against the mock judge
with every engine feature the built-in methods get: a warm re-run makes no call, a
changed ``[score]`` re-scores from the cache while a changed template asks again,
``--samples 3`` gives each row its spread, two agents get paired differences, ``--batch``
goes through the mock's Files + Batches endpoints, ``--max-cost`` stops the run, the dry
run counts the calls, ``--config`` takes ``method_files``, shards merge, and the finished
run reads back through ``drscore report`` (viewer), ``export`` and pandas."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import drscore
from drscore.cli import main
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.data import ROOT

EXAMPLES = ROOT / "examples"
METHOD = "clarity-rubric"
PRICES = {"mock-judge": {"input": 2.0, "output": 8.0}}


@pytest.fixture(scope="module")
def mock():
    with MockServerProcess(MockConfig(batch_delay=0.2)) as server:
        yield server


@pytest.fixture
def rubric(tmp_path) -> Path:
    path = tmp_path / "clarity_rubric.toml"
    shutil.copy(EXAMPLES / "clarity_rubric.toml", path)
    return path


def _args(tmp_path, mock, rubric: Path, out: str, *extra: str, methods: str = METHOD) -> list[str]:
    return ["run", "--method-file", str(rubric), "--methods", methods, "--tasks", str(EXAMPLES / "tasks.jsonl"),
            "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"),
            "--reports", str(EXAMPLES / "reports.claude-first-half.jsonl"),
            "--judge-url", mock.url, "--judge-model", "mock-judge", "--cache", str(tmp_path / "cache"),
            "--out", str(tmp_path / out), "--json", *extra]


def _read(tmp_path, out: str) -> tuple[dict, list[dict], list[dict]]:
    run = tmp_path / out
    rows = [json.loads(x) for x in (run / "scores.jsonl").read_text().splitlines()]
    verdicts = [json.loads(x) for x in (run / "verdicts.jsonl").read_text().splitlines()]
    return json.loads((run / "summary.json").read_text()), rows, verdicts


def _requests(mock) -> int:
    return int(mock.stats()["requests"])


def _scores(rows: list[dict]) -> dict[tuple[str, str], float]:
    return {(r["task_id"], r["agent"]): r["score"] for r in rows if r["method"] == METHOD}


def test_cache_paired_decisions_and_what_a_change_re_asks(tmp_path, mock, rubric, capsys):
    before = _requests(mock)
    assert main(_args(tmp_path, mock, rubric, "cold", methods=f"{METHOD},quality")) == 0
    summary, rows, verdicts = _read(tmp_path, "cold")
    assert _requests(mock) - before == 40  # 10 tasks x 2 agents x 2 methods, one call each
    mine = [r for r in rows if r["method"] == METHOD]
    assert len(mine) == 20 and all(r["status"] == "ok" and 0 <= r["score"] <= 1 for r in mine)
    for r in mine:  # the row's score is the file's weighted mean of its subscores, by hand
        s = r["subscores"]
        expected = ((s["clarity"] - 1) / 9 + 2 * (s["sourcing"] - 1) / 9 + (s["actionability"] - 1) / 9) / 4
        assert r["score"] == pytest.approx(expected)
        assert set(r["subscores"]) == {"clarity", "sourcing", "actionability", "answers_request"}
        assert r["details"]["verdict"] in ("accept", "revise", "reject") and "justification" in r["details"]
    templates = sorted(v["template"] for v in verdicts if v["method"] == METHOD)
    assert templates == [METHOD] * 10 + [f"{METHOD}_zh"] * 10  # tasks 1-5 are Chinese
    (pair,) = summary["decisions"][METHOD]["pairs"]  # two agents, paired on the ten tasks
    assert {pair["a"], pair["b"]} == {"claude-3-7-sonnet", "claude-first-half"} and pair["n"] == 10
    assert json.loads((tmp_path / "cold" / "config.json").read_text())["method_files"] == [str(rubric)]

    # warm: every answer from the cache, no call
    before = _requests(mock)
    assert main(_args(tmp_path, mock, rubric, "warm", methods=f"{METHOD},quality")) == 0
    warm, warm_rows, _ = _read(tmp_path, "warm")
    assert _requests(mock) == before and warm["totals"]["calls"] == 0 and warm["totals"]["cache_hits"] == 40
    assert _scores(warm_rows) == _scores(rows)

    # only [score] changed: the same calls, from the cache, scored anew
    text = rubric.read_text(encoding="utf-8")
    rubric.write_text(text.replace("weights = { clarity = 1, sourcing = 2, actionability = 1 }",
                                   'field = "clarity"'), encoding="utf-8")
    assert main(_args(tmp_path, mock, rubric, "rescored")) == 0
    _, rescored, _ = _read(tmp_path, "rescored")
    assert _requests(mock) == before
    assert all(r["score"] == pytest.approx((r["subscores"]["clarity"] - 1) / 9) for r in rescored)

    # the English template edited: its hash is in the key, so its ten calls are asked again
    rubric.write_text(text.replace("around 5 or 6.", "around 5."), encoding="utf-8")
    assert main(_args(tmp_path, mock, rubric, "edited")) == 0
    assert _requests(mock) - before == 10
    capsys.readouterr()


def test_samples_spread_per_row(tmp_path, mock, rubric, capsys):
    assert main(_args(tmp_path, mock, rubric, "one")) == 0
    before = _requests(mock)
    assert main(_args(tmp_path, mock, rubric, "three", "--samples", "3")) == 0
    _, rows, verdicts = _read(tmp_path, "three")
    assert _requests(mock) - before == 40  # samples 1 and 2 are new requests; sample 0 is the cached K = 1 call
    assert sorted({v["judge_sample"] for v in verdicts}) == [0, 1, 2]
    for r in rows:
        assert len(r["sample_scores"]) == 3 and r["score"] == pytest.approx(sum(r["sample_scores"]) / 3)
        assert r["score_sd"] is not None
    assert any(r["score_sd"] > 0 for r in rows)  # the mock answers each sample afresh
    capsys.readouterr()


def test_batch_mode_through_the_mock_batch_endpoints(tmp_path, mock, rubric, capsys):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    before = mock.stats()
    assert main(_args(tmp_path, mock, rubric, "batch", "--batch", "--batch-window", "0.2", "--batch-poll", "0.1",
                      "--prices", str(prices))) == 0
    summary, rows, _ = _read(tmp_path, "batch")
    after = mock.stats()
    t = summary["totals"]
    assert after["requests"] == before["requests"] and t["synchronous_calls"] == 0  # nothing synchronous
    assert t["batched_calls"] == t["calls"] == 20 == after["batch_answered"] - before["batch_answered"]
    assert len(rows) == 20 and all(r["status"] == "ok" for r in rows)
    capsys.readouterr()


def test_dry_run_and_max_cost(tmp_path, mock, rubric, capsys):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    assert main(_args(tmp_path, mock, rubric, "dry", "--dry-run", "--prices", str(prices))) == 0
    planned = json.loads(capsys.readouterr().out)["totals"]
    assert planned["planned_calls"] == 20 and planned["planned_cost_usd"] > 0
    before = _requests(mock)
    cap = planned["planned_cost_usd"] / 4
    assert main(_args(tmp_path, mock, rubric, "capped", "--prices", str(prices), "--max-cost", f"{cap:.8f}")) == 3
    summary, rows, _ = _read(tmp_path, "capped")
    assert summary["stopped"]["reason"] == "budget" and summary["totals"]["cost_usd"] <= cap
    assert 0 < _requests(mock) - before < 20
    assert any(r["status"] == "failed" and "budget" in r["errors"][0] for r in rows)
    capsys.readouterr()


def test_config_file_shards_merge_and_reading_the_run_back(tmp_path, mock, rubric, capsys):
    config = tmp_path / "run.toml"
    config.write_text(f'methods = ["{METHOD}"]\nmethod_files = ["{rubric}"]\n'
                      f'tasks = "{EXAMPLES / "tasks.jsonl"}"\n'
                      f'reports = ["{EXAMPLES / "reports.claude-3-7-sonnet.jsonl"}", '
                      f'"{EXAMPLES / "reports.claude-first-half.jsonl"}"]\n', encoding="utf-8")
    common = ["--judge-url", mock.url, "--judge-model", "mock-judge", "--cache", str(tmp_path / "cache")]
    for k in (1, 2):
        assert main(["run", "--config", str(config), *common, "--shard", f"{k}/2", "--out", str(tmp_path / f"p{k}")]) \
            in (0, 3)
    assert main(["merge", str(tmp_path / "p1"), str(tmp_path / "p2"), "--out", str(tmp_path / "all")]) == 0
    merged = json.loads((tmp_path / "all" / "summary.json").read_text())
    assert [e["n"] for e in merged["per_agent_method"] if e["method"] == METHOD] == [10, 10]
    assert METHOD in merged["decisions"]
    # the finished run reads back like any other: report + viewer, export, pandas
    assert main(["report", str(tmp_path / "all")]) == 0
    viewer = (tmp_path / "all" / "viewer.html").read_text(encoding="utf-8")
    assert METHOD in viewer and "justification" in viewer
    assert main(["export", str(tmp_path / "all"), "--out", str(tmp_path / "rows.csv")]) == 0
    header = (tmp_path / "rows.csv").read_text(encoding="utf-8").splitlines()[0]
    assert "sub.clarity" in header and "sub.sourcing" in header
    frame = drscore.load_run(tmp_path / "all").rows.to_pandas()
    assert set(frame["method"]) == {METHOD} and len(frame) == 20
    capsys.readouterr()


def test_a_run_directory_holds_one_set_of_method_files(tmp_path, rubric, capsys):
    other = tmp_path / "other.toml"
    other.write_text(rubric.read_text(encoding="utf-8"), encoding="utf-8")
    base = ["run", "--methods", METHOD, "--tasks", str(EXAMPLES / "tasks.jsonl"), "--reports",
            str(EXAMPLES / "reports.claude-first-half.jsonl"), "--limit", "2", "--out", str(tmp_path / "r")]
    assert main([*base, "--method-file", str(rubric)]) == 0
    assert main([*base, "--method-file", str(rubric)]) == 0  # the same command resumes
    capsys.readouterr()
    assert main([*base, "--method-file", str(other)]) == 1
    assert "method_files" in capsys.readouterr().err
