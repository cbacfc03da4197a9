"""Rigorous Bench and task-tool benchmark (issue 4).

1. Parsing: all 214 published bundles (2,852 rubric items) and the 48 general rubrics.
2. Leakage similarity: bit-parallel LCS versus the textbook O(n*m) dynamic programme on
   the same pair of strings, and the full three-metric score of a 2,000-character pair.
3. The ``rigorous`` method through the whole engine against a zero-latency mock judge:
   one short report for each of the 214 bundles (about 12,000 judge calls), judge
   calls per second, and the same with the offline judge.

    .venv/bin/python -m bench.rigorous [--bundles 214 --concurrency 64]
"""
from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import orjson

from bench.machine import machine
from bench.shared_data import RIGOROUS as DATA, require_data
from bench.timing import timed_run
from drscore.api import JudgeConfig, RunConfig, run_async
from drscore.engine.methods.tasks import leakage
from drscore.engine.methods.rigorous.rubrics import load_bundles, load_general_rubrics
from drscore.judge.mock.server import MockConfig, MockServerProcess


def _lcs_dp(a: str, b: str) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def _best_ms(fn, *args, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def _workload(tmp: Path, n: int) -> tuple[Path, Path, Path]:
    """The first ``n`` bundles, their task file, and one short report per task that
    mentions its anchor keywords and cites its first trusted link."""
    lines = (DATA / "bundles.jsonl").read_bytes().splitlines()[:n]
    bundles = [orjson.loads(line) for line in lines]
    paths = tmp / "bundles.jsonl", tmp / "tasks.jsonl", tmp / "reports.jsonl"
    paths[0].write_bytes(b"\n".join(lines) + b"\n")
    paths[1].write_bytes(b"".join(orjson.dumps({"task_id": b["uid"], "prompt": b["query"]}) + b"\n"
                                  for b in bundles))
    with open(paths[2], "wb") as f:
        for b in bundles:
            text = (f"# Report on {b['uid']}\n\n{b['query']}\n\n## Findings\n\n" + ", ".join(b["fak"])
                    + " are central here [1].\n\n## References\n[1] " + (b["tsl"] or ["https://example.org"])[0] + "\n")
            f.write(orjson.dumps({"task_id": b["uid"], "agent": "bench", "report": text}) + b"\n")
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundles", type=int, default=214, help="how many bundles to score (default all 214)")
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()
    require_data("rigorous", DATA / "bundles.jsonl", DATA / "general_rubrics.json")

    t0 = time.perf_counter()
    bs = load_bundles(DATA / "bundles.jsonl")
    grr = load_general_rubrics(DATA / "general_rubrics.json")
    parse_ms = (time.perf_counter() - t0) * 1000
    n_items = sum(len(b.qsr) for b in bs.bundles.values())

    rng = random.Random(0)
    alphabet = "abcdefghij klmnop"
    a = "".join(rng.choice(alphabet) for _ in range(2000))
    b = "".join(rng.choice(alphabet) for _ in range(2000))
    assert leakage.lcs_length(a[:500], b[:500]) == _lcs_dp(a[:500], b[:500])
    lcs_ms = _best_ms(leakage.lcs_length, a, b)
    dp_ms = _best_ms(_lcs_dp, a, b, repeat=1)
    score_ms = _best_ms(leakage.leakage_scores, a, b)

    with tempfile.TemporaryDirectory() as tmp, MockServerProcess(MockConfig()) as mock:
        bundles, tasks, reports = _workload(Path(tmp), args.bundles)
        opts = {"bundles": str(bundles)}
        cfg = RunConfig(methods=["rigorous"], reports=[str(reports)], tasks=str(tasks), out=str(Path(tmp) / "run"),
                        method_options=opts,
                        judge=JudgeConfig(url=mock.url, model="mock", concurrency=args.concurrency,
                                          cache_dir=str(Path(tmp) / "cache")))
        mock_s, mock_summary = run_async(timed_run(cfg))
        mock_calls = mock.stats()["ok"]
        offline_cfg = RunConfig(methods=["rigorous"], reports=[str(reports)], tasks=str(tasks),
                                out=str(Path(tmp) / "run_offline"), method_options=opts,
                                judge=JudgeConfig(no_cache=True))
        offline_s, offline_summary = run_async(timed_run(offline_cfg))

    print(orjson.dumps({
        "benchmark": "rigorous",
        "bundles_parsed": len(bs.bundles), "qsr_items_parsed": n_items, "general_rubrics_parsed": len(grr),
        "parse_all_ms": round(parse_ms, 1),
        "lcs_2000x2000_bitparallel_ms": round(lcs_ms, 2),
        "lcs_2000x2000_dp_ms": round(dp_ms, 1),
        "lcs_speedup": round(dp_ms / lcs_ms, 1),
        "leakage_scores_2000_chars_ms": round(score_ms, 2),
        "reports_scored": mock_summary["totals"]["items"],
        "reports_failed": mock_summary["totals"]["items_failed"],
        "mock_judge_calls": mock_calls,
        "mock_judge_seconds": round(mock_s, 2),
        "mock_judge_calls_per_s": round(mock_calls / mock_s, 1),
        "offline_judge_seconds": round(offline_s, 2),
        "offline_reports_failed": offline_summary["totals"]["items_failed"],
        "concurrency": args.concurrency,
        "machine": machine(),
    }, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
