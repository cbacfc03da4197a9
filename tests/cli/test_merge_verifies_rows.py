"""``drscore merge`` checks rows, not only configurations: a row in two shards, a row
outside its shard's part, shards run on different files of the same name, a shard whose
scores.jsonl lost a line, holds a bad line, a row for a report in no input or an edited
score are refused with the reason, and nothing is written; merged money is the sum of
the shards' ledgers."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from drscore.cli import main
from drscore.engine.runtime.io import shard_part
from support.data import ROOT

EXAMPLES = ROOT / "examples"
REPORTS = EXAMPLES / "reports.claude-first-half.jsonl"


def _run(out: Path, shard: str, reports: Path = REPORTS) -> None:
    assert main(["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"), "--reports", str(reports),
                 "--out", str(out), "--shard", shard]) == 0


def _lines(run: Path) -> list[str]:
    return (run / "scores.jsonl").read_text().splitlines()


def _merge(tmp_path: Path, *dirs: Path) -> int:
    return main(["merge", *map(str, dirs), "--out", str(tmp_path / "merged")])


def test_a_row_in_two_shards_is_refused(tmp_path, capsys):
    _run(tmp_path / "s1", "1/2")
    _run(tmp_path / "s2", "2/2")
    # shard 1 also holds one of shard 2's rows: merged, that report would count twice
    stolen = _lines(tmp_path / "s2")[0]
    with open(tmp_path / "s1" / "scores.jsonl", "a") as f:
        f.write(stolen + "\n")
    capsys.readouterr()
    assert _merge(tmp_path, tmp_path / "s1", tmp_path / "s2") == 1
    err = capsys.readouterr().err
    row = json.loads(stolen)
    assert (f"task {row['task_id']!r}, agent {row['agent']!r}, method 'quality' is in both "
            f"{tmp_path / 's1'} and {tmp_path / 's2'}; it would be counted twice") in err
    assert not (tmp_path / "merged").exists()


def test_a_row_outside_its_shards_part_is_refused(tmp_path, capsys):
    _run(tmp_path / "s1", "1/2")
    _run(tmp_path / "s2", "2/2")
    # one row moved from shard 2 to shard 1: still once in all, but not where the split puts it
    moved, *rest = _lines(tmp_path / "s2")
    (tmp_path / "s2" / "scores.jsonl").write_text("".join(line + "\n" for line in rest))
    with open(tmp_path / "s1" / "scores.jsonl", "a") as f:
        f.write(moved + "\n")
    row = json.loads(moved)
    assert shard_part(row["task_id"], row["agent"], 2) == 2
    capsys.readouterr()
    assert _merge(tmp_path, tmp_path / "s1", tmp_path / "s2") == 1
    err = capsys.readouterr().err
    assert f"task {row['task_id']!r}, agent {row['agent']!r} belongs to shard 2/2, not 1/2" in err
    assert not (tmp_path / "merged").exists()


def test_shards_of_different_files_with_one_name_are_refused(tmp_path, capsys):
    other = tmp_path / "elsewhere" / REPORTS.name  # same name, one report changed
    other.parent.mkdir()
    lines = REPORTS.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["article"] += "\n\nOne more paragraph written on the other machine."
    other.write_text("\n".join([json.dumps(first, ensure_ascii=False), *lines[1:]]) + "\n", encoding="utf-8")
    _run(tmp_path / "s1", "1/2")
    _run(tmp_path / "s2", "2/2", reports=other)
    capsys.readouterr()
    assert _merge(tmp_path, tmp_path / "s1", tmp_path / "s2") == 1
    err = capsys.readouterr().err
    assert f"read a different reports file than {tmp_path / 's1'}: {REPORTS.name}" in err
    assert not (tmp_path / "merged").exists()


def test_summary_records_the_inputs_by_content(tmp_path):
    import hashlib

    _run(tmp_path / "s1", "1/2")
    inputs = json.loads((tmp_path / "s1" / "summary.json").read_text())["inputs"]
    assert inputs == [
        {"role": "reports", "file": REPORTS.name, "sha256": hashlib.sha256(REPORTS.read_bytes()).hexdigest()},
        {"role": "tasks", "file": "tasks.jsonl",
         "sha256": hashlib.sha256((EXAMPLES / "tasks.jsonl").read_bytes()).hexdigest()}]


# -- each shard's rows against its own record (issue 25) -------------------------------------

def _two_shards(tmp_path: Path) -> tuple[Path, Path]:
    _run(tmp_path / "s1", "1/2")
    _run(tmp_path / "s2", "2/2")
    return tmp_path / "s1", tmp_path / "s2"


def test_the_summary_records_the_rows_and_the_hash_of_scores_jsonl(tmp_path):
    import hashlib

    s1, _ = _two_shards(tmp_path)
    data = (s1 / "scores.jsonl").read_bytes()
    assert json.loads((s1 / "summary.json").read_text())["scores_file"] == {
        "rows": len(data.splitlines()), "sha256": hashlib.sha256(data).hexdigest()}


def test_a_shard_that_lost_its_last_line_is_refused(tmp_path, capsys):
    s1, s2 = _two_shards(tmp_path)
    lines = _lines(s2)
    (s2 / "scores.jsonl").write_text("".join(line + "\n" for line in lines[:-1]))
    capsys.readouterr()
    assert _merge(tmp_path, s1, s2) == 1
    err = capsys.readouterr().err
    assert (f"{s2 / 'scores.jsonl'} is not the file its run wrote: {len(lines) - 1} lines" in err
            and f"summary.json records {len(lines)} rows" in err)
    assert not (tmp_path / "merged").exists()


def test_a_bad_line_is_reported_by_file_and_line_and_refused(tmp_path, capsys):
    s1, s2 = _two_shards(tmp_path)
    lines = _lines(s1)
    (s1 / "scores.jsonl").write_text("".join(line + "\n" for line in [lines[0], "{broken", *lines[1:]]))
    capsys.readouterr()
    assert _merge(tmp_path, s1, s2) == 1
    err = capsys.readouterr().err
    assert f"{s1 / 'scores.jsonl'}:2: not valid JSON" in err and "nothing merged" in err
    assert not (tmp_path / "merged").exists()


def test_a_made_up_row_for_a_task_in_no_input_is_refused(tmp_path, capsys):
    s1, s2 = _two_shards(tmp_path)
    row = json.loads(_lines(s1)[0])
    # a task no input holds, in the part of the split shard 1 owns (so only the input check can see it)
    task = next(f"made-up-{i}" for i in range(1000) if shard_part(f"made-up-{i}", row["agent"], 2) == 1)
    row["task_id"] = task
    with open(s1 / "scores.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
    capsys.readouterr()
    assert _merge(tmp_path, s1, s2) == 1
    err = capsys.readouterr().err
    assert f"task {task!r}, agent {row['agent']!r} is no report of the input files" in err
    assert not (tmp_path / "merged").exists()


def test_an_edited_score_is_refused(tmp_path, capsys):
    s1, s2 = _two_shards(tmp_path)
    lines = _lines(s1)
    row = json.loads(lines[0])
    row["score"] = 0.999
    (s1 / "scores.jsonl").write_text("".join(line + "\n" for line in [json.dumps(row), *lines[1:]]))
    capsys.readouterr()
    assert _merge(tmp_path, s1, s2) == 1
    assert f"{s1 / 'scores.jsonl'} is not the file its run wrote" in capsys.readouterr().err
    assert not (tmp_path / "merged").exists()


def test_merged_money_is_the_sum_of_the_shards_ledgers(tmp_path):
    from drscore.engine.runtime.calls.ledger import read_totals
    from drscore.judge.mock.server import MockConfig, MockServerProcess

    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"shard-judge": {"input": 2.0, "output": 8.0}}))
    with MockServerProcess(MockConfig()) as mock:
        for shard, out in (("1/2", "s1"), ("2/2", "s2")):
            assert main(["run", "--methods", "quality", "--tasks", str(EXAMPLES / "tasks.jsonl"), "--reports",
                         str(REPORTS), "--out", str(tmp_path / out), "--shard", shard, "--judge-url", mock.url,
                         "--judge-model", "shard-judge", "--prices", str(prices),
                         "--cache", str(tmp_path / f"cache-{out}")]) == 0
        s = mock.stats()
        billed = (s["prompt_tokens"] * 2.0 + s["completion_tokens"] * 8.0) / 1e6
    # what each shard's server said of itself, and a fatal stop met after every item had its
    # answer, as a llama.cpp shard's summary records them
    facts = {"judge_server": {"server": "llama.cpp", "window": 4096, "slots": 4},
             "stop_after_all_items": {"fatal": True, "message": "the judge's key was revoked"}}
    for d in ("s1", "s2"):
        path = tmp_path / d / "summary.json"
        shard = json.loads(path.read_text())
        shard["totals"].update(facts)
        path.write_text(json.dumps(shard))
    assert _merge(tmp_path, tmp_path / "s1", tmp_path / "s2") == 0
    totals = json.loads((tmp_path / "merged" / "summary.json").read_text())["totals"]
    ledgers = [read_totals(tmp_path / d) for d in ("s1", "s2")]
    assert all(ledgers)
    paid = sum(t["run"]["cost_usd"] for t in ledgers if t)
    assert totals["cost_usd"] == pytest.approx(paid, abs=1e-6) == pytest.approx(billed, abs=1e-6)
    # what each shard's process learned of the endpoint (its estimates' error, its margins) is
    # kept per shard, not summed: two errors of 30% are not one of 60%
    merged = json.loads((tmp_path / "merged" / "summary.json").read_text())
    shards = [json.loads((tmp_path / d / "summary.json").read_text())["totals"] for d in ("s1", "s2")]
    assert all("prompts_estimated" in t for t in shards)
    assert "prompts_estimated" not in totals and "quota_margins" not in totals
    assert [m["prompts_estimated"] for m in merged["merged_from"]] == [t["prompts_estimated"] for t in shards]
    # nor a server's window, two shards of 4,096 are not one of 8,192
    assert "judge_server" not in totals and "stop_after_all_items" not in totals
    assert [m["judge_server"] for m in merged["merged_from"]] == [facts["judge_server"]] * 2
    assert totals["ledger"]["by_shard"] == {str(tmp_path / d): t["run"] for d, t in zip(("s1", "s2"), ledgers) if t}
