"""Money and rows across the invocations of one run (issue 25): the run ledger against what
the endpoint billed.

The issue's setting: the first ``--n`` DeepResearch Bench reports with quality and
redundancy, gpt-4.1 prices, the project's mock judge (a child process, 50 ms a call)
counting every token it bills; ``drscore run`` as a user runs it (a subprocess). A
reference run without a cap measures what the whole run costs (F); then:

(a) **budget**: ``--max-cost 0.3 F`` (it stops), the same command twice more — what the
    endpoint billed for each re-run (target: nothing more, at most one call);
(b) **no interruption in flight**: that stop, a higher cap that stops again, the finish —
    the run's reported total against the bill (target: equal to the cent);
(c) **Ctrl-C**: budget stop, two re-runs, a Ctrl-C (SIGINT) with calls at the judge (the
    run stops sending and lets them answer), then a double Ctrl-C (it quits at once, the
    calls at the judge are lost in flight), the finish — reported total against the bill,
    and the bound the run states for the calls lost in flight (target: within 3%);
(d) **kill -9**: three ``kill -9`` / resume cycles with one ``drscore view`` index kept
    across them, then the finish — the viewer's rows against ``scores.jsonl`` after each
    (target: equal), and the money as in (c).

    .venv/bin/python -m bench.ledger [--n 20 --concurrency 8]

Without the shared data the bundled ``examples/`` are used (the JSON says so).
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench.machine import machine
from bench.shared_data import DRB
from drscore.engine.reporting.view_index import ViewIndex
from drscore.judge.mock.server import MockConfig, MockServerProcess

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support.journey import Journey, viewer_rows  # noqa: E402

LATENCY = 0.05
TASKS = [DRB / "tasks.jsonl"]  # the examples' when the shared data is missing (main)


def _money(j: Journey) -> dict:
    billed, reported, bound = j.billed(), j.reported(), j.bound()
    return {"billed_usd": round(billed, 6), "reported_usd": round(reported, 6),
            "difference_usd": round(billed - reported, 6),
            "difference_pct": round(100 * (billed - reported) / billed, 3) if billed else 0.0,
            "stated_bound_usd": round(bound, 6), "within_bound": reported - 1e-9 <= billed <= reported + bound + 1e-9,
            "invocations": j.ledger()["invocations"]}


def _journey(tmp: Path, name: str, reports: Path, concurrency: int) -> tuple[MockServerProcess, Journey]:
    (tmp / name).mkdir()
    mock = MockServerProcess(MockConfig(latency=LATENCY, seed=7))
    mock.start()
    return mock, Journey(tmp / name, mock, reports=reports, tasks=TASKS[0], concurrency=concurrency)


def reference(tmp: Path, reports: Path, concurrency: int) -> dict:
    mock, j = _journey(tmp, "reference", reports, concurrency)
    try:
        t0 = time.perf_counter()
        done = j.run()
        wall = time.perf_counter() - t0
        return {"exit": done.returncode, "billed_usd": round(j.billed(), 6), "reported_usd": round(j.reported(), 6),
                "calls": mock.stats()["ok"], "wall_s": round(wall, 2)}
    finally:
        mock.close()


def budget_and_ctrl_c(tmp: Path, reports: Path, concurrency: int, full: float, calls: int) -> dict:
    mock, j = _journey(tmp, "c", reports, concurrency)
    try:
        cap = round(0.3 * full, 4)
        out: dict = {"cap_usd": cap}
        first = j.run("--max-cost", str(cap))
        out["1_budget_stop"] = {"exit": first.returncode, **_money(j), "over_cap_usd": round(max(0, j.billed() - cap), 6)}
        reruns = []
        for _ in range(2):
            before = j.billed()
            again = j.run("--max-cost", str(cap))
            reruns.append({"exit": again.returncode, "billed_by_this_rerun_usd": round(j.billed() - before, 6),
                           "line": again.stderr.strip().splitlines()[-1][:200]})
        out["2_reruns_at_the_same_cap"] = reruns
        higher = round(0.6 * full, 4)
        stopped = j.interrupted(signal.SIGINT, max(1, calls // 10), "--max-cost", str(higher))
        out["3_ctrl_c"] = {"exit": stopped.returncode, "cap_usd": higher, **_money(j),
                           "traceback": "Traceback" in stopped.stderr,
                           "lines": stopped.stderr.strip().splitlines()[-2:]}
        stopped = j.interrupted(signal.SIGINT, max(1, calls // 10), "--max-cost", str(higher), twice=True)
        out["3b_double_ctrl_c"] = {"exit": stopped.returncode, "cap_usd": higher, **_money(j),
                                   "traceback": "Traceback" in stopped.stderr,
                                   "lines": stopped.stderr.strip().splitlines()[-2:]}
        done = j.run()
        out["4_finish"] = {"exit": done.returncode, **_money(j)}
        return out
    finally:
        mock.close()


def no_interruption(tmp: Path, reports: Path, concurrency: int, full: float) -> dict:
    mock, j = _journey(tmp, "b", reports, concurrency)
    try:
        steps = {}
        for name, extra in (("budget_stop_0.3F", ["--max-cost", str(round(0.3 * full, 4))]),
                            ("rerun_same_cap", ["--max-cost", str(round(0.3 * full, 4))]),
                            ("budget_stop_0.6F", ["--max-cost", str(round(0.6 * full, 4))]),
                            ("finish", [])):
            p = j.run(*extra)
            steps[name] = {"exit": p.returncode, **_money(j)}
        steps["equal_to_the_cent"] = all(abs(s["difference_usd"]) < 0.005 for s in steps.values()
                                         if isinstance(s, dict))
        return steps
    finally:
        mock.close()


def kill_cycles(tmp: Path, reports: Path, concurrency: int, calls: int) -> dict:
    mock, j = _journey(tmp, "d", reports, concurrency)
    index = ViewIndex(j.out, tmp / "d" / "view.sqlite")
    try:
        cycles = []
        for cycle in range(3):
            j.kill9(max(1, calls // 6))  # a sixth of the whole run's calls each time
            shown, rows = viewer_rows(index), j.row_keys()
            cycles.append({"scores_rows": len(rows), "viewer_rows": len(shown), "same_rows": shown == rows,
                           **_money(j)})
        done = j.run()
        shown, rows = viewer_rows(index), j.row_keys()
        return {"cycles": cycles, "finish": {"exit": done.returncode, "scores_rows": len(rows),
                                             "viewer_rows": len(shown), "same_rows": shown == rows, **_money(j)}}
    finally:
        index.close()
        mock.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reports", default=str(DRB / "reports.claude-3-7-sonnet.jsonl"))
    ap.add_argument("--tasks", default=str(DRB / "tasks.jsonl"))
    ap.add_argument("--n", type=int, default=20, help="reports to score (the first N)")
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    source, reports_in = "drb", Path(args.reports)
    TASKS[0] = Path(args.tasks)
    if not reports_in.exists() or not TASKS[0].exists():
        source, reports_in = f"examples (not found: {reports_in})", ROOT / "examples" / "reports.claude-3-7-sonnet.jsonl"
        TASKS[0] = ROOT / "examples" / "tasks.jsonl"
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        reports = tmp / "reports.jsonl"
        with open(reports_in, encoding="utf-8") as f:
            reports.write_text("".join(line for _, line in zip(range(args.n), f)), encoding="utf-8")
        ref = reference(tmp, reports, args.concurrency)
        full = ref["billed_usd"]
        result = {
            "benchmark": "ledger",
            "workload": {"data": source, "reports": sum(1 for _ in open(reports)), "methods": "quality,redundancy",
                         "prices_usd_per_mtok": {"input": 2.0, "output": 8.0}, "mock_latency_s": LATENCY,
                         "concurrency": args.concurrency},
            "reference_run": ref,
            "a_c_budget_reruns_ctrl_c_finish": budget_and_ctrl_c(tmp, reports, args.concurrency, full, ref["calls"]),
            "b_no_interruption_in_flight": no_interruption(tmp, reports, args.concurrency, full),
            "d_kill9_cycles": kill_cycles(tmp, reports, args.concurrency, ref["calls"]),
            "machine": machine(),
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
