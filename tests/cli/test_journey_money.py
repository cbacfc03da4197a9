"""Journeys: one run lived as users live it — a budget stop, the same command again, a
Ctrl-C, ``kill -9`` and resumes, then the finish — against the mock judge, which counts
what it billed. After every step: the endpoint billed no more than the cap plus one
call; the run's reported total is what the endpoint billed (exactly when no call was
interrupted in flight, else within the bound the run states); rows, verdicts and the
viewer's rows agree."""
from __future__ import annotations

import signal

import pytest

from drscore.engine.reporting.view_index import ViewIndex
from drscore.judge.mock.server import MockConfig, MockServerProcess
from support.journey import Journey, viewer_rows

CENT = 0.005  # "to the cent"


def _agree(j: Journey) -> None:
    """Rows, verdicts and the viewer's rows tell one story; the rows' and the verdicts'
    costs add up to what the run paid for the answers they use."""
    rows = j.rows()
    keys = j.row_keys()
    assert len(keys) == len(rows) == j.items  # every report x method once
    verdicts = j.verdicts()
    assert {(v["task_id"], v["agent"], v["method"]) for v in verdicts} <= keys
    assert sum(v["cost_usd"] or 0.0 for v in verdicts) == pytest.approx(sum(r["cost_usd"] for r in rows), abs=1e-6)
    index = ViewIndex(j.out)
    try:
        assert viewer_rows(index) == keys
    finally:
        index.close()


def test_budget_stop_reruns_ctrl_c_and_finish_report_what_the_endpoint_billed(tmp_path):
    with MockServerProcess(MockConfig(latency=0.05, seed=3)) as mock:
        j = Journey(tmp_path, mock)

        # 1. A cap the run cannot finish under: it stops at the budget.
        cap = 0.1
        first = j.run("--max-cost", str(cap))
        assert first.returncode == 3, first.stderr
        billed = j.billed()
        assert 0 < billed <= cap + j.largest_call()
        assert "--max-cost $0.1 reached" in first.stderr and "covers every invocation" in first.stderr
        s = j.summary()
        assert s["stopped"]["reason"] == "budget"
        # nothing was interrupted in flight: the run's total is the bill, to the cent and closer
        assert j.bound() == 0
        assert j.reported() == pytest.approx(billed, abs=1e-6)
        assert s["totals"]["cost_usd"] == pytest.approx(billed, abs=1e-6)
        _agree(j)

        # 2, 3. The same command twice: nothing is sent, one line says why, exit 3.
        for _ in range(2):
            again = j.run("--max-cost", str(cap))
            assert again.returncode == 3
            assert j.billed() == billed
            lines = [line for line in again.stderr.splitlines() if line.startswith("drscore:")]
            assert len(lines) == 1 and "nothing more is spent at this cap" in lines[0]
            assert j.reported() == pytest.approx(billed, abs=1e-6)
            _agree(j)  # the files of the stopped invocation are untouched

        # 4. A higher cap, and a Ctrl-C while calls are at the judge: no new call is sent, the
        # ones at the judge answer, and the run's total is the bill again.
        cap = 0.2
        stopped = j.interrupted(signal.SIGINT, 25, "--max-cost", str(cap))
        assert stopped.returncode == 130
        assert "Traceback" not in stopped.stderr and "never retrieved" not in stopped.stderr
        said = [line for line in stopped.stderr.splitlines() if line.startswith("interrupted")]
        assert len(said) == 1 and "run total $" in said[0]
        assert "stopping: no new judge calls" in stopped.stderr
        billed = j.billed()
        assert billed <= cap + j.largest_call()
        assert j.bound() == 0 and j.reported() == pytest.approx(billed, abs=1e-6)
        assert j.ledger()["invocations"] == 2 and j.summary()["stopped"]["reason"] == "interrupted"

        # 4b. Ctrl-C twice: it quits at once; the calls left at the judge are bounded, not lost.
        stopped = j.interrupted(signal.SIGINT, 25, "--max-cost", str(cap), twice=True)
        assert stopped.returncode == 130 and "Traceback" not in stopped.stderr
        billed = j.billed()
        assert billed <= cap + j.largest_call()
        assert j.reported() - 1e-9 <= billed <= j.reported() + j.bound() + 1e-9
        said = [line for line in stopped.stderr.splitlines() if line.startswith("interrupted")]
        assert len(said) == 1 and ("interrupted in flight" in said[0]) == (j.bound() > 0)

        # 5. The finish: every paid call is in the run's total, in every place it is shown.
        done = j.run()
        assert done.returncode == 0, done.stderr
        billed = j.billed()
        total = j.reported()
        assert total <= billed + 1e-9 <= total + j.bound() + 1e-9
        t = j.summary()["totals"]
        assert t["cost_usd"] == pytest.approx(total, abs=1e-6)
        assert t["ledger"]["invocations"] == 4
        this = t["ledger"]["by_invocation"]["4"]["cost_usd"]
        assert t["this_invocation"]["cost_usd"] == pytest.approx(this, abs=1e-6) and this < total
        assert f"this invocation ${this:.4f}; run total ${total:.4f}" in done.stdout
        # a row answered from the cache carries what an earlier invocation paid for it
        assert sum(r["cost_usd"] for r in j.rows()) == pytest.approx(total, abs=1e-6)
        assert sum(m["cost_usd"] for m in j.summary()["per_method"].values()) == pytest.approx(total, abs=1e-6)
        _agree(j)


def test_three_kill_9_and_resume_cycles_keep_the_viewer_on_the_rows_and_the_money_bounded(tmp_path):
    with MockServerProcess(MockConfig(latency=0.03, seed=5)) as mock:
        j = Journey(tmp_path, mock)
        index = ViewIndex(j.out, tmp_path / "view.sqlite")  # one index across every cycle, as a viewer left open
        try:
            for cycle in range(3):
                killed = j.kill9(40 + 30 * cycle)
                assert killed.returncode == -signal.SIGKILL
                assert viewer_rows(index) == j.row_keys(), f"cycle {cycle + 1}"
                billed = j.billed()
                assert j.reported() - 1e-9 <= billed <= j.reported() + j.bound() + 1e-9
                assert j.ledger()["interrupted_in_flight"]["calls"] <= j.concurrency * (cycle + 1)
            done = j.run()
            assert done.returncode == 0, done.stderr
            assert viewer_rows(index) == j.row_keys() and len(j.row_keys()) == j.items
        finally:
            index.close()
        billed = j.billed()
        assert j.reported() - 1e-9 <= billed <= j.reported() + j.bound() + 1e-9
        assert "may have been billed for" in done.stdout + done.stderr
        _agree(j)
