"""``drscore merge`` checks rows, not only configurations: a row in two shards, a row
outside its shard's part and shards run on different files of the same name are refused
with the reason, and nothing is written."""
from __future__ import annotations

import json
from pathlib import Path

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
