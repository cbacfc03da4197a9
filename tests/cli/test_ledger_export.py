"""The ledger as data: ``drscore export DIR --table ledger`` (one row per paid call, every
invocation) and ``drscore.load_run(DIR).ledger`` / ``.paid_calls``."""
from __future__ import annotations

import csv

import msgspec
import pytest

import drscore
from drscore.cli import main
from drscore.engine.runtime.calls.ledger import CALLER, LEDGER_FILE, RunLedger
from drscore.engine.runtime.models import ScoreRow


def _run_dir(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "scores.jsonl").write_bytes(msgspec.json.encode(ScoreRow(task_id="1", agent="a", method="quality",
                                                                    score=0.5)) + b"\n")
    for inv, cost in ((1, 0.25), (2, 0.125)):
        ledger = RunLedger(run / LEDGER_FILE)
        token = CALLER.set(("1", "a", "quality"))
        call = ledger.sent(f"key-{inv}", "quality", 1.0)
        ledger.paid(call, input_tokens=100 * inv, cached_input_tokens=0, output_tokens=7, reasoning_tokens=0,
                    cost_usd=cost, cost_usd_uncached=cost, judge_s=0.5, wait_s=0.0)
        CALLER.reset(token)
        ledger.close("interrupted" if inv == 1 else "finished")
    return run


def test_export_writes_one_row_per_paid_call_of_every_invocation(tmp_path, capsys):
    run = _run_dir(tmp_path)
    assert main(["export", str(run), "--table", "ledger"]) == 0
    assert f"{run / 'ledger.csv'} (2 rows)" in capsys.readouterr().out
    with open(run / "ledger.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["inv"], r["key"], r["task"], r["agent"], r["method"], r["input_tokens"], r["cost_usd"])
            for r in rows] == [("1", "key-1", "1", "a", "quality", "100", "0.25"),
                               ("2", "key-2", "1", "a", "quality", "200", "0.125")]


def test_load_run_reads_the_ledger(tmp_path):
    run = drscore.load_run(_run_dir(tmp_path))
    assert run.ledger is not None and run.ledger["run"]["cost_usd"] == pytest.approx(0.375)
    assert run.ledger["by_invocation"]["1"]["cost_usd"] == pytest.approx(0.25)
    df = run.paid_calls.to_pandas()
    assert list(df["inv"]) == [1, 2] and df["cost_usd"].sum() == pytest.approx(0.375)
