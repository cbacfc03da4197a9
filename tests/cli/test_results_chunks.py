"""`load_run` at scale: rows and verdicts in chunks, and export chunk by chunk, with the
same records (and the same last-line-wins rule for repeats) as the whole-file reads."""
from __future__ import annotations

from pathlib import Path

import msgspec
import pandas as pd
import pytest

import drscore
from drscore.engine.runtime.models import ScoreRow, VerdictRecord


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    enc = msgspec.json.Encoder()
    rows = [ScoreRow(task_id=str(t), agent="a", method="m", score=t / 10, subscores={"x": float(t)})
            for t in range(1, 8)]
    rows.append(ScoreRow(task_id="3", agent="a", method="m", score=0.99))  # a resumed run's repeat: wins
    rows.append(ScoreRow(task_id="9", agent="b", method="m", score=None, status="failed",
                         subscores={"y": 2.0}))
    (tmp_path / "scores.jsonl").write_bytes(b"".join(enc.encode(r) + b"\n" for r in rows) + b"{broken\n")
    calls = [VerdictRecord(task_id=str(t), agent="a", method="m", template="q", key=f"k{t}", cached=False,
                           status="ok", verdict={"overall": t}) for t in range(5)]
    (tmp_path / "verdicts.jsonl").write_bytes(b"".join(enc.encode(c) + b"\n" for c in calls))
    return tmp_path


def test_chunks_hold_the_same_rows_as_the_whole_read(run_dir: Path) -> None:
    run = drscore.load_run(run_dir)
    chunks = list(run.iter_rows(3))
    assert [len(c) for c in chunks] == [3, 3, 2]  # 9 lines, the first "3" superseded
    flat = [(r.task_id, r.score) for c in chunks for r in c]
    assert flat == [("1", 0.1), ("2", 0.2), ("4", 0.4), ("5", 0.5), ("6", 0.6), ("7", 0.7), ("3", 0.99),
                    ("9", None)]
    whole = drscore.load_run(run_dir)
    assert sorted((r.task_id, r.score) for r in whole.rows) == sorted(flat, key=lambda p: p[0])
    assert any("not valid JSON" in p.message for p in run.problems)
    assert [len(c) for c in run.iter_verdicts(2)] == [2, 2, 1]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_in_chunks_matches_the_dataframe(run_dir: Path, fmt: str, tmp_path_factory) -> None:
    out = tmp_path_factory.mktemp("export") / f"rows.{fmt}"
    run = drscore.load_run(run_dir)
    assert run.export_table(out, table="rows", fmt=fmt, chunk_size=2) == 8
    got = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
    want = drscore.load_run(run_dir).rows.to_pandas()
    assert list(got.columns) == list(want.columns)  # fixed columns, then sub.x, sub.y
    assert got.set_index("task_id")["score"].to_dict() == pytest.approx(
        {int(k) if fmt == "csv" else k: v for k, v in want.set_index("task_id")["score"].to_dict().items()},
        nan_ok=True)
    calls = out.with_name(f"calls.{fmt}")
    assert run.export_table(calls, table="verdicts", fmt=fmt, chunk_size=2) == 5
