"""``run --shard K/N`` and ``drscore merge``: the split is deterministic and complete, and
the merged directory has the rows and statistics of one run over everything."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from drscore.cli import main
from drscore.engine.runtime.io import in_shard, shard_of
from drscore.engine.runtime.models import Report
from support.data import ROOT

EXAMPLES = ROOT / "examples"
AGENTS = [EXAMPLES / "reports.claude-3-7-sonnet.jsonl", EXAMPLES / "reports.claude-first-half.jsonl"]


def _run(out: Path, *extra: str) -> int:
    argv = ["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"), "--out", str(out)]
    for path in AGENTS:
        argv += ["--reports", str(path)]
    return main(argv + list(extra))


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "scores.jsonl").read_text().splitlines()]


def test_shard_spec_is_parsed_and_checked():
    assert shard_of("2/3") == (2, 3) and shard_of(None) is None
    for bad in ("0/3", "4/3", "3", "a/b", "1/0"):
        with pytest.raises(ValueError, match="K/N"):
            shard_of(bad)


def test_shard_is_a_hash_of_task_and_agent():
    report = Report(task_id="7", agent="agent-x", report="text")
    # by hand: the first 8 bytes of sha256("7\0agent-x") as a big-endian number, mod N
    expected = int(hashlib.sha256(b"7\x00agent-x").hexdigest()[:16], 16) % 5 + 1
    assert [k for k in range(1, 6) if in_shard(report, k, 5)] == [expected]


def test_shards_cover_every_report_once_and_merge_into_one_run(tmp_path, capsys):
    assert _run(tmp_path / "single") == 0
    for k in (1, 2, 3):
        assert _run(tmp_path / f"s{k}", "--shard", f"{k}/3") == 0
    single = _rows(tmp_path / "single")
    parts = [_rows(tmp_path / f"s{k}") for k in (1, 2, 3)]
    keys = [{(r["task_id"], r["agent"]) for r in part} for part in parts]
    assert all(keys) and not (keys[0] & keys[1] or keys[0] & keys[2] or keys[1] & keys[2])
    assert set().union(*keys) == {(r["task_id"], r["agent"]) for r in single} and len(single) == 20

    capsys.readouterr()
    code = main(["merge", str(tmp_path / "s3"), str(tmp_path / "s1"), str(tmp_path / "s2"),
                 "--out", str(tmp_path / "merged")])
    assert code == 0, capsys.readouterr().err
    merged = _rows(tmp_path / "merged")
    timing = ("latency_s", "judge_s", "quota_wait_s", "shared_wait_s")  # wall-clock measurements differ run to run
    strip = lambda r: {k: v for k, v in r.items() if k not in timing}  # noqa: E731
    assert [strip(r) for r in merged] == [strip(r) for r in single]  # same rows, same (input) order

    one = json.loads((tmp_path / "single" / "summary.json").read_text())
    joined = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert len(joined["per_agent_method"]) == len(one["per_agent_method"]) == 2
    for a, b in zip(one["per_agent_method"], joined["per_agent_method"]):
        assert (a["agent"], a["method"], a["n"], a["failed"], a["rows"]) == \
            (b["agent"], b["method"], b["n"], b["failed"], b["rows"])
        assert b["mean"] == pytest.approx(a["mean"]) and b["ci95"] == pytest.approx(a["ci95"])
    for field in ("items", "items_failed", "calls", "cache_hits", "input_tokens", "output_tokens"):
        assert joined["totals"][field] == one["totals"][field], field
    assert joined["per_method"]["quality"]["statuses"] == one["per_method"]["quality"]["statuses"]
    # the paired comparisons of the joined rows are the single run's
    assert joined["decisions"] == one["decisions"] and joined["decisions"]
    verdicts = (tmp_path / "merged" / "verdicts.jsonl").read_text().splitlines()
    assert len(verdicts) == sum(len((tmp_path / f"s{k}" / "verdicts.jsonl").read_text().splitlines())
                                for k in (1, 2, 3))


def test_merge_refuses_different_configurations_and_missing_parts(tmp_path, capsys):
    assert _run(tmp_path / "s1", "--shard", "1/2") == 0
    assert _run(tmp_path / "s2", "--shard", "2/2", "--seed", "5") == 0
    assert _run(tmp_path / "t2", "--shard", "2/2", "--concurrency", "3") == 0  # pacing may differ
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert "different configuration" in err and "seed" in err and not (tmp_path / "m").exists()
    assert main(["merge", str(tmp_path / "s1"), "--out", str(tmp_path / "m")]) == 1
    assert "missing shard(s) 2/2" in capsys.readouterr().err
    assert main(["merge", str(tmp_path / "s1"), str(tmp_path / "t2"), "--out", str(tmp_path / "m")]) == 0


def test_bad_shard_is_a_clear_error(tmp_path, capsys):
    assert _run(tmp_path / "x", "--shard", "3/2") == 1
    assert "--shard must be K/N" in capsys.readouterr().err
