"""``drscore.load_run(DIR)`` with ``.to_pandas()``, and ``drscore export``."""
from __future__ import annotations

import builtins
import json
from pathlib import Path

import pandas as pd
import pytest

import drscore
from drscore.cli import main
from drscore.results import ROW_COLUMNS, VERDICT_COLUMNS
from support.data import ROOT

EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("results")
    out = tmp / "run"
    assert main(["run", "--methods", "quality,redundancy", "--tasks", str(EXAMPLES / "tasks.jsonl"),
                 "--reports", str(EXAMPLES / "reports.claude-3-7-sonnet.jsonl"),
                 "--reports", str(EXAMPLES / "reports.claude-first-half.jsonl"), "--limit", "3",
                 "--cache", str(tmp / "c"), "--out", str(out)]) in (0, 3)
    return out


def test_rows_and_verdicts_as_dataframes(run_dir):
    run = drscore.load_run(run_dir)
    lines = [json.loads(x) for x in (run_dir / "scores.jsonl").read_text().splitlines()]
    calls = [json.loads(x) for x in (run_dir / "verdicts.jsonl").read_text().splitlines()]
    subs = sorted({k for r in lines for k in r["subscores"]})
    df = run.rows.to_pandas()
    assert df.shape == (2 * 3 * 2, len(ROW_COLUMNS) + len(subs))  # 2 agents x 3 reports x 2 methods
    assert list(df.columns) == [*ROW_COLUMNS, *(f"sub.{s}" for s in subs)]
    assert set(df["method"]) == {"quality", "redundancy"} and set(df["agent"]) == {
        "claude-3-7-sonnet", "claude-first-half"}
    # a quality row's subscores land in its columns; a redundancy row has no quality subscore
    q = next(r for r in lines if r["method"] == "quality")
    got = df[(df.method == "quality") & (df.task_id == q["task_id"]) & (df.agent == q["agent"])].iloc[0]
    assert got["sub.clarity"] == q["subscores"]["clarity"] and got["score"] == q["score"]
    assert df[df.method == "redundancy"]["sub.clarity"].isna().all()
    v = run.verdicts.to_pandas()
    assert v.shape == (len(calls), len(VERDICT_COLUMNS)) and list(v.columns) == list(VERDICT_COLUMNS)
    assert json.loads(v.iloc[0]["verdict"]) == calls[0]["verdict"]
    # the same frame through the run itself; typed records stay available
    assert run.to_pandas().equals(df)
    assert run.rows[0].method in ("quality", "redundancy") and len(run.verdicts) == len(calls)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_writes_one_flat_table(run_dir, tmp_path, fmt, capsys):
    target = tmp_path / f"rows.{fmt}"
    assert main(["export", str(run_dir), "--format", fmt, "--out", str(target)]) == 0
    assert f"{target} (12 rows)" in capsys.readouterr().out
    back = pd.read_csv(target, dtype={"task_id": str}) if fmt == "csv" else pd.read_parquet(target)
    expected = drscore.load_run(run_dir).rows.to_pandas()
    assert back.shape == expected.shape and list(back.columns) == list(expected.columns)
    assert sorted(back["score"].dropna().round(6)) == sorted(expected["score"].dropna().round(6))
    assert main(["export", str(run_dir), "--table", "verdicts"]) == 0
    assert (run_dir / "verdicts.csv").is_file()


def test_missing_pandas_names_the_extra(run_dir, monkeypatch):
    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    run = drscore.load_run(run_dir)
    with pytest.raises(ImportError, match=r"pip install 'drscore\[pandas\]'"):
        run.rows.to_pandas()
    assert len(run.rows) == 12  # the typed rows need no pandas
