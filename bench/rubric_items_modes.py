"""``rubric-items``: one call per item against N items per call, on the shipped example set
(20 tasks, 231 items, 40 reports: examples/rubric_tasks.jsonl), against the mock judge with
its OpenAI-like prefix cache, so the figures are what a provider with prompt caching bills.

Per mode: calls, input tokens, the share of them served from the prompt cache, billed
cost and the cost without the cache, at gpt-4.1's price ratios; and wall time at the
mock's latency. The trade-off docs/custom-methods.md describes, measured in one run.

    .venv/bin/python -m bench.rubric_items_modes
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import orjson

from bench.machine import machine
from bench.timing import timed_run
from drscore.api import JudgeConfig, RunConfig, run_async
from drscore.judge.mock.server import MockConfig, MockServerProcess

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PRICE = {"input": 2.0, "output": 8.0, "cached_input": 0.5}  # gpt-4.1's ratios
REPORTS = ["reports.claude-3-7-sonnet.jsonl", "reports.claude-first-half.jsonl", "rubric_reports.jsonl"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", default="1,4,13", help="items per call, comma-separated")
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=32)
    args = ap.parse_args()
    out: dict = {"benchmark": "rubric_items_modes", "mock_latency_s": args.latency, "prices_per_mtok": PRICE,
                 "modes": {}}
    with tempfile.TemporaryDirectory() as d, \
            MockServerProcess(MockConfig(prefix_cache=True, latency=args.latency)) as mock:
        tmp = Path(d)
        prices = tmp / "prices.json"
        prices.write_text(json.dumps({"mock-judge": PRICE}))
        for per_call in (int(x) for x in args.modes.split(",")):
            mock.reset()  # an empty prefix cache: every mode starts cold
            judge = JudgeConfig(url=mock.url, model="mock-judge", concurrency=args.concurrency, prices=str(prices),
                                cache_dir=str(tmp / f"cache-{per_call}"))
            cfg = RunConfig(methods=["rubric-items"], tasks=str(EXAMPLES / "rubric_tasks.jsonl"),
                            reports=[str(EXAMPLES / r) for r in REPORTS], judge=judge,
                            method_options={"rubric_items_per_call": per_call})
            wall, summary = run_async(timed_run(cfg))
            t = summary["totals"]
            out["modes"][f"{per_call}_per_call"] = {
                "items": t["items"], "items_failed": t["items_failed"], "calls": t["calls"],
                "input_tokens": t["input_tokens"], "output_tokens": t["output_tokens"],
                "cached_input_tokens": t["cached_input_tokens"],
                "cached_share": round(t["cached_input_tokens"] / max(1, t["input_tokens"]), 4),
                "billed_usd": t["cost_usd"], "uncached_usd": t["cost_usd_uncached"], "wall_s": round(wall, 2)}
    one = out["modes"].get("1_per_call")
    if one:
        out["relative_to_one_per_call"] = {
            k: {"calls": round(v["calls"] / one["calls"], 3), "input_tokens": round(v["input_tokens"]
                                                                                  / one["input_tokens"], 3),
                "billed_usd": round(v["billed_usd"] / one["billed_usd"], 3)}
            for k, v in out["modes"].items()}
    out["machine"] = machine()
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
