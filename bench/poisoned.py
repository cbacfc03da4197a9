"""Requests that can never succeed (issue 16, part 5): does the run still finish?

100 reports (DeepResearch Bench, claude-3-7-sonnet) scored with quality + redundancy
against the mock's ``vllm`` profile, where 5% of request bodies (chosen by a hash of the
body) are answered 503 every time (``--poison-rate 0.05``) and the model's context window
(``--context-window``, set at the 95th percentile of the reports' lengths by the mock's
token count) refuses the longest prompts with vLLM's "maximum context length is N tokens"
400. The model name is not in the window table, so the engine knows the window only from
that first 400; later oversized prompts are refused before they are sent.

Reported: the run's state and exit code (the CLI's rule: 3 when items failed, 1 on an
endpoint fault), rows scored, items failed per failure kind, requests refused before
sending, and what the server saw.

    .venv/bin/python -m bench.poisoned [--poison-rate 0.05 --window-quantile 0.95]
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import orjson

from bench.machine import machine
from bench.shared_data import DRB as DATA, require_data
from bench.timing import timed_run
from drscore.api import JudgeConfig, RunConfig
from drscore.judge.mock.completions import count_tokens
from drscore.judge.mock.server import MockConfig, MockServerProcess


def _text(obj: dict) -> str:
    return obj.get("report") or obj.get("article") or ""  # drscore or DeepResearch Bench format


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reports", default=str(DATA / "reports.claude-3-7-sonnet.jsonl"))
    ap.add_argument("--tasks", default=str(DATA / "tasks.jsonl"))
    ap.add_argument("--poison-rate", type=float, default=0.05)
    ap.add_argument("--window-quantile", type=float, default=0.95)
    ap.add_argument("--methods", default="quality,redundancy")
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    require_data("poisoned", args.reports, args.tasks)
    lengths = sorted(count_tokens(_text(orjson.loads(line))) for line in Path(args.reports).read_bytes().splitlines()
                     if line.strip())
    window = lengths[min(len(lengths) - 1, int(len(lengths) * args.window_quantile))]
    cfg = MockConfig(profile="vllm", poison_rate=args.poison_rate, context_window=window, latency=0.02, seed=5)
    with tempfile.TemporaryDirectory() as tmp, MockServerProcess(cfg) as mock:
        out = Path(tmp) / "run"
        judge = JudgeConfig(url=mock.url, model="local-judge", concurrency=args.concurrency, no_cache=True)
        run = RunConfig(methods=args.methods.split(","), reports=[args.reports], tasks=args.tasks, out=str(out),
                        judge=judge)
        wall, summary = asyncio.run(timed_run(run))
        s = mock.stats()
        state = orjson.loads((out / "state.json").read_bytes())
    t, stop = summary["totals"], summary.get("stopped")
    exit_code = 1 if stop and stop.get("fatal") else 3 if stop or t["items_failed"] else 0
    result = {
        "benchmark": "poisoned", "profile": "vllm", "poison_rate": args.poison_rate,
        "context_window_tokens": window, "window_quantile": args.window_quantile, "methods": args.methods,
        "reports": Path(args.reports).name,
        "state": state.get("state"), "exit_code": exit_code, "stopped": stop,
        "items": t["items"], "items_scored": t["items"] - t["items_failed"] - t["items_skipped"],
        "items_failed": t["items_failed"], "failure_reasons": t["failure_reasons"],
        "request_faults": t["request_faults"], "refused_over_window_before_sending": t["refused_over_window"],
        "retries": t["retries"], "calls_answered": t["calls"],
        "server": {"requests": s["requests"], "ok": s["ok"], "poisoned_503": s["poisoned"],
                   "context_errors_400": s["context_errors"]},
        "wall_s": round(wall, 2), "machine": machine(),
    }
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
